//! VM ports end to end: an in-process daemon, mock guests speaking
//! vhost-user and virtio-net over real sockets and shared memory
//! (common/guest.rs), and ring ports opened with the client library.
//!
//! Every test has its own daemon and socket paths, and bounds every wait.

mod common;

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::guest::*;
use common::*;
use ringswitch_client::{ClientError, Port};
use ringswitch_control::{
    CallError, Connection, ErrorCode, ErrorReply, PortInfo, PortKind, PortStats, Request,
    SwitchInfo, VhostUserSpec,
};
use ringswitch_daemon::Daemon;
use ringswitch_vhost::hdr::feature;
use ringswitch_vhost::VirtioNetHdr;

/// Upper bound of every wait for traffic.
const T: Duration = DEADLINE;
/// How long "nothing more arrives" is watched.
const QUIET: Duration = Duration::from_millis(150);

/// MACs: guests 0xa*, ring ports 0xb*.
const GA: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa1];
const GB: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa2];
const RP: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb1];

// ---------------------------------------------------------------------
// Environment

/// Serializes daemon starts, so each test can tell its worker thread apart.
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

/// CPU time a thread used, in nanoseconds.
fn cpu_ns(tid: u32) -> Option<u64> {
    if let Ok(s) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
        return s.split_whitespace().next()?.parse().ok();
    }
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000_000)
}

struct Env {
    _d: Daemon,
    s: PathBuf,
    c: Connection,
    tag: String,
    /// The daemon's worker thread (it has one), if it could be identified.
    worker: Option<u32>,
}

fn env(tag: &str) -> Env {
    let (d, worker) = {
        let _g = START.lock().unwrap_or_else(|e| e.into_inner());
        let before = tids();
        let d = daemon(&format!("vm-{tag}"));
        let deadline = Instant::now() + T;
        let worker = loop {
            if let Some(t) = tids()
                .into_iter()
                .find(|t| !before.contains(t) && comm(*t) == "rs-worker0")
            {
                break Some(t);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        (d, worker)
    };
    let s = d.socket().to_path_buf();
    let c = Connection::connect(&s).unwrap();
    Env {
        _d: d,
        s,
        c,
        tag: tag.to_string(),
        worker,
    }
}

fn vm_sock(tag: &str, n: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rs-vm-{}-{tag}-{n}.sock", std::process::id()))
}

/// Removes a path the test created itself (a client-mode listener) when
/// the test ends, passed or not.
struct RmOnDrop(PathBuf);

impl Drop for RmOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn spec(path: &Path) -> VhostUserSpec {
    VhostUserSpec {
        path: path.to_string_lossy().into_owned(),
        client: false,
        queues: 1,
        offloads: true,
    }
}

fn daemon_err(r: Result<(serde_json::Value, Vec<std::os::fd::OwnedFd>), CallError>) -> ErrorReply {
    match r {
        Err(CallError::Daemon(e)) => e,
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => panic!("expected a daemon error, got {e}"),
    }
}

impl Env {
    fn add_vm(&mut self, name: &str, spec: VhostUserSpec) -> Result<(), ErrorReply> {
        self.add_vm_at(name, spec, None)
    }

    /// Adds a VM port asking for OpenFlow number `ofport`.
    fn add_vm_at(
        &mut self,
        name: &str,
        spec: VhostUserSpec,
        ofport: Option<u32>,
    ) -> Result<(), ErrorReply> {
        match self.c.call(&Request::PortAdd {
            name: name.into(),
            vhost_user: Some(spec),
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport,
        }) {
            Ok(_) => Ok(()),
            Err(CallError::Daemon(e)) => Err(e),
            Err(e) => panic!("port-add {name}: {e}"),
        }
    }

    /// Adds a server-mode VM port; returns its socket path.
    fn vm(&mut self, name: &str) -> PathBuf {
        let n = name.replace(':', "-");
        let path = vm_sock(&self.tag, &n);
        self.add_vm(name, spec(&path))
            .unwrap_or_else(|e| panic!("port-add {name}: {e}"));
        path
    }

    fn del(&mut self, name: &str) -> Result<(), ErrorReply> {
        match self.c.call(&Request::PortDel { name: name.into() }) {
            Ok(_) => Ok(()),
            Err(CallError::Daemon(e)) => Err(e),
            Err(e) => panic!("port-del {name}: {e}"),
        }
    }

    fn open(&self, name: &str) -> Port {
        Port::open_at(&self.s, name).unwrap_or_else(|e| panic!("open {name}: {e}"))
    }

    fn stats(&mut self) -> Vec<PortStats> {
        self.c.call_as(&Request::Stats { switch: None }).unwrap().0
    }

    /// The counters once `done` holds for them. A frame's counters are
    /// added before any destination can see it, but a drop is seen by no
    /// one, and a guest's TX chains are completed before their batch is
    /// delivered: so each caller waits for the totals it expects (frames
    /// taken plus dropped), up to T, and its asserts then say what is
    /// wrong if they never came.
    fn stats_when(&mut self, done: impl Fn(&[PortStats]) -> bool) -> Vec<PortStats> {
        let deadline = Instant::now() + T;
        loop {
            let now = self.stats();
            if done(&now) || Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Port `name`'s counters once `done` holds for them (see `stats_when`).
    fn stat_when(&mut self, name: &str, done: impl Fn(&PortStats) -> bool) -> PortStats {
        find(&self.stats_when(|all| done(&find(all, name))), name)
    }

    /// Port `name`'s counters now: for a caller that saw every frame it
    /// sent arrive, since counters are added before frames are visible.
    fn stat(&mut self, name: &str) -> PortStats {
        find(&self.stats(), name)
    }

    fn ports(&mut self) -> Vec<PortInfo> {
        self.c
            .call_as(&Request::PortList { switch: None })
            .unwrap()
            .0
    }

    fn connected(&mut self, name: &str) -> bool {
        self.ports()
            .into_iter()
            .find(|p| p.name == name)
            .and_then(|p| p.vhost_user)
            .is_some_and(|v| v.connected)
    }

    fn wait_connected(&mut self, name: &str, want: bool) -> bool {
        let deadline = Instant::now() + T;
        while Instant::now() < deadline {
            if self.connected(name) == want {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// The daemon still serves: a switch-list answers and two fresh ring
    /// ports on a new switch exchange a frame.
    fn still_works(&mut self) {
        let _: Vec<SwitchInfo> = self.c.call_as(&Request::SwitchList).unwrap().0;
        let mut a = self.open("vale99:x");
        let mut b = self.open("vale99:y");
        let f = frame(mac(0x11), mac(0x12), 60, 7);
        assert_eq!(send(&mut a, std::slice::from_ref(&f)), 1);
        assert_eq!(recv_within(&mut b, 1, T), vec![f]);
    }
}

fn find(all: &[PortStats], name: &str) -> PortStats {
    all.iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no stats for {name} in {all:?}"))
}

fn drops(s: &PortStats) -> u64 {
    s.drop_rx_full + s.drop_malformed + s.drop_short + s.drop_long + s.drop_link_down
}

// ---------------------------------------------------------------------
// Frames and ring ports

/// A frame of `len` bytes with `tag` in its payload and bytes that depend
/// on the tag, so any corruption or mix-up shows.
fn pat(dst: [u8; 6], src: [u8; 6], len: usize, tag: u32) -> Vec<u8> {
    let mut f = frame(dst, src, len, tag);
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (tag as u8) ^ (i as u8).wrapping_mul(7) ^ ((i >> 8) as u8);
    }
    f
}

/// Receives until `n` frames arrived on RX ring 0 or `timeout` passed.
/// Sends on TX ring `ring` (the common `send` uses ring 0).
fn send_ring(p: &mut Port, ring: usize, frames: &[Vec<u8>]) -> usize {
    let mut sent = 0;
    let deadline = Instant::now() + T;
    while sent < frames.len() && Instant::now() < deadline {
        let mut tx = p.tx(ring);
        let n = tx.space().min((frames.len() - sent) as u32);
        if n == 0 {
            let _ = tx.wait(Some(Duration::from_millis(50)));
            continue;
        }
        for k in 0..n {
            let f = &frames[sent + k as usize];
            let mut s = tx.slot(k).unwrap();
            assert!(s.write_at(0, f));
            s.set_len(f.len() as u16);
        }
        tx.advance(n);
        tx.sync().unwrap();
        sent += n as usize;
    }
    sent
}

fn tags(frames: &[Vec<u8>]) -> Vec<u32> {
    frames.iter().map(|f| tag_of(f)).collect()
}

fn rx_tags(frames: &[RxFrame]) -> Vec<u32> {
    frames.iter().map(|f| tag_of(&f.data)).collect()
}

fn cfg_refill() -> GuestConfig {
    GuestConfig {
        rx_refill: Some(2048),
        ..GuestConfig::default()
    }
}

/// Connects a guest and posts a full ring of 2 KiB RX buffers.
fn guest(path: &Path, cfg: GuestConfig) -> Guest {
    let mut g = Guest::connect(path, cfg);
    let len = g.config().rx_refill.unwrap_or(2048);
    for p in 0..g.config().pairs as usize {
        g.post_rx(p, 4096, len);
    }
    g
}

fn assert_same(got: &[Vec<u8>], want: &[Vec<u8>], what: &str) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} frames arrived, {} sent (tags {:?}...)",
        got.len(),
        want.len(),
        tags(&got[..got.len().min(8)])
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w,
            "{what}: frame {i} differs: tag {} ({} bytes) arrived, tag {} ({} bytes) expected",
            tag_of(g),
            g.len(),
            tag_of(w),
            w.len()
        );
    }
}

// ---------------------------------------------------------------------
// 1. VM <-> ring port

fn vm_ring_roundtrip(tag: &str, cfg: GuestConfig) {
    let mut e = env(tag);
    let path = e.vm("vale0:vm1");
    let mut g = guest(
        &path,
        GuestConfig {
            rx_refill: Some(2048),
            ..cfg
        },
    );
    let mut p = e.open("vale0:p");

    // The ring port speaks first: both MACs are learned.
    let hello = pat(GA, RP, 60, 0xffff);
    assert_eq!(send(&mut p, std::slice::from_ref(&hello)), 1);
    let got = g.wait_rx(1, T);
    assert_eq!(
        got.len(),
        1,
        "the ring port's first frame reaches the guest"
    );
    assert_eq!(got[0].data, hello);
    assert_eq!(got[0].hdr.flags, 0);
    assert_eq!(got[0].hdr.gso_type, 0);

    // VM -> ring port: 1000 frames, 60 to 1514 bytes.
    let out: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| pat(RP, GA, 60 + (i as usize * 37) % 1455, i))
        .collect();
    for f in &out {
        g.send_plain(f);
    }
    let got = recv_within(&mut p, out.len(), T);
    assert_same(&got, &out, "guest to ring port");
    assert!(g.flush_tx(0, T), "every TX chain completed");

    // Ring port -> VM: 1000 frames, paced to what the guest has posted.
    let back: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| pat(GA, RP, 60 + (i as usize * 53) % 1455, 10_000 + i))
        .collect();
    let mut got = Vec::new();
    for chunk in back.chunks(100) {
        assert_eq!(send(&mut p, chunk), chunk.len());
        let r = g.wait_rx(chunk.len(), T);
        assert!(r.iter().all(|f| f.hdr.flags == 0 && f.hdr.gso_type == 0));
        got.extend(r.into_iter().map(|f| f.data));
    }
    assert_same(&got, &back, "ring port to guest");
    assert!(g.wait_rx(1, QUIET).is_empty(), "nothing more for the guest");
    assert!(
        recv_within(&mut p, 1, QUIET).is_empty(),
        "nothing more for the ring port"
    );

    let all = e.stats_when(|a| {
        let (vm, rp) = (find(a, "vale0:vm1"), find(a, "vale0:p"));
        vm.tx_packets >= 1000
            && rp.rx_packets + drops(&rp) >= 1000
            && rp.tx_packets >= 1001
            && vm.rx_packets + drops(&vm) >= 1001
    });
    let (vm, rp) = (find(&all, "vale0:vm1"), find(&all, "vale0:p"));
    let bytes = |v: &[Vec<u8>]| v.iter().map(|f| f.len() as u64).sum::<u64>();
    assert_eq!(vm.tx_packets, 1000, "{vm:?}");
    assert_eq!(vm.tx_packets, rp.rx_packets + drops(&rp), "{vm:?} {rp:?}");
    assert_eq!(rp.tx_packets, vm.rx_packets + drops(&vm), "{vm:?} {rp:?}");
    assert_eq!(rp.tx_packets, 1001, "{rp:?}");
    assert_eq!((drops(&vm), drops(&rp)), (0, 0), "{vm:?} {rp:?}");
    assert_eq!(vm.tx_bytes, bytes(&out));
    assert_eq!(rp.rx_bytes, bytes(&out));
    assert_eq!(rp.tx_bytes, bytes(&back) + 60);
    assert_eq!(vm.rx_bytes, bytes(&back) + 60);
    let gs = g.stats();
    assert_eq!(gs.rx_frames, 1001);
    assert_eq!(gs.tx_frames, 1000);
}

#[test]
fn vm_to_ring_port_and_back() {
    vm_ring_roundtrip("ring", GuestConfig::default());
}

/// The same with a legacy driver: no VERSION_1 (10-byte header), no
/// MRG_RXBUF, no EVENT_IDX, no vhost-user protocol features (rings enabled
/// by SET_FEATURES, no REPLY_ACK).
#[test]
fn vm_to_ring_port_and_back_legacy_driver() {
    vm_ring_roundtrip(
        "ring-legacy",
        GuestConfig {
            version_1: false,
            mrg_rxbuf: false,
            event_idx: false,
            protocol_features: false,
            ..GuestConfig::default()
        },
    );
}

/// The same with guest memory in two regions (rings at 0, buffers at 4 GiB
/// from an offset into the memfd) and every TX frame spread over three
/// descriptors (the header split from the frame).
#[test]
fn vm_to_ring_port_and_back_two_regions_and_chained_tx() {
    vm_ring_roundtrip(
        "ring-2reg",
        GuestConfig {
            two_regions: true,
            tx_descs: 3,
            indirect: true,
            ..GuestConfig::default()
        },
    );
}

// ---------------------------------------------------------------------
// 2. VM <-> VM

fn exchange(from: &mut Guest, to: &mut Guest, frames: &[Vec<u8>], what: &str) {
    let mut got = Vec::new();
    for chunk in frames.chunks(128) {
        for f in chunk {
            from.send_plain(f);
        }
        let r = to.wait_rx(chunk.len(), T);
        for f in &r {
            assert_eq!(
                (f.hdr.flags, f.hdr.gso_type),
                (0, 0),
                "{what}: plain frames arrive with a plain header"
            );
        }
        got.extend(r.into_iter().map(|f| f.data));
    }
    assert_same(&got, frames, what);
}

#[test]
fn vm_to_vm_both_ways_with_jumbo_frames() {
    let mut e = env("vm2vm");
    let pa = e.vm("vale0:vmA");
    let pb = e.vm("vale0:vmB");
    let mut a = guest(&pa, cfg_refill());
    let mut b = guest(&pb, cfg_refill());

    let ab: Vec<Vec<u8>> = (0..600u32)
        .map(|i| {
            let len = if i % 10 == 0 {
                1514
            } else {
                60 + (i as usize * 31) % 1455
            };
            pat(GB, GA, len, i)
        })
        .collect();
    exchange(&mut a, &mut b, &ab, "A to B");
    let ba: Vec<Vec<u8>> = (0..600u32)
        .map(|i| pat(GA, GB, 60 + (i as usize * 41) % 1455, 5000 + i))
        .collect();
    exchange(&mut b, &mut a, &ba, "B to A");

    // With MRG_RXBUF a frame larger than one buffer spans several:
    // 2036 + 12 fills one 2 KiB buffer exactly, one byte more takes two,
    // 9000 takes five.
    for (len, bufs, t) in [(2036usize, 1u16, 9001u32), (2037, 2, 9002), (9000, 5, 9003)] {
        let f = pat(GB, GA, len, t);
        a.send_plain(&f);
        let r = b.wait_rx(1, T);
        assert_eq!(r.len(), 1, "{len}-byte frame arrives");
        assert_eq!(r[0].buffers, bufs, "{len}-byte frame in {bufs} buffers");
        assert_eq!(r[0].hdr.num_buffers(), bufs);
        assert_eq!(r[0].data, f, "{len}-byte frame intact");
    }
    assert!(b.wait_rx(1, QUIET).is_empty());
    assert!(a.wait_rx(1, QUIET).is_empty());

    let all = e.stats_when(|a| {
        let (sa, sb) = (find(a, "vale0:vmA"), find(a, "vale0:vmB"));
        sa.tx_packets >= 603
            && sb.rx_packets + drops(&sb) >= 603
            && sb.tx_packets >= 600
            && sa.rx_packets + drops(&sa) >= 600
    });
    let (sa, sb) = (find(&all, "vale0:vmA"), find(&all, "vale0:vmB"));
    assert_eq!(sa.tx_packets, 603, "{sa:?}");
    assert_eq!(sb.rx_packets, 603, "{sb:?}");
    assert_eq!(sb.tx_packets, 600, "{sb:?}");
    assert_eq!(sa.rx_packets, 600, "{sa:?}");
    assert_eq!((drops(&sa), drops(&sb)), (0, 0), "{sa:?} {sb:?}");
}

/// Without MRG_RXBUF a frame must fit one posted buffer: a 9000-byte frame
/// for a guest with 2 KiB buffers is dropped and counted as too long, and
/// the next frame still arrives; a guest posting 9 KiB buffers gets it
/// whole.
#[test]
fn vm_to_vm_jumbo_without_mrg_rxbuf() {
    let mut e = env("jumbo");
    let pa = e.vm("vale0:vmA");
    let pb = e.vm("vale1:vmB");
    let pc = e.vm("vale1:vmC");
    let pd = e.vm("vale0:vmD");
    let mut a = guest(&pa, cfg_refill());
    let no_mrg = GuestConfig {
        mrg_rxbuf: false,
        ..GuestConfig::default()
    };
    let mut d = guest(
        &pd,
        GuestConfig {
            rx_refill: Some(9100),
            ..no_mrg.clone()
        },
    );
    let jumbo = pat(GB, GA, 9000, 1);
    a.send_plain(&jumbo);
    let r = d.wait_rx(1, T);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].data, jumbo, "9000 bytes in one 9100-byte buffer");

    // B (small buffers, no MRG) and C (the sender) on their own switch.
    let mut b = guest(
        &pb,
        GuestConfig {
            rx_refill: Some(2048),
            ..no_mrg
        },
    );
    let mut c = guest(&pc, cfg_refill());
    c.send_plain(&pat(GB, GA, 9000, 2));
    let after = pat(GB, GA, 1514, 3);
    c.send_plain(&after);
    let r = b.wait_rx(1, T);
    assert_eq!(r.len(), 1, "the frame after the jumbo one arrives");
    assert_eq!(r[0].data, after);
    assert!(b.wait_rx(1, QUIET).is_empty());
    let sb = e.stat_when("vale1:vmB", |s| s.drop_long + s.rx_packets >= 2);
    assert_eq!(sb.drop_long, 1, "{sb:?}");
    assert_eq!(sb.rx_packets, 1, "{sb:?}");
}

/// VIRTIO 1.x 5.1.6.3.1: without MRG_RXBUF the device must set
/// num_buffers to 1 (Linux's vhost-net was fixed for this in 2025).
#[test]
fn rx_num_buffers_is_one_without_mrg_rxbuf() {
    let mut e = env("numbuf");
    let path = e.vm("vale0:vm1");
    let mut g = guest(
        &path,
        GuestConfig {
            mrg_rxbuf: false,
            ..cfg_refill()
        },
    );
    let mut p = e.open("vale0:p");
    assert_eq!(send(&mut p, &[pat(GA, RP, 100, 1)]), 1);
    let r = g.wait_rx(1, T);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].hdr.num_buffers(), 1);
}

// ---------------------------------------------------------------------
// 3. Receiver full

#[test]
fn full_receiver_gets_a_prefix_and_the_rest_is_counted() {
    let mut e = env("full");
    let pa = e.vm("vale0:vmA");
    let pb = e.vm("vale0:vmB");
    let mut a = guest(&pa, cfg_refill());
    let mut b = Guest::connect(&pb, GuestConfig::default());
    assert_eq!(b.post_rx(0, 64, 2048), 64);

    let frames: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| pat(GB, GA, 60 + (i as usize % 200), i))
        .collect();
    for f in &frames {
        a.send_plain(f);
    }
    assert!(
        a.flush_tx(0, T),
        "A's frames are all taken although B is full"
    );
    let got = b.wait_rx(64, T);
    assert_eq!(got.len(), 64);
    assert_eq!(
        rx_tags(&got),
        (0..64).collect::<Vec<u32>>(),
        "a prefix, in order"
    );
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(&g.data, f);
    }
    assert!(
        b.wait_rx(1, QUIET).is_empty(),
        "nothing past what was posted"
    );
    let sb = e.stat_when("vale0:vmB", |s| s.rx_packets + s.drop_rx_full >= 1000);
    assert_eq!(sb.rx_packets, 64, "{sb:?}");
    assert_eq!(sb.drop_rx_full, 1000 - 64, "{sb:?}");

    // Buffers again: traffic flows again.
    assert_eq!(b.post_rx(0, 256, 2048), 256);
    let more: Vec<Vec<u8>> = (1000..1100u32).map(|i| pat(GB, GA, 100, i)).collect();
    for f in &more {
        a.send_plain(f);
    }
    let got: Vec<Vec<u8>> = b.wait_rx(100, T).into_iter().map(|f| f.data).collect();
    assert_same(&got, &more, "after B posted buffers");
    let all = e.stats_when(|a| {
        let (sa, sb) = (find(a, "vale0:vmA"), find(a, "vale0:vmB"));
        sa.tx_packets >= 1100 && sb.rx_packets + drops(&sb) >= 1100
    });
    let (sa, sb) = (find(&all, "vale0:vmA"), find(&all, "vale0:vmB"));
    assert_eq!(sa.tx_packets, 1100);
    assert_eq!(sb.rx_packets, 164);
    assert_eq!(sa.tx_packets, sb.rx_packets + drops(&sb), "{sa:?} {sb:?}");
}

// ---------------------------------------------------------------------
// 4. Offloads

const MSS: u16 = 1448;
const TSO_LEN: usize = 20_000;

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| seed ^ (i as u8) ^ ((i >> 8) as u8).wrapping_mul(3))
        .collect()
}

fn offload_guest(bits: &[u32]) -> GuestConfig {
    GuestConfig {
        offloads: bits.to_vec(),
        rx_refill: Some(2048),
        ..GuestConfig::default()
    }
}

fn tso_sender() -> GuestConfig {
    offload_guest(&[feature::VIRTIO_NET_F_CSUM, feature::VIRTIO_NET_F_HOST_TSO4])
}

/// The 20000-byte TSO frame and its header.
fn tso_frame(dst: [u8; 6]) -> (VirtioNetHdr, Vec<u8>, Vec<u8>, u32) {
    let seq0 = 0x1000_0000u32;
    let data = payload(TSO_LEN - TCP_HDRS, 0x33);
    let f = tcp4_frame(dst, GA, seq0, &data);
    assert_eq!(f.len(), TSO_LEN);
    let h = gso_hdr(ringswitch_frame::GSO_TCPV4, TCP_HDRS as u16, MSS, 34, 16);
    (h, f, data, seq0)
}

/// Checks the segments of the TSO frame: valid IPv4 and TCP checksums,
/// consecutive sequence numbers, MSS-sized payloads, PSH only on the
/// last, and the payloads concatenating to the original.
fn check_segments(segs: &[Vec<u8>], data: &[u8], seq0: u32, dst: [u8; 6]) {
    let want = data.len().div_ceil(MSS as usize);
    assert_eq!(segs.len(), want, "ceil({} / {MSS}) segments", data.len());
    let mut joined = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        assert_eq!(&s[..6], &dst, "segment {i} destination");
        assert_eq!(&s[6..12], &GA, "segment {i} source");
        verify_ipv4_l4(s).unwrap_or_else(|e| panic!("segment {i}: {e}"));
        let tcp = &s[34..54];
        let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
        assert_eq!(
            seq,
            seq0 + (i * MSS as usize) as u32,
            "segment {i} sequence"
        );
        let body = &s[54..];
        let last = i + 1 == segs.len();
        if !last {
            assert_eq!(body.len(), MSS as usize, "segment {i} carries one MSS");
        }
        assert_eq!(
            tcp[13] & 0x08 != 0,
            last,
            "PSH on the last segment only (segment {i})"
        );
        assert!(tcp[13] & 0x10 != 0, "ACK kept");
        joined.extend_from_slice(body);
    }
    assert!(
        joined == data,
        "the segments' payloads concatenate to the original"
    );
}

#[test]
fn tso_frame_passes_through_to_a_guest_with_guest_tso4() {
    let mut e = env("tso-pass");
    let pa = e.vm("vale0:vmA");
    let pb = e.vm("vale0:vmB");
    let mut a = guest(&pa, tso_sender());
    let mut b = guest(
        &pb,
        offload_guest(&[
            feature::VIRTIO_NET_F_GUEST_CSUM,
            feature::VIRTIO_NET_F_GUEST_TSO4,
        ]),
    );
    let (h, f, _, _) = tso_frame(GB);
    a.send(&h, &f);
    let r = b.wait_rx(1, T);
    assert_eq!(r.len(), 1, "one frame, not segments");
    let got = &r[0];
    assert_eq!(
        got.data, f,
        "bytes unchanged (partial checksum left for the guest)"
    );
    assert_eq!(got.hdr.flags, ringswitch_frame::F_NEEDS_CSUM);
    assert_eq!(got.hdr.gso_type, ringswitch_frame::GSO_TCPV4);
    assert_eq!(got.hdr.gso_size(), MSS);
    assert_eq!(got.hdr.hdr_len(), TCP_HDRS as u16);
    assert_eq!(got.hdr.csum_start(), 34);
    assert_eq!(got.hdr.csum_offset(), 16);
    assert_eq!(got.buffers as usize, (TSO_LEN + 12).div_ceil(2048));
    assert!(b.wait_rx(1, QUIET).is_empty());
    let sb = e.stat("vale0:vmB");
    assert_eq!((sb.rx_packets, drops(&sb)), (1, 0), "{sb:?}");
}

#[test]
fn tso_frame_is_segmented_for_a_ring_port() {
    let mut e = env("tso-ring");
    let pa = e.vm("vale0:vmA");
    let mut a = guest(&pa, tso_sender());
    let mut p = e.open("vale0:p");
    let (h, f, data, seq0) = tso_frame(RP);
    a.send(&h, &f);
    let want = data.len().div_ceil(MSS as usize);
    let segs = recv_within(&mut p, want, T);
    check_segments(&segs, &data, seq0, RP);
    assert!(recv_within(&mut p, 1, QUIET).is_empty(), "no extra segment");
    let all = e.stats_when(|a| {
        let (sa, sp) = (find(a, "vale0:vmA"), find(a, "vale0:p"));
        sa.tx_packets >= 1 && sp.rx_packets + drops(&sp) >= want as u64
    });
    let (sa, sp) = (find(&all, "vale0:vmA"), find(&all, "vale0:p"));
    assert_eq!(sa.tx_packets, 1, "{sa:?}");
    assert_eq!(sp.rx_packets, want as u64, "{sp:?}");
    assert_eq!(drops(&sa) + drops(&sp), 0, "{sa:?} {sp:?}");
}

#[test]
fn tso_frame_is_segmented_for_a_guest_without_offloads() {
    let mut e = env("tso-plain");
    let pa = e.vm("vale0:vmA");
    let pc = e.vm("vale0:vmC");
    let mut a = guest(&pa, tso_sender());
    let mut c = guest(&pc, cfg_refill());
    let (h, f, data, seq0) = tso_frame(GB);
    a.send(&h, &f);
    let want = data.len().div_ceil(MSS as usize);
    let r = c.wait_rx(want, T);
    for (i, s) in r.iter().enumerate() {
        assert!(
            s.hdr.flags == 0 || s.hdr.flags == ringswitch_frame::F_DATA_VALID,
            "segment {i} flags {:#x}",
            s.hdr.flags
        );
        assert_eq!(s.hdr.gso_type, 0, "segment {i} is not a GSO frame");
    }
    let segs: Vec<Vec<u8>> = r.into_iter().map(|s| s.data).collect();
    check_segments(&segs, &data, seq0, GB);
    assert!(c.wait_rx(1, QUIET).is_empty(), "no extra segment");
}

/// A frame asking only for checksum completion: completed for a ring port
/// and for a guest without GUEST_CSUM, passed through to one with it.
#[test]
fn partial_udp_checksum_is_completed_where_needed() {
    let mut e = env("udp");
    let pa = e.vm("vale0:vmA");
    let mut a = guest(&pa, offload_guest(&[feature::VIRTIO_NET_F_CSUM]));
    let mut p = e.open("vale0:p");
    // An odd payload, so the last byte is padded in the sum.
    let f = udp4_frame(RP, GA, &payload(101, 0x5c));
    let h = csum_hdr(34, 6);
    a.send(&h, &f);
    let got = recv_within(&mut p, 1, T);
    assert_eq!(got.len(), 1);
    verify_ipv4_l4(&got[0]).unwrap_or_else(|e| panic!("ring port: {e}"));
    assert_eq!(got[0][..40], f[..40], "only the checksum changed");
    assert_eq!(got[0][42..], f[42..], "only the checksum changed");

    // Two guests on another switch: one with GUEST_CSUM, one without.
    let pa2 = e.vm("vale1:vmA");
    let pb = e.vm("vale1:vmB");
    let pc = e.vm("vale2:vmC");
    let pa3 = e.vm("vale2:vmA");
    let mut a2 = guest(&pa2, offload_guest(&[feature::VIRTIO_NET_F_CSUM]));
    let mut b = guest(&pb, offload_guest(&[feature::VIRTIO_NET_F_GUEST_CSUM]));
    let f = udp4_frame(GB, GA, &payload(101, 0x5c));
    a2.send(&h, &f);
    let r = b.wait_rx(1, T);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].data, f, "passed through untouched");
    assert_eq!(r[0].hdr.flags, ringswitch_frame::F_NEEDS_CSUM);
    assert_eq!((r[0].hdr.csum_start(), r[0].hdr.csum_offset()), (34, 6));

    let mut a3 = guest(&pa3, offload_guest(&[feature::VIRTIO_NET_F_CSUM]));
    let mut c = guest(&pc, cfg_refill());
    a3.send(&h, &f);
    let r = c.wait_rx(1, T);
    assert_eq!(r.len(), 1);
    assert!(
        r[0].hdr.flags == 0 || r[0].hdr.flags == ringswitch_frame::F_DATA_VALID,
        "flags {:#x}",
        r[0].hdr.flags
    );
    verify_ipv4_l4(&r[0].data).unwrap_or_else(|e| panic!("guest without GUEST_CSUM: {e}"));
}

/// A port created with `offloads: false` does not offer them.
#[test]
fn offloads_off_are_not_offered() {
    let mut e = env("nooff");
    let path = vm_sock(&e.tag, "vm1");
    e.add_vm(
        "vale0:vm1",
        VhostUserSpec {
            offloads: false,
            ..spec(&path)
        },
    )
    .unwrap();
    let s = UnixStream::connect(&path).unwrap();
    let err = Guest::try_from_stream(s, tso_sender())
        .err()
        .expect("CSUM refused");
    assert!(err.contains("does not offer"), "{err}");
    // Without offloads the same port works.
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    g.send_plain(&pat(RP, GA, 60, 1));
    assert_eq!(tags(&recv_within(&mut p, 1, T)), vec![1]);
}

// ---------------------------------------------------------------------
// 5. Notifications

fn notifications(tag: &str, event_idx: bool) {
    let mut e = env(tag);
    let path = e.vm("vale0:vm1");
    let mut g = guest(
        &path,
        GuestConfig {
            event_idx,
            ..cfg_refill()
        },
    );
    // The largest ring, so the draining thread keeps up on a small machine.
    let mut p = e.open("vale0:p@conf:slots=4096");
    assert_eq!(send(&mut p, &[pat(GA, RP, 60, 0)]), 1);
    assert_eq!(g.wait_rx(1, T).len(), 1);

    // A burst the ring port drains as it comes. It stops once it has
    // what was not dropped (known only after the burst).
    const N: u32 = 10_000;
    let want = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
    let w = want.clone();
    let drain = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.len() < w.load(std::sync::atomic::Ordering::Acquire) && Instant::now() < deadline
        {
            got.extend(tags(&recv_within(
                &mut p,
                N as usize,
                Duration::from_millis(20),
            )));
        }
        (got, p)
    });
    let k0 = g.stats().tx_kicks;
    for i in 0..N {
        g.send_plain(&frame(RP, GA, 60, i));
    }
    assert!(g.flush_tx(0, T));
    // Whatever the ring port did not take was dropped and counted.
    let deadline = Instant::now() + T;
    let dropped = loop {
        let rp = find(&e.stats(), "vale0:p");
        if rp.rx_packets + rp.drop_rx_full >= u64::from(N) || Instant::now() > deadline {
            break rp.drop_rx_full;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    want.store(
        N as usize - dropped as usize,
        std::sync::atomic::Ordering::Release,
    );
    let kicks = g.stats().tx_kicks - k0;
    let (got, mut p) = drain.join().unwrap();
    eprintln!(
        "{tag}: {kicks} kicks for {N} frames; ring port got {} and dropped {dropped}",
        got.len()
    );
    assert_eq!(
        got.len() as u64 + dropped,
        u64::from(N),
        "every frame of the burst arrives or is counted as dropped"
    );
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
    if event_idx {
        assert!(
            kicks * 4 < u64::from(N),
            "the device asked for {kicks} kicks during a {N}-frame burst"
        );
    } else {
        // A flag, not an index: the guest kicks every frame until the
        // woken worker sets NO_NOTIFY, so only a bound is checked.
        assert!(kicks <= u64::from(N));
    }

    // Idle, then one frame: the device re-armed kicks before sleeping, so
    // the guest must kick, and the frame must arrive. Then the other way:
    // the guest sleeps on its call eventfd only.
    for i in 0..100u32 {
        std::thread::sleep(Duration::from_millis(50));
        let before = g.stats();
        g.send_plain(&frame(RP, GA, 60, 100_000 + i));
        let r = recv_within(&mut p, 1, T);
        assert_eq!(
            tags(&r),
            vec![100_000 + i],
            "idle round {i}: VM to ring port lost"
        );
        assert_eq!(
            g.stats().tx_kicks,
            before.tx_kicks + 1,
            "idle round {i}: the sleeping device should have asked for a kick"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(send(&mut p, &[frame(GA, RP, 60, 200_000 + i)]), 1);
        let r = g.wait_rx(1, T);
        assert_eq!(
            rx_tags(&r),
            vec![200_000 + i],
            "idle round {i}: RX interrupt lost"
        );
        assert!(g.stats().rx_interrupts > before.rx_interrupts);
    }
    let vm = e.stat_when("vale0:vm1", |vm| {
        vm.tx_packets + drops(vm) >= u64::from(N) + 100
    });
    assert_eq!(vm.tx_packets, u64::from(N) + 100);
    assert_eq!(drops(&vm), 0, "{vm:?}");
}

#[test]
fn kicks_are_suppressed_and_no_wakeup_is_lost_event_idx() {
    notifications("notif-ei", true);
}

#[test]
fn kicks_are_suppressed_and_no_wakeup_is_lost_no_notify_flag() {
    notifications("notif-nn", false);
}

/// A guest that kicks after every frame whatever the device says works too.
#[test]
fn always_kicking_guest() {
    let mut e = env("always");
    let path = e.vm("vale0:vm1");
    let mut g = guest(
        &path,
        GuestConfig {
            kick: KickMode::Always,
            ..cfg_refill()
        },
    );
    let mut p = e.open("vale0:p");
    let out: Vec<Vec<u8>> = (0..1000u32).map(|i| pat(RP, GA, 64, i)).collect();
    for f in &out {
        g.send_plain(f);
    }
    assert_same(&recv_within(&mut p, 1000, T), &out, "always kicking");
    assert_eq!(g.stats().tx_kicks, 1000);
}

// ---------------------------------------------------------------------
// 6. Bad chains

fn wait_completion(g: &mut Guest, head: u16, seen: &mut Vec<(u16, u32)>) -> u32 {
    let deadline = Instant::now() + T;
    loop {
        g.reclaim_tx(0);
        seen.extend(g.take_tx_completions());
        if let Some(pos) = seen.iter().position(|&(h, _)| h == head) {
            return seen.remove(pos).1;
        }
        assert!(Instant::now() < deadline, "chain {head} never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn bad_tx_chains_are_completed_and_counted() {
    let mut e = env("bad");
    let path = e.vm("vale0:vm1");
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    let mut seen = Vec::new();
    let mut want = vec![0u32];
    g.send_plain(&pat(RP, GA, 60, 0));
    for (k, &bad) in BadChain::ALL.iter().enumerate() {
        let head = g.send_bad(0, bad);
        let len = wait_completion(&mut g, head, &mut seen);
        assert_eq!(len, 0, "{bad:?} completed with length 0");
        let t = k as u32 + 1;
        g.send_plain(&pat(RP, GA, 60 + k, t));
        want.push(t);
    }
    let got = recv_within(&mut p, want.len(), T);
    assert_eq!(
        tags(&got),
        want,
        "good frames around the bad ones arrive, in order"
    );
    assert!(
        recv_within(&mut p, 1, QUIET).is_empty(),
        "nothing from the bad chains"
    );
    assert!(g.flush_tx(0, T));
    let vm = e.stat_when("vale0:vm1", |s| {
        s.drop_malformed + s.tx_packets >= (BadChain::ALL.len() + want.len()) as u64
    });
    assert_eq!(vm.drop_malformed, BadChain::ALL.len() as u64, "{vm:?}");
    assert_eq!(vm.tx_packets, want.len() as u64, "{vm:?}");

    // The guest can still receive too.
    assert_eq!(send(&mut p, &[pat(GA, RP, 60, 77)]), 1);
    assert_eq!(rx_tags(&g.wait_rx(1, T)), vec![77]);
}

/// An available index more than the queue size ahead: nothing is taken,
/// nothing crashes, the daemon serves on, and once the guest publishes a
/// sane index again its frames flow.
#[test]
fn bad_avail_index_is_survived() {
    let mut e = env("badidx");
    let path = e.vm("vale0:vm1");
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    g.send_plain(&pat(RP, GA, 60, 1));
    assert_eq!(tags(&recv_within(&mut p, 1, T)), vec![1]);
    g.corrupt_avail_idx(0, 300);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        recv_within(&mut p, 1, QUIET).is_empty(),
        "nothing taken from a bad ring"
    );
    // Other traffic and the control plane are fine meanwhile.
    assert_eq!(send(&mut p, &[pat(GA, RP, 60, 2)]), 1);
    assert_eq!(rx_tags(&g.wait_rx(1, T)), vec![2]);
    e.still_works();
    g.restore_avail_idx(0);
    g.send_plain(&pat(RP, GA, 60, 3));
    assert_eq!(
        tags(&recv_within(&mut p, 1, T)),
        vec![3],
        "flows again once the index is sane"
    );
    let vm = e.stat_when("vale0:vm1", |s| s.tx_packets >= 2);
    assert_eq!(vm.tx_packets, 2, "{vm:?}");
}

/// While a guest leaves a bad available index in place, the worker should
/// not spin on it (it would burn a core for as long as the guest wants, at
/// no cost to the guest).
#[test]
fn bad_avail_index_does_not_make_the_worker_spin() {
    let mut e = env("spin");
    let Some(w) = e.worker else {
        eprintln!("cannot identify the worker thread; skipped");
        return;
    };
    let path = e.vm("vale0:vm1");
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    g.send_plain(&pat(RP, GA, 60, 1));
    assert_eq!(tags(&recv_within(&mut p, 1, T)), vec![1]);
    std::thread::sleep(Duration::from_millis(50));
    let idle0 = cpu_ns(w).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let idle = cpu_ns(w).unwrap() - idle0;
    g.corrupt_avail_idx(0, 300);
    std::thread::sleep(Duration::from_millis(50));
    let t0 = cpu_ns(w).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let busy = cpu_ns(w).unwrap() - t0;
    g.restore_avail_idx(0);
    assert!(
        busy < 100_000_000,
        "worker used {} ms of CPU in 500 ms while the guest's avail index was bad (idle: {} ms in 300 ms)",
        busy / 1_000_000,
        idle / 1_000_000
    );
}

// ---------------------------------------------------------------------
// 7. Reconnect

fn ping(g: &mut Guest, p: &mut Port, t: u32, what: &str) {
    g.send_plain(&pat(RP, GA, 60, t));
    assert_eq!(
        tags(&recv_within(p, 1, T)),
        vec![t],
        "{what}: guest to ring port"
    );
    assert_eq!(send(p, &[pat(GA, RP, 60, t + 1)]), 1);
    assert_eq!(
        rx_tags(&g.wait_rx(1, T)),
        vec![t + 1],
        "{what}: ring port to guest"
    );
}

#[test]
fn guest_reconnects_in_server_mode() {
    let mut e = env("recon");
    let path = e.vm("vale0:vm1");
    let mut p = e.open("vale0:p");
    assert!(!e.connected("vale0:vm1"));
    let mut g = guest(&path, cfg_refill());
    assert!(e.wait_connected("vale0:vm1", true));
    ping(&mut g, &mut p, 10, "first guest");
    g.disconnect();
    assert!(
        e.wait_connected("vale0:vm1", false),
        "the daemon saw the guest go"
    );

    // Meanwhile frames for the VM are dropped as link down.
    let before = e.stat("vale0:vm1").drop_link_down;
    assert_eq!(send(&mut p, &[pat(GA, RP, 60, 20)]), 1);
    wait_until("the frame for the VM to be counted", || {
        e.stat("vale0:vm1").drop_link_down > before
    });
    assert_eq!(e.stat("vale0:vm1").drop_link_down, before + 1);

    // A frontend that goes away in the middle of its setup.
    {
        use vhost::vhost_user::Frontend;
        use vhost::VhostBackend;
        let fe = Frontend::connect(&path, 2).unwrap();
        fe.set_owner().unwrap();
        let _ = fe.get_features().unwrap();
    }
    // A raw socket that sends garbage.
    {
        let mut s = UnixStream::connect(&path).unwrap();
        let _ = s.write_all(&[0xff; 64]);
    }
    std::thread::sleep(Duration::from_millis(50));

    let mut g2 = guest(&path, cfg_refill());
    assert!(e.wait_connected("vale0:vm1", true));
    ping(&mut g2, &mut p, 30, "second guest");
    // And a third, with other features.
    g2.disconnect();
    let mut g3 = guest(
        &path,
        GuestConfig {
            event_idx: false,
            mrg_rxbuf: false,
            ..cfg_refill()
        },
    );
    ping(&mut g3, &mut p, 40, "third guest");
}

#[test]
fn daemon_reconnects_in_client_mode() {
    let mut e = env("client");
    let path = vm_sock(&e.tag, "cl");
    let _ = std::fs::remove_file(&path);
    let _rm = RmOnDrop(path.clone());
    let l = UnixListener::bind(&path).unwrap();
    e.add_vm(
        "vale0:vm1",
        VhostUserSpec {
            client: true,
            ..spec(&path)
        },
    )
    .unwrap();
    let mut p = e.open("vale0:p");
    let mut g = Guest::accept(&l, cfg_refill(), T).expect("the daemon connects");
    g.post_rx(0, 256, 2048);
    assert!(e.wait_connected("vale0:vm1", true));
    ping(&mut g, &mut p, 10, "first connection");

    // QEMU restarts: its socket goes away, then a new one is at the path.
    drop(l);
    let _ = std::fs::remove_file(&path);
    g.disconnect();
    assert!(e.wait_connected("vale0:vm1", false));
    std::thread::sleep(Duration::from_millis(300));
    let l2 = UnixListener::bind(&path).unwrap();
    let mut g2 = Guest::accept(&l2, cfg_refill(), T).expect("the daemon reconnects");
    g2.post_rx(0, 256, 2048);
    ping(&mut g2, &mut p, 20, "after the restart");

    // The connection drops while the listener stays: connected again.
    g2.disconnect();
    let mut g3 = Guest::accept(&l2, cfg_refill(), T).expect("the daemon reconnects");
    g3.post_rx(0, 256, 2048);
    ping(&mut g3, &mut p, 30, "after a dropped connection");

    // Deleting a client-mode port stops the reconnecting.
    e.del("vale0:vm1").unwrap();
    assert!(g3.wait_hangup(T));
    assert!(
        accept_stream(&l2, Duration::from_millis(600)).is_none(),
        "no reconnect after port-del"
    );
}

// ---------------------------------------------------------------------
// 8. Port delete

#[test]
fn port_del_with_a_guest_connected() {
    let mut e = env("del");
    let path = e.vm("vale0:vm1");
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    ping(&mut g, &mut p, 1, "before");
    // Traffic in flight toward the port being deleted.
    for i in 0..200 {
        g.send_plain(&pat(RP, GA, 60, 100 + i));
    }
    // Answered at all is the point (a hang never ends); how fast is for
    // the benchmarks.
    e.del("vale0:vm1").unwrap();
    assert!(g.wait_hangup(T), "the guest sees its socket close");
    assert!(!path.exists(), "the socket file is removed");
    assert!(!e.ports().iter().any(|p| p.name == "vale0:vm1"));
    let _ = recv_within(&mut p, 200, QUIET);
    e.still_works();

    // The name and the path can be used again.
    let path2 = e.vm("vale0:vm1");
    assert_eq!(path2, path);
    let mut g2 = guest(&path, cfg_refill());
    ping(&mut g2, &mut p, 500, "a new port at the same path");
}

/// port-del (and so the control thread) must not wait for a frontend
/// that sent part of a message and stopped.
fn port_del_after_partial_message(tag: &str, bytes: &[u8]) {
    let mut e = env(tag);
    let path = e.vm("vale0:vm1");
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(bytes).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let sock = e.s.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut c = Connection::connect(&sock).unwrap();
        let r = c.call(&Request::PortDel {
            name: "vale0:vm1".into(),
        });
        let _ = tx.send(r.is_ok());
    });
    match rx.recv_timeout(T) {
        Ok(ok) => assert!(ok, "port-del failed"),
        Err(_) => {
            // Unblock the daemon before failing, so the test can end.
            drop(s);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            panic!("port-del did not return within 2 s");
        }
    }
    drop(s);
    e.still_works();
}

#[test]
fn port_del_after_half_a_header() {
    port_del_after_partial_message("half-hdr", &[1, 0, 0, 0, 1, 0]);
}

#[test]
fn port_del_after_a_header_without_its_body() {
    // SET_FEATURES, version 1, announcing an 8-byte body that never comes.
    let mut h = Vec::new();
    h.extend_from_slice(&2u32.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&8u32.to_le_bytes());
    port_del_after_partial_message("half-body", &h);
}

// ---------------------------------------------------------------------
// 9. Multiqueue

#[test]
fn multiqueue_pairs_carry_traffic() {
    let mut e = env("mq");
    let path = vm_sock(&e.tag, "vm1");
    e.add_vm(
        "vale0:vm1",
        VhostUserSpec {
            queues: 2,
            ..spec(&path)
        },
    )
    .unwrap();
    let mut g = guest(
        &path,
        GuestConfig {
            pairs: 2,
            ..cfg_refill()
        },
    );
    assert!(feature::has(g.features(), feature::VIRTIO_NET_F_MQ));
    let mut p = e.open("vale0:p@conf:rings=2");

    // Pair 1 to the ring port (ring 1), and pair 0 (ring 0).
    let f1: Vec<Vec<u8>> = (0..300u32).map(|i| pat(RP, GA, 100, i)).collect();
    for f in &f1 {
        g.send_on(1, &plain_hdr(), f);
    }
    let mut got = recv_n_ring(&mut p, 1, f1.len(), T);
    got.extend(recv_n_ring(&mut p, 0, f1.len() - got.len(), QUIET));
    assert_same(&got, &f1, "pair 1 to ring port");
    g.send_on(0, &plain_hdr(), &pat(RP, GA, 100, 1000));
    let got = recv_n_ring(&mut p, 0, 1, T);
    assert_eq!(tags(&got), vec![1000], "pair 0 to ring 0");

    // Ring 1 of the ring port to pair 1 of the guest.
    let back: Vec<Vec<u8>> = (0..100u32).map(|i| pat(GA, RP, 100, 2000 + i)).collect();
    assert_eq!(send_ring(&mut p, 1, &back), back.len());
    let got: Vec<Vec<u8>> = g
        .wait_rx_on(1, back.len(), T)
        .into_iter()
        .map(|f| f.data)
        .collect();
    assert_same(&got, &back, "ring 1 to pair 1");
    assert!(g.wait_rx_on(0, 1, QUIET).is_empty());

    let info = e
        .ports()
        .into_iter()
        .find(|p| p.name == "vale0:vm1")
        .expect("port-list shows the VM port");
    assert_eq!(info.kind, PortKind::VhostUser);
    let v = info.vhost_user.expect("vhost-user details");
    assert_eq!(v.spec.queues, 2);
    assert_eq!(v.spec.path, path.to_string_lossy());
    assert!(!v.spec.client);
    assert!(v.connected);
    assert!(info.open);
    let vm = e.stat_when("vale0:vm1", |s| s.tx_packets >= 301 && s.rx_packets >= 100);
    assert_eq!(vm.tx_packets, 301);
    assert_eq!(vm.rx_packets, 100);
}

/// A guest using only pair 0 of a two-pair port: traffic for pair 1 is
/// counted as link down, pair 0 works.
#[test]
fn multiqueue_port_with_one_pair_in_use() {
    let mut e = env("mq1");
    let path = vm_sock(&e.tag, "vm1");
    e.add_vm(
        "vale0:vm1",
        VhostUserSpec {
            queues: 2,
            ..spec(&path)
        },
    )
    .unwrap();
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p@conf:rings=2");
    g.send_plain(&pat(RP, GA, 60, 1));
    assert_eq!(tags(&recv_within(&mut p, 1, T)), vec![1]);
    assert_eq!(send_ring(&mut p, 1, &[pat(GA, RP, 60, 2)]), 1);
    assert_eq!(send_ring(&mut p, 0, &[pat(GA, RP, 60, 3)]), 1);
    assert_eq!(rx_tags(&g.wait_rx(1, T)), vec![3]);
    // Frame 2 came from the port's other TX ring, which the worker may
    // serve after ring 0: its drop is counted then.
    wait_until("frame 2's drop to be counted", || {
        e.stat("vale0:vm1").drop_link_down >= 1
    });
    let vm = e.stat("vale0:vm1");
    assert_eq!(vm.drop_link_down, 1, "{vm:?}");
}

// ---------------------------------------------------------------------
// 10. Control errors

#[test]
fn control_errors_for_vm_ports() {
    let mut e = env("ctl");
    let path = vm_sock(&e.tag, "vm1");

    let err = e.add_vm("pipe{1", spec(&path)).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadName, "{err:?}");
    let err = e.add_vm("netmap:eth0", spec(&path)).unwrap_err();
    assert!(
        matches!(err.code, ErrorCode::BadName | ErrorCode::Unsupported),
        "{err:?}"
    );
    let err = e.add_vm("vale0:vm1@conf:rings=2", spec(&path)).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadName, "{err:?}");

    for q in [0u16, 17] {
        let err = e
            .add_vm(
                "vale0:vm1",
                VhostUserSpec {
                    queues: q,
                    ..spec(&path)
                },
            )
            .unwrap_err();
        assert_ne!(err.code, ErrorCode::Internal, "{err:?}");
        assert!(err.message.contains("16"), "queues {q}: {}", err.message);
    }
    let err = e
        .add_vm(
            "vale0:vm1",
            VhostUserSpec {
                path: String::new(),
                ..spec(&path)
            },
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::BadRequest, "{err:?}");

    let nodir = std::env::temp_dir()
        .join(format!("rs-vm-nodir-{}", std::process::id()))
        .join("x.sock");
    let err = e.add_vm("vale0:vm1", spec(&nodir)).unwrap_err();
    assert_ne!(err.code, ErrorCode::Internal, "{err:?}");
    assert!(
        err.message.contains(&*nodir.to_string_lossy()) && err.message.contains("No such file"),
        "a clear error: {}",
        err.message
    );

    // Something that is not a socket at the path is left alone.
    let file = vm_sock(&e.tag, "file");
    let _rm = RmOnDrop(file.clone());
    std::fs::write(&file, b"keep me").unwrap();
    let err = e.add_vm("vale0:vm1", spec(&file)).unwrap_err();
    assert!(err.message.contains("not a socket"), "{}", err.message);
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");

    // Nothing was left behind by the failures.
    let sw: Vec<SwitchInfo> = e.c.call_as(&Request::SwitchList).unwrap().0;
    assert!(sw.is_empty(), "{sw:?}");
    assert!(e.ports().is_empty());

    // Now a good one, then the same name again.
    e.add_vm("vale0:vm1", spec(&path)).unwrap();
    let err = e
        .add_vm("vale0:vm1", spec(&vm_sock(&e.tag, "other")))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Exists, "{err:?}");
    let err = daemon_err(e.c.call(&Request::PortAdd {
        name: "vale0:vm1".into(),
        vhost_user: None,
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    }));
    assert_eq!(err.code, ErrorCode::Exists, "{err:?}");
    // A ring port's name too.
    let _a = e.open("vale0:a");
    let err = e
        .add_vm("vale0:a", spec(&vm_sock(&e.tag, "a")))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Exists, "{err:?}");

    // A VM port is not a netmap port.
    match Port::open_at(&e.s, "vale0:vm1") {
        Err(ClientError::Call(CallError::Daemon(r))) => {
            assert_eq!(r.code, ErrorCode::Unsupported, "{r:?}")
        }
        Err(other) => panic!("expected unsupported, got {other}"),
        Ok(_) => panic!("a VM port opened as a netmap port"),
    }
    // The switch with a VM port cannot go.
    let err = daemon_err(e.c.call(&Request::SwitchDel {
        name: "vale0".into(),
    }));
    assert_eq!(err.code, ErrorCode::Busy, "{err:?}");
    // The VM port still works after all that.
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    ping(&mut g, &mut p, 1, "after the errors");
    e.del("vale0:vm1").unwrap();
    assert_eq!(e.del("vale0:vm1").unwrap_err().code, ErrorCode::NotFound);
}

// ---------------------------------------------------------------------
// More: RX-side validation, vring restart, fragments, floods, mixed headers

/// Broken RX buffers are given back with length 0 and frames go to the
/// good buffers after them, with and without MRG_RXBUF.
#[test]
fn bad_rx_buffers_are_returned_and_frames_still_arrive() {
    for (sw, mrg) in [("vale0", true), ("vale1", false)] {
        let mut e = env(&format!("badrx-{mrg}"));
        let path = e.vm(&format!("{sw}:vm1"));
        let mut g = Guest::connect(
            &path,
            GuestConfig {
                mrg_rxbuf: mrg,
                ..GuestConfig::default()
            },
        );
        for bad in [
            BadRx::ReadOnly,
            BadRx::OutsideMemory,
            BadRx::ShorterThanHeader,
        ] {
            g.post_rx_bad(0, bad);
        }
        assert_eq!(g.post_rx(0, 10, 2048), 10);
        let mut p = e.open(&format!("{sw}:p"));
        let out: Vec<Vec<u8>> = (0..3u32)
            .map(|i| pat(GA, RP, 200 + i as usize, i))
            .collect();
        assert_eq!(send(&mut p, &out), 3);
        let got: Vec<Vec<u8>> = g.wait_rx(3, T).into_iter().map(|f| f.data).collect();
        assert_same(&got, &out, "past the bad RX buffers");
        assert_eq!(
            g.rx_posted(0),
            7,
            "the bad buffers came back, three good ones used"
        );
        // A frame larger than one buffer after a bad one, with MRG_RXBUF.
        if mrg {
            g.post_rx_bad(0, BadRx::ReadOnly);
            assert_eq!(g.post_rx(0, 4, 2048), 4);
            let big = pat(GA, RP, 3000, 9);
            send_fragmented(&mut p, &big);
            let r = g.wait_rx(1, T);
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].data, big);
        }
        let vm = e.stat(&format!("{sw}:vm1"));
        assert_eq!(drops(&vm), 0, "{vm:?}");
    }
}

/// QEMU stops the vrings (GET_VRING_BASE) when the VM pauses and restarts
/// them where they were, with new eventfds; it may send the memory table
/// again. Traffic continues.
#[test]
fn vrings_stop_and_resume_where_they_were() {
    let mut e = env("resume");
    let path = e.vm("vale0:vm1");
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    for i in 0..20u32 {
        ping(&mut g, &mut p, 10 * i, "before the stop");
    }
    assert!(g.flush_tx(0, T));
    let (_, tx_avail) = g.avail_idx(0);
    let bases = g.stop_and_resume(true);
    assert_eq!(
        bases[1],
        u32::from(tx_avail),
        "TX resumes after the last frame sent"
    );
    assert_eq!(bases[0], 20, "RX resumes after the 20 buffers used");
    for i in 20..40u32 {
        ping(
            &mut g,
            &mut p,
            10 * i,
            "after a restart with a new memory table",
        );
    }
    let bases = g.stop_and_resume(false);
    assert_eq!(bases[0], 40);
    let out: Vec<Vec<u8>> = (0..500u32).map(|i| pat(RP, GA, 100, 1000 + i)).collect();
    for f in &out {
        g.send_plain(f);
    }
    assert_same(&recv_within(&mut p, 500, T), &out, "after a second restart");
    let vm = e.stat("vale0:vm1");
    assert_eq!(drops(&vm), 0, "{vm:?}");
}

/// Receives `n` frames on ring 0, joining NS_MOREFRAG fragments.
fn recv_frames(p: &mut Port, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    use ringswitch_ring::layout::NS_MOREFRAG;
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut rx = p.rx(0);
        if left.is_zero() || !rx.wait(Some(left)).unwrap() {
            break;
        }
        let k = rx.space();
        for j in 0..k {
            let s = rx.slot(j).unwrap();
            cur.extend_from_slice(s.payload());
            if s.flags() & NS_MOREFRAG == 0 {
                out.push(std::mem::take(&mut cur));
            }
        }
        rx.advance(k);
        rx.sync().unwrap();
    }
    out
}

/// Sends one frame over as many 2 KiB slots as it needs.
fn send_fragmented(p: &mut Port, f: &[u8]) {
    use ringswitch_ring::layout::NS_MOREFRAG;
    let chunks: Vec<&[u8]> = f.chunks(2048).collect();
    let mut tx = p.tx(0);
    assert!(tx.space() as usize >= chunks.len());
    for (k, c) in chunks.iter().enumerate() {
        let mut s = tx.slot(k as u32).unwrap();
        assert!(s.write_at(0, c));
        let more = if k + 1 < chunks.len() { NS_MOREFRAG } else { 0 };
        s.set_len_flags(c.len() as u16, more);
    }
    tx.advance(chunks.len() as u32);
    tx.sync().unwrap();
}

#[test]
fn multi_slot_frames_between_vm_and_ring_port() {
    let mut e = env("frags");
    let path = e.vm("vale0:vm1");
    let mut g = guest(&path, cfg_refill());
    let mut p = e.open("vale0:p");
    for (len, t) in [(3000usize, 1u32), (5000, 2), (2048, 3), (2049, 4)] {
        let f = pat(GA, RP, len, t);
        send_fragmented(&mut p, &f);
        let r = g.wait_rx(1, T);
        assert_eq!(r.len(), 1, "{len}-byte frame from ring slots");
        assert_eq!(r[0].data, f, "{len}-byte frame intact");
    }
    for (len, t) in [(9000usize, 11u32), (4096, 12), (2049, 13), (1514, 14)] {
        let f = pat(RP, GA, len, t);
        g.send_plain(&f);
        let r = recv_frames(&mut p, 1, T);
        assert_eq!(r.len(), 1, "{len}-byte frame to ring slots");
        assert_eq!(
            r[0],
            f,
            "{len}-byte frame intact in {} slots",
            len.div_ceil(2048)
        );
    }
    let all = e.stats_when(|a| {
        let (vm, rp) = (find(a, "vale0:vm1"), find(a, "vale0:p"));
        vm.tx_packets >= 4
            && vm.rx_packets + drops(&vm) >= 4
            && rp.tx_packets >= 4
            && rp.rx_packets + drops(&rp) >= 4
    });
    let (vm, rp) = (find(&all, "vale0:vm1"), find(&all, "vale0:p"));
    assert_eq!((vm.rx_packets, vm.tx_packets), (4, 4), "{vm:?}");
    assert_eq!((rp.rx_packets, rp.tx_packets), (4, 4), "{rp:?}");
    assert_eq!(drops(&vm) + drops(&rp), 0, "{vm:?} {rp:?}");
}

/// One frame flooded to destinations with different capabilities: each
/// gets a version it can take (the switch must not hand one destination's
/// fixed-up frame to another with the wrong header).
#[test]
fn flooded_offload_frames_suit_each_destination() {
    let mut e = env("flood");
    let pa = e.vm("vale0:vmA");
    let pb = e.vm("vale0:vmB");
    let pc = e.vm("vale0:vmC");
    let mut a = guest(&pa, tso_sender());
    let mut b = guest(
        &pb,
        offload_guest(&[
            feature::VIRTIO_NET_F_GUEST_CSUM,
            feature::VIRTIO_NET_F_GUEST_TSO4,
        ]),
    );
    let mut c = guest(&pc, cfg_refill());
    let mut p = e.open("vale0:p");
    let unknown = [0x02, 0, 0, 0, 0, 0xee];

    let (h, f, data, seq0) = tso_frame(unknown);
    a.send(&h, &f);
    let n = data.len().div_ceil(MSS as usize);
    check_segments(&recv_within(&mut p, n, T), &data, seq0, unknown);
    let rc: Vec<Vec<u8>> = c.wait_rx(n, T).into_iter().map(|s| s.data).collect();
    check_segments(&rc, &data, seq0, unknown);
    let rb = b.wait_rx(1, T);
    assert_eq!(rb.len(), 1);
    assert_eq!(rb[0].hdr.gso_type, ringswitch_frame::GSO_TCPV4);
    assert_eq!(rb[0].data, f, "B gets the TSO frame unchanged");

    let u = udp4_frame(unknown, GA, &payload(333, 0x11));
    a.send(&csum_hdr(34, 6), &u);
    let rp = recv_within(&mut p, 1, T);
    assert_eq!(rp.len(), 1);
    verify_ipv4_l4(&rp[0]).unwrap_or_else(|e| panic!("ring port: {e}"));
    let rc = c.wait_rx(1, T);
    assert_eq!(rc.len(), 1);
    verify_ipv4_l4(&rc[0].data).unwrap_or_else(|e| panic!("guest without GUEST_CSUM: {e}"));
    let rb = b.wait_rx(1, T);
    assert_eq!(rb.len(), 1);
    if rb[0].hdr.flags & ringswitch_frame::F_NEEDS_CSUM != 0 {
        assert_eq!(
            rb[0].data, u,
            "NEEDS_CSUM with the partial checksum as sent"
        );
    } else {
        verify_ipv4_l4(&rb[0].data)
            .unwrap_or_else(|e| panic!("B got a completed frame with a bad checksum: {e}"));
    }
    for (g, w) in [(&mut b, "B"), (&mut c, "C")] {
        assert!(g.wait_rx(1, QUIET).is_empty(), "nothing more for {w}");
    }
}

/// A 12-byte-header guest and a legacy 10-byte-header guest talk.
#[test]
fn vm_to_vm_mixed_header_sizes() {
    let mut e = env("mixhdr");
    let pa = e.vm("vale0:vmA");
    let pb = e.vm("vale0:vmB");
    let mut a = guest(&pa, cfg_refill());
    let mut b = guest(
        &pb,
        GuestConfig {
            version_1: false,
            mrg_rxbuf: false,
            ..cfg_refill()
        },
    );
    assert_eq!(b.hdr_len(), 10);
    let ab: Vec<Vec<u8>> = (0..200u32)
        .map(|i| pat(GB, GA, 60 + (i as usize * 71) % 1455, i))
        .collect();
    exchange(&mut a, &mut b, &ab, "12-byte to 10-byte header");
    let ba: Vec<Vec<u8>> = (0..200u32)
        .map(|i| pat(GA, GB, 60 + (i as usize * 13) % 1455, 500 + i))
        .collect();
    exchange(&mut b, &mut a, &ba, "10-byte to 12-byte header");
}

/// A frontend that sends requests and never reads the replies: the
/// protocol thread blocks writing a reply; port-del must still return.
#[test]
fn port_del_with_a_frontend_that_never_reads_replies() {
    let mut e = env("noread");
    let path = e.vm("vale0:vm1");
    let s = UnixStream::connect(&path).unwrap();
    s.set_nonblocking(true).unwrap();
    // GET_FEATURES: code 1, version 1, no body; each gets an 20-byte reply.
    let mut msg = Vec::new();
    msg.extend_from_slice(&1u32.to_le_bytes());
    msg.extend_from_slice(&1u32.to_le_bytes());
    msg.extend_from_slice(&0u32.to_le_bytes());
    let batch: Vec<u8> = msg.iter().copied().cycle().take(12 * 1024).collect();
    let deadline = Instant::now() + T;
    loop {
        match (&s).write(&batch) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Our buffer is full once the daemon stopped reading.
                std::thread::sleep(Duration::from_millis(50));
                if (&s).write(&msg).is_err() {
                    break;
                }
            }
            Err(e) => panic!("write: {e}"),
        }
        assert!(Instant::now() < deadline, "the daemon kept reading");
    }
    let sock = e.s.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut c = Connection::connect(&sock).unwrap();
        let r = c.call(&Request::PortDel {
            name: "vale0:vm1".into(),
        });
        let _ = tx.send(r.is_ok());
    });
    match rx.recv_timeout(T) {
        Ok(ok) => assert!(ok, "port-del failed"),
        Err(_) => {
            drop(s);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            panic!("port-del did not return within 2 s");
        }
    }
    drop(s);
    e.still_works();
}

/// Issue 19: a guest migrating between two VM ports of one switch (its
/// destination port asked for its source port's OpenFlow number) takes the
/// number along: flows that name the number reach the guest wherever it
/// runs, and ovs-ofctl (Open vSwitch's own client) sees the number on the
/// port the guest runs on. Both ways a number moves: the holder's guest
/// stopping while the other's runs, and a guest starting where the
/// holder's is stopped.
#[test]
fn an_openflow_number_follows_the_guest_between_two_ports_of_one_switch() {
    use std::process::Command;
    let mut e = env("ofmove");
    let (src, dst) = (vm_sock(&e.tag, "src"), vm_sock(&e.tag, "dst"));
    e.add_vm_at("vale0:src", spec(&src), Some(5)).unwrap();
    e.add_vm_at("vale0:dst", spec(&dst), Some(5))
        .expect("a second VM port may ask for a VM port's number");
    let of = std::env::temp_dir().join(format!("rs-vm-{}-ofmove.of", std::process::id()));
    let _ = std::fs::remove_file(&of);
    e.c.call(&Request::SwitchSet {
        name: "vale0".into(),
        openflow: ringswitch_control::proto::OpenFlowSpec {
            listen: Some(format!("unix:{}", of.display())),
            ..Default::default()
        },
    })
    .unwrap();
    let _rm = RmOnDrop(of.clone());
    let ofctl = |args: &[&str]| -> String {
        let o = Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", "--timeout=60"])
            .arg(args[0])
            .arg(format!("unix:{}", of.display()))
            .args(&args[1..])
            .output()
            .expect("ovs-ofctl runs (scripts/setup.sh installs openvswitch-common)");
        assert!(o.status.success(), "ovs-ofctl {args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The number of a port as ovs-ofctl shows it.
    let number_of = |name: &str| -> u32 {
        let show = ofctl(&["show"]);
        let at = show
            .find(&format!("({name}): "))
            .unwrap_or_else(|| panic!("{name} in {show}"));
        let line = &show[..at];
        line[line.rfind(' ').unwrap() + 1..].parse().unwrap()
    };
    let mut p = e.open("vale0:p");
    assert_eq!(number_of("vale0:src"), 5);
    let dst_was = number_of("vale0:dst");
    assert_ne!(dst_was, 5);
    let pn = number_of("vale0:p");
    ofctl(&["add-flow", &format!("in_port={pn},actions=output:5")]);
    // Frames from p until `g` gets one with a tag of this round (the
    // number moves as the guests' protocol threads see them start and
    // stop).
    let mut tag = 0;
    let mut reaches = |p: &mut Port, g: &mut Guest, what: &str| {
        let deadline = Instant::now() + T;
        let first = tag + 1;
        loop {
            tag += 1;
            send(p, &[pat(GA, RP, 60, tag)]);
            let got = g.wait_rx(1, Duration::from_millis(20));
            if got.iter().any(|f| tag_of(&f.data) >= first) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: no frame arrived");
        }
    };
    let mut a = guest(&src, GuestConfig::default());
    let mut b = guest(&dst, GuestConfig::default());
    reaches(&mut p, &mut a, "output:5 to the guest on src");
    assert!(b.recv().is_empty(), "dst does not hold 5: it gets nothing");
    // The guest stops on src (a migration's source) while dst runs.
    a.disconnect();
    reaches(
        &mut p,
        &mut b,
        "output:5 to the guest on dst, once src stopped",
    );
    assert_eq!(number_of("vale0:dst"), 5);
    assert_eq!(number_of("vale0:src"), dst_was, "src has dst's old number");
    // And back: dst's guest stops, then a guest starts on src.
    b.disconnect();
    assert!(e.wait_connected("vale0:dst", false));
    assert_eq!(number_of("vale0:dst"), 5, "no one runs: the number stays");
    let mut a = guest(&src, GuestConfig::default());
    reaches(&mut p, &mut a, "output:5 to the guest back on src");
    assert_eq!(number_of("vale0:src"), 5);
    // The flow counted every frame that matched it, wherever it went (its
    // counters catch up once the worker idles).
    let deadline = Instant::now() + T;
    loop {
        let flows = ofctl(&["dump-flows"]);
        if flows.contains(&format!("n_packets={tag},")) {
            break;
        }
        assert!(Instant::now() < deadline, "{tag} frames sent: {flows}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A ring port may not take a VM port's number.
    let r = e.c.call(&Request::PortAdd {
        name: "vale0:ring".into(),
        vhost_user: None,
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: Some(5),
    });
    assert!(daemon_err(r).to_string().contains("is vale0:src's"));
    e.still_works();
}

/// Issue 19: a guest that stops on its port (its frontend gone, as a
/// migration's source goes once the guest runs elsewhere) leaves no
/// address behind: the switch forgets what it learned there, so frames
/// for the guest flood (and reach it wherever it now is) instead of going
/// to the port it left.
#[test]
fn a_stopped_guests_addresses_are_forgotten() {
    let mut e = env("forget");
    let path = e.vm("vale0:vm1");
    let g = guest(&path, GuestConfig::default());
    let mut p = e.open("vale0:p");
    let macs = |e: &mut Env| -> Vec<ringswitch_control::MacEntry> {
        e.c.call_as(&Request::Macs {
            switch: "vale0".into(),
        })
        .unwrap()
        .0
    };
    let learned_on = |m: &[ringswitch_control::MacEntry], mac: [u8; 6]| -> Option<String> {
        let s = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
        );
        m.iter().find(|x| x.mac == s).map(|x| x.port.clone())
    };
    let mut g = g;
    g.send_plain(&pat(RP, GA, 60, 1));
    assert_eq!(recv_within(&mut p, 1, T).len(), 1, "guest to ring port");
    let deadline = Instant::now() + T;
    while learned_on(&macs(&mut e), GA).as_deref() != Some("vale0:vm1") {
        assert!(
            Instant::now() < deadline,
            "the guest's address learned on vale0:vm1"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    g.disconnect();
    let deadline = Instant::now() + T;
    while learned_on(&macs(&mut e), GA).is_some() {
        assert!(
            Instant::now() < deadline,
            "the guest's address still learned after its frontend went: {:?}",
            macs(&mut e)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The ring port's own address stays.
    assert_eq!(send(&mut p, &[pat(GA, RP, 60, 2)]), 1);
    let deadline = Instant::now() + T;
    while learned_on(&macs(&mut e), RP).as_deref() != Some("vale0:p") {
        assert!(Instant::now() < deadline, "the ring port's address learned");
        std::thread::sleep(Duration::from_millis(10));
    }
}
