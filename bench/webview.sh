#!/usr/bin/env bash
# bench/webview.sh - a screenshot of the web view (`serve --metrics`) while
# traffic flows, for people to look at: bench/results/webview.png.
#
#   bench/webview.sh [--out FILE]
#
# A daemon with --metrics on a free loopback port; on switch vale0 a sender
# (vale0:a, 200,000 frames/s, broadcast, so every other port gets them), a
# receiver (vale0:b) and a receiver that stopped reading (vale0:c, its
# pkt-gen stopped with SIGSTOP: its ring is full, so the switch drops what
# is for it, and the page shows it red); a pipe carrying 100,000 frames/s.
# Then headless Chromium loads the page and saves it to FILE (default
# bench/results/webview.png). Under virtual time the page's 120 polls of
# a second each take a few seconds of real time, so its plots show those
# seconds (an open page's plots cover its last five minutes). Needs chromium and jq (scripts/setup.sh installs
# them).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/results/webview.png
while (($# > 0)); do
	case $1 in
	--out) OUT=${2:?--out needs a file}; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/webview.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done
command -v chromium >/dev/null || { echo "chromium is not installed: run scripts/setup.sh" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"

echo "building ringswitch (release)..." >&2
(cd "$ROOT" && cargo build --release -q -p ringswitch-cli --bins)
BIN=$ROOT/target/release/ringswitch
WORK=$(mktemp -d /tmp/rs-bench-webview.XXXXXX)
SOCK=$WORK/rs.sock
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

RINGSWITCH_LOG=info "$BIN" serve --socket "$SOCK" --metrics 127.0.0.1:0 2>"$WORK/daemon.log" &
PIDS+=($!)
URL=
for _ in $(seq 200); do
	URL=$(grep -o 'http://[0-9.:]*/' "$WORK/daemon.log" | head -n 1 || true)
	[[ -n $URL && -S $SOCK ]] && break
	sleep 0.05
done
[[ -n $URL ]] || { echo "the daemon did not start: $(cat "$WORK/daemon.log")" >&2; exit 1; }

pktgen() { "$BIN" --socket "$SOCK" pkt-gen -T 0 "$@" >/dev/null 2>&1 & PIDS+=($!); }
wait_open() { # port names
	local p n
	for n in $(seq 200); do
		((n == 1)) || sleep 0.05
		for p in "$@"; do
			"$BIN" --socket "$SOCK" ctl port list --json |
				jq -e --arg p "$p" 'any(.[]; .name == $p and .open)' >/dev/null || continue 2
		done
		return 0
	done
	echo "ports $* did not open" >&2
	exit 1
}
pktgen -i 'vale0:b' -f rx
pktgen -i 'vale0:c' -f rx
STOPPED=$!
pktgen -i 'pipe}1' -f rx
wait_open 'vale0:b' 'vale0:c'
kill -STOP "$STOPPED"
pktgen -i 'vale0:a' -f tx -R 200000
pktgen -i 'pipe{1' -f tx -R 100000
wait_open 'vale0:a'
sleep 2

PROFILE=$WORK/chromium
mkdir -p "$PROFILE"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--hide-scrollbars --user-data-dir="$PROFILE" --window-size=1280,720 \
	--virtual-time-budget=120000 --screenshot="$OUT" "$URL" >"$WORK/chromium.log" 2>&1 ||
	{ echo "chromium failed: $(tail -5 "$WORK/chromium.log")" >&2; exit 1; }
[[ -s $OUT ]] || { echo "no screenshot: $(tail -5 "$WORK/chromium.log")" >&2; exit 1; }
echo "$OUT"
