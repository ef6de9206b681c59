//! rxseq's bookkeeping: sequence numbers are 32-bit and wrap; the distance
//! from the expected one, taken as a signed 32-bit value, tells a jump
//! forward (frames missing) from a late frame.

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

#[cfg(test)]
mod tests {
    use super::*;

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
