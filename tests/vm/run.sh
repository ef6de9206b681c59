#!/usr/bin/env bash
# VM tests: Linux guests (QEMU, TCG, a busybox initramfs) on vhost-user ports
# of a ringswitch daemon.
#
#   tests/vm/run.sh SCENARIO
#
# Scenarios:
#   ping                    two guests ping each other
#   tcp                     4 MiB over TCP from A to B, sha256 compared;
#                           checksum and TSO offloads on (the default)
#   tcp-nooffload           the same on --no-offloads ports
#   tcp-mixed               A's port with offloads, B's without: TCP both ways
#                           (the switch segments and checksums for B)
#   pktgen                  a guest and `ringswitch pkt-gen` on vale0:p0
#                           exchange frames both ways, exact counts
#   client-mode             ports in --client mode (QEMU listens), ping
#   daemon-restart-server   the daemon killed (SIGTERM, then SIGKILL) and
#                           restarted under running guests; QEMU reconnects
#   daemon-restart-client   the same with --client ports; ringswitch reconnects
#   daemon-upgrade-server   `ctl upgrade` (the daemon runs its binary again,
#                           same pid, --config restored) under two running
#                           guests that B pings A every 10 ms, and a host
#                           pkt-gen pair on a pipe: pings lost reported,
#                           guests never restarted, every pipe frame arrives
#   daemon-upgrade-client   the same with --client ports
#   guest-restart           three guests; B's QEMU killed and restarted while
#                           A and C keep pinging; then A and B ping again
#   guest-reboot            B reboots inside its running QEMU (the device is
#                           reset over the same vhost-user connection); A and
#                           B ping again after it is back
#   multiqueue              --queues 2, two vCPUs per guest: ping and two
#                           TCP streams at once, one per CPU (so per TX queue)
#   outside                 guest A and the world outside the switch: a
#                           namespace behind a veth pair attached over
#                           AF_XDP, and the host stack through a TAP host
#                           port; ping and TCP (sha256) both ways with each
#   migrate                 guest A live-migrates to a second QEMU (-incoming)
#                           on its own port vale0:A2 while B pings it every
#                           10 ms and sends it 16 MiB over TCP (sha256
#                           compared); pings lost, migration time and
#                           downtime reported; A announces itself
#                           (VIRTIO_NET_F_GUEST_ANNOUNCE). Also on the
#                           socket and ovs backends (bench/migrate.sh
#                           measures ringswitch beside ovs)
#   migrate-noannounce      the same with a guest that does not announce
#                           (guest_announce=off): QEMU asks the switch for a
#                           RARP (VHOST_USER_SEND_RARP) from the new port
#   osken                   vale0 in the hands of an os-ken controller running
#                           crates/cli/tests/osken/simple_switch.py: A and B
#                           ping and move 512 KiB (sha256) through the flows
#                           it installs; `ctl flows` shows them counting
#   libvirt                 a TCG domain started by libvirtd (virsh) on an
#                           <interface type='vhostuser'> mode='client'
#                           (ringswitch listens): the guest pings a process
#                           (pkt-gen -f pong) through the switch; virsh
#                           destroy and start; the daemon restarted (SIGTERM,
#                           same --config) and upgraded (ctl upgrade): the
#                           guest reconnects; tests/vm/libvirt.sh, with the
#                           XML of docs/libvirt.md
#   libvirt-server          the same with mode='server' (QEMU listens,
#                           ringswitch connects)
#
# Stand-ins that prove the harness and the guests without ringswitch (the
# scenarios that need what they lack say SKIP):
#   RS_VM_BACKEND=socket   QEMU's own -netdev socket (no vhost-user at all)
#   RS_VM_BACKEND=testpmd  the same vhost-user QEMU lines as with ringswitch,
#                          on DPDK testpmd forwarding between two net_vhost ports
# and a peer, the switch a user would otherwise put there (root; runs
# migrate and migrate-noannounce):
#   RS_VM_BACKEND=ovs      Open vSwitch with DPDK: a dpdkvhostuserclient port
#                          per guest on the learning bridge br0 (QEMU listens)
# See tests/vm/lib.sh for the other knobs.
# Logs: target/vm/runs/SCENARIO/ (kept after the run).
set -euo pipefail

# shellcheck source=tests/vm/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/vm/libvirt.sh
. "$(dirname "${BASH_SOURCE[0]}")/libvirt.sh"

TCP_BYTES=$((4 * 1024 * 1024))

# ---- building blocks -------------------------------------------------------

# backends NAME...: skip the scenario unless the backend is one of these.
backends() {
    case " $* " in *" $BACKEND "*) return 0 ;; esac
    note "SKIP: $SCENARIO runs on $*, not on the $BACKEND backend"
    SKIPPED=1
    exit 0
}

# guests NAME...: a port per guest (with ringswitch), then boot them all
# (guest N gets index N: A=1, B=2, C=3) and wait until each is ready.
guests() {
    local g i=0
    step "start ${*}"
    backend_up "$@"
    for g in "$@"; do
        i=$((i + 1))
        guest_start "$g" "$i"
    done
    for g in "$@"; do guest_ready "$g"; done
    [ "$BACKEND" = socket ] && return 0
    # A vhost-user device that failed to start makes QEMU fall back to
    # "userspace virtio": the guest boots, but its frames go nowhere.
    for g in "$@"; do
        local q=$RUN/$g.qemu.${G_GEN[$g]}.log errs
        errs=$(grep -a -v ' info: ' "$q" | grep -a -i -E 'vhost|msg|fail|unable' | head -n 4 || true)
        [ -z "$errs" ] || fail "guest $g: QEMU reported vhost-user errors while the guest booted:
$errs"
    done
    case "$BACKEND" in
        ringswitch) ;;
        ovs) ;;
        *) return 0 ;;
    esac
    local t=$(($(now_ms) + 10000))
    for g in "$@"; do
        until port_connected "$g"; do
            [ "$(now_ms)" -lt "$t" ] || fail "guest $g's port: not connected ($([ "$BACKEND" = ovs ] && echo "OVS link_state" || echo "ctl port list")) although guest $g booted"
            sleep 0.1
        done
    done
}

# ping_pairs "A B" "B A" ...: each "X Y" pings Y from X 5 times, all at once;
# every ping must be answered.
ping_pairs() {
    local p ids=() x y
    step "ping $*"
    for p in "$@"; do
        read -r x y <<<"$p"
        guest_cmd "$x" rs_ping "$(ip_of "$y")" 5
        ids+=("$x $y $CMD_ID")
    done
    local id
    for p in "${ids[@]}"; do
        read -r x y id <<<"$p"
        guest_done "$x" "$id" 40
        result "$x" PING "$id"
        [ "$(kv "$MATCH" rx)" = 5 ] || fail "ping from $x to $y ($(ip_of "$y")): expected 5 replies of 5, got $(kv "$MATCH" rx) of $(kv "$MATCH" tx)"
        note "$x -> $y: 5/5 replies"
    done
}

# reach X Y SECONDS: X pings Y once a second until a reply comes; fail
# after SECONDS.
reach() {
    local x=$1 y=$2 secs=$3
    guest_cmd "$x" rs_reach "$(ip_of "$y")" "$secs"
    guest_done "$x" "$CMD_ID" $((secs + 30))
    result "$x" REACH "$CMD_ID"
    [ "$(kv "$MATCH" ok)" = 1 ] || fail "$x cannot reach $y ($(ip_of "$y")): no ping reply in $secs s"
    note "$x reaches $y $(kv "$MATCH" seconds) s after the first try"
}

# pingloop_stop X Y: stops X's ping loop to Y (rs_pingloop_start, one ping
# every 10 ms) and sets PINGS to "pings_sent=N pings_lost=N
# longest_gap_ms=N" (the gap in pings × 10 ms); fails if none was answered.
PINGS=
pingloop_stop() {
    guest_cmd "$1" rs_pingloop_stop
    guest_done "$1" "$CMD_ID" 30
    result "$1" PINGLOOP "$CMD_ID"
    local ptx prx gap
    ptx=$(kv "$MATCH" tx)
    prx=$(kv "$MATCH" rx)
    gap=$(kv "$MATCH" maxgap)
    [ "${prx:-0}" -gt 0 ] || fail "$1's pings to $2: none answered ($MATCH)"
    PINGS="pings_sent=$ptx pings_lost=$((ptx - prx)) longest_gap_ms=$((gap * 10))"
}

# tcp A B PORT [CPU]: A sends TCP_BYTES random bytes to B; the sha256 the two
# guests print must match. Starts both ends and returns; tcp_check ends it.
TCP_IDS=()
tcp_start() {
    local a=$1 b=$2 port=$3 cpu=${4:-}
    guest_cmd "$b" rs_recv "$port"
    local idr=$CMD_ID
    wait_marker "$b" "RECV id=$idr listening" 20
    if [ -n "$cpu" ]; then
        # pin the sending subshell (and so nc) to one vCPU: its packets leave
        # through that CPU's TX queue (XPS)
        guest_cmd "$a" "read -r me _ < /proc/self/stat; taskset -p $((1 << cpu)) \$me >/dev/null; rs_send $(ip_of "$b") $port $TCP_BYTES"
    else
        guest_cmd "$a" rs_send "$(ip_of "$b")" "$port" "$TCP_BYTES"
    fi
    TCP_IDS+=("$a $b $port $CMD_ID $idr")
}

tcp_check() {
    local p a b port ids idr tx rx
    for p in "${TCP_IDS[@]}"; do
        read -r a b port ids idr <<<"$p"
        guest_done "$a" "$ids" 150
        result "$a" SENT "$ids"
        local sent=$MATCH
        [ "$RC" = 0 ] || fail "TCP $a -> $b port $port: the sender failed: $sent"
        result "$a" SHA256 "$ids"
        tx=$MATCH
        guest_done "$b" "$idr" 30
        result "$b" SHA256 "$idr"
        rx=$MATCH
        if [ "$(kv "$tx" sum)" != "$(kv "$rx" sum)" ] || [ "$(kv "$tx" bytes)" != "$(kv "$rx" bytes)" ]; then
            fail "TCP $a -> $b port $port: the data differs: sent $(kv "$tx" bytes) bytes sha256 $(kv "$tx" sum), received $(kv "$rx" bytes) bytes sha256 $(kv "$rx" sum)"
        fi
        note "TCP $a -> $b port $port: $(kv "$tx" bytes) bytes in $(kv "$sent" seconds) s, sha256 $(kv "$tx" sum) on both sides"
    done
    TCP_IDS=()
}

# offloads NAME on|off: check what the guest's driver negotiated
# (virtio-net feature bits 0 CSUM, 1 GUEST_CSUM, 11 HOST_TSO4, 7 GUEST_TSO4).
offloads() {
    local g=$1 want=$2 csum tso gcsum
    csum=$(feature "$g" 0)
    gcsum=$(feature "$g" 1)
    tso=$(feature "$g" 11)
    note "guest $g negotiated CSUM=$csum GUEST_CSUM=$gcsum HOST_TSO4=$tso GUEST_TSO4=$(feature "$g" 7)"
    [ "$BACKEND" = ringswitch ] || return 0
    if [ "$want" = on ]; then
        if [ "$csum" != 1 ] || [ "$tso" != 1 ]; then
            fail "guest $g: expected the device to offer checksum and TSO offloads (VIRTIO_NET_F_CSUM, HOST_TSO4), negotiated CSUM=$csum HOST_TSO4=$tso"
        fi
    else
        if [ "$csum$gcsum$tso" != 000 ]; then
            fail "guest $g: --no-offloads, yet the driver negotiated CSUM=$csum GUEST_CSUM=$gcsum HOST_TSO4=$tso"
        fi
    fi
}

# no_drops PORT...: every drop counter of each port is 0.
no_drops() {
    local p d
    [ "$BACKEND" = ringswitch ] || return 0
    for p in "$@"; do
        d=$(port_drops "vale0:$p")
        [ -z "$d" ] || fail "switch port vale0:$p dropped frames: $d"
    done
}

show_counters() {
    local p
    case "$BACKEND" in
        ringswitch) for p in "$@"; do note "vale0:$p: $(port_counters "vale0:$p")"; done ;;
        ovs) for p in "$@"; do note "OVS port $p: $(ovs_port_counters "$p")"; done ;;
    esac
}

guest_tx_stats() {
    local g=$1
    guest_cmd "$g" rs_stats
    guest_done "$g" "$CMD_ID" 20
    result "$g" STATS "$CMD_ID"
}

# ---- scenarios -------------------------------------------------------------

sc_ping() {
    guests A B
    ping_pairs "A B" "B A"
    no_drops A B
    show_counters A B
}

tcp_scenario() {
    local want=$1
    guests A B
    offloads A "$want"
    offloads B "$want"
    ping_pairs "A B"
    step "TCP A -> B, $TCP_BYTES bytes"
    tcp_start A B 5001
    tcp_check
    tso_check A "$want"
    show_counters A B
}

# tso_check NAME on|off: after a TCP transfer from NAME, the average size of
# the frames its eth0 sent says whether the kernel handed the device TSO
# frames (on: far above 1514 bytes) or MTU-sized ones.
tso_check() {
    local g=$1 want=$2 pk by avg
    guest_tx_stats "$g"
    pk=$(kv "$MATCH" tx_packets)
    by=$(kv "$MATCH" tx_bytes)
    avg=$((by / (pk > 0 ? pk : 1)))
    note "guest $g sent $pk frames, $by bytes, $avg bytes on average"
    if [ "$BACKEND" = ringswitch ] && [ "$want" = on ] && [ "$avg" -le 1514 ]; then
        fail "guest $g: with offloads on, expected TSO frames (average above 1514 bytes), got $pk frames averaging $avg bytes"
    fi
}

# tcp-mixed: A's port offers offloads, B's does not: what A sends as TSO and
# partial-checksum frames must reach B segmented and checksummed (by the
# switch), and B's plain frames reach A.
sc_tcp_mixed() {
    backends ringswitch
    G_PORT_OPTS[B]=--no-offloads
    guests A B
    offloads A on
    offloads B off
    ping_pairs "A B" "B A"
    step "TCP A -> B and B -> A at once, $TCP_BYTES bytes each way"
    tcp_start A B 5001
    tcp_start B A 5002
    tcp_check
    tso_check A on
    tso_check B off
    # no no_drops here: a guest slower than its peer (TCG, a loaded machine)
    # may fill its RX ring, and the switch then drops and counts (TCP resends)
    show_counters A B
}

sc_tcp() { tcp_scenario on; }

sc_tcp_nooffload() {
    PORT_OPTS=(--no-offloads)
    tcp_scenario off
}

sc_client_mode() {
    backends ringswitch testpmd
    PORT_MODE=client
    guests A B
    ping_pairs "A B" "B A"
    no_drops A B
}

# pkt-gen as a process of ours, under timeout like the rest.
pktgen_bg() {
    local out=$1
    shift
    timeout -k 5 "$MAX_LIFE" "$BIN" --socket "$CTL_SOCK" pkt-gen "$@" </dev/null >"$out" 2>&1 &
    PKTGEN_WRAP=$!
    WRAPPERS+=("$!")
}

sc_pktgen() {
    backends ringswitch
    local n_guest=300 n_gen=3000 rate=1000 gen_mac=02:00:00:00:00:99
    guests A
    local mac
    mac=$(mac_of A)

    step "guest A -> pkt-gen -f rx on vale0:p0 ($n_guest frames)"
    pktgen_bg "$RUN/pktgen-rx.out" -i vale0:p0 -f rx -T 0 --json --duration 120
    local t=$(($(now_ms) + 10000))
    until ctl port list --json 2>/dev/null | jq -e '.[] | select(.name == "vale0:p0" and .open)' >/dev/null; do
        kill -0 "$PKTGEN_WRAP" 2>/dev/null || fail "pkt-gen -f rx exited: $(cat "$RUN/pktgen-rx.out")"
        [ "$(now_ms)" -lt "$t" ] || fail "pkt-gen -f rx did not open vale0:p0 within 10 s"
        sleep 0.1
    done
    # unicast to a MAC the switch has not learned: flooded to p0
    guest_cmd A rs_blast "$n_guest"
    guest_done A "$CMD_ID" 90
    result A BLAST "$CMD_ID"
    local sent frames
    sent=$(kv "$MATCH" tx)
    frames=$(kv "$MATCH" frames)
    [ "$sent" = "$n_guest" ] || fail "guest A sent $sent pings instead of $n_guest: $MATCH"
    # what eth0 sent meanwhile: the pings, and nothing else (static ARP entry)
    [ "$frames" = "$n_guest" ] || fail "guest A's eth0 sent $frames frames for $n_guest pings: $MATCH"
    sleep 1
    kill -INT "$(pgrep -P "$PKTGEN_WRAP" || echo none)" 2>/dev/null || true
    wait "$PKTGEN_WRAP" || true
    local rep got drops
    rep=$(tail -n 1 "$RUN/pktgen-rx.out")
    got=$(jq -r .packets <<<"$rep" 2>/dev/null) || fail "pkt-gen -f rx printed no JSON report: $(tail -n 5 "$RUN/pktgen-rx.out")"
    drops=$(jq -r '.drops // 0' <<<"$rep")
    if [ "$got" != "$n_guest" ] || [ "$drops" != 0 ]; then
        fail "pkt-gen -f rx on vale0:p0 counted $got frames (drops $drops), the guest sent $n_guest; report: $rep"
    fi
    note "pkt-gen -f rx counted $got frames of $n_guest, no drops"
    no_drops A

    step "pkt-gen -f tx on vale0:p0 -> guest A ($n_gen frames at $rate/s to $mac)"
    guest_tx_stats A
    local before
    before=$(kv "$MATCH" rx_packets)
    local out
    out=$(timeout 60 "$BIN" --socket "$CTL_SOCK" pkt-gen -i vale0:p0 -f tx -n "$n_gen" -R "$rate" \
        -D "$mac" -S "$gen_mac" -T 0 --json 2>&1) || fail "pkt-gen -f tx failed: $out"
    echo "$out" >"$RUN/pktgen-tx.out"
    rep=$(tail -n 1 <<<"$out")
    [ "$(jq -r .packets <<<"$rep")" = "$n_gen" ] || fail "pkt-gen -f tx sent $(jq -r .packets <<<"$rep") frames, not $n_gen: $rep"
    sleep 1
    guest_tx_stats A
    local after delta
    after=$(kv "$MATCH" rx_packets)
    delta=$((after - before))
    local d
    d=$(port_drops vale0:A)
    [ "$delta" = "$n_gen" ] ||
        fail "guest A's rx_packets grew by $delta, pkt-gen sent $n_gen (switch drops on vale0:A: ${d:-none}; guest: $MATCH)"
    note "guest A received $delta frames of $n_gen ($MATCH)"
    no_drops A
    show_counters A
}

# daemon_restart MODE: two guests on MODE ports; the daemon is killed with
# SIGTERM, restarted, the ports added again; then the same with SIGKILL.
# (With the testpmd stand-in, testpmd is killed and restarted.)
daemon_restart() {
    backends ringswitch testpmd
    PORT_MODE=$1
    guests A B
    ping_pairs "A B" "B A"
    local sig
    for sig in TERM KILL; do
        step "kill the switch ($BACKEND) with SIG$sig, start a new one, add the ports again"
        backend_kill "$sig"
        if ! guest_alive A || ! guest_alive B; then fail "a guest died with the switch"; fi
        sleep 1
        backend_up A B
        step "after SIG$sig: A and B reach each other again"
        reach A B 30
        ping_pairs "A B" "B A"
        show_counters A B
    done
}

sc_daemon_restart_server() { daemon_restart server; }
sc_daemon_restart_client() { daemon_restart client; }

# daemon_upgrade MODE: two guests on MODE ports of a daemon with --config,
# B pinging A every 10 ms, and a pkt-gen pair on a pipe; `ctl upgrade`
# mid-way. The daemon keeps its pid; the guests keep running; A and B reach
# each other again (pings lost reported); the pipe's frames all arrive (its
# data path is between its two clients, so it never stops).
daemon_upgrade() {
    backends ringswitch
    PORT_MODE=$1
    DAEMON_OPTS=(--config "$RUN/config.json")
    guests A B
    ping_pairs "A B" "B A"
    local pid_before=$DAEMON_PID n=200000 rate=40000
    step "a pkt-gen pair on pipe valep:x ($n frames at $rate/s) and B pinging A every 10 ms"
    timeout 120 "$BIN" --socket "$CTL_SOCK" pkt-gen -i 'valep:x{1' -f rx -n "$n" -T 0 --json \
        >"$RUN/pipe-rx.json" 2>"$RUN/pipe-rx.err" &
    local rxp=$!
    local t=$(($(now_ms) + 20000))
    # (a pipe is listed by its own name, x{1)
    local ports
    until ports=$(ctl port list 2>/dev/null) && grep -qF 'x{1 ' <<<"$ports"; do
        [ "$(now_ms)" -lt "$t" ] || fail "the pipe's receiver did not open valep:x{1 in 20 s: $(cat "$RUN/pipe-rx.err")"
        sleep 0.05
    done
    timeout 120 "$BIN" --socket "$CTL_SOCK" pkt-gen -i 'valep:x}1' -f tx -n "$n" -R "$rate" -T 0 --json \
        >"$RUN/pipe-tx.json" 2>"$RUN/pipe-tx.err" &
    local txp=$!
    guest_cmd B rs_pingloop_start "$(ip_of A)" 0.01
    wait_marker B "PINGLOOP id=$CMD_ID started" 20
    sleep 1

    step "ctl upgrade: the daemon runs its binary again"
    local out
    out=$(ctl upgrade 2>&1) || fail "ctl upgrade failed: $out"
    note "$out"
    printf '%s ctl upgrade\n%s\n' "$(elapsed)" "$out" >>"$RUN/ctl.log"
    [ "$(pgrep -P "$DAEMON_WRAP" || true)" = "$pid_before" ] || fail "the daemon's pid changed (was $pid_before)"
    if ! guest_alive A || ! guest_alive B; then fail "a guest died with the upgrade"; fi
    ports=$(ctl port list 2>&1) || fail "ctl port list failed after the upgrade: $ports"
    grep -q 'vale0:A' <<<"$ports" || fail "vale0:A did not come back from --config: $ports"

    step "after the upgrade: B reaches A again"
    reach B A 30
    sleep 1
    pingloop_stop B A

    step "the pipe pair finishes: every frame arrives"
    wait "$txp" || fail "the pipe's sender failed: $(cat "$RUN/pipe-tx.err")"
    wait "$rxp" || fail "the pipe's receiver failed: $(cat "$RUN/pipe-rx.err")"
    local got
    got=$(tail -n 1 "$RUN/pipe-rx.json" | jq -r .packets)
    [ "$got" = "$n" ] || fail "the pipe's receiver got $got frames of $n"
    note "RESULT daemon-upgrade mode=$1 $PINGS pipe_frames=$got/$n"
    ping_pairs "A B" "B A"
    show_counters A B
}

sc_daemon_upgrade_server() { daemon_upgrade server; }
sc_daemon_upgrade_client() { daemon_upgrade client; }

sc_guest_reboot() {
    REBOOT_OPT=
    guests A B
    ping_pairs "A B" "B A"
    local log boots t
    log=$(guest_log B)
    step "B reboots inside its QEMU (reboot -f)"
    guest_cmd B "reboot -f"
    t=$(($(now_ms) + 90000))
    while :; do
        boots=$(tr -d '\r' <"$log" | grep -a -c '^RS-READY ' || true)
        [ "$boots" -ge 2 ] && break
        guest_alive B || fail "guest B's QEMU exited instead of rebooting"
        daemon_check
        [ "$(now_ms)" -lt "$t" ] || fail "guest B did not come back from its reboot within 90 s"
        sleep 0.2
    done
    note "guest B booted again: $(tr -d '\r' <"$log" | grep -a '^RS-READY ' | tail -n 1)"
    reach A B 30
    ping_pairs "A B" "B A"
    show_counters A B
}

sc_guest_restart() {
    backends ringswitch socket
    guests A B C
    ping_pairs "A B" "B A" "A C" "C A"
    local sig round=0
    for sig in TERM KILL; do
        round=$((round + 1))
        step "round $round: A <-> C keep pinging while B's QEMU dies (SIG$sig) and comes back"
        guest_cmd A rs_pingloop_start "$(ip_of C)"
        local la=$CMD_ID
        guest_cmd C rs_pingloop_start "$(ip_of A)"
        local lc=$CMD_ID
        guest_done A "$la" 10
        guest_done C "$lc" 10
        sleep 2
        guest_kill B "$sig"
        sleep 2
        guest_start B 2
        guest_ready B
        reach A B 30
        ping_pairs "A B" "B A"
        step "round $round: A <-> C pings during B's restart"
        guest_cmd A rs_pingloop_stop
        local sa=$CMD_ID
        guest_cmd C rs_pingloop_stop
        local sc=$CMD_ID
        local g id tx rx
        for g in "A $sa" "C $sc"; do
            read -r g id <<<"$g"
            guest_done "$g" "$id" 15
            result "$g" PINGLOOP "$id"
            tx=$(kv "$MATCH" tx)
            rx=$(kv "$MATCH" rx)
            # the last ping may still be in flight when the loop is stopped
            if [ "$tx" -lt 20 ] || [ "$rx" -lt $((tx - 1)) ]; then
                fail "guest $g lost pings while B restarted: $rx replies to $tx pings, longest run of lost replies $(kv "$MATCH" maxgap)"
            fi
            note "guest $g: $rx replies to $tx pings while B restarted (longest gap $(kv "$MATCH" maxgap))"
        done
    done
    show_counters A B C
}

sc_multiqueue() {
    backends ringswitch testpmd
    QUEUES=2
    SMP=2
    guests A B
    local g
    for g in A B; do
        wait_marker "$g" "READY " 1
        case "$MATCH" in
            *"queues=[rx-0 rx-1 tx-0 tx-1 ]"*) ;;
            *) fail "guest $g: expected 2 RX and 2 TX queues in /sys/class/net/eth0/queues: $MATCH" ;;
        esac
        [ "$(feature "$g" 22)" = 1 ] || fail "guest $g did not negotiate VIRTIO_NET_F_MQ"
    done
    ping_pairs "A B" "B A"
    step "two TCP streams A -> B at once, one from each vCPU (so each TX queue)"
    tcp_start A B 5001 0
    tcp_start A B 5002 1
    tcp_check
    show_counters A B
}

# ns_tcp_to_guest NS G PORT: TCP_BYTES from namespace NS to guest G.
ns_tcp_to_guest() {
    local ns=$1 g=$2 port=$3 f=$RUN/ns-tx.$3 sum
    guest_cmd "$g" rs_recv "$port"
    local idr=$CMD_ID
    wait_marker "$g" "RECV id=$idr listening" 20
    head -c "$TCP_BYTES" /dev/urandom >"$f"
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    local n=0
    until timeout 60 ip netns exec "$ns" busybox nc -w 5 "$(ip_of "$g")" "$port" <"$f"; do
        n=$((n + 1))
        [ "$n" -lt 20 ] || fail "namespace $ns cannot connect to guest $g port $port"
        sleep 0.5
    done
    guest_done "$g" "$idr" 60
    result "$g" SHA256 "$idr"
    [ "$(kv "$MATCH" sum)" = "$sum" ] ||
        fail "TCP $ns -> $g: sent $TCP_BYTES bytes sha256 $sum, the guest received $(kv "$MATCH" bytes) bytes sha256 $(kv "$MATCH" sum)"
    note "TCP $ns -> $g: $TCP_BYTES bytes, sha256 $sum on both sides"
}

# guest_tcp_to_ns G NS IP PORT: TCP_BYTES from guest G to a listener in NS.
guest_tcp_to_ns() {
    local g=$1 ns=$2 ip=$3 port=$4 f=$RUN/ns-rx.$4
    rm -f "$f" "$f.hold"
    # stdin: a FIFO nobody writes to, so nc never ends its side early
    mkfifo "$f.hold"
    timeout 120 ip netns exec "$ns" busybox nc -l -p "$port" >"$f" 0<>"$f.hold" &
    local lpid=$!
    guest_cmd "$g" rs_send "$ip" "$port" "$TCP_BYTES"
    local ids=$CMD_ID
    guest_done "$g" "$ids" 120
    result "$g" SHA256 "$ids"
    local tx=$MATCH
    wait "$lpid" || true
    local got
    got=$(sha256sum "$f" | cut -d' ' -f1)
    [ "$(kv "$tx" sum)" = "$got" ] ||
        fail "TCP $g -> $ns: guest sent $(kv "$tx" bytes) bytes sha256 $(kv "$tx" sum), $ns received $(wc -c <"$f") bytes sha256 $got"
    note "TCP $g -> $ns: $(kv "$tx" bytes) bytes, sha256 $got on both sides"
}

sc_outside() {
    backends ringswitch
    command -v ip >/dev/null || fail "no ip command: install iproute2"
    local k=$(($$ % 10000))
    local nsw=rsvw$k nst=rsvt$k vin=rvi$k vout=rvo$k tap=rvt$k
    local ipw=10.0.0.200 ipt=10.0.0.201
    guests A
    step "namespace $nsw behind veth $vout (attached over AF_XDP), host port $tap in $nst"
    NETNS+=("$nsw" "$nst")
    HOST_LINKS+=("$vout")
    ip netns add "$nsw"
    ip netns add "$nst"
    ip link add "$vout" type veth peer name "$vin" netns "$nsw"
    ip -n "$nsw" addr add "$ipw/24" dev "$vin"
    ip -n "$nsw" link set "$vin" up
    ip -n "$nsw" link set lo up
    # a wire: whole frames of at most the MTU, checksums finished
    ip netns exec "$nsw" ethtool -K "$vin" tx off tso off gso off gro off >/dev/null
    ip link set "$vout" up
    ctl_ok attach vale0 "$vout" --mode native
    ctl_ok attach vale0 --host "$tap"
    # The TAP keeps its queues when it moves to another namespace.
    ip link set "$tap" netns "$nst"
    ip -n "$nst" addr add "$ipt/24" dev "$tap"
    ip -n "$nst" link set "$tap" up
    ip -n "$nst" link set lo up
    note "$(ctl port list | grep -E "$vout|$tap" | tr -s ' ')"

    step "ping both ways: A <-> $nsw (AF_XDP), A <-> $nst (TAP)"
    guest_cmd A rs_ping "$ipw" 5
    guest_done A "$CMD_ID" 40
    result A PING "$CMD_ID"
    [ "$(kv "$MATCH" rx)" = 5 ] || fail "guest A -> $ipw over AF_XDP: $(kv "$MATCH" rx) replies of 5"
    guest_cmd A rs_ping "$ipt" 5
    guest_done A "$CMD_ID" 40
    result A PING "$CMD_ID"
    [ "$(kv "$MATCH" rx)" = 5 ] || fail "guest A -> $ipt over the TAP: $(kv "$MATCH" rx) replies of 5"
    ip netns exec "$nsw" busybox ping -c 3 -W 5 "$(ip_of A)" >/dev/null || fail "$nsw cannot ping guest A"
    ip netns exec "$nst" busybox ping -c 3 -W 5 "$(ip_of A)" >/dev/null || fail "$nst cannot ping guest A"
    note "pings answered both ways"

    step "TCP both ways with each, $TCP_BYTES bytes"
    ns_tcp_to_guest "$nsw" A 5001
    guest_tcp_to_ns A "$nsw" "$ipw" 5002
    ns_tcp_to_guest "$nst" A 5003
    guest_tcp_to_ns A "$nst" "$ipt" 5004
    show_counters A "$vout" "$tap"
}

# ---- migrate: a guest moves to another QEMU on another port ------------------

# migrate_scenario on|off: see the list at the top (on: the guest announces
# itself; off: it does not, and the switch sends the RARP). With the ovs
# backend the ports are OVS's (A, B, A2 on br0) and its counters and MAC
# table stand in for ringswitch's; with socket there are no ports, and the
# run ends once the transfer has been checked. Knobs, for
# looking closer by hand: MIG_LIVE=1 moves the guest running (precopy; see
# migrate.py for why the test stops it first), MIG_BANDWIDTH (MiB/s, lower
# means more passes), MIG_PAUSE (seconds between B's 256 KiB pieces),
# MIG_DEBUG_DUMP=1 with MIG_LIVE=1 (the destination waits, both memories
# are saved and compared page by page: the pages QEMU did not carry over).
migrate_scenario() {
    backends ringswitch socket ovs
    local announce=$1 bytes=$((16 * 1024 * 1024))
    [ "$announce" = off ] && G_DEV_OPTS[A]=guest_announce=off
    guests A B
    local ga
    ga=$(feature A 21)
    note "guest A negotiated GUEST_ANNOUNCE=$ga"
    if [ "$announce" = on ] && [ "$ga" != 1 ]; then
        fail "guest A did not negotiate VIRTIO_NET_F_GUEST_ANNOUNCE: the device must offer it"
    fi
    if [ "$announce" = off ] && [ "$ga" != 0 ]; then
        fail "guest A negotiated VIRTIO_NET_F_GUEST_ANNOUNCE although its device has guest_announce=off"
    fi
    ping_pairs "B A" "A B"

    step "A listens for TCP; B pings A every 10 ms and starts sending it $bytes bytes"
    guest_cmd A rs_recv 5001
    local idr=$CMD_ID
    wait_marker A "RECV id=$idr listening" 20
    guest_cmd B rs_pingloop_start "$(ip_of A)" 0.01
    wait_marker B "PINGLOOP id=$CMD_ID started" 20
    # 64 pieces 100 ms apart: at least 6 s, so the guest is stopped for the
    # move (right after its first megabyte arrived) long before the end
    guest_cmd B rs_send "$(ip_of A)" 5001 "$bytes" "${MIG_PAUSE:-0.1}"
    local ids=$CMD_ID

    step "the destination: port A2 and a QEMU waiting for A (-incoming)"
    backend_up A2
    local mig=$SOCKDIR/A.mig src_qmp=$SOCKDIR/A.${G_GEN[A]}.qmp src_wrap=${G_WRAP[A]}
    local src_pid
    src_pid=$(cat "$RUN/A.pid")
    G_SOCKNAME[A]=A2
    G_INCOMING[A]=unix:$mig
    guest_start A "${G_IDX[A]}"
    local t=$(($(now_ms) + 30000))
    until [ -S "$mig" ]; do
        guest_alive A || fail "the destination QEMU exited at start: $(cat "$RUN/A.qemu.${G_GEN[A]}.log")"
        [ "$(now_ms)" -lt "$t" ] || fail "the destination QEMU did not listen on $mig within 30 s"
        sleep 0.1
    done
    # the transfer is under way before A moves (its first bytes are in)
    t=$(($(now_ms) + 30000))
    [ "$BACKEND" = socket ] && sleep 1
    until [ "$BACKEND" = socket ] || [ "$(port_delivered_bytes A)" -gt 1000000 ]; do
        [ "$(now_ms)" -lt "$t" ] || fail "B's transfer to A did not start within 30 s: port A delivered $(port_delivered_bytes A) bytes"
        sleep 0.1
    done

    step "migrate A to the destination (QMP migrate unix:$mig)"
    local out
    # A stopped guest moves (QEMU 7.2's TCG loses pages a running guest
    # dirties during a live move, with or without ringswitch: see
    # migrate.py); MIG_LIVE=1 moves it running, as bench/migrate.sh does.
    local how=(--paused --dest-qmp "$SOCKDIR/A.${G_GEN[A]}.qmp")
    [ -n "${MIG_LIVE:-}" ] && how=()
    out=$("$VM_DIR/migrate.py" --qmp "$src_qmp" --uri "unix:$mig" --timeout 150 "${how[@]}" \
        --bandwidth "${MIG_BANDWIDTH:-1024}" 2>"$RUN/migrate.log") ||
        fail "the migration failed: $(tail -n 3 "$RUN/migrate.log")"
    echo "$out" >>"$RUN/migrate.log"
    note "$out"
    if [ -n "${MIG_DEBUG_DUMP:-}" ]; then
        # Diagnostics (the destination QEMU was started with -S): both
        # memories saved and compared page by page before A runs on.
        python3 - "$src_qmp" "$SOCKDIR/A.${G_GEN[A]}.qmp" "$RUN" "$VM_DIR/.." <<'PY' >>"$RUN/migrate.log" 2>&1
import os, sys
src, dst, run, tests = sys.argv[1:5]
sys.path.insert(0, tests)
from qmp import Qmp
a, b = Qmp(src, 30), Qmp(dst, 30)
a.cmd("pmemsave", val=0, size=256 << 20, filename=run + "/src.mem")
b.cmd("pmemsave", val=0, size=256 << 20, filename=run + "/dst.mem")
diff = []
with open(run + "/src.mem", "rb") as fa, open(run + "/dst.mem", "rb") as fb:
    for p in range(65536):
        if fa.read(4096) != fb.read(4096):
            diff.append(p)
print("DIFF pages:", len(diff), [hex(p << 12) for p in diff[:40]])
b.cmd("cont")
PY
        note "$(grep '^DIFF' "$RUN/migrate.log")"
    fi
    # A now runs in the destination QEMU: its commands go there
    local old=${G_FD[A]}
    exec {old}>&-
    G_FD[A]=${G_FD_NEXT[A]}
    unset 'G_INCOMING[A]'
    kill -TERM "$src_pid" 2>/dev/null || true
    t=$(($(now_ms) + 20000))
    while kill -0 "$src_wrap" 2>/dev/null; do
        [ "$(now_ms)" -lt "$t" ] || fail "the source QEMU (pid $src_pid) still runs 20 s after SIGTERM"
        sleep 0.1
    done
    { wait "$src_wrap"; } 2>/dev/null || true
    note "source QEMU gone; A runs on port A2"

    step "the transfer ends on the destination, every byte as sent"
    # A's end first: a guest that did not survive the move stops the wait
    guest_done A "$idr" "${MIG_WAIT:-240}"
    guest_done B "$ids" 60
    result B SENT "$ids"
    [ "$RC" = 0 ] || fail "TCP B -> A: the sender failed across the migration: $MATCH"
    local sent=$MATCH
    result B SHA256 "$ids"
    local tx=$MATCH rx
    guest_done A "$idr" 60
    result A SHA256 "$idr"
    rx=$MATCH
    if [ "$(kv "$tx" sum)" != "$(kv "$rx" sum)" ] || [ "$(kv "$tx" bytes)" != "$(kv "$rx" bytes)" ]; then
        fail "TCP B -> A across the migration: the data differs: sent $(kv "$tx" bytes) bytes sha256 $(kv "$tx" sum), received $(kv "$rx" bytes) bytes sha256 $(kv "$rx" sum)"
    fi
    note "TCP B -> A: $(kv "$tx" bytes) bytes in $(kv "$sent" seconds) s across the migration, sha256 $(kv "$tx" sum) on both sides"
    [ "$BACKEND" = socket ] && return 0
    local moved
    moved=$(port_delivered_bytes A2)
    [ "$moved" -gt 1000000 ] || fail "the transfer was over before A moved: port A2 received only $moved bytes"
    note "of them, port A2 (the destination) delivered $moved bytes"

    step "B's 10 ms pings across the migration"
    pingloop_stop B A
    note "RESULT migrate announce=$announce ${out#MIGRATE status=completed } $PINGS"

    step "A (on port A2) and B reach each other; the switch knows A there"
    ping_pairs "B A" "A B"
    local learned
    learned=$(switch_mac_port "$(mac_of A)")
    note "switch: $(mac_of A) on ${learned:-no port}"
    case "$learned" in
        A2 | vale0:A2) ;;
        *) fail "the switch does not have A's address $(mac_of A) on port A2 but on ${learned:-no port}: $(switch_macs)" ;;
    esac
    show_counters A2 B
}

sc_migrate() { migrate_scenario on; }
sc_migrate_noannounce() { migrate_scenario off; }

# ---- osken: an OpenFlow controller no one here wrote ----------------------------

# flows_json: `ctl flows vale0 --json`, kept in the scenario's ctl.log.
flows_json() {
    local out
    out=$(ctl flows vale0 --json 2>&1) || fail "'ringswitch ctl flows vale0 --json' failed: $out"
    printf '%s ctl flows vale0 --json\n%s\n' "$(elapsed)" "$out" >>"$RUN/ctl.log"
    echo "$out"
}

# learned_flow SRC DST: "n_packets n_bytes" of the controller's flow
# in_port=<port of SRC>, dl_src=SRC's MAC, dl_dst=DST's MAC ->
# output:<port of DST>, or nothing while there is none. Port numbers are
# switch indexes + 1: A is port 1, B port 2 (added in that order).
learned_flow() {
    local src=$1 dst=$2
    flows_json | jq -r --arg s "$(mac_of "$src")" --arg d "$(mac_of "$dst")" \
        --arg i "in_port=${G_IDX[$src]}" --arg o "output:${G_IDX[$dst]}" \
        '.[] | select(.priority == 1 and .actions == $o
            and (.match | split(",") | (index($i) != null and index("dl_src=" + $s) != null
                 and index("dl_dst=" + $d) != null)))
        | "\(.n_packets) \(.n_bytes)"'
}

# wait_flow SRC DST MIN_BYTES: wait until the flow SRC -> DST has counted at
# least MIN_BYTES bytes; sets MATCH to "n_packets n_bytes".
wait_flow() {
    local src=$1 dst=$2 min=$3 t=$(($(now_ms) + 60000)) f
    while :; do
        f=$(learned_flow "$src" "$dst")
        if [ -n "$f" ] && [ "${f#* }" -ge "$min" ]; then
            MATCH=$f
            return 0
        fi
        daemon_check
        [ "$(now_ms)" -lt "$t" ] ||
            fail "no flow in_port=${G_IDX[$src]},dl_src=$(mac_of "$src"),dl_dst=$(mac_of "$dst") actions=output:${G_IDX[$dst]} with $min bytes or more within 60 s (it has: ${f:-no such flow}); the tables:
$(ctl flows vale0 2>&1)"
        sleep 0.1
    done
}

sc_osken() {
    backends ringswitch
    command -v osken-manager >/dev/null ||
        fail "no osken-manager: run scripts/setup.sh (apt-get install python3-os-ken)"
    command -v ss >/dev/null || fail "no ss: install iproute2"
    local app=$ROOT/crates/cli/tests/osken/simple_switch.py port log=$RUN/osken.log
    TCP_BYTES=$((512 * 1024))

    step "os-ken's osken-manager with $app"
    port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    timeout -k 5 "$MAX_LIFE" osken-manager --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port "$port" \
        "$app" </dev/null >"$log" 2>&1 &
    local wrap=$!
    WRAPPERS+=("$wrap")
    local t=$(($(now_ms) + 60000))
    until [ -n "$(ss -Hltn "sport = :$port")" ]; do
        kill -0 "$wrap" 2>/dev/null || fail "osken-manager exited at start: $(tail -n 20 "$log")"
        [ "$(now_ms)" -lt "$t" ] || fail "osken-manager not listening on 127.0.0.1:$port 60 s after its start: $(tail -n 20 "$log")"
        sleep 0.1
    done
    note "osken-manager listening on 127.0.0.1:$port (log $log)"

    step "switch vale0 with the controller tcp:127.0.0.1:$port"
    daemon_start
    ctl_ok switch add vale0 --controller "tcp:127.0.0.1:$port"
    t=$(($(now_ms) + 60000))
    until flows_json | jq -e '.[] | select(.priority == 0 and .match == "priority=0" and .actions == "CONTROLLER:65535")' >/dev/null; do
        kill -0 "$wrap" 2>/dev/null || fail "osken-manager exited: $(tail -n 20 "$log")"
        daemon_check
        [ "$(now_ms)" -lt "$t" ] || fail "no table-miss flow to the controller 60 s after the switch was given it: $(ctl switch list 2>&1)
osken-manager's log: $(tail -n 20 "$log")"
        sleep 0.1
    done
    note "the controller installed its table-miss flow: $(ctl flows vale0 | tr -s ' ')"

    guests A B
    ping_pairs "A B" "B A"
    step "the first frames went through the controller, which installed a flow each way"
    local miss
    miss=$(flows_json | jq -r '.[] | select(.priority == 0) | .n_packets')
    [ "${miss:-0}" -gt 0 ] || fail "the table-miss flow counted no frames: $(ctl flows vale0 2>&1)"
    local g
    for g in A B; do
        grep -a -q "learn .* $(mac_of "$g") on port ${G_IDX[$g]}\$" "$log" ||
            fail "the controller did not learn $(mac_of "$g") on port ${G_IDX[$g]}: $(tail -n 20 "$log")"
    done
    wait_flow A B 1
    local ab0=${MATCH#* }
    wait_flow B A 1
    local ba0=${MATCH#* }
    note "table-miss flow: $miss frames to the controller; learned flows A -> B $ab0 bytes, B -> A $ba0 bytes"
    note "$(ctl flows vale0)"

    step "TCP A -> B, $TCP_BYTES bytes, through the learned flows"
    tcp_start A B 5001
    tcp_check
    # every byte A sent went through its flow to B; B's acknowledgements
    # through the other
    wait_flow A B $((ab0 + TCP_BYTES))
    note "flow A -> B: $MATCH (n_packets n_bytes)"
    wait_flow B A $((ba0 + 1))
    note "flow B -> A: $MATCH (n_packets n_bytes)"
    note "$(ctl flows vale0)"
    kill -0 "$wrap" 2>/dev/null || fail "osken-manager exited: $(tail -n 20 "$log")"
    note "controller: $(grep -a -c 'learn ' "$log") MACs learned, $(grep -a -c '^flow ' "$log") flows installed"
    show_counters A B
}

# ---- main ------------------------------------------------------------------

scenario=${1:-}
case "$scenario" in
    ping | tcp | tcp-nooffload | tcp-mixed | pktgen | client-mode | daemon-restart-server | daemon-restart-client | daemon-upgrade-server | daemon-upgrade-client | guest-restart | guest-reboot | multiqueue | outside | migrate | migrate-noannounce | osken | libvirt | libvirt-server) ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
vm_init "$scenario"
"sc_${scenario//-/_}"
