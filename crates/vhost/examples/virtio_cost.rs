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

use ringswitch_vhost::testing::{MockGuest, BUF_LEN, QSIZE};
use ringswitch_vhost::{QueueKind, VirtioNetHdr, VirtioNetPort};

/// Frames per batch (the switch's default batch is 512).
const BATCH: usize = 512;
/// Runs per frame size; the best is printed.
const RUNS: usize = 7;
/// The arena the switch copies TX frames into, packed as the switch packs
/// it (each frame at a 64-byte boundary).
const ARENA: usize = BATCH * 2048;

/// One guest with one queue pair; only one of its queues is used.
struct Guest {
    mock: MockGuest,
    port: VirtioNetPort,
}

impl Guest {
    /// A running queue pair whose `kind` queue has QSIZE descriptors, one
    /// buffer each (writable for RX), each TX buffer holding a header and
    /// a `frame_len`-byte frame.
    fn new(kind: QueueKind, frame_len: usize) -> Guest {
        let frame: Vec<u8> = (0..frame_len).map(|i| i as u8).collect();
        let mock = MockGuest::new(kind, &frame);
        let mut port = VirtioNetPort::new(0);
        mock.set_up(&mut port, kind, 0);
        // Only the measured queue starts: both share ring addresses.
        assert!(port.start_vring(kind, None));
        Guest { mock, port }
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
        tx.mock.offer(BATCH);
        rx.mock.offer(BATCH);
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
