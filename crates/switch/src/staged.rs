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

use ringswitch_frame::{Caps, Wake};
use ringswitch_offload::{self as offload, Action};

use crate::batch::conv::u32_of;
use crate::batch::{StageScratch, Staged, SEGS_MAX};
use crate::engine::{Scratch, Switch};
use crate::lookup::LastDecision;
use crate::port::{Backend, Counters, RingPort, SwitchPort};
use crate::sink::queue::checked_hdr;
use crate::sink::ring::{put, Contiguous};

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
    let c = &*dport.counters;
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
                let (arena, staged): (&[u8], &[Staged]) = (arena, staged);
                let frames = Contiguous(|k: u32| {
                    let st = staged[k as usize];
                    &arena[st.off as usize..(st.off + st.len) as usize]
                });
                full |= put(&frames, run.iter().copied(), drp, q, c, full);
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
                        // Each segment is counted by the sink; the frame
                        // they came from was one.
                        Counters::add(
                            &dport.counters.rx_segments_added,
                            segs.len().saturating_sub(1) as u64,
                        );
                        let (bounce, segs): (&[u8], &[(u32, u32)]) = (bounce, segs);
                        let frames = Contiguous(|k: u32| {
                            let (o, l) = segs[k as usize];
                            &bounce[o as usize..(o + l) as usize]
                        });
                        full |= put(&frames, 0..u32_of(segs.len()), drp, q, c, full);
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
