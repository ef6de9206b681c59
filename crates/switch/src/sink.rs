//! Where a batch's frames go: the ring sink copies them into a ring port's
//! RX ring, the queue sink pushes them into a frame queue. Each sink is one
//! loop, fed by whatever source the frames came from; [`Frames`] is what
//! the engine hands them, the same for every source.

pub(crate) mod queue;
pub(crate) mod ring;

use ringswitch_control::PortVlan;
use ringswitch_frame::{FrameQueue, OffloadHdr, Wake};

use crate::batch::{RingBatch, StageScratch};
use crate::port::{Counters, RingPort};
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
        c: &Counters,
        retag: Option<Retag<'_>>,
    );

    /// Delivers frames `order` into `q` (locked by the caller for this call
    /// only), counting on `c`, their tags edited as `retag` says. Returns
    /// the wake-up to send once the lock is released.
    fn to_queue<Q: FrameQueue + ?Sized>(
        &mut self,
        order: &[u32],
        q: &mut Q,
        c: &Counters,
        retag: Option<Retag<'_>>,
    ) -> Wake;
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
    c: &Counters,
    retag: Option<Retag<'_>>,
) {
    if drp.link.is_up() {
        frames.to_ring(order, drp, src_q % drp.rx_rings(), c, retag);
    } else {
        Counters::add(&c.drop_link_down, order.len() as u64);
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
        c: &Counters,
        retag: Option<Retag<'_>>,
    ) {
        let edit = retag.map(|r| move |k| r.edit(k));
        ring::put_edited(&self.batch, order.iter().copied(), drp, q, c, false, edit);
    }

    fn to_queue<Q: FrameQueue + ?Sized>(
        &mut self,
        order: &[u32],
        q: &mut Q,
        c: &Counters,
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
}

/// Frames staged from a queue.
impl Frames for StageScratch {
    fn to_ring(
        &mut self,
        order: &[u32],
        drp: &RingPort,
        q: usize,
        c: &Counters,
        retag: Option<Retag<'_>>,
    ) {
        ring::put_staged(self, order, drp, q, c, retag);
    }

    fn to_queue<Q: FrameQueue + ?Sized>(
        &mut self,
        order: &[u32],
        q: &mut Q,
        c: &Counters,
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
}
