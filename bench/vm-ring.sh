#!/usr/bin/env bash
# bench/vm-ring.sh - the VM port path with two busy threads, not three:
# DPDK testpmd virtio_user txonly (a never-sleeping frontend, CPU 1) ->
# vhost-user port -> the switch worker (CPU 0) -> a ring port read by a
# blocking pkt-gen rx (CPU 0, sleeps when it waits); then the reverse,
# pkt-gen tx (CPU 0) -> worker (CPU 0) -> testpmd rxonly (CPU 1).
#
#   sudo bench/vm-ring.sh [--secs N]
#
# Beside bench/compare's vm section (testpmd at both ends: three threads
# that never sleep on two CPUs, taking turns by scheduler slices), this
# shows what the switch's VM path moves when it gets a CPU's share.
# Prints one line per direction.

# shellcheck source-path=SCRIPTDIR
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
SECS=8
while (($# > 0)); do
	case $1 in
	--secs)
		SECS=${2:-}
		shift
		;;
	-h | --help)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "vm-ring.sh: unknown argument: $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
[[ $SECS =~ ^[0-9]+$ && $SECS -ge 2 ]] || {
	echo "vm-ring.sh: --secs wants a number from 2 up" >&2
	exit 2
}
for t in dpdk-testpmd jq taskset timeout; do
	command -v "$t" >/dev/null || {
		echo "vm-ring.sh: $t is missing (scripts/setup.sh installs it)" >&2
		exit 1
	}
done

(cd "$ROOT" && cargo build --release -q -p ringswitch-cli) || exit 1
RS=$ROOT/target/release/ringswitch
W=$(mktemp -d /tmp/rs-vm-ring.XXXXXX)
S=$W/ctl.sock
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf -- "$W" /var/run/dpdk/rs-vm-ring-$$-*
}
trap cleanup EXIT

"$RS" --socket "$S" serve --workers 1 --worker-cpus 0 >"$W/daemon.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [[ -S $S ]] && break; sleep 0.1; done

# testpmd NAME PORT MODE: a virtio_user frontend (server=1) on CPU 1.
testpmd() {
	local name=$1 port=$2 mode=$3 extra=()
	[[ $mode == txonly ]] && extra=(--txpkts=64 "--eth-peer=0,02:00:00:00:00:99")
	"$RS" --socket "$S" ctl port add "valevm:$port" --vhost-user "$W/$port.sock" --client >/dev/null || return 1
	timeout $((SECS + 30)) dpdk-testpmd --lcores=0@1,1@1 --no-huge -m 1024 --no-pci \
		--file-prefix "rs-vm-ring-$$-$name" \
		"--vdev=net_virtio_user0,path=$W/$port.sock,queues=1,mac=02:00:00:00:00:0${name: -1},server=1" \
		-- --no-mlockall --total-num-mbufs=16384 "--forward-mode=$mode" "${extra[@]}" --stats-period 1 \
		>"$W/$name.log" 2>&1 &
	PIDS+=($!)
	local _
	for _ in $(seq 150); do
		grep -q "start packet forwarding" "$W/$name.log" && return 0
		sleep 0.2
	done
	echo "vm-ring.sh: testpmd $name did not start (see $W/$name.log)" >&2
	return 1
}

testpmd tx1 vm1 txonly || exit 1
sleep 2
r=$(taskset -c 0 "$RS" --socket "$S" pkt-gen -i valevm:r -f rx --duration "$SECS" -T 0 --json 2>/dev/null | tail -n1)
printf 'testpmd txonly (CPU 1) -> vhost-user port -> worker (CPU 0) -> ring port, pkt-gen rx (CPU 0): %s Mpps received\n' \
	"$(jq -r '.pps / 1e6 | . * 1000 | round / 1000' <<<"$r")"
kill "${PIDS[-1]}" 2>/dev/null

testpmd rx2 vm2 rxonly || exit 1
sleep 2
"$RS" --socket "$S" ctl stats --json >"$W/before.json"
t0=$(date +%s.%N)
taskset -c 0 "$RS" --socket "$S" pkt-gen -i valevm:t -f tx -l 60 --duration "$SECS" -T 0 --json >/dev/null 2>&1
t1=$(date +%s.%N)
"$RS" --socket "$S" ctl stats --json >"$W/after.json"
got() { jq -r '.[] | select(.name == "valevm:vm2") | .rx_packets' "$1"; }
printf 'pkt-gen tx (CPU 0) -> worker (CPU 0) -> vhost-user port -> testpmd rxonly (CPU 1): %s Mpps delivered into the guest queue\n' \
	"$(awk -v a="$(got "$W/before.json")" -v b="$(got "$W/after.json")" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f", (b - a) / (t1 - t0) / 1e6 }')"
