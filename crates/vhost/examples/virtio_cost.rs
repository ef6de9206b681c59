//! What the virtio data path costs per packet, in process: a mock driver
//! fills guest A's TX queue with frames, the device drains it with
//! `tx_batch` (copying each frame into an arena, as the switch does) and
//! pushes each frame into guest B's RX queue, then notifies both once. Each
//! size is measured twice: with `rx_push` (the used index moves per frame)
//! and with `rx_push_deferred` (it moves once, in `notify_rx`). The driver
//! side (refilling both available rings, reclaiming nothing) runs between
//! rounds and is not timed. Both guests' buffers are laid out as DPDK mbufs
//! (2 KiB data room, 2368-byte stride), 1024-entry queues, 512-frame
//! batches; MRG_RXBUF, EVENT_IDX and VERSION_1 negotiated.
//!
//! Run: `cargo run --release -p ringswitch-vhost --example virtio_cost [rounds [frame bytes...]]`.
//! Prints the best of several runs in ns per packet, for 64-byte and
//! 1514-byte frames unless sizes are given.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ringswitch_vhost::hdr::feature;
use ringswitch_vhost::vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use ringswitch_vhost::{QueueKind, VirtioNetHdr, VirtioNetPort};

/// Queue size of both rings.
const QSIZE: u16 = 1024;
/// Frames per batch (the switch's default batch is 512).
const BATCH: usize = 512;
/// Bytes per guest buffer (a DPDK mbuf's data room).
const BUF_LEN: u32 = 2048;
/// Distance between buffers: a DPDK mbuf pool element (64-byte pool
/// header, 128-byte mbuf, 128-byte headroom, 2048-byte data room).
const BUF_STRIDE: u64 = 2368;
/// Guest memory per VM: rings at 0, buffers from BUF_BASE.
const MEM_SIZE: usize = 4 << 20;
const DESC: u64 = 0x0;
const AVAIL: u64 = DESC + 16 * QSIZE as u64;
const USED: u64 = 0x8000;
const BUF_BASE: u64 = 0x10_0000;
/// Runs per frame size; the best is printed.
const RUNS: usize = 7;
/// The arena the switch copies TX frames into, packed as the switch packs
/// it (each frame at a 64-byte boundary).
const ARENA: usize = BATCH * 2048;

const FEATURES: u64 = (1 << feature::VIRTIO_F_VERSION_1)
    | (1 << feature::VIRTIO_RING_F_EVENT_IDX)
    | (1 << feature::VIRTIO_RING_F_INDIRECT_DESC)
    | (1 << feature::VIRTIO_NET_F_MRG_RXBUF);

/// One guest with one queue pair; only one of its queues is used.
struct Guest {
    mem: GuestMemoryMmap,
    port: VirtioNetPort,
    avail_idx: u16,
}

impl Guest {
    /// A running queue pair whose `kind` queue has QSIZE descriptors, one
    /// buffer each (writable for RX), each TX buffer holding a header and
    /// a `frame_len`-byte frame.
    fn new(kind: QueueKind, frame_len: usize) -> Guest {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM_SIZE)]).unwrap();
        let mut port = VirtioNetPort::new(0);
        port.set_memory(Some(mem.clone()));
        port.set_features(FEATURES);
        for k in [QueueKind::Rx, QueueKind::Tx] {
            assert!(port.set_vring_size(k, QSIZE));
            port.set_vring_addr(k, DESC, AVAIL, USED);
            port.set_vring_base(k, 0);
            port.set_vring_enabled(k, true);
        }
        // Only the measured queue starts: both share ring addresses.
        assert!(port.start_vring(kind, None));
        let (flags, len) = match kind {
            QueueKind::Rx => (2u16, BUF_LEN), // VRING_DESC_F_WRITE
            QueueKind::Tx => (0u16, (VirtioNetHdr::LEN + frame_len) as u32),
        };
        let frame: Vec<u8> = (0..frame_len).map(|i| i as u8).collect();
        for i in 0..u64::from(QSIZE) {
            let buf = BUF_BASE + i * BUF_STRIDE;
            let mut d = [0u8; 16];
            d[0..8].copy_from_slice(&buf.to_le_bytes());
            d[8..12].copy_from_slice(&len.to_le_bytes());
            d[12..14].copy_from_slice(&flags.to_le_bytes());
            mem.write_slice(&d, GuestAddress(DESC + 16 * i)).unwrap();
            if kind == QueueKind::Tx {
                mem.write_slice(&[0u8; VirtioNetHdr::LEN], GuestAddress(buf))
                    .unwrap();
                mem.write_slice(&frame, GuestAddress(buf + VirtioNetHdr::LEN as u64))
                    .unwrap();
            }
        }
        // The guest never wants an interrupt in this test (used_event far away).
        mem.write_obj(0x8000u16, GuestAddress(AVAIL + 4 + 2 * u64::from(QSIZE)))
            .unwrap();
        Guest {
            mem,
            port,
            avail_idx: 0,
        }
    }

    /// Offers `n` more chains: ring entries, then the index (the device
    /// consumed everything offered before, so descriptors can be reused).
    fn offer(&mut self, n: usize) {
        for _ in 0..n {
            let slot = u64::from(self.avail_idx % QSIZE);
            self.mem
                .write_obj(self.avail_idx % QSIZE, GuestAddress(AVAIL + 4 + 2 * slot))
                .unwrap();
            self.avail_idx = self.avail_idx.wrapping_add(1);
        }
        self.mem
            .write_obj(self.avail_idx, GuestAddress(AVAIL + 2))
            .unwrap();
    }
}

/// How frames are pushed into the receiving guest.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Push {
    /// `rx_push` per frame: the used index moves per frame.
    EachFrame,
    /// `rx_push_deferred` per frame and one `notify_rx` (which flushes).
    Deferred,
}

/// Forwards `rounds` batches of `frame_len`-byte frames; ns per packet.
fn run(frame_len: usize, rounds: usize, push: Push) -> f64 {
    let mut tx = Guest::new(QueueKind::Tx, frame_len);
    let mut rx = Guest::new(QueueKind::Rx, frame_len);
    let mut arena = vec![0u8; ARENA];
    let mut staged: Vec<(usize, usize, VirtioNetHdr)> = Vec::with_capacity(BATCH);
    let mut busy = Duration::ZERO;
    let mut pkts = 0usize;
    for _ in 0..rounds {
        tx.offer(BATCH);
        rx.offer(BATCH);
        let start = Instant::now();
        staged.clear();
        let mut used = 0;
        let taken = tx.port.tx_batch(BATCH, |f, h| {
            let len = f.len();
            f.copy_to(&mut arena[used..used + len]);
            staged.push((used, len, *h));
            used += len.next_multiple_of(64);
            true
        });
        tx.port.notify_tx_done().send();
        for &(off, len, ref h) in &staged {
            let frame = &arena[off..off + len];
            match push {
                Push::EachFrame => rx.port.rx_push(h, frame).unwrap(),
                Push::Deferred => rx.port.rx_push_deferred(h, frame).unwrap(),
            }
        }
        rx.port.notify_rx().send();
        busy += start.elapsed();
        assert_eq!(taken, BATCH);
        pkts += taken;
    }
    assert_eq!(rx.port.stats().rx_pkts as usize, pkts);
    assert_eq!(tx.port.stats().tx_bad_chains, 0);
    black_box(&arena);
    busy.as_nanos() as f64 / pkts as f64
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("numbers: rounds, then frame sizes"))
        .collect();
    let rounds = args.first().copied().unwrap_or(2000);
    let mut sizes = args.get(1..).unwrap_or_default().to_vec();
    if sizes.is_empty() {
        sizes = vec![64, 1514];
    }
    assert!(
        sizes
            .iter()
            .all(|&n| n > 0 && n + VirtioNetHdr::LEN <= BUF_LEN as usize),
        "frames must fit one {BUF_LEN}-byte buffer with the header"
    );
    println!("queue {QSIZE}, batch {BATCH}, {rounds} rounds, best of {RUNS} runs");
    for frame_len in sizes {
        for (push, what) in [
            (Push::EachFrame, "rx_push"),
            (Push::Deferred, "rx_push_deferred + notify_rx"),
        ] {
            let best = (0..RUNS)
                .map(|_| run(frame_len, rounds, push))
                .fold(f64::INFINITY, f64::min);
            println!("{frame_len:>5} B: {best:7.1} ns/pkt (TX drain + {what})");
        }
    }
}
