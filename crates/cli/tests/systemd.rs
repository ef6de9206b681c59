//! ringswitch as a systemd service (issue 21): the unit in dist/systemd
//! passes `systemd-analyze verify` and agrees with the daemon's defaults;
//! the daemon speaks the notify protocol (sd_notify(3)) to a socket this
//! test binds in systemd's place: READY=1 once its control socket accepts
//! connections and --config is restored, WATCHDOG=1 from its control
//! thread, RELOADING=1 then READY=1 again from the same PID across `ctl
//! upgrade`, STOPPING=1 on SIGTERM; the unit's capabilities are each
//! needed and together enough (as root, in a network namespace); and an
//! installation puts `ringswitch` and `ringswitchd` side by side.
//!
//! PID 1 is not systemd on the machines these tests run on, so the unit is
//! verified, not run; docs/systemd.md says what was and was not tried.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{text, BIN, DEADLINE};

const DAEMON_BIN: &str = env!("CARGO_BIN_EXE_ringswitchd");

/// The unit file.
fn unit_path() -> PathBuf {
    common::repo().join("dist/systemd/ringswitch.service")
}

/// The unit's `[Service]` settings, each key with its values in order
/// (comments and continuation-free lines only, as the unit is written).
fn unit_settings() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(unit_path()).unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with('[') || line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=').expect("key=value");
        out.entry(k.to_string()).or_default().push(v.to_string());
    }
    out
}

fn one(settings: &BTreeMap<String, Vec<String>>, key: &str) -> String {
    match settings.get(key).map(Vec::as_slice) {
        Some([v]) => v.clone(),
        other => panic!("the unit should set {key} once, has {other:?}"),
    }
}

/// A private directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rs-sd-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let Ok(o) = Command::new("systemd-analyze").arg("--version").output() else {
        panic!(
            "systemd-analyze is missing: install Debian's systemd package (scripts/setup.sh does)"
        );
    };
    assert!(o.status.success(), "{}", text(&o));
    // A copy whose commands are the binaries just built: verify checks that
    // each command exists and is executable.
    let dir = scratch("verify");
    let unit = std::fs::read_to_string(unit_path()).unwrap();
    let unit = unit
        .replace("/usr/local/bin/ringswitchd ", &format!("{DAEMON_BIN} "))
        .replace("/usr/local/bin/ringswitch ", &format!("{BIN} "));
    assert!(
        !unit.contains("/usr/local/bin/"),
        "a command was not rewritten"
    );
    let copy = dir.join("ringswitch.service");
    std::fs::write(&copy, unit).unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .current_dir(&dir)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // Other units of the machine may draw warnings; ours must draw none.
    let ours: Vec<&str> = said.lines().filter(|l| l.contains("ringswitch")).collect();
    assert!(
        o.status.success() && ours.is_empty(),
        "systemd-analyze verify: {}\n{said}",
        o.status
    );
    if !Path::new("/run/systemd/system").is_dir() {
        eprintln!("PID 1 is not systemd here: the unit was verified, not run (docs/systemd.md)");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_unit_agrees_with_the_daemons_paths_and_the_install_command() {
    let s = unit_settings();
    assert_eq!(one(&s, "Type"), "notify");
    assert_eq!(one(&s, "NotifyAccess"), "main");
    let runtime = one(&s, "RuntimeDirectory");
    let state = one(&s, "StateDirectory");
    let start: Vec<String> = one(&s, "ExecStart")
        .split_whitespace()
        .map(String::from)
        .collect();
    // `cargo install --path crates/cli --root /usr/local` (README).
    assert_eq!(start[0], "/usr/local/bin/ringswitchd");
    let arg = |args: &[String], opt: &str| -> String {
        let i = args.iter().position(|a| a == opt);
        args[i.unwrap_or_else(|| panic!("{opt} missing from {args:?}")) + 1].clone()
    };
    // The control socket is root's default, in the runtime directory.
    let socket = arg(&start, "--socket");
    assert_eq!(socket, format!("/run/{runtime}/ringswitch.sock"));
    let o = Command::new(DAEMON_BIN).arg("--help").output().unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&socket),
        "ringswitchd --help does not name {socket} as root's default"
    );
    // The configuration persists in the state directory.
    assert_eq!(
        arg(&start, "--config"),
        format!("/var/lib/{state}/config.json")
    );
    // A reload upgrades in place, on the same socket.
    let reload: Vec<String> = one(&s, "ExecReload")
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(reload[0], "/usr/local/bin/ringswitch");
    assert_eq!(arg(&reload, "--socket"), socket);
    assert!(reload.ends_with(&["ctl".into(), "upgrade".into()]));
    assert!(
        one(&s, "WatchdogSec")
            .trim_end_matches('s')
            .parse::<u64>()
            .unwrap()
            > 20
    );
    assert_eq!(one(&s, "Restart"), "on-failure");
    for (k, v) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("LimitMEMLOCK", "infinity"),
    ] {
        assert_eq!(one(&s, k), v, "{k}");
    }
}

/// The installed layout: `cargo install --path crates/cli` installs every
/// binary target of the package into one directory, and `ringswitch serve`
/// runs the `ringswitchd` it finds beside itself. A real `cargo install`
/// builds everything again from scratch (about 4 minutes here), so it
/// runs only with RINGSWITCH_TEST_CARGO_INSTALL=1; by default the package's
/// targets (as `cargo metadata` reads them) and the layout are checked.
#[test]
fn cargo_install_puts_ringswitch_and_ringswitchd_side_by_side() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = common::repo().join("crates/cli/Cargo.toml");
    let o = Command::new(&cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let meta: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cli = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "ringswitch-cli")
        .expect("the ringswitch-cli package");
    let mut bins: Vec<&str> = cli["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    bins.sort_unstable();
    assert_eq!(bins, ["ringswitch", "ringswitchd"]);

    let dir = scratch("install");
    let bin = if std::env::var_os("RINGSWITCH_TEST_CARGO_INSTALL").is_some() {
        let o = Command::new(&cargo)
            .args(["install", "--offline", "--locked", "--path"])
            .arg(common::repo().join("crates/cli"))
            .arg("--root")
            .arg(&dir)
            .arg("--target-dir")
            .arg(dir.join("target"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        dir.join("bin")
    } else {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(BIN, bin.join("ringswitch")).unwrap();
        std::fs::copy(DAEMON_BIN, bin.join("ringswitchd")).unwrap();
        bin
    };
    let sock = dir.join("ctl.sock");
    let mut child = spawn_retrying(
        Command::new(bin.join("ringswitch"))
            .arg("--socket")
            .arg(&sock)
            .arg("serve")
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null()),
    );
    common::wait_listening(&sock);
    let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
    assert_eq!(
        exe,
        bin.join("ringswitchd"),
        "serve runs the daemon beside it"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Spawns `cmd`, waiting out ETXTBSY: a binary copied a moment ago is busy
/// while a process another test thread forked meanwhile still holds the
/// copy's write descriptor (until it execs).
fn spawn_retrying(cmd: &mut Command) -> Child {
    let t0 = Instant::now();
    loop {
        match cmd.spawn() {
            Ok(c) => return c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && t0.elapsed() < DEADLINE => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("cannot start {cmd:?}: {e}"),
        }
    }
}

/// The service manager's end of the notify protocol: a datagram socket
/// that also learns each sender's PID (SO_PASSCRED, as systemd's has, to
/// enforce NotifyAccess=main).
struct NotifySocket {
    sock: UnixDatagram,
    path: PathBuf,
}

/// One notification: its lines and the PID that sent it.
#[derive(Debug)]
struct Note {
    lines: Vec<String>,
    pid: i32,
}

impl Note {
    fn has(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }

    fn value(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    }
}

impl NotifySocket {
    fn bind(path: PathBuf) -> NotifySocket {
        let sock = UnixDatagram::bind(&path).unwrap();
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads an int that lives across the call, on
        // our own socket.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "SO_PASSCRED: {}", std::io::Error::last_os_error());
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        NotifySocket { sock, path }
    }

    /// The next notification, within [`DEADLINE`].
    fn next(&self, waiting_for: &str) -> Note {
        let t0 = Instant::now();
        loop {
            if let Some(n) = self.try_recv() {
                return n;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "no notification within {DEADLINE:?} while waiting for {waiting_for}"
            );
        }
    }

    /// Notifications up to and including the first that has `line`.
    fn until(&self, line: &str) -> Vec<Note> {
        let mut seen = Vec::new();
        loop {
            let n = self.next(line);
            let done = n.has(line);
            seen.push(n);
            if done {
                return seen;
            }
        }
    }

    /// One datagram with its sender's credentials, or none within the
    /// read timeout.
    fn try_recv(&self) -> Option<Note> {
        let mut buf = [0u8; 4096];
        // Room for one SCM_CREDENTIALS message, u64-aligned.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: recvmsg writes at most iov_len bytes into `buf` and
        // msg_controllen bytes into `control`, both alive across the call.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ),
                "recvmsg: {e}"
            );
            return None;
        }
        let mut pid = -1;
        // SAFETY: the CMSG macros walk the control buffer recvmsg filled,
        // within msg_controllen; an SCM_CREDENTIALS payload is a ucred,
        // read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                    let cred: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    pid = cred.pid;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let text = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
        Some(Note {
            lines: text.lines().map(String::from).collect(),
            pid,
        })
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A ringswitchd started as systemd starts it: NOTIFY_SOCKET, and
/// WATCHDOG_USEC with WATCHDOG_PID (`own`: the daemon's own PID, which
/// only a shell that execs it knows beforehand; else PID 1's). Killed on
/// drop.
struct Service {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Service {
    fn start(daemon: &Path, dir: &Path, notify: &Path, watchdog_usec: u64, own: bool) -> Service {
        let socket = dir.join("ctl.sock");
        let log = dir.join("daemon.log");
        let pid = if own { "$$" } else { "1" };
        let child = spawn_retrying(
            Command::new("sh")
                .arg("-c")
                .arg(format!(r#"WATCHDOG_PID={pid} exec "$0" "$@""#))
                .arg(daemon)
                .arg("--socket")
                .arg(&socket)
                .arg("--config")
                .arg(dir.join("config.json"))
                .env("NOTIFY_SOCKET", notify)
                .env("WATCHDOG_USEC", watchdog_usec.to_string())
                .env("RINGSWITCH_LOG", "info")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(File::create(&log).unwrap()),
        );
        Service { child, socket, log }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            .arg("ctl")
            .args(args)
            .output()
            .unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Checks, when READY=1 arrives, that the daemon answers on its socket
    /// and has its configuration (`switch`, if given) already.
    fn ready(&self, notes: &NotifySocket, switch: Option<&str>) -> Vec<Note> {
        let seen = notes.until("READY=1");
        let ready = seen.last().unwrap();
        assert!(
            ringswitch_control::socket::SeqPacket::connect(&self.socket).is_ok(),
            "READY=1 came before the control socket accepted connections"
        );
        let status = ready.value("STATUS").expect("a STATUS= with READY=1");
        assert!(
            status.contains(self.socket.to_str().unwrap()) && status.contains("config.json"),
            "{status}"
        );
        if let Some(sw) = switch {
            let o = self.ctl(&["switch", "list"]);
            assert!(
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains(sw),
                "{sw} was not restored by READY=1: {}",
                text(&o)
            );
        }
        seen
    }

    /// SIGTERM; then STOPPING=1 must arrive and the daemon exit cleanly.
    /// Returns the notifications up to STOPPING=1.
    fn stop(mut self, notes: &NotifySocket) -> Vec<Note> {
        common::signal(&self.child, libc::SIGTERM);
        let seen = notes.until("STOPPING=1");
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "the daemon exited with {status}:\n{}",
            self.log()
        );
        seen
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn count(notes: &[Note], line: &str) -> usize {
    notes.iter().filter(|n| n.has(line)).count()
}

/// The daemon's binary, copied into `dir` (what `ctl upgrade` runs again).
fn daemon_copy(dir: &Path) -> PathBuf {
    let d = dir.join("ringswitchd");
    std::fs::copy(DAEMON_BIN, &d).unwrap();
    d
}

/// The whole protocol as systemd would see it from a `Type=notify` unit
/// with `WatchdogSec=`. Nothing here depends on timing: each step waits
/// for a notification (or a condition) with a generous deadline, and the
/// watchdog's feeds are counted, never timed.
#[test]
fn the_daemon_notifies_ready_watchdog_reload_and_stopping() {
    let dir = scratch("notify");
    let notes = NotifySocket::bind(dir.join("notify"));
    let daemon = daemon_copy(&dir);
    // A 200 ms watchdog: a feed every 100 ms.
    let svc = Service::start(&daemon, &dir, &notes.path, 200_000, true);
    let pid = svc.pid();
    let mut seen = svc.ready(&notes, None);

    // The watchdog keeps being fed (by the control thread: a request it
    // serves goes round the same loop).
    for _ in 0..3 {
        seen.extend(notes.until("WATCHDOG=1"));
    }
    let o = svc.ctl(&["switch", "add", "vale5"]);
    assert!(o.status.success(), "{}", text(&o));
    seen.extend(notes.until("WATCHDOG=1"));

    // `ctl upgrade`: the same process runs the binary again; a reload, not
    // a stop: RELOADING=1 with its MONOTONIC_USEC (and one more feed),
    // then READY=1 from the new program once it listens with vale5
    // restored from --config.
    let upgrade = Command::new(BIN)
        .arg("--socket")
        .arg(&svc.socket)
        .args(["ctl", "upgrade"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reload = notes.until("RELOADING=1");
    let reloading = reload.last().unwrap();
    let usec: u64 = reloading
        .value("MONOTONIC_USEC")
        .expect("MONOTONIC_USEC= with RELOADING=1")
        .parse()
        .unwrap();
    assert!(usec > 0);
    assert!(reloading.has("WATCHDOG=1"), "{reloading:?}");
    assert!(
        reloading
            .value("STATUS")
            .is_some_and(|s| s.contains("upgrading")),
        "{reloading:?}"
    );
    seen.extend(reload);
    let after = svc.ready(&notes, Some("vale5"));
    assert_eq!(
        count(&after, "STOPPING=1"),
        0,
        "an upgrade is no stop: {after:?}"
    );
    seen.extend(after);
    let o = upgrade.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("upgraded"),
        "{}",
        text(&o)
    );
    // The new program feeds the watchdog too.
    for _ in 0..2 {
        seen.extend(notes.until("WATCHDOG=1"));
    }

    seen.extend(svc.stop(&notes));
    assert_eq!(count(&seen, "READY=1"), 2, "{seen:?}");
    // Every message came from the main PID, the old program's and the new
    // one's alike, so NotifyAccess=main accepts them all.
    let others: Vec<&Note> = seen.iter().filter(|n| n.pid != pid).collect();
    assert!(others.is_empty(), "messages not from pid {pid}: {others:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A watchdog systemd set for another process (WATCHDOG_PID not ours: the
/// variables leaked from a parent) is not fed; and a daemon started on a
/// saved configuration has it restored by READY=1.
#[test]
fn another_processs_watchdog_is_not_fed_and_config_is_restored_before_ready() {
    let dir = scratch("notours");
    let notes = NotifySocket::bind(dir.join("notify"));
    let daemon = daemon_copy(&dir);
    // A configuration saved by a first run.
    let svc = Service::start(&daemon, &dir, &notes.path, 200_000, true);
    svc.ready(&notes, None);
    let o = svc.ctl(&["switch", "add", "vale6"]);
    assert!(o.status.success(), "{}", text(&o));
    svc.stop(&notes);

    let svc = Service::start(&daemon, &dir, &notes.path, 200_000, false);
    let mut seen = svc.ready(&notes, Some("vale6"));
    // Requests served: the control thread went round its loop, where it
    // would have fed a watchdog it took for its own, before answering.
    for _ in 0..3 {
        let o = svc.ctl(&["switch", "list"]);
        assert!(o.status.success(), "{}", text(&o));
    }
    seen.extend(svc.stop(&notes));
    // Only the second daemon's notes count: the first one fed its own
    // watchdog, and a note it sent just before stopping may be read only
    // now.
    let second = seen.iter().find(|n| n.has("READY=1")).map(|n| n.pid);
    let fed: Vec<&Note> = seen
        .iter()
        .filter(|n| Some(n.pid) == second && n.has("WATCHDOG=1"))
        .collect();
    assert!(fed.is_empty(), "{seen:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Root, and network namespaces allowed (RINGSWITCH_SKIP_NETNS unset).
fn can_run_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || std::env::var_os("RINGSWITCH_SKIP_NETNS").is_some() {
        assert!(
            std::env::var_os("RINGSWITCH_TEST_REQUIRE_NETNS").is_none(),
            "namespace tests required but not root"
        );
        eprintln!("skipped: needs root for network namespaces and capability sets");
        return false;
    }
    true
}

fn sh(cmd: &str) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(o.status.success(), "{cmd}: {}", text(&o));
}

/// A network namespace with two veth pairs: `pa`/`pb` for AF_PACKET,
/// `xa`/`xb` for AF_XDP. Deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Netns {
        let name = format!("rs-sd-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        sh(&format!(
            "ip netns add {name} && ip -n {name} link set lo up && \
             ip -n {name} link add pa type veth peer name pb && \
             ip -n {name} link add xa type veth peer name xb && \
             for i in pa pb xa xb; do ip -n {name} link set $i up; done"
        ));
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A ringswitchd in `ns` (or the host's namespace) whose capability
/// bounding set is `caps`, as CapabilityBoundingSet= makes it. Killed on
/// drop.
struct Bounded {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Bounded {
    /// Started, and either listening or exited.
    fn start(dir: &Path, ns: Option<&Netns>, caps: &[String], args: &[&str]) -> Bounded {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let socket = dir.join("ctl.sock");
        let log = dir.join("daemon.log");
        let mut bounding = String::from("-all");
        for c in caps {
            let name = c.strip_prefix("CAP_").unwrap_or(c).to_lowercase();
            bounding.push_str(&format!(",+{name}"));
        }
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.0, "setpriv"]);
                c
            }
            None => Command::new("setpriv"),
        };
        cmd.arg(format!("--bounding-set={bounding}"))
            .arg(DAEMON_BIN)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .env("RINGSWITCH_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        let mut child = cmd.spawn().unwrap();
        common::wait_until("the daemon to listen or exit", || {
            ringswitch_control::socket::SeqPacket::connect(&socket).is_ok()
                || child.try_wait().unwrap().is_some()
        });
        Bounded { child, socket, log }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// `ctl ARGS`: whether it succeeded, and what it printed.
    fn ctl(&self, args: &[&str]) -> (bool, String) {
        let o = common::ctl_at(&self.socket, args);
        (o.status.success(), text(&o))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            common::signal(&self.child, libc::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

/// The scheduling policy of process `pid`'s first worker thread.
fn worker_policy(pid: u32) -> Option<i32> {
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let t = t.ok()?.path();
        if std::fs::read_to_string(t.join("comm")).ok()?.trim() != "rs-worker0" {
            continue;
        }
        // Field 41 of stat; fields after the command name (which may hold
        // spaces) start at field 3.
        let stat = std::fs::read_to_string(t.join("stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 1..];
        return rest.split_whitespace().nth(41 - 3)?.parse().ok();
    }
    None
}

/// Which of the features that need a capability work for a daemon whose
/// bounding set is `caps`.
fn features(dir: &Path, ns: &Netns, caps: &[String]) -> BTreeMap<&'static str, bool> {
    use std::os::unix::fs::MetadataExt;
    let mut f = BTreeMap::new();
    // --admin-group: the socket is given a group root is not in.
    let mut d = Bounded::start(&dir.join("group"), None, caps, &["--admin-group", "65534"]);
    let grouped = d.running() && std::fs::metadata(&d.socket).is_ok_and(|m| m.gid() == 65534);
    f.insert("socket group (CAP_CHOWN)", grouped);
    drop(d);
    // --worker-rt-priority, and interfaces.
    let d = Bounded::start(
        &dir.join("net"),
        Some(ns),
        caps,
        &["--worker-rt-priority", "1"],
    );
    let mut log = String::new();
    common::wait_until("the worker to say whether it runs under SCHED_FIFO", || {
        log = d.log();
        log.contains("SCHED_FIFO")
    });
    f.insert(
        "SCHED_FIFO workers (CAP_SYS_NICE)",
        worker_policy(d.child.id()) == Some(libc::SCHED_FIFO),
    );
    let (ok, out) = d.ctl(&["attach", "vale0", "--host", "rst0"]);
    f.insert("TAP (CAP_NET_ADMIN)", ok && out.contains("tap"));
    let (ok, out) = d.ctl(&["attach", "vale0", "pa"]);
    f.insert("AF_PACKET (CAP_NET_RAW)", ok && out.contains("af-packet"));
    let (ok, out) = d.ctl(&["attach", "vale1", "xa", "--mode", "generic"]);
    f.insert("AF_XDP (CAP_SYS_ADMIN)", ok && out.contains("xdp-generic"));
    if !ok && !caps.iter().any(|c| c == "CAP_SYS_ADMIN") {
        // libxdp attaches its program before the step that fails without
        // the capability: the daemon says which capability, and takes the
        // program off again.
        assert!(out.contains("CAP_SYS_ADMIN"), "{out}");
        let link = Command::new("ip")
            .args(["-n", &ns.0, "link", "show", "xa"])
            .output()
            .unwrap();
        let link = String::from_utf8_lossy(&link.stdout);
        assert!(
            !link.contains("prog/xdp"),
            "a failed AF_XDP attach left its program on xa: {link}{out}"
        );
    }
    drop(d);
    // A daemon killed while attached leaves libxdp's program (the next
    // daemon with the same state file would remove it): the next run
    // starts clean.
    sh(&format!("ip -n {} link set xa xdpgeneric off", ns.0));
    f
}

/// The unit's CapabilityBoundingSet= is enough for every feature that
/// needs a capability, and each capability in it is needed by one: taking
/// any one away breaks a feature. As root, with setpriv(1) making the
/// bounding set as systemd would.
#[test]
fn the_units_capabilities_are_each_needed_and_together_enough() {
    if !can_run_as_root() {
        return;
    }
    let caps: Vec<String> = one(&unit_settings(), "CapabilityBoundingSet")
        .split_whitespace()
        .map(String::from)
        .collect();
    let dir = scratch("caps");
    let ns = Netns::new();
    let all = features(&dir, &ns, &caps);
    assert!(all.values().all(|&ok| ok), "with {caps:?}: {all:?}");
    for c in &caps {
        let fewer: Vec<String> = caps.iter().filter(|x| *x != c).cloned().collect();
        let f = features(&dir, &ns, &fewer);
        eprintln!("without {c}: {f:?}");
        assert!(
            f.values().any(|&ok| !ok),
            "{c} is in the unit, but every feature works without it: {f:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
