#!/usr/bin/env bash
# Runs the first check of tests/pt/e2e.sh (guest txseq -> passthrough switch
# port -> switch -> host rxseq) again and again, to catch a rare failure.
# The initramfs is built once. The logs of a failing run, with the daemon's
# counters at the failure, are kept in $RS_PT_OUT/loop/fail-N.
#
#   sudo nice -n 19 tests/pt/loop.sh [RUNS]   (default 20; exit 0 only if
#                                              every run passed)
#
# Prints one line per run: the check's verdict, with the frames the switch
# dropped at the host receiver's full ring (counted, and allowed); the whole
# lines, with the receiver's reports, are in $RS_PT_OUT/loop/summary.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BASE=${RS_PT_OUT:-$ROOT/target/pt}/loop
RUNS=${1:-20}
[ "$RUNS" -ge 1 ] 2>/dev/null || { echo "usage: $0 [RUNS]" >&2; exit 2; }

rm -rf "$BASE"
mkdir -p "$BASE"
read -r initrd _ < <(RS_PT_OUT="$BASE/build" "$HERE/e2e.sh" --build-only | tail -n 1)
cp "$initrd" "$BASE/initramfs.gz"

passed=0
failed=0
for i in $(seq "$RUNS"); do
    if RS_PT_OUT="$BASE/run" RS_PT_INITRAMFS="$BASE/initramfs.gz" RS_PT_STOP_AFTER=guest-to-switch \
        "$HERE/e2e.sh" >"$BASE/run.out" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        mv "$BASE/run/e2e" "$BASE/fail-$i"
        cp "$BASE/run.out" "$BASE/fail-$i/e2e.out"
    fi
    verdict=$(grep -a -E '^(PASS|FAIL)  guest-to-switch' "$BASE/run.out" || true)
    verdict="run $i: ${verdict:-no verdict: $(tail -n 1 "$BASE/run.out")}"
    # The whole line (the receiver's report too) in the summary, its start here.
    echo "$verdict" >>"$BASE/summary"
    echo "${verdict:0:200}"
done
echo "$passed passed, $failed failed of $RUNS (logs of failures: $BASE/fail-*)" | tee -a "$BASE/summary"
[ "$failed" = 0 ]
