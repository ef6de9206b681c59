//! Where a batch's frames go: the ring sink copies them into a ring port's
//! RX ring, the queue sink pushes them into a frame queue. Each sink is one
//! loop, fed by whatever source the frames came from; [`Frames`] is what
//! the engine hands them, the same for every source.

pub(crate) mod queue;
pub(crate) mod ring;

use ringswitch_control::PortVlan;
use ringswitch_flow::apply_edits;
use ringswitch_frame::{FrameQueue, OffloadHdr, Wake, FRAME_MAX, FRAME_MIN};

use crate::batch::{RingBatch, StageScratch, MAX_BATCH};
use crate::port::{Backend, CounterSet, RingPort, SwitchPort};
use crate::vlan::{egress, Edit, FrameVlan};
use queue::{Gathered, StagedFrames};

/// The tag edits of one destination, on a switch with VLANs: each frame's
/// VLAN (by index in the batch) and the destination's setting.
#[derive(Clone, Copy)]
pub(crate) struct Retag<'a> {
    pub(crate) frames: &'a [FrameVlan],
    pub(crate) dest: &'a PortVlan,
}

impl Retag<'_> {
    /// What frame `k` needs on its way out.
    #[inline(always)]
    pub(crate) fn edit(&self, k: u32) -> Edit {
        let f = self.frames.get(k as usize).copied().unwrap_or_default();
        egress(f, self.dest)
    }

    /// `Some` when one of frames `order` needs an edit: the sinks then
    /// edit as they copy; else they take their plain path.
    pub(crate) fn needed(self, order: &[u32]) -> Option<Self> {
        order
            .iter()
            .any(|&k| self.edit(k) != Edit::Keep)
            .then_some(self)
    }
}

/// A looked-up batch, as the sinks take it.
pub(crate) trait Frames {
    /// Delivers frames `order` into RX ring `q` of ring port `drp` (which
    /// is up), counting on `c`, their tags edited as `retag` says.
    fn to_ring(
        &mut self,
        order: &[u32],
        drp: &RingPort,
        q: usize,
        c: &CounterSet,
        retag: Option<Retag<'_>>,
    );

    /// Delivers frames `order` into `q` (locked by the caller for this call
    /// only), counting on `c`, their tags edited as `retag` says. Returns
    /// the wake-up to send once the lock is released.
    fn to_queue<Q: FrameQueue + ?Sized>(
        &mut self,
        order: &[u32],
        q: &mut Q,
        c: &CounterSet,
        retag: Option<Retag<'_>>,
    ) -> Wake;

    /// Frame `k` in contiguous bytes, with its offload request; or, too
    /// long to be made contiguous, its length.
    fn contiguous(&mut self, k: u32) -> Result<(OffloadHdr, &[u8]), usize>;
}

/// A frame's header edits on a switch with flow tables: at most what an
/// output carries.
pub(crate) type EditList = (
    [ringswitch_flow::Edit; crate::lookup::flows::MAX_OUT_EDITS],
    usize,
);

/// `0, 1, 2, ...`: the order of frames on a stage filled for one
/// destination.
static IOTA: [u32; MAX_BATCH as usize] = {
    let mut a = [0u32; MAX_BATCH as usize];
    let mut i = 0u32;
    while i < MAX_BATCH {
        a[i as usize] = i;
        i += 1;
    }
    a
};

/// A frame's offload request after an edit that moved its L3 header by
/// `delta` bytes (a tag pushed or popped).
fn shift_offload(mut h: OffloadHdr, delta: i64) -> OffloadHdr {
    let shift = |v: u16| u16::try_from((i64::from(v) + delta).max(0)).unwrap_or(u16::MAX);
    if h.flags & ringswitch_frame::F_NEEDS_CSUM != 0 {
        h.csum_start = shift(h.csum_start);
    }
    if h.gso_type != ringswitch_frame::GSO_NONE {
        h.hdr_len = shift(h.hdr_len);
    }
    h
}

/// Delivers frames `order` of `frames` to `dport` (on the queue or ring
/// paired with source queue `src_q`), frame `order[i]` with edits
/// `edits_of(i)`: each is written edited onto the stage `es`, which is
/// delivered to the port whenever it fills and at the end, so the frames
/// arrive in order. A frame too long to gather or edit, or shorter than an
/// Ethernet header once edited, is counted as too long.
pub(crate) fn edited<F: Frames>(
    frames: &mut F,
    es: &mut StageScratch,
    order: &[u32],
    edits_of: impl Fn(usize) -> EditList,
    dport: &SwitchPort,
    src_q: usize,
) {
    let c = dport.counters.mine();
    es.start();
    for (i, &k) in order.iter().enumerate() {
        let (list, n) = edits_of(i);
        let (hdr, bytes) = match frames.contiguous(k) {
            Ok(f) => f,
            Err(_) => {
                CounterSet::add(&c.drop_long, 1);
                continue;
            }
        };
        let StageScratch { intake, edited, .. } = &mut *es;
        match apply_edits(bytes, list[..n].iter().copied(), edited) {
            Ok(len) if (FRAME_MIN..=FRAME_MAX).contains(&len) => {
                // Both at most FRAME_MAX + a few tags.
                let delta =
                    i64::try_from(len).unwrap_or(0) - i64::try_from(bytes.len()).unwrap_or(0);
                intake.put(&edited[..len], shift_offload(hdr, delta));
            }
            _ => {
                CounterSet::add(&c.drop_long, 1);
                continue;
            }
        }
        if intake.frames().len() == MAX_BATCH as usize || !intake.has_room() {
            deliver_stage(es, dport, src_q);
            es.start();
        }
    }
    deliver_stage(es, dport, src_q);
}

/// Delivers every frame on stage `es` to `dport`.
fn deliver_stage(es: &mut StageScratch, dport: &SwitchPort, src_q: usize) {
    let n = es.intake.frames().len();
    if n == 0 {
        return;
    }
    let (order, c) = (&IOTA[..n], dport.counters.mine());
    let wake = match &dport.backend {
        Backend::Ring(drp) => {
            to_ring(es, order, drp, src_q, c, None);
            Wake::NONE
        }
        Backend::Queue(dq) => es.to_queue(order, &mut *dq.queue(src_q % dq.queues()), c, None),
    };
    wake.send();
}

/// Delivers frames `order` into ring port `drp`, on the RX ring paired
/// with source ring `src_q`; with no one behind the port (see
/// [`crate::port::Link`]) they are dropped and counted.
#[inline]
pub(crate) fn to_ring<F: Frames>(
    frames: &mut F,
    order: &[u32],
    drp: &RingPort,
    src_q: usize,
    c: &CounterSet,
    retag: Option<Retag<'_>>,
) {
    if drp.link.is_up() {
        frames.to_ring(order, drp, src_q % drp.rx_rings(), c, retag);
    } else {
        CounterSet::add(&c.drop_link_down, order.len() as u64);
    }
}

/// A ring source's batch, with the staging space a queue sink gathers its
/// packets in.
pub(crate) struct FromRing<'a> {
    pub(crate) batch: RingBatch<'a>,
    pub(crate) stage: &'a mut StageScratch,
}

impl Frames for FromRing<'_> {
    #[inline]
    fn to_ring(
        &mut self,
        order: &[u32],
        drp: &RingPort,
        q: usize,
        c: &CounterSet,
        retag: Option<Retag<'_>>,
    ) {
        let edit = retag.map(|r| move |k| r.edit(k));
        ring::put_edited(&self.batch, order.iter().copied(), drp, q, c, false, edit);
    }

    fn to_queue<Q: FrameQueue + ?Sized>(
        &mut self,
        order: &[u32],
        q: &mut Q,
        c: &CounterSet,
        retag: Option<Retag<'_>>,
    ) -> Wake {
        self.stage.ensure();
        let StageScratch {
            bounce,
            segmenter,
            edited,
            ..
        } = &mut *self.stage;
        let segmenter = segmenter.as_mut().expect("ensure() ran");
        let mut frames = Gathered {
            batch: self.batch,
            bounce,
            hdr: OffloadHdr::default(),
        };
        queue::push(&mut frames, order, segmenter, q, c, retag, edited)
    }

    fn contiguous(&mut self, k: u32) -> Result<(OffloadHdr, &[u8]), usize> {
        self.stage.ensure();
        let bytes = queue::gather(&self.batch, k, &mut self.stage.bounce)?;
        Ok((OffloadHdr::default(), bytes))
    }
}

/// Frames staged from a queue.
impl Frames for StageScratch {
    fn to_ring(
        &mut self,
        order: &[u32],
        drp: &RingPort,
        q: usize,
        c: &CounterSet,
        retag: Option<Retag<'_>>,
    ) {
        ring::put_staged(self, order, drp, q, c, retag);
    }

    fn to_queue<Q: FrameQueue + ?Sized>(
        &mut self,
        order: &[u32],
        q: &mut Q,
        c: &CounterSet,
        retag: Option<Retag<'_>>,
    ) -> Wake {
        let StageScratch {
            intake,
            segmenter,
            edited,
            ..
        } = self;
        let segmenter = segmenter.as_mut().expect("ensure() ran");
        let (arena, staged) = intake.parts_mut();
        let mut frames = StagedFrames { arena, staged };
        queue::push(&mut frames, order, segmenter, q, c, retag, edited)
    }

    fn contiguous(&mut self, k: u32) -> Result<(OffloadHdr, &[u8]), usize> {
        let f = *self.intake.frames().get(k as usize).ok_or(0usize)?;
        Ok((f.hdr, self.intake.bytes(&f)))
    }
}
