//! The raw data of a run, read from its directory: `meta.tsv`,
//! `samples.tsv`, `failures.tsv` and `notes.tsv` (formats in the crate
//! documentation).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;

use crate::error::{Error, Problem};

/// The header line of `samples.tsv`.
pub const SAMPLES_HEADER: &str = "section\tcase\tsystem\tmetric\tunit\tbetter\tx\trun\tvalue";
/// The header line of `failures.tsv`.
pub const FAILURES_HEADER: &str = "section\tcase\tsystem\treason";
/// The header line of `targets.tsv`.
pub const TARGETS_HEADER: &str = "section\tcase\tsystem\tmetric\top\ttarget\tsource";

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// More is better (throughput).
    Higher,
    /// Less is better (latency, CPU).
    Lower,
    /// Neither (`-`).
    Neither,
}

impl Better {
    fn parse(s: &str) -> Option<Better> {
        match s {
            "higher" => Some(Better::Higher),
            "lower" => Some(Better::Lower),
            "-" => Some(Better::Neither),
            _ => None,
        }
    }

    /// Whether figure `a` is strictly better than `b`.
    pub fn prefers(self, a: f64, b: f64) -> bool {
        match self {
            Better::Higher => a > b,
            Better::Lower => a < b,
            Better::Neither => false,
        }
    }
}

impl fmt::Display for Better {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
            Better::Neither => "-",
        })
    }
}

/// The x of a sample: `-` (a plain figure) or a number (batch size,
/// offered load).
#[derive(Clone, Debug, PartialEq)]
pub struct X {
    /// As written in the file.
    pub text: String,
    /// Its value, `None` for `-`.
    pub value: Option<f64>,
}

/// One measured sample: a line of `samples.tsv`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Section id (`throughput`, `batch`, ...).
    pub section: String,
    /// What is compared.
    pub case: String,
    /// Who was measured.
    pub system: String,
    /// What was measured.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub better: Better,
    /// Batch size, offered load, or none.
    pub x: X,
    /// Repetition number, from 1.
    pub run: u32,
    /// The measured figure.
    pub value: f64,
    /// Line in `samples.tsv`.
    pub line: usize,
}

/// A measurement that failed: a line of `failures.tsv`.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// Section id.
    pub section: String,
    /// What was compared.
    pub case: String,
    /// Who was to be measured.
    pub system: String,
    /// Why there is no figure.
    pub reason: String,
}

/// How a section was measured: a line of `notes.tsv` (Markdown).
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// Section id.
    pub section: String,
    /// Markdown text.
    pub text: String,
}

/// How a figure is compared with its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `>=`
    AtLeast,
    /// `>`
    Above,
    /// `<=`
    AtMost,
    /// `<`
    Below,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            ">=" => Op::AtLeast,
            ">" => Op::Above,
            "<=" => Op::AtMost,
            "<" => Op::Below,
            _ => return None,
        })
    }

    /// Whether `value` meets `target`.
    pub fn meets(self, value: f64, target: f64) -> bool {
        match self {
            Op::AtLeast => value >= target,
            Op::Above => value > target,
            Op::AtMost => value <= target,
            Op::Below => value < target,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::AtLeast => "≥",
            Op::Above => ">",
            Op::AtMost => "≤",
            Op::Below => "<",
        })
    }
}

/// A target for a figure (the median of its runs): a line of `targets.tsv`.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Section id.
    pub section: String,
    /// The case.
    pub case: String,
    /// The system.
    pub system: String,
    /// The metric.
    pub metric: String,
    /// How the figure is compared.
    pub op: Op,
    /// The target.
    pub target: f64,
    /// The target as written in the file.
    pub target_text: String,
    /// Where the target comes from, in words.
    pub source: String,
}

/// Everything in a data directory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Data {
    /// `meta.tsv`, in file order.
    pub meta: Vec<(String, String)>,
    /// `samples.tsv`, in file order.
    pub samples: Vec<Sample>,
    /// `failures.tsv`, in file order.
    pub failures: Vec<Failure>,
    /// `notes.tsv`, in file order.
    pub notes: Vec<Note>,
    /// `targets.tsv`, in file order.
    pub targets: Vec<Target>,
}

impl Data {
    /// The plain (x `-`) samples of one metric of one system in one case.
    pub fn plain<'a>(
        &'a self,
        section: &'a str,
        case: &'a str,
        system: &'a str,
        metric: &'a str,
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.section == section
                && s.case == case
                && s.system == system
                && s.metric == metric
                && s.x.value.is_none()
        })
    }
}

/// Reads the data files of `dir`; `samples.tsv` must exist, the others may
/// be missing.
pub fn read_dir(dir: &Path) -> Result<Data, Error> {
    let samples_path = dir.join("samples.tsv");
    let samples_text = read(&samples_path)?;
    let meta_path = dir.join("meta.tsv");
    let failures_path = dir.join("failures.tsv");
    let notes_path = dir.join("notes.tsv");
    let targets_path = dir.join("targets.tsv");
    Ok(Data {
        meta: match read_optional(&meta_path)? {
            Some(text) => parse_pairs(&meta_path, &text, "key")?,
            None => Vec::new(),
        },
        samples: parse_samples(&samples_path, &samples_text)?,
        failures: match read_optional(&failures_path)? {
            Some(text) => parse_failures(&failures_path, &text)?,
            None => Vec::new(),
        },
        notes: match read_optional(&notes_path)? {
            Some(text) => parse_pairs(&notes_path, &text, "section")?
                .into_iter()
                .map(|(section, text)| Note { section, text })
                .collect(),
            None => Vec::new(),
        },
        targets: match read_optional(&targets_path)? {
            Some(text) => parse_targets(&targets_path, &text)?,
            None => Vec::new(),
        },
    })
}

/// Parses `targets.tsv` (header included).
pub fn parse_targets(file: &Path, text: &str) -> Result<Vec<Target>, Error> {
    let mut out = Vec::new();
    for (n, c) in table(file, text, TARGETS_HEADER)? {
        let bad = |p| malformed(file, n, p);
        keys_present(&c, bad)?;
        let op = Op::parse(c[4]).ok_or_else(|| bad(Problem::Op(c[4].to_string())))?;
        let target = number(c[5]).ok_or_else(|| bad(Problem::Value(c[5].to_string())))?;
        out.push(Target {
            section: c[0].to_string(),
            case: c[1].to_string(),
            system: c[2].to_string(),
            metric: c[3].to_string(),
            op,
            target,
            target_text: c[5].to_string(),
            source: c[6].to_string(),
        });
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The non-empty lines of `text` with their numbers (from 1), without a
/// trailing carriage return.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
        .filter(|(_, l)| !l.trim().is_empty())
}

/// The row's key columns (section, case, system, metric: the first four)
/// are not empty; `bad` makes the error for an empty one.
fn keys_present(c: &[&str], bad: impl Fn(Problem) -> Error) -> Result<(), Error> {
    for (i, what) in [(0, "section"), (1, "case"), (2, "system"), (3, "metric")] {
        if c[i].is_empty() {
            return Err(bad(Problem::Empty(what)));
        }
    }
    Ok(())
}

fn malformed(file: &Path, line: usize, problem: Problem) -> Error {
    Error::Malformed {
        file: file.to_path_buf(),
        line,
        problem: Box::new(problem),
    }
}

/// `key<TAB>value` lines (meta.tsv, notes.tsv).
pub fn parse_pairs(
    file: &Path,
    text: &str,
    what: &'static str,
) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for (n, line) in lines(text) {
        let (key, value) = line
            .split_once('\t')
            .ok_or_else(|| malformed(file, n, Problem::NoTab { what }))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(malformed(file, n, Problem::Empty(what)));
        }
        out.push((key.to_string(), value.trim().to_string()));
    }
    Ok(out)
}

/// Checks the header and splits the other lines into `expected` columns.
fn table<'a>(
    file: &Path,
    text: &'a str,
    header: &'static str,
) -> Result<Vec<(usize, Vec<&'a str>)>, Error> {
    let mut it = lines(text);
    let Some((n, first)) = it.next() else {
        return Err(malformed(file, 1, Problem::NoHeader { expected: header }));
    };
    if first.trim_end() != header {
        return Err(malformed(
            file,
            n,
            Problem::Header {
                expected: header,
                found: first.to_string(),
            },
        ));
    }
    let expected = header.split('\t').count();
    let mut rows = Vec::new();
    for (n, line) in it {
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        if cols.len() != expected {
            return Err(malformed(
                file,
                n,
                Problem::Columns {
                    expected,
                    found: cols.len(),
                },
            ));
        }
        rows.push((n, cols));
    }
    Ok(rows)
}

fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parses `samples.tsv` (header included).
pub fn parse_samples(file: &Path, text: &str) -> Result<Vec<Sample>, Error> {
    // (section, case, metric) -> (unit, better, first line)
    let mut metrics: HashMap<(String, String, String), (String, Better, usize)> = HashMap::new();
    let mut out = Vec::new();
    for (n, c) in table(file, text, SAMPLES_HEADER)? {
        let bad = |p| malformed(file, n, p);
        keys_present(&c, bad)?;
        let better = Better::parse(c[5]).ok_or_else(|| bad(Problem::Better(c[5].into())))?;
        let x = if c[6] == "-" {
            None
        } else {
            Some(number(c[6]).ok_or_else(|| bad(Problem::X(c[6].into())))?)
        };
        let run = c[7]
            .parse::<u32>()
            .ok()
            .filter(|r| *r >= 1)
            .ok_or_else(|| bad(Problem::Run(c[7].into())))?;
        let value = number(c[8]).ok_or_else(|| bad(Problem::Value(c[8].into())))?;
        let key = (c[0].to_string(), c[1].to_string(), c[3].to_string());
        match metrics.get(&key) {
            Some((unit, b, first)) if unit != c[4] || *b != better => {
                return Err(bad(Problem::Inconsistent {
                    case: c[1].into(),
                    metric: c[3].into(),
                    unit: c[4].into(),
                    better: better.to_string(),
                    first_unit: unit.clone(),
                    first_better: b.to_string(),
                    first_line: *first,
                }));
            }
            Some(_) => {}
            None => {
                metrics.insert(key, (c[4].to_string(), better, n));
            }
        }
        out.push(Sample {
            section: c[0].into(),
            case: c[1].into(),
            system: c[2].into(),
            metric: c[3].into(),
            unit: c[4].into(),
            better,
            x: X {
                text: c[6].into(),
                value: x,
            },
            run,
            value,
            line: n,
        });
    }
    Ok(out)
}

/// Parses `failures.tsv` (header included).
pub fn parse_failures(file: &Path, text: &str) -> Result<Vec<Failure>, Error> {
    let mut out = Vec::new();
    for (n, c) in table(file, text, FAILURES_HEADER)? {
        if c[0].is_empty() {
            return Err(malformed(file, n, Problem::Empty("section")));
        }
        out.push(Failure {
            section: c[0].into(),
            case: c[1].into(),
            system: c[2].into(),
            reason: c[3].into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(body: &str) -> Result<Vec<Sample>, Error> {
        parse_samples(
            Path::new("d/samples.tsv"),
            &format!("{SAMPLES_HEADER}\n{body}"),
        )
    }

    fn problem_at(r: Result<Vec<Sample>, Error>) -> (String, usize, Problem) {
        match r {
            Err(e @ Error::Malformed { .. }) => {
                let msg = e.to_string();
                let Error::Malformed { line, problem, .. } = e else {
                    unreachable!()
                };
                (msg, line, *problem)
            }
            other => panic!("expected a malformed-input error, got {other:?}"),
        }
    }

    const GOOD: &str = "throughput\tp2p\tringswitch pipe\treceived Mpps\tMpps\thigher\t-\t1\t86.1";

    #[test]
    fn good_line() {
        let s = samples(&format!("{GOOD}\n\n")).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].value, 86.1);
        assert_eq!(s[0].x.value, None);
        assert_eq!(s[0].line, 2);
        assert_eq!(s[0].better, Better::Higher);
    }

    #[test]
    fn wrong_column_count() {
        let (msg, line, p) = problem_at(samples(&format!("{GOOD}\nthroughput\tp2p\tx\n")));
        assert_eq!(line, 3);
        assert_eq!(
            p,
            Problem::Columns {
                expected: 9,
                found: 3
            }
        );
        assert!(
            msg.contains("samples.tsv") && msg.contains("line 3"),
            "{msg}"
        );
    }

    #[test]
    fn non_numeric_value() {
        let (msg, line, p) = problem_at(samples(&GOOD.replace("86.1", "fast")));
        assert_eq!((line, p), (2, Problem::Value("fast".into())));
        assert!(msg.contains("samples.tsv, line 2"), "{msg}");
        let (_, _, p) = problem_at(samples(&GOOD.replace("86.1", "NaN")));
        assert_eq!(p, Problem::Value("NaN".into()));
    }

    #[test]
    fn bad_run_number() {
        for run in ["0", "-1", "1.5", "one"] {
            let (msg, line, p) = problem_at(samples(&GOOD.replace("\t1\t", &format!("\t{run}\t"))));
            assert_eq!((line, p), (2, Problem::Run(run.into())));
            assert!(msg.contains("samples.tsv, line 2"), "{msg}");
        }
    }

    #[test]
    fn unknown_better() {
        let (msg, line, p) = problem_at(samples(&GOOD.replace("higher", "more")));
        assert_eq!((line, p), (2, Problem::Better("more".into())));
        assert!(msg.contains("samples.tsv, line 2"), "{msg}");
    }

    #[test]
    fn bad_x_and_header() {
        let (_, _, p) = problem_at(samples(&GOOD.replace("\t-\t", "\tbig\t")));
        assert_eq!(p, Problem::X("big".into()));
        let r = parse_samples(Path::new("d/samples.tsv"), "section\tcase\n");
        let (msg, line, p) = problem_at(r);
        assert_eq!(line, 1);
        assert!(matches!(p, Problem::Header { .. }));
        assert!(msg.contains("samples.tsv, line 1"), "{msg}");
        let (_, line, p) = problem_at(parse_samples(Path::new("s.tsv"), ""));
        assert_eq!(line, 1);
        assert!(matches!(p, Problem::NoHeader { .. }));
    }

    #[test]
    fn inconsistent_unit() {
        let second = GOOD
            .replace("\tMpps\t", "\tkpps\t")
            .replace("\t1\t", "\t2\t");
        let (msg, line, p) = problem_at(samples(&format!("{GOOD}\n{second}")));
        assert_eq!(line, 3);
        assert!(matches!(p, Problem::Inconsistent { first_line: 2, .. }));
        assert!(msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn failures_and_pairs() {
        let f = Path::new("d/failures.tsv");
        let r = parse_failures(f, &format!("{FAILURES_HEADER}\nnic\tc\ts\n"));
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("failures.tsv, line 2") && e.contains("found 3"),
            "{e}"
        );
        let ok = parse_failures(f, &format!("{FAILURES_HEADER}\nnic\tc\ts\tno link\n")).unwrap();
        assert_eq!(ok[0].reason, "no link");

        let m = Path::new("d/meta.tsv");
        let e = parse_pairs(m, "cores\t2\nkernel 6.1\n", "key")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("meta.tsv, line 2") && e.contains("no tab"),
            "{e}"
        );
        let ok = parse_pairs(m, "cores\t2\r\nqemu\t\n", "key").unwrap();
        assert_eq!(
            ok,
            vec![("cores".into(), "2".into()), ("qemu".into(), "".into())]
        );
    }
}
