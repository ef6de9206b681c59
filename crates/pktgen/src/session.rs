//! State shared by the modes: the open port (or this thread's pieces of a
//! split port), the plan, the clock checks that end a run, the report
//! interval; and what the threads of a `-p` run share.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use ringswitch_client::{ClientError, Port, RxRing};

use crate::frame::{Endpoint, Fields, Template};
use crate::latency::IntervalRtt;
use crate::meter::Meter;
use crate::os::{monotonic_ns, stop_requested};
use crate::plan::CheckedPlan;
use crate::rate::TokenBucket;
use crate::report::{End, Reporter};
use crate::PktGenError;

/// Longest a wait sleeps before the stop conditions are looked at again.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(100);
/// Longest a blocking wait sleeps with `-p` > 1. Each ring pair has its own
/// interrupt, but a receiver thread that reads several rings sleeps on one
/// of them at a time: short waits bound how late it sees the others.
pub(crate) const THREAD_WAIT_SLICE: Duration = Duration::from_millis(2);
/// Shortest wait handed to a blocking call (poll has millisecond timeouts).
const MIN_WAIT: Duration = Duration::from_millis(1);

/// One thread's running totals, published after every batch for the
/// thread that reports the intervals. Aligned so two threads' counters
/// never share a cache line.
#[repr(align(128))]
#[derive(Debug)]
pub(crate) struct Published {
    pkts: AtomicU64,
    bytes: AtomicU64,
    events: AtomicU64,
    /// Least space seen since the last report (`u32::MAX`: none).
    min_space: AtomicU32,
}

impl Default for Published {
    fn default() -> Self {
        Published {
            pkts: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            events: AtomicU64::new(0),
            min_space: AtomicU32::new(u32::MAX),
        }
    }
}

/// What the threads of one run share: the packet budget of `-n`, a flag
/// that stops every thread when one fails, and the published counters.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Packets not yet claimed; unused when `bounded` is false. One
    /// budget for all threads, or (senders, as netmap's pkt-gen splits
    /// `-n`) one per thread, each `count / threads` with the remainder
    /// spread over the first: every sender sends its share, however the
    /// threads are scheduled.
    left: Vec<AtomicU64>,
    bounded: bool,
    abort: AtomicBool,
    slots: Vec<Published>,
}

impl Shared {
    /// For `threads` threads handling `count` packets in all (`u64::MAX`:
    /// no limit), claimed from one budget.
    pub(crate) fn new(count: u64, threads: usize) -> Shared {
        Shared {
            left: vec![AtomicU64::new(count)],
            bounded: count != u64::MAX,
            abort: AtomicBool::new(false),
            slots: (0..threads).map(|_| Published::default()).collect(),
        }
    }

    /// As [`Shared::new`], each thread with its own share of `count`.
    pub(crate) fn split(count: u64, threads: usize) -> Shared {
        let mut s = Shared::new(count, threads);
        let n = u64::try_from(threads.max(1)).unwrap_or(1);
        if s.bounded {
            s.left = (0..n)
                .map(|i| AtomicU64::new(count / n + u64::from(i < count % n)))
                .collect();
        }
        s
    }

    /// The budget thread `thread` claims from.
    #[inline]
    fn budget(&self, thread: usize) -> &AtomicU64 {
        // `left` is never empty.
        self.left.get(thread).unwrap_or(&self.left[0])
    }

    /// Claims up to `want` packets of thread `thread`'s budget; returns
    /// how many.
    #[inline]
    pub(crate) fn claim(&self, thread: usize, want: u32) -> u32 {
        if !self.bounded {
            return want;
        }
        let left = self.budget(thread);
        let mut cur = left.load(Ordering::Relaxed);
        loop {
            if cur == 0 || want == 0 {
                return 0;
            }
            let n = cur.min(u64::from(want));
            match left.compare_exchange_weak(cur, cur - n, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return n as u32,
                Err(now) => cur = now,
            }
        }
    }

    /// Whether thread `thread`'s budget is spent.
    #[inline]
    pub(crate) fn exhausted(&self, thread: usize) -> bool {
        self.bounded && self.budget(thread).load(Ordering::Relaxed) == 0
    }

    /// Stops every thread (one failed).
    pub(crate) fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// The threads' totals (packets, bytes, events) and the least space
    /// any saw since the last call.
    pub(crate) fn take_totals(&self) -> (u64, u64, u64, u32) {
        let mut t = (0, 0, 0, u32::MAX);
        for s in &self.slots {
            t.0 += s.pkts.load(Ordering::Relaxed);
            t.1 += s.bytes.load(Ordering::Relaxed);
            t.2 += s.events.load(Ordering::Relaxed);
            t.3 = t.3.min(s.min_space.swap(u32::MAX, Ordering::Relaxed));
        }
        t
    }
}

/// What a thread does beyond the plan: which stream it is, its share of
/// the rate, and whether it publishes for the interval reporter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Role {
    /// Thread index (the stream index txseq stamps).
    pub(crate) index: usize,
    /// Packets per second for this thread (0: unlimited).
    pub(crate) rate_pps: u64,
    /// Whether several threads run: publish counters, report nothing,
    /// wait in short slices.
    pub(crate) threaded: bool,
}

pub(crate) struct Session<'a> {
    pub(crate) port: Port,
    /// More pieces of a split port this thread reads, each through its RX
    /// ring 0 (receivers, when there are fewer threads than rings).
    pub(crate) extra: Vec<Port>,
    pub(crate) name: String,
    pub(crate) burst: u32,
    pub(crate) len: usize,
    pub(crate) template: Template,
    pub(crate) fields: Fields,
    pub(crate) src: Endpoint,
    pub(crate) dst: Endpoint,
    pub(crate) random_src: bool,
    pub(crate) random_dst: bool,
    /// txseq's stream index (the thread index).
    pub(crate) stream: u16,
    pub(crate) busy: bool,
    pub(crate) rate_pps: u64,
    deadline_ns: u64,
    pub(crate) meter: Meter,
    shared: &'a Shared,
    publish: Option<&'a Published>,
    max_wait: Duration,
    own_rx: usize,
    /// The adaptive spin of a wait on several rings (the default mode;
    /// none when blocking or busy). One ring waits in the port itself.
    adapt: Option<ringswitch_ring::AdaptiveWait>,
}

impl<'a> Session<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        port: Port,
        extra: Vec<Port>,
        name: String,
        plan: &CheckedPlan,
        burst: u32,
        template: Template,
        shared: &'a Shared,
        role: Role,
    ) -> Session<'a> {
        let now = monotonic_ns();
        let own_rx = port.geometry().rx_rings as usize;
        Session {
            port,
            extra,
            name,
            burst,
            len: plan.len,
            template,
            fields: plan.fields,
            src: plan.src,
            dst: plan.dst,
            random_src: plan.random_src,
            random_dst: plan.random_dst,
            stream: role.index as u16,
            busy: plan.busy,
            rate_pps: role.rate_pps,
            deadline_ns: plan.duration_ns.map_or(u64::MAX, |d| now.saturating_add(d)),
            // With several threads the intervals are reported from
            // the published totals, not by each thread.
            meter: Meter::new(if role.threaded { 0 } else { plan.interval_ms }, now),
            shared,
            publish: role
                .threaded
                .then(|| shared.slots.get(role.index))
                .flatten(),
            max_wait: if role.threaded {
                THREAD_WAIT_SLICE
            } else {
                WAIT_SLICE
            },
            own_rx,
            adapt: (!plan.busy && !plan.blocking).then(ringswitch_ring::AdaptiveWait::new),
        }
    }

    /// Reports the interval to `out` if one is due, with ping's round
    /// trips in it. Returns whether it did.
    #[inline]
    pub(crate) fn tick(
        &mut self,
        now: u64,
        rtt: Option<&IntervalRtt>,
        out: &mut dyn Reporter,
    ) -> bool {
        match self.meter.poll(now) {
            Some(iv) => {
                out.interval(&iv, rtt);
                true
            }
            None => false,
        }
    }

    /// The start of a round of a loop without round trips (all but
    /// ping's): reports the interval if one is due, then says why the loop
    /// must end, if it must (see [`Session::ending`]).
    #[inline]
    pub(crate) fn round_start(&mut self, now: u64, out: &mut dyn Reporter) -> Option<End> {
        self.tick(now, None, out);
        self.ending(now)
    }

    /// One sync moved `pkts` packets of `bytes` bytes; the ring had `space`.
    #[inline]
    pub(crate) fn record(&mut self, pkts: u32, bytes: u64, space: u32) {
        self.meter.record(pkts, bytes, space);
        if let Some(p) = self.publish {
            p.pkts.store(self.meter.pkts, Ordering::Relaxed);
            p.bytes.store(self.meter.bytes, Ordering::Relaxed);
            p.events.store(self.meter.events, Ordering::Relaxed);
            p.min_space.fetch_min(space, Ordering::Relaxed);
        }
    }

    /// Claims up to `want` packets of the `-n` budget (shared by all
    /// threads); returns how many.
    #[inline]
    pub(crate) fn claim(&self, want: u32) -> u32 {
        self.shared.claim(usize::from(self.stream), want)
    }

    /// Whether the `-n` budget is spent.
    #[inline]
    pub(crate) fn exhausted(&self) -> bool {
        self.shared.exhausted(usize::from(self.stream))
    }

    /// Why the run must end now, apart from the count.
    #[inline]
    pub(crate) fn stop_reason(&self, now: u64) -> Option<End> {
        if stop_requested() || self.shared.aborted() {
            Some(End::Signal)
        } else if now >= self.deadline_ns {
            Some(End::Duration)
        } else {
            None
        }
    }

    /// How long a wait may last: until the deadline, the next report, or
    /// at most [`WAIT_SLICE`] ([`THREAD_WAIT_SLICE`] with several threads).
    pub(crate) fn wait_slice(&self, now: u64) -> Duration {
        let until = self
            .deadline_ns
            .min(self.meter.next_report_ns())
            .saturating_sub(now);
        Duration::from_nanos(until).clamp(MIN_WAIT, self.max_wait)
    }

    /// Waits `ns` for the rate limiter: sleeps (bounded by the wait slice)
    /// unless busy-waiting, when it only spins once and lets the loop look
    /// again.
    pub(crate) fn pause(&self, ns: u64, now: u64) {
        if self.busy {
            std::hint::spin_loop();
            return;
        }
        let d = Duration::from_nanos(ns).min(self.wait_slice(now));
        std::thread::sleep(d);
    }

    /// Why a mode's loop must end now, if it must: the `-n` budget is spent,
    /// or a stop condition holds (see [`Session::stop_reason`]).
    pub(crate) fn ending(&self, now: u64) -> Option<End> {
        if self.exhausted() {
            return Some(End::Count);
        }
        self.stop_reason(now)
    }

    /// Packets the rate limit lets go now, at most `want`. They go in
    /// groups, as netmap's pkt-gen sends whole bursts at paced times: a
    /// group is `want` packets, or a millisecond's worth at slow rates (at
    /// least one), so a slow rate costs few syncs rather than one per
    /// packet. `None`, after a pause towards the time the next group is
    /// due, when it is not due yet (the caller loops again).
    pub(crate) fn rate_budget(
        &self,
        bucket: &mut Option<TokenBucket>,
        want: u32,
        now: u64,
    ) -> Option<u32> {
        let Some(b) = bucket else { return Some(want) };
        b.refill(now);
        let per_ms = u32::try_from(self.rate_pps / 1000).unwrap_or(u32::MAX);
        let due = want.min(per_ms).max(1);
        let avail = b.available();
        if avail < due {
            self.pause(b.ns_until(due), now);
            return None;
        }
        Some(want.min(avail))
    }

    /// How many packets a sending loop fills this round, at most a burst:
    /// what the rate limit lets go (see [`Session::rate_budget`]) and TX
    /// ring 0 has room for, claimed from the `-n` budget (shared with the
    /// other threads); with the free space the ring had. `None`, after a
    /// pause for the rate or a wait (at most the wait slice, over as soon
    /// as slots are free) when the ring is full: the loop looks again.
    pub(crate) fn tx_grant(
        &mut self,
        bucket: &mut Option<TokenBucket>,
        now: u64,
    ) -> Result<Option<(u32, u32)>, PktGenError> {
        let Some(want) = self.rate_budget(bucket, self.burst, now) else {
            return Ok(None);
        };
        let slice = self.wait_slice(now);
        let space = self.port.tx(0).space();
        if space == 0 {
            let r = self.port.tx(0).wait(Some(slice));
            r.map_err(|e| self.wait_err(e))?;
            return Ok(None);
        }
        Ok(Some((self.claim(want.min(space)), space)))
    }

    /// The token bucket for `-R`: it holds a burst, or a millisecond of
    /// packets at fast rates, so that a sleep overshooting its time (timer
    /// slack is tens of microseconds) does not lose rate.
    pub(crate) fn rate_limiter(&self) -> Option<TokenBucket> {
        let depth = self
            .burst
            .max(u32::try_from(self.rate_pps / 1000).unwrap_or(u32::MAX));
        (self.rate_pps > 0).then(|| TokenBucket::new(self.rate_pps, depth, monotonic_ns()))
    }

    pub(crate) fn wait_err(&self, source: ClientError) -> PktGenError {
        PktGenError::Wait {
            port: self.name.clone(),
            source,
        }
    }

    /// RX rings this thread reads: its port's, then ring 0 of each extra
    /// piece.
    #[inline]
    pub(crate) fn rx_rings(&self) -> usize {
        self.own_rx + self.extra.len()
    }

    /// The `k`-th RX ring this thread reads.
    #[inline]
    pub(crate) fn rx(&mut self, k: usize) -> RxRing<'_> {
        if k < self.own_rx {
            self.port.rx(k)
        } else {
            self.extra[k - self.own_rx].rx(0)
        }
    }

    /// Waits up to `timeout` until any RX ring of this thread has packets.
    pub(crate) fn wait_rx_any(&mut self, timeout: Duration) -> Result<bool, PktGenError> {
        let rings = self.rx_rings();
        if rings == 1 && self.own_rx == 1 {
            return self
                .port
                .wait_rx(0, Some(timeout))
                .map_err(|e| self.wait_err(e));
        }
        let end = monotonic_ns().saturating_add(timeout.as_nanos() as u64);
        if self.busy {
            // Bounded by the timeout.
            loop {
                for r in 0..rings {
                    let mut rx = self.rx(r);
                    let res = rx.sync();
                    res.map_err(|e| self.wait_err(e))?;
                    if self.rx(r).space() > 0 {
                        return Ok(true);
                    }
                }
                if monotonic_ns() >= end {
                    return Ok(false);
                }
                std::hint::spin_loop();
            }
        }
        // The default: spin for the window spinning has been paying before
        // asking for interrupts, as a wait on one ring does.
        if let Some(mut a) = self.adapt.take() {
            let found = a.spin(|| {
                (0..rings).any(|r| {
                    // A sync that fails is reported by the next one.
                    let _ = self.rx(r).sync();
                    self.rx(r).space() > 0
                })
            });
            self.adapt = Some(a);
            if found {
                return Ok(true);
            }
        }
        // Every piece's rings ask for an interrupt; they all share the
        // port's eventfd, so sleeping on one descriptor covers them all.
        let mut ready = self.port.prepare_wait(false, true);
        for p in &mut self.extra {
            ready |= p.prepare_wait(false, true);
        }
        if ready {
            self.after_wait()?;
            return Ok(true);
        }
        let fd = self.port.poll_fd().as_raw_fd();
        let t_sleep = std::time::Instant::now();
        let fired =
            ringswitch_ring::poll::poll_in(fd, Some(timeout)).map_err(|e| PktGenError::Wait {
                port: self.name.clone(),
                source: ClientError::Io(e),
            })?;
        if let Some(a) = &mut self.adapt {
            a.slept(t_sleep.elapsed(), fired);
        }
        self.after_wait()?;
        Ok(fired)
    }

    /// Withdraws the interrupt requests; a port whose daemon went away
    /// reconnects here.
    fn after_wait(&mut self) -> Result<(), PktGenError> {
        let wait = |source| PktGenError::Wait {
            port: self.name.clone(),
            source,
        };
        self.port.after_wait().map_err(wait)?;
        for p in &mut self.extra {
            p.after_wait().map_err(wait)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_claimed_exactly_once_across_threads() {
        let total = 1_000_003u64;
        let sh = Shared::new(total, 4);
        let claimed: Vec<u64> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|i| {
                    let sh = &sh;
                    sc.spawn(move || {
                        let mut mine = 0u64;
                        while !sh.exhausted(i as usize) {
                            mine += u64::from(sh.claim(i as usize, 1 + 97 * i));
                        }
                        assert_eq!(sh.claim(i as usize, 5), 0);
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(claimed.iter().sum::<u64>(), total);
        let unbounded = Shared::new(u64::MAX, 1);
        assert_eq!(unbounded.claim(0, 512), 512);
        assert!(!unbounded.exhausted(0));
        assert_eq!(Shared::new(3, 1).claim(0, 512), 3);
    }

    #[test]
    fn split_budgets_give_every_thread_its_share() {
        let sh = Shared::split(10, 4);
        let got: Vec<u32> = (0..4).map(|t| sh.claim(t, 512)).collect();
        assert_eq!(got, [3, 3, 2, 2], "10 over 4 threads, all of it");
        assert!((0..4).all(|t| sh.exhausted(t)));
        let unbounded = Shared::split(u64::MAX, 3);
        assert_eq!(unbounded.claim(2, 64), 64);
    }

    #[test]
    fn totals_add_up_and_min_space_resets() {
        let sh = Shared::new(u64::MAX, 2);
        for (i, s) in sh.slots.iter().enumerate() {
            s.pkts.store(10 * (i as u64 + 1), Ordering::Relaxed);
            s.bytes.store(600, Ordering::Relaxed);
            s.events.store(1, Ordering::Relaxed);
            s.min_space.fetch_min(100 + i as u32, Ordering::Relaxed);
        }
        assert_eq!(sh.take_totals(), (30, 1200, 2, 100));
        assert_eq!(sh.take_totals(), (30, 1200, 2, u32::MAX));
    }
}
