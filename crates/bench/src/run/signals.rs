//! SIGINT, SIGTERM and SIGHUP end a run cleanly: the handler only sets a
//! flag; waits see it, stop what they wait for, and the run returns, so
//! every process it started is stopped (bench/compare stops `run` with
//! SIGTERM when it is itself interrupted).
#![allow(unsafe_code)] // signal(2)

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Relaxed: a lone flag; nothing else is published with it.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: signal(2) with a handler that only stores to an atomic,
        // which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Whether a signal asked the run to end.
pub fn interrupted() -> bool {
    // Relaxed: see on_signal.
    INTERRUPTED.load(Ordering::Relaxed)
}
