//! The device side of a vhost-user virtio-net device, shaped for a
//! run-to-completion switch worker.
//!
//! - [`VirtioNetPort`]: the data path of one queue pair. The switch worker
//!   that serves it drains the guest's TX queue itself ([`VirtioNetPort::tx_batch`]),
//!   copies into the guest's RX buffers ([`VirtioNetPort::rx_push`]),
//!   interrupts once per batch and only when the guest asked (EVENT_IDX),
//!   and turns TX kicks off while busy and back on, double-checked, before
//!   it sleeps. It polls [`VirtioNetPort::tx_kick_fd`] in its own epoll set.
//! - [`VhostUserNet`]: the protocol side, a handler for the `vhost` crate's
//!   `BackendReqHandler`, which configures the ports from the frontend's
//!   messages (memory table mapped once, vrings, features).
//! - `VirtioNetPort` is the switch's [`ringswitch_frame::FrameQueue`] for a
//!   VM: the queue module maps the trait onto the calls above.
//! - [`socket`]: server and client mode for the vhost-user socket.
//! - [`chain`]: descriptor chain validation; a bad chain is completed with
//!   length 0 and counted, never a panic.
//! - [`fault`]: guest memory a frontend shrinks under the device faults
//!   into an error for that device (a SIGBUS handler over registered
//!   ranges), never a crash of the process.
//! - [`log`]: the frontend's dirty page log while it migrates the guest:
//!   every write into guest memory is marked in it.
//! - [`notify`]: kick and call descriptors must be non-blocking eventfds;
//!   interrupts are sent after the pair's lock is released.
//! - `testing` (feature `test-support`): a mock guest driver for the
//!   examples that measure the VM data path; no part of the device.
//!
//! Why not `vhost-user-backend`'s daemon: its `VhostUserDaemon` owns the
//! threads that wait on the kick eventfds and calls the device back from
//! them, with each vring behind its own lock. The switch needs the opposite:
//! its worker owns the wake-up, the drain and the copy into every
//! destination in one pass. This crate therefore uses the `vhost` crate's
//! protocol layer with its own backend; DESIGN.md has the whole reasoning.

#![deny(clippy::cast_possible_truncation)]

pub mod chain;
pub mod device;
pub mod fault;
mod guest;
pub mod hdr;
pub mod log;
pub mod notify;
pub mod port;
mod queue;
pub mod socket;
#[cfg(feature = "test-support")]
pub mod testing;

pub use device::{NetConfig, VhostUserNet};
pub use guest::GuestMemory;
pub use hdr::VirtioNetHdr;
pub use notify::Interrupt;
pub use port::{PortStats, QueueKind, RxCaps, RxError, TxFrame, VirtioNetPort};

// Re-exported so users name the same memory type this crate maps, and the
// protocol errors its connections end with.
/// The `vhost` crate's protocol module, for handler traits.
pub use vhost::vhost_user;
pub use vhost::vhost_user::Error as VhostError;
pub use vm_memory;

/// A virtio flag constant (bindgen makes them u32) as the u16 of the
/// ring fields it belongs in; refuses to compile if it does not fit.
pub(crate) const fn flag16(f: u32) -> u16 {
    let [lo, hi, 0, 0] = f.to_le_bytes() else {
        panic!("flag does not fit in 16 bits");
    };
    u16::from_le_bytes([lo, hi])
}

/// Rate limit for logs a frontend can trigger: true at most once a second
/// per `last` (the second of the last log).
pub fn log_allowed(last: &std::sync::atomic::AtomicU64) -> bool {
    use std::sync::OnceLock;
    use std::time::Instant;
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let now = EPOCH.get_or_init(Instant::now).elapsed().as_secs();
    // Relaxed: a rate limit; two threads racing may both log, harmlessly.
    last.swap(now, std::sync::atomic::Ordering::Relaxed) != now
}
