//! The floors this machine puts under ringswitch's round trips, measured
//! without ringswitch: what any design pays here before moving a packet.
//!
//!   cargo run --release -p ringswitch-ring --example machine_floors [ROUNDS]
//!
//! - cache line: one value bounced between a thread on CPU 0 and one on
//!   CPU 1, both spinning (the floor of a busy round trip between two cores);
//! - yield hand-off: two threads on one CPU taking turns with sched_yield,
//!   the cheapest way two spinning threads share a core (a busy round trip
//!   through the switch on 2 CPUs needs at least one such round: ping, the
//!   worker and pong are three spinners, so two of them share a CPU);
//! - eventfd wake-up: a thread blocked in read(2) on CPU 1 woken by a write
//!   from CPU 0, and back (the floor of a blocking round trip between two
//!   sleeping parties, as through a pipe; the switch adds its worker);
//! - the same two threads on one CPU;
//! - what the write that wakes a sleeper costs its writer, the sleeper on
//!   the other CPU (its CPU idle) or on the writer's: the waker pays the
//!   first in its own CPU time, a hypervisor's round trip where idle
//!   vCPUs halt (a switch worker pays it per kick of a sleeping receiver,
//!   which is why kicks are timed and published, see `PortRing::note_kick`);
//! - the scheduler's turn: two threads that never sleep (as DPDK lcores)
//!   pinned to one CPU, how long each runs before the other gets the CPU.
//!   A virtqueue between such a thread and one sharing its CPU moves at
//!   most one ring's worth of packets per turn.
//!
//! Prints one line per measurement: name, median ns, p99 ns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it and
    // cpu is below CPU_SETSIZE; sched_setaffinity(0) targets this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!(
                "cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(1);
        }
    }
}

fn yield_now() {
    // SAFETY: sched_yield takes no arguments.
    unsafe {
        libc::sched_yield();
    }
}

fn percentiles(mut v: Vec<u64>) -> (u64, u64) {
    v.sort_unstable();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

/// Round trips of a value between two threads on `cpus`, the peer waiting
/// with `wait` (spin or yield). Returns per-round-trip ns samples.
fn bounce(cpus: (usize, usize), rounds: u64, yielding: bool) -> Vec<u64> {
    let flag = Arc::new(AtomicU64::new(0));
    let f = flag.clone();
    let peer = std::thread::spawn(move || {
        pin(cpus.1);
        for i in 0..rounds {
            // Acquire/Release: pairs with the other side's store/load.
            while f.load(Ordering::Acquire) != 2 * i + 1 {
                if yielding {
                    yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            f.store(2 * i + 2, Ordering::Release);
        }
    });
    pin(cpus.0);
    let mut samples = Vec::with_capacity(rounds as usize);
    for i in 0..rounds {
        let t = Instant::now();
        flag.store(2 * i + 1, Ordering::Release);
        while flag.load(Ordering::Acquire) != 2 * i + 2 {
            if yielding {
                yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        samples.push(t.elapsed().as_nanos() as u64);
    }
    peer.join().unwrap();
    samples
}

struct Efd(i32);

impl Efd {
    fn new() -> Efd {
        // SAFETY: eventfd takes two integers and returns a new descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
        Efd(fd)
    }
    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        let n = unsafe { libc::write(self.0, (&one as *const u64).cast(), 8) };
        assert_eq!(n, 8);
    }
    fn wait(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our own eventfd
        // (blocking: it sleeps until signalled).
        let n = unsafe { libc::read(self.0, (&mut v as *mut u64).cast(), 8) };
        assert_eq!(n, 8);
    }
}

impl Drop for Efd {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns, once.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// A peer on `cpu` that, `rounds` times, sleeps in read(2) on `there` and
/// then signals `back`; the caller is pinned to `me` and the peer has
/// blocked once this returns.
fn echo_peer(
    me: usize,
    cpu: usize,
    rounds: u64,
) -> (Arc<Efd>, Arc<Efd>, std::thread::JoinHandle<()>) {
    let there = Arc::new(Efd::new());
    let back = Arc::new(Efd::new());
    let (t2, b2) = (there.clone(), back.clone());
    let peer = std::thread::spawn(move || {
        pin(cpu);
        for _ in 0..rounds {
            t2.wait();
            b2.signal();
        }
    });
    pin(me);
    // Let the peer block first.
    std::thread::sleep(std::time::Duration::from_millis(10));
    (there, back, peer)
}

/// Round trips of a wake-up through two eventfds, each side sleeping in
/// read(2) between turns.
fn wakeups(cpus: (usize, usize), rounds: u64) -> Vec<u64> {
    let (there, back, peer) = echo_peer(cpus.0, cpus.1, rounds);
    let mut samples = Vec::with_capacity(rounds as usize);
    for _ in 0..rounds {
        let t = Instant::now();
        there.signal();
        back.wait();
        samples.push(t.elapsed().as_nanos() as u64);
        // An idle gap, as between pings: the vCPUs go idle in between.
        let gap = Instant::now();
        while gap.elapsed().as_micros() < 20 {
            std::hint::spin_loop();
        }
    }
    peer.join().unwrap();
    samples
}

/// What the write that wakes a thread sleeping in read(2) on `cpus.1`
/// costs the writer on `cpus.0`: the part of a wake-up its waker pays in
/// its own CPU time (a switch worker kicking a receiver pays it per kick).
fn wake_writes(cpus: (usize, usize), rounds: u64) -> Vec<u64> {
    let (there, back, peer) = echo_peer(cpus.0, cpus.1, rounds);
    let mut samples = Vec::with_capacity(rounds as usize);
    for _ in 0..rounds {
        // The peer is asleep again (and its CPU idle) before the write.
        let gap = Instant::now();
        while gap.elapsed().as_micros() < 200 {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        there.signal();
        samples.push(t.elapsed().as_nanos() as u64);
        back.wait();
    }
    peer.join().unwrap();
    samples
}

/// Two threads that never sleep, both on `cpu`, for `secs`: the median
/// length of one's uninterrupted runs (a gap of over 20 us in its own
/// clock readings marks a turn of the other).
fn turns(cpu: usize, millis: u64) -> Vec<u64> {
    let spin = move || {
        pin(cpu);
        let start = Instant::now();
        let mut last = start;
        let mut run_start = start;
        let mut runs = Vec::new();
        while start.elapsed().as_millis() < u128::from(millis) {
            let now = Instant::now();
            if now.duration_since(last).as_micros() > 20 {
                runs.push(last.duration_since(run_start).as_nanos() as u64);
                run_start = now;
            }
            last = now;
        }
        runs
    };
    let other = std::thread::spawn(spin);
    let mut runs = spin();
    runs.extend(other.join().unwrap());
    if runs.is_empty() {
        runs.push(millis * 1_000_000);
    }
    runs
}

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ncpu < 2 {
        eprintln!("needs two CPUs, has {ncpu}");
        std::process::exit(1);
    }
    let show = |name: &str, v: Vec<u64>| {
        let (p50, p99) = percentiles(v);
        println!("{name}\t{p50}\t{p99}");
    };
    println!("measurement\tp50_ns\tp99_ns");
    show(
        "cache line round trip, CPU 0 <-> CPU 1, spinning",
        bounce((0, 1), rounds, false),
    );
    show(
        "yield hand-off round trip, two threads on CPU 0",
        bounce((0, 0), rounds / 4, true),
    );
    show(
        "eventfd wake-up round trip, CPU 0 <-> CPU 1, sleeping",
        wakeups((0, 1), rounds / 4),
    );
    show(
        "eventfd wake-up round trip, two threads on CPU 0",
        wakeups((0, 0), rounds / 4),
    );
    show(
        "eventfd write waking a sleeper, CPU 0 -> CPU 1: the writer's cost",
        wake_writes((0, 1), rounds / 20),
    );
    show(
        "eventfd write waking a sleeper on the writer's own CPU 0",
        wake_writes((0, 0), rounds / 20),
    );
    show(
        "scheduler turn of two never-sleeping threads on CPU 0",
        turns(0, 2000),
    );
}
