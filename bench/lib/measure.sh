# shellcheck shell=bash
# bench/lib/measure.sh - the daemon and the measurements of bench/run.sh.
# Sourced after common.sh. Uses: RS (the ringswitch binary), SOCK, RX_CPU,
# TX_CPU, RAW, and the results store of report.sh (put, failed).

DAEMON_TPID= # the timeout process running the daemon
DAEMON_PID=  # the daemon itself
DAEMON_ARGS=

ctl() { timeout -k 2 15 "$RS" --socket "$SOCK" ctl "$@"; }

# Start a daemon on $SOCK with extra serve arguments. Returns 1 (with the
# reason in DAEMON_ERR) if it does not answer within 15 s.
daemon_start() {
	local deadline
	DAEMON_ERR=
	daemon_stop
	rm -f -- "$SOCK"
	DAEMON_ARGS="$*"
	start_bg daemon "" "$DAEMON_MAX_S" "$RS" serve --socket "$SOCK" "$@"
	DAEMON_TPID=$BG_PID
	local name=$BG_NAME
	deadline=$((SECONDS + 15))
	while :; do
		if ! kill -0 "$DAEMON_TPID" 2>/dev/null; then
			local rc=0
			wait_bg "$DAEMON_TPID" || rc=$?
			DAEMON_ERR="daemon did not start: $(why "$name" "$rc")"
			DAEMON_TPID=
			return 1
		fi
		[[ -S $SOCK ]] && ctl switch list >/dev/null 2>&1 && break
		if ((SECONDS >= deadline)); then
			DAEMON_ERR="daemon not answering on $SOCK after 15 s"
			daemon_stop
			return 1
		fi
		sleep 0.1
	done
	DAEMON_PID=$(child_of "$DAEMON_TPID") || {
		DAEMON_ERR="cannot find the daemon's pid"
		daemon_stop
		return 1
	}
	logq "daemon up: pid $DAEMON_PID, serve $*"
}

daemon_stop() {
	[[ -n $DAEMON_TPID ]] || return 0
	stop_bg "$DAEMON_TPID" || true
	DAEMON_TPID='' DAEMON_PID=''
}

# Make sure a daemon with these arguments is running (restarts it if it
# died or runs with other arguments).
daemon_ensure() {
	if [[ -n $DAEMON_TPID ]] && kill -0 "$DAEMON_TPID" 2>/dev/null && [[ $DAEMON_ARGS == "$*" ]]; then
		return 0
	fi
	[[ -n $DAEMON_TPID ]] && log "restarting the daemon (serve $*)"
	daemon_start "$@"
}

# ------------------------------------------------------------ throughput

# One receiver (pinned to RX_CPU) and one sender (pinned to TX_CPU).
#   tput LABEL RXPORT TXPORT LEN BURST BUSY SECS
# Also sets TP_RXNAME/TP_TXNAME (their raw/ output stems), TP_DAEMON_S (the
# daemon's CPU seconds over the measurement) and TP_WALL (its seconds).
# Sets TP_RX and TP_TX (pps), TP_RXN, TP_TXN (packets), or TP_ERR and
# returns 1. The receiver's rate is measured by pkt-gen from its first to
# its last received packet.
tput() {
	local label=$1 rxp=$2 txp=$3 len=$4 burst=$5 busy=$6 secs=$7
	local bf=() rx rxname txname rc=0 r
	((busy)) && bf=(--busy)
	TP_RX='' TP_TX='' TP_RXN='' TP_TXN='' TP_ERR='' TP_RXNAME='' TP_TXNAME=''
	TP_DAEMON_S='' TP_WALL=''
	local dc0 dt0
	dt0=$(now_s) dc0=$([[ -n $DAEMON_PID ]] && cpu_ticks "$DAEMON_PID")
	start_bg "$label-rx" "$RX_CPU" $((secs + 40)) "$RS" --socket "$SOCK" pkt-gen \
		-i "$rxp" -f rx -b "$burst" "${bf[@]}" --duration $((secs + 30)) -T 0 --json
	rx=$BG_PID rxname=$BG_NAME
	wait_ready "$rxname" "$rx" 15 || r=$?
	if [[ -n ${r:-} ]]; then
		stop_bg "$rx" || rc=$?
		TP_ERR="receiver did not open $rxp: $(why "$rxname" "$rc")"
		return 1
	fi
	run_fg "$label-tx" "$TX_CPU" $((secs + 30)) "$RS" --socket "$SOCK" pkt-gen \
		-i "$txp" -f tx -l "$len" -b "$burst" "${bf[@]}" --duration "$secs" -T 0 --json || rc=$?
	txname=$BG_NAME
	sleep 0.3
	# While the receiver's port is still open (its counters go with it).
	[[ -n ${TP_HOOK:-} ]] && "$TP_HOOK"
	# SIGTERM ends the receiver cleanly; it still prints its report.
	local rxrc=0
	stop_bg "$rx" || rxrc=$?
	TP_TX=$(jfield "$txname" pps) TP_TXN=$(jfield "$txname" packets)
	TP_RX=$(jfield "$rxname" pps) TP_RXN=$(jfield "$rxname" packets)
	TP_RXNAME=$rxname TP_TXNAME=$txname
	# The daemon's CPU time over the whole measurement (seconds), and its wall time.
	local dc1
	dc1=$([[ -n $DAEMON_PID ]] && cpu_ticks "$DAEMON_PID")
	TP_WALL=$(calc 'b - a' a="$dt0" b="$(now_s)")
	if is_num "$dc0" && is_num "$dc1"; then
		TP_DAEMON_S=$(calc 'sprintf("%.4f", (b - a) / hz)' a="$dc0" b="$dc1" hz="$(getconf CLK_TCK)")
	fi
	if ((rc != 0)) || ! is_num "$TP_TX"; then
		TP_ERR="sender failed: $(why "$txname" "$rc")"
		return 1
	fi
	if ! is_num "$TP_RX"; then
		TP_ERR="receiver printed no report: $(why "$rxname" "$rxrc")"
		return 1
	fi
	if [[ ${TP_RXN:-0} == 0 ]]; then
		TP_ERR="receiver got no packets (sender sent ${TP_TXN:-?})"
		return 1
	fi
	logq "$label: rx $TP_RXN pkts $(mpps "$TP_RX") Mpps, tx $TP_TXN pkts $(mpps "$TP_TX") Mpps"
	return 0
}

mpps() { awk -v p="$1" 'BEGIN { printf "%.3f", p / 1e6 }'; }

# 1. Pipe, 60 B, batch 512, blocking and busy.
measure_pipe() {
	local secs=$1 mode busy key
	for mode in blocking busy; do
		busy=0
		[[ $mode == busy ]] && busy=1
		key=pipe_${mode}_mpps
		log "pipe 60 B, batch 512, $mode: ${secs}s"
		if ! daemon_ensure "${DAEMON_DEFAULT[@]}"; then
			failed "$DAEMON_ERR" "$key"
			continue
		fi
		PIPE_ID=$((PIPE_ID + 1))
		if tput "pipe-$mode" "bp}$PIPE_ID" "bp{$PIPE_ID" 60 512 "$busy" "$secs"; then
			put "$key" "$(mpps "$TP_RX")"
			put "pipe_${mode}_tx_mpps" "$(mpps "$TP_TX")"
			log "  pipe $mode: $(mpps "$TP_RX") Mpps received"
		else
			failed "pipe $mode: $TP_ERR" "$key" "pipe_${mode}_tx_mpps"
		fi
	done
	# Larger rings and batches: fewer wake-ups per packet.
	log "pipe 60 B, 4096 slots, batch 2048, blocking: ${secs}s"
	PIPE_ID=$((PIPE_ID + 1))
	if tput "pipe-big" "bp}$PIPE_ID@conf:slots=4096" "bp{$PIPE_ID" 60 2048 0 "$secs"; then
		put pipe_big_mpps "$(mpps "$TP_RX")"
		log "  pipe 4096 slots: $(mpps "$TP_RX") Mpps received"
	else
		failed "pipe 4096 slots: $TP_ERR" pipe_big_mpps
	fi
}

# 2. Switch, 2 on-demand ports on a switch of their own, 60 and 1514 B.
# Drops: drop_rx_full of the receiving port, read from ctl stats after the
# sender has stopped and while the receiver still holds its port open.
SW_STATS=
_switch_stats() {
	SW_STATS=$(ctl stats --json 2>>"$LOGFILE") || SW_STATS=
}

# The worker gets a core of its own (pinned to TX_CPU) and both clients
# share the other: three busy threads on two cores otherwise fight.
measure_switch() {
	local secs=$1 len sw keys drops other
	local SWITCH_DAEMON=(--workers 1 --worker-cpus "$TX_CPU")
	local TX_CPU=$RX_CPU
	for len in 60 1514; do
		sw=valebench$len
		keys=("sw${len}_rx_mpps" "sw${len}_tx_mpps" "sw${len}_drops" "sw${len}_drop_pct")
		log "switch, 2 ports, $len B, batch 512, blocking: ${secs}s"
		if ! daemon_ensure "${SWITCH_DAEMON[@]}"; then
			failed "$DAEMON_ERR" "${keys[@]}"
			continue
		fi
		SW_STATS=
		TP_HOOK=_switch_stats
		if tput "switch-$len" "$sw:b" "$sw:a" "$len" 512 0 "$secs"; then
			TP_HOOK=
			put "sw${len}_rx_mpps" "$(mpps "$TP_RX")"
			put "sw${len}_tx_mpps" "$(mpps "$TP_TX")"
			printf '%s\n' "$SW_STATS" >"$RAW/stats-switch-$len.json"
			drops=$(jq -r --arg p "$sw:b" '.[] | select(.name == $p) | .drop_rx_full' <<<"$SW_STATS" 2>/dev/null)
			other=$(jq -r --arg p "$sw:b" '.[] | select(.name == $p) |
				(.drop_malformed + .drop_short + .drop_long)' <<<"$SW_STATS" 2>/dev/null)
			logq "switch $len: sender sent $TP_TXN, receiver got $TP_RXN; ctl stats $sw:b: drop_rx_full=$drops, other drops=$other"
			if is_num "$drops" && is_num "$TP_TXN"; then
				put "sw${len}_drops" "$drops"
				put "sw${len}_drop_pct" "$(calc 's > 0 ? sprintf("%.1f", 100 * d / s) : "0.0"' d="$drops" s="$TP_TXN")"
			else
				failed "switch $len B: $sw:b missing from ctl stats --json, or ctl stats failed (see log)" \
					"sw${len}_drops" "sw${len}_drop_pct"
			fi
			log "  switch $len B: $(mpps "$TP_RX") Mpps received, $(mpps "$TP_TX") Mpps sent, $(val "sw${len}_drops") dropped"
		else
			TP_HOOK=
			failed "switch $len B: $TP_ERR" "${keys[@]}"
		fi
	done
}

# 5 and 6, idle and memory: ringswitch-bench run --sections idle.

# ------------------------------------------------------------ DPDK memif

# 7. bench/peers/memif.sh, receiver on RX_CPU, sender on TX_CPU.
measure_memif() {
	local secs=$1 size rc name v
	for size in 64 1514; do
		log "DPDK memif peer: testpmd txonly -> rxonly, $size B, ${secs}s"
		rc=0
		run_fg "memif-$size" "" $((secs * 3 + 120)) \
			env MEMIF_SERVER_CPU="$RX_CPU" MEMIF_CLIENT_CPU="$TX_CPU" "$BENCH_DIR/peers/memif.sh" \
			--seconds "$secs" --size "$size" || rc=$?
		name=$BG_NAME
		v=$(jfield "$name" median_mpps)
		if ((rc == 0)) && is_num "$v"; then
			put "memif${size}_mpps" "$v"
			log "  memif $size B: $v Mpps"
		else
			failed "memif $size B: $(why "$name" "$rc")" "memif${size}_mpps"
		fi
		sed $'s/\x1b\\[[0-9;]*m//g; s/^/    /' "$RAW/$name.err" >>"$LOGFILE" 2>/dev/null
	done
}
