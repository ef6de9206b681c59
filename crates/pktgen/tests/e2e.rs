//! pkt-gen against an in-process daemon over a real unix socket: pipes
//! (zero copy, buffers swapped under the sender) and a VALE switch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use ringswitch_daemon::{Config, Daemon};
use ringswitch_pktgen::{run, End, Mode, PktGenArgs, Report};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: PktGenArgs,
}

fn args(argv: &str) -> PktGenArgs {
    let words = std::iter::once("pkt-gen").chain(argv.split_whitespace());
    Cli::try_parse_from(words).expect("valid arguments").args
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

fn spawn(d: &Daemon, argv: &str) -> thread::JoinHandle<Report> {
    let a = args(argv);
    let sock = d.socket().to_path_buf();
    thread::spawn(move || run(&a, &sock).expect("pkt-gen runs"))
}

#[test]
fn txseq_to_rxseq_over_a_pipe_loses_nothing() {
    let d = daemon();
    let n = 200_000;
    let rx = spawn(
        &d,
        &format!("-i pipe}}1 -f rxseq -n {n} --duration 20 -T 0"),
    );
    thread::sleep(Duration::from_millis(100));
    let tx = run(
        &args(&format!("-i pipe{{1 -f txseq -n {n} --duration 20 -T 0")),
        d.socket(),
    )
    .unwrap();
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
}

#[test]
fn tx_random_ports_rate_limited() {
    let d = daemon();
    let rx = spawn(&d, "-i pipe}7 -f rx -n 2000 -T 200 --json");
    let t = Instant::now();
    let tx = run(
        &args("-i pipe{7 -f tx -n 2000 -R 4000 -z -Z -l 128 -T 0"),
        d.socket(),
    )
    .unwrap();
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
    let rx = run(&args("-i pipe}8 -f rx --duration 0.3 -T 0"), d.socket()).unwrap();
    assert_eq!((rx.packets, rx.end), (0, End::Duration));
}

#[test]
fn ping_pong_over_a_pipe() {
    let d = daemon();
    let pong = spawn(&d, "-i pipe}3 -f pong -n 500 --duration 20 -T 0");
    thread::sleep(Duration::from_millis(100));
    let p = run(
        &args("-i pipe{3 -f ping -n 500 --duration 20 -T 0 --json"),
        d.socket(),
    )
    .unwrap();
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
    let pong = spawn(&d, "-i pipe}4 -f pong -n 4096 -T 0 -b 64");
    thread::sleep(Duration::from_millis(100));
    let p = run(
        &args("-i pipe{4 -f ping -n 4096 -b 16 --busy --duration 20 -T 0"),
        d.socket(),
    )
    .unwrap();
    assert_eq!((p.sent, p.packets, p.lost), (Some(4096), 4096, Some(0)));
    let q = pong.join().unwrap();
    assert_eq!((q.packets, q.end), (4096, End::Count));
}

#[test]
fn busy_pong() {
    let d = daemon();
    let pong = spawn(&d, "-i pipe}10 -f pong --busy -n 1000 --duration 20 -T 0");
    thread::sleep(Duration::from_millis(100));
    let p = run(
        &args("-i pipe{10 -f ping -n 1000 --duration 20 -T 0"),
        d.socket(),
    )
    .unwrap();
    assert_eq!((p.sent, p.packets, p.lost), (Some(1000), 1000, Some(0)));
    let q = pong.join().unwrap();
    assert_eq!((q.packets, q.end), (1000, End::Count));
}

#[test]
fn sender_without_reader_stops_by_duration_and_reports_the_queue() {
    let d = daemon();
    let t = Instant::now();
    let tx = run(&args("-i pipe{5 -f tx --duration 0.3 -T 0"), d.socket()).unwrap();
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
    let rx = run(&args("-i pipe}6 -f rx --duration 0.3 -T 100"), d.socket()).unwrap();
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert_eq!((rx.packets, rx.end, rx.drops), (0, End::Duration, Some(0)));
}

#[test]
fn tx_through_a_vale_switch() {
    let d = daemon();
    // A deep ring and a modest rate: the receiver would have to be kept
    // off the CPU for 200 ms for the switch to drop.
    let rx = spawn(&d, "-i vale0:b@conf:slots=4096 -f rxseq -n 20000 -T 0");
    wait_open(&d, "vale0:b");
    let tx = run(
        &args("-i vale0:a -f txseq -n 20000 -R 20000 -T 0"),
        d.socket(),
    )
    .unwrap();
    assert_eq!(tx.packets, 20000);
    let rx = rx.join().unwrap();
    // Broadcast frames are flooded to b; at this rate none should drop.
    assert_eq!(rx.packets, 20000, "{rx:?}");
    assert_eq!(rx.gaps, Some(0));
}

#[test]
fn frame_too_long_for_the_port() {
    let d = daemon();
    let e = run(&args("-i pipe{9 -f tx -l 4000"), d.socket()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "frames of 4000 bytes do not fit the 2048-byte buffers of port pipe{9"
    );
}

#[test]
fn rx_polls_every_ring_of_a_multi_ring_port() {
    let d = daemon();
    for (id, rx_busy, tx_busy) in [(8, "", ""), (11, "--busy", ""), (12, "", "--busy")] {
        let rx = spawn(
            &d,
            &format!("-i pipe}}{id}@conf:rings=2,slots=256 -f rxseq -n 50000 --duration 20 -T 0 {rx_busy}"),
        );
        thread::sleep(Duration::from_millis(100));
        let tx = run(
            &args(&format!(
                "-i pipe{{{id} -f txseq -n 50000 --duration 20 -T 0 {tx_busy}"
            )),
            d.socket(),
        )
        .unwrap();
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
    let rx = spawn(
        &d,
        &format!("-i pipe}}20@conf:rings=2 -f rxseq -p 2 -n {n} --duration 30 -T 200 --json"),
    );
    thread::sleep(Duration::from_millis(100));
    let tx = run(
        &args(&format!(
            "-i pipe{{20 -f txseq -p 2 -n {n} --duration 30 -T 200 --json"
        )),
        d.socket(),
    )
    .unwrap();
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
    let rx = spawn(
        &d,
        &format!("-i pipe}}21@conf:rings=2,slots=256 -f rxseq -n {n} --duration 30 -T 0"),
    );
    thread::sleep(Duration::from_millis(100));
    let tx = run(
        &args(&format!(
            "-i pipe{{21 -f txseq -p 2 -n {n} -b 64 --duration 30 -T 0"
        )),
        d.socket(),
    )
    .unwrap();
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
    let rx = spawn(
        &d,
        &format!("-i pipe}}22@conf:rings=4,slots=256 -f rxseq -p 2 -n {n} --duration 30 -T 0"),
    );
    thread::sleep(Duration::from_millis(100));
    let tx = run(
        &args(&format!(
            "-i pipe{{22 -f txseq -p 4 -n {n} --duration 30 -T 0"
        )),
        d.socket(),
    )
    .unwrap();
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
    let e = run(
        &args("-i pipe{23@conf:rings=2 -f txseq -p 3 -T 0"),
        d.socket(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "-p 3 needs 3 TX rings, but port pipe{23@conf:rings=2 has 2 TX and 2 RX rings; \
         create it with enough rings, e.g. pipe{23@conf:rings=3"
    );
    let e = run(&args("-i vale0:t -f rx -p 2 -T 0"), d.socket()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("-p 2 needs 2 RX rings, but port vale0:t has 1 TX and 1 RX rings"),
        "{e}"
    );
    assert!(run(&args("-i pipe{24 -f ping -p 2"), d.socket())
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
    let tx = run(
        &args(&format!(
            "-i pipe{{25 -f txseq -n {n} -l 64 -s 10.0.0.255-10.0.1.1:65534-65535 -d 192.168.1.7:80-82 -T 0"
        )),
        d.socket(),
    )
    .unwrap();
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
