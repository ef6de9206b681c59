//! A tuple-space classifier: the rules of one table grouped by mask, one
//! hash table per distinct mask (a subtable), as OVS's dpcls does.
//!
//! A lookup hashes the key's words under each subtable's mask and probes
//! its hash table, comparing the masked words in place. Subtables are visited in order of the highest priority they
//! hold, and the walk stops as soon as no remaining subtable can beat the
//! best rule found. Among rules of equal priority that match, the one
//! inserted first wins (a rule's `seq`), so the answer never depends on
//! hash order.
//!
//! Insertions and removals (the control side) allocate; a lookup does
//! not.

use std::collections::BTreeMap;

use crate::key::{FlowKey, KeyMask};

/// One rule as the classifier holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// One masked value of a subtable and its rules.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Whether the slot holds a value.
    used: bool,
    /// The masked value's hash.
    hash: u64,
    value: FlowKey,
    /// `rules[0]`, kept beside the value so a lookup reads one slot.
    best: Rule,
    /// Every rule of this value, best first.
    rules: Vec<Rule>,
}

/// The rules of one mask: an open-addressing hash table (linear probing,
/// at most half full, backward-shift deletion) of masked values. A probe
/// compares the hash, then the key's masked words in place: no masked
/// copy, no allocation.
#[derive(Debug)]
struct Subtable {
    mask: KeyMask,
    slots: Vec<Slot>,
    len: usize,
    /// How many rules of each priority, for the subtable's highest.
    priorities: BTreeMap<u16, usize>,
    max_priority: u16,
}

impl Subtable {
    fn new(mask: KeyMask) -> Subtable {
        Subtable {
            mask,
            slots: vec![Slot::default(); 8],
            len: 0,
            priorities: BTreeMap::new(),
            max_priority: 0,
        }
    }

    /// The slot of `value`, or the empty slot where it would go.
    fn probe(&self, value: &FlowKey, hash: u64) -> usize {
        let m = self.slots.len() - 1;
        let mut i = hash as usize & m;
        loop {
            let s = &self.slots[i];
            if !s.used || (s.hash == hash && s.value == *value) {
                return i;
            }
            i = (i + 1) & m;
        }
    }

    /// The best rule of the value `key` has under the mask.
    #[inline]
    fn lookup(&self, key: &FlowKey) -> Option<Rule> {
        let hash = key.masked_hash(&self.mask);
        let m = self.slots.len() - 1;
        let mut i = hash as usize & m;
        loop {
            let s = &self.slots[i];
            if !s.used {
                return None;
            }
            if s.hash == hash && key.matches(&self.mask, &s.value) {
                return Some(s.best);
            }
            i = (i + 1) & m;
        }
    }

    fn grow(&mut self) {
        let bigger = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for s in old.into_iter().filter(|s| s.used) {
            let i = self.probe(&s.value, s.hash);
            self.slots[i] = s;
        }
    }

    fn insert(&mut self, value: &FlowKey, rule: Rule) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let hash = value.masked_hash(&self.mask);
        let i = self.probe(value, hash);
        let s = &mut self.slots[i];
        if !s.used {
            *s = Slot {
                used: true,
                hash,
                value: *value,
                best: rule,
                rules: Vec::new(),
            };
            self.len += 1;
        }
        let at = s
            .rules
            .iter()
            .position(|r| rule.beats(r))
            .unwrap_or(s.rules.len());
        s.rules.insert(at, rule);
        s.best = s.rules[0];
        *self.priorities.entry(rule.priority).or_default() += 1;
        self.max_priority = self.max_priority.max(rule.priority);
    }

    fn remove(&mut self, value: &FlowKey, seq: u64) -> bool {
        let hash = value.masked_hash(&self.mask);
        let i = self.probe(value, hash);
        let s = &mut self.slots[i];
        if !s.used {
            return false;
        }
        let Some(at) = s.rules.iter().position(|r| r.seq == seq) else {
            return false;
        };
        let rule = s.rules.remove(at);
        if let Some(&best) = s.rules.first() {
            s.best = best;
        } else {
            self.delete_slot(i);
        }
        if let Some(n) = self.priorities.get_mut(&rule.priority) {
            *n -= 1;
            if *n == 0 {
                self.priorities.remove(&rule.priority);
            }
        }
        self.max_priority = self.priorities.keys().next_back().copied().unwrap_or(0);
        true
    }

    /// Empties slot `i`, shifting back the entries of its probe run that
    /// would no longer be found.
    fn delete_slot(&mut self, mut i: usize) {
        let m = self.slots.len() - 1;
        let mut j = i;
        loop {
            j = (j + 1) & m;
            if !self.slots[j].used {
                break;
            }
            let home = self.slots[j].hash as usize & m;
            // Slot j stays if its home is cyclically within (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = std::mem::take(&mut self.slots[j]);
                i = j;
            }
        }
        self.slots[i] = Slot::default();
        self.len -= 1;
    }
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
                self.subtables.push(Subtable::new(*mask));
                self.subtables.len() - 1
            }
        };
        self.subtables[i].insert(value, rule);
        self.len += 1;
        self.reorder();
    }

    /// Removes the rule `seq` matching `value` under `mask`; whether it
    /// was there.
    pub fn remove(&mut self, mask: &KeyMask, value: &FlowKey, seq: u64) -> bool {
        let Some(i) = self.subtables.iter().position(|s| s.mask == *mask) else {
            return false;
        };
        if !self.subtables[i].remove(value, seq) {
            return false;
        }
        self.len -= 1;
        if self.subtables[i].len == 0 {
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
            if let Some(r) = st.lookup(key) {
                if best.is_none_or(|b| r.beats(&b)) {
                    best = Some(r);
                }
            }
        }
        best
    }
}
