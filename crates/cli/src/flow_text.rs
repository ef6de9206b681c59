//! A flow as `ovs-ofctl dump-flows` writes it, from the daemon's `flows`
//! reply: `cookie=0x0, duration=1.5s, table=0, n_packets=0, n_bytes=0,
//! priority=100,in_port=1 actions=output:2`.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use ringswitch_control::proto::FlowEntry;
use ringswitch_openflow::consts::*;
use ringswitch_openflow::multipart::FlowStats;
use ringswitch_openflow::oxm::{mac_bytes, Field as F};
use ringswitch_openflow::{Action, Body, Instruction, Match, Message, MultipartReply, Oxm};

/// The priority ovs-ofctl leaves out.
const DEFAULT_PRIORITY: u16 = 0x8000;

/// Why a flow of the reply cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("the daemon's description of a flow is not an OpenFlow flow entry")]
pub struct BadFlow;

/// The flow the entry carries, decoded.
pub fn decode(e: &FlowEntry) -> Result<FlowStats, BadFlow> {
    let s = e.ofp_flow_stats.as_bytes();
    if !s.len().is_multiple_of(2) {
        return Err(BadFlow);
    }
    let bytes = s
        .chunks(2)
        .map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or(BadFlow)?;
    match Message::decode(&bytes).map_err(|_| BadFlow)?.body {
        Body::MultipartReply {
            reply: MultipartReply::Flow(mut v),
            ..
        } if v.len() == 1 => Ok(v.remove(0)),
        _ => Err(BadFlow),
    }
}

/// The line ovs-ofctl prints for the flow (durations from the entry).
pub fn line(e: &FlowEntry, f: &FlowStats) -> String {
    let mut s = format!(
        " cookie={:#x}, duration={}.{:03}s, table={}, n_packets={}, n_bytes={}, ",
        f.cookie,
        e.duration_ms / 1000,
        e.duration_ms % 1000,
        f.table_id,
        f.packet_count,
        f.byte_count
    );
    if f.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={}, ", f.idle_timeout);
    }
    if f.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={}, ", f.hard_timeout);
    }
    let m = match_text(f);
    s.push_str(&m);
    if m.is_empty() {
        // What ovs-ofctl prints for a match of everything at the default
        // priority: nothing before the actions.
        s.truncate(s.trim_end().len());
    }
    s.push_str(" actions=");
    s.push_str(&instructions(&f.instructions));
    s
}

/// The flow's priority and match, as between `n_bytes=..., ` and
/// ` actions=` (empty for a match of everything at the default priority).
pub fn match_text(f: &FlowStats) -> String {
    let mut m = Vec::new();
    if f.priority != DEFAULT_PRIORITY {
        m.push(format!("priority={}", f.priority));
    }
    m.extend(match_words(&f.r#match));
    m.join(",")
}

fn ip4(v: u128) -> Ipv4Addr {
    Ipv4Addr::from(v as u32)
}

fn mac(v: u128) -> String {
    let b = mac_bytes(v);
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5]
    )
}

/// A prefix length if `mask` is one (`bits` wide).
fn prefix(mask: u128, bits: u32) -> Option<u32> {
    let n = mask.count_ones();
    let want = if n == 0 {
        0
    } else {
        (u128::MAX >> (128 - n)) << (bits - n)
    };
    (mask == want).then_some(n)
}

/// One field's value the way ovs-ofctl writes it.
fn value(o: &Oxm) -> String {
    let v = o.value;
    match o.field {
        F::EthDst | F::EthSrc | F::ArpSha | F::ArpTha => match o.mask {
            Some(m) => format!("{}/{}", mac(v), mac(m)),
            None => mac(v),
        },
        F::Ipv4Src | F::Ipv4Dst | F::ArpSpa | F::ArpTpa => match o.mask {
            Some(m) => match prefix(m, 32) {
                Some(n) => format!("{}/{n}", ip4(v)),
                None => format!("{}/{}", ip4(v), ip4(m)),
            },
            None => ip4(v).to_string(),
        },
        F::Ipv6Src | F::Ipv6Dst | F::Ipv6NdTarget => match o.mask {
            Some(m) => match prefix(m, 128) {
                Some(n) => format!("{}/{n}", Ipv6Addr::from(v)),
                None => format!("{}/{}", Ipv6Addr::from(v), Ipv6Addr::from(m)),
            },
            None => Ipv6Addr::from(v).to_string(),
        },
        F::EthType => format!("{v:#06x}"),
        _ => match o.mask {
            Some(m) => format!("{v:#x}/{m:#x}"),
            None if matches!(o.field, F::Metadata | F::TunnelId) => format!("{v:#x}"),
            None => v.to_string(),
        },
    }
}

/// The match as ovs-ofctl's words, with its protocol shorthands (`ip`,
/// `tcp`, `udp6`, `arp`, ...).
fn match_words(m: &Match) -> Vec<String> {
    let get = |f| m.get(f).filter(|o| o.mask.is_none()).map(|o| o.value);
    let eth = get(F::EthType);
    let proto = get(F::IpProto);
    let short = match (eth, proto) {
        (Some(0x0800), Some(1)) => Some("icmp"),
        (Some(0x0800), Some(6)) => Some("tcp"),
        (Some(0x0800), Some(17)) => Some("udp"),
        (Some(0x0800), Some(132)) => Some("sctp"),
        (Some(0x86dd), Some(58)) => Some("icmp6"),
        (Some(0x86dd), Some(6)) => Some("tcp6"),
        (Some(0x86dd), Some(17)) => Some("udp6"),
        (Some(0x86dd), Some(132)) => Some("sctp6"),
        (Some(0x0800), _) => Some("ip"),
        (Some(0x86dd), _) => Some("ipv6"),
        (Some(0x0806), _) => Some("arp"),
        _ => None,
    };
    let with_proto = short.is_some_and(|s| !matches!(s, "ip" | "ipv6" | "arp"));
    let mut out = Vec::new();
    if let Some(s) = short {
        out.push(s.to_string());
    }
    for o in m.fields() {
        let name = match o.field {
            F::EthType if short.is_some() => continue,
            F::IpProto if with_proto => continue,
            F::InPort => "in_port",
            F::Metadata => "metadata",
            F::EthDst => "dl_dst",
            F::EthSrc => "dl_src",
            F::EthType => "dl_type",
            F::VlanVid => {
                let w = match (o.value, o.mask) {
                    (0, None) => "vlan_tci=0x0000/0x1fff".to_string(),
                    (v, None) => format!("dl_vlan={}", v & 0xfff),
                    (v, Some(m)) => format!("vlan_vid={v:#x}/{m:#x}"),
                };
                out.push(w);
                continue;
            }
            F::VlanPcp => "dl_vlan_pcp",
            F::IpDscp => {
                out.push(format!("nw_tos={}", o.value << 2));
                continue;
            }
            F::IpProto => "nw_proto",
            F::Ipv4Src => "nw_src",
            F::Ipv4Dst => "nw_dst",
            F::TcpSrc | F::UdpSrc | F::SctpSrc => "tp_src",
            F::TcpDst | F::UdpDst | F::SctpDst => "tp_dst",
            F::Icmpv4Type | F::Icmpv6Type => "icmp_type",
            F::Icmpv4Code | F::Icmpv6Code => "icmp_code",
            F::ArpSpa => "arp_spa",
            F::ArpTpa => "arp_tpa",
            F::ArpOp => "arp_op",
            F::Ipv6NdTarget => "nd_target",
            f => f.name(),
        };
        out.push(format!("{name}={}", value(o)));
    }
    out
}

fn port(p: u32) -> String {
    match p {
        OFPP_IN_PORT => "IN_PORT".into(),
        OFPP_TABLE => "TABLE".into(),
        OFPP_NORMAL => "NORMAL".into(),
        OFPP_FLOOD => "FLOOD".into(),
        OFPP_ALL => "ALL".into(),
        OFPP_LOCAL => "LOCAL".into(),
        OFPP_ANY => "ANY".into(),
        n => n.to_string(),
    }
}

fn action(a: &Action) -> String {
    match a {
        Action::Output {
            port: OFPP_CONTROLLER,
            max_len,
        } => format!("CONTROLLER:{max_len}"),
        Action::Output { port: p, .. } if *p > OFPP_MAX => port(*p),
        Action::Output { port: p, .. } => format!("output:{p}"),
        Action::PushVlan(t) => format!("push_vlan:{t:#06x}"),
        Action::PopVlan => "pop_vlan".into(),
        Action::Group(g) => format!("group:{g}"),
        Action::SetField(o) => {
            let v = match o.field {
                F::VlanVid => (o.value & 0xfff).to_string(),
                F::IpDscp => (o.value << 2).to_string(),
                _ => value(o),
            };
            let name = match o.field {
                F::IpDscp => "nw_tos",
                F::EthDst => "eth_dst",
                F::EthSrc => "eth_src",
                f => f.name(),
            };
            format!("set_field:{v}->{name}")
        }
        Action::PushMpls(t) => format!("push_mpls:{t:#06x}"),
        Action::PopMpls(t) => format!("pop_mpls:{t:#06x}"),
        Action::SetQueue(q) => format!("set_queue:{q}"),
        Action::SetNwTtl(t) => format!("mod_nw_ttl:{t}"),
        Action::DecNwTtl => "dec_ttl".into(),
        Action::SetMplsTtl(t) => format!("set_mpls_ttl({t})"),
        Action::DecMplsTtl => "dec_mpls_ttl".into(),
        Action::CopyTtlOut => "copy_ttl_out".into(),
        Action::CopyTtlIn => "copy_ttl_in".into(),
        Action::PushPbb(t) => format!("push_pbb:{t:#06x}"),
        Action::PopPbb => "pop_pbb".into(),
        Action::Experimenter { experimenter, .. } => format!("experimenter:{experimenter:#x}"),
    }
}

fn actions(list: &[Action]) -> Vec<String> {
    list.iter().map(action).collect()
}

/// The instructions as ovs-ofctl writes them after `actions=`.
pub fn instructions(ins: &[Instruction]) -> String {
    let mut out = Vec::new();
    for i in ins {
        match i {
            Instruction::ApplyActions(a) => out.extend(actions(a)),
            Instruction::ClearActions => out.push("clear_actions".into()),
            Instruction::WriteActions(a) => {
                out.push(format!("write_actions({})", actions(a).join(",")))
            }
            Instruction::WriteMetadata { metadata, mask } => {
                if *mask == u64::MAX {
                    out.push(format!("write_metadata:{metadata:#x}"))
                } else {
                    out.push(format!("write_metadata:{metadata:#x}/{mask:#x}"))
                }
            }
            Instruction::GotoTable(t) => out.push(format!("goto_table:{t}")),
            Instruction::Meter(m) => out.push(format!("meter:{m}")),
            Instruction::Experimenter { experimenter, .. } => {
                out.push(format!("experimenter:{experimenter:#x}"))
            }
        }
    }
    if out.is_empty() {
        "drop".into()
    } else {
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(m: Vec<Oxm>, ins: Vec<Instruction>) -> FlowStats {
        FlowStats {
            table_id: 0,
            duration_sec: 1,
            duration_nsec: 0,
            priority: 100,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            cookie: 0x42,
            packet_count: 7,
            byte_count: 420,
            r#match: Match::new(m).unwrap(),
            instructions: ins,
        }
    }

    fn entry() -> FlowEntry {
        FlowEntry {
            name: String::new(),
            table_id: 0,
            priority: 100,
            cookie: 0x42,
            duration_ms: 1500,
            n_packets: 7,
            n_bytes: 420,
            idle_timeout: 0,
            hard_timeout: 0,
            ofp_flow_stats: String::new(),
        }
    }

    #[test]
    fn lines_read_as_ovs_ofctl_writes_them() {
        let f = flow(
            vec![
                Oxm::exact(F::EthType, 0x0800),
                Oxm::exact(F::IpProto, 6),
                Oxm::masked(F::Ipv4Src, 0x0a00_0000, 0xff00_0000),
                Oxm::exact(F::TcpDst, 80),
            ],
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: 2,
                max_len: 0,
            }])],
        );
        assert_eq!(
            line(&entry(), &f),
            " cookie=0x42, duration=1.500s, table=0, n_packets=7, n_bytes=420, priority=100,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=output:2"
        );
        let drop = FlowStats {
            priority: DEFAULT_PRIORITY,
            ..flow(vec![], vec![])
        };
        assert_eq!(
            line(&entry(), &drop),
            " cookie=0x42, duration=1.500s, table=0, n_packets=7, n_bytes=420, actions=drop"
        );
    }

    #[test]
    fn entries_decode_what_the_daemon_encodes_and_refuse_the_rest() {
        let f = flow(vec![Oxm::exact(F::InPort, 1)], vec![]);
        let wire = MultipartReply::Flow(vec![f.clone()])
            .into_messages(0)
            .remove(0)
            .encode()
            .unwrap();
        let e = FlowEntry {
            ofp_flow_stats: wire.iter().map(|b| format!("{b:02x}")).collect(),
            ..entry()
        };
        assert_eq!(decode(&e).unwrap(), f);
        let bad = FlowEntry {
            ofp_flow_stats: "zz".into(),
            ..entry()
        };
        assert!(decode(&bad).is_err());
    }
}
