#!/usr/bin/env bash
# bench/migrate.sh - the downtime of a vhost-user live migration through
# ringswitch beside the same through OVS-DPDK, measured in one run.
#
# Each run is tests/vm/run.sh's migrate scenario: guest A moves to a second
# QEMU (-incoming) on a new port A2 while guest B pings it every 10 ms and
# sends it 16 MiB over TCP (sha256 checked). The scenario runs --runs times
# for each backend (RS_VM_BACKEND: ringswitch; ovs: OVS-DPDK, a
# dpdkvhostuserclient port per guest on a learning bridge) in each mode
# (paused: the guest is stopped for the move, as the test does; live:
# precopy while it runs, MIG_LIVE=1). Rounds are interleaved (run 1 of
# every backend and mode, then run 2, ...), so that a change in the
# machine's load falls on all of them alike.
#
# The guests are QEMU TCG guests (software CPU emulation, no KVM) on this
# machine's 2 CPUs, beside the switch: the figures compare the two switches
# within one report; their absolute values do not carry over to KVM hosts.
#
#   sudo bench/migrate.sh [--runs N] [--backends LIST] [--modes LIST]
#                         [--out DIR] [--report FILE]
#
#   --runs N         runs per backend and mode (default 3)
#   --backends LIST  space- or comma-separated: ringswitch, ovs
#                    (default "ringswitch ovs")
#   --modes LIST     paused, live (default "paused live")
#   --out DIR        data/runs.tsv (one line per run), data/meta.tsv (the
#                    machine), REPORT.md, run.log (the progress lines) and
#                    raw/ (each run's output and logs) (default
#                    target/bench-migrate/<UTC date-time>)
#   --report FILE    also write the report to FILE (e.g.
#                    bench/results/MIGRATE-REPORT.md)
#
# Environment: RINGSWITCH_BIN (default: cargo build --release -p
# ringswitch-cli, then a private copy, so that a rebuild during the run
# cannot swap it); MIG_BANDWIDTH and MIG_PAUSE go to the scenario (see
# tests/vm/run.sh) and into the report; RS_VM_OVS_PMD_CPU and
# RS_VM_OVS_PMD_MAXSLEEP likewise (tests/vm/lib.sh).
#
# stdout: the report (markdown): the machine, then per backend and mode the
# median (min-max, n) of migration time, downtime, pings lost and longest
# gap over the runs that passed, then the failed runs with their reasons.
# Progress goes to stderr. A failed run is reported and the next one runs.
# Needs root for the ovs backend (hugepages). A benchmark, not a test:
# scripts/test.sh and .ci/run do not run it.

# shellcheck source-path=SCRIPTDIR
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# log, die, halt_poll_get
# shellcheck source=lib/common.sh
. "$ROOT/bench/lib/common.sh"
# OVS_VSWITCHD
# shellcheck source=lib/ovs.sh
. "$ROOT/bench/lib/ovs.sh"

usage() { sed -n '2,/^$/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

RUNS=3
BACKENDS="ringswitch ovs"
MODES="paused live"
OUT=
REPORT_FILE=
COMMAND="bench/migrate.sh${*:+ $*}"
while (($# > 0)); do
	case $1 in
	--runs | --backends | --modes | --out | --report)
		(($# >= 2)) || die "$1 needs a value (try --help)"
		opt=$1 val=$2
		shift 2
		;;
	--runs=* | --backends=* | --modes=* | --out=* | --report=*)
		opt=${1%%=*} val=${1#*=}
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
	case $opt in
	--runs)
		if [[ ! $val =~ ^[0-9]+$ ]] || ((10#$val < 1 || 10#$val > 50)); then
			die "--runs wants a whole number within 1..50, got '$val'"
		fi
		RUNS=$((10#$val))
		;;
	--backends) BACKENDS=${val//,/ } ;;
	--modes) MODES=${val//,/ } ;;
	--out) OUT=$val ;;
	--report) REPORT_FILE=$val ;;
	esac
done
for b in $BACKENDS; do [[ $b == ringswitch || $b == ovs ]] || die "--backends: '$b' is neither ringswitch nor ovs"; done
for m in $MODES; do [[ $m == paused || $m == live ]] || die "--modes: '$m' is neither paused nor live"; done
[[ -n ${BACKENDS// /} ]] || die "--backends is empty"
[[ -n ${MODES// /} ]] || die "--modes is empty"
[[ " $BACKENDS " != *" ovs "* ]] || ((EUID == 0)) || die "the ovs backend needs root (hugepages, and OVS-DPDK itself): run with sudo, or --backends ringswitch"

# ---------------------------------------------------------------- set-up

[[ -n $OUT ]] || OUT=$ROOT/target/bench-migrate/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT/data" "$OUT/raw" "$OUT/bin" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
# common.sh's log: progress also into run.log
LOGFILE=$OUT/run.log

# What the scenario needs (QEMU, the guest kernel, busybox, jq: quiet when
# all is there), and OVS-DPDK.
"$ROOT/scripts/setup.sh" >&2 || die "scripts/setup.sh failed: the VM scenario's packages are missing"
if [[ " $BACKENDS " == *" ovs "* && ! -x $OVS_VSWITCHD ]]; then
	log "installing openvswitch-switch-dpdk (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch-dpdk >&2 ||
		{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch-dpdk >&2; } ||
		die "apt-get install openvswitch-switch-dpdk failed"
fi

if [[ -n ${RINGSWITCH_BIN:-} ]]; then
	[[ -x $RINGSWITCH_BIN ]] || die "RINGSWITCH_BIN=$RINGSWITCH_BIN is not an executable"
	src_bin=$RINGSWITCH_BIN
else
	log "building ringswitch (cargo build --release -p ringswitch-cli)"
	(cd "$ROOT" && cargo build --release -q -p ringswitch-cli >&2) ||
		die "cargo build --release -p ringswitch-cli failed (or set RINGSWITCH_BIN to a built ringswitch)"
	src_bin=$ROOT/target/release/ringswitch
fi
# A private copy: a rebuild during the run cannot swap it.
cp "$src_bin" "$OUT/bin/ringswitch" || die "cannot copy $src_bin to $OUT/bin"
BIN=$OUT/bin/ringswitch

# ---------------------------------------------------------------- the machine

# meta KEY VALUE: one line of data/meta.tsv.
META=$OUT/data/meta.tsv
meta() { printf '%s\t%s\n' "$1" "${2//$'\t'/ }" >>"$META"; }
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not installed"; }
loadavg() { awk '{ print $1, $2, $3 }' /proc/loadavg; }
NCPU=$(nproc)
: >"$META"
meta date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
meta command "$COMMAND"
meta runs "$RUNS"
meta backends "$BACKENDS"
meta modes "$MODES"
meta cpu_model "$(awk -F': *' '$1 ~ /^model name/ { print $2; exit }' /proc/cpuinfo)"
meta cpus "$NCPU"
meta memory "$(awk '$1 == "MemTotal:" { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
meta kernel "$(uname -r)"
meta ringswitch "$("$BIN" --version 2>/dev/null | head -n 1)"
head=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] || head+=" (with uncommitted changes)"
meta commit "$head"
meta qemu "$(qemu-system-x86_64 --version | awk 'NR == 1 { print $4 }') (package qemu-system-x86$(printf ' %s' "$(pkg_version qemu-system-x86)"))"
meta ovs "$(pkg_version openvswitch-switch-dpdk)"
meta dpdk "$(pkg_version dpdk-dev)"
meta guest_kernel "$(basename "$(find /boot -maxdepth 1 -name 'vmlinuz-*-cloud-amd64' | sort -V | tail -n 1)" | sed 's/^vmlinuz-//')"
meta guest_halt_poll_ns "$(halt_poll_get)"
meta mig_bandwidth "${MIG_BANDWIDTH:-1024}"
meta mig_pause "${MIG_PAUSE:-0.1}"
meta ovs_pmd_cpu "${RS_VM_OVS_PMD_CPU:-1}"
meta ovs_pmd_maxsleep "${RS_VM_OVS_PMD_MAXSLEEP:-500}"
meta load_start "$(loadavg)"

log "TCG guests (QEMU's software CPU emulation, no KVM) on a $NCPU-CPU machine: the guests' vCPUs, QEMU's migration and the switch share $NCPU CPUs; compare the switches within this run only"
log "load average at the start: $(loadavg); output in $OUT"

# ---------------------------------------------------------------- the runs

CHILD=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [[ -n $CHILD ]] && kill -0 "$CHILD" 2>/dev/null; then
		# run.sh's own exit trap stops its QEMUs, daemon and OVS
		log "stopping the scenario in progress (pid $CHILD)"
		kill -TERM "$CHILD" 2>/dev/null || true
		wait "$CHILD" 2>/dev/null || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# val KEY: the value of KEY=value in $fields (" key=value ...").
fields=
val() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<"$fields" | head -n 1; }

RUNS_TSV=$OUT/data/runs.tsv
printf 'backend\tmode\trun\tstatus\ttotal_ms\tdowntime_ms\tsetup_ms\tram_mb\tpings_sent\tpings_lost\tlongest_gap_ms\tseconds\treason\n' >"$RUNS_TSV"
VM_OUT=$OUT/vm
n_all=$((RUNS * $(wc -w <<<"$BACKENDS") * $(wc -w <<<"$MODES")))
n=0
T0=$SECONDS
for ((r = 1; r <= RUNS; r++)); do
	for mode in $MODES; do
		for b in $BACKENDS; do
			n=$((n + 1))
			tag=$b-$mode-$r
			logf=$OUT/raw/$tag.log
			live=
			[[ $mode == live ]] && live=1
			log "run $n/$n_all: $b, $mode (run $r of $RUNS), $((SECONDS - T0)) s in"
			t=$SECONDS
			rc=0
			# The scenario stops everything it started however it ends
			# (its processes also end themselves after RS_VM_MAX_LIFE);
			# timeout(1) is only the last resort if it hangs.
			RS_VM_BACKEND=$b RINGSWITCH_BIN=$BIN RS_VM_OUT=$VM_OUT MIG_LIVE=$live RINGSWITCH_LOG=info \
				timeout -k 30 900 "$ROOT/tests/vm/run.sh" migrate </dev/null >"$logf" 2>&1 &
			CHILD=$!
			wait "$CHILD" || rc=$?
			CHILD=
			secs=$((SECONDS - t))
			run_dir=$VM_OUT/runs/migrate
			[[ $b == ringswitch ]] || run_dir=$VM_OUT/runs/$b-migrate
			# (the next run starts from an empty directory anyway)
			if [[ -d $run_dir ]]; then mv "$run_dir" "$OUT/raw/$tag"; fi
			result=$(grep -a -o 'RESULT migrate .*' "$logf" | tail -n 1) || true
			mig=$(grep -a -o 'MIGRATE status=completed .*' "$logf" | tail -n 1) || true
			fields=" ${result:-$mig}"
			if ((rc == 0)) && [[ -n $result ]]; then
				status=ok reason=
				log "  passed in $secs s: migration $(val total_ms) ms, downtime $(val downtime_ms) ms, $(val pings_lost) of $(val pings_sent) pings lost, longest gap $(val longest_gap_ms) ms"
			else
				status=failed
				reason=$(grep -a -A 1 '^FAIL \[' "$logf" | tr -s ' \n' ' ' | sed -e 's/^FAIL \[[^]]*\] //' -e 's/ *$//' | cut -c1-400) || true
				((rc != 124 && rc != 137)) || reason="did not end within 900 s (timeout); ${reason}"
				[[ -n $reason ]] || reason="exit status $rc without a FAIL line"
				# A guest that crashed after the move says so on its console
				# (A.2.log: the destination; see the report's note on live moves).
				oops=$(grep -a -h -m 2 -E 'BUG|Oops|general protection|soft lockup|Kernel panic' \
					"$OUT/raw/$tag/A.2.log" 2>/dev/null | tr -d '\r' | sed 's/^\[[ 0-9.]*\] //' | paste -sd ';' - | sed 's/;/; /') || true
				[[ -z $oops ]] || reason+="; guest A's kernel on the destination: $oops"
				log "  FAILED after $secs s: $reason (log: $logf)"
			fi
			printf '%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n' "$b" "$mode" "$r" "$status" \
				"$(val total_ms)" "$(val downtime_ms)" "$(val setup_ms)" "$(val ram_mb)" \
				"$(val pings_sent)" "$(val pings_lost)" "$(val longest_gap_ms)" "$secs" "$reason" >>"$RUNS_TSV"
		done
	done
done
meta load_end "$(loadavg)"
meta elapsed_s "$((SECONDS - T0))"
log "load average at the end: $(loadavg); $((SECONDS - T0)) s for $n_all runs"

# ---------------------------------------------------------------- the report

python3 - "$OUT/data" "$OUT" <<'PY' >"$OUT/REPORT.md"
import csv, statistics, sys

data, out = sys.argv[1:3]
meta = dict(l.rstrip("\n").split("\t", 1) for l in open(f"{data}/meta.tsv") if "\t" in l)
runs = list(csv.DictReader(open(f"{data}/runs.tsv"), delimiter="\t"))
cpus = meta["cpus"]

def fig(rows, key):
    xs = sorted(int(r[key]) for r in rows if r[key].lstrip("-").isdigit())
    if not xs:
        return "–"
    m = statistics.median(xs)
    m = f"{m:.0f}" if m == int(m) else f"{m:.1f}"
    return f"{m} (n=1)" if len(xs) == 1 else f"{m} ({xs[0]}–{xs[-1]}, n={len(xs)})"

print("# Live migration of a vhost-user guest: ringswitch beside OVS-DPDK")
print()
print(f"- **date**: {meta['date']}")
print(f"- **command**: `{meta['command']}`")
print(f"- **run**: {meta['runs']} run(s) per backend and mode, interleaved; elapsed: {meta['elapsed_s']} s")
print(f"- **machine**: CPU model: {meta['cpu_model']}, CPUs: {cpus}, memory: {meta['memory']}")
print(f"- **kernel**: {meta['kernel']}")
print(f"- **versions**: ringswitch: {meta['ringswitch']}, commit: {meta['commit']}, QEMU: {meta['qemu']}, OVS: {meta['ovs']}, DPDK: {meta['dpdk']}")
print(f"- **machine load**: load average at the start: {meta['load_start']}, at the end: {meta['load_end']}")
print(f"- **guest_halt_poll_ns**: {meta['guest_halt_poll_ns']}")
print(f"- **guests**: QEMU TCG guests (software CPU emulation, no KVM) on a {cpus}-CPU machine: "
      f"1 vCPU and 256 MiB (memfd, share=on) each, kernel {meta['guest_kernel']}, virtio-net on a vhost-user port; "
      f"A, B and A's destination run at once, beside the switch, on these {cpus} CPUs")
print(f"- **switches**: ringswitch: switch vale0 (learning), ports `ctl port add vale0:NAME --vhost-user` (ringswitch listens, QEMU `reconnect=1`); "
      f"OVS-DPDK: bridge br0 (datapath_type=netdev, NORMAL: learning), `dpdkvhostuserclient` ports (QEMU listens), "
      f"one PMD thread on CPU {meta['ovs_pmd_cpu']}, other_config:pmd-maxsleep={meta['ovs_pmd_maxsleep']} us (0: not set)")
print(f"- **migration**: tests/vm/migrate.py over QMP, max-bandwidth {meta['mig_bandwidth']} MiB/s, QEMU's default downtime limit (300 ms); "
      f"B sends A 16 MiB in 256 KiB pieces {meta['mig_pause']} s apart and pings it every 10 ms throughout")
print()
print("Each figure is the median over the runs that passed, with the smallest and largest run and their number n in parentheses. "
      f"These are TCG guests on {cpus} CPUs: compare the two switches within this report; absolute figures do not carry over to KVM hosts.")
print()
print("| switch | mode | runs passed | migration (ms) | downtime (ms) | pings lost | pings sent | longest gap (ms) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
names = {"ringswitch": "ringswitch", "ovs": "OVS-DPDK"}
modes = {"paused": "guest paused for the move", "live": "live (precopy)"}
for mode in meta["modes"].split():
    for b in meta["backends"].split():
        rs = [r for r in runs if r["backend"] == b and r["mode"] == mode]
        ok = [r for r in rs if r["status"] == "ok"]
        print(f"| {names[b]} | {modes[mode]} | {len(ok)}/{len(rs)} | {fig(ok, 'total_ms')} | {fig(ok, 'downtime_ms')} | "
              f"{fig(ok, 'pings_lost')} | {fig(ok, 'pings_sent')} | {fig(ok, 'longest_gap_ms')} |")
print()
print("- **migration**: QEMU's `total-time` of the migration (query-migrate).")
print("- **downtime**: paused: the time the guest was stopped, from QMP `stop` on the source to `cont` on the destination "
      "(tests/vm/migrate.py); live: QEMU's own `downtime`, from the guest's last instruction on the source to its first on the destination.")
print("- **pings lost**: B's pings to A (one every 10 ms over the whole transfer, before, during and after the move) that got no reply; "
      "**longest gap**: the longest run of consecutive unanswered pings, × 10 ms. What A's peers see: besides the downtime it holds "
      "the time until the switch delivers A's frames at its new port (A announces itself, VIRTIO_NET_F_GUEST_ANNOUNCE). "
      "10 ms is the interval B aims at; a TCG guest on a busy machine may send slower, so the gap is a count of pings, not a wall-clock time.")
print("- Live (precopy) moves: QEMU 7.2 under TCG loses pages the guest writes while a live migration runs (docs/migration.md), "
      "so a live run can fail for reasons that are neither switch's; such runs are listed below, and left out of the figures.")
failed = [r for r in runs if r["status"] != "ok"]
if not failed:
    print()
    print(f"All {len(runs)} runs passed.")
else:
    print()
    print("## Failed runs")
    print()
    for r in failed:
        q = f" (QEMU: migration {r['total_ms']} ms, downtime {r['downtime_ms']} ms)" if r["total_ms"] else ""
        print(f"- {names[r['backend']]}, {r['mode']}, run {r['run']}, after {r['seconds']} s{q}: {r['reason']} "
              f"(logs: {out}/raw/{r['backend']}-{r['mode']}-{r['run']}.log)")
PY
cat "$OUT/REPORT.md"
if [[ -n $REPORT_FILE ]]; then
	cp "$OUT/REPORT.md" "$REPORT_FILE" || die "cannot write $REPORT_FILE"
	log "report also in $REPORT_FILE"
fi
log "report, data and logs: $OUT"
