//! Ring validation and forwarding over shared memory a hostile client
//! writes: two or three ring ports on one switch, each with a fuzz-chosen
//! geometry, driven by a sequence of operations that mix well-behaved
//! client actions (queue frames, publish, consume RX) with raw writes a
//! hostile client can make (any head/cur, any slot word, fragment flags,
//! any `hwtail` in the CSB a peer should not write, bytes anywhere in the
//! region). After every operation the switch's own view stays in range and
//! nothing panics: `PortRing::app_head` and `AppRing::accept_tail` refuse
//! what is out of range, fragment chains are bounded. Ports may have VLANs,
//! so tags are read, pushed, stripped and rewritten on frames whose
//! fragments the client keeps changing. The switch may have flow tables
//! (outputs to ports, IN_PORT, ALL, NORMAL and the controller, with tag
//! pushes and pops, address and DSCP rewrites, changed under traffic), so
//! keys are extracted from those frames and edits applied to them.
#![no_main]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_control::PortVlan;
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{FlowMod, FlowModCommand};
use ringswitch_openflow::oxm::OFPVID_PRESENT;
use ringswitch_openflow::{Action, Field, Instruction, Match, Oxm};
use ringswitch_ring::{AppRing, Dir, Geometry, NetmapSlot, Region, RegionLayout};
use ringswitch_switch::{FailMode, Flows, Hub, LearningBridge, Scratch, Switch, SwitchPort};

#[derive(Arbitrary, Debug)]
struct PortSpec {
    slots: u8,
    buf: u8,
    tx_rings: bool,
    /// Its VLANs: the default, access:10, trunk:10,20 or trunk:0,10 (the
    /// frames' tags come from `Payload` writes).
    vlan: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A well-behaved client queues `n` frames to MAC `dst` (0xff: broadcast).
    Send {
        port: u8,
        ring: u8,
        n: u8,
        dst: u8,
        len: u16,
        morefrag_every: u8,
    },
    /// Raw slot write, anywhere in the TX ring.
    Slot {
        port: u8,
        ring: u8,
        slot: u16,
        buf_idx: Option<u32>,
        len: u16,
        flags: u16,
    },
    /// Raw head and cur in the CSB (what the switch reads).
    Head {
        port: u8,
        ring: u8,
        head: u32,
        cur: u32,
    },
    /// Raw head/cur/tail in the ring header (what netmap programs write).
    Header {
        port: u8,
        ring: u8,
        head: u32,
        cur: u32,
        tail: u32,
    },
    /// The switch takes one batch from a TX ring.
    Forward { port: u8, ring: u8 },
    /// A well-behaved client consumes up to `n` received frames.
    Consume { port: u8, ring: u8, n: u16 },
    /// Raw RX head in the CSB (the client hands back slots it never had).
    RxHead { port: u8, ring: u8, head: u32 },
    /// The client side meets a `hwtail` a peer wrote.
    Tail {
        port: u8,
        ring: u8,
        rx: bool,
        hwtail: u32,
    },
    /// Bytes anywhere in the region.
    Scribble { port: u8, off: u32, data: Vec<u8> },
    /// The flow tables change (their version moves under traffic): flow
    /// `which` of `FLOWS` is added again or deleted.
    Reflow { which: u8, delete: bool },
    /// The controller takes what was queued for it.
    TakePacketIns,
    /// Writes into the buffer of a TX slot.
    Payload {
        port: u8,
        ring: u8,
        slot: u16,
        off: u16,
        data: Vec<u8>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    hub: bool,
    /// Flow tables decide (and with `standalone`, the learning bridge
    /// instead while no controller is connected).
    flows: bool,
    standalone: bool,
    batch: u16,
    ports: [PortSpec; 3],
    three: bool,
    ops: Vec<Op>,
}

struct Port {
    sw: Arc<SwitchPort>,
    region: Arc<Region>,
    tx: Vec<AppRing>,
    rx: Vec<AppRing>,
}

const SLOTS: [u32; 4] = [64, 128, 256, 64];
const BUFS: [u32; 5] = [128, 192, 2048, 4096, 65536];

fn out(port: u32, max_len: u16) -> Action {
    Action::Output { port, max_len }
}

/// Flow `i` of the tables a fuzzed switch may have.
fn flow(i: u8) -> FlowMod {
    let udp = vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::IpProto, 17),
    ];
    let (priority, fields, actions) = match i % 5 {
        0 => (
            30,
            udp,
            vec![
                Action::PushVlan(0x8100),
                Action::SetField(Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 7))),
                Action::SetField(Oxm::exact(Field::IpDscp, 46)),
                out(OFPP_ALL, 0),
                Action::PopVlan,
                Action::PopVlan,
                out(OFPP_CONTROLLER, 40),
            ],
        ),
        1 => (
            20,
            vec![Oxm::exact(Field::InPort, 1)],
            vec![
                Action::SetField(Oxm::exact(Field::EthDst, 0x0200_0000_0001)),
                out(2, 0),
                out(OFPP_IN_PORT, 0),
            ],
        ),
        2 => (
            15,
            vec![Oxm::exact(Field::VlanVid, u128::from(OFPVID_PRESENT | 10))],
            vec![Action::PopVlan, out(OFPP_NORMAL, 0)],
        ),
        3 => (10, vec![], vec![out(OFPP_NORMAL, 0)]),
        _ => (0, vec![], vec![out(OFPP_CONTROLLER, OFPCML_NO_BUFFER)]),
    };
    let mut fm = FlowMod::add(
        0,
        priority,
        Match::new(fields).expect("a valid match"),
        vec![Instruction::ApplyActions(actions)],
    );
    fm.cookie = u64::from(i);
    fm
}

fn pick<T>(v: &mut [T], i: u8) -> &mut T {
    let n = v.len();
    &mut v[usize::from(i) % n]
}

fuzz_target!(|inp: Input| {
    let fwd: Box<dyn ringswitch_switch::Forwarding> = if inp.hub {
        Box::new(Hub)
    } else {
        Box::new(LearningBridge::default())
    };
    let sw = Switch::new("vale0", fwd, u32::from(inp.batch % 600).max(1));
    let flows = Arc::new(Flows::new(ringswitch_flow::Config::default()).expect("an eventfd"));
    let now = std::time::Duration::ZERO;
    if inp.flows {
        for i in 0..5 {
            flows
                .modify(|t| t.flow_mod(&flow(i), now))
                .expect("a valid flow");
        }
        if inp.standalone {
            flows.set_fail_mode(FailMode::Standalone);
        }
        sw.set_flows(Some(flows.clone()));
    }
    let count = if inp.three { 3 } else { 2 };
    let mut ports: Vec<Port> = Vec::new();
    for (i, spec) in inp.ports.iter().take(count).enumerate() {
        let slots = SLOTS[usize::from(spec.slots) % SLOTS.len()];
        let g = Geometry {
            tx_rings: if spec.tx_rings { 2 } else { 1 },
            rx_rings: 1,
            tx_slots: slots,
            rx_slots: SLOTS[usize::from(spec.slots >> 4) % SLOTS.len()],
            buf_size: BUFS[usize::from(spec.buf) % BUFS.len()],
        };
        let Ok(layout) = RegionLayout::new(g, 1) else {
            return;
        };
        let name = format!("p{i}");
        let region = Arc::new(Region::create(layout, [&name, ""]).expect("memfd region"));
        let vlan = match spec.vlan % 4 {
            0 => PortVlan::default(),
            1 => PortVlan::Access(10),
            2 => "trunk:10,20".parse().expect("a valid set"),
            _ => "trunk:0,10".parse().expect("a valid set"),
        };
        let Ok(p) = sw
            .attach(|idx| Ok(SwitchPort::new(name.clone(), idx, region.clone())?.with_vlan(vlan)))
        else {
            return;
        };
        let tx = (0..g.tx_rings)
            .map(|r| AppRing::new(region.clone(), 0, Dir::Tx, r))
            .collect();
        let rx = (0..g.rx_rings)
            .map(|r| AppRing::new(region.clone(), 0, Dir::Rx, r))
            .collect();
        ports.push(Port {
            sw: p,
            region,
            tx,
            rx,
        });
    }
    let mut sc = Scratch::default();
    for op in inp.ops.iter().take(256) {
        match op {
            Op::Send {
                port,
                ring,
                n,
                dst,
                len,
                morefrag_every,
            } => {
                let p = pick(&mut ports, *port);
                let me = p.sw.index;
                let tx = pick(&mut p.tx, *ring);
                tx.refresh_tail();
                let k = u32::from(*n).min(tx.space());
                for j in 0..k {
                    let Some(mut s) = tx.slot_mut(j) else { break };
                    let mut hdr = [0u8; 14];
                    hdr[..6].copy_from_slice(&if *dst == 0xff {
                        [0xff; 6]
                    } else {
                        [2, 0, 0, 0, 0, *dst]
                    });
                    hdr[6..12].copy_from_slice(&[2, 0, 0, 0, 0, me as u8]);
                    s.write_at(0, &hdr);
                    let flags = if *morefrag_every != 0 && j % u32::from(*morefrag_every) != 0 {
                        ringswitch_ring::layout::NS_MOREFRAG
                    } else {
                        0
                    };
                    s.set_len_flags(*len, flags);
                }
                tx.advance(k);
                tx.publish();
            }
            Op::Slot {
                port,
                ring,
                slot,
                buf_idx,
                len,
                flags,
            } => {
                let p = pick(&mut ports, *port);
                let tx = pick(&mut p.tx, *ring);
                let r = tx.ring();
                let i = u32::from(*slot) % r.num_slots();
                let old = r.slot(i);
                r.set_slot(
                    i,
                    NetmapSlot {
                        buf_idx: buf_idx.unwrap_or(old.buf_idx),
                        len: *len,
                        flags: *flags,
                        ptr: old.ptr,
                    },
                );
            }
            Op::Head {
                port,
                ring,
                head,
                cur,
            } => {
                let p = pick(&mut ports, *port);
                let tx = pick(&mut p.tx, *ring);
                tx.csb().cur().store(*cur, Ordering::Relaxed);
                tx.csb().head().store(*head, Ordering::Release);
            }
            Op::Header {
                port,
                ring,
                head,
                cur,
                tail,
            } => {
                let p = pick(&mut ports, *port);
                let tx = pick(&mut p.tx, *ring);
                tx.ring().set_pointers(*head, *cur, *tail);
                let _ = tx.adopt_header_pointers();
            }
            Op::Forward { port, ring } => {
                let n = ports.len();
                let p = &ports[usize::from(*port) % n];
                let rings = p.tx.len();
                let r = sw.forward(&p.sw, usize::from(*ring) % rings, &mut sc);
                let slots = p.tx[0].num_slots().max(p.tx[rings - 1].num_slots());
                assert!(
                    r.slots <= slots,
                    "{} slots consumed from a ring of {slots}",
                    r.slots
                );
                assert!(
                    r.packets <= r.slots,
                    "{} packets from {} slots",
                    r.packets,
                    r.slots
                );
                for q in &ports {
                    for rx in &q.rx {
                        let n = rx.num_slots();
                        let c = rx.csb();
                        // The switch publishes only values in range.
                        assert!(
                            c.hwtail().load(Ordering::Acquire) < n,
                            "RX hwtail out of range"
                        );
                        assert!(
                            c.hwcur().load(Ordering::Relaxed) < n,
                            "RX hwcur out of range"
                        );
                    }
                }
            }
            Op::Consume { port, ring, n } => {
                let p = pick(&mut ports, *port);
                let buf = p.region.buf_size() as usize;
                let rx = pick(&mut p.rx, *ring);
                rx.refresh_tail();
                let k = u32::from(*n).min(rx.space());
                for j in 0..k {
                    if let Some(s) = rx.slot_mut(j) {
                        assert!(s.payload().len() <= buf, "payload view past its buffer");
                    }
                }
                rx.advance(k);
                rx.publish();
            }
            Op::RxHead { port, ring, head } => {
                let p = pick(&mut ports, *port);
                let rx = pick(&mut p.rx, *ring);
                rx.csb().head().store(*head, Ordering::Release);
                rx.csb().cur().store(*head, Ordering::Relaxed);
            }
            Op::Tail {
                port,
                ring,
                rx,
                hwtail,
            } => {
                let p = pick(&mut ports, *port);
                let a = if *rx {
                    pick(&mut p.rx, *ring)
                } else {
                    pick(&mut p.tx, *ring)
                };
                let before = a.tail();
                let moved = a.accept_tail(*hwtail);
                let n = a.num_slots();
                assert!(a.tail() < n, "accepted tail out of range");
                assert!(moved || a.tail() == before);
                assert!(a.space() < n);
            }
            Op::Scribble { port, off, data } => {
                let p = pick(&mut ports, *port);
                let len = p.region.len().max(1);
                let _ = p.region.scribble(*off as usize % len, data);
            }
            Op::Reflow { which, delete } => {
                let mut fm = flow(*which);
                if *delete {
                    fm.command = FlowModCommand::DeleteStrict;
                }
                flows
                    .modify(|t| t.flow_mod(&fm, now))
                    .expect("a valid flow mod");
                flows.set_connected(*delete);
            }
            Op::TakePacketIns => {
                flows.take_packet_ins(usize::MAX, |p| {
                    assert!(p.data.len() <= p.total_len as usize);
                });
            }
            Op::Payload {
                port,
                ring,
                slot,
                off,
                data,
            } => {
                let p = pick(&mut ports, *port);
                let region = p.region.clone();
                let tx = pick(&mut p.tx, *ring);
                let r = tx.ring();
                let i = u32::from(*slot) % r.num_slots();
                let _ = region.write_buf(r.buf_idx(i), usize::from(*off), data);
            }
        }
    }
    // Everything still moves: every port's rings can be forwarded once more.
    for p in &ports {
        for r in 0..p.tx.len() {
            sw.forward(&p.sw, r, &mut sc);
        }
    }
    // The flows' counters take what the worker counted, within bounds.
    sc.flush_counters();
    let table = flows.read();
    for f in table.flows() {
        let (packets, bytes) = f.counts();
        assert!(bytes >= packets * 14, "every frame counted has a header");
    }
});
