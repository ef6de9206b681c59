# shellcheck shell=bash
# bench/lib/samples.sh - the raw data bench/compare hands to
# ringswitch-bench report: meta.tsv, samples.tsv, failures.tsv, notes.tsv
# in $DATA (see crates/bench for the formats). Sourced after
# common.sh and report.sh.

# samples_init DIR: empty data files with their headers.
samples_init() {
	DATA=$1
	mkdir -p "$DATA"
	: >"$DATA/meta.tsv"
	printf 'section\tcase\tsystem\tmetric\tunit\tbetter\tx\trun\tvalue\n' >"$DATA/samples.tsv"
	printf 'section\tcase\tsystem\treason\n' >"$DATA/failures.tsv"
	: >"$DATA/notes.tsv"
}

# One line of a TSV file: tabs and newlines inside fields become spaces.
_tsv() {
	local out='' f first=1
	for f in "$@"; do
		f=${f//$'\t'/ }
		f=${f//$'\n'/ }
		((first)) || out+=$'\t'
		out+=$f first=0
	done
	printf '%s\n' "$out"
}

meta() { _tsv "$1" "$2" >>"$DATA/meta.tsv"; }
note() { _tsv "$1" "$2" >>"$DATA/notes.tsv"; }

# sample SECTION CASE SYSTEM METRIC UNIT BETTER X RUN VALUE
# A value that is not a number becomes a failure line instead.
sample() {
	if is_num "$9"; then
		_tsv "$@" >>"$DATA/samples.tsv"
	else
		miss "$1" "$2" "$3" "$4 run $8: no figure ('$9')"
	fi
}

# miss SECTION CASE SYSTEM REASON
miss() {
	_tsv "$@" >>"$DATA/failures.tsv"
	log "  not measured: $1 / $2 / $3: $4"
}

# Forget what report.sh's store holds, before a measurement whose keys are
# then taken with `take`.
# shellcheck disable=SC2034 # report.sh's store
store_reset() {
	VAL=()
	WHY=()
	KEYS=()
}

# take KEY SECTION CASE SYSTEM METRIC UNIT BETTER X RUN: the store's value
# of KEY as a sample, or its failure reason as a failure line.
take() {
	local key=$1
	shift
	if ok "$key"; then
		sample "$@" "$(val "$key")"
	elif [[ -n ${WHY[$key]+x} ]]; then
		miss "$1" "$2" "$3" "${WHY[$key]}"
	else
		miss "$1" "$2" "$3" "$4: not reported (key $key)"
	fi
}

# param NAME: a parameter of bench/params.tsv (the one ringswitch-bench run
# measures with), for QUICK's mode; lists with spaces. Uses BENCH_DIR, PROG.
param() {
	awk -F'\t' -v n="$1" -v c=$((QUICK ? 2 : 3)) '$1 == n { gsub(",", " ", $c); print $c; f = 1 } END { exit !f }' \
		"$BENCH_DIR/params.tsv" || {
		echo "$PROG: no parameter $1 in bench/params.tsv" >&2
		exit 2
	}
}
# bench_run SECTIONS: ringswitch's side of SECTIONS (comma-separated),
# measured by `ringswitch-bench run` into the same data files, with the
# parameters of bench/params.tsv (its progress on stderr and in run.log, its
# processes' output in raw/run-*). Uses BENCH (the ringswitch-bench binary,
# empty if it did not build), RS, WORK, OUT, RUNS, QUICK, RX_CPU, TX_CPU.
bench_run() {
	local s=$1 rc=0 q=() x
	daemon_stop
	if [[ -z $BENCH ]]; then
		for x in ${s//,/ }; do miss "$x" "every case" "ringswitch" "not measured: ringswitch-bench did not build (see run.log)"; done
		return
	fi
	((QUICK)) && q=(--quick)
	# bench/compare's load section shows the saturated peers' CPU.
	declare -F want >/dev/null && want load && q+=(--peer-load)
	logq "start ringswitch-bench run --sections $s"
	timeout -k 3 3600 "$BENCH" run --ringswitch "$RS" --socket "$WORK/bench.sock" --out "$OUT" \
		--params "$BENCH_DIR/params.tsv" --bench-dir "$BENCH_DIR" --sections "$s" --runs "$RUNS" --rx-cpu "$RX_CPU" --tx-cpu "$TX_CPU" \
		"${q[@]}" </dev/null &
	BG_PIDS+=("$!")
	wait_bg "$!" || rc=$?
	if ((rc != 0)); then
		for x in ${s//,/ }; do miss "$x" "every case" "ringswitch" "ringswitch-bench run --sections $s exited with status $rc (see run.log)"; done
	fi
}
