//! What the vm section reads from DPDK testpmd and OVS-DPDK, tested on
//! recorded outputs (bench/testdata/testpmd: a receiver, a sender and an
//! idle testpmd of a vm run and `ovs-dpdk.sh`'s stdout, on the 2-core
//! machine), and testpmd's command line beside the one bench/lib/testpmd.sh
//! gives OVS-DPDK's frontends.

use std::path::{Path, PathBuf};
use std::process::Command;

use ringswitch_bench::figures::mpps;
use ringswitch_bench::run::peers::{ovs_idle, ovs_placements};
use ringswitch_bench::run::testpmd::{self, Dir, Mode};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn recorded(name: &str) -> String {
    let p = root().join("bench/testdata/testpmd").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn receiver_and_sender_samples() {
    let rx = recorded("rx.out");
    assert!(testpmd::ready(&rx));
    assert_eq!(testpmd::failure(&rx), None);
    assert!(testpmd::moving(&rx, Dir::Rx));
    // After the first moving sample: 391546 pps over (999808 - 216480) packets.
    let s = testpmd::samples(&rx, Dir::Rx, 1.0);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].pps, 391_546);
    assert!((s[0].secs - 2.0006).abs() < 1e-3, "{}", s[0].secs);
    assert_eq!(mpps(testpmd::median_pps(&s).unwrap()), "0.392");
    assert_eq!(testpmd::samples(&rx, Dir::Rx, 0.0).len(), 2);
    assert_eq!(testpmd::total(&rx, Dir::Rx), Some(2_196_640));
    assert!(testpmd::samples(&rx, Dir::Tx, 0.0).is_empty());

    let tx = recorded("tx.out");
    let s = testpmd::samples(&tx, Dir::Tx, 1.0);
    assert_eq!(s.len(), 1);
    assert_eq!(mpps(testpmd::median_pps(&s).unwrap()), "2.958");
    assert_eq!(testpmd::last_counter(&tx, Dir::Tx), Some(16_115_168));
}

#[test]
fn an_idle_testpmd_is_ready_at_its_prompt() {
    let idle = recorded("idle.out");
    assert!(testpmd::ready(&idle));
    assert!(!testpmd::moving(&idle, Dir::Rx));
    assert!(testpmd::samples(&idle, Dir::Rx, 0.0).is_empty());
}

#[test]
fn ovs_dpdk_vhost_report() {
    let out = recorded("ovs-vhost.out");
    let rows = ovs_placements(&out).expect("placements");
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].rx_cpu, rows[0].tx_cpu, rows[0].pmd_cpu),
        (Some(0), Some(1), Some(0))
    );
    assert_eq!(rows[1].pmd_maxsleep, 500);
    assert_eq!(rows[1].rx_mpps.as_deref(), Some("0.032"));
    assert_eq!(rows[0].cpu_ns_per_delivered_pkt, Some(15566.3));
    let mut idle = ovs_idle(&out).expect("idle");
    idle.sort();
    assert_eq!(
        idle,
        vec![
            ("50".to_owned(), "36.05".to_owned()),
            ("500".to_owned(), "6.29".to_owned()),
            ("default".to_owned(), "99.94".to_owned()),
        ]
    );
    // A report cut short: no figures, no panic.
    assert_eq!(
        ovs_placements("ovs-dpdk placement rx_cpu=0\n{\"peer\":"),
        None
    );
    assert_eq!(ovs_idle("{\"idle_cpu_pct\":null}"), None);
}

/// bench/lib/testpmd.sh's testpmd_argv, one word a line.
fn bash_argv(args: &str) -> Vec<String> {
    let script = format!(
        ". '{}'; testpmd_argv {args} && printf '%s\\n' \"${{TESTPMD_ARGV[@]}}\"",
        root().join("bench/lib/testpmd.sh").display()
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "testpmd_argv {args} failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_command_line_is_the_one_ovs_dpdk_gets() {
    let (tx, rx) = (testpmd::TX_MAC, testpmd::RX_MAC);
    for (mac, mode, words) in [
        (tx, Mode::TxOnly(64), "txonly 64"),
        (tx, Mode::TxOnly(1514), "txonly 1514"),
        (rx, Mode::RxOnly, "rxonly"),
        (rx, Mode::Idle, "idle"),
    ] {
        for server in [true, false] {
            let s = u8::from(server);
            let args = format!("1 pfx-7 /tmp/x/vm1.sock {s} {mac} {words}");
            assert_eq!(
                testpmd::argv(1, "pfx-7", "/tmp/x/vm1.sock", server, mac, mode),
                bash_argv(&args),
                "testpmd_argv {args}"
            );
        }
    }
}
