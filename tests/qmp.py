"""A QMP client for the test scripts that drive QEMU (tests/pt/qmp_readd.py,
tests/vm/migrate.py): one JSON command at a time over QEMU's
`-qmp unix:PATH,server=on,wait=off` socket, the events that come meanwhile
kept in `events`. QEMU's pid comes from the socket's peer credentials.
"""
import json
import os
import socket
import struct
import time


class Qmp:
    def __init__(self, path, timeout):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        creds = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        self.pid = struct.unpack("3i", creds)[0]
        self.file = self.sock.makefile("rw")
        self.events = []
        self.recv()  # the greeting
        self.cmd("qmp_capabilities")

    def recv(self):
        line = self.file.readline()
        if not line:
            raise RuntimeError("QEMU closed its QMP socket")
        return json.loads(line)

    def cmd(self, name, **args):
        self.file.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.file.flush()
        while True:
            m = self.recv()
            if "error" in m:
                raise RuntimeError(f"QEMU refused {name}: {m['error'].get('desc')}")
            if "return" in m:
                return m["return"]
            self.events.append(m)

    def wait_event(self, event, device, deadline):
        while time.monotonic() < deadline:
            for m in self.events:
                if m.get("event") == event and m.get("data", {}).get("device") == device:
                    return
            self.events.append(self.recv())
        raise RuntimeError(f"no {event} for {device} from QEMU: did the guest eject the device?")

    def fds(self):
        return {int(n) for n in os.listdir(f"/proc/{self.pid}/fd")}
