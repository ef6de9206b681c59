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
#   sudo bench/passthrough.sh [--secs N]     (default 5 s per path)
#
# Writes bench/results/PASSTHROUGH-REPORT.md and prints it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=5
[ "${1:-}" = --secs ] && SECS=$2
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
spawn() {
    local log=$1
    shift
    setsid timeout -k 5 300 "$@" </dev/null >"$log" 2>&1 &
    PIDS+=("$!")
}
SOCK=$RUN/rs.sock
spawn "$RUN/daemon.log" env RINGSWITCH_LOG=warn "$BIN" serve --socket "$SOCK"
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
rs() { "$BIN" --socket "$SOCK" "$@"; }
rs ctl port add vale0:g1 --passthrough "$RUN/g1.sock"
rs ctl port add vale0:vm --vhost-user "$RUN/vm.sock"
spawn "$RUN/host-rx.log" "$BIN" --socket "$SOCK" pkt-gen -f rx -i vale0:h -T 0 --duration 280
spawn "$RUN/qemu.log" qemu-system-x86_64 -accel tcg -m 256 -display none -nodefaults \
    -no-user-config -no-reboot -serial "file:$RUN/guest.log" \
    -kernel "$KERNEL" -initrd "$INITRD" \
    -append "console=ttyS0 quiet panic=-1 rs_role=bench rs_secs=$SECS" \
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
dpid=$(pgrep -f "^$BIN serve --socket $SOCK" | head -n 1)
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
read -r pt_frames pt_ticks < <(measure PT)
read -r vu_frames vu_ticks < <(measure VU)
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
    echo "Command: \`sudo bench/passthrough.sh --secs $SECS\`: the guest's \`ringswitch pkt-gen -f tx\` (60-byte frames) for $SECS s on each path; the host counts what reaches \`pkt-gen -f rx\` on vale0:h."
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
