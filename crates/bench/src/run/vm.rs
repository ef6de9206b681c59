//! The vm section: two DPDK testpmd with a virtio_user port each stand in
//! for fast VMs, testpmd txonly (64-byte frames) → the switch → testpmd
//! rxonly. ringswitch: a fresh daemon per run with two VM ports in client
//! mode (`ctl port add valevm:vmN --vhost-user PATH --client`; testpmd owns
//! each socket), its worker on the receiver's or the sender's CPU. Then an
//! idle case (both testpmd interactive: ports up, nothing forwarding), and
//! OVS-DPDK with the same testpmd and placements through
//! `bench/peers/ovs-dpdk.sh` (its default `--ports vhost`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::peers::{load_key, ovs_idle, ovs_placements};
use super::procs::{clock_ticks, cpu_ticks, is_root, save};
use super::testpmd::{self, Dir, Mode};
use super::Bench;
use crate::error::Error;
use crate::figures::{mpps, pct_of_core, per_mpkt};
use crate::write::Key;

/// The switch of the two VM ports.
const SW: &str = "valevm";
/// ringswitch's system name.
const RS: &str = "ringswitch (vhost-user ports)";
/// OVS-DPDK's system name (without `pmd-maxsleep`).
const OVS: &str = "OVS-DPDK";
/// The idle case.
const IDLE_CASE: &str = "two VM-style clients connected, not sending";
/// Deadline for a testpmd to come up and its port to open, and for the
/// first frames to arrive.
const START_S: u64 = 60;

/// Where one run's processes go: receiver, sender, switch CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The receiver testpmd's CPU.
    pub rx: u32,
    /// The sender testpmd's CPU.
    pub tx: u32,
    /// The switch's CPU (ringswitch's worker, OVS's PMD thread).
    pub switch: u32,
}

impl Placement {
    /// `RXTXSW`, as in the processes' names (`010`).
    fn tag(self) -> String {
        format!("{}{}{}", self.rx, self.tx, self.switch)
    }

    /// `RX,TX,SW`, as `ovs-dpdk.sh --placements` takes it.
    fn triple(self) -> String {
        format!("{},{},{}", self.rx, self.tx, self.switch)
    }

    /// The case of the section's table.
    pub fn case(self) -> &'static str {
        if self.switch == self.rx {
            "testpmd txonly → rxonly, 64 B; switch shares the receiver's CPU"
        } else {
            "testpmd txonly → rxonly, 64 B; switch shares the sender's CPU"
        }
    }
}

/// Whether the VM port `port` has a connected frontend, from `ctl port
/// list --json`; `None` if the text says nothing about it.
pub fn port_open(list_json: &str, port: &str) -> Option<bool> {
    port_field(list_json, port, "open")?.as_bool()
}

/// A counter of `port` from `ctl stats --json`.
pub fn port_counter(stats_json: &str, port: &str, field: &str) -> Option<u64> {
    port_field(stats_json, port, field)?.as_u64()
}

fn port_field(json: &str, port: &str, field: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(json).ok()?;
    v.as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(port))?
        .get(field)
        .cloned()
}

/// The switch's counters over a measured window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Seconds.
    pub wall: f64,
    /// The daemon's CPU ticks.
    pub ticks: u64,
    /// Packets delivered to the receiver's port.
    pub delivered: u64,
    /// Packets taken from the sender's port.
    pub taken: u64,
}

impl Window {
    /// The window from the daemon's ticks and `ctl stats --json` at its
    /// start and end; `None` if a figure is missing or nothing was
    /// delivered.
    pub fn from_stats(
        wall: f64,
        ticks: (Option<u64>, Option<u64>),
        s0: &str,
        s1: &str,
    ) -> Option<Window> {
        let rx = format!("{SW}:vm2");
        let tx = format!("{SW}:vm1");
        let d0 = port_counter(s0, &rx, "rx_packets")?;
        let d1 = port_counter(s1, &rx, "rx_packets")?;
        let i0 = port_counter(s0, &tx, "tx_packets")?;
        let i1 = port_counter(s1, &tx, "tx_packets")?;
        (d1 > d0 && wall > 0.0).then_some(Window {
            wall,
            ticks: ticks.1?.checked_sub(ticks.0?)?,
            delivered: d1 - d0,
            taken: i1.saturating_sub(i0),
        })
    }

    /// The daemon's CPU seconds.
    pub fn cpu_s(&self, hz: f64) -> f64 {
        self.ticks as f64 / hz
    }
}

/// What one ringswitch run measured.
#[derive(Clone, Debug, PartialEq)]
struct VmTput {
    /// The receiver's median rate, Mpps.
    rx_mpps: String,
    /// The sender's, if it printed samples.
    tx_mpps: Option<String>,
    /// The switch's counters, or why there are none.
    window: Result<Window, String>,
}

/// The testpmd of a run: their `--file-prefix` runtime directories are
/// removed when it ends.
#[derive(Default)]
pub(super) struct Frontends {
    prefixes: Vec<String>,
}

impl Frontends {
    /// A fresh `--file-prefix`.
    pub(super) fn prefix(&mut self) -> String {
        let seq = self.prefixes.len() + 1;
        let p = format!("ringswitch-bench-{}-{seq}", std::process::id());
        self.prefixes.push(p.clone());
        p
    }
}

impl Drop for Frontends {
    fn drop(&mut self) {
        let dir = testpmd::rundir(is_root(), std::env::var("XDG_RUNTIME_DIR").ok().as_deref());
        for p in &self.prefixes {
            let _ = std::fs::remove_dir_all(PathBuf::from(&dir).join(p));
        }
    }
}

impl Bench {
    /// The socket of VM port `vm` (`vm1`: the sender's, `vm2`: the
    /// receiver's), beside the daemon's.
    fn vm_socket(&self, vm: &str) -> String {
        let sock = PathBuf::from(&self.sock);
        sock.with_file_name(format!("{vm}.sock"))
            .display()
            .to_string()
    }

    /// A fresh daemon with `args` and the two VM ports in client mode.
    fn vm_daemon(&mut self, args: &[&str]) -> Result<(), String> {
        self.daemon_start(args)?;
        for vm in ["vm1", "vm2"] {
            let sock = self.vm_socket(vm);
            let _ = std::fs::remove_file(&sock);
            let port = format!("{SW}:{vm}");
            let add = ["port", "add", &port, "--vhost-user", &sock, "--client"];
            if self.ctl(&add).is_none() {
                self.daemon_stop();
                return Err(format!("ctl {} failed", add.join(" ")));
            }
        }
        Ok(())
    }

    /// Starts a testpmd on VM port `vm` (the command line of
    /// [`testpmd::argv`]); its name.
    fn testpmd_start(
        &mut self,
        fe: &mut Frontends,
        label: &str,
        cpu: u32,
        vm: &str,
        mode: Mode,
        secs: u64,
    ) -> Result<String, String> {
        let prefix = fe.prefix();
        let mac = if vm == "vm1" {
            testpmd::TX_MAC
        } else {
            testpmd::RX_MAC
        };
        let cmd = testpmd::argv(cpu, &prefix, &self.vm_socket(vm), true, mac, mode);
        // Both lcores are placed by --lcores: no taskset.
        if mode == Mode::Idle {
            self.procs.start_interactive(label, None, secs, &cmd)
        } else {
            self.procs.start(label, None, secs, &cmd)
        }
    }

    /// The stdout of process `name` so far.
    pub(super) fn out_text(&self, name: &str) -> String {
        std::fs::read_to_string(self.procs.out_path(name)).unwrap_or_default()
    }

    /// Waits until testpmd `name` is up and the daemon shows VM port `vm`
    /// with a connected frontend.
    fn testpmd_wait(&mut self, name: &str, vm: &str) -> Result<(), String> {
        let port = format!("{SW}:{vm}");
        let deadline = Instant::now() + Duration::from_secs(START_S);
        loop {
            if !self.procs.alive(name) {
                let exit = self.procs.wait(name);
                return Err(format!(
                    "{name} exited during start-up: {}",
                    self.procs.why(name, exit)
                ));
            }
            let log = self.out_text(name);
            if let Some(line) = testpmd::failure(&log) {
                return Err(format!("{name} failed to start its port: {line}"));
            }
            let ready = testpmd::ready(&log);
            if ready
                && self
                    .ctl(&["port", "list", "--json"])
                    .and_then(|j| port_open(&j, &port))
                    == Some(true)
            {
                return Ok(());
            }
            if Instant::now() >= deadline || super::signals::interrupted() {
                let yes = if ready { "yes" } else { "no" };
                return Err(format!(
                    "{name} or {port} not up after {START_S} s (testpmd ready: {yes})"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// One ringswitch run at `pl`: both testpmd up, traffic, a window of
    /// `secs`; stops everything it started.
    fn vm_tput(&mut self, pl: Placement, secs: u64, label: &str) -> Result<VmTput, String> {
        let worker = pl.switch.to_string();
        self.vm_daemon(&["--workers", "1", "--worker-cpus", &worker])?;
        let mut fe = Frontends::default();
        let result = self.vm_tput_traffic(&mut fe, pl, secs, label);
        self.daemon_stop();
        result
    }

    fn vm_tput_traffic(
        &mut self,
        fe: &mut Frontends,
        pl: Placement,
        secs: u64,
        label: &str,
    ) -> Result<VmTput, String> {
        let rx = self.testpmd_start(
            fe,
            &format!("{label}-rx"),
            pl.rx,
            "vm2",
            Mode::RxOnly,
            secs + 60,
        )?;
        if let Err(e) = self.testpmd_wait(&rx, "vm2") {
            self.procs.stop(&rx);
            return Err(e);
        }
        let tx = match self.testpmd_start(
            fe,
            &format!("{label}-tx"),
            pl.tx,
            "vm1",
            Mode::TxOnly(64),
            secs + 50,
        ) {
            Ok(tx) => tx,
            Err(e) => {
                self.procs.stop(&rx);
                return Err(e);
            }
        };
        let result = self.vm_window(&rx, &tx, secs, label);
        self.procs.stop(&tx);
        self.procs.stop(&rx);
        result
    }

    /// The measured window of a run whose receiver `rx` is up and whose
    /// sender `tx` was started.
    fn vm_window(&mut self, rx: &str, tx: &str, secs: u64, label: &str) -> Result<VmTput, String> {
        self.testpmd_wait(tx, "vm1")?;
        self.procs.log.quiet(&format!(
            "{label}: both testpmd up and connected; waiting for traffic"
        ));
        let deadline = Instant::now() + Duration::from_secs(START_S);
        while !testpmd::moving(&self.out_text(rx), Dir::Rx) {
            if Instant::now() >= deadline
                || !self.procs.alive(rx)
                || !self.procs.alive(tx)
                || super::signals::interrupted()
            {
                let stats = self.ctl(&["stats", "--json"]).unwrap_or_default();
                let raw = self.out.join(format!("raw/stats-{label}-fail.json"));
                save(&raw, &stats);
                let sent = testpmd::last_counter(&self.out_text(tx), Dir::Tx)
                    .map_or("?".to_owned(), |n| n.to_string());
                return Err(format!(
                    "the receiver got no packets within {START_S} s (sender TX-packets {sent}; stats in raw/stats-{label}-fail.json)"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        // Past testpmd's warm-up sample.
        std::thread::sleep(Duration::from_millis(1500));
        let pid = self.daemon.pid;
        self.procs
            .log
            .quiet(&format!("{label}: traffic; window of {secs}s starts"));
        let t0 = Instant::now();
        let c0 = pid.and_then(cpu_ticks);
        let s0 = self.ctl(&["stats", "--json"]).unwrap_or_default();
        sleep_window(secs);
        let wall = t0.elapsed().as_secs_f64();
        let c1 = pid.and_then(cpu_ticks);
        let s1 = self.ctl(&["stats", "--json"]).unwrap_or_default();
        // The receiver's samples cover the window (or a bound passes).
        let deadline = Instant::now() + Duration::from_secs(30);
        while testpmd::covered(&testpmd::samples(&self.out_text(rx), Dir::Rx, secs as f64))
            < secs as f64
            && Instant::now() < deadline
            && self.procs.alive(rx)
        {
            std::thread::sleep(Duration::from_millis(500));
        }
        let rxs = testpmd::samples(&self.out_text(rx), Dir::Rx, secs as f64);
        let txs = testpmd::samples(&self.out_text(tx), Dir::Tx, secs as f64);
        self.procs.stop(tx);
        // The last frames in flight reach the receiver.
        std::thread::sleep(Duration::from_millis(300));
        let sf = self.ctl(&["stats", "--json"]).unwrap_or_default();
        self.procs.stop(rx);
        save(
            &self.out.join(format!("raw/stats-{label}.json")),
            &format!("{s0}\n{s1}\n{sf}\n"),
        );
        // After the sender stopped: every frame taken from vm1 was
        // delivered to vm2 or dropped there.
        let c = |port: &str, f: &str| {
            port_counter(&sf, &format!("{SW}:{port}"), f).map_or("?".to_owned(), |n| n.to_string())
        };
        let (rxl, txl) = (self.out_text(rx), self.out_text(tx));
        let total = |log: &str, d| testpmd::total(log, d).map_or("?".to_owned(), |n| n.to_string());
        self.procs.log.quiet(&format!(
            "{label}: after the sender stopped: vm1 tx_packets={}, vm2 rx_packets={} drop_rx_full={} drop_link_down={}; sender testpmd TX-packets {}, receiver RX-packets {}",
            c("vm1", "tx_packets"),
            c("vm2", "rx_packets"),
            c("vm2", "drop_rx_full"),
            c("vm2", "drop_link_down"),
            total(&txl, Dir::Tx),
            total(&rxl, Dir::Rx),
        ));
        let got: Vec<String> = rxs
            .iter()
            .map(|s| format!("{} {:.3}", s.pps, s.secs))
            .collect();
        self.procs
            .log
            .quiet(&format!("{label} rx samples (pps s): {}", got.join(", ")));
        let Some(rx_pps) = testpmd::median_pps(&rxs) else {
            return Err(format!("no Rx-pps samples in raw/{rx}.out"));
        };
        let window = Window::from_stats(wall, (c0, c1), &s0, &s1).ok_or_else(|| {
            format!(
                "no counters for the window (daemon ticks {c0:?} -> {c1:?} from /proc/PID/stat; vm2 rx_packets from ctl stats --json, in raw/stats-{label}.json)"
            )
        });
        Ok(VmTput {
            rx_mpps: mpps(rx_pps),
            tx_mpps: testpmd::median_pps(&txs).map(mpps),
            window,
        })
    }

    /// The idle case: a fresh daemon (worker not pinned), both testpmd
    /// interactive and connected; the daemon's CPU over `secs`, % of a
    /// core.
    fn vm_idle(&mut self, secs: u64, label: &str) -> Result<String, String> {
        self.vm_daemon(&["--workers", "1"])?;
        let mut fe = Frontends::default();
        let mut names = Vec::new();
        let mut result = Ok(String::new());
        for (vm, cpu) in [("vm2", self.rx_cpu), ("vm1", self.tx_cpu)] {
            let side = if vm == "vm2" { "rx" } else { "tx" };
            match self.testpmd_start(
                &mut fe,
                &format!("{label}-{side}"),
                cpu,
                vm,
                Mode::Idle,
                secs + 60,
            ) {
                Ok(n) => names.push((n, vm)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            for (n, vm) in names.clone() {
                if let Err(e) = self.testpmd_wait(&n, vm) {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            // Let the start-up settle.
            std::thread::sleep(Duration::from_secs(1));
            let pid = self.daemon.pid;
            let hz = clock_ticks();
            let t0 = Instant::now();
            let c0 = pid.and_then(cpu_ticks);
            sleep_window(secs);
            let wall = t0.elapsed().as_secs_f64();
            let c1 = pid.and_then(cpu_ticks);
            result = match (c0, c1) {
                (Some(c0), Some(c1)) => {
                    let tick = pct_of_core(1, hz, wall).unwrap_or_default();
                    self.procs.log.quiet(&format!(
                        "{label}: daemon ticks {c0} -> {c1} over {wall:.3} s; one tick is {tick}% of a core"
                    ));
                    pct_of_core(c1.saturating_sub(c0), hz, wall)
                        .ok_or_else(|| "an empty window".to_owned())
                }
                _ => Err(format!("cannot read /proc/{}/stat", pid.unwrap_or(0))),
            };
        }
        for (n, _) in names.iter().rev() {
            self.procs.stop(n);
        }
        self.daemon_stop();
        result
    }
}

/// Sleeps `secs` (a measurement window), or less if the run is
/// interrupted.
pub(super) fn sleep_window(secs: u64) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end && !super::signals::interrupted() {
        std::thread::sleep(Duration::from_millis(100).min(end - Instant::now()));
    }
}

fn key<'a>(
    section: &'a str,
    case: &'a str,
    system: &'a str,
    metric: &'a str,
    unit: &'a str,
    better: &'a str,
) -> Key<'a> {
    Key {
        section,
        case,
        system,
        metric,
        unit,
        better,
        x: "-",
    }
}

/// The placements of the parameters file: the switch on the receiver's
/// CPU (0) or the sender's (1).
fn placements(b: &Bench) -> Result<Vec<Placement>, Error> {
    let (rx, tx) = (b.rx_cpu, b.tx_cpu);
    Ok(b.params
        .list("vm_switch_cpu")?
        .iter()
        .map(|&w| Placement {
            rx,
            tx,
            switch: if w == 0 { rx } else { tx },
        })
        .collect())
}

/// The whole section.
pub fn vm(b: &mut Bench) -> Result<(), Error> {
    b.log("vm: testpmd virtio_user pairs through ringswitch and OVS-DPDK");
    let secs = b.params.one("vm_secs")?;
    let idle_secs = b.params.one("idle_secs")?;
    let places = placements(b)?;
    if on_path("dpdk-testpmd") {
        ringswitch(b, &places, secs, idle_secs)?;
    } else {
        let why = "dpdk-testpmd missing (apt-get install dpdk-dev)";
        for pl in &places {
            b.data.miss("vm", pl.case(), RS, why)?;
        }
        b.data.miss("idle", IDLE_CASE, RS, why)?;
    }
    if super::signals::interrupted() {
        return Ok(());
    }
    // Nothing of ringswitch runs while OVS measures.
    b.daemon_stop();
    ovs_vhost(b, &places, secs, idle_secs)
}

/// ringswitch's runs at each placement, then its idle runs.
fn ringswitch(b: &mut Bench, places: &[Placement], secs: u64, idle_secs: u64) -> Result<(), Error> {
    for &pl in places {
        let c = pl.case();
        for r in 1..=b.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            let label = format!("vm-rs-{}-r{r}", pl.tag());
            b.log(&format!(
                "  ringswitch: rx testpmd CPU {}, tx testpmd CPU {}, worker CPU {}: {secs}s (run {r})",
                pl.rx, pl.tx, pl.switch
            ));
            let t = match b.vm_tput(pl, secs, &label) {
                Ok(t) => t,
                Err(e) => {
                    b.data
                        .miss("vm", c, RS, &format!("vhost ringswitch {}: {e}", pl.tag()))?;
                    continue;
                }
            };
            b.data
                .sample(&Key::received("vm", c, RS, "-"), r, &t.rx_mpps)?;
            let eff = key(
                "efficiency",
                c,
                RS,
                "CPU, switch process",
                "s per Mpkt",
                "lower",
            );
            let hz = clock_ticks();
            match &t.window {
                Ok(w) => {
                    let cost = per_mpkt(w.cpu_s(hz), w.delivered).unwrap_or_default();
                    b.data.sample(&eff, r, &cost)?;
                    b.log(&format!(
                        "  ringswitch {}: {} Mpps received (sender {}), switch delivered {} of {} Mpps in, daemon {:.1}% CPU",
                        pl.tag(),
                        t.rx_mpps,
                        t.tx_mpps.as_deref().unwrap_or("?"),
                        mpps(w.delivered as f64 / w.wall),
                        mpps(w.taken as f64 / w.wall),
                        100.0 * w.cpu_s(hz) / w.wall,
                    ));
                }
                Err(e) => {
                    b.data.miss(
                        "efficiency",
                        c,
                        RS,
                        &format!("vhost ringswitch {}: {e}", pl.tag()),
                    )?;
                }
            }
        }
    }
    let idle = key(
        "idle",
        IDLE_CASE,
        RS,
        "CPU, switch process",
        "% of a core",
        "lower",
    );
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            return Ok(());
        }
        b.log(&format!(
            "  ringswitch idle: both testpmd interactive, not forwarding, {idle_secs}s (run {r})"
        ));
        match b.vm_idle(idle_secs, &format!("vm-rs-idle-r{r}")) {
            Ok(pct) => {
                b.data.sample(&idle, r, &pct)?;
                b.log(&format!(
                    "  ringswitch idle with two connected testpmd: daemon {pct}% of a core"
                ));
            }
            Err(e) => b
                .data
                .miss("idle", IDLE_CASE, RS, &format!("vhost idle: {e}"))?,
        }
    }
    Ok(())
}

/// Whether `cmd` is on the PATH.
pub(super) fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// OVS-DPDK with two dpdkvhostuserclient ports: every placement `runs`
/// times with each `pmd-maxsleep`, then its idle windows, in one
/// `ovs-dpdk.sh`.
fn ovs_vhost(b: &mut Bench, places: &[Placement], secs: u64, idle_secs: u64) -> Result<(), Error> {
    let maxsleeps = b.params.list("vm_ovs_maxsleeps")?.to_vec();
    let mut all = Vec::new();
    for pl in places {
        for _ in 0..b.runs {
            all.push(pl.triple());
        }
    }
    let all = all.join(" ");
    let ms: Vec<String> = maxsleeps.iter().map(u64::to_string).collect();
    let ms = ms.join(" ");
    b.log(&format!(
        "  OVS-DPDK, vhost-user ports: ovs-dpdk.sh --placements \"{all}\" --maxsleep \"{ms}\" --idle-seconds {idle_secs}"
    ));
    let raw = b.out.join("raw/ovs-vhost");
    let _ = std::fs::create_dir_all(&raw);
    let script = b.bench_dir.join("peers/ovs-dpdk.sh").display().to_string();
    let cmd = super::peers::ovs_dpdk_argv(&script, None, "", secs, idle_secs, &all, &ms, &raw);
    let idle_systems = [
        ("default", OVS.to_owned()),
        ("50", format!("{OVS}, pmd-maxsleep=50")),
        ("500", format!("{OVS}, pmd-maxsleep=500")),
    ];
    let (stem, out) = match b.peer("ovs-vhost", 1200, &cmd) {
        Ok(x) => x,
        Err(e) => {
            for pl in places {
                b.data.miss("vm", pl.case(), OVS, &e)?;
            }
            for (_, sys) in &idle_systems {
                b.data.miss("idle", IDLE_CASE, sys, &e)?;
            }
            return Ok(());
        }
    };
    let rows = ovs_placements(&out).unwrap_or_default();
    for pl in places {
        let c = pl.case();
        for &m in &maxsleeps {
            let sys = if m > 0 {
                format!("{OVS}, pmd-maxsleep={m}")
            } else {
                OVS.to_owned()
            };
            let mine = rows.iter().filter(|p| {
                p.pmd_maxsleep == m
                    && p.rx_cpu == Some(u64::from(pl.rx))
                    && p.tx_cpu == Some(u64::from(pl.tx))
                    && p.pmd_cpu == Some(u64::from(pl.switch))
            });
            let mut n = 0;
            for (i, row) in mine.enumerate() {
                let run = u32::try_from(i + 1).unwrap_or(u32::MAX);
                n += 1;
                b.data.sample(
                    &Key::received("vm", c, &sys, "-"),
                    run,
                    row.rx_mpps.as_deref().unwrap_or(""),
                )?;
                if let Some(ns) = row.cpu_ns_per_delivered_pkt {
                    let k = key(
                        "efficiency",
                        c,
                        &sys,
                        "CPU, switch process",
                        "s per Mpkt",
                        "lower",
                    );
                    b.data.sample(&k, run, &format!("{:.4}", ns / 1000.0))?;
                }
            }
            if n == 0 {
                let why = format!("no placement lines in ovs-dpdk.sh's report (raw/{stem}.out)");
                b.data.miss("vm", c, &sys, &why)?;
            }
        }
    }
    let idle = ovs_idle(&out).unwrap_or_default();
    for (m, sys) in &idle_systems {
        let v = idle
            .iter()
            .find(|(k, _)| k == m)
            .map_or("", |(_, v)| v.as_str());
        let k = key(
            "idle",
            IDLE_CASE,
            sys,
            "CPU, switch process",
            "% of a core",
            "lower",
        );
        let measured = b.data.sample(&k, 1, v)?;
        // The load section shows ovs-vswitchd idle beside ringswitch.
        if measured && b.peer_load && *m != "50" {
            let load_sys = format!("{sys}: ovs-vswitchd");
            b.data
                .sample(&load_key("switch, 60 B", &load_sys, "0"), 1, v)?;
        }
    }
    let idle: Vec<String> = idle.iter().map(|(m, v)| format!("{m}: {v}%")).collect();
    b.log(&format!(
        "  OVS-DPDK vhost-user: {} placement runs; idle ovs-vswitchd (pmd-maxsleep {})",
        rows.len(),
        idle.join(", ")
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"[{"name":"valevm:vm1","open":true},{"name":"valevm:vm2","open":false}]"#;

    #[test]
    fn ports_and_counters() {
        assert_eq!(port_open(LIST, "valevm:vm1"), Some(true));
        assert_eq!(port_open(LIST, "valevm:vm2"), Some(false));
        assert_eq!(port_open(LIST, "valevm:vm3"), None);
        assert_eq!(port_open("not json", "valevm:vm1"), None);
        let s0 =
            r#"[{"name":"valevm:vm1","tx_packets":100},{"name":"valevm:vm2","rx_packets":50}]"#;
        let s1 =
            r#"[{"name":"valevm:vm1","tx_packets":1100},{"name":"valevm:vm2","rx_packets":550}]"#;
        let w = Window::from_stats(2.0, (Some(10), Some(60)), s0, s1).unwrap();
        assert_eq!((w.ticks, w.delivered, w.taken), (50, 500, 1000));
        assert_eq!(w.cpu_s(100.0), 0.5);
        // Nothing delivered, a missing counter or tick: no window.
        assert_eq!(Window::from_stats(2.0, (Some(10), Some(60)), s0, s0), None);
        assert_eq!(Window::from_stats(2.0, (None, Some(60)), s0, s1), None);
        assert_eq!(
            Window::from_stats(2.0, (Some(10), Some(60)), "[]", s1),
            None
        );
    }

    #[test]
    fn placements_name_their_case() {
        let rx = Placement {
            rx: 0,
            tx: 1,
            switch: 0,
        };
        let tx = Placement { switch: 1, ..rx };
        assert_eq!(rx.tag(), "010");
        assert_eq!(tx.triple(), "0,1,1");
        assert!(rx.case().ends_with("receiver's CPU"));
        assert!(tx.case().ends_with("sender's CPU"));
    }
}
