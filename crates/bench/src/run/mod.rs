//! `ringswitch-bench run`: starts the daemon from a private binary copy
//! and pkt-gen with CPU pinning and timeouts, waits for conditions with
//! deadlines, reads their JSON reports and writes the figures to the run's
//! `samples.tsv` and `failures.tsv` (appended: `compare` runs one section
//! after another into the same files). A failed measurement is a failure line with its reason;
//! the run goes on.
//!
//! - [`procs`]: starting, waiting for and stopping processes;
//! - [`daemon`]: the daemon a measurement needs, restarted when its
//!   arguments change;
//! - [`measure`]: one throughput run (a receiver and a sender) and one
//!   round-trip run (ping and pong);
//! - [`sections`]: the sections, their cases and their samples;
//! - [`peers`]: DPDK memif and OVS-DPDK through their scripts;
//! - [`idle`]: the idle and memory sections; [`load`]: CPU against
//!   offered load;
//! - [`defaults`]: the default (adaptive) wait against busy-waiting,
//!   blocking, guest halt polling and the old default;
//! - [`vm`]: VM ports, DPDK testpmd ([`testpmd`]: its command line and
//!   log) as the VMs, beside OVS-DPDK;
//! - [`flows`]: OpenFlow tables beside the learning bridge and OVS-DPDK
//!   ([`openflow`]: the flow files and a raw OpenFlow connection);
//! - [`nic`]: NIC ports on a veth pair beside DPDK testpmd and a Linux
//!   bridge (`bench/peers/veth.sh` wires the namespaces).

pub mod daemon;
pub mod defaults;
pub mod flows;
pub mod idle;
pub mod load;
pub mod log;
pub mod measure;
pub mod nic;
pub mod openflow;
pub mod peers;
pub mod procs;
pub mod sections;
pub mod signals;
pub mod testpmd;
pub mod vm;

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::params::{Mode, Params};
use crate::write::DataDir;

pub use sections::Section;

/// Where a run's processes go: CPUs, binaries, the data directory.
pub struct Setup {
    /// The `ringswitch` binary (a private copy: `ringswitchd` beside it).
    pub ringswitch: PathBuf,
    /// The daemon's control socket.
    pub socket: PathBuf,
    /// The output directory: `data/`, `raw/`, `run.log`.
    pub out: PathBuf,
    /// The parameters file.
    pub params: PathBuf,
    /// The bench/ directory (its peers/ scripts).
    pub bench_dir: PathBuf,
    /// Whether saturated peers' CPU also goes to the load section.
    pub peer_load: bool,
    /// Quick or full.
    pub mode: Mode,
    /// Runs per path, if not the parameters file's.
    pub runs: Option<u32>,
    /// Receivers' CPU.
    pub rx_cpu: u32,
    /// Senders' CPU.
    pub tx_cpu: u32,
    /// Whether throughput and switch also measure their variants: the
    /// pipe busy-waiting and with 4096 slots and batch 2048, the switch's
    /// sent rate and drops (bench/run.sh's figures).
    pub variants: bool,
}

/// A run in progress: its processes, its daemon, its data.
pub struct Bench {
    /// The processes started.
    pub procs: procs::Procs,
    /// The data files.
    pub data: DataDir,
    /// The daemon, when one runs.
    pub daemon: daemon::Daemon,
    /// Parameters.
    pub params: Params,
    /// Runs per path.
    pub runs: u32,
    /// Receivers' CPU.
    pub rx_cpu: u32,
    /// Senders' CPU.
    pub tx_cpu: u32,
    rs: String,
    sock: String,
    pipe_id: u32,
    bench_dir: PathBuf,
    out: PathBuf,
    /// Whether saturated peers' CPU also goes to the load section.
    pub peer_load: bool,
    /// Whether throughput and switch also measure their variants.
    pub variants: bool,
}

impl Bench {
    /// Opens the output directory and reads the parameters.
    pub fn new(s: &Setup) -> Result<Bench, Error> {
        let params = Params::read(&s.params, s.mode)?;
        let runs = match s.runs {
            Some(r) => r,
            None => u32::try_from(params.one("runs")?).unwrap_or(1),
        };
        let data = DataDir::open(&s.out.join("data"))?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Write { path, source }
        };
        let log_path = s.out.join("run.log");
        let log = log::Log::open(&log_path).map_err(io(&log_path))?;
        let raw = s.out.join("raw");
        let procs = procs::Procs::new(&raw, "run-", log).map_err(io(&raw))?;
        Ok(Bench {
            procs,
            data,
            daemon: daemon::Daemon::default(),
            params,
            runs,
            rx_cpu: s.rx_cpu,
            tx_cpu: s.tx_cpu,
            rs: s.ringswitch.display().to_string(),
            sock: s.socket.display().to_string(),
            pipe_id: 0,
            bench_dir: s.bench_dir.clone(),
            out: s.out.clone(),
            peer_load: s.peer_load,
            variants: s.variants,
        })
    }

    /// A progress line.
    pub fn log(&mut self, msg: &str) {
        self.procs.log.line(msg);
    }

    /// `ringswitch --socket SOCK ARGS...`.
    pub fn rs_cmd(&self, args: &[&str]) -> Vec<String> {
        let mut v = vec![self.rs.clone(), "--socket".into(), self.sock.clone()];
        v.extend(args.iter().map(|a| (*a).to_owned()));
        v
    }

    /// A fresh pipe number (pipe names are never reused within a daemon).
    pub fn next_pipe(&mut self) -> u32 {
        self.pipe_id += 1;
        self.pipe_id
    }

    /// Runs `sections` in order, then stops the daemon.
    pub fn run(&mut self, sections: &[Section]) -> Result<(), Error> {
        for s in sections {
            if signals::interrupted() {
                break;
            }
            s.run(self)?;
        }
        self.daemon_stop();
        Ok(())
    }
}
