# shellcheck shell=bash
# Host side of the VM tests, sourced by tests/vm/run.sh: starts the daemon and
# QEMU guests, sends the guests commands and reads their results from their
# serial logs, and cleans every process up however the script ends.
#
# A guest (tests/vm/init) prints "RS-..." markers on ttyS0 (the file
# $RUN/<name>.log) and reads "<id> <command>" lines on ttyS1 (the FIFO
# $RUN/<name>.ctl.in). Commands run in the background in the guest; each ends
# with "RS-DONE <id> rc=<status>".
#
# Environment:
#   RINGSWITCH_BIN   the ringswitch binary (default target/release/ringswitch)
#   RS_VM_BACKEND    ringswitch (default): guests on vhost-user ports of a
#                    ringswitch daemon. Two stand-ins prove the harness and
#                    the guests without ringswitch: socket (QEMU's own -netdev
#                    socket, multicast on 127.0.0.1) and testpmd (the same
#                    vhost-user QEMU lines as with ringswitch, on two
#                    net_vhost ports of DPDK's testpmd forwarding between them);
#                    and a peer: ovs (Open vSwitch with DPDK, the userspace
#                    datapath, a dpdkvhostuserclient port per guest on the
#                    learning bridge br0; QEMU listens, as with
#                    PORT_MODE=client; root, hugepages)
#   RS_VM_OVS_PMD_CPU       ovs: the CPU of OVS's one PMD thread (default 1)
#   RS_VM_OVS_PMD_MAXSLEEP  ovs: its other_config:pmd-maxsleep in us
#                    (default 500, 0: not set; see ovs_backend_start)
#   RINGSWITCH_LOG   the daemon's log level (default debug)
#   RS_VM_OUT        where the initramfs and the logs go (default target/vm)

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$VM_DIR/../.." && pwd)
# OVS-DPDK's start and stop (RS_VM_BACKEND=ovs), shared with bench/peers/ovs-dpdk.sh
# shellcheck source=bench/lib/ovs.sh
. "$ROOT/bench/lib/ovs.sh"
BIN=${RINGSWITCH_BIN:-$ROOT/target/release/ringswitch}
BACKEND=${RS_VM_BACKEND:-ringswitch}
VM_OUT=${RS_VM_OUT:-$ROOT/target/vm}
LOGLEVEL=${RINGSWITCH_LOG:-debug}
# No process of ours lives longer than this (seconds), even if this script is
# killed with SIGKILL: QEMU, the daemon and OVS run under timeout(1), and the
# guests power themselves off.
MAX_LIFE=${RS_VM_MAX_LIFE:-400}

SCENARIO=
RUN=
SOCKDIR=
CTL_SOCK=
STEP=setup
SKIPPED=
CMD_ID=0
CMD_SEQ=0
MATCH=
# shellcheck disable=SC2034 # the status of the last command guest_done waited for
RC=0
WRAPPERS=()         # pids of timeout(1) wrappers, each a process group leader
NETNS=()            # network namespaces to delete at the end
HOST_LINKS=()       # interfaces of the root namespace to delete at the end
GUESTS=()
declare -A G_IDX=() G_GEN=() G_WRAP=() G_FD=() G_START=()
# Per guest, for the next guest_start: its port's socket name (default the
# guest's name), extra virtio-net-pci properties, and an -incoming URI (a
# migration destination, whose command FIFO goes to G_FD_NEXT until the
# guest has moved there).
declare -A G_SOCKNAME=() G_DEV_OPTS=() G_INCOMING=() G_FD_NEXT=()
DAEMON_WRAP=
DAEMON_PID=
DAEMON_GEN=0
# Port settings used by port_add and guest_start.
PORT_MODE=server    # server: ringswitch listens; client: QEMU listens
PORT_OPTS=()        # extra `ctl port add` options, e.g. --no-offloads
declare -A G_PORT_OPTS=()   # more of them for one guest's port only
QUEUES=1
SMP=1
# QEMU's reboot behaviour: exit (the default), or reset the machine when
# empty (the guest-reboot scenario).
REBOOT_OPT=-no-reboot
T0=$(date +%s%3N)
KERNEL=
INITRD=
MCAST_PORT=$((20000 + $$ % 20000))

now_ms() { date +%s%3N; }
elapsed() { local t; t=$(now_ms); printf '%d.%d' $(((t - T0) / 1000)) $(((t - T0) % 1000 / 100)); }
note() { printf '[%s %6ss] %s\n' "$SCENARIO" "$(elapsed)" "$*" >&2; }
step() { STEP=$*; note "== $*"; }

# kv LINE KEY: the value of KEY=value in LINE.
kv() { sed -n "s/.*[[:space:]]$2=\([^[:space:]]*\).*/\1/p" <<<"$1" | head -n 1; }

guest_log() {
    local g=$1 gen=${G_GEN[$1]:-1}
    if [ "$gen" -le 1 ]; then echo "$RUN/$g.log"; else echo "$RUN/$g.$gen.log"; fi
}

strip() { tr -d '\r' | sed 's/\x1b\[[0-9;]*m//g'; }

fail() {
    set +e
    trap - ERR
    {
        echo
        echo "FAIL [$SCENARIO, backend $BACKEND] at step \"$STEP\" (after $(elapsed) s):"
        echo "  $*"
        local g
        for g in "${GUESTS[@]}"; do
            local log
            log=$(guest_log "$g")
            echo
            echo "--- guest $g: last 25 lines of $log ---"
            tail -n 25 "$log" 2>/dev/null | strip
            local q=$RUN/$g.qemu.${G_GEN[$g]}.log
            if [ -s "$q" ]; then
                echo "--- guest $g: QEMU's stderr ($q) ---"
                head_tail "$q" 6
            fi
        done
        if [ "$BACKEND" = ovs ] && [ -s "$OVS_DIR/vswitchd.log" ]; then
            echo
            echo "--- OVS: first warnings and errors in $OVS_DIR/vswitchd.log ---"
            grep -a -E '\|(WARN|ERR|EMER)\|' "$OVS_DIR/vswitchd.log" | head -n 8 | cut -c1-220
            echo "--- OVS: last 30 lines of $OVS_DIR/vswitchd.log ---"
            ovs_log_tail 30
            if [ -n "$OVS_UP" ]; then
                echo "--- ovs-ofctl dump-ports-desc br0, dump-ports br0 ---"
                ovs_ofctl dump-ports-desc 2>&1 | grep -E '^ [0-9]+\(|state:'
                ovs_ofctl dump-ports 2>&1
            fi
        fi
        if [ -n "$DAEMON_UP" ] && ! daemon_alive; then
            echo
            echo "NOTE: the daemon (pid $DAEMON_PID) is no longer running, and this script did not stop it"
        fi
        if [ -s "$RUN/daemon.log" ]; then
            echo
            echo "--- daemon: first warnings and errors in $RUN/daemon.log ---"
            grep -a -E ' (WARN|ERROR) ' "$RUN/daemon.log" | head -n 8 | strip
            echo "--- daemon: last 30 lines of $RUN/daemon.log ---"
            tail -n 30 "$RUN/daemon.log" | strip
            if daemon_alive; then
                echo "--- ctl port list ---"
                timeout 5 "$BIN" --socket "$CTL_SOCK" ctl port list 2>&1
                echo "--- ctl stats ---"
                timeout 5 "$BIN" --socket "$CTL_SOCK" ctl stats 2>&1
            fi
        fi
        echo
        echo "all logs: $RUN"
    } >&2
    exit 1
}

# head_tail FILE N: the file if it is short, else its first and last N lines.
head_tail() {
    if [ "$(wc -l <"$1")" -le $(($2 * 2)) ]; then
        cat "$1"
    else
        head -n "$2" "$1"
        echo "[...]"
        tail -n "$2" "$1"
    fi
}

# A command that failed inside $(...) fails the command around it too: report
# once, from the main shell.
on_err() {
    [ "$BASHPID" = "$$" ] || exit 1
    fail "command failed (status $1): line $2: $3"
}

cleanup() {
    local rc=$? p t
    set +e
    DAEMON_UP=
    trap - ERR
    # OVS first (its jobs are not in WRAPPERS): ovs-vswitchd, then its database
    OVS_UP=
    ovs_stop
    for p in "${WRAPPERS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    t=$(($(now_ms) + 5000))
    for p in "${WRAPPERS[@]}"; do
        while kill -0 "$p" 2>/dev/null && [ "$(now_ms)" -lt "$t" ]; do sleep 0.1; done
        # still there: the wrapper leads a process group, its child goes with
        # it (only while it runs: the id of a finished one is not ours any more)
        kill -0 "$p" 2>/dev/null && kill -KILL -- "-$p" 2>/dev/null
    done
    wait 2>/dev/null
    ovs_hugepages_restore
    for p in "${NETNS[@]}"; do ip netns del "$p" 2>/dev/null; done
    for p in "${HOST_LINKS[@]}"; do ip link del "$p" 2>/dev/null; done
    [ -n "$SOCKDIR" ] && rm -f "$SOCKDIR"/*.sock
    [ -n "$SOCKDIR" ] && [ "$SOCKDIR" != "$RUN" ] && rmdir "$SOCKDIR" 2>/dev/null
    if [ "$rc" -eq 0 ] && [ -z "$SKIPPED" ]; then
        note "PASS $SCENARIO (backend $BACKEND) in $(elapsed) s; logs: $RUN"
    fi
    exit "$rc"
}

vm_init() {
    SCENARIO=$1
    RUN=$VM_OUT/runs/$SCENARIO
    [ "$BACKEND" = ringswitch ] || RUN=$VM_OUT/runs/$BACKEND-$SCENARIO
    rm -rf "$RUN"
    mkdir -p "$RUN"
    # unix socket paths are limited to 107 bytes
    if [ ${#RUN} -le 80 ]; then SOCKDIR=$RUN; else SOCKDIR=$(mktemp -d /tmp/rs-vm.XXXXXX); fi
    CTL_SOCK=$SOCKDIR/ctl.sock
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR
    set -E

    command -v qemu-system-x86_64 >/dev/null || fail "no qemu-system-x86_64: run scripts/setup.sh (apt-get install qemu-system-x86)"
    command -v jq >/dev/null || fail "no jq: run scripts/setup.sh"
    "$VM_DIR/build-initramfs.sh" "$VM_OUT" || fail "could not build the guest initramfs"
    KERNEL=$VM_OUT/kernel
    INITRD=$VM_OUT/initramfs.gz
    case "$BACKEND" in
        ringswitch)
            [ -x "$BIN" ] || fail "no ringswitch binary at $BIN (cargo build --release -p ringswitch-cli, or set RINGSWITCH_BIN)"
            "$BIN" ctl port add --help 2>/dev/null | grep -q -- --vhost-user ||
                fail "$BIN has no 'ctl port add --vhost-user': VM ports are not there yet"
            ;;
        socket) ;;
        testpmd) command -v dpdk-testpmd >/dev/null || fail "no dpdk-testpmd (apt-get install dpdk)" ;;
        ovs)
            [ -x "$OVS_VSWITCHD" ] || fail "no $OVS_VSWITCHD (apt-get install openvswitch-switch-dpdk)"
            [ "$(id -u)" = 0 ] || fail "the ovs backend needs root (hugepages, and OVS-DPDK itself)"
            ;;
        *) fail "RS_VM_BACKEND must be ringswitch, testpmd, socket or ovs, not $BACKEND" ;;
    esac
    note "backend $BACKEND, logs in $RUN"
}

# ---- guests -----------------------------------------------------------------

mac_of() { printf '52:54:00:00:00:%02x' "${G_IDX[$1]}"; }
ip_of() { echo "10.0.0.${G_IDX[$1]}"; }

# guest_start NAME INDEX: boot guest NAME with MAC 52:54:00:00:00:INDEX and
# address 10.0.0.INDEX/24. Starting a NAME again (after it died, or as the
# destination of its migration: G_INCOMING) starts a new generation with
# its own log, command FIFO and QMP socket ($SOCKDIR/NAME.GEN.qmp).
guest_start() {
    local g=$1 idx=$2
    G_IDX[$g]=$idx
    G_GEN[$g]=$((${G_GEN[$g]:-0} + 1))
    local gen=${G_GEN[$g]}
    case " ${GUESTS[*]} " in *" $g "*) ;; *) GUESTS+=("$g") ;; esac
    local log ctl=$RUN/$g.ctl
    [ "$gen" -gt 1 ] && ctl=$RUN/$g.$gen.ctl
    log=$(guest_log "$g")
    rm -f "$ctl.in" "$ctl.out" "$RUN/$g.pid"
    mkfifo "$ctl.in" "$ctl.out"
    local net=() dev incoming=()
    dev="virtio-net-pci,netdev=n0,mac=$(mac_of "$g"),romfile=,vectors=0${G_DEV_OPTS[$g]:+,${G_DEV_OPTS[$g]}}"
    [ -n "${G_INCOMING[$g]:-}" ] && incoming=(-incoming "${G_INCOMING[$g]}")
    [ -n "${G_INCOMING[$g]:-}" ] && [ -n "${MIG_DEBUG_DUMP:-}" ] && incoming+=(-S)
    case "$BACKEND" in
        socket)
            net=(-netdev "socket,id=n0,mcast=230.0.0.1:$MCAST_PORT,localaddr=127.0.0.1")
            ;;
        ringswitch | testpmd | ovs)
            local chr="socket,id=c0,path=$SOCKDIR/${G_SOCKNAME[$g]:-$g}.sock"
            # OVS's dpdkvhostuserclient ports connect: QEMU always listens
            if [ "$PORT_MODE" = client ] || [ "$BACKEND" = ovs ]; then
                chr+=",server=on,wait=off"
            else
                chr+=",reconnect=1"
            fi
            net=(-chardev "$chr" -netdev "vhost-user,id=n0,chardev=c0,queues=$QUEUES")
            [ "$QUEUES" -gt 1 ] && dev+=",mq=on"
            ;;
    esac
    timeout -k 5 "$MAX_LIFE" qemu-system-x86_64 \
        -name "rs-vm-$g" -accel tcg -m 256 -smp "$SMP" \
        -display none -nodefaults $REBOOT_OPT -no-user-config \
        -serial "file:$log" -serial "pipe:$ctl" -pidfile "$RUN/$g.pid" \
        -qmp "unix:$SOCKDIR/$g.$gen.qmp,server=on,wait=off" "${incoming[@]}" \
        -kernel "$KERNEL" -initrd "$INITRD" \
        -append "console=ttyS0 quiet panic=-1 ipv6.disable=1 rs_name=$g rs_ip=$(ip_of "$g")/24 rs_timeout=$MAX_LIFE" \
        -object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem \
        "${net[@]}" -device "$dev" \
        </dev/null >"$RUN/$g.qemu.${G_GEN[$g]}.log" 2>&1 &
    G_WRAP[$g]=$!
    G_START[$g]=$(now_ms)
    WRAPPERS+=("$!")
    # Our own end of the command FIFO, opened read-write so that neither
    # opening nor writing ever blocks, even when QEMU is gone. A migration
    # destination's is kept aside until the guest runs there.
    local fd
    exec {fd}<>"$ctl.in"
    if [ -n "${G_INCOMING[$g]:-}" ]; then
        # shellcheck disable=SC2034 # taken over by run.sh once the guest moved
        G_FD_NEXT[$g]=$fd
    else
        local old=${G_FD[$g]:-}
        if [ -n "$old" ]; then exec {old}>&-; fi
        G_FD[$g]=$fd
    fi
    note "guest $g started (QEMU under timeout, pid ${G_WRAP[$g]}, generation ${G_GEN[$g]}, log $log)"
}

guest_alive() { kill -0 "${G_WRAP[$1]}" 2>/dev/null; }

# guest_kill NAME SIGNAL: signal guest NAME's QEMU and wait until it is gone.
guest_kill() {
    local g=$1 sig=$2 pid t
    pid=$(cat "$RUN/$g.pid" 2>/dev/null) || fail "no QEMU pid file for guest $g"
    # timeout(1) dies of the same SIGKILL as its child: no "Killed" notice
    [ "$sig" = KILL ] && disown "${G_WRAP[$g]}"
    kill "-$sig" "$pid" || fail "could not send SIG$sig to QEMU of guest $g (pid $pid)"
    t=$(($(now_ms) + 10000))
    while guest_alive "$g"; do
        [ "$(now_ms)" -lt "$t" ] || fail "QEMU of guest $g (pid $pid) still there 10 s after SIG$sig"
        sleep 0.1
    done
    { wait "${G_WRAP[$g]}"; } 2>/dev/null || true
    note "guest $g: QEMU killed with SIG$sig"
}

# wait_marker NAME REGEX TIMEOUT: wait until guest NAME's log has a line
# matching REGEX (extended, after "RS-"); sets MATCH to the last such line.
wait_marker() {
    local g=$1 re=$2 secs=$3 log t
    log=$(guest_log "$g")
    t=$(($(now_ms) + secs * 1000))
    while :; do
        MATCH=$(tr -d '\r' 2>/dev/null <"$log" | grep -a -E "^RS-$re" | tail -n 1 || true)
        [ -n "$MATCH" ] && return 0
        guest_alive "$g" || fail "guest $g's QEMU exited while waiting for \"RS-$re\" in its log"
        daemon_check
        [ "$(now_ms)" -lt "$t" ] || fail "guest $g: no \"RS-$re\" in its log within $secs s"
        sleep 0.2
    done
}

# guest_ready NAME [TIMEOUT]: wait for the guest's READY line (boot, modules,
# eth0 up with its address, command port open).
guest_ready() {
    local g=$1
    wait_marker "$g" "READY " "${2:-90}"
    if grep -a -q '^RS-ERROR' <(tr -d '\r' <"$(guest_log "$g")"); then
        fail "guest $g reported an error while booting: $(grep -a '^RS-ERROR' "$(guest_log "$g")" | tr -d '\r' | head -n 3)"
    fi
    local ms=$(($(now_ms) - G_START[$g]))
    note "guest $g ready $((ms / 1000)).$((ms % 1000 / 100)) s after its start: ${MATCH#RS-READY }"
}

# guest_cmd NAME COMMAND...: send a command; CMD_ID is its id.
guest_cmd() {
    local g=$1
    shift
    CMD_SEQ=$((CMD_SEQ + 1))
    CMD_ID=$CMD_SEQ
    printf '%s %s\n' "$CMD_ID" "$*" >&"${G_FD[$g]}"
    printf '%s %s: %s\n' "$(elapsed)" "$g" "$CMD_ID $*" >>"$RUN/commands.log"
}

# guest_done NAME ID TIMEOUT: wait for command ID to end; RC is its status.
guest_done() {
    wait_marker "$1" "DONE $2 rc=" "$3"
    # shellcheck disable=SC2034 # read by run.sh
    RC=$(sed -n 's/.*rc=\([0-9]*\).*/\1/p' <<<"$MATCH")
}

# result NAME WHAT ID: the line "RS-WHAT id=ID ..." from guest NAME, in MATCH.
result() {
    MATCH=$(tr -d '\r' <"$(guest_log "$1")" | grep -a -E "^RS-$2 id=$3 " | tail -n 1 || true)
    [ -n "$MATCH" ] || fail "guest $1: command $3 ended without printing RS-$2"
}

# feature NAME BIT: the virtio feature bit the guest's driver negotiated (0/1).
feature() {
    local f
    f=$(tr -d '\r' <"$(guest_log "$1")" | grep -a '^RS-READY' | tail -n 1 | sed -n 's/.*features=\([01]*\).*/\1/p')
    echo "${f:$2:1}"
}

# ---- the backend: what the guests' ports are attached to ------------------------

# backend_up NAME...: ports for these guests (the daemon started if needed).
backend_up() {
    local g
    case "$BACKEND" in
        ringswitch)
            daemon_alive || daemon_start
            for g in "$@"; do port_add "$g"; done
            ;;
        testpmd) testpmd_start "$@" ;;
        ovs)
            [ -n "$OVS_UP" ] || ovs_backend_start
            for g in "$@"; do ovs_port_add "$g"; done
            ;;
        socket) ;;
    esac
}

# backend_kill SIGNAL: kill the switch (ringswitch daemon or testpmd).
backend_kill() {
    case "$BACKEND" in
        ringswitch) daemon_kill "$1" ;;
        testpmd) testpmd_kill "$1" ;;
        socket | ovs) fail "the $BACKEND backend has no switch to kill" ;;
    esac
}

# port_connected NAME: guest NAME's port has its vhost-user connection
# (ringswitch: ctl port list; ovs: the interface's link is up).
port_connected() {
    case "$BACKEND" in
        ringswitch)
            ctl port list --json 2>/dev/null |
                jq -e --arg p "vale0:$1" '.[] | select(.name == $p and .vhost_user.connected)' >/dev/null
            ;;
        ovs) [ "$(ovs_vsctl get Interface "$1" link_state 2>/dev/null)" = up ] ;;
        *) return 0 ;;
    esac
}

# port_delivered_bytes NAME: bytes the switch has delivered to guest NAME's
# port so far (ringswitch: the port's rx_bytes, counted from the guest's
# side; ovs: the interface's tx bytes, live from the datapath).
port_delivered_bytes() {
    case "$BACKEND" in
        ringswitch) port_stat "vale0:$1" rx_bytes ;;
        ovs) kv " $(ovs_port_counters "$1")" tx_bytes ;;
        *) fail "the $BACKEND backend counts no bytes per port" ;;
    esac
}

# switch_macs: the switch's table of learned addresses, for failure messages.
switch_macs() {
    case "$BACKEND" in
        ringswitch) ctl macs vale0 2>&1 ;;
        ovs) ovs_appctl fdb/show br0 2>&1 ;;
    esac
}

# switch_mac_port MAC: the port on which the switch learned MAC (ringswitch:
# vale0:NAME from ctl macs; ovs: the interface's name, from fdb/show), or
# nothing.
switch_mac_port() {
    case "$BACKEND" in
        ringswitch) ctl macs vale0 2>/dev/null | awk -v m="$1" 'tolower($1) == tolower(m) { print $3 }' ;;
        ovs)
            local n
            n=$(ovs_appctl fdb/show br0 2>/dev/null | awk -v m="$1" 'tolower($3) == tolower(m) { print $1 }')
            [ -z "$n" ] || ovs_vsctl --bare --columns=name find Interface "ofport=$n"
            ;;
        *) fail "the $BACKEND backend learns no addresses" ;;
    esac
}

# ---- testpmd (stand-in) ---------------------------------------------------------

TESTPMD_WRAP=
TESTPMD_PID=
TESTPMD_GEN=0

# testpmd_start NAME1 NAME2: testpmd with a net_vhost port per guest (listening,
# or connecting with PORT_MODE=client), forwarding each port to the other.
testpmd_start() {
    [ $# = 2 ] || fail "the testpmd backend joins exactly two guests"
    TESTPMD_GEN=$((TESTPMD_GEN + 1))
    local vd=() i=0 g
    for g in "$@"; do
        local v="net_vhost$i,iface=$SOCKDIR/$g.sock,queues=$QUEUES"
        [ "$PORT_MODE" = client ] && v+=",client=1"
        vd+=(--vdev "$v")
        i=$((i + 1))
    done
    local log=$RUN/testpmd.$TESTPMD_GEN.log
    # DPDK does not replace a socket file left by a killed testpmd
    [ "$PORT_MODE" = client ] || for g in "$@"; do rm -f "$SOCKDIR/$g.sock"; done
    timeout -k 5 "$MAX_LIFE" dpdk-testpmd --lcores=0@1,1@1 --no-huge -m 512 --no-pci         --file-prefix "rs-vm-$$-$TESTPMD_GEN" "${vd[@]}" -- --forward-mode=io --nb-cores=1         --rxq="$QUEUES" --txq="$QUEUES" --total-num-mbufs=16384 --no-mlockall --stats-period 2         </dev/null >"$log" 2>&1 &
    TESTPMD_WRAP=$!
    WRAPPERS+=("$!")
    local t=$(($(now_ms) + 20000))
    until grep -aq 'Press enter to exit\|Port statistics' "$log"; do
        kill -0 "$TESTPMD_WRAP" 2>/dev/null || fail "testpmd exited at start: $(tail -n 5 "$log")"
        [ "$(now_ms)" -lt "$t" ] || fail "testpmd not forwarding 20 s after start"
        sleep 0.1
    done
    TESTPMD_PID=$(pgrep -P "$TESTPMD_WRAP" || true)
    note "testpmd #$TESTPMD_GEN forwarding between $* (pid $TESTPMD_PID)"
}

testpmd_kill() {
    local t st=0
    [ "$1" = KILL ] && disown "$TESTPMD_WRAP"
    kill "-$1" "$TESTPMD_PID" || fail "could not signal testpmd"
    t=$(($(now_ms) + 10000))
    while kill -0 "$TESTPMD_WRAP" 2>/dev/null; do
        [ "$(now_ms)" -lt "$t" ] || fail "testpmd still there 10 s after SIG$1"
        sleep 0.05
    done
    if [ "$1" = KILL ]; then st=killed; else { wait "$TESTPMD_WRAP"; } 2>/dev/null || st=$?; fi
    note "testpmd #$TESTPMD_GEN gone after SIG$1 (exit status $st)"
}

# ---- OVS-DPDK (a peer: the switch a user would otherwise put there) ---------------

OVS_UP=
OVS_PMD_CPU=${RS_VM_OVS_PMD_CPU:-1}
OVS_PMD_MAXSLEEP=${RS_VM_OVS_PMD_MAXSLEEP:-500}

# ovs_backend_start: OVS-DPDK (bench/lib/ovs.sh: hugepages, ovsdb-server,
# ovs-vswitchd-dpdk under timeout like every process of ours, the netdev
# bridge br0 with its NORMAL flow: a learning switch), in $RUN/ovs.
# One PMD thread, pinned to OVS_PMD_CPU (DPDK's main lcore is on CPU 0).
# pmd-maxsleep=500 (us): a PMD whose queues are nearly empty sleeps up to
# 500 us instead of spinning. Spinning, it takes one of this machine's two
# CPUs from the three TCG guests (A, B and A's destination) and the
# migration; sleeping, the idle PMD costs about 5 % of a core
# (bench/peers/ovs-dpdk.sh's idle windows), and a frame waits at most
# 0.5 ms longer: nothing beside 10 ms pings and a downtime of hundreds of
# ms. 500 is also the value bench/compare measures OVS with. (One migrate
# run each, 2026-11-27: both passed, downtime 586 ms with 500 us, 716 ms
# spinning; too few runs to tell the two apart.)
# RS_VM_OVS_PMD_MAXSLEEP=0 leaves it unset (spinning).
ovs_backend_start() {
    local cfg=()
    [ "$OVS_PMD_MAXSLEEP" = 0 ] || cfg=("pmd-maxsleep=$OVS_PMD_MAXSLEEP")
    mkdir -p "$RUN/ovs"
    # shellcheck disable=SC2034 # read by bench/lib/ovs.sh's ovs_start
    OVS_WRAP=(timeout -k 5 "$MAX_LIFE")
    # shellcheck disable=SC2034 # read by bench/lib/ovs.sh's ovs_start
    OVS_START_TIMEOUT=60
    local t0
    t0=$(now_ms)
    ovs_hugepages "$RUN/ovs" || fail "$OVS_ERROR"
    # (the exit trap stops both daemons: ovs_stop, also after a failed start)
    ovs_start "$RUN/ovs" "$OVS_PMD_CPU" "${cfg[@]}" || fail "OVS-DPDK did not start: $OVS_ERROR"
    OVS_UP=1
    note "OVS-DPDK $(ovs_version) up in $(($(now_ms) - t0)) ms (ovs-vswitchd-dpdk pid $OVS_VSWITCHD_PID, PMD on CPU $OVS_PMD_CPU, pmd-maxsleep $([ "$OVS_PMD_MAXSLEEP" = 0 ] && echo unset || echo "$OVS_PMD_MAXSLEEP us"); logs in $RUN/ovs)"
}

# ovs_port_add NAME: the dpdkvhostuserclient port NAME on br0, for guest
# NAME: OVS connects to the socket its QEMU listens on ($SOCKDIR/NAME.sock),
# and keeps trying (once a second) until it is there.
ovs_port_add() {
    local out err
    out=$(ovs_vsctl add-port br0 "$1" -- set Interface "$1" type=dpdkvhostuserclient \
        "options:vhost-server-path=$SOCKDIR/$1.sock" 2>&1) || fail "ovs-vsctl add-port br0 $1 failed: $out"
    err=$(ovs_vsctl get Interface "$1" error 2>&1)
    [ "$err" = '[]' ] || fail "OVS port $1: $err"
    note "OVS port $1 (dpdkvhostuserclient, $SOCKDIR/$1.sock, OpenFlow port $(ovs_vsctl get Interface "$1" ofport))"
}

# ovs_port_counters NAME: "rx_packets=N rx_bytes=N rx_drop=N tx_packets=N ..."
# of OVS port NAME, live from the datapath (ovs-ofctl dump-ports; rx is what
# OVS received from the guest, tx what it sent to it).
ovs_port_counters() {
    # "  port  3: rx pkts=5155, bytes=388358, drop=0, errs=?, ..."
    # "           tx pkts=13523, bytes=16407118, drop=0, errs=?, coll=?"
    ovs_ofctl dump-ports "$1" 2>/dev/null | awk '
        { for (i = 1; i <= NF; i++) {
            if ($i == "rx" || $i == "tx") { d = $i; continue }
            if (d == "" || split($i, kv, "=") != 2) continue
            sub(/,$/, "", kv[2])
            if (kv[1] == "pkts") o = o " " d "_packets=" kv[2]
            else if (kv[1] == "bytes" || kv[1] == "drop") o = o " " d "_" kv[1] "=" kv[2]
        } }
        END { print substr(o, 2) }'
}

# ---- ringswitch ---------------------------------------------------------------

daemon_alive() { [ -n "$DAEMON_WRAP" ] && kill -0 "$DAEMON_WRAP" 2>/dev/null; }

# daemon_check: fail at once if the daemon we started is gone although we
# did not stop it (a crash, or someone else's `pkill ringswitch`).
DAEMON_UP=
daemon_check() {
    [ -n "$DAEMON_UP" ] || return 0
    daemon_alive && return 0
    DAEMON_UP=
    local st=0
    { wait "$DAEMON_WRAP"; } 2>/dev/null || st=$?
    fail "the daemon (pid $DAEMON_PID) exited on its own, with status $st$([ "$st" -gt 128 ] && echo " (signal $((st - 128)))"): see the end of its log; \"INFO ringswitch: stopping\" there means it got SIGTERM or SIGINT from another process"
}

ctl() { timeout 10 "$BIN" --socket "$CTL_SOCK" ctl "$@"; }

# ctl_ok ARGS...: run `ringswitch ctl ARGS`, fail with its output if it fails.
ctl_ok() {
    local out
    if ! out=$(ctl "$@" 2>&1); then
        fail "'ringswitch ctl $*' failed: $out"
    fi
    printf '%s ctl %s\n%s\n' "$(elapsed)" "$*" "$out" >>"$RUN/ctl.log"
}

# More `serve` options (--config FILE) for daemon_start.
DAEMON_OPTS=()

daemon_start() {
    DAEMON_GEN=$((DAEMON_GEN + 1))
    echo "===== daemon start #$DAEMON_GEN at $(elapsed) s: $BIN serve --socket $CTL_SOCK (RINGSWITCH_LOG=$LOGLEVEL)" >>"$RUN/daemon.log"
    NO_COLOR=1 RINGSWITCH_LOG=$LOGLEVEL timeout -k 5 "$MAX_LIFE" "$BIN" serve --socket "$CTL_SOCK" \
        "${DAEMON_OPTS[@]}" </dev/null >>"$RUN/daemon.log" 2>&1 &
    DAEMON_WRAP=$!
    WRAPPERS+=("$!")
    local t=$(($(now_ms) + 10000))
    until ctl port list >/dev/null 2>&1; do
        daemon_alive || fail "the daemon exited at start (see the daemon log)"
        [ "$(now_ms)" -lt "$t" ] || fail "the daemon does not answer on $CTL_SOCK 10 s after start"
        sleep 0.05
    done
    DAEMON_PID=$(pgrep -P "$DAEMON_WRAP" || true)
    DAEMON_UP=1
    note "daemon #$DAEMON_GEN up (pid $DAEMON_PID)"
}

# daemon_kill SIGNAL: signal the daemon and wait until it is gone.
daemon_kill() {
    local sig=$1 t st=0
    DAEMON_UP=
    [ "$sig" = KILL ] && disown "$DAEMON_WRAP"
    kill "-$sig" "$DAEMON_PID" || fail "could not signal the daemon (pid $DAEMON_PID)"
    t=$(($(now_ms) + 10000))
    while daemon_alive; do
        [ "$(now_ms)" -lt "$t" ] || fail "the daemon (pid $DAEMON_PID) is still there 10 s after SIG$sig"
        sleep 0.05
    done
    if [ "$sig" = KILL ]; then
        st=killed
    else
        { wait "$DAEMON_WRAP"; } 2>/dev/null || st=$?
    fi
    echo "===== daemon #$DAEMON_GEN ended by SIG$sig at $(elapsed) s, status $st" >>"$RUN/daemon.log"
    note "daemon #$DAEMON_GEN gone after SIG$sig (exit status $st)"
}

# port_add NAME: the vhost-user port vale0:NAME for guest NAME, with the
# current PORT_MODE, QUEUES and PORT_OPTS.
port_add() {
    local args=(port add "vale0:$1" --vhost-user "$SOCKDIR/$1.sock")
    [ "$PORT_MODE" = client ] && args+=(--client)
    [ "$QUEUES" -gt 1 ] && args+=(--queues "$QUEUES")
    args+=("${PORT_OPTS[@]}")
    # shellcheck disable=SC2206 # options are plain words
    [ -n "${G_PORT_OPTS[$1]:-}" ] && args+=(${G_PORT_OPTS[$1]})
    ctl_ok "${args[@]}"
}

# port_stat PORT FIELD: one counter of `ctl stats --json`.
port_stat() {
    ctl stats --json 2>/dev/null | jq -r --arg p "$1" --arg f "$2" '.[] | select(.name == $p) | .[$f]'
}

# port_drops PORT: "field=value ..." of every non-zero drop counter of PORT.
port_drops() {
    ctl stats --json 2>/dev/null | jq -r --arg p "$1" \
        '.[] | select(.name == $p) | to_entries[] | select((.key | startswith("drop")) and .value != 0) | "\(.key)=\(.value)"' |
        tr '\n' ' '
}

port_counters() {
    ctl stats --json 2>/dev/null | jq -r --arg p "$1" \
        '.[] | select(.name == $p) | to_entries | map(select(.key != "name") | "\(.key)=\(.value)") | join(" ")'
}
