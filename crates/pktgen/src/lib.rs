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
//! `-s`/`-d` take netmap's ranges, `a.b.c.d[-e.f.g.h][:port[-port]]`: each
//! packet then takes the next point of each range (port fastest, then
//! address, starting over after the last), with the IPv4 and UDP checksums
//! recomputed from precomputed partial sums. Only the fields that vary are
//! stamped, so a run without ranges does exactly what it did before.
//!
//! `-p N` splits the port ([`Port::split`]) and runs the mode in N threads
//! (`std::thread::scope`), thread i on ring pair i. Senders use TX rings
//! 0..N; receivers spread all RX rings over the threads (thread i reads
//! rings i, i+N, ...). `-n` is a budget the threads claim from batch by
//! batch, `-R` is split evenly. The calling thread prints the interval
//! lines from the totals each worker publishes after every batch, and the
//! summary adds the threads' results up. Each txseq thread numbers its own
//! frames and writes its index next to the number; rxseq tracks every
//! (sender thread) stream apart ([`seq::SeqStreams`]). `-p 1` (the default)
//! keeps the port whole: TX ring 0, every RX ring.
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
use session::{say, Role, Session, Shared};

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
    /// Packets to send or receive, over all threads; 0 runs until
    /// --duration or a signal.
    #[arg(short = 'n', long = "count", default_value_t = 0)]
    pub count: u64,
    /// Frame length in bytes, without the Ethernet CRC (14 up to the port's
    /// buffer size; 42 with ranges or random ports, 46 for txseq, 48 for
    /// txseq with -p > 1, 54 for ping).
    #[arg(short = 'l', long = "length", default_value_t = 60)]
    pub length: u16,
    /// Slots handled per sync [default: 512; 1 for ping and pong].
    #[arg(short = 'b', long = "burst")]
    pub burst: Option<u32>,
    /// Send rate limit in packets per second, over all threads; 0 is
    /// unlimited.
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
    /// Source IPv4 address or range, optionally with a port or port range:
    /// IP[-IP][:PORT[-PORT]], e.g. 10.0.0.1-10.0.0.9:1000-1099.
    ///
    /// With a range every packet takes the next point: the port moves
    /// fastest, then the address, and after the last point it starts over
    /// (as netmap's pkt-gen). The IPv4 and UDP checksums are rewritten to
    /// match. Source and destination walk their ranges side by side, one
    /// step each per packet; each thread of -p walks them on its own.
    #[arg(
        short = 's',
        long = "src-ip",
        value_name = "IP[-IP][:PORT[-PORT]]",
        default_value = "10.0.0.1:1234"
    )]
    pub src: Endpoint,
    /// Destination IPv4 address or range, optionally with a port or port
    /// range: IP[-IP][:PORT[-PORT]] (walked as -s is).
    #[arg(
        short = 'd',
        long = "dst-ip",
        value_name = "IP[-IP][:PORT[-PORT]]",
        default_value = "10.1.0.1:4321"
    )]
    pub dst: Endpoint,
    /// Random source port for every packet (not with a source port range).
    #[arg(short = 'z', long = "random-src-port")]
    pub random_src_port: bool,
    /// Random destination port for every packet (not with a destination
    /// port range).
    #[arg(short = 'Z', long = "random-dst-port")]
    pub random_dst_port: bool,
    /// Threads: -p N runs N threads, thread i on ring pair i of the port
    /// (at most the port's TX rings for senders, RX rings for receivers;
    /// create the port with @conf:rings=N). Not for ping and pong.
    ///
    /// With -p 1 the port stays whole: senders use TX ring 0, receivers
    /// read every RX ring. With -p N > 1 senders use TX rings 0..N-1 (any
    /// others stay unused); receivers spread every RX ring over the
    /// threads (thread i reads rings i, i+N, ...). -n and -R are totals
    /// over the threads, and the interval lines and the summary add the
    /// threads up. Each txseq thread numbers its frames on its own and
    /// writes its index (0..N-1) after the number; rxseq tracks each
    /// sender thread's numbers apart.
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
    /// Threads that ran (`-p`).
    pub threads: u32,
    /// With `-p` > 1: packets handled by each thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_packets: Option<Vec<u64>>,
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
    /// CPU time (user + system, all threads) this pkt-gen process used from
    /// its start to the report, in seconds: what benchmarks divide by the
    /// packets to get a cost per packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
}

/// Why pkt-gen could not run.
#[derive(Debug, thiserror::Error)]
pub enum PktGenError {
    /// `-p 0`.
    #[error("-p needs at least one thread")]
    NoThreads,
    /// `-p` > 1 for ping or pong.
    #[error("{mode} runs in one thread; -p {threads} is only for tx, rx, txseq and rxseq")]
    ThreadsForMode {
        /// Mode.
        mode: Mode,
        /// Threads asked for.
        threads: u32,
    },
    /// `-p` beyond the rings of the port.
    #[error(
        "-p {threads} needs {threads} {dir} rings, but port {port} has {tx_rings} TX and {rx_rings} RX rings; \
         create it with enough rings, e.g. {example}"
    )]
    TooFewRings {
        /// Port.
        port: String,
        /// Threads asked for.
        threads: u32,
        /// "TX" for senders, "RX" for receivers.
        dir: &'static str,
        /// The port's TX rings.
        tx_rings: u32,
        /// The port's RX rings.
        rx_rings: u32,
        /// The port name with `@conf:rings=N`.
        example: String,
    },
    /// `-R` lower than `-p`: some thread would get no rate at all.
    #[error(
        "-R {rate} is split over the {threads} threads of -p, so it must be at least {threads}"
    )]
    RateBelowThreads {
        /// Rate asked for.
        rate: u64,
        /// Threads asked for.
        threads: u32,
    },
    /// `-z`/`-Z` with a port range.
    #[error("{flag} picks a random {side} port for every packet; it cannot be combined with the {side} port range {range}")]
    RandomWithRange {
        /// `-z` or `-Z`.
        flag: &'static str,
        /// "source" or "destination".
        side: &'static str,
        /// The range given.
        range: String,
    },
    /// `-b 0`.
    #[error("the burst must be at least one packet")]
    Burst,
    /// `--duration` not a positive number of seconds.
    #[error("the duration must be a positive number of seconds, at most a year")]
    Duration,
    /// `-l` below what the mode needs.
    #[error("{mode} needs frames of at least {min} bytes{why}, but -l {len} was given")]
    FrameTooShort {
        /// Mode.
        mode: Mode,
        /// Given length.
        len: usize,
        /// Least length for the mode.
        min: usize,
        /// What asks for more than the mode alone ("" or " with ...").
        why: &'static str,
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
    /// The port could not be split into one piece per ring.
    #[error("cannot split port {port} into one piece per ring")]
    Split {
        /// Port.
        port: String,
        /// Cause.
        #[source]
        source: ClientError,
    },
    /// A thread could not be started.
    #[error("cannot start a pkt-gen thread")]
    Spawn(#[source] std::io::Error),
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
    /// The endpoints as given (ranges included).
    pub(crate) src: Endpoint,
    pub(crate) dst: Endpoint,
    pub(crate) random_src: bool,
    pub(crate) random_dst: bool,
    /// `u64::MAX` when unbounded.
    pub(crate) count: u64,
    pub(crate) duration_ns: Option<u64>,
    pub(crate) threads: u32,
    pub(crate) rate_pps: u64,
    pub(crate) interval_ms: u64,
    pub(crate) busy: bool,
}

impl Plan {
    pub(crate) fn new(a: &PktGenArgs) -> Result<Plan, PktGenError> {
        match (a.threads, a.mode) {
            (0, _) => return Err(PktGenError::NoThreads),
            (1, _) => {}
            (threads, mode @ (Mode::Ping | Mode::Pong)) => {
                return Err(PktGenError::ThreadsForMode { mode, threads })
            }
            (threads, _) => {
                if a.rate != 0 && a.rate < u64::from(threads) {
                    return Err(PktGenError::RateBelowThreads {
                        rate: a.rate,
                        threads,
                    });
                }
            }
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
        let sends = matches!(a.mode, Mode::Tx | Mode::Txseq | Mode::Ping);
        if sends {
            for (random, flag, side, ep) in [
                (a.random_src_port, "-z", "source", &a.src),
                (a.random_dst_port, "-Z", "destination", &a.dst),
            ] {
                if random && ep.ports_vary() {
                    return Err(PktGenError::RandomWithRange {
                        flag,
                        side,
                        range: ep.to_string(),
                    });
                }
            }
        }
        let ports =
            a.random_src_port || a.random_dst_port || a.src.ports_vary() || a.dst.ports_vary();
        let addrs = a.src.ips_vary() || a.dst.ips_vary();
        let fields = match a.mode {
            Mode::Tx => Fields {
                ports,
                addrs,
                ..Fields::default()
            },
            Mode::Txseq => Fields {
                ports,
                addrs,
                seq: true,
                // Each thread's frames carry its index after the number.
                stream: a.threads > 1,
                ..Fields::default()
            },
            Mode::Ping => Fields {
                ports,
                addrs,
                seq: true,
                ts: true,
                ..Fields::default()
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
            let why = if fields.stream {
                " with -p > 1 (room for the thread index)"
            } else if a.mode == Mode::Tx && addrs {
                " with an address range"
            } else if a.mode == Mode::Tx && ports && !(a.random_src_port || a.random_dst_port) {
                " with a port range"
            } else {
                ""
            };
            return Err(PktGenError::FrameTooShort {
                mode: a.mode,
                len,
                min,
                why,
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
            src: a.src,
            dst: a.dst,
            random_src: a.random_src_port,
            random_dst: a.random_dst_port,
            count,
            duration_ns,
            threads: a.threads,
            rate_pps: a.rate,
            interval_ms: a.interval_ms,
            busy: a.busy,
        })
    }

    /// Whether the mode sends (tx, txseq, ping) rather than receives.
    fn sends(&self) -> bool {
        matches!(self.mode, Mode::Tx | Mode::Txseq | Mode::Ping)
    }

    /// Thread `i`'s share of `-R` (0: unlimited).
    fn rate_share(&self, i: u32) -> u64 {
        let n = u64::from(self.threads);
        self.rate_pps / n + u64::from(u64::from(i) < self.rate_pps % n)
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
    let threads = plan.threads;
    let (rings, dir) = if plan.sends() {
        (g.tx_rings, "TX")
    } else {
        (g.rx_rings, "RX")
    };
    if threads > rings {
        return Err(PktGenError::TooFewRings {
            example: format!(
                "{}@conf:rings={threads}",
                name.split('@').next().unwrap_or(&name)
            ),
            port: name,
            threads,
            dir,
            tx_rings: g.tx_rings,
            rx_rings: g.rx_rings,
        });
    }
    // A batch never exceeds what a ring can hold.
    let burst = plan
        .burst
        .min(g.tx_slots.min(g.rx_slots).saturating_sub(1))
        .max(1);
    tracing::info!(port = %name, mode = %plan.mode, burst, len = plan.len, threads, ?g, "pkt-gen starting");

    let _signals = os::SignalGuard::install().map_err(PktGenError::Signal)?;
    wait_before_start(args.wait_s);

    let template = Template::new(&plan.spec);
    let (kind, canonical) = (port.kind(), port.name().to_string());
    // An on-demand port's counters go with it: keep it open until the
    // switch's drops for it have been read.
    let _hold = port.hold();
    let shared = Shared::new(plan.count, threads as usize);
    let (mut out, events, thread_packets) = if threads == 1 {
        let role = Role {
            index: 0,
            rate_pps: plan.rate_pps,
            threaded: false,
        };
        let mut s = Session::new(
            port,
            Vec::new(),
            name.clone(),
            &plan,
            burst,
            template,
            &shared,
            role,
        );
        say(&describe(&plan, &name, burst, ""));
        let out = run_mode(&mut s, plan.mode)?;
        (out, s.meter.events, None)
    } else {
        let pieces = port.split().map_err(|source| PktGenError::Split {
            port: name.clone(),
            source,
        })?;
        let (groups, _unused) = assign(pieces, threads as usize, plan.sends(), g.rx_rings);
        let note = threads_note(&plan, g.tx_rings, g.rx_rings);
        say(&describe(&plan, &name, burst, &note));
        let (out, events, per) = run_threads(groups, &plan, burst, &template, &shared, &name)?;
        (out, events, Some(per))
    };
    if plan.mode == Mode::Rx {
        if let Some(d) = switch_drops(socket, kind, &canonical) {
            out.drops = Some(d);
        }
    }
    let mut report = out.report(plan.mode, name, events);
    report.threads = threads;
    report.thread_packets = thread_packets;
    report.cpu_seconds = os::process_cpu_seconds();
    say(&closing(&report));
    if args.json {
        // Serializing plain numbers and strings cannot fail.
        say(&serde_json::to_string(&report).unwrap_or_default());
    }
    Ok(report)
}

fn run_mode(s: &mut Session, mode: Mode) -> Result<Outcome, PktGenError> {
    match mode {
        Mode::Tx | Mode::Txseq => send::send(s),
        Mode::Rx | Mode::Rxseq => recv::receive(s, mode == Mode::Rxseq),
        Mode::Ping => rtt::ping(s),
        Mode::Pong => rtt::pong(s),
    }
}

/// Hands the pieces of a split port to `threads` threads: each thread gets
/// piece i (ring pair i) as its port; receivers also get every further
/// piece with an RX ring, round robin (thread i reads rings i, i+N, ...).
/// Returns the threads' pieces and the pieces nobody uses (kept open to
/// the end; senders leave TX rings N.. idle, as `-p 1` leaves all but
/// ring 0).
fn assign(
    pieces: Vec<Port>,
    threads: usize,
    sends: bool,
    rx_rings: u32,
) -> (Vec<(Port, Vec<Port>)>, Vec<Port>) {
    let mut it = pieces.into_iter();
    let mut groups: Vec<(Port, Vec<Port>)> =
        it.by_ref().take(threads).map(|p| (p, Vec::new())).collect();
    let mut unused = Vec::new();
    for (i, p) in it.enumerate() {
        let ring = threads + i;
        if !sends && ring < rx_rings as usize {
            groups[ring % threads].1.push(p);
        } else {
            unused.push(p);
        }
    }
    (groups, unused)
}

/// The header's words on threads and rings.
fn threads_note(p: &Plan, tx_rings: u32, rx_rings: u32) -> String {
    let n = p.threads;
    if p.sends() {
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

/// Runs one session per thread, prints the interval lines from what the
/// threads publish, and adds their outcomes up. Returns the sum, the
/// events, and each thread's packets.
fn run_threads(
    groups: Vec<(Port, Vec<Port>)>,
    plan: &Plan,
    burst: u32,
    template: &Template,
    shared: &Shared,
    name: &str,
) -> Result<(Outcome, u64, Vec<u64>), PktGenError> {
    let sessions: Vec<Session> = groups
        .into_iter()
        .enumerate()
        .map(|(i, (port, extra))| {
            let role = Role {
                index: i,
                rate_pps: plan.rate_share(i as u32),
                threaded: true,
            };
            let t = template.clone();
            Session::new(port, extra, name.to_string(), plan, burst, t, shared, role)
        })
        .collect();
    let mode = plan.mode;
    let results: Vec<Result<(Outcome, u64), PktGenError>> = std::thread::scope(|sc| {
        let mut handles = Vec::with_capacity(sessions.len());
        let mut results = Vec::new();
        for (i, mut s) in sessions.into_iter().enumerate() {
            let spawned = std::thread::Builder::new()
                .name(format!("pkt-gen-{i}"))
                .spawn_scoped(sc, move || {
                    let r = run_mode(&mut s, mode);
                    if r.is_err() {
                        shared.abort();
                    }
                    r.map(|o| (o, s.meter.events))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared.abort();
                    results.push(Err(PktGenError::Spawn(e)));
                    break;
                }
            }
        }
        print_intervals(shared, plan.interval_ms, &handles);
        for h in handles {
            results.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        results
    });
    let mut total = Outcome::default();
    let (mut events, mut per) = (0u64, Vec::with_capacity(results.len()));
    for r in results {
        let (o, e) = r?;
        per.push(o.packets);
        events += e;
        total = total.merge(o);
    }
    Ok((total, events, per))
}

/// Longest the interval printer sleeps before looking whether the threads
/// are done.
const PRINTER_SLICE: Duration = Duration::from_millis(10);

/// The interval lines of a `-p` run, from the totals the threads publish,
/// until every thread is done.
fn print_intervals<T>(
    shared: &Shared,
    interval_ms: u64,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
) {
    let mut meter = meter::Meter::new(interval_ms, os::monotonic_ns());
    while !handles.iter().all(|h| h.is_finished()) {
        let now = os::monotonic_ns();
        if now >= meter.next_report_ns() {
            let (pkts, bytes, events, min_space) = shared.take_totals();
            meter.absorb(pkts, bytes, events, min_space);
            if let Some(iv) = meter.poll(now) {
                say(&iv.line());
            }
        }
        let until = meter.next_report_ns().saturating_sub(os::monotonic_ns());
        std::thread::sleep(
            Duration::from_nanos(until).clamp(Duration::from_micros(100), PRINTER_SLICE),
        );
    }
}

/// For a switch port, what the switch dropped because this port's RX ring
/// was full (the one loss a receiver cannot see by itself). `None` for
/// pipes (they never drop) or when the daemon cannot be asked.
fn switch_drops(socket: &Path, kind: ringswitch_control::PortKind, name: &str) -> Option<u64> {
    if kind != ringswitch_control::PortKind::Vale {
        return None;
    }
    let switch = name.split(':').next()?.to_string();
    let mut c = ringswitch_control::Connection::connect(socket).ok()?;
    let (all, _): (Vec<ringswitch_control::PortStats>, _) = c
        .call_as(&ringswitch_control::Request::Stats {
            switch: Some(switch),
        })
        .ok()?;
    all.iter()
        .find(|st| st.name == name)
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

/// An endpoint for the header: address (range), port (range) or "random".
fn endpoint_text(ep: &Endpoint, random: bool, default_port: u16) -> String {
    let full = ep.describe(default_port);
    match full.rsplit_once(':') {
        Some((ip, _)) if random => format!("{ip}:random"),
        _ => full,
    }
}

fn describe(p: &Plan, interface: &str, burst: u32, threads: &str) -> String {
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
            p.len,
            p.spec.src_mac,
            endpoint_text(&p.src, p.random_src, DEFAULT_SRC_PORT),
            p.spec.dst_mac,
            endpoint_text(&p.dst, p.random_dst, DEFAULT_DST_PORT),
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
    /// When the counted work started and ended (CLOCK_MONOTONIC ns);
    /// `None` when nothing was counted.
    pub(crate) span: Option<(u64, u64)>,
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

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn end_rank(e: Option<End>) -> u8 {
    match e {
        None => 0,
        Some(End::Count) => 1,
        Some(End::Duration) => 2,
        Some(End::Signal) => 3,
    }
}

impl Outcome {
    /// Two threads' outcomes as one: counts added, the span covering both,
    /// the end that says most (a signal over the duration over the count).
    fn merge(self, o: Outcome) -> Outcome {
        Outcome {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            span: match (self.span, o.span) {
                (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                (a, b) => a.or(b),
            },
            end: if end_rank(o.end) > end_rank(self.end) {
                o.end
            } else {
                self.end
            },
            drops: add(self.drops, o.drops),
            gaps: add(self.gaps, o.gaps),
            reordered: add(self.reordered, o.reordered),
            malformed: add(self.malformed, o.malformed),
            queued: add(self.queued, o.queued),
            sent: add(self.sent, o.sent),
            lost: add(self.lost, o.lost),
            // ping runs in one thread only.
            rtt: self.rtt.or(o.rtt),
        }
    }

    fn report(self, mode: Mode, port: String, events: u64) -> Report {
        let ns = self.span.map_or(0, |(a, b)| b.saturating_sub(a));
        let seconds = ns as f64 / 1e9;
        let rtt = self.rtt.filter(|r| r.count > 0);
        Report {
            mode,
            port,
            threads: 1,
            thread_packets: None,
            packets: self.packets,
            bytes: self.bytes,
            seconds,
            pps: meter::per_second(self.packets as f64, ns),
            bps: meter::per_second(self.bytes as f64 * 8.0, ns),
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
            cpu_seconds: None,
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
                ..Fields::default()
            }
        );
        assert_eq!(p.duration_ns, Some(1_500_000_000));
        assert_eq!(p.count, 1000);
        for m in ["tx", "rx", "ping", "pong", "txseq", "rxseq"] {
            assert_eq!(parse(&["-i", "x", "-f", m]).unwrap().mode.name(), m);
        }
        assert!(parse(&["-i", "x", "-f", "bogus"]).is_err());
        assert!(parse(&["-i", "x", "-S", "zz"]).is_err());
        assert!(parse(&["-i", "x", "-s", "10.0.0.2-10.0.0.1"]).is_err());
        assert!(parse(&["-i", "x", "-s", "10.0.0.1:2-1"]).is_err());
    }

    #[test]
    fn plan_checks() {
        let a = |extra: &[&str]| {
            let mut v = vec!["-i", "x"];
            v.extend_from_slice(extra);
            Plan::new(&parse(&v).unwrap())
        };
        assert!(matches!(a(&["-p", "0"]), Err(PktGenError::NoThreads)));
        for m in ["ping", "pong"] {
            let e = a(&["-p", "2", "-f", m]).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{m} runs in one thread; -p 2 is only for tx, rx, txseq and rxseq")
            );
        }
        for m in ["tx", "rx", "txseq", "rxseq"] {
            assert_eq!(a(&["-p", "4", "-f", m]).unwrap().threads, 4, "{m}");
        }
        assert_eq!(
            a(&["-p", "3", "-R", "2", "-f", "tx"])
                .unwrap_err()
                .to_string(),
            "-R 2 is split over the 3 threads of -p, so it must be at least 3"
        );
        let p = a(&["-p", "3", "-R", "10", "-f", "tx"]).unwrap();
        assert_eq!(
            (0..3).map(|i| p.rate_share(i)).collect::<Vec<_>>(),
            [4, 3, 3],
            "the rate is split, the remainder to the first threads"
        );
        // txseq threads write their index after the number: 48 bytes.
        let p = a(&["-p", "2", "-f", "txseq"]).unwrap();
        assert!(p.fields.seq && p.fields.stream && !p.fields.ts);
        assert!(!a(&["-f", "txseq"]).unwrap().fields.stream);
        assert_eq!(
            a(&["-p", "2", "-f", "txseq", "-l", "47"])
                .unwrap_err()
                .to_string(),
            "txseq needs frames of at least 48 bytes with -p > 1 (room for the thread index), but -l 47 was given"
        );
        assert!(a(&["-p", "2", "-f", "rxseq", "-l", "46"]).is_ok());
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
                seq: true,
                ts: true,
                ..Fields::default()
            }
        );
        let e = a(&["-l", "45", "-f", "txseq"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "txseq needs frames of at least 46 bytes, but -l 45 was given"
        );
    }

    #[test]
    fn ranges_choose_the_stamped_fields() {
        let a = |extra: &[&str]| {
            let mut v = vec!["-i", "x"];
            v.extend_from_slice(extra);
            Plan::new(&parse(&v).unwrap())
        };
        // No range: nothing stamped for tx, the fast path.
        assert!(!a(&["-f", "tx"]).unwrap().fields.any());
        let p = a(&["-f", "tx", "-s", "10.0.0.1-10.0.0.9"]).unwrap();
        assert_eq!(
            p.fields,
            Fields {
                addrs: true,
                ..Fields::default()
            }
        );
        assert_eq!(p.spec.src_ip, std::net::Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.spec.src_port, DEFAULT_SRC_PORT);
        let p = a(&["-f", "tx", "-d", "10.1.0.1:5000-5009"]).unwrap();
        assert_eq!(
            p.fields,
            Fields {
                ports: true,
                ..Fields::default()
            }
        );
        assert_eq!(p.spec.dst_port, 5000, "the template starts the range");
        let p = a(&["-f", "txseq", "-s", "10.0.0.1-10.0.0.2:1-2"]).unwrap();
        assert!(p.fields.addrs && p.fields.ports && p.fields.seq);
        assert!(!a(&["-f", "rx", "-s", "10.0.0.1-10.0.0.2:1-2"])
            .unwrap()
            .fields
            .any());
        // An address range with -z is fine; a port range is not.
        assert!(a(&["-f", "tx", "-z", "-s", "10.0.0.1-10.0.0.2"]).is_ok());
        assert_eq!(
            a(&["-f", "tx", "-z", "-s", "10.0.0.1:1-2"])
                .unwrap_err()
                .to_string(),
            "-z picks a random source port for every packet; it cannot be combined with the source port range 10.0.0.1:1-2"
        );
        assert!(matches!(
            a(&["-f", "tx", "-Z", "-d", "10.0.0.1:1-2"]),
            Err(PktGenError::RandomWithRange { flag: "-Z", .. })
        ));
        assert_eq!(
            a(&["-f", "tx", "-d", "10.0.0.1:1-2", "-l", "41"])
                .unwrap_err()
                .to_string(),
            "tx needs frames of at least 42 bytes with a port range, but -l 41 was given"
        );
        // Backwards ranges stop at parsing, with clap naming the option.
        let e = parse(&["-i", "x", "-d", "10.0.0.9-10.0.0.1"]).unwrap_err();
        assert!(
            e.to_string().contains(
                "the address range 10.0.0.9-10.0.0.1 runs backwards: the first address must not be above the last"
            ),
            "{e}"
        );
        // The header shows the ranges.
        let p = a(&["-f", "tx", "-s", "10.0.0.1-10.0.0.9:1-2", "-Z"]).unwrap();
        let h = describe(&p, "x", 512, "");
        assert!(
            h.contains("10.0.0.1-10.0.0.9:1-2 -> ff:ff:ff:ff:ff:ff 10.1.0.1:random"),
            "{h}"
        );
    }

    #[test]
    fn threads_and_rings() {
        let p = Plan::new(&parse(&["-i", "x", "-f", "tx", "-p", "2"]).unwrap()).unwrap();
        assert_eq!(threads_note(&p, 2, 2), ", 2 threads on TX rings 0-1");
        assert_eq!(
            threads_note(&p, 4, 4),
            ", 2 threads on TX rings 0-1 (TX rings 2-3 unused)"
        );
        let p = Plan::new(&parse(&["-i", "x", "-f", "rx", "-p", "2"]).unwrap()).unwrap();
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
    fn outcomes_of_threads_add_up() {
        let a = Outcome {
            packets: 10,
            bytes: 600,
            span: Some((100, 200)),
            end: Some(End::Count),
            gaps: Some(1),
            reordered: Some(0),
            queued: Some(2),
            ..Outcome::default()
        };
        let b = Outcome {
            packets: 5,
            bytes: 300,
            span: Some((90, 150)),
            end: Some(End::Duration),
            gaps: Some(2),
            reordered: Some(3),
            ..Outcome::default()
        };
        let idle = Outcome {
            end: Some(End::Count),
            ..Outcome::default()
        };
        let m = a.merge(b).merge(idle);
        assert_eq!((m.packets, m.bytes, m.span), (15, 900, Some((90, 200))));
        assert_eq!(m.end, Some(End::Duration));
        assert_eq!((m.gaps, m.reordered, m.queued), (Some(3), Some(3), Some(2)));
        assert_eq!((m.drops, m.sent, m.rtt), (None, None, None));
        let r = m.report(Mode::Rxseq, "p".into(), 3);
        assert_eq!(r.seconds, 110e-9);
        assert_eq!(r.avg_batch, 5.0);
        let sig = Outcome {
            end: Some(End::Signal),
            ..Outcome::default()
        };
        assert_eq!(Outcome::default().merge(sig).end, Some(End::Signal));
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
