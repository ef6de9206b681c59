//! TAP queues in a network namespace of the test's own, with the test
//! playing the host on the other side of the wire: the kernel answers ARP
//! and ping through `push`/`take_batch`; a TCP connection to a socket of
//! the namespace carries partial checksums and TSO frames both ways with
//! their virtio-net headers; the interface is refused when its name is
//! taken or bad, and disappears with its queues.
//!
//! Needs root; without it, or with RINGSWITCH_SKIP_NETNS set, the tests say
//! so and pass. Uses `ip` (iproute2).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use common::*;
use ringswitch_frame::{Caps, FrameQueue, OffloadHdr, PushError, F_NEEDS_CSUM, GSO_TCPV4};
use ringswitch_netdev::tap::{open_tap, Tap};
use ringswitch_netdev::{iface, DevError, Driver};
use ringswitch_offload::checksum::{add, pseudo_header_v4, sum};
use ringswitch_offload::complete_checksum;

const PREFIX: &str = "rst";

fn tap_name(ns: &Netns) -> String {
    format!("{}t", ns.name)
}

fn open(ns: &Netns, queues: u32) -> Tap {
    let name = tap_name(ns);
    let tap = open_tap(&name, queues).unwrap_or_else(|e| panic!("opening TAP {name}: {e}"));
    assert_eq!(tap.ifname, name);
    assert_eq!(tap.queues.len(), queues as usize);
    for q in &tap.queues {
        let q = q.lock().unwrap();
        assert_eq!(q.driver(), Driver::Tap.as_str());
        let caps = q.caps();
        // USO where the kernel has it (6.2 and later), for both versions.
        assert_eq!(
            caps,
            Caps {
                csum: true,
                tso4: true,
                tso6: true,
                ecn: false,
                uso4: caps.uso4,
                uso6: caps.uso4,
            }
        );
    }
    assert!(iface::is_up(&name).unwrap(), "the TAP is not up");
    tap
}

/// The interface's MAC address.
fn mac_of(ifname: &str) -> [u8; 6] {
    // SAFETY: socket() with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all zeroes is valid.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads the name and writes the address of `r`.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut r) };
    assert_eq!(rc, 0, "SIOCGIFHWADDR: {}", std::io::Error::last_os_error());
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member of the union.
    let sa = unsafe { r.ifr_ifru.ifru_hwaddr };
    std::array::from_fn(|i| sa.sa_data[i] as u8)
}

/// Takes frames from `q` until `f` returns Some, or fails after a while.
fn wait_for<T>(q: &mut dyn FrameQueue, mut f: impl FnMut(&[u8], &OffloadHdr) -> Option<T>) -> T {
    let t0 = Instant::now();
    let mut found = None;
    while t0.elapsed() < WAIT {
        readable(q.wake_fd().unwrap(), Duration::from_millis(50));
        q.rx_batch(64, &mut |frame, h| {
            if found.is_none() {
                found = f(frame, h);
            }
            true
        });
        if let Some(v) = found.take() {
            return v;
        }
    }
    panic!("the frame waited for never came");
}

const ME: [u8; 4] = [10, 77, 0, 2];
const HOST: [u8; 4] = [10, 77, 0, 1];

/// An ARP reply from us (`MAC_B`, `ME`) to the host.
fn arp_reply(host_mac: [u8; 6]) -> Vec<u8> {
    let mut f = eth(host_mac, MAC_B, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&ME);
    f.extend_from_slice(&host_mac);
    f.extend_from_slice(&HOST);
    f
}

fn is_arp_request_for(f: &[u8], ip: [u8; 4]) -> bool {
    f.len() >= 42 && f[12..14] == [8, 6] && f[20..22] == [0, 1] && f[38..42] == ip
}

#[test]
fn host_stack_answers_arp_and_ping() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "p", false, |ns| {
        let tap = open(ns, 1);
        let name = tap.ifname.clone();
        ns.ip(&["addr", "add", "10.77.0.1/24", "dev", &name]);
        let host_mac = mac_of(&name);
        let q = &mut *tap.queues[0].lock().unwrap();

        // Echo request from us; the host asks who we are before it answers.
        let payload: Vec<u8> = (0..56u8).collect();
        let mut req = eth(host_mac, MAC_B, 0x0800);
        ipv4(&mut req, ME, HOST, 1, 8 + payload.len());
        let icmp = req.len();
        req.extend_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
        req.extend_from_slice(&payload);
        let c = !sum(&req[icmp..]);
        req[icmp + 2..icmp + 4].copy_from_slice(&c.to_be_bytes());
        q.push(&OffloadHdr::default(), &req).unwrap();
        q.flush().send();

        let mut asked = false;
        let reply = wait_for(q, |f, h| {
            if is_arp_request_for(f, ME) {
                assert_eq!(f[22..28], host_mac, "ARP request from another address");
                asked = true;
                return Some(None);
            }
            let is_reply = f.len() >= 42
                && f[12..14] == [8, 0]
                && f[23] == 1
                && f[26..30] == HOST
                && f[30..34] == ME
                && f[34] == 0;
            is_reply.then(|| Some((f.to_vec(), *h)))
        });
        assert!(reply.is_none(), "echo reply before the ARP request");
        assert!(asked);
        q.push(&OffloadHdr::default(), &arp_reply(host_mac))
            .unwrap();
        q.flush().send();
        let (f, h) = wait_for(q, |f, h| {
            let is_reply = f.len() >= 42 && f[12..14] == [8, 0] && f[23] == 1 && f[34] == 0;
            is_reply.then(|| (f.to_vec(), *h))
        });
        assert_eq!(h.gso_type, 0, "{h:?}");
        assert_eq!(f[0..6], MAC_B);
        assert_eq!(f[6..12], host_mac);
        assert_eq!(f[38..42], [0x12, 0x34, 0, 1], "id and sequence");
        assert_eq!(f[42..], payload[..], "echo payload");
        assert!(ipv4_checksums_ok(&f[14..]), "checksums of the reply");
        assert_eq!(q.stats(), Default::default());
    });
}

const PORT: u16 = 5555;
const MY_PORT: u16 = 40_000;
const MSS: u16 = 1460;

/// A TCP/IPv4 frame from us to the host, checksums complete unless `hdr`
/// asks otherwise (then the TCP checksum holds the pseudo header's sum).
#[allow(clippy::too_many_arguments)]
fn tcp_frame(
    host_mac: [u8; 6],
    seq: u32,
    ack: u32,
    flags: u8,
    options: &[u8],
    payload: &[u8],
    partial: bool,
) -> Vec<u8> {
    let tcp_len = 20 + options.len() + payload.len();
    let mut f = eth(host_mac, MAC_B, 0x0800);
    ipv4(&mut f, ME, HOST, 6, tcp_len);
    let t = f.len();
    f.extend_from_slice(&MY_PORT.to_be_bytes());
    f.extend_from_slice(&PORT.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.push(((20 + options.len()) as u8 / 4) << 4);
    f.push(flags);
    f.extend_from_slice(&0xffffu16.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(options);
    f.extend_from_slice(payload);
    let ph = pseudo_header_v4(ME, HOST, 6, tcp_len as u16);
    let c = if partial { ph } else { !add(ph, sum(&f[t..])) };
    f[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
    f
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

fn tcp_of(f: &[u8]) -> Option<(u32, u32, u8, &[u8])> {
    if f.len() < 54 || f[12..14] != [8, 0] || f[23] != 6 || f[26..30] != HOST || f[30..34] != ME {
        return None;
    }
    let ihl = usize::from(f[14] & 0xf) * 4;
    let t = 14 + ihl;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let doff = usize::from(f[t + 12] >> 4) * 4;
    let seq = u32::from_be_bytes(f[t + 4..t + 8].try_into().unwrap());
    let ack = u32::from_be_bytes(f[t + 8..t + 12].try_into().unwrap());
    Some((seq, ack, f[t + 13], &f[t + doff..14 + total]))
}

#[test]
fn tcp_with_partial_checksums_and_tso_both_ways() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "c", false, |ns| {
        let tap = open(ns, 1);
        let name = tap.ifname.clone();
        ns.ip(&["addr", "add", "10.77.0.1/24", "dev", &name]);
        ns.ip(&[
            "neigh",
            "add",
            "10.77.0.2",
            "lladdr",
            &mac_str(MAC_B),
            "dev",
            &name,
        ]);
        let host_mac = mac_of(&name);
        let listener = TcpListener::bind(("10.77.0.1", PORT)).unwrap();
        let q = &mut *tap.queues[0].lock().unwrap();

        // Handshake: our SYN (MSS 1460, no other option), the host's SYN-ACK
        // with a partial checksum (we offered TUN_F_CSUM), our ACK.
        let isn = 1_000_000u32;
        let mss = [2, 4, (MSS >> 8) as u8, MSS as u8];
        q.push(
            &OffloadHdr::default(),
            &tcp_frame(host_mac, isn, 0, SYN, &mss, &[], false),
        )
        .unwrap();
        let (mut synack, h) = wait_for(q, |f, h| {
            tcp_of(f)
                .filter(|t| t.2 & (SYN | ACK) == SYN | ACK)
                .map(|_| (f.to_vec(), *h))
        });
        assert_eq!(h.flags & F_NEEDS_CSUM, F_NEEDS_CSUM, "SYN-ACK header {h:?}");
        assert_eq!(
            (h.csum_start, h.csum_offset),
            (34, 16),
            "SYN-ACK header {h:?}"
        );
        complete_checksum(&mut synack, 34, 16).unwrap();
        assert!(
            ipv4_checksums_ok(&synack[14..]),
            "completed SYN-ACK checksum"
        );
        let (host_isn, acked, _, _) = tcp_of(&synack).unwrap();
        assert_eq!(acked, isn + 1);
        let mut host_next = host_isn.wrapping_add(1);
        q.push(
            &OffloadHdr::default(),
            &tcp_frame(host_mac, isn + 1, host_next, ACK, &[], &[], false),
        )
        .unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(WAIT)).unwrap();

        // Us to the host: one 3000-byte TSO frame with a partial checksum,
        // taken whole by the TAP (caps says so) and cut by the kernel.
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 13 % 256) as u8).collect();
        let tso = OffloadHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: 1000,
            csum_start: 34,
            csum_offset: 16,
        };
        let big = tcp_frame(host_mac, isn + 1, host_next, ACK | PSH, &[], &data, true);
        q.push(&tso, &big).unwrap();
        let mut got = vec![0u8; data.len()];
        conn.read_exact(&mut got).unwrap();
        assert_eq!(got, data, "what the host's socket read");

        // The host to us: more than one MSS at once comes as TSO frames.
        let out: Vec<u8> = (0..12_000u32).map(|i| (i * 7 % 253) as u8).collect();
        conn.write_all(&out).unwrap();
        let mut received = Vec::new();
        let mut biggest = 0;
        let t0 = Instant::now();
        while received.len() < out.len() && t0.elapsed() < WAIT {
            readable(q.wake_fd().unwrap(), Duration::from_millis(50));
            let mut acks = Vec::new();
            q.rx_batch(64, &mut |f, h| {
                let Some((seq, _, _, payload)) = tcp_of(f) else {
                    return true;
                };
                if payload.is_empty() || seq != host_next {
                    return true;
                }
                assert_eq!(h.flags & F_NEEDS_CSUM, F_NEEDS_CSUM, "{h:?}");
                if payload.len() > usize::from(MSS) {
                    assert_eq!((h.gso_type, h.gso_size), (GSO_TCPV4, MSS), "{h:?}");
                }
                let mut whole = f.to_vec();
                complete_checksum(&mut whole, h.csum_start.into(), h.csum_offset.into()).unwrap();
                assert!(
                    ipv4_checksums_ok(&whole[14..]),
                    "completed checksum of a TSO frame"
                );
                biggest = biggest.max(payload.len());
                received.extend_from_slice(payload);
                host_next = host_next.wrapping_add(payload.len() as u32);
                acks.push(host_next);
                true
            });
            for a in acks {
                q.push(
                    &OffloadHdr::default(),
                    &tcp_frame(host_mac, isn + 1 + 3000, a, ACK, &[], &[], false),
                )
                .unwrap();
            }
        }
        assert_eq!(received, out, "what the host sent");
        assert!(
            biggest > usize::from(MSS),
            "no TSO frame: at most {biggest} bytes at once"
        );
        assert_eq!(q.stats(), Default::default());
    });
}

#[test]
fn names_queues_and_lifetime() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "l", false, |ns| {
        let name = tap_name(ns);
        let tap = open(ns, 4);
        assert!(ns
            .ip(&["-d", "link", "show", &name])
            .contains("multi_queue"));
        let mac = mac_of(&name);
        assert_eq!(mac[0] & 3, 2, "not a locally administered unicast address");
        // Taken, whether by our TAP or by anything else.
        assert!(matches!(open_tap(&name, 1), Err(DevError::Busy { .. })));
        assert!(matches!(open_tap("lo", 1), Err(DevError::Busy { .. })));
        drop(tap);
        // Closing the last queue deletes it; a child another test thread
        // forks (to run `ip`) may hold copies of the fds until it execs.
        assert!(
            eventually(|| matches!(iface::ifindex(&name), Err(DevError::NoSuchInterface { .. }))),
            "the TAP outlived its queues"
        );
        // Once gone, the name is free again.
        let tap = open(ns, 1);
        assert!(!ns
            .ip(&["-d", "link", "show", &name])
            .contains("multi_queue"));
        // Same name, same namespace: the same address, so neighbours' caches
        // stay right across a daemon restart.
        assert_eq!(mac_of(&name), mac);
        drop(tap);
        assert!(eventually(|| iface::ifindex(&name).is_err()));

        for bad in ["", "a/b", "a b", "sixteen-chars-xx"] {
            assert!(
                matches!(open_tap(bad, 1), Err(DevError::BadName { .. })),
                "{bad:?}"
            );
        }
        for n in [0, 17] {
            assert!(
                matches!(open_tap(&name, n), Err(DevError::Unsupported { .. })),
                "{n} queues"
            );
        }
        assert!(
            iface::ifindex(&name).is_err(),
            "a refused open left an interface"
        );
        // Another namespace: another address for the same name.
        let other = std::thread::scope(|s| {
            s.spawn(|| {
                Netns::run_in(PREFIX, "m", false, |_| {
                    let _tap = open_tap(&name, 1).unwrap();
                    mac_of(&name)
                })
            })
            .join()
            .unwrap()
        });
        assert_ne!(other, mac);
    });
}

#[test]
fn tx_on_a_down_tap() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "d", false, |ns| {
        let tap = open(ns, 1);
        let name = tap.ifname.clone();
        let q = &mut *tap.queues[0].lock().unwrap();
        let f = frame([0xff; 6], MAC_B, 1, 60);
        q.push(&OffloadHdr::default(), &f).unwrap();
        ns.ip(&["link", "set", &name, "down"]);
        assert_eq!(q.push(&OffloadHdr::default(), &f), Err(PushError::Down));
        ns.ip(&["link", "set", &name, "up"]);
        q.push(&OffloadHdr::default(), &f).unwrap();
        // A frame the TAP refuses (shorter than an Ethernet header) is
        // counted, not fatal.
        q.push(&OffloadHdr::default(), &f[..10]).unwrap();
        assert_eq!(q.stats().kernel_tx_invalid, 1);
        assert_eq!(
            q.push(&OffloadHdr::default(), &vec![0; 70_000]),
            Err(PushError::TooLong)
        );
    });
}

/// An interface deleted under its queues (here with `ip link del`; a
/// deleted network namespace does the same): the descriptor reads EBADFD
/// and polls in error for ever. The queue says so once, offers no wake
/// descriptor any more (so no worker is woken by it again), takes nothing,
/// and refuses frames as a down link does.
#[test]
fn a_deleted_interface_stops_its_queue() {
    if !can_run() {
        return;
    }
    Netns::run_in(PREFIX, "g", false, |ns| {
        let tap = open(ns, 2);
        let name = tap.ifname.clone();
        ns.ip(&["link", "del", &name]);
        for q in &tap.queues {
            let q = &mut *q.lock().unwrap();
            assert!(q.wake_fd().is_some());
            let mut stage = ringswitch_frame::Stage::new(64);
            assert_eq!(q.take_batch(64, &mut stage).frames, 0);
            assert_eq!(
                q.wake_fd(),
                None,
                "no wake descriptor once the interface is gone"
            );
            assert!(!q.has_work());
            assert_eq!(q.take_batch(64, &mut stage).frames, 0);
            // Frames for it are counted as for a down link, not as invalid.
            let f = frame([0xff; 6], MAC_B, 1, 60);
            assert_eq!(q.push(&OffloadHdr::default(), &f), Err(PushError::Down));
            assert_eq!(q.stats().kernel_tx_invalid, 0);
        }
    });
}
