//! Where a batch's frames go: the ring sink copies them into a ring port's
//! RX ring, the queue sink pushes them into a frame queue. Each sink is one
//! loop, fed by whatever source the frames came from; [`Frames`] is what
//! the engine hands them, the same for every source.

pub(crate) mod queue;
pub(crate) mod ring;

use ringswitch_frame::{FrameQueue, OffloadHdr, Wake};

use crate::batch::{RingBatch, StageScratch};
use crate::port::{Counters, RingPort};
use queue::{Gathered, StagedFrames};

/// A looked-up batch, as the sinks take it.
pub(crate) trait Frames {
    /// Delivers frames `order` into RX ring `q` of ring port `drp` (which
    /// is up), counting on `c`.
    fn to_ring(&mut self, order: &[u32], drp: &RingPort, q: usize, c: &Counters);

    /// Delivers frames `order` into `q` (locked by the caller for this call
    /// only), counting on `c`. Returns the wake-up to send once the lock is
    /// released.
    fn to_queue<Q: FrameQueue + ?Sized>(&mut self, order: &[u32], q: &mut Q, c: &Counters) -> Wake;
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
) {
    if drp.link.is_up() {
        frames.to_ring(order, drp, src_q % drp.rx_rings(), c);
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
    fn to_ring(&mut self, order: &[u32], drp: &RingPort, q: usize, c: &Counters) {
        ring::put(&self.batch, order.iter().copied(), drp, q, c, false);
    }

    fn to_queue<Q: FrameQueue + ?Sized>(&mut self, order: &[u32], q: &mut Q, c: &Counters) -> Wake {
        self.stage.ensure();
        let StageScratch {
            bounce, segmenter, ..
        } = &mut *self.stage;
        let segmenter = segmenter.as_mut().expect("ensure() ran");
        let mut frames = Gathered {
            batch: self.batch,
            bounce,
            hdr: OffloadHdr::default(),
        };
        queue::push(&mut frames, order, segmenter, q, c)
    }
}

/// Frames staged from a queue.
impl Frames for StageScratch {
    fn to_ring(&mut self, order: &[u32], drp: &RingPort, q: usize, c: &Counters) {
        ring::put_staged(self, order, drp, q, c);
    }

    fn to_queue<Q: FrameQueue + ?Sized>(&mut self, order: &[u32], q: &mut Q, c: &Counters) -> Wake {
        let StageScratch {
            intake, segmenter, ..
        } = self;
        let segmenter = segmenter.as_mut().expect("ensure() ran");
        let (arena, staged) = intake.parts_mut();
        let mut frames = StagedFrames { arena, staged };
        queue::push(&mut frames, order, segmenter, q, c)
    }
}
