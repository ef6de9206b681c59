//! VM ports with a real virtio-net driver on the other side: DPDK testpmd's
//! virtio_user device (the vhost-user protocol QEMU speaks, in a process) as
//! the frontend of two ports of a real daemon. testpmd txonly on one port,
//! rxonly on the other; the frames must arrive and every counter must add
//! up exactly: what the sender's driver queued = what the switch took from
//! its port = what it delivered to the other port + what it dropped there =
//! (delivered) what the receiver's driver counted.
//!
//! testpmd runs interactive (`-i`) with its stdin a pipe: the test types
//! `start`, `stop` and `show port stats 0` and waits for the next prompt.
//! `--no-huge` (no hugepages needed), its own `--file-prefix` per process.
//! Needs `dpdk-testpmd` (Debian: dpdk-dev; scripts/setup.sh installs it);
//! set RINGSWITCH_TEST_SKIP_TESTPMD=1 to skip these tests without it.
//!
//! The sender's frames carry the receiver's MAC (`--eth-peer`), but the
//! receiver never sends, so the learning bridge never learns it: they are
//! flooded, which with two ports reaches exactly the receiver.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");
const TESTPMD: &str = "dpdk-testpmd";
const TX_MAC: &str = "52:54:00:00:00:01";
const RX_MAC: &str = "52:54:00:00:00:02";
/// Frames the receiver must get (through the switch) before the test stops.
const ENOUGH: u64 = 200_000;
/// Every wait in these tests is bounded by this.
const WAIT: Duration = Duration::from_secs(30);

/// One test at a time: they share the two CPUs and each moves frames as fast
/// as it can.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// false (and a note) when testpmd is missing and the skip is asked for.
fn have_testpmd() -> bool {
    let found = Command::new(TESTPMD)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var_os("RINGSWITCH_TEST_SKIP_TESTPMD").is_some(),
            "{TESTPMD} not found: install package dpdk-dev (scripts/setup.sh does), \
             or set RINGSWITCH_TEST_SKIP_TESTPMD=1 to skip the testpmd tests"
        );
        eprintln!("skipped: {TESTPMD} not found and RINGSWITCH_TEST_SKIP_TESTPMD is set");
    }
    found
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < WAIT, "timed out after {WAIT:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let s = std::fs::read(path).unwrap_or_default();
    let s = String::from_utf8_lossy(&s);
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// A scratch directory, a daemon and its log. On a panic, prints the tails
/// of every log in the directory and keeps it.
struct Scene {
    dir: PathBuf,
    daemon: Child,
    socket: PathBuf,
}

impl Scene {
    fn new(tag: &str) -> Scene {
        let dir = std::env::temp_dir().join(format!("rs-testpmd-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("ctl.sock");
        let log = File::create(dir.join("daemon.log")).unwrap();
        let daemon = Command::new(BIN)
            .args(["serve", "--workers", "1", "--socket"])
            .arg(&socket)
            .env(
                "RINGSWITCH_LOG",
                std::env::var("RINGSWITCH_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("daemon starts");
        let s = Scene {
            dir,
            daemon,
            socket,
        };
        // The file exists from `bind`, a moment before `listen`.
        wait_until("the daemon listening on its control socket", || {
            ringswitch_control::socket::SeqPacket::connect(&s.socket).is_ok()
        });
        s
    }

    fn ctl(&self, args: &[&str]) -> Vec<u8> {
        let out = Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            .arg("ctl")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// `ctl port add vale0:NAME --vhost-user DIR/NAME.sock [--client]`
    fn add_vm_port(&self, name: &str, client: bool) -> PathBuf {
        let sock = self.dir.join(format!("{name}.sock"));
        let port = format!("vale0:{name}");
        let mut args = vec!["port", "add", &port, "--vhost-user", sock.to_str().unwrap()];
        if client {
            args.push("--client");
        }
        self.ctl(&args);
        sock
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::from_slice(&self.ctl(&["stats", "--json"])).unwrap()
    }

    /// The counters of one port.
    fn port(&self, name: &str) -> Counters {
        let all = self.stats();
        let p = all
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {all}"));
        Counters::from(p)
    }

    fn is_open(&self, name: &str) -> bool {
        let l: serde_json::Value =
            serde_json::from_slice(&self.ctl(&["port", "list", "--json"])).unwrap();
        l.as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == name && p["open"] == true)
    }

    fn wait_open(&self, name: &str, open: bool) {
        wait_until(&format!("{name} open == {open}"), || {
            self.is_open(name) == open
        });
    }

    /// Waits until the switch has nothing in flight: the counters of both
    /// ports stay the same over 300 ms.
    /// Waits until the switch has accounted for `sent` frames from vm1
    /// (taken or dropped at the source) and vm2 has accounted for every
    /// frame taken (delivered or dropped there): the switch is drained.
    /// `sent` is what the stopped sender queued, per its own counters.
    fn drained(&self, sent: u64) -> (Counters, Counters) {
        let mut last = (self.port("vale0:vm1"), self.port("vale0:vm2"));
        wait_until(
            &format!("the switch to account for the {sent} frames sent"),
            || {
                last = (self.port("vale0:vm1"), self.port("vale0:vm2"));
                let (vm1, vm2) = last;
                vm1.tx_packets + vm1.drop_other >= sent
                    && vm2.rx_packets + vm2.drop_rx_full + vm2.drop_link_down + vm2.drop_other
                        >= vm1.tx_packets
            },
        );
        last
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        if std::thread::panicking() {
            eprintln!("---- daemon log (RINGSWITCH_LOG=debug for more) ----");
            eprintln!("{}", tail(&self.dir.join("daemon.log"), 40));
            eprintln!("---- logs kept in {} ----", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counters {
    tx_packets: u64,
    rx_packets: u64,
    rx_bytes: u64,
    drop_rx_full: u64,
    drop_link_down: u64,
    drop_other: u64,
}

impl Counters {
    fn from(v: &serde_json::Value) -> Counters {
        let n = |k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("{k} missing in {v}"))
        };
        Counters {
            tx_packets: n("tx_packets"),
            rx_packets: n("rx_packets"),
            rx_bytes: n("rx_bytes"),
            drop_rx_full: n("drop_rx_full"),
            drop_link_down: n("drop_link_down"),
            drop_other: n("drop_malformed") + n("drop_short") + n("drop_long"),
        }
    }
}

/// `show port stats 0` of a testpmd.
#[derive(Debug, Clone, Copy, Default)]
struct NicStats {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
}

/// An interactive testpmd with a virtio_user port.
struct Testpmd {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    prefix: String,
}

impl Testpmd {
    /// `server`: testpmd owns the socket (vdev `server=1`) and the daemon
    /// connects to it (`--client`).
    fn spawn(
        scene: &Scene,
        name: &str,
        sock: &Path,
        server: bool,
        mac: &str,
        mode: &str,
    ) -> Testpmd {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        // The receiver on CPU 0, the sender on CPU 1: each testpmd has a
        // main lcore and a forwarding lcore, both on that CPU.
        let cpu = if mode == "txonly" && cpus > 1 { 1 } else { 0 };
        let prefix = format!("rs-test-{}-{name}", std::process::id());
        let log = scene.dir.join(format!("testpmd-{name}.log"));
        let f = File::create(&log).unwrap();
        let mut vdev = format!(
            "net_virtio_user0,path={},queues=1,mac={mac}",
            sock.display()
        );
        if server {
            vdev.push_str(",server=1");
        }
        // testpmd prints its statistics with stdio, which a file fully
        // buffers (its prompt it writes directly): line-buffer stdout.
        let mut cmd = Command::new("stdbuf");
        cmd.args(["-oL", "-eL", TESTPMD])
            .arg(format!("--lcores=0@{cpu},1@{cpu}"))
            .args([
                "--no-huge",
                "-m",
                "512",
                "--no-pci",
                "--file-prefix",
                &prefix,
            ])
            .arg(format!("--vdev={vdev}"))
            .args(["--", "-i", "--no-mlockall", "--total-num-mbufs=8192"])
            .arg(format!("--forward-mode={mode}"));
        if mode == "txonly" {
            cmd.args(["--txpkts=64", &format!("--eth-peer=0,{RX_MAC}")]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {TESTPMD}: {e}"));
        let stdin = child.stdin.take();
        let mut t = Testpmd {
            name: name.into(),
            child,
            stdin,
            log,
            prefix,
        };
        // The first prompt comes once its port is started (and connected).
        t.wait_prompts(1);
        let out = t.output();
        assert!(
            out.contains(&format!("Port 0: {mac}")) && !out.contains("No probed ethernet devices"),
            "testpmd {name}: its virtio_user port did not start:\n{}",
            tail(&t.log, 30)
        );
        t
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    fn prompts(&self) -> usize {
        self.output().matches("testpmd> ").count()
    }

    fn wait_prompts(&mut self, n: usize) {
        let t0 = Instant::now();
        while self.prompts() < n {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "testpmd {} exited ({st}):\n{}",
                    self.name,
                    tail(&self.log, 30)
                );
            }
            assert!(
                t0.elapsed() < WAIT,
                "testpmd {}: no prompt after {WAIT:?}:\n{}",
                self.name,
                tail(&self.log, 30)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types a command and waits for the next prompt; returns its output.
    fn cmd(&mut self, line: &str) -> String {
        let before = self.output();
        let n = before.matches("testpmd> ").count();
        let stdin = self.stdin.as_mut().expect("testpmd stdin");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.wait_prompts(n + 1);
        let out = self.output();
        out.get(before.len()..).unwrap_or_default().to_string()
    }

    fn stats(&mut self) -> NicStats {
        let out = self.cmd("show port stats 0");
        let mut s = NicStats::default();
        let mut seen = false;
        for l in out.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = |k: &str| {
                w.iter()
                    .position(|x| *x == k)
                    .and_then(|i| w.get(i + 1))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if let Some(v) = at("RX-packets:") {
                s.rx_packets = v;
                seen = true;
            }
            if let Some(v) = at("RX-bytes:") {
                s.rx_bytes = v;
            }
            if let Some(v) = at("TX-packets:") {
                s.tx_packets = v;
            }
        }
        assert!(seen, "testpmd {}: no port statistics in:\n{out}", self.name);
        s
    }

    /// SIGKILL, as a crashing VM.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn quit(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = writeln!(s, "quit");
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- testpmd {} log ----\n{}",
                self.name,
                tail(&self.log, 25)
            );
        }
        self.kill();
        let dir = if Path::new("/var/run/dpdk").is_dir() && is_root() {
            PathBuf::from("/var/run/dpdk")
        } else {
            std::env::var_os("XDG_RUNTIME_DIR")
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
                .join("dpdk")
        };
        let _ = std::fs::remove_dir_all(dir.join(&self.prefix));
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Until the receiver has got `more` frames beyond `from` (per the switch).
fn run_until_delivered(scene: &Scene, from: u64, more: u64) {
    wait_until(&format!("{more} frames delivered to vale0:vm2"), || {
        scene.port("vale0:vm2").rx_packets >= from + more
    });
}

/// Stops the sender, lets the switch drain, waits until the receiver has
/// polled everything the switch delivered, and checks that every counter
/// adds up. `rx_base`: frames delivered to vm2 before this receiver came.
fn stop_and_check(
    scene: &Scene,
    tx: &mut Testpmd,
    rx: &mut Testpmd,
    rx_base: u64,
) -> (Counters, Counters, NicStats, NicStats) {
    tx.cmd("stop");
    let ts = tx.stats();
    let (vm1, vm2) = scene.drained(ts.tx_packets);
    // The receiver still forwards: it must count exactly what the switch put
    // in its queue.
    let mut rs = rx.stats();
    wait_until("the receiver to count what the switch delivered", || {
        rs = rx.stats();
        rs.rx_packets >= vm2.rx_packets - rx_base
    });
    rx.cmd("stop");
    eprintln!(
        "sender queued {}, switch took {} from vm1; vm2: delivered {} (this receiver: {}), \
         drop_rx_full {}, drop_link_down {}; receiver counted {}",
        ts.tx_packets,
        vm1.tx_packets,
        vm2.rx_packets,
        vm2.rx_packets - rx_base,
        vm2.drop_rx_full,
        vm2.drop_link_down,
        rs.rx_packets
    );
    assert_eq!(
        vm1.tx_packets, ts.tx_packets,
        "the switch took from vm1 what the sender queued ({vm1:?}, sender {ts:?})"
    );
    assert_eq!(
        vm1.tx_packets,
        vm2.rx_packets + vm2.drop_rx_full + vm2.drop_link_down,
        "taken from vm1 = delivered to vm2 + dropped there ({vm1:?} / {vm2:?})"
    );
    assert_eq!(
        rs.rx_packets,
        vm2.rx_packets - rx_base,
        "the receiver counted what the switch delivered to it ({vm2:?}, receiver {rs:?})"
    );
    assert_eq!(vm1.drop_other + vm2.drop_other, 0, "{vm1:?} {vm2:?}");
    assert_eq!(
        vm1.rx_packets, 0,
        "nothing goes back to the sender: {vm1:?}"
    );
    assert_eq!(vm2.tx_packets, 0, "the receiver sends nothing: {vm2:?}");
    assert_eq!(
        rs.rx_bytes,
        64 * rs.rx_packets,
        "64-byte frames arrive whole: {rs:?}"
    );
    assert_eq!(vm2.rx_bytes, 64 * vm2.rx_packets, "{vm2:?}");
    (vm1, vm2, ts, rs)
}

/// Two VM ports, testpmd txonly -> rxonly. `client`: the daemon connects
/// (`--client`, testpmd `server=1`); else testpmd connects to the daemon.
fn forward(tag: &str, client: bool) {
    let _g = serial();
    if !have_testpmd() {
        return;
    }
    let scene = Scene::new(tag);
    let s1 = scene.add_vm_port("vm1", client);
    let s2 = scene.add_vm_port("vm2", client);
    let mut rx = Testpmd::spawn(&scene, "rx", &s2, client, RX_MAC, "rxonly");
    scene.wait_open("vale0:vm2", true);
    let mut tx = Testpmd::spawn(&scene, "tx", &s1, client, TX_MAC, "txonly");
    scene.wait_open("vale0:vm1", true);
    rx.cmd("start");
    tx.cmd("start");
    run_until_delivered(&scene, 0, ENOUGH);
    let (_, vm2, _, rs) = stop_and_check(&scene, &mut tx, &mut rx, 0);
    assert!(rs.rx_packets >= ENOUGH, "{vm2:?}");
    tx.quit();
    rx.quit();
    // Both frontends gone: the ports stay, closed.
    scene.wait_open("vale0:vm1", false);
    scene.wait_open("vale0:vm2", false);
}

#[test]
fn testpmd_txonly_to_rxonly_through_vm_ports() {
    forward("srv", false);
}

#[test]
fn testpmd_txonly_to_rxonly_through_vm_ports_client_mode() {
    forward("cli", true);
}

/// The receiver is killed (SIGKILL) mid-traffic and started again: frames
/// meanwhile count as drop_link_down, then flow to the new instance.
fn restart_receiver(tag: &str, client: bool) {
    let _g = serial();
    if !have_testpmd() {
        return;
    }
    let scene = Scene::new(tag);
    let s1 = scene.add_vm_port("vm1", client);
    let s2 = scene.add_vm_port("vm2", client);
    let mut rx = Testpmd::spawn(&scene, "rx1", &s2, client, RX_MAC, "rxonly");
    scene.wait_open("vale0:vm2", true);
    let mut tx = Testpmd::spawn(&scene, "tx", &s1, client, TX_MAC, "txonly");
    scene.wait_open("vale0:vm1", true);
    rx.cmd("start");
    tx.cmd("start");
    run_until_delivered(&scene, 0, ENOUGH / 4);

    rx.kill();
    scene.wait_open("vale0:vm2", false);
    let down = scene.port("vale0:vm2");
    // The sender keeps going while nobody receives.
    wait_until("drop_link_down to grow while the receiver is gone", || {
        scene.port("vale0:vm2").drop_link_down > down.drop_link_down
    });
    std::thread::sleep(Duration::from_millis(500));
    // The sender pauses while the receiver starts: DPDK's virtio driver
    // discards, uncounted, whatever the device delivers between the
    // device's start and the end of its own (virtio_dev_start flushes the
    // RX queues), which would make the exact count below a race.
    tx.cmd("stop");
    scene.drained(tx.stats().tx_packets);
    let before = scene.port("vale0:vm2");
    assert_eq!(
        before.rx_packets, down.rx_packets,
        "nothing delivered while no receiver is connected"
    );

    if client {
        // testpmd (server=1) does not replace a stale socket, as QEMU does:
        // the killed one left its socket behind.
        let _ = std::fs::remove_file(&s2);
    }
    let mut rx2 = Testpmd::spawn(&scene, "rx2", &s2, client, RX_MAC, "rxonly");
    scene.wait_open("vale0:vm2", true);
    rx2.cmd("start");
    tx.cmd("start");
    run_until_delivered(&scene, before.rx_packets, ENOUGH);
    let (_, vm2, _, rs) = stop_and_check(&scene, &mut tx, &mut rx2, before.rx_packets);
    assert!(rs.rx_packets >= ENOUGH, "{vm2:?}");
    assert!(vm2.drop_link_down > 0, "{vm2:?}");
    tx.quit();
    rx2.quit();
}

#[test]
fn testpmd_receiver_killed_and_restarted() {
    restart_receiver("restart-srv", false);
}

#[test]
fn testpmd_receiver_killed_and_restarted_client_mode() {
    restart_receiver("restart-cli", true);
}
