//! The codec through its public API: every message round-trips, a few
//! encode to bytes written by hand from the specification's layouts, and
//! hostile input (truncated headers, lengths that lie, unknown types and
//! fields, missing prerequisites, oversized lists) gives the right
//! `OFPT_ERROR`, never a panic. The session: negotiation, echo, refusals.

use ringswitch_openflow::action::Instruction;
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::*;
use ringswitch_openflow::multipart::*;
use ringswitch_openflow::oxm::{mac_value, Field, OFPVID_PRESENT};
use ringswitch_openflow::{
    error_reply, Action, Body, DecodeError, ErrorCode, Event, Match, Message, MultipartReply,
    MultipartRequest, Oxm, Session, SessionError,
};

fn tcp_match() -> Match {
    Match::new(vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::IpProto, 6),
        Oxm::masked(Field::Ipv4Src, 0x0a00_0000, 0xff00_0000),
        Oxm::exact(Field::TcpDst, 22),
    ])
    .unwrap()
}

fn port(n: u32) -> Port {
    Port {
        port_no: n,
        hw_addr: [2, 0, 0, 0, 0, n as u8],
        name: format!("p{n}"),
        config: OFPPC_PORT_DOWN,
        state: OFPPS_LIVE,
        curr: 1,
        advertised: 2,
        supported: 3,
        peer: 4,
        curr_speed: 10_000,
        max_speed: 100_000,
    }
}

fn buckets() -> Vec<Bucket> {
    vec![
        Bucket {
            weight: 1,
            watch_port: OFPP_ANY,
            watch_group: OFPG_ANY,
            actions: vec![Action::Output {
                port: 1,
                max_len: 0,
            }],
        },
        Bucket {
            weight: 2,
            watch_port: 3,
            watch_group: OFPG_ANY,
            actions: vec![],
        },
    ]
}

fn flow_stats_request() -> FlowStatsRequest {
    FlowStatsRequest {
        table_id: OFPTT_ALL,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        cookie: 1,
        cookie_mask: 0xff,
        r#match: tcp_match(),
    }
}

/// One message of every type and every multipart kind.
fn every_message() -> Vec<Body> {
    let async_cfg = AsyncConfig {
        packet_in_mask: [3, 1],
        port_status_mask: [7, 7],
        flow_removed_mask: [15, 0],
    };
    let mut v = vec![
        Body::Hello(Hello::ours()),
        Body::Hello(Hello {
            version: 6,
            elements: vec![
                HelloElement::VersionBitmap(vec![0x52, 1]),
                HelloElement::Unknown {
                    kind: 9,
                    data: vec![1, 2, 3],
                },
            ],
        }),
        Body::Hello(Hello {
            version: 1,
            elements: vec![],
        }),
        Body::Error(ErrorMsg {
            code: ErrorCode::BAD_MATCH_BAD_PREREQ,
            data: vec![4, 14, 0, 8, 0, 0, 0, 9],
        }),
        Body::EchoRequest(b"ping".to_vec()),
        Body::EchoReply(vec![]),
        Body::FeaturesRequest,
        Body::FeaturesReply(Features {
            datapath_id: 0xaa,
            n_buffers: 0,
            n_tables: 8,
            auxiliary_id: 0,
            capabilities: OFPC_FLOW_STATS,
        }),
        Body::GetConfigRequest,
        Body::GetConfigReply(SwitchConfig {
            flags: 0,
            miss_send_len: 128,
        }),
        Body::SetConfig(SwitchConfig {
            flags: 1,
            miss_send_len: OFPCML_NO_BUFFER,
        }),
        Body::PacketIn(PacketIn {
            buffer_id: OFP_NO_BUFFER,
            total_len: 60,
            reason: OFPR_ACTION,
            table_id: 3,
            cookie: 9,
            r#match: Match::new(vec![Oxm::exact(Field::InPort, 2)]).unwrap(),
            data: vec![0xab; 60],
        }),
        Body::FlowRemoved(FlowRemoved {
            cookie: 1,
            priority: 2,
            reason: OFPRR_IDLE_TIMEOUT,
            table_id: 4,
            duration_sec: 5,
            duration_nsec: 6,
            idle_timeout: 7,
            hard_timeout: 8,
            packet_count: 9,
            byte_count: 10,
            r#match: tcp_match(),
        }),
        Body::PortStatus(PortStatus {
            reason: OFPPR_ADD,
            desc: port(1),
        }),
        Body::PacketOut(PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: OFPP_CONTROLLER,
            actions: vec![Action::Output {
                port: OFPP_TABLE,
                max_len: 0,
            }],
            data: vec![1; 14],
        }),
        Body::FlowMod(FlowMod {
            cookie: 0x42,
            cookie_mask: 0,
            table_id: 0,
            command: FlowModCommand::Add,
            idle_timeout: 10,
            hard_timeout: 0,
            priority: 100,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: OFPFF_SEND_FLOW_REM,
            r#match: tcp_match(),
            instructions: vec![
                Instruction::ApplyActions(vec![
                    Action::PopVlan,
                    Action::Output {
                        port: 2,
                        max_len: 0,
                    },
                ]),
                Instruction::GotoTable(1),
            ],
        }),
        Body::GroupMod(GroupMod {
            command: GroupCommand::Add,
            group_type: GroupType::Select,
            group_id: 5,
            buckets: buckets(),
        }),
        Body::PortMod(PortMod {
            port_no: 1,
            hw_addr: [2, 0, 0, 0, 0, 1],
            config: 1,
            mask: 1,
            advertise: 0,
        }),
        Body::TableMod(TableMod {
            table_id: 1,
            config: 3,
        }),
        Body::BarrierRequest,
        Body::BarrierReply,
        Body::RoleRequest(Role {
            role: OFPCR_ROLE_MASTER,
            generation_id: 7,
        }),
        Body::RoleReply(Role {
            role: OFPCR_ROLE_EQUAL,
            generation_id: 0,
        }),
        Body::GetAsyncRequest,
        Body::GetAsyncReply(async_cfg),
        Body::SetAsync(async_cfg),
    ];
    let requests = vec![
        MultipartRequest::Desc,
        MultipartRequest::Flow(flow_stats_request()),
        MultipartRequest::Aggregate(flow_stats_request()),
        MultipartRequest::Table,
        MultipartRequest::PortStats { port_no: OFPP_ANY },
        MultipartRequest::PortDesc,
        MultipartRequest::Group { group_id: OFPG_ALL },
        MultipartRequest::GroupDesc,
        MultipartRequest::TableFeatures(vec![]),
        MultipartRequest::Unsupported {
            kind: 9,
            body: vec![0, 0, 0, 1, 0, 0, 0, 0],
        },
    ];
    let replies = vec![
        MultipartReply::Desc(SwitchDesc {
            mfr_desc: "ringswitch".into(),
            hw_desc: "none".into(),
            sw_desc: "0.1".into(),
            serial_num: "x".repeat(40),
            dp_desc: "vale0".into(),
        }),
        MultipartReply::Flow(vec![
            FlowStats {
                table_id: 0,
                duration_sec: 1,
                duration_nsec: 2,
                priority: 3,
                idle_timeout: 4,
                hard_timeout: 5,
                flags: 0,
                cookie: 6,
                packet_count: 7,
                byte_count: 8,
                r#match: tcp_match(),
                instructions: vec![Instruction::WriteActions(vec![Action::Group(1)])],
            },
            FlowStats {
                table_id: 1,
                duration_sec: 0,
                duration_nsec: 0,
                priority: 0,
                idle_timeout: 0,
                hard_timeout: 0,
                flags: 0,
                cookie: 0,
                packet_count: 0,
                byte_count: 0,
                r#match: Match::any(),
                instructions: vec![],
            },
        ]),
        MultipartReply::Aggregate(AggregateStats {
            packet_count: 1,
            byte_count: 2,
            flow_count: 3,
        }),
        MultipartReply::Table(vec![
            TableStats {
                table_id: 0,
                active_count: 1,
                lookup_count: 2,
                matched_count: 3
            };
            2
        ]),
        MultipartReply::PortStats(vec![PortStats {
            port_no: 1,
            counters: [5; 12],
            duration_sec: 1,
            duration_nsec: 2,
        }]),
        MultipartReply::PortDesc(vec![port(1), port(2)]),
        MultipartReply::Group(vec![GroupStats {
            group_id: 1,
            ref_count: 2,
            packet_count: 3,
            byte_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            buckets: vec![(1, 2), (3, 4)],
        }]),
        MultipartReply::GroupDesc(vec![GroupDesc {
            group_type: GroupType::All,
            group_id: 1,
            buckets: buckets(),
        }]),
        MultipartReply::TableFeatures(vec![TableFeatures {
            table_id: 0,
            name: "classifier".into(),
            metadata_match: u64::MAX,
            metadata_write: u64::MAX,
            config: 0,
            max_entries: 1000,
            properties: vec![0, 0, 0, 4, 0, 0, 0, 0],
        }]),
        MultipartReply::Unsupported {
            kind: 0xffff,
            body: vec![1, 2, 3],
        },
    ];
    v.extend(
        requests
            .into_iter()
            .map(|request| Body::MultipartRequest { flags: 0, request }),
    );
    v.extend(replies.into_iter().map(|reply| Body::MultipartReply {
        flags: OFPMPF_MORE,
        reply,
    }));
    v
}

fn decode(b: &[u8]) -> Result<Message, DecodeError> {
    Message::decode(b)
}

#[test]
fn every_message_round_trips() {
    for (i, body) in every_message().into_iter().enumerate() {
        let msg = Message::new(i as u32, body);
        let wire = msg.encode().unwrap();
        let back = decode(&wire).unwrap_or_else(|e| panic!("{msg:?}: {e}"));
        // Strings longer than their field come back cut; everything else equal.
        if let Body::MultipartReply {
            reply: MultipartReply::Desc(d),
            ..
        } = &back.body
        {
            assert_eq!(d.serial_num.len(), 31);
            continue;
        }
        assert_eq!(back, msg);
        assert_eq!(
            usize::from(Header::parse(&wire).unwrap().length),
            wire.len()
        );
    }
}

#[test]
fn golden_bytes_from_the_spec_layouts() {
    // HELLO with a version bitmap of just 1.3: header, element type 1,
    // length 8, bitmap 0x00000010.
    let hello = Message::new(7, Body::Hello(Hello::ours()))
        .encode()
        .unwrap();
    assert_eq!(hello, [4, 0, 0, 16, 0, 0, 0, 7, 0, 1, 0, 8, 0, 0, 0, 0x10]);

    // FEATURES_REPLY: 8 + 24 bytes.
    let f = Message::new(
        1,
        Body::FeaturesReply(Features {
            datapath_id: 0x0102,
            n_buffers: 0,
            n_tables: 8,
            auxiliary_id: 0,
            capabilities: 0x4f,
        }),
    );
    #[rustfmt::skip]
    let want = [
        4, 6, 0, 32, 0, 0, 0, 1,
        0, 0, 0, 0, 0, 0, 1, 2,   // datapath_id
        0, 0, 0, 0,               // n_buffers
        8, 0, 0, 0,               // n_tables, auxiliary_id, pad
        0, 0, 0, 0x4f,            // capabilities
        0, 0, 0, 0,               // reserved
    ];
    assert_eq!(f.encode().unwrap(), want);

    // FLOW_MOD adding "in_port=1 actions=output:2" at priority 0x100.
    let in_port = Match::new(vec![Oxm::exact(Field::InPort, 1)]).unwrap();
    let output = [Instruction::ApplyActions(vec![Action::Output {
        port: 2,
        max_len: 0,
    }])];
    let fm = Message::new(
        2,
        Body::FlowMod(FlowMod {
            priority: 0x100,
            ..flow_mod(&in_port, &output)
        }),
    );
    #[rustfmt::skip]
    let want: Vec<u8> = [
        &[4u8, 14, 0, 88, 0, 0, 0, 2][..],
        &[0; 8], &[0; 8],                         // cookie, cookie_mask
        &[0, 0, 0, 0, 0, 0, 1, 0],                // table, command, idle, hard, priority
        &[0xff, 0xff, 0xff, 0xff],                // buffer_id
        &[0xff, 0xff, 0xff, 0xff],                // out_port
        &[0xff, 0xff, 0xff, 0xff],                // out_group
        &[0, 0, 0, 0],                            // flags, pad
        &[0, 1, 0, 12, 0x80, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0], // match, padded
        &[0, 4, 0, 24, 0, 0, 0, 0],               // APPLY_ACTIONS
        &[0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0], // OUTPUT:2
    ]
    .concat();
    assert_eq!(fm.encode().unwrap(), want);
    assert_eq!(decode(&want).unwrap(), fm);
}

fn code(b: &[u8]) -> ErrorCode {
    match decode(b) {
        Err(e) => e.code,
        Ok(m) => panic!("decoded {m:?}"),
    }
}

/// A message of `kind` with `body`, its header length right.
fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![4, kind];
    v.extend(((8 + body.len()) as u16).to_be_bytes());
    v.extend([0, 0, 0, 9]);
    v.extend_from_slice(body);
    v
}

/// `bytes` with `new` written at `at`.
fn patched(bytes: &[u8], at: usize, new: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v[at..at + new.len()].copy_from_slice(new);
    v
}

/// An ADD at priority 1 of `m` and `instructions`, in no table but 0.
fn flow_mod(m: &Match, instructions: &[Instruction]) -> FlowMod {
    FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: FlowModCommand::Add,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 1,
        buffer_id: OFP_NO_BUFFER,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        flags: 0,
        r#match: m.clone(),
        instructions: instructions.to_vec(),
    }
}

fn flow_mod_bytes(m: &Match, instructions: &[Instruction]) -> Vec<u8> {
    Message::new(9, Body::FlowMod(flow_mod(m, instructions)))
        .encode()
        .unwrap()
}

#[test]
fn hostile_messages_get_the_right_error() {
    // Truncated headers and lengths that lie.
    for n in 0..8 {
        assert_eq!(
            code(&[4, 5, 0, 8, 0, 0, 0, 0][..n]),
            ErrorCode::BAD_REQUEST_BAD_LEN
        );
    }
    assert_eq!(
        code(&[4, 5, 0, 9, 0, 0, 0, 0]),
        ErrorCode::BAD_REQUEST_BAD_LEN
    );
    assert_eq!(
        code(&[4, 5, 0, 8, 0, 0, 0, 0, 0]),
        ErrorCode::BAD_REQUEST_BAD_LEN
    );
    // Fixed-size messages of the wrong size.
    assert_eq!(code(&msg(5, &[0])), ErrorCode::BAD_REQUEST_BAD_LEN);
    assert_eq!(code(&msg(9, &[0, 0, 0])), ErrorCode::BAD_REQUEST_BAD_LEN);
    assert_eq!(
        code(&msg(9, &[0, 0, 0, 0, 0])),
        ErrorCode::BAD_REQUEST_BAD_LEN
    );
    assert_eq!(code(&msg(20, &[0; 8])), ErrorCode::BAD_REQUEST_BAD_LEN);
    assert_eq!(code(&msg(24, &[0; 15])), ErrorCode::BAD_REQUEST_BAD_LEN);
    // Unknown and unsupported types, another version.
    assert_eq!(code(&msg(30, &[])), ErrorCode::BAD_REQUEST_BAD_TYPE);
    assert_eq!(code(&msg(29, &[0; 8])), ErrorCode::BAD_REQUEST_BAD_TYPE);
    assert_eq!(code(&msg(22, &[0; 8])), ErrorCode::BAD_REQUEST_BAD_TYPE);
    assert_eq!(code(&msg(255, &[])), ErrorCode::BAD_REQUEST_BAD_TYPE);
    assert_eq!(
        code(&msg(4, &[0; 8])),
        ErrorCode::BAD_REQUEST_BAD_EXPERIMENTER
    );
    let mut v1 = msg(5, &[]);
    v1[0] = 1;
    assert_eq!(code(&v1), ErrorCode::BAD_REQUEST_BAD_VERSION);
    // A role that is not one.
    let mut role = vec![0, 0, 0, 4];
    role.extend([0; 12]);
    assert_eq!(
        code(&msg(24, &role)),
        ErrorCode::ROLE_REQUEST_FAILED_BAD_ROLE
    );

    // FLOW_MOD: the good one decodes; then break it in turn.
    let good = flow_mod_bytes(&tcp_match(), &[Instruction::GotoTable(1)]);
    assert!(decode(&good).is_ok());
    for cut in [9, 40, 55, good.len() - 1] {
        let mut short = good[..cut].to_vec();
        short[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
        assert!(decode(&short).is_err(), "cut at {cut}");
    }
    // (offset, new bytes, error). The match starts at 48 (type, length),
    // its TLVs at 52: eth_type's value at 56, ip_proto's field byte at 60;
    // the last 8 bytes are the GOTO_TABLE instruction.
    let goto = good.len() - 8;
    let faults: [(usize, &[u8], ErrorCode); 10] = [
        (25, &[5], ErrorCode::FLOW_MOD_FAILED_BAD_COMMAND),
        (44, &[0x80], ErrorCode::FLOW_MOD_FAILED_BAD_FLAGS),
        (24, &[OFPTT_ALL], ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID),
        (50, &[0x03, 0xe8], ErrorCode::BAD_MATCH_BAD_LEN),
        (49, &[0], ErrorCode::BAD_MATCH_BAD_TYPE),
        (56, &[0x08, 0x06], ErrorCode::BAD_MATCH_BAD_PREREQ),
        (60, &[41 << 1], ErrorCode::BAD_MATCH_BAD_FIELD),
        (goto + 1, &[9], ErrorCode::BAD_INSTRUCTION_UNKNOWN_INST),
        (goto + 4, &[0xff], ErrorCode::BAD_INSTRUCTION_BAD_TABLE_ID),
        (goto + 3, &[16], ErrorCode::BAD_INSTRUCTION_BAD_LEN),
    ];
    for (at, new, want) in faults {
        assert_eq!(code(&patched(&good, at, new)), want, "byte {at} = {new:?}");
    }
    // Built in code, the same rule holds: tcp_dst without ip_proto.
    let m = Match::new(vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::IpDscp, 0),
        Oxm::exact(Field::TcpDst, 22),
    ]);
    assert_eq!(m.unwrap_err().code, ErrorCode::BAD_MATCH_BAD_PREREQ);

    // Oversized lists: the bounds are MAX_ACTIONS and MAX_BUCKETS.
    let many = vec![Action::PopVlan; MAX_ACTIONS + 1];
    let too_many = flow_mod_bytes(&Match::any(), &[Instruction::ApplyActions(many.clone())]);
    assert_eq!(code(&too_many), ErrorCode::BAD_ACTION_TOO_MANY);
    let ok = flow_mod_bytes(
        &Match::any(),
        &[Instruction::ApplyActions(many[..MAX_ACTIONS].to_vec())],
    );
    assert!(decode(&ok).is_ok());
    let bucket = Bucket {
        weight: 1,
        watch_port: OFPP_ANY,
        watch_group: OFPG_ANY,
        actions: vec![],
    };
    let group = |n| {
        Message::new(
            1,
            Body::GroupMod(GroupMod {
                command: GroupCommand::Add,
                group_type: GroupType::All,
                group_id: 1,
                buckets: vec![bucket.clone(); n],
            }),
        )
        .encode()
        .unwrap()
    };
    assert!(decode(&group(MAX_BUCKETS)).is_ok());
    assert_eq!(
        code(&group(MAX_BUCKETS + 1)),
        ErrorCode::GROUP_MOD_FAILED_OUT_OF_BUCKETS
    );
    // A message too big for the header does not encode.
    let huge = Message::new(1, Body::EchoRequest(vec![0; 70_000]));
    assert!(huge.encode().is_err());

    // GROUP_MOD: bucket lengths that lie, bad type, command, group id.
    // (offset, new bytes, error): the buckets start at 16.
    let g = group(1);
    let any = OFPG_ANY.to_be_bytes();
    let faults: [(usize, &[u8], ErrorCode); 6] = [
        (17, &[8], ErrorCode::GROUP_MOD_FAILED_BAD_BUCKET),
        (17, &[24], ErrorCode::GROUP_MOD_FAILED_BAD_BUCKET),
        (17, &[17], ErrorCode::GROUP_MOD_FAILED_BAD_BUCKET),
        (10, &[4], ErrorCode::GROUP_MOD_FAILED_BAD_TYPE),
        (9, &[3], ErrorCode::GROUP_MOD_FAILED_BAD_COMMAND),
        (12, &any, ErrorCode::GROUP_MOD_FAILED_INVALID_GROUP),
    ];
    for (at, new, want) in faults {
        assert_eq!(code(&patched(&g, at, new)), want, "byte {at} = {new:?}");
    }

    // PACKET_OUT whose actions_len runs past the message.
    let mut po = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 64];
    po.extend([0; 6]);
    assert_eq!(code(&msg(13, &po)), ErrorCode::BAD_REQUEST_BAD_LEN);

    // Multipart: an unknown kind decodes (for the switch to refuse with
    // BAD_MULTIPART), a body on a bodiless request does not.
    let mut mp = vec![0, 99, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        decode(&msg(18, &mp)).unwrap().body,
        Body::MultipartRequest {
            request: MultipartRequest::Unsupported { kind: 99, .. },
            ..
        }
    ));
    mp[1] = 0;
    mp.extend([0; 8]);
    assert_eq!(code(&msg(18, &mp)), ErrorCode::BAD_REQUEST_BAD_LEN);

    // HELLO elements that lie.
    assert_eq!(
        code(&msg(0, &[0, 1, 0, 2, 0, 0, 0, 0])),
        ErrorCode::BAD_REQUEST_BAD_LEN
    );
    assert_eq!(
        code(&msg(0, &[0, 1, 0, 16, 0, 0, 0, 0])),
        ErrorCode::BAD_REQUEST_BAD_LEN
    );
    assert_eq!(
        code(&msg(0, &[0, 1, 0, 7, 0, 0, 0, 0])),
        ErrorCode::BAD_REQUEST_BAD_LEN
    );
}

#[test]
fn error_reply_carries_at_most_64_bytes_of_the_request() {
    let big = flow_mod_bytes(&tcp_match(), &[Instruction::GotoTable(1)]);
    assert!(big.len() > 64);
    let e = error_reply(&big, ErrorCode::BAD_MATCH_BAD_PREREQ);
    assert_eq!(e.xid, 9);
    match &e.body {
        Body::Error(ErrorMsg { code, data }) => {
            assert_eq!(*code, ErrorCode::BAD_MATCH_BAD_PREREQ);
            assert_eq!(data[..], big[..64]);
        }
        b => panic!("{b:?}"),
    }
    let small = error_reply(&[4, 5, 0, 8, 0, 0, 0, 3], ErrorCode::BAD_REQUEST_BAD_TYPE);
    let wire = small.encode().unwrap();
    assert_eq!(
        wire,
        [4, 1, 0, 20, 0, 0, 0, 3, 0, 1, 0, 1, 4, 5, 0, 8, 0, 0, 0, 3]
    );
}

/// The codes of `msgs`, which must all be errors.
fn error_codes(msgs: &[Message]) -> Vec<ErrorCode> {
    msgs.iter()
        .map(|m| match &m.body {
            Body::Error(e) => e.code,
            b => panic!("not an error: {b:?}"),
        })
        .collect()
}

/// Feeds `bytes` and returns the messages the session wrote and its events.
fn run(s: &mut Session, bytes: &[u8]) -> (Vec<Message>, Vec<Event>) {
    s.receive(bytes);
    let mut events = Vec::new();
    while let Some(e) = s.poll_event() {
        events.push(e);
    }
    let out = s.take_output();
    let mut f = ringswitch_openflow::Framer::default();
    assert_eq!(f.push(&out), out.len());
    let mut msgs = Vec::new();
    while let Some(m) = f.next_frame().unwrap() {
        msgs.push(Message::decode(&m).unwrap());
    }
    (msgs, events)
}

fn hello(version: u8, bitmap: Option<Vec<u32>>) -> Vec<u8> {
    let elements = bitmap
        .map(|b| vec![HelloElement::VersionBitmap(b)])
        .unwrap_or_default();
    Message::new(1, Body::Hello(Hello { version, elements }))
        .encode()
        .unwrap()
}

#[test]
fn session_negotiates_from_the_bitmap_or_the_header() {
    // Bitmap offering 1.0 and 1.3 (header says 1.5).
    let mut s = Session::new();
    let (out, ev) = run(&mut s, &hello(6, Some(vec![(1 << 1) | (1 << 4)])));
    assert_eq!(out, vec![Message::new(1, Body::Hello(Hello::ours()))]);
    assert_eq!(ev, vec![Event::Connected]);
    assert!(s.is_open());
    // Plain HELLO of a newer version: 1.3 is taken.
    let mut s = Session::new();
    s.take_output();
    run(&mut s, &hello(5, None));
    assert!(s.is_open());
    // Plain HELLO of 1.0, and a bitmap without 1.3: HELLO_FAILED, closed.
    for h in [hello(1, None), hello(6, Some(vec![1 << 5 | 1 << 6]))] {
        let mut s = Session::new();
        s.take_output();
        let (out, ev) = run(&mut s, &h);
        assert_eq!(error_codes(&out), [ErrorCode::HELLO_FAILED_INCOMPATIBLE]);
        assert!(matches!(
            ev[..],
            [Event::Closed(SessionError::NoCommonVersion(_))]
        ));
        assert!(s.is_closed());
        // Nothing more is read.
        let (out, ev) = run(&mut s, &msg(2, b"x"));
        assert!(out.is_empty() && ev.is_empty());
    }
}

#[test]
fn session_closes_on_a_malformed_hello() {
    let mut s = Session::new();
    s.take_output();
    let (out, ev) = run(&mut s, &msg(0, &[0, 1, 0, 2, 0, 0, 0, 0]));
    assert_eq!(error_codes(&out), [ErrorCode::BAD_REQUEST_BAD_LEN]);
    assert!(matches!(ev[..], [Event::Closed(SessionError::BadHello(_))]));
}

#[test]
fn session_refuses_messages_before_hello() {
    let mut s = Session::new();
    s.take_output();
    let (out, ev) = run(&mut s, &msg(5, &[]));
    assert_eq!(error_codes(&out), [ErrorCode::HELLO_FAILED_INCOMPATIBLE]);
    assert_eq!(ev, vec![Event::Closed(SessionError::NotHello(5))]);
}

#[test]
fn session_echoes_refuses_and_hands_up() {
    let mut s = Session::new();
    s.take_output();
    // HELLO, ECHO, a FEATURES_REQUEST, an unknown type, a FLOW_MOD, in
    // pieces of 3 bytes.
    let flow = flow_mod_bytes(&tcp_match(), &[]);
    let mut stream = hello(4, None);
    stream.extend(msg(2, b"ping"));
    stream.extend(msg(5, &[]));
    stream.extend(msg(77, &[]));
    stream.extend(&flow);
    let mut out = Vec::new();
    let mut events = Vec::new();
    for chunk in stream.chunks(3) {
        let (o, e) = run(&mut s, chunk);
        out.extend(o);
        events.extend(e);
    }
    assert_eq!(out[0], Message::new(9, Body::EchoReply(b"ping".to_vec())));
    assert!(
        matches!(&out[1].body, Body::Error(ErrorMsg { code: ErrorCode::BAD_REQUEST_BAD_TYPE, data }) if data[..] == msg(77, &[])[..])
    );
    assert_eq!(events[0], Event::Connected);
    assert!(matches!(&events[1], Event::Message(r) if r.message.body == Body::FeaturesRequest));
    assert!(matches!(&events[2], Event::Refused(e) if e.code == ErrorCode::BAD_REQUEST_BAD_TYPE));
    // The switch refuses the FLOW_MOD it was handed.
    let Event::Message(r) = &events[3] else {
        panic!("{events:?}")
    };
    s.refuse(r, ErrorCode::FLOW_MOD_FAILED_TABLE_FULL);
    let (out, _) = run(&mut s, &[]);
    assert!(
        matches!(&out[..], [Message { xid: 9, body: Body::Error(ErrorMsg { code: ErrorCode::FLOW_MOD_FAILED_TABLE_FULL, data }) }] if data.len() == 64)
    );
    // A lying length closes the session after BAD_LEN.
    let (out, ev) = run(&mut s, &[4, 2, 0, 4, 0, 0, 0, 1]);
    assert_eq!(error_codes(&out), [ErrorCode::BAD_REQUEST_BAD_LEN]);
    assert!(matches!(ev[..], [Event::Closed(SessionError::Framing(_))]));
}

#[test]
fn masks_and_prefixes_build_as_expected() {
    let m = Match::new(vec![
        Oxm::masked(
            Field::EthDst,
            mac_value([1, 0, 0, 0, 0, 0]),
            mac_value([1, 0, 0, 0, 0, 0]),
        ),
        Oxm::masked(
            Field::VlanVid,
            u128::from(OFPVID_PRESENT),
            u128::from(OFPVID_PRESENT),
        ),
    ])
    .unwrap();
    assert_eq!(m.fields().len(), 2);
    assert!(m.get(Field::VlanVid).is_some());
}

/// Writes seeds for the `openflow_codec` fuzz target into the directory
/// `RS_OPENFLOW_SEEDS` names: every message of [`every_message`] on its
/// own, and all of them as one stream after a HELLO. Run by
/// fuzz/make-seeds.sh; ignored otherwise.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let Some(dir) = std::env::var_os("RS_OPENFLOW_SEEDS") else {
        eprintln!("RS_OPENFLOW_SEEDS is not set: nothing written");
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut stream = hello(4, Some(vec![1 << 4]));
    for (i, body) in every_message().into_iter().enumerate() {
        let wire = Message::new(i as u32, body).encode().unwrap();
        std::fs::write(dir.join(format!("msg{i:02}")), &wire).unwrap();
        stream.extend(wire);
    }
    std::fs::write(dir.join("stream"), stream).unwrap();
}
