//! Helpers shared by the C-program tests (capi.rs, netmap.rs): a daemon
//! process on its own socket, pkt-gen runs with a JSON report, output
//! parsing; and (vm.rs) running a scenario of tests/vm/run.sh.
#![allow(dead_code)]

pub mod vm;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");

/// `ringswitch --socket SOCKET ctl ARGS`, run to its end.
pub fn ctl_at(socket: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--socket")
        .arg(socket)
        .arg("ctl")
        .args(args)
        .output()
        .unwrap()
}

/// The same, which must succeed.
pub fn ctl_ok_at(socket: &Path, args: &[&str]) {
    let o = ctl_at(socket, args);
    assert!(o.status.success(), "ctl {args:?}: {}", text(&o));
}

/// `ringswitch --socket SOCKET pkt-gen ARGS --json -T 0`, started, its
/// output piped.
pub fn pktgen_at(socket: &Path, args: &[&str]) -> Child {
    Command::new(BIN)
        .arg("--socket")
        .arg(socket)
        .arg("pkt-gen")
        .args(args)
        .args(["--json", "-T", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory where cargo put the libraries `files` (dev-dependencies
/// of this crate: next to the test binary, or one level up).
pub fn lib_dir(files: &[&str]) -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    for d in [deps.clone(), deps.parent().unwrap().to_path_buf()] {
        if files.iter().all(|f| d.join(f).exists()) {
            return d;
        }
    }
    panic!(
        "{files:?} are not next to the test binary in {}: build with `cargo test -p ringswitch-cli`",
        deps.display()
    );
}

/// A `ringswitch serve` on its own socket, killed on drop.
pub struct Daemon {
    child: Child,
    pub socket: PathBuf,
}

impl Daemon {
    pub fn start(tag: &str) -> Daemon {
        Daemon::start_with(tag, &[])
    }

    /// As [`Daemon::start`], with more `serve` options (`--config FILE`).
    pub fn start_with(tag: &str, args: &[&str]) -> Daemon {
        let socket = std::env::temp_dir().join(format!("rs-c-{}-{tag}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let child = Command::new(BIN)
            .args(["serve", "--socket"])
            .arg(&socket)
            .args(args)
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("daemon starts");
        wait_listening(&socket);
        Daemon { child, socket }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `ringswitch pkt-gen ARGS --json -T 0` on this daemon.
    pub fn pktgen(&self, args: &[&str]) -> Child {
        pktgen_at(&self.socket, args)
    }

    /// `ctl stats --json`.
    pub fn stats(&self) -> serde_json::Value {
        let out = ctl_at(&self.socket, &["stats", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// What the switch dropped because `port`'s RX ring was full (asked
    /// while the port is open: the counters go with it).
    pub fn drop_rx_full(&self, port: &str) -> u64 {
        let v = self.stats();
        v.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == port)
            .and_then(|p| p["drop_rx_full"].as_u64())
            .unwrap_or_else(|| panic!("no counters for {port} in {v}"))
    }
}

impl Daemon {
    /// `port`'s counters, if it exists.
    pub fn port_stats(&self, port: &str) -> Option<serde_json::Value> {
        let v = self.stats();
        v.as_array()?.iter().find(|p| p["name"] == port).cloned()
    }

    /// Waits until the switch has accounted for `n` frames sent to `port`
    /// (delivered into its RX ring or dropped because it was full), and
    /// returns the drops. The port must stay open meanwhile.
    pub fn wait_accounted(&self, port: &str, n: u64) -> u64 {
        let mut drops = 0;
        wait_until(&format!("{n} frames accounted at {port}"), || {
            let Some(p) = self.port_stats(port) else {
                return false;
            };
            let (rx, d) = (p["rx_packets"].as_u64(), p["drop_rx_full"].as_u64());
            drops = d.unwrap_or(0);
            rx.unwrap_or(0) + drops >= n
        });
        drops
    }

    /// Waits until every port in `ports` (canonical names) is open.
    pub fn wait_open(&self, ports: &[&str]) {
        let mut v = serde_json::Value::Null;
        wait_until(&format!("{ports:?} open"), || {
            let out = Command::new(BIN)
                .arg("--socket")
                .arg(&self.socket)
                .args(["ctl", "port", "list", "--json"])
                .output()
                .unwrap();
            v = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let open = |n: &&str| {
                v.as_array()
                    .is_some_and(|a| a.iter().any(|p| p["name"] == *n && p["open"] == true))
            };
            ports.iter().all(open)
        });
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A finished process, for failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The number on the line that starts with `word` (`sent 1000`).
pub fn count(out: &str, word: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(word)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no '{word}' line in:\n{out}"))
}

/// How long a test waits for a condition before it fails: generous, so a
/// loaded machine only makes the test slower, never wrong.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Polls `cond` until it holds, failing with `what` after [`DEADLINE`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < DEADLINE, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a daemon accepts connections on `socket`: the file exists
/// from `bind`, a moment before `listen`, so its existence is not enough.
pub fn wait_listening(socket: &Path) {
    wait_until(
        &format!("a daemon listening on {}", socket.display()),
        || ringswitch_control::socket::SeqPacket::connect(socket).is_ok(),
    );
}

/// Sends SIGINT to a child (pkt-gen stops, takes what already arrived,
/// and prints its report).
pub fn interrupt(c: &Child) {
    signal(c, libc::SIGINT);
}

/// Sends signal `sig` to a child.
pub fn signal(c: &Child, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; the pid is our child's,
    // not yet waited for.
    unsafe { libc::kill(c.id() as libc::pid_t, sig) };
}
