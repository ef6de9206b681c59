//! SIGINT/SIGTERM turn into a flag that long-running commands poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::Release);
}

/// Installs the handlers (idempotent) and returns a flag that becomes true
/// on the first SIGINT or SIGTERM.
pub fn install() -> std::io::Result<Arc<AtomicBool>> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; we set a handler that only
        // performs an atomic store, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    // Mirror the process-wide flag into the returned one.
    std::thread::Builder::new()
        .name("rs-signals".into())
        .stack_size(64 * 1024)
        .spawn(move || loop {
            if STOP.load(Ordering::Acquire) {
                f.store(true, Ordering::Release);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        })?;
    Ok(flag)
}

/// Whether a stop signal arrived.
pub fn stopping() -> bool {
    STOP.load(Ordering::Acquire)
}
