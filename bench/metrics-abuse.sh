#!/usr/bin/env bash
# bench/metrics-abuse.sh - the switch's forwarding rate with the metrics
# listener (`serve --metrics`) left alone and while it is abused, side by
# side, measured in one run on one daemon.
#
#   bench/metrics-abuse.sh [--runs N] [--frames N] [--out FILE]
#
#   --runs N     runs of each condition, alternating (default 5)
#   --frames N   60-byte frames per run (default 10000000)
#   --out FILE   the report (default bench/results/METRICS-ABUSE.md)
#
# The abuse: 200 connections held open (reopened as the listener closes
# them), 8 clients sending a request head a byte at a time, one sending
# 1 MiB request heads without end, and a scrape of /metrics every second.
# The measurement is Rust (crates/cli/tests/metrics.rs,
# bench_forwarding_beside_an_abused_listener, an ignored test): this script
# only builds and runs it. Prints the report and writes it to FILE. A
# benchmark, not a test: scripts/test.sh and .ci/run do not run it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=5 FRAMES=10000000 OUT=$ROOT/bench/results/METRICS-ABUSE.md
while (($# > 0)); do
	case $1 in
	--runs) RUNS=${2:?--runs needs a value}; shift ;;
	--frames) FRAMES=${2:?--frames needs a value}; shift ;;
	--out) OUT=${2:?--out needs a file}; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/metrics-abuse.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")

cd "$ROOT"
echo "building ringswitch and the measurement (release)..." >&2
cargo build --release -q -p ringswitch-cli --bins --test metrics
RS_BENCH_RUNS=$RUNS RS_BENCH_FRAMES=$FRAMES RS_BENCH_REPORT=$OUT \
	cargo test --release -q -p ringswitch-cli --test metrics -- \
	--ignored --exact bench_forwarding_beside_an_abused_listener --nocapture >&2
cat "$OUT"
