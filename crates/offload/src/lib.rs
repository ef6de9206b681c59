//! Software fallbacks for virtio-net offloads.
//!
//! A guest that negotiated checksum offload (`VIRTIO_NET_F_CSUM`) or TCP
//! segmentation offload (`HOST_TSO4`, `HOST_TSO6`) hands the switch frames
//! that are not finished: a TCP or UDP checksum that holds only the
//! pseudo-header sum, or one TCP segment of up to 64 KiB that the wire would
//! carry as many. A destination that accepts such frames as they are (a VM
//! that negotiated `GUEST_CSUM`, `GUEST_TSO4`, ...) gets them unchanged. Every
//! other destination (a netmap ring port, a VM without the feature) needs them
//! finished in software first, and that is what this crate does:
//!
//! - [`plan`] compares what a sender's [`OffloadHdr`] asks for with what a
//!   destination accepts ([`Caps`]; both types live in `ringswitch-frame`) and says what must be done ([`Action`]).
//! - [`complete_checksum`] fills in a partial checksum in place.
//! - [`Segmenter`] cuts a TCP or UDP GSO frame into MSS-sized frames with every
//!   header fixed up and every checksum complete.
//! - [`checksum`] holds the one's complement sum these are built on.
//!
//! What this crate deliberately is not: it knows nothing of virtqueues, rings
//! or the vhost crate (the switch converts its virtio-net header into an
//! [`OffloadHdr`]); it does not verify checksums a sender claims are valid;
//! it does not fragment UDP (UFO is deprecated and refused; USO, which cuts
//! a UDP payload into datagrams, is done) or segment IPv6 frames
//! with extension headers.
//!
//! Everything it reads comes from a guest and is untrusted: every offset and
//! length is checked before use, bad input returns an [`OffloadError`], and no
//! input makes it panic or index out of bounds. It has no `unsafe` code and
//! allocates only when a [`Segmenter`] is created.

#![warn(missing_docs)]
// No narrowing cast on a length or an index (issue 15): every conversion
// that can lose bits is checked or goes through a type that cannot.
#![deny(clippy::cast_possible_truncation)]
#![forbid(unsafe_code)]

#[cfg(doc)]
use ringswitch_frame::Caps;

pub mod checksum;
mod error;
mod hdr;
mod parse;
mod segment;

pub use checksum::complete_checksum;
pub use error::{Layer, OffloadError};
pub use hdr::{plan, Action};
pub use segment::{segment_count, Segmenter, SCRATCH_LEN};

use ringswitch_frame::OffloadHdr;

/// Checks once, where a frame enters the switch, everything about its
/// offload request that could make a later step fail for one destination
/// and not another: the header ([`plan`]'s checks), the checksum field
/// inside the frame for a partial checksum, and the headers a GSO frame is
/// cut by ([`segment_count`]). Returns how many segments a GSO frame makes
/// (1 for any other frame). A frame that passes is handled by
/// [`complete_checksum`] and [`Segmenter::segment`] without error.
pub fn check(frame: &[u8], hdr: &OffloadHdr) -> Result<usize, OffloadError> {
    let request = hdr::request(hdr)?;
    if request.gso != hdr::Gso::None {
        return segment_count(frame, hdr);
    }
    if request.needs_csum {
        let (start, offset) = (usize::from(hdr.csum_start), usize::from(hdr.csum_offset));
        // The field's two bytes lie inside the frame (no overflow: both
        // offsets are 16-bit).
        if start + offset + 2 > frame.len() {
            return Err(OffloadError::ChecksumOutOfBounds {
                csum_start: start,
                csum_offset: offset,
                len: frame.len(),
            });
        }
    }
    Ok(1)
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)]
mod tests;
