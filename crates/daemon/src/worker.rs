//! Switch workers: threads that run each assigned source port to completion
//! and sleep in epoll when there is nothing to do (sv3's design).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ringswitch_ring::EventFd;
use ringswitch_switch::{Scratch, Switch, SwitchPort};

/// epoll data for the worker's own control eventfd.
const CTL: u64 = u64::MAX;
/// Rounds of forwarding between two non-blocking looks for new kicks.
const ROUNDS_PER_POLL: u32 = 16;
/// Most events taken per epoll_wait.
const MAX_EVENTS: usize = 64;

struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 with a valid flag returns a new fd or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd owned by nobody else.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: data,
        };
        // SAFETY: epoll_ctl on our epoll fd with a valid event struct.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: the buffer holds `events.len()` entries for the kernel to fill.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                timeout_ms,
            )
        };
        n.max(0) as usize
    }
}

/// A source port assigned to a worker.
#[derive(Clone)]
pub struct Assigned {
    /// Unique id (epoll data).
    pub id: u64,
    /// Its switch.
    pub switch: Arc<Switch>,
    /// The port.
    pub port: Arc<SwitchPort>,
}

struct Shared {
    epoll: Epoll,
    ctl: EventFd,
    ports: Mutex<Vec<Assigned>>,
    generation: AtomicU64,
    stop: AtomicBool,
    busy_ns: AtomicU64,
    batches: AtomicU64,
    packets: AtomicU64,
    wakeups: AtomicU64,
}

/// Handle on a worker thread.
pub struct Worker {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Worker tuning.
#[derive(Clone, Copy, Debug)]
pub struct WorkerConfig {
    /// Keep spinning this long after the last work before sleeping.
    pub idle_poll: Duration,
    /// Pin the thread to this CPU.
    pub cpu: Option<usize>,
}

fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes within it for
    // cpu < CPU_SETSIZE (checked); sched_setaffinity(0) targets this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "CPU number too large",
            ));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Worker {
    /// Starts worker number `index`.
    pub fn start(index: usize, cfg: WorkerConfig) -> io::Result<Worker> {
        let shared = Arc::new(Shared {
            epoll: Epoll::new()?,
            ctl: EventFd::new()?,
            ports: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            busy_ns: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            packets: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
        });
        shared
            .epoll
            .ctl(libc::EPOLL_CTL_ADD, shared.ctl.as_raw_fd(), CTL)?;
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rs-worker{index}"))
            .stack_size(256 * 1024)
            .spawn(move || run(s, cfg))?;
        Ok(Worker {
            shared,
            thread: Some(thread),
        })
    }

    /// Gives the worker a source port to serve.
    pub fn assign(&self, a: Assigned) -> io::Result<()> {
        self.shared
            .epoll
            .ctl(libc::EPOLL_CTL_ADD, a.port.kick.as_raw_fd(), a.id)?;
        self.shared
            .ports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(a);
        self.poke();
        Ok(())
    }

    /// Takes a port away from the worker.
    pub fn unassign(&self, id: u64) {
        let mut ports = self
            .shared
            .ports
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(pos) = ports.iter().position(|a| a.id == id) {
            let a = ports.remove(pos);
            let _ = self
                .shared
                .epoll
                .ctl(libc::EPOLL_CTL_DEL, a.port.kick.as_raw_fd(), 0);
        }
        drop(ports);
        self.poke();
    }

    /// Ports served.
    pub fn load(&self) -> usize {
        self.shared
            .ports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Nanoseconds spent forwarding.
    pub fn busy_ns(&self) -> u64 {
        self.shared.busy_ns.load(Ordering::Relaxed)
    }

    /// (batches, packets, wake-ups from sleep) so far.
    pub fn activity(&self) -> (u64, u64, u64) {
        let s = &self.shared;
        (
            s.batches.load(Ordering::Relaxed),
            s.packets.load(Ordering::Relaxed),
            s.wakeups.load(Ordering::Relaxed),
        )
    }

    fn poke(&self) {
        self.shared.generation.fetch_add(1, Ordering::Release);
        self.shared.ctl.signal();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let (b, p, w) = self.activity();
        tracing::debug!(batches = b, packets = p, wakeups = w, "worker stopping");
        self.shared.stop.store(true, Ordering::Release);
        self.shared.ctl.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(s: Arc<Shared>, cfg: WorkerConfig) {
    if let Some(cpu) = cfg.cpu {
        match pin_to(cpu) {
            Ok(()) => tracing::info!(cpu, "worker pinned"),
            Err(e) => tracing::warn!(cpu, error = %e, "cannot pin the worker; it runs unpinned"),
        }
    }
    let mut scratch = Scratch::default();
    let mut local: Vec<Assigned> = Vec::new();
    let mut active: Vec<bool> = Vec::new();
    let mut n_active = 0usize;
    let mut seen_gen = u64::MAX;
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let mut rounds = 0u32;
    loop {
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        // Acquire: pairs with the Release increment in `poke`, so the port
        // list read below is the one that was published.
        let g = s.generation.load(Ordering::Acquire);
        if g != seen_gen {
            seen_gen = g;
            local.clear();
            local.extend(
                s.ports
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .cloned(),
            );
            // Look at every port once after a change: a new port may have
            // work queued before it was assigned.
            active.clear();
            active.resize(local.len(), true);
            n_active = local.len();
            for a in &local {
                a.port.set_awake();
            }
        }
        if n_active == 0 || rounds.is_multiple_of(ROUNDS_PER_POLL) {
            let timeout = if n_active == 0 { -1 } else { 0 };
            if n_active == 0 {
                s.wakeups.fetch_add(1, Ordering::Relaxed);
            }
            let n = s.epoll.wait(&mut events, timeout);
            for ev in &events[..n] {
                let id = ev.u64;
                if id == CTL {
                    s.ctl.drain();
                    continue;
                }
                if let Some(i) = local.iter().position(|a| a.id == id) {
                    local[i].port.kick.drain();
                    if !active[i] {
                        active[i] = true;
                        n_active += 1;
                        local[i].port.set_awake();
                    }
                }
            }
        }
        rounds = rounds.wrapping_add(1);
        if n_active == 0 {
            continue;
        }
        let t0 = Instant::now();
        let mut any = false;
        let (mut nb, mut np) = (0u64, 0u64);
        for i in 0..local.len() {
            if !active[i] {
                continue;
            }
            let a = &local[i];
            let mut did = false;
            for r in 0..a.port.tx_rings() {
                let res = a.switch.forward(&a.port, r, &mut scratch);
                if res.slots > 0 {
                    did = true;
                    nb += 1;
                    np += res.packets as u64;
                }
            }
            any |= did;
            if !did && a.port.prepare_sleep() {
                active[i] = false;
                n_active -= 1;
            }
        }
        if any {
            s.busy_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            s.batches.fetch_add(nb, Ordering::Relaxed);
            s.packets.fetch_add(np, Ordering::Relaxed);
        }
        if n_active == 0 && !cfg.idle_poll.is_zero() {
            // sv3's idle poll: spin a little before sleeping, cheaper than a
            // kick and a wake-up when traffic resumes quickly.
            let until = Instant::now() + cfg.idle_poll;
            let mut spinner = ringswitch_ring::Spinner::default();
            'spin: while Instant::now() < until {
                for (i, a) in local.iter().enumerate() {
                    if a.port.has_tx_work() {
                        a.port.set_awake();
                        active[i] = true;
                        n_active += 1;
                        break 'spin;
                    }
                }
                spinner.spin();
            }
        }
    }
}
