#!/usr/bin/env bash
# Regenerates crates/cli/link/ringswitchd-hot.ld: the list of functions a
# daemon with ring ports runs, which the linker puts together at the start
# of ringswitchd's code (.text.hot), so that the 64 KiB windows the kernel
# maps around each page touched hold little else (see the file's header).
#
#   scripts/hot-text.sh [--fresh]
#
# Runs target/release/ringswitchd under callgrind through the exchange that
# crates/cli/tests/daemon_binary.rs measures (start, 1000 frames from one
# ring port to another, a port listing) and bench/compare's idle section's
# (eight receivers waiting on ports of their own, then 56 persistent ports
# added beside them and `ctl stats --json` over all 64), then SIGTERM, and
# writes one pattern per function that ran: the first phase's first, then
# those each later phase added, so that a daemon doing only what the first
# does touches only the first part of the list. Names are matched without
# their hash (legacy mangling) or their `.llvm.N` suffix, so the list
# survives most code changes; a function added or renamed since lands in
# .text and costs memory, not correctness.
#
# The list only grows: the patterns already in it keep their places (those
# that match no function of the binary any more are dropped), and the
# functions new to it follow, phase by phase. Which functions run depends
# a little on timing (a spin that wins, a wake-up that comes), so a list
# made afresh each time would move code between the phases' windows from
# one run to the next; --fresh makes it afresh all the same. Run it again
# when scripts/daemon-memory.sh shows the code (ringswitchd's r-xp line)
# growing. Needs valgrind. KEEP=1 keeps the callgrind output and the
# daemon's log (the path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/daemon-exchanges.sh
fresh=
case ${1:-} in
    --fresh) fresh=1 ;;
    "") ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hot-text: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || { echo "hot-text: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release -p ringswitch-cli --bins
bin=target/release
work=$(mktemp -d /tmp/rs-hot-XXXXXX)
sock=$work/d.sock
trap 'kill "$pid" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# ringswitchd with the options `ringswitch serve` gives it (as the tests
# and the bench start it: parsing them is part of what runs), read from
# its command line.
"$bin/ringswitch" serve --socket "$sock" </dev/null >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
mapfile -d '' args < "/proc/$pid/cmdline"
kill "$pid"; wait "$pid" || true
rm -f "$sock"
[ "${args[0]##*/}" = ringswitchd ] || { echo "hot-text: serve did not run ringswitchd: ${args[*]}" >&2; exit 1; }
valgrind --tool=callgrind --demangle=no \
    --callgrind-out-file="$work/cg.out" "$bin/ringswitchd" "${args[@]:1}" \
    </dev/null >"$work/valgrind.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "hot-text: the daemon did not start under valgrind:" >&2; cat "$work/valgrind.log" >&2; exit 1; }
ex_traffic "$bin/ringswitch" "$sock"
"$bin/ringswitch" --socket "$sock" ctl port list >/dev/null
# Each phase's functions are dumped apart (callgrind zeroes its counts at a
# dump), so that each phase's code follows the code of those before it.
phase() { callgrind_control -d "$1" "$pid" >/dev/null 2>&1; }
phase traffic
# And what bench/compare's idle section measures: eight receivers waiting
# on ports of their own, with no traffic, until each has slept.
ex_idle_start "$bin/ringswitch" "$sock"
"$bin/ringswitch" --socket "$sock" ctl stats >/dev/null
ex_idle_stop
phase idle
# And its persistent ports added beside them, 64 in all, and the
# statistics it reads back over them all.
ex_add_ports "$bin/ringswitch" "$sock" 56 9
"$bin/ringswitch" --socket "$sock" ctl stats --json >/dev/null
"$bin/ringswitch" --socket "$sock" ctl port list --json >/dev/null
kill -TERM "$pid"
wait "$pid" || true
out=crates/cli/link/ringswitchd-hot.ld
nm --defined-only "$bin/ringswitchd" | awk '{ print $3 }' >"$work/symbols"
FRESH=$fresh SYMBOLS=$work/symbols python3 - "$out" "$work"/cg.out* <<'PY'
import os, re, sys
def ran_in(path):
    objs, fns, cur, ran = {}, {}, None, set()
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                objs[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                cur = objs[m.group(2)]
            continue
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                fns[m.group(2)] = m.group(3)
            # Valgrind names some of ringswitchd's code's object "???"; the
            # patterns below only match sections of ringswitchd anyway.
            if m.group(1) == "fn" and cur and (cur.endswith("/ringswitchd") or cur == "???"):
                ran.add(fns[m.group(2)].split("'")[0])
    return ran
def pattern(name):
    name = re.sub(r"\.llvm\.\d+$", "", name)
    if name.startswith("_ZN"):
        name = re.sub(r"17h[0-9a-f]{16}E$", "17h", name)
    elif not name.startswith("_R"):
        return None
    return f"    *(.text.*{name}*)"
# The dumps in the order they were made: cg.out.1 (traffic), cg.out.2
# (idle), then cg.out (the rest, to the end).
def order(p):
    m = re.search(r"\.(\d+)$", p)
    return int(m.group(1)) if m else 1 << 30
dumps = sorted(sys.argv[2:], key=order)
ran, pats, seen = set(), [], set()
kept = dropped = 0
if not os.environ.get("FRESH"):
    # The list so far, in its order: each pattern kept while some function
    # of the binary still has its name.
    names = open(os.environ["SYMBOLS"]).read()
    for line in open(sys.argv[1]):
        m = re.match(r"^    \*\(\.text\.\*(.*)\*\)$", line.rstrip("\n"))
        if not m or line.rstrip("\n") in seen:
            continue
        if m.group(1) in names:
            pats.append(line.rstrip("\n"))
            seen.add(pats[-1])
            kept += 1
        else:
            dropped += 1
for d in dumps:
    phase = ran_in(d)
    ran |= phase
    new = sorted({p for p in map(pattern, phase) if p} - seen)
    pats += new
    seen |= set(new)
if len(dumps) < 3 or len(ran) < 200:
    sys.exit(f"hot-text: {len(dumps)} dumps, {len(ran)} functions ran in ringswitchd; the exchange did not complete (see valgrind's log with KEEP=1)")
head = """/*
 * Generated by scripts/hot-text.sh; do not edit. The functions a daemon
 * with ring ports runs (measured under callgrind), linked together at the
 * start of ringswitchd's code: with them scattered through 1.7 MB of text,
 * nearly every 64 KiB window was mapped (1168-1228 KiB of code resident,
 * the daemon test at 4012-4180 KiB against its 4098 KiB budget); together,
 * 772-800 KiB of code, the test at 3592-3784 KiB and an idle daemon with
 * 8 ports at 3668-3792 KiB (scripts/daemon-memory.sh [--idle]).
 * In the order of the phases that first ran them: ring port traffic, idle
 * receivers, persistent ports added and their statistics read; each
 * regeneration keeps the patterns before and adds new ones after them. A
 * pattern that no longer matches costs memory, not correctness. build.rs
 * passes this file to the linker for ringswitchd only.
 */
SECTIONS {
  .text.hot : {
"""
with open(sys.argv[1], "w") as f:
    f.write(head + "\n".join(pats) + "\n  }\n}\nINSERT BEFORE .text;\n")
print(f"hot-text: {len(ran)} functions ran, {len(pats)} patterns written to {sys.argv[1]}"
      f" ({kept} kept from the list before, {dropped} dropped, {len(pats) - kept} new)")
PY
