#!/usr/bin/env python3
"""Live-migrates a running QEMU guest to a QEMU started with `-incoming URI`
(tests/vm/run.sh, scenarios migrate and migrate-noannounce), and reports
how it went:

    migrate.py --qmp SOURCE_QMP_SOCKET --uri unix:PATH [--timeout SECONDS]
               [--paused --dest-qmp DEST_QMP_SOCKET] [--bandwidth MIB_S]

prints one line

    MIGRATE status=completed total_ms=N downtime_ms=N setup_ms=N ram_mb=N

(QEMU's own figures from query-migrate: downtime is the time the guest was
stopped, between its last instruction on the source and its first on the
destination) and exits 0. With --paused the guest is stopped first
(`stop`), moved, and continued on the destination (`cont`): downtime_ms is
then the whole time it was stopped, measured here. QEMU 7.2 under TCG
loses pages the guest's CPU dirties while a live migration runs (a plain
`-netdev socket` guest shows it too: its memory differs after the move),
so the tests move a stopped guest; live moves are bench/migrate.sh's.
It exits 1 with a sentence on stderr when QEMU
refuses the migration (a blocker: it names the reason), it fails, or it is
not done within the timeout. Progress goes to stderr once a second.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from qmp import Qmp  # noqa: E402  (tests/qmp.py)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qmp", required=True, help="the source QEMU's QMP socket")
    ap.add_argument("--uri", required=True, help="where the destination QEMU listens (its -incoming)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds the migration may take")
    ap.add_argument("--paused", action="store_true",
                    help="stop the guest first and continue it on the destination (needs --dest-qmp)")
    ap.add_argument("--dest-qmp", help="the destination QEMU's QMP socket")
    ap.add_argument("--bandwidth", type=int, default=1024,
                    help="MiB/s the migration may use (lower: more passes over the guest's memory)")
    a = ap.parse_args()
    try:
        if a.paused and not a.dest_qmp:
            raise RuntimeError("--paused needs --dest-qmp, to continue the guest there")
        q = Qmp(a.qmp, 10)
        stopped = time.monotonic()
        if a.paused:
            q.cmd("stop")
        # By default the guest's pages move at full speed (QEMU's own limit
        # is 32 MiB/s); the downtime QEMU aims for stays its default (300 ms).
        q.cmd("migrate-set-parameters", **{"max-bandwidth": a.bandwidth << 20})
        q.cmd("migrate", uri=a.uri)
        deadline = time.monotonic() + a.timeout
        last = 0.0
        while True:
            info = q.cmd("query-migrate")
            status = info.get("status", "none")
            if status == "completed":
                break
            if status in ("failed", "cancelled"):
                raise RuntimeError(f"the migration {status}: {info.get('error-desc', 'QEMU gave no reason')}")
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(f"the migration is still {status} after {a.timeout:.0f} s: {info.get('ram', {})}")
            if now - last >= 1:
                ram = info.get("ram", {})
                print(f"migrate: {status}, {ram.get('transferred', 0) >> 20} MiB sent, "
                      f"{ram.get('remaining', 0) >> 20} MiB left", file=sys.stderr)
                last = now
            time.sleep(0.05)
        downtime = info.get("downtime", -1)
        if a.paused:
            d = Qmp(a.dest_qmp, 10)
            deadline = time.monotonic() + 30
            while d.cmd("query-status").get("status") == "inmigrate":
                if time.monotonic() > deadline:
                    raise RuntimeError("the destination still loads the guest 30 s after the source finished")
                time.sleep(0.01)
            d.cmd("cont")
            downtime = int((time.monotonic() - stopped) * 1000)
    except (OSError, RuntimeError) as e:
        print(f"migrate.py: {e}", file=sys.stderr)
        return 1
    ram = info.get("ram", {})
    print(f"MIGRATE status=completed total_ms={info.get('total-time', -1)} "
          f"downtime_ms={downtime} setup_ms={info.get('setup-time', -1)} "
          f"ram_mb={ram.get('transferred', 0) >> 20}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
