//! `/metrics`: a snapshot in Prometheus's exposition format, written by
//! the official client library (prometheus-client) through a custom
//! [`Collector`] that reads the one snapshot of this scrape: ports come
//! and go, and no metric object outlives the response.
//!
//! Names follow Prometheus's conventions: the `ringswitch_` prefix, the
//! unit in the name (`_bytes`, `_seconds`), `_total` on counters, one
//! metric with a `reason` label for the drop counters (so that their sum
//! is meaningful). Port series carry `switch`, `port` (the whole name,
//! `vale0:a`, as `ctl` prints it) and `kind`.
//!
//! The library writes the OpenMetrics text format, which is what
//! Prometheus asks for; a client that does not ask for it (promtool,
//! curl) gets Prometheus's text format 0.0.4 ([`classic`]), as the
//! official Go client negotiates.

use std::collections::HashMap;
use std::fmt::{self, Write};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::MetricType;
use ringswitch_control::proto::{PortKind, PortStats, BATCH_SIZE_BUCKETS};

use super::snapshot::Snapshot;
use super::{HttpCounters, Status};

/// The OpenMetrics content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prometheus's text format.
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition of `snap` and the listener's own counters: its content
/// type and text, OpenMetrics if `openmetrics`, else Prometheus's text
/// format.
pub fn render(
    snap: Arc<Snapshot>,
    http: HttpCounters,
    openmetrics: bool,
) -> (&'static str, String) {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Scrape { snap, http }));
    let mut out = String::with_capacity(32 * 1024);
    // Writing into a String does not fail, and the collector returns no
    // error of its own.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    if openmetrics {
        (OPENMETRICS, out)
    } else {
        (TEXT, classic(&out))
    }
}

/// OpenMetrics text as Prometheus's text format 0.0.4: a counter's HELP
/// and TYPE lines name its samples (`x_total`, where OpenMetrics names the
/// family `x`), and there are no `# UNIT` and `# EOF` lines. Histograms
/// and gauges read the same in both.
pub fn classic(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<&str> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some(h) = help.replace(rest) {
                let _ = writeln!(out, "# HELP {h}");
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (suffix, ty) = match ty {
                "counter" => ("_total", ty),
                "unknown" => ("", "untyped"),
                _ => ("", ty),
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                let _ = writeln!(out, "# HELP {name}{suffix} {text}");
            }
            let _ = writeln!(out, "# TYPE {name}{suffix} {ty}");
            continue;
        }
        if let Some(h) = help.take() {
            let _ = writeln!(out, "# HELP {h}");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A label value, escaped as both formats want (`\`, `"` and newlines):
/// the library writes values as they are.
#[derive(Clone, Copy, Debug)]
struct Esc<'a>(&'a str);

impl EncodeLabelValue for Esc<'_> {
    fn encode(&self, e: &mut LabelValueEncoder) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => e.write_str("\\\\")?,
                '"' => e.write_str("\\\"")?,
                '\n' => e.write_str("\\n")?,
                c => e.write_char(c)?,
            }
        }
        Ok(())
    }
}

type Labels<'a> = Vec<(&'static str, Esc<'a>)>;

/// A sample's value.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(u64),
    Real(f64),
}

fn seconds(ns: u64) -> Num {
    Num::Real(ns as f64 / 1e9)
}

/// One family of counters (nothing when it has no samples).
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, Num)],
) -> fmt::Result {
    family(enc, name, help, MetricType::Counter, rows)
}

/// One family of gauges (nothing when it has no samples).
fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, Num)],
) -> fmt::Result {
    family(enc, name, help, MetricType::Gauge, rows)
}

/// One family of counters or gauges, its samples with their labels.
fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    ty: MetricType,
    rows: &[(Labels, Num)],
) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let counter = matches!(ty, MetricType::Counter);
    let mut m = enc.encode_descriptor(name, help, None, ty)?;
    for (labels, v) in rows {
        sample(&mut m, labels, |s| match (counter, v) {
            (true, Num::Int(n)) => s.encode_counter::<(), _, u64>(n, None),
            (true, Num::Real(x)) => s.encode_counter::<(), _, f64>(x, None),
            (false, Num::Int(n)) => s.encode_gauge(&i64::try_from(*n).unwrap_or(i64::MAX)),
            (false, Num::Real(x)) => s.encode_gauge(x),
        })?;
    }
    Ok(())
}

/// One sample of a family, with its labels (none: the bare name, not
/// `name{}`).
fn sample(
    m: &mut MetricEncoder,
    labels: &Labels,
    put: impl FnOnce(&mut MetricEncoder) -> fmt::Result,
) -> fmt::Result {
    if labels.is_empty() {
        put(m)
    } else {
        put(&mut m.encode_family(labels)?)
    }
}

/// `kind`'s label value (as `ctl port list --json` spells it).
fn kind_name(kind: PortKind) -> &'static str {
    match kind {
        PortKind::Vale => "vale",
        PortKind::Pipe => "pipe",
        PortKind::VhostUser => "vhost-user",
        PortKind::Nic => "nic",
        PortKind::Host => "host",
    }
}

/// A port's `switch`, `port` and `kind` labels.
fn port_labels(name: &str, kind: PortKind) -> Labels<'_> {
    let switch = name.split_once(':').map_or("", |(sw, _)| sw);
    vec![
        ("switch", Esc(switch)),
        ("port", Esc(name)),
        ("kind", Esc(kind_name(kind))),
    ]
}

type Field = fn(&PortStats) -> u64;

/// Every port's counters other than drops: name, help, field.
const PORT_COUNTERS: [(&str, &str, Field); 7] = [
    (
        "ringswitch_port_rx_packets",
        "Frames the switch delivered to the port (into its RX rings, to its guest or its interface).",
        |s| s.rx_packets,
    ),
    (
        "ringswitch_port_rx_bytes",
        "Bytes the switch delivered to the port.",
        |s| s.rx_bytes,
    ),
    (
        "ringswitch_port_tx_packets",
        "Frames the switch took from the port and forwarded to at least one port.",
        |s| s.tx_packets,
    ),
    (
        "ringswitch_port_tx_bytes",
        "Bytes the switch took from the port.",
        |s| s.tx_bytes,
    ),
    (
        "ringswitch_port_rx_segments_added",
        "Frames software segmentation made for the port beyond one per TSO or USO frame (counted in rx_packets or a drop too).",
        |s| s.rx_segments_added,
    ),
    (
        "ringswitch_port_interrupts",
        "Interrupts sent to the port's client (its doorbell) or guest.",
        |s| s.interrupts + s.vm_interrupts,
    ),
    (
        "ringswitch_port_ring_reinits",
        "Times the port's ring pointers were invalid and the ring was reset.",
        |s| s.ring_reinits,
    ),
];

/// The drop counters, one `reason` each: the reason, the field, and
/// whether only interface ports have it.
const DROPS: [(&str, Field, bool); 9] = [
    ("rx_full", |s| s.drop_rx_full, false),
    ("link_down", |s| s.drop_link_down, false),
    ("malformed", |s| s.drop_malformed, false),
    ("short", |s| s.drop_short, false),
    ("long", |s| s.drop_long, false),
    ("no_dest", |s| s.drop_no_dest, false),
    ("vlan", |s| s.drop_vlan, false),
    ("kernel", |s| s.drop_kernel, true),
    ("kernel_tx", |s| s.kernel_tx_invalid, true),
];

const DROPS_HELP: &str = "Frames dropped at the port, by reason. Frames for the port: rx_full \
(its receive ring or queue was full), link_down (nobody behind it). Frames from the port: \
malformed, short, no_dest (no destination), vlan (a VLAN the port does not carry). Either way: \
long. Interface ports: kernel (dropped by the kernel before the switch saw them), kernel_tx \
(refused by the kernel on transmit).";

/// VM ports' own counters.
const VM_COUNTERS: [(&str, &str, Field); 5] = [
    (
        "ringswitch_port_vm_rx_bad_chains",
        "VM ports: receive descriptor chains the guest posted that failed validation.",
        |s| s.vm_rx_bad_chains,
    ),
    (
        "ringswitch_port_vm_ring_errors",
        "VM ports: times the guest's available index ran more than a queue's size ahead.",
        |s| s.vm_ring_errors,
    ),
    (
        "ringswitch_port_vm_interrupts_dropped",
        "VM ports: interrupts dropped because the frontend's call eventfd would have blocked.",
        |s| s.vm_interrupts_dropped,
    ),
    (
        "ringswitch_port_vm_guest_faults",
        "VM ports: times the guest memory faulted under the device.",
        |s| s.vm_guest_faults,
    ),
    (
        "ringswitch_port_vm_frontend_errors",
        "VM ports: frontend connections closed after a vhost-user message the device refused.",
        |s| s.vm_frontend_errors,
    ),
];

/// One scrape: the snapshot and the listener's counters.
#[derive(Debug)]
struct Scrape {
    snap: Arc<Snapshot>,
    http: HttpCounters,
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let s = &*self.snap;
        let kinds: HashMap<&str, PortKind> =
            s.ports.iter().map(|p| (p.name.as_str(), p.kind)).collect();
        let kind = |name: &str| kinds.get(name).copied().unwrap_or(PortKind::Vale);
        let port_labels = |name| port_labels(name, kind(name));
        let rows = |f: Field, only: &dyn Fn(PortKind) -> bool| -> Vec<(Labels, Num)> {
            s.stats
                .iter()
                .filter(|p| only(kind(&p.name)))
                .map(|p| (port_labels(&p.name), Num::Int(f(p))))
                .collect()
        };
        let any = |_: PortKind| true;
        for (name, help, f) in PORT_COUNTERS {
            counters(&mut enc, name, help, &rows(f, &any))?;
        }
        let drops: Vec<(Labels, Num)> = s
            .stats
            .iter()
            .flat_map(|p| {
                let iface = matches!(kind(&p.name), PortKind::Nic | PortKind::Host);
                DROPS
                    .iter()
                    .filter(move |(_, _, only_iface)| iface || !only_iface)
                    .map(move |(reason, f, _)| {
                        let mut l = port_labels(&p.name);
                        l.push(("reason", Esc(reason)));
                        (l, Num::Int(f(p)))
                    })
            })
            .collect();
        counters(&mut enc, "ringswitch_port_drops", DROPS_HELP, &drops)?;
        for (name, help, f) in VM_COUNTERS {
            counters(
                &mut enc,
                name,
                help,
                &rows(f, &|k| k == PortKind::VhostUser),
            )?;
        }
        let open: Vec<(Labels, Num)> = s
            .ports
            .iter()
            .map(|p| {
                let mut l = port_labels(&p.name);
                if p.kind == PortKind::Pipe {
                    l[0].1 = Esc("");
                }
                (l, Num::Int(u64::from(p.open)))
            })
            .collect();
        gauges(
            &mut enc,
            "ringswitch_port_open",
            "1 if someone is behind the port: a client has the ring port or pipe end open, a frontend is connected to the VM port, the interface is attached.",
            &open,
        )?;
        let per_switch = |f: &dyn Fn(&ringswitch_control::proto::SwitchInfo) -> u64| {
            s.switches
                .iter()
                .map(|w| (vec![("switch", Esc(&w.name))], Num::Int(f(w))))
                .collect::<Vec<_>>()
        };
        gauges(
            &mut enc,
            "ringswitch_ports",
            "Ports attached to the switch.",
            &per_switch(&|w| u64::from(w.ports)),
        )?;
        gauges(
            &mut enc,
            "ringswitch_macs",
            "MAC addresses the switch learned and has not aged out.",
            &per_switch(&|w| u64::from(w.macs)),
        )?;
        let of: Vec<(Labels, Num)> = s
            .switches
            .iter()
            .filter_map(|w| {
                w.packet_in_dropped
                    .map(|n| (vec![("switch", Esc(&w.name))], Num::Int(n)))
            })
            .collect();
        counters(
            &mut enc,
            "ringswitch_openflow_packet_in_dropped",
            "OpenFlow switches: frames for the controller dropped because its queue was full.",
            &of,
        )?;
        let pipe_ends = s.ports.iter().filter(|p| p.kind == PortKind::Pipe).count();
        gauges(
            &mut enc,
            "ringswitch_pipes",
            "Pipes (each has two ends).",
            &[(vec![], Num::Int(pipe_ends as u64 / 2))],
        )?;
        self.workers(&mut enc)?;
        self.process(&mut enc)
    }
}

impl Scrape {
    fn workers(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let s = &*self.snap;
        let ids: Vec<String> = s.workers.iter().map(|w| w.worker.to_string()).collect();
        let rows = |f: &dyn Fn(&ringswitch_control::proto::WorkerStats) -> Num| {
            s.workers
                .iter()
                .zip(&ids)
                .map(|(w, id)| (vec![("worker", Esc(id))], f(w)))
                .collect::<Vec<_>>()
        };
        counters(
            enc,
            "ringswitch_worker_busy_seconds",
            "Time the worker spent in rounds that moved frames.",
            &rows(&|w| seconds(w.busy_ns)),
        )?;
        counters(
            enc,
            "ringswitch_worker_sleep_seconds",
            "Time the worker slept waiting for a kick.",
            &rows(&|w| seconds(w.sleep_ns)),
        )?;
        counters(
            enc,
            "ringswitch_worker_cpu_seconds",
            "CPU time of the worker's thread, as the kernel counts it (busy, spinning and the rest).",
            &rows(&|w| seconds(w.cpu_ns)),
        )?;
        gauges(
            enc,
            "ringswitch_worker_uptime_seconds",
            "Time since the worker started.",
            &rows(&|w| seconds(w.uptime_ns)),
        )?;
        gauges(
            enc,
            "ringswitch_worker_sources",
            "Sources the worker serves: TX rings of ring ports, VM queue pairs, interface queues.",
            &rows(&|w| Num::Int(u64::from(w.sources))),
        )?;
        counters(
            enc,
            "ringswitch_worker_wakeups",
            "Times the worker woke from sleep.",
            &rows(&|w| Num::Int(w.wakeups)),
        )?;
        counters(
            enc,
            "ringswitch_worker_batches",
            "Batches the worker forwarded (what one source offered in one round).",
            &rows(&|w| Num::Int(w.batches)),
        )?;
        counters(
            enc,
            "ringswitch_worker_packets",
            "Frames the worker forwarded.",
            &rows(&|w| Num::Int(w.packets)),
        )?;
        counters(
            enc,
            "ringswitch_worker_cycles",
            "CPU cycles (time-stamp counter) in rounds that moved frames: over packets, a frame's cost.",
            &rows(&|w| Num::Int(w.busy_cycles)),
        )?;
        if s.workers.is_empty() {
            return Ok(());
        }
        let mut m = enc.encode_descriptor(
            "ringswitch_worker_batch_size",
            "Frames per batch the worker forwarded (its sum is the frames forwarded).",
            None,
            MetricType::Histogram,
        )?;
        for (w, id) in s.workers.iter().zip(&ids) {
            let buckets = batch_buckets(&w.batch_sizes);
            let count = buckets.iter().map(|b| b.1).sum();
            m.encode_family(&vec![("worker", Esc(id))])?
                .encode_histogram::<()>(w.packets as f64, count, &buckets, None)?;
        }
        Ok(())
    }

    fn process(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let p = self.snap.process;
        let one = |n: Num| [(Labels::new(), n)];
        counters(
            enc,
            "process_cpu_seconds",
            "User and system CPU time of the daemon process.",
            &one(seconds(p.cpu_ns)),
        )?;
        gauges(
            enc,
            "process_resident_memory_bytes",
            "Resident memory of the daemon process (packet memory included).",
            &one(Num::Int(p.rss_bytes)),
        )?;
        gauges(
            enc,
            "process_threads",
            "Threads of the daemon process.",
            &one(Num::Int(p.threads)),
        )?;
        gauges(
            enc,
            "process_open_fds",
            "Open descriptors of the daemon process.",
            &one(Num::Int(p.open_fds)),
        )?;
        let h = &self.http;
        let codes: Vec<String> = Status::ALL.iter().map(|s| s.code().to_string()).collect();
        let responses: Vec<(Labels, Num)> = Status::ALL
            .iter()
            .zip(&codes)
            .map(|(s, code)| (vec![("code", Esc(code))], Num::Int(h.responses[s.index()])))
            .collect();
        counters(
            enc,
            "ringswitch_metrics_http_responses",
            "Responses of this listener, by status code.",
            &responses,
        )?;
        counters(
            enc,
            "ringswitch_metrics_http_connections_refused",
            "Connections this listener refused because every slot was taken.",
            &one(Num::Int(h.refused)),
        )?;
        counters(
            enc,
            "ringswitch_metrics_http_connections_timed_out",
            "Connections this listener closed because they sent a request or took a response too slowly.",
            &one(Num::Int(h.timed_out)),
        )?;
        gauges(
            enc,
            "ringswitch_metrics_http_connections",
            "Connections open to this listener.",
            &one(Num::Int(h.open)),
        )?;
        let version = [("version", Esc(self.snap.version))];
        let mut m = enc.encode_descriptor(
            "ringswitch_build_info",
            "The daemon's version, as a label; the value is 1.",
            None,
            MetricType::Gauge,
        )?;
        m.encode_family(&version)?.encode_gauge(&1i64)?;
        Ok(())
    }
}

/// The worker's log2 batch-size buckets (bucket i: 2^i to 2^(i+1)-1
/// frames, the last one everything from 512) as a histogram's: upper
/// bounds 1, 3, 7, ... 511 and +Inf (the library's `f64::MAX`), each with
/// its own count (the library sums them).
fn batch_buckets(sizes: &[u64]) -> Vec<(f64, u64)> {
    (0..BATCH_SIZE_BUCKETS)
        .map(|i| {
            let le = if i + 1 == BATCH_SIZE_BUCKETS {
                f64::MAX
            } else {
                ((1u64 << (i + 1)) - 1) as f64
            };
            (le, sizes.get(i).copied().unwrap_or(0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringswitch_control::proto::{PortInfo, SwitchInfo, WorkerStats};
    use std::time::Instant;

    fn port(name: &str, kind: PortKind) -> PortInfo {
        PortInfo {
            name: name.into(),
            kind,
            persistent: false,
            open: true,
            geometry: None,
            worker: Some(0),
            vhost_user: None,
            iface: None,
            passthrough: None,
            vlan: None,
        }
    }

    fn snapshot() -> Snapshot {
        let mut batch_sizes = vec![0; BATCH_SIZE_BUCKETS];
        batch_sizes[0] = 3; // three batches of 1
        batch_sizes[9] = 2; // two of 512 or more
        Snapshot {
            version: "9.9.9",
            at_ns: 1,
            switches: vec![SwitchInfo {
                name: "vale0".into(),
                ports: 2,
                macs: 1,
                openflow: None,
                openflow_connections: None,
                packet_in_dropped: None,
                flows_truncated: None,
            }],
            ports: vec![
                port("vale0:a", PortKind::Vale),
                port("vale0:vm\"1", PortKind::VhostUser),
                port("pipe{1", PortKind::Pipe),
                port("pipe}1", PortKind::Pipe),
            ],
            stats: vec![
                PortStats {
                    name: "vale0:a".into(),
                    rx_packets: 10,
                    drop_rx_full: 4,
                    ..Default::default()
                },
                PortStats {
                    name: "vale0:vm\"1".into(),
                    vm_interrupts: 7,
                    ..Default::default()
                },
            ],
            workers: vec![WorkerStats {
                worker: 0,
                busy_ns: 1_500_000_000,
                packets: 1027,
                batch_sizes,
                ..Default::default()
            }],
            process: Default::default(),
            taken: Instant::now(),
        }
    }

    fn text(openmetrics: bool) -> String {
        render(Arc::new(snapshot()), HttpCounters::default(), openmetrics).1
    }

    #[test]
    fn openmetrics_has_families_and_ends_with_eof() {
        let t = text(true);
        assert!(t.ends_with("# EOF\n"), "{t}");
        assert!(
            t.contains("# TYPE ringswitch_port_rx_packets counter\n"),
            "{t}"
        );
        assert!(t.contains(
            "ringswitch_port_rx_packets_total{switch=\"vale0\",port=\"vale0:a\",kind=\"vale\"} 10\n"
        ));
        assert!(t.contains(
            "ringswitch_port_drops_total{switch=\"vale0\",port=\"vale0:a\",kind=\"vale\",reason=\"rx_full\"} 4\n"
        ));
        // Escaped label values; VM counters only for VM ports.
        assert!(t.contains(
            "ringswitch_port_interrupts_total{switch=\"vale0\",port=\"vale0:vm\\\"1\",kind=\"vhost-user\"} 7\n"
        ), "{t}");
        assert_eq!(
            t.matches("ringswitch_port_vm_guest_faults_total{").count(),
            1
        );
        assert!(
            !t.contains("reason=\"kernel\""),
            "interface reasons only on interfaces"
        );
        assert!(t.contains("ringswitch_worker_busy_seconds_total{worker=\"0\"} 1.5\n"));
        assert!(t.contains("ringswitch_pipes 1\n"));
        assert!(t.contains("ringswitch_build_info{version=\"9.9.9\"} 1\n"));
    }

    #[test]
    fn the_batch_histogram_is_cumulative_from_log2_buckets() {
        let t = text(false);
        let le = |b: &str| {
            let key = format!("ringswitch_worker_batch_size_bucket{{le=\"{b}\",worker=\"0\"}} ");
            t.lines()
                .find_map(|l| l.strip_prefix(key.as_str()))
                .unwrap_or_else(|| panic!("no {key} in\n{t}"))
                .to_owned()
        };
        assert_eq!(le("1.0"), "3");
        assert_eq!(le("3.0"), "3");
        assert_eq!(le("511.0"), "3");
        assert_eq!(le("+Inf"), "5");
        assert!(t.contains("ringswitch_worker_batch_size_count{worker=\"0\"} 5\n"));
        assert!(t.contains("ringswitch_worker_batch_size_sum{worker=\"0\"} 1027.0\n"));
    }

    #[test]
    fn the_text_format_names_counters_by_their_samples() {
        let t = text(false);
        assert!(!t.contains("# EOF"));
        assert!(t.contains("# HELP ringswitch_port_rx_packets_total Frames"));
        assert!(t.contains("# TYPE ringswitch_port_rx_packets_total counter\n"));
        assert!(t.contains("# TYPE ringswitch_worker_batch_size histogram\n"));
        // Every sample belongs to the family its TYPE line declared last,
        // and every family has HELP before TYPE.
        let mut family = String::new();
        let mut ty = String::new();
        let mut helped = String::new();
        for l in t.lines() {
            if let Some(h) = l.strip_prefix("# HELP ") {
                helped = h.split(' ').next().unwrap().to_owned();
            } else if let Some(r) = l.strip_prefix("# TYPE ") {
                let (n, t) = r.split_once(' ').unwrap();
                assert_eq!(helped, n, "HELP before TYPE for {n}");
                (family, ty) = (n.to_owned(), t.to_owned());
            } else {
                let name = l.split(['{', ' ']).next().unwrap();
                let ok = match ty.as_str() {
                    "histogram" => ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name == format!("{family}{s}")),
                    _ => name == family,
                };
                assert!(ok, "{name} under {family} ({ty})");
            }
        }
    }
}
