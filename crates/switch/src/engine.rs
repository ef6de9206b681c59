//! The forwarding engine: one batch from one source TX ring, looked up,
//! grouped by destination, copied into each destination's RX ring, and each
//! destination woken once (only if it asked).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use std::time::Instant;

use ringswitch_frame::Wake;
use ringswitch_ring::layout::{MAX_FRAGS, NS_MOREFRAG, NS_NO_LEARN};
use ringswitch_ring::sync::Unfinished;
use ringswitch_ring::{arith, NetmapSlot, Region};

use crate::batch::conv::split_word0;
use crate::batch::{Ft, RingBatch, StageScratch, MAX_BATCH, MIN_FRAME};
use crate::lookup::{Dests, Forwarding, LastDecision, PortIndex, PortTable, MAX_PORTS};
use crate::port::{Backend, Counters, RingPort, SwitchPort};
use crate::sink::ring::put;

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
    /// Creating the port failed.
    #[error("creating the port failed")]
    Io(#[from] std::io::Error),
}

/// Per-worker scratch space, allocated once: the batch's frame table, the
/// lookup's destination lists and the staging arena.
pub struct Scratch {
    pub(crate) ft: Vec<Ft>,
    pub(crate) dests: Dests,
    /// Frames taken from VM and interface queues, and the paths that need
    /// contiguous bytes: allocated on first use by such a port.
    pub(crate) stage: StageScratch,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            ft: Vec::with_capacity(MAX_BATCH as usize),
            dests: Dests::default(),
            stage: StageScratch::default(),
        }
    }
}

impl Scratch {
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

/// What one call to [`Switch::forward`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchResult {
    /// Slots consumed from the source ring.
    pub slots: u32,
    /// Packets delivered to at least one port or counted as dropped.
    pub packets: u32,
}

impl Switch {
    /// A switch called `name` with a forwarding policy and a batch size.
    pub fn new(name: &str, fwd: Box<dyn Forwarding>, batch: u32) -> Switch {
        Switch {
            name: name.to_string(),
            table: RwLock::new(PortTable {
                ports: vec![None; MAX_PORTS],
                active: Vec::new(),
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

    /// Attaches a port built by `make` from its index.
    pub fn attach(
        &self,
        make: impl FnOnce(PortIndex) -> std::io::Result<SwitchPort>,
    ) -> Result<Arc<SwitchPort>, AttachError> {
        let mut t = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let free = t.ports.iter().position(Option::is_none);
        let Some(i) = free.and_then(|i| PortIndex::try_from(i).ok()) else {
            return Err(AttachError::Full {
                switch: self.name.clone(),
                max: MAX_PORTS,
            });
        };
        let p = Arc::new(make(i)?);
        t.ports[usize::from(i)] = Some(p.clone());
        t.active.push(i);
        Ok(p)
    }

    /// Detaches port `i`. Workers finish the batch they are in; the port's
    /// memory lives until the last reference goes.
    pub fn detach(&self, i: PortIndex) -> Option<Arc<SwitchPort>> {
        let p = {
            let mut t = self.table.write().unwrap_or_else(PoisonError::into_inner);
            let p = t.ports.get_mut(i as usize)?.take();
            t.active.retain(|&a| a != i);
            p
        };
        self.fwd.forget_port(i);
        p
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

    /// Learned addresses: (address, port name, age in seconds).
    pub fn mac_entries(&self) -> Vec<([u8; 6], String, u32)> {
        let t = self.read();
        self.fwd
            .entries(self.now_s())
            .into_iter()
            .filter_map(|(m, p, age)| t.get(p).map(|port| (m, port.name.clone(), age)))
            .collect()
    }

    pub(crate) fn forwarding(&self) -> &dyn Forwarding {
        &*self.fwd
    }

    pub(crate) fn read_table(&self) -> RwLockReadGuard<'_, PortTable> {
        self.read()
    }

    /// Forwards one batch from source `ring` of `src`: a TX ring of a ring
    /// port, a queue pair of a VM port, or a queue of an interface port. Returns what was consumed; zero
    /// slots means the source had no work.
    pub fn forward(&self, src: &SwitchPort, ring: usize, sc: &mut Scratch) -> BatchResult {
        match &src.backend {
            Backend::Ring(r) => self.forward_ring(src, r, ring, sc),
            // The queue's lock is a temporary of the `let`: released before
            // the batch is forwarded (and its wake-up sent).
            Backend::Virtio(v) => {
                let took =
                    crate::queue::take(&mut *v.pair(ring), self.batch() as usize, &mut sc.stage);
                crate::queue::forward_taken(self, src, ring, took, sc)
            }
            Backend::Dev(d) => {
                let took =
                    crate::queue::take(&mut **d.queue(ring), self.batch() as usize, &mut sc.stage);
                crate::queue::forward_taken(self, src, ring, took, sc)
            }
        }
    }

    fn forward_ring(
        &self,
        src: &SwitchPort,
        srp: &RingPort,
        ring: usize,
        sc: &mut Scratch,
    ) -> BatchResult {
        let table = self.read();
        let mut txr = srp.tx(ring);
        let head = match txr.app_head() {
            Ok(h) => h,
            Err(_) => {
                txr.reinit();
                Counters::add(&src.counters.ring_reinits, 1);
                return BatchResult::default();
            }
        };
        let n = txr.num_slots();
        let avail = arith::dist(txr.hwcur, head, n);
        if avail == 0 {
            return BatchResult::default();
        }
        let limit = avail.min(self.batch());
        let now = self.now_s();
        let sring = txr.ring();
        let sregion: &Region = txr.region();
        let sbuf = sregion.buf_size();

        sc.clear();

        let (mut tx_pkts, mut tx_bytes, mut malformed, mut short, mut long) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut consumed = 0u32;
        let mut i = txr.hwcur;
        let mut last = LastDecision::default();
        // Slots of an unfinished chain at hwcur (nothing before it).
        let mut unfinished: Option<u32> = None;
        // Start fetching the first packets' headers while the loop begins.
        const AHEAD: u32 = 4;
        for k in 0..AHEAD.min(limit) {
            sregion.prefetch_buf(split_word0(sring.slot_word0(arith::add(i, k, n))).0);
        }
        // Bounded: each pass consumes at least one slot, and stops at `limit`
        // packets' worth of slots (a packet may overshoot by at most
        // MAX_FRAGS - 1 slots).
        while consumed < limit {
            let first = i;
            let mut nfr = 0u32;
            let mut total = 0u32;
            let mut bad = false;
            let mut too_long = false;
            let mut complete = false;
            let mut s0 = NetmapSlot::default();
            let mut no_learn = false;
            while consumed + nfr < avail {
                // Word 0 of a slot: buf_idx | len << 32 | flags << 48.
                let (buf_idx, len, flags) = split_word0(sring.slot_word0(i));
                let s = NetmapSlot {
                    buf_idx,
                    len,
                    flags,
                    ptr: 0,
                };
                if nfr == 0 {
                    s0 = s;
                    no_learn = s.flags & NS_NO_LEARN != 0;
                }
                nfr += 1;
                i = arith::next(i, n);
                if u32::from(s.len) > sbuf {
                    too_long = true;
                }
                if sregion.buf_ofs(s.buf_idx).is_none() {
                    bad = true;
                }
                // At most MAX_FRAGS slots of less than 2^16 bytes each.
                total += u32::from(s.len);
                if s.flags & NS_MOREFRAG == 0 {
                    complete = true;
                    break;
                }
                if nfr == MAX_FRAGS {
                    bad = true;
                    complete = true;
                    break;
                }
            }
            if !complete {
                // The published slots end inside a packet. Packets before it
                // go now; it is looked at again on the next call. Alone, it
                // waits for its last fragment without keeping the worker
                // awake (`PortRing::note_unfinished`), unless it already
                // fills the ring (it never can complete) or made no progress
                // for a bounded number of looks: then it is dropped.
                if consumed == 0 {
                    unfinished = Some(nfr);
                }
                break;
            }
            consumed += nfr;
            if bad {
                malformed += 1;
                continue;
            }
            if too_long {
                long += 1;
                continue;
            }
            if u32::from(s0.len) < MIN_FRAME {
                short += 1;
                continue;
            }
            if consumed + AHEAD < avail {
                sregion.prefetch_buf(split_word0(sring.slot_word0(arith::add(i, AHEAD - 1, n))).0);
            }
            let Some(hdr) = sregion.read_addrs(s0.buf_idx) else {
                malformed += 1;
                continue;
            };
            tx_pkts += 1;
            tx_bytes += total as u64;
            let k = sc.dests.push_link();
            sc.ft.push(Ft {
                slot: first,
                nfrags: nfr,
                len: total,
                buf_idx: s0.buf_idx,
                first_len: u32::from(s0.len),
            });
            let decision = last.decide(&*self.fwd, hdr, src.index, !no_learn, now);
            sc.dests.route(&table, src.index, k, total, decision);
        }

        // Deliver, destination by destination; the source's counters first,
        // so that what a destination sees has been counted on both sides.
        let dests = sc.dests.destinations(&table, src.index);
        let c = &src.counters;
        // Taken with no destination: counted as drop_no_dest only.
        Counters::add(&c.tx_packets, tx_pkts - sc.dests.no_dest);
        Counters::add(&c.tx_bytes, tx_bytes - sc.dests.no_dest_bytes);
        Counters::add(&c.drop_no_dest, sc.dests.no_dest);
        for &d in &dests {
            let Some(dport) = table.get(d) else { continue };
            sc.dests.order_for(d);
            let (st, ft, order, c) = (
                &mut sc.stage,
                &sc.ft[..],
                &sc.dests.order[..],
                &*dport.counters,
            );
            // A queue's lock lives only within its arm: released before the
            // wake-up is sent.
            let wake = match &dport.backend {
                Backend::Ring(drp) => {
                    if drp.link.is_up() {
                        let frames = RingBatch {
                            ft,
                            region: sregion,
                            ring: sring,
                        };
                        let q = ring % drp.rx_rings();
                        put(&frames, order.iter().copied(), drp, q, c, false);
                    } else {
                        Counters::add(&c.drop_link_down, order.len() as u64);
                    }
                    Wake::NONE
                }
                Backend::Virtio(dv) => {
                    let q = &mut *dv.pair(ring % dv.pairs());
                    crate::queue::deliver_ring(
                        st,
                        RingBatch {
                            ft,
                            region: sregion,
                            ring: sring,
                        },
                        order,
                        q,
                        c,
                    )
                }
                Backend::Dev(dd) => {
                    let q = &mut **dd.queue(ring % dd.queues());
                    crate::queue::deliver_ring(
                        st,
                        RingBatch {
                            ft,
                            region: sregion,
                            ring: sring,
                        },
                        order,
                        q,
                        c,
                    )
                }
            };
            wake.send();
        }
        sc.dests.give_back(dests);

        if let Some(nfr) = unfinished {
            if nfr >= n - 1 || txr.note_unfinished(head) == Unfinished::Drop {
                malformed += 1;
                consumed += nfr;
            }
        }
        let hwcur = arith::add(txr.hwcur, consumed, n);
        txr.consumed_to(hwcur);
        txr.hwtail = arith::prev(txr.hwcur, n);
        txr.publish();
        if txr.app_wants_kick() {
            srp.irq(ring).signal();
        }
        Counters::add(&c.drop_malformed, malformed);
        Counters::add(&c.drop_short, short);
        Counters::add(&c.drop_long, long);
        BatchResult {
            slots: consumed,
            // At most `consumed` packets.
            packets: u32::try_from(tx_pkts + malformed + short + long).unwrap_or(consumed),
        }
    }
}
