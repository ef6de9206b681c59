//! CPU cost of the forwarding engine alone: one thread plays sender,
//! switch worker and receiver in turn, so the figure is the engine's
//! nanoseconds per packet without cross-core traffic or wake-ups.
//!
//! `cargo run --release -p ringswitch-switch --example forward_cost [len] [batch] [vlan] [packets]`
//!
//! `vlan`: `none` (the default: no VLAN set anywhere), `access` (both ports
//! `access:10`: the VLAN lookup, no tag edits) or `push` (a is `access:10`,
//! b `trunk:10`: a tag pushed onto every frame on the way).

use std::sync::Arc;
use std::time::Instant;

use ringswitch_control::PortVlan;
use ringswitch_ring::{AppRing, Dir, Geometry, Region, RegionLayout};
use ringswitch_switch::{LearningBridge, Scratch, Switch, SwitchPort};

fn main() {
    let mut args = std::env::args().skip(1);
    let len: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let batch: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let mode = args.next().unwrap_or_else(|| "none".into());
    let total: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let access = || PortVlan::access(10).unwrap();
    let (va, vb) = match mode.as_str() {
        "none" => (PortVlan::default(), PortVlan::default()),
        "access" => (access(), access()),
        "push" => (access(), "trunk:10".parse().unwrap()),
        m => panic!("vlan mode {m}: none, access or push"),
    };
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), batch);
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
    // Fill every TX buffer once.
    for k in 0..tx.space() {
        let mut s = tx.slot_mut(k).unwrap();
        s.write_at(0, &frame);
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
    println!(
        "{len}-byte frames, batch {batch}, VLANs {mode}: engine {:.1} ns/packet ({:.1} Mpps on one core), loop {:.1} ns/packet; delivered {} dropped {}",
        fwd_ns as f64 / done as f64,
        done as f64 / (fwd_ns as f64 / 1e9) / 1e6,
        secs * 1e9 / done as f64,
        st.rx_packets,
        st.drop_rx_full
    );
}
