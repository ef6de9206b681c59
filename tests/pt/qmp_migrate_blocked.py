#!/usr/bin/env python3
"""Asks a running QEMU guest with a passthrough (ivshmem-doorbell) device to
migrate (tests/pt/ptnet.sh) and expects QEMU to refuse, saying why. A
passthrough port's rings, CSB and buffers are in memory the daemon gives the
guest through its ivshmem server; QEMU's ivshmem device in its default
"peer" mode (master=off) adds a migration blocker, so a move cannot silently
leave the guest with memory nobody serves on the destination.

    qmp_migrate_blocked.py --qmp QMP_SOCKET [--timeout SECONDS]

Prints QEMU's reason. Exit status 0 when QEMU refused with a reason naming
ivshmem; 1 with a sentence on stderr otherwise (a migration QEMU started is
cancelled).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from qmp import Qmp  # noqa: E402  (tests/qmp.py)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qmp", required=True, help="QEMU's QMP socket (-qmp unix:PATH,server=on,wait=off)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for each QMP answer")
    a = ap.parse_args()
    q = Qmp(a.qmp, a.timeout)
    try:
        # Nowhere to go: QEMU must refuse before it opens the destination.
        q.cmd("migrate", uri="exec:cat >/dev/null")
    except RuntimeError as e:
        reason = str(e)
        print(reason)
        if "ivshmem" in reason:
            return 0
        print(f"QEMU refused the migration, but not for the ivshmem device: {reason}", file=sys.stderr)
        return 1
    q.cmd("migrate_cancel")
    print("QEMU started migrating a guest with a passthrough device: no blocker", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
