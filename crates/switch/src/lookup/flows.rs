//! The lookup on a switch with flow tables: a frame's flow key, its
//! verdict from the worker's flow cache (the tables, under their read
//! lock, only on a miss), and what the verdict's outputs mean on this
//! switch (a port, the flood, the learning bridge, the controller), with
//! the header edits of each output kept once per batch as an [`OutSpec`].
//!
//! A run of frames with the same verdict (the cache's stamp says so) is
//! resolved once.

use std::sync::RwLockReadGuard;

use ringswitch_flow::key::KEY_BYTES;
use ringswitch_flow::verdict::MAX_OUTPUTS;
use ringswitch_flow::{Edit, FlowCache, FlowTables, Probe, Target, Verdict, NO_CLASS};

use super::{PortIndex, PortTable, CHUNK};
use crate::flows::{Flows, PacketIn};

/// Most header edits one output carries here; an output with more is left
/// out and its frames counted as truncated.
pub(crate) const MAX_OUT_EDITS: usize = 12;
// Each edit pushes one tag at most: the edit buffer has room for them.
const _: () = assert!(MAX_OUT_EDITS * 4 <= crate::batch::EDIT_ROOM);
/// Most distinct outputs (target kinds with their edits) in one batch:
/// they are numbered with a byte. An output beyond is left out and its
/// frames counted as truncated.
pub(crate) const MAX_SPECS: usize = 255;
/// Frames a worker's flow cache counts in its entries before it adds
/// them to the flows' counters (see `ringswitch_flow::cache`): 50 ms or
/// more of traffic at full speed. A worker also flushes when the counts
/// are old or it goes idle ([`crate::Scratch::flush_counters`]). Each
/// flush is an atomic add per entry on the flows' shared counters: not to
/// be done more often than needed.
pub(crate) const FLUSH_FRAMES: u64 = 1 << 20;

/// Most entries (a frame's outputs) in one batch: a batch of the largest
/// size, each frame with every output a verdict holds.
pub(crate) const MAX_ENTRIES: usize = crate::batch::MAX_BATCH as usize * MAX_OUTPUTS;

/// What the controller is told with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct ToController {
    pub(crate) max_len: u16,
    pub(crate) reason: u8,
    pub(crate) table_id: u8,
    pub(crate) cookie: u64,
    pub(crate) metadata: u64,
}

/// One output of a batch's verdicts, as delivery needs it: its header
/// edits, whether the learning bridge's VLAN rules apply (`NORMAL`), and
/// for the controller what to tell it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutSpec {
    edits: [Edit; MAX_OUT_EDITS],
    n_edits: u8,
    /// The learning bridge's output: floods stay in the frame's VLAN and a
    /// frame without edits is retagged for its destination.
    pub(crate) normal: bool,
    pub(crate) controller: Option<ToController>,
}

impl PartialEq for OutSpec {
    fn eq(&self, o: &OutSpec) -> bool {
        self.normal == o.normal && self.controller == o.controller && self.edits() == o.edits()
    }
}

impl OutSpec {
    /// The header edits, in order.
    pub(crate) fn edits(&self) -> &[Edit] {
        &self.edits[..usize::from(self.n_edits)]
    }
}

/// The lean resolution of a verdict (one output, to one port; see
/// [`FlowLookup::classify`]), kept from one batch for the next: a worker's
/// next batch from a source mostly hits verdicts of the same actions,
/// which then resolve without a read of any. (In the daemon, where a
/// worker takes turns with a sender on one CPU, the batch's first read of
/// a verdict missed every cache: 1.8 ns a frame under perf.)
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Memo {
    /// What it was made of: the port table's generation, the source, the
    /// flow cache's epoch and the action class (see `ringswitch_flow::Hit`),
    /// which together decide a resolution.
    of: Option<(u64, PortIndex, u64, u32)>,
    port: PortIndex,
    spec: Option<OutSpec>,
}

/// The first bytes and keys of a chunk's frames (`crate::lookup::CHUNK`),
/// by their place in it: 4 KB, kept in the worker's scratch space from
/// batch to batch, not made with each batch's lookup (which cost a frame
/// alone in a batch 100 ns, in copies and zeroing).
pub(crate) struct Chunk {
    /// Copied by the lookup's caller (see [`Chunk::line`]).
    lines: [[u8; KEY_BYTES]; CHUNK],
    /// Their keys, once [`FlowLookup::prepare`]d.
    prepared: [Prepared; CHUNK],
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk {
            lines: [[0; KEY_BYTES]; CHUNK],
            prepared: [Prepared::default(); CHUNK],
        }
    }
}

impl Chunk {
    /// Where the caller copies the first bytes of the frame at place `at`
    /// (below `CHUNK`).
    #[inline(always)]
    pub(crate) fn line(&mut self, at: usize) -> &mut [u8; KEY_BYTES] {
        &mut self.lines[at % CHUNK]
    }

    /// The first 16 bytes of the frame at place `at`: its addresses, and
    /// where a VLAN tag would be.
    #[inline(always)]
    pub(crate) fn head(&self, at: usize) -> [u8; 16] {
        let mut h = [0u8; 16];
        h.copy_from_slice(&self.lines[at % CHUNK][..16]);
        h
    }
}

/// A frame's entries (one per output) in one batch, beside the lookup's
/// destination lists, which link entries, not frames.
#[derive(Default)]
pub(crate) struct FlowEntries {
    /// The switch has flow tables and they decide this batch.
    pub(crate) on: bool,
    /// Frames filed so far in the batch (the next frame's index).
    pub(crate) frames: u32,
    /// Per entry: its frame, and its output in `specs`.
    pub(crate) frame: Vec<u32>,
    pub(crate) spec: Vec<u8>,
    /// This batch's outputs.
    pub(crate) specs: Vec<OutSpec>,
    /// Entries for the controller, in batch order.
    pub(crate) controller: Vec<u32>,
    /// Per frame of a destination's `order` (see `Dests::order_for`): its
    /// entry's output. Empty while `identity` holds.
    pub(crate) order_spec: Vec<u8>,
    /// The last lean resolution, kept across batches.
    pub(crate) memo: Memo,
    /// The chunk's first bytes and keys.
    pub(crate) chunk: Box<Chunk>,
    /// Every entry so far is the one entry of the frame of the same index,
    /// with output 0: `frame` and `spec` are left empty, as every frame's
    /// entry is itself (the common batch: one flow action for all). The
    /// first entry that breaks it fills them in for those before it.
    pub(crate) identity: bool,
}

impl FlowEntries {
    /// Makes room for a batch of the largest size, the first time flow
    /// tables decide.
    pub(crate) fn ensure(&mut self) {
        if self.frame.capacity() < MAX_ENTRIES {
            self.frame.reserve(MAX_ENTRIES);
            self.spec.reserve(MAX_ENTRIES);
            self.specs.reserve(MAX_SPECS);
            self.controller.reserve(MAX_ENTRIES);
            self.order_spec.reserve(MAX_ENTRIES);
        }
    }

    /// Entry `e`'s frame.
    #[inline(always)]
    pub(crate) fn frame_of(&self, e: u32) -> u32 {
        if self.identity {
            e
        } else {
            self.frame[e as usize]
        }
    }

    /// Entry `e`'s output (its number in `specs`).
    #[inline(always)]
    pub(crate) fn spec_of(&self, e: u32) -> u8 {
        if self.identity {
            0
        } else {
            self.spec[e as usize]
        }
    }

    /// The output of the `i`th frame of a destination's `order`.
    #[inline(always)]
    pub(crate) fn order_spec_of(&self, i: usize) -> u8 {
        if self.identity {
            0
        } else {
            self.order_spec[i]
        }
    }

    /// Ends `identity`: `frame` and `spec` filled in for the first
    /// `entries` entries.
    pub(crate) fn materialize(&mut self, entries: usize) {
        self.identity = false;
        for e in self.frame.len()..entries {
            self.frame.push(u32::try_from(e).unwrap_or(u32::MAX));
            self.spec.push(0);
        }
    }

    /// Starts a batch.
    pub(crate) fn clear(&mut self) {
        self.on = false;
        self.identity = true;
        self.frames = 0;
        self.frame.clear();
        self.spec.clear();
        self.specs.clear();
        self.controller.clear();
        self.order_spec.clear();
    }

    /// The number of `spec` in this batch, adding it if new; `None` when
    /// the batch has [`MAX_SPECS`] already.
    fn intern(&mut self, spec: &OutSpec) -> Option<u8> {
        if let Some(i) = self.specs.iter().position(|s| s == spec) {
            return u8::try_from(i).ok();
        }
        let i = u8::try_from(self.specs.len()).ok()?;
        if self.specs.len() == MAX_SPECS {
            return None;
        }
        self.specs.push(*spec);
        Some(i)
    }
}

/// How one destination's frames of a batch are delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlowDelivery {
    /// As they are.
    Plain,
    /// Retagged for the destination, as the learning bridge does (every
    /// output of the batch is `NORMAL` without edits, on a switch with
    /// VLANs).
    Retag,
    /// Each with its output's edits (see `sink::edited`).
    Edited,
}

impl FlowEntries {
    /// How the frames in `order` (with `order_spec`) go out, on a switch
    /// with VLANs or not.
    pub(crate) fn delivery(&self, vlans: bool) -> FlowDelivery {
        // The common case, without a look at each frame: no output of the
        // batch edits or retags.
        if self
            .specs
            .iter()
            .all(|s| s.edits().is_empty() && !(s.normal && vlans))
        {
            return FlowDelivery::Plain;
        }
        let (mut plain, mut retag) = (true, true);
        let one = [0u8];
        let order_spec = if self.identity {
            &one[..]
        } else {
            &self.order_spec[..]
        };
        for &s in order_spec {
            let spec = &self.specs[usize::from(s)];
            if !spec.edits().is_empty() {
                return FlowDelivery::Edited;
            }
            if spec.normal && vlans {
                plain = false;
            } else {
                retag = false;
            }
        }
        if plain {
            FlowDelivery::Plain
        } else if retag {
            FlowDelivery::Retag
        } else {
            FlowDelivery::Edited
        }
    }
}

/// Where an output sends a frame on this switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum To {
    /// One port; the source itself only for `IN_PORT`.
    Port(PortIndex),
    /// Every port but the source.
    Flood,
    /// The learning bridge decides.
    Normal,
    /// The controller.
    Controller,
}

/// An output of a verdict, resolved: where to, and its spec's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) to: To,
    pub(crate) spec: u8,
}

const NO_RESOLVED: Resolved = Resolved {
    to: To::Flood,
    spec: 0,
};

/// A frame's flow key, made ahead of its lookup
/// ([`FlowLookup::prepare`]).
#[derive(Clone, Copy, Debug, Default)]
struct Prepared {
    key: Probe,
    /// `key`'s hash.
    hash: u64,
}

/// Where a flow lookup's verdicts come from.
enum Verdicts<'a> {
    Cache(&'a mut FlowCache),
    /// The verdict, and the frames and bytes classified with it.
    Given(&'a Verdict, u64, u64),
}

/// What the last verdict classified means on this switch (see
/// [`FlowLookup::classify`]): a verdict of the same action class (another
/// flow's, with the same actions) resolves the same, and is not even read.
struct Resolution {
    /// The verdict's action class (see `ringswitch_flow::Hit`).
    class: u32,
    resolved: [Resolved; MAX_OUTPUTS],
    n: usize,
    /// Its one output, when it has one and it goes to one port.
    lean: Option<(PortIndex, u8)>,
    /// The verdict left something out.
    truncated: bool,
}

impl Resolution {
    /// Makes this the lean resolution in `entries.memo` (of a verdict of
    /// action class `class`), its output's spec added to the batch's.
    #[inline(never)]
    fn recall(&mut self, class: u32, entries: &mut FlowEntries) {
        let Memo { port, spec, .. } = entries.memo;
        self.class = class;
        self.truncated = false;
        self.n = 0;
        self.lean = None;
        if let Some(spec) = spec.and_then(|s| entries.intern(&s)) {
            let r = Resolved {
                to: To::Port(port),
                spec,
            };
            self.resolved[0] = r;
            self.n = 1;
            self.lean = Some((port, spec));
        } else {
            // No room for its spec in this batch: its frames are counted
            // as truncated, as `resolve` would have them.
            self.truncated = true;
        }
    }

    /// The resolved outputs.
    fn resolved(&self) -> &[Resolved] {
        &self.resolved[..self.n]
    }

    /// Resolves `verdict` (of action class `class`) for frames from `src`:
    /// its outputs, their specs in `entries`, and whether it is lean.
    #[inline(never)]
    fn resolve(
        &mut self,
        verdict: &Verdict,
        class: u32,
        entries: &mut FlowEntries,
        table: &PortTable,
        src: PortIndex,
    ) {
        self.truncated = verdict.truncated();
        self.n = 0;
        self.class = class;
        for out in verdict.outputs() {
            let (to, controller) = match out.target {
                Target::Port(n) => match table.numbers().index(n) {
                    // An output to the input port by number is dropped
                    // (OpenFlow 1.3, 7.2.5): IN_PORT sends back.
                    Some(p) if p != src && table.get(p).is_some() => (To::Port(p), None),
                    _ => continue,
                },
                // A frame from the controller has no port to go back to.
                Target::InPort if table.get(src).is_some() => (To::Port(src), None),
                Target::InPort => continue,
                // No port here has flooding turned off: FLOOD is ALL.
                Target::Flood | Target::All => (To::Flood, None),
                Target::Normal => (To::Normal, None),
                // A switch has no local port.
                Target::Local => continue,
                Target::Controller {
                    max_len,
                    reason,
                    table_id,
                    cookie,
                    metadata,
                } => (
                    To::Controller,
                    Some(ToController {
                        max_len,
                        reason,
                        table_id,
                        cookie,
                        metadata,
                    }),
                ),
            };
            let mut spec = OutSpec {
                edits: [Edit::PopVlan; MAX_OUT_EDITS],
                n_edits: 0,
                normal: to == To::Normal,
                controller,
            };
            let mut fits = true;
            for e in verdict.edits(out) {
                let Some(slot) = spec.edits.get_mut(usize::from(spec.n_edits)) else {
                    fits = false;
                    break;
                };
                *slot = e;
                spec.n_edits += 1;
            }
            match entries.intern(&spec).filter(|_| fits) {
                Some(spec) => {
                    self.resolved[self.n] = Resolved { to, spec };
                    self.n += 1;
                }
                None => self.truncated = true,
            }
        }
        self.lean = match self.resolved() {
            [Resolved {
                to: To::Port(p),
                spec,
            }] if !self.truncated => Some((*p, *spec)),
            _ => None,
        };
    }
}

/// The flow lookup of one batch (see the module documentation).
pub(crate) struct FlowLookup<'a> {
    flows: &'a Flows,
    /// Where verdicts come from: the worker's cache, or one verdict for
    /// every frame (a packet-out's).
    cache: Verdicts<'a>,
    /// The tables' version when the batch started: a change during the
    /// batch takes effect for the next.
    version: u64,
    /// The tables' read lock, taken at the batch's first miss and held to
    /// the end of its lookup ([`FlowLookup::finish`]), never across a
    /// delivery.
    tables: Option<RwLockReadGuard<'a, FlowTables>>,
    in_port: u32,
    /// The cache stamp of the verdict `res` resolved (0: none yet).
    stamp: u64,
    res: Resolution,
    /// Frames of the batch whose verdict left something out.
    truncated_frames: u64,
}

impl<'a> FlowLookup<'a> {
    /// The flow lookup of a batch from OpenFlow port `in_port`.
    pub(crate) fn new(flows: &'a Flows, cache: &'a mut FlowCache, in_port: u32) -> Self {
        FlowLookup::new_with(flows, Verdicts::Cache(cache), in_port)
    }

    fn new_with(flows: &'a Flows, cache: Verdicts<'a>, in_port: u32) -> Self {
        FlowLookup {
            flows,
            cache,
            version: flows.version(),
            tables: None,
            in_port,
            stamp: 0,
            res: Resolution {
                class: NO_CLASS,
                resolved: [NO_RESOLVED; MAX_OUTPUTS],
                n: 0,
                lean: None,
                truncated: false,
            },
            truncated_frames: 0,
        }
    }

    /// The lookup of frames that all get `verdict` (a packet-out's, from
    /// OpenFlow port `in_port`).
    pub(crate) fn given(flows: &'a Flows, verdict: &'a Verdict, in_port: u32) -> Self {
        FlowLookup::new_with(flows, Verdicts::Given(verdict, 0, 0), in_port)
    }

    /// The tables these frames are looked up in.
    pub(crate) fn flows(&self) -> &'a Flows {
        self.flows
    }

    /// The resolved outputs of the last frame classified.
    pub(crate) fn resolved(&self) -> &[Resolved] {
        self.res.resolved()
    }

    /// Makes the keys of `chunk`'s first `n` frames, whose first
    /// `bytes(at)` bytes are in their [`Chunk::line`]s, ahead of
    /// their [`FlowLookup::classify`]: the cache entries they will be
    /// looked up in start coming into the CPU's cache now, while the
    /// frames after them are prepared (they are cold when frames of many
    /// flows pass, and colder still when long frames' copies have gone
    /// through the cache since). One loop for the chunk, apart from the
    /// ring's read loop and the filing, so that each keeps its registers.
    #[inline]
    pub(crate) fn prepare(&mut self, chunk: &mut Chunk, n: usize, bytes: impl Fn(usize) -> usize) {
        let Verdicts::Cache(cache) = &self.cache else {
            return;
        };
        let Chunk { lines, prepared } = chunk;
        for (at, (p, line)) in prepared.iter_mut().zip(lines.iter()).enumerate().take(n) {
            // The key is made where it is kept: a copy of it (by wider
            // loads than the stores that made it) stalls on store
            // forwarding.
            p.key
                .set_prefix(line, bytes(at).min(KEY_BYTES), self.in_port);
            p.hash = p.key.hash();
            cache.prefetch_with(p.hash, ringswitch_ring::copy::prefetch);
        }
    }

    /// Classifies the frame at place `at` of the chunk (`entries.chunk`), [`FlowLookup::prepare`]d
    /// (frames are classified in the order of their places), `len` bytes
    /// in all, from `src`, and counts it on the flows it matched. When
    /// its verdict has one output, to one port, and left nothing out (the
    /// commonest verdict), that is returned: the port and the output's
    /// spec in `entries`, and such a frame needs nothing of the general
    /// filing but an entry under that port. Else its outputs are
    /// [`FlowLookup::resolved`].
    #[inline(always)]
    pub(crate) fn classify(
        &mut self,
        at: usize,
        len: u32,
        entries: &mut FlowEntries,
        table: &PortTable,
        src: PortIndex,
    ) -> Option<(PortIndex, u8)> {
        let FlowLookup {
            flows,
            cache,
            version,
            tables,
            stamp: last,
            res,
            truncated_frames,
            ..
        } = self;
        let (stamp, class, epoch, found) = match cache {
            Verdicts::Cache(cache) => {
                let epoch = cache.epoch();
                let p = &entries.chunk.prepared[at % CHUNK];
                let hit = cache.lookup_probe(*version, &p.key, p.hash, len as usize, |k, v| {
                    tables.get_or_insert_with(|| flows.read()).classify(k, v)
                });
                (hit.stamp, hit.class, epoch, Ok(hit))
            }
            Verdicts::Given(v, packets, bytes) => {
                *packets += 1;
                *bytes += u64::from(len);
                (1, NO_CLASS, 0, Err(&**v))
            }
        };
        // A verdict of the same class (the same one, or another flow's with
        // the same actions) resolves as the last; one without, if it is
        // the same (its stamp says so).
        let same = if class == NO_CLASS {
            stamp == *last
        } else {
            class == res.class
        };
        if !same {
            let of = Some((table.generation, src, epoch, class));
            if class != NO_CLASS && entries.memo.of == of {
                res.recall(class, entries);
            } else {
                // The verdict read only now (see `Hit::verdict`).
                let verdict = match &found {
                    Ok(hit) => hit.verdict(),
                    Err(v) => v,
                };
                res.resolve(verdict, class, entries, table, src);
                if class != NO_CLASS {
                    if let Some((port, spec)) = res.lean {
                        let spec = entries.specs.get(usize::from(spec)).copied();
                        entries.memo = Memo { of, port, spec };
                    }
                }
            }
            *last = stamp;
        }
        if res.lean.is_none() && res.truncated {
            *truncated_frames += 1;
        }
        res.lean
    }

    /// Ends the batch's lookup: the tables' lock released, the truncated
    /// frames counted, and the cache's counts added to the flows' when
    /// they are [`FLUSH_FRAMES`] or more.
    pub(crate) fn finish(&mut self) {
        match &mut self.cache {
            Verdicts::Cache(c) if c.unflushed() >= FLUSH_FRAMES => c.flush(),
            Verdicts::Cache(_) => {}
            // A packet-out's frames are counted on their flows now.
            Verdicts::Given(v, packets, bytes) => {
                v.count(*packets, *bytes);
                (*packets, *bytes) = (0, 0);
            }
        }
        self.tables = None;
        if self.truncated_frames != 0 {
            self.flows.count_truncated(self.truncated_frames);
            self.truncated_frames = 0;
        }
    }

    /// What to tell the controller with a frame of output `c`.
    pub(crate) fn packet_in(&self, c: &ToController) -> PacketIn {
        PacketIn {
            in_port: self.in_port,
            reason: c.reason,
            table_id: c.table_id,
            cookie: c.cookie,
            metadata: c.metadata,
            ..PacketIn::default()
        }
    }
}
