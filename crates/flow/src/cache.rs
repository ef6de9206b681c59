//! A per-worker exact-match cache in front of the pipeline, as OVS's EMC
//! is in front of its classifier: the full [`FlowKey`] → the [`Verdict`]
//! the tables gave it.
//!
//! Its entries are allocated once ([`FlowCache::new`]; an entry is an
//! index part of one cache line, a full key and a verdict, about 1.3 KB in
//! all, so the default 4,096 entries take about 5 MB per worker); a hit or
//! a miss
//! allocates nothing (a miss runs the pipeline into the victim entry's
//! verdict, in place). Each entry remembers the tables' version it was
//! filled at, and is valid only at that version: any flow or group
//! modification invalidates every entry at once, so a flow mod takes
//! effect for the next lookup. Four candidate entries per key: two pairs
//! of neighbours, at two hashes (the EMC has two); a fill that finds all
//! four taken first tries to move one of their keys to a free entry of
//! its own four (one step of cuckoo hashing), so that keys that share
//! places do not evict one another for good.
//!
//! A key is looked up as a [`Probe`]: the commonest frames' keys (untagged
//! IPv4, see [`CompactKey`]) in four words, which the entry's index part
//! holds with its counts in one cache line, so that a lookup reads one
//! line; any other key in full in a second place apart.
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

use crate::key::{CompactKey, FlowKey, KEY_BYTES};
use crate::table::FlowTables;
use crate::verdict::{Edit, Output, Verdict, MAX_EDITS, MAX_OUTPUTS};

/// Most action classes a cache numbers at once (see [`Hit::class`]).
const MAX_CLASSES: usize = 64;
/// The class of a verdict beyond [`MAX_CLASSES`]: like no other. (A
/// class is its numbering and its number in it, a byte each: this is
/// neither.)
pub const NO_CLASS: u32 = u16::MAX as u32;

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
    /// The verdict's action class: two verdicts of one class (of two
    /// flows with the same actions, say, or of two switches' tables) do
    /// the same with a frame, so a caller can keep what it made of one for
    /// the other without reading it; [`NO_CLASS`] is like no other.
    pub class: u32,
    /// The verdict.
    verdicts: &'a [Verdict],
    slot: usize,
}

impl<'a> Hit<'a> {
    /// The verdict (found only when asked for: a caller that knows what
    /// its class does need not read it).
    #[inline]
    pub fn verdict(&self) -> &'a Verdict {
        &self.verdicts[self.slot]
    }
}

/// A key as the cache looks it up (see the module documentation): a
/// [`CompactKey`], or a full [`FlowKey`] by its hash.
#[derive(Debug, Clone, Copy, Default)]
pub struct Probe {
    /// The compact key's words; for a full key: 0, [`FULL`], 0, 0.
    words: [u64; 4],
    /// The full key, when it has no compact form (else not kept up to
    /// date).
    full: FlowKey,
}

/// Word 1 of a full key's probe: a bit no compact key has set.
const FULL: u64 = 1;

impl Probe {
    /// The probe of `key`.
    #[inline]
    pub fn of(key: &FlowKey) -> Probe {
        let mut p = Probe::default();
        p.set(key);
        p
    }

    /// Makes this the probe of `key`.
    #[inline]
    pub fn set(&mut self, key: &FlowKey) {
        self.full = *key;
        self.settle();
    }

    /// Makes this the probe of the frame whose first `n` bytes (at most
    /// [`KEY_BYTES`]) are in `buf`, from OpenFlow port `in_port` (the key
    /// of [`FlowKey::extract_prefix`], made in place: the commonest
    /// frames' without a full key at all).
    #[inline(always)]
    pub fn set_prefix(&mut self, buf: &[u8; KEY_BYTES], n: usize, in_port: u32) {
        match CompactKey::from_prefix(buf, n, in_port) {
            Some(c) => self.words = *c.words(),
            None => self.set_prefix_full(buf, n, in_port),
        }
    }

    /// [`Probe::set_prefix`] of a frame without a compact key: out of the
    /// way of the commonest frames' path, which then needs no stack frame.
    #[cold]
    #[inline(never)]
    fn set_prefix_full(&mut self, buf: &[u8; KEY_BYTES], n: usize, in_port: u32) {
        self.full = FlowKey::extract(&buf[..n.min(KEY_BYTES)], in_port);
        self.settle();
    }

    /// Makes the words those of the key in `full`.
    #[inline]
    fn settle(&mut self) {
        self.words = match self.full.compact() {
            Some(c) => *c.words(),
            None => [0, FULL, 0, 0],
        };
    }

    /// Whether the key has no compact form.
    #[inline(always)]
    fn is_full(&self) -> bool {
        self.words[1] & FULL != 0
    }

    /// The key's hash ([`CompactKey::hash`] or [`FlowKey::hash`]).
    #[inline]
    pub fn hash(&self) -> u64 {
        if self.is_full() {
            self.full.hash()
        } else {
            CompactKey::from_words(self.words).hash()
        }
    }

    /// The full key.
    #[inline]
    pub fn key(&self) -> FlowKey {
        if self.is_full() {
            self.full
        } else {
            CompactKey::from_words(self.words).expand()
        }
    }

    /// Whether two probes are of the same key: a compact key word by
    /// word, most likely to differ first (the addresses, the ports),
    /// stopping at the first difference.
    #[inline]
    pub fn same(&self, o: &Probe) -> bool {
        if self.is_full() {
            return o.is_full() && self.full.same(&o.full);
        }
        // A full key's word 1 has a bit no compact key's has.
        let (a, b) = (&self.words, &o.words);
        a[2] == b[2] && a[3] == b[3] && a[0] == b[0] && a[1] == b[1]
    }
}

/// An entry's index part: what a lookup reads, one cache line, apart
/// from its full key (only for a key without a compact form) and its
/// verdict (about 1.2 KB), which only a hit's caller and a fill touch.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Slot {
    /// The tables' version it was filled at; 0: empty (versions start at 1).
    version: u64,
    /// Its probe's words.
    key: [u64; 4],
    /// Frames and bytes looked up since the entry was last counted.
    packets: u64,
    bytes: u64,
    /// Which fill of the cache this is (see [`Hit::stamp`]): no two
    /// entries that hold a key have the same.
    stamp: u32,
    /// Its verdict's class (see [`Hit::class`]): its numbering (the
    /// cache's `class_gen` then) and its number in it, or [`NO_CLASS`].
    class: u16,
    /// In `FlowCache::dirty`.
    dirty: bool,
}
// A lookup reads one cache line.
const _: () = assert!(std::mem::size_of::<Slot>() == 64);
// A class's number fits its byte, and no class is `NO_CLASS`.
const _: () = assert!(MAX_CLASSES < 0xff);

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
    /// Entry `i`'s full key, if its key has no compact form, is `keys[i]`.
    keys: Box<[FlowKey]>,
    /// Entry `i`'s verdict is `verdicts[i]`.
    verdicts: Box<[Verdict]>,
    mask: usize,
    /// Lookups up to the last flush (the rest are `unflushed`), and the
    /// lookups that missed.
    lookups: u64,
    misses: u64,
    /// Times the cache was emptied (see [`FlowCache::epoch`]).
    empties: u64,
    /// Entries filled since the cache was last emptied (the last fill's
    /// stamp).
    fills: u32,
    /// Entries with frames not yet counted (each once: see `Entry::dirty`);
    /// at most every entry.
    dirty: Vec<u32>,
    /// Frames looked up since the last flush.
    unflushed: u64,
    /// The action classes numbered so far in numbering `class_gen`: a
    /// class keeps its number while any entry may hold it. Entries of
    /// every version share them (each switch on a worker fills its own
    /// entries at its own versions), so a number is never given to other
    /// actions but in a new numbering, once these are all taken; when the
    /// numberings wrap, every entry goes first (see `FlowCache::fill`).
    classes: Box<[Class]>,
    n_classes: usize,
    class_gen: u8,
    /// The tables' version of the last fill.
    fill_version: u64,
    /// Fills that skip `make_room`, and how many the next failure of it
    /// skips (see `FlowCache::make_room`).
    room_skip: u32,
    room_backoff: u32,
}

/// Default number of entries.
pub const DEFAULT_ENTRIES: usize = 4096;

/// Most fills that skip trying to make room after it failed (see
/// `FlowCache::make_room`).
const ROOM_BACKOFF_MAX: u32 = 1024;

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
            keys: vec![FlowKey::default(); n].into_boxed_slice(),
            verdicts: (0..n).map(|_| Verdict::default()).collect(),
            mask: n - 1,
            lookups: 0,
            misses: 0,
            empties: 0,
            fills: 0,
            dirty: Vec::with_capacity(n),
            unflushed: 0,
            classes: vec![NO_CLASS_YET; MAX_CLASSES].into_boxed_slice(),
            n_classes: 0,
            class_gen: 0,
            fill_version: 0,
            room_skip: 0,
            room_backoff: 0,
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
        self.lookup_hit(version, key, bytes, miss).verdict()
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
        let p = Probe::of(key);
        self.lookup_probe(version, &p, p.hash(), bytes, miss)
    }

    /// The two entries a key with hash `h` may be in.
    #[inline(always)]
    fn candidates(&self, h: u64) -> (usize, usize) {
        (h as usize & self.mask, (h >> 32) as usize & self.mask)
    }

    /// Hands `hint` the address of every cache line a lookup of a key
    /// with hash `h` ([`Probe::hash`]) reads first (its two candidate
    /// entries' index parts), so that a caller that knows a key before it
    /// looks it up can have them fetched meanwhile (a prefetch: this crate
    /// touches no raw memory itself).
    #[inline(always)]
    pub fn prefetch_with(&self, h: u64, mut hint: impl FnMut(*const u8)) {
        let (a, b) = self.candidates(h);
        // Addresses only (both within the entries: `candidates` masks),
        // made without a bounds check each.
        let base = self.slots.as_ptr();
        hint(base.wrapping_add(a).cast::<u8>());
        hint(base.wrapping_add(b).cast::<u8>());
    }

    /// Whether entry `i` holds probe `p` at `version`.
    #[inline(always)]
    fn holds(&self, i: usize, version: u64, p: &Probe) -> bool {
        let e = &self.slots[i];
        let (a, b) = (&e.key, &p.words);
        e.version == version
            && ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) == 0
            && (!p.is_full() || self.keys[i].same(&p.full))
    }

    /// As [`FlowCache::lookup_hit`], for a key the caller made a
    /// [`Probe`] of, whose hash `h` it computed already: `h` must be
    /// [`Probe::hash`] of `probe` (another value makes lookups of the key
    /// miss and fill entries again, nothing worse).
    #[inline]
    pub fn lookup_probe(
        &mut self,
        version: u64,
        probe: &Probe,
        h: u64,
        bytes: usize,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> Hit<'_> {
        // Two pairs of neighbouring entries: a key has four places, so a
        // few hundred active flows rarely push one another out (with two,
        // 1,000 flows in 4,096 entries missed 1.2 % of lookups for good;
        // a fill also moves a key aside to make room, see `make_room`).
        // The places are tried, and filled, in the order of `ways`: the
        // two lines a caller prefetched first.
        let a = self.ways(h)[0];
        let slot = if self.holds(a, version, probe) {
            a
        } else {
            self.lookup_rest(version, probe, h, miss)
        };
        let e = self.count_in(slot, bytes);
        Hit {
            stamp: u64::from(e.stamp),
            class: u32::from(e.class),
            verdicts: &self.verdicts,
            slot,
        }
    }

    /// [`FlowCache::lookup_probe`] of a key not in its first place (one in
    /// eight with 1,000 flows in 4,096 entries): its other places, then a
    /// fill. Out of line, so that the commonest lookup is a few
    /// instructions in its caller's loop.
    #[inline(never)]
    fn lookup_rest(
        &mut self,
        version: u64,
        probe: &Probe,
        h: u64,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> usize {
        let [_, rest @ ..] = self.ways(h);
        match rest.into_iter().find(|&i| self.holds(i, version, probe)) {
            Some(i) => i,
            None => self.fill(version, probe, h, miss),
        }
    }

    /// A miss of `probe` (hash `h`): the pipeline (`miss`) fills the
    /// verdict of one of its four entries, which is returned.
    #[cold]
    #[inline(never)]
    fn fill(
        &mut self,
        version: u64,
        probe: &Probe,
        h: u64,
        miss: impl FnOnce(&FlowKey, &mut Verdict),
    ) -> usize {
        self.misses += 1;
        if self.fills == u32::MAX {
            // Stamps are about to repeat: every entry goes, so that no two
            // that hold a key share one.
            self.empty();
        }
        if self.fill_version != version {
            // The tables changed (or another switch's fill came between):
            // there may be room everywhere again.
            self.fill_version = version;
            self.room_skip = 0;
            self.room_backoff = 0;
        }
        let ways = self.ways(h);
        let victim = ways
            .iter()
            .copied()
            .find(|&i| self.slots[i].version != version)
            .or_else(|| self.make_room(version, ways))
            .unwrap_or(ways[(h >> 30) as usize & 3]);
        let (e, verdict) = (&mut self.slots[victim], &mut self.verdicts[victim]);
        // What the victim counted goes to its own verdict's counters.
        e.count(verdict);
        miss(&probe.key(), verdict);
        let known = &self.classes[..self.n_classes];
        let class = match known.iter().position(|k| k.holds(verdict)) {
            Some(i) => i,
            None => {
                if self.n_classes == MAX_CLASSES {
                    // Every number is taken: a new numbering, in which
                    // entries of the old keep theirs (a class and its
                    // numbering tell it apart). Before the numberings
                    // wrap, every entry goes, so that none keeps a number
                    // given to other actions.
                    self.class_gen = self.class_gen.wrapping_add(1);
                    self.n_classes = 0;
                    if self.class_gen == 0 {
                        self.empty();
                    }
                }
                self.classes[self.n_classes] = Class::of(&self.verdicts[victim]);
                self.n_classes += 1;
                self.n_classes - 1
            }
        };
        // Stamped after any emptying above, which starts them over.
        self.fills += 1;
        let e = &mut self.slots[victim];
        e.stamp = self.fills;
        e.class = u16::from(self.class_gen) << 8 | u16::try_from(class).unwrap_or(0xff);
        e.version = version;
        e.key = probe.words;
        if probe.is_full() {
            self.keys[victim] = probe.full;
        }
        victim
    }

    /// The four entries a key with hash `h` may be in, two pairs of
    /// neighbours, in the order a lookup tries them and a fill takes the
    /// first free one: the two whose lines [`FlowCache::prefetch_with`]
    /// hands out, then their neighbours. Trying a neighbour second (a line
    /// not prefetched, which keys are rarely in) cost a lookup of the
    /// others a cache miss: `forward_cost 60 512 flows1000` took 58.8 ns a
    /// frame so, 48.4 in this order (medians of 7, alternating).
    #[inline(always)]
    fn ways(&self, h: u64) -> [usize; 4] {
        let (a, b) = self.candidates(h);
        [a, b, a ^ 1, b ^ 1]
    }

    /// Makes room among `ways` (all four valid at `version`) by moving
    /// one of their keys to a free entry among its own four, as cuckoo
    /// hashing does, one step deep; returns the entry made free. Without
    /// it, two keys whose four entries are all taken evict each other at
    /// every turn for good: the bench's 1,000 UDP 5-tuples in 4,096
    /// entries missed 0.4 % of lookups so (each miss runs the pipeline),
    /// and none with it.
    ///
    /// It fails only where no entry is free nearby: in a cache full of
    /// valid entries, as a storm of new keys leaves it, where trying on
    /// every miss made one cost 197 ns instead of 141 (the `classify_cost`
    /// example's miss storm, 1,000 flows; mostly reading other entries'
    /// places). So each failure makes the
    /// next fills skip it, twice as many after each failure in a row, up
    /// to [`ROOM_BACKOFF_MAX`]; a success ends the skipping.
    fn make_room(&mut self, version: u64, ways: [usize; 4]) -> Option<usize> {
        if self.room_skip > 0 {
            self.room_skip -= 1;
            return None;
        }
        let room = self.find_room(version, ways);
        if room.is_some() {
            self.room_backoff = 0;
        } else {
            self.room_backoff = (self.room_backoff * 2).clamp(1, ROOM_BACKOFF_MAX);
            self.room_skip = self.room_backoff;
        }
        room
    }

    /// [`FlowCache::make_room`]'s one step.
    fn find_room(&mut self, version: u64, ways: [usize; 4]) -> Option<usize> {
        for w in ways {
            let held = Probe {
                words: self.slots[w].key,
                full: self.keys[w],
            };
            let Some(to) = self
                .ways(held.hash())
                .into_iter()
                .find(|&j| j != w && self.slots[j].version != version)
            else {
                continue;
            };
            self.move_entry(w, to);
            return Some(w);
        }
        None
    }

    /// Moves the entry in `from` to `to` (an entry not valid now), which
    /// goes to `from` in exchange. Both have their counts added to their
    /// verdicts' first, so that each entry's `dirty` flag stays with its
    /// place in `dirty`, which lists places.
    fn move_entry(&mut self, from: usize, to: usize) {
        for i in [from, to] {
            self.slots[i].count(&self.verdicts[i]);
        }
        self.verdicts.swap(from, to);
        self.keys.swap(from, to);
        let (lo, hi) = self.slots.split_at_mut(from.max(to));
        let (x, y) = (&mut lo[from.min(to)], &mut hi[0]);
        std::mem::swap(&mut x.version, &mut y.version);
        std::mem::swap(&mut x.key, &mut y.key);
        std::mem::swap(&mut x.stamp, &mut y.stamp);
        std::mem::swap(&mut x.class, &mut y.class);
    }

    /// Counts what every entry counted and empties them all.
    fn empty(&mut self) {
        self.flush();
        self.empties += 1;
        for e in self.slots.iter_mut() {
            e.version = 0;
        }
        self.fills = 0;
        self.room_skip = 0;
        self.room_backoff = 0;
    }

    /// Counts a frame of `bytes` bytes in entry `slot`, and returns the
    /// entry.
    #[inline(always)]
    fn count_in(&mut self, slot: usize, bytes: usize) -> &Slot {
        self.unflushed += 1;
        let FlowCache { slots, dirty, .. } = self;
        let e = &mut slots[slot];
        e.packets += 1;
        e.bytes += bytes as u64;
        if !e.dirty {
            e.dirty = true;
            // At most once per entry: within the capacity reserved.
            dirty.push(u32::try_from(slot).unwrap_or(u32::MAX));
        }
        e
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
        self.lookups += self.unflushed;
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

    /// Which emptying of the cache this is: the classes of hits (see
    /// [`Hit::class`]) in one epoch are of one numbering, so what a caller
    /// made of a class holds for as long as the epoch lasts (a class's
    /// number may stand for other actions in another).
    pub fn epoch(&self) -> u64 {
        self.empties
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.lookups + self.unflushed - self.misses
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Config;
    use crate::verdict::Target;

    /// Verdicts of more distinct actions than one numbering holds, at two
    /// versions (two switches sharing the cache): two entries of different
    /// actions never get one class, across numberings; two of the same
    /// actions in one numbering do; and once the numberings wrap, every
    /// entry is refilled before its number could be another's.
    #[test]
    fn a_class_is_never_two_actions_across_versions_and_numberings() {
        let mut c = FlowCache::new(4096);
        let key = |i: u64| {
            let mut k = FlowKey::default();
            k.set_metadata(i);
            k
        };
        // Key i's verdict outputs to port `port(i)`, at version 1 or 2.
        let port = |i: u64| u32::try_from(i % 100).unwrap();
        let look = |c: &mut FlowCache, i: u64| {
            let version = 1 + i % 2;
            let h = c.lookup_hit(version, &key(i), 60, |_, v| {
                v.clear();
                v.push_output(Target::Port(port(i)), 0);
            });
            (h.class, h.verdict().outputs()[0].target)
        };
        let mut seen = std::collections::HashMap::new();
        // 300 keys of 100 actions, twice (a fill at one version may take
        // an entry of the other: it is then filled again, with a number
        // of this numbering or the next): past a numbering.
        for i in (0..300).chain(0..300) {
            let (class, target) = look(&mut c, i);
            assert_ne!(class, NO_CLASS);
            assert_eq!(*seen.entry(class).or_insert(target), target, "key {i}");
        }
        assert!(c.class_gen >= 1);
        // The last numbering full, in the last numbering: a new action
        // makes the numberings wrap, and every entry goes first.
        let before = look(&mut c, 7);
        let misses = c.misses();
        assert_eq!(look(&mut c, 7), before);
        assert_eq!(c.misses(), misses);
        c.class_gen = u8::MAX;
        c.n_classes = MAX_CLASSES;
        c.lookup_hit(1, &key(1_000_000), 60, |_, v| {
            v.clear();
            v.push_output(Target::Port(1_000_000), 0);
        });
        assert_eq!(c.class_gen, 0);
        let misses = c.misses();
        assert_eq!(look(&mut c, 7).1, before.1);
        assert_eq!(c.misses(), misses + 1, "refilled after the wrap");
    }

    /// When the fill count would wrap, the cache empties (counting what
    /// its entries counted), so that two entries that hold keys never
    /// share a stamp.
    #[test]
    fn stamps_never_repeat_across_a_wrap() {
        let tables = FlowTables::new(Config::default());
        let mut c = FlowCache::new(64);
        let key = |i: u64| {
            let mut k = FlowKey::default();
            k.set_metadata(i);
            k
        };
        let version = tables.version();
        let look = |c: &mut FlowCache, i: u64| {
            c.lookup_hit(version, &key(i), 60, |k, v| tables.classify(k, v))
                .stamp
        };
        let old = look(&mut c, 1);
        c.fills = u32::MAX - 1;
        let a = look(&mut c, 2);
        assert_eq!(a, u64::from(u32::MAX));
        // The next fill empties the cache first: key 1 misses again.
        let b = look(&mut c, 3);
        assert_eq!((b, c.misses()), (1, 3));
        assert_eq!(look(&mut c, 1), 2);
        assert_ne!(old, 2);
        assert_eq!(look(&mut c, 3), 1);
        assert_eq!((c.hits(), c.misses()), (1, 4));
        assert_eq!(c.pending(), 2);
    }
}
