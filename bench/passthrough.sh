#!/usr/bin/env bash
# bench/passthrough.sh - one QEMU TCG guest, the same `ringswitch pkt-gen`
# in it, two ways out to the host's switch:
#   passthrough  the guest drives the rings of port vale0:g1 itself
#                (ivshmem-doorbell + guest/ringswitch_pt);
#   vhost-user   a ringswitch inside the guest attaches its virtio-net NIC
#                (AF_PACKET) and pkt-gen sends through it, to the host's
#                vhost-user port vale0:vm (ringswitch is the virtio device).
# For each: frames the host's receiver got per second, and the host
# daemon's CPU time per frame. TCG hides absolute speed: the ratio is the
# figure; real KVM is needed to confirm absolute rates.
#
#   sudo bench/passthrough.sh [--secs N] [--reps R] [--tsv FILE] [--no-report]
#
# --secs: seconds per path and round (default 5); --reps: rounds, the two
# paths alternating (default 1); --tsv: also write one line per path and
# round, "pt|vu ROUND FRAMES DAEMON_TICKS SECONDS" (bench/compare reads it);
# --no-report: leave bench/results/PASSTHROUGH-REPORT.md alone. Without it,
# writes that report (the sums over all rounds) and prints it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=5 REPS=1 TSV='' REPORT=1
while [ $# -gt 0 ]; do
    case $1 in
    --secs) SECS=${2:?--secs needs a value}; shift ;;
    --reps) REPS=${2:?--reps needs a value}; shift ;;
    --tsv) TSV=${2:?--tsv needs a file}; shift ;;
    --no-report) REPORT=0 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "passthrough.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
case $SECS$REPS in *[!0-9]*) echo "passthrough.sh: --secs and --reps want whole numbers" >&2; exit 2 ;; esac
[ "$SECS" -ge 1 ] && [ "$REPS" -ge 1 ] && [ "$REPS" -le 9 ] || { echo "passthrough.sh: --secs must be at least 1 and --reps within 1..9" >&2; exit 2; }
cargo build --release -q -p ringswitch-cli -p ringswitch-netmap
BIN=$ROOT/target/release/ringswitch
read -r INITRD KERNEL < <(RINGSWITCH_BIN=$BIN "$ROOT/tests/pt/e2e.sh" --build-only | tail -n 1)
RUN=$(mktemp -d /tmp/rs-bench-pt.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT
LIFE=$((240 + REPS * (2 * SECS + 60)))
spawn() {
    local log=$1
    shift
    setsid timeout -k 5 "$LIFE" "$@" </dev/null >"$log" 2>&1 &
    PIDS+=("$!")
}
SOCK=$RUN/rs.sock
spawn "$RUN/daemon.log" env RINGSWITCH_LOG=warn "$BIN" serve --socket "$SOCK"
rs() { "$BIN" --socket "$SOCK" "$@"; }
# Runs "${@:2}" until it succeeds, for at most $1 seconds; fails if it never did.
wait_for() {
    local t=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $t ] || return 1
        sleep 0.1
    done
}
daemon_up() { rs ctl port list >/dev/null 2>&1; }
wait_for 60 daemon_up || { echo "passthrough.sh: the daemon did not start: $(cat "$RUN/daemon.log")" >&2; exit 1; }
rs ctl port add vale0:g1 --passthrough "$RUN/g1.sock"
rs ctl port add vale0:vm --vhost-user "$RUN/vm.sock"
spawn "$RUN/host-rx.log" "$BIN" --socket "$SOCK" pkt-gen -f rx -i vale0:h -T 0 --duration $((LIFE - 20))
# The host's receiver has its port open before the guest sends.
h_open() { rs ctl port list --json 2>/dev/null | python3 -c 'import json,sys; sys.exit(not any(p["name"] == "vale0:h" and p["open"] for p in json.load(sys.stdin)))'; }
wait_for 60 h_open || { echo "passthrough.sh: the host's receiver did not open vale0:h: $(cat "$RUN/host-rx.log")" >&2; exit 1; }
spawn "$RUN/qemu.log" qemu-system-x86_64 -accel tcg -m 256 -display none -nodefaults \
    -no-user-config -no-reboot -serial "file:$RUN/guest.log" \
    -kernel "$KERNEL" -initrd "$INITRD" \
    -append "console=ttyS0 quiet panic=-1 rs_role=bench rs_secs=$SECS rs_reps=$REPS" \
    -object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem \
    -chardev "socket,id=g1,path=$RUN/g1.sock" -device ivshmem-doorbell,chardev=g1,vectors=1 \
    -chardev "socket,id=c0,path=$RUN/vm.sock,reconnect=1" -netdev vhost-user,id=n0,chardev=c0 \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01,romfile=,vectors=0
line() { grep -a $'\r$' "$RUN/guest.log" 2>/dev/null | tr -d '\r' | grep -a -o "RS-E2E-$1.*" | tail -n 1 || true; }
wait_line() {
    local t=$((SECONDS + $2))
    while [ $SECONDS -lt $t ]; do
        [ -n "$(line "$1")" ] && { line "$1"; return 0; }
        sleep 0.1
    done
    echo "RS-E2E-$1 (timed out)" >&2
    return 1
}
dpid=$(pgrep -f "^($BIN serve|${BIN}d) --socket $SOCK" | head -n 1)
ticks() { awk '{print $14 + $15}' "/proc/$dpid/stat"; }
got() { rs ctl stats --json | python3 -c 'import json,sys; print(sum(p["rx_packets"] for p in json.load(sys.stdin) if p["name"]=="vale0:h"))'; }
measure() { # PHASE: prints "frames ticks"
    wait_line "BENCH-$1-START" 120 >/dev/null
    local f0 t0
    f0=$(got); t0=$(ticks)
    wait_line "BENCH-$1-END" $((SECS + 120)) >/dev/null
    sleep 0.5
    echo "$(($(got) - f0)) $(($(ticks) - t0))"
}
wait_line BENCH-READY 120 >/dev/null
pt_frames=0 pt_ticks=0 vu_frames=0 vu_ticks=0
[ -z "$TSV" ] || : >"$TSV"
for ((i = 1; i <= REPS; i++)); do
    read -r f t < <(measure "PT$i")
    pt_frames=$((pt_frames + f)) pt_ticks=$((pt_ticks + t))
    [ -z "$TSV" ] || echo "pt $i $f $t $SECS" >>"$TSV"
    read -r f t < <(measure "VU$i")
    vu_frames=$((vu_frames + f)) vu_ticks=$((vu_ticks + t))
    [ -z "$TSV" ] || echo "vu $i $f $t $SECS" >>"$TSV"
    echo "round $i: passthrough $((pt_frames)) frames so far, vhost-user $((vu_frames))" >&2
done
[ "$REPORT" = 1 ] || exit 0
PER=$SECS
SECS=$((SECS * REPS)) # the report sums every round
attach=$(line BENCH-ATTACH)
hz=$(getconf CLK_TCK)
row() { # name frames ticks
    python3 -c 'import sys; n,f,t,s,hz=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),float(sys.argv[4]),int(sys.argv[5]); print("| %s | %d | %.3f | %s |" % (n, f, f/s/1e6, ("%.0f" % (t/hz*1e9/f)) if f else "-"))' "$@" "$SECS" "$hz"
}
ratio=$(python3 -c "import sys; a,b=int(sys.argv[1]),int(sys.argv[2]); print('%.1f' % (a/b) if b else 'inf')" "$pt_frames" "$vu_frames")
mkdir -p "$ROOT/bench/results"
{
    echo "# Passthrough vs vhost-user, one TCG guest"
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, $(uname -r), QEMU $(qemu-system-x86_64 --version | head -n 1 | awk '{print $4}'), guest kernel ${KERNEL#/boot/vmlinuz-}, TCG."
    echo "Command: \`sudo bench/passthrough.sh --secs $PER --reps $REPS\`: the guest's \`ringswitch pkt-gen -f tx\` (60-byte frames) for $PER s on each path, $REPS round(s), alternating; the host counts what reaches \`pkt-gen -f rx\` on vale0:h."
    echo
    echo "| path | frames at the host | Mpps | host daemon CPU ns/frame |"
    echo "|---|---:|---:|---:|"
    row "passthrough (vale0:g1, ivshmem)" "$pt_frames" "$pt_ticks"
    row "vhost-user (guest ringswitch + AF_PACKET on virtio-net -> vale0:vm)" "$vu_frames" "$vu_ticks"
    echo
    echo "Passthrough moves **${ratio}x** the frames of the virtio-net path from the same guest."
    echo "TCG emulates the guest's CPU, so absolute rates are far below KVM's and only the ratio carries over; the daemon's CPU per frame is host time and is real."
    echo "(guest attach: ${attach:0:120})"
} | tee "$ROOT/bench/results/PASSTHROUGH-REPORT.md"
