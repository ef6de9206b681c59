# shellcheck shell=bash
# Helpers the ptnet scripts share (tests/pt/ptnet.sh, bench/ptnet.sh),
# sourced. The caller sets LIFE (seconds anything spawned may live) before
# spawning, and calls stop_spawned from its EXIT trap.

PIDS=()

# spawn LOG CMD...: runs CMD in a process group of its own, output to LOG,
# killed after LIFE seconds whatever happens to the caller.
spawn() {
    local log=$1
    shift
    setsid timeout -k 5 "$LIFE" "$@" </dev/null >"$log" 2>&1 &
    PIDS+=("$!")
}

# Stops every spawned process group: TERM, then KILL.
stop_spawned() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}

# wait_for SECONDS CMD...: runs CMD until it succeeds, for at most SECONDS;
# fails if it never did.
wait_for() {
    local t=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $t ] || return 1
        sleep 0.2
    done
}
