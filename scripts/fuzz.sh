#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of untrusted input (fuzz/):
# builds the cargo-fuzz targets (release, debug assertions, AddressSanitizer)
# and runs each for a bounded time on a copy of its checked-in seed corpus,
# then prints executions, coverage and crashes per target. Exits non-zero
# when a target crashed, naming the reproducer (kept under fuzz/artifacts/).
#
#   scripts/fuzz.sh [--seconds N] [--corpus-dir DIR] [--summary FILE] [TARGET...]
#
# --seconds N        time per target (default 20)
# --corpus-dir DIR   keep a growing corpus in DIR/<target> (seeded from
#                    fuzz/corpus/<target>) instead of a throw-away copy; the
#                    checked-in corpus is never written
# --summary FILE     also write the summary table (markdown) to FILE
# TARGET...          only these targets (default: all; `cargo fuzz list`)
#
# Installs cargo-fuzz and the nightly toolchain when missing. Parsing the
# logs and the figures is done by fuzz/report (Rust), not here.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

seconds=20
corpus_dir=
summary=
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        --corpus-dir) corpus_dir=$2; shift 2 ;;
        --summary) summary=$2; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

step() { printf '\n==> %s\n' "$*" >&2; }

if ! rustup toolchain list | grep -q '^nightly'; then
    step "installing the nightly toolchain (cargo-fuzz needs -Z flags)"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    step "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

step "building the fuzz targets (release + debug assertions + ASan)"
cargo +nightly fuzz build -O --debug-assertions
cargo build --release --quiet --manifest-path fuzz/Cargo.toml -p ringswitch-fuzz-report
report=fuzz/target/release/ringswitch-fuzz-report
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bindir=fuzz/target/$triple/release

if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

work=$(mktemp -d /tmp/ringswitch-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
args=()
for t in "${targets[@]}"; do
    [ -x "$bindir/$t" ] || { echo "fuzz.sh: no fuzz target named $t (see cargo +nightly fuzz list)" >&2; exit 2; }
    if [ -n "$corpus_dir" ]; then
        corpus=$corpus_dir/$t
    else
        corpus=$work/corpus/$t
    fi
    mkdir -p "$corpus" "fuzz/artifacts/$t"
    if [ -d "fuzz/corpus/$t" ] && [ -z "$(ls -A "$corpus")" ]; then
        cp -r "fuzz/corpus/$t/." "$corpus/"
    fi
    opts=(-max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 -max_len=4096
          -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/")
    # Targets with an in-process daemon: its threads allocate on their own
    # schedule, which per-input leak checking would misread as leaks.
    case "$t" in netmap_request|daemon_requests) opts+=(-detect_leaks=0) ;; esac
    step "fuzzing $t for ${seconds} s"
    log=$work/$t.log
    "$bindir/$t" "${opts[@]}" "$corpus" >"$log" 2>&1 || true
    [ -z "$corpus_dir" ] || cp "$log" "$corpus_dir/$t.log"
    grep -E '^#[0-9]+.*DONE|Test unit written|ERROR|panicked' "$log" | tail -n 3 >&2 || true
    args+=("$t=$log,$corpus")
done

step "summary"
sum_args=()
[ -z "$summary" ] || sum_args=(--markdown "$summary")
"$report" "${sum_args[@]}" "${args[@]}"
