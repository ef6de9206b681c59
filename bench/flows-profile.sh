#!/usr/bin/env bash
# One run of the flows section's learning bridge and 1,000-flow switch,
# placed as bench/compare places them (the daemon's one worker and the
# sender on CPU 1, the receiver alone on CPU 0), with where the daemon's
# CPU goes: for looking into issue 17's flows ÷ learning ratio without the
# whole comparison.
#
#   sudo bench/flows-profile.sh [--len 60] [--seconds 3] [--runs 1] [--perf] [--sender-cpu 1]
#
# Per run and switch: the receiver's rate, the daemon's CPU time per frame
# received and the sender's (CPU 1 is shared by the two, so their sum sets
# the rate); then flows ÷ learning. --perf records the daemon with
# `perf record -e cpu-clock` (this VM has no PMU) and prints its top
# symbols: time spent switching tasks shows as the kernel's
# _raw_spin_unlock_irq and finish_task_switch (perf's own work slows such
# runs: read their profiles, not their rates). --sender-cpu 0 puts the
# sender beside the receiver instead, leaving the worker a CPU of its own
# (the rates then swing with how those two share theirs). The flows are
# the section's (bench/README.md, "Flows"), loaded with ovs-ofctl; the
# binaries are target/release's (RINGSWITCH_BIN and RINGSWITCH_BENCH_BIN
# to change).
set -euo pipefail
cd "$(dirname "$0")/.."
len=60 secs=3 runs=1 perf= txcpu=1
while [ $# -gt 0 ]; do
    case $1 in
        --len) len=$2; shift 2 ;;
        --seconds) secs=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --perf) perf=1; shift ;;
        --sender-cpu) txcpu=$2; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "flows-profile: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bin=${RINGSWITCH_BIN:-target/release/ringswitch}
bench=${RINGSWITCH_BENCH_BIN:-target/release/ringswitch-bench}
for b in "$bin" "$bench"; do
    [ -x "$b" ] || { echo "flows-profile: no $b: run cargo build --release first" >&2; exit 1; }
done
command -v ovs-ofctl >/dev/null || { echo "flows-profile: needs ovs-ofctl (apt-get install openvswitch-common)" >&2; exit 1; }
[ -z "$perf" ] || command -v perf >/dev/null || { echo "flows-profile: --perf needs perf (apt-get install linux-perf)" >&2; exit 1; }
work=$(mktemp -d /tmp/flows-profile-XXXXXX)
daemon=
cleanup() { [ -z "$daemon" ] || kill "$daemon" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The section's 1,000 flows and the pkt-gen arguments of the 5-tuples
# they match, from the bench itself.
"$bench" flows --port 1 >"$work/flows-1000.txt"
read -r -a tuples <<<"$("$bench" flows --tuples)"

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r), guest_halt_poll_ns $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo n/a), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "frames of $len bytes, 1,000 UDP 5-tuples, $secs s per run"

# One run on switch $1 (valel: learning bridge; valef: the 1,000 flows);
# sets rate (Mpps).
run() {
    local sw=$1 r=$2 sock=$work/d.sock
    rm -f "$sock"
    "$bin" serve --socket "$sock" --workers 1 --worker-cpus 1 </dev/null >"$work/daemon.log" 2>&1 &
    daemon=$!
    for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || { echo "flows-profile: the daemon did not start:" >&2; cat "$work/daemon.log" >&2; exit 1; }
    if [ "$sw" = valef ]; then
        "$bin" --socket "$sock" ctl switch add valef --openflow-listen "unix:$work/of" >/dev/null
    fi
    "$bin" --socket "$sock" ctl port add "$sw:rx" >/dev/null
    "$bin" --socket "$sock" ctl port add "$sw:tx" >/dev/null
    if [ "$sw" = valef ]; then
        ovs-ofctl -O OpenFlow13 add-flows "unix:$work/of" "$work/flows-1000.txt"
    fi
    taskset -c 0 "$bin" --socket "$sock" pkt-gen -i "$sw:rx" -f rx -b 512 --duration $((secs + 60)) -T 0 --json \
        >"$work/rx.out" 2>&1 &
    local rx=$!
    # The receiver has its port open before the sender starts.
    for _ in $(seq 600); do
        "$bin" --socket "$sock" ctl port list --json | python3 -c "
import json, sys
sys.exit(0 if any(p['name'] == '$sw:rx' and p.get('open') for p in json.load(sys.stdin)) else 1)" && break
        sleep 0.1
    done
    local prec=
    if [ -n "$perf" ]; then
        perf record -q -e cpu-clock -p "$daemon" -o "$work/$sw-$r.perf" -- sleep "$secs" >/dev/null 2>&1 &
        prec=$!
    fi
    local t0 d0 d1 t1
    t0=$(date +%s.%N) d0=$(ticks "$daemon")
    taskset -c "$txcpu" "$bin" --socket "$sock" pkt-gen -i "$sw:tx" -f tx -l "$len" -b 512 \
        "${tuples[@]}" --duration "$secs" -T 0 --json >"$work/tx.out" 2>&1
    d1=$(ticks "$daemon") t1=$(date +%s.%N)
    [ -z "$prec" ] || wait "$prec" || true
    # The frames in flight reach the receiver, which then stops.
    sleep 0.3
    kill -INT "$rx"; wait "$rx" || true
    kill "$daemon"; wait "$daemon" 2>/dev/null || true
    daemon=
    python3 - "$sw" "$r" "$work/rx.out" "$work/tx.out" "$t0" "$t1" "$d0" "$d1" "$hz" >"$work/row" <<'PY'
import json, sys
sw, r, rxf, txf, t0, t1, d0, d1, hz = sys.argv[1:]
def report(f):
    for line in open(f):
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"flows-profile: no report from pkt-gen in {f}: {open(f).read()}")
rx, tx = report(rxf), report(txf)
secs = float(t1) - float(t0)
got = rx.get("packets", 0)
daemon_s = (int(d1) - int(d0)) / int(hz)
name = {"valel": "learning bridge", "valef": "1,000 flows"}[sw]
per = lambda s: s * 1e9 / got if got else float("nan")
print(f"{got / secs / 1e6:.3f}")
print(f"  run {r}, {name:<15}: {got / secs / 1e6:7.3f} Mpps received; per frame: daemon {per(daemon_s):6.1f} ns, "
      f"sender {per(tx.get('cpu_seconds', 0.0)):6.1f} ns of CPU", file=sys.stderr)
PY
    rate=$(head -1 "$work/row")
    if [ -n "$perf" ]; then
        perf report -i "$work/$sw-$r.perf" --no-children --sort sym --stdio 2>/dev/null \
            | grep -E '^ +[0-9]' | head -8 | sed 's/^/      /' || true
    fi
}

for r in $(seq "$runs"); do
    run valel "$r"; l=$rate
    run valef "$r"; f=$rate
    python3 -c "print(f'  run $r: flows ÷ learning bridge = {100 * $f / $l:.1f} %  (issue 17: at least 80 %)')"
done
