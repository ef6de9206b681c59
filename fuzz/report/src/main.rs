//! `ringswitch-fuzz-report NAME=LOG[,CORPUS] ...`: reads the log of one
//! libFuzzer run per target and prints a table of what each run did:
//! executions, edge coverage (`cov:`), features (`ft:`), corpus size, and
//! the crashes it wrote (reproducer paths). With `--markdown FILE` the
//! table is also written there. Exits 1 when any run crashed (or wrote a
//! timeout, leak or out-of-memory reproducer), 2 on bad arguments or an
//! unreadable log.
//!
//! Scripts run the fuzzers (scripts/fuzz.sh, bench/fuzz-campaign.sh); this
//! program does the parsing and the figures, so they are typed and tested.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What one libFuzzer run reported.
#[derive(Debug, Default, PartialEq, Eq)]
struct Run {
    execs: u64,
    cov: u64,
    ft: u64,
    exec_per_s: u64,
    peak_rss_mb: u64,
    /// Reproducers written (`crash-*`, `timeout-*`, `leak-*`, `oom-*`, `slow-unit-*` excluded).
    artifacts: Vec<String>,
    /// The first error line (ASan, panic, deadly signal), if any.
    error: Option<String>,
}

/// The number after `key` in `line` (`cov: 123` -> 123).
fn field(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Parses a libFuzzer log (`-print_final_stats=1` adds exact totals).
fn parse(log: &str) -> Run {
    let mut r = Run::default();
    for line in log.lines() {
        if let Some(n) = line.strip_prefix('#').and_then(|l| field(l, "")) {
            r.execs = r.execs.max(n);
            if let Some(c) = field(line, "cov:") {
                r.cov = r.cov.max(c);
            }
            if let Some(f) = field(line, "ft:") {
                r.ft = r.ft.max(f);
            }
            if let Some(e) = field(line, "exec/s:") {
                r.exec_per_s = e;
            }
        } else if let Some(n) = field(line, "stat::number_of_executed_units:") {
            r.execs = n;
        } else if let Some(n) = field(line, "stat::average_exec_per_sec:") {
            r.exec_per_s = n;
        } else if let Some(n) = field(line, "stat::peak_rss_mb:") {
            r.peak_rss_mb = n;
        } else if let Some(i) = line.find("Test unit written to ") {
            let path = line[i + "Test unit written to ".len()..].trim().to_string();
            let name = Path::new(&path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            if !name.starts_with("slow-unit-") {
                r.artifacts.push(path);
            }
        } else if r.error.is_none()
            && (line.contains("ERROR: AddressSanitizer")
                || line.contains("ERROR: libFuzzer")
                || line.contains("panicked at")
                || line.contains("SUMMARY: libFuzzer"))
        {
            r.error = Some(line.trim().to_string());
        }
    }
    r
}

struct Target {
    name: String,
    log: PathBuf,
    corpus: Option<PathBuf>,
}

fn corpus_size(dir: &Path) -> Option<(usize, u64)> {
    let mut files = 0;
    let mut bytes = 0;
    for e in std::fs::read_dir(dir).ok()? {
        let m = e.ok()?.metadata().ok()?;
        if m.is_file() {
            files += 1;
            bytes += m.len();
        }
    }
    Some((files, bytes))
}

fn table(rows: &[(&Target, Run)]) -> String {
    let mut out = String::from(
        "| target | executions | exec/s | cov | ft | corpus (files / KiB) | peak RSS MB | crashes |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (t, r) in rows {
        let corpus = t
            .corpus
            .as_deref()
            .and_then(corpus_size)
            .map_or("-".to_string(), |(f, b)| {
                format!("{f} / {}", b.div_ceil(1024))
            });
        let crashes = if r.artifacts.is_empty() && r.error.is_none() {
            "0".to_string()
        } else if r.artifacts.is_empty() {
            format!("error: {}", r.error.as_deref().unwrap_or(""))
        } else {
            format!("{}: {}", r.artifacts.len(), r.artifacts.join(" "))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            t.name, r.execs, r.exec_per_s, r.cov, r.ft, corpus, r.peak_rss_mb, crashes
        );
    }
    out
}

fn usage() -> ExitCode {
    eprintln!("usage: ringswitch-fuzz-report [--markdown FILE] NAME=LOG[,CORPUS_DIR]...");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut markdown = None;
    let mut targets = Vec::new();
    while let Some(a) = args.next() {
        if a == "--markdown" {
            let Some(f) = args.next() else { return usage() };
            markdown = Some(PathBuf::from(f));
            continue;
        }
        let Some((name, rest)) = a.split_once('=') else {
            return usage();
        };
        let (log, corpus) = match rest.split_once(',') {
            Some((l, c)) => (l, Some(PathBuf::from(c))),
            None => (rest, None),
        };
        targets.push(Target {
            name: name.to_string(),
            log: PathBuf::from(log),
            corpus,
        });
    }
    if targets.is_empty() {
        return usage();
    }
    let mut rows = Vec::new();
    for t in &targets {
        match std::fs::read(&t.log) {
            Ok(b) => rows.push((t, parse(&String::from_utf8_lossy(&b)))),
            Err(e) => {
                eprintln!(
                    "cannot read the log of {} at {}: {e}",
                    t.name,
                    t.log.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    let text = table(&rows);
    print!("{text}");
    if let Some(f) = markdown {
        if let Err(e) = std::fs::write(&f, &text) {
            eprintln!("cannot write {}: {e}", f.display());
            return ExitCode::from(2);
        }
    }
    let crashed: Vec<_> = rows
        .iter()
        .filter(|(_, r)| !r.artifacts.is_empty() || r.error.is_some())
        .collect();
    for (t, r) in &crashed {
        eprintln!(
            "{} crashed: {}; reproduce with: cargo +nightly fuzz run {} {}",
            t.name,
            r.error.as_deref().unwrap_or("see its log"),
            t.name,
            r.artifacts
                .first()
                .map_or("<no reproducer written>", String::as_str)
        );
    }
    if crashed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "INFO: Seed: 1\n\
        #2\tINITED cov: 100 ft: 120 corp: 3/30b exec/s: 0 rss: 40Mb\n\
        #8192\tpulse  cov: 1051 ft: 2278 corp: 97/2094b lim: 25 exec/s: 819 rss: 306Mb\n\
        #11690\tDONE   cov: 1054 ft: 2427 corp: 134/3004b lim: 25 exec/s: 730 rss: 306Mb\n\
        Done 11690 runs in 16 second(s)\n\
        stat::number_of_executed_units: 11690\n\
        stat::average_exec_per_sec:     730\n\
        stat::peak_rss_mb:              306\n";

    #[test]
    fn clean_run() {
        let r = parse(CLEAN);
        assert_eq!(
            r,
            Run {
                execs: 11690,
                cov: 1054,
                ft: 2427,
                exec_per_s: 730,
                peak_rss_mb: 306,
                artifacts: vec![],
                error: None
            }
        );
    }

    #[test]
    fn crash_keeps_the_reproducer_and_the_figures_so_far() {
        let log = "#4096\tpulse  cov: 500 ft: 700 corp: 10/1b exec/s: 100 rss: 50Mb\n\
            thread '<unnamed>' panicked at fuzz_targets/x.rs:1:1:\n\
            ==12== ERROR: libFuzzer: deadly signal\n\
            MS: 1 ChangeBit-; base unit: 0\n\
            artifact_prefix='/tmp/a/'; Test unit written to /tmp/a/crash-abc\n\
            Test unit written to /tmp/a/slow-unit-def\n";
        let r = parse(log);
        assert_eq!((r.execs, r.cov, r.ft), (4096, 500, 700));
        assert_eq!(r.artifacts, vec!["/tmp/a/crash-abc".to_string()]);
        assert!(r.error.unwrap().contains("panicked at"));
    }

    #[test]
    fn an_empty_log_reports_nothing_run() {
        assert_eq!(parse(""), Run::default());
    }
}
