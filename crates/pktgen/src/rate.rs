//! The `-R` rate limiter: a token bucket in integer arithmetic, driven by
//! the caller's clock so that it can be tested without sleeping.
//!
//! Credit is kept in packet-nanoseconds (one packet = 1e9 units), so a rate
//! in packets per second adds exactly `rate` units per elapsed nanosecond and
//! nothing is lost to rounding. The bucket holds at most `burst` packets:
//! after an idle period the sender may catch up by one burst, not more.

const UNIT: u128 = 1_000_000_000;

/// A token bucket for packets.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate_pps: u64,
    cap: u128,
    credit: u128,
    last_ns: u64,
}

impl TokenBucket {
    /// A bucket that refills at `rate_pps` (at least 1) and holds at most
    /// `burst_pkts` (at least 1) packets; it starts with one packet so the
    /// first send is immediate.
    pub fn new(rate_pps: u64, burst_pkts: u32, now_ns: u64) -> TokenBucket {
        let cap = u128::from(burst_pkts.max(1)) * UNIT;
        TokenBucket {
            rate_pps: rate_pps.max(1),
            cap,
            credit: UNIT,
            last_ns: now_ns,
        }
    }

    /// Adds the credit earned since the last refill.
    #[inline]
    pub fn refill(&mut self, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        self.credit = (self.credit + u128::from(dt) * u128::from(self.rate_pps)).min(self.cap);
    }

    /// Whole packets that may be sent now.
    #[inline]
    pub fn available(&self) -> u32 {
        (self.credit / UNIT).min(u128::from(u32::MAX)) as u32
    }

    /// Spends `n` packets (at most what is available).
    #[inline]
    pub fn consume(&mut self, n: u32) {
        self.credit = self.credit.saturating_sub(u128::from(n) * UNIT);
    }

    /// Nanoseconds until `n` packets are available (0 if they are now).
    pub fn ns_until(&self, n: u32) -> u64 {
        let need = (u128::from(n) * UNIT).min(self.cap);
        if self.credit >= need {
            return 0;
        }
        let r = u128::from(self.rate_pps);
        ((need - self.credit).div_ceil(r)).min(u128::from(u64::MAX)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a bucket the way the sender does: at each step take what is
    /// available (up to `burst`), then jump to when the next packet is due.
    fn simulate(rate: u64, burst: u32, seconds: u64) -> u64 {
        let mut now = 0u64;
        let mut b = TokenBucket::new(rate, burst, now);
        let end = seconds * 1_000_000_000;
        let mut sent = 0u64;
        let mut steps = 0u64;
        while now < end {
            steps += 1;
            assert!(steps < 100_000_000, "bounded");
            b.refill(now);
            let n = b.available().min(burst);
            if n > 0 {
                b.consume(n);
                sent += u64::from(n);
                continue;
            }
            // Coarse sleeps, like a real timer: at least 50 us.
            now += b.ns_until(1).max(50_000);
        }
        sent
    }

    #[test]
    fn holds_the_rate_within_one_burst() {
        for (rate, burst) in [
            (1000, 1),
            (1000, 512),
            (100_000, 64),
            (3_000_000, 512),
            (7, 1),
        ] {
            let sent = simulate(rate, burst, 2);
            let want = 2 * rate;
            let slack = u64::from(burst) + 1;
            assert!(
                sent + slack >= want && sent <= want + slack,
                "rate {rate} burst {burst}: sent {sent}"
            );
        }
    }

    #[test]
    fn starts_with_one_packet_and_caps_idle_credit() {
        let mut b = TokenBucket::new(1000, 10, 5);
        assert_eq!(b.available(), 1);
        b.consume(1);
        assert_eq!(b.available(), 0);
        assert_eq!(b.ns_until(1), 1_000_000);
        b.refill(5 + 999_999);
        assert_eq!(b.available(), 0);
        b.refill(5 + 1_000_000);
        assert_eq!(b.available(), 1);
        b.refill(5 + 3_600_000_000_000);
        assert_eq!(b.available(), 10, "an hour idle earns one burst");
        assert_eq!(b.ns_until(100), 0, "never asks for more than a burst");
        // Time going backwards earns nothing and breaks nothing.
        b.consume(10);
        b.refill(0);
        assert_eq!(b.available(), 0);
    }
}
