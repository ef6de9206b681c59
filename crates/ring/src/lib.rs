//! Shared memory for ringswitch ports: netmap's ring layout, ring index
//! arithmetic, the CSB sync protocol and the eventfd doorbells, with the
//! low-level helpers every crate above shares: the epoll set ([`poll`]) and
//! the frame copy ([`copy`]).
//!
//! This crate maps and accesses the port regions (the memfds holding rings,
//! CSB and buffers); the switch, client, daemon and netmap-compat reach them
//! only through the bounds-checked accessors here. It is not the only crate
//! with shared memory: netdev maps its AF_XDP and AF_PACKET rings, vhost
//! maps the guest's memory, and netmap-compat reads the rings an
//! application mapped; each keeps its `unsafe` in its own module.
#![warn(missing_docs)]
// No narrowing cast on a length or an index (issue 15): every conversion
// that can lose bits is checked or goes through a type that cannot.
#![deny(clippy::cast_possible_truncation)]

pub mod arith;
pub mod copy;
pub mod eventfd;
pub mod layout;
pub mod poll;
pub mod region;
pub mod sync;
pub mod vnet_queue;
pub mod wait;

pub use eventfd::EventFd;
pub use layout::{Dir, Geometry, GeometryError, NetmapSlot, RegionLayout};
pub use region::{AdoptReport, CsbRef, Region, RegionError, RingPlace, RingRef};
pub use sync::{AppRing, BadHead, PortRing, Slot, Spinner};
pub use vnet_queue::{VnetRingQueue, VNET_HDR_LEN};
pub use wait::{AdaptiveWait, WaitStats};
