//! The arithmetic of a run's figures, on numbers its processes reported:
//! rates in Mpps, CPU per million packets, CPU as a share of a core
//! (medians of runs: [`crate::model::median`]). Each returns the text written to `samples.tsv`, with the
//! precision bench/compare has always used.

/// Packets per second as Mpps with three decimals.
pub fn mpps(pps: f64) -> String {
    format!("{:.3}", pps / 1e6)
}

/// CPU seconds per million packets, four decimals; `None` without packets.
pub fn per_mpkt(cpu_s: f64, packets: u64) -> Option<String> {
    (packets > 0).then(|| format!("{:.4}", cpu_s / (packets as f64 / 1e6)))
}

/// CPU `ticks` over `secs` seconds as % of one core, two decimals; `None`
/// for an empty window.
pub fn pct_of_core(ticks: u64, hz: f64, secs: f64) -> Option<String> {
    (secs > 0.0 && hz > 0.0).then(|| format!("{:.2}", 100.0 * ticks as f64 / hz / secs))
}

/// CPU seconds of `ticks` clock ticks, four decimals.
pub fn tick_seconds(ticks: u64, hz: f64) -> f64 {
    let s = ticks as f64 / hz;
    (s * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_costs() {
        assert_eq!(mpps(86_123_456.0), "86.123");
        assert_eq!(mpps(0.0), "0.000");
        assert_eq!(per_mpkt(0.5, 10_000_000).as_deref(), Some("0.0500"));
        assert_eq!(per_mpkt(0.5, 0), None);
        assert_eq!(pct_of_core(25, 100.0, 5.0).as_deref(), Some("5.00"));
        assert_eq!(pct_of_core(25, 100.0, 0.0), None);
        assert_eq!(tick_seconds(123, 100.0), 1.23);
    }
}
