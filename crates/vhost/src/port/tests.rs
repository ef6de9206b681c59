//! A mock guest driver against one queue pair: rings laid out by
//! virtio-queue's `MockSplitQueue`, descriptors and available entries
//! written the way a driver writes them.

use std::io::Read;
use std::os::fd::FromRawFd;

use virtio_bindings::virtio_ring::{VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryMmap};

use super::*;
use crate::chain::{CHAIN_BYTES_MAX, CHAIN_DESCS_MAX};

const MEM_SIZE: usize = 0x10_0000;
const QSIZE: u16 = 128;
const RX_BASE: u64 = 0x0;
const TX_BASE: u64 = 0x4000;
const BUF_BASE: u64 = 0x2_0000;
const W: u16 = VRING_DESC_F_WRITE as u16;
const N: u16 = VRING_DESC_F_NEXT as u16;

struct Ring {
    desc: GuestAddress,
    avail: GuestAddress,
    used: GuestAddress,
}

struct Guest {
    mem: GuestMemoryMmap,
    rx: Ring,
    tx: Ring,
    port: VirtioNetPort,
    /// The RX call eventfd (non-blocking) and the interrupts read from it.
    rx_irq: File,
    irq_seen: u64,
}

fn ring(mem: &GuestMemoryMmap, base: u64) -> Ring {
    let q = MockSplitQueue::create(mem, GuestAddress(base), QSIZE);
    Ring {
        desc: q.desc_table_addr(),
        avail: q.avail_addr(),
        used: q.used_addr(),
    }
}

fn guest(features: u64) -> Guest {
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM_SIZE)]).unwrap();
    guest_in(mem, features)
}

/// A running queue pair over `mem`, rings at RX_BASE and TX_BASE.
fn guest_in(mem: GuestMemoryMmap, features: u64) -> Guest {
    let rx = ring(&mem, RX_BASE);
    let tx = ring(&mem, TX_BASE);
    let mut port = VirtioNetPort::new(0);
    port.set_memory(Some(mem.clone()));
    port.set_features(features);
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor nothing else owns.
    let rx_irq = unsafe { File::from_raw_fd(fd) };
    let irq_w = rx_irq.try_clone().unwrap();
    for (kind, r) in [(QueueKind::Rx, &rx), (QueueKind::Tx, &tx)] {
        assert!(port.set_vring_size(kind, QSIZE));
        port.set_vring_addr(kind, r.desc.0, r.avail.0, r.used.0);
        port.set_vring_base(kind, 0);
        port.set_vring_enabled(kind, true);
        assert!(port.start_vring(kind, None));
    }
    port.set_vring_call(QueueKind::Rx, Some(irq_w)).unwrap();
    assert!(port.is_running());
    Guest {
        mem,
        rx,
        tx,
        port,
        rx_irq,
        irq_seen: 0,
    }
}

const BASE_FEATURES: u64 = (1 << feature::VIRTIO_F_VERSION_1)
    | (1 << feature::VIRTIO_RING_F_EVENT_IDX)
    | (1 << feature::VIRTIO_RING_F_INDIRECT_DESC);
const MRG: u64 = 1 << feature::VIRTIO_NET_F_MRG_RXBUF;

impl Guest {
    fn desc(&self, table: GuestAddress, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let d = RawDescriptor::from(SplitDescriptor::new(addr, len, flags, next));
        self.mem
            .write_obj(d, table.unchecked_add(u64::from(i) * 16))
            .unwrap();
    }

    fn offer(&self, r: &Ring, head: u16) {
        let idx: u16 = self.mem.read_obj(r.avail.unchecked_add(2)).unwrap();
        let slot = u64::from(idx % QSIZE);
        self.mem
            .write_obj(head, r.avail.unchecked_add(4 + 2 * slot))
            .unwrap();
        self.mem
            .write_obj(idx.wrapping_add(1), r.avail.unchecked_add(2))
            .unwrap();
    }

    fn used_idx(&self, r: &Ring) -> u16 {
        self.mem.read_obj(r.used.unchecked_add(2)).unwrap()
    }

    fn used(&self, r: &Ring, i: u16) -> (u32, u32) {
        let a = r.used.unchecked_add(4 + 8 * u64::from(i % QSIZE));
        (
            self.mem.read_obj(a).unwrap(),
            self.mem.read_obj(a.unchecked_add(4)).unwrap(),
        )
    }

    fn set_used_event(&self, r: &Ring, v: u16) {
        self.mem
            .write_obj(v, r.avail.unchecked_add(4 + 2 * u64::from(QSIZE)))
            .unwrap();
    }

    fn avail_event(&self, r: &Ring) -> u16 {
        self.mem
            .read_obj(r.used.unchecked_add(4 + 8 * u64::from(QSIZE)))
            .unwrap()
    }

    /// Drains TX, returning (chains taken, frames seen).
    fn drain(&mut self) -> (usize, Vec<(VirtioNetHdr, Vec<u8>)>) {
        let mut frames = Vec::new();
        let n = self.port.tx_batch(64, |f, h| {
            let mut buf = vec![0u8; f.len()];
            assert_eq!(f.copy_to(&mut buf), f.len());
            let via_slices: usize = f.slices().map(|s| s.len()).sum();
            assert_eq!(via_slices, f.len());
            frames.push((*h, buf));
            true
        });
        (n, frames)
    }

    /// Interrupts the guest received so far (each one counted by the port
    /// reached the eventfd).
    fn irqs(&mut self) -> usize {
        let mut b = [0u8; 8];
        if let Ok(8) = self.rx_irq.read(&mut b) {
            self.irq_seen += u64::from_ne_bytes(b);
        }
        assert_eq!(self.irq_seen, self.port.stats().interrupts);
        self.irq_seen as usize
    }
}

fn frame(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

#[test]
fn tx_normal_frame_header_and_data_in_separate_buffers() {
    let mut g = guest(BASE_FEATURES);
    let hdr = VirtioNetHdr {
        flags: ringswitch_frame::F_NEEDS_CSUM,
        csum_start: 34u16.to_le(),
        csum_offset: 16u16.to_le(),
        ..Default::default()
    };
    g.mem.write_obj(hdr, GuestAddress(BUF_BASE)).unwrap();
    let data = frame(60);
    g.mem
        .write_slice(&data[..20], GuestAddress(BUF_BASE + 0x100))
        .unwrap();
    g.mem
        .write_slice(&data[20..], GuestAddress(BUF_BASE + 0x200))
        .unwrap();
    g.desc(g.tx.desc, 0, BUF_BASE, 12, N, 1);
    g.desc(g.tx.desc, 1, BUF_BASE + 0x100, 20, N, 2);
    g.desc(g.tx.desc, 2, BUF_BASE + 0x200, 40, 0, 0);
    g.offer(&g.tx, 0);
    let (n, frames) = g.drain();
    assert_eq!(n, 1);
    assert_eq!(frames, vec![(hdr, data)]);
    assert_eq!(g.used_idx(&g.tx), 1);
    assert_eq!(g.used(&g.tx, 0), (0, 0));
    assert_eq!(g.port.stats().tx_pkts, 1);
    assert_eq!(g.port.stats().tx_bytes, 60);
    assert_eq!(g.port.stats().tx_bad_chains, 0);
    // Nothing more: idle.
    assert_eq!(g.drain().0, 0);
}

#[test]
fn tx_header_and_frame_in_one_buffer() {
    let mut g = guest(BASE_FEATURES);
    let data = frame(100);
    g.mem
        .write_slice(&[0u8; 12], GuestAddress(BUF_BASE))
        .unwrap();
    g.mem
        .write_slice(&data, GuestAddress(BUF_BASE + 12))
        .unwrap();
    g.desc(g.tx.desc, 5, BUF_BASE, 112, 0, 0);
    g.offer(&g.tx, 5);
    let (_, frames) = g.drain();
    assert_eq!(frames[0].1, data);
    assert_eq!(g.used(&g.tx, 0), (5, 0));
}

/// Offers one bad TX chain (built by `build`, head 0), then a good one at
/// head 100: the bad one is completed with 0 and counted, the good one passes.
fn tx_bad(build: impl FnOnce(&Guest)) {
    let mut g = guest(BASE_FEATURES);
    build(&g);
    g.offer(&g.tx, 0);
    g.desc(g.tx.desc, 100, BUF_BASE + 0x8000, 74, 0, 0);
    g.offer(&g.tx, 100);
    let (n, frames) = g.drain();
    assert_eq!(n, 2);
    assert_eq!(frames.len(), 1, "only the good chain reaches the switch");
    assert_eq!(frames[0].1.len(), 62);
    assert_eq!(g.used_idx(&g.tx), 2);
    assert_eq!(g.used(&g.tx, 0), (0, 0));
    assert_eq!(g.used(&g.tx, 1), (100, 0));
    assert_eq!(g.port.stats().tx_bad_chains, 1);
    assert_eq!(g.port.stats().tx_pkts, 1);
}

#[test]
fn tx_chain_loop() {
    tx_bad(|g| {
        g.desc(g.tx.desc, 0, BUF_BASE, 64, N, 1);
        g.desc(g.tx.desc, 1, BUF_BASE, 64, N, 0);
    });
}

#[test]
fn tx_self_loop() {
    tx_bad(|g| g.desc(g.tx.desc, 0, BUF_BASE, 64, N, 0));
}

#[test]
fn tx_address_outside_memory() {
    tx_bad(|g| g.desc(g.tx.desc, 0, 0x4000_0000, 64, 0, 0));
}

#[test]
fn tx_buffer_running_past_the_end_of_memory() {
    tx_bad(|g| g.desc(g.tx.desc, 0, MEM_SIZE as u64 - 16, 64, 0, 0));
}

#[test]
fn tx_address_wrapping_u64() {
    tx_bad(|g| g.desc(g.tx.desc, 0, u64::MAX - 8, 64, 0, 0));
}

#[test]
fn tx_zero_length_descriptor() {
    tx_bad(|g| {
        g.desc(g.tx.desc, 0, BUF_BASE, 64, N, 1);
        g.desc(g.tx.desc, 1, BUF_BASE, 0, 0, 0);
    });
}

#[test]
fn tx_lone_zero_length_descriptor() {
    tx_bad(|g| g.desc(g.tx.desc, 0, BUF_BASE, 0, 0, 0));
}

#[test]
fn tx_chain_shorter_than_header() {
    tx_bad(|g| g.desc(g.tx.desc, 0, BUF_BASE, 12, 0, 0));
}

#[test]
fn tx_next_outside_table() {
    tx_bad(|g| g.desc(g.tx.desc, 0, BUF_BASE, 64, N, QSIZE));
}

#[test]
fn tx_too_many_descriptors() {
    tx_bad(|g| {
        let n = CHAIN_DESCS_MAX as u16 + 1;
        for i in 0..n {
            let last = i == n - 1;
            g.desc(g.tx.desc, i, BUF_BASE, 64, if last { 0 } else { N }, i + 1);
        }
    });
}

#[test]
fn tx_too_many_bytes() {
    tx_bad(|g| g.desc(g.tx.desc, 0, BUF_BASE, CHAIN_BYTES_MAX as u32 + 1, 0, 0));
}

#[test]
fn tx_writable_descriptor() {
    tx_bad(|g| g.desc(g.tx.desc, 0, BUF_BASE, 64, W, 0));
}

#[test]
fn tx_indirect_nested() {
    tx_bad(|g| {
        let table = GuestAddress(0x1_0000);
        g.desc(g.tx.desc, 0, table.0, 32, VRING_DESC_F_INDIRECT as u16, 0);
        g.desc(table, 0, table.0, 16, VRING_DESC_F_INDIRECT as u16, 0);
    });
}

#[test]
fn tx_indirect_table_outside_memory() {
    tx_bad(|g| {
        g.desc(
            g.tx.desc,
            0,
            0x4000_0000,
            32,
            VRING_DESC_F_INDIRECT as u16,
            0,
        )
    });
}

#[test]
fn tx_indirect_table_bad_length() {
    tx_bad(|g| g.desc(g.tx.desc, 0, 0x1_0000, 24, VRING_DESC_F_INDIRECT as u16, 0));
}

#[test]
fn tx_indirect_loop() {
    tx_bad(|g| {
        let table = GuestAddress(0x1_0000);
        g.desc(g.tx.desc, 0, table.0, 32, VRING_DESC_F_INDIRECT as u16, 0);
        g.desc(table, 0, BUF_BASE, 64, N, 1);
        g.desc(table, 1, BUF_BASE, 64, N, 0);
    });
}

#[test]
fn tx_indirect_not_negotiated() {
    let mut g = guest(BASE_FEATURES & !(1 << feature::VIRTIO_RING_F_INDIRECT_DESC));
    let table = GuestAddress(0x1_0000);
    g.desc(g.tx.desc, 0, table.0, 16, VRING_DESC_F_INDIRECT as u16, 0);
    g.desc(table, 0, BUF_BASE, 64, 0, 0);
    g.offer(&g.tx, 0);
    assert_eq!(g.drain().1.len(), 0);
    assert_eq!(g.port.stats().tx_bad_chains, 1);
}

#[test]
fn tx_indirect_ok() {
    let mut g = guest(BASE_FEATURES);
    let table = GuestAddress(0x1_0000);
    let data = frame(80);
    g.mem
        .write_slice(&data, GuestAddress(BUF_BASE + 0x100))
        .unwrap();
    g.desc(g.tx.desc, 3, table.0, 32, VRING_DESC_F_INDIRECT as u16, 0);
    g.desc(table, 0, BUF_BASE, 12, N, 1);
    g.desc(table, 1, BUF_BASE + 0x100, 80, 0, 0);
    g.offer(&g.tx, 3);
    let (_, frames) = g.drain();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1, data);
    assert_eq!(g.used(&g.tx, 0), (3, 0));
}

#[test]
fn tx_head_outside_table_and_runaway_avail_index() {
    let mut g = guest(BASE_FEATURES);
    g.offer(&g.tx, QSIZE + 5);
    assert_eq!(g.drain(), (1, vec![]));
    assert_eq!(g.port.stats().tx_bad_chains, 1);
    // An available index far ahead of the device: a broken ring, nothing taken.
    g.mem
        .write_obj(1000u16, g.tx.avail.unchecked_add(2))
        .unwrap();
    assert_eq!(g.drain().0, 0);
    assert_eq!(g.port.stats().ring_errors, 1);
}

#[test]
fn tx_batch_is_bounded() {
    let mut g = guest(BASE_FEATURES);
    for i in 0..10 {
        g.desc(g.tx.desc, i, BUF_BASE, 74, 0, 0);
        g.offer(&g.tx, i);
    }
    let n = g.port.tx_batch(4, |_, _| true);
    assert_eq!(n, 4);
    assert_eq!(g.used_idx(&g.tx), 4);
    assert_eq!(g.port.tx_batch(100, |_, _| true), 6);
}

#[test]
fn tx_notifications_double_check() {
    let mut g = guest(BASE_FEATURES);
    g.port.disable_tx_notifications();
    assert!(!g.port.enable_tx_notifications(), "idle: nothing arrived");
    assert_eq!(g.avail_event(&g.tx), 0);
    g.desc(g.tx.desc, 0, BUF_BASE, 74, 0, 0);
    g.offer(&g.tx, 0);
    assert!(
        g.port.enable_tx_notifications(),
        "work arrived before sleeping"
    );
    assert_eq!(g.drain().0, 1);
    assert!(!g.port.enable_tx_notifications());
    assert_eq!(g.avail_event(&g.tx), 1, "kick me when entry 1 is posted");
}

fn rx_post(g: &Guest, head: u16, addr: u64, len: u32) {
    g.desc(g.rx.desc, head, addr, len, W, 0);
    g.offer(&g.rx, head);
}

fn rx_read(g: &Guest, addr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    g.mem.read_slice(&mut v, GuestAddress(addr)).unwrap();
    v
}

#[test]
fn rx_normal_without_mrg_rxbuf() {
    let mut g = guest(BASE_FEATURES);
    rx_post(&g, 0, BUF_BASE, 2048);
    assert_eq!(g.port.rx_space(), 1);
    let data = frame(300);
    let hdr = VirtioNetHdr {
        flags: ringswitch_frame::F_DATA_VALID,
        ..Default::default()
    };
    g.port.rx_push(&hdr, &data).unwrap();
    assert_eq!(g.used_idx(&g.rx), 1);
    assert_eq!(g.used(&g.rx, 0), (0, 312));
    let got: VirtioNetHdr = g.mem.read_obj(GuestAddress(BUF_BASE)).unwrap();
    assert_eq!(got.flags, ringswitch_frame::F_DATA_VALID);
    // VERSION_1 without MRG_RXBUF: the spec wants 1.
    assert_eq!(got.num_buffers(), 1);
    assert_eq!(rx_read(&g, BUF_BASE + 12, 300), data);
    assert_eq!(g.port.rx_space(), 0);
    assert_eq!(g.port.rx_push(&hdr, &data), Err(RxError::Full));
    assert_eq!(g.port.stats().rx_pkts, 1);
    assert_eq!(g.port.stats().rx_full, 1);
}

#[test]
fn rx_frame_too_large_for_one_buffer_without_mrg_rxbuf() {
    let mut g = guest(BASE_FEATURES);
    rx_post(&g, 0, BUF_BASE, 100);
    let r = g.port.rx_push(&VirtioNetHdr::default(), &frame(200));
    assert_eq!(r, Err(RxError::TooLarge));
    assert_eq!(g.used_idx(&g.rx), 0, "nothing used");
    assert_eq!(g.port.rx_space(), 1, "the buffer stays posted");
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(50))
        .unwrap();
}

#[test]
fn rx_mrg_rxbuf_splits_across_buffers() {
    let mut g = guest(BASE_FEATURES | MRG);
    for i in 0..4u16 {
        rx_post(&g, i, BUF_BASE + 0x1000 * u64::from(i), 64);
    }
    let data = frame(150);
    g.port.rx_push(&VirtioNetHdr::default(), &data).unwrap();
    // 162 bytes with the header: 64 + 64 + 34.
    assert_eq!(g.used_idx(&g.rx), 3);
    assert_eq!(g.used(&g.rx, 0), (0, 64));
    assert_eq!(g.used(&g.rx, 1), (1, 64));
    assert_eq!(g.used(&g.rx, 2), (2, 34));
    let got: VirtioNetHdr = g.mem.read_obj(GuestAddress(BUF_BASE)).unwrap();
    assert_eq!(got.num_buffers(), 3);
    let mut all = rx_read(&g, BUF_BASE + 12, 52);
    all.extend(rx_read(&g, BUF_BASE + 0x1000, 64));
    all.extend(rx_read(&g, BUF_BASE + 0x2000, 34));
    assert_eq!(all, data);
    assert_eq!(g.port.rx_space(), 1);
}

#[test]
fn rx_mrg_rxbuf_not_enough_buffers_rolls_back() {
    let mut g = guest(BASE_FEATURES | MRG);
    rx_post(&g, 0, BUF_BASE, 64);
    rx_post(&g, 1, BUF_BASE + 0x1000, 64);
    assert_eq!(
        g.port.rx_push(&VirtioNetHdr::default(), &frame(200)),
        Err(RxError::Full)
    );
    assert_eq!(g.used_idx(&g.rx), 0);
    assert_eq!(g.port.rx_space(), 2, "both buffers still posted");
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(100))
        .unwrap();
    assert_eq!(g.used_idx(&g.rx), 2);
}

#[test]
fn rx_bad_chain_completed_with_zero_and_skipped() {
    let mut g = guest(BASE_FEATURES | MRG);
    // A device-readable buffer in the RX queue, then one outside memory.
    g.desc(g.rx.desc, 0, BUF_BASE, 2048, 0, 0);
    g.offer(&g.rx, 0);
    rx_post(&g, 1, 0x4000_0000, 2048);
    rx_post(&g, 2, BUF_BASE + 0x1000, 2048);
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(60))
        .unwrap();
    assert_eq!(g.used_idx(&g.rx), 3);
    assert_eq!(g.used(&g.rx, 0), (0, 0));
    assert_eq!(g.used(&g.rx, 1), (1, 0));
    assert_eq!(g.used(&g.rx, 2), (2, 72));
    assert_eq!(g.port.stats().rx_bad_chains, 2);
    assert_eq!(g.port.stats().rx_pkts, 1);
}

#[test]
fn rx_bad_chain_then_full_keeps_the_bad_one_completed() {
    let mut g = guest(BASE_FEATURES | MRG);
    g.desc(g.rx.desc, 0, BUF_BASE, 0, W, 0);
    g.offer(&g.rx, 0);
    assert_eq!(
        g.port.rx_push(&VirtioNetHdr::default(), &frame(60)),
        Err(RxError::Full)
    );
    assert_eq!(g.used_idx(&g.rx), 1, "the bad chain is returned once");
    assert_eq!(
        g.port.rx_push(&VirtioNetHdr::default(), &frame(60)),
        Err(RxError::Full)
    );
    assert_eq!(g.used_idx(&g.rx), 1, "and not twice");
    assert_eq!(g.port.stats().rx_bad_chains, 1);
}

#[test]
fn rx_interrupts_follow_event_idx() {
    let mut g = guest(BASE_FEATURES | MRG);
    for i in 0..8u16 {
        rx_post(&g, i, BUF_BASE + 0x1000 * u64::from(i), 2048);
    }
    // The guest wants an interrupt once entry 0 is used.
    g.set_used_event(&g.rx, 0);
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(60))
        .unwrap();
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(60))
        .unwrap();
    g.port.notify_rx().send();
    assert_eq!(g.irqs(), 1, "one interrupt for the batch");
    // Busy guest: asks only after entry 5.
    g.set_used_event(&g.rx, 5);
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(60))
        .unwrap();
    g.port.notify_rx().send();
    assert_eq!(g.port.stats().interrupts, 1, "used_event not crossed");
    for _ in 0..3 {
        g.port
            .rx_push(&VirtioNetHdr::default(), &frame(60))
            .unwrap();
    }
    g.port.notify_rx().send();
    assert_eq!(
        g.port.stats().interrupts,
        2,
        "used_event 5 crossed by entry 5"
    );
    // No new entries: no interrupt.
    g.port.notify_rx().send();
    assert_eq!(g.port.stats().interrupts, 2);
}

#[test]
fn stopped_port_does_nothing() {
    let mut g = guest(BASE_FEATURES);
    assert_eq!(g.port.stop_vring(QueueKind::Tx), 0);
    assert_eq!(g.port.tx_batch(10, |_, _| panic!("stopped")), 0);
    g.port.set_memory(None);
    assert_eq!(
        g.port.rx_push(&VirtioNetHdr::default(), &frame(10)),
        Err(RxError::NotReady)
    );
    assert_eq!(g.port.rx_space(), 0);
}

#[test]
fn vring_outside_memory_does_not_start() {
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x1000)]).unwrap();
    let mut p = VirtioNetPort::new(0);
    p.set_memory(Some(mem));
    assert!(p.set_vring_size(QueueKind::Tx, 256));
    assert!(!p.set_vring_size(QueueKind::Tx, 100));
    p.set_vring_addr(QueueKind::Tx, 0, 0x800, 0x900);
    assert!(!p.start_vring(QueueKind::Tx, None));
}

/// Where memory splits in [`two_regions`].
const SPLIT: u64 = 0x1_0000;

/// The same 1 MiB as [`guest`]'s, as two adjacent regions split at SPLIT:
/// the rings in the first, BUF_BASE in the second.
fn two_regions() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[
        (GuestAddress(0), SPLIT as usize),
        (GuestAddress(SPLIT), MEM_SIZE - SPLIT as usize),
    ])
    .unwrap()
}

/// Does a TX vring of QSIZE entries at `desc`, `avail`, `used` start over `mem`?
fn starts(mem: &GuestMemoryMmap, desc: u64, avail: u64, used: u64) -> bool {
    let mut p = VirtioNetPort::new(0);
    p.set_memory(Some(mem.clone()));
    assert!(p.set_vring_size(QueueKind::Tx, QSIZE));
    p.set_vring_addr(QueueKind::Tx, desc, avail, used);
    p.start_vring(QueueKind::Tx, None)
}

#[test]
fn vring_straddling_regions_or_past_memory_does_not_start() {
    let mem = two_regions();
    let n = u64::from(QSIZE);
    let (desc_len, avail_len, used_len) = (16 * n, 6 + 2 * n, 6 + 8 * n);
    // Valid places in the second region, for the rings not under test.
    let (d, a, u) = (0x4_0000, 0x4_0800, 0x4_1000);
    assert!(starts(&mem, d, a, u));
    // Each ring may end exactly at the region's end, not one field past it:
    // the descriptor table...
    assert!(starts(&mem, SPLIT - desc_len, a, u));
    assert!(!starts(&mem, SPLIT - desc_len + 16, a, u));
    // ...the available ring, whose last field is used_event...
    assert!(starts(&mem, d, SPLIT - avail_len, u));
    assert!(!starts(&mem, d, SPLIT - avail_len + 2, u));
    // ...and the used ring, whose last field is avail_event (4-aligned, so
    // the fitting one ends 2 bytes short).
    assert!(starts(&mem, d, a, SPLIT - used_len - 2));
    assert!(!starts(&mem, d, a, SPLIT - used_len + 2));
    // Past the end of memory, or nowhere near it.
    let end = MEM_SIZE as u64;
    assert!(!starts(&mem, d, a, end - used_len + 2));
    assert!(!starts(&mem, end - 16, a, u));
    assert!(!starts(&mem, d, 0x4000_0000, u));
    assert!(!starts(&mem, d, a, u64::MAX - 3));
}

#[test]
fn misaligned_vring_does_not_start() {
    let mem = two_regions();
    let (d, a, u) = (0x4_0000, 0x4_0800, 0x4_1000);
    assert!(!starts(&mem, d + 8, a, u), "descriptor table: 16");
    assert!(!starts(&mem, d, a + 1, u), "available ring: 2");
    assert!(!starts(&mem, d, a, u + 2), "used ring: 4");
}

#[test]
fn more_regions_than_the_table_holds_are_refused() {
    let ranges: Vec<_> = (0..9u64)
        .map(|i| (GuestAddress(i * 0x1_0000), 0x1_0000))
        .collect();
    let mem = GuestMemoryMmap::from_ranges(&ranges).unwrap();
    assert!(!starts(&mem, 0x0, 0x800, 0x1000));
    let eight = GuestMemoryMmap::from_ranges(&ranges[..8]).unwrap();
    assert!(starts(&eight, 0x0, 0x800, 0x1000));
}

#[test]
fn frames_pass_with_rings_and_buffers_in_different_regions() {
    let mut g = guest_in(two_regions(), BASE_FEATURES);
    // Buffers alternate between the regions, so the last-hit region
    // changes on every lookup.
    let low = 0x8000u64;
    let mut want = Vec::new();
    for i in 0..6u16 {
        let addr = if i % 2 == 0 { low } else { BUF_BASE } + 0x200 * u64::from(i);
        let data = frame(40 + usize::from(i));
        g.mem.write_slice(&[0u8; 12], GuestAddress(addr)).unwrap();
        g.mem.write_slice(&data, GuestAddress(addr + 12)).unwrap();
        g.desc(g.tx.desc, i, addr, 12 + data.len() as u32, 0, 0);
        g.offer(&g.tx, i);
        want.push(data);
    }
    let (n, frames) = g.drain();
    assert_eq!(n, 6);
    let got: Vec<_> = frames.into_iter().map(|(_, f)| f).collect();
    assert_eq!(got, want);
    // RX the same way: one buffer in each region.
    rx_post(&g, 0, low + 0x2000, 2048);
    rx_post(&g, 1, BUF_BASE + 0x2000, 2048);
    for addr in [low + 0x2000, BUF_BASE + 0x2000] {
        let data = frame(90);
        g.port.rx_push(&VirtioNetHdr::default(), &data).unwrap();
        assert_eq!(rx_read(&g, addr + 12, 90), data);
    }
    assert_eq!(g.used_idx(&g.rx), 2);
}

#[test]
fn tx_buffer_spanning_two_regions() {
    let mut g = guest_in(two_regions(), BASE_FEATURES);
    g.desc(g.tx.desc, 0, SPLIT - 32, 64, 0, 0);
    g.offer(&g.tx, 0);
    g.desc(g.tx.desc, 1, SPLIT - 64, 64, 0, 0);
    g.offer(&g.tx, 1);
    let (n, frames) = g.drain();
    assert_eq!(n, 2);
    assert_eq!(frames.len(), 1, "only the buffer inside one region passes");
    assert_eq!(g.port.stats().tx_bad_chains, 1);
    assert_eq!(g.used(&g.tx, 0), (0, 0));
}

#[test]
fn tx_indirect_table_unaligned() {
    let mut g = guest(BASE_FEATURES);
    // Nothing requires an indirect table to be aligned: read it bytewise.
    let table = GuestAddress(0x1_0003);
    let data = frame(70);
    g.mem
        .write_slice(&data, GuestAddress(BUF_BASE + 0x100))
        .unwrap();
    g.desc(g.tx.desc, 0, table.0, 32, VRING_DESC_F_INDIRECT as u16, 0);
    g.desc(table, 0, BUF_BASE, 12, N, 1);
    g.desc(table, 1, BUF_BASE + 0x100, 70, 0, 0);
    g.offer(&g.tx, 0);
    let (_, frames) = g.drain();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1, data);
}

#[test]
fn set_memory_resolves_rings_again() {
    let mut g = guest(BASE_FEATURES);
    let gen0 = g.port.generation();
    // The frontend maps guest memory anew (same layout, new mapping).
    let mem2 = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM_SIZE)]).unwrap();
    ring(&mem2, RX_BASE);
    ring(&mem2, TX_BASE);
    g.port.set_memory(Some(mem2.clone()));
    let old = std::mem::replace(&mut g.mem, mem2);
    assert!(g.port.is_running());
    assert!(g.port.generation() > gen0);
    g.desc(g.tx.desc, 0, BUF_BASE, 74, 0, 0);
    g.offer(&g.tx, 0);
    assert_eq!(g.drain().0, 1, "the rings are read from the new mapping");
    assert_eq!(g.used_idx(&g.tx), 1);
    let old_used: u16 = old.read_obj(g.tx.used.unchecked_add(2)).unwrap();
    assert_eq!(old_used, 0, "and not written in the old one");
    // Memory that no longer holds the rings stops them.
    let small = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x1000)]).unwrap();
    g.port.set_memory(Some(small));
    assert!(!g.port.is_running());
    assert_eq!(g.port.tx_batch(10, |_, _| panic!("stopped")), 0);
}

#[test]
fn set_vring_addr_while_running_resolves_again() {
    let mut g = guest(BASE_FEATURES);
    let gen0 = g.port.generation();
    g.port
        .set_vring_addr(QueueKind::Tx, g.tx.desc.0, g.tx.avail.0, 0x4000_0000);
    assert!(!g.port.is_running(), "used ring outside memory: stopped");
    assert!(g.port.generation() > gen0);
    assert!(!g.port.tx_pending());
    // Back inside memory, it needs a kick to start again.
    g.port
        .set_vring_addr(QueueKind::Tx, g.tx.desc.0, g.tx.avail.0, g.tx.used.0);
    assert!(!g.port.is_running());
    assert!(g.port.start_vring(QueueKind::Tx, None));
    assert!(g.port.is_running());
}

#[test]
fn rx_push_deferred_is_visible_only_after_a_flush() {
    let mut g = guest(BASE_FEATURES | MRG);
    for i in 0..8u16 {
        rx_post(&g, i, BUF_BASE + 0x1000 * u64::from(i), 2048);
    }
    g.set_used_event(&g.rx, 0);
    let hdr = VirtioNetHdr::default();
    g.port.rx_push_deferred(&hdr, &frame(60)).unwrap();
    g.port.rx_push_deferred(&hdr, &frame(70)).unwrap();
    assert_eq!(g.used_idx(&g.rx), 0, "nothing visible before the flush");
    assert_eq!(g.used(&g.rx, 1), (1, 82), "but the elements are written");
    g.port.rx_flush();
    assert_eq!(g.used_idx(&g.rx), 2);
    g.port.rx_flush();
    assert_eq!(g.used_idx(&g.rx), 2);
    // notify_rx publishes, then decides on the interrupt.
    g.port.rx_push_deferred(&hdr, &frame(60)).unwrap();
    g.port.notify_rx().send();
    assert_eq!(g.used_idx(&g.rx), 3);
    assert_eq!(g.irqs(), 1);
    // A frame over several buffers (MRG_RXBUF) moves the index once.
    g.port.rx_push_deferred(&hdr, &frame(3000)).unwrap();
    assert_eq!(g.used_idx(&g.rx), 3);
    g.port.rx_flush();
    assert_eq!(g.used_idx(&g.rx), 5);
    // Stopping the vring publishes what was written.
    g.port.rx_push_deferred(&hdr, &frame(60)).unwrap();
    assert_eq!(g.port.stop_vring(QueueKind::Rx), 6);
    assert_eq!(g.used_idx(&g.rx), 6);
    assert_eq!(g.port.stats().rx_pkts, 5);
}

/// The device reads the available index once per run of chains and trusts
/// what it saw: a guest that winds the index back afterwards (a broken or
/// hostile driver) does not take back chains it already published. The
/// space the port reports must be the space it will use, or a caller that
/// sizes a batch by it is told "no room" and then has frames accepted.
#[test]
fn rx_space_counts_the_chains_already_seen_when_the_guest_winds_back() {
    let mut g = guest(BASE_FEATURES);
    rx_post(&g, 0, BUF_BASE, 2048);
    rx_post(&g, 1, BUF_BASE + 0x1000, 2048);
    let hdr = VirtioNetHdr::default();
    g.port.rx_push(&hdr, &frame(60)).unwrap();
    // The guest moves its index back to where the device is.
    g.mem.write_obj(1u16, g.rx.avail.unchecked_add(2)).unwrap();
    assert_eq!(g.port.rx_space(), 1, "chain 1 was seen published");
    g.port.rx_push(&hdr, &frame(60)).unwrap();
    assert_eq!(g.port.rx_space(), 0);
    assert_eq!(g.port.rx_push(&hdr, &frame(60)), Err(RxError::Full));
    // Far back (more than a ring's worth from the device): no space, and a
    // push is refused and counted, never taken from a stale slot.
    g.mem
        .write_obj(2u16.wrapping_sub(QSIZE + 1), g.rx.avail.unchecked_add(2))
        .unwrap();
    assert_eq!(g.port.rx_space(), 0);
    assert_eq!(g.port.rx_push(&hdr, &frame(60)), Err(RxError::Full));
    assert_eq!(g.port.stats().rx_pkts, 2);
}

/// A dirty log over the test memory in a memfd, and the file to read it.
fn dirty_log() -> (Arc<DirtyLog>, File) {
    // SAFETY: memfd_create with a valid C string; the descriptor is owned
    // by the File.
    let fd = unsafe { libc::memfd_create(c"port-test-log".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor nothing else owns.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(4096).unwrap();
    let log = DirtyLog::map(&f, 4096, 0, MEM_SIZE as u64).unwrap();
    (Arc::new(log), f)
}

/// The pages marked dirty in the log file.
fn dirty_pages(f: &File) -> Vec<u64> {
    use std::os::unix::fs::FileExt;
    let mut b = vec![0u8; 4096];
    f.read_exact_at(&mut b, 0).unwrap();
    (0..b.len() as u64 * 8)
        .filter(|&p| b[(p / 8) as usize] & (1 << (p % 8)) != 0)
        .collect()
}

#[test]
fn writes_into_guest_memory_are_logged_only_while_migrating() {
    let mut g = guest(BASE_FEATURES);
    let (log, f) = dirty_log();
    let page = |a: u64| a / crate::log::LOG_PAGE;
    // Logging off: nothing marked.
    rx_post(&g, 0, BUF_BASE, 2048);
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(300))
        .unwrap();
    assert!(dirty_pages(&f).is_empty());
    assert!(!g.port.logging());

    // On: the RX buffer's pages (a frame across a page boundary) and the
    // used rings, at the log addresses the frontend gave.
    g.port.set_log(Some(log.clone()));
    g.port.set_vring_log_addr(QueueKind::Rx, Some(g.rx.used.0));
    g.port.set_vring_log_addr(QueueKind::Tx, Some(g.tx.used.0));
    assert!(g.port.logging());
    let buf = BUF_BASE + 0x3000 - 100;
    rx_post(&g, 1, buf, 2048);
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(300))
        .unwrap();
    g.desc(g.tx.desc, 0, BUF_BASE + 0x8000, 12 + 60, 0, 0);
    g.offer(&g.tx, 0);
    assert_eq!(g.port.tx_batch(64, |_, _| true), 1);
    let want = {
        let mut w = vec![
            page(buf),
            page(buf + 312 - 1),
            page(g.rx.used.0),
            page(g.tx.used.0),
        ];
        w.sort_unstable();
        w.dedup();
        w
    };
    assert_eq!(dirty_pages(&f), want);
    assert_eq!(log.beyond(), 0);

    // Off again (the frontend drops LOG_ALL): nothing more is marked.
    g.port.set_log(None);
    rx_post(&g, 2, BUF_BASE + 0x9000, 2048);
    g.port
        .rx_push(&VirtioNetHdr::default(), &frame(60))
        .unwrap();
    assert_eq!(dirty_pages(&f), want);
}

#[test]
fn an_announcement_is_one_rarp_from_the_guests_address_once_the_pair_runs() {
    let mac = [0x52, 0x54, 0, 0, 0, 7];
    let f = rarp(mac);
    assert_eq!(&f[0..6], &[0xff; 6], "broadcast");
    assert_eq!(&f[6..12], &mac, "from the guest");
    assert_eq!(&f[12..14], &[0x80, 0x35], "RARP");
    assert_eq!(&f[20..22], &[0, 3], "reverse request");
    assert_eq!(&f[22..28], &mac, "sender hardware address");
    assert_eq!(&f[32..38], &mac, "target hardware address");

    let mut stopped = VirtioNetPort::new(0);
    let g0 = stopped.generation();
    stopped.announce(mac);
    assert!(stopped.generation() > g0, "the worker is told");
    assert_eq!(stopped.take_announce(), None, "not before the pair runs");

    let mut g = guest(BASE_FEATURES);
    g.port.announce(mac);
    assert!(g.port.tx_pending(), "pending work for the worker");
    assert_eq!(g.port.take_announce(), Some(mac));
    assert_eq!(g.port.take_announce(), None, "once");
    assert_eq!(g.port.stats().announces, 1);
}
