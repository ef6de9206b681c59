#!/usr/bin/env bash
# ptnet end to end: QEMU TCG guests on one switch of a real
# `ringswitch serve`, talking with their kernels' own TCP/IP. Guests a and b
# are each on a passthrough port and load guest/ringswitch_pt with ptnet=1
# (their interface is ptnet0); b serves a random 16 MiB file over HTTP
# (busybox httpd). Checks: a pings b and fetches the file with a matching
# MD5 (ptnet to ptnet); the host, on a TAP host port of the switch (in a
# network namespace of its own), pings b and fetches the file (ptnet to the
# host's stack); guest c, a virtio-net NIC on a vhost-user port of the same
# switch, pings b and fetches the file (ptnet to virtio-net). Then a's
# carrier follows the daemon (SIGSTOP, SIGCONT, SIGKILL), and comes back
# when the port does: a new daemon, a's device plugged again over QMP
# (tests/pt/qmp_readd.py), a pings the host.
#
#   sudo tests/pt/ptnet.sh [--vnet-hdr | --build-only]
#
# Exit 0 only if every check passed. --vnet-hdr: a and b's ports carry a
# virtio-net header in front of every frame (`ctl port add ... --vnet-hdr`),
# so their guests offload checksums and TCP segmentation; one more check:
# the switch takes frames longer than the MTU from them. --build-only:
# print the initramfs and kernel paths and stop (for bench/ptnet.sh).
#
# Environment: RS_PT_OUT (logs; default target/pt, this run in
# target/pt/ptnet), RINGSWITCH_BIN. Prints PASS/FAIL per check and the
# transfer's rate (TCG: only ratios mean anything).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${RS_PT_OUT:-$ROOT/target/pt}
VNET=()
[ "${1:-}" != --vnet-hdr ] || VNET=(--vnet-hdr)
RUN=$OUT/ptnet${VNET:+-vnet}
BIN=${RINGSWITCH_BIN:-$ROOT/target/release/ringswitch}
LIFE=450
note() { printf '[ptnet] %s\n' "$*" >&2; }
die() { note "ERROR: $*"; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root"
[ -x "$BIN" ] || die "no ringswitch binary at $BIN (cargo build --release -p ringswitch-cli)"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
need=()
for p in qemu-system-x86 linux-image-cloud-amd64 busybox-static build-essential cpio ethtool; do
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

# ---- build: the module and a busybox initramfs with it ----------------------
rm -rf "$RUN"
mkdir -p "$RUN/module" "$RUN/root"/{bin,dev,proc,sys,tmp,lib/modules}
cp "$ROOT"/guest/ringswitch_pt/{*.c,*.h,Makefile} "$RUN/module/"
make -s -C "$RUN/module" KDIR="/lib/modules/$KVER/build" >"$RUN/module.log" 2>&1 ||
    { cat "$RUN/module.log" >&2; die "module build failed"; }
if grep -E 'warning|error' "$RUN/module.log" >&2; then die "the module built with warnings"; fi
cp /bin/busybox "$RUN/root/bin/"
cp "$RUN/module/ringswitch_pt.ko" "$RUN/root/lib/modules/"
# The virtio-net driver, for guest c.
mkdir -p "$RUN/root/lib/modules/virtio"
for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev \
    drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci net/core/failover \
    drivers/net/net_failover drivers/net/virtio_net; do
    cp "/lib/modules/$KVER/kernel/$m.ko" "$RUN/root/lib/modules/virtio/"
done
install -m 755 "$HERE/ptnet-init" "$RUN/root/init"
# ethtool and the libraries it loads, for the per-ring counters.
cp "$(command -v ethtool)" "$RUN/root/bin/"
for lib in $(ldd "$(command -v ethtool)" | grep -o '/[^ ]*'); do
    mkdir -p "$RUN/root$(dirname "$lib")"
    cp -L "$lib" "$RUN/root$lib"
done
gcc -static -O2 -Wall -Wextra -Werror -o "$RUN/root/bin/udpblast" "$HERE/udpblast.c" || die "udpblast build failed"
gcc -static -O2 -Wall -Wextra -Werror -o "$RUN/root/bin/udpgso" "$HERE/udpgso.c" || die "udpgso build failed"
(cd "$RUN/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$RUN/initramfs.gz"
if [ "${1:-}" = --build-only ]; then
    echo "$RUN/initramfs.gz $KERNEL"
    exit 0
fi

# shellcheck source=tests/pt/lib.sh
. "$HERE/lib.sh"
NS=rsptnet$$
cleanup() {
    local rc=$?
    set +e
    ip netns del "$NS" 2>/dev/null
    stop_spawned
    exit "$rc"
}
trap cleanup EXIT
SOCK=$RUN/rs.sock
rs() { "$BIN" --socket "$SOCK" "$@"; }
daemon_up() { rs ctl port list >/dev/null 2>&1; }
spawn "$RUN/daemon.log" env RINGSWITCH_LOG=info "$BIN" serve --socket "$SOCK"
wait_for 60 daemon_up || die "the daemon did not start: $(cat "$RUN/daemon.log")"
# a and b have two ring pairs each (two queue pairs of ptnet0).
rs ctl port add 'vale0:a@conf:rings=2' --passthrough "$RUN/a.sock" "${VNET[@]}"
rs ctl port add 'vale0:b@conf:rings=2' --passthrough "$RUN/b.sock" "${VNET[@]}"
rs ctl port add vale0:c --vhost-user "$RUN/c.sock"
# The host's side: a TAP host port, moved into a namespace of its own.
TAP=rsptap$$
TAP=${TAP:0:15}
rs ctl attach vale0 --host "$TAP" >/dev/null
ip netns add "$NS"
ip link set "$TAP" netns "$NS"
ip -n "$NS" addr add 10.0.0.9/24 dev "$TAP"
ip -n "$NS" link set "$TAP" up
# With --vnet-hdr, a sends UDP_SEGMENT batches (USO) to the host: 20 sends
# of 64 datagrams of 1000 bytes. The host's socket counts them and checks
# each one's bytes.
USO_WANT=1280
if [ ${#VNET[@]} -gt 0 ]; then
    spawn "$RUN/uso-host.log" ip netns exec "$NS" python3 -c '
import collections, socket, sys, time
want = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
s.bind(("10.0.0.9", 9999))
got, bad, seen = 0, 0, collections.Counter()
s.settimeout(1)
deadline = time.monotonic() + 400
while got < want and time.monotonic() < deadline:
    try:
        d = s.recv(65536)
    except socket.timeout:
        continue
    got += 1
    if len(d) != 1000 or d != bytes([d[0]]) * 1000:
        bad += 1
    seen[d[0]] += 1
expected = collections.Counter(i & 0xff for i in range(want))
print(f"USO-HOST datagrams={got} bad={bad} values_match={int(seen == expected)}", flush=True)
' "$USO_WANT"
fi

boot() {
    local name=$1 args=$2 dev
    if [[ $args == *rs_if=eth0* ]]; then
        # A virtio-net NIC on the vhost-user port (shared/vm-testing.md).
        dev=(-object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem
            -chardev "socket,id=vu,path=$RUN/$name.sock,reconnect=1"
            -netdev vhost-user,id=n0,chardev=vu
            -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0c,romfile=,vectors=0)
    else
        dev=(-chardev "socket,id=pt,path=$RUN/$name.sock" -device ivshmem-doorbell,id=pt0,chardev=pt,vectors=2
            -qmp "unix:$RUN/qmp-$name.sock,server=on,wait=off")
    fi
    spawn "$RUN/qemu-$name.log" qemu-system-x86_64 -accel tcg -m 256 -display none -nodefaults \
        -no-user-config -no-reboot -serial "file:$RUN/guest-$name.log" \
        -kernel "$KERNEL" -initrd "$RUN/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 $args" "${dev[@]}"
}
boot b "rs_role=server rs_ip=10.0.0.2"
boot a "rs_role=client rs_ip=10.0.0.1 rs_peer=10.0.0.2 rs_host=10.0.0.9 rs_uso=${#VNET[@]}"
boot c "rs_role=client rs_ip=10.0.0.3 rs_peer=10.0.0.2 rs_if=eth0"

gline() { grep -a $'\r$' "$RUN/guest-$1.log" 2>/dev/null | tr -d '\r' | grep -a -o "RS-PTNET-$2.*" | tail -n 1 || true; }
gwait() {
    local t=$((SECONDS + $3)) l
    while [ $SECONDS -lt $t ]; do
        l=$(gline "$1" "$2")
        [ -n "$l" ] && { echo "$l"; return 0; }
        sleep 0.3
    done
    return 0
}
FAILED=0
check() {
    if [ "$2" = 0 ]; then
        echo "PASS  $1: $3"
    else
        echo "FAIL  $1: $3"
        FAILED=$((FAILED + 1))
        rs ctl stats --json >"$RUN/stats-$1.json" 2>&1 || true
    fi
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

for g in a b c; do
    l=$(gwait $g INSMOD 120)
    want="rc=0 ifs=1 chardevs=0"
    [ $g != c ] || want="rc=0 ifs=1 virtio"
    check "driver-$g" "$([[ $l == *"$want"* ]] && echo 0 || echo 1)" "${l:-no INSMOD line}"
    l=$(gwait $g UP 60)
    want=driver=ringswitch_pt
    [ $g != c ] || want=driver=virtio_net
    check "interface-$g" "$([[ $l == *"$want"* ]] && echo 0 || echo 1)" "${l:-no UP line}"
done
# A guest client's ping and transfer: $1 the guest, $2 what the check is called.
client_checks() {
    local l md5 secs
    l=$(gwait "$1" PING 240)
    check "ping-$2" "$([[ $l == *"rc=0 5 packets transmitted, 5 packets received"* ]] && echo 0 || echo 1)" "${l:-no PING line}"
    l=$(gwait "$1" XFER 240)
    md5=$(field md5 "$l")
    check "tcp-16MiB-$2" "$([ "$(field rc "$l")" = 0 ] && [ "$(field bytes "$l")" = 16777216 ] &&
        [ -n "$md5" ] && [ "$md5" = "$(field want "$l")" ] && echo 0 || echo 1)" "${l:-no XFER line}"
    secs=$(field secs "$l")
    [ -z "$secs" ] || echo "16 MiB $2 in $secs s under TCG ($(awk "BEGIN{printf \"%.1f\", 16 * 8 / $secs}") Mbit/s; only ratios mean anything)"
}
dmesg_check() {
    local l
    l=$(gwait "$1" DMESG 60)
    check "guest-kernel-log-$1" "$([[ $l == *"problems=0"* ]] && echo 0 || echo 1)" "${l:-no DMESG line} (warnings, oopses, bad ring lines in $1's dmesg)"
}
client_checks a "ptnet-to-ptnet"
if [ ${#VNET[@]} -gt 0 ]; then
    l=$(gwait a USOTX 240)
    host() { grep -a -o 'USO-HOST.*' "$RUN/uso-host.log" 2>/dev/null; }
    wait_for 120 host >/dev/null || true
    h=$(host || true)
    check uso-ptnet-to-host "$([[ $l == *"sends 20 datagrams $USO_WANT errors 0"* ]] && [ "$(field frames "$l")" -lt 100 ] 2>/dev/null &&
        [[ $h == *"datagrams=$USO_WANT bad=0 values_match=1"* ]] && echo 0 || echo 1)" \
        "${l:-no USOTX line}; ${h:-the host got nothing} (a sent UDP_SEGMENT batches through ptnet0 in a few GSO frames; the host's socket got every datagram whole)"
    # The other way: the host's UDP_SEGMENT batches, through its TAP (USO
    # on this kernel) and the switch, into a's ptnet0 as GSO frames.
    gwait a USO-RECV-READY 120 >/dev/null
    sent=$(ip netns exec "$NS" python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(17, 103, 1000)  # SOL_UDP, UDP_SEGMENT: 1000-byte datagrams
d = 0
for _ in range(20):
    s.sendto(b"".join(bytes([(d + k) & 0xff]) * 1000 for k in range(64)), ("10.0.0.1", 9998))
    d += 64
print(d)' 2>&1 || true)
    l=$(gwait a USORX 240)
    # A TAP takes USO from Linux 6.2 on; before, the host's kernel cuts the
    # datagrams itself and a gets them one frame each.
    few=100
    uname -r | awk -F. '{exit !($1 > 6 || ($1 == 6 && $2 >= 2))}' || few=$((USO_WANT + 100))
    check uso-host-to-ptnet "$([[ $l == *"datagrams $USO_WANT bad 0"* ]] && [ "$(field frames "$l")" -lt $few ] 2>/dev/null &&
        echo 0 || echo 1)" "${l:-no USORX line} (the host sent ${sent:-nothing} datagrams in 20 UDP_SEGMENT sends to a; a's socket got every one whole, in few frames)"
fi
l=$(gwait a RINGS 120)
r=($(for k in ring0_tx_packets ring1_tx_packets ring0_rx_packets ring1_rx_packets; do field $k "$l"; done))
ok=1
xps=$(field xps "$l")
[ ${#r[@]} = 4 ] && [ "${r[0]}" -gt 0 ] && [ "${r[1]}" -gt 0 ] && [ "${r[2]}" -gt 0 ] && [ "${r[3]}" -gt 0 ] &&
    [[ $xps =~ ^[0-9a-f]*[1-9a-f][0-9a-f]*,[0-9a-f]*[1-9a-f][0-9a-f]*$ ]] && ok=0
check two-ring-pairs "$ok" "${l:-no RINGS line} (a's ethtool -S after 20 connections to b: both queue pairs carried frames each way; each TX queue has a CPU in its XPS map)"
l=$(gwait a RELOAD 180)
check unload-under-traffic "$([[ $l == *" rmmod=0 left=0 insmod=0 "* ]] && [ "$(field rx_before_unload "$l")" -gt 0 ] 2>/dev/null &&
    [ -n "$(field md5 "$l")" ] && [ "$(field md5 "$l")" = "$(field want "$l")" ] && echo 0 || echo 1)" \
    "${l:-no RELOAD line} (rmmod while a wget runs, insmod again, the file again)"

# The host's stack through the TAP host port: ping b, fetch the file.
l=$(gwait b SERVING 120)
want=$(field md5 "$l")
p=$(ip netns exec "$NS" busybox ping -c 5 -i 0.2 -W 2 10.0.0.2 2>&1 | grep -o '[0-9]* packets transmitted, [0-9]* packets received' || true)
check ping-host-to-ptnet "$([[ $p == "5 packets transmitted, 5 packets received" ]] && echo 0 || echo 1)" "host (TAP $TAP): ${p:-no reply}"
got=$(ip netns exec "$NS" python3 -c '
import hashlib, sys, time, urllib.request
t = time.monotonic()
d = urllib.request.urlopen("http://10.0.0.2/f", timeout=120).read()
print(len(d), hashlib.md5(d).hexdigest(), round(time.monotonic() - t, 2))' 2>&1 || true)
check tcp-16MiB-ptnet-to-host "$([ "$got" != "${got#16777216 $want }" ] && [ -n "$want" ] && echo 0 || echo 1)" \
    "host fetched: ${got:0:200} (bytes, MD5, seconds); b's MD5 $want"

client_checks c "ptnet-to-virtio-net"
if [ ${#VNET[@]} -gt 0 ]; then
    # b sent the file three times (to a, the host, c): with TSO, in frames
    # far longer than the MTU, as the switch counted them.
    avg=$(rs ctl stats --json | python3 -c 'import json,sys; p=[p for p in json.load(sys.stdin) if p["name"]=="vale0:b"][0]; print(p["tx_bytes"] // max(p["tx_packets"], 1))')
    check tso-frames-from-b "$([ "${avg:-0}" -gt 3000 ] 2>/dev/null && echo 0 || echo 1)" \
        "the switch took frames of $avg bytes on average from vale0:b (its MTU is 1500)"
fi
dmesg_check c

# A guest on a passthrough port cannot be live-migrated: QEMU refuses with
# its ivshmem device's reason (peer mode adds a migration blocker), and the
# guest keeps running.
rc=0
blocked=$(python3 "$HERE/qmp_migrate_blocked.py" --qmp "$RUN/qmp-a.sock" 2>&1) || rc=$?
check migration-blocked "$rc" "QEMU: ${blocked:-said nothing}"

# a's carrier follows the daemon: stopped (SIGSTOP) it takes no frame and
# the carrier goes down; continued, up again; killed with -9, down. No guest
# kernel complains.
l=$(gwait a CARRIER-READY 120)
dpid=$(pgrep -f "^($BIN serve|${BIN}d) --socket $SOCK" | head -n 1 || true)
[ -n "$dpid" ] || check carrier 1 "no daemon to stop"
sig() { [ -z "$dpid" ] || kill "-$1" "$dpid"; }
for step in STOP:STOPPED:0:down CONT:CONTINUED:1:up KILL:KILLED:0:down; do
    IFS=: read -r s marker c state <<<"$step"
    sig "$s"
    l=$(gwait a "CARRIER-$marker" 300)
    check "carrier-after-SIG$s" "$([[ $l == *"carrier=$c operstate=$state"* ]] && echo 0 || echo 1)" \
        "${l:-no CARRIER-$marker line} (SIG$s sent to the daemon while a pings b)"
done
# The port comes back: a new daemon makes a's port again (new memory) and a
# TAP host port in the namespace; QEMU unplugs a's dead device and plugs it
# again (QMP); the guest's new ptnet0 gets its carrier and pings the host.
spawn "$RUN/daemon2.log" env RINGSWITCH_LOG=info "$BIN" serve --socket "$SOCK"
wait_for 60 daemon_up || die "the daemon did not start again: $(cat "$RUN/daemon2.log")"
rs ctl port add 'vale0:a@conf:rings=2' --passthrough "$RUN/a.sock" "${VNET[@]}"
TAP=${TAP:0:14}2
rs ctl attach vale0 --host "$TAP" >/dev/null
ip link set "$TAP" netns "$NS"
ip -n "$NS" addr add 10.0.0.9/24 dev "$TAP"
ip -n "$NS" link set "$TAP" up
readd=$(python3 "$HERE/qmp_readd.py" --qmp "$RUN/qmp-a.sock" --device pt0 --chardev pt \
    --server "$RUN/a.sock" --vectors 2 2>&1) || true
l=$(gwait a COMEBACK 240)
check comeback-after-restart "$([[ $l == *"rc=0 "*"3 packets transmitted, 3 packets received"* ]] &&
    [[ $(gline a CARRIER-BACK) == *"carrier=1 operstate=up"* ]] && echo 0 || echo 1)" \
    "${l:-no COMEBACK line}; $(gline a CARRIER-BACK); ${readd:-qmp_readd said nothing} (the daemon started again, a's device plugged again over QMP, a pings the host)"
dmesg_check a
rs ctl stats --json >"$RUN/stats.json" 2>&1 || true

[ $FAILED = 0 ] || { note "$FAILED check(s) failed; logs in $RUN"; exit 1; }
note "all checks passed"
