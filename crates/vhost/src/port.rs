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
//! chain is validated by `chain::walk` before a byte is touched.
//!
//! Guest memory is reached through host pointers resolved once (module
//! `guest`): the rings when a vring starts (again whenever the memory, ring
//! addresses or size change), buffers through a small region table.

use std::fs::File;
use std::num::Wrapping;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use tracing::{debug, warn};
use virtio_bindings::virtio_ring;
use vm_memory::{GuestMemoryMmap, VolatileSlice};

use crate::chain::{self, Seg, CHAIN_DESCS_MAX};
use crate::fault;
use crate::guest::{spans, GuestMap, GuestMemory, VringMem};
use crate::hdr::{feature, VirtioNetHdr};
use crate::log::DirtyLog;
use crate::notify::{CallFd, FdError, Interrupt, IrqCounters};

const VRING_USED_F_NO_NOTIFY: u16 = crate::flag16(virtio_ring::VRING_USED_F_NO_NOTIFY);
const VRING_AVAIL_F_NO_INTERRUPT: u16 = crate::flag16(virtio_ring::VRING_AVAIL_F_NO_INTERRUPT);

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
    /// RARP announcements sent for the guest on its frontend's request
    /// (VHOST_USER_SEND_RARP, after a migration), counted in `tx_pkts` too.
    pub announces: u64,
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
    /// Available rings whose index ran more than the queue size ahead.
    /// (Ring memory is checked when a vring starts, so its reads and
    /// writes cannot fail.)
    pub ring_errors: u64,
    /// Interrupts sent to the guest (call eventfd writes).
    pub interrupts: u64,
    /// Interrupts dropped because the call eventfd's write would have
    /// blocked (the frontend pushed its counter to the maximum) or failed.
    pub interrupts_dropped: u64,
    /// Times the guest memory faulted under the device (the frontend
    /// shrank the file behind it): the queue pair stopped until the next
    /// frontend.
    pub guest_faults: u64,
}

/// Where the device is in one virtqueue. Kept apart from the ring pointers
/// so the data path can hold both at once.
#[derive(Debug)]
struct Cursor {
    /// Next available-ring entry to take.
    next_avail: Wrapping<u16>,
    /// The available index last read from the guest, so a batch reads it once.
    avail_cached: Wrapping<u16>,
    /// Next used-ring entry to write.
    next_used: Wrapping<u16>,
    /// The used index last stored in guest memory: entries in
    /// `[used_published, next_used)` are written but not yet visible.
    used_published: Wrapping<u16>,
    /// Used entries published since the last interrupt decision.
    unsignalled: u16,
}

impl Cursor {
    /// Gives back the chains taken since `to` (a frame that did not fit).
    /// The cached available index is dropped with them: it was checked
    /// against the position it was read at, and more than a ring's worth
    /// may lie between `to` and it, so it is read (and checked) again.
    fn rewind(&mut self, to: Wrapping<u16>) {
        self.next_avail = to;
        self.avail_cached = to;
    }

    fn at(base: u16) -> Cursor {
        Cursor {
            next_avail: Wrapping(base),
            avail_cached: Wrapping(base),
            next_used: Wrapping(base),
            used_published: Wrapping(base),
            unsignalled: 0,
        }
    }
}

/// One virtqueue: its configuration as the frontend set it, the rings
/// resolved to host pointers while it runs, and the device's indexes.
#[derive(Debug)]
struct Vring {
    /// SET_VRING_NUM (a power of two up to QUEUE_SIZE_MAX).
    size: u16,
    /// SET_VRING_ADDR: guest addresses of the descriptor table, the
    /// available ring and the used ring.
    desc: u64,
    avail: u64,
    used: u64,
    /// VIRTIO_RING_F_EVENT_IDX negotiated.
    event_idx: bool,
    kick: Option<File>,
    call: Option<Arc<CallFd>>,
    /// SET_VRING_ENABLE (or enabled from the start without PROTOCOL_FEATURES).
    enabled: bool,
    /// Some once SET_VRING_KICK arrived and the rings lie inside guest
    /// memory: the rings as host pointers. Resolved again whenever the
    /// memory, the addresses or the size change; None when stopped.
    rings: Option<VringMem>,
    idx: Cursor,
    /// SET_VRING_ADDR's log address of the used ring (VHOST_VRING_F_LOG):
    /// where its writes are logged while the frontend migrates.
    log_addr: Option<u64>,
    /// The dirty log and `log_addr`, while both are set and the frontend
    /// asked for logging (VHOST_F_LOG_ALL): every used ring write is
    /// marked in it.
    log: Option<(Arc<DirtyLog>, u64)>,
}

impl Vring {
    fn new() -> Self {
        Vring {
            size: QUEUE_SIZE_MAX,
            desc: 0,
            avail: 0,
            used: 0,
            event_idx: false,
            kick: None,
            call: None,
            enabled: false,
            rings: None,
            idx: Cursor::at(0),
            log_addr: None,
            log: None,
        }
    }

    /// Logs the whole used ring as written (flags, index, elements,
    /// `avail_event`: a few pages at most, once per batch), when the
    /// frontend is migrating.
    #[inline]
    fn log_used(&self) {
        if let Some((log, addr)) = &self.log {
            log.mark(*addr, 4 + 8 * u64::from(self.size) + 2);
        }
    }

    fn running(&self) -> bool {
        self.enabled && self.rings.is_some()
    }

    /// Resolves the rings against `map`; None (stopped) if there is no
    /// memory or they do not lie inside it. The cached available index
    /// belonged to the old rings: it is read again.
    fn resolve(&mut self, map: Option<&GuestMap>, kind: QueueKind) {
        self.idx.avail_cached = self.idx.next_avail;
        self.rings = map.and_then(|m| {
            m.vring(self.size, self.desc, self.avail, self.used)
                .map_err(|e| {
                    warn!(
                        queue = ?kind,
                        size = self.size,
                        desc = self.desc,
                        avail = self.avail,
                        used = self.used,
                        "vring refused: {e}"
                    );
                })
                .ok()
        });
        if kind == QueueKind::Rx {
            if let Some(rings) = &self.rings {
                // The device never waits for RX buffers (a full queue drops),
                // so it wants no kick when the driver posts some: without
                // EVENT_IDX that is NO_NOTIFY; with it, avail_event is never
                // moved, so the driver kicks once per 65536 entries at most.
                rings.set_used_flags(VRING_USED_F_NO_NOTIFY);
                self.log_used();
            }
        }
    }

    /// Publishes used entries written but not yet visible to the guest.
    fn flush(&mut self) {
        if let Some(rings) = &self.rings {
            if publish_used(rings, &mut self.idx) {
                self.log_used();
            }
        }
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
    /// The memory `segs` were validated against, held only for its borrow:
    /// while the frame lives the memory cannot be replaced, so the
    /// segments' host addresses stay mapped.
    _map: &'a GuestMap,
    /// Made by `chain::walk` against `map`.
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
    #[inline]
    pub fn copy_range_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        let skip = self.skip + offset;
        if let [seg] = self.segs {
            // The usual frame: one buffer, header included.
            let n = (seg.len as usize).saturating_sub(skip).min(dst.len());
            if n > 0 {
                // SAFETY: made by chain::walk against the frame's
                // `_map`, borrowed (so alive and unchanged) for 'a;
                // skip + n <= seg.len.
                unsafe { seg.read(skip, &mut dst[..n]) };
            }
            return n;
        }
        let mut done = 0;
        for (seg, at, part) in spans(self.segs, skip, dst.len()) {
            done = part.end;
            // SAFETY: `seg` was made by chain::walk against the frame's
            // `_map`, which is borrowed (so alive and unchanged) for 'a;
            // and `spans` keeps at + part.len() <= seg.len.
            unsafe { seg.read(at, &mut dst[part]) };
        }
        done
    }

    /// Copies the frame's first bytes into `dst`; see [`TxFrame::copy_range_to`].
    #[inline]
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
            // SAFETY: `seg` was made by chain::walk against the frame's
            // `_map`, borrowed for 'a, so its bytes stay mapped for the
            // slice's lifetime 'a; skip < seg.len.
            let s = unsafe { seg.volatile_slice(skip) };
            skip = 0;
            Some(s)
        })
    }
}

/// The data path of one virtio-net queue pair. See the module documentation.
#[derive(Debug)]
pub struct VirtioNetPort {
    pair: u16,
    /// Guest memory and its region table (None before SET_MEM_TABLE).
    mem: Option<GuestMap>,
    rx: Vring,
    tx: Vring,
    features: u64,
    hdr_len: usize,
    generation: u64,
    stats: PortStats,
    /// Interrupt counters, shared with the call eventfds (signalled after
    /// the lock is released).
    irq: Arc<IrqCounters>,
    /// The guest memory faulted: nothing runs until the frontend resets
    /// the device (it disconnects).
    broken: bool,
    /// `fault::fault_count()` when this pair last looked.
    faults_seen: u64,
    /// Scratch for one chain's buffers, capacity CHAIN_DESCS_MAX.
    segs: Vec<Seg>,
    /// Scratch for the buffers of every chain one RX frame spans.
    rx_segs: Vec<Seg>,
    /// Scratch for those chains: head index, capacity in bytes.
    rx_chains: Vec<(u16, u64)>,
    /// The frontend's dirty log while it migrates the guest (see module
    /// `log`): every RX buffer written is marked in it.
    log: Option<Arc<DirtyLog>>,
    /// A RARP to send for this MAC address before the guest's next frames
    /// (see [`VirtioNetPort::announce`]).
    announce: Option<[u8; 6]>,
}

/// Bytes of a RARP announcement (the Ethernet minimum, without FCS).
pub const RARP_LEN: usize = 60;

/// The RARP a switch port sends for a guest that moved to it, as QEMU's
/// own announcement is made: broadcast, from the guest's address, a
/// reverse request (op 3) naming it as sender and target, so every
/// switch on the way learns where the address is now.
pub fn rarp(mac: [u8; 6]) -> [u8; RARP_LEN] {
    let mut f = [0u8; RARP_LEN];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x8035u16.to_be_bytes());
    // Ethernet hardware, IPv4 protocol, 6- and 4-byte addresses, op 3.
    f[14..22].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 3]);
    f[22..28].copy_from_slice(&mac);
    f[32..38].copy_from_slice(&mac);
    f
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
            irq: Arc::new(IrqCounters::default()),
            broken: false,
            faults_seen: fault::fault_count(),
            segs: Vec::with_capacity(CHAIN_DESCS_MAX),
            rx_segs: Vec::with_capacity(CHAIN_DESCS_MAX * 2),
            rx_chains: Vec::with_capacity(RX_CHAINS_MAX),
            log: None,
            announce: None,
        }
    }

    // ---- control side (called by the protocol handler, or by tests) ----

    /// The queue pair number.
    pub fn pair(&self) -> u16 {
        self.pair
    }

    /// Replaces the guest memory (SET_MEM_TABLE). Running vrings publish
    /// what they completed, are resolved again against the new memory and
    /// stopped if they no longer fit. Memory with more regions than the
    /// device accepts (8) is refused: nothing runs until the next table.
    pub fn set_memory(&mut self, mem: Option<GuestMemoryMmap>) {
        let mem = mem.and_then(|m| {
            GuestMemory::new(m)
                .map_err(|e| warn!(pair = self.pair, "memory table refused: {e}"))
                .ok()
        });
        self.set_guest_memory(mem);
    }

    /// [`VirtioNetPort::set_memory`] with memory already registered with
    /// the fault handler (the device registers a table once for all its
    /// pairs). Refused (nothing runs) while the pair is broken.
    pub fn set_guest_memory(&mut self, mem: Option<GuestMemory>) {
        let mem = mem.filter(|_| !self.broken);
        self.mem = mem.and_then(|m| {
            GuestMap::new(m)
                .map_err(|e| warn!(pair = self.pair, "memory table refused: {e}"))
                .ok()
        });
        for kind in [QueueKind::Rx, QueueKind::Tx] {
            self.resolve_again(kind);
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
        self.rx.event_idx = event_idx;
        self.tx.event_idx = event_idx;
    }

    /// The negotiated feature bits.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// SET_VRING_NUM: `size` must be a power of two up to [`QUEUE_SIZE_MAX`].
    /// A running vring is resolved again (and stopped if it no longer fits).
    pub fn set_vring_size(&mut self, kind: QueueKind, size: u16) -> bool {
        if size == 0 || !size.is_power_of_two() || size > QUEUE_SIZE_MAX {
            return false;
        }
        self.vring_mut(kind).size = size;
        self.reconfigured(kind);
        true
    }

    /// SET_VRING_ADDR, guest physical addresses. A running vring is
    /// resolved again (and stopped if its rings no longer fit).
    pub fn set_vring_addr(&mut self, kind: QueueKind, desc: u64, avail: u64, used: u64) {
        let v = self.vring_mut(kind);
        v.desc = desc;
        v.avail = avail;
        v.used = used;
        self.reconfigured(kind);
    }

    /// SET_VRING_ADDR's used ring log address (VHOST_VRING_F_LOG), or
    /// None when the frontend clears the flag.
    pub fn set_vring_log_addr(&mut self, kind: QueueKind, addr: Option<u64>) {
        self.vring_mut(kind).log_addr = addr;
        self.relog();
    }

    /// The dirty log to mark every write into guest memory in (the
    /// frontend acked VHOST_F_LOG_ALL and gave one), or None: logging off,
    /// which costs the data path one branch per frame and per batch.
    pub fn set_log(&mut self, log: Option<Arc<DirtyLog>>) {
        self.log = log;
        self.relog();
    }

    /// Whether writes are being logged.
    pub fn logging(&self) -> bool {
        self.log.is_some()
    }

    /// Asks for a RARP from `mac` to go into the switch from this port
    /// before the guest's next frames (VHOST_USER_SEND_RARP: the frontend
    /// moved a guest that does not announce itself here). The worker is
    /// told through the generation; a second request before the first is
    /// sent replaces it.
    pub fn announce(&mut self, mac: [u8; 6]) {
        self.announce = Some(mac);
        self.generation += 1;
    }

    /// Puts back an announcement [`VirtioNetPort::take_announce`] gave
    /// that could not be sent now (no room in the batch), uncounting it.
    pub fn unsend_announce(&mut self, mac: [u8; 6]) {
        if self.announce.is_none() {
            self.announce = Some(mac);
        }
        self.stats.announces = self.stats.announces.saturating_sub(1);
        self.stats.tx_pkts = self.stats.tx_pkts.saturating_sub(1);
        self.stats.tx_bytes = self.stats.tx_bytes.saturating_sub(RARP_LEN as u64);
    }

    /// The announcement to send now, if one is pending and the pair runs.
    pub fn take_announce(&mut self) -> Option<[u8; 6]> {
        if !self.is_running() {
            return None;
        }
        let mac = self.announce.take()?;
        self.stats.announces += 1;
        self.stats.tx_pkts += 1;
        self.stats.tx_bytes += RARP_LEN as u64;
        Some(mac)
    }

    /// The vrings' logs from the port's log and their log addresses.
    fn relog(&mut self) {
        for v in [&mut self.rx, &mut self.tx] {
            v.log = self.log.clone().zip(v.log_addr);
        }
    }

    /// SET_VRING_BASE: where the device resumes in the available ring.
    pub fn set_vring_base(&mut self, kind: QueueKind, base: u16) {
        let v = self.vring_mut(kind);
        v.flush();
        v.idx = Cursor::at(base);
    }

    /// SET_VRING_ENABLE.
    pub fn set_vring_enabled(&mut self, kind: QueueKind, enabled: bool) {
        let v = self.vring_mut(kind);
        if !enabled {
            v.flush();
        }
        v.enabled = enabled;
        self.generation += 1;
    }

    /// SET_VRING_CALL: the eventfd that interrupts the guest (None: polling).
    /// Anything but an eventfd is refused (the old one stays); it is made
    /// non-blocking.
    pub fn set_vring_call(&mut self, kind: QueueKind, call: Option<File>) -> Result<(), FdError> {
        let call = match call {
            Some(f) => Some(Arc::new(CallFd::new(f, self.irq.clone())?)),
            None => None,
        };
        self.vring_mut(kind).call = call;
        Ok(())
    }

    /// SET_VRING_KICK: the kick eventfd, which also starts the vring: its
    /// descriptor table, available ring and used ring are resolved to host
    /// pointers, each checked to lie inside one memory region and aligned.
    /// Returns false (and leaves it stopped) if they do not.
    pub fn start_vring(&mut self, kind: QueueKind, kick: Option<File>) -> bool {
        if self.broken {
            return false;
        }
        let Some(map) = self.mem.as_ref() else {
            return false;
        };
        let v = match kind {
            QueueKind::Rx => &mut self.rx,
            QueueKind::Tx => &mut self.tx,
        };
        v.kick = kick;
        v.flush();
        v.resolve(Some(map), kind);
        v.idx.unsignalled = 0;
        v.idx.used_published = v.idx.next_used;
        if let Some(r) = &v.rings {
            debug!(
                pair = self.pair,
                queue = ?kind,
                next_avail = v.idx.next_avail.0,
                used_in_memory = r.used_idx(),
                avail_in_memory = r.avail_idx(),
                "vring started"
            );
        }
        let started = v.rings.is_some();
        self.generation += 1;
        started
    }

    /// GET_VRING_BASE: stops the vring (publishing what it completed),
    /// drops its eventfds, returns the next available index for the
    /// frontend to resume from.
    pub fn stop_vring(&mut self, kind: QueueKind) -> u16 {
        let v = self.vring_mut(kind);
        v.flush();
        let used = v.rings.as_ref().map(VringMem::used_idx);
        v.rings = None;
        v.kick = None;
        v.call = None;
        let base = v.idx.next_avail.0;
        debug!(queue = ?kind, base, used_in_memory = ?used, logged = v.log.is_some(), "vring stopped");
        self.generation += 1;
        base
    }

    /// Forgets everything (frontend disconnected, RESET_OWNER).
    pub fn reset(&mut self) {
        let pair = self.pair;
        let generation = self.generation + 1;
        let stats = self.stats;
        let irq = self.irq.clone();
        *self = VirtioNetPort::new(pair);
        self.generation = generation;
        self.stats = stats;
        self.irq = irq;
    }

    /// Is the pair stopped because its guest memory faulted? It stays so
    /// until [`VirtioNetPort::reset`] (the frontend goes).
    pub fn is_broken(&mut self) -> bool {
        self.check_fault();
        self.broken
    }

    /// Looks whether the guest memory faulted since the last look (one
    /// load when no fault happened anywhere); if it did, the pair stops:
    /// see [`PortStats::guest_faults`].
    fn check_fault(&mut self) {
        let n = fault::fault_count();
        if n == self.faults_seen {
            return;
        }
        self.faults_seen = n;
        let log_faulted = self.log.as_ref().is_some_and(|l| l.faulted());
        if !self.mem.as_ref().is_some_and(GuestMap::faulted) && !log_faulted {
            return;
        }
        // A dirty log shrunk under the device stops the pair as guest
        // memory does: the migration it served cannot be trusted.
        self.log = None;
        self.relog();
        self.stats.guest_faults += 1;
        self.broken = true;
        static LAST_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);
        if crate::log_allowed(&LAST_S) {
            warn!(
                pair = self.pair,
                "guest memory faulted (the frontend shrank the file behind it): queue pair stopped until the frontend reconnects"
            );
        }
        // The rings are not flushed: their memory is gone.
        self.rx.rings = None;
        self.tx.rings = None;
        self.mem = None;
        self.generation += 1;
    }

    /// The size or addresses of vring `kind` changed: a running one is
    /// resolved again, and stopped if it no longer fits.
    fn reconfigured(&mut self, kind: QueueKind) {
        if self.resolve_again(kind) {
            self.generation += 1;
        }
    }

    /// Resolves vring `kind`, if running, again against the current memory
    /// (flushing it first). True if it no longer fits and stopped.
    fn resolve_again(&mut self, kind: QueueKind) -> bool {
        let map = self.mem.as_ref();
        let v = match kind {
            QueueKind::Rx => &mut self.rx,
            QueueKind::Tx => &mut self.tx,
        };
        if v.rings.is_none() {
            return false;
        }
        v.flush();
        v.resolve(map, kind);
        v.rings.is_none()
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

    /// The TX queue's kick eventfd, for the worker's epoll set. Every kick
    /// is an edge (an eventfd wakes its waiters on every write), so a
    /// worker can watch it edge-triggered and never read it: the
    /// frontend shares the descriptor and could make it blocking again.
    pub fn tx_kick_fd(&self) -> Option<BorrowedFd<'_>> {
        self.tx.kick.as_ref().map(|f| f.as_fd())
    }

    /// Reads the TX kick eventfd's counter, so a level-triggered epoll stops
    /// reporting it. The device accepts only eventfds and makes them
    /// non-blocking, so this does not block unless the frontend made its
    /// descriptor blocking again; workers watch the kick edge-triggered
    /// instead (see [`VirtioNetPort::tx_kick_fd`]).
    pub fn drain_tx_kick(&mut self) {
        if let Some(kick) = &self.tx.kick {
            let mut buf = [0u8; 8];
            let _ = std::io::Read::read(&mut &*kick, &mut buf);
        }
    }

    /// A copy of the counters.
    pub fn stats(&self) -> PortStats {
        // Relaxed: counters only; they order nothing.
        PortStats {
            interrupts: self.irq.sent.load(Ordering::Relaxed),
            interrupts_dropped: self.irq.dropped.load(Ordering::Relaxed),
            ..self.stats
        }
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
        let Some(map) = self.mem.as_ref() else {
            return 0;
        };
        let v = &mut self.tx;
        if !v.enabled {
            return 0;
        }
        let Some(rings) = v.rings.as_ref() else {
            return 0;
        };
        let idx = &mut v.idx;
        let stats = &mut self.stats;
        let segs = &mut self.segs;
        let max = max.min(usize::from(rings.size()));
        let indirect = feature::has(self.features, feature::VIRTIO_RING_F_INDIRECT_DESC);
        let hdr_len = self.hdr_len;
        let mut taken = 0;
        let mut more = true;
        while more && taken < max {
            let head = match pop_head(rings, idx) {
                Ok(Some(head)) => head,
                Ok(None) => break,
                Err(()) => {
                    stats.ring_errors += 1;
                    break;
                }
            };
            taken += 1;
            prefetch_ahead(map, rings, idx);
            // At most CHAIN_BYTES_MAX, so it fits a usize.
            let walked = chain::walk(map, rings.desc_table(), head, indirect, false, segs)
                .ok()
                .and_then(|total| usize::try_from(total).ok());
            match walked {
                Some(total) if total > hdr_len => {
                    let mut hdr = VirtioNetHdr::default();
                    let frame = TxFrame {
                        _map: map,
                        segs,
                        skip: 0,
                        len: total,
                    };
                    let hdr_bytes = &mut vm_memory::ByteValued::as_mut_slice(&mut hdr)[..hdr_len];
                    match segs.first() {
                        // SAFETY: made by chain::walk against `map` just
                        // above; `map` is borrowed for this whole call; the
                        // header lies inside this first buffer.
                        Some(seg) if seg.len as usize >= hdr_len => unsafe {
                            seg.read(0, hdr_bytes)
                        },
                        _ => {
                            frame.copy_to(hdr_bytes);
                        }
                    }
                    let frame = TxFrame {
                        skip: hdr_len,
                        len: total - hdr_len,
                        ..frame
                    };
                    more = f(&frame, &hdr);
                    stats.tx_pkts += 1;
                    stats.tx_bytes += frame.len as u64;
                }
                _ => stats.tx_bad_chains += 1,
            }
            // TX: the device writes nothing, so every used length is 0.
            write_used(rings, idx, head, 0);
        }
        if publish_used(rings, idx) {
            v.log_used();
        }
        self.check_fault();
        taken
    }

    /// Has the guest queued TX chains the device has not taken yet? One
    /// read of the available index (none while chains already seen
    /// published are left, as for [`VirtioNetPort::rx_space`]); false when
    /// not running.
    pub fn tx_pending(&self) -> bool {
        let idx = &self.tx.idx;
        match running_rings(&self.mem, &self.tx) {
            Some(rings) => {
                self.announce.is_some()
                    || idx.avail_cached != idx.next_avail
                    || Wrapping(rings.avail_idx()) != idx.next_avail
            }
            None => false,
        }
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
    ///
    /// Counted as [`VirtioNetPort::rx_push`] will take them: chains the
    /// device has already seen published come first, whatever the guest
    /// has since written to its index (a driver may not take back what it
    /// offered); only when those are used is the index read again.
    pub fn rx_space(&self) -> usize {
        let Some(rings) = running_rings(&self.mem, &self.rx) else {
            return 0;
        };
        let idx = &self.rx.idx;
        let seen = (idx.avail_cached - idx.next_avail).0;
        if seen != 0 {
            return usize::from(seen);
        }
        let n = (Wrapping(rings.avail_idx()) - idx.next_avail).0;
        if n > rings.size() {
            0
        } else {
            usize::from(n)
        }
    }

    /// Copies `frame` with header `hdr` into the guest's RX buffers: one
    /// chain, or with MRG_RXBUF as many as it takes (`num_buffers` is set
    /// here). The used index moves once, after every buffer is written, so
    /// the guest never sees part of a frame. Bad chains met on the way are
    /// completed with length 0 and counted. The guest is not interrupted:
    /// call [`VirtioNetPort::notify_rx`] once per batch.
    ///
    /// A worker pushing a batch can save a used-index store (a cache line
    /// the guest polls) per frame with [`VirtioNetPort::rx_push_deferred`]
    /// and one [`VirtioNetPort::rx_flush`] (or `notify_rx`) at the end.
    pub fn rx_push(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<(), RxError> {
        let r = self.rx_push_deferred(hdr, frame);
        self.rx.flush();
        r
    }

    /// As [`VirtioNetPort::rx_push`], but the frame (and any bad chain
    /// completed on the way) is not yet visible to the guest: its used
    /// elements are written, the used index is not moved. Call
    /// [`VirtioNetPort::rx_flush`] or [`VirtioNetPort::notify_rx`] (which
    /// flushes) before the end of the batch, and always before dropping the
    /// port's lock: the guest sees frames only when the index moves. The
    /// index only ever moves to the end of a whole frame, so the guest never
    /// sees part of one (MRG_RXBUF); stopping or reconfiguring the vring
    /// flushes too.
    pub fn rx_push_deferred(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<(), RxError> {
        let Some(map) = self.mem.as_ref() else {
            return Err(RxError::NotReady);
        };
        let v = &mut self.rx;
        if !v.enabled {
            return Err(RxError::NotReady);
        }
        let Some(rings) = v.rings.as_ref() else {
            return Err(RxError::NotReady);
        };
        let idx = &mut v.idx;
        let stats = &mut self.stats;
        let segs = &mut self.segs;
        let rx_segs = &mut self.rx_segs;
        let rx_chains = &mut self.rx_chains;
        let log = self.log.as_deref();
        let mrg = feature::has(self.features, feature::VIRTIO_NET_F_MRG_RXBUF);
        let indirect = feature::has(self.features, feature::VIRTIO_RING_F_INDIRECT_DESC);
        let hdr_len = self.hdr_len;
        let need = (hdr_len + frame.len()) as u64;
        if need > chain::CHAIN_BYTES_MAX * if mrg { RX_CHAINS_MAX as u64 } else { 1 } {
            stats.rx_too_large += 1;
            return Err(RxError::TooLarge);
        }
        rx_chains.clear();
        rx_segs.clear();
        // Where to come back to if the frame does not fit: just after the
        // last chain completed as bad, which must stay completed.
        let mut rollback = idx.next_avail;
        let mut cap: u64 = 0;
        while cap < need {
            if !rx_chains.is_empty() && (!mrg || rx_chains.len() == RX_CHAINS_MAX) {
                idx.rewind(rollback);
                stats.rx_too_large += 1;
                return Err(RxError::TooLarge);
            }
            let head = match pop_head(rings, idx) {
                Ok(Some(head)) => head,
                Ok(None) => {
                    idx.rewind(rollback);
                    stats.rx_full += 1;
                    return Err(RxError::Full);
                }
                Err(()) => {
                    idx.rewind(rollback);
                    stats.ring_errors += 1;
                    return Err(RxError::Full);
                }
            };
            match chain::walk(map, rings.desc_table(), head, indirect, true, segs) {
                // The common case: the frame fits the first chain. Written
                // from `segs` directly, no gathering.
                Ok(len) if rx_chains.is_empty() && len >= need => {
                    let mut h = *hdr;
                    // One buffer; VIRTIO 1.x wants 1 here even without
                    // MRG_RXBUF (the legacy 10-byte header has no field).
                    h.num_buffers = 1u16.to_le();
                    let hdr_bytes = &vm_memory::ByteValued::as_slice(&h)[..hdr_len];
                    // SAFETY: every segment in segs was made by chain::walk
                    // against `map` just above, and `map` is borrowed from
                    // self.mem until the end of this call, so their host
                    // addresses are still mapped.
                    let ok = unsafe { write_frame(segs, hdr_bytes, frame) };
                    if !ok {
                        // Cannot happen: the chain holds `need` bytes.
                        stats.ring_errors += 1;
                    }
                    if let Some(log) = log {
                        log.mark_segs(segs, need);
                    }
                    write_used(rings, idx, head, need);
                    stats.rx_pkts += 1;
                    stats.rx_bytes += frame.len() as u64;
                    return Ok(());
                }
                // The first chain must hold at least the header.
                Ok(len) if !(rx_chains.is_empty() && len < hdr_len as u64) => {
                    if rx_segs.len() + segs.len() > rx_segs.capacity() {
                        idx.rewind(rollback);
                        stats.rx_too_large += 1;
                        return Err(RxError::TooLarge);
                    }
                    rx_segs.extend_from_slice(segs);
                    rx_chains.push((head, len));
                    cap += len;
                }
                _ => {
                    // A bad chain (or a first one too short for the
                    // header): complete it with 0. Chains gathered before it
                    // are given back as 0 too, so the rollback point can move
                    // past all of them without losing any. They become
                    // visible with the next flush.
                    stats.rx_bad_chains += 1;
                    write_used(rings, idx, head, 0);
                    for &(h, _) in rx_chains.iter() {
                        write_used(rings, idx, h, 0);
                    }
                    rx_chains.clear();
                    rx_segs.clear();
                    cap = 0;
                    rollback = idx.next_avail;
                }
            }
        }
        let mut h = *hdr;
        // rx_chains.len() <= RX_CHAINS_MAX (1 without MRG_RXBUF), so the
        // saturation never happens.
        h.num_buffers = u16::try_from(rx_chains.len()).unwrap_or(u16::MAX).to_le();
        let hdr_bytes = &vm_memory::ByteValued::as_slice(&h)[..hdr_len];
        // SAFETY: every segment in rx_segs was made by chain::walk against
        // `map` during this call, and `map` is borrowed from self.mem until
        // the end of it, so their host addresses are still mapped.
        let ok = unsafe { write_frame(rx_segs, hdr_bytes, frame) };
        if !ok {
            // Cannot happen: the chains hold `need` bytes.
            stats.ring_errors += 1;
        }
        if let Some(log) = log {
            log.mark_segs(rx_segs, need);
        }
        let mut left = need;
        for &(head, chain_cap) in rx_chains.iter() {
            let used = left.min(chain_cap);
            left -= used;
            write_used(rings, idx, head, used);
        }
        stats.rx_pkts += 1;
        stats.rx_bytes += frame.len() as u64;
        Ok(())
    }

    /// Makes every frame written by [`VirtioNetPort::rx_push_deferred`]
    /// since the last flush visible to the guest: one Release store of the
    /// used index. Does nothing when there is nothing new. Does not
    /// interrupt the guest: [`VirtioNetPort::notify_rx`] does both.
    pub fn rx_flush(&mut self) {
        self.rx.flush();
        self.check_fault();
    }

    /// Publishes pending RX frames ([`VirtioNetPort::rx_flush`]), then
    /// interrupts the guest for RX if it wants one (EVENT_IDX: only when the
    /// used index crossed its `used_event`; otherwise unless it set
    /// NO_INTERRUPT). Call once per batch. The interrupt is returned, to
    /// be sent after the pair's lock is released.
    pub fn notify_rx(&mut self) -> Interrupt {
        self.rx.flush();
        self.notify(QueueKind::Rx)
    }

    /// Decides whether the guest wants an interrupt for completed TX
    /// chains; send the one returned after releasing the pair's lock.
    pub fn notify_tx_done(&mut self) -> Interrupt {
        self.notify(QueueKind::Tx)
    }

    /// Asks the guest to kick on new TX work (before the worker sleeps) and
    /// double-checks: returns true if work arrived meanwhile, in which case
    /// the worker must drain again instead of sleeping.
    pub fn enable_tx_notifications(&mut self) -> bool {
        self.enable_tx_notifications_after(0)
    }

    /// Like [`VirtioNetPort::enable_tx_notifications`], but with EVENT_IDX
    /// asks the guest to kick only once `more + 1` entries are pending, so a
    /// guest streaming small bursts wakes the worker once per larger batch
    /// (interrupt moderation, for a worker that shares its CPU with the
    /// sender). The guest may post fewer and stop: the caller must then
    /// look again after a timeout. Returns true when that many entries are
    /// already pending (work now). Without EVENT_IDX, `more` is ignored.
    pub fn enable_tx_notifications_after(&mut self, more: u16) -> bool {
        self.check_fault();
        let Some(rings) = running_rings(&self.mem, &self.tx) else {
            return false;
        };
        let next_avail = self.tx.idx.next_avail;
        // With EVENT_IDX, ask for a kick when the entry `more` after the
        // last one taken is posted (counted from next_avail, not from the
        // current available index, so entries posted meanwhile are caught
        // by the check below); without, clear VRING_USED_F_NO_NOTIFY.
        let more = if self.tx.event_idx {
            let more = more.min(rings.size() / 2);
            rings.set_avail_event((next_avail + Wrapping(more)).0);
            more
        } else {
            rings.set_used_flags(0);
            0
        };
        self.tx.log_used();
        // Pairs with the driver's full barrier between publishing its
        // available index and reading avail_event / the used flags: either
        // the driver sees our request and kicks, or we see its new entries
        // here.
        fence(Ordering::SeqCst);
        // An index more than a queue ahead is broken: not work. The worker
        // sleeps until the guest kicks again, instead of spinning on it.
        let ahead = (Wrapping(rings.avail_idx()) - next_avail).0;
        ahead > more && ahead <= rings.size()
    }

    /// Tells the guest not to kick while the worker is busy. With EVENT_IDX
    /// this writes nothing: `avail_event` stays where the last enable put it,
    /// so the guest kicks at most once after that point.
    pub fn disable_tx_notifications(&mut self) {
        if let Some(rings) = running_rings(&self.mem, &self.tx) {
            if !self.tx.event_idx {
                rings.set_used_flags(VRING_USED_F_NO_NOTIFY);
                self.tx.log_used();
            }
        }
    }

    fn notify(&mut self, kind: QueueKind) -> Interrupt {
        self.check_fault();
        if self.mem.is_none() {
            return Interrupt::NONE;
        }
        let v = match kind {
            QueueKind::Rx => &mut self.rx,
            QueueKind::Tx => &mut self.tx,
        };
        if !v.enabled || v.idx.unsignalled == 0 {
            return Interrupt::NONE;
        }
        let Some(rings) = v.rings.as_ref() else {
            return Interrupt::NONE;
        };
        let wants = guest_wants_interrupt(rings, &v.idx, v.event_idx);
        v.idx.unsignalled = 0;
        match &v.call {
            Some(call) if wants => Interrupt::to(call),
            _ => Interrupt::NONE,
        }
    }

    fn vring_mut(&mut self, kind: QueueKind) -> &mut Vring {
        match kind {
            QueueKind::Rx => &mut self.rx,
            QueueKind::Tx => &mut self.tx,
        }
    }
}

/// The rings of `v` if it runs with memory present.
fn running_rings<'a>(mem: &Option<GuestMap>, v: &'a Vring) -> Option<&'a VringMem> {
    if mem.is_none() || !v.enabled {
        return None;
    }
    v.rings.as_ref()
}

/// Takes the next head index from the available ring: Ok(None) when empty,
/// Err if the ring is broken (index more than the queue size ahead). Reads
/// the guest's index (Acquire, see `VringMem::avail_idx`) only when the
/// cached one is used up.
#[inline]
fn pop_head(rings: &VringMem, idx: &mut Cursor) -> Result<Option<u16>, ()> {
    let next = idx.next_avail;
    if idx.avail_cached == next {
        idx.avail_cached = Wrapping(rings.avail_idx());
        if (idx.avail_cached - next).0 > rings.size() {
            // Do not trust it again until the guest rewrites it.
            idx.avail_cached = next;
            return Err(());
        }
        if idx.avail_cached == next {
            return Ok(None);
        }
    }
    let head = rings.avail_entry(next.0);
    idx.next_avail = next + Wrapping(1);
    Ok(Some(head))
}

/// How far ahead of the chain being taken the buffers are fetched into the
/// cache (descriptors twice as far): guest buffers are usually cold (a
/// driver cycles through megabytes of them), and a miss per descriptor and
/// per buffer would otherwise be paid one after the other.
const PREFETCH_AHEAD: u16 = 4;

/// Hints the CPU to fetch the descriptor of the chain `2 * PREFETCH_AHEAD`
/// entries ahead and the first buffer of the one `PREFETCH_AHEAD` ahead, as
/// far as the guest has published (the cached available index). Reads only
/// what is validated anyway: the head index and descriptor go through the
/// same range checks, and nothing read here is used beyond the hint.
#[inline(always)]
fn prefetch_ahead(map: &GuestMap, rings: &VringMem, idx: &Cursor) {
    let published = (idx.avail_cached - idx.next_avail).0;
    let table = rings.desc_table();
    if published > 2 * PREFETCH_AHEAD {
        let head = rings.avail_entry((idx.next_avail + Wrapping(2 * PREFETCH_AHEAD)).0);
        table.prefetch(head);
    }
    if published > PREFETCH_AHEAD {
        let head = rings.avail_entry((idx.next_avail + Wrapping(PREFETCH_AHEAD)).0);
        if let Some(d) = table.get(head) {
            if let Some(seg) = map.seg(d.addr, d.len.min(128)) {
                seg.prefetch();
            }
        }
    }
}

/// Writes one used element at `next_used` without publishing it. `len` is
/// at most a chain's bytes (CHAIN_BYTES_MAX), so the saturation to the
/// used element's u32 never happens.
#[inline]
fn write_used(rings: &VringMem, idx: &mut Cursor, head: u16, len: u64) {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    rings.set_used_elem(idx.next_used.0, u32::from(head), len);
    idx.next_used += Wrapping(1);
    idx.unsignalled = idx.unsignalled.wrapping_add(1);
}

/// Publishes every used element written so far, if any: one Release store
/// of the used index (see `VringMem::publish_used`). True if it did.
#[inline]
fn publish_used(rings: &VringMem, idx: &mut Cursor) -> bool {
    if idx.used_published != idx.next_used {
        rings.publish_used(idx.next_used.0);
        idx.used_published = idx.next_used;
        return true;
    }
    false
}

/// Does the guest want an interrupt for the entries published since the
/// last decision?
fn guest_wants_interrupt(rings: &VringMem, idx: &Cursor, event_idx: bool) -> bool {
    // Pairs with the driver's full barrier between writing used_event (or
    // clearing NO_INTERRUPT) and re-reading the used index before it
    // sleeps: either it sees our new used index, or we see its request.
    fence(Ordering::SeqCst);
    if event_idx {
        let used_event = Wrapping(rings.used_event());
        let new = idx.next_used;
        let old = new - Wrapping(idx.unsignalled);
        // vring_need_event(): did used_event fall in (old, new]?
        (new - used_event - Wrapping(1)) < (new - old)
    } else {
        rings.avail_flags() & VRING_AVAIL_F_NO_INTERRUPT == 0
    }
}

/// Writes the virtio-net header `hdr` and then `frame` into the buffers
/// `segs`. False if they did not all fit.
///
/// # Safety
///
/// Every segment was made by `chain::walk` against a `GuestMap` that is
/// still alive.
#[inline]
unsafe fn write_frame(segs: &[Seg], hdr: &[u8], frame: &[u8]) -> bool {
    // SAFETY: the caller vouches the segments' memory is still mapped; in
    // the one-buffer case (the usual one) the buffer holds both parts.
    unsafe {
        match segs {
            [seg] if seg.len as usize >= hdr.len() + frame.len() => {
                seg.write(0, hdr);
                seg.write(hdr.len(), frame);
                true
            }
            _ => write_segs(segs, 0, hdr) && write_segs(segs, hdr.len(), frame),
        }
    }
}

/// Writes `data` into the buffers `segs` starting `offset` bytes in. False
/// if it did not all fit.
///
/// # Safety
///
/// Every segment was made by `chain::walk` against a `GuestMap` that is
/// still alive.
#[inline]
unsafe fn write_segs(segs: &[Seg], offset: usize, data: &[u8]) -> bool {
    let mut done = 0;
    for (seg, at, part) in spans(segs, offset, data.len()) {
        done = part.end;
        // SAFETY: the caller vouches the segment's memory is still mapped;
        // `spans` keeps at + part.len() <= seg.len.
        unsafe { seg.write(at, &data[part]) };
    }
    done == data.len()
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)]
mod tests;
