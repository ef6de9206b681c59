//! The load section: CPU against offered load. `pkt-gen -f tx -R RATE` at
//! shares of the path's maximum (the median of this run's throughput or
//! switch samples, or a short probe), and the CPU of the daemon and the
//! pkt-gens over a window that starts 1 s into the traffic.

use std::time::{Duration, Instant};

use super::measure::{TputPlan, Wait};
use super::procs::{clock_ticks, cpu_ticks};
use super::Bench;
use crate::error::Error;
use crate::figures::{mpps, pct_of_core};
use crate::model::median;
use crate::write::Key;

/// The path a load point runs through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Switch,
    Pipe,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Switch => "switch",
            Path::Pipe => "pipe",
        }
    }

    fn case(self) -> &'static str {
        match self {
            Path::Switch => "switch, 60 B",
            Path::Pipe => "pipe, 60 B",
        }
    }

    /// Where this run's maximum comes from: (section, case, system).
    fn max_from(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Path::Switch => ("switch", "through a switch, 60 B", super::sections::SWITCH),
            Path::Pipe => (
                "throughput",
                "process to process, 60 B",
                super::sections::PIPE,
            ),
        }
    }
}

/// The offered rate in packets per second for `pct` % of `max_mpps`.
pub fn offered_pps(max_mpps: f64, pct: u64) -> u64 {
    (max_mpps * 1e6 * pct as f64 / 100.0).round() as u64
}

/// Both paths, each load point once.
pub fn load(b: &mut Bench) -> Result<(), Error> {
    b.log("load: CPU use against offered load");
    let secs = b.params.one("load_secs")?;
    let loads = b.params.list("loads")?.to_vec();
    for path in [Path::Switch, Path::Pipe] {
        let sys = format!("ringswitch {}", path.name());
        let (section, case, system) = path.max_from();
        let max = match median(&b.data.values(section, case, system, "received")?) {
            Some(m) => Some(m),
            None => probe(b, path),
        };
        let Some(max) = max.filter(|m| *m > 0.0) else {
            b.data.miss(
                "load",
                path.case(),
                &sys,
                "no maximum rate to take shares of",
            )?;
            continue;
        };
        b.log(&format!(
            "  {}: maximum {max} Mpps; offered {:?} %",
            path.name(),
            loads
        ));
        for &pct in &loads {
            if super::signals::interrupted() {
                return Ok(());
            }
            point(b, path, pct, secs, max)?;
        }
    }
    b.daemon_stop();
    Ok(())
}

impl Bench {
    fn ensure_for(&mut self, path: Path) -> Result<(), String> {
        let worker = self.tx_cpu.to_string();
        match path {
            Path::Switch => self.daemon_ensure(&["--workers", "1", "--worker-cpus", &worker]),
            Path::Pipe => self.daemon_ensure(&["--workers", "1"]),
        }
    }

    /// (receiver's port, sender's port, sender's CPU) of a fresh point.
    fn ports_for(&mut self, path: Path) -> (String, String, u32) {
        match path {
            Path::Switch => ("vale0:lb".into(), "vale0:la".into(), self.rx_cpu),
            Path::Pipe => {
                let n = self.next_pipe();
                (format!("bp}}{n}"), format!("bp{{{n}"), self.tx_cpu)
            }
        }
    }
}

/// A short unlimited run for a maximum, in Mpps.
fn probe(b: &mut Bench, path: Path) -> Option<f64> {
    b.ensure_for(path).ok()?;
    let (rxp, txp, tx_cpu) = b.ports_for(path);
    let plan = TputPlan {
        label: "load-probe",
        rx_port: &rxp,
        tx_port: &txp,
        len: 60,
        burst: 512,
        wait: Wait::Default,
        secs: 1,
        rx_cpu: Some(b.rx_cpu),
        tx_cpu: Some(tx_cpu),
        stats: false,
    };
    let t = b.tput(&plan).ok()?;
    mpps(t.rx_pps()).parse().ok()
}

fn point(b: &mut Bench, path: Path, pct: u64, secs: u64, max: f64) -> Result<(), Error> {
    let (c, name) = (path.case(), path.name());
    let sys = format!("ringswitch {name}");
    if let Err(e) = b.ensure_for(path) {
        return b.data.miss("load", c, &sys, &format!("{pct} %: {e}"));
    }
    let (rxp, txp, tx_cpu) = b.ports_for(path);
    let rx_dur = (secs + 30).to_string();
    let cmd = b.rs_cmd(&[
        "pkt-gen",
        "-i",
        &rxp,
        "-f",
        "rx",
        "-b",
        "512",
        "--duration",
        &rx_dur,
        "-T",
        "0",
        "--json",
    ]);
    let rx = match b.procs.start(
        &format!("load-{name}-{pct}-rx"),
        Some(b.rx_cpu),
        secs + 40,
        &cmd,
    ) {
        Ok(n) => n,
        Err(e) => return b.data.miss("load", c, &sys, &format!("{pct} %: {e}")),
    };
    if let Err(why) = b.procs.ready_or_stop(&rx, 15) {
        return b.data.miss(
            "load",
            c,
            &sys,
            &format!("{pct} %: the receiver did not open {rxp}: {why}"),
        );
    }
    let rate = offered_pps(max, pct).to_string();
    let tx_dur = (secs + 2).to_string();
    let mut args = vec!["pkt-gen", "-i", &txp, "-f", "tx", "-l", "60", "-b", "512"];
    if pct < 100 {
        args.extend_from_slice(&["-R", &rate]);
    }
    args.extend_from_slice(&["--duration", &tx_dur, "-T", "0", "--json"]);
    let cmd = b.rs_cmd(&args);
    let tx = match b.procs.start(
        &format!("load-{name}-{pct}-tx"),
        Some(tx_cpu),
        secs + 40,
        &cmd,
    ) {
        Ok(n) => n,
        Err(e) => {
            b.procs.stop(&rx);
            return b.data.miss("load", c, &sys, &format!("{pct} %: {e}"));
        }
    };
    // The window starts 1 s into the traffic: start-up and port set-up
    // left out.
    std::thread::sleep(Duration::from_secs(1));
    let (rx_pid, tx_pid) = (b.procs.command_pid(&rx), b.procs.command_pid(&tx));
    let ticks = |pid: Option<u32>| pid.and_then(cpu_ticks);
    let daemon = b.daemon.pid;
    let t0 = Instant::now();
    let before = (ticks(daemon), ticks(rx_pid), ticks(tx_pid));
    std::thread::sleep(Duration::from_secs(secs));
    let after = (ticks(daemon), ticks(rx_pid), ticks(tx_pid));
    let wall = t0.elapsed().as_secs_f64();
    let exit = b.procs.wait(&tx);
    std::thread::sleep(Duration::from_millis(300));
    b.procs.stop(&rx);
    let spent = match (before, after) {
        ((Some(d0), Some(r0), Some(s0)), (Some(d1), Some(r1), Some(s1))) => Some((
            d1.saturating_sub(d0),
            r1.saturating_sub(r0),
            s1.saturating_sub(s0),
        )),
        _ => None,
    };
    let (d, r, s) = match spent {
        Some(t) if exit.ok() => t,
        _ => {
            let why = if exit.ok() {
                format!("a process ended before the window closed (see raw/{tx}, raw/{rx})")
            } else {
                b.procs.why(&tx, exit)
            };
            return b.data.miss("load", c, &sys, &format!("{pct} %: {why}"));
        }
    };
    let hz = clock_ticks();
    let x = pct.to_string();
    let pct_of = |n: u64| pct_of_core(n, hz, wall).unwrap_or_default();
    let figures = match path {
        Path::Switch => [
            ("ringswitch switch: daemon", pct_of(d)),
            ("ringswitch switch: daemon + receiver", pct_of(d + r)),
        ],
        Path::Pipe => [
            ("ringswitch pipe: receiver", pct_of(r)),
            ("ringswitch pipe: sender + receiver", pct_of(r + s)),
        ],
    };
    for (system, v) in &figures {
        let k = Key {
            section: "load",
            case: c,
            system,
            metric: "CPU",
            unit: "% of a core",
            better: "lower",
            x: &x,
        };
        b.data.sample(&k, 1, v)?;
    }
    b.log(&format!(
        "  {name} at {pct} %: CPU over {secs} s: daemon {d}, receiver {r}, sender {s} ticks"
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_rates() {
        assert_eq!(offered_pps(13.7, 100), 13_700_000);
        assert_eq!(offered_pps(13.7, 1), 137_000);
        assert_eq!(offered_pps(2.424, 5), 121_200);
    }
}
