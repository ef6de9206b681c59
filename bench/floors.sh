#!/usr/bin/env bash
# bench/floors.sh - what this machine charges any design before it moves a
# packet: a cache line between the two CPUs, a yield hand-off between two
# threads on one CPU, an eventfd wake-up of a sleeping thread (across CPUs
# and on one), with the guest halt polling the machine has and, with
# --guest-halt-poll NS, with that value too (put back afterwards).
#
#   bench/floors.sh [--rounds N] [--guest-halt-poll NS]
#
# These are the floors under ringswitch's round-trip targets: a blocking
# round trip needs wake-ups, a busy one through the switch on two CPUs a
# yield hand-off (ping, the worker and pong are three spinners).

# shellcheck source-path=SCRIPTDIR
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
# shellcheck source=lib/common.sh
. "$BENCH_DIR/lib/common.sh"
log() { printf '%s\n' "$*" >&2; }

ROUNDS=20000 HALT_POLL=''
while (($# > 0)); do
	case $1 in
	--rounds) ROUNDS=${2:?--rounds needs a value}; shift ;;
	--guest-halt-poll) HALT_POLL=${2:?--guest-halt-poll needs nanoseconds}; shift ;;
	-h | --help)
		sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "floors.sh: unknown argument: $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 100 ]] || { echo "floors.sh: --rounds wants a number from 100 up" >&2; exit 2; }
[[ -z $HALT_POLL || $HALT_POLL =~ ^[0-9]{1,10}$ ]] || { echo "floors.sh: --guest-halt-poll wants nanoseconds" >&2; exit 2; }

(cd "$ROOT" && cargo build --release -q -p ringswitch-ring --example machine_floors)
BIN=$ROOT/target/release/examples/machine_floors
trap halt_poll_restore EXIT

echo "guest halt polling as the machine has it: $(halt_poll_get) ns"
"$BIN" "$ROUNDS" | awk -F'\t' '{ printf "%-56s %10s %10s\n", $1, $2, $3 }'
if [[ -n $HALT_POLL ]]; then
	halt_poll_set "$HALT_POLL"
	echo
	echo "guest halt polling set to $HALT_POLL ns for this measurement:"
	"$BIN" "$ROUNDS" | awk -F'\t' '{ printf "%-56s %10s %10s\n", $1, $2, $3 }'
	halt_poll_restore
	echo "(put back to $(halt_poll_get) ns)"
fi
