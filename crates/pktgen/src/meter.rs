//! Counters for the per-interval lines and the final summary (their text
//! is [`crate::print`]'s).
//!
//! An event is one sync that moved packets; `avg_batch` is packets per
//! event; `min_space` is the least ring space seen at the start of a batch
//! in the interval (free slots for senders, waiting packets for receivers).

/// Per-second rate of `n` over `ns` nanoseconds (0 over no time).
pub fn per_second(n: f64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n * 1e9 / ns as f64
    }
}

/// One report interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// Packets.
    pub pkts: u64,
    /// Bytes.
    pub bytes: u64,
    /// Syncs that moved packets.
    pub events: u64,
    /// Length of the interval.
    pub ns: u64,
    /// Least space seen (0 when no event happened).
    pub min_space: u32,
}

/// Running counters.
#[derive(Clone, Debug)]
pub struct Meter {
    interval_ns: u64,
    next_ns: u64,
    mark_ns: u64,
    /// Packets in total.
    pub pkts: u64,
    /// Bytes in total.
    pub bytes: u64,
    /// Events in total.
    pub events: u64,
    mark_pkts: u64,
    mark_bytes: u64,
    mark_events: u64,
    min_space: u32,
}

impl Meter {
    /// Reports every `interval_ms` from `now_ns` on (0: never).
    pub fn new(interval_ms: u64, now_ns: u64) -> Meter {
        let interval_ns = interval_ms.saturating_mul(1_000_000);
        Meter {
            interval_ns,
            next_ns: if interval_ns == 0 {
                u64::MAX
            } else {
                now_ns.saturating_add(interval_ns)
            },
            mark_ns: now_ns,
            pkts: 0,
            bytes: 0,
            events: 0,
            mark_pkts: 0,
            mark_bytes: 0,
            mark_events: 0,
            min_space: u32::MAX,
        }
    }

    /// One sync moved `pkts` packets of `bytes` bytes; the ring had `space`.
    #[inline]
    pub fn record(&mut self, pkts: u32, bytes: u64, space: u32) {
        self.pkts += u64::from(pkts);
        self.bytes += bytes;
        self.events += 1;
        self.min_space = self.min_space.min(space);
    }

    /// Takes the running totals of several meters (the threads of a `-p`
    /// run) and the least space they saw since the last report, in place of
    /// recording batches; [`Meter::poll`] then reports their sum.
    pub fn absorb(&mut self, pkts: u64, bytes: u64, events: u64, min_space: u32) {
        self.pkts = pkts;
        self.bytes = bytes;
        self.events = events;
        self.min_space = self.min_space.min(min_space);
    }

    /// When the next line is due (`u64::MAX`: never).
    #[inline]
    pub fn next_report_ns(&self) -> u64 {
        self.next_ns
    }

    /// The interval since the last report, if a report is due at `now_ns`.
    #[inline]
    pub fn poll(&mut self, now_ns: u64) -> Option<Interval> {
        if now_ns < self.next_ns {
            return None;
        }
        let iv = Interval {
            pkts: self.pkts - self.mark_pkts,
            bytes: self.bytes - self.mark_bytes,
            events: self.events - self.mark_events,
            ns: now_ns.saturating_sub(self.mark_ns),
            min_space: if self.min_space == u32::MAX {
                0
            } else {
                self.min_space
            },
        };
        self.mark_ns = now_ns;
        self.mark_pkts = self.pkts;
        self.mark_bytes = self.bytes;
        self.mark_events = self.events;
        self.min_space = u32::MAX;
        // Skip intervals missed while blocked rather than reporting each.
        while self.next_ns <= now_ns {
            self.next_ns = self.next_ns.saturating_add(self.interval_ns);
        }
        Some(iv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_reports_each_interval_once() {
        let ms = 1_000_000;
        let mut m = Meter::new(1000, 0);
        assert_eq!(m.poll(999 * ms), None);
        m.record(512, 512 * 60, 1023);
        m.record(100, 6000, 400);
        let iv = m.poll(1000 * ms).unwrap();
        assert_eq!(
            iv,
            Interval {
                pkts: 612,
                bytes: 612 * 60,
                events: 2,
                ns: 1000 * ms,
                min_space: 400
            }
        );
        assert_eq!(m.poll(1500 * ms), None);
        // Blocked for 3.5 s: one line for the whole stretch, then back on the grid.
        let iv = m.poll(4500 * ms).unwrap();
        assert_eq!((iv.pkts, iv.ns, iv.min_space), (0, 3500 * ms, 0));
        assert_eq!(m.next_report_ns(), 5000 * ms);
        assert_eq!((m.pkts, m.events), (612, 2));
        let mut off = Meter::new(0, 0);
        assert_eq!(off.poll(u64::MAX - 1), None);
    }

    #[test]
    fn absorbed_totals_are_reported_like_recorded_ones() {
        let ms = 1_000_000;
        let mut m = Meter::new(100, 0);
        m.absorb(1000, 60_000, 2, 300);
        m.absorb(1500, 90_000, 3, u32::MAX);
        let iv = m.poll(100 * ms).unwrap();
        assert_eq!(
            (iv.pkts, iv.bytes, iv.events, iv.min_space),
            (1500, 90_000, 3, 300)
        );
        m.absorb(1600, 96_000, 4, u32::MAX);
        let iv = m.poll(200 * ms).unwrap();
        assert_eq!((iv.pkts, iv.events, iv.min_space), (100, 1, 0));
    }
}
