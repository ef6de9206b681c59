//! The parameters of a run, from a data file (`bench/params.tsv`): one
//! `name<TAB>quick<TAB>full<TAB>what` line per parameter, `#` comments.
//! A value is a whole number or a comma-separated list of them.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The parameters for one mode (quick or full).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    file: PathBuf,
    values: Vec<(String, Vec<u64>)>,
}

/// Which column of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `--quick`: a first look.
    Quick,
    /// The full run.
    Full,
}

impl Params {
    /// Reads `path` for `mode`.
    pub fn read(path: &Path, mode: Mode) -> Result<Params, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Params::parse(path, &text, mode)
    }

    /// Parses the text of a params file (named `path` in errors).
    pub fn parse(path: &Path, text: &str, mode: Mode) -> Result<Params, Error> {
        let bad = |line: usize, problem: String| Error::Params {
            file: path.to_path_buf(),
            line,
            problem,
        };
        let mut values = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let cols: Vec<&str> = line.split('\t').collect();
            if cols.len() < 3 {
                return Err(bad(
                    i + 1,
                    format!(
                        "expected name, quick and full separated by tabs, found {} columns",
                        cols.len()
                    ),
                ));
            }
            let text = if mode == Mode::Quick {
                cols[1]
            } else {
                cols[2]
            };
            let list: Result<Vec<u64>, _> =
                text.split(',').map(|v| v.trim().parse::<u64>()).collect();
            let list = list.map_err(|_| {
                bad(
                    i + 1,
                    format!("`{text}` is not a whole number or a comma-separated list of them"),
                )
            })?;
            values.push((cols[0].to_owned(), list));
        }
        Ok(Params {
            file: path.to_path_buf(),
            values,
        })
    }

    /// The list `name`.
    pub fn list(&self, name: &str) -> Result<&[u64], Error> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
            .ok_or_else(|| Error::Params {
                file: self.file.clone(),
                line: 0,
                problem: format!("there is no parameter `{name}`"),
            })
    }

    /// The single number `name`.
    pub fn one(&self, name: &str) -> Result<u64, Error> {
        match self.list(name)? {
            [v] => Ok(*v),
            _ => Err(Error::Params {
                file: self.file.clone(),
                line: 0,
                problem: format!("`{name}` should be one number, not a list"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_file_has_every_parameter() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/params.tsv");
        for mode in [Mode::Quick, Mode::Full] {
            let p = Params::read(&path, mode).unwrap();
            for n in ["runs", "secs", "burst", "ping_n", "batch_secs"] {
                assert!(p.one(n).unwrap() > 0, "{n}");
            }
            assert!(!p.list("batches").unwrap().is_empty());
            assert_eq!(p.list("sizes").unwrap(), [60, 1514]);
        }
    }

    #[test]
    fn columns_and_errors() {
        let f = Path::new("p.tsv");
        let p = Params::parse(f, "# c\nsecs\t1\t3\tx\nb\t1,8\t1,2,4\n", Mode::Full).unwrap();
        assert_eq!(p.one("secs").unwrap(), 3);
        assert_eq!(p.list("b").unwrap(), [1, 2, 4]);
        assert!(p.one("b").is_err());
        let e = p.one("nope").unwrap_err().to_string();
        assert!(e.contains("no parameter `nope`"), "{e}");
        let e = Params::parse(f, "secs\t1\n", Mode::Quick)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("p.tsv, line 1") && e.contains("2 columns"),
            "{e}"
        );
        let e = Params::parse(f, "secs\tx\t1\n", Mode::Quick)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`x` is not a whole number"), "{e}");
    }
}
