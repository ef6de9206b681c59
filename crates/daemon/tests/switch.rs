//! The switch through the daemon and the client library, in one process.

mod common;

use std::time::Duration;

use common::*;
use ringswitch_client::Port;
use ringswitch_control::{Connection, PortStats, Request};
use ringswitch_ring::layout::{NS_MOREFRAG, NS_NO_LEARN};

fn stats(sock: &std::path::Path) -> Vec<PortStats> {
    let mut c = Connection::connect(sock).unwrap();
    c.call_as(&Request::Stats { switch: None }).unwrap().0
}

fn stat(all: &[PortStats], name: &str) -> PortStats {
    all.iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no stats for {name}"))
}

const SHORT: Duration = Duration::from_millis(200);

#[test]
fn learning_and_flooding_across_three_ports() {
    let d = daemon("learn");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale1:a").unwrap();
    let mut b = Port::open_at(&s, "vale1:b").unwrap();
    let mut c = Port::open_at(&s, "vale1:c").unwrap();

    // A to B's address: unknown, so flooded to b and c, never back to a.
    assert_eq!(send(&mut a, &[frame(mac(0xb), mac(0xa), 60, 1)]), 1);
    assert_eq!(recv(&mut b, SHORT).len(), 1);
    assert_eq!(recv(&mut c, SHORT).len(), 1);
    assert!(recv(&mut a, SHORT).is_empty(), "never back to the source");

    // B answers A: A was learned on port a, so only a gets it.
    send(&mut b, &[frame(mac(0xa), mac(0xb), 60, 2)]);
    let got = recv(&mut a, SHORT);
    assert_eq!(got.len(), 1);
    assert_eq!(tag_of(&got[0]), 2);
    assert!(
        recv(&mut c, SHORT).is_empty(),
        "unicast to a learned address is not flooded"
    );

    // Broadcast from c reaches a and b.
    send(&mut c, &[frame([0xff; 6], mac(0xc), 60, 3)]);
    assert_eq!(recv(&mut a, SHORT).len(), 1);
    assert_eq!(recv(&mut b, SHORT).len(), 1);

    // B's address moves to c.
    send(&mut c, &[frame([0xff; 6], mac(0xb), 60, 4)]);
    recv(&mut a, SHORT);
    recv(&mut b, SHORT);
    send(&mut a, &[frame(mac(0xb), mac(0xa), 60, 5)]);
    assert_eq!(recv(&mut c, SHORT).len(), 1, "B now lives on c");
    assert!(recv(&mut b, SHORT).is_empty());

    // The MAC table shows what was learned.
    let mut conn = Connection::connect(&s).unwrap();
    let macs: Vec<ringswitch_control::MacEntry> = conn
        .call_as(&Request::Macs {
            switch: "vale1".into(),
        })
        .unwrap()
        .0;
    let find = |m: &str| macs.iter().find(|e| e.mac == m).map(|e| e.port.clone());
    assert_eq!(find("02:00:00:00:00:0a").as_deref(), Some("vale1:a"));
    assert_eq!(find("02:00:00:00:00:0b").as_deref(), Some("vale1:c"));

    let st = stats(&s);
    assert_eq!(stat(&st, "vale1:a").tx_packets, 2);
    assert_eq!(stat(&st, "vale1:a").rx_packets, 3);
    assert_eq!(stat(&st, "vale1:b").rx_packets, 3);
    assert_eq!(stat(&st, "vale1:c").rx_packets, 2);
    assert_eq!(stat(&st, "vale1:c").tx_packets, 2);
}

#[test]
fn full_receiver_drops_and_counters_add_up() {
    let d = daemon("full");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale2:a").unwrap();
    let mut b = Port::open_at(&s, "vale2:b@conf:slots=256").unwrap();
    send(&mut b, &[frame([0xff; 6], mac(0xb), 60, 0)]);
    recv(&mut a, SHORT);
    let frames: Vec<_> = (0..3000)
        .map(|i| frame(mac(0xb), mac(0xa), 60, i))
        .collect();
    assert_eq!(send(&mut a, &frames), 3000);
    std::thread::sleep(SHORT);
    let got = recv(&mut b, SHORT);
    let st = stats(&s);
    let (sa, sb) = (stat(&st, "vale2:a"), stat(&st, "vale2:b"));
    assert_eq!(sa.tx_packets, 3000);
    assert_eq!(
        sb.rx_packets + sb.drop_rx_full,
        3000,
        "received + dropped = sent"
    );
    assert!(
        sb.drop_rx_full > 0,
        "a 256-slot ring cannot hold 3000 frames"
    );
    assert_eq!(got.len() as u64, sb.rx_packets);
    // What arrived is in order.
    let tags: Vec<u32> = got.iter().map(|f| tag_of(f)).collect();
    assert!(tags.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn multi_slot_packets_and_bad_frames() {
    let d = daemon("frags");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale3:a").unwrap();
    let mut b = Port::open_at(&s, "vale3:b").unwrap();
    // A 3000-byte frame in two slots.
    let big = frame([0xff; 6], mac(0xa), 3000, 77);
    {
        let mut tx = a.tx(0);
        let mut s0 = tx.slot(0).unwrap();
        assert!(s0.write_at(0, &big[..2048]));
        s0.set_len_flags(2048, NS_MOREFRAG);
        let mut s1 = tx.slot(1).unwrap();
        assert!(s1.write_at(0, &big[2048..]));
        s1.set_len(952);
        // A runt, a slot longer than its buffer, and a bad buffer index.
        let mut s2 = tx.slot(2).unwrap();
        s2.set_len(10);
        let mut s3 = tx.slot(3).unwrap();
        s3.set_len(4000);
        let mut s4 = tx.slot(4).unwrap();
        let raw = s4.raw();
        let _ = raw;
        s4.set_len(60);
        tx.advance(5);
        // Point slot 4 at a buffer outside the region, behind the API's back.
        let ring = tx.app().ring();
        ring.set_buf_idx(4, u32::MAX);
        tx.sync().unwrap();
    }
    std::thread::sleep(SHORT);
    let mut rx = b.rx(0);
    assert!(rx.wait(Some(SHORT)).unwrap());
    assert_eq!(rx.space(), 2, "the big frame arrives in two slots");
    let s0 = rx.slot(0).unwrap();
    assert_eq!(s0.flags() & NS_MOREFRAG, NS_MOREFRAG);
    assert_eq!((s0.flags() >> 8) & 0xff, 2, "fragment count");
    let mut whole = s0.payload().to_vec();
    let s1 = rx.slot(1).unwrap();
    assert_eq!(s1.flags() & NS_MOREFRAG, 0);
    whole.extend_from_slice(s1.payload());
    assert_eq!(whole, big);
    let st = stats(&s);
    let sa = stat(&st, "vale3:a");
    assert_eq!((sa.drop_short, sa.drop_long, sa.drop_malformed), (1, 1, 1));
    assert_eq!(sa.tx_packets, 1);
}

#[test]
fn no_learn_flag_is_honoured() {
    let d = daemon("nolearn");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale4:a").unwrap();
    let mut b = Port::open_at(&s, "vale4:b").unwrap();
    {
        let mut tx = a.tx(0);
        let mut sl = tx.slot(0).unwrap();
        sl.write_at(0, &frame([0xff; 6], mac(0xa), 60, 0));
        sl.set_len_flags(60, NS_NO_LEARN);
        tx.advance(1);
        tx.sync().unwrap();
    }
    assert_eq!(recv(&mut b, SHORT).len(), 1);
    let mut conn = Connection::connect(&s).unwrap();
    let macs: Vec<ringswitch_control::MacEntry> = conn
        .call_as(&Request::Macs {
            switch: "vale4".into(),
        })
        .unwrap()
        .0;
    assert!(macs.is_empty(), "nothing learned: {macs:?}");
}

#[test]
fn hostile_client_cannot_hurt_the_others() {
    let d = daemon_with("hostile", |c| c.workers = 2);
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale5:a").unwrap();
    // b's ring is large and b reads fast: whatever the vandal floods (its
    // garbage is traffic like any other) never fills it.
    let mut b = Port::open_at(&s, "vale5:b@conf:slots=4096").unwrap();
    let h = Port::open_at(&s, "vale5:h").unwrap();
    let mut c = Port::open_at(&s, "vale5:c").unwrap();
    // Let the switch learn b.
    send(&mut b, &[frame([0xff; 6], mac(0xb), 60, 0)]);
    recv(&mut a, SHORT);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let vandal = std::thread::spawn(move || {
        let mut h = h;
        let region = h.region().clone();
        let l = *region.layout();
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut rounds = 0u64;
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            // xorshift: random offsets in the ring and CSB area, random bytes.
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let off = l.nifp_ofs[0] + (x as usize % (l.buf_base - l.nifp_ofs[0]));
                region.scribble(off & !3, &(x as u32).to_le_bytes());
            }
            // Garbage straight into the CSB heads, where the daemon reads.
            region
                .csb(0, ringswitch_ring::Dir::Rx, 0)
                .head()
                .store(x as u32, std::sync::atomic::Ordering::Relaxed);
            // And make the daemon look: h claims TX work, and c floods a
            // broadcast that has to be delivered into h's RX ring.
            if rounds.is_multiple_of(2) {
                h.txsync(0);
            }
            send(&mut c, &[frame([0xff; 6], mac(0xc), 60, 0)]);
            rounds += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        (rounds, h, c)
    });

    const N: u32 = 200_000;
    let frames: Vec<_> = (0..N).map(|i| frame(mac(0xb), mac(0xa), 60, i)).collect();
    let sent_all = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sent = sent_all.clone();
    let sock = s.clone();
    let receiver = std::thread::spawn(move || {
        let mut tags = Vec::with_capacity(N as usize);
        // A hang guard only: the receiver stops once every frame from a is
        // here or counted as dropped at b, however long that takes.
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        let mut looked = std::time::Instant::now();
        while tags.len() < N as usize && std::time::Instant::now() < deadline {
            // Once a has sent everything, the counters say when the rest
            // was dropped at b. Looked at every 300 ms whether or not b
            // is receiving: the vandal's broadcasts keep coming, so b's
            // ring is never quiet for long.
            if sent.load(std::sync::atomic::Ordering::Acquire)
                && looked.elapsed() >= Duration::from_millis(300)
            {
                looked = std::time::Instant::now();
                let drops = stat(&stats(&sock), "vale5:b").drop_rx_full;
                if tags.len() as u64 + drops >= u64::from(N) {
                    break;
                }
            }
            let mut rx = b.rx(0);
            if !rx.wait(Some(Duration::from_millis(300))).unwrap() {
                continue;
            }
            let n = rx.space();
            for k in 0..n {
                let sl = rx.slot(k).unwrap();
                let p = sl.payload();
                if p.len() >= 18 && p[6..12] == mac(0xa) {
                    tags.push(tag_of(p));
                }
            }
            rx.advance(n);
            rx.sync().unwrap();
        }
        (tags, b)
    });
    // Pace the sender so b is never full: the test is about the vandal.
    for chunk in frames.chunks(256) {
        assert_eq!(send(&mut a, chunk), chunk.len());
        std::thread::sleep(Duration::from_micros(200));
    }
    sent_all.store(true, std::sync::atomic::Ordering::Release);
    let (tags, _b) = receiver.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (rounds, _h, _c) = vandal.join().unwrap();
    assert!(rounds > 10, "the vandal ran");
    let all = stats(&s);
    let sb = stat(&all, "vale5:b");
    // Nothing from a is lost or corrupted by the vandal: what b did not get
    // was dropped because b's ring was full (b and the vandal's floods share
    // the CPU), and was counted. On a quiet machine nothing is dropped.
    let missing = N as u64 - tags.len() as u64;
    assert!(
        missing <= sb.drop_rx_full,
        "{missing} frames from a lost without a counted drop: {sb:?}"
    );
    assert!(
        tags.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
    assert!(
        stat(&all, "vale5:h").ring_reinits > 0,
        "garbage was noticed and counted"
    );
    // The daemon still answers.
    assert!(Connection::connect(&s)
        .unwrap()
        .call(&Request::SwitchList)
        .is_ok());
}

#[test]
fn pipe_moves_every_frame_in_order() {
    let d = daemon("pipe");
    let s = d.socket().to_path_buf();
    let mut tx = Port::open_at(&s, "p{5@conf:slots=100").unwrap();
    let rx = Port::open_at(&s, "p}5").unwrap();
    assert_eq!(
        rx.geometry().rx_slots,
        100,
        "the peer sees the pipe's sizes"
    );
    const N: u32 = 300_000;
    let r = std::thread::spawn(move || {
        let mut rx = rx;
        let mut expect = 0u32;
        while expect < N {
            let mut ring = rx.rx(0);
            assert!(
                ring.wait(Some(Duration::from_secs(10))).unwrap(),
                "pipe stalled at {expect}"
            );
            let n = ring.space();
            for k in 0..n {
                let sl = ring.slot(k).unwrap();
                assert_eq!(tag_of(sl.payload()), expect);
                expect += 1;
            }
            ring.advance(n);
            ring.sync().unwrap();
        }
        expect
    });
    let mut i = 0u32;
    while i < N {
        let mut ring = tx.tx(0);
        let n = ring.space().min(N - i);
        if n == 0 {
            assert!(
                ring.wait(Some(Duration::from_secs(10))).unwrap(),
                "sender never got space"
            );
            continue;
        }
        for k in 0..n {
            let mut sl = ring.slot(k).unwrap();
            sl.write_at(0, &frame(mac(2), mac(1), 60, i + k));
            sl.set_len(60);
        }
        ring.advance(n);
        ring.sync().unwrap();
        i += n;
    }
    assert!(
        tx.flush(Some(Duration::from_secs(10))).unwrap(),
        "the last frames went out"
    );
    assert_eq!(r.join().unwrap(), N);
}

#[test]
fn split_ports_move_traffic_on_every_ring_from_separate_threads() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = daemon("split");
    let s = d.socket().to_path_buf();
    for (a, b) in [
        ("sp{1@conf:rings=2,slots=256", "sp}1"),
        ("vale6:a@conf:rings=2", "vale6:b@conf:rings=2"),
    ] {
        let tx = Port::open_at(&s, a).unwrap().split().unwrap();
        let rx = Port::open_at(&s, b).unwrap().split().unwrap();
        assert_eq!((tx.len(), rx.len()), (2, 2));
        const N: u32 = 50_000;
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let receivers: Vec<_> = rx
            .into_iter()
            .map(|mut p| {
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut got = 0u32;
                    while got < N {
                        let mut r = p.rx(0);
                        if r.wait(Some(Duration::from_millis(300))).unwrap() {
                            let n = r.space();
                            r.advance(n);
                            r.sync().unwrap();
                            got += n;
                        } else if done.load(Ordering::Acquire) {
                            break;
                        }
                    }
                    (got, p)
                })
            })
            .collect();
        let senders: Vec<_> = tx
            .into_iter()
            .enumerate()
            .map(|(i, mut p)| {
                std::thread::spawn(move || {
                    let f = frame([0xff; 6], mac(0x10 + i as u8), 60, i as u32);
                    let chunk: Vec<_> = (0..64).map(|_| f.clone()).collect();
                    let mut left = N as usize;
                    while left > 0 {
                        let k = left.min(64);
                        left -= send(&mut p, &chunk[..k]);
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    assert!(p.flush(Some(Duration::from_secs(5))).unwrap());
                    p
                })
            })
            .collect();
        let _senders: Vec<Port> = senders.into_iter().map(|t| t.join().unwrap()).collect();
        done.store(true, Ordering::Release);
        let res: Vec<(u32, Port)> = receivers.into_iter().map(|t| t.join().unwrap()).collect();
        let got: Vec<u32> = res.iter().map(|(g, _)| *g).collect();
        if a.contains('{') {
            assert_eq!(
                got,
                vec![N, N],
                "{a} -> {b}: a pipe delivers everything on every ring"
            );
        } else {
            // A busy machine can starve the receivers; the switch then drops,
            // and counts it.
            let st = stat(&stats(&s), "vale6:b");
            assert!(got.iter().all(|&g| g > 0), "both rings delivered: {got:?}");
            assert_eq!(got.iter().map(|&g| g as u64).sum::<u64>(), st.rx_packets);
            assert_eq!(st.rx_packets + st.drop_rx_full, 2 * N as u64, "{st:?}");
        }
    }
}

/// Two workers deliver into one port: each adds to its own counter set,
/// and `stats` sums them exactly; `workers` says what each forwarded.
#[test]
fn two_workers_counting_into_one_port_add_up_and_workers_say_what_they_did() {
    use ringswitch_control::{WorkerStats, BATCH_SIZE_BUCKETS};
    let d = daemon_with("workers", |c| c.workers = 2);
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale9:a").unwrap();
    let mut b = Port::open_at(&s, "vale9:b").unwrap();
    let mut c = Port::open_at(&s, "vale9:c").unwrap();
    // c's address is learned first, so a's and b's frames go to c alone.
    send(&mut c, &[frame([0xff; 6], mac(0xc), 60, 0)]);
    assert_eq!(recv_n(&mut a, 1).len(), 1);
    assert_eq!(recv_n(&mut b, 1).len(), 1);
    const N: usize = 3000;
    let from = |src: u8| -> Vec<Vec<u8>> {
        (0..N as u32)
            .map(|i| frame(mac(0xc), mac(src), 60 + (i as usize % 100), i))
            .collect()
    };
    let (fa, fb) = (from(0xa), from(0xb));
    let got = std::thread::scope(|t| {
        let ta = t.spawn(|| send(&mut a, &fa));
        let tb = t.spawn(|| send(&mut b, &fb));
        // Receive until every frame is either here or counted as dropped
        // at c's full ring.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut got = 0;
        loop {
            got += recv_within(&mut c, 2 * N - got, SHORT).len();
            let dropped = stat(&stats(&s), "vale9:c").drop_rx_full as usize;
            if got + dropped >= 2 * N || std::time::Instant::now() > deadline {
                break;
            }
        }
        assert_eq!(ta.join().unwrap(), N);
        assert_eq!(tb.join().unwrap(), N);
        got
    });
    let st = stats(&s);
    let (sa, sb, sc) = (
        stat(&st, "vale9:a"),
        stat(&st, "vale9:b"),
        stat(&st, "vale9:c"),
    );
    // Whatever c did not get, its full ring dropped and counted.
    assert_eq!(got as u64 + sc.drop_rx_full, 2 * N as u64);
    assert_eq!(sc.rx_packets, got as u64);
    assert_eq!(sa.tx_packets, N as u64);
    assert_eq!(sb.tx_packets, N as u64);
    let bytes: u64 = (0..N).map(|i| 60 + (i % 100) as u64).sum();
    assert_eq!(sa.tx_bytes, bytes);
    assert_eq!(sb.tx_bytes, bytes);
    assert!(sc.interrupts > 0, "c waited, so it was woken: {sc:?}");

    let mut conn = Connection::connect(&s).unwrap();
    let w: Vec<WorkerStats> = conn.call_as(&Request::Workers).unwrap().0;
    assert_eq!(w.len(), 2);
    assert_eq!(w.iter().map(|w| w.worker).collect::<Vec<_>>(), [0, 1]);
    // Every frame sent (and c's broadcast) went through a worker.
    let frames: u64 = w.iter().map(|w| w.packets).sum();
    assert_eq!(frames, 2 * N as u64 + 1);
    for w in &w {
        assert_eq!(w.batch_sizes.len(), BATCH_SIZE_BUCKETS);
        assert!(
            w.busy_ns <= w.uptime_ns && w.sleep_ns <= w.uptime_ns,
            "{w:?}"
        );
        if w.packets > 0 {
            assert!(w.batches > 0 && w.busy_ns > 0, "{w:?}");
            assert!(w.batch_sizes.iter().sum::<u64>() > 0, "{w:?}");
        }
    }
    // The sources are spread over both workers.
    assert_eq!(w.iter().map(|w| w.sources).sum::<u32>(), 3, "{w:?}");
}

/// Kicks are timed and their cost published both ways: a receiver that
/// slept and was woken finds what the worker's kick cost on its RX ring,
/// and a sender whose frame woke the sleeping worker published what its
/// kick cost on its TX ring, where the worker's adaptive wait reads it.
/// Each kick is made certain, not raced for: the frame goes only once the
/// worker has asked for a kick on a's TX ring (it sleeps) and b has asked
/// for one on its RX ring (it sleeps), both read from the CSB.
#[test]
fn kicks_both_ways_publish_what_they_cost() {
    use ringswitch_client::WaitMode;
    use ringswitch_ring::Dir;
    use std::sync::atomic::Ordering;
    let d = daemon("kickcost");
    let s = d.socket().to_path_buf();
    let mut a = Port::open_at(&s, "vale13:a").unwrap();
    let mut b = Port::open_at(&s, "vale13:b").unwrap();
    b.set_wait_mode(WaitMode::Blocking);
    let (region, end) = (b.region().clone(), b.info().end as usize);
    let sender = std::thread::spawn(move || {
        let (aregion, aend) = (a.region().clone(), a.info().end as usize);
        wait_until("the worker asleep on a's TX ring", || {
            aregion
                .csb(aend, Dir::Tx, 0)
                .kern_need_kick()
                .load(Ordering::Relaxed)
                != 0
        });
        wait_until("b asleep on its RX ring", || {
            region
                .csb(end, Dir::Rx, 0)
                .appl_need_kick()
                .load(Ordering::Relaxed)
                != 0
        });
        assert_eq!(send(&mut a, &[frame(mac(0xb), mac(0xa), 60, 1)]), 1);
        a
    });
    assert_eq!(recv_n(&mut b, 1).len(), 1);
    let mut a = sender.join().unwrap();
    assert_eq!(a.stats().kicks, 1, "a woke the sleeping worker");
    // The worker counts the interrupt and publishes its cost after the
    // write that woke b: b may be faster to look.
    wait_until(
        "b's interrupt counted and the worker's cost published",
        || {
            stat(&stats(&s), "vale13:b").interrupts == 1
                && b.app_ring(Dir::Rx, 0).peer_kick_cost() > Duration::ZERO
        },
    );
    let a_cost = a
        .app_ring(Dir::Tx, 0)
        .csb()
        .appl_kick_cost_ns()
        .load(Ordering::Relaxed);
    assert!(a_cost > 0, "a published what waking the worker cost it");
}
