//! netmap's request structures and constants (API 14, x86-64 Linux), as in
//! `include/netmap/net/netmap.h`. Size assertions keep the two in step.

/// The API version this layer speaks.
pub const NETMAP_API: u16 = 14;
/// Oldest `nr_version` accepted in a `nmreq_header`.
pub const NETMAP_MIN_API: u16 = 14;
/// Newest `nr_version` accepted.
pub const NETMAP_MAX_API: u16 = 15;
/// Oldest `nr_version` accepted in a legacy `nmreq`.
pub const NETMAP_LEGACY_MIN_API: u32 = 11;

/// `_IOWR('i', 151, struct nmreq_header)`.
pub const NIOCCTRL: u64 = 0xc058_6997;
/// `_IO('i', 148)`.
pub const NIOCTXSYNC: u64 = 0x6994;
/// `_IO('i', 149)`.
pub const NIOCRXSYNC: u64 = 0x6995;
/// `_IOWR('i', 146, struct nmreq)`.
pub const NIOCREGIF: u64 = 0xc03c_6992;
/// `_IOWR('i', 145, struct nmreq)`.
pub const NIOCGINFO: u64 = 0xc03c_6991;

/// `nr_reqtype` values.
pub mod req {
    /// Bind a port's rings to the descriptor.
    pub const REGISTER: u16 = 1;
    /// Describe a port without binding it.
    pub const PORT_INFO_GET: u16 = 2;
    /// Set a VALE port's virtio-net header length.
    pub const PORT_HDR_SET: u16 = 6;
    /// Get a port's virtio-net header length.
    pub const PORT_HDR_GET: u16 = 7;
    /// Highest request type netmap defines (`CSB_ENABLE`).
    pub const LAST: u16 = 15;
}

/// `nr_mode` values.
pub mod mode {
    /// All hardware rings (same as `ALL_NIC`).
    pub const DEFAULT: u32 = 0;
    /// All hardware rings.
    pub const ALL_NIC: u32 = 1;
    /// The host-stack rings.
    pub const SW: u32 = 2;
    /// Hardware and host-stack rings.
    pub const NIC_SW: u32 = 3;
    /// One hardware ring, `nr_ringid`.
    pub const ONE_NIC: u32 = 4;
    /// Legacy pipe master.
    pub const PIPE_MASTER: u32 = 5;
    /// Legacy pipe slave.
    pub const PIPE_SLAVE: u32 = 6;
    /// No rings: memory only.
    pub const NULL: u32 = 7;
    /// One host-stack ring.
    pub const ONE_SW: u32 = 8;
}

/// `nr_flags` bits of `nmreq_register`.
pub mod flags {
    /// Monitor a port's TX.
    pub const MONITOR_TX: u64 = 0x100;
    /// Monitor a port's RX.
    pub const MONITOR_RX: u64 = 0x200;
    /// Bind only the RX rings.
    pub const RX_RINGS_ONLY: u64 = 0x2000;
    /// Bind only the TX rings.
    pub const TX_RINGS_ONLY: u64 = 0x4000;
    /// The application takes frames with the port's virtio-net header.
    pub const ACCEPT_VNET_HDR: u64 = 0x8000;
    /// `poll` also syncs RX rings when asked only for TX (the default here).
    pub const DO_RX_POLL: u64 = 0x10000;
    /// `poll` does not sync TX rings unless asked for POLLOUT.
    pub const NO_TX_POLL: u64 = 0x20000;
}

/// Legacy `nr_ringid` bits.
pub mod legacy {
    /// One hardware ring, the low bits.
    pub const HW_RING: u16 = 0x4000;
    /// The host-stack ring.
    pub const SW_RING: u16 = 0x2000;
    /// Do not sync TX rings in poll.
    pub const NO_TX_POLL: u16 = 0x1000;
    /// Ring index mask.
    pub const RING_MASK: u16 = 0x0fff;
    /// Mode bits of the legacy `nr_flags`.
    pub const REG_MASK: u32 = 0xf;
}

/// `struct nmreq_header`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NmreqHeader {
    /// API version.
    pub nr_version: u16,
    /// `req::*`.
    pub nr_reqtype: u16,
    /// Reserved.
    pub nr_reserved: u32,
    /// Port name, NUL-terminated.
    pub nr_name: [u8; 64],
    /// Option chain (a pointer).
    pub nr_options: u64,
    /// Request body (a pointer).
    pub nr_body: u64,
}

/// `struct nmreq_register`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NmreqRegister {
    /// Out: offset of the `netmap_if` in the mapping.
    pub nr_offset: u64,
    /// Out: bytes to map.
    pub nr_memsize: u64,
    /// Slots per TX ring.
    pub nr_tx_slots: u32,
    /// Slots per RX ring.
    pub nr_rx_slots: u32,
    /// TX rings.
    pub nr_tx_rings: u16,
    /// RX rings.
    pub nr_rx_rings: u16,
    /// Host TX rings.
    pub nr_host_tx_rings: u16,
    /// Host RX rings.
    pub nr_host_rx_rings: u16,
    /// Memory region id: equal ids can swap buffers.
    pub nr_mem_id: u16,
    /// Ring for `ONE_NIC`.
    pub nr_ringid: u16,
    /// `mode::*`.
    pub nr_mode: u32,
    /// Extra buffers wanted (in) and given (out).
    pub nr_extra_bufs: u32,
    /// `flags::*`.
    pub nr_flags: u64,
}

/// `struct nmreq_port_info_get`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NmreqPortInfo {
    /// Bytes to map.
    pub nr_memsize: u64,
    /// Slots per TX ring.
    pub nr_tx_slots: u32,
    /// Slots per RX ring.
    pub nr_rx_slots: u32,
    /// TX rings.
    pub nr_tx_rings: u16,
    /// RX rings.
    pub nr_rx_rings: u16,
    /// Host TX rings.
    pub nr_host_tx_rings: u16,
    /// Host RX rings.
    pub nr_host_rx_rings: u16,
    /// Memory region id.
    pub nr_mem_id: u16,
    /// Padding.
    pub pad: [u16; 3],
}

/// `struct nmreq_port_hdr` (PORT_HDR_SET, PORT_HDR_GET).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NmreqPortHdr {
    /// Virtio-net header length: 0, 10 or 12.
    pub nr_hdr_len: u32,
    /// Reserved.
    pub nr_reserved: u32,
}

/// The legacy `struct nmreq` (NIOCREGIF, NIOCGINFO).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Nmreq {
    /// Port name.
    pub nr_name: [u8; 16],
    /// API version.
    pub nr_version: u32,
    /// Out: offset of the `netmap_if`.
    pub nr_offset: u32,
    /// Out: bytes to map.
    pub nr_memsize: u32,
    /// Slots per TX ring.
    pub nr_tx_slots: u32,
    /// Slots per RX ring.
    pub nr_rx_slots: u32,
    /// TX rings.
    pub nr_tx_rings: u16,
    /// RX rings.
    pub nr_rx_rings: u16,
    /// `legacy::*` ring selection.
    pub nr_ringid: u16,
    /// Sub-command.
    pub nr_cmd: u16,
    /// Argument 1.
    pub nr_arg1: u16,
    /// Argument 2 (out: memory id).
    pub nr_arg2: u16,
    /// Argument 3 (extra buffers).
    pub nr_arg3: u32,
    /// Mode in the low bits.
    pub nr_flags: u32,
    /// Spare.
    pub spare2: [u32; 1],
}

const _: () = assert!(core::mem::size_of::<NmreqHeader>() == 88);
const _: () = assert!(core::mem::size_of::<NmreqRegister>() == 56);
const _: () = assert!(core::mem::size_of::<NmreqPortInfo>() == 32);
const _: () = assert!(core::mem::size_of::<Nmreq>() == 60);
const _: () = assert!(core::mem::size_of::<NmreqPortHdr>() == 8);
