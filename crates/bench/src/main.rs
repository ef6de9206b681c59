//! The `ringswitch-bench` binary: `ringswitch-bench compare ...` (a whole
//! run, what bench/compare and bench/run.sh exec after their installs and
//! build), `ringswitch-bench report DIR [--out OUTDIR]` and
//! `ringswitch-bench run ...`. `ringswitch-bench DIR [--out OUTDIR]`,
//! without a subcommand, is `report` (how bench/compare called the former
//! `ringswitch-bench-report`).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand};
use ringswitch_bench::compare::{self, Profile};
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
    /// Measures ringswitch beside its peers on this machine and writes a
    /// report with ratios and plots: OUT/REPORT.md (also printed),
    /// OUT/plots/*.svg, OUT/data/*.tsv, OUT/run.log and OUT/raw/. Measures
    /// private copies of the binaries; puts back the guest halt polling
    /// it changed, also on an error or a signal. Installs nothing and
    /// builds nothing: bench/compare does, then runs this.
    Compare(CompareArgs),
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
    /// load, passthrough, flows, defaults: the default wait against its
    /// references) and appends the samples and failures to OUT/data/*.tsv,
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
    /// Prints the flows section's 1,000 flows over ten masks, one per line
    /// in `ovs-ofctl add-flows` form, each sending to OpenFlow port PORT;
    /// with --tuples, pkt-gen's arguments for the 1,000 active 5-tuples
    /// they match instead. For running the section's switch by hand
    /// (bench/flows-profile.sh does).
    Flows {
        /// The OpenFlow port every flow outputs to.
        #[arg(long, value_name = "PORT", default_value_t = 1)]
        port: u32,
        /// Print pkt-gen's source and destination arguments.
        #[arg(long)]
        tuples: bool,
    },
}

/// `ringswitch-bench compare`'s options.
#[derive(Args, Debug)]
struct CompareArgs {
    /// compare: every section beside its peers (default OUT
    /// bench/results); targets: the sections the issue's targets judge,
    /// one run per path, also the pipe busy-waiting and with 4096 slots
    /// and the switch's drops (default OUT bench/results/run).
    #[arg(long, value_name = "NAME", default_value = "compare")]
    profile: Profile,
    /// A first look: the parameters file's quick column (one run per
    /// path, short windows, fewer sweep points and placements, no
    /// passthrough).
    #[arg(long)]
    quick: bool,
    /// Runs per path (default: the parameters file's `runs`; targets: 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..100))]
    runs: Option<u32>,
    /// Where the report, plots, data, run.log and raw/ go.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Only these sections (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    only: Vec<Section>,
    /// Leave these sections out (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    skip: Vec<Section>,
    /// In a VM, let idle vCPUs poll NS nanoseconds before halting
    /// (cpuidle-haltpoll's guest_halt_poll_ns) for this run only; the old
    /// value is put back at the end.
    #[arg(long, value_name = "NS", value_parser = clap::value_parser!(u64).range(0..=9_999_999_999))]
    guest_halt_poll: Option<u64>,
    /// The ringswitch binary to measure (ringswitchd beside it).
    #[arg(long, value_name = "PATH")]
    ringswitch: PathBuf,
    /// The bench/ directory: params.tsv, targets.tsv, the peer scripts.
    #[arg(long, value_name = "DIR", default_value = "bench")]
    bench_dir: PathBuf,
    /// The command line the report shows (default: this one).
    #[arg(long, value_name = "TEXT")]
    command: Option<String>,
    /// When the run started, in seconds since 1970 (default: now), so
    /// that a wrapper's installs and build count in the elapsed time.
    #[arg(long, value_name = "SECONDS")]
    started_at: Option<u64>,
    /// Append to OUT/run.log instead of starting it afresh.
    #[arg(long)]
    keep_log: bool,
}

impl CompareArgs {
    /// The library's options; `argv` is this process's command line.
    fn options(self, argv: &[OsString]) -> compare::Options {
        let command = self.command.unwrap_or_else(|| {
            let words: Vec<String> = argv
                .iter()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            format!("ringswitch-bench {}", words.join(" "))
        });
        let started = self.started_at.map_or_else(SystemTime::now, |s| {
            SystemTime::UNIX_EPOCH + Duration::from_secs(s)
        });
        compare::Options {
            profile: self.profile,
            quick: self.quick,
            runs: self.runs,
            out: self.out,
            only: self.only,
            skip: self.skip,
            guest_halt_poll_ns: self.guest_halt_poll,
            ringswitch: self.ringswitch,
            bench_dir: self.bench_dir,
            command,
            started,
            keep_log: self.keep_log,
        }
    }
}

/// The subcommands and the flags clap answers itself; any other first
/// argument is the data directory of `report`.
const FIRST_WORDS: &[&str] = &[
    "compare",
    "report",
    "run",
    "flows",
    "help",
    "-h",
    "--help",
    "-V",
    "--version",
];

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
    let argv: Vec<OsString> = std::env::args_os().collect();
    let cli = Cli::parse_from(with_subcommand(argv.clone()));
    match cli.command {
        Command::Compare(args) => {
            run::signals::install();
            match compare::compare(&args.options(&argv)) {
                Ok(report) => match std::fs::read_to_string(&report) {
                    Ok(text) => {
                        print!("{text}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!(
                            "ringswitch-bench compare: could not read {}: {e}.",
                            report.display()
                        );
                        ExitCode::FAILURE
                    }
                },
                Err(e) => {
                    eprintln!("ringswitch-bench compare: {e}.");
                    match e {
                        compare::Error::Interrupted { signal, .. } => {
                            ExitCode::from(u8::try_from(128 + signal).unwrap_or(143))
                        }
                        _ => ExitCode::FAILURE,
                    }
                }
            }
        }
        Command::Flows { port, tuples } => {
            let text = if tuples {
                format!(
                    "-s {} -d {}\n",
                    run::openflow::TUPLES_SRC,
                    run::openflow::TUPLES_DST
                )
            } else {
                run::openflow::thousand_flows(&port.to_string())
            };
            // A reader that stops early (`| head`) is no error.
            match std::io::stdout().lock().write_all(text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("ringswitch-bench flows: could not write: {e}.");
                    ExitCode::FAILURE
                }
                _ => ExitCode::SUCCESS,
            }
        }
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
                variants: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<compare::Options, String> {
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        let cli = Cli::try_parse_from(with_subcommand(argv.clone())).map_err(|e| e.to_string())?;
        match cli.command {
            Command::Compare(c) => Ok(c.options(&argv)),
            other => Err(format!("not compare: {other:?}")),
        }
    }

    #[test]
    fn compare_defaults() {
        let o = parse(&[
            "ringswitch-bench",
            "compare",
            "--ringswitch",
            "/b/ringswitch",
        ])
        .unwrap();
        assert_eq!(o.profile, Profile::Compare);
        assert!(!o.quick && !o.keep_log);
        assert_eq!(o.runs, None);
        assert_eq!(o.out, None);
        assert!(o.only.is_empty() && o.skip.is_empty());
        assert_eq!(o.guest_halt_poll_ns, None);
        assert_eq!(o.bench_dir, PathBuf::from("bench"));
        assert_eq!(
            o.command,
            "ringswitch-bench compare --ringswitch /b/ringswitch"
        );
    }

    #[test]
    fn compare_options() {
        let o = parse(&[
            "ringswitch-bench",
            "compare",
            "--profile",
            "targets",
            "--quick",
            "--runs=5",
            "--out",
            "/tmp/o",
            "--only",
            "switch,latency",
            "--skip=vm",
            "--guest-halt-poll",
            "200000",
            "--ringswitch",
            "/b/ringswitch",
            "--bench-dir",
            "/r/bench",
            "--command",
            "bench/compare --quick",
            "--started-at",
            "100",
            "--keep-log",
        ])
        .unwrap();
        assert_eq!(o.profile, Profile::Targets);
        assert!(o.quick && o.keep_log);
        assert_eq!(o.runs, Some(5));
        assert_eq!(o.out, Some(PathBuf::from("/tmp/o")));
        assert_eq!(o.only, [Section::Switch, Section::Latency]);
        assert_eq!(o.skip, [Section::Vm]);
        assert_eq!(o.guest_halt_poll_ns, Some(200_000));
        assert_eq!(o.bench_dir, PathBuf::from("/r/bench"));
        assert_eq!(o.command, "bench/compare --quick");
        assert_eq!(o.started, SystemTime::UNIX_EPOCH + Duration::from_secs(100));
    }

    #[test]
    fn compare_refuses_bad_values() {
        let base = ["ringswitch-bench", "compare", "--ringswitch", "r"];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v)
        };
        for bad in [
            &["--runs", "0"][..],
            &["--runs", "100"],
            &["--runs", "x"],
            &["--only", "throughput,nope"],
            &["--skip", "bogus"],
            &["--guest-halt-poll", "10000000000"],
            &["--guest-halt-poll", "-1"],
            &["--profile", "fast"],
            &["--frobnicate"],
        ] {
            assert!(with(bad).is_err(), "{bad:?} accepted");
        }
        let e = with(&["--only", "nope"]).unwrap_err();
        assert!(e.contains("unknown section 'nope'"), "{e}");
        assert!(
            parse(&["ringswitch-bench", "compare"]).is_err(),
            "--ringswitch is required"
        );
        assert_eq!(with(&["--runs", "99"]).unwrap().runs, Some(99));
        assert_eq!(
            with(&["--guest-halt-poll", "9999999999"])
                .unwrap()
                .guest_halt_poll_ns,
            Some(9_999_999_999)
        );
    }

    #[test]
    fn without_a_subcommand_it_is_report() {
        let cli = Cli::try_parse_from(with_subcommand(vec!["rb".into(), "dir".into()])).unwrap();
        assert!(matches!(cli.command, Command::Report { .. }));
    }

    #[test]
    fn flows_is_a_subcommand_of_its_own() {
        let parse = |a: &[&str]| {
            let argv = a.iter().map(OsString::from).collect();
            Cli::try_parse_from(with_subcommand(argv)).map(|c| c.command)
        };
        assert!(matches!(
            parse(&["rb", "flows"]),
            Ok(Command::Flows {
                port: 1,
                tuples: false
            })
        ));
        assert!(matches!(
            parse(&["rb", "flows", "--port", "3", "--tuples"]),
            Ok(Command::Flows {
                port: 3,
                tuples: true
            })
        ));
        assert!(parse(&["rb", "flows", "--port", "x"]).is_err());
    }
}
