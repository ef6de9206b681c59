#!/usr/bin/env bash
# bench/peers/memif.sh - measure the DPDK memif peer on this machine.
#
# testpmd (txonly, memif client) -> testpmd (rxonly, memif server), memif copy
# mode, one queue, --no-huge. Server lcores are pinned to one CPU, client lcores
# to another (see shared/peers.md). The figure is the receiver's packet rate,
# read from testpmd's periodic statistics (--stats-period 1): the median of the
# Rx-pps samples after the first non-zero (warm-up) sample.
#
# stdout (machine-readable), one line per run, then one JSON line:
#   memif size=64 run=1 rx_mpps=21.345
#   {"peer":"dpdk-memif","size":64,"seconds":10,"runs":[21.345],"median_mpps":21.345}
# Progress and diagnostics go to stderr.
#
# Installs dpdk-testpmd if it is missing (Debian 12 ships it in package
# dpdk-dev; package dpdk alone has only the helper scripts).

set -euo pipefail

readonly PROG=${0##*/}
# cpu_ticks (its log and die are replaced by this script's below)
# shellcheck source=../lib/common.sh disable=SC1091 # followed with shellcheck -x
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/common.sh"

usage() {
	cat <<EOF
usage: $PROG [--seconds N] [--size BYTES] [--runs K] [--burst N]

  --seconds N    measured seconds per run: Rx-pps samples covering at
                 least N s after the warm-up sample (default 10)
  --size BYTES   frame size given to testpmd --txpkts, 42..2048 (default 64)
  --runs K       number of runs (default 1)
  --burst N      testpmd --burst on both ends, 1..512 (default: testpmd's, 32)

environment:
  MEMIF_SERVER_CPU  CPU for the rxonly server's lcores (default 0)
  MEMIF_CLIENT_CPU  CPU for the txonly client's lcores (default 1)
  MEMIF_TIMEOUT     seconds to wait for each testpmd to start and for
                    traffic to flow (default 30)

stdout: "memif size=S run=R rx_mpps=X cpu_cores=C" per run (C: CPU time
of both testpmd processes over the measured window, in cores), then one
JSON line.
EOF
}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

DURATION=10
SIZE=64
RUNS=1
BURST=
SERVER_CPU=${MEMIF_SERVER_CPU:-0}
CLIENT_CPU=${MEMIF_CLIENT_CPU:-1}
TIMEOUT=${MEMIF_TIMEOUT:-30}
readonly STATS_PERIOD=1

while (($# > 0)); do
	case $1 in
	--seconds | --size | --runs | --burst)
		(($# >= 2)) || die "$1 needs a value (try --help)"
		opt=$1 val=$2
		shift 2
		;;
	--seconds=* | --size=* | --runs=* | --burst=*)
		opt=${1%%=*} val=${1#*=}
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		die "unknown argument: $1"
		;;
	esac
	is_uint "$val" || die "$opt wants a non-negative integer, got '$val'"
	val=$((10#$val))
	case $opt in
	--seconds) DURATION=$val ;;
	--size) SIZE=$val ;;
	--runs) RUNS=$val ;;
	--burst) BURST=$val ;;
	esac
done

((DURATION >= 1)) || die "--seconds must be at least 1"
((RUNS >= 1)) || die "--runs must be at least 1"
[[ -z $BURST ]] || ((BURST >= 1 && BURST <= 512)) || die "--burst must be within 1..512, got $BURST"
BURST_ARGS=()
[[ -n $BURST ]] && BURST_ARGS=(--burst="$BURST")
# 42 = Ethernet + IPv4 + UDP headers (txonly's minimum); 2048 = one default
# mbuf's data room (larger frames would need multi-segment mbufs).
((SIZE >= 42 && SIZE <= 2048)) || die "--size must be within 42..2048, got $SIZE"
for v in SERVER_CPU CLIENT_CPU TIMEOUT; do
	is_uint "${!v}" || die "$v must be a non-negative integer, got '${!v}'"
done
((TIMEOUT >= 1)) || die "MEMIF_TIMEOUT must be at least 1"

ncpu=$(nproc --all 2>/dev/null || getconf _NPROCESSORS_ONLN)
((SERVER_CPU < ncpu && CLIENT_CPU < ncpu)) ||
	die "need CPUs $SERVER_CPU and $CLIENT_CPU, this machine has $ncpu"
((SERVER_CPU != CLIENT_CPU)) || log "warning: server and client share CPU $SERVER_CPU"

# ---------------------------------------------------------------- install

ensure_testpmd() {
	command -v dpdk-testpmd >/dev/null 2>&1 && return 0
	((EUID == 0)) || die "dpdk-testpmd not found and not root: install package dpdk-dev"
	command -v apt-get >/dev/null 2>&1 || die "dpdk-testpmd not found and no apt-get"
	log "dpdk-testpmd not found: installing package dpdk-dev (apt-get update first)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || die "apt-get update failed"
	apt-get install -y -qq dpdk-dev >&2 || die "apt-get install dpdk-dev failed"
	command -v dpdk-testpmd >/dev/null 2>&1 || die "dpdk-dev installed but dpdk-testpmd still missing"
}

ensure_testpmd

# ---------------------------------------------------------------- cleanup

# DPDK keeps per-prefix runtime files (config, fbarray, mp_socket) here.
if ((EUID == 0)); then
	DPDK_RUNDIR=/var/run/dpdk
else
	DPDK_RUNDIR=${XDG_RUNTIME_DIR:-/tmp}/dpdk
fi

WORKDIR=
declare -a PIDS=()     # testpmd processes still to stop
declare -a PREFIXES=() # --file-prefix values used, their runtime dirs removed at exit

# Stop one testpmd: SIGTERM (testpmd exits cleanly on it), SIGKILL after 5 s.
stop_pid() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || {
		wait "$pid" 2>/dev/null || true
		return 0
	}
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "testpmd pid $pid ignored SIGTERM, sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

stop_all() {
	local pid i
	# Client (started last) first, so the server does not see a dead peer mid-write.
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		pid=${PIDS[i]}
		stop_pid "$pid"
	done
	PIDS=()
}

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM HUP
	stop_all
	for p in "${PREFIXES[@]}"; do
		rm -rf -- "${DPDK_RUNDIR:?}/$p"
	done
	[[ -n $WORKDIR ]] && rm -rf -- "$WORKDIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/ringswitch-memif.XXXXXX")

# ---------------------------------------------------------------- helpers

# Print a testpmd log's error lines and its tail to stderr, without the
# periodic statistics blocks and their screen-clearing escapes.
show_tail() {
	local name=$1 logf=$2 clean
	if [[ ! -s $logf ]]; then
		log "($name log is empty)"
		return 0
	fi
	clean=$(sed $'s/\x1b\\[[0-9;]*[A-Za-z]//g' "$logf" |
		grep -vE '^ *(#{8,}.*|Port statistics =+|RX-(packets|errors|nombuf):.*|TX-packets:.*|Throughput \(since last show\)|[RT]x-pps:.*)? *$' || true)
	log "---- $name log: error lines ----"
	grep -m 15 -iE 'error|fail|invalid|unrecognized|cannot|unable|no such|denied' <<<"$clean" >&2 || log "(none)"
	log "---- $name log: last 20 lines (stats blocks omitted) ----"
	tail -n 20 <<<"$clean" >&2
	log "---- end of $name log ----"
}

# Fail with the log tail of each named process: fail MSG NAME LOG [NAME LOG...]
fail() {
	local msg=$1
	shift
	log "error: $msg"
	while (($# >= 2)); do
		show_tail "$1" "$2"
		shift 2
	done
	exit 1
}

# Start testpmd in the background; sets STARTED_PID.
#   start_testpmd NAME CPU PREFIX VDEV MODE LOG [extra testpmd app args...]
start_testpmd() {
	local name=$1 cpu=$2 prefix=$3 vdev=$4 mode=$5 logf=$6
	shift 6
	PREFIXES+=("$prefix")
	: >"$logf" # exists before the background redirection, for the pollers
	log "starting $name: testpmd $mode on cpu $cpu ($vdev)"
	# stdin from /dev/null: with --stats-period testpmd runs non-interactively
	# and prints statistics every period until it gets SIGINT/SIGTERM.
	dpdk-testpmd --lcores="0@$cpu,1@$cpu" --no-huge -m 1024 --no-pci \
		--file-prefix "$prefix" --vdev="$vdev" -- \
		--forward-mode="$mode" --stats-period "$STATS_PERIOD" \
		--no-mlockall --total-num-mbufs=16384 "${BURST_ARGS[@]}" "$@" \
		</dev/null >"$logf" 2>&1 &
	STARTED_PID=$!
	PIDS+=("$STARTED_PID")
}

# Wait until testpmd has started forwarding (and, if given, the socket exists).
#   wait_started NAME PID LOG [SOCKET]
wait_started() {
	local name=$1 pid=$2 logf=$3 sock=${4:-} deadline
	deadline=$((SECONDS + TIMEOUT))
	while :; do
		kill -0 "$pid" 2>/dev/null ||
			fail "$name testpmd exited during start-up" "$name" "$logf"
		# testpmd keeps running when a port fails to start; catch that here.
		if grep -qE 'Fail to start port|EAL: Error|EAL: FATAL|Cannot init|failed to parse device|probe failed|No probed ethernet devices|failed to initialize' "$logf"; then
			fail "$name testpmd failed to start its port" "$name" "$logf"
		fi
		if grep -q 'start packet forwarding' "$logf" && { [[ -z $sock ]] || [[ -S $sock ]]; }; then
			return 0
		fi
		((SECONDS < deadline)) ||
			fail "$name testpmd not forwarding after ${TIMEOUT}s" "$name" "$logf"
		sleep 0.1
	done
}

# Measurement samples from a testpmd log, one "PPS SECONDS" line each.
# testpmd prints, per stats block, the cumulative counter (e.g. "RX-packets: N")
# and the rate since the previous block (e.g. "Rx-pps: R", computed by testpmd
# from clock_gettime, so exact whatever the interval). On these VMs a block
# comes every 1 or 2 s with --stats-period 1 (testpmd's loop sleeps 1 s, then
# compares TSC ticks), so each sample's interval is derived as counter delta /
# rate. The first non-zero sample is the warm-up
# sample (it covers the client connecting) and is dropped, as are the zero
# samples before it. Stops once the samples cover MAXSEC seconds (0: all).
#   window_samples RX|TX LOG [MAXSEC]
window_samples() {
	local cnt=$1-packets: rate
	rate=${1:0:1}$(tr '[:upper:]' '[:lower:]' <<<"${1:1}")-pps:
	awk -v cnt="$cnt" -v rate="$rate" -v max="${3:-0}" -v period="$STATS_PERIOD" '
		$1 == cnt { pk = $2 + 0; next }
		$1 == rate {
			pps = $2 + 0
			if (!on) { if (pps > 0) on = 1; prev = pk; next }
			dt = pps > 0 ? (pk - prev) / pps : period
			prev = pk
			printf "%d %.6f\n", pps, dt
			tot += dt
			if (max && tot >= max) exit
		}' "$2"
}

# Seconds covered by window_samples output on stdin.
covered() { awk '{ t += $2 } END { printf "%.3f\n", t }'; }

# Median of numbers on stdin; prints nothing for no input.
median() {
	sort -g | awk '{ v[NR] = $1 }
		END { if (NR == 0) exit
		      if (NR % 2) print v[(NR + 1) / 2]
		      else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

to_mpps() { awk -v p="$1" 'BEGIN { printf "%.3f\n", p / 1e6 }'; }

# ---------------------------------------------------------------- runs

log "dpdk-memif: size=$SIZE bytes, $DURATION s per run, $RUNS run(s), server cpu $SERVER_CPU, client cpu $CLIENT_CPU"
# Both testpmd processes busy-poll a whole CPU each: anything else running on
# these CPUs (a cargo build, say) lowers the figure a lot. Measure how busy the
# machine is over one second before starting, and say so.
cpu_busy() {
	local a b
	a=$(awk '$1 == "cpu" { i = $5 + $6; t = 0; for (k = 2; k <= NF; k++) t += $k; print i, t }' /proc/stat)
	sleep 1
	b=$(awk '$1 == "cpu" { i = $5 + $6; t = 0; for (k = 2; k <= NF; k++) t += $k; print i, t }' /proc/stat)
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
		dt = y[2] - x[2]; printf "%.0f", (dt > 0 ? 100 * (1 - (y[1] - x[1]) / dt) : 0) }'
}
HZ=$(getconf CLK_TCK)
busy=$(cpu_busy)
log "CPUs busy before start: ${busy}% of all CPUs"
if ((busy > 10)); then
	log "warning: other processes are using the CPUs (top: $(ps -eo pcpu=,comm= --sort=-pcpu | awk 'NR <= 3 { printf "%s%s %s%%", (NR > 1 ? ", " : ""), $2, $1 }')); figures will be low"
fi

declare -a RESULTS=() CPUS=()
for ((run = 1; run <= RUNS; run++)); do
	sock=$WORKDIR/memif-r$run.sock
	srv_log=$WORKDIR/server-r$run.log
	cli_log=$WORKDIR/client-r$run.log
	tag=ringswitch-memif-$$-r$run

	start_testpmd server "$SERVER_CPU" "$tag-srv" \
		"net_memif0,role=server,socket=$sock,socket-abstract=no" rxonly "$srv_log"
	srv_pid=$STARTED_PID
	wait_started server "$srv_pid" "$srv_log" "$sock"

	start_testpmd client "$CLIENT_CPU" "$tag-cli" \
		"net_memif1,role=client,socket=$sock,socket-abstract=no" txonly "$cli_log" \
		--txpkts="$SIZE"
	cli_pid=$STARTED_PID
	wait_started client "$cli_pid" "$cli_log"

	# Wait for traffic (first non-zero sample), then for samples covering
	# DURATION seconds after it.
	log "run $run: waiting for traffic, then ${DURATION}s of samples"
	traffic_deadline=$((SECONDS + TIMEOUT))
	measure_deadline=
	while :; do
		kill -0 "$srv_pid" 2>/dev/null ||
			fail "server testpmd died during run $run" server "$srv_log" client "$cli_log"
		kill -0 "$cli_pid" 2>/dev/null ||
			fail "client testpmd died during run $run" server "$srv_log" client "$cli_log"
		if [[ -z $measure_deadline ]]; then
			if awk '$1 == "Rx-pps:" && $2 + 0 > 0 { f = 1; exit } END { exit !f }' "$srv_log"; then
				measure_deadline=$((SECONDS + DURATION * 2 + 4 * STATS_PERIOD + 10))
				t0=$(date +%s.%N)
				k0=$(($(cpu_ticks "$srv_pid" || echo 0) + $(cpu_ticks "$cli_pid" || echo 0)))
				# Both CPUs are busy-polling: stay off them for the window.
				sleep "$DURATION"
				continue
			elif ((SECONDS >= traffic_deadline)); then
				fail "no packets received within ${TIMEOUT}s in run $run" server "$srv_log" client "$cli_log"
			fi
		else
			got=$(window_samples RX "$srv_log" | covered)
			awk -v g="$got" -v d="$DURATION" 'BEGIN { exit !(g >= d) }' && break
			((SECONDS < measure_deadline)) ||
				fail "samples cover only ${got}s of ${DURATION}s in run $run" server "$srv_log" client "$cli_log"
		fi
		sleep 0.5
	done

	k1=$(($(cpu_ticks "$srv_pid" || echo 0) + $(cpu_ticks "$cli_pid" || echo 0)))
	t1=$(date +%s.%N)
	cores=$(awk -v a="$k0" -v b="$k1" -v t0="$t0" -v t1="$t1" -v hz="$HZ" \
		'BEGIN { w = t1 - t0; printf "%.2f", (w > 0 ? (b - a) / hz / w : 0) }')
	CPUS+=("$cores")
	# Snapshot the samples before stopping anything (shutdown samples are partial).
	samples=$(window_samples RX "$srv_log" "$DURATION")
	# Average received frame size from the cumulative counters (sanity check).
	rx_frame=$(awk '$1 == "RX-packets:" && $2 + 0 > 0 && $5 == "RX-bytes:" { f = $6 / $2 }
		END { if (f) printf "%.0f", f }' "$srv_log")
	tx_samples=$(window_samples TX "$cli_log" "$DURATION")
	stop_all

	rx_med=$(cut -d' ' -f1 <<<"$samples" | median)
	[[ -n $rx_med ]] || fail "no Rx-pps samples parsed in run $run" server "$srv_log"
	mpps=$(to_mpps "$rx_med")
	RESULTS+=("$mpps")
	log "run $run: rx samples in Mpps (interval s): $(awk '{ printf "%s%.3f (%.2f)", (NR > 1 ? " " : ""), $1 / 1e6, $2 }' <<<"$samples")"
	log "run $run: rx median $mpps Mpps, rx mean $(awk '{ p += $1 * $2; t += $2 } END { printf "%.3f", t ? p / t / 1e6 : 0 }' <<<"$samples") Mpps over $(covered <<<"$samples")s"
	spread=$(awk 'NR == 1 || $1 < lo { lo = $1 } NR == 1 || $1 > hi { hi = $1 }
		END { if (lo > 0 && hi / lo > 1.25) printf "%.3f-%.3f", lo / 1e6, hi / 1e6 }' <<<"$samples")
	if [[ -n $spread ]]; then
		log "warning: run $run unstable, samples span $spread Mpps (other processes on these CPUs?); use --runs"
	fi
	if [[ $rx_frame != "$SIZE" ]]; then
		log "warning: run $run: received frames average ${rx_frame:-?} bytes, expected $SIZE"
	fi
	log "run $run: rx $(awk -v m="$mpps" -v b="$SIZE" 'BEGIN { printf "%.2f", m * b * 8 / 1000 }') Gbit/s of $SIZE-byte frames"
	tx_med=$(cut -d' ' -f1 <<<"$tx_samples" | median)
	[[ -n $tx_med ]] && log "run $run: client tx median $(to_mpps "$tx_med") Mpps"
	printf 'memif size=%d run=%d rx_mpps=%s cpu_cores=%s\n' "$SIZE" "$run" "$mpps" "$cores"

	# Runtime dirs of this run are no longer needed.
	for p in "$tag-srv" "$tag-cli"; do rm -rf -- "${DPDK_RUNDIR:?}/$p"; done
done

overall=$(printf '%s\n' "${RESULTS[@]}" | median)
runs_json=$(
	IFS=,
	printf '%s' "${RESULTS[*]}"
)
cpus_json=$(
	IFS=,
	printf '%s' "${CPUS[*]}"
)
printf '{"peer":"dpdk-memif","size":%d,"seconds":%d,"burst":%s,"runs":[%s],"cpu_cores":[%s],"median_mpps":%s}\n' \
	"$SIZE" "$DURATION" "${BURST:-null}" "$runs_json" "$cpus_json" "$(awk -v m="$overall" 'BEGIN { printf "%.3f", m }')"
