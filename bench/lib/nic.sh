# shellcheck shell=bash
# bench/lib/nic.sh - section 9 of bench/run.sh: NIC ports. A veth pair
# between two network namespaces; DPDK testpmd txonly (64-byte frames) on
# one end, and on the other end, one at a time:
#
#   - ringswitch: the daemon in the receiver's namespace, `ctl attach
#     SWITCH vethB --mode native|generic|packet`, pkt-gen rx on a ring port
#     of the same switch (the NIC's frames flood to it);
#   - DPDK testpmd rxonly with net_af_xdp, then with net_af_packet;
#   - a Linux bridge: vethB and vethC in it, frames counted at vethD (the
#     other end of vethC), once by testpmd net_af_packet rxonly and once by
#     the kernel's rx counter with nothing consuming them.
#
# The generator is the same for every receiver: whichever of net_af_xdp and
# net_af_packet sends faster on the veth here (measured first). Everything
# runs in namespaces rsbn-PID-{gen,rx,d}, deleted after each case and on
# exit (nic_cleanup, from run.sh's trap). Needs root.
#
# Three CPU placements. A veth delivers in its sender's context: without
# help the receive side's kernel work (veth, XDP, the copy into an AF_XDP
# ring, AF_PACKET, the bridge) runs as softirq on the generator's CPU,
# whatever CPU the receiving process is on. "napi" moves it to the
# receiver's CPU, as a NIC whose interrupt goes to the receiver's CPU would:
# GRO on vethB and TSO off on vethA (so that the veth receives through NAPI
# even without XDP), threaded NAPI (/sys/class/net/vethB/threaded), and its
# kthread pinned there.
#
# Sourced after common.sh, report.sh, measure.sh and testpmd.sh. Uses RS,
# WORK, RAW, LOGFILE, RX_CPU, TX_CPU, BUILD_ERR.

# A port's counters from a `ctl stats --json` snapshot: vstat JSON PORT FIELD
vstat() { jq -r --arg p "$2" --arg f "$3" '.[] | select(.name == $p) | .[$f] // empty' <<<"$1" 2>/dev/null; }

NIC_NS_GEN=rsbn-$$-gen # the generator's namespace: NIC_IF_A
NIC_NS_RX=rsbn-$$-rx   # the receivers': NIC_IF_B (and the bridge)
NIC_NS_D=rsbn-$$-d     # the bridge case's far end: NIC_IF_D
NIC_IF_A=rsbnA NIC_IF_B=rsbnB NIC_IF_C=rsbnC NIC_IF_D=rsbnD NIC_BR=rsbnbr
NIC_SW=valenic # ringswitch's switch: NIC port + sink ring port
NIC_WARM_S=2   # seconds of traffic before a window starts
# Placements: NAME:GENERATOR_CPU:RECEIVER_CPU:THREADED_NAPI (set by nic_measure).
NIC_PLACEMENTS=()
# Receivers, in order.
NIC_CASES=(rsnative rsgeneric rspacket dpdkxdp dpdkpacket brapp brkernel)
NIC_GEN_KINDS=(af_xdp af_packet)
NIC_GEN= # the generator picked: af_xdp or af_packet
NIC_PREFIXES=()
NIC_SEQ=0
NIC_SOCK=
NIC_DTPID= # the daemon's timeout process
NIC_DPID=  # the daemon
NIC_ERR=

# shellcheck disable=SC2016 # Markdown backquotes
nic_title() {
	case $1 in
	rsnative) printf 'ringswitch, `ctl attach --mode native` (AF_XDP, XDP in the veth driver) → ring port' ;;
	rsgeneric) printf 'ringswitch, `ctl attach --mode generic` (AF_XDP over generic XDP) → ring port' ;;
	rspacket) printf 'ringswitch, `ctl attach --mode packet` (AF_PACKET) → ring port' ;;
	dpdkxdp) printf 'DPDK testpmd rxonly, net_af_xdp' ;;
	dpdkpacket) printf 'DPDK testpmd rxonly, net_af_packet' ;;
	brapp) printf 'Linux bridge → veth → DPDK testpmd rxonly, net_af_packet' ;;
	brkernel) printf 'Linux bridge → veth, kernel rx counter (nothing consumes)' ;;
	esac
}

nctl() { timeout -k 2 15 "$RS" --socket "$NIC_SOCK" ctl "$@"; }

# A command with a bound, its output to the log.
nic_run() { timeout -k 2 20 "$@" >>"$LOGFILE" 2>&1; }

# ------------------------------------------------------------ topology

nic_ns_exists() { [[ -e /run/netns/$1 ]]; }

# Delete our namespaces (their interfaces go with them).
nic_teardown() {
	local ns
	for ns in "$NIC_NS_GEN" "$NIC_NS_RX" "$NIC_NS_D"; do
		nic_ns_exists "$ns" && { nic_run ip netns del "$ns" || logq "ip netns del $ns failed"; }
	done
	return 0
}

_nic_ns_add() {
	nic_run ip netns add "$1" &&
		nic_run ip -n "$1" link set lo up &&
		nic_run ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# Fresh namespaces and a veth pair A (generator) - B (receiver); with
# BRIDGE=1 also bridge NIC_BR in the receiver's namespace holding B and C,
# C's peer D in a third namespace. IPv6 is off in all of them, so nothing but
# the generator's frames crosses the pair. Returns 1 with NIC_ERR.
#   nic_topology BRIDGE [NAPI_CPU]
# NAPI_CPU: GRO and threaded NAPI on B, its NAPI kthread pinned to this CPU.
nic_topology() {
	local bridge=$1 napi=${2:-} deadline
	NIC_ERR=
	nic_teardown
	if ! { _nic_ns_add "$NIC_NS_GEN" && _nic_ns_add "$NIC_NS_RX" &&
		nic_run ip link add "$NIC_IF_A" netns "$NIC_NS_GEN" type veth peer name "$NIC_IF_B" netns "$NIC_NS_RX" &&
		nic_run ip -n "$NIC_NS_GEN" link set "$NIC_IF_A" up &&
		nic_run ip -n "$NIC_NS_RX" link set "$NIC_IF_B" up; }; then
		NIC_ERR="cannot create namespaces $NIC_NS_GEN, $NIC_NS_RX and veth pair $NIC_IF_A-$NIC_IF_B (see run.log)"
		return 1
	fi
	if [[ -n $napi ]]; then
		# veth hands a frame to the peer's NAPI only if it could be
		# aggregated: if the sender has TSO off (or the frame comes from
		# a socket's sendmsg, which AF_XDP's are not).
		if ! { nic_run ip netns exec "$NIC_NS_RX" ethtool -K "$NIC_IF_B" gro on &&
			nic_run ip netns exec "$NIC_NS_GEN" ethtool -K "$NIC_IF_A" tso off &&
			nic_run ip netns exec "$NIC_NS_RX" sh -c "echo 1 > /sys/class/net/$NIC_IF_B/threaded" &&
			nic_napi_pin "$napi"; }; then
			NIC_ERR="cannot run $NIC_IF_B's NAPI threaded on CPU $napi: ${NIC_ERR:-ethtool -K $NIC_IF_B gro on, -K $NIC_IF_A tso off or /sys/class/net/$NIC_IF_B/threaded failed (see run.log)}"
			return 1
		fi
	fi
	((bridge)) || return 0
	if ! { _nic_ns_add "$NIC_NS_D" &&
		nic_run ip -n "$NIC_NS_RX" link add "$NIC_BR" type bridge &&
		nic_run ip -n "$NIC_NS_RX" link add "$NIC_IF_C" type veth peer name "$NIC_IF_D" netns "$NIC_NS_D" &&
		nic_run ip -n "$NIC_NS_RX" link set "$NIC_IF_B" master "$NIC_BR" &&
		nic_run ip -n "$NIC_NS_RX" link set "$NIC_IF_C" master "$NIC_BR" &&
		nic_run ip -n "$NIC_NS_RX" link set "$NIC_IF_C" up &&
		nic_run ip -n "$NIC_NS_RX" link set "$NIC_BR" up &&
		nic_run ip -n "$NIC_NS_D" link set "$NIC_IF_D" up; }; then
		NIC_ERR="cannot create bridge $NIC_BR with $NIC_IF_B and $NIC_IF_C, $NIC_IF_D in $NIC_NS_D (see run.log)"
		return 1
	fi
	# STP is off, so the ports forward at once; make sure.
	deadline=$((SECONDS + 10))
	until [[ $(timeout 5 bridge -n "$NIC_NS_RX" -j link show 2>/dev/null | jq -r '[.[] | select(.state == "forwarding")] | length' 2>/dev/null) == 2 ]]; do
		if ((SECONDS >= deadline)); then
			NIC_ERR="bridge ports of $NIC_BR not forwarding after 10 s: $(timeout 5 bridge -n "$NIC_NS_RX" link show 2>&1 | tr '\n' ' ')"
			return 1
		fi
		sleep 0.2
	done
}

# Pin vethB's NAPI kthreads (napi/rsbnB-<id>) to CPU. Returns 1 with
# NIC_ERR if there are none.
nic_napi_pin() {
	local cpu=$1 pid n=0
	for pid in $(pgrep -x "napi/$NIC_IF_B-[0-9]+" 2>/dev/null); do
		taskset -pc "$cpu" "$pid" >>"$LOGFILE" 2>&1 && n=$((n + 1))
	done
	((n > 0)) || NIC_ERR="no NAPI kthread napi/$NIC_IF_B-* to pin"
	((n > 0))
}

# Kernel counters of an interface: nic_link NS IF -> "rx_packets rx_dropped"
nic_link() {
	timeout 5 ip -n "$1" -s -j link show "$2" 2>/dev/null |
		jq -r '.[0].stats64.rx | "\(.packets) \(.dropped)"' 2>/dev/null
}

# Frames a veth dropped on transmit (its peer's queue was full).
nic_txdrop() {
	timeout 5 ip -n "$1" -s -j link show "$2" 2>/dev/null | jq -r '.[0].stats64.tx.dropped' 2>/dev/null
}

# utime-like ticks of one CPU from /proc/stat: "busy total softirq"
nic_cpu_ticks() {
	awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= 9 && i <= NF; i++) t += $i
		print t - $5 - $6, t, $8; exit }' /proc/stat
}

# ------------------------------------------------------------ processes

# Start testpmd in a namespace, both lcores and every thread on CPU.
#   nic_testpmd NAME NS CPU VDEV MODE SECS   (MODE: txonly or rxonly)
# Sets NT_PID (the timeout process) and NT_NAME.
nic_testpmd() {
	local name=$1 ns=$2 cpu=$3 vdev=$4 mode=$5 secs=$6 prefix
	NIC_SEQ=$((NIC_SEQ + 1))
	prefix=rsbn-bench-$$-$NIC_SEQ
	NIC_PREFIXES+=("$prefix")
	local argv=(ip netns exec "$ns" dpdk-testpmd "--lcores=0@$cpu,1@$cpu" --no-huge -m 1024 --no-pci
		--file-prefix "$prefix" "--vdev=$vdev" -- --no-mlockall --total-num-mbufs=16384
		"--forward-mode=$mode" --stats-period 1)
	[[ $mode == txonly ]] && argv+=(--txpkts=64)
	start_bg "$name" "$cpu" "$secs" "${argv[@]}"
	NT_PID=$BG_PID NT_NAME=$BG_NAME
}

# Wait until a testpmd forwards (30 s at most). Returns 1 with NIC_ERR.
nic_testpmd_wait() {
	local name=$1 pid=$2 deadline=$((SECONDS + 30))
	while :; do
		if ! kill -0 "$pid" 2>/dev/null; then
			NIC_ERR="$name exited during start-up: $(why "$name" "?")"
			return 1
		fi
		if testpmd_failed "$RAW/$name.out"; then
			NIC_ERR="$name failed to start its port: $(testpmd_clean "$RAW/$name.out" | grep -a -m1 -iE 'fail|error|cannot' | cut -c1-160)"
			return 1
		fi
		testpmd_ready "$RAW/$name.out" && return 0
		if ((SECONDS >= deadline)); then
			NIC_ERR="$name not forwarding after 30 s"
			return 1
		fi
		sleep 0.2
	done
}

nic_cleanup_prefixes() {
	local p dir
	dir=$(testpmd_rundir)
	for p in "${NIC_PREFIXES[@]}"; do rm -rf -- "${dir:?}/$p"; done
	NIC_PREFIXES=()
}

# The ringswitch daemon in the receiver's namespace, pinned to CPU (all its
# threads: taskset, and the worker also with --worker-cpus). Returns 1 with
# NIC_ERR.
nic_daemon_start() {
	local cpu=$1 deadline name
	NIC_ERR=
	nic_daemon_stop
	rm -f -- "$NIC_SOCK"
	start_bg nic-daemon "$cpu" 900 ip netns exec "$NIC_NS_RX" "$RS" serve --socket "$NIC_SOCK" \
		--workers 1 --worker-cpus "$cpu"
	NIC_DTPID=$BG_PID name=$BG_NAME
	deadline=$((SECONDS + 15))
	while :; do
		if ! kill -0 "$NIC_DTPID" 2>/dev/null; then
			local rc=0
			wait_bg "$NIC_DTPID" || rc=$?
			NIC_ERR="daemon did not start: $(why "$name" "$rc")"
			NIC_DTPID=
			return 1
		fi
		[[ -S $NIC_SOCK ]] && nctl switch list >/dev/null 2>&1 && break
		if ((SECONDS >= deadline)); then
			NIC_ERR="daemon not answering on $NIC_SOCK after 15 s"
			nic_daemon_stop
			return 1
		fi
		sleep 0.1
	done
	NIC_DPID=$(child_of "$NIC_DTPID") || {
		NIC_ERR="cannot find the daemon's pid"
		nic_daemon_stop
		return 1
	}
	logq "nic daemon up: pid $NIC_DPID in $NIC_NS_RX on CPU $cpu"
}

nic_daemon_stop() {
	[[ -n $NIC_DTPID ]] || return 0
	stop_bg "$NIC_DTPID" || true
	NIC_DTPID='' NIC_DPID=''
}

# Everything this section may leave behind; run.sh's exit trap calls it
# after cleanup_all has stopped the processes.
nic_cleanup() {
	nic_daemon_stop
	nic_teardown
	nic_cleanup_prefixes
}

# ------------------------------------------------------------ samples

# pkt-gen's interval lines ("316.974 Kpps (... in 999994 usec) ...") as
# testpmd_samples prints them: "PPS SECONDS", the zero lines before traffic
# and the first non-zero one dropped, then SKIP more, up to MAXSEC seconds.
#   nic_pktgen_samples NAME [MAXSEC] [SKIP]
nic_pktgen_samples() {
	awk -v max="${2:-0}" -v skip="${3:-0}" '
		$1 ~ /^[0-9.]+$/ && ($2 == "pps" || $2 == "Kpps" || $2 == "Mpps") && $3 ~ /^\(/ {
			pps = $1 * ($2 == "Mpps" ? 1e6 : $2 == "Kpps" ? 1e3 : 1)
			dt = 1
			for (i = 4; i < NF; i++) if ($(i + 1) == "usec)") dt = $i / 1e6
			if (!on) { if (pps > 0) on = 1; next }
			if (skip > 0) { skip--; next }
			printf "%d %.6f\n", pps, dt
			tot += dt
			if (max && tot >= max) exit
		}' "$RAW/$1.out" 2>/dev/null
}

# Wait (10 s at most) until samples cover SECS: nic_cover SECS CMD...
nic_cover() {
	local secs=$1 deadline=$((SECONDS + 10))
	shift
	while awk -v g="$("$@" | testpmd_covered)" -v s="$secs" 'BEGIN { exit !(g < s) }' && ((SECONDS < deadline)); do
		sleep 0.5
	done
}

# ------------------------------------------------------------ one case

_nic_keys() {
	local k=nic_$1_$2 f
	for f in rx_mpps gen_mpps vethb_mpps deliv_pct drops cpu daemon_pct ns_pkt sink_pct driver; do printf '%s\n' "${k}_$f"; done
}

# Snapshot for a window: sets NIC_SNAP=(time vethB_rx vethD_rx daemon_ticks
# gen_busy gen_total gen_si rx_busy rx_total rx_si sink_ticks).
nic_snap() {
	local genc=$1 rxc=$2 sink=${3:-} b d t g r k
	b=$(nic_link "$NIC_NS_RX" "$NIC_IF_B")
	d=$(nic_ns_exists "$NIC_NS_D" && nic_link "$NIC_NS_D" "$NIC_IF_D")
	t=$([[ -n $NIC_DPID ]] && cpu_ticks "$NIC_DPID")
	read -r -a g <<<"$(nic_cpu_ticks "$genc")"
	read -r -a r <<<"$(nic_cpu_ticks "$rxc")"
	k=$([[ -n $sink ]] && cpu_ticks "$sink")
	NIC_SNAP=("$(now_s)" "${b%% *}" "${d%% *}" "${t:-x}" "${g[@]}" "${r[@]}" "${k:-x}")
}

# One receiver, one generator, one window:
#   nic_case PLACEMENT CASE GEN_CPU RX_CPU NAPI SECS WITH_RS
# A case that cannot run fails its first key only (the table shows the rest
# as "—").
nic_case() {
	local pl=$1 cs=$2 genc=$3 rxc=$4 napi=$5 secs=$6 with_rs=$7 k=nic_$1_$2
	local bridge=0 rx='' rxname='' sinkpid='' gen genname mode='' vdev napicpu=''
	[[ $cs == br* ]] && bridge=1
	((napi)) && napicpu=$rxc
	log "NIC $pl: $(nic_title "$cs" | tr -d '`'); generator CPU $genc, receiver CPU $rxc$( ((napi)) && echo ", $NIC_IF_B's NAPI threaded on CPU $rxc"): ${secs}s"
	if [[ $cs == rs* ]] && ((!with_rs)); then
		failed "${BUILD_ERR:-ringswitch not built}" "${k}_rx_mpps"
		return
	fi
	if ! nic_topology "$bridge" "$napicpu"; then
		failed "NIC $pl $cs: $NIC_ERR" "${k}_rx_mpps"
		nic_teardown
		return
	fi
	local err=''
	case $cs in
	rs*)
		mode=${cs#rs}
		if ! nic_daemon_start "$rxc"; then
			err=$NIC_ERR
		elif ! nctl attach "$NIC_SW" "$NIC_IF_B" --mode "$mode" >>"$LOGFILE" 2>&1; then
			err="ctl attach $NIC_SW $NIC_IF_B --mode $mode failed: $(tail -n1 "$LOGFILE" | cut -c1-200)"
		else
			local drv
			drv=$(nctl port list --json 2>>"$LOGFILE" | jq -r --arg p "$NIC_SW:$NIC_IF_B" '.[] | select(.name == $p) | .iface.driver // empty' 2>/dev/null)
			put "${k}_driver" "${drv:-?}"
			logq "NIC $pl $cs: $(nctl port list --json 2>&1 | jq -c '.[] | select(.kind == "nic") | .iface' 2>/dev/null)"
			start_bg "nic-$pl-$cs-sink" "$rxc" $((secs + 120)) "$RS" --socket "$NIC_SOCK" pkt-gen \
				-i "$NIC_SW:sink" -f rx -T 1000 --duration $((secs + 100)) --json
			rx=$BG_PID rxname=$BG_NAME
			if ! wait_ready "$rxname" "$rx" 15; then
				err="pkt-gen rx did not open $NIC_SW:sink: $(why "$rxname" "?")"
			else
				sinkpid=$(child_of "$rx")
			fi
		fi
		;;
	dpdk* | brapp)
		local ns=$NIC_NS_RX ifn=$NIC_IF_B
		vdev=net_af_packet0
		[[ $cs == dpdkxdp ]] && vdev=net_af_xdp0
		[[ $cs == brapp ]] && ns=$NIC_NS_D ifn=$NIC_IF_D
		nic_testpmd "nic-$pl-$cs-rx" "$ns" "$rxc" "$vdev,iface=$ifn" rxonly $((secs + 120))
		rx=$NT_PID rxname=$NT_NAME
		nic_testpmd_wait "$rxname" "$rx" || err=$NIC_ERR
		;;
	esac
	# Attaching XDP may have brought up NAPI anew: pin again.
	[[ -z $err && -n $napicpu ]] && ! nic_napi_pin "$napicpu" && err=$NIC_ERR
	if [[ -n $err ]]; then
		[[ -n $rx ]] && { stop_bg "$rx" || true; }
		nic_daemon_stop
		failed "NIC $pl $cs: $err" "${k}_rx_mpps"
		nic_teardown
		nic_cleanup_prefixes
		return
	fi
	local base_b base_d base_a
	base_b=$(nic_link "$NIC_NS_RX" "$NIC_IF_B")
	base_d=$( ((bridge)) && nic_link "$NIC_NS_D" "$NIC_IF_D")
	base_a=$(nic_txdrop "$NIC_NS_GEN" "$NIC_IF_A")
	# The generator.
	nic_testpmd "nic-$pl-$cs-gen" "$NIC_NS_GEN" "$genc" "net_${NIC_GEN}0,iface=$NIC_IF_A" txonly $((secs + 100))
	gen=$NT_PID genname=$NT_NAME
	if ! nic_testpmd_wait "$genname" "$gen"; then
		err=$NIC_ERR
	else
		local deadline=$((SECONDS + 20))
		until testpmd_clean "$RAW/$genname.out" | awk '$1 == "Tx-pps:" && $2 + 0 > 0 { f = 1 } END { exit !f }'; do
			if ((SECONDS >= deadline)) || ! kill -0 "$gen" 2>/dev/null; then
				err="the generator sent nothing within 20 s (TX-packets $(testpmd_last TX-packets "$RAW/$genname.out"))"
				break
			fi
			sleep 0.2
		done
	fi
	if [[ -n $err ]]; then
		stop_bg "$gen" || true
		[[ -n $rx ]] && { stop_bg "$rx" || true; }
		nic_daemon_stop
		failed "NIC $pl $cs: $err" "${k}_rx_mpps"
		nic_teardown
		nic_cleanup_prefixes
		return
	fi
	sleep "$NIC_WARM_S"
	local -a s0 s1
	local st0='' st1='' stf=''
	[[ -n $NIC_DPID ]] && st0=$(nctl stats --json 2>>"$LOGFILE")
	nic_snap "$genc" "$rxc" "$sinkpid"
	s0=("${NIC_SNAP[@]}")
	logq "NIC $pl $cs: window of ${secs}s starts"
	sleep "$secs"
	nic_snap "$genc" "$rxc" "$sinkpid"
	s1=("${NIC_SNAP[@]}")
	[[ -n $NIC_DPID ]] && st1=$(nctl stats --json 2>>"$LOGFILE")
	logq "NIC $pl $cs: window ends; snapshots: ${s0[*]} / ${s1[*]}"
	nic_cover "$secs" testpmd_samples TX "$RAW/$genname.out" "$secs" "$NIC_WARM_S"
	case $cs in
	rs*) nic_cover "$secs" nic_pktgen_samples "$rxname" "$secs" "$NIC_WARM_S" ;;
	dpdk* | brapp) nic_cover "$secs" testpmd_samples RX "$RAW/$rxname.out" "$secs" "$NIC_WARM_S" ;;
	esac
	stop_bg "$gen" || true
	sleep 0.5
	local fin_b fin_d fin_a
	fin_b=$(nic_link "$NIC_NS_RX" "$NIC_IF_B")
	fin_d=$( ((bridge)) && nic_link "$NIC_NS_D" "$NIC_IF_D")
	fin_a=$(nic_txdrop "$NIC_NS_GEN" "$NIC_IF_A")
	[[ -n $NIC_DPID ]] && stf=$(nctl stats --json 2>>"$LOGFILE")
	[[ -n $rx ]] && { stop_bg "$rx" || true; }
	local dpid=$NIC_DPID
	nic_daemon_stop
	[[ -n $st0 ]] && printf '%s\n%s\n%s\n' "$st0" "$st1" "$stf" >"$RAW/stats-nic-$pl-$cs.json"
	nic_teardown

	# Figures.
	local wall hz gs rs gm rm sent got
	hz=$(getconf CLK_TCK)
	wall=$(calc 'b - a' a="${s0[0]}" b="${s1[0]}")
	gs=$(testpmd_samples TX "$RAW/$genname.out" "$secs" "$NIC_WARM_S")
	gm=$(testpmd_median <<<"$gs")
	sent=$(testpmd_total TX "$RAW/$genname.out")
	case $cs in
	rs*)
		rs=$(nic_pktgen_samples "$rxname" "$secs" "$NIC_WARM_S")
		got=$(jfield "$rxname" packets)
		;;
	dpdk* | brapp)
		rs=$(testpmd_samples RX "$RAW/$rxname.out" "$secs" "$NIC_WARM_S")
		got=$(testpmd_total RX "$RAW/$rxname.out")
		;;
	brkernel)
		rs=''
		got=$(calc '(b - a)' a="${base_d%% *}" b="${fin_d%% *}" 2>/dev/null)
		;;
	esac
	logq "NIC $pl $cs: generator samples (pps s): $(tr '\n' ' ' <<<"$gs")"
	logq "NIC $pl $cs: receiver samples (pps s): $(tr '\n' ' ' <<<"$rs")"
	logq "NIC $pl $cs: whole run: sent $sent, received $got; $NIC_IF_A tx_dropped ${base_a:-?} -> ${fin_a:-?}; $NIC_IF_B rx/dropped ${base_b:-?} -> ${fin_b:-?}; $NIC_IF_D ${base_d:-—} -> ${fin_d:-—}"
	if [[ $cs == brkernel ]]; then
		if is_num "${s0[2]}" && is_num "${s1[2]}"; then
			rm=$(calc '(b - a) / w' a="${s0[2]}" b="${s1[2]}" w="$wall")
		else
			rm=''
		fi
	else
		rm=$(testpmd_median <<<"$rs")
	fi
	if is_num "$rm"; then
		put "${k}_rx_mpps" "$(mpps "$rm")"
	else
		failed "NIC $pl $cs: no receiver samples (raw/${rxname:-} and run.log)" "${k}_rx_mpps"
	fi
	if is_num "$gm"; then
		put "${k}_gen_mpps" "$(mpps "$gm")"
	else
		failed "NIC $pl $cs: no Tx-pps samples in raw/$genname.out" "${k}_gen_mpps"
	fi
	if is_num "${s0[1]}" && is_num "${s1[1]}"; then
		put "${k}_vethb_mpps" "$(calc 'sprintf("%.3f", (b - a) / w / 1e6)' a="${s0[1]}" b="${s1[1]}" w="$wall")"
	else
		failed "NIC $pl $cs: no $NIC_IF_B counters" "${k}_vethb_mpps"
	fi
	if is_num "$sent" && is_num "$got" && ((sent > 0)); then
		put "${k}_deliv_pct" "$(calc 'sprintf("%.1f", 100 * g / s)' g="$got" s="$sent")"
	else
		failed "NIC $pl $cs: no totals (sent '$sent', received '$got')" "${k}_deliv_pct"
	fi
	# Drops the kernel counted: vethA's tx_dropped (B's NAPI queue full),
	# vethB's rx_dropped (XDP redirects that failed, a full backlog), and for
	# ringswitch its AF_XDP / AF_PACKET socket's drop_kernel and the sink's
	# drop_rx_full.
	local dropsb dropsa drops
	dropsb=$(calc '(b - a)' a="${base_b#* }" b="${fin_b#* }" 2>/dev/null)
	dropsa=$(calc '(b - a)' a="$base_a" b="$fin_a" 2>/dev/null)
	drops="$(printf '%s tx_dropped %s, %s rx_dropped %s' "$NIC_IF_A" "${dropsa:-?}" "$NIC_IF_B" "${dropsb:-?}")"
	if [[ -n $stf ]]; then
		drops+=", drop_kernel $(vstat "$stf" "$NIC_SW:$NIC_IF_B" drop_kernel), sink drop_rx_full $(vstat "$stf" "$NIC_SW:sink" drop_rx_full)"
	fi
	put "${k}_drops" "$drops"
	put "${k}_cpu" "$(calc 'sprintf("%.0f%% (softirq %.0f%%)", 100 * (b1 - b0) / (t1 - t0), 100 * (s1 - s0) / (t1 - t0))' \
		b0="${s0[4]}" t0="${s0[5]}" s0="${s0[6]}" b1="${s1[4]}" t1="${s1[5]}" s1="${s1[6]}") / $(calc 'sprintf("%.0f%% (softirq %.0f%%)", 100 * (b1 - b0) / (t1 - t0), 100 * (s1 - s0) / (t1 - t0))' \
		b0="${s0[7]}" t0="${s0[8]}" s0="${s0[9]}" b1="${s1[7]}" t1="${s1[8]}" s1="${s1[9]}")"
	if [[ $cs == rs* ]]; then
		local i0 i1
		i0=$(vstat "$st0" "$NIC_SW:$NIC_IF_B" tx_packets) i1=$(vstat "$st1" "$NIC_SW:$NIC_IF_B" tx_packets)
		if is_num "${s0[3]}" && is_num "${s1[3]}" && is_num "$i0" && is_num "$i1" && ((i1 > i0)); then
			put "${k}_daemon_pct" "$(calc 'sprintf("%.1f", 100 * c / hz / w)' c=$((s1[3] - s0[3])) hz="$hz" w="$wall")"
			put "${k}_ns_pkt" "$(calc 'sprintf("%.0f", c / hz * 1e9 / n)' c=$((s1[3] - s0[3])) hz="$hz" n=$((i1 - i0)))"
			is_num "${s0[10]}" && is_num "${s1[10]}" &&
				put "${k}_sink_pct" "$(calc 'sprintf("%.1f", 100 * c / hz / w)' c=$((s1[10] - s0[10])) hz="$hz" w="$wall")"
		else
			failed "NIC $pl $cs: no counters for the window (daemon ticks '${s0[3]}' -> '${s1[3]}' from /proc/$dpid/stat; $NIC_SW:$NIC_IF_B tx_packets '$i0' -> '$i1', raw/stats-nic-$pl-$cs.json)" \
				"${k}_daemon_pct" "${k}_ns_pkt"
		fi
	fi
	log "  $pl $cs: $(val "${k}_rx_mpps") Mpps received, generator $(val "${k}_gen_mpps") Mpps ($NIC_IF_B took $(val "${k}_vethb_mpps")), $(val "${k}_deliv_pct")% of sent received; $drops; CPU gen / rx $(val "${k}_cpu")$([[ $cs == rs* ]] && echo "; daemon $(val "${k}_daemon_pct")% = $(val "${k}_ns_pkt") ns/pkt ($(val "${k}_driver")), sink pkt-gen $(val "${k}_sink_pct")%")"
	nic_cleanup_prefixes
}

# ------------------------------------------------------------ generator

# Which testpmd vdev sends faster on the veth: each txonly for SECS on
# GEN_CPU into a bare vethB (the kernel drops the frames). Sets NIC_GEN.
nic_pick_generator() {
	local secs=$1 genc=$2 kind best=0 name pid m deadline
	NIC_GEN=
	for kind in "${NIC_GEN_KINDS[@]}"; do
		NIC_ERR=
		log "NIC generator candidate: testpmd txonly, net_$kind on $NIC_IF_A, CPU $genc, nothing consuming on $NIC_IF_B: ${secs}s"
		if ! nic_topology 0; then
			failed "NIC generator $kind: $NIC_ERR" "nic_gen_${kind}_mpps"
			continue
		fi
		nic_testpmd "nic-gen-$kind" "$NIC_NS_GEN" "$genc" "net_${kind}0,iface=$NIC_IF_A" txonly $((secs + 60))
		pid=$NT_PID name=$NT_NAME
		if nic_testpmd_wait "$name" "$pid"; then
			deadline=$((SECONDS + secs + 15))
			while awk -v g="$(testpmd_samples TX "$RAW/$name.out" "$secs" 1 | testpmd_covered)" -v s="$secs" 'BEGIN { exit !(g < s) }' &&
				((SECONDS < deadline)) && kill -0 "$pid" 2>/dev/null; do
				sleep 0.5
			done
		fi
		stop_bg "$pid" || true
		m=$(testpmd_samples TX "$RAW/$name.out" "$secs" 1 | testpmd_median)
		if is_num "$m"; then
			put "nic_gen_${kind}_mpps" "$(mpps "$m")"
			log "  generator net_$kind: $(mpps "$m") Mpps"
			if awk -v a="$m" -v b="$best" 'BEGIN { exit !(a > b) }'; then
				best=$m NIC_GEN=$kind
			fi
		else
			failed "NIC generator $kind: ${NIC_ERR:-no Tx-pps samples in raw/$name.out}" "nic_gen_${kind}_mpps"
		fi
		nic_teardown
		nic_cleanup_prefixes
	done
	[[ -n $NIC_GEN ]] && log "  generator for every case: testpmd txonly, net_$NIC_GEN"
}

# ------------------------------------------------------------ the section

# 9. nic_measure SECS GEN_SECS [ringswitch: 1 to measure, 0 if not built]
nic_measure() {
	local secs=$1 gsecs=$2 with_rs=${3:-1} p pl genc rxc cs k
	NIC_SOCK=$WORK/nic.sock
	NIC_PLACEMENTS=("split:$TX_CPU:$RX_CPU:0" "napi:$TX_CPU:$RX_CPU:1" "same:$TX_CPU:$TX_CPU:0")
	NIC_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	NIC_BUSY0=$(cpu_busy_pct)
	NIC_TOP0=$(ps -eo pcpu=,comm= --sort=-pcpu | awk 'NR <= 3 { printf "%s%s %s%%", (NR > 1 ? ", " : ""), $2, $1 }')
	logq "uptime: $(uptime)"
	NIC_LOAD_WARN=
	if awk -v l="${NIC_LOAD0%% *}" 'BEGIN { exit !(l > 0.5) }'; then
		NIC_LOAD_WARN="load average ${NIC_LOAD0%% *} is above 0.5 at the start of this section: other work on the machine skews these figures"
		log "warning: $NIC_LOAD_WARN"
	fi
	log "NIC section: load average $NIC_LOAD0, CPUs $NIC_BUSY0% busy before it (top: $NIC_TOP0)"
	local all=(nic_gen_af_xdp_mpps nic_gen_af_packet_mpps) reason=''
	for p in "${NIC_PLACEMENTS[@]}"; do
		for cs in "${NIC_CASES[@]}"; do all+=("nic_${p%%:*}_${cs}_rx_mpps"); done
	done
	if ((EUID != 0)); then
		reason="the NIC section needs root (network namespaces, veth, XDP)"
	elif ! command -v ip >/dev/null 2>&1 || ! command -v bridge >/dev/null 2>&1; then
		reason="ip or bridge (iproute2) missing"
	fi
	if [[ -z $reason ]] && ! command -v dpdk-testpmd >/dev/null 2>&1; then
		if command -v apt-get >/dev/null 2>&1; then
			log "installing dpdk-dev (dpdk-testpmd)"
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >>"$LOGFILE" 2>&1 ||
				{ apt-get update -qq >>"$LOGFILE" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >>"$LOGFILE" 2>&1; }
		fi
		command -v dpdk-testpmd >/dev/null 2>&1 || reason="dpdk-testpmd missing (apt-get install dpdk-dev)"
	fi
	if [[ -n $reason ]]; then
		failed "$reason" "${all[@]}"
		return
	fi
	nic_pick_generator "$gsecs" "$TX_CPU"
	if [[ -z $NIC_GEN ]]; then
		local a=()
		for k in "${all[@]}"; do [[ $k == nic_gen_* ]] || a+=("$k"); done
		failed "no generator: neither testpmd net_af_xdp nor net_af_packet sent on $NIC_IF_A (see run.log)" "${a[@]}"
		return
	fi
	local napi
	for p in "${NIC_PLACEMENTS[@]}"; do
		IFS=: read -r pl genc rxc napi <<<"$p"
		for cs in "${NIC_CASES[@]}"; do
			nic_case "$pl" "$cs" "$genc" "$rxc" "$napi" "$secs" "$with_rs"
		done
	done
	NIC_LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
}

# ------------------------------------------------------------ report

# A figure, "—" if never measured (its case failed earlier: see Failures).
_nv() { if [[ -n ${VAL[$1]+x} || -n ${WHY[$1]+x} ]]; then val "$1"; else printf '—'; fi; }

# One placement's table (Markdown): nic_table PLACEMENT
nic_table() {
	local pl=$1 cs k sw dl
	_row "receiver on $NIC_IF_B" "received Mpps" "generator Mpps" "$NIC_IF_B took, Mpps" "received / sent, whole run" \
		"kernel-level drops, whole run" "CPU busy: generator's / receiver's" "ringswitch daemon CPU (sink pkt-gen CPU)"
	_row "---" "---:" "---:" "---:" "---:" "---" "---" "---"
	for cs in "${NIC_CASES[@]}"; do
		k=nic_${pl}_$cs
		sw="—"
		if [[ $cs == rs* ]] && ok "${k}_daemon_pct"; then
			sw="$(val "${k}_daemon_pct")%, $(val "${k}_ns_pkt") ns/pkt, $(val "${k}_driver") ($(_nv "${k}_sink_pct")%)"
		elif [[ $cs == rs* ]] && [[ -n ${VAL[${k}_driver]+x} ]]; then
			sw="$(val "${k}_driver")"
		fi
		dl=$(_nv "${k}_deliv_pct")
		ok "${k}_deliv_pct" && dl+="%"
		_row "$(nic_title "$cs")" "$(_nv "${k}_rx_mpps")" "$(_nv "${k}_gen_mpps")" "$(_nv "${k}_vethb_mpps")" \
			"$dl" "$(_nv "${k}_drops")" "$(_nv "${k}_cpu")" "$sw"
	done
}

# How a placement reads: nic_place_text PLACEMENT_SPEC
nic_place_text() {
	local pl genc rxc napi
	IFS=: read -r pl genc rxc napi <<<"$1"
	if [[ $genc == "$rxc" ]]; then
		printf 'Same CPU: generator and receiver side all pinned to CPU %s' "$genc"
	elif ((napi)); then
		printf 'Generator on CPU %s, receiver side on CPU %s, and %s'"'"'s receive path too: GRO on and threaded NAPI, its kthread pinned to CPU %s' \
			"$genc" "$rxc" "$NIC_IF_B" "$rxc"
	else
		printf 'Generator pinned to CPU %s, the receiver side (ringswitch daemon and pkt-gen sink, or testpmd rxonly) to CPU %s; %s'"'"'s receive path runs in the sender'"'"'s context, on CPU %s' \
			"$genc" "$rxc" "$NIC_IF_B" "$genc"
	fi
}

# Every placement's table, for stdout.
nic_tables() {
	local p first=1
	for p in "${NIC_PLACEMENTS[@]}"; do
		((first)) || echo
		first=0
		printf 'NIC ports, generator testpmd txonly net_%s. %s:\n\n' "${NIC_GEN:-?}" "$(nic_place_text "$p")"
		nic_table "${p%%:*}"
	done
}

# Section 9 of REPORT.md.
nic_report() {
	local p
	cat <<EOF
## NIC ports (veth + AF_XDP) beside DPDK net_af_xdp, net_af_packet and a Linux bridge

A veth pair \`$NIC_IF_A\` (namespace \`rsbn-PID-gen\`) – \`$NIC_IF_B\`
(namespace \`rsbn-PID-rx\`); one generator for every receiver: DPDK testpmd
txonly, 64-byte frames, on \`$NIC_IF_A\` with \`net_${NIC_GEN:-?}\`, the faster of the
two here (into a bare \`$NIC_IF_B\`: net_af_xdp $(val nic_gen_af_xdp_mpps) Mpps,
net_af_packet $(val nic_gen_af_packet_mpps) Mpps, ${NIC_GEN_S:-?} s each). Then one receiver at a
time on \`$NIC_IF_B\`, ${NIC_S:-?} s windows after ${NIC_WARM_S} s of traffic.
Load average $NIC_LOAD0 at the start of this section, ${NIC_LOAD1:-?} at its end
(which counts this section's own busy-polling testpmd);
CPUs ${NIC_BUSY0:-?}% busy in the second before it (top: ${NIC_TOP0:-?}).
EOF
	[[ -n ${NIC_LOAD_WARN:-} ]] && printf '\n**Warning: %s.**\n' "$NIC_LOAD_WARN"
	for p in "${NIC_PLACEMENTS[@]}"; do
		printf '\n%s:\n\n' "$(nic_place_text "$p")"
		nic_table "${p%%:*}"
	done
	cat <<EOF

How these were measured:

- Received Mpps: the median of the receiving application's per-second
  samples over the window: pkt-gen's interval lines (ringswitch), testpmd's
  Rx-pps (\`--stats-period 1\`); for the bridge without a consumer, the rx
  packet counter of \`$NIC_IF_D\` over the window. Generator Mpps: the median
  of its Tx-pps samples. "$NIC_IF_B took": the veth's own rx packet counter
  over the window (every frame that crossed the pair, delivered or
  dropped later). "Received / sent": the receiver's total over the whole
  run against testpmd's total sent.
- Kernel-level drops over the whole run: \`$NIC_IF_B\`'s rx_dropped (XDP
  redirects into a full AF_XDP ring, a full backlog); for ringswitch also
  \`ctl stats --json\` drop_kernel of the NIC port (the socket's own drop
  counters) and drop_rx_full of the sink.
- CPU busy: /proc/stat of the generator's and the receiver's CPU over the
  window (everything on that CPU, softirq in brackets). A veth delivers in
  the sender's context: the receive side's kernel work (veth, the XDP
  program and the copy into the AF_XDP ring, AF_PACKET, the bridge) runs as
  softirq on the generator's CPU, whatever the receiver's placement; in the
  first table the generator's CPU pays for it, so a receiver's figure there
  is bounded by what its kernel path costs the sender. The threaded-NAPI
  placement (\`ethtool -K $NIC_IF_B gro on\`, \`ethtool -K $NIC_IF_A tso off\`
  (veth uses its NAPI only for frames it could aggregate), \`echo 1 >
  /sys/class/net/$NIC_IF_B/threaded\`, \`taskset -pc R\` on the kthread
  \`napi/$NIC_IF_B-N\`) moves that work to the receiver's CPU (as system
  time of the kthread), as a NIC interrupting the receiver's CPU would;
  frames the generator pushes faster than it drains are dropped at
  \`$NIC_IF_A\` (tx_dropped).
- ringswitch daemon CPU: utime+stime of \`serve\` (all threads) over the
  window, as % of one core and per frame the switch took from the NIC port
  (tx_packets of \`$NIC_SW:$NIC_IF_B\`); then the driver from \`ctl port
  list --json\` iface.driver, and the sink pkt-gen's CPU. Its sink is
  \`pkt-gen -f rx\` (blocking) on \`$NIC_SW:sink\`: testpmd's frames carry an unknown unicast
  destination, which the switch floods to its one other port, as the bridge
  floods it to \`$NIC_IF_C\`. Fresh namespaces, veth pair and daemon per case.
- testpmd's 64 B is \`--txpkts=64\` (no CRC on a veth); both testpmd lcores and
  every thread of each process are pinned with taskset; \`--no-huge\`, 16384 mbufs, one queue,
  default vdev options (net_af_xdp: native XDP on veth, copy mode, busy_budget 64).

The commands (G, R: generator and receiver CPU; NS: the namespaces):

\`\`\`sh
ip netns add \$NSG; ip netns add \$NSR
ip link add $NIC_IF_A netns \$NSG type veth peer name $NIC_IF_B netns \$NSR
ip netns exec \$NSG taskset -c G dpdk-testpmd --lcores=0@G,1@G --no-huge -m 1024 --no-pci --file-prefix gen \\
    --vdev=net_${NIC_GEN:-af_xdp}0,iface=$NIC_IF_A -- --no-mlockall --total-num-mbufs=16384 --forward-mode=txonly --stats-period 1 --txpkts=64
# ringswitch
ip netns exec \$NSR taskset -c R ringswitch serve --socket S --workers 1 --worker-cpus R
ringswitch --socket S ctl attach $NIC_SW $NIC_IF_B --mode native     # or generic, packet
taskset -c R ringswitch --socket S pkt-gen -i $NIC_SW:sink -f rx -T 1000 --json
ringswitch --socket S ctl stats --json
# DPDK
ip netns exec \$NSR taskset -c R dpdk-testpmd --lcores=0@R,1@R --no-huge -m 1024 --no-pci --file-prefix rx \\
    --vdev=net_af_xdp0,iface=$NIC_IF_B -- --no-mlockall --total-num-mbufs=16384 --forward-mode=rxonly --stats-period 1
#   (and --vdev=net_af_packet0,iface=$NIC_IF_B)
# Linux bridge
ip -n \$NSR link add $NIC_BR type bridge
ip -n \$NSR link add $NIC_IF_C type veth peer name $NIC_IF_D netns \$NSD
ip -n \$NSR link set $NIC_IF_B master $NIC_BR; ip -n \$NSR link set $NIC_IF_C master $NIC_BR
ip netns exec \$NSD taskset -c R dpdk-testpmd ... --vdev=net_af_packet0,iface=$NIC_IF_D -- ... --forward-mode=rxonly
#   (or nothing: ip -n \$NSD -s -j link show $NIC_IF_D)
\`\`\`

EOF
}
