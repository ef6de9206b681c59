//! Waiting on descriptors: an epoll set, the one wrapper of epoll(7) in
//! ringswitch (the daemon's workers sleep on one, a client port with
//! several interrupt eventfds gives one out, and an emulated `/dev/netmap`
//! descriptor is one); and poll(2) on a few descriptors ([`poll_fds`],
//! [`poll_in`]), the one wrapper of that call (control threads, the bridge).
//!
//! `epoll_ctl` and `epoll_wait` are made as raw system calls, never through
//! the C library's symbols of those names: the netmap compatibility
//! library takes those symbols over when it is preloaded, and must be able
//! to use this type without coming back into itself.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// One event as epoll_wait(2) reports it: the interest flags that fired
/// and the data given when the descriptor was added.
pub type Event = libc::epoll_event;

/// An empty event, to fill an array for [`Epoll::wait`].
pub const NO_EVENT: Event = libc::epoll_event { events: 0, u64: 0 };

/// Readable (`EPOLLIN`), level-triggered.
pub const READABLE: u32 = libc::EPOLLIN as u32;

/// Readable, edge-triggered (`EPOLLIN | EPOLLET`).
pub const READABLE_EDGE: u32 = (libc::EPOLLIN | libc::EPOLLET) as u32;

/// An epoll set. `F` holds its descriptor: owned ([`Epoll::new`]), or
/// borrowed from whoever arranges its closing ([`Epoll::borrowed`]).
#[derive(Debug)]
pub struct Epoll<F = OwnedFd>(F);

impl Epoll<OwnedFd> {
    /// A new epoll set, closed on exec.
    pub fn new() -> io::Result<Epoll> {
        Epoll::with_cloexec(true)
    }

    /// A new epoll set, closed on exec or not.
    pub fn with_cloexec(cloexec: bool) -> io::Result<Epoll> {
        let flags = if cloexec { libc::EPOLL_CLOEXEC } else { 0 };
        // SAFETY: epoll_create1 with a valid flag returns a new fd or -1.
        let fd = unsafe { libc::epoll_create1(flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
}

impl<'a> Epoll<BorrowedFd<'a>> {
    /// The epoll set behind `fd`, which someone else owns and closes.
    /// Calls on a descriptor that is not an epoll set fail (EINVAL).
    pub fn borrowed(fd: BorrowedFd<'a>) -> Epoll<BorrowedFd<'a>> {
        Epoll(fd)
    }
}

impl<F: AsFd> Epoll<F> {
    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: epoll_ctl on our epoll set with an event struct that lives
        // across the call; `fd` is only a number to the kernel (a closed one
        // fails with EBADF).
        let r = unsafe {
            libc::syscall(
                libc::SYS_epoll_ctl,
                self.0.as_fd().as_raw_fd(),
                op,
                fd,
                &mut ev as *mut libc::epoll_event,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `fd` for `events` ([`READABLE`], [`READABLE_EDGE`] or other
    /// `EPOLL*` flags); [`Epoll::wait`] reports it with `data`.
    pub fn add(&self, fd: RawFd, data: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, data)
    }

    /// Watches `fd`, already in the set, for `events` instead (0: only
    /// errors and hang-ups, which epoll always reports).
    pub fn modify(&self, fd: RawFd, data: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, data)
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for events, at most `events.len()`, for at most `timeout`
    /// (`None`: until one comes; zero: only looks). Returns how many of
    /// `events` were filled. A timeout that is not a whole number of
    /// milliseconds is kept to the nanosecond (epoll_pwait2, Linux 5.11).
    /// A signal ends the wait with `Interrupted`.
    pub fn wait(&self, events: &mut [Event], timeout: Option<Duration>) -> io::Result<usize> {
        let max = libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX);
        let epfd = self.0.as_fd().as_raw_fd();
        let r = match timeout {
            Some(t) if t.subsec_nanos() % 1_000_000 != 0 => {
                let ts = libc::timespec {
                    tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
                    tv_nsec: libc::c_long::from(t.subsec_nanos()),
                };
                // SAFETY: the buffer holds at least `max` entries for the
                // kernel to fill; `ts` lives across the call; no signal
                // mask (null).
                unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        epfd,
                        events.as_mut_ptr(),
                        max,
                        &ts as *const libc::timespec,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                }
            }
            _ => {
                let ms = timeout.map_or(-1, |t| {
                    libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX)
                });
                // SAFETY: the buffer holds at least `max` entries for the
                // kernel to fill; no signal mask (null).
                unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait,
                        epfd,
                        events.as_mut_ptr(),
                        max,
                        ms,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                }
            }
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel fills at most `max` entries.
        Ok(usize::try_from(r).unwrap_or(0).min(events.len()))
    }
}

impl<F: AsFd> AsFd for Epoll<F> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl<F: AsFd> AsRawFd for Epoll<F> {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl IntoRawFd for Epoll<OwnedFd> {
    fn into_raw_fd(self) -> RawFd {
        self.0.into_raw_fd()
    }
}

/// A descriptor to watch for `events` (`libc::POLLIN`, `libc::POLLOUT`)
/// with [`poll_fds`].
#[inline]
pub fn watch(fd: RawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// ppoll(2): waits until one of `fds` has an event it watches, or `timeout`
/// passes (None: no limit; to the nanosecond: a timeout rounded down to
/// milliseconds turned the last millisecond of every wait into a loop of
/// zero-timeout calls). Returns how many have events (their `revents` say
/// which), 0 when the time passed. An interrupted wait is an error of kind
/// `Interrupted`: whether to wait again is the caller's choice.
#[inline]
pub fn poll_fds(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos()),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is `fds.len()` initialized pollfds, exclusively
    // borrowed for the call, which writes only their `revents`; `tsp` is
    // NULL or a timespec that lives across the call; no signal mask.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Polls one fd for input, waiting again when interrupted. Returns whether
/// it is readable (false: `timeout` passed).
pub fn poll_in(fd: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut fds = [watch(fd, libc::POLLIN)];
    loop {
        match poll_fds(&mut fds, timeout) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r.map(|n| n > 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventFd;

    #[test]
    fn reports_the_data_of_a_ready_descriptor() {
        let ep = Epoll::new().unwrap();
        let (a, b) = (EventFd::new().unwrap(), EventFd::new().unwrap());
        ep.add(a.as_raw_fd(), 7, READABLE).unwrap();
        ep.add(b.as_raw_fd(), 9, READABLE_EDGE).unwrap();
        let mut evs = [NO_EVENT; 4];
        assert_eq!(ep.wait(&mut evs, Some(Duration::ZERO)).unwrap(), 0);
        b.signal();
        let n = ep.wait(&mut evs, Some(Duration::from_secs(60))).unwrap();
        assert_eq!(n, 1);
        assert_eq!({ evs[0].u64 }, 9);
        // Edge-triggered: not reported again until the next write.
        assert_eq!(
            ep.wait(&mut evs, Some(Duration::from_micros(100))).unwrap(),
            0
        );
        a.signal();
        assert_eq!(ep.wait(&mut evs, None).unwrap(), 1);
        assert_eq!({ evs[0].u64 }, 7);
        // Level-triggered: still readable.
        let borrowed = Epoll::borrowed(ep.as_fd());
        assert_eq!(borrowed.wait(&mut evs, Some(Duration::ZERO)).unwrap(), 1);
        borrowed.delete(a.as_raw_fd()).unwrap();
        assert_eq!(ep.wait(&mut evs, Some(Duration::ZERO)).unwrap(), 0);
        assert!(ep.delete(a.as_raw_fd()).is_err(), "no longer watched");
    }

    #[test]
    fn a_muted_descriptor_is_not_reported_until_watched_again() {
        let ep = Epoll::new().unwrap();
        let a = EventFd::new().unwrap();
        ep.add(a.as_raw_fd(), 3, READABLE).unwrap();
        a.signal();
        let mut evs = [NO_EVENT; 4];
        ep.modify(a.as_raw_fd(), 3, 0).unwrap();
        assert_eq!(ep.wait(&mut evs, Some(Duration::ZERO)).unwrap(), 0);
        // Readable all along: reported as soon as it is watched again.
        ep.modify(a.as_raw_fd(), 3, READABLE).unwrap();
        assert_eq!(ep.wait(&mut evs, Some(Duration::ZERO)).unwrap(), 1);
        assert_eq!({ evs[0].u64 }, 3);
    }

    #[test]
    fn poll_reports_which_descriptor_is_ready() {
        let (a, b) = (EventFd::new().unwrap(), EventFd::new().unwrap());
        let mut fds = [
            watch(a.as_raw_fd(), libc::POLLIN),
            watch(b.as_raw_fd(), libc::POLLIN),
        ];
        assert_eq!(poll_fds(&mut fds, Some(Duration::ZERO)).unwrap(), 0);
        assert!(!poll_in(b.as_raw_fd(), Some(Duration::ZERO)).unwrap());
        b.signal();
        assert_eq!(
            poll_fds(&mut fds, Some(Duration::from_secs(60))).unwrap(),
            1
        );
        assert_eq!((fds[0].revents, fds[1].revents), (0, libc::POLLIN));
        assert!(poll_in(b.as_raw_fd(), None).unwrap());
        let mut bad = [watch(-1, libc::POLLIN)];
        assert_eq!(
            poll_fds(&mut bad, Some(Duration::ZERO)).unwrap(),
            0,
            "negative fds are ignored"
        );
    }
}
