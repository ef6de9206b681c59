//! Flow keys and the flow tables' pipeline on any bytes: the first four
//! bytes are the input port, the rest the frame. Extraction never panics
//! and reads only the first 128 bytes; a fixed set of tables (goto,
//! metadata, write and apply actions, push/pop VLAN, set-fields, ALL and
//! SELECT groups, controller, table-miss) gives a verdict whose edits
//! apply to the frame within the bounds they say; the exact-match cache
//! gives the same verdict as the pipeline, and counts every frame once.
//! A key said to lie in a frame's first 64 bytes is the whole frame's,
//! and the cache's probe made in place from the frame's first bytes is
//! its key's.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use ringswitch_flow::verdict::MAX_EDITS;
use ringswitch_flow::{Config, Edit, FlowCache, FlowKey, FlowTables, Probe, Verdict};
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{FlowMod, GroupCommand, GroupMod, GroupType};
use ringswitch_openflow::oxm::OFPVID_PRESENT;
use ringswitch_openflow::{Action, Bucket, Field, Instruction, Match, Oxm};

fn out(port: u32) -> Action {
    Action::Output {
        port,
        max_len: OFPCML_NO_BUFFER,
    }
}

fn set(f: Field, v: u128) -> Action {
    Action::SetField(Oxm::exact(f, v))
}

fn tables() -> FlowTables {
    let mut t = FlowTables::new(Config::default());
    let now = Duration::ZERO;
    let bucket = |weight, actions| Bucket {
        weight,
        watch_port: OFPP_ANY,
        watch_group: OFPG_ANY,
        actions,
    };
    for (id, group_type, buckets) in [
        (
            1,
            GroupType::All,
            vec![
                bucket(0, vec![Action::PopVlan, out(2)]),
                bucket(0, vec![set(Field::EthSrc, 0x0200_0000_0001), out(3)]),
            ],
        ),
        (
            2,
            GroupType::Select,
            vec![
                bucket(1, vec![out(4)]),
                bucket(2, vec![Action::PushVlan(0x88a8), out(5)]),
                bucket(0, vec![out(6)]),
            ],
        ),
    ] {
        t.group_mod(
            &GroupMod {
                command: GroupCommand::Add,
                group_type,
                group_id: id,
                buckets,
            },
            now,
        )
        .unwrap();
    }
    let ip = |proto: Option<u128>| {
        let mut f = vec![Oxm::exact(Field::EthType, 0x0800)];
        f.extend(proto.map(|p| Oxm::exact(Field::IpProto, p)));
        f
    };
    let flows: Vec<(u8, u16, Vec<Oxm>, Vec<Instruction>)> = vec![
        (
            0,
            0,
            vec![],
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: OFPP_CONTROLLER,
                max_len: 64,
            }])],
        ),
        (
            0,
            10,
            ip(None),
            vec![
                Instruction::ApplyActions(vec![
                    set(Field::IpDscp, 46),
                    Action::PushVlan(0x8100),
                    set(Field::VlanVid, u128::from(OFPVID_PRESENT | 5)),
                ]),
                Instruction::WriteMetadata {
                    metadata: 7,
                    mask: 0xff,
                },
                Instruction::GotoTable(2),
            ],
        ),
        (
            0,
            20,
            {
                let mut f = ip(Some(17));
                f.push(Oxm::exact(Field::UdpDst, 53));
                f
            },
            vec![
                Instruction::WriteActions(vec![Action::Group(2)]),
                Instruction::GotoTable(1),
            ],
        ),
        (
            0,
            15,
            vec![Oxm::exact(Field::EthType, 0x0806)],
            vec![Instruction::ApplyActions(vec![
                out(OFPP_FLOOD),
                Action::Group(1),
            ])],
        ),
        (
            0,
            12,
            vec![Oxm::masked(
                Field::VlanVid,
                u128::from(OFPVID_PRESENT),
                u128::from(OFPVID_PRESENT),
            )],
            vec![
                Instruction::ApplyActions(vec![
                    Action::PopVlan,
                    set(Field::EthDst, 0x0200_0000_0009),
                ]),
                Instruction::WriteActions(vec![out(OFPP_IN_PORT)]),
                Instruction::GotoTable(3),
            ],
        ),
        (
            0,
            11,
            vec![Oxm::exact(Field::EthType, 0x86dd)],
            vec![Instruction::ApplyActions(vec![
                set(Field::IpDscp, 10),
                out(OFPP_NORMAL),
            ])],
        ),
        (
            1,
            0,
            vec![],
            vec![
                Instruction::ClearActions,
                Instruction::ApplyActions(vec![out(7)]),
            ],
        ),
        (1, 5, vec![Oxm::exact(Field::InPort, 1)], vec![]),
        (
            2,
            5,
            vec![
                Oxm::masked(Field::Metadata, 7, 0xff),
                Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 5)),
            ],
            vec![
                Instruction::ApplyActions(vec![set(Field::VlanPcp, 3), out(8), Action::Group(1)]),
                Instruction::WriteActions(vec![Action::PopVlan, out(9)]),
            ],
        ),
        (
            3,
            1,
            vec![],
            vec![Instruction::ApplyActions(vec![
                Action::PushVlan(0x8100),
                out(OFPP_LOCAL),
            ])],
        ),
    ];
    for (table_id, priority, fields, instructions) in flows {
        let mut fm = FlowMod::add(
            table_id,
            priority,
            Match::new(fields).unwrap(),
            instructions,
        );
        fm.cookie = u64::from(priority);
        t.flow_mod(&fm, now).unwrap();
    }
    t
}

fuzz_target!(|data: &[u8]| {
    static TABLES: OnceLock<FlowTables> = OnceLock::new();
    let t = TABLES.get_or_init(tables);
    if data.len() < 4 {
        return;
    }
    let in_port = u32::from_be_bytes(data[..4].try_into().unwrap()) % 16;
    let frame = &data[4..];

    let key = FlowKey::extract(frame, in_port);
    assert_eq!(
        key,
        FlowKey::extract(&frame[..frame.len().min(128)], in_port)
    );
    // The switch's straight path gives the same key, whatever the bytes
    // past the frame hold.
    let n = frame.len().min(128);
    for fill in [0u8, 0xff] {
        let mut buf = [fill; 128];
        buf[..n].copy_from_slice(&frame[..n]);
        assert_eq!(key, FlowKey::extract_prefix(&buf, n, in_port));
        // And the probe the switch looks its cache up with, made in place
        // (a compact key where it has one), is the full key's.
        let mut p = Probe::default();
        p.set_prefix(&buf, n, in_port);
        let full = Probe::of(&key);
        assert!(p.same(&full) && full.same(&p));
        assert_eq!(p.hash(), full.hash());
        assert_eq!(p.key(), key);
    }
    // A switch copies a long frame's first cache line only when the key
    // is within it: it must be the whole frame's key.
    if frame.len() > 64 && FlowKey::reads_within(&frame[..64]) {
        assert_eq!(key, FlowKey::extract(&frame[..64], in_port));
    }
    let mut line = [0u8; 128];
    line[..n.min(64)].copy_from_slice(&frame[..n.min(64)]);
    if n > 64 && FlowKey::prefix_is_fast(&line, 64) {
        assert_eq!(key, FlowKey::extract_prefix(&line, 64, in_port));
    }
    assert_eq!(key.in_port(), in_port);
    for &f in Field::ALL {
        let v = key.get(f);
        assert!(
            f.bits() >= 128 || v >> f.bits() == 0,
            "{} = {v:#x} is wider than the field",
            f.name()
        );
    }

    let mut v = Verdict::new();
    t.classify(&key, &mut v);
    let mut buf = vec![0u8; frame.len() + 4 * MAX_EDITS];
    for o in v.outputs() {
        let edits: Vec<Edit> = v.edits(o).collect();
        let n = v
            .apply(o, frame, &mut buf)
            .expect("a buffer with room for every push");
        let pushes = edits
            .iter()
            .filter(|e| matches!(e, Edit::PushVlan(_)))
            .count();
        let pops = edits.iter().filter(|e| matches!(e, Edit::PopVlan)).count();
        assert!(n <= frame.len() + 4 * pushes && n + 4 * pops >= frame.len());
        // Too small a buffer is an error, never a panic.
        let mut small = vec![0u8; frame.len() / 2];
        let _ = v.apply(o, frame, &mut small);
    }

    // The cache gives what the pipeline gives.
    let mut cache = FlowCache::new(4);
    for _ in 0..2 {
        let c = cache.lookup(t, &key, frame.len());
        assert_eq!(c.outputs(), v.outputs());
        assert_eq!(c.truncated(), v.truncated());
    }
    assert_eq!(cache.hits() + cache.misses(), 2);
});
