//! A per-worker exact-match cache in front of the pipeline, as OVS's EMC
//! is in front of its classifier: the full [`FlowKey`] → the [`Verdict`]
//! the tables gave it.
//!
//! Its entries are allocated once ([`FlowCache::new`]; an entry is a key
//! and a verdict, about 1.3 KB, so the default 4,096 entries take about
//! 5 MB per worker); a hit or a miss
//! allocates nothing (a miss runs the pipeline into the victim entry's
//! verdict, in place). Each entry remembers the tables' version it was
//! filled at, and is valid only at that version: any flow or group
//! modification invalidates every entry at once, so a flow mod takes
//! effect for the next lookup. Two candidate entries per key (two hash
//! bits ranges), like the EMC's.
//!
//! Counting stays exact: the cache keeps the current run of frames that
//! share a verdict, and adds the run to the verdict's counters (flows,
//! tables, groups; atomic adds, no lock) once, when the run ends: when a
//! frame gets another entry, before an entry is refilled, at
//! [`FlowCache::flush`] (call it at the end of each batch) and on drop.

use crate::key::FlowKey;
use crate::table::FlowTables;
use crate::verdict::Verdict;

#[derive(Debug, Default)]
struct Entry {
    /// The tables' version it was filled at; 0: empty (versions start at 1).
    version: u64,
    /// Which fill of the cache this is (see [`FlowCache::lookup_stamped`]).
    stamp: u64,
    hash: u64,
    key: FlowKey,
    verdict: Verdict,
}

/// A per-worker exact-match cache (see the module documentation).
#[derive(Debug)]
pub struct FlowCache {
    entries: Box<[Entry]>,
    mask: usize,
    hits: u64,
    misses: u64,
    /// Entries filled so far (the last fill's stamp).
    fills: u64,
    /// The entry of the current run, and the run's frames and bytes.
    run: Option<usize>,
    run_packets: u64,
    run_bytes: u64,
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
            entries: (0..n).map(|_| Entry::default()).collect(),
            mask: n - 1,
            hits: 0,
            misses: 0,
            fills: 0,
            run: None,
            run_packets: 0,
            run_bytes: 0,
        }
    }

    /// The verdict for `key`, a frame of `bytes` bytes, counted in the
    /// current run; on a miss, the tables' pipeline fills it.
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
        let valid = |e: &Entry| e.version == version && e.hash == h && e.key == *key;
        let slot = if valid(&self.entries[a]) {
            self.hits += 1;
            a
        } else if valid(&self.entries[b]) {
            self.hits += 1;
            b
        } else {
            self.misses += 1;
            // The run's entry may be the victim: count the run first.
            self.flush();
            let victim = if self.entries[a].version != version {
                a
            } else if self.entries[b].version != version {
                b
            } else if h & (1 << 31) != 0 {
                a
            } else {
                b
            };
            let e = &mut self.entries[victim];
            miss(key, &mut e.verdict);
            self.fills += 1;
            e.stamp = self.fills;
            e.version = version;
            e.hash = h;
            e.key = *key;
            victim
        };
        if self.run != Some(slot) {
            self.flush();
            self.run = Some(slot);
        }
        self.run_packets += 1;
        self.run_bytes += bytes as u64;
        let e = &self.entries[slot];
        (e.stamp, &e.verdict)
    }

    /// Adds the current run to its verdict's counters.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(s) = self.run.take() {
            self.entries[s]
                .verdict
                .count(self.run_packets, self.run_bytes);
            self.run_packets = 0;
            self.run_bytes = 0;
        }
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
        self.entries.len()
    }
}

impl Drop for FlowCache {
    fn drop(&mut self) {
        self.flush();
    }
}
