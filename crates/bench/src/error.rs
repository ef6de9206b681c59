//! What can go wrong: a file that cannot be read or written, or a line of
//! the data that does not follow the format.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// An error of the report generator.
#[derive(Debug, Error)]
pub enum Error {
    /// A data file could not be read.
    #[error("could not read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The report or a plot could not be written.
    #[error("could not write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A line of a data file is malformed.
    #[error("{}, line {line}: {problem}", file.display())]
    Malformed {
        /// The data file.
        file: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: Box<Problem>,
    },
    /// The parameters file is malformed or lacks a parameter (line 0: the
    /// whole file).
    #[error("{}, line {line}: {problem}", file.display())]
    Params {
        /// The parameters file.
        file: PathBuf,
        /// The line number, from 1; 0 for the whole file.
        line: usize,
        /// What is wrong.
        problem: String,
    },
}

/// What is wrong with a line of a data file.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Problem {
    /// The file is empty where a header line was expected.
    #[error("the file is empty, but it should start with the header `{expected}`")]
    NoHeader {
        /// The header the file should start with.
        expected: &'static str,
    },
    /// The header line is not the expected one.
    #[error("the header should be `{expected}`, but it is `{found}`")]
    Header {
        /// The header the file should start with.
        expected: &'static str,
        /// What the file has.
        found: String,
    },
    /// A line has the wrong number of tab-separated columns.
    #[error("expected {expected} tab-separated columns, found {found}")]
    Columns {
        /// How many columns the file has.
        expected: usize,
        /// How many this line has.
        found: usize,
    },
    /// A `key<TAB>value` line without its tab.
    #[error("expected a {what} and a text separated by a tab, found no tab")]
    NoTab {
        /// What comes before the tab (key, section).
        what: &'static str,
    },
    /// A column that must not be empty is.
    #[error("the {0} column is empty")]
    Empty(&'static str),
    /// The value is not a finite decimal number.
    #[error("the value `{0}` is not a number")]
    Value(String),
    /// The x column is neither `-` nor a number.
    #[error("the x `{0}` is neither `-` nor a number")]
    X(String),
    /// The run number is not a whole number from 1 up.
    #[error("the run number `{0}` is not a whole number from 1 up")]
    Run(String),
    /// The op column of a target is not one of `>=`, `>`, `<=`, `<`.
    #[error("the comparison is `{0}`, but it should be `>=`, `>`, `<=` or `<`")]
    Op(String),
    /// The better column is not one of its three words.
    #[error("better is `{0}`, but it should be `higher`, `lower` or `-`")]
    Better(String),
    /// A metric has another unit or sense of better than on an earlier line.
    #[error(
        "metric `{metric}` of case `{case}` has unit `{unit}` and better `{better}` here, \
         but `{first_unit}` and `{first_better}` on line {first_line}"
    )]
    Inconsistent {
        /// The case.
        case: String,
        /// The metric.
        metric: String,
        /// Its unit on this line.
        unit: String,
        /// Its better on this line.
        better: String,
        /// Its unit on the first line.
        first_unit: String,
        /// Its better on the first line.
        first_better: String,
        /// The first line that has it.
        first_line: usize,
    },
}
