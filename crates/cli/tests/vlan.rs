//! VLANs end to end: ports made with `ctl port add --vlan/--trunk` and
//! `ctl attach --trunk` on a daemon process; tenants on one switch reach
//! only their own VLAN (pkt-gen processes, their reports and `ctl stats`);
//! a trunk carries both tenants tagged, to a ring port and to a TAP read
//! from the host's side; what a port does not carry is dropped and counted
//! in `drop_vlan`.

mod common;
// Sending and receiving on a port's rings, as the daemon's tests do.
#[path = "../../daemon/tests/common/mod.rs"]
mod ring;

use std::process::{Child, Command};
use std::time::Instant;

use common::{interrupt, text, wait_until, Daemon, BIN, DEADLINE};
use ringswitch_client::Port;

const SWITCH: &str = "vale0";

/// `ringswitch ctl ARGS` on `d`; its standard output.
fn ctl(d: &Daemon, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&d.socket)
        .arg("ctl")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `port`'s counter `k` in `ctl stats --json`.
fn counter(d: &Daemon, port: &str, k: &str) -> u64 {
    let p = d
        .port_stats(port)
        .unwrap_or_else(|| panic!("no counters for {port}"));
    p[k].as_u64()
        .unwrap_or_else(|| panic!("no {k} in the counters of {port}: {p}"))
}

fn full(p: &str) -> String {
    format!("{SWITCH}:{p}")
}

/// The JSON report pkt-gen prints as its last line.
fn report(c: Child) -> serde_json::Value {
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "pkt-gen: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no JSON report ({e}) in:\n{stdout}"))
}

fn packets(r: &serde_json::Value) -> u64 {
    r["packets"]
        .as_u64()
        .unwrap_or_else(|| panic!("no packets in {r}"))
}

/// Two tenants on one switch, with pkt-gen: broadcasts from a port of
/// VLAN 10 reach the other port of VLAN 10 and no port of VLAN 20, and the
/// other way round; pkt-gen's reports and the switch's counters agree.
#[test]
fn tenants_on_one_switch_reach_only_their_own_vlan() {
    const N: u64 = 1000;
    let d = Daemon::start("vlan-tenants");
    for (p, vid) in [("a1", "10"), ("a2", "10"), ("b1", "20"), ("b2", "20")] {
        ctl(&d, &["port", "add", &full(p), "--vlan", vid]);
    }
    let list = ctl(&d, &["port", "list"]);
    assert!(list.lines().next().unwrap().contains("VLAN"), "{list}");
    for (p, v) in [("a1", "access:10"), ("b2", "access:20")] {
        let line = list
            .lines()
            .find(|l| l.starts_with(&full(p)))
            .unwrap_or_else(|| panic!("no {p} in\n{list}"));
        assert!(line.ends_with(v), "{line}");
    }

    // (sender, its VLAN's other port, the other VLAN's ports)
    for (from, mate, others) in [("a1", "a2", ["b1", "b2"]), ("b1", "b2", ["a1", "a2"])] {
        let rx_ports = [mate, others[0], others[1]];
        let before: Vec<u64> = rx_ports
            .iter()
            .map(|p| counter(&d, &full(p), "rx_packets"))
            .collect();
        let rx: Vec<Child> = rx_ports
            .iter()
            .map(|p| d.pktgen(&["-i", &full(p), "-f", "rx"]))
            .collect();
        let names: Vec<String> = rx_ports.iter().map(|p| full(p)).collect();
        d.wait_open(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let tx = d.pktgen(&["-i", &full(from), "-f", "tx", "-n", &N.to_string()]);
        assert_eq!(packets(&report(tx)), N);
        // Every frame reached the mate (or its full ring): the switch
        // has forwarded them all, to wherever it forwards them.
        let mate_drops = d.wait_accounted(&full(mate), before[0] + N);
        let after: Vec<u64> = rx_ports
            .iter()
            .map(|p| counter(&d, &full(p), "rx_packets"))
            .collect();
        for r in &rx {
            interrupt(r);
        }
        let got: Vec<u64> = rx.into_iter().map(|c| packets(&report(c))).collect();
        assert_eq!(
            got[0] + mate_drops,
            N,
            "{mate} got what {from} sent: {got:?}, {mate_drops} dropped on a full ring"
        );
        assert_eq!(
            after[0] - before[0],
            got[0],
            "{mate}: pkt-gen and ctl stats agree"
        );
        for (k, p) in others.iter().enumerate() {
            assert_eq!(
                got[k + 1],
                0,
                "{p} is in the other VLAN but got frames from {from}"
            );
            assert_eq!(after[k + 1], before[k + 1], "{p}'s rx_packets moved");
            assert_eq!(counter(&d, &full(p), "drop_rx_full"), 0, "{p}");
        }
        assert_eq!(counter(&d, &full(from), "drop_vlan"), 0, "{from}");
    }
    assert_eq!(counter(&d, &full("a1"), "tx_packets"), N);
    assert_eq!(counter(&d, &full("b1"), "tx_packets"), N);
    let stats = ctl(&d, &["stats"]);
    assert!(
        stats.lines().next().unwrap().contains("DROP_VLAN"),
        "{stats}"
    );
}

const ETH_TYPE: [u8; 2] = [0x88, 0xb5];
const TPID: [u8; 2] = [0x81, 0x00];

fn mac(last: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, last]
}

/// A broadcast frame from `src` with `seq` in its payload, 60 bytes before
/// a tag; with `tci`, tagged (802.1Q) after the source address.
fn frame(src: [u8; 6], tci: Option<u16>, seq: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&src);
    if let Some(t) = tci {
        f.extend_from_slice(&TPID);
        f.extend_from_slice(&t.to_be_bytes());
    }
    f.extend_from_slice(&ETH_TYPE);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(60 + if tci.is_some() { 4 } else { 0 }, 0);
    f
}

/// The frame without its tag, and the tag's TCI, if it has one.
fn untag(f: &[u8]) -> (Vec<u8>, Option<u16>) {
    if f.len() >= 18 && f[12..14] == TPID {
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&f[16..]);
        (g, Some(u16::from_be_bytes([f[14], f[15]])))
    } else {
        (f.to_vec(), None)
    }
}

/// Sends `frames` on TX ring 0 of `p`, all of them.
fn send(p: &mut Port, frames: &[Vec<u8>]) {
    assert_eq!(ring::send(p, frames), frames.len(), "no room to send");
}

/// Receives on RX ring 0 of `p` until `n` frames arrived.
fn recv_n(p: &mut Port, n: usize, what: &str) -> Vec<Vec<u8>> {
    let got = ring::recv_n(p, n);
    assert_eq!(got.len(), n, "{what}: {} of {n} frames came", got.len());
    got
}

/// What is in `p`'s RX ring now (after a sync).
fn drain(p: &mut Port) -> Vec<Vec<u8>> {
    let mut rx = p.rx(0);
    rx.sync().unwrap();
    let k = rx.space();
    let out = (0..k)
        .map(|j| rx.slot(j).unwrap().payload().to_vec())
        .collect();
    rx.advance(k);
    rx.sync().unwrap();
    out
}

/// Ring ports in the test process: a trunk of 10 and 20 gets both
/// tenants' frames tagged, and its tagged frames reach the access port of
/// their VLAN untagged; a trunk with 0 carries untagged frames; frames of
/// a VLAN a port does not carry (a tag on an access port, a VLAN outside a
/// trunk's set, an untagged frame on a trunk without 0) are dropped and
/// counted in `drop_vlan`; an access port's priority bits are kept.
#[test]
fn a_trunk_carries_both_tenants_tagged_and_drops_what_it_does_not_carry() {
    const N: usize = 100;
    let d = Daemon::start("vlan-trunk");
    for (p, opt, v) in [
        ("a1", "--vlan", "10"),
        ("b1", "--vlan", "20"),
        ("tr", "--trunk", "10,20"),
        ("tr0", "--trunk", "0,10"),
        ("u", "--trunk", "0"),
    ] {
        ctl(&d, &["port", "add", &full(p), opt, v]);
    }
    let open = |p: &str| Port::open_at(&d.socket, &full(p)).unwrap();
    let (mut a1, mut b1, mut tr, mut tr0, mut u) =
        (open("a1"), open("b1"), open("tr"), open("tr0"), open("u"));
    let seqs = |src: u8, tci: Option<u16>, base: u32| -> Vec<Vec<u8>> {
        (0..N as u32)
            .map(|k| frame(mac(src), tci, base + k))
            .collect()
    };
    let nothing = |p: &mut Port, name: &str, phase: &str| {
        let got = drain(p);
        assert!(got.is_empty(), "{phase}: {name} got {} frames", got.len());
    };

    // 1. From the access port of VLAN 10: tagged 10 on both trunks that
    // carry it, as sent once untagged; nowhere else.
    let sent = seqs(0xa1, None, 0);
    send(&mut a1, &sent);
    for (p, name) in [(&mut tr, "tr"), (&mut tr0, "tr0")] {
        let got = recv_n(p, N, name);
        for (g, s) in got.iter().zip(&sent) {
            let (inner, tci) = untag(g);
            assert_eq!(tci.map(|t| t & 0xfff), Some(10), "{name}: {g:02x?}");
            assert_eq!(&inner, s, "{name}: the frame as sent, with a tag");
        }
    }
    nothing(&mut b1, "b1", "VLAN 10 from a1");
    nothing(&mut u, "u", "VLAN 10 from a1");

    // 2. From the access port of VLAN 20: tagged 20 on tr only.
    let sent = seqs(0xb1, None, 1000);
    send(&mut b1, &sent);
    for g in recv_n(&mut tr, N, "tr") {
        assert_eq!(untag(&g).1.map(|t| t & 0xfff), Some(20), "{g:02x?}");
    }
    for (p, name) in [(&mut a1, "a1"), (&mut tr0, "tr0"), (&mut u, "u")] {
        nothing(p, name, "VLAN 20 from b1");
    }

    // 3. Tagged 10 from the trunk: untagged on the access port of 10,
    // still tagged on the other trunk of 10.
    let sent = seqs(0x71, Some(10), 2000);
    send(&mut tr, &sent);
    for (g, s) in recv_n(&mut a1, N, "a1").iter().zip(&sent) {
        assert_eq!(untag(g).1, None, "an access port gets untagged frames");
        assert_eq!(g, &untag(s).0);
    }
    for (g, s) in recv_n(&mut tr0, N, "tr0").iter().zip(&sent) {
        assert_eq!(g, s, "trunk to trunk: as sent");
    }
    nothing(&mut b1, "b1", "VLAN 10 from tr");
    nothing(&mut u, "u", "VLAN 10 from tr");

    // 4. What tr does not carry: VLAN 30, and untagged frames (no 0 in
    // its set). Dropped where they come in, and counted there.
    send(&mut tr, &seqs(0x72, Some(30), 3000));
    send(&mut tr, &seqs(0x73, None, 4000));
    wait_until("tr's 200 frames of other VLANs counted", || {
        counter(&d, &full("tr"), "drop_vlan") >= 2 * N as u64
    });

    // 5. Untagged frames from a trunk with 0: to the other trunk with 0
    // only, untagged.
    let sent = seqs(0x70, None, 5000);
    send(&mut tr0, &sent);
    assert_eq!(recv_n(&mut u, N, "u"), sent, "untagged, as sent");

    // 6. A tagged frame on an access port is dropped there; a priority
    // tag (VID 0) is not a VLAN: the frame is in the port's VLAN, and
    // keeps its priority on a trunk.
    send(&mut a1, &seqs(0xa1, Some(20), 6000));
    wait_until("a1's tagged frames counted", || {
        counter(&d, &full("a1"), "drop_vlan") >= N as u64
    });
    let pcp5 = 5 << 13;
    send(&mut a1, &seqs(0xa1, Some(pcp5), 7000));
    for g in recv_n(&mut tr, N, "tr") {
        assert_eq!(untag(&g).1, Some(pcp5 | 10), "{g:02x?}");
    }
    recv_n(&mut tr0, N, "tr0");

    // Everything sent is accounted for, exactly.
    let n = N as u64;
    for (p, rx, drop_vlan) in [
        ("a1", n, n),
        ("b1", 0, 0),
        ("tr", 3 * n, 2 * n),
        ("tr0", 3 * n, 0),
        ("u", n, 0),
    ] {
        let s = d.port_stats(&full(p)).unwrap();
        assert_eq!(s["rx_packets"], rx, "{p}: {s}");
        assert_eq!(s["drop_vlan"], drop_vlan, "{p}: {s}");
        assert_eq!(s["drop_rx_full"], 0, "{p}: {s}");
    }
    for (p, name) in [
        (&mut a1, "a1"),
        (&mut b1, "b1"),
        (&mut tr, "tr"),
        (&mut tr0, "tr0"),
        (&mut u, "u"),
    ] {
        nothing(p, name, "the end");
    }
    // Learned per (VLAN, address), from the frames let in only.
    let macs: serde_json::Value =
        serde_json::from_str(&ctl(&d, &["macs", SWITCH, "--json"])).unwrap();
    let mut learned: Vec<(String, u64, String)> = macs
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mac"].as_str().unwrap().to_string(),
                m["vlan"].as_u64().unwrap(),
                m["port"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    learned.sort();
    let want = |m: &str, v: u64, p: &str| (format!("02:00:00:00:00:{m}"), v, full(p));
    assert_eq!(
        learned,
        [
            want("70", 0, "tr0"),
            want("71", 10, "tr"),
            want("a1", 10, "a1"),
            want("b1", 20, "b1"),
        ]
    );
    let table = ctl(&d, &["macs", SWITCH]);
    assert!(table.lines().next().unwrap().contains("VLAN"), "{table}");
}

/// A packet socket on interface `ifname` that sees every frame, with the
/// VLAN tag the kernel may have taken out of the frame in its auxiliary
/// data.
struct HostSocket {
    fd: std::os::fd::OwnedFd,
    ifindex: i32,
}

impl HostSocket {
    fn open(ifname: &str) -> HostSocket {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        assert!(ifindex > 0, "no interface {ifname}");
        let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
        // SAFETY: socket has no memory preconditions.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: fd is a new descriptor only this value owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let s = HostSocket { fd, ifindex };
        // SAFETY: an all-zero sockaddr_ll is valid; the fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto as u16;
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a sockaddr_ll of the size given.
        let r = unsafe {
            libc::bind(
                s.raw(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        s.set(libc::SOL_PACKET, libc::PACKET_AUXDATA, &1i32);
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        s.set(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv);
        s
    }

    fn raw(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    fn set<T>(&self, level: i32, name: i32, v: &T) {
        // SAFETY: v points to a T of the size given.
        let r = unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                (v as *const T).cast(),
                std::mem::size_of::<T>() as u32,
            )
        };
        assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
    }

    /// Sends `f` out of the interface (into the switch).
    fn send(&self, f: &[u8]) {
        // SAFETY: an all-zero sockaddr_ll is valid; the fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&f[..6]);
        // SAFETY: f and sll are valid for the sizes given.
        let n = unsafe {
            libc::sendto(
                self.raw(),
                f.as_ptr().cast(),
                f.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            n,
            f.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// One frame that came in on the interface, with its tag put back in
    /// if the kernel took it out; none within the receive timeout.
    fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        // SAFETY: all-zero is a valid value of these C structs.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut ctl = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&ctl);
        loop {
            // SAFETY: msg points to buffers that live across the call.
            let n = unsafe { libc::recvmsg(self.raw(), &mut msg, 0) };
            if n < 0 {
                return None; // the timeout
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue; // what this socket (or the kernel) sent
            }
            let mut f = buf[..n as usize].to_vec();
            // SAFETY: msg's control buffer was filled by recvmsg; the
            // CMSG macros walk it within msg_controllen.
            let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
            while !c.is_null() {
                // SAFETY: c points to a control message header in ctl.
                let h = unsafe { &*c };
                if h.cmsg_level == libc::SOL_PACKET && h.cmsg_type == libc::PACKET_AUXDATA {
                    // SAFETY: PACKET_AUXDATA carries a tpacket_auxdata;
                    // read unaligned, as CMSG_DATA promises no alignment.
                    let aux: libc::tpacket_auxdata =
                        unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                    if aux.tp_status & libc::TP_STATUS_VLAN_VALID != 0 && f.len() >= 12 {
                        let mut tag = TPID.to_vec();
                        tag.extend_from_slice(&aux.tp_vlan_tci.to_be_bytes());
                        f.splice(12..12, tag);
                    }
                }
                // SAFETY: as above.
                c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
            }
            return Some(f);
        }
    }
}

/// A trunk to the host: a TAP attached with `ctl attach --trunk 10,20`,
/// read from the host's side with a packet socket, carries both tenants'
/// frames tagged 10 and 20; tagged frames the host sends reach the access
/// port of their VLAN untagged; untagged ones are dropped and counted
/// (0 is not in the trunk's set). Needs root and /dev/net/tun; skipped
/// with a message otherwise.
#[test]
fn a_tap_trunk_carries_both_tenants_to_the_host() {
    const N: usize = 50;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 || !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("skipped: creating a TAP needs root and /dev/net/tun");
        return;
    }
    let d = Daemon::start("vlan-tap");
    ctl(&d, &["port", "add", &full("a1"), "--vlan", "10"]);
    ctl(&d, &["port", "add", &full("b1"), "--vlan", "20"]);
    let tap = format!("rsvt{}", std::process::id() % 100_000);
    ctl(&d, &["attach", SWITCH, "--host", &tap, "--trunk", "10,20"]);
    let list = ctl(&d, &["port", "list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with(&full(&tap)) && l.ends_with("trunk:10,20")),
        "{list}"
    );
    // The kernel must send nothing of its own into the switch: no IPv6
    // (router solicitations, MLD), no address.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{tap}/disable_ipv6"), "1");
    let up = Command::new("ip")
        .args(["link", "set", "dev", &tap, "up"])
        .status()
        .unwrap();
    assert!(up.success(), "ip link set {tap} up");
    let host = HostSocket::open(&tap);
    let open = |p: &str| Port::open_at(&d.socket, &full(p)).unwrap();
    let (mut a1, mut b1) = (open("a1"), open("b1"));

    // Both tenants, tagged, on the host's side.
    let from_a: Vec<Vec<u8>> = (0..N as u32).map(|k| frame(mac(0xa1), None, k)).collect();
    let from_b: Vec<Vec<u8>> = (0..N as u32).map(|k| frame(mac(0xb1), None, k)).collect();
    send(&mut a1, &from_a);
    send(&mut b1, &from_b);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + DEADLINE;
    while got_a.len() < N || got_b.len() < N {
        assert!(
            Instant::now() < deadline,
            "the host got {} frames of a1 and {} of b1",
            got_a.len(),
            got_b.len()
        );
        let Some(f) = host.recv() else { continue };
        let (inner, tci) = untag(&f);
        if inner.len() < 60 {
            continue;
        }
        // Frames may come padded by the kernel: compare what was sent.
        let src = &f[6..12];
        if src == mac(0xa1) {
            got_a.push((tci, inner[..60].to_vec()));
        } else if src == mac(0xb1) {
            got_b.push((tci, inner[..60].to_vec()));
        }
    }
    for (got, sent, vid) in [(&got_a, &from_a, 10), (&got_b, &from_b, 20)] {
        for ((tci, inner), s) in got.iter().zip(sent.iter()) {
            assert_eq!(tci.map(|t| t & 0xfff), Some(vid), "{inner:02x?}");
            assert_eq!(inner, s);
        }
    }

    // From the host: tagged 10 reaches a1 untagged, not b1.
    let to_a: Vec<Vec<u8>> = (0..N as u32)
        .map(|k| frame(mac(0x71), Some(10), 100 + k))
        .collect();
    for f in &to_a {
        host.send(f);
    }
    for (g, s) in recv_n(&mut a1, N, "a1").iter().zip(&to_a) {
        assert_eq!(g, &untag(s).0, "untagged on the access port");
    }
    // Untagged from the host: not carried (no 0 in the set), counted.
    let before = counter(&d, &full(&tap), "drop_vlan");
    for k in 0..N as u32 {
        host.send(&frame(mac(0x72), None, 200 + k));
    }
    wait_until("the host's untagged frames counted in drop_vlan", || {
        counter(&d, &full(&tap), "drop_vlan") >= before + N as u64
    });
    assert_eq!(counter(&d, &full(&tap), "drop_vlan"), before + N as u64);
    assert!(
        drain(&mut b1).is_empty(),
        "b1 got frames of VLAN 10 or none"
    );
    assert!(drain(&mut a1).is_empty(), "a1 got the untagged frames");
    assert_eq!(counter(&d, &full("b1"), "rx_packets"), 0);
    ctl(&d, &["detach", &full(&tap)]);
}
