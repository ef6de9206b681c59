#!/usr/bin/env bash
# bench/soak.sh - the long churn soak: the driver of the CI test
# (crates/cli/tests/common/soak.rs) run for minutes, with the daemon's
# probe latency held to 100 ms. Prints a progress line every 30 s and a
# final table; exits non-zero if any invariant broke.
#
#   bench/soak.sh [--minutes N] [--probe-ms MS] [--enable NAME,...|all] [--seed S]
#
# --minutes   how long churn runs (default 10)
# --probe-ms  the largest accepted connect+hello+stats latency (default 100)
# --enable    the misbehaviours to run (default: those whose fixes are in,
#             ON_BY_DEFAULT; names and issue items:
#             crates/cli/tests/common/soak.rs, MISBEHAVIOURS)
# --seed      replay a run's random choices

# shellcheck source-path=SCRIPTDIR
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MINUTES=10
PROBE_MS=100
ENABLE=${RINGSWITCH_SOAK_ENABLE:-}
SEED=${RINGSWITCH_SOAK_SEED:-}
while (($# > 0)); do
	case $1 in
	--minutes) MINUTES=${2:-}; shift ;;
	--probe-ms) PROBE_MS=${2:-}; shift ;;
	--enable) ENABLE=${2:-}; shift ;;
	--seed) SEED=${2:-}; shift ;;
	-h | --help)
		sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "soak.sh: unknown argument: $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
[[ $MINUTES =~ ^[0-9]+$ && $MINUTES -ge 1 ]] || {
	echo "soak.sh: --minutes wants a whole number from 1 up" >&2
	exit 2
}
[[ $PROBE_MS =~ ^[0-9]+$ ]] || {
	echo "soak.sh: --probe-ms wants a number of milliseconds" >&2
	exit 2
}

cd "$ROOT"
cargo build --release -p ringswitch-cli --bins
export RINGSWITCH_SOAK_SECS=$((MINUTES * 60))
export RINGSWITCH_SOAK_PROBE_MS=$PROBE_MS
[[ -z $ENABLE ]] || export RINGSWITCH_SOAK_ENABLE=$ENABLE
[[ -z $SEED ]] || export RINGSWITCH_SOAK_SEED=$SEED
exec cargo test --release -p ringswitch-cli --test soak -- --nocapture --test-threads 1
