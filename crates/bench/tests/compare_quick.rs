//! `bench/compare --quick` end to end: it measures ringswitch and its peers
//! on this machine and writes the report and plots. Asserts that every
//! section produced its figures, that each peer was either measured or its
//! failure explained, and that the report and plots come out. Needs root
//! (hugepages, namespaces, XDP) and the workspace's `ringswitch` binary
//! (`cargo test --workspace` builds it); without either it says why and
//! passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `ringswitch` binary next to this test's profile directory.
fn ringswitch_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/compare_quick-<hash> -> target/<profile>/ringswitch
    let bin = exe.parent()?.parent()?.join("ringswitch");
    bin.is_file().then_some(bin)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Rows of samples.tsv: (section, case, system, metric, x, value).
fn samples(dir: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("data/samples.tsv")).expect("samples.tsv");
    text.lines()
        .skip(1)
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

#[test]
fn compare_quick_measures_every_section_and_writes_the_report() {
    if !is_root() {
        eprintln!("skipped: bench/compare needs root (hugepages, network namespaces, XDP)");
        return;
    }
    let Some(rs) = ringswitch_bin() else {
        eprintln!("skipped: no ringswitch binary beside this test (run cargo test --workspace)");
        return;
    };
    let out = tempfile_dir();
    let t0 = Instant::now();
    let status = Command::new(repo_root().join("bench/compare"))
        .args(["--quick", "--out"])
        .arg(&out)
        .env("RINGSWITCH_BIN", &rs)
        .env(
            "RINGSWITCH_BENCH_BIN",
            env!("CARGO_BIN_EXE_ringswitch-bench"),
        )
        .status()
        .expect("bench/compare runs");
    let secs = t0.elapsed().as_secs();
    let log = std::fs::read_to_string(out.join("run.log")).unwrap_or_default();
    assert!(
        status.success(),
        "bench/compare --quick failed ({status}); run.log tail:\n{}",
        tail(&log, 40)
    );
    eprintln!("bench/compare --quick took {secs} s");

    let report = std::fs::read_to_string(out.join("REPORT.md")).expect("REPORT.md written");
    for title in [
        "## Headline",
        "## Throughput",
        "## Through a switch",
        "## VM-style clients",
        "## NIC ports",
        "## Round-trip latency",
        "## CPU cost per packet",
        "## CPU use with all clients idle",
        "## Throughput against batch size",
        "## CPU use against offered load",
        "## OpenFlow tables",
        "## The default wait against its references",
        "## Failures",
    ] {
        assert!(report.contains(title), "REPORT.md has no {title:?}");
    }
    // The machine labels itself.
    for key in ["cores", "kernel", "DPDK", "OVS"] {
        assert!(report.contains(key), "REPORT.md does not give {key}");
    }

    let rows = samples(&out);
    let has = |section: &str, system_prefix: &str| {
        rows.iter()
            .any(|r| r.len() == 9 && r[0] == section && r[2].starts_with(system_prefix))
    };
    // ringswitch's own figures: every section it measures in --quick.
    for (section, system) in [
        ("throughput", "ringswitch pipe"),
        ("switch", "ringswitch switch"),
        ("vm", "ringswitch"),
        ("nic", "ringswitch"),
        ("latency", "ringswitch pipe"),
        ("latency", "ringswitch switch"),
        ("efficiency", "ringswitch"),
        ("idle", "ringswitch"),
        ("batch", "ringswitch pipe"),
        ("batch", "ringswitch switch"),
        ("load", "ringswitch switch"),
        ("load", "ringswitch pipe"),
        ("flows", "ringswitch switch, learning bridge"),
        ("flows", "ringswitch switch, 1,000 flows"),
        ("flows", "ringswitch switch, one flow"),
        ("flows", "ringswitch, FLOW_MODs pipelined"),
        ("flows", "ringswitch, the storm"),
        ("defaults", "ringswitch pipe, default"),
        ("defaults", "ringswitch switch, default"),
    ] {
        assert!(
            has(section, system),
            "no {system:?} samples in section {section}; run.log tail:\n{}",
            tail(&log, 40)
        );
    }
    // Each peer: measured, or its failure explained in failures.tsv.
    let failures = std::fs::read_to_string(out.join("data/failures.tsv")).unwrap_or_default();
    for (section, peer) in [
        ("throughput", "DPDK memif"),
        ("switch", "OVS-DPDK"),
        ("switch", "Linux bridge"),
        ("vm", "OVS-DPDK"),
        ("nic", "DPDK testpmd"),
        ("latency", "Linux bridge"),
        ("batch", "DPDK memif"),
        ("flows", "OVS-DPDK"),
    ] {
        let explained = failures
            .lines()
            .any(|l| l.starts_with(&format!("{section}\t")) && l.contains(peer));
        assert!(
            has(section, peer) || explained,
            "peer {peer:?} neither measured nor explained in section {section}"
        );
        if !has(section, peer) {
            eprintln!("note: peer {peer} not measured in {section}; see failures.tsv");
        }
    }

    // The plots, embedded in the report.
    let plots: Vec<String> = std::fs::read_dir(out.join("plots"))
        .expect("plots/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for prefix in ["batch-", "load-"] {
        let p = plots
            .iter()
            .find(|p| p.starts_with(prefix) && p.ends_with(".svg"))
            .unwrap_or_else(|| panic!("no {prefix}*.svg in {plots:?}"));
        let svg = std::fs::read_to_string(out.join("plots").join(p)).expect("svg");
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
        assert!(report.contains(&format!("plots/{p}")), "{p} not embedded");
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("rs-compare-quick-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
