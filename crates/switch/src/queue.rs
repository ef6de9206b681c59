//! Ports made of frame queues (a VM's virtio-net queue pairs, the queues of
//! a NIC or a TAP) as sources and destinations, through
//! [`FrameQueue`]: the same code for every kind.
//!
//! From a queue: the worker takes a batch under the queue's lock, copying
//! each frame into the staging arena (the other side gets its buffers back
//! at once); [`crate::staged`] does the rest once the lock is released.
//! Into a queue: frames are pushed under its lock and flushed once per
//! batch; the wake-up the flush asks for (a guest's interrupt) is sent by
//! the caller after the lock is released.

use ringswitch_frame::{FrameQueue, OffloadHdr, Taken, Wake};

use crate::batch::conv::u32_of;
use crate::batch::{RingBatch, StageScratch, Staging, FRAME_MAX, MIN_FRAME};
use crate::engine::{BatchResult, Scratch, Switch};
use crate::port::{Counters, SwitchPort};
use crate::sink::queue::{push, Gathered, StagedFrames};
use crate::staged::forward_staged;

/// One batch taken from a queue into the staging arena, not yet forwarded.
#[must_use = "a batch taken is forwarded with forward_taken"]
pub(crate) struct Took {
    taken: Taken,
    short: u64,
    long: u64,
    malformed: u64,
    bytes: u64,
}

/// Takes up to `max` frames from `q` (locked by the caller for this call
/// only) into the staging arena: frames shorter than an Ethernet header or
/// longer than the arena takes are dropped, and a frame whose offload
/// request is unsound is refused, each counted when the batch is forwarded.
pub(crate) fn take<Q: FrameQueue + ?Sized>(
    q: &mut Q,
    max: usize,
    stage: &mut StageScratch,
) -> Took {
    stage.start();
    let (mut short, mut long, mut malformed, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let taken = q.take_batch(max, &mut |f, h| {
        let len = f.len();
        if len < MIN_FRAME as usize {
            short += 1;
        } else if len > FRAME_MAX {
            long += 1;
        } else {
            // The batch stops while the arena still has room for a frame of
            // FRAME_MAX bytes.
            match stage.tail().get_mut(..len) {
                Some(dst) => {
                    f.copy_to(dst);
                    match stage.commit(*h, len) {
                        Staging::Staged => bytes += len as u64,
                        Staging::Malformed => malformed += 1,
                        Staging::NoRoom => long += 1,
                    }
                }
                // Not reached (see above); the frame is taken all the same,
                // so it is counted.
                None => long += 1,
            }
        }
        stage.has_room()
    });
    Took {
        taken,
        short,
        long,
        malformed,
        bytes,
    }
}

/// Forwards a batch [`take`]n from source queue `src_q` of `src`, once the
/// queue's lock is released: the queue's wake-up (a guest's TX completion
/// interrupt) first, then lookup and delivery, then the source's drops.
pub(crate) fn forward_taken(
    sw: &Switch,
    src: &SwitchPort,
    src_q: usize,
    took: Took,
    sc: &mut Scratch,
) -> BatchResult {
    let Took {
        taken,
        short,
        long,
        malformed,
        bytes,
    } = took;
    taken.wake.send();
    if taken.frames == 0 {
        return BatchResult::default();
    }
    if !sc.stage.staged.is_empty() {
        forward_staged(sw, src, src_q, bytes, sc);
    }
    let c = &src.counters;
    Counters::add(&c.drop_short, short);
    Counters::add(&c.drop_long, long);
    Counters::add(&c.drop_malformed, taken.malformed + malformed);
    BatchResult {
        slots: u32_of(taken.frames),
        packets: u32_of(taken.frames),
    }
}

/// Delivers staged frames `order` into `q` (locked by the caller for this
/// call only). Returns the wake-up to send once the lock is released.
pub(crate) fn deliver_staged<Q: FrameQueue + ?Sized>(
    st: &mut StageScratch,
    order: &[u32],
    q: &mut Q,
    c: &Counters,
) -> Wake {
    let StageScratch {
        arena,
        staged,
        segmenter,
        ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    let mut frames = StagedFrames { arena, staged };
    push(&mut frames, order, segmenter, q, c)
}

/// Delivers packets `order` of a ring port's batch into `q` (locked by the
/// caller for this call only), each gathered into the bounce buffer.
/// Returns the wake-up to send once the lock is released.
pub(crate) fn deliver_ring<Q: FrameQueue + ?Sized>(
    st: &mut StageScratch,
    batch: RingBatch<'_>,
    order: &[u32],
    q: &mut Q,
    c: &Counters,
) -> Wake {
    st.ensure();
    let StageScratch {
        bounce, segmenter, ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    let mut frames = Gathered {
        batch,
        bounce,
        hdr: OffloadHdr::default(),
    };
    push(&mut frames, order, segmenter, q, c)
}
