#!/usr/bin/env bash
# bench/run.sh - ringswitch against the issue's targets (bench/targets.tsv),
# with the DPDK memif, OVS-DPDK, DPDK testpmd and Linux bridge peers
# measured in the same run: bench/compare's targets profile
# (`ringswitch-bench compare --profile targets`). See bench/README.md.
#
#   sudo bench/run.sh [--quick] [--out DIR] [--no-vhost | --vhost-only | --nic-only | --flows-only]
#                     [--guest-halt-poll NS]
#
# Writes DIR/REPORT.md (also printed; default DIR: bench/results/run),
# DIR/data/, DIR/run.log and DIR/raw/, as bench/compare does.

set -uo pipefail

PROG=${0##*/}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
	cat <<EOF
usage: $PROG [--quick] [--out DIR] [--no-vhost | --vhost-only | --nic-only | --flows-only]
       [--guest-halt-poll NS]

  --quick       the parameters file's quick column (shorter windows and
                sweeps)
  --out DIR     where REPORT.md, data/, run.log and raw/ go
                (default: bench/results/run)
  --no-vhost    leave out the vm section (VM ports beside OVS-DPDK)
  --vhost-only  only the vm section
  --nic-only    only the nic section (veth + AF_XDP into the switch,
                beside DPDK net_af_xdp, net_af_packet and a Linux bridge)
  --flows-only  only the flows section (1,000 OpenFlow flows beside the
                learning bridge and OVS-DPDK, flow-mod rate, flows
                changing, a cache-miss storm)
  --guest-halt-poll NS
                in a VM, let idle vCPUs poll NS ns before halting for this
                run only (cpuidle-haltpoll; the old value is put back): a
                machine setting that shortens wake-ups (bench/floors.sh)

Runs bench/compare --profile targets: installs, builds, then measures
throughput (with the pipe busy-waiting and with 4096 slots), switch (with
its drops), latency, batch, idle, vm, nic and flows, one run per path, and judges
the targets. Needs root.
EOF
}

args=(--profile targets)
while (($# > 0)); do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--quick | --out=* | --guest-halt-poll=*) args+=("$1") ;;
	--out | --guest-halt-poll)
		args+=("$1" "${2:-}")
		shift
		;;
	--no-vhost) args+=(--skip vm) ;;
	--vhost-only) args+=(--only vm) ;;
	--nic-only) args+=(--only nic) ;;
	--flows-only) args+=(--only flows) ;;
	*)
		usage >&2
		echo "$PROG: unknown argument: $1" >&2
		exit 2
		;;
	esac
	(($# > 0)) && shift
done

exec "$BENCH_DIR/compare" "${args[@]}"
