//! The peers of the throughput, switch and batch sections, measured by
//! their scripts (`bench/peers/memif.sh`, `bench/peers/ovs-dpdk.sh`: the
//! installing and wiring stay there) and read from the JSON report each
//! prints as its last line; and the passthrough section, one TCG guest
//! driven by `bench/passthrough.sh`, read from the TSV it writes.

use serde_json::Value;

use super::procs::strip_ansi;
use super::Bench;
use crate::error::Error;
use crate::write::Key;

/// `memif.sh`'s report: Mpps and CPU cores (both testpmd) per run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemifReport {
    /// Received Mpps of each run, as the script wrote them.
    pub runs: Vec<String>,
    /// CPU cores both testpmd used in each run, if reported.
    pub cpu_cores: Vec<Option<f64>>,
}

/// One placement line of `ovs-dpdk.sh`'s report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OvsPlacement {
    /// The receiver testpmd's CPU.
    pub rx_cpu: Option<u64>,
    /// The sender testpmd's CPU.
    pub tx_cpu: Option<u64>,
    /// The PMD thread's CPU.
    pub pmd_cpu: Option<u64>,
    /// `pmd-maxsleep` (0: not set).
    pub pmd_maxsleep: u64,
    /// Received Mpps, as written.
    pub rx_mpps: Option<String>,
    /// CPU ns of ovs-vswitchd per delivered packet.
    pub cpu_ns_per_delivered_pkt: Option<f64>,
    /// ovs-vswitchd's CPU, % of a core.
    pub vswitchd_cpu_pct: Option<String>,
    /// The PMD thread's processing cycles per packet (its own counter:
    /// the busy cycles, without polling empty queues).
    pub pmd_proc_cycles_per_pkt: Option<f64>,
}

fn last_json(stdout: &str) -> Option<Value> {
    let line = stdout.lines().rfind(|l| !l.trim().is_empty())?.trim();
    line.starts_with('{')
        .then(|| serde_json::from_str(line).ok())?
}

fn num_text(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => Some(n.to_string()),
        _ => None,
    }
}

impl MemifReport {
    /// The report on the last line of `memif.sh`'s stdout.
    pub fn from_stdout(stdout: &str) -> Option<MemifReport> {
        let v = last_json(stdout)?;
        let runs = v
            .get("runs")?
            .as_array()?
            .iter()
            .map(num_text)
            .collect::<Option<Vec<_>>>()?;
        let cpu = v.get("cpu_cores").and_then(Value::as_array);
        let cpu_cores = (0..runs.len())
            .map(|i| cpu.and_then(|c| c.get(i)).and_then(Value::as_f64))
            .collect();
        Some(MemifReport { runs, cpu_cores })
    }
}

/// The placement lines on the last line of `ovs-dpdk.sh`'s stdout.
pub fn ovs_placements(stdout: &str) -> Option<Vec<OvsPlacement>> {
    let v = last_json(stdout)?;
    let rows = v.get("placements")?.as_array()?;
    Some(
        rows.iter()
            .map(|p| OvsPlacement {
                rx_cpu: p.get("rx_cpu").and_then(Value::as_u64),
                tx_cpu: p.get("tx_cpu").and_then(Value::as_u64),
                pmd_cpu: p.get("pmd_cpu").and_then(Value::as_u64),
                pmd_maxsleep: p.get("pmd_maxsleep").and_then(Value::as_u64).unwrap_or(0),
                rx_mpps: p.get("rx_mpps").and_then(num_text),
                cpu_ns_per_delivered_pkt: p.get("cpu_ns_per_delivered_pkt").and_then(Value::as_f64),
                vswitchd_cpu_pct: p.get("vswitchd_cpu_pct").and_then(num_text),
                pmd_proc_cycles_per_pkt: p.get("pmd_proc_cycles_per_pkt").and_then(Value::as_f64),
            })
            .collect(),
    )
}

/// The idle windows on the last line of `ovs-dpdk.sh`'s stdout:
/// (`pmd-maxsleep` setting: `default`, `50`, `500`; ovs-vswitchd's CPU, %
/// of a core), the numbers as written.
pub fn ovs_idle(stdout: &str) -> Option<Vec<(String, String)>> {
    let v = last_json(stdout)?;
    let idle = v.get("idle_cpu_pct")?.as_object()?;
    Some(
        idle.iter()
            .filter_map(|(k, v)| Some((k.clone(), num_text(v)?)))
            .collect(),
    )
}

/// CPU seconds per million packets from CPU cores and Mpps: `x` (no
/// figure) when nothing moved.
pub fn cores_per_mpps(cores: f64, mpps: f64) -> String {
    if mpps > 0.0 {
        format!("{:.4}", cores / mpps)
    } else {
        "x".into()
    }
}

/// A load section figure at offered load `x` (%).
/// bench/peers/ovs-dpdk.sh's command line: `ports` (None: its default,
/// vhost-user) and `size` (None: its default) given or not, then the
/// windows, the placements (`RX,TX,PMD` triples, space-separated), the
/// `pmd-maxsleep` values and the raw output directory.
#[allow(clippy::too_many_arguments)]
pub(super) fn ovs_dpdk_argv(
    script: &str,
    ports: Option<&str>,
    size: &str,
    secs: u64,
    idle_secs: u64,
    placements: &str,
    maxsleep: &str,
    raw: &std::path::Path,
) -> Vec<String> {
    let mut cmd = vec![script.to_owned()];
    if let Some(p) = ports {
        cmd.extend([
            "--ports".to_owned(),
            p.to_owned(),
            "--size".to_owned(),
            size.to_owned(),
        ]);
    }
    cmd.extend([
        "--seconds".to_owned(),
        secs.to_string(),
        "--idle-seconds".to_owned(),
        idle_secs.to_string(),
        "--placements".to_owned(),
        placements.to_owned(),
        "--maxsleep".to_owned(),
        maxsleep.to_owned(),
        "--raw".to_owned(),
        raw.display().to_string(),
    ]);
    cmd
}

pub(super) fn load_key<'a>(case: &'a str, system: &'a str, x: &'a str) -> Key<'a> {
    Key {
        section: "load",
        case,
        system,
        metric: "CPU",
        unit: "% of a core",
        better: "lower",
        x,
    }
}

impl Bench {
    /// A peer script to completion; its stdout, or why it failed. Its
    /// stderr goes to the log.
    pub(super) fn peer(
        &mut self,
        name: &str,
        secs: u64,
        cmd: &[String],
    ) -> Result<(String, String), String> {
        let (stem, exit) = self.procs.run(name, None, secs, cmd)?;
        let err = std::fs::read_to_string(self.procs.err_path(&stem)).unwrap_or_default();
        for l in strip_ansi(&err).lines() {
            self.procs.log.quiet_raw(&format!("    {l}"));
        }
        let out = std::fs::read_to_string(self.procs.out_path(&stem)).unwrap_or_default();
        if !exit.ok() || last_json(&out).is_none() {
            return Err(self.procs.why(&stem, exit));
        }
        Ok((stem, out))
    }

    /// DPDK memif (testpmd txonly → rxonly): `runs` runs of `secs` at
    /// `size` (and `--burst`), one sample per run in `section`; without a
    /// burst also CPU per packet (efficiency) and, at 64 B, the CPU the
    /// load section shows for a saturated memif.
    pub fn memif(
        &mut self,
        section: &str,
        case: &str,
        system: &str,
        size: u64,
        burst: Option<u64>,
    ) -> Result<(), Error> {
        let secs = self.params.one("memif_secs")?;
        // A sweep point is one run.
        let runs = if burst.is_some() {
            1
        } else {
            u64::from(self.runs)
        };
        let script = self.bench_dir.join("peers/memif.sh").display().to_string();
        let mut cmd = vec![
            "env".to_owned(),
            format!("MEMIF_SERVER_CPU={}", self.rx_cpu),
            format!("MEMIF_CLIENT_CPU={}", self.tx_cpu),
            script,
            "--runs".into(),
            runs.to_string(),
            "--seconds".into(),
            secs.to_string(),
            "--size".into(),
            size.to_string(),
        ];
        if let Some(b) = burst {
            cmd.extend(["--burst".into(), b.to_string()]);
        }
        self.log(&format!("  DPDK memif: memif.sh {}", cmd[4..].join(" ")));
        let name = match burst {
            Some(b) => format!("memif-{size}-b{b}"),
            None => format!("memif-{size}"),
        };
        let limit = runs * (secs * 3 + 60) + 60;
        let out = match self.peer(&name, limit, &cmd) {
            Ok((_, out)) => out,
            Err(e) => return self.data.miss(section, case, system, &e),
        };
        let Some(report) = MemifReport::from_stdout(&out) else {
            return self
                .data
                .miss(section, case, system, "memif.sh printed no runs");
        };
        let x = burst.map_or("-".to_owned(), |b| b.to_string());
        for (i, v) in report.runs.iter().enumerate() {
            let run = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let k = Key::received(section, case, system, &x);
            self.data.sample(&k, run, v)?;
            if let (None, Some(cores)) = (burst, report.cpu_cores[i]) {
                let k = Key {
                    section: "efficiency",
                    case,
                    system,
                    metric: "CPU, all processes",
                    unit: "s per Mpkt",
                    better: "lower",
                    x: "-",
                };
                let mpps: f64 = v.parse().unwrap_or(0.0);
                self.data.sample(&k, run, &cores_per_mpps(cores, mpps))?;
                if size == 64 && self.peer_load {
                    let pct = format!("{:.1}", 100.0 * cores);
                    self.data.sample(
                        &load_key("pipe, 60 B", "DPDK memif: both testpmd", "100"),
                        run,
                        &pct,
                    )?;
                }
            }
        }
        self.log(&format!(
            "  DPDK memif {size} B{}: [{}] Mpps",
            burst.map_or(String::new(), |b| format!(" burst {b}")),
            report.runs.join(",")
        ));
        Ok(())
    }

    /// OVS-DPDK with two memif ports, both testpmd on the receivers' CPU and
    /// the PMD on the senders' (as ringswitch's worker), one fresh
    /// `ovs-dpdk.sh` per run (its memif ports have crashed ovs-vswitchd when
    /// clients came and went in one long invocation), each `pmd-maxsleep`
    /// of `maxsleeps` per run.
    pub fn ovs_memif(&mut self, size: u64, case: &str, maxsleeps: &[u64]) -> Result<(), Error> {
        const BASE: &str = "OVS-DPDK (memif ports)";
        let secs = self.params.one("ovs_secs")?;
        let placement = format!("{},{},{}", self.rx_cpu, self.rx_cpu, self.tx_cpu);
        let ms: Vec<String> = maxsleeps.iter().map(u64::to_string).collect();
        let ms = ms.join(" ");
        let script = self
            .bench_dir
            .join("peers/ovs-dpdk.sh")
            .display()
            .to_string();
        for r in 1..=self.runs {
            if super::signals::interrupted() {
                return Ok(());
            }
            self.log(&format!(
                "  OVS-DPDK, memif ports, {size} B, run {r}: ovs-dpdk.sh --ports memif --placements {placement} --maxsleep \"{ms}\""
            ));
            let raw = self.out.join(format!("raw/ovs-memif-{size}-r{r}"));
            let _ = std::fs::create_dir_all(&raw);
            let cmd = ovs_dpdk_argv(
                &script,
                Some("memif"),
                &size.to_string(),
                secs,
                0,
                &placement,
                &ms,
                &raw,
            );
            let (stem, out) = match self.peer(&format!("ovs-memif-{size}-r{r}"), 600, &cmd) {
                Ok(x) => x,
                Err(e) => {
                    self.data
                        .miss("switch", case, BASE, &format!("run {r}: {e}"))?;
                    continue;
                }
            };
            let rows = ovs_placements(&out).unwrap_or_default();
            for &m in maxsleeps {
                let sys = if m > 0 {
                    format!("{BASE}, pmd-maxsleep={m}")
                } else {
                    BASE.to_owned()
                };
                let Some(row) = rows.iter().find(|p| p.pmd_maxsleep == m) else {
                    let why = format!(
                        "run {r}: no placement line in ovs-dpdk.sh's report (raw/{stem}.out)"
                    );
                    self.data.miss("switch", case, &sys, &why)?;
                    continue;
                };
                let k = Key {
                    section: "switch",
                    case,
                    system: &sys,
                    metric: "received",
                    unit: "Mpps",
                    better: "higher",
                    x: "-",
                };
                self.data
                    .sample(&k, r, row.rx_mpps.as_deref().unwrap_or(""))?;
                if let Some(ns) = row.cpu_ns_per_delivered_pkt {
                    let k = Key {
                        section: "efficiency",
                        metric: "CPU, switch process",
                        unit: "s per Mpkt",
                        better: "lower",
                        ..k
                    };
                    self.data.sample(&k, r, &format!("{:.4}", ns / 1000.0))?;
                }
                if let (64, Some(cpu), true) = (size, &row.vswitchd_cpu_pct, self.peer_load) {
                    let load_sys = if m > 0 {
                        format!("OVS-DPDK, pmd-maxsleep={m}: ovs-vswitchd")
                    } else {
                        "OVS-DPDK: ovs-vswitchd".to_owned()
                    };
                    self.data
                        .sample(&load_key("switch, 60 B", &load_sys, "100"), r, cpu)?;
                }
            }
            let got: Vec<&str> = rows
                .iter()
                .map(|p| p.rx_mpps.as_deref().unwrap_or("?"))
                .collect();
            self.log(&format!(
                "  OVS-DPDK memif {size} B run {r}: [{}] Mpps (pmd-maxsleep {ms})",
                got.join(",")
            ));
        }
        Ok(())
    }
}

/// One line of `passthrough.sh --tsv`: `path run frames daemon_ticks
/// seconds` (path `pt`: the passthrough port, `vu`: vhost-user).
#[derive(Clone, Debug, PartialEq)]
pub struct PtLine {
    /// `pt` or `vu`.
    pub path: String,
    /// Run number, from 1.
    pub run: u32,
    /// Frames that reached the host's pkt-gen.
    pub frames: u64,
    /// The host daemon's CPU ticks over the run.
    pub ticks: u64,
    /// Seconds of the run.
    pub secs: f64,
}

/// The lines of `passthrough.sh --tsv`; malformed lines are left out.
pub fn pt_lines(text: &str) -> Vec<PtLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [path, run, frames, ticks, secs] = f.as_slice() else {
                return None;
            };
            Some(PtLine {
                path: (*path).to_owned(),
                run: run.parse().ok()?,
                frames: frames.parse().ok()?,
                ticks: ticks.parse().ok()?,
                secs: secs.parse().ok().filter(|s: &f64| *s > 0.0)?,
            })
        })
        .collect()
}

impl PtLine {
    /// Frames at the host, Mpps with four decimals.
    pub fn mpps(&self) -> String {
        format!("{:.4}", self.frames as f64 / self.secs / 1e6)
    }

    /// The host daemon's CPU ns per frame; `None` without frames.
    pub fn ns_per_frame(&self, hz: f64) -> Option<String> {
        (self.frames > 0)
            .then(|| format!("{:.0}", self.ticks as f64 / hz * 1e9 / self.frames as f64))
    }
}

impl Bench {
    /// One TCG guest's pkt-gen over a passthrough port and over its
    /// virtio-net NIC (vhost-user), `runs` times each, alternately.
    pub fn passthrough(&mut self) -> Result<(), Error> {
        const CASE: &str = "one TCG guest's pkt-gen tx to a host port";
        const PT: &str = "ringswitch passthrough (ivshmem)";
        const VU: &str = "virtio-net over vhost-user (ringswitch backend)";
        let secs = self.params.one("pt_secs")?;
        if secs == 0 {
            return self.data.miss(
                "passthrough",
                CASE,
                PT,
                "left out of --quick (a TCG guest boot)",
            );
        }
        let tsv = self.out.join("raw/pt.tsv");
        let _ = std::fs::remove_file(&tsv);
        let cmd: Vec<String> = vec![
            self.bench_dir.join("passthrough.sh").display().to_string(),
            "--secs".into(),
            secs.to_string(),
            "--reps".into(),
            self.runs.to_string(),
            "--tsv".into(),
            tsv.display().to_string(),
            "--no-report".into(),
        ];
        let (stem, exit) = match self.procs.run("passthrough", None, 900, &cmd) {
            Ok(x) => x,
            Err(e) => return self.data.miss("passthrough", CASE, PT, &e),
        };
        let lines = pt_lines(&std::fs::read_to_string(&tsv).unwrap_or_default());
        if !exit.ok() || lines.is_empty() {
            let why = self.procs.why(&stem, exit);
            return self.data.miss("passthrough", CASE, PT, &why);
        }
        let hz = super::procs::clock_ticks();
        for l in &lines {
            let sys = if l.path == "vu" { VU } else { PT };
            let k = Key {
                section: "passthrough",
                case: CASE,
                system: sys,
                metric: "frames at the host",
                unit: "Mpps",
                better: "higher",
                x: "-",
            };
            self.data.sample(&k, l.run, &l.mpps())?;
            if let Some(ns) = l.ns_per_frame(hz) {
                let k = Key {
                    metric: "host daemon CPU per frame",
                    unit: "ns",
                    better: "lower",
                    ..k
                };
                self.data.sample(&k, l.run, &ns)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passthrough_lines() {
        let l = pt_lines(
            "pt 1 3000000 150 3.0\nvu 1 600000 300 3.0\nbad line\nvu 2 0 1 3\nvu 3 1 1 0\n",
        );
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].mpps(), "1.0000");
        assert_eq!(l[0].ns_per_frame(100.0).as_deref(), Some("500"));
        assert_eq!(l[1].mpps(), "0.2000");
        assert_eq!(l[1].ns_per_frame(100.0).as_deref(), Some("5000"));
        assert_eq!(l[2].ns_per_frame(100.0), None);
    }

    #[test]
    fn costs() {
        assert_eq!(cores_per_mpps(0.62, 0.876), "0.7078");
        assert_eq!(cores_per_mpps(0.62, 0.0), "x");
    }
}
