//! VLANs on the learning path, the engine driven directly: tenants kept
//! apart, floods within a VLAN, tags pushed, stripped and rewritten on the
//! way out of ring ports and queues (TSO segments too), refused frames
//! counted in `drop_vlan`, and a switch without VLANs leaving tags alone.

mod common;

use common::{dev_vlan, drain, queue, ring_vlan, tso_frame};

use ringswitch_control::PortVlan;
use ringswitch_frame::{Caps, OffloadHdr};
use ringswitch_switch::{LearningBridge, Scratch, Switch};

const BCAST: u8 = 0xff;

fn mac(m: u8) -> [u8; 6] {
    if m == BCAST {
        [0xff; 6]
    } else {
        [2, 0, 0, 0, 0, m]
    }
}

/// A 60-byte frame from `src` to `dst`, with a tag of TCI `tci` if given,
/// and `mark` in its first payload byte.
fn frame(dst: u8, src: u8, tci: Option<u16>, mark: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&mac(dst));
    f.extend_from_slice(&mac(src));
    if let Some(t) = tci {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&t.to_be_bytes());
    }
    f.extend_from_slice(&[0x88, 0xb5, mark]);
    f.resize(60 + tci.map_or(0, |_| 4), 0x5a);
    f
}

fn vlan(s: &str) -> PortVlan {
    s.parse().unwrap()
}

fn switch() -> (Switch, Scratch) {
    (
        Switch::new("vale0", Box::new(LearningBridge::default()), 512),
        Scratch::default(),
    )
}

#[test]
fn tenants_stay_apart_and_a_trunk_carries_both_tagged() {
    let (sw, mut sc) = switch();
    let (a1, mut a1tx, mut a1rx) = ring_vlan(&sw, "a1", vlan("access:10"));
    let (_a2, _, mut a2rx) = ring_vlan(&sw, "a2", vlan("access:10"));
    let (b1, mut b1tx, mut b1rx) = ring_vlan(&sw, "b1", vlan("access:20"));
    let (_b2, _, mut b2rx) = ring_vlan(&sw, "b2", vlan("access:20"));
    let (t, mut ttx, mut trx) = ring_vlan(&sw, "t", vlan("trunk:10,20"));

    // Broadcasts flood within their VLAN; the trunk gets them tagged.
    queue(&mut a1tx, &[frame(BCAST, 0xa1, None, 1)]);
    sw.forward(&a1, 0, &mut sc);
    queue(&mut b1tx, &[frame(BCAST, 0xb1, None, 2)]);
    sw.forward(&b1, 0, &mut sc);
    assert_eq!(drain(&mut a2rx), vec![frame(BCAST, 0xa1, None, 1)]);
    assert_eq!(drain(&mut b2rx), vec![frame(BCAST, 0xb1, None, 2)]);
    assert_eq!(
        drain(&mut trx),
        vec![
            frame(BCAST, 0xa1, Some(10), 1),
            frame(BCAST, 0xb1, Some(20), 2)
        ],
        "tagged with each access port's VLAN"
    );
    assert!(drain(&mut a1rx).is_empty() && drain(&mut b1rx).is_empty());

    // From the trunk, tagged 10 to a1 (learned in VLAN 10): untagged, to
    // a1 only. With a priority of 5, which an access port does not see.
    queue(&mut ttx, &[frame(0xa1, 0x77, Some(0xa00a), 3)]);
    sw.forward(&t, 0, &mut sc);
    assert_eq!(drain(&mut a1rx), vec![frame(0xa1, 0x77, None, 3)]);
    for rx in [&mut a2rx, &mut b1rx, &mut b2rx] {
        assert!(drain(rx).is_empty(), "unicast stays unicast");
    }

    // a1 to b1's address: b1 is known in VLAN 20 only, so in VLAN 10 the
    // address is unknown and floods VLAN 10; b1 never sees it.
    queue(&mut a1tx, &[frame(0xb1, 0xa1, None, 4)]);
    sw.forward(&a1, 0, &mut sc);
    assert_eq!(drain(&mut a2rx), vec![frame(0xb1, 0xa1, None, 4)]);
    assert_eq!(drain(&mut trx), vec![frame(0xb1, 0xa1, Some(10), 4)]);
    assert!(drain(&mut b1rx).is_empty() && drain(&mut b2rx).is_empty());

    // The MAC table is per VLAN: 0x77 was seen in VLAN 10 on the trunk.
    let macs = sw.mac_entries();
    let seen = |m: u8, vid: u16| macs.iter().find(|(e, _)| e.mac == mac(m) && e.vid == vid);
    assert_eq!(seen(0x77, 10).map(|(_, p)| p.as_str()), Some("t"));
    assert_eq!(seen(0xb1, 20).map(|(_, p)| p.as_str()), Some("b1"));
    assert!(seen(0xb1, 10).is_none());
}

#[test]
fn frames_a_port_does_not_carry_are_dropped_and_counted() {
    let (sw, mut sc) = switch();
    let (a, mut atx, _) = ring_vlan(&sw, "a", vlan("access:10"));
    let (t, mut ttx, _) = ring_vlan(&sw, "t", vlan("trunk:10"));
    let (_u, _, mut urx) = ring_vlan(&sw, "u", vlan("trunk:0,10"));

    // On the access port: a tag of another VLAN (refused), a priority tag
    // (VLAN 10, kept), a plain frame (VLAN 10).
    queue(
        &mut atx,
        &[
            frame(BCAST, 0xa, Some(20), 1),
            frame(BCAST, 0xa, Some(0x6000), 2),
            frame(BCAST, 0xa, None, 3),
        ],
    );
    sw.forward(&a, 0, &mut sc);
    // On the trunk of 10 only: untagged (VLAN 0) and VLAN 30 are refused.
    queue(
        &mut ttx,
        &[
            frame(BCAST, 0x7, None, 4),
            frame(BCAST, 0x7, Some(30), 5),
            frame(BCAST, 0x7, Some(10), 6),
        ],
    );
    sw.forward(&t, 0, &mut sc);

    let got = drain(&mut urx);
    assert_eq!(
        got,
        vec![
            frame(BCAST, 0xa, Some(0x600a), 2),
            frame(BCAST, 0xa, Some(10), 3),
            frame(BCAST, 0x7, Some(10), 6),
        ],
        "the priority tag gets VLAN 10 and keeps its priority"
    );
    let (sa, st) = (a.counters.snapshot("a"), t.counters.snapshot("t"));
    assert_eq!((sa.drop_vlan, sa.tx_packets), (1, 2));
    assert_eq!((st.drop_vlan, st.tx_packets), (2, 1));
}

#[test]
fn a_vlan_with_no_other_port_counts_no_destination() {
    let (sw, mut sc) = switch();
    let (a, mut atx, _) = ring_vlan(&sw, "a", vlan("access:10"));
    let (_b, _, mut brx) = ring_vlan(&sw, "b", vlan("access:20"));
    queue(
        &mut atx,
        &[frame(BCAST, 0xa, None, 1), frame(0x9, 0xa, None, 2)],
    );
    sw.forward(&a, 0, &mut sc);
    assert!(drain(&mut brx).is_empty());
    let s = a.counters.snapshot("a");
    assert_eq!((s.drop_no_dest, s.tx_packets, s.tx_bytes), (2, 0, 0));
}

#[test]
fn queues_get_tags_pushed_and_stripped_and_tso_segments_each_tagged() {
    let (sw, mut sc) = switch();
    let none = Caps::default();
    let all = Caps {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: false,
        uso4: false,
        uso6: false,
    };
    // A VM on VLAN 10, a trunk TAP that takes offloads, a trunk NIC that
    // does not, and a ring port on VLAN 10.
    let (vm, vwire) = dev_vlan(&sw, "vm", all, 4096, vlan("access:10"));
    let (_tap, twire) = dev_vlan(&sw, "tap", all, 4096, vlan("trunk:10"));
    let (_nic, nwire) = dev_vlan(&sw, "nic", none, 4096, vlan("trunk:10"));
    let (r, mut rtx, mut rrx) = ring_vlan(&sw, "r", vlan("access:10"));

    let (h, f) = tso_frame();
    vwire.lock().unwrap().rx.push_back((h, f.clone()));
    sw.forward(&vm, 0, &mut sc);

    let tagged = push_tag(&f, 10);
    let t = twire.lock().unwrap();
    assert_eq!(t.sent.len(), 1, "the TAP takes the TSO frame whole");
    assert_eq!(t.sent[0].1, tagged);
    assert_eq!(
        (t.sent[0].0.csum_start, t.sent[0].0.hdr_len),
        (h.csum_start + 4, h.hdr_len + 4),
        "its offsets moved with the tag"
    );
    drop(t);
    let n = nwire.lock().unwrap();
    assert_eq!(n.sent.len(), 3, "segmented for the NIC");
    let mut payload = Vec::new();
    for (_, seg) in &n.sent {
        assert_eq!(
            &seg[12..16],
            &[0x81, 0x00, 0x00, 0x0a],
            "each segment tagged"
        );
        payload.extend_from_slice(&seg[58..]);
    }
    assert_eq!(payload, f[54..]);
    drop(n);
    // The ring port on the same VLAN gets it untagged (segmented: a ring
    // carries no offload request).
    let segs = drain(&mut rrx);
    assert_eq!(segs.len(), 3);
    assert!(segs.iter().all(|s| s[12..14] == [0x08, 0x00]));

    // From the ring port to the trunk TAP: tagged on the way.
    queue(&mut rtx, &[frame(BCAST, 0x5, None, 9)]);
    sw.forward(&r, 0, &mut sc);
    let t = twire.lock().unwrap();
    assert_eq!(t.sent.last().unwrap().1, frame(BCAST, 0x5, Some(10), 9));
    drop(t);
    // And a tagged frame from the TAP reaches the VM untagged.
    twire
        .lock()
        .unwrap()
        .rx
        .push_back((OffloadHdr::default(), frame(BCAST, 0x6, Some(10), 7)));
    let tap = sw.ports().into_iter().find(|p| p.name == "tap").unwrap();
    sw.forward(&tap, 0, &mut sc);
    assert_eq!(
        vwire.lock().unwrap().sent.last().unwrap().1,
        frame(BCAST, 0x6, None, 7)
    );
}

#[test]
fn without_vlans_tagged_frames_pass_untouched() {
    let (sw, mut sc) = switch();
    let (a, mut atx, _) = ring_vlan(&sw, "a", PortVlan::default());
    let (_b, _, mut brx) = ring_vlan(&sw, "b", PortVlan::default());
    let fs = vec![frame(BCAST, 0xa, Some(10), 1), frame(BCAST, 0xa, None, 2)];
    queue(&mut atx, &fs);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx), fs);
}

fn push_tag(f: &[u8], tci: u16) -> Vec<u8> {
    let mut v = f[..12].to_vec();
    v.extend_from_slice(&[0x81, 0x00]);
    v.extend_from_slice(&tci.to_be_bytes());
    v.extend_from_slice(&f[12..]);
    v
}
