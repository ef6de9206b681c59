//! Guest memory, translated once: the one module that dereferences it.
//!
//! vm-memory translates a guest address on every access (find the region,
//! check the range, build a `VolatileSlice`), which cost more than the copy
//! itself for small frames. Here the translation is done once:
//!
//! - [`GuestMap`]: built when the memory table arrives. It holds the
//!   `GuestMemoryMmap` (whose `Arc`ed regions keep the mappings alive) and a
//!   small table of its regions (guest address, length, host address), so a
//!   buffer's translation is a couple of compares against the region that
//!   matched last.
//! - [`VringMem`]: built when a vring starts (and again whenever the memory,
//!   the ring addresses or the size change). Its descriptor table, available
//!   ring (with `used_event`) and used ring (with `avail_event`) are each
//!   checked to lie inside one mapped region, suitably aligned, and are then
//!   reached through host pointers. It holds its own clone of the memory, so
//!   its pointers stay valid as long as it lives.
//! - [`Seg`] copies: a validated buffer carries its host address; copies
//!   between it and `&[u8]` are [`ringswitch_ring::copy::copy_exact`]
//!   (two fixed-size moves for up to 128 bytes, `memcpy` beyond, where
//!   vm-memory itself calls `memcpy` for anything over 8 bytes).
//!
//! The guest may write any of this memory at any time: ring fields are read
//! once with volatile or atomic loads into locals and validated there, and
//! frame bytes are only ever copied, never lent out as `&[u8]`.

use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;

use ringswitch_ring::copy::copy_exact;
use vm_memory::{
    GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, VolatileSlice,
};

use crate::fault::{self, FaultError, Registration};

/// Most regions a [`GuestMap`] holds (QEMU sends at most 8 without
/// CONFIGURE_MEM_SLOTS; the device refuses more).
pub const REGIONS_MAX: usize = 8;

/// Size of one split-ring descriptor.
const DESC_SIZE: u64 = 16;

/// An address inside a guest memory mapping. Only dereferenced in this
/// module, under the conditions each `SAFETY` comment states.
#[derive(Clone, Copy, Debug)]
struct HostPtr(*mut u8);

// SAFETY: a HostPtr is only an address into a MAP_SHARED guest mapping,
// which any thread may access; every dereference happens in this module
// while the mapping is kept alive by a `GuestMemoryMmap` clone, whichever
// thread does it. Moving or sharing the address itself touches no memory.
unsafe impl Send for HostPtr {}
// SAFETY: as for Send: sharing the address between threads touches nothing;
// guest memory is only accessed through volatile reads and writes, atomics
// or raw-pointer copies, never through references to plain data.
unsafe impl Sync for HostPtr {}

impl HostPtr {
    const NULL: HostPtr = HostPtr(ptr::null_mut());

    /// `self + off` (no dereference, so no safety condition).
    fn add(self, off: u64) -> HostPtr {
        // Offsets are inside a mapping, so they fit a usize; one that did
        // not would give an address no region contains.
        HostPtr(
            self.0
                .wrapping_add(usize::try_from(off).unwrap_or(usize::MAX)),
        )
    }

    /// Hints the CPU to fetch the cache line at this address. A prefetch
    /// never faults, whatever the address.
    #[inline(always)]
    fn prefetch(self) {
        ringswitch_ring::copy::prefetch(self.0);
    }

    fn is_aligned(self, align: usize) -> bool {
        (self.0 as usize).is_multiple_of(align)
    }
}

/// One region of the table: `len` bytes of guest memory at guest address
/// `gpa`, mapped at `host`. An unused slot has `len == 0` and matches nothing.
#[derive(Clone, Copy, Debug)]
struct Region {
    gpa: u64,
    len: u64,
    host: HostPtr,
}

impl Region {
    const EMPTY: Region = Region {
        gpa: 0,
        len: 0,
        host: HostPtr::NULL,
    };

    /// The host address of `[gpa, gpa + len)` if it lies inside this region.
    #[inline]
    fn locate(&self, gpa: u64, len: u64) -> Option<HostPtr> {
        // Wraps to a huge offset when gpa is below the region.
        let off = gpa.wrapping_sub(self.gpa);
        (off < self.len && len <= self.len - off).then(|| self.host.add(off))
    }
}

/// Why a memory table or a vring was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// More regions than [`REGIONS_MAX`].
    #[error("more than {REGIONS_MAX} memory regions")]
    TooManyRegions,
    /// A ring not inside one mapped region (outside memory, or straddling
    /// two regions).
    #[error("ring not inside one memory region")]
    OutsideMemory,
    /// A ring address not aligned as the split ring requires (descriptor
    /// table 16, available ring 2, used ring 4).
    #[error("misaligned ring")]
    Misaligned,
    /// A queue size that is not a power of two (the port refuses these
    /// earlier; ring indexes are reduced with a mask).
    #[error("queue size not a power of two")]
    BadSize,
    /// The mapping could not be registered with the fault handler.
    #[error("guest memory cannot be guarded against faults")]
    Guard(#[from] FaultError),
}

/// `statfs.f_type` of hugetlbfs.
const HUGETLBFS_MAGIC: libc::c_long = 0x9584_58f6;

/// Guest memory registered with the SIGBUS handler (module `fault`), so a
/// region the frontend shrinks later faults into an error for this device
/// instead of killing the process. Cheap to clone; the registrations are
/// dropped with the last clone, just before the mappings are unmapped.
#[derive(Clone, Debug)]
pub struct GuestMemory(Arc<Guarded>);

#[derive(Debug)]
struct Guarded {
    /// Declared before `mem`: fields drop in order, so every range is
    /// unregistered before its mapping goes.
    guards: Vec<Registration>,
    mem: GuestMemoryMmap,
}

impl GuestMemory {
    /// Registers every region of `mem` with the fault handler.
    pub fn new(mem: GuestMemoryMmap) -> Result<GuestMemory, MapError> {
        if mem.num_regions() > REGIONS_MAX {
            return Err(MapError::TooManyRegions);
        }
        let mut guards = Vec::with_capacity(mem.num_regions());
        for r in mem.iter() {
            let page = r
                .file_offset()
                .map_or_else(page_size, |f| file_page_size(f.file()));
            let len = usize::try_from(r.len()).map_err(|_| MapError::OutsideMemory)?;
            guards.push(fault::register(r.as_ptr(), len, page)?);
        }
        Ok(GuestMemory(Arc::new(Guarded { guards, mem })))
    }

    /// The memory itself.
    pub fn mmap(&self) -> &GuestMemoryMmap {
        &self.0.mem
    }

    /// Has an access to any region faulted (the frontend shrank its file)?
    pub fn faulted(&self) -> bool {
        self.0.guards.iter().any(Registration::faulted)
    }
}

/// The system's base page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

/// The page size of mappings of `file`: its huge page size on hugetlbfs.
fn file_page_size(file: &std::fs::File) -> usize {
    // SAFETY: fstatfs fills the zeroed struct for a valid descriptor.
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `file` is open for the call; sfs is a valid output buffer.
    let r = unsafe { libc::fstatfs(file.as_raw_fd(), &mut sfs) };
    if r == 0 && sfs.f_type == HUGETLBFS_MAGIC {
        if let Ok(b) = usize::try_from(sfs.f_bsize) {
            if b.is_power_of_two() {
                return b.max(page_size());
            }
        }
    }
    page_size()
}

/// Guest memory with its region table. See the module documentation.
#[derive(Debug)]
pub struct GuestMap {
    /// Keeps every region's mapping (and its fault registration) alive
    /// while the table points into it.
    mem: GuestMemory,
    regions: [Region; REGIONS_MAX],
    /// The slot that matched last (always < REGIONS_MAX). A hint only:
    /// Relaxed, it orders nothing.
    last: AtomicUsize,
}

impl GuestMap {
    /// The region table of `mem`. Regions not mapped both readable and
    /// writable are left out, so nothing in them is ever touched.
    pub fn new(mem: GuestMemory) -> Result<GuestMap, MapError> {
        if mem.mmap().num_regions() > REGIONS_MAX {
            return Err(MapError::TooManyRegions);
        }
        let mut regions = [Region::EMPTY; REGIONS_MAX];
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        for (slot, r) in regions.iter_mut().zip(mem.mmap().iter()) {
            if r.prot() & rw != rw {
                continue;
            }
            *slot = Region {
                gpa: r.start_addr().0,
                len: r.len(),
                host: HostPtr(r.as_ptr()),
            };
        }
        Ok(GuestMap {
            mem,
            regions,
            last: AtomicUsize::new(0),
        })
    }

    /// Has an access to this memory faulted? See [`GuestMemory::faulted`].
    pub fn faulted(&self) -> bool {
        self.mem.faulted()
    }

    /// The host address of `[gpa, gpa + len)`, if it lies inside one
    /// region. `len` may be 0 (then `gpa` must still be inside a region).
    #[inline]
    fn translate(&self, gpa: u64, len: u64) -> Option<HostPtr> {
        let last = self.last.load(Ordering::Relaxed) % REGIONS_MAX;
        if let Some(p) = self.regions[last].locate(gpa, len) {
            return Some(p);
        }
        self.translate_slow(gpa, len)
    }

    #[cold]
    fn translate_slow(&self, gpa: u64, len: u64) -> Option<HostPtr> {
        let (i, p) = self
            .regions
            .iter()
            .enumerate()
            .find_map(|(i, r)| r.locate(gpa, len).map(|p| (i, p)))?;
        self.last.store(i, Ordering::Relaxed);
        Some(p)
    }

    /// A buffer of `len` bytes at `gpa`, if it lies inside one region.
    #[inline]
    pub fn seg(&self, gpa: u64, len: u32) -> Option<Seg> {
        let host = self.translate(gpa, u64::from(len))?;
        Some(Seg {
            addr: GuestAddress(gpa),
            len,
            host,
        })
    }

    /// The indirect descriptor table of `count` entries at `gpa`, if it
    /// lies inside one region.
    pub fn desc_table(&self, gpa: u64, count: u16) -> Option<DescTable<'_>> {
        let host = self.translate(gpa, u64::from(count) * DESC_SIZE)?;
        Some(DescTable {
            host,
            count,
            _mem: PhantomData,
        })
    }

    /// Resolves a split ring of `size` entries whose descriptor table,
    /// available ring and used ring are at guest addresses `desc`, `avail`
    /// and `used`: each must lie inside one region (the available ring
    /// with `used_event`, the used ring with `avail_event`) and be aligned
    /// as VIRTIO 1.x 2.7 requires, in guest and in host addresses (the
    /// ring fields are accessed atomically).
    pub fn vring(&self, size: u16, desc: u64, avail: u64, used: u64) -> Result<VringMem, MapError> {
        if !size.is_power_of_two() {
            return Err(MapError::BadSize);
        }
        let n = u64::from(size);
        // flags, idx, ring[size], used_event / avail_event.
        let avail_len = 2 + 2 + 2 * n + 2;
        let used_len = 2 + 2 + 8 * n + 2;
        let d = self
            .translate(desc, DESC_SIZE * n)
            .ok_or(MapError::OutsideMemory)?;
        let a = self
            .translate(avail, avail_len)
            .ok_or(MapError::OutsideMemory)?;
        let u = self
            .translate(used, used_len)
            .ok_or(MapError::OutsideMemory)?;
        let aligned = desc.is_multiple_of(16)
            && avail.is_multiple_of(2)
            && used.is_multiple_of(4)
            && d.is_aligned(16)
            && a.is_aligned(2)
            && u.is_aligned(4);
        if !aligned {
            return Err(MapError::Misaligned);
        }
        Ok(VringMem {
            _mem: self.mem.clone(),
            desc: d,
            avail: a,
            used: u,
            size,
        })
    }
}

/// One validated buffer: `len` bytes at guest address `addr`, inside one
/// region of the [`GuestMap`] that made it (only `GuestMap::seg` does).
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    /// Guest physical address.
    pub addr: GuestAddress,
    /// Length in bytes.
    pub len: u32,
    /// Where `addr` is mapped; `len` bytes from here are inside one region.
    host: HostPtr,
}

impl PartialEq for Seg {
    fn eq(&self, other: &Seg) -> bool {
        self.addr == other.addr && self.len == other.len
    }
}

impl Eq for Seg {}

impl Seg {
    /// Hints the CPU to fetch the buffer's first two cache lines (a header
    /// and a small frame).
    #[inline(always)]
    pub fn prefetch(&self) {
        self.host.prefetch();
        if self.len > 64 {
            self.host.add(64).prefetch();
        }
    }

    /// Copies `dst.len()` bytes from `skip` bytes into the buffer.
    ///
    /// # Safety
    ///
    /// The [`GuestMap`] that made `self` (and so its mapping) is still
    /// alive, and `skip + dst.len() <= self.len`.
    #[inline]
    pub unsafe fn read(&self, skip: usize, dst: &mut [u8]) {
        debug_assert!(skip + dst.len() <= self.len as usize);
        // SAFETY: by the caller's contract the range lies inside this
        // buffer, which lies inside one live mapped region (checked by
        // GuestMap::seg); `dst` is a distinct Rust allocation, so they do
        // not overlap. A concurrent guest write only makes the copied bytes
        // stale, as with vm-memory's own copies.
        unsafe { copy_exact(self.host.0.add(skip), dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` into the buffer from `skip` bytes in.
    ///
    /// # Safety
    ///
    /// As for [`Seg::read`], with `skip + src.len() <= self.len`.
    #[inline]
    pub unsafe fn write(&self, skip: usize, src: &[u8]) {
        debug_assert!(skip + src.len() <= self.len as usize);
        // SAFETY: as in `read`: inside one live, writable region (GuestMap
        // keeps only read-write regions), not overlapping `src`.
        unsafe { copy_exact(src.as_ptr(), self.host.0.add(skip), src.len()) }
    }

    /// The buffer from `skip` bytes on, as a volatile slice.
    ///
    /// # Safety
    ///
    /// As for [`Seg::read`], with `skip <= self.len`, and the mapping must
    /// stay alive for `'a`.
    pub unsafe fn volatile_slice<'a>(&self, skip: usize) -> VolatileSlice<'a> {
        // SAFETY: `len - skip` bytes from host + skip are inside one mapped
        // region that the caller keeps alive for 'a; every access through a
        // VolatileSlice is volatile.
        unsafe { VolatileSlice::new(self.host.0.add(skip), self.len as usize - skip) }
    }
}

/// Where bytes `offset..offset + len` of the buffers `segs` (taken end to
/// end) lie: one piece per buffer they touch, in order, each the buffer,
/// the offset in it and the range of those bytes counted from `offset`.
/// The pieces cover fewer than `len` bytes if the buffers end first. The
/// one walk behind every copy out of or into a chain of buffers.
pub(crate) fn spans(segs: &[Seg], offset: usize, len: usize) -> Spans<'_> {
    Spans {
        segs: segs.iter(),
        skip: offset,
        done: 0,
        len,
    }
}

/// The iterator of [`spans`].
pub(crate) struct Spans<'s> {
    segs: std::slice::Iter<'s, Seg>,
    /// Bytes still to pass over before the first piece.
    skip: usize,
    /// Bytes covered by the pieces so far.
    done: usize,
    len: usize,
}

impl<'s> Iterator for Spans<'s> {
    /// The buffer, the offset in it, the range of the bytes; the offset
    /// plus the range's length is at most the buffer's length.
    type Item = (&'s Seg, usize, std::ops::Range<usize>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.done < self.len {
            let seg = self.segs.next()?;
            let seg_len = seg.len as usize;
            if self.skip >= seg_len {
                self.skip -= seg_len;
                continue;
            }
            let n = (seg_len - self.skip).min(self.len - self.done);
            let piece = (seg, self.skip, self.done..self.done + n);
            self.done += n;
            self.skip = 0;
            return Some(piece);
        }
        None
    }
}

/// A descriptor as read from guest memory, fields in host order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    /// Buffer guest address.
    pub addr: u64,
    /// Buffer length.
    pub len: u32,
    /// `VRING_DESC_F_*`.
    pub flags: u16,
    /// Next index when `VRING_DESC_F_NEXT` is set.
    pub next: u16,
}

/// `struct virtq_desc` as laid out in guest memory (little-endian fields).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawDesc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

const _: () = assert!(std::mem::size_of::<RawDesc>() as u64 == DESC_SIZE);

/// A descriptor table (a vring's, or an indirect one) inside one region of
/// a mapping borrowed for `'m`.
#[derive(Clone, Copy, Debug)]
pub struct DescTable<'m> {
    host: HostPtr,
    count: u16,
    _mem: PhantomData<&'m GuestMemory>,
}

impl DescTable<'_> {
    /// Hints the CPU to fetch entry `i` (nothing if outside the table).
    #[inline(always)]
    pub fn prefetch(&self, i: u16) {
        if i < self.count {
            self.host.add(u64::from(i) * DESC_SIZE).prefetch();
        }
    }

    /// Entry `i`, None if `i` is outside the table. One read of guest
    /// memory, so the guest cannot change a field between two uses.
    #[inline]
    pub fn get(&self, i: u16) -> Option<Desc> {
        if i >= self.count {
            return None;
        }
        let p = self.host.add(u64::from(i) * DESC_SIZE);
        let raw = if p.is_aligned(std::mem::align_of::<RawDesc>()) {
            // SAFETY: i < count, and the table's `count` entries lie inside
            // one region whose mapping outlives 'm (GuestMap::desc_table or
            // VringMem::desc_table checked it); the pointer is aligned for
            // RawDesc (just checked); every bit pattern is a valid RawDesc.
            unsafe { ptr::read_volatile(p.0.cast::<RawDesc>()) }
        } else {
            // An indirect table need not be aligned: read it as bytes.
            // SAFETY: as above; [u8; 16] needs no alignment.
            let b = unsafe { ptr::read_volatile(p.0.cast::<[u8; 16]>()) };
            RawDesc {
                addr: u64::from_ne_bytes(b[0..8].try_into().expect("8 bytes")),
                len: u32::from_ne_bytes(b[8..12].try_into().expect("4 bytes")),
                flags: u16::from_ne_bytes([b[12], b[13]]),
                next: u16::from_ne_bytes([b[14], b[15]]),
            }
        };
        Some(Desc {
            addr: u64::from_le(raw.addr),
            len: u32::from_le(raw.len),
            flags: u16::from_le(raw.flags),
            next: u16::from_le(raw.next),
        })
    }
}

/// A started split ring, resolved to host pointers by [`GuestMap::vring`].
/// Holds its own clone of the memory, so its pointers are valid for as long
/// as it lives. Every index is reduced modulo the size (a power of two).
#[derive(Debug)]
pub struct VringMem {
    /// Keeps the mappings the three pointers point into alive.
    _mem: GuestMemory,
    /// `16 * size` bytes, 16-aligned.
    desc: HostPtr,
    /// `6 + 2 * size` bytes, 2-aligned: flags, idx, ring, used_event.
    avail: HostPtr,
    /// `6 + 8 * size` bytes, 4-aligned: flags, idx, ring, avail_event.
    used: HostPtr,
    size: u16,
}

impl VringMem {
    /// Queue size (a power of two).
    pub fn size(&self) -> u16 {
        self.size
    }

    /// The ring's descriptor table.
    pub fn desc_table(&self) -> DescTable<'_> {
        DescTable {
            host: self.desc,
            count: self.size,
            _mem: PhantomData,
        }
    }

    /// The u16 at byte `off` of the available ring, as an atomic.
    ///
    /// # Safety
    ///
    /// `off` is even and `off + 2 <= 6 + 2 * size` (inside the ring).
    #[inline]
    unsafe fn avail_u16(&self, off: u64) -> &AtomicU16 {
        debug_assert!(off.is_multiple_of(2) && off + 2 <= 6 + 2 * u64::from(self.size));
        // SAFETY: by the caller's contract the two bytes lie in the
        // available ring, which lies inside one region kept mapped by
        // self._mem for as long as &self lives; 2-aligned (ring checked
        // 2-aligned in guest and host addresses, off even). The guest also
        // writes these fields, so they are only ever accessed atomically.
        unsafe { AtomicU16::from_ptr(self.avail.add(off).0.cast::<u16>()) }
    }

    /// The u16 at byte `off` of the used ring, as an atomic.
    ///
    /// # Safety
    ///
    /// `off` is even and `off + 2 <= 6 + 8 * size` (inside the ring).
    #[inline]
    unsafe fn used_u16(&self, off: u64) -> &AtomicU16 {
        debug_assert!(off.is_multiple_of(2) && off + 2 <= 6 + 8 * u64::from(self.size));
        // SAFETY: by the caller's contract inside the used ring, inside one
        // region kept mapped by self._mem; 2-aligned (ring 4-aligned, off
        // even); these fields are only ever accessed atomically.
        unsafe { AtomicU16::from_ptr(self.used.add(off).0.cast::<u16>()) }
    }

    /// `avail->idx`, Acquire: pairs with the driver's write barrier between
    /// filling ring entries (and their descriptors) and publishing the
    /// index, so those are visible once the index is.
    #[inline]
    pub fn avail_idx(&self) -> u16 {
        // SAFETY: offset 2, inside the ring's 4-byte header.
        let idx = unsafe { self.avail_u16(2) };
        u16::from_le(idx.load(Ordering::Acquire))
    }

    /// `avail->flags`, Relaxed (callers fence as needed).
    pub fn avail_flags(&self) -> u16 {
        // SAFETY: offset 0, inside the ring's header.
        let flags = unsafe { self.avail_u16(0) };
        u16::from_le(flags.load(Ordering::Relaxed))
    }

    /// `avail->used_event` (EVENT_IDX), Relaxed (callers fence as needed).
    pub fn used_event(&self) -> u16 {
        // SAFETY: 4 + 2 * size is the ring's last u16.
        let event = unsafe { self.avail_u16(4 + 2 * u64::from(self.size)) };
        u16::from_le(event.load(Ordering::Relaxed))
    }

    /// `avail->ring[idx % size]`: a head index, still to be range-checked.
    /// Relaxed: ordered after the Acquire load of `avail->idx` that made
    /// this entry visible.
    #[inline]
    pub fn avail_entry(&self, idx: u16) -> u16 {
        let slot = u64::from(idx & (self.size - 1));
        // SAFETY: slot < size (size is a power of two), so 4 + 2 * slot is
        // an entry of the ring.
        let entry = unsafe { self.avail_u16(4 + 2 * slot) };
        u16::from_le(entry.load(Ordering::Relaxed))
    }

    /// Writes `used->ring[idx % size] = { id, len }` without publishing it.
    #[inline]
    pub fn set_used_elem(&self, idx: u16, id: u32, len: u32) {
        let slot = u64::from(idx & (self.size - 1));
        let p = self.used.add(4 + 8 * slot).0.cast::<u32>();
        // SAFETY: slot < size, so the 8 bytes at 4 + 8 * slot lie inside
        // the used ring, inside one region kept mapped by self._mem; the
        // ring is 4-aligned so both u32 are. The device owns the used ring:
        // the driver reads these only after the Release store of the used
        // index (publish_used), which orders these writes before it.
        unsafe {
            ptr::write_volatile(p, id.to_le());
            ptr::write_volatile(p.add(1), len.to_le());
        }
    }

    /// The used ring's index as guest memory holds it (diagnostics: a
    /// vring started where the device's own index differs from it was
    /// left inconsistent by whoever ran it before).
    pub fn used_idx(&self) -> u16 {
        // SAFETY: offset 2 (the index) lies inside the used ring, checked
        // when it was resolved.
        let used_idx = unsafe { self.used_u16(2) };
        // Relaxed: a diagnostic read; nothing is read through it.
        u16::from_le(used_idx.load(Ordering::Relaxed))
    }

    /// `used->idx = idx`, Release: pairs with the driver's read barrier
    /// after it reads the used index, so it sees the used elements (and the
    /// RX bytes) written before.
    #[inline]
    pub fn publish_used(&self, idx: u16) {
        // SAFETY: offset 2, inside the ring's 4-byte header.
        let used_idx = unsafe { self.used_u16(2) };
        used_idx.store(idx.to_le(), Ordering::Release);
    }

    /// `used->flags` (VRING_USED_F_NO_NOTIFY), Relaxed: callers fence.
    pub fn set_used_flags(&self, flags: u16) {
        // SAFETY: offset 0, inside the ring's header.
        let used_flags = unsafe { self.used_u16(0) };
        used_flags.store(flags.to_le(), Ordering::Relaxed);
    }

    /// `used->avail_event` (EVENT_IDX), Relaxed: callers fence.
    pub fn set_avail_event(&self, idx: u16) {
        // SAFETY: 4 + 8 * size is the ring's last u16.
        let event = unsafe { self.used_u16(4 + 8 * u64::from(self.size)) };
        event.store(idx.to_le(), Ordering::Relaxed);
    }
}
