//! netmap compatibility for ringswitch.
//!
//! This library makes netmap programs run on ringswitch:
//!
//! - **Recompiled**: build against `include/netmap` (`net/netmap.h`,
//!   `net/netmap_user.h`, `libnetmap.h`) and link `-lringswitch_netmap`
//!   instead of `-lnetmap`. libnetmap's port API (`nmport_open`, ...) is
//!   here, and so is the `/dev/netmap` emulation the program's own `ioctl`
//!   and `poll` calls reach.
//! - **Unmodified**: `LD_PRELOAD=libringswitch_netmap.so ./program`.
//!
//! Either way the library defines `open`, `ioctl`, `mmap`, `close`, `poll`,
//! `select` and `epoll_*` ahead of the C library. A call on anything but
//! `/dev/netmap` or a descriptor it returned goes straight to the C library
//! after one table look-up. On an emulated descriptor:
//!
//! - `open("/dev/netmap")` connects to the daemon and returns an epoll set
//!   (the port's interrupts land in it once registered);
//! - `ioctl(NIOCCTRL)` with REGISTER (with the ring and slot counts it asks
//!   for), PORT_INFO_GET, PORT_HDR_SET and PORT_HDR_GET, legacy `NIOCREGIF`
//!   and `NIOCGINFO`, `NIOCTXSYNC`, `NIOCRXSYNC` (which also copy
//!   NS_INDIRECT slots in and carry a switch port's virtio-net header,
//!   `frames`);
//! - `mmap` maps the port's memfd: netmap's layout, byte for byte (and
//!   `munmap` forgets the mapping, which otherwise follows a switch port
//!   that reconnects to a new daemon: the same addresses, the new memory);
//! - `poll`/`select`/`epoll_wait` sync the rings as netmap's poll does and
//!   sleep with the CSB's double check, so no wake-up is lost;
//! - `close` closes the port.
//!
//! Syncs read head and cur from the ring header the program wrote, validate
//! them (out-of-range values reset the ring to its last valid state, as
//! netmap's ring reinit does) and drive the CSB protocol of the client
//! library.

#![warn(missing_docs)]

pub mod abi;
mod dev;
mod epoll;
pub mod file;
mod frames;
mod interpose;
pub mod legacy;
mod mapped;
mod memid;
pub mod nmport;
mod real;
mod remap;
mod state;
mod table;

/// An errno with the sentence that explains it.
#[derive(Debug)]
pub struct Errno {
    /// The errno value.
    pub errno: i32,
    /// What went wrong, for people.
    pub message: String,
}

impl Errno {
    /// An errno with a message.
    pub fn with(errno: i32, message: String) -> Errno {
        Errno { errno, message }
    }

    /// The current errno, after a failed system call.
    pub fn last(what: &str) -> Errno {
        Self::io(std::io::Error::last_os_error(), what)
    }

    /// From an I/O error.
    pub fn io(e: std::io::Error, what: &str) -> Errno {
        Errno {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            message: format!("{what}: {e}"),
        }
    }

    /// Sets errno, tells the user why (unless RINGSWITCH_NETMAP_QUIET is
    /// set), and returns -1.
    pub fn fail(self) -> i32 {
        report(&self.message);
        set_errno(self.errno);
        -1
    }
}

/// Writes a line to standard error: a program run unchanged on ringswitch
/// has no other way to say why an open or a registration failed.
fn report(msg: &str) {
    if std::env::var_os("RINGSWITCH_NETMAP_QUIET").is_none() {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "ringswitch-netmap: {msg}");
    }
}

/// Sets the calling thread's errno.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f`, turning a panic into `fail` (errno EIO): no panic crosses into
/// the C caller.
pub(crate) fn guard<T>(fail: T, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            set_errno(libc::EIO);
            fail
        }
    }
}
