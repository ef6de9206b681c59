//! The frontend's kick and call descriptors, which it may hand over as
//! anything: a pipe whose buffer it filled, a socket, a FIFO. A blocking
//! read or write on one would freeze the switch worker that serves every
//! port of its switches.
//!
//! - [`check_eventfd`]: SET_VRING_KICK and SET_VRING_CALL accept only an
//!   eventfd, and set it non-blocking (QEMU creates its own with
//!   EFD_NONBLOCK, so this changes nothing for it).
//! - [`CallFd`]: a checked call eventfd with the pair's interrupt counters.
//!   The port hands one out, as an [`Interrupt`], from the locked section
//!   of a batch; the caller signals it after it released the pair's lock,
//!   so no lock is ever held across a write to the frontend's descriptor.
//!   A write that would block (the frontend pushed the counter to its
//!   maximum) is dropped and counted.
//! - The frontend shares the descriptor's open file description, so it can
//!   clear O_NONBLOCK again after the check. A write that blocks anyway is
//!   cut short: a watchdog thread (started with the first call descriptor)
//!   sees a write in flight for two of its ticks and interrupts the writing
//!   thread with a signal whose handler does nothing and does not restart
//!   the call, so the write returns EINTR. That descriptor is then never
//!   written again (its interrupts are dropped and counted), and the
//!   worker goes on. The cost on the data path is two relaxed stores per
//!   interrupt.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use tracing::warn;

/// What `/proc/self/fd/N` links to for an eventfd.
const EVENTFD_LINK: &[u8] = b"anon_inode:[eventfd]";

/// Why a kick or call descriptor was refused.
#[derive(Debug, thiserror::Error)]
pub enum FdError {
    /// The descriptor is not an eventfd.
    #[error("the descriptor is not an eventfd")]
    NotEventFd,
    /// Its type or flags could not be read or set.
    #[error("cannot inspect or configure the descriptor")]
    Io(#[source] io::Error),
}

/// Refuses `f` unless it is an eventfd, and makes it non-blocking.
pub fn check_eventfd(f: &File) -> Result<(), FdError> {
    let link =
        std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).map_err(FdError::Io)?;
    if std::os::unix::ffi::OsStrExt::as_bytes(link.as_os_str()) != EVENTFD_LINK {
        return Err(FdError::NotEventFd);
    }
    set_nonblocking(f.as_raw_fd()).map_err(FdError::Io)
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl F_GETFL/F_SETFL on a descriptor the caller keeps open;
    // no memory is passed.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Interrupt counters of one queue pair, shared by its call descriptors so
/// that a signal sent after the lock was released is still counted.
#[derive(Debug, Default)]
pub(crate) struct IrqCounters {
    /// Interrupts written to the call eventfd.
    pub sent: AtomicU64,
    /// Interrupts dropped: the write would have blocked, or failed.
    pub dropped: AtomicU64,
}

/// A call eventfd, checked by [`check_eventfd`] (or made by the device's
/// caller in tests), with the counters of its pair.
#[derive(Debug)]
pub(crate) struct CallFd {
    file: File,
    counters: Arc<IrqCounters>,
    /// A write blocked despite O_NONBLOCK (the frontend cleared it): never
    /// written again.
    stuck: AtomicBool,
}

impl CallFd {
    pub(crate) fn new(file: File, counters: Arc<IrqCounters>) -> Result<CallFd, FdError> {
        check_eventfd(&file)?;
        start_watchdog();
        Ok(CallFd {
            file,
            counters,
            stuck: AtomicBool::new(false),
        })
    }
}

/// An interrupt decided under the pair's lock, to send after releasing it:
/// `let irq = q.notify_rx(); drop(q); irq.send();`. Holds a reference to the
/// call eventfd (no allocation), so a frontend replacing it meanwhile is
/// harmless.
#[must_use = "an interrupt does nothing until sent"]
#[derive(Debug, Default)]
pub struct Interrupt(Option<Arc<CallFd>>);

impl Interrupt {
    /// No interrupt.
    pub const NONE: Interrupt = Interrupt(None);

    pub(crate) fn to(call: &Arc<CallFd>) -> Interrupt {
        Interrupt(Some(call.clone()))
    }

    /// Is there an interrupt to send?
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Writes the call eventfd, never blocking: a write that would block is
    /// dropped and counted.
    pub fn send(self) {
        let Some(call) = self.0 else {
            return;
        };
        // Relaxed: a flag set by this or another sender after a write that
        // blocked; missing it once costs one more write cut short.
        // Counters likewise order nothing.
        if call.stuck.load(Ordering::Relaxed) {
            call.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let r = watched_write(call.file.as_raw_fd());
        if matches!(r, Ok(8)) {
            call.counters.sent.fetch_add(1, Ordering::Relaxed);
            return;
        }
        call.counters.dropped.fetch_add(1, Ordering::Relaxed);
        if matches!(r, Err(e) if e.raw_os_error() == Some(libc::EINTR)) {
            call.stuck.store(true, Ordering::Relaxed);
            static LAST_S: AtomicU64 = AtomicU64::new(u64::MAX);
            if crate::log_allowed(&LAST_S) {
                warn!("a frontend made its call eventfd blocking and full: its interrupts are dropped from now on");
            }
        }
    }
}

// ---- the watchdog for writes that block anyway ----

/// Threads that may be inside a call eventfd write, watched by the
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

/// Starts the watchdog thread and installs the signal's handler, once.
fn start_watchdog() {
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
            warn!("cannot install the call eventfd watchdog's signal handler");
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("rs-irq-watchdog".into())
            .stack_size(64 * 1024)
            .spawn(watchdog);
        if let Err(e) = spawned {
            warn!(error = %e, "cannot start the call eventfd watchdog");
        }
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

/// Writes 1 to the eventfd `fd`, watched by the watchdog: the bytes
/// written, or the error (EINTR when it was cut short).
fn watched_write(fd: RawFd) -> io::Result<isize> {
    let one: u64 = 1;
    let write = || {
        // SAFETY: writes the 8 bytes of a local u64 to a descriptor the
        // caller keeps open.
        let n = unsafe { libc::write(fd, (&one as *const u64).cast::<libc::c_void>(), 8) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n)
        }
    };
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
    use std::os::fd::FromRawFd;

    fn eventfd(flags: i32) -> File {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, flags) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nothing else owns.
        unsafe { File::from_raw_fd(fd) }
    }

    #[test]
    fn an_eventfd_is_accepted_and_made_non_blocking() {
        let f = eventfd(libc::EFD_CLOEXEC);
        check_eventfd(&f).unwrap();
        // SAFETY: F_GETFL on an open descriptor.
        let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
        assert_ne!(fl & libc::O_NONBLOCK, 0);
    }

    #[test]
    fn a_pipe_a_socket_and_a_file_are_refused() {
        let mut p = [0; 2];
        // SAFETY: pipe fills two descriptors.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors nothing else owns.
        let (r, w) = unsafe { (File::from_raw_fd(p[0]), File::from_raw_fd(p[1])) };
        assert!(matches!(check_eventfd(&w), Err(FdError::NotEventFd)));
        assert!(matches!(check_eventfd(&r), Err(FdError::NotEventFd)));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let a = File::from(std::os::fd::OwnedFd::from(a));
        assert!(matches!(check_eventfd(&a), Err(FdError::NotEventFd)));
        let f = File::open("/proc/self/stat").unwrap();
        assert!(matches!(check_eventfd(&f), Err(FdError::NotEventFd)));
    }

    #[test]
    fn a_full_counter_drops_and_counts_instead_of_blocking() {
        let f = eventfd(libc::EFD_CLOEXEC);
        let v: u64 = 0xffff_ffff_ffff_fffe;
        // SAFETY: writes 8 bytes of a local u64 to our eventfd.
        let n = unsafe { libc::write(f.as_raw_fd(), (&v as *const u64).cast(), 8) };
        assert_eq!(n, 8);
        let counters = Arc::new(IrqCounters::default());
        let call = Arc::new(CallFd::new(f, counters.clone()).unwrap());
        Interrupt::to(&call).send();
        Interrupt::to(&call).send();
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 2);
        assert_eq!(counters.sent.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_call_eventfd_made_blocking_again_is_cut_short() {
        let f = eventfd(libc::EFD_CLOEXEC);
        let v: u64 = 0xffff_ffff_ffff_fffe;
        // SAFETY: writes 8 bytes of a local u64 to our eventfd.
        let n = unsafe { libc::write(f.as_raw_fd(), (&v as *const u64).cast(), 8) };
        assert_eq!(n, 8);
        let frontend = f.try_clone().unwrap();
        let counters = Arc::new(IrqCounters::default());
        let call = Arc::new(CallFd::new(f, counters.clone()).unwrap());
        // The frontend clears O_NONBLOCK on the shared description.
        // SAFETY: fcntl on an open descriptor, no memory passed.
        unsafe {
            let fl = libc::fcntl(frontend.as_raw_fd(), libc::F_GETFL);
            assert_eq!(
                libc::fcntl(frontend.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK),
                0
            );
        }
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let c = call.clone();
        std::thread::spawn(move || {
            Interrupt::to(&c).send();
            Interrupt::to(&c).send();
            let _ = done_tx.send(());
        });
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the blocked write was never cut short");
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 2);
        assert!(call.stuck.load(Ordering::Relaxed));
    }
}
