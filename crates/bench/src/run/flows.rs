//! The flows section: the switch with an OpenFlow table beside the
//! learning bridge in the same run, and beside OVS-DPDK with the same
//! flows. Every figure is measured here, in this order:
//!
//! 1. the learning bridge (`valel:tx` → `valel:rx`) and a switch with
//!    1,000 flows over ten masks (`valef`, loaded with `ovs-ofctl
//!    add-flows`) under the same 1,000 active 5-tuples, each frame size:
//!    received Mpps and their ratio. The sender shares the worker's CPU and
//!    the receiver has the other: the sender waits whenever the switch is
//!    behind, and the receiver keeps up, so the rate is set by the
//!    switch's work per frame (plus the sender's). A third switch with one
//!    flow (`valeo`: `in_port=tx,actions=output:rx`) under the same
//!    tuples gives the ratio OVS's figures give, 1,000 flows ÷ one flow:
//!    like OVS's port-to-port flow (and unlike the learning bridge, which
//!    decides once per run of frames with the same addresses, and these
//!    tuples share theirs), it looks every frame up. With both pkt-gens on
//!    one CPU, as the later parts run, a sender that stamps every frame
//!    never waits on a fast switch (which drops what the receiver's ring
//!    cannot take), and the receiver gets the CPU only between the
//!    sender's scheduler slices: the faster switch measured the slower;
//! 2. the flow-mod rate: 50,000 FLOW_MODs pipelined with one barrier, and
//!    `ovs-ofctl add-flows` of the same flows (a barrier per flow);
//! 3. the table's rate while flows change (a thread adding and deleting
//!    flows at a steady pace over the switch's OpenFlow socket), beside
//!    the same run without changes;
//! 4. a cache-miss storm (every packet a new 5-tuple, matched by a
//!    catch-all flow) beside a steady rate-limited stream of its own flow:
//!    both rates, and the steady stream's rate without the storm;
//! 5. OVS-DPDK with the 1,000 flows (`bench/peers/ovs-dpdk.sh --ports memif
//!    --flows FILE`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::measure::Tput;
use super::openflow::{self as of, TUPLES_DST, TUPLES_SRC};
use super::procs::{clock_ticks, cpu_ticks};
use super::Bench;
use crate::error::Error;
use crate::figures::{mpps, tick_seconds};
use crate::write::Key;

const SECTION: &str = "flows";
/// The learning bridge's system.
pub const LEARNING: &str = "ringswitch switch, learning bridge";
/// The flow table's system.
pub const TABLE: &str = "ringswitch switch, 1,000 flows (10 masks)";
/// The one-flow switch's system.
pub const ONE_FLOW: &str = "ringswitch switch, one flow (in_port to rx)";

/// One stream of a run: sender port, receiver port, the sender's own
/// pkt-gen arguments.
#[derive(Clone)]
struct Stream {
    name: &'static str,
    tx: String,
    rx: String,
    args: Vec<String>,
    /// The sender on the worker's CPU (the receiver keeps its own), not
    /// beside the receiver.
    tx_with_worker: bool,
}

/// The 1,000 tuples' pkt-gen arguments.
fn tuple_args() -> Vec<String> {
    ["-s", TUPLES_SRC, "-d", TUPLES_DST]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// The port numbers `ovs-ofctl show` lists: `(number, name)` from its
/// ` N(NAME): addr:...` lines.
pub fn show_ports(show: &str) -> Vec<(u32, String)> {
    show.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (n, rest) = l.split_once('(')?;
            let (name, _) = rest.split_once("):")?;
            Some((n.trim().parse().ok()?, name.to_owned()))
        })
        .collect()
}

/// The number of port `name` (listed as `name` or `SWITCH:name`).
fn port_number(ports: &[(u32, String)], name: &str) -> Option<u32> {
    ports
        .iter()
        .find(|(_, n)| n == name || n.ends_with(&format!(":{name}")))
        .map(|(p, _)| *p)
}

fn key<'a>(case: &'a str, system: &'a str, metric: &'a str, unit: &'a str) -> Key<'a> {
    Key {
        section: SECTION,
        case,
        system,
        metric,
        unit,
        better: "higher",
        x: "-",
    }
}

impl Bench {
    /// Receivers first (each ready), then all senders at once for `secs`
    /// (both pkt-gens on the receivers' CPU, as the switch section places
    /// them: the worker has the senders' CPU; or a stream's sender on the
    /// worker's CPU, [`Stream::tx_with_worker`]), then the receivers stop.
    /// One [`Tput`] per stream, or why the run failed.
    fn streams(
        &mut self,
        label: &str,
        streams: &[Stream],
        len: u64,
        secs: u64,
    ) -> Result<Vec<Tput>, String> {
        let burst = self
            .params
            .one("burst")
            .map_err(|e| e.to_string())?
            .to_string();
        let (len, rx_secs, tx_secs) = (len.to_string(), (secs + 30).to_string(), secs.to_string());
        let mut rxs = Vec::new();
        for s in streams {
            let cmd = self.rs_cmd(&[
                "pkt-gen",
                "-i",
                &s.rx,
                "-f",
                "rx",
                "-b",
                &burst,
                "--duration",
                &rx_secs,
                "-T",
                "0",
                "--json",
            ]);
            let started = self
                .procs
                .start(
                    &format!("{label}-{}-rx", s.name),
                    Some(self.rx_cpu),
                    secs + 40,
                    &cmd,
                )
                .and_then(|rx| {
                    self.procs
                        .ready_or_stop(&rx, 15)
                        .map(|()| rx)
                        .map_err(|why| format!("receiver did not open {}: {why}", s.rx))
                });
            match started {
                Ok(rx) => rxs.push(rx),
                Err(e) => {
                    for rx in &rxs {
                        self.procs.stop(rx);
                    }
                    return Err(e);
                }
            }
        }
        let mut txs = Vec::new();
        for s in streams {
            let mut args: Vec<&str> =
                vec!["pkt-gen", "-i", &s.tx, "-f", "tx", "-l", &len, "-b", &burst];
            args.extend(s.args.iter().map(String::as_str));
            args.extend_from_slice(&["--duration", &tx_secs, "-T", "0", "--json"]);
            let cmd = self.rs_cmd(&args);
            let cpu = if s.tx_with_worker {
                self.tx_cpu
            } else {
                self.rx_cpu
            };
            match self.procs.start(
                &format!("{label}-{}-tx", s.name),
                Some(cpu),
                secs + 30,
                &cmd,
            ) {
                Ok(tx) => txs.push(tx),
                Err(e) => {
                    for p in txs.iter().chain(&rxs) {
                        self.procs.stop(p);
                    }
                    return Err(e);
                }
            }
        }
        let dc0 = self.daemon.pid.and_then(cpu_ticks);
        let exits: Vec<_> = txs.iter().map(|tx| self.procs.wait(tx)).collect();
        let dc1 = self.daemon.pid.and_then(cpu_ticks);
        let daemon_s = match (dc0, dc1) {
            (Some(a), Some(b)) => Some(tick_seconds(b.saturating_sub(a), clock_ticks())),
            _ => None,
        };
        // The last frames in flight reach the receivers.
        std::thread::sleep(Duration::from_millis(300));
        let rx_exits: Vec<_> = rxs.iter().map(|rx| self.procs.stop(rx)).collect();
        let mut out = Vec::new();
        for (i, s) in streams.iter().enumerate() {
            let txr = self.read_report(&txs[i]).unwrap_or_default();
            let rxr = self.read_report(&rxs[i]).unwrap_or_default();
            if !exits[i].ok() || txr.pps.is_none() {
                return Err(format!(
                    "{} sender failed: {}",
                    s.name,
                    self.procs.why(&txs[i], exits[i])
                ));
            }
            if rxr.pps.is_none() || rxr.packets.unwrap_or(0) == 0 {
                let why = self.procs.why(&rxs[i], rx_exits[i]);
                return Err(format!(
                    "{} receiver got no packets (sender sent {}): {why}",
                    s.name,
                    txr.packets.unwrap_or(0)
                ));
            }
            out.push(Tput {
                rx: rxr,
                tx: txr,
                daemon_s,
                stats: None,
            });
        }
        Ok(out)
    }

    /// `ovs-ofctl -O OpenFlow13 ARGS` under a 300 s timeout: its stdout and
    /// the seconds it took, or why it failed.
    pub(super) fn ofctl(&mut self, label: &str, args: &[&str]) -> Result<(String, f64), String> {
        let mut cmd = vec!["ovs-ofctl".to_owned(), "-O".into(), "OpenFlow13".into()];
        cmd.extend(args.iter().map(|a| (*a).to_owned()));
        let t0 = Instant::now();
        let (stem, exit) = self.procs.run(label, None, 300, &cmd)?;
        let took = t0.elapsed().as_secs_f64();
        if !exit.ok() {
            return Err(format!(
                "ovs-ofctl {}: {}",
                args.join(" "),
                self.procs.why(&stem, exit)
            ));
        }
        let out = std::fs::read_to_string(self.procs.out_path(&stem)).unwrap_or_default();
        Ok((out, took))
    }

    /// A switch with OpenFlow on `sock` and persistent ring ports `ports`
    /// (in this order); their OpenFlow numbers, from `ovs-ofctl show`.
    fn of_switch(&mut self, sw: &str, sock: &Path, ports: &[&str]) -> Result<Vec<u32>, String> {
        let target = format!("unix:{}", sock.display());
        self.ctl(&["switch", "add", sw, "--openflow-listen", &target])
            .ok_or_else(|| format!("ctl switch add {sw} --openflow-listen {target} failed"))?;
        for p in ports {
            let port = format!("{sw}:{p}");
            self.ctl(&["port", "add", &port])
                .ok_or_else(|| format!("ctl port add {port} failed"))?;
        }
        let (show, _) = self.ofctl(&format!("ofctl-show-{sw}"), &["show", &target])?;
        let listed = show_ports(&show);
        ports
            .iter()
            .map(|p| {
                port_number(&listed, p)
                    .ok_or_else(|| format!("ovs-ofctl show {target} lists no port {p}: {show}"))
            })
            .collect()
    }
}

/// The flows section (see the module's text).
pub fn flows(b: &mut Bench) -> Result<(), Error> {
    b.log("flows: a 1,000-flow table beside the learning bridge, flow-mod rate, flow changes, a cache-miss storm, OVS-DPDK");
    let secs = b.params.one("flows_secs")?;
    let rate_n = u32::try_from(b.params.one("flows_rate_n")?).unwrap_or(50_000);
    let churn = u32::try_from(b.params.one("flows_churn")?).unwrap_or(1000);
    let steady = b.params.one("flows_steady_pps")?;
    let sizes = b.params.list("sizes")?.to_vec();
    // A fresh daemon: no switch of an earlier section keeps its name.
    b.daemon_stop();
    let worker = b.tx_cpu.to_string();
    if let Err(e) = b.daemon_ensure(&["--workers", "1", "--worker-cpus", &worker]) {
        b.data.miss(SECTION, "all", TABLE, &e)?;
        return Ok(());
    }
    let dir = PathBuf::from(&b.sock)
        .parent()
        .map_or_else(std::env::temp_dir, Path::to_path_buf);
    let sock = dir.join("valef.of");
    let target = format!("unix:{}", sock.display());
    let ports = match b.of_switch("valef", &sock, &["rx", "tx", "srx", "stx"]) {
        Ok(p) => p,
        Err(e) => {
            b.data.miss(SECTION, "all", TABLE, &e)?;
            b.daemon_stop();
            return Ok(());
        }
    };
    // The learning bridge's ports are made the same way (persistent).
    for p in ["valel:rx", "valel:tx"] {
        if b.ctl(&["port", "add", p]).is_none() {
            b.data.miss(
                SECTION,
                "all",
                LEARNING,
                &format!("ctl port add {p} failed"),
            )?;
            b.daemon_stop();
            return Ok(());
        }
    }
    let (rx_no, srx_no, stx_no) = (ports[0], ports[2], ports[3]);
    b.log(&format!(
        "  valef's OpenFlow ports: rx {}, tx {}, srx {srx_no}, stx {stx_no}",
        ports[0], ports[1]
    ));
    let file = b.out.join("raw/flows-1000.txt");
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })
    };
    write(&file, &of::thousand_flows(&rx_no.to_string()))?;
    let file_s = file.display().to_string();
    match b.ofctl("ofctl-add-1000", &["add-flows", &target, &file_s]) {
        Ok((_, took)) => b.log(&format!(
            "  ovs-ofctl add-flows {target} raw/flows-1000.txt: 1,000 flows in {took:.2} s"
        )),
        Err(e) => {
            b.data.miss(SECTION, "all", TABLE, &e)?;
            b.daemon_stop();
            return Ok(());
        }
    }
    if let Ok((agg, _)) = b.ofctl("ofctl-aggregate-1000", &["dump-aggregate", &target]) {
        b.log(&format!("  valef: {}", agg.trim()));
    }

    // The one-flow switch, if it can be made (its figures are missing,
    // with the reason, if not).
    let one_flow = match one_flow_switch(b, &dir) {
        Ok(()) => true,
        Err(e) => {
            b.data.miss(SECTION, "all", ONE_FLOW, &e)?;
            false
        }
    };

    // 1. The table beside the learning bridge and one flow, same tuples,
    // same run.
    for &len in &sizes {
        let case = format!("{len} B, 1,000 active 5-tuples");
        for r in 1..=b.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            let (mut got, mut cost) = ([None, None], [None, None]);
            let (mut one_got, mut one_cost) = (None, None);
            let systems = [(LEARNING, "valel"), (TABLE, "valef"), (ONE_FLOW, "valeo")];
            for (i, (sys, sw)) in systems.into_iter().enumerate() {
                if sys == ONE_FLOW && !one_flow {
                    continue;
                }
                let s = Stream {
                    name: "main",
                    tx: format!("{sw}:tx"),
                    rx: format!("{sw}:rx"),
                    args: tuple_args(),
                    tx_with_worker: true,
                };
                match b.streams(&format!("flows-{sw}-{len}-r{r}"), &[s], len, secs) {
                    Ok(t) => {
                        let pps = t[0].rx_pps();
                        b.data
                            .sample(&Key::received(SECTION, &case, sys, "-"), r, &mpps(pps))?;
                        b.log(&format!("  {sys}, {len} B, run {r}: {} Mpps", mpps(pps)));
                        match got.get_mut(i) {
                            Some(g) if sys != ONE_FLOW => *g = Some(pps),
                            _ => one_got = Some(pps),
                        }
                        // The daemon's CPU over the senders' window, per
                        // packet received: what other load on the machine
                        // steals does not count in it.
                        let pkts = t[0].rx_packets();
                        if let (Some(cpu), true) = (t[0].daemon_s, pkts > 0) {
                            let ns = cpu * 1e9 / pkts as f64;
                            let k = Key {
                                better: "lower",
                                ..key(&case, sys, "CPU, switch process", "ns per packet")
                            };
                            b.data.sample(&k, r, &format!("{ns:.1}"))?;
                            match cost.get_mut(i) {
                                Some(c) if sys != ONE_FLOW => *c = Some(ns),
                                _ => one_cost = Some(ns),
                            }
                        }
                    }
                    Err(e) => b.data.miss(SECTION, &case, sys, &format!("run {r}: {e}"))?,
                }
            }
            // A switch that moved nothing has no ratio (its run says why).
            if let [Some(l), Some(t)] = got.map(|g| g.filter(|&p| p > 0.0)) {
                let pct = format!("{:.1}", 100.0 * t / l);
                b.data
                    .sample(&key(&case, TABLE, "flows ÷ learning bridge", "%"), r, &pct)?;
                let by_cost = match cost {
                    [Some(l), Some(t)] if t > 0.0 => {
                        let c = format!("{:.1}", 100.0 * l / t);
                        b.data.sample(
                            &key(
                                &case,
                                TABLE,
                                "learning bridge's CPU per packet ÷ flows'",
                                "%",
                            ),
                            r,
                            &c,
                        )?;
                        c
                    }
                    _ => "?".into(),
                };
                b.log(&format!(
                    "  {len} B run {r}: flows ÷ learning = {pct} % (by the switch's CPU per packet: {by_cost} %)"
                ));
            }
            if let (Some(o), [_, Some(t)]) = (one_got.filter(|&p| p > 0.0), got) {
                let pct = format!("{:.1}", 100.0 * t / o);
                b.data
                    .sample(&key(&case, TABLE, "1,000 flows ÷ one flow", "%"), r, &pct)?;
                let by_cost = match (one_cost, cost[1]) {
                    (Some(o), Some(t)) if t > 0.0 => {
                        let c = format!("{:.1}", 100.0 * o / t);
                        let k = key(
                            &case,
                            TABLE,
                            "one flow's CPU per packet ÷ 1,000 flows'",
                            "%",
                        );
                        b.data.sample(&k, r, &c)?;
                        c
                    }
                    _ => "?".into(),
                };
                b.log(&format!(
                    "  {len} B run {r}: 1,000 flows ÷ one flow = {pct} % (by the switch's CPU per packet: {by_cost} %)"
                ));
            }
        }
    }

    // 2. The flow-mod rate, on a switch of its own (the 1,000 flows stay).
    flow_mod_rate(b, &dir, rate_n)?;

    // 3. The table's rate while flows change.
    let case = format!("60 B, 1,000 flows, {churn} flows added and {churn} deleted per second");
    let base_case = "60 B, 1,000 flows, no flow changes".to_owned();
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            return Ok(());
        }
        let s = || Stream {
            name: "main",
            tx: "valef:tx".into(),
            rx: "valef:rx".into(),
            args: tuple_args(),
            tx_with_worker: false,
        };
        match b.streams(&format!("flows-still-r{r}"), &[s()], 60, secs) {
            Ok(t) => {
                b.data.sample(
                    &Key::received(SECTION, &base_case, TABLE, "-"),
                    r,
                    &mpps(t[0].rx_pps()),
                )?;
                b.log(&format!(
                    "  no flow changes, run {r}: {} Mpps",
                    mpps(t[0].rx_pps())
                ));
            }
            Err(e) => b
                .data
                .miss(SECTION, &base_case, TABLE, &format!("run {r}: {e}"))?,
        }
        let stop = AtomicBool::new(false);
        let (res, churned) = std::thread::scope(|scope| {
            let h = scope.spawn(|| of::churn(&sock, churn, rx_no, &stop));
            // The churn fills its share of the table first.
            std::thread::sleep(Duration::from_millis(500));
            let res = b.streams(&format!("flows-churn-r{r}"), &[s()], 60, secs);
            // Relaxed: a flag only; the thread is joined right after.
            stop.store(true, Ordering::Relaxed);
            (
                res,
                h.join()
                    .unwrap_or_else(|_| Err("the churn thread panicked".into())),
            )
        });
        match (res, churned) {
            (Ok(t), Ok(c)) => {
                b.data.sample(
                    &Key::received(SECTION, &case, TABLE, "-"),
                    r,
                    &mpps(t[0].rx_pps()),
                )?;
                let (adds, dels) = (c.added as f64 / c.secs, c.deleted as f64 / c.secs);
                b.data.sample(
                    &key(&case, TABLE, "flows added", "per s"),
                    r,
                    &format!("{adds:.0}"),
                )?;
                b.data.sample(
                    &key(&case, TABLE, "flows deleted", "per s"),
                    r,
                    &format!("{dels:.0}"),
                )?;
                b.log(&format!(
                    "  flows changing, run {r}: {} Mpps; {} added, {} deleted in {:.1} s ({adds:.0} adds/s, {dels:.0} deletes/s), {} errors",
                    mpps(t[0].rx_pps()),
                    c.added,
                    c.deleted,
                    c.secs,
                    c.errors
                ));
                if c.errors > 0 {
                    b.data.miss(
                        SECTION,
                        &case,
                        TABLE,
                        &format!("run {r}: the switch refused {} flow mods", c.errors),
                    )?;
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                b.data
                    .miss(SECTION, &case, TABLE, &format!("run {r}: {e}"))?
            }
        }
    }

    // 4. A cache-miss storm beside a steady stream of its own flow.
    storm(b, &target, rx_no, srx_no, stx_no, steady, secs)?;
    b.daemon_stop();

    // 5. OVS-DPDK with the same flows.
    ovs_flows(b)?;
    note(b, secs, rate_n, churn, steady)?;
    Ok(())
}

/// Flow-mod rate on switch `valer`: `n` FLOW_MODs pipelined then one
/// barrier, then `ovs-ofctl add-flows` of the same `n` flows (a barrier
/// after each flow, its way).
fn flow_mod_rate(b: &mut Bench, dir: &Path, n: u32) -> Result<(), Error> {
    const PIPELINED: &str = "ringswitch, FLOW_MODs pipelined, one barrier";
    const OFCTL: &str = "ringswitch, ovs-ofctl add-flows";
    let case = format!("flow-mod rate, {n} flows");
    let sock = dir.join("valer.of");
    let target = format!("unix:{}", sock.display());
    let port = match b.of_switch("valer", &sock, &["a"]) {
        Ok(p) => p[0],
        Err(e) => return b.data.miss(SECTION, &case, PIPELINED, &e),
    };
    let file = b.out.join(format!("raw/flows-rate-{n}.txt"));
    if let Err(source) = std::fs::write(&file, of::rate_flows(n, port)) {
        return Err(Error::Write { path: file, source });
    }
    let file_s = file.display().to_string();
    for r in 1..=b.runs {
        let _ = b.ofctl("ofctl-del-rate", &["del-flows", &target]);
        match of::pipelined_rate(&sock, n, port) {
            Ok((s, 0)) => {
                let rate = f64::from(n) / s;
                b.data.sample(
                    &key(&case, PIPELINED, "installed", "flows per s"),
                    r,
                    &format!("{rate:.0}"),
                )?;
                b.log(&format!(
                    "  {n} FLOW_MODs pipelined + barrier, run {r}: {s:.3} s, {rate:.0} flows/s"
                ));
            }
            Ok((_, errs)) => b.data.miss(
                SECTION,
                &case,
                PIPELINED,
                &format!("run {r}: {errs} flow mods refused"),
            )?,
            Err(e) => b
                .data
                .miss(SECTION, &case, PIPELINED, &format!("run {r}: {e}"))?,
        }
        let _ = b.ofctl("ofctl-del-rate", &["del-flows", &target]);
        match b.ofctl(
            &format!("ofctl-add-rate-r{r}"),
            &["add-flows", &target, &file_s],
        ) {
            Ok((_, s)) => {
                let rate = f64::from(n) / s;
                b.data.sample(
                    &key(&case, OFCTL, "installed", "flows per s"),
                    r,
                    &format!("{rate:.0}"),
                )?;
                b.log(&format!(
                    "  ovs-ofctl add-flows of {n} flows, run {r}: {s:.3} s, {rate:.0} flows/s"
                ));
            }
            Err(e) => b
                .data
                .miss(SECTION, &case, OFCTL, &format!("run {r}: {e}"))?,
        }
        if let Ok((agg, _)) = b.ofctl("ofctl-aggregate-rate", &["dump-aggregate", &target]) {
            if !agg.contains(&format!("flow_count={n}")) {
                b.data.miss(
                    SECTION,
                    &case,
                    OFCTL,
                    &format!("run {r}: the table holds {}", agg.trim()),
                )?;
            }
        }
    }
    let _ = b.ofctl("ofctl-del-rate", &["del-flows", &target]);
    Ok(())
}

/// A switch `valeo` with OpenFlow, ring ports `rx` and `tx` and one flow,
/// `in_port=tx,actions=output:rx`: every frame looked up, one verdict.
fn one_flow_switch(b: &mut Bench, dir: &Path) -> Result<(), String> {
    let sock = dir.join("valeo.of");
    let ports = b.of_switch("valeo", &sock, &["rx", "tx"])?;
    let flow = format!("in_port={},actions=output:{}", ports[1], ports[0]);
    let target = format!("unix:{}", sock.display());
    b.ofctl("ofctl-add-one", &["add-flow", &target, &flow])?;
    b.log(&format!("  valeo: one flow, {flow}"));
    Ok(())
}

/// The storm: `valef:tx` sends every packet from a new pair of random UDP
/// ports (a catch-all flow takes them to `rx`), while `valef:stx` sends one
/// 5-tuple at `steady` packets/s that its own flow takes to `srx`.
fn storm(
    b: &mut Bench,
    target: &str,
    rx: u32,
    srx: u32,
    stx: u32,
    steady: u64,
    secs: u64,
) -> Result<(), Error> {
    const CASE: &str = "60 B, cache-miss storm: every packet a new 5-tuple";
    const STEADY_ALONE: &str = "ringswitch, steady stream alone";
    const STEADY: &str = "ringswitch, steady stream beside the storm";
    const STORM: &str = "ringswitch, the storm";
    let flows = [
        format!("priority=200,udp,in_port={stx},nw_src=10.2.0.1,actions=output:{srx}"),
        format!("priority=1,udp,actions=output:{rx}"),
    ];
    for f in &flows {
        if let Err(e) = b.ofctl("ofctl-add-storm", &["add-flow", target, f]) {
            return b.data.miss(SECTION, CASE, STORM, &e);
        }
    }
    let steady_s = || Stream {
        name: "steady",
        tx: "valef:stx".into(),
        rx: "valef:srx".into(),
        args: [
            "-s",
            "10.2.0.1:5000",
            "-d",
            TUPLES_DST,
            "-R",
            &steady.to_string(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect(),
        tx_with_worker: false,
    };
    let storm_s = Stream {
        name: "storm",
        tx: "valef:tx".into(),
        rx: "valef:rx".into(),
        args: ["-s", "10.3.0.1", "-d", "10.1.0.1", "-z", "-Z"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        tx_with_worker: false,
    };
    for r in 1..=b.runs {
        if super::signals::interrupted() {
            return Ok(());
        }
        match b.streams(&format!("flows-steady-r{r}"), &[steady_s()], 60, secs) {
            Ok(t) => {
                b.data.sample(
                    &Key::received(SECTION, CASE, STEADY_ALONE, "-"),
                    r,
                    &mpps(t[0].rx_pps()),
                )?;
                b.log(&format!(
                    "  steady stream alone (-R {steady}), run {r}: {} Mpps",
                    mpps(t[0].rx_pps())
                ));
            }
            Err(e) => b
                .data
                .miss(SECTION, CASE, STEADY_ALONE, &format!("run {r}: {e}"))?,
        }
        let both = [steady_s(), storm_s.clone()];
        match b.streams(&format!("flows-storm-r{r}"), &both, 60, secs) {
            Ok(t) => {
                b.data.sample(
                    &Key::received(SECTION, CASE, STEADY, "-"),
                    r,
                    &mpps(t[0].rx_pps()),
                )?;
                let (got, sent) = (t[0].rx_packets(), t[0].tx.packets.unwrap_or(0));
                if sent > 0 {
                    let pct = format!("{:.2}", 100.0 * got as f64 / sent as f64);
                    b.data
                        .sample(&key(CASE, STEADY, "delivered, % of sent", "%"), r, &pct)?;
                }
                b.data.sample(
                    &Key::received(SECTION, CASE, STORM, "-"),
                    r,
                    &mpps(t[1].rx_pps()),
                )?;
                b.log(&format!(
                    "  storm run {r}: steady {} Mpps (sent {}), storm {} Mpps (sent {})",
                    mpps(t[0].rx_pps()),
                    mpps(t[0].tx.pps.unwrap_or(0.0)),
                    mpps(t[1].rx_pps()),
                    mpps(t[1].tx.pps.unwrap_or(0.0))
                ));
            }
            Err(e) => b
                .data
                .miss(SECTION, CASE, STORM, &format!("run {r}: {e}"))?,
        }
    }
    Ok(())
}

/// OVS-DPDK with memif ports (`ovs-dpdk.sh --ports memif`, as the switch
/// section runs it), each size of `ovs_sizes`: its port-to-port flow, then
/// the 1,000 flows (`--flows`), both fed the 1,000 tuples by a testpmd
/// that replays them from a pcap file (`--tx-pcap`, DPDK's pcap PMD).
/// Beside the received rate (set by the receiving testpmd sharing a CPU
/// with the sender, as in the switch section) goes the PMD thread's own
/// processing cycles per packet, the cost the flows add.
fn ovs_flows(b: &mut Bench) -> Result<(), Error> {
    const P2P: &str = "OVS-DPDK (memif ports), port-to-port flow";
    const OVS: &str = "OVS-DPDK (memif ports), 1,000 flows (10 masks)";
    let secs = b.params.one("flows_ovs_secs")?;
    let file = b.out.join("raw/flows-1000-ovs.txt");
    if let Err(source) = std::fs::write(&file, of::thousand_flows("@RX@")) {
        return Err(Error::Write { path: file, source });
    }
    let script = b.bench_dir.join("peers/ovs-dpdk.sh").display().to_string();
    let placement = format!("{},{},{}", b.rx_cpu, b.rx_cpu, b.tx_cpu);
    for &size in &b.params.list("ovs_sizes")?.to_vec() {
        let case = format!(
            "{} B, 1,000 active 5-tuples (testpmd replaying a pcap)",
            if size == 64 { 60 } else { size }
        );
        let pcap = b.out.join(format!("raw/tuples-1000-{size}.pcap"));
        let frame = usize::try_from(size).unwrap_or(64);
        if let Err(source) = std::fs::write(&pcap, of::tuples_pcap(frame)) {
            return Err(Error::Write { path: pcap, source });
        }
        for r in 1..=b.runs {
            let (mut got, mut cycles) = ([None, None], [None, None]);
            for (i, (sys, flows)) in [(P2P, false), (OVS, true)].into_iter().enumerate() {
                if super::signals::interrupted() {
                    return Ok(());
                }
                let stem = format!(
                    "ovs-flows-{}-{size}-r{r}",
                    if flows { "table" } else { "p2p" }
                );
                let raw = b.out.join(format!("raw/{stem}"));
                let _ = std::fs::create_dir_all(&raw);
                let mut cmd = super::peers::ovs_dpdk_argv(
                    &script,
                    Some("memif"),
                    &size.to_string(),
                    secs,
                    0,
                    &placement,
                    "0",
                    &raw,
                );
                cmd.extend(["--tx-pcap".to_owned(), pcap.display().to_string()]);
                if flows {
                    cmd.extend(["--flows".to_owned(), file.display().to_string()]);
                }
                b.log(&format!("  {sys}, {size} B, run {r}: {}", cmd.join(" ")));
                let row = b
                    .peer(&stem, 600, &cmd)
                    .map(|(_, out)| super::peers::ovs_placements(&out).unwrap_or_default())
                    .and_then(|rows| {
                        rows.into_iter()
                            .find_map(|p| p.rx_mpps.clone().map(|m| (m, p)))
                            .ok_or_else(|| "no placement line in ovs-dpdk.sh's report".to_owned())
                    });
                match row {
                    Ok((m, p)) => {
                        b.data
                            .sample(&Key::received(SECTION, &case, sys, "-"), r, &m)?;
                        got[i] = m.parse::<f64>().ok();
                        if let Some(c) = p.pmd_proc_cycles_per_pkt {
                            let k = Key {
                                better: "lower",
                                ..key(&case, sys, "PMD processing cycles", "per packet")
                            };
                            b.data.sample(&k, r, &format!("{c:.1}"))?;
                            cycles[i] = Some(c);
                        }
                        b.log(&format!(
                            "  {sys}, {size} B, run {r}: {m} Mpps, PMD {} processing cycles per packet",
                            p.pmd_proc_cycles_per_pkt
                                .map_or_else(|| "?".to_owned(), |c| format!("{c:.1}"))
                        ));
                    }
                    Err(e) => b.data.miss(SECTION, &case, sys, &format!("run {r}: {e}"))?,
                }
            }
            if let [Some(p), Some(t)] = got {
                if p > 0.0 {
                    let pct = format!("{:.1}", 100.0 * t / p);
                    b.data.sample(
                        &key(&case, OVS, "1,000 flows ÷ port-to-port flow", "%"),
                        r,
                        &pct,
                    )?;
                    b.log(&format!(
                        "  OVS-DPDK {size} B run {r}: 1,000 flows ÷ port-to-port = {pct} %"
                    ));
                }
            }
            if let [Some(p), Some(t)] = cycles {
                if t > 0.0 {
                    let pct = format!("{:.1}", 100.0 * p / t);
                    b.data.sample(
                        &key(
                            &case,
                            OVS,
                            "port-to-port's PMD cycles per packet ÷ 1,000 flows'",
                            "%",
                        ),
                        r,
                        &pct,
                    )?;
                    b.log(&format!(
                        "  OVS-DPDK {size} B run {r}: by the PMD's processing cycles per packet, port-to-port ÷ 1,000 flows = {pct} %"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// How the section was measured, with its commands.
fn note(b: &mut Bench, secs: u64, rate_n: u32, churn: u32, steady: u64) -> Result<(), Error> {
    let (rx, tx, burst) = (b.rx_cpu, b.tx_cpu, b.params.one("burst")?);
    let text = format!(
        "`serve --workers 1 --worker-cpus {tx}`; `-b {burst}`, blocking, {secs} s per run. The rates of 1,000 flows, one flow and the learning bridge: each sender on CPU {tx}, beside the worker, and its receiver on CPU {rx}, so the rate is set by the switch's work per frame plus the sender's; every other pkt-gen on CPU {rx}. \
Learning bridge: `ctl port add valel:rx` (and `tx`), `pkt-gen -i valel:tx -f tx -l LEN -s {TUPLES_SRC} -d {TUPLES_DST}` → `pkt-gen -i valel:rx -f rx` (the 1,000 5-tuples: 10 source addresses × 100 source ports). \
Flows: `ctl switch add valef --openflow-listen unix:PATH`, `ctl port add valef:rx` (and `tx`, `srx`, `stx`), `ovs-ofctl -O OpenFlow13 add-flows unix:PATH raw/flows-1000.txt` \
(1,000 flows, one per tuple, ten masks: `udp,nw_src=10.0.0.K,tp_src=P` plus the destination address unmatched or under /8, /16, /24, /32, with or without `tp_dst`; `actions=output:` the receiver's port), then the same pkt-gen pair on `valef:tx` → `valef:rx`; the ratio is the table's rate ÷ the learning bridge's in the same run. \
One flow: `ctl switch add valeo --openflow-listen unix:PATH`, `ctl port add valeo:rx` (and `tx`), `ovs-ofctl -O OpenFlow13 add-flow unix:PATH in_port=TX,actions=output:RX`, the same pkt-gen pair; 1,000 flows ÷ one flow is the ratio OVS-DPDK's figures give (its port-to-port flow, like this one, looks every packet up; the learning bridge decides once per run of frames with the same addresses, and the tuples share theirs). \
Flow-mod rate: switch `valer`, {rate_n} FLOW_MODs (`tcp,nw_dst=10.x.y.z,tp_dst=80..82`) written at once, then one BARRIER_REQUEST, timed to its reply; and `ovs-ofctl -O OpenFlow13 add-flows unix:PATH raw/flows-rate-{rate_n}.txt` (a barrier per flow). \
Flows changing: a thread on the OpenFlow socket first adds {churn} flows, then every 10 ms adds {} and deletes (strict) the {} oldest, with a barrier each time ({churn} adds and {churn} deletes per second; `udp,nw_src=10.9.x.y,tp_src=2000..2099`, priority 150, matching no tuple sent), started 0.5 s before the pkt-gens; beside a run without it. \
Storm: flows `priority=1,udp,actions=output:RX` and `priority=200,udp,in_port=STX,nw_src=10.2.0.1,actions=output:SRX` added to the 1,000; `pkt-gen -i valef:tx -f tx -s 10.3.0.1 -d 10.1.0.1 -z -Z` (random source and destination port per packet) and `pkt-gen -i valef:stx -f tx -s 10.2.0.1:5000 -d {TUPLES_DST} -R {steady}` at once, and the steady stream alone.",
        churn / 100,
        churn / 100
    );
    b.data.note(SECTION, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_from_ovs_ofctl_show() {
        let show = "OFPT_FEATURES_REPLY (OF1.3) (xid=0x2): dpid:0000a1b2c3d4e5f6\n\
n_tables:1, n_buffers:0\n\
OFPST_PORT_DESC reply (OF1.3) (xid=0x3):\n 1(rx): addr:02:00:00:00:00:01\n     config:     0\n 2(valef:tx): addr:02:00:00:00:00:02\n";
        let p = show_ports(show);
        assert_eq!(port_number(&p, "rx"), Some(1));
        assert_eq!(port_number(&p, "tx"), Some(2));
        assert_eq!(port_number(&p, "srx"), None);
    }
}
