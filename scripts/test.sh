#!/usr/bin/env bash
# Installs what the tests need, then runs every check and test:
# formatting, clippy with warnings as errors, and the whole test suite
# (unit, in-process and multi-process tests) in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n==> %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test (release: the multi-process tests move millions of frames)"
cargo test --workspace --release 2>&1 | tee /tmp/ringswitch-test.log

# One closing line for CI: totals over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "%d passed, %d failed\n", p, f }' /tmp/ringswitch-test.log
