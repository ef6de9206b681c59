//! Interface ports driven directly, with an in-memory `FrameQueue`: frames
//! between ring ports and interfaces, order, counters, a full transmit
//! queue, and offloads kept for an interface that takes them (a TAP) and
//! done in software for one that does not (a NIC).

mod common;

use common::{dev, drain, frame, queue, ring, tso_frame, uso_frame};

use ringswitch_frame::{Caps, OffloadHdr, F_NEEDS_CSUM};
use ringswitch_ring::{AppRing, Dir};
use ringswitch_switch::{Hub, LearningBridge, Scratch, Switch};

#[test]
fn ring_to_interface_and_back_in_order_with_one_flush_per_batch() {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let mut sc = Scratch::default();
    let (a, mut atx, mut arx) = ring(&sw, "a");
    let (nic, wire) = dev(&sw, "eth0", Caps::default(), 4096);
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|k| frame(0xee, 0xa, k, 60 + k as usize))
        .collect();
    queue(&mut atx, &frames);
    let r = sw.forward(&a, 0, &mut sc);
    assert_eq!(r.packets, 100);
    {
        let w = wire.lock().unwrap();
        assert_eq!(w.flushes, 1, "one flush for the batch");
        let sent: Vec<Vec<u8>> = w.sent.iter().map(|(_, f)| f.clone()).collect();
        assert_eq!(sent, frames, "every frame, whole and in order");
    }
    // From the wire: a reply to a (learned), a runt, and a frame for nobody.
    {
        let mut w = wire.lock().unwrap();
        w.rx.push_back((OffloadHdr::default(), frame(0xa, 0xee, 1, 64)));
        w.rx.push_back((OffloadHdr::default(), vec![0u8; 10]));
        w.rx.push_back((OffloadHdr::default(), frame(0x77, 0xee, 2, 1514)));
    }
    let r = sw.forward(&nic, 0, &mut sc);
    assert_eq!(r.packets, 3);
    let got = drain(&mut arx);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0][14], got[0].len()), (1, 64));
    assert_eq!((got[1][14], got[1].len()), (2, 1514));
    let s = nic.stats();
    assert_eq!((s.tx_packets, s.drop_short, s.rx_packets), (2, 1, 100));
    assert_eq!(
        s.drop_kernel, 7,
        "the kernel's drops are in the port's stats"
    );
    // Nothing left: the source reports no work.
    assert_eq!(sw.forward(&nic, 0, &mut sc).slots, 0);
}

#[test]
fn full_transmit_queue_drops_the_rest_and_counts() {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let mut sc = Scratch::default();
    let (a, mut atx, _) = ring(&sw, "a");
    let (nic, wire) = dev(&sw, "eth0", Caps::default(), 30);
    let frames: Vec<Vec<u8>> = (0..50).map(|k| frame(0xee, 0xa, k, 60)).collect();
    queue(&mut atx, &frames);
    sw.forward(&a, 0, &mut sc);
    let w = wire.lock().unwrap();
    assert_eq!(w.sent.len(), 30);
    assert!(
        w.sent
            .iter()
            .enumerate()
            .all(|(k, (_, f))| f[14] == k as u8),
        "a prefix arrives"
    );
    let s = nic.stats();
    assert_eq!((s.rx_packets, s.drop_rx_full), (30, 20));
}

/// A TCPv4 frame with a 3000-byte payload asking for TSO (MSS 1000) and a
/// partial checksum, as a host stack hands it to a TAP.

#[test]
fn offloads_pass_to_an_interface_that_takes_them_and_are_done_for_one_that_does_not() {
    // A hub: the TAP's frame reaches both the other TAP and the NIC.
    let sw = Switch::new("vale0", Box::new(Hub), 512);
    let mut sc = Scratch::default();
    let all = Caps {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: false,
        uso4: false,
        uso6: false,
    };
    let (tap, twire) = dev(&sw, "tap0", all, 4096);
    let (_tap2, t2wire) = dev(&sw, "tap1", all, 4096);
    let (_nic, nwire) = dev(&sw, "eth0", Caps::default(), 4096);
    let (h, f) = tso_frame();
    twire.lock().unwrap().rx.push_back((h, f.clone()));
    sw.forward(&tap, 0, &mut sc);
    let t2 = t2wire.lock().unwrap();
    assert_eq!(t2.sent.len(), 1, "passed through whole");
    assert_eq!(t2.sent[0].0, h, "with its offload header");
    assert_eq!(t2.sent[0].1, f);
    let n = nwire.lock().unwrap();
    assert_eq!(n.sent.len(), 3, "segmented for the NIC");
    let mut payload = Vec::new();
    for (sh, seg) in &n.sent {
        assert_eq!(sh.gso_type, 0, "plain frames");
        assert!(seg.len() <= 14 + 20 + 20 + 1000);
        payload.extend_from_slice(&seg[54..]);
    }
    assert_eq!(payload, f[54..], "the payload, in order");
}

/// USO: a UDP GSO frame passes whole to an interface that takes USO, and
/// reaches one that does not as datagrams, each with its own UDP length.
#[test]
fn udp_segmentation_passes_to_an_interface_that_takes_it_and_is_done_for_one_that_does_not() {
    let sw = Switch::new("vale0", Box::new(Hub), 512);
    let mut sc = Scratch::default();
    let (tap, twire) = dev(&sw, "tap0", Caps::ALL, 4096);
    let (_tap2, t2wire) = dev(&sw, "tap1", Caps::ALL, 4096);
    let tso_only = Caps {
        uso4: false,
        uso6: false,
        ..Caps::ALL
    };
    let (_vm, vwire) = dev(&sw, "vm0", tso_only, 4096);
    let (h, f) = uso_frame();
    twire.lock().unwrap().rx.push_back((h, f.clone()));
    sw.forward(&tap, 0, &mut sc);
    let t2 = t2wire.lock().unwrap();
    assert_eq!(t2.sent.len(), 1, "passed through whole");
    assert_eq!((t2.sent[0].0, &t2.sent[0].1), (h, &f));
    let v = vwire.lock().unwrap();
    assert_eq!(v.sent.len(), 3, "three datagrams for the VM without USO");
    let mut payload = Vec::new();
    for (sh, seg) in &v.sent {
        assert_eq!(sh.gso_type, 0, "plain frames");
        assert_eq!(seg.len(), 14 + 20 + 8 + 1000);
        assert_eq!(
            u16::from_be_bytes([seg[38], seg[39]]),
            8 + 1000,
            "its own UDP length"
        );
        payload.extend_from_slice(&seg[42..]);
    }
    assert_eq!(payload, f[42..], "the payload, in order");
}

/// Exact accounting (issue 15), interface destination: a hostile ring
/// client's slots (bad buffer indexes, runts, slots longer than their
/// buffer, broken and endless fragment chains, a frame too long for any
/// interface, a chain never finished) into an interface queue that fills
/// up. What the client sent is what its port took plus what it refused,
/// and what it took is what the interface got plus what it dropped.
#[test]
fn counters_add_up_for_an_interface_destination_under_a_hostile_sender() {
    use ringswitch_ring::layout::{MAX_FRAGS, NS_MOREFRAG};
    use ringswitch_ring::PortRing;

    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let mut sc = Scratch::default();
    let (a, mut atx, _) = ring(&sw, "a");
    let (nic, wire) = dev(&sw, "eth0", Caps::default(), 10);
    let first = atx.region().layout().first_buf(0, Dir::Tx, 0);
    let f = frame(0xee, 0xa, 1, 2048);
    // Writes one slot `k` past cur.
    let put = |tx: &mut AppRing, k: u32, len: u16, flags: u16, bad: bool| {
        let i = tx.slot_index(k).unwrap();
        tx.ring().set_buf_idx(i, first + i);
        let mut s = tx.slot_mut(k).unwrap();
        assert!(s.write_at(0, &f));
        s.set_len_flags(len, flags);
        if bad {
            tx.ring().set_buf_idx(i, u32::MAX);
        }
    };
    let mut units = 0u64;
    for _round in 0..4 {
        let mut k = 0u32;
        // Good frames, one slot each.
        for _ in 0..20 {
            put(&mut atx, k, 60, 0, false);
            k += 1;
            units += 1;
        }
        // A good chain of three slots.
        put(&mut atx, k, 2048, NS_MOREFRAG, false);
        put(&mut atx, k + 1, 2048, NS_MOREFRAG, false);
        put(&mut atx, k + 2, 100, 0, false);
        k += 3;
        units += 1;
        // A bad buffer index, a runt, a slot longer than its buffer.
        put(&mut atx, k, 60, 0, true);
        put(&mut atx, k + 1, 10, 0, false);
        put(&mut atx, k + 2, 4000, 0, false);
        k += 3;
        units += 3;
        // A chain with a bad buffer in its middle.
        put(&mut atx, k, 60, NS_MOREFRAG, false);
        put(&mut atx, k + 1, 60, NS_MOREFRAG, true);
        put(&mut atx, k + 2, 60, 0, false);
        k += 3;
        units += 1;
        // A chain that never ends: refused at MAX_FRAGS slots.
        for j in 0..MAX_FRAGS {
            put(&mut atx, k + j, 60, NS_MOREFRAG, false);
        }
        k += MAX_FRAGS;
        units += 1;
        // 40 full slots: 80 KiB, longer than any interface takes.
        for j in 0..40 {
            let last = j == 39;
            put(
                &mut atx,
                k + j,
                2048,
                if last { 0 } else { NS_MOREFRAG },
                false,
            );
        }
        k += 40;
        units += 1;
        atx.advance(k);
        atx.publish();
        while sw.forward(&a, 0, &mut sc).slots > 0 {}
        wire.lock().unwrap().sent.clear();
        atx.refresh_tail();
    }
    // A chain never finished: it waits, then is dropped after the bound.
    put(&mut atx, 0, 60, NS_MOREFRAG, false);
    atx.advance(1);
    atx.publish();
    units += 1;
    let mut looks = 0;
    while sw.forward(&a, 0, &mut sc).slots == 0 {
        looks += 1;
        assert!(looks <= PortRing::STALLED_LOOKS_MAX + 1, "never dropped");
    }
    let (s, d) = (a.stats(), nic.stats());
    let taken = s.tx_packets;
    assert_eq!(
        taken + s.drop_malformed + s.drop_short + s.drop_long + s.drop_no_dest,
        units,
        "{s:?}"
    );
    assert_eq!(
        taken,
        d.rx_packets + d.drop_rx_full + d.drop_long + d.drop_link_down,
        "{s:?} {d:?}"
    );
    assert_eq!((s.drop_short, s.drop_long), (4, 4), "{s:?}");
    assert_eq!(s.drop_malformed, 4 * 3 + 1, "{s:?}");
    assert!(d.drop_rx_full > 0 && d.rx_packets > 0, "{d:?}");
}

/// Exact accounting (issue 15), interface source: frames whose offload
/// request is unsound (a checksum field past the end, a GSO frame whose
/// headers cannot be cut, unknown flags) are refused once where they enter
/// the switch, whatever the destinations would have done with them, and
/// every other frame is counted once by each destination it is flooded to.
#[test]
fn unsound_offload_requests_are_refused_once_at_the_source() {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let mut sc = Scratch::default();
    let (nic, wire) = dev(&sw, "eth0", Caps::default(), 64);
    let (a, _, mut arx) = ring(&sw, "a");
    let (b, _, mut brx) = ring(&sw, "b");
    let (tso_hdr, tso) = tso_frame();
    let plain = frame(0xff, 0x1, 7, 60);
    let bad_csum = OffloadHdr {
        flags: F_NEEDS_CSUM,
        csum_start: 50,
        csum_offset: 16,
        ..OffloadHdr::default()
    };
    let mut bad_tso = tso_hdr;
    bad_tso.gso_size = 0;
    let mut cut_short = tso.clone();
    cut_short.truncate(40);
    let unknown = OffloadHdr {
        flags: 0x80,
        ..OffloadHdr::default()
    };
    {
        let mut w = wire.lock().unwrap();
        w.rx.push_back((OffloadHdr::default(), plain.clone()));
        w.rx.push_back((bad_csum, plain.clone()));
        w.rx.push_back((bad_tso, tso.clone()));
        w.rx.push_back((tso_hdr, cut_short));
        w.rx.push_back((unknown, plain.clone()));
        w.rx.push_back((tso_hdr, tso.clone()));
    }
    assert_eq!(sw.forward(&nic, 0, &mut sc).slots, 6);
    let s = nic.stats();
    assert_eq!((s.tx_packets, s.drop_malformed), (2, 4), "{s:?}");
    // The plain frame and the TSO frame's three segments, at each port.
    for (p, rx) in [(&a, &mut arx), (&b, &mut brx)] {
        assert_eq!(drain(rx).len(), 4);
        let d = p.stats();
        assert_eq!(
            (d.rx_packets, d.drop_malformed, d.drop_long),
            (4, 0, 0),
            "{d:?}"
        );
    }
}
