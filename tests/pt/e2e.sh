#!/usr/bin/env bash
# Passthrough end to end: a real `ringswitch serve` with a passthrough
# switch port (vale0:g1) and a passthrough pipe end (pp{1), a QEMU TCG guest
# on both through ivshmem-doorbell, guest/ringswitch_pt in the guest, and
# the unmodified `ringswitch pkt-gen` on both sides.
#
#   sudo tests/pt/e2e.sh [--build-only]   (exit 0 only if every check passed;
#                                           --build-only: print the initramfs
#                                           and kernel paths and stop)
#
# Environment: RS_PT_FRAMES (frames per run, default 20000), RS_PT_OUT (logs),
# RS_PT_STOP_AFTER=guest-to-switch (stop after that check: a loop of it, as
# tests/pt/loop.sh runs), RS_PT_INITRAMFS (an initramfs this script built
# before, to skip the build).
#
# Checks: guest txseq -> switch -> host rxseq (every frame accounted for: the
# switch took all N from the guest, each was delivered or counted as dropped
# at the receiver's full ring, the receiver read every delivered one, in
# order, and every gap it saw is a counted drop); host
# txseq -> pipe -> guest rxseq (no loss); the guest's CPU idle while its
# receiver blocks; host ping <-> guest pong in blocking mode (interrupts);
# driver unload and reload in the guest; an unmodified netmap program in the
# guest; a daemon restart (ports back from --config) followed by new guests
# on the same sockets; two guests over a passthrough pipe and two switch
# ports (b sends through the switch once a's receiver is open, which a says
# with one frame over the pipe; once the switch has accounted for every
# frame, the host ends a's receiver with a line on a's second serial port,
# and every frame must be one a read, in order, or a counted drop). Logs:
# $RS_PT_OUT/e2e (default target/pt/e2e). Prints the frames per second each
# path reached (TCG: only the ratio between paths means anything).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${RS_PT_OUT:-$ROOT/target/pt}
RUN=$OUT/e2e
BIN=${RINGSWITCH_BIN:-$ROOT/target/release/ringswitch}
N=${RS_PT_FRAMES:-20000}
STOP_AFTER=${RS_PT_STOP_AFTER:-}
MAX_LIFE=240
note() { printf '[pt-e2e] %s\n' "$*" >&2; }
die() { note "ERROR: $*"; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root"
[ -x "$BIN" ] || die "no ringswitch binary at $BIN (cargo build --release -p ringswitch-cli)"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
need=()
for p in qemu-system-x86 linux-image-cloud-amd64 busybox-static build-essential cpio; do
    installed "$p" || need+=("$p")
done
KERNEL=$(find /boot -maxdepth 1 -name 'vmlinuz-*-cloud-amd64' | sort -V | tail -n 1)
if [ ${#need[@]} -gt 0 ] || [ -z "$KERNEL" ]; then
    note "apt-get install ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" linux-image-cloud-amd64 >/dev/null
    KERNEL=$(find /boot -maxdepth 1 -name 'vmlinuz-*-cloud-amd64' | sort -V | tail -n 1)
fi
KVER=${KERNEL#/boot/vmlinuz-}
installed "linux-headers-$KVER" || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "linux-headers-$KVER" >/dev/null

rm -rf "$RUN"
mkdir -p "$RUN"
if [ -n "${RS_PT_INITRAMFS:-}" ]; then
    [ -f "$RS_PT_INITRAMFS" ] || die "no initramfs at RS_PT_INITRAMFS=$RS_PT_INITRAMFS"
    cp "$RS_PT_INITRAMFS" "$RUN/initramfs.gz"
else
    mkdir -p "$RUN/module" "$RUN/root"/{bin,dev,proc,sys,tmp,lib/modules}
    cp "$ROOT"/guest/ringswitch_pt/{*.c,*.h,Makefile} "$RUN/module/"
    make -s -C "$RUN/module" KDIR="/lib/modules/$KVER/build" >"$RUN/module.log" 2>&1 ||
        { cat "$RUN/module.log" >&2; die "module build failed"; }
    tree=$RUN/root
    cp /bin/busybox "$tree/bin/"
    cp "$RUN/module/ringswitch_pt.ko" "$tree/lib/modules/"
    install -m 755 "$HERE/e2e-init" "$tree/init"
    # The host's own ringswitch binary and the libraries it loads.
    strip -o "$tree/bin/ringswitch" "$BIN"
    for lib in $(ldd "$BIN" | grep -o '/[^ ]*'); do
        mkdir -p "$tree$(dirname "$lib")"
        cp -L "$lib" "$tree$lib"
    done
    # A netmap program built with no link to ringswitch, and the preload library.
    LIBNM=$(dirname "$BIN")/libringswitch_netmap.so
    [ -f "$LIBNM" ] || LIBNM=$(dirname "$BIN")/deps/libringswitch_netmap.so
    [ -f "$LIBNM" ] || die "no libringswitch_netmap.so next to $BIN (cargo build --release -p ringswitch-netmap)"
    cp "$LIBNM" "$tree/lib/"
    cc -O2 -I "$ROOT/include/netmap" -o "$tree/bin/nm_raw" "$ROOT/crates/netmap-compat/tests/c/nm_raw.c"
    # The virtio-net driver, for bench/passthrough.sh's vhost-user comparison.
    mkdir -p "$tree/lib/modules/virtio"
    for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev \
        drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci net/core/failover \
        drivers/net/net_failover drivers/net/virtio_net; do
        cp "/lib/modules/$KVER/kernel/$m.ko" "$tree/lib/modules/virtio/"
    done
    (cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$RUN/initramfs.gz"
fi
note "initramfs $(du -k "$RUN/initramfs.gz" | cut -f1) KiB"
if [ "${1:-}" = --build-only ]; then
    echo "$RUN/initramfs.gz $KERNEL"
    exit 0
fi

PIDS=()
cleanup() {
    local rc=$?
    set +e
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    wait 2>/dev/null
    exit "$rc"
}
trap cleanup EXIT
spawn() {
    local log=$1
    shift
    setsid timeout -k 5 "$MAX_LIFE" "$@" </dev/null >"$log" 2>&1 &
    PIDS+=("$!")
}
# Stops a spawned program with one SIGTERM, sent to it alone: pkt-gen takes
# what already arrived and reports (a second signal, as `timeout` would
# forward one sent to the whole group, makes it leave without a report).
stop_spawned() {
    local p=$1 c
    while c=$(pgrep -P "$p" | head -n 1) && [ -n "$c" ]; do p=$c; done
    [ "$p" = "$1" ] || kill -TERM "$p" 2>/dev/null || true
}
# Runs "${@:2}" until it succeeds, for at most $1 seconds; fails if it never did.
wait_for() {
    local t=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $t ] || return 1
        sleep 0.2
    done
}
SOCK=$RUN/rs.sock
rs() { "$BIN" --socket "$SOCK" "$@"; }
daemon_up() { rs ctl port list >/dev/null 2>&1; }
spawn "$RUN/daemon.log" env RINGSWITCH_LOG=info "$BIN" serve --socket "$SOCK" --config "$RUN/config.json"
wait_for 60 daemon_up || die "the daemon did not start: $(cat "$RUN/daemon.log")"
rs ctl port add vale0:g1 --passthrough "$RUN/g1.sock"
rs ctl port add 'pp{1' --passthrough "$RUN/pp1.sock"
# The sum of counters "${@:2}" of port $1 (0 for a port that is not there).
port_sum() {
    rs ctl stats --json 2>/dev/null | python3 -c 'import json,sys; n=sys.argv[1]; print(sum(s.get(f, 0) for s in json.load(sys.stdin) if s["name"] == n for f in sys.argv[2:]))' "$@" 2>/dev/null || true
}
port_open() {
    rs ctl port list --json 2>/dev/null |
        python3 -c 'import json,sys; sys.exit(not any(p["name"] == sys.argv[1] and p["open"] for p in json.load(sys.stdin)))' "$1"
}

# The host's receiver for check 1 waits before the guest boots, on a
# persistent port: its counters stay readable once the receiver is done.
rs ctl port add vale0:h
spawn "$RUN/host-rx.log" "$BIN" --socket "$SOCK" pkt-gen -f rxseq -i vale0:h -n "$N" -T 0 --json
host_rx=${PIDS[-1]}
wait_for 60 port_open vale0:h || die "the host's receiver did not open vale0:h: $(cat "$RUN/host-rx.log")"
spawn "$RUN/qemu.log" qemu-system-x86_64 -accel tcg -m 256 -display none -nodefaults \
    -no-user-config -no-reboot -serial "file:$RUN/guest.log" \
    -kernel "$KERNEL" -initrd "$RUN/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 rs_n=$N" \
    -chardev "socket,id=g1,path=$RUN/g1.sock" -device ivshmem-doorbell,chardev=g1,vectors=1 \
    -chardev "socket,id=pp1,path=$RUN/pp1.sock" -device ivshmem-doorbell,chardev=pp1,vectors=1

line() { grep -a $'\r$' "$RUN/guest.log" 2>/dev/null | tr -d '\r' | grep -a -o "RS-E2E-$1.*" | tail -n 1 || true; }
wait_line() {
    local t=$((SECONDS + $2)) l
    while [ $SECONDS -lt $t ]; do
        l=$(line "$1")
        [ -n "$l" ] && { echo "$l"; return 0; }
        sleep 0.2
    done
    return 0
}
json() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ""))' "$1" "$2" 2>/dev/null || true; }
# What the daemon knows when a check fails: every port's counters, the
# ports, the switch's MAC table (where the frames went).
save_state() {
    rs ctl stats --json >"$RUN/stats-$1.json" 2>&1
    rs ctl port list --json >"$RUN/ports-$1.json" 2>&1
    rs ctl macs vale0 >"$RUN/macs-$1.txt" 2>&1
    note "$1: the daemon's counters and ports are in $RUN/stats-$1.json and $RUN/ports-$1.json"
}
FAILED=0
check() {
    if [ "$2" = 0 ]; then
        echo "PASS  $1: $3"
    else
        echo "FAIL  $1: $3"
        FAILED=$((FAILED + 1))
        save_state "$1" || true
    fi
}
finish() {
    [ $FAILED = 0 ] || { note "$FAILED check(s) failed; logs in $RUN"; exit 1; }
    note "all checks passed"
    exit 0
}

l=$(wait_line INSMOD 60)
check driver "$([[ $l == *"rc=0 devs=2"* ]] && echo 0 || echo 1)" "$l"

l=$(wait_line 'TX ' 120)
tx_json=${l#*rc=0 }
sent=$(json "$tx_json" packets)
# The switch drops a frame only when the receiver's ring is full (a receiver
# starved of CPU, which this test does not control) and counts it there. So:
# wait until every frame is accounted for at vale0:h (delivered or dropped),
# then for the receiver's report. It ends by itself once it has all N; after
# a drop it never will, and is stopped: it takes what was delivered, then
# reports.
h_drops="drop_rx_full drop_link_down drop_long"
# shellcheck disable=SC2086 # the counter names are words
h_accounted() { [ "$(port_sum vale0:h rx_packets $h_drops)" -ge "$N" ] 2>/dev/null; }
rx_reported() { grep -q '^{' "$RUN/host-rx.log"; }
wait_for 120 h_accounted || true
# shellcheck disable=SC2086
h_dropped=$(port_sum vale0:h $h_drops)
h_rx=$(port_sum vale0:h rx_packets)
g1_tx=$(port_sum vale0:g1 tx_packets)
[ "${h_dropped:-0}" = 0 ] || stop_spawned "$host_rx"
wait_for 60 rx_reported || { stop_spawned "$host_rx"; wait_for 60 rx_reported || true; }
host=$(grep '^{' "$RUN/host-rx.log" | tail -n 1 || true)
got=$(json "$host" packets)
gaps=$(json "$host" gaps)
# Every frame accounted for: the guest sent N and the switch took them all
# (its report comes after the switch took the last one, and the switch
# counts and publishes a frame to vale0:h before it hands the guest's slot
# back: so the receiver, stopped after that, could read every delivered one);
# each was delivered to vale0:h or dropped there and counted; the receiver
# read every delivered one, in order; a gap it saw is a counted drop (drops
# at the very end leave none).
ok=1
[ "$sent" = "$N" ] && [ "$g1_tx" = "$N" ] && [ -n "$h_rx" ] && [ $((h_rx + h_dropped)) = "$N" ] &&
    [ "$got" = "$h_rx" ] && [ -n "$gaps" ] && [ "$gaps" -le "$h_dropped" ] &&
    [ "$(json "$host" reordered)" = 0 ] && [ "$(json "$host" malformed)" = 0 ] && ok=0
check guest-to-switch "$ok" \
    "guest txseq sent $sent; the switch took $g1_tx from vale0:g1, delivered $h_rx to vale0:h and dropped $h_dropped there (its ring full); host rxseq: ${host:0:260}"
guest_tx_pps=$(json "$tx_json" pps)
# vale0:h goes once its receiver has closed it, as an on-demand port would.
h_del() { rs ctl port del vale0:h >/dev/null 2>&1; }
wait_for 60 h_del || note "vale0:h could not be deleted"
[ "$STOP_AFTER" != guest-to-switch ] || finish

wait_line RX-READY 60 >/dev/null
spawn "$RUN/host-tx.log" "$BIN" --socket "$SOCK" pkt-gen -f txseq -i 'pp}1' -n "$N" -T 0 --json
l=$(wait_line 'RX ' 120)
rx_json=${l#*rc=0 }
check pipe-to-guest "$([ "$(json "$rx_json" packets)" = "$N" ] && [ "$(json "$rx_json" gaps)" = 0 ] && echo 0 || echo 1)" "${l:0:300}"
guest_rx_pps=$(json "$rx_json" pps)

l=$(wait_line IDLE 60)
busy=$(sed -n 's/.*busy=\([0-9]*\).*/\1/p' <<<"$l"); idle=$(sed -n 's/.*idle=\([0-9]*\).*/\1/p' <<<"$l")
check guest-idle "$([ -n "$busy" ] && [ $((busy * 10)) -le $((busy + idle)) ] && [[ $l == *" header=1 alive=1"* ]] && echo 0 || echo 1)" \
    "$l (CPU ticks over 3 s with a receiver blocked: it had opened its port and was still running)"

wait_line PONG-READY 60 >/dev/null
ping=$(rs pkt-gen -f ping -i vale0:h2 -n 100 -T 0 --json --duration 60 2>"$RUN/ping.err" | tail -n 1 || true)
l=$(wait_line 'PONG ' 60)
check ping-pong "$([ "$(json "$ping" lost)" = 0 ] && [ "$(json "$ping" packets)" = 100 ] && echo 0 || echo 1)" \
    "host ping: ${ping:0:300} | guest: ${l:0:120}"

l=$(wait_line RELOAD 60)
check reload "$([[ $l == *"rmmod=0 insmod=0 tx=0"* ]] && echo 0 || echo 1)" "${l:0:200}"
nm=$(rs pkt-gen -f rx -i 'pp}1' -n 1000 -T 0 --json --duration 60 2>"$RUN/nm-rx.err" | tail -n 1 || true)
l=$(wait_line NETMAP 60)
check netmap-program-in-guest "$([ "$(json "$nm" packets)" = 1000 ] && [[ $l == *"rc=0"* ]] && echo 0 || echo 1)" \
    "guest: ${l:0:120} | host rx: ${nm:0:120}"
wait_line END 30 >/dev/null

# ---- a daemon restart: the first guest is gone; a new daemon replays the
# configuration (vale0:g1 and pp{1 come back on their sockets, with new
# memory) and new QEMUs attach to it: guest a below uses vale0:g1 again.
wait_line END 30 >/dev/null
old_daemon=$(pgrep -f "^($BIN serve|${BIN}d) --socket $SOCK" | head -n 1 || true)
[ -n "$old_daemon" ] && kill -TERM "$old_daemon"
old_gone() { ! kill -0 "$old_daemon" 2>/dev/null; }
[ -z "$old_daemon" ] || wait_for 60 old_gone || true
spawn "$RUN/daemon2.log" env RINGSWITCH_LOG=info "$BIN" serve --socket "$SOCK" --config "$RUN/config.json"
wait_for 60 daemon_up || true
back=$(rs ctl port list --json | python3 -c 'import json,sys; print(" ".join(sorted(p["name"] for p in json.load(sys.stdin) if p.get("passthrough"))))')
check daemon-restart "$([ "$back" = "pp{1 vale0:g1" ] && echo 0 || echo 1)" "passthrough ports after the restart: $back"

# ---- two guests: a passthrough pipe between them, and two switch ports ----
rs ctl port add vale0:g2 --passthrough "$RUN/g2.sock"
rs ctl port add 'pp{2' --passthrough "$RUN/pa.sock"
rs ctl port add 'pp}2' --passthrough "$RUN/pb.sock"
# Counter(s) "$@" of vale0:g1 (0 if the daemon does not answer).
g1_sum() {
    local v
    v=$(port_sum vale0:g1 "$@")
    echo "${v:-0}"
}
G1_RX0=$(g1_sum rx_packets)
G1_DROP0=$(g1_sum drop_rx_full)
# Guest a's second serial port (ttyS1): the host writes a line on it to end
# a's switch receiver. Held open here read-write, so that neither this
# script nor QEMU ever blocks opening the FIFO.
mkfifo "$RUN/ctl-a.in" "$RUN/ctl-a.out"
exec {CTL_A}<>"$RUN/ctl-a.in"
for role in a b; do
    sw=$([ $role = a ] && echo g1 || echo g2)
    ctl=()
    [ $role = b ] || ctl=(-serial "pipe:$RUN/ctl-a")
    spawn "$RUN/qemu-$role.log" qemu-system-x86_64 -accel tcg -m 256 -display none -nodefaults \
        -no-user-config -no-reboot -serial "file:$RUN/guest-$role.log" "${ctl[@]}" \
        -kernel "$KERNEL" -initrd "$RUN/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 rs_n=$N rs_role=$role" \
        -chardev "socket,id=sw,path=$RUN/$sw.sock" -device ivshmem-doorbell,chardev=sw,vectors=1 \
        -chardev "socket,id=pp,path=$RUN/p$role.sock" -device ivshmem-doorbell,chardev=pp,vectors=1
done
gline() { grep -a $'\r$' "$RUN/guest-$1.log" 2>/dev/null | tr -d '\r' | grep -a -o "RS-E2E-$2.*" | tail -n 1 || true; }
gwait() {
    local t=$((SECONDS + $3)) l
    while [ $SECONDS -lt $t ]; do
        l=$(gline "$1" "$2")
        [ -n "$l" ] && { echo "$l"; return 0; }
        sleep 0.3
    done
    return 0
}
la=$(gwait a A-PIPE-TX 150); lb=$(gwait b B-PIPE-RX 150)
rxj=${lb#*rc=0 }
check guest-to-guest-pipe "$([ "$(json "$rxj" packets)" = "$N" ] && [ "$(json "$rxj" gaps)" = 0 ] && echo 0 || echo 1)" \
    "a: ${la:0:110} | b: ${lb:0:200}"
pipe2_pps=$(json "$rxj" pps)
lb=$(gwait b B-SWITCH-TX 150)
# b's sender is done: the switch took its last frame, so it has delivered
# (published to vale0:g1) or dropped and counted each one. Once the counters
# say so for all N, a's receiver is told to stop: it takes what already
# arrived and reports. It is told anyway after the deadline (a failure).
g1_accounted() { [ $(($(g1_sum rx_packets drop_rx_full) - G1_RX0 - G1_DROP0)) -ge "$N" ]; }
[ -z "$lb" ] || wait_for 120 g1_accounted || true
g1_rx=$(($(g1_sum rx_packets) - G1_RX0))
g1_dropped=$(($(g1_sum drop_rx_full) - G1_DROP0))
echo stop >&"$CTL_A"
la=$(gwait a "A-SWITCH-RX " 60)
sent=$(json "${lb#*rc=0 }" packets)
aj=${la#*rc=0 host=stop }
got=$(json "$aj" packets)
gaps=$(json "$aj" gaps)
# The switch copies between the guests; a full ring drops and counts, so
# delivered + dropped at vale0:g1 must be what b sent; a read every
# delivered frame, in order, and every gap it saw is a counted drop.
ok=1
[ "$sent" = "$N" ] && [ $((g1_rx + g1_dropped)) = "$N" ] && [ -n "$got" ] && [ "$got" -gt 0 ] &&
    [ "$got" = "$g1_rx" ] && [ -n "$gaps" ] && [ "$gaps" -le "$g1_dropped" ] &&
    [ "$(json "$aj" reordered)" = 0 ] && ok=0
check guest-to-guest-switch "$ok" \
    "b sent $sent; vale0:g1 delivered $g1_rx and dropped $g1_dropped (its ring full); a received $got: ${la:0:300}"

echo "guest txseq through the switch: ${guest_tx_pps:-?} pps; guest rxseq from a pipe: ${guest_rx_pps:-?} pps; guest to guest over a pipe: ${pipe2_pps:-?} pps (TCG: only ratios mean anything)"
dpid=$(pgrep -f "^($BIN serve|${BIN}d) --socket $SOCK" | head -n 1 || true)
if [ -n "$dpid" ]; then
    ticks=$(awk '{print $14 + $15}' "/proc/$dpid/stat")
    switched=$(rs ctl stats --json | python3 -c 'import json,sys; print(sum(p["tx_packets"] for p in json.load(sys.stdin) if p["name"].startswith("vale")))')
    echo "daemon CPU: $ticks ticks ($(getconf CLK_TCK)/s) for $switched frames taken from switch ports (pipes cost the daemon nothing: no thread in between)"
fi
finish
