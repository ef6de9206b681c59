//! What a run tells: the [`Reporter`] the run calls as it goes (the start,
//! each report interval, the end), the [`Report`] it returns, and how the
//! threads' outcomes add up into it. Nothing here prints: the printers are
//! in [`crate::print`].

use crate::latency::{IntervalRtt, RttSummary};
use crate::meter::{self, Interval};
use crate::plan::{Mode, Plan};

/// What a run tells as it goes. The run calls it from the thread that
/// called [`crate::run`] (never from a `-p` worker), and never per packet:
/// once at the start, once per report interval, once at the end.
/// [`crate::print::Printer`] prints netmap pkt-gen's lines; every method
/// does nothing unless implemented.
pub trait Reporter {
    /// The port is open and the run starts.
    fn start(&mut self, _start: &Start<'_>) {}
    /// A report interval (`-T`) ended: the traffic in it, and for ping the
    /// round trips completed in it.
    fn interval(&mut self, _traffic: &Interval, _rtt: Option<&IntervalRtt>) {}
    /// The run ended with this report (also returned by [`crate::run`]).
    fn end(&mut self, _report: &Report) {}
}

/// A [`Reporter`] that tells nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Reporter for Silent {}

/// What a run starts with, once the port is open.
#[derive(Clone, Copy, Debug)]
pub struct Start<'a> {
    /// The plan as given.
    pub plan: &'a Plan,
    /// Slots handled per sync: the plan's, at most what a ring holds.
    pub burst: u32,
    /// The port's TX rings.
    pub tx_rings: u32,
    /// The port's RX rings.
    pub rx_rings: u32,
}

/// Why the run ended.
#[derive(serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// `-n` packets were handled.
    Count,
    /// `--duration` elapsed.
    Duration,
    /// SIGINT or SIGTERM.
    Signal,
}

/// The outcome of a run; serialized, the `--json` line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// Mode.
    pub mode: Mode,
    /// Port name as opened.
    pub port: String,
    /// Threads that ran (`-p`).
    pub threads: u32,
    /// With `-p` > 1: packets handled by each thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_packets: Option<Vec<u64>>,
    /// Packets sent (tx, txseq: taken by the port), received (rx, rxseq),
    /// bounced (pong), or round trips completed (ping).
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Time the packets took: senders from start to the last packet taken,
    /// receivers from the first batch to the last.
    pub seconds: f64,
    /// Packets per second.
    pub pps: f64,
    /// Bits per second (frame bytes, no CRC or framing).
    pub bps: f64,
    /// Syncs that moved packets.
    pub events: u64,
    /// Packets per event.
    pub avg_batch: f64,
    /// Why the run ended.
    pub end: End,
    /// Packets known lost: for rx on a switch port, what the switch dropped
    /// because this port's ring was full (0 on a pipe, which never drops);
    /// the gaps for rxseq.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<u64>,
    /// rxseq: sequence numbers skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gaps: Option<u64>,
    /// rxseq: frames with a number lower than expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<u64>,
    /// rxseq: frames too short to carry a number; pong: frames that could
    /// not be bounced; ping: replies that matched no outstanding ping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
    /// tx, txseq: packets still in the TX ring when the port was closed
    /// (not counted in `packets`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued: Option<u64>,
    /// ping: pings sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    /// ping: pings without a reply within 1 s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// ping: smallest RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns_min: Option<u64>,
    /// ping: mean RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns_avg: Option<u64>,
    /// ping: median RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns_p50: Option<u64>,
    /// ping: 99th percentile RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns_p99: Option<u64>,
    /// ping: 99.9th percentile RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns_p999: Option<u64>,
    /// ping: largest RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns_max: Option<u64>,
    /// CPU time (user + system, all threads) this pkt-gen process used from
    /// its start to the report, in seconds: what benchmarks divide by the
    /// packets to get a cost per packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// One thread: times its waits slept on the port's interrupt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<u64>,
    /// One thread: adaptive waits whose spin found work before sleeping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spins_won: Option<u64>,
    /// One thread: adaptive spins cut short because another thread needed
    /// the CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spins_gave_way: Option<u64>,
    /// One thread, waiting adaptively: its spin's cap at the end (µs), its
    /// own wake-up cost plus what its wake-ups cost the port side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spin_cap_us: Option<f64>,
}

/// What a mode hands back.
#[derive(Clone, Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    /// When the counted work started and ended (CLOCK_MONOTONIC ns);
    /// `None` when nothing was counted.
    pub(crate) span: Option<(u64, u64)>,
    pub(crate) end: Option<End>,
    pub(crate) drops: Option<u64>,
    pub(crate) gaps: Option<u64>,
    pub(crate) reordered: Option<u64>,
    pub(crate) malformed: Option<u64>,
    pub(crate) queued: Option<u64>,
    pub(crate) sent: Option<u64>,
    pub(crate) lost: Option<u64>,
    pub(crate) rtt: Option<RttSummary>,
}

/// When a loop first and last moved packets: an [`Outcome`]'s `span`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Activity {
    first_ns: Option<u64>,
    last_ns: u64,
}

impl Activity {
    /// Packets moved at `now_ns`.
    #[inline]
    pub(crate) fn at(&mut self, now_ns: u64) {
        self.first_ns.get_or_insert(now_ns);
        self.last_ns = now_ns;
    }

    /// From the first to the last time packets moved; `None` if never.
    pub(crate) fn span(&self) -> Option<(u64, u64)> {
        self.first_ns.map(|f| (f, self.last_ns))
    }
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn end_rank(e: Option<End>) -> u8 {
    match e {
        None => 0,
        Some(End::Count) => 1,
        Some(End::Duration) => 2,
        Some(End::Signal) => 3,
    }
}

impl Outcome {
    /// Two threads' outcomes as one: counts added, the span covering both,
    /// the end that says most (a signal over the duration over the count).
    pub(crate) fn merge(self, o: Outcome) -> Outcome {
        Outcome {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            span: match (self.span, o.span) {
                (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                (a, b) => a.or(b),
            },
            end: if end_rank(o.end) > end_rank(self.end) {
                o.end
            } else {
                self.end
            },
            drops: add(self.drops, o.drops),
            gaps: add(self.gaps, o.gaps),
            reordered: add(self.reordered, o.reordered),
            malformed: add(self.malformed, o.malformed),
            queued: add(self.queued, o.queued),
            sent: add(self.sent, o.sent),
            lost: add(self.lost, o.lost),
            // ping runs in one thread only.
            rtt: self.rtt.or(o.rtt),
        }
    }

    pub(crate) fn report(self, mode: Mode, port: String, events: u64) -> Report {
        let ns = self.span.map_or(0, |(a, b)| b.saturating_sub(a));
        let seconds = ns as f64 / 1e9;
        let rtt = self.rtt.filter(|r| r.count > 0);
        Report {
            mode,
            port,
            threads: 1,
            thread_packets: None,
            packets: self.packets,
            bytes: self.bytes,
            seconds,
            pps: meter::per_second(self.packets as f64, ns),
            bps: meter::per_second(self.bytes as f64 * 8.0, ns),
            events,
            avg_batch: if events == 0 {
                0.0
            } else {
                self.packets as f64 / events as f64
            },
            end: self.end.unwrap_or(End::Signal),
            drops: self.drops,
            gaps: self.gaps,
            reordered: self.reordered,
            malformed: self.malformed,
            queued: self.queued,
            sent: self.sent,
            lost: self.lost,
            rtt_ns_min: rtt.map(|r| r.min_ns),
            rtt_ns_avg: rtt.map(|r| r.avg_ns),
            rtt_ns_p50: rtt.map(|r| r.p50_ns),
            rtt_ns_p99: rtt.map(|r| r.p99_ns),
            rtt_ns_p999: rtt.map(|r| r.p999_ns),
            rtt_ns_max: rtt.map(|r| r.max_ns),
            cpu_seconds: None,
            sleeps: None,
            spins_won: None,
            spins_gave_way: None,
            spin_cap_us: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_of_threads_add_up() {
        let a = Outcome {
            packets: 10,
            bytes: 600,
            span: Some((100, 200)),
            end: Some(End::Count),
            gaps: Some(1),
            reordered: Some(0),
            queued: Some(2),
            ..Outcome::default()
        };
        let b = Outcome {
            packets: 5,
            bytes: 300,
            span: Some((90, 150)),
            end: Some(End::Duration),
            gaps: Some(2),
            reordered: Some(3),
            ..Outcome::default()
        };
        let idle = Outcome {
            end: Some(End::Count),
            ..Outcome::default()
        };
        let m = a.merge(b).merge(idle);
        assert_eq!((m.packets, m.bytes, m.span), (15, 900, Some((90, 200))));
        assert_eq!(m.end, Some(End::Duration));
        assert_eq!((m.gaps, m.reordered, m.queued), (Some(3), Some(3), Some(2)));
        assert_eq!((m.drops, m.sent, m.rtt), (None, None, None));
        let r = m.report(Mode::Rxseq, "p".into(), 3);
        assert_eq!(r.seconds, 110e-9);
        assert_eq!(r.avg_batch, 5.0);
        let sig = Outcome {
            end: Some(End::Signal),
            ..Outcome::default()
        };
        assert_eq!(Outcome::default().merge(sig).end, Some(End::Signal));
    }
}
