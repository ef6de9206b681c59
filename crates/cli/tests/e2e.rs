//! Multi-process tests: a daemon, pkt-gen processes and `ctl`, all real
//! processes of the `ringswitch` binary.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

mod common;
use common::{interrupt, signal, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(tag: &str, extra: &[&str]) -> Daemon {
        let socket = std::env::temp_dir().join(format!("rs-e2e-{}-{tag}.sock", std::process::id()));
        let child = Command::new(BIN)
            .args(["serve", "--socket"])
            .arg(&socket)
            .args(extra)
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("daemon starts");
        common::wait_listening(&socket);
        Daemon { child, socket }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--socket").arg(&self.socket).stdin(Stdio::null());
        c
    }

    fn pktgen(&self, args: &[&str]) -> Child {
        self.cmd()
            .arg("pkt-gen")
            .args(args)
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn ctl_json(&self, args: &[&str]) -> serde_json::Value {
        let out = self
            .cmd()
            .arg("ctl")
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The JSON report pkt-gen prints as its last line.
fn report(out: Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pkt-gen failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no JSON report ({e}) in:\n{stdout}"))
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn port_stats(d: &Daemon, name: &str) -> serde_json::Value {
    let all = d.ctl_json(&["stats"]);
    all.as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {all}"))
}

fn wait_port(d: &Daemon, name: &str) {
    wait_until(&format!("{name} open"), || {
        let l = d.ctl_json(&["port", "list"]);
        l.as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == name && p["open"] == true)
    });
}

/// Waits until the switch has accounted for `n` frames sent to `port`
/// (delivered into its RX ring, or dropped because it was full).
fn wait_accounted(d: &Daemon, port: &str, n: u64) {
    wait_until(&format!("{n} frames accounted at {port}"), || {
        let all = d.ctl_json(&["stats"]);
        all.as_array().unwrap().iter().any(|s| {
            s["name"] == port
                && s["rx_packets"].as_u64().unwrap_or(0) + s["drop_rx_full"].as_u64().unwrap_or(0)
                    >= n
        })
    });
}

#[test]
fn pipe_txseq_to_rxseq_ten_million_frames_without_loss() {
    let d = Daemon::start("pipe10m", &[]);
    let rx = d.pktgen(&["-i", "seq}1", "-f", "rxseq", "-n", "10000000", "-T", "0"]);
    wait_port(&d, "seq}1");
    let tx = d.pktgen(&["-i", "seq{1", "-f", "txseq", "-n", "10000000", "-T", "0"]);
    let t = report(tx.wait_with_output().unwrap());
    let r = report(rx.wait_with_output().unwrap());
    assert_eq!(n(&t, "packets"), 10_000_000);
    assert_eq!(n(&r, "packets"), 10_000_000);
    assert_eq!(n(&r, "gaps"), 0);
    assert_eq!(n(&r, "reordered"), 0);
    assert_eq!(n(&r, "drops"), 0);
}

#[test]
fn switch_txseq_to_rxseq_counters_add_up() {
    let d = Daemon::start("swseq", &[]);
    // The receiver runs until stopped, once the switch has accounted for
    // every frame: no window a loaded machine could miss.
    let rx = d.pktgen(&["-i", "vale0:r", "-f", "rxseq", "-T", "0"]);
    wait_port(&d, "vale0:r");
    // A fast sender into a receiver that shares the CPU: some drops are
    // likely, and every one must be accounted for.
    let tx = d.pktgen(&["-i", "vale0:t", "-f", "txseq", "-n", "3000000", "-T", "0"]);
    let t = report(tx.wait_with_output().unwrap());
    // Both ports are on-demand: read the counters while the receiver is
    // still open (the sender's port is gone with it; its count is in its report).
    wait_accounted(&d, "vale0:r", 3_000_000);
    let rs = port_stats(&d, "vale0:r");
    interrupt(&rx);
    let r = report(rx.wait_with_output().unwrap());
    let sent = n(&t, "packets");
    assert_eq!(sent, 3_000_000);
    let (rx_pk, dropped) = (n(&rs, "rx_packets"), n(&rs, "drop_rx_full"));
    assert_eq!(rx_pk + dropped, sent, "received + dropped = sent ({rs})");
    assert_eq!(
        n(&r, "packets"),
        rx_pk,
        "rxseq saw what the switch delivered"
    );
    // Every gap is a counted drop (drops at the very end leave no gap).
    assert!(
        n(&r, "gaps") <= dropped,
        "gaps {} > drops {dropped}",
        n(&r, "gaps")
    );
    assert_eq!(n(&r, "reordered"), 0);
}

/// A receiver that stops reading (descheduled on a loaded machine) loses
/// the frames the switch cannot put in its full ring, and only those: each
/// is counted in `drop_rx_full`. Frames dropped at the end of a stream
/// leave no gap rxseq could see, so only the counters tell (the failure of
/// the passthrough end-to-end test: a receiver that fell behind an
/// unthrottled guest, with no gap and no report).
#[test]
fn a_stopped_receiver_loses_frames_only_into_drop_rx_full() {
    const SENT: u64 = 20_000;
    let d = Daemon::start("swstop", &[]);
    let rx = d.pktgen(&["-i", "vale0:r", "-f", "rxseq", "-T", "0"]);
    wait_port(&d, "vale0:r");
    signal(&rx, libc::SIGSTOP);
    let tx = d.pktgen(&["-i", "vale0:t", "-f", "txseq", "-n", "20000", "-T", "0"]);
    let t = report(tx.wait_with_output().unwrap());
    wait_accounted(&d, "vale0:r", SENT);
    let rs = port_stats(&d, "vale0:r");
    signal(&rx, libc::SIGCONT);
    interrupt(&rx);
    let r = report(rx.wait_with_output().unwrap());
    assert_eq!(n(&t, "packets"), SENT);
    let (rx_pk, dropped) = (n(&rs, "rx_packets"), n(&rs, "drop_rx_full"));
    // The ring was empty when the receiver stopped: it takes one slot
    // short of the ring's size, the rest is dropped.
    let ring = u64::from(ringswitch_ring::layout::DEFAULT_SLOTS) - 1;
    assert_eq!((rx_pk, dropped), (ring, SENT - ring), "{rs}");
    assert_eq!(n(&r, "packets"), rx_pk, "rxseq read what was delivered");
    assert_eq!(n(&r, "gaps"), 0, "drops at the end leave no gap: {r}");
    assert_eq!(n(&r, "reordered"), 0);
}

#[test]
fn ping_pong_through_a_pipe_and_the_switch() {
    let d = Daemon::start("pingpong", &[]);
    for (a, b) in [("pp{1", "pp}1"), ("vale1:ping", "vale1:pong")] {
        let pong = d.pktgen(&["-i", b, "-f", "pong", "-T", "0"]);
        wait_port(&d, b);
        let ping = d.pktgen(&["-i", a, "-f", "ping", "-n", "2000", "-T", "0"]);
        let p = report(ping.wait_with_output().unwrap());
        let mut pong = pong;
        let _ = pong.kill();
        let _ = pong.wait();
        assert_eq!(n(&p, "packets"), 2000, "{a}: {p}");
        let (min, p50, p99, max) = (
            n(&p, "rtt_ns_min"),
            n(&p, "rtt_ns_p50"),
            n(&p, "rtt_ns_p99"),
            n(&p, "rtt_ns_max"),
        );
        assert!(
            min > 0 && min <= p50 && p50 <= p99 && p99 <= max,
            "{a}: {p}"
        );
        assert!(n(&p, "rtt_ns_avg") >= min);
    }
}

/// A client killed with -9 mid-traffic loses its port, and the other port
/// is untouched. How long it took is printed (typically a few ms: the
/// control thread sees the hang-up at once); the test asserts the outcome,
/// not the time.
#[test]
fn killed_client_port_is_gone() {
    let d = Daemon::start("kill9", &[]);
    let mut rx = d.pktgen(&["-i", "vale0:sink", "-f", "rx", "-T", "0"]);
    wait_port(&d, "vale0:sink");
    let mut tx = d.pktgen(&["-i", "vale0:victim", "-f", "tx", "-T", "0"]);
    // Killed while frames are flowing.
    wait_accounted(&d, "vale0:sink", 1);
    let st = Command::new("kill")
        .args(["-9", &tx.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let _ = tx.wait();
    let t0 = Instant::now();
    let mut names: Vec<String> = Vec::new();
    wait_until("the killed client's port removed", || {
        let l = d.ctl_json(&["port", "list"]);
        names = l
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap_or("").to_string())
            .collect();
        !names.iter().any(|n| n == "vale0:victim")
    });
    println!(
        "port of a client killed with -9 gone after {:?}",
        t0.elapsed()
    );
    assert!(
        names.iter().any(|n| n == "vale0:sink"),
        "the other port is untouched: {names:?}"
    );
    let _ = rx.kill();
    let _ = rx.wait();
    // The daemon is alive and well.
    d.ctl_json(&["switch", "list"]);
}

#[test]
fn ctl_manages_switches_and_ports() {
    let d = Daemon::start("ctl", &[]);
    let ok = |args: &[&str]| {
        let o = d.cmd().arg("ctl").args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    ok(&["switch", "add", "vale7"]);
    ok(&["port", "add", "vale7:a@conf:rings=2,slots=512"]);
    ok(&["port", "add", "p{3"]);
    let table = ok(&["port", "list"]);
    assert!(
        table.contains("vale7:a") && table.contains("2/2") && table.contains("512/512"),
        "{table}"
    );
    assert!(table.contains("p{3") && table.contains("p}3"), "{table}");
    let stats = ok(&["stats", "vale7"]);
    assert!(stats.starts_with("PORT"), "{stats}");
    let l = d.ctl_json(&["switch", "list"]);
    assert_eq!(l[0]["name"], "vale7");
    // Errors: non-zero exit and a sentence on stderr.
    let o = d
        .cmd()
        .args(["ctl", "switch", "del", "vale7"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("still has 1 ports"));
    ok(&["port", "del", "vale7:a"]);
    ok(&["port", "del", "p{3"]);
    ok(&["switch", "del", "vale7"]);
}

#[test]
fn no_daemon_is_a_clear_error() {
    let sock = Path::new("/tmp/ringswitch-no-daemon-here.sock");
    let o = Command::new(BIN)
        .arg("--socket")
        .arg(sock)
        .args(["ctl", "switch", "list"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("no ringswitch daemon") && e.contains("ringswitch serve"),
        "{e}"
    );
    let o = Command::new(BIN)
        .arg("--socket")
        .arg(sock)
        .args(["pkt-gen", "-i", "vale0:a"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("ringswitch serve"));
}

#[test]
fn bridge_forwards_between_a_pipe_and_the_switch() {
    let d = Daemon::start("bridge", &[]);
    // Persistent, so its counters can be read after pkt-gen has closed it.
    d.ctl_json(&["port", "add", "vale2:out"]);
    let rx = d.pktgen(&["-i", "vale2:out", "-f", "rxseq", "-T", "0"]);
    wait_port(&d, "vale2:out");
    let mut br = d
        .cmd()
        .args(["bridge", "-i", "br}1", "-i", "vale2:in"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_port(&d, "vale2:in");
    // Paced, so that on a quiet machine nothing is dropped at the switch.
    let tx = d.pktgen(&[
        "-i", "br{1", "-f", "txseq", "-n", "100000", "-R", "200000", "-T", "0",
    ]);
    let t = report(tx.wait_with_output().unwrap());
    wait_accounted(&d, "vale2:out", 100_000);
    interrupt(&rx);
    let r = report(rx.wait_with_output().unwrap());
    let _ = Command::new("kill")
        .args(["-TERM", &br.id().to_string()])
        .status();
    let _ = br.wait();
    assert_eq!(n(&t, "packets"), 100_000);
    // The pipe and the bridge lose nothing; the switch may drop when the
    // receiver is starved of CPU, and then counts it.
    let out = port_stats(&d, "vale2:out");
    assert_eq!(n(&r, "packets") + n(&out, "drop_rx_full"), 100_000, "{out}");
    assert_eq!(n(&r, "reordered"), 0);
}

/// The README's first command runs `ringswitch demo`: its summary's switch
/// counters add up exactly, the pipe drops nothing, and every round trip
/// it times comes back, on both paths.
#[test]
fn the_demo_moves_frames_and_times_every_round_trip() {
    let socket = std::env::temp_dir().join(format!("rs-e2e-{}-demo.sock", std::process::id()));
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&socket)
        .args(["demo", "--seconds", "2"])
        .env("RINGSWITCH_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("demo runs");
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    // path sent received dropped Mpps seconds p50 p99
    let row = |path: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|w| w.len() == 8 && w[0] == path)
            .unwrap_or_else(|| panic!("no summary row for {path}: {text}"))
    };
    let num = |s: &str| -> u64 { s.parse().unwrap_or_else(|_| panic!("'{s}' in {text}")) };
    for path in ["pipe", "switch"] {
        let r = row(path);
        let (sent, received, dropped) = (num(&r[1]), num(&r[2]), num(&r[3]));
        // No rate or count is asserted: the traffic runs for a fixed two
        // seconds, which a loaded machine may give little CPU. That the
        // path carries frames is shown by the round trips below, each
        // waited for as long as it takes.
        if path == "switch" {
            assert_eq!(sent, received + dropped, "{text}");
        } else {
            // A pipe never drops; what the sink had not read yet stays
            // in its ring.
            assert_eq!(dropped, 0, "{text}");
            assert!(received <= sent, "{text}");
        }
        let p50: f64 = r[6]
            .parse()
            .unwrap_or_else(|_| panic!("no round trip on {path}: {text}"));
        let p99: f64 = r[7].parse().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{text}");
        assert!(
            text.contains(&format!("{path:<7} 1000 round trips of one frame")),
            "{path}: not every round trip came back: {text}"
        );
    }
}
