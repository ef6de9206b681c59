#!/usr/bin/env bash
# bench/run.sh - measure ringswitch and report it beside the DPDK memif peer,
# for VM ports the OVS-DPDK peer, and for NIC ports DPDK net_af_xdp,
# net_af_packet and a Linux bridge, measured in the same run. See
# bench/README.md.
#
#   bench/run.sh [--quick] [--out DIR] [--no-vhost | --vhost-only | --nic-only]
#
# Writes DIR/REPORT.md (also printed on stdout; drawn by `ringswitch-bench
# report` from DIR/data/*.tsv, with the issue's targets from
# bench/targets.tsv), DIR/data/, DIR/run.log (progress and every failure's
# reason) and DIR/raw/ (each process's output). Progress goes to stderr.

# shellcheck source-path=SCRIPTDIR
set -uo pipefail

PROG=${0##*/}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

# shellcheck source=lib/common.sh
. "$BENCH_DIR/lib/common.sh"
# shellcheck source=lib/report.sh
. "$BENCH_DIR/lib/report.sh"
# shellcheck source=lib/samples.sh
. "$BENCH_DIR/lib/samples.sh"
# shellcheck source=lib/measure.sh
. "$BENCH_DIR/lib/measure.sh"
# shellcheck source=lib/testpmd.sh
. "$BENCH_DIR/lib/testpmd.sh"

usage() {
	cat <<EOF
usage: $PROG [--quick] [--out DIR] [--no-vhost | --vhost-only | --nic-only]
       [--guest-halt-poll NS]

  --quick       shorter measurements and a shorter batch sweep
  --out DIR     where REPORT.md, data/, run.log and raw/ go
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

Builds ringswitch and ringswitch-bench (cargo build --release -p
ringswitch-cli -p ringswitch-bench), starts its own
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

# The round trips, the batch sweep, idle and memory are measured by
# ringswitch-bench run with bench/params.tsv (bench/compare's parameters).
if ((QUICK)); then
	TPUT_S=2 MEMIF_S=3
else
	TPUT_S=5 MEMIF_S=5
fi
IDLE_S=$(param idle_secs) VM_S=$(param vm_secs)
RUNS=1
((VHOST || CORE || NIC)) || {
	usage >&2
	echo "$PROG: these options leave nothing to measure" >&2
	exit 2
}
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
rm -rf -- "$OUT/REPORT.md" "$OUT/batch.csv" "$OUT/results.tsv" "$OUT/data" "$OUT/plots"
samples_init "$OUT/data"

WORK=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	cleanup_all
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

RS= BENCH=
BUILD_ERR=
log "building: cargo build --release -p ringswitch-cli -p ringswitch-bench"
if run_fg build "" 1800 cargo build --release -p ringswitch-cli -p ringswitch-bench; then
	# Run a private copy: others may rebuild target/ while we measure.
	# ringswitchd beside it: `ringswitch serve` runs the daemon from there.
	if cp "$ROOT/target/release/ringswitch" "$ROOT/target/release/ringswitchd" "$ROOT/target/release/ringswitch-bench" "$WORK/"; then
		RS=$WORK/ringswitch BENCH=$WORK/ringswitch-bench
		H_VERSION=$("$RS" --version 2>/dev/null)
	else
		BUILD_ERR="target/release/ringswitch, ringswitchd or ringswitch-bench missing after the build"
	fi
else
	rc=$?
	BUILD_ERR="cargo build failed: $(why "$BG_NAME" "$rc")"
fi
[[ -n $BUILD_ERR ]] && log "error: $BUILD_ERR"

ALL_RS_KEYS=(pipe_blocking_mpps pipe_busy_mpps pipe_big_mpps
	sw60_rx_mpps sw60_tx_mpps sw60_drops sw60_drop_pct
	sw1514_rx_mpps sw1514_tx_mpps sw1514_drops sw1514_drop_pct)

# ------------------------------------------------------------ measurements

if ((CORE)) && [[ -n $RS ]]; then
	measure_pipe "$TPUT_S"
	measure_switch "$TPUT_S"
	daemon_stop # nothing of ours runs while memif measures
	measure_memif "$MEMIF_S"
	bench_run latency,batch,idle
elif ((CORE)); then
	failed "$BUILD_ERR" "${ALL_RS_KEYS[@]}"
	for s in latency batch idle memory; do miss "$s" "every case" "ringswitch" "$BUILD_ERR"; done
	measure_memif "$MEMIF_S"
fi
# DPDK's testpmd stands in for the VMs (ovs-dpdk.sh installs OVS itself)
# and generates and receives on the NIC section's veth.
if ((VHOST || NIC)) && ! command -v dpdk-testpmd >/dev/null 2>&1 && ((EUID == 0)) && command -v apt-get >/dev/null 2>&1; then
	log "installing dpdk-dev (dpdk-testpmd)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >>"$LOGFILE" 2>&1 ||
		{ apt-get update -qq >>"$LOGFILE" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >>"$LOGFILE" 2>&1; }
fi
((VHOST)) && bench_run vm
# The NIC section (its note too) by ringswitch-bench run with
# bench/params.tsv's nic_* parameters, as bench/compare measures it.
((NIC)) && bench_run nic

# ------------------------------------------------------------ data

# The figures of sections 1, 2 and 7 as samples, named as bench/compare
# names them (bench/targets.tsv judges them by these names).
if ((CORE)); then
	c="process to process, 60 B" sys="ringswitch pipe"
	take pipe_blocking_mpps throughput "$c" "$sys" received Mpps higher - 1
	take pipe_busy_mpps throughput "$c, busy-waiting" "$sys" received Mpps higher - 1
	take pipe_big_mpps throughput "$c, 4096 slots, batch 2048" "$sys" received Mpps higher - 1
	take memif64_mpps throughput "$c" "DPDK memif (testpmd)" received Mpps higher - 1
	take memif1514_mpps throughput "process to process, 1514 B" "DPDK memif (testpmd)" received Mpps higher - 1
	for len in 60 1514; do
		c="through a switch, $len B" sys="ringswitch switch, 2 ring ports"
		take "sw${len}_rx_mpps" switch "$c" "$sys" received Mpps higher - 1
		take "sw${len}_tx_mpps" switch "$c" "$sys" sent Mpps higher - 1
		take "sw${len}_drops" switch "$c" "$sys" "dropped (drop_rx_full at the receiver)" packets lower - 1
		take "sw${len}_drop_pct" switch "$c" "$sys" "dropped, % of sent" "%" lower - 1
	done
fi
ELAPSED=$((SECONDS - T_START))
run_flags=
if ((!CORE && VHOST && !NIC)); then
	run_flags=" --vhost-only"
elif ((!CORE && !VHOST)); then
	run_flags=" --nic-only"
elif ((!VHOST)); then
	run_flags=" --no-vhost"
fi
meta date "$H_DATE"
meta command "bench/run.sh$( ((QUICK)) && echo " --quick")$run_flags"
meta mode "$( ((QUICK)) && echo quick || echo full)"
meta runs 1
meta elapsed_s "$ELAPSED"
meta host "$(hostname)"
meta kernel "$H_KERNEL"
meta cpu_model "$H_CPU"
meta cores "$NCPU"
meta rustc "$H_RUSTC"
meta commit "$H_COMMIT$( ((H_DIRTY > 0)) && echo " (working tree differs from it in $H_DIRTY tracked files)")"
meta ringswitch "${H_VERSION:-not built}"
meta load_start "$H_LOAD0"
meta load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
meta busy_start "$H_BUSY0% of all CPUs in the second before the run (top: $H_TOP0)"
meta guest_halt_poll_ns "$H_HALT_POLL; with 0 every wake-up of a thread on an idle vCPU is a halt exit, which sets the blocking figures (bench/floors.sh)"
cp "$BENCH_DIR/targets.tsv" "$DATA/targets.tsv" || log "warning: no bench/targets.tsv: the report has no Targets table"

if ((CORE)); then
	note throughput "Two CPUs. The receiver (pkt-gen rx) runs pinned to CPU $RX_CPU and the sender (pkt-gen tx) to CPU $TX_CPU with \`taskset\`; no daemon thread is on a pipe's data path. 60 B, \`-b 512\`, blocking (and \`--busy\` on both), ${TPUT_S} s; also 4096 slots and \`-b 2048\`. Throughput is the receiver's: pkt-gen rx counts from its first to its last packet. DPDK memif: \`bench/peers/memif.sh --seconds ${MEMIF_S} --size 64\` (and 1514), testpmd txonly on CPU $TX_CPU → rxonly on CPU $RX_CPU, both busy-polling, run while no ringswitch process runs; its 64 B is testpmd \`--txpkts=64\`, 4 bytes more than ringswitch's 60 B (netmap's convention, without CRC)."
	note switch "Two ports on a switch of their own (\`valebench60:a\` → \`valebench60:b\`), ${TPUT_S} s; the worker gets CPU $TX_CPU (\`serve --worker-cpus $TX_CPU\`) and both pkt-gens share CPU $RX_CPU, since three busy threads cannot each have a core here. pkt-gen's broadcast frames flood to the one other port; drops are \`drop_rx_full\` of the receiving port from \`ctl stats --json\` (read after the sender stopped, while the receiver still holds its port), also as a share of the packets the sender's pkt-gen reports sent."
	note latency "\`ringswitch-bench run --sections latency\` (bench/params.tsv's ping_n round trips): ping on CPU $TX_CPU, pong on CPU $RX_CPU, burst 1; busy is \`--busy\` on ping and pong. Blocking through the switch, the daemon runs with \`--idle-poll-us 50\`. Busy RTT through the switch needs three busy-waiting threads (ping, worker, pong), one more than this machine has cores, so it is measured with the worker sleeping between batches; it cannot meet a busy-wait target here. The target is judged on p50."
	note batch "\`ringswitch-bench run --sections batch\` (bench/params.tsv's batches and batch_secs): for the pipe, pkt-gen \`-b\` on both ends; for the switch, the daemon restarted per point with \`--batch N\` and pkt-gen \`-b N\` on both ends (on-demand ports \`vale0:sa\` → \`vale0:sb\`)."
	note idle "A fresh daemon, 8 pkt-gen rx (blocking) on \`vale0:i1..i8\`, no traffic; CPU from \`/proc/PID/stat\` utime+stime (all threads) over ${IDLE_S} s, as % of one core (one clock tick over the window, in run.log, is the resolution of these figures)."
	note memory "\`VmRSS − RssShmem\` of the daemon (rings and buffers live in memfds, which count as shmem), with the 8 idle ports open (8 client connections), then with 56 persistent ports \`vale0:p9..p64@conf:slots=64\` added (64 in all, no clients); per port = the difference / 56 (the 8-port figure's RssAnon and RssFile, the mapped binary and libraries, are in run.log)."
	note general "The machine is shared with other jobs (see the load above): figures are noisy, single runs. Reasons and process output: \`run.log\` and \`raw/\` in this directory."
fi

if ((VHOST)); then
	note vm "\`ringswitch-bench run --sections vm\` (bench/params.tsv's vm_secs, vm_switch_cpu, vm_ovs_maxsleeps): two DPDK testpmd processes with a virtio_user port each stand in for fast VMs (testpmd owns each socket, \`server=1\`; \`--no-huge\`, one queue pair): txonly (64-byte frames) on CPU $TX_CPU → the switch → rxonly on CPU $RX_CPU, ${VM_S} s windows. ringswitch: \`ctl port add valevm:vmN --vhost-user PATH --client\`, a fresh \`serve --workers 1 --worker-cpus W\` per run; OVS-DPDK: \`bench/peers/ovs-dpdk.sh\` (dpdkvhostuserclient ports, one PMD on the same CPU W, port-to-port flows), with and without \`other_config:pmd-maxsleep=500\`. Idle: both testpmd interactive (ports up, not forwarding), the switch process's CPU over ${IDLE_S} s (OVS: default, pmd-maxsleep=50 and =500)."
fi

# ------------------------------------------------------------ report

if [[ -z $BENCH ]]; then
	die "no report: ringswitch-bench did not build; the data is in $DATA"
fi
"$BENCH" report "$DATA" --out "$OUT" >>"$LOGFILE" 2>&1 ||
	die "ringswitch-bench report could not write the report from $DATA (see $LOGFILE)"
log "done in ${ELAPSED} s: $OUT/REPORT.md"
cat "$OUT/REPORT.md"
