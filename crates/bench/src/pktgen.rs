//! The JSON report `ringswitch pkt-gen --json` prints as the last line of
//! its stdout, read field by field. Nothing in it is trusted: a missing or
//! mistyped field is `None`, never a panic.

use serde_json::Value;

/// The fields of a pkt-gen report that the benchmarks use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Packets per second (from the first to the last packet).
    pub pps: Option<f64>,
    /// Packets sent, received or bounced.
    pub packets: Option<u64>,
    /// The process's user + system CPU seconds.
    pub cpu_seconds: Option<f64>,
    /// Round-trip times of a ping, in ns.
    pub rtt: Rtt,
    /// Pings without a reply.
    pub lost: Option<u64>,
    /// One thread's waits that slept on the port's interrupt.
    pub sleeps: Option<u64>,
    /// One thread's adaptive waits whose spin found work first.
    pub spins_won: Option<u64>,
    /// One thread's adaptive spins cut short for another thread.
    pub spins_gave_way: Option<u64>,
}

impl Report {
    /// `sleeps S, spins won W, gave way G` for the log (`?` where the
    /// report has no such field).
    pub fn waits(&self) -> String {
        let t = |v: Option<u64>| v.map_or("?".to_owned(), |v| v.to_string());
        format!(
            "sleeps {}, spins won {}, gave way {}",
            t(self.sleeps),
            t(self.spins_won),
            t(self.spins_gave_way)
        )
    }
}

/// Round-trip percentiles of a ping, in ns, as the report writes them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rtt {
    /// Median.
    pub p50: Option<String>,
    /// Mean.
    pub avg: Option<String>,
    /// Shortest.
    pub min: Option<String>,
    /// 99th percentile.
    pub p99: Option<String>,
}

impl Report {
    /// The report on the last non-empty line of `stdout`, if that line is
    /// a JSON object.
    pub fn from_stdout(stdout: &str) -> Option<Report> {
        let last = stdout.lines().rfind(|l| !l.trim().is_empty())?.trim();
        if !last.starts_with('{') {
            return None;
        }
        let v: Value = serde_json::from_str(last).ok()?;
        let f = |k: &str| v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
        let u = |k: &str| v.get(k).and_then(Value::as_u64);
        let n = |k: &str| match v.get(k) {
            Some(Value::Number(x)) if x.as_f64().is_some_and(f64::is_finite) => Some(x.to_string()),
            _ => None,
        };
        Some(Report {
            pps: f("pps"),
            packets: u("packets"),
            cpu_seconds: f("cpu_seconds"),
            rtt: Rtt {
                p50: n("rtt_ns_p50"),
                avg: n("rtt_ns_avg"),
                min: n("rtt_ns_min"),
                p99: n("rtt_ns_p99"),
            },
            lost: u("lost"),
            sleeps: u("sleeps"),
            spins_won: u("spins_won"),
            spins_gave_way: u("spins_gave_way"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_counters() {
        let r = Report::from_stdout(
            "{\"pps\":1.5,\"packets\":3,\"sleeps\":12,\"spins_won\":7,\"spins_gave_way\":0}\n",
        )
        .unwrap();
        assert_eq!(
            (r.sleeps, r.spins_won, r.spins_gave_way),
            (Some(12), Some(7), Some(0))
        );
        assert_eq!(r.waits(), "sleeps 12, spins won 7, gave way 0");
        let old = Report::from_stdout("{\"pps\":1.5}").unwrap();
        assert_eq!(old.waits(), "sleeps ?, spins won ?, gave way ?");
    }
}
