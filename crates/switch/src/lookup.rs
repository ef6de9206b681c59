//! The lookup stage: where each frame of a batch goes. A [`Forwarding`]
//! policy decides per frame (the learning bridge, a hub; flow tables
//! later), runs of frames with the same addresses are decided once, and
//! the decisions are filed into per-destination lists, so that each
//! destination then gets its frames in one go, in batch order.

use std::sync::Arc;

use ringswitch_control::PortVlan;

use crate::batch::conv::u32_of;
use crate::batch::MAX_BATCH;
use crate::port::SwitchPort;
use crate::vlan::{self, FrameVlan};

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
#[derive(Default)]
pub struct PortTable {
    pub(crate) ports: Vec<Option<Arc<SwitchPort>>>,
    pub(crate) active: Vec<PortIndex>,
    /// Ports whose VLAN setting is not the default: while there are none,
    /// frames pass as they are and the lookup never reads a tag.
    pub(crate) vlan_ports: usize,
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

    /// Whether any port has VLANs set.
    #[inline(always)]
    pub fn has_vlans(&self) -> bool {
        self.vlan_ports != 0
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
                let p = usize::from(port);
                if self.dst_head[p] == NONE {
                    self.dst_head[p] = k;
                    self.touched.push(port);
                } else {
                    self.next[self.dst_tail[p] as usize] = k;
                }
                self.dst_tail[p] = k;
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
        if !self.flood.is_empty() && table.has_vlans() {
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
            if dests.is_empty() {
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
    pub(crate) fn order_for(&mut self, d: PortIndex, vlan: Option<&PortVlan>) {
        self.order.clear();
        let mut u = self.dst_head[d as usize];
        let mut f = 0usize;
        while u != NONE || f < self.flood.len() {
            let take_u = match (u != NONE, f < self.flood.len()) {
                (true, true) => u < self.flood[f],
                (true, false) => true,
                _ => false,
            };
            if take_u {
                self.order.push(u);
                u = self.next[u as usize];
            } else {
                let k = self.flood[f];
                f += 1;
                if let Some(v) = vlan {
                    let vid = self.vlan.get(k as usize).map_or(0, |fv| fv.vid);
                    if !v.carries(vid) {
                        continue;
                    }
                }
                self.order.push(k);
            }
        }
        self.dst_head[d as usize] = NONE;
        self.dst_tail[d as usize] = NONE;
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
        }
    }

    /// Looks up the next frame of the batch (`len` bytes, its first 16
    /// bytes, the addresses and where a VLAN tag would be, in `head`, the
    /// first `first_len` of them its own) and files it under its
    /// destinations in `dests`. The policy is asked only when the
    /// addresses, the VLAN or `learn` differ from the previous frame's.
    #[inline(always)]
    pub(crate) fn file(
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
