//! Frame builders, flow-mod helpers and a deterministic pseudo-random
//! generator shared by the tests.
#![allow(dead_code)]

use std::time::Duration;

use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{FlowMod, FlowModCommand};
use ringswitch_openflow::{Action, Field, Instruction, Match, Oxm};

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// xorshift64*: the same sequence on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An Ethernet frame, with one 802.1Q tag when `vlan` is (vid, pcp).
pub fn eth(
    dst: [u8; 6],
    src: [u8; 6],
    vlan: Option<(u16, u8)>,
    ty: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some((vid, pcp)) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&((u16::from(pcp) << 13) | vid).to_be_bytes());
    }
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 header with `options` (a multiple of 4 bytes) and `l4` after.
pub fn ipv4(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    tos: u8,
    options: &[u8],
    frag: u16,
    l4: &[u8],
) -> Vec<u8> {
    let ihl = (20 + options.len()) / 4;
    let total = (ihl * 4 + l4.len()) as u16;
    let mut h = vec![0x40 | ihl as u8, tos];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 1]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(options);
    h.extend_from_slice(l4);
    h
}

/// An IPv6 header; `rest` is extension headers and L4.
pub fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, tc: u8, flabel: u32, rest: &[u8]) -> Vec<u8> {
    let first = (6u32 << 28) | (u32::from(tc) << 20) | (flabel & 0xfffff);
    let mut h = first.to_be_bytes().to_vec();
    h.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(rest);
    h
}

pub fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut h = sport.to_be_bytes().to_vec();
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 8, 0, 0]);
    h
}

pub fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut h = sport.to_be_bytes().to_vec();
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&[0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    h
}

pub fn icmp(ty: u8, code: u8) -> Vec<u8> {
    vec![ty, code, 0, 0, 0, 0, 0, 0]
}

pub fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut h = vec![0, 1, 8, 0, 6, 4];
    h.extend_from_slice(&op.to_be_bytes());
    h.extend_from_slice(&sha);
    h.extend_from_slice(&spa);
    h.extend_from_slice(&tha);
    h.extend_from_slice(&tpa);
    h
}

/// A UDP/IPv4 frame 10.0.0.`a` → 10.0.0.`b`, ports `sport` → `dport`,
/// padded to 60 bytes.
pub fn udp4(a: u8, b: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = eth(
        MAC_B,
        MAC_A,
        None,
        0x0800,
        &ipv4(
            [10, 0, 0, a],
            [10, 0, 0, b],
            17,
            0,
            &[],
            0,
            &udp(sport, dport),
        ),
    );
    f.resize(60, 0);
    f
}

pub fn m(fields: Vec<Oxm>) -> Match {
    Match::new(fields).expect("a valid match")
}

pub fn ip_udp() -> Vec<Oxm> {
    vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::IpProto, 17),
    ]
}

pub fn out(port: u32) -> Action {
    Action::Output {
        port,
        max_len: OFPCML_NO_BUFFER,
    }
}

pub fn apply(actions: Vec<Action>) -> Instruction {
    Instruction::ApplyActions(actions)
}

pub fn flow_mod(
    command: FlowModCommand,
    table_id: u8,
    priority: u16,
    r#match: Match,
    instructions: Vec<Instruction>,
) -> FlowMod {
    FlowMod {
        command,
        ..FlowMod::add(table_id, priority, r#match, instructions)
    }
}

pub fn add(table_id: u8, priority: u16, r#match: Match, instructions: Vec<Instruction>) -> FlowMod {
    flow_mod(
        FlowModCommand::Add,
        table_id,
        priority,
        r#match,
        instructions,
    )
}

pub const T0: Duration = Duration::ZERO;

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
