//! The frame path shared by sources that are not netmap rings (VM queue
//! pairs, interface queues): a batch is first copied into a per-worker
//! staging arena (so the source gets its buffers back before any lookup),
//! then every frame is looked up and the frames are delivered destination
//! by destination, as for ring ports.
//!
//! Offloads: a staged frame keeps its offload header (partial checksum,
//! TSO) all the way to a destination that takes the same offload (a VM
//! that negotiated it, a TAP); a ring port, a NIC, or a VM without the
//! feature gets the checksum completed and the TSO frame cut into
//! MSS-sized frames in software.

use ringswitch_frame::{Caps, OffloadHdr, Wake, F_DATA_VALID};
use ringswitch_offload::{self as offload, Action};
use ringswitch_ring::layout::MAX_FRAGS;
use ringswitch_ring::{arith, Dir, Region};

use crate::batch::conv::{frag_flags, slot_len_of, u32_of};
use crate::batch::{StageScratch, SEGS_MAX};
use crate::engine::{slots_for, valid_buf, Scratch, Switch};
use crate::lookup::LastDecision;
use crate::port::{Backend, Counters, RingPort, SwitchPort};

/// The header of a frame whose checksum is known good.
pub(crate) fn checked_hdr() -> OffloadHdr {
    OffloadHdr {
        flags: F_DATA_VALID,
        ..OffloadHdr::default()
    }
}

/// Looks up the frames staged in `sc.stage` (taken from source queue
/// `src_q` of `src`, `bytes` in all) and delivers them destination by
/// destination. The source's `tx_packets`, `tx_bytes` and `drop_no_dest`
/// are counted here, before any delivery; every frame is counted once by
/// each destination it goes to.
pub(crate) fn forward_staged(
    sw: &Switch,
    src: &SwitchPort,
    src_q: usize,
    bytes: u64,
    sc: &mut Scratch,
) {
    sc.clear();
    let table = sw.read_table();
    let now = sw.now_s();
    let mut last = LastDecision::default();
    for k in 0..sc.stage.staged.len() {
        let st = sc.stage.staged[k];
        let o = st.off as usize;
        let mut hdr = [0u8; 12];
        hdr.copy_from_slice(&sc.stage.arena[o..o + 12]);
        let kk = sc.dests.push_link();
        let decision = last.decide(sw.forwarding(), hdr, src.index, true, now);
        sc.dests.route(&table, src.index, kk, st.len, decision);
    }
    let dests = sc.dests.destinations(&table, src.index);
    // The source's counters first, so that what a destination sees has been
    // counted on both sides. Taken with no destination: drop_no_dest only.
    let c = &src.counters;
    Counters::add(
        &c.tx_packets,
        sc.stage.staged.len() as u64 - sc.dests.no_dest,
    );
    Counters::add(&c.tx_bytes, bytes - sc.dests.no_dest_bytes);
    Counters::add(&c.drop_no_dest, sc.dests.no_dest);
    for &d in &dests {
        let Some(dport) = table.get(d) else { continue };
        sc.dests.order_for(d);
        let (st, order, c) = (&mut sc.stage, &sc.dests.order[..], &*dport.counters);
        // A queue's lock lives only within its arm: released before the
        // wake-up is sent.
        let wake = match &dport.backend {
            Backend::Ring(drp) => {
                staged_to_ring(st, order, dport, drp, src_q);
                Wake::NONE
            }
            Backend::Virtio(dv) => {
                crate::queue::deliver_staged(st, order, &mut *dv.pair(src_q % dv.pairs()), c)
            }
            Backend::Dev(dd) => {
                crate::queue::deliver_staged(st, order, &mut **dd.queue(src_q % dd.queues()), c)
            }
        };
        wake.send();
    }
    sc.dests.give_back(dests);
}

/// What a destination queue said to one frame.
pub(crate) enum Outcome {
    /// Taken.
    Taken,
    /// No room: the rest of the batch is dropped.
    Full,
    /// The destination is down: the rest of the batch is dropped.
    Down,
    /// Too long for the destination: this frame is dropped.
    TooLong,
}

/// What one delivery into a VM or an interface did.
#[derive(Default)]
pub(crate) struct Tally {
    pkts: u64,
    bytes: u64,
    pub(crate) full: u64,
    down: u64,
    pub(crate) long: u64,
    /// Outcomes beyond one per frame, from software segmentation.
    added: u64,
    /// The queue filled up: the rest of the batch is dropped, so what
    /// arrives is a prefix.
    pub(crate) stopped: bool,
}

impl Tally {
    /// Offers one frame of `len` bytes to `push`, unless an earlier frame
    /// found the destination full or down; false once it cannot take more.
    #[inline]
    pub(crate) fn push(&mut self, len: usize, push: impl FnOnce() -> Outcome) -> bool {
        if self.stopped {
            self.full += 1;
            return false;
        }
        match push() {
            Outcome::Taken => {
                self.pkts += 1;
                self.bytes += len as u64;
                true
            }
            Outcome::Full => {
                self.full += 1;
                self.stopped = true;
                false
            }
            Outcome::Down => {
                self.down += 1;
                self.stopped = true;
                false
            }
            Outcome::TooLong => {
                self.long += 1;
                true
            }
        }
    }

    pub(crate) fn count(&self, c: &Counters) {
        Counters::add(&c.rx_packets, self.pkts);
        Counters::add(&c.rx_bytes, self.bytes);
        Counters::add(&c.drop_rx_full, self.full);
        Counters::add(&c.drop_link_down, self.down);
        Counters::add(&c.drop_long, self.long);
        Counters::add(&c.rx_segments_added, self.added);
    }
}

/// Delivers staged frames `order` into ring port `drp`: checksums
/// completed and TSO frames segmented in software (a ring carries no
/// virtio-net header). Plain frames go in runs, one reservation each; a TSO
/// frame is segmented into the bounce buffer and gets a reservation of its
/// own, so order is kept.
pub(crate) fn staged_to_ring(
    st: &mut StageScratch,
    order: &[u32],
    dport: &SwitchPort,
    drp: &RingPort,
    src_q: usize,
) {
    if !drp.link.is_up() {
        Counters::add(&dport.counters.drop_link_down, order.len() as u64);
        return;
    }
    let q = src_q % drp.rx_rings();
    let none = Caps::default();
    let StageScratch {
        arena,
        staged,
        bounce,
        segs,
        segmenter,
        ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    let mut run_start = 0usize;
    let mut i = 0usize;
    let mut full = false;
    while i <= order.len() {
        // Decide what frame i needs; a segment frame (or the end) flushes
        // the run of plain frames before it.
        let mut segment = false;
        if i < order.len() {
            let st = &mut staged[order[i] as usize];
            let oh = st.hdr;
            let frame = &mut arena[st.off as usize..(st.off + st.len) as usize];
            match offload::plan(&oh, none) {
                Ok(Action::PassThrough) => {}
                Ok(Action::CompleteChecksum) => {
                    if offload::complete_checksum(
                        frame,
                        oh.csum_start.into(),
                        oh.csum_offset.into(),
                    )
                    .is_ok()
                    {
                        st.hdr = checked_hdr();
                    }
                    // Else (not for a frame checked when staged) it goes as
                    // it is, and the receiver drops it on its checksum.
                }
                Ok(Action::Segment) => segment = true,
                // Not for a frame checked when staged; its segmentation
                // fails below and is counted.
                Err(_) => segment = true,
            }
        }
        if segment || i == order.len() {
            let run = &order[run_start..i];
            if !run.is_empty() {
                full |= ring_put(dport, drp, q, run.len(), full, |j| {
                    let st = staged[run[j] as usize];
                    &arena[st.off as usize..(st.off + st.len) as usize]
                });
            }
            if i < order.len() {
                let st = staged[order[i] as usize];
                let oh = st.hdr;
                let frame = &arena[st.off as usize..(st.off + st.len) as usize];
                segs.clear();
                let mut used = 0usize;
                let r = segmenter.segment(frame, &oh, |seg| {
                    let Some(dst) = bounce.get_mut(used..used + seg.len()) else {
                        return false;
                    };
                    if segs.len() == SEGS_MAX {
                        return false;
                    }
                    dst.copy_from_slice(seg);
                    segs.push((u32_of(used), u32_of(seg.len())));
                    used += seg.len();
                    true
                });
                match r {
                    Ok(_) => {
                        // Each segment is counted by ring_put; the frame
                        // they came from was one.
                        Counters::add(
                            &dport.counters.rx_segments_added,
                            segs.len().saturating_sub(1) as u64,
                        );
                        full |= ring_put(dport, drp, q, segs.len(), full, |j| {
                            let (o, l) = segs[j];
                            &bounce[o as usize..(o + l) as usize]
                        });
                    }
                    // Segments overflowing the bounce buffer (a frame
                    // checked when staged fails for nothing else): too long
                    // to deliver here.
                    Err(_) => Counters::add(&dport.counters.drop_long, 1),
                }
            }
            run_start = i + 1;
        }
        i += 1;
    }
}

/// Copies `n` contiguous frames (`frame(j)`) into RX ring `q` of ring port
/// `drp` under one reservation; drops the rest when the ring fills. With
/// `already_full`, drops all of them (an earlier run found the ring full).
/// Returns whether the ring filled up.
pub(crate) fn ring_put<'a>(
    dport: &SwitchPort,
    drp: &RingPort,
    q: usize,
    n: usize,
    already_full: bool,
    frame: impl Fn(usize) -> &'a [u8],
) -> bool {
    let c = &dport.counters;
    if already_full {
        Counters::add(&c.drop_rx_full, n as u64);
        return true;
    }
    let dregion: &Region = drp.region();
    let dbuf = dregion.buf_size();
    let want: u32 = (0..n)
        .map(|j| slots_for(u32_of(frame(j).len()), dbuf))
        .filter(|&s| s <= MAX_FRAGS)
        .sum();
    let res = drp.rx(q).reserve(want, c);
    let place = dregion.ring_place(0, Dir::Rx, u32_of(q));
    let dring = dregion.ring_at(place);
    let dn = place.num_slots;
    let default_buf = dregion.layout().first_buf(0, Dir::Rx, u32_of(q));
    let dest_buf = |d: u32| valid_buf(dregion, &dring, default_buf, d);
    let mut left = res.len;
    let mut d = res.start;
    let (mut pkts, mut bytes, mut dropped, mut long) = (0u64, 0u64, 0u64, 0u64);
    let mut filled = false;
    for j in 0..n {
        let f = frame(j);
        let need = slots_for(u32_of(f.len()), dbuf);
        if need > MAX_FRAGS {
            long += 1;
            continue;
        }
        if need > left {
            dropped += 1;
            left = 0;
            filled = true;
            continue;
        }
        let mut off = 0usize;
        for u in 0..need {
            let chunk = (f.len() - off).min(dbuf as usize);
            dregion.write_buf(dest_buf(d), 0, &f[off..off + chunk]);
            let more = if u + 1 < need {
                ringswitch_ring::layout::NS_MOREFRAG
            } else {
                0
            };
            dring.set_len_flags(d, slot_len_of(chunk), more | frag_flags(need));
            d = arith::next(d, dn);
            off += chunk;
        }
        left -= need;
        pkts += 1;
        bytes += f.len() as u64;
    }
    // Counted before hwtail moves over the slots: what the client sees has
    // been counted.
    Counters::add(&c.rx_packets, pkts);
    Counters::add(&c.rx_bytes, bytes);
    Counters::add(&c.drop_rx_full, dropped);
    Counters::add(&c.drop_long, long);
    drp.finish_lease(q, res, d, &dring);
    filled
}

/// Delivers staged frames `order` through `push` to a destination that
/// takes offloads `caps`: passed through where it takes them, done in
/// software where not (the completed checksum is kept for later
/// destinations). What happened is added to `t`, once per frame or
/// segment.
pub(crate) fn staged_to_queue(
    st: &mut StageScratch,
    order: &[u32],
    caps: Caps,
    t: &mut Tally,
    mut push: impl FnMut(&OffloadHdr, &[u8]) -> Outcome,
) {
    let StageScratch {
        arena,
        staged,
        segmenter,
        ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    for &k in order {
        if t.stopped {
            t.full += 1;
            continue;
        }
        let st = &mut staged[k as usize];
        let frame = &mut arena[st.off as usize..(st.off + st.len) as usize];
        let oh = st.hdr;
        match offload::plan(&oh, caps) {
            Ok(Action::PassThrough) => {
                t.push(frame.len(), || push(&oh, frame));
            }
            Ok(Action::CompleteChecksum) => {
                if offload::complete_checksum(frame, oh.csum_start.into(), oh.csum_offset.into())
                    .is_err()
                {
                    // Not for a frame checked when staged.
                    t.long += 1;
                    continue;
                }
                // Later destinations get the completed frame.
                st.hdr = checked_hdr();
                t.push(frame.len(), || push(&st.hdr, frame));
            }
            Ok(Action::Segment) => {
                let h = checked_hdr();
                let mut n = 0u64;
                let r = segmenter.segment(frame, &oh, |seg| {
                    n += 1;
                    t.push(seg.len(), || push(&h, seg))
                });
                if r.is_err() {
                    // Not for a frame checked when staged.
                    t.long += 1;
                    n += 1;
                }
                // Each segment (and a failure) is counted once; the frame
                // they came from was one.
                t.added += n.saturating_sub(1);
            }
            // Not for a frame checked when staged.
            Err(_) => t.long += 1,
        }
    }
}
