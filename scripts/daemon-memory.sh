#!/usr/bin/env bash
# The daemon's resident memory as crates/cli/tests/daemon_binary.rs measures
# it (ringswitchd started through `ringswitch serve`, 1000 frames from one
# ring port to another), with where it lies: the figures of
# /proc/PID/status, then resident KiB per mapping (file, permissions).
#
#   scripts/daemon-memory.sh [BINDIR]     (default target/release)
#
# ringswitchd's r-xp line is its code: the kernel maps file pages in 64 KiB
# windows around each page touched, so it grows with how far apart the
# functions that run are, not with their size. To see which functions run:
#   valgrind --tool=callgrind --dump-instr=yes target/release/ringswitchd ...
# and compare their addresses with `nm -n -S`; crates/cli/link/ringswitchd.ld
# keeps code that does not run for ring ports out of the way, and
# crates/cli/link/ringswitchd-hot.ld (scripts/hot-text.sh) puts the code
# that does run together.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release}/ringswitch
sock=$(mktemp -u /tmp/rs-memory-XXXXXX.sock)
RINGSWITCH_LOG=warn "$bin" serve --socket "$sock" </dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$sock"' EXIT
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
"$bin" --socket "$sock" pkt-gen -i vale0:b -f rx -n 1000 --json -T 0 >/dev/null &
rx=$!
for _ in $(seq 600); do
    "$bin" --socket "$sock" ctl port list --json | grep -q '"vale0:b"' && break
    sleep 0.1
done
"$bin" --socket "$sock" pkt-gen -i vale0:a -f tx -n 1000 --json -T 0 >/dev/null
wait $rx
status=$(cat /proc/$pid/status)
kib() { awk -v f="$1:" '$1 == f { print $2 }' <<<"$status"; }
echo "without packet memory: $(( $(kib VmRSS) - $(kib RssShmem) )) KiB" \
     "(anonymous $(kib RssAnon), file $(kib RssFile), packet memory $(kib RssShmem))"
awk '/^[0-9a-f]+-[0-9a-f]+ / { m = ($6 == "" ? "[anon]" : $6) " " $2 }
     /^Rss:/ { r[m] += $2 }
     END { for (m in r) if (r[m] > 0) printf "%6d KiB  %s\n", r[m], m }' \
    /proc/$pid/smaps | sort -k3,3 -k4,4
