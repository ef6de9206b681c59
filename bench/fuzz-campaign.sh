#!/usr/bin/env bash
# A long fuzzing campaign: every fuzz target for M minutes (default 10),
# one after the other, keeping a growing corpus under
# bench/results/fuzz/corpus/<target> (not checked in) and writing the
# summary table (target, executions, coverage, features, corpus size,
# crashes) to bench/results/fuzz/summary.md, which is checked in.
#
#   bench/fuzz-campaign.sh [--minutes M] [TARGET...]
#
# Reproducers of any crash land in fuzz/artifacts/<target>/ and are named
# in the summary. RINGSWITCH_FUZZ_FIT_MEMFDS=1 makes the vhost-user target
# always give memory files large enough (off by default: the daemon now
# refuses short files and survives shrunk ones, so the campaign tries both).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        -*) echo "fuzz-campaign.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

out=bench/results/fuzz
mkdir -p "$out/corpus"
export RINGSWITCH_FUZZ_FIT_MEMFDS=${RINGSWITCH_FUZZ_FIT_MEMFDS:-0}
{
    echo "# Fuzzing campaign"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD), ${minutes} min per target, $(nproc) CPUs,"
    echo "RINGSWITCH_FUZZ_FIT_MEMFDS=$RINGSWITCH_FUZZ_FIT_MEMFDS. Corpus grown from fuzz/corpus; cov = edges, ft = features."
    echo
} >"$out/summary.head"
status=0
scripts/fuzz.sh --seconds $((minutes * 60)) --corpus-dir "$out/corpus" \
    --summary "$out/summary.table" "${targets[@]}" || status=$?
cat "$out/summary.head" "$out/summary.table" >"$out/summary.md"
rm -f "$out/summary.head" "$out/summary.table"
echo "summary: $out/summary.md" >&2
exit "$status"
