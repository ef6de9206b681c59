//! CPU cost of a flow lookup: 1,000 flows over 10 distinct masks and
//! 1,000 active 5-tuples, as the benchmark sets them up. Prints
//! nanoseconds per frame (key extraction plus lookup) with the
//! exact-match cache hitting, with every key new (a miss storm: the
//! tuple-space classifier and the pipeline for every frame), and for the
//! pipeline alone; and the floor of a switch's flow path (the cache's
//! own work per frame, fed as a worker feeds it).
//!
//! `cargo run --release -p ringswitch-flow --example classify_cost [frames]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ringswitch_flow::key::KEY_BYTES;
use ringswitch_flow::{Config, FlowCache, FlowKey, FlowTables, Probe, Verdict};
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{FlowMod, FlowModCommand};
use ringswitch_openflow::{Action, Field, Instruction, Match, Oxm};

fn ip(a: u32) -> u128 {
    u128::from(a)
}

const SRC: u32 = 0x0a00_0000; // 10.0.0.0
const DST: u32 = 0x0a01_0000; // 10.1.0.0

/// The fields of mask `k` for flow `j`.
fn fields(k: usize, j: u32) -> Vec<Oxm> {
    let eth = Oxm::exact(Field::EthType, 0x0800);
    let udp = Oxm::exact(Field::IpProto, 17);
    let tcp = Oxm::exact(Field::IpProto, 6);
    match k {
        0 => vec![
            eth,
            udp,
            Oxm::exact(Field::Ipv4Dst, ip(DST + j * 10)),
            Oxm::exact(Field::UdpDst, 53),
        ],
        1 => vec![
            eth,
            Oxm::masked(Field::Ipv4Src, ip(SRC + (j << 8)), 0xffff_ff00),
        ],
        2 => vec![eth, tcp, Oxm::exact(Field::TcpDst, u128::from(8000 + j))],
        3 => vec![Oxm::exact(
            Field::EthDst,
            u128::from(0x0200_0000_0000 + u64::from(j)),
        )],
        4 => vec![
            eth,
            Oxm::masked(Field::Ipv4Dst, ip(0x0b00_0000 + (j << 16)), 0xffff_0000),
        ],
        5 => vec![Oxm::exact(Field::VlanVid, u128::from(0x1000 + j))],
        6 => vec![
            eth,
            udp,
            Oxm::exact(Field::UdpSrc, u128::from(1024 + j * 10)),
        ],
        7 => vec![Oxm::exact(Field::InPort, u128::from(100 + j))],
        8 => vec![
            eth,
            Oxm::exact(Field::Ipv4Src, ip(SRC + j * 3)),
            Oxm::exact(Field::Ipv4Dst, ip(DST + j)),
        ],
        _ => vec![
            eth,
            Oxm::exact(Field::IpDscp, u128::from(j % 64)),
            Oxm::masked(Field::Ipv4Src, ip(SRC + (j << 4)), 0xffff_fff0),
        ],
    }
}

/// An add of `fields` at `priority`, output to `port`.
fn add(priority: u16, fields: Vec<Oxm>, port: u32) -> FlowMod {
    let out = Action::Output { port, max_len: 0 };
    FlowMod::add(
        0,
        priority,
        Match::new(fields).expect("a valid match"),
        vec![Instruction::ApplyActions(vec![out])],
    )
}

fn tables() -> FlowTables {
    let mut t = FlowTables::new(Config::default());
    let fm = add(0, vec![], OFPP_NORMAL);
    t.flow_mod(&fm, Duration::ZERO).expect("table-miss flow");
    for k in 0..10 {
        for j in 0..100u32 {
            let fm = add(
                (100 + k * 50 + (j as usize % 5)) as u16,
                fields(k, j),
                1 + (j % 8),
            );
            t.flow_mod(&fm, Duration::ZERO).expect("flow");
        }
    }
    t
}

/// A 60-byte UDP or TCP frame of tuple `i` (with its ports overridable).
fn frame(i: u32, sport: u16, dport: u16) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = if i.is_multiple_of(2) { 17 } else { 6 };
    f[26..30].copy_from_slice(&(SRC + i).to_be_bytes());
    f[30..34].copy_from_slice(&(DST + (i * 7) % 1000).to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

fn main() {
    let total: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let t = tables();
    let frames: Vec<[u8; 60]> = (0..1000u32)
        .map(|i| {
            frame(
                i,
                1024 + (i % 100) as u16 * 10,
                if i.is_multiple_of(3) {
                    53
                } else {
                    8000 + (i % 100) as u16
                },
            )
        })
        .collect();
    println!(
        "{} flows over {} masks in table 0, {} 5-tuples, {total} frames each",
        t.len(),
        10 + 1,
        frames.len()
    );

    // The cache hitting: the 1,000 tuples in turn.
    let mut cache = FlowCache::default();
    for f in &frames {
        cache.lookup(&t, &FlowKey::extract(f, 1), f.len());
    }
    let start = Instant::now();
    let mut outs = 0usize;
    for n in 0..total {
        let f = &frames[(n % 1000) as usize];
        let v = cache.lookup(&t, &FlowKey::extract(black_box(f), 1), f.len());
        outs += v.outputs().len();
    }
    cache.flush();
    let hit_ns = start.elapsed().as_nanos() as f64 / f64::from(total);
    println!(
        "cache hitting:  {hit_ns:6.1} ns per frame (extract + lookup); hits {} misses {}",
        cache.hits(),
        cache.misses()
    );

    // The floor of a switch's flow path: the cache's work alone, fed as
    // a switch worker feeds it, in chunks of 16: each frame's first line
    // copied, its probe made and hashed and its entries prefetched, then
    // the 16 looked up and counted. No filing, no delivery, and the
    // frames packed in a few cache lines (in a ring they lie 2 KiB apart
    // and miss the CPU's caches, for a learning bridge as much): the
    // least a flow lookup adds to what a switch spends on a frame.
    const STRIDE: usize = 64;
    const CHUNK: usize = 16;
    let mut ring = vec![0u8; 1000 * STRIDE];
    for (i, f) in frames.iter().enumerate() {
        ring[i * STRIDE..i * STRIDE + f.len()].copy_from_slice(f);
    }
    let mut cache = FlowCache::default();
    let mut probes = [(Probe::default(), 0u64); CHUNK];
    let version = t.version();
    let floor = |cache: &mut FlowCache, probes: &mut [(Probe, u64); CHUNK], frames: u32| {
        let mut outs = 0usize;
        let mut n = 0u32;
        while n < frames {
            for (j, (p, h)) in probes.iter_mut().enumerate() {
                let at = ((n as usize + j) % 1000) * STRIDE;
                let mut line = [0u8; KEY_BYTES];
                line[..64].copy_from_slice(black_box(&ring[at..at + 64]));
                p.set_prefix(&line, 60, 1);
                *h = p.hash();
                cache.prefetch_with(*h, ringswitch_ring::copy::prefetch);
            }
            for (p, h) in probes.iter() {
                let hit = cache.lookup_probe(version, p, *h, 60, |k, v| t.classify(k, v));
                outs += hit.verdict().outputs().len();
            }
            n += CHUNK as u32;
        }
        outs
    };
    outs += floor(&mut cache, &mut probes, 16_000);
    let start = Instant::now();
    outs += floor(&mut cache, &mut probes, total);
    cache.flush();
    let floor_ns = start.elapsed().as_nanos() as f64 / f64::from(total);
    println!(
        "switch's floor: {floor_ns:6.1} ns per frame (first line copied, probe, hash, prefetch, lookup, count; chunks of {CHUNK}); hits {} misses {}",
        cache.hits(),
        cache.misses()
    );

    // A miss storm: every frame a new 5-tuple.
    let storm = total / 5;
    let mut cache = FlowCache::default();
    let start = Instant::now();
    for n in 0..storm {
        let i = n % 1000;
        let f = frame(i, (n / 1000) as u16, (n >> 16) as u16 ^ 0x5a5a);
        let v = cache.lookup(&t, &FlowKey::extract(black_box(&f), 1), f.len());
        outs += v.outputs().len();
    }
    cache.flush();
    let miss_ns = start.elapsed().as_nanos() as f64 / f64::from(storm);
    println!(
        "miss storm:     {miss_ns:6.1} ns per frame (extract + lookup + pipeline); hits {} misses {}",
        cache.hits(),
        cache.misses()
    );

    // Key extraction and hash alone.
    let start = Instant::now();
    let mut h = 0u64;
    for n in 0..storm {
        let f = &frames[(n % 1000) as usize];
        h ^= FlowKey::extract(black_box(f), 1).hash();
    }
    black_box(h);
    let key_ns = start.elapsed().as_nanos() as f64 / f64::from(storm);
    println!("key alone:      {key_ns:6.1} ns per frame (extract + hash)");

    // The pipeline alone, keys extracted beforehand.
    let keys: Vec<FlowKey> = frames.iter().map(|f| FlowKey::extract(f, 1)).collect();
    let mut v = Verdict::new();
    let start = Instant::now();
    for n in 0..storm {
        t.classify(black_box(&keys[(n % 1000) as usize]), &mut v);
        outs += v.outputs().len();
    }
    let cls_ns = start.elapsed().as_nanos() as f64 / f64::from(storm);
    println!("pipeline alone: {cls_ns:6.1} ns per key (classifier + verdict)");
    black_box(outs);

    // Flow mods: 20,000 adds of distinct flows into an empty table, then
    // as many strict deletes.
    let mut t = FlowTables::new(Config::default());
    let mods: Vec<FlowMod> = (0..20_000u32)
        .map(|j| add(100 + (j % 10) as u16, fields((j % 10) as usize, j / 10), 1))
        .collect();
    let start = Instant::now();
    for fm in &mods {
        t.flow_mod(fm, Duration::ZERO).expect("add");
    }
    let add_rate = mods.len() as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for fm in &mods {
        let mut del = fm.clone();
        del.command = FlowModCommand::DeleteStrict;
        t.flow_mod(&del, Duration::ZERO).expect("delete");
    }
    let del_rate = mods.len() as f64 / start.elapsed().as_secs_f64();
    assert!(t.is_empty());
    println!("flow mods:      {add_rate:8.0} adds/s, {del_rate:8.0} strict deletes/s (20,000 flows, 10 masks)");
}
