#!/usr/bin/env bash
# bench/run.sh - measure ringswitch and report it beside the DPDK memif peer,
# for VM ports the OVS-DPDK peer, and for NIC ports DPDK net_af_xdp,
# net_af_packet and a Linux bridge, measured in the same run. See
# bench/README.md.
#
#   bench/run.sh [--quick] [--out DIR] [--no-vhost | --vhost-only | --nic-only]
#
# Writes DIR/REPORT.md (also printed on stdout), DIR/batch.csv,
# DIR/results.tsv, DIR/run.log (progress and every failure's reason) and
# DIR/raw/ (each process's output). Progress goes to stderr.

# shellcheck source-path=SCRIPTDIR
set -uo pipefail

PROG=${0##*/}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

# shellcheck source=lib/common.sh
. "$BENCH_DIR/lib/common.sh"
# shellcheck source=lib/report.sh
. "$BENCH_DIR/lib/report.sh"
# shellcheck source=lib/measure.sh
. "$BENCH_DIR/lib/measure.sh"
# shellcheck source=lib/testpmd.sh
. "$BENCH_DIR/lib/testpmd.sh"
# shellcheck source=lib/vhost.sh
. "$BENCH_DIR/lib/vhost.sh"
# shellcheck source=lib/nic.sh
. "$BENCH_DIR/lib/nic.sh"

usage() {
	cat <<EOF
usage: $PROG [--quick] [--out DIR] [--no-vhost | --vhost-only | --nic-only]
       [--guest-halt-poll NS]

  --quick       shorter measurements and a shorter batch sweep
  --out DIR     where REPORT.md, batch.csv, results.tsv, run.log and raw/ go
                (default: bench/results/run)
  --no-vhost    leave out section 8 (VM ports beside OVS-DPDK)
  --vhost-only  only section 8
  --guest-halt-poll NS
                in a VM, let idle vCPUs poll NS ns before halting for this
                run only (cpuidle-haltpoll; the old value is put back): a
                machine setting that shortens wake-ups (bench/floors.sh)
  --nic-only    only section 9 (NIC ports: veth + AF_XDP into the switch,
                beside DPDK net_af_xdp, net_af_packet and a Linux bridge;
                needs root)

Builds ringswitch (cargo build --release -p ringswitch-cli), starts its own
daemon on a temporary socket, measures, runs bench/peers/memif.sh and
bench/peers/ovs-dpdk.sh, and stops everything it started on exit
(section 9: also deletes its network namespaces rsbn-PID-*).
EOF
}

QUICK=0 HALT_POLL=''
OUT=$ROOT/bench/results/run
VHOST=1 CORE=1 NIC=1
while (($# > 0)); do
	case $1 in
	--quick) QUICK=1 ;;
	--guest-halt-poll)
		if (($# < 2)) || ! [[ $2 =~ ^[0-9]{1,10}$ ]]; then
			echo "$PROG: --guest-halt-poll wants nanoseconds" >&2
			exit 2
		fi
		HALT_POLL=$2
		shift
		;;
	--no-vhost) VHOST=0 ;;
	--vhost-only) CORE=0 NIC=0 ;;
	--nic-only) CORE=0 VHOST=0 ;;
	--out)
		(($# >= 2)) || {
			usage >&2
			exit 2
		}
		OUT=$2
		shift
		;;
	--out=*) OUT=${1#*=} ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		echo "$PROG: unknown argument: $1" >&2
		exit 2
		;;
	esac
	shift
done

if ((QUICK)); then
	TPUT_S=2 BATCH_S=1 IDLE_S=5 MEMIF_S=3 VH_S=2 VH_IDLE_S=5 NIC_S=3 NIC_GEN_S=3
	BATCHES=(1 8 64 512)
else
	TPUT_S=5 BATCH_S=3 IDLE_S=10 MEMIF_S=5 VH_S=5 VH_IDLE_S=10 NIC_S=10 NIC_GEN_S=5
	BATCHES=(1 2 4 8 16 32 64 128 256 512)
fi
((VHOST || CORE || NIC)) || {
	usage >&2
	echo "$PROG: these options leave nothing to measure" >&2
	exit 2
}
PING_N=20000
DAEMON_DEFAULT=(--workers 1)
DAEMON_MAX_S=1800 # no daemon outlives half an hour
PIPE_ID=0

mkdir -p "$OUT" || {
	echo "$PROG: cannot create $OUT" >&2
	exit 1
}
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw
LOGFILE=$OUT/run.log
rm -rf -- "$RAW"
mkdir -p "$RAW"
: >"$LOGFILE"
rm -f -- "$OUT/REPORT.md" "$OUT/batch.csv" "$OUT/results.tsv"

WORK=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	cleanup_all
	nic_cleanup
	halt_poll_restore
	[[ -n $WORK ]] && rm -rf -- "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM
trap 'exit 129' HUP

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringswitch-bench.XXXXXX")
SOCK=$WORK/ringswitch.sock
cd "$ROOT" || exit 1

log "ringswitch benchmark ($( ((QUICK)) && echo quick || echo full)): results in $OUT"

# ------------------------------------------------------------ prerequisites

for tool in timeout taskset pgrep awk; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done
if ! command -v jq >/dev/null 2>&1; then
	if ((EUID != 0)) || ! command -v apt-get >/dev/null 2>&1; then
		die "jq is missing (apt-get install jq)"
	fi
	log "installing jq"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >>"$LOGFILE" 2>&1 ||
		{ apt-get update -qq >>"$LOGFILE" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >>"$LOGFILE" 2>&1; } ||
		die "could not install jq"
fi

NCPU=$(nproc)
RX_CPU=0 TX_CPU=1
if ((NCPU < 2)); then
	log "warning: only $NCPU CPU: receiver and sender both on CPU 0"
	TX_CPU=0
fi

# ------------------------------------------------------------ header facts

T_START=$SECONDS
H_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
H_KERNEL=$(uname -r)
if [[ -n $HALT_POLL ]]; then
	H_HALT_POLL="$HALT_POLL (set by --guest-halt-poll for this run; the machine had $(halt_poll_get))"
	halt_poll_set "$HALT_POLL" || die "--guest-halt-poll: cannot set it here"
else
	H_HALT_POLL="$(halt_poll_get) (as the machine has it)"
fi
H_CPU=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
H_RUSTC=$(rustc --version 2>/dev/null || echo "rustc not found")
H_COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
H_DIRTY=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
H_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
H_BUSY0=$(cpu_busy_pct)
H_TOP0=$(ps -eo pcpu=,comm= --sort=-pcpu | awk 'NR <= 3 { printf "%s%s %s%%", (NR > 1 ? ", " : ""), $2, $1 }')
log "CPUs $H_BUSY0% busy before the run (top: $H_TOP0); load average $H_LOAD0"

# ------------------------------------------------------------ build

RS=
BUILD_ERR=
log "building: cargo build --release -p ringswitch-cli"
if run_fg build "" 1800 cargo build --release -p ringswitch-cli; then
	# Run a private copy: others may rebuild target/ while we measure.
	# ringswitchd beside it: `ringswitch serve` runs the daemon from there.
	if cp "$ROOT/target/release/ringswitch" "$ROOT/target/release/ringswitchd" "$WORK/"; then
		RS=$WORK/ringswitch
		H_VERSION=$("$RS" --version 2>/dev/null)
	else
		BUILD_ERR="target/release/ringswitch or ringswitchd missing after the build"
	fi
else
	rc=$?
	BUILD_ERR="cargo build failed: $(why "$BG_NAME" "$rc")"
fi
[[ -n $BUILD_ERR ]] && log "error: $BUILD_ERR"

ALL_RS_KEYS=(pipe_blocking_mpps pipe_busy_mpps pipe_big_mpps
	sw60_rx_mpps sw60_tx_mpps sw60_drops sw60_drop_pct
	sw1514_rx_mpps sw1514_tx_mpps sw1514_drops sw1514_drop_pct
	idle_daemon_pct idle_pktgen_pct idle_pktgen_max_pct rss8_kib rss64_kib rss_per_port_b)
for p in pipe switch; do
	for m in busy blocking; do
		for f in p50 p99 min avg; do ALL_RS_KEYS+=("rtt_${p}_${m}_$f"); done
	done
done

# ------------------------------------------------------------ measurements

CSV=$OUT/batch.csv
if ((CORE)) && [[ -n $RS ]]; then
	measure_pipe "$TPUT_S"
	measure_switch "$TPUT_S"
	daemon_stop # nothing of ours runs while memif measures
	measure_memif "$MEMIF_S"
	measure_rtt "$PING_N"
	measure_batch "$BATCH_S" "$CSV" "${BATCHES[@]}"
	measure_idle_rss "$IDLE_S"
	daemon_stop
elif ((CORE)); then
	failed "$BUILD_ERR" "${ALL_RS_KEYS[@]}"
	printf 'path,batch,mpps\n' >"$CSV"
	for p in pipe switch; do
		for b in "${BATCHES[@]}"; do printf '%s,%s,failed\n' "$p" "$b" >>"$CSV"; done
	done
	measure_memif "$MEMIF_S"
fi
if ((VHOST)); then
	vhost_measure "$VH_S" "$VH_IDLE_S" "$([[ -n $RS ]] && echo 1 || echo 0)"
	daemon_stop
fi
if ((NIC)); then
	daemon_stop # nothing of ours runs while the NIC section measures
	nic_measure "$NIC_S" "$NIC_GEN_S" "$([[ -n $RS ]] && echo 1 || echo 0)"
fi

# ------------------------------------------------------------ report

ELAPSED=$((SECONDS - T_START))
H_LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
write_tsv >"$OUT/results.tsv"

tick_note=
ok idle_tick_pct && tick_note=" One clock tick over the window is $(val idle_tick_pct)% of a core, the resolution of these figures."
run_flags=
if ((!CORE && VHOST && !NIC)); then
	run_flags=", \`--vhost-only\`"
elif ((!CORE && !VHOST)); then
	run_flags=", \`--nic-only\`"
elif ((!VHOST)); then
	run_flags=", \`--no-vhost\`"
fi
dirty_note=
((H_DIRTY > 0)) && dirty_note=" (working tree differs from it in $H_DIRTY tracked files)"

{
	cat <<EOF
# ringswitch benchmark

- date: $H_DATE
- kernel: \`$H_KERNEL\`; guest halt polling (ns): $H_HALT_POLL; with 0 every wake-up of a thread on an idle vCPU is a halt exit, which sets the blocking figures (bench/floors.sh)
- CPU: $H_CPU, $NCPU cores
- rustc: \`$H_RUSTC\`
- commit: \`$H_COMMIT\`$dirty_note
- binary: \`${H_VERSION:-not built}\` (cargo build --release -p ringswitch-cli)
- run: $( ((QUICK)) && echo "\`--quick\`" || echo "full")$run_flags, ${ELAPSED} s; throughput ${TPUT_S} s per measurement, batch sweep ${BATCH_S} s per point, idle window ${IDLE_S} s, memif ${MEMIF_S} s per size, ping -n $PING_N; VM ports ${VH_S} s per placement, idle ${VH_IDLE_S} s; NIC ports ${NIC_S} s per receiver
- machine load: CPUs ${H_BUSY0}% busy in the second before the run (top: $H_TOP0); load average $H_LOAD0 at the start, $H_LOAD1 at the end

Every number below was measured in this run; targets are the issue's.

EOF
	if ((CORE)); then
		cat <<EOF
## Results

EOF
		main_table
		cat <<EOF

## Throughput against batch size (60 B, blocking)

Also in \`batch.csv\` (path,batch,mpps).

EOF
	batch_table "$CSV"
	cat <<EOF

## How these were measured

- Two CPUs. Pipes: the receiver (pkt-gen rx, pong) runs pinned to CPU
  $RX_CPU and the sender (pkt-gen tx, ping) to CPU $TX_CPU with \`taskset\`;
  no daemon thread is on a pipe's data path. Switch throughput: the worker
  gets CPU $TX_CPU (\`serve --worker-cpus $TX_CPU\`) and both pkt-gens share
  CPU $RX_CPU, since three busy threads cannot each have a core here.
- Throughput is the receiver's: pkt-gen rx counts from its first to its last
  packet. Switch: two ports on a switch of their own (\`valebench60:a\` →
  \`valebench60:b\`); pkt-gen's broadcast frames flood to the one other
  port; drops are \`drop_rx_full\` of the receiving port from \`ctl stats
  --json\` (read after the sender stopped, while the receiver still holds
  its port), as a share of the packets the sender's pkt-gen reports sent.
- Batch sweep: for the pipe, pkt-gen \`-b\` on both ends; for the switch, the
  daemon restarted per point with \`--batch N\` and pkt-gen \`-b N\` on both
  ends (on-demand ports \`vale0:sa\` → \`vale0:sb\`).
- RTT: ping on CPU $TX_CPU, pong on CPU $RX_CPU, burst 1, $PING_N round
  trips; busy is \`--busy\` on ping and pong. Blocking through the switch,
  the daemon runs with \`--idle-poll-us 50\`. Busy RTT through the switch needs three
  busy-waiting threads (ping, worker, pong), one more than this machine has
  cores, so it is measured with the worker sleeping between batches; it
  cannot meet a busy-wait target here. The target is judged on p50.
- Idle: a fresh daemon, 8 pkt-gen rx (blocking) on \`vale0:i1..i8\`, no
  traffic; CPU from \`/proc/PID/stat\` utime+stime (all threads) over
  ${IDLE_S} s, as % of one core.$tick_note
- Memory: \`VmRSS − RssShmem\` of the daemon (rings and buffers live in
  memfds, which count as shmem), with the 8 idle ports open (8 client
  connections), then with 56 persistent ports \`vale0:p9..p64@conf:slots=64\`
  added (64 in all, no clients); per port = the difference / 56. Of the 8-port
  figure, $(val rss8_anon_kib) KiB is RssAnon and $(val rss8_file_kib) KiB RssFile (the mapped binary and libraries).
- DPDK memif: \`bench/peers/memif.sh --seconds ${MEMIF_S} --size 64\` (and 1514),
  testpmd txonly on CPU $TX_CPU → rxonly on CPU $RX_CPU, both busy-polling,
  run while no ringswitch process runs. Its 64 B is testpmd \`--txpkts=64\`,
  4 bytes more than ringswitch's 60 B (netmap's convention, without CRC); at
  1514 B the sizes are equal. Ratios divide ringswitch's received Mpps by
  memif's at that size.
- The machine is shared with other jobs (see the load above): figures are
  noisy, single runs.

EOF
	fi
	((VHOST)) && vhost_report
	((NIC)) && nic_report
	cat <<EOF
## Failures

EOF
	failures
	cat <<EOF

Reasons and process output: \`run.log\` and \`raw/\` in this directory.
EOF
} >"$OUT/REPORT.md"

log "done in ${ELAPSED} s: $OUT/REPORT.md"
if ((CORE)); then
	main_table
	echo
	batch_table "$CSV"
fi
if ((VHOST)); then
	((CORE)) && echo
	vhost_table
	echo
	vhost_placement_table
fi
if ((NIC)); then
	((CORE || VHOST)) && echo
	nic_tables
fi
