//! AF_PACKET queues on a veth pair, in a network namespace of the test's
//! own: frames sent into the peer end with a plain AF_PACKET socket arrive
//! through `take_batch` byte for byte and in order (VLAN tags included),
//! across partly taken blocks; frames given to `push` come out of the
//! peer; the host stack's partial checksums arrive with their header;
//! fanout shares flows between queues; ring overflows are counted and the
//! ring recovers.
//!
//! Needs root; without it, or with RINGSWITCH_SKIP_NETNS set, the tests say
//! so and pass. Uses `ip` (iproute2).

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use common::*;
use ringswitch_frame::{FrameQueue, OffloadHdr, PushError, F_DATA_VALID, F_NEEDS_CSUM, GSO_TCPV4};
use ringswitch_netdev::{open_nic, packet, DevError, Driver, Nic, NicConfig, NicMode};
use ringswitch_offload::complete_checksum;

const PREFIX: &str = "rsp";

fn open(ns: &Netns, queues: u32, ring: u32) -> Nic {
    let mut cfg = NicConfig::new(&ns.a);
    cfg.queues = Some(queues);
    cfg.ring_size = ring;
    let nic = packet::open(&cfg).unwrap_or_else(|e| panic!("opening {}: {e}", ns.a));
    assert_eq!(nic.queues.len(), queues as usize);
    assert_eq!(nic.driver, Driver::Packet);
    for q in &nic.queues {
        let q = q.lock().unwrap();
        assert_eq!(q.driver(), Driver::Packet.as_str());
        assert_eq!(q.caps(), Default::default());
    }
    nic
}

/// Takes frames of ours from `q` in batches of at most `max` until `want`
/// arrived or nothing came for a while. Also returns the size of each
/// batch.
fn take(
    q: &mut dyn FrameQueue,
    want: usize,
    max: usize,
) -> (Vec<(Vec<u8>, OffloadHdr)>, Vec<usize>) {
    take_idle(q, want, max, WAIT)
}

/// [`take`], giving up after `idle` without a frame.
fn take_idle(
    q: &mut dyn FrameQueue,
    want: usize,
    max: usize,
    idle_max: Duration,
) -> (Vec<(Vec<u8>, OffloadHdr)>, Vec<usize>) {
    let mut got = Vec::new();
    let mut batches = Vec::new();
    let mut idle = Instant::now();
    while got.len() < want && idle.elapsed() < idle_max {
        if !q.has_work() && !readable(q.wake_fd().unwrap(), Duration::from_millis(50)) {
            continue;
        }
        let n = q.rx_batch(max, &mut |f, h| {
            if ours(f) {
                got.push((f.to_vec(), *h));
            }
            true
        });
        assert!(n <= max, "batch of {n} over the max of {max}");
        if n > 0 {
            batches.push(n);
            idle = Instant::now();
        }
    }
    (got, batches)
}

/// The header of a plain frame: nothing, or "checksum verified".
fn plain(h: &OffloadHdr) -> bool {
    *h == OffloadHdr::default()
        || *h
            == (OffloadHdr {
                flags: F_DATA_VALID,
                ..Default::default()
            })
}

#[test]
fn rx_in_order_across_partly_taken_blocks() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "r", true, |ns| {
        let nic = open(ns, 1, 2048);
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = RawSock::open(&ns.b, ETHERTYPE);
        assert!(!q.has_work(), "frames before any were sent");
        // Every length from the smallest frame to a full MTU, a few times:
        // several blocks, none taken whole by a batch of 100.
        let sent: Vec<Vec<u8>> = (0..1500u32)
            .map(|s| frame(MAC_A, MAC_B, s, 60 + (s as usize * 7) % 1455))
            .collect();
        for f in &sent {
            peer.send(f);
        }
        assert!(
            readable(q.wake_fd().unwrap(), WAIT),
            "rx_fd never became readable"
        );
        assert!(q.has_work());
        let (got, batches) = take(q, sent.len(), 100);
        assert_eq!(
            got.len(),
            sent.len(),
            "received {} of {}",
            got.len(),
            sent.len()
        );
        for (i, ((g, h), s)) in got.iter().zip(&sent).enumerate() {
            assert_eq!(g, s, "frame {i} changed on the way");
            assert!(plain(h), "frame {i}: header {h:?}");
        }
        assert!(
            batches.iter().filter(|&&n| n == 100).count() >= 10,
            "batches stop at the max: {batches:?}"
        );
        assert!(!q.has_work());
        assert!(
            !readable(q.wake_fd().unwrap(), Duration::ZERO),
            "readable with nothing left"
        );

        // A batch stops where the stage is full, and the rest follows.
        for s in 0..3 {
            peer.send(&frame(MAC_A, MAC_B, 10_000 + s, 100));
        }
        assert!(readable(q.wake_fd().unwrap(), WAIT));
        let first: Vec<u32> = q.rx_one().iter().map(|(f, _)| seq_of(f)).collect();
        assert_eq!(first.len(), 1);
        let t0 = Instant::now();
        while !q.has_work() && t0.elapsed() < WAIT {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(q.has_work(), "two frames left");
        let (rest, _) = take(q, 2, 64);
        let rest: Vec<u32> = rest.iter().map(|(f, _)| seq_of(f)).collect();
        assert_eq!((first, rest), (vec![10_000], vec![10_001, 10_002]));
        // A lone frame is handed over (the block's retire timer), not held
        // until a block fills: nothing else is sent after it.
        peer.send(&frame(MAC_A, MAC_B, 20_000, 60));
        let (one, _) = take(q, 1, 64);
        assert_eq!(one.len(), 1);
        assert_eq!(q.stats().kernel_rx_dropped, 0);
    });
}

#[test]
fn vlan_tags_are_put_back() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "v", true, |ns| {
        let nic = open(ns, 1, 256);
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = RawSock::open(&ns.b, ETHERTYPE);
        let mut sent = Vec::new();
        for (s, tpid, tci) in [
            (1u32, 0x8100u16, 42u16),
            (2, 0x88a8, 0x2fff),
            (3, 0x8100, 0),
            (4, 0, 0),
        ] {
            let mut f = frame(MAC_A, MAC_B, s, 80);
            if tpid != 0 {
                let mut tag = tpid.to_be_bytes().to_vec();
                tag.extend_from_slice(&tci.to_be_bytes());
                f.splice(12..12, tag);
            }
            peer.send(&f);
            sent.push(f);
        }
        let (got, _) = take(q, sent.len(), 64);
        let got: Vec<Vec<u8>> = got.into_iter().map(|(f, _)| f).collect();
        assert_eq!(got, sent);
    });
}

#[test]
fn tx_a_thousand_frames() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "t", true, |ns| {
        let nic = open(ns, 1, 256);
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = RawSock::open(&ns.b, ETHERTYPE);
        let sent: Vec<Vec<u8>> = (0..1000u32)
            .map(|s| frame(MAC_B, MAC_A, s, 60 + (s as usize * 13) % 1459))
            .collect();
        let mut full = 0;
        let mut i = 0;
        let t0 = Instant::now();
        while i < sent.len() {
            assert!(t0.elapsed() < WAIT, "the TX ring never drained");
            match q.push(&OffloadHdr::default(), &sent[i]) {
                Ok(()) => i += 1,
                Err(PushError::Full) => {
                    full += 1;
                    q.flush().send();
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("frame {i}: {e}"),
            }
        }
        q.flush().send();
        assert!(full > 0, "1000 frames fit a ring of 256");
        for (i, s) in sent.iter().enumerate() {
            let g = peer
                .recv()
                .unwrap_or_else(|| panic!("frame {i} never arrived"));
            assert_eq!(&g, s, "frame {i} changed on the way");
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
        // What we send is not received back.
        std::thread::sleep(Duration::from_millis(50));
        let mut back = 0;
        q.rx_batch(64, &mut |f, _| {
            back += usize::from(ours(f));
            true
        });
        assert_eq!(back, 0, "our own frames came back");
        assert_eq!(q.stats(), Default::default());
    });
}

#[test]
fn tx_waits_while_the_link_is_down() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "d", true, |ns| {
        let nic = open(ns, 1, 64);
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = RawSock::open(&ns.b, ETHERTYPE);
        ns.ip(&["link", "set", &ns.a, "down"]);
        let frames: Vec<Vec<u8>> = (0..64).map(|s| frame(MAC_B, MAC_A, s, 100)).collect();
        q.push(&OffloadHdr::default(), &frames[0]).unwrap();
        q.flush().send();
        for f in &frames[1..] {
            q.push(&OffloadHdr::default(), f).unwrap();
        }
        q.flush().send();
        assert_eq!(
            q.push(&OffloadHdr::default(), &frames[0]),
            Err(PushError::Down)
        );
        ns.ip(&["link", "set", &ns.a, "up"]);
        q.flush().send();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(
                peer.recv().as_ref(),
                Some(f),
                "frame {i} after the link came back"
            );
        }
        // The ring is free again.
        let t0 = Instant::now();
        while q.push(&OffloadHdr::default(), &frames[0]).is_err() {
            assert!(t0.elapsed() < WAIT, "TX slots never came back");
            q.flush().send();
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

/// A TCP SYN from the namespace's own stack, out of `dev` to `dst`: the
/// kernel leaves its checksum partial, and the veth carries it so.
fn syn_from_host_stack(dst: [u8; 4]) -> OwnedFd {
    // SAFETY: socket() with constant arguments; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    assert!(fd >= 0);
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: 5555u16.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(dst),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: connects our socket to an address that lives across the call.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert!(r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EINPROGRESS));
    fd
}

/// The first TCP frame to `dst` from `q`.
fn tcp_to(q: &mut dyn FrameQueue, dst: [u8; 4]) -> (Vec<u8>, OffloadHdr) {
    let mut found = None;
    let t0 = Instant::now();
    while found.is_none() && t0.elapsed() < WAIT {
        readable(q.wake_fd().unwrap(), Duration::from_millis(50));
        q.rx_batch(64, &mut |f, h| {
            let ip = if f[12..14] == [0x08, 0] {
                14
            } else if f[12..14] == [0x81, 0] && f[16..18] == [0x08, 0] {
                18
            } else {
                return true;
            };
            if found.is_none() && f[ip + 9] == 6 && f[ip + 16..ip + 20] == dst {
                found = Some((f.to_vec(), *h));
            }
            true
        });
    }
    found.expect("no TCP frame from the host stack")
}

#[test]
fn partial_checksums_arrive_with_their_header() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "c", true, |ns| {
        let nic = open(ns, 1, 256);
        let q = &mut *nic.queues[0].lock().unwrap();
        let vlan = format!("{}v", ns.name);
        ns.ip(&["addr", "add", "10.9.0.2/24", "dev", &ns.b]);
        ns.ip(&[
            "neigh",
            "add",
            "10.9.0.1",
            "lladdr",
            &mac_str(MAC_A),
            "dev",
            &ns.b,
        ]);
        let mut cases = vec![([10, 9, 0, 1], 14usize)];
        let add_vlan = [
            "-n", &ns.name, "link", "add", "link", &ns.b, "name", &vlan, "type", "vlan", "id", "42",
        ];
        match run("ip", &add_vlan) {
            Ok(_) => {
                ns.ip(&["link", "set", &vlan, "up"]);
                ns.ip(&["addr", "add", "10.9.1.2/24", "dev", &vlan]);
                ns.ip(&[
                    "neigh",
                    "add",
                    "10.9.1.1",
                    "lladdr",
                    &mac_str(MAC_A),
                    "dev",
                    &vlan,
                ]);
                cases.push(([10, 9, 1, 1], 18));
            }
            Err(e) => eprintln!("VLAN case skipped: this kernel has no VLAN devices ({e})"),
        }
        for (dst, ip) in cases {
            let _s = syn_from_host_stack(dst);
            let (mut f, h) = tcp_to(q, dst);
            assert_eq!(
                h.flags & F_NEEDS_CSUM,
                F_NEEDS_CSUM,
                "{dst:?}: header {h:?}"
            );
            assert_eq!(
                (usize::from(h.csum_start), usize::from(h.csum_offset)),
                (ip + 20, 16),
                "{dst:?}: header {h:?}"
            );
            if ip == 18 {
                assert_eq!(f[12..16], [0x81, 0, 0, 42], "the VLAN tag is back in place");
            }
            assert!(
                !ipv4_checksums_ok(&f[ip..]),
                "the checksum is still partial"
            );
            complete_checksum(&mut f, h.csum_start.into(), h.csum_offset.into()).unwrap();
            assert!(
                ipv4_checksums_ok(&f[ip..]),
                "{dst:?}: completed checksum is wrong"
            );
        }
    });
}

/// An AF_PACKET socket on `ifname` that sends frames with a virtio-net
/// header, as a VM's backend would.
fn vnet_sender(ifname: &str) -> RawSock {
    // ETH_P_ALL: the kernel reads the EtherType from each frame.
    let s = RawSock::open(ifname, libc::ETH_P_ALL as u16);
    let one: libc::c_int = 1;
    // SAFETY: reads an int that lives across the call.
    let r = unsafe {
        libc::setsockopt(
            s.0.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            (&one as *const libc::c_int).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "PACKET_VNET_HDR: {}", std::io::Error::last_os_error());
    s
}

/// A TCP/IPv4 frame (after a VLAN tag if `vlan`) with `payload` bytes and
/// a partial checksum (the pseudo header's sum), as a stack with checksum
/// offload leaves it. Returns the frame and where its IP header starts.
fn partial_tcp(vlan: bool, payload: usize) -> (Vec<u8>, usize) {
    let (src, dst) = ([10, 9, 0, 2], [10, 9, 0, 1]);
    let mut f = eth(MAC_A, MAC_B, if vlan { 0x8100 } else { 0x0800 });
    if vlan {
        f.extend_from_slice(&[0x20, 0x07, 0x08, 0x00]);
    }
    let ip = f.len();
    ipv4(&mut f, src, dst, 6, 20 + payload);
    let tcp = f.len();
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&5555u16.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend((0..payload).map(|i| (i * 31 % 251) as u8));
    let ph = ringswitch_offload::checksum::pseudo_header_v4(src, dst, 6, (20 + payload) as u16);
    f[tcp + 16..tcp + 18].copy_from_slice(&ph.to_be_bytes());
    (f, ip)
}

#[test]
fn offloaded_frames_arrive_with_their_header() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "g", true, |ns| {
        let nic = open(ns, 1, 256);
        let q = &mut *nic.queues[0].lock().unwrap();
        let tx = vnet_sender(&ns.b);
        // Plain and VLAN-tagged; a partial checksum alone, and a TCP GSO
        // frame of three 1000-byte segments.
        for (vlan, payload, gso) in [
            (false, 100, false),
            (true, 100, false),
            (false, 3000, true),
            (true, 3000, true),
        ] {
            let (sent, ip) = partial_tcp(vlan, payload);
            let h = OffloadHdr {
                flags: F_NEEDS_CSUM,
                gso_type: if gso { GSO_TCPV4 } else { 0 },
                hdr_len: if gso { (ip + 40) as u16 } else { 0 },
                gso_size: if gso { 1000 } else { 0 },
                csum_start: (ip + 20) as u16,
                csum_offset: 16,
            };
            let hb = h.to_le_bytes();
            let iov = [
                libc::iovec {
                    iov_base: hb.as_ptr() as *mut _,
                    iov_len: hb.len(),
                },
                libc::iovec {
                    iov_base: sent.as_ptr() as *mut _,
                    iov_len: sent.len(),
                },
            ];
            // SAFETY: two iovecs over live buffers the kernel only reads.
            let r = unsafe { libc::writev(tx.0.as_raw_fd(), iov.as_ptr(), 2) };
            assert_eq!(
                r as usize,
                hb.len() + sent.len(),
                "{}",
                std::io::Error::last_os_error()
            );
            let case = format!("vlan {vlan}, gso {gso}");
            let (mut got, gh) = tcp_to(q, [10, 9, 0, 1]);
            assert_eq!(got, sent, "{case}: frame changed on the way");
            assert_eq!(gh.flags & F_NEEDS_CSUM, F_NEEDS_CSUM, "{case}: {gh:?}");
            assert_eq!(
                (gh.csum_start, gh.csum_offset),
                (h.csum_start, 16),
                "{case}: {gh:?}"
            );
            assert_eq!(
                (gh.gso_type, gh.gso_size),
                (h.gso_type, h.gso_size),
                "{case}: {gh:?}"
            );
            complete_checksum(&mut got, gh.csum_start.into(), gh.csum_offset.into()).unwrap();
            assert!(
                ipv4_checksums_ok(&got[ip..]),
                "{case}: completed checksum is wrong"
            );
        }
    });
}

#[test]
fn fanout_shares_flows_between_queues() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "f", true, |ns| {
        let nic = open(ns, 4, 256);
        let peer = RawSock::open(&ns.b, 0x0800);
        // 64 flows (UDP source ports), 4 frames each.
        let mut sent = 0;
        for round in 0..4u8 {
            for port in 0..64u16 {
                peer.send(&udp_frame(
                    MAC_A,
                    MAC_B,
                    [10, 8, 0, 2],
                    [10, 8, 0, 1],
                    1000 + port,
                    7,
                    &[round; 32],
                ));
                sent += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut per_queue = Vec::new();
        let mut flow_queue = std::collections::HashMap::new();
        for (i, q) in nic.queues.iter().enumerate() {
            let mut q = q.lock().unwrap();
            let mut n = 0;
            while q.has_work() || readable(q.wake_fd().unwrap(), Duration::from_millis(20)) {
                q.rx_batch(64, &mut |f, _| {
                    if f.len() >= 42 && f[12..14] == [0x08, 0] && f[23] == 17 {
                        let port = u16::from_be_bytes([f[34], f[35]]);
                        let was = flow_queue.insert(port, i);
                        assert!(was.is_none() || was == Some(i), "flow {port} on two queues");
                        n += 1;
                    }
                    true
                });
            }
            per_queue.push(n);
        }
        assert_eq!(
            per_queue.iter().sum::<usize>(),
            sent,
            "per queue: {per_queue:?}"
        );
        assert!(
            per_queue.iter().filter(|&&n| n > 0).count() >= 3,
            "flows not shared: {per_queue:?}"
        );
    });
}

#[test]
fn ring_overflow_is_counted_and_the_ring_recovers() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "o", true, |ns| {
        // 64 slots: the smallest ring, 4 blocks of 256 KiB.
        let nic = open(ns, 1, 64);
        let q = &mut *nic.queues[0].lock().unwrap();
        let peer = RawSock::open(&ns.b, ETHERTYPE);
        let n = 2000u32;
        for s in 0..n {
            peer.send(&frame(MAC_A, MAC_B, s, 1500));
        }
        std::thread::sleep(Duration::from_millis(50));
        let (got, _) = take_idle(q, n as usize, 256, Duration::from_millis(300));
        let dropped = q.stats().kernel_rx_dropped;
        assert!(dropped > 0, "2000 full frames fit in 1 MiB?");
        assert!(got.len() < n as usize);
        assert_eq!(
            got.len() as u64 + dropped,
            u64::from(n),
            "every frame taken or counted"
        );
        // Received frames are in order and whole.
        let mut last = None;
        for (f, _) in &got {
            let s = seq_of(f);
            assert!(last < Some(s));
            assert_eq!(*f, frame(MAC_A, MAC_B, s, 1500));
            last = Some(s);
        }
        // Counters accumulate (reading them resets the kernel's).
        assert_eq!(q.stats().kernel_rx_dropped, dropped);
        for s in 0..10 {
            peer.send(&frame(MAC_A, MAC_B, 50_000 + s, 200));
        }
        let (after, _) = take(q, 10, 64);
        assert_eq!(after.len(), 10, "the ring did not recover");
    });
}

#[test]
fn open_checks_and_promiscuous_mode() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "e", true, |ns| {
        let mut cfg = NicConfig::new(&ns.a);
        cfg.mode = NicMode::Packet;
        let nic = open_nic(&cfg).unwrap();
        assert_eq!(nic.driver, Driver::Packet);
        assert_eq!(nic.queues.len(), 1, "a veth has one queue");
        // The sockets' promiscuity is counted, not shown as a flag.
        assert!(ns
            .ip(&["-d", "link", "show", &ns.a])
            .contains("promiscuity 1"));
        drop(nic);
        assert!(eventually(|| ns
            .ip(&["-d", "link", "show", &ns.a])
            .contains("promiscuity 0")));

        for (queues, ring) in [(Some(0), 2048), (Some(65), 2048), (None, 1000), (None, 32)] {
            let mut cfg = NicConfig::new(&ns.a);
            cfg.queues = queues;
            cfg.ring_size = ring;
            assert!(
                matches!(packet::open(&cfg), Err(DevError::Unsupported { .. })),
                "{queues:?} {ring}"
            );
        }
        assert!(matches!(
            packet::open(&NicConfig::new("rsp-none0")),
            Err(DevError::NoSuchInterface { .. })
        ));
        assert!(matches!(
            packet::open(&NicConfig::new("bad/name")),
            Err(DevError::BadName { .. })
        ));
    });
}
