//! One of the four rings an AF_XDP socket shares with the kernel, driven
//! with the kernel's producer/consumer protocol (`net/xdp/xsk_queue.h`):
//!
//! - Each side owns one index and only reads the other's. The producer
//!   writes entries, then publishes its index with a store-release; the
//!   consumer loads that index with load-acquire before reading entries.
//!   The consumer reads entries, then publishes its index with a
//!   store-release; the producer loads it with load-acquire before
//!   overwriting entries. The kernel's side is the same pair
//!   (`smp_load_acquire` / `smp_store_release`).
//! - We keep our own index in `cached_prod` (producer rings: fill, TX) or
//!   `cached_cons` (consumer rings: RX, completion) and never read it back
//!   from shared memory. The kernel's index is untrusted: how many entries
//!   it claims is clamped to the ring's size, and every index is masked.
//!   What the entries say is checked by the caller (`queue.rs`).

use std::sync::atomic::{AtomicU32, Ordering};

use super::ffi::{XdpDesc, XskRing, XDP_RING_NEED_WAKEUP};

/// A ring: libxdp's `struct xsk_ring_prod/cons`, boxed because libxdp keeps
/// its address (the fill and completion rings' until the UMEM is deleted,
/// the RX and TX rings' until the socket is), plus the geometry we checked.
pub struct Ring {
    raw: Box<XskRing>,
    /// Entries; a power of two. Checked against libxdp's copy by
    /// [`Ring::check`] before any other method is used.
    size: u32,
    /// Producer rings: the index last published by `submit`.
    published: u32,
}

impl Ring {
    /// An unmapped ring for libxdp to fill in.
    pub fn new(size: u32) -> Ring {
        Ring {
            raw: Box::new(XskRing {
                cached_prod: 0,
                cached_cons: 0,
                mask: 0,
                size: 0,
                producer: std::ptr::null_mut(),
                consumer: std::ptr::null_mut(),
                ring: std::ptr::null_mut(),
                flags: std::ptr::null_mut(),
            }),
            size,
            published: 0,
        }
    }

    /// The struct to hand to libxdp.
    pub fn as_mut_ptr(&mut self) -> *mut XskRing {
        &mut *self.raw
    }

    /// Whether libxdp mapped the ring as asked: `size` entries of `entry`
    /// bytes, indexes and entries aligned. Every other method relies on it.
    pub fn check(&mut self, entry: usize) -> bool {
        self.published = self.raw.cached_prod;
        let r = &*self.raw;
        let aligned = |p: usize, a: usize| p != 0 && p.is_multiple_of(a);
        self.size.is_power_of_two()
            && r.size == self.size
            && r.mask == self.size - 1
            && aligned(r.producer as usize, 4)
            && aligned(r.consumer as usize, 4)
            && aligned(r.flags as usize, 4)
            && aligned(r.ring as usize, entry.min(8))
    }

    fn mask(&self) -> u32 {
        self.size - 1
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: `check` passed: `producer` points at the ring's aligned
        // producer index, in memory mapped until the socket or UMEM is
        // deleted, which happens after the last use of `self` (see
        // `queue.rs`, field order). The kernel accesses it atomically too.
        unsafe { AtomicU32::from_ptr(self.raw.producer) }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { AtomicU32::from_ptr(self.raw.consumer) }
    }

    fn entry<T>(&self, i: u32) -> *mut T {
        // SAFETY: `i & mask` < size, and `check` passed: `ring` points at
        // `size` entries of `T` (the caller uses the ring's entry type).
        unsafe { self.raw.ring.cast::<T>().add((i & self.mask()) as usize) }
    }

    /// Whether the kernel asks for a system call to see what we publish on
    /// this ring (`XDP_RING_NEED_WAKEUP`).
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: `check` passed: `flags` points at the ring's aligned
        // flags word, mapped as long as the ring.
        let flags = unsafe { AtomicU32::from_ptr(self.raw.flags) };
        // Relaxed: a hint the kernel sets and clears with plain stores and
        // no barrier; nothing is read through it. A stale clear flag costs
        // at most a delay until the next flush, as with libxdp's
        // `xsk_ring_prod__needs_wakeup`.
        flags.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side: fill, TX ----

    /// Reserves `n` entries to write; returns the index of the first.
    pub fn reserve(&mut self, n: u32) -> Option<u32> {
        // `cached_cons` is kept one ring ahead of the kernel's consumer
        // index (as libxdp sets it up), so free entries are a subtraction.
        let mut free = self.raw.cached_cons.wrapping_sub(self.raw.cached_prod);
        if free < n {
            // Acquire: pairs with the kernel's store-release of the
            // consumer index after it read the entries; they are ours to
            // overwrite from here on.
            let cons = self.consumer().load(Ordering::Acquire);
            self.raw.cached_cons = cons.wrapping_add(self.size);
            // A consumer index past our producer index is a kernel bug:
            // never count more than a ring of free entries.
            free = self
                .raw
                .cached_cons
                .wrapping_sub(self.raw.cached_prod)
                .min(self.size);
        }
        if free < n {
            return None;
        }
        let first = self.raw.cached_prod;
        self.raw.cached_prod = first.wrapping_add(n);
        Some(first)
    }

    /// Gives back the last `n` reserved entries, not written and not yet
    /// submitted.
    pub fn unreserve(&mut self, n: u32) {
        self.raw.cached_prod = self.raw.cached_prod.wrapping_sub(n);
    }

    /// Writes a fill ring entry (a frame address) at reserved index `i`.
    pub fn write_addr(&mut self, i: u32, addr: u64) {
        // SAFETY: a reserved entry of a fill ring (u64 entries): the kernel
        // does not read it until `submit` publishes it.
        unsafe { self.entry::<u64>(i).write(addr) }
    }

    /// Writes a TX descriptor at reserved index `i`.
    pub fn write_desc(&mut self, i: u32, d: XdpDesc) {
        // SAFETY: a reserved entry of a TX ring (descriptor entries): the
        // kernel does not read it until `submit` publishes it.
        unsafe { self.entry::<XdpDesc>(i).write(d) }
    }

    /// Publishes every reserved entry.
    pub fn submit(&mut self) {
        // Release: pairs with the kernel's load-acquire of the producer
        // index; the entries written before are visible to it once it sees
        // the new index.
        self.producer()
            .store(self.raw.cached_prod, Ordering::Release);
        self.published = self.raw.cached_prod;
    }

    /// Whether the kernel has not yet consumed everything we published (a
    /// TX ring with frames waiting to be sent).
    pub fn kernel_behind(&self) -> bool {
        // Relaxed: only compared with our own index; no entry is read or
        // reused on the strength of it (`reserve` does its own acquire).
        self.consumer().load(Ordering::Relaxed) != self.published
    }

    // ---- consumer side: RX, completion ----

    /// Entries the kernel has published, at most `max`: (first index,
    /// count).
    pub fn peek(&mut self, max: u32) -> (u32, u32) {
        // Acquire: pairs with the kernel's store-release of the producer
        // index after it wrote the entries; they are readable from here.
        let prod = self.producer().load(Ordering::Acquire);
        self.raw.cached_prod = prod;
        // More than a ring's worth would be a kernel bug: never read more
        // than a ring (older entries would be overwritten ones).
        let avail = prod.wrapping_sub(self.raw.cached_cons).min(self.size);
        (self.raw.cached_cons, avail.min(max))
    }

    /// Reads the completion ring entry (a frame address) at peeked index
    /// `i`.
    pub fn read_addr(&self, i: u32) -> u64 {
        // SAFETY: a peeked entry of a completion ring (u64 entries),
        // written by the kernel before the producer index we acquired, and
        // not rewritten until we release it.
        unsafe { self.entry::<u64>(i).read() }
    }

    /// Reads the RX descriptor at peeked index `i`.
    pub fn read_desc(&self, i: u32) -> XdpDesc {
        // SAFETY: a peeked entry of an RX ring (descriptor entries), as in
        // `read_addr`.
        unsafe { self.entry::<XdpDesc>(i).read() }
    }

    /// Gives `n` peeked entries back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.raw.cached_cons = self.raw.cached_cons.wrapping_add(n);
        // Release: pairs with the kernel's load-acquire of the consumer
        // index; our reads of the entries (and of the frames they point
        // to) happen before it reuses them.
        self.consumer()
            .store(self.raw.cached_cons, Ordering::Release);
    }

    /// Whether the kernel has published entries we have not taken (no
    /// system call).
    pub fn has_entries(&self) -> bool {
        // Relaxed: a readiness test; `peek` does the acquire before any
        // entry is read.
        self.producer().load(Ordering::Relaxed) != self.raw.cached_cons
    }
}
