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
//! effect for the next lookup. Two candidate entries per key (two hash
//! bits ranges), like the EMC's.
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
use crate::verdict::Verdict;

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
    /// Which fill of the cache this is (see [`FlowCache::lookup_stamped`]).
    stamp: u64,
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
        self.lookup_stamped(version, key, bytes, miss).1
    }

    /// As [`FlowCache::lookup_with`], with the entry's stamp: a number that
    /// changes whenever the entry is filled, so two lookups with the same
    /// stamp got the same verdict (a caller can keep what it made of a
    /// verdict for the next frames with the same stamp).
    #[inline]
    pub fn lookup_stamped(
        &mut self,
        version: u64,
        key: &FlowKey,
        bytes: usize,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> (u64, &Verdict) {
        let h = key.hash();
        let a = h as usize & self.mask;
        let b = (h >> 32) as usize & self.mask;
        let valid = |e: &Slot| {
            e.version == version
                && e.hash == h
                && e.key.words().iter().zip(key.words()).all(|(x, y)| x == y)
        };
        let slot = if valid(&self.slots[a]) {
            self.hits += 1;
            a
        } else if valid(&self.slots[b]) {
            self.hits += 1;
            b
        } else {
            self.misses += 1;
            let victim = if self.slots[a].version != version {
                a
            } else if self.slots[b].version != version {
                b
            } else if h & (1 << 31) != 0 {
                a
            } else {
                b
            };
            let (e, verdict) = (&mut self.slots[victim], &mut self.verdicts[victim]);
            // What the victim counted goes to its own verdict's counters.
            e.count(verdict);
            miss(key, verdict);
            self.fills += 1;
            e.stamp = self.fills;
            e.version = version;
            e.hash = h;
            e.key = *key;
            victim
        };
        self.unflushed += 1;
        let e = &mut self.slots[slot];
        e.packets += 1;
        e.bytes += bytes as u64;
        if !e.dirty {
            e.dirty = true;
            // At most once per entry: within the capacity reserved.
            self.dirty.push(u32::try_from(slot).unwrap_or(u32::MAX));
        }
        (e.stamp, &self.verdicts[slot])
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
