//! A tuple-space classifier: the rules of one table grouped by mask, one
//! hash table per distinct mask (a subtable), as OVS's dpcls does.
//!
//! A lookup masks the key with each subtable's mask and probes its hash
//! table. Subtables are visited in order of the highest priority they
//! hold, and the walk stops as soon as no remaining subtable can beat the
//! best rule found. Among rules of equal priority that match, the one
//! inserted first wins (a rule's `seq`), so the answer never depends on
//! hash order.
//!
//! Insertions and removals (the control side) allocate; a lookup does
//! not.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::key::{FlowKey, KeyMask};

/// One rule as the classifier holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Its priority: higher wins.
    pub priority: u16,
    /// Its insertion number: among equal priorities, lower wins.
    pub seq: u64,
    /// What the caller calls it (the table's slot of the flow).
    pub id: u32,
}

impl Rule {
    /// Whether `self` beats `other`.
    #[inline]
    pub fn beats(&self, other: &Rule) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.seq < other.seq)
    }
}

/// A masked key with its hash computed once.
#[derive(Debug, Clone, Copy)]
struct MaskedKey {
    hash: u64,
    key: FlowKey,
}

impl MaskedKey {
    #[inline]
    fn new(key: &FlowKey, mask: &KeyMask) -> MaskedKey {
        MaskedKey {
            hash: key.masked_hash(mask),
            key: key.masked(mask),
        }
    }
}

impl PartialEq for MaskedKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl Eq for MaskedKey {}

impl Hash for MaskedKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A hasher that passes the precomputed hash through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `MaskedKey`; fold anything else in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Map = HashMap<MaskedKey, Vec<Rule>, BuildHasherDefault<PassThrough>>;

/// The rules of one mask.
#[derive(Debug)]
struct Subtable {
    mask: KeyMask,
    /// Masked value → its rules, best first.
    rules: Map,
    /// How many rules of each priority, for the subtable's highest.
    priorities: BTreeMap<u16, usize>,
    max_priority: u16,
}

/// A tuple-space classifier (see the module documentation).
#[derive(Debug, Default)]
pub struct Classifier {
    /// By highest priority, highest first.
    subtables: Vec<Subtable>,
    len: usize,
}

impl Classifier {
    /// An empty classifier.
    pub fn new() -> Classifier {
        Classifier::default()
    }

    /// How many rules it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many distinct masks (subtables) it holds.
    pub fn masks(&self) -> usize {
        self.subtables.len()
    }

    /// Adds `rule` matching `value` (already masked) under `mask`.
    pub fn insert(&mut self, mask: &KeyMask, value: &FlowKey, rule: Rule) {
        let i = match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => i,
            None => {
                self.subtables.push(Subtable {
                    mask: *mask,
                    rules: Map::default(),
                    priorities: BTreeMap::new(),
                    max_priority: 0,
                });
                self.subtables.len() - 1
            }
        };
        let st = &mut self.subtables[i];
        let list = st.rules.entry(MaskedKey::new(value, mask)).or_default();
        let at = list
            .iter()
            .position(|r| rule.beats(r))
            .unwrap_or(list.len());
        list.insert(at, rule);
        *st.priorities.entry(rule.priority).or_default() += 1;
        st.max_priority = st.max_priority.max(rule.priority);
        self.len += 1;
        self.reorder();
    }

    /// Removes the rule `seq` matching `value` under `mask`; whether it
    /// was there.
    pub fn remove(&mut self, mask: &KeyMask, value: &FlowKey, seq: u64) -> bool {
        let Some(i) = self.subtables.iter().position(|s| s.mask == *mask) else {
            return false;
        };
        let st = &mut self.subtables[i];
        let mk = MaskedKey::new(value, mask);
        let Some(list) = st.rules.get_mut(&mk) else {
            return false;
        };
        let Some(at) = list.iter().position(|r| r.seq == seq) else {
            return false;
        };
        let rule = list.remove(at);
        if list.is_empty() {
            st.rules.remove(&mk);
        }
        if let Some(n) = st.priorities.get_mut(&rule.priority) {
            *n -= 1;
            if *n == 0 {
                st.priorities.remove(&rule.priority);
            }
        }
        st.max_priority = st.priorities.keys().next_back().copied().unwrap_or(0);
        self.len -= 1;
        if st.rules.is_empty() {
            self.subtables.remove(i);
        }
        self.reorder();
        true
    }

    /// Keeps the subtables by highest priority, highest first.
    fn reorder(&mut self) {
        self.subtables
            .sort_by_key(|s| std::cmp::Reverse(s.max_priority));
    }

    /// The best rule matching `key`. Allocates nothing.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Option<Rule> {
        let mut best: Option<Rule> = None;
        for st in &self.subtables {
            if best.is_some_and(|b| st.max_priority < b.priority) {
                break;
            }
            if let Some(list) = st.rules.get(&MaskedKey::new(key, &st.mask)) {
                let r = list[0];
                if best.is_none_or(|b| r.beats(&b)) {
                    best = Some(r);
                }
            }
        }
        best
    }
}
