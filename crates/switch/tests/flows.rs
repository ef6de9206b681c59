//! Flow tables deciding where frames go, the engine driven directly: an
//! output by port number, IN_PORT, FLOOD and ALL, NORMAL (the learning
//! bridge, with its VLANs), the controller; header edits on the way out of
//! ring ports and queues (TSO segments too); per-flow counters exact; a
//! flow mod taking effect for the next batch; the fail mode; two switches
//! sharing a worker's cache.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{dev, drain, queue, ring, ring_vlan, tso_frame};

use ringswitch_flow::Config;
use ringswitch_frame::{Caps, OffloadHdr};
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{FlowMod, FlowModCommand};
use ringswitch_openflow::oxm::OFPVID_PRESENT;
use ringswitch_openflow::{Action, Field, Instruction, Match, Oxm};
use ringswitch_switch::{FailMode, Flows, LearningBridge, Scratch, Switch};

const BCAST: u8 = 0xff;

fn mac(m: u8) -> [u8; 6] {
    if m == BCAST {
        [0xff; 6]
    } else {
        [2, 0, 0, 0, 0, m]
    }
}

/// A 60-byte IPv4/UDP frame from `src` to `dst` (MACs and 10.0.0.x
/// addresses), from UDP port `sport`, with `mark` in its payload.
fn udp(dst: u8, src: u8, sport: u16, mark: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&mac(dst));
    f.extend_from_slice(&mac(src));
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![
        0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, src, 10, 0, 0, dst,
    ];
    let sum = ipv4_sum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0, 26, 0, 0, mark]);
    f.resize(60, 0x5a);
    f
}

fn ipv4_sum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, p)| u32::from(u16::from_be_bytes([p[0], p[1]])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// `f` with a tag of TCI `tci` after its addresses.
fn tagged(f: &[u8], tci: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&tci.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

fn out(port: u32) -> Action {
    Action::Output {
        port,
        max_len: OFPCML_NO_BUFFER,
    }
}

fn flow(priority: u16, fields: Vec<Oxm>, actions: Vec<Action>) -> FlowMod {
    let mut fm = FlowMod::add(
        0,
        priority,
        Match::new(fields).unwrap(),
        vec![Instruction::ApplyActions(actions)],
    );
    fm.cookie = u64::from(priority);
    fm
}

/// The match of UDP/IPv4 frames from source port `p`.
fn udp_src(p: u128) -> Vec<Oxm> {
    vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::IpProto, 17),
        Oxm::exact(Field::UdpSrc, p),
    ]
}

fn in_port(p: u32) -> Oxm {
    Oxm::exact(Field::InPort, u128::from(p))
}

/// A learning switch with flow tables.
fn switch() -> (Switch, Arc<Flows>, Scratch) {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let flows = Arc::new(Flows::new(Config::default()).unwrap());
    sw.set_flows(Some(flows.clone()));
    (sw, flows, Scratch::default())
}

fn add(flows: &Flows, fm: FlowMod) {
    flows
        .modify(|t| t.flow_mod(&fm, Duration::ZERO))
        .expect("a valid flow");
}

/// (packets, bytes) of the flow of priority `prio` in table 0, once the
/// worker's cache has counted (as a worker does before it sleeps).
fn counts(sc: &mut Scratch, flows: &Flows, prio: u16) -> (u64, u64) {
    sc.flush_counters();
    flows
        .read()
        .flows()
        .find(|f| f.table_id() == 0 && f.priority() == prio)
        .expect("the flow")
        .counts()
}

#[test]
fn flows_decide_the_port_and_count_exactly_and_a_miss_drops() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (b, mut btx, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    // From a (OpenFlow port 1) to c (3), whatever the addresses say.
    add(&flows, flow(10, vec![in_port(1)], vec![out(3)]));

    let frames: Vec<_> = (0..5).map(|i| udp(0xb, 0xa, 1000 + i, i as u8)).collect();
    queue(&mut atx, &frames);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut crx), frames);
    assert!(drain(&mut brx).is_empty());
    assert_eq!(
        counts(&mut sc, &flows, 10),
        (5, 300),
        "exact packets and bytes"
    );

    // No flow for b's frames (and no table-miss flow): dropped, counted.
    queue(&mut btx, &[udp(0xa, 0xb, 7, 9)]);
    sw.forward(&b, 0, &mut sc);
    assert!(drain(&mut crx).is_empty());
    let s = b.counters.snapshot("b");
    assert_eq!((s.drop_no_dest, s.tx_packets), (1, 0));
    assert_eq!(a.counters.snapshot("a").tx_packets, 5);
}

#[test]
fn a_flow_mod_takes_effect_for_the_next_batch() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    add(&flows, flow(10, vec![in_port(1)], vec![out(2)]));
    queue(&mut atx, &[udp(0xb, 0xa, 1, 1)]);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx).len(), 1);

    // The same flow, now to c: the cached verdict is not used again.
    let mut m = flow(10, vec![in_port(1)], vec![out(3)]);
    m.command = FlowModCommand::ModifyStrict;
    add(&flows, m);
    queue(&mut atx, &[udp(0xb, 0xa, 1, 2)]);
    sw.forward(&a, 0, &mut sc);
    assert!(drain(&mut brx).is_empty());
    assert_eq!(drain(&mut crx), vec![udp(0xb, 0xa, 1, 2)]);
    assert_eq!(counts(&mut sc, &flows, 10), (2, 120));
}

#[test]
fn in_port_flood_all_and_an_output_to_the_input_by_number() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, mut arx) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    add(&flows, flow(10, udp_src(1), vec![out(OFPP_IN_PORT)]));
    add(&flows, flow(11, udp_src(2), vec![out(OFPP_FLOOD)]));
    add(&flows, flow(12, udp_src(3), vec![out(OFPP_ALL)]));
    // To port 1 by number, from port 1: dropped (OpenFlow's rule).
    add(&flows, flow(13, udp_src(4), vec![out(1)]));
    let fr = [
        udp(0xb, 0xa, 1, 1),
        udp(0xb, 0xa, 2, 2),
        udp(0xb, 0xa, 3, 3),
        udp(0xb, 0xa, 4, 4),
    ];
    queue(&mut atx, &fr);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut arx), vec![fr[0].clone()], "IN_PORT sends back");
    assert_eq!(drain(&mut brx), vec![fr[1].clone(), fr[2].clone()]);
    assert_eq!(drain(&mut crx), vec![fr[1].clone(), fr[2].clone()]);
    let s = a.counters.snapshot("a");
    assert_eq!((s.tx_packets, s.drop_no_dest), (3, 1));
    assert_eq!(
        counts(&mut sc, &flows, 13),
        (1, 60),
        "counted on its flow all the same"
    );
}

#[test]
fn outputs_get_their_own_edits_in_order() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    // b gets the frame as it came; c gets it tagged 10 with priority 3,
    // a new destination address and DSCP 46, then b again with the tag.
    add(
        &flows,
        flow(
            10,
            vec![in_port(1), Oxm::exact(Field::EthType, 0x0800)],
            vec![
                out(2),
                Action::PushVlan(0x8100),
                Action::SetField(Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 10))),
                Action::SetField(Oxm::exact(Field::VlanPcp, 3)),
                Action::SetField(Oxm::exact(
                    Field::EthDst,
                    u128::from_be_bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0xc]),
                )),
                Action::SetField(Oxm::exact(Field::IpDscp, 46)),
                out(3),
                out(2),
            ],
        ),
    );
    let f = udp(0xb, 0xa, 1, 1);
    queue(&mut atx, &[f.clone(), udp(0xb, 0xa, 1, 2)]);
    sw.forward(&a, 0, &mut sc);

    let mut edited = f.clone();
    edited[..6].copy_from_slice(&mac(0xc));
    edited[15] = 46 << 2;
    let sum = ipv4_sum(&edited[14..34]);
    edited[24..26].copy_from_slice(&sum.to_be_bytes());
    let edited = tagged(&edited, 0x600a);
    let got_c = drain(&mut crx);
    assert_eq!(got_c.len(), 2);
    assert_eq!(got_c[0], edited, "tag, address and DSCP, checksum fixed");
    let got_b = drain(&mut brx);
    assert_eq!(got_b.len(), 4, "twice each: plain, then tagged");
    assert_eq!(got_b[0], f);
    assert_eq!(got_b[1], edited);
    assert_eq!(counts(&mut sc, &flows, 10), (2, 120));
}

#[test]
fn normal_is_the_learning_bridge_with_its_vlans() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, mut arx) = ring_vlan(&sw, "a", "access:10".parse().unwrap());
    let (b, mut btx, mut brx) = ring_vlan(&sw, "b", "access:10".parse().unwrap());
    let (_c, _, mut crx) = ring_vlan(&sw, "c", "access:20".parse().unwrap());
    let (_t, _, mut trx) = ring_vlan(&sw, "t", "trunk:10,20".parse().unwrap());
    add(&flows, flow(0, vec![], vec![out(OFPP_NORMAL)]));

    // A broadcast floods VLAN 10: b untagged, t tagged, not c.
    let bc = udp(BCAST, 0xa, 1, 1);
    queue(&mut atx, std::slice::from_ref(&bc));
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx), vec![bc.clone()]);
    assert_eq!(drain(&mut trx), vec![tagged(&bc, 10)]);
    assert!(drain(&mut crx).is_empty());

    // b answers a, learned: to a only.
    queue(&mut btx, &[udp(0xa, 0xb, 1, 2)]);
    sw.forward(&b, 0, &mut sc);
    assert_eq!(drain(&mut arx), vec![udp(0xa, 0xb, 1, 2)]);
    assert!(drain(&mut trx).is_empty());
    assert_eq!(counts(&mut sc, &flows, 0), (2, 120));
}

#[test]
fn the_controller_gets_frames_cut_to_max_len() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    // Table miss: to the controller, 20 bytes.
    add(
        &flows,
        flow(
            0,
            vec![],
            vec![Action::Output {
                port: OFPP_CONTROLLER,
                max_len: 20,
            }],
        ),
    );
    let fr = [udp(0xb, 0xa, 1, 1), udp(0xb, 0xa, 2, 2)];
    queue(&mut atx, &fr);
    sw.forward(&a, 0, &mut sc);
    assert!(drain(&mut brx).is_empty());
    let mut got = Vec::new();
    flows.take_packet_ins(16, |p| {
        got.push((p.in_port, p.reason, p.total_len, p.data.clone()))
    });
    assert_eq!(
        got,
        vec![
            (1, 0, 60, fr[0][..20].to_vec()),
            (1, 0, 60, fr[1][..20].to_vec())
        ],
        "table-miss flows send with reason NO_MATCH"
    );
    assert_eq!(a.counters.snapshot("a").tx_packets, 2);
}

#[test]
fn queues_get_edited_frames_and_tso_segments_each_edited() {
    let (sw, flows, mut sc) = switch();
    let all = Caps {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: false,
        uso4: false,
        uso6: false,
    };
    let (vm, vwire) = dev(&sw, "vm", all, 4096);
    let (_tap, twire) = dev(&sw, "tap", all, 4096);
    let (_r, _, mut rrx) = ring(&sw, "r");
    add(
        &flows,
        flow(
            10,
            vec![in_port(1)],
            vec![
                Action::PushVlan(0x8100),
                Action::SetField(Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 7))),
                out(OFPP_ALL),
            ],
        ),
    );
    let (h, f) = tso_frame();
    vwire.lock().unwrap().rx.push_back((h, f.clone()));
    sw.forward(&vm, 0, &mut sc);

    let t = twire.lock().unwrap();
    assert_eq!(t.sent.len(), 1, "the TAP takes the TSO frame whole");
    assert_eq!(t.sent[0].1, tagged(&f, 7));
    assert_eq!(
        (t.sent[0].0.csum_start, t.sent[0].0.hdr_len),
        (h.csum_start + 4, h.hdr_len + 4),
        "its offsets moved with the tag"
    );
    drop(t);
    let segs = drain(&mut rrx);
    assert_eq!(segs.len(), 3, "segmented for the ring");
    assert!(segs.iter().all(|s| s[12..16] == [0x81, 0x00, 0x00, 0x07]));
    assert_eq!(counts(&mut sc, &flows, 10).0, 1, "one frame on the flow");

    // A ring's frame into the TAP, popped back.
    let (r2, mut r2tx, _) = ring(&sw, "r2");
    add(
        &flows,
        flow(11, vec![in_port(4)], vec![Action::PopVlan, out(2)]),
    );
    let plain = udp(0xb, 0xa, 1, 1);
    queue(&mut r2tx, &[tagged(&plain, 9)]);
    sw.forward(&r2, 0, &mut sc);
    let t = twire.lock().unwrap();
    assert_eq!(t.sent.len(), 2);
    assert_eq!(t.sent[1], (OffloadHdr::default(), plain));
}

#[test]
fn standalone_without_a_controller_is_the_learning_bridge() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    // No flows: secure mode drops.
    queue(&mut atx, &[udp(BCAST, 0xa, 1, 1)]);
    sw.forward(&a, 0, &mut sc);
    assert!(drain(&mut brx).is_empty());
    flows.set_fail_mode(FailMode::Standalone);
    queue(&mut atx, &[udp(BCAST, 0xa, 1, 2)]);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx), vec![udp(BCAST, 0xa, 1, 2)]);
    // A controller connects: the tables decide again.
    flows.set_connected(true);
    queue(&mut atx, &[udp(BCAST, 0xa, 1, 3)]);
    sw.forward(&a, 0, &mut sc);
    assert!(drain(&mut brx).is_empty());
}

#[test]
fn two_switches_share_a_workers_cache_without_mixing_verdicts() {
    let (sw1, f1, mut sc) = switch();
    let (sw2, f2, _) = switch();
    let (a1, mut a1tx, _) = ring(&sw1, "a1");
    let (_b1, _, mut b1rx) = ring(&sw1, "b1");
    let (a2, mut a2tx, _) = ring(&sw2, "a2");
    let (_b2, _, mut b2rx) = ring(&sw2, "b2");
    // The same match on both, different actions: sw1 forwards, sw2 drops.
    add(&f1, flow(10, vec![in_port(1)], vec![out(2)]));
    add(&f2, flow(10, vec![in_port(1)], vec![]));
    for i in 0..3 {
        queue(&mut a1tx, &[udp(0xb, 0xa, 1, i)]);
        sw1.forward(&a1, 0, &mut sc);
        queue(&mut a2tx, &[udp(0xb, 0xa, 1, i)]);
        sw2.forward(&a2, 0, &mut sc);
    }
    assert_eq!(drain(&mut b1rx).len(), 3);
    assert!(drain(&mut b2rx).is_empty());
    assert_eq!(
        (counts(&mut sc, &f1, 10).0, counts(&mut sc, &f2, 10).0),
        (3, 3)
    );
}

/// Two switches filling one worker's cache in turn: a verdict's action
/// class stays its own, so two flows of one switch with different
/// actions never share a class (and one frame's outputs) in a batch,
/// whatever the other switch filled between them.
#[test]
fn a_shared_cache_never_gives_two_actions_one_class() {
    let (sw1, f1, mut sc) = switch();
    let (sw2, f2, _) = switch();
    let (a1, mut a1tx, _) = ring(&sw1, "a1");
    let (_b1, _, mut b1rx) = ring(&sw1, "b1");
    let (a2, mut a2tx, _) = ring(&sw2, "a2");
    let (_b2, _, _) = ring(&sw2, "b2");
    // On sw1, UDP port 1 goes to b1, port 2 nowhere; sw2 sends all to b2.
    add(&f1, flow(10, udp_src(1), vec![out(2)]));
    add(&f1, flow(10, udp_src(2), vec![]));
    add(&f2, flow(10, vec![in_port(1)], vec![out(2)]));
    // The two sw1 flows' entries are filled with a fill of sw2's between.
    queue(&mut a1tx, &[udp(0xb, 0xa, 1, 0)]);
    sw1.forward(&a1, 0, &mut sc);
    queue(&mut a2tx, &[udp(0xb, 0xa, 9, 1)]);
    sw2.forward(&a2, 0, &mut sc);
    queue(&mut a1tx, &[udp(0xb, 0xa, 2, 2)]);
    sw1.forward(&a1, 0, &mut sc);
    assert_eq!(drain(&mut b1rx).len(), 1);
    // Both in one batch: only the first reaches b1.
    let f = [udp(0xb, 0xa, 1, 3), udp(0xb, 0xa, 2, 4)];
    queue(&mut a1tx, &f);
    sw1.forward(&a1, 0, &mut sc);
    assert_eq!(drain(&mut b1rx), vec![f[0].clone()]);
}

/// A worker keeps the port a verdict's actions resolved to from batch to
/// batch: it is not carried to a batch from another source (IN_PORT is
/// each source's own) nor past a change of the ports (an output's number
/// that moved to another port).
#[test]
fn a_resolution_kept_between_batches_holds_only_for_its_source_and_ports() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, mut arx) = ring(&sw, "a");
    let (b, mut btx, mut brx) = ring(&sw, "b");
    add(&flows, flow(10, udp_src(1), vec![out(OFPP_IN_PORT)]));
    add(&flows, flow(10, udp_src(2), vec![out(2)]));
    for _ in 0..2 {
        queue(&mut atx, &[udp(0xb, 0xa, 1, 0)]);
        sw.forward(&a, 0, &mut sc);
        queue(&mut btx, &[udp(0xa, 0xb, 1, 1)]);
        sw.forward(&b, 0, &mut sc);
        assert_eq!(drain(&mut arx).len(), 1, "a's frame back to a");
        assert_eq!(drain(&mut brx).len(), 1, "b's frame back to b");
    }
    // Number 2 moves from b to c (as it follows a migrating guest).
    queue(&mut atx, &[udp(0xb, 0xa, 2, 2)]);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx).len(), 1);
    let (c, _, mut crx) = ring(&sw, "c");
    sw.want_number(c.index, 2);
    sw.set_running(b.index, false);
    sw.set_running(c.index, true);
    queue(&mut atx, &[udp(0xb, 0xa, 2, 3)]);
    sw.forward(&a, 0, &mut sc);
    assert!(drain(&mut brx).is_empty(), "b has another number now");
    assert_eq!(drain(&mut crx).len(), 1, "c has number 2");
}

#[test]
fn taking_the_flows_away_gives_back_the_learning_bridge() {
    let (sw, _flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    sw.set_flows(None);
    queue(&mut atx, &[udp(BCAST, 0xa, 1, 1)]);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx).len(), 1);
}

#[test]
fn a_packet_out_goes_where_its_actions_say_and_through_the_tables() {
    let (sw, flows, mut sc) = switch();
    let (_a, _, mut arx) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    // Frames the tables see go to c.
    add(&flows, flow(5, vec![], vec![out(3)]));
    let f = udp(0xb, 0xa, 1, 1);
    let verdict = |in_port: u32, actions: Vec<Action>| {
        let mut v = ringswitch_flow::Verdict::new();
        let key = ringswitch_flow::FlowKey::extract(&f, in_port);
        flows.read().packet_out(&key, &actions, &mut v).unwrap();
        v
    };
    let mut ctl = Scratch::default();

    // From the controller, to b.
    let v = verdict(OFPP_CONTROLLER, vec![out(2)]);
    sw.packet_out(OFPP_CONTROLLER, &f, &v, &mut ctl).unwrap();
    assert_eq!(drain(&mut brx), vec![f.clone()]);

    // Through the tables, tagged first: c gets it tagged, counted on the
    // flow.
    let v = verdict(
        OFPP_CONTROLLER,
        vec![
            Action::PushVlan(0x8100),
            Action::SetField(Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 5))),
            out(OFPP_TABLE),
        ],
    );
    sw.packet_out(OFPP_CONTROLLER, &f, &v, &mut ctl).unwrap();
    assert_eq!(drain(&mut crx), vec![tagged(&f, 5)]);
    assert_eq!(counts(&mut sc, &flows, 5), (1, 60));

    // IN_PORT from the controller goes nowhere; FLOOD from port 1 goes to
    // every port but a.
    let v = verdict(OFPP_CONTROLLER, vec![out(OFPP_IN_PORT)]);
    sw.packet_out(OFPP_CONTROLLER, &f, &v, &mut ctl).unwrap();
    let v = verdict(1, vec![out(OFPP_FLOOD)]);
    sw.packet_out(1, &f, &v, &mut ctl).unwrap();
    assert!(drain(&mut arx).is_empty());
    assert_eq!(drain(&mut brx), vec![f.clone()]);
    assert_eq!(drain(&mut crx), vec![f.clone()]);

    // A group that does not exist is refused; a runt frame too.
    let key = ringswitch_flow::FlowKey::extract(&f, OFPP_CONTROLLER);
    let mut v = ringswitch_flow::Verdict::new();
    assert!(flows
        .read()
        .packet_out(&key, &[Action::Group(9)], &mut v)
        .is_err());
    assert!(sw
        .packet_out(OFPP_CONTROLLER, &f[..10], &v, &mut ctl)
        .is_err());
}

#[test]
fn groups_all_copy_and_select_spreads_by_five_tuple() {
    use ringswitch_openflow::message::{GroupCommand, GroupMod, GroupType};
    use ringswitch_openflow::Bucket;
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    let bucket = |weight, port| Bucket {
        weight,
        watch_port: OFPP_ANY,
        watch_group: OFPG_ANY,
        actions: vec![out(port)],
    };
    let group = |id, group_type, buckets| GroupMod {
        command: GroupCommand::Add,
        group_type,
        group_id: id,
        buckets,
    };
    flows
        .modify(|t| {
            t.group_mod(
                &group(1, GroupType::All, vec![bucket(0, 2), bucket(0, 3)]),
                Duration::ZERO,
            )?;
            t.group_mod(
                &group(2, GroupType::Select, vec![bucket(1, 2), bucket(1, 3)]),
                Duration::ZERO,
            )
        })
        .unwrap();
    add(&flows, flow(10, udp_src(1), vec![Action::Group(1)]));
    add(&flows, flow(5, vec![in_port(1)], vec![Action::Group(2)]));

    // ALL: both get a copy.
    queue(&mut atx, &[udp(0xb, 0xa, 1, 1)]);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx).len(), 1);
    assert_eq!(drain(&mut crx).len(), 1);

    // SELECT: each 5-tuple one bucket, always the same; both used.
    let frames: Vec<_> = (0..64u16)
        .map(|i| udp(0xb, 0xa, 100 + i, i as u8))
        .collect();
    queue(&mut atx, &frames);
    sw.forward(&a, 0, &mut sc);
    let (b1, c1) = (drain(&mut brx), drain(&mut crx));
    assert_eq!(b1.len() + c1.len(), 64, "each frame once");
    assert!(!b1.is_empty() && !c1.is_empty(), "both buckets used");
    queue(&mut atx, &frames);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(
        (drain(&mut brx), drain(&mut crx)),
        (b1, c1),
        "the same choice"
    );
}

/// A long frame's key is read from its first cache line when it lies
/// there, and from further on when it does not: the UDP ports behind 40
/// bytes of IPv4 options sit past byte 64, and a flow on them must still
/// decide; so must one on the ports of a plain frame of the same length.
/// Frames of both kinds in one batch go each where its own flow says.
#[test]
fn long_frames_keyed_past_the_first_line_and_within_it() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    add(&flows, flow(20, udp_src(4000), vec![out(2)]));
    add(&flows, flow(10, udp_src(5000), vec![out(3)]));
    // A plain frame, 1000 bytes.
    let mut plain = udp(0xb, 0xa, 4000, 1);
    plain.resize(1000, 0x5a);
    // The same with 40 bytes of options (IHL 15): its ports at 74..78.
    let mut opts = plain[..34].to_vec();
    opts[14] = 0x4f;
    opts.extend_from_slice(&[1u8; 40]);
    opts.extend_from_slice(&5000u16.to_be_bytes());
    opts.extend_from_slice(&plain[36..]);
    opts.truncate(1000);
    let batch = vec![plain.clone(), opts.clone(), plain.clone(), opts.clone()];
    queue(&mut atx, &batch);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(drain(&mut brx), vec![plain.clone(), plain]);
    assert_eq!(drain(&mut crx), vec![opts.clone(), opts]);
    assert_eq!(counts(&mut sc, &flows, 20), (2, 2000));
    assert_eq!(counts(&mut sc, &flows, 10), (2, 2000));
}

/// A batch whose frames have one output each but for one with two and one
/// with none (the engine keeps a frame-to-entry table only once a batch
/// needs it): every destination still gets its frames once, in order.
#[test]
fn one_output_per_frame_then_two_then_none_in_one_batch() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let (_b, _, mut brx) = ring(&sw, "b");
    let (_c, _, mut crx) = ring(&sw, "c");
    add(&flows, flow(10, udp_src(1), vec![out(2)]));
    add(&flows, flow(10, udp_src(2), vec![out(2), out(3)]));
    add(&flows, flow(10, udp_src(4), vec![out(3)]));
    // Port 3: no flow, dropped.
    let f: Vec<_> = [1u16, 1, 2, 1, 3, 1, 4, 1]
        .iter()
        .enumerate()
        .map(|(i, &p)| udp(0xb, 0xa, p, i as u8))
        .collect();
    queue(&mut atx, &f);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(
        drain(&mut brx),
        vec![
            f[0].clone(),
            f[1].clone(),
            f[2].clone(),
            f[3].clone(),
            f[5].clone(),
            f[7].clone()
        ]
    );
    assert_eq!(drain(&mut crx), vec![f[2].clone(), f[6].clone()]);
    assert_eq!(a.counters.snapshot("a").drop_no_dest, 1);
}

/// Frames for destinations (an index into the test's receive rings).
type Deliveries = Vec<(usize, Vec<u8>)>;

/// Frames of many kinds in batches of many sizes, each batch a mix of
/// verdicts of one output to one port (filed straight under the port)
/// and of any other (FLOOD, two outputs, an output to the input port by
/// number, an edit, no flow), of keys with a compact form (IPv4) and
/// without (tagged, ARP, IPv6): every destination gets what the flows
/// say in order, and every flow's counters are exact, through flow mods
/// between batches that change a one-port verdict into a two-output one
/// and back, and delete a flow.
#[test]
fn one_port_verdicts_and_the_rest_mixed_in_batches() {
    let (sw, flows, mut sc) = switch();
    let (a, mut atx, _) = ring(&sw, "a");
    let mut rxs: Vec<_> = ["b", "c", "d"].iter().map(|n| ring(&sw, n).2).collect();
    let udp_prio = |p: u16| 10 + p;
    // UDP source port p: 1 to b; 2 to b and c; 3 FLOOD; 4 to the input
    // port by number (dropped); 5 to d with a new DSCP; 6 no flow.
    add(&flows, flow(udp_prio(1), udp_src(1), vec![out(2)]));
    add(&flows, flow(udp_prio(2), udp_src(2), vec![out(2), out(3)]));
    add(
        &flows,
        flow(
            udp_prio(3),
            udp_src(3),
            vec![Action::Output {
                port: OFPP_FLOOD,
                max_len: 0,
            }],
        ),
    );
    add(&flows, flow(udp_prio(4), udp_src(4), vec![out(1)]));
    add(
        &flows,
        flow(
            udp_prio(5),
            udp_src(5),
            vec![Action::SetField(Oxm::exact(Field::IpDscp, 46)), out(4)],
        ),
    );
    // Keys without a compact form: tagged frames to c, ARP to d, IPv6 to b.
    let vid5 = || Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 5));
    add(&flows, flow(30, vec![vid5()], vec![out(3)]));
    add(
        &flows,
        flow(31, vec![Oxm::exact(Field::EthType, 0x0806)], vec![out(4)]),
    );
    add(
        &flows,
        flow(32, vec![Oxm::exact(Field::EthType, 0x86dd)], vec![out(2)]),
    );
    let arp = |m: u8| {
        let mut f = [
            mac(BCAST).as_slice(),
            &mac(0xa),
            &[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1],
        ]
        .concat();
        f.resize(60, m);
        f
    };
    let ipv6 = |m: u8| {
        let mut f = [
            mac(0xb).as_slice(),
            &mac(0xa),
            &[0x86, 0xdd, 0x60, 0, 0, 0, 0, 8, 17, 64],
        ]
        .concat();
        f.resize(62, 0);
        f.extend_from_slice(&[0, 7, 0, 9, 0, 8, 0, 0, m]);
        f.resize(80, m);
        f
    };
    let dscp46 = |f: &[u8]| {
        let mut e = f.to_vec();
        e[15] = 46 << 2;
        let sum = ipv4_sum(&e[14..34]);
        e[24..26].copy_from_slice(&sum.to_be_bytes());
        e
    };

    let mut want_rx: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let mut want_counts = std::collections::HashMap::<u16, (u64, u64)>::new();
    let mut no_dest = 0u64;
    // Port 1 changes to two outputs in phase 1, back to b in phase 2;
    // port 2's flow is deleted in phase 2.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for phase in 0..3 {
        if phase == 1 {
            let mut m = flow(udp_prio(1), udp_src(1), vec![out(2), out(4)]);
            m.command = FlowModCommand::ModifyStrict;
            add(&flows, m);
        }
        if phase == 2 {
            let mut m = flow(udp_prio(1), udp_src(1), vec![out(2)]);
            m.command = FlowModCommand::ModifyStrict;
            add(&flows, m);
            let p2 = udp_prio(2);
            assert_eq!(counts(&mut sc, &flows, p2), want_counts[&p2]);
            want_counts.remove(&p2);
            let mut d = flow(p2, udp_src(2), vec![]);
            d.command = FlowModCommand::DeleteStrict;
            add(&flows, d);
        }
        for _ in 0..20 {
            let n = 1 + rnd(60) as usize;
            let mut batch = Vec::new();
            for i in 0..n {
                let mark = i as u8;
                let kind = rnd(10);
                // Runs of one flow's frames, as traffic has.
                let run = 1 + rnd(3);
                for _ in 0..run {
                    let (f, prio, to): (Vec<u8>, Option<u16>, Deliveries) = match kind {
                        0..=5 => {
                            let p = 1 + (kind % 6) as u16;
                            let f = udp(0xb, 0xa, p, mark);
                            let to = match (p, phase) {
                                (1, 1) => vec![(0, f.clone()), (2, f.clone())],
                                (1, _) => vec![(0, f.clone())],
                                (2, 2) => vec![],
                                (2, _) => vec![(0, f.clone()), (1, f.clone())],
                                (3, _) => vec![(0, f.clone()), (1, f.clone()), (2, f.clone())],
                                (4, _) => vec![],
                                (5, _) => vec![(2, dscp46(&f))],
                                _ => vec![],
                            };
                            let prio = match (p, phase) {
                                (2, 2) | (6, _) => None,
                                _ => Some(udp_prio(p)),
                            };
                            (f, prio, to)
                        }
                        6 | 7 => {
                            let f = tagged(&udp(0xb, 0xa, 1, mark), 5);
                            (f.clone(), Some(30), vec![(1, f)])
                        }
                        8 => {
                            let f = arp(mark);
                            (f.clone(), Some(31), vec![(2, f)])
                        }
                        _ => {
                            let f = ipv6(mark);
                            (f.clone(), Some(32), vec![(0, f)])
                        }
                    };
                    if let Some(p) = prio {
                        let c = want_counts.entry(p).or_default();
                        c.0 += 1;
                        c.1 += f.len() as u64;
                    }
                    if to.is_empty() {
                        no_dest += 1;
                    }
                    for (d, g) in to {
                        want_rx[d].push(g);
                    }
                    batch.push(f);
                }
            }
            queue(&mut atx, &batch);
            sw.forward(&a, 0, &mut sc);
            atx.refresh_tail();
            for (d, rx) in rxs.iter_mut().enumerate() {
                assert_eq!(
                    drain(rx),
                    std::mem::take(&mut want_rx[d]),
                    "port {d}, phase {phase}"
                );
            }
        }
    }
    for (&p, &c) in &want_counts {
        assert_eq!(counts(&mut sc, &flows, p), c, "flow {p}");
    }
    assert_eq!(a.counters.snapshot("a").drop_no_dest, no_dest);
}
