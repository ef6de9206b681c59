//! Finds the headers of an Ethernet/IP/TCP or Ethernet/IP/UDP frame,
//! checking every length against the frame. Once [`parse_l4`] succeeds,
//! every offset in the returned [`L4Frame`] lies inside the frame, in order.

use crate::error::{Layer, OffloadError};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;
const VLAN_TAGS_MAX: usize = 2;
const IPV4_HLEN_MIN: usize = 20;
const IPV6_HLEN: usize = 40;
const TCP_HLEN_MIN: usize = 20;
const UDP_HLEN: usize = 8;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// The IPv6 next header values of extension headers (RFC 8200 and the IANA
/// registry), reported as such rather than as "not TCP".
const IPV6_EXTENSION_HEADERS: [u8; 11] = [0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254];

/// The IP version of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ip {
    V4,
    V6,
}

impl Ip {
    pub(crate) fn number(self) -> u8 {
        match self {
            Ip::V4 => 4,
            Ip::V6 => 6,
        }
    }
}

/// The transport protocol a GSO frame is cut by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum L4 {
    Tcp,
    Udp,
}

impl L4 {
    /// The IPv4 protocol and IPv6 next header number.
    pub(crate) fn number(self) -> u8 {
        match self {
            L4::Tcp => IPPROTO_TCP,
            L4::Udp => IPPROTO_UDP,
        }
    }

    fn layer(self) -> Layer {
        match self {
            L4::Tcp => Layer::Tcp,
            L4::Udp => Layer::Udp,
        }
    }

    fn wrong(self, protocol: u8) -> OffloadError {
        match self {
            L4::Tcp => OffloadError::NotTcp { protocol },
            L4::Udp => OffloadError::NotUdp { protocol },
        }
    }
}

/// Where the headers of a TCP or UDP frame are. Invariant:
/// `l3 < l4 < payload <= end <= frame.len()`, `l4 - l3` is the IP header
/// length (20 to 60 bytes for IPv4, 40 for IPv6), `payload - l4` the TCP
/// header length (20 to 60 bytes) or UDP's (8), and `end` the end of the IP
/// packet as its length field says; bytes after `end` are link-layer
/// padding. A UDP header's own length field is not read: segmentation
/// writes every segment's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct L4Frame {
    pub(crate) proto: L4,
    pub(crate) ip: Ip,
    pub(crate) l3: usize,
    pub(crate) l4: usize,
    pub(crate) payload: usize,
    pub(crate) end: usize,
}

/// Reads a big-endian 16-bit value at `at`, if the frame holds it.
pub(crate) fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes(b.try_into().ok()?))
}

/// Parses Ethernet (with up to two VLAN tags), IPv4 without fragments or
/// IPv6 without extension headers, and `proto`'s header.
pub(crate) fn parse_l4(frame: &[u8], proto: L4) -> Result<L4Frame, OffloadError> {
    let truncated = |layer| OffloadError::Truncated { layer };

    let mut ethertype = be16(frame, ETH_HLEN - 2).ok_or(truncated(Layer::Ethernet))?;
    let mut l3 = ETH_HLEN;
    let mut tags = 0;
    while ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
        if tags == VLAN_TAGS_MAX {
            return Err(OffloadError::TooManyVlanTags);
        }
        // The tag is the TCI then the inner EtherType.
        ethertype = be16(frame, l3 + 2).ok_or(truncated(Layer::Vlan))?;
        l3 += VLAN_HLEN;
        tags += 1;
    }

    let packet = frame.get(l3..).ok_or(truncated(Layer::Ethernet))?;
    let (ip, ip_hlen, ip_len) = match ethertype {
        ETHERTYPE_IPV4 => {
            let (hlen, len) = parse_ipv4(packet, proto)?;
            (Ip::V4, hlen, len)
        }
        ETHERTYPE_IPV6 => (Ip::V6, IPV6_HLEN, parse_ipv6(packet, proto)?),
        ethertype => return Err(OffloadError::UnsupportedEtherType { ethertype }),
    };
    // Both parsers checked ip_hlen <= ip_len <= packet.len().
    let l4 = l3 + ip_hlen;
    let end = l3 + ip_len;

    let segment = frame.get(l4..end).ok_or(truncated(proto.layer()))?;
    let hlen = match proto {
        L4::Tcp => {
            let offset_byte = *segment.get(12).ok_or(truncated(Layer::Tcp))?;
            let tcp_hlen = usize::from(offset_byte >> 4) * 4;
            if tcp_hlen < TCP_HLEN_MIN {
                return Err(OffloadError::BadTcpDataOffset { len: tcp_hlen });
            }
            tcp_hlen
        }
        L4::Udp => UDP_HLEN,
    };
    if hlen > segment.len() {
        return Err(truncated(proto.layer()));
    }
    Ok(L4Frame {
        proto,
        ip,
        l3,
        l4,
        payload: l4 + hlen,
        end,
    })
}

/// Checks an IPv4 header at the start of `packet`; returns its length and
/// the packet's total length, both checked against `packet`.
fn parse_ipv4(packet: &[u8], proto: L4) -> Result<(usize, usize), OffloadError> {
    let truncated = OffloadError::Truncated { layer: Layer::Ipv4 };
    let first = *packet.first().ok_or(truncated)?;
    if first >> 4 != 4 {
        return Err(OffloadError::BadIpVersion {
            expected: 4,
            found: first >> 4,
        });
    }
    let hlen = usize::from(first & 0x0f) * 4;
    if hlen < IPV4_HLEN_MIN {
        return Err(OffloadError::BadIpv4HeaderLength { len: hlen });
    }
    if hlen > packet.len() {
        return Err(truncated);
    }
    let total = usize::from(be16(packet, 2).ok_or(truncated)?);
    if total < hlen || total > packet.len() {
        return Err(OffloadError::BadIpLength {
            claimed: total,
            available: packet.len(),
        });
    }
    // More-fragments bit or a fragment offset.
    if be16(packet, 6).ok_or(truncated)? & 0x3fff != 0 {
        return Err(OffloadError::Fragment);
    }
    let protocol = *packet.get(9).ok_or(truncated)?;
    if protocol != proto.number() {
        return Err(proto.wrong(protocol));
    }
    Ok((hlen, total))
}

/// Checks an IPv6 header at the start of `packet`; returns the packet's
/// total length, fixed header included, checked against `packet`.
fn parse_ipv6(packet: &[u8], proto: L4) -> Result<usize, OffloadError> {
    let truncated = OffloadError::Truncated { layer: Layer::Ipv6 };
    if packet.len() < IPV6_HLEN {
        return Err(truncated);
    }
    let first = *packet.first().ok_or(truncated)?;
    if first >> 4 != 6 {
        return Err(OffloadError::BadIpVersion {
            expected: 6,
            found: first >> 4,
        });
    }
    let payload_len = usize::from(be16(packet, 4).ok_or(truncated)?);
    if payload_len == 0 {
        return Err(OffloadError::Jumbogram);
    }
    let next_header = *packet.get(6).ok_or(truncated)?;
    if IPV6_EXTENSION_HEADERS.contains(&next_header) {
        return Err(OffloadError::Ipv6ExtensionHeader { next_header });
    }
    if next_header != proto.number() {
        return Err(proto.wrong(next_header));
    }
    let total = IPV6_HLEN + payload_len;
    if total > packet.len() {
        return Err(OffloadError::BadIpLength {
            claimed: total,
            available: packet.len(),
        });
    }
    Ok(total)
}
