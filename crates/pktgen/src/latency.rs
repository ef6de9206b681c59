//! Round-trip times for ping: exact min/avg/max, and percentiles from a
//! preallocated sample array while the samples fit, else from a log-linear
//! histogram (relative error under 1/128). Recording never allocates.

/// Samples kept for exact percentiles (2 MiB).
pub const MAX_SAMPLES: usize = 1 << 18;

/// Linear buckets below this value; then each power of two is split in
/// `HALF` buckets.
const SUB: u64 = 128;
const HALF: u64 = SUB / 2;
const SUB_BITS: u32 = 7;
/// Buckets covering every u64.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * HALF) as usize;

/// Bucket index of a value.
#[inline]
fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let s = e - (SUB_BITS - 1); // v >> s is in [HALF, SUB)
    (SUB + u64::from(s - 1) * HALF + ((v >> s) - HALF)) as usize
}

/// The smallest value and the width of bucket `i`.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let s = (i - SUB) / HALF + 1;
    let m = (i - SUB) % HALF + HALF;
    (m << s, 1 << s)
}

/// RTT statistics.
#[derive(Clone, Debug)]
pub struct RttStats {
    samples: Vec<u64>,
    sorted: bool,
    hist: Vec<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

/// A summary of the recorded samples (all zero when there are none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttSummary {
    /// Samples.
    pub count: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Mean, rounded down.
    pub avg_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl Default for RttStats {
    fn default() -> Self {
        Self::with_capacity(MAX_SAMPLES)
    }
}

impl RttStats {
    /// Keeps up to `cap` samples for exact percentiles.
    pub fn with_capacity(cap: usize) -> RttStats {
        RttStats {
            samples: Vec::with_capacity(cap),
            sorted: true,
            hist: vec![0; BUCKETS],
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Records one sample.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(ns); // within capacity: no allocation
            self.sorted = false;
        }
        self.hist[bucket(ns)] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `p`-th percentile (0 < p <= 100), nearest rank: the smallest
    /// sample with at least p% of the samples at or below it. Exact while
    /// every sample was kept; else the middle of its histogram bucket,
    /// clamped to [min, max]. 0 when empty.
    pub fn percentile(&mut self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        // The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
        let rank = ((p / 100.0) * self.count as f64 - 1e-9)
            .ceil()
            .clamp(1.0, self.count as f64) as u64;
        if self.count as usize == self.samples.len() {
            if !self.sorted {
                self.samples.sort_unstable();
                self.sorted = true;
            }
            return self.samples[rank as usize - 1];
        }
        let mut seen = 0u64;
        for (i, &n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (lo, w) = bucket_range(i);
                return (lo + (w - 1) / 2).clamp(self.min_ns, self.max_ns);
            }
        }
        self.max_ns
    }

    /// Everything at once.
    pub fn summary(&mut self) -> RttSummary {
        if self.count == 0 {
            return RttSummary::default();
        }
        RttSummary {
            count: self.count,
            min_ns: self.min_ns,
            avg_ns: (self.sum_ns / u128::from(self.count)) as u64,
            p50_ns: self.percentile(50.0),
            p99_ns: self.percentile(99.0),
            p999_ns: self.percentile(99.9),
            max_ns: self.max_ns,
        }
    }
}

/// Min/avg/max over one report interval.
#[derive(Clone, Copy, Debug)]
pub struct IntervalRtt {
    /// Samples.
    pub count: u64,
    /// Sum.
    pub sum_ns: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl Default for IntervalRtt {
    fn default() -> Self {
        IntervalRtt {
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }
}

impl IntervalRtt {
    /// Records one sample.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.count += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev_end = 0u64;
        for i in 0..BUCKETS {
            let (lo, w) = bucket_range(i);
            assert_eq!(lo, prev_end, "bucket {i}");
            assert_eq!(bucket(lo), i);
            assert_eq!(bucket(lo + (w - 1)), i);
            if lo >= SUB {
                assert!(w * 64 <= lo, "relative width of bucket {i} under 1/64");
            }
            prev_end = lo.wrapping_add(w);
        }
        assert_eq!(prev_end, 0, "the last bucket ends at 2^64");
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn exact_percentiles_nearest_rank() {
        let mut s = RttStats::with_capacity(1000);
        for v in (1..=1000u64).rev() {
            s.record(v * 10);
        }
        let r = s.summary();
        assert_eq!(r.count, 1000);
        assert_eq!(r.min_ns, 10);
        assert_eq!(r.max_ns, 10_000);
        assert_eq!(r.avg_ns, 5005);
        assert_eq!(r.p50_ns, 5000);
        assert_eq!(r.p99_ns, 9900);
        assert_eq!(r.p999_ns, 9990);
        assert_eq!(s.percentile(100.0), 10_000);
        assert_eq!(s.percentile(0.0001), 10);
    }

    #[test]
    fn histogram_percentiles_when_samples_overflow() {
        let mut s = RttStats::with_capacity(10);
        for v in 1..=100_000u64 {
            s.record(v);
        }
        let r = s.summary();
        let close = |got: u64, want: u64| got.abs_diff(want) * 100 <= want;
        assert!(close(r.p50_ns, 50_000), "p50 {}", r.p50_ns);
        assert!(close(r.p99_ns, 99_000), "p99 {}", r.p99_ns);
        assert!(close(r.p999_ns, 99_900), "p999 {}", r.p999_ns);
        assert_eq!(r.min_ns, 1);
        assert_eq!(r.max_ns, 100_000);
        assert_eq!(r.avg_ns, 50_000);
        // A single repeated value comes back exactly (clamped to min/max).
        let mut one = RttStats::with_capacity(0);
        for _ in 0..5 {
            one.record(123_456);
        }
        assert_eq!(one.summary().p99_ns, 123_456);
    }

    #[test]
    fn empty_and_interval() {
        assert_eq!(RttStats::with_capacity(4).summary(), RttSummary::default());
        let mut i = IntervalRtt::default();
        assert_eq!(i.count, 0);
        i.record(100);
        i.record(300);
        assert_eq!((i.count, i.sum_ns, i.min_ns, i.max_ns), (2, 400, 100, 300));
    }
}
