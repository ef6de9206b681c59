//! The defaults section: ringswitch's default, adaptive wait (pkt-gen
//! without a wait option, `serve` without `--idle-poll-us`) against its
//! references, each run of each case back to back, no thread pinned (the
//! scheduler places pkt-gen and the daemon's worker), the guest halt
//! polling as the machine booted:
//!
//! 1. a pipe at 60 B: default, `--busy`, `--blocking`; default ÷ busy;
//! 2. two ring ports of a switch at each size: the default as booted, the
//!    same default with guest halt polling set for that case only (put
//!    back after it, also on an error or a signal), the old default
//!    (`--idle-poll-us 0`, pkt-gen `--blocking`); as booted ÷ halt polling;
//! 3. ping/pong through a pipe and the switch: default and busy (`--busy`,
//!    through the switch also a long fixed worker spin); default ÷ busy
//!    of the p50s;
//! 4. idle: 8 ports with 8 waiting receivers and no traffic, the CPU of
//!    the daemon and the receivers together; one port receiving a slow
//!    paced stream, the receiver's CPU.
//!
//! Each ratio is taken within one run (the default and its reference
//! measured one after the other), so the median of the ratios is not
//! skewed by the load that changes between runs.

use std::path::Path;
use std::time::Duration;

use super::idle::{cpu_window, open_idle_ports, CpuWindow};
use super::measure::{RttPlan, Tput, TputPlan, Wait};
use super::procs::clock_ticks;
use super::Bench;
use crate::compare::halt_poll::{self, HaltPoll};
use crate::error::Error;
use crate::figures::{mpps, pct_of_core, per_mpkt};
use crate::write::Key;

/// The section's id.
pub const SECTION: &str = "defaults";

/// The pipe's case.
const PIPE_CASE: &str = "pipe, 60 B";
/// The pipe's systems, by wait.
const PIPE_DEFAULT: &str = "ringswitch pipe, default (adaptive wait)";
const PIPE_BUSY: &str = "ringswitch pipe, --busy";
const PIPE_BLOCKING: &str = "ringswitch pipe, --blocking";
/// The switch's systems.
const SW_BOOTED: &str = "ringswitch switch, default, halt polling as booted";
const SW_OLD: &str = "ringswitch switch, old default (--idle-poll-us 0, pkt-gen --blocking)";
/// The round trips' systems.
const RTT_PIPE_DEFAULT: &str = "ringswitch pipe, default (adaptive wait)";
const RTT_PIPE_BUSY: &str = "ringswitch pipe, busy-waiting";
const RTT_SW_DEFAULT: &str = "ringswitch switch, default (adaptive wait)";
const RTT_SW_BUSY: &str = "ringswitch switch, busy-waiting";
/// The idle case and its system.
const IDLE_CASE: &str = "8 ring ports open, 8 pkt-gen rx waiting, no traffic";
const IDLE_SYS: &str = "ringswitch daemon + 8 pkt-gen rx, default";
/// The slow stream's system.
const RATE_SYS: &str = "ringswitch switch, default";

/// The section's parameters (bench/params.tsv).
#[derive(Clone, Debug)]
struct Plan {
    secs: u64,
    burst: u64,
    sizes: Vec<u64>,
    ping_n: u64,
    idle_secs: u64,
    rate_pps: u64,
    halt_ns: u64,
    busy_poll_us: u64,
}

impl Plan {
    fn read(b: &Bench) -> Result<Plan, Error> {
        let p = &b.params;
        Ok(Plan {
            secs: p.one("defaults_secs")?,
            burst: p.one("burst")?,
            sizes: p.list("sizes")?.to_vec(),
            ping_n: p.one("defaults_ping_n")?,
            idle_secs: p.one("defaults_idle_secs")?,
            rate_pps: p.one("defaults_rate_pps")?,
            halt_ns: p.one("defaults_halt_poll_ns")?,
            busy_poll_us: p.one("defaults_busy_poll_us")?,
        })
    }

    /// The switch's system with halt polling set.
    fn sw_halt(&self) -> String {
        format!(
            "ringswitch switch, default, halt polling {} µs",
            self.halt_ns as f64 / 1000.0
        )
    }

    /// The slow stream's case.
    fn rate_case(&self) -> String {
        format!("one port receiving {} packets/s", self.rate_pps)
    }
}

/// A sample's key in this section.
fn key<'a>(
    case: &'a str,
    system: &'a str,
    metric: &'a str,
    unit: &'a str,
    better: &'a str,
) -> Key<'a> {
    Key {
        section: SECTION,
        case,
        system,
        metric,
        unit,
        better,
        x: "-",
    }
}

/// `a ÷ b` in %, one decimal; `None` when `b` is not positive.
pub fn share_pct(a: f64, b: f64) -> Option<String> {
    (b > 0.0).then(|| format!("{:.1}", 100.0 * a / b))
}

/// `a ÷ b` as a factor, two decimals; `None` when `b` is not positive.
pub fn factor(a: f64, b: f64) -> Option<String> {
    (b > 0.0).then(|| format!("{:.2}", a / b))
}

/// The section, `runs` times per case.
pub fn defaults(b: &mut Bench) -> Result<(), Error> {
    b.log("defaults: the default (adaptive) wait against busy-waiting, blocking, halt polling and the old default; threads not pinned");
    let plan = Plan::read(b)?;
    // Everything but the halt polling case runs with the value the
    // machine booted with, even in a run that set another.
    let (_as_booted, halt_text) = as_booted(b);
    note(b, &plan, &halt_text)?;
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            return Ok(());
        }
        pipe(b, &plan, r)?;
    }
    for &len in &plan.sizes {
        for r in 1..=b.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            switch(b, &plan, len, r)?;
        }
    }
    for path in ["pipe", "switch"] {
        for r in 1..=b.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            rtt(b, &plan, path, r)?;
        }
    }
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            return Ok(());
        }
        idle(b, &plan, r)?;
        if super::signals::interrupted() {
            return Ok(());
        }
        slow_stream(b, &plan, r)?;
    }
    b.daemon_stop();
    Ok(())
}

/// Puts the guest halt polling back to the value on the kernel's command
/// line for this section if the run changed it (the guard puts the run's
/// value back). Returns the guard and the value in force, in words.
fn as_booted(b: &mut Bench) -> (Option<HaltPoll>, String) {
    let param = Path::new(halt_poll::PARAM);
    let now = halt_poll::current(param);
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let booted = halt_poll::booted(&cmdline);
    match (booted, now.parse::<u64>()) {
        (_, Err(_)) => (None, format!("{now} (no cpuidle-haltpoll here)")),
        (None, Ok(v)) => (
            None,
            format!("{v} ns (the value in force; the kernel command line names none)"),
        ),
        (Some(bv), Ok(v)) if bv == v => (
            None,
            format!("{v} ns, as booted (`haltpoll.guest_halt_poll_ns={bv}`)"),
        ),
        (Some(bv), Ok(v)) => match HaltPoll::set(param, bv) {
            Ok(g) => {
                b.log(&format!(
                    "  guest halt polling back to {bv} ns, as booted, for this section (the run had {v} ns)"
                ));
                (
                    Some(g),
                    format!("{bv} ns, as booted (`haltpoll.guest_halt_poll_ns={bv}`; the run's {v} ns put back after the section)"),
                )
            }
            Err(e) => {
                b.log(&format!("  warning: {e}"));
                (None, format!("{v} ns, not as booted ({bv} ns): {e}"))
            }
        },
    }
}

/// How the section was measured, every number from the parameters.
fn note(b: &Bench, p: &Plan, halt_text: &str) -> Result<(), Error> {
    let tick = pct_of_core(1, clock_ticks(), p.idle_secs as f64).unwrap_or_default();
    let text = format!(
        "The default wait (no wait option: pkt-gen's and the switch worker's adaptive spin-then-sleep) against its references, each run of each case back to back, {runs} run(s): no thread pinned (the scheduler places the pkt-gens and the daemon's worker), guest halt polling {halt_text}. \
Pipe: `pkt-gen -f tx -l 60 -b {burst}` into `dp{{N` → `pkt-gen -f rx -b {burst}` on `dp}}N`, {secs} s per run, without a wait option, with `--busy` and with `--blocking` on both; default ÷ busy is the received rates' ratio within one run. \
Switch: two ring ports `valedLEN:a` → `:b`, a fresh `serve --workers 1` per case: the default as booted; the same default with guest halt polling set to {halt} ns for that case only (put back after it, also on an error or a signal); the old default, `serve --workers 1 --idle-poll-us 0` with `--blocking` pkt-gens; `-b {burst}`, {secs} s per run; as booted ÷ halt polling within one run. \
CPU, all processes: user + system time of both pkt-gens (their `cpu_seconds`) and, through the switch, of the daemon (/proc/PID/stat over the run), per million packets received. \
Round trips: `pkt-gen -f ping -n {n}` ↔ `pkt-gen -f pong`, through a pipe and through vale0 (a fresh daemon per switch case), without a wait option and busy-waiting (`--busy` on both; through the switch also `serve --idle-poll-us {busy_us}`{busy_worker}); default ÷ busy of the p50s within one run. \
Idle: a fresh `serve --workers 1` with 8 `pkt-gen -f rx` (no wait option) on `vale0:i1..i8`, no traffic: the daemon's and the 8 receivers' CPU together over {idle} s after 1 s to settle; then a fresh daemon, `pkt-gen -f rx` on `vale0:r` and `pkt-gen -f tx -l 60 -R {rate}` into `vale0:s`: the receiver's CPU over {idle} s starting 1 s into the traffic. CPU from /proc/PID/stat (all threads) as % of one core; one clock tick over {idle} s is {tick} % of a core.",
        runs = b.runs,
        burst = p.burst,
        secs = p.secs,
        halt = p.halt_ns,
        n = p.ping_n,
        busy_us = p.busy_poll_us,
        busy_worker = if p.busy_poll_us == 0 {
            ", the worker sleeping between batches: a spinning worker would be a third spinner on two CPUs and wait out scheduler slices"
        } else {
            ", the worker spinning up to that long after each batch, yielding every 64 turns"
        },
        idle = p.idle_secs,
        rate = p.rate_pps,
    );
    b.data.note(SECTION, &text)
}

/// Received Mpps and CPU per million packets of one throughput run;
/// `daemon`: whether the daemon's CPU counts (through the switch).
fn tput_samples(
    b: &mut Bench,
    case: &str,
    system: &str,
    r: u32,
    t: &Tput,
    daemon: bool,
) -> Result<(), Error> {
    b.data.sample(
        &Key::received(SECTION, case, system, "-"),
        r,
        &mpps(t.rx_pps()),
    )?;
    let cpu = if daemon {
        t.daemon_s.map(|d| d + t.clients_cpu_s())
    } else {
        Some(t.clients_cpu_s())
    };
    let cost = cpu
        .and_then(|c| per_mpkt(c, t.rx_packets()))
        .unwrap_or_else(|| "x".into());
    let k = key(case, system, "CPU, all processes", "s per Mpkt", "lower");
    b.data.sample(&k, r, &cost)?;
    b.log(&format!(
        "  {system}, {case}, run {r}: {} Mpps; rx {}; tx {}",
        mpps(t.rx_pps()),
        t.rx.waits(),
        t.tx.waits()
    ));
    Ok(())
}

/// One run of the pipe: default, busy, blocking; default ÷ busy.
fn pipe(b: &mut Bench, p: &Plan, r: u32) -> Result<(), Error> {
    let mut got = [None, None, None];
    for (i, (wait, sys)) in [
        (Wait::Default, PIPE_DEFAULT),
        (Wait::Busy, PIPE_BUSY),
        (Wait::Blocking, PIPE_BLOCKING),
    ]
    .into_iter()
    .enumerate()
    {
        if super::signals::interrupted() {
            return Ok(());
        }
        if let Err(e) = b.daemon_ensure(&["--workers", "1"]) {
            b.data
                .miss(SECTION, PIPE_CASE, sys, &format!("run {r}: {e}"))?;
            continue;
        }
        let n = b.next_pipe();
        let (rxp, txp) = (format!("dp}}{n}"), format!("dp{{{n}"));
        let plan = TputPlan {
            label: &format!("defaults-pipe-{}-r{r}", wait.word()),
            rx_port: &rxp,
            tx_port: &txp,
            len: 60,
            burst: p.burst,
            wait,
            secs: p.secs,
            rx_cpu: None,
            tx_cpu: None,
            stats: false,
        };
        match b.tput(&plan) {
            Ok(t) => {
                tput_samples(b, PIPE_CASE, sys, r, &t, false)?;
                got[i] = Some(t.rx_pps());
            }
            Err(e) => b
                .data
                .miss(SECTION, PIPE_CASE, sys, &format!("run {r}: {e}"))?,
        }
    }
    if let [Some(d), Some(busy), _] = got {
        if let Some(pct) = share_pct(d, busy) {
            let k = key(PIPE_CASE, PIPE_DEFAULT, "default ÷ --busy", "%", "higher");
            b.data.sample(&k, r, &pct)?;
            b.log(&format!("  pipe run {r}: default ÷ busy = {pct} %"));
        }
    }
    Ok(())
}

/// One run through the switch at `len` B: as booted, with halt polling,
/// the old default; as booted ÷ halt polling.
fn switch(b: &mut Bench, p: &Plan, len: u64, r: u32) -> Result<(), Error> {
    let case = format!("through a switch, {len} B");
    let halt_sys = p.sw_halt();
    let cases: [(&str, &[&str], Wait, bool); 3] = [
        (SW_BOOTED, &["--workers", "1"], Wait::Default, false),
        (&halt_sys, &["--workers", "1"], Wait::Default, true),
        (
            SW_OLD,
            &["--workers", "1", "--idle-poll-us", "0"],
            Wait::Blocking,
            false,
        ),
    ];
    let mut got = [None, None, None];
    for (i, (sys, daemon, wait, halt)) in cases.into_iter().enumerate() {
        if super::signals::interrupted() {
            return Ok(());
        }
        // Put back when this case ends, whatever ends it.
        let _halt = if halt {
            match HaltPoll::set(Path::new(halt_poll::PARAM), p.halt_ns) {
                Ok(g) => Some(g),
                Err(e) => {
                    b.data.miss(SECTION, &case, sys, &format!("run {r}: {e}"))?;
                    continue;
                }
            }
        } else {
            None
        };
        // A fresh daemon: its worker learns nothing from the case before.
        if let Err(e) = b.daemon_start(daemon) {
            b.data.miss(SECTION, &case, sys, &format!("run {r}: {e}"))?;
            continue;
        }
        let label = format!(
            "defaults-switch-{len}-{}-r{r}",
            ["booted", "haltpoll", "old"][i]
        );
        let (rxp, txp) = (format!("valed{len}:b"), format!("valed{len}:a"));
        let plan = TputPlan {
            label: &label,
            rx_port: &rxp,
            tx_port: &txp,
            len,
            burst: p.burst,
            wait,
            secs: p.secs,
            rx_cpu: None,
            tx_cpu: None,
            stats: false,
        };
        let result = b.tput(&plan);
        // The daemon goes before the halt polling goes back.
        b.daemon_stop();
        match result {
            Ok(t) => {
                tput_samples(b, &case, sys, r, &t, true)?;
                got[i] = Some(t.rx_pps());
            }
            Err(e) => b.data.miss(SECTION, &case, sys, &format!("run {r}: {e}"))?,
        }
    }
    if let [Some(booted), Some(halt), _] = got {
        if let Some(pct) = share_pct(booted, halt) {
            let k = key(
                &case,
                SW_BOOTED,
                "as booted ÷ with halt polling",
                "%",
                "higher",
            );
            b.data.sample(&k, r, &pct)?;
            b.log(&format!(
                "  switch {len} B run {r}: as booted ÷ halt polling = {pct} %"
            ));
        }
    }
    Ok(())
}

/// One round-trip run through `path` ("pipe" or "switch"): default, then
/// busy; default ÷ busy of the p50s.
fn rtt(b: &mut Bench, p: &Plan, path: &str, r: u32) -> Result<(), Error> {
    let (case, default_sys, busy_sys) = if path == "pipe" {
        ("pipe, ping/pong", RTT_PIPE_DEFAULT, RTT_PIPE_BUSY)
    } else {
        ("through a switch, ping/pong", RTT_SW_DEFAULT, RTT_SW_BUSY)
    };
    let poll = p.busy_poll_us.to_string();
    let busy_daemon: &[&str] = if path == "pipe" {
        &["--workers", "1"]
    } else {
        &["--workers", "1", "--idle-poll-us", &poll]
    };
    let mut p50 = [None, None];
    for (i, (sys, wait, daemon)) in [
        (default_sys, Wait::Default, &["--workers", "1"][..]),
        (busy_sys, Wait::Busy, busy_daemon),
    ]
    .into_iter()
    .enumerate()
    {
        if super::signals::interrupted() {
            return Ok(());
        }
        if path == "switch" {
            // A fresh daemon per case, as for throughput.
            if let Err(e) = b.daemon_start(daemon) {
                b.data.miss(SECTION, case, sys, &format!("run {r}: {e}"))?;
                continue;
            }
        }
        let plan = RttPlan {
            label: &format!("defaults-rtt-{path}-{}-r{r}", wait.word()),
            mode: wait.word(),
            path,
            wait,
            daemon,
            count: p.ping_n,
            ping_cpu: None,
            pong_cpu: None,
        };
        match b.rtt_run(&plan) {
            Ok(report) => {
                for (metric, v) in [("RTT p50", &report.rtt.p50), ("RTT p99", &report.rtt.p99)] {
                    let v = v.clone().unwrap_or_else(|| "x".into());
                    b.data
                        .sample(&key(case, sys, metric, "ns", "lower"), r, &v)?;
                }
                p50[i] = report
                    .rtt
                    .p50
                    .as_deref()
                    .and_then(|v| v.parse::<f64>().ok());
                b.log(&format!("    ping: {}", report.waits()));
            }
            Err(e) => b.data.miss(SECTION, case, sys, &format!("run {r}: {e}"))?,
        }
    }
    if path == "switch" {
        b.daemon_stop();
    }
    if let [Some(d), Some(busy)] = p50 {
        if let Some(x) = factor(d, busy) {
            let k = key(
                case,
                default_sys,
                "default ÷ busy-waiting, RTT p50",
                "×",
                "lower",
            );
            b.data.sample(&k, r, &x)?;
            b.log(&format!("  RTT {path} run {r}: default ÷ busy = {x}×"));
        }
    }
    Ok(())
}

/// A % of a core sample from a CPU window.
fn pct_sample(
    b: &Bench,
    case: &str,
    system: &str,
    metric: &str,
    r: u32,
    w: &CpuWindow,
    ticks: u64,
) -> Result<(), Error> {
    b.data
        .sample(
            &key(case, system, metric, "% of a core", "lower"),
            r,
            &w.pct(ticks),
        )
        .map(|_| ())
}

/// One idle window: 8 waiting receivers, no traffic.
fn idle(b: &mut Bench, p: &Plan, r: u32) -> Result<(), Error> {
    if let Err(e) = b.daemon_start(&["--workers", "1"]) {
        return b
            .data
            .miss(SECTION, IDLE_CASE, IDLE_SYS, &format!("run {r}: {e}"));
    }
    let (names, pids) = open_idle_ports(b, "defaults-idle-rx", p.idle_secs);
    let result = match pids {
        Err(e) => b
            .data
            .miss(SECTION, IDLE_CASE, IDLE_SYS, &format!("run {r}: {e}")),
        Ok(pids) => {
            // Let the start-up settle.
            std::thread::sleep(Duration::from_secs(1));
            match cpu_window(b, p.idle_secs, &pids) {
                Some(w) => {
                    let all = w.daemon + w.clients_sum();
                    pct_sample(
                        b,
                        IDLE_CASE,
                        IDLE_SYS,
                        "CPU, daemon + receivers",
                        r,
                        &w,
                        all,
                    )?;
                    pct_sample(b, IDLE_CASE, IDLE_SYS, "CPU, daemon", r, &w, w.daemon)?;
                    pct_sample(
                        b,
                        IDLE_CASE,
                        IDLE_SYS,
                        "CPU, receivers",
                        r,
                        &w,
                        w.clients_sum(),
                    )?;
                    b.log(&format!(
                        "  idle run {r}: daemon + 8 receivers {} % of a core (ticks: daemon {}, receivers {:?}, {:.2} s)",
                        w.pct(all),
                        w.daemon,
                        w.clients,
                        w.wall
                    ));
                    Ok(())
                }
                None => b.data.miss(
                    SECTION,
                    IDLE_CASE,
                    IDLE_SYS,
                    &format!("run {r}: could not read /proc/PID/stat"),
                ),
            }
        }
    };
    for n in &names {
        b.procs.stop(n);
    }
    b.daemon_stop();
    result
}

/// One port receiving `rate_pps`: the receiver's CPU over a window that
/// starts 1 s into the traffic.
fn slow_stream(b: &mut Bench, p: &Plan, r: u32) -> Result<(), Error> {
    let case = p.rate_case();
    let miss = |b: &Bench, why: &str| {
        b.data
            .miss(SECTION, &case, RATE_SYS, &format!("run {r}: {why}"))
    };
    if let Err(e) = b.daemon_start(&["--workers", "1"]) {
        return miss(b, &e);
    }
    let secs = p.idle_secs;
    let rx_dur = (secs + 30).to_string();
    let cmd = b.rs_cmd(&[
        "pkt-gen",
        "-i",
        "vale0:r",
        "-f",
        "rx",
        "--duration",
        &rx_dur,
        "-T",
        "0",
        "--json",
    ]);
    let rx = match b
        .procs
        .start(&format!("defaults-rate-rx-r{r}"), None, secs + 40, &cmd)
    {
        Ok(n) => n,
        Err(e) => return miss(b, &e),
    };
    if let Err(why) = b.procs.ready_or_stop(&rx, 15) {
        b.daemon_stop();
        return miss(b, &format!("the receiver did not open vale0:r: {why}"));
    }
    let (rate, tx_dur) = (p.rate_pps.to_string(), (secs + 3).to_string());
    let cmd = b.rs_cmd(&[
        "pkt-gen",
        "-i",
        "vale0:s",
        "-f",
        "tx",
        "-l",
        "60",
        "-R",
        &rate,
        "--duration",
        &tx_dur,
        "-T",
        "0",
        "--json",
    ]);
    let tx = match b
        .procs
        .start(&format!("defaults-rate-tx-r{r}"), None, secs + 40, &cmd)
    {
        Ok(n) => n,
        Err(e) => {
            b.procs.stop(&rx);
            b.daemon_stop();
            return miss(b, &e);
        }
    };
    // The window starts 1 s into the traffic.
    std::thread::sleep(Duration::from_secs(1));
    let pids = [b.procs.command_pid(&rx), b.procs.command_pid(&tx)];
    let window = match pids {
        [Some(rp), Some(tp)] => cpu_window(b, secs, &[rp, tp]),
        _ => None,
    };
    let exit = b.procs.wait(&tx);
    std::thread::sleep(Duration::from_millis(300));
    let rx_exit = b.procs.stop(&rx);
    b.daemon_stop();
    let rxr = b.read_report(&rx).unwrap_or_default();
    let received = rxr.packets.unwrap_or(0);
    let w = match window {
        Some(w) if exit.ok() && received > 0 && w.clients.len() == 2 => w,
        _ => {
            let why = if !exit.ok() {
                b.procs.why(&tx, exit)
            } else if received == 0 {
                format!(
                    "the receiver got no packets ({})",
                    b.procs.why(&rx, rx_exit)
                )
            } else {
                format!("a process ended before the window closed (see raw/{tx}, raw/{rx})")
            };
            return miss(b, &why);
        }
    };
    pct_sample(b, &case, RATE_SYS, "CPU, receiver", r, &w, w.clients[0])?;
    pct_sample(b, &case, RATE_SYS, "CPU, daemon", r, &w, w.daemon)?;
    pct_sample(b, &case, RATE_SYS, "CPU, sender", r, &w, w.clients[1])?;
    b.log(&format!(
        "  {case}, run {r}: receiver {} %, daemon {} %, sender {} % of a core; received {received} packets; rx {}",
        w.pct(w.clients[0]),
        w.pct(w.daemon),
        w.pct(w.clients[1]),
        rxr.waits()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios() {
        assert_eq!(share_pct(9.0, 10.0).as_deref(), Some("90.0"));
        assert_eq!(share_pct(1.0, 0.0), None);
        assert_eq!(factor(30_000.0, 12_000.0).as_deref(), Some("2.50"));
        assert_eq!(factor(1.0, -1.0), None);
    }

    #[test]
    fn the_target_keys_are_the_samples_keys() {
        // bench/targets.tsv names these systems and metrics: a rename here
        // must go there too.
        let t = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/targets.tsv"),
        )
        .unwrap();
        let lines: Vec<Vec<&str>> = t
            .lines()
            .map(|l| l.split('\t').collect())
            .filter(|c: &Vec<&str>| c.first() == Some(&SECTION))
            .collect();
        let has = |case: &str, system: &str, metric: &str| {
            lines
                .iter()
                .any(|c| c.get(1..4) == Some(&[case, system, metric][..]))
        };
        assert!(has(PIPE_CASE, PIPE_DEFAULT, "default ÷ --busy"));
        for len in [60, 1514] {
            let case = format!("through a switch, {len} B");
            assert!(
                has(&case, SW_BOOTED, "as booted ÷ with halt polling"),
                "{case}"
            );
        }
        for (case, sys) in [
            ("pipe, ping/pong", RTT_PIPE_DEFAULT),
            ("through a switch, ping/pong", RTT_SW_DEFAULT),
        ] {
            assert!(has(case, sys, "default ÷ busy-waiting, RTT p50"), "{case}");
        }
        assert!(has(IDLE_CASE, IDLE_SYS, "CPU, daemon + receivers"));
        assert!(has(
            "one port receiving 1000 packets/s",
            RATE_SYS,
            "CPU, receiver"
        ));
    }
}
