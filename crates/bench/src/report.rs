//! The Markdown report (and the plots it embeds) from the data of a run.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::input::{Better, Data, Sample, Target};
use crate::model::{self, is_ringswitch, Figure, Metric, PlotMetric, Section};
use crate::plot::{self, Line, Plot, XScale};
use crate::text::{cell, num, short, slug};

/// A rendered report.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// `REPORT.md`.
    pub markdown: String,
    /// The plots: (file name inside `plots/`, SVG document).
    pub plots: Vec<(String, String)>,
}

/// `median (min–max, n=3)`, or `median (n=1)` for a single run.
pub fn figure(f: &Figure) -> String {
    if f.n > 1 {
        format!(
            "{} ({}–{}, n={})",
            num(f.median),
            num(f.min),
            num(f.max),
            f.n
        )
    } else {
        format!("{} (n={})", num(f.median), f.n)
    }
}

/// ringswitch ÷ peer of the medians, `None` when the peer's is zero.
pub fn ratio(rs: f64, peer: f64) -> Option<f64> {
    (peer != 0.0).then(|| rs / peer).filter(|r| r.is_finite())
}

/// `4.04×`, or `—`.
pub fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "—".to_string(), |r| format!("{}×", short(r)))
}

/// What the ratio means for ringswitch, in the metric's own sense of better:
/// `4.04× higher (better)`, `3.1× lower (better)`, `2× higher (worse)`.
pub fn verdict(rs: f64, peer: f64, better: Better) -> String {
    let Some(r) = ratio(rs, peer) else {
        return if rs == peer {
            "equal".to_string()
        } else {
            "— (the peer's figure is 0)".to_string()
        };
    };
    if r == 0.0 {
        return match better {
            Better::Higher => "zero (worse)".to_string(),
            Better::Lower => "zero (better)".to_string(),
            Better::Neither => "zero".to_string(),
        };
    }
    if r < 0.0 {
        return "of opposite sign".to_string();
    }
    let (factor, word) = if r >= 1.0 {
        (r, "higher")
    } else {
        (1.0 / r, "lower")
    };
    if short(factor) == "1" {
        return "about equal".to_string();
    }
    let judgement = match (better, r > 1.0) {
        (Better::Higher, true) | (Better::Lower, false) => " (better)",
        (Better::Higher, false) | (Better::Lower, true) => " (worse)",
        (Better::Neither, _) => "",
    };
    format!("{}× {word}{judgement}", short(factor))
}

/// `received Mpps, higher is better`, with the unit when the name lacks it.
fn metric_label(m: &Metric) -> String {
    let mut s = m.name.clone();
    if !m.unit.is_empty() && m.unit != "-" && !m.name.ends_with(&m.unit) {
        let _ = write!(s, " ({})", m.unit);
    }
    match m.better {
        Better::Higher => s.push_str(", higher is better"),
        Better::Lower => s.push_str(", lower is better"),
        Better::Neither => {}
    }
    s
}

fn get<'a>(data: &'a Data, key: &str) -> Option<&'a str> {
    data.meta
        .iter()
        .find(|(k, v)| k == key && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

const META_KEYS: &[&str] = &[
    "date",
    "command",
    "mode",
    "runs",
    "elapsed_s",
    "host",
    "kernel",
    "cpu_model",
    "cores",
    "memory",
    "rustc",
    "commit",
    "ringswitch",
    "dpdk",
    "ovs",
    "qemu",
    "load_start",
    "load_end",
    "busy_start",
];

fn meta(out: &mut String, data: &Data) {
    let joined = |parts: &[(&str, &str, &str)]| {
        parts
            .iter()
            .filter_map(|(key, label, suffix)| {
                get(data, key).map(|v| format!("{label}: {v}{suffix}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut item = |label: &str, text: String| {
        if !text.is_empty() {
            let _ = writeln!(out, "- **{label}**: {text}");
        }
    };
    item("date", get(data, "date").unwrap_or_default().to_string());
    item(
        "command",
        get(data, "command").map_or(String::new(), |c| {
            if c.contains('`') {
                c.to_string()
            } else {
                format!("`{c}`")
            }
        }),
    );
    item(
        "run",
        joined(&[
            ("mode", "mode", ""),
            ("runs", "runs per path", ""),
            ("elapsed_s", "elapsed", " s"),
        ]),
    );
    item(
        "machine",
        joined(&[
            ("host", "host", ""),
            ("cpu_model", "CPU model", ""),
            ("cores", "cores", ""),
            ("memory", "memory", ""),
        ]),
    );
    item(
        "kernel",
        get(data, "kernel").unwrap_or_default().to_string(),
    );
    item(
        "versions",
        joined(&[
            ("ringswitch", "ringswitch", ""),
            ("rustc", "rustc", ""),
            ("commit", "commit", ""),
            ("dpdk", "DPDK", ""),
            ("ovs", "OVS", ""),
            ("qemu", "QEMU", ""),
        ]),
    );
    item(
        "machine load",
        joined(&[
            ("load_start", "load average at the start", ""),
            ("load_end", "at the end", ""),
            ("busy_start", "CPU busy at the start", ""),
        ]),
    );
    let mut seen = HashSet::new();
    for (k, v) in &data.meta {
        if !META_KEYS.contains(&k.as_str()) && !v.is_empty() && seen.insert(k.as_str()) {
            item(k, v.clone());
        }
    }
}

/// The best figure by the metric's sense of better (the first on ties).
fn best<'a>(systems: &[&'a (String, Figure)], better: Better) -> Option<&'a (String, Figure)> {
    let mut it = systems.iter().copied();
    let first = it.next()?;
    Some(it.fold(first, |b, s| {
        if better.prefers(s.1.median, b.1.median) {
            s
        } else {
            b
        }
    }))
}

fn headline(out: &mut String, sections: &[Section]) {
    let _ = writeln!(out, "## Headline\n");
    let mut rows = Vec::new();
    for s in sections.iter().filter(|s| !s.is_sweep()) {
        for case in &s.tables {
            for m in &case.metrics {
                if m.metric.better == Better::Neither {
                    continue;
                }
                let (rs, peers): (Vec<_>, Vec<_>) =
                    m.systems.iter().partition(|(sys, _)| is_ringswitch(sys));
                let (Some(r), Some(p)) =
                    (best(&rs, m.metric.better), best(&peers, m.metric.better))
                else {
                    continue;
                };
                rows.push(format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    cell(model::title(&s.id)),
                    cell(&case.label),
                    cell(&metric_label(&m.metric)),
                    cell(&r.0),
                    num(r.1.median),
                    cell(&p.0),
                    num(p.1.median),
                    ratio_text(ratio(r.1.median, p.1.median)),
                    verdict(r.1.median, p.1.median, m.metric.better),
                ));
            }
        }
    }
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "No case has figures for both a ringswitch system and a peer.\n"
        );
        return;
    }
    let _ = writeln!(
        out,
        "For each case and metric measured on both sides: the best ringswitch system \
         against the best peer (medians of the runs). The ratio is always ringswitch ÷ peer; \
         \"ringswitch is\" reads it in the metric's own sense of better, so a case where \
         ringswitch loses says \"(worse)\".\n"
    );
    let _ = writeln!(
        out,
        "| section | case | metric | ringswitch | figure | best peer | figure | ringswitch ÷ peer | ringswitch is |"
    );
    let _ = writeln!(out, "|---|---|---|---|---:|---|---:|---:|---|");
    for r in rows {
        let _ = writeln!(out, "{r}");
    }
    out.push('\n');
}

fn section_table(out: &mut String, s: &Section) {
    if s.tables.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "| case | metric | ringswitch | figure | peer | figure | ringswitch ÷ peer | ringswitch is |"
    );
    let _ = writeln!(out, "|---|---|---|---:|---|---:|---:|---|");
    for case in &s.tables {
        for m in &case.metrics {
            let label = metric_label(&m.metric);
            let (rs, peers): (Vec<_>, Vec<_>) =
                m.systems.iter().partition(|(sys, _)| is_ringswitch(sys));
            let mut row = |r: Option<&(String, Figure)>, p: Option<&(String, Figure)>| {
                let side = |x: Option<&(String, Figure)>| {
                    x.map_or(("—".to_string(), "—".to_string()), |(n, f)| {
                        (cell(n), figure(f))
                    })
                };
                let (rn, rf) = side(r);
                let (pn, pf) = side(p);
                let (q, v) = match (r, p) {
                    (Some(r), Some(p)) => (
                        ratio_text(ratio(r.1.median, p.1.median)),
                        verdict(r.1.median, p.1.median, m.metric.better),
                    ),
                    _ => ("—".to_string(), "—".to_string()),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {rn} | {rf} | {pn} | {pf} | {q} | {v} |",
                    cell(&case.label),
                    cell(&label)
                );
            };
            match (rs.is_empty(), peers.is_empty()) {
                (false, false) => {
                    for r in &rs {
                        for p in &peers {
                            row(Some(r), Some(p));
                        }
                    }
                }
                (false, true) => rs.iter().for_each(|r| row(Some(r), None)),
                _ => peers.iter().for_each(|p| row(None, Some(p))),
            }
        }
    }
    out.push('\n');
}

fn axis_titles(section: &str) -> (&'static str, &'static str, XScale) {
    match section {
        "batch" => ("batch size (packets per sync)", "batch size", XScale::Log2),
        "load" => (
            "offered load (% of the path's maximum)",
            "offered load (%)",
            XScale::Linear {
                min: 0.0,
                max: 100.0,
            },
        ),
        _ => ("x", "x", XScale::Linear { min: 0.0, max: 0.0 }),
    }
}

fn sweep_plot(
    out: &mut String,
    plots: &mut Vec<(String, String)>,
    names: &mut HashSet<String>,
    section: &str,
    case: &str,
    m: &PlotMetric,
    several: bool,
) {
    let (x_title, x_head, x_scale) = axis_titles(section);
    let mut base = format!("{section}-{}", slug(case));
    if several {
        let _ = write!(base, "-{}", slug(&m.metric.name));
    }
    let mut file = format!("{base}.svg");
    let mut k = 2;
    while !names.insert(file.clone()) {
        file = format!("{base}-{k}.svg");
        k += 1;
    }
    let y_title = if m.metric.unit.is_empty() || m.metric.unit == "-" {
        m.metric.name.clone()
    } else {
        format!("{} ({})", m.metric.name, m.metric.unit)
    };
    let svg = plot::render(&Plot {
        title: case,
        x_title,
        y_title: &y_title,
        x_scale,
        lines: m
            .series
            .iter()
            .map(|s| Line {
                name: &s.system,
                ringswitch: is_ringswitch(&s.system),
                points: &s.points,
            })
            .collect(),
    });
    if several {
        let _ = writeln!(out, "### {case}: {}\n", m.metric.name);
    } else {
        let _ = writeln!(out, "### {case}\n");
    }
    let _ = writeln!(out, "![{}](plots/{file})\n", case.replace(['[', ']'], ""));
    let _ = writeln!(out, "Medians of {}:\n", metric_label(&m.metric));

    // The plotted medians: x down, systems across.
    let mut xs: Vec<f64> = m
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let _ = write!(out, "| {x_head} |");
    for s in &m.series {
        let _ = write!(out, " {} |", cell(&s.system));
    }
    let _ = write!(out, "\n|---:|");
    for _ in &m.series {
        out.push_str("---:|");
    }
    out.push('\n');
    for x in xs {
        let _ = write!(out, "| {} |", short(x));
        for s in &m.series {
            let v = s
                .points
                .iter()
                .find(|p| p.x == x)
                .map_or("—".to_string(), |p| num(p.fig.median));
            let _ = write!(out, " {v} |");
        }
        out.push('\n');
    }
    out.push('\n');
    plots.push((file, svg));
}

fn notes(out: &mut String, data: &Data, section: &str) {
    let mut any = false;
    for n in data.notes.iter().filter(|n| n.section == section) {
        let _ = writeln!(out, "- {}", n.text);
        any = true;
    }
    if any {
        out.push('\n');
    }
}

/// Whether a figure meets its target: `yes`, `no`, or `—` when it was not
/// measured.
pub fn meets(figure: Option<&Figure>, t: &Target) -> &'static str {
    match figure {
        Some(f) if t.op.meets(f.median, t.target) => "yes",
        Some(_) => "no",
        None => "—",
    }
}

/// The figure a target is about: the median of its plain (x `-`) samples,
/// and their unit.
pub fn target_figure(data: &Data, t: &Target) -> Option<(Figure, String)> {
    let samples: Vec<&Sample> = data
        .plain(&t.section, &t.case, &t.system, &t.metric)
        .collect();
    let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
    Some((Figure::of(&values)?, samples.first()?.unit.clone()))
}

/// The targets table (`targets.tsv`), if the run has targets.
fn targets(out: &mut String, data: &Data) {
    if data.targets.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Targets
"
    );
    let _ = writeln!(
        out,
        "| measurement | ringswitch | target | meets | source |"
    );
    let _ = writeln!(out, "|---|---:|---|---|---|");
    for t in &data.targets {
        let found = target_figure(data, t);
        let (fig, unit) = match &found {
            Some((f, unit)) => (figure(f), format!(" {unit}")),
            None => ("not measured".to_string(), String::new()),
        };
        let _ = writeln!(
            out,
            "| {}: {}, {}: {} | {} | {} {}{} | {} | {} |",
            cell(model::title(&t.section)),
            cell(&t.case),
            cell(&t.system),
            cell(&t.metric),
            cell(&fig),
            t.op,
            cell(&t.target_text),
            cell(&unit),
            meets(found.as_ref().map(|(f, _)| f), t),
            cell(&t.source)
        );
    }
    out.push('\n');
}

/// Renders the report of `data`.
pub fn render(data: &Data) -> Output {
    let sections = model::aggregate(&data.samples);
    let mut out = String::new();
    let mut plots = Vec::new();
    let mut names = HashSet::new();

    let _ = writeln!(out, "# ringswitch beside its peers\n");
    meta(&mut out, data);
    let _ = writeln!(
        out,
        "\nEvery figure below comes from the data files of this run: the median of the \
         runs, with the smallest and largest run and their number n in parentheses. \
         Systems whose name starts with \"ringswitch\" are ringswitch; the others are peers.\n"
    );
    if data.samples.is_empty() {
        let _ = writeln!(out, "No sample was recorded.\n");
    }
    headline(&mut out, &sections);
    targets(&mut out, data);

    for s in &sections {
        let _ = writeln!(out, "## {}\n", model::title(&s.id));
        section_table(&mut out, s);
        for case in &s.plots {
            let several = case.metrics.len() > 1;
            for m in &case.metrics {
                sweep_plot(
                    &mut out, &mut plots, &mut names, &s.id, &case.case, m, several,
                );
            }
        }
        notes(&mut out, data, &s.id);
    }

    let _ = writeln!(out, "## Failures\n");
    if data.failures.is_empty() {
        let _ = writeln!(out, "none\n");
    } else {
        let _ = writeln!(out, "| section | case | system | reason |");
        let _ = writeln!(out, "|---|---|---|---|");
        for f in &data.failures {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(model::title(&f.section)),
                cell(&f.case),
                cell(&f.system),
                cell(&f.reason)
            );
        }
        out.push('\n');
    }

    // Notes of sections without figures.
    let mut rest: Vec<&str> = Vec::new();
    for n in &data.notes {
        if !sections.iter().any(|s| s.id == n.section) && !rest.contains(&n.section.as_str()) {
            rest.push(&n.section);
        }
    }
    if !rest.is_empty() {
        let _ = writeln!(out, "## Notes\n");
        for id in rest {
            let _ = writeln!(out, "### {}\n", model::title(id));
            notes(&mut out, data, id);
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    Output {
        markdown: out,
        plots,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(verdict(86.1, 21.3, Better::Higher), "4.04× higher (better)");
        assert_eq!(verdict(10.0, 20.0, Better::Higher), "2× lower (worse)");
        assert_eq!(verdict(0.1, 0.31, Better::Lower), "3.1× lower (better)");
        assert_eq!(
            verdict(9870.0, 4310.0, Better::Lower),
            "2.29× higher (worse)"
        );
        assert_eq!(verdict(5.0, 5.001, Better::Lower), "about equal");
        assert_eq!(
            verdict(1.0, 0.0, Better::Higher),
            "— (the peer's figure is 0)"
        );
        assert_eq!(ratio_text(ratio(86.1, 21.3)), "4.04×");
        assert_eq!(ratio_text(ratio(1.0, 0.0)), "—");
    }

    #[test]
    fn figures() {
        let f = Figure {
            median: 86.14,
            min: 85.4,
            max: 86.93,
            n: 3,
        };
        assert_eq!(figure(&f), "86.1 (85.4–86.9, n=3)");
        assert_eq!(figure(&Figure { n: 1, ..f }), "86.1 (n=1)");
    }

    fn data(samples: &str, notes: &[(&str, &str)]) -> Data {
        let text = format!("{}\n{samples}", crate::input::SAMPLES_HEADER);
        Data {
            samples: crate::input::parse_samples(std::path::Path::new("samples.tsv"), &text)
                .unwrap(),
            notes: notes
                .iter()
                .map(|(s, t)| crate::input::Note {
                    section: s.to_string(),
                    text: t.to_string(),
                })
                .collect(),
            ..Data::default()
        }
    }

    #[test]
    fn empty_data() {
        let out = render(&data("", &[("general", "Nothing ran.")]));
        assert!(out.markdown.starts_with("# ringswitch beside its peers\n"));
        assert!(out.markdown.contains("No sample was recorded."));
        assert!(out.markdown.contains("No case has figures for both"));
        assert!(out.markdown.contains("## Failures\n\nnone"));
        assert!(out
            .markdown
            .contains("## Notes\n\n### general\n\n- Nothing ran."));
        assert!(out.plots.is_empty());
    }

    #[test]
    fn unknown_sections_peers_only_and_pipes() {
        let out = render(&data(
            "mystery\tc|d\tpeer|x\tm\tu\thigher\t-\t1\t2\n\
             throughput\tp2p\tringswitch pipe\tMpps\tMpps\thigher\t-\t1\t80\n\
             throughput\tonly peers\tDPDK memif\tMpps\tMpps\thigher\t-\t1\t20\n\
             batch\tb\tringswitch pipe\tMpps\tMpps\thigher\t-\t1\t5\n",
            &[],
        ));
        let md = &out.markdown;
        assert!(md.find("## Throughput").unwrap() < md.find("## mystery").unwrap());
        assert!(md.contains(
            "| c\\|d | m (u), higher is better | — | — | peer\\|x | 2.00 (n=1) | — | — |"
        ));
        assert!(md
            .contains("| only peers | Mpps, higher is better | — | — | DPDK memif | 20.0 (n=1) |"));
        // A batch sample without x is a table row, not a plot.
        assert!(out.plots.is_empty());
        assert!(md.contains("| b | Mpps, higher is better | ringswitch pipe | 5.00 (n=1) |"));
        assert!(md.contains("No case has figures for both"));
    }
}
