#!/usr/bin/env bash
# Installs what building ringswitch needs on a fresh Debian 12 machine.
# Idempotent and quiet when everything is already there.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v curl >/dev/null 2>&1 || need_apt+=(curl ca-certificates)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: Rust is missing; installing the stable toolchain with rustup" >&2
        curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy >/dev/null
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
fi
for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$c" >/dev/null 2>&1 || true
    fi
done
