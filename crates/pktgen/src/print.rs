//! netmap pkt-gen's output: [`Printer`], the [`Reporter`] that prints a
//! run to stdout (the header, the interval lines, the closing lines and,
//! with `--json`, the report as one JSON object on the last line), and the
//! text of each. Nothing here runs anything.

use std::io::Write as _;

use crate::frame::Endpoint;
use crate::latency::IntervalRtt;
use crate::meter::{self, Interval};
use crate::plan::{Mode, Plan, DEFAULT_DST_PORT, DEFAULT_SRC_PORT};
use crate::report::{Report, Reporter, Start};

/// Prints a run to stdout as netmap's pkt-gen does.
#[derive(Clone, Copy, Debug, Default)]
pub struct Printer {
    json: bool,
}

impl Printer {
    /// With `json`, the report follows the closing lines as one JSON
    /// object on the last line (`--json`).
    pub fn new(json: bool) -> Printer {
        Printer { json }
    }
}

impl Reporter for Printer {
    fn start(&mut self, start: &Start<'_>) {
        say(&header(start));
    }

    fn interval(&mut self, traffic: &Interval, rtt: Option<&IntervalRtt>) {
        say(&traffic.line());
        if let Some(rtt) = rtt {
            say(&rtt.line());
        }
    }

    fn end(&mut self, report: &Report) {
        say(&closing(report));
        if self.json {
            // Serializing plain numbers and strings cannot fail.
            say(&serde_json::to_string(report).unwrap_or_default());
        }
    }
}

/// Prints a line to stdout; a closed stdout is not an error worth stopping
/// the run for.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The header line: mode, port, frames, burst, rate, wait, threads.
pub fn header(start: &Start<'_>) -> String {
    let p = start.plan;
    let note = if p.threads == 1 {
        String::new()
    } else {
        threads_note(p, start.tx_rings, start.rx_rings)
    };
    describe(p, start.burst, &note)
}

/// An endpoint for the header: address (range), port (range) or "random".
fn endpoint_text(ep: &Endpoint, random: bool, default_port: u16) -> String {
    let full = ep.describe(default_port);
    match full.rsplit_once(':') {
        Some((ip, _)) if random => format!("{ip}:random"),
        _ => full,
    }
}

fn describe(p: &Plan, burst: u32, threads: &str) -> String {
    let interface = &p.port;
    let rate = if p.rate_pps == 0 {
        "unlimited".to_string()
    } else {
        format!("{} pps", p.rate_pps)
    };
    let wait = if p.busy { "busy" } else { "blocking" };
    match p.mode {
        Mode::Rx | Mode::Rxseq | Mode::Pong => {
            format!("{} on {interface}: burst {burst}, {wait} wait{threads}", p.mode)
        }
        _ => format!(
            "{} on {interface}: {}-byte frames {} {} -> {} {}, burst {burst}, rate {rate}, {wait} wait{threads}",
            p.mode,
            p.frame_len,
            p.src_mac,
            endpoint_text(&p.src, p.random_src_port, DEFAULT_SRC_PORT),
            p.dst_mac,
            endpoint_text(&p.dst, p.random_dst_port, DEFAULT_DST_PORT),
        ),
    }
}

/// The header's words on threads and rings.
fn threads_note(p: &Plan, tx_rings: u32, rx_rings: u32) -> String {
    let n = p.threads;
    if p.mode.sends() {
        let unused = if tx_rings > n {
            format!(" (TX rings {n}-{} unused)", tx_rings - 1)
        } else {
            String::new()
        };
        format!(", {n} threads on TX rings 0-{}{unused}", n - 1)
    } else if rx_rings == n {
        format!(", {n} threads, one per RX ring")
    } else {
        format!(", {n} threads on {rx_rings} RX rings (thread i reads rings i, i+{n}, ...)")
    }
}

/// The closing lines for a report.
pub fn closing(r: &Report) -> String {
    let ns = (r.seconds * 1e9) as u64;
    let verb = match r.mode {
        Mode::Tx | Mode::Txseq => "Sent",
        Mode::Rx | Mode::Rxseq => "Received",
        Mode::Pong => "Bounced",
        Mode::Ping => "Round trips:",
    };
    let mut s = meter::summary(verb, r.packets, r.bytes, r.events, ns);
    if let Some(q) = r.queued.filter(|&q| q > 0) {
        s.push_str(&format!(
            "\n{q} packets were still queued when the port was closed"
        ));
    }
    if let Some(d) = r.drops {
        s.push_str(&format!("\nDropped {d} packets"));
    }
    if let (Some(g), Some(o)) = (r.gaps, r.reordered) {
        s.push_str(&format!("\nSequence: {g} missing, {o} out of order"));
    }
    if let (Some(sent), Some(lost)) = (r.sent, r.lost) {
        s.push_str(&format!(
            "\nPing: {sent} sent, {} replies, {lost} lost",
            r.packets
        ));
    }
    if let (Some(min), Some(avg), Some(p50), Some(p99), Some(p999), Some(max)) = (
        r.rtt_ns_min,
        r.rtt_ns_avg,
        r.rtt_ns_p50,
        r.rtt_ns_p99,
        r.rtt_ns_p999,
        r.rtt_ns_max,
    ) {
        s.push_str(&format!(
            "\nRTT ns: min {min} avg {avg} p50 {p50} p99 {p99} p99.9 {p999} max {max}"
        ));
    }
    if let Some(m) = r.malformed.filter(|&m| m > 0) {
        s.push_str(&format!("\n{m} frames were malformed or unexpected"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::RttSummary;
    use crate::report::{End, Outcome};
    use crate::PktGenError;

    fn start(plan: &Plan, tx_rings: u32, rx_rings: u32) -> String {
        header(&Start {
            plan,
            burst: 512,
            tx_rings,
            rx_rings,
        })
    }

    #[test]
    fn the_header_shows_the_ranges() {
        let p = Plan {
            mode: Mode::Tx,
            src: "10.0.0.1-10.0.0.9:1-2".parse().unwrap(),
            random_dst_port: true,
            ..Plan::new("x")
        };
        let h = start(&p, 1, 1);
        assert!(
            h.contains("10.0.0.1-10.0.0.9:1-2 -> ff:ff:ff:ff:ff:ff 10.1.0.1:random"),
            "{h}"
        );
        assert_eq!(
            start(&Plan::new("pipe}1"), 1, 1),
            "rx on pipe}1: burst 512, blocking wait"
        );
    }

    #[test]
    fn threads_and_rings() {
        let p = Plan {
            mode: Mode::Tx,
            threads: 2,
            ..Plan::new("x")
        };
        assert_eq!(threads_note(&p, 2, 2), ", 2 threads on TX rings 0-1");
        assert_eq!(
            threads_note(&p, 4, 4),
            ", 2 threads on TX rings 0-1 (TX rings 2-3 unused)"
        );
        assert!(start(&p, 4, 4)
            .ends_with("blocking wait, 2 threads on TX rings 0-1 (TX rings 2-3 unused)"));
        let p = Plan {
            threads: 2,
            ..Plan::new("x")
        };
        assert_eq!(threads_note(&p, 2, 2), ", 2 threads, one per RX ring");
        assert_eq!(
            threads_note(&p, 5, 5),
            ", 2 threads on 5 RX rings (thread i reads rings i, i+2, ...)"
        );
        let e = PktGenError::TooFewRings {
            port: "pipe{1".into(),
            threads: 3,
            dir: "TX",
            tx_rings: 2,
            rx_rings: 2,
            example: "pipe{1@conf:rings=3".into(),
        };
        assert_eq!(
            e.to_string(),
            "-p 3 needs 3 TX rings, but port pipe{1 has 2 TX and 2 RX rings; create it with enough rings, e.g. pipe{1@conf:rings=3"
        );
    }

    #[test]
    fn report_json_fields() {
        let out = Outcome {
            packets: 100,
            bytes: 6000,
            span: Some((5, 2_000_000_005)),
            end: Some(End::Count),
            drops: Some(3),
            gaps: Some(3),
            reordered: Some(1),
            ..Outcome::default()
        };
        let r = out.report(Mode::Rxseq, "pipe}1".into(), 4);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["mode"], "rxseq");
        assert_eq!(v["packets"], 100);
        assert_eq!(v["bytes"], 6000);
        assert_eq!(v["seconds"], 2.0);
        assert_eq!(v["pps"], 50.0);
        assert_eq!(v["drops"], 3);
        assert_eq!(v["gaps"], 3);
        assert_eq!(v["reordered"], 1);
        assert_eq!(v["end"], "count");
        assert_eq!(v["avg_batch"], 25.0);
        assert!(v.get("rtt_ns_p99").is_none() && v.get("sent").is_none());
        let text = closing(&r);
        assert!(
            text.starts_with("Received 100 packets, 6000 bytes, 4 events"),
            "{text}"
        );
        assert!(
            text.contains("\nDropped 3 packets\nSequence: 3 missing, 1 out of order"),
            "{text}"
        );

        let rtt = RttSummary {
            count: 2,
            min_ns: 1,
            avg_ns: 2,
            p50_ns: 2,
            p99_ns: 3,
            p999_ns: 3,
            max_ns: 3,
        };
        let out = Outcome {
            packets: 2,
            sent: Some(3),
            lost: Some(1),
            rtt: Some(rtt),
            ..Outcome::default()
        };
        let r = out.report(Mode::Ping, "pipe{1".into(), 2);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        for (k, want) in [
            ("rtt_ns_min", 1),
            ("rtt_ns_avg", 2),
            ("rtt_ns_p50", 2),
            ("rtt_ns_p99", 3),
            ("rtt_ns_p999", 3),
            ("rtt_ns_max", 3),
            ("sent", 3),
            ("lost", 1),
        ] {
            assert_eq!(v[k], want, "{k}");
        }
        assert_eq!(v["pps"], 0.0, "no time, no rate");
        assert!(closing(&r).contains("RTT ns: min 1 avg 2 p50 2 p99 3 p99.9 3 max 3"));
    }
}
