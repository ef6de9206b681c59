#!/usr/bin/env bash
# bench/peers/ovs-dpdk.sh - measure the OVS-DPDK peer on this machine: the
# switch a user would put between vhost-user VMs (or memif applications)
# instead of ringswitch.
#
# Open vSwitch 3.1 with DPDK (userspace datapath, one PMD thread) with two
# ports of one kind, fed by two DPDK testpmd processes: testpmd txonly
# (--size-byte frames) -> OVS -> testpmd rxonly.
#   --ports vhost (default): two dpdkvhostuserclient ports vm1, vm2; the
#     "VMs" are testpmd with a virtio_user port each, which own the sockets
#     (vdev server=1). Same testpmd command lines as ringswitch's vhost
#     benchmark (bench/lib/testpmd.sh).
#   --ports memif: two DPDK memif ports m1, m2 (type=dpdk, devargs
#     net_memif0/net_memif1,role=server, one socket each); the applications
#     are testpmd memif clients (role=client, copy mode, --no-huge), with the
#     same EAL and forwarding options as above, only the vdev differs.
# OpenFlow: sender's port -> receiver's port and back (port to port, the
# usual OVS-DPDK benchmark set-up); --normal keeps the default NORMAL action
# (a learning bridge, which floods the never-learned destination to the
# receiver's port and to the bridge's internal port).
#
# For each CPU placement (receiver CPU, sender CPU, PMD CPU) and each
# pmd-maxsleep value (a placement listed N times is measured N times):
#   - the receiver's Mpps: the median of testpmd's Rx-pps samples after the
#     first (warm-up) one, covering --seconds s; the sender's likewise;
#   - over a window of --seconds s during the traffic: packets OVS delivered to
#     the receiver's port (ovs-ofctl dump-ports, tx pkts), packets its PMD
#     received (dpif-netdev/pmd-stats-show after pmd-stats-clear) with its
#     cycles per packet, and the CPU time of ovs-vswitchd (utime+stime of all
#     its threads from /proc/PID/stat): ns of CPU per delivered packet.
# Then, idle: both testpmd started interactive (ports up, no forwarding, no
# polling), CPU of ovs-vswitchd over --idle-seconds s with the default
# settings, with other_config:pmd-maxsleep=50 and with =500.
#
# stdout (machine-readable): one line per run, one per idle setting, then
# one JSON line; with --ports memif the lines say "ports=memif size=N" and
# the JSON "ports":"memif" (the vhost lines do not name the port kind).
# Progress and diagnostics go to stderr.
#
# Needs root (hugepages: OVS always runs DPDK with --in-memory, which DPDK
# refuses with --no-huge). Installs dpdk-dev and openvswitch-switch-dpdk if
# missing. Raises vm.nr_hugepages if fewer than 300 are free and mounts
# hugetlbfs if nothing is mounted; puts both back on exit, and stops every
# process it started (also on INT/TERM/HUP).

# shellcheck source-path=SCRIPTDIR
set -euo pipefail

readonly PROG=${0##*/}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/testpmd.sh disable=SC1091 # followed with shellcheck -x
. "$HERE/../lib/testpmd.sh"
# cpu_ticks, now_s (its log and die are replaced by this script's below)
# shellcheck source=../lib/common.sh disable=SC1091 # followed with shellcheck -x
. "$HERE/../lib/common.sh"
# hugepages, starting and stopping OVS-DPDK, the bridge br0
# shellcheck source=../lib/ovs.sh disable=SC1091 # followed with shellcheck -x
. "$HERE/../lib/ovs.sh"

usage() {
	cat <<EOF
usage: $PROG [--ports vhost|memif] [--seconds N] [--size BYTES] [--placements LIST]
             [--maxsleep LIST] [--idle-seconds N] [--normal] [--raw DIR]
             [--flows FILE] [--tx-args ARGS] [--tx-pcap FILE]

  --ports KIND       vhost: dpdkvhostuserclient ports, testpmd virtio_user
                     (default); memif: DPDK memif ports (OVS the server),
                     testpmd memif clients
  --seconds N        measured seconds per placement (default 5)
  --size BYTES       testpmd --txpkts, 42..2048 (default 64)
  --placements LIST  space-separated RX,TX,PMD CPU triples: receiver testpmd,
                     sender testpmd, OVS PMD thread (default "0,1,1 0,1,0 0,0,1");
                     a triple listed N times is measured N times
  --maxsleep LIST    pmd-maxsleep values (us) to measure each placement with,
                     0 = not set, OVS's default (default "0 500")
  --idle-seconds N   idle window per pmd-maxsleep setting, 0 to skip (default 10)
  --normal           OpenFlow NORMAL action instead of port-to-port flows
  --raw DIR          keep the logs (testpmd, ovs-vswitchd, pmd-stats) in DIR
  --flows FILE       these flows (ovs-ofctl add-flows syntax; @TX@ and @RX@
                     stand for the sender's and the receiver's port) instead
                     of port-to-port flows
  --tx-args ARGS     more testpmd arguments for the sender (space-separated,
                     e.g. "--tx-ip=10.0.0.1,10.1.0.1 --tx-udp=1000,4321")
  --tx-pcap FILE     the sender replays the frames of this pcap file over and
                     over (DPDK's pcap PMD, infinite_rx, forwarded by testpmd
                     io mode to its OVS port) instead of txonly's one frame:
                     traffic with many 5-tuples (--size then only names the
                     run: the frames are the file's)

environment: OVS_DPDK_TIMEOUT  seconds to wait for start-up and traffic (default 30)

stdout: "ovs-dpdk placement ..." per run, "ovs-dpdk idle ..." per setting,
then one JSON line; with --ports memif each line says "ports=memif size=N"
after "placement"/"idle" and the JSON "ports":"memif".
EOF
}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_num() { [[ ${1:-} =~ ^-?[0-9]+([.][0-9]+)?$ ]]; }

SECS=5
SIZE=64
PLACEMENTS="0,1,1 0,1,0 0,0,1"
MAXSLEEPS="0 500"
IDLE_S=10
NORMAL=0
PORTS=vhost
RAWDIR=
FLOWS_FILE=
TX_ARGS=
TX_PCAP=
TIMEOUT=${OVS_DPDK_TIMEOUT:-30}

while (($# > 0)); do
	case $1 in
	--seconds | --size | --idle-seconds | --placements | --maxsleep | --ports | --raw | --flows | --tx-args | --tx-pcap)
		(($# >= 2)) || die "$1 needs a value (try --help)"
		opt=$1 val=$2
		shift 2
		;;
	--seconds=* | --size=* | --idle-seconds=* | --placements=* | --maxsleep=* | --ports=* | --raw=* | --flows=* | --tx-args=* | --tx-pcap=*)
		opt=${1%%=*} val=${1#*=}
		shift
		;;
	--normal)
		NORMAL=1
		shift
		continue
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
	case $opt in
	--placements) PLACEMENTS=$val ;;
	--maxsleep) MAXSLEEPS=$val ;;
	--ports)
		[[ $val == vhost || $val == memif ]] || die "--ports wants vhost or memif, got '$val'"
		PORTS=$val
		;;
	--raw) RAWDIR=$val ;;
	--flows)
		[[ -r $val ]] || die "--flows: cannot read '$val'"
		FLOWS_FILE=$val
		;;
	--tx-args) TX_ARGS=$val ;;
	--tx-pcap)
		[[ -r $val ]] || die "--tx-pcap: cannot read '$val'"
		TX_PCAP=$(realpath "$val")
		;;
	*)
		is_uint "$val" || die "$opt wants a non-negative integer, got '$val'"
		val=$((10#$val))
		case $opt in
		--seconds) SECS=$val ;;
		--size) SIZE=$val ;;
		--idle-seconds) IDLE_S=$val ;;
		esac
		;;
	esac
done
((SECS >= 1)) || die "--seconds must be at least 1"
((SIZE >= 42 && SIZE <= 2048)) || die "--size must be within 42..2048, got $SIZE"
{ is_uint "$TIMEOUT" && ((TIMEOUT >= 1)); } || die "OVS_DPDK_TIMEOUT must be a positive integer"
NCPU=$(nproc --all 2>/dev/null || getconf _NPROCESSORS_ONLN)
for p in $PLACEMENTS; do
	[[ $p =~ ^[0-9]+,[0-9]+,[0-9]+$ ]] || die "bad placement '$p' (want RX,TX,PMD)"
	IFS=, read -r a b c <<<"$p"
	((a < NCPU && b < NCPU && c < NCPU)) || die "placement $p: this machine has $NCPU CPUs"
done
for m in $MAXSLEEPS; do is_uint "$m" || die "bad --maxsleep value '$m'"; done
((EUID == 0)) || die "needs root (hugepages, and OVS-DPDK)"

# ---------------------------------------------------------------- install

install_pkgs() {
	command -v apt-get >/dev/null 2>&1 || die "$* missing and no apt-get"
	log "installing $* (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "$@" >&2 ||
		{ apt-get update -qq >&2 && apt-get install -y -qq "$@" >&2; } ||
		die "apt-get install $* failed"
}
need=()
command -v dpdk-testpmd >/dev/null 2>&1 || need+=(dpdk-dev)
[[ -x $OVS_VSWITCHD ]] || need+=(openvswitch-switch-dpdk)
((${#need[@]} == 0)) || install_pkgs "${need[@]}"
command -v dpdk-testpmd >/dev/null 2>&1 || die "dpdk-testpmd still missing"
[[ -x $OVS_VSWITCHD ]] || die "$OVS_VSWITCHD still missing"
OVS_VERSION=$("$OVS_VSWITCHD" --version 2>/dev/null | awk 'NR == 1 { print $NF }')

# ---------------------------------------------------------------- cleanup

WORKDIR=
VSWITCHD_PID= # ovs-vswitchd-dpdk (bench/lib/ovs.sh starts and stops it)
IDLE_FDS=()
declare -a PIDS=()     # testpmd processes still to stop
declare -a PREFIXES=() # --file-prefix values, runtime dirs removed at exit
DPDK_RUNDIR=$(testpmd_rundir)

# Stop processes of ours (children, all in our process group, so that a
# SIGKILL of the group also gets them): SIG to each (testpmd prints its
# totals on SIGINT and exits), SIGKILL to those left after 3 s.
#   stop_pids SIG PID...
stop_pids() {
	local sig=$1 pid i left
	shift
	for pid in "$@"; do kill "-$sig" "$pid" 2>/dev/null || true; done
	for ((i = 0; i < 30; i++)); do
		left=0
		for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left=1; done
		((left)) || break
		sleep 0.1
	done
	for pid in "$@"; do
		if kill -0 "$pid" 2>/dev/null; then
			log "pid $pid ignored SIG$sig, sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
}

stop_testpmds() {
	local fd
	((${#PIDS[@]} == 0)) || stop_pids INT "${PIDS[@]}"
	PIDS=()
	for fd in "${IDLE_FDS[@]}"; do exec {fd}>&-; done
	IDLE_FDS=()
}

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM HUP
	if [[ -n $VSWITCHD_PID ]] && kill -0 "$VSWITCHD_PID" 2>/dev/null; then
		stop_clients >/dev/null 2>&1 || true
	fi
	stop_testpmds
	ovs_stop
	for p in "${PREFIXES[@]}"; do rm -rf -- "${DPDK_RUNDIR:?}/$p"; done
	ovs_hugepages_restore
	if [[ -n $RAWDIR && -n $WORKDIR && -d $WORKDIR ]]; then
		cp "$WORKDIR"/*.log "$WORKDIR"/*.cmd "$WORKDIR"/*.txt "$RAWDIR"/ 2>/dev/null || true
	fi
	[[ -n $WORKDIR ]] && rm -rf -- "$WORKDIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/ringswitch-ovs.XXXXXX")
D=$WORKDIR
[[ -n $RAWDIR ]] && { mkdir -p "$RAWDIR" || die "cannot create $RAWDIR"; }

# ---------------------------------------------------------------- hugepages

ovs_hugepages "$D" || die "$OVS_ERROR"
[[ -z $OVS_HP_ORIG ]] || log "vm.nr_hugepages $OVS_HP_ORIG -> $(cat /proc/sys/vm/nr_hugepages) (OVS-DPDK: dpdk-socket-mem=512)"
[[ -z $OVS_HP_MOUNT ]] || log "mounted hugetlbfs on $OVS_HP_MOUNT"

# ---------------------------------------------------------------- OVS

V=(ovs_vsctl)
appctl() { ovs_appctl "$@"; }
ofctl() { ovs_ofctl "$@"; }

ovs_fail() {
	log "error: $*"
	log "---- ovs-vswitchd log, last 25 lines ----"
	ovs_log_tail 25 >&2
	exit 1
}

log "starting ovsdb-server and ovs-vswitchd-dpdk $OVS_VERSION in $D"
T_START=$(now_s)
first_pmd=${PLACEMENTS%% *}
first_pmd=${first_pmd##*,}
PMD_CPU=$first_pmd
OVS_START_TIMEOUT=$TIMEOUT
# ovsdb-server and ovs-vswitchd-dpdk stay our children, in our process
# group; the bridge br0 (netdev) is there when it returns.
ovs_start "$D" "$first_pmd" || ovs_fail "$OVS_ERROR"
VSWITCHD_PID=$OVS_VSWITCHD_PID
log "ovs-vswitchd-dpdk up $(awk -v a="$T_START" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }') s after ovsdb-server's start"
# TX_PORT: the sender's port, RX_PORT: the receiver's; $D/PORT.sock each.
# add_port PORT N: OVS port number N (0, 1) of the --ports kind.
if [[ $PORTS == vhost ]]; then
	TX_PORT=vm1 RX_PORT=vm2 PORT_TYPE=dpdkvhostuserclient
	add_port() {
		"${V[@]}" add-port br0 "$1" -- set Interface "$1" type=dpdkvhostuserclient \
			"options:vhost-server-path=$D/$1.sock"
	}
else
	# OVS is the memif server (it creates the socket when the port is
	# added); each port's vdev needs a name of its own within OVS's DPDK.
	# The client's queue counts are the connection's and must not exceed
	# the server's: OVS has 2 TX queues per port (0 for its main thread,
	# 1 for the PMD, which is the one that sends), so the receiver's client
	# needs 2 RX queues (else OVS counts every packet it forwards in
	# ovs_tx_failure_drops); testpmd polls min(rxq, txq) queues, so it
	# also asks for 2 TX queues, and OVS must then have 2 RX queues on the
	# receiver's port (options:n_rxq=2; the PMD polls both, empty). See
	# start_tp.
	# ofport_request: the same OpenFlow port numbers each time the ports
	# are added again (see ports_del), so that the flows still match.
	TX_PORT=m1 RX_PORT=m2 PORT_TYPE="dpdk memif"
	add_port() {
		local nrxq=1
		[[ $1 == "$RX_PORT" ]] && nrxq=2
		"${V[@]}" add-port br0 "$1" -- set Interface "$1" type=dpdk \
			"options:dpdk-devargs=net_memif$2,role=server,id=0,socket=$D/$1.sock,socket-abstract=no" \
			"options:n_rxq=$nrxq" "ofport_request=$(($2 + 1))"
	}
fi
# ports_add: add both ports unless they are there.
PORTS_IN=0
ports_add() {
	local n=0 p
	((PORTS_IN)) && return 0
	for p in "$TX_PORT" "$RX_PORT"; do
		add_port "$p" "$n"
		n=$((n + 1))
		[[ $("${V[@]}" get interface "$p" error 2>/dev/null) == '[]' ]] ||
			ovs_fail "port $p: $("${V[@]}" get interface "$p" error 2>&1)"
	done
	PORTS_IN=1
}
# stop_clients: stop both testpmd. memif: when either end of a memif
# connection goes away, DPDK 22.11's memif unmaps the rings from its control
# thread while the other end's polling thread may still be reading them:
# ovs-vswitchd died of SIGSEGV here when a testpmd stopped (third run of
# four at --size 1514), and a testpmd did when OVS deleted its port. So
# first pin the ports' RX queues to a CPU that has no PMD (OVS then polls
# them no more, and sends nothing to them), stop the testpmd, then delete
# the ports; ports_add adds them back for the next run. vhost ports stay.
stop_clients() {
	local off=$(((PMD_CPU + 1) % NCPU))
	if [[ $PORTS == memif ]] && ((PORTS_IN)); then
		"${V[@]}" set Interface "$TX_PORT" other_config:pmd-rxq-affinity="0:$off" \
			-- set Interface "$RX_PORT" other_config:pmd-rxq-affinity="0:$off,1:$off"
	fi
	stop_testpmds
	if [[ $PORTS == memif ]] && ((PORTS_IN)); then
		PORTS_IN=0
		"${V[@]}" del-port br0 "$TX_PORT" -- del-port br0 "$RX_PORT"
	fi
}
ports_add
if [[ -n $FLOWS_FILE ]]; then
	sed -e "s/@TX@/$TX_PORT/g" -e "s/@RX@/$RX_PORT/g" "$FLOWS_FILE" >"$D/flows.of"
	ofctl del-flows
	t0=$(date +%s.%N)
	ofctl add-flows "$D/flows.of" || ovs_fail "ovs-ofctl add-flows $FLOWS_FILE failed"
	t1=$(date +%s.%N)
	FLOWS="file:$(grep -c . "$D/flows.of")"
	log "ovs-ofctl add-flows: $(grep -c . "$D/flows.of") flows in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') s"
elif ((NORMAL)); then
	FLOWS=normal
else
	FLOWS=p2p
	ofctl del-flows
	ofctl add-flow "in_port=$TX_PORT,actions=output:$RX_PORT"
	ofctl add-flow "in_port=$RX_PORT,actions=output:$TX_PORT"
fi
ofctl dump-flows >"$D/flows.txt" 2>&1 || true
log "bridge br0 (netdev), ports $TX_PORT and $RX_PORT ($PORT_TYPE), flows: $FLOWS"

HZ=$(getconf CLK_TCK)

# Packets OVS sent to a port (live, from the datapath).
port_tx() { ofctl dump-ports "$1" 2>/dev/null | awk '$1 == "tx" { sub(/^pkts=/, "", $2); sub(/,$/, "", $2); print $2 }'; }

link_up() { [[ $("${V[@]}" get interface "$1" link_state 2>/dev/null) == up ]]; }

set_pmd_cpu() {
	local cpu=$1 i
	PMD_CPU=$cpu
	"${V[@]}" set Open_vSwitch . other_config:pmd-cpu-mask="$(printf '0x%x' $((1 << cpu)))"
	for ((i = 0; i < 100; i++)); do
		appctl dpif-netdev/pmd-rxq-show 2>/dev/null | grep -q "core_id $cpu:" && return 0
		sleep 0.1
	done
	ovs_fail "PMD thread not on CPU $cpu after 10 s"
}

# start_tp NAME CPU PORT MODE: testpmd on OVS port PORT's socket: virtio_user
# with server=1 (vhost), or a memif client (memif; the vdev is the only
# difference from bench/lib/testpmd.sh's command line). Sets STARTED_PID and
# STARTED_LOG.
SEQ=0
start_tp() {
	local name=$1 cpu=$2 port=$3 mode=$4 mac=$TESTPMD_RX_MAC prefix i
	local sock=$D/$port.sock
	[[ $port == "$TX_PORT" ]] && mac=$TESTPMD_TX_MAC
	SEQ=$((SEQ + 1))
	prefix=ringswitch-ovs-$$-$SEQ
	PREFIXES+=("$prefix")
	testpmd_argv "$cpu" "$prefix" "$sock" 1 "$mac" "$mode" "$SIZE"
	if [[ $PORTS == memif ]]; then
		for i in "${!TESTPMD_ARGV[@]}"; do
			[[ ${TESTPMD_ARGV[i]} == --vdev=* ]] &&
				TESTPMD_ARGV[i]=--vdev=net_memif0,role=client,id=0,socket=$sock,socket-abstract=no,mac=$mac
		done
		# Receiver: 2 queues each way, polled by the one forwarding
		# lcore (see add_port). Sender: 2 RX queues too (OVS's TX
		# queues, as many as OVS configured), 1 TX queue (OVS's RX
		# queue); it polls and sends on queue 0 only.
		if [[ $port == "$RX_PORT" ]]; then
			TESTPMD_ARGV+=(--rxq=2 --txq=2)
		else
			TESTPMD_ARGV+=(--rxq=2 --txq=1)
		fi
	fi
	if [[ $mode == txonly && -n $TX_ARGS ]]; then
		local extra
		read -ra extra <<<"$TX_ARGS"
		TESTPMD_ARGV+=("${extra[@]}")
	fi
	if [[ $mode == txonly && -n $TX_PCAP ]]; then
		# Port 0 the pcap replay (two RX queues, as the memif port has:
		# testpmd sets every port alike), port 1 the OVS port; io mode
		# forwards port 0's frames to port 1 (and port 1's, none, to the
		# file /dev/null). testpmd polls queue 0 only (min(rxq, txq)).
		local pcap=net_pcap0,rx_pcap=$TX_PCAP,rx_pcap=$TX_PCAP,infinite_rx=1,tx_pcap=/dev/null
		local kept=() arg
		for arg in "${TESTPMD_ARGV[@]}"; do
			case $arg in
			--vdev=*) kept+=("--vdev=$pcap" "$arg") ;;
			--forward-mode=txonly) kept+=(--forward-mode=io) ;;
			--txpkts=* | --eth-peer=*) ;;
			*) kept+=("$arg") ;;
			esac
		done
		TESTPMD_ARGV=("${kept[@]}")
	fi
	STARTED_LOG=$D/$(printf '%02d' "$SEQ")-testpmd-$name.log
	printf '%s\n' "${TESTPMD_ARGV[*]}" >"$STARTED_LOG.cmd"
	: >"$STARTED_LOG"
	if [[ $mode == idle ]]; then
		# Interactive: stdin must stay open (an EOF makes testpmd quit).
		local fifo=$D/$name.fifo fd
		mkfifo "$fifo"
		exec {fd}<>"$fifo"
		IDLE_FDS+=("$fd")
		"${TESTPMD_ARGV[@]}" <"$fifo" >"$STARTED_LOG" 2>&1 &
	else
		"${TESTPMD_ARGV[@]}" </dev/null >"$STARTED_LOG" 2>&1 &
	fi
	STARTED_PID=$!
	PIDS+=("$STARTED_PID")
	log "$name: ${TESTPMD_ARGV[*]}"
}

tp_fail() {
	local msg=$1 f
	shift
	log "error: $msg"
	for f in "$@"; do
		log "---- $(basename "$f") ----"
		testpmd_tail "$f" >&2
	done
	log "---- ovs-vswitchd log, last 10 lines ----"
	tail -n 10 "$D/vswitchd.log" | cut -c1-220 >&2
	exit 1
}

# The port's link is up for OVS. vhost: the database's link_state (OVS
# updates it at once on a vhost connection). memif: OVS learns a DPDK port's
# link state from a watchdog that runs every 5 s, so the database would
# cost up to 5 s per testpmd; testpmd itself waits for the memif link
# before it says it is ready ("Checking link statuses... Done"), which is
# enough (OVS polls and sends whatever OVS's link state says), and traffic
# is checked anyway.
port_up() { [[ $PORTS == memif ]] || link_up "$1"; }

# Wait until a testpmd is up and OVS reports its port's link up.
wait_tp() {
	local pid=$1 logf=$2 port=$3 deadline=$((SECONDS + TIMEOUT))
	while :; do
		kill -0 "$pid" 2>/dev/null || tp_fail "testpmd ($port) exited during start-up" "$logf"
		testpmd_failed "$logf" && tp_fail "testpmd ($port) failed to start its port" "$logf"
		testpmd_ready "$logf" && port_up "$port" && return 0
		((SECONDS < deadline)) || tp_fail "testpmd ($port) not up after ${TIMEOUT}s" "$logf"
		sleep 0.2
	done
}

# ---------------------------------------------------------------- throughput

PL_JSON=()
BEST=
BEST_MPPS=0
set_maxsleep() {
	if (($1 == 0)); then
		"${V[@]}" remove Open_vSwitch . other_config pmd-maxsleep
	else
		"${V[@]}" set Open_vSwitch . other_config:pmd-maxsleep="$1"
	fi
}

# The stdout lines name the port kind, except vhost's (as before memif).
LINE_TAG='' JSON_TAG=''
if [[ $PORTS != vhost ]]; then
	LINE_TAG="ports=$PORTS size=$SIZE "
	JSON_TAG=",\"ports\":\"$PORTS\""
fi
# Frames the rx testpmd counted and their mean size (bytes), from its last
# port statistics block: "RX-packets: N RX-missed: M RX-bytes: B".
rx_frames() {
	testpmd_clean "$1" | awk '$1 == "RX-packets:" && $5 == "RX-bytes:" { p = $2; b = $6 }
		END { if (p > 0) printf "%d packets, %.1f bytes each", p, b / p; else print "no packets" }'
}

RUN=0
for run in $(for pl in $PLACEMENTS; do for m in $MAXSLEEPS; do echo "$pl,$m"; done; done); do
	IFS=, read -r rxc txc pmdc msl <<<"$run"
	RUN=$((RUN + 1))
	tag=$RUN-$rxc$txc$pmdc-ms$msl
	log "placement rx testpmd CPU $rxc, tx testpmd CPU $txc, PMD CPU $pmdc, pmd-maxsleep=$msl: ${SECS}s"
	ports_add
	set_pmd_cpu "$pmdc"
	set_maxsleep "$msl"
	start_tp "rx-$tag" "$rxc" "$RX_PORT" rxonly
	rxpid=$STARTED_PID rxlog=$STARTED_LOG
	wait_tp "$rxpid" "$rxlog" "$RX_PORT"
	start_tp "tx-$tag" "$txc" "$TX_PORT" txonly
	txpid=$STARTED_PID txlog=$STARTED_LOG
	wait_tp "$txpid" "$txlog" "$TX_PORT"
	deadline=$((SECONDS + TIMEOUT))
	until awk '$1 == "Rx-pps:" && $2 + 0 > 0 { f = 1; exit } END { exit !f }' <(testpmd_clean "$rxlog"); do
		{ kill -0 "$rxpid" 2>/dev/null && kill -0 "$txpid" 2>/dev/null; } || tp_fail "a testpmd died" "$rxlog" "$txlog"
		((SECONDS < deadline)) || tp_fail "no packets received within ${TIMEOUT}s" "$rxlog" "$txlog"
		sleep 0.2
	done
	sleep 1.5 # past the warm-up sample
	appctl dpif-netdev/pmd-stats-clear >/dev/null
	t0=$(now_s) c0=$(cpu_ticks "$VSWITCHD_PID") d0=$(port_tx "$RX_PORT")
	sleep "$SECS"
	t1=$(now_s) c1=$(cpu_ticks "$VSWITCHD_PID") d1=$(port_tx "$RX_PORT")
	pmdstats=$(appctl dpif-netdev/pmd-stats-show 2>&1) || true
	printf '%s\n' "$pmdstats" >"$D/pmd-stats-$tag.txt"
	"${V[@]}" get interface "$RX_PORT" statistics >>"$D/pmd-stats-$tag.txt" 2>&1 || true
	drops=$(grep -o 'ovs_tx_failure_drops=[0-9]*' "$D/pmd-stats-$tag.txt" | cut -d= -f2) || true
	((${drops:-0} == 0)) || log "  OVS failed to send $drops packets to $RX_PORT so far (ovs_tx_failure_drops since the port was added, as of the database's last update: every 5 s)"
	# The samples must cover the window; testpmd prints a block every 1-2 s.
	deadline=$((SECONDS + 10))
	while awk -v g="$(testpmd_samples RX "$rxlog" | testpmd_covered)" -v s="$SECS" 'BEGIN { exit !(g < s) }' &&
		((SECONDS < deadline)); do
		sleep 0.5
	done
	# (awk stops reading once the samples cover the window: a SIGPIPE for
	# the sed in front of it with a long log, not an error.)
	rxs=$(testpmd_samples RX "$rxlog" "$SECS") || true
	if [[ -n $TX_PCAP ]]; then
		# The OVS port is port 1; port 0's blocks (the pcap replay) are not
		# what was sent to OVS.
		txs=$(testpmd_samples TX <(testpmd_port_blocks "$txlog" 1) "$SECS") || true
	else
		txs=$(testpmd_samples TX "$txlog" "$SECS") || true
	fi
	stop_clients
	log "  rx testpmd counted $(rx_frames "$rxlog")"
	rx_mpps=$(testpmd_median <<<"$rxs" | awk '{ printf "%.3f", $1 / 1e6 }')
	tx_mpps=$(testpmd_median <<<"$txs" | awk '{ printf "%.3f", $1 / 1e6 }')
	log "  rx samples (Mpps, s): $(awk '{ printf "%s%.3f (%.2f)", (NR > 1 ? " " : ""), $1 / 1e6, $2 }' <<<"$rxs")"
	# The PMD thread's own counters (cleared at the window's start).
	pmd=$(awk -v c="core_id $pmdc:" 'index($0, c) { on = 1; next } /^[a-z]/ { on = 0 } on' <<<"$pmdstats")
	pmd_pkts=$(awk '/packets received:/ { print $3 }' <<<"$pmd")
	pmd_cpp=$(awk '/avg cycles per packet:/ { print $5 }' <<<"$pmd")
	pmd_proc_cpp=$(awk '/avg processing cycles per packet:/ { print $6 }' <<<"$pmd")
	pmd_busy=$(awk '/processing cycles:/ { gsub(/[()%]/, "", $4); print $4 }' <<<"$pmd")
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	if is_num "$c0" && is_num "$c1" && is_num "$d0" && is_num "$d1" && ((d1 > d0)); then
		deliv_mpps=$(awk -v n=$((d1 - d0)) -v w="$wall" 'BEGIN { printf "%.3f", n / w / 1e6 }')
		cpu_pct=$(awk -v c=$((c1 - c0)) -v hz="$HZ" -v w="$wall" 'BEGIN { printf "%.1f", 100 * c / hz / w }')
		ns_pp=$(awk -v c=$((c1 - c0)) -v hz="$HZ" -v n=$((d1 - d0)) 'BEGIN { printf "%.1f", c / hz * 1e9 / n }')
		ns_in=$(awk -v c=$((c1 - c0)) -v hz="$HZ" -v n="${pmd_pkts:-0}" 'BEGIN { if (n > 0) printf "%.1f", c / hz * 1e9 / n; else print "null" }')
	else
		deliv_mpps=null cpu_pct=null ns_pp=null ns_in=null
		log "  warning: no counters for the window (vswitchd ticks $c0 -> $c1, $RX_PORT tx $d0 -> $d1)"
	fi
	is_num "$rx_mpps" || rx_mpps=null
	is_num "$tx_mpps" || tx_mpps=null
	is_num "$pmd_cpp" || pmd_cpp=null
	is_num "$pmd_proc_cpp" || pmd_proc_cpp=null
	is_num "$pmd_busy" || pmd_busy=null
	is_num "$pmd_pkts" || pmd_pkts=null
	printf 'ovs-dpdk placement %srx_cpu=%s tx_cpu=%s pmd_cpu=%s pmd_maxsleep=%s rx_mpps=%s tx_mpps=%s delivered_mpps=%s pmd_in_pkts=%s pmd_cycles_per_pkt=%s pmd_proc_cycles_per_pkt=%s vswitchd_cpu_pct=%s cpu_ns_per_delivered_pkt=%s cpu_ns_per_pmd_pkt=%s\n' \
		"$LINE_TAG" "$rxc" "$txc" "$pmdc" "$msl" "$rx_mpps" "$tx_mpps" "$deliv_mpps" "$pmd_pkts" "$pmd_cpp" "$pmd_proc_cpp" "$cpu_pct" "$ns_pp" "$ns_in"
	log "  received $rx_mpps Mpps (sender $tx_mpps Mpps; OVS delivered $deliv_mpps Mpps of $pmd_pkts in), PMD $pmd_cpp cycles/pkt ($pmd_proc_cpp processing), vswitchd $cpu_pct% CPU = $ns_pp ns/delivered pkt"
	j=$(printf '{"rx_cpu":%s,"tx_cpu":%s,"pmd_cpu":%s,"pmd_maxsleep":%s,"rx_mpps":%s,"tx_mpps":%s,"delivered_mpps":%s,"pmd_in_pkts":%s,"pmd_cycles_per_pkt":%s,"pmd_proc_cycles_per_pkt":%s,"pmd_busy_pct":%s,"vswitchd_cpu_pct":%s,"cpu_ns_per_delivered_pkt":%s,"cpu_ns_per_pmd_pkt":%s,"window_s":%s}' \
		"$rxc" "$txc" "$pmdc" "$msl" "$rx_mpps" "$tx_mpps" "$deliv_mpps" "$pmd_pkts" "$pmd_cpp" "$pmd_proc_cpp" "$pmd_busy" "$cpu_pct" "$ns_pp" "$ns_in" "$wall")
	PL_JSON+=("$j")
	if is_num "$rx_mpps" && awk -v a="$rx_mpps" -v b="$BEST_MPPS" 'BEGIN { exit !(a > b) }'; then
		BEST=$j BEST_MPPS=$rx_mpps
	fi
	for p in "${PREFIXES[@]}"; do rm -rf -- "${DPDK_RUNDIR:?}/$p"; done
done

# ---------------------------------------------------------------- idle

IDLE_JSON=
if ((IDLE_S > 0)); then
	IFS=, read -r rxc txc pmdc <<<"${PLACEMENTS%% *}"
	log "idle: both testpmd interactive (ports up, not forwarding), PMD on CPU $pmdc, ${IDLE_S}s per setting"
	ports_add
	set_pmd_cpu "$pmdc"
	start_tp idle-rx "$rxc" "$RX_PORT" idle
	wait_tp "$STARTED_PID" "$STARTED_LOG" "$RX_PORT"
	start_tp idle-tx "$txc" "$TX_PORT" idle
	wait_tp "$STARTED_PID" "$STARTED_LOG" "$TX_PORT"
	tp_pids=("${PIDS[@]}")
	parts=()
	for ms in default 50 500; do
		set_maxsleep "${ms/default/0}"
		sleep 2 # settle
		t0=$(now_s) c0=$(cpu_ticks "$VSWITCHD_PID")
		tp0=0
		for p in "${tp_pids[@]}"; do tp0=$((tp0 + $(cpu_ticks "$p"))); done
		sleep "$IDLE_S"
		t1=$(now_s) c1=$(cpu_ticks "$VSWITCHD_PID")
		tp1=0
		for p in "${tp_pids[@]}"; do tp1=$((tp1 + $(cpu_ticks "$p"))); done
		pct=$(awk -v c=$((c1 - c0)) -v hz="$HZ" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", 100 * c / hz / (b - a) }')
		tpct=$(awk -v c=$((tp1 - tp0)) -v hz="$HZ" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", 100 * c / hz / (b - a) }')
		printf 'ovs-dpdk idle %spmd_maxsleep=%s vswitchd_cpu_pct=%s testpmd_cpu_pct=%s\n' "$LINE_TAG" "$ms" "$pct" "$tpct"
		log "  idle, pmd-maxsleep=$ms: ovs-vswitchd $pct% of a core (both testpmd: $tpct%)"
		parts+=("\"$ms\":$pct")
	done
	grep -E 'max sleep|load based sleeps' "$D/vswitchd.log" | tail -n 3 | cut -c1-200 >&2 || true
	stop_clients
	IDLE_JSON=$(
		IFS=,
		printf '{%s}' "${parts[*]}"
	)
fi

pl=$(
	IFS=,
	printf '%s' "${PL_JSON[*]}"
)
printf '{"peer":"ovs-dpdk"%s,"version":"%s","flows":"%s","size":%d,"seconds":%d,"idle_seconds":%d,"placements":[%s],"best":%s,"idle_cpu_pct":%s}\n' \
	"$JSON_TAG" "$OVS_VERSION" "$FLOWS" "$SIZE" "$SECS" "$IDLE_S" "$pl" "${BEST:-null}" "${IDLE_JSON:-null}"
