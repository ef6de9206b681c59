#!/usr/bin/env bash
# Installs what building ringswitch needs on a fresh Debian 12 machine.
# Idempotent and quiet when everything is already there.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: no Rust toolchain found: install a stable Rust (1.87 or newer) with rustup, then run this again" >&2
        exit 1
    fi
fi
for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$c" >/dev/null 2>&1 || true
    fi
done
