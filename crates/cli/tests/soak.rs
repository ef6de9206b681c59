//! The churn soak in CI: a real daemon, real pkt-gen processes killed with
//! -9, control churn and floods, a scribbler, and vhost-user frontends that
//! connect, misbehave and vanish, for `RINGSWITCH_SOAK_SECS` (default 60)
//! seconds, with its invariants checked throughout (common/soak.rs).
//!
//! The probe latency is recorded, and bounded here only against a hang (10 s,
//! `RINGSWITCH_SOAK_PROBE_MS`: a loaded CI machine may stall any process for a
//! while, which says nothing about the daemon); bench/soak.sh runs
//! the same driver for minutes and asserts 100 ms.
//!
//! Needs the release binaries: `cargo build --release --bins`, then
//! `cargo test --release -p ringswitch-cli --test soak -- --nocapture`.

mod common;
#[path = "common/soak.rs"]
mod driver;
#[path = "../../daemon/tests/common/guest.rs"]
mod guest;

#[test]
fn churn_soak_keeps_every_invariant() {
    let opts = driver::Options::from_env(60, 10_000);
    let report = driver::run(opts.clone());
    let table = report.table(&opts);
    eprintln!("{table}");
    assert!(
        report.failures.is_empty(),
        "the soak broke invariants:\n{table}"
    );
    // The run did what it says: every activity happened.
    for what in [
        "pipe rounds lossless",
        "pipe ends killed",
        "senders killed -9",
        "receivers killed -9",
        "switches added/deleted",
        "flood connections",
        "scribbler sessions",
        "bad vhost-user frontends",
        "guest frames",
        "final forwarding checks",
    ] {
        assert!(
            report.counts.get(what).copied().unwrap_or(0) > 0,
            "{what} never happened:\n{table}"
        );
    }
    assert!(report.probes > 0, "no probe ran:\n{table}");
    assert!(
        report.probes_over_bound == 0,
        "{} probes took longer than {:?}:\n{table}",
        report.probes_over_bound,
        opts.probe_bound
    );
}
