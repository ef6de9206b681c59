//! A per-worker exact-match cache in front of the pipeline, as OVS's EMC
//! is in front of its classifier: the full [`FlowKey`] → the [`Verdict`]
//! the tables gave it.
//!
//! Its entries are allocated once ([`FlowCache::new`]; an entry is a key
//! in two cache lines and a verdict, about 1.3 KB in all, so the default
//! 4,096 entries take about 5 MB per worker); a hit or a miss
//! allocates nothing (a miss runs the pipeline into the victim entry's
//! verdict, in place). Each entry remembers the tables' version it was
//! filled at, and is valid only at that version: any flow or group
//! modification invalidates every entry at once, so a flow mod takes
//! effect for the next lookup. Four candidate entries per key: two pairs
//! of neighbours, at two hashes (the EMC has two).
//!
//! Counting stays exact and off the shared counters' cache lines: each
//! entry counts its own frames and bytes (plain adds, in the entry the
//! lookup already read), and adds them to the verdict's counters (flows,
//! tables, groups; atomic adds, no lock) only before the entry is
//! refilled, at [`FlowCache::flush`] and on drop. A caller flushes now and
//! then (a switch worker: every few batches and before it sleeps), so the
//! counters lag the traffic by that much, as OVS's lag its datapath's.
//! An atomic add per frame on a flow's counter cost more than the rest of
//! a cached lookup with 1,000 flows (the switch crate's `forward_cost`
//! example, `flows1000`).

use crate::key::FlowKey;
use crate::table::FlowTables;
use crate::verdict::{Edit, Output, Verdict, MAX_EDITS, MAX_OUTPUTS};

/// Most action classes a cache tells apart (see [`Hit::class`]).
const MAX_CLASSES: usize = 64;
/// The class of a verdict beyond [`MAX_CLASSES`]: like no other.
pub const NO_CLASS: u32 = u32::MAX;

/// What a verdict does, without its counters: verdicts of one class send a
/// frame to the same places with the same edits.
#[derive(Debug, Clone, Copy)]
struct Class {
    n_outputs: usize,
    n_edits: usize,
    truncated: bool,
    outputs: [Option<Output>; MAX_OUTPUTS],
    edits: [Option<Edit>; MAX_EDITS],
}

const NO_CLASS_YET: Class = Class {
    n_outputs: 0,
    n_edits: 0,
    truncated: false,
    outputs: [None; MAX_OUTPUTS],
    edits: [None; MAX_EDITS],
};

impl Class {
    /// Whether verdict `v` is of this class (the counts compared first,
    /// then only the outputs and edits there are).
    fn holds(&self, v: &Verdict) -> bool {
        let (outs, edits) = (v.outputs(), v.all_edits());
        self.n_outputs == outs.len()
            && self.n_edits == edits.len()
            && self.truncated == v.truncated()
            && self.outputs.iter().zip(outs).all(|(a, b)| *a == Some(*b))
            && self.edits.iter().zip(edits).all(|(a, b)| *a == Some(*b))
    }

    fn of(v: &Verdict) -> Class {
        let mut c = NO_CLASS_YET;
        c.n_outputs = v.outputs().len();
        c.n_edits = v.all_edits().len();
        c.truncated = v.truncated();
        for (o, out) in c.outputs.iter_mut().zip(v.outputs()) {
            *o = Some(*out);
        }
        for (e, edit) in c.edits.iter_mut().zip(v.all_edits()) {
            *e = Some(*edit);
        }
        c
    }
}

/// A lookup's answer.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'a> {
    /// Changes whenever the entry is filled: two lookups with the same
    /// stamp got the same verdict.
    pub stamp: u64,
    /// The verdict's class at this version: two verdicts of one class (of
    /// two flows with the same actions, say) do the same with a frame, so
    /// a caller can keep what it made of one for the other without reading
    /// it; [`NO_CLASS`] is like no other.
    pub class: u32,
    /// The verdict.
    pub verdict: &'a Verdict,
}

/// An entry's index part: what a lookup reads, two cache lines, apart
/// from the entry's verdict (about 1.2 KB) which only a hit's caller and a
/// fill touch.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Slot {
    /// The tables' version it was filled at; 0: empty (versions start at 1).
    version: u64,
    hash: u64,
    key: FlowKey,
    /// Frames and bytes looked up since the entry was last counted.
    packets: u64,
    bytes: u64,
    /// Which fill of the cache this is (see [`Hit::stamp`]).
    stamp: u64,
    /// Its verdict's class (see [`Hit::class`]).
    class: u32,
    /// In `FlowCache::dirty`.
    dirty: bool,
}

impl Slot {
    /// Adds what the entry counted to its verdict's counters.
    #[inline]
    fn count(&mut self, verdict: &Verdict) {
        if self.packets != 0 {
            verdict.count(self.packets, self.bytes);
            self.packets = 0;
            self.bytes = 0;
        }
    }
}

/// A per-worker exact-match cache (see the module documentation).
#[derive(Debug)]
pub struct FlowCache {
    slots: Box<[Slot]>,
    /// Entry `i`'s verdict is `verdicts[i]`.
    verdicts: Box<[Verdict]>,
    mask: usize,
    hits: u64,
    misses: u64,
    /// Entries filled so far (the last fill's stamp).
    fills: u64,
    /// Entries with frames not yet counted (each once: see `Entry::dirty`);
    /// at most every entry.
    dirty: Vec<u32>,
    /// Frames looked up since the last flush.
    unflushed: u64,
    /// The entry the last lookup answered from.
    last: usize,
    /// The action classes of the verdicts filled at `classes_version`.
    classes: Box<[Class]>,
    n_classes: usize,
    classes_version: u64,
}

/// Default number of entries.
pub const DEFAULT_ENTRIES: usize = 4096;

impl Default for FlowCache {
    fn default() -> Self {
        FlowCache::new(DEFAULT_ENTRIES)
    }
}

impl FlowCache {
    /// A cache of `entries` entries (rounded up to a power of two, at least
    /// 2), all allocated now.
    pub fn new(entries: usize) -> FlowCache {
        let n = entries.max(2).next_power_of_two();
        FlowCache {
            slots: (0..n).map(|_| Slot::default()).collect(),
            verdicts: (0..n).map(|_| Verdict::default()).collect(),
            mask: n - 1,
            hits: 0,
            misses: 0,
            fills: 0,
            dirty: Vec::with_capacity(n),
            unflushed: 0,
            last: 0,
            classes: vec![NO_CLASS_YET; MAX_CLASSES].into_boxed_slice(),
            n_classes: 0,
            classes_version: 0,
        }
    }

    /// The verdict for `key`, a frame of `bytes` bytes, counted in its
    /// entry; on a miss, the tables' pipeline fills it.
    #[inline]
    pub fn lookup(&mut self, tables: &FlowTables, key: &FlowKey, bytes: usize) -> &Verdict {
        self.lookup_with(tables.version(), key, bytes, |k, v| tables.classify(k, v))
    }

    /// As [`FlowCache::lookup`], for a caller that reaches the tables only
    /// on a miss (e.g. behind a lock): `version` is the tables' current
    /// version and `miss` fills a verdict ([`FlowTables::classify`]).
    #[inline]
    pub fn lookup_with(
        &mut self,
        version: u64,
        key: &FlowKey,
        bytes: usize,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> &Verdict {
        self.lookup_hit(version, key, bytes, miss).verdict
    }

    /// As [`FlowCache::lookup_with`], with the entry's stamp and its
    /// verdict's class (see [`Hit`]).
    #[inline]
    pub fn lookup_hit(
        &mut self,
        version: u64,
        key: &FlowKey,
        bytes: usize,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> Hit<'_> {
        self.lookup_hashed(version, key, key.hash(), bytes, miss)
    }

    /// The two entries a key with hash `h` may be in.
    #[inline(always)]
    fn candidates(&self, h: u64) -> (usize, usize) {
        (h as usize & self.mask, (h >> 32) as usize & self.mask)
    }

    /// Hands `hint` the address of every cache line a lookup of a key
    /// with hash `h` ([`FlowKey::hash`]) reads first (its two candidate
    /// entries' index parts), so that a caller that knows a key before it
    /// looks it up can have them fetched meanwhile (a prefetch: this crate
    /// touches no raw memory itself).
    #[inline(always)]
    pub fn prefetch_with(&self, h: u64, mut hint: impl FnMut(*const u8)) {
        let (a, b) = self.candidates(h);
        for i in [a, b] {
            let p = std::ptr::from_ref(&self.slots[i]).cast::<u8>();
            hint(p);
            hint(p.wrapping_add(64));
        }
    }

    /// As [`FlowCache::lookup_hit`], for a key whose hash `h` the caller
    /// computed already: `h` must be [`FlowKey::hash`] of `key` (another
    /// value makes lookups of the key miss and fill entries again, nothing
    /// worse).
    #[inline]
    pub fn lookup_hashed(
        &mut self,
        version: u64,
        key: &FlowKey,
        h: u64,
        bytes: usize,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> Hit<'_> {
        let (a, b) = self.candidates(h);
        let valid = |e: &Slot| e.version == version && e.hash == h && e.key.same(key);
        // Two pairs of neighbouring entries: a key has four places, so a
        // few hundred active flows rarely push one another out (with two,
        // 1,000 flows in 4,096 entries missed 1.2 % of lookups for good).
        // A fill prefers `a`, where the first probe looks.
        let ways = [a, a ^ 1, b, b ^ 1];
        let slot = if valid(&self.slots[a]) {
            self.hits += 1;
            a
        } else if let Some(&i) = ways[1..].iter().find(|&&i| valid(&self.slots[i])) {
            self.hits += 1;
            i
        } else {
            self.misses += 1;
            let victim = ways
                .iter()
                .copied()
                .find(|&i| self.slots[i].version != version)
                .unwrap_or(ways[(h >> 30) as usize & 3]);
            let (e, verdict) = (&mut self.slots[victim], &mut self.verdicts[victim]);
            // What the victim counted goes to its own verdict's counters.
            e.count(verdict);
            miss(key, verdict);
            self.fills += 1;
            e.stamp = self.fills;
            e.class = {
                if self.classes_version != version {
                    // Every entry of another version is stale: so are
                    // their classes.
                    self.classes_version = version;
                    self.n_classes = 0;
                }
                let known = &self.classes[..self.n_classes];
                match known.iter().position(|k| k.holds(verdict)) {
                    Some(i) => u32::try_from(i).unwrap_or(NO_CLASS),
                    None if self.n_classes < MAX_CLASSES => {
                        self.classes[self.n_classes] = Class::of(verdict);
                        self.n_classes += 1;
                        u32::try_from(self.n_classes - 1).unwrap_or(NO_CLASS)
                    }
                    None => NO_CLASS,
                }
            };
            e.version = version;
            e.hash = h;
            e.key = *key;
            victim
        };
        self.last = slot;
        self.count_in(slot, bytes);
        let e = &self.slots[slot];
        Hit {
            stamp: e.stamp,
            class: e.class,
            verdict: &self.verdicts[slot],
        }
    }

    /// Counts one more frame of `bytes` bytes with the same key as the last
    /// lookup's (a caller that saw the key repeat), as a lookup would, with
    /// nothing looked up: the entry cannot have changed since.
    #[inline]
    pub fn repeat_last(&mut self, bytes: usize) {
        self.hits += 1;
        self.count_in(self.last, bytes);
    }

    /// Counts a frame of `bytes` bytes in entry `slot`.
    #[inline(always)]
    fn count_in(&mut self, slot: usize, bytes: usize) {
        self.unflushed += 1;
        let e = &mut self.slots[slot];
        e.packets += 1;
        e.bytes += bytes as u64;
        if !e.dirty {
            e.dirty = true;
            // At most once per entry: within the capacity reserved.
            self.dirty.push(u32::try_from(slot).unwrap_or(u32::MAX));
        }
    }

    /// Adds what every entry counted since the last flush to the verdicts'
    /// counters.
    pub fn flush(&mut self) {
        for &s in &self.dirty {
            let i = s as usize;
            if let (Some(e), Some(v)) = (self.slots.get_mut(i), self.verdicts.get(i)) {
                e.count(v);
                e.dirty = false;
            }
        }
        self.dirty.clear();
        self.unflushed = 0;
    }

    /// Frames looked up since the last flush (a caller flushes when they
    /// are many).
    pub fn unflushed(&self) -> u64 {
        self.unflushed
    }

    /// Entries with frames not yet counted ([`FlowCache::flush`] counts
    /// them).
    pub fn pending(&self) -> usize {
        self.dirty.len()
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Lookups that ran the pipeline.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// How many entries.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

impl Drop for FlowCache {
    fn drop(&mut self) {
        self.flush();
    }
}
