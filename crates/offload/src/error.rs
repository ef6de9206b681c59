//! What can be wrong with an offload request or the frame it comes with.

use std::fmt;

use thiserror::Error;

/// Why an offload request or its frame was refused. Every variant describes
/// bad or unsupported input; none means a bug in this crate.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// The header's flags hold bits other than NEEDS_CSUM and DATA_VALID.
    #[error("the header flags {flags:#04x} hold unknown bits")]
    UnknownFlags {
        /// The flags as received.
        flags: u8,
    },
    /// The GSO type is none of NONE, TCPV4, UDP, TCPV6 and UDP_L4.
    #[error("the GSO type {gso_type:#04x} is unknown")]
    UnknownGsoType {
        /// The GSO type as received, ECN bit included.
        gso_type: u8,
    },
    /// The frame asks for UDP fragmentation offload, which is deprecated and
    /// not implemented.
    #[error("UDP fragmentation offload (UFO) is not supported")]
    UfoUnsupported,
    /// The ECN bit is set on a frame that asks for no segmentation.
    #[error("the ECN bit is set on a frame without GSO")]
    EcnWithoutGso,
    /// The ECN bit is set on a UDP segmentation frame (it is TCP's).
    #[error("the ECN bit is set on a UDP segmentation frame")]
    EcnOnUdp,
    /// A GSO frame has a segment size of 0.
    #[error("the GSO segment size is 0")]
    ZeroGsoSize,
    /// Segmentation was asked for a frame whose header asks for none.
    #[error("the frame asks for no segmentation")]
    NotGso,
    /// The checksum field does not lie inside the frame after `csum_start`.
    #[error(
        "a checksum at offset {csum_offset} from {csum_start} does not fit in a {len}-byte frame"
    )]
    ChecksumOutOfBounds {
        /// Where checksumming starts, from the start of the frame.
        csum_start: usize,
        /// Where the checksum field is, from `csum_start`.
        csum_offset: usize,
        /// Length of the frame.
        len: usize,
    },
    /// The frame ends inside a header.
    #[error("the frame ends inside its {layer} header")]
    Truncated {
        /// The header the frame ends in.
        layer: Layer,
    },
    /// The frame has more than two VLAN tags.
    #[error("the frame has more than two VLAN tags")]
    TooManyVlanTags,
    /// The EtherType is neither IPv4 nor IPv6.
    #[error("EtherType {ethertype:#06x} is neither IPv4 nor IPv6")]
    UnsupportedEtherType {
        /// The EtherType after any VLAN tags.
        ethertype: u16,
    },
    /// The IP header's version field disagrees with the EtherType.
    #[error("the IP header says version {found} where the EtherType says {expected}")]
    BadIpVersion {
        /// The version the EtherType announces.
        expected: u8,
        /// The version field.
        found: u8,
    },
    /// The IPv4 header length field is below the 20-byte minimum.
    #[error("the IPv4 header length is {len} bytes, below 20")]
    BadIpv4HeaderLength {
        /// IHL times 4.
        len: usize,
    },
    /// The IPv4 packet is a fragment.
    #[error("the IPv4 packet is a fragment")]
    Fragment,
    /// The IP length field is shorter than the headers or longer than the
    /// frame.
    #[error("the IP length field says {claimed} bytes where the frame has {available}")]
    BadIpLength {
        /// The length the IP header claims, its own header included.
        claimed: usize,
        /// The bytes the frame has from the IP header on.
        available: usize,
    },
    /// The IPv6 packet has a payload length of 0, a jumbogram.
    #[error("the IPv6 payload length is 0 (jumbogram)")]
    Jumbogram,
    /// The IPv6 header is followed by an extension header.
    #[error(
        "the IPv6 header is followed by extension header {next_header}, which is not supported"
    )]
    Ipv6ExtensionHeader {
        /// The next header field.
        next_header: u8,
    },
    /// The IP packet carries something other than TCP.
    #[error("the IP packet carries protocol {protocol}, not TCP")]
    NotTcp {
        /// The IPv4 protocol or IPv6 next header field.
        protocol: u8,
    },
    /// The IP packet of a UDP segmentation frame carries something other
    /// than UDP.
    #[error("the IP packet carries protocol {protocol}, not UDP")]
    NotUdp {
        /// The IPv4 protocol or IPv6 next header field.
        protocol: u8,
    },
    /// The TCP data offset is below the 20-byte minimum.
    #[error("the TCP data offset is {len} bytes, below 20")]
    BadTcpDataOffset {
        /// Data offset times 4.
        len: usize,
    },
    /// The GSO type names one IP version and the frame carries the other.
    #[error("the GSO type asks for IPv{expected} segmentation of an IPv{found} packet")]
    GsoIpMismatch {
        /// The IP version the GSO type names.
        expected: u8,
        /// The IP version of the frame.
        found: u8,
    },
}

/// A protocol header of a frame, as named in [`OffloadError::Truncated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The Ethernet header.
    Ethernet,
    /// An 802.1Q or 802.1ad VLAN tag.
    Vlan,
    /// The IPv4 header.
    Ipv4,
    /// The IPv6 header.
    Ipv6,
    /// The TCP header.
    Tcp,
    /// The UDP header.
    Udp,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "VLAN",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Tcp => "TCP",
            Layer::Udp => "UDP",
        })
    }
}
