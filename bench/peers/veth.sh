#!/usr/bin/env bash
# bench/peers/veth.sh - wire (and unwire) the nic section's veth topology:
# network namespaces PREFIX-gen and PREFIX-rx joined by a veth pair rsbnA
# (generator) - rsbnB (receiver), IPv6 off in both so that nothing but the
# generator's frames crosses the pair; with --bridge also a Linux bridge
# rsbnbr in PREFIX-rx holding rsbnB and rsbnC, whose peer rsbnD is in
# PREFIX-d (waits until both bridge ports forward); with --napi CPU, GRO on
# rsbnB and TSO off on rsbnA (veth hands a frame to the peer's NAPI only
# if it could be aggregated), threaded NAPI on rsbnB and its kthread
# pinned to CPU. Measuring is ringswitch-bench run's (its nic section).
#
#   bench/peers/veth.sh up PREFIX [--bridge] [--napi CPU]
#   bench/peers/veth.sh pin PREFIX CPU     # pin rsbnB's NAPI kthreads again
#   bench/peers/veth.sh down PREFIX        # delete the namespaces
#
# Exits 1 with the reason on stderr's last line. Needs root.

set -uo pipefail

readonly PROG=${0##*/}
IF_A=rsbnA IF_B=rsbnB IF_C=rsbnC IF_D=rsbnD BR=rsbnbr

die() {
	echo "$PROG: $*" >&2
	exit 1
}

# A command with a bound, its output to stderr.
run() { timeout -k 2 20 "$@" >&2; }

ns_exists() { [[ -e /run/netns/$1 ]]; }

down() {
	local ns rc=0
	for ns in "$1-gen" "$1-rx" "$1-d"; do
		if ns_exists "$ns"; then
			run ip netns del "$ns" || {
				echo "$PROG: ip netns del $ns failed" >&2
				rc=1
			}
		fi
	done
	return "$rc"
}

ns_add() {
	run ip netns add "$1" &&
		run ip -n "$1" link set lo up &&
		run ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# Pin rsbnB's NAPI kthreads (napi/rsbnB-<id>) to CPU.
pin() {
	local cpu=$1 pid n=0
	for pid in $(pgrep -x "napi/$IF_B-[0-9]+" 2>/dev/null); do
		run taskset -pc "$cpu" "$pid" && n=$((n + 1))
	done
	((n > 0)) || die "no NAPI kthread napi/$IF_B-* to pin"
}

up() {
	local p=$1 bridge=0 napi='' deadline n
	shift
	while (($# > 0)); do
		case $1 in
		--bridge) bridge=1 ;;
		--napi)
			[[ ${2:-} =~ ^[0-9]{1,4}$ ]] || die "--napi wants a CPU number"
			napi=$2
			shift
			;;
		*) die "unknown argument: $1" ;;
		esac
		shift
	done
	down "$p"
	local gen=$p-gen rx=$p-rx d=$p-d
	ns_add "$gen" && ns_add "$rx" &&
		run ip link add "$IF_A" netns "$gen" type veth peer name "$IF_B" netns "$rx" &&
		run ip -n "$gen" link set "$IF_A" up &&
		run ip -n "$rx" link set "$IF_B" up ||
		die "cannot create namespaces $gen, $rx and veth pair $IF_A-$IF_B"
	if [[ -n $napi ]]; then
		{ run ip netns exec "$rx" ethtool -K "$IF_B" gro on &&
			run ip netns exec "$gen" ethtool -K "$IF_A" tso off &&
			run ip netns exec "$rx" sh -c "echo 1 > /sys/class/net/$IF_B/threaded"; } ||
			die "cannot run $IF_B's NAPI threaded on CPU $napi: ethtool -K $IF_B gro on, -K $IF_A tso off or /sys/class/net/$IF_B/threaded failed"
		pin "$napi"
	fi
	((bridge)) || return 0
	ns_add "$d" &&
		run ip -n "$rx" link add "$BR" type bridge &&
		run ip -n "$rx" link add "$IF_C" type veth peer name "$IF_D" netns "$d" &&
		run ip -n "$rx" link set "$IF_B" master "$BR" &&
		run ip -n "$rx" link set "$IF_C" master "$BR" &&
		run ip -n "$rx" link set "$IF_C" up &&
		run ip -n "$rx" link set "$BR" up &&
		run ip -n "$d" link set "$IF_D" up ||
		die "cannot create bridge $BR with $IF_B and $IF_C, $IF_D in $d"
	# STP is off, so the ports forward at once; make sure.
	deadline=$((SECONDS + 30))
	while :; do
		n=$(timeout 5 bridge -n "$rx" -j link show 2>/dev/null | jq -r '[.[] | select(.state == "forwarding")] | length' 2>/dev/null)
		[[ $n == 2 ]] && return 0
		((SECONDS < deadline)) ||
			die "bridge ports of $BR not forwarding after 30 s: $(timeout 5 bridge -n "$rx" link show 2>&1 | tr '\n' ' ')"
		sleep 0.2
	done
}

(($# >= 2)) || die "usage: $PROG up|pin|down PREFIX [...]"
[[ $2 =~ ^[A-Za-z0-9-]{1,20}$ ]] || die "a namespace prefix is 1 to 20 letters, digits or dashes"
case $1 in
up)
	shift
	up "$@"
	;;
pin)
	[[ ${3:-} =~ ^[0-9]{1,4}$ ]] || die "pin wants a CPU number"
	pin "$3"
	;;
down) down "$2" ;;
*) die "unknown command: $1 (up, pin or down)" ;;
esac
