//! `ringswitch serve` runs the daemon as `ringswitchd` (a binary holding
//! only the daemon's code, so its resident memory is the daemon's), passes
//! every option through, and both refuse bad settings with a sentence.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Daemon, BIN};

const DAEMON_BIN: &str = env!("CARGO_BIN_EXE_ringswitchd");

/// The field `field` (KiB) of `status`, a /proc/PID/status read once.
fn status_kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// `BIN --socket SOCK serve ARGS`, returned once the socket exists.
fn spawn_serve(bin: &Path, sock: &Path, args: &[&str]) -> std::process::Child {
    // A binary copied a moment ago can be busy (ETXTBSY): a process another
    // test thread forked meanwhile holds the copy's write descriptor until
    // it execs. Wait for that to pass.
    let mut child = None;
    common::wait_until(
        &format!("{} to start", bin.display()),
        || match Command::new(bin)
            .arg("--socket")
            .arg(sock)
            .arg("serve")
            .args(args)
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
        {
            Ok(c) => {
                child = Some(c);
                true
            }
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => false,
            Err(e) => panic!("cannot start {}: {e}", bin.display()),
        },
    );
    let child = child.expect("started");
    common::wait_listening(sock);
    child
}

/// Starts a daemon through `ringswitch serve`, checks it became
/// ringswitchd and carries traffic, and returns its resident memory without
/// packet memory (KiB) with a breakdown.
fn serve_and_measure(tag: &str) -> (u64, String) {
    let d = Daemon::start(tag);
    let pid = d.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(
        exe.file_name().unwrap(),
        "ringswitchd",
        "serve should have become ringswitchd, is {}",
        exe.display()
    );
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--socket" && Path::new(&w[1]) == d.socket),
        "{args:?}"
    );
    // It serves: a port opened through it carries traffic.
    let rx = d.pktgen(&["-i", "vale0:b", "-f", "rx", "-n", "1000"]);
    d.wait_open(&["vale0:b"]);
    let tx = d
        .pktgen(&["-i", "vale0:a", "-f", "tx", "-n", "1000"])
        .wait_with_output()
        .unwrap();
    assert!(tx.status.success());
    let rx = rx.wait_with_output().unwrap();
    assert!(rx.status.success(), "{}", common::text(&rx));
    // Every figure from one reading: the daemon is still letting go of the
    // ports' shared memory, and VmRSS read before RssShmem fell would count
    // it (a figure 1.2 MiB over its parts was seen).
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |field| status_kib(&status, field);
    let rss = kib("VmRSS:") - kib("RssShmem:");
    let detail = format!(
        "daemon resident memory without packet memory: {rss} KiB (anonymous {} KiB, \
         file {} KiB)",
        kib("RssAnon:"),
        kib("RssFile:"),
    );
    eprintln!("{detail}");
    (rss, detail)
}

#[test]
fn serve_runs_ringswitchd_with_the_same_options_and_pid() {
    // Within the budget of 4 MiB plus 1 KiB per port (two ports
    // here). File pages are mapped in 64 KiB windows around each touched
    // page, so one measurement can come out high; a second daemon is
    // measured before calling it a failure (the whole `ringswitch` binary
    // as the daemon measures 5 MiB every time).
    let (rss, detail) = serve_and_measure("execd");
    if rss > 4096 + 2 {
        let (rss2, detail2) = serve_and_measure("execd2");
        assert!(
            rss2 <= 4096 + 2,
            "twice over budget: {detail}; {detail2} (scripts/daemon-memory.sh shows where; if \
             ringswitchd's r-xp line grew, the hot code list is stale: scripts/hot-text.sh)"
        );
    }
}

#[test]
fn serve_options_reach_the_daemon() {
    let sock = std::env::temp_dir().join(format!("rs-execd-opts-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let mut child = spawn_serve(
        Path::new(BIN),
        &sock,
        &[
            "--workers",
            "2",
            "--batch",
            "64",
            "--mac-age",
            "7",
            "--idle-poll-us",
            "5",
            "--worker-cpus",
            "0,1",
            "--allow-group",
            "0",
            "--max-conns-per-uid",
            "9",
            "--max-shm-per-conn",
            "64M",
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    let joined = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    for want in [
        "--workers 2",
        "--batch 64",
        "--mac-age 7",
        "--idle-poll-us 5",
        "--worker-cpus 0,1",
        "--allow-group 0",
        "--max-conns-per-uid 9",
        "--max-shm-per-conn 67108864",
        "--metrics 127.0.0.1:0",
    ] {
        assert!(joined.contains(want), "{want} missing from {joined}");
    }
    // Two workers: two threads besides the main and control threads.
    let threads = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .unwrap()
        .count();
    assert!(threads >= 4, "{threads} threads");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn bad_settings_are_refused_in_a_sentence() {
    for (args, want) in [
        (vec!["--batch", "0"], "out of range"),
        (vec!["--workers", "0"], "out of range"),
        (
            vec!["--worker-rt-priority", "5", "--idle-poll-us", "10"],
            "one or the other",
        ),
    ] {
        let o = Command::new(BIN)
            .args(["--socket", "/tmp/rs-execd-never.sock", "serve"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "serve {args:?}: {e}");
        let o = Command::new(DAEMON_BIN)
            .args(["--socket", "/tmp/rs-execd-never.sock"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "ringswitchd {args:?}: {e}");
    }
    let o = Command::new(DAEMON_BIN).arg("--wokers").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("unknown option --wokers") && e.contains("--help"),
        "{e}"
    );
    let o = Command::new(DAEMON_BIN).arg("--help").output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--idle-poll-us"));
}

#[test]
fn serve_without_ringswitchd_beside_it_serves_in_process() {
    // A `ringswitch` copied alone: serve runs the daemon itself.
    let dir = std::env::temp_dir().join(format!("rs-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alone = dir.join("ringswitch");
    std::fs::copy(BIN, &alone).unwrap();
    let sock = dir.join("ctl.sock");
    let mut child = spawn_serve(&alone, &sock, &[]);
    let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
    assert_eq!(exe, alone);
    let o = Command::new(&alone)
        .arg("--socket")
        .arg(&sock)
        .args(["ctl", "switch", "add", "vale7"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ctl ARGS` with `bin` on `sock`.
fn ctl(bin: &Path, sock: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin)
        .arg("--socket")
        .arg(sock)
        .arg("ctl")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn upgrade_runs_the_newly_installed_daemon_in_the_same_process_with_its_configuration() {
    // An installation of its own, whose ringswitchd the test replaces.
    let dir = std::env::temp_dir().join(format!("rs-upgrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (cli, daemon) = (dir.join("ringswitch"), dir.join("ringswitchd"));
    std::fs::copy(BIN, &cli).unwrap();
    std::fs::copy(DAEMON_BIN, &daemon).unwrap();
    let (sock, conf) = (dir.join("ctl.sock"), dir.join("config.json"));
    let mut child = spawn_serve(&cli, &sock, &["--config", conf.to_str().unwrap()]);
    let pid = child.id();
    for args in [
        &["switch", "add", "vale0"][..],
        &["port", "add", "vale0:p1"],
    ] {
        let o = ctl(&cli, &sock, args);
        assert!(o.status.success(), "{}", common::text(&o));
    }
    // A binary that is not the daemon is refused, and the daemon stays.
    let o = ctl(&cli, &sock, &["upgrade", "--binary", "/bin/true"]);
    assert!(!o.status.success());
    assert!(
        common::text(&o).contains("not a ringswitch daemon"),
        "{}",
        common::text(&o)
    );
    // "Install" a new daemon over the old one (a new file at the path, as
    // a package manager does), then upgrade to it.
    let new = dir.join("ringswitchd.new");
    std::fs::copy(DAEMON_BIN, &new).unwrap();
    std::fs::rename(&new, &daemon).unwrap();
    let o = ctl(&cli, &sock, &["upgrade"]);
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        common::text(&o).contains("upgraded"),
        "{}",
        common::text(&o)
    );
    // The same process runs the new file (not the replaced, deleted one).
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, daemon, "the daemon runs {}", exe.display());
    let o = ctl(&cli, &sock, &["port", "list", "--json"]);
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("vale0:p1"),
        "the persistent port did not come back: {}",
        common::text(&o)
    );
    assert!(child.try_wait().unwrap().is_none(), "the daemon exited");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pkt_gen_on_switch_ports_goes_on_through_an_upgrade() {
    // A sender and a receiver on on-demand switch ports: the upgrade takes
    // their daemon away, the client library opens their ports again on the
    // new one (`Port::set_reconnect`, which pkt-gen sets), and frames flow
    // again without either process being restarted.
    let d = Daemon::start("upgrade-pktgen");
    let rx = d.pktgen(&["-i", "vale3:b", "-f", "rx", "--duration", "600"]);
    d.wait_open(&["vale3:b"]);
    let tx = d.pktgen(&[
        "-i",
        "vale3:a",
        "-f",
        "tx",
        "-R",
        "20000",
        "--duration",
        "600",
    ]);
    let delivered = |n: u64| {
        d.port_stats("vale3:b")
            .and_then(|p| p["rx_packets"].as_u64())
            .is_some_and(|got| got >= n)
    };
    common::wait_until("frames reaching vale3:b before the upgrade", || {
        delivered(1000)
    });
    let o = Command::new(BIN)
        .arg("--socket")
        .arg(&d.socket)
        .args(["ctl", "upgrade"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    // The new daemon's counters start at zero: these frames came after.
    common::wait_until("frames reaching vale3:b after the upgrade", || {
        delivered(1000)
    });
    for c in [&tx, &rx] {
        common::interrupt(c);
    }
    let (tx, rx) = (
        tx.wait_with_output().unwrap(),
        rx.wait_with_output().unwrap(),
    );
    assert!(tx.status.success(), "{}", common::text(&tx));
    assert!(rx.status.success(), "{}", common::text(&rx));
    let got: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&rx.stdout)
            .lines()
            .last()
            .unwrap_or(""),
    )
    .unwrap_or_else(|e| panic!("{e}: {}", common::text(&rx)));
    assert!(
        got["packets"].as_u64().unwrap_or(0) >= 2000,
        "the receiver counted frames from both daemons: {got}"
    );
}

#[test]
fn pkt_gen_told_to_stop_while_its_daemon_is_gone_stops_cleanly() {
    // The daemon dies and no new one comes: pkt-gen tries to reconnect (for
    // 30 s before it fails), and SIGTERM meanwhile ends the run as any
    // stop does, with its report and status 0, not the reconnection's
    // failure.
    let d = Daemon::start("gone-stop");
    let tx = d.pktgen(&["-i", "vale4:a", "-f", "tx", "-R", "20000"]);
    // Alone on its switch, its frames have nowhere to go: counted there.
    common::wait_until("pkt-gen sending into vale4", || {
        d.port_stats("vale4:a")
            .and_then(|p| p["drop_no_dest"].as_u64())
            .is_some_and(|n| n >= 100)
    });
    // SAFETY: kill has no memory preconditions; the pid is the daemon's.
    unsafe { libc::kill(d.pid() as libc::pid_t, libc::SIGKILL) };
    // A stand-in at the socket sees pkt-gen trying to reconnect, and hangs
    // up on it, so it is certainly in its reconnection loop when told to
    // stop.
    common::wait_until("the killed daemon gone", || {
        std::fs::read_to_string(format!("/proc/{}/stat", d.pid()))
            .map_or(true, |s| s.contains(") Z "))
    });
    let _ = std::fs::remove_file(&d.socket);
    let stand_in =
        ringswitch_control::Listener::bind(&d.socket, ringswitch_control::SocketAccess::OWNER)
            .unwrap();
    common::wait_until("pkt-gen trying to reconnect", || stand_in.accept().is_ok());
    drop(stand_in);
    let _ = std::fs::remove_file(&d.socket);
    common::signal(&tx, libc::SIGTERM);
    let o = tx.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        !common::text(&o).contains("could not be opened again"),
        "{}",
        common::text(&o)
    );
}
