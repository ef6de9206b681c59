//! The engine driven directly: one thread plays the clients.

use std::sync::Arc;

use ringswitch_ring::{AppRing, Dir, Geometry, Region, RegionLayout};
use ringswitch_switch::{LearningBridge, Scratch, Switch, SwitchPort};

fn port(sw: &Switch, name: &str) -> (Arc<SwitchPort>, AppRing, AppRing) {
    let r = Arc::new(
        Region::create(
            RegionLayout::new(Geometry::default(), 1).unwrap(),
            [name, ""],
        )
        .unwrap(),
    );
    let p = sw
        .attach(|i| SwitchPort::new(name.into(), i, r.clone()))
        .unwrap();
    (
        p,
        AppRing::new(r.clone(), 0, Dir::Tx, 0),
        AppRing::new(r, 0, Dir::Rx, 0),
    )
}

fn frame(dst: u8, src: u8, tag: u8) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[14] = tag;
    f
}

fn queue(tx: &mut AppRing, frames: &[[u8; 60]]) {
    for (k, f) in frames.iter().enumerate() {
        let mut s = tx.slot_mut(k as u32).unwrap();
        assert!(s.write_at(0, f));
        s.set_len(60);
    }
    tx.advance(frames.len() as u32);
    tx.publish();
}

fn drain(rx: &mut AppRing) -> Vec<u8> {
    rx.refresh_tail();
    let n = rx.space();
    let tags = (0..n)
        .map(|k| rx.slot_mut(k).unwrap().payload()[14])
        .collect();
    rx.advance(n);
    rx.publish();
    tags
}

#[test]
fn interleaved_flows_in_one_batch_each_reach_their_port() {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let mut sc = Scratch::default();
    let (a, mut atx, _) = port(&sw, "a");
    let (b, mut btx, mut brx) = port(&sw, "b");
    let (c, mut ctx, mut crx) = port(&sw, "c");
    // b and c announce themselves.
    queue(&mut btx, &[frame(0xff, 0xb, 0)]);
    sw.forward(&b, 0, &mut sc);
    queue(&mut ctx, &[frame(0xff, 0xc, 0)]);
    sw.forward(&c, 0, &mut sc);
    drain(&mut brx);
    drain(&mut crx);
    // One batch from a: b, b, c, b, c, c, then an unknown address (flooded).
    let batch = [
        frame(0xb, 0xa, 1),
        frame(0xb, 0xa, 2),
        frame(0xc, 0xa, 3),
        frame(0xb, 0xa, 4),
        frame(0xc, 0xa, 5),
        frame(0xc, 0xa, 6),
        frame(0xd, 0xa, 7),
    ];
    queue(&mut atx, &batch);
    let r = sw.forward(&a, 0, &mut sc);
    assert_eq!(r.packets, 7);
    assert_eq!(drain(&mut brx), vec![1, 2, 4, 7]);
    assert_eq!(drain(&mut crx), vec![3, 5, 6, 7]);
    // a was learned from that batch.
    queue(&mut btx, &[frame(0xa, 0xb, 8)]);
    sw.forward(&b, 0, &mut sc);
    assert_eq!(
        drain(&mut crx),
        Vec::<u8>::new(),
        "unicast to a is not flooded"
    );
    let st = a.counters.snapshot("a");
    assert_eq!(
        (st.tx_packets, st.rx_packets),
        (7, 3),
        "two announcements and one reply"
    );
}

/// What makes a port from its index, for `Switch::attach`.
type MakePort = Box<dyn FnOnce(u16) -> std::io::Result<SwitchPort>>;

/// A learning switch, and a maker of ring ports named as asked (all on
/// one region: these tests attach and number ports, they send nothing).
fn switch_and_ports() -> (Switch, impl Fn(&str) -> MakePort) {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let r = Arc::new(
        Region::create(
            RegionLayout::new(Geometry::default(), 1).unwrap(),
            ["p", ""],
        )
        .unwrap(),
    );
    let mk = move |name: &str| -> MakePort {
        let r = r.clone();
        let name = name.to_string();
        Box::new(move |i| SwitchPort::new(name, i, r))
    };
    (sw, mk)
}

#[test]
fn a_port_comes_back_at_the_number_it_asks_for() {
    use ringswitch_switch::AttachError;
    let (sw, mk) = switch_and_ports();
    let p = sw.attach_at(6, mk("six")).unwrap();
    assert_eq!((p.index, sw.number_of(p.index)), (5, 6));
    assert_eq!(
        sw.attach(mk("first")).unwrap().index,
        0,
        "attach takes the first free"
    );
    match sw.attach_at(6, mk("again")) {
        Err(AttachError::Taken { number: 6, by, .. }) => assert_eq!(by, "six"),
        other => panic!("expected Taken, got {:?}", other.map(|p| p.index)),
    }
    assert!(matches!(
        sw.attach_at(300, mk("far")),
        Err(AttachError::Full { .. })
    ));
}

/// Issue 19: two ports asked for one OpenFlow number (a guest's source
/// and destination ports on one switch); it goes to whichever runs the
/// guest while the other does not, and back.
#[test]
fn an_openflow_number_two_ports_ask_for_follows_the_running_one() {
    use ringswitch_switch::NumberMoved;
    let (sw, mk) = switch_and_ports();
    let src = sw.attach_at(5, mk("src")).unwrap().index;
    sw.want_number(src, 5);
    let dst = sw.attach(mk("dst")).unwrap().index;
    sw.want_number(dst, 5);
    let dst_was = sw.number_of(dst);
    assert_eq!(sw.waits_for(dst), Some(5));
    assert_eq!(sw.set_running(src, true), None, "the holder runs");
    assert_eq!(sw.set_running(dst, true), None, "the holder still runs");
    assert_eq!(sw.number_of(src), 5);
    assert_eq!(
        sw.set_running(src, false),
        Some(NumberMoved {
            number: 5,
            from: src,
            to: dst
        }),
        "the holder stops while the other runs"
    );
    assert_eq!((sw.number_of(dst), sw.number_of(src)), (5, dst_was));
    assert_eq!(sw.index_of(5), Some(dst));
    assert_eq!(sw.waits_for(src), Some(5));
    let nums: Vec<_> = sw
        .numbered_ports()
        .iter()
        .map(|(n, p)| (*n, p.name.clone()))
        .collect();
    assert!(nums.contains(&(5, "dst".to_string())), "{nums:?}");
    // And back, the other way round: the guest moves back and starts on
    // src after stopping on dst.
    assert_eq!(sw.set_running(dst, false), None, "no one else runs");
    assert_eq!(sw.number_of(dst), 5);
    assert_eq!(
        sw.set_running(src, true),
        Some(NumberMoved {
            number: 5,
            from: dst,
            to: src
        })
    );
    // The holder going takes nothing with it: a running port that asked
    // for its number takes it.
    assert_eq!(sw.set_running(dst, true), None);
    sw.detach(src);
    assert_eq!(sw.number_of(dst), 5, "the number passes to dst as src goes");
    // A port that did not ask for a number keeps it, running or not.
    sw.detach(dst);
    let other = sw.attach_at(5, mk("other")).unwrap().index;
    let late = sw.attach(mk("late")).unwrap().index;
    sw.want_number(late, 5);
    assert_eq!(sw.set_running(late, true), None);
    assert_eq!(sw.number_of(other), 5);
}

/// A receiver that asked for an interrupt is kicked once the frames are
/// in, and what the kick cost the switch is published on its ring for its
/// adaptive wait (`AppRing::peer_kick_cost`); one that did not ask is not
/// kicked, and nothing is published.
#[test]
fn a_kick_is_timed_and_its_cost_published_on_the_kicked_ring() {
    let sw = Switch::new("vale0", Box::new(LearningBridge::default()), 512);
    let mut sc = Scratch::default();
    let (a, mut atx, _) = port(&sw, "a");
    let (b, mut btx, mut brx) = port(&sw, "b");
    queue(&mut btx, &[frame(0xff, 0xb, 0)]);
    sw.forward(&b, 0, &mut sc);
    drain(&mut brx);
    assert_eq!(b.counters.snapshot("b").interrupts, 0);
    assert_eq!(brx.peer_kick_cost(), std::time::Duration::ZERO);

    // b sleeps and wants to be woken: a's frame kicks it.
    brx.set_need_kick(true);
    queue(&mut atx, &[frame(0xb, 0xa, 1)]);
    sw.forward(&a, 0, &mut sc);
    assert_eq!(b.counters.snapshot("b").interrupts, 1);
    assert!(
        brx.peer_kick_cost() > std::time::Duration::ZERO,
        "the kick was timed and published"
    );
    assert_eq!(drain(&mut brx), vec![1]);
}
