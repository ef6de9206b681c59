//! Descriptor chain validation.
//!
//! virtio-queue's `DescriptorChain` iterator ends silently on a bad `next`
//! index, an unreadable descriptor or an exhausted loop budget, so a caller
//! cannot tell a truncated chain from a complete one. This walker reports
//! every failure, so a bad chain is completed with length 0 and counted
//! instead of being half-used.
//!
//! Checks, in order, for each descriptor: index inside the current table,
//! the chain-length bound (which also ends loops), indirect rules
//! (negotiated, not nested, not combined with NEXT, table length a nonzero
//! multiple of 16 and inside one guest memory region), nonzero length,
//! direction (all device-readable for TX, all device-writable for RX), the
//! buffer inside one guest memory region, and the chain's byte bound. A
//! lone descriptor (no NEXT, not indirect: the usual frame) takes a short
//! path with the same checks in the same order.
//!
//! Each descriptor is read from guest memory once, into a local, and only
//! that copy is checked and used: the guest cannot change a field between
//! its check and its use. The vring's table was checked to lie inside one
//! memory region when the vring started; an indirect table is checked the
//! same way when its descriptor is met.

use virtio_bindings::virtio_ring;

use crate::flag16;

pub use crate::guest::Seg;
use crate::guest::{Desc, DescTable, GuestMap};

const VRING_DESC_F_NEXT: u16 = flag16(virtio_ring::VRING_DESC_F_NEXT);
const VRING_DESC_F_WRITE: u16 = flag16(virtio_ring::VRING_DESC_F_WRITE);
const VRING_DESC_F_INDIRECT: u16 = flag16(virtio_ring::VRING_DESC_F_INDIRECT);

/// Most buffer descriptors accepted in one chain (Linux sends at most
/// MAX_SKB_FRAGS + 2 = 19 for one frame).
pub const CHAIN_DESCS_MAX: usize = 64;
/// Most bytes accepted in one chain: a 64 KiB TSO frame plus its headers.
pub const CHAIN_BYTES_MAX: u64 = 65_536 + 1024;

/// Why a chain was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// A head or `next` index outside the descriptor table.
    #[error("descriptor index outside the table")]
    IndexOutOfRange,
    /// More than [`CHAIN_DESCS_MAX`] descriptors, or a loop.
    #[error("chain too long or looping")]
    TooLong,
    /// The descriptor table entry is not in guest memory. Not produced
    /// since tables are checked whole (a vring's when it starts, an
    /// indirect one when met, as [`ChainError::BadIndirect`]); kept for
    /// callers that match on it.
    #[error("descriptor not readable")]
    Unreadable,
    /// An indirect descriptor that breaks the rules.
    #[error("bad indirect descriptor")]
    BadIndirect,
    /// A descriptor of length 0.
    #[error("zero-length descriptor")]
    ZeroLength,
    /// A writable descriptor in a TX chain or a readable one in an RX chain.
    #[error("descriptor with the wrong direction")]
    WrongDirection,
    /// A buffer not inside one region of guest memory.
    #[error("buffer outside guest memory")]
    OutOfBounds,
    /// More than [`CHAIN_BYTES_MAX`] bytes.
    #[error("chain longer than the byte bound")]
    TooManyBytes,
}

/// Walks the chain starting at `head` in the descriptor table `ring` (a
/// started vring's, already inside one memory region), appending its
/// buffers to `out` (cleared first). Returns the chain's total length.
/// `out` never grows past [`CHAIN_DESCS_MAX`] entries, so a caller that
/// reserved that capacity never allocates here. Inlined into its two
/// callers (TX drain, RX fill): it runs once per frame.
#[inline]
pub(crate) fn walk(
    mem: &GuestMap,
    ring: DescTable<'_>,
    head: u16,
    indirect_ok: bool,
    writable: bool,
    out: &mut Vec<Seg>,
) -> Result<u64, ChainError> {
    out.clear();
    // The common case first: one direct descriptor, no NEXT. Same checks,
    // same order, as the loop below.
    let first = ring.get(head).ok_or(ChainError::IndexOutOfRange)?;
    let chained = VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT;
    if first.flags & chained == 0 {
        let seg = buffer(mem, &first, writable)?;
        if u64::from(first.len) > CHAIN_BYTES_MAX {
            return Err(ChainError::TooManyBytes);
        }
        out.push(seg);
        return Ok(u64::from(first.len));
    }
    let mut table = ring;
    let mut index = head;
    let mut in_indirect = false;
    let mut total: u64 = 0;
    // Bounds both the buffers and the indirect hop; a loop hits it too.
    for _ in 0..=CHAIN_DESCS_MAX {
        // Checks the index against the table, then reads the entry once.
        let desc = table.get(index).ok_or(ChainError::IndexOutOfRange)?;
        if desc.flags & VRING_DESC_F_INDIRECT != 0 {
            if !indirect_ok || in_indirect || desc.flags & VRING_DESC_F_NEXT != 0 || !out.is_empty()
            {
                return Err(ChainError::BadIndirect);
            }
            let len = desc.len;
            if len == 0 || !len.is_multiple_of(16) {
                return Err(ChainError::BadIndirect);
            }
            let count = u16::try_from(len / 16).map_err(|_| ChainError::BadIndirect)?;
            table = mem
                .desc_table(desc.addr, count)
                .ok_or(ChainError::BadIndirect)?;
            index = 0;
            in_indirect = true;
            continue;
        }
        let seg = buffer(mem, &desc, writable)?;
        total += u64::from(desc.len);
        if total > CHAIN_BYTES_MAX {
            return Err(ChainError::TooManyBytes);
        }
        if out.len() == CHAIN_DESCS_MAX {
            return Err(ChainError::TooLong);
        }
        out.push(seg);
        if desc.flags & VRING_DESC_F_NEXT == 0 {
            return Ok(total);
        }
        index = desc.next;
    }
    Err(ChainError::TooLong)
}

/// The buffer a direct descriptor names, checked: not empty, in the
/// chain's direction (`writable`), inside one region of guest memory.
#[inline(always)]
fn buffer(mem: &GuestMap, desc: &Desc, writable: bool) -> Result<Seg, ChainError> {
    if desc.len == 0 {
        return Err(ChainError::ZeroLength);
    }
    if (desc.flags & VRING_DESC_F_WRITE != 0) != writable {
        return Err(ChainError::WrongDirection);
    }
    mem.seg(desc.addr, desc.len).ok_or(ChainError::OutOfBounds)
}
