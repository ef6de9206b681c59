//! A ring as an application sees it through its own mapping of a port,
//! for the library functions that work on the program's rings the way the
//! program would (nmport_inject, nm_nextpkt, ...). Every offset and index
//! read from the mapping is checked against the mapping's length before it
//! is used, so a corrupted ring yields "no room" or "no packet", never an
//! access outside the mapping.

use std::ptr;

use libc::c_int;
use ringswitch_ring::layout::{
    nifp_field, nifp_ring_ofs, ring_field, slot_field, slot_offset, RING_SLOTS_OFFSET,
};

/// Most rings of a kind counted when locating an RX ring's `ring_ofs[]`
/// entry: a corrupted count cannot send the search far (the entry is
/// checked against the mapping anyway).
const RING_COUNT_BOUND: usize = 64;

/// A program's mapping of a port, as `nm_desc` and `nmport_d` record it:
/// where it lies, its length, and the offset of the port's `netmap_if`.
#[derive(Clone, Copy)]
pub struct MappedPort {
    base: *mut u8,
    memsize: usize,
    nifp: usize,
}

impl MappedPort {
    /// The mapping `base[..memsize]`, its `netmap_if` at offset `nifp`
    /// (only read through [`MappedPort::ring`], which checks everything).
    ///
    /// # Safety
    /// `base` is a live mapping of at least `memsize` bytes, which stays
    /// mapped while the result and the rings from it are used.
    pub unsafe fn new(base: *mut libc::c_void, memsize: usize, nifp: usize) -> MappedPort {
        MappedPort {
            base: base.cast(),
            memsize,
            nifp,
        }
    }

    /// Ring `ri` of `side`; None when the mapping does not hold it.
    pub fn ring(&self, side: Side, ri: u16) -> Option<MappedRing> {
        MappedRing::new(self, side, ri)
    }
}

/// The bound rings `first..=last` in the order the library's helpers try
/// them: from `cur` (brought into the span) round to the one before it.
/// Empty when nothing is bound (`first > last`).
pub fn rings_from(first: u16, last: u16, cur: u16) -> impl Iterator<Item = u16> {
    let start = if first <= last {
        cur.clamp(first, last)
    } else {
        first
    };
    (start..=last).chain(first..start)
}

/// Copies one frame into the first of the bound TX rings `first..=last`
/// with room, trying them from `*cur` round (nm_inject, nmport_inject);
/// `*cur` becomes the ring it went into. Returns `size`, or 0 when no ring
/// has room or the frame does not fit a buffer. Does not sync.
///
/// # Safety
/// `buf` has `size` readable bytes.
pub unsafe fn inject(
    port: &MappedPort,
    (first, last): (u16, u16),
    cur: &mut u16,
    buf: *const u8,
    size: usize,
) -> c_int {
    for ri in rings_from(first, last, *cur) {
        let Some(ring) = port.ring(Side::Tx, ri) else {
            continue;
        };
        // SAFETY: `buf` has `size` readable bytes, per the contract.
        if let Some(n) = unsafe { inject_into(&ring, buf, size) } {
            *cur = ri;
            return n;
        }
    }
    0
}

/// Copies one frame into the slot at `cur` of `ring` and moves head and
/// cur past it; None when the ring has no room or the frame does not fit.
///
/// # Safety
/// `buf` has `size` readable bytes.
unsafe fn inject_into(ring: &MappedRing, buf: *const u8, size: usize) -> Option<c_int> {
    if ring.space() == 0 || size > ring.buf_size() as usize || size > u16::MAX as usize {
        return None;
    }
    let cur = ring.cur()?;
    let (slot, dst) = ring.slot(cur)?;
    // SAFETY: `dst` has buf_size bytes inside the mapping (checked by
    // `slot`); the caller's `buf` has `size` readable bytes.
    unsafe { ptr::copy_nonoverlapping(buf, dst, size) };
    ring.set_len(slot, size as u16);
    ring.release_to(ring.next(cur));
    Some(size as c_int)
}

/// One ring of a mapped port.
pub struct MappedRing {
    base: *mut u8,
    memsize: usize,
    ring: usize,
    num: u32,
    bsize: u32,
    buf_ofs: i64,
}

/// Direction of a ring in the `netmap_if`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// TX rings.
    Tx,
    /// RX rings.
    Rx,
}

impl MappedRing {
    /// Ring `ri` of `side`, from the `netmap_if` of `port`.
    fn new(port: &MappedPort, side: Side, ri: u16) -> Option<MappedRing> {
        let MappedPort {
            base,
            memsize,
            nifp,
        } = *port;
        let rd32 = |off: usize| -> Option<u32> {
            (off.checked_add(4)? <= memsize)
                // SAFETY: inside the mapping, checked (live per
                // `MappedPort::new`'s contract).
                .then(|| unsafe { ptr::read_volatile(base.add(off) as *const u32) })
        };
        let slot = match side {
            Side::Tx => ri as usize,
            Side::Rx => {
                let tx = rd32(nifp + nifp_field::TX_RINGS)? as usize;
                let host_tx = rd32(nifp + nifp_field::HOST_TX_RINGS)? as usize;
                ri as usize + tx.min(RING_COUNT_BOUND) + host_tx.min(RING_COUNT_BOUND)
            }
        };
        let at = nifp + nifp_ring_ofs(slot);
        if at + 8 > memsize {
            return None;
        }
        // SAFETY: inside the mapping, checked.
        let rel = unsafe { ptr::read_volatile(base.add(at) as *const i64) };
        if rel == 0 {
            return None;
        }
        let ring = usize::try_from((nifp as i64).checked_add(rel)?).ok()?;
        if ring.checked_add(RING_SLOTS_OFFSET)? > memsize {
            return None;
        }
        // SAFETY: the header lies inside the mapping, checked.
        let buf_ofs =
            unsafe { ptr::read_volatile(base.add(ring + ring_field::BUF_OFS) as *const i64) };
        let num = rd32(ring + ring_field::NUM_SLOTS)?;
        let bsize = rd32(ring + ring_field::NR_BUF_SIZE)?;
        if num == 0 || bsize == 0 || ring + slot_offset(num) > memsize {
            return None;
        }
        Some(MappedRing {
            base,
            memsize,
            ring,
            num,
            bsize,
            buf_ofs,
        })
    }

    /// The ring's header (`struct netmap_ring`) in the mapping.
    pub fn header(&self) -> *mut u8 {
        // SAFETY: the header lies inside the mapping (checked in `new`).
        unsafe { self.base.add(self.ring) }
    }

    fn field(&self, off: usize) -> u32 {
        // SAFETY: header fields lie inside the mapping (checked in `new`).
        unsafe { ptr::read_volatile(self.base.add(self.ring + off) as *const u32) }
    }

    fn set_field(&self, off: usize, v: u32) {
        // SAFETY: as `field`.
        unsafe { ptr::write_volatile(self.base.add(self.ring + off) as *mut u32, v) }
    }

    /// Buffer size.
    pub fn buf_size(&self) -> u32 {
        self.bsize
    }

    /// `cur`, if in range.
    pub fn cur(&self) -> Option<u32> {
        Some(self.field(ring_field::CUR)).filter(|&c| c < self.num)
    }

    /// Slots from cur to tail.
    pub fn space(&self) -> u32 {
        let (Some(cur), tail) = (self.cur(), self.field(ring_field::TAIL)) else {
            return 0;
        };
        if tail >= self.num {
            return 0;
        }
        if tail >= cur {
            tail - cur
        } else {
            tail + self.num - cur
        }
    }

    fn slot_at(&self, i: u32) -> *mut u8 {
        // SAFETY: `i < num`, and the slots lie inside the mapping.
        unsafe { self.base.add(self.ring + slot_offset(i)) }
    }

    /// Slot `i`'s address and its buffer's, if the buffer lies inside the
    /// mapping.
    pub fn slot(&self, i: u32) -> Option<(*mut u8, *mut u8)> {
        if i >= self.num {
            return None;
        }
        let s = self.slot_at(i);
        // SAFETY: the slot lies inside the mapping.
        let idx = unsafe { ptr::read_volatile(s.add(slot_field::BUF_IDX) as *const u32) };
        let at = (self.ring as i64)
            .checked_add(self.buf_ofs)?
            .checked_add(idx as i64 * self.bsize as i64)?;
        let at = usize::try_from(at).ok()?;
        if at.checked_add(self.bsize as usize)? > self.memsize {
            return None;
        }
        // SAFETY: inside the mapping, checked.
        Some((s, unsafe { self.base.add(at) }))
    }

    /// Slot `i`'s length, at most the buffer size.
    pub fn len(&self, slot: *mut u8) -> u16 {
        // SAFETY: `slot` came from `slot()`.
        let l = unsafe { ptr::read_volatile(slot.add(slot_field::LEN) as *const u16) };
        l.min(self.bsize.min(u16::MAX as u32) as u16)
    }

    /// Sets slot length and clears its flags.
    pub fn set_len(&self, slot: *mut u8, len: u16) {
        // SAFETY: `slot` came from `slot()`.
        unsafe {
            ptr::write_volatile(slot.add(slot_field::LEN) as *mut u16, len);
            ptr::write_volatile(slot.add(slot_field::FLAGS) as *mut u16, 0);
        }
    }

    /// The slot after `i`.
    pub fn next(&self, i: u32) -> u32 {
        if i + 1 >= self.num {
            0
        } else {
            i + 1
        }
    }

    /// Moves head and cur to `i`.
    pub fn release_to(&self, i: u32) {
        self.set_field(ring_field::HEAD, i);
        self.set_field(ring_field::CUR, i);
    }
}
