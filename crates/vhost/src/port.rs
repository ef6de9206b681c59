//! One virtio-net queue pair, driven by the switch worker that serves it.
//!
//! [`VirtioNetPort`] is the data path: it owns the RX and TX virtqueues of
//! one queue pair (queues `2k` and `2k + 1`), the guest memory mapping and
//! the kick/call eventfds, and it never blocks, sleeps or allocates after
//! construction. The protocol thread ([`crate::VhostUserNet`]) configures it
//! under the same mutex the worker takes once per batch.
//!
//! Who owns what (VIRTIO 1.x, 2.7): the driver owns the descriptor table and
//! the available ring and writes them; the device owns the used ring. This
//! side trusts nothing it reads: the available index may not run more than
//! the queue size ahead, heads and `next` indexes are range-checked, every
//! chain is validated by [`crate::chain::walk`] before a byte is touched.

use std::fs::File;
use std::io::Write;
use std::num::Wrapping;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, Ordering};

use virtio_bindings::virtio_ring::VRING_AVAIL_F_NO_INTERRUPT;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, VolatileSlice};

use crate::chain::{self, Seg, CHAIN_DESCS_MAX};
use crate::hdr::{feature, VirtioNetHdr};

/// Largest queue this device accepts (the split-ring maximum).
pub const QUEUE_SIZE_MAX: u16 = 32_768;
/// Most RX chains one frame may span with MRG_RXBUF (a 64 KiB frame in
/// 1 KiB buffers).
pub const RX_CHAINS_MAX: usize = 72;

/// Which queue of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// The receive queue (device writes, queue `2k`).
    Rx,
    /// The transmit queue (device reads, queue `2k + 1`).
    Tx,
}

/// Why [`VirtioNetPort::rx_push`] did not deliver a frame. The frame is not
/// consumed and no guest buffer was used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RxError {
    /// The queue pair is not running (no memory table, no vrings, disabled).
    #[error("receive queue not running")]
    NotReady,
    /// Not enough guest buffers posted right now.
    #[error("receive queue full")]
    Full,
    /// The frame can never fit: larger than the guest's buffer without
    /// MRG_RXBUF, or than the RX chain bound.
    #[error("frame larger than the guest's receive buffers")]
    TooLarge,
}

/// What a guest accepts on receive (negotiated features).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCaps {
    /// Partial checksums (GUEST_CSUM).
    pub csum: bool,
    /// TCP segmentation offload over IPv4 (GUEST_TSO4).
    pub tso4: bool,
    /// TCP segmentation offload over IPv6 (GUEST_TSO6).
    pub tso6: bool,
    /// Frames over several buffers (MRG_RXBUF).
    pub mrg: bool,
}

/// Counters of one queue pair. Plain integers: they live under the port
/// mutex with the rest of the state, and a reader takes a copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames taken from the guest's TX queue and handed to the switch.
    pub tx_pkts: u64,
    /// Their bytes, headers excluded.
    pub tx_bytes: u64,
    /// TX chains refused by validation, completed with length 0.
    pub tx_bad_chains: u64,
    /// Frames written into guest RX buffers.
    pub rx_pkts: u64,
    /// Their bytes, headers excluded.
    pub rx_bytes: u64,
    /// RX chains refused by validation, completed with length 0.
    pub rx_bad_chains: u64,
    /// Frames refused for lack of posted RX buffers.
    pub rx_full: u64,
    /// Frames refused as larger than the guest can ever take.
    pub rx_too_large: u64,
    /// Available rings whose index ran more than the queue size ahead, or
    /// ring memory that could not be read or written.
    pub ring_errors: u64,
    /// Interrupts sent to the guest (call eventfd writes).
    pub interrupts: u64,
}

/// One virtqueue: virtio-queue's `Queue` holds the addresses, size, indexes
/// and the EVENT_IDX flag; the rest is vhost-user state.
#[derive(Debug)]
struct Vring {
    queue: Queue,
    kick: Option<File>,
    call: Option<File>,
    /// SET_VRING_ENABLE (or enabled from the start without PROTOCOL_FEATURES).
    enabled: bool,
    /// SET_VRING_KICK arrived and the rings lie inside guest memory.
    started: bool,
    /// Used entries published since the last interrupt decision.
    unsignalled: u16,
    /// The available index last read from the guest, so a batch reads it once.
    avail_cached: Wrapping<u16>,
}

impl Vring {
    fn new() -> Self {
        Vring {
            // QUEUE_SIZE_MAX is a power of two: `new` cannot fail.
            queue: Queue::new(QUEUE_SIZE_MAX).expect("QUEUE_SIZE_MAX is a valid queue size"),
            kick: None,
            call: None,
            enabled: false,
            started: false,
            unsignalled: 0,
            avail_cached: Wrapping(0),
        }
    }

    fn running(&self) -> bool {
        self.enabled && self.started
    }

    fn size(&self) -> u16 {
        self.queue.size()
    }
}

/// A frame the guest transmitted, still in guest memory: the segments after
/// the virtio-net header. Valid only during the [`VirtioNetPort::tx_batch`]
/// callback; the chain is completed after it returns.
///
/// Guest memory is not handed out as `&[u8]`: the guest can write it at any
/// time, and a Rust shared reference promises the bytes do not change. The
/// bytes are reached through copies ([`TxFrame::copy_to`]) or
/// [`VolatileSlice`]s ([`TxFrame::slices`]), as rust-vmm does.
pub struct TxFrame<'a> {
    mem: &'a GuestMemoryMmap,
    segs: &'a [Seg],
    /// Bytes of the first segments taken by the virtio-net header.
    skip: usize,
    len: usize,
}

impl<'a> TxFrame<'a> {
    /// Frame length in bytes, virtio-net header excluded.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Is the frame empty? (Never: empty frames are refused as bad chains.)
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies frame bytes from `offset` into `dst`; returns how many were
    /// copied (`min(dst.len(), len - offset)`).
    pub fn copy_range_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        let mut skip = self.skip + offset;
        let mut done = 0;
        for seg in self.segs {
            if done == dst.len() {
                break;
            }
            let seg_len = seg.len as usize;
            if skip >= seg_len {
                skip -= seg_len;
                continue;
            }
            let n = (seg_len - skip).min(dst.len() - done);
            // Validated by chain::walk: inside one region, so this cannot fail.
            if self
                .mem
                .read_slice(
                    &mut dst[done..done + n],
                    seg.addr.unchecked_add(skip as u64),
                )
                .is_err()
            {
                break;
            }
            done += n;
            skip = 0;
        }
        done
    }

    /// Copies the frame's first bytes into `dst`; see [`TxFrame::copy_range_to`].
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        self.copy_range_to(0, dst)
    }

    /// The frame as volatile slices of guest memory, header excluded, for a
    /// caller that copies straight into another guest's buffers.
    pub fn slices(&self) -> impl Iterator<Item = VolatileSlice<'a, ()>> + '_ {
        let mut skip = self.skip;
        self.segs.iter().filter_map(move |seg| {
            let seg_len = seg.len as usize;
            if skip >= seg_len {
                skip -= seg_len;
                return None;
            }
            let s = self
                .mem
                .get_slice(seg.addr.unchecked_add(skip as u64), seg_len - skip)
                .ok();
            skip = 0;
            s
        })
    }
}

/// The data path of one virtio-net queue pair. See the module documentation.
#[derive(Debug)]
pub struct VirtioNetPort {
    pair: u16,
    mem: Option<GuestMemoryMmap>,
    rx: Vring,
    tx: Vring,
    features: u64,
    hdr_len: usize,
    generation: u64,
    stats: PortStats,
    /// Scratch for one chain's buffers, capacity CHAIN_DESCS_MAX.
    segs: Vec<Seg>,
    /// Scratch for the buffers of every chain one RX frame spans.
    rx_segs: Vec<Seg>,
    /// Scratch for those chains: head index, capacity in bytes.
    rx_chains: Vec<(u16, u32)>,
}

impl VirtioNetPort {
    /// A stopped queue pair number `pair`. All scratch space is allocated here.
    pub fn new(pair: u16) -> Self {
        VirtioNetPort {
            pair,
            mem: None,
            rx: Vring::new(),
            tx: Vring::new(),
            features: 0,
            hdr_len: VirtioNetHdr::LEN_LEGACY,
            generation: 0,
            stats: PortStats::default(),
            segs: Vec::with_capacity(CHAIN_DESCS_MAX),
            rx_segs: Vec::with_capacity(CHAIN_DESCS_MAX * 2),
            rx_chains: Vec::with_capacity(RX_CHAINS_MAX),
        }
    }

    // ---- control side (called by the protocol handler, or by tests) ----

    /// The queue pair number.
    pub fn pair(&self) -> u16 {
        self.pair
    }

    /// Replaces the guest memory (SET_MEM_TABLE). Running vrings are checked
    /// again against the new memory and stopped if they no longer fit.
    pub fn set_memory(&mut self, mem: Option<GuestMemoryMmap>) {
        self.mem = mem;
        for kind in [QueueKind::Rx, QueueKind::Tx] {
            let ok = match (&self.mem, self.vring(kind).started) {
                (Some(mem), true) => self.vring(kind).queue.is_valid(mem),
                _ => false,
            };
            self.vring_mut(kind).started = ok;
        }
        self.generation += 1;
    }

    /// Sets the negotiated feature bits (SET_FEATURES).
    pub fn set_features(&mut self, features: u64) {
        self.features = features;
        self.hdr_len = if feature::has(features, feature::VIRTIO_F_VERSION_1)
            || feature::has(features, feature::VIRTIO_NET_F_MRG_RXBUF)
        {
            VirtioNetHdr::LEN
        } else {
            VirtioNetHdr::LEN_LEGACY
        };
        let event_idx = feature::has(features, feature::VIRTIO_RING_F_EVENT_IDX);
        self.rx.queue.set_event_idx(event_idx);
        self.tx.queue.set_event_idx(event_idx);
    }

    /// The negotiated feature bits.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// SET_VRING_NUM: `size` must be a power of two up to [`QUEUE_SIZE_MAX`].
    pub fn set_vring_size(&mut self, kind: QueueKind, size: u16) -> bool {
        if size == 0 || !size.is_power_of_two() || size > QUEUE_SIZE_MAX {
            return false;
        }
        self.vring_mut(kind).queue.set_size(size);
        true
    }

    /// SET_VRING_ADDR, guest physical addresses.
    pub fn set_vring_addr(&mut self, kind: QueueKind, desc: u64, avail: u64, used: u64) {
        let q = &mut self.vring_mut(kind).queue;
        q.set_desc_table_address(Some(desc as u32), Some((desc >> 32) as u32));
        q.set_avail_ring_address(Some(avail as u32), Some((avail >> 32) as u32));
        q.set_used_ring_address(Some(used as u32), Some((used >> 32) as u32));
    }

    /// SET_VRING_BASE: where the device resumes in the available ring.
    pub fn set_vring_base(&mut self, kind: QueueKind, base: u16) {
        let v = self.vring_mut(kind);
        v.queue.set_next_avail(base);
        v.queue.set_next_used(base);
        v.avail_cached = Wrapping(base);
    }

    /// SET_VRING_ENABLE.
    pub fn set_vring_enabled(&mut self, kind: QueueKind, enabled: bool) {
        self.vring_mut(kind).enabled = enabled;
        self.generation += 1;
    }

    /// SET_VRING_CALL: the eventfd that interrupts the guest (None: polling).
    pub fn set_vring_call(&mut self, kind: QueueKind, call: Option<File>) {
        self.vring_mut(kind).call = call;
    }

    /// SET_VRING_KICK: the kick eventfd, which also starts the vring. Returns
    /// false (and leaves it stopped) if its rings are not inside guest memory.
    pub fn start_vring(&mut self, kind: QueueKind, kick: Option<File>) -> bool {
        let Some(mem) = self.mem.clone() else {
            return false;
        };
        let v = self.vring_mut(kind);
        v.kick = kick;
        v.queue.set_ready(true);
        v.started = v.queue.is_valid(&mem);
        v.queue.set_ready(v.started);
        v.unsignalled = 0;
        v.avail_cached = Wrapping(v.queue.next_avail());
        let started = v.started;
        self.generation += 1;
        started
    }

    /// GET_VRING_BASE: stops the vring, drops its eventfds, returns the
    /// next available index for the frontend to resume from.
    pub fn stop_vring(&mut self, kind: QueueKind) -> u16 {
        let v = self.vring_mut(kind);
        v.started = false;
        v.queue.set_ready(false);
        v.kick = None;
        v.call = None;
        let base = v.queue.next_avail();
        self.generation += 1;
        base
    }

    /// Forgets everything (frontend disconnected, RESET_OWNER).
    pub fn reset(&mut self) {
        let pair = self.pair;
        let generation = self.generation + 1;
        let stats = self.stats;
        *self = VirtioNetPort::new(pair);
        self.generation = generation;
        self.stats = stats;
    }

    // ---- data side (called by the switch worker) ----

    /// Bumped whenever vrings start, stop, are enabled or disabled, or the
    /// memory changes: a worker that cached [`VirtioNetPort::tx_kick_fd`]
    /// registers it again when this moves.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Are both queues running (memory, addresses, kick, enabled)?
    pub fn is_running(&self) -> bool {
        self.mem.is_some() && self.rx.running() && self.tx.running()
    }

    /// The TX queue's kick eventfd, for the worker's epoll set. Readable when
    /// the guest kicked; the worker drains it with [`VirtioNetPort::drain_tx_kick`].
    pub fn tx_kick_fd(&self) -> Option<BorrowedFd<'_>> {
        self.tx.kick.as_ref().map(|f| f.as_fd())
    }

    /// Reads the TX kick eventfd's counter, so a level-triggered epoll stops
    /// reporting it. Call only when epoll said it is readable (the fd may be
    /// blocking).
    pub fn drain_tx_kick(&mut self) {
        if let Some(kick) = &self.tx.kick {
            let mut buf = [0u8; 8];
            let _ = std::io::Read::read(&mut &*kick, &mut buf);
        }
    }

    /// A copy of the counters.
    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// The virtio-net header length in use (12, or 10 for legacy drivers).
    pub fn hdr_len(&self) -> usize {
        self.hdr_len
    }

    /// Drains up to `max` frames from the guest's TX queue (bounded also by
    /// the queue size), calling `f` once per valid frame with the frame and
    /// its virtio-net header, and completes every chain taken (bad ones with
    /// length 0, counted). `f` returns false to end the batch after this
    /// frame (the caller's space ran out). The used index is published once,
    /// at the end. Returns the number of chains taken; 0 when idle or not
    /// running.
    pub fn tx_batch(
        &mut self,
        max: usize,
        mut f: impl FnMut(&TxFrame<'_>, &VirtioNetHdr) -> bool,
    ) -> usize {
        if !self.tx.running() {
            return 0;
        }
        let Some(mem) = self.mem.as_ref() else {
            return 0;
        };
        let max = max.min(usize::from(self.tx.size()));
        let indirect = feature::has(self.features, feature::VIRTIO_RING_F_INDIRECT_DESC);
        let hdr_len = self.hdr_len;
        let table = GuestAddress(self.tx.queue.desc_table());
        let mut taken = 0;
        let mut more = true;
        while more && taken < max {
            let head = match pop_head(&mut self.tx, mem) {
                Ok(Some(head)) => head,
                Ok(None) => break,
                Err(()) => {
                    self.stats.ring_errors += 1;
                    break;
                }
            };
            taken += 1;
            let walked = chain::walk(
                mem,
                table,
                self.tx.size(),
                head,
                indirect,
                false,
                &mut self.segs,
            );
            match walked {
                Ok(total) if total as usize > hdr_len => {
                    let mut hdr = VirtioNetHdr::default();
                    let frame = TxFrame {
                        mem,
                        segs: &self.segs,
                        skip: 0,
                        len: total as usize,
                    };
                    let hdr_bytes = &mut vm_memory::ByteValued::as_mut_slice(&mut hdr)[..hdr_len];
                    frame.copy_to(hdr_bytes);
                    let frame = TxFrame {
                        skip: hdr_len,
                        len: total as usize - hdr_len,
                        ..frame
                    };
                    more = f(&frame, &hdr);
                    self.stats.tx_pkts += 1;
                    self.stats.tx_bytes += frame.len as u64;
                }
                Ok(_) | Err(_) => self.stats.tx_bad_chains += 1,
            }
            // TX: the device writes nothing, so every used length is 0.
            if write_used(&mut self.tx, mem, head, 0).is_err() {
                self.stats.ring_errors += 1;
            }
        }
        if taken > 0 && publish_used(&self.tx, mem).is_err() {
            self.stats.ring_errors += 1;
        }
        taken
    }

    /// Has the guest queued TX chains the device has not taken yet? One
    /// read of the available index; false when not running.
    pub fn tx_pending(&self) -> bool {
        if !self.tx.running() {
            return false;
        }
        let Some(mem) = self.mem.as_ref() else {
            return false;
        };
        read_avail_idx(&self.tx, mem).is_some_and(|i| i.0 != self.tx.queue.next_avail())
    }

    /// What the guest accepts on receive, from the negotiated features.
    pub fn rx_caps(&self) -> RxCaps {
        let f = self.features;
        RxCaps {
            csum: feature::has(f, feature::VIRTIO_NET_F_GUEST_CSUM),
            tso4: feature::has(f, feature::VIRTIO_NET_F_GUEST_TSO4),
            tso6: feature::has(f, feature::VIRTIO_NET_F_GUEST_TSO6),
            mrg: feature::has(f, feature::VIRTIO_NET_F_MRG_RXBUF),
        }
    }

    /// RX chains the guest has posted and the device has not used yet. With
    /// MRG_RXBUF a frame may take several.
    pub fn rx_space(&self) -> usize {
        if !self.rx.running() {
            return 0;
        }
        let Some(mem) = self.mem.as_ref() else {
            return 0;
        };
        match read_avail_idx(&self.rx, mem) {
            Some(idx) => {
                let n = (idx - Wrapping(self.rx.queue.next_avail())).0;
                if n > self.rx.size() {
                    0
                } else {
                    usize::from(n)
                }
            }
            None => 0,
        }
    }

    /// Copies `frame` with header `hdr` into the guest's RX buffers: one
    /// chain, or with MRG_RXBUF as many as it takes (`num_buffers` is set
    /// here). The used index moves once, after every buffer is written, so
    /// the guest never sees part of a frame. Bad chains met on the way are
    /// completed with length 0 and counted. The guest is not interrupted:
    /// call [`VirtioNetPort::notify_rx`] once per batch.
    pub fn rx_push(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<(), RxError> {
        if !self.rx.running() {
            return Err(RxError::NotReady);
        }
        let Some(mem) = self.mem.as_ref() else {
            return Err(RxError::NotReady);
        };
        let mrg = feature::has(self.features, feature::VIRTIO_NET_F_MRG_RXBUF);
        let indirect = feature::has(self.features, feature::VIRTIO_RING_F_INDIRECT_DESC);
        let hdr_len = self.hdr_len;
        let need = (hdr_len + frame.len()) as u64;
        if need > chain::CHAIN_BYTES_MAX * if mrg { RX_CHAINS_MAX as u64 } else { 1 } {
            self.stats.rx_too_large += 1;
            return Err(RxError::TooLarge);
        }
        let table = GuestAddress(self.rx.queue.desc_table());
        self.rx_chains.clear();
        self.rx_segs.clear();
        // Where to come back to if the frame does not fit: just after the
        // last chain completed as bad, which must stay completed.
        let mut rollback = self.rx.queue.next_avail();
        let mut bad_published = false;
        let mut cap: u64 = 0;
        while cap < need {
            if !self.rx_chains.is_empty() && (!mrg || self.rx_chains.len() == RX_CHAINS_MAX) {
                self.rx.queue.set_next_avail(rollback);
                self.stats.rx_too_large += 1;
                return self.rx_finish(bad_published, Err(RxError::TooLarge));
            }
            let head = match pop_head(&mut self.rx, mem) {
                Ok(Some(head)) => head,
                Ok(None) => {
                    self.rx.queue.set_next_avail(rollback);
                    self.stats.rx_full += 1;
                    return self.rx_finish(bad_published, Err(RxError::Full));
                }
                Err(()) => {
                    self.rx.queue.set_next_avail(rollback);
                    self.stats.ring_errors += 1;
                    return self.rx_finish(bad_published, Err(RxError::Full));
                }
            };
            let mem = self.mem.as_ref().expect("checked above");
            match chain::walk(
                mem,
                table,
                self.rx.size(),
                head,
                indirect,
                true,
                &mut self.segs,
            ) {
                // The first chain must hold at least the header.
                Ok(len) if !(self.rx_chains.is_empty() && len < hdr_len as u64) => {
                    if self.rx_segs.len() + self.segs.len() > self.rx_segs.capacity() {
                        self.rx.queue.set_next_avail(rollback);
                        self.stats.rx_too_large += 1;
                        return self.rx_finish(bad_published, Err(RxError::TooLarge));
                    }
                    self.rx_segs.extend_from_slice(&self.segs);
                    // len <= CHAIN_BYTES_MAX < u32::MAX.
                    self.rx_chains.push((head, len as u32));
                    cap += len;
                }
                _ => {
                    // A bad chain (or a first one too short for the
                    // header): complete it with 0. Chains gathered before it
                    // are given back as 0 too, so the rollback point can move
                    // past all of them without losing any.
                    self.stats.rx_bad_chains += 1;
                    let mut failed = write_used(&mut self.rx, mem, head, 0).is_err();
                    for &(h, _) in &self.rx_chains {
                        failed |= write_used(&mut self.rx, mem, h, 0).is_err();
                    }
                    if failed {
                        self.stats.ring_errors += 1;
                    }
                    self.rx_chains.clear();
                    self.rx_segs.clear();
                    cap = 0;
                    bad_published = true;
                    rollback = self.rx.queue.next_avail();
                }
            }
        }
        let mem = self.mem.as_ref().expect("checked above");
        let mut h = *hdr;
        h.num_buffers = if mrg {
            // rx_chains.len() <= RX_CHAINS_MAX.
            (self.rx_chains.len() as u16).to_le()
        } else {
            0
        };
        let hdr_bytes = &vm_memory::ByteValued::as_slice(&h)[..hdr_len];
        let ok = write_segs(mem, &self.rx_segs, 0, hdr_bytes)
            && write_segs(mem, &self.rx_segs, hdr_len, frame);
        let mut left = need;
        let mut failed = !ok;
        for i in 0..self.rx_chains.len() {
            let (head, chain_cap) = self.rx_chains[i];
            let used = left.min(u64::from(chain_cap));
            left -= used;
            failed |= write_used(&mut self.rx, mem, head, used as u32).is_err();
        }
        if failed || publish_used(&self.rx, mem).is_err() {
            self.stats.ring_errors += 1;
        }
        self.stats.rx_pkts += 1;
        self.stats.rx_bytes += frame.len() as u64;
        Ok(())
    }

    /// Publishes bad chains completed during a failed [`VirtioNetPort::rx_push`].
    fn rx_finish(&mut self, bad_published: bool, r: Result<(), RxError>) -> Result<(), RxError> {
        if bad_published {
            let mem = self.mem.as_ref().expect("rx_push checked memory");
            if publish_used(&self.rx, mem).is_err() {
                self.stats.ring_errors += 1;
            }
        }
        r
    }

    /// Interrupts the guest for RX if it wants one (EVENT_IDX: only when the
    /// used index crossed its `used_event`; otherwise unless it set
    /// NO_INTERRUPT). Call once per batch.
    pub fn notify_rx(&mut self) {
        self.notify(QueueKind::Rx);
    }

    /// Interrupts the guest for completed TX chains if it wants one.
    pub fn notify_tx_done(&mut self) {
        self.notify(QueueKind::Tx);
    }

    /// Asks the guest to kick on new TX work (before the worker sleeps) and
    /// double-checks: returns true if work arrived meanwhile, in which case
    /// the worker must drain again instead of sleeping.
    pub fn enable_tx_notifications(&mut self) -> bool {
        let Some(mem) = self.mem.as_ref() else {
            return false;
        };
        if !self.tx.running() {
            return false;
        }
        // virtio-queue writes avail_event (EVENT_IDX) or clears
        // VRING_USED_F_NO_NOTIFY, then a SeqCst fence, then re-reads the
        // available index. The fence pairs with the driver's full barrier
        // between publishing its available index and reading avail_event /
        // the used flags: either the driver sees our request and kicks, or
        // we see its new entries here.
        match self.tx.queue.enable_notification(mem) {
            Ok(more) => more,
            Err(_) => {
                self.stats.ring_errors += 1;
                false
            }
        }
    }

    /// Tells the guest not to kick while the worker is busy. With EVENT_IDX
    /// this writes nothing: `avail_event` stays where the last enable put it,
    /// so the guest kicks at most once after that point.
    pub fn disable_tx_notifications(&mut self) {
        let Some(mem) = self.mem.as_ref() else {
            return;
        };
        if self.tx.running() && self.tx.queue.disable_notification(mem).is_err() {
            self.stats.ring_errors += 1;
        }
    }

    fn notify(&mut self, kind: QueueKind) {
        let Some(mem) = self.mem.as_ref() else {
            return;
        };
        let v = match kind {
            QueueKind::Rx => &mut self.rx,
            QueueKind::Tx => &mut self.tx,
        };
        if !v.running() || v.unsignalled == 0 {
            return;
        }
        let wants = match guest_wants_interrupt(v, mem) {
            Some(w) => w,
            None => {
                self.stats.ring_errors += 1;
                true
            }
        };
        v.unsignalled = 0;
        if wants {
            if let Some(call) = &v.call {
                let _ = (&*call).write(&1u64.to_ne_bytes());
                self.stats.interrupts += 1;
            }
        }
    }

    fn vring(&self, kind: QueueKind) -> &Vring {
        match kind {
            QueueKind::Rx => &self.rx,
            QueueKind::Tx => &self.tx,
        }
    }

    fn vring_mut(&mut self, kind: QueueKind) -> &mut Vring {
        match kind {
            QueueKind::Rx => &mut self.rx,
            QueueKind::Tx => &mut self.tx,
        }
    }
}

/// The available index, read with Acquire: pairs with the driver's write
/// barrier between filling a ring entry and publishing the index, so the
/// entries (and the descriptors they name) are visible once the index is.
fn read_avail_idx(v: &Vring, mem: &GuestMemoryMmap) -> Option<Wrapping<u16>> {
    let addr = GuestAddress(v.queue.avail_ring()).checked_add(2)?;
    mem.load::<u16>(addr, Ordering::Acquire)
        .ok()
        .map(|i| Wrapping(u16::from_le(i)))
}

/// Takes the next head index from the available ring: Ok(None) when empty,
/// Err if the ring is broken (index more than the queue size ahead, or
/// unreadable). Reads the guest's index only when the cached one is used up.
fn pop_head(v: &mut Vring, mem: &GuestMemoryMmap) -> Result<Option<u16>, ()> {
    let next = Wrapping(v.queue.next_avail());
    if v.avail_cached == next {
        v.avail_cached = read_avail_idx(v, mem).ok_or(())?;
        if (v.avail_cached - next).0 > v.size() {
            // Do not trust it again until the guest rewrites it.
            v.avail_cached = next;
            return Err(());
        }
        if v.avail_cached == next {
            return Ok(None);
        }
    }
    let slot = u64::from(next.0 % v.size());
    let addr = GuestAddress(v.queue.avail_ring())
        .checked_add(4 + 2 * slot)
        .ok_or(())?;
    let head: u16 = mem.read_obj(addr).map_err(|_| ())?;
    v.queue.set_next_avail((next + Wrapping(1)).0);
    Ok(Some(u16::from_le(head)))
}

/// Writes one used element at `next_used` without publishing it.
fn write_used(v: &mut Vring, mem: &GuestMemoryMmap, head: u16, len: u32) -> Result<(), ()> {
    let next = v.queue.next_used();
    let slot = u64::from(next % v.size());
    let addr = GuestAddress(v.queue.used_ring())
        .checked_add(4 + 8 * slot)
        .ok_or(())?;
    let elem = (u64::from(len) << 32 | u64::from(head)).to_le();
    mem.write_obj(elem, addr).map_err(|_| ())?;
    v.queue.set_next_used(next.wrapping_add(1));
    v.unsignalled = v.unsignalled.wrapping_add(1);
    Ok(())
}

/// Publishes every used element written so far: one Release store of the
/// used index, pairing with the driver's read barrier after it reads the
/// index, so it sees the elements (and the RX bytes) written before.
fn publish_used(v: &Vring, mem: &GuestMemoryMmap) -> Result<(), ()> {
    let addr = GuestAddress(v.queue.used_ring()).checked_add(2).ok_or(())?;
    mem.store(v.queue.next_used().to_le(), addr, Ordering::Release)
        .map_err(|_| ())
}

/// Does the guest want an interrupt for the entries published since the
/// last decision? None if its ring could not be read.
fn guest_wants_interrupt(v: &Vring, mem: &GuestMemoryMmap) -> Option<bool> {
    // Pairs with the driver's full barrier between writing used_event (or
    // clearing NO_INTERRUPT) and re-reading the used index before it
    // sleeps: either it sees our new used index, or we see its request.
    fence(Ordering::SeqCst);
    let avail = GuestAddress(v.queue.avail_ring());
    if v.queue.event_idx_enabled() {
        let addr = avail.checked_add(4 + 2 * u64::from(v.size()))?;
        let used_event = Wrapping(u16::from_le(mem.load::<u16>(addr, Ordering::Relaxed).ok()?));
        let new = Wrapping(v.queue.next_used());
        let old = new - Wrapping(v.unsignalled);
        // vring_need_event(): did used_event fall in (old, new]?
        Some((new - used_event - Wrapping(1)) < (new - old))
    } else {
        let flags = u16::from_le(mem.load::<u16>(avail, Ordering::Relaxed).ok()?);
        Some(flags & VRING_AVAIL_F_NO_INTERRUPT as u16 == 0)
    }
}

/// Writes `data` into the buffers `segs` starting `offset` bytes in. False
/// if it did not all fit or memory refused the write.
fn write_segs(mem: &GuestMemoryMmap, segs: &[Seg], offset: usize, data: &[u8]) -> bool {
    let mut skip = offset;
    let mut done = 0;
    for seg in segs {
        if done == data.len() {
            break;
        }
        let seg_len = seg.len as usize;
        if skip >= seg_len {
            skip -= seg_len;
            continue;
        }
        let n = (seg_len - skip).min(data.len() - done);
        if mem
            .write_slice(&data[done..done + n], seg.addr.unchecked_add(skip as u64))
            .is_err()
        {
            return false;
        }
        done += n;
        skip = 0;
    }
    done == data.len()
}

#[cfg(test)]
mod tests;
