#!/usr/bin/env bash
# Builds ringswitch and runs its demo: an embedded daemon, a zero-copy pipe
# and a VALE switch, each with a generator and a sink, live rates and a
# summary. Extra arguments go to `ringswitch demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
# The build's needs only (the tests' are scripts/test.sh's).
RINGSWITCH_SETUP=build . scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
echo "building ringswitch (release)..." >&2
cargo build --release --quiet -p ringswitch-cli
exec target/release/ringswitch demo "$@"
