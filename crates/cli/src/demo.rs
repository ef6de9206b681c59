//! `ringswitch demo`: an embedded daemon, a pipe and a switch, a generator
//! and a sink on each, live rates, and a summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use ringswitch_client::Port;
use ringswitch_control::{Connection, PortStats, Request};

#[derive(Args)]
pub struct DemoArgs {
    /// Seconds of traffic on each path.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Frame length in bytes.
    #[arg(short = 'l', long, default_value_t = 60)]
    len: u16,
    /// Which paths to show.
    #[arg(long, value_enum, default_value_t = Paths::Both)]
    path: Paths,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Paths {
    Pipe,
    Switch,
    Both,
}

const SINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const PING_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x03];
const PONG_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x04];

fn frame(len: u16, dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; len as usize];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12] = 0x88;
    f[13] = 0xb5; // local experimental ethertype
    f
}

fn generate(mut p: Port, tmpl: Vec<u8>, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> Port {
    let len = tmpl.len() as u16;
    // Which buffers already hold the template: a pipe swaps buffers around,
    // and after one lap every buffer carries it, so the copy stops.
    let mut filled = vec![false; p.region().layout().nbufs as usize];
    while !stop.load(Ordering::Relaxed) {
        let mut tx = p.tx(0);
        let n = tx.space().min(512);
        if n == 0 {
            let _ = tx.wait(Some(Duration::from_millis(100)));
            continue;
        }
        for k in 0..n {
            if let Some(mut s) = tx.slot(k) {
                let b = s.buf_idx() as usize;
                if b < filled.len() && !filled[b] {
                    s.write_at(0, &tmpl);
                    filled[b] = true;
                }
                s.set_len(len);
            }
        }
        tx.advance(n);
        let _ = tx.sync();
        sent.fetch_add(n as u64, Ordering::Relaxed);
    }
    p
}

fn sink(mut p: Port, stop: Arc<AtomicBool>, got: Arc<AtomicU64>) -> Port {
    while !stop.load(Ordering::Relaxed) {
        let mut rx = p.rx(0);
        if !matches!(rx.wait(Some(Duration::from_millis(100))), Ok(true)) {
            continue;
        }
        let n = rx.space();
        rx.advance(n);
        let _ = rx.sync();
        got.fetch_add(n as u64, Ordering::Relaxed);
    }
    p
}

/// Round trips timed by [`round_trips`].
const ROUND_TRIPS: usize = 1000;

/// How long a round trip's end waits for a frame before giving up: far
/// beyond any answer, which only a lost frame would need.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Answers every frame `p` receives with one frame `tmpl`, until it has
/// answered `rounds` or heard nothing for ten seconds.
fn pong(mut p: Port, tmpl: Vec<u8>, rounds: usize) -> Port {
    let len = tmpl.len() as u16;
    let mut done = 0;
    while done < rounds {
        let n = {
            let mut rx = p.rx(0);
            if !matches!(rx.wait(Some(ANSWER_WAIT)), Ok(true)) {
                break;
            }
            let n = rx.space();
            rx.advance(n);
            let _ = rx.sync();
            n
        };
        let mut tx = p.tx(0);
        let k = n.min(tx.space());
        for j in 0..k {
            if let Some(mut s) = tx.slot(j) {
                s.write_at(0, &tmpl);
                s.set_len(len);
            }
        }
        tx.advance(k);
        let _ = tx.sync();
        done += n as usize;
    }
    p
}

/// Sends `ping` one frame at a time from `a` to `b`, which answers each
/// with `echo`: the round trips, each waited for in the ports' default
/// way (spinning a little, then sleeping), at most [`ROUND_TRIPS`] and
/// fewer if an answer takes more than ten seconds (a frame never comes back).
fn round_trips(a: Port, b: Port, ping: Vec<u8>, echo: Vec<u8>) -> (Vec<Duration>, Port, Port) {
    let t_pong = std::thread::spawn(move || pong(b, echo, ROUND_TRIPS));
    let mut a = a;
    let len = ping.len() as u16;
    let mut times = Vec::with_capacity(ROUND_TRIPS);
    for _ in 0..ROUND_TRIPS {
        let t = Instant::now();
        {
            let mut tx = a.tx(0);
            if tx.space() == 0 {
                break;
            }
            if let Some(mut s) = tx.slot(0) {
                s.write_at(0, &ping);
                s.set_len(len);
            }
            tx.advance(1);
            if tx.sync().is_err() {
                break;
            }
        }
        let mut rx = a.rx(0);
        if !matches!(rx.wait(Some(ANSWER_WAIT)), Ok(true)) {
            break;
        }
        times.push(t.elapsed());
        let n = rx.space();
        rx.advance(n);
        let _ = rx.sync();
    }
    let b = t_pong.join().expect("answering thread");
    (times, a, b)
}

/// The median and 99th percentile of `times`, in microseconds.
fn percentiles(times: &mut [Duration]) -> Option<(f64, f64)> {
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e6;
    Some((at(0.5), at(0.99)))
}

/// Times round trips between two fresh ports `ends` of the daemon at
/// `socket`, the first sending frames to `macs.0` from `macs.1`, the
/// second answering with the addresses swapped, and prints them.
fn show_round_trips(
    socket: &Path,
    path: &str,
    ends: [&str; 2],
    macs: ([u8; 6], [u8; 6]),
) -> Result<Option<(f64, f64)>, Box<dyn std::error::Error>> {
    let a = Port::open_at(socket, ends[0])?;
    let b = Port::open_at(socket, ends[1])?;
    let (mut times, a, b) = round_trips(a, b, frame(60, macs.0, macs.1), frame(60, macs.1, macs.0));
    drop((a, b));
    let r = percentiles(&mut times);
    match r {
        Some((p50, p99)) => println!(
            "  {path:<7} {} round trips of one frame: median {p50:.1} us, 99th percentile {p99:.1} us",
            times.len()
        ),
        None => println!("  {path:<7} no round trip completed"),
    }
    Ok(r)
}

struct Row {
    path: &'static str,
    sent: u64,
    received: u64,
    dropped: u64,
    mpps: f64,
    secs: f64,
    /// Round trip of one frame, median and 99th percentile (us).
    rtt: Option<(f64, f64)>,
}

fn run_path(
    path: &'static str,
    gen: Port,
    snk: Port,
    tmpl: Vec<u8>,
    seconds: u64,
) -> (Row, Port, Port) {
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let got = Arc::new(AtomicU64::new(0));
    let t_snk = {
        let (s, g) = (stop.clone(), got.clone());
        std::thread::spawn(move || sink(snk, s, g))
    };
    let t_gen = {
        let (s, c) = (stop.clone(), sent.clone());
        std::thread::spawn(move || generate(gen, tmpl, s, c))
    };
    let t0 = Instant::now();
    let mut last = (t0, 0u64);
    for _ in 0..seconds {
        std::thread::sleep(Duration::from_secs(1));
        let now = Instant::now();
        let g = got.load(Ordering::Relaxed);
        let dt = now.duration_since(last.0).as_secs_f64();
        println!(
            "  {path:<7} {:>5.1}s  {:>8.3} Mpps received  ({} packets so far)",
            now.duration_since(t0).as_secs_f64(),
            (g - last.1) as f64 / dt / 1e6,
            g
        );
        last = (now, g);
    }
    stop.store(true, Ordering::Relaxed);
    let secs = t0.elapsed().as_secs_f64();
    let gen = t_gen.join().expect("generator thread");
    let snk = t_snk.join().expect("sink thread");
    let (s, g) = (sent.load(Ordering::Relaxed), got.load(Ordering::Relaxed));
    (
        Row {
            path,
            sent: s,
            received: g,
            dropped: 0,
            mpps: g as f64 / secs / 1e6,
            secs,
            rtt: None,
        },
        gen,
        snk,
    )
}

pub fn run(socket: Option<PathBuf>, a: DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.len < 60 || a.len > 2048 {
        return Err(format!(
            "a frame length of {} is out of range: use 60 to 2048",
            a.len
        )
        .into());
    }
    let socket = socket.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ringswitch-demo-{}.sock", std::process::id()))
    });
    println!(
        "ringswitch demo: starting an embedded daemon on {}",
        socket.display()
    );
    let daemon = ringswitch_daemon::Daemon::start(ringswitch_daemon::Config::new(socket.clone()))?;
    let mut rows = Vec::new();

    if a.path != Paths::Switch {
        println!(
            "\npipe demo{{1 -> demo}}1 (zero copy, no daemon thread), {}-byte frames:",
            a.len
        );
        let gen = Port::open_at(&socket, "demo{1")?;
        let snk = Port::open_at(&socket, "demo}1")?;
        let (mut row, gen, snk) =
            run_path("pipe", gen, snk, frame(a.len, SINK_MAC, GEN_MAC), a.seconds);
        // What the sink had not read yet is still in its ring, not lost.
        row.dropped = 0;
        drop((gen, snk));
        row.rtt = show_round_trips(&socket, "pipe", ["demo{2", "demo}2"], (SINK_MAC, GEN_MAC))?;
        rows.push(row);
    }

    if a.path != Paths::Pipe {
        println!("\nswitch vale0: vale0:gen -> vale0:sink (copied by the switch worker), {}-byte frames:", a.len);
        let gen = Port::open_at(&socket, "vale0:gen")?;
        let mut snk = Port::open_at(&socket, "vale0:sink")?;
        // The sink announces its address so the switch learns where it is.
        {
            let mut tx = snk.tx(0);
            if let Some(mut s) = tx.slot(0) {
                s.write_at(0, &frame(60, [0xff; 6], SINK_MAC));
                s.set_len(60);
            }
            tx.advance(1);
            tx.sync()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        let (mut row, gen, snk) = run_path(
            "switch",
            gen,
            snk,
            frame(a.len, SINK_MAC, GEN_MAC),
            a.seconds,
        );
        // Take the switch's own counters, which add up exactly (sent =
        // received + dropped) once the worker has finished what was
        // queued: read until they do and stay so, for at most ten seconds
        // (a worker held off its CPU that long shows counts in flight).
        let mut c = Connection::connect(&socket)?;
        let mut read = || -> Result<(PortStats, PortStats), Box<dyn std::error::Error>> {
            let stats: Vec<PortStats> = c
                .call_as(&Request::Stats {
                    switch: Some("vale0".into()),
                })?
                .0;
            let get = |n: &str| {
                stats
                    .iter()
                    .find(|s| s.name == n)
                    .cloned()
                    .unwrap_or_default()
            };
            Ok((get("vale0:gen"), get("vale0:sink")))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last_sent = read()?.0.tx_packets;
        let (g, k) = loop {
            std::thread::sleep(Duration::from_millis(10));
            let (g, k) = read()?;
            let settled =
                g.tx_packets == last_sent && g.tx_packets == k.rx_packets + k.drop_rx_full;
            if settled || Instant::now() > deadline {
                break (g, k);
            }
            last_sent = g.tx_packets;
        };
        row.sent = g.tx_packets;
        row.received = k.rx_packets;
        row.dropped = k.drop_rx_full;
        row.mpps = row.received as f64 / row.secs / 1e6;
        drop((gen, snk));
        // Two new ports: the first ping floods to the other (the only one
        // left), which the switch learns from as it answers.
        row.rtt = show_round_trips(
            &socket,
            "switch",
            ["vale0:ping", "vale0:pong"],
            (PONG_MAC, PING_MAC),
        )?;
        rows.push(row);
    }

    println!("\nsummary ({}-byte frames)", a.len);
    println!(
        "{:<8} {:>12} {:>12} {:>10} {:>9} {:>8} {:>13} {:>13}",
        "path", "sent", "received", "dropped", "Mpps", "seconds", "RTT p50 (us)", "RTT p99 (us)"
    );
    for r in &rows {
        let (p50, p99) = match r.rtt {
            Some((a, b)) => (format!("{a:.1}"), format!("{b:.1}")),
            None => ("-".to_string(), "-".to_string()),
        };
        println!(
            "{:<8} {:>12} {:>12} {:>10} {:>9.3} {:>8.1} {:>13} {:>13}",
            r.path, r.sent, r.received, r.dropped, r.mpps, r.secs, p50, p99
        );
    }
    println!("\npipes never drop (a full receiver makes the sender wait); the switch drops and counts when a receiver is full.");
    println!("round trips: one 60-byte frame there and back, both ends waiting as ports do by default (a short spin, then sleep).");
    drop(daemon);
    Ok(())
}
