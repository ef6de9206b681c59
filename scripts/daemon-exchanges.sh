# The daemon exchanges whose memory the tests and the bench measure,
# sourced by scripts/daemon-memory.sh (which measures them) and
# scripts/hot-text.sh (which links the code they run together). Each takes
# the ringswitch binary and the daemon's socket.

ex_idlers=()

# Waits (up to a minute) until the daemon lists port $3.
ex_wait_port() {
    local _
    for _ in $(seq 600); do
        "$1" --socket "$2" ctl port list --json | grep -q "\"$3\"" && return 0
        sleep 0.1
    done
    echo "port $3 never appeared" >&2
    return 1
}

# crates/cli/tests/daemon_binary.rs's: 1000 frames from vale0:a to vale0:b.
ex_traffic() {
    "$1" --socket "$2" pkt-gen -i vale0:b -f rx -n 1000 --json -T 0 >/dev/null &
    local rx=$!
    ex_wait_port "$1" "$2" vale0:b
    "$1" --socket "$2" pkt-gen -i vale0:a -f tx -n 1000 --json -T 0 >/dev/null
    wait "$rx"
}

# bench/compare's idle section's: eight receivers waiting on ports of
# their own, no traffic, each asleep by the time this returns. Their
# pids are in ex_idlers (ex_idle_stop stops them).
ex_idle_start() {
    ex_idlers=()
    local i
    for i in 1 2 3 4 5 6 7 8; do
        "$1" --socket "$2" pkt-gen -i "vale0:i$i" -f rx --duration 3600 -T 0 >/dev/null 2>&1 &
        ex_idlers+=($!)
    done
    for i in 1 2 3 4 5 6 7 8; do
        ex_wait_port "$1" "$2" "vale0:i$i"
    done
    sleep 2
}

ex_idle_stop() {
    [ ${#ex_idlers[@]} -eq 0 ] && return 0
    kill -INT "${ex_idlers[@]}" 2>/dev/null || true
    wait "${ex_idlers[@]}" 2>/dev/null || true
    ex_idlers=()
}

# The idle section's persistent ports: $3 of them, vale0:p$4.. on.
ex_add_ports() {
    local i
    for i in $(seq "$4" $(($4 + $3 - 1))); do
        "$1" --socket "$2" ctl port add "vale0:p$i@conf:slots=64" >/dev/null
    done
}
