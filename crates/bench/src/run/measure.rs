//! One throughput run (a receiver, then a sender for a fixed time) and one
//! round-trip run (pong, then ping for a count), each with its processes'
//! reports read back, or the reason it failed.

use std::time::{Duration, Instant};

use super::procs::{clock_ticks, cpu_ticks, Cpu, Exit};
use super::Bench;
use crate::figures::{mpps, tick_seconds};
use crate::pktgen::{Report, Rtt};

/// How a pkt-gen waits when its ring is full or empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// No option: the adaptive default (spins while spinning pays, then
    /// sleeps).
    Default,
    /// `--busy`: spins.
    Busy,
    /// `--blocking`: sleeps at once, never spins.
    Blocking,
}

impl Wait {
    /// The pkt-gen options that ask for it.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Wait::Default => &[],
            Wait::Busy => &["--busy"],
            Wait::Blocking => &["--blocking"],
        }
    }

    /// A word for labels and the log.
    pub fn word(self) -> &'static str {
        match self {
            Wait::Default => "default",
            Wait::Busy => "busy",
            Wait::Blocking => "blocking",
        }
    }
}

/// What a throughput run measured.
#[derive(Clone, Debug, Default)]
pub struct Tput {
    /// The receiver's report (its rate: first to last received packet).
    pub rx: Report,
    /// The sender's report.
    pub tx: Report,
    /// The daemon's CPU seconds over the whole run, if a daemon runs.
    pub daemon_s: Option<f64>,
    /// `ctl stats --json` after the sender stopped, while the receiver
    /// still held its port (its counters go with it), if the plan asked.
    pub stats: Option<String>,
}

impl Tput {
    /// Packets per second received.
    pub fn rx_pps(&self) -> f64 {
        self.rx.pps.unwrap_or(0.0)
    }

    /// Packets received.
    pub fn rx_packets(&self) -> u64 {
        self.rx.packets.unwrap_or(0)
    }

    /// CPU seconds of both pkt-gens (a missing one counts 0).
    pub fn clients_cpu_s(&self) -> f64 {
        self.rx.cpu_seconds.unwrap_or(0.0) + self.tx.cpu_seconds.unwrap_or(0.0)
    }
}

/// One throughput run's set-up.
#[derive(Clone, Debug)]
pub struct TputPlan<'a> {
    /// Stem of the processes' output files.
    pub label: &'a str,
    /// The receiver's port.
    pub rx_port: &'a str,
    /// The sender's port.
    pub tx_port: &'a str,
    /// Frame length.
    pub len: u64,
    /// pkt-gen `-b`.
    pub burst: u64,
    /// How both pkt-gens wait.
    pub wait: Wait,
    /// Seconds of traffic.
    pub secs: u64,
    /// The receiver's CPU (`None`: any, the scheduler chooses).
    pub rx_cpu: Cpu,
    /// The sender's CPU (`None`: any).
    pub tx_cpu: Cpu,
    /// Whether to take the switch's counters before the receiver stops.
    pub stats: bool,
}

impl Bench {
    pub(super) fn read_report(&self, name: &str) -> Option<Report> {
        Report::from_stdout(&std::fs::read_to_string(self.procs.out_path(name)).ok()?)
    }

    /// One receiver, then one sender; `Err` is why it failed.
    pub fn tput(&mut self, p: &TputPlan<'_>) -> Result<Tput, String> {
        let wait = p.wait.args();
        let t0 = Instant::now();
        let dc0 = self.daemon.pid.and_then(cpu_ticks);
        let (burst, len, rx_secs) = (
            p.burst.to_string(),
            p.len.to_string(),
            (p.secs + 30).to_string(),
        );
        let mut rx_args = vec!["pkt-gen", "-i", p.rx_port, "-f", "rx", "-b", &burst];
        rx_args.extend_from_slice(wait);
        rx_args.extend_from_slice(&["--duration", &rx_secs, "-T", "0", "--json"]);
        let cmd = self.rs_cmd(&rx_args);
        let rx = self
            .procs
            .start(&format!("{}-rx", p.label), p.rx_cpu, p.secs + 40, &cmd)?;
        self.procs
            .ready_or_stop(&rx, 15)
            .map_err(|why| format!("receiver did not open {}: {why}", p.rx_port))?;
        let secs = p.secs.to_string();
        let mut tx_args = vec![
            "pkt-gen", "-i", p.tx_port, "-f", "tx", "-l", &len, "-b", &burst,
        ];
        tx_args.extend_from_slice(wait);
        tx_args.extend_from_slice(&["--duration", &secs, "-T", "0", "--json"]);
        let cmd = self.rs_cmd(&tx_args);
        let (tx, exit) = self
            .procs
            .run(&format!("{}-tx", p.label), p.tx_cpu, p.secs + 30, &cmd)?;
        // The last frames in flight reach the receiver.
        std::thread::sleep(Duration::from_millis(300));
        let stats = if p.stats {
            self.ctl(&["stats", "--json"])
        } else {
            None
        };
        // SIGTERM ends the receiver cleanly; it still prints its report.
        let rx_exit = self.procs.stop(&rx);
        let dc1 = self.daemon.pid.and_then(cpu_ticks);
        let daemon_s = match (dc0, dc1) {
            (Some(a), Some(b)) => Some(tick_seconds(b.saturating_sub(a), clock_ticks())),
            _ => None,
        };
        let txr = self.read_report(&tx).unwrap_or_default();
        let rxr = self.read_report(&rx).unwrap_or_default();
        if !exit.ok() || txr.pps.is_none() {
            return Err(format!("sender failed: {}", self.procs.why(&tx, exit)));
        }
        if rxr.pps.is_none() {
            return Err(format!(
                "receiver printed no report: {}",
                self.procs.why(&rx, rx_exit)
            ));
        }
        if rxr.packets.unwrap_or(0) == 0 {
            let sent = txr.packets.map_or("?".to_owned(), |n| n.to_string());
            return Err(format!("receiver got no packets (sender sent {sent})"));
        }
        let t = Tput {
            rx: rxr,
            tx: txr,
            daemon_s,
            stats,
        };
        self.procs.log.quiet(&format!(
            "{}: rx {} pkts {} Mpps, tx {} pkts {} Mpps, {:.1} s",
            p.label,
            t.rx_packets(),
            mpps(t.rx_pps()),
            t.tx.packets.unwrap_or(0),
            mpps(t.tx.pps.unwrap_or(0.0)),
            t0.elapsed().as_secs_f64()
        ));
        Ok(t)
    }

    /// One ping/pong run through a pipe (`path` "pipe") or the switch
    /// vale0 ("switch"), busy or blocking, `count` round trips.
    pub fn rtt(&mut self, path: &str, busy: bool, count: u64) -> Result<Rtt, String> {
        // Blocking through the switch: the worker polls 50 us after each
        // batch, so a reply that comes back within that needs no wake-up.
        // Busy: ping and pong spin on both cores, so the worker must sleep.
        let mut daemon = vec!["--workers", "1"];
        if path == "switch" && !busy {
            daemon.extend_from_slice(&["--idle-poll-us", "50"]);
        }
        let mode = if busy { "busy" } else { "blocking" };
        let plan = RttPlan {
            label: &format!("rtt-{path}-{mode}"),
            mode,
            path,
            wait: if busy { Wait::Busy } else { Wait::Default },
            daemon: &daemon,
            count,
            ping_cpu: Some(self.tx_cpu),
            pong_cpu: Some(self.rx_cpu),
        };
        self.rtt_run(&plan).map(|r| r.rtt)
    }

    /// One ping/pong run as `p` says; the ping's report, or why it failed.
    pub fn rtt_run(&mut self, p: &RttPlan<'_>) -> Result<Report, String> {
        let (path, mode, count) = (p.path, p.mode, p.count);
        self.log(&format!("RTT {path}, {mode}: ping -n {count}"));
        self.daemon_ensure(p.daemon)?;
        let (ping_port, pong_port) = if path == "pipe" {
            let n = self.next_pipe();
            (format!("rp{{{n}"), format!("rp}}{n}"))
        } else {
            ("vale0:ping".to_owned(), "vale0:pong".to_owned())
        };
        let mut pong_args = vec!["pkt-gen", "-i", &pong_port, "-f", "pong"];
        pong_args.extend_from_slice(p.wait.args());
        pong_args.extend_from_slice(&["--duration", "180", "-T", "0", "--json"]);
        let cmd = self.rs_cmd(&pong_args);
        let pong = self
            .procs
            .start(&format!("{}-pong", p.label), p.pong_cpu, 190, &cmd)?;
        self.procs
            .ready_or_stop(&pong, 15)
            .map_err(|why| format!("RTT {path} {mode}: pong did not open {pong_port}: {why}"))?;
        let n = count.to_string();
        let mut ping_args = vec!["pkt-gen", "-i", &ping_port, "-f", "ping", "-n", &n];
        ping_args.extend_from_slice(p.wait.args());
        ping_args.extend_from_slice(&["-T", "0", "--json"]);
        let cmd = self.rs_cmd(&ping_args);
        let (ping, exit): (String, Exit) =
            self.procs
                .run(&format!("{}-ping", p.label), p.ping_cpu, 120, &cmd)?;
        self.procs.stop(&pong);
        let report = self.read_report(&ping).unwrap_or_default();
        if !exit.ok() || report.rtt.p50.is_none() {
            return Err(format!(
                "RTT {path} {mode}: {}",
                self.procs.why(&ping, exit)
            ));
        }
        if let Some(lost) = report.lost.filter(|&l| l > 0) {
            self.log(&format!("  warning: {lost} of {count} pings lost"));
        }
        let r = &report.rtt;
        self.log(&format!(
            "  RTT {path} {mode}: p50 {} ns, p99 {} ns",
            r.p50.as_deref().unwrap_or(""),
            r.p99.as_deref().unwrap_or("")
        ));
        Ok(report)
    }
}

/// One round-trip run's set-up.
#[derive(Clone, Debug)]
pub struct RttPlan<'a> {
    /// Stem of the processes' output files.
    pub label: &'a str,
    /// The mode's name in the log and in failure reasons.
    pub mode: &'a str,
    /// `pipe` (a fresh pipe) or `switch` (vale0:ping ↔ vale0:pong).
    pub path: &'a str,
    /// How ping and pong wait.
    pub wait: Wait,
    /// The daemon's arguments (a running daemon with others is restarted).
    pub daemon: &'a [&'a str],
    /// Round trips.
    pub count: u64,
    /// The ping's CPU (`None`: any).
    pub ping_cpu: Cpu,
    /// The pong's CPU (`None`: any).
    pub pong_cpu: Cpu,
}
