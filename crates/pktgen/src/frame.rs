//! The frames pkt-gen sends: an Ethernet/IPv4/UDP template built once, with
//! real checksums, and the few fields stamped into it per packet (addresses
//! and ports walking a range, random ports, sequence number, thread index,
//! timestamp) with the checksums they affect recomputed from sums
//! precomputed over everything else (a few additions per packet, no pass
//! over the frame).
//!
//! Layout (offsets in the frame):
//!
//! | bytes | field |
//! |---|---|
//! | 0..14 | Ethernet: dst MAC, src MAC, ethertype 0x0800 |
//! | 14..34 | IPv4: no options, DF, TTL 64, protocol 17 |
//! | 34..42 | UDP |
//! | 42..46 | sequence number, big endian (txseq, ping) |
//! | 46..48 | txseq with `-p` > 1: the sending thread's index, big endian (0 otherwise) |
//! | 46..54 | CLOCK_MONOTONIC timestamp in ns, big endian (ping) |
//! | 54.. | filler text |
//!
//! Frames shorter than 42 bytes carry the headers truncated (their lengths
//! and checksums are those of a 42-byte frame); nothing is stamped into them.
//! Once a frame is at least as long as a field, its accessor cannot panic.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// Ethernet header.
pub const ETH_HDR_LEN: usize = 14;
/// IPv4 header, no options.
pub const IP_HDR_LEN: usize = 20;
/// UDP header.
pub const UDP_HDR_LEN: usize = 8;
/// Ethernet + IPv4 + UDP.
pub const HEADERS_LEN: usize = ETH_HDR_LEN + IP_HDR_LEN + UDP_HDR_LEN;
/// Shortest frame accepted at all (an Ethernet header).
pub const MIN_FRAME_LEN: usize = ETH_HDR_LEN;
/// Where the sequence number goes: the start of the UDP payload.
pub const SEQ_OFS: usize = HEADERS_LEN;
/// Where ping's timestamp goes, right after the sequence number.
pub const TS_OFS: usize = SEQ_OFS + 4;
/// Shortest frame that carries a sequence number.
pub const SEQ_FRAME_LEN: usize = SEQ_OFS + 4;
/// Where txseq's thread index (its stream) goes, right after the sequence
/// number (where ping puts its timestamp: the two are never combined).
pub const STREAM_OFS: usize = SEQ_OFS + 4;
/// Shortest frame that carries a sequence number and a stream index.
pub const STREAM_FRAME_LEN: usize = STREAM_OFS + 2;
/// Shortest frame that carries a sequence number and a timestamp.
pub const PING_FRAME_LEN: usize = TS_OFS + 8;

const ETH_DST: usize = 0;
const ETH_SRC: usize = 6;
const ETH_TYPE: usize = 12;
const ETHERTYPE_IPV4: u16 = 0x0800;
const IP: usize = ETH_HDR_LEN;
const IP_PROTO: usize = IP + 9;
const IP_CSUM: usize = IP + 10;
const IP_SRC: usize = IP + 12;
const IP_DST: usize = IP + 16;
const IPPROTO_UDP: u8 = 17;
const UDP: usize = IP + IP_HDR_LEN;
const UDP_SPORT: usize = UDP;
const UDP_DPORT: usize = UDP + 2;
const UDP_CSUM: usize = UDP + 6;
const FILLER: &[u8] = b"ringswitch pkt-gen payload ";

/// A MAC address, written `00:11:22:aa:bb:cc` (or with `-`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacAddr(pub [u8; 6]);

/// An argument that is not an address this tool accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// Not six hex bytes.
    #[error("a MAC address is six hex bytes separated by ':', like 00:00:00:00:00:01")]
    Mac,
    /// Not a dotted IPv4 address.
    #[error("an IPv4 address is written like 10.0.0.1")]
    Ip,
    /// Not a port number.
    #[error("a UDP port is a number from 0 to 65535")]
    Port,
    /// An address range whose first address is above its last.
    #[error("the address range {first}-{last} runs backwards: the first address must not be above the last")]
    IpRangeReversed {
        /// First address given.
        first: Ipv4Addr,
        /// Last address given.
        last: Ipv4Addr,
    },
    /// A port range whose first port is above its last.
    #[error(
        "the port range {first}-{last} runs backwards: the first port must not be above the last"
    )]
    PortRangeReversed {
        /// First port given.
        first: u16,
        /// Last port given.
        last: u16,
    },
}

impl FromStr for MacAddr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for b in &mut out {
            let p = parts.next().ok_or(AddrError::Mac)?;
            if p.is_empty() || p.len() > 2 {
                return Err(AddrError::Mac);
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| AddrError::Mac)?;
        }
        if parts.next().is_some() {
            return Err(AddrError::Mac);
        }
        Ok(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// An IPv4 address or address range with an optional UDP port or port
/// range, netmap's `a.b.c.d[-e.f.g.h][:port[-port]]`: `10.0.0.1`,
/// `10.0.0.1:1234`, `10.0.0.1-10.0.0.9:1000-1099`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Address (the first of the range).
    pub ip: Ipv4Addr,
    /// The last address of the range (`ip` without a range).
    pub ip_last: Ipv4Addr,
    /// Port (the first of the range), if given.
    pub port: Option<u16>,
    /// The last port of the range (`port` without a range).
    pub port_last: Option<u16>,
}

impl Endpoint {
    /// One address, optionally with one port.
    pub const fn single(ip: Ipv4Addr, port: Option<u16>) -> Endpoint {
        Endpoint {
            ip,
            ip_last: ip,
            port,
            port_last: port,
        }
    }

    /// Whether the address is a range of more than one.
    pub fn ips_vary(&self) -> bool {
        self.ip != self.ip_last
    }

    /// Whether the port is a range of more than one.
    pub fn ports_vary(&self) -> bool {
        self.port != self.port_last
    }

    /// Whether anything varies from packet to packet.
    pub fn is_range(&self) -> bool {
        self.ips_vary() || self.ports_vary()
    }

    /// The text for the header line: the address (range), then the port
    /// (range), with `default` when no port was given.
    pub fn describe(&self, default_port: u16) -> String {
        let ip = if self.ips_vary() {
            format!("{}-{}", self.ip, self.ip_last)
        } else {
            self.ip.to_string()
        };
        let port = match (self.port, self.port_last) {
            (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            (None, _) => default_port.to_string(),
        };
        format!("{ip}:{port}")
    }
}

fn parse_range<T: Copy + PartialOrd>(
    s: &str,
    one: impl Fn(&str) -> Result<T, AddrError>,
    reversed: impl Fn(T, T) -> AddrError,
) -> Result<(T, T), AddrError> {
    match s.split_once('-') {
        None => {
            let v = one(s)?;
            Ok((v, v))
        }
        Some((a, b)) => {
            let (a, b) = (one(a)?, one(b)?);
            if a > b {
                return Err(reversed(a, b));
            }
            Ok((a, b))
        }
    }
}

impl FromStr for Endpoint {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (ips, ports) = match s.split_once(':') {
            Some((ip, port)) => (ip, Some(port)),
            None => (s, None),
        };
        let (ip, ip_last) = parse_range(
            ips,
            |x| x.parse::<Ipv4Addr>().map_err(|_| AddrError::Ip),
            |first, last| AddrError::IpRangeReversed { first, last },
        )?;
        let (port, port_last) = match ports {
            None => (None, None),
            Some(p) => {
                let (a, b) = parse_range(
                    p,
                    |x| x.parse::<u16>().map_err(|_| AddrError::Port),
                    |first, last| AddrError::PortRangeReversed { first, last },
                )?;
                (Some(a), Some(b))
            }
        };
        Ok(Endpoint {
            ip,
            ip_last,
            port,
            port_last,
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ip)?;
        if self.ips_vary() {
            write!(f, "-{}", self.ip_last)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
            if let Some(q) = self.port_last.filter(|&q| q != p) {
                write!(f, "-{q}")?;
            }
        }
        Ok(())
    }
}

/// Walks an endpoint's range one packet at a time, as netmap's pkt-gen
/// does: the port fastest, then the address; after the last port of the
/// last address it starts over. A single address and port stays put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeCursor {
    ip: u32,
    ip_first: u32,
    ip_last: u32,
    port: u16,
    port_first: u16,
    port_last: u16,
}

impl RangeCursor {
    /// A cursor at the start of `ep`'s range; `default_port` stands in
    /// when `ep` names no port.
    pub fn new(ep: &Endpoint, default_port: u16) -> RangeCursor {
        let port_first = ep.port.unwrap_or(default_port);
        RangeCursor {
            ip: u32::from(ep.ip),
            ip_first: u32::from(ep.ip),
            ip_last: u32::from(ep.ip_last),
            port: port_first,
            port_first,
            port_last: ep.port_last.unwrap_or(port_first),
        }
    }

    /// The current address, as a host-order number.
    #[inline(always)]
    pub fn ip(&self) -> u32 {
        self.ip
    }

    /// The current port.
    #[inline(always)]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Moves to the next point of the range.
    #[inline(always)]
    pub fn advance(&mut self) {
        if self.port < self.port_last {
            self.port += 1;
            return;
        }
        self.port = self.port_first;
        self.ip = if self.ip < self.ip_last {
            self.ip + 1
        } else {
            self.ip_first
        };
    }

    /// Points in one lap of the range.
    pub fn points(&self) -> u64 {
        (u64::from(self.ip_last - self.ip_first) + 1)
            * (u64::from(self.port_last - self.port_first) + 1)
    }
}

/// Everything the template is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source address.
    pub src_ip: Ipv4Addr,
    /// Destination address.
    pub dst_ip: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Frame length without the Ethernet CRC.
    pub len: usize,
}

/// Which fields [`Template::stamp`] writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// Source and destination ports (random ports, port ranges).
    pub ports: bool,
    /// Source and destination addresses and the IPv4 header checksum
    /// (address ranges).
    pub addrs: bool,
    /// The sequence number.
    pub seq: bool,
    /// The stream (sending thread) index after the sequence number; not
    /// together with `ts`, which takes the same bytes.
    pub stream: bool,
    /// The timestamp.
    pub ts: bool,
}

impl Fields {
    /// Whether anything is stamped at all.
    pub fn any(self) -> bool {
        self.ports || self.addrs || self.seq || self.stream || self.ts
    }

    /// The shortest frame these fields fit in.
    pub fn min_frame_len(self) -> usize {
        if self.ts {
            PING_FRAME_LEN
        } else if self.stream {
            STREAM_FRAME_LEN
        } else if self.seq {
            SEQ_FRAME_LEN
        } else if self.ports || self.addrs {
            HEADERS_LEN
        } else {
            MIN_FRAME_LEN
        }
    }
}

/// The per-packet values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Source address, host order (with [`Fields::addrs`]).
    pub src_ip: u32,
    /// Destination address, host order (with [`Fields::addrs`]).
    pub dst_ip: u32,
    /// Source port (with [`Fields::ports`]).
    pub src_port: u16,
    /// Destination port (with [`Fields::ports`]).
    pub dst_port: u16,
    /// Sequence number (with [`Fields::seq`]).
    pub seq: u32,
    /// Stream index (with [`Fields::stream`]).
    pub stream: u16,
    /// Timestamp in ns (with [`Fields::ts`]).
    pub ts_ns: u64,
}

/// A frame built once; copied into each buffer once, then stamped.
#[derive(Clone, Debug)]
pub struct Template {
    bytes: Vec<u8>,
    src_ip: u32,
    dst_ip: u32,
    src_port: u16,
    dst_port: u16,
    /// One's-complement sum of the UDP pseudo-header, the UDP header without
    /// the ports and checksum, and the payload with the stamped fields zero.
    udp_base_sum: u64,
    /// The same without the addresses of the pseudo-header.
    udp_noaddr_sum: u64,
    /// Sum of the IPv4 header without the addresses and the checksum.
    ip_noaddr_sum: u64,
}

/// Sum of big-endian 16-bit words (a trailing odd byte is the high half of
/// a word), not yet folded.
pub fn sum16(data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    let mut sum: u64 = chunks
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [b] = chunks.remainder() {
        sum += u64::from(*b) << 8;
    }
    sum
}

/// Folds a sum into 16 bits, end-around carry included.
pub fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The UDP checksum field for a folded sum: 0 is sent as 0xffff, since 0
/// means "no checksum".
fn udp_csum(sum: u64) -> u16 {
    match !fold(sum) {
        0 => 0xffff,
        c => c,
    }
}

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

fn words32(v: u32) -> u64 {
    u64::from(v >> 16) + u64::from(v & 0xffff)
}

impl Template {
    /// Builds the frame.
    pub fn new(spec: &FrameSpec) -> Template {
        let full = spec.len.max(HEADERS_LEN);
        let mut b = vec![0u8; full];
        b[ETH_DST..ETH_DST + 6].copy_from_slice(&spec.dst_mac.0);
        b[ETH_SRC..ETH_SRC + 6].copy_from_slice(&spec.src_mac.0);
        put16(&mut b, ETH_TYPE, ETHERTYPE_IPV4);

        let ip_len = (full - ETH_HDR_LEN) as u16;
        let udp_len = (full - ETH_HDR_LEN - IP_HDR_LEN) as u16;
        b[IP] = 0x45; // version 4, 5 words
        put16(&mut b, IP + 2, ip_len);
        put16(&mut b, IP + 6, 0x4000); // DF, fragment offset 0
        b[IP + 8] = 64; // TTL
        b[IP_PROTO] = IPPROTO_UDP;
        // The header before the addresses, checksum still zero.
        let ip_noaddr_sum = sum16(&b[IP..IP_SRC]);
        b[IP_SRC..IP_SRC + 4].copy_from_slice(&spec.src_ip.octets());
        b[IP_DST..IP_DST + 4].copy_from_slice(&spec.dst_ip.octets());
        let ip_csum = !fold(sum16(&b[IP..IP + IP_HDR_LEN]));
        put16(&mut b, IP_CSUM, ip_csum);

        put16(&mut b, UDP_SPORT, spec.src_port);
        put16(&mut b, UDP_DPORT, spec.dst_port);
        put16(&mut b, UDP + 4, udp_len);
        for (i, x) in b[PING_FRAME_LEN.min(full)..].iter_mut().enumerate() {
            *x = FILLER[i % FILLER.len()];
        }

        // Pseudo-header (addresses, protocol, UDP length), then the UDP
        // length field itself, then the payload (stamped fields still zero).
        let udp_noaddr_sum = u64::from(IPPROTO_UDP)
            + u64::from(udp_len)
            + u64::from(udp_len)
            + sum16(&b[HEADERS_LEN..]);
        let udp_base_sum = udp_noaddr_sum + sum16(&b[IP_SRC..IP_DST + 4]);
        let csum = udp_csum(udp_base_sum + u64::from(spec.src_port) + u64::from(spec.dst_port));
        put16(&mut b, UDP_CSUM, csum);
        b.truncate(spec.len);
        Template {
            bytes: b,
            src_ip: u32::from(spec.src_ip),
            dst_ip: u32::from(spec.dst_ip),
            src_port: spec.src_port,
            dst_port: spec.dst_port,
            udp_base_sum,
            udp_noaddr_sum,
            ip_noaddr_sum,
        }
    }

    /// The frame.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Frame length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The template's source and destination ports.
    pub fn ports(&self) -> (u16, u16) {
        (self.src_port, self.dst_port)
    }

    /// The template's source and destination addresses, host order.
    pub fn addrs(&self) -> (u32, u32) {
        (self.src_ip, self.dst_ip)
    }

    /// Whether the frame is empty (never, for a built template).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the fields `f` of `st` into `frame` (a copy of this template)
    /// and the checksums covering them: the UDP checksum always, the IPv4
    /// header checksum with [`Fields::addrs`]. Both are recomputed from the
    /// sums precomputed over the fixed part plus the stamped words, so they
    /// equal a computation from scratch. Does nothing when `frame` is
    /// shorter than `f` needs (the caller checked the length at start-up).
    #[inline]
    pub fn stamp(&self, frame: &mut [u8], st: &Stamp, f: Fields) {
        let need = f.min_frame_len().max(HEADERS_LEN);
        if frame.len() < need || self.bytes.len() < need {
            return;
        }
        let mut sum = if f.addrs {
            let a = words32(st.src_ip) + words32(st.dst_ip);
            frame[IP_SRC..IP_SRC + 4].copy_from_slice(&st.src_ip.to_be_bytes());
            frame[IP_DST..IP_DST + 4].copy_from_slice(&st.dst_ip.to_be_bytes());
            put16(frame, IP_CSUM, !fold(self.ip_noaddr_sum + a));
            self.udp_noaddr_sum + a
        } else {
            self.udp_base_sum
        };
        if f.ports {
            put16(frame, UDP_SPORT, st.src_port);
            put16(frame, UDP_DPORT, st.dst_port);
            sum += u64::from(st.src_port) + u64::from(st.dst_port);
        } else {
            sum += u64::from(self.src_port) + u64::from(self.dst_port);
        }
        if f.seq {
            frame[SEQ_OFS..SEQ_OFS + 4].copy_from_slice(&st.seq.to_be_bytes());
            sum += words32(st.seq);
        }
        if f.ts {
            frame[TS_OFS..TS_OFS + 8].copy_from_slice(&st.ts_ns.to_be_bytes());
            sum += words32((st.ts_ns >> 32) as u32) + words32(st.ts_ns as u32);
        } else if f.stream {
            put16(frame, STREAM_OFS, st.stream);
            sum += u64::from(st.stream);
        }
        put16(frame, UDP_CSUM, udp_csum(sum));
    }
}

/// The sequence number of a frame, if it is long enough to carry one.
#[inline]
pub fn read_seq(frame: &[u8]) -> Option<u32> {
    let b = frame.get(SEQ_OFS..SEQ_OFS + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The stream (sending thread) index of a txseq frame: 0 for frames too
/// short to carry one, as for a single sender.
#[inline]
pub fn read_stream(frame: &[u8]) -> u16 {
    frame
        .get(STREAM_OFS..STREAM_OFS + 2)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

/// The timestamp of a frame, if it is long enough to carry one.
#[inline]
pub fn read_ts(frame: &[u8]) -> Option<u64> {
    let b = frame.get(TS_OFS..TS_OFS + 8)?;
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    Some(u64::from_be_bytes(w))
}

fn swap_ranges(b: &mut [u8], a: usize, c: usize, n: usize) {
    for i in 0..n {
        b.swap(a + i, c + i);
    }
}

/// Turns a frame into its reply: swaps the MACs, and for IPv4 the addresses
/// and for UDP the ports, as far as the frame carries them. Checksums stay
/// valid (a one's-complement sum does not depend on the order of words).
#[inline]
pub fn swap_addresses(frame: &mut [u8]) {
    if frame.len() < ETH_HDR_LEN {
        return;
    }
    swap_ranges(frame, ETH_DST, ETH_SRC, 6);
    if get16(frame, ETH_TYPE) != ETHERTYPE_IPV4 || frame.len() < IP + IP_HDR_LEN {
        return;
    }
    swap_ranges(frame, IP_SRC, IP_DST, 4);
    if frame[IP] == 0x45 && frame[IP_PROTO] == IPPROTO_UDP && frame.len() >= HEADERS_LEN {
        swap_ranges(frame, UDP_SPORT, UDP_DPORT, 2);
    }
}

/// Whether the IPv4 header checksum of `frame` is right.
pub fn ipv4_checksum_ok(frame: &[u8]) -> bool {
    frame.len() >= IP + IP_HDR_LEN && fold(sum16(&frame[IP..IP + IP_HDR_LEN])) == 0xffff
}

/// Whether the UDP checksum of `frame` is right (over the UDP length the
/// header claims, which must fit in the frame).
pub fn udp_checksum_ok(frame: &[u8]) -> bool {
    if frame.len() < HEADERS_LEN || frame[IP_PROTO] != IPPROTO_UDP {
        return false;
    }
    let udp_len = usize::from(get16(frame, UDP + 4));
    if udp_len < UDP_HDR_LEN || UDP + udp_len > frame.len() {
        return false;
    }
    let sum = sum16(&frame[IP_SRC..IP_DST + 4])
        + u64::from(IPPROTO_UDP)
        + udp_len as u64
        + sum16(&frame[UDP..UDP + udp_len]);
    fold(sum) == 0xffff
}

/// A small fast generator for random ports (xorshift64*); not for secrets.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator (a zero seed is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 16 random bits.
    #[inline]
    pub fn next_u16(&mut self) -> u16 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 48) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(len: usize) -> FrameSpec {
        FrameSpec {
            src_mac: "00:00:00:00:00:01".parse().unwrap(),
            dst_mac: "ff:ff:ff:ff:ff:ff".parse().unwrap(),
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 1, 0, 1),
            src_port: 1234,
            dst_port: 4321,
            len,
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn default_frame_matches_known_good_bytes() {
        // Computed independently (Python, RFC 768/791 checksums).
        let want = hex("ffffffffffff 000000000001 0800
             4500 002e 0000 4000 4011 26bd 0a000001 0a010001
             04d2 10e1 001a 81bc
             00000000 0000000000000000
             72696e677377");
        let t = Template::new(&spec(60));
        assert_eq!(t.len(), 60);
        assert_eq!(t.bytes(), &want[..]);
        assert!(ipv4_checksum_ok(t.bytes()));
        assert!(udp_checksum_ok(t.bytes()));
    }

    #[test]
    fn ip_checksum_matches_textbook_example() {
        // The worked example of RFC 1071-style header checksums:
        // 4500 0073 0000 4000 4011 ---- c0a8 0001 c0a8 00c7 -> b861.
        let mut s = spec(14 + 0x73);
        s.src_ip = Ipv4Addr::new(192, 168, 0, 1);
        s.dst_ip = Ipv4Addr::new(192, 168, 0, 199);
        let t = Template::new(&s);
        assert_eq!(
            &t.bytes()[14..34],
            &hex("4500 0073 0000 4000 4011 b861 c0a80001 c0a800c7")[..]
        );
    }

    #[test]
    fn stamped_frames_keep_valid_checksums() {
        for len in [46, 54, 60, 61, 1514] {
            let t = Template::new(&spec(len));
            let mut f = t.bytes().to_vec();
            let fields = Fields {
                ports: true,
                seq: true,
                ts: len >= PING_FRAME_LEN,
                ..Fields::default()
            };
            let mut rng = Rng::new(7);
            for seq in [0u32, 1, 0xffff, 0x1_0000, 0xdead_beef, u32::MAX] {
                let st = Stamp {
                    src_port: rng.next_u16(),
                    dst_port: rng.next_u16(),
                    seq,
                    ts_ns: u64::MAX - seq as u64,
                    ..Stamp::default()
                };
                t.stamp(&mut f, &st, fields);
                assert!(udp_checksum_ok(&f), "len {len} seq {seq:#x}");
                assert!(ipv4_checksum_ok(&f));
                assert_eq!(read_seq(&f), Some(seq));
                if fields.ts {
                    assert_eq!(read_ts(&f), Some(st.ts_ns));
                }
            }
            // Without the port field, the template's ports stay.
            f.copy_from_slice(t.bytes());
            t.stamp(
                &mut f,
                &Stamp {
                    src_port: 1,
                    dst_port: 2,
                    seq: 5,
                    ..Stamp::default()
                },
                Fields {
                    seq: true,
                    ..Fields::default()
                },
            );
            assert_eq!(&f[34..38], &t.bytes()[34..38]);
            assert!(udp_checksum_ok(&f));
        }
    }

    #[test]
    fn stamp_refuses_short_frames_and_zero_checksum_is_sent_as_ffff() {
        let t = Template::new(&spec(46));
        let mut f = t.bytes().to_vec();
        t.stamp(
            &mut f,
            &Stamp {
                ts_ns: 1,
                ..Stamp::default()
            },
            Fields {
                ts: true,
                ..Fields::default()
            },
        );
        assert_eq!(&f[..], t.bytes(), "a timestamp does not fit 46 bytes");
        assert_eq!(udp_csum(0xffff), 0xffff);
        assert_eq!(udp_csum(0x1234), !0x1234);
    }

    #[test]
    fn short_frames_are_truncated_headers() {
        let full = Template::new(&spec(42));
        for len in [14, 20, 41] {
            let t = Template::new(&spec(len));
            assert_eq!(t.bytes(), &full.bytes()[..len]);
        }
        assert!(udp_checksum_ok(full.bytes()));
    }

    #[test]
    fn seq_and_ts_decode() {
        let mut f = [0u8; 54];
        f[42..46].copy_from_slice(&[0x01, 0x02, 0x03, 0x04]);
        f[46..54].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0x01, 0x00]);
        assert_eq!(read_seq(&f), Some(0x0102_0304));
        assert_eq!(read_ts(&f), Some(256));
        assert_eq!(read_seq(&f[..45]), None);
        assert_eq!(read_ts(&f[..53]), None);
    }

    #[test]
    fn swap_makes_the_reply_and_keeps_checksums() {
        let t = Template::new(&spec(60));
        let mut f = t.bytes().to_vec();
        swap_addresses(&mut f);
        assert_eq!(&f[0..6], &[0, 0, 0, 0, 0, 1]);
        assert_eq!(&f[6..12], &[0xff; 6]);
        assert_eq!(&f[26..30], &[10, 1, 0, 1]);
        assert_eq!(&f[30..34], &[10, 0, 0, 1]);
        assert_eq!(get16(&f, 34), 4321);
        assert_eq!(get16(&f, 36), 1234);
        assert!(ipv4_checksum_ok(&f) && udp_checksum_ok(&f));
        swap_addresses(&mut f);
        assert_eq!(&f[..], t.bytes());
        // Short or non-IP frames: only what is there is touched.
        let mut short = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x86, 0xdd, 0xaa];
        swap_addresses(&mut short);
        assert_eq!(
            short,
            [7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 0x86, 0xdd, 0xaa]
        );
        swap_addresses(&mut [0u8; 5]);
    }

    #[test]
    fn mac_parsing() {
        assert_eq!("00:00:00:00:00:01".parse(), Ok(MacAddr([0, 0, 0, 0, 0, 1])));
        assert_eq!(
            "a-B-c-D-e-F".parse(),
            Ok(MacAddr([0xa, 0xb, 0xc, 0xd, 0xe, 0xf]))
        );
        assert_eq!(
            MacAddr([0xff, 0, 0x12, 0, 0, 1]).to_string(),
            "ff:00:12:00:00:01"
        );
        for bad in [
            "",
            "00:00:00:00:00",
            "00:00:00:00:00:00:00",
            "000:00:00:00:00:00",
            "gg:00:00:00:00:00",
            "00::00:00:00:00",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(AddrError::Mac), "{bad}");
        }
    }

    #[test]
    fn endpoint_parsing() {
        let ip = |a, b, c, d| Ipv4Addr::new(a, b, c, d);
        assert_eq!(
            "10.0.0.1".parse(),
            Ok(Endpoint::single(ip(10, 0, 0, 1), None))
        );
        assert_eq!(
            "10.1.0.1:4321".parse(),
            Ok(Endpoint::single(ip(10, 1, 0, 1), Some(4321)))
        );
        assert_eq!("10.0.0.1:65536".parse::<Endpoint>(), Err(AddrError::Port));
        assert_eq!("10.0.0.1:".parse::<Endpoint>(), Err(AddrError::Port));
        assert_eq!("10.0.0".parse::<Endpoint>(), Err(AddrError::Ip));
        assert_eq!(
            "10.0.0.1-10.0.0.9".parse(),
            Ok(Endpoint {
                ip: ip(10, 0, 0, 1),
                ip_last: ip(10, 0, 0, 9),
                port: None,
                port_last: None
            })
        );
        assert_eq!(
            "10.0.0.1:1-9".parse(),
            Ok(Endpoint {
                ip: ip(10, 0, 0, 1),
                ip_last: ip(10, 0, 0, 1),
                port: Some(1),
                port_last: Some(9)
            })
        );
        let both: Endpoint = "10.0.0.250-10.0.1.3:65530-65535".parse().unwrap();
        assert_eq!(
            (both.ip_last, both.port, both.port_last),
            (ip(10, 0, 1, 3), Some(65530), Some(65535))
        );
        assert!(both.ips_vary() && both.ports_vary() && both.is_range());
        assert_eq!(both.to_string(), "10.0.0.250-10.0.1.3:65530-65535");
        assert_eq!(both.describe(1), "10.0.0.250-10.0.1.3:65530-65535");
        let one: Endpoint = "10.0.0.1-10.0.0.1:7-7".parse().unwrap();
        assert!(!one.is_range(), "a range of one is a single point");
        assert_eq!(one.to_string(), "10.0.0.1:7");
        assert_eq!(
            "10.0.0.1".parse::<Endpoint>().unwrap().describe(1234),
            "10.0.0.1:1234"
        );
        // Backwards ranges are refused, with both ends named.
        let e = "10.0.0.9-10.0.0.1".parse::<Endpoint>().unwrap_err();
        assert_eq!(
            e,
            AddrError::IpRangeReversed {
                first: ip(10, 0, 0, 9),
                last: ip(10, 0, 0, 1)
            }
        );
        assert_eq!(
            e.to_string(),
            "the address range 10.0.0.9-10.0.0.1 runs backwards: the first address must not be above the last"
        );
        let e = "10.0.0.1:9-1".parse::<Endpoint>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "the port range 9-1 runs backwards: the first port must not be above the last"
        );
        for bad in [
            "10.0.0.1-",
            "-10.0.0.1",
            "10.0.0.1-10.0.0.2-10.0.0.3",
            "10.0.0.1:1-",
            "10.0.0.1:1-2-3",
            "10.0.0.1:1:2",
            "10.0.0.1:-1",
        ] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
        assert_eq!(
            "10.0.0.1:80".parse::<Endpoint>().unwrap().to_string(),
            "10.0.0.1:80"
        );
    }

    #[test]
    fn cursor_walks_ports_first_then_addresses_and_wraps() {
        let ep: Endpoint = "10.0.0.255-10.0.1.1:65534-65535".parse().unwrap();
        let mut c = RangeCursor::new(&ep, 9);
        assert_eq!(c.points(), 6);
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push((Ipv4Addr::from(c.ip()).to_string(), c.port()));
            c.advance();
        }
        let want: Vec<(String, u16)> = [
            ("10.0.0.255", 65534),
            ("10.0.0.255", 65535),
            ("10.0.1.0", 65534),
            ("10.0.1.0", 65535),
            ("10.0.1.1", 65534),
            ("10.0.1.1", 65535),
            ("10.0.0.255", 65534),
            ("10.0.0.255", 65535),
        ]
        .iter()
        .map(|(a, p)| (a.to_string(), *p))
        .collect();
        assert_eq!(seen, want);
        // No port given: the default, fixed; the address still walks.
        let ep: Endpoint = "10.0.0.1-10.0.0.2".parse().unwrap();
        let mut c = RangeCursor::new(&ep, 1234);
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push((c.ip() & 0xff, c.port()));
            c.advance();
        }
        assert_eq!(seen, [(1, 1234), (2, 1234), (1, 1234)]);
        // The whole address space, and a single point, wrap without overflow.
        let ep: Endpoint = "255.255.255.255:65535".parse().unwrap();
        let mut c = RangeCursor::new(&ep, 0);
        c.advance();
        assert_eq!((c.ip(), c.port()), (u32::MAX, 65535));
        let ep: Endpoint = "0.0.0.0-255.255.255.255:0-65535".parse().unwrap();
        assert_eq!(RangeCursor::new(&ep, 0).points(), 1 << 48);
    }

    /// The checksums of `f` computed from scratch, independently of the
    /// template code: (IPv4 header, UDP).
    fn scratch_checksums(f: &[u8]) -> (u16, u16) {
        let mut g = f.to_vec();
        g[24] = 0;
        g[25] = 0;
        g[40] = 0;
        g[41] = 0;
        let mut s: u32 = 0;
        for w in g[14..34].chunks(2) {
            s += u32::from(w[0]) << 8 | u32::from(w[1]);
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        let ip = !(s as u16);
        let udp_len = usize::from(u16::from_be_bytes([g[38], g[39]]));
        let mut pseudo = g[26..34].to_vec();
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
        pseudo.extend_from_slice(&g[34..34 + udp_len]);
        if pseudo.len() % 2 == 1 {
            pseudo.push(0);
        }
        let mut s: u64 = 0;
        for w in pseudo.chunks(2) {
            s += u64::from(w[0]) << 8 | u64::from(w[1]);
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        let udp = match !(s as u16) {
            0 => 0xffff,
            c => c,
        };
        (ip, udp)
    }

    #[test]
    fn stamped_ranges_match_checksums_from_scratch() {
        // Ranges crossing byte and word boundaries of the addresses and the
        // top of the port space, walked for more than one lap.
        let src: Endpoint = "10.0.255.254-10.1.0.1:65533-65535".parse().unwrap();
        let dst: Endpoint = "192.168.0.255-192.168.1.0:0-1".parse().unwrap();
        for (len, fields) in [
            (
                60,
                Fields {
                    ports: true,
                    addrs: true,
                    ..Fields::default()
                },
            ),
            (
                61,
                Fields {
                    ports: true,
                    addrs: true,
                    seq: true,
                    stream: true,
                    ..Fields::default()
                },
            ),
            (
                1514,
                Fields {
                    ports: true,
                    addrs: true,
                    seq: true,
                    ts: true,
                    ..Fields::default()
                },
            ),
        ] {
            let mut sp = spec(len);
            sp.src_ip = src.ip;
            sp.dst_ip = dst.ip;
            sp.src_port = src.port.unwrap();
            sp.dst_port = dst.port.unwrap();
            let t = Template::new(&sp);
            let (mut cs, mut cd) = (RangeCursor::new(&src, 0), RangeCursor::new(&dst, 0));
            let mut f = t.bytes().to_vec();
            let lap = cs.points() * 2;
            let mut wraps = 0;
            for k in 0..lap + 3 {
                let st = Stamp {
                    src_ip: cs.ip(),
                    dst_ip: cd.ip(),
                    src_port: cs.port(),
                    dst_port: cd.port(),
                    seq: 0xffff_fff0u32.wrapping_add(k as u32 * 7),
                    stream: 0xfffeu16.wrapping_add(k as u16),
                    ts_ns: u64::MAX / (k + 1),
                };
                // Stamped over the previous packet, as in a reused buffer.
                t.stamp(&mut f, &st, fields);
                let (ip, udp) = scratch_checksums(&f);
                assert_eq!(get16(&f, IP_CSUM), ip, "len {len} packet {k}");
                assert_eq!(get16(&f, UDP_CSUM), udp, "len {len} packet {k}");
                assert!(ipv4_checksum_ok(&f) && udp_checksum_ok(&f));
                // And the same as a template built for that point.
                let mut p = sp.clone();
                p.src_ip = Ipv4Addr::from(st.src_ip);
                p.dst_ip = Ipv4Addr::from(st.dst_ip);
                p.src_port = st.src_port;
                p.dst_port = st.dst_port;
                let mut g = Template::new(&p).bytes().to_vec();
                let only_seq = Fields {
                    seq: fields.seq,
                    stream: fields.stream,
                    ts: fields.ts,
                    ..Fields::default()
                };
                Template::new(&p).stamp(&mut g, &st, only_seq);
                assert_eq!(f, g, "len {len} packet {k}");
                assert_eq!(&f[26..30], &st.src_ip.to_be_bytes());
                assert_eq!(get16(&f, UDP_DPORT), st.dst_port);
                if fields.stream {
                    assert_eq!(read_stream(&f), st.stream);
                }
                cs.advance();
                cd.advance();
                if (cs.ip(), cs.port()) == (u32::from(src.ip), src.port.unwrap()) {
                    wraps += 1;
                }
            }
            assert_eq!(wraps, 2, "went round the source range twice");
        }
    }

    #[test]
    fn no_addrs_field_leaves_the_ip_header_alone() {
        let t = Template::new(&spec(60));
        let mut f = t.bytes().to_vec();
        t.stamp(
            &mut f,
            &Stamp {
                src_ip: 1,
                dst_ip: 2,
                seq: 3,
                stream: 4,
                ..Stamp::default()
            },
            Fields {
                seq: true,
                ..Fields::default()
            },
        );
        assert_eq!(&f[..40], &t.bytes()[..40], "only the UDP checksum changes");
        assert_eq!(read_stream(&f), 0, "no stream field: the template's zero");
        assert!(udp_checksum_ok(&f));
        assert_eq!(read_stream(&f[..47]), 0);
    }

    #[test]
    fn rng_spreads_ports() {
        let mut r = Rng::new(0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            seen.insert(r.next_u16());
        }
        assert!(seen.len() > 900);
    }
}
