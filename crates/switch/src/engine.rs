//! The forwarding engine: the switch's port table, and one straight line
//! per batch: a source (a ring port's TX ring, or a frame queue) read into
//! the batch and looked up, then each destination's frames handed to the
//! sink of its kind (a ring, or a frame queue), and each destination woken
//! once (only if it asked). The one place that tells ports apart by shape.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use ringswitch_flow::FlowCache;
use ringswitch_frame::Wake;

use crate::batch::conv::u32_of;
use crate::batch::{BatchResult, Ft, RingBatch, StageScratch, MAX_BATCH};
use crate::flows::Flows;
use crate::lookup::flows::{FlowDelivery, FlowLookup};
use crate::lookup::{Dests, Forwarding, Lookup, MacEntry, PortIndex, PortTable, MAX_PORTS};
use crate::port::{Backend, CounterSet, RingPort, SwitchPort};
use crate::sink::{self, EditList, Frames, FromRing, Retag};
use crate::source;

/// A switch is full.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// All port indexes are taken.
    #[error("switch {switch} already has {max} ports, the most it can have")]
    Full {
        /// Switch name.
        switch: String,
        /// The limit.
        max: usize,
    },
    /// The OpenFlow port number asked for is another port's.
    #[error("switch {switch} already has port {by} at OpenFlow port {number}")]
    Taken {
        /// Switch name.
        switch: String,
        /// The number.
        number: u32,
        /// The port there.
        by: String,
    },
    /// Creating the port failed.
    #[error("creating the port failed")]
    Io(#[from] std::io::Error),
}

/// An index no port has (`MAX_PORTS` is below `PortIndex::MAX`).
const NO_PORT: PortIndex = PortIndex::MAX;
const _: () = assert!(MAX_PORTS < NO_PORT as usize);

/// Why a PACKET_OUT's frame was not sent.
#[derive(Debug, thiserror::Error)]
pub enum PacketOutError {
    /// The frame is shorter than an Ethernet header or longer than a port
    /// takes.
    #[error("a frame of {0} bytes cannot be sent: it must have 14 to 66560 bytes")]
    Length(usize),
    /// The switch has no flow tables.
    #[error("switch {0} has no flow tables")]
    NoFlows(String),
}

/// An OpenFlow port number that moved from one port to another (see
/// [`Switch::set_running`]); the port that gave it up has the other's old
/// number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberMoved {
    /// The number.
    pub number: u32,
    /// The port index that had it.
    pub from: PortIndex,
    /// The port index that has it now.
    pub to: PortIndex,
}

/// Per-worker scratch space, allocated once: the batch's frame table, the
/// lookup's destination lists and the stage queues copy onto.
pub struct Scratch {
    pub(crate) ft: Vec<Ft>,
    pub(crate) dests: Dests,
    /// Frames taken from VM and interface queues, and the paths that need
    /// contiguous bytes: allocated on first use by such a port.
    pub(crate) stage: StageScratch,
    /// The flow cache, made the first time a switch with flow tables is
    /// forwarded for.
    pub(crate) flow_cache: Option<FlowCache>,
    /// Frames with their headers edited by flow tables, on their way to one
    /// destination: allocated on first use.
    pub(crate) edits: StageScratch,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            ft: Vec::with_capacity(MAX_BATCH as usize),
            dests: Dests::default(),
            stage: StageScratch::default(),
            flow_cache: None,
            edits: StageScratch::default(),
        }
    }
}

impl Scratch {
    /// Adds what the worker's flow cache counted to the flows' counters:
    /// call it when the worker goes idle (it also happens every 64k
    /// frames), so flow statistics catch up with the traffic.
    pub fn flush_counters(&mut self) {
        if let Some(c) = &mut self.flow_cache {
            c.flush();
        }
    }

    /// Whether the worker's flow cache has counted frames that
    /// [`Scratch::flush_counters`] has not added to the flows' counters.
    pub fn counts_pending(&self) -> bool {
        self.flow_cache.as_ref().is_some_and(|c| c.pending() > 0)
    }

    /// The worker's flow cache, once a switch with flow tables used it
    /// (for its hit and miss counts).
    pub fn flow_cache(&self) -> Option<&FlowCache> {
        self.flow_cache.as_ref()
    }

    /// Starts a batch.
    pub(crate) fn clear(&mut self) {
        self.ft.clear();
        self.dests.clear();
    }
}

/// A switch: ports and a forwarding policy.
pub struct Switch {
    name: String,
    table: RwLock<PortTable>,
    fwd: Box<dyn Forwarding>,
    batch: AtomicU32,
    epoch: Instant,
}

impl Switch {
    /// A switch called `name` with a forwarding policy and a batch size.
    pub fn new(name: &str, fwd: Box<dyn Forwarding>, batch: u32) -> Switch {
        Switch {
            name: name.to_string(),
            table: RwLock::new(PortTable {
                ports: vec![None; MAX_PORTS],
                active: Vec::new(),
                vlan_ports: 0,
                flows: None,
                numbers: crate::numbers::PortNumbers::new(),
                generation: crate::lookup::next_generation(),
            }),
            fwd,
            batch: AtomicU32::new(batch.clamp(1, MAX_BATCH)),
            epoch: Instant::now(),
        }
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Seconds since the switch was created (the learning clock).
    pub fn now_s(&self) -> u32 {
        u32::try_from(self.epoch.elapsed().as_secs()).unwrap_or(u32::MAX)
    }

    /// Batch size.
    pub fn batch(&self) -> u32 {
        self.batch.load(Ordering::Relaxed)
    }

    /// Sets the batch size (1..=MAX_BATCH).
    pub fn set_batch(&self, b: u32) {
        self.batch.store(b.clamp(1, MAX_BATCH), Ordering::Relaxed)
    }

    fn read(&self) -> RwLockReadGuard<'_, PortTable> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The table, to change: every change gives it a new generation (see
    /// `PortTable::generation`).
    fn write(&self) -> RwLockWriteGuard<'_, PortTable> {
        let mut t = self.table.write().unwrap_or_else(PoisonError::into_inner);
        t.generation = crate::lookup::next_generation();
        t
    }

    /// Gives the switch flow tables (`None`: takes them away): from the
    /// next batch on they decide where frames go, unless their fail mode
    /// hands over to the learning bridge.
    pub fn set_flows(&self, flows: Option<Arc<Flows>>) {
        self.write().flows = flows;
    }

    /// The switch's flow tables, if it has them.
    pub fn flows(&self) -> Option<Arc<Flows>> {
        self.read().flows.clone()
    }

    /// Attaches a port built by `make` from its index (the first free one).
    pub fn attach(
        &self,
        make: impl FnOnce(PortIndex) -> std::io::Result<SwitchPort>,
    ) -> Result<Arc<SwitchPort>, AttachError> {
        self.attach_where(None, make)
    }

    /// Attaches a port at OpenFlow port number `n` (a port keeps its
    /// number across restarts by coming back at it). Fails if a port has
    /// `n` or `n` cannot be a port's.
    pub fn attach_at(
        &self,
        n: u32,
        make: impl FnOnce(PortIndex) -> std::io::Result<SwitchPort>,
    ) -> Result<Arc<SwitchPort>, AttachError> {
        self.attach_where(Some(n), make)
    }

    fn attach_where(
        &self,
        at: Option<u32>,
        make: impl FnOnce(PortIndex) -> std::io::Result<SwitchPort>,
    ) -> Result<Arc<SwitchPort>, AttachError> {
        let mut t = self.write();
        let full = || AttachError::Full {
            switch: self.name.clone(),
            max: MAX_PORTS,
        };
        let i = match at {
            None => {
                let free = t.ports.iter().position(Option::is_none);
                free.and_then(|i| PortIndex::try_from(i).ok())
                    .ok_or_else(full)?
            }
            Some(n) => {
                let i = t.numbers.index(n).ok_or_else(full)?;
                if let Some(p) = t.get(i) {
                    return Err(AttachError::Taken {
                        switch: self.name.clone(),
                        number: n,
                        by: p.name.clone(),
                    });
                }
                i
            }
        };
        let p = Arc::new(make(i)?);
        t.ports[usize::from(i)] = Some(p.clone());
        t.active.push(i);
        t.numbers.set_wanted(i, None);
        if !p.vlan.is_default() {
            t.vlan_ports += 1;
        }
        Ok(p)
    }

    /// The OpenFlow port number of port `i`.
    pub fn number_of(&self, i: PortIndex) -> u32 {
        self.read().numbers.number(i)
    }

    /// The port index of OpenFlow port number `n`, if `n` can be a port's.
    pub fn index_of(&self, n: u32) -> Option<PortIndex> {
        self.read().numbers.index(n)
    }

    /// Attached ports with their OpenFlow numbers, by number.
    pub fn numbered_ports(&self) -> Vec<(u32, Arc<SwitchPort>)> {
        let t = self.read();
        let mut v: Vec<_> = t
            .active
            .iter()
            .filter_map(|&i| Some((t.numbers.number(i), t.get(i)?.clone())))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Says that port `i` asked for OpenFlow number `n` while another port
    /// holds it: the number moves to `i` when `i` runs and the holder does
    /// not (see [`Switch::set_running`]).
    pub fn want_number(&self, i: PortIndex, n: u32) {
        let mut t = self.write();
        if t.get(i).is_some() {
            t.numbers.set_wanted(i, Some(n));
        }
    }

    /// The number port `i` asked for, if it asked for one (see
    /// [`Switch::want_number`]).
    pub fn wanted_number(&self, i: PortIndex) -> Option<u32> {
        self.read().numbers.wanted(i)
    }

    /// The number port `i` waits for, if it waits for one it does not have.
    pub fn waits_for(&self, i: PortIndex) -> Option<u32> {
        let t = self.read();
        t.numbers.wanted(i).filter(|&n| n != t.numbers.number(i))
    }

    /// Says whether port `i`'s guest runs on it (a VM port: its queues
    /// started, or every one stopped). The port's link follows; and an
    /// OpenFlow number two ports asked for moves to the one that runs: to
    /// `i` when it starts and the holder is not running, from `i` when it
    /// stops and another port that asked for its number runs.
    ///
    /// A guest can start and stop its rings as often as it likes: the
    /// table's write lock (which workers wait for between batches) is
    /// taken only when a number moves.
    pub fn set_running(&self, i: PortIndex, running: bool) -> Option<NumberMoved> {
        {
            let t = self.read();
            t.get(i)?.set_up(running);
            Self::move_for(&t, i, running)?;
        }
        let mut t = self.write();
        // Looked at again: the table may have changed in between.
        let moved = Self::move_for(&t, i, running)?;
        t.numbers.swap(moved.from, moved.to);
        Some(moved)
    }

    /// The number that moves as port `i` starts or stops running, if one
    /// does (see [`Switch::set_running`]).
    fn move_for(t: &PortTable, i: PortIndex, running: bool) -> Option<NumberMoved> {
        if !running {
            return Self::heir(t, i);
        }
        let n = t.numbers.wanted(i)?;
        let holder = t.numbers.index(n)?;
        // A number passes only between ports that asked for it (or from
        // none), and never from one that runs.
        let keeps = |h: &Arc<SwitchPort>| h.is_up() || t.numbers.wanted(holder) != Some(n);
        if holder == i || t.get(holder).is_some_and(keeps) {
            return None;
        }
        Some(NumberMoved {
            number: n,
            from: holder,
            to: i,
        })
    }

    /// Who takes the number of port `i` as it stops or goes: a running
    /// port that asked for it.
    fn heir(t: &PortTable, i: PortIndex) -> Option<NumberMoved> {
        let n = t.numbers.number(i);
        let to = t.active.iter().copied().find(|&k| {
            k != i && t.numbers.wanted(k) == Some(n) && t.get(k).is_some_and(|p| p.is_up())
        })?;
        Some(NumberMoved {
            number: n,
            from: i,
            to,
        })
    }

    /// Detaches port `i`. Workers finish the batch they are in; the port's
    /// memory lives until the last reference goes.
    pub fn detach(&self, i: PortIndex) -> Option<Arc<SwitchPort>> {
        let p = {
            let mut t = self.write();
            let p = t.ports.get_mut(i as usize)?.take();
            t.active.retain(|&a| a != i);
            if let Some(m) = Self::heir(&t, i) {
                t.numbers.swap(m.from, m.to);
            }
            t.numbers.set_wanted(i, None);
            if p.as_ref().is_some_and(|p| !p.vlan.is_default()) {
                t.vlan_ports -= 1;
            }
            p
        };
        self.fwd.forget_port(i);
        p
    }

    /// Forgets the addresses learned on port `i` (its guest stopped or
    /// moved away: frames for them flood until they are learned again,
    /// wherever the guest now is).
    pub fn forget_addresses(&self, i: PortIndex) {
        self.fwd.forget_port(i);
    }

    /// Attached ports.
    pub fn ports(&self) -> Vec<Arc<SwitchPort>> {
        let t = self.read();
        t.active.iter().filter_map(|&i| t.get(i).cloned()).collect()
    }

    /// Number of attached ports.
    pub fn port_count(&self) -> usize {
        self.read().active.len()
    }

    /// Learned addresses, with the name of the port each was seen on.
    pub fn mac_entries(&self) -> Vec<(MacEntry, String)> {
        let t = self.read();
        self.fwd
            .entries(self.now_s())
            .into_iter()
            .filter_map(|e| t.get(e.port).map(|port| (e, port.name.clone())))
            .collect()
    }

    /// Forwards one batch from source `ring` of `src`: a TX ring of a ring
    /// port, or a queue of a port made of frame queues (a VM's queue pair,
    /// an interface's queue). Returns what was consumed; zero slots means
    /// the source had no work.
    pub fn forward(&self, src: &SwitchPort, ring: usize, sc: &mut Scratch) -> BatchResult {
        match &src.backend {
            Backend::Ring(r) => self.forward_ring(src, r, ring, sc),
            // The queue's lock is a temporary of the `let`: released before
            // the batch is forwarded (and its wake-up sent).
            Backend::Queue(q) => {
                let took = source::take(&mut *q.queue(ring), self.batch() as usize, &mut sc.stage);
                self.forward_taken(src, ring, took, sc)
            }
        }
    }

    /// Sends `frame` as a PACKET_OUT says: `verdict` is what its actions
    /// do (`ringswitch_flow::FlowTables::packet_out`), `in_port` its input
    /// port (an OpenFlow port of this switch, `OFPP_CONTROLLER` or
    /// `OFPP_ANY`: no port). The frame is delivered as a frame from that
    /// port would be (without learning its source address), counted on
    /// its destinations and on the flows an output to `OFPP_TABLE`
    /// matched; the input port counts nothing. `sc` is the caller's
    /// scratch space (the daemon's OpenFlow thread keeps one).
    pub fn packet_out(
        &self,
        in_port: u32,
        frame: &[u8],
        verdict: &ringswitch_flow::Verdict,
        sc: &mut Scratch,
    ) -> Result<(), PacketOutError> {
        if !(ringswitch_frame::FRAME_MIN..=ringswitch_frame::FRAME_MAX).contains(&frame.len()) {
            return Err(PacketOutError::Length(frame.len()));
        }
        let table = self.read();
        let Some(flows) = table.flows.as_deref() else {
            return Err(PacketOutError::NoFlows(self.name.clone()));
        };
        // A frame from the controller comes from no port: an index no port
        // has.
        let src = (table.numbers.index(in_port))
            .filter(|&i| table.get(i).is_some())
            .unwrap_or(NO_PORT);
        sc.stage.start();
        sc.stage
            .intake
            .put(frame, ringswitch_frame::OffloadHdr::default());
        sc.clear();
        let mut look = Lookup::new(&*self.fwd, &table, src, self.now_s()).with_verdict(
            flows,
            verdict,
            in_port,
            &mut sc.dests,
        );
        source::look_up_staged(&sc.stage, &mut sc.dests, &mut look, false);
        look.finish(&mut sc.dests);
        let none = CounterSet::default();
        let (dests, stage, edits) = (&mut sc.dests, &mut sc.stage, &mut sc.edits);
        deliver(&look, &none, 1, frame.len() as u64, dests, stage, edits, 0);
        Ok(())
    }

    /// Forwards a batch from TX ring `ring` of ring port `srp`, holding the
    /// ring until the batch is delivered.
    fn forward_ring(
        &self,
        src: &SwitchPort,
        srp: &RingPort,
        ring: usize,
        sc: &mut Scratch,
    ) -> BatchResult {
        let table = self.read();
        let mut txr = srp.tx(ring);
        let c = src.counters.mine();
        let Some(work) = source::ring_work(&mut txr, self.batch(), c) else {
            return BatchResult::default();
        };
        sc.clear();
        let mut look = Lookup::new(&*self.fwd, &table, src.index, self.now_s())
            .with_flows(&mut sc.flow_cache, &mut sc.dests);
        let read = source::read_ring(&txr, &work, &mut sc.ft, &mut sc.dests, &mut look);
        look.finish(&mut sc.dests);
        let mut frames = FromRing {
            batch: RingBatch {
                ft: &sc.ft,
                region: txr.region(),
                ring: txr.ring(),
            },
            stage: &mut sc.stage,
        };
        deliver(
            &look,
            src.counters.mine(),
            read.tx_pkts,
            read.tx_bytes,
            &mut sc.dests,
            &mut frames,
            &mut sc.edits,
            ring,
        );
        source::release_ring(&mut txr, srp, ring, read, c)
    }

    /// Forwards a batch [`source::take`]n from source queue `src_q` of
    /// `src`, once the queue's lock is released: the queue's wake-up (a
    /// guest's TX completion interrupt) first, then lookup and delivery,
    /// then the source's drops.
    fn forward_taken(
        &self,
        src: &SwitchPort,
        src_q: usize,
        took: source::Took,
        sc: &mut Scratch,
    ) -> BatchResult {
        let source::Took { taken, short, long } = took;
        taken.wake.send();
        if taken.frames == 0 {
            return BatchResult::default();
        }
        // After the queue's lock is released.
        let (malformed, bytes) = sc.stage.check_offloads();
        if !sc.stage.intake.frames().is_empty() {
            sc.clear();
            let table = self.read();
            let mut look = Lookup::new(&*self.fwd, &table, src.index, self.now_s())
                .with_flows(&mut sc.flow_cache, &mut sc.dests);
            source::look_up_staged(&sc.stage, &mut sc.dests, &mut look, true);
            look.finish(&mut sc.dests);
            let pkts = sc.stage.intake.frames().len() as u64;
            let (dests, stage, edits) = (&mut sc.dests, &mut sc.stage, &mut sc.edits);
            deliver(
                &look,
                src.counters.mine(),
                pkts,
                bytes,
                dests,
                stage,
                edits,
                src_q,
            );
        }
        let c = src.counters.mine();
        CounterSet::add(&c.drop_short, short);
        CounterSet::add(&c.drop_long, long);
        CounterSet::add(&c.drop_malformed, taken.malformed + malformed);
        BatchResult {
            slots: u32_of(taken.frames),
            packets: u32_of(taken.frames),
        }
    }
}

/// Delivers a looked-up batch (`pkts` frames, `bytes` bytes, taken from
/// source `src_q` of the source, whose counters are `c`) destination by
/// destination: each gets its
/// frames in batch order, in one go, and is woken once. The source's
/// `tx_packets`, `tx_bytes` and `drop_no_dest` are counted first, so that
/// what a destination sees has been counted on both sides; every frame is
/// counted once by each destination it goes to.
#[inline]
#[allow(clippy::too_many_arguments)]
fn deliver<F: Frames>(
    look: &Lookup<'_>,
    c: &CounterSet,
    pkts: u64,
    bytes: u64,
    dests: &mut Dests,
    frames: &mut F,
    edits: &mut StageScratch,
    src_q: usize,
) {
    let table = look.table;
    let list = dests.destinations(table, look.src);
    // Taken with no destination, or in a VLAN the source does not carry:
    // counted as drop_no_dest or drop_vlan only.
    let (dropped, dropped_bytes) = (
        dests.no_dest + dests.vlan_drops,
        dests.no_dest_bytes + dests.vlan_drop_bytes,
    );
    CounterSet::add(&c.tx_packets, pkts - dropped);
    CounterSet::add(&c.tx_bytes, bytes - dropped_bytes);
    CounterSet::add(&c.drop_no_dest, dests.no_dest);
    CounterSet::add(&c.drop_vlan, dests.vlan_drops);
    let vlans = table.has_vlans();
    for &d in &list {
        let Some(dport) = table.get(d) else { continue };
        dests.order_for(d, look.src, vlans.then_some(&dport.vlan));
        if dests.order.is_empty() {
            // Flooded frames, none in a VLAN this port carries.
            continue;
        }
        let retag = Retag {
            frames: &dests.vlan,
            dest: &dport.vlan,
        };
        let retag = if dests.flow.on {
            match dests.flow.delivery(vlans) {
                FlowDelivery::Plain => None,
                FlowDelivery::Retag => retag.needed(&dests.order),
                FlowDelivery::Edited => {
                    let fe = &dests.flow;
                    let edits_of = |i: usize| {
                        let spec = &fe.specs[usize::from(fe.order_spec_of(i))];
                        let mut list: EditList = Default::default();
                        let own = spec.edits();
                        if own.is_empty() && spec.normal && vlans {
                            let (v, n) = retag.edit(dests.order[i]).as_flow_edits();
                            list.0[..n].copy_from_slice(&v[..n]);
                            list.1 = n;
                        } else {
                            list.0[..own.len()].copy_from_slice(own);
                            list.1 = own.len();
                        }
                        list
                    };
                    sink::edited(frames, edits, &dests.order, edits_of, dport, src_q);
                    continue;
                }
            }
        } else if vlans {
            retag.needed(&dests.order)
        } else {
            None
        };
        let (order, c) = (&dests.order[..], dport.counters.mine());
        // A queue's lock lives only within its arm: released before the
        // wake-up is sent.
        let wake = match &dport.backend {
            Backend::Ring(drp) => {
                sink::to_ring(frames, order, drp, src_q, c, retag);
                Wake::NONE
            }
            Backend::Queue(dq) => {
                frames.to_queue(order, &mut *dq.queue(src_q % dq.queues()), c, retag)
            }
        };
        wake.send();
    }
    dests.give_back(list);
    if let Some(fl) = &look.flow {
        to_controller(fl, dests, frames, edits);
    }
}

/// Queues the batch's frames for the controller (see
/// [`Flows::push_packet_in`]), each with its output's edits and cut to its
/// `max_len`.
fn to_controller<F: Frames>(
    fl: &FlowLookup<'_>,
    dests: &Dests,
    frames: &mut F,
    edits: &mut StageScratch,
) {
    let fe = &dests.flow;
    if fe.controller.is_empty() {
        return;
    }
    edits.ensure();
    for &e in &fe.controller {
        let (k, spec) = (fe.frame_of(e), &fe.specs[usize::from(fe.spec_of(e))]);
        let Some(ctl) = spec.controller else { continue };
        let Ok((_, bytes)) = frames.contiguous(k) else {
            // Longer than any frame a port takes: not for the controller.
            fl.flows().count_truncated(1);
            continue;
        };
        let Ok(n) =
            ringswitch_flow::apply_edits(bytes, spec.edits().iter().copied(), &mut edits.edited)
        else {
            fl.flows().count_truncated(1);
            continue;
        };
        // OFPCML_NO_BUFFER: the whole frame.
        let max_len = if ctl.max_len == 0xffff {
            usize::MAX
        } else {
            usize::from(ctl.max_len)
        };
        fl.flows()
            .push_packet_in(&fl.packet_in(&ctl), &edits.edited[..n], max_len);
    }
}
