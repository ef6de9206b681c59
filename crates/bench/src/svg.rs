//! A small SVG writer: the few elements the plots need, coordinates with
//! one decimal, every text escaped. Same calls, same bytes.

use std::fmt::Write as _;

use crate::text::xml;

/// A coordinate or length with one decimal (no `-0.0`).
pub fn c(v: f64) -> String {
    let s = format!("{v:.1}");
    if s == "-0.0" {
        "0.0".to_string()
    } else {
        s
    }
}

/// Where a text is anchored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// At its start.
    Start,
    /// At its middle.
    Middle,
    /// At its end.
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Stroke of a line: color, width, dash pattern (empty for solid).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stroke<'a> {
    /// CSS color.
    pub color: &'a str,
    /// Width in pixels.
    pub width: f64,
    /// `stroke-dasharray`, empty for a solid line.
    pub dash: &'a str,
}

impl Stroke<'_> {
    fn attrs(&self) -> String {
        let mut s = format!(
            r#"stroke="{}" stroke-width="{}""#,
            xml(self.color),
            c(self.width)
        );
        if !self.dash.is_empty() {
            let _ = write!(s, r#" stroke-dasharray="{}""#, xml(self.dash));
        }
        s
    }
}

/// `points` as an SVG `points` list.
fn point_list(points: &[(f64, f64)]) -> String {
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{},{}", c(*x), c(*y)))
        .collect();
    pts.join(" ")
}

/// An SVG document being written.
pub struct Svg {
    out: String,
}

impl Svg {
    /// A document of `width` × `height` pixels on a white background.
    pub fn new(width: f64, height: f64) -> Svg {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#,
            w = c(width),
            h = c(height)
        );
        let _ = writeln!(
            out,
            r#"<rect x="0" y="0" width="{}" height="{}" fill="white"/>"#,
            c(width),
            c(height)
        );
        Svg { out }
    }

    /// A straight line.
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: Stroke) {
        let at = [("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)];
        self.shape("line", &at, &stroke.attrs());
    }

    /// A line through `points`, not filled.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: Stroke) {
        let rest = format!(
            r#"points="{}" fill="none" {} stroke-linejoin="round""#,
            point_list(points),
            stroke.attrs()
        );
        self.shape("polyline", &[], &rest);
    }

    /// A rectangle, outlined or filled (`fill` "none" for an outline).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: Option<Stroke>) {
        let at = [("x", x), ("y", y), ("width", w), ("height", h)];
        let rest = format!(
            r#"fill="{}"{}"#,
            xml(fill),
            stroke.map_or(String::new(), |s| format!(" {}", s.attrs()))
        );
        self.shape("rect", &at, &rest);
    }

    /// A filled circle.
    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str) {
        let at = [("cx", x), ("cy", y), ("r", r)];
        self.shape("circle", &at, &format!(r#"fill="{}""#, xml(fill)));
    }

    /// A filled polygon.
    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str) {
        let rest = format!(r#"points="{}" fill="{}""#, point_list(points), xml(fill));
        self.shape("polygon", &[], &rest);
    }

    /// An empty element `name`: its coordinate attributes `at` (each value
    /// through [`c`]), then the attributes `rest` as written.
    fn shape(&mut self, name: &str, at: &[(&str, f64)], rest: &str) {
        let _ = write!(self.out, "<{name}");
        for (k, v) in at {
            let _ = write!(self.out, r#" {k}="{}""#, c(*v));
        }
        let _ = writeln!(self.out, " {rest}/>");
    }

    /// A text at (`x`, `y`) (baseline), rotated by `rotate` degrees about
    /// that point.
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        anchor: Anchor,
        bold: bool,
        rotate: f64,
        content: &str,
    ) {
        let mut attrs = format!(
            r#"x="{}" y="{}" font-size="{}" text-anchor="{}""#,
            c(x),
            c(y),
            c(size),
            anchor.as_str()
        );
        if bold {
            attrs.push_str(r#" font-weight="bold""#);
        }
        if rotate != 0.0 {
            let _ = write!(
                attrs,
                r#" transform="rotate({} {} {})""#,
                c(rotate),
                c(x),
                c(y)
            );
        }
        let _ = writeln!(self.out, "<text {attrs}>{}</text>", xml(content));
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_text_and_closes() {
        let mut s = Svg::new(100.0, 50.0);
        s.text(1.0, 2.0, 10.0, Anchor::Start, false, 0.0, "a < b & \"c\"");
        s.line(
            0.0,
            -0.01,
            1.0,
            1.0,
            Stroke {
                color: "#000",
                width: 1.0,
                dash: "4 2",
            },
        );
        let out = s.finish();
        assert!(out.starts_with("<svg "));
        assert!(out.ends_with("</svg>\n"));
        assert!(out.contains(">a &lt; b &amp; &quot;c&quot;</text>"));
        assert!(out.contains(r#"y1="0.0""#));
        assert!(out.contains(r#"stroke-dasharray="4 2""#));
    }
}
