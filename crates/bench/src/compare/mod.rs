//! `ringswitch-bench compare`: one whole run of the benchmarks, after
//! bench/compare has installed the peers and built the binaries. It makes
//! private copies of the binaries it measures, writes the machine's facts
//! (`meta.tsv`, [`machine`]), sets the guest halt polling if asked
//! ([`halt_poll`], put back on return, error or signal), measures the
//! sections of its profile in-process ([`crate::run`]), writes how each
//! was measured (`notes.tsv`, [`notes`]), copies the targets and draws the
//! report ([`crate::report`]).
//!
//! Two profiles: `compare` (bench/compare: ringswitch beside its peers,
//! every section, `bench/results`) and `targets` (bench/run.sh: the
//! sections the targets judge, one run per path, with the variants
//! of the pipe and the switch's drops, `bench/results/run`).

pub mod halt_poll;
pub mod machine;
pub mod notes;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::SystemTime;

use thiserror::Error;

use crate::params::Mode;
use crate::run::{signals, Bench, Section, Setup};
use crate::write::DataDir;

/// What can stop a compare run. A failed measurement does not: it is a
/// failure line of the report.
#[derive(Debug, Error)]
pub enum Error {
    /// `--only` and `--skip` leave nothing of the profile.
    #[error("the options leave no section to measure (profile {profile}: {})", profile.section_names())]
    NoSections {
        /// The profile.
        profile: Profile,
    },
    /// The guest halt polling cannot be set here.
    #[error("could not set guest halt polling to {ns} ns through {} (not a VM with cpuidle-haltpoll, or not root): {source}", param.display())]
    HaltPoll {
        /// The value asked for.
        ns: u64,
        /// The kernel parameter's file.
        param: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A binary to measure could not be copied.
    #[error("could not make a private copy of {} in {}: {source}", from.display(), to.display())]
    Copy {
        /// The binary.
        from: PathBuf,
        /// Where the copy goes.
        to: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The output directory could not be prepared.
    #[error("could not prepare the output directory {}: {source}", path.display())]
    Out {
        /// The directory or the file in it.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A signal stopped the run before its report.
    #[error("stopped by signal {signal} before the report; the data measured so far is in {}", data.display())]
    Interrupted {
        /// The signal.
        signal: i32,
        /// The data directory.
        data: PathBuf,
    },
    /// The report could not be drawn from the data.
    #[error("ringswitch-bench report could not write the report from {}: {source}", data.display())]
    Report {
        /// The data directory.
        data: PathBuf,
        /// Why.
        source: crate::Error,
    },
    /// A data file or the parameters.
    #[error(transparent)]
    Data(#[from] crate::Error),
}

/// Which sections a run measures, where it writes by default, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// bench/compare: ringswitch beside its peers, every section.
    Compare,
    /// bench/run.sh: the sections the targets judge, one run per
    /// path, also the pipe's variants and the switch's drops.
    Targets,
}

impl Profile {
    /// The sections, in the order they run.
    pub fn sections(self) -> &'static [Section] {
        use Section::*;
        match self {
            Profile::Compare => &[
                Throughput,
                Switch,
                Vm,
                Passthrough,
                Nic,
                Latency,
                Idle,
                Batch,
                Load,
                Flows,
                Defaults,
            ],
            Profile::Targets => &[
                Throughput, Switch, Latency, Batch, Idle, Vm, Nic, Flows, Defaults,
            ],
        }
    }

    fn section_names(self) -> String {
        let names: Vec<&str> = self.sections().iter().map(|s| s.name()).collect();
        names.join(" ")
    }

    /// Where the results go unless `--out` says: under the bench/ directory.
    pub fn default_out(self, bench_dir: &Path) -> PathBuf {
        match self {
            Profile::Compare => bench_dir.join("results"),
            Profile::Targets => bench_dir.join("results/run"),
        }
    }

    /// Runs per path unless `--runs` says (`None`: the parameters file's).
    pub fn default_runs(self) -> Option<u32> {
        match self {
            Profile::Compare => None,
            Profile::Targets => Some(1),
        }
    }

    /// Whether the throughput and switch sections also measure the
    /// variants (pipe busy-waiting and with 4096 slots; switch drops).
    pub fn variants(self) -> bool {
        self == Profile::Targets
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Compare => "compare",
            Profile::Targets => "targets",
        })
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Profile, String> {
        match s {
            "compare" => Ok(Profile::Compare),
            "targets" => Ok(Profile::Targets),
            _ => Err(format!("unknown profile '{s}' (profiles: compare targets)")),
        }
    }
}

/// A compare run's options.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Which sections, where, how many runs by default.
    pub profile: Profile,
    /// The quick column of the parameters file.
    pub quick: bool,
    /// Runs per path, if not the profile's default.
    pub runs: Option<u32>,
    /// The output directory, if not the profile's default.
    pub out: Option<PathBuf>,
    /// Only these sections (empty: all of the profile's).
    pub only: Vec<Section>,
    /// Not these sections.
    pub skip: Vec<Section>,
    /// Guest halt polling for this run, in ns.
    pub guest_halt_poll_ns: Option<u64>,
    /// The ringswitch binary to measure (ringswitchd beside it).
    pub ringswitch: PathBuf,
    /// The bench/ directory: params.tsv, targets.tsv, the peer scripts.
    pub bench_dir: PathBuf,
    /// The command line for the report.
    pub command: String,
    /// When the run started (bench/compare: before its installs and build).
    pub started: SystemTime,
    /// Append to run.log instead of starting it afresh (bench/compare has
    /// logged its installs and build there).
    pub keep_log: bool,
}

/// The sections `profile` measures with `--only` and `--skip`.
pub fn selected(
    profile: Profile,
    only: &[Section],
    skip: &[Section],
) -> Result<Vec<Section>, Error> {
    let v: Vec<Section> = profile
        .sections()
        .iter()
        .copied()
        .filter(|s| (only.is_empty() || only.contains(s)) && !skip.contains(s))
        .collect();
    if v.is_empty() {
        return Err(Error::NoSections { profile });
    }
    Ok(v)
}

/// The progress line's title of a section.
pub fn title(s: Section) -> &'static str {
    match s {
        Section::Throughput => "throughput: pipe vs DPDK memif",
        Section::Switch => "switch: ring ports vs OVS-DPDK memif ports",
        Section::Vm => "vm: testpmd virtio_user pairs through ringswitch and OVS-DPDK",
        Section::Passthrough => {
            "passthrough: one TCG guest over a passthrough port and over vhost-user"
        }
        Section::Nic => {
            "nic: veth + AF_XDP into the switch vs DPDK net_af_xdp, net_af_packet, a Linux bridge"
        }
        Section::Latency => {
            "latency: ping/pong through a pipe and a switch; the kernel's ping through a Linux bridge"
        }
        Section::Idle => "idle: the daemon with 8 ports open, no traffic; its memory",
        Section::Batch => "batch: throughput against batch size, pipe, switch, DPDK memif",
        Section::Load => "load: CPU use against offered load",
        Section::Flows => "flows: 1,000 OpenFlow flows vs the learning bridge and OVS-DPDK; flow-mod rate; flows changing; a cache-miss storm",
        Section::Defaults => "defaults: the default (adaptive) wait vs busy-waiting, blocking, guest halt polling and the old default, threads not pinned",
    }
}

/// A private directory for the binaries measured and the daemon's
/// socket, removed when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create() -> Result<WorkDir, Error> {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("ringswitch-compare.{}.{nanos}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|source| Error::Out {
            path: dir.clone(),
            source,
        })?;
        Ok(WorkDir(dir))
    }

    /// Copies `ringswitch` and the `ringswitchd` beside it (`ringswitch
    /// serve` runs the daemon from there): others may rebuild target/
    /// while the run measures. Returns the copy of `ringswitch`.
    fn copy_binaries(&self, ringswitch: &Path) -> Result<PathBuf, Error> {
        let daemon = ringswitch.with_file_name("ringswitchd");
        for from in [ringswitch, daemon.as_path()] {
            let to = self.0.join(from.file_name().unwrap_or_default());
            std::fs::copy(from, &to).map_err(|source| Error::Copy {
                from: from.to_path_buf(),
                to: to.clone(),
                source,
            })?;
        }
        Ok(self.0.join(ringswitch.file_name().unwrap_or_default()))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Makes `out` (absolute), removes the data, plots and raw output of an
/// earlier run, and starts run.log afresh unless `keep_log`.
fn prepare_out(out: &Path, keep_log: bool) -> Result<PathBuf, Error> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Out { path, source }
    };
    std::fs::create_dir_all(out).map_err(fail(out))?;
    let out = std::fs::canonicalize(out).map_err(fail(out))?;
    for d in ["raw", "data", "plots"] {
        let d = out.join(d);
        match std::fs::remove_dir_all(&d) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(fail(&d)(e)),
            _ => {}
        }
    }
    let _ = std::fs::remove_file(out.join("REPORT.md"));
    let log = out.join("run.log");
    if !keep_log {
        std::fs::write(&log, "").map_err(fail(&log))?;
    }
    Ok(out)
}

/// The CPUs this process may run on.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The whole run; returns the path of REPORT.md.
pub fn compare(o: &Options) -> Result<PathBuf, Error> {
    let sections = selected(o.profile, &o.only, &o.skip)?;
    let out = prepare_out(
        &o.out
            .clone()
            .unwrap_or_else(|| o.profile.default_out(&o.bench_dir)),
        o.keep_log,
    )?;
    let data_dir = out.join("data");
    DataDir::create(&data_dir)?;
    // Declared in this order so that they drop in the reverse one: the
    // processes stop, then the halt polling goes back, then the copies go.
    let work = WorkDir::create()?;
    let ringswitch = work.copy_binaries(&o.ringswitch)?;
    let halt = match o.guest_halt_poll_ns {
        Some(ns) => Some((
            ns,
            halt_poll::HaltPoll::set(Path::new(halt_poll::PARAM), ns)?,
        )),
        None => None,
    };
    let ncpu = cpus();
    let (rx_cpu, tx_cpu) = (0, u32::from(ncpu >= 2));
    let mode = if o.quick { Mode::Quick } else { Mode::Full };
    let setup = Setup {
        ringswitch: ringswitch.clone(),
        socket: work.0.join("bench.sock"),
        out: out.clone(),
        params: o.bench_dir.join("params.tsv"),
        bench_dir: o.bench_dir.clone(),
        // The load section shows the saturated peers' CPU.
        peer_load: sections.contains(&Section::Load),
        mode,
        runs: o.runs.or(o.profile.default_runs()),
        rx_cpu,
        tx_cpu,
        variants: o.profile.variants(),
    };
    let mut b = Bench::new(&setup)?;
    let mode_word = if o.quick { "quick" } else { "full" };
    b.log(&format!(
        "ringswitch beside its peers ({mode_word}, {} run(s) per path): results in {}",
        b.runs,
        out.display()
    ));
    if ncpu < 2 {
        b.log(&format!("warning: only {ncpu} CPU: everything on CPU 0"));
    }
    let halt_text = match &halt {
        Some((ns, g)) => {
            b.log(&format!(
                "guest halt polling set to {ns} ns for this run (was {} ns; put back at the end)",
                g.was()
            ));
            format!(
                "{ns} (set by --guest-halt-poll for this run; the machine had {})",
                g.was()
            )
        }
        None => format!(
            "{} (as the machine has it)",
            halt_poll::current(Path::new(halt_poll::PARAM))
        ),
    };
    let root = o.bench_dir.parent().unwrap_or(Path::new("."));
    let m = machine::Machine::probe(root, &ringswitch, ncpu);
    let facts = machine::RunFacts {
        started: o.started,
        command: &o.command,
        mode: mode_word,
        runs: b.runs,
        guest_halt_poll_ns: &halt_text,
    };
    for (k, v) in machine::start_lines(&facts, &m) {
        b.data.meta(k, &v)?;
    }
    let elapsed = || o.started.elapsed().unwrap_or_default();
    for &s in &sections {
        if signals::interrupted() {
            break;
        }
        b.log(&format!(
            "== {} ({} s into the run)",
            title(s),
            elapsed().as_secs()
        ));
        if let Err(e) = s.run(&mut b) {
            // A section that cannot go on (a parameter missing, say) is
            // its failure line; the others still run.
            b.log(&format!("  {} stopped: {e}", s.name()));
            b.data.miss(
                s.name(),
                "every case",
                "ringswitch",
                &format!("not measured: {e}"),
            )?;
        }
        b.daemon_stop();
        let facts = notes::NoteFacts {
            params: &b.params,
            runs: b.runs,
            rx_cpu,
            tx_cpu,
            variants: o.profile.variants(),
        };
        for (section, text) in notes::notes(s, &facts)? {
            b.data.note(section, &text)?;
        }
        if s == Section::Latency {
            b.data.miss("latency", "through a switch, blocking", "OVS-DPDK", "not measured: testpmd 22.11 has no ping mode (no forwarding engine timestamps a frame and waits for its echo), so OVS-DPDK's round trip cannot be taken with the tools here")?;
        }
    }
    b.daemon_stop();
    if let Some(signal) = signals::received() {
        b.log(if signal == libc::SIGINT {
            "interrupted"
        } else {
            "terminated"
        });
        return Err(Error::Interrupted {
            signal,
            data: data_dir,
        });
    }
    // The targets, judged in the report on this run's figures.
    let targets = o.bench_dir.join("targets.tsv");
    if let Err(e) = std::fs::copy(&targets, data_dir.join("targets.tsv")) {
        b.log(&format!(
            "warning: no {} ({e}): the report has no Targets table",
            targets.display()
        ));
    }
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    for (k, v) in machine::end_lines(elapsed(), &loadavg) {
        b.data.meta(k, &v)?;
    }
    b.log(&format!(
        "== report ({} s into the run)",
        elapsed().as_secs()
    ));
    let report = crate::run(&data_dir, &out).map_err(|source| Error::Report {
        data: data_dir.clone(),
        source,
    })?;
    b.log(&format!(
        "done in {} s: {}, plots in {}/",
        elapsed().as_secs(),
        report.display(),
        out.join("plots").display()
    ));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_and_selection() {
        use Section::*;
        assert_eq!(selected(Profile::Compare, &[], &[]).unwrap().len(), 11);
        assert_eq!(
            selected(Profile::Compare, &[Load, Switch], &[]).unwrap(),
            [Switch, Load],
            "--only keeps the profile's order"
        );
        assert_eq!(
            selected(
                Profile::Compare,
                &[],
                &[Passthrough, Vm, Nic, Load, Batch, Flows, Defaults]
            )
            .unwrap(),
            [Throughput, Switch, Latency, Idle]
        );
        assert_eq!(
            selected(Profile::Targets, &[], &[Vm]).unwrap(),
            [Throughput, Switch, Latency, Batch, Idle, Nic, Flows, Defaults]
        );
        assert_eq!(
            selected(Profile::Compare, &[Defaults], &[]).unwrap(),
            [Defaults]
        );
        let e = selected(Profile::Targets, &[Load], &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "the options leave no section to measure (profile targets: throughput switch latency batch idle vm nic flows defaults)"
        );
        assert!(selected(Profile::Compare, &[Nic], &[Nic]).is_err());
        assert_eq!("targets".parse::<Profile>().unwrap(), Profile::Targets);
        assert!("x"
            .parse::<Profile>()
            .unwrap_err()
            .contains("compare targets"));
        let b = Path::new("/r/bench");
        assert_eq!(
            Profile::Compare.default_out(b),
            Path::new("/r/bench/results")
        );
        assert_eq!(
            Profile::Targets.default_out(b),
            Path::new("/r/bench/results/run")
        );
        assert_eq!(Profile::Targets.default_runs(), Some(1));
        assert_eq!(Profile::Compare.default_runs(), None);
        assert!(Profile::Targets.variants() && !Profile::Compare.variants());
        for s in Profile::Compare.sections() {
            assert!(!title(*s).is_empty());
            assert!(title(*s).starts_with(s.name()));
        }
    }

    #[test]
    fn the_output_directory_is_cleared_but_the_log_can_stay() {
        let d = std::env::temp_dir().join(format!("rs-bench-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("raw/x")).unwrap();
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::fs::write(d.join("run.log"), "installs\n").unwrap();
        std::fs::write(d.join("REPORT.md"), "old").unwrap();
        let out = prepare_out(&d, true).unwrap();
        assert!(out.is_absolute());
        assert!(!d.join("raw").exists() && !d.join("data").exists());
        assert!(!d.join("REPORT.md").exists());
        assert_eq!(
            std::fs::read_to_string(d.join("run.log")).unwrap(),
            "installs\n"
        );
        prepare_out(&d, false).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("run.log")).unwrap(), "");
        let _ = std::fs::remove_dir_all(&d);
    }
}
