//! Pipeline and table semantics: goto, metadata, apply vs write vs clear,
//! table-miss, groups, timeouts, counters, modify/delete filters, overlap,
//! the errors.

mod common;

use common::*;
use ringswitch_flow::{Config, Edit, FlowError, FlowKey, FlowTables, Target, Verdict};
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{FlowModCommand, GroupCommand, GroupMod, GroupType};
use ringswitch_openflow::multipart::FlowStatsRequest;
use ringswitch_openflow::oxm::{mac_value, OFPVID_PRESENT};
use ringswitch_openflow::{Action, Bucket, ErrorCode, Field, Instruction, Match, Oxm};

fn tables() -> FlowTables {
    FlowTables::new(Config::default())
}

fn verdict(t: &FlowTables, frame: &[u8], in_port: u32) -> Verdict {
    let mut v = Verdict::new();
    t.classify(&FlowKey::extract(frame, in_port), &mut v);
    v
}

fn targets(v: &Verdict) -> Vec<Target> {
    v.outputs().iter().map(|o| o.target).collect()
}

fn set(f: Field, v: u128) -> Action {
    Action::SetField(Oxm::exact(f, v))
}

fn group(
    command: GroupCommand,
    group_type: GroupType,
    group_id: u32,
    buckets: Vec<(u16, Vec<Action>)>,
) -> GroupMod {
    GroupMod {
        command,
        group_type,
        group_id,
        buckets: buckets
            .into_iter()
            .map(|(weight, actions)| Bucket {
                weight,
                watch_port: OFPP_ANY,
                watch_group: OFPG_ANY,
                actions,
            })
            .collect(),
    }
}

fn stats_req(table_id: u8, r#match: Match) -> FlowStatsRequest {
    FlowStatsRequest {
        table_id,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        cookie: 0,
        cookie_mask: 0,
        r#match,
    }
}

#[test]
fn no_flow_drops() {
    let t = tables();
    let v = verdict(&t, &udp4(1, 2, 3, 4), 1);
    assert!(v.is_drop());
    assert_eq!(
        t.table_stats()[0].lookup_count,
        0,
        "classify does not count; count does"
    );
    v.count(1, 60);
    let s = t.table_stats();
    assert_eq!((s[0].lookup_count, s[0].matched_count), (1, 0));
    assert_eq!(s.len(), 8);
}

#[test]
fn goto_and_metadata() {
    let mut t = tables();
    let in1 = m(vec![Oxm::exact(Field::InPort, 1)]);
    t.flow_mod(
        &add(
            0,
            5,
            in1,
            vec![
                Instruction::WriteMetadata {
                    metadata: 0xab,
                    mask: 0xff,
                },
                Instruction::GotoTable(3),
            ],
        ),
        T0,
    )
    .unwrap();
    let md = m(vec![Oxm::masked(Field::Metadata, 0xab, 0xff)]);
    t.flow_mod(&add(3, 5, md, vec![apply(vec![out(7)])]), T0)
        .unwrap();
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![Target::Port(7)]
    );
    // In port 2: table 0 misses (no table-miss flow): drop.
    assert!(verdict(&t, &udp4(1, 2, 3, 4), 2).is_drop());

    // goto must go forward, to an existing table.
    for (from, to) in [(3u8, 3u8), (3, 1), (0, 8)] {
        let e = t
            .flow_mod(
                &add(from, 1, Match::any(), vec![Instruction::GotoTable(to)]),
                T0,
            )
            .unwrap_err();
        assert_eq!(e, FlowError::BadGotoTable { from, to });
        assert_eq!(e.code(), ErrorCode::BAD_INSTRUCTION_BAD_TABLE_ID);
    }
}

#[test]
fn apply_write_and_the_action_set() {
    let mut t = tables();
    let a = mac_value(MAC_A);
    let b = [0x02, 0, 0, 0, 0, 0x99];
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![
                Instruction::WriteActions(vec![set(Field::EthDst, mac_value(b)), out(3)]),
                apply(vec![set(Field::EthDst, a), out(2)]),
                Instruction::GotoTable(1),
            ],
        ),
        T0,
    )
    .unwrap();
    t.flow_mod(&add(1, 1, Match::any(), vec![apply(vec![out(4)])]), T0)
        .unwrap();
    let frame = udp4(1, 2, 3, 4);
    let v = verdict(&t, &frame, 1);
    assert_eq!(
        targets(&v),
        vec![Target::Port(2), Target::Port(4), Target::Port(3)]
    );
    let o = v.outputs();
    assert_eq!(
        v.edits(&o[0]).collect::<Vec<_>>(),
        vec![Edit::EthDst(MAC_A)]
    );
    assert_eq!(
        v.edits(&o[1]).collect::<Vec<_>>(),
        vec![Edit::EthDst(MAC_A)]
    );
    assert_eq!(
        v.edits(&o[2]).collect::<Vec<_>>(),
        vec![Edit::EthDst(MAC_A), Edit::EthDst(b)]
    );
    let mut buf = [0u8; 128];
    let n = v.apply(&o[2], &frame, &mut buf).unwrap();
    assert_eq!(&buf[..6], &b);
    assert_eq!(&buf[6..n], &frame[6..]);
}

#[test]
fn action_set_order_pop_push_set_then_group_over_output() {
    let mut t = tables();
    t.group_mod(
        &group(
            GroupCommand::Add,
            GroupType::All,
            1,
            vec![(0, vec![out(5)])],
        ),
        T0,
    )
    .unwrap();
    // Written in the "wrong" order: the set runs pop, push, set-field, group; the output is ignored.
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![Instruction::WriteActions(vec![
                out(9),
                set(Field::VlanVid, u128::from(OFPVID_PRESENT | 20)),
                Action::PushVlan(0x8100),
                Action::PopVlan,
                Action::Group(1),
            ])],
        ),
        T0,
    )
    .unwrap();
    let v = verdict(&t, &eth(MAC_B, MAC_A, Some((10, 3)), 0x0800, &[0; 30]), 1);
    assert_eq!(targets(&v), vec![Target::Port(5)]);
    assert_eq!(
        v.edits(&v.outputs()[0]).collect::<Vec<_>>(),
        vec![Edit::PopVlan, Edit::PushVlan(0x8100), Edit::VlanVid(20)]
    );
}

#[test]
fn clear_actions_empties_the_set() {
    let mut t = tables();
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![
                Instruction::WriteActions(vec![out(3)]),
                Instruction::GotoTable(1),
            ],
        ),
        T0,
    )
    .unwrap();
    t.flow_mod(
        &add(1, 1, Match::any(), vec![Instruction::ClearActions]),
        T0,
    )
    .unwrap();
    assert!(verdict(&t, &udp4(1, 2, 3, 4), 1).is_drop());
    // Without clear, the written output happens at the end.
    t.flow_mod(&add(1, 1, Match::any(), vec![]), T0).unwrap();
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![Target::Port(3)]
    );
    // A miss in a later table (no table-miss flow) drops the set too.
    t.flow_mod(
        &add(1, 1, Match::any(), vec![Instruction::GotoTable(2)]),
        T0,
    )
    .unwrap();
    assert!(verdict(&t, &udp4(1, 2, 3, 4), 1).is_drop());
}

#[test]
fn table_miss_to_controller_and_reasons() {
    let mut t = tables();
    let mut miss = add(
        0,
        0,
        Match::any(),
        vec![apply(vec![Action::Output {
            port: OFPP_CONTROLLER,
            max_len: 128,
        }])],
    );
    miss.cookie = 0x77;
    t.flow_mod(&miss, T0).unwrap();
    let mut hit = add(
        0,
        10,
        m(ip_udp()),
        vec![apply(vec![Action::Output {
            port: OFPP_CONTROLLER,
            max_len: 0xffff,
        }])],
    );
    hit.cookie = 0x88;
    t.flow_mod(&hit, T0).unwrap();
    let arp = eth(
        [0xff; 6],
        MAC_A,
        None,
        0x0806,
        &common::arp(1, MAC_A, [1, 1, 1, 1], [0; 6], [1, 1, 1, 2]),
    );
    assert_eq!(
        targets(&verdict(&t, &arp, 1)),
        vec![Target::Controller {
            max_len: 128,
            reason: OFPR_NO_MATCH,
            table_id: 0,
            cookie: 0x77,
            metadata: 0
        }]
    );
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![Target::Controller {
            max_len: 0xffff,
            reason: OFPR_ACTION,
            table_id: 0,
            cookie: 0x88,
            metadata: 0
        }]
    );
}

#[test]
fn reserved_ports_and_the_input_port() {
    let mut t = tables();
    let ports = [
        3,
        OFPP_IN_PORT,
        OFPP_FLOOD,
        OFPP_ALL,
        OFPP_NORMAL,
        OFPP_LOCAL,
    ];
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![apply(ports.iter().map(|&p| out(p)).collect())],
        ),
        T0,
    )
    .unwrap();
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![
            Target::Port(3),
            Target::InPort,
            Target::Flood,
            Target::All,
            Target::Normal,
            Target::Local
        ]
    );
    // An output to the input port by number is not sent.
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 3)),
        vec![
            Target::InPort,
            Target::Flood,
            Target::All,
            Target::Normal,
            Target::Local
        ]
    );
    for bad in [0, OFPP_ANY, OFPP_TABLE, OFPP_MAX + 1] {
        let e = t
            .flow_mod(&add(0, 1, Match::any(), vec![apply(vec![out(bad)])]), T0)
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::BAD_ACTION_BAD_OUT_PORT, "{bad:#x}");
    }
}

#[test]
fn apply_edits_are_seen_by_later_tables() {
    let mut t = tables();
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![
                apply(vec![
                    Action::PushVlan(0x8100),
                    set(Field::VlanVid, u128::from(OFPVID_PRESENT | 30)),
                ]),
                Instruction::GotoTable(1),
            ],
        ),
        T0,
    )
    .unwrap();
    t.flow_mod(
        &add(
            1,
            5,
            m(vec![Oxm::exact(
                Field::VlanVid,
                u128::from(OFPVID_PRESENT | 30),
            )]),
            vec![apply(vec![out(6)])],
        ),
        T0,
    )
    .unwrap();
    let frame = udp4(1, 2, 3, 4);
    let v = verdict(&t, &frame, 1);
    assert_eq!(targets(&v), vec![Target::Port(6)]);
    let mut buf = [0u8; 128];
    let n = v.apply(&v.outputs()[0], &frame, &mut buf).unwrap();
    assert_eq!(n, frame.len() + 4);
    assert_eq!(&buf[12..16], &[0x81, 0x00, 0x00, 30]);
    assert_eq!(
        FlowKey::extract(&buf[..n], 1).get(Field::VlanVid),
        u128::from(OFPVID_PRESENT | 30)
    );
}

#[test]
fn dscp_edit_and_its_prerequisite() {
    let mut t = tables();
    let e = t
        .flow_mod(
            &add(
                0,
                1,
                Match::any(),
                vec![apply(vec![set(Field::IpDscp, 46)])],
            ),
            T0,
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::BAD_ACTION_MATCH_INCONSISTENT);
    t.flow_mod(
        &add(
            0,
            1,
            m(ip_udp()),
            vec![apply(vec![set(Field::IpDscp, 46), out(2)])],
        ),
        T0,
    )
    .unwrap();
    let frame = udp4(1, 2, 3, 4);
    let v = verdict(&t, &frame, 1);
    let mut buf = [0u8; 128];
    let n = v.apply(&v.outputs()[0], &frame, &mut buf).unwrap();
    let k = FlowKey::extract(&buf[..n], 1);
    assert_eq!(k.get(Field::IpDscp), 46);
    // The header checksum is right: the one's complement sum is 0xffff.
    let h = &buf[14..34];
    let sum = h
        .chunks(2)
        .fold(0u32, |s, c| s + u32::from(u16::from_be_bytes([c[0], c[1]])));
    assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
}

#[test]
fn unsupported_matches_actions_and_instructions_are_refused() {
    let mut t = tables();
    let cases: Vec<(Match, Vec<Instruction>, ErrorCode)> = vec![
        (
            m(vec![Oxm::exact(Field::TunnelId, 1)]),
            vec![],
            ErrorCode::BAD_MATCH_BAD_FIELD,
        ),
        (
            m(vec![
                Oxm::exact(Field::InPort, 1),
                Oxm::exact(Field::InPhyPort, 1),
            ]),
            vec![],
            ErrorCode::BAD_MATCH_BAD_FIELD,
        ),
        (
            Match::any(),
            vec![apply(vec![Action::SetQueue(1)])],
            ErrorCode::BAD_ACTION_BAD_TYPE,
        ),
        (
            Match::any(),
            vec![apply(vec![Action::DecNwTtl])],
            ErrorCode::BAD_ACTION_BAD_TYPE,
        ),
        (
            m(vec![Oxm::exact(Field::EthType, 0x0800)]),
            vec![apply(vec![set(Field::Ipv4Src, 1)])],
            ErrorCode::BAD_ACTION_BAD_SET_TYPE,
        ),
        (
            Match::any(),
            vec![Instruction::Meter(1)],
            ErrorCode::BAD_INSTRUCTION_UNSUP_INST,
        ),
        (
            Match::any(),
            vec![apply(vec![Action::Group(9)])],
            ErrorCode::BAD_ACTION_BAD_OUT_GROUP,
        ),
    ];
    for (mt, ins, code) in cases {
        let e = t
            .flow_mod(&add(0, 1, mt.clone(), ins.clone()), T0)
            .unwrap_err();
        assert_eq!(e.code(), code, "{mt:?} {ins:?}: {e}");
    }
    assert!(t.is_empty());
}

#[test]
fn bad_table_id_and_table_full() {
    let mut t = tables();
    for id in [8u8, 200, OFPTT_ALL] {
        let e = t
            .flow_mod(&add(id, 1, Match::any(), vec![]), T0)
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID);
    }
    let mut md = flow_mod(FlowModCommand::Modify, OFPTT_ALL, 1, Match::any(), vec![]);
    assert_eq!(
        t.flow_mod(&md, T0).unwrap_err().code(),
        ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID
    );
    md.table_id = 9;
    assert_eq!(
        t.flow_mod(&md, T0).unwrap_err().code(),
        ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID
    );

    t.set_max_flows(2, 2).unwrap();
    assert_eq!(t.set_max_flows(8, 2), Err(FlowError::BadTableId(8)));
    t.flow_mod(
        &add(2, 1, m(vec![Oxm::exact(Field::InPort, 1)]), vec![]),
        T0,
    )
    .unwrap();
    t.flow_mod(
        &add(2, 1, m(vec![Oxm::exact(Field::InPort, 2)]), vec![]),
        T0,
    )
    .unwrap();
    let e = t
        .flow_mod(
            &add(2, 1, m(vec![Oxm::exact(Field::InPort, 3)]), vec![]),
            T0,
        )
        .unwrap_err();
    assert_eq!(e, FlowError::TableFull(2));
    assert_eq!(e.code(), ErrorCode::FLOW_MOD_FAILED_TABLE_FULL);
    // Replacing a flow of the same match and priority is not growing.
    t.flow_mod(
        &add(
            2,
            1,
            m(vec![Oxm::exact(Field::InPort, 2)]),
            vec![apply(vec![out(4)])],
        ),
        T0,
    )
    .unwrap();
    assert_eq!(t.len(), 2);
    // Other tables keep their own bound.
    t.flow_mod(
        &add(3, 1, m(vec![Oxm::exact(Field::InPort, 3)]), vec![]),
        T0,
    )
    .unwrap();
}

#[test]
fn overlap_check() {
    let mut t = tables();
    t.flow_mod(
        &add(0, 10, m(vec![Oxm::exact(Field::EthType, 0x0800)]), vec![]),
        T0,
    )
    .unwrap();
    let mut fm = add(0, 10, m(ip_udp()), vec![]);
    fm.flags = OFPFF_CHECK_OVERLAP;
    let e = t.flow_mod(&fm, T0).unwrap_err();
    assert_eq!(e.code(), ErrorCode::FLOW_MOD_FAILED_OVERLAP);
    // Another priority, or a disjoint match, does not overlap.
    fm.priority = 11;
    t.flow_mod(&fm, T0).unwrap();
    let mut arp = add(0, 10, m(vec![Oxm::exact(Field::EthType, 0x0806)]), vec![]);
    arp.flags = OFPFF_CHECK_OVERLAP;
    t.flow_mod(&arp, T0).unwrap();
    // Without the flag, overlapping flows are fine.
    t.flow_mod(
        &add(0, 10, m(vec![Oxm::exact(Field::InPort, 1)]), vec![]),
        T0,
    )
    .unwrap();
    assert_eq!(t.len(), 4);
}

#[test]
fn counters_stats_and_versions() {
    let mut t = tables();
    let v0 = t.version();
    let mut fm = add(0, 10, m(ip_udp()), vec![apply(vec![out(2)])]);
    fm.cookie = 5;
    t.flow_mod(&fm, T0).unwrap();
    assert_ne!(t.version(), v0);
    let v = verdict(&t, &udp4(1, 2, 3, 4), 1);
    v.count(3, 180);
    verdict(&t, &udp4(1, 2, 3, 4), 1).count(1, 60);
    let stats = t
        .flow_stats(&stats_req(OFPTT_ALL, Match::any()), secs(5))
        .unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (
            stats[0].packet_count,
            stats[0].byte_count,
            stats[0].duration_sec
        ),
        (4, 240, 5)
    );
    assert_eq!(stats[0].cookie, 5);
    let ts = t.table_stats();
    assert_eq!(
        (ts[0].active_count, ts[0].lookup_count, ts[0].matched_count),
        (1, 4, 4)
    );
    let agg = t.aggregate_stats(&stats_req(0, Match::any())).unwrap();
    assert_eq!(
        (agg.packet_count, agg.byte_count, agg.flow_count),
        (4, 240, 1)
    );
    // A match filter: only flows within it.
    assert!(t
        .flow_stats(
            &stats_req(0, m(vec![Oxm::exact(Field::EthType, 0x0806)])),
            T0
        )
        .unwrap()
        .is_empty());
    assert_eq!(
        t.flow_stats(
            &stats_req(0, m(vec![Oxm::exact(Field::EthType, 0x0800)])),
            T0
        )
        .unwrap()
        .len(),
        1
    );
    assert_eq!(
        t.flow_stats(&stats_req(9, Match::any()), T0)
            .unwrap_err()
            .code(),
        ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID
    );

    // Modify keeps counters unless RESET_COUNTS; every change moves the version.
    let before = t.version();
    t.flow_mod(
        &flow_mod(
            FlowModCommand::Modify,
            0,
            0,
            Match::any(),
            vec![apply(vec![out(3)])],
        ),
        T0,
    )
    .unwrap();
    assert_ne!(t.version(), before);
    assert_eq!(t.flows().next().unwrap().counts(), (4, 240));
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![Target::Port(3)]
    );
    let mut reset = flow_mod(
        FlowModCommand::ModifyStrict,
        0,
        10,
        m(ip_udp()),
        vec![apply(vec![out(3)])],
    );
    reset.flags = OFPFF_RESET_COUNTS;
    t.flow_mod(&reset, T0).unwrap();
    assert_eq!(t.flows().next().unwrap().counts(), (0, 0));
    // A replacing add keeps the counters too, unless RESET_COUNTS.
    verdict(&t, &udp4(1, 2, 3, 4), 1).count(2, 120);
    t.flow_mod(&fm, T0).unwrap();
    assert_eq!(t.flows().next().unwrap().counts(), (2, 120));
}

#[test]
fn modify_and_delete_filters() {
    let mut t = tables();
    let flows = [
        (0x10u64, 10u16, m(ip_udp()), 3u32),
        (0x11, 20, m(vec![Oxm::exact(Field::EthType, 0x0800)]), 4),
        (0x20, 30, Match::any(), 3),
        (0x21, 10, m(vec![Oxm::exact(Field::EthType, 0x0806)]), 5),
    ];
    let load = |t: &mut FlowTables| {
        for (cookie, prio, mt, port) in &flows {
            let mut fm = add(0, *prio, mt.clone(), vec![apply(vec![out(*port)])]);
            fm.cookie = *cookie;
            fm.flags = OFPFF_SEND_FLOW_REM;
            t.flow_mod(&fm, T0).unwrap();
        }
    };
    load(&mut t);
    let del = |cmd, prio, mt: Match| flow_mod(cmd, OFPTT_ALL, prio, mt, vec![]);

    // Cookie under a mask.
    let mut fm = del(FlowModCommand::Delete, 0, Match::any());
    fm.cookie = 0x10;
    fm.cookie_mask = 0xf0;
    let gone = t.flow_mod(&fm, secs(2)).unwrap();
    let mut cookies: Vec<u64> = gone.iter().map(|r| r.message.cookie).collect();
    cookies.sort_unstable();
    assert_eq!(cookies, vec![0x10, 0x11]);
    assert!(gone.iter().all(|r| r.send_flow_removed
        && r.message.reason == OFPRR_DELETE
        && r.message.duration_sec == 2));
    assert_eq!(t.len(), 2);

    // out_port.
    let mut t = tables();
    load(&mut t);
    let mut fm = del(FlowModCommand::Delete, 0, Match::any());
    fm.out_port = 3;
    assert_eq!(t.flow_mod(&fm, T0).unwrap().len(), 2);
    assert!(t.flows().all(|f| f.cookie() == 0x11 || f.cookie() == 0x21));

    // Non-strict selects the flows within the match; strict the exact one.
    let mut t = tables();
    load(&mut t);
    let gone = t
        .flow_mod(
            &del(
                FlowModCommand::Delete,
                0,
                m(vec![Oxm::exact(Field::EthType, 0x0800)]),
            ),
            T0,
        )
        .unwrap();
    assert_eq!(
        gone.len(),
        2,
        "eth_type=0x800 covers itself and the UDP flow, not the match-all"
    );
    let mut t = tables();
    load(&mut t);
    assert!(t
        .flow_mod(
            &del(
                FlowModCommand::DeleteStrict,
                21,
                m(vec![Oxm::exact(Field::EthType, 0x0800)])
            ),
            T0
        )
        .unwrap()
        .is_empty());
    let gone = t
        .flow_mod(
            &del(
                FlowModCommand::DeleteStrict,
                20,
                m(vec![Oxm::exact(Field::EthType, 0x0800)]),
            ),
            T0,
        )
        .unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].message.cookie, 0x11);

    // Modify (non-strict) rewrites the instructions of the flows within.
    let mut t = tables();
    load(&mut t);
    t.flow_mod(
        &flow_mod(
            FlowModCommand::Modify,
            0,
            0,
            m(vec![Oxm::exact(Field::EthType, 0x0800)]),
            vec![apply(vec![out(9)])],
        ),
        T0,
    )
    .unwrap();
    let outs: Vec<(u64, Vec<Instruction>)> = t
        .flows()
        .map(|f| (f.cookie(), f.instructions().to_vec()))
        .collect();
    for (cookie, ins) in outs {
        let want = if cookie == 0x10 || cookie == 0x11 {
            9
        } else {
            flows.iter().find(|f| f.0 == cookie).unwrap().3
        };
        assert_eq!(ins, vec![apply(vec![out(want)])], "cookie {cookie:#x}");
    }
    // A modify that selects nothing adds nothing.
    t.flow_mod(
        &flow_mod(FlowModCommand::Modify, 1, 0, Match::any(), vec![]),
        T0,
    )
    .unwrap();
    assert_eq!(t.len(), 4);
}

#[test]
fn timeouts() {
    let mut t = tables();
    let mut hard = add(
        0,
        1,
        m(vec![Oxm::exact(Field::InPort, 1)]),
        vec![apply(vec![out(2)])],
    );
    hard.hard_timeout = 10;
    hard.flags = OFPFF_SEND_FLOW_REM;
    t.flow_mod(&hard, T0).unwrap();
    let mut idle = add(
        0,
        1,
        m(vec![Oxm::exact(Field::InPort, 2)]),
        vec![apply(vec![out(1)])],
    );
    idle.idle_timeout = 5;
    t.flow_mod(&idle, T0).unwrap();

    assert!(t.expire(secs(3)).is_empty());
    // Traffic on the idle flow at 3 s: seen by the next expire.
    verdict(&t, &udp4(1, 2, 3, 4), 2).count(2, 120);
    assert!(t.expire(secs(4)).is_empty());
    let v = t.version();
    assert!(t.expire(secs(8)).is_empty(), "idle since 4 s");
    assert_eq!(t.version(), v, "nothing removed, nothing changed");
    let gone = t.expire(secs(9));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].message.reason, OFPRR_IDLE_TIMEOUT);
    assert_eq!(
        (gone[0].message.packet_count, gone[0].message.byte_count),
        (2, 120)
    );
    assert!(!gone[0].send_flow_removed);
    assert_ne!(t.version(), v);
    let gone = t.expire(secs(10));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].message.reason, OFPRR_HARD_TIMEOUT);
    assert_eq!(
        (gone[0].message.hard_timeout, gone[0].message.duration_sec),
        (10, 10)
    );
    assert!(gone[0].send_flow_removed);
    assert!(t.is_empty());
    assert!(verdict(&t, &udp4(1, 2, 3, 4), 1).is_drop());
}

#[test]
fn all_groups() {
    let mut t = tables();
    let g = group(
        GroupCommand::Add,
        GroupType::All,
        7,
        vec![
            (0, vec![set(Field::EthSrc, mac_value(MAC_B)), out(2)]),
            (0, vec![out(3)]),
        ],
    );
    t.group_mod(&g, T0).unwrap();
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![apply(vec![Action::Group(7), out(4)])],
        ),
        T0,
    )
    .unwrap();
    let frame = udp4(1, 2, 3, 4);
    let v = verdict(&t, &frame, 1);
    assert_eq!(
        targets(&v),
        vec![Target::Port(2), Target::Port(3), Target::Port(4)]
    );
    assert_eq!(
        v.edits(&v.outputs()[0]).collect::<Vec<_>>(),
        vec![Edit::EthSrc(MAC_B)]
    );
    assert!(
        v.outputs()[1].unchanged(),
        "a bucket's edits stay in the bucket"
    );
    assert!(v.outputs()[2].unchanged());
    v.count(2, 120);
    let s = t.group_stats(OFPG_ALL, secs(1));
    assert_eq!(s.len(), 1);
    assert_eq!(
        (
            s[0].group_id,
            s[0].ref_count,
            s[0].packet_count,
            s[0].byte_count
        ),
        (7, 1, 2, 120)
    );
    assert_eq!(s[0].buckets, vec![(2, 120), (2, 120)]);
    assert_eq!(t.group_desc()[0].buckets, g.buckets);

    // Errors.
    assert_eq!(
        t.group_mod(&g, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_GROUP_EXISTS
    );
    let mut unknown = g.clone();
    unknown.command = GroupCommand::Modify;
    unknown.group_id = 8;
    assert_eq!(
        t.group_mod(&unknown, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_UNKNOWN_GROUP
    );
    let chained = group(
        GroupCommand::Add,
        GroupType::All,
        9,
        vec![(0, vec![Action::Group(7)])],
    );
    assert_eq!(
        t.group_mod(&chained, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_CHAINING_UNSUPPORTED
    );
    let ff = group(
        GroupCommand::Add,
        GroupType::FastFailover,
        9,
        vec![(0, vec![out(1)])],
    );
    assert_eq!(
        t.group_mod(&ff, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_BAD_TYPE
    );
    let weighted = group(
        GroupCommand::Add,
        GroupType::All,
        9,
        vec![(3, vec![out(1)])],
    );
    assert_eq!(
        t.group_mod(&weighted, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_WEIGHT_UNSUPPORTED
    );
    let big = group(
        GroupCommand::Add,
        GroupType::All,
        9,
        vec![(0, vec![out(1)]); 65],
    );
    assert_eq!(
        t.group_mod(&big, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_OUT_OF_BUCKETS
    );

    // Modify replaces the buckets; the flow sees them at once.
    let mut m2 = group(
        GroupCommand::Modify,
        GroupType::All,
        7,
        vec![(0, vec![out(5)])],
    );
    let v0 = t.version();
    t.group_mod(&m2, T0).unwrap();
    assert_ne!(t.version(), v0);
    assert_eq!(
        targets(&verdict(&t, &frame, 1)),
        vec![Target::Port(5), Target::Port(4)]
    );

    // Delete takes the flows that use the group with it.
    m2.command = GroupCommand::Delete;
    let gone = t.group_mod(&m2, secs(3)).unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].message.reason, OFPRR_GROUP_DELETE);
    assert!(t.is_empty());
    assert!(t.group_stats(OFPG_ALL, T0).is_empty());
    // Deleting what is not there is no error.
    t.group_mod(&m2, T0).unwrap();
}

#[test]
fn select_groups_share_by_weight_and_hash() {
    let mut t = tables();
    let g = group(
        GroupCommand::Add,
        GroupType::Select,
        1,
        vec![(1, vec![out(2)]), (3, vec![out(3)]), (0, vec![out(4)])],
    );
    t.group_mod(&g, T0).unwrap();
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![Instruction::WriteActions(vec![Action::Group(1)])],
        ),
        T0,
    )
    .unwrap();
    let mut per_port = [0u32; 5];
    let n: u32 = 4000;
    for i in 0..n {
        let frame = udp4((i % 250) as u8, (i / 250) as u8, 1000 + (i as u16 % 7), 53);
        let v = verdict(&t, &frame, 1);
        let outs = targets(&v);
        assert_eq!(outs.len(), 1);
        let Target::Port(p) = outs[0] else {
            panic!("{outs:?}")
        };
        per_port[p as usize] += 1;
        // The same 5-tuple picks the same bucket.
        assert_eq!(targets(&verdict(&t, &frame, 1)), outs);
        v.count(1, 60);
    }
    assert_eq!(per_port[4], 0, "a bucket of weight 0 is never chosen");
    let share = f64::from(per_port[3]) / f64::from(n);
    assert!((0.68..0.82).contains(&share), "weight 3 of 4 got {share}");
    let s = &t.group_stats(1, T0)[0];
    assert_eq!(s.packet_count, u64::from(n));
    assert_eq!(
        s.buckets.iter().map(|b| b.0).collect::<Vec<_>>(),
        vec![u64::from(per_port[2]), u64::from(per_port[3]), 0]
    );

    // INDIRECT: its one bucket.
    let ind = group(
        GroupCommand::Add,
        GroupType::Indirect,
        2,
        vec![(0, vec![out(6)])],
    );
    t.group_mod(&ind, T0).unwrap();
    t.flow_mod(
        &add(0, 1, Match::any(), vec![apply(vec![Action::Group(2)])]),
        T0,
    )
    .unwrap();
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![Target::Port(6)]
    );
    let two = group(
        GroupCommand::Add,
        GroupType::Indirect,
        3,
        vec![(0, vec![out(6)]), (0, vec![out(7)])],
    );
    assert_eq!(
        t.group_mod(&two, T0).unwrap_err().code(),
        ErrorCode::GROUP_MOD_FAILED_BAD_TYPE
    );
}

#[test]
fn outputs_beyond_the_bound_are_left_out_and_said() {
    let mut t = tables();
    let many: Vec<Action> = (2..40).map(out).collect();
    t.flow_mod(&add(0, 1, Match::any(), vec![apply(many)]), T0)
        .unwrap();
    let v = verdict(&t, &udp4(1, 2, 3, 4), 1);
    assert_eq!(v.outputs().len(), ringswitch_flow::verdict::MAX_OUTPUTS);
    assert!(v.truncated());
    // Edits beyond the bound: outputs after them are left out, not sent unedited.
    let mut acts: Vec<Action> = (0..40).map(|i| set(Field::VlanPcp, i % 8)).collect();
    acts.push(out(2));
    t.flow_mod(&add(0, 1, Match::any(), vec![apply(acts)]), T0)
        .unwrap();
    let v = verdict(&t, &udp4(1, 2, 3, 4), 1);
    assert!(v.is_drop());
    assert!(v.truncated());
}

#[test]
fn a_later_table_miss_reports_its_table_and_the_metadata() {
    let mut t = tables();
    t.flow_mod(
        &add(
            0,
            1,
            Match::any(),
            vec![
                Instruction::WriteMetadata {
                    metadata: 5,
                    mask: u64::MAX,
                },
                Instruction::GotoTable(2),
            ],
        ),
        T0,
    )
    .unwrap();
    t.flow_mod(
        &add(
            2,
            0,
            Match::any(),
            vec![apply(vec![Action::Output {
                port: OFPP_CONTROLLER,
                max_len: 64,
            }])],
        ),
        T0,
    )
    .unwrap();
    assert_eq!(
        targets(&verdict(&t, &udp4(1, 2, 3, 4), 1)),
        vec![Target::Controller {
            max_len: 64,
            reason: OFPR_NO_MATCH,
            table_id: 2,
            cookie: 0,
            metadata: 5
        }]
    );
    // Tables 0 and 2 were looked up and matched; table 1 never.
    verdict(&t, &udp4(1, 2, 3, 4), 1).count(1, 60);
    let s = t.table_stats();
    assert_eq!(
        s.iter()
            .map(|s| (s.lookup_count, s.matched_count))
            .take(3)
            .collect::<Vec<_>>(),
        vec![(1, 1), (0, 0), (1, 1)]
    );
}
