//! VM ports: vhost-user virtio-net queue pairs as sources and destinations.
//!
//! From a VM: the worker takes a batch of frames from the guest's TX queue
//! under the pair's lock, copying each into the staging arena (the chain is
//! completed at once, so the guest gets its buffers back before the
//! lookups); [`crate::staged`] does the rest. Into a VM: frames are pushed
//! into the guest's RX buffers, the used index published and the guest
//! interrupted once per batch.

use ringswitch_offload::{Caps, OffloadHdr};
use ringswitch_ring::{Region, RingRef};
use ringswitch_vhost::{RxError, VirtioNetHdr};

use crate::engine::conv::u32_of;
use crate::engine::{BatchResult, Ft, Scratch, Switch, MIN_FRAME};
use crate::port::{Counters, SwitchPort, VirtioPort};
use crate::staged::{
    forward_staged, staged_to_queue, Outcome, StageScratch, Staging, Tally, FRAME_MAX,
};

/// The offload fields of a guest's header, in host order. DATA_VALID is
/// the device's word on receive, not the guest's on transmit: a guest
/// claiming it must not make another guest or the host stack skip checking
/// its checksums, so it is dropped here.
fn offload_hdr(h: &VirtioNetHdr) -> OffloadHdr {
    OffloadHdr {
        flags: h.flags & !ringswitch_offload::F_DATA_VALID,
        gso_type: h.gso_type,
        hdr_len: h.hdr_len(),
        gso_size: h.gso_size(),
        csum_start: h.csum_start(),
        csum_offset: h.csum_offset(),
    }
}

/// A virtio-net header carrying `h` (little-endian, no buffer count).
fn virtio_hdr(h: &OffloadHdr) -> VirtioNetHdr {
    VirtioNetHdr {
        flags: h.flags,
        gso_type: h.gso_type,
        hdr_len: h.hdr_len.to_le(),
        gso_size: h.gso_size.to_le(),
        csum_start: h.csum_start.to_le(),
        csum_offset: h.csum_offset.to_le(),
        num_buffers: 0,
    }
}

/// Pushes one frame into a guest's RX queue (published by `notify_rx`).
fn rx_push(q: &mut ringswitch_vhost::VirtioNetPort, h: &VirtioNetHdr, frame: &[u8]) -> Outcome {
    match q.rx_push_deferred(h, frame) {
        Ok(()) => Outcome::Taken,
        Err(RxError::Full) => Outcome::Full,
        Err(RxError::NotReady) => Outcome::Down,
        Err(RxError::TooLarge) => Outcome::TooLong,
    }
}

/// Takes one batch from queue pair `pair` of VM port `src` and forwards it.
pub(crate) fn forward_from_vm(
    sw: &Switch,
    src: &SwitchPort,
    v: &VirtioPort,
    pair: usize,
    sc: &mut Scratch,
) -> BatchResult {
    sc.stage.start();
    let (mut short, mut long, mut malformed, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let (taken, bad, irq) = {
        let mut q = v.pair(pair);
        let bad0 = q.stats().tx_bad_chains;
        let stage = &mut sc.stage;
        let taken = q.tx_batch(sw.batch() as usize, |f, h| {
            let len = f.len();
            if len < MIN_FRAME as usize {
                short += 1;
                return true;
            }
            // The chain bound keeps len <= FRAME_MAX, and the batch stops
            // while the arena still has room for one more.
            let Some(dst) = stage.tail().get_mut(..len) else {
                // Not reached (see above); the chain is taken all the same,
                // so it is counted.
                long += 1;
                return false;
            };
            f.copy_to(dst);
            match stage.commit(offload_hdr(h), len) {
                Staging::Staged => bytes += len as u64,
                Staging::Malformed => malformed += 1,
                Staging::NoRoom => long += 1,
            }
            stage.has_room()
        });
        let irq = if taken > 0 {
            q.notify_tx_done()
        } else {
            ringswitch_vhost::Interrupt::NONE
        };
        (taken, q.stats().tx_bad_chains.wrapping_sub(bad0), irq)
    };
    // After the pair's lock is released: never held across a write to the
    // frontend's descriptor.
    irq.send();
    if taken == 0 {
        return BatchResult::default();
    }
    forward_staged(sw, src, pair, bytes, sc);
    let c = &src.counters;
    Counters::add(&c.drop_short, short);
    Counters::add(&c.drop_long, long);
    Counters::add(&c.drop_malformed, bad + malformed);
    BatchResult {
        slots: u32_of(taken),
        packets: u32_of(taken),
    }
}

/// Delivers staged frames `order` into VM `dv`: offloads passed through
/// where the guest negotiated them, done in software where not.
pub(crate) fn staged_to_vm(
    st: &mut StageScratch,
    order: &[u32],
    dport: &SwitchPort,
    dv: &VirtioPort,
    src_q: usize,
) {
    let mut q = dv.pair(src_q % dv.pairs());
    let c = &dport.counters;
    if !q.is_running() {
        Counters::add(&c.drop_link_down, order.len() as u64);
        return;
    }
    let caps = q.rx_caps();
    let caps = Caps {
        csum: caps.csum,
        tso4: caps.tso4,
        tso6: caps.tso6,
        ecn: false,
    };
    let mut t = Tally::default();
    staged_to_queue(st, order, caps, &mut t, |h, frame| {
        rx_push(&mut q, &virtio_hdr(h), frame)
    });
    // Counted before the used index moves: what the guest sees has been
    // counted.
    t.count(c);
    let irq = q.notify_rx();
    drop(q);
    irq.send();
}

/// Delivers packets `order` of a ring port's batch into VM `dv`: each frame
/// is gathered from its ring fragments into the bounce buffer and pushed
/// with an empty virtio-net header.
#[allow(clippy::too_many_arguments)]
pub(crate) fn deliver_ring_to_vm(
    st: &mut StageScratch,
    ft: &[Ft],
    order: &[u32],
    sregion: &Region,
    sring: &RingRef<'_>,
    dport: &SwitchPort,
    dv: &VirtioPort,
    src_ring: usize,
) {
    st.ensure();
    let mut q = dv.pair(src_ring % dv.pairs());
    let c = &dport.counters;
    if !q.is_running() {
        Counters::add(&c.drop_link_down, order.len() as u64);
        return;
    }
    let h = VirtioNetHdr::default();
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
        t.push(len, || rx_push(&mut q, &h, frame));
    }
    // Counted before the used index moves: what the guest sees has been
    // counted.
    t.count(c);
    let irq = q.notify_rx();
    drop(q);
    irq.send();
}
