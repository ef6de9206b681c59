//! The one interface every port that is not a netmap ring offers the
//! switch: a queue of frames in both directions.

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use crate::hdr::{Caps, OffloadHdr};
use crate::stage::Stage;

/// Why a queue did not take a frame pushed into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// No room right now (the kernel or the guest has not taken earlier
    /// frames yet): the caller drops and counts the frame, and the rest of
    /// its batch.
    #[error("the queue is full")]
    Full,
    /// The frame can never fit: longer than the queue's frames can be.
    #[error("the frame is too long for this queue")]
    TooLong,
    /// The queue is down (an interface gone, a VM queue not running).
    #[error("the queue is down")]
    Down,
}

/// Something to tell the other side of a queue (a guest's interrupt),
/// decided under the queue's lock and sent after it is released.
pub trait Notify: Send + Sync {
    /// Tells the other side, never blocking.
    fn notify(&self);
}

/// A notification decided under a queue's lock, to send after releasing
/// it: `let wake = q.flush(); drop(q); wake.send();`. Holds a reference,
/// never an allocation.
#[must_use = "a wake-up does nothing until sent"]
#[derive(Default)]
pub struct Wake(Option<Arc<dyn Notify>>);

impl Wake {
    /// Nothing to send.
    pub const NONE: Wake = Wake(None);

    /// A wake-up through `n`.
    pub fn to(n: Arc<dyn Notify>) -> Wake {
        Wake(Some(n))
    }

    /// Whether there is something to send.
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Sends it.
    pub fn send(self) {
        if let Some(n) = self.0 {
            n.notify();
        }
    }
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_some() {
            "Wake(some)"
        } else {
            "Wake(none)"
        })
    }
}

/// What one [`FrameQueue::take_batch`] did.
#[derive(Debug, Default)]
pub struct Taken {
    /// Frames (or descriptor chains) taken from the queue: those put on
    /// the stage (including those it counted as short or long) and those
    /// refused as `malformed`.
    pub frames: usize,
    /// Of those, refused by the queue before they reached the stage (a
    /// guest's bad descriptor chain), to be counted as malformed drops of
    /// the port.
    pub malformed: u64,
    /// To send once the queue's lock is released (the guest's TX
    /// completion interrupt).
    pub wake: Wake,
}

/// Counters a queue keeps itself, cumulative since it was opened, beyond
/// the switch's per-port counters. A kind of queue that has no such thing
/// leaves it at zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Frames the kernel dropped on receive: AF_XDP's `rx_dropped`,
    /// `rx_ring_full` and `rx_fill_ring_empty_descs`, AF_PACKET's
    /// `tp_drops`.
    pub kernel_rx_dropped: u64,
    /// Frames the kernel refused on transmit: AF_XDP's `tx_invalid_descs`,
    /// AF_PACKET's TP_STATUS_WRONG_FORMAT, a TAP write error.
    pub kernel_tx_invalid: u64,
    /// Frames received with a bad or unsupported virtio-net header (TAP),
    /// dropped by the queue and not included in [`Taken::malformed`].
    pub rx_bad_hdr: u64,
    /// A guest's RX descriptor chains refused by validation.
    pub rx_bad_chains: u64,
    /// A guest's available rings whose index ran more than the queue size
    /// ahead.
    pub ring_errors: u64,
    /// Interrupts sent to a guest.
    pub interrupts: u64,
    /// Interrupts dropped (the call eventfd's write would have blocked).
    pub interrupts_dropped: u64,
    /// Times a guest's memory faulted under the device.
    pub guest_faults: u64,
}

/// A queue of frames in both directions: one queue of an interface, one
/// queue pair of a VM. A switch worker serving it takes frames with
/// [`FrameQueue::take_batch`] onto a [`Stage`]; workers delivering to it call
/// [`FrameQueue::push`] per frame and [`FrameQueue::flush`] once per batch.
///
/// A queue is used by one thread at a time (the port keeps it behind a lock
/// taken once per batch). Nothing it reads from its other side (kernel
/// rings, guest memory) is trusted: a bad descriptor is dropped and
/// counted, never followed.
pub trait FrameQueue: Send {
    /// Takes up to `max` frames, copying each with its offload header (all
    /// zero where the other side has none) onto `stage` with
    /// [`Stage::put`] or [`Stage::put_with`], and stops early when that
    /// says the stage is full. The frames' memory goes back to the other
    /// side.
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken;

    /// Whether frames wait to be taken (cheap: at most one read of shared
    /// memory, no system call where the queue has shared rings).
    fn has_work(&self) -> bool;

    /// Whether the queue can take frames at all; frames for a queue that is
    /// not are dropped as link-down without being offered one by one.
    fn is_up(&self) -> bool {
        true
    }

    /// Queues one frame (copied). `hdr` may ask only for the offloads
    /// [`FrameQueue::caps`] allows; the caller does the rest in software.
    fn push(&mut self, hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError>;

    /// Makes the frames pushed since the last flush visible to the other
    /// side (at most one system call or one index store). What it returns
    /// is sent after the queue's lock is released.
    fn flush(&mut self) -> Wake;

    /// Offloads frames given to [`FrameQueue::push`] may carry.
    fn caps(&self) -> Caps;

    /// A descriptor that polls readable while frames wait to be taken, for
    /// the worker's epoll set; never read by the caller. None when the
    /// queue has none right now.
    fn wake_fd(&self) -> Option<RawFd>;

    /// Changes whenever [`FrameQueue::wake_fd`] may have become another
    /// descriptor (a guest's frontend set a new kick, or stopped the
    /// queue): the serving worker then registers it again. Constant for a
    /// queue whose descriptor never changes.
    fn wake_generation(&self) -> u64 {
        0
    }

    /// Whether the wake descriptor is shared with the other side (a guest's
    /// kick eventfd): the worker watches it edge-triggered and never reads
    /// it, since the other side could empty it or make it blocking. A
    /// queue's own descriptor (a socket, a TAP) is watched level-triggered:
    /// readable while frames wait.
    fn wake_is_shared(&self) -> bool {
        false
    }

    /// Before the serving worker sleeps: asks the other side for a wake-up
    /// (once `more` more frames are queued, where it can count them) and
    /// double-checks. Returns true when the worker may sleep, false when
    /// work arrived meanwhile.
    fn prepare_sleep(&mut self, more: u16) -> bool {
        let _ = more;
        true
    }

    /// The serving worker is awake: no wake-ups needed.
    fn set_awake(&mut self) {}

    /// The queue's own counters.
    fn stats(&self) -> QueueStats;

    /// How the queue is driven, for `port-list` and logs (`xdp-native`,
    /// `af-packet`, `tap`, `vhost-user`).
    fn driver(&self) -> &'static str;
}

/// A queue as ports hold it: shared with whoever else drives it (a VM's
/// queue pair with its vhost-user protocol thread), locked once per batch.
pub type SharedQueue = Arc<Mutex<dyn FrameQueue>>;
