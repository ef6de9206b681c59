//! The frames pkt-gen sends: an Ethernet/IPv4/UDP template built once, with
//! real checksums, and the few fields stamped into it per packet (ports,
//! sequence number, timestamp) with the UDP checksum updated from a sum
//! precomputed over everything else.
//!
//! Layout (offsets in the frame):
//!
//! | bytes | field |
//! |---|---|
//! | 0..14 | Ethernet: dst MAC, src MAC, ethertype 0x0800 |
//! | 14..34 | IPv4: no options, DF, TTL 64, protocol 17 |
//! | 34..42 | UDP |
//! | 42..46 | sequence number, big endian (txseq, ping) |
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
    /// netmap's `a-b` range syntax.
    #[error(
        "address and port ranges are not supported; give one IPv4 address, optionally with :port"
    )]
    Range,
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

/// An IPv4 address with an optional UDP port: `10.0.0.1` or `10.0.0.1:1234`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Address.
    pub ip: Ipv4Addr,
    /// Port, if given.
    pub port: Option<u16>,
}

impl FromStr for Endpoint {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.contains('-') {
            return Err(AddrError::Range);
        }
        let (ip, port) = match s.split_once(':') {
            Some((ip, port)) => (ip, Some(port.parse::<u16>().map_err(|_| AddrError::Port)?)),
            None => (s, None),
        };
        let ip = ip.parse::<Ipv4Addr>().map_err(|_| AddrError::Ip)?;
        Ok(Endpoint { ip, port })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.ip),
            None => write!(f, "{}", self.ip),
        }
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
    /// Source and destination ports (random ports).
    pub ports: bool,
    /// The sequence number.
    pub seq: bool,
    /// The timestamp.
    pub ts: bool,
}

impl Fields {
    /// Whether anything is stamped at all.
    pub fn any(self) -> bool {
        self.ports || self.seq || self.ts
    }

    /// The shortest frame these fields fit in.
    pub fn min_frame_len(self) -> usize {
        if self.ts {
            PING_FRAME_LEN
        } else if self.seq {
            SEQ_FRAME_LEN
        } else if self.ports {
            HEADERS_LEN
        } else {
            MIN_FRAME_LEN
        }
    }
}

/// The per-packet values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Source port (with [`Fields::ports`]).
    pub src_port: u16,
    /// Destination port (with [`Fields::ports`]).
    pub dst_port: u16,
    /// Sequence number (with [`Fields::seq`]).
    pub seq: u32,
    /// Timestamp in ns (with [`Fields::ts`]).
    pub ts_ns: u64,
}

/// A frame built once; copied into each buffer once, then stamped.
#[derive(Clone, Debug)]
pub struct Template {
    bytes: Vec<u8>,
    src_port: u16,
    dst_port: u16,
    /// One's-complement sum of the UDP pseudo-header, the UDP header without
    /// the ports and checksum, and the payload with the stamped fields zero.
    udp_base_sum: u64,
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
        let udp_base_sum = sum16(&b[IP_SRC..IP_DST + 4])
            + u64::from(IPPROTO_UDP)
            + u64::from(udp_len)
            + u64::from(udp_len)
            + sum16(&b[HEADERS_LEN..]);
        let csum = udp_csum(udp_base_sum + u64::from(spec.src_port) + u64::from(spec.dst_port));
        put16(&mut b, UDP_CSUM, csum);
        b.truncate(spec.len);
        Template {
            bytes: b,
            src_port: spec.src_port,
            dst_port: spec.dst_port,
            udp_base_sum,
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

    /// Whether the frame is empty (never, for a built template).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the fields `f` of `st` into `frame` (a copy of this template)
    /// and the UDP checksum covering them. Does nothing when `frame` is
    /// shorter than `f` needs (the caller checked the length at start-up).
    #[inline]
    pub fn stamp(&self, frame: &mut [u8], st: &Stamp, f: Fields) {
        let need = f.min_frame_len().max(HEADERS_LEN);
        if frame.len() < need || self.bytes.len() < need {
            return;
        }
        let (sp, dp) = if f.ports {
            (st.src_port, st.dst_port)
        } else {
            (self.src_port, self.dst_port)
        };
        let mut sum = self.udp_base_sum + u64::from(sp) + u64::from(dp);
        if f.ports {
            put16(frame, UDP_SPORT, sp);
            put16(frame, UDP_DPORT, dp);
        }
        if f.seq {
            frame[SEQ_OFS..SEQ_OFS + 4].copy_from_slice(&st.seq.to_be_bytes());
            sum += words32(st.seq);
        }
        if f.ts {
            frame[TS_OFS..TS_OFS + 8].copy_from_slice(&st.ts_ns.to_be_bytes());
            sum += words32((st.ts_ns >> 32) as u32) + words32(st.ts_ns as u32);
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
            };
            let mut rng = Rng::new(7);
            for seq in [0u32, 1, 0xffff, 0x1_0000, 0xdead_beef, u32::MAX] {
                let st = Stamp {
                    src_port: rng.next_u16(),
                    dst_port: rng.next_u16(),
                    seq,
                    ts_ns: u64::MAX - seq as u64,
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
                    ts_ns: 0,
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
        assert_eq!(
            "10.0.0.1".parse(),
            Ok(Endpoint {
                ip: Ipv4Addr::new(10, 0, 0, 1),
                port: None
            })
        );
        assert_eq!(
            "10.1.0.1:4321".parse(),
            Ok(Endpoint {
                ip: Ipv4Addr::new(10, 1, 0, 1),
                port: Some(4321)
            })
        );
        assert_eq!("10.0.0.1:65536".parse::<Endpoint>(), Err(AddrError::Port));
        assert_eq!("10.0.0.1:".parse::<Endpoint>(), Err(AddrError::Port));
        assert_eq!("10.0.0".parse::<Endpoint>(), Err(AddrError::Ip));
        assert_eq!(
            "10.0.0.1-10.0.0.9".parse::<Endpoint>(),
            Err(AddrError::Range)
        );
        assert_eq!("10.0.0.1:1-9".parse::<Endpoint>(), Err(AddrError::Range));
        assert_eq!(
            "10.0.0.1:80".parse::<Endpoint>().unwrap().to_string(),
            "10.0.0.1:80"
        );
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
