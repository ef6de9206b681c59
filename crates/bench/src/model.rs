//! Aggregation: the samples grouped by (section, case, system, metric, x),
//! each group summed up as a [`Figure`] (median, min, max, n), arranged by
//! section in report order, cases and systems in first-appearance order.

use std::collections::HashMap;

use crate::input::{Better, Sample};

/// The known sections, in report order, with their titles.
pub const SECTIONS: &[(&str, &str)] = &[
    ("throughput", "Throughput"),
    ("switch", "Through a switch"),
    ("vm", "VM-style clients: virtio_user"),
    ("passthrough", "Passthrough vs vhost-user, TCG guest"),
    ("nic", "NIC ports on a veth pair"),
    ("flows", "OpenFlow tables"),
    ("latency", "Round-trip latency"),
    ("efficiency", "CPU cost per packet"),
    ("idle", "CPU use with all clients idle"),
    ("memory", "Daemon memory"),
    ("batch", "Throughput against batch size"),
    ("load", "CPU use against offered load"),
    ("defaults", "The default wait against its references"),
];

/// Sections drawn as plots against x.
pub const SWEEPS: &[&str] = &["batch", "load"];

/// The title of a section: its known title, or its id.
pub fn title(id: &str) -> &str {
    SECTIONS
        .iter()
        .find(|(i, _)| *i == id)
        .map_or(id, |(_, t)| t)
}

/// Whether a system is ringswitch (its name starts with `ringswitch`).
pub fn is_ringswitch(system: &str) -> bool {
    system.starts_with("ringswitch")
}

/// The median of `values` (mean of the two middle ones for an even count),
/// `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A figure summed up over its runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figure {
    /// Median over the runs.
    pub median: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
    /// Number of runs.
    pub n: usize,
}

impl Figure {
    /// The figure of some runs, `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Figure> {
        Some(Figure {
            median: median(values)?,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n: values.len(),
        })
    }
}

/// What a metric is.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// Its name (`received Mpps`).
    pub name: String,
    /// Its unit (`Mpps`).
    pub unit: String,
    /// Which way is better.
    pub better: Better,
}

/// One metric of a table case: a figure per system.
#[derive(Clone, Debug, PartialEq)]
pub struct TableMetric {
    /// The metric.
    pub metric: Metric,
    /// (system, figure) in first-appearance order.
    pub systems: Vec<(String, Figure)>,
}

/// A case shown as a table.
#[derive(Clone, Debug, PartialEq)]
pub struct TableCase {
    /// The case, with `, x = X` when its samples have an x.
    pub label: String,
    /// Its metrics in first-appearance order.
    pub metrics: Vec<TableMetric>,
}

/// A point of a plotted line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Batch size or offered load.
    pub x: f64,
    /// The figure there.
    pub fig: Figure,
}

/// One system's line in a plot, points in increasing x.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The system.
    pub system: String,
    /// Its points.
    pub points: Vec<Point>,
}

/// One metric of a plotted case: a line per system.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotMetric {
    /// The metric.
    pub metric: Metric,
    /// Lines in first-appearance order of their systems.
    pub series: Vec<Series>,
}

/// A case of a sweep section, drawn as a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotCase {
    /// The case.
    pub case: String,
    /// Its metrics (one plot each).
    pub metrics: Vec<PlotMetric>,
}

/// A section with data.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// Its id.
    pub id: String,
    /// Cases shown as tables.
    pub tables: Vec<TableCase>,
    /// Cases drawn as plots (sweep sections only).
    pub plots: Vec<PlotCase>,
}

impl Section {
    /// Whether the section is a sweep (batch, load).
    pub fn is_sweep(&self) -> bool {
        SWEEPS.contains(&self.id.as_str())
    }
}

/// The first entry of `v` for which `is` holds, appending `new()` when there
/// is none.
fn entry<T>(v: &mut Vec<T>, is: impl Fn(&T) -> bool, new: impl FnOnce() -> T) -> &mut T {
    let i = match v.iter().position(is) {
        Some(i) => i,
        None => {
            v.push(new());
            v.len() - 1
        }
    };
    &mut v[i]
}

/// Groups the samples and sums each group up; sections in report order
/// (known ones first, unknown ones after in first-appearance order).
pub fn aggregate(samples: &[Sample]) -> Vec<Section> {
    // Groups in first-appearance order.
    type Key<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut groups: Vec<(&Sample, Vec<f64>)> = Vec::new();
    for s in samples {
        let key = (
            s.section.as_str(),
            s.case.as_str(),
            s.system.as_str(),
            s.metric.as_str(),
            s.x.text.as_str(),
        );
        let i = *index.entry(key).or_insert_with(|| {
            groups.push((s, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(s.value);
    }

    let mut sections: Vec<Section> = Vec::new();
    for (s, values) in &groups {
        let Some(fig) = Figure::of(values) else {
            continue;
        };
        let section = entry(
            &mut sections,
            |x| x.id == s.section,
            || Section {
                id: s.section.clone(),
                tables: Vec::new(),
                plots: Vec::new(),
            },
        );
        let metric = || Metric {
            name: s.metric.clone(),
            unit: s.unit.clone(),
            better: s.better,
        };
        match s.x.value {
            Some(x) if section.is_sweep() => {
                let case = entry(
                    &mut section.plots,
                    |c| c.case == s.case,
                    || PlotCase {
                        case: s.case.clone(),
                        metrics: Vec::new(),
                    },
                );
                let m = entry(
                    &mut case.metrics,
                    |m| m.metric.name == s.metric,
                    || PlotMetric {
                        metric: metric(),
                        series: Vec::new(),
                    },
                );
                let series = entry(
                    &mut m.series,
                    |l| l.system == s.system,
                    || Series {
                        system: s.system.clone(),
                        points: Vec::new(),
                    },
                );
                series.points.push(Point { x, fig });
            }
            _ => {
                let label = match s.x.value {
                    Some(_) => format!("{}, x = {}", s.case, s.x.text),
                    None => s.case.clone(),
                };
                let case = entry(
                    &mut section.tables,
                    |c| c.label == label,
                    || TableCase {
                        label: label.clone(),
                        metrics: Vec::new(),
                    },
                );
                let m = entry(
                    &mut case.metrics,
                    |m| m.metric.name == s.metric,
                    || TableMetric {
                        metric: metric(),
                        systems: Vec::new(),
                    },
                );
                m.systems.push((s.system.clone(), fig));
            }
        }
    }
    for section in &mut sections {
        for case in &mut section.plots {
            for m in &mut case.metrics {
                for series in &mut m.series {
                    series.points.sort_by(|a, b| a.x.total_cmp(&b.x));
                }
            }
        }
    }
    let rank = |id: &str| {
        SECTIONS
            .iter()
            .position(|(i, _)| *i == id)
            .unwrap_or(SECTIONS.len())
    };
    // A stable sort keeps unknown sections in first-appearance order.
    sections.sort_by_key(|s| rank(&s.id));
    sections
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::parse_samples;
    use std::path::Path;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[10.0, 20.0]), Some(15.0));
        let f = Figure::of(&[86.9, 85.4, 86.1]).unwrap();
        assert_eq!((f.median, f.min, f.max, f.n), (86.1, 85.4, 86.9, 3));
    }

    #[test]
    fn grouping_and_order() {
        let text = "section\tcase\tsystem\tmetric\tunit\tbetter\tx\trun\tvalue\n\
            mystery\tc\tringswitch a\tm\tu\t-\t-\t1\t1\n\
            batch\tb\tringswitch pipe\tMpps\tMpps\thigher\t64\t1\t9\n\
            batch\tb\tringswitch pipe\tMpps\tMpps\thigher\t1\t1\t2\n\
            throughput\tz case\tpeer\tMpps\tMpps\thigher\t-\t1\t20\n\
            throughput\ta case\tringswitch pipe\tMpps\tMpps\thigher\t-\t1\t80\n\
            throughput\tz case\tringswitch pipe\tMpps\tMpps\thigher\t-\t1\t86\n\
            throughput\tz case\tringswitch pipe\tMpps\tMpps\thigher\t-\t2\t88\n\
            latency\tping\tpeer\tRTT\tns\tlower\t8\t1\t900\n";
        let s = parse_samples(Path::new("samples.tsv"), text).unwrap();
        let sec = aggregate(&s);
        let ids: Vec<&str> = sec.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["throughput", "latency", "batch", "mystery"]);
        let t = &sec[0];
        assert_eq!(t.tables[0].label, "z case");
        assert_eq!(t.tables[1].label, "a case");
        let z = &t.tables[0].metrics[0].systems;
        assert_eq!(z[0].0, "peer");
        assert_eq!(z[1].0, "ringswitch pipe");
        assert_eq!(z[1].1.median, 87.0);
        assert_eq!(sec[1].tables[0].label, "ping, x = 8");
        let b = &sec[2].plots[0].metrics[0].series[0];
        assert_eq!(
            b.points.iter().map(|p| p.x).collect::<Vec<_>>(),
            [1.0, 64.0]
        );
        assert_eq!(title("mystery"), "mystery");
        assert_eq!(title("vm"), "VM-style clients: virtio_user");
    }
}
