//! Shared by the AF_PACKET and TAP tests: a network namespace of the test's
//! own (deleted with everything in it on drop, even when the test failed),
//! a plain AF_PACKET socket to play the other end, and frame builders with
//! real checksums.

#![allow(dead_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use ringswitch_frame::{FrameQueue, OffloadHdr, Stage, FRAME_MAX};
use ringswitch_offload::checksum::{add, pseudo_header_v4, sum};

/// A local experimental EtherType: only our frames, whatever else the
/// kernel sends.
pub const ETHERTYPE: u16 = 0x88b5;
pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
pub const WAIT: Duration = Duration::from_secs(5);

/// Whether namespace tests can run here (root, not skipped); says why not.
pub fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || std::env::var_os("RINGSWITCH_SKIP_NETNS").is_some() {
        assert!(
            std::env::var_os("RINGSWITCH_TEST_REQUIRE_NETNS").is_none(),
            "namespace tests required but not possible here"
        );
        eprintln!("skipped: needs root for network namespaces (or RINGSWITCH_SKIP_NETNS is set)");
        return false;
    }
    true
}

pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
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

/// A network namespace `<prefix><pid><tag>`, with a veth pair `…a` (ours)
/// / `…b` (the peer) if asked.
pub struct Netns {
    pub name: String,
    pub a: String,
    pub b: String,
}

impl Netns {
    pub fn new(prefix: &str, tag: &str, veth: bool) -> Netns {
        let id = std::process::id() % 100_000;
        let ns = Netns {
            name: format!("{prefix}{id}{tag}"),
            a: format!("{prefix}{id}{tag}a"),
            b: format!("{prefix}{id}{tag}b"),
        };
        assert!(
            ns.a.len() <= 15,
            "{} is too long for an interface name",
            ns.a
        );
        // A namespace of the same name left by a killed run of the same pid.
        let _ = run("ip", &["netns", "del", &ns.name]);
        run("ip", &["netns", "add", &ns.name]).unwrap();
        // From here on, dropping `ns` deletes it.
        // No IPv6 chatter (router solicitations, MLD).
        for key in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            let _ = run("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", key]);
        }
        ns.ip(&["link", "set", "lo", "up"]);
        if veth {
            ns.ip(&[
                "link",
                "add",
                &ns.a,
                "address",
                &mac_str(MAC_A),
                "type",
                "veth",
                "peer",
                "name",
                &ns.b,
                "address",
                &mac_str(MAC_B),
            ]);
            ns.ip(&["link", "set", &ns.a, "up"]);
            ns.ip(&["link", "set", &ns.b, "up"]);
        }
        ns
    }

    /// `ip -n NS args…`; panics on failure.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all).unwrap()
    }

    /// Moves the calling thread into namespace `name`.
    pub fn enter(name: &str) {
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

    /// Runs `f` on a thread inside a fresh namespace (sockets, TAPs and
    /// interface lookups all see it); the namespace is deleted after,
    /// whether `f` passed or not.
    pub fn run_in<T: Send>(
        prefix: &str,
        tag: &str,
        veth: bool,
        f: impl FnOnce(&Netns) -> T + Send,
    ) -> T {
        let ns = Netns::new(prefix, tag, veth);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                Netns::enter(&ns.name);
                f(&ns)
            })
            .join()
        });
        drop(ns);
        r.unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// Whether `f` holds within a second (polled). For what a closed fd
/// releases: a child forked by another test thread (to run `ip`) holds
/// copies of every fd until it execs.
pub fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() > Duration::from_secs(1) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn mac_str(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

/// A plain AF_PACKET socket on one interface (of the calling thread's
/// namespace), receiving EtherType `proto` (or all, with ETH_P_ALL).
pub struct RawSock(pub OwnedFd);

impl RawSock {
    pub fn open(ifname: &str, proto: u16) -> RawSock {
        let proto = proto.to_be();
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
        // Room for a burst of a thousand frames.
        let big: libc::c_int = 16 << 20;
        // SAFETY: reads an int that lives across the call.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&big as *const libc::c_int).cast(),
                4,
            )
        };
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
        RawSock(fd)
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: sends `frame`, which lives across the call.
        let r = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            r,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The next frame, or None after `timeout`.
    pub fn recv_within(&self, timeout: Duration) -> Option<Vec<u8>> {
        if !readable(self.0.as_raw_fd(), timeout) {
            return None;
        }
        let mut buf = vec![0u8; 70_000];
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

    pub fn recv(&self) -> Option<Vec<u8>> {
        self.recv_within(WAIT)
    }
}

pub fn readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one pollfd that lives across the call.
    let r = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    r == 1 && p.revents & libc::POLLIN != 0
}

/// A test frame of our EtherType: `seq` in the payload, then a pattern;
/// `len` bytes in all.
pub fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
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

/// Whether `f` is one of ours (EtherType at 12, or after one VLAN tag).
pub fn ours(f: &[u8]) -> bool {
    f.len() >= 18
        && (f[12..14] == ETHERTYPE.to_be_bytes()
            || (matches!(f[12..14], [0x81, 0x00] | [0x88, 0xa8])
                && f[16..18] == ETHERTYPE.to_be_bytes()))
}

/// The sequence number in one of our frames.
pub fn seq_of(f: &[u8]) -> u32 {
    let at = if f[12..14] == ETHERTYPE.to_be_bytes() {
        14
    } else {
        18
    };
    u32::from_be_bytes(f[at..at + 4].try_into().unwrap())
}

/// An Ethernet header.
pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// Appends an IPv4 header (no options, DF, TTL 64, checksum computed) for
/// `payload_len` bytes of protocol `proto`.
pub fn ipv4(f: &mut Vec<u8>, src: [u8; 4], dst: [u8; 4], proto: u8, payload_len: usize) {
    let start = f.len();
    let total = (20 + payload_len) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let c = !sum(&f[start..start + 20]);
    f[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
}

/// Whether the IPv4 packet at `ip` (header checksum) and its TCP, UDP or
/// ICMP checksum verify.
pub fn ipv4_checksums_ok(ip: &[u8]) -> bool {
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if sum(&ip[..ihl]) != 0xffff || total > ip.len() {
        return false;
    }
    let l4 = &ip[ihl..total];
    let proto = ip[9];
    match proto {
        1 => sum(l4) == 0xffff,
        6 | 17 => {
            let ph = pseudo_header_v4(
                ip[12..16].try_into().unwrap(),
                ip[16..20].try_into().unwrap(),
                proto,
                l4.len() as u16,
            );
            add(ph, sum(l4)) == 0xffff
        }
        _ => true,
    }
}

/// Appends a UDP datagram (checksum computed) to an IPv4 header just
/// appended.
pub fn udp(f: &mut Vec<u8>, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) {
    let start = f.len();
    let len = (8 + payload.len()) as u16;
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let c = !add(pseudo_header_v4(src, dst, 17, len), sum(&f[start..]));
    f[start + 6..start + 8].copy_from_slice(&c.to_be_bytes());
}

/// An Ethernet + IPv4 + UDP frame.
pub fn udp_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = eth(dst_mac, src_mac, 0x0800);
    ipv4(&mut f, src, dst, 17, 8 + payload.len());
    udp(&mut f, src, dst, sport, dport, payload);
    f
}

/// Takes a batch from a queue onto a fresh stage (allocates: tests only)
/// and shows `f` each frame taken, in order, until `f` returns false;
/// returns how many frames were taken.
pub trait RxBatch {
    fn rx_batch(&mut self, max: usize, f: &mut dyn FnMut(&[u8], &OffloadHdr) -> bool) -> usize;

    /// Takes one frame: the stage has room for one only, so the queue
    /// stops after it.
    fn rx_one(&mut self) -> Option<(Vec<u8>, OffloadHdr)>;
}

impl<Q: FrameQueue + ?Sized> RxBatch for Q {
    fn rx_batch(&mut self, max: usize, f: &mut dyn FnMut(&[u8], &OffloadHdr) -> bool) -> usize {
        let mut stage = Stage::new(max);
        let taken = self.take_batch(max, &mut stage);
        taken.wake.send();
        for fr in stage.frames() {
            if !f(stage.bytes(fr), &fr.hdr) {
                break;
            }
        }
        taken.frames
    }

    fn rx_one(&mut self) -> Option<(Vec<u8>, OffloadHdr)> {
        let mut stage = Stage::with_bytes(FRAME_MAX + 1, 1);
        let taken = self.take_batch(64, &mut stage);
        taken.wake.send();
        assert!(taken.frames <= 1, "a full stage stops a batch");
        stage.to_vec().pop()
    }
}
