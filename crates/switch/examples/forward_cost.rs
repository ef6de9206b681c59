//! CPU cost of the forwarding engine alone: one thread plays sender,
//! switch worker and receiver in turn, so the figure is the engine's
//! nanoseconds per packet without cross-core traffic or wake-ups.
//!
//! `cargo run --release -p ringswitch-switch --example forward_cost [len] [batch] [vlan] [packets] [evict_kb] [tuples]`
//!
//! `vlan`: `none` (the default: no VLAN set anywhere), `access` (both ports
//! `access:10`: the VLAN lookup, no tag edits) or `push` (a is `access:10`,
//! b `trunk:10`: a tag pushed onto every frame on the way). Or flow tables
//! in place of the learning bridge: `flows` (one flow, in_port=1 to port
//! 2) or `flows1000` (1,000 flows over 10 masks, and frames of 1,000
//! UDP 5-tuples, each of which matches one of them), or `flows1` (the one
//! flow of `flows`, and the frames of `flows1000`: every frame is looked
//! up in the cache, as with 1,000 flows, and all get one verdict, as OVS's
//! port-to-port flow in bench/compare's flows section).
//!
//! `tuples` (default 1,000; `flows1000` and `flows1` only): how many of the 1,000
//! 5-tuples the frames cycle through. With 1, every frame looks up the
//! cache entry the one before it did, already in the CPU's cache: what the
//! flow path costs a frame with the cheapest lookup (its key, hash, probe
//! and filing).
//!
//! `evict_kb` (default 0): kilobytes written between two batches, outside
//! the timing, as a sender sharing the worker's CPU writes its frames (a
//! line each 64 bytes): what the engine's per-packet cost becomes when its
//! data leaves the CPU's caches between batches.

use std::sync::Arc;
use std::time::Instant;

use std::time::Duration;

use ringswitch_control::PortVlan;
use ringswitch_flow::Config;
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::FlowMod;
use ringswitch_openflow::{Action, Field, Instruction, Match, Oxm};
use ringswitch_ring::{AppRing, Dir, Geometry, Region, RegionLayout};
use ringswitch_switch::{Flows, LearningBridge, Scratch, Switch, SwitchPort};

/// 5-tuples in the `flows1000` mode.
const TUPLES: u32 = 1000;

/// A flow of priority `prio` in table 0 outputting to port 2.
fn to_b(prio: u16, fields: Vec<Oxm>) -> FlowMod {
    FlowMod::add(
        0,
        prio,
        Match::new(fields).unwrap(),
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: 2,
            max_len: OFPCML_NO_BUFFER,
        }])],
    )
}

/// Tuple `t`: (source address, destination address, source port,
/// destination port) of a UDP frame from 10.0.0.0/16 to 10.1.0.0/16.
fn tuple(t: u32) -> (u32, u32, u16, u16) {
    let t16 = u16::try_from(t % 65536).unwrap();
    (
        0x0a00_0000 | t,
        0x0a01_0000 | (t * 7 % 65536),
        1024 + t16,
        2000 + t16 % 100,
    )
}

/// 1,000 flows over 10 masks: 100 per mask, each mask a different set of
/// the tuple's fields (or prefixes of them), every tuple matched by one.
fn thousand_flows() -> Vec<FlowMod> {
    let ip_udp = || {
        vec![
            Oxm::exact(Field::EthType, 0x0800),
            Oxm::exact(Field::IpProto, 17),
        ]
    };
    let mut v = Vec::new();
    for m in 0..10u32 {
        for i in 0..100u32 {
            // Tuples m*100 .. m*100+99 are this mask's.
            let (src, dst, sp, dp) = tuple(m * 100 + i);
            let mut f = ip_udp();
            match m {
                0 => f.push(Oxm::exact(Field::Ipv4Src, u128::from(src))),
                1 => f.push(Oxm::exact(Field::Ipv4Dst, u128::from(dst))),
                2 => f.push(Oxm::exact(Field::UdpSrc, u128::from(sp))),
                3 => {
                    f.push(Oxm::exact(Field::Ipv4Src, u128::from(src)));
                    f.push(Oxm::exact(Field::UdpDst, u128::from(dp)));
                }
                4 => {
                    f.push(Oxm::exact(Field::Ipv4Dst, u128::from(dst)));
                    f.push(Oxm::exact(Field::UdpSrc, u128::from(sp)));
                }
                5 => {
                    f.push(Oxm::exact(Field::Ipv4Src, u128::from(src)));
                    f.push(Oxm::exact(Field::Ipv4Dst, u128::from(dst)));
                    f.push(Oxm::exact(Field::UdpSrc, u128::from(sp)));
                    f.push(Oxm::exact(Field::UdpDst, u128::from(dp)));
                }
                6 => {
                    f.push(Oxm::exact(Field::InPort, 1));
                    f.push(Oxm::exact(Field::UdpSrc, u128::from(sp)));
                }
                7 => {
                    f.push(Oxm::exact(Field::Ipv4Src, u128::from(src)));
                    f.push(Oxm::exact(Field::Ipv4Dst, u128::from(dst)));
                }
                8 => {
                    f.push(Oxm::exact(Field::UdpSrc, u128::from(sp)));
                    f.push(Oxm::exact(Field::UdpDst, u128::from(dp)));
                }
                _ => {
                    f.push(Oxm::exact(Field::Ipv4Dst, u128::from(dst)));
                    f.push(Oxm::exact(Field::UdpSrc, u128::from(sp)));
                    f.push(Oxm::exact(Field::UdpDst, u128::from(dp)));
                }
            }
            v.push(to_b(u16::try_from(100 + m).unwrap(), f));
        }
    }
    v
}

/// A UDP frame of `len` bytes (at least 42) with tuple `t`.
fn udp_frame(len: usize, t: u32) -> Vec<u8> {
    let (src, dst, sp, dp) = tuple(t);
    let mut f = vec![0u8; len.max(42)];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&src.to_be_bytes());
    f[30..34].copy_from_slice(&dst.to_be_bytes());
    f[34..36].copy_from_slice(&sp.to_be_bytes());
    f[36..38].copy_from_slice(&dp.to_be_bytes());
    f
}

fn main() {
    let mut args = std::env::args().skip(1);
    let len: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let batch: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let mode = args.next().unwrap_or_else(|| "none".into());
    let total: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let evict_kb: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let tuples: u32 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(TUPLES)
        .clamp(1, TUPLES);
    let mut evict = vec![0u8; evict_kb * 1024];
    let access = || PortVlan::access(10).unwrap();
    let (va, vb) = match mode.as_str() {
        "none" | "flows" | "flows1" | "flows1000" => (PortVlan::default(), PortVlan::default()),
        "access" => (access(), access()),
        "push" => (access(), "trunk:10".parse().unwrap()),
        m => panic!("mode {m}: none, access, push, flows, flows1 or flows1000"),
    };
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), batch);
    let flows = Arc::new(Flows::new(Config::default()).unwrap());
    let fms = match mode.as_str() {
        "flows" | "flows1" => vec![to_b(10, vec![Oxm::exact(Field::InPort, 1)])],
        "flows1000" => thousand_flows(),
        _ => Vec::new(),
    };
    if !fms.is_empty() {
        for fm in &fms {
            flows
                .modify(|t| t.flow_mod(fm, Duration::ZERO))
                .expect("a valid flow");
        }
        sw.set_flows(Some(flows.clone()));
    }
    let g = Geometry::default();
    let mk = |name: &str| {
        Arc::new(Region::create(RegionLayout::new(g, 1).unwrap(), [name, ""]).unwrap())
    };
    let (ra, rb) = (mk("a"), mk("b"));
    let a = sw
        .attach(|i| Ok(SwitchPort::new("vale0:a".into(), i, ra.clone())?.with_vlan(va)))
        .unwrap();
    let b = sw
        .attach(|i| Ok(SwitchPort::new("vale0:b".into(), i, rb.clone())?.with_vlan(vb)))
        .unwrap();
    let mut tx = AppRing::new(ra.clone(), 0, Dir::Tx, 0);
    let mut rx = AppRing::new(rb.clone(), 0, Dir::Rx, 0);
    let mut frame = vec![0u8; len as usize];
    frame[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    // Fill every TX buffer once (with 1,000 tuples in turn for flows1000
    // and flows1).
    for k in 0..tx.space() {
        let mut s = tx.slot_mut(k).unwrap();
        if mode == "flows1000" || mode == "flows1" {
            s.write_at(0, &udp_frame(len.into(), k % tuples));
        } else {
            s.write_at(0, &frame);
        }
        s.set_len(len);
    }
    // Teach the switch where 02:..:02 lives.
    let mut txb = AppRing::new(rb.clone(), 0, Dir::Tx, 0);
    {
        let mut s = txb.slot_mut(0).unwrap();
        s.write_at(
            0,
            &[[0xffu8; 6].as_slice(), &[2, 0, 0, 0, 0, 2], &[0u8; 48]].concat(),
        );
        s.set_len(60);
    }
    txb.advance(1);
    txb.publish();
    let mut sc = Scratch::default();
    sw.forward(&b, 0, &mut sc);

    let mut done = 0u64;
    let t0 = Instant::now();
    let mut fwd_ns = 0u128;
    while done < total {
        let n = tx.space().min(batch);
        for k in 0..n {
            tx.slot_mut(k).unwrap().set_len(len);
        }
        tx.advance(n);
        tx.publish();
        for c in evict.chunks_mut(64) {
            c[0] = c[0].wrapping_add(1);
        }
        let t = Instant::now();
        let r = sw.forward(&a, 0, &mut sc);
        fwd_ns += t.elapsed().as_nanos();
        tx.refresh_tail();
        rx.refresh_tail();
        let m = rx.space();
        rx.advance(m);
        rx.publish();
        done += r.packets as u64;
    }
    let secs = t0.elapsed().as_secs_f64();
    let st = b.counters.snapshot("b");
    if let Some(c) = sc.flow_cache() {
        println!("flow cache: {} hits, {} misses", c.hits(), c.misses());
    }
    println!(
        "{len}-byte frames, batch {batch}, mode {mode}: engine {:.1} ns/packet ({:.1} Mpps on one core), loop {:.1} ns/packet; delivered {} dropped {}",
        fwd_ns as f64 / done as f64,
        done as f64 / (fwd_ns as f64 / 1e9) / 1e6,
        secs * 1e9 / done as f64,
        st.rx_packets,
        st.drop_rx_full
    );
}
