//! Shared memory for ringswitch ports: netmap's ring layout, ring index
//! arithmetic, the CSB sync protocol and the eventfd doorbells.
//!
//! This is the one crate that touches shared memory with `unsafe`; everything
//! above it uses the bounds-checked accessors here.
#![warn(missing_docs)]
// No narrowing cast on a length or an index (issue 15): every conversion
// that can lose bits is checked or goes through a type that cannot.
#![deny(clippy::cast_possible_truncation)]

pub mod arith;
pub mod eventfd;
pub mod layout;
pub mod region;
pub mod sync;

pub use eventfd::EventFd;
pub use layout::{Dir, Geometry, GeometryError, NetmapSlot, RegionLayout};
pub use region::{CsbRef, Region, RegionError, RingPlace, RingRef};
pub use sync::{AppRing, BadHead, PortRing, Slot, Spinner};
