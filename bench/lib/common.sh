# shellcheck shell=bash
# bench/lib/common.sh - the few helpers bench/'s scripts share: logging,
# a process's CPU time and the clock, and guest halt polling (bench/floors.sh).
# Sourced, not run. Measuring, parsing and computing are Rust's
# (crates/bench).

# Set by the caller if the log also goes to a file: LOGFILE.

log() {
	local line
	line="$(date +%H:%M:%S) $*"
	printf '%s\n' "$line" >&2
	[[ -n ${LOGFILE:-} ]] && printf '%s\n' "$line" >>"$LOGFILE"
	return 0
}

die() {
	log "error: $*"
	exit 1
}

# utime+stime (clock ticks) of a process, all its threads.
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	awk '{ print $12 + $13 }' <<<"$s"
}

now_s() { date +%s.%N; }

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
