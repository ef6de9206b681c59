//! Switch workers: threads that run each assigned source port to completion
//! and sleep in epoll when there is nothing to do (sv3's design).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ringswitch_control::{WorkerStats, BATCH_SIZE_BUCKETS};
use ringswitch_ring::poll::{self, Epoll};
use ringswitch_ring::EventFd;
use ringswitch_switch::{Backend, Scratch, Switch, SwitchPort};

/// epoll data for the worker's own control eventfd.
const CTL: u64 = u64::MAX;
/// Rounds of forwarding between two non-blocking looks for new kicks.
const ROUNDS_PER_POLL: u32 = 16;
/// Rounds between two looks at whether the flow cache's counts are due
/// to be added to the flows' (`COUNTS_MAX_AGE`) while busy (a multiple of
/// `ROUNDS_PER_POLL`; the cache also adds them itself every million
/// frames of flow-table traffic, and an idle worker after
/// `COUNTS_WAIT`).
const FLUSH_ROUNDS: u32 = 64 * ROUNDS_PER_POLL;
/// Most events taken per epoll_wait.
const MAX_EVENTS: usize = 64;

/// epoll data bit marking a queue's wake descriptor (the rest is the
/// source id): a guest's TX kick, a socket or a TAP.
const QUEUE_WAKE: u64 = 1 << 62;
/// Kick moderation for VM queues: after a batch of at least this many
/// frames, the worker asks the guest to kick only once `MODERATE_MORE + 1`
/// more are queued, and looks by itself after `MODERATE_WAIT` otherwise.
/// A guest streaming bursts then wakes the worker once per few hundred
/// frames instead of once per burst, which matters most when the worker
/// shares a CPU with the sender. Small batches (a ping, a TCP ACK) keep the
/// immediate kick.
const MODERATE_MIN: u64 = 32;
const MODERATE_MORE: u16 = 127;
const MODERATE_WAIT: Duration = Duration::from_micros(100);
/// Receive coalescing for interface queues (a socket's or a TAP's
/// readiness, which the kernel raises for every frame), as NIC interrupt
/// coalescing (rx-usecs) and NAPI's deferral do it: a queue whose frames
/// come often enough that a look after the coalescing interval
/// (`WorkerConfig::rx_coalesce`; by default 50 µs, about what waking a
/// sleeping worker costs here) would find at least `COALESCE_FRAMES` of
/// them (the rate measured over windows of `COALESCE_WINDOW`, so that the
/// frames of one clump do not pass for a rate) is muted in epoll
/// and looked at on the worker's timer instead, while the rate stays above
/// half that; `COALESCE_EMPTY_LOOKS` looks in a row that find none give it back to
/// epoll (the first would end it at every gap of uneven traffic), so an
/// idle port costs nothing again two intervals after its last frame.
///
/// A port at a moderate rate then costs one timer wake-up per interval
/// instead of a wake-up (or a spin) every few frames. A frame waits at
/// most the interval longer than with the worker asleep on the queue's
/// descriptor (either way it then waits for a wake-up, of the timer or of
/// the descriptor; 43-58 µs here for a halted vCPU). No frame is lost:
/// the kernel's ring holds them meanwhile, a full batch is followed at
/// once, and a descriptor watched again is level-triggered. Below the
/// rate where a look would find `COALESCE_FRAMES` frames nothing changes:
/// the descriptor wakes the worker as before. Bursts that leave every look of a
/// try empty back off trying for 1, 2, 4, ... `COALESCE_BACKOFF_MAX`
/// chances.
///
/// Why eight: a descriptor's wake-up already brings the frames that came
/// while the worker woke (a rate times 43-58 µs here), and a timer's
/// wake-up cost the worker about twice a descriptor's CPU time here (on
/// this VM; bench/xdp-wakeups.sh). Entering at two frames a look (40,000
/// frames a second at 50 µs) cost 35 % more CPU per frame at 100,000 a
/// second and saved 42 % at 300,000. Coalescing goes on down to half the
/// entry rate.
const COALESCE_FRAMES: u128 = 8;
const COALESCE_BACKOFF_MAX: u32 = 64;
const COALESCE_EMPTY_LOOKS: u8 = 2;
/// The window a queue's rate is measured over: the frames of the batches
/// taken in it over its length, at least this long.
const COALESCE_WINDOW: Duration = Duration::from_micros(250);
/// Timer slack of a worker that coalesces (the kernel's default, 50 µs,
/// would double a 50 µs interval).
const COALESCE_SLACK_NS: libc::c_ulong = 5_000;
/// How long an idle worker waits before it adds its flow cache's counts
/// to the flows' counters: flow statistics trail traffic that stopped by
/// about this much.
const COUNTS_WAIT: Duration = Duration::from_millis(10);
/// The longest a worker keeps flow counts before it adds them (a busy
/// one, or one that goes idle often but never for `COUNTS_WAIT`).
const COUNTS_MAX_AGE: Duration = Duration::from_millis(100);

/// What of a port a worker serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Every TX ring of a ring port (woken by its kick eventfd).
    Rings,
    /// One frame queue of a port of queues: a VM's queue pair (woken by the
    /// guest's TX kick) or an interface's queue (woken while its socket or
    /// TAP fd polls readable: level triggered, so the kernel does the
    /// double check and the fd is never read here).
    Queue(usize),
}

/// A source assigned to a worker.
#[derive(Clone)]
pub struct Assigned {
    /// Unique id (epoll data).
    pub id: u64,
    /// Its switch.
    pub switch: Arc<Switch>,
    /// The port.
    pub port: Arc<SwitchPort>,
    /// Which part of it.
    pub source: Source,
}

impl Assigned {
    /// The eventfd registered for the whole life of the assignment: a ring
    /// port's kick, or a queue's "reconfigured" doorbell (the queue's own
    /// wake descriptor can change, and is registered by `Local::sync_wake`).
    fn wake_fd(&self) -> Option<RawFd> {
        match (self.source, &self.port.backend) {
            (Source::Rings, Backend::Ring(r)) => Some(r.kick.as_raw_fd()),
            (Source::Queue(k), Backend::Queue(q)) => q.changed.get(k).map(|e| e.as_raw_fd()),
            _ => None,
        }
    }

    /// Whether the wake fd is an eventfd to drain: only a queue's
    /// doorbell, which is the daemon's own. A ring port's kick is shared
    /// with its client (who could make it blocking, or empty it between
    /// the wake-up and a read), so it is watched edge-triggered and never
    /// read.
    fn wake_is_doorbell(&self) -> bool {
        matches!(self.source, Source::Queue(_))
    }

    /// epoll events for the wake fd: edge-triggered for a ring port's kick
    /// (an eventfd wakes its waiters on every write, so each kick is an
    /// edge; see `wake_is_doorbell`), level-triggered for a doorbell.
    fn wake_events(&self) -> u32 {
        match self.source {
            Source::Rings => poll::READABLE_EDGE,
            Source::Queue(_) => poll::READABLE,
        }
    }

    /// The worker is awake for this source: no kicks wanted.
    fn set_awake(&self) {
        match (self.source, &self.port.backend) {
            (Source::Rings, Backend::Ring(r)) => r.set_awake(),
            (Source::Queue(k), Backend::Queue(q)) => q.queue(k).set_awake(),
            _ => {}
        }
    }

    /// Asks for kicks and double-checks; true when the worker may sleep.
    /// With `more` (a guest's queue), the kick is asked for only once that
    /// many more entries are queued.
    fn prepare_sleep(&self, more: u16) -> bool {
        match (self.source, &self.port.backend) {
            (Source::Rings, Backend::Ring(r)) => r.prepare_sleep(),
            (Source::Queue(k), Backend::Queue(q)) => q.queue(k).prepare_sleep(more),
            _ => true,
        }
    }

    /// Work queued (for the idle poll)?
    fn has_work(&self) -> bool {
        match (self.source, &self.port.backend) {
            (Source::Rings, Backend::Ring(r)) => r.has_tx_work(),
            (Source::Queue(k), Backend::Queue(q)) => q.queue(k).has_work(),
            _ => false,
        }
    }

    /// What the port's application says its kicks of this worker cost it
    /// (zero for a queue source; bounded by the worker's adaptive wait).
    fn app_kick_cost(&self) -> Duration {
        match (self.source, &self.port.backend) {
            (Source::Rings, Backend::Ring(r)) => r.app_kick_cost(),
            _ => Duration::ZERO,
        }
    }

    /// Forwards one batch from each ring (or the queue); returns (batches
    /// that moved something, packets).
    fn forward(&self, scratch: &mut Scratch) -> (u64, u64) {
        let (mut nb, mut np) = (0u64, 0u64);
        let mut one = |r: usize| {
            let res = self.switch.forward(&self.port, r, scratch);
            if res.slots > 0 {
                nb += 1;
                np += res.packets as u64;
            }
        };
        match self.source {
            Source::Rings => (0..self.port.sources()).for_each(&mut one),
            Source::Queue(k) => one(k),
        }
        (nb, np)
    }
}

/// A worker's own view of one assigned source.
struct Local {
    a: Assigned,
    active: bool,
    /// Packets of its last non-empty batch.
    recent: u64,
    /// Inactive until then at the latest, without a kick or a wake-up: a
    /// guest's queue asleep with a moderated kick (MODERATE_WAIT), an
    /// interface queue coalescing (see `Coalesce`).
    deferred: Option<Instant>,
    /// Queues: a duplicate of the queue's wake descriptor (a guest's TX
    /// kick eventfd, a socket, a TAP), registered in epoll, and the wake
    /// generation it was taken at.
    kick: Option<OwnedFd>,
    generation: u64,
    /// Whether that descriptor is a guest's kick (shared with the guest):
    /// only those are moderated.
    moderated: bool,
    /// Had nothing in this round and is not asked for kicks yet (the
    /// worker spins first, see `run`).
    idle: bool,
    /// Receive coalescing (interface queues).
    rx: Coalesce,
}

/// One interface queue's receive coalescing (see `COALESCE_FRAMES`): the
/// decisions alone; the worker mutes and watches the descriptor as told.
#[derive(Debug, Default)]
struct Coalesce {
    /// Coalescing: the queue's wake descriptor is muted in epoll (errors
    /// and hang-ups only), and the queue is looked at when its `deferred`
    /// passes. True exactly while muted.
    on: bool,
    /// Coalescing, and no look found frames yet.
    fresh: bool,
    /// Looks in a row that found nothing, while coalescing.
    empty_looks: u8,
    /// When the current rate window began, and the frames taken since.
    window_start: Option<Instant>,
    window_frames: u64,
    /// The time per frame over the last whole window (ns; 0: none yet).
    per_frame_ns: u64,
    /// Chances to coalesce still to let pass, and how many the next
    /// fruitless try lets pass.
    skip: u32,
    backoff: u32,
}

impl Coalesce {
    /// After a batch of `frames` (of at most `full`) taken at `now`:
    /// whether to look again only after `wait`, for the frames that come
    /// meanwhile to be taken together.
    fn after_batch(&mut self, frames: u64, full: u64, now: Instant, wait: Duration) -> bool {
        match self.window_start {
            Some(t) if now.saturating_duration_since(t) >= COALESCE_WINDOW => {
                // The window is over: its frames, this batch's included,
                // over its length (an idle spell makes a slow window).
                let len = u64::try_from((now - t).as_nanos()).unwrap_or(u64::MAX);
                let n = self.window_frames.saturating_add(frames);
                self.per_frame_ns = (len / n.max(1)).max(1);
                self.window_start = Some(now);
                self.window_frames = 0;
            }
            Some(_) => self.window_frames = self.window_frames.saturating_add(frames),
            None => self.window_start = Some(now),
        }
        if frames >= full {
            // More may wait already: look again at once.
            return false;
        }
        if self.on {
            // A look on the timer found frames: coalescing goes on while
            // the rate stays above half the one it started at.
            self.fresh = false;
            self.empty_looks = 0;
            self.backoff = 0;
            return wait.as_nanos() * 2 >= COALESCE_FRAMES * u128::from(self.per_frame_ns);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        // A look after `wait` would find `wait / per_frame_ns` frames.
        self.per_frame_ns > 0 && wait.as_nanos() >= COALESCE_FRAMES * u128::from(self.per_frame_ns)
    }

    /// A look on the timer found nothing: whether coalescing goes on
    /// (fewer than `COALESCE_EMPTY_LOOKS` such looks in a row). When it
    /// ends, a try whose looks never found frames backs off.
    fn after_empty_look(&mut self) -> bool {
        self.empty_looks += 1;
        if self.empty_looks < COALESCE_EMPTY_LOOKS {
            return true;
        }
        if self.fresh {
            self.backoff = (self.backoff * 2).clamp(1, COALESCE_BACKOFF_MAX);
            self.skip = self.backoff;
        }
        false
    }

    /// The descriptor was muted (`true`) or is watched again.
    fn set_on(&mut self, on: bool) {
        self.on = on;
        self.fresh = on;
        self.empty_looks = 0;
    }
}

impl Local {
    /// Asks the source for a kick and goes inactive unless work came
    /// meanwhile; a guest's queue that was busy asks only once `MODERATE_MORE`
    /// more entries are queued (and is looked at again after
    /// `MODERATE_WAIT`). Returns whether it went inactive.
    fn arm(&mut self) -> bool {
        self.idle = false;
        // Only guests' kicks are moderated: an interface queue's readiness
        // is the kernel's.
        let more = if self.recent >= MODERATE_MIN && self.moderated {
            MODERATE_MORE
        } else {
            0
        };
        if self.a.prepare_sleep(more) {
            self.active = false;
            self.deferred = (more > 0).then(|| Instant::now() + MODERATE_WAIT);
            true
        } else {
            false
        }
    }

    /// Registers the queue's current wake descriptor if it changed (a
    /// guest's frontend set a new kick). Returns true when it changed (the
    /// queue deserves a look).
    fn sync_kick(&mut self, epoll: &Epoll) -> bool {
        let (Source::Queue(k), Backend::Queue(qp)) = (self.a.source, &self.a.port.backend) else {
            return false;
        };
        let q = qp.queue(k);
        let fd = q.wake_fd();
        if q.wake_generation() == self.generation && self.kick.is_some() == fd.is_some() {
            return false;
        }
        self.generation = q.wake_generation();
        self.moderated = q.wake_is_shared();
        if let Some(old) = self.kick.take() {
            let _ = epoll.delete(old.as_raw_fd());
        }
        // The new descriptor is watched: no longer muted.
        self.rx.set_on(false);
        if let Some(fd) = fd {
            // SAFETY: the queue owns `fd` and only replaces or closes it
            // under its lock, which is held here: it is open for the
            // borrow's duration.
            let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
            match borrowed.try_clone_to_owned() {
                Ok(dup) => {
                    // A guest's kick: edge-triggered, and never read: an
                    // eventfd wakes its waiters on every write, so each
                    // kick is an edge; and the frontend shares the
                    // descriptor, so it could make it blocking again or
                    // empty it between our wake-up and a read. A socket's
                    // or TAP's readiness: level-triggered, never read
                    // either (the queue takes its frames).
                    let events = if self.moderated {
                        poll::READABLE_EDGE
                    } else {
                        poll::READABLE
                    };
                    if let Err(e) = epoll.add(dup.as_raw_fd(), self.a.id | QUEUE_WAKE, events) {
                        tracing::warn!(port = %self.a.port.name, error = %e, "cannot watch the queue's wake descriptor");
                    } else {
                        self.kick = Some(dup);
                    }
                }
                Err(e) => {
                    tracing::warn!(port = %self.a.port.name, error = %e, "cannot duplicate the queue's wake descriptor")
                }
            }
        }
        true
    }

    fn forget(&mut self, epoll: &Epoll) {
        if let Some(old) = self.kick.take() {
            let _ = epoll.delete(old.as_raw_fd());
        }
        self.rx.set_on(false);
    }

    /// Whether its wake-ups may be coalesced: an interface queue, whose
    /// registered descriptor is its own (a socket, a TAP), not a guest's
    /// kick (moderated otherwise, see `arm`) or a ring port's.
    fn coalescible(&self) -> bool {
        self.kick.is_some() && !self.moderated
    }

    /// Mutes (`true`) or watches again its wake descriptor in epoll.
    fn mute(&mut self, epoll: &Epoll, mute: bool) {
        if self.rx.on == mute {
            return;
        }
        let Some(fd) = self.kick.as_ref().map(|k| k.as_raw_fd()) else {
            return;
        };
        let events = if mute { 0 } else { poll::READABLE };
        match epoll.modify(fd, self.a.id | QUEUE_WAKE, events) {
            Ok(()) => self.rx.set_on(mute),
            // Still watched (muting failed) or still muted (watching
            // failed, the descriptor gone: `sync_kick` registers its
            // successor): either way the state says what epoll has.
            Err(e) => {
                tracing::debug!(port = %self.a.port.name, error = %e, "cannot change the queue's wake-up watch")
            }
        }
    }

    /// A look on the timer found nothing: whether coalescing goes on.
    /// When it ends, the descriptor is watched again (level-triggered:
    /// frames that came since wake the worker at once).
    fn empty_look(&mut self, epoll: &Epoll) -> bool {
        if self.rx.after_empty_look() {
            return true;
        }
        self.mute(epoll, false);
        false
    }
}

fn drain_fd(fd: RawFd) {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a local buffer from an eventfd the
    // caller holds open; only called when epoll reported it readable, and
    // only on the daemon's own non-blocking doorbells (never a peer's).
    let _ = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
}

/// A worker's own counters: written by its thread alone, on cache lines of
/// their own, read by anyone without a lock or a message.
#[derive(Default)]
#[repr(align(128))]
struct Activity {
    busy_ns: AtomicU64,
    busy_cycles: AtomicU64,
    sleep_ns: AtomicU64,
    batches: AtomicU64,
    packets: AtomicU64,
    wakeups: AtomicU64,
    batch_sizes: [AtomicU64; BATCH_SIZE_BUCKETS],
    /// The thread's id, for its CPU time in /proc (0 until it runs).
    tid: AtomicU64,
    /// When the sleep going on began, in nanoseconds since the worker
    /// started plus one (0: awake), so that a reader counts a long sleep
    /// before it ends.
    asleep_since: AtomicU64,
}

impl Activity {
    /// Adds `v` to `c`, a counter only this worker's thread writes: a plain
    /// load and store, no locked instruction. Relaxed: statistics, read
    /// without ordering requirements.
    #[inline(always)]
    fn bump(c: &AtomicU64, v: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
    }

    /// Counts one batch of `frames` frames in the histogram.
    #[inline(always)]
    fn batch_size(&self, frames: u64) {
        let b = (frames.max(1).ilog2() as usize).min(BATCH_SIZE_BUCKETS - 1);
        Self::bump(&self.batch_sizes[b], 1);
    }
}

/// The time-stamp counter, for cycles per frame.
#[inline(always)]
fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc reads a register; x86_64 always has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

struct Shared {
    epoll: Epoll,
    ctl: EventFd,
    ports: Mutex<Vec<Assigned>>,
    generation: AtomicU64,
    stop: AtomicBool,
    started: Instant,
    activity: Activity,
}

/// Handle on a worker thread.
pub struct Worker {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Worker tuning.
#[derive(Clone, Copy, Debug)]
pub struct WorkerConfig {
    /// Keep spinning this long after the last work before sleeping (zero:
    /// sleep at once; None: a window that adapts to what spinning pays).
    pub idle_poll: Option<Duration>,
    /// Pin the thread to this CPU.
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority, if any.
    pub rt_priority: Option<u8>,
    /// The receive coalescing interval of interface queues (see
    /// `COALESCE_FRAMES`). Zero: off, every frame wakes the worker.
    pub rx_coalesce: Duration,
}

/// Makes this thread's timers fire within `ns` of when they are due.
fn set_timer_slack(ns: libc::c_ulong) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes a value and changes only this
    // thread's timer slack.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_fifo(priority: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: libc::c_int::from(priority),
    };
    // SAFETY: sched_setscheduler(0) targets this thread; `param` is valid
    // for the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
        // Workers write their clients' interrupt doorbells, which the
        // clients share and could make blocking: such writes are cut short.
        ringswitch_ring::eventfd::watch_blocked_writes();
        let shared = Arc::new(Shared {
            epoll: Epoll::new()?,
            ctl: EventFd::new()?,
            ports: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            started: Instant::now(),
            activity: Activity::default(),
        });
        shared
            .epoll
            .add(shared.ctl.as_raw_fd(), CTL, poll::READABLE)?;
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rs-worker{index}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                ringswitch_switch::count_as_worker(index);
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                // Relaxed: read by `stats` for a /proc path; a reader that
                // sees 0 reports no CPU time.
                s.activity.tid.store(tid as u64, Ordering::Relaxed);
                run(s, cfg)
            })?;
        Ok(Worker {
            shared,
            thread: Some(thread),
        })
    }

    /// Gives the worker a source to serve.
    pub fn assign(&self, a: Assigned) -> io::Result<()> {
        let fd = a.wake_fd().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "source does not match the port",
            )
        })?;
        self.shared.epoll.add(fd, a.id, a.wake_events())?;
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
            if let Some(fd) = a.wake_fd() {
                let _ = self.shared.epoll.delete(fd);
            }
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
        self.shared.activity.busy_ns.load(Ordering::Relaxed)
    }

    /// (batches, packets, wake-ups from sleep) so far.
    pub fn activity(&self) -> (u64, u64, u64) {
        let a = &self.shared.activity;
        (
            a.batches.load(Ordering::Relaxed),
            a.packets.load(Ordering::Relaxed),
            a.wakeups.load(Ordering::Relaxed),
        )
    }

    /// The worker's counters, as worker number `index`. Reads only what
    /// the worker publishes (and the kernel's count of its CPU time): no
    /// lock the worker takes while forwarding, no message to it.
    pub fn stats(&self, index: u32) -> WorkerStats {
        let a = &self.shared.activity;
        // Relaxed throughout: statistics (see Activity::bump).
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        // The sleeps that ended, then the one going on (if any): read in
        // this order, a sleep that ends in between is missed for now, never
        // counted twice, so the total never goes back.
        let slept = g(&a.sleep_ns);
        let since = g(&a.asleep_since);
        let uptime = u64::try_from(self.shared.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let sleeping = match since {
            0 => 0,
            s => uptime.saturating_sub(s - 1),
        };
        WorkerStats {
            worker: index,
            sources: u32::try_from(self.load()).unwrap_or(u32::MAX),
            uptime_ns: uptime,
            busy_ns: g(&a.busy_ns),
            sleep_ns: slept.saturating_add(sleeping),
            cpu_ns: thread_cpu_ns(g(&a.tid)),
            wakeups: g(&a.wakeups),
            batches: g(&a.batches),
            packets: g(&a.packets),
            busy_cycles: g(&a.busy_cycles),
            batch_sizes: a.batch_sizes.iter().map(g).collect(),
        }
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

/// Nanoseconds thread `tid` of this process ran on a CPU: the first field
/// of its schedstat (0 when unknown).
fn thread_cpu_ns(tid: u64) -> u64 {
    if tid == 0 {
        return 0;
    }
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn run(s: Arc<Shared>, cfg: WorkerConfig) {
    if let Some(cpu) = cfg.cpu {
        match pin_to(cpu) {
            Ok(()) => tracing::info!(cpu, "worker pinned"),
            Err(e) => tracing::warn!(cpu, error = %e, "cannot pin the worker; it runs unpinned"),
        }
    }
    if let Some(p) = cfg.rt_priority {
        match set_fifo(p) {
            Ok(()) => tracing::info!(priority = p, "worker runs under SCHED_FIFO"),
            Err(e) => {
                tracing::warn!(priority = p, error = %e, "cannot use SCHED_FIFO (needs CAP_SYS_NICE); the worker runs at normal priority")
            }
        }
    }
    if !cfg.rx_coalesce.is_zero() {
        if let Err(e) = set_timer_slack(COALESCE_SLACK_NS) {
            tracing::debug!(error = %e, "cannot narrow the worker's timer slack");
        }
    }
    let mut scratch = Scratch::default();
    let mut local: Vec<Local> = Vec::new();
    let mut n_active = 0usize;
    let mut seen_gen = u64::MAX;
    let mut events = [poll::NO_EVENT; MAX_EVENTS];
    let mut rounds = 0u32;
    let mut last_flush = Instant::now();
    // The idle spin's window, learnt from this worker's sleeps (unless a
    // fixed `idle_poll` was asked for).
    let mut adapt = ringswitch_ring::AdaptiveWait::new();
    // The last round's spin ended on work (see `spin_first`).
    let mut spun_to_work = false;
    loop {
        if s.stop.load(Ordering::Acquire) {
            for l in &mut local {
                l.forget(&s.epoll);
            }
            return;
        }
        // Acquire: pairs with the Release increment in `poke`, so the port
        // list read below is the one that was published.
        let g = s.generation.load(Ordering::Acquire);
        if g != seen_gen {
            seen_gen = g;
            let assigned: Vec<Assigned> = s
                .ports
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            // Exactly as long as the list: a worker of many ports keeps
            // no doubling's slack per port.
            let mut old = std::mem::replace(&mut local, Vec::with_capacity(assigned.len()));
            for l in old.iter_mut() {
                if !assigned.iter().any(|a| a.id == l.a.id) {
                    l.forget(&s.epoll);
                }
            }
            for a in assigned {
                let prev = old.iter_mut().find(|l| l.a.id == a.id);
                // A muted descriptor stays muted: the queue, looked at
                // below, keeps coalescing or ends it.
                let (kick, generation, moderated, rx) = match prev {
                    Some(p) => (
                        p.kick.take(),
                        p.generation,
                        p.moderated,
                        std::mem::take(&mut p.rx),
                    ),
                    None => (None, u64::MAX, false, Coalesce::default()),
                };
                local.push(Local {
                    a,
                    active: true,
                    recent: 0,
                    deferred: None,
                    kick,
                    generation,
                    moderated,
                    idle: false,
                    rx,
                });
            }
            // Look at every source once after a change: a new one may have
            // work queued before it was assigned.
            n_active = local.len();
            for l in local.iter_mut() {
                l.sync_kick(&s.epoll);
                l.a.set_awake();
            }
        }
        if n_active == 0 || rounds.is_multiple_of(ROUNDS_PER_POLL) {
            // The next look due at a deferred source, if any.
            let next_look = local.iter().filter_map(|l| l.deferred).min();
            let any_deferred = next_look.is_some();
            if n_active == 0 {
                Activity::bump(&s.activity.wakeups, 1);
            }
            if (n_active == 0 || rounds.is_multiple_of(FLUSH_ROUNDS))
                && last_flush.elapsed() >= COUNTS_MAX_AGE
            {
                // Busy for a while (maybe with other switches' traffic),
                // or idle often but never for long: flow statistics catch
                // up. Not more often: each flush adds every entry's counts
                // with atomic adds on the flows' shared counters, which
                // every 1,024 rounds cost 1.6 ns a frame with 1,000 flows
                // (flows-profile --perf, 60 B).
                scratch.flush_counters();
                last_flush = Instant::now();
            }
            // About to sleep with flow counts not yet added: sleep at most
            // COUNTS_WAIT first, and add them if nothing came by then. A
            // worker woken sooner adds them later (after COUNTS_MAX_AGE,
            // or FLUSH_FRAMES frames in the cache itself): adding
            // them at every sleep cost 10 % of a worker's time with 1,000
            // flows at 1514 B, where it sleeps and wakes all the time.
            let counts_wait = n_active == 0 && scratch.counts_pending();
            let until_look = next_look.map(|t| t.saturating_duration_since(Instant::now()));
            let timeout = match (n_active, until_look) {
                (0, None) => counts_wait.then_some(COUNTS_WAIT),
                (0, Some(d)) if counts_wait => Some(d.min(COUNTS_WAIT)),
                (0, Some(d)) => Some(d),
                _ => Some(Duration::ZERO),
            };
            // An interrupted or failed wait is a wait that saw nothing.
            let t_sleep = Instant::now();
            if n_active == 0 {
                let since = t_sleep.saturating_duration_since(s.started).as_nanos();
                // Relaxed: statistics (see Worker::stats for the order).
                s.activity.asleep_since.store(
                    u64::try_from(since).unwrap_or(u64::MAX - 1) + 1,
                    Ordering::Relaxed,
                );
            }
            let n = s.epoll.wait(&mut events, timeout).unwrap_or(0);
            if n_active == 0 {
                let slept = t_sleep.elapsed();
                adapt.slept(slept, n > 0);
                // Awake first, then the sleep counted: a reader in between
                // sees too little, never the sleep twice (see Worker::stats).
                s.activity.asleep_since.store(0, Ordering::Relaxed);
                Activity::bump(
                    &s.activity.sleep_ns,
                    u64::try_from(slept.as_nanos()).unwrap_or(u64::MAX),
                );
            }
            if counts_wait && n == 0 {
                scratch.flush_counters();
                last_flush = Instant::now();
            }
            if any_deferred {
                // Queues whose guest did not post enough for a moderated
                // kick in time, and coalescing interface queues: look at
                // them now (and go back to immediate kicks or wake-ups if
                // they turn out quiet).
                let now = Instant::now();
                for l in local.iter_mut() {
                    if l.deferred.is_some_and(|t| now >= t) {
                        l.deferred = None;
                        l.recent = 0;
                        l.active = true;
                        n_active += 1;
                        l.a.set_awake();
                    }
                }
            }
            for ev in &events[..n] {
                let data = ev.u64;
                if data == CTL {
                    s.ctl.drain();
                    continue;
                }
                let id = data & !QUEUE_WAKE;
                let Some(l) = local.iter_mut().find(|l| l.a.id == id) else {
                    continue;
                };
                if data & QUEUE_WAKE != 0 {
                    // A queue's wake descriptor: nothing to read (see
                    // Local::sync_kick). In error or hung up (a TAP whose
                    // interface was deleted), it would wake us for ever:
                    // the queue, run below, says whether it still offers
                    // it, and the next event finds it unregistered.
                    if ev.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                        l.sync_kick(&s.epoll);
                    }
                } else {
                    if let Some(fd) = l.a.wake_fd().filter(|_| l.a.wake_is_doorbell()) {
                        drain_fd(fd);
                    }
                    // A queue's doorbell: its wake descriptor may have
                    // changed (a guest's frontend reconfigured it).
                    l.sync_kick(&s.epoll);
                }
                l.deferred = None;
                if !l.active {
                    l.active = true;
                    n_active += 1;
                    l.a.set_awake();
                }
            }
        }
        rounds = rounds.wrapping_add(1);
        if n_active == 0 {
            continue;
        }
        let t0 = Instant::now();
        let c0 = cycles();
        let mut any = false;
        let (mut nb, mut np) = (0u64, 0u64);
        // Spin before asking for kicks (the default, with no fixed idle
        // poll): a source with nothing this round is armed only once the
        // spin below found nothing anywhere, or at once when others moved
        // frames (no spin then).
        //
        // A spin that saw work which the next round then did not move (a
        // guest's bad available index looks like work and is refused) is
        // not repeated at once: this round arms as without a spin, so a
        // hostile ring cannot keep the worker spinning.
        let spin_first = cfg.idle_poll.is_none() && !adapt.window().is_zero() && !spun_to_work;
        spun_to_work = false;
        let coalesce = cfg.rx_coalesce;
        for l in local.iter_mut() {
            if !l.active {
                continue;
            }
            let (b, p) = l.a.forward(&mut scratch);
            nb += b;
            np += p;
            any |= b > 0;
            if b > 0 {
                s.activity.batch_size(p);
                l.recent = p;
                l.idle = false;
                if !coalesce.is_zero() && l.coalescible() {
                    let now = Instant::now();
                    let full = u64::from(l.a.switch.batch());
                    if l.rx.after_batch(p, full, now, coalesce) {
                        l.mute(&s.epoll, true);
                        l.active = false;
                        l.deferred = Some(now + coalesce);
                        n_active -= 1;
                    } else {
                        l.mute(&s.epoll, false);
                    }
                }
                continue;
            }
            if l.rx.on {
                // A look on the timer found nothing: the rate fell. Look
                // once more later, or wait for wake-ups again (after the
                // spin, if any).
                if l.empty_look(&s.epoll) {
                    l.active = false;
                    l.deferred = Some(Instant::now() + coalesce);
                    n_active -= 1;
                    continue;
                }
            }
            if spin_first {
                l.idle = true;
            } else if l.arm() {
                n_active -= 1;
            }
        }
        if any {
            let a = &s.activity;
            Activity::bump(&a.busy_cycles, cycles().wrapping_sub(c0));
            Activity::bump(&a.busy_ns, t0.elapsed().as_nanos() as u64);
            Activity::bump(&a.batches, nb);
            Activity::bump(&a.packets, np);
        }
        if spin_first {
            // Nothing moved anywhere: spin for the window that has been
            // paying (see ringswitch_ring::AdaptiveWait), then arm. What
            // our sleep costs the applications that would kick us counts
            // (their word, which the wait bounds to 100 µs).
            if !any {
                let peer = local
                    .iter()
                    .filter(|l| l.active)
                    .map(|l| l.a.app_kick_cost())
                    .max()
                    .unwrap_or_default();
                adapt.set_peer_cost(peer);
            }
            if !any && adapt.spin(|| local.iter().any(|l| l.active && l.a.has_work())) {
                spun_to_work = true;
                continue;
            }
            for l in local.iter_mut() {
                if l.idle && l.arm() {
                    n_active -= 1;
                }
            }
        }
        let fixed = cfg.idle_poll.unwrap_or_default();
        if n_active == 0 && !fixed.is_zero() {
            // sv3's idle poll: spin a little before sleeping, cheaper than a
            // kick and a wake-up when traffic resumes quickly.
            let until = Instant::now() + fixed;
            let mut spinner = ringswitch_ring::Spinner::default();
            'spin: while Instant::now() < until {
                for l in local.iter_mut() {
                    if l.a.has_work() {
                        l.a.set_awake();
                        l.deferred = None;
                        l.active = true;
                        n_active += 1;
                        break 'spin;
                    }
                }
                spinner.spin();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_micros(50);
    const FULL: u64 = 512;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Batches of `frames` every `gap`, from `t`: what `after_batch` said
    /// to each.
    fn batches(
        c: &mut Coalesce,
        t: &mut Instant,
        frames: u64,
        gap: Duration,
        n: usize,
    ) -> Vec<bool> {
        (0..n)
            .map(|_| {
                *t += gap;
                c.after_batch(frames, FULL, *t, WAIT)
            })
            .collect()
    }

    #[test]
    fn a_low_rate_never_coalesces() {
        let mut c = Coalesce::default();
        let mut t = Instant::now();
        // One frame a millisecond, every 100 µs, or 100,000 a second: a
        // look after 50 µs would find fewer than eight.
        assert!(batches(&mut c, &mut t, 1, us(1000), 40).iter().all(|&d| !d));
        assert!(batches(&mut c, &mut t, 1, us(100), 40).iter().all(|&d| !d));
        assert!(batches(&mut c, &mut t, 6, us(60), 40).iter().all(|&d| !d));
    }

    #[test]
    fn a_moderate_rate_coalesces_while_looks_find_frames() {
        let mut c = Coalesce::default();
        let mut t = Instant::now();
        // The average starts from slow and comes down within thirty
        // batches of twenty frames in 60 µs (a look would find 16).
        let d = batches(&mut c, &mut t, 20, us(60), 30);
        let first = d.iter().position(|&d| d).expect("coalesces");
        assert!(d[first..].iter().all(|&d| d), "{d:?}");
        c.set_on(true);
        assert!(batches(&mut c, &mut t, 18, us(55), 10).iter().all(|&d| d));
        // One empty look is a gap in the traffic; two end it.
        assert!(c.after_empty_look());
        assert_eq!(batches(&mut c, &mut t, 30, us(110), 1), [true]);
        assert!(c.after_empty_look());
        assert!(!c.after_empty_look());
        c.set_on(false);
        // A try that found frames does not back off.
        assert_eq!(c.skip, 0);
    }

    #[test]
    fn a_rate_that_falls_below_half_ends_it() {
        let mut c = Coalesce::default();
        let mut t = Instant::now();
        assert!(*batches(&mut c, &mut t, 20, us(60), 30).last().unwrap());
        c.set_on(true);
        // 100,000 a second: five frames a look, above half of eight.
        assert!(*batches(&mut c, &mut t, 5, us(50), 20).last().unwrap());
        // 40,000 a second: two a look.
        assert!(!*batches(&mut c, &mut t, 2, us(50), 20).last().unwrap());
    }

    #[test]
    fn a_full_batch_is_followed_at_once() {
        let mut c = Coalesce::default();
        let mut t = Instant::now();
        c.after_batch(5, FULL, t, WAIT);
        c.set_on(true);
        t += us(50);
        assert!(
            !c.after_batch(FULL, FULL, t, WAIT),
            "more wait: look again now"
        );
    }

    #[test]
    fn bursts_that_leave_looks_empty_back_off() {
        let mut c = Coalesce::default();
        let mut t = Instant::now();
        c.after_batch(400, FULL, t, WAIT);
        let mut skipped = Vec::new();
        for _ in 0..5 {
            // A burst of 400 frames a millisecond after the last one: the
            // rate says coalesce, and the looks find nothing.
            let mut declined = 0;
            while !batches(&mut c, &mut t, 400, us(1000), 1)[0] {
                declined += 1;
            }
            skipped.push(declined);
            c.set_on(true);
            assert!(c.after_empty_look());
            assert!(!c.after_empty_look());
            c.set_on(false);
        }
        assert_eq!(skipped[1..], [1, 2, 4, 8]);
    }

    #[test]
    fn clumps_of_a_low_rate_do_not_pass_for_a_high_one() {
        let mut c = Coalesce::default();
        let mut t = Instant::now();
        // 10,000 frames a second sent three at a time, 5 µs apart: batch
        // to batch, two frames in three look like 200,000 a second.
        for _ in 0..100 {
            assert!(!c.after_batch(1, FULL, t + us(290), WAIT));
            assert!(!c.after_batch(1, FULL, t + us(295), WAIT));
            assert!(!c.after_batch(1, FULL, t + us(300), WAIT));
            t += us(300);
        }
    }
}
