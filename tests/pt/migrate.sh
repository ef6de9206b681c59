#!/usr/bin/env bash
# Passthrough migration (issue 19): a TCG guest runs the unmodified
# `ringswitch pkt-gen -f rxseq` on the migratable passthrough switch port
# vale0:m1 (`ctl port add ... --migratable`, QEMU's ivshmem-doorbell with
# master=on) while a host `pkt-gen -f txseq` sends to it through the switch
# at a fixed rate; the guest moves to a second QEMU (-incoming) whose device
# is on vale0:m2 of the same daemon, paused for the move as tests/vm does
# (QMP stop, migrate, cont: QEMU 7.2 under TCG loses pages in live moves,
# docs/migration.md). The destination port adopts the region QEMU copied
# once the guest answers from the destination, and the receiver goes on.
#
#   sudo tests/pt/migrate.sh [--ptnet]   (exit 0 only if every check passed)
#
# With --ptnet the guest's receiver is the driver's network interface
# (ptnet=1) instead of pkt-gen: it counts what it receives across the move.
#
# Environment: RS_PT_OUT (logs; default target/pt, this run in
# $RS_PT_OUT/migrate), RS_PT_MIG_RATE (frames per second the host sends,
# default 2000), RS_PT_MIG_AFTER (frames vale0:m2 must deliver after the
# move before the sender stops, default 4000), RS_PT_INITRAMFS (as e2e.sh),
# RS_PT_MIG_LIVE=1 (move the guest while it runs: an experiment, not safe
# with traffic, docs/migration.md).
#
# Checks: QEMU refuses master=on on a port without --migratable, with its
# reason; --config keeps the ports migratable; QEMU migrates the guest (no
# blocker) and the destination port adopts the memory (the daemon logs it)
# with nothing to reset; vale0:m2 delivers frames after the move; the
# guest's receiver, read out after the move, got frames from both ports, in
# order (no frame out of order), and every frame it missed is one sent
# while it could not run (reported as `loss`: frames and their time at the
# send rate, beside QEMU's downtime). With --ptnet: ptnet0 counted more
# frames than vale0:m2 delivered and no more than both ports did, and has
# its carrier after the move.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${RS_PT_OUT:-$ROOT/target/pt}
RUN=$OUT/migrate
BIN=${RINGSWITCH_BIN:-$ROOT/target/release/ringswitch}
RATE=${RS_PT_MIG_RATE:-2000}
AFTER=${RS_PT_MIG_AFTER:-4000}
MAX_LIFE=400
ROLE=mig
READY=RS-E2E-MIG-RX-READY
if [ "${1:-}" = --ptnet ]; then
    ROLE=migptnet
    READY=RS-E2E-MIG-PTNET-READY
fi
note() { printf '[pt-migrate] %s\n' "$*" >&2; }
die() { note "ERROR: $*"; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root"
[ -x "$BIN" ] || die "no ringswitch binary at $BIN (cargo build --release -p ringswitch-cli)"

rm -rf "$RUN"
mkdir -p "$RUN"
# The guest: kernel, driver and pkt-gen, built as e2e.sh builds them.
read -r INITRAMFS KERNEL < <(RS_PT_OUT="$RUN/build" "$HERE/e2e.sh" --build-only | tail -n 1)
if [ ! -f "$INITRAMFS" ] || [ ! -f "$KERNEL" ]; then die "e2e.sh --build-only gave no guest"; fi

# spawn, stop_spawned, wait_for (each spawned process lives LIFE seconds
# at most).
LIFE=$MAX_LIFE
# shellcheck source=tests/pt/lib.sh
. "$HERE/lib.sh"
cleanup() {
    local rc=$?
    set +e
    stop_spawned
    exit "$rc"
}
trap cleanup EXIT
fails=0
check() {
    if [ "$2" = 0 ]; then
        note "PASS $1: $3"
    else
        note "FAIL $1: $3"
        fails=$((fails + 1))
    fi
}
SOCK=$RUN/rs.sock
rs() { "$BIN" --socket "$SOCK" "$@"; }
daemon_up() { rs ctl port list >/dev/null 2>&1; }
# stat PORT FIELD...: the sum of those counters of PORT.
stat() {
    rs ctl stats --json 2>/dev/null | python3 -c 'import json,sys; n=sys.argv[1]; print(sum(s.get(f, 0) for s in json.load(sys.stdin) if s["name"] == n for f in sys.argv[2:]))' "$@" 2>/dev/null || echo 0
}
at_least() { [ "$(stat "$1" "$2")" -ge "$3" ]; }
json() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ""))' "$1" "$2" 2>/dev/null || true; }
seen() { grep -q -- "$2" "$1" 2>/dev/null; }

spawn "$RUN/daemon.log" env RINGSWITCH_LOG=info "$BIN" serve --socket "$SOCK" --config "$RUN/config.json"
wait_for 60 daemon_up || die "the daemon did not start: $(cat "$RUN/daemon.log")"
rs ctl port add vale0:m1 --passthrough "$RUN/m1.sock" --migratable
rs ctl port add vale0:m2 --passthrough "$RUN/m2.sock" --migratable
# A port without --migratable keeps the guest at peer 1: QEMU refuses
# master=on there, saying why (and blocks the migration of its peer mode:
# tests/pt/ptnet.sh, migration-blocked).
rs ctl port add vale0:plain --passthrough "$RUN/plain.sock"
plain=$(timeout 60 qemu-system-x86_64 -accel tcg -m 64 -display none -nodefaults -no-user-config -S \
    -chardev "socket,id=p,path=$RUN/plain.sock" -device ivshmem-doorbell,chardev=p,vectors=1,master=on 2>&1) &&
    prc=0 || prc=$?
check master-refused-elsewhere "$([ "$prc" != 0 ] && grep -q "master must connect" <<<"$plain" && echo 0 || echo 1)" \
    "QEMU with master=on on a port without --migratable: ${plain:0:200}"
kept=$(python3 -c 'import json,sys; print(sum(1 for r in json.load(open(sys.argv[1]))["requests"] if r.get("migratable")))' "$RUN/config.json" 2>/dev/null || echo 0)
check config-keeps-migratable "$([ "$kept" = 2 ] && echo 0 || echo 1)" "$kept of 2 migratable ports in --config"

# qemu ROLE SOCK [ARGS...]: a guest whose ivshmem device is on SOCK, its
# console in guest-ROLE.log, its ttyS1 the FIFOs ctl-ROLE.in/.out.
qemu() {
    local role=$1 sock=$2
    shift 2
    mkfifo "$RUN/ctl-$role.in" "$RUN/ctl-$role.out"
    spawn "$RUN/qemu-$role.log" qemu-system-x86_64 -accel tcg -m 256 -display none -nodefaults \
        -no-user-config -no-reboot -serial "file:$RUN/guest-$role.log" -serial "pipe:$RUN/ctl-$role" \
        -kernel "$KERNEL" -initrd "$INITRAMFS" \
        -append "console=ttyS0 quiet panic=-1 rs_role=$ROLE" \
        -chardev "socket,id=m,path=$sock" -device ivshmem-doorbell,chardev=m,vectors=1,master=on \
        -qmp "unix:$RUN/qmp-$role.sock,server=on,wait=off" "$@"
    # Drain what the guest writes on ttyS1 (nothing), so QEMU never blocks.
    spawn "$RUN/ctl-$role.drain" cat "$RUN/ctl-$role.out"
}
qemu src "$RUN/m1.sock"
wait_for 120 seen "$RUN/guest-src.log" "$READY" ||
    die "the guest's receiver did not start: $(tail -c 600 "$RUN/guest-src.log")"
note "$(grep -a "$READY" "$RUN/guest-src.log")"
wait_for 30 grep -q "adopted, the port is up" "$RUN/daemon.log" ||
    die "vale0:m1 never came up for the booted guest: $(tail -n 20 "$RUN/daemon.log")"
qemu dst "$RUN/m2.sock" -incoming "unix:$RUN/mig.sock"
wait_for 60 test -S "$RUN/qmp-dst.sock" || die "the destination QEMU did not start: $(cat "$RUN/qemu-dst.log")"

# The host sends to the guest's port until the destination has delivered
# AFTER frames (vale0:h is a ring port opened on demand).
spawn "$RUN/host-tx.log" "$BIN" --socket "$SOCK" pkt-gen -f txseq -i vale0:h -R "$RATE" -T 0 --json
tx=${PIDS[-1]}
wait_for 120 at_least vale0:m1 rx_packets $((RATE * 2)) ||
    die "vale0:m1 delivered $(stat vale0:m1 rx_packets) frames, not $((RATE * 2))"
before=$(stat vale0:m1 rx_packets)
# RS_PT_MIG_LIVE=1: the guest runs during the move (QEMU 7.2 under TCG
# also loses some of the guest's own pages then).
paused=(--paused --dest-qmp "$RUN/qmp-dst.sock")
[ "${RS_PT_MIG_LIVE:-0}" = 0 ] || paused=()
mig=$(python3 "$ROOT/tests/vm/migrate.py" --qmp "$RUN/qmp-src.sock" --uri "unix:$RUN/mig.sock" \
    "${paused[@]}" --timeout 180 2>"$RUN/migrate.err") || rc=$?
check migrated "${rc:-0}" "${mig:-$(tail -n 3 "$RUN/migrate.err")}"
[ "${rc:-0}" = 0 ] || die "no migration: $(cat "$RUN/qemu-src.log" "$RUN/qemu-dst.log" | tail -n 10)"
downtime=$(sed -n 's/.*downtime_ms=\([0-9]*\).*/\1/p' <<<"$mig")
wait_for 120 at_least vale0:m2 rx_packets "$AFTER"
check resumed-on-destination $? "vale0:m2 delivered $(stat vale0:m2 rx_packets) frames after the move (vale0:m1 had delivered $before before it)"
grep -a "the memory the guest\|the memory the guest brought\|adopted" "$RUN/daemon.log" | tail -n 3 | sed 's/^/[pt-migrate]   /' >&2
clean=$(grep -c "nothing to reset" "$RUN/daemon.log" || true)
resets=$(stat vale0:m2 ring_reinits)
check adopted-clean "$([ "$clean" -ge 2 ] && [ "$resets" = 0 ] && echo 0 || echo 1)" \
    "the daemon checked the memory of both guests' starts ($clean with nothing to reset); vale0:m2 ring_reinits $resets"

# Stop the sender with one SIGTERM (it reports what it sent), then the
# guest's receiver once everything sent is accounted for at vale0:m2.
p=$tx
while c=$(pgrep -P "$p" | head -n 1) && [ -n "$c" ]; do p=$c; done
kill -TERM "$p" 2>/dev/null || true
wait_for 30 grep -q '"packets"' "$RUN/host-tx.log" || die "the sender did not report: $(cat "$RUN/host-tx.log")"
sent=$(json "$(grep '"packets"' "$RUN/host-tx.log" | tail -n 1)" packets)
accounted() {
    local d
    d=$(stat vale0:m2 rx_packets drop_rx_full drop_link_down)
    [ "$d" -ge "$sent" ]
}
wait_for 60 accounted || note "vale0:m2 accounted for $(stat vale0:m2 rx_packets drop_rx_full drop_link_down) of $sent frames"
echo stop >"$RUN/ctl-dst.in"
m2=$(stat vale0:m2 rx_packets)
if [ "$ROLE" = migptnet ]; then
    wait_for 120 seen "$RUN/guest-dst.log" "RS-E2E-MIG-PTNET " ||
        die "the guest did not report on the destination: $(tail -c 800 "$RUN/guest-dst.log")"
    line=$(grep -a "RS-E2E-MIG-PTNET " "$RUN/guest-dst.log" | tail -n 1)
    note "guest: ${line:0:400}"
    got=$(sed -n 's/.* rx_packets=\([0-9]*\).*/\1/p' <<<"$line")
    m1=$(stat vale0:m1 rx_packets)
    # ptnet0 counts every frame it took: all of vale0:m2's, and of
    # vale0:m1's those it read before the move or found in its ring after.
    check ptnet-both-ports "$([ -n "$got" ] && [ "$got" -gt "$m2" ] && [ "$got" -le $((m1 + m2)) ] && echo 0 || echo 1)" \
        "ptnet0 received ${got:-?} frames; vale0:m1 delivered $m1 (before the move, and into the stopped source), vale0:m2 $m2 after it"
    check ptnet-carrier "$(grep -q 'carrier=1' <<<"$line" && echo 0 || echo 1)" "ptnet0's carrier after the move: ${line##*carrier=}"
    echo "RESULT ptnet migration ${mig#MIGRATE } downtime=${downtime:-?}ms sent=$sent received=${got:-?} vale0:m1=$m1 vale0:m2=$m2 lost<=$((sent - ${got:-0}))"
    [ "$fails" = 0 ] || { note "$fails check(s) failed; logs in $RUN"; exit 1; }
    note "every check passed; logs in $RUN"
    exit 0
fi
wait_for 120 seen "$RUN/guest-dst.log" RS-E2E-MIG-RX ||
    die "the guest did not report on the destination: $(tail -c 800 "$RUN/guest-dst.log")"
line=$(grep -a "RS-E2E-MIG-RX " "$RUN/guest-dst.log" | tail -n 1)
report=$(grep -o '{.*}' <<<"$line" | tail -n 1)
got=$(json "$report" packets)
gaps=$(json "$report" gaps)
reordered=$(json "$report" reordered)
note "guest: ${line:0:400}"
check in-order "$([ "${reordered:-x}" = 0 ] && echo 0 || echo 1)" "the guest's receiver saw ${reordered:-?} frames out of order"
check both-ports "$([ -n "$got" ] && [ "$got" -gt "$m2" ] && [ "$m2" -ge "$AFTER" ] && echo 0 || echo 1)" \
    "the guest received ${got:-?} frames: those of vale0:m1 before the move and the $m2 of vale0:m2 after it"
# Every frame sent is one the guest got, one it missed while it could not
# run (a gap), or one sent after the last it got (none: it read until
# vale0:m2 accounted for all).
lost_ms=$(( ${gaps:-0} * 1000 / RATE ))
check accounted "$([ -n "$got" ] && [ -n "$gaps" ] && [ $((got + gaps)) -le "$sent" ] && [ "$gaps" -lt "$sent" ] && echo 0 || echo 1)" \
    "sent $sent, received ${got:-?}, missing ${gaps:-?}"
dm=$(grep -a "RS-E2E-DMESG" "$RUN/guest-dst.log" | tail -n 2 | tr '\n' ' ')
note "guest driver: ${dm:0:300}"
echo "RESULT migration ${mig#MIGRATE } loss=${gaps:-?} frames (${lost_ms} ms at $RATE/s) downtime=${downtime:-?}ms sent=$sent received=${got:-?} after_move=$m2"
if [ "$fails" -gt 0 ]; then
    note "$fails check(s) failed; logs in $RUN"
    exit 1
fi
note "every check passed; logs in $RUN"
