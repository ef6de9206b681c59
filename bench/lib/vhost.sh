# shellcheck shell=bash
# bench/lib/vhost.sh - section 8 of bench/run.sh: VM ports (vhost-user),
# DPDK testpmd virtio_user txonly -> switch -> testpmd virtio_user rxonly,
# 64-byte frames, ringswitch beside OVS-DPDK (bench/peers/ovs-dpdk.sh) in
# the same run, with the same testpmd command lines (bench/lib/testpmd.sh)
# and the same CPU placements. Sourced after common.sh, report.sh,
# measure.sh and testpmd.sh. Uses RS, SOCK, WORK, RAW, LOGFILE, BENCH_DIR.

# Placements: RX,TX,SWITCH = the receiver testpmd's CPU, the sender
# testpmd's CPU, the switch's CPU (ringswitch: serve --worker-cpus; OVS: the
# PMD thread, pmd-cpu-mask). Both lcores of a testpmd share its CPU. "-": the
# worker is not pinned (ringswitch only; OVS always pins its PMD thread).
VHOST_PLACEMENTS=("0,1,1" "0,1,0" "0,0,1")
VHOST_RS_EXTRA=("0,1,-")
VHOST_OVS_MAXSLEEP="0 500" # pmd-maxsleep values (us) OVS is measured with (0: not set)
VHOST_RS_RT="0 10"         # serve --worker-rt-priority values ringswitch is measured with (0: not set)
VHOST_SW=valevm            # ringswitch switch of the two VM ports
VHOST_PREFIXES=()          # testpmd --file-prefix values (runtime dirs removed at the end)
VHOST_SEQ=0

# A port's counters from a `ctl stats --json` snapshot: vstat JSON PORT FIELD
vstat() { jq -r --arg p "$2" --arg f "$3" '.[] | select(.name == $p) | .[$f] // empty' <<<"$1" 2>/dev/null; }

# 0 once ctl port list shows the VM port with a connected frontend.
vport_open() {
	[[ $(ctl port list --json 2>/dev/null | jq -r --arg p "$1" '.[] | select(.name == $p) | .open' 2>/dev/null) == true ]]
}

# Start a testpmd (vdev server=1; the daemon connects with --client) under
# start_bg. MODE: txonly, rxonly or idle (interactive: stdin from a sleep,
# so that it stays open). Sets VT_PID (the timeout process) and VT_NAME.
#   vhost_testpmd NAME CPU SOCK MAC MODE SECS
vhost_testpmd() {
	local name=$1 cpu=$2 sock=$3 mac=$4 mode=$5 secs=$6 prefix
	VHOST_SEQ=$((VHOST_SEQ + 1))
	prefix=ringswitch-bench-$$-$VHOST_SEQ
	VHOST_PREFIXES+=("$prefix")
	testpmd_argv "$cpu" "$prefix" "$sock" 1 "$mac" "$mode" 64
	if [[ $mode == idle ]]; then
		# shellcheck disable=SC2016 # expanded by that bash
		start_bg "$name" "" "$secs" bash -c 'exec "$@" < <(exec sleep "$0")' "$((secs + 5))" "${TESTPMD_ARGV[@]}"
	else
		start_bg "$name" "" "$secs" "${TESTPMD_ARGV[@]}"
	fi
	VT_PID=$BG_PID VT_NAME=$BG_NAME
}

# Wait until a testpmd is up and the daemon shows its port open.
#   vhost_wait NAME PID PORT -> 0, or 1 with VH_ERR
vhost_wait() {
	local name=$1 pid=$2 port=$3 deadline=$((SECONDS + 30))
	while :; do
		if ! kill -0 "$pid" 2>/dev/null; then
			VH_ERR="$name exited during start-up: $(why "$name" "?")"
			return 1
		fi
		if testpmd_failed "$RAW/$name.out"; then
			VH_ERR="$name failed to start its port: $(grep -a -m1 -iE 'fail|error|cannot' "$RAW/$name.out" | cut -c1-160)"
			return 1
		fi
		testpmd_ready "$RAW/$name.out" && vport_open "$port" && return 0
		if ((SECONDS >= deadline)); then
			VH_ERR="$name or $port not up after 30 s (testpmd ready: $(testpmd_ready "$RAW/$name.out" && echo yes || echo no))"
			return 1
		fi
		sleep 0.2
	done
}

vhost_cleanup_prefixes() {
	local p dir
	dir=$(testpmd_rundir)
	for p in "${VHOST_PREFIXES[@]}"; do rm -rf -- "${dir:?}/$p"; done
	VHOST_PREFIXES=()
}

# A fresh daemon with two VM ports in client mode on $WORK/vm1.sock (the
# sender's) and $WORK/vm2.sock (the receiver's). Returns 1 with VH_ERR.
vhost_daemon() {
	local p
	VH_ERR=
	if ! daemon_start "$@"; then
		VH_ERR=$DAEMON_ERR
		return 1
	fi
	for p in vm1 vm2; do
		rm -f -- "$WORK/$p.sock"
		if ! ctl port add "$VHOST_SW:$p" --vhost-user "$WORK/$p.sock" --client >>"$LOGFILE" 2>&1; then
			VH_ERR="ctl port add $VHOST_SW:$p --vhost-user $WORK/$p.sock --client failed (see run.log)"
			daemon_stop
			return 1
		fi
	done
}

# One ringswitch throughput run: vhost_rs_tput PLACE RX TX WORKER RT SECS
# (RT: --worker-rt-priority, 0 for none). TAG = PLACE-rtRT. Puts
# vh_<PLACE>_rs<RT>_{rx_mpps,tx_mpps,deliv_mpps,in_mpps,cpu_pct,ns_pkt,ns_in}.
vhost_rs_tput() {
	local tag=$1-rt$5 rxc=$2 txc=$3 wc=$4 rt=$5 secs=$6 k=vh_$1_rs$5
	local keys=("${k}_rx_mpps" "${k}_tx_mpps" "${k}_deliv_mpps" "${k}_in_mpps" "${k}_cpu_pct" "${k}_ns_pkt" "${k}_ns_in")
	local dargs=(--workers 1) rx rxname tx txname s0 s1 c0 c1 t0 t1 deadline
	[[ $wc != - ]] && dargs+=(--worker-cpus "$wc")
	((rt > 0)) && dargs+=(--worker-rt-priority "$rt")
	log "vhost ringswitch: rx testpmd CPU $rxc, tx testpmd CPU $txc, worker CPU $wc$( ((rt > 0)) && echo ", --worker-rt-priority $rt"): ${secs}s"
	if ! vhost_daemon "${dargs[@]}"; then
		failed "vhost ringswitch $tag: $VH_ERR" "${keys[@]}"
		return
	fi
	vhost_testpmd "vhost-rs-$tag-rx" "$rxc" "$WORK/vm2.sock" "$TESTPMD_RX_MAC" rxonly $((secs + 60))
	rx=$VT_PID rxname=$VT_NAME
	if ! vhost_wait "$rxname" "$rx" "$VHOST_SW:vm2"; then
		stop_bg "$rx" || true
		failed "vhost ringswitch $tag: $VH_ERR" "${keys[@]}"
		daemon_stop
		return
	fi
	vhost_testpmd "vhost-rs-$tag-tx" "$txc" "$WORK/vm1.sock" "$TESTPMD_TX_MAC" txonly $((secs + 50))
	tx=$VT_PID txname=$VT_NAME
	if ! vhost_wait "$txname" "$tx" "$VHOST_SW:vm1"; then
		stop_bg "$tx" || true
		stop_bg "$rx" || true
		failed "vhost ringswitch $tag: $VH_ERR" "${keys[@]}"
		daemon_stop
		return
	fi
	logq "vhost $tag: both testpmd up and connected; waiting for traffic"
	deadline=$((SECONDS + 20))
	until testpmd_clean "$RAW/$rxname.out" | awk '$1 == "Rx-pps:" && $2 + 0 > 0 { f = 1 } END { exit !f }'; do
		if ((SECONDS >= deadline)) || ! kill -0 "$rx" 2>/dev/null || ! kill -0 "$tx" 2>/dev/null; then
			ctl stats --json >"$RAW/stats-vhost-$tag-fail.json" 2>&1
			stop_bg "$tx" || true
			stop_bg "$rx" || true
			failed "vhost ringswitch $tag: the receiver got no packets within 20 s (sender TX-packets $(testpmd_last TX-packets "$RAW/$txname.out"); stats in raw/stats-vhost-$tag-fail.json)" "${keys[@]}"
			daemon_stop
			return
		fi
		sleep 0.2
	done
	sleep 1.5 # past testpmd's warm-up sample
	local dpid=$DAEMON_PID
	logq "vhost $tag: traffic; window of ${secs}s starts"
	t0=$(now_s) c0=$(cpu_ticks "$dpid") s0=$(ctl stats --json 2>>"$LOGFILE")
	sleep "$secs"
	t1=$(now_s) c1=$(cpu_ticks "$dpid") s1=$(ctl stats --json 2>>"$LOGFILE")
	logq "vhost $tag: window ends (daemon ticks $c0 -> $c1)"
	deadline=$((SECONDS + 10))
	while awk -v g="$(testpmd_samples RX "$RAW/$rxname.out" | testpmd_covered)" -v s="$secs" 'BEGIN { exit !(g < s) }' &&
		((SECONDS < deadline)); do
		sleep 0.5
	done
	local rxs txs
	rxs=$(testpmd_samples RX "$RAW/$rxname.out" "$secs")
	txs=$(testpmd_samples TX "$RAW/$txname.out" "$secs")
	stop_bg "$tx" || true
	sleep 0.3
	local sf
	sf=$(ctl stats --json 2>>"$LOGFILE")
	stop_bg "$rx" || true
	printf '%s\n%s\n%s\n' "$s0" "$s1" "$sf" >"$RAW/stats-vhost-$tag.json"
	# Counters after the sender stopped: every frame the switch took from
	# vm1 was delivered to vm2 or dropped there.
	local vin vrx vdr vld
	vin=$(vstat "$sf" "$VHOST_SW:vm1" tx_packets) vrx=$(vstat "$sf" "$VHOST_SW:vm2" rx_packets)
	vdr=$(vstat "$sf" "$VHOST_SW:vm2" drop_rx_full) vld=$(vstat "$sf" "$VHOST_SW:vm2" drop_link_down)
	logq "vhost $tag: after the sender stopped: vm1 tx_packets=$vin, vm2 rx_packets=$vrx drop_rx_full=$vdr drop_link_down=$vld; sender testpmd TX-packets $(testpmd_total TX "$RAW/$txname.out"), receiver RX-packets $(testpmd_total RX "$RAW/$rxname.out")"
	daemon_stop
	local rxm txm
	rxm=$(testpmd_median <<<"$rxs")
	txm=$(testpmd_median <<<"$txs")
	logq "vhost $tag rx samples (pps s): $(tr '\n' ' ' <<<"$rxs")"
	if ! is_num "$rxm"; then
		failed "vhost ringswitch $tag: no Rx-pps samples in raw/$rxname.out" "${keys[@]}"
		return
	fi
	put "${k}_rx_mpps" "$(mpps "$rxm")"
	is_num "$txm" && put "${k}_tx_mpps" "$(mpps "$txm")"
	local d0 d1 i0 i1 wall
	d0=$(vstat "$s0" "$VHOST_SW:vm2" rx_packets) d1=$(vstat "$s1" "$VHOST_SW:vm2" rx_packets)
	i0=$(vstat "$s0" "$VHOST_SW:vm1" tx_packets) i1=$(vstat "$s1" "$VHOST_SW:vm1" tx_packets)
	wall=$(calc 'b - a' a="$t0" b="$t1")
	if is_num "$d0" && is_num "$d1" && is_num "$i0" && is_num "$i1" && is_num "$c0" && is_num "$c1" && ((d1 > d0)); then
		local hz
		hz=$(getconf CLK_TCK)
		put "${k}_deliv_mpps" "$(calc 'sprintf("%.3f", (b - a) / w / 1e6)' a="$d0" b="$d1" w="$wall")"
		put "${k}_in_mpps" "$(calc 'sprintf("%.3f", (b - a) / w / 1e6)' a="$i0" b="$i1" w="$wall")"
		put "${k}_cpu_pct" "$(calc 'sprintf("%.1f", 100 * c / hz / w)' c=$((c1 - c0)) hz="$hz" w="$wall")"
		put "${k}_ns_pkt" "$(calc 'sprintf("%.1f", c / hz * 1e9 / n)' c=$((c1 - c0)) hz="$hz" n=$((d1 - d0)))"
		put "${k}_ns_in" "$(calc 'sprintf("%.1f", c / hz * 1e9 / n)' c=$((c1 - c0)) hz="$hz" n=$((i1 - i0)))"
	else
		failed "vhost ringswitch $tag: no counters for the window (daemon ticks '$c0' -> '$c1' from /proc/$dpid/stat; vm2 rx_packets '$d0' -> '$d1' from ctl stats --json, in raw/stats-vhost-$tag.json)" \
			"${k}_deliv_mpps" "${k}_in_mpps" "${k}_cpu_pct" "${k}_ns_pkt" "${k}_ns_in"
	fi
	log "  ringswitch $tag: $(val "${k}_rx_mpps") Mpps received (sender $(val "${k}_tx_mpps")), switch delivered $(val "${k}_deliv_mpps") of $(val "${k}_in_mpps") Mpps in, daemon $(val "${k}_cpu_pct")% CPU = $(val "${k}_ns_pkt") ns/delivered packet"
}

# Idle: a fresh daemon (workers unpinned), both testpmd interactive (ports
# up, no forwarding), daemon CPU over SECS.
vhost_rs_idle() {
	local secs=$1 rx rxname tx txname
	log "vhost ringswitch idle: both testpmd interactive, not forwarding, ${secs}s"
	if ! vhost_daemon --workers 1; then
		failed "vhost idle: $VH_ERR" vh_idle_rs_pct
		return
	fi
	vhost_testpmd vhost-rs-idle-rx 0 "$WORK/vm2.sock" "$TESTPMD_RX_MAC" idle $((secs + 60))
	rx=$VT_PID rxname=$VT_NAME
	vhost_testpmd vhost-rs-idle-tx 1 "$WORK/vm1.sock" "$TESTPMD_TX_MAC" idle $((secs + 60))
	tx=$VT_PID txname=$VT_NAME
	if vhost_wait "$rxname" "$rx" "$VHOST_SW:vm2" && vhost_wait "$txname" "$tx" "$VHOST_SW:vm1"; then
		sleep 1
		local t0 t1 c0 c1 hz
		hz=$(getconf CLK_TCK)
		t0=$(now_s) c0=$(cpu_ticks "$DAEMON_PID")
		sleep "$secs"
		t1=$(now_s) c1=$(cpu_ticks "$DAEMON_PID")
		if is_num "$c0" && is_num "$c1"; then
			put vh_idle_rs_pct "$(calc 'sprintf("%.2f", 100 * (c1 - c0) / hz / (b - a))' c0="$c0" c1="$c1" hz="$hz" a="$t0" b="$t1")"
			put vh_idle_tick_pct "$(calc 'sprintf("%.2f", 100 / hz / (b - a))' hz="$hz" a="$t0" b="$t1")"
			logq "vhost idle: daemon ticks $c0 -> $c1 over $(calc 'b - a' a="$t0" b="$t1") s"
			log "  ringswitch idle with two connected testpmd: daemon $(val vh_idle_rs_pct)% of a core"
		else
			failed "vhost idle: cannot read /proc/$DAEMON_PID/stat" vh_idle_rs_pct
		fi
	else
		failed "vhost idle: $VH_ERR" vh_idle_rs_pct
	fi
	stop_bg "$tx" || true
	stop_bg "$rx" || true
	daemon_stop
}

# OVS-DPDK, same placements, same testpmd: bench/peers/ovs-dpdk.sh.
vhost_ovs() {
	local secs=$1 idle=$2 rc=0 name j pl tag ms k
	local placements="${VHOST_PLACEMENTS[*]}"
	log "vhost OVS-DPDK peer: bench/peers/ovs-dpdk.sh --seconds $secs --idle-seconds $idle --placements \"$placements\" --maxsleep \"$VHOST_OVS_MAXSLEEP\""
	mkdir -p "$RAW/ovs-dpdk"
	run_fg ovs-dpdk "" 900 "$BENCH_DIR/peers/ovs-dpdk.sh" --seconds "$secs" --idle-seconds "$idle" \
		--placements "$placements" --maxsleep "$VHOST_OVS_MAXSLEEP" --raw "$RAW/ovs-dpdk" || rc=$?
	name=$BG_NAME
	sed $'s/\x1b\\[[0-9;]*m//g; s/^/    /' "$RAW/$name.err" >>"$LOGFILE" 2>/dev/null
	j=$(tail -n1 "$RAW/$name.out" 2>/dev/null)
	local all=()
	for pl in "${VHOST_PLACEMENTS[@]}"; do
		tag=${pl//,/}
		for ms in $VHOST_OVS_MAXSLEEP; do
			for k in rx_mpps tx_mpps deliv_mpps in_pkts cpp proc_cpp cpu_pct ns_pkt ns_in; do all+=("vh_${tag}_ovs${ms}_$k"); done
		done
	done
	all+=(vh_idle_ovs_default_pct vh_idle_ovs_50_pct vh_idle_ovs_500_pct)
	if ((rc != 0)) || [[ $j != \{* ]]; then
		failed "OVS-DPDK: $(why "$name" "$rc")" "${all[@]}"
		return
	fi
	VH_OVS_VERSION=$(jq -r '.version' <<<"$j")
	VH_OVS_FLOWS=$(jq -r '.flows' <<<"$j")
	local row f v
	for pl in "${VHOST_PLACEMENTS[@]}"; do
		tag=${pl//,/}
		IFS=, read -r rxc txc pc <<<"$pl"
		for ms in $VHOST_OVS_MAXSLEEP; do
			row=$(jq -c --argjson r "$rxc" --argjson t "$txc" --argjson p "$pc" --argjson m "$ms" \
				'.placements[] | select(.rx_cpu == $r and .tx_cpu == $t and .pmd_cpu == $p and .pmd_maxsleep == $m)' <<<"$j")
			for f in rx_mpps:rx_mpps tx_mpps:tx_mpps deliv_mpps:delivered_mpps in_pkts:pmd_in_pkts \
				cpp:pmd_cycles_per_pkt proc_cpp:pmd_proc_cycles_per_pkt cpu_pct:vswitchd_cpu_pct \
				ns_pkt:cpu_ns_per_delivered_pkt ns_in:cpu_ns_per_pmd_pkt; do
				v=$(jq -r --arg f "${f#*:}" '.[$f] // empty' <<<"$row" 2>/dev/null)
				if is_num "$v"; then
					put "vh_${tag}_ovs${ms}_${f%%:*}" "$v"
				else
					failed "OVS-DPDK placement $pl pmd-maxsleep=$ms: no ${f#*:} in its report (raw/$name.out)" "vh_${tag}_ovs${ms}_${f%%:*}"
				fi
			done
		done
	done
	for ms in default 50 500; do
		v=$(jq -r --arg m "$ms" '.idle_cpu_pct[$m] // empty' <<<"$j" 2>/dev/null)
		if is_num "$v"; then
			put "vh_idle_ovs_${ms}_pct" "$v"
		else
			failed "OVS-DPDK idle pmd-maxsleep=$ms: no figure in its report" "vh_idle_ovs_${ms}_pct"
		fi
	done
	log "  OVS-DPDK $VH_OVS_VERSION: best $(jq -r '.best | "\(.rx_mpps) Mpps (rx CPU \(.rx_cpu), tx CPU \(.tx_cpu), PMD CPU \(.pmd_cpu), pmd-maxsleep \(.pmd_maxsleep))"' <<<"$j"); idle vswitchd $(val vh_idle_ovs_default_pct)% / $(val vh_idle_ovs_50_pct)% / $(val vh_idle_ovs_500_pct)% (default / maxsleep 50 / 500)"
}

# The best placement of each: sets VH_BEST_RS, VH_BEST_OVS (tags like
# 011 / 011:500) after the measurements.
vhost_best() {
	local pl tag ms rt best=0 v
	VH_BEST_RS='' VH_BEST_OVS=''
	for pl in "${VHOST_PLACEMENTS[@]}" "${VHOST_RS_EXTRA[@]}"; do
		tag=${pl//,/}
		tag=${tag//-/x}
		for rt in $VHOST_RS_RT; do
			v=$(val "vh_${tag}_rs${rt}_rx_mpps")
			if is_num "$v" && awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then
				best=$v VH_BEST_RS=$tag:$rt
			fi
		done
	done
	best=0
	for pl in "${VHOST_PLACEMENTS[@]}"; do
		tag=${pl//,/}
		for ms in $VHOST_OVS_MAXSLEEP; do
			v=$(val "vh_${tag}_ovs${ms}_rx_mpps")
			if is_num "$v" && awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then
				best=$v VH_BEST_OVS=$tag:$ms
			fi
		done
	done
}

# 8. The whole section: vhost_measure SECS IDLE_SECS [ringswitch: 1 to measure, 0 if not built]
vhost_measure() {
	local secs=$1 idle=$2 with_rs=${3:-1} pl tag rxc txc wc rt k
	# Other jobs on these 2 CPUs change every figure here: say how busy they were.
	VH_BUSY0=$(cpu_busy_pct)
	VH_TOP0=$(ps -eo pcpu=,comm= --sort=-pcpu | awk 'NR <= 3 { printf "%s%s %s%%", (NR > 1 ? ", " : ""), $2, $1 }')
	log "vhost section: CPUs $VH_BUSY0% busy before it (top: $VH_TOP0)"
	if ! command -v dpdk-testpmd >/dev/null 2>&1; then
		if ((EUID == 0)) && command -v apt-get >/dev/null 2>&1; then
			log "installing dpdk-dev (dpdk-testpmd)"
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >>"$LOGFILE" 2>&1 ||
				{ apt-get update -qq >>"$LOGFILE" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >>"$LOGFILE" 2>&1; }
		fi
	fi
	local rs_keys=()
	for pl in "${VHOST_PLACEMENTS[@]}" "${VHOST_RS_EXTRA[@]}"; do
		tag=${pl//,/}
		tag=${tag//-/x}
		for rt in $VHOST_RS_RT; do
			for k in rx_mpps tx_mpps deliv_mpps in_mpps cpu_pct ns_pkt ns_in; do rs_keys+=("vh_${tag}_rs${rt}_$k"); done
		done
	done
	rs_keys+=(vh_idle_rs_pct)
	if ! command -v dpdk-testpmd >/dev/null 2>&1; then
		failed "dpdk-testpmd missing (apt-get install dpdk-dev)" "${rs_keys[@]}"
	elif ((with_rs)); then
		for pl in "${VHOST_PLACEMENTS[@]}" "${VHOST_RS_EXTRA[@]}"; do
			IFS=, read -r rxc txc wc <<<"$pl"
			tag=${pl//,/}
			for rt in $VHOST_RS_RT; do
				vhost_rs_tput "${tag//-/x}" "$rxc" "$txc" "$wc" "$rt" "$secs"
				vhost_cleanup_prefixes
			done
		done
		vhost_rs_idle "$idle"
		vhost_cleanup_prefixes
	else
		failed "${BUILD_ERR:-ringswitch not built}" "${rs_keys[@]}"
	fi
	daemon_stop # nothing of ours runs while OVS measures
	vhost_ovs "$secs" "$idle"
	vhost_best
}

# ------------------------------------------------------------ report

# "0 / 1 / 1" from "011", "0 / 1 / any" from "01x"
_vh_place() {
	local w=${1:2:1}
	printf '%s / %s / %s' "${1:0:1}" "${1:1:1}" "${w/x/any}"
}

# "not set" for pmd-maxsleep 0
_vh_ms() { if [[ $1 == 0 ]]; then printf 'not set'; else printf '%s' "$1"; fi; }

# Mpps cell: received (sender) [delivered of in]
_vh_rs_cell() {
	local k=vh_$1_rs$2
	ok "${k}_rx_mpps" || {
		printf 'failed'
		return
	}
	printf '%s (sender %s; CPU %s%%, %s ns/pkt)' "$(val "${k}_rx_mpps")" "$(val "${k}_tx_mpps")" \
		"$(val "${k}_cpu_pct")" "$(val "${k}_ns_pkt")"
}
_vh_ovs_cell() {
	local k=vh_$1_ovs$2
	ok "${k}_rx_mpps" || {
		printf 'failed'
		return
	}
	printf '%s (sender %s; CPU %s%%, %s ns/pkt)' "$(val "${k}_rx_mpps")" "$(val "${k}_tx_mpps")" \
		"$(val "${k}_cpu_pct")" "$(val "${k}_ns_pkt")"
}

# The placements table (Markdown).
vhost_placement_table() {
	local pl tag ms rt hdr=("placement: receiver / sender / switch CPU")
	for rt in $VHOST_RS_RT; do
		if ((rt == 0)); then hdr+=("ringswitch: received Mpps"); else hdr+=("ringswitch, --worker-rt-priority $rt: received Mpps"); fi
	done
	for ms in $VHOST_OVS_MAXSLEEP; do
		if ((ms == 0)); then hdr+=("OVS-DPDK, default: received Mpps"); else hdr+=("OVS-DPDK, pmd-maxsleep=$ms: received Mpps"); fi
	done
	_row "${hdr[@]}"
	local sep=("---")
	for rt in $VHOST_RS_RT; do sep+=("---:"); done
	for ms in $VHOST_OVS_MAXSLEEP; do sep+=("---:"); done
	_row "${sep[@]}"
	for pl in "${VHOST_PLACEMENTS[@]}" "${VHOST_RS_EXTRA[@]}"; do
		tag=${pl//,/}
		tag=${tag//-/x}
		local cells=("$(_vh_place "$tag")")
		for rt in $VHOST_RS_RT; do cells+=("$(_vh_rs_cell "$tag" "$rt")"); done
		for ms in $VHOST_OVS_MAXSLEEP; do
			if [[ $tag == *x ]]; then cells+=("— (OVS pins its PMD)"); else cells+=("$(_vh_ovs_cell "$tag" "$ms")"); fi
		done
		_row "${cells[@]}"
	done
}

# ratio of two values or —
_vh_ratio() {
	if is_num "$1" && is_num "$2" && awk -v m="$2" 'BEGIN { exit !(m > 0) }'; then
		awk -v v="$1" -v m="$2" 'BEGIN { printf "%.2f×", v / m }'
	else
		printf '—'
	fi
}

# The summary table (Markdown): best of each, idle CPU, CPU per packet.
vhost_table() {
	local r=${VH_BEST_RS%%:*} rr=${VH_BEST_RS##*:} o=${VH_BEST_OVS%%:*} om=${VH_BEST_OVS##*:}
	local rk=vh_${r}_rs${rr} ok_=vh_${o}_ovs${om}
	local rcell ocell
	_row "measurement" "ringswitch" "target" "meets target" "OVS-DPDK, same run" "ringswitch / OVS"
	_row "---" "---:" "---" "---" "---:" "---:"
	if [[ -n $r ]]; then rcell="$(val "${rk}_rx_mpps") (placement $(_vh_place "$r")$( ((rr > 0)) && echo ", --worker-rt-priority $rr"))"; else rcell=failed; fi
	if [[ -n $o ]]; then ocell="$(val "${ok_}_rx_mpps") (placement $(_vh_place "$o"), pmd-maxsleep=$(_vh_ms "$om"))"; else ocell=failed; fi
	_row "8. VM ports, testpmd txonly → rxonly, 64 B, best placement: received Mpps" "$rcell" "—" "—" "$ocell" \
		"$(_vh_ratio "$(val "${rk}_rx_mpps")" "$(val "${ok_}_rx_mpps")")"
	_row "8. same runs: switch CPU, % of one core (ringswitch serve / ovs-vswitchd)" \
		"$( [[ -n $r ]] && val "${rk}_cpu_pct" || echo failed)" "—" "—" "$( [[ -n $o ]] && val "${ok_}_cpu_pct" || echo failed)" "—"
	_row "8. same runs: switch CPU time per delivered packet, ns" \
		"$( [[ -n $r ]] && val "${rk}_ns_pkt" || echo failed)" "—" "—" "$( [[ -n $o ]] && val "${ok_}_ns_pkt" || echo failed)" \
		"$(_vh_ratio "$(val "${rk}_ns_pkt")" "$(val "${ok_}_ns_pkt")")"
	_row "8. same runs: switch CPU time per packet taken from the sender, ns" \
		"$( [[ -n $r ]] && val "${rk}_ns_in" || echo failed)" "—" "—" "$( [[ -n $o ]] && val "${ok_}_ns_in" || echo failed)" \
		"$(_vh_ratio "$(val "${rk}_ns_in")" "$(val "${ok_}_ns_in")")"
	_row "8. same runs: OVS PMD cycles per packet (pmd-stats-show: all / processing only)" "—" "—" "—" \
		"$( [[ -n $o ]] && printf '%s / %s' "$(val "${ok_}_cpp")" "$(val "${ok_}_proc_cpp")" || echo failed)" "—"
	# The cheapest packet of each, over every run: where the switch took the
	# most packets from the sender (most of them dropped at the receiver's
	# full queue), its fixed costs weigh least.
	local best_ns_o='' best_o='' best_ns_r='' best_r='' pl tag ms rt v rc oc
	for pl in "${VHOST_PLACEMENTS[@]}" "${VHOST_RS_EXTRA[@]}"; do
		tag=${pl//,/}
		tag=${tag//-/x}
		for rt in $VHOST_RS_RT; do
			v=$(val "vh_${tag}_rs${rt}_ns_in")
			if is_num "$v" && { [[ -z $best_ns_r ]] || awk -v a="$v" -v b="$best_ns_r" 'BEGIN { exit !(a < b) }'; }; then
				best_ns_r=$v best_r="$tag:$rt"
			fi
		done
		[[ $tag == *x ]] && continue
		for ms in $VHOST_OVS_MAXSLEEP; do
			v=$(val "vh_${tag}_ovs${ms}_ns_in")
			if is_num "$v" && { [[ -z $best_ns_o ]] || awk -v a="$v" -v b="$best_ns_o" 'BEGIN { exit !(a < b) }'; }; then
				best_ns_o=$v best_o="$tag:$ms"
			fi
		done
	done
	rc=failed oc=failed
	[[ -n $best_r ]] && rc="$best_ns_r ($(val "vh_${best_r%%:*}_rs${best_r##*:}_in_mpps") Mpps taken; placement $(_vh_place "${best_r%%:*}"), --worker-rt-priority $(_vh_ms "${best_r##*:}"))"
	[[ -n $best_o ]] && oc="$best_ns_o ($(awk -v n="$(val "vh_${best_o%%:*}_ovs${best_o##*:}_in_pkts")" -v s="$VH_S" 'BEGIN { printf "%.3f", n / s / 1e6 }') Mpps taken; placement $(_vh_place "${best_o%%:*}"), pmd-maxsleep=$(_vh_ms "${best_o##*:}"); PMD: $(val "vh_${best_o%%:*}_ovs${best_o##*:}_proc_cpp") processing cycles per packet)"
	_row "8. lowest switch CPU time per packet taken from the sender, any run, ns" "$rc" "—" "—" "$oc" "$(_vh_ratio "$best_ns_r" "$best_ns_o")"
	_row "8. idle, two testpmd connected, not forwarding: switch CPU, % of one core" "$(val vh_idle_rs_pct)" "< 1" \
		"$(meets vh_idle_rs_pct lt 1)" "$(val vh_idle_ovs_default_pct) (default), $(val vh_idle_ovs_50_pct) (pmd-maxsleep=50), $(val vh_idle_ovs_500_pct) (=500)" "—"
}

# The commands, for the report.
vhost_commands() {
	local s=/tmp/vm1.sock
	testpmd_argv X pfx-tx "$s" 1 "$TESTPMD_TX_MAC" txonly 64
	printf '%s\n' "${TESTPMD_ARGV[*]}"
	testpmd_argv X pfx-rx "${s/vm1/vm2}" 1 "$TESTPMD_RX_MAC" rxonly
	printf '%s\n' "${TESTPMD_ARGV[*]}"
	testpmd_argv X pfx-idle "$s" 1 "$TESTPMD_TX_MAC" idle
	printf '%s   # idle: stdin kept open, no "start"\n' "${TESTPMD_ARGV[*]}"
	cat <<EOF

# ringswitch
ringswitch serve --socket S --workers 1 [--worker-cpus N] [--worker-rt-priority 10]
ringswitch --socket S ctl port add $VHOST_SW:vm1 --vhost-user /tmp/vm1.sock --client
ringswitch --socket S ctl port add $VHOST_SW:vm2 --vhost-user /tmp/vm2.sock --client
ringswitch --socket S ctl stats --json
# OVS-DPDK (bench/peers/ovs-dpdk.sh; D: its directory, hugepages mounted)
ovs-vsctl set Open_vSwitch . other_config:dpdk-init=true other_config:dpdk-extra=--no-pci \\
      other_config:dpdk-socket-mem=512 other_config:dpdk-socket-limit=512 \\
      other_config:pmd-cpu-mask=0x2 other_config:dpdk-lcore-mask=0x1
/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk unix:\$D/db.sock --pidfile=... --log-file=... &
ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev
ovs-vsctl add-port br0 vm1 -- set Interface vm1 type=dpdkvhostuserclient options:vhost-server-path=/tmp/vm1.sock
ovs-vsctl add-port br0 vm2 -- set Interface vm2 type=dpdkvhostuserclient options:vhost-server-path=/tmp/vm2.sock
ovs-ofctl del-flows br0; ovs-ofctl add-flow br0 in_port=vm1,actions=output:vm2
ovs-ofctl add-flow br0 in_port=vm2,actions=output:vm1
ovs-vsctl set Open_vSwitch . other_config:pmd-maxsleep=500   # or: remove ... pmd-maxsleep
ovs-appctl dpif-netdev/pmd-stats-clear; ovs-appctl dpif-netdev/pmd-stats-show; ovs-ofctl dump-ports br0 vm2
EOF
}

# Section 8 of REPORT.md.
vhost_report() {
	local ms_list='' rt_list='' m
	for m in $VHOST_OVS_MAXSLEEP; do ms_list+="${ms_list:+, }$(_vh_ms "$m")"; done
	for m in $VHOST_RS_RT; do rt_list+="${rt_list:+, }$(_vh_ms "$m")"; done
	cat <<EOF
## VM ports (vhost-user) beside OVS-DPDK

DPDK testpmd with a virtio_user port stands in for a fast VM: testpmd
txonly (64-byte frames) on port \`$VHOST_SW:vm1\` → the switch → testpmd
rxonly on \`$VHOST_SW:vm2\`. The same two testpmd command lines, the same CPU
placements, in the same run: ${H_VERSION:-ringswitch (not built)} and Open vSwitch
${VH_OVS_VERSION:-?} with DPDK (\`ovs-vswitchd-dpdk\`, userspace datapath, one PMD
thread, \`dpdkvhostuserclient\` ports, OpenFlow ${VH_OVS_FLOWS:-p2p}: vm1 → vm2).
CPUs ${VH_BUSY0:-?}% busy in the second before this section (top: ${VH_TOP0:-?}).

EOF
	vhost_table
	cat <<EOF

Every placement (CPU of the receiver testpmd / the sender testpmd / the
switch: ringswitch's worker \`serve --workers 1 --worker-cpus N\`, "any" = not
pinned; OVS's PMD thread \`other_config:pmd-cpu-mask\`), each switch with and
without its knob for sharing a CPU with spinning guests (ringswitch: \`serve
--worker-rt-priority N\`, a SCHED_FIFO worker; OVS: \`pmd-maxsleep\`):
received Mpps, the sender's Mpps, the switch process's CPU and its CPU time
per delivered packet:

EOF
	vhost_placement_table
	cat <<EOF

How these were measured:

- Frontends (both switches): testpmd owns each socket (\`server=1\`);
  ringswitch connects (\`ctl port add $VHOST_SW:vm1 --vhost-user PATH
  --client\`, a fresh \`serve --workers 1\` per placement), OVS too
  (\`type=dpdkvhostuserclient options:vhost-server-path=PATH\`). Both lcores
  of a testpmd on one CPU (\`--lcores=0@X,1@X\`), \`--no-huge\` (one shared
  memfd), one queue pair of 256 descriptors (virtio_user's default). The
  sender's frames go to the receiver's MAC, which neither switch ever
  learns (the receiver sends nothing): ringswitch floods them to its one
  other port; OVS follows its flow vm1 → vm2. The commands are below.
- Received Mpps: the median of the receiver testpmd's Rx-pps samples
  (\`--stats-period 1\`) after the first non-zero one, covering ${VH_S} s; the
  sender's likewise from its Tx-pps. 64 B is testpmd \`--txpkts=64\`.
- Two CPUs, three busy-polling threads: both testpmd forwarding lcores spin
  (txonly and rxonly never sleep), and so does OVS's PMD thread unless
  \`pmd-maxsleep\` lets it sleep when its queues are (nearly) empty.
  ringswitch's worker sleeps when it finds no work and is woken by the
  sender's kick; with \`--worker-rt-priority\` (SCHED_FIFO) a woken worker
  preempts the spinning testpmd on its CPU at once. Whenever two spinning threads share a CPU the scheduler
  gives each a slice of milliseconds in turn, and a 256-entry virtqueue
  between two threads that never run at the same time moves at most 256
  frames per slice: that, not the switch's per-packet cost, is what bounds
  most of these figures. OVS was measured with pmd-maxsleep: $ms_list;
  ringswitch with --worker-rt-priority: $rt_list.
- CPU per packet, over a ${VH_S} s window during the traffic: utime+stime of
  the switch process (all threads; \`/proc/PID/stat\`) divided by the
  packets it delivered to vm2 (ringswitch: \`ctl stats --json\` rx_packets of
  $VHOST_SW:vm2; OVS: \`ovs-ofctl dump-ports\` tx pkts of vm2), and by the
  packets it took from vm1 (ringswitch: tx_packets of $VHOST_SW:vm1; OVS:
  \`dpif-netdev/pmd-stats-show\` packets received, after
  \`pmd-stats-clear\`). A switch that spins counts its spinning too; the PMD's
  "processing cycles per packet" leave the idle polls out (TSC cycles; CPU
  MHz here: $(awk -F': *' '/^cpu MHz/ { print $2; exit }' /proc/cpuinfo)).
  ns per packet means little where the receiver starves (the packet count
  is small and the switch's time is spent waiting or dropping).
- Idle: both testpmd started interactive (\`-i\`, ports started, no
  \`start\`: nothing polls), a fresh daemon (worker not pinned) with both
  ports connected / OVS with its PMD on CPU ${VHOST_PLACEMENTS[0]##*,}; the
  switch process's CPU over ${VH_IDLE_S} s, as % of one core. OVS three times:
  pmd-maxsleep not set, =50 and =500 (us).$(ok vh_idle_tick_pct && printf ' One clock tick over the window is %s%% of a core.' "$(val vh_idle_tick_pct)")
- Each OVS figure comes from \`bench/peers/ovs-dpdk.sh\` (its logs, testpmd
  logs and pmd-stats in \`raw/ovs-dpdk/\`), run after every ringswitch
  process has stopped; hugepages: it raises vm.nr_hugepages only if fewer than
  300 are free and puts it back.

The commands (X: a placement's CPU; each testpmd has its own --file-prefix):

\`\`\`sh
$(vhost_commands)
\`\`\`

EOF
}
