//! The virtio-net header and the feature bits this device offers.

use vm_memory::ByteValued;

/// `struct virtio_net_hdr_mrg_rxbuf` (VIRTIO 1.x, 5.1.6): the 12-byte header
/// in front of every frame once VERSION_1 or MRG_RXBUF is negotiated. Legacy
/// drivers without either use only the first 10 bytes. All fields are
/// little-endian on the wire; the accessors convert.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VirtioNetHdr {
    /// `VIRTIO_NET_HDR_F_*` ([`ringswitch_frame::F_NEEDS_CSUM`],
    /// [`ringswitch_frame::F_DATA_VALID`]; RSC_INFO (4) is never offered).
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*` (`ringswitch_frame::GSO_*`).
    pub gso_type: u8,
    /// Length of the headers to copy into each segment (little-endian).
    pub hdr_len: u16,
    /// Segment payload size (little-endian).
    pub gso_size: u16,
    /// Where checksumming starts (little-endian).
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start` (little-endian).
    pub csum_offset: u16,
    /// Receive only, with MRG_RXBUF: how many buffers the frame spans (little-endian).
    pub num_buffers: u16,
}

// SAFETY: `#[repr(C)]`, only integer fields, no padding (2 x u8 + 5 x u16 = 12
// bytes, every field naturally aligned), so every byte pattern is a valid value.
unsafe impl ByteValued for VirtioNetHdr {}

const _: () = assert!(std::mem::size_of::<VirtioNetHdr>() == 12);

impl VirtioNetHdr {
    /// Size of the header when VERSION_1 or MRG_RXBUF is negotiated.
    pub const LEN: usize = 12;
    /// Size of the legacy header (neither VERSION_1 nor MRG_RXBUF).
    pub const LEN_LEGACY: usize = 10;

    /// `hdr_len` in host order.
    pub fn hdr_len(&self) -> u16 {
        u16::from_le(self.hdr_len)
    }
    /// `gso_size` in host order.
    pub fn gso_size(&self) -> u16 {
        u16::from_le(self.gso_size)
    }
    /// `csum_start` in host order.
    pub fn csum_start(&self) -> u16 {
        u16::from_le(self.csum_start)
    }
    /// `csum_offset` in host order.
    pub fn csum_offset(&self) -> u16 {
        u16::from_le(self.csum_offset)
    }
    /// `num_buffers` in host order.
    pub fn num_buffers(&self) -> u16 {
        u16::from_le(self.num_buffers)
    }
}

/// Feature bits (VIRTIO 1.x, 5.1.3 and 6), as bit numbers.
pub mod feature {
    pub use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
    pub use virtio_bindings::virtio_net::{
        VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_ANNOUNCE, VIRTIO_NET_F_GUEST_CSUM,
        VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_HOST_TSO4,
        VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_MAC, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF,
        VIRTIO_NET_F_STATUS,
    };
    pub use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};

    /// Every feature bit the device offers (before the vhost-user
    /// PROTOCOL_FEATURES bit, which the protocol layer adds).
    pub const OFFERED: u64 = (1 << VIRTIO_F_VERSION_1)
        | (1 << VIRTIO_RING_F_EVENT_IDX)
        | (1 << VIRTIO_RING_F_INDIRECT_DESC)
        | (1 << VIRTIO_NET_F_MRG_RXBUF)
        | (1 << VIRTIO_NET_F_CSUM)
        | (1 << VIRTIO_NET_F_GUEST_CSUM)
        | (1 << VIRTIO_NET_F_HOST_TSO4)
        | (1 << VIRTIO_NET_F_HOST_TSO6)
        | (1 << VIRTIO_NET_F_GUEST_TSO4)
        | (1 << VIRTIO_NET_F_GUEST_TSO6)
        | (1 << VIRTIO_NET_F_MAC)
        | (1 << VIRTIO_NET_F_STATUS)
        | (1 << VIRTIO_NET_F_MQ)
        // The guest announces itself (gratuitous ARP) after a migration;
        // its frontend (QEMU) drives the announcement over the control
        // queue it keeps, so the device only lets the bit through.
        | (1 << VIRTIO_NET_F_GUEST_ANNOUNCE);

    /// The offload bits (checksum and TSO, both directions). A device
    /// configured without offloads masks these out of [`OFFERED`].
    pub const OFFLOADS: u64 = (1 << VIRTIO_NET_F_CSUM)
        | (1 << VIRTIO_NET_F_GUEST_CSUM)
        | (1 << VIRTIO_NET_F_HOST_TSO4)
        | (1 << VIRTIO_NET_F_HOST_TSO6)
        | (1 << VIRTIO_NET_F_GUEST_TSO4)
        | (1 << VIRTIO_NET_F_GUEST_TSO6);

    /// Is bit `bit` set in `features`?
    pub fn has(features: u64, bit: u32) -> bool {
        features & (1u64 << bit) != 0
    }
}
