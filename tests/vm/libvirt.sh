# shellcheck shell=bash
# The libvirt scenarios of tests/vm/run.sh (sourced by it, after lib.sh): a
# domain started by libvirtd (`virsh`, a TCG domain, type='qemu') on a
# vhost-user port of a ringswitch daemon, pinging a process on the switch
# through a destroy and start of the domain, a restart of the daemon and a
# `ctl upgrade`. docs/libvirt.md says what the XML means; its XML blocks
# are read from there, so that the page shows what is tested.
#
#   libvirt          <interface type='vhostuser'> with mode='client' (QEMU
#                    connects, <reconnect timeout='1'/>; ringswitch listens,
#                    with --vm-socket-group set to QEMU's group)
#   libvirt-server   mode='server' (QEMU listens in a directory of its own;
#                    ringswitch connects: a --client port)
#
# libvirtd (qemu:///system) and virtlogd are started (-d) if they are not
# running, and stopped at the end if this script started them. The domain
# (rs-vm-SCENARIO-PID) is destroyed and undefined however the script ends;
# domains of earlier runs whose script is gone are removed at the start.

LV_URI=qemu:///system
LV_DOM=
LV_STARTED=()       # "name pid" of the libvirt daemons this script started
LV_QEMU_PID=
LV_LOG=             # libvirt's log of the domain's QEMU
LV_LOG_OFF=0        # its size when the domain was last started
QEMU_UID=
QEMU_GID=
PONG_WRAP=
PONG_N=0
PONG_IP=10.0.0.200
PONG_MAC=02:00:00:00:00:c8

virsh_() { timeout "${VIRSH_WAIT:-60}" virsh -q -c "$LV_URI" "$@"; }

# proc_alive PID: the process exists and is not a zombie.
proc_alive() {
    local st
    st=$(sed -n 's/^[0-9]* ([^)]*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

pidfile_alive() {
    local p
    p=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$p" ] && proc_alive "$p"
}

lv_cleanup() {
    local rc=$? e name pid t
    set +e
    trap - ERR
    if [ -n "$LV_DOM" ]; then
        virsh_ destroy "$LV_DOM" >/dev/null 2>&1
        virsh_ undefine "$LV_DOM" >/dev/null 2>&1
        # keep libvirt's log of this run with the others, not in /var/log
        if [ -f "$LV_LOG" ]; then
            rm -f "$RUN/A.qemu.1.log"
            mv "$LV_LOG" "$RUN/A.qemu.1.log"
        fi
        rm -f "$RUN/vmlinuz" "$RUN/initramfs.gz"
    fi
    # libvirtd before virtlogd: it holds QEMU's log pipes through virtlogd
    for e in libvirtd virtlogd; do
        for name in "${LV_STARTED[@]}"; do
            [ "${name% *}" = "$e" ] || continue
            pid=${name#* }
            kill -TERM "$pid" 2>/dev/null
            t=$(($(now_ms) + 30000))
            while proc_alive "$pid" && [ "$(now_ms)" -lt "$t" ]; do sleep 0.1; done
            proc_alive "$pid" && kill -KILL "$pid" 2>/dev/null
            note "stopped $e (pid $pid), which this run started"
        done
    done
    [ -n "$SOCKDIR" ] && rm -f "$SOCKDIR"/qemu/*.sock && rmdir "$SOCKDIR/qemu" 2>/dev/null
    (exit "$rc")
    cleanup
}

# libvirt_up: libvirtd answering on qemu:///system (and virtlogd, through
# which it logs QEMU's output), started if not running.
libvirt_up() {
    step "libvirtd and virtlogd"
    command -v virsh >/dev/null || fail "no virsh: run scripts/setup.sh (apt-get install libvirt-clients)"
    command -v libvirtd >/dev/null || fail "no libvirtd: run scripts/setup.sh (apt-get install libvirt-daemon-system)"
    [ "$(id -u)" = 0 ] || fail "the libvirt scenarios need root (qemu:///system)"
    local d
    for d in virtlogd libvirtd; do
        pidfile_alive "/run/$d.pid" && continue
        if [ "$d" = libvirtd ] && virsh_ version >/dev/null 2>&1; then continue; fi
        "$d" -d </dev/null >>"$RUN/$d.out" 2>&1 || fail "'$d -d' failed: $(tail -n 5 "$RUN/$d.out")"
        local t=$(($(now_ms) + 60000))
        until pidfile_alive "/run/$d.pid"; do
            [ "$(now_ms)" -lt "$t" ] || fail "$d -d: no live process in /run/$d.pid after 60 s: $(tail -n 5 "$RUN/$d.out")"
            sleep 0.1
        done
        LV_STARTED+=("$d $(cat "/run/$d.pid")")
        note "started $d -d (pid $(cat "/run/$d.pid"))"
    done
    local t=$(($(now_ms) + 60000)) out
    until out=$(virsh_ version 2>&1); do
        [ "$(now_ms)" -lt "$t" ] || fail "libvirtd does not answer on $LV_URI after 60 s: $out"
        sleep 0.2
    done
    note "libvirtd answers on $LV_URI: $(grep -a -E 'Using library|Running hypervisor' <<<"$out" | tr -s ' ' | paste -sd ';')"

    # Domains left by runs that were killed before their trap ran.
    local dom pid
    for dom in $(virsh_ list --all --name 2>/dev/null); do
        [[ "$dom" =~ ^rs-vm-libvirt(-server)?-([0-9]+)$ ]] || continue
        pid=${BASH_REMATCH[2]}
        proc_alive "$pid" && continue
        virsh_ destroy "$dom" >/dev/null 2>&1 || true
        virsh_ undefine "$dom" >/dev/null 2>&1 || true
        note "removed domain $dom, left by an earlier run (pid $pid is gone)"
    done

    # The user and group libvirt runs QEMU as (qemu.conf's user and group).
    local label
    label=$(virsh_ capabilities | sed -n "s/.*<baselabel type='qemu'>+\([0-9]*\):+\([0-9]*\)<.*/\1 \2/p" | head -n 1)
    read -r QEMU_UID QEMU_GID <<<"$label"
    [ -n "$QEMU_GID" ] || fail "virsh capabilities shows no dac baselabel for qemu domains (the uid:gid QEMU runs as)"
    note "libvirt runs QEMU as uid $QEMU_UID gid $QEMU_GID"
}

# doc_block NAME: the XML block of docs/libvirt.md after "<!-- test: NAME -->".
doc_block() {
    local out
    out=$(awk -v m="<!-- test: $1 -->" '
        $0 == m { found = 1; next }
        found && /^```/ { if (inside) exit; inside = 1; next }
        inside { print }' "$ROOT/docs/libvirt.md")
    [ -n "$out" ] || fail "docs/libvirt.md has no XML block after '<!-- test: $1 -->'"
    echo "$out"
}

indent() { sed "s/^/$1/"; }

# domain_xml MODE SOCKET: the test's domain. Interface, memory backing and
# the MSI-X override come from docs/libvirt.md (the socket path replaced);
# the rest boots the test kernel and initramfs with the harness's serial
# ports (tests/vm/README.md): ttyS0 a log (appended to across starts),
# ttyS1 the command FIFO.
domain_xml() {
    local mode=$1 sock=$2 iface
    iface=$(doc_block "interface-$mode")
    # shellcheck disable=SC2001 # a pattern ([^']*), not a fixed string
    iface=$(sed "s#path='[^']*'#path='$sock'#" <<<"$iface")
    grep -qF "path='$sock'" <<<"$iface" || fail "could not put the socket path into docs/libvirt.md's interface-$mode block"
    grep -qF "address='$(mac_of A)'" <<<"$iface" || fail "docs/libvirt.md's interface-$mode block does not have MAC $(mac_of A), which the harness gives guest A"
    cat <<EOF
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$LV_DOM</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
$(doc_block memory | indent '  ')
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$RUN/vmlinuz</kernel>
    <initrd>$RUN/initramfs.gz</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 ipv6.disable=1 rs_name=A rs_ip=$(ip_of A)/24 rs_timeout=$MAX_LIFE</cmdline>
  </os>
  <features>
    <acpi/>
  </features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
$(indent '    ' <<<"$iface")
    <serial type='file'>
      <source path='$RUN/A.log' append='on'/>
      <target port='0'/>
    </serial>
    <serial type='pipe'>
      <source path='$RUN/A.ctl'/>
      <target port='1'/>
    </serial>
    <memballoon model='none'/>
  </devices>
$(doc_block override | indent '  ')
</domain>
EOF
}

# lv_start: virsh start; returns once QEMU runs (libvirt waits for the
# vhost-user connection) and sets LV_QEMU_PID.
lv_start() {
    LV_LOG_OFF=$(stat -c %s "$LV_LOG" 2>/dev/null || echo 0)
    local out
    out=$(VIRSH_WAIT=180 virsh_ start "$LV_DOM" 2>&1) ||
        fail "virsh start $LV_DOM failed or did not return within 180 s: $out; domain state: $(virsh_ domstate --reason "$LV_DOM" 2>&1); QEMU's log: $(tail -c +"$((LV_LOG_OFF + 1))" "$LV_LOG" 2>/dev/null | grep -a -v '^-\|^[A-Z_]*=' | tail -n 5)"
    LV_QEMU_PID=$(cat "/run/libvirt/qemu/$LV_DOM.pid" 2>/dev/null) || fail "no /run/libvirt/qemu/$LV_DOM.pid after virsh start"
    # wait_marker's liveness check (lib.sh): this QEMU
    # shellcheck disable=SC2034 # read by lib.sh
    G_WRAP[A]=$LV_QEMU_PID
    G_START[A]=$(now_ms)
    note "virsh start $LV_DOM: $(virsh_ domstate "$LV_DOM"), QEMU pid $LV_QEMU_PID"
}

# lv_ready N: wait until guest A's log has its Nth READY line (one per
# boot); then its port is connected and QEMU reported no vhost-user error.
lv_ready() {
    local n=$1 log=$RUN/A.log t=$(($(now_ms) + 150000)) boots
    while :; do
        boots=$(tr -d '\r' <"$log" 2>/dev/null | grep -a -c '^RS-READY ' || true)
        [ "$boots" -ge "$n" ] && break
        proc_alive "$LV_QEMU_PID" || fail "QEMU (pid $LV_QEMU_PID) exited before guest A booted; domain state: $(virsh_ domstate --reason "$LV_DOM" 2>&1)"
        daemon_check
        [ "$(now_ms)" -lt "$t" ] || fail "guest A: no READY line number $n in $log within 150 s of virsh start"
        sleep 0.2
    done
    [ "$boots" = "$n" ] || fail "guest A booted $boots times, expected $n"
    if tr -d '\r' <"$log" | grep -a -q '^RS-ERROR'; then
        fail "guest A reported an error while booting: $(tr -d '\r' <"$log" | grep -a '^RS-ERROR' | head -n 3)"
    fi
    local errs
    errs=$(tail -c +"$((LV_LOG_OFF + 1))" "$LV_LOG" | grep -a '^[0-9T:.-]*Z qemu-system' |
        grep -a -v ' info: ' | grep -a -i -E 'vhost|msg|fail|unable' | head -n 4 || true)
    [ -z "$errs" ] || fail "QEMU reported vhost-user errors while guest A booted:
$errs"
    port_wait_connected
    local ms=$(($(now_ms) - G_START[A]))
    note "guest A ready (boot $n) $((ms / 1000)).$((ms % 1000 / 100)) s after virsh start: $(tr -d '\r' <"$log" | grep -a '^RS-READY ' | tail -n 1 | cut -c10-80)"
}

port_wait_connected() {
    local t=$(($(now_ms) + 60000))
    until port_connected A; do
        proc_alive "$LV_QEMU_PID" || fail "QEMU (pid $LV_QEMU_PID) exited; domain state: $(virsh_ domstate --reason "$LV_DOM" 2>&1)"
        daemon_check
        [ "$(now_ms)" -lt "$t" ] || fail "port vale0:A: no vhost-user connection within 60 s: $(ctl port list 2>&1)"
        sleep 0.1
    done
}

# pong_start: the process at the other end: `pkt-gen -f pong` on vale0:pong
# bounces every frame with MACs, IP addresses and UDP ports swapped.
pong_start() {
    PONG_N=$((PONG_N + 1))
    local out=$RUN/pong.$PONG_N.out
    timeout -k 5 "$MAX_LIFE" "$BIN" --socket "$CTL_SOCK" pkt-gen -i vale0:pong -f pong -T 0 --json \
        </dev/null >"$out" 2>&1 &
    PONG_WRAP=$!
    WRAPPERS+=("$!")
    local t=$(($(now_ms) + 30000))
    until ctl port list --json 2>/dev/null | jq -e '.[] | select(.name == "vale0:pong" and .open)' >/dev/null; do
        kill -0 "$PONG_WRAP" 2>/dev/null || fail "pkt-gen -f pong exited: $(cat "$out")"
        [ "$(now_ms)" -lt "$t" ] || fail "pkt-gen -f pong did not open vale0:pong within 30 s: $(cat "$out")"
        sleep 0.1
    done
}

# pong_stop MIN: stop it (SIGINT); it must have bounced MIN frames or more.
# (Stopped before each daemon restart: it would open its port again on the
# new daemon by itself, see pkt-gen's set_reconnect, but this test wants
# the guest's side alone to be what reconnects.)
pong_stop() {
    local min=$1 out=$RUN/pong.$PONG_N.out rep n
    kill -INT "$(pgrep -P "$PONG_WRAP" || echo none)" 2>/dev/null || true
    wait "$PONG_WRAP" || true
    rep=$(tail -n 1 "$out")
    n=$(jq -r .packets <<<"$rep" 2>/dev/null) || fail "pkt-gen -f pong printed no JSON report: $(tail -n 5 "$out")"
    [ "$n" -ge "$min" ] || fail "pkt-gen -f pong bounced $n frames, expected $min or more: $rep"
    note "pkt-gen -f pong bounced $n frames"
}

# lv_ping WHEN: guest A pings the pong process 5 times, every ping answered.
lv_ping() {
    step "guest A pings pkt-gen -f pong on vale0:pong ($PONG_IP) through the switch, $1"
    guest_cmd A arp -i eth0 -s "$PONG_IP" "$PONG_MAC"
    guest_done A "$CMD_ID" 60
    [ "$RC" = 0 ] || fail "guest A: arp -s $PONG_IP $PONG_MAC failed"
    guest_cmd A rs_reach "$PONG_IP" 60
    guest_done A "$CMD_ID" 120
    result A REACH "$CMD_ID"
    [ "$(kv "$MATCH" ok)" = 1 ] || fail "guest A: no answer from $PONG_IP (pkt-gen -f pong) within 60 s, $1"
    guest_cmd A rs_ping "$PONG_IP" 5
    guest_done A "$CMD_ID" 60
    result A PING "$CMD_ID"
    [ "$(kv "$MATCH" rx)" = 5 ] || fail "guest A -> $PONG_IP, $1: $(kv "$MATCH" rx) replies of $(kv "$MATCH" tx) pings"
    note "A -> pong: 5/5 replies"
}

# lv_same_guest: the domain still runs in the same QEMU, not rebooted.
lv_same_guest() {
    local st pid
    st=$(virsh_ domstate "$LV_DOM" 2>&1)
    [ "$st" = running ] || fail "domain $LV_DOM is '$st', not running, after the daemon's restart"
    pid=$(cat "/run/libvirt/qemu/$LV_DOM.pid" 2>/dev/null || true)
    [ "$pid" = "$LV_QEMU_PID" ] || fail "the domain's QEMU changed (pid $LV_QEMU_PID, now ${pid:-none})"
}

libvirt_scenario() {
    local mode=$1
    backends ringswitch
    trap lv_cleanup EXIT
    libvirt_up
    LV_DOM=rs-vm-$SCENARIO-$$
    LV_LOG=/var/log/libvirt/qemu/$LV_DOM.log
    # guest A for lib.sh (guest_cmd, guest_done, fail): index 1, one log
    # for every boot
    # shellcheck disable=SC2034 # read by lib.sh
    G_IDX[A]=1
    # shellcheck disable=SC2034 # read by lib.sh
    G_GEN[A]=1
    GUESTS+=(A)
    # fail() shows the tail of QEMU's log: libvirt's
    ln -sfn "$LV_LOG" "$RUN/A.qemu.1.log"

    step "ringswitch and port vale0:A (mode='$mode')"
    # The kernel and initramfs: copies (libvirt hands them to QEMU's user
    # while the domain runs)
    cp -L "$KERNEL" "$RUN/vmlinuz"
    cp "$INITRD" "$RUN/initramfs.gz"
    [ "$SOCKDIR" = "$RUN" ] || chmod 0711 "$SOCKDIR"
    local sock
    DAEMON_OPTS=(--config "$RUN/config.json")
    if [ "$mode" = client ]; then
        # QEMU connects to ringswitch's socket: made 0660 with QEMU's group
        DAEMON_OPTS+=(--vm-socket-group "$QEMU_GID")
        sock=$SOCKDIR/A.sock
    else
        # QEMU listens: in a directory of its own
        mkdir -p "$SOCKDIR/qemu"
        chown "$QEMU_UID:$QEMU_GID" "$SOCKDIR/qemu"
        chmod 0750 "$SOCKDIR/qemu"
        sock=$SOCKDIR/qemu/A.sock
    fi
    local f
    for f in "$RUN/vmlinuz" "$(dirname "$sock")"; do
        setpriv --reuid="$QEMU_UID" --regid="$QEMU_GID" --clear-groups test -r "$f" -a -x "$(dirname "$f")" ||
            fail "QEMU's user ($QEMU_UID:$QEMU_GID) cannot reach $f: make the directories on the way searchable, or set RS_VM_OUT"
    done
    daemon_start
    if [ "$mode" = client ]; then
        ctl_ok port add vale0:A --vhost-user "$sock"
    else
        ctl_ok port add vale0:A --vhost-user "$sock" --client
    fi

    step "virsh define and start a TCG domain on it"
    rm -f "$RUN/A.ctl.in" "$RUN/A.ctl.out"
    mkfifo "$RUN/A.ctl.in" "$RUN/A.ctl.out"
    local fd
    exec {fd}<>"$RUN/A.ctl.in"
    # shellcheck disable=SC2034 # read by lib.sh
    G_FD[A]=$fd
    domain_xml "$mode" "$sock" >"$RUN/domain.xml"
    local out
    out=$(virsh_ define "$RUN/domain.xml" 2>&1) || fail "virsh define failed: $out"
    note "defined $LV_DOM ($RUN/domain.xml)"
    lv_start
    lv_ready 1
    pong_start
    lv_ping "after the first start"

    step "virsh destroy, then virsh start"
    out=$(virsh_ destroy "$LV_DOM" 2>&1) || fail "virsh destroy failed: $out"
    local t=$(($(now_ms) + 60000))
    while port_connected A; do
        [ "$(now_ms)" -lt "$t" ] || fail "port vale0:A still connected 60 s after virsh destroy"
        sleep 0.1
    done
    note "destroyed; port vale0:A disconnected"
    lv_start
    lv_ready 2
    lv_ping "after virsh destroy and start"
    pong_stop 20

    step "restart ringswitch: SIGTERM, then a new daemon with the same --config"
    daemon_kill TERM
    daemon_start
    ctl port list --json | jq -e '.[] | select(.name == "vale0:A")' >/dev/null ||
        fail "vale0:A did not come back from --config: $(ctl port list 2>&1)"
    port_wait_connected
    lv_same_guest
    note "the guest's port is connected again; the same QEMU (pid $LV_QEMU_PID) runs"
    pong_start
    lv_ping "after the daemon's restart"
    pong_stop 10

    step "ctl upgrade: the daemon runs its binary again"
    local pid_before=$DAEMON_PID
    out=$(ctl upgrade 2>&1) || fail "ctl upgrade failed: $out"
    note "$out"
    [ "$(pgrep -P "$DAEMON_WRAP" || true)" = "$pid_before" ] || fail "the daemon's pid changed (was $pid_before)"
    port_wait_connected
    lv_same_guest
    pong_start
    lv_ping "after ctl upgrade"
    pong_stop 10
    # still the second boot: the guest was never restarted by the switch's
    local boots
    boots=$(tr -d '\r' <"$RUN/A.log" | grep -a -c '^RS-READY ' || true)
    [ "$boots" = 2 ] || fail "guest A booted $boots times, expected 2 (one per virsh start)"
    show_counters A
}

sc_libvirt() { libvirt_scenario client; }
sc_libvirt_server() { libvirt_scenario server; }
