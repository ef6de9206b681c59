//! Key extraction on hand-built frames, and masks from matches.

mod common;

use common::*;
use ringswitch_flow::{CompactKey, FlowError, FlowKey, KeyMask, Probe};
use ringswitch_openflow::oxm::{mac_value, OFPVID_PRESENT};
use ringswitch_openflow::{Field, Oxm};

const V6A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn v4(a: [u8; 4]) -> u128 {
    u128::from(u32::from_be_bytes(a))
}

#[test]
fn udp_over_ipv4() {
    let f = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            17,
            0xb9,
            &[],
            0,
            &udp(1000, 53),
        ),
    );
    let k = FlowKey::extract(&f, 7);
    assert_eq!(k.in_port(), 7);
    assert_eq!(k.get(Field::InPort), 7);
    assert_eq!(k.get(Field::EthDst), mac_value(MAC_B));
    assert_eq!(k.get(Field::EthSrc), mac_value(MAC_A));
    assert_eq!(k.get(Field::EthType), 0x0800);
    assert_eq!(k.get(Field::VlanVid), 0);
    assert_eq!(k.get(Field::IpProto), 17);
    assert_eq!(k.get(Field::IpDscp), 0xb9 >> 2);
    assert_eq!(k.get(Field::IpEcn), 1);
    assert_eq!(k.get(Field::Ipv4Src), v4([10, 0, 0, 1]));
    assert_eq!(k.get(Field::Ipv4Dst), v4([10, 0, 0, 2]));
    assert_eq!(k.get(Field::UdpSrc), 1000);
    assert_eq!(k.get(Field::UdpDst), 53);
    assert_eq!(k.metadata(), 0);
}

#[test]
fn tcp_in_a_vlan() {
    let f = eth(
        MAC_B,
        MAC_A,
        Some((100, 5)),
        0x0800,
        &ipv4([1, 2, 3, 4], [5, 6, 7, 8], 6, 0, &[], 0, &tcp(40000, 80)),
    );
    let k = FlowKey::extract(&f, 1);
    assert_eq!(k.get(Field::VlanVid), u128::from(OFPVID_PRESENT | 100));
    assert_eq!(k.get(Field::VlanPcp), 5);
    assert_eq!(k.get(Field::EthType), 0x0800);
    assert_eq!(k.get(Field::TcpSrc), 40000);
    assert_eq!(k.get(Field::TcpDst), 80);
    assert_eq!(k.get(Field::Ipv4Dst), v4([5, 6, 7, 8]));
}

#[test]
fn ipv4_options_are_skipped_by_ihl() {
    let options = [1u8; 12]; // NOPs: IHL 8
    let f = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, &options, 0, &udp(7, 9)),
    );
    let k = FlowKey::extract(&f, 1);
    assert_eq!((k.get(Field::UdpSrc), k.get(Field::UdpDst)), (7, 9));
    // An IHL under 5 is not an IPv4 header: nothing past eth_type.
    let mut bad = f.clone();
    bad[14] = 0x44;
    let k = FlowKey::extract(&bad, 1);
    assert_eq!(k.get(Field::EthType), 0x0800);
    assert_eq!(
        (
            k.get(Field::Ipv4Src),
            k.get(Field::IpProto),
            k.get(Field::UdpSrc)
        ),
        (0, 0, 0)
    );
    // An IHL pointing past the frame: addresses, no ports.
    let mut long = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, &[], 0, &[]),
    );
    long[14] = 0x4f;
    let k = FlowKey::extract(&long, 1);
    assert_eq!(k.get(Field::Ipv4Src), v4([10, 0, 0, 1]));
    assert_eq!(k.get(Field::UdpSrc), 0);
}

#[test]
fn later_fragments_have_no_l4_fields() {
    let first = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, &[], 0x2000, &udp(5, 6)),
    );
    let k = FlowKey::extract(&first, 1);
    assert_eq!(
        k.get(Field::UdpSrc),
        5,
        "the first fragment (offset 0, MF) has its ports"
    );
    let later = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, &[], 0x0010, &udp(5, 6)),
    );
    let k = FlowKey::extract(&later, 1);
    assert_eq!(k.get(Field::IpProto), 17);
    assert_eq!(k.get(Field::Ipv4Src), v4([10, 0, 0, 1]));
    assert_eq!((k.get(Field::UdpSrc), k.get(Field::UdpDst)), (0, 0));
}

#[test]
fn icmpv4() {
    let f = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1, 0, &[], 0, &icmp(8, 0)),
    );
    let k = FlowKey::extract(&f, 1);
    assert_eq!((k.get(Field::Icmpv4Type), k.get(Field::Icmpv4Code)), (8, 0));
    let f = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1, 0, &[], 0, &icmp(3, 4)),
    );
    let k = FlowKey::extract(&f, 1);
    assert_eq!((k.get(Field::Icmpv4Type), k.get(Field::Icmpv4Code)), (3, 4));
}

#[test]
fn ipv6_with_extension_headers() {
    // Hop-by-hop (8 bytes) then UDP.
    let mut rest = vec![17, 0, 0, 0, 0, 0, 0, 0];
    rest.extend_from_slice(&udp(4000, 4001));
    let f = eth(
        MAC_B,
        MAC_A,
        None,
        0x86dd,
        &ipv6(V6A, V6B, 0, 0xb8 | 2, 0xabcde, &rest),
    );
    let k = FlowKey::extract(&f, 3);
    assert_eq!(k.get(Field::EthType), 0x86dd);
    assert_eq!(k.get(Field::Ipv6Src), u128::from_be_bytes(V6A));
    assert_eq!(k.get(Field::Ipv6Dst), u128::from_be_bytes(V6B));
    assert_eq!(k.get(Field::Ipv6Flabel), 0xabcde);
    assert_eq!(k.get(Field::IpDscp), 0xb8 >> 2);
    assert_eq!(k.get(Field::IpEcn), 2);
    assert_eq!(k.get(Field::IpProto), 17);
    assert_eq!((k.get(Field::UdpSrc), k.get(Field::UdpDst)), (4000, 4001));
    // ICMPv6 echo.
    let f = eth(
        MAC_B,
        MAC_A,
        None,
        0x86dd,
        &ipv6(V6A, V6B, 58, 0, 0, &icmp(128, 0)),
    );
    let k = FlowKey::extract(&f, 3);
    assert_eq!(
        (
            k.get(Field::IpProto),
            k.get(Field::Icmpv6Type),
            k.get(Field::Icmpv6Code)
        ),
        (58, 128, 0)
    );
    // A later fragment: no ports.
    let mut rest = vec![17, 0, 0x01, 0x00, 0, 0, 0, 1];
    rest.extend_from_slice(&udp(4000, 4001));
    let f = eth(MAC_B, MAC_A, None, 0x86dd, &ipv6(V6A, V6B, 44, 0, 0, &rest));
    let k = FlowKey::extract(&f, 3);
    assert_eq!(k.get(Field::IpProto), 17);
    assert_eq!(k.get(Field::UdpSrc), 0);
    // A chain longer than the bytes read: no ports.
    let mut rest = vec![60, 7];
    rest.resize(64, 0);
    rest.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 0]);
    rest.extend_from_slice(&udp(1, 2));
    let f = eth(MAC_B, MAC_A, None, 0x86dd, &ipv6(V6A, V6B, 0, 0, 0, &rest));
    let k = FlowKey::extract(&f, 3);
    assert_eq!(k.get(Field::UdpSrc), 0);
    assert_eq!(k.get(Field::Ipv6Src), u128::from_be_bytes(V6A));
}

#[test]
fn arp() {
    let f = eth(
        [0xff; 6],
        MAC_A,
        None,
        0x0806,
        &common::arp(1, MAC_A, [10, 0, 0, 1], [0; 6], [10, 0, 0, 2]),
    );
    let k = FlowKey::extract(&f, 2);
    assert_eq!(k.get(Field::EthType), 0x0806);
    assert_eq!(k.get(Field::ArpOp), 1);
    assert_eq!(k.get(Field::ArpSpa), v4([10, 0, 0, 1]));
    assert_eq!(k.get(Field::ArpTpa), v4([10, 0, 0, 2]));
    assert_eq!(k.get(Field::ArpSha), mac_value(MAC_A));
    assert_eq!(k.get(Field::ArpTha), 0);
    let f = eth(
        MAC_A,
        MAC_B,
        Some((7, 0)),
        0x0806,
        &common::arp(2, MAC_B, [10, 0, 0, 2], MAC_A, [10, 0, 0, 1]),
    );
    let k = FlowKey::extract(&f, 2);
    assert_eq!(k.get(Field::ArpOp), 2);
    assert_eq!(k.get(Field::ArpTha), mac_value(MAC_A));
    assert_eq!(k.get(Field::VlanVid), u128::from(OFPVID_PRESENT | 7));
}

/// For every frame and every truncation: no panic; a field is either its
/// full-frame value or 0; and it is its full-frame value once its header
/// is all there.
#[test]
fn truncated_at_every_length() {
    use Field::*;
    // Each frame, with the length from which each field must be there.
    type Thresholds = Vec<(Field, usize)>;
    let frames: Vec<(Vec<u8>, Thresholds)> = vec![
        (
            eth(
                MAC_B,
                MAC_A,
                None,
                0x0800,
                &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 4, &[], 0, &udp(1, 2)),
            ),
            vec![
                (EthDst, 14),
                (EthType, 14),
                (Ipv4Src, 34),
                (IpProto, 34),
                (UdpSrc, 38),
                (UdpDst, 38),
            ],
        ),
        (
            eth(
                MAC_B,
                MAC_A,
                Some((9, 3)),
                0x0800,
                &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 0, &[1; 8], 0, &tcp(3, 4)),
            ),
            vec![
                (VlanVid, 18),
                (EthType, 18),
                (Ipv4Dst, 38),
                (TcpSrc, 50),
                (TcpDst, 50),
            ],
        ),
        (
            eth(
                MAC_B,
                MAC_A,
                None,
                0x86dd,
                &ipv6(V6A, V6B, 58, 0, 5, &icmp(135, 0)),
            ),
            vec![
                (Ipv6Src, 54),
                (Ipv6Flabel, 54),
                (IpProto, 54),
                (Icmpv6Type, 56),
            ],
        ),
        (
            eth(
                MAC_B,
                MAC_A,
                None,
                0x0806,
                &common::arp(1, MAC_A, [1, 1, 1, 1], MAC_B, [2, 2, 2, 2]),
            ),
            vec![(ArpOp, 42), (ArpSpa, 42), (ArpTha, 42)],
        ),
        (
            eth(
                MAC_B,
                MAC_A,
                None,
                0x0800,
                &ipv4([9, 9, 9, 9], [8, 8, 8, 8], 1, 0, &[], 0, &icmp(0, 0)),
            ),
            vec![(Ipv4Src, 34), (Icmpv4Type, 36)],
        ),
    ];
    let all = Field::ALL;
    for (f, thresholds) in &frames {
        let full = FlowKey::extract(f, 4);
        for n in 0..=f.len() {
            let k = FlowKey::extract(&f[..n], 4);
            assert_eq!(k.in_port(), 4);
            for &field in all {
                let v = k.get(field);
                // A tag cut short leaves its TPID as the eth_type.
                let cut_tag = field == EthType && v == 0x8100 && n < 18;
                assert!(
                    v == 0 || v == full.get(field) || cut_tag,
                    "{} at length {n}: {v:#x}",
                    field.name()
                );
            }
            for &(field, need) in thresholds {
                if n >= need {
                    assert_eq!(
                        k.get(field),
                        full.get(field),
                        "{} at length {n}",
                        field.name()
                    );
                } else if field != EthType {
                    assert_eq!(k.get(field), 0, "{} at length {n}", field.name());
                }
            }
        }
        assert_eq!(FlowKey::extract(f, 4), full);
    }
    // Garbage of every length does not panic either.
    let mut rng = Rng::new(7);
    for n in 0..300 {
        let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        let _ = FlowKey::extract(&bytes, 1);
    }
}

#[test]
fn only_the_first_128_bytes_are_read() {
    let mut f = udp4(1, 2, 3, 4);
    f.resize(1514, 0xee);
    let mut g = f.clone();
    g[200] = 0;
    assert_eq!(FlowKey::extract(&f, 1), FlowKey::extract(&g, 1));
}

#[test]
fn masks_from_matches() {
    let tagged = FlowKey::extract(&eth(MAC_B, MAC_A, Some((10, 0)), 0x0800, &[]), 1);
    let untagged = FlowKey::extract(&eth(MAC_B, MAC_A, None, 0x0800, &[]), 1);
    let any_tag = m(vec![Oxm::masked(
        Field::VlanVid,
        u128::from(OFPVID_PRESENT),
        u128::from(OFPVID_PRESENT),
    )]);
    let (mask, value) = KeyMask::from_match(&any_tag).unwrap();
    assert!(tagged.matches(&mask, &value));
    assert!(!untagged.matches(&mask, &value));
    let no_tag = m(vec![Oxm::exact(Field::VlanVid, 0)]);
    let (mask, value) = KeyMask::from_match(&no_tag).unwrap();
    assert!(!tagged.matches(&mask, &value));
    assert!(untagged.matches(&mask, &value));
    let vid10 = m(vec![Oxm::exact(
        Field::VlanVid,
        u128::from(OFPVID_PRESENT | 10),
    )]);
    let (mask, value) = KeyMask::from_match(&vid10).unwrap();
    assert!(tagged.matches(&mask, &value));

    let f = udp4(1, 2, 3, 4);
    let k = FlowKey::extract(&f, 1);
    let prefix = m(vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::masked(Field::Ipv4Dst, v4([10, 0, 0, 0]), v4([255, 255, 255, 0])),
    ]);
    let (mask, value) = KeyMask::from_match(&prefix).unwrap();
    assert!(k.matches(&mask, &value));
    let other = m(vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::masked(Field::Ipv4Dst, v4([10, 0, 1, 0]), v4([255, 255, 255, 0])),
    ]);
    let (mask, value) = KeyMask::from_match(&other).unwrap();
    assert!(!k.matches(&mask, &value));

    let tunnel = m(vec![Oxm::exact(Field::TunnelId, 5)]);
    assert_eq!(
        KeyMask::from_match(&tunnel),
        Err(FlowError::UnsupportedField(Field::TunnelId))
    );
}

#[test]
fn the_straight_path_gives_the_same_keys() {
    // IPv4 frames of every kind the straight path takes and some it does
    // not, cut at every length, with bytes past the frame set and not.
    let l4s: Vec<(u8, Vec<u8>)> = vec![
        (17, udp(1000, 53)),
        (6, tcp(80, 4321)),
        (132, udp(9, 9)),
        (1, icmp(8, 0)),
        (47, vec![1, 2, 3, 4]),
    ];
    let mut frames = Vec::new();
    for (proto, l4) in &l4s {
        for frag in [0u16, 0x2000, 0x0001] {
            frames.push(eth(
                MAC_B,
                MAC_A,
                None,
                0x0800,
                &ipv4([10, 0, 0, 1], [10, 0, 0, 2], *proto, 0xb9, &[], frag, l4),
            ));
        }
    }
    frames.push(eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            6,
            0,
            &[1, 1, 1, 1],
            0,
            &tcp(1, 2),
        ),
    ));
    frames.push(eth(
        MAC_B,
        MAC_A,
        Some((5, 3)),
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, &[], 0, &udp(1, 2)),
    ));
    for f in &frames {
        for n in 0..=f.len().min(128) {
            for fill in [0u8, 0xff] {
                let mut buf = [fill; 128];
                buf[..n].copy_from_slice(&f[..n]);
                let full = FlowKey::extract(&f[..n], 7);
                assert_eq!(
                    FlowKey::extract_prefix(&buf, n, 7),
                    full,
                    "{n} bytes of {f:02x?}"
                );
                // The compact key, where the straight path makes one, is
                // the full key's, and the probe the same either way.
                if let Some(c) = CompactKey::from_prefix(&buf, n, 7) {
                    assert_eq!(c.expand(), full, "{n} bytes of {f:02x?}");
                    assert_eq!(full.compact(), Some(c), "{n} bytes of {f:02x?}");
                }
                let mut p = Probe::default();
                p.set_prefix(&buf, n, 7);
                assert!(p.same(&Probe::of(&full)), "{n} bytes of {f:02x?}");
                assert_eq!(p.hash(), Probe::of(&full).hash());
                assert_eq!(p.key(), full);
            }
        }
    }
}

/// A key has a compact form exactly when it is an untagged IPv4 frame's
/// with metadata 0; the compact form gives the key back, and two keys'
/// probes are the same exactly when the keys are equal.
#[test]
fn compact_keys_are_the_untagged_ipv4_ones() {
    let v4 = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0xb9, &[], 0, &udp(1, 2)),
    );
    let k = FlowKey::extract(&v4, 0xfedc_ba98);
    let c = k.compact().expect("an untagged IPv4 frame's key");
    assert_eq!(c.expand(), k);
    assert_eq!(Probe::of(&k).key(), k);
    // Each field of the key changed alone: another compact key, or none.
    let others: Vec<FlowKey> = vec![
        FlowKey::extract(&v4, 1),
        FlowKey::extract(&udp4(3, 2, 1, 2), 0xfedc_ba98),
        {
            let mut o = k;
            o.set_metadata(1);
            o
        },
        {
            let mut o = k;
            o.set(Field::VlanVid, u128::from(OFPVID_PRESENT | 5));
            o
        },
        {
            let mut o = k;
            o.set(Field::EthType, 0x86dd);
            o
        },
        {
            let mut o = k;
            o.set(Field::Ipv6Flabel, 1);
            o
        },
        {
            let mut o = k;
            o.set(Field::ArpOp, 1);
            o
        },
        {
            let mut o = k;
            o.set(Field::ArpSha, 1);
            o
        },
        {
            let mut o = k;
            o.set(Field::Ipv6Src, 1 << 96);
            o
        },
        FlowKey::extract(
            &eth(
                MAC_B,
                MAC_A,
                None,
                0x86dd,
                &ipv6(V6A, V6B, 17, 0, 0, &udp(1, 2)),
            ),
            1,
        ),
    ];
    for o in &others {
        assert_ne!(*o, k);
        if let Some(oc) = o.compact() {
            assert_ne!(oc, c, "{o:?}");
            assert_eq!(oc.expand(), *o);
        }
        assert!(!Probe::of(o).same(&Probe::of(&k)), "{o:?}");
        assert!(!Probe::of(&k).same(&Probe::of(o)), "{o:?}");
        assert!(Probe::of(o).same(&Probe::of(o)), "{o:?}");
        assert_eq!(Probe::of(o).key(), *o);
    }
    for o in &others[3..] {
        assert_eq!(o.compact(), None, "{o:?}");
    }
}
