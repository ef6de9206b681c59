//! A ring port client that makes its interrupt doorbell blocking and full
//! (it shares the eventfd's open file description with the daemon, so it
//! can clear O_NONBLOCK after the daemon set it): the worker's interrupt
//! write is cut short, and every other port on the switch keeps
//! forwarding (issue 15, the "interrupt fds" of item 2's class).
//!
//! Every wait has a generous deadline and checks an outcome, not a speed.

mod common;

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use common::*;
use ringswitch_client::Port;

const T: Duration = Duration::from_secs(30);

/// Receives on RX ring 0 until `tag` arrives; false if not within T.
fn recv_tag(p: &mut Port, tag: u32) -> bool {
    let deadline = Instant::now() + T;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut rx = p.rx(0);
        if !rx.wait(Some(left)).unwrap() {
            return false;
        }
        let k = rx.space();
        let mut found = false;
        for j in 0..k {
            found |= tag_of(rx.slot(j).unwrap().payload()) == tag;
        }
        rx.advance(k);
        rx.sync().unwrap();
        if found {
            return true;
        }
    }
}

#[test]
fn interrupt_doorbell_made_blocking_and_full_does_not_stop_the_worker() {
    let d = daemon("doorbell-hostile");
    let s = d.socket().to_path_buf();
    let open = |n: &str| Port::open_at(&s, n).unwrap_or_else(|e| panic!("open {n}: {e}"));
    let mut a = open("vale0:a");
    let mut b = open("vale0:b");
    let mut h = open("vale0:h");

    // The hostile client: asks for interrupts, then makes its doorbell
    // blocking with the counter at its maximum.
    assert!(!h.prepare_wait(false, true));
    let fd = h.poll_fd().as_raw_fd();
    // SAFETY: fcntl and write on an open descriptor of this process; the
    // write reads a local u64.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK), 0);
        let v: u64 = 0xffff_ffff_ffff_fffe;
        assert_eq!(libc::write(fd, (&v as *const u64).cast(), 8), 8);
    }

    // Broadcasts reach h (whose interrupt write blocks) and b.
    let bcast = [0xff; 6];
    for t in 0..4u32 {
        assert_eq!(send(&mut a, &[frame(bcast, mac(0xa), 60, t)]), 1);
        assert!(recv_tag(&mut b, t), "broadcast {t} to b");
    }
    // Unicast between the others goes on.
    for t in 100..104u32 {
        assert_eq!(send(&mut b, &[frame(mac(0xa), mac(0xb), 60, t)]), 1);
        assert!(recv_tag(&mut a, t), "b to a {t}");
    }
    // A port on another switch, served by the same worker, too.
    let mut x = open("vale1:x");
    let mut y = open("vale1:y");
    assert_eq!(send(&mut x, &[frame(mac(0x2), mac(0x1), 60, 7)]), 1);
    assert!(recv_tag(&mut y, 7), "another switch");
    drop(h);
}
