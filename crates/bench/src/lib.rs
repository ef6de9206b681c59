//! ringswitch-bench: ringswitch's benchmarks. `compare` is a whole run
//! ([`compare`]: the machine's facts, the sections, the notes, the
//! report; bench/compare and bench/run.sh only install and build before
//! it); `run` measures sections (starts the daemon and pkt-gen, reads
//! their reports, computes the figures) and writes the samples of a run
//! ([`run`], [`pktgen`], [`figures`], [`write`], with its parameters from
//! a data file, [`params`]); `report` turns the raw data of a run into a
//! Markdown report (`REPORT.md`) and SVG plots (`plots/*.svg`). Nothing in
//! the report is typed in by hand: every figure comes from the data files.
//!
//! # Modules, in the order they import each other
//! `text`, `error` ← `input`, `params`, `pktgen`, `figures` ← `write`,
//! `model` ← `report`, `plot` (on `svg`) ← `run` (on `write`, `pktgen`,
//! `figures`, `params`) ← `compare` (a whole run: `run`'s sections, the
//! machine's facts, the notes, then `report`).
//!
//! # Input: a directory with
//! - `meta.tsv`: `key<TAB>value` lines, no header (date, command, mode,
//!   runs, elapsed_s, host, kernel, cpu_model, cores, memory, rustc, commit,
//!   ringswitch, dpdk, ovs, qemu, load_start, load_end, busy_start; any may
//!   be missing, unknown keys are shown after the known ones);
//! - `samples.tsv`: the header
//!   `section case system metric unit better x run value` (tab-separated),
//!   then one line per measured sample; `better` is `higher`, `lower` or
//!   `-`; `x` is `-` or a number (batch size, offered load in %); `run`
//!   counts from 1;
//! - `failures.tsv` (optional): the header `section case system reason`,
//!   then one line per measurement that failed;
//! - `notes.tsv` (optional): `section<TAB>markdown` lines telling how a
//!   section was measured.
//! - `targets.tsv` (optional; `compare` copies `bench/targets.tsv`):
//!   the header `section case system metric op target source`, then one
//!   target per line; `op` is `>=`, `>`, `<=` or `<`. The report's Targets
//!   table judges the median of each target's plain (`x` `-`) samples.
//!
//! Malformed input is an [`Error::Malformed`] naming the file, the line and
//! the problem; nothing on input panics.
//!
//! # Figures
//! Samples are grouped by (section, case, system, metric, x); a group's
//! figure is the median over its runs (mean of the two middle ones for an
//! even count) with min, max and n ([`model`]). Systems whose name starts
//! with `ringswitch` are ringswitch; all others are peers. Ratios are
//! ringswitch ÷ peer of the medians, read in the metric's sense of better.
//!
//! # Plots
//! The sections `batch` and `load` are drawn as SVG line plots ([`plot`]),
//! written by the small hand-rolled writer in [`svg`] rather than with the
//! `plotters` crate: without its font features (which load system fonts
//! or a font file) plotters lays text out with crude size estimates, and it
//! would bring a dependency tree for what takes a few hundred lines here.
//! The own writer escapes every text in one place and gives byte-identical
//! output for the same input.
#![warn(missing_docs)]
// System calls only in `run::procs` and `run::signals`, which allow it.
#![deny(unsafe_code)]

pub mod compare;
pub mod error;
pub mod figures;
pub mod input;
pub mod model;
pub mod params;
pub mod pktgen;
pub mod plot;
pub mod report;
pub mod run;
pub mod svg;
pub mod text;
pub mod write;

use std::path::{Path, PathBuf};

pub use error::{Error, Problem};
pub use input::{read_dir, Data};
pub use report::{render, Output};

/// Reads the data in `data_dir` and writes `REPORT.md` and `plots/*.svg`
/// into `out_dir` (created if needed); returns the path of `REPORT.md`.
pub fn run(data_dir: &Path, out_dir: &Path) -> Result<PathBuf, Error> {
    let data = read_dir(data_dir)?;
    let output = render(&data);
    write(out_dir, &output)
}

/// Writes a rendered report into `out_dir`; returns the path of `REPORT.md`.
pub fn write(out_dir: &Path, output: &Output) -> Result<PathBuf, Error> {
    let plots_dir = out_dir.join("plots");
    let mkdir = |d: &Path| {
        std::fs::create_dir_all(d).map_err(|source| Error::Write {
            path: d.to_path_buf(),
            source,
        })
    };
    mkdir(out_dir)?;
    if !output.plots.is_empty() {
        mkdir(&plots_dir)?;
    }
    let put = |path: PathBuf, text: &str| {
        std::fs::write(&path, text).map_err(|source| Error::Write { path, source })
    };
    for (name, svg) in &output.plots {
        put(plots_dir.join(name), svg)?;
    }
    let report = out_dir.join("REPORT.md");
    put(report.clone(), &output.markdown)?;
    Ok(report)
}
