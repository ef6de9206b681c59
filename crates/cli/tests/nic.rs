//! Interface ports end to end, with real kernel stacks in network
//! namespaces: a namespace `a` holds one end of a veth pair with an IP
//! address (the "outside world"); namespace `b` holds the daemon, the other
//! veth end attached to switch vale0 (AF_XDP generic or native, or
//! AF_PACKET), and a host-stack port (a TAP the daemon creates) with an
//! address of its own. Pings and a TCP transfer between the two kernels
//! then cross the switch both ways: veth -> AF_XDP -> switch -> TAP -> the
//! host stack of `b`, and back.
//!
//! Needs root (namespaces, XDP); without it the tests say so and pass,
//! unless RINGSWITCH_TEST_REQUIRE_NETNS is set. Uses `ip` (iproute2),
//! ethtool, setpriv and busybox (ping, nc, sha256sum), which
//! scripts/setup.sh installs.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");
const WAIT: Duration = Duration::from_secs(20);

/// One test at a time: each moves traffic and they share two CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || std::env::var_os("RINGSWITCH_SKIP_NETNS").is_some() {
        assert!(
            std::env::var_os("RINGSWITCH_TEST_REQUIRE_NETNS").is_none(),
            "namespace tests required but not root"
        );
        eprintln!("skipped: needs root for network namespaces");
        return false;
    }
    true
}

fn busybox() -> &'static str {
    if Path::new("/bin/busybox").exists() {
        "/bin/busybox"
    } else {
        "busybox"
    }
}

fn sh(cmd: &str) -> Output {
    Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .output()
        .expect("sh runs")
}

fn must(cmd: &str) -> String {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "`{cmd}` failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
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

/// A child killed when the test lets go of it, failing or not (a
/// listener left behind would keep the test's output open).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two namespaces joined by a veth pair, a scratch directory, and the
/// daemon running in namespace `b`.
struct Net {
    /// Short unique tag (names must fit IFNAMSIZ).
    tag: String,
    dir: PathBuf,
    daemon: Option<Child>,
    socket: PathBuf,
    /// 10.<n>.0.0/24
    net: u8,
}

impl Net {
    /// A wire-like veth: the sender's offloads off.
    fn new(name: &str, net: u8) -> Net {
        let n = Net::as_is(name, net);
        // A wire carries whole frames of at most the MTU with finished
        // checksums: a veth would hand an XDP program TSO frames and
        // partial checksums (and an AF_XDP frame holds 2 KiB).
        must(&format!(
            "ip netns exec {} ethtool -K {} tx off tso off gso off gro off >/dev/null",
            n.ns_a(),
            n.veth_a()
        ));
        n
    }

    /// A veth as a container has it: the sender keeps its default
    /// offloads (TSO, GSO, partial checksums).
    fn as_is(name: &str, net: u8) -> Net {
        let tag = format!("{name}{}", std::process::id() % 10000);
        let dir = std::env::temp_dir().join(format!("rs-nic-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let n = Net {
            socket: dir.join("ctl.sock"),
            tag,
            dir,
            daemon: None,
            net,
        };
        let (a, b) = (n.ns_a(), n.ns_b());
        let (va, vb) = (n.veth_a(), n.veth_b());
        must(&format!("ip netns add {a} && ip netns add {b}"));
        must(&format!(
            "ip link add {va} netns {a} type veth peer name {vb} netns {b}"
        ));
        must(&format!(
            "ip -n {a} link set lo up && ip -n {b} link set lo up && \
             ip -n {a} addr add 10.{net}.0.1/24 dev {va} && ip -n {a} link set {va} up && \
             ip -n {b} link set {vb} up"
        ));
        n
    }

    fn ns_a(&self) -> String {
        format!("rsa{}", self.tag)
    }
    fn ns_b(&self) -> String {
        format!("rsb{}", self.tag)
    }
    fn veth_a(&self) -> String {
        format!("va{}", self.tag)
    }
    fn veth_b(&self) -> String {
        format!("vb{}", self.tag)
    }
    fn tap(&self) -> String {
        format!("tp{}", self.tag)
    }
    fn ip_tap(&self) -> String {
        format!("10.{}.0.2", self.net)
    }

    /// Starts (or restarts) the daemon in namespace `b`, optionally as
    /// another user (`setpriv` arguments).
    fn start_daemon(&mut self, as_user: Option<&str>) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.dir.join("daemon.log"))
            .unwrap();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns_b()]);
        if let Some(u) = as_user {
            cmd.args([
                "setpriv",
                &format!("--reuid={u}"),
                "--regid=nogroup",
                "--clear-groups",
                "--inh-caps=-all",
            ]);
        }
        let child = cmd
            .arg(BIN)
            .args(["serve", "--workers", "1", "--socket"])
            .arg(&self.socket)
            .env(
                "RINGSWITCH_LOG",
                std::env::var("RINGSWITCH_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("daemon starts");
        self.daemon = Some(child);
        let sock = self.socket.clone();
        wait_until("the daemon's control socket", || {
            Command::new(BIN)
                .arg("--socket")
                .arg(&sock)
                .env("RINGSWITCH_DAEMON_UID", "65534")
                .args(["ctl", "switch", "list"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
    }

    fn kill_daemon(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            // SIGKILL: nothing of the daemon's own clean-up runs.
            let _ = d.kill();
            let _ = d.wait();
        }
    }

    fn ctl_out(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            // The daemon may run as nobody (65534 on Debian): trust it.
            .env("RINGSWITCH_DAEMON_UID", "65534")
            .arg("ctl")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ctl(&self, args: &[&str]) -> String {
        let out = self.ctl_out(args);
        assert!(
            out.status.success(),
            "ctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ctl ARGS` must fail; returns its message.
    fn ctl_err(&self, args: &[&str]) -> String {
        let out = self.ctl_out(args);
        assert!(!out.status.success(), "ctl {args:?} should have failed");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Attaches the veth end in `b` with `mode` and a host port with the
    /// address 10.n.0.2; returns the NIC port's driver.
    fn attach(&self, mode: &str) -> String {
        let vb = self.veth_b();
        let tap = self.tap();
        let out = self.ctl(&["attach", "vale0", &vb, "--mode", mode]);
        assert!(out.contains(&format!("vale0:{vb}")), "{out}");
        if !self.has_link(&self.ns_b(), &tap) {
            self.ctl(&["attach", "vale0", "--host", &tap]);
            must(&format!(
                "ip -n {b} addr add {ip}/24 dev {tap} && ip -n {b} link set {tap} up",
                b = self.ns_b(),
                ip = self.ip_tap()
            ));
        }
        self.driver(&format!("vale0:{vb}"))
    }

    fn has_link(&self, ns: &str, dev: &str) -> bool {
        sh(&format!("ip -n {ns} link show {dev}")).status.success()
    }

    fn driver(&self, port: &str) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&self.ctl(&["port", "list", "--json"])).unwrap();
        let p = v
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == port)
            .unwrap_or_else(|| panic!("no {port} in {v}"));
        p["iface"]["driver"].as_str().unwrap().to_string()
    }

    fn stat(&self, port: &str, key: &str) -> u64 {
        let v: serde_json::Value = serde_json::from_str(&self.ctl(&["stats", "--json"])).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == port)
            .and_then(|p| p[key].as_u64())
            .unwrap_or_else(|| panic!("no {key} of {port} in {v}"))
    }

    /// Pings the TAP's address from namespace `a` (through the switch).
    fn ping(&self, count: u32) -> bool {
        sh(&format!(
            "ip netns exec {a} {bb} ping -c {count} -W 2 -w 10 {ip}",
            a = self.ns_a(),
            bb = busybox(),
            ip = self.ip_tap()
        ))
        .status
        .success()
    }

    /// Sends `bytes` random bytes over TCP from namespace `a` to a listener
    /// on the host port's address in `b`; asserts both ends' sha256 match.
    fn tcp(&self, bytes: usize, port: u16) {
        let bb = busybox();
        let src = self.dir.join("tx.bin");
        let dst = self.dir.join("rx.bin");
        must(&format!("head -c {bytes} /dev/urandom > {}", src.display()));
        let _ = std::fs::remove_file(&dst);
        let mut rx = KillOnDrop(
            Command::new("sh")
                .args([
                    "-c",
                    &format!(
                        "exec ip netns exec {b} {bb} nc -l -p {port} > {}",
                        dst.display(),
                        b = self.ns_b()
                    ),
                ])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        // Until the listener is up, connecting is refused: retry.
        let t0 = Instant::now();
        loop {
            let ok = sh(&format!(
                "ip netns exec {a} {bb} nc -w 5 {ip} {port} < {}",
                src.display(),
                a = self.ns_a(),
                ip = self.ip_tap()
            ))
            .status
            .success();
            if ok {
                break;
            }
            assert!(t0.elapsed() < WAIT, "cannot connect to the listener");
            std::thread::sleep(Duration::from_millis(200));
        }
        let t0 = Instant::now();
        loop {
            if let Some(s) = rx.0.try_wait().unwrap() {
                assert!(s.success(), "nc -l failed");
                break;
            }
            assert!(t0.elapsed() < WAIT, "the transfer does not end");
            std::thread::sleep(Duration::from_millis(50));
        }
        let sum = |p: &Path| must(&format!("sha256sum {}", p.display()))[..64].to_string();
        assert_eq!(
            std::fs::metadata(&dst).unwrap().len(),
            bytes as u64,
            "bytes received"
        );
        assert_eq!(sum(&src), sum(&dst), "sha256 of what was sent and received");
    }

    /// The XDP program attached to the veth end in `b`, if any.
    fn xdp_attached(&self) -> bool {
        let out = must(&format!(
            "ip -d -n {} link show {}",
            self.ns_b(),
            self.veth_b()
        ));
        out.contains("xdp") || out.contains("prog/xdp")
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.kill_daemon();
        let _ = sh(&format!(
            "ip netns del {} ; ip netns del {}",
            self.ns_a(),
            self.ns_b()
        ));
        if std::thread::panicking() {
            eprintln!("---- daemon log ----");
            eprintln!("{}", tail(&self.dir.join("daemon.log"), 40));
            eprintln!("---- kept in {} ----", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Ping and a 4 MB TCP transfer between a kernel stack behind a veth and the
/// host stack behind a TAP, through the switch, with the NIC in `mode`.
fn ping_and_tcp(name: &str, net: u8, mode: &str, driver: &str) {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new(name, net);
    n.start_daemon(None);
    let got = n.attach(mode);
    assert_eq!(got, driver, "driver for --mode {mode}");
    assert!(n.ping(3), "ping through the switch");
    n.tcp(4 << 20, 5001);
    let vb = format!("vale0:{}", n.veth_b());
    assert!(n.stat(&vb, "tx_packets") > 100, "frames from the NIC");
    assert!(
        n.stat(&vb, "rx_packets") > 100,
        "frames to the NIC (the ACKs)"
    );
    // Detach gives the interface back: no program left on it.
    n.ctl(&["detach", &vb]);
    assert!(!n.xdp_attached(), "XDP program left after detach");
    assert!(!n.ping(1), "ping must fail with the NIC detached");
}

#[test]
fn xdp_generic_ping_and_tcp_to_the_host_port() {
    ping_and_tcp("g", 71, "generic", "xdp-generic");
}

#[test]
fn xdp_native_ping_and_tcp_to_the_host_port() {
    ping_and_tcp("n", 72, "native", "xdp-native");
}

#[test]
fn af_packet_ping_and_tcp_to_the_host_port() {
    ping_and_tcp("p", 73, "packet", "af-packet");
}

/// A container's veth attached as it is, its peer keeping the default
/// offloads: auto mode picks AF_PACKET, which carries GSO frames and
/// partial checksums, and TCP from the peer's namespace to the host port
/// completes (over AF_XDP it stalled, silently).
#[test]
fn auto_mode_carries_tcp_from_a_veth_with_default_offloads() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::as_is("u", 74);
    n.start_daemon(None);
    let d = n.attach("auto");
    assert_eq!(d, "af-packet", "auto mode on a veth");
    assert!(n.ping(2), "ping through the switch");
    n.tcp(4 << 20, 5004);
    // GSO frames crossed whole: more bytes per frame than a wire's, as
    // the sender's kernel made them. Whether it makes any is its own
    // choice (a TCP sender clocked by ACKs one segment at a time sends
    // single segments): when its veth sent none, nothing can be checked.
    let vb = format!("vale0:{}", n.veth_b());
    let (frames, bytes) = (n.stat(&vb, "tx_packets"), n.stat(&vb, "tx_bytes"));
    let sent = |what: &str| -> u64 {
        must(&format!(
            "ip netns exec {} cat /sys/class/net/{}/statistics/{what}",
            n.ns_a(),
            n.veth_a()
        ))
        .trim()
        .parse()
        .expect("a counter")
    };
    let (sent_frames, sent_bytes) = (sent("tx_packets"), sent("tx_bytes"));
    if sent_frames > 0 && sent_bytes / sent_frames > 1514 {
        assert!(
            frames > 0 && bytes / frames > 1514,
            "{frames} frames, {bytes} bytes from the veth, whose peer sent {sent_frames} frames, {sent_bytes} bytes: its GSO frames were not carried whole"
        );
    } else {
        eprintln!(
            "the sender's kernel made no GSO frames this run ({sent_frames} frames, {sent_bytes} bytes): the switch carried {frames} frames, {bytes} bytes"
        );
    }
    // Its log says why.
    let log = std::fs::read_to_string(n.dir.join("daemon.log")).unwrap();
    assert!(
        log.contains("software interface"),
        "{}",
        tail(&n.dir.join("daemon.log"), 20)
    );
}

/// pkt-gen on a ring port of the switch sends frames out of the NIC: they
/// arrive at the other veth end, every one of them.
#[test]
fn pktgen_frames_leave_through_the_nic() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("k", 75);
    n.start_daemon(None);
    n.attach("native");
    let (a, va) = (n.ns_a(), n.veth_a());
    let mac = must(&format!("ip -n {a} -br link show {va}"))
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_string();
    let rx = |n: &Net| -> u64 {
        must(&format!(
            "ip netns exec {} cat /sys/class/net/{}/statistics/rx_packets",
            n.ns_a(),
            n.veth_a()
        ))
        .trim()
        .parse()
        .unwrap()
    };
    let before = rx(&n);
    const N: u64 = 20_000;
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&n.socket)
        .args([
            "pkt-gen",
            "-f",
            "tx",
            "-i",
            "vale0:gen",
            "-n",
            &N.to_string(),
            "-D",
            &mac,
            "-R",
            "200000",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vb = format!("vale0:{}", n.veth_b());
    wait_until("every frame out of the NIC", || {
        n.stat(&vb, "rx_packets") + n.stat(&vb, "drop_rx_full") >= N
    });
    let sent = n.stat(&vb, "rx_packets");
    wait_until("every frame at the peer", || rx(&n) >= before + sent);
    assert!(
        sent >= N * 99 / 100,
        "only {sent} of {N} frames left through the NIC"
    );
}

/// Detach and re-attach while a ping runs; kill -9 of the daemon: the
/// restarted daemon takes the dead one's XDP program off, and the interface
/// attaches and carries traffic again.
#[test]
fn reattach_under_traffic_and_recover_from_kill_9() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("r", 76);
    n.start_daemon(None);
    n.attach("native");
    assert!(n.ping(1));
    let vb = n.veth_b();
    let port = format!("vale0:{vb}");
    // Traffic while detaching and re-attaching.
    let mut pinger = Command::new("ip")
        .args(["netns", "exec", &n.ns_a(), busybox(), "ping", "-i", "0.05"])
        .arg(n.ip_tap())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        n.ctl(&["detach", &port]);
        assert!(!n.xdp_attached());
        n.ctl(&["attach", "vale0", &vb, "--mode", "native"]);
    }
    let _ = pinger.kill();
    let _ = pinger.wait();
    assert!(n.ping(2), "ping after re-attaching");

    // kill -9: the TAP goes with the process; the XDP program stays.
    n.kill_daemon();
    assert!(!n.has_link(&n.ns_b(), &n.tap()), "TAP outlived the daemon");
    n.start_daemon(None);
    assert!(
        !n.xdp_attached(),
        "the restarted daemon must remove the dead one's XDP program"
    );
    n.attach("native");
    assert!(n.ping(2), "ping after the daemon restart");
}

#[test]
fn bad_attach_requests_are_clear_errors() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("e", 77);
    n.start_daemon(None);
    let e = n.ctl_err(&["attach", "vale0", "nosuchif0"]);
    assert!(e.contains("no network interface named"), "{e}");
    let vb = n.veth_b();
    n.ctl(&["attach", "vale0", &vb, "--mode", "generic"]);
    let e = n.ctl_err(&["attach", "vale1", &vb]);
    assert!(e.contains("already attached"), "{e}");
    let e = n.ctl_err(&["attach", "vale0"]);
    assert!(e.contains("needs an interface"), "{e}");
    let e = n.ctl_err(&["attach", "vale0", "bad/name"]);
    assert!(e.contains("not a valid interface name"), "{e}");
    let e = n.ctl_err(&["detach", "vale0:nothere"]);
    assert!(e.contains("no port"), "{e}");
    // A ring port is not an interface.
    n.ctl(&["port", "add", "vale0:ring"]);
    let e = n.ctl_err(&["detach", "vale0:ring"]);
    assert!(e.contains("not an attached interface"), "{e}");
    n.kill_daemon();

    // An unprivileged daemon: a clear error naming what is missing.
    std::fs::set_permissions(&n.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let _ = std::fs::remove_file(&n.socket);
    n.start_daemon(Some("nobody"));
    let e = n.ctl_err(&["attach", "vale0", &vb]);
    assert!(e.contains("CAP_NET_ADMIN"), "{e}");
    let e = n.ctl_err(&["attach", "vale0", "--host", "tpx0"]);
    assert!(e.contains("CAP_NET_ADMIN"), "{e}");
}

/// An application on the NIC's own rings (`netmap:IF`, like netmap's native
/// mode): pkt-gen sends through them and every frame reaches the peer;
/// frames from the peer reach pkt-gen -f rx; when it exits, the interface
/// is the kernel's again.
#[test]
fn an_application_opens_the_nic_itself() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("m", 78);
    n.start_daemon(None);
    let (a, va, vb) = (n.ns_a(), n.veth_a(), n.veth_b());
    let rx = |n: &Net| -> u64 {
        must(&format!(
            "ip netns exec {} cat /sys/class/net/{}/statistics/rx_packets",
            n.ns_a(),
            n.veth_a()
        ))
        .trim()
        .parse()
        .unwrap()
    };
    let before = rx(&n);
    const N: u64 = 20_000;
    let port = format!("netmap:{vb}");
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&n.socket)
        .args(["pkt-gen", "-f", "tx", "-i", &port, "-n", &N.to_string()])
        .args(["-R", "200000", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("the frames at the peer", || rx(&n) >= before + N * 99 / 100);
    // A veth: auto mode opens it over AF_PACKET (its stack's offloads).
    assert!(
        !n.xdp_attached(),
        "the NIC is given back when pkt-gen exits"
    );
    assert!(
        !n.ctl(&["port", "list"]).contains(&port),
        "the port closes when pkt-gen exits"
    );

    // The other way: pkt-gen -f rx on the NIC's rings counts what the
    // peer sends (pings to a neighbour that never answers).
    let sink = Command::new(BIN)
        .arg("--socket")
        .arg(&n.socket)
        .args(["pkt-gen", "-f", "rx", "-i", &port, "--json", "-T", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let open = |n: &Net| {
        let v: serde_json::Value =
            serde_json::from_str(&n.ctl(&["port", "list", "--json"])).unwrap_or_default();
        v.as_array()
            .is_some_and(|a| a.iter().any(|p| p["name"] == port.as_str()))
    };
    wait_until("netmap:IF open", || open(&n));
    must(&format!(
        "ip -n {a} neigh replace 10.78.0.9 lladdr 02:00:00:00:00:09 dev {va}"
    ));
    // -w: an upper bound for a loaded machine (20 requests take 1 s).
    let _ = sh(&format!(
        "ip netns exec {a} {bb} ping -c 20 -i 0.05 -w 30 10.78.0.9",
        bb = busybox()
    ));
    // Stopped once the switch put all 20 in the port's rings (pkt-gen
    // drains its rings when stopped).
    wait_until("the pings in the port's rings", || {
        let v: serde_json::Value =
            serde_json::from_str(&n.ctl(&["stats", "--json"])).unwrap_or_default();
        v.as_array().is_some_and(|a| {
            a.iter()
                .any(|p| p["name"] == port.as_str() && p["rx_packets"].as_u64().unwrap_or(0) >= 20)
        })
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(sink.id() as i32, libc::SIGINT) };
    let out = sink.wait_with_output().unwrap();
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let v: serde_json::Value =
        serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert!(
        v["packets"].as_u64().unwrap() >= 20,
        "pkt-gen -f rx on {port} saw {v}"
    );
    wait_until("the NIC given back", || !n.xdp_attached());
}

/// `attach vale0 IF --host`, like `vale-ctl -h`: the NIC and a host port
/// named `IF^` in one request; both detach, and the TAP goes.
#[test]
fn nic_and_its_host_port_in_one_attach() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("h", 79);
    n.start_daemon(None);
    let vb = n.veth_b();
    let host = format!("{vb}^");
    let out = n.ctl(&["attach", "vale0", &vb, "--host"]);
    assert!(out.contains(&format!("vale0:{vb}")), "{out}");
    assert!(out.contains(&format!("vale0:{host}")), "{out}");
    assert!(n.has_link(&n.ns_b(), &host), "TAP {host} exists");
    assert_eq!(n.driver(&format!("vale0:{host}")), "tap");
    n.ctl(&["detach", &format!("vale0:{host}")]);
    n.ctl(&["detach", &format!("vale0:{vb}")]);
    wait_until("the TAP gone", || !n.has_link(&n.ns_b(), &host));
    assert!(!n.xdp_attached());
}

/// The CPU time (user + system, in clock ticks) process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the daemon runs");
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A host port whose TAP interface is deleted under the daemon (here with
/// `ip link del`; deleting its network namespace does the same): the TAP's
/// descriptor then polls in error for ever, which once kept a worker
/// spinning. The queue stops offering it: the daemon says so in its log,
/// keeps answering, and sits idle (the outcome: next to no CPU while
/// nothing happens, however loaded the machine).
#[test]
fn a_host_port_whose_interface_is_deleted_costs_no_cpu() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("x", 80);
    n.start_daemon(None);
    let host = format!("{}x", n.tag);
    n.ctl(&["attach", "vale0", "--host", &host]);
    assert!(n.has_link(&n.ns_b(), &host), "TAP {host} exists");
    must(&format!("ip -n {} link del {host}", n.ns_b()));
    let log = n.dir.join("daemon.log");
    wait_until("the daemon to notice the interface is gone", || {
        tail(&log, 50).contains("interface is gone")
    });
    let pid = n.daemon.as_ref().expect("the daemon").id();
    let t0 = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - t0;
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100);
    assert!(
        used * 5 < 2 * hz,
        "the daemon used {used} ticks (of {hz} a second) in 2 idle seconds; log:\n{}",
        tail(&log, 20)
    );
    let out = n.ctl(&["port", "list"]);
    assert!(out.contains(&format!("vale0:{host}")), "{out}");
}

/// Moves the calling thread into network namespace `ns` (setns affects
/// only the calling thread: the test's other threads stay where they are).
fn enter_netns(ns: &str) {
    let f = File::open(format!("/run/netns/{ns}")).expect("the namespace exists");
    // SAFETY: setns on a namespace descriptor we hold open for the call;
    // CLONE_NEWNET changes only this thread's network namespace.
    let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns({ns}): {}", std::io::Error::last_os_error());
}

/// Receive coalescing (on by default): UDP datagrams from namespace `a`
/// cross the veth into an AF_XDP port in back-to-back bursts (fast enough
/// for the worker to take them on its timer, each pause ending that) and
/// then as a trickle (frames that wake the worker one by one), and every
/// one of them reaches a listener behind the host port, however the
/// worker grouped them; then, with no traffic, the worker sleeps instead
/// of looking on.
#[test]
fn coalesced_frames_from_an_xdp_port_all_arrive_and_the_port_then_sleeps() {
    if !can_run() {
        return;
    }
    let _g = serial();
    let mut n = Net::new("c", 81);
    n.start_daemon(None);
    assert_eq!(n.attach("native"), "xdp-native");
    assert!(n.ping(1), "ping through the switch (and ARP resolved)");
    const BURSTS: usize = 20;
    const BURST: usize = 256;
    const TRICKLE: usize = 50;
    const N: usize = BURSTS * BURST + TRICKLE;
    let (ns_a, ns_b, ip) = (n.ns_a(), n.ns_b(), n.ip_tap());
    let listen: std::net::SocketAddr = format!("{ip}:5081").parse().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let listener = std::thread::spawn(move || {
        enter_netns(&ns_b);
        let sock = std::net::UdpSocket::bind(listen).expect("bind in b");
        // Room for every datagram even if this thread fell behind.
        let buf: libc::c_int = 32 << 20;
        // SAFETY: setsockopt reads one c_int from a local that lives
        // across the call, on a socket we own.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&sock),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&buf as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut got = 0usize;
        let mut b = [0u8; 64];
        let t0 = Instant::now();
        while got < N && t0.elapsed() < Duration::from_secs(60) {
            if sock.recv(&mut b).is_ok() {
                got += 1;
            }
        }
        got
    });
    ready_rx.recv().unwrap();
    let sender = std::thread::spawn(move || {
        enter_netns(&ns_a);
        let sock = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind in a");
        let payload = [0x5au8; 18];
        let send = |sock: &std::net::UdpSocket| {
            // A full socket buffer is waited out: no datagram is dropped
            // before it reaches the veth.
            while let Err(e) = sock.send_to(&payload, listen) {
                assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS), "send: {e}");
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        for _ in 0..BURSTS {
            for _ in 0..BURST {
                send(&sock);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        for _ in 0..TRICKLE {
            send(&sock);
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    sender.join().expect("the sender");
    let got = listener.join().expect("the listener");
    assert_eq!(
        got,
        N,
        "datagrams that crossed the AF_XDP port; log:\n{}",
        tail(&n.dir.join("daemon.log"), 20)
    );
    // Idle again: the worker waits for wake-ups instead of looking on its
    // timer (which would be thousands of wake-ups a second). A few come
    // from elsewhere (the kernel's own frames on the veth, counters).
    let wakeups = |n: &Net| -> u64 {
        let v: serde_json::Value = serde_json::from_str(&n.ctl(&["workers", "--json"])).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|w| w["wakeups"].as_u64().unwrap())
            .sum()
    };
    std::thread::sleep(Duration::from_millis(200));
    let w0 = wakeups(&n);
    std::thread::sleep(Duration::from_secs(1));
    let w1 = wakeups(&n);
    assert!(
        w1 - w0 < 200,
        "{} worker wake-ups in an idle second",
        w1 - w0
    );
}
