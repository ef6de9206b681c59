//! The `ringswitch-bench-report` binary: `ringswitch-bench-report DIR
//! [--out OUTDIR]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Turns the raw data of a bench/compare run (meta.tsv, samples.tsv,
/// failures.tsv and notes.tsv in DIR) into a Markdown report, REPORT.md,
/// with tables of medians, min–max and ratios of ringswitch to its peers,
/// and SVG plots of the batch-size and offered-load sweeps in plots/.
/// Every figure comes from the data files. The report is written into DIR,
/// or into OUTDIR with --out; its path is printed when done.
#[derive(Parser, Debug)]
#[command(name = "ringswitch-bench-report", version)]
struct Args {
    /// The directory holding the data files of the run.
    dir: PathBuf,
    /// Where to write REPORT.md and plots/ (default: DIR).
    #[arg(long, value_name = "OUTDIR")]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let out = args.out.as_deref().unwrap_or(&args.dir);
    match ringswitch_bench_report::run(&args.dir, out) {
        Ok(report) => {
            println!("{}", report.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ringswitch-bench-report: {e}.");
            ExitCode::from(2)
        }
    }
}
