//! Small text helpers: numbers with three significant digits, file-name
//! slugs, XML and Markdown escaping.

/// Formats a figure with three significant digits, without scientific
/// notation: 86.1, 0.501, 17.0, 0.0300, and whole numbers from 1000 up
/// (1234).
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "—".to_string();
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".to_string();
    }
    let s = if a >= 999.5 {
        format!("{v:.0}")
    } else {
        let mag = a.log10().floor() as i32;
        let mut decimals = (2 - mag).clamp(0, 12) as usize;
        // Rounding may carry into the next power of ten (9.996 -> 10.0).
        let rounded: f64 = format!("{a:.decimals$}").parse().unwrap_or(a);
        if rounded >= 10f64.powi(mag + 1) && decimals > 0 {
            decimals -= 1;
        }
        format!("{v:.decimals$}")
    };
    if s.trim_start_matches(['-', '0', '.']).is_empty() {
        "0".to_string()
    } else {
        s
    }
}

/// [`num`] without trailing zeros after the point, for axis ticks and
/// x values: 20, 0.5, 1.25.
pub fn short(v: f64) -> String {
    let s = num(v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A file-name slug: lowercase ASCII letters and digits, runs of anything
/// else as one `-`, none at either end; `x` if nothing is left.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push('x');
    }
    out
}

/// Escapes the five XML special characters.
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// A Markdown table cell: `|` escaped so the row keeps its columns.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        let cases = [
            (86.1234, "86.1"),
            (136.4, "136"),
            (0.50149, "0.501"),
            (1234.4, "1234"),
            (28412.6, "28413"),
            (17.0, "17.0"),
            (5.05, "5.05"),
            (0.03, "0.0300"),
            (0.000123456, "0.000123"),
            (9.996, "10.0"),
            (99.96, "100"),
            (999.7, "1000"),
            (0.0, "0"),
            (-2.3456, "-2.35"),
            (-0.0001, "-0.000100"),
            (4.0404, "4.04"),
            (1e9, "1000000000"),
        ];
        for (v, want) in cases {
            assert_eq!(num(v), want, "num({v})");
        }
        assert!(!num(1e-7).contains('e'));
        assert_eq!(num(f64::NAN), "—");
        assert_eq!(short(20.0), "20");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(512.0), "512");
        assert_eq!(short(1.25), "1.25");
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("process to process, 60 B"), "process-to-process-60-b");
        assert_eq!(slug("  OVS-DPDK (memif ports)!"), "ovs-dpdk-memif-ports");
        assert_eq!(slug("switch, 2 ports — 60 B"), "switch-2-ports-60-b");
        assert_eq!(slug("***"), "x");
    }

    #[test]
    fn escaping() {
        assert_eq!(
            xml(r#"a<b> & "c" 'd'"#),
            "a&lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;"
        );
        assert_eq!(xml("plain, 60 B"), "plain, 60 B");
        assert_eq!(cell("a|b"), "a\\|b");
    }
}
