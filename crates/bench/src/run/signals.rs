//! SIGINT, SIGTERM and SIGHUP end a run cleanly: the handler only records
//! the signal; waits see it, stop what they wait for, and the run returns,
//! so every process it started is stopped and every machine setting it
//! changed is put back.
#![allow(unsafe_code)] // signal(2)

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked the run to end, 0 while none has.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Relaxed: a lone value; nothing else is published with it.
    SIGNAL.store(sig, Ordering::Relaxed);
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
    received().is_some()
}

/// The signal that asked the run to end, if one has.
pub fn received() -> Option<i32> {
    // Relaxed: see on_signal.
    let sig = SIGNAL.load(Ordering::Relaxed);
    (sig != 0).then_some(sig)
}
