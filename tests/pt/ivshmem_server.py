#!/usr/bin/env python3
"""A test-only ivshmem server standing in for the ringswitch daemon (tests/pt).

It serves QEMU's ivshmem-doorbell protocol (ivshmem-spec.txt in
qemu-system-data) on one or more unix sockets, each with its own region:

    ivshmem_server.py --ctl FIFO [--size-mib N] --port SOCK:MODE [--port SOCK:MODE ...]

MODE is the region header written into that port's memfd:

    good        a valid header: 1 ring pair, 64 slots, 2048-byte buffers,
                size = the memfd size (--size-mib, a power of two, default 1)
    badmagic    "BADMAGIC" instead of "RNGSWTCH"
    badversion  version 3 (this code's is 2)
    oversize    size = twice the memfd (the BAR)

Peer ids as the daemon assigns them for a switch port: the server is peer 0,
the (single) QEMU that connects is peer 1. Each QEMU gets, in order: version
0, its id 1, -1 with the memfd, peer 0's eventfds (one message per vector),
then its own eventfds (one message per vector).

Everything it sees and does is logged on stdout as "SERVER ..." lines:
"KICK port=P peer=0 vector=V count=N" when the guest's doorbell made one of
peer 0's eventfds readable. Commands, one per line on the FIFO --ctl:

    irq P V         write the guest's eventfd for vector V of port P
    poke P OFS TEXT write TEXT into port P's region at OFS
    peek P OFS LEN  log LEN bytes of port P's region at OFS
    quit            exit
"""

import argparse
import os
import selectors
import socket
import struct
import sys
import time

HEADER = struct.Struct("<8sIIIIIIIIQQ2Q2Q")
assert HEADER.size == 88

SERVER_ID = 0
GUEST_ID = 1

T0 = time.monotonic()


def log(msg):
    print(f"SERVER {time.monotonic() - T0:7.3f} {msg}", flush=True)


def region_header(mode, size):
    """A header with the layout crates/ring/src/layout.rs gives 1+1 rings of 64 slots."""
    buf_size = 2048
    nifp0 = 4096  # after the 4 KiB header page
    csb0 = 4608  # after the nifp (512 bytes); the CSB comes before the rings
    rings0 = csb0 + 2 * 128  # one CSB entry per ring, aligned to 64
    buf_base = 8192  # rings0 + 2 * (256 + 64 * 16), aligned to a page
    assert rings0 + 2 * (256 + 64 * 16) <= buf_base
    nbufs = (size - buf_base) // buf_size
    magic = b"BADMAGIC" if mode == "badmagic" else b"RNGSWTCH"
    version = 3 if mode == "badversion" else 2
    hsize = 2 * size if mode == "oversize" else size
    return HEADER.pack(magic, version, 1, 1, 1, 64, 64, buf_size, nbufs,
                       buf_base, hsize, nifp0, 0, csb0, 0)


class Port:
    def __init__(self, index, path, mode, vectors, size):
        self.index = index
        self.size = size
        self.path = path
        self.mode = mode
        self.vectors = vectors
        self.memfd = os.memfd_create(f"rspt-test-{index}", os.MFD_CLOEXEC)
        os.ftruncate(self.memfd, size)
        os.pwrite(self.memfd, region_header(mode, size), 0)
        # The last byte, for the guest to read back through the whole BAR.
        os.pwrite(self.memfd, b"\x5a", size - 1)
        # Peer 0 (us): the guest's doorbell writes these. Peer 1 (the guest):
        # we write these, QEMU turns them into MSI-X vectors.
        self.host_efds = [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(vectors)]
        self.guest_efds = [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(vectors)]
        self.kicks = [0] * vectors
        self.client = None
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)

    def send(self, conn, value, fd=None):
        data = struct.pack("<q", value)
        anc = [] if fd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]
        conn.sendmsg([data], anc)

    def accept(self, sel):
        conn, _ = self.listener.accept()
        if self.client is not None:
            log(f"port={self.index} refusing a second client")
            conn.close()
            return
        self.client = conn
        self.send(conn, 0)  # protocol version
        self.send(conn, GUEST_ID)
        self.send(conn, -1, self.memfd)
        for efd in self.host_efds:
            self.send(conn, SERVER_ID, efd)
        for efd in self.guest_efds:
            self.send(conn, GUEST_ID, efd)
        sel.register(conn, selectors.EVENT_READ, ("client", self))
        log(f"port={self.index} mode={self.mode} client connected: sent version 0, id {GUEST_ID}, "
            f"memfd of {self.size} bytes, {self.vectors} eventfds of peer {SERVER_ID} "
            f"and {self.vectors} of peer {GUEST_ID}")

    def client_event(self, sel, conn):
        if conn.recv(64):
            return  # QEMU never sends anything; ignore
        sel.unregister(conn)
        conn.close()
        self.client = None
        log(f"port={self.index} client disconnected")

    def kick_event(self, vector):
        try:
            n = os.eventfd_read(self.host_efds[vector])
        except BlockingIOError:
            return
        self.kicks[vector] += n
        log(f"KICK port={self.index} peer={SERVER_ID} vector={vector} count={n} "
            f"total={self.kicks[vector]}")


def command(ports, line):
    words = line.split()
    if not words:
        return True
    try:
        if words[0] == "irq":
            p, v = ports[int(words[1])], int(words[2])
            os.eventfd_write(p.guest_efds[v], 1)
            log(f"IRQ port={p.index} peer={GUEST_ID} vector={v}: wrote its eventfd")
        elif words[0] == "poke":
            p, ofs, data = ports[int(words[1])], int(words[2], 0), words[3].encode()
            os.pwrite(p.memfd, data, ofs)
            log(f"POKE port={p.index} ofs={ofs:#x} bytes={words[3]!r}")
        elif words[0] == "peek":
            p, ofs, n = ports[int(words[1])], int(words[2], 0), int(words[3], 0)
            data = os.pread(p.memfd, n, ofs)
            log(f"PEEK port={p.index} ofs={ofs:#x} bytes={data.decode('ascii', 'replace')!r}")
        elif words[0] == "quit":
            log("quit")
            return False
        else:
            log(f"unknown command {line!r}")
    except (IndexError, ValueError) as e:
        log(f"bad command {line!r}: {e}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", action="append", required=True, metavar="SOCK:MODE")
    ap.add_argument("--ctl", required=True, help="FIFO of commands")
    ap.add_argument("--vectors", type=int, default=2)
    ap.add_argument("--size-mib", type=int, default=1)
    args = ap.parse_args()
    size = args.size_mib << 20
    if args.size_mib < 1 or size & (size - 1):
        sys.exit("ivshmem_server: --size-mib must be a power of two")

    sel = selectors.DefaultSelector()
    ports = []
    for i, spec in enumerate(args.port):
        path, _, mode = spec.rpartition(":")
        if mode not in ("good", "badmagic", "badversion", "oversize"):
            sys.exit(f"ivshmem_server: unknown mode {mode!r}")
        p = Port(i, path, mode, args.vectors, size)
        ports.append(p)
        sel.register(p.listener, selectors.EVENT_READ, ("listen", p))
        for v, efd in enumerate(p.host_efds):
            sel.register(efd, selectors.EVENT_READ, ("kick", p, v))
    # Read-write, so that the FIFO never reports end-of-file between writers.
    ctl = os.open(args.ctl, os.O_RDWR | os.O_NONBLOCK)
    sel.register(ctl, selectors.EVENT_READ, ("ctl",))
    log(f"ready: {len(ports)} port(s): " + " ".join(f"{p.path}:{p.mode}" for p in ports))

    pending = b""
    while True:
        for key, _ in sel.select():
            what = key.data
            if what[0] == "listen":
                what[1].accept(sel)
            elif what[0] == "client":
                what[1].client_event(sel, key.fileobj)
            elif what[0] == "kick":
                what[1].kick_event(what[2])
            elif what[0] == "ctl":
                pending += os.read(ctl, 4096)
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not command(ports, line.decode()):
                        return


if __name__ == "__main__":
    main()
