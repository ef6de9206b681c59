//! Writing a run's data files (`meta.tsv`, `samples.tsv`, `failures.tsv`,
//! `notes.tsv`; formats in the crate documentation): the other side of
//! [`crate::input`]. Lines are appended, so several writers (`compare`'s
//! metadata and notes, `run`'s sections, one `run` after another) can
//! fill one directory in turn.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::input::{FAILURES_HEADER, SAMPLES_HEADER};

/// What one sample is of: everything in a `samples.tsv` line but the run
/// and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Key<'a> {
    /// Section id.
    pub section: &'a str,
    /// What is compared.
    pub case: &'a str,
    /// Who was measured.
    pub system: &'a str,
    /// What was measured.
    pub metric: &'a str,
    /// Its unit.
    pub unit: &'a str,
    /// `higher`, `lower` or `-`.
    pub better: &'a str,
    /// `-` or a number (batch size, offered load).
    pub x: &'a str,
}

impl<'a> Key<'a> {
    /// A throughput figure: received Mpps.
    pub fn received(section: &'a str, case: &'a str, system: &'a str, x: &'a str) -> Key<'a> {
        Key {
            section,
            case,
            system,
            metric: "received",
            unit: "Mpps",
            better: "higher",
            x,
        }
    }
}

/// The data directory of a run.
pub struct DataDir {
    dir: PathBuf,
}

/// One line of a TSV file: tabs and newlines inside fields become spaces.
pub fn tsv_line(fields: &[&str]) -> String {
    let cleaned: Vec<String> = fields
        .iter()
        .map(|f| f.replace(['\t', '\n'], " "))
        .collect();
    cleaned.join("\t") + "\n"
}

/// Whether `s` is a decimal number: `-?DIGITS(.DIGITS)?([eE][-+]?DIGITS)?`.
pub fn is_num(s: &str) -> bool {
    fn digits(s: &str) -> usize {
        s.bytes().take_while(u8::is_ascii_digit).count()
    }
    let s = s.strip_prefix('-').unwrap_or(s);
    let n = digits(s);
    if n == 0 {
        return false;
    }
    let mut rest = &s[n..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = digits(frac);
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    if let Some(exp) = rest.strip_prefix(['e', 'E']) {
        let exp = exp.strip_prefix(['-', '+']).unwrap_or(exp);
        let n = digits(exp);
        return n > 0 && n == exp.len();
    }
    rest.is_empty()
}

impl DataDir {
    /// Creates `dir` with empty data files and their headers.
    pub fn create(dir: &Path) -> Result<DataDir, Error> {
        let d = DataDir::open(dir)?;
        d.put("meta.tsv", "", false)?;
        d.put("samples.tsv", &format!("{SAMPLES_HEADER}\n"), false)?;
        d.put("failures.tsv", &format!("{FAILURES_HEADER}\n"), false)?;
        d.put("notes.tsv", "", false)?;
        Ok(d)
    }

    /// An existing data directory (created empty if missing), appended to.
    pub fn open(dir: &Path) -> Result<DataDir, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let d = DataDir {
            dir: dir.to_path_buf(),
        };
        for (file, header) in [
            ("samples.tsv", SAMPLES_HEADER),
            ("failures.tsv", FAILURES_HEADER),
        ] {
            if !d.dir.join(file).exists() {
                d.put(file, &format!("{header}\n"), false)?;
            }
        }
        Ok(d)
    }

    fn put(&self, file: &str, text: &str, append: bool) -> Result<(), Error> {
        let path = self.dir.join(file);
        let w = OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        w.map_err(|source| Error::Write { path, source })
    }

    /// A `meta.tsv` line.
    pub fn meta(&self, key: &str, value: &str) -> Result<(), Error> {
        self.put("meta.tsv", &tsv_line(&[key, value]), true)
    }

    /// A `notes.tsv` line.
    pub fn note(&self, section: &str, markdown: &str) -> Result<(), Error> {
        self.put("notes.tsv", &tsv_line(&[section, markdown]), true)
    }

    /// A `samples.tsv` line; a value that is not a number becomes a
    /// failure line instead (`METRIC run RUN: no figure ('VALUE')`).
    /// Returns whether it was a sample.
    pub fn sample(&self, k: &Key<'_>, run: u32, value: &str) -> Result<bool, Error> {
        if !is_num(value) {
            let reason = format!("{} run {run}: no figure ('{value}')", k.metric);
            self.miss(k.section, k.case, k.system, &reason)?;
            return Ok(false);
        }
        let run = run.to_string();
        let line = tsv_line(&[
            k.section, k.case, k.system, k.metric, k.unit, k.better, k.x, &run, value,
        ]);
        self.put("samples.tsv", &line, true)?;
        Ok(true)
    }

    /// The values of the plain (x `-`) samples written so far for one
    /// metric of one system in one case.
    pub fn values(
        &self,
        section: &str,
        case: &str,
        system: &str,
        metric: &str,
    ) -> Result<Vec<f64>, Error> {
        let data = crate::input::read_dir(&self.dir)?;
        let values = data.plain(section, case, system, metric).map(|s| s.value);
        Ok(values.collect())
    }

    /// A `failures.tsv` line.
    pub fn miss(&self, section: &str, case: &str, system: &str, reason: &str) -> Result<(), Error> {
        self.put(
            "failures.tsv",
            &tsv_line(&[section, case, system, reason]),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        for n in ["1", "0.5", "-3", "86.123", "1e6", "2.5E-3"] {
            assert!(is_num(n), "{n}");
        }
        for n in [
            "", "x", "inf", "NaN", "+1", "1.2.3", "failed", "1.", ".5", "1e",
        ] {
            assert!(!is_num(n), "{n}");
        }
    }

    #[test]
    fn fields_lose_tabs_and_newlines() {
        assert_eq!(tsv_line(&["a\tb", "c\nd", "e"]), "a b\tc d\te\n");
    }

    #[test]
    fn written_lines_read_back() {
        let d = std::env::temp_dir().join(format!("rs-bench-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let w = DataDir::create(&d).unwrap();
        let k = Key {
            section: "throughput",
            case: "process to process, 60 B",
            system: "ringswitch pipe",
            metric: "received",
            unit: "Mpps",
            better: "higher",
            x: "-",
        };
        assert!(w.sample(&k, 1, "86.123").unwrap());
        assert!(!w.sample(&k, 2, "").unwrap());
        w.meta("mode", "quick").unwrap();
        w.note("throughput", "how").unwrap();
        // A second writer appends.
        let w2 = DataDir::open(&d).unwrap();
        w2.miss("switch", "c", "s", "why").unwrap();
        let data = crate::input::read_dir(&d).unwrap();
        assert_eq!(data.samples.len(), 1);
        assert_eq!(data.samples[0].value, 86.123);
        assert_eq!(data.failures.len(), 2);
        assert_eq!(data.failures[0].reason, "received run 2: no figure ('')");
        assert_eq!(data.failures[1].reason, "why");
        assert_eq!(data.meta, vec![("mode".into(), "quick".into())]);
        assert_eq!(data.notes.len(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }
}
