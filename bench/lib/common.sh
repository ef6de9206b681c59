# shellcheck shell=bash
# bench/lib/common.sh - logging, processes with timeouts, cleanup, small
# parsing helpers for bench/run.sh. Sourced, not run.
#
# Every process the benchmark starts goes through start_bg: it runs under
# `timeout` (which makes itself a process-group leader, so killing the group
# kills the whole command), optionally pinned with taskset, with stdout and
# stderr in $RAW/<seq>-<name>.{out,err}. cleanup_all stops whatever is left.

# Set by run.sh before use: RAW (raw output directory), LOGFILE.
declare -a BG_PIDS=() # timeout pids still running
BG_SEQ=0
BG_PID=  # pid (of timeout) of the last start_bg
BG_NAME= # file stem of the last start_bg

log() {
	local line
	line="$(date +%H:%M:%S) $*"
	printf '%s\n' "$line" >&2
	[[ -n ${LOGFILE:-} ]] && printf '%s\n' "$line" >>"$LOGFILE"
	return 0
}

# Only to the log file (details that would clutter the terminal).
logq() {
	[[ -n ${LOGFILE:-} ]] && printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >>"$LOGFILE"
	return 0
}

die() {
	log "error: $*"
	exit 1
}

is_num() { [[ ${1:-} =~ ^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# Start a command in the background under a timeout.
#   start_bg NAME CPU SECS cmd...     CPU: a CPU number, or "" for no pinning
# Sets BG_PID (the timeout process, leader of its own process group) and
# BG_NAME (the stem of $RAW/BG_NAME.out and .err).
start_bg() {
	local name=$1 cpu=$2 secs=$3
	shift 3
	BG_SEQ=$((BG_SEQ + 1))
	BG_NAME=$(printf '%03d-%s' "$BG_SEQ" "$name" | tr -c 'A-Za-z0-9._\n-' '_')
	local pin=()
	[[ -n $cpu ]] && pin=(taskset -c "$cpu")
	logq "start $BG_NAME (cpu ${cpu:-any}, timeout ${secs}s): ${pin[*]} $*"
	timeout -k 3 "$secs" "${pin[@]}" "$@" </dev/null >"$RAW/$BG_NAME.out" 2>"$RAW/$BG_NAME.err" &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

_forget_pid() {
	local p keep=()
	for p in "${BG_PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	BG_PIDS=("${keep[@]}")
}

# Wait for a start_bg process; returns its exit status (124: timed out).
wait_bg() {
	local rc=0
	wait "$1" || rc=$?
	_forget_pid "$1"
	return "$rc"
}

# Stop a start_bg process: one SIGTERM to the command itself (not through
# timeout, which would pass it on twice, to the command and to its group:
# pkt-gen takes a second signal as "exit now, without a report"), then
# SIGKILL to the whole process group after 5 s. Returns its status.
stop_bg() {
	local pid=$1 i rc=0 c
	if kill -0 "$pid" 2>/dev/null; then
		c=$(pgrep -P "$pid" 2>/dev/null | head -n1)
		kill -TERM "${c:-$pid}" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			logq "pid $pid ignored SIGTERM; killing its process group"
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	wait "$pid" 2>/dev/null || rc=$?
	# Whatever the command left behind in its group.
	kill -KILL -- "-$pid" 2>/dev/null || true
	_forget_pid "$pid"
	return "$rc"
}

# Run a command to completion under a timeout (in the background, so that
# signals to this script are handled at once). Returns its status.
#   run_fg NAME CPU SECS cmd...
run_fg() {
	start_bg "$@"
	wait_bg "$BG_PID"
}

# Stop everything still running, newest first.
cleanup_all() {
	local i
	for ((i = ${#BG_PIDS[@]} - 1; i >= 0; i--)); do
		stop_bg "${BG_PIDS[i]}" || true
	done
}

# The pid of the command a start_bg timeout runs (taskset execs it).
child_of() {
	local parent=$1 i c
	for ((i = 0; i < 50; i++)); do
		c=$(pgrep -P "$parent" 2>/dev/null | head -n1)
		[[ -n $c ]] && {
			echo "$c"
			return 0
		}
		kill -0 "$parent" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# Why a start_bg process failed, in one line, with its stderr tail in the log.
#   why NAME RC
why() {
	local name=$1 rc=$2 last
	last=$(grep -v '^[[:space:]]*$' "$RAW/$name.err" 2>/dev/null | tail -n1 |
		sed $'s/\x1b\\[[0-9;]*m//g' | cut -c1-200)
	logq "---- $name: exit status $rc, stderr tail:"
	if [[ -s $RAW/$name.err ]]; then
		tail -n 15 "$RAW/$name.err" | sed $'s/\x1b\\[[0-9;]*m//g; s/^/    /' >>"$LOGFILE"
	fi
	case $rc in
	124 | 137) printf '%s timed out (status %s)%s' "$name" "$rc" "${last:+: $last}" ;;
	*) printf '%s exited with status %s%s' "$name" "$rc" "${last:+: $last}" ;;
	esac
}

# Wait until a background pkt-gen has opened its port (it prints its header
# line on stdout once the port is open).
#   wait_ready NAME PID SECS
wait_ready() {
	local name=$1 pid=$2 secs=$3 deadline
	deadline=$((SECONDS + secs))
	while :; do
		[[ -s $RAW/$name.out ]] && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		((SECONDS < deadline)) || return 2
		sleep 0.05
	done
}

# A field of the JSON report on the last line of a pkt-gen's stdout;
# prints nothing if absent.
#   jfield NAME FIELD
jfield() {
	local line
	line=$(tail -n1 "$RAW/$1.out" 2>/dev/null)
	[[ $line == \{* ]] || return 1
	jq -r --arg f "$2" '.[$f] // empty' <<<"$line" 2>/dev/null
}

# utime+stime (clock ticks) of a process, all its threads.
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	awk '{ print $12 + $13 }' <<<"$s"
}

now_s() { date +%s.%N; }

# How busy all CPUs are, in %, over one second of /proc/stat.
cpu_busy_pct() {
	local a b
	a=$(awk '$1 == "cpu" { i = $5 + $6; t = 0; for (k = 2; k <= NF; k++) t += $k; print i, t }' /proc/stat)
	sleep 1
	b=$(awk '$1 == "cpu" { i = $5 + $6; t = 0; for (k = 2; k <= NF; k++) t += $k; print i, t }' /proc/stat)
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); dt = y[2] - x[2]
		printf "%.0f", (dt > 0 ? 100 * (1 - (y[1] - x[1]) / dt) : 0) }'
}

# awk arithmetic on numbers: calc 'a / b' a=1 b=2
calc() {
	local expr=$1
	shift
	local args=() kv
	for kv in "$@"; do args+=(-v "$kv"); done
	awk "${args[@]}" "BEGIN { print ($expr) }"
}

# ------------------------------------------------------------ guest halt polling
# In a VM whose kernel has cpuidle-haltpoll, an idle vCPU polls this many ns
# before it halts. With 0 (how this machine boots: haltpoll.guest_halt_poll_ns=0
# on its command line) every wake-up of a sleeping thread on an idle vCPU is a
# halt exit to the hypervisor and back, tens of microseconds here, which
# sets every blocking figure. halt_poll_set changes it for one run and
# halt_poll_restore puts back what was there; the value is in every report.
HALT_POLL_PARAM=/sys/module/haltpoll/parameters/guest_halt_poll_ns
HALT_POLL_SAVED=

# The current value in ns, or "none" where the kernel has no halt polling.
halt_poll_get() {
	if [[ -r $HALT_POLL_PARAM ]]; then
		cat "$HALT_POLL_PARAM"
	else
		echo none
	fi
}

# halt_poll_set NS: returns 1 (saying why) where it cannot be set.
halt_poll_set() {
	local ns=$1
	if [[ ! -w $HALT_POLL_PARAM ]]; then
		log "cannot set guest halt polling: no writable $HALT_POLL_PARAM (not a VM with cpuidle-haltpoll, or not root)"
		return 1
	fi
	[[ -n $HALT_POLL_SAVED ]] || HALT_POLL_SAVED=$(cat "$HALT_POLL_PARAM")
	echo "$ns" >"$HALT_POLL_PARAM"
}

halt_poll_restore() {
	if [[ -n $HALT_POLL_SAVED && -w $HALT_POLL_PARAM ]]; then
		echo "$HALT_POLL_SAVED" >"$HALT_POLL_PARAM"
		HALT_POLL_SAVED=
	fi
}
