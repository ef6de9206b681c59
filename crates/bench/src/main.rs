//! The `ringswitch-bench` binary: `ringswitch-bench report DIR [--out
//! OUTDIR]`. `ringswitch-bench DIR [--out OUTDIR]`, without a subcommand,
//! is `report` (how bench/compare called the former
//! `ringswitch-bench-report`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

/// The subcommands and the flags clap answers itself; any other first
/// argument is the data directory of `report`.
const FIRST_WORDS: &[&str] = &["report", "help", "-h", "--help", "-V", "--version"];

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
    }
}
