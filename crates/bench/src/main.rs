//! The `ringswitch-bench` binary: `ringswitch-bench report DIR [--out
//! OUTDIR]` and `ringswitch-bench run ...`. `ringswitch-bench DIR [--out
//! OUTDIR]`, without a subcommand, is `report` (how bench/compare called
//! the former `ringswitch-bench-report`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ringswitch_bench::params::Mode;
use ringswitch_bench::run::{self, Section, Setup};

/// ringswitch's benchmarks: measures, and turns the measured samples into a
/// report.
#[derive(Parser, Debug)]
#[command(
    name = "ringswitch-bench",
    version,
    after_help = "Without a subcommand, `ringswitch-bench DIR [--out OUTDIR]` is `report DIR [--out OUTDIR]`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Turns the raw data of a run (meta.tsv, samples.tsv, failures.tsv and
    /// notes.tsv in DIR) into a Markdown report, REPORT.md, with tables of
    /// medians, min–max and ratios of ringswitch to its peers, and SVG plots
    /// of the batch-size and offered-load sweeps in plots/. Every figure
    /// comes from the data files. The report is written into DIR, or into
    /// OUTDIR with --out; its path is printed when done.
    Report {
        /// The directory holding the data files of the run.
        dir: PathBuf,
        /// Where to write REPORT.md and plots/ (default: DIR).
        #[arg(long, value_name = "OUTDIR")]
        out: Option<PathBuf>,
    },
    /// Measures sections (throughput and batch with DPDK memif, switch with
    /// OVS-DPDK's memif ports, vm: DPDK testpmd as VMs beside OVS-DPDK's
    /// vhost-user ports, nic: a veth pair into the switch beside DPDK
    /// testpmd and a Linux bridge, latency, idle: also the daemon's memory,
    /// load, passthrough) and appends the samples and failures to OUT/data/*.tsv,
    /// progress to OUT/run.log and every process's output to OUT/raw/.
    /// Sizes, counts and durations come from the parameters file.
    Run {
        /// The ringswitch binary (a private copy; ringswitchd beside it).
        #[arg(long, value_name = "PATH")]
        ringswitch: PathBuf,
        /// The daemon's control socket.
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        /// The output directory (data/, raw/, run.log).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Comma-separated sections, run in this order.
        #[arg(long, value_name = "LIST", value_delimiter = ',', required = true)]
        sections: Vec<Section>,
        /// The parameters file.
        #[arg(long, value_name = "FILE", default_value = "bench/params.tsv")]
        params: PathBuf,
        /// The bench/ directory, whose peers/ scripts measure the peers.
        #[arg(long, value_name = "DIR", default_value = "bench")]
        bench_dir: PathBuf,
        /// Also record the saturated peers' CPU (memif, OVS-DPDK) in the
        /// load section, at 100 % of their load.
        #[arg(long)]
        peer_load: bool,
        /// The quick column of the parameters file.
        #[arg(long)]
        quick: bool,
        /// Runs per path (default: the parameters file's `runs`).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..100))]
        runs: Option<u32>,
        /// The receivers' CPU.
        #[arg(long, value_name = "CPU", default_value_t = 0)]
        rx_cpu: u32,
        /// The senders' CPU.
        #[arg(long, value_name = "CPU", default_value_t = 1)]
        tx_cpu: u32,
    },
}

/// The subcommands and the flags clap answers itself; any other first
/// argument is the data directory of `report`.
const FIRST_WORDS: &[&str] = &["report", "run", "help", "-h", "--help", "-V", "--version"];

/// The arguments with `report` put in front when no subcommand is given.
fn with_subcommand(mut args: Vec<OsString>) -> Vec<OsString> {
    let named = args
        .get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| FIRST_WORDS.contains(&a));
    if args.len() > 1 && !named {
        args.insert(1, "report".into());
    }
    args
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(with_subcommand(std::env::args_os().collect()));
    match cli.command {
        Command::Report { dir, out } => {
            let out = out.as_deref().unwrap_or(&dir);
            match ringswitch_bench::run(&dir, out) {
                Ok(report) => {
                    println!("{}", report.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ringswitch-bench report: {e}.");
                    ExitCode::from(2)
                }
            }
        }
        Command::Run {
            ringswitch,
            socket,
            out,
            sections,
            params,
            bench_dir,
            peer_load,
            quick,
            runs,
            rx_cpu,
            tx_cpu,
        } => {
            run::signals::install();
            let setup = Setup {
                ringswitch,
                socket,
                out,
                params,
                bench_dir,
                peer_load,
                mode: if quick { Mode::Quick } else { Mode::Full },
                runs,
                rx_cpu,
                tx_cpu,
            };
            let result = run::Bench::new(&setup).and_then(|mut b| b.run(&sections));
            match result {
                Err(e) => {
                    eprintln!("ringswitch-bench run: {e}.");
                    ExitCode::from(2)
                }
                Ok(()) if run::signals::interrupted() => ExitCode::from(143),
                Ok(()) => ExitCode::SUCCESS,
            }
        }
    }
}
