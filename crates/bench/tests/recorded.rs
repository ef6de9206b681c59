//! The checked-in report of the last full `bench/compare` run on a 2-core
//! machine (bench/results) is exactly what the generator makes of the data
//! recorded in that run (bench/results/data): nothing in it was typed in
//! or edited by hand, and the generator still reads real runs' output.

use std::path::Path;

#[test]
fn checked_in_report_is_regenerated_byte_for_byte_from_its_recorded_data() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
    let data = ringswitch_bench::read_dir(&results.join("data"))
        .expect("bench/results/data reads as a bench/compare run");
    let out = ringswitch_bench::render(&data);
    let report =
        std::fs::read_to_string(results.join("REPORT.md")).expect("bench/results/REPORT.md");
    assert!(
        out.markdown == report,
        "bench/results/REPORT.md differs from what bench/results/data renders to: \
         copy REPORT.md, plots/ and data/ of one run together"
    );
    assert!(!out.plots.is_empty(), "a full run has plots");
    for (name, svg) in &out.plots {
        let on_disk = std::fs::read_to_string(results.join("plots").join(name))
            .unwrap_or_else(|e| panic!("bench/results/plots/{name}: {e}"));
        assert!(
            &on_disk == svg,
            "bench/results/plots/{name} differs from its data"
        );
    }
    // A full run: three runs per path, every section present.
    let samples = std::fs::read_to_string(results.join("data/samples.tsv")).expect("samples.tsv");
    for section in [
        "throughput",
        "switch",
        "vm",
        "passthrough",
        "nic",
        "latency",
        "efficiency",
        "idle",
        "batch",
        "load",
    ] {
        assert!(
            samples
                .lines()
                .any(|l| l.starts_with(&format!("{section}\t"))),
            "no {section} samples in the recorded full run"
        );
    }
    assert!(
        samples.lines().any(|l| l.split('\t').nth(7) == Some("3")),
        "runs 1..3 recorded"
    );
}
