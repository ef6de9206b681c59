//! Packets built by hand and checked with a straightforward reference
//! checksum, independent of the crate's own.

use ringswitch_frame::*;

use crate::*;

const TCP: u8 = 6;
const UDP: u8 = 17;
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const ECE: u8 = 0x40;
const CWR: u8 = 0x80;

/// A small xorshift generator: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 32) as u8
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// RFC 1071 one 16-bit word at a time.
fn ref_sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    for pair in data.chunks(2) {
        let hi = u64::from(pair[0]) << 8;
        let lo = pair.get(1).copied().map_or(0, u64::from);
        acc += hi | lo;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn be16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The pseudo header of the L4 packet `frame[l4..end]`, as bytes.
fn ref_pseudo(frame: &[u8], l3: usize, l4: usize, end: usize, proto: u8) -> Vec<u8> {
    let len = end - l4;
    let mut p = Vec::new();
    if frame[l3] >> 4 == 4 {
        p.extend_from_slice(&frame[l3 + 12..l3 + 20]);
        p.extend_from_slice(&[0, proto]);
        p.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        p.extend_from_slice(&frame[l3 + 8..l3 + 40]);
        p.extend_from_slice(&(len as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, proto]);
    }
    p
}

/// Whether the L4 checksum of `frame[l4..end]` verifies: the sum over the
/// pseudo header and the packet is 0xffff.
fn ref_l4_verifies(frame: &[u8], l3: usize, l4: usize, end: usize, proto: u8) -> bool {
    let mut all = ref_pseudo(frame, l3, l4, end, proto);
    all.extend_from_slice(&frame[l4..end]);
    ref_sum(&all) == 0xffff
}

/// A frame built by hand and where its parts are.
#[derive(Clone)]
struct Built {
    frame: Vec<u8>,
    l3: usize,
    l4: usize,
    payload: usize,
    end: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum V {
    Four,
    Six,
}

fn ethernet(vlans: &[u16], ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];
    for (i, tpid) in vlans.iter().enumerate() {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&(100 + i as u16).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IP header for an L4 packet of `l4_len` bytes, with `options` bytes of
/// IPv4 options (a multiple of 4; ignored for IPv6).
fn ip_header(v: V, proto: u8, l4_len: usize, options: usize, id: u16) -> Vec<u8> {
    match v {
        V::Four => {
            let hlen = 20 + options;
            let mut h = vec![0x40 | (hlen / 4) as u8, 0];
            h.extend_from_slice(&((hlen + l4_len) as u16).to_be_bytes());
            h.extend_from_slice(&id.to_be_bytes());
            h.extend_from_slice(&[0x40, 0, 64, proto, 0, 0]); // DF
            h.extend_from_slice(&[10, 1, 2, 3, 192, 168, 77, 200]);
            h.extend((0..options).map(|i| if i == 0 { 1 } else { 0 })); // NOPs, EOL
            let csum = !ref_sum(&h);
            h[10..12].copy_from_slice(&csum.to_be_bytes());
            h
        }
        V::Six => {
            let mut h = vec![0x60, 0x0a, 0xbc, 0xde];
            h.extend_from_slice(&(l4_len as u16).to_be_bytes());
            h.extend_from_slice(&[proto, 64]);
            h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xee]);
            h.extend_from_slice(&[0x12, 0x34]);
            h.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0xff]);
            h.extend_from_slice(&[0xfe, 0x78, 0x9a, 0xbc]);
            h
        }
    }
}

/// A TCP frame whose checksum field holds the pseudo header sum, as Linux
/// leaves it for checksum offload.
#[allow(clippy::too_many_arguments)]
fn build_tcp(
    v: V,
    vlans: &[u16],
    ip_options: usize,
    tcp_options: usize,
    payload: &[u8],
    seq: u32,
    flags: u8,
    id: u16,
) -> Built {
    let ethertype = if v == V::Four { 0x0800 } else { 0x86dd };
    let mut frame = ethernet(vlans, ethertype);
    let l3 = frame.len();
    let tcp_hlen = 20 + tcp_options;
    frame.extend(ip_header(v, TCP, tcp_hlen + payload.len(), ip_options, id));
    let l4 = frame.len();
    frame.extend_from_slice(&[0x9c, 0x40, 0x01, 0xbb]); // ports 40000 -> 443
    frame.extend_from_slice(&seq.to_be_bytes());
    frame.extend_from_slice(&0x1122_3344u32.to_be_bytes()); // ack
    frame.extend_from_slice(&[((tcp_hlen / 4) as u8) << 4, flags]);
    frame.extend_from_slice(&[0xfa, 0xf0, 0, 0, 0, 0]); // window, csum, urgent
    frame.extend((0..tcp_options).map(|i| if i + 1 == tcp_options { 0 } else { 1 }));
    let payload_at = frame.len();
    frame.extend_from_slice(payload);
    let end = frame.len();
    let pseudo = ref_sum(&ref_pseudo(&frame, l3, l4, end, TCP));
    frame[l4 + 16..l4 + 18].copy_from_slice(&pseudo.to_be_bytes());
    Built {
        frame,
        l3,
        l4,
        payload: payload_at,
        end,
    }
}

fn build_udp4(payload: &[u8]) -> Built {
    build_udp(V::Four, payload)
}

fn build_udp(v: V, payload: &[u8]) -> Built {
    let mut frame = ethernet(&[], if v == V::Four { 0x0800 } else { 0x86dd });
    let l3 = frame.len();
    frame.extend(ip_header(v, UDP, 8 + payload.len(), 0, 7));
    let l4 = frame.len();
    frame.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]); // ports 12345 -> 53
    frame.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    frame.extend_from_slice(&[0, 0]);
    frame.extend_from_slice(payload);
    let end = frame.len();
    let pseudo = ref_sum(&ref_pseudo(&frame, l3, l4, end, UDP));
    frame[l4 + 6..l4 + 8].copy_from_slice(&pseudo.to_be_bytes());
    Built {
        frame,
        l3,
        l4,
        payload: l4 + 8,
        end,
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn gso_hdr(v: V, b: &Built, mss: u16) -> OffloadHdr {
    OffloadHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if v == V::Four { GSO_TCPV4 } else { GSO_TCPV6 },
        hdr_len: b.payload as u16,
        gso_size: mss,
        csum_start: b.l4 as u16,
        csum_offset: 16,
    }
}

/// The checksum a correct sender would have put in the field at
/// `l4 + offset`: the inverted sum with the field zeroed.
fn ref_l4_checksum(b: &Built, proto: u8, offset: usize) -> u16 {
    let mut frame = b.frame.clone();
    frame[b.l4 + offset] = 0;
    frame[b.l4 + offset + 1] = 0;
    let mut all = ref_pseudo(&frame, b.l3, b.l4, b.end, proto);
    all.extend_from_slice(&frame[b.l4..b.end]);
    !ref_sum(&all)
}

fn check_completed(b: &Built, proto: u8, offset: usize) {
    let expected = ref_l4_checksum(b, proto, offset);
    let mut frame = b.frame.clone();
    complete_checksum(&mut frame, b.l4, offset).unwrap();
    assert!(ref_l4_verifies(&frame, b.l3, b.l4, b.end, proto));
    let got = be16_at(&frame, b.l4 + offset);
    // 0 and 0xffff are the same one's complement value.
    let norm = |x: u16| if x == 0 { 0xffff } else { x };
    assert_eq!(norm(got), norm(expected));
    // Nothing else changed.
    frame[b.l4 + offset..b.l4 + offset + 2].copy_from_slice(&b.frame[b.l4 + offset..][..2]);
    assert_eq!(frame, b.frame);
}

#[test]
fn completes_ipv4_tcp_checksum() {
    for len in [0, 1, 2, 3, 17, 1460, 9001] {
        let b = build_tcp(V::Four, &[], 0, 12, &pattern(len), 1000, ACK | PSH, 1);
        check_completed(&b, TCP, 16);
    }
}

#[test]
fn completes_ipv6_tcp_checksum() {
    for len in [0, 1, 5, 1440, 8999] {
        let b = build_tcp(V::Six, &[0x8100], 0, 0, &pattern(len), 7, ACK, 0);
        check_completed(&b, TCP, 16);
    }
}

#[test]
fn completes_ipv4_udp_checksum() {
    for len in [0, 1, 11, 512, 1472] {
        let b = build_udp4(&pattern(len));
        check_completed(&b, UDP, 6);
    }
}

#[test]
fn completes_checksum_of_a_known_packet() {
    // The header of a SYN from 10.1.2.3:40000 to 192.168.77.200:443, checked
    // against a checksum worked out by hand for these exact bytes.
    let b = build_tcp(V::Four, &[], 0, 0, &[], 0x0102_0304, SYN, 0x1234);
    let mut frame = b.frame.clone();
    complete_checksum(&mut frame, b.l4, 16).unwrap();
    // Pseudo header: 0a01 + 0203 + c0a8 + 4dc8 + 0006 + 0014 = 0x11a8e.
    // TCP header: 9c40 + 01bb + 0102 + 0304 + 1122 + 3344 + 5002 + faf0
    //   = 0x23159; total 0x34be7, folded 0x4bea, checksum 0xb415.
    assert_eq!(be16_at(&frame, b.l4 + 16), 0xb415);
}

/// Checks every segment of `b` cut with `mss` and returns their count.
fn check_segments(v: V, b: &Built, mss: u16, flags: u8) -> usize {
    let hdr = gso_hdr(v, b, mss);
    let mut segmenter = Segmenter::new();
    let mut segments: Vec<Vec<u8>> = Vec::new();
    let n = segmenter
        .segment(&b.frame, &hdr, |s| {
            segments.push(s.to_vec());
            true
        })
        .unwrap();
    assert_eq!(n, segments.len());
    assert_eq!(segment_count(&b.frame, &hdr).unwrap(), n);

    let payload = &b.frame[b.payload..b.end];
    let mss = usize::from(mss);
    assert_eq!(n, payload.len().div_ceil(mss).max(1));
    let seq0 = be32_at(&b.frame, b.l4 + 4);
    let id0 = be16_at(&b.frame, b.l3 + 4);
    let mut joined = Vec::new();
    for (i, s) in segments.iter().enumerate() {
        let chunk_len = if i + 1 < n {
            mss
        } else {
            payload.len() - mss * (n - 1)
        };
        assert_eq!(s.len(), b.payload + chunk_len, "segment {i}");
        // Link-layer header, VLAN tags included, untouched.
        assert_eq!(&s[..b.l3], &b.frame[..b.l3]);
        let ip_len = s.len() - b.l3;
        match v {
            V::Four => {
                assert_eq!(usize::from(be16_at(s, b.l3 + 2)), ip_len);
                assert_eq!(be16_at(s, b.l3 + 4), id0.wrapping_add(i as u16));
                assert_eq!(
                    ref_sum(&s[b.l3..b.l4]),
                    0xffff,
                    "IPv4 checksum, segment {i}"
                );
                assert_eq!(s[b.l3 + 6], 0x40, "DF kept");
            }
            V::Six => {
                assert_eq!(usize::from(be16_at(s, b.l3 + 4)), ip_len - 40);
                assert_eq!(&s[b.l3..b.l3 + 4], &b.frame[b.l3..b.l3 + 4]);
            }
        }
        let seq = be32_at(s, b.l4 + 4);
        assert_eq!(seq, seq0.wrapping_add((i * mss) as u32), "segment {i}");
        let f = s[b.l4 + 13];
        let last = i + 1 == n;
        assert_eq!(f & FIN != 0, last && flags & FIN != 0, "FIN, segment {i}");
        assert_eq!(f & PSH != 0, last && flags & PSH != 0, "PSH, segment {i}");
        assert_eq!(f & CWR != 0, i == 0 && flags & CWR != 0, "CWR, segment {i}");
        assert_eq!(f & !(FIN | PSH | CWR), flags & !(FIN | PSH | CWR));
        // Ports, ack, window, options untouched.
        assert_eq!(&s[b.l4..b.l4 + 4], &b.frame[b.l4..b.l4 + 4]);
        assert_eq!(&s[b.l4 + 8..b.l4 + 12], &b.frame[b.l4 + 8..b.l4 + 12]);
        assert_eq!(&s[b.l4 + 14..b.l4 + 16], &b.frame[b.l4 + 14..b.l4 + 16]);
        assert_eq!(&s[b.l4 + 18..b.payload], &b.frame[b.l4 + 18..b.payload]);
        assert!(
            ref_l4_verifies(s, b.l3, b.l4, s.len(), TCP),
            "TCP checksum, segment {i}"
        );
        joined.extend_from_slice(&s[b.payload..]);
    }
    assert_eq!(joined, payload);
    n
}

#[test]
fn segments_64k_tcpv4() {
    // The largest IPv4 packet: 65535 bytes, 65495 of them payload.
    let payload = pattern(65535 - 20 - 20);
    let b = build_tcp(
        V::Four,
        &[],
        0,
        0,
        &payload,
        0xffff_f000,
        ACK | PSH | FIN,
        0xfffe,
    );
    assert_eq!(check_segments(V::Four, &b, 1448, ACK | PSH | FIN), 46);
    assert_eq!(check_segments(V::Four, &b, 1001, ACK | PSH | FIN), 66);
}

#[test]
fn segments_64k_tcpv4_with_options() {
    let payload = pattern(65535 - 32 - 32);
    let b = build_tcp(V::Four, &[], 12, 12, &payload, 5, ACK | PSH, 9);
    check_segments(V::Four, &b, 1448, ACK | PSH);
    check_segments(V::Four, &b, 537, ACK | PSH);
}

#[test]
fn segments_64k_tcpv6() {
    let payload = pattern(65535 - 20);
    let b = build_tcp(V::Six, &[], 0, 12, &payload[..65535 - 32], 77, ACK | PSH, 0);
    assert_eq!(check_segments(V::Six, &b, 1448, ACK | PSH), 46);
    assert_eq!(check_segments(V::Six, &b, 1427, ACK | PSH), 46);
    assert_eq!(check_segments(V::Six, &b, 999, ACK | PSH), 66);
    let b = build_tcp(V::Six, &[], 0, 0, &payload, 77, ACK, 0);
    check_segments(V::Six, &b, 1, ACK);
}

#[test]
fn segments_vlan_tagged() {
    let payload = pattern(10_000);
    for vlans in [&[0x8100][..], &[0x88a8, 0x8100]] {
        let b = build_tcp(V::Four, vlans, 0, 0, &payload, 1, ACK | ECE | CWR | FIN, 3);
        check_segments(V::Four, &b, 1448, ACK | ECE | CWR | FIN);
        let b = build_tcp(V::Six, vlans, 0, 0, &payload, 1, ACK | CWR, 3);
        check_segments(V::Six, &b, 1440, ACK | CWR);
    }
}

#[test]
fn cwr_on_first_segment_only() {
    let b = build_tcp(V::Four, &[], 0, 0, &pattern(5000), 1, ACK | CWR, 3);
    let mut hdr = gso_hdr(V::Four, &b, 1000);
    hdr.gso_type |= GSO_ECN;
    let mut flags = Vec::new();
    let n = Segmenter::new()
        .segment(&b.frame, &hdr, |s| {
            flags.push(s[b.l4 + 13]);
            true
        })
        .unwrap();
    assert_eq!(n, 5);
    assert_eq!(flags, [ACK | CWR, ACK, ACK, ACK, ACK]);
}

#[test]
fn small_payload_gives_one_segment() {
    for len in [0, 1, 1447, 1448] {
        let b = build_tcp(V::Four, &[], 0, 0, &pattern(len), 42, ACK | PSH | FIN, 3);
        assert_eq!(check_segments(V::Four, &b, 1448, ACK | PSH | FIN), 1);
        let b = build_tcp(V::Six, &[], 0, 0, &pattern(len), 42, ACK | PSH, 3);
        assert_eq!(check_segments(V::Six, &b, 1448, ACK | PSH), 1);
    }
    let b = build_tcp(V::Four, &[], 0, 0, &pattern(1449), 42, ACK, 3);
    assert_eq!(check_segments(V::Four, &b, 1448, ACK), 2);
}

#[test]
fn trailing_padding_is_dropped() {
    let mut b = build_tcp(V::Four, &[], 0, 0, &pattern(3000), 42, ACK, 3);
    let hdr = gso_hdr(V::Four, &b, 1448);
    b.frame.extend_from_slice(&[0xee; 7]);
    let mut total = 0;
    Segmenter::new()
        .segment(&b.frame, &hdr, |s| {
            assert!(ref_l4_verifies(s, b.l3, b.l4, s.len(), TCP));
            total += s.len() - b.payload;
            true
        })
        .unwrap();
    assert_eq!(total, 3000);
}

#[test]
fn stops_when_emit_refuses() {
    let b = build_tcp(V::Four, &[], 0, 0, &pattern(10_000), 42, ACK, 3);
    let hdr = gso_hdr(V::Four, &b, 1000);
    let mut segmenter = Segmenter::new();
    let mut calls = 0;
    let n = segmenter
        .segment(&b.frame, &hdr, |_| {
            calls += 1;
            calls <= 3
        })
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(calls, 4);
    // The segmenter is reusable after an early stop.
    assert_eq!(segmenter.segment(&b.frame, &hdr, |_| true), Ok(10));
    assert_eq!(segmenter.segment(&b.frame, &hdr, |_| false), Ok(0));
}

#[test]
fn refuses_bad_requests() {
    let b4 = build_tcp(V::Four, &[], 0, 0, &pattern(3000), 42, ACK, 3);
    let b6 = build_tcp(V::Six, &[], 0, 0, &pattern(3000), 42, ACK, 3);
    let mut s = Segmenter::new();
    let mut run = |frame: &[u8], hdr: OffloadHdr| {
        let mut called = false;
        let r = s.segment(frame, &hdr, |_| {
            called = true;
            true
        });
        assert!(r.is_err() != called, "{r:?}");
        r
    };
    let good = gso_hdr(V::Four, &b4, 1448);

    let mut h = good;
    h.gso_type = GSO_NONE;
    assert_eq!(run(&b4.frame, h), Err(OffloadError::NotGso));
    h.gso_type = GSO_UDP;
    assert_eq!(run(&b4.frame, h), Err(OffloadError::UfoUnsupported));
    h.gso_type = 6;
    assert_eq!(
        run(&b4.frame, h),
        Err(OffloadError::UnknownGsoType { gso_type: 6 })
    );
    h.gso_type = GSO_UDP_L4;
    assert_eq!(
        run(&b4.frame, h),
        Err(OffloadError::NotUdp { protocol: TCP })
    );
    h.gso_type = GSO_TCPV6;
    assert_eq!(
        run(&b4.frame, h),
        Err(OffloadError::GsoIpMismatch {
            expected: 6,
            found: 4
        })
    );
    assert_eq!(
        run(&b6.frame, good),
        Err(OffloadError::GsoIpMismatch {
            expected: 4,
            found: 6
        })
    );
    let mut h = good;
    h.gso_size = 0;
    assert_eq!(run(&b4.frame, h), Err(OffloadError::ZeroGsoSize));
    let mut h = good;
    h.flags = 0x84;
    assert_eq!(
        run(&b4.frame, h),
        Err(OffloadError::UnknownFlags { flags: 0x84 })
    );
    // hdr_len, csum_start and csum_offset are not used for segmentation.
    let mut h = good;
    h.hdr_len = 0xffff;
    h.csum_start = 0xffff;
    h.csum_offset = 0xffff;
    assert_eq!(run(&b4.frame, h), Ok(3));

    // Broken frames.
    let mut f = b4.frame.clone();
    f[b4.l3 + 6] = 0x20; // more fragments
    assert_eq!(run(&f, good), Err(OffloadError::Fragment));
    let mut f = b4.frame.clone();
    f[b4.l3 + 9] = UDP;
    assert_eq!(run(&f, good), Err(OffloadError::NotTcp { protocol: UDP }));
    let mut f = b4.frame.clone();
    f[b4.l3] = 0x44;
    assert_eq!(
        run(&f, good),
        Err(OffloadError::BadIpv4HeaderLength { len: 16 })
    );
    let mut f = b4.frame.clone();
    f[b4.l3] = 0x65;
    assert_eq!(
        run(&f, good),
        Err(OffloadError::BadIpVersion {
            expected: 4,
            found: 6
        })
    );
    let mut f = b4.frame.clone();
    f[b4.l3 + 2] = 0xff;
    assert!(matches!(
        run(&f, good),
        Err(OffloadError::BadIpLength { .. })
    ));
    let mut f = b4.frame.clone();
    f[b4.l4 + 12] = 0x40;
    assert_eq!(
        run(&f, good),
        Err(OffloadError::BadTcpDataOffset { len: 16 })
    );
    let mut f = b4.frame.clone();
    f[12] = 0x08;
    f[13] = 0x06; // ARP
    assert_eq!(
        run(&f, good),
        Err(OffloadError::UnsupportedEtherType { ethertype: 0x0806 })
    );
    let f = build_tcp(V::Four, &[0x8100, 0x8100, 0x8100], 0, 0, &[1], 1, ACK, 1).frame;
    assert_eq!(run(&f, good), Err(OffloadError::TooManyVlanTags));
    assert_eq!(
        run(&b4.frame[..b4.l4 + 10], good),
        Err(OffloadError::BadIpLength {
            claimed: 3040,
            available: 30
        })
    );
    assert_eq!(
        run(&b4.frame[..13], good),
        Err(OffloadError::Truncated {
            layer: Layer::Ethernet
        })
    );

    let g6 = gso_hdr(V::Six, &b6, 1448);
    let mut f = b6.frame.clone();
    f[b6.l3 + 6] = 0; // hop-by-hop options
    assert_eq!(
        run(&f, g6),
        Err(OffloadError::Ipv6ExtensionHeader { next_header: 0 })
    );
    let mut f = b6.frame.clone();
    f[b6.l3 + 4] = 0;
    f[b6.l3 + 5] = 0;
    assert_eq!(run(&f, g6), Err(OffloadError::Jumbogram));
    assert_eq!(
        run(&b6.frame[..b6.l3 + 39], g6),
        Err(OffloadError::Truncated { layer: Layer::Ipv6 })
    );
}

/// USO: every datagram carries its share of the payload, in order, with
/// its own UDP length, a verifying UDP checksum, and (IPv4) an identification
/// one above the last.
#[test]
fn segments_udp_datagrams_over_both_versions() {
    for v in [V::Four, V::Six] {
        for (len, mss) in [(60_000, 1_472), (3_000, 1_000), (999, 1_000), (0, 1_000)] {
            let payload = pattern(len);
            let b = build_udp(v, &payload);
            let hdr = OffloadHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_UDP_L4,
                hdr_len: b.payload as u16,
                gso_size: mss,
                csum_start: b.l4 as u16,
                csum_offset: 6,
            };
            assert_eq!(
                check(&b.frame, &hdr),
                Ok(len.div_ceil(usize::from(mss)).max(1))
            );
            let mut got = Vec::new();
            let mut ids = Vec::new();
            let n = Segmenter::new()
                .segment(&b.frame, &hdr, |s| {
                    assert!(s.len() - b.payload <= usize::from(mss));
                    assert!(ref_l4_verifies(s, b.l3, b.l4, s.len(), UDP));
                    assert_eq!(usize::from(be16_at(s, b.l4 + 4)), s.len() - b.l4);
                    assert_eq!(s[..b.l3], b.frame[..b.l3]);
                    if v == V::Four {
                        assert_eq!(usize::from(be16_at(s, b.l3 + 2)), s.len() - b.l3);
                        assert_eq!(ref_sum(&s[b.l3..b.l4]), 0xffff);
                        ids.push(be16_at(s, b.l3 + 4));
                    } else {
                        assert_eq!(usize::from(be16_at(s, b.l3 + 4)), s.len() - b.l4);
                    }
                    got.extend_from_slice(&s[b.payload..]);
                    true
                })
                .unwrap();
            assert_eq!(n, len.div_ceil(usize::from(mss)).max(1));
            assert_eq!(got, payload);
            for (i, id) in ids.iter().enumerate() {
                assert_eq!(*id, 7 + i as u16);
            }
        }
    }
}

#[test]
fn refuses_bad_uso_requests() {
    let udp = build_udp(V::Six, &pattern(4_000));
    let uso = OffloadHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_UDP_L4,
        hdr_len: udp.payload as u16,
        gso_size: 1_000,
        csum_start: udp.l4 as u16,
        csum_offset: 6,
    };
    let ecn = OffloadHdr {
        gso_type: GSO_UDP_L4 | GSO_ECN,
        ..uso
    };
    assert_eq!(check(&udp.frame, &ecn), Err(OffloadError::EcnOnUdp));
    assert_eq!(plan(&ecn, Caps::ALL), Err(OffloadError::EcnOnUdp));
    let zero = OffloadHdr { gso_size: 0, ..uso };
    assert_eq!(check(&udp.frame, &zero), Err(OffloadError::ZeroGsoSize));
    // A TCP frame under a USO header, and a UDP frame under a TSO header.
    let tcp = build_tcp(V::Six, &[], 0, 0, &pattern(4_000), 1, ACK, 0);
    assert_eq!(
        check(&tcp.frame, &uso),
        Err(OffloadError::NotUdp { protocol: TCP })
    );
    let tso = OffloadHdr {
        gso_type: GSO_TCPV6,
        ..uso
    };
    assert_eq!(
        check(&udp.frame, &tso),
        Err(OffloadError::NotTcp { protocol: UDP })
    );
    // A UDP header cut short.
    let short = &udp.frame[..udp.l4 + 4];
    assert!(check(short, &uso).is_err());
}

#[test]
fn plans() {
    let csum = OffloadHdr {
        flags: F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..OffloadHdr::default()
    };
    let tso4 = OffloadHdr {
        gso_type: GSO_TCPV4,
        gso_size: 1448,
        ..csum
    };
    let tso6 = OffloadHdr {
        gso_type: GSO_TCPV6,
        ..tso4
    };
    let tso4_ecn = OffloadHdr {
        gso_type: GSO_TCPV4 | GSO_ECN,
        ..tso4
    };
    let only_csum = Caps {
        csum: true,
        ..Caps::NONE
    };
    let tso = Caps {
        ecn: false,
        ..Caps::ALL
    };

    let none = OffloadHdr::default();
    assert_eq!(plan(&none, Caps::NONE), Ok(Action::PassThrough));
    let valid = OffloadHdr {
        flags: F_DATA_VALID,
        ..none
    };
    assert_eq!(plan(&valid, Caps::NONE), Ok(Action::PassThrough));

    assert_eq!(plan(&csum, Caps::NONE), Ok(Action::CompleteChecksum));
    assert_eq!(plan(&csum, only_csum), Ok(Action::PassThrough));
    assert_eq!(plan(&csum, Caps::ALL), Ok(Action::PassThrough));

    assert_eq!(plan(&tso4, Caps::NONE), Ok(Action::Segment));
    assert_eq!(plan(&tso4, only_csum), Ok(Action::Segment));
    assert_eq!(plan(&tso4, tso), Ok(Action::PassThrough));
    let tso6_only = Caps {
        tso4: false,
        ..Caps::ALL
    };
    assert_eq!(plan(&tso4, tso6_only), Ok(Action::Segment));
    assert_eq!(plan(&tso6, tso6_only), Ok(Action::PassThrough));
    // TSO without GUEST_CSUM is not a valid feature set: segment.
    let no_csum = Caps {
        csum: false,
        ..Caps::ALL
    };
    assert_eq!(plan(&tso6, no_csum), Ok(Action::Segment));
    assert_eq!(plan(&tso4_ecn, tso), Ok(Action::Segment));
    assert_eq!(plan(&tso4_ecn, Caps::ALL), Ok(Action::PassThrough));
    // USO passes only to a destination with checksums and USO for both
    // IP versions.
    let uso = OffloadHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_UDP_L4,
        gso_size: 1_000,
        ..OffloadHdr::default()
    };
    assert_eq!(plan(&uso, Caps::ALL), Ok(Action::PassThrough));
    assert_eq!(plan(&uso, tso_only_tcp()), Ok(Action::Segment));
    assert_eq!(
        plan(
            &uso,
            Caps {
                uso6: false,
                ..Caps::ALL
            }
        ),
        Ok(Action::Segment)
    );
    assert_eq!(
        plan(
            &uso,
            Caps {
                csum: false,
                ..Caps::ALL
            }
        ),
        Ok(Action::Segment)
    );
    assert_eq!(plan(&uso, Caps::NONE), Ok(Action::Segment));

    let err = |h: OffloadHdr| plan(&h, Caps::ALL).unwrap_err();
    assert_eq!(
        err(OffloadHdr {
            gso_type: GSO_UDP,
            ..tso4
        }),
        OffloadError::UfoUnsupported
    );
    assert_eq!(
        err(OffloadHdr {
            gso_type: GSO_ECN,
            ..csum
        }),
        OffloadError::EcnWithoutGso
    );
    assert_eq!(
        err(OffloadHdr {
            gso_size: 0,
            ..tso6
        }),
        OffloadError::ZeroGsoSize
    );
    assert_eq!(
        err(OffloadHdr { flags: 4, ..none }),
        OffloadError::UnknownFlags { flags: 4 }
    );
    for gso_type in [2, 6, 0x7f, 0x81 + 1, 0xff] {
        assert_eq!(
            err(OffloadHdr { gso_type, ..tso4 }),
            OffloadError::UnknownGsoType { gso_type }
        );
    }
}

fn tso_only_tcp() -> Caps {
    Caps {
        uso4: false,
        uso6: false,
        ..Caps::ALL
    }
}

#[test]
fn error_messages_are_sentences() {
    let e = OffloadError::Truncated { layer: Layer::Tcp };
    assert_eq!(e.to_string(), "the frame ends inside its TCP header");
    let e = OffloadError::ChecksumOutOfBounds {
        csum_start: 60,
        csum_offset: 16,
        len: 64,
    };
    assert_eq!(
        e.to_string(),
        "a checksum at offset 16 from 60 does not fit in a 64-byte frame"
    );
}

/// Calls everything with `frame` and `hdr` and checks what comes out, if
/// anything does: the calls must never panic. Returns whether segmentation
/// succeeded.
fn exercise(segmenter: &mut Segmenter, frame: &[u8], hdr: &OffloadHdr) -> bool {
    let _ = plan(hdr, Caps::NONE);
    let mut copy = frame.to_vec();
    let r = complete_checksum(
        &mut copy,
        usize::from(hdr.csum_start),
        usize::from(hdr.csum_offset),
    );
    if r.is_err() {
        assert_eq!(copy, frame, "an error leaves the frame alone");
    }
    let count = segment_count(frame, hdr);
    let mut emitted = 0;
    let r = segmenter.segment(frame, hdr, |s| {
        assert!(s.len() <= SCRATCH_LEN);
        assert!(s.len() <= frame.len());
        // Whatever parsed, every segment's checksums verify.
        let (proto, l4) = match hdr.gso_type {
            GSO_UDP_L4 => (UDP, crate::parse::L4::Udp),
            _ => (TCP, crate::parse::L4::Tcp),
        };
        let seg = crate::parse::parse_l4(s, l4).expect("a segment parses");
        if seg.ip == crate::parse::Ip::V4 {
            assert_eq!(ref_sum(&s[seg.l3..seg.l4]), 0xffff);
        }
        assert!(ref_l4_verifies(s, seg.l3, seg.l4, seg.end, proto));
        if proto == UDP {
            assert_eq!(usize::from(be16_at(s, seg.l4 + 4)), seg.end - seg.l4);
            assert_ne!(be16_at(s, seg.l4 + 6), 0, "a UDP checksum of 0 means none");
        }
        emitted += 1;
        true
    });
    match (r, count) {
        (Ok(n), Ok(c)) => {
            assert_eq!(n, c);
            assert_eq!(n, emitted);
            true
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b);
            assert_eq!(emitted, 0);
            false
        }
        (r, c) => panic!("segment {r:?} but segment_count {c:?}"),
    }
}

fn random_hdr(rng: &mut Rng, len: usize) -> OffloadHdr {
    let small = |rng: &mut Rng| {
        if rng.below(2) == 0 {
            rng.below(len + 4) as u16
        } else {
            rng.next() as u16
        }
    };
    OffloadHdr {
        flags: [0, 1, 2, 3, rng.byte()][rng.below(5)],
        gso_type: [0, 1, 3, 4, 5, 0x81, 0x84, 0x85, rng.byte()][rng.below(9)],
        hdr_len: small(rng),
        gso_size: [0, 1, 7, 536, 1448, 0xffff, rng.next() as u16][rng.below(7)],
        csum_start: small(rng),
        csum_offset: small(rng),
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut segmenter = Segmenter::new();
    let mut segmented = 0;
    for _ in 0..20_000 {
        let len = rng.below(160);
        let mut frame = rng.bytes(len);
        // Often make it look like Ethernet/IP so the parser gets further.
        if len > 14 && rng.below(2) == 0 {
            let ethertype: u16 = [0x0800, 0x86dd, 0x8100, 0x88a8][rng.below(4)];
            frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
            if len > 23 {
                frame[14] = [0x45, 0x60, 0x4f, rng.byte()][rng.below(4)];
                frame[23] = TCP;
            }
            // Sometimes with consistent lengths, so that some get through.
            if len > 54 + 13 && rng.below(2) == 0 {
                let v4 = rng.below(2) == 0;
                frame[12..14].copy_from_slice(if v4 { &[0x08, 0x00] } else { &[0x86, 0xdd] });
                if v4 {
                    frame[14] = 0x45;
                    frame[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
                    frame[20..22].fill(0);
                    frame[34 + 12] = 0x50;
                } else {
                    frame[14] = 0x60;
                    frame[18..20].copy_from_slice(&((len - 54) as u16).to_be_bytes());
                    frame[20] = TCP;
                    frame[54 + 12] = 0x50;
                }
            }
        }
        let hdr = random_hdr(&mut rng, len);
        segmented += usize::from(exercise(&mut segmenter, &frame, &hdr));
        let hdr_len = rng.below(13);
        let hdr_bytes = rng.bytes(hdr_len);
        if let Ok(h) = OffloadHdr::from_le_bytes(&hdr_bytes) {
            assert_eq!(h.to_le_bytes()[..], hdr_bytes[..10]);
            exercise(&mut segmenter, &frame, &h);
        }
    }
    assert!(segmented > 200, "{segmented}");
}

#[test]
fn garbled_valid_frames_never_panic() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let mut segmenter = Segmenter::new();
    let mut segmented = 0;
    let originals = [
        (
            V::Four,
            build_tcp(V::Four, &[], 0, 0, &pattern(4000), 1, ACK | PSH, 1),
        ),
        (
            V::Four,
            build_tcp(V::Four, &[0x8100], 8, 12, &pattern(3001), 1, ACK | CWR, 1),
        ),
        (
            V::Six,
            build_tcp(V::Six, &[], 0, 12, &pattern(2999), 1, ACK | FIN, 1),
        ),
        (
            V::Six,
            build_tcp(V::Six, &[0x88a8, 0x8100], 0, 0, &pattern(5000), 1, ACK, 1),
        ),
    ];
    for round in 0..20_000 {
        let (v, b) = &originals[round % originals.len()];
        let mut frame = b.frame.clone();
        // Flip a few header bytes, then maybe cut the frame short.
        for _ in 0..rng.below(4) {
            let at = rng.below(b.payload + 2);
            frame[at] = if rng.below(2) == 0 {
                rng.byte()
            } else {
                frame[at] ^ (1 << rng.below(8))
            };
        }
        if rng.below(3) == 0 {
            frame.truncate(rng.below(frame.len() + 1));
        }
        let mut hdr = gso_hdr(*v, b, [7, 100, 1448, 4000, 9000][rng.below(5)]);
        if rng.below(4) == 0 {
            hdr = random_hdr(&mut rng, frame.len());
        }
        segmented += usize::from(exercise(&mut segmenter, &frame, &hdr));
    }
    // Enough garbled frames still parse for the checks on their segments
    // to mean something.
    assert!(segmented > 2_000, "{segmented}");
}

#[test]
fn check_refuses_what_a_later_step_would_fail_on() {
    let plain = vec![0u8; 60];
    assert_eq!(check(&plain, &OffloadHdr::default()), Ok(1));
    let csum = |start, offset| OffloadHdr {
        flags: F_NEEDS_CSUM,
        csum_start: start,
        csum_offset: offset,
        ..OffloadHdr::default()
    };
    assert_eq!(check(&plain, &csum(34, 16)), Ok(1));
    assert_eq!(check(&plain, &csum(42, 16)), Ok(1), "field ends at 60");
    assert!(matches!(
        check(&plain, &csum(43, 16)),
        Err(OffloadError::ChecksumOutOfBounds { .. })
    ));
    assert!(check(&plain, &csum(u16::MAX, u16::MAX)).is_err());
    let unknown = OffloadHdr {
        flags: 0x80,
        ..OffloadHdr::default()
    };
    assert!(check(&plain, &unknown).is_err());
    // GSO: the same checks as the segmenter, and its segment count.
    let b = build_tcp(V::Four, &[], 0, 0, &pattern(3000), 1, 0x18, 7);
    let h = gso_hdr(V::Four, &b, 1000);
    assert_eq!(check(&b.frame, &h), Ok(3));
    assert!(check(&b.frame[..40], &h).is_err());
}
