//! The lookup stage: where each frame of a batch goes. A [`Forwarding`]
//! policy decides per frame (the learning bridge, a hub), runs of frames
//! with the same addresses are decided once, and the decisions are filed
//! into per-destination lists, so that each destination then gets its
//! frames in one go, in batch order. On a switch with flow tables the
//! tables decide ([`flows`]): a frame has an entry per output, each with
//! its output's header edits, and `NORMAL` outputs are decided by the
//! policy as above.

pub(crate) mod flows;

/// The bytes a flow lookup reads of a frame first: a cache line, which
/// holds the whole key of the commonest frames.
pub(crate) const FIRST_LINE: usize = 64;

use std::sync::Arc;

use ringswitch_control::PortVlan;
use ringswitch_flow::key::KEY_BYTES;
use ringswitch_flow::FlowKey;

use crate::batch::conv::u32_of;
use crate::batch::MAX_BATCH;
use crate::flows::Flows;
use crate::port::SwitchPort;
use crate::vlan::{self, FrameVlan};
use flows::{FlowEntries, FlowLookup, Resolved, To, MAX_ENTRIES};

/// Most ports on one switch (as VALE).
pub const MAX_PORTS: usize = 254;

/// End of a list.
const NONE: u32 = u32::MAX;

/// Port index inside a switch.
pub type PortIndex = u16;

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// To one port.
    Port(PortIndex),
    /// To every port but the source.
    Flood,
    /// Nowhere (for example, back to where it came from).
    Drop,
}

/// A forwarding policy. Called once per packet on the data path: it must
/// not allocate or block.
pub trait Forwarding: Send + Sync {
    /// Decides where a frame with these addresses, arriving on `src_port`,
    /// goes. `learn` is false when the sender asked not to learn
    /// (`NS_NO_LEARN`). `now_s` is a coarse clock in seconds.
    /// `vid` is the frame's VLAN inside the switch (0 on a switch without
    /// VLANs): addresses are learned and looked up per VLAN.
    fn decide(
        &self,
        dst: [u8; 6],
        src: [u8; 6],
        vid: u16,
        src_port: PortIndex,
        learn: bool,
        now_s: u32,
    ) -> Decision;
    /// Forgets everything about a port that is going away.
    fn forget_port(&self, port: PortIndex);
    /// The current table.
    fn entries(&self, now_s: u32) -> Vec<MacEntry>;
}

/// A learned address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    /// The address.
    pub mac: [u8; 6],
    /// Its VLAN (0: untagged, or a switch without VLANs).
    pub vid: u16,
    /// Where it was seen.
    pub port: PortIndex,
    /// Seconds since it was last seen.
    pub age_s: u32,
}

/// The ports of a switch.
pub struct PortTable {
    pub(crate) ports: Vec<Option<Arc<SwitchPort>>>,
    pub(crate) active: Vec<PortIndex>,
    /// Ports whose VLAN setting is not the default: while there are none,
    /// frames pass as they are and the lookup never reads a tag.
    pub(crate) vlan_ports: usize,
    /// The switch's flow tables, if it has them.
    pub(crate) flows: Option<Arc<Flows>>,
    /// The ports' OpenFlow numbers.
    pub(crate) numbers: crate::numbers::PortNumbers,
    /// Which state of the table this is: every change gives it a number
    /// no table of any switch had before ([`next_generation`]), so what
    /// was made of one state (see `flows::Memo`) is known not to hold in
    /// another.
    pub(crate) generation: u64,
}

/// A port table generation never given before (see
/// `PortTable::generation`).
pub(crate) fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    // Relaxed: only uniqueness matters; the table's lock orders the rest.
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl PortTable {
    /// Port at `i`, if attached.
    #[inline(always)]
    pub fn get(&self, i: PortIndex) -> Option<&Arc<SwitchPort>> {
        self.ports.get(i as usize).and_then(|p| p.as_ref())
    }
    /// Attached port indexes.
    pub fn active(&self) -> &[PortIndex] {
        &self.active
    }

    /// The ports' OpenFlow numbers.
    #[inline(always)]
    pub fn numbers(&self) -> &crate::numbers::PortNumbers {
        &self.numbers
    }

    /// Whether any port has VLANs set.
    #[inline(always)]
    pub fn has_vlans(&self) -> bool {
        self.vlan_ports != 0
    }

    /// The flow tables, when they decide (a switch that has them, unless
    /// its fail mode hands over to the learning bridge).
    #[inline(always)]
    pub(crate) fn deciding_flows(&self) -> Option<&Flows> {
        self.flows.as_deref().filter(|f| !f.learning_instead())
    }

    /// Whether a port other than `src` carries VLAN `vid`.
    fn vlan_has_member(&self, vid: u16, src: PortIndex) -> bool {
        self.active
            .iter()
            .any(|&p| p != src && self.get(p).is_some_and(|port| port.vlan.carries(vid)))
    }
}

/// The destination lists of one batch: frame `k` of the batch is filed
/// under its one destination (a linked list per port, in batch order) or
/// in the flood list. Allocated once per worker.
pub(crate) struct Dests {
    /// Next packet for the same unicast destination (a list per destination).
    next: Vec<u32>,
    dst_head: Vec<u32>,
    dst_tail: Vec<u32>,
    touched: Vec<PortIndex>,
    flood: Vec<u32>,
    /// One destination's packets, filled by [`Dests::order_for`].
    pub(crate) order: Vec<u32>,
    /// Packets of the batch with no destination (counted on the source,
    /// in `drop_no_dest` and not in `tx_packets`), and their bytes.
    pub(crate) no_dest: u64,
    pub(crate) no_dest_bytes: u64,
    /// Bytes of the packets in `flood`.
    flood_bytes: u64,
    /// Each packet's VLAN, on a switch with VLANs (else empty).
    pub(crate) vlan: Vec<FrameVlan>,
    /// Lengths of the packets in `flood`, on a switch with VLANs.
    flood_lens: Vec<u32>,
    /// Packets of the batch the source port does not carry the VLAN of
    /// (counted on the source in `drop_vlan`), and their bytes.
    pub(crate) vlan_drops: u64,
    pub(crate) vlan_drop_bytes: u64,
    /// On a switch with flow tables: what each entry is.
    pub(crate) flow: FlowEntries,
}

impl Default for Dests {
    fn default() -> Self {
        Dests {
            next: Vec::with_capacity(MAX_BATCH as usize),
            dst_head: vec![NONE; MAX_PORTS],
            dst_tail: vec![NONE; MAX_PORTS],
            touched: Vec::with_capacity(MAX_PORTS),
            flood: Vec::with_capacity(MAX_BATCH as usize),
            order: Vec::with_capacity(MAX_BATCH as usize),
            no_dest: 0,
            no_dest_bytes: 0,
            flood_bytes: 0,
            vlan: Vec::with_capacity(MAX_BATCH as usize),
            flood_lens: Vec::with_capacity(MAX_BATCH as usize),
            vlan_drops: 0,
            vlan_drop_bytes: 0,
            flow: FlowEntries::default(),
        }
    }
}

impl Dests {
    /// Starts a batch.
    pub(crate) fn clear(&mut self) {
        self.next.clear();
        self.flood.clear();
        self.touched.clear();
        self.no_dest = 0;
        self.no_dest_bytes = 0;
        self.flood_bytes = 0;
        self.vlan.clear();
        self.flood_lens.clear();
        self.vlan_drops = 0;
        self.vlan_drop_bytes = 0;
        self.flow.clear();
    }

    /// Readies the lists for a batch the flow tables decide.
    fn start_flows(&mut self) {
        self.flow.ensure();
        if self.next.capacity() < MAX_ENTRIES {
            // A destination's order may hold every entry (a frame comes
            // once per output to it).
            self.next.reserve(MAX_ENTRIES);
            self.flood.reserve(MAX_ENTRIES);
            self.order.reserve(MAX_ENTRIES);
        }
        self.flow.on = true;
    }

    /// Adds an entry for output `spec` of frame `k`; `None` when the batch
    /// has [`MAX_ENTRIES`] already.
    #[inline(always)]
    fn push_entry(&mut self, k: u32, spec: u8) -> Option<u32> {
        if self.next.len() >= MAX_ENTRIES {
            return None;
        }
        let e = self.next.len();
        if self.flow.identity {
            if e == k as usize && spec == 0 {
                return Some(self.push_link());
            }
            self.flow.materialize(e);
        }
        self.flow.frame.push(k);
        self.flow.spec.push(spec);
        Some(self.push_link())
    }

    /// Files entry `e` under port `p` (which is attached).
    #[inline(always)]
    fn link(&mut self, p: PortIndex, e: u32) {
        let i = usize::from(p);
        if self.dst_head[i] == NONE {
            self.dst_head[i] = e;
            self.touched.push(p);
        } else {
            self.next[self.dst_tail[i] as usize] = e;
        }
        self.dst_tail[i] = e;
    }

    /// Adds a placeholder entry for packet `k` of the batch (its unicast link).
    #[inline(always)]
    fn push_link(&mut self) -> u32 {
        let k = u32_of(self.next.len());
        self.next.push(NONE);
        k
    }

    /// Files packet `k` (`len` bytes) under its destination(s).
    #[inline(always)]
    fn route(&mut self, table: &PortTable, src: PortIndex, k: u32, len: u32, decision: Decision) {
        match decision {
            // Addressed to a station behind the source itself.
            Decision::Drop => {
                self.no_dest += 1;
                self.no_dest_bytes += u64::from(len);
            }
            Decision::Port(port) if table.get(port).is_some() && port != src => {
                self.link(port, k);
            }
            // A stale entry (port gone) floods, as an unknown address.
            Decision::Port(_) | Decision::Flood => {
                self.flood.push(k);
                self.flood_bytes += u64::from(len);
                if table.has_vlans() {
                    self.flood_lens.push(len);
                }
            }
        }
    }

    /// The destinations of the batch (taken out of the scratch; give the
    /// vector back with [`Dests::give_back`]).
    pub(crate) fn destinations(&mut self, table: &PortTable, src: PortIndex) -> Vec<PortIndex> {
        let mut dests = std::mem::take(&mut self.touched);
        // On a flow switch the flood list holds entries of outputs that
        // are not all in VLANs: each destination filters its own.
        if !self.flood.is_empty() && table.has_vlans() && !self.flow.on {
            // Flooded in a VLAN no other port carries: no destination.
            let mut memo: Option<(u16, bool)> = None;
            let (vlan, flood) = (&self.vlan, &mut self.flood);
            let (mut none, mut none_bytes) = (0u64, 0u64);
            let lens = &self.flood_lens;
            let mut i = 0;
            flood.retain(|&k| {
                let vid = vlan.get(k as usize).map_or(0, |f| f.vid);
                let reach = match memo {
                    Some((v, r)) if v == vid => r,
                    _ => {
                        let r = table.vlan_has_member(vid, src);
                        memo = Some((vid, r));
                        r
                    }
                };
                if !reach {
                    none += 1;
                    none_bytes += u64::from(lens[i]);
                }
                i += 1;
                reach
            });
            self.no_dest += none;
            self.no_dest_bytes += none_bytes;
            self.flood_bytes -= none_bytes;
        }
        if !self.flood.is_empty() {
            for &p in table.active() {
                if p != src && self.dst_head[p as usize] == NONE {
                    dests.push(p);
                }
            }
            if dests.is_empty() && !self.flow.on {
                // Flooded on a switch with no other port.
                self.no_dest += self.flood.len() as u64;
                self.no_dest_bytes += self.flood_bytes;
            }
        }
        dests
    }

    /// Returns the destinations vector for reuse.
    pub(crate) fn give_back(&mut self, mut dests: Vec<PortIndex>) {
        dests.clear();
        self.touched = dests;
    }

    /// Fills `order` with destination `d`'s packets: its unicast list merged
    /// with the flood list, both in batch order.
    /// On a switch with VLANs, `vlan` is the destination's setting: flooded
    /// packets of VLANs it does not carry are left out.
    /// On a switch with flow tables, `order` holds frames and
    /// `flow.order_spec` each one's output (a frame may come twice, by two
    /// outputs); only floods of `NORMAL` stay in their VLAN; the source
    /// (`src`, a destination of `IN_PORT` only) gets no floods.
    pub(crate) fn order_for(&mut self, d: PortIndex, src: PortIndex, vlan: Option<&PortVlan>) {
        self.order.clear();
        self.flow.order_spec.clear();
        let mut u = self.dst_head[d as usize];
        let mut f = 0usize;
        let floods = if d == src { 0 } else { self.flood.len() };
        while u != NONE || f < floods {
            let take_u = match (u != NONE, f < floods) {
                (true, true) => u < self.flood[f],
                (true, false) => true,
                _ => false,
            };
            let e = if take_u {
                let e = u;
                u = self.next[u as usize];
                e
            } else {
                let e = self.flood[f];
                f += 1;
                if let Some(v) = vlan {
                    if !self.flood_carried(e, v) {
                        continue;
                    }
                }
                e
            };
            if self.flow.on && !self.flow.identity {
                let i = e as usize;
                self.order.push(self.flow.frame[i]);
                self.flow.order_spec.push(self.flow.spec[i]);
            } else {
                self.order.push(e);
            }
        }
        self.dst_head[d as usize] = NONE;
        self.dst_tail[d as usize] = NONE;
    }

    /// Whether flooded entry `e` goes to a port set to `v`: a learning
    /// flood stays in its frame's VLAN.
    #[inline(always)]
    fn flood_carried(&self, e: u32, v: &PortVlan) -> bool {
        let k = if self.flow.on {
            let normal = self.flow.specs[usize::from(self.flow.spec_of(e))].normal;
            if !normal {
                return true;
            }
            self.flow.frame_of(e)
        } else {
            e
        };
        let vid = self.vlan.get(k as usize).map_or(0, |fv| fv.vid);
        v.carries(vid)
    }
}

/// The lookup of one batch: the policy, the port table, the source port
/// and the clock, and the decision for the last run of frames.
pub(crate) struct Lookup<'a> {
    fwd: &'a dyn Forwarding,
    pub(crate) table: &'a PortTable,
    pub(crate) src: PortIndex,
    now_s: u32,
    /// The source's VLAN setting, on a switch with VLANs.
    src_vlan: Option<&'a PortVlan>,
    /// A run of frames with the same addresses and VLAN (a flow) is
    /// decided once, since the decision cannot change within a batch but
    /// through a racing update by another worker, which a lookup races
    /// with too.
    last: Option<(u128, Decision)>,
    /// The flow tables' lookup, when they decide.
    pub(crate) flow: Option<FlowLookup<'a>>,
    /// With flow tables: the frames given and not filed yet, at most
    /// [`CHUNK`]: filed together when there are that many (or at
    /// [`Lookup::finish`]), so that all their cache entries are on their
    /// way before the first is looked up (see [`FlowLookup::prepare`]).
    pending: [Pending; CHUNK],
    n_pending: usize,
}

/// Frames a flow lookup prepares before it files them: their keys are
/// made and their cache entries fetched, then they are looked up and filed
/// one after the other, each entry long in the CPU's cache by then. Their
/// first lines and keys (`flows::Chunk`) take 4 KB: they stay in the
/// first-level cache.
/// (Chunks of 8 or 32 were no faster in `forward_cost`.)
pub(crate) const CHUNK: usize = 16;

/// What became of a frame's outputs (see `Lookup::file_output`).
#[derive(Clone, Copy, Default)]
struct Filed {
    /// Under a destination.
    yes: bool,
    /// An output left out for want of room (counted as truncated).
    lost: bool,
    /// An output the learning bridge's VLAN rules refused.
    vlan_refused: bool,
}

impl Filed {
    const YES: Filed = Filed {
        yes: true,
        lost: false,
        vlan_refused: false,
    };
    const NOWHERE: Filed = Filed {
        yes: false,
        lost: false,
        vlan_refused: false,
    };

    /// What became of two outputs of one frame.
    fn and(self, o: Filed) -> Filed {
        Filed {
            yes: self.yes || o.yes,
            lost: self.lost || o.lost,
            vlan_refused: self.vlan_refused || o.vlan_refused,
        }
    }
}

/// A frame of the chunk a flow lookup has not filed yet (its first bytes
/// are in its place's `FlowLookup::line`).
#[derive(Clone, Copy, Default)]
struct Pending {
    /// How many of the frame's bytes its line holds.
    bytes: u32,
    first_len: u32,
    len: u32,
    learn: bool,
}

impl<'a> Lookup<'a> {
    /// A lookup of frames from port `src` at time `now_s`.
    pub(crate) fn new(
        fwd: &'a dyn Forwarding,
        table: &'a PortTable,
        src: PortIndex,
        now_s: u32,
    ) -> Lookup<'a> {
        let src_vlan = if table.has_vlans() {
            table.get(src).map(|p| &p.vlan)
        } else {
            None
        };
        Lookup {
            fwd,
            table,
            src,
            now_s,
            src_vlan,
            last: None,
            flow: None,
            pending: [Pending::default(); CHUNK],
            n_pending: 0,
        }
    }

    /// The lookup, with the flow tables deciding if the switch has them
    /// (and they decide now), through the worker's flow `cache` (made the
    /// first time). `dests` is readied for the batch.
    pub(crate) fn with_flows(
        mut self,
        cache: &'a mut Option<ringswitch_flow::FlowCache>,
        dests: &mut Dests,
    ) -> Lookup<'a> {
        if let Some(flows) = self.table.deciding_flows() {
            let cache = cache.get_or_insert_with(ringswitch_flow::FlowCache::default);
            let in_port = self.table.numbers.number(self.src);
            self.flow = Some(FlowLookup::new(flows, cache, in_port));
            dests.start_flows();
        }
        self
    }

    /// The lookup, with every frame getting `verdict` (a packet-out's, from
    /// OpenFlow port `in_port`); `dests` is readied for the batch.
    pub(crate) fn with_verdict(
        mut self,
        flows: &'a Flows,
        verdict: &'a ringswitch_flow::Verdict,
        in_port: u32,
        dests: &mut Dests,
    ) -> Lookup<'a> {
        self.flow = Some(FlowLookup::given(flows, verdict, in_port));
        dests.start_flows();
        self
    }

    /// Ends the lookup of the batch: the last frame filed in `dests` (see
    /// [`FlowLookup::finish`]).
    pub(crate) fn finish(&mut self, dests: &mut Dests) {
        self.file_pending(dests);
        if let Some(f) = &mut self.flow {
            f.finish();
        }
    }

    /// Whether [`Lookup::file`] reads a frame's first bytes itself (the
    /// flow tables decide), so that its caller need not read its `head`.
    #[inline(always)]
    pub(crate) fn reads_frames(&self) -> bool {
        self.flow.is_some()
    }

    /// Looks up the next frame of the batch (`len` bytes, its first 16
    /// bytes, the addresses and where a VLAN tag would be, in `head`, the
    /// first `first_len` of them its own; unread when the lookup
    /// [`Lookup::reads_frames`]) and files it under its destinations in
    /// `dests` ([`Lookup::file_learned`] or [`Lookup::file_by_flows`]).
    #[inline(always)]
    pub(crate) fn file(
        &mut self,
        dests: &mut Dests,
        head: &[u8; 16],
        first_len: u32,
        len: u32,
        learn: bool,
        prefix: impl FnMut(&mut [u8; KEY_BYTES], usize) -> usize,
    ) {
        if self.flow.is_some() {
            self.file_by_flows(dests, first_len, len, learn, prefix);
        } else {
            self.file_learned(dests, head, first_len, len, learn);
        }
    }

    /// [`Lookup::file`] on a switch whose flow tables decide. They read
    /// the frame's first bytes (of its first fragment) that `prefix(buf,
    /// want)` copies into `buf`: at least `want` (at most `KEY_BYTES`) of
    /// them if the frame has them, returning how many of the frame's
    /// bytes `buf` then holds. Only the first [`FIRST_LINE`] are asked for
    /// unless the key needs more, which the commonest frames do not: a
    /// long frame's second cache line stays unread until it is copied.
    /// The frame is filed with the rest of its chunk.
    #[inline(always)]
    pub(crate) fn file_by_flows(
        &mut self,
        dests: &mut Dests,
        first_len: u32,
        len: u32,
        learn: bool,
        mut prefix: impl FnMut(&mut [u8; KEY_BYTES], usize) -> usize,
    ) {
        if self.flow.is_none() {
            return;
        }
        let j = self.n_pending;
        let line = dests.flow.chunk.line(j);
        let mut n = prefix(line, FIRST_LINE);
        if n == FIRST_LINE
            && first_len as usize > FIRST_LINE
            && !FlowKey::prefix_is_fast(line, n)
            && !FlowKey::reads_within(&line[..n])
        {
            n = prefix(line, KEY_BYTES);
        }
        if let Some(p) = self.pending.get_mut(j) {
            *p = Pending {
                bytes: u32_of(n),
                first_len,
                len,
                learn,
            };
        }
        self.n_pending = j + 1;
        if self.n_pending == CHUNK {
            self.file_pending(dests);
        }
    }

    /// [`Lookup::file`] on a switch whose policy decides: it is asked
    /// only when the addresses, the VLAN or `learn` differ from the
    /// previous frame's.
    #[inline(always)]
    pub(crate) fn file_learned(
        &mut self,
        dests: &mut Dests,
        head: &[u8; 16],
        first_len: u32,
        len: u32,
        learn: bool,
    ) {
        let k = dests.push_link();
        let Some(pv) = self.src_vlan else {
            let decision = self.decide(head, 0, learn);
            dests.route(self.table, self.src, k, len, decision);
            return;
        };
        let fv = vlan::ingress(pv, head, first_len);
        dests.vlan.push(fv.unwrap_or_default());
        let Some(fv) = fv else {
            dests.vlan_drops += 1;
            dests.vlan_drop_bytes += u64::from(len);
            return;
        };
        let decision = match self.decide(head, fv.vid, learn) {
            // An address learned in a VLAN is on a port that carries it;
            // should it not (the port was replaced since), the frame floods
            // its VLAN.
            Decision::Port(p) if self.table.get(p).is_some_and(|p| !p.vlan.carries(fv.vid)) => {
                Decision::Flood
            }
            d => d,
        };
        dests.route(self.table, self.src, k, len, decision);
    }

    /// Files the chunk's frames, in order: their keys made first (see
    /// [`FlowLookup::prepare`]), then each classified and filed, the
    /// commonest (one output, to one port) with an entry under it and
    /// nothing more, any other by [`Lookup::file_resolved`].
    #[inline]
    fn file_pending(&mut self, dests: &mut Dests) {
        let n = std::mem::take(&mut self.n_pending);
        let Some(fl) = self.flow.as_mut() else {
            return;
        };
        let pending = &self.pending;
        fl.prepare(&mut dests.flow.chunk, n, |j| pending[j].bytes as usize);
        let (table, src) = (self.table, self.src);
        for j in 0..n {
            let Pending { first_len, len, .. } = self.pending[j];
            let k = dests.flow.frames;
            dests.flow.frames += 1;
            let fv = match self.src_vlan {
                Some(pv) => self.flow_vlan(dests, pv, j, first_len),
                None => Some(FrameVlan::default()),
            };
            let Some(fl) = self.flow.as_mut() else {
                return;
            };
            if let Some((p, spec)) = fl.classify(j, len, &mut dests.flow, table, src) {
                // One output, to one port: an entry under it, if there is
                // room (else `file_resolved` counts the frame's loss).
                if let Some(e) = dests.push_entry(k, spec) {
                    dests.link(p, e);
                    continue;
                }
            }
            self.file_resolved(dests, j, k, fv);
        }
    }

    /// The VLAN of the frame at place `j` of the chunk (`first_len` bytes
    /// in its first fragment), from a source set to `pv`, kept in
    /// `dests`: `None` if the source does not let it in.
    #[inline(never)]
    fn flow_vlan(
        &self,
        dests: &mut Dests,
        pv: &PortVlan,
        j: usize,
        first_len: u32,
    ) -> Option<FrameVlan> {
        let head = dests.flow.chunk.head(j);
        let fv = vlan::ingress(pv, &head, first_len);
        dests.vlan.push(fv.unwrap_or_default());
        fv
    }

    /// Files frame `k`, at place `j` of the chunk and classified, in VLAN
    /// `fv` if its source let it in: an entry per output of its verdict;
    /// the learning bridge decides its `NORMAL` output. A frame that gets
    /// no entry is counted as having no destination (or, if only its VLAN
    /// kept it from `NORMAL`, as a VLAN drop).
    #[inline(never)]
    fn file_resolved(&mut self, dests: &mut Dests, j: usize, k: u32, fv: Option<FrameVlan>) {
        let Some(&Pending { len, learn, .. }) = self.pending.get(j) else {
            return;
        };
        let head = dests.flow.chunk.head(j);
        let n = self.flow.as_ref().map_or(0, |f| f.resolved().len());
        let mut filed = Filed::NOWHERE;
        for i in 0..n {
            let Some(r) = self.flow.as_ref().map(|f| f.resolved()[i]) else {
                break;
            };
            filed = filed.and(self.file_output(dests, k, r, &head, fv, learn, len));
        }
        if filed.lost {
            if let Some(fl) = self.flow.as_ref() {
                fl.flows().count_truncated(1);
            }
        }
        if !filed.yes {
            if filed.vlan_refused {
                dests.vlan_drops += 1;
                dests.vlan_drop_bytes += u64::from(len);
            } else {
                dests.no_dest += 1;
                dests.no_dest_bytes += u64::from(len);
            }
        }
    }

    /// Files frame `k` (`len` bytes, first bytes `head`, in VLAN `fv` if
    /// its source let it in) under the destination of output `r`: an
    /// entry for it, unless the output leads nowhere.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn file_output(
        &mut self,
        dests: &mut Dests,
        k: u32,
        r: Resolved,
        head: &[u8; 16],
        fv: Option<FrameVlan>,
        learn: bool,
        len: u32,
    ) -> Filed {
        let (table, src) = (self.table, self.src);
        let to = match r.to {
            To::Normal => {
                let Some(fv) = fv else {
                    return Filed {
                        vlan_refused: true,
                        ..Filed::NOWHERE
                    };
                };
                match self.decide(head, fv.vid, learn) {
                    Decision::Drop => return Filed::NOWHERE,
                    Decision::Port(p)
                        if p != src
                            && table.get(p).is_some_and(|port| port.vlan.carries(fv.vid)) =>
                    {
                        To::Port(p)
                    }
                    Decision::Port(_) | Decision::Flood => To::Flood,
                }
            }
            to => to,
        };
        let Some(e) = dests.push_entry(k, r.spec) else {
            return Filed {
                lost: true,
                ..Filed::NOWHERE
            };
        };
        match to {
            To::Port(p) => dests.link(p, e),
            To::Controller => dests.flow.controller.push(e),
            To::Flood | To::Normal => {
                dests.flood.push(e);
                dests.flood_bytes += u64::from(len);
            }
        }
        Filed::YES
    }

    /// The policy's decision for a frame with these first bytes in VLAN
    /// `vid`, or the previous frame's when the addresses, the VLAN and
    /// `learn` are the same (compared as one 128-bit key).
    #[inline(always)]
    fn decide(&mut self, head: &[u8; 16], vid: u16, learn: bool) -> Decision {
        // The addresses (the low 96 bits, read little-endian), the VLAN and
        // `learn` above them.
        let key = (u128::from_le_bytes(*head) & ((1u128 << 96) - 1))
            | (u128::from(vid) << 96)
            | (u128::from(learn) << 112);
        match self.last {
            Some((h, d)) if h == key => d,
            _ => {
                let dst = [head[0], head[1], head[2], head[3], head[4], head[5]];
                let smac = [head[6], head[7], head[8], head[9], head[10], head[11]];
                let d = self.fwd.decide(dst, smac, vid, self.src, learn, self.now_s);
                self.last = Some((key, d));
                d
            }
        }
    }
}
