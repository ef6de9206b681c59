//! Interface ports: the queues of a NIC (AF_XDP, AF_PACKET) or a TAP as
//! sources and destinations.
//!
//! From an interface: the worker takes a batch of received frames from one
//! queue under its lock, copying each into the staging arena (the kernel
//! gets its buffers back at once); [`crate::staged`] does the rest. Into an
//! interface: frames are queued for transmission under the queue's lock and
//! handed to the kernel once per batch.

use ringswitch_netdev::{OffloadHdr, TxError};
use ringswitch_ring::{Region, RingRef};

use crate::engine::conv::u32_of;
use crate::engine::{BatchResult, Ft, Scratch, Switch, MIN_FRAME};
use crate::port::{Counters, DevPort, SwitchPort};
use crate::staged::{
    forward_staged, staged_to_queue, Outcome, StageScratch, Staging, Tally, FRAME_MAX,
};

fn outcome(r: Result<(), TxError>) -> Outcome {
    match r {
        Ok(()) => Outcome::Taken,
        Err(TxError::Full) => Outcome::Full,
        Err(TxError::Down) => Outcome::Down,
        Err(TxError::TooLong) => Outcome::TooLong,
    }
}

/// Takes one batch from queue `q` of interface port `src` and forwards it.
pub(crate) fn forward_from_dev(
    sw: &Switch,
    src: &SwitchPort,
    d: &DevPort,
    q: usize,
    sc: &mut Scratch,
) -> BatchResult {
    sc.stage.start();
    let (mut short, mut long, mut malformed, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let taken = {
        let mut dq = d.queue(q);
        let stage = &mut sc.stage;
        dq.rx_batch(sw.batch() as usize, &mut |f, h| {
            if f.len() < MIN_FRAME as usize {
                short += 1;
            } else if f.len() > FRAME_MAX {
                long += 1;
            } else {
                match stage.stage(*h, f) {
                    Staging::Staged => bytes += f.len() as u64,
                    Staging::Malformed => malformed += 1,
                    Staging::NoRoom => long += 1,
                }
            }
            // Stop while one more frame of the largest size still fits.
            stage.has_room()
        })
    };
    if taken == 0 {
        return BatchResult::default();
    }
    if !sc.stage.staged.is_empty() {
        forward_staged(sw, src, q, bytes, sc);
    }
    let c = &src.counters;
    Counters::add(&c.drop_short, short);
    Counters::add(&c.drop_long, long);
    Counters::add(&c.drop_malformed, malformed);
    BatchResult {
        slots: u32_of(taken),
        packets: u32_of(taken),
    }
}

/// Delivers staged frames `order` to interface `dd`: offloads passed
/// through where the interface takes them (a TAP), done in software where
/// not (a NIC); one flush for the batch.
pub(crate) fn staged_to_dev(
    st: &mut StageScratch,
    order: &[u32],
    dport: &SwitchPort,
    dd: &DevPort,
    src_q: usize,
) {
    let mut q = dd.queue(src_q % dd.queues());
    let mut t = Tally::default();
    staged_to_queue(st, order, dd.tx_caps(), &mut t, |h, frame| {
        outcome(q.tx_push(h, frame))
    });
    // Counted before the kernel is told: what anyone sees has been counted.
    t.count(&dport.counters);
    q.tx_flush();
}

/// Delivers packets `order` of a ring port's batch to interface `dd`: each
/// frame is gathered from its ring fragments and queued with an empty
/// header (a host stack checks its checksums: a ring port's client is not
/// trusted to have them right).
#[allow(clippy::too_many_arguments)]
pub(crate) fn deliver_ring_to_dev(
    st: &mut StageScratch,
    ft: &[Ft],
    order: &[u32],
    sregion: &Region,
    sring: &RingRef<'_>,
    dport: &SwitchPort,
    dd: &DevPort,
    src_ring: usize,
) {
    st.ensure();
    let mut q = dd.queue(src_ring % dd.queues());
    let h = OffloadHdr::default();
    let mut t = Tally::default();
    for &k in order {
        let p = &ft[k as usize];
        if t.stopped {
            t.full += 1;
            continue;
        }
        if p.len as usize > FRAME_MAX {
            t.push(p.len as usize, || Outcome::TooLong);
            continue;
        }
        let len = st.gather(p, sregion, sring);
        let frame = &st.bounce[..len];
        t.push(len, || outcome(q.tx_push(&h, frame)));
    }
    t.count(&dport.counters);
    q.tx_flush();
}
