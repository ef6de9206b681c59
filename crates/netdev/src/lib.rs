//! Kernel network interfaces as switch ports.
//!
//! A switch port backed by a kernel interface is a set of [`FrameQueue`]s:
//! one per NIC queue (an AF_XDP socket, or an AF_PACKET socket where XDP
//! cannot attach) or one per TAP queue (the host's own stack). The switch
//! worker serving a queue waits for its [`FrameQueue::wake_fd`] in epoll
//! (level triggered: the kernel does the double check), takes frames in
//! batches with [`FrameQueue::take_batch`], and other workers hand it frames
//! with [`FrameQueue::push`] and one [`FrameQueue::flush`] per batch.
//!
//! - [`xdp`]: AF_XDP sockets through libxdp (its default redirect program,
//!   one socket per queue, need_wakeup), native or generic mode.
//! - [`packet`]: the AF_PACKET fallback (TPACKET_V3, mmap'ed rings).
//! - [`tap`]: a multi-queue TAP interface with virtio-net headers.
//! - [`open_nic`] picks between the first two and says why: AF_XDP for a
//!   device, AF_PACKET for a software interface (veth), whose frames come
//!   from a local stack with GSO and partial checksums.
//!
//! Frames carry an `OffloadHdr` (the virtio-net header's offload fields):
//! a TAP queue takes and gives partial checksums and TSO frames as they are;
//! an AF_PACKET queue may give them (GRO, a veth's unfinished checksums)
//! but takes plain frames, as an AF_XDP queue does ([`FrameQueue::caps`]
//! says which).

#![warn(missing_docs)]
// No narrowing cast on a length or an index (issue 15): every conversion
// that can lose bits is checked or goes through a type that cannot.
#![deny(clippy::cast_possible_truncation)]

pub mod iface;
pub mod packet;
pub mod tap;
pub mod xdp;

mod error;

#[cfg(doc)]
use ringswitch_frame::FrameQueue;

pub use error::DevError;

/// How a queue is driven, for `port-list` and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// AF_XDP, XDP program in the driver, frames in our memory (zero copy).
    XdpNativeZeroCopy,
    /// AF_XDP, XDP program in the driver, frames copied into our memory.
    XdpNative,
    /// AF_XDP over generic (skb) XDP.
    XdpGeneric,
    /// AF_PACKET with TPACKET_V3 rings.
    Packet,
    /// A TAP queue.
    Tap,
}

impl Driver {
    /// Short name: `xdp-native-zc`, `xdp-native`, `xdp-generic`, `af-packet`,
    /// `tap`.
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::XdpNativeZeroCopy => "xdp-native-zc",
            Driver::XdpNative => "xdp-native",
            Driver::XdpGeneric => "xdp-generic",
            Driver::Packet => "af-packet",
            Driver::Tap => "tap",
        }
    }
}

pub use ringswitch_frame::NicMode;

/// What to open on a NIC.
#[derive(Debug, Clone)]
pub struct NicConfig {
    /// Interface name.
    pub ifname: String,
    /// How to attach.
    pub mode: NicMode,
    /// Queues to open (`None`: every combined/RX queue the interface has).
    pub queues: Option<u32>,
    /// Descriptors per ring (fill, RX, TX, completion), a power of two.
    pub ring_size: u32,
}

impl NicConfig {
    /// Defaults for `ifname`: auto mode, every queue, 2048 descriptors.
    pub fn new(ifname: &str) -> NicConfig {
        NicConfig {
            ifname: ifname.to_string(),
            mode: NicMode::Auto,
            queues: None,
            ring_size: 2048,
        }
    }
}

/// An opened NIC: its queues, and how they are driven.
pub struct Nic {
    /// Interface name.
    pub ifname: String,
    /// Interface index.
    pub ifindex: u32,
    /// One per queue, queue 0 first.
    pub queues: Vec<ringswitch_frame::SharedQueue>,
    /// How the queues are driven.
    pub driver: Driver,
    /// Why this driver: one sentence for the log ("native XDP is not
    /// supported by veth's driver here: ..., using generic XDP").
    pub reason: String,
}

/// Opens `cfg.ifname`, logging which way and why. In [`NicMode::Auto`]: a
/// device's queues over AF_XDP where it attaches, else AF_PACKET; a
/// software interface (veth and the like, [`iface::Feed`]) over AF_PACKET,
/// which carries the offloads its stack hands over.
pub fn open_nic(cfg: &NicConfig) -> Result<Nic, DevError> {
    iface::validate_name(&cfg.ifname)?;
    iface::ifindex(&cfg.ifname)?;
    let nic = match cfg.mode {
        NicMode::Native | NicMode::Generic => {
            let mode = if cfg.mode == NicMode::Native {
                xdp::XdpMode::Native
            } else {
                xdp::XdpMode::Generic
            };
            let nic = xdp::open(cfg, mode)?;
            if let Ok(iface::Feed::Software { driver }) = iface::feed(&cfg.ifname) {
                // Once per attach: what this choice cannot carry.
                tracing::warn!(
                    ifname = %cfg.ifname,
                    driver = %driver,
                    "AF_XDP on a software interface, as asked: GSO frames its stack hands \
                     over are dropped (counted in drop_kernel) and partial checksums arrive \
                     unfinished, so TCP from it can stall; turn the sender's offloads off \
                     (ethtool -K PEER tso off gso off tx off) or attach with --mode auto \
                     (AF_PACKET, which carries them)"
                );
            }
            nic
        }
        NicMode::Packet => {
            let mut n = packet::open(cfg)?;
            n.reason = "AF_PACKET, as asked".into();
            n
        }
        NicMode::Auto => auto(cfg)?,
    };
    tracing::info!(ifname = %nic.ifname, driver = nic.driver.as_str(), reason = %nic.reason, "NIC attached");
    Ok(nic)
}

/// Errors that no other way of attaching can get around.
fn decisive(e: &DevError) -> bool {
    matches!(
        e,
        DevError::NoSuchInterface { .. } | DevError::BadName { .. } | DevError::Busy { .. }
    )
}

fn auto(cfg: &NicConfig) -> Result<Nic, DevError> {
    // A software interface's frames come from a local stack: GSO frames
    // and partial checksums, which AF_XDP cannot carry (an XDP frame has no
    // room for the offload request) and AF_PACKET's virtio-net header does.
    // On a veth AF_PACKET is also the faster of the two here
    // (bench/results/NIC-REPORT.md).
    let feed = iface::feed(&cfg.ifname)?;
    if let iface::Feed::Software { driver } = &feed {
        match packet::open(cfg) {
            Ok(mut n) => {
                n.reason = format!(
                    "{} is a software interface (driver {driver}) fed by a network stack, \
                     which hands over GSO frames and partial checksums: AF_PACKET carries them \
                     with its virtio-net header, AF_XDP cannot",
                    cfg.ifname
                );
                return Ok(n);
            }
            Err(e) if decisive(&e) => return Err(e),
            Err(e) => {
                tracing::warn!(ifname = %cfg.ifname, error = %e, "AF_PACKET does not open on a software interface; trying AF_XDP");
            }
        }
    }
    let native = match xdp::open(cfg, xdp::XdpMode::Native) {
        Ok(n) => return Ok(n),
        Err(e) if decisive(&e) => return Err(e),
        Err(e) => e,
    };
    tracing::debug!(ifname = %cfg.ifname, error = %native, "native XDP does not attach");
    let generic = match xdp::open(cfg, xdp::XdpMode::Generic) {
        Ok(mut n) => {
            n.reason = format!("native XDP does not attach ({native}); using generic XDP");
            return Ok(n);
        }
        Err(e) if decisive(&e) => return Err(e),
        Err(e) => e,
    };
    match packet::open(cfg) {
        Ok(mut n) => {
            n.reason = format!(
                "AF_XDP does not attach (native: {native}; generic: {generic}); using AF_PACKET"
            );
            tracing::warn!(ifname = %cfg.ifname, reason = %n.reason, "falling back to AF_PACKET");
            Ok(n)
        }
        // Without the privileges for XDP, say what XDP needs: it is the
        // better way once they are granted.
        Err(DevError::Permission { .. }) if matches!(native, DevError::Permission { .. }) => {
            Err(native)
        }
        Err(e) => Err(e),
    }
}

/// Conversions that cannot wrap: sizes and counts bounded by the rings'
/// geometry, and the C library's small constants, checked instead of cast.
pub(crate) mod conv {
    /// The size of `T` as a socket option or address length.
    #[inline]
    pub(crate) fn socklen_of<T>() -> libc::socklen_t {
        libc::socklen_t::try_from(std::mem::size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
    }

    /// A count or length bounded by a ring or a frame (far below 2^32).
    #[inline(always)]
    pub(crate) fn u32_of(x: usize) -> u32 {
        u32::try_from(x).unwrap_or(u32::MAX)
    }

    /// One of the C library's 16-bit constants given as an int.
    #[inline(always)]
    pub(crate) fn u16_const(x: libc::c_int) -> u16 {
        u16::try_from(x).unwrap_or_default()
    }
}
