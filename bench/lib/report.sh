# shellcheck shell=bash
# bench/lib/report.sh - the results store of bench/run.sh's measurements
# (put, failed, val, ok; bench/lib/samples.sh's `take` turns its values into
# samples) and the Markdown table rows of the VM and NIC sections' tables.
# Sourced after common.sh.

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

_row() {
	local out='|' c
	for c in "$@"; do out+=" $c |"; done
	printf '%s\n' "$out"
}
