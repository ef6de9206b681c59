//! What one batch is made of, and the per-worker memory that holds it: the
//! frame table of a ring source (one entry per packet, pointing at its TX
//! slots, and the walk over a packet's fragments), the stage frames taken
//! from queues are copied onto (a `ringswitch_frame::Stage`) with the room
//! software offloads work in, and the conversions every stage uses. The
//! leaf of the data path: it imports nothing else of the crate.

use ringswitch_frame::Stage;
use ringswitch_offload::{self as offload, Segmenter};
use ringswitch_ring::{arith, Region, RingRef};

/// Largest batch a worker takes from one ring at a time.
pub const MAX_BATCH: u32 = 2048;
/// Default batch.
pub const DEFAULT_BATCH: u32 = 512;
/// Shortest frame forwarded: an Ethernet header (the same bound a queue's
/// stage keeps).
pub const MIN_FRAME: u32 = 14;
const _: () = assert!(MIN_FRAME as usize == ringswitch_frame::FRAME_MIN);

/// Conversions of the data path, none of which can wrap: lengths, counts
/// and indexes are bounded by the geometry or the batch, and a conversion
/// that could lose bits is checked (and saturates, which the bounds make
/// unreachable) instead of cast.
pub(crate) mod conv {
    use ringswitch_ring::layout::MAX_FRAGS;

    /// A slot's length: at most a buffer's size, which
    /// `Geometry::validate` keeps at or below `MAX_BUF_SIZE` (< 2^16).
    #[inline(always)]
    pub(crate) fn slot_len(len: u32) -> u16 {
        u16::try_from(len).unwrap_or(u16::MAX)
    }

    /// The fragment count a delivered slot carries in bits 8 to 15 of its
    /// flags: at most `MAX_FRAGS`.
    #[inline(always)]
    pub(crate) fn frag_flags(nfrags: u32) -> u16 {
        u16::try_from(nfrags.min(MAX_FRAGS)).unwrap_or_default() << 8
    }

    /// A count, offset or length bounded by the batch, the stage
    /// or a frame (all far below 2^32).
    #[inline(always)]
    pub(crate) fn u32_of(x: usize) -> u32 {
        u32::try_from(x).unwrap_or(u32::MAX)
    }

    /// Word 0 of a slot split into buffer index, length and flags
    /// (little-endian fields, as `NetmapSlot`).
    #[inline(always)]
    pub(crate) fn split_word0(w0: u64) -> (u32, u16, u16) {
        let [b0, b1, b2, b3, l0, l1, f0, f1] = w0.to_le_bytes();
        (
            u32::from_le_bytes([b0, b1, b2, b3]),
            u16::from_le_bytes([l0, l1]),
            u16::from_le_bytes([f0, f1]),
        )
    }
}

/// What one call to `Switch::forward` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchResult {
    /// Slots consumed from the source ring.
    pub slots: u32,
    /// Packets delivered to at least one port or counted as dropped.
    pub packets: u32,
}

/// A packet of a ring source's batch: an entry of the frame table.
#[derive(Clone, Copy, Default)]
pub(crate) struct Ft {
    pub(crate) slot: u32,
    pub(crate) nfrags: u32,
    pub(crate) len: u32,
    /// First fragment as validated.
    pub(crate) buf_idx: u32,
    pub(crate) first_len: u32,
}

/// A ring source's batch: the frame table and the TX ring (in its region)
/// its entries point into.
#[derive(Clone, Copy)]
pub(crate) struct RingBatch<'a> {
    pub(crate) ft: &'a [Ft],
    pub(crate) region: &'a Region,
    pub(crate) ring: RingRef<'a>,
}

impl<'a> RingBatch<'a> {
    /// The fragments of packet `k`: the first as validated, the others
    /// re-read from the ring (so not trusted: a sender changing them since
    /// only garbles its own packet), each length capped at a buffer.
    #[inline(always)]
    pub(crate) fn frags(&self, k: u32) -> SlotFrags<'a> {
        let p = self.ft[k as usize];
        SlotFrags {
            region: self.region,
            ring: self.ring,
            first: p,
            slot: p.slot,
            f: 0,
        }
    }
}

/// Bytes in one buffer of a region: a fragment of a packet in a ring.
#[derive(Clone, Copy)]
pub(crate) struct SlotFrag<'a> {
    pub(crate) region: &'a Region,
    pub(crate) buf_idx: u32,
    /// At most a buffer's size.
    pub(crate) len: u32,
}

/// The fragments of one packet of a [`RingBatch`] (see
/// [`RingBatch::frags`]).
pub(crate) struct SlotFrags<'a> {
    region: &'a Region,
    ring: RingRef<'a>,
    first: Ft,
    slot: u32,
    f: u32,
}

impl<'a> Iterator for SlotFrags<'a> {
    type Item = SlotFrag<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<SlotFrag<'a>> {
        if self.f == self.first.nfrags {
            return None;
        }
        let (buf_idx, len) = if self.f == 0 {
            (self.first.buf_idx, self.first.first_len)
        } else {
            let s = self.ring.slot(self.slot);
            (s.buf_idx, u32::from(s.len))
        };
        self.f += 1;
        self.slot = arith::next(self.slot, self.ring.num_slots());
        Some(SlotFrag {
            region: self.region,
            buf_idx,
            len: len.min(self.region.buf_size()),
        })
    }
}

/// Contiguous space for a frame gathered from ring fragments, or for the
/// segments of one TSO frame (64 KiB of payload plus a header per segment).
const BOUNCE: usize = 160 * 1024;
/// Most segments one TSO frame may be cut into here (64 KiB at an MSS of 88
/// bytes; a smaller MSS is refused as malformed).
pub(crate) const SEGS_MAX: usize = 768;

/// Room past the longest frame for the tags header edits push (each of
/// an output's edits a tag at most).
pub(crate) const EDIT_ROOM: usize = 4 * 16;

/// Per-worker staging space, allocated the first time the worker meets a
/// VM or interface port (ring-only daemons never touch it): the stage a
/// queue's frames are taken onto, and the room software offloads work in.
#[derive(Default)]
pub(crate) struct StageScratch {
    /// Frames taken from a queue, with their offload requests.
    pub(crate) intake: Stage,
    pub(crate) bounce: Vec<u8>,
    /// Segments in `bounce`: (offset, length).
    pub(crate) segs: Vec<(u32, u32)>,
    pub(crate) segmenter: Option<Segmenter>,
    /// A frame with its VLAN tag edited, on its way into a queue.
    pub(crate) edited: Vec<u8>,
}

impl StageScratch {
    pub(crate) fn ensure(&mut self) {
        if !self.intake.is_allocated() {
            self.intake = Stage::new(MAX_BATCH as usize);
            self.bounce = vec![0; BOUNCE];
            // A frame as long as a queue takes, and the tags an output's
            // edits may push.
            self.edited = vec![0; ringswitch_frame::FRAME_MAX + EDIT_ROOM];
            self.segs.reserve(SEGS_MAX);
            self.segmenter = Some(Segmenter::new());
        }
    }

    /// Starts a batch.
    pub(crate) fn start(&mut self) {
        self.ensure();
        self.intake.clear();
    }

    /// Refuses, once for every destination, the frames on the stage whose
    /// offload request is unsound, checked on the copy (the source cannot
    /// change it any more): a bad header, a checksum field outside the
    /// frame, headers a GSO frame cannot be cut by, or more segments than
    /// [`SEGS_MAX`]. What passes cannot fail later for one destination and
    /// not another (but for segments overflowing the bounce buffer, counted
    /// as too long by that destination). Returns the frames refused and the
    /// bytes of those kept.
    pub(crate) fn check_offloads(&mut self) -> (u64, u64) {
        let (mut refused, mut bytes) = (0u64, 0u64);
        self.intake
            .retain(|frame, f| match offload::check(frame, &f.hdr) {
                Ok(segs) if segs <= SEGS_MAX => {
                    bytes += u64::from(f.len);
                    true
                }
                _ => {
                    refused += 1;
                    false
                }
            });
        (refused, bytes)
    }
}
