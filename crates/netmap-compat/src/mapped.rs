//! A ring as an application sees it through its own mapping of a port,
//! for the library functions that work on the program's rings the way the
//! program would (nmport_inject, nm_nextpkt, ...). Every offset and index
//! read from the mapping is checked against the mapping's length before it
//! is used, so a corrupted ring yields "no room" or "no packet", never an
//! access outside the mapping.

use std::ptr;

use ringswitch_ring::layout::{
    nifp_field, nifp_ring_ofs, ring_field, slot_field, slot_offset, RING_SLOTS_OFFSET,
};

/// Most rings of a kind counted when locating an RX ring's `ring_ofs[]`
/// entry: a corrupted count cannot send the search far (the entry is
/// checked against the mapping anyway).
const RING_COUNT_BOUND: usize = 64;

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
    /// Ring `ri` of `side`, from the `netmap_if` at `nifp` in the mapping
    /// `base[..memsize]`.
    ///
    /// # Safety
    /// `base` is a live mapping of at least `memsize` bytes, which stays
    /// mapped while the result is used.
    pub unsafe fn new(
        base: *mut u8,
        memsize: usize,
        nifp: usize,
        side: Side,
        ri: u16,
    ) -> Option<MappedRing> {
        let rd32 = |off: usize| -> Option<u32> {
            (off.checked_add(4)? <= memsize)
                // SAFETY: inside the mapping, checked.
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
