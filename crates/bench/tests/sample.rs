//! The report of the recorded-style sample run in
//! `bench/testdata/compare-sample`: every figure from the data, every system
//! named, a plot per sweep case, the failure and the meta present.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ringswitch_bench::report::figure;
use ringswitch_bench::text::{num, short, slug, xml};

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/testdata/compare-sample")
}

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-report-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn report_of(data: &Path, out: &Path) -> String {
    let path = ringswitch_bench::run(data, out).unwrap();
    assert_eq!(path, out.join("REPORT.md"));
    std::fs::read_to_string(path).unwrap()
}

/// One line of samples.tsv, read here independently of the library.
struct Row {
    section: String,
    case: String,
    system: String,
    metric: String,
    x: String,
    value: f64,
}

fn rows(data: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(data.join("samples.tsv")).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            assert_eq!(c.len(), 9, "{l}");
            Row {
                section: c[0].into(),
                case: c[1].into(),
                system: c[2].into(),
                metric: c[3].into(),
                x: c[6].into(),
                value: c[8].parse().unwrap(),
            }
        })
        .collect()
}

/// (median, min, max, n) of the rows matching, computed here.
fn stats(
    rows: &[Row],
    section: &str,
    case: &str,
    system: &str,
    metric: &str,
    x: &str,
) -> (f64, f64, f64, usize) {
    let mut v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            r.section == section
                && r.case == case
                && r.system == system
                && r.metric == metric
                && r.x == x
        })
        .map(|r| r.value)
        .collect();
    assert!(
        !v.is_empty(),
        "no samples for {section}/{case}/{system}/{metric}/{x}"
    );
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1], n)
}

fn fig_text(s: (f64, f64, f64, usize)) -> String {
    assert_eq!(s.3, 3, "the sample data has 3 runs per figure");
    format!("{} ({}–{}, n={})", num(s.0), num(s.1), num(s.2), s.3)
}

#[test]
fn chosen_figures_are_recomputed_from_the_samples() {
    let data = sample_dir();
    let report = report_of(&data, &scratch("chosen"));
    let r = rows(&data);
    let groups = [
        (
            "throughput",
            "process to process, 60 B",
            "ringswitch pipe",
            "received Mpps",
        ),
        (
            "throughput",
            "process to process, 60 B",
            "DPDK memif (testpmd)",
            "received Mpps",
        ),
        (
            "switch",
            "2 ports, 60 B",
            "OVS-DPDK (memif ports)",
            "received Mpps",
        ),
        (
            "switch",
            "2 ports, 60 B",
            "Linux bridge + veth, AF_PACKET",
            "received Mpps",
        ),
        (
            "vm",
            "virtio_user to virtio_user, 60 B",
            "OVS-DPDK, default",
            "received Mpps",
        ),
        ("latency", "ping-pong, 60 B", "ringswitch VALE", "RTT p99"),
        (
            "latency",
            "ping-pong, 60 B",
            "Linux bridge + veth, kernel ping",
            "RTT p50",
        ),
        (
            "efficiency",
            "2 ports, 60 B",
            "ringswitch VALE",
            "CPU s per Mpkt",
        ),
        ("idle", "4 clients idle, 10 s", "OVS-DPDK, default", "CPU"),
    ];
    for (section, case, system, metric) in groups {
        let s = stats(&r, section, case, system, metric, "-");
        let text = fig_text(s);
        assert!(
            report.contains(&format!("| {system} | {text} |")),
            "{section}/{case}/{system}/{metric}: `{text}` not in the report"
        );
    }
    // A ratio, recomputed: ringswitch pipe ÷ memif at 60 B.
    let rs = stats(
        &r,
        "throughput",
        "process to process, 60 B",
        "ringswitch pipe",
        "received Mpps",
        "-",
    )
    .0;
    let memif = stats(
        &r,
        "throughput",
        "process to process, 60 B",
        "DPDK memif (testpmd)",
        "received Mpps",
        "-",
    )
    .0;
    let ratio = format!("{}×", short(rs / memif));
    assert!(
        report.contains(&format!("| {ratio} | {ratio} higher (better) |")),
        "{ratio}"
    );
    // A case where ringswitch loses is said so.
    let vale = stats(
        &r,
        "latency",
        "ping-pong, 60 B",
        "ringswitch VALE",
        "RTT p99",
        "-",
    )
    .0;
    let memif = stats(
        &r,
        "latency",
        "ping-pong, 60 B",
        "DPDK memif (testpmd)",
        "RTT p99",
        "-",
    )
    .0;
    assert!(vale > memif);
    assert!(report.contains(&format!("{}× higher (worse)", short(vale / memif))));
}

#[test]
fn every_table_figure_and_plotted_median_is_in_the_report() {
    let data = sample_dir();
    let report = report_of(&data, &scratch("every"));
    let r = rows(&data);
    let mut groups = BTreeSet::new();
    for row in &r {
        groups.insert((
            row.section.clone(),
            row.case.clone(),
            row.system.clone(),
            row.metric.clone(),
            row.x.clone(),
        ));
    }
    for (section, case, system, metric, x) in &groups {
        let s = stats(&r, section, case, system, metric, x);
        if x == "-" {
            let text = fig_text(s);
            assert!(
                report.contains(&text),
                "{section}/{case}/{system}/{metric}: `{text}`"
            );
        } else {
            // In the medians table under the plot: the row of x, the column
            // of the system.
            let start = report.find(&format!("### {case}")).unwrap();
            let table = &report[start..];
            let header = table
                .lines()
                .find(|l| l.starts_with("| batch size |") || l.starts_with("| offered load"))
                .unwrap();
            let col = header
                .split(" | ")
                .position(|c| c.trim_matches(['|', ' ']) == system.as_str())
                .unwrap();
            let line = table
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", short(x.parse().unwrap()))))
                .unwrap();
            let cell = line.split(" | ").nth(col).unwrap().trim_matches(['|', ' ']);
            assert_eq!(cell, num(s.0), "{section}/{case}/{system} at x = {x}");
        }
    }
    // Nothing typed in: the number of figures matches the groups.
    let plain = groups.iter().filter(|g| g.4 == "-").count();
    assert!(plain >= 30, "{plain}");
}

#[test]
fn a_changed_sample_changes_the_report() {
    let data = sample_dir();
    let copy = scratch("changed-data");
    for f in ["meta.tsv", "samples.tsv", "failures.tsv", "notes.tsv"] {
        std::fs::copy(data.join(f), copy.join(f)).unwrap();
    }
    let before = report_of(&copy, &scratch("changed-before"));
    let r = rows(&copy);
    let key = (
        "throughput",
        "process to process, 60 B",
        "ringswitch pipe",
        "received Mpps",
        "-",
    );
    let old = fig_text(stats(&r, key.0, key.1, key.2, key.3, key.4));
    assert!(before.contains(&old));

    // Raise run 1 to 99.9: it becomes the max, and the median moves.
    let text = std::fs::read_to_string(copy.join("samples.tsv")).unwrap();
    let prefix = format!("{}\t{}\t{}\t{}\t", key.0, key.1, key.2, key.3);
    let mut changed = 0;
    let new_text: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with(&prefix) && l.split('\t').nth(7) == Some("1") {
                changed += 1;
                let mut c: Vec<&str> = l.split('\t').collect();
                c[8] = "99.9";
                c.join("\t")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_eq!(changed, 1);
    std::fs::write(copy.join("samples.tsv"), new_text.join("\n") + "\n").unwrap();
    let after = report_of(&copy, &scratch("changed-after"));
    let new = fig_text(stats(&rows(&copy), key.0, key.1, key.2, key.3, key.4));
    assert_ne!(old, new);
    assert!(new.contains("–99.9, n=3)"), "{new}");
    assert!(
        after.contains(&new) && !after.contains(&old),
        "{new} / {old}"
    );
    assert_ne!(before, after);
}

#[test]
fn every_system_is_named() {
    let data = sample_dir();
    let report = report_of(&data, &scratch("systems"));
    let systems: BTreeSet<String> = rows(&data).into_iter().map(|r| r.system).collect();
    assert!(systems.len() >= 15, "{systems:?}");
    for s in &systems {
        assert!(report.contains(&format!("| {s} |")), "system `{s}` missing");
    }
    for title in [
        "## Throughput",
        "## Through a switch",
        "## VM-style clients: virtio_user",
        "## Passthrough vs vhost-user, TCG guest",
        "## NIC ports on a veth pair",
        "## Round-trip latency",
        "## CPU cost per packet",
        "## CPU use with all clients idle",
        "## Throughput against batch size",
        "## CPU use against offered load",
        "## Headline",
        "## Failures",
    ] {
        assert!(report.contains(&format!("{title}\n")), "{title}");
    }
    // Report order: headline, sections in the known order, failures last.
    let at = |s: &str| report.find(s).unwrap();
    assert!(at("## Headline") < at("## Throughput\n"));
    assert!(at("## Throughput\n") < at("## Through a switch"));
    assert!(at("## CPU use with all clients idle") < at("## Throughput against batch size"));
    assert!(at("## CPU use against offered load") < at("## Failures"));
}

/// Whether the text is XML-ish: tags balanced, no stray `<` or `&`.
fn balanced(svg: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find(['<', '&']) {
        let text = &rest[..i];
        if text.contains('>') {
            return Err(format!("stray > in {text:?}"));
        }
        rest = &rest[i..];
        if rest.starts_with('&') {
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| rest.starts_with(e));
            if !ok {
                return Err(format!("bare & at {:?}", &rest[..rest.len().min(20)]));
            }
            rest = &rest[1..];
            continue;
        }
        let end = rest.find('>').ok_or("unclosed tag")?;
        let tag = &rest[1..end];
        if tag.contains('<') {
            return Err(format!("< inside tag {tag:?}"));
        }
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap_or(""));
        }
        rest = &rest[end + 1..];
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("unclosed {stack:?}"))
    }
}

#[test]
fn each_sweep_case_has_its_plot() {
    let data = sample_dir();
    let out = scratch("plots");
    let report = report_of(&data, &out);
    let r = rows(&data);
    let mut cases: Vec<(String, String)> = Vec::new();
    for row in r
        .iter()
        .filter(|r| r.section == "batch" || r.section == "load")
    {
        let k = (row.section.clone(), row.case.clone());
        if !cases.contains(&k) {
            cases.push(k);
        }
    }
    assert_eq!(cases.len(), 3, "{cases:?}");
    for (section, case) in &cases {
        let file = format!("{section}-{}.svg", slug(case));
        assert!(
            report.contains(&format!("![{case}](plots/{file})")),
            "{file} not embedded"
        );
        let svg = std::fs::read_to_string(out.join("plots").join(&file)).unwrap();
        assert!(svg.starts_with("<svg "), "{file}");
        assert!(svg.trim_end().ends_with("</svg>"), "{file}");
        balanced(&svg).unwrap_or_else(|e| panic!("{file}: {e}"));
        let x_title = if section == "batch" {
            "batch size (packets per sync)"
        } else {
            "offered load (% of the path&apos;s maximum)"
        };
        let y_title = if section == "batch" {
            "received Mpps (Mpps)"
        } else {
            "CPU (% of a core)"
        };
        for t in [x_title, y_title, xml(case).as_str()] {
            assert!(
                svg.contains(&format!(">{t}</text>")),
                "{file}: no text {t:?}"
            );
        }
        let systems: BTreeSet<&str> = r
            .iter()
            .filter(|x| &x.section == section && &x.case == case)
            .map(|x| x.system.as_str())
            .collect();
        for s in systems {
            assert!(
                svg.contains(&format!(">{}</text>", xml(s))),
                "{file}: no legend entry for {s}"
            );
        }
        // Peers dashed, ringswitch solid.
        assert!(svg.contains("<polyline"));
    }
    // The single-point peer of the switch batch plot is in its legend and
    // table.
    let svg = std::fs::read_to_string(out.join("plots/batch-through-a-switch-60-b.svg")).unwrap();
    assert!(svg.contains(">OVS-DPDK (memif ports)</text>"));
    assert!(svg.contains("stroke-dasharray"));

    // Same input, same bytes.
    let again = scratch("plots-again");
    report_of(&data, &again);
    for (section, case) in &cases {
        let file = format!("plots/{section}-{}.svg", slug(case));
        assert_eq!(
            std::fs::read(out.join(&file)).unwrap(),
            std::fs::read(again.join(&file)).unwrap(),
            "{file} differs between two runs"
        );
    }
}

#[test]
fn failures_meta_and_notes_are_shown() {
    let data = sample_dir();
    let report = report_of(&data, &scratch("meta"));
    let failures = std::fs::read_to_string(data.join("failures.tsv")).unwrap();
    let line: Vec<&str> = failures.lines().nth(1).unwrap().split('\t').collect();
    assert!(report.contains(&format!("| {} | {} | {} |", line[1], line[2], line[3])));
    let after = &report[report.find("## Failures").unwrap()..];
    assert!(after.contains(line[3]));

    let meta = std::fs::read_to_string(data.join("meta.tsv")).unwrap();
    let get = |k: &str| {
        meta.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}\t")))
            .unwrap_or_else(|| panic!("no {k} in meta.tsv"))
    };
    assert!(report.starts_with("# ringswitch beside its peers\n"));
    assert!(report.contains(&format!("cores: {}", get("cores"))));
    assert!(report.contains(&format!("- **kernel**: {}", get("kernel"))));
    for k in [
        "ringswitch",
        "rustc",
        "commit",
        "dpdk",
        "ovs",
        "qemu",
        "cpu_model",
        "memory",
        "date",
        "host",
    ] {
        assert!(report.contains(get(k)), "meta {k} missing");
    }
    assert!(report.contains(&format!("`{}`", get("command"))));

    let notes = std::fs::read_to_string(data.join("notes.tsv")).unwrap();
    let mut last = 0;
    for l in notes.lines() {
        let (section, text) = l.split_once('\t').unwrap();
        let at = report
            .find(&format!("- {text}\n"))
            .unwrap_or_else(|| panic!("note missing: {text}"));
        // Under its own section.
        let heading = report[..at].rfind("\n## ").unwrap();
        let title = report[heading + 4..].lines().next().unwrap();
        assert_eq!(title, ringswitch_bench::model::title(section));
        assert!(at > last, "notes out of file order");
        last = at;
    }
}

#[test]
fn binary_writes_the_report_and_rejects_bad_input() {
    let bin = env!("CARGO_BIN_EXE_ringswitch-bench");
    let out = scratch("bin");
    let o = Command::new(bin)
        .arg(sample_dir())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        out.join("REPORT.md").display().to_string()
    );
    assert!(out.join("REPORT.md").is_file());
    assert_eq!(
        figure_count(&std::fs::read_to_string(out.join("REPORT.md")).unwrap()),
        figure_count(&report_of(&sample_dir(), &scratch("bin-lib")))
    );

    let bad = scratch("bin-bad");
    std::fs::write(
        bad.join("samples.tsv"),
        "section\tcase\tsystem\tmetric\tunit\tbetter\tx\trun\tvalue\n\
         throughput\tc\tringswitch pipe\tMpps\tMpps\thigher\t-\t1\t86.1\n\
         throughput\tc\tringswitch pipe\tMpps\tMpps\tfaster\t-\t2\t86.3\n",
    )
    .unwrap();
    let o = Command::new(bin).arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("samples.tsv, line 3") && err.contains("faster"),
        "{err}"
    );
    assert!(!bad.join("REPORT.md").exists());

    let o = Command::new(bin)
        .arg(scratch("bin-missing"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("could not read"),
        "missing samples.tsv"
    );

    let o = Command::new(bin).arg("--help").output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--out"));
}

/// Count of `n=` figures in a report.
fn figure_count(report: &str) -> usize {
    report.matches(", n=").count()
}

#[test]
fn figure_format_matches_the_library() {
    use ringswitch_bench::model::Figure;
    let f = Figure {
        median: 17.25,
        min: 17.0,
        max: 17.4,
        n: 3,
    };
    assert_eq!(figure(&f), fig_text((17.25, 17.0, 17.4, 3)));
}

#[test]
fn report_subcommand_and_the_bare_form_write_the_same_report() {
    let bin = env!("CARGO_BIN_EXE_ringswitch-bench");
    let (a, b) = (scratch("sub-report"), scratch("sub-bare"));
    for (args, out) in [(&["report"][..], &a), (&[][..], &b)] {
        let o = Command::new(bin)
            .args(args)
            .arg(sample_dir())
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(
        std::fs::read_to_string(a.join("REPORT.md")).unwrap(),
        std::fs::read_to_string(b.join("REPORT.md")).unwrap()
    );
    let o = Command::new(bin)
        .args(["report", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--out"));
}

#[test]
fn targets_are_judged_on_the_median_and_listed_when_given() {
    // The last full bench/compare run's data, with the checked-in
    // targets: each target's row carries the median of its samples and
    // whether it meets it.
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results/data");
    // (A recorded run may carry its own targets.tsv: both copies below
    // take only the four files a run always writes.)
    let (data, bare) = (scratch("targets-data"), scratch("targets-bare"));
    for f in ["meta.tsv", "samples.tsv", "failures.tsv", "notes.tsv"] {
        std::fs::copy(recorded.join(f), data.join(f)).unwrap();
        std::fs::copy(recorded.join(f), bare.join(f)).unwrap();
    }
    let targets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/targets.tsv");
    std::fs::copy(&targets, data.join("targets.tsv")).unwrap();
    let with = report_of(&data, &scratch("targets-out"));
    let without = report_of(&bare, &scratch("targets-none"));
    assert!(!without.contains("## Targets"));
    let at = with.find("## Targets\n").expect("a Targets section");
    assert!(at < with.find("## Failures").unwrap());
    let table: Vec<&str> = with[at..]
        .lines()
        .skip(4)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let parsed = ringswitch_bench::input::read_dir(&data).unwrap();
    assert_eq!(table.len(), parsed.targets.len());
    let all = rows(&recorded);
    let mut judged = 0;
    for (t, line) in parsed.targets.iter().zip(&table) {
        let values: Vec<f64> = all
            .iter()
            .filter(|r| {
                r.section == t.section
                    && r.case == t.case
                    && r.system == t.system
                    && r.metric == t.metric
                    && r.x == "-"
            })
            .map(|r| r.value)
            .collect();
        let cells: Vec<&str> = line.split(" | ").collect();
        if values.is_empty() {
            assert!(
                line.contains("| not measured |") && line.contains("| — |"),
                "{line}"
            );
            continue;
        }
        let mut v = values.clone();
        v.sort_by(f64::total_cmp);
        let m = if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        assert!(cells[1].starts_with(&num(m)), "{line}: median {m}");
        let met = match t.op {
            ringswitch_bench::input::Op::AtLeast => m >= t.target,
            ringswitch_bench::input::Op::Above => m > t.target,
            ringswitch_bench::input::Op::AtMost => m <= t.target,
            ringswitch_bench::input::Op::Below => m < t.target,
        };
        assert_eq!(cells[3], if met { "yes" } else { "no" }, "{line}");
        judged += 1;
    }
    assert!(
        judged >= 7,
        "only {judged} targets found figures in the recorded run"
    );

    // A bad comparison is an error naming the file and line.
    std::fs::write(
        data.join("targets.tsv"),
        format!(
            "{}\nswitch\tc\ts\tm\t=>\t1\tx\n",
            ringswitch_bench::input::TARGETS_HEADER
        ),
    )
    .unwrap();
    let e = ringswitch_bench::input::read_dir(&data)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("targets.tsv, line 2") && e.contains("`=>`"),
        "{e}"
    );
}
