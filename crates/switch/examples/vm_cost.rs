//! CPU cost of the switch's VM paths alone, in one thread: a mock driver
//! plays the guest (fills a TX queue, refills an RX queue), the switch
//! forwards, and the figure is the switch's nanoseconds per packet with no
//! QEMU, no cross-core traffic and no wake-ups. Three paths, each between
//! two ports on one switch (so every frame has exactly one destination):
//!
//! - `vm→ring`: a guest's TX queue into a ring port's RX ring;
//! - `ring→vm`: a ring port's TX ring into a guest's RX queue;
//! - `vm→vm`: one guest's TX queue into another's RX queue.
//!
//! Guest buffers are laid out as DPDK mbufs (2 KiB data room), 1024-entry
//! queues; MRG_RXBUF, EVENT_IDX and VERSION_1 negotiated; the guest never
//! asks for an interrupt. Deterministic in instructions, so it is the
//! figure to compare under `valgrind --tool=callgrind` when wall time on
//! a two-core machine is too noisy.
//!
//! `cargo run --release -p ringswitch-switch --example vm_cost [rounds [frame bytes [path]]]`,
//! path one of `vm-ring`, `ring-vm`, `vm-vm` (all three unless given).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringswitch_ring::{AppRing, Dir, Geometry, Region, RegionLayout};
use ringswitch_switch::{Hub, Scratch, Switch, SwitchPort};
use ringswitch_vhost::socket::SharedNet;
use ringswitch_vhost::testing::{MockGuest, BUF_LEN};
use ringswitch_vhost::{NetConfig, QueueKind, VhostUserNet, VirtioNetHdr, VirtioNetPort};

/// Frames per round (the switch's default batch).
const BATCH: u32 = 512;
/// The driven queue's rings are the mock guest's; the other queue's sit
/// this far from them, empty.
const IDLE_RINGS: u64 = 0x2_0000;
/// Runs per path; the best is printed.
const RUNS: usize = 5;

/// A frame from 02:..:01 to 02:..:02, `len` bytes.
fn frame(len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| i as u8).collect();
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

/// One guest with one queue pair whose `kind` queue is driven.
struct Guest {
    mock: MockGuest,
    dev: SharedNet,
    kind: QueueKind,
}

impl Guest {
    fn new(kind: QueueKind, frame_len: usize) -> Guest {
        let mock = MockGuest::new(kind, &frame(frame_len));
        let dev: SharedNet = Arc::new(Mutex::new(VhostUserNet::new(NetConfig::default()).unwrap()));
        {
            let net = dev.lock().unwrap();
            let mut port: std::sync::MutexGuard<'_, VirtioNetPort> = net.ports()[0].lock().unwrap();
            mock.set_up(&mut port, kind, IDLE_RINGS);
            // A running pair is a link that is up.
            for k in [QueueKind::Rx, QueueKind::Tx] {
                assert!(port.start_vring(k, None));
            }
        }
        Guest { mock, dev, kind }
    }

    /// Offers `n` more chains (the device consumed all offered before).
    fn offer(&mut self, n: u32) {
        self.mock.offer(n as usize);
    }

    /// Frames the device put in the guest's RX queue so far.
    fn received(&self) -> u64 {
        let net = self.dev.lock().unwrap();
        let st = net.ports()[0].lock().unwrap().stats();
        debug_assert!(self.kind == QueueKind::Rx);
        st.rx_pkts
    }
}

/// Attaches a VM port for `g` (the one line that differs between the
/// switch's shapes).
fn attach_vm(sw: &Switch, name: &str, g: &Guest) -> Arc<SwitchPort> {
    let queues: Vec<ringswitch_frame::SharedQueue> = g
        .dev
        .lock()
        .unwrap()
        .ports()
        .iter()
        .map(|p| p.clone() as ringswitch_frame::SharedQueue)
        .collect();
    sw.attach(|i| {
        Ok(SwitchPort::new_queues(
            name.into(),
            i,
            ringswitch_switch::QueuePort::new(queues)?,
        ))
    })
    .unwrap()
}

/// A ring port with its application's TX and RX rings.
fn attach_ring(sw: &Switch, name: &str, frame_len: usize) -> (Arc<SwitchPort>, AppRing, AppRing) {
    let r = Arc::new(
        Region::create(
            RegionLayout::new(Geometry::default(), 1).unwrap(),
            [name, ""],
        )
        .unwrap(),
    );
    let p = sw
        .attach(|i| SwitchPort::new(name.into(), i, r.clone()))
        .unwrap();
    let mut tx = AppRing::new(r.clone(), 0, Dir::Tx, 0);
    let rx = AppRing::new(r, 0, Dir::Rx, 0);
    let f = frame(frame_len);
    for k in 0..tx.space() {
        let mut s = tx.slot_mut(k).unwrap();
        s.write_at(0, &f);
        s.set_len(frame_len as u16);
    }
    (p, tx, rx)
}

#[derive(Clone, Copy)]
enum Path {
    VmToRing,
    RingToVm,
    VmToVm,
}

/// Forwards `rounds` batches on `path`; the switch's ns per packet.
fn run(path: Path, frame_len: usize, rounds: usize) -> f64 {
    // A hub: every frame goes to the one other port, with no learning
    // state to warm up.
    let sw = Switch::new("vale0", Box::new(Hub), BATCH);
    let mut sc = Scratch::default();
    let mut busy = Duration::ZERO;
    let mut pkts = 0u64;
    match path {
        Path::VmToRing => {
            let mut g = Guest::new(QueueKind::Tx, frame_len);
            let a = attach_vm(&sw, "vale0:vm", &g);
            let (_b, _tx, mut rx) = attach_ring(&sw, "vale0:r", frame_len);
            for _ in 0..rounds {
                g.offer(BATCH);
                let t = Instant::now();
                let r = sw.forward(&a, 0, &mut sc);
                busy += t.elapsed();
                rx.refresh_tail();
                let m = rx.space();
                rx.advance(m);
                rx.publish();
                assert_eq!(m, BATCH, "every frame reaches the ring");
                pkts += u64::from(r.packets);
            }
        }
        Path::RingToVm => {
            let mut g = Guest::new(QueueKind::Rx, frame_len);
            let (a, mut tx, _rx) = attach_ring(&sw, "vale0:r", frame_len);
            let _b = attach_vm(&sw, "vale0:vm", &g);
            for _ in 0..rounds {
                g.offer(BATCH);
                for k in 0..BATCH {
                    tx.slot_mut(k).unwrap().set_len(frame_len as u16);
                }
                tx.advance(BATCH);
                tx.publish();
                let t = Instant::now();
                let r = sw.forward(&a, 0, &mut sc);
                busy += t.elapsed();
                tx.refresh_tail();
                pkts += u64::from(r.packets);
            }
            assert_eq!(g.received(), pkts, "every frame reaches the guest");
        }
        Path::VmToVm => {
            let mut s = Guest::new(QueueKind::Tx, frame_len);
            let mut d = Guest::new(QueueKind::Rx, frame_len);
            let a = attach_vm(&sw, "vale0:vm1", &s);
            let _b = attach_vm(&sw, "vale0:vm2", &d);
            for _ in 0..rounds {
                s.offer(BATCH);
                d.offer(BATCH);
                let t = Instant::now();
                let r = sw.forward(&a, 0, &mut sc);
                busy += t.elapsed();
                pkts += u64::from(r.packets);
            }
            assert_eq!(d.received(), pkts, "every frame reaches the guest");
        }
    }
    assert_eq!(pkts, rounds as u64 * u64::from(BATCH));
    busy.as_nanos() as f64 / pkts as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let len: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    assert!(
        (60..=BUF_LEN as usize - VirtioNetHdr::LEN).contains(&len),
        "frames of 60 to {} bytes",
        BUF_LEN as usize - VirtioNetHdr::LEN
    );
    let only = args.next();
    println!("{len}-byte frames, batch {BATCH}, {rounds} rounds, best of {RUNS} runs");
    for (path, what) in [
        (Path::VmToRing, "vm-ring"),
        (Path::RingToVm, "ring-vm"),
        (Path::VmToVm, "vm-vm"),
    ] {
        if only.as_deref().is_some_and(|o| o != what) {
            continue;
        }
        let best = (0..RUNS)
            .map(|_| run(path, len, rounds))
            .fold(f64::INFINITY, f64::min);
        println!("{what:>8}: {best:6.1} ns/packet");
    }
}
