//! rxseq's bookkeeping: sequence numbers are 32-bit and wrap; the distance
//! from the expected one, taken as a signed 32-bit value, tells a jump
//! forward (frames missing) from a late frame.
//!
//! Each txseq sender thread (`-p`) numbers its own frames and puts its
//! index, the stream, next to the number; rxseq keeps one tracker per
//! stream ([`SeqStreams`]), so frames of two senders interleaved on one
//! ring (or polled from two rings by one thread) are not taken for
//! reordering. A stream's frames stay on one ring (a pipe maps TX ring i to
//! the peer's RX ring i, the switch maps a source ring to one destination
//! ring), so each receiving thread sees whole streams and the threads'
//! counts simply add up.

/// Counts gaps and reordered frames in a sequence stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqTracker {
    expected: Option<u32>,
    /// Sequence numbers skipped: the sum of the forward jumps.
    pub gaps: u64,
    /// Frames with a number lower than expected.
    pub reordered: u64,
    /// Frames in order.
    pub in_order: u64,
}

impl SeqTracker {
    /// Accounts one frame. The first frame seen sets the expectation, so a
    /// receiver started mid-stream reports no gap for what it missed.
    #[inline]
    pub fn observe(&mut self, seq: u32) {
        let Some(e) = self.expected else {
            self.expected = Some(seq.wrapping_add(1));
            self.in_order += 1;
            return;
        };
        let d = seq.wrapping_sub(e) as i32;
        if d == 0 {
            self.in_order += 1;
            self.expected = Some(seq.wrapping_add(1));
        } else if d > 0 {
            self.gaps += d as u64;
            self.in_order += 1;
            self.expected = Some(seq.wrapping_add(1));
        } else {
            self.reordered += 1;
        }
    }

    /// The number expected next, once a frame was seen.
    pub fn expected(&self) -> Option<u32> {
        self.expected
    }
}

/// Streams tracked: more than any port has rings (a thread per ring).
pub const MAX_STREAMS: usize = 64;

const _: () = assert!(ringswitch_ring::layout::MAX_RINGS as usize <= MAX_STREAMS);

/// One [`SeqTracker`] per stream, allocated once.
#[derive(Clone, Debug)]
pub struct SeqStreams {
    trackers: Vec<SeqTracker>,
    /// Frames that named a stream beyond [`MAX_STREAMS`] (not counted
    /// anywhere else).
    pub unknown: u64,
}

impl Default for SeqStreams {
    fn default() -> Self {
        SeqStreams {
            trackers: vec![SeqTracker::default(); MAX_STREAMS],
            unknown: 0,
        }
    }
}

impl SeqStreams {
    /// Accounts one frame of `stream`.
    #[inline]
    pub fn observe(&mut self, stream: u16, seq: u32) {
        match self.trackers.get_mut(usize::from(stream)) {
            Some(t) => t.observe(seq),
            None => self.unknown += 1,
        }
    }

    /// Gaps summed over the streams.
    pub fn gaps(&self) -> u64 {
        self.trackers.iter().map(|t| t.gaps).sum()
    }

    /// Reordered frames summed over the streams.
    pub fn reordered(&self) -> u64 {
        self.trackers.iter().map(|t| t.reordered).sum()
    }

    /// Streams that carried at least one frame.
    pub fn active(&self) -> usize {
        self.trackers
            .iter()
            .filter(|t| t.expected().is_some())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_tracked_apart() {
        let mut s = SeqStreams::default();
        // Two senders interleaved, each in order: no gap, no reordering.
        for q in 0..1000u32 {
            s.observe(0, q);
            s.observe(1, q + 7);
            if q % 3 == 0 {
                s.observe(2, q / 3);
            }
        }
        assert_eq!(
            (s.gaps(), s.reordered(), s.active(), s.unknown),
            (0, 0, 3, 0)
        );
        // What one tracker would have made of the same frames.
        let mut one = SeqTracker::default();
        for q in 0..1000u32 {
            one.observe(q);
            one.observe(q + 7);
        }
        assert!(one.gaps + one.reordered > 0);
        // Losses and lateness are counted per stream and added up.
        s.observe(0, 1005);
        s.observe(1, 1000);
        s.observe(1, 3);
        assert_eq!((s.gaps(), s.reordered()), (5, 2));
        s.observe(MAX_STREAMS as u16, 1);
        s.observe(u16::MAX, 1);
        assert_eq!((s.unknown, s.active()), (2, 3));
    }

    fn run(seqs: &[u32]) -> SeqTracker {
        let mut t = SeqTracker::default();
        for &s in seqs {
            t.observe(s);
        }
        t
    }

    #[test]
    fn in_order_stream_has_no_gaps() {
        let t = run(&(0..1000).collect::<Vec<_>>());
        assert_eq!((t.gaps, t.reordered, t.in_order), (0, 0, 1000));
        assert_eq!(t.expected(), Some(1000));
    }

    #[test]
    fn jumps_count_the_missing_numbers() {
        let t = run(&[5, 6, 9, 10, 20]);
        assert_eq!((t.gaps, t.reordered), (2 + 9, 0));
    }

    #[test]
    fn late_frames_are_reordered_not_gaps() {
        let t = run(&[0, 2, 1, 3, 0]);
        assert_eq!((t.gaps, t.reordered), (1, 2));
        assert_eq!(t.expected(), Some(4));
    }

    #[test]
    fn wraps_around() {
        let t = run(&[u32::MAX - 1, u32::MAX, 0, 1, 3]);
        assert_eq!((t.gaps, t.reordered), (1, 0));
        let t = run(&[1, u32::MAX]);
        assert_eq!(
            (t.gaps, t.reordered),
            (0, 1),
            "a small step back across zero is late"
        );
    }
}
