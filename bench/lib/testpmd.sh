# shellcheck shell=bash
# bench/lib/testpmd.sh - DPDK testpmd with a virtio_user port as a fast
# userspace "VM": the command line of OVS-DPDK's frontends
# (bench/peers/ovs-dpdk.sh), the same as ringswitch's in `ringswitch-bench
# run --sections vm` (crates/bench/src/run/testpmd.rs; a test there keeps
# the two equal), so that both switches see exactly the same frontends; and
# the parsing of testpmd's statistics (ovs-dpdk.sh).
# Sourced, not run; needs nothing else.

# The MAC addresses of the two frontends. The sender's frames carry the
# receiver's MAC as destination (--eth-peer): unicast. A learning switch
# never learns it (the receiver sends nothing), so it floods them, here to
# the one other port.
# shellcheck disable=SC2034 # used by the scripts that source this file
TESTPMD_TX_MAC=52:54:00:00:00:01
TESTPMD_RX_MAC=52:54:00:00:00:02

# testpmd_argv CPU PREFIX SOCKET SERVER MAC MODE [FRAME_BYTES]
# Sets TESTPMD_ARGV: both lcores (main and forwarding) on CPU, --no-huge
# (the memory is one shared memfd, which vhost-user backends map), one queue.
# SERVER=1: testpmd owns the socket (vdev server=1) and the switch connects.
# MODE: txonly (FRAME_BYTES-byte frames to TESTPMD_RX_MAC), rxonly, or idle
# (interactive, ports started, no forwarding: no lcore polls; give it a stdin
# that stays open).
testpmd_argv() {
	local cpu=$1 prefix=$2 sock=$3 server=$4 mac=$5 mode=$6 size=${7:-64}
	local vdev="net_virtio_user0,path=$sock,queues=1,mac=$mac"
	((server)) && vdev+=",server=1"
	TESTPMD_ARGV=(dpdk-testpmd "--lcores=0@$cpu,1@$cpu" --no-huge -m 1024 --no-pci
		--file-prefix "$prefix" "--vdev=$vdev" -- --no-mlockall --total-num-mbufs=16384)
	case $mode in
	txonly) TESTPMD_ARGV+=(--forward-mode=txonly "--txpkts=$size" "--eth-peer=0,$TESTPMD_RX_MAC" --stats-period 1) ;;
	rxonly) TESTPMD_ARGV+=(--forward-mode=rxonly --stats-period 1) ;;
	idle) TESTPMD_ARGV+=(-i --forward-mode=rxonly) ;;
	*) return 1 ;;
	esac
}

# DPDK's per-prefix runtime directory.
testpmd_rundir() {
	if ((EUID == 0)); then echo /var/run/dpdk; else echo "${XDG_RUNTIME_DIR:-/tmp}/dpdk"; fi
}

# A testpmd log without terminal escapes.
testpmd_clean() { sed $'s/\x1b\\[[0-9;]*[A-Za-z]//g' "$1" 2>/dev/null; }

# 0 if the log shows a start-up failure.
testpmd_failed() {
	grep -aqE 'Fail to start port|EAL: Error|EAL: FATAL|Cannot init|failed to parse device|probe failed|No probed ethernet devices|failed to initialize|Failed to' "$1" 2>/dev/null
}

# 0 once the port is up: non-interactive testpmd says "start packet
# forwarding", interactive testpmd prints its prompt.
testpmd_ready() {
	grep -aqE 'start packet forwarding|testpmd> ' "$1" 2>/dev/null
}

# The error lines and the tail of a testpmd log, without statistics blocks.
testpmd_tail() {
	local clean
	clean=$(testpmd_clean "$1" |
		grep -avE '^ *(#{8,}.*|Port statistics =+|RX-(packets|errors|nombuf):.*|TX-packets:.*|Throughput \(since last show\)|[RT]x-pps:.*)? *$' || true)
	grep -a -m 10 -iE 'error|fail|invalid|unrecognized|cannot|unable|no such|denied' <<<"$clean" || true
	echo "  (last lines:)"
	tail -n "${2:-12}" <<<"$clean" | sed 's/^/  /'
}

# Samples from testpmd's periodic statistics, one "PPS SECONDS" line each:
# testpmd prints per block the cumulative counter and the rate since the
# previous block (exact, from clock_gettime); the interval of a sample is
# counter delta / rate. The zero samples before traffic and the first
# non-zero one (it covers the start) are dropped. SKIP further samples are
# dropped after it; stops once the samples cover MAXSEC seconds (0: all).
#   testpmd_samples RX|TX LOG [MAXSEC] [SKIP]
testpmd_samples() {
	local cnt=$1-packets: rate
	rate=${1:0:1}$(tr '[:upper:]' '[:lower:]' <<<"${1:1}")-pps:
	testpmd_clean "$2" | awk -v cnt="$cnt" -v rate="$rate" -v max="${3:-0}" -v skip="${4:-0}" '
		$1 == cnt { pk = $2 + 0; next }
		$1 == rate {
			pps = $2 + 0
			if (!on) { if (pps > 0) on = 1; prev = pk; next }
			dt = pps > 0 ? (pk - prev) / pps : 1
			prev = pk
			if (skip > 0) { skip--; next }
			printf "%d %.6f\n", pps, dt
			tot += dt
			if (max && tot >= max) exit
		}'
}

# The statistics blocks of port PORT only (a testpmd with several ports
# prints a block per port, each headed "NIC statistics for port N").
#   testpmd_port_blocks LOG PORT
testpmd_port_blocks() {
	testpmd_clean "$1" | awk -v p="$2" '/NIC statistics for port/ { on = ($(NF - 1) == p) } on'
}

# Seconds covered by testpmd_samples output on stdin.
testpmd_covered() { awk '{ t += $2 } END { printf "%.3f\n", t }'; }

# Median of the first column on stdin; nothing for no input.
testpmd_median() {
	cut -d' ' -f1 | sort -g | awk '{ v[NR] = $1 }
		END { if (NR == 0) exit
		      if (NR % 2) print v[(NR + 1) / 2]
		      else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
