# shellcheck shell=bash
# bench/lib/report.sh - the results store and the Markdown report of
# bench/run.sh. Sourced after common.sh.

declare -A VAL=() # key -> measured value
declare -A WHY=() # key -> reason it failed
declare -a KEYS=()

_remember() { [[ -n ${VAL[$1]+x} || -n ${WHY[$1]+x} ]] || KEYS+=("$1"); }

put() {
	_remember "$1"
	VAL[$1]=$2
	unset 'WHY[$1]'
}

# failed REASON KEY...: the keys' cells read "failed"; the reason goes to the log.
failed() {
	local reason=$1 k
	shift
	log "  failed: $reason"
	for k in "$@"; do
		_remember "$k"
		unset 'VAL[$k]'
		WHY[$k]=$reason
	done
}

# The value of a key, or "failed".
val() {
	if [[ -n ${VAL[$1]+x} ]] && [[ -n ${VAL[$1]} ]]; then
		printf '%s' "${VAL[$1]}"
	else
		printf 'failed'
	fi
}

ok() { [[ -n ${VAL[$1]+x} ]] && is_num "${VAL[$1]}"; }

# meets KEY OP TARGET -> yes / no / "—" (OP: ge, le, lt)
meets() {
	ok "$1" || {
		printf '—'
		return
	}
	awk -v v="${VAL[$1]}" -v op="$2" -v t="$3" 'BEGIN {
		r = (op == "ge") ? v >= t : (op == "le") ? v <= t : v < t
		printf "%s", r ? "yes" : "no" }'
}

# ratio KEY MEMIF_KEY -> "0.42×" or "—"
ratio() {
	if ok "$1" && ok "$2" && awk -v m="${VAL[$2]}" 'BEGIN { exit !(m > 0) }'; then
		awk -v v="${VAL[$1]}" -v m="${VAL[$2]}" 'BEGIN { printf "%.2f×", v / m }'
	else
		printf '—'
	fi
}

# results.tsv: key, value, reason if failed.
write_tsv() {
	local k
	printf 'key\tvalue\tfailure\n'
	for k in "${KEYS[@]}"; do
		printf '%s\t%s\t%s\n' "$k" "$(val "$k")" "${WHY[$k]-}"
	done
}

_row() {
	local out='|' c
	for c in "$@"; do out+=" $c |"; done
	printf '%s\n' "$out"
}

# RTT cell: p50 / p99 / min / avg
rtt_cell() {
	local k=rtt_$1 f out=()
	for f in p50 p99 min avg; do out+=("$(val "${k}_$f")"); done
	local IFS=/
	printf '%s' "${out[*]}" | sed 's#/# / #g'
}

drops_cell() {
	if ok "sw$1_drops"; then
		printf '%s (%s%% of sent)' "$(val "sw$1_drops")" "$(val "sw$1_drop_pct")"
	else
		printf 'failed'
	fi
}

# The main table (Markdown).
main_table() {
	local m64=memif64_mpps m1514=memif1514_mpps
	local rss8_target=$((4096 + 8)) rss64_target=$((4096 + 64))
	_row "measurement" "ringswitch" "target" "meets target" "DPDK memif, same run" "ringswitch / memif"
	_row "---" "---:" "---" "---" "---:" "---:"
	_row "1. pipe, 60 B, batch 512, blocking: received Mpps" "$(val pipe_blocking_mpps)" "≥ 100" \
		"$(meets pipe_blocking_mpps ge 100)" "$(val $m64) (64 B)" "$(ratio pipe_blocking_mpps $m64)"
	_row "1. pipe, 60 B, batch 512, busy: received Mpps" "$(val pipe_busy_mpps)" "≥ 100" \
		"$(meets pipe_busy_mpps ge 100)" "$(val $m64) (64 B)" "$(ratio pipe_busy_mpps $m64)"
	_row "1. pipe, 60 B, 4096 slots, batch 2048, blocking: received Mpps" "$(val pipe_big_mpps)" "≥ 100" \
		"$(meets pipe_big_mpps ge 100)" "$(val $m64) (64 B)" "$(ratio pipe_big_mpps $m64)"
	_row "2. switch, 60 B, batch 512: received Mpps" "$(val sw60_rx_mpps)" "≥ 20" \
		"$(meets sw60_rx_mpps ge 20)" "$(val $m64) (64 B)" "$(ratio sw60_rx_mpps $m64)"
	_row "2. switch, 60 B: sender Mpps" "$(val sw60_tx_mpps)" "—" "—" "—" "—"
	_row "2. switch, 60 B: drops (drop_rx_full at the receiver)" "$(drops_cell 60)" "—" "—" "—" "—"
	_row "2. switch, 1514 B, batch 512: received Mpps" "$(val sw1514_rx_mpps)" "≥ 8" \
		"$(meets sw1514_rx_mpps ge 8)" "$(val $m1514) (1514 B)" "$(ratio sw1514_rx_mpps $m1514)"
	_row "2. switch, 1514 B: sender Mpps" "$(val sw1514_tx_mpps)" "—" "—" "—" "—"
	_row "2. switch, 1514 B: drops (drop_rx_full at the receiver)" "$(drops_cell 1514)" "—" "—" "—" "—"
	_row "4. RTT pipe, busy: p50 / p99 / min / avg ns" "$(rtt_cell pipe_busy)" "p50 ≤ 1000" \
		"$(meets rtt_pipe_busy_p50 le 1000)" "—" "—"
	_row "4. RTT switch, busy: p50 / p99 / min / avg ns" "$(rtt_cell switch_busy)" "p50 ≤ 2000" \
		"$(meets rtt_switch_busy_p50 le 2000)" "—" "—"
	_row "4. RTT pipe, blocking: p50 / p99 / min / avg ns" "$(rtt_cell pipe_blocking)" "p50 ≤ 15000" \
		"$(meets rtt_pipe_blocking_p50 le 15000)" "—" "—"
	_row "4. RTT switch, blocking: p50 / p99 / min / avg ns" "$(rtt_cell switch_blocking)" "p50 ≤ 15000" \
		"$(meets rtt_switch_blocking_p50 le 15000)" "—" "—"
	_row "5. idle, 8 ports open: daemon CPU, % of one core" "$(val idle_daemon_pct)" "< 1" \
		"$(meets idle_daemon_pct lt 1)" "—" "—"
	_row "5. idle: the 8 pkt-gen rx, CPU in all (one at most), % of one core" \
		"$(val idle_pktgen_pct) ($(val idle_pktgen_max_pct))" "—" "—" "—" "—"
	_row "6. daemon VmRSS − RssShmem, 8 ports open, KiB" "$(val rss8_kib)" "≤ $rss8_target" \
		"$(meets rss8_kib le $rss8_target)" "—" "—"
	_row "6. daemon VmRSS − RssShmem, 64 ports, KiB" "$(val rss64_kib)" "≤ $rss64_target" \
		"$(meets rss64_kib le $rss64_target)" "—" "—"
	_row "6. daemon RSS per added port, bytes" "$(val rss_per_port_b)" "≤ 1024" \
		"$(meets rss_per_port_b le 1024)" "—" "—"
	_row "7. DPDK memif (testpmd txonly → rxonly), 64 B: received Mpps" "$(val $m64)" "—" "—" "—" "—"
	_row "7. DPDK memif (testpmd txonly → rxonly), 1514 B: received Mpps" "$(val $m1514)" "—" "—" "—" "—"
}

# The batch sweep as a table: batch | pipe | switch.
batch_table() {
	local csv=$1 b
	[[ -s $csv ]] || {
		printf '(no batch sweep: %s missing)\n' "$csv"
		return
	}
	_row "batch (pkt-gen -b; switch: also daemon --batch)" "pipe, Mpps" "switch, Mpps"
	_row "---:" "---:" "---:"
	# shellcheck disable=SC2013 # numbers, one a line
	for b in $(awk -F, 'NR > 1 { print $2 }' "$csv" | sort -n -u); do
		_row "$b" \
			"$(awk -F, -v b="$b" '$1 == "pipe" && $2 == b { print $3 }' "$csv")" \
			"$(awk -F, -v b="$b" '$1 == "switch" && $2 == b { print $3 }' "$csv")"
	done
}

failures() {
	local k n=0
	for k in "${KEYS[@]}"; do
		[[ -n ${WHY[$k]+x} ]] || continue
		# shellcheck disable=SC2016 # Markdown backquotes
		printf -- '- `%s`: %s\n' "$k" "${WHY[$k]}"
		n=$((n + 1))
	done
	((n)) || printf 'None.\n'
}
