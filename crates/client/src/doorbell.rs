//! How a client wakes the other side of a ring: an eventfd on the host, or
//! the doorbell register of the guest's ivshmem device when the port is
//! passed through into a VM.

use std::io;
use std::sync::Arc;

use ringswitch_ring::EventFd;

use crate::passthrough::Device;

/// A wake-up for the port side (the switch worker, or a pipe's other end).
pub(crate) enum Doorbell {
    /// Write the eventfd.
    EventFd(EventFd),
    /// Ring the ivshmem doorbell with this value (`peer << 16 | vector`).
    Device(Arc<Device>, u32),
}

impl Doorbell {
    /// Rings it.
    #[inline]
    pub(crate) fn signal(&self) {
        match self {
            Doorbell::EventFd(e) => e.signal(),
            Doorbell::Device(d, v) => d.kick(*v),
        }
    }

    /// [`Doorbell::signal`], timed: what ringing it cost the caller (see
    /// `EventFd::signal_timed`).
    pub(crate) fn signal_timed(&self) -> std::time::Duration {
        let t0 = std::time::Instant::now();
        self.signal();
        t0.elapsed()
    }

    /// Another handle on the same doorbell.
    pub(crate) fn try_clone(&self) -> io::Result<Doorbell> {
        Ok(match self {
            Doorbell::EventFd(e) => Doorbell::EventFd(e.try_clone()?),
            Doorbell::Device(d, v) => Doorbell::Device(d.clone(), *v),
        })
    }
}
