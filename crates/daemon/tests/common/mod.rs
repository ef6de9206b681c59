//! Helpers shared by the daemon's integration tests.
#![allow(dead_code)]

pub mod guest;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ringswitch_client::Port;
use ringswitch_daemon::{Config, Daemon};

pub fn socket(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rs-test-{}-{tag}.sock", std::process::id()))
}

pub fn daemon(tag: &str) -> Daemon {
    Daemon::start(Config::new(socket(tag))).expect("daemon starts")
}

pub fn daemon_with(tag: &str, f: impl FnOnce(&mut Config)) -> Daemon {
    let mut c = Config::new(socket(tag));
    f(&mut c);
    Daemon::start(c).expect("daemon starts")
}

pub fn mac(last: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, last]
}

pub fn frame(dst: [u8; 6], src: [u8; 6], len: usize, tag: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12] = 0x88;
    f[13] = 0xb5;
    f[14..18].copy_from_slice(&tag.to_be_bytes());
    f
}

/// Sends frames on TX ring 0, waiting for space; returns how many went.
pub fn send(p: &mut Port, frames: &[Vec<u8>]) -> usize {
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while sent < frames.len() && Instant::now() < deadline {
        let mut tx = p.tx(0);
        let n = tx.space().min((frames.len() - sent) as u32);
        if n == 0 {
            let _ = tx.wait(Some(Duration::from_millis(50)));
            continue;
        }
        for k in 0..n {
            let f = &frames[sent + k as usize];
            let mut s = tx.slot(k).unwrap();
            assert!(s.write_at(0, f));
            s.set_len(f.len() as u16);
        }
        tx.advance(n);
        tx.sync().unwrap();
        sent += n as usize;
    }
    sent
}

/// Receives what arrives on RX ring 0 within `wait` of the last frame.
pub fn recv(p: &mut Port, wait: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut rx = p.rx(0);
        if !rx.wait(Some(wait)).unwrap() {
            return out;
        }
        let n = rx.space();
        for k in 0..n {
            out.push(rx.slot(k).unwrap().payload().to_vec());
        }
        rx.advance(n);
        rx.sync().unwrap();
    }
}

/// Receives on RX ring 0 until `n` frames arrived, or [`DEADLINE`]
/// passed (the caller checks the count).
pub fn recv_n(p: &mut Port, n: usize) -> Vec<Vec<u8>> {
    recv_n_ring(p, 0, n, DEADLINE)
}

/// Receives on RX ring 0 until `n` frames arrived or `timeout` passed: a
/// short `timeout` checks that nothing (more) arrives.
pub fn recv_within(p: &mut Port, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    recv_n_ring(p, 0, n, timeout)
}

/// Receives on RX ring `ring` until `n` frames arrived or `timeout` passed.
pub fn recv_n_ring(p: &mut Port, ring: usize, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut rx = p.rx(ring);
        if !rx.wait(Some(left)).unwrap() {
            break;
        }
        let k = rx.space();
        for j in 0..k {
            out.push(rx.slot(j).unwrap().payload().to_vec());
        }
        rx.advance(k);
        rx.sync().unwrap();
    }
    out
}

pub fn tag_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[14], f[15], f[16], f[17]])
}

/// The bound of every wait for a condition: generous, so that a loaded
/// machine is never taken for a failure.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Waits until `cond` holds, looking every 10 ms; panics with `what` after
/// [`DEADLINE`] (a deadline for a condition, not a window to fit in).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
