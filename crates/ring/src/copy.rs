//! Copying frame bytes between memories another party may write at any
//! time (a port's region, a guest's memory): the one copy routine of the
//! data path, shared by the switch's ring copies and vhost's guest copies,
//! and the one prefetch hint the data path uses before such reads.

/// Hints the CPU to fetch the cache line holding `p` (for reading, into
/// every level): the data path's one prefetch. Any address will do: a
/// prefetch accesses no memory architecturally and never faults.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: _mm_prefetch only hints the cache; it reads nothing the
    // program can see and cannot fault, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Copies exactly `len` bytes from `src` to `dst`. Short frames and headers
/// (the common case on a switch) are moved with two fixed-size, possibly
/// overlapping, loads and stores of the largest power of two that fits
/// (up to 64 bytes) instead of a call to memcpy; longer ranges call memcpy.
/// Nothing outside `[0, len)` of either range is read or written, though a
/// byte in it may be read and written twice, which is harmless since the
/// ranges do not overlap each other. A concurrent write by another party
/// to either range only garbles the bytes copied.
///
/// # Safety
/// `src` is valid for reads and `dst` for writes of `len` bytes, and the
/// two ranges do not overlap.
#[inline(always)]
pub unsafe fn copy_exact(src: *const u8, dst: *mut u8, len: usize) {
    /// Copies `K` bytes at the start and `K` at the end of the range, which
    /// together cover it.
    ///
    /// # Safety
    /// As for `copy_exact`, and `K <= len <= 2 * K`.
    #[inline(always)]
    unsafe fn ends<const K: usize>(src: *const u8, dst: *mut u8, len: usize) {
        debug_assert!(K <= len && len <= 2 * K);
        // SAFETY: K <= len, so [0, K) and [len - K, len) are inside both
        // ranges the caller vouches for, which do not overlap; unaligned
        // accesses of a byte array are allowed.
        unsafe {
            std::ptr::write_unaligned(
                dst.cast::<[u8; K]>(),
                std::ptr::read_unaligned(src.cast::<[u8; K]>()),
            );
            std::ptr::write_unaligned(
                dst.add(len - K).cast::<[u8; K]>(),
                std::ptr::read_unaligned(src.add(len - K).cast::<[u8; K]>()),
            );
        }
    }
    // SAFETY: each arm satisfies `ends`' bound on len; the rest is the
    // caller's contract, passed on.
    unsafe {
        match len {
            0..=3 => {
                for i in 0..len {
                    *dst.add(i) = *src.add(i);
                }
            }
            4..=7 => ends::<4>(src, dst, len),
            8..=16 => ends::<8>(src, dst, len),
            17..=32 => ends::<16>(src, dst, len),
            33..=64 => ends::<32>(src, dst, len),
            65..=128 => ends::<64>(src, dst, len),
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_exactly() {
        let src: Vec<u8> = (0..300u32)
            .map(|i| u8::try_from((i * 7 + 1) % 251).unwrap())
            .collect();
        for len in 0..=260 {
            let mut dst = vec![0xeeu8; 300];
            // SAFETY: both buffers hold more than `len` bytes from offset 1
            // and are distinct allocations.
            unsafe { copy_exact(src.as_ptr().add(1), dst.as_mut_ptr().add(1), len) };
            assert_eq!(dst[0], 0xee, "len {len}: wrote before the range");
            assert_eq!(&dst[1..1 + len], &src[1..1 + len], "len {len}");
            assert!(
                dst[1 + len..].iter().all(|&b| b == 0xee),
                "len {len}: wrote past the range"
            );
        }
    }
}
