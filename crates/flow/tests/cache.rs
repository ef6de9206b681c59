//! The exact-match cache: hits, invalidation on every table change, and
//! counters that stay exact through runs, evictions and flushes.

mod common;

use common::*;
use ringswitch_flow::{Config, FlowCache, FlowKey, FlowTables, Target};
use ringswitch_openflow::message::FlowModCommand;
use ringswitch_openflow::{Field, Match, Oxm};

fn target(cache: &mut FlowCache, t: &FlowTables, frame: &[u8]) -> Vec<Target> {
    let k = FlowKey::extract(frame, 1);
    cache
        .lookup(t, &k, frame.len())
        .outputs()
        .iter()
        .map(|o| o.target)
        .collect()
}

#[test]
fn hits_after_the_first_lookup() {
    let mut t = FlowTables::new(Config::default());
    t.flow_mod(&add(0, 1, Match::any(), vec![apply(vec![out(2)])]), T0)
        .unwrap();
    let mut c = FlowCache::new(64);
    let f = udp4(1, 2, 3, 4);
    for _ in 0..10 {
        assert_eq!(target(&mut c, &t, &f), vec![Target::Port(2)]);
    }
    assert_eq!((c.hits(), c.misses()), (9, 1));
    assert_eq!(c.capacity(), 64);
}

#[test]
fn every_change_invalidates() {
    let mut t = FlowTables::new(Config::default());
    t.flow_mod(&add(0, 1, Match::any(), vec![apply(vec![out(2)])]), T0)
        .unwrap();
    let mut c = FlowCache::new(64);
    let f = udp4(1, 2, 3, 4);
    assert_eq!(target(&mut c, &t, &f), vec![Target::Port(2)]);
    // A higher-priority flow: the next lookup sees it.
    t.flow_mod(&add(0, 5, m(ip_udp()), vec![apply(vec![out(3)])]), T0)
        .unwrap();
    assert_eq!(target(&mut c, &t, &f), vec![Target::Port(3)]);
    // A modify.
    t.flow_mod(
        &flow_mod(
            FlowModCommand::ModifyStrict,
            0,
            5,
            m(ip_udp()),
            vec![apply(vec![out(4)])],
        ),
        T0,
    )
    .unwrap();
    assert_eq!(target(&mut c, &t, &f), vec![Target::Port(4)]);
    // A delete.
    t.flow_mod(
        &flow_mod(FlowModCommand::DeleteStrict, 0, 5, m(ip_udp()), vec![]),
        T0,
    )
    .unwrap();
    assert_eq!(target(&mut c, &t, &f), vec![Target::Port(2)]);
    // A timeout.
    let mut fm = add(0, 9, Match::any(), vec![]);
    fm.hard_timeout = 1;
    t.flow_mod(&fm, T0).unwrap();
    assert!(target(&mut c, &t, &f).is_empty());
    assert_eq!(t.expire(secs(1)).len(), 1);
    assert_eq!(target(&mut c, &t, &f), vec![Target::Port(2)]);
    assert_eq!(c.misses(), 6);
    assert_eq!(c.hits(), 0);
}

#[test]
fn counters_stay_exact_through_runs_and_evictions() {
    let mut t = FlowTables::new(Config::default());
    // One flow per source address 10.0.0.a, a..8.
    for a in 0..8u8 {
        let mt = m(vec![
            Oxm::exact(Field::EthType, 0x0800),
            Oxm::exact(
                Field::Ipv4Src,
                u128::from(u32::from_be_bytes([10, 0, 0, a])),
            ),
        ]);
        let mut fm = add(0, 10, mt, vec![apply(vec![out(2)])]);
        fm.cookie = u64::from(a);
        t.flow_mod(&fm, T0).unwrap();
    }
    let mut rng = Rng::new(99);
    let mut want = [(0u64, 0u64); 8];
    // A tiny cache: entries are evicted in the middle of runs; one about
    // as large as the keys are many: entries are moved aside to make room.
    for capacity in [2usize, 512, 4096] {
        let mut c = FlowCache::new(capacity);
        let mut frames = 0;
        for batch in 0..50 {
            for _ in 0..64 {
                let a = rng.below(8) as u8;
                // Runs of 1..4 frames of the same flow, many 5-tuples per flow.
                for _ in 0..1 + rng.below(4) {
                    let mut f = udp4(a, 2, rng.below(50) as u16, 53);
                    f.resize(60 + rng.below(100) as usize, 0);
                    let k = FlowKey::extract(&f, 1);
                    assert_eq!(c.lookup(&t, &k, f.len()).outputs().len(), 1);
                    want[usize::from(a)].0 += 1;
                    frames += 1;
                    want[usize::from(a)].1 += f.len() as u64;
                }
            }
            if batch % 10 == 9 {
                // A change between batches, as a flow mod between two of a worker's batches.
                t.flow_mod(&add(1, 1, Match::any(), vec![]), T0).unwrap();
            }
            c.flush();
        }
        for f in t.flows().filter(|f| f.table_id() == 0) {
            assert_eq!(
                f.counts(),
                want[f.cookie() as usize],
                "flow {} with a cache of {capacity}",
                f.cookie()
            );
        }
        assert_eq!(c.hits() + c.misses(), frames);
        assert!(c.hits() > 0);
    }
    let ts = &t.table_stats()[0];
    let total: u64 = want.iter().map(|w| w.0).sum();
    assert_eq!((ts.lookup_count, ts.matched_count), (total, total));
}

#[test]
fn dropping_the_cache_counts_its_last_run() {
    let mut t = FlowTables::new(Config::default());
    t.flow_mod(&add(0, 1, Match::any(), vec![apply(vec![out(2)])]), T0)
        .unwrap();
    {
        let mut c = FlowCache::new(16);
        let f = udp4(1, 2, 3, 4);
        for _ in 0..5 {
            c.lookup(&t, &FlowKey::extract(&f, 1), f.len());
        }
    }
    assert_eq!(t.flows().next().unwrap().counts(), (5, 300));
}

/// A thousand active flows in the default cache (4,096 entries) stay in
/// it: after each key's first lookup, none misses again (each key has
/// four places, and a fill moves a key aside to make room; with two
/// places, 1.2 % of lookups missed for good, and with four but no moves
/// 0.4 % of the bench's).
#[test]
fn a_thousand_flows_stay_cached() {
    let t = FlowTables::new(Config::default());
    let mut c = FlowCache::default();
    let keys: Vec<FlowKey> = (0..1000u32)
        .map(|i| {
            let mut k = FlowKey::default();
            k.set(Field::Ipv4Src, u128::from(0x0a00_0000 | i));
            k.set(Field::UdpSrc, u128::from(1000 + i % 100));
            k
        })
        .collect();
    for k in &keys {
        c.lookup(&t, k, 60);
    }
    assert_eq!(c.misses(), 1000, "each key's first lookup");
    for _ in 0..10 {
        for k in &keys {
            c.lookup(&t, k, 60);
        }
    }
    let again = c.misses() - 1000;
    assert_eq!(again, 0, "{again} of 10,000 lookups missed again");
    assert_eq!(c.hits() + c.misses(), 11_000);
}

/// The flows bench's traffic (bench/README.md, "Flows": pkt-gen's frames
/// from 10.0.0.1-10.0.0.10, ports 1000-1099, to 10.1.0.1:4321, with its
/// default addresses), as compact keys: after the first round, every
/// lookup hits. Without moves, five of these keys evicted one another at
/// every round.
#[test]
fn the_benchs_thousand_tuples_never_miss_again() {
    let t = FlowTables::new(Config::default());
    let mut c = FlowCache::default();
    let keys = bench_tuples();
    for round in 0..20 {
        for k in &keys {
            c.lookup(&t, k, 60);
        }
        assert_eq!(c.misses(), 1000, "misses after round {round}");
    }
}

/// After a storm of new keys has filled the cache (where making room
/// fails, and is tried less and less often), a table change empties it:
/// room is made again at once, and the bench's tuples settle as in a
/// fresh cache.
#[test]
fn after_a_storm_and_a_change_the_tuples_settle_at_once() {
    let mut t = FlowTables::new(Config::default());
    let mut c = FlowCache::default();
    for i in 0..100_000u32 {
        let mut k = FlowKey::default();
        k.set(Field::Ipv4Src, u128::from(0x0b00_0000 | i));
        c.lookup(&t, &k, 60);
    }
    assert_eq!(c.misses(), 100_000);
    // The tuples come in on port 2.
    t.flow_mod(&add(0, 1, Match::any(), vec![apply(vec![out(1)])]), T0)
        .unwrap();
    let keys = bench_tuples();
    for round in 0..20 {
        for k in &keys {
            assert_eq!(c.lookup(&t, k, 60).outputs().len(), 1);
        }
        assert_eq!(c.misses(), 101_000, "misses after round {round}");
    }
}

/// The flows bench's 1,000 tuples, as the keys of pkt-gen's frames.
fn bench_tuples() -> Vec<FlowKey> {
    (1..=10u8)
        .flat_map(|a| {
            (1000..1100u16).map(move |sport| {
                let mut f = eth(
                    [0xff; 6],
                    [0, 0, 0, 0, 0, 1],
                    None,
                    0x0800,
                    &ipv4(
                        [10, 0, 0, a],
                        [10, 1, 0, 1],
                        17,
                        0,
                        &[],
                        0,
                        &udp(sport, 4321),
                    ),
                );
                f.resize(60, 0);
                FlowKey::extract(&f, 2)
            })
        })
        .collect()
}

/// Keys with a compact form (untagged IPv4) and keys without (VLAN,
/// IPv6, ARP) in one cache, in entries that collide: each hits its own
/// entry, and every flow's counters are exact.
#[test]
fn compact_and_full_keys_share_a_cache() {
    let mut t = FlowTables::new(Config::default());
    let types: [u16; 4] = [0x0800, 0x86dd, 0x0806, 0x1234];
    for (i, ty) in types.iter().enumerate() {
        let mut fm = add(
            0,
            10,
            m(vec![Oxm::exact(Field::EthType, u128::from(*ty))]),
            vec![apply(vec![out(2 + i as u32)])],
        );
        fm.cookie = i as u64;
        t.flow_mod(&fm, T0).unwrap();
    }
    let v4 = |a: u8| udp4(a, 2, 3, 4);
    let tagged = |a: u8| {
        let mut f = v4(a);
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        f
    };
    let v6 = |a: u8| {
        let mut src = [0u8; 16];
        src[15] = a;
        eth(
            MAC_B,
            MAC_A,
            None,
            0x86dd,
            &ipv6(src, [1; 16], 17, 0, 0, &udp(1, 2)),
        )
    };
    let other = |a: u8| eth(MAC_B, MAC_A, None, 0x1234, &[a; 46]);
    let mut want = [(0u64, 0u64); 4];
    // Two entries: keys keep pushing one another out.
    for capacity in [2usize, 4096] {
        let mut c = FlowCache::new(capacity);
        let mut rng = Rng::new(7);
        for _ in 0..2000 {
            let a = rng.below(6) as u8;
            let (f, flow) = match rng.below(4) {
                0 => (v4(a), 0),
                // A tagged IPv4 frame's EtherType is the inner one.
                1 => (tagged(a), 0),
                2 => (v6(a), 1),
                _ => (other(a), 3),
            };
            let k = FlowKey::extract(&f, 1);
            let got: Vec<Target> = c
                .lookup(&t, &k, f.len())
                .outputs()
                .iter()
                .map(|o| o.target)
                .collect();
            assert_eq!(got, vec![Target::Port(2 + flow as u32)]);
            want[flow].0 += 1;
            want[flow].1 += f.len() as u64;
        }
        if capacity > 2 {
            assert!(c.hits() > 1900, "{} hits", c.hits());
        }
    }
    for f in t.flows() {
        assert_eq!(f.counts(), want[f.cookie() as usize], "flow {}", f.cookie());
    }
}
