//! AF_XDP queues on a veth pair, in a network namespace of the test's own:
//! frames sent into one end with an AF_PACKET socket arrive through
//! `take_batch` byte for byte, frames given to `push` come out of the
//! other end; the XDP program goes when the queues do; `detach_stale`
//! removes the program a dead process left (forgotten in this process, or
//! a child killed with SIGKILL) and nothing else.
//!
//! Needs root (namespaces, XDP); without it, or with RINGSWITCH_SKIP_NETNS
//! set, the tests say so and pass, unless RINGSWITCH_TEST_REQUIRE_NETNS is
//! set. Uses `ip` (iproute2).

use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringswitch_frame::{FrameQueue, OffloadHdr, PushError, Stage, FRAME_MAX};
use ringswitch_netdev::xdp::{self, XdpMode};
use ringswitch_netdev::{DevError, Driver, NicConfig};

/// A local experimental ethertype: only our frames, whatever else the
/// kernels send.
const ETHERTYPE: u16 = 0x88b5;
const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const WAIT: Duration = Duration::from_secs(5);
/// A program that is not libxdp's (xdp-tools' filter, allow all).
const FOREIGN_PROG: &str = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_all.o";

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

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "`{cmd} {}` failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// A network namespace with a veth pair `a` (ours) / `b` (the peer),
/// deleted with everything in it on drop, even when the test failed.
struct Netns {
    name: String,
    a: String,
    b: String,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let id = std::process::id() % 100_000;
        let ns = Netns {
            name: format!("rsx{id}{tag}"),
            a: format!("rsx{id}{tag}a"),
            b: format!("rsx{id}{tag}b"),
        };
        assert!(
            ns.a.len() <= 15,
            "{} is too long for an interface name",
            ns.a
        );
        // A namespace of the same name left by a killed run of the same pid.
        let _ = run("ip", &["netns", "del", &ns.name]);
        run("ip", &["netns", "add", &ns.name]).unwrap();
        // No IPv6 chatter (router solicitations, MLD) on the veths.
        for key in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            let _ = run("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", key]);
        }
        let mac = |m: [u8; 6]| m.map(|b| format!("{b:02x}")).join(":");
        ns.ip(&[
            "link",
            "add",
            &ns.a,
            "address",
            &mac(MAC_A),
            "type",
            "veth",
            "peer",
            "name",
            &ns.b,
            "address",
            &mac(MAC_B),
        ]);
        ns.ip(&["link", "set", &ns.a, "up"]);
        ns.ip(&["link", "set", &ns.b, "up"]);
        ns
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all).unwrap()
    }

    /// `ip link show` of our end.
    fn link_a(&self) -> String {
        self.ip(&["link", "show", "dev", &self.a])
    }

    fn xdp_on_a(&self) -> bool {
        self.link_a().contains("xdp")
    }

    /// Moves the calling thread into the namespace.
    fn enter(name: &str) {
        let path = CString::new(format!("/run/netns/{name}")).unwrap();
        // SAFETY: a NUL-terminated path; the result is checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(
            fd >= 0,
            "opening {name}: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: setns on a namespace fd; affects only this thread.
        let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {name}: {}", std::io::Error::last_os_error());
    }

    /// Runs `f` on a thread inside the namespace (sockets, libxdp and
    /// interface lookups then all see it); the namespace is deleted after,
    /// whether `f` passed or not.
    fn run_in(tag: &str, f: impl FnOnce(&Netns) + Send) {
        let ns = Netns::new(tag);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                Netns::enter(&ns.name);
                f(&ns)
            })
            .join()
        });
        drop(ns);
        if let Err(p) = r {
            std::panic::resume_unwind(p);
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// An AF_PACKET socket on one interface, for our ethertype only.
struct Packet(OwnedFd);

impl Packet {
    fn open(ifname: &str) -> Packet {
        let proto = ETHERTYPE.to_be();
        // SAFETY: socket() with constant arguments; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let c = CString::new(ifname).unwrap();
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert_ne!(ifindex, 0, "no interface {ifname}");
        // SAFETY: sockaddr_ll is plain data; all zeroes is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: binds our socket to an address that lives across the call.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(
            r,
            0,
            "binding to {ifname}: {}",
            std::io::Error::last_os_error()
        );
        Packet(fd)
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: sends `frame`, which lives across the call.
        let r = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            r,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    fn recv(&self) -> Option<Vec<u8>> {
        if !readable(self.0.as_raw_fd(), WAIT) {
            return None;
        }
        let mut buf = vec![0u8; 4096];
        // SAFETY: receives into `buf`, at most its length.
        let r = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        assert!(r >= 0, "recv: {}", std::io::Error::last_os_error());
        buf.truncate(r as usize);
        Some(buf)
    }
}

fn readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one pollfd that lives across the call.
    let r = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    r == 1 && p.revents & libc::POLLIN != 0
}

/// A test frame: `seq` in the payload, then a pattern; `len` bytes in all.
fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32).wrapping_mul(7).wrapping_add(seq) as u8);
    }
    f
}

fn ours(f: &[u8]) -> bool {
    f.len() >= 14 && f[12..14] == ETHERTYPE.to_be_bytes()
}

/// Lengths covering the smallest Ethernet frame, odd sizes and a full
/// 1500-byte MTU.
fn lengths() -> impl Iterator<Item = (u32, usize)> {
    [
        60usize, 61, 64, 127, 128, 255, 512, 999, 1024, 1500, 1513, 1514,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, l)| (i as u32, l))
}

/// Frames sent into `b` arrive whole through `take_batch` on `a`.
fn check_rx(ns: &Netns, q: &mut dyn FrameQueue) {
    let peer = Packet::open(&ns.b);
    assert!(!q.has_work(), "frames before any were sent");
    let sent: Vec<Vec<u8>> = lengths().map(|(s, l)| frame(MAC_A, MAC_B, s, l)).collect();
    for f in &sent {
        peer.send(f);
    }
    assert!(
        readable(q.wake_fd().unwrap(), WAIT),
        "rx_fd never became readable"
    );
    assert!(q.has_work());
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < sent.len() && t0.elapsed() < WAIT {
        if !readable(q.wake_fd().unwrap(), Duration::from_millis(100)) {
            continue;
        }
        let mut stage = Stage::new(64);
        let n = q.take_batch(64, &mut stage).frames;
        for (f, h) in stage.to_vec() {
            assert_eq!(h, OffloadHdr::default());
            if ours(&f) {
                got.push(f);
            }
        }
        assert!(n > 0, "readable, but no frames");
    }
    assert_eq!(
        got.len(),
        sent.len(),
        "received {} of {} frames",
        got.len(),
        sent.len()
    );
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g, s, "frame changed on the way");
    }
    // A batch stops where the stage is full.
    for s in 0..3 {
        peer.send(&frame(MAC_A, MAC_B, 100 + s, 100));
    }
    let t0 = Instant::now();
    while !q.has_work() && t0.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut one = Stage::with_bytes(FRAME_MAX + 1, 1);
    assert_eq!(q.take_batch(64, &mut one).frames, 1);
    let mut rest = 0;
    let t0 = Instant::now();
    while rest < 2 && t0.elapsed() < WAIT {
        rest += q.take_batch(64, &mut Stage::new(64)).frames;
    }
    assert_eq!(rest, 2);
    assert!(!q.has_work());
    assert_eq!(q.stats().kernel_rx_dropped, 0);
}

/// Frames given to `push` on `a` come out of `b` whole.
fn check_tx(ns: &Netns, q: &mut dyn FrameQueue) {
    let peer = Packet::open(&ns.b);
    let sent: Vec<Vec<u8>> = lengths().map(|(s, l)| frame(MAC_B, MAC_A, s, l)).collect();
    for round in 0..3 {
        for f in &sent {
            q.push(&OffloadHdr::default(), f).unwrap();
        }
        q.flush().send();
        for (i, s) in sent.iter().enumerate() {
            let g = peer
                .recv()
                .unwrap_or_else(|| panic!("round {round}: frame {i} never arrived"));
            assert_eq!(&g, s, "round {round}: frame {i} changed on the way");
        }
    }
    // MTU 1500: up to 1518 bytes with a VLAN tag.
    let long = frame(MAC_B, MAC_A, 99, 1518);
    q.push(&OffloadHdr::default(), &long).unwrap();
    q.flush().send();
    assert_eq!(peer.recv().as_ref(), Some(&long));
    assert_eq!(
        q.push(&OffloadHdr::default(), &frame(MAC_B, MAC_A, 99, 1519)),
        Err(PushError::TooLong)
    );
    assert_eq!(q.stats().kernel_tx_invalid, 0);
}

fn open(ns: &Netns, mode: XdpMode) -> ringswitch_netdev::Nic {
    let nic = xdp::open(&NicConfig::new(&ns.a), mode).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    eprintln!("{mode:?}: {} ({})", nic.driver.as_str(), nic.reason);
    assert_eq!(nic.queues.len(), 1, "a veth has one queue");
    assert_eq!(nic.queues[0].lock().unwrap().driver(), nic.driver.as_str());
    assert!(ns.xdp_on_a(), "no XDP program attached:\n{}", ns.link_a());
    nic
}

#[test]
fn generic_rx_tx_and_detach_on_drop() {
    if !can_run() {
        return;
    }
    Netns::run_in("g", |ns| {
        let nic = open(ns, XdpMode::Generic);
        assert_eq!(nic.driver, Driver::XdpGeneric);
        assert!(ns.link_a().contains("xdpgeneric"), "{}", ns.link_a());
        check_rx(ns, &mut *nic.queues[0].lock().unwrap());
        check_tx(ns, &mut *nic.queues[0].lock().unwrap());
        drop(nic);
        assert!(!ns.xdp_on_a(), "the XDP program stayed:\n{}", ns.link_a());
    });
}

#[test]
fn native_rx_tx_and_detach_on_drop() {
    if !can_run() {
        return;
    }
    Netns::run_in("n", |ns| {
        let nic = open(ns, XdpMode::Native);
        // veth has native XDP but no zero-copy AF_XDP.
        assert_eq!(nic.driver, Driver::XdpNative);
        assert!(!ns.link_a().contains("xdpgeneric"), "{}", ns.link_a());
        check_rx(ns, &mut *nic.queues[0].lock().unwrap());
        check_tx(ns, &mut *nic.queues[0].lock().unwrap());
        drop(nic);
        assert!(!ns.xdp_on_a(), "the XDP program stayed:\n{}", ns.link_a());
    });
}

/// A veth is a software interface: its frames come from a local stack,
/// with GSO and partial checksums that AF_XDP cannot carry, so auto mode
/// takes AF_PACKET and says why; no XDP program is loaded.
#[test]
fn auto_mode_picks_af_packet_on_a_veth() {
    if !can_run() {
        return;
    }
    Netns::run_in("u", |ns| {
        assert!(matches!(
            ringswitch_netdev::iface::feed(&ns.a),
            Ok(ringswitch_netdev::iface::Feed::Software { ref driver }) if driver == "veth"
        ));
        let nic = ringswitch_netdev::open_nic(&NicConfig::new(&ns.a)).unwrap();
        assert_eq!(nic.driver, Driver::Packet, "{}", nic.reason);
        assert!(nic.reason.contains("software interface"), "{}", nic.reason);
        assert!(!ns.xdp_on_a(), "{}", ns.link_a());
        check_rx(ns, &mut *nic.queues[0].lock().unwrap());
        drop(nic);
    });
}

#[test]
fn native_unsupported_is_refused_and_generic_attaches() {
    if !can_run() {
        return;
    }
    Netns::run_in("i", |ns| {
        // ifb has no XDP in its driver.
        let ifb = format!("{}i", ns.name);
        ns.ip(&["link", "add", &ifb, "type", "ifb"]);
        ns.ip(&["link", "set", &ifb, "up"]);
        match xdp::open(&NicConfig::new(&ifb), XdpMode::Native) {
            Err(
                e @ DevError::Unsupported {
                    what: "native XDP", ..
                },
            ) => eprintln!("{e}"),
            Err(e) => panic!("native on ifb: {e}"),
            Ok(n) => panic!("native on ifb opened: {}", n.reason),
        }
        // Auto mode would take AF_PACKET on this software interface; the
        // generic fallback is what it tries on a device whose driver has
        // no native XDP (no such device can be made here).
        let mut cfg = NicConfig::new(&ifb);
        cfg.mode = ringswitch_netdev::NicMode::Generic;
        let nic = ringswitch_netdev::open_nic(&cfg).unwrap();
        eprintln!("generic: {} ({})", nic.driver.as_str(), nic.reason);
        assert_eq!(nic.driver, Driver::XdpGeneric);
        assert!(ns.ip(&["link", "show", "dev", &ifb]).contains("xdpgeneric"));
        drop(nic);
        assert!(!ns.ip(&["link", "show", "dev", &ifb]).contains("xdp"));
        let nic = ringswitch_netdev::open_nic(&NicConfig::new(&ifb)).unwrap();
        assert_eq!(nic.driver, Driver::Packet, "{}", nic.reason);
        drop(nic);
    });
}

#[test]
fn tx_ring_full_then_drained() {
    if !can_run() {
        return;
    }
    Netns::run_in("f", |ns| {
        let mut cfg = NicConfig::new(&ns.a);
        cfg.ring_size = 64;
        let nic = xdp::open(&cfg, XdpMode::Generic).unwrap();
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = Packet::open(&ns.b);
        let frames: Vec<Vec<u8>> = (0..64)
            .map(|s| frame(MAC_B, MAC_A, s, 60 + s as usize))
            .collect();
        for f in &frames {
            q.push(&OffloadHdr::default(), f).unwrap();
        }
        // 64 TX frames, none flushed: no room.
        assert_eq!(
            q.push(&OffloadHdr::default(), &frames[0]),
            Err(PushError::Full)
        );
        q.flush().send();
        for (i, s) in frames.iter().enumerate() {
            assert_eq!(peer.recv().as_ref(), Some(s), "frame {i}");
        }
        // Completions give the frames back.
        let t0 = Instant::now();
        let mut pushed = 0;
        while pushed < 64 && t0.elapsed() < WAIT {
            match q.push(&OffloadHdr::default(), &frames[pushed]) {
                Ok(()) => pushed += 1,
                Err(PushError::Full) => {
                    q.flush().send();
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(pushed, 64);
        q.flush().send();
        for s in &frames {
            assert_eq!(peer.recv().as_ref(), Some(s));
        }
    });
}

#[test]
fn tx_on_a_down_interface() {
    if !can_run() {
        return;
    }
    Netns::run_in("d", |ns| {
        let mut cfg = NicConfig::new(&ns.a);
        cfg.ring_size = 64;
        let nic = xdp::open(&cfg, XdpMode::Generic).unwrap();
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = Packet::open(&ns.b);
        ns.ip(&["link", "set", &ns.a, "down"]);
        let frames: Vec<Vec<u8>> = (0..64).map(|s| frame(MAC_B, MAC_A, s, 100)).collect();
        q.push(&OffloadHdr::default(), &frames[0]).unwrap();
        q.flush().send();
        for f in &frames[1..] {
            q.push(&OffloadHdr::default(), f).unwrap();
        }
        assert_eq!(
            q.push(&OffloadHdr::default(), &frames[0]),
            Err(PushError::Down)
        );
        // Up again: what waited on the ring goes at the next flush.
        ns.ip(&["link", "set", &ns.a, "up"]);
        q.flush().send();
        let mut got = 0;
        while let Some(f) = peer.recv() {
            assert_eq!(f, frames[got]);
            got += 1;
            if got == frames.len() {
                break;
            }
        }
        assert_eq!(got, frames.len(), "frames sent after the link came back");
    });
}

#[test]
fn other_mode_and_foreign_programs_are_refused() {
    if !can_run() {
        return;
    }
    Netns::run_in("b", |ns| {
        let nic = open(ns, XdpMode::Generic);
        // libxdp's program is there in generic mode: native cannot join it.
        match xdp::open(&NicConfig::new(&ns.a), XdpMode::Native) {
            Err(DevError::Unsupported {
                what: "native XDP", ..
            }) => {}
            Err(e) => panic!("native over generic: {e}"),
            Ok(_) => panic!("native over generic opened"),
        }
        drop(nic);
        assert!(!ns.xdp_on_a());

        if !std::path::Path::new(FOREIGN_PROG).exists() {
            eprintln!("{FOREIGN_PROG} is missing: foreign program case skipped");
            return;
        }
        ns.ip(&[
            "link",
            "set",
            "dev",
            &ns.a,
            "xdpgeneric",
            "obj",
            FOREIGN_PROG,
            "sec",
            "xdp",
        ]);
        for mode in [XdpMode::Generic, XdpMode::Native] {
            match xdp::open(&NicConfig::new(&ns.a), mode) {
                Err(e @ DevError::Busy { .. }) => eprintln!("{mode:?}: {e}"),
                Err(e) => panic!("{mode:?} over a foreign program: {e}"),
                Ok(_) => panic!("{mode:?} over a foreign program opened"),
            }
        }
        assert!(
            !xdp::detach_stale(&ns.a).unwrap(),
            "detach_stale removed a foreign program"
        );
        assert!(ns.link_a().contains("xdpfilt_alw_all"), "{}", ns.link_a());
        ns.ip(&["link", "set", "dev", &ns.a, "xdpgeneric", "off"]);
    });
}

#[test]
fn detach_stale_after_forget() {
    if !can_run() {
        return;
    }
    Netns::run_in("s", |ns| {
        assert!(!xdp::detach_stale(&ns.a).unwrap(), "nothing to remove yet");
        let nic = open(ns, XdpMode::Generic);
        // As if the process had died: the queues are never dropped.
        std::mem::forget(nic);
        assert!(ns.xdp_on_a());
        assert!(xdp::detach_stale(&ns.a).unwrap());
        assert!(!ns.xdp_on_a(), "{}", ns.link_a());
        assert!(!xdp::detach_stale(&ns.a).unwrap());
        // The forgotten socket goes with the namespace.
    });
}

#[test]
fn detach_stale_after_sigkill() {
    if !can_run() {
        return;
    }
    Netns::run_in("k", |ns| {
        for mode in ["native", "generic"] {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--ignored",
                    "--exact",
                    "child_holds_a_nic",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("RSX_CHILD", format!("{} {} {mode}", ns.name, ns.a))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let out = child.stdout.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if line.contains("RSX-READY") {
                        let _ = tx.send(());
                    }
                }
            });
            let ready = rx.recv_timeout(Duration::from_secs(30));
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            ready.expect("the child never attached");
            assert!(
                ns.xdp_on_a(),
                "the killed child's program is gone:\n{}",
                ns.link_a()
            );
            assert!(xdp::detach_stale(&ns.a).unwrap(), "{mode}");
            assert!(!ns.xdp_on_a(), "{}", ns.link_a());
            // The interface is clean: it attaches again, and detaches on drop.
            drop(open(ns, XdpMode::Native));
            assert!(!ns.xdp_on_a(), "{}", ns.link_a());
        }
    });
}

/// Run by `detach_stale_after_sigkill` in a child process: attaches, says
/// so, and waits to be killed.
#[test]
#[ignore = "a helper process of detach_stale_after_sigkill"]
fn child_holds_a_nic() {
    let Ok(spec) = std::env::var("RSX_CHILD") else {
        return;
    };
    let v: Vec<&str> = spec.split(' ').collect();
    let [netns, ifname, mode] = v[..] else {
        panic!("RSX_CHILD={spec}");
    };
    Netns::enter(netns);
    let mode = if mode == "native" {
        XdpMode::Native
    } else {
        XdpMode::Generic
    };
    let nic = xdp::open(&NicConfig::new(ifname), mode).unwrap();
    println!("RSX-READY {}", nic.driver.as_str());
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn bad_names_and_queue_counts() {
    let cfg = NicConfig::new("rsxnosuchif0");
    assert!(matches!(
        xdp::open(&cfg, XdpMode::Generic),
        Err(DevError::NoSuchInterface { .. })
    ));
    assert!(matches!(
        xdp::open(&cfg, XdpMode::Native),
        Err(DevError::NoSuchInterface { .. })
    ));
    // Nothing left on an interface that is gone.
    assert!(!xdp::detach_stale("rsxnosuchif0").unwrap());
    assert!(matches!(
        xdp::detach_stale("bad/name"),
        Err(DevError::BadName { .. })
    ));
    assert!(matches!(
        xdp::open(&NicConfig::new("bad/name"), XdpMode::Generic),
        Err(DevError::BadName { .. })
    ));
    if !can_run() {
        return;
    }
    Netns::run_in("q", |ns| {
        let mut cfg = NicConfig::new(&ns.a);
        cfg.queues = Some(2);
        match xdp::open(&cfg, XdpMode::Generic) {
            Err(e @ DevError::Unsupported { .. }) => eprintln!("{e}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened 2 queues of a 1-queue veth"),
        }
        cfg.queues = Some(1);
        cfg.ring_size = 1000;
        assert!(matches!(
            xdp::open(&cfg, XdpMode::Generic),
            Err(DevError::Unsupported { .. })
        ));
        assert!(!ns.xdp_on_a());
    });
}
