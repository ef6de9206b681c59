//! The data path under a hostile ring client, through an in-process
//! daemon, its control socket and real memfd regions: an unfinished
//! fragment chain does not keep a worker busy and is dropped after a bound,
//! buffers a slot cannot describe are refused, and for every source the
//! switch's counters add up: what a client sent is what its port took plus
//! what it refused, and what it took is what each destination (a ring port,
//! a VM) got plus what each dropped.
//!
//! Every wait is for a condition, with a generous deadline.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::guest::*;
use common::*;
use ringswitch_client::Port;
use ringswitch_control::{Connection, PortStats, Request, VhostUserSpec};
use ringswitch_ring::layout::{MAX_FRAGS, NS_MOREFRAG};
use ringswitch_ring::AppRing;

/// Daemons of this file start one at a time, so each test can tell its
/// own worker thread from the others'.
static START: Mutex<()> = Mutex::new(());

fn tids() -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn comm(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// CPU time thread `tid` of this process used, in nanoseconds.
fn cpu_ns(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .unwrap_or_else(|e| panic!("schedstat of thread {tid}: {e}"));
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat starts with the CPU time")
}

/// A daemon with one worker, and that worker's thread id.
fn daemon_and_worker(tag: &str) -> (ringswitch_daemon::Daemon, u32) {
    let _g = START.lock().unwrap_or_else(|e| e.into_inner());
    let before = tids();
    let d = daemon_with(tag, |c| c.workers = 1);
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(t) = tids()
            .into_iter()
            .find(|t| !before.contains(t) && comm(*t) == "rs-worker0")
        {
            return (d, t);
        }
        assert!(Instant::now() < deadline, "no worker thread appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn stats(sock: &std::path::Path) -> Vec<PortStats> {
    let mut c = Connection::connect(sock).unwrap();
    c.call_as(&Request::Stats { switch: None }).unwrap().0
}

fn stat(sock: &std::path::Path, name: &str) -> PortStats {
    stats(sock)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no counters for {name}"))
}

/// Receives one frame on `p`'s RX ring 0 (its fragments joined).
fn recv_one(p: &mut Port) -> Vec<u8> {
    let deadline = Instant::now() + DEADLINE;
    let mut rx = p.rx(0);
    loop {
        assert!(Instant::now() < deadline, "no frame arrived");
        if rx.space() == 0 {
            let _ = rx.wait(Some(Duration::from_millis(100)));
            continue;
        }
        let mut out = Vec::new();
        let mut k = 0;
        loop {
            let s = rx.slot(k).expect("a chain is delivered whole");
            out.extend_from_slice(s.payload());
            k += 1;
            if s.flags() & NS_MOREFRAG == 0 {
                break;
            }
        }
        rx.advance(k);
        rx.sync().unwrap();
        return out;
    }
}

/// Writes slot `k` past the application's `cur`: `data` in its buffer,
/// length and flags.
fn put(tx: &mut AppRing, k: u32, data: &[u8], len: u16, flags: u16) {
    let mut s = tx.slot_mut(k).expect("the slot is the application's");
    assert!(s.write_at(0, data));
    s.set_len_flags(len, flags);
}

/// Item 4 of issue 15: a client that publishes one slot with NS_MOREFRAG
/// and never the rest. The worker sleeps (its CPU time stays far below a
/// busy thread's while other ports keep forwarding), forwards the frame once
/// the client completes it, and drops such a chain, counted, once it made
/// no progress for a bounded number of looks.
#[test]
fn an_unfinished_fragment_chain_does_not_keep_the_worker_busy() {
    let (d, worker) = daemon_and_worker("unfinished");
    let s = d.socket().to_path_buf();
    // Two TX rings: ring 1 holds the unfinished chain, ring 0 keeps
    // forwarding (and makes the worker look at ring 1 again).
    let mut a = Port::open_at(&s, "vale0:a@conf:rings=2").unwrap();
    let mut b = Port::open_at(&s, "vale0:b").unwrap();
    let mut c = Port::open_at(&s, "vale0:c").unwrap();
    let big = frame([0xff; 6], mac(0xa), 3000, 1);
    {
        let mut tx = a.tx(1);
        put(tx.app(), 0, &big[..2048], 2048, NS_MOREFRAG);
        tx.advance(1);
        tx.sync().unwrap();
    }
    // The worker has seen the chain once its head is published; from then
    // on it has nothing to do. Measure its CPU time over at least two
    // seconds: a spinning worker uses about all of it, a sleeping one
    // almost none.
    let wall0 = Instant::now();
    let cpu0 = cpu_ns(worker);
    std::thread::sleep(Duration::from_secs(2));
    let wall = wall0.elapsed().as_nanos() as u64;
    let cpu = cpu_ns(worker) - cpu0;
    assert!(
        cpu * 5 < wall,
        "the worker used {cpu} ns of CPU in {wall} ns with only an unfinished chain queued"
    );

    // Other ports keep forwarding: c to b, unicast after b is learned.
    assert_eq!(send(&mut b, &[frame([0xff; 6], mac(0xb), 60, 2)]), 1);
    assert_eq!(tag_of(&recv_one(&mut c)), 2);
    assert_eq!(send(&mut c, &[frame(mac(0xb), mac(0xc), 60, 3)]), 1);
    assert_eq!(tag_of(&recv_one(&mut b)), 3);

    // The chain completed: the frame arrives whole, after what came before.
    {
        let mut tx = a.tx(1);
        put(tx.app(), 0, &big[2048..], 952, 0);
        tx.advance(1);
        tx.sync().unwrap();
    }
    assert_eq!(recv_one(&mut b), big);
    assert_eq!(recv_one(&mut c), big);
    assert_eq!(stat(&s, "vale0:a").drop_malformed, 0);

    // An unfinished chain that never progresses is dropped and counted once
    // the worker looked at it often enough: ring 0's traffic makes it look.
    {
        let mut tx = a.tx(1);
        put(tx.app(), 0, &big[..2048], 2048, NS_MOREFRAG);
        tx.advance(1);
        tx.sync().unwrap();
    }
    let mut tag = 100;
    wait_until("the unfinished chain to be dropped", || {
        if stat(&s, "vale0:a").drop_malformed == 1 {
            return true;
        }
        tag += 1;
        let f = frame(mac(0xb), mac(0xa), 60, tag);
        {
            let mut tx = a.tx(0);
            put(tx.app(), 0, &f, 60, 0);
            tx.advance(1);
            tx.sync().unwrap();
        }
        assert_eq!(tag_of(&recv_one(&mut b)), tag);
        false
    });
    let sent = tag - 100;
    assert!(
        sent <= 4 * ringswitch_ring::PortRing::STALLED_LOOKS_MAX,
        "dropped only after {sent} frames on the other ring"
    );
    // The daemon still answers and forwards.
    assert_eq!(send(&mut c, &[frame(mac(0xb), mac(0xc), 60, 9)]), 1);
    assert_eq!(tag_of(&recv_one(&mut b)), 9);
}

/// Item 5 of issue 15: a 64 KiB buffer would wrap a full slot's 16-bit
/// length to 0. Asking for it gets a clear error, over the real socket.
#[test]
fn a_buffer_size_a_slot_cannot_express_is_refused() {
    let d = daemon("bufsize");
    let s = d.socket().to_path_buf();
    for name in ["vale0:x@conf:buf-size=65536", "pipe{7@conf:buf-size=65536"] {
        let e = Port::open_at(&s, name).err().expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains("65536") && msg.contains("65472"),
            "{name}: {msg}"
        );
    }
    // The largest buffer a slot can describe works, and a frame filling it
    // travels with its true length.
    let mut a = Port::open_at(&s, "vale0:a@conf:buf-size=65472,slots=64").unwrap();
    let mut b = Port::open_at(&s, "vale0:b@conf:buf-size=65472,slots=64").unwrap();
    let f = frame([0xff; 6], mac(0xa), 65472, 5);
    assert_eq!(send(&mut a, std::slice::from_ref(&f)), 1);
    assert_eq!(recv_one(&mut b), f);
}

/// What a hostile ring client writes, one unit (packet, as the switch
/// parses it) at a time.
#[derive(Clone, Copy, Debug)]
enum Unit {
    /// A good frame in one slot.
    Good(u16),
    /// A good frame in `n` full slots and a short last one.
    Chain(u32),
    /// A slot pointing outside the region.
    BadBuf,
    /// Shorter than an Ethernet header.
    Runt,
    /// Longer than its buffer.
    Long,
    /// A chain with a bad buffer index in its second slot.
    ChainBadBuf,
    /// A chain with a fragment longer than its buffer.
    ChainLong,
    /// `MAX_FRAGS` slots all flagged NS_MOREFRAG: refused at the last.
    Endless,
}

impl Unit {
    fn slots(self) -> u32 {
        match self {
            Unit::Chain(n) => n + 1,
            Unit::ChainBadBuf | Unit::ChainLong => 3,
            Unit::Endless => MAX_FRAGS,
            _ => 1,
        }
    }
}

/// A small deterministic generator (no timing, no seed from the clock).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    fn unit(&mut self) -> Unit {
        match self.next() % 10 {
            0..=2 => Unit::Good(60 + (self.next() % 1400) as u16),
            3 => Unit::Chain(1 + self.next() % 12),
            4 => Unit::BadBuf,
            5 => Unit::Runt,
            6 => Unit::Long,
            7 => Unit::ChainBadBuf,
            8 => Unit::ChainLong,
            _ => Unit::Endless,
        }
    }
}

/// Writes `u` at `k` slots past cur of TX ring `tx` (2048-byte buffers),
/// as broadcast frames from `src`.
fn scribble(tx: &mut AppRing, k: u32, u: Unit, src: [u8; 6], tag: u32) {
    let bcast = [0xff; 6];
    let buf = 2048usize;
    match u {
        Unit::Good(len) => put(tx, k, &frame(bcast, src, len.into(), tag), len, 0),
        Unit::Chain(n) => {
            let f = frame(bcast, src, buf * n as usize + 100, tag);
            for i in 0..n {
                let at = i as usize * buf;
                put(tx, k + i, &f[at..at + buf], 2048, NS_MOREFRAG);
            }
            put(tx, k + n, &f[buf * n as usize..], 100, 0);
        }
        Unit::BadBuf | Unit::ChainBadBuf => {
            let chain = matches!(u, Unit::ChainBadBuf);
            let f = frame(bcast, src, 60, tag);
            put(tx, k, &f, 60, if chain { NS_MOREFRAG } else { 0 });
            let bad = if chain {
                put(tx, k + 1, &f, 60, NS_MOREFRAG);
                put(tx, k + 2, &f, 60, 0);
                k + 1
            } else {
                k
            };
            let idx = tx.slot_index(bad).unwrap();
            tx.ring().set_buf_idx(idx, u32::MAX - tag);
        }
        Unit::Runt => put(tx, k, &frame(bcast, src, 60, tag), 10, 0),
        Unit::Long => put(tx, k, &frame(bcast, src, 60, tag), 4000, 0),
        Unit::ChainLong => {
            let f = frame(bcast, src, 60, tag);
            put(tx, k, &f, 60, NS_MOREFRAG);
            put(tx, k + 1, &f, 60000, NS_MOREFRAG);
            put(tx, k + 2, &f, 60, 0);
        }
        Unit::Endless => {
            let f = frame(bcast, src, 60, tag);
            for i in 0..MAX_FRAGS {
                put(tx, k + i, &f, 60, NS_MOREFRAG);
            }
        }
    }
}

/// Sends `rounds` rings' worth of scribbled units from `p`; returns how
/// many units went (each one packet as the switch parses it).
fn hostile_sender(p: &mut Port, src: [u8; 6], seed: u64, rounds: u32) -> u64 {
    let mut rng = Lcg(seed);
    let mut units = 0u64;
    // Each slot's own buffer, put back before a slot is written again.
    let first = {
        let mut tx = p.tx(0);
        let r = tx.app().region().clone();
        r.layout().first_buf(0, ringswitch_ring::Dir::Tx, 0)
    };
    for _ in 0..rounds {
        let mut tx = p.tx(0);
        // Wait until the port took everything sent so far.
        let deadline = Instant::now() + DEADLINE;
        while tx.app().pending() > 0 || tx.space() < tx.num_slots() / 2 {
            assert!(Instant::now() < deadline, "the port never took the batch");
            let _ = tx.wait(Some(Duration::from_millis(50)));
            tx.sync().unwrap();
        }
        for k in 0..tx.space() {
            let i = tx.app().slot_index(k).unwrap();
            tx.app().ring().set_buf_idx(i, first + i);
        }
        let mut k = 0;
        loop {
            let u = rng.unit();
            if k + u.slots() + MAX_FRAGS >= tx.space() {
                break;
            }
            scribble(tx.app(), k, u, src, units as u32);
            k += u.slots();
            units += 1;
        }
        tx.advance(k);
        tx.sync().unwrap();
    }
    units
}

/// Sums of a source's own counters: what it took plus what it refused.
fn source_sum(s: &PortStats) -> u64 {
    s.tx_packets + s.drop_malformed + s.drop_short + s.drop_long + s.drop_no_dest
}

/// What a destination did with what it was offered, in the frames the
/// source sent (segments made in software counted once).
fn destination_sum(s: &PortStats) -> u64 {
    s.rx_packets + s.drop_rx_full + s.drop_long + s.drop_link_down + s.drop_malformed
        - s.rx_segments_added
}

/// Waits until the source's counters account for `units`, then checks
/// that the one destination accounts for every packet the source took.
fn check_sums(sock: &std::path::Path, src: &str, dst: &str, units: u64) {
    wait_until(&format!("{src}'s counters to reach {units}"), || {
        source_sum(&stat(sock, src)) == units
    });
    let all = stats(sock);
    let find = |n: &str| all.iter().find(|s| s.name == n).unwrap().clone();
    let (s, d) = (find(src), find(dst));
    assert_eq!(source_sum(&s), units, "{s:?}");
    assert_eq!(d.tx_packets, 0, "the destination sent nothing: {d:?}");
    assert_eq!(
        s.tx_packets,
        destination_sum(&d),
        "every packet {src} took is delivered to or dropped by {dst}: {s:?} {d:?}"
    );
    assert!(
        s.drop_malformed > 0 && s.drop_short > 0 && s.drop_long > 0,
        "{s:?}"
    );
}

/// Exact accounting (issue 15), ring destination: a hostile client's
/// scribbles to a ring port with small buffers (chains too long for them)
/// that never reads (its ring fills).
#[test]
fn counters_add_up_for_a_ring_destination_under_a_hostile_sender() {
    let d = daemon("sum-ring");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale1:a").unwrap();
    let _b = Port::open_at(&s, "vale1:b@conf:buf-size=128,slots=256").unwrap();
    let units = hostile_sender(&mut a, mac(0xa), 1, 6);
    check_sums(&s, "vale1:a", "vale1:b", units);
    let b = stat(&s, "vale1:b");
    assert!(
        b.drop_rx_full > 0 && b.drop_long > 0 && b.rx_packets > 0,
        "{b:?}"
    );
    // The daemon still forwards between other ports.
    let mut x = Port::open_at(&s, "vale2:x").unwrap();
    let mut y = Port::open_at(&s, "vale2:y").unwrap();
    assert_eq!(send(&mut x, &[frame([0xff; 6], mac(1), 60, 42)]), 1);
    assert_eq!(tag_of(&recv_one(&mut y)), 42);
}

/// Exact accounting (issue 15), VM destination: a vhost-user guest over a
/// real socket with a few receive buffers posted, then none.
#[test]
fn counters_add_up_for_a_vm_destination_under_a_hostile_sender() {
    let d = daemon("sum-vm");
    let s = d.socket().to_path_buf();
    let path = std::env::temp_dir().join(format!("rs-sum-vm-{}.sock", std::process::id()));
    let mut c = Connection::connect(&s).unwrap();
    c.call(&Request::PortAdd {
        name: "vale1:vm".into(),
        vhost_user: Some(VhostUserSpec {
            path: path.to_string_lossy().into_owned(),
            client: false,
            queues: 1,
            offloads: true,
        }),
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    let mut a = Port::open_at(&s, "vale1:a").unwrap();
    // Frames before the guest is up count as link down.
    let before = hostile_sender(&mut a, mac(0xa), 2, 1);
    check_sums(&s, "vale1:a", "vale1:vm", before);
    let mut g = Guest::connect(&path, GuestConfig::default());
    g.post_rx(0, 200, 2048);
    let units = before + hostile_sender(&mut a, mac(0xa), 3, 5);
    check_sums(&s, "vale1:a", "vale1:vm", units);
    let vm = stat(&s, "vale1:vm");
    assert!(
        vm.rx_packets > 0 && vm.drop_rx_full > 0 && vm.drop_link_down > 0,
        "{vm:?}"
    );
    assert!(!g.recv().is_empty());
}

/// Exact accounting (issue 15), VM source: a vhost-user guest over a real
/// socket sends good frames, every kind of bad descriptor chain, runts and
/// frames with unsound offload requests, to a ring port whose ring fills.
/// Every chain it sent is counted once by its port, and every frame its
/// port took is counted once by the ring port.
#[test]
fn counters_add_up_for_a_vm_source_with_bad_chains_and_offloads() {
    let d = daemon("sum-vm-src");
    let s = d.socket().to_path_buf();
    let path = std::env::temp_dir().join(format!("rs-sum-vmsrc-{}.sock", std::process::id()));
    let mut c = Connection::connect(&s).unwrap();
    c.call(&Request::PortAdd {
        name: "vale1:vm".into(),
        vhost_user: Some(VhostUserSpec {
            path: path.to_string_lossy().into_owned(),
            client: false,
            queues: 1,
            offloads: true,
        }),
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    let _r = Port::open_at(&s, "vale1:r@conf:slots=64").unwrap();
    let mut g = Guest::connect(&path, GuestConfig::default());
    let src = mac(0x9);
    let mut chains = 0u64;
    for round in 0..3u32 {
        for k in 0..40 {
            g.send_plain(&frame([0xff; 6], src, 60 + k, round * 100 + k as u32));
            chains += 1;
        }
        for bad in BadChain::ALL {
            g.send_bad(0, bad);
            chains += 1;
        }
        g.send_plain(&frame([0xff; 6], src, 60, 0)[..10]);
        // A checksum field past the frame's end.
        g.send(&csum_hdr(50, 16), &frame([0xff; 6], src, 60, 1));
        // A TSO frame the ring port gets as segments (some may find the
        // ring full).
        let payload: Vec<u8> = (0..MSS as usize * 5 + 17).map(|i| i as u8).collect();
        g.send(
            &gso_hdr(ringswitch_frame::GSO_TCPV4, TCP_HDRS as u16, MSS, 34, 16),
            &tcp4_frame([0xff; 6], src, round, &payload),
        );
        chains += 3;
        assert!(g.flush_tx(0, DEADLINE), "the guest's chains were taken");
    }
    wait_until("the VM port's counters to account for every chain", || {
        source_sum(&stat(&s, "vale1:vm")) == chains
    });
    let (vm, r) = (stat(&s, "vale1:vm"), stat(&s, "vale1:r"));
    assert_eq!(
        vm.drop_malformed,
        3 * (BadChain::ALL.len() as u64 + 1),
        "{vm:?}"
    );
    assert_eq!(vm.drop_short, 3, "{vm:?}");
    assert_eq!(vm.tx_packets, destination_sum(&r), "{vm:?} {r:?}");
    assert!(r.drop_rx_full > 0 && r.rx_packets > 0, "{r:?}");
    assert_eq!(r.rx_segments_added, 3 * 5, "{r:?}");
}

/// TCP payload per segment of the TSO frames above.
const MSS: u16 = 1000;

/// Exact accounting (issue 15), interface destination through the daemon:
/// a TAP the daemon creates (`attach --host`). Needs root and /dev/net/tun;
/// skipped with a message otherwise.
#[test]
fn counters_add_up_for_a_tap_destination_under_a_hostile_sender() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("skipped: creating a TAP needs root and /dev/net/tun");
        return;
    }
    let d = daemon("sum-tap");
    let s = d.socket().to_path_buf();
    let tap = format!("rsdp{}", std::process::id() % 100_000);
    let mut c = Connection::connect(&s).unwrap();
    c.call(&Request::Attach {
        switch: "vale3".into(),
        nic: None,
        host: Some(ringswitch_control::HostSpec {
            name: Some(tap.clone()),
            queues: 1,
        }),
        vlan: None,
    })
    .unwrap_or_else(|e| panic!("attaching TAP {tap}: {e}"));
    // The kernel must send nothing into the switch from the TAP (its
    // counters would mix with the ones checked): no IPv6, hence no router
    // solicitations or MLD reports, and no IPv4 address.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{tap}/disable_ipv6"), "1");
    let up = std::process::Command::new("ip")
        .args(["link", "set", "dev", &tap, "up"])
        .status();
    let mut a = Port::open_at(&s, "vale3:a").unwrap();
    let units = hostile_sender(&mut a, mac(0xa), 4, 4);
    let dst = format!("vale3:{tap}");
    check_sums(&s, "vale3:a", &dst, units);
    let t = stat(&s, &dst);
    if up.is_ok_and(|st| st.success()) {
        assert!(t.rx_packets > 0, "{t:?}");
    }
    c.call(&Request::Detach { name: dst }).unwrap();
}

/// A port no client has open is down, as a VALE port not in netmap mode
/// is: frames for it are dropped and counted (`drop_link_down`), not kept
/// in its rings for whoever opens it next (who would read them first and
/// out of order). Frames with no destination at all are counted once, in
/// `drop_no_dest`, and not in `tx_packets`.
#[test]
fn a_port_without_a_client_gets_nothing_and_counts_it() {
    let d = daemon("link-down");
    let s = d.socket().to_path_buf();
    let mut c = Connection::connect(&s).unwrap();
    c.call(&Request::PortAdd {
        name: "vale3:b".into(),
        vhost_user: None,
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    let mut a = Port::open_at(&s, "vale3:a").unwrap();
    let early: Vec<_> = (0..10).map(|k| frame([0xff; 6], mac(1), 60, k)).collect();
    assert_eq!(send(&mut a, &early), 10);
    wait_until("the frames for the closed port to be counted", || {
        stat(&s, "vale3:b").drop_link_down == 10
    });
    let (sa, sb) = (stat(&s, "vale3:a"), stat(&s, "vale3:b"));
    assert_eq!((sa.tx_packets, sb.rx_packets), (10, 0), "{sa:?} {sb:?}");

    // Its first client reads what was sent after it opened, nothing older.
    let mut b = Port::open_at(&s, "vale3:b").unwrap();
    assert_eq!(send(&mut a, &[frame([0xff; 6], mac(1), 60, 77)]), 1);
    assert_eq!(tag_of(&recv_one(&mut b)), 77);
    drop(b);
    wait_until("vale3:b to be closed", || {
        let mut c = Connection::connect(&s).unwrap();
        let ports: Vec<ringswitch_control::PortInfo> =
            c.call_as(&Request::PortList { switch: None }).unwrap().0;
        ports.iter().any(|p| p.name == "vale3:b" && !p.open)
    });
    let late: Vec<_> = (0..5).map(|k| frame([0xff; 6], mac(1), 60, k)).collect();
    assert_eq!(send(&mut a, &late), 5);
    wait_until("the frames after the client left to be counted", || {
        stat(&s, "vale3:b").drop_link_down == 15
    });
    let (sa, sb) = (stat(&s, "vale3:a"), stat(&s, "vale3:b"));
    assert_eq!(
        sa.tx_packets,
        sb.rx_packets + sb.drop_link_down,
        "{sa:?} {sb:?}"
    );

    // Alone on its switch: nothing is forwarded, everything is counted.
    let mut solo = Port::open_at(&s, "vale4:solo").unwrap();
    let frames: Vec<_> = (0..3).map(|k| frame([0xff; 6], mac(2), 60, k)).collect();
    assert_eq!(send(&mut solo, &frames), 3);
    wait_until("the frames with no destination to be counted", || {
        stat(&s, "vale4:solo").drop_no_dest == 3
    });
    let st = stat(&s, "vale4:solo");
    assert_eq!((st.tx_packets, st.tx_bytes), (0, 0), "{st:?}");
}

/// A pipe end that frees RX slots its peer waits for (to send into) wakes
/// it, and publishes what that cost where the peer's adaptive wait for TX
/// space reads it, as a switch worker does for the rings it serves.
#[test]
fn a_pipe_end_publishes_what_waking_its_sender_costs() {
    use ringswitch_client::WaitMode;
    use ringswitch_ring::Dir;
    use std::sync::atomic::Ordering;
    let d = daemon("pipekick");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "pipe{31@conf:slots=64").unwrap();
    let mut b = Port::open_at(&s, "pipe}31@conf:slots=64").unwrap();
    a.set_wait_mode(WaitMode::Blocking);
    // Fill b's RX ring and then a's TX ring: a has no room left.
    let f = frame(mac(0xb), mac(0xa), 60, 1);
    let mut sent = 0usize;
    loop {
        let mut tx = a.tx(0);
        tx.sync().unwrap();
        let n = tx.space();
        if n == 0 {
            break;
        }
        for k in 0..n {
            let mut slot = tx.slot(k).unwrap();
            assert!(slot.write_at(0, &f));
            slot.set_len(f.len() as u16);
        }
        tx.advance(n);
        sent += n as usize;
        assert!(sent <= 1024, "a pipe of 64-slot rings took {sent} frames");
    }
    let (region, end) = (a.region().clone(), a.info().end as usize);
    let csb = || region.csb(end, Dir::Tx, 0);
    let waiter = std::thread::spawn(move || {
        assert!(a.tx(0).wait(Some(Duration::from_secs(60))).unwrap());
        a
    });
    wait_until("a asleep, waiting for room", || {
        csb().appl_need_kick().load(Ordering::Relaxed) != 0
    });
    assert_eq!(csb().kick_cost_ns().load(Ordering::Relaxed), 0);
    assert!(!recv_n(&mut b, 1).is_empty());
    // b's RX sync woke a, and published the cost before it returned.
    assert!(csb().kick_cost_ns().load(Ordering::Relaxed) > 0);
    let mut a = waiter.join().unwrap();
    assert!(
        a.app_ring(Dir::Tx, 0).peer_kick_cost() > Duration::ZERO,
        "a reads what waking it cost"
    );
    drop(b);
}
