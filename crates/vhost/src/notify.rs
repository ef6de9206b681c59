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
//!   cut short by the watchdog of `ringswitch_ring::eventfd` (started with
//!   the first call descriptor): the write returns EINTR, that descriptor
//!   is never written again (its interrupts are dropped and counted), and
//!   the worker goes on.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ringswitch_frame::{Notify, Wake};
use ringswitch_ring::eventfd::{watch_blocked_writes, write_one};
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
        watch_blocked_writes();
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
        if let Some(call) = self.0 {
            call.notify();
        }
    }
}

impl From<Interrupt> for Wake {
    fn from(i: Interrupt) -> Wake {
        match i.0 {
            Some(call) => Wake::to(call),
            None => Wake::NONE,
        }
    }
}

impl Notify for CallFd {
    /// Writes the call eventfd, never blocking: a write that would block is
    /// dropped and counted.
    fn notify(&self) {
        let call = self;
        // Relaxed: a flag set by this or another sender after a write that
        // blocked; missing it once costs one more write cut short.
        // Counters likewise order nothing.
        if call.stuck.load(Ordering::Relaxed) {
            call.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let r = write_one(call.file.as_raw_fd());
        if r.is_ok() {
            call.counters.sent.fetch_add(1, Ordering::Relaxed);
            return;
        }
        call.counters.dropped.fetch_add(1, Ordering::Relaxed);
        if matches!(r, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            call.stuck.store(true, Ordering::Relaxed);
            static LAST_S: AtomicU64 = AtomicU64::new(u64::MAX);
            if crate::log_allowed(&LAST_S) {
                warn!("a frontend made its call eventfd blocking and full: its interrupts are dropped from now on");
            }
        }
    }
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

    /// A blocking eventfd whose counter is at its maximum: one more
    /// write would block.
    fn full_eventfd() -> File {
        let f = eventfd(libc::EFD_CLOEXEC);
        let v: u64 = 0xffff_ffff_ffff_fffe;
        // SAFETY: writes 8 bytes of a local u64 to our eventfd.
        let n = unsafe { libc::write(f.as_raw_fd(), (&v as *const u64).cast(), 8) };
        assert_eq!(n, 8);
        f
    }

    #[test]
    fn a_full_counter_drops_and_counts_instead_of_blocking() {
        let f = full_eventfd();
        let counters = Arc::new(IrqCounters::default());
        let call = Arc::new(CallFd::new(f, counters.clone()).unwrap());
        Interrupt::to(&call).send();
        Interrupt::to(&call).send();
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 2);
        assert_eq!(counters.sent.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_call_eventfd_made_blocking_again_is_cut_short() {
        let f = full_eventfd();
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
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the blocked write was never cut short");
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 2);
        assert!(call.stuck.load(Ordering::Relaxed));
    }
}
