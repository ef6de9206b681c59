//! The port side of a pipe, run by each end in its own process: a TX sync
//! swaps the filled slots' buffers into the peer's RX ring (zero copy) and
//! wakes the peer only if it asked; an RX sync that frees slots wakes a peer
//! waiting for TX space. Nothing the peer wrote is trusted: its head is
//! validated against what it was given, and buffer indexes are validated
//! by whoever dereferences them.

use std::sync::atomic::fence;
use std::sync::{Arc, Mutex, Weak};

use ringswitch_ring::arith;
use ringswitch_ring::sync::{kick_average, order};
use ringswitch_ring::{AppRing, Dir, PortRing, Region};

use crate::doorbell::Doorbell;

/// The regions of this process's pipe ends that live in a switch port's
/// memory (`OpenOptions::in_port_memory`).
static IN_PORTS: Mutex<Vec<Weak<Region>>> = Mutex::new(Vec::new());

/// Notes that `region`, a pipe end's, is a switch port's memory.
pub(crate) fn note_in_port(region: &Arc<Region>) {
    let mut v = IN_PORTS.lock().unwrap_or_else(|p| p.into_inner());
    v.retain(|w| w.strong_count() > 0);
    v.push(Arc::downgrade(region));
}

/// Whether a pipe end of this process is open in `port`'s memory.
pub(crate) fn any_in(port: &Region) -> bool {
    let Some(id) = port.file_id() else {
        return false;
    };
    let mut v = IN_PORTS.lock().unwrap_or_else(|p| p.into_inner());
    v.retain(|w| w.strong_count() > 0);
    v.iter()
        .filter_map(Weak::upgrade)
        .any(|r| r.file_id() == Some(id))
}

pub(crate) struct PipeEnd {
    region: Arc<Region>,
    end: usize,
    /// The peer's interrupt of each ring pair (local index): its eventfd,
    /// or in a VM the doorbell that raises it.
    peer_irqs: Vec<Doorbell>,
    /// Port side of each peer RX ring (the peer's RX ring `i` is fed by our
    /// TX ring `i`).
    peer_rx: Vec<PortRing>,
    /// Port-side consumed position of each of our TX rings.
    tx_hwcur: Vec<u32>,
    /// Ring numbers in the region of our TX rings (local index -> ring).
    tx_ids: Vec<u32>,
    /// Ring numbers in the region of our RX rings (local index -> ring),
    /// which differ from the local index after a split.
    rx_ids: Vec<u32>,
    /// What waking the peer for TX space cost lately, per RX ring (local
    /// index; see `ringswitch_ring::sync::kick_average`).
    released_cost: Vec<u32>,
    bad_values: u64,
}

impl PipeEnd {
    pub(crate) fn new(region: Arc<Region>, end: usize, peer_irqs: Vec<Doorbell>) -> PipeEnd {
        let g = region.layout().end_geometry(end);
        let peer = region.layout().peer_end(end);
        let peer_rx = (0..g.tx_rings)
            .map(|i| PortRing::new(region.clone(), peer, Dir::Rx, i))
            .collect();
        let tx_hwcur = (0..g.tx_rings)
            .map(|i| {
                let c = region.csb(end, Dir::Tx, i).hwcur().load(order::READ_HWCUR);
                if c < g.tx_slots {
                    c
                } else {
                    0
                }
            })
            .collect();
        PipeEnd {
            region,
            end,
            peer_irqs,
            peer_rx,
            tx_hwcur,
            tx_ids: (0..g.tx_rings).collect(),
            rx_ids: (0..g.rx_rings).collect(),
            released_cost: vec![0; g.rx_rings as usize],
            bad_values: 0,
        }
    }

    /// The part of this end that serves TX ring `tx` and RX ring `rx` (ring
    /// numbers in the region), for a port split across threads.
    pub(crate) fn piece(&self, tx: Option<u32>, rx: Option<u32>) -> std::io::Result<PipeEnd> {
        let peer = self.region.layout().peer_end(self.end);
        Ok(PipeEnd {
            region: self.region.clone(),
            end: self.end,
            peer_irqs: match tx.or(rx) {
                Some(k) => vec![self.peer_irqs[k as usize].try_clone()?],
                None => Vec::new(),
            },
            peer_rx: tx
                .map(|k| PortRing::new(self.region.clone(), peer, Dir::Rx, k))
                .into_iter()
                .collect(),
            tx_hwcur: tx.map(|k| self.tx_hwcur[k as usize]).into_iter().collect(),
            tx_ids: tx.into_iter().collect(),
            rx_ids: rx.into_iter().collect(),
            released_cost: rx.map(|_| 0).into_iter().collect(),
            bad_values: 0,
        })
    }

    pub(crate) fn bad_values(&self) -> u64 {
        self.bad_values + self.peer_rx.iter().map(|p| p.reinits).sum::<u64>()
    }

    /// Moves what our TX ring `i` has pending into the peer's RX ring.
    /// Returns whether the peer was woken.
    #[inline]
    pub(crate) fn push(&mut self, i: usize, ring: &mut AppRing) -> bool {
        let n = ring.num_slots();
        let peer = &mut self.peer_rx[i];
        match peer.app_head() {
            Ok(h) => peer.hwcur = h,
            // The peer's head is not one it could have: keep the last good
            // one (the ring stalls for the peer, not for us) and count it.
            Err(_) => self.bad_values += 1,
        }
        let mut a = self.tx_hwcur[i];
        let pending = arith::dist(a, ring.head(), n);
        let m = pending.min(peer.rx_free());
        if m > 0 {
            let (na, nb) = ring.ring().swap_into(&peer.ring(), a, peer.hwtail, m);
            a = na;
            peer.hwtail = nb;
            self.tx_hwcur[i] = a;
            peer.publish();
        }
        let woke = m > 0 && peer.app_wants_kick();
        if woke {
            // Timed, for the peer's adaptive wait (see `PortRing::note_kick`).
            let took = self.peer_irqs[i].signal_timed();
            peer.note_kick(took);
        }
        // Our TX ring: every slot up to the first still pending is free again.
        let csb = self.region.csb(self.end, Dir::Tx, self.tx_ids[i]);
        let tail = arith::prev(a, n);
        if m > 0 {
            csb.hwcur().store(a, order::PUBLISH_HWCUR);
            csb.hwtail().store(tail, order::PUBLISH_HWTAIL);
        }
        ring.accept_tail(tail);
        woke
    }

    /// Our RX ring `i` released slots: wake the peer if it waits for TX space
    /// on the ring that feeds it. Returns whether it was woken.
    #[inline]
    pub(crate) fn released(&mut self, i: usize) -> bool {
        let peer_tx = self.region.csb(
            self.region.layout().peer_end(self.end),
            Dir::Tx,
            self.rx_ids[i],
        );
        // Pairs with the fence the peer issues after setting appl_need_kick
        // (AppRing::set_need_kick): either it sees our new head when it
        // rechecks, or we see its flag here.
        fence(order::DOUBLE_CHECK);
        if peer_tx.appl_need_kick().load(order::READ_NEED_KICK) != 0 {
            // Timed, for the peer's adaptive wait for TX space, which reads
            // it where the port side of its TX ring would publish it.
            let took = self.peer_irqs[i].signal_timed();
            if let Some(c) = self.released_cost.get_mut(i) {
                *c = kick_average(*c, took);
                peer_tx.kick_cost_ns().store(*c, order::KICK_COST);
            }
            return true;
        }
        false
    }
}
