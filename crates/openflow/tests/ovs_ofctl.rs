//! A real OpenFlow client, Open vSwitch's `ovs-ofctl`, against the codec:
//! each test listens on a unix socket, runs one `ovs-ofctl -O OpenFlow13`
//! command against it, answers as a switch would through a [`Session`]
//! (features, config, port descriptions, flow and group stats, barriers),
//! and checks both sides: what we decoded is exactly what the command line
//! said, and ovs-ofctl accepted our replies (exit code 0, its output).
//!
//! Skipped, saying so, when ovs-ofctl is not installed.

use std::io::{Read, Write};
use std::net::Ipv6Addr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringswitch_openflow::action::Instruction as I;
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{
    Features, FlowMod, FlowModCommand, GroupCommand, GroupMod, GroupType, PacketOut, SwitchConfig,
};
use ringswitch_openflow::multipart::{FlowStats, GroupDesc, PortStats, SwitchDesc, TableFeatures};
use ringswitch_openflow::oxm::{mac_value, Field as F};
use ringswitch_openflow::{
    Action as A, Body, Bucket, ErrorCode, Event, Match, Message, MultipartReply, MultipartRequest,
    Oxm, Port, Session,
};

/// Generous: the machine is shared; nothing here waits on a timer to pass.
const DEADLINE: Duration = Duration::from_secs(60);

fn have_ovs_ofctl() -> bool {
    let ok = Command::new("ovs-ofctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "SKIPPED: ovs-ofctl is not installed (Debian: apt-get install openvswitch-common)"
        );
    }
    ok
}

fn ports() -> Vec<Port> {
    (1..=2)
        .map(|n| Port {
            port_no: n,
            hw_addr: [0x02, 0, 0, 0, 0, n as u8],
            name: format!("vale0:p{n}"),
            curr_speed: 10_000_000,
            max_speed: 10_000_000,
            ..Port::default()
        })
        .collect()
}

fn exact(f: F, v: u128) -> Oxm {
    Oxm::exact(f, v)
}

fn ip4(s: &str) -> u128 {
    u128::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()))
}

fn ip6(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().unwrap())
}

fn mat(fields: Vec<Oxm>) -> Match {
    Match::new(fields).unwrap()
}

fn out(port: u32) -> A {
    A::Output { port, max_len: 0 }
}

/// The flow stats our stub switch reports to dump-flows.
fn canned_flows() -> Vec<FlowStats> {
    vec![FlowStats {
        table_id: 0,
        duration_sec: 5,
        duration_nsec: 0,
        priority: 100,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: 0x42,
        packet_count: 7,
        byte_count: 420,
        r#match: mat(vec![
            exact(F::EthType, 0x0800),
            exact(F::IpProto, 6),
            exact(F::TcpDst, 80),
        ]),
        instructions: vec![I::ApplyActions(vec![out(2)])],
    }]
}

/// The eight properties OpenFlow 1.3 requires of a table's features
/// (instructions, next tables, write/apply actions, match, wildcards,
/// write/apply set-field), each with an empty list: enough for ovs-ofctl,
/// which only wants the tables' names.
fn required_properties() -> Vec<u8> {
    [0u8, 2, 4, 6, 8, 10, 12, 14]
        .iter()
        .flat_map(|&t| [0, t, 0, 4, 0, 0, 0, 0])
        .collect()
}

/// Answers ovs-ofctl's connections as a switch would, each in its own
/// thread (it opens one to learn the tables' names and keeps it while it
/// works on another), until `stop` is set and a last connection wakes the
/// accept; returns every message handed up, connection by connection.
fn serve(listener: UnixListener, stop: Arc<AtomicBool>) -> Vec<Message> {
    let mut conns = Vec::new();
    loop {
        let (conn, _) = listener.accept().expect("a connection");
        // Acquire: pairs with the Release store made before the waking
        // connection, so a set flag means ovs-ofctl has exited.
        if stop.load(Ordering::Acquire) {
            break;
        }
        conns.push(std::thread::spawn(move || {
            let mut got = Vec::new();
            serve_one(conn, &mut got);
            got
        }));
    }
    conns
        .into_iter()
        .flat_map(|h| h.join().expect("a stub connection does not panic"))
        .collect()
}

/// Serves one connection until the peer closes it.
fn serve_one(mut conn: UnixStream, got: &mut Vec<Message>) {
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut session = Session::new();
    let mut buf = vec![0u8; 65536];
    loop {
        if conn.write_all(&session.take_output()).is_err() {
            break;
        }
        let n = match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        session.receive(&buf[..n]);
        while let Some(ev) = session.poll_event() {
            let r = match ev {
                Event::Message(r) => r,
                Event::Connected => continue,
                Event::Refused(e) => panic!("we refused a message from ovs-ofctl: {e}"),
                Event::Closed(e) => panic!("the session closed: {e}"),
            };
            let xid = r.message.xid;
            let reply = |b| Some(Message::new(xid, b));
            let answer = match &r.message.body {
                Body::FeaturesRequest => reply(Body::FeaturesReply(Features {
                    datapath_id: 0x0000_0200_0000_00aa,
                    n_buffers: 0,
                    n_tables: 8,
                    auxiliary_id: 0,
                    capabilities: OFPC_FLOW_STATS
                        | OFPC_TABLE_STATS
                        | OFPC_PORT_STATS
                        | OFPC_GROUP_STATS,
                })),
                Body::GetConfigRequest => reply(Body::GetConfigReply(SwitchConfig {
                    flags: 0,
                    miss_send_len: 128,
                })),
                Body::BarrierRequest => reply(Body::BarrierReply),
                Body::MultipartRequest { request, .. } => {
                    let mp =
                        |reply| Some(Message::new(xid, Body::MultipartReply { flags: 0, reply }));
                    match request {
                        MultipartRequest::PortDesc => mp(MultipartReply::PortDesc(ports())),
                        MultipartRequest::TableFeatures(set) if set.is_empty() => {
                            mp(MultipartReply::TableFeatures(
                                (0..8)
                                    .map(|t| TableFeatures {
                                        table_id: t,
                                        name: format!("table{t}"),
                                        metadata_match: u64::MAX,
                                        metadata_write: u64::MAX,
                                        config: 0,
                                        max_entries: 1_000_000,
                                        properties: required_properties(),
                                    })
                                    .collect(),
                            ))
                        }
                        MultipartRequest::Flow(_) => mp(MultipartReply::Flow(canned_flows())),
                        MultipartRequest::PortStats { .. } => mp(MultipartReply::PortStats(
                            ports()
                                .iter()
                                .map(|p| PortStats {
                                    port_no: p.port_no,
                                    counters: [u64::from(p.port_no) * 100; 12],
                                    duration_sec: 3,
                                    duration_nsec: 0,
                                })
                                .collect(),
                        )),
                        MultipartRequest::Desc => mp(MultipartReply::Desc(SwitchDesc {
                            mfr_desc: "ringswitch".into(),
                            ..SwitchDesc::default()
                        })),
                        MultipartRequest::GroupDesc => {
                            mp(MultipartReply::GroupDesc(vec![GroupDesc {
                                group_type: GroupType::Select,
                                group_id: 7,
                                buckets: vec![
                                    Bucket {
                                        weight: 10,
                                        watch_port: OFPP_ANY,
                                        watch_group: OFPG_ANY,
                                        actions: vec![out(1)],
                                    },
                                    Bucket {
                                        weight: 20,
                                        watch_port: OFPP_ANY,
                                        watch_group: OFPG_ANY,
                                        actions: vec![out(2)],
                                    },
                                ],
                            }]))
                        }
                        _ => {
                            session.refuse(&r, ErrorCode::BAD_REQUEST_BAD_MULTIPART);
                            None
                        }
                    }
                }
                _ => None,
            };
            if let Some(m) = answer {
                session.send(&m).unwrap();
            }
            got.push(r.message);
        }
    }
}

/// Runs `ovs-ofctl -O OpenFlow13 <cmd> unix:SOCK <args>` against a stub
/// switch; returns its stdout and what the switch received.
fn ofctl(cmd: &str, opts: &[&str], args: &[&str]) -> (String, Vec<Message>) {
    let dir = tempdir();
    let sock = dir.join("of.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || serve(listener, stop))
    };
    let target = format!("unix:{}", sock.display());
    let output = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--timeout=60"])
        .args(opts)
        .arg(cmd)
        .arg(&target)
        .args(args)
        .output()
        .expect("ovs-ofctl runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "ovs-ofctl {cmd} {args:?} failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    // Release: pairs with the stub's Acquire load after its accept.
    stop.store(true, Ordering::Release);
    drop(UnixStream::connect(&sock).unwrap());
    let got = server.join().expect("the stub switch does not panic");
    let _ = std::fs::remove_dir_all(&dir);
    (stdout, got)
}

fn tempdir() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    // Relaxed: only uniqueness within this process matters.
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("rs-openflow-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn flow_mods(got: &[Message]) -> Vec<FlowMod> {
    got.iter()
        .filter_map(|m| match &m.body {
            Body::FlowMod(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

/// The flows of the table: ovs-ofctl syntax, the match and the
/// instructions they must decode to.
fn flow_table() -> Vec<(&'static str, Match, Vec<I>)> {
    vec![
        (
            "priority=100,in_port=1,actions=output:2",
            mat(vec![exact(F::InPort, 1)]),
            vec![I::ApplyActions(vec![out(2)])],
        ),
        (
            "dl_src=00:11:22:33:44:55/ff:ff:ff:00:00:00,dl_dst=02:00:00:00:00:01,actions=drop",
            mat(vec![
                exact(F::EthDst, mac_value([2, 0, 0, 0, 0, 1])),
                Oxm::masked(F::EthSrc, mac_value([0, 0x11, 0x22, 0, 0, 0]), mac_value([0xff, 0xff, 0xff, 0, 0, 0])),
            ]),
            vec![],
        ),
        (
            "dl_vlan=10,dl_vlan_pcp=3,actions=pop_vlan,output:LOCAL",
            mat(vec![exact(F::VlanVid, 0x1000 | 10), exact(F::VlanPcp, 3)]),
            vec![I::ApplyActions(vec![A::PopVlan, out(OFPP_LOCAL)])],
        ),
        (
            "ip,nw_src=10.0.0.0/8,nw_dst=192.168.1.1,actions=output:4",
            mat(vec![
                exact(F::EthType, 0x0800),
                Oxm::masked(F::Ipv4Src, ip4("10.0.0.0"), ip4("255.0.0.0")),
                exact(F::Ipv4Dst, ip4("192.168.1.1")),
            ]),
            vec![I::ApplyActions(vec![out(4)])],
        ),
        (
            "cookie=0x42,priority=200,idle_timeout=10,hard_timeout=60,tcp,nw_src=1.2.3.4,tp_src=1234,tp_dst=80,actions=NORMAL",
            mat(vec![
                exact(F::EthType, 0x0800),
                exact(F::IpProto, 6),
                exact(F::Ipv4Src, ip4("1.2.3.4")),
                exact(F::TcpSrc, 1234),
                exact(F::TcpDst, 80),
            ]),
            vec![I::ApplyActions(vec![out(OFPP_NORMAL)])],
        ),
        (
            "udp6,ipv6_src=2001:db8::/32,udp_dst=53,actions=FLOOD",
            mat(vec![
                exact(F::EthType, 0x86dd),
                exact(F::IpProto, 17),
                Oxm::masked(F::Ipv6Src, ip6("2001:db8::"), ip6("ffff:ffff::")),
                exact(F::UdpDst, 53),
            ]),
            vec![I::ApplyActions(vec![out(OFPP_FLOOD)])],
        ),
        (
            "icmp,icmp_type=8,icmp_code=0,actions=controller:128",
            mat(vec![
                exact(F::EthType, 0x0800),
                exact(F::IpProto, 1),
                exact(F::Icmpv4Type, 8),
                exact(F::Icmpv4Code, 0),
            ]),
            vec![I::ApplyActions(vec![A::Output { port: OFPP_CONTROLLER, max_len: 128 }])],
        ),
        (
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,actions=ALL",
            mat(vec![
                exact(F::EthType, 0x0806),
                exact(F::ArpOp, 1),
                exact(F::ArpSpa, ip4("10.0.0.1")),
                Oxm::masked(F::ArpTpa, ip4("10.0.0.0"), ip4("255.255.255.0")),
            ]),
            vec![I::ApplyActions(vec![out(OFPP_ALL)])],
        ),
        (
            "table=1,metadata=0x5/0xff,actions=write_metadata:0x10/0xf0,goto_table:2",
            mat(vec![Oxm::masked(F::Metadata, 5, 0xff)]),
            vec![I::WriteMetadata { metadata: 0x10, mask: 0xf0 }, I::GotoTable(2)],
        ),
        (
            "in_port=2,actions=push_vlan:0x8100,set_field:20->vlan_vid,output:1",
            mat(vec![exact(F::InPort, 2)]),
            vec![I::ApplyActions(vec![
                A::PushVlan(0x8100),
                // ovs-ofctl sends the VID as written, without OFPVID_PRESENT.
                A::SetField(exact(F::VlanVid, 20)),
                out(1),
            ])],
        ),
        (
            "ip,ip_dscp=46,actions=set_field:00:00:00:00:00:aa->eth_dst,IN_PORT",
            mat(vec![exact(F::EthType, 0x0800), exact(F::IpDscp, 46)]),
            vec![I::ApplyActions(vec![
                A::SetField(exact(F::EthDst, 0xaa)),
                out(OFPP_IN_PORT),
            ])],
        ),
        (
            "icmp6,icmp_type=135,nd_target=fe80::1,actions=group:1",
            mat(vec![
                exact(F::EthType, 0x86dd),
                exact(F::IpProto, 58),
                exact(F::Icmpv6Type, 135),
                exact(F::Ipv6NdTarget, ip6("fe80::1")),
            ]),
            vec![I::ApplyActions(vec![A::Group(1)])],
        ),
        (
            "ipv6,ipv6_dst=fe80::1,ipv6_label=0x12345,actions=write_actions(output:3)",
            mat(vec![
                exact(F::EthType, 0x86dd),
                exact(F::Ipv6Dst, ip6("fe80::1")),
                exact(F::Ipv6Flabel, 0x12345),
            ]),
            vec![I::WriteActions(vec![out(3)])],
        ),
        (
            "vlan_tci=0x1000/0x1000,actions=clear_actions",
            mat(vec![Oxm::masked(F::VlanVid, 0x1000, 0x1000)]),
            vec![I::ClearActions],
        ),
    ]
}

fn check_add(fm: &FlowMod, text: &str, m: &Match, ins: &[I]) {
    assert_eq!(fm.command, FlowModCommand::Add, "{text}");
    assert_eq!(&fm.r#match, m, "{text}");
    assert_eq!(fm.instructions, ins, "{text}");
    assert_eq!(fm.buffer_id, OFP_NO_BUFFER, "{text}");
}

#[test]
fn add_flow_carries_the_match_and_instructions_given() {
    if !have_ovs_ofctl() {
        return;
    }
    for (text, m, ins) in flow_table() {
        let (_, got) = ofctl("add-flow", &[], &[text]);
        let fms = flow_mods(&got);
        assert_eq!(fms.len(), 1, "{text}: {got:?}");
        check_add(&fms[0], text, &m, &ins);
        assert!(
            matches!(got.last().map(|m| &m.body), Some(Body::BarrierRequest)),
            "{text}"
        );
    }
    // The fields ovs-ofctl writes around the match.
    let (_, got) = ofctl("add-flow", &[], &[flow_table()[4].0]);
    let fm = &flow_mods(&got)[0];
    assert_eq!(
        (fm.cookie, fm.priority, fm.idle_timeout, fm.hard_timeout),
        (0x42, 200, 10, 60)
    );
    let (_, got) = ofctl("add-flow", &[], &[flow_table()[8].0]);
    assert_eq!(flow_mods(&got)[0].table_id, 1);
}

#[test]
fn add_flows_from_a_file_arrive_in_order() {
    if !have_ovs_ofctl() {
        return;
    }
    let dir = tempdir();
    let file = dir.join("flows.txt");
    let table = flow_table();
    let text: String = table.iter().map(|(t, _, _)| format!("{t}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let (_, got) = ofctl("add-flows", &[], &[file.to_str().unwrap()]);
    let fms = flow_mods(&got);
    assert_eq!(fms.len(), table.len());
    for (fm, (text, m, ins)) in fms.iter().zip(&table) {
        check_add(fm, text, m, ins);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn mod_flows_and_del_flows_carry_their_command_and_filters() {
    if !have_ovs_ofctl() {
        return;
    }
    let ip_src = mat(vec![
        exact(F::EthType, 0x0800),
        Oxm::masked(F::Ipv4Src, ip4("10.0.0.0"), ip4("255.0.0.0")),
    ]);
    let (_, got) = ofctl("mod-flows", &[], &["ip,nw_src=10.0.0.0/8,actions=output:7"]);
    let fm = &flow_mods(&got)[0];
    assert_eq!(fm.command, FlowModCommand::Modify);
    assert_eq!(fm.r#match, ip_src);
    assert_eq!(fm.instructions, vec![I::ApplyActions(vec![out(7)])]);

    let (_, got) = ofctl(
        "mod-flows",
        &["--strict"],
        &["priority=100,in_port=1,actions=output:3"],
    );
    let fm = &flow_mods(&got)[0];
    assert_eq!(
        (fm.command, fm.priority),
        (FlowModCommand::ModifyStrict, 100)
    );
    assert_eq!(fm.r#match, mat(vec![exact(F::InPort, 1)]));

    let (_, got) = ofctl("del-flows", &[], &["tcp,tp_dst=80"]);
    let fm = &flow_mods(&got)[0];
    assert_eq!(fm.command, FlowModCommand::Delete);
    assert_eq!(
        (fm.table_id, fm.out_port, fm.out_group),
        (OFPTT_ALL, OFPP_ANY, OFPG_ANY)
    );
    assert_eq!(
        fm.r#match,
        mat(vec![
            exact(F::EthType, 0x0800),
            exact(F::IpProto, 6),
            exact(F::TcpDst, 80)
        ])
    );

    let (_, got) = ofctl("del-flows", &[], &["in_port=1,out_port=2"]);
    let fm = &flow_mods(&got)[0];
    assert_eq!((fm.command, fm.out_port), (FlowModCommand::Delete, 2));

    let (_, got) = ofctl("del-flows", &["--strict"], &["priority=100,in_port=1"]);
    let fm = &flow_mods(&got)[0];
    assert_eq!(
        (fm.command, fm.priority),
        (FlowModCommand::DeleteStrict, 100)
    );

    let (_, got) = ofctl("del-flows", &[], &[]);
    let fm = &flow_mods(&got)[0];
    assert_eq!(
        (fm.command, fm.table_id),
        (FlowModCommand::Delete, OFPTT_ALL)
    );
    assert_eq!(fm.r#match, Match::any());
}

#[test]
fn add_group_carries_its_buckets() {
    if !have_ovs_ofctl() {
        return;
    }
    let groups = |got: &[Message]| -> Vec<GroupMod> {
        got.iter()
            .filter_map(|m| match &m.body {
                Body::GroupMod(g) => Some(g.clone()),
                _ => None,
            })
            .collect()
    };
    let (_, got) = ofctl(
        "add-group",
        &[],
        &["group_id=1,type=all,bucket=output:1,bucket=output:2"],
    );
    let g = &groups(&got)[0];
    assert_eq!(
        (g.command, g.group_type, g.group_id),
        (GroupCommand::Add, GroupType::All, 1)
    );
    assert_eq!(
        g.buckets
            .iter()
            .map(|b| b.actions.clone())
            .collect::<Vec<_>>(),
        vec![vec![out(1)], vec![out(2)]]
    );

    let (_, got) = ofctl(
        "add-group",
        &[],
        &["group_id=2,type=select,bucket=weight:10,actions=output:1,bucket=weight:20,actions=set_field:00:00:00:00:00:02->eth_dst,output:2"],
    );
    let g = &groups(&got)[0];
    assert_eq!((g.group_type, g.group_id), (GroupType::Select, 2));
    assert_eq!(
        g.buckets.iter().map(|b| b.weight).collect::<Vec<_>>(),
        vec![10, 20]
    );
    assert_eq!(
        g.buckets[1].actions,
        vec![A::SetField(exact(F::EthDst, 2)), out(2)]
    );
}

#[test]
fn packet_out_carries_its_actions_and_frame() {
    if !have_ovs_ofctl() {
        return;
    }
    let frame =
        "ffffffffffff0200000000010806000108000604000102000000000a0a0000010000000000000a000002";
    let (_, got) = ofctl(
        "packet-out",
        &[],
        &[&format!("in_port=1 packet={frame} actions=output:2,FLOOD")],
    );
    let po: Vec<PacketOut> = got
        .iter()
        .filter_map(|m| match &m.body {
            Body::PacketOut(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(po.len(), 1, "{got:?}");
    assert_eq!(po[0].buffer_id, OFP_NO_BUFFER);
    assert_eq!(po[0].in_port, 1);
    assert_eq!(po[0].actions, vec![out(2), out(OFPP_FLOOD)]);
    let want: Vec<u8> = (0..frame.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&frame[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(po[0].data, want);
}

#[test]
fn ovs_ofctl_accepts_our_replies() {
    if !have_ovs_ofctl() {
        return;
    }
    let (show, _) = ofctl("show", &[], &[]);
    assert!(show.contains("dpid:00000200000000aa"), "{show}");
    assert!(show.contains("n_tables:8"), "{show}");
    assert!(
        show.contains("vale0:p1") && show.contains("vale0:p2"),
        "{show}"
    );
    assert!(show.contains("miss_send_len=128"), "{show}");

    let (desc, _) = ofctl("dump-ports-desc", &[], &[]);
    assert!(
        desc.contains("1(vale0:p1): addr:02:00:00:00:00:01"),
        "{desc}"
    );
    assert!(
        desc.contains("2(vale0:p2): addr:02:00:00:00:00:02"),
        "{desc}"
    );

    let (flows, got) = ofctl("dump-flows", &[], &[]);
    assert!(flows.contains("cookie=0x42"), "{flows}");
    assert!(flows.contains("n_packets=7, n_bytes=420"), "{flows}");
    assert!(
        flows.contains("priority=100,tcp,tp_dst=80 actions=output:2"),
        "{flows}"
    );
    let req = got.iter().find_map(|m| match &m.body {
        Body::MultipartRequest {
            request: MultipartRequest::Flow(q),
            ..
        } => Some(q.clone()),
        _ => None,
    });
    let req = req.expect("a flow stats request");
    assert_eq!(
        (req.table_id, req.out_port, req.out_group),
        (OFPTT_ALL, OFPP_ANY, OFPG_ANY)
    );

    let (stats, _) = ofctl("dump-ports", &[], &[]);
    assert!(
        stats.contains("port  2: rx pkts=200, bytes=200, drop=200, errs=200"),
        "{stats}"
    );

    let (groups, _) = ofctl("dump-groups", &[], &[]);
    assert!(groups.contains("group_id=7,type=select"), "{groups}");
    assert!(
        groups.contains("bucket=weight:10,actions=output:1"),
        "{groups}"
    );
    assert!(
        groups.contains("bucket=weight:20,actions=output:2"),
        "{groups}"
    );
}

/// What the switch sends unasked (PACKET_IN, FLOW_REMOVED, PORT_STATUS)
/// and the replies ovs-ofctl's commands do not ask for, printed by
/// `ovs-ofctl ofp-print`: each is read without complaint and says what we
/// put in.
#[test]
fn ofp_print_reads_what_the_switch_sends() {
    if !have_ovs_ofctl() {
        return;
    }
    use ringswitch_openflow::message::{
        AsyncConfig, ErrorMsg, FlowRemoved, PacketIn, PortStatus, Role,
    };
    use ringswitch_openflow::multipart::{AggregateStats, GroupStats, TableStats};
    let frame: Vec<u8> = (0..60).collect();
    let tcp = canned_flows()[0].r#match.clone();
    let cases: Vec<(Body, &str)> = vec![
        (
            Body::PacketIn(PacketIn {
                buffer_id: OFP_NO_BUFFER,
                total_len: 60,
                reason: OFPR_NO_MATCH,
                table_id: 2,
                cookie: 0x77,
                r#match: mat(vec![exact(F::InPort, 3)]),
                data: frame,
            }),
            "OFPT_PACKET_IN (OF1.3) (xid=0x5): table_id=2 cookie=0x77 total_len=60 in_port=3 (via no_match) data_len=60 (unbuffered)",
        ),
        (
            Body::FlowRemoved(FlowRemoved {
                cookie: 0x42,
                priority: 100,
                reason: OFPRR_IDLE_TIMEOUT,
                table_id: 1,
                duration_sec: 5,
                duration_nsec: 0,
                idle_timeout: 10,
                hard_timeout: 0,
                packet_count: 7,
                byte_count: 420,
                r#match: tcp.clone(),
            }),
            "OFPT_FLOW_REMOVED (OF1.3) (xid=0x5): priority=100,tcp,tp_dst=80 reason=idle table_id=1 cookie:0x42 duration5s idle10 pkts7 bytes420",
        ),
        (
            Body::PortStatus(PortStatus { reason: OFPPR_ADD, desc: ports()[1].clone() }),
            "OFPT_PORT_STATUS (OF1.3) (xid=0x5): ADD: 2(vale0:p2): addr:02:00:00:00:00:02",
        ),
        (
            Body::Error(ErrorMsg {
                code: ErrorCode::BAD_MATCH_BAD_PREREQ,
                data: Message::new(9, Body::BarrierRequest).encode().unwrap(),
            }),
            "OFPT_ERROR (OF1.3) (xid=0x5): OFPBMC_BAD_PREREQ",
        ),
        (Body::RoleReply(Role { role: OFPCR_ROLE_MASTER, generation_id: 3 }), "role=primary generation_id=3"),
        (
            Body::GetAsyncReply(AsyncConfig {
                packet_in_mask: [1, 0],
                port_status_mask: [7, 7],
                flow_removed_mask: [15, 0],
            }),
            "OFPT_GET_ASYNC_REPLY (OF1.3) (xid=0x5):",
        ),
        (
            Body::MultipartReply {
                flags: 0,
                reply: MultipartReply::Aggregate(AggregateStats { packet_count: 7, byte_count: 420, flow_count: 2 }),
            },
            "packet_count=7 byte_count=420 flow_count=2",
        ),
        (
            Body::MultipartReply {
                flags: 0,
                reply: MultipartReply::Table(vec![TableStats { table_id: 0, active_count: 4, lookup_count: 10, matched_count: 8 }]),
            },
            "active=4, lookup=10, matched=8",
        ),
        (
            Body::MultipartReply {
                flags: 0,
                reply: MultipartReply::Group(vec![GroupStats {
                    group_id: 7,
                    ref_count: 1,
                    packet_count: 5,
                    byte_count: 300,
                    duration_sec: 2,
                    duration_nsec: 0,
                    buckets: vec![(2, 120), (3, 180)],
                }]),
            },
            "group_id=7,duration=2s,ref_count=1,packet_count=5,byte_count=300,bucket0:packet_count=2,byte_count=120,bucket1:packet_count=3,byte_count=180",
        ),
        (
            Body::MultipartReply {
                flags: 0,
                reply: MultipartReply::Desc(SwitchDesc { mfr_desc: "ringswitch".into(), ..SwitchDesc::default() }),
            },
            "Manufacturer: ringswitch",
        ),
    ];
    for (body, want) in cases {
        let wire = Message::new(5, body).encode().unwrap();
        let hex: String = wire.iter().map(|b| format!("{b:02x}")).collect();
        let out = Command::new("ovs-ofctl")
            .args(["ofp-print", &hex])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(!text.contains("***"), "ovs-ofctl complains: {text}");
        assert!(text.contains(want), "wanted {want:?} in: {text}");
    }
}
