#!/usr/bin/env bash
# Installs what the tests need, then runs every check and test:
# formatting, clippy with warnings as errors, the whole test suite (unit,
# in-process and multi-process tests, the loom model of the CSB protocol,
# the churn soak) in release mode, and every fuzz target for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n==> %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test (release: the multi-process tests move millions of frames)"
# Every test binary runs even after one fails, so one run shows them all.
cargo test --workspace --release --no-fail-fast 2>&1 | tee /tmp/ringswitch-test.log

step "fuzzing: every target of fuzz/ for ${RINGSWITCH_FUZZ_SECONDS:-20} s (scripts/fuzz.sh; long campaigns: bench/fuzz-campaign.sh)"
bash scripts/fuzz.sh --seconds "${RINGSWITCH_FUZZ_SECONDS:-20}" 2>&1 | tee /tmp/ringswitch-fuzz.log

# One closing line for CI: totals over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "%d passed, %d failed\n", p, f }' /tmp/ringswitch-test.log
