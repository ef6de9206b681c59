//! The idle and memory sections: a fresh daemon, 8 pkt-gen rx (blocking)
//! on `vale0:i1..i8`, no traffic; the CPU of the daemon and of the
//! pkt-gens over a window, then the daemon's `VmRSS − RssShmem` with those
//! 8 ports open and with 56 persistent ports added (64 in all).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::procs::{clock_ticks, cpu_ticks};
use super::Bench;
use crate::error::Error;
use crate::figures::pct_of_core;
use crate::write::Key;

const CASE: &str = "8 ring ports open, no traffic";
const DAEMON: &str = "ringswitch daemon";
const CLIENTS: &str = "ringswitch, the 8 blocked pkt-gen rx";
/// The memory cases: (case, unit).
const MEMORY: [(&str, &str); 3] = [
    ("8 ring ports open", "KiB"),
    ("64 ring ports (56 persistent added)", "KiB"),
    ("per added port", "B"),
];
const RSS: &str = "VmRSS − RssShmem";

fn pct_key<'a>(system: &'a str, metric: &'a str) -> Key<'a> {
    Key {
        section: "idle",
        case: CASE,
        system,
        metric,
        unit: "% of a core",
        better: "lower",
        x: "-",
    }
}

/// A field of `/proc/PID/status` in kB (`VmRSS:   1234 kB`).
pub fn status_kb(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// `VmRSS − RssShmem` in KiB, with RssAnon and RssFile for the log.
pub fn rss_without_shmem(status: &str) -> Option<(u64, u64, u64)> {
    let rss = status_kb(status, "VmRSS")?;
    let shm = status_kb(status, "RssShmem")?;
    let anon = status_kb(status, "RssAnon")?;
    let file = status_kb(status, "RssFile")?;
    Some((rss.saturating_sub(shm), anon, file))
}

/// How many ports of `ctl stats --json` are on switch `sw` (`sw:` names).
pub fn ports_on(stats_json: &str, sw: &str) -> Option<usize> {
    let v: Value = serde_json::from_str(stats_json).ok()?;
    let prefix = format!("{sw}:");
    Some(
        v.as_array()?
            .iter()
            .filter(|p| {
                p.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .count(),
    )
}

impl Bench {
    fn daemon_rss(&self) -> Option<(u64, u64, u64)> {
        let pid = self.daemon.pid?;
        rss_without_shmem(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
    }
}

/// Both sections, `runs` times.
pub fn idle(b: &mut Bench) -> Result<(), Error> {
    b.log("idle: a fresh daemon with 8 ports open, no traffic; then its memory");
    let secs = b.params.one("idle_secs")?;
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            break;
        }
        one_run(b, secs, r)?;
    }
    Ok(())
}

fn miss_idle(b: &Bench, reason: &str) -> Result<(), Error> {
    b.data.miss("idle", CASE, DAEMON, reason)?;
    b.data.miss("idle", CASE, CLIENTS, reason)
}

fn miss_memory(b: &Bench, from: usize, reason: &str) -> Result<(), Error> {
    for (case, _) in &MEMORY[from..] {
        b.data.miss("memory", case, DAEMON, reason)?;
    }
    Ok(())
}

/// Starts 8 pkt-gen rx on `vale0:i1..i8` (no wait option: the default;
/// any CPU), named `LABEL-i1..i8`, to run `secs` plus a margin, and waits
/// until each has opened its port. Returns the names started (stop them
/// all, whatever happened) and their pids, or why the 8 are not open.
pub fn open_idle_ports(
    b: &mut Bench,
    label: &str,
    secs: u64,
) -> (Vec<String>, Result<Vec<u32>, String>) {
    let mut names = Vec::new();
    let mut pids = Vec::new();
    let (dur, limit) = ((secs + 50).to_string(), secs + 60);
    for i in 1..=8 {
        let port = format!("vale0:i{i}");
        let cmd = b.rs_cmd(&[
            "pkt-gen",
            "-i",
            &port,
            "-f",
            "rx",
            "--duration",
            &dur,
            "-T",
            "0",
            "--json",
        ]);
        match b.procs.start(&format!("{label}-i{i}"), None, limit, &cmd) {
            Ok(n) => names.push(n),
            Err(e) => return (names, Err(e)),
        }
    }
    for (i, n) in names.iter().enumerate() {
        if let Err(why) = b.procs.ready_or_stop(n, 15) {
            let e = format!("pkt-gen rx vale0:i{} did not open its port: {why}", i + 1);
            return (names, Err(e));
        }
        match b.procs.command_pid(n) {
            Some(p) => pids.push(p),
            None => return (names.clone(), Err(format!("cannot find the pid of {n}"))),
        }
    }
    (names, Ok(pids))
}

/// The CPU the daemon and some clients spent over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuWindow {
    /// The daemon's clock ticks (user + system, all threads).
    pub daemon: u64,
    /// Each client's clock ticks, in the order asked.
    pub clients: Vec<u64>,
    /// The window's length in seconds.
    pub wall: f64,
    /// Clock ticks per second.
    pub hz: f64,
}

impl CpuWindow {
    /// `ticks` as % of one core over the window (two decimals).
    pub fn pct(&self, ticks: u64) -> String {
        pct_of_core(ticks, self.hz, self.wall).unwrap_or_default()
    }

    /// The clients' ticks together.
    pub fn clients_sum(&self) -> u64 {
        self.clients.iter().sum()
    }
}

/// The daemon's and `pids`' CPU over `secs` s from now (shorter if the run
/// is interrupted), from /proc/PID/stat; `None` if one could not be read.
pub fn cpu_window(b: &Bench, secs: u64, pids: &[u32]) -> Option<CpuWindow> {
    let hz = clock_ticks();
    let daemon = b.daemon.pid;
    let t0 = Instant::now();
    let d0 = daemon.and_then(cpu_ticks);
    let p0: Vec<Option<u64>> = pids.iter().map(|&p| cpu_ticks(p)).collect();
    let deadline = t0 + Duration::from_secs(secs);
    while Instant::now() < deadline && !super::signals::interrupted() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let wall = t0.elapsed().as_secs_f64();
    let d1 = daemon.and_then(cpu_ticks);
    let p1: Vec<Option<u64>> = pids.iter().map(|&p| cpu_ticks(p)).collect();
    let clients: Option<Vec<u64>> = p0
        .iter()
        .zip(&p1)
        .map(|(a, b)| Some(b.as_ref()?.saturating_sub(*a.as_ref()?)))
        .collect();
    Some(CpuWindow {
        daemon: d1?.saturating_sub(d0?),
        clients: clients?,
        wall,
        hz,
    })
}

fn one_run(b: &mut Bench, secs: u64, r: u32) -> Result<(), Error> {
    if let Err(e) = b.daemon_start(&["--workers", "1"]) {
        miss_idle(b, &e)?;
        return miss_memory(b, 0, &e);
    }
    let (names, pids) = open_idle_ports(b, "idle-rx", secs);
    let result = match pids {
        Err(e) => {
            miss_idle(b, &format!("idle: {e}"))?;
            miss_memory(b, 0, &format!("rss: the 8 ports were not open (idle: {e})"))
        }
        Ok(pids) => measure(b, secs, r, &pids),
    };
    for n in &names {
        b.procs.stop(n);
    }
    b.daemon_stop();
    result
}

fn measure(b: &mut Bench, secs: u64, r: u32, pids: &[u32]) -> Result<(), Error> {
    // Let the start-up settle.
    std::thread::sleep(Duration::from_secs(1));
    match cpu_window(b, secs, pids) {
        Some(w) if w.clients.len() == 8 => {
            let own = w.pct(w.daemon);
            let all = w.pct(w.clients_sum());
            let max = w.pct(w.clients.iter().copied().max().unwrap_or(0));
            b.data
                .sample(&pct_key(DAEMON, "CPU, switch process"), r, &own)?;
            b.data.sample(&pct_key(CLIENTS, "CPU, clients"), r, &all)?;
            b.data
                .sample(&pct_key(CLIENTS, "CPU, one client at most"), r, &max)?;
            let tick = w.pct(1);
            b.procs.log.quiet(&format!(
                "idle: daemon ticks {}, pkt-gen ticks {:?}, CLK_TCK {}, {:.3} s; one tick is {tick}% of a core",
                w.daemon, w.clients, w.hz, w.wall
            ));
            b.log(&format!(
                "  idle: daemon {own}% of a core, 8 pkt-gen {all}% in all"
            ));
        }
        _ => miss_idle(b, "idle: could not read /proc/PID/stat")?,
    }
    memory(b, r)
}

fn memory(b: &mut Bench, r: u32) -> Result<(), Error> {
    let key = |i: usize| Key {
        section: "memory",
        case: MEMORY[i].0,
        system: DAEMON,
        metric: RSS,
        unit: MEMORY[i].1,
        better: "lower",
        x: "-",
    };
    let Some((rss8, anon, file)) = b.daemon_rss() else {
        let pid = b.daemon.pid.unwrap_or(0);
        return miss_memory(b, 0, &format!("rss: cannot read /proc/{pid}/status"));
    };
    b.data.sample(&key(0), r, &rss8.to_string())?;
    b.procs.log.quiet(&format!(
        "rss 8 ports: {rss8} KiB without shmem, RssAnon {anon} kB, RssFile {file} kB"
    ));
    let mut added = true;
    for i in 9..=64 {
        let port = format!("vale0:p{i}@conf:slots=64");
        if b.ctl(&["port", "add", &port]).is_none() {
            added = false;
            break;
        }
    }
    let listed = b
        .ctl(&["stats", "--json"])
        .and_then(|j| ports_on(&j, "vale0"));
    if !added || listed != Some(64) {
        return miss_memory(
            b,
            1,
            "rss: adding 56 persistent ports vale0:p9..p64 failed or ctl stats shows another count (see log)",
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let Some((rss64, _, _)) = b.daemon_rss() else {
        return miss_memory(b, 1, "rss: cannot read the daemon's /proc/PID/status");
    };
    let per_port = ((rss64 as f64 - rss8 as f64) * 1024.0 / 56.0).round();
    b.data.sample(&key(1), r, &rss64.to_string())?;
    b.data.sample(&key(2), r, &format!("{per_port:.0}"))?;
    b.log(&format!(
        "  rss: {rss8} KiB with 8 ports, {rss64} KiB with 64, {per_port:.0} B per port"
    ));
    Ok(())
}
