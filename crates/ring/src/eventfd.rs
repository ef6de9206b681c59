//! eventfd: the kick and interrupt doorbells between processes.
//!
//! A doorbell is shared with its peer, open file description included, so
//! the peer can clear O_NONBLOCK on it and push its counter to the maximum:
//! the next write then blocks until someone reads. A process that writes
//! its peers' doorbells from threads that must never block (the switch
//! daemon's workers) calls [`watch_blocked_writes`] once; from then on
//! every doorbell write ([`EventFd::signal`], [`write_one`]) is watched: a
//! watchdog thread sees a write in flight for two of its ticks (250 ms
//! each) and interrupts the writing thread with a signal whose handler does
//! nothing and does not restart the call, so the write returns EINTR. The
//! [`EventFd`] is then never written again. The data path pays two relaxed
//! stores per write; processes that never call `watch_blocked_writes` (the
//! clients) pay one relaxed load.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
    /// A write blocked and was cut short (the peer made the doorbell
    /// blocking and full): it is not written again.
    stuck: AtomicBool,
}

impl EventFd {
    /// A new eventfd with counter 0, non-blocking and close-on-exec.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd with valid flags returns a new fd or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        Ok(EventFd::wrap(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Wraps a received descriptor. Reads and writes on something that is
    /// not an eventfd fail with an error rather than misbehave.
    pub fn from_fd(fd: OwnedFd) -> EventFd {
        EventFd::wrap(fd)
    }

    fn wrap(fd: OwnedFd) -> EventFd {
        EventFd {
            fd,
            stuck: AtomicBool::new(false),
        }
    }

    /// Another descriptor for the same eventfd.
    pub fn try_clone(&self) -> io::Result<EventFd> {
        Ok(EventFd::wrap(self.fd.try_clone()?))
    }

    /// Adds 1 to the counter, waking whoever polls it. Never blocks for
    /// long once [`watch_blocked_writes`] was called (see the module
    /// documentation). A failure (EAGAIN at counter overflow) still leaves
    /// the fd readable, which is all a wake-up needs.
    #[inline]
    pub fn signal(&self) {
        // Relaxed: a flag only this doorbell's writers set; missing it once
        // costs one more write cut short.
        if self.stuck.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = write_one(self.fd.as_raw_fd()) {
            if e.kind() == io::ErrorKind::Interrupted {
                self.stuck.store(true, Ordering::Relaxed);
            }
        }
    }

    /// [`EventFd::signal`], timed: what the write cost the caller. Waking
    /// a thread that sleeps on another, halted CPU is paid here, by the
    /// writer (see `PortRing::note_kick`).
    #[inline]
    pub fn signal_timed(&self) -> std::time::Duration {
        let t0 = std::time::Instant::now();
        self.signal();
        t0.elapsed()
    }

    /// Has a write to this doorbell blocked and been cut short?
    pub fn is_stuck(&self) -> bool {
        self.stuck.load(Ordering::Relaxed)
    }

    /// Reads and clears the counter; 0 when nothing was pending.
    #[inline]
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: read of 8 bytes into a local u64 from our fd.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            v
        } else {
            0
        }
    }

    /// Waits until the counter is non-zero or `timeout` passes (None: no
    /// limit). Returns whether it fired; does not clear it.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        crate::poll::poll_in(self.fd.as_raw_fd(), timeout)
    }
}

impl From<EventFd> for OwnedFd {
    fn from(e: EventFd) -> OwnedFd {
        e.fd
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

// ---- the watchdog for writes that block anyway ----

/// Threads that may be inside a doorbell write, watched by the
/// watchdog. A thread beyond this many writes unwatched.
const WRITERS_MAX: usize = 256;
/// The watchdog's period: a write in flight for two ticks is cut short, so
/// a blocked worker is back within half a second.
const TICK: Duration = Duration::from_millis(250);

struct Writer {
    used: AtomicBool,
    /// The kernel thread id (for tgkill), 0 when free.
    tid: AtomicI32,
    /// The watchdog tick at which the current write began, 0 when none.
    since: AtomicU64,
}

impl Writer {
    #[allow(clippy::declare_interior_mutable_const)] // only to build the static table
    const FREE: Writer = Writer {
        used: AtomicBool::new(false),
        tid: AtomicI32::new(0),
        since: AtomicU64::new(0),
    };
}

static WRITERS: [Writer; WRITERS_MAX] = [const { Writer::FREE }; WRITERS_MAX];
static TICKS: AtomicU64 = AtomicU64::new(1);
static WATCHDOG: Once = Once::new();

/// This thread's slot in WRITERS, released when the thread ends.
struct WriterSlot(Option<usize>);

impl WriterSlot {
    fn claim() -> WriterSlot {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        for (i, w) in WRITERS.iter().enumerate() {
            // Acquire: pairs with the Release that freed the slot.
            if !w.used.swap(true, Ordering::Acquire) {
                w.tid.store(tid, Ordering::Relaxed);
                return WriterSlot(Some(i));
            }
        }
        WriterSlot(None)
    }
}

impl Drop for WriterSlot {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            let w = &WRITERS[i];
            w.since.store(0, Ordering::Relaxed);
            w.tid.store(0, Ordering::Relaxed);
            // Release: pairs with the Acquire swap of the next owner.
            w.used.store(false, Ordering::Release);
        }
    }
}

thread_local! {
    static SLOT: WriterSlot = WriterSlot::claim();
}

/// The signal that cuts a blocked write short (its handler does nothing).
fn unstick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

extern "C" fn on_unstick(_sig: libc::c_int) {}

/// Set once the watchdog runs: writes are watched only then.
static WATCHING: AtomicBool = AtomicBool::new(false);

/// Starts watching doorbell writes in this process (see the module
/// documentation): installs the signal's handler and starts the watchdog
/// thread, once. Call it in a process that writes its peers' doorbells from
/// threads that must not block.
pub fn watch_blocked_writes() {
    WATCHDOG.call_once(|| {
        // SAFETY: sigaction with a fully initialised action: a handler of
        // the plain signature, an empty mask, and no SA_RESTART, so the
        // interrupted write returns EINTR.
        let ok = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_unstick as *const () as usize;
            act.sa_flags = 0;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(unstick_signal(), &act, std::ptr::null_mut()) == 0
        };
        if !ok {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("rs-doorbell-dog".into())
            .stack_size(64 * 1024)
            .spawn(watchdog);
        // Relaxed: a switch for later writes; a write that misses it is
        // merely unwatched, as before.
        WATCHING.store(spawned.is_ok(), Ordering::Relaxed);
    });
}

fn watchdog() {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    loop {
        std::thread::sleep(TICK);
        // Relaxed: a clock; writers only compare it.
        let now = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        for w in WRITERS.iter() {
            // Relaxed: a stale value only sends a signal to a thread that
            // finished its write, whose handler does nothing.
            let since = w.since.load(Ordering::Relaxed);
            let tid = w.tid.load(Ordering::Relaxed);
            if since != 0 && now >= since + 2 && tid > 0 {
                // SAFETY: tgkill to a thread of this process; the signal's
                // handler does nothing.
                unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, unstick_signal()) };
            }
        }
    }
}

/// Adds 1 to the counter of the eventfd `fd`, watched by the watchdog
/// once [`watch_blocked_writes`] was called: Err(Interrupted) when a write
/// that blocked was cut short; other errors as write(2) gives them.
pub fn write_one(fd: RawFd) -> io::Result<()> {
    let one: u64 = 1;
    let write = || {
        // SAFETY: writes the 8 bytes of a local u64 to a descriptor the
        // caller keeps open.
        let n = unsafe { libc::write(fd, (&one as *const u64).cast::<libc::c_void>(), 8) };
        match n {
            8 => Ok(()),
            n if n < 0 => Err(io::Error::last_os_error()),
            _ => Err(io::Error::from(io::ErrorKind::WriteZero)),
        }
    };
    // Relaxed: see WATCHING.
    if !WATCHING.load(Ordering::Relaxed) {
        return write();
    }
    SLOT.try_with(|slot| match slot.0 {
        Some(i) => {
            let w = &WRITERS[i];
            // Relaxed: the watchdog only needs to see it eventually (a
            // write blocked for a tick has long made it visible).
            w.since
                .store(TICKS.load(Ordering::Relaxed), Ordering::Relaxed);
            let n = write();
            w.since.store(0, Ordering::Relaxed);
            n
        }
        None => write(),
    })
    .unwrap_or_else(|_| write())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_wait_drain() {
        let e = EventFd::new().unwrap();
        assert!(!e.wait(Some(Duration::from_millis(1))).unwrap());
        e.signal();
        e.signal();
        assert!(e.wait(Some(Duration::from_millis(1))).unwrap());
        assert_eq!(e.drain(), 2);
        assert_eq!(e.drain(), 0);
    }

    #[test]
    fn a_doorbell_made_blocking_and_full_is_cut_short() {
        watch_blocked_writes();
        let e = EventFd::new().unwrap();
        let v: u64 = 0xffff_ffff_ffff_fffe;
        // SAFETY: writes 8 bytes of a local u64 to our eventfd.
        let n = unsafe { libc::write(e.as_raw_fd(), (&v as *const u64).cast(), 8) };
        assert_eq!(n, 8);
        // The peer clears O_NONBLOCK on the shared description.
        // SAFETY: fcntl on an open descriptor, no memory passed.
        unsafe {
            let fl = libc::fcntl(e.as_raw_fd(), libc::F_GETFL);
            let r = libc::fcntl(e.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
            assert_eq!(r, 0);
        }
        let e = std::sync::Arc::new(e);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let e2 = e.clone();
        std::thread::spawn(move || {
            e2.signal();
            e2.signal();
            let _ = done_tx.send(());
        });
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the blocked write was never cut short");
        assert!(e.is_stuck());
    }
}
