//! pkt-gen against an in-process daemon over a real unix socket: pipes
//! (zero copy, buffers swapped under the sender) and a VALE switch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ringswitch_daemon::{Config, Daemon};
use ringswitch_pktgen::latency::IntervalRtt;
use ringswitch_pktgen::meter::Interval;
use ringswitch_pktgen::print::Printer;
use ringswitch_pktgen::{End, Endpoint, Mode, PktGenError, Plan, Report, Reporter, Start};

/// netmap's defaults on `port` without interval lines (`-T 0`), in `mode`.
fn plan(port: &str, mode: Mode) -> Plan {
    Plan {
        mode,
        interval_ms: 0,
        ..Plan::new(port)
    }
}

fn ep(s: &str) -> Endpoint {
    s.parse().expect("a valid endpoint")
}

/// Runs `plan`, printing as `ringswitch pkt-gen` does (with `--json`
/// when `json`).
fn run(plan: &Plan, socket: &std::path::Path, json: bool) -> Result<Report, PktGenError> {
    ringswitch_pktgen::run(plan, socket, &mut Printer::new(json))
}

fn daemon() -> Daemon {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = PathBuf::from(format!(
        "/tmp/rs-pktgen-e2e-{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    Daemon::start(Config::new(path)).expect("daemon starts")
}

/// Waits (generously) until `name` is open on the daemon.
fn wait_open(d: &Daemon, name: &str) {
    let t0 = Instant::now();
    loop {
        let list = d.registry().lock().unwrap().port_list(None).unwrap();
        if list.iter().any(|p| p.name == name && p.open) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{name} never opened"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

fn spawn(d: &Daemon, plan: Plan, json: bool) -> thread::JoinHandle<Report> {
    let sock = d.socket().to_path_buf();
    thread::spawn(move || run(&plan, &sock, json).expect("pkt-gen runs"))
}

#[test]
fn txseq_to_rxseq_over_a_pipe_loses_nothing() {
    let d = daemon();
    let n = 200_000;
    let counted = |port, mode| Plan {
        count: n,
        duration_s: Some(20.0),
        ..plan(port, mode)
    };
    let rx = spawn(&d, counted("pipe}1", Mode::Rxseq), false);
    thread::sleep(Duration::from_millis(100));
    let tx = run(&counted("pipe{1", Mode::Txseq), d.socket(), false).unwrap();
    let rx = rx.join().unwrap();
    assert_eq!(tx.mode, Mode::Txseq);
    assert_eq!((tx.packets, tx.queued, tx.end), (n, Some(0), End::Count));
    assert_eq!(tx.bytes, n * 60);
    assert_eq!((rx.packets, rx.end), (n, End::Count));
    assert_eq!(
        (rx.gaps, rx.reordered, rx.drops, rx.malformed),
        (Some(0), Some(0), Some(0), Some(0))
    );
    assert!(rx.events > 0 && rx.avg_batch >= 1.0);
    // One thread each, waiting adaptively: how they waited is reported,
    // with the spin's cap (never above the wait's bound of 100 µs).
    for r in [&tx, &rx] {
        assert!(r.sleeps.is_some() && r.spins_won.is_some());
        let cap = r.spin_cap_us.expect("the spin's cap");
        assert!((0.0..=100.0).contains(&cap), "{cap}");
    }
}

#[test]
fn tx_random_ports_rate_limited() {
    let d = daemon();
    let rx = Plan {
        count: 2000,
        interval_ms: 200,
        ..plan("pipe}7", Mode::Rx)
    };
    let rx = spawn(&d, rx, true);
    let t = Instant::now();
    let tx = Plan {
        count: 2000,
        rate_pps: 4000,
        random_src_port: true,
        random_dst_port: true,
        frame_len: 128,
        ..plan("pipe{7", Mode::Tx)
    };
    let tx = run(&tx, d.socket(), false).unwrap();
    let took = t.elapsed();
    assert_eq!(tx.packets, 2000);
    // The rate limit can only make it slower than this, never faster
    // (a loaded machine makes it slower still, which is fine).
    assert!(
        took >= Duration::from_millis(400),
        "2000 packets at 4000 pps took {took:?}"
    );
    let rx = rx.join().unwrap();
    assert_eq!(
        (rx.packets, rx.bytes, rx.end),
        (2000, 2000 * 128, End::Count)
    );
}

#[test]
fn rx_ends_by_duration() {
    let d = daemon();
    let rx = Plan {
        duration_s: Some(0.3),
        ..plan("pipe}8", Mode::Rx)
    };
    let rx = run(&rx, d.socket(), false).unwrap();
    assert_eq!((rx.packets, rx.end), (0, End::Duration));
}

#[test]
fn ping_pong_over_a_pipe() {
    let d = daemon();
    let counted = |port, mode| Plan {
        count: 500,
        duration_s: Some(20.0),
        ..plan(port, mode)
    };
    let pong = spawn(&d, counted("pipe}3", Mode::Pong), false);
    thread::sleep(Duration::from_millis(100));
    let p = run(&counted("pipe{3", Mode::Ping), d.socket(), true).unwrap();
    let q = pong.join().unwrap();
    assert_eq!((p.sent, p.packets, p.lost), (Some(500), 500, Some(0)));
    assert_eq!(q.packets, 500);
    let (min, p50, p99, p999, max) = (
        p.rtt_ns_min.unwrap(),
        p.rtt_ns_p50.unwrap(),
        p.rtt_ns_p99.unwrap(),
        p.rtt_ns_p999.unwrap(),
        p.rtt_ns_max.unwrap(),
    );
    assert!(
        0 < min && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{p:?}"
    );
    let avg = p.rtt_ns_avg.unwrap();
    assert!(min <= avg && avg <= max);
}

// Busy-waiting tests spin one side only: the machine may have two cores
// and other tests running, and two spinners per test would starve them.
#[test]
fn busy_ping_with_bursts() {
    let d = daemon();
    let pong = Plan {
        count: 4096,
        burst: Some(64),
        ..plan("pipe}4", Mode::Pong)
    };
    let pong = spawn(&d, pong, false);
    thread::sleep(Duration::from_millis(100));
    let ping = Plan {
        count: 4096,
        burst: Some(16),
        busy: true,
        duration_s: Some(20.0),
        ..plan("pipe{4", Mode::Ping)
    };
    let p = run(&ping, d.socket(), false).unwrap();
    assert_eq!((p.sent, p.packets, p.lost), (Some(4096), 4096, Some(0)));
    let q = pong.join().unwrap();
    assert_eq!((q.packets, q.end), (4096, End::Count));
}

#[test]
fn busy_pong() {
    let d = daemon();
    let counted = |port, mode| Plan {
        count: 1000,
        duration_s: Some(20.0),
        ..plan(port, mode)
    };
    let pong = Plan {
        busy: true,
        ..counted("pipe}10", Mode::Pong)
    };
    let pong = spawn(&d, pong, false);
    thread::sleep(Duration::from_millis(100));
    let p = run(&counted("pipe{10", Mode::Ping), d.socket(), false).unwrap();
    assert_eq!((p.sent, p.packets, p.lost), (Some(1000), 1000, Some(0)));
    let q = pong.join().unwrap();
    assert_eq!((q.packets, q.end), (1000, End::Count));
}

#[test]
fn sender_without_reader_stops_by_duration_and_reports_the_queue() {
    let d = daemon();
    let t = Instant::now();
    let tx = Plan {
        duration_s: Some(0.3),
        ..plan("pipe{5", Mode::Tx)
    };
    let tx = run(&tx, d.socket(), false).unwrap();
    // It ends by itself (a hang would fail here); how long it took on
    // this machine is no part of the outcome.
    println!("a sender without a reader stopped after {:?}", t.elapsed());
    assert_eq!(tx.end, End::Duration);
    // The peer's RX ring filled up; what is left in our TX ring is queued.
    assert!(tx.packets > 0, "{tx:?}");
    assert!(tx.queued.unwrap() > 0, "{tx:?}");
}

#[test]
fn receiver_without_traffic_stops_by_duration() {
    let d = daemon();
    let t = Instant::now();
    let rx = Plan {
        duration_s: Some(0.3),
        interval_ms: 100,
        ..plan("pipe}6", Mode::Rx)
    };
    let rx = run(&rx, d.socket(), false).unwrap();
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert_eq!((rx.packets, rx.end, rx.drops), (0, End::Duration, Some(0)));
}

/// Remembers what a run told.
#[derive(Default)]
struct Recorder {
    starts: Vec<(Plan, u32)>,
    intervals: Vec<u64>,
    ends: Vec<(u64, End)>,
}

impl Reporter for Recorder {
    fn start(&mut self, start: &Start<'_>) {
        self.starts.push((start.plan.clone(), start.burst));
    }

    fn interval(&mut self, traffic: &Interval, rtt: Option<&IntervalRtt>) {
        assert!(rtt.is_none(), "only ping reports round trips");
        self.intervals.push(traffic.pkts);
    }

    fn end(&mut self, report: &Report) {
        self.ends.push((report.packets, report.end));
    }
}

#[test]
fn the_reporter_hears_the_start_every_interval_and_the_end() {
    let d = daemon();
    let rx = Plan {
        duration_s: Some(0.3),
        interval_ms: 100,
        ..plan("pipe}26", Mode::Rx)
    };
    let mut rec = Recorder::default();
    let r = ringswitch_pktgen::run(&rx, d.socket(), &mut rec).unwrap();
    assert_eq!(rec.starts.len(), 1);
    assert_eq!(rec.starts[0].0, rx);
    assert!((1..=512).contains(&rec.starts[0].1), "{:?}", rec.starts);
    // The duration is three intervals: the first is due before it ends,
    // however late the thread runs.
    assert!(!rec.intervals.is_empty());
    assert!(rec.intervals.iter().all(|&p| p == 0), "{:?}", rec.intervals);
    assert_eq!(rec.ends, [(0, End::Duration)]);
    assert_eq!((r.packets, r.end), (0, End::Duration));
}

#[test]
fn tx_through_a_vale_switch() {
    let d = daemon();
    // A deep ring and a modest rate: the receiver would have to be kept
    // off the CPU for 200 ms for the switch to drop.
    let rx = Plan {
        count: 20000,
        ..plan("vale0:b@conf:slots=4096", Mode::Rxseq)
    };
    let rx = spawn(&d, rx, false);
    wait_open(&d, "vale0:b");
    let tx = Plan {
        count: 20000,
        rate_pps: 20000,
        ..plan("vale0:a", Mode::Txseq)
    };
    let tx = run(&tx, d.socket(), false).unwrap();
    assert_eq!(tx.packets, 20000);
    let rx = rx.join().unwrap();
    // Broadcast frames are flooded to b; at this rate none should drop.
    assert_eq!(rx.packets, 20000, "{rx:?}");
    assert_eq!(rx.gaps, Some(0));
}

#[test]
fn frame_too_long_for_the_port() {
    let d = daemon();
    let tx = Plan {
        mode: Mode::Tx,
        frame_len: 4000,
        ..Plan::new("pipe{9")
    };
    let e = run(&tx, d.socket(), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "frames of 4000 bytes do not fit the 2048-byte buffers of port pipe{9"
    );
}

#[test]
fn rx_polls_every_ring_of_a_multi_ring_port() {
    let d = daemon();
    for (id, rx_busy, tx_busy) in [(8, false, false), (11, true, false), (12, false, true)] {
        let counted = |port: &str, mode, busy| Plan {
            count: 50000,
            duration_s: Some(20.0),
            busy,
            ..plan(port, mode)
        };
        let rx = counted(
            &format!("pipe}}{id}@conf:rings=2,slots=256"),
            Mode::Rxseq,
            rx_busy,
        );
        let rx = spawn(&d, rx, false);
        thread::sleep(Duration::from_millis(100));
        let tx = counted(&format!("pipe{{{id}"), Mode::Txseq, tx_busy);
        let tx = run(&tx, d.socket(), false).unwrap();
        assert_eq!(tx.packets, 50000);
        let rx = rx.join().unwrap();
        assert_eq!(
            (rx.packets, rx.gaps, rx.end),
            (50000, Some(0), End::Count),
            "pipe {id}"
        );
    }
}

#[test]
fn two_threads_txseq_to_rxseq_over_a_two_ring_pipe_lose_nothing() {
    let d = daemon();
    let n = 400_000;
    let threaded = |port, mode| Plan {
        threads: 2,
        count: n,
        duration_s: Some(30.0),
        interval_ms: 200,
        ..plan(port, mode)
    };
    let rx = spawn(&d, threaded("pipe}20@conf:rings=2", Mode::Rxseq), true);
    thread::sleep(Duration::from_millis(100));
    let tx = run(&threaded("pipe{20", Mode::Txseq), d.socket(), true).unwrap();
    let rx = rx.join().unwrap();
    assert_eq!(
        (tx.packets, tx.queued, tx.end, tx.threads),
        (n, Some(0), End::Count, 2)
    );
    assert_eq!(tx.bytes, n * 60);
    let per = tx.thread_packets.clone().unwrap();
    assert_eq!(per.len(), 2);
    assert_eq!(per.iter().sum::<u64>(), n);
    assert!(
        per.iter().all(|&p| p > 0),
        "both TX rings carried traffic: {per:?}"
    );
    assert_eq!((rx.packets, rx.end, rx.threads), (n, End::Count, 2));
    assert_eq!(
        (rx.gaps, rx.reordered, rx.drops, rx.malformed),
        (Some(0), Some(0), Some(0), Some(0)),
        "{rx:?}"
    );
    // Pipe ring i feeds peer ring i: each receiver got one sender's share.
    assert_eq!(rx.thread_packets, tx.thread_packets);
    assert!(rx.events > 0 && rx.seconds > 0.0 && rx.pps > 0.0);
}

#[test]
fn one_receiver_thread_tracks_the_streams_of_two_senders() {
    let d = daemon();
    let n = 100_000;
    // -p 1 reads both rings in turn: the two senders' frames interleave,
    // and only the thread index keeps the numbers apart.
    let counted = |port, mode| Plan {
        count: n,
        duration_s: Some(30.0),
        ..plan(port, mode)
    };
    let rx = spawn(
        &d,
        counted("pipe}21@conf:rings=2,slots=256", Mode::Rxseq),
        false,
    );
    thread::sleep(Duration::from_millis(100));
    let tx = Plan {
        threads: 2,
        burst: Some(64),
        ..counted("pipe{21", Mode::Txseq)
    };
    let tx = run(&tx, d.socket(), false).unwrap();
    let rx = rx.join().unwrap();
    assert_eq!(tx.packets, n);
    assert_eq!(
        (rx.packets, rx.gaps, rx.reordered, rx.malformed),
        (n, Some(0), Some(0), Some(0)),
        "{rx:?}"
    );
}

#[test]
fn fewer_receiver_threads_than_rings_read_every_ring() {
    let d = daemon();
    let n = 200_000;
    let threaded = |port, mode, threads| Plan {
        threads,
        count: n,
        duration_s: Some(30.0),
        ..plan(port, mode)
    };
    let rx = threaded("pipe}22@conf:rings=4,slots=256", Mode::Rxseq, 2);
    let rx = spawn(&d, rx, false);
    thread::sleep(Duration::from_millis(100));
    let tx = threaded("pipe{22", Mode::Txseq, 4);
    let tx = run(&tx, d.socket(), false).unwrap();
    let rx = rx.join().unwrap();
    assert_eq!((tx.packets, tx.threads), (n, 4));
    assert!(tx.thread_packets.unwrap().iter().all(|&p| p > 0));
    assert_eq!(
        (rx.packets, rx.gaps, rx.reordered, rx.end),
        (n, Some(0), Some(0), End::Count),
        "{rx:?}"
    );
    // Thread i reads rings i and i+2: two senders' worth each.
    assert!(rx.thread_packets.unwrap().iter().all(|&p| p > 0));
}

#[test]
fn threads_beyond_the_rings_are_refused() {
    let d = daemon();
    let tx = Plan {
        threads: 3,
        ..plan("pipe{23@conf:rings=2", Mode::Txseq)
    };
    let e = run(&tx, d.socket(), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "-p 3 needs 3 TX rings, but port pipe{23@conf:rings=2 has 2 TX and 2 RX rings; \
         create it with enough rings, e.g. pipe{23@conf:rings=3"
    );
    let rx = Plan {
        threads: 2,
        ..plan("vale0:t", Mode::Rx)
    };
    let e = run(&rx, d.socket(), false).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("-p 2 needs 2 RX rings, but port vale0:t has 1 TX and 1 RX rings"),
        "{e}"
    );
    let ping = Plan {
        mode: Mode::Ping,
        threads: 2,
        ..Plan::new("pipe{24")
    };
    assert!(run(&ping, d.socket(), false)
        .unwrap_err()
        .to_string()
        .contains("ping runs in one thread"));
}

#[test]
fn address_and_port_ranges_are_walked_with_valid_checksums() {
    use ringswitch_client::Port;
    use ringswitch_pktgen::frame::{ipv4_checksum_ok, read_seq, udp_checksum_ok};
    use std::net::Ipv4Addr;

    let d = daemon();
    let mut peer = Port::open_at(d.socket(), "pipe}25").unwrap();
    let n = 20u32;
    let tx = Plan {
        count: u64::from(n),
        frame_len: 64,
        src: ep("10.0.0.255-10.0.1.1:65534-65535"),
        dst: ep("192.168.1.7:80-82"),
        ..plan("pipe{25", Mode::Txseq)
    };
    let tx = run(&tx, d.socket(), false).unwrap();
    assert_eq!(tx.packets, u64::from(n));
    let mut frames = Vec::new();
    let mut rx = peer.rx(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while frames.len() < n as usize && Instant::now() < deadline {
        rx.wait(Some(Duration::from_millis(100))).unwrap();
        let k = rx.space();
        for i in 0..k {
            frames.push(rx.slot(i).unwrap().payload().to_vec());
        }
        rx.advance(k);
        rx.sync().unwrap();
    }
    assert_eq!(frames.len(), n as usize);
    let src_points = [
        ([10, 0, 0, 255], 65534),
        ([10, 0, 0, 255], 65535),
        ([10, 0, 1, 0], 65534),
        ([10, 0, 1, 0], 65535),
        ([10, 0, 1, 1], 65534),
        ([10, 0, 1, 1], 65535),
    ];
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(f.len(), 64);
        assert_eq!(read_seq(f), Some(k as u32));
        let (sip, sport) = src_points[k % src_points.len()];
        assert_eq!(
            Ipv4Addr::new(f[26], f[27], f[28], f[29]),
            Ipv4Addr::from(sip),
            "frame {k}"
        );
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), sport, "frame {k}");
        assert_eq!(&f[30..34], &[192, 168, 1, 7]);
        assert_eq!(
            u16::from_be_bytes([f[36], f[37]]),
            80 + (k % 3) as u16,
            "frame {k}"
        );
        assert!(ipv4_checksum_ok(f), "IPv4 checksum of frame {k}");
        assert!(udp_checksum_ok(f), "UDP checksum of frame {k}");
    }
}
