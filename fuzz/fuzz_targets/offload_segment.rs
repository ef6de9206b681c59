//! The offload parser and segmenter, differential: a frame built from the
//! fuzzer's choices (VLAN tags, IPv4 options or IPv6, TCP options, payload,
//! MSS, flags), optionally corrupted afterwards, is segmented and its partial
//! checksum completed. Whatever the input, nothing panics; when the frame is
//! the well-formed one that was built, every segment's IPv4 and TCP
//! checksums verify (checked with a plain sum written here, not the crate's),
//! headers match the original but for the fields segmentation changes, and
//! the payloads reassemble to the original payload in sequence order.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_frame::{OffloadHdr, F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6};
use ringswitch_offload::{complete_checksum, segment_count, Segmenter};

#[derive(Arbitrary, Debug)]
struct Input {
    vlan_tags: u8,
    ipv6: bool,
    ipv4_options_words: u8,
    tcp_options_words: u8,
    ttl: u8,
    id: u16,
    seq: u32,
    tcp_flags: u8,
    addrs: [u8; 32],
    mss: u16,
    ecn: bool,
    payload_len: u16,
    fill: u8,
    /// Raw header as a sender could write it (used when `raw_hdr`).
    raw_hdr: Option<[u8; 10]>,
    /// Bytes to scribble over the built frame: (offset, value).
    corrupt: Vec<(u16, u8)>,
    /// Bytes appended or removed at the end.
    trailer: i8,
}

fn sum16(data: &[u8], init: u32) -> u16 {
    let mut s = u64::from(init);
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        s += u64::from(w);
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn pseudo(ip6: bool, l3: &[u8], tcp_len: usize) -> u32 {
    let mut s = 0u32;
    let addrs = if ip6 { &l3[8..40] } else { &l3[12..20] };
    for c in addrs.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    s += 6;
    s += (tcp_len as u32) >> 16;
    s += (tcp_len as u32) & 0xffff;
    s
}

struct Built {
    frame: Vec<u8>,
    l3: usize,
    l4: usize,
    payload: usize,
}

fn build(inp: &Input) -> Built {
    let mut f = vec![0u8; 12];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    for t in 0..inp.vlan_tags % 3 {
        f.extend_from_slice(&(if t == 0 { 0x88a8u16 } else { 0x8100 }).to_be_bytes());
        f.extend_from_slice(&(u16::from(t) + 1).to_be_bytes());
    }
    let tcp_hlen = 20 + 4 * usize::from(inp.tcp_options_words % 11);
    let payload_len = usize::from(inp.payload_len) % 9000;
    let l3;
    if inp.ipv6 {
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        l3 = f.len();
        let mut h = [0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&((tcp_hlen + payload_len) as u16).to_be_bytes());
        h[6] = 6;
        h[7] = inp.ttl;
        h[8..40].copy_from_slice(&inp.addrs);
        f.extend_from_slice(&h);
    } else {
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        l3 = f.len();
        let hlen = 20 + 4 * usize::from(inp.ipv4_options_words % 11);
        let mut h = vec![0u8; hlen];
        h[0] = 0x40 | (hlen / 4) as u8;
        h[2..4].copy_from_slice(&((hlen + tcp_hlen + payload_len) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&inp.id.to_be_bytes());
        h[6] = 0x40; // DF
        h[8] = inp.ttl;
        h[9] = 6;
        h[12..20].copy_from_slice(&inp.addrs[..8]);
        for o in &mut h[20..] {
            *o = 1; // NOP options
        }
        let c = !sum16(&h, 0);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
    }
    let l4 = f.len();
    let mut t = vec![0u8; tcp_hlen];
    t[0..2].copy_from_slice(&1234u16.to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&inp.seq.to_be_bytes());
    t[12] = ((tcp_hlen / 4) as u8) << 4;
    t[13] = inp.tcp_flags;
    for o in &mut t[20..] {
        *o = 1;
    }
    f.extend_from_slice(&t);
    let payload = f.len();
    f.extend((0..payload_len).map(|i| inp.fill.wrapping_add(i as u8)));
    Built {
        frame: f,
        l3,
        l4,
        payload,
    }
}

/// Checks one segment of the well-formed frame `b`; returns its payload
/// and sequence number.
fn check_segment(b: &Built, ip6: bool, seg: &[u8], index: usize, count: usize) -> (u32, Vec<u8>) {
    let Built {
        frame,
        l3,
        l4,
        payload,
    } = b;
    assert!(
        seg.len() >= *payload,
        "segment {index} shorter than the headers"
    );
    assert_eq!(seg[..*l3], frame[..*l3], "link header changed");
    let ip = &seg[*l3..*l4];
    let tcp_len = seg.len() - l4;
    if ip6 {
        assert_eq!(
            usize::from(u16::from_be_bytes([ip[4], ip[5]])),
            tcp_len,
            "IPv6 payload length"
        );
        assert_eq!(ip[6..40], frame[l3 + 6..l3 + 40], "IPv6 header changed");
    } else {
        assert_eq!(
            sum16(ip, 0),
            0xffff,
            "segment {index}: IPv4 header checksum does not verify"
        );
        assert_eq!(
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            seg.len() - l3,
            "IPv4 total length"
        );
        assert_eq!(
            ip[12..20],
            frame[l3 + 12..l3 + 20],
            "IPv4 addresses changed"
        );
    }
    let tcp = &seg[*l4..];
    assert_eq!(
        sum16(tcp, pseudo(ip6, ip, tcp_len)),
        0xffff,
        "segment {index}: TCP checksum does not verify"
    );
    let orig_flags = frame[l4 + 13];
    let mut expect = orig_flags;
    if index + 1 < count {
        expect &= !(0x01 | 0x08);
    }
    if index > 0 {
        expect &= !0x80;
    }
    assert_eq!(tcp[13], expect, "segment {index}: TCP flags");
    let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
    (seq, seg[*payload..].to_vec())
}

fuzz_target!(|inp: Input| {
    let b = build(&inp);
    let mut frame = b.frame.clone();
    for &(off, v) in &inp.corrupt {
        if let Some(x) = frame.get_mut(usize::from(off)) {
            *x = v;
        }
    }
    match inp.trailer {
        t if t > 0 => frame.extend(std::iter::repeat_n(0u8, t as usize)),
        t if t < 0 => frame.truncate(frame.len().saturating_sub(t.unsigned_abs() as usize)),
        _ => {}
    }
    let pristine = frame == b.frame;
    let gso_type = if inp.ipv6 { GSO_TCPV6 } else { GSO_TCPV4 } | if inp.ecn { GSO_ECN } else { 0 };
    let hdr = match inp.raw_hdr {
        Some(raw) => OffloadHdr::from_le_bytes(&raw).expect("10 bytes are a header"),
        None => OffloadHdr {
            flags: F_NEEDS_CSUM,
            gso_type,
            hdr_len: b.payload as u16,
            gso_size: inp.mss,
            csum_start: b.l4 as u16,
            csum_offset: 16,
        },
    };
    assert_eq!(
        OffloadHdr::from_le_bytes(&hdr.to_le_bytes()).ok(),
        Some(hdr)
    );

    // Segmentation.
    let mut seg = Segmenter::new();
    let mut segs: Vec<Vec<u8>> = Vec::new();
    let r = seg.segment(&frame, &hdr, |s| {
        segs.push(s.to_vec());
        true
    });
    let count = segment_count(&frame, &hdr);
    match (&r, &count) {
        (Ok(n), Ok(c)) => {
            assert_eq!(n, c, "segment count");
            assert_eq!(*n, segs.len());
        }
        (Err(_), Err(_)) => {}
        _ => panic!("segment {r:?} and segment_count {count:?} disagree"),
    }
    let expect_ok = pristine && inp.raw_hdr.is_none() && inp.mss > 0;
    if expect_ok {
        let n = r.unwrap_or_else(|e| panic!("a well-formed frame was refused: {e}"));
        let mss = usize::from(inp.mss);
        let plen = b.frame.len() - b.payload;
        assert_eq!(
            n,
            plen.div_ceil(mss).max(1),
            "segment count for {plen} bytes at MSS {mss}"
        );
        let mut joined = Vec::with_capacity(plen);
        let mut next_seq = inp.seq;
        for (i, s) in segs.iter().enumerate() {
            let (seq, p) = check_segment(&b, inp.ipv6, s, i, n);
            assert_eq!(seq, next_seq, "segment {i}: sequence number");
            assert!(
                p.len() <= mss,
                "segment {i}: {} bytes over MSS {mss}",
                p.len()
            );
            next_seq = next_seq.wrapping_add(p.len() as u32);
            joined.extend_from_slice(&p);
        }
        assert_eq!(
            joined,
            b.frame[b.payload..],
            "segments reassemble to the original payload"
        );
    } else if let Ok(n) = r {
        for s in &segs {
            assert!(!s.is_empty() && n > 0);
        }
    }

    // Checksum completion (GSO_NONE with NEEDS_CSUM): the pseudo-header sum
    // is in the field, as a sender leaves it.
    let mut single = frame.clone();
    let cs = usize::from(hdr.csum_start);
    let co = usize::from(hdr.csum_offset);
    if pristine && hdr.gso_type & !GSO_ECN != GSO_NONE && inp.raw_hdr.is_none() {
        let ip = &b.frame[b.l3..b.l4];
        let tcp_len = b.frame.len() - b.l4;
        let p = sum16(&[], pseudo(inp.ipv6, ip, tcp_len));
        single[cs + co..cs + co + 2].copy_from_slice(&p.to_be_bytes());
        complete_checksum(&mut single, cs, co).expect("the field is inside the frame");
        assert_eq!(
            sum16(&single[b.l4..], pseudo(inp.ipv6, ip, tcp_len)),
            0xffff,
            "a completed TCP checksum verifies"
        );
    } else {
        let r = complete_checksum(&mut single, cs, co);
        assert_eq!(
            r.is_ok(),
            cs.checked_add(co)
                .and_then(|x| x.checked_add(2))
                .is_some_and(|e| e <= single.len())
        );
    }
});
