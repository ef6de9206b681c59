//! The AF_PACKET fallback: one packet socket per queue, for interfaces AF_XDP
//! cannot attach to.
//!
//! Each socket has both rings of TPACKET_V3 mapped in one area:
//!
//! - RX: blocks of 256 KiB that the kernel fills with frames back to back
//!   and hands over whole (`TP_STATUS_USER` in the block header), when one
//!   is full or after 1 ms, so a lone frame is not held. `take_batch` walks a
//!   block frame by frame, checking every offset and length against the
//!   block before use (a bad block is dropped whole and counted, never
//!   followed), and gives the block back when its last frame is taken; a
//!   partly taken block keeps its place for the next call, so `max` holds.
//! - TX: fixed-size frames (V3 sends exactly as V2 does: one frame per slot,
//!   `tp_next_offset` 0). `tx_push` copies into the next free slot and marks
//!   it `TP_STATUS_SEND_REQUEST`; `tx_flush` makes one `send(MSG_DONTWAIT)`,
//!   in which the kernel sends every marked slot. A slot is free again when
//!   the kernel has freed its skb (the data is referenced, not copied, until
//!   the driver is done with it). `PACKET_LOSS` is set, so the kernel skips a
//!   slot it cannot send instead of stopping the ring at it.
//!
//! Every frame crosses with a virtio-net header (`PACKET_VNET_HDR`): the host
//! stack's partial checksums and GSO frames (a veth whose peer sends TCP, GRO
//! on a real NIC) arrive as such, with their [`OffloadHdr`], instead of
//! as wrong checksums or frames over the MTU; on TX the header is zero. The
//! kernel strips VLAN tags into metadata before taps see frames; they are put
//! back in place, so a frame arrives as it was on the wire.
//!
//! With more than one queue the sockets join one `PACKET_FANOUT` group by
//! flow hash, so each gets a share of the flows. The sockets ignore the
//! interface's outgoing frames (ours and the host stack's), and hold the
//! interface in promiscuous mode until they close.
//!
//! The qdisc is not bypassed (`PACKET_QDISC_BYPASS`): bypassing it saves a
//! lock per frame, but a frame the driver refuses for a full queue would
//! then wait on our ring for the next flush instead of in the qdisc for the
//! driver's wake-up, and `tc` and packet captures on the interface would not
//! see our frames.

use std::cell::Cell;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use ringswitch_frame::{
    Caps, FrameQueue, OffloadHdr, PushError, QueueStats, SharedQueue, Stage, Taken, Wake,
};

use crate::{iface, DevError, Driver, Nic, NicConfig};

/// What AF_PACKET needs, for [`DevError::Permission`].
const NEEDS: &str = "CAP_NET_RAW (and CAP_NET_ADMIN for promiscuous mode)";

/// Most sockets one interface gets.
pub const MAX_QUEUES: u32 = 64;
/// Smallest and largest `ring_size`: TX slots per queue (fewer for a large
/// MTU, see `TX_BYTES_MAX`); RX memory is sized to hold as many 2 KiB
/// frames.
const RING_MIN: u32 = 64;
const RING_MAX: u32 = 16_384;

/// RX block size: a 64 KiB GSO frame and its headers fit in one.
const RX_BLOCK: usize = 256 * 1024;
/// RX blocks per socket, at least.
const RX_BLOCKS_MIN: usize = 4;
/// Nominal RX frame size: only sizes the RX memory (V3 packs frames).
const RX_FRAME: usize = 2048;
/// A block the kernel has started is handed over after this long.
const RX_RETIRE_MS: u32 = 1;
/// TX blocks hold whole slots; this size, or one slot if larger.
const TX_BLOCK: usize = 64 * 1024;
/// TX memory per socket, at most (fewer slots than `ring_size` when the MTU
/// makes them large), but never fewer than `RING_MIN` slots.
const TX_BYTES_MAX: usize = 8 << 20;

/// `tpacket3_hdr`, aligned: where a TX slot's data starts.
const HDR3: usize = size_of::<libc::tpacket3_hdr>();
/// The legacy virtio-net header `PACKET_VNET_HDR` puts before each frame.
const VNET: usize = OffloadHdr::LEN;
/// Block header (`tpacket_block_desc`): frames start after it.
const BLOCK_HDR: usize = size_of::<libc::tpacket_block_desc>();
/// Offset of `block_status` in a block (`tpacket_block_desc.hdr.bh1`).
const BLOCK_STATUS: usize = 8;
/// Offset of `tp_status` in a `tpacket3_hdr`.
const FRAME_STATUS: usize = 20;
/// Ethernet header, and one VLAN tag.
const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;
/// [`VLAN_HLEN`] for the 16-bit offsets of the offload header.
const VLAN_HLEN_U16: u16 = 4;
const _: () = assert!(VLAN_HLEN_U16 as usize == VLAN_HLEN);
/// Frames are aligned to this in an RX block (the kernel's `V3_ALIGNMENT`).
const ALIGN: usize = 8;

const _: () = assert!(HDR3 == 48 && BLOCK_HDR == 48 && HDR3.is_multiple_of(16));
const _: () = assert!(ALIGN.is_multiple_of(std::mem::align_of::<libc::tpacket3_hdr>()));

/// Opens `cfg.queues` AF_PACKET sockets on `cfg.ifname` (by default as many
/// as it has receive queues), sharing its frames by flow hash when more
/// than one.
pub fn open(cfg: &NicConfig) -> Result<Nic, DevError> {
    let ifname = cfg.ifname.as_str();
    iface::validate_name(ifname)?;
    let ifindex = iface::ifindex(ifname)?;
    let n = match cfg.queues {
        None => iface::rx_queue_count(ifname)?.min(MAX_QUEUES),
        Some(q) if (1..=MAX_QUEUES).contains(&q) => q,
        Some(q) => {
            return Err(DevError::Unsupported {
                name: ifname.to_string(),
                what: "that number of AF_PACKET queues",
                why: format!("{q} asked; use 1 to {MAX_QUEUES}"),
            })
        }
    };
    let ring = cfg.ring_size;
    iface::check_ring_size(
        ifname,
        ring,
        RING_MIN..=RING_MAX,
        "AF_PACKET rings here",
        "frames",
    )?;
    let mtu = iface::mtu(ifname)?;
    let geo = Geometry::new(mtu, ring);
    let mut queues: Vec<SharedQueue> = Vec::with_capacity(n as usize);
    let mut fanout_id = None;
    for q in 0..n {
        let pq = PacketQueue::open(ifname, ifindex, q, &geo, n > 1, &mut fanout_id)?;
        queues.push(Arc::new(Mutex::new(pq)));
    }
    tracing::debug!(
        ifname,
        queues = n,
        rx_bytes = geo.rx_block * geo.rx_blocks,
        tx_slots = geo.tx_slots,
        tx_slot_bytes = geo.tx_slot,
        "AF_PACKET sockets open"
    );
    Ok(Nic {
        ifname: ifname.to_string(),
        ifindex,
        queues,
        driver: Driver::Packet,
        reason: "AF_PACKET".into(),
    })
}

/// Sizes of one socket's rings.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    rx_block: usize,
    rx_blocks: usize,
    tx_block: usize,
    tx_blocks: usize,
    /// Bytes per TX slot (header, virtio-net header, frame), a power of two.
    tx_slot: usize,
    tx_slots_per_block: usize,
    tx_slots: usize,
    /// Longest frame sent: the MTU, an Ethernet header and a VLAN tag.
    tx_frame_max: usize,
}

impl Geometry {
    fn new(mtu: u32, ring: u32) -> Geometry {
        let ring = ring as usize;
        let tx_frame_max = mtu as usize + ETH_HLEN + VLAN_HLEN;
        let tx_slot = (HDR3 + VNET + tx_frame_max).next_power_of_two().max(2048);
        let tx_block = TX_BLOCK.max(tx_slot);
        let tx_slots_per_block = tx_block / tx_slot;
        let slots = ring.min((TX_BYTES_MAX / tx_slot).max(RING_MIN as usize));
        let tx_blocks = slots.div_ceil(tx_slots_per_block);
        Geometry {
            rx_block: RX_BLOCK,
            rx_blocks: (ring * RX_FRAME / RX_BLOCK).max(RX_BLOCKS_MIN),
            tx_block,
            tx_blocks,
            tx_slot,
            tx_slots_per_block,
            tx_slots: tx_blocks * tx_slots_per_block,
            tx_frame_max,
        }
    }

    fn rx_bytes(&self) -> usize {
        self.rx_block * self.rx_blocks
    }

    fn bytes(&self) -> usize {
        self.rx_bytes() + self.tx_block * self.tx_blocks
    }
}

/// The rings' shared mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// A new read-write mapping of `len` bytes of `fd` (-1 with
    /// `MAP_ANONYMOUS`), with mmap's `flags`; no address hint.
    fn new(len: usize, flags: libc::c_int, fd: RawFd) -> io::Result<Mapping> {
        // SAFETY: a new mapping with no address hint, so it replaces
        // nothing; mmap checks `fd`, `len` and `flags`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).expect("mmap does not return NULL on success"),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping of `len` bytes, unmapped once; no
        // reference into it outlives the queue that owns it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Where `take_batch` is in the RX ring.
#[derive(Debug, Default)]
struct RxPos {
    /// The block to look at next (or being taken).
    block: usize,
    /// Frames of that block still to take; 0: the block is not open.
    left: u32,
    /// Offset of the next frame in the block.
    off: usize,
    /// End of the block's frames (its `blk_len`, checked).
    end: usize,
}

/// One AF_PACKET socket with its RX and TX rings.
pub struct PacketQueue {
    /// Dropped before `fd`.
    map: Mapping,
    fd: OwnedFd,
    ifname: String,
    queue: u32,
    geo: Geometry,
    rx: RxPos,
    /// Next TX slot to fill.
    tx_head: usize,
    /// Slots were marked since the last successful send.
    tx_unsent: bool,
    /// The last send found the interface down.
    tx_down: bool,
    /// `tp_drops` so far (reading PACKET_STATISTICS resets the kernel's).
    kernel_drops: Cell<u64>,
    /// Blocks dropped as malformed.
    bad_blocks: u64,
    /// Frames the kernel cut short (longer than a block): dropped.
    truncated: u64,
    /// Frames too short to be Ethernet, not sent.
    tx_runts: u64,
    /// Sends that failed for another reason than a full queue or a down
    /// link (logged once).
    tx_send_errors: u64,
}

// SAFETY: the mapping pointer is this queue's own (its socket's rings); the
// queue is used by one thread at a time (`&mut self` for everything that
// touches the rings, `Cell` only for a counter read through `&self`), and
// nothing in it is tied to the thread that opened it.
unsafe impl Send for PacketQueue {}

/// `setsockopt` with a plain-data value.
fn setopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: the kernel reads `size_of::<T>()` bytes from `v`, which lives
    // across the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            crate::conv::socklen_of::<T>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `getsockopt` into a plain-data value (all zeroes valid).
fn getopt<T: Copy + Default>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = crate::conv::socklen_of::<T>();
    // SAFETY: the kernel writes at most `len` bytes into `v`, which lives
    // across the call.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut T).cast(), &mut len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

impl PacketQueue {
    fn open(
        ifname: &str,
        ifindex: u32,
        queue: u32,
        geo: &Geometry,
        fanout: bool,
        fanout_id: &mut Option<u16>,
    ) -> Result<PacketQueue, DevError> {
        let what = |w: &str| format!("{w} for {ifname} queue {queue}");
        // Protocol 0: nothing is received before the rings exist and the
        // socket is bound.
        // SAFETY: socket() with constant arguments returns a new fd or -1.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if fd < 0 {
            return Err(DevError::io(
                what("opening an AF_PACKET socket"),
                NEEDS,
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let opt = |name: libc::c_int, v: libc::c_int, w: &str| {
            setopt(raw, libc::SOL_PACKET, name, &v).map_err(|e| DevError::io(what(w), NEEDS, e))
        };
        opt(
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V3 as libc::c_int,
            "selecting TPACKET_V3",
        )?;
        opt(libc::PACKET_VNET_HDR, 1, "enabling virtio-net headers")?;
        opt(libc::PACKET_LOSS, 1, "setting PACKET_LOSS")?;

        let size = |v: usize| {
            u32::try_from(v).map_err(|_| {
                DevError::io(
                    what("sizing the rings"),
                    NEEDS,
                    io::Error::from(io::ErrorKind::InvalidInput),
                )
            })
        };
        let rx_req = libc::tpacket_req3 {
            tp_block_size: size(geo.rx_block)?,
            tp_block_nr: size(geo.rx_blocks)?,
            tp_frame_size: size(RX_FRAME)?,
            tp_frame_nr: size(geo.rx_bytes() / RX_FRAME)?,
            tp_retire_blk_tov: RX_RETIRE_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &rx_req)
            .map_err(|e| DevError::io(what("setting up the RX ring"), NEEDS, e))?;
        // V3 TX: fixed slots; the block timer and private area must be 0.
        let tx_req = libc::tpacket_req3 {
            tp_block_size: size(geo.tx_block)?,
            tp_block_nr: size(geo.tx_blocks)?,
            tp_frame_size: size(geo.tx_slot)?,
            tp_frame_nr: size(geo.tx_slots)?,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(raw, libc::SOL_PACKET, libc::PACKET_TX_RING, &tx_req)
            .map_err(|e| DevError::io(what("setting up the TX ring"), NEEDS, e))?;

        let len = geo.bytes();
        // The socket's rings, RX then TX, `len` bytes as set up above.
        let map = Mapping::new(len, libc::MAP_SHARED | libc::MAP_POPULATE, raw)
            .map_err(|e| DevError::io(what("mapping the rings"), NEEDS, e))?;

        // Enough send buffer for every slot in flight, so the kernel never
        // stops part-way through the ring for lack of it (the slots' skbs
        // count against it until the driver frees them). The forced size
        // needs CAP_NET_ADMIN; without it, the most the sysctl allows.
        let sndbuf =
            libc::c_int::try_from(geo.tx_slots * geo.tx_slot * 2).unwrap_or(libc::c_int::MAX);
        if setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf).is_err() {
            let _ = setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf);
        }

        // A socket joining a fanout group is bound (it receives everything)
        // before it joins: a filter that takes nothing keeps those frames,
        // which the group's other sockets also get, out of its ring.
        if fanout {
            let mut drop_all = [libc::sock_filter {
                code: 0x06, // BPF_RET | BPF_K
                jt: 0,
                jf: 0,
                k: 0,
            }];
            let prog = libc::sock_fprog {
                len: 1,
                filter: drop_all.as_mut_ptr(),
            };
            setopt(raw, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
                .map_err(|e| DevError::io(what("attaching a filter"), NEEDS, e))?;
        }

        // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = crate::conv::u16_const(libc::AF_PACKET);
        sll.sll_protocol = crate::conv::u16_const(libc::ETH_P_ALL).to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: binds our socket to an address that lives across the call.
        let r = unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                crate::conv::socklen_of::<libc::sockaddr_ll>(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENODEV) | Some(libc::ENXIO) => DevError::NoSuchInterface {
                    name: ifname.to_string(),
                },
                _ => DevError::io(what("binding to the interface"), NEEDS, e),
            });
        }

        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex as libc::c_int,
            mr_type: crate::conv::u16_const(libc::PACKET_MR_PROMISC),
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|e| DevError::io(what("entering promiscuous mode"), NEEDS, e))?;

        if fanout {
            // In a group the group's hook delivers, so "ignore outgoing" is
            // a group flag. The first socket asks for a fresh group id, the
            // others join it.
            let flags = libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
            let arg = match *fanout_id {
                None => (flags | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16,
                Some(id) => u32::from(id) | flags << 16,
            } as libc::c_int;
            setopt(raw, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
                .map_err(|e| DevError::io(what("joining the fanout group"), NEEDS, e))?;
            if fanout_id.is_none() {
                let v: libc::c_int = getopt(raw, libc::SOL_PACKET, libc::PACKET_FANOUT)
                    .map_err(|e| DevError::io(what("reading the fanout group"), NEEDS, e))?;
                // The group id is the low 16 bits.
                *fanout_id = u16::try_from(v & 0xffff).ok();
            }
            let none: libc::c_int = 0;
            setopt(raw, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &none)
                .map_err(|e| DevError::io(what("detaching the filter"), NEEDS, e))?;
        } else {
            opt(libc::PACKET_IGNORE_OUTGOING, 1, "ignoring outgoing frames")?;
        }

        Ok(PacketQueue::new(map, fd, ifname, queue, *geo))
    }

    /// A queue over `map`, the rings of socket `fd` laid out as `geo`,
    /// before its first frame.
    fn new(map: Mapping, fd: OwnedFd, ifname: &str, queue: u32, geo: Geometry) -> PacketQueue {
        PacketQueue {
            map,
            fd,
            ifname: ifname.to_string(),
            queue,
            geo,
            rx: RxPos::default(),
            tx_head: 0,
            tx_unsent: false,
            tx_down: false,
            kernel_drops: Cell::new(0),
            bad_blocks: 0,
            truncated: 0,
            tx_runts: 0,
            tx_send_errors: 0,
        }
    }

    /// Start of RX block `b` (< `rx_blocks`).
    fn rx_block(&self, b: usize) -> *mut u8 {
        debug_assert!(b < self.geo.rx_blocks);
        // SAFETY: block `b` lies inside the mapping (RX blocks come first).
        unsafe { self.map.ptr.as_ptr().add(b * self.geo.rx_block) }
    }

    /// The status word of RX block `b`, shared with the kernel.
    fn rx_status(&self, b: usize) -> &AtomicU32 {
        // SAFETY: `block_status` is an aligned u32 inside block `b` of our
        // mapping, which lives as long as `self`; the kernel and we only
        // access it atomically.
        unsafe { AtomicU32::from_ptr(self.rx_block(b).add(BLOCK_STATUS).cast()) }
    }

    /// Whether block `b` is ours (the kernel handed it over).
    fn rx_block_ready(&self, b: usize) -> bool {
        // Acquire: pairs with the kernel's write barrier before it stores
        // TP_STATUS_USER when it closes the block, so the block's frames are
        // visible before we read them.
        self.rx_status(b).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn rx_release(&mut self) {
        // Release: pairs with the kernel's read of the status before it
        // fills the block again, so our reads of its frames (and the VLAN
        // tags written into it) are done before it is overwritten.
        self.rx_status(self.rx.block)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.rx.block = (self.rx.block + 1) % self.geo.rx_blocks;
        self.rx.left = 0;
    }

    /// Drops the current block as malformed.
    fn rx_bad_block(&mut self, why: &'static str) {
        self.bad_blocks += 1;
        if self.bad_blocks == 1 {
            tracing::warn!(
                ifname = %self.ifname,
                queue = self.queue,
                block = self.rx.block,
                why,
                "malformed AF_PACKET RX block; dropped"
            );
        }
        self.rx_release();
    }

    /// Opens the current block if the kernel has handed it over: checks its
    /// header. Returns false when there is none.
    fn rx_open_block(&mut self) -> bool {
        // Each turn gives one block back: at most a lap of the ring.
        for _ in 0..self.geo.rx_blocks {
            let b = self.rx.block;
            if !self.rx_block_ready(b) {
                return false;
            }
            let base = self.rx_block(b);
            // SAFETY: the block header lies inside block `b`, which is ours
            // (status USER) until we store KERNEL; aligned plain data.
            let (num_pkts, first, blk_len) = unsafe {
                let h = &*base.cast::<libc::tpacket_block_desc>();
                let bh = h.hdr.bh1;
                (
                    bh.num_pkts,
                    bh.offset_to_first_pkt as usize,
                    bh.blk_len as usize,
                )
            };
            if blk_len > self.geo.rx_block || first < BLOCK_HDR || first > blk_len {
                self.rx_bad_block("block header out of bounds");
                continue;
            }
            if num_pkts == 0 {
                self.rx_release();
                continue;
            }
            if num_pkts as usize > (blk_len - first) / (HDR3 + ETH_HLEN) {
                self.rx_bad_block("more frames than the block can hold");
                continue;
            }
            self.rx = RxPos {
                block: b,
                left: num_pkts,
                off: first,
                end: blk_len,
            };
            return true;
        }
        false
    }
}

/// A frame found in an RX block, checked.
struct RxFrame {
    /// Offset of the frame's first byte in the block.
    start: usize,
    len: usize,
    hdr: OffloadHdr,
    /// `tp_next_offset`, unchecked.
    next: usize,
}

enum Parsed {
    Frame(RxFrame),
    /// Cut short by the kernel: skip it.
    Truncated {
        next: usize,
    },
    Bad(&'static str),
}

impl PacketQueue {
    /// Checks the frame at the current position of the open block and puts
    /// its VLAN tag back in front of its EtherType.
    fn rx_parse(&mut self) -> Parsed {
        let (off, end) = (self.rx.off, self.rx.end);
        if !off.is_multiple_of(ALIGN) || off + HDR3 > end {
            return Parsed::Bad("frame header out of bounds");
        }
        let base = self.rx_block(self.rx.block);
        // SAFETY: `off .. off + HDR3` lies inside the open block, which is
        // ours; aligned (checked above) plain data.
        let h: libc::tpacket3_hdr = unsafe { std::ptr::read(base.add(off).cast()) };
        let mac = h.tp_mac as usize;
        let snap = h.tp_snaplen as usize;
        let next = h.tp_next_offset as usize;
        let stop = off.checked_add(mac).and_then(|x| x.checked_add(snap));
        if mac < HDR3 + VNET || stop.is_none_or(|stop| stop > end) {
            return Parsed::Bad("frame out of bounds");
        }
        if snap != h.tp_len as usize {
            return Parsed::Truncated { next };
        }
        if snap < ETH_HLEN {
            return Parsed::Bad("frame shorter than an Ethernet header");
        }
        // SAFETY: `off + mac - VNET .. off + mac + snap` lies inside the open
        // block (checked above), which is ours until we give it back; the
        // kernel does not write it meanwhile.
        let v = unsafe { std::slice::from_raw_parts(base.add(off + mac - VNET), VNET) };
        // The kernel writes the header in host order.
        let mut hdr = OffloadHdr::from_ne_bytes(v).unwrap_or_default();
        let (mut start, mut len) = (off + mac, snap);
        if h.tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
            // The tag goes back between the addresses and the EtherType:
            // the addresses move 4 bytes down, over the virtio-net header
            // (already read; mac >= HDR3 + VNET > HDR3 + 4, so never over the
            // frame header).
            let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                h.hv1.tp_vlan_tpid
            } else {
                crate::conv::u16_const(libc::ETH_P_8021Q)
            };
            // The TCI is 16 bits wide in a 32-bit field.
            let tci = u16::try_from(h.hv1.tp_vlan_tci & 0xffff).unwrap_or_default();
            let mut tag = [0u8; VLAN_HLEN];
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
            // SAFETY: `off + mac - 4 .. off + mac + 12` lies inside the open
            // block (mac >= HDR3 + 4, snap >= 14), which is ours.
            unsafe {
                let p = base.add(off + mac);
                std::ptr::copy(p, p.sub(VLAN_HLEN), 12);
                std::ptr::copy_nonoverlapping(tag.as_ptr(), p.add(12 - VLAN_HLEN), VLAN_HLEN);
            }
            start -= VLAN_HLEN;
            len += VLAN_HLEN;
            // The kernel counted offsets from the untagged frame.
            if hdr.flags & ringswitch_frame::F_NEEDS_CSUM != 0 {
                hdr.csum_start = hdr.csum_start.saturating_add(VLAN_HLEN_U16);
            }
            if hdr.hdr_len != 0 {
                hdr.hdr_len = hdr.hdr_len.saturating_add(VLAN_HLEN_U16);
            }
        }
        Parsed::Frame(RxFrame {
            start,
            len,
            hdr,
            next,
        })
    }

    /// Moves past the frame just taken (its `tp_next_offset` is `next`).
    fn rx_advance(&mut self, next: usize) {
        self.rx.left -= 1;
        if self.rx.left == 0 {
            self.rx_release();
        } else if next < HDR3
            || !next.is_multiple_of(ALIGN)
            || next >= self.rx.end.saturating_sub(self.rx.off)
        {
            self.rx_bad_block("next frame out of bounds");
        } else {
            self.rx.off += next;
        }
    }

    /// Asks the kernel to send the marked TX slots; the errno on failure.
    fn send_ring(&self) -> Result<(), i32> {
        // SAFETY: a zero-length non-blocking send on our own socket, no
        // buffer and no address: "send what the TX ring holds".
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r >= 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO))
        }
    }

    /// TX slot `i` (< `tx_slots`).
    fn tx_slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.geo.tx_slots);
        let g = &self.geo;
        let at = g.rx_bytes()
            + (i / g.tx_slots_per_block) * g.tx_block
            + (i % g.tx_slots_per_block) * g.tx_slot;
        // SAFETY: slot `i` lies inside the mapping (TX blocks follow RX).
        unsafe { self.map.ptr.as_ptr().add(at) }
    }

    fn tx_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: `tp_status` is an aligned u32 inside slot `i` of our
        // mapping, which lives as long as `self`; the kernel and we only
        // access it atomically.
        unsafe { AtomicU32::from_ptr(self.tx_slot(i).add(FRAME_STATUS).cast()) }
    }
}

impl FrameQueue for PacketQueue {
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken {
        let mut taken = 0;
        while taken < max {
            if self.rx.left == 0 && !self.rx_open_block() {
                break;
            }
            match self.rx_parse() {
                Parsed::Frame(fr) => {
                    // SAFETY: `start .. start + len` was checked to lie
                    // inside the open block, which is ours until
                    // `rx_release`, after this slice is gone.
                    let frame = unsafe {
                        std::slice::from_raw_parts(
                            self.rx_block(self.rx.block).add(fr.start),
                            fr.len,
                        )
                    };
                    taken += 1;
                    let more = stage.put(frame, fr.hdr);
                    self.rx_advance(fr.next);
                    if !more {
                        break;
                    }
                }
                Parsed::Truncated { next } => {
                    self.truncated += 1;
                    if self.truncated == 1 {
                        tracing::warn!(
                            ifname = %self.ifname,
                            queue = self.queue,
                            "a frame longer than an AF_PACKET block was cut short; dropped"
                        );
                    }
                    self.rx_advance(next);
                }
                Parsed::Bad(why) => self.rx_bad_block(why),
            }
        }
        Taken {
            frames: taken,
            ..Taken::default()
        }
    }

    fn has_work(&self) -> bool {
        self.rx.left > 0 || self.rx_block_ready(self.rx.block)
    }

    fn push(&mut self, _hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError> {
        if frame.len() > self.geo.tx_frame_max {
            return Err(PushError::TooLong);
        }
        if frame.len() < ETH_HLEN {
            self.tx_runts += 1;
            return Ok(());
        }
        let i = self.tx_head;
        // Acquire: pairs with the kernel's store of TP_STATUS_AVAILABLE when
        // it frees the slot's skb, so the driver is done reading the slot
        // before we write it.
        let status = self.tx_status(i).load(Ordering::Acquire);
        if status != libc::TP_STATUS_AVAILABLE {
            return Err(if self.tx_down {
                PushError::Down
            } else {
                PushError::Full
            });
        }
        let p = self.tx_slot(i);
        let len = VNET + frame.len();
        // At most a slot's size (see below).
        let len32 = crate::conv::u32_of(len);
        // SAFETY: the slot is ours (AVAILABLE) until we mark it; `HDR3 + len`
        // bytes fit in it (frame.len() <= tx_frame_max, and the slot was
        // sized for HDR3 + VNET + tx_frame_max); the sources do not overlap
        // the mapping.
        unsafe {
            let h = p.cast::<libc::tpacket3_hdr>();
            (*h).tp_next_offset = 0;
            (*h).tp_len = len32;
            (*h).tp_snaplen = len32;
            (*h).tp_mac = 0;
            (*h).tp_net = 0;
            let d = p.add(HDR3);
            // `tx_caps` offers no offload: the header is always empty.
            std::ptr::write_bytes(d, 0, VNET);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), d.add(VNET), frame.len());
        }
        // Release: pairs with the kernel's read of the status (and barrier
        // after it) in send, so it sees the slot's contents written above.
        self.tx_status(i)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx_head = (i + 1) % self.geo.tx_slots;
        self.tx_unsent = true;
        Ok(())
    }

    fn flush(&mut self) -> Wake {
        if !self.tx_unsent && !self.tx_down {
            return Wake::NONE;
        }
        // A link that went down leaves ENETDOWN pending on the socket, and
        // the first send after it is up again returns (and clears) it
        // without sending: one retry tells that from a link still down.
        let mut r = self.send_ring();
        if r == Err(libc::ENETDOWN) {
            r = self.send_ring();
        }
        match r {
            Ok(()) => {
                self.tx_down = false;
                // The kernel takes marked slots in order and stops early
                // only when out of send buffer: if the last one we marked is
                // taken, so are all.
                let last = (self.tx_head + self.geo.tx_slots - 1) % self.geo.tx_slots;
                // Relaxed: only deciding whether to send again.
                self.tx_unsent =
                    self.tx_status(last).load(Ordering::Relaxed) == libc::TP_STATUS_SEND_REQUEST;
            }
            // Out of send buffer, or the driver's queue is full: the slots
            // stay marked and go at the next flush.
            Err(libc::EAGAIN) | Err(libc::ENOBUFS) => {}
            Err(libc::ENETDOWN) | Err(libc::ENXIO) | Err(libc::ENODEV) => {
                if !self.tx_down {
                    tracing::debug!(
                        ifname = %self.ifname,
                        queue = self.queue,
                        "interface down; frames wait on the TX ring"
                    );
                }
                self.tx_down = true;
            }
            Err(e) => {
                self.tx_send_errors += 1;
                if self.tx_send_errors == 1 {
                    tracing::warn!(
                        ifname = %self.ifname,
                        queue = self.queue,
                        error = %io::Error::from_raw_os_error(e),
                        "AF_PACKET send failed (logged once)"
                    );
                }
            }
        }
        Wake::NONE
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn caps(&self) -> Caps {
        Caps::default()
    }

    fn stats(&self) -> QueueStats {
        // Reading the statistics resets the kernel's counters.
        // `tpacket_stats_v3`: packets, drops, times the ring was frozen.
        if let Ok([_, drops, _]) = getopt::<[u32; 3]>(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        ) {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(drops));
        }
        QueueStats {
            kernel_rx_dropped: self.kernel_drops.get() + self.bad_blocks + self.truncated,
            kernel_tx_invalid: self.tx_runts,
            ..QueueStats::default()
        }
    }

    fn driver(&self) -> &'static str {
        Driver::Packet.as_str()
    }
}

#[cfg(test)]
// Test fixtures, not the data path.
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;
    use ringswitch_frame::F_NEEDS_CSUM;

    /// A queue over an anonymous mapping laid out as a socket's rings, for
    /// blocks written by hand; its fd is an unrelated socket.
    fn fake(ring: u32) -> PacketQueue {
        let geo = Geometry::new(1500, ring);
        let len = geo.bytes();
        let map = Mapping::new(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1).unwrap();
        // SAFETY: socket() with constant arguments; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        PacketQueue::new(map, fd, "fake0", 0, geo)
    }

    /// A frame as the kernel lays it out in a block.
    #[derive(Clone, Default)]
    struct Fake {
        data: Vec<u8>,
        /// `tp_len`, if not the data's length (a truncated frame).
        len: Option<u32>,
        vlan: Option<(u16, u16)>,
        hdr: OffloadHdr,
    }

    impl Fake {
        fn new(seq: u8, len: usize) -> Fake {
            Fake {
                data: (0..len).map(|i| seq.wrapping_add(i as u8)).collect(),
                ..Default::default()
            }
        }
    }

    /// Where the kernel puts the frame: after the header, the address and
    /// the virtio-net header, with the network header 16-aligned.
    const MAC: usize = 106 - ETH_HLEN;

    /// Writes `frames` into block `b` and hands it over; `tweak` may then
    /// corrupt the block's bytes.
    fn put_block(q: &PacketQueue, b: usize, frames: &[Fake], tweak: impl FnOnce(&mut Vec<u8>)) {
        let mut blk = vec![0u8; q.geo.rx_block];
        let mut off = BLOCK_HDR;
        let mut last = off;
        for f in frames {
            let next = (MAC + f.data.len()).next_multiple_of(ALIGN);
            let mut h = libc::tpacket3_hdr {
                tp_next_offset: next as u32,
                tp_sec: 0,
                tp_nsec: 0,
                tp_snaplen: f.data.len() as u32,
                tp_len: f.len.unwrap_or(f.data.len() as u32),
                tp_status: libc::TP_STATUS_USER,
                tp_mac: MAC as u16,
                tp_net: (MAC + ETH_HLEN) as u16,
                hv1: libc::tpacket_hdr_variant1 {
                    tp_rxhash: 0,
                    tp_vlan_tci: 0,
                    tp_vlan_tpid: 0,
                    tp_padding: 0,
                },
                tp_padding: [0; 8],
            };
            if let Some((tpid, tci)) = f.vlan {
                h.tp_status |= libc::TP_STATUS_VLAN_VALID | libc::TP_STATUS_VLAN_TPID_VALID;
                h.hv1.tp_vlan_tci = tci.into();
                h.hv1.tp_vlan_tpid = tpid;
            }
            // SAFETY: HDR3 bytes at `off` of our vector; unaligned write.
            unsafe { std::ptr::write_unaligned(blk.as_mut_ptr().add(off).cast(), h) };
            blk[off + MAC - VNET..off + MAC].copy_from_slice(&f.hdr.to_le_bytes());
            blk[off + MAC..off + MAC + f.data.len()].copy_from_slice(&f.data);
            last = off;
            off += next;
        }
        // The last frame's next offset is 0.
        if !frames.is_empty() {
            blk[last..last + 4].copy_from_slice(&0u32.to_ne_bytes());
        }
        blk[12..16].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        blk[16..20].copy_from_slice(&(BLOCK_HDR as u32).to_ne_bytes());
        blk[20..24].copy_from_slice(&(off as u32).to_ne_bytes());
        tweak(&mut blk);
        // SAFETY: block `b` of the queue's mapping, `rx_block` bytes; no
        // reference into it is alive.
        unsafe {
            std::ptr::copy_nonoverlapping(blk.as_ptr(), q.rx_block(b), blk.len());
        }
        q.rx_status(b)
            .store(libc::TP_STATUS_USER, Ordering::Release);
    }

    fn take(q: &mut PacketQueue, max: usize) -> Vec<(Vec<u8>, OffloadHdr)> {
        let mut stage = Stage::new(max);
        let n = q.take_batch(max, &mut stage).frames;
        let v = stage.to_vec();
        assert_eq!(n, v.len());
        v
    }

    fn released(q: &PacketQueue, b: usize) -> bool {
        q.rx_status(b).load(Ordering::Acquire) == libc::TP_STATUS_KERNEL
    }

    #[test]
    fn blocks_are_walked_across_calls() {
        let mut q = fake(64);
        assert!(!q.has_work());
        let frames: Vec<Fake> = (0..5)
            .map(|i| Fake::new(i, 60 + i as usize * 333))
            .collect();
        put_block(&q, 0, &frames[..3], |_| {});
        put_block(&q, 1, &frames[3..], |_| {});
        assert!(q.has_work());
        let a = take(&mut q, 2);
        assert!(!released(&q, 0), "a partly taken block stays ours");
        assert!(q.has_work());
        let b = take(&mut q, 64);
        assert!(released(&q, 0) && released(&q, 1));
        let got: Vec<Vec<u8>> = a.into_iter().chain(b).map(|(f, _)| f).collect();
        let want: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
        assert_eq!(got, want);
        assert!(!q.has_work());
        assert_eq!(q.rx.block, 2);
        // A full stage stops a batch after the frame that filled it.
        put_block(&q, 2, &frames[..3], |_| {});
        let mut one = Stage::with_bytes(ringswitch_frame::FRAME_MAX + 1, 1);
        assert_eq!(q.take_batch(64, &mut one).frames, 1);
        assert_eq!(take(&mut q, 64).len(), 2);
        assert_eq!(q.stats().kernel_rx_dropped, 0);
    }

    #[test]
    fn vlan_tags_go_back_and_offsets_follow() {
        let mut q = fake(64);
        let mut f = Fake::new(1, 100);
        f.vlan = Some((0x88a8, 0x1234));
        f.hdr = OffloadHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..Default::default()
        };
        put_block(&q, 0, &[f.clone()], |_| {});
        let got = take(&mut q, 64);
        let mut want = f.data.clone();
        want.splice(12..12, [0x88, 0xa8, 0x12, 0x34]);
        assert_eq!(got[0].0, want);
        assert_eq!((got[0].1.csum_start, got[0].1.csum_offset), (38, 16));
    }

    #[test]
    fn malformed_blocks_are_dropped_not_followed() {
        let frames: Vec<Fake> = (0..3).map(|i| Fake::new(i, 200)).collect();
        type Tweak = fn(&mut Vec<u8>);
        let cases: [(&str, Tweak, usize); 7] = [
            (
                "blk_len past the block",
                |b| {
                    let l = b.len() as u32 + 8;
                    b[20..24].copy_from_slice(&l.to_ne_bytes());
                },
                0,
            ),
            (
                "first frame inside the header",
                |b| b[16..20].copy_from_slice(&8u32.to_ne_bytes()),
                0,
            ),
            (
                "absurd frame count",
                |b| b[12..16].copy_from_slice(&u32::MAX.to_ne_bytes()),
                0,
            ),
            (
                "snaplen past blk_len",
                |b| {
                    let at = BLOCK_HDR + 12;
                    b[at..at + 4].copy_from_slice(&0x7fff_ffffu32.to_ne_bytes());
                },
                0,
            ),
            (
                "mac inside the header",
                |b| {
                    let at = BLOCK_HDR + 24;
                    b[at..at + 2].copy_from_slice(&20u16.to_ne_bytes());
                },
                0,
            ),
            (
                "next offset past the end",
                |b| {
                    b[BLOCK_HDR..BLOCK_HDR + 4].copy_from_slice(&0x10_0000u32.to_ne_bytes());
                },
                1,
            ),
            (
                "next offset unaligned",
                |b| {
                    let at = BLOCK_HDR;
                    let n = u32::from_ne_bytes(b[at..at + 4].try_into().unwrap()) + 3;
                    b[at..at + 4].copy_from_slice(&n.to_ne_bytes());
                },
                1,
            ),
        ];
        for (what, tweak, before) in cases {
            let mut q = fake(64);
            put_block(&q, 0, &frames, tweak);
            put_block(&q, 1, &frames[..1], |_| {});
            let got = take(&mut q, 64);
            // Frames checked before the fault arrive, then the block is
            // dropped, and the next block is read.
            assert_eq!(got.len(), before + 1, "{what}");
            assert_eq!(got[before].0, frames[0].data, "{what}");
            assert!(released(&q, 0) && released(&q, 1), "{what}");
            assert_eq!(
                q.stats().kernel_rx_dropped,
                1,
                "{what}: one bad block counted"
            );
        }
    }

    #[test]
    fn truncated_frames_are_skipped() {
        let mut q = fake(64);
        let mut frames: Vec<Fake> = (0..3).map(|i| Fake::new(i, 200)).collect();
        frames[1].len = Some(70_000);
        put_block(&q, 0, &frames, |_| {});
        let got: Vec<Vec<u8>> = take(&mut q, 64).into_iter().map(|(f, _)| f).collect();
        assert_eq!(got, vec![frames[0].data.clone(), frames[2].data.clone()]);
        assert_eq!(q.stats().kernel_rx_dropped, 1);
    }

    #[test]
    fn geometry() {
        let g = Geometry::new(1500, 2048);
        assert_eq!((g.tx_slot, g.tx_slots, g.tx_frame_max), (2048, 2048, 1518));
        assert_eq!((g.rx_blocks, g.bytes()), (16, 8 << 20));
        // Jumbo frames: bigger slots, fewer of them.
        let g = Geometry::new(9000, 2048);
        assert_eq!((g.tx_slot, g.tx_slots), (16_384, 512));
        // Loopback's 64 KiB MTU: one slot per block, at least RING_MIN.
        let g = Geometry::new(65_536, 2048);
        assert_eq!((g.tx_slot, g.tx_block, g.tx_slots), (131_072, 131_072, 64));
        // The smallest ring: still RX_BLOCKS_MIN blocks.
        let g = Geometry::new(1500, RING_MIN);
        assert_eq!((g.rx_blocks, g.tx_slots), (RX_BLOCKS_MIN, 64));
        for mtu in [68, 1500, 4000, 9000, 65_536] {
            for ring in [RING_MIN, 256, 2048, RING_MAX] {
                let g = Geometry::new(mtu, ring);
                assert!(HDR3 + VNET + g.tx_frame_max <= g.tx_slot);
                assert_eq!(g.tx_block % g.tx_slot, 0);
                assert_eq!(g.tx_block % 4096, 0);
                assert!(g.tx_slots * g.tx_slot <= TX_BYTES_MAX.max(RING_MIN as usize * g.tx_slot));
            }
        }
    }
}
