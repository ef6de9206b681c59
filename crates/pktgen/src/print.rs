//! netmap pkt-gen's output: [`Printer`], the [`Reporter`] that prints a
//! run to stdout (the header, the interval lines, the closing lines and,
//! with `--json`, the report as one JSON object on the last line), and the
//! text of each. Nothing here runs anything.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::frame::Endpoint;
use crate::latency::IntervalRtt;
use crate::meter::{per_second, Interval};
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
        say(&interval_line(traffic));
        if let Some(rtt) = rtt {
            say(&rtt_line(rtt));
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
    let wait = if p.busy {
        "busy"
    } else if p.blocking {
        "blocking"
    } else {
        "adaptive"
    };
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

/// An interval's line, as netmap's pkt-gen prints it:
///
/// `1.234 Mpps (1.240 Mpkts 594.2 Mbps in 1000123 usec) 511.93 avg_batch 0 min_space`
pub fn interval_line(iv: &Interval) -> String {
    let avg_batch = if iv.events == 0 {
        0.0
    } else {
        iv.pkts as f64 / iv.events as f64
    };
    format!(
        "{} ({} {} in {} usec) {:.2} avg_batch {} min_space",
        fmt_unit(per_second(iv.pkts as f64, iv.ns), 3, "pps"),
        fmt_unit(iv.pkts as f64, 3, "pkts"),
        fmt_unit(per_second(iv.bytes as f64 * 8.0, iv.ns), 1, "bps"),
        iv.ns / 1000,
        avg_batch,
        iv.min_space,
    )
}

/// An interval's round trips: `rtt min X avg Y max Z ns`, or a note that
/// no reply came.
pub fn rtt_line(rtt: &IntervalRtt) -> String {
    if rtt.count == 0 {
        return "rtt: no replies".to_string();
    }
    format!(
        "rtt min {} avg {} max {} ns",
        rtt.min_ns,
        rtt.sum_ns / rtt.count,
        rtt.max_ns
    )
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

/// The closing lines for a report.
pub fn closing(r: &Report) -> String {
    let ns = (r.seconds * 1e9) as u64;
    let verb = match r.mode {
        Mode::Tx | Mode::Txseq => "Sent",
        Mode::Rx | Mode::Rxseq => "Received",
        Mode::Pong => "Bounced",
        Mode::Ping => "Round trips:",
    };
    let mut s = summary(verb, r.packets, r.bytes, r.events, ns);
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
            interval_line(&iv),
            "1.240 Mpps (1.240 Mpkts 595.1 Mbps in 1000123 usec) 511.97 avg_batch 0 min_space"
        );
        let idle = Interval {
            ns: 1_000_000_000,
            ..Interval::default()
        };
        assert_eq!(
            interval_line(&idle),
            "0.000 pps (0.000 pkts 0.0 bps in 1000000 usec) 0.00 avg_batch 0 min_space"
        );
        assert_eq!(
            interval_line(&Interval::default()),
            "0.000 pps (0.000 pkts 0.0 bps in 0 usec) 0.00 avg_batch 0 min_space"
        );
    }

    #[test]
    fn rtt_lines() {
        let mut i = IntervalRtt::default();
        assert_eq!(rtt_line(&i), "rtt: no replies");
        i.record(100);
        i.record(300);
        assert_eq!(rtt_line(&i), "rtt min 100 avg 200 max 300 ns");
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
            "rx on pipe}1: burst 512, adaptive wait"
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
            .ends_with("adaptive wait, 2 threads on TX rings 0-1 (TX rings 2-3 unused)"));
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
