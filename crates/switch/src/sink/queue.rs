//! The queue sink: frames pushed into any [`FrameQueue`] (a VM's queue
//! pair, a NIC's or a TAP's queue) under its lock, with their offloads
//! passed through where the queue takes them and done in software where
//! not, and one flush per batch; the wake-up the flush asks for (a guest's
//! interrupt) is sent by the caller once the lock is released.

use ringswitch_frame::{FrameQueue, OffloadHdr, PushError, Staged, Wake, FRAME_MAX, F_DATA_VALID};
use ringswitch_offload::{self as offload, Action, Segmenter};

use crate::batch::conv::u32_of;
use crate::batch::RingBatch;
use crate::port::CounterSet;
use crate::sink::Retag;
use crate::vlan::Edit;

/// The header of a frame whose checksum is known good.
pub(crate) fn checked_hdr() -> OffloadHdr {
    OffloadHdr {
        flags: F_DATA_VALID,
        ..OffloadHdr::default()
    }
}

/// What a destination queue said to one frame.
enum Outcome {
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
struct Tally {
    pkts: u64,
    bytes: u64,
    full: u64,
    down: u64,
    long: u64,
    /// Outcomes beyond one per frame, from software segmentation.
    added: u64,
    /// The queue filled up: the rest of the batch is dropped, so what
    /// arrives is a prefix.
    stopped: bool,
}

impl Tally {
    /// Offers one frame of `len` bytes to `push`, unless an earlier frame
    /// found the destination full or down; false once it cannot take more.
    #[inline]
    fn push(&mut self, len: usize, push: impl FnOnce() -> Outcome) -> bool {
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

    fn count(&self, c: &CounterSet) {
        CounterSet::add(&c.rx_packets, self.pkts);
        CounterSet::add(&c.rx_bytes, self.bytes);
        CounterSet::add(&c.drop_rx_full, self.full);
        CounterSet::add(&c.drop_link_down, self.down);
        CounterSet::add(&c.drop_long, self.long);
        CounterSet::add(&c.rx_segments_added, self.added);
    }
}

/// Pushes one frame into `q`, its tag edited into `edited` first unless
/// the edit is [`Edit::Keep`] (a frame that does not fit there with its
/// tag is too long).
#[inline(always)]
fn push_one<Q: FrameQueue + ?Sized>(
    q: &mut Q,
    oh: &OffloadHdr,
    frame: &[u8],
    edit: Edit,
    edited: &mut [u8],
) -> Outcome {
    if edit == Edit::Keep {
        return outcome(q.push(oh, frame));
    }
    match edit.apply(frame, edited) {
        Some(n) => outcome(q.push(&edit.offload(*oh), &edited[..n])),
        None => Outcome::TooLong,
    }
}

fn outcome(r: Result<(), PushError>) -> Outcome {
    match r {
        Ok(()) => Outcome::Taken,
        Err(PushError::Full) => Outcome::Full,
        Err(PushError::Down) => Outcome::Down,
        Err(PushError::TooLong) => Outcome::TooLong,
    }
}

/// Frames the queue sink pushes, by index, each as one contiguous run of
/// bytes with its offload header.
pub(crate) trait QueueFrames {
    /// Frame `k`: its offload header and its bytes, which the sink may
    /// change (completing a checksum, after which it marks the header so);
    /// or, for a frame too long to be made contiguous, its length.
    fn frame(&mut self, k: u32) -> Result<(&mut OffloadHdr, &mut [u8]), usize>;
}

/// Staged frames: in the arena, with the offload header they came with.
pub(crate) struct StagedFrames<'a> {
    pub(crate) arena: &'a mut [u8],
    pub(crate) staged: &'a mut [Staged],
}

impl QueueFrames for StagedFrames<'_> {
    #[inline]
    fn frame(&mut self, k: u32) -> Result<(&mut OffloadHdr, &mut [u8]), usize> {
        let st = &mut self.staged[k as usize];
        let frame = &mut self.arena[st.off as usize..(st.off + st.len) as usize];
        Ok((&mut st.hdr, frame))
    }
}

/// A ring source's packets, each gathered from its fragments into the
/// bounce buffer, with an empty offload header (a ring port's client is not
/// trusted to have its checksums right, so the receiver checks them).
pub(crate) struct Gathered<'a> {
    pub(crate) batch: RingBatch<'a>,
    pub(crate) bounce: &'a mut [u8],
    pub(crate) hdr: OffloadHdr,
}

impl QueueFrames for Gathered<'_> {
    /// Fragments after the first are re-read and re-validated: a sender
    /// that changed them since the batch was validated (a buffer index
    /// turned invalid, a length shrunk) only garbles its own frame, whose
    /// missing bytes are zeros, never what the bounce buffer held before.
    /// The frame is delivered and counted as such, as the ring sink does:
    /// no frame is lost without a count.
    #[inline]
    fn frame(&mut self, k: u32) -> Result<(&mut OffloadHdr, &mut [u8]), usize> {
        let bounce = gather(&self.batch, k, self.bounce)?;
        self.hdr = OffloadHdr::default();
        Ok((&mut self.hdr, bounce))
    }
}

/// Packet `k` of a ring source's batch gathered from its fragments into
/// `bounce` (see [`Gathered`]); or, too long for it, its length.
#[inline]
pub(crate) fn gather<'b>(
    batch: &RingBatch<'_>,
    k: u32,
    bounce: &'b mut [u8],
) -> Result<&'b mut [u8], usize> {
    let len = batch.ft[k as usize].len as usize;
    if len > FRAME_MAX {
        return Err(len);
    }
    let Some(bounce) = bounce.get_mut(..len) else {
        return Err(len);
    };
    let mut off = 0usize;
    for s in batch.frags(k) {
        if off == len {
            break;
        }
        let l = (s.len as usize).min(len - off);
        let part = &mut bounce[off..off + l];
        if !s.region.read_buf(s.buf_idx, 0, part) {
            part.fill(0);
        }
        off += l;
    }
    bounce[off..].fill(0);
    Ok(bounce)
}

/// Pushes frames `order` of `frames` into `q` (locked by the caller for
/// this call only): offloads passed through where the queue takes them,
/// done in software where not (a completed checksum is kept for later
/// destinations); one flush for the batch. Every frame or segment is
/// counted once on `c`. Returns the wake-up to send once the lock is
/// released.
pub(crate) fn push<F: QueueFrames, Q: FrameQueue + ?Sized>(
    frames: &mut F,
    order: &[u32],
    segmenter: &mut Segmenter,
    q: &mut Q,
    c: &CounterSet,
    retag: Option<Retag<'_>>,
    edited: &mut [u8],
) -> Wake {
    if !q.is_up() {
        CounterSet::add(&c.drop_link_down, order.len() as u64);
        return Wake::NONE;
    }
    let caps = q.caps();
    let mut t = Tally::default();
    for &k in order {
        if t.stopped {
            t.full += 1;
            continue;
        }
        let (hdr, frame) = match frames.frame(k) {
            Ok(f) => f,
            Err(len) => {
                t.push(len, || Outcome::TooLong);
                continue;
            }
        };
        let oh = *hdr;
        // Offloads are done on the frame as it came; its tag is edited as
        // it goes into the queue.
        let edit = retag.map_or(Edit::Keep, |r| r.edit(k));
        match offload::plan(&oh, caps) {
            Ok(Action::PassThrough) => {
                t.push(edit.len(u32_of(frame.len())) as usize, || {
                    push_one(q, &oh, frame, edit, edited)
                });
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
                *hdr = checked_hdr();
                t.push(edit.len(u32_of(frame.len())) as usize, || {
                    push_one(q, hdr, frame, edit, edited)
                });
            }
            Ok(Action::Segment) => {
                let h = checked_hdr();
                let mut n = 0u64;
                let r = segmenter.segment(frame, &oh, |seg| {
                    n += 1;
                    t.push(edit.len(u32_of(seg.len())) as usize, || {
                        push_one(q, &h, seg, edit, &mut *edited)
                    })
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
    // Counted before the frames become visible: what anyone sees has been
    // counted.
    t.count(c);
    q.flush()
}
