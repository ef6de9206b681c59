//! The tuple-space classifier against a brute-force reference, on random
//! rule sets with insertions and removals.

mod common;

use common::Rng;
use ringswitch_flow::classifier::{Classifier, Rule};
use ringswitch_flow::{FlowKey, KeyMask};
use ringswitch_openflow::Field;

/// Fields a random mask is drawn over, with small value pools so that
/// keys and rules collide often.
const FIELDS: &[Field] = &[
    Field::InPort,
    Field::EthType,
    Field::VlanVid,
    Field::EthDst,
    Field::IpProto,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::TcpSrc,
    Field::TcpDst,
    Field::Metadata,
];

fn value(rng: &mut Rng, f: Field) -> u128 {
    let pool = rng.below(4) as u128;
    match f {
        Field::Ipv4Src | Field::Ipv4Dst => 0x0a00_0000 | (pool << 8) | rng.below(3) as u128,
        Field::EthType => [0x0800, 0x86dd, 0x0806, 0x0800][pool as usize],
        _ => pool + 1,
    }
}

/// A mask over 1 to 4 fields; IPv4 addresses take a random prefix.
fn random_mask(rng: &mut Rng) -> KeyMask {
    let mut m = FlowKey::default();
    for _ in 0..1 + rng.below(4) {
        let f = FIELDS[rng.below(FIELDS.len() as u64) as usize];
        let full = if f.bits() >= 128 {
            u128::MAX
        } else {
            (1u128 << f.bits()) - 1
        };
        let mask = match f {
            Field::Ipv4Src | Field::Ipv4Dst => {
                let len = [8u32, 16, 24, 30, 32][rng.below(5) as usize];
                (full << (32 - len)) & full
            }
            _ => full,
        };
        m.set(f, mask);
    }
    KeyMask::from_words(*m.words())
}

fn random_key(rng: &mut Rng) -> FlowKey {
    let mut k = FlowKey::default();
    for &f in FIELDS {
        k.set(f, value(rng, f));
    }
    k
}

struct Reference {
    rules: Vec<(KeyMask, FlowKey, Rule)>,
}

impl Reference {
    fn lookup(&self, key: &FlowKey) -> Option<Rule> {
        let mut best: Option<Rule> = None;
        for (mask, value, r) in &self.rules {
            if key.matches(mask, value) && best.is_none_or(|b| r.beats(&b)) {
                best = Some(*r);
            }
        }
        best
    }
}

#[test]
fn agrees_with_brute_force() {
    for seed in 1..=6u64 {
        let mut rng = Rng::new(seed * 7919);
        let masks: Vec<KeyMask> = (0..3 + rng.below(12))
            .map(|_| random_mask(&mut rng))
            .collect();
        let mut cls = Classifier::new();
        let mut reference = Reference { rules: Vec::new() };
        let mut seq = 0;
        for step in 0..1500 {
            if rng.below(4) == 0 && !reference.rules.is_empty() {
                let i = rng.below(reference.rules.len() as u64) as usize;
                let (mask, value, r) = reference.rules.swap_remove(i);
                assert!(cls.remove(&mask, &value, r.seq));
            } else {
                let mask = masks[rng.below(masks.len() as u64) as usize];
                let value = random_key(&mut rng).masked(&mask);
                seq += 1;
                // Few priorities, so that ties are frequent.
                let r = Rule {
                    priority: rng.below(8) as u16 * 100,
                    seq,
                    id: step,
                };
                cls.insert(&mask, &value, r);
                reference.rules.push((mask, value, r));
            }
            assert_eq!(cls.len(), reference.rules.len());
            if step % 100 == 99 {
                for _ in 0..500 {
                    let k = random_key(&mut rng);
                    assert_eq!(
                        cls.lookup(&k),
                        reference.lookup(&k),
                        "seed {seed} step {step}"
                    );
                }
            }
        }
        // Remove everything: subtables go with their last rule.
        for (mask, value, r) in reference.rules.drain(..) {
            assert!(cls.remove(&mask, &value, r.seq));
        }
        assert!(cls.is_empty());
        assert_eq!(cls.masks(), 0);
        assert_eq!(cls.lookup(&random_key(&mut rng)), None);
    }
}

#[test]
fn removing_what_is_not_there_is_refused() {
    let mut cls = Classifier::new();
    let mut rng = Rng::new(3);
    let mask = random_mask(&mut rng);
    let value = random_key(&mut rng).masked(&mask);
    assert!(!cls.remove(&mask, &value, 1));
    cls.insert(
        &mask,
        &value,
        Rule {
            priority: 1,
            seq: 1,
            id: 0,
        },
    );
    assert!(!cls.remove(&mask, &value, 2));
    assert!(cls.remove(&mask, &value, 1));
}

/// One mask, thousands of values: the subtable's hash table grows, and
/// removals in any order (probe runs that wrap around included) keep every
/// other value findable.
#[test]
fn one_mask_many_values() {
    let mut mask = FlowKey::default();
    mask.set(Field::Ipv4Dst, 0xffff_ffff);
    let mask = KeyMask::from_words(*mask.words());
    let key = |i: u64| {
        let mut k = FlowKey::default();
        k.set(Field::Ipv4Dst, u128::from(i * 2_654_435_761 % (1 << 32)));
        k
    };
    let mut cls = Classifier::new();
    let n = 3000u64;
    for i in 0..n {
        cls.insert(
            &mask,
            &key(i),
            Rule {
                priority: 1,
                seq: i + 1,
                id: i as u32,
            },
        );
    }
    let mut rng = Rng::new(5);
    let mut live: Vec<u64> = (0..n).collect();
    while !live.is_empty() {
        let at = rng.below(live.len() as u64) as usize;
        let gone = live.swap_remove(at);
        assert!(cls.remove(&mask, &key(gone), gone + 1));
        assert_eq!(cls.lookup(&key(gone)), None);
        if live.len().is_multiple_of(97) {
            for &i in &live {
                assert_eq!(cls.lookup(&key(i)).map(|r| r.seq), Some(i + 1));
            }
        }
    }
    assert!(cls.is_empty());
}
