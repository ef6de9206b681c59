//! The nic section: NIC ports on a veth pair between two network
//! namespaces. DPDK testpmd txonly (64-byte frames) on one end; on the
//! other, one receiver at a time: ringswitch (the daemon in the receiver's
//! namespace, `ctl attach SWITCH rsbnB --mode native`, the frames flooded
//! to a pkt-gen rx ring port), testpmd rxonly with net_af_xdp and with
//! net_af_packet, and a Linux bridge forwarding to a second veth read by
//! testpmd net_af_packet. The generator is the faster of testpmd's
//! net_af_xdp and net_af_packet on the veth (measured first; the quick mode
//! takes net_af_xdp). `bench/peers/veth.sh` wires the namespaces, veths,
//! bridge and NAPI settings, fresh for each case; [`Topology`] deletes them
//! whatever happens.
//!
//! Two receive paths: by default a veth delivers in its sender's context,
//! so the receive side's kernel work runs as softirq on the generator's CPU;
//! with threaded NAPI (GRO on rsbnB, TSO off on rsbnA, rsbnB's NAPI kthread
//! pinned to the receiver's CPU) it runs on the receiver's CPU, as a NIC's
//! interrupt steered there would.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::procs::{clock_ticks, cpu_ticks, is_root, save};
use super::testpmd::{self, Dir, Mode, Sample};
use super::vm::{on_path, port_counter, sleep_window, Frontends};
use super::Bench;
use crate::error::Error;
use crate::figures::mpps;
use crate::pktgen::Report;
use crate::write::Key;

/// The generator's interface (namespace PREFIX-gen).
const IF_A: &str = "rsbnA";
/// The receivers' interface (namespace PREFIX-rx).
const IF_B: &str = "rsbnB";
/// The bridge case's far end (namespace PREFIX-d).
const IF_D: &str = "rsbnD";
/// ringswitch's switch: the NIC port and the sink ring port.
const SW: &str = "valenic";
/// Deadline for a testpmd to open its port, for the daemon's sink to open
/// its port, and for the first frames.
const START_S: u64 = 60;
/// A bound on a testpmd's life (each is stopped when its case ends).
const TESTPMD_MAX_S: u64 = 900;

/// The receivers on rsbnB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// ringswitch, `ctl attach --mode native` (AF_XDP).
    RsNative,
    /// testpmd rxonly, net_af_xdp.
    DpdkXdp,
    /// testpmd rxonly, net_af_packet.
    DpdkPacket,
    /// A Linux bridge → veth → testpmd rxonly, net_af_packet.
    BridgeApp,
}

impl Receiver {
    /// Its name in the processes' names.
    fn tag(self) -> &'static str {
        match self {
            Receiver::RsNative => "rsnative",
            Receiver::DpdkXdp => "dpdkxdp",
            Receiver::DpdkPacket => "dpdkpacket",
            Receiver::BridgeApp => "brapp",
        }
    }

    /// Its system in the section's table.
    pub fn system(self) -> &'static str {
        match self {
            Receiver::RsNative => "ringswitch, AF_XDP (native XDP) into the switch",
            Receiver::DpdkXdp => "DPDK testpmd, net_af_xdp",
            Receiver::DpdkPacket => "DPDK testpmd, net_af_packet",
            Receiver::BridgeApp => "Linux bridge → veth → testpmd net_af_packet",
        }
    }

    /// How the log names it.
    fn title(self) -> &'static str {
        match self {
            Receiver::RsNative => {
                "ringswitch, ctl attach --mode native (AF_XDP, XDP in the veth driver) → ring port"
            }
            Receiver::DpdkXdp => "DPDK testpmd rxonly, net_af_xdp",
            Receiver::DpdkPacket => "DPDK testpmd rxonly, net_af_packet",
            Receiver::BridgeApp => "Linux bridge → veth → DPDK testpmd rxonly, net_af_packet",
        }
    }
}

/// Where the veth's receive work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In the sender's softirq (the default).
    Split,
    /// On the receiver's CPU: threaded NAPI.
    Napi,
}

impl Placement {
    fn tag(self) -> &'static str {
        match self {
            Placement::Split => "split",
            Placement::Napi => "napi",
        }
    }

    /// The case of the section's table.
    pub fn case(self) -> &'static str {
        match self {
            Placement::Split => "veth, 64 B; receive path in the sender's softirq (default)",
            Placement::Napi => "veth, 64 B; receive path on the receiver's CPU (threaded NAPI)",
        }
    }
}

/// The namespaces of one case, deleted (with their interfaces) when
/// dropped, whatever happened in between.
struct Topology {
    script: String,
    prefix: String,
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new("timeout")
            .args(["-k", "2", "60", &self.script, "down", &self.prefix])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The rx packet and rx dropped counters of an interface, or its tx
/// dropped counter, from `ip -s -j link show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// Received packets.
    pub rx_packets: Option<u64>,
    /// Received packets dropped.
    pub rx_dropped: Option<u64>,
    /// Transmitted packets dropped (the peer's queue was full).
    pub tx_dropped: Option<u64>,
}

impl Link {
    /// The counters in `ip -s -j link show IF`'s output.
    pub fn parse(json: &str) -> Link {
        let v: Option<Value> = serde_json::from_str(json).ok();
        let stats = v.as_ref().and_then(|v| v.get(0)?.get("stats64"));
        let f = |dir: &str, k: &str| stats?.get(dir)?.get(k)?.as_u64();
        Link {
            rx_packets: f("rx", "packets"),
            rx_dropped: f("rx", "dropped"),
            tx_dropped: f("tx", "dropped"),
        }
    }
}

/// One CPU's ticks from /proc/stat: busy (all but idle and iowait), total,
/// softirq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTicks {
    /// Busy ticks.
    pub busy: u64,
    /// All ticks.
    pub total: u64,
    /// Softirq ticks.
    pub softirq: u64,
}

impl CpuTicks {
    /// CPU `cpu`'s line of a /proc/stat text.
    pub fn parse(stat: &str, cpu: u32) -> Option<CpuTicks> {
        let name = format!("cpu{cpu}");
        let line = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let total: u64 = v.iter().sum();
        Some(CpuTicks {
            busy: total.checked_sub(*v.get(3)? + *v.get(4)?)?,
            total,
            softirq: *v.get(6)?,
        })
    }

    fn read(cpu: u32) -> Option<CpuTicks> {
        CpuTicks::parse(&std::fs::read_to_string("/proc/stat").ok()?, cpu)
    }

    /// "B% (softirq S%)" of the CPU from `self` to `later`.
    fn busy_text(self, later: CpuTicks) -> Option<String> {
        let t = later.total.checked_sub(self.total).filter(|&t| t > 0)? as f64;
        let b = later.busy.checked_sub(self.busy)? as f64;
        let s = later.softirq.checked_sub(self.softirq)? as f64;
        Some(format!(
            "{:.0}% (softirq {:.0}%)",
            100.0 * b / t,
            100.0 * s / t
        ))
    }
}

/// pkt-gen's interval lines (`1.234 Mpps (1.240 Mpkts 594.2 Mbps in
/// 1000123 usec) ...`) as samples, the zero lines before traffic and the
/// first non-zero one left out. A line that does not read is skipped.
pub fn pktgen_samples(out: &str) -> Vec<Sample> {
    let mut on = false;
    let mut v = Vec::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(n), Some(unit), Some(open)) = (w.first(), w.get(1), w.get(2)) else {
            continue;
        };
        let scale = match *unit {
            "pps" => 1.0,
            "Kpps" => 1e3,
            "Mpps" => 1e6,
            _ => continue,
        };
        let Ok(n) = n.parse::<f64>() else { continue };
        if !open.starts_with('(') || !n.is_finite() || n < 0.0 {
            continue;
        }
        let pps = (n * scale) as u64;
        let secs = w
            .windows(2)
            .find(|p| p[1] == "usec)")
            .and_then(|p| p[0].parse::<f64>().ok())
            .map_or(1.0, |us| us / 1e6);
        if !on {
            on = pps > 0;
            continue;
        }
        v.push(Sample { pps, secs });
    }
    v
}

/// `samples` after `skip` more (the warm-up), up to `max_secs`.
pub fn window(samples: &[Sample], skip: usize, max_secs: f64) -> Vec<Sample> {
    let mut total = 0.0;
    let mut v = Vec::new();
    for s in samples.iter().skip(skip) {
        v.push(*s);
        total += s.secs;
        if total >= max_secs {
            break;
        }
    }
    v
}

/// What one case measured.
struct Figures {
    rx_mpps: String,
}

/// Counters at one end of a window.
struct Snap {
    at: Instant,
    vethb: Link,
    daemon: Option<u64>,
    gen: Option<CpuTicks>,
    rx: Option<CpuTicks>,
    stats: String,
}

/// One case's settings.
#[derive(Clone, Copy)]
struct Case {
    pl: Placement,
    rcv: Receiver,
    gen_cpu: u32,
    rx_cpu: u32,
    secs: u64,
    warm: u64,
}

impl Bench {
    fn nic_prefix(&self) -> String {
        format!("rsbn-{}", std::process::id())
    }

    fn veth_script(&self) -> String {
        self.bench_dir.join("peers/veth.sh").display().to_string()
    }

    /// Fresh namespaces and veth pair (with the bridge, with threaded NAPI
    /// on `napi`'s CPU).
    fn topology(&mut self, bridge: bool, napi: Option<u32>) -> Result<Topology, String> {
        let guard = Topology {
            script: self.veth_script(),
            prefix: self.nic_prefix(),
        };
        let mut cmd = vec![guard.script.clone(), "up".into(), guard.prefix.clone()];
        if bridge {
            cmd.push("--bridge".into());
        }
        if let Some(c) = napi {
            cmd.extend(["--napi".to_owned(), c.to_string()]);
        }
        let (stem, exit) = self.procs.run("veth-up", None, 120, &cmd)?;
        if !exit.ok() {
            return Err(self.procs.why(&stem, exit));
        }
        Ok(guard)
    }

    /// Pins rsbnB's NAPI kthreads to `cpu` again.
    fn napi_pin(&mut self, cpu: u32) -> Result<(), String> {
        let cmd = vec![
            self.veth_script(),
            "pin".into(),
            self.nic_prefix(),
            cpu.to_string(),
        ];
        let (stem, exit) = self.procs.run("veth-pin", None, 60, &cmd)?;
        if exit.ok() {
            Ok(())
        } else {
            Err(self.procs.why(&stem, exit))
        }
    }

    fn link(&self, ns: &str, ifname: &str) -> Link {
        let ns = format!("{}-{ns}", self.nic_prefix());
        Command::new("timeout")
            .args(["5", "ip", "-n", &ns, "-s", "-j", "link", "show", ifname])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or_else(Link::default, |o| {
                Link::parse(&String::from_utf8_lossy(&o.stdout))
            })
    }

    /// A testpmd in namespace PREFIX-`ns` on `vdev`, once it forwards.
    fn nic_testpmd(
        &mut self,
        fe: &mut Frontends,
        label: &str,
        ns: &str,
        cpu: u32,
        vdev: &str,
        mode: Mode,
    ) -> Result<String, String> {
        let prefix = fe.prefix();
        let mut cmd: Vec<String> = ["ip", "netns", "exec"].map(str::to_owned).into();
        cmd.push(format!("{}-{ns}", self.nic_prefix()));
        cmd.extend(testpmd::vdev_argv(cpu, &prefix, vdev, None, mode));
        let name = self.procs.start(label, None, TESTPMD_MAX_S, &cmd)?;
        self.nic_testpmd_wait(&name)?;
        Ok(name)
    }

    /// Waits until testpmd `name` forwards; stops it if it does not.
    fn nic_testpmd_wait(&mut self, name: &str) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(START_S);
        let err = loop {
            if !self.procs.alive(name) {
                let exit = self.procs.wait(name);
                break format!(
                    "{name} exited during start-up: {}",
                    self.procs.why(name, exit)
                );
            }
            let log = self.out_text(name);
            if let Some(line) = testpmd::failure(&log) {
                break format!("{name} failed to start its port: {line}");
            }
            if testpmd::ready(&log) {
                return Ok(());
            }
            if Instant::now() >= deadline || super::signals::interrupted() {
                break format!("{name} not forwarding after {START_S} s");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        self.procs.stop(name);
        Err(err)
    }

    fn snap(&self, c: &Case) -> Snap {
        let daemon = self.daemon.pid.and_then(cpu_ticks);
        let stats = if self.daemon.pid.is_some() {
            self.ctl(&["stats", "--json"]).unwrap_or_default()
        } else {
            String::new()
        };
        Snap {
            at: Instant::now(),
            vethb: self.link("rx", IF_B),
            daemon,
            gen: CpuTicks::read(c.gen_cpu),
            rx: CpuTicks::read(c.rx_cpu),
            stats,
        }
    }

    /// The ringswitch receiver: a daemon in PREFIX-rx with rsbnB attached
    /// natively, and a pkt-gen rx on the sink port; the sink's name.
    fn nic_ringswitch(&mut self, c: &Case) -> Result<String, String> {
        let ns = format!("{}-rx", self.nic_prefix());
        let cpu = c.rx_cpu.to_string();
        self.daemon_start_in(
            Some(&ns),
            Some(c.rx_cpu),
            &["--workers", "1", "--worker-cpus", &cpu],
        )?;
        let attach = ["attach", SW, IF_B, "--mode", "native"];
        if self.ctl(&attach).is_none() {
            return Err(format!("ctl {} failed", attach.join(" ")));
        }
        let port = format!("{SW}:{IF_B}");
        let list = self.ctl(&["port", "list", "--json"]).unwrap_or_default();
        let iface = serde_json::from_str::<Value>(&list).ok().and_then(|v| {
            v.as_array()?
                .iter()
                .find(|p| p.get("name").and_then(Value::as_str) == Some(port.as_str()))?
                .get("iface")
                .cloned()
        });
        self.procs.log.quiet(&format!(
            "NIC {} {}: {}",
            c.pl.tag(),
            c.rcv.tag(),
            iface.map_or("no iface in ctl port list --json".to_owned(), |i| i
                .to_string())
        ));
        let sink = format!("{SW}:sink");
        let dur = (c.secs + 100).to_string();
        let cmd = self.rs_cmd(&[
            "pkt-gen",
            "-i",
            &sink,
            "-f",
            "rx",
            "-T",
            "1000",
            "--duration",
            &dur,
            "--json",
        ]);
        let label = format!("nic-{}-{}-sink", c.pl.tag(), c.rcv.tag());
        let name = self
            .procs
            .start(&label, Some(c.rx_cpu), c.secs + 120, &cmd)?;
        self.procs
            .ready_or_stop(&name, START_S)
            .map_err(|e| format!("pkt-gen rx did not open {sink}: {e}"))?;
        Ok(name)
    }

    /// One receiver, one generator, one window.
    fn nic_case(&mut self, c: &Case, gen: &str) -> Result<Figures, String> {
        let bridge = c.rcv == Receiver::BridgeApp;
        let napi = (c.pl == Placement::Napi).then_some(c.rx_cpu);
        let _topology = self.topology(bridge, napi)?;
        let mut fe = Frontends::default();
        let result = self.nic_case_in(&mut fe, c, gen, napi);
        self.daemon_stop();
        result
    }

    fn nic_case_in(
        &mut self,
        fe: &mut Frontends,
        c: &Case,
        gen: &str,
        napi: Option<u32>,
    ) -> Result<Figures, String> {
        let label = format!("nic-{}-{}", c.pl.tag(), c.rcv.tag());
        let rx = match c.rcv {
            Receiver::RsNative => self.nic_ringswitch(c)?,
            Receiver::DpdkXdp | Receiver::DpdkPacket | Receiver::BridgeApp => {
                let (ns, ifname) = if c.rcv == Receiver::BridgeApp {
                    ("d", IF_D)
                } else {
                    ("rx", IF_B)
                };
                let kind = if c.rcv == Receiver::DpdkXdp {
                    "af_xdp"
                } else {
                    "af_packet"
                };
                let vdev = format!("net_{kind}0,iface={ifname}");
                self.nic_testpmd(
                    fe,
                    &format!("{label}-rx"),
                    ns,
                    c.rx_cpu,
                    &vdev,
                    Mode::RxOnly,
                )?
            }
        };
        let result = self.nic_traffic(fe, c, gen, napi, &rx, &label);
        self.procs.stop(&rx);
        result
    }

    fn nic_traffic(
        &mut self,
        fe: &mut Frontends,
        c: &Case,
        gen: &str,
        napi: Option<u32>,
        rx: &str,
        label: &str,
    ) -> Result<Figures, String> {
        // Attaching XDP may have brought up NAPI anew: pin again.
        if let Some(cpu) = napi {
            self.napi_pin(cpu)?;
        }
        let base_b = self.link("rx", IF_B);
        let base_a = self.link("gen", IF_A);
        let vdev = format!("net_{gen}0,iface={IF_A}");
        let tx = self.nic_testpmd(
            fe,
            &format!("{label}-gen"),
            "gen",
            c.gen_cpu,
            &vdev,
            Mode::TxOnly(64),
        )?;
        let deadline = Instant::now() + Duration::from_secs(START_S);
        while !testpmd::moving(&self.out_text(&tx), Dir::Tx) {
            if Instant::now() >= deadline || !self.procs.alive(&tx) || super::signals::interrupted()
            {
                let sent = testpmd::last_counter(&self.out_text(&tx), Dir::Tx)
                    .map_or("?".to_owned(), |n| n.to_string());
                self.procs.stop(&tx);
                return Err(format!(
                    "the generator sent nothing within {START_S} s (TX-packets {sent})"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        // Traffic before the window (a measurement setting, not a wait).
        sleep_window(c.warm);
        let s0 = self.snap(c);
        self.procs
            .log
            .quiet(&format!("{label}: window of {}s starts", c.secs));
        sleep_window(c.secs);
        let s1 = self.snap(c);
        let secs = c.secs as f64;
        let warm = usize::try_from(c.warm).unwrap_or(0);
        let rx_samples = |b: &Bench| match c.rcv {
            Receiver::RsNative => window(&pktgen_samples(&b.out_text(rx)), warm, secs),
            _ => window(&testpmd::samples(&b.out_text(rx), Dir::Rx, 0.0), warm, secs),
        };
        let tx_samples = |b: &Bench| {
            window(
                &testpmd::samples(&b.out_text(&tx), Dir::Tx, 0.0),
                warm,
                secs,
            )
        };
        // The samples cover the window (or a bound passes).
        let deadline = Instant::now() + Duration::from_secs(30);
        while (testpmd::covered(&rx_samples(self)) < secs
            || testpmd::covered(&tx_samples(self)) < secs)
            && Instant::now() < deadline
            && self.procs.alive(rx)
        {
            std::thread::sleep(Duration::from_millis(500));
        }
        let (rs, gs) = (rx_samples(self), tx_samples(self));
        self.procs.stop(&tx);
        // The last frames in flight reach the receiver.
        std::thread::sleep(Duration::from_millis(500));
        let fin_b = self.link("rx", IF_B);
        let fin_a = self.link("gen", IF_A);
        let stf = if self.daemon.pid.is_some() {
            self.ctl(&["stats", "--json"]).unwrap_or_default()
        } else {
            String::new()
        };
        self.procs.stop(rx);
        if !stf.is_empty() {
            save(
                &self.out.join(format!("raw/stats-{label}.json")),
                &format!("{}\n{}\n{stf}\n", s0.stats, s1.stats),
            );
        }
        let show = |v: &[Sample]| {
            v.iter()
                .map(|s| format!("{} {:.3}", s.pps, s.secs))
                .collect::<Vec<_>>()
                .join(", ")
        };
        self.procs.log.quiet(&format!(
            "{label}: generator samples (pps s): {}",
            show(&gs)
        ));
        self.procs
            .log
            .quiet(&format!("{label}: receiver samples (pps s): {}", show(&rs)));
        let sent = testpmd::total(&self.out_text(&tx), Dir::Tx);
        let got = match c.rcv {
            Receiver::RsNative => Report::from_stdout(&self.out_text(rx)).and_then(|r| r.packets),
            _ => testpmd::total(&self.out_text(rx), Dir::Rx),
        };
        let Some(rx_pps) = testpmd::median_pps(&rs) else {
            return Err(format!("no receiver samples (raw/{rx}.out and run.log)"));
        };
        let opt = |v: Option<String>| v.unwrap_or_else(|| "?".into());
        let wall = s1.at.duration_since(s0.at).as_secs_f64();
        let vethb = s0
            .vethb
            .rx_packets
            .zip(s1.vethb.rx_packets)
            .and_then(|(a, b)| b.checked_sub(a))
            .filter(|_| wall > 0.0)
            .map(|n| mpps(n as f64 / wall));
        let deliv = sent
            .zip(got)
            .filter(|&(s, _)| s > 0)
            .map(|(s, g)| format!("{:.1}%", 100.0 * g as f64 / s as f64));
        let delta = |a: Option<u64>, b: Option<u64>| {
            opt(a
                .zip(b)
                .and_then(|(a, b)| b.checked_sub(a))
                .map(|n| n.to_string()))
        };
        let mut drops = format!(
            "{IF_A} tx_dropped {}, {IF_B} rx_dropped {}",
            delta(base_a.tx_dropped, fin_a.tx_dropped),
            delta(base_b.rx_dropped, fin_b.rx_dropped)
        );
        if !stf.is_empty() {
            let v = |port: &str, f: &str| {
                opt(port_counter(&stf, &format!("{SW}:{port}"), f).map(|n| n.to_string()))
            };
            drops.push_str(&format!(
                ", drop_kernel {}, sink drop_rx_full {}",
                v(IF_B, "drop_kernel"),
                v("sink", "drop_rx_full")
            ));
        }
        let busy = |a: Option<CpuTicks>, b: Option<CpuTicks>| {
            opt(a.zip(b).and_then(|(a, b)| a.busy_text(b)))
        };
        let mut line = format!(
            "  {} {}: {} Mpps received, generator {} Mpps ({IF_B} took {}), {} of sent received; {drops}; CPU gen / rx {} / {}",
            c.pl.tag(),
            c.rcv.tag(),
            mpps(rx_pps),
            opt(testpmd::median_pps(&gs).map(mpps)),
            opt(vethb),
            opt(deliv),
            busy(s0.gen, s1.gen),
            busy(s0.rx, s1.rx),
        );
        if c.rcv == Receiver::RsNative {
            let port = format!("{SW}:{IF_B}");
            let taken = port_counter(&s0.stats, &port, "tx_packets")
                .zip(port_counter(&s1.stats, &port, "tx_packets"))
                .and_then(|(a, b)| b.checked_sub(a))
                .filter(|&n| n > 0);
            let ticks = s0.daemon.zip(s1.daemon).and_then(|(a, b)| b.checked_sub(a));
            let hz = clock_ticks();
            match (taken, ticks) {
                (Some(n), Some(t)) if wall > 0.0 => line.push_str(&format!(
                    "; daemon {:.1}% = {:.0} ns/pkt",
                    100.0 * t as f64 / hz / wall,
                    t as f64 / hz * 1e9 / n as f64
                )),
                _ => line.push_str(&format!(
                    "; no daemon counters for the window (ticks {:?} -> {:?}, {port} tx_packets from raw/stats-{label}.json)",
                    s0.daemon, s1.daemon
                )),
            }
        }
        self.log(&line);
        Ok(Figures {
            rx_mpps: mpps(rx_pps),
        })
    }

    /// testpmd txonly with net_`kind` on rsbnA for `secs`, nothing
    /// consuming on rsbnB; its median Tx rate.
    fn nic_generator(&mut self, kind: &str, secs: u64, cpu: u32) -> Result<f64, String> {
        let _topology = self.topology(false, None)?;
        let mut fe = Frontends::default();
        let vdev = format!("net_{kind}0,iface={IF_A}");
        let name = self.nic_testpmd(
            &mut fe,
            &format!("nic-gen-{kind}"),
            "gen",
            cpu,
            &vdev,
            Mode::TxOnly(64),
        )?;
        let deadline = Instant::now() + Duration::from_secs(secs + START_S);
        let samples = |b: &Bench| {
            window(
                &testpmd::samples(&b.out_text(&name), Dir::Tx, 0.0),
                1,
                secs as f64,
            )
        };
        while testpmd::covered(&samples(self)) < secs as f64
            && Instant::now() < deadline
            && self.procs.alive(&name)
            && !super::signals::interrupted()
        {
            std::thread::sleep(Duration::from_millis(500));
        }
        let s = samples(self);
        self.procs.stop(&name);
        testpmd::median_pps(&s).ok_or_else(|| format!("no Tx-pps samples in raw/{name}.out"))
    }
}

/// The whole section.
pub fn nic(b: &mut Bench) -> Result<(), Error> {
    b.log("nic: veth + AF_XDP into the switch vs DPDK net_af_xdp, net_af_packet, a Linux bridge");
    let secs = b.params.one("nic_secs")?;
    let warm = b.params.one("nic_warm_secs")?;
    let gen_secs = b.params.one("nic_gen_secs")?;
    let places: Vec<Placement> = b
        .params
        .list("nic_napi")?
        .iter()
        .map(|&n| {
            if n == 0 {
                Placement::Split
            } else {
                Placement::Napi
            }
        })
        .collect();
    let mut receivers = vec![Receiver::RsNative, Receiver::DpdkXdp];
    if b.params.one("nic_af_packet")? != 0 {
        receivers.push(Receiver::DpdkPacket);
    }
    receivers.push(Receiver::BridgeApp);
    let first = Receiver::RsNative.system();
    let why = if !is_root() {
        Some("the nic section needs root (network namespaces, veth, XDP)")
    } else if !on_path("ip") || !on_path("bridge") {
        Some("ip or bridge (iproute2) missing")
    } else if !on_path("dpdk-testpmd") {
        Some("dpdk-testpmd missing (apt-get install dpdk-dev)")
    } else {
        None
    };
    if let Some(why) = why {
        b.data.miss("nic", "veth pair", first, why)?;
        return Ok(());
    }
    let (gen_cpu, rx_cpu) = (b.tx_cpu, b.rx_cpu);
    let gen = if gen_secs == 0 {
        // No contest: AF_XDP sends faster on a veth here.
        Some("af_xdp")
    } else {
        let mut best: Option<(&str, f64)> = None;
        for kind in ["af_xdp", "af_packet"] {
            if super::signals::interrupted() {
                return Ok(());
            }
            b.log(&format!(
                "NIC generator candidate: testpmd txonly, net_{kind} on {IF_A}, CPU {gen_cpu}, nothing consuming on {IF_B}: {gen_secs}s"
            ));
            match b.nic_generator(kind, gen_secs, gen_cpu) {
                Ok(pps) => {
                    b.log(&format!("  generator net_{kind}: {} Mpps", mpps(pps)));
                    if best.is_none_or(|(_, p)| pps > p) {
                        best = Some((kind, pps));
                    }
                }
                Err(e) => b.log(&format!("  failed: NIC generator {kind}: {e}")),
            }
        }
        best.map(|(k, _)| k)
    };
    let Some(gen) = gen else {
        let why = format!("no generator: neither testpmd net_af_xdp nor net_af_packet sent on {IF_A} (see run.log)");
        b.data.miss("nic", "veth pair", first, &why)?;
        return Ok(());
    };
    if gen_secs > 0 {
        b.log(&format!(
            "  generator for every case: testpmd txonly, net_{gen}"
        ));
    }
    for (i, &pl) in places.iter().enumerate() {
        for &rcv in &receivers {
            for r in 1..=b.runs {
                if super::signals::interrupted() {
                    return Ok(());
                }
                let c = Case {
                    pl,
                    rcv,
                    gen_cpu,
                    rx_cpu,
                    secs,
                    warm,
                };
                let napi = if pl == Placement::Napi {
                    format!(", {IF_B}'s NAPI threaded on CPU {rx_cpu}")
                } else {
                    String::new()
                };
                b.log(&format!(
                    "NIC {}: {}; generator CPU {gen_cpu}, receiver CPU {rx_cpu}{napi}: {secs}s",
                    pl.tag(),
                    rcv.title()
                ));
                match b.nic_case(&c, gen) {
                    Ok(f) => {
                        let k = Key::received("nic", pl.case(), rcv.system(), "-");
                        b.data.sample(&k, r, &f.rx_mpps)?;
                        // The first placement's bridge is also the "through
                        // a switch" peer.
                        if rcv == Receiver::BridgeApp && i == 0 {
                            let k = Key::received(
                                "switch",
                                "through a switch, 60 B",
                                "Linux bridge + veth (AF_PACKET)",
                                "-",
                            );
                            b.data.sample(&k, r, &f.rx_mpps)?;
                        }
                    }
                    Err(e) => {
                        let why = format!("NIC {} {}: {e}", pl.tag(), rcv.tag());
                        b.log(&format!("  failed: {why}"));
                        b.data.miss("nic", pl.case(), rcv.system(), &why)?;
                    }
                }
            }
        }
    }
    b.data.note("nic", &format!(
        "A veth pair between two network namespaces; DPDK testpmd txonly (64-byte frames, net_{gen}, the faster generator here) on CPU {gen_cpu} on one end; on the other, one receiver at a time on CPU {rx_cpu}: ringswitch (`ctl attach SWITCH vethB --mode native`, AF_XDP, frames flooded to a pkt-gen rx ring port), testpmd rxonly with net_af_xdp, with net_af_packet, and a Linux bridge forwarding to a second veth read by testpmd net_af_packet. {secs} s windows after {warm} s of traffic. Default: the veth's receive work runs in the sender's softirq; threaded NAPI: it runs on the receiver's CPU, as a NIC interrupt steered there would (GRO on, TSO off on the sender's veth)."
    ))?;
    Ok(())
}

/// The kernel ping's case (the latency section's blocking switch case).
const PING_CASE: &str = "through a switch, blocking";
/// The kernel ping's system.
const PING_SYS: &str = "Linux bridge + veth, kernel ICMP (ping -f)";

/// The min and avg round trip (ms) of iputils ping's summary line `rtt
/// min/avg/max/mdev = 0.008/0.010/0.050/0.002 ms`.
pub fn ping_rtt(out: &str) -> Option<(f64, f64)> {
    let rest = out
        .lines()
        .find_map(|l| l.split_once("rtt min/avg/max/mdev = "))?
        .1;
    let mut v = rest.split_whitespace().next()?.split('/');
    let mut num = || {
        v.next()?
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    Some((num()?, num()?))
}

impl Bench {
    /// Runs `cmd` in namespace PREFIX-`ns` under a 20 s bound; whether it
    /// succeeded (its output in the log).
    fn in_ns(&mut self, ns: &str, label: &str, cmd: &[&str]) -> bool {
        let mut v: Vec<String> = ["ip", "netns", "exec"].map(str::to_owned).into();
        v.push(format!("{}-{ns}", self.nic_prefix()));
        v.extend(cmd.iter().map(|a| (*a).to_owned()));
        matches!(self.procs.run(label, None, 20, &v), Ok((_, e)) if e.ok())
    }

    /// The bridge with rsbnA (10.77.0.1) and rsbnD (10.77.0.2) addressed,
    /// once an echo crosses it.
    fn ping_path(&mut self) -> Result<Topology, String> {
        let t = self.topology(true, None)?;
        if !(self.in_ns(
            "gen",
            "ping-addr",
            &["ip", "addr", "add", "10.77.0.1/24", "dev", IF_A],
        ) && self.in_ns(
            "d",
            "ping-addr",
            &["ip", "addr", "add", "10.77.0.2/24", "dev", IF_D],
        )) {
            return Err(format!("cannot address {IF_A} and {IF_D} (see run.log)"));
        }
        let deadline = Instant::now() + Duration::from_secs(START_S);
        while !self.in_ns(
            "gen",
            "ping-first",
            &["ping", "-c", "1", "-W", "2", "10.77.0.2"],
        ) {
            if Instant::now() >= deadline || super::signals::interrupted() {
                return Err("no IPv4 path across the bridge (see run.log)".into());
            }
        }
        Ok(t)
    }
}

/// The kernel's ICMP echo through a Linux bridge (iputils `ping -f`, one
/// echo in flight, `count` round trips, `runs` times) between two
/// namespaces: veth → bridge → veth; its min and avg (ping prints no
/// percentiles).
pub fn kernel_ping(b: &mut Bench, count: u64) -> Result<(), Error> {
    let why = if !is_root() {
        Some("the kernel ping needs root (network namespaces, veth)")
    } else if !on_path("ping") {
        Some("ping (iputils-ping) is missing")
    } else if !on_path("ip") || !on_path("bridge") {
        Some("ip or bridge (iproute2) missing")
    } else {
        None
    };
    if let Some(why) = why {
        return b.data.miss("latency", PING_CASE, PING_SYS, why);
    }
    let _topology = match b.ping_path() {
        Ok(t) => t,
        Err(e) => return b.data.miss("latency", PING_CASE, PING_SYS, &e),
    };
    let key = |metric| Key {
        section: "latency",
        case: PING_CASE,
        system: PING_SYS,
        metric,
        unit: "ns",
        better: "lower",
        x: "-",
    };
    let tx = b.tx_cpu.to_string();
    let n = count.to_string();
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            break;
        }
        let cmd: Vec<String> = [
            "ip".to_owned(),
            "netns".into(),
            "exec".into(),
            format!("{}-gen", b.nic_prefix()),
            "taskset".into(),
            "-c".into(),
            tx.clone(),
            "ping".into(),
            "-f".into(),
            "-q".into(),
            "-c".into(),
            n.clone(),
            "10.77.0.2".into(),
        ]
        .into();
        let out = match b.procs.run(&format!("kernel-ping-r{r}"), None, 60, &cmd) {
            Ok((stem, _)) => (stem.clone(), b.out_text(&stem)),
            Err(e) => {
                b.data
                    .miss("latency", PING_CASE, PING_SYS, &format!("run {r}: {e}"))?;
                continue;
            }
        };
        let Some((min, avg)) = ping_rtt(&out.1) else {
            let why = format!("run {r}: ping printed no rtt line (raw/{}.out)", out.0);
            b.data.miss("latency", PING_CASE, PING_SYS, &why)?;
            continue;
        };
        b.data
            .sample(&key("RTT min"), r, &format!("{:.0}", min * 1e6))?;
        b.data
            .sample(&key("RTT avg"), r, &format!("{:.0}", avg * 1e6))?;
        b.log(&format!(
            "  kernel ping run {r}: min {min} ms, avg {avg} ms"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pktgen_interval_lines() {
        let out =
            "header\n0.000 pps (0.000 pkts 0.0 bps in 1000000 usec) 0.00 avg_batch 0 min_space\n\
            1.240 Mpps (1.240 Mpkts 595.1 Mbps in 1000123 usec) 511.97 avg_batch 0 min_space\n\
            316.974 Kpps (x in 500000 usec) 1 avg_batch\n\
            garbage Mpps (\n2 Mpps (no time)\n{\"packets\":5}\n";
        let s = pktgen_samples(out);
        assert_eq!(
            s,
            vec![
                Sample {
                    pps: 316_974,
                    secs: 0.5
                },
                Sample {
                    pps: 2_000_000,
                    secs: 1.0
                }
            ]
        );
        assert_eq!(window(&s, 1, 5.0).len(), 1);
        assert_eq!(window(&s, 0, 0.5).len(), 1);
    }

    #[test]
    fn ping_summary() {
        let out = "--- 10.77.0.2 ping statistics ---\n5000 packets transmitted, 5000 received, 0% packet loss, time 60ms\nrtt min/avg/max/mdev = 0.008/0.010/0.050/0.002 ms, ipg/ewma 0.012/0.010 ms\n";
        assert_eq!(ping_rtt(out), Some((0.008, 0.010)));
        assert_eq!(ping_rtt("rtt min/avg/max/mdev = x/y/z ms"), None);
        assert_eq!(ping_rtt("rtt min/avg/max/mdev = 0.1"), None);
        assert_eq!(ping_rtt("no summary"), None);
    }

    #[test]
    fn counters_read_defensively() {
        let j = r#"[{"ifname":"rsbnB","stats64":{"rx":{"packets":10,"dropped":2},"tx":{"dropped":3}}}]"#;
        assert_eq!(
            Link::parse(j),
            Link {
                rx_packets: Some(10),
                rx_dropped: Some(2),
                tx_dropped: Some(3)
            }
        );
        assert_eq!(Link::parse("[]"), Link::default());
        assert_eq!(Link::parse("nonsense"), Link::default());
        let stat = "cpu  1 2 3 4 5 6 7 8\ncpu0 10 0 10 70 5 0 5 0 0 0\ncpu1 x\n";
        let t = CpuTicks::parse(stat, 0).unwrap();
        assert_eq!((t.busy, t.total, t.softirq), (25, 100, 5));
        assert_eq!(CpuTicks::parse(stat, 1), None);
        assert_eq!(CpuTicks::parse(stat, 2), None);
        let later = CpuTicks {
            busy: 75,
            total: 200,
            softirq: 55,
        };
        assert_eq!(t.busy_text(later).as_deref(), Some("50% (softirq 50%)"));
        assert_eq!(t.busy_text(t), None);
    }
}
