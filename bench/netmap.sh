#!/usr/bin/env bash
# bench/netmap.sh - an unmodified netmap program on ringswitch: a C sender
# written against netmap's API (crates/netmap-compat/tests/c/nm_raw.c, built
# with no link to ringswitch) run under LD_PRELOAD=libringswitch_netmap.so,
# beside ringswitch's own pkt-gen, each sending 60-byte frames over a pipe to
# `ringswitch pkt-gen -f rx`, in the same run.
#
#   bench/netmap.sh [--quick] [--out DIR]
#
# Reports the receiver's rate (frames from first to last, as pkt-gen rx
# measures it) for each sender, the median of several runs with min and
# max, and the ratio. Writes DIR/NETMAP-REPORT.md (default bench/results)
# and prints it. The goal from issue 5: the preloaded sender at 90% or more
# of pkt-gen's rate.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/results
RUNS=7 COUNT=30000000
while (($# > 0)); do
	case $1 in
	--quick) RUNS=3 COUNT=10000000 ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/netmap.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$OUT"

echo "building ringswitch and libringswitch_netmap (release)..." >&2
cargo build --release -q -p ringswitch-cli -p ringswitch-netmap
BIN=$ROOT/target/release/ringswitch
LIB=$ROOT/target/release/libringswitch_netmap.so
WORK=$(mktemp -d /tmp/rs-bench-netmap.XXXXXX)
SOCK=$WORK/rs.sock
DAEMON=
cleanup() {
	[[ -n $DAEMON ]] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

cc -O2 -I "$ROOT/include/netmap" -o "$WORK/nm_raw" "$ROOT/crates/netmap-compat/tests/c/nm_raw.c"
if ldd "$WORK/nm_raw" | grep -q ringswitch; then
	echo "nm_raw links ringswitch: it should be a plain netmap binary" >&2
	exit 1
fi
RINGSWITCH_LOG=warn "$BIN" serve --socket "$SOCK" 2>"$WORK/daemon.err" &
DAEMON=$!
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.05; done
[[ -S $SOCK ]] || { echo "the daemon did not start: $(cat "$WORK/daemon.err")" >&2; exit 1; }

# One run: sender kind, pipe id. Prints the receiver's pps.
run_one() {
	local kind=$1 id=$2 rx
	"$BIN" --socket "$SOCK" pkt-gen -f rx -i "b}$id" -n "$COUNT" -T 0 --json >"$WORK/rx-$id.out" 2>"$WORK/rx-$id.err" &
	rx=$!
	sleep 0.3
	case $kind in
	pktgen) "$BIN" --socket "$SOCK" pkt-gen -f tx -i "b{$id" -n "$COUNT" -l 60 -T 0 >"$WORK/tx-$id.out" 2>&1 ;;
	preload) RINGSWITCH_SOCKET=$SOCK LD_PRELOAD=$LIB "$WORK/nm_raw" tx "b{$id" "$COUNT" 60 poll >"$WORK/tx-$id.out" 2>&1 ;;
	esac
	wait "$rx"
	tail -1 "$WORK/rx-$id.out" | python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["pps"])'
}

declare -A RATES=([pktgen]="" [preload]="")
for r in $(seq "$RUNS"); do
	for kind in pktgen preload; do
		pps=$(run_one "$kind" "$kind$r")
		RATES[$kind]+="$pps "
		printf 'run %d/%d %-8s %6.2f Mpps\n' "$r" "$RUNS" "$kind" "$(echo "$pps / 1000000" | bc -l)" >&2
	done
done

stats() { # median min max in Mpps
	tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END {printf "%.2f %.2f %.2f", v[int((NR+1)/2)]/1e6, v[1]/1e6, v[NR]/1e6}'
}
read -r pm pmin pmax <<<"$(stats "${RATES[pktgen]}")"
read -r lm lmin lmax <<<"$(stats "${RATES[preload]}")"
ratio=$(echo "scale=1; 100 * $lm / $pm" | bc -l)
verdict=$(echo "$ratio >= 90" | bc -l | sed 's/1/meets/; s/0/misses/')

{
	echo "# An unmodified netmap program on ringswitch"
	echo
	echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -r), $("$BIN" --version 2>/dev/null || echo ringswitch)."
	echo "Command: \`bench/netmap.sh$([[ $RUNS == 3 ]] && echo ' --quick')\`; $RUNS runs of $COUNT 60-byte frames each, sender then receiver on a fresh pipe, receiver \`ringswitch pkt-gen -f rx\`, blocking waits (no busy-polling)."
	echo
	echo "| sender over a pipe | median Mpps | min | max |"
	echo "|---|---:|---:|---:|"
	echo "| ringswitch pkt-gen -f tx | $pm | $pmin | $pmax |"
	echo "| nm_raw.c (netmap API, plain binary) under LD_PRELOAD | $lm | $lmin | $lmax |"
	echo
	echo "The preloaded netmap sender reaches **$ratio%** of pkt-gen's rate ($verdict the 90% goal)."
	echo "nm_raw fills every free slot, sets head and cur, and calls poll(POLLOUT); the library's poll syncs through the CSB and returns without a system call while the pipe has room."
} | tee "$OUT/NETMAP-REPORT.md"
