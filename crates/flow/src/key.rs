//! Flow keys: the header fields of a frame that a flow table matches on,
//! as a fixed array of `u64` words, and masks of the same shape.
//!
//! A [`FlowKey`] is extracted from a frame's first bytes (at most
//! [`KEY_BYTES`]) by [`FlowKey::extract`]; frames are untrusted, so any
//! bytes of any length give a key (the fields that are not all there are
//! left 0) and nothing panics. A [`KeyMask`] is built from an OpenFlow
//! [`Match`]: a match is then a (mask, masked value) pair, and matching,
//! hashing and comparing are word operations.
//!
//! # Layout
//!
//! | word | bits 63..0 |
//! |---|---|
//! | 0 | in_port (32) · eth_type (16) · vlan_vid with `OFPVID_PRESENT` (13) · vlan_pcp (3) |
//! | 1 | metadata (64) |
//! | 2 | eth_dst (48) · ip_proto (8) · ip_dscp (6) · ip_ecn (2) |
//! | 3 | eth_src (48) · arp_op (16) |
//! | 4, 5 | ipv6_src (128); or ipv4_src / arp_spa in word 4 (low 32), arp_sha in word 5 (low 48) |
//! | 6, 7 | ipv6_dst (128); or ipv4_dst / arp_tpa in word 6 (low 32), arp_tha in word 7 (low 48) |
//! | 8 | L4 source (16) · L4 destination (16) · 12 zero bits · ipv6_flabel (20) |
//!
//! Fields that share bits never meet in one valid match: their OpenFlow
//! prerequisites differ (`tcp_src` needs `ip_proto` 6, `udp_src` 17;
//! `ipv4_src` needs `eth_type` 0x0800, `arp_spa` 0x0806, `ipv6_src`
//! 0x86dd), and the prerequisite is itself in the mask. The L4 source
//! holds the TCP, UDP or SCTP source port, or the ICMP/ICMPv6 type (low 8
//! bits); the L4 destination the destination port or the ICMP code.
//!
//! `eth_type` is the type after one VLAN tag (0x8100 or 0x88a8); a frame
//! with an 802.3 length there keeps that value. The VLAN vid is
//! `OFPVID_PRESENT | vid` for a tagged frame and `OFPVID_NONE` (0) for an
//! untagged one, as OpenFlow 1.3 matches it.

use ringswitch_openflow::oxm::OFPVID_PRESENT;
use ringswitch_openflow::{Field, Match};

use crate::error::FlowError;

/// How many 64-bit words a key holds.
pub const KEY_WORDS: usize = 9;
// `FlowKey::hash` and `FlowKey::same` are written out for nine words.
const _: () = assert!(KEY_WORDS == 9);

/// How many leading bytes of a frame the key is extracted from.
pub const KEY_BYTES: usize = 128;

/// How many leading bytes [`FlowKey::extract_prefix`]'s fixed-offset path
/// reads: an untagged IPv4 header without options and the L4 ports.
pub const FAST_BYTES: usize = 14 + 20 + 4;

/// Where a field's bits are: `bits` bits at `shift` in word `word`.
#[derive(Clone, Copy)]
struct Slot {
    word: usize,
    shift: u32,
    bits: u32,
}

const fn s(word: usize, shift: u32, bits: u32) -> Slot {
    Slot { word, shift, bits }
}

/// A field's slots, most significant part first; `None` for a field the
/// tables do not match on.
fn slots(f: Field) -> Option<&'static [Slot]> {
    use Field::*;
    Some(match f {
        InPort => const { &[s(0, 32, 32)] },
        EthType => const { &[s(0, 16, 16)] },
        VlanVid => const { &[s(0, 3, 13)] },
        VlanPcp => const { &[s(0, 0, 3)] },
        Metadata => const { &[s(1, 0, 64)] },
        EthDst => const { &[s(2, 16, 48)] },
        IpProto => const { &[s(2, 8, 8)] },
        IpDscp => const { &[s(2, 2, 6)] },
        IpEcn => const { &[s(2, 0, 2)] },
        EthSrc => const { &[s(3, 16, 48)] },
        ArpOp => const { &[s(3, 0, 16)] },
        Ipv4Src | ArpSpa => const { &[s(4, 0, 32)] },
        ArpSha => const { &[s(5, 0, 48)] },
        Ipv6Src => const { &[s(4, 0, 64), s(5, 0, 64)] },
        Ipv4Dst | ArpTpa => const { &[s(6, 0, 32)] },
        ArpTha => const { &[s(7, 0, 48)] },
        Ipv6Dst => const { &[s(6, 0, 64), s(7, 0, 64)] },
        TcpSrc | UdpSrc | SctpSrc => const { &[s(8, 48, 16)] },
        TcpDst | UdpDst | SctpDst => const { &[s(8, 32, 16)] },
        Icmpv4Type | Icmpv6Type => const { &[s(8, 48, 8)] },
        Icmpv4Code | Icmpv6Code => const { &[s(8, 32, 8)] },
        Ipv6Flabel => const { &[s(8, 0, 20)] },
        InPhyPort | Ipv6NdTarget | Ipv6NdSll | Ipv6NdTll | MplsLabel | MplsTc | MplsBos
        | PbbIsid | TunnelId | Ipv6Exthdr => return None,
    })
}

/// Whether the tables match on `f` (and set-field can name it, for the
/// fields the verdicts edit).
pub fn supported(f: Field) -> bool {
    slots(f).is_some()
}

fn low(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Writes `value` into `words` at `f`'s slots (unsupported fields: nothing).
fn put(words: &mut [u64; KEY_WORDS], f: Field, value: u128) {
    let Some(sl) = slots(f) else { return };
    let mut v = value;
    for slot in sl.iter().rev() {
        let m = low(slot.bits);
        let w = &mut words[slot.word];
        *w = (*w & !(m << slot.shift)) | (((v as u64) & m) << slot.shift);
        v = if slot.bits >= 64 {
            v >> 64
        } else {
            v >> slot.bits
        };
    }
}

/// Reads `f`'s value out of `words` (unsupported fields: 0).
fn get(words: &[u64; KEY_WORDS], f: Field) -> u128 {
    let Some(sl) = slots(f) else { return 0 };
    sl.iter().fold(0u128, |acc, slot| {
        let part = (words[slot.word] >> slot.shift) & low(slot.bits);
        (if slot.bits >= 64 {
            acc << 64
        } else {
            acc << slot.bits
        }) | u128::from(part)
    })
}

/// Mixes one word into a running hash (a multiply-rotate step).
#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31)
}

/// The final avalanche of a hash.
#[inline]
fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The header fields of one frame (plus its input port and the pipeline's
/// metadata), as fixed words. Two frames of one flow have equal keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    words: [u64; KEY_WORDS],
}

const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;
const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be48(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 6)?;
    Some(s.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl FlowKey {
    /// The key of `frame` received on OpenFlow port `in_port`, metadata 0.
    /// Only the first [`KEY_BYTES`] bytes are read. A header that is not
    /// all there leaves its fields (and those of the layers above) 0; an
    /// IPv4 header is located by its IHL; the L4 fields of a fragment
    /// other than the first are left 0.
    pub fn extract(frame: &[u8], in_port: u32) -> FlowKey {
        let b = &frame[..frame.len().min(KEY_BYTES)];
        let mut k = FlowKey::default();
        // Word 0 (see `slots`): in_port, eth_type, vlan_vid, vlan_pcp,
        // written directly (the slot table is for the rarer accesses).
        k.words[0] = u64::from(in_port) << 32;
        let (Some(dst), Some(src), Some(mut ty)) = (be48(b, 0), be48(b, 6), be16(b, 12)) else {
            return k;
        };
        k.words[2] = dst << 16;
        k.words[3] = src << 16;
        let mut l3 = 14;
        if ty == ETH_VLAN || ty == ETH_QINQ {
            if let (Some(tci), Some(inner)) = (be16(b, 14), be16(b, 16)) {
                k.words[0] |=
                    u64::from(OFPVID_PRESENT | (tci & 0x0fff)) << 3 | u64::from(tci >> 13);
                ty = inner;
                l3 = 18;
            } else {
                k.words[0] |= u64::from(ty) << 16;
                return k;
            }
        }
        k.words[0] |= u64::from(ty) << 16;
        match ty {
            ETH_IPV4 => k.extract_ipv4(b, l3),
            ETH_IPV6 => k.extract_ipv6(b, l3),
            ETH_ARP => k.extract_arp(b, l3),
            _ => {}
        }
        k
    }

    /// [`FlowKey::extract`] of the frame whose first `n` bytes (at most
    /// [`KEY_BYTES`]) are in `buf`: the same key, with a straight path for
    /// the commonest frame (untagged IPv4 without options carrying TCP,
    /// UDP, SCTP or ICMP) that reads its fields at fixed offsets
    /// ([`CompactKey::from_prefix`]); any other frame takes `extract`.
    #[inline]
    pub fn extract_prefix(buf: &[u8; KEY_BYTES], n: usize, in_port: u32) -> FlowKey {
        match CompactKey::from_prefix(buf, n, in_port) {
            Some(c) => c.expand(),
            None => FlowKey::extract(&buf[..n.min(KEY_BYTES)], in_port),
        }
    }

    /// The key in four words, if it is the key of an untagged IPv4 frame
    /// with metadata 0 (see [`CompactKey`]).
    #[inline]
    pub fn compact(&self) -> Option<CompactKey> {
        let w = &self.words;
        let fits = w[0] & 0xffff_ffff == u64::from(ETH_IPV4) << 16
            && w[1] == 0
            && w[3] & 0xffff == 0
            && w[4] >> 32 == 0
            && w[5] == 0
            && w[6] >> 32 == 0
            && w[7] == 0
            && w[8] & 0xffff_ffff == 0;
        fits.then(|| CompactKey {
            words: [w[2], w[3], w[4] << 32 | w[6], w[8] | w[0] >> 32],
        })
    }

    /// Whether [`FlowKey::extract_prefix`] takes its fixed-offset path for
    /// the frame whose first `n` bytes are in `buf`. That path reads only
    /// the first [`FAST_BYTES`] bytes: a caller that copied just those of
    /// a longer frame (its first cache line) gets the same key as from
    /// [`KEY_BYTES`] of them, and need copy no more.
    #[inline]
    pub fn prefix_is_fast(buf: &[u8; KEY_BYTES], n: usize) -> bool {
        (FAST_BYTES..=KEY_BYTES).contains(&n)
            && matches!(buf[23], 1 | 6 | 17 | 132)
            && u16::from_be_bytes([buf[12], buf[13]]) == ETH_IPV4
            && buf[14] == 0x45
    }

    /// Whether [`FlowKey::extract`] of a frame that begins with `b` reads
    /// nothing past `b`, judged from `b` alone (an upper bound: it may say
    /// no when the bytes past `b` are not read after all). A caller that
    /// copied only a long frame's first cache line copies more only when
    /// this says no: an IPv4 header with options, IPv6 extension headers.
    pub fn reads_within(b: &[u8]) -> bool {
        let Some(mut ty) = be16(b, 12) else {
            return false;
        };
        let mut l3 = 14;
        if ty == ETH_VLAN || ty == ETH_QINQ {
            let Some(inner) = be16(b, 16) else {
                return false;
            };
            ty = inner;
            l3 = 18;
        }
        let end = match ty {
            ETH_ARP => l3 + 28,
            ETH_IPV4 => {
                let Some(&v) = b.get(l3) else {
                    return false;
                };
                let ihl = usize::from(v & 0x0f) * 4;
                if v >> 4 != 4 || ihl < 20 {
                    l3 + 20
                } else {
                    // The L4 fields, fragment or not.
                    l3 + ihl + 4
                }
            }
            ETH_IPV6 => {
                let Some(&next) = b.get(l3 + 6) else {
                    return false;
                };
                if matches!(next, 0 | 43 | 44 | 60) {
                    // A chain of extension headers: no bound from here.
                    return false;
                }
                l3 + 40 + 4
            }
            _ => l3,
        };
        end <= b.len()
    }

    fn extract_ipv4(&mut self, b: &[u8], l3: usize) {
        let Some(h) = b.get(l3..l3 + 20) else { return };
        let ihl = usize::from(h[0] & 0x0f) * 4;
        if h[0] >> 4 != 4 || ihl < 20 {
            return;
        }
        let proto = h[9];
        self.set_tos(proto, h[1]);
        self.words[4] = u64::from(u32::from_be_bytes([h[12], h[13], h[14], h[15]]));
        self.words[6] = u64::from(u32::from_be_bytes([h[16], h[17], h[18], h[19]]));
        let frag_offset = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
        if frag_offset == 0 {
            self.extract_l4(b, l3 + ihl, proto);
        }
    }

    fn extract_ipv6(&mut self, b: &[u8], l3: usize) {
        let (Some(first), Some(s_hi), Some(s_lo), Some(d_hi), Some(d_lo)) = (
            be32(b, l3),
            be64(b, l3 + 8),
            be64(b, l3 + 16),
            be64(b, l3 + 24),
            be64(b, l3 + 32),
        ) else {
            return;
        };
        if first >> 28 != 6 {
            return;
        }
        let tc = (first >> 20) as u8;
        self.words[4] = s_hi;
        self.words[5] = s_lo;
        self.words[6] = d_hi;
        self.words[7] = d_lo;
        self.set(Field::Ipv6Flabel, u128::from(first & 0x000f_ffff));
        // Skip hop-by-hop, routing, fragment and destination options
        // headers; the L4 fields need the whole chain within the bytes read.
        let mut next = b[l3 + 6];
        let mut at = l3 + 40;
        let mut l4 = true;
        loop {
            match next {
                0 | 43 | 60 => {
                    let (Some(&nh), Some(&len)) = (b.get(at), b.get(at + 1)) else {
                        l4 = false;
                        break;
                    };
                    next = nh;
                    at += (usize::from(len) + 1) * 8;
                }
                44 => {
                    let (Some(&nh), Some(off)) = (b.get(at), be16(b, at + 2)) else {
                        l4 = false;
                        break;
                    };
                    next = nh;
                    at += 8;
                    if off >> 3 != 0 {
                        l4 = false;
                        break;
                    }
                }
                _ => break,
            }
        }
        self.set_tos(next, tc);
        if l4 {
            self.extract_l4(b, at, next);
        }
    }

    fn set_tos(&mut self, proto: u8, tos: u8) {
        self.words[2] = (self.words[2] & !0xffff) | u64::from(proto) << 8 | u64::from(tos);
    }

    fn extract_l4(&mut self, b: &[u8], at: usize, proto: u8) {
        let (src, dst) = match proto {
            6 | 17 | 132 => match (be16(b, at), be16(b, at + 2)) {
                (Some(s), Some(d)) => (s, d),
                _ => return,
            },
            1 | 58 => match (b.get(at), b.get(at + 1)) {
                (Some(&t), Some(&c)) => (u16::from(t), u16::from(c)),
                _ => return,
            },
            _ => return,
        };
        self.words[8] = (self.words[8] & 0xffff_ffff) | u64::from(src) << 48 | u64::from(dst) << 32;
    }

    fn extract_arp(&mut self, b: &[u8], l3: usize) {
        let Some(h) = b.get(l3..l3 + 28) else { return };
        // Ethernet hardware addresses and IPv4 protocol addresses only.
        if h[..6] != [0, 1, 8, 0, 6, 4] {
            return;
        }
        let op = u16::from_be_bytes([h[6], h[7]]);
        self.words[3] |= u64::from(op);
        self.words[5] = be48(h, 8).unwrap_or(0);
        self.words[4] = u64::from(be32(h, 14).unwrap_or(0));
        self.words[7] = be48(h, 18).unwrap_or(0);
        self.words[6] = u64::from(be32(h, 24).unwrap_or(0));
    }

    /// The value of `f` (0 for a field the tables do not match on), as
    /// OpenFlow holds it: a MAC address in the low 48 bits, an IPv4
    /// address in the low 32.
    pub fn get(&self, f: Field) -> u128 {
        get(&self.words, f)
    }

    /// Sets `f` to `value` (ignored for a field the tables do not match on).
    pub fn set(&mut self, f: Field, value: u128) {
        put(&mut self.words, f, value)
    }

    /// The OpenFlow input port.
    pub fn in_port(&self) -> u32 {
        (self.words[0] >> 32) as u32
    }

    /// The pipeline's metadata.
    pub fn metadata(&self) -> u64 {
        self.words[1]
    }

    /// Sets the metadata.
    pub fn set_metadata(&mut self, metadata: u64) {
        self.words[1] = metadata;
    }

    /// The raw words.
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        &self.words
    }

    /// A hash of the whole key: three lanes of three words each, whose
    /// multiplies overlap (a data path hashes a key per frame), mixed
    /// into one.
    #[inline]
    pub fn hash(&self) -> u64 {
        let w = &self.words;
        let lane = |a: u64, b: u64, c: u64| mix(mix(mix(0, a), b), c);
        finish(
            lane(w[0], w[1], w[2])
                ^ lane(w[3], w[4], w[5]).rotate_left(21)
                ^ lane(w[6], w[7], w[8]).rotate_left(42),
        )
    }

    /// Whether two keys are equal, every word compared without a branch
    /// (what a data path's cache does per frame; `==` stops at the first
    /// difference, which costs a branch a word).
    #[inline]
    pub fn same(&self, other: &FlowKey) -> bool {
        let (a, b) = (&self.words, &other.words);
        ((a[0] ^ b[0])
            | (a[1] ^ b[1])
            | (a[2] ^ b[2])
            | (a[3] ^ b[3])
            | (a[4] ^ b[4])
            | (a[5] ^ b[5])
            | (a[6] ^ b[6])
            | (a[7] ^ b[7])
            | (a[8] ^ b[8]))
            == 0
    }

    /// A hash of the key under `mask`, over the mask's non-zero words only.
    #[inline]
    pub(crate) fn masked_hash(&self, mask: &KeyMask) -> u64 {
        let mut h = 0;
        for &i in mask.used() {
            h = mix(h, self.words[usize::from(i)] & mask.words[usize::from(i)]);
        }
        finish(h)
    }

    /// Whether `self` under `mask` equals `value` (already masked): the
    /// match (mask, value) matches this key.
    #[inline]
    pub fn matches(&self, mask: &KeyMask, value: &FlowKey) -> bool {
        mask.used().iter().all(|&i| {
            let i = usize::from(i);
            self.words[i] & mask.words[i] == value.words[i]
        })
    }

    /// The key with only the bits of `mask`.
    pub fn masked(&self, mask: &KeyMask) -> FlowKey {
        let mut out = *self;
        for (w, m) in out.words.iter_mut().zip(&mask.words) {
            *w &= m;
        }
        out
    }

    /// The IPv4 or IPv6 source and destination, protocol and L4 ports,
    /// hashed: a SELECT group's choice. Frames of one connection in one
    /// direction hash alike.
    pub fn five_tuple_hash(&self) -> u64 {
        let proto = (self.words[2] >> 8) & 0xff;
        let ports = self.words[8] >> 32;
        let h = [
            self.words[4],
            self.words[5],
            self.words[6],
            self.words[7],
            proto,
            ports,
        ]
        .iter()
        .fold(0x5f17, |h, &w| mix(h, w));
        finish(h)
    }
}

/// The key of an untagged IPv4 frame with metadata 0 (every frame
/// [`FlowKey::extract_prefix`] reads at fixed offsets has one) in four
/// words, where the [`FlowKey`] takes nine: a cache keyed by it holds a
/// key and its counts in one cache line. [`CompactKey::expand`] gives the
/// full key back, and [`FlowKey::compact`] of that is the same compact
/// key: two frames have equal compact keys exactly when their full keys
/// are equal.
///
/// | word | bits 63..0 |
/// |---|---|
/// | 0 | eth_dst (48) · ip_proto (8) · ip_dscp (6) · ip_ecn (2) (the full key's word 2) |
/// | 1 | eth_src (48) · 16 zero bits (word 3: no ARP opcode) |
/// | 2 | ipv4_src (32) · ipv4_dst (32) |
/// | 3 | L4 source (16) · L4 destination (16) · in_port (32) |
///
/// Left out, as they are the same for every such frame: eth_type 0x0800,
/// no VLAN, metadata 0, no IPv6 flow label. Word 1's low bit is never set
/// in a compact key (a cache may use it to tell other keys apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompactKey {
    words: [u64; 4],
}

impl CompactKey {
    /// The compact key of the frame whose first `n` bytes (at most
    /// [`KEY_BYTES`]) are in `buf`, received on OpenFlow port `in_port`,
    /// when [`FlowKey::prefix_is_fast`] says its fields are at fixed
    /// offsets (they are then all in the first [`FAST_BYTES`]); else
    /// `None`.
    #[inline]
    pub fn from_prefix(buf: &[u8; KEY_BYTES], n: usize, in_port: u32) -> Option<CompactKey> {
        if !FlowKey::prefix_is_fast(buf, n) {
            return None;
        }
        // Wide loads at fixed offsets (the array's length makes them
        // checked at compile time): 8 bytes for each MAC address, 4 for
        // the IPv4 addresses together and for the L4 ports.
        let b = buf;
        let be64 = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_be_bytes(w)
        };
        let be32 = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[at..at + 4]);
            u64::from(u32::from_be_bytes(w))
        };
        let proto = b[23];
        // Not a later fragment: the L4 fields (a source and destination
        // port, or an ICMP type and code).
        let l4 = if u16::from_be_bytes([b[20], b[21]]) & 0x1fff != 0 {
            0
        } else if proto == 1 {
            u64::from(b[34]) << 48 | u64::from(b[35]) << 32
        } else {
            be32(34) << 32
        };
        // The caller's copy stores 16 bytes at a time, and a load of 8
        // bytes is served from such a store only if it does not cross an
        // 8-byte boundary; any other load waits for the store to reach
        // the cache (a store-forwarding stall). So the loads below lie
        // within 8-byte words: bytes 0-7 and 8-15 for the MAC addresses
        // (a load of bytes 6-13 cost 3 ns a frame, measured), 24-31 and
        // 32-33 for the IPv4 addresses at 26-33, 34-37 for the ports.
        let (w0, w8) = (be64(0), be64(8));
        Some(CompactKey {
            words: [
                // The destination address in the top 48 bits, protocol
                // and TOS below.
                (w0 & !0xffff) | u64::from(proto) << 8 | u64::from(b[15]),
                // The source address, bytes 6 to 11, in the top 48 bits.
                w0 << 48 | (w8 >> 32) << 16,
                // Source and destination address, as they lie: bytes 26
                // to 33 (see above).
                be64(24) << 16 | u64::from(u16::from_be_bytes([b[32], b[33]])),
                l4 | u64::from(in_port),
            ],
        })
    }

    /// The full key.
    #[inline]
    pub fn expand(&self) -> FlowKey {
        let c = &self.words;
        let mut k = FlowKey::default();
        k.words[0] = (c[3] & 0xffff_ffff) << 32 | u64::from(ETH_IPV4) << 16;
        k.words[2] = c[0];
        k.words[3] = c[1];
        k.words[4] = c[2] >> 32;
        k.words[6] = c[2] & 0xffff_ffff;
        k.words[8] = c[3] & !0xffff_ffff;
        k
    }

    /// The raw words.
    #[inline]
    pub fn words(&self) -> &[u64; 4] {
        &self.words
    }

    /// The key of these raw words ([`CompactKey::words`] of a key).
    #[inline]
    pub(crate) fn from_words(words: [u64; 4]) -> CompactKey {
        CompactKey { words }
    }

    /// A hash of the key: two lanes of two words each, mixed into one, as
    /// [`FlowKey::hash`] does with nine.
    #[inline]
    pub fn hash(&self) -> u64 {
        let w = &self.words;
        let lane = |a: u64, b: u64| mix(mix(0, a), b);
        finish(lane(w[0], w[1]) ^ lane(w[2], w[3]).rotate_left(32))
    }
}

/// Which bits of a [`FlowKey`] a match looks at, in the same layout. The
/// non-zero words are listed once, so masked operations skip the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KeyMask {
    words: [u64; KEY_WORDS],
    used: [u8; KEY_WORDS],
    n_used: u8,
}

impl KeyMask {
    /// The mask and masked value of `m`. A field the tables do not match
    /// on is refused with `BAD_MATCH/BAD_FIELD`.
    pub fn from_match(m: &Match) -> Result<(KeyMask, FlowKey), FlowError> {
        let mut mask = [0u64; KEY_WORDS];
        let mut value = FlowKey::default();
        for o in m.fields() {
            if !supported(o.field) {
                return Err(FlowError::UnsupportedField(o.field));
            }
            let full = if o.field.bits() >= 128 {
                u128::MAX
            } else {
                (1u128 << o.field.bits()) - 1
            };
            let fm = o.mask.unwrap_or(full);
            put(&mut mask, o.field, fm);
            value.set(o.field, o.value & fm);
        }
        Ok((KeyMask::from_words(mask), value))
    }

    /// A mask of these words.
    pub fn from_words(words: [u64; KEY_WORDS]) -> KeyMask {
        let mut m = KeyMask {
            words,
            used: [0; KEY_WORDS],
            n_used: 0,
        };
        for (i, &w) in words.iter().enumerate() {
            if w != 0 {
                m.used[usize::from(m.n_used)] = i as u8;
                m.n_used += 1;
            }
        }
        m
    }

    /// The raw words.
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        &self.words
    }

    /// Indexes of the non-zero words.
    #[inline]
    fn used(&self) -> &[u8] {
        &self.used[..usize::from(self.n_used)]
    }

    /// The mask of field `f` within this mask (its bits, as a value).
    pub fn get(&self, f: Field) -> u128 {
        get(&self.words, f)
    }

    /// Whether every bit of `other` is in `self` (`self` is at least as
    /// specific).
    pub fn covers(&self, other: &KeyMask) -> bool {
        self.words
            .iter()
            .zip(&other.words)
            .all(|(a, b)| a & b == *b)
    }

    /// Whether two matches (mask, value) can match one packet.
    pub fn overlaps(a: (&KeyMask, &FlowKey), b: (&KeyMask, &FlowKey)) -> bool {
        (0..KEY_WORDS).all(|i| (a.1.words[i] ^ b.1.words[i]) & a.0.words[i] & b.0.words[i] == 0)
    }

    /// Whether the flow `(self, value)` lies within the request match
    /// `(req, req_value)`: every packet it matches, the request matches
    /// (the non-strict selection of FLOW_MOD and flow stats).
    pub fn within(&self, value: &FlowKey, req: &KeyMask, req_value: &FlowKey) -> bool {
        self.covers(req) && value.masked(req) == *req_value
    }
}
