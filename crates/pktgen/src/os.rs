//! The two things pkt-gen asks of the OS directly: the monotonic clock (the
//! timestamps ping carries are CLOCK_MONOTONIC nanoseconds) and a stop flag
//! raised by SIGINT/SIGTERM. The crate's only `unsafe` is here.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// CPU time (user + system, all threads) of this process so far, in
/// seconds; `None` if the kernel would not say.
pub fn process_cpu_seconds() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; the return value says whether it was filled.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// Set by the handler; read by the data loops once per batch.
static STOP: AtomicBool = AtomicBool::new(false);

/// Whether SIGINT or SIGTERM arrived since the guard was installed.
#[inline]
pub fn stop_requested() -> bool {
    // Relaxed: a flag with no data attached; the loops look again soon.
    STOP.load(Ordering::Relaxed)
}

extern "C" fn on_signal(sig: libc::c_int) {
    // A second signal means the first did not stop us: leave at once.
    // Only async-signal-safe calls here (an atomic swap and _exit).
    if STOP.swap(true, Ordering::Relaxed) {
        // SAFETY: _exit is async-signal-safe and takes any status.
        unsafe { libc::_exit(128 + sig) };
    }
}

/// Keeps SIGINT/SIGTERM pointed at the stop flag; restores the previous
/// handlers when dropped.
pub struct SignalGuard {
    old: [(libc::c_int, libc::sigaction); 2],
}

impl SignalGuard {
    /// Clears the flag and installs the handler.
    pub fn install() -> io::Result<SignalGuard> {
        STOP.store(false, Ordering::Relaxed);
        let mut old = [
            (libc::SIGINT, empty_sigaction()),
            (libc::SIGTERM, empty_sigaction()),
        ];
        for (sig, prev) in &mut old {
            let mut sa = empty_sigaction();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // No SA_RESTART: a blocked poll returns early (the waits here
            // use short timeouts anyway).
            sa.sa_flags = 0;
            // SAFETY: `sa` and `prev` are valid sigaction structs; the
            // handler only touches an atomic and calls _exit, both
            // async-signal-safe.
            if unsafe { libc::sigaction(*sig, &sa, prev) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SignalGuard { old })
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores a disposition the kernel handed us.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
    }
}

fn empty_sigaction() -> libc::sigaction {
    // SAFETY: sigaction is plain data for which all-zero is valid (SIG_DFL,
    // empty mask, no flags).
    unsafe { std::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_moves_forward() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} {b}");
    }

    #[test]
    fn sigterm_sets_the_flag_and_guard_restores() {
        let g = SignalGuard::install().unwrap();
        assert!(!stop_requested());
        // SAFETY: raising a signal whose handler we just installed.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(stop_requested());
        drop(g);
        let mut cur = empty_sigaction();
        // SAFETY: query only (null new action).
        unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut cur) };
        assert_eq!(cur.sa_sigaction, libc::SIG_DFL);
    }
}
