//! netmap's shared-memory layout (API version 14, x86-64), and where each
//! piece sits in a ringswitch region.
//!
//! A region is one memfd laid out as
//! `[ringswitch header][netmap_if per end][CSB per end][rings][buffers]`.
//! A switch port's region has one end, a pipe's two; a port opened with
//! room for pipes has `1 + 2 * pipes` ends: the port's, then each pipe's
//! two ends (`{` then `}`), all in one buffer pool so that buffers move
//! between the port's rings and the pipes' by index (netmap's lb).
//! Everything from the `netmap_if` on is byte-for-byte what netmap applications
//! expect; the header in front describes the region so that a mapper (a
//! client, or later a guest) can validate it before use.

use crate::arith;

/// netmap API version carried in `netmap_if.ni_version`.
pub const NETMAP_API: u32 = 14;

/// Slot flag: `buf_idx` changed (set by whoever swapped the buffer).
pub const NS_BUF_CHANGED: u16 = 0x0001;
/// Slot flag: ask for a report when the slot is transmitted.
pub const NS_REPORT: u16 = 0x0002;
/// Slot flag: forward to the other side (host stack).
pub const NS_FORWARD: u16 = 0x0004;
/// Slot flag: do not learn the source address of this packet.
pub const NS_NO_LEARN: u16 = 0x0008;
/// Slot flag: payload is at the user pointer `ptr`.
pub const NS_INDIRECT: u16 = 0x0010;
/// Slot flag: more fragments of the same packet follow in the next slot.
pub const NS_MOREFRAG: u16 = 0x0020;
/// Slot flag: transmit monitor copy.
pub const NS_TXMON: u16 = 0x0040;
/// At most this many slots make up one packet.
pub const MAX_FRAGS: u32 = 64;

/// `netmap_if.ni_flags`: the memory is private to this port.
pub const NI_PRIV_MEM: u32 = 0x1;

/// Buffers 0 and 1 are reserved, as in netmap.
pub const RESERVED_BUFS: u32 = 2;

/// Limits on the geometry a port can be created with.
pub const MIN_RINGS: u32 = 1;
/// Most rings per direction.
pub const MAX_RINGS: u32 = 16;
/// Fewest slots per ring.
pub const MIN_SLOTS: u32 = 64;
/// Most slots per ring.
pub const MAX_SLOTS: u32 = 4096;
/// Smallest buffer size.
pub const MIN_BUF_SIZE: u32 = 128;
/// Largest buffer size: the largest multiple of 64 that a slot's 16-bit
/// `len` can express (a 64 KiB buffer would wrap a full slot's length to 0).
pub const MAX_BUF_SIZE: u32 = (u16::MAX as u32) / 64 * 64;
const _: () = assert!(MAX_BUF_SIZE == 65472 && MAX_BUF_SIZE <= u16::MAX as u32);
/// Default buffer size, as netmap.
pub const DEFAULT_BUF_SIZE: u32 = 2048;
/// Default slots per ring, as VALE.
pub const DEFAULT_SLOTS: u32 = 1024;
/// Default slots per pipe ring: with 2048 slots a sender and a receiver on
/// different cores have four batches of 512 in flight and rarely wait for
/// each other, which roughly doubles a pipe's rate over 1024 slots.
pub const DEFAULT_PIPE_SLOTS: u32 = 2048;
/// Most pipes a port's region can have room for (netmap's lb opens one
/// per output; its default is 2).
pub const MAX_PORT_PIPES: u32 = 16;
/// Most ends a region has: a port's and two per pipe in its memory.
pub const MAX_ENDS: usize = 1 + 2 * MAX_PORT_PIPES as usize;

/// One slot of a ring: 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetmapSlot {
    /// Index of the buffer this slot points to.
    pub buf_idx: u32,
    /// Length of the data in the buffer.
    pub len: u16,
    /// `NS_*` flags; on switch RX rings bits 8..15 count fragments.
    pub flags: u16,
    /// User pointer for `NS_INDIRECT`.
    pub ptr: u64,
}

/// The 256-byte header of a netmap ring; slots follow at offset 256.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetmapRingHeader {
    /// Offset from the ring to buffer 0 (may be negative).
    pub buf_ofs: i64,
    /// Number of slots.
    pub num_slots: u32,
    /// Size of each buffer.
    pub nr_buf_size: u32,
    /// Ring index.
    pub ringid: u16,
    /// 0 for TX, 1 for RX.
    pub dir: u16,
    /// First slot owned by the application (written by the application).
    pub head: u32,
    /// Wake-up point (written by the application).
    pub cur: u32,
    /// First slot owned by the port (written by the port side).
    pub tail: u32,
    /// `NR_*` flags.
    pub flags: u32,
    /// Padding to the timestamp, as the C compiler lays it out.
    pub _pad0: u32,
    /// Timestamp of the last sync (`struct timeval`).
    pub ts_sec: i64,
    /// Microseconds part of the timestamp.
    pub ts_usec: i64,
    /// Mask for per-slot offsets.
    pub offset_mask: u64,
    /// Buffer alignment.
    pub buf_align: u64,
    /// Padding up to the semaphore area.
    pub _pad1: [u8; 56],
    /// Opaque kernel area in netmap.
    pub sem: [u8; 128],
}

/// Byte offset of the first slot inside a ring.
pub const RING_SLOTS_OFFSET: usize = 256;

/// Size of a slot ([`NetmapSlot`]).
pub const SLOT_SIZE: usize = 16;

/// Byte offset of slot `i` inside a ring.
#[inline(always)]
pub const fn slot_offset(i: u32) -> usize {
    RING_SLOTS_OFFSET + SLOT_SIZE * i as usize
}

/// Offsets of the slot fields.
pub mod slot_field {
    /// `buf_idx`.
    pub const BUF_IDX: usize = 0;
    /// `len`.
    pub const LEN: usize = 4;
    /// `flags`.
    pub const FLAGS: usize = 6;
    /// `ptr`.
    pub const PTR: usize = 8;
}

/// The fixed part of `netmap_if`; `ring_ofs[]` follows at offset 56.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetmapIfHeader {
    /// Port name, NUL terminated.
    pub ni_name: [u8; 16],
    /// API version.
    pub ni_version: u32,
    /// `NI_*` flags.
    pub ni_flags: u32,
    /// Number of TX rings.
    pub ni_tx_rings: u32,
    /// Number of RX rings.
    pub ni_rx_rings: u32,
    /// Head of the extra-buffer list.
    pub ni_bufs_head: u32,
    /// Host TX rings.
    pub ni_host_tx_rings: u32,
    /// Host RX rings.
    pub ni_host_rx_rings: u32,
    /// Spare words.
    pub spare: [u32; 3],
}

/// Offset of `ring_ofs[]` inside `netmap_if`.
pub const NIFP_RING_OFS_OFFSET: usize = 56;

/// Byte offset inside `netmap_if` of `ring_ofs[k]`, the offset of ring `k`
/// from the `netmap_if` (an `i64`; TX rings, host TX rings, RX rings, host
/// RX rings, in that order).
#[inline(always)]
pub const fn nifp_ring_ofs(k: usize) -> usize {
    NIFP_RING_OFS_OFFSET + 8 * k
}

/// Offsets of the `netmap_if` fields read by offset.
pub mod nifp_field {
    /// `ni_tx_rings`.
    pub const TX_RINGS: usize = 24;
    /// `ni_rx_rings`.
    pub const RX_RINGS: usize = 28;
    /// `ni_host_tx_rings`.
    pub const HOST_TX_RINGS: usize = 36;
    /// `ni_host_rx_rings`.
    pub const HOST_RX_RINGS: usize = 40;
}

/// Application-to-port half of a CSB entry (one per ring, 64 bytes).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default)]
pub struct CsbAtok {
    /// Application head.
    pub head: u32,
    /// Application cur.
    pub cur: u32,
    /// The application sleeps and wants an interrupt.
    pub appl_need_kick: u32,
    /// Sync flags.
    pub sync_flags: u32,
    /// What the application's kicks of the port side cost it lately (ns,
    /// a running average; 0: none yet), a ringswitch extension in
    /// netmap's padding: the port side's adaptive wait counts it into what
    /// its sleeps cost. Written by the application: the port side bounds
    /// it before use.
    pub kick_cost_ns: u32,
    /// Padding to a cache line.
    pub _pad: [u32; 11],
}

/// Port-to-application half of a CSB entry (one per ring, 64 bytes).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default)]
pub struct CsbKtoa {
    /// Port's view of the consumed position.
    pub hwcur: u32,
    /// Port's tail.
    pub hwtail: u32,
    /// The port side sleeps and wants a kick.
    pub kern_need_kick: u32,
    /// What the port side's kicks of this ring's application cost it
    /// lately (ns, a running estimate; 0: none yet), a ringswitch
    /// extension in netmap's padding: an application's adaptive wait
    /// counts it into what sleeping costs (see `AdaptiveWait`).
    pub kick_cost_ns: u32,
    /// Padding to a cache line.
    pub _pad: [u32; 12],
}

/// Offsets of the CSB fields inside their halves.
pub mod csb_field {
    /// `atok.head`.
    pub const HEAD: usize = 0;
    /// `atok.cur`.
    pub const CUR: usize = 4;
    /// `atok.appl_need_kick`.
    pub const APPL_NEED_KICK: usize = 8;
    /// `atok.kick_cost_ns` (a ringswitch extension).
    pub const APPL_KICK_COST_NS: usize = 16;
    /// `ktoa.hwcur`.
    pub const HWCUR: usize = 0;
    /// `ktoa.hwtail`.
    pub const HWTAIL: usize = 4;
    /// `ktoa.kern_need_kick`.
    pub const KERN_NEED_KICK: usize = 8;
    /// `ktoa.kick_cost_ns` (a ringswitch extension).
    pub const KICK_COST_NS: usize = 12;
}

/// Offsets of the ring header fields.
pub mod ring_field {
    /// `buf_ofs`.
    pub const BUF_OFS: usize = 0;
    /// `num_slots`.
    pub const NUM_SLOTS: usize = 8;
    /// `nr_buf_size`.
    pub const NR_BUF_SIZE: usize = 12;
    /// `ringid`.
    pub const RINGID: usize = 16;
    /// `dir`.
    pub const DIR: usize = 18;
    /// `head`.
    pub const HEAD: usize = 20;
    /// `cur`.
    pub const CUR: usize = 24;
    /// `tail`.
    pub const TAIL: usize = 28;
    /// `flags`.
    pub const FLAGS: usize = 32;
}

/// Magic at the start of every region.
pub const REGION_MAGIC: [u8; 8] = *b"RNGSWTCH";
/// Version of the region header.
pub const REGION_VERSION: u32 = 2;
/// Size reserved for the region header.
pub const REGION_HEADER_SIZE: usize = 4096;
/// Bytes reserved for each `netmap_if`.
pub const NIFP_SIZE: usize = 512;
/// Alignment of rings and of the CSB.
pub const RING_ALIGN: usize = 64;
/// Alignment of the buffer area.
pub const PAGE: usize = 4096;

/// The self-describing header at offset 0 of a region.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionHeader {
    /// `REGION_MAGIC`.
    pub magic: [u8; 8],
    /// `REGION_VERSION`.
    pub version: u32,
    /// Number of ends (1 for a switch port, 2 for a pipe, `1 + 2 * pipes`
    /// for a switch port with room for pipes in its memory).
    pub ends: u32,
    /// TX rings per end.
    pub tx_rings: u32,
    /// RX rings per end.
    pub rx_rings: u32,
    /// Slots per TX ring.
    pub tx_slots: u32,
    /// Slots per RX ring.
    pub rx_slots: u32,
    /// Buffer size.
    pub buf_size: u32,
    /// Number of buffers, including the two reserved ones.
    pub nbufs: u32,
    /// Offset of buffer 0.
    pub buf_base: u64,
    /// Total size of the region.
    pub size: u64,
    /// Offset of the `netmap_if` of ends 0 and 1 (the others' follow from
    /// the geometry).
    pub nifp_ofs: [u64; 2],
    /// Offset of the CSB (atok array, then ktoa array) of ends 0 and 1.
    pub csb_ofs: [u64; 2],
    /// Bytes of virtio-net header in front of every frame in the rings
    /// ([`VNET_HDR_LEN`](crate::vnet_queue::VNET_HDR_LEN) on a passthrough
    /// port made for a ptnet guest with offloads), or 0. Not part of the
    /// layout: the daemon sets it on a fresh region
    /// ([`Region::set_vnet_hdr_len`](crate::Region::set_vnet_hdr_len)).
    pub vnet_hdr_len: u32,
    /// Zero.
    pub reserved: u32,
}

/// Offset of [`RegionHeader::vnet_hdr_len`].
pub const HEADER_VNET_HDR_LEN: usize = 88;

/// Offset, in the header page, of the word a migratable passthrough port's
/// daemon writes while it waits for the guest to say it runs on this
/// memory (a nonzero "resume epoch"; docs of `ringswitch-daemon`'s
/// passthrough module). Its own cache line, after the header.
pub const HEADER_RESUME_ASK: usize = 256;
/// Offset, in the header page, of the word the guest driver writes: the
/// last resume epoch it saw. Its own cache line.
pub const HEADER_RESUME_ACK: usize = 320;

/// Sizes of a port: rings, slots, buffer size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    /// TX rings.
    pub tx_rings: u32,
    /// RX rings.
    pub rx_rings: u32,
    /// Slots per TX ring.
    pub tx_slots: u32,
    /// Slots per RX ring.
    pub rx_slots: u32,
    /// Bytes per buffer.
    pub buf_size: u32,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            tx_rings: 1,
            rx_rings: 1,
            tx_slots: DEFAULT_SLOTS,
            rx_slots: DEFAULT_SLOTS,
            buf_size: DEFAULT_BUF_SIZE,
        }
    }
}

/// A geometry outside the supported limits.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GeometryError {
    /// Ring count out of range.
    #[error("{0} rings is out of range: a port has 1 to 16 rings per direction")]
    Rings(u32),
    /// Slot count out of range.
    #[error("{0} slots is out of range: a ring has 64 to 4096 slots")]
    Slots(u32),
    /// Buffer size out of range.
    #[error(
        "a buffer size of {0} bytes is out of range: use 128 to 65472 (the most a slot's 16-bit \
         length can hold), a multiple of 64"
    )]
    BufSize(u32),
}

impl Geometry {
    /// The default geometry of a pipe (see [`DEFAULT_PIPE_SLOTS`]).
    pub fn pipe_default() -> Geometry {
        Geometry {
            tx_slots: DEFAULT_PIPE_SLOTS,
            rx_slots: DEFAULT_PIPE_SLOTS,
            ..Geometry::default()
        }
    }

    /// Checks every field against the limits.
    pub fn validate(&self) -> Result<(), GeometryError> {
        for r in [self.tx_rings, self.rx_rings] {
            if !(MIN_RINGS..=MAX_RINGS).contains(&r) {
                return Err(GeometryError::Rings(r));
            }
        }
        for s in [self.tx_slots, self.rx_slots] {
            if !(MIN_SLOTS..=MAX_SLOTS).contains(&s) {
                return Err(GeometryError::Slots(s));
            }
        }
        if !(MIN_BUF_SIZE..=MAX_BUF_SIZE).contains(&self.buf_size)
            || !self.buf_size.is_multiple_of(64)
        {
            return Err(GeometryError::BufSize(self.buf_size));
        }
        Ok(())
    }

    /// The geometry of the ends of a pipe in the memory of a port of
    /// geometry `self`: one ring each way, of the port's RX slots, and the
    /// port's buffer size (buffers move between them by index).
    pub fn port_pipe(&self) -> Geometry {
        Geometry {
            tx_rings: 1,
            rx_rings: 1,
            tx_slots: self.rx_slots,
            rx_slots: self.rx_slots,
            buf_size: self.buf_size,
        }
    }

    /// The geometry seen from the other end of a pipe (TX and RX swapped).
    pub fn mirrored(&self) -> Geometry {
        Geometry {
            tx_rings: self.rx_rings,
            rx_rings: self.tx_rings,
            tx_slots: self.rx_slots,
            rx_slots: self.tx_slots,
            buf_size: self.buf_size,
        }
    }
}

/// Ring direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Application to port.
    Tx,
    /// Port to application.
    Rx,
}

/// Where everything sits in a region. Pure arithmetic, no memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionLayout {
    /// Geometry of end 0 (end 1 of a pipe has the mirrored geometry; the
    /// ends of a port's pipes have [`Geometry::port_pipe`]).
    pub geometry: Geometry,
    /// 1 for a switch port, 2 for a pipe, `1 + 2 * pipes` for a switch
    /// port with room for pipes.
    pub ends: u32,
    /// Pipes in a switch port's memory: pipe `k` has ends `1 + 2k` (`{`)
    /// and `2 + 2k` (`}`). 0 for a plain port and for a pipe.
    pub pipes: u32,
    /// Offset of the `netmap_if` of ends 0 and 1 (see [`Self::nifp_at`]
    /// for any end).
    pub nifp_ofs: [usize; 2],
    /// Offset of the first ring (TX rings, then RX rings) of ends 0 and 1.
    pub rings_ofs: [usize; 2],
    /// Offset of the CSB of ends 0 and 1.
    pub csb_ofs: [usize; 2],
    /// Offset of buffer 0.
    pub buf_base: usize,
    /// Number of buffers, reserved ones included.
    pub nbufs: u32,
    /// Total size.
    pub size: usize,
}

fn ring_bytes(slots: u32) -> usize {
    arith::align_up(
        RING_SLOTS_OFFSET + slots as usize * core::mem::size_of::<NetmapSlot>(),
        RING_ALIGN,
    )
}

impl RegionLayout {
    /// Computes the layout of a region with `ends` ends (1 or 2).
    pub fn new(geometry: Geometry, ends: u32) -> Result<RegionLayout, GeometryError> {
        Self::build(geometry, ends.clamp(1, 2), 0)
    }

    /// Computes the layout of a switch port's region with room for `pipes`
    /// pipes (at most [`MAX_PORT_PIPES`]) in its memory.
    pub fn with_pipes(geometry: Geometry, pipes: u32) -> Result<RegionLayout, GeometryError> {
        Self::build(
            geometry,
            1 + 2 * pipes.min(MAX_PORT_PIPES),
            pipes.min(MAX_PORT_PIPES),
        )
    }

    fn build(geometry: Geometry, ends: u32, pipes: u32) -> Result<RegionLayout, GeometryError> {
        geometry.validate()?;
        let mut l = RegionLayout {
            geometry,
            ends,
            pipes,
            nifp_ofs: [0; 2],
            rings_ofs: [0; 2],
            csb_ofs: [0; 2],
            buf_base: 0,
            nbufs: 0,
            size: 0,
        };
        // Every end past 0 has the same geometry, so the structures of
        // ends 1 and up are evenly spaced: only ends 0 and 1 are kept
        // (the layout is copied around; see `nifp_at`).
        let ends = ends as usize;
        let mut off = REGION_HEADER_SIZE;
        for e in 0..ends {
            if e < 2 {
                l.nifp_ofs[e] = off;
            }
            off += NIFP_SIZE;
        }
        // The CSBs before the rings: a copy of the region made page by
        // page in ascending order while the port side keeps writing (QEMU
        // migrating a paused guest's passthrough region) then has no
        // `hwtail` newer than the slots and buffers it covers, since the
        // port side writes a frame's buffer, then its slot, then `hwtail`.
        let csb_entry = core::mem::size_of::<CsbAtok>() + core::mem::size_of::<CsbKtoa>();
        for e in 0..ends {
            let g = l.end_geometry(e);
            if e < 2 {
                l.csb_ofs[e] = off;
            }
            off += (g.tx_rings + g.rx_rings) as usize * csb_entry;
        }
        off = arith::align_up(off, RING_ALIGN);
        let mut bufs = RESERVED_BUFS as usize;
        for e in 0..ends {
            let g = l.end_geometry(e);
            if e < 2 {
                l.rings_ofs[e] = off;
            }
            off += g.tx_rings as usize * ring_bytes(g.tx_slots);
            off += g.rx_rings as usize * ring_bytes(g.rx_slots);
            bufs += g.tx_rings as usize * g.tx_slots as usize;
            bufs += g.rx_rings as usize * g.rx_slots as usize;
        }
        l.buf_base = arith::align_up(off, PAGE);
        l.size = arith::align_up(l.buf_base + bufs * geometry.buf_size as usize, PAGE);
        // At most 33 ends x 2 directions x 16 rings x 4096 slots + 2.
        l.nbufs = u32::try_from(bufs).map_err(|_| GeometryError::Slots(geometry.tx_slots))?;
        Ok(l)
    }

    /// Offset of end `end`'s `netmap_if`.
    pub fn nifp_at(&self, end: usize) -> usize {
        self.spaced(&self.nifp_ofs, end, NIFP_SIZE)
    }

    /// Offset of end `end`'s CSB.
    pub fn csb_at(&self, end: usize) -> usize {
        let g = self.end_geometry(1);
        let entry = core::mem::size_of::<CsbAtok>() + core::mem::size_of::<CsbKtoa>();
        self.spaced(
            &self.csb_ofs,
            end,
            (g.tx_rings + g.rx_rings) as usize * entry,
        )
    }

    /// Offset of end `end`'s first ring.
    pub fn rings_at(&self, end: usize) -> usize {
        let g = self.end_geometry(1);
        let stride = g.tx_rings as usize * ring_bytes(g.tx_slots)
            + g.rx_rings as usize * ring_bytes(g.rx_slots);
        self.spaced(&self.rings_ofs, end, stride)
    }

    /// Where `at` (ends 0 and 1) puts end `end`, ends past 1 following
    /// end 1 every `stride` bytes.
    fn spaced(&self, at: &[usize; 2], end: usize, stride: usize) -> usize {
        match end {
            0 | 1 => at[end],
            e => at[1] + (e - 1) * stride,
        }
    }

    /// The other end of the pipe that end `end` belongs to (for a port's
    /// own end 0, itself).
    pub fn peer_end(&self, end: usize) -> usize {
        if end == 0 {
            usize::from(self.ends == 2)
        } else if self.pipes == 0 {
            0
        } else if !end.is_multiple_of(2) {
            end + 1
        } else {
            end - 1
        }
    }

    /// The ends of pipe `k` of a port's memory: its `{` and its `}` end.
    pub fn pipe_ends(&self, k: u32) -> Option<[usize; 2]> {
        (k < self.pipes).then(|| [1 + 2 * k as usize, 2 + 2 * k as usize])
    }

    /// Geometry of end `end`.
    pub fn end_geometry(&self, end: usize) -> Geometry {
        if end == 0 {
            self.geometry
        } else if self.pipes > 0 {
            self.geometry.port_pipe()
        } else {
            self.geometry.mirrored()
        }
    }

    /// Offset of ring `idx` of direction `dir` of end `end`.
    pub fn ring_ofs(&self, end: usize, dir: Dir, idx: u32) -> usize {
        let g = self.end_geometry(end);
        let base = self.rings_at(end);
        match dir {
            Dir::Tx => base + idx as usize * ring_bytes(g.tx_slots),
            Dir::Rx => {
                base + g.tx_rings as usize * ring_bytes(g.tx_slots)
                    + idx as usize * ring_bytes(g.rx_slots)
            }
        }
    }

    /// Index of a ring inside the CSB arrays: TX rings first, then RX.
    pub fn csb_index(&self, end: usize, dir: Dir, idx: u32) -> usize {
        match dir {
            Dir::Tx => idx as usize,
            Dir::Rx => self.end_geometry(end).tx_rings as usize + idx as usize,
        }
    }

    /// Offset of the `atok` half of a ring's CSB entry.
    pub fn atok_ofs(&self, end: usize, dir: Dir, idx: u32) -> usize {
        self.csb_at(end) + self.csb_index(end, dir, idx) * core::mem::size_of::<CsbAtok>()
    }

    /// Offset of the `ktoa` half of a ring's CSB entry.
    pub fn ktoa_ofs(&self, end: usize, dir: Dir, idx: u32) -> usize {
        let g = self.end_geometry(end);
        let entries = (g.tx_rings + g.rx_rings) as usize;
        self.csb_at(end)
            + entries * core::mem::size_of::<CsbAtok>()
            + self.csb_index(end, dir, idx) * core::mem::size_of::<CsbKtoa>()
    }

    /// First buffer initially attached to the first ring of `end`/`dir`/`idx`.
    /// Rings take consecutive buffers in layout order, starting at 2.
    pub fn first_buf(&self, end: usize, dir: Dir, idx: u32) -> u32 {
        let mut b = RESERVED_BUFS;
        for e in 0..self.ends as usize {
            let g = self.end_geometry(e);
            for (d, rings, slots) in [
                (Dir::Tx, g.tx_rings, g.tx_slots),
                (Dir::Rx, g.rx_rings, g.rx_slots),
            ] {
                for r in 0..rings {
                    if e == end && d == dir && r == idx {
                        return b;
                    }
                    b += slots;
                }
            }
        }
        b
    }

    /// The header describing this layout.
    pub fn header(&self) -> RegionHeader {
        RegionHeader {
            magic: REGION_MAGIC,
            version: REGION_VERSION,
            ends: self.ends,
            tx_rings: self.geometry.tx_rings,
            rx_rings: self.geometry.rx_rings,
            tx_slots: self.geometry.tx_slots,
            rx_slots: self.geometry.rx_slots,
            buf_size: self.geometry.buf_size,
            nbufs: self.nbufs,
            buf_base: self.buf_base as u64,
            size: self.size as u64,
            nifp_ofs: [self.nifp_ofs[0] as u64, self.nifp_ofs[1] as u64],
            csb_ofs: [self.csb_ofs[0] as u64, self.csb_ofs[1] as u64],
            vnet_hdr_len: 0,
            reserved: 0,
        }
    }

    /// Rebuilds a layout from a header read out of shared memory, and checks
    /// that it is exactly the layout this code would have made.
    pub fn from_header(h: &RegionHeader) -> Option<RegionLayout> {
        if h.magic != REGION_MAGIC
            || h.version != REGION_VERSION
            || !(1..=1 + 2 * MAX_PORT_PIPES).contains(&h.ends)
            || (h.ends > 2 && h.ends.is_multiple_of(2))
        {
            return None;
        }
        let g = Geometry {
            tx_rings: h.tx_rings,
            rx_rings: h.rx_rings,
            tx_slots: h.tx_slots,
            rx_slots: h.rx_slots,
            buf_size: h.buf_size,
        };
        let l = if h.ends <= 2 {
            RegionLayout::new(g, h.ends).ok()?
        } else {
            RegionLayout::with_pipes(g, (h.ends - 1) / 2).ok()?
        };
        let layout_part = RegionHeader {
            vnet_hdr_len: 0,
            reserved: 0,
            ..*h
        };
        (l.header() == layout_part).then_some(l)
    }
}

#[cfg(test)]
// Test fixtures, not the data path.
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn slot_matches_netmap() {
        assert_eq!(size_of::<NetmapSlot>(), 16);
        assert_eq!(size_of::<NetmapSlot>(), SLOT_SIZE);
        assert_eq!(offset_of!(NetmapSlot, buf_idx), 0);
        assert_eq!(offset_of!(NetmapSlot, len), 4);
        assert_eq!(offset_of!(NetmapSlot, flags), 6);
        assert_eq!(offset_of!(NetmapSlot, ptr), 8);
        assert_eq!(offset_of!(NetmapSlot, buf_idx), slot_field::BUF_IDX);
        assert_eq!(offset_of!(NetmapSlot, len), slot_field::LEN);
        assert_eq!(offset_of!(NetmapSlot, flags), slot_field::FLAGS);
        assert_eq!(offset_of!(NetmapSlot, ptr), slot_field::PTR);
        assert_eq!(slot_offset(3), RING_SLOTS_OFFSET + 3 * 16);
    }

    #[test]
    fn ring_header_matches_netmap() {
        assert_eq!(size_of::<NetmapRingHeader>(), RING_SLOTS_OFFSET);
        assert_eq!(offset_of!(NetmapRingHeader, buf_ofs), ring_field::BUF_OFS);
        assert_eq!(
            offset_of!(NetmapRingHeader, num_slots),
            ring_field::NUM_SLOTS
        );
        assert_eq!(
            offset_of!(NetmapRingHeader, nr_buf_size),
            ring_field::NR_BUF_SIZE
        );
        assert_eq!(offset_of!(NetmapRingHeader, ringid), ring_field::RINGID);
        assert_eq!(offset_of!(NetmapRingHeader, dir), ring_field::DIR);
        assert_eq!(offset_of!(NetmapRingHeader, head), ring_field::HEAD);
        assert_eq!(offset_of!(NetmapRingHeader, cur), ring_field::CUR);
        assert_eq!(offset_of!(NetmapRingHeader, tail), ring_field::TAIL);
        assert_eq!(offset_of!(NetmapRingHeader, flags), ring_field::FLAGS);
        assert_eq!(offset_of!(NetmapRingHeader, ts_sec), 40);
        assert_eq!(offset_of!(NetmapRingHeader, offset_mask), 56);
        assert_eq!(offset_of!(NetmapRingHeader, buf_align), 64);
        assert_eq!(offset_of!(NetmapRingHeader, sem), 128);
    }

    #[test]
    fn netmap_if_matches_netmap() {
        assert_eq!(size_of::<NetmapIfHeader>(), NIFP_RING_OFS_OFFSET);
        assert_eq!(offset_of!(NetmapIfHeader, ni_version), 16);
        assert_eq!(offset_of!(NetmapIfHeader, ni_flags), 20);
        assert_eq!(offset_of!(NetmapIfHeader, ni_tx_rings), 24);
        assert_eq!(offset_of!(NetmapIfHeader, ni_rx_rings), 28);
        assert_eq!(offset_of!(NetmapIfHeader, ni_bufs_head), 32);
        assert_eq!(offset_of!(NetmapIfHeader, ni_host_tx_rings), 36);
        assert_eq!(offset_of!(NetmapIfHeader, ni_host_rx_rings), 40);
        assert_eq!(offset_of!(NetmapIfHeader, spare), 44);
        assert_eq!(
            offset_of!(NetmapIfHeader, ni_tx_rings),
            nifp_field::TX_RINGS
        );
        assert_eq!(
            offset_of!(NetmapIfHeader, ni_rx_rings),
            nifp_field::RX_RINGS
        );
        assert_eq!(
            offset_of!(NetmapIfHeader, ni_host_tx_rings),
            nifp_field::HOST_TX_RINGS
        );
        assert_eq!(
            offset_of!(NetmapIfHeader, ni_host_rx_rings),
            nifp_field::HOST_RX_RINGS
        );
        assert_eq!(nifp_ring_ofs(2), NIFP_RING_OFS_OFFSET + 16);
        // The largest ring_ofs array fits the space reserved for a netmap_if.
        assert!(NIFP_RING_OFS_OFFSET + 8 * 2 * MAX_RINGS as usize <= NIFP_SIZE);
    }

    #[test]
    fn region_header_layout_is_the_guest_drivers() {
        // guest/ringswitch_pt/rspt.h has the same offsets.
        assert_eq!(size_of::<RegionHeader>(), 96);
        assert_eq!(offset_of!(RegionHeader, buf_base), 40);
        assert_eq!(offset_of!(RegionHeader, csb_ofs), 72);
        assert_eq!(offset_of!(RegionHeader, vnet_hdr_len), HEADER_VNET_HDR_LEN);
    }

    #[test]
    fn csb_matches_netmap() {
        assert_eq!(size_of::<CsbAtok>(), 64);
        assert_eq!(size_of::<CsbKtoa>(), 64);
        assert_eq!(offset_of!(CsbAtok, head), csb_field::HEAD);
        assert_eq!(offset_of!(CsbAtok, cur), csb_field::CUR);
        assert_eq!(
            offset_of!(CsbAtok, appl_need_kick),
            csb_field::APPL_NEED_KICK
        );
        assert_eq!(offset_of!(CsbAtok, sync_flags), 12);
        assert_eq!(
            offset_of!(CsbAtok, kick_cost_ns),
            csb_field::APPL_KICK_COST_NS
        );
        assert_eq!(offset_of!(CsbKtoa, hwcur), csb_field::HWCUR);
        assert_eq!(offset_of!(CsbKtoa, hwtail), csb_field::HWTAIL);
        assert_eq!(
            offset_of!(CsbKtoa, kern_need_kick),
            csb_field::KERN_NEED_KICK
        );
        // The extension lies in netmap's padding, after its three fields.
        assert_eq!(offset_of!(CsbKtoa, kick_cost_ns), csb_field::KICK_COST_NS);
    }

    #[test]
    fn geometry_limits() {
        let d = Geometry::default();
        assert!(d.validate().is_ok());
        let refused = [
            (Geometry { tx_rings: 17, ..d }, GeometryError::Rings(17)),
            (Geometry { rx_slots: 63, ..d }, GeometryError::Slots(63)),
            (
                Geometry {
                    tx_slots: 4097,
                    ..d
                },
                GeometryError::Slots(4097),
            ),
            (Geometry { buf_size: 100, ..d }, GeometryError::BufSize(100)),
            // 64 KiB would wrap a full slot's 16-bit length to 0.
            (
                Geometry {
                    buf_size: 65536,
                    ..d
                },
                GeometryError::BufSize(65536),
            ),
        ];
        for (g, e) in refused {
            assert_eq!(g.validate(), Err(e));
            assert!(RegionLayout::new(g, 1).is_err(), "{g:?}");
        }
        assert!(Geometry {
            buf_size: MAX_BUF_SIZE,
            ..d
        }
        .validate()
        .is_ok());
        assert!(
            Geometry {
                tx_slots: 1000,
                ..d
            }
            .validate()
            .is_ok(),
            "slot counts need not be powers of two"
        );
    }

    /// docs/protocol.md's worked values.
    #[test]
    fn default_layouts_are_the_documented_ones() {
        let g = Geometry::default();
        let port = RegionLayout::new(g, 1).unwrap();
        assert_eq!(
            (
                port.nifp_ofs[0],
                port.csb_ofs[0],
                port.ring_ofs(0, Dir::Tx, 0),
                port.buf_base,
                port.nbufs,
                port.size
            ),
            (4096, 4608, 4864, 40960, 2050, 4_239_360)
        );
        let pipe = RegionLayout::new(g, 2).unwrap();
        assert_eq!(
            (
                [pipe.nifp_ofs[0], pipe.nifp_ofs[1]],
                [pipe.csb_ofs[0], pipe.csb_ofs[1]],
                pipe.ring_ofs(0, Dir::Tx, 0),
                pipe.buf_base,
                pipe.nbufs,
                pipe.size
            ),
            ([4096, 4608], [5120, 5376], 5632, 73728, 4098, 8_466_432)
        );
    }

    #[test]
    fn layout_is_disjoint_and_ordered() {
        let g = Geometry {
            tx_rings: 3,
            rx_rings: 2,
            tx_slots: 100,
            rx_slots: 4096,
            buf_size: 2048,
        };
        for ends in [1, 2] {
            let l = RegionLayout::new(g, ends).unwrap();
            assert!(l.nifp_ofs[0] >= REGION_HEADER_SIZE);
            let eg = l.end_geometry(ends as usize - 1);
            // The CSBs come before the rings (see `RegionLayout::new`),
            // right after the last `netmap_if`.
            let last_nifp = l.nifp_at(ends as usize - 1);
            assert_eq!(l.csb_ofs[0], last_nifp + NIFP_SIZE);
            let csb_end = l.csb_at(ends as usize - 1) + 5 * 128;
            assert!(csb_end <= l.ring_ofs(0, Dir::Tx, 0));
            let last_ring = l.ring_ofs(ends as usize - 1, Dir::Rx, eg.rx_rings - 1);
            assert!(last_ring + ring_bytes(eg.rx_slots) <= l.buf_base);
            assert_eq!(l.buf_base % PAGE, 0);
            let per_end = 3 * 100 + 2 * 4096;
            assert_eq!(l.nbufs as usize, 2 + ends as usize * per_end);
            assert!(l.size >= l.buf_base + l.nbufs as usize * 2048);
            assert_eq!(RegionLayout::from_header(&l.header()), Some(l));
            // buffer ranges of rings do not overlap and cover everything
            assert_eq!(l.first_buf(0, Dir::Tx, 0), 2);
            assert_eq!(l.first_buf(0, Dir::Tx, 1), 102);
            assert_eq!(l.first_buf(0, Dir::Rx, 0), 302);
            assert_eq!(l.first_buf(0, Dir::Rx, 1), 302 + 4096);
            if ends == 2 {
                assert_eq!(l.first_buf(1, Dir::Tx, 0), 2 + per_end as u32);
                // end 1 is mirrored: 2 TX rings of 4096 slots
                assert_eq!(l.first_buf(1, Dir::Rx, 0), 2 + per_end as u32 + 2 * 4096);
            }
        }
    }

    #[test]
    fn a_ports_pipes_share_its_buffer_pool() {
        let g = Geometry {
            tx_rings: 2,
            rx_rings: 3,
            tx_slots: 256,
            rx_slots: 512,
            buf_size: 2048,
        };
        let plain = RegionLayout::new(g, 1).unwrap();
        let l = RegionLayout::with_pipes(g, 3).unwrap();
        assert_eq!((l.ends, l.pipes), (7, 3));
        // The port's own end is where a plain port has it.
        assert_eq!(l.nifp_ofs[0], plain.nifp_ofs[0]);
        assert_eq!(l.end_geometry(0), g);
        let pg = g.port_pipe();
        assert_eq!((pg.tx_rings, pg.rx_rings, pg.tx_slots), (1, 1, 512));
        assert_eq!(pg, pg.mirrored(), "both ends of a port's pipe alike");
        // Every end's structures are disjoint and before the buffers; the
        // buffers are one pool, every ring's first buffer after the last.
        let mut spans = vec![(0, REGION_HEADER_SIZE)];
        let mut next_buf = RESERVED_BUFS;
        for e in 0..l.ends as usize {
            let eg = l.end_geometry(e);
            spans.push((l.nifp_at(e), l.nifp_at(e) + NIFP_SIZE));
            spans.push((l.csb_at(e), l.ktoa_ofs(e, Dir::Rx, eg.rx_rings - 1) + 64));
            for (d, n, slots) in [
                (Dir::Tx, eg.tx_rings, eg.tx_slots),
                (Dir::Rx, eg.rx_rings, eg.rx_slots),
            ] {
                for r in 0..n {
                    spans.push((l.ring_ofs(e, d, r), l.ring_ofs(e, d, r) + ring_bytes(slots)));
                    assert_eq!(l.first_buf(e, d, r), next_buf);
                    next_buf += slots;
                }
            }
        }
        assert_eq!(next_buf, l.nbufs);
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{w:?} overlap");
        }
        assert!(spans.last().unwrap().1 <= l.buf_base);
        assert!(l.buf_base + l.nbufs as usize * 2048 <= l.size);
        // Ends pair up: the port alone, each pipe's two with each other.
        assert_eq!(l.peer_end(0), 0);
        assert_eq!((l.peer_end(1), l.peer_end(2)), (2, 1));
        assert_eq!((l.peer_end(5), l.peer_end(6)), (6, 5));
        assert_eq!(l.pipe_ends(2), Some([5, 6]));
        assert_eq!(l.pipe_ends(3), None);
        assert_eq!(RegionLayout::new(g, 2).unwrap().peer_end(1), 0);
        // The header says it all, and nothing else passes for it.
        assert_eq!(RegionLayout::from_header(&l.header()), Some(l));
        let mut h = l.header();
        h.ends = 6;
        assert_eq!(RegionLayout::from_header(&h), None, "an even count above 2");
        h.ends = MAX_ENDS as u32 + 2;
        assert_eq!(RegionLayout::from_header(&h), None);
        let big = RegionLayout::with_pipes(g, 99).unwrap();
        assert_eq!(big.pipes, MAX_PORT_PIPES, "room is capped");
    }

    #[test]
    fn tampered_header_is_refused() {
        let l = RegionLayout::new(Geometry::default(), 1).unwrap();
        let mut h = l.header();
        h.nbufs += 1;
        assert_eq!(RegionLayout::from_header(&h), None);
        let mut h = l.header();
        h.magic[0] = b'X';
        assert_eq!(RegionLayout::from_header(&h), None);
        let mut h = l.header();
        h.tx_slots = 1 << 30;
        assert_eq!(RegionLayout::from_header(&h), None);
    }
}
