//! The offload request a sender attaches to a frame, and what a
//! destination accepts.

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset`
/// is partial.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: on receive, the checksum was verified.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`: no segmentation.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`: TCP over IPv4 segmentation.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP`: UDP fragmentation (UFO), deprecated and refused
/// by the switch.
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`: TCP over IPv6 segmentation.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`: UDP segmentation (USO, VIRTIO 1.2): the
/// payload is cut into `gso_size`-byte datagrams, each with its own UDP
/// header, over IPv4 or IPv6.
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`: added to a TCP GSO type, the frame has CWR set
/// and needs a device that keeps it on the first segment only.
pub const GSO_ECN: u8 = 0x80;

/// The offload fields of a virtio-net header (VIRTIO 1.x, 5.1.6), in host
/// order. Every field comes from the sender and is untrusted; `hdr_len` in
/// particular is only a hint: whoever acts on a request parses the headers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadHdr {
    /// [`F_NEEDS_CSUM`], [`F_DATA_VALID`].
    pub flags: u8,
    /// [`GSO_NONE`], [`GSO_TCPV4`], [`GSO_UDP`] or [`GSO_TCPV6`], possibly
    /// with [`GSO_ECN`].
    pub gso_type: u8,
    /// Length of the Ethernet, IP and TCP headers, as the sender claims.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS).
    pub gso_size: u16,
    /// Where checksumming starts, from the start of the Ethernet header.
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
}

/// A virtio-net header shorter than the 10 bytes [`OffloadHdr`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the virtio-net header has {len} bytes, fewer than 10")]
pub struct HeaderTooShort {
    /// Bytes available.
    pub len: usize,
}

impl OffloadHdr {
    /// Length of the part of a virtio-net header this type holds: the legacy
    /// header, without `num_buffers`.
    pub const LEN: usize = 10;

    /// Reads the first 10 bytes of a virtio-net header, little-endian as
    /// VIRTIO 1.x has it. Bytes after them (`num_buffers`) are ignored.
    pub fn from_le_bytes(bytes: &[u8]) -> Result<Self, HeaderTooShort> {
        let bytes: [u8; Self::LEN] = bytes
            .get(..Self::LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(HeaderTooShort { len: bytes.len() })?;
        let [flags, gso_type, h0, h1, g0, g1, s0, s1, o0, o1] = bytes;
        Ok(Self {
            flags,
            gso_type,
            hdr_len: u16::from_le_bytes([h0, h1]),
            gso_size: u16::from_le_bytes([g0, g1]),
            csum_start: u16::from_le_bytes([s0, s1]),
            csum_offset: u16::from_le_bytes([o0, o1]),
        })
    }

    /// Writes the header as the first 10 bytes of a virtio-net header,
    /// little-endian.
    pub fn to_le_bytes(&self) -> [u8; Self::LEN] {
        let [h0, h1] = self.hdr_len.to_le_bytes();
        let [g0, g1] = self.gso_size.to_le_bytes();
        let [s0, s1] = self.csum_start.to_le_bytes();
        let [o0, o1] = self.csum_offset.to_le_bytes();
        [self.flags, self.gso_type, h0, h1, g0, g1, s0, s1, o0, o1]
    }

    /// Reads the first 10 bytes of a virtio-net header in host order, as
    /// the kernel's AF_PACKET and TAP sockets write it (a TAP unless told
    /// otherwise with TUNSETVNETLE).
    #[inline]
    pub fn from_ne_bytes(bytes: &[u8]) -> Result<Self, HeaderTooShort> {
        Self::from_le_bytes(bytes).map(Self::swap_on_big_endian)
    }

    /// Writes the header as the first 10 bytes of a virtio-net header in
    /// host order, as the kernel's TAP sockets read it.
    #[inline]
    pub fn to_ne_bytes(&self) -> [u8; Self::LEN] {
        self.swap_on_big_endian().to_le_bytes()
    }

    /// On a big-endian host, the 16-bit fields byte-swapped: what turns a
    /// little-endian reading into a host-order one and back.
    #[inline]
    fn swap_on_big_endian(mut self) -> Self {
        if cfg!(target_endian = "big") {
            for v in [
                &mut self.hdr_len,
                &mut self.gso_size,
                &mut self.csum_start,
                &mut self.csum_offset,
            ] {
                *v = v.swap_bytes();
            }
        }
        self
    }
}

/// The offloads a destination accepts: for a VM, the `GUEST_*` features it
/// negotiated; for a TAP, what it was set up with; for a netmap ring port or
/// a NIC, none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    /// Accepts partial checksums (`VIRTIO_NET_F_GUEST_CSUM`).
    pub csum: bool,
    /// Accepts TCP over IPv4 GSO frames (`VIRTIO_NET_F_GUEST_TSO4`).
    pub tso4: bool,
    /// Accepts TCP over IPv6 GSO frames (`VIRTIO_NET_F_GUEST_TSO6`).
    pub tso6: bool,
    /// Accepts TCP GSO frames with the ECN bit (`VIRTIO_NET_F_GUEST_ECN`).
    pub ecn: bool,
    /// Accepts UDP over IPv4 GSO frames (`VIRTIO_NET_F_GUEST_USO4`).
    pub uso4: bool,
    /// Accepts UDP over IPv6 GSO frames (`VIRTIO_NET_F_GUEST_USO6`).
    pub uso6: bool,
}

impl Caps {
    /// A destination that accepts no offload, such as a netmap ring port.
    pub const NONE: Caps = Caps {
        csum: false,
        tso4: false,
        tso6: false,
        ecn: false,
        uso4: false,
        uso6: false,
    };
    /// A destination that accepts every offload there is.
    pub const ALL: Caps = Caps {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: true,
        uso4: true,
        uso6: true,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_round_trip() {
        let hdr = OffloadHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6 | GSO_ECN,
            hdr_len: 0x0102,
            gso_size: 1448,
            csum_start: 54,
            csum_offset: 16,
        };
        let bytes = hdr.to_le_bytes();
        assert_eq!(bytes, [1, 0x84, 0x02, 0x01, 0xa8, 0x05, 54, 0, 16, 0]);
        assert_eq!(OffloadHdr::from_le_bytes(&bytes), Ok(hdr));
        let mut long = bytes.to_vec();
        long.extend_from_slice(&[1, 0]); // num_buffers
        assert_eq!(OffloadHdr::from_le_bytes(&long), Ok(hdr));
        assert_eq!(
            OffloadHdr::from_le_bytes(&bytes[..9]),
            Err(HeaderTooShort { len: 9 })
        );
    }

    #[test]
    fn host_order_bytes_round_trip() {
        let hdr = OffloadHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 0x0102,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let bytes = hdr.to_ne_bytes();
        assert_eq!(&bytes[2..4], &0x0102u16.to_ne_bytes());
        assert_eq!(&bytes[4..6], &1448u16.to_ne_bytes());
        assert_eq!(OffloadHdr::from_ne_bytes(&bytes), Ok(hdr));
        assert_eq!(
            OffloadHdr::from_ne_bytes(&bytes[..3]),
            Err(HeaderTooShort { len: 3 })
        );
    }
}
