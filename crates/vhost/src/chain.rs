//! Descriptor chain validation.
//!
//! virtio-queue's `DescriptorChain` iterator ends silently on a bad `next`
//! index, an unreadable descriptor or an exhausted loop budget, so a caller
//! cannot tell a truncated chain from a complete one. This walker reports
//! every failure, so a bad chain is completed with length 0 and counted
//! instead of being half-used.
//!
//! Checks, in order, for each descriptor: index inside the current table,
//! the chain-length bound (which also ends loops), the descriptor readable,
//! indirect rules (negotiated, not nested, not combined with NEXT, table
//! length a nonzero multiple of 16 and inside guest memory), nonzero length,
//! direction (all device-readable for TX, all device-writable for RX), the
//! buffer inside one guest memory region, and the chain's byte bound.

use virtio_queue::desc::split::Descriptor;
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

/// Most buffer descriptors accepted in one chain (Linux sends at most
/// MAX_SKB_FRAGS + 2 = 19 for one frame).
pub const CHAIN_DESCS_MAX: usize = 64;
/// Most bytes accepted in one chain: a 64 KiB TSO frame plus its headers.
pub const CHAIN_BYTES_MAX: u64 = 65_536 + 1024;

/// One validated buffer: `len` bytes at guest address `addr`, inside one
/// region of guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    /// Guest physical address.
    pub addr: GuestAddress,
    /// Length in bytes, nonzero.
    pub len: u32,
}

/// Why a chain was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// A head or `next` index outside the descriptor table.
    #[error("descriptor index outside the table")]
    IndexOutOfRange,
    /// More than [`CHAIN_DESCS_MAX`] descriptors, or a loop.
    #[error("chain too long or looping")]
    TooLong,
    /// The descriptor table entry is not in guest memory.
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

/// Walks the chain starting at `head` in the split-ring descriptor table at
/// `table` (`table_len` entries), appending its buffers to `out` (cleared
/// first). Returns the chain's total length. `out` never grows past
/// [`CHAIN_DESCS_MAX`] entries, so a caller that reserved that capacity
/// never allocates here.
pub fn walk(
    mem: &GuestMemoryMmap,
    table: GuestAddress,
    table_len: u16,
    head: u16,
    indirect_ok: bool,
    writable: bool,
    out: &mut Vec<Seg>,
) -> Result<u64, ChainError> {
    out.clear();
    let mut table = table;
    let mut table_len = table_len;
    let mut index = head;
    let mut in_indirect = false;
    let mut total: u64 = 0;
    // Bounds both the buffers and the indirect hop; a loop hits it too.
    for _ in 0..=CHAIN_DESCS_MAX {
        if index >= table_len {
            return Err(ChainError::IndexOutOfRange);
        }
        let addr = table
            .checked_add(u64::from(index) * 16)
            .ok_or(ChainError::Unreadable)?;
        let desc: Descriptor = mem.read_obj(addr).map_err(|_| ChainError::Unreadable)?;
        if desc.refers_to_indirect_table() {
            if !indirect_ok || in_indirect || desc.has_next() || !out.is_empty() {
                return Err(ChainError::BadIndirect);
            }
            let len = desc.len();
            if len == 0 || !len.is_multiple_of(16) || len / 16 > u32::from(u16::MAX) {
                return Err(ChainError::BadIndirect);
            }
            if !in_memory(mem, desc.addr(), len) {
                return Err(ChainError::BadIndirect);
            }
            table = desc.addr();
            // Fits: checked against u16::MAX just above.
            table_len = (len / 16) as u16;
            index = 0;
            in_indirect = true;
            continue;
        }
        if desc.len() == 0 {
            return Err(ChainError::ZeroLength);
        }
        if desc.is_write_only() != writable {
            return Err(ChainError::WrongDirection);
        }
        if !in_memory(mem, desc.addr(), desc.len()) {
            return Err(ChainError::OutOfBounds);
        }
        total += u64::from(desc.len());
        if total > CHAIN_BYTES_MAX {
            return Err(ChainError::TooManyBytes);
        }
        if out.len() == CHAIN_DESCS_MAX {
            return Err(ChainError::TooLong);
        }
        out.push(Seg {
            addr: desc.addr(),
            len: desc.len(),
        });
        if !desc.has_next() {
            return Ok(total);
        }
        index = desc.next();
    }
    Err(ChainError::TooLong)
}

/// Is `[addr, addr + len)` inside one region of `mem`?
fn in_memory(mem: &GuestMemoryMmap, addr: GuestAddress, len: u32) -> bool {
    mem.get_slice(addr, len as usize).is_ok()
}
