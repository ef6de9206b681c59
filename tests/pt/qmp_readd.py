#!/usr/bin/env python3
"""Gives a running QEMU guest its passthrough device again after the daemon
came back (tests/pt/ptnet.sh): over QMP, removes the ivshmem-doorbell device
(the guest ejects it), replaces its chardev with a fresh connection to the
port's socket, and adds the device again. The guest's driver then binds a new
device on the port's new memory.

    qmp_readd.py --qmp QMP_SOCKET --device ID --chardev ID --server PORT_SOCKET
                 [--vectors N] [--timeout SECONDS]

QEMU's ivshmem device, when KVM's irqfd is not available (TCG, as here),
watches the eventfds of its own interrupt vectors in the main loop, and its
unplug closes those eventfds without removing the watches (QEMU 7.2,
hw/misc/ivshmem.c: watch_vector_notifier has no counterpart in
ivshmem_exit). The next file QEMU opens under one of those numbers is then
polled with the freed device's handler, and QEMU crashes as soon as it is
readable (the new device's shared memory is, always). So between the unplug
and the new device, this plugs every descriptor number the unplug freed with
a chardev on a FIFO that nothing writes to (never readable); the new
device's descriptors get fresh numbers. The plugs stay for QEMU's life: a
few descriptors per re-add.

Exit status 0 once QEMU accepted the new device; 1 with a sentence on
stderr otherwise.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from qmp import Qmp  # noqa: E402  (tests/qmp.py)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qmp", required=True, help="QEMU's QMP socket (-qmp unix:PATH,server=on,wait=off)")
    ap.add_argument("--device", required=True, help="the ivshmem-doorbell device's id")
    ap.add_argument("--chardev", required=True, help="its chardev's id")
    ap.add_argument("--server", required=True, help="the passthrough port's socket")
    ap.add_argument("--vectors", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120, help="seconds the guest has to eject the device")
    a = ap.parse_args()
    try:
        q = Qmp(a.qmp, a.timeout)
        before = q.fds()
        q.cmd("device_del", id=a.device)
        q.wait_event("DEVICE_DELETED", a.device, time.monotonic() + a.timeout)
        q.cmd("chardev-remove", id=a.chardev)
        freed = sorted(before - q.fds())
        fifo = os.path.join(tempfile.mkdtemp(prefix="rs-qmp-plug-"), "never-written")
        os.mkfifo(fifo, 0o600)
        stamp = f"{os.getpid()}-{int(time.monotonic() * 1000)}"
        plugs = 0
        # Each plug takes the lowest free number: add them until every
        # freed number is taken (older holes below them take some too).
        while not set(freed) <= q.fds():
            if plugs >= 1024:
                raise RuntimeError(f"descriptor numbers {freed} still free after {plugs} plugs")
            q.cmd("chardev-add", id=f"rs-plug-{stamp}-{plugs}",
                  backend={"type": "pipe", "data": {"device": fifo}})
            plugs += 1
        # QEMU holds the plugs open: their path can go.
        os.unlink(fifo)
        os.rmdir(os.path.dirname(fifo))
        q.cmd("chardev-add", id=a.chardev,
              backend={"type": "socket", "data": {"addr": {"type": "unix", "data": {"path": a.server}},
                                                  "server": False}})
        q.cmd("device_add", driver="ivshmem-doorbell", id=a.device, chardev=a.chardev, vectors=a.vectors)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"qmp_readd: {e}", file=sys.stderr)
        return 1
    print(f"qmp_readd: {a.device} added again on {a.server} ({len(freed)} freed descriptor numbers, {plugs} plugs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
