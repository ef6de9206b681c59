//! Where a queue's frames land when they are taken: one arena per batch,
//! owned by the caller (a switch worker), filled by the queue.
//!
//! It is one concrete type for every kind of queue, so that each queue's
//! copy loop is compiled for it: taking a frame costs no call through a
//! pointer (a callback per frame cost a VM source about a tenth of its
//! time; see the switch crate's `vm_cost` example).

use crate::hdr::OffloadHdr;

/// Bytes of a stage's arena.
pub const STAGE_BYTES: usize = 1 << 20;
/// Largest frame a queue hands over: a virtio chain's bound (64 KiB + 1
/// KiB, header included), more than a TAP's 64 KiB. Longer frames are
/// dropped and counted ([`Stage::long`]).
pub const FRAME_MAX: usize = 65 * 1024;
/// Shortest frame a queue hands over: an Ethernet header. Shorter frames
/// are dropped and counted ([`Stage::short`]).
pub const FRAME_MIN: usize = 14;

/// A frame in a stage's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staged {
    /// Offset of its first byte in the arena (a multiple of 64).
    pub off: u32,
    /// Its length in bytes.
    pub len: u32,
    /// The offload request it came with (unchecked: the queue's other side
    /// wrote it).
    pub hdr: OffloadHdr,
}

/// Frames taken in one batch, copied out of the queue (whose buffers go
/// back to the other side at once), each at a 64-byte boundary. A batch
/// stops while a frame of [`FRAME_MAX`] bytes still fits
/// ([`Stage::has_room`]), so a frame the queue hands over always fits.
#[derive(Default)]
pub struct Stage {
    arena: Vec<u8>,
    frames: Vec<Staged>,
    /// Bytes of the arena in use.
    used: usize,
    short: u64,
    long: u64,
}

impl Stage {
    /// A stage of [`STAGE_BYTES`] bytes for batches of up to `frames`
    /// frames (the only allocation: none per batch or frame).
    pub fn new(frames: usize) -> Stage {
        Stage::with_bytes(STAGE_BYTES, frames)
    }

    /// A stage of `bytes` bytes (tests make small ones: one of
    /// `FRAME_MAX + 1` bytes has room for one frame only).
    pub fn with_bytes(bytes: usize, frames: usize) -> Stage {
        Stage {
            arena: vec![0; bytes],
            frames: Vec::with_capacity(frames),
            ..Stage::default()
        }
    }

    /// Whether [`Stage::new`] made it (a default stage takes nothing).
    pub fn is_allocated(&self) -> bool {
        !self.arena.is_empty()
    }

    /// Empties it for the next batch.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.used = 0;
        self.short = 0;
        self.long = 0;
    }

    /// Whether one more frame of the largest size fits: a queue stops
    /// taking when it does not.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.arena.len() - self.used >= FRAME_MAX
    }

    /// Takes a frame of `len` bytes, which `copy` writes into the slice it
    /// is given (exactly `len` bytes). A frame shorter than [`FRAME_MIN`]
    /// or longer than [`FRAME_MAX`] is not copied but counted. Returns
    /// whether the stage has room for more ([`Stage::has_room`]).
    #[inline]
    pub fn put_with(&mut self, len: usize, hdr: OffloadHdr, copy: impl FnOnce(&mut [u8])) -> bool {
        if len < FRAME_MIN {
            self.short += 1;
        } else if len > FRAME_MAX {
            self.long += 1;
        } else if let (Some(dst), Ok(off)) = (
            self.arena.get_mut(self.used..self.used + len),
            u32::try_from(self.used),
        ) {
            copy(dst);
            self.frames.push(Staged {
                off,
                // At most FRAME_MAX.
                len: u32::try_from(len).unwrap_or(u32::MAX),
                hdr,
            });
            self.used += len.next_multiple_of(64);
        } else {
            // Not reached while the queue stops at `has_room` (and the
            // arena is under 4 GiB); counted all the same, as the frame was
            // taken.
            self.long += 1;
        }
        self.has_room()
    }

    /// Takes a frame held in contiguous memory (see [`Stage::put_with`]).
    #[inline]
    pub fn put(&mut self, frame: &[u8], hdr: OffloadHdr) -> bool {
        self.put_with(frame.len(), hdr, |dst| dst.copy_from_slice(frame))
    }

    /// The frames taken, in order.
    pub fn frames(&self) -> &[Staged] {
        &self.frames
    }

    /// The bytes of frame `f` (one of [`Stage::frames`]).
    #[inline]
    pub fn bytes(&self, f: &Staged) -> &[u8] {
        &self.arena[f.off as usize..(f.off + f.len) as usize]
    }

    /// The arena and the frames, to change frames in place (completing a
    /// checksum, and marking its header so).
    pub fn parts_mut(&mut self) -> (&mut [u8], &mut [Staged]) {
        (&mut self.arena, &mut self.frames)
    }

    /// Keeps only the frames for which `keep(bytes, frame)` is true, in
    /// order (the others' bytes stay in the arena, unused).
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &Staged) -> bool) {
        let arena = &self.arena;
        self.frames
            .retain(|f| keep(&arena[f.off as usize..(f.off + f.len) as usize], f));
    }

    /// Each frame's bytes and offload header, copied (allocates: for tests
    /// and tools, never the data path).
    pub fn to_vec(&self) -> Vec<(Vec<u8>, OffloadHdr)> {
        self.frames
            .iter()
            .map(|f| (self.bytes(f).to_vec(), f.hdr))
            .collect()
    }

    /// Frames dropped as shorter than [`FRAME_MIN`] since the last clear.
    pub fn short(&self) -> u64 {
        self.short
    }

    /// Frames dropped as longer than [`FRAME_MAX`] (or than the arena's
    /// room) since the last clear.
    pub fn long(&self) -> u64 {
        self.long
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_land_aligned_in_order_and_odd_ones_are_counted() {
        let mut s = Stage::new(8);
        assert!(s.put(&[1u8; 60], OffloadHdr::default()));
        assert!(s.put(&[2u8; 13], OffloadHdr::default()));
        assert!(s.put(&vec![3u8; FRAME_MAX + 1], OffloadHdr::default()));
        assert!(s.put(&[4u8; 100], OffloadHdr::default()));
        let f = s.frames().to_vec();
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].off, f[0].len, f[1].off, f[1].len), (0, 60, 64, 100));
        assert_eq!(s.bytes(&f[1]), &[4u8; 100][..]);
        assert_eq!((s.short(), s.long()), (1, 1));
        s.retain(|b, _| b[0] == 4);
        assert_eq!(s.frames().len(), 1);
        s.clear();
        assert_eq!((s.frames().len(), s.short(), s.long()), (0, 0, 0));
    }

    #[test]
    fn a_stage_says_when_the_largest_frame_no_longer_fits() {
        let mut s = Stage::new(64);
        let mut n = 0;
        while s.put(&vec![0u8; FRAME_MAX], OffloadHdr::default()) {
            n += 1;
        }
        // Every frame taken fitted, and the last one left too little room.
        assert_eq!(s.frames().len(), n + 1);
        assert_eq!(s.long(), 0);
        assert!(!s.has_room());
        // A stage of FRAME_MAX + 1 bytes has room for one frame.
        let mut one = Stage::with_bytes(FRAME_MAX + 1, 1);
        assert!(!one.put(&[5u8; 60], OffloadHdr::default()));
        assert_eq!(one.to_vec(), vec![(vec![5u8; 60], OffloadHdr::default())]);
        // A default stage takes nothing and asks for no more.
        let mut d = Stage::default();
        assert!(!d.is_allocated());
        assert!(!d.put(&[0u8; 60], OffloadHdr::default()));
        assert_eq!(d.long(), 1);
    }
}
