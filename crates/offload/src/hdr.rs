//! The offload request a sender attaches to a frame, what a destination
//! accepts, and what must be done in software between the two.

use crate::error::OffloadError;

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
/// here.
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`: TCP over IPv6 segmentation.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_ECN`: added to a TCP GSO type, the frame has CWR set
/// and needs a device that keeps it on the first segment only.
pub const GSO_ECN: u8 = 0x80;

/// The offload fields of a virtio-net header (VIRTIO 1.x, 5.1.6), in host
/// order. Every field comes from the sender and is untrusted; `hdr_len` in
/// particular is only a hint and is never used here: the headers are parsed.
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

impl OffloadHdr {
    /// Length of the part of a virtio-net header this type holds: the legacy
    /// header, without `num_buffers`.
    pub const LEN: usize = 10;

    /// Reads the first 10 bytes of a virtio-net header, little-endian as
    /// VIRTIO 1.x has it. Bytes after them (`num_buffers`) are ignored.
    pub fn from_le_bytes(bytes: &[u8]) -> Result<Self, OffloadError> {
        let bytes: [u8; Self::LEN] = bytes
            .get(..Self::LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(OffloadError::HeaderTooShort { len: bytes.len() })?;
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

    /// Checks the flags and GSO fields and says what they ask for.
    pub(crate) fn request(&self) -> Result<Request, OffloadError> {
        if self.flags & !(F_NEEDS_CSUM | F_DATA_VALID) != 0 {
            return Err(OffloadError::UnknownFlags { flags: self.flags });
        }
        let ecn = self.gso_type & GSO_ECN != 0;
        let gso = match self.gso_type & !GSO_ECN {
            GSO_NONE if ecn => return Err(OffloadError::EcnWithoutGso),
            GSO_NONE => Gso::None,
            GSO_TCPV4 => Gso::Tcp4,
            GSO_TCPV6 => Gso::Tcp6,
            GSO_UDP => return Err(OffloadError::UfoUnsupported),
            _ => {
                return Err(OffloadError::UnknownGsoType {
                    gso_type: self.gso_type,
                })
            }
        };
        if gso != Gso::None && self.gso_size == 0 {
            return Err(OffloadError::ZeroGsoSize);
        }
        Ok(Request {
            gso,
            ecn,
            needs_csum: self.flags & F_NEEDS_CSUM != 0,
        })
    }
}

/// The segmentation a header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gso {
    None,
    Tcp4,
    Tcp6,
}

/// A header's request, validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub(crate) gso: Gso,
    pub(crate) ecn: bool,
    pub(crate) needs_csum: bool,
}

/// The offloads a destination accepts: for a VM, the `GUEST_*` features it
/// negotiated; for a netmap ring port, none.
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
}

impl Caps {
    /// A destination that accepts no offload, such as a netmap ring port.
    pub const NONE: Caps = Caps {
        csum: false,
        tso4: false,
        tso6: false,
        ecn: false,
    };
    /// A destination that accepts every offload this crate knows.
    pub const ALL: Caps = Caps {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: true,
    };
}

/// What must be done to a frame before a destination gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the frame and its header go to the destination as they are.
    PassThrough,
    /// Complete the partial checksum with [`complete_checksum`](crate::complete_checksum)
    /// and hand the frame over without offload flags.
    CompleteChecksum,
    /// Cut the frame into segments with a [`Segmenter`](crate::Segmenter)
    /// and hand them over without offload flags: their checksums are
    /// complete.
    Segment,
}

/// Says what must be done in software for a destination with `dest`'s
/// capabilities to take a frame sent with `hdr`.
///
/// A TCP GSO frame passes through only to a destination that accepts partial
/// checksums, TSO for its IP version and, if the ECN bit is set, ECN;
/// otherwise it is segmented. A frame with a partial checksum and no GSO
/// passes through to a destination that accepts partial checksums;
/// otherwise its checksum is completed.
///
/// Only the header is checked here: unknown flag bits, unknown GSO types,
/// UFO, ECN without GSO and a GSO size of 0 are errors. `DATA_VALID`, a
/// receive-side flag, is accepted and ignored; the caller should not forward
/// it. A GSO frame without NEEDS_CSUM is accepted: segmentation computes the
/// TCP checksum from scratch either way. Offsets are checked against the
/// frame later, by [`complete_checksum`](crate::complete_checksum) and
/// [`Segmenter::segment`](crate::Segmenter::segment).
pub fn plan(hdr: &OffloadHdr, dest: Caps) -> Result<Action, OffloadError> {
    let request = hdr.request()?;
    let takes_tso = |tso: bool| dest.csum && tso && (!request.ecn || dest.ecn);
    Ok(match request.gso {
        Gso::None if request.needs_csum && !dest.csum => Action::CompleteChecksum,
        Gso::None => Action::PassThrough,
        Gso::Tcp4 if takes_tso(dest.tso4) => Action::PassThrough,
        Gso::Tcp6 if takes_tso(dest.tso6) => Action::PassThrough,
        Gso::Tcp4 | Gso::Tcp6 => Action::Segment,
    })
}
