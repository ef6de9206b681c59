//! State shared by the modes: the open port, the plan, the clock checks
//! that end a run, the report interval, and stdout.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::time::Duration;

use ringswitch_client::{ClientError, Port};

use crate::frame::{Fields, Template};
use crate::meter::Meter;
use crate::os::{monotonic_ns, stop_requested};
use crate::rate::TokenBucket;
use crate::{End, PktGenArgs, PktGenError, Plan};

/// Longest a wait sleeps before the stop conditions are looked at again.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(100);
/// Shortest wait handed to a blocking call (poll has millisecond timeouts).
const MIN_WAIT: Duration = Duration::from_millis(1);

pub(crate) struct Session {
    pub(crate) port: Port,
    pub(crate) name: String,
    pub(crate) burst: u32,
    pub(crate) len: usize,
    pub(crate) template: Template,
    pub(crate) fields: Fields,
    pub(crate) random_src: bool,
    pub(crate) random_dst: bool,
    /// Packets to handle in all (`u64::MAX`: no limit).
    pub(crate) count: u64,
    pub(crate) busy: bool,
    pub(crate) rate_pps: u64,
    deadline_ns: u64,
    pub(crate) meter: Meter,
}

impl Session {
    pub(crate) fn new(
        port: Port,
        name: String,
        plan: &Plan,
        burst: u32,
        template: Template,
        a: &PktGenArgs,
    ) -> Session {
        let now = monotonic_ns();
        Session {
            port,
            name,
            burst,
            len: plan.len,
            template,
            fields: plan.fields,
            random_src: a.random_src_port,
            random_dst: a.random_dst_port,
            count: plan.count,
            busy: a.busy,
            rate_pps: a.rate,
            deadline_ns: plan.duration_ns.map_or(u64::MAX, |d| now.saturating_add(d)),
            meter: Meter::new(a.interval_ms, now),
        }
    }

    /// Prints a line to stdout; a closed stdout is not an error worth
    /// stopping the data path for.
    pub(crate) fn say(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    /// Prints the interval line if one is due. Returns whether it did.
    #[inline]
    pub(crate) fn tick(&mut self, now: u64) -> bool {
        match self.meter.poll(now) {
            Some(iv) => {
                self.say(&iv.line());
                true
            }
            None => false,
        }
    }

    /// Why the run must end now, apart from the count.
    #[inline]
    pub(crate) fn stop_reason(&self, now: u64) -> Option<End> {
        if stop_requested() {
            Some(End::Signal)
        } else if now >= self.deadline_ns {
            Some(End::Duration)
        } else {
            None
        }
    }

    /// How long a wait may last: until the deadline, the next report, or
    /// at most [`WAIT_SLICE`].
    pub(crate) fn wait_slice(&self, now: u64) -> Duration {
        let until = self
            .deadline_ns
            .min(self.meter.next_report_ns())
            .saturating_sub(now);
        Duration::from_nanos(until).clamp(MIN_WAIT, WAIT_SLICE)
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

    pub(crate) fn rate_limiter(&self) -> Option<TokenBucket> {
        (self.rate_pps > 0).then(|| TokenBucket::new(self.rate_pps, self.burst, monotonic_ns()))
    }

    pub(crate) fn wait_err(&self, source: ClientError) -> PktGenError {
        PktGenError::Wait {
            port: self.name.clone(),
            source,
        }
    }

    /// Waits up to `timeout` until any RX ring has packets.
    pub(crate) fn wait_rx_any(&mut self, timeout: Duration) -> Result<bool, PktGenError> {
        let rings = self.port.geometry().rx_rings as usize;
        if rings == 1 {
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
                    self.port.rxsync(r);
                    if self.port.rx(r).space() > 0 {
                        return Ok(true);
                    }
                }
                if monotonic_ns() >= end {
                    return Ok(false);
                }
                std::hint::spin_loop();
            }
        }
        if self.port.prepare_wait(false, true) {
            return Ok(true);
        }
        let fd = self.port.poll_fd().as_raw_fd();
        let fired = ringswitch_ring::eventfd::poll_in(fd, Some(timeout)).map_err(|e| {
            PktGenError::Wait {
                port: self.name.clone(),
                source: ClientError::Io(e),
            }
        })?;
        self.port.after_wait();
        Ok(fired)
    }
}
