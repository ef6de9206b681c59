//! Counters for the per-interval lines and the final summary, and their
//! text in netmap pkt-gen's format:
//!
//! `1.234 Mpps (1.240 Mpkts 594.2 Mbps in 1000123 usec) 511.93 avg_batch 0 min_space`
//!
//! An event is one sync that moved packets; `avg_batch` is packets per
//! event; `min_space` is the least ring space seen at the start of a batch
//! in the interval (free slots for senders, waiting packets for receivers).

use std::fmt::Write as _;

/// `v` scaled to a unit prefix: `(1.234, "M")` for 1 234 000.
pub fn norm(v: f64) -> (f64, &'static str) {
    const PREFIX: [&str; 5] = ["", "K", "M", "G", "T"];
    let mut v = v;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < PREFIX.len() {
        v /= 1000.0;
        i += 1;
    }
    (v, PREFIX[i])
}

/// `1.234 Mpps`-style text.
pub fn fmt_unit(v: f64, decimals: usize, unit: &str) -> String {
    let (x, p) = norm(v);
    format!("{x:.decimals$} {p}{unit}")
}

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

impl Interval {
    /// The report line.
    pub fn line(&self) -> String {
        let avg_batch = if self.events == 0 {
            0.0
        } else {
            self.pkts as f64 / self.events as f64
        };
        format!(
            "{} ({} {} in {} usec) {:.2} avg_batch {} min_space",
            fmt_unit(per_second(self.pkts as f64, self.ns), 3, "pps"),
            fmt_unit(self.pkts as f64, 3, "pkts"),
            fmt_unit(per_second(self.bytes as f64 * 8.0, self.ns), 1, "bps"),
            self.ns / 1000,
            avg_batch,
            self.min_space,
        )
    }
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

/// The closing lines: `Sent|Received N packets, ...` and `Speed: ...`.
pub fn summary(verb: &str, pkts: u64, bytes: u64, events: u64, ns: u64) -> String {
    let mut s = String::new();
    let each = bytes.checked_div(pkts).unwrap_or(0);
    let _ = writeln!(
        s,
        "{verb} {pkts} packets, {bytes} bytes, {events} events, {each} bytes each in {:.3} seconds.",
        ns as f64 / 1e9
    );
    let avg_batch = if events == 0 {
        0.0
    } else {
        pkts as f64 / events as f64
    };
    let _ = write!(
        s,
        "Speed: {} Bandwidth: {}. Average batch: {avg_batch:.2} pkts",
        fmt_unit(per_second(pkts as f64, ns), 2, "pps"),
        fmt_unit(per_second(bytes as f64 * 8.0, ns), 2, "bps"),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(fmt_unit(0.0, 3, "pps"), "0.000 pps");
        assert_eq!(fmt_unit(999.0, 3, "pps"), "999.000 pps");
        assert_eq!(fmt_unit(1234.0, 3, "pps"), "1.234 Kpps");
        assert_eq!(fmt_unit(594_200_000.0, 1, "bps"), "594.2 Mbps");
        assert_eq!(fmt_unit(12.34e9, 2, "pps"), "12.34 Gpps");
        assert_eq!(fmt_unit(5e15, 1, "bps"), "5000.0 Tbps");
    }

    #[test]
    fn interval_line_has_netmaps_shape() {
        let iv = Interval {
            pkts: 1_240_000,
            bytes: 1_240_000 * 60,
            events: 2422,
            ns: 1_000_123_000,
            min_space: 0,
        };
        assert_eq!(
            iv.line(),
            "1.240 Mpps (1.240 Mpkts 595.1 Mbps in 1000123 usec) 511.97 avg_batch 0 min_space"
        );
        let idle = Interval {
            ns: 1_000_000_000,
            ..Interval::default()
        };
        assert_eq!(
            idle.line(),
            "0.000 pps (0.000 pkts 0.0 bps in 1000000 usec) 0.00 avg_batch 0 min_space"
        );
        assert_eq!(
            Interval::default().line(),
            "0.000 pps (0.000 pkts 0.0 bps in 0 usec) 0.00 avg_batch 0 min_space"
        );
    }

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

    #[test]
    fn summary_lines() {
        let s = summary("Sent", 1_000_000, 60_000_000, 1953, 81_037_000);
        assert_eq!(
            s,
            "Sent 1000000 packets, 60000000 bytes, 1953 events, 60 bytes each in 0.081 seconds.\n\
             Speed: 12.34 Mpps Bandwidth: 5.92 Gbps. Average batch: 512.03 pkts"
        );
        let s = summary("Received", 0, 0, 0, 0);
        assert!(
            s.starts_with("Received 0 packets, 0 bytes, 0 events, 0 bytes each in 0.000 seconds.")
        );
        assert!(s.ends_with("Speed: 0.00 pps Bandwidth: 0.00 bps. Average batch: 0.00 pkts"));
    }
}
