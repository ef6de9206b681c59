//! Line plots of a sweep (throughput against batch size, CPU against
//! offered load): one line with markers per system at the medians,
//! min–max whiskers, axis titles, a title and a legend.

use crate::model::Point;
use crate::svg::{Anchor, Stroke, Svg};
use crate::text::short;

/// How x is laid out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum XScale {
    /// log2, with a tick at every x present (batch sizes).
    Log2,
    /// Linear over at least `min..max`, with nice ticks (offered load).
    Linear {
        /// Smallest x shown.
        min: f64,
        /// Largest x shown.
        max: f64,
    },
}

/// One system's line.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// The system, for the legend.
    pub name: &'a str,
    /// Whether it is ringswitch (solid) or a peer (dashed).
    pub ringswitch: bool,
    /// Its points, x increasing.
    pub points: &'a [Point],
}

/// What to draw.
#[derive(Clone, Debug)]
pub struct Plot<'a> {
    /// The title (the case).
    pub title: &'a str,
    /// The x axis title.
    pub x_title: &'a str,
    /// The y axis title.
    pub y_title: &'a str,
    /// The x scale.
    pub x_scale: XScale,
    /// The lines.
    pub lines: Vec<Line<'a>>,
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
const DASHES: &[&str] = &["7 4", "2 3", "9 3 2 3", "4 4"];

const WIDTH: f64 = 760.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = WIDTH - 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 330.0;
const PAD: f64 = 16.0;
const GRID: Stroke = Stroke {
    color: "#dddddd",
    width: 1.0,
    dash: "",
};
const AXIS: Stroke = Stroke {
    color: "#333333",
    width: 1.0,
    dash: "",
};

/// Nice ticks over `lo..hi`: (first, last, step), the step 1, 2 or 5 times
/// a power of ten, four to ten intervals.
pub fn nice_ticks(lo: f64, hi: f64) -> (f64, f64, f64) {
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
    let raw = (hi - lo) / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = mag
        * if norm <= 1.0 {
            1.0
        } else if norm <= 2.0 {
            2.0
        } else if norm <= 5.0 {
            5.0
        } else {
            10.0
        };
    let first = (lo / step).floor() * step;
    let last = (hi / step - 1e-9).ceil() * step;
    (first, last, step)
}

fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (first, last, step) = nice_ticks(lo, hi);
    let n = ((last - first) / step).round() as usize;
    (0..=n).map(|i| first + i as f64 * step).collect()
}

fn marker(svg: &mut Svg, shape: usize, x: f64, y: f64, color: &str) {
    match shape % 4 {
        0 => svg.circle(x, y, 4.0, color),
        1 => svg.rect(x - 3.5, y - 3.5, 7.0, 7.0, color, None),
        2 => svg.polygon(
            &[(x, y - 5.0), (x + 4.5, y + 3.5), (x - 4.5, y + 3.5)],
            color,
        ),
        _ => svg.polygon(
            &[(x, y - 5.0), (x + 5.0, y), (x, y + 5.0), (x - 5.0, y)],
            color,
        ),
    }
}

/// Renders the plot as an SVG document.
pub fn render(p: &Plot) -> String {
    let all = || p.lines.iter().flat_map(|l| l.points.iter());
    let xs: Vec<f64> = {
        let mut v: Vec<f64> = all().map(|pt| pt.x).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let log = p.x_scale == XScale::Log2 && xs.iter().all(|x| *x > 0.0);

    // x: domain and ticks.
    let (x_lo, x_hi, x_ticks): (f64, f64, Vec<f64>) = if log {
        let lo = xs.first().map_or(0.0, |x| x.log2());
        let hi = xs.last().map_or(1.0, |x| x.log2());
        let (lo, hi) = if hi > lo {
            (lo, hi)
        } else {
            (lo - 1.0, hi + 1.0)
        };
        (lo, hi, xs.clone())
    } else {
        let (min, max) = match p.x_scale {
            XScale::Linear { min, max } => (min, max),
            XScale::Log2 => (0.0, 0.0),
        };
        let lo = xs.iter().copied().fold(min, f64::min);
        let hi = xs.iter().copied().fold(max, f64::max);
        let t = ticks(lo, hi);
        let first = t.first().copied().unwrap_or(lo);
        let last = t.last().copied().unwrap_or(hi);
        (first, last, t)
    };
    let fx = |x: f64| {
        let v = if log { x.log2() } else { x };
        LEFT + PAD + (v - x_lo) / (x_hi - x_lo) * (RIGHT - LEFT - 2.0 * PAD)
    };

    // y: from 0 (or below, for negative figures) to the highest whisker.
    let y_min = all().map(|pt| pt.fig.min).fold(0.0, f64::min);
    let y_max = all().map(|pt| pt.fig.max).fold(y_min, f64::max);
    // Headroom, so that points at the top stay off the frame.
    let y_ticks = ticks(y_min, y_max + (y_max - y_min) * 0.04);
    let y_lo = y_ticks.first().copied().unwrap_or(0.0);
    let y_hi = y_ticks.last().copied().unwrap_or(1.0);
    let fy = |y: f64| BOTTOM - (y - y_lo) / (y_hi - y_lo) * (BOTTOM - TOP);

    let legend_top = BOTTOM + 62.0;
    let height = legend_top + 20.0 * p.lines.len() as f64 + 30.0;
    let mut svg = Svg::new(WIDTH, height);
    svg.text(WIDTH / 2.0, 28.0, 16.0, Anchor::Middle, true, 0.0, p.title);

    // Grid, ticks and labels.
    for &t in &y_ticks {
        let y = fy(t);
        svg.line(LEFT, y, RIGHT, y, GRID);
        svg.line(LEFT - 5.0, y, LEFT, y, AXIS);
        svg.text(
            LEFT - 8.0,
            y + 4.0,
            11.0,
            Anchor::End,
            false,
            0.0,
            &short(t),
        );
    }
    let mut last_label = f64::NEG_INFINITY;
    for &t in &x_ticks {
        let x = fx(t);
        svg.line(x, TOP, x, BOTTOM, GRID);
        svg.line(x, BOTTOM, x, BOTTOM + 5.0, AXIS);
        // Labels closer than this would overlap; the tick stays.
        if x - last_label >= 28.0 {
            svg.text(
                x,
                BOTTOM + 18.0,
                11.0,
                Anchor::Middle,
                false,
                0.0,
                &short(t),
            );
            last_label = x;
        }
    }
    svg.rect(LEFT, TOP, RIGHT - LEFT, BOTTOM - TOP, "none", Some(AXIS));
    svg.text(
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0,
        13.0,
        Anchor::Middle,
        false,
        0.0,
        p.x_title,
    );
    let mid = (TOP + BOTTOM) / 2.0;
    svg.text(22.0, mid, 13.0, Anchor::Middle, false, -90.0, p.y_title);

    // Lines, whiskers, markers; then the legend.
    let mut peer = 0;
    for (i, l) in p.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dash = if l.ringswitch {
            ""
        } else {
            peer += 1;
            DASHES[(peer - 1) % DASHES.len()]
        };
        let stroke = Stroke {
            color,
            width: 2.0,
            dash,
        };
        let solid = Stroke {
            color,
            width: 1.2,
            dash: "",
        };
        if l.points.len() > 1 {
            let pts: Vec<(f64, f64)> = l
                .points
                .iter()
                .map(|pt| (fx(pt.x), fy(pt.fig.median)))
                .collect();
            svg.polyline(&pts, stroke);
        }
        for pt in l.points {
            let x = fx(pt.x);
            if pt.fig.n > 1 && pt.fig.max > pt.fig.min {
                svg.line(x, fy(pt.fig.min), x, fy(pt.fig.max), solid);
                svg.line(x - 3.0, fy(pt.fig.min), x + 3.0, fy(pt.fig.min), solid);
                svg.line(x - 3.0, fy(pt.fig.max), x + 3.0, fy(pt.fig.max), solid);
            }
            marker(&mut svg, i, x, fy(pt.fig.median), color);
        }
        let y = legend_top + 20.0 * i as f64;
        svg.line(LEFT, y, LEFT + 36.0, y, stroke);
        marker(&mut svg, i, LEFT + 18.0, y, color);
        svg.text(
            LEFT + 46.0,
            y + 4.0,
            12.0,
            Anchor::Start,
            false,
            0.0,
            l.name,
        );
    }
    svg.text(
        LEFT,
        legend_top + 20.0 * p.lines.len() as f64 + 6.0,
        10.0,
        Anchor::Start,
        false,
        0.0,
        "markers: median of the runs; bars: min–max",
    );
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Figure;

    #[test]
    fn nice() {
        assert_eq!(nice_ticks(0.0, 100.0), (0.0, 100.0, 20.0));
        assert_eq!(nice_ticks(0.0, 136.4), (0.0, 140.0, 20.0));
        assert_eq!(nice_ticks(0.0, 17.3), (0.0, 20.0, 5.0));
        let (first, last, step) = nice_ticks(0.0, 0.0);
        assert_eq!(first, 0.0);
        assert!((step - 0.2).abs() < 1e-12 && (last - 1.0).abs() < 1e-9);
    }

    #[test]
    fn deterministic_with_single_point_and_escapes() {
        let fig = |m: f64| Figure {
            median: m,
            min: m - 1.0,
            max: m + 1.0,
            n: 3,
        };
        let a = [
            Point {
                x: 1.0,
                fig: fig(5.0),
            },
            Point {
                x: 512.0,
                fig: fig(80.0),
            },
        ];
        let b = [Point {
            x: 32.0,
            fig: fig(4.0),
        }];
        let plot = Plot {
            title: "p2p <60 B>",
            x_title: "batch size (packets per sync)",
            y_title: "received Mpps (Mpps)",
            x_scale: XScale::Log2,
            lines: vec![
                Line {
                    name: "ringswitch pipe",
                    ringswitch: true,
                    points: &a,
                },
                Line {
                    name: "OVS & co",
                    ringswitch: false,
                    points: &b,
                },
            ],
        };
        let one = render(&plot);
        assert_eq!(one, render(&plot));
        assert!(one.contains(">p2p &lt;60 B&gt;</text>"));
        assert!(one.contains(">OVS &amp; co</text>"));
        assert!(one.contains(">512</text>") && one.contains(">32</text>"));
        assert!(one.contains("stroke-dasharray=\"7 4\""));
        // One polyline: the single-point system is markers only.
        assert_eq!(one.matches("<polyline").count(), 1);
    }
}
