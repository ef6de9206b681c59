//! A mock guest driver, for the examples that measure the VM data path
//! (feature `test-support`): guest memory with one queue of descriptors
//! laid out as a DPDK application lays out its mbufs (2 KiB data room,
//! 2368-byte stride), 1024 entries, and the driver's side of that queue
//! (offering chains). It plays no part in the device.
//!
//! The driven queue's rings sit at the start of guest memory and its
//! buffers from 1 MiB. Every chain is one descriptor: writable and
//! [`BUF_LEN`] bytes for RX, or a zeroed header followed by one frame for
//! TX. The guest never wants an interrupt (its `used_event` is far away).

use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use crate::hdr::feature;
use crate::{QueueKind, VirtioNetHdr, VirtioNetPort};

/// Queue size of the driven queue.
pub const QSIZE: u16 = 1024;
/// Bytes per guest buffer (a DPDK mbuf's data room).
pub const BUF_LEN: u32 = 2048;
/// Distance between buffers: a DPDK mbuf pool element (64-byte pool
/// header, 128-byte mbuf, 128-byte headroom, 2048-byte data room).
const BUF_STRIDE: u64 = 2368;
/// Guest memory per VM: rings at 0, buffers from BUF_BASE.
const MEM_SIZE: usize = 4 << 20;
const DESC: u64 = 0x0;
const AVAIL: u64 = DESC + 16 * QSIZE as u64;
const USED: u64 = 0x8000;
const BUF_BASE: u64 = 0x10_0000;
/// `VRING_DESC_F_WRITE`.
const DESC_F_WRITE: u16 = 2;

/// The features the mock driver negotiates: VERSION_1, EVENT_IDX,
/// INDIRECT_DESC and MRG_RXBUF (no offloads).
pub const FEATURES: u64 = (1 << feature::VIRTIO_F_VERSION_1)
    | (1 << feature::VIRTIO_RING_F_EVENT_IDX)
    | (1 << feature::VIRTIO_RING_F_INDIRECT_DESC)
    | (1 << feature::VIRTIO_NET_F_MRG_RXBUF);

/// One guest's memory and the driver's side of its driven queue.
pub struct MockGuest {
    mem: GuestMemoryMmap,
    avail_idx: u16,
}

impl MockGuest {
    /// Guest memory whose driven queue (of kind `kind`) has [`QSIZE`]
    /// descriptors, one buffer each: writable for RX; for TX holding a
    /// zeroed header and `frame`. Nothing is offered yet.
    ///
    /// # Panics
    ///
    /// If the header and `frame` do not fit one [`BUF_LEN`]-byte buffer.
    pub fn new(kind: QueueKind, frame: &[u8]) -> MockGuest {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM_SIZE)]).unwrap();
        let tx_len = u32::try_from(VirtioNetHdr::LEN + frame.len())
            .ok()
            .filter(|&n| n <= BUF_LEN)
            .expect("the frame fits one buffer with the header");
        let (flags, len) = match kind {
            QueueKind::Rx => (DESC_F_WRITE, BUF_LEN),
            QueueKind::Tx => (0u16, tx_len),
        };
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
                mem.write_slice(frame, GuestAddress(buf + VirtioNetHdr::LEN as u64))
                    .unwrap();
            }
        }
        // The guest never wants an interrupt (used_event far away).
        mem.write_obj(0x8000u16, GuestAddress(AVAIL + 4 + 2 * u64::from(QSIZE)))
            .unwrap();
        MockGuest { mem, avail_idx: 0 }
    }

    /// Gives `port` this guest's memory and [`FEATURES`], and sets up both
    /// queues of the pair, enabled, with [`QSIZE`] entries from index 0:
    /// `driven`'s rings at the layout's addresses, the other queue's
    /// `other_rings` bytes further (0: the same rings). Starts neither.
    pub fn set_up(&self, port: &mut VirtioNetPort, driven: QueueKind, other_rings: u64) {
        port.set_memory(Some(self.mem.clone()));
        port.set_features(FEATURES);
        for k in [QueueKind::Rx, QueueKind::Tx] {
            let at = if k == driven { 0 } else { other_rings };
            assert!(port.set_vring_size(k, QSIZE));
            port.set_vring_addr(k, at + DESC, at + AVAIL, at + USED);
            port.set_vring_base(k, 0);
            port.set_vring_enabled(k, true);
        }
    }

    /// Offers `n` more chains: ring entries, then the index. The device
    /// must have consumed everything offered before (descriptors are
    /// reused in turn).
    pub fn offer(&mut self, n: usize) {
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
