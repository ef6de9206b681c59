//! eventfd: the kick and interrupt doorbells between processes.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new eventfd with counter 0, non-blocking and close-on-exec.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd with valid flags returns a new fd or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Wraps a received descriptor. Reads and writes on something that is
    /// not an eventfd fail with an error rather than misbehave.
    pub fn from_fd(fd: OwnedFd) -> EventFd {
        EventFd(fd)
    }

    /// Another descriptor for the same eventfd.
    pub fn try_clone(&self) -> io::Result<EventFd> {
        Ok(EventFd(self.0.try_clone()?))
    }

    /// Adds 1 to the counter, waking whoever polls it.
    #[inline]
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: write of 8 bytes from a local u64 to our fd. A failure
        // (EAGAIN at counter overflow) still leaves the fd readable, which is
        // all a wake-up needs.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Reads and clears the counter; 0 when nothing was pending.
    #[inline]
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: read of 8 bytes into a local u64 from our fd.
        let n = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            v
        } else {
            0
        }
    }

    /// Waits until the counter is non-zero or `timeout` passes (None: no
    /// limit). Returns whether it fired; does not clear it.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        poll_in(self.0.as_raw_fd(), timeout)
    }
}

/// Polls one fd for input.
pub fn poll_in(fd: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout
        .map(|d| i32::try_from(d.as_millis()).unwrap_or(i32::MAX))
        .unwrap_or(-1);
    loop {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(n > 0);
    }
}

impl From<EventFd> for OwnedFd {
    fn from(e: EventFd) -> OwnedFd {
        e.0
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
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
}
