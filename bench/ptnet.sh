#!/usr/bin/env bash
# bench/ptnet.sh - the guest kernel's own TCP/IP over ptnet beside the same
# over virtio-net, in the same two QEMU TCG guests on one switch of the
# host's daemon (issue 18's Performance):
#   ptnet       a ptnet interface in each guest: guest/ringswitch_pt with
#               ptnet=1 on a passthrough port (the guest drives the port's
#               rings), no offloads;
#   ptnet+offloads  the same on a `--vnet-hdr` passthrough port: checksum
#               and TSO offloads in a virtio-net header before each frame;
#   virtio-net  eth0 in each guest: virtio-net on a vhost-user port
#               (ringswitch is the virtio device).
# Phases, each path in turn, R rounds: TCP guest to guest (guest a fetches
# an M MiB file from guest b's busybox httpd with wget), TCP guest to host
# (the host, on a TAP host port in a network namespace, fetches the file
# from b), and small UDP datagrams from a's socket layer (tests/pt/udpblast,
# 60-byte frames, for S seconds; counted where the switch takes them from
# a's port). For each: the rate, and the host daemon's CPU time per byte or
# per frame. TCG emulates the guests' CPUs, so only the ratios carry over
# to KVM; the daemon's CPU is host time and is real.
#
#   sudo bench/ptnet.sh [--mib M] [--secs S] [--reps R] [--no-report]
#
# Defaults: --mib 64, --secs 5, --reps 3. Writes
# bench/results/PTNET-REPORT.md (medians over the rounds) unless
# --no-report, and prints it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MIB=64 SECS=5 REPS=3 REPORT=1
while [ $# -gt 0 ]; do
    case $1 in
    --mib) MIB=${2:?--mib needs a value}; shift ;;
    --secs) SECS=${2:?--secs needs a value}; shift ;;
    --reps) REPS=${2:?--reps needs a value}; shift ;;
    --no-report) REPORT=0 ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "ptnet.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
case $MIB$SECS$REPS in *[!0-9]*) echo "ptnet.sh: --mib, --secs and --reps want whole numbers" >&2; exit 2 ;; esac
[ "$MIB" -ge 1 ] && [ "$MIB" -le 128 ] && [ "$SECS" -ge 1 ] && [ "$REPS" -ge 1 ] && [ "$REPS" -le 9 ] ||
    { echo "ptnet.sh: --mib within 1..128, --secs at least 1, --reps within 1..9" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "ptnet.sh: run as root (QEMU, a network namespace)" >&2; exit 2; }
cargo build --release -q -p ringswitch-cli
BIN=$ROOT/target/release/ringswitch
RUN=$(mktemp -d /tmp/rs-bench-ptnet.XXXXXX)
echo "building the guest initramfs (tests/pt/ptnet.sh --build-only)" >&2
read -r INITRD KERNEL < <(RS_PT_OUT=$RUN/build RINGSWITCH_BIN=$BIN "$ROOT/tests/pt/ptnet.sh" --build-only | tail -n 1)
NS=rsbptnet$$
# shellcheck source=tests/pt/lib.sh
. "$ROOT/tests/pt/lib.sh"
cleanup() {
    stop_spawned
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT
LIFE=$((300 + REPS * (4 * SECS + 4 * MIB + 120)))
SOCK=$RUN/rs.sock
rs() { "$BIN" --socket "$SOCK" "$@"; }
spawn "$RUN/daemon.log" env RINGSWITCH_LOG=warn "$BIN" serve --socket "$SOCK"
daemon_up() { rs ctl port list >/dev/null 2>&1; }
wait_for 60 daemon_up || { echo "ptnet.sh: the daemon did not start: $(cat "$RUN/daemon.log")" >&2; exit 1; }
for g in a b; do
    rs ctl port add "vale0:p$g" --passthrough "$RUN/p$g.sock"
    rs ctl port add "vale0:o$g" --passthrough "$RUN/o$g.sock" --vnet-hdr
    rs ctl port add "vale0:v$g" --vhost-user "$RUN/v$g.sock"
done
TAP=rsbtap$$
TAP=${TAP:0:15}
rs ctl attach vale0 --host "$TAP" >/dev/null
ip netns add "$NS"
ip link set "$TAP" netns "$NS"
ip -n "$NS" addr add 10.0.0.9/24 dev "$TAP"
ip -n "$NS" addr add 10.0.1.9/24 dev "$TAP"
ip -n "$NS" addr add 10.0.2.9/24 dev "$TAP"
ip -n "$NS" link set "$TAP" up
# (The guests answer ARP only on the interface that has the address.)
boot() { # NAME HOST-BYTE MAC-BYTE ARGS
    spawn "$RUN/qemu-$1.log" qemu-system-x86_64 -accel tcg -m 512 -display none -nodefaults \
        -no-user-config -no-reboot -serial "file:$RUN/guest-$1.log" \
        -kernel "$KERNEL" -initrd "$INITRD" \
        -append "console=ttyS0 quiet panic=-1 rs_ip=$2 rs_mib=$MIB rs_secs=$SECS rs_reps=$REPS $4" \
        -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
        -chardev "socket,id=pt,path=$RUN/p$1.sock" -device ivshmem-doorbell,chardev=pt,vectors=1 \
        -chardev "socket,id=po,path=$RUN/o$1.sock" -device ivshmem-doorbell,chardev=po,vectors=1 \
        -chardev "socket,id=vu,path=$RUN/v$1.sock,reconnect=1" -netdev vhost-user,id=n0,chardev=vu \
        -device "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:$3,romfile=,vectors=0"
}
boot b 2 0b rs_role=bench-server
line() { grep -a $'\r$' "$RUN/guest-$1.log" 2>/dev/null | tr -d '\r' | grep -a -o "RS-PTNET-$2.*" | tail -n 1 || true; }
wait_line() { # GUEST MARKER SECONDS
    local t=$((SECONDS + $3))
    while [ $SECONDS -lt $t ]; do
        [ -n "$(line "$1" "$2")" ] && { line "$1" "$2"; return 0; }
        sleep 0.1
    done
    echo "ptnet.sh: no RS-PTNET-$2 from guest $1 in $3 s (logs: $RUN, kept)" >&2
    trap - EXIT
    cleanup_keep
    exit 1
}
cleanup_keep() {
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true
}
wait_line b BENCH-SERVING 180 >/dev/null
boot a 1 0a "rs_role=bench-client rs_peer=2"
dpid=$(pgrep -f "^($BIN serve|${BIN}d) --socket $SOCK" | head -n 1)
ticks() { awk '{print $14 + $15}' "/proc/$dpid/stat"; }
taken() { rs ctl stats --json | python3 -c 'import json,sys; print(sum(p["tx_packets"] for p in json.load(sys.stdin) if p["name"]==sys.argv[1]))' "$1"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
wait_line a BENCH-READY 300 >/dev/null
OUTS=$RUN/figures.tsv
: >"$OUTS"
for ((r = 1; r <= REPS; r++)); do
    for p in pt vu po; do
        wait_line a "BENCH-TCP-$p$r-START" 300 >/dev/null
        t0=$(ticks)
        l=$(wait_line a "BENCH-TCP-$p$r-END" $((60 + 4 * MIB)))
        t1=$(ticks)
        echo "tcp-guest $p $r $(field bytes "$l") $(field secs "$l") $((t1 - t0))" >>"$OUTS"
    done
    for p in pt vu po; do
        port=vale0:pa
        [ $p != vu ] || port=vale0:va
        [ $p != po ] || port=vale0:oa
        wait_line a "BENCH-UDP-$p$r-START" 300 >/dev/null
        t0=$(ticks) f0=$(taken $port)
        l=$(wait_line a "BENCH-UDP-$p$r-END" $((60 + SECS)))
        t1=$(ticks) f1=$(taken $port)
        echo "udp $p $r $((f1 - f0)) $(awk '{print $6}' <<<"${l#*END }") $((t1 - t0)) $(awk '{print $2}' <<<"${l#*END }")" >>"$OUTS"
    done
    echo "round $r of $REPS: guest phases done" >&2
done
wait_line a BENCH-END 120 >/dev/null
# The host's stack fetches the file from b over each path (b's two addresses).
for ((r = 1; r <= REPS; r++)); do
    for p in pt:0 vu:1 po:2; do
        t0=$(ticks)
        out=$(ip netns exec "$NS" python3 -c '
import sys, time, urllib.request
t = time.monotonic()
d = urllib.request.urlopen(sys.argv[1], timeout=600).read()
print(len(d), round(time.monotonic() - t, 3))' "http://10.0.${p#*:}.2/f")
        t1=$(ticks)
        echo "tcp-host ${p%:*} $r $out $((t1 - t0))" >>"$OUTS"
    done
done
cp "$OUTS" "$ROOT/target/ptnet-figures.tsv" 2>/dev/null || true
[ "$REPORT" = 1 ] || { cat "$OUTS"; exit 0; }
hz=$(getconf CLK_TCK)
mkdir -p "$ROOT/bench/results"
python3 - "$OUTS" "$hz" "$MIB" "$SECS" "$REPS" "$(nproc)" "$(uname -r)" \
    "$(qemu-system-x86_64 --version | head -n 1 | awk '{print $4}')" "${KERNEL#/boot/vmlinuz-}" <<'EOF' | tee "$ROOT/bench/results/PTNET-REPORT.md"
import statistics, sys, time
path, hz, mib, secs, reps, cores, kernel, qemu, gkernel = sys.argv[1:]
hz = int(hz)
rows = [l.split() for l in open(path) if l.strip()]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
def tcp(kind, p):
    rs = [r for r in rows if r[0] == kind and r[1] == p]
    mbit = [int(r[3]) * 8 / float(r[4]) / 1e6 for r in rs if float(r[4]) > 0]
    ns_b = [int(r[5]) / hz * 1e9 / int(r[3]) for r in rs if int(r[3]) > 0]
    return med(mbit), med(ns_b), [round(x) for x in mbit], all(int(r[3]) == int(mib) << 20 for r in rs)
def udp(p):
    rs = [r for r in rows if r[0] == "udp" and r[1] == p]
    # (kind, path, round, frames the switch took, udpblast's seconds, daemon ticks, udpblast's sends)
    pps = [int(r[3]) / float(r[4]) for r in rs if float(r[4]) > 0]
    ns_f = [int(r[5]) / hz * 1e9 / int(r[3]) for r in rs if int(r[3]) > 0]
    sent = [float(r[6]) for r in rs]
    return med(pps), med(ns_f), [round(x) for x in pps], med(sent)
print("# ptnet beside virtio-net: the guest kernel's TCP/IP, two TCG guests")
print()
print(f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {cores} cores, {kernel}, QEMU {qemu}, guest kernel {gkernel}, TCG, the machine as it boots (no tuning).")
print(f"Command: `sudo bench/ptnet.sh --mib {mib} --secs {secs} --reps {reps}`: the same two guests have a ptnet interface on a plain passthrough port, one on a `--vnet-hdr` passthrough port (checksum and TSO offloads in a virtio-net header), and eth0 (virtio-net on a vhost-user port with its offloads), all on one switch; each phase runs on each path in turn, {reps} round(s). Medians over the rounds (each round's figure in brackets).")
print()
print("| phase | ptnet | ptnet + offloads | virtio-net | ptnet ÷ virtio-net | ptnet + offloads ÷ virtio-net | daemon CPU: ptnet / + offloads / virtio-net |")
print("|---|---:|---:|---:|---:|---:|---:|")
for kind, name in (("tcp-guest", f"TCP guest → guest, {mib} MiB (wget from httpd)"), ("tcp-host", f"TCP guest → host (TAP host port), {mib} MiB")):
    a, o, b = tcp(kind, "pt"), tcp(kind, "po"), tcp(kind, "vu")
    print(f"| {name} | {a[0]:.0f} Mbit/s {a[2]} | {o[0]:.0f} Mbit/s {o[2]} | {b[0]:.0f} Mbit/s {b[2]} | **{a[0] / b[0]:.2f}** | **{o[0] / b[0]:.2f}** | {a[1]:.2f} / {o[1]:.2f} / {b[1]:.2f} ns/byte |")
    if not (a[3] and b[3] and o[3]):
        print(f"|  (a transfer of {kind} came short: see the raw figures) | | | | | | |")
a, o, b = udp("pt"), udp("po"), udp("vu")
print(f"| UDP, 18-byte payload (60-byte frames) from a's sockets, {secs} s | {a[0]:.0f} frames/s {a[2]} | {o[0]:.0f} frames/s {o[2]} | {b[0]:.0f} frames/s {b[2]} | **{a[0] / b[0]:.2f}** | **{o[0] / b[0]:.2f}** | {a[1]:.0f} / {o[1]:.0f} / {b[1]:.0f} ns/frame |")
print()
print("TCG emulates the guests' CPUs: the guests' own work sets these rates, so absolute figures are far below KVM's and only the ratios carry over. The daemon's CPU time is host time, real, and counted over each whole phase (a second of idle on each side included, which costs the daemon nothing measurable).")
print(f"UDP frames are counted where the switch takes them from a's port; udpblast's own count of sends the kernel accepted, median: ptnet {a[3]:.0f}, ptnet + offloads {o[3]:.0f}, virtio-net {b[3]:.0f}.")
EOF
