//! The sections `run` measures, their cases and the samples they write.
//! Their sizes, counts and durations come from the parameters file. The
//! peers of throughput and batch (DPDK memif) and of switch (OVS-DPDK with
//! memif ports) are measured here through their scripts ([`super::peers`]),
//! as are those of vm (OVS-DPDK with vhost-user ports, [`super::vm`]) and
//! of nic (DPDK testpmd and a Linux bridge on a veth, [`super::nic`]), of
//! latency (the kernel's ping) and of passthrough (vhost-user).

use std::str::FromStr;

use super::measure::{TputPlan, Wait};
use super::Bench;
use crate::error::Error;
use crate::figures::{mpps, per_mpkt};
use crate::write::Key;

/// A section of `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Pipes, process to process.
    Throughput,
    /// Two ring ports of one switch.
    Switch,
    /// Ping/pong through a pipe and a switch, busy and blocking.
    Latency,
    /// Throughput against batch size, pipe and switch.
    Batch,
    /// The daemon's CPU with 8 idle ports, then its memory.
    Idle,
    /// CPU against offered load, pipe and switch.
    Load,
    /// One TCG guest over a passthrough port and over vhost-user.
    Passthrough,
    /// testpmd virtio_user pairs through VM ports, beside OVS-DPDK.
    Vm,
    /// A veth pair: AF_XDP into the switch beside DPDK and a Linux bridge.
    Nic,
    /// OpenFlow tables: 1,000 flows beside the learning bridge and
    /// OVS-DPDK, flow-mod rate, flows changing, a cache-miss storm.
    Flows,
    /// The default (adaptive) wait against busy-waiting, blocking, guest
    /// halt polling and the old default, threads not pinned.
    Defaults,
}

/// The names `--sections` takes.
pub const NAMES: [&str; 11] = [
    "throughput",
    "switch",
    "latency",
    "batch",
    "idle",
    "load",
    "passthrough",
    "vm",
    "nic",
    "flows",
    "defaults",
];

impl Section {
    /// The name `--sections` takes, and the section of its samples.
    pub fn name(self) -> &'static str {
        match self {
            Section::Throughput => "throughput",
            Section::Switch => "switch",
            Section::Latency => "latency",
            Section::Batch => "batch",
            Section::Idle => "idle",
            Section::Load => "load",
            Section::Passthrough => "passthrough",
            Section::Vm => "vm",
            Section::Nic => "nic",
            Section::Flows => "flows",
            Section::Defaults => "defaults",
        }
    }
}

impl FromStr for Section {
    type Err = String;
    fn from_str(s: &str) -> Result<Section, String> {
        Ok(match s {
            "throughput" => Section::Throughput,
            "switch" => Section::Switch,
            "latency" => Section::Latency,
            "batch" => Section::Batch,
            "idle" => Section::Idle,
            "load" => Section::Load,
            "passthrough" => Section::Passthrough,
            "vm" => Section::Vm,
            "nic" => Section::Nic,
            "flows" => Section::Flows,
            "defaults" => Section::Defaults,
            _ => {
                return Err(format!(
                    "unknown section '{s}' (sections: {})",
                    NAMES.join(" ")
                ))
            }
        })
    }
}

/// The system of the pipe figures.
pub const PIPE: &str = "ringswitch pipe";
/// The system of the switch figures.
pub const SWITCH: &str = "ringswitch switch, 2 ring ports";

/// A CPU cost figure: seconds per million packets.
fn cost<'a>(case: &'a str, system: &'a str, metric: &'a str) -> Key<'a> {
    Key {
        section: "efficiency",
        case,
        system,
        metric,
        unit: "s per Mpkt",
        better: "lower",
        x: "-",
    }
}

/// A cost's text, `x` (not a number: a failure line) without packets.
fn cost_text(cpu_s: Option<f64>, packets: u64) -> String {
    cpu_s
        .and_then(|c| per_mpkt(c, packets))
        .unwrap_or_else(|| "x".into())
}

impl Section {
    /// Measures the section into the run's data files.
    pub fn run(self, b: &mut Bench) -> Result<(), Error> {
        match self {
            Section::Throughput => throughput(b),
            Section::Switch => switch(b),
            Section::Latency => latency(b),
            Section::Batch => batch(b),
            Section::Idle => super::idle::idle(b),
            Section::Load => super::load::load(b),
            Section::Passthrough => b.passthrough(),
            Section::Vm => super::vm::vm(b),
            Section::Nic => super::nic::nic(b),
            Section::Flows => super::flows::flows(b),
            Section::Defaults => super::defaults::defaults(b),
        }
    }
}

/// Pipes: sender and receiver on their own CPU.
fn throughput(b: &mut Bench) -> Result<(), Error> {
    b.log("throughput: ringswitch pipes, DPDK memif");
    sized_runs(b, false)?;
    if b.variants {
        pipe_variants(b)?;
    }
    Ok(())
}

/// The pipe at 60 B busy-waiting, and with 4096 slots and batch 2048
/// (fewer wake-ups per packet), blocking: received Mpps.
fn pipe_variants(b: &mut Bench) -> Result<(), Error> {
    let (secs, burst) = (b.params.one("secs")?, b.params.one("burst")?);
    for (case, label, busy, slots, burst) in [
        (
            "process to process, 60 B, busy-waiting",
            "pipe-busy",
            true,
            None,
            burst,
        ),
        (
            "process to process, 60 B, 4096 slots, batch 2048",
            "pipe-big",
            false,
            Some(4096),
            2048,
        ),
    ] {
        for r in 1..=b.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            if let Err(e) = b.daemon_ensure(&["--workers", "1"]) {
                b.data.miss("throughput", case, PIPE, &e)?;
                continue;
            }
            let n = b.next_pipe();
            let conf = slots.map_or(String::new(), |s| format!("@conf:slots={s}"));
            let (rxp, txp) = (format!("bp}}{n}{conf}"), format!("bp{{{n}"));
            let plan = TputPlan {
                label: &format!("{label}-r{r}"),
                rx_port: &rxp,
                tx_port: &txp,
                len: 60,
                burst,
                wait: if busy { Wait::Busy } else { Wait::Default },
                secs,
                rx_cpu: Some(b.rx_cpu),
                tx_cpu: Some(b.tx_cpu),
                stats: false,
            };
            match b.tput(&plan) {
                Ok(t) => {
                    let k = Key::received("throughput", case, PIPE, "-");
                    b.data.sample(&k, r, &mpps(t.rx_pps()))?;
                    b.log(&format!("  {label} run {r}: {} Mpps", mpps(t.rx_pps())));
                }
                Err(e) => b
                    .data
                    .miss("throughput", case, PIPE, &format!("run {r}: {e}"))?,
            }
        }
    }
    b.daemon_stop();
    Ok(())
}

/// The switch's sent rate and the receiving port's `drop_rx_full`, also as
/// a share of the packets sent, from one run's reports and counters.
fn sent_and_dropped(
    b: &mut Bench,
    case: &str,
    rx_port: &str,
    run: u32,
    t: &super::measure::Tput,
) -> Result<(), Error> {
    let key = |metric, unit, better| Key {
        section: "switch",
        case,
        system: SWITCH,
        metric,
        unit,
        better,
        x: "-",
    };
    b.data.sample(
        &key("sent", "Mpps", "higher"),
        run,
        &t.tx.pps.map_or_else(|| "x".to_owned(), mpps),
    )?;
    let stats = t.stats.clone().unwrap_or_default();
    let stem = rx_port.replace(':', "-");
    super::procs::save(&b.procs.out_path(&format!("stats-{stem}-r{run}")), &stats);
    let drops = super::vm::port_counter(&stats, rx_port, "drop_rx_full");
    let (dropped, share) = drop_figures(drops, t.tx.packets);
    b.data.sample(
        &key("dropped (drop_rx_full at the receiver)", "packets", "lower"),
        run,
        &dropped,
    )?;
    b.data
        .sample(&key("dropped, % of sent", "%", "lower"), run, &share)?;
    Ok(())
}

/// The dropped packets and their share of the sent ones (one decimal), as
/// sample texts: `x` (a failure line) where a count is missing.
pub fn drop_figures(drops: Option<u64>, sent: Option<u64>) -> (String, String) {
    match (drops, sent) {
        (Some(d), Some(s)) => {
            let share = if s > 0 {
                100.0 * d as f64 / s as f64
            } else {
                0.0
            };
            (d.to_string(), format!("{share:.1}"))
        }
        (Some(d), None) => (d.to_string(), "x".into()),
        _ => ("x".into(), "x".into()),
    }
}

/// Two ring ports of a switch, the worker on the senders' CPU, both
/// pkt-gens on the receivers' CPU.
fn switch(b: &mut Bench) -> Result<(), Error> {
    b.log("switch: two ring ports of one switch, OVS-DPDK with memif ports");
    sized_runs(b, true)?;
    // Nothing of ringswitch runs while the peers measure.
    b.daemon_stop();
    for &size in &b.params.list("ovs_sizes")?.to_vec() {
        let case = format!("through a switch, {} B", if size == 64 { 60 } else { size });
        // At 64 B also with the PMD sleeping when its queues are nearly empty.
        let maxsleeps: &[u64] = if size == 64 { &[0, 500] } else { &[0] };
        b.ovs_memif(size, &case, maxsleeps)?;
    }
    Ok(())
}

/// Each frame size, `runs` times, burst from the parameters, blocking:
/// through pipes (`switch` false) or two ring ports of a switch. Received
/// Mpps and CPU per million packets.
fn sized_runs(b: &mut Bench, switch: bool) -> Result<(), Error> {
    let (secs, burst) = (b.params.one("secs")?, b.params.one("burst")?);
    let worker = b.tx_cpu.to_string();
    let (section, sys, what) = if switch {
        ("switch", SWITCH, "switch")
    } else {
        ("throughput", PIPE, "pipe")
    };
    for &len in &b.params.list("sizes")?.to_vec() {
        let c = if switch {
            format!("through a switch, {len} B")
        } else {
            format!("process to process, {len} B")
        };
        for r in 1..=b.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            let daemon = if switch {
                b.daemon_ensure(&["--workers", "1", "--worker-cpus", &worker])
            } else {
                b.daemon_ensure(&["--workers", "1"])
            };
            if let Err(e) = daemon {
                b.data.miss(section, &c, sys, &e)?;
                continue;
            }
            let (rxp, txp, tx_cpu) = if switch {
                (
                    format!("valecmp{len}:b"),
                    format!("valecmp{len}:a"),
                    b.rx_cpu,
                )
            } else {
                let n = b.next_pipe();
                (format!("bp}}{n}"), format!("bp{{{n}"), b.tx_cpu)
            };
            let plan = TputPlan {
                label: &format!("{what}-{len}-r{r}"),
                rx_port: &rxp,
                tx_port: &txp,
                len,
                burst,
                wait: Wait::Default,
                secs,
                rx_cpu: Some(b.rx_cpu),
                tx_cpu: Some(tx_cpu),
                stats: switch && b.variants,
            };
            let t = match b.tput(&plan) {
                Ok(t) => t,
                Err(e) => {
                    b.data.miss(section, &c, sys, &format!("run {r}: {e}"))?;
                    continue;
                }
            };
            b.data
                .sample(&Key::received(section, &c, sys, "-"), r, &mpps(t.rx_pps()))?;
            let n = t.rx_packets();
            if switch {
                let own = cost_text(t.daemon_s, n);
                b.data
                    .sample(&cost(&c, sys, "CPU, switch process"), r, &own)?;
            }
            // Pipes: no daemon on the data path, the pkt-gens are all.
            let daemon_s = if switch { t.daemon_s } else { Some(0.0) };
            let all = cost_text(daemon_s.map(|d| d + t.clients_cpu_s()), n);
            b.data
                .sample(&cost(&c, sys, "CPU, all processes"), r, &all)?;
            b.log(&format!(
                "  {what} {len} B run {r}: {} Mpps",
                mpps(t.rx_pps())
            ));
            if switch && b.variants {
                sent_and_dropped(b, &c, &rxp, r, &t)?;
            }
        }
        if !switch {
            // DPDK memif at the same size (64 B for 60: testpmd's frames
            // carry the 4 bytes of CRC that netmap's 60 B leave out).
            b.daemon_stop();
            let size = if len == 60 { 64 } else { len };
            b.memif("throughput", &c, "DPDK memif (testpmd)", size, None)?;
        }
    }
    Ok(())
}

/// ping ↔ pong through a pipe and through vale0, busy and blocking.
fn latency(b: &mut Bench) -> Result<(), Error> {
    b.log(
        "latency: ping/pong through a pipe and a switch; the kernel's ping through a Linux bridge",
    );
    let count = b.params.one("ping_n")?;
    for path in ["pipe", "switch"] {
        for busy in [true, false] {
            let c = format!(
                "{}, {}",
                if path == "pipe" {
                    "pipe"
                } else {
                    "through a switch"
                },
                if busy { "busy-waiting" } else { "blocking" }
            );
            let sys = format!("ringswitch {path}");
            for r in 1..=b.runs {
                if super::signals::interrupted() {
                    return Ok(());
                }
                let result = b.rtt(path, busy, count);
                for f in ["p50", "avg", "min", "p99"] {
                    let metric = format!("RTT {f}");
                    let k = Key {
                        section: "latency",
                        case: &c,
                        system: &sys,
                        metric: &metric,
                        unit: "ns",
                        better: "lower",
                        x: "-",
                    };
                    match &result {
                        Ok(rtt) => {
                            let v = match f {
                                "p50" => &rtt.p50,
                                "avg" => &rtt.avg,
                                "min" => &rtt.min,
                                _ => &rtt.p99,
                            };
                            match v {
                                Some(v) => {
                                    b.data.sample(&k, r, v)?;
                                }
                                None => b.data.miss(
                                    "latency",
                                    &c,
                                    &sys,
                                    &format!("{metric}: not reported (key rtt_{f})"),
                                )?,
                            }
                        }
                        Err(e) => b.data.miss("latency", &c, &sys, e)?,
                    }
                }
            }
        }
    }
    b.daemon_stop();
    // The peer: the kernel's ping through a Linux bridge.
    if !super::signals::interrupted() {
        super::nic::kernel_ping(b, count)?;
    }
    Ok(())
}

/// Throughput against batch size: pkt-gen `-b N` on both ends; the switch
/// also runs `serve --batch N`.
fn batch(b: &mut Bench) -> Result<(), Error> {
    b.log("batch: throughput against batch size, pipe and switch");
    let secs = b.params.one("batch_secs")?;
    let batches = b.params.list("batches")?.to_vec();
    let c = "60 B frames";
    let worker = b.tx_cpu.to_string();
    for (sys, switch) in [(PIPE, false), (SWITCH, true)] {
        for &n in &batches {
            if super::signals::interrupted() {
                return Ok(());
            }
            let x = n.to_string();
            let daemon = if switch {
                b.daemon_ensure(&["--workers", "1", "--worker-cpus", &worker, "--batch", &x])
            } else {
                b.daemon_ensure(&["--workers", "1"])
            };
            if let Err(e) = daemon {
                b.data.miss("batch", c, sys, &format!("batch {n}: {e}"))?;
                continue;
            }
            let (rxp, txp, label, tx_cpu) = if switch {
                (
                    "vale0:sb".to_owned(),
                    "vale0:sa".to_owned(),
                    format!("batch-switch-{n}"),
                    b.rx_cpu,
                )
            } else {
                let p = b.next_pipe();
                (
                    format!("bp}}{p}"),
                    format!("bp{{{p}"),
                    format!("batch-pipe-{n}"),
                    b.tx_cpu,
                )
            };
            let plan = TputPlan {
                label: &label,
                rx_port: &rxp,
                tx_port: &txp,
                len: 60,
                burst: n,
                wait: Wait::Default,
                secs,
                rx_cpu: Some(b.rx_cpu),
                tx_cpu: Some(tx_cpu),
                stats: false,
            };
            match b.tput(&plan) {
                Ok(t) => {
                    b.data
                        .sample(&Key::received("batch", c, sys, &x), 1, &mpps(t.rx_pps()))?;
                }
                Err(e) => b.data.miss("batch", c, sys, &format!("batch {n}: {e}"))?,
            }
        }
    }
    b.daemon_stop();
    for &n in &b.params.list("memif_batches")?.to_vec() {
        b.memif("batch", c, "DPDK memif (testpmd, 64 B)", 64, Some(n))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in NAMES {
            assert_eq!(n.parse::<Section>().unwrap().name(), n);
        }
        assert!("nope".parse::<Section>().is_err());
    }

    #[test]
    fn drops_and_their_share() {
        assert_eq!(drop_figures(Some(5), Some(200)), ("5".into(), "2.5".into()));
        assert_eq!(drop_figures(Some(0), Some(0)), ("0".into(), "0.0".into()));
        assert_eq!(drop_figures(Some(3), None), ("3".into(), "x".into()));
        assert_eq!(drop_figures(None, Some(3)), ("x".into(), "x".into()));
    }
}
