#!/usr/bin/env bash
# The daemon's resident memory as crates/cli/tests/daemon_binary.rs measures
# it (ringswitchd started through `ringswitch serve`, 1000 frames from one
# ring port to another), with where it lies: the figures of
# /proc/PID/status, then resident KiB per mapping (file, permissions).
#
#   scripts/daemon-memory.sh [BINDIR] [--idle] [--ports N]
#
# BINDIR defaults to target/release. --idle then adds what bench/compare's
# idle section has: eight receivers waiting on ports of their own, no
# traffic (its "8 ring ports open" figure). --ports N then adds N
# persistent ports (vale0:pK@conf:slots=64) and prints the memory each
# took (the bench's "per added port", with N = 56).
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
. scripts/daemon-exchanges.sh
dir=target/release idle= ports=0
while [ $# -gt 0 ]; do
    case $1 in
        --idle) idle=1; shift ;;
        --ports) ports=$2; shift 2 ;;
        -*) echo "daemon-memory: unknown option '$1'" >&2; exit 2 ;;
        *) dir=$1; shift ;;
    esac
done
bin=$dir/ringswitch
sock=$(mktemp -u /tmp/rs-memory-XXXXXX.sock)
RINGSWITCH_LOG=warn "$bin" serve --socket "$sock" </dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$sock"' EXIT
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
ex_traffic "$bin" "$sock"
without() { awk '/^VmRSS:/ { r = $2 } /^RssShmem:/ { s = $2 } END { print r - s }' "/proc/$pid/status"; }
field() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$pid/status"; }
report() {
    local status
    status=$(cat /proc/$pid/status)
    kib() { awk -v f="$1:" '$1 == f { print $2 }' <<<"$status"; }
    echo "$1: without packet memory: $(( $(kib VmRSS) - $(kib RssShmem) )) KiB" \
         "(anonymous $(kib RssAnon), file $(kib RssFile), packet memory $(kib RssShmem))"
    awk '/^[0-9a-f]+-[0-9a-f]+ / { m = ($6 == "" ? "[anon]" : $6) " " $2 }
         /^Rss:/ { r[m] += $2 }
         END { for (m in r) if (r[m] > 0) printf "%6d KiB  %s\n", r[m], m }' \
        /proc/$pid/smaps | sort -k3,3 -k4,4
}
report "two ports, 1000 frames"
if [ -n "$idle" ]; then
    trap 'ex_idle_stop; kill $pid 2>/dev/null; rm -f "$sock"' EXIT
    ex_idle_start "$bin" "$sock"
    report "and eight receivers waiting"
fi
if [ "$ports" -gt 0 ]; then
    before=$(without) anon0=$(field RssAnon) file0=$(field RssFile)
    ex_add_ports "$bin" "$sock" "$ports" 1
    after=$(without) anon1=$(field RssAnon) file1=$(field RssFile)
    echo "and $ports persistent ports added: $before -> $after KiB," \
         "$(( (after - before) * 1024 / ports )) bytes a port" \
         "(anonymous $(( (anon1 - anon0) * 1024 / ports )), file $(( (file1 - file0) * 1024 / ports )))"
fi
