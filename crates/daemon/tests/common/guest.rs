//! A mock guest: a virtio-net driver (split rings) speaking vhost-user to a
//! daemon VM port, as QEMU plus a Linux guest would, in the test process.
//!
//! Guest memory is a memfd mapped MAP_SHARED here and, through
//! SET_MEM_TABLE, by the daemon. The driver side of the rings (descriptor
//! table, available ring, `used_event`) is written here; the device side
//! (used ring, `avail_event`) is only read, and everything read is checked:
//! a used entry naming a descriptor that is not in flight, a length longer
//! than what was posted, or a merged frame published before its last buffer
//! make the guest panic with what it saw.
//!
//! Notifications follow the spec (VIRTIO 1.x, 2.7.7 and 2.7.10): with
//! EVENT_IDX the guest kicks only when the new available index crosses the
//! device's `avail_event`, and asks for interrupts with `used_event`;
//! without it, it kicks unless the device set NO_NOTIFY. Waits block on the
//! call eventfd only (no polling fallback), so a lost interrupt shows as a
//! timeout.
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use ringswitch_vhost::hdr::feature;
use ringswitch_vhost::VirtioNetHdr;
use vhost::vhost_user::message::{
    VhostUserHeaderFlag, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_bindings::virtio_ring::{
    VRING_AVAIL_F_NO_INTERRUPT, VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE,
    VRING_USED_F_NO_NOTIFY,
};
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

const F_NEXT: u16 = VRING_DESC_F_NEXT as u16;
const F_WRITE: u16 = VRING_DESC_F_WRITE as u16;
const F_INDIRECT: u16 = VRING_DESC_F_INDIRECT as u16;
const USED_F_NO_NOTIFY: u16 = VRING_USED_F_NO_NOTIFY as u16;
const AVAIL_F_NO_INTERRUPT: u16 = VRING_AVAIL_F_NO_INTERRUPT as u16;

/// Bytes of guest memory behind each RX descriptor (the most `post_rx` may post).
pub const RX_STRIDE: u64 = 0x1_0000;
/// Bytes of guest memory behind each TX head: a 64 KiB TSO frame, its
/// header and then some (the device's chain bound is 65 KiB).
pub const TX_STRIDE: u64 = 0x1_1000;
/// Where the buffers start when they live in a second memory region.
const HIGH_GPA: u64 = 0x1_0000_0000;
/// A guest physical address no region covers.
pub const UNMAPPED_GPA: u64 = 0xdead_0000_0000;

/// When the guest kicks the TX (and RX) queue after adding buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KickMode {
    /// Only when the device asked (EVENT_IDX `avail_event`, or no NO_NOTIFY).
    Honour,
    /// After every frame, whatever the device said.
    Always,
}

/// What the guest negotiates and how it lays out its rings.
#[derive(Clone, Debug)]
pub struct GuestConfig {
    /// VIRTIO_F_VERSION_1 (12-byte header even without MRG_RXBUF).
    pub version_1: bool,
    /// VIRTIO_RING_F_EVENT_IDX.
    pub event_idx: bool,
    /// VIRTIO_NET_F_MRG_RXBUF.
    pub mrg_rxbuf: bool,
    /// Offload feature bits to negotiate (`feature::VIRTIO_NET_F_CSUM`, ...).
    pub offloads: Vec<u32>,
    /// VIRTIO_RING_F_INDIRECT_DESC.
    pub indirect: bool,
    /// Negotiate VHOST_USER_F_PROTOCOL_FEATURES (REPLY_ACK, MQ,
    /// SET_VRING_ENABLE); without it the rings run from SET_FEATURES on.
    pub protocol_features: bool,
    /// Queue pairs to set up (VIRTIO_NET_F_MQ when more than one).
    pub pairs: u16,
    /// Entries per virtqueue.
    pub queue_size: u16,
    /// Kick policy.
    pub kick: KickMode,
    /// Descriptors each TX frame is spread over (1: header and frame in one
    /// buffer, as Linux with ANY_LAYOUT).
    pub tx_descs: usize,
    /// Two memory regions: rings at GPA 0, buffers at 4 GiB, both in the
    /// same memfd (the second at an offset).
    pub two_regions: bool,
    /// Repost each RX buffer with this length as soon as it is consumed.
    pub rx_refill: Option<u32>,
    /// How long a send waiting for TX descriptors blocks before panicking.
    pub timeout: Duration,
    /// Also negotiate VHOST_USER_PROTOCOL_F_LOG_SHMFD, so that the test can
    /// start a migration's dirty logging (SET_LOG_BASE, LOG_ALL) through
    /// [`Guest::frontend`].
    pub log_shmfd: bool,
}

impl Default for GuestConfig {
    fn default() -> Self {
        GuestConfig {
            version_1: true,
            event_idx: true,
            mrg_rxbuf: true,
            offloads: Vec::new(),
            indirect: false,
            protocol_features: true,
            pairs: 1,
            queue_size: 256,
            kick: KickMode::Honour,
            tx_descs: 1,
            two_regions: false,
            rx_refill: None,
            timeout: Duration::from_secs(5),
            log_shmfd: false,
        }
    }
}

impl GuestConfig {
    /// The virtio feature bits this configuration asks for.
    pub fn features(&self) -> u64 {
        let mut f = 0u64;
        let mut set = |on: bool, bit: u32| {
            if on {
                f |= 1u64 << bit;
            }
        };
        set(self.version_1, feature::VIRTIO_F_VERSION_1);
        set(self.event_idx, feature::VIRTIO_RING_F_EVENT_IDX);
        set(self.mrg_rxbuf, feature::VIRTIO_NET_F_MRG_RXBUF);
        set(self.indirect, feature::VIRTIO_RING_F_INDIRECT_DESC);
        set(self.pairs > 1, feature::VIRTIO_NET_F_MQ);
        for &b in &self.offloads {
            set(true, b);
        }
        if self.protocol_features {
            f |= VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
        }
        f
    }

    /// The virtio-net header length the guest uses.
    pub fn hdr_len(&self) -> usize {
        if self.version_1 || self.mrg_rxbuf {
            VirtioNetHdr::LEN
        } else {
            VirtioNetHdr::LEN_LEGACY
        }
    }
}

/// Counters kept by the guest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuestStats {
    /// Frames added to TX queues (good and bad chains).
    pub tx_frames: u64,
    /// TX kicks sent.
    pub tx_kicks: u64,
    /// Times the guest asked itself whether to kick TX (once per frame).
    pub tx_kick_checks: u64,
    /// RX kicks sent (after posting buffers).
    pub rx_kicks: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// RX interrupts (call eventfd signals, summed).
    pub rx_interrupts: u64,
    /// TX completion interrupts.
    pub tx_interrupts: u64,
}

/// A deliberately broken TX chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadChain {
    /// A buffer at a guest address no memory region covers.
    OutsideMemory,
    /// Two descriptors whose `next` fields point at each other.
    Loop,
    /// A descriptor of length 0.
    ZeroLength,
    /// This many descriptors chained (the device takes at most 64).
    TooLong(usize),
    /// An available ring entry naming a descriptor past the table.
    HeadOutOfRange,
    /// A `next` field past the table.
    NextOutOfRange,
    /// A device-writable descriptor in a TX chain.
    Writable,
    /// A chain holding only (part of) the virtio-net header, no frame.
    HeaderOnly,
    /// An indirect descriptor although INDIRECT_DESC was not negotiated.
    IndirectNotNegotiated,
}

impl BadChain {
    /// Every kind, with a 100-descriptor chain for `TooLong`.
    pub const ALL: [BadChain; 9] = [
        BadChain::OutsideMemory,
        BadChain::Loop,
        BadChain::ZeroLength,
        BadChain::TooLong(100),
        BadChain::HeadOutOfRange,
        BadChain::NextOutOfRange,
        BadChain::Writable,
        BadChain::HeaderOnly,
        BadChain::IndirectNotNegotiated,
    ];
}

/// A deliberately broken RX buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRx {
    /// Device-readable instead of writable.
    ReadOnly,
    /// At a guest address no memory region covers.
    OutsideMemory,
    /// Too short for the virtio-net header.
    ShorterThanHeader,
}

/// A received frame: its virtio-net header and bytes, and how many buffers
/// it took.
#[derive(Clone, Debug)]
pub struct RxFrame {
    pub hdr: VirtioNetHdr,
    pub data: Vec<u8>,
    pub buffers: u16,
}

/// One virtqueue, driver side.
struct Vq {
    /// vring index (2 * pair for RX, 2 * pair + 1 for TX).
    index: usize,
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
    /// Buffer of descriptor `i`: `buf + i * stride`.
    buf: u64,
    stride: u64,
    free: Vec<u16>,
    /// Descriptors of each chain in flight, by head (empty: not in flight).
    chains: Vec<Vec<u16>>,
    /// Writable bytes posted behind each RX head.
    posted: Vec<u32>,
    /// Bogus heads put in the available ring: they come back as used
    /// entries without descriptors to free.
    bogus: Vec<u16>,
    /// What the guest published as the available index.
    avail_idx: u16,
    /// The available index at the last kick decision.
    notified: u16,
    last_used: u16,
    kick: EventFd,
    call: EventFd,
    /// The frontend's addresses of the descriptor table, used and
    /// available rings (SET_VRING_ADDR).
    va: (u64, u64, u64),
}

impl Vq {
    fn in_flight(&self) -> usize {
        usize::from(self.size) - self.free.len()
    }
}

struct Pair {
    rx: Vq,
    tx: Vq,
}

/// The guest. See the module documentation.
pub struct Guest {
    fe: Frontend,
    /// A second handle on the socket, to see it close.
    stream: UnixStream,
    mem: GuestMemoryMmap,
    cfg: GuestConfig,
    features: u64,
    hdr_len: usize,
    pairs: Vec<Pair>,
    stats: GuestStats,
    /// TX completions seen: (head, used length), in order.
    tx_done: Vec<(u16, u32)>,
    /// The memory table sent.
    regions: Vec<VhostUserMemoryRegionInfo>,
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Split-ring sizes for `qs` entries: (avail offset, used offset, total).
fn ring_layout(qs: u16) -> (u64, u64, u64) {
    let qs = u64::from(qs);
    let avail = 16 * qs;
    let used = align(avail + 6 + 2 * qs, 4096);
    let total = align(used + 6 + 8 * qs, 4096);
    (avail, used, total)
}

fn memfd(size: u64) -> File {
    // SAFETY: a NUL-terminated name and valid flags; memfd_create returns a
    // new descriptor or -1 and touches no memory of ours.
    let fd = unsafe { libc::memfd_create(c"ringswitch-test-guest".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(size).expect("size the guest memory");
    f
}

/// Waits until `fd` is readable (or hung up); false on timeout.
pub fn poll_in(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd, alive for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n > 0
}

fn drain_eventfd(e: &EventFd) -> u64 {
    e.read().unwrap_or_default()
}

impl Guest {
    /// Server mode: connects to the daemon's socket at `path` (retrying for
    /// a second while it is not there yet) and sets the device up.
    pub fn connect(path: &Path, cfg: GuestConfig) -> Guest {
        let deadline = Instant::now() + Duration::from_secs(2);
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "guest: cannot connect to {}: {e}",
                        path.display()
                    );
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        Guest::from_stream(stream, cfg)
    }

    /// Client mode: waits up to `timeout` for the daemon to connect to
    /// `listener`, then sets the device up. None if it did not come.
    pub fn accept(listener: &UnixListener, cfg: GuestConfig, timeout: Duration) -> Option<Guest> {
        let s = accept_stream(listener, timeout)?;
        Some(Guest::from_stream(s, cfg))
    }

    /// Sets the device up over a connected socket; panics with the step that
    /// failed.
    pub fn from_stream(stream: UnixStream, cfg: GuestConfig) -> Guest {
        match Guest::try_from_stream(stream, cfg) {
            Ok(g) => g,
            Err(e) => panic!("guest setup failed: {e}"),
        }
    }

    /// Sets the device up over a connected socket.
    pub fn try_from_stream(stream: UnixStream, cfg: GuestConfig) -> Result<Guest, String> {
        assert!(cfg.queue_size.is_power_of_two() && cfg.queue_size <= 4096);
        assert!(cfg.pairs >= 1);
        stream
            .set_nonblocking(false)
            .map_err(|e| format!("blocking socket: {e}"))?;
        let keep = stream.try_clone().map_err(|e| format!("dup socket: {e}"))?;
        let nvrings = 2 * u64::from(cfg.pairs);
        let mut fe = Frontend::from_stream(stream, nvrings);

        // Memory: rings first, then per pair 'qs' RX buffers and 'qs' TX buffers.
        let qs = u64::from(cfg.queue_size);
        let (avail_off, used_off, ring_bytes) = ring_layout(cfg.queue_size);
        let rings_len = align(2 * u64::from(cfg.pairs) * ring_bytes, 0x20_0000);
        let pair_bufs = qs * (RX_STRIDE + TX_STRIDE);
        let bufs_len = u64::from(cfg.pairs) * pair_bufs;
        let file = memfd(rings_len + bufs_len);
        let bufs_gpa = if cfg.two_regions { HIGH_GPA } else { rings_len };
        let mem = if cfg.two_regions {
            let f2 = file.try_clone().map_err(|e| format!("dup memfd: {e}"))?;
            GuestMemoryMmap::<()>::from_ranges_with_files([
                (
                    GuestAddress(0),
                    rings_len as usize,
                    Some(FileOffset::new(file, 0)),
                ),
                (
                    GuestAddress(HIGH_GPA),
                    bufs_len as usize,
                    Some(FileOffset::new(f2, rings_len)),
                ),
            ])
        } else {
            GuestMemoryMmap::<()>::from_ranges_with_files([(
                GuestAddress(0),
                (rings_len + bufs_len) as usize,
                Some(FileOffset::new(file, 0)),
            )])
        }
        .map_err(|e| format!("map guest memory: {e}"))?;
        let regions: Vec<VhostUserMemoryRegionInfo> = mem
            .iter()
            .map(|r| VhostUserMemoryRegionInfo::from_guest_region(r).expect("file-backed"))
            .collect();
        // The frontend's virtual address of a guest physical address.
        let va = |gpa: u64| -> u64 {
            let r = regions
                .iter()
                .find(|r| gpa >= r.guest_phys_addr && gpa < r.guest_phys_addr + r.memory_size)
                .expect("mapped");
            r.userspace_addr + (gpa - r.guest_phys_addr)
        };

        let step = |what: &str, e: vhost::Error| format!("{what}: {e}");
        let offered = fe.get_features().map_err(|e| step("GET_FEATURES", e))?;
        let features = cfg.features();
        if features & !offered != 0 {
            return Err(format!(
                "the device does not offer {:#x} (offered {offered:#x})",
                features & !offered
            ));
        }
        fe.set_owner().map_err(|e| step("SET_OWNER", e))?;
        if cfg.protocol_features {
            let proto = fe
                .get_protocol_features()
                .map_err(|e| step("GET_PROTOCOL_FEATURES", e))?;
            let mut want =
                proto & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK);
            if cfg.log_shmfd {
                want |= proto & VhostUserProtocolFeatures::LOG_SHMFD;
            }
            fe.set_protocol_features(want)
                .map_err(|e| step("SET_PROTOCOL_FEATURES", e))?;
            if want.contains(VhostUserProtocolFeatures::REPLY_ACK) {
                fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
            }
            if want.contains(VhostUserProtocolFeatures::MQ) {
                let n = fe.get_queue_num().map_err(|e| step("GET_QUEUE_NUM", e))?;
                if n < nvrings {
                    return Err(format!("GET_QUEUE_NUM says {n}, need {nvrings}"));
                }
            } else if cfg.pairs > 1 {
                return Err("MQ protocol feature not offered".into());
            }
        }
        fe.set_features(features)
            .map_err(|e| step("SET_FEATURES", e))?;
        fe.set_mem_table(&regions)
            .map_err(|e| step("SET_MEM_TABLE", e))?;

        let mut pairs = Vec::new();
        for p in 0..u64::from(cfg.pairs) {
            let mk = |kind: u64| -> Result<Vq, String> {
                let index = (2 * p + kind) as usize;
                let base = index as u64 * ring_bytes;
                let (buf, stride) = if kind == 0 {
                    (bufs_gpa + p * pair_bufs, RX_STRIDE)
                } else {
                    (bufs_gpa + p * pair_bufs + qs * RX_STRIDE, TX_STRIDE)
                };
                let vq = Vq {
                    index,
                    size: cfg.queue_size,
                    desc: base,
                    avail: base + avail_off,
                    used: base + used_off,
                    buf,
                    stride,
                    free: (0..cfg.queue_size).rev().collect(),
                    chains: vec![Vec::new(); cfg.queue_size as usize],
                    posted: vec![0; cfg.queue_size as usize],
                    bogus: Vec::new(),
                    avail_idx: 0,
                    notified: 0,
                    last_used: 0,
                    kick: EventFd::new(EFD_NONBLOCK).map_err(|e| format!("eventfd: {e}"))?,
                    call: EventFd::new(EFD_NONBLOCK).map_err(|e| format!("eventfd: {e}"))?,
                    va: (va(base), va(base + used_off), va(base + avail_off)),
                };
                // QEMU's order: num, base, addr, kick, call, enable.
                fe.set_vring_num(index, cfg.queue_size)
                    .map_err(|e| step("SET_VRING_NUM", e))?;
                fe.set_vring_base(index, 0)
                    .map_err(|e| step("SET_VRING_BASE", e))?;
                fe.set_vring_addr(
                    index,
                    &VringConfigData {
                        queue_max_size: cfg.queue_size,
                        queue_size: cfg.queue_size,
                        flags: 0,
                        desc_table_addr: va(vq.desc),
                        used_ring_addr: va(vq.used),
                        avail_ring_addr: va(vq.avail),
                        log_addr: None,
                    },
                )
                .map_err(|e| step("SET_VRING_ADDR", e))?;
                fe.set_vring_kick(index, &vq.kick)
                    .map_err(|e| step("SET_VRING_KICK", e))?;
                fe.set_vring_call(index, &vq.call)
                    .map_err(|e| step("SET_VRING_CALL", e))?;
                Ok(vq)
            };
            let rx = mk(0)?;
            let tx = mk(1)?;
            pairs.push(Pair { rx, tx });
        }
        if cfg.protocol_features {
            for i in 0..nvrings as usize {
                fe.set_vring_enable(i, true)
                    .map_err(|e| step("SET_VRING_ENABLE", e))?;
            }
        }
        // A round trip: every message above has been handled.
        fe.get_features().map_err(|e| step("GET_FEATURES", e))?;
        let hdr_len = cfg.hdr_len();
        Ok(Guest {
            fe,
            stream: keep,
            mem,
            features,
            hdr_len,
            pairs,
            cfg,
            stats: GuestStats::default(),
            tx_done: Vec::new(),
            regions,
        })
    }

    /// The negotiated feature bits.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The virtio-net header length in use.
    pub fn hdr_len(&self) -> usize {
        self.hdr_len
    }

    /// The configuration.
    pub fn config(&self) -> &GuestConfig {
        &self.cfg
    }

    /// The vhost-user frontend, for protocol-level tests.
    pub fn frontend(&mut self) -> &mut Frontend {
        &mut self.fe
    }

    /// The counters (interrupts pending on the call eventfds are counted first).
    pub fn stats(&mut self) -> GuestStats {
        for p in &self.pairs {
            self.stats.rx_interrupts += drain_eventfd(&p.rx.call);
            self.stats.tx_interrupts += drain_eventfd(&p.tx.call);
        }
        self.stats
    }

    /// TX chains in flight on `pair` (added, not completed yet).
    pub fn tx_in_flight(&self, pair: usize) -> usize {
        self.pairs[pair].tx.in_flight()
    }

    /// RX buffers posted on `pair` and not used yet.
    pub fn rx_posted(&self, pair: usize) -> usize {
        self.pairs[pair].rx.in_flight()
    }

    /// Takes the TX completions seen so far: (head, used length).
    pub fn take_tx_completions(&mut self) -> Vec<(u16, u32)> {
        std::mem::take(&mut self.tx_done)
    }

    // ---- ring primitives ----

    fn write_desc(&self, vq: &Vq, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        self.mem
            .write_slice(&d, GuestAddress(vq.desc + 16 * u64::from(i)))
            .expect("descriptor table in memory");
    }

    /// Adds `head` to the available ring and publishes the new index
    /// (Release: the descriptors and buffers are visible first).
    fn push_avail(mem: &GuestMemoryMmap, vq: &mut Vq, head: u16) {
        let slot = u64::from(vq.avail_idx % vq.size);
        mem.write_obj(head.to_le(), GuestAddress(vq.avail + 4 + 2 * slot))
            .expect("avail ring in memory");
        vq.avail_idx = vq.avail_idx.wrapping_add(1);
        mem.store(
            vq.avail_idx.to_le(),
            GuestAddress(vq.avail + 2),
            Ordering::Release,
        )
        .expect("avail idx in memory");
    }

    /// Kicks if the device asked for it since the last decision (or always,
    /// in [`KickMode::Always`]). Returns whether it kicked.
    fn kick_if_needed(mem: &GuestMemoryMmap, vq: &mut Vq, event_idx: bool, mode: KickMode) -> bool {
        // Pairs with the device's fence between writing avail_event (or
        // clearing NO_NOTIFY) and re-reading the available index.
        fence(Ordering::SeqCst);
        let new = vq.avail_idx;
        let old = vq.notified;
        vq.notified = new;
        let need = match mode {
            KickMode::Always => true,
            KickMode::Honour if event_idx => {
                let ev: u16 = u16::from_le(
                    mem.load(
                        GuestAddress(vq.used + 4 + 8 * u64::from(vq.size)),
                        Ordering::Relaxed,
                    )
                    .expect("avail_event in memory"),
                );
                // vring_need_event(event, new, old)
                new.wrapping_sub(ev).wrapping_sub(1) < new.wrapping_sub(old)
            }
            KickMode::Honour => {
                let flags: u16 = u16::from_le(
                    mem.load(GuestAddress(vq.used), Ordering::Relaxed)
                        .expect("used flags in memory"),
                );
                flags & USED_F_NO_NOTIFY == 0
            }
        };
        if need {
            vq.kick.write(1).expect("kick");
        }
        need
    }

    /// Asks for an interrupt at the next used entry (EVENT_IDX `used_event`,
    /// or interrupts left on), then double-checks: true if entries arrived
    /// meanwhile.
    fn arm_interrupt(mem: &GuestMemoryMmap, vq: &Vq, event_idx: bool) -> bool {
        if event_idx {
            mem.store(
                vq.last_used.to_le(),
                GuestAddress(vq.avail + 4 + 2 * u64::from(vq.size)),
                Ordering::Relaxed,
            )
            .expect("used_event in memory");
        } else {
            mem.store(0u16, GuestAddress(vq.avail), Ordering::Relaxed)
                .expect("avail flags in memory");
        }
        // Pairs with the device's fence between publishing the used index
        // and reading used_event.
        fence(Ordering::SeqCst);
        Self::used_idx(mem, vq) != vq.last_used
    }

    fn used_idx(mem: &GuestMemoryMmap, vq: &Vq) -> u16 {
        u16::from_le(
            mem.load(GuestAddress(vq.used + 2), Ordering::Acquire)
                .expect("used idx in memory"),
        )
    }

    fn used_elem(mem: &GuestMemoryMmap, vq: &Vq, at: u16) -> (u32, u32) {
        let slot = u64::from(at % vq.size);
        let e: u64 = mem
            .read_obj(GuestAddress(vq.used + 4 + 8 * slot))
            .expect("used ring in memory");
        let e = u64::from_le(e);
        (e as u32, (e >> 32) as u32)
    }

    // ---- TX ----

    /// Sends one frame on pair 0.
    pub fn send(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) {
        self.send_on(0, hdr, frame)
    }

    /// Sends one frame on `pair` with a plain header.
    pub fn send_plain(&mut self, frame: &[u8]) {
        self.send_on(0, &VirtioNetHdr::default(), frame)
    }

    /// Sends one frame on `pair`: header and frame in `tx_descs`
    /// descriptors, added to the available ring, and a kick if the device
    /// wants one. Waits for free descriptors (TX completions) if needed.
    pub fn send_on(&mut self, pair: usize, hdr: &VirtioNetHdr, frame: &[u8]) {
        let total = self.hdr_len + frame.len();
        assert!(total as u64 <= TX_STRIDE, "frame too large for the mock");
        let n = self.cfg.tx_descs.clamp(1, total);
        self.ensure_tx_free(pair, n);
        let hdr_bytes = &vm_memory::ByteValued::as_slice(hdr)[..self.hdr_len];
        let mem = &self.mem;
        let vq = &mut self.pairs[pair].tx;
        let chain: Vec<u16> = (0..n).map(|_| vq.free.pop().expect("ensured")).collect();
        let head = chain[0];
        let base = vq.buf + u64::from(head) * vq.stride;
        mem.write_slice(hdr_bytes, GuestAddress(base))
            .expect("TX buffer in memory");
        mem.write_slice(frame, GuestAddress(base + self.hdr_len as u64))
            .expect("TX buffer in memory");
        let chunk = total.div_ceil(n);
        for (k, &d) in chain.iter().enumerate() {
            let off = k * chunk;
            let len = chunk.min(total - off);
            let last = k + 1 == n;
            let (flags, next) = if last { (0, 0) } else { (F_NEXT, chain[k + 1]) };
            let vq = &self.pairs[pair].tx;
            self.write_desc(vq, d, base + off as u64, len as u32, flags, next);
        }
        self.publish_tx(pair, chain);
    }

    /// Adds a chain whose descriptors are written, publishes, kicks if asked.
    fn publish_tx(&mut self, pair: usize, chain: Vec<u16>) {
        let event_idx = self.cfg.event_idx;
        let mode = self.cfg.kick;
        let vq = &mut self.pairs[pair].tx;
        let head = chain[0];
        vq.chains[usize::from(head)] = chain;
        Self::push_avail(&self.mem, vq, head);
        self.stats.tx_frames += 1;
        self.stats.tx_kick_checks += 1;
        if Self::kick_if_needed(&self.mem, vq, event_idx, mode) {
            self.stats.tx_kicks += 1;
        }
    }

    /// Collects TX completions on `pair`, freeing their descriptors; returns
    /// how many.
    pub fn reclaim_tx(&mut self, pair: usize) -> usize {
        let event_idx = self.cfg.event_idx;
        let mem = &self.mem;
        let vq = &mut self.pairs[pair].tx;
        let idx = Self::used_idx(mem, vq);
        let pending = idx.wrapping_sub(vq.last_used);
        assert!(
            pending <= vq.size,
            "device published a TX used index {idx} more than the queue size past {}",
            vq.last_used
        );
        let mut n = 0;
        while vq.last_used != idx {
            let (id, len) = Self::used_elem(mem, vq, vq.last_used);
            vq.last_used = vq.last_used.wrapping_add(1);
            n += 1;
            if let Some(pos) = vq.bogus.iter().position(|&b| u32::from(b) == id) {
                vq.bogus.swap_remove(pos);
            } else {
                let chain = vq
                    .chains
                    .get_mut(id as usize)
                    .map(std::mem::take)
                    .unwrap_or_default();
                assert!(
                    !chain.is_empty(),
                    "device completed TX descriptor {id}, which is not the head of a chain in flight"
                );
                // A loop reuses descriptors: free each once.
                for d in chain {
                    if !vq.free.contains(&d) {
                        vq.free.push(d);
                    }
                }
            }
            self.tx_done.push((id as u16, len));
        }
        // Interrupts for completions stay on (counted, not needed).
        let _ = Self::arm_interrupt(mem, vq, event_idx);
        n
    }

    /// Waits until `need` descriptors are free on `pair`'s TX queue, on the
    /// TX call eventfd; panics after the configured timeout.
    fn ensure_tx_free(&mut self, pair: usize, need: usize) {
        let deadline = Instant::now() + self.cfg.timeout;
        loop {
            if self.pairs[pair].tx.free.len() >= need {
                return;
            }
            self.reclaim_tx(pair);
            if self.pairs[pair].tx.free.len() >= need {
                return;
            }
            let vq = &self.pairs[pair].tx;
            if Self::arm_interrupt(&self.mem, vq, self.cfg.event_idx) {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !poll_in(vq.call.as_raw_fd(), left) {
                panic!(
                    "guest: no TX completion on pair {pair} for {:?} ({} chains in flight)",
                    self.cfg.timeout,
                    vq.in_flight()
                );
            }
            self.stats.tx_interrupts += drain_eventfd(&self.pairs[pair].tx.call);
        }
    }

    /// Waits until every TX chain on `pair` is completed; false on timeout.
    pub fn flush_tx(&mut self, pair: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            self.reclaim_tx(pair);
            if self.pairs[pair].tx.in_flight() == 0 {
                return true;
            }
            let vq = &self.pairs[pair].tx;
            if Self::arm_interrupt(&self.mem, vq, self.cfg.event_idx) {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !poll_in(vq.call.as_raw_fd(), left) {
                return false;
            }
            self.stats.tx_interrupts += drain_eventfd(&self.pairs[pair].tx.call);
        }
    }

    /// Adds a broken chain of kind `bad` to `pair`'s TX queue (and kicks if
    /// asked). Returns the head the device should complete.
    pub fn send_bad(&mut self, pair: usize, bad: BadChain) -> u16 {
        let descs = match bad {
            BadChain::Loop => 2,
            BadChain::TooLong(n) => n,
            BadChain::HeadOutOfRange => 0,
            BadChain::NextOutOfRange => 2,
            _ => 1,
        };
        self.ensure_tx_free(pair, descs.max(1));
        let hdr_len = self.hdr_len as u32;
        let vq = &mut self.pairs[pair].tx;
        let size = vq.size;
        if bad == BadChain::HeadOutOfRange {
            let head = size + 5;
            vq.bogus.push(head);
            Self::push_avail(&self.mem, vq, head);
            self.stats.tx_frames += 1;
            self.stats.tx_kick_checks += 1;
            if Self::kick_if_needed(&self.mem, vq, self.cfg.event_idx, self.cfg.kick) {
                self.stats.tx_kicks += 1;
            }
            return head;
        }
        let chain: Vec<u16> = (0..descs)
            .map(|_| vq.free.pop().expect("ensured"))
            .collect();
        let head = chain[0];
        let base = vq.buf + u64::from(head) * vq.stride;
        // A plausible frame behind every descriptor that points at memory.
        self.mem
            .write_slice(&[0x5a; 128], GuestAddress(base))
            .expect("TX buffer in memory");
        let vq = &self.pairs[pair].tx;
        match bad {
            BadChain::OutsideMemory => self.write_desc(vq, head, UNMAPPED_GPA, 100, 0, 0),
            BadChain::Loop => {
                self.write_desc(vq, chain[0], base, 64, F_NEXT, chain[1]);
                self.write_desc(vq, chain[1], base + 64, 64, F_NEXT, chain[0]);
            }
            BadChain::ZeroLength => self.write_desc(vq, head, base, 0, 0, 0),
            BadChain::TooLong(_) => {
                for (k, &d) in chain.iter().enumerate() {
                    let (flags, next) = if k + 1 < chain.len() {
                        (F_NEXT, chain[k + 1])
                    } else {
                        (0, 0)
                    };
                    self.write_desc(vq, d, base + k as u64, 1, flags, next);
                }
            }
            BadChain::NextOutOfRange => {
                self.write_desc(vq, chain[0], base, 64, F_NEXT, size + 7);
                self.write_desc(vq, chain[1], base + 64, 64, 0, 0);
            }
            BadChain::Writable => self.write_desc(vq, head, base, 100, F_WRITE, 0),
            BadChain::HeaderOnly => self.write_desc(vq, head, base, hdr_len, 0, 0),
            BadChain::IndirectNotNegotiated => {
                // A valid-looking one-entry indirect table at base + 64.
                let mut d = [0u8; 16];
                d[..8].copy_from_slice(&(base + 256).to_le_bytes());
                d[8..12].copy_from_slice(&100u32.to_le_bytes());
                self.mem
                    .write_slice(&d, GuestAddress(base + 64))
                    .expect("TX buffer in memory");
                self.write_desc(vq, head, base + 64, 16, F_INDIRECT, 0);
            }
            BadChain::HeadOutOfRange => unreachable!(),
        }
        self.publish_tx(pair, chain);
        head
    }

    /// Publishes an available index `ahead` entries past the real one (the
    /// entries in between are stale), and kicks.
    pub fn corrupt_avail_idx(&mut self, pair: usize, ahead: u16) {
        let vq = &self.pairs[pair].tx;
        self.mem
            .store(
                vq.avail_idx.wrapping_add(ahead).to_le(),
                GuestAddress(vq.avail + 2),
                Ordering::Release,
            )
            .expect("avail idx in memory");
        vq.kick.write(1).expect("kick");
        self.stats.tx_kicks += 1;
    }

    /// Publishes the real available index again.
    pub fn restore_avail_idx(&mut self, pair: usize) {
        let vq = &self.pairs[pair].tx;
        self.mem
            .store(
                vq.avail_idx.to_le(),
                GuestAddress(vq.avail + 2),
                Ordering::Release,
            )
            .expect("avail idx in memory");
    }

    // ---- RX ----

    /// Posts up to `n` RX buffers of `buf_len` bytes on `pair` (as many as
    /// there are free descriptors) and kicks if asked; returns how many.
    pub fn post_rx(&mut self, pair: usize, n: usize, buf_len: u32) -> usize {
        assert!(u64::from(buf_len) <= RX_STRIDE && buf_len > 0);
        let event_idx = self.cfg.event_idx;
        let mode = self.cfg.kick;
        let mut posted = 0;
        for _ in 0..n {
            let vq = &mut self.pairs[pair].rx;
            let Some(d) = vq.free.pop() else { break };
            vq.chains[usize::from(d)] = vec![d];
            vq.posted[usize::from(d)] = buf_len;
            let addr = vq.buf + u64::from(d) * vq.stride;
            let vq = &self.pairs[pair].rx;
            self.write_desc(vq, d, addr, buf_len, F_WRITE, 0);
            let vq = &mut self.pairs[pair].rx;
            Self::push_avail(&self.mem, vq, d);
            posted += 1;
        }
        if posted > 0 {
            let vq = &mut self.pairs[pair].rx;
            // Interrupts on for the next frame.
            let _ = Self::arm_interrupt(&self.mem, vq, event_idx);
            if Self::kick_if_needed(&self.mem, vq, event_idx, mode) {
                self.stats.rx_kicks += 1;
            }
        }
        posted
    }

    /// Reads every frame the device has published on `pair`, frees (and,
    /// with `rx_refill`, reposts) their buffers, and asks for an interrupt
    /// at the next one.
    pub fn recv_on(&mut self, pair: usize) -> Vec<RxFrame> {
        let mrg = self.cfg.mrg_rxbuf;
        let hdr_len = self.hdr_len;
        let event_idx = self.cfg.event_idx;
        let mem = &self.mem;
        let vq = &mut self.pairs[pair].rx;
        let idx = Self::used_idx(mem, vq);
        let pending = idx.wrapping_sub(vq.last_used);
        assert!(
            pending <= vq.size,
            "device published an RX used index {idx} more than the queue size past {}",
            vq.last_used
        );
        let mut out = Vec::new();
        let take = |vq: &mut Vq| -> (u16, u32) {
            let (id, len) = Self::used_elem(mem, vq, vq.last_used);
            vq.last_used = vq.last_used.wrapping_add(1);
            let d = id as usize;
            assert!(
                d < vq.chains.len() && !vq.chains[d].is_empty(),
                "device used RX descriptor {id}, which is not posted"
            );
            assert!(
                len <= vq.posted[d],
                "device wrote {len} bytes into an RX buffer of {}",
                vq.posted[d]
            );
            vq.chains[d].clear();
            vq.free.push(d as u16);
            (d as u16, len)
        };
        while vq.last_used != idx {
            let (d, len) = take(vq);
            let addr = vq.buf + u64::from(d) * vq.stride;
            if len == 0 {
                // A buffer given back unused (the device found it bad).
                continue;
            }
            assert!(
                len as usize >= hdr_len,
                "RX used length {len} shorter than the header"
            );
            let mut hb = [0u8; 12];
            mem.read_slice(&mut hb[..hdr_len], GuestAddress(addr))
                .expect("RX buffer in memory");
            let hdr: VirtioNetHdr = vm_memory::ByteValued::from_slice(&hb)
                .copied()
                .expect("12 bytes");
            let buffers = if mrg { hdr.num_buffers() } else { 1 };
            assert!(buffers >= 1, "num_buffers 0 with MRG_RXBUF");
            let mut data = vec![0u8; len as usize - hdr_len];
            mem.read_slice(&mut data, GuestAddress(addr + hdr_len as u64))
                .expect("RX buffer in memory");
            for k in 1..buffers {
                assert!(
                    vq.last_used != idx,
                    "device published buffer {k} of {buffers} of a merged frame before the rest"
                );
                let (d, len) = take(vq);
                let addr = vq.buf + u64::from(d) * vq.stride;
                let at = data.len();
                data.resize(at + len as usize, 0);
                mem.read_slice(&mut data[at..], GuestAddress(addr))
                    .expect("RX buffer in memory");
            }
            out.push(RxFrame { hdr, data, buffers });
        }
        self.stats.rx_frames += out.len() as u64;
        let _ = Self::arm_interrupt(mem, vq, event_idx);
        if let Some(len) = self.cfg.rx_refill {
            let n = self.pairs[pair].rx.free.len();
            if n > 0 {
                self.post_rx(pair, n, len);
            }
        }
        out
    }

    /// [`Guest::recv_on`] pair 0.
    pub fn recv(&mut self) -> Vec<RxFrame> {
        self.recv_on(0)
    }

    /// Receives on `pair` until `count` frames arrived or `timeout` passed,
    /// sleeping on the RX call eventfd only.
    pub fn wait_rx_on(&mut self, pair: usize, count: usize, timeout: Duration) -> Vec<RxFrame> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            out.extend(self.recv_on(pair));
            if out.len() >= count {
                return out;
            }
            let vq = &self.pairs[pair].rx;
            if Self::arm_interrupt(&self.mem, vq, self.cfg.event_idx) {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !poll_in(vq.call.as_raw_fd(), left) {
                return out;
            }
            self.stats.rx_interrupts += drain_eventfd(&self.pairs[pair].rx.call);
        }
    }

    /// [`Guest::wait_rx_on`] pair 0.
    pub fn wait_rx(&mut self, count: usize, timeout: Duration) -> Vec<RxFrame> {
        self.wait_rx_on(0, count, timeout)
    }

    /// Interrupts off on `pair`'s RX queue (NO_INTERRUPT, or `used_event`
    /// parked half a ring away), as a polling driver does.
    pub fn rx_interrupts_off(&mut self, pair: usize) {
        let vq = &self.pairs[pair].rx;
        if self.cfg.event_idx {
            let far = vq.last_used.wrapping_add(0x8000);
            self.mem
                .store(
                    far.to_le(),
                    GuestAddress(vq.avail + 4 + 2 * u64::from(vq.size)),
                    Ordering::Relaxed,
                )
                .expect("used_event in memory");
        } else {
            self.mem
                .store(
                    AVAIL_F_NO_INTERRUPT.to_le(),
                    GuestAddress(vq.avail),
                    Ordering::Relaxed,
                )
                .expect("avail flags in memory");
        }
    }

    /// Posts one broken RX buffer on `pair` (no kick); returns its head.
    pub fn post_rx_bad(&mut self, pair: usize, bad: BadRx) -> u16 {
        let vq = &mut self.pairs[pair].rx;
        let d = vq.free.pop().expect("a free RX descriptor");
        vq.chains[usize::from(d)] = vec![d];
        let addr = vq.buf + u64::from(d) * vq.stride;
        let (addr, len, flags) = match bad {
            BadRx::ReadOnly => (addr, 2048, 0),
            BadRx::OutsideMemory => (UNMAPPED_GPA, 2048, F_WRITE),
            BadRx::ShorterThanHeader => (addr, 4, F_WRITE),
        };
        vq.posted[usize::from(d)] = len;
        let vq = &self.pairs[pair].rx;
        self.write_desc(vq, d, addr, len, flags, 0);
        let vq = &mut self.pairs[pair].rx;
        Self::push_avail(&self.mem, vq, d);
        d
    }

    /// Stops every vring (GET_VRING_BASE, as QEMU does when the VM stops),
    /// optionally sends the memory table again, then restarts them where
    /// they stopped with new kick and call eventfds. Returns the bases the
    /// device reported (RX, TX per pair).
    pub fn stop_and_resume(&mut self, resend_mem_table: bool) -> Vec<u32> {
        let mut bases = Vec::new();
        for p in &self.pairs {
            for vq in [&p.rx, &p.tx] {
                bases.push(self.fe.get_vring_base(vq.index).expect("GET_VRING_BASE"));
            }
        }
        if resend_mem_table {
            self.fe
                .set_mem_table(&self.regions)
                .expect("SET_MEM_TABLE again");
        }
        let mut k = 0;
        for p in &mut self.pairs {
            for vq in [&mut p.rx, &mut p.tx] {
                let base = bases[k] as u16;
                k += 1;
                vq.kick = EventFd::new(EFD_NONBLOCK).expect("eventfd");
                vq.call = EventFd::new(EFD_NONBLOCK).expect("eventfd");
                let fe = &self.fe;
                fe.set_vring_num(vq.index, vq.size).expect("SET_VRING_NUM");
                fe.set_vring_base(vq.index, base).expect("SET_VRING_BASE");
                fe.set_vring_addr(
                    vq.index,
                    &VringConfigData {
                        queue_max_size: vq.size,
                        queue_size: vq.size,
                        flags: 0,
                        desc_table_addr: vq.va.0,
                        used_ring_addr: vq.va.1,
                        avail_ring_addr: vq.va.2,
                        log_addr: None,
                    },
                )
                .expect("SET_VRING_ADDR");
                fe.set_vring_kick(vq.index, &vq.kick)
                    .expect("SET_VRING_KICK");
                fe.set_vring_call(vq.index, &vq.call)
                    .expect("SET_VRING_CALL");
            }
        }
        if self.cfg.protocol_features {
            for i in 0..2 * self.pairs.len() {
                self.fe.set_vring_enable(i, true).expect("SET_VRING_ENABLE");
            }
        }
        let _ = self.fe.get_features().expect("GET_FEATURES");
        bases
    }

    /// Available index published on `pair`'s (RX, TX) queues.
    pub fn avail_idx(&self, pair: usize) -> (u16, u16) {
        (self.pairs[pair].rx.avail_idx, self.pairs[pair].tx.avail_idx)
    }

    // ---- connection ----

    /// Waits until the daemon closes the connection; false if it is still
    /// open after `timeout`.
    pub fn wait_hangup(&self, timeout: Duration) -> bool {
        if !poll_in(self.stream.as_raw_fd(), timeout) {
            return false;
        }
        let _ = self.stream.set_nonblocking(true);
        let mut b = [0u8; 64];
        let r = (&self.stream).read(&mut b);
        let _ = self.stream.set_nonblocking(false);
        matches!(r, Ok(0))
            || matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }

    /// The memfd behind the guest memory (a hostile frontend shrinks it).
    /// Once it is shrunk, nothing of this guest that touches its memory may
    /// be called: only `kick_tx`, `replace_call` and dropping it.
    pub fn memory_file(&self) -> &File {
        self.mem
            .iter()
            .next()
            .and_then(|r| r.file_offset())
            .map(|f| f.file())
            .expect("file-backed guest memory")
    }

    /// Kicks `pair`'s TX queue whether or not the device asked (touches no
    /// guest memory).
    pub fn kick_tx(&self, pair: usize) {
        let _ = self.pairs[pair].tx.kick.write(1);
    }

    /// Sends SET_VRING_CALL for vring `index` (2 * pair for RX, + 1 for TX)
    /// with `call`, which the guest then waits on.
    pub fn replace_call(&mut self, index: usize, call: EventFd) -> Result<(), String> {
        self.fe
            .set_vring_call(index, &call)
            .map_err(|e| format!("SET_VRING_CALL: {e}"))?;
        let p = &mut self.pairs[index / 2];
        let vq = if index.is_multiple_of(2) {
            &mut p.rx
        } else {
            &mut p.tx
        };
        vq.call = call;
        Ok(())
    }

    /// Closes the connection (the frontend goes away, like QEMU quitting).
    pub fn disconnect(self) {
        drop(self);
    }
}

/// Waits up to `timeout` for a connection on `listener`.
pub fn accept_stream(listener: &UnixListener, timeout: Duration) -> Option<UnixStream> {
    if !poll_in(listener.as_raw_fd(), timeout) {
        return None;
    }
    let (s, _) = listener.accept().ok()?;
    s.set_nonblocking(false).ok()?;
    Some(s)
}

// ---- frames ----

/// A virtio-net header asking for nothing.
pub fn plain_hdr() -> VirtioNetHdr {
    VirtioNetHdr::default()
}

/// A header for a TSO frame: NEEDS_CSUM, `gso_type`, `gso_size`, with the
/// checksum of the L4 header at `csum_start + csum_offset`.
pub fn gso_hdr(
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
) -> VirtioNetHdr {
    VirtioNetHdr {
        flags: ringswitch_frame::F_NEEDS_CSUM,
        gso_type,
        hdr_len: hdr_len.to_le(),
        gso_size: gso_size.to_le(),
        csum_start: csum_start.to_le(),
        csum_offset: csum_offset.to_le(),
        num_buffers: 0,
    }
}

/// A header asking only for checksum completion.
pub fn csum_hdr(csum_start: u16, csum_offset: u16) -> VirtioNetHdr {
    gso_hdr(ringswitch_frame::GSO_NONE, 0, 0, csum_start, csum_offset)
}

/// The one's complement sum of `data` (big-endian words), not folded.
pub fn sum16(data: &[u8]) -> u32 {
    let mut s: u32 = 0;
    let mut it = data.chunks_exact(2);
    for w in &mut it {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = it.remainder() {
        s += u32::from(*b) << 8;
    }
    s
}

/// Folds a sum to 16 bits.
pub fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The IPv4 pseudo-header sum for `proto` and L4 length `len`.
pub fn pseudo4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u32 {
    sum16(&src) + sum16(&dst) + u32::from(proto) + u32::from(len)
}

pub const IP_SRC: [u8; 4] = [10, 0, 0, 1];
pub const IP_DST: [u8; 4] = [10, 0, 0, 2];
/// Ethernet + IPv4 + TCP header bytes of [`tcp4_frame`].
pub const TCP_HDRS: usize = 14 + 20 + 20;

fn ipv4_header(total_len: u16, proto: u8, id: u16) -> [u8; 20] {
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&IP_SRC);
    ip[16..20].copy_from_slice(&IP_DST);
    let c = !fold(sum16(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip
}

/// An Ethernet/IPv4/TCP frame carrying `payload`, with ACK|PSH, sequence
/// number `seq`, and in the checksum field the partial checksum a guest
/// leaves for offload: the folded pseudo-header sum (with the TCP length),
/// not inverted, as Linux does.
pub fn tcp4_frame(dst: [u8; 6], src: [u8; 6], seq: u32, payload: &[u8]) -> Vec<u8> {
    let tcp_len = 20 + payload.len();
    let mut f = Vec::with_capacity(TCP_HDRS + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(&ipv4_header((20 + tcp_len) as u16, 6, 0x1234));
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&1u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // ACK | PSH
    tcp[14..16].copy_from_slice(&0xffffu16.to_be_bytes());
    let partial = fold(pseudo4(IP_SRC, IP_DST, 6, tcp_len as u16));
    tcp[16..18].copy_from_slice(&partial.to_be_bytes());
    f.extend_from_slice(&tcp);
    f.extend_from_slice(payload);
    f
}

/// An Ethernet/IPv4/UDP frame carrying `payload`, with the partial
/// (pseudo-header) checksum in its checksum field.
pub fn udp4_frame(dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut f = Vec::with_capacity(42 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(&ipv4_header((20 + udp_len) as u16, 17, 0x4321));
    let mut udp = [0u8; 8];
    udp[0..2].copy_from_slice(&5353u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9999u16.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let partial = fold(pseudo4(IP_SRC, IP_DST, 17, udp_len as u16));
    udp[6..8].copy_from_slice(&partial.to_be_bytes());
    f.extend_from_slice(&udp);
    f.extend_from_slice(payload);
    f
}

/// Checks an Ethernet/IPv4/TCP-or-UDP frame: IP header checksum, L4
/// checksum with the pseudo header, IP length matching the frame. Returns
/// (IP total length, L4 header offset) or what is wrong.
pub fn verify_ipv4_l4(f: &[u8]) -> Result<(usize, usize), String> {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return Err("not IPv4".into());
    }
    let ip = &f[14..34];
    if fold(sum16(ip)) != 0xffff {
        return Err(format!("bad IP header checksum {:02x?}", &ip[10..12]));
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if 14 + total != f.len() {
        return Err(format!(
            "IP total length {total} but frame {} bytes",
            f.len()
        ));
    }
    let l4 = &f[34..];
    let proto = ip[9];
    let s = pseudo4(IP_SRC, IP_DST, proto, l4.len() as u16) + sum16(l4);
    if fold(s) != 0xffff {
        return Err(format!("bad L4 checksum (sum {:#06x})", fold(s)));
    }
    Ok((total, 34))
}
