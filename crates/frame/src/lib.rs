//! Frames and the queues that carry them.
//!
//! Every port that is not a netmap ring (a VM's virtio-net queue pair, a
//! NIC's or a TAP's queue, and later tunnels) offers the switch the same
//! shape: a [`FrameQueue`]. The switch takes a batch of frames from it, each
//! with its [`OffloadHdr`]; pushes frames into it, asking only for the
//! offloads its [`Caps`] allow; flushes once per batch; and, to sleep,
//! watches its wake descriptor.
//!
//! - [`hdr`]: the offload fields of a virtio-net header ([`OffloadHdr`]) and
//!   what a destination accepts ([`Caps`]). What must be done in software
//!   between the two is the `ringswitch-offload` crate's business.
//! - [`queue`]: the [`FrameQueue`] trait and the [`Wake`] a flush returns,
//!   to send once the queue's lock is released.
//! - [`stage`]: the [`Stage`] a queue copies the frames it hands over onto,
//!   one concrete type so that no frame costs a call through a pointer.
//! - [`nic`]: how a NIC's queues are opened ([`NicMode`]), shared by the
//!   control protocol and the interface layer.
//!
//! What this crate deliberately is not: it knows nothing of rings, guests or
//! sockets, has no `unsafe` code and no dependency but `thiserror` (and
//! `serde`, only with the feature of that name).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod hdr;
pub mod nic;
pub mod queue;
pub mod stage;

pub use hdr::{
    Caps, HeaderTooShort, OffloadHdr, F_DATA_VALID, F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4,
    GSO_TCPV6, GSO_UDP, GSO_UDP_L4,
};
pub use nic::NicMode;
pub use queue::{FrameQueue, Notify, PushError, QueueStats, SharedQueue, Taken, Wake};
pub use stage::{Stage, Staged, FRAME_MAX, FRAME_MIN, STAGE_BYTES};
