#!/usr/bin/env bash
# bench/xdp-wakeups.sh - what an interface port at a low or medium rate
# costs the daemon: CPU per frame and worker wake-ups per frame, with the
# receive coalescing of interface ports off (`serve --rx-coalesce-us 0`,
# "before") and as the daemon has it by default ("after").
#
#   sudo bench/xdp-wakeups.sh [--modes native,generic,packet]
#        [--rates 1000,10000,100000,300000] [--coalesce 0,default] [--runs 3] [--secs 5]
#   (RINGSWITCH_BIN=PATH: that ringswitch, ringswitchd beside it, unbuilt;
#   a --coalesce entry starting with -- is serve's options instead, with =
#   for spaces: --coalesce default,--idle-poll-us=0)
#
# A veth pair xwA (namespace rsxw-PID-gen) - xwB (rsxw-PID-rx). The
# generator: a ringswitch daemon in the gen namespace with xwA attached
# (--mode packet) and `pkt-gen -f tx -b 1 -R RATE` on one of its ports
# (one frame per sync: frames spread over time, not a millisecond's worth
# at once), all on CPU 1. The receiver: `serve --workers 1` in the rx
# namespace with xwB attached in each mode and a `pkt-gen -f rx` sink on
# valexw:sink (frames flood to it), all on CPU 0. A fresh receiving daemon
# per mode, setting and run; per rate, 1 s of traffic, then a window of
# --secs. Daemon CPU: the receiving serve's threads' run time
# (/proc/PID/task/*/schedstat) over the window, per frame its worker took
# (`ctl workers`: packets); wake-ups and batches from the same. Then round
# trips: 500 kernel pings (-i 0.002) from xwA's namespace to a host port
# (TAP) of the receiving switch, through xwB and the worker both ways,
# alone and beside the highest rate (frames addressed to xwA's own MAC,
# which the switch takes from xwB and drops). Medians with the smallest and largest run in brackets.

# shellcheck source-path=SCRIPTDIR
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
# shellcheck source=lib/common.sh
. "$BENCH_DIR/lib/common.sh"

MODES=native,generic,packet RATES=1000,10000,100000,300000 COALESCE=0,default RUNS=3 SECS=5
while (($# > 0)); do
	case $1 in
	--modes) MODES=${2:?--modes needs a list}; shift ;;
	--rates) RATES=${2:?--rates needs a list}; shift ;;
	--coalesce) COALESCE=${2:?--coalesce needs a list}; shift ;;
	--runs) RUNS=${2:?--runs needs a number}; shift ;;
	--secs) SECS=${2:?--secs needs a number}; shift ;;
	-h | --help)
		sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "xdp-wakeups.sh: unknown argument: $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
[[ $RUNS =~ ^[0-9]+$ && $RUNS -ge 1 ]] || { echo "xdp-wakeups.sh: --runs wants a number from 1 up" >&2; exit 2; }
[[ $SECS =~ ^[0-9]+$ && $SECS -ge 1 ]] || { echo "xdp-wakeups.sh: --secs wants a number from 1 up" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "xdp-wakeups.sh: needs root (namespaces, XDP)" >&2; exit 1; }
for t in jq taskset timeout ip; do
	command -v "$t" >/dev/null || { echo "xdp-wakeups.sh: $t is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done

# RINGSWITCH_BIN: a ringswitch binary already built (ringswitchd beside it).
if [[ -z ${RINGSWITCH_BIN:-} ]]; then
	(cd "$ROOT" && cargo build --release -q -p ringswitch-cli) || exit 1
	RINGSWITCH_BIN=$ROOT/target/release/ringswitch
fi
W=$(mktemp -d /tmp/rs-xdp-wakeups.XXXXXX)
# Private copies: a concurrent rebuild cannot swap them mid-run.
cp "$RINGSWITCH_BIN" "$(dirname "$RINGSWITCH_BIN")/ringswitchd" "$W/" || exit 1
RS=$W/ringswitch
NSG=rsxw-$$-gen NSR=rsxw-$$-rx
GS=$W/gen.sock RSK=$W/rx.sock
GEN_PID='' RX_PID='' SINK_PID=''
cleanup() {
	local p
	for p in $SINK_PID $RX_PID $GEN_PID; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$NSG" 2>/dev/null
	ip netns del "$NSR" 2>/dev/null
	rm -rf -- "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_sock() {
	local _
	for _ in $(seq 100); do [[ -S $1 ]] && return 0; sleep 0.05; done
	die "no daemon at $1 (log: $(tail -3 "$1.log" 2>/dev/null))"
}

{ ip netns add "$NSG" && ip netns add "$NSR"; } || die "cannot make namespaces"
ip link add xwA netns "$NSG" type veth peer name xwB netns "$NSR" || die "cannot make the veth pair"
ip -n "$NSG" link set xwA up && ip -n "$NSR" link set xwB up
ip -n "$NSG" addr add 10.77.0.1/24 dev xwA
MAC_A=$(ip netns exec "$NSG" cat /sys/class/net/xwA/address) || die "no MAC of xwA"

ip netns exec "$NSG" taskset -c 1 "$RS" serve --socket "$GS" --workers 1 >"$GS.log" 2>&1 &
GEN_PID=$!
wait_sock "$GS"
"$RS" --socket "$GS" ctl attach valegen xwA --mode packet >/dev/null || die "cannot attach xwA"

# The receiving daemon's threads' run time so far, ns.
run_ns() {
	local t s sum=0
	for t in /proc/"$1"/task/*/schedstat; do
		read -r s _ <"$t" 2>/dev/null || continue
		sum=$((sum + s))
	done
	echo "$sum"
}

# packets wakeups batches, summed over the receiving daemon's workers.
worker_counts() {
	"$RS" --socket "$RSK" ctl --json workers |
		jq -r '[(map(.packets) | add), (map(.wakeups) | add), (map(.batches) | add)] | @tsv'
}

# start_rx MODE SETTING: a fresh receiving daemon with xwB attached, and
# its sink.
start_rx() {
	local mode=$1 setting=$2 opt=()
	case $setting in
	default) ;;
	--*) read -ra opt <<<"${setting//=/ }" ;;
	*) opt=(--rx-coalesce-us "$setting") ;;
	esac
	rm -f "$RSK"
	ip netns exec "$NSR" taskset -c 0 "$RS" serve --socket "$RSK" --workers 1 "${opt[@]}" >"$RSK.log" 2>&1 &
	RX_PID=$!
	wait_sock "$RSK"
	"$RS" --socket "$RSK" ctl attach valexw xwB --mode "$mode" >/dev/null || die "cannot attach xwB in $mode mode"
	taskset -c 0 "$RS" --socket "$RSK" pkt-gen -i valexw:sink -f rx -T 0 >"$W/sink.log" 2>&1 &
	SINK_PID=$!
	sleep 0.5
}

stop_rx() {
	kill "$SINK_PID" "$RX_PID" 2>/dev/null
	wait "$SINK_PID" "$RX_PID" 2>/dev/null
	SINK_PID='' RX_PID=''
	# The AF_XDP socket's queue is released by a kernel worker after close.
	sleep 0.3
}

# measure MODE SETTING RUN RATE: one window; appends a row to $W/rows.tsv.
measure() {
	local mode=$1 setting=$2 run=$3 rate=$4 tx c0 c1 p0 w0 b0 p1 w1 b1 t0 t1
	taskset -c 1 "$RS" --socket "$GS" pkt-gen -i valegen:src -f tx -b 1 -R "$rate" -T 0 \
		-D 02:00:00:00:00:99 >"$W/tx.log" 2>&1 &
	tx=$!
	sleep 1
	read -r p0 w0 b0 < <(worker_counts)
	c0=$(run_ns "$RX_PID") t0=$(now_s)
	sleep "$SECS"
	c1=$(run_ns "$RX_PID") t1=$(now_s)
	read -r p1 w1 b1 < <(worker_counts)
	kill -INT "$tx" 2>/dev/null
	wait "$tx" 2>/dev/null
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$setting" "$rate" "$run" \
		"$(awk -v p=$((p1 - p0)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", p / (b - a) }')" \
		"$(((c1 - c0) / (p1 - p0 > 0 ? p1 - p0 : 1)))" \
		"$(awk -v w=$((w1 - w0)) -v p=$((p1 - p0)) 'BEGIN { printf "%.3f", (p > 0 ? w / p : 0) }')" \
		"$(awk -v b=$((b1 - b0)) -v p=$((p1 - p0)) 'BEGIN { printf "%.2f", (b > 0 ? p / b : 0) }')" \
		"$(awk -v c=$((c1 - c0)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", c / 1e7 / (b - a) }')" \
		>>"$W/rows.tsv"
}

# ping_ms: round trips (ms) of 500 kernel pings from the gen namespace to
# the receiver's host port, one line each.
ping_ms() {
	ip netns exec "$NSG" taskset -c 1 ping -n -c 500 -i 0.002 -W 1 10.77.0.2 2>/dev/null |
		sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p'
}

# quantile Q: of the numbers on stdin (ms), in us.
quantile() {
	sort -g | awk -v q="$1" '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
		i = int(q * NR + 0.999999); if (i < 1) i = 1; printf "%.0f", v[i] * 1000 }'
}

# rtt MODE SETTING RUN: kernel ping from xwA's namespace through xwB and the
# switch to a host port (a TAP) of the receiving daemon and back, idle and
# with the highest rate as background; appends p50 and p99 (us) of each.
rtt() {
	local mode=$1 setting=$2 run=$3 tx top idle loaded
	"$RS" --socket "$RSK" ctl attach valexw --host xwtap >/dev/null || die "cannot attach a host port"
	ip -n "$NSR" addr add 10.77.0.2/24 dev xwtap && ip -n "$NSR" link set xwtap up
	ip netns exec "$NSG" ping -n -c 3 -i 0.2 -W 1 10.77.0.2 >/dev/null 2>&1
	ping_ms >"$W/ping-idle"
	top=${rates[-1]}
	# Addressed to xwA itself: the receiving switch takes them from xwB
	# and drops them there (never back out of their source port), so the
	# pings share the port's queue and nothing else.
	taskset -c 1 "$RS" --socket "$GS" pkt-gen -i valegen:src -f tx -b 1 -R "$top" -T 0 \
		-D "$MAC_A" >"$W/tx.log" 2>&1 &
	tx=$!
	sleep 1
	ping_ms >"$W/ping-loaded"
	kill -INT "$tx" 2>/dev/null
	wait "$tx" 2>/dev/null
	idle="$(quantile 0.5 <"$W/ping-idle")\t$(quantile 0.99 <"$W/ping-idle")"
	loaded="$(quantile 0.5 <"$W/ping-loaded")\t$(quantile 0.99 <"$W/ping-loaded")"
	printf "%s\t%s\t%s\t$idle\t$loaded\n" "$mode" "$setting" "$run" >>"$W/rtt.tsv"
}

log "xdp-wakeups: modes $MODES, rates $RATES pps, coalescing $COALESCE, $RUNS run(s), ${SECS} s windows"
IFS=, read -ra modes <<<"$MODES"
IFS=, read -ra rates <<<"$RATES"
IFS=, read -ra settings <<<"$COALESCE"
: >"$W/rows.tsv"
: >"$W/rtt.tsv"
for run in $(seq "$RUNS"); do
	for mode in "${modes[@]}"; do
		for setting in "${settings[@]}"; do
			log "run $run: $mode, rx coalescing $setting"
			start_rx "$mode" "$setting"
			for rate in "${rates[@]}"; do
				measure "$mode" "$setting" "$run" "$rate"
			done
			rtt "$mode" "$setting" "$run"
			stop_rx
		done
	done
done

# median COLUMN over rows matching mode, setting (and rate): "med (min-max)".
summary() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "-"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		if (NR == 1) printf "%g\n", m; else printf "%g (%g-%g)\n", m, v[1], v[NR] }'
}
col() { awk -F'\t' -v m="$1" -v s="$2" -v r="$3" -v c="$4" '$1 == m && $2 == s && $3 == r { print $c }' "$W/rows.tsv" | summary; }
rcol() { awk -F'\t' -v m="$1" -v s="$2" -v c="$3" '$1 == m && $2 == s && $(c) != "-" { print $c }' "$W/rtt.tsv" | summary; }

echo
echo "# xdp-wakeups: $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) CPUs, kernel $(uname -r), guest halt polling $(halt_poll_get) ns, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+changes')"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $RUNS run(s), ${SECS} s windows"
echo
echo "| mode | rx coalescing | offered pps | taken pps | daemon CPU ns/frame | wake-ups/frame | frames/batch | daemon CPU % of a core |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
	for rate in "${rates[@]}"; do
		for setting in "${settings[@]}"; do
			printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$mode" "$setting" "$rate" \
				"$(col "$mode" "$setting" "$rate" 5)" "$(col "$mode" "$setting" "$rate" 6)" \
				"$(col "$mode" "$setting" "$rate" 7)" "$(col "$mode" "$setting" "$rate" 8)" \
				"$(col "$mode" "$setting" "$rate" 9)"
		done
	done
done
echo
echo "| mode | rx coalescing | ping RTT p50 us, idle | p99, idle | p50, ${rates[-1]} pps beside | p99, ${rates[-1]} pps beside |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
	for setting in "${settings[@]}"; do
		printf '| %s | %s | %s | %s | %s | %s |\n' "$mode" "$setting" "$(rcol "$mode" "$setting" 4)" \
			"$(rcol "$mode" "$setting" 5)" "$(rcol "$mode" "$setting" 6)" "$(rcol "$mode" "$setting" 7)"
	done
done
