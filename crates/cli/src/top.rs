//! `ringswitch top`: a live view of a running daemon over its control
//! socket, like `top` for the switch: ports sorted by rate, drops
//! highlighted, the workers' share of time busy.
//!
//! Each refresh asks for `stats`, `port-list` and `workers` on one
//! connection kept open (connected again, saying so, when the daemon went
//! away and came back), and rates are the difference between that sample
//! and the previous one. On a terminal it draws one screen (the alternate
//! screen, redrawn in place, keys read as typed: `q` quits, `s` changes
//! the order); otherwise it prints plain lines, a block per refresh.
//!
//! The terminal is driven with termios and ANSI sequences through libc
//! (`term` below) rather than crossterm: what is needed (keys without
//! Enter, the window's size, a dozen escape sequences) takes a hundred
//! lines, and crossterm would bring mio, signal-hook and parking_lot for
//! it. Only ANSI sequences go out, so it works on any terminal, over ssh.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use ringswitch_control::{
    CallError, Connection, PortInfo, PortKind, PortStats, Request, WorkerStats,
};
use ringswitch_daemon::signals;

/// Shortest refresh interval.
const INTERVAL_MIN: Duration = Duration::from_millis(100);
/// Longest refresh interval.
const INTERVAL_MAX: Duration = Duration::from_secs(3600);
/// How long a reply may take before the daemon counts as gone.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait between looks at the keyboard, signals and the window's
/// size.
const TICK: Duration = Duration::from_millis(100);
/// How long "reconnected" stays on the screen.
const RECONNECTED_SHOWN: Duration = Duration::from_secs(10);

#[derive(Args)]
pub struct TopArgs {
    /// Seconds between refreshes (at least 0.1; fractions allowed).
    #[arg(short = 'd', long, value_name = "SECS", default_value = "1", value_parser = interval)]
    interval: Duration,
    /// Stop after N refreshes (default: until q, Ctrl-C or SIGTERM).
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
    /// Only the ports of this switch.
    #[arg(long, value_name = "NAME")]
    switch: Option<String>,
    /// Order of the ports, highest first (`s` changes it on a terminal).
    #[arg(long, value_enum, default_value_t = SortKey::Rate)]
    sort: SortKey,
    /// Print plain lines even when stdout is a terminal.
    #[arg(long)]
    plain: bool,
}

fn interval(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    let ok = secs.is_finite()
        && secs >= INTERVAL_MIN.as_secs_f64()
        && secs <= INTERVAL_MAX.as_secs_f64();
    if !ok {
        return Err(format!(
            "the interval must be from {} to {} seconds, not {s}",
            INTERVAL_MIN.as_secs_f64(),
            INTERVAL_MAX.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// What orders the ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Received plus sent packets per second.
    Rate,
    /// Received packets per second.
    Rx,
    /// Sent packets per second.
    Tx,
    /// Drops per second.
    Drops,
    /// Name, A to Z.
    Name,
}

impl SortKey {
    const ALL: [SortKey; 5] = [
        SortKey::Rate,
        SortKey::Rx,
        SortKey::Tx,
        SortKey::Drops,
        SortKey::Name,
    ];

    fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|&k| k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }

    fn word(self) -> &'static str {
        match self {
            SortKey::Rate => "rate",
            SortKey::Rx => "rx",
            SortKey::Tx => "tx",
            SortKey::Drops => "drops",
            SortKey::Name => "name",
        }
    }
}

/// Why `top` stopped short.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    /// The daemon did not answer the first refresh (with --iterations),
    /// or refused it.
    #[error(transparent)]
    Daemon(#[from] CallError),
    /// The daemon did not answer the last of --iterations refreshes.
    #[error("the daemon did not answer the last refresh")]
    LastRefresh(#[source] CallError),
    /// The signal handlers could not be installed.
    #[error("cannot install the signal handlers")]
    Signals(#[source] io::Error),
    /// The terminal could not be set up or written.
    #[error("cannot draw on the terminal")]
    Terminal(#[source] io::Error),
    /// Standard output could not be written.
    #[error("cannot write to standard output")]
    Output(#[source] io::Error),
}

/// One refresh's answers.
struct Sample {
    /// When the port counters came.
    at: Instant,
    ports: Vec<PortStats>,
    /// Each port's kind and worker, from `port-list`.
    info: HashMap<String, (PortKind, Option<u32>)>,
    workers: Vec<WorkerStats>,
}

/// The connection to the daemon, kept open across refreshes.
struct Link<'a> {
    socket: &'a Path,
    switch: Option<String>,
    conn: Option<Connection>,
    /// A connection was lost and none is open since.
    lost: bool,
}

/// What a refresh got.
enum Polled {
    /// A sample; `reconnected` when the connection is new after a lost one.
    Sample { sample: Sample, reconnected: bool },
    /// The daemon is not reachable (no connection now).
    Unreachable(CallError),
    /// The daemon answered with a refusal (the connection stays).
    Refused(CallError),
}

impl Link<'_> {
    fn poll(&mut self) -> Polled {
        let fresh = self.conn.is_none();
        let conn = match self.conn.take() {
            Some(c) => c,
            None => match connect(self.socket) {
                Ok(c) => c,
                Err(e) => return Polled::Unreachable(e),
            },
        };
        let conn = self.conn.insert(conn);
        match ask(conn, self.switch.as_deref()) {
            Ok(sample) => {
                let reconnected = fresh && self.lost;
                self.lost = false;
                Polled::Sample {
                    sample,
                    reconnected,
                }
            }
            Err(e @ CallError::Daemon(_)) => Polled::Refused(e),
            Err(e) => {
                // A reply that came too late would answer the next request:
                // this connection is done.
                self.conn = None;
                self.lost = true;
                Polled::Unreachable(e)
            }
        }
    }
}

fn connect(socket: &Path) -> Result<Connection, CallError> {
    let c = Connection::connect(socket)?;
    c.socket().set_read_timeout(Some(REPLY_TIMEOUT))?;
    Ok(c)
}

fn ask(c: &mut Connection, switch: Option<&str>) -> Result<Sample, CallError> {
    let switch = switch.map(str::to_string);
    let (ports, _) = c.call_as::<Vec<PortStats>>(&Request::Stats {
        switch: switch.clone(),
    })?;
    let at = Instant::now();
    let (list, _) = c.call_as::<Vec<PortInfo>>(&Request::PortList { switch })?;
    let (workers, _) = c.call_as::<Vec<WorkerStats>>(&Request::Workers)?;
    Ok(Sample {
        at,
        ports,
        info: list
            .into_iter()
            .map(|p| (p.name, (p.kind, p.worker)))
            .collect(),
        workers,
    })
}

/// Every frame a port's counters say was lost, whichever the cause.
fn drops(s: &PortStats) -> u64 {
    // Named one by one, so that a counter added to PortStats does not
    // compile here until it is sorted into drops or not.
    let PortStats {
        name: _,
        tx_packets: _,
        tx_bytes: _,
        rx_packets: _,
        rx_bytes: _,
        drop_rx_full,
        drop_malformed,
        drop_short,
        drop_long,
        ring_reinits: _,
        drop_link_down,
        drop_no_dest,
        drop_vlan,
        rx_segments_added: _,
        interrupts: _,
        drop_kernel,
        kernel_tx_invalid,
        vm_rx_bad_chains,
        vm_ring_errors: _,
        vm_interrupts: _,
        vm_interrupts_dropped: _,
        vm_guest_faults: _,
        vm_frontend_errors: _,
    } = *s;
    [
        drop_rx_full,
        drop_malformed,
        drop_short,
        drop_long,
        drop_link_down,
        drop_no_dest,
        drop_vlan,
        drop_kernel,
        kernel_tx_invalid,
        vm_rx_bad_chains,
    ]
    .iter()
    .fold(0u64, |a, &n| a.saturating_add(n))
}

/// A port's rates over the last interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PortRate {
    rx_pps: f64,
    rx_bps: f64,
    tx_pps: f64,
    tx_bps: f64,
    drops_ps: f64,
    /// Frames dropped in the interval.
    drops: u64,
}

/// `new` less `old` over `dt_s` seconds; none when a counter went back
/// (the port was made again).
fn port_rate(old: &PortStats, new: &PortStats, dt_s: f64) -> Option<PortRate> {
    let d = |a: u64, b: u64| b.checked_sub(a);
    let rx = d(old.rx_packets, new.rx_packets)?;
    let rx_bytes = d(old.rx_bytes, new.rx_bytes)?;
    let tx = d(old.tx_packets, new.tx_packets)?;
    let tx_bytes = d(old.tx_bytes, new.tx_bytes)?;
    let dropped = d(drops(old), drops(new))?;
    if dt_s <= 0.0 {
        return None;
    }
    Some(PortRate {
        rx_pps: rx as f64 / dt_s,
        rx_bps: rx_bytes as f64 * 8.0 / dt_s,
        tx_pps: tx as f64 / dt_s,
        tx_bps: tx_bytes as f64 * 8.0 / dt_s,
        drops_ps: dropped as f64 / dt_s,
        drops: dropped,
    })
}

/// A port as shown.
#[derive(Clone, Debug)]
struct PortRow {
    name: String,
    kind: &'static str,
    worker: Option<u32>,
    /// Drops since the port was made.
    drops_total: u64,
    /// None until a second sample.
    rate: Option<PortRate>,
}

fn kind_word(k: PortKind) -> &'static str {
    match k {
        PortKind::Vale => "vale",
        PortKind::Pipe => "pipe",
        PortKind::VhostUser => "vhost-user",
        PortKind::Nic => "nic",
        PortKind::Host => "host",
    }
}

fn port_rows(prev: Option<&Sample>, cur: &Sample) -> Vec<PortRow> {
    let old: HashMap<&str, &PortStats> = prev
        .map(|p| p.ports.iter().map(|s| (s.name.as_str(), s)).collect())
        .unwrap_or_default();
    let dt_s = prev.map_or(0.0, |p| cur.at.duration_since(p.at).as_secs_f64());
    cur.ports
        .iter()
        .map(|s| {
            let (kind, worker) = cur
                .info
                .get(&s.name)
                .map_or(("-", None), |&(k, w)| (kind_word(k), w));
            PortRow {
                name: s.name.clone(),
                kind,
                worker,
                drops_total: drops(s),
                rate: old.get(s.name.as_str()).and_then(|o| port_rate(o, s, dt_s)),
            }
        })
        .collect()
}

/// A worker's shares and rates over the last interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct WorkerRate {
    busy_pct: f64,
    /// None where the kernel does not count CPU time.
    cpu_pct: Option<f64>,
    wakeups_ps: f64,
    frames_ps: f64,
    /// None without batches in the interval.
    per_batch: Option<f64>,
    /// None without frames in the interval.
    cycles_per_frame: Option<f64>,
}

fn worker_rate(old: &WorkerStats, new: &WorkerStats) -> Option<WorkerRate> {
    let d = |a: u64, b: u64| b.checked_sub(a);
    let up_ns = d(old.uptime_ns, new.uptime_ns).filter(|&n| n > 0)?;
    let busy_ns = d(old.busy_ns, new.busy_ns)?;
    let cpu_ns = d(old.cpu_ns, new.cpu_ns)?;
    let wakeups = d(old.wakeups, new.wakeups)?;
    let batches = d(old.batches, new.batches)?;
    let frames = d(old.packets, new.packets)?;
    let cycles = d(old.busy_cycles, new.busy_cycles)?;
    let up = up_ns as f64;
    let share = |ns: u64| (ns as f64 * 100.0 / up).clamp(0.0, 100.0);
    let up_s = up / 1e9;
    Some(WorkerRate {
        busy_pct: share(busy_ns),
        cpu_pct: (new.cpu_ns != 0).then(|| share(cpu_ns)),
        wakeups_ps: wakeups as f64 / up_s,
        frames_ps: frames as f64 / up_s,
        per_batch: (batches > 0).then(|| frames as f64 / batches as f64),
        cycles_per_frame: (frames > 0).then(|| cycles as f64 / frames as f64),
    })
}

/// A worker as shown.
#[derive(Clone, Debug)]
struct WorkerRow {
    worker: u32,
    sources: u32,
    rate: Option<WorkerRate>,
}

fn worker_rows(prev: Option<&Sample>, cur: &Sample) -> Vec<WorkerRow> {
    cur.workers
        .iter()
        .map(|w| WorkerRow {
            worker: w.worker,
            sources: w.sources,
            rate: prev
                .and_then(|p| p.workers.iter().find(|o| o.worker == w.worker))
                .and_then(|o| worker_rate(o, w)),
        })
        .collect()
}

/// A count with a k, M, G or T suffix (powers of 1000), three digits.
fn si(v: f64) -> String {
    if !v.is_finite() || v < 0.0 {
        return "-".into();
    }
    if v < 999.5 {
        return format!("{v:.0}");
    }
    let mut n = v;
    for suffix in ["k", "M", "G", "T"] {
        n /= 1000.0;
        if n < 9.995 {
            return format!("{n:.2}{suffix}");
        }
        if n < 99.95 {
            return format!("{n:.1}{suffix}");
        }
        if n < 999.5 {
            return format!("{n:.0}{suffix}");
        }
    }
    format!("{n:.0}T")
}

fn one_decimal(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

/// How a line is drawn on a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Plain,
    Bold,
    /// Red and bold: drops, a daemon out of reach.
    Alert,
}

#[derive(Clone, Debug)]
struct Line {
    text: String,
    style: Style,
}

impl Line {
    fn new(text: impl Into<String>, style: Style) -> Line {
        Line {
            text: text.into(),
            style,
        }
    }
}

/// A line under the header that says what is wrong or what changed.
#[derive(Clone, Debug)]
enum Status {
    Unreachable(String),
    Refused(String),
    Reconnected(String),
}

/// What a refresh found, kept to draw again (a key, a new window size).
struct Shown {
    stamp: String,
    status: Option<Status>,
    ports: Vec<PortRow>,
    workers: Vec<WorkerRow>,
}

/// What is drawn besides the numbers.
struct Frame<'a> {
    socket: &'a Path,
    switch: Option<&'a str>,
    interval: Duration,
    sort: SortKey,
    /// Drawn on a terminal (keys work).
    terminal: bool,
}

/// Ports in `key`'s order, highest first; ties, and ports without rates
/// yet, by name.
fn sorted(ports: &[PortRow], key: SortKey) -> Vec<&PortRow> {
    let mut v: Vec<&PortRow> = ports.iter().collect();
    let value = |p: &PortRow| -> Option<(f64, f64)> {
        let r = p.rate?;
        Some(match key {
            SortKey::Rate => (r.rx_pps + r.tx_pps, r.rx_bps + r.tx_bps),
            SortKey::Rx => (r.rx_pps, r.rx_bps),
            SortKey::Tx => (r.tx_pps, r.tx_bps),
            SortKey::Drops => (r.drops_ps, p.drops_total as f64),
            SortKey::Name => return None,
        })
    };
    v.sort_by(|a, b| {
        let by_value = match (value(a), value(b)) {
            (Some(x), Some(y)) => y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_value.then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// Columns: the first `left` left-aligned, the others right-aligned; each
/// line starts with its row's mark.
fn table(
    out: &mut Vec<Line>,
    headers: &[&str],
    left: usize,
    rows: Vec<(char, Vec<String>, Style)>,
) {
    let mut w: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for (_, r, _) in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |mark: char, cells: &[String]| {
        let mut s = String::new();
        s.push(mark);
        for (i, c) in cells.iter().enumerate() {
            s.push_str(if i == 0 { " " } else { "  " });
            if i < left {
                let _ = write!(s, "{c:<w$}", w = w[i]);
            } else {
                let _ = write!(s, "{c:>w$}", w = w[i]);
            }
        }
        s.trim_end().to_string()
    };
    let h: Vec<String> = headers.iter().map(|s| s.to_string()).collect();
    out.push(Line::new(line(' ', &h), Style::Bold));
    for (mark, r, style) in rows {
        out.push(Line::new(line(mark, &r), style));
    }
}

fn render(f: &Frame<'_>, s: &Shown) -> Vec<Line> {
    let mut out = Vec::new();
    let mut title = format!("{}  ringswitch top  {}", s.stamp, f.socket.display());
    if let Some(sw) = f.switch {
        let _ = write!(title, "  switch {sw}");
    }
    let _ = write!(
        title,
        "  every {}s  sort {}",
        f.interval.as_secs_f64(),
        f.sort.word()
    );
    if f.terminal {
        title.push_str("  (q quit, s sort)");
    }
    out.push(Line::new(title, Style::Bold));

    if !matches!(s.status, Some(Status::Unreachable(_))) {
        let rated: Vec<PortRate> = s.ports.iter().filter_map(|p| p.rate).collect();
        let dropping = rated.iter().filter(|r| r.drops > 0).count();
        let mut totals = format!(
            "{} port{}",
            s.ports.len(),
            if s.ports.len() == 1 { "" } else { "s" }
        );
        if rated.is_empty() {
            totals.push_str("  rx - pps - bit/s  tx - pps - bit/s  drops -/s");
        } else {
            let sum = |f: fn(&PortRate) -> f64| rated.iter().map(f).sum::<f64>();
            let _ = write!(
                totals,
                "  rx {} pps {}bit/s  tx {} pps {}bit/s  drops {}/s",
                si(sum(|r| r.rx_pps)),
                si(sum(|r| r.rx_bps)),
                si(sum(|r| r.tx_pps)),
                si(sum(|r| r.tx_bps)),
                si(sum(|r| r.drops_ps)),
            );
            if dropping > 0 {
                let _ = write!(totals, " ({dropping} dropping)");
            }
        }
        out.push(Line::new(
            totals,
            if dropping > 0 {
                Style::Alert
            } else {
                Style::Plain
            },
        ));
    }
    match &s.status {
        Some(Status::Unreachable(e)) => out.push(Line::new(
            format!(
                "daemon not reachable: {e}; trying again every {}s",
                f.interval.as_secs_f64()
            ),
            Style::Alert,
        )),
        Some(Status::Refused(e)) => {
            out.push(Line::new(format!("the daemon refused: {e}"), Style::Alert))
        }
        Some(Status::Reconnected(at)) => out.push(Line::new(
            format!("reconnected to the daemon at {at}: rates start again from there"),
            Style::Bold,
        )),
        None => {}
    }
    if matches!(s.status, Some(Status::Unreachable(_))) {
        return out;
    }

    // Plain refreshes are apart by one blank line; none inside one.
    if f.terminal {
        out.push(Line::new("", Style::Plain));
    }
    let dash = || "-".to_string();
    table(
        &mut out,
        &[
            "WORKER",
            "SOURCES",
            "BUSY%",
            "CPU%",
            "WAKEUPS/S",
            "FRAMES/S",
            "PER_BATCH",
            "CYC/FRAME",
        ],
        0,
        s.workers
            .iter()
            .map(|w| {
                let mut cells = vec![w.worker.to_string(), w.sources.to_string()];
                match w.rate {
                    Some(r) => cells.extend([
                        format!("{:.1}", r.busy_pct),
                        one_decimal(r.cpu_pct),
                        si(r.wakeups_ps),
                        si(r.frames_ps),
                        one_decimal(r.per_batch),
                        one_decimal(r.cycles_per_frame),
                    ]),
                    None => cells.extend(std::iter::repeat_with(dash).take(6)),
                }
                (' ', cells, Style::Plain)
            })
            .collect(),
    );
    if f.terminal {
        out.push(Line::new("", Style::Plain));
    }
    table(
        &mut out,
        &[
            "PORT", "KIND", "WORKER", "RX_PPS", "RX_BIT/S", "TX_PPS", "TX_BIT/S", "DROPS/S",
            "DROPS",
        ],
        2,
        sorted(&s.ports, f.sort)
            .into_iter()
            .map(|p| {
                let mut cells = vec![
                    p.name.clone(),
                    p.kind.to_string(),
                    p.worker.map_or_else(dash, |w| w.to_string()),
                ];
                match p.rate {
                    Some(r) => cells.extend([
                        si(r.rx_pps),
                        si(r.rx_bps),
                        si(r.tx_pps),
                        si(r.tx_bps),
                        si(r.drops_ps),
                    ]),
                    None => cells.extend(std::iter::repeat_with(dash).take(5)),
                }
                cells.push(p.drops_total.to_string());
                // Marked and red when it dropped in the last interval.
                let dropped = p.rate.is_some_and(|r| r.drops > 0);
                if dropped {
                    ('!', cells, Style::Alert)
                } else {
                    (' ', cells, Style::Plain)
                }
            })
            .collect(),
    );
    out
}

/// `lines` cut to a window of `cols` by `rows`: the last row that fits
/// says how many more there are.
fn fit(mut lines: Vec<Line>, cols: usize, rows: usize) -> Vec<Line> {
    let rows = rows.max(1);
    if lines.len() > rows {
        let more = lines.len() - (rows - 1);
        lines.truncate(rows - 1);
        lines.push(Line::new(
            format!("  ... {more} more lines: a taller window shows them"),
            Style::Bold,
        ));
    }
    for l in &mut lines {
        if l.text.chars().count() > cols {
            l.text = l.text.chars().take(cols).collect();
        }
    }
    lines
}

/// The local time as `2025-06-01 12:34:56 +0200`.
fn stamp(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX);
    // SAFETY: a zeroed tm is valid (integers and a null zone pointer);
    // localtime_r only writes into it, and reads `secs`; both live across
    // the call.
    let (tm, ok) = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let ok = !libc::localtime_r(&secs, &mut tm).is_null();
        (tm, ok)
    };
    if !ok {
        return format!("@{secs}");
    }
    let off_min = tm.tm_gmtoff / 60;
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} {}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        if off_min < 0 { '-' } else { '+' },
        off_min.abs() / 60,
        off_min.abs() % 60
    )
}

/// Where the refreshes go.
enum Out {
    Screen(term::Screen),
    Plain,
}

impl Out {
    fn draw(&mut self, f: &Frame<'_>, s: &Shown) -> Result<(), TopError> {
        let lines = render(f, s);
        match self {
            Out::Screen(scr) => scr.draw(&lines).map_err(TopError::Terminal),
            Out::Plain => {
                let mut text = String::new();
                for l in &lines {
                    text.push_str(&l.text);
                    text.push('\n');
                }
                text.push('\n');
                let mut o = io::stdout().lock();
                o.write_all(text.as_bytes())
                    .and_then(|()| o.flush())
                    .map_err(TopError::Output)
            }
        }
    }
}

/// Runs `ringswitch top` until `q`, a signal, or --iterations.
pub fn run(socket: &Path, a: TopArgs) -> Result<(), TopError> {
    signals::install().map_err(TopError::Signals)?;
    let terminal = !a.plain && io::stdout().is_terminal();
    let mut link = Link {
        socket,
        switch: a.switch.clone(),
        conn: None,
        lost: false,
    };
    let mut frame = Frame {
        socket,
        switch: a.switch.as_deref(),
        interval: a.interval,
        sort: a.sort,
        terminal,
    };
    let mut prev: Option<Sample> = None;
    let mut reconnected: Option<(String, Instant)> = None;
    let mut output: Option<Out> = (!terminal).then_some(Out::Plain);
    let mut done = 0u64;
    let mut next = Instant::now();
    loop {
        let polled = link.poll();
        let stamp = stamp(SystemTime::now());
        let mut failed = None;
        let shown = match polled {
            Polled::Sample {
                sample,
                reconnected: again,
            } => {
                if again {
                    prev = None;
                    reconnected = Some((stamp.clone(), Instant::now()));
                }
                let shown = Shown {
                    status: reconnected
                        .as_ref()
                        .filter(|(_, t)| t.elapsed() < RECONNECTED_SHOWN)
                        .map(|(at, _)| Status::Reconnected(at.clone())),
                    stamp,
                    ports: port_rows(prev.as_ref(), &sample),
                    workers: worker_rows(prev.as_ref(), &sample),
                };
                prev = Some(sample);
                shown
            }
            Polled::Unreachable(e) | Polled::Refused(e) if done == 0 && a.iterations.is_some() => {
                // A script asked for a few refreshes: say at once that
                // there is nothing to show.
                return Err(TopError::Daemon(e));
            }
            Polled::Unreachable(e) => {
                prev = None;
                let shown = Shown {
                    stamp,
                    status: Some(Status::Unreachable(ringswitch_control::error_chain(&e))),
                    ports: Vec::new(),
                    workers: Vec::new(),
                };
                failed = Some(e);
                shown
            }
            Polled::Refused(e) => {
                let shown = Shown {
                    stamp,
                    status: Some(Status::Refused(ringswitch_control::error_chain(&e))),
                    ports: Vec::new(),
                    workers: Vec::new(),
                };
                failed = Some(e);
                shown
            }
        };
        // The screen is taken only once there is something to show, so an
        // error above leaves the terminal as it was.
        let out = match &mut output {
            Some(o) => o,
            None => output.insert(Out::Screen(
                term::Screen::enter().map_err(TopError::Terminal)?,
            )),
        };
        match out.draw(&frame, &shown) {
            Err(TopError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
        done += 1;
        if a.iterations == Some(done) {
            return failed.map_or(Ok(()), |e| Err(TopError::LastRefresh(e)));
        }
        next = (next + a.interval).max(Instant::now());
        // Until the next refresh: keys, signals, a new window size.
        loop {
            if signals::stopping() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            let wait = (next - now).min(TICK);
            let redraw = match out {
                Out::Plain => {
                    std::thread::sleep(wait);
                    false
                }
                Out::Screen(scr) => {
                    let resized = scr.resized();
                    match scr.key(wait).map_err(TopError::Terminal)? {
                        term::Input::Quit => return Ok(()),
                        term::Input::Sort => {
                            frame.sort = frame.sort.next();
                            true
                        }
                        term::Input::Nothing => resized,
                    }
                }
            };
            if redraw {
                out.draw(&frame, &shown)?;
            }
        }
    }
}

/// The terminal: keys as typed, the alternate screen, its size; put back
/// as it was on every way out (drop, panic, error).
mod term {
    use std::io::{self, IsTerminal, Write};
    use std::mem::MaybeUninit;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, Once, PoisonError};
    use std::time::Duration;

    use super::{Line, Style};

    /// Alternate screen on, cursor hidden, cleared.
    const ENTER: &str = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
    /// Attributes reset, cursor shown, alternate screen off.
    const LEAVE: &str = "\x1b[0m\x1b[?25h\x1b[?1049l";

    /// stdin's terminal settings before keys were read as typed.
    static SAVED: Mutex<Option<libc::termios>> = Mutex::new(None);
    /// The alternate screen is on.
    static ON_SCREEN: AtomicBool = AtomicBool::new(false);
    static PANIC_HOOK: Once = Once::new();

    /// What the keyboard said.
    pub enum Input {
        Nothing,
        /// `q`, Ctrl-C, or the terminal went away.
        Quit,
        /// `s`: the next order.
        Sort,
    }

    /// The screen, set up; put back when dropped.
    pub struct Screen {
        /// stdin is the terminal and reads keys as typed.
        keys: bool,
        /// The size last drawn at.
        size: (usize, usize),
    }

    impl Screen {
        pub fn enter() -> io::Result<Screen> {
            // A panic message must land on the normal screen, after it is
            // back: the hook puts it back first.
            PANIC_HOOK.call_once(|| {
                let prev = std::panic::take_hook();
                std::panic::set_hook(Box::new(move |info| {
                    restore();
                    prev(info);
                }));
            });
            let mut s = Screen {
                keys: false,
                size: size(),
            };
            if io::stdin().is_terminal() {
                keys_as_typed()?;
                s.keys = true;
            }
            ON_SCREEN.store(true, Ordering::SeqCst);
            write_out(ENTER)?;
            Ok(s)
        }

        /// Whether the window's size changed since the last draw.
        pub fn resized(&self) -> bool {
            size() != self.size
        }

        /// Redraws the screen with `lines`, cut to the window.
        pub fn draw(&mut self, lines: &[Line]) -> io::Result<()> {
            self.size = size();
            let (cols, rows) = self.size;
            let lines = super::fit(lines.to_vec(), cols, rows);
            // Home, then each line over the old one and the rest of the
            // old line cleared, then everything below: no flicker.
            let mut s = String::from("\x1b[H");
            for (i, l) in lines.iter().enumerate() {
                if i > 0 {
                    s.push_str("\r\n");
                }
                match l.style {
                    Style::Plain => s.push_str(&l.text),
                    Style::Bold => {
                        s.push_str("\x1b[1m");
                        s.push_str(&l.text);
                        s.push_str("\x1b[0m");
                    }
                    Style::Alert => {
                        s.push_str("\x1b[1;31m");
                        s.push_str(&l.text);
                        s.push_str("\x1b[0m");
                    }
                }
                s.push_str("\x1b[K");
            }
            s.push_str("\x1b[J");
            write_out(&s)
        }

        /// Waits at most `wait` for a key.
        pub fn key(&self, wait: Duration) -> io::Result<Input> {
            if !self.keys {
                std::thread::sleep(wait);
                return Ok(Input::Nothing);
            }
            let mut fds = [ringswitch_ring::poll::watch(0, libc::POLLIN)];
            match ringswitch_ring::poll::poll_fds(&mut fds, Some(wait)) {
                Ok(0) => return Ok(Input::Nothing),
                Ok(_) => {}
                // A signal: the caller looks at the stop flag.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Input::Nothing),
                Err(e) => return Err(e),
            }
            let mut buf = [0u8; 64];
            // SAFETY: reads at most buf.len() bytes into buf, which lives
            // across the call; fd 0 is open (it is our terminal).
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            let n = match usize::try_from(n) {
                // End of input: the terminal hung up.
                Ok(0) => return Ok(Input::Quit),
                Ok(n) => n,
                Err(_) => {
                    let e = io::Error::last_os_error();
                    return match e.kind() {
                        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => {
                            Ok(Input::Nothing)
                        }
                        _ => Err(e),
                    };
                }
            };
            let mut input = Input::Nothing;
            for &b in &buf[..n] {
                match b {
                    b'q' | b'Q' | 0x03 => return Ok(Input::Quit),
                    b's' | b'S' => input = Input::Sort,
                    _ => {}
                }
            }
            Ok(input)
        }
    }

    impl Drop for Screen {
        fn drop(&mut self) {
            restore();
        }
    }

    /// Puts the terminal back as it was (idempotent).
    pub fn restore() {
        if ON_SCREEN.swap(false, Ordering::SeqCst) {
            let _ = write_out(LEAVE);
        }
        if let Some(t) = SAVED.lock().unwrap_or_else(PoisonError::into_inner).take() {
            // SAFETY: `t` is the termios tcgetattr gave for fd 0, alive
            // across the call.
            unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
        }
    }

    /// Keys reach us as typed, unechoed; Ctrl-C is a key (read as `q`),
    /// not a signal, so no half-drawn screen is left by it.
    fn keys_as_typed() -> io::Result<()> {
        let mut t = MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr writes a whole termios into `t` on success.
        if unsafe { libc::tcgetattr(0, t.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: initialized by the successful tcgetattr above.
        let saved = unsafe { t.assume_init() };
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
        raw.c_iflag &= !(libc::IXON | libc::ICRNL);
        raw.c_cc[libc::VMIN] = 0;
        raw.c_cc[libc::VTIME] = 0;
        // Saved first: whatever part of the change takes, restore undoes.
        *SAVED.lock().unwrap_or_else(PoisonError::into_inner) = Some(saved);
        // SAFETY: `raw` is a termios copied from tcgetattr's, alive across
        // the call.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The window's size in columns and rows (80x24 when unknown).
    fn size() -> (usize, usize) {
        // SAFETY: a zeroed winsize is valid plain data; TIOCGWINSZ writes
        // one into it, which lives across the call.
        let ws = unsafe {
            let mut ws: libc::winsize = std::mem::zeroed();
            if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) != 0 {
                return (80, 24);
            }
            ws
        };
        if ws.ws_col == 0 || ws.ws_row == 0 {
            return (80, 24);
        }
        (usize::from(ws.ws_col), usize::from(ws.ws_row))
    }

    fn write_out(s: &str) -> io::Result<()> {
        let mut o = io::stdout().lock();
        o.write_all(s.as_bytes())?;
        o.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(name: &str, rx: u64, tx: u64) -> PortStats {
        PortStats {
            name: name.into(),
            rx_packets: rx,
            rx_bytes: rx * 60,
            tx_packets: tx,
            tx_bytes: tx * 60,
            ..PortStats::default()
        }
    }

    fn sample(at: Instant, ports: Vec<PortStats>, workers: Vec<WorkerStats>) -> Sample {
        Sample {
            at,
            info: ports
                .iter()
                .map(|p| (p.name.clone(), (PortKind::Vale, Some(0))))
                .collect(),
            ports,
            workers,
        }
    }

    #[test]
    fn counts_read_in_thousands() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(999.0), "999");
        assert_eq!(si(999.6), "1.00k");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(123_456.0), "123k");
        assert_eq!(si(999_600.0), "1.00M");
        assert_eq!(si(14_880_952.0), "14.9M");
        assert_eq!(si(10e9), "10.0G");
        assert_eq!(si(f64::NAN), "-");
    }

    #[test]
    fn every_drop_counter_counts_as_a_drop() {
        let s = PortStats {
            drop_rx_full: 1,
            drop_malformed: 2,
            drop_short: 4,
            drop_long: 8,
            drop_link_down: 16,
            drop_no_dest: 32,
            drop_vlan: 64,
            drop_kernel: 128,
            kernel_tx_invalid: 256,
            vm_rx_bad_chains: 512,
            // Not frames lost: events.
            ring_reinits: 1 << 20,
            vm_ring_errors: 1 << 21,
            interrupts: 1 << 22,
            ..stats("vale0:a", 5, 5)
        };
        assert_eq!(drops(&s), 1023);
    }

    #[test]
    fn rates_are_the_difference_over_the_interval() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(500);
        let a0 = sample(t0, vec![stats("vale0:a", 0, 100)], vec![]);
        let mut b = stats("vale0:a", 0, 1100);
        b.drop_rx_full = 10;
        let a1 = sample(t1, vec![b], vec![]);
        let first = port_rows(None, &a0);
        assert!(first[0].rate.is_none(), "no rate from one sample");
        let r = port_rows(Some(&a0), &a1)[0].rate.unwrap();
        assert_eq!(r.tx_pps, 2000.0);
        assert_eq!(r.tx_bps, 2000.0 * 60.0 * 8.0);
        assert_eq!(r.rx_pps, 0.0);
        assert_eq!((r.drops, r.drops_ps), (10, 20.0));
        // A port made again: its counters went back, no rate this time.
        let a2 = sample(
            t1 + Duration::from_secs(1),
            vec![stats("vale0:a", 0, 5)],
            vec![],
        );
        assert!(port_rows(Some(&a1), &a2)[0].rate.is_none());
    }

    #[test]
    fn workers_busy_share_is_over_their_uptime() {
        let w0 = WorkerStats {
            uptime_ns: 1_000_000_000,
            busy_ns: 100_000_000,
            cpu_ns: 200_000_000,
            wakeups: 10,
            batches: 10,
            packets: 1000,
            busy_cycles: 50_000,
            ..WorkerStats::default()
        };
        let w1 = WorkerStats {
            uptime_ns: 3_000_000_000,
            busy_ns: 600_000_000,
            cpu_ns: 1_200_000_000,
            wakeups: 30,
            batches: 20,
            packets: 5000,
            busy_cycles: 450_000,
            ..w0.clone()
        };
        let r = worker_rate(&w0, &w1).unwrap();
        assert_eq!(r.busy_pct, 25.0);
        assert_eq!(r.cpu_pct, Some(50.0));
        assert_eq!(r.wakeups_ps, 10.0);
        assert_eq!(r.frames_ps, 2000.0);
        assert_eq!(r.per_batch, Some(400.0));
        assert_eq!(r.cycles_per_frame, Some(100.0));
        // A restarted worker (uptime went back): no rate.
        assert!(worker_rate(&w1, &w0).is_none());
    }

    fn shown(prev: Option<&Sample>, cur: &Sample) -> Shown {
        Shown {
            stamp: "2025-01-01 00:00:00 +0000".into(),
            status: None,
            ports: port_rows(prev, cur),
            workers: worker_rows(prev, cur),
        }
    }

    #[test]
    fn ports_come_highest_rate_first_and_drops_are_marked() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let names = ["vale0:a", "vale0:b", "vale0:c"];
        let s0 = sample(t0, names.iter().map(|n| stats(n, 0, 0)).collect(), vec![]);
        let mut c = stats("vale0:c", 10, 0);
        c.drop_rx_full = 3;
        let s1 = sample(
            t1,
            vec![stats("vale0:a", 5, 0), stats("vale0:b", 0, 1000), c],
            vec![],
        );
        let f = Frame {
            socket: Path::new("/s"),
            switch: None,
            interval: Duration::from_secs(1),
            sort: SortKey::Rate,
            terminal: false,
        };
        let lines = render(&f, &shown(Some(&s0), &s1));
        let text: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        let order: Vec<&str> = text
            .iter()
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("vale0:")))
            .collect();
        assert_eq!(order, ["vale0:b", "vale0:c", "vale0:a"], "{text:#?}");
        let c_line = lines.iter().find(|l| l.text.contains("vale0:c")).unwrap();
        assert!(c_line.text.starts_with('!'), "{}", c_line.text);
        assert_eq!(c_line.style, Style::Alert);
        assert!(text.iter().all(|l| !l.contains('\x1b')));
        assert!(text[1].contains("(1 dropping)"), "{}", text[1]);

        // One sample: every rate is "-", sorted by name.
        let lines = render(&f, &shown(None, &s0));
        let a = lines.iter().find(|l| l.text.contains("vale0:a")).unwrap();
        let cells: Vec<&str> = a.text.split_whitespace().collect();
        assert_eq!(
            cells,
            ["vale0:a", "vale", "0", "-", "-", "-", "-", "-", "0"]
        );
    }

    #[test]
    fn a_small_window_gets_what_fits_and_how_much_more() {
        let lines: Vec<Line> = (0..10)
            .map(|i| Line::new(format!("line {i} is long"), Style::Plain))
            .collect();
        let f = fit(lines, 6, 4);
        let t: Vec<&str> = f.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(t, ["line 0", "line 1", "line 2", "  ... "]);
    }

    #[test]
    fn intervals_are_bounded() {
        assert_eq!(interval("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(interval("2").unwrap(), Duration::from_secs(2));
        assert!(interval("0.05").unwrap_err().contains("from 0.1 to 3600"));
        assert!(interval("nan").is_err());
        assert!(interval("soon").is_err());
    }

    #[test]
    fn the_sort_key_cycles_through_all() {
        let mut k = SortKey::Rate;
        for _ in 0..SortKey::ALL.len() {
            k = k.next();
        }
        assert_eq!(k, SortKey::Rate);
    }
}
