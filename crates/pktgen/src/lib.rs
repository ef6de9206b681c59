//! netmap's pkt-gen over ringswitch ports: a traffic generator and sink
//! for switch ports and pipes, with netmap's options and output.
//!
//! [`run`] opens the port named by `-i` on the daemon at `socket`, runs one
//! mode until `-n` packets, `--duration` or SIGINT/SIGTERM, prints netmap's
//! per-interval lines and closing summary to stdout (and with `--json` the
//! [`Report`] as the last line), and returns the report.
//!
//! Modes: `tx` sends a template frame as fast as the ring (or `-R`) allows,
//! `rx` counts, `txseq`/`rxseq` carry a 32-bit sequence number and count
//! gaps and reordering, `ping` measures round trips against `pong`, which
//! bounces every frame back with its addresses swapped.
//!
//! Data path rules: the template is written into a buffer only when the
//! slot's buffer changed (pipes swap buffers), then only the length and the
//! stamped fields are written per packet; nothing allocates after start-up;
//! every wait has a timeout so the stop conditions are checked at least
//! every 100 ms; every batch is at most `-b` slots.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod frame;
pub mod latency;
pub mod meter;
mod os;
pub mod rate;
mod recv;
mod rtt;
mod send;
pub mod seq;
mod session;

use std::path::Path;
use std::time::Duration;

use ringswitch_client::{ClientError, Port, WaitMode};

pub use frame::{Endpoint, MacAddr};
pub use latency::RttSummary;
pub use os::monotonic_ns;

use frame::{Fields, FrameSpec, Template};
use session::Session;

/// Default burst for tx/rx modes.
pub const DEFAULT_BURST: u32 = 512;
/// Default source port (as netmap's pkt-gen).
pub const DEFAULT_SRC_PORT: u16 = 1234;
/// Default destination port.
pub const DEFAULT_DST_PORT: u16 = 4321;
/// Longest `--duration` accepted (a year).
const MAX_DURATION_S: f64 = 365.0 * 86_400.0;

/// What pkt-gen does (`-f`).
#[derive(clap::ValueEnum, serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Send template frames.
    Tx,
    /// Count received frames.
    Rx,
    /// Send timestamped frames and measure the round trip.
    Ping,
    /// Bounce every frame back with addresses swapped.
    Pong,
    /// Send frames carrying a sequence number.
    Txseq,
    /// Receive frames carrying a sequence number; count gaps and reordering.
    Rxseq,
}

impl Mode {
    /// The name as given to `-f`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tx => "tx",
            Mode::Rx => "rx",
            Mode::Ping => "ping",
            Mode::Pong => "pong",
            Mode::Txseq => "txseq",
            Mode::Rxseq => "rxseq",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// netmap pkt-gen's options.
#[derive(clap::Args, Debug, Clone)]
pub struct PktGenArgs {
    /// Port to open: vale0:a, pipe{1, pipe}1, ...
    #[arg(short = 'i', long = "interface", value_name = "PORT")]
    pub interface: String,
    /// Mode.
    #[arg(short = 'f', long = "mode", value_enum, default_value_t = Mode::Rx)]
    pub mode: Mode,
    /// Packets to send or receive; 0 runs until --duration or a signal.
    #[arg(short = 'n', long = "count", default_value_t = 0)]
    pub count: u64,
    /// Frame length in bytes, without the Ethernet CRC (14 up to the port's
    /// buffer size; 46 for txseq, 54 for ping).
    #[arg(short = 'l', long = "length", default_value_t = 60)]
    pub length: u16,
    /// Slots handled per sync [default: 512; 1 for ping and pong].
    #[arg(short = 'b', long = "burst")]
    pub burst: Option<u32>,
    /// Send rate limit in packets per second; 0 is unlimited.
    #[arg(short = 'R', long = "rate", default_value_t = 0)]
    pub rate: u64,
    /// Report interval in milliseconds; 0 prints no interval lines.
    #[arg(
        short = 'T',
        long = "interval",
        value_name = "MS",
        default_value_t = 1000
    )]
    pub interval_ms: u64,
    /// Seconds to wait after opening the port, before starting.
    #[arg(
        short = 'w',
        long = "wait",
        value_name = "SECONDS",
        default_value_t = 0
    )]
    pub wait_s: u32,
    /// Source MAC.
    #[arg(short = 'S', long = "src-mac", default_value = "00:00:00:00:00:01")]
    pub src_mac: MacAddr,
    /// Destination MAC.
    #[arg(short = 'D', long = "dst-mac", default_value = "ff:ff:ff:ff:ff:ff")]
    pub dst_mac: MacAddr,
    /// Source IPv4 address, optionally with a port (IP or IP:PORT).
    #[arg(
        short = 's',
        long = "src-ip",
        value_name = "IP[:PORT]",
        default_value = "10.0.0.1:1234"
    )]
    pub src: Endpoint,
    /// Destination IPv4 address, optionally with a port (IP or IP:PORT).
    #[arg(
        short = 'd',
        long = "dst-ip",
        value_name = "IP[:PORT]",
        default_value = "10.1.0.1:4321"
    )]
    pub dst: Endpoint,
    /// Random source port for every packet.
    #[arg(short = 'z', long = "random-src-port")]
    pub random_src_port: bool,
    /// Random destination port for every packet.
    #[arg(short = 'Z', long = "random-dst-port")]
    pub random_dst_port: bool,
    /// Threads (only 1 is supported for now).
    #[arg(short = 'p', long = "threads", default_value_t = 1)]
    pub threads: u32,
    /// Spin instead of sleeping when the ring is full or empty.
    #[arg(long)]
    pub busy: bool,
    /// Print the report as one JSON object on the last line.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
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

/// The outcome of a run; with `--json`, printed as one object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// Mode.
    pub mode: Mode,
    /// Port name as opened.
    pub port: String,
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
}

/// Why pkt-gen could not run.
#[derive(Debug, thiserror::Error)]
pub enum PktGenError {
    /// `-p` other than 1.
    #[error("only one thread is supported for now, but -p {0} was given")]
    Threads(u32),
    /// `-b 0`.
    #[error("the burst must be at least one packet")]
    Burst,
    /// `--duration` not a positive number of seconds.
    #[error("the duration must be a positive number of seconds, at most a year")]
    Duration,
    /// `-l` below what the mode needs.
    #[error("{mode} needs frames of at least {min} bytes, but -l {len} was given")]
    FrameTooShort {
        /// Mode.
        mode: Mode,
        /// Given length.
        len: usize,
        /// Least length for the mode.
        min: usize,
    },
    /// `-l` beyond the port's buffers.
    #[error("frames of {len} bytes do not fit the {buf_size}-byte buffers of port {port}")]
    FrameTooLong {
        /// Port.
        port: String,
        /// Given length.
        len: usize,
        /// The port's buffer size.
        buf_size: u32,
    },
    /// The port could not be opened.
    #[error("cannot open port {port}")]
    Open {
        /// Port.
        port: String,
        /// Cause.
        #[source]
        source: ClientError,
    },
    /// Waiting on the port failed.
    #[error("waiting on port {port} failed")]
    Wait {
        /// Port.
        port: String,
        /// Cause.
        #[source]
        source: ClientError,
    },
    /// The signal handlers could not be installed.
    #[error("cannot install the SIGINT and SIGTERM handlers")]
    Signal(#[source] std::io::Error),
}

/// What the arguments ask for, checked before the port is opened.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub(crate) mode: Mode,
    pub(crate) burst: u32,
    pub(crate) len: usize,
    pub(crate) fields: Fields,
    pub(crate) spec: FrameSpec,
    /// `u64::MAX` when unbounded.
    pub(crate) count: u64,
    pub(crate) duration_ns: Option<u64>,
}

impl Plan {
    pub(crate) fn new(a: &PktGenArgs) -> Result<Plan, PktGenError> {
        if a.threads != 1 {
            return Err(PktGenError::Threads(a.threads));
        }
        let burst = a.burst.unwrap_or(match a.mode {
            Mode::Ping | Mode::Pong => 1,
            _ => DEFAULT_BURST,
        });
        if burst == 0 {
            return Err(PktGenError::Burst);
        }
        let duration_ns = match a.duration {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s <= MAX_DURATION_S => Some((s * 1e9) as u64),
            Some(_) => return Err(PktGenError::Duration),
        };
        let ports = a.random_src_port || a.random_dst_port;
        let fields = match a.mode {
            Mode::Tx => Fields {
                ports,
                ..Fields::default()
            },
            Mode::Txseq => Fields {
                ports,
                seq: true,
                ..Fields::default()
            },
            Mode::Ping => Fields {
                ports,
                seq: true,
                ts: true,
            },
            Mode::Rx | Mode::Rxseq | Mode::Pong => Fields::default(),
        };
        let len = usize::from(a.length);
        let min = match a.mode {
            // A receiver accepts any length; what it sends is not a frame.
            Mode::Rx | Mode::Pong => frame::MIN_FRAME_LEN,
            Mode::Rxseq => frame::SEQ_FRAME_LEN,
            _ => fields.min_frame_len(),
        };
        if len < min {
            return Err(PktGenError::FrameTooShort {
                mode: a.mode,
                len,
                min,
            });
        }
        let spec = FrameSpec {
            src_mac: a.src_mac,
            dst_mac: a.dst_mac,
            src_ip: a.src.ip,
            dst_ip: a.dst.ip,
            src_port: a.src.port.unwrap_or(DEFAULT_SRC_PORT),
            dst_port: a.dst.port.unwrap_or(DEFAULT_DST_PORT),
            len,
        };
        let count = if a.count == 0 { u64::MAX } else { a.count };
        Ok(Plan {
            mode: a.mode,
            burst,
            len,
            fields,
            spec,
            count,
            duration_ns,
        })
    }
}

/// Runs pkt-gen on the daemon listening at `socket`: prints the interval
/// lines and the summary (and with `--json` the report) to stdout, and
/// returns the report.
pub fn run(args: &PktGenArgs, socket: &Path) -> Result<Report, PktGenError> {
    let plan = Plan::new(args)?;
    let name = args.interface.clone();
    let mut port = Port::open_at(socket, &name).map_err(|source| PktGenError::Open {
        port: name.clone(),
        source,
    })?;
    port.set_wait_mode(if args.busy {
        WaitMode::Busy
    } else {
        WaitMode::Blocking
    });
    let g = port.geometry();
    if plan.len > g.buf_size as usize {
        return Err(PktGenError::FrameTooLong {
            port: name,
            len: plan.len,
            buf_size: g.buf_size,
        });
    }
    // A batch never exceeds what a ring can hold.
    let burst = plan
        .burst
        .min(g.tx_slots.min(g.rx_slots).saturating_sub(1))
        .max(1);
    tracing::info!(port = %name, mode = %plan.mode, burst, len = plan.len, ?g, "pkt-gen starting");

    let _signals = os::SignalGuard::install().map_err(PktGenError::Signal)?;
    wait_before_start(args.wait_s);

    let template = Template::new(&plan.spec);
    let header = describe(args, &plan, burst);
    let mut s = Session::new(port, name.clone(), &plan, burst, template, args);
    s.say(&header);
    let mut out = match plan.mode {
        Mode::Tx | Mode::Txseq => send::send(&mut s)?,
        Mode::Rx | Mode::Rxseq => recv::receive(&mut s, plan.mode == Mode::Rxseq)?,
        Mode::Ping => rtt::ping(&mut s)?,
        Mode::Pong => rtt::pong(&mut s)?,
    };
    if plan.mode == Mode::Rx {
        if let Some(d) = switch_drops(socket, &s.port) {
            out.drops = Some(d);
        }
    }
    let report = out.report(plan.mode, name, s.meter.events);
    s.say(&closing(&report));
    if args.json {
        // Serializing plain numbers and strings cannot fail.
        s.say(&serde_json::to_string(&report).unwrap_or_default());
    }
    Ok(report)
}

/// For a switch port, what the switch dropped because this port's RX ring
/// was full (the one loss a receiver cannot see by itself). `None` for
/// pipes (they never drop) or when the daemon cannot be asked.
fn switch_drops(socket: &Path, port: &Port) -> Option<u64> {
    if port.kind() != ringswitch_control::PortKind::Vale {
        return None;
    }
    let switch = port.name().split(':').next()?.to_string();
    let mut c = ringswitch_control::Connection::connect(socket).ok()?;
    let (all, _): (Vec<ringswitch_control::PortStats>, _) = c
        .call_as(&ringswitch_control::Request::Stats {
            switch: Some(switch),
        })
        .ok()?;
    all.iter()
        .find(|st| st.name == port.name())
        .map(|st| st.drop_rx_full)
}

/// `-w`: sleep, in slices so a signal cuts it short.
fn wait_before_start(seconds: u32) {
    let end = os::monotonic_ns().saturating_add(u64::from(seconds) * 1_000_000_000);
    while !os::stop_requested() {
        let now = os::monotonic_ns();
        if now >= end {
            break;
        }
        std::thread::sleep(Duration::from_nanos((end - now).min(100_000_000)));
    }
}

fn describe(a: &PktGenArgs, p: &Plan, burst: u32) -> String {
    let rate = if a.rate == 0 {
        "unlimited".to_string()
    } else {
        format!("{} pps", a.rate)
    };
    let wait = if a.busy { "busy" } else { "blocking" };
    match p.mode {
        Mode::Rx | Mode::Rxseq | Mode::Pong => {
            format!("{} on {}: burst {burst}, {wait} wait", p.mode, a.interface)
        }
        _ => format!(
            "{} on {}: {}-byte frames {} {}:{} -> {} {}:{}, burst {burst}, rate {rate}, {wait} wait",
            p.mode,
            a.interface,
            p.len,
            p.spec.src_mac,
            p.spec.src_ip,
            if a.random_src_port { "random".to_string() } else { p.spec.src_port.to_string() },
            p.spec.dst_mac,
            p.spec.dst_ip,
            if a.random_dst_port { "random".to_string() } else { p.spec.dst_port.to_string() },
        ),
    }
}

/// The closing lines for a report.
fn closing(r: &Report) -> String {
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

/// What a mode hands back.
#[derive(Clone, Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    pub(crate) ns: u64,
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

impl Outcome {
    fn report(self, mode: Mode, port: String, events: u64) -> Report {
        let seconds = self.ns as f64 / 1e9;
        let rtt = self.rtt.filter(|r| r.count > 0);
        Report {
            mode,
            port,
            packets: self.packets,
            bytes: self.bytes,
            seconds,
            pps: meter::per_second(self.packets as f64, self.ns),
            bps: meter::per_second(self.bytes as f64 * 8.0, self.ns),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: PktGenArgs,
    }

    fn parse(argv: &[&str]) -> Result<PktGenArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("pkt-gen").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_are_netmaps() {
        let a = parse(&["-i", "vale0:a"]).unwrap();
        assert_eq!(a.mode, Mode::Rx);
        assert_eq!(
            (
                a.count,
                a.length,
                a.burst,
                a.rate,
                a.interval_ms,
                a.wait_s,
                a.threads
            ),
            (0, 60, None, 0, 1000, 0, 1)
        );
        assert_eq!(a.src_mac, MacAddr([0, 0, 0, 0, 0, 1]));
        assert_eq!(a.dst_mac, MacAddr([0xff; 6]));
        assert_eq!(a.src.to_string(), "10.0.0.1:1234");
        assert_eq!(a.dst.to_string(), "10.1.0.1:4321");
        let p = Plan::new(&a).unwrap();
        assert_eq!((p.burst, p.count, p.duration_ns), (512, u64::MAX, None));
        assert!(parse(&[]).is_err(), "-i is required");
    }

    #[test]
    fn short_flags() {
        let a = parse(&[
            "-i",
            "pipe{1",
            "-f",
            "txseq",
            "-n",
            "1000",
            "-l",
            "128",
            "-b",
            "64",
            "-R",
            "10000",
            "-T",
            "500",
            "-w",
            "2",
            "-S",
            "02:00:00:00:00:02",
            "-D",
            "02:00:00:00:00:03",
            "-s",
            "192.168.1.1",
            "-d",
            "192.168.1.2:9",
            "-z",
            "-Z",
            "-p",
            "1",
            "--busy",
            "--json",
            "--duration",
            "1.5",
        ])
        .unwrap();
        assert_eq!(a.mode, Mode::Txseq);
        assert_eq!(
            (a.count, a.length, a.burst, a.rate, a.interval_ms, a.wait_s),
            (1000, 128, Some(64), 10000, 500, 2)
        );
        assert!(a.random_src_port && a.random_dst_port && a.busy && a.json);
        let p = Plan::new(&a).unwrap();
        assert_eq!(
            p.spec.src_port, DEFAULT_SRC_PORT,
            "a source without a port keeps the default port"
        );
        assert_eq!(p.spec.dst_port, 9);
        assert_eq!(
            p.fields,
            Fields {
                ports: true,
                seq: true,
                ts: false
            }
        );
        assert_eq!(p.duration_ns, Some(1_500_000_000));
        assert_eq!(p.count, 1000);
        for m in ["tx", "rx", "ping", "pong", "txseq", "rxseq"] {
            assert_eq!(parse(&["-i", "x", "-f", m]).unwrap().mode.name(), m);
        }
        assert!(parse(&["-i", "x", "-f", "bogus"]).is_err());
        assert!(parse(&["-i", "x", "-S", "zz"]).is_err());
        assert!(parse(&["-i", "x", "-s", "10.0.0.1-10.0.0.2"]).is_err());
    }

    #[test]
    fn plan_checks() {
        let a = |extra: &[&str]| {
            let mut v = vec!["-i", "x"];
            v.extend_from_slice(extra);
            Plan::new(&parse(&v).unwrap())
        };
        assert!(matches!(a(&["-p", "2"]), Err(PktGenError::Threads(2))));
        assert!(matches!(a(&["-b", "0"]), Err(PktGenError::Burst)));
        assert!(matches!(
            a(&["--duration", "0"]),
            Err(PktGenError::Duration)
        ));
        assert!(matches!(a(&["--duration=-1"]), Err(PktGenError::Duration)));
        assert!(matches!(
            a(&["--duration", "inf"]),
            Err(PktGenError::Duration)
        ));
        assert!(matches!(
            a(&["-l", "13"]),
            Err(PktGenError::FrameTooShort { min: 14, .. })
        ));
        assert!(a(&["-l", "14", "-f", "tx"]).is_ok());
        assert!(matches!(
            a(&["-l", "45", "-f", "txseq"]),
            Err(PktGenError::FrameTooShort { min: 46, .. })
        ));
        assert!(matches!(
            a(&["-l", "45", "-f", "rxseq"]),
            Err(PktGenError::FrameTooShort { min: 46, .. })
        ));
        assert!(matches!(
            a(&["-l", "53", "-f", "ping"]),
            Err(PktGenError::FrameTooShort { min: 54, .. })
        ));
        assert!(matches!(
            a(&["-l", "41", "-z", "-f", "tx"]),
            Err(PktGenError::FrameTooShort { min: 42, .. })
        ));
        assert_eq!(a(&["-f", "ping"]).unwrap().burst, 1);
        assert_eq!(a(&["-f", "pong"]).unwrap().burst, 1);
        assert_eq!(a(&["-f", "ping", "-b", "8"]).unwrap().burst, 8);
        assert_eq!(
            a(&["-f", "ping"]).unwrap().fields,
            Fields {
                ports: false,
                seq: true,
                ts: true
            }
        );
        let e = a(&["-l", "45", "-f", "txseq"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "txseq needs frames of at least 46 bytes, but -l 45 was given"
        );
    }

    #[test]
    fn run_without_a_daemon_says_so() {
        let a = parse(&["-i", "vale0:a", "-f", "rx"]).unwrap();
        let e = run(&a, Path::new("/nonexistent/ringswitch-test.sock")).unwrap_err();
        assert!(matches!(e, PktGenError::Open { .. }), "{e:?}");
        assert_eq!(e.to_string(), "cannot open port vale0:a");
    }

    #[test]
    fn report_json_fields() {
        let out = Outcome {
            packets: 100,
            bytes: 6000,
            ns: 2_000_000_000,
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
