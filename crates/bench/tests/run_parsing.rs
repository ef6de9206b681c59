//! What `ringswitch-bench run` reads from its processes, tested on
//! recorded outputs (bench/testdata/pktgen: pkt-gen --json runs of a
//! switch and a pipe on the 2-core machine, a `ctl stats --json`) and on
//! texts written here:
//! pkt-gen's reports, /proc/PID/stat, a failed process's one-line reason,
//! and the figures computed from them.

use std::path::{Path, PathBuf};

use ringswitch_bench::figures::{mpps, per_mpkt};
use ringswitch_bench::pktgen::Report;
use ringswitch_bench::run::procs::{parse_stat_ticks, strip_ansi, why_line, Exit};

fn recorded(name: &str) -> String {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/testdata/pktgen")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn receiver_and_sender_reports() {
    let rx = Report::from_stdout(&recorded("rx.out")).expect("rx report");
    assert_eq!(rx.packets, Some(3_375_930));
    assert_eq!(mpps(rx.pps.unwrap()), "3.405");
    assert_eq!(rx.cpu_seconds, Some(0.087960573));
    let tx = Report::from_stdout(&recorded("tx.out")).expect("tx report");
    assert_eq!(tx.packets, Some(3_382_071));
    assert_eq!(mpps(tx.pps.unwrap()), "3.374");
    // CPU of both pkt-gens per million received packets, as the
    // throughput section writes it.
    let all = rx.cpu_seconds.unwrap() + tx.cpu_seconds.unwrap();
    assert_eq!(
        per_mpkt(all, rx.packets.unwrap()).as_deref(),
        Some("0.0549")
    );
    assert_eq!(rx.rtt.p50, None);
}

#[test]
fn ping_report_keeps_the_numbers_as_written() {
    let p = Report::from_stdout(&recorded("ping.out")).expect("ping report");
    assert_eq!(p.rtt.p50.as_deref(), Some("761"));
    assert_eq!(p.rtt.avg.as_deref(), Some("116095"));
    assert_eq!(p.rtt.min.as_deref(), Some("360"));
    assert_eq!(p.rtt.p99.as_deref(), Some("16791"));
    assert_eq!(p.lost, Some(0));
}

#[test]
fn no_report_or_a_broken_one_is_none() {
    assert_eq!(Report::from_stdout(&recorded("no-report.out")), None);
    assert_eq!(Report::from_stdout(""), None);
    assert_eq!(Report::from_stdout("{\"pps\": 1"), None);
    // Fields of the wrong type are missing, not a panic.
    let r = Report::from_stdout("x\n{\"pps\":\"fast\",\"packets\":-1,\"rtt_ns_p50\":null}\n\n")
        .unwrap();
    assert_eq!((r.pps, r.packets, r.rtt.p50), (None, None, None));
}

#[test]
fn proc_stat_ticks() {
    // A command name with spaces and parentheses: fields count from the
    // last ')'. utime 7, stime 5.
    let stat = "3586 (a (b) c) S 3578 3578 18497 0 -1 4194304 99 0 0 0 7 5 0 0 20 0 1 0";
    assert_eq!(parse_stat_ticks(stat), Some(12));
    assert_eq!(parse_stat_ticks("3586 (cat) R 1 2"), None);
    assert_eq!(parse_stat_ticks("garbage"), None);
}

#[test]
fn a_failed_process_in_one_line() {
    let err = "\x1b[31merror\x1b[0m: first\n\nport vale0:x: no such switch\n  \n";
    let clean = strip_ansi(err);
    assert_eq!(clean, "error: first\n\nport vale0:x: no such switch\n  \n");
    assert_eq!(
        why_line("003-pipe-tx", Exit(1), &clean),
        "003-pipe-tx exited with status 1: port vale0:x: no such switch"
    );
    assert_eq!(
        why_line("004-rx", Exit(124), ""),
        "004-rx timed out (status 124)"
    );
    let long = "x".repeat(300);
    assert_eq!(
        why_line("n", Exit(137), &long).len(),
        "n timed out (status 137): ".len() + 200
    );
}

#[test]
fn daemon_memory_and_port_count() {
    use ringswitch_bench::run::idle::{ports_on, rss_without_shmem, status_kb};
    let status = "Name:\tringswitchd\nVmRSS:\t    5960 kB\nRssAnon:\t     168 kB\n\
                  RssFile:\t    1792 kB\nRssShmem:\t    2000 kB\nVmRSSx:\t1 kB\n";
    assert_eq!(status_kb(status, "VmRSS"), Some(5960));
    assert_eq!(status_kb(status, "VmSwap"), None);
    assert_eq!(rss_without_shmem(status), Some((3960, 168, 1792)));
    assert_eq!(rss_without_shmem("VmRSS:\t1 kB\n"), None);
    // A recorded `ctl stats --json` of the switch section: one port.
    let stats = recorded("ctl-stats.json");
    assert_eq!(ports_on(&stats, "valebench60"), Some(1));
    assert_eq!(ports_on(&stats, "vale0"), Some(0));
    assert_eq!(ports_on("{}", "vale0"), None);
    assert_eq!(ports_on("not json", "vale0"), None);
}

fn peer_recorded(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/testdata/peers")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn memif_and_ovs_reports() {
    use ringswitch_bench::run::peers::{cores_per_mpps, ovs_placements, MemifReport};
    // A recorded bench/peers/memif.sh report after its diagnostics.
    let m = MemifReport::from_stdout(&format!(
        "memif size=64 run=1 rx_mpps=0.876 cpu_cores=0.62\n{}",
        peer_recorded("memif-64.json")
    ))
    .expect("memif report");
    assert_eq!(m.runs, ["0.876"]);
    assert_eq!(m.cpu_cores, [Some(0.62)]);
    assert_eq!(cores_per_mpps(0.62, 0.876), "0.7078");
    // No cpu_cores (older script): the runs still count.
    let m = MemifReport::from_stdout(r#"{"runs":[1.5,2],"median_mpps":1.75}"#).unwrap();
    assert_eq!((m.runs.len(), m.cpu_cores[1]), (2, None));
    assert_eq!(MemifReport::from_stdout(r#"{"runs":["fast"]}"#), None);
    assert_eq!(MemifReport::from_stdout("testpmd failed"), None);

    // A recorded ovs-dpdk.sh --ports memif report, both pmd-maxsleep values.
    let rows = ovs_placements(&peer_recorded("ovs-dpdk-memif-64.json")).expect("placements");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].pmd_maxsleep, 0);
    assert_eq!(rows[0].rx_mpps.as_deref(), Some("0.039"));
    assert_eq!(rows[0].cpu_ns_per_delivered_pkt, Some(4394.5));
    assert_eq!(rows[1].pmd_maxsleep, 500);
    assert_eq!(rows[1].vswitchd_cpu_pct.as_deref(), Some("15.2"));
    assert_eq!(ovs_placements(r#"{"placements":null}"#), None);
}
