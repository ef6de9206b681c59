//! A region: one sealed memfd holding a port's (or a pipe's) rings, CSB and
//! buffers, mapped shared into this process.
//!
//! Every access goes through a bounds-checked accessor. Offsets come from the
//! [`RegionLayout`], which is validated once when the region is created or
//! mapped; values read *out of* the region (indexes, lengths, buffer numbers)
//! are untrusted and are checked by the callers before they are used to
//! compute another offset.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::arith;
use crate::copy::copy_exact;
use crate::layout::*;

/// Errors creating or mapping a region.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// The geometry is out of range.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// A system call failed.
    #[error("{what} failed")]
    Sys {
        /// Which call.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The memfd is not what the header says or is not sealed.
    #[error("the shared memory region is invalid: {0}")]
    Invalid(&'static str),
}

fn sys(what: &'static str) -> RegionError {
    RegionError::Sys {
        what,
        source: std::io::Error::last_os_error(),
    }
}

/// A mapped region.
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
    layout: RegionLayout,
    /// The region whose addresses this one's mapping was moved onto (see
    /// [`Region::move_onto`]): it unmaps them when the last of the two
    /// goes, so this one does not.
    lives_in: Option<Arc<Region>>,
}

// SAFETY: the mapping is plain shared memory, valid until drop, that any
// thread may access; the pointer is never handed out as a reference to plain
// data other than the caller-owned buffer of `buf_mut` (an unsafe fn), so
// moving the Region to another thread is sound.
unsafe impl Send for Region {}
// SAFETY: `&Region` accesses the memory only with atomics (ring indexes and
// CSB), volatile reads and writes (headers, slots) and bounds-checked raw
// copies of buffer bytes, never through a shared reference to plain data,
// so threads sharing it are no worse off than processes sharing the memfd:
// a racing write garbles the bytes copied, and every value read is
// validated before it is used as an offset.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        if self.lives_in.is_some() {
            // The addresses are the other region's, which this one keeps
            // alive until now: it unmaps them when it goes.
            return;
        }
        // SAFETY: ptr/len describe exactly the mapping made in `map_fd` (or
        // one moved onto it by `move_onto`, whose region kept this one
        // alive), and no reference into it can outlive `self` (all borrow
        // `&self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.len)
            .field("fd", &self.fd.as_raw_fd())
            .finish()
    }
}

const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

impl Region {
    /// Creates a region for `layout` in a new sealed memfd and initializes
    /// every netmap structure in it. `names` are the `ni_name`s of the ends.
    pub fn create(layout: RegionLayout, names: [&str; 2]) -> Result<Region, RegionError> {
        let cname = c"ringswitch";
        // SAFETY: memfd_create with a valid NUL-terminated name; returns a new fd or -1.
        let raw = unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw < 0 {
            return Err(sys("memfd_create"));
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The file is a power of two long (the tail is never touched, so
        // never allocated): that is what a PCI BAR needs when the region is
        // handed to a guest through ivshmem (passthrough ports).
        let file_size = layout.size.next_power_of_two();
        // SAFETY: ftruncate on our own fd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), file_size as libc::off_t) } != 0 {
            return Err(sys("ftruncate"));
        }
        // SAFETY: fcntl on our own fd; sealing only restricts future resizes.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
            return Err(sys("sealing the memfd"));
        }
        let region = Self::map_fd(fd, layout)?;
        region.init(names);
        Ok(region)
    }

    /// Maps a region received from someone else. Checks that it is sealed
    /// against shrinking (so it cannot vanish under us), that its size is the
    /// one its header describes (or that rounded up to a power of two, as
    /// `create` makes it), and that the header is one we would write.
    pub fn open(fd: OwnedFd) -> Result<Region, RegionError> {
        // SAFETY: fcntl F_GET_SEALS on an fd we own.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 {
            return Err(RegionError::Invalid("the descriptor is not a memfd"));
        }
        if seals & libc::F_SEAL_SHRINK == 0 {
            return Err(RegionError::Invalid(
                "the memfd is not sealed against shrinking",
            ));
        }
        // SAFETY: zeroed stat is a valid out-parameter for fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on an fd we own into a valid stat buffer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(sys("fstat"));
        }
        let size = usize::try_from(st.st_size)
            .map_err(|_| RegionError::Invalid("the memfd's size is out of range"))?;
        if size < REGION_HEADER_SIZE {
            return Err(RegionError::Invalid("the memfd is too small for a header"));
        }
        let mut hdr = RegionHeader::default();
        // SAFETY: pread into a local POD of exactly that many bytes.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                (&mut hdr as *mut RegionHeader).cast(),
                std::mem::size_of::<RegionHeader>(),
                0,
            )
        };
        if n != std::mem::size_of::<RegionHeader>() as isize {
            return Err(RegionError::Invalid("the header could not be read"));
        }
        let layout = RegionLayout::from_header(&hdr)
            .ok_or(RegionError::Invalid("the header is malformed"))?;
        if size != layout.size && size != layout.size.next_power_of_two() {
            return Err(RegionError::Invalid(
                "the memfd size differs from the header",
            ));
        }
        Self::map_fd(fd, layout)
    }

    /// Maps a region behind a device of `len` bytes: in a guest, the
    /// passthrough driver's window on the ivshmem BAR that holds a port's
    /// region. The header is read from the device and checked as in
    /// [`Region::open`]; the region must fit in `len`.
    pub fn open_device(fd: OwnedFd, len: usize) -> Result<Region, RegionError> {
        if len < REGION_HEADER_SIZE {
            return Err(RegionError::Invalid("the device is too small for a header"));
        }
        // SAFETY: a shared read-only mapping of the first page of the
        // device, unmapped below before anything else happens.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                REGION_HEADER_SIZE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap of the passthrough device"));
        }
        // SAFETY: the mapping holds REGION_HEADER_SIZE >= size_of::<RegionHeader>()
        // bytes; an unaligned read of a plain-old-data struct.
        let hdr: RegionHeader = unsafe { std::ptr::read_volatile(p as *const RegionHeader) };
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(p, REGION_HEADER_SIZE) };
        let layout = RegionLayout::from_header(&hdr).ok_or(RegionError::Invalid(
            "the device does not hold a ringswitch region",
        ))?;
        if layout.size > len {
            return Err(RegionError::Invalid(
                "the region is larger than the device's memory",
            ));
        }
        Self::map_fd(fd, layout)
    }

    fn map_fd(fd: OwnedFd, layout: RegionLayout) -> Result<Region, RegionError> {
        // SAFETY: a fresh shared mapping of `layout.size` bytes of our fd; the
        // memfd is sealed against shrinking, so the pages stay valid.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mmap"));
        }
        let ptr = NonNull::new(p.cast()).ok_or(RegionError::Invalid("mmap returned null"))?;
        Ok(Region {
            ptr,
            len: layout.size,
            fd,
            layout,
            lives_in: None,
        })
    }

    /// Moves this region's mapping onto the addresses of `old`, a region of
    /// the same layout (a port opened again on a new daemon), so that
    /// pointers a program keeps into `old` (netmap's `nifp`, its rings and
    /// buffers) go on working, and now see this region. `old`'s own pages
    /// are unmapped by the move; `old` stays alive as long as this region
    /// does and unmaps the addresses when the last of the two goes. Fails
    /// (and unmaps this region) for another layout, or when the kernel
    /// refuses.
    pub fn move_onto(mut self, old: Arc<Region>) -> Result<Region, RegionError> {
        if old.layout != self.layout || old.len != self.len {
            return Err(RegionError::Invalid(
                "the port came back with another layout",
            ));
        }
        // SAFETY: moves our own mapping of `len` bytes onto `old`'s range
        // of the same length, which the kernel unmaps first (MREMAP_FIXED).
        // Every reference into either mapping borrows one of the two
        // regions, and from here `old` lives as long as `self` (kept in
        // `lives_in`), so no access outlives the range; accesses through
        // `old` now read this region's pages, which are shared memory of
        // the same layout, read with the same validation as any other.
        let p = unsafe {
            libc::mremap(
                self.ptr.as_ptr().cast(),
                self.len,
                self.len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                old.ptr.as_ptr().cast::<libc::c_void>(),
            )
        };
        if p == libc::MAP_FAILED {
            return Err(sys("mremap"));
        }
        self.ptr = old.ptr;
        self.lives_in = Some(old);
        Ok(self)
    }

    /// The memfd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The identity of the file behind the region (device and inode): two
    /// mappings of one memfd (the two ends of a pipe) have the same. None
    /// if fstat fails.
    pub fn file_id(&self) -> Option<(u64, u64)> {
        // SAFETY: a zeroed stat is a valid out-parameter.
        let mut s: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on our own open descriptor into `s`.
        let r = unsafe { libc::fstat(self.fd.as_raw_fd(), &mut s) };
        (r == 0).then_some((s.st_dev, s.st_ino))
    }

    /// A duplicate of the memfd, to send to a client.
    pub fn dup_fd(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// The layout.
    pub fn layout(&self) -> &RegionLayout {
        &self.layout
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty; present for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Base address of the mapping (for C callers and passthrough).
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// An atomic view of the u32 at `off`. `off` comes from the layout, never
    /// from shared memory; a bad one is a bug, so this panics.
    #[inline(always)]
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off.is_multiple_of(4) && off + 4 <= self.len,
            "region offset {off} out of bounds"
        );
        // SAFETY: in bounds and 4-aligned (mapping is page aligned); the
        // memory lives as long as `self`; AtomicU32 has the layout of u32 and
        // tolerates concurrent writers in other processes.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    #[inline(always)]
    fn write_pod<T: Copy>(&self, off: usize, v: T) {
        assert!(
            off + std::mem::size_of::<T>() <= self.len
                && off.is_multiple_of(std::mem::align_of::<T>())
        );
        // SAFETY: in bounds and aligned; volatile because others share it.
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off).cast::<T>(), v) }
    }

    #[inline(always)]
    fn read_pod<T: Copy>(&self, off: usize) -> T {
        assert!(
            off + std::mem::size_of::<T>() <= self.len
                && off.is_multiple_of(std::mem::align_of::<T>())
        );
        // SAFETY: in bounds and aligned; T is plain data valid for any bits
        // (only used with integer structs); volatile as others share it.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<T>()) }
    }

    /// The header at offset 0.
    pub fn header(&self) -> RegionHeader {
        self.read_pod(0)
    }

    /// Says in the header that every frame in the rings carries `len` bytes
    /// of virtio-net header in front of it (see
    /// [`RegionHeader::vnet_hdr_len`]). For the daemon, on a region no one
    /// else has seen yet.
    pub fn set_vnet_hdr_len(&self, len: u32) {
        self.write_pod(crate::layout::HEADER_VNET_HDR_LEN, len);
    }

    /// The `ni_name` of end `end` (its port's name), up to its first NUL.
    pub fn ni_name(&self, end: usize) -> Vec<u8> {
        let end = end.min(self.layout.ends as usize - 1);
        let n: [u8; 16] = self.read_pod(self.layout.nifp_at(end));
        let len = n.iter().position(|&b| b == 0).unwrap_or(16);
        n[..len].to_vec()
    }

    /// The resume word of a migratable passthrough port (see
    /// [`HEADER_RESUME_ASK`]): what the daemon asks.
    pub fn resume_ask(&self) -> &AtomicU32 {
        self.u32_at(HEADER_RESUME_ASK)
    }

    /// What the guest answered (see [`HEADER_RESUME_ACK`]). Untrusted.
    pub fn resume_ack(&self) -> &AtomicU32 {
        self.u32_at(HEADER_RESUME_ACK)
    }

    /// Takes over what another machine's port left in this region (a
    /// passthrough port's memory, overwritten by QEMU's migration of the
    /// guest) as untrusted input, for a port side that attaches afresh
    /// ([`crate::PortRing::new`] starts from the CSB's `hwcur`/`hwtail`).
    /// End 0 only (a switch port's region; `names` as for `create`).
    ///
    /// What only the daemon writes (the header, the `netmap_if`, each
    /// ring's constant fields) is written again from our own layout. What
    /// the two sides wrote is checked and reset where it is inconsistent,
    /// each reset counted:
    /// - the port side's `hwcur`/`hwtail` must be slot indexes, else the
    ///   ring starts over from its initial state;
    /// - the application's CSB `head` must lie in `[hwcur, hwtail]` and its
    ///   `cur` in `[head, hwtail]`, else both become `hwcur`;
    /// - every slot must name a buffer of the region (not a reserved one)
    ///   and a length within it: a bad index becomes the slot's initial
    ///   buffer, a bad length 0.
    ///
    /// Nothing here trusts a value after reading it once; the worker that
    /// attaches validates every later one as for any client.
    pub fn adopt_migrated(&self, names: [&str; 2]) -> AdoptReport {
        let l = self.layout;
        let mut rep = AdoptReport::default();
        let hdr_before: RegionHeader = self.read_pod(0);
        // A migratable port carries no virtio-net header: our header, as
        // `create` wrote it, is the only one expected.
        rep.header_rewritten = hdr_before != l.header();
        self.write_pod(0, l.header());
        let g = l.end_geometry(0);
        let nifp = l.nifp_ofs[0];
        self.write_nifp_header(0, names[0]);
        let buf_size = g.buf_size;
        let mut k = 0;
        for (dir, rings, slots) in [
            (Dir::Tx, g.tx_rings, g.tx_slots),
            (Dir::Rx, g.rx_rings, g.rx_slots),
        ] {
            for r in 0..rings {
                let ofs = l.ring_ofs(0, dir, r);
                self.write_pod(nifp + nifp_ring_ofs(k), (ofs - nifp) as i64);
                k += 1;
                rep.rings += 1;
                self.write_pod(ofs + ring_field::BUF_OFS, l.buf_base as i64 - ofs as i64);
                self.write_pod(ofs + ring_field::NUM_SLOTS, slots);
                self.write_pod(ofs + ring_field::NR_BUF_SIZE, buf_size);
                self.write_pod(
                    ofs + ring_field::RINGID,
                    u16::try_from(r).unwrap_or(u16::MAX),
                );
                self.write_pod(
                    ofs + ring_field::DIR,
                    if dir == Dir::Tx { 0u16 } else { 1u16 },
                );
                let first = l.first_buf(0, dir, r);
                for s in 0..slots {
                    let so = ofs + slot_offset(s);
                    let mut slot: NetmapSlot = self.read_pod(so);
                    let mut bad = false;
                    if self.buf_ofs(slot.buf_idx).is_none() {
                        slot.buf_idx = first + s;
                        bad = true;
                    }
                    if u32::from(slot.len) > buf_size {
                        slot.len = 0;
                        bad = true;
                    }
                    if bad {
                        rep.slots_reset += 1;
                        self.write_pod(so, slot);
                    }
                }
                let c = CsbRef::new(self, 0, dir, r);
                let initial_tail = if dir == Dir::Tx { slots - 1 } else { 0 };
                let hwcur = c.hwcur().load(Ordering::Acquire);
                let hwtail = c.hwtail().load(Ordering::Acquire);
                let (hwcur, hwtail) = if hwcur < slots && hwtail < slots {
                    (hwcur, hwtail)
                } else {
                    rep.rings_reset += 1;
                    c.hwcur().store(0, Ordering::Relaxed);
                    c.hwtail().store(initial_tail, Ordering::Release);
                    (0, initial_tail)
                };
                // The application owns [hwcur, hwtail): its head and cur
                // may be anywhere from hwcur to hwtail (as `PortRing::app_head`
                // checks).
                let owned = arith::dist(hwcur, hwtail, slots);
                let head = c.head().load(Ordering::Acquire);
                let cur = c.cur().load(Ordering::Acquire);
                let end = arith::add(hwcur, owned, slots);
                let head_ok = arith::within(hwcur, owned, head, slots);
                let cur_ok =
                    head_ok && arith::within(head, arith::dist(head, end, slots), cur, slots);
                if !head_ok || !cur_ok {
                    rep.heads_reset += 1;
                    c.cur().store(hwcur, Ordering::Relaxed);
                    c.head().store(hwcur, Ordering::Release);
                    self.ring_at(self.ring_place(0, dir, r))
                        .set_pointers(hwcur, hwcur, hwtail);
                }
            }
        }
        rep
    }

    /// Writes end `end`'s `netmap_if` header, named `name` (cut to 15
    /// bytes).
    fn write_nifp_header(&self, end: usize, name: &str) {
        let g = self.layout.end_geometry(end);
        let mut ni_name = [0u8; 16];
        let src = name.as_bytes();
        let n = src.len().min(15);
        ni_name[..n].copy_from_slice(&src[..n]);
        self.write_pod(
            self.layout.nifp_at(end),
            NetmapIfHeader {
                ni_name,
                ni_version: NETMAP_API,
                ni_flags: NI_PRIV_MEM,
                ni_tx_rings: g.tx_rings,
                ni_rx_rings: g.rx_rings,
                ni_bufs_head: 0,
                ni_host_tx_rings: 0,
                ni_host_rx_rings: 0,
                spare: [0; 3],
            },
        );
    }

    fn init(&self, names: [&str; 2]) {
        let l = self.layout;
        self.write_pod(0, l.header());
        for end in 0..l.ends as usize {
            // A port's pipes are named when they are opened.
            self.init_end(end, names.get(end).copied().unwrap_or(""));
        }
    }

    /// Gives pipe `k` of a port's memory fresh rings, each end's slots
    /// holding the buffers the layout gives it, and names its ends: a pipe
    /// opened there anew. Buffers the program moved between the pipe's
    /// rings and the port's before stay where it put them (netmap's pipes
    /// in one allocator are the same); the port side validates every
    /// index it is handed, so at worst two slots of the program's share
    /// one buffer. Returns false when the port has no pipe `k`.
    pub fn reset_pipe(&self, k: u32, names: [&str; 2]) -> bool {
        let Some(ends) = self.layout.pipe_ends(k) else {
            return false;
        };
        for (end, name) in ends.into_iter().zip(names) {
            self.init_end(end, name);
        }
        true
    }

    /// Writes end `end`'s `netmap_if`, rings and CSB as new.
    fn init_end(&self, end: usize, end_name: &str) {
        let l = self.layout;
        let g = l.end_geometry(end);
        let nifp = l.nifp_at(end);
        self.write_nifp_header(end, end_name);
        let mut k = 0;
        for (dir, rings, slots) in [
            (Dir::Tx, g.tx_rings, g.tx_slots),
            (Dir::Rx, g.rx_rings, g.rx_slots),
        ] {
            for r in 0..rings {
                let ofs = l.ring_ofs(end, dir, r);
                self.write_pod(nifp + nifp_ring_ofs(k), (ofs - nifp) as i64);
                k += 1;
                let tail = if dir == Dir::Tx { slots - 1 } else { 0 };
                self.write_pod(
                    ofs,
                    NetmapRingHeader {
                        buf_ofs: l.buf_base as i64 - ofs as i64,
                        num_slots: slots,
                        nr_buf_size: g.buf_size,
                        // Below MAX_RINGS.
                        ringid: u16::try_from(r).unwrap_or(u16::MAX),
                        dir: if dir == Dir::Tx { 0 } else { 1 },
                        head: 0,
                        cur: 0,
                        tail,
                        flags: 0,
                        _pad0: 0,
                        ts_sec: 0,
                        ts_usec: 0,
                        offset_mask: 0,
                        buf_align: 0,
                        _pad1: [0; 56],
                        sem: [0; 128],
                    },
                );
                let first = l.first_buf(end, dir, r);
                for s in 0..slots {
                    self.write_pod(
                        ofs + slot_offset(s),
                        NetmapSlot {
                            buf_idx: first + s,
                            len: 0,
                            flags: 0,
                            ptr: 0,
                        },
                    );
                }
                let c = CsbRef::new(self, end, dir, r);
                c.init(tail);
            }
        }
    }

    /// Ring `idx` of direction `dir` of end `end`. Panics on indexes outside
    /// the layout (callers pass validated indexes).
    pub fn ring(&self, end: usize, dir: Dir, idx: u32) -> RingRef<'_> {
        self.ring_at(self.ring_place(end, dir, idx))
    }

    /// Where ring `idx` of `dir` of `end` sits; panics outside the layout.
    pub fn ring_place(&self, end: usize, dir: Dir, idx: u32) -> RingPlace {
        let g = self.layout.end_geometry(end);
        let (rings, slots) = match dir {
            Dir::Tx => (g.tx_rings, g.tx_slots),
            Dir::Rx => (g.rx_rings, g.rx_slots),
        };
        assert!(
            end < self.layout.ends as usize && idx < rings,
            "no such ring"
        );
        RingPlace {
            ofs: self.layout.ring_ofs(end, dir, idx),
            num_slots: slots,
            buf_size: g.buf_size,
            atok: self.layout.atok_ofs(end, dir, idx),
            ktoa: self.layout.ktoa_ofs(end, dir, idx),
        }
    }

    /// The ring at a place computed by [`Region::ring_place`] of this region.
    #[inline(always)]
    pub fn ring_at(&self, p: RingPlace) -> RingRef<'_> {
        RingRef {
            region: self,
            ofs: p.ofs,
            num_slots: p.num_slots,
            buf_size: p.buf_size,
        }
    }

    /// The CSB entry at a place computed by [`Region::ring_place`].
    #[inline(always)]
    pub fn csb_at(&self, p: RingPlace) -> CsbRef<'_> {
        CsbRef {
            region: self,
            atok: p.atok,
            ktoa: p.ktoa,
        }
    }

    /// The CSB entry of a ring.
    pub fn csb(&self, end: usize, dir: Dir, idx: u32) -> CsbRef<'_> {
        CsbRef::new(self, end, dir, idx)
    }

    /// Offset of buffer `idx`, or `None` when the index is not one a slot may
    /// carry (reserved or past the end).
    #[inline(always)]
    pub fn buf_ofs(&self, idx: u32) -> Option<usize> {
        if idx < RESERVED_BUFS || idx >= self.layout.nbufs {
            return None;
        }
        Some(self.layout.buf_base + idx as usize * self.layout.geometry.buf_size as usize)
    }

    /// Buffer size.
    #[inline(always)]
    pub fn buf_size(&self) -> u32 {
        self.layout.geometry.buf_size
    }

    /// Copies `len` bytes from buffer `src_idx` of `src` at `src_off` into
    /// buffer `dst_idx` of `self` at `dst_off`. Returns false, copying
    /// nothing, when either index or range is invalid.
    #[inline(always)]
    pub fn copy_from(
        &self,
        dst_idx: u32,
        dst_off: usize,
        src: &Region,
        src_idx: u32,
        src_off: usize,
        len: usize,
    ) -> bool {
        let (Some(d), Some(s)) = (self.buf_ofs(dst_idx), src.buf_ofs(src_idx)) else {
            return false;
        };
        if dst_off + len > self.buf_size() as usize || src_off + len > src.buf_size() as usize {
            return false;
        }
        let sp = src.ptr.as_ptr().wrapping_add(s + src_off);
        let dp = self.ptr.as_ptr().wrapping_add(d + dst_off);
        let same_buf = std::ptr::eq(self, src) && dst_idx == src_idx;
        if same_buf {
            // SAFETY: both ranges lie inside one buffer of this mapping
            // (checked above); `copy` tolerates the overlap.
            unsafe { std::ptr::copy(sp, dp, len) };
        } else {
            // SAFETY: both ranges were just checked to lie inside a buffer of
            // their mapping, and they are different buffers, so they do not
            // overlap. Concurrent writes by a misbehaving peer can only
            // garble the bytes, not move the ranges.
            unsafe { copy_exact(sp, dp, len) };
        }
        true
    }

    /// Hints the CPU to fetch the first cache line of buffer `idx` (nothing
    /// for an invalid index).
    #[inline(always)]
    pub fn prefetch_buf(&self, idx: u32) {
        if let Some(b) = self.buf_ofs(idx) {
            crate::copy::prefetch(self.ptr.as_ptr().wrapping_add(b));
        }
    }

    /// A read of the first 16 bytes of buffer `idx` (the Ethernet
    /// addresses and where a VLAN tag would be), or `None` for an invalid
    /// index. Bytes past the frame's length are whatever the buffer holds.
    #[inline(always)]
    pub fn read_head(&self, idx: u32) -> Option<[u8; 16]> {
        let b = self.buf_ofs(idx)?;
        // SAFETY: buffers are at least MIN_BUF_SIZE (128) bytes, so 16 bytes
        // from a valid buffer's start are inside the mapping; any bit pattern
        // is a valid [u8; 16].
        Some(unsafe { std::ptr::read_unaligned(self.ptr.as_ptr().add(b).cast::<[u8; 16]>()) })
    }

    /// Copies the first `N` bytes of buffer `idx` (`N` at most
    /// `MIN_BUF_SIZE`, so the copy has a constant size) into `out`. False,
    /// copying nothing, for an invalid index. Bytes past the frame's
    /// length are whatever the buffer holds.
    #[inline(always)]
    pub fn read_first<const N: usize>(&self, idx: u32, out: &mut [u8; N]) -> bool {
        const { assert!(N <= crate::layout::MIN_BUF_SIZE as usize) };
        let Some(b) = self.buf_ofs(idx) else {
            return false;
        };
        // SAFETY: buffers are at least MIN_BUF_SIZE bytes (checked by
        // `Geometry::validate`), so N bytes from a valid buffer's start are
        // inside the mapping; `out` is a distinct local array.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(b), out.as_mut_ptr(), N);
        }
        true
    }

    /// Copies bytes into buffer `idx` at `off`. False when out of range.
    pub fn write_buf(&self, idx: u32, off: usize, data: &[u8]) -> bool {
        let Some(b) = self.buf_ofs(idx) else {
            return false;
        };
        if off + data.len() > self.buf_size() as usize {
            return false;
        }
        // SAFETY: destination range checked to lie inside the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(b + off), data.len())
        };
        true
    }

    /// Copies bytes out of buffer `idx` at `off` into `out`. False when out
    /// of range.
    #[inline(always)]
    pub fn read_buf(&self, idx: u32, off: usize, out: &mut [u8]) -> bool {
        let Some(b) = self.buf_ofs(idx) else {
            return false;
        };
        if off + out.len() > self.buf_size() as usize {
            return false;
        }
        // SAFETY: source range checked to lie inside the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(b + off),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        true
    }

    /// A mutable view of buffer `idx`.
    ///
    /// # Safety
    /// The caller owns the buffer for the lifetime of the slice: no other
    /// slice of the same buffer exists in this process, and by the ring
    /// ownership rules no other process writes it meanwhile (a misbehaving
    /// peer can still garble the bytes, which changes data, not memory safety
    /// of this process, since the slice stays inside the mapping).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub unsafe fn buf_mut(&self, idx: u32) -> Option<&mut [u8]> {
        let b = self.buf_ofs(idx)?;
        // SAFETY: the range is one whole buffer inside the mapping; exclusivity
        // is the caller's promise.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(b), self.buf_size() as usize)
        })
    }

    /// Writes arbitrary bytes anywhere in the region: for tests that play a
    /// hostile client. Returns false when out of range. A test hook, built
    /// only with the `test-hooks` feature.
    #[cfg(feature = "test-hooks")]
    pub fn scribble(&self, off: usize, data: &[u8]) -> bool {
        if off.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: range checked against the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len())
        };
        true
    }
}

/// What [`Region::adopt_migrated`] found and reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdoptReport {
    /// Rings looked at.
    pub rings: u32,
    /// The header was not the one our layout writes (another geometry,
    /// another version, or written over).
    pub header_rewritten: bool,
    /// Rings whose `hwcur`/`hwtail` were no slot indexes: started over.
    pub rings_reset: u32,
    /// Rings whose application `head`/`cur` lay outside what it owns: set
    /// to `hwcur`.
    pub heads_reset: u32,
    /// Slots with a buffer index outside the region's buffers or a length
    /// past the buffer size.
    pub slots_reset: u32,
}

impl AdoptReport {
    /// Everything that was reset, counted once each.
    pub fn resets(&self) -> u64 {
        u64::from(self.header_rewritten)
            + u64::from(self.rings_reset)
            + u64::from(self.heads_reset)
            + u64::from(self.slots_reset)
    }
}

/// The offsets of one ring and its CSB entry, computed once from the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingPlace {
    /// Offset of the ring header.
    pub ofs: usize,
    /// Slots.
    pub num_slots: u32,
    /// Buffer size.
    pub buf_size: u32,
    /// Offset of the CSB atok half.
    pub atok: usize,
    /// Offset of the CSB ktoa half.
    pub ktoa: usize,
}

/// A ring inside a region.
#[derive(Clone, Copy)]
pub struct RingRef<'a> {
    region: &'a Region,
    ofs: usize,
    num_slots: u32,
    buf_size: u32,
}

impl<'a> RingRef<'a> {
    /// Slots in the ring (from the layout, not from shared memory).
    #[inline(always)]
    pub fn num_slots(&self) -> u32 {
        self.num_slots
    }

    /// Buffer size.
    #[inline(always)]
    pub fn buf_size(&self) -> u32 {
        self.buf_size
    }

    /// The region.
    #[inline(always)]
    pub fn region(&self) -> &'a Region {
        self.region
    }

    /// Offset of the ring in the region.
    pub fn offset(&self) -> usize {
        self.ofs
    }

    #[inline(always)]
    fn slot_ofs(&self, i: u32) -> usize {
        assert!(i < self.num_slots, "slot {i} out of range");
        self.ofs + slot_offset(i)
    }

    /// Reads slot `i` (a snapshot; validate what it says before use).
    #[inline(always)]
    pub fn slot(&self, i: u32) -> NetmapSlot {
        self.region.read_pod(self.slot_ofs(i))
    }

    /// Writes slot `i`.
    #[inline(always)]
    pub fn set_slot(&self, i: u32, s: NetmapSlot) {
        self.region.write_pod(self.slot_ofs(i), s)
    }

    /// Slot `i` as two words: `buf_idx | len << 32 | flags << 48`, and `ptr`.
    /// One 8-byte load each, for hot loops that move slots around.
    #[inline(always)]
    pub fn slot_words(&self, i: u32) -> (u64, u64) {
        let o = self.slot_ofs(i);
        (self.region.read_pod(o), self.region.read_pod(o + 8))
    }

    /// The first word of slot `i` (see [`RingRef::slot_words`]).
    #[inline(always)]
    pub fn slot_word0(&self, i: u32) -> u64 {
        self.region.read_pod(self.slot_ofs(i))
    }

    /// Writes the first word of slot `i` (see [`RingRef::slot_words`]).
    #[inline(always)]
    pub fn set_slot_word0(&self, i: u32, w0: u64) {
        self.region.write_pod(self.slot_ofs(i), w0)
    }

    /// The pipe move: hands `m` packets from slots `a..` of this ring to
    /// slots `b..` of `dst` (another ring of the same region) by swapping
    /// buffer indexes. `dst` gets each packet's buffer, length and
    /// `NS_MOREFRAG`; this ring gets `dst`'s empty buffers. Both sides are
    /// marked `NS_BUF_CHANGED`. Returns the positions after the last slot
    /// moved on each ring. Nothing is validated here: buffer indexes are
    /// only exchanged, never dereferenced.
    pub fn swap_into(&self, dst: &RingRef<'_>, mut a: u32, mut b: u32, mut m: u32) -> (u32, u32) {
        const CHANGED: u64 = (crate::layout::NS_BUF_CHANGED as u64) << 48;
        const TO_PEER: u64 = 0x0000_ffff_ffff_ffff | ((crate::layout::NS_MOREFRAG as u64) << 48);
        assert!(
            std::ptr::eq(self.region, dst.region),
            "a pipe swaps within one region"
        );
        assert!(a < self.num_slots && b < dst.num_slots && m < self.num_slots && m < dst.num_slots);
        // Bounded: every pass moves at least one slot (run >= 1 since a < n, b < dn).
        while m > 0 {
            let run = m.min(self.num_slots - a).min(dst.num_slots - b);
            let sp = self
                .region
                .ptr
                .as_ptr()
                .wrapping_add(self.slot_ofs(a))
                .cast::<u64>();
            let dp = self
                .region
                .ptr
                .as_ptr()
                .wrapping_add(dst.slot_ofs(b))
                .cast::<u64>();
            for k in 0..run as usize {
                // SAFETY: slots a..a+run and b..b+run lie inside their rings
                // (run stops at each ring's end; slot_ofs checked the first),
                // each slot is 16 bytes, 8-aligned; volatile since the peer
                // process shares them.
                unsafe {
                    let w0 = std::ptr::read_volatile(sp.add(2 * k));
                    let d = std::ptr::read_volatile(dp.add(2 * k)) & 0xffff_ffff;
                    std::ptr::write_volatile(dp.add(2 * k), (w0 & TO_PEER) | CHANGED);
                    std::ptr::write_volatile(sp.add(2 * k), (w0 & !0xffff_ffff) | d | CHANGED);
                }
            }
            a = crate::arith::add(a, run, self.num_slots);
            b = crate::arith::add(b, run, dst.num_slots);
            m -= run;
        }
        (a, b)
    }

    /// Writes `len` and `flags` of slot `i`.
    #[inline(always)]
    pub fn set_len_flags(&self, i: u32, len: u16, flags: u16) {
        self.region
            .write_pod(self.slot_ofs(i) + 4, (len as u32) | ((flags as u32) << 16))
    }

    /// Reads `buf_idx` of slot `i`.
    #[inline(always)]
    pub fn buf_idx(&self, i: u32) -> u32 {
        self.region.read_pod(self.slot_ofs(i))
    }

    /// Writes `buf_idx` of slot `i`.
    #[inline(always)]
    pub fn set_buf_idx(&self, i: u32, b: u32) {
        self.region.write_pod(self.slot_ofs(i), b)
    }

    /// The header field at `field` (one of [`ring_field`]).
    #[inline(always)]
    pub fn field(&self, field: usize) -> &'a AtomicU32 {
        self.region.u32_at(self.ofs + field)
    }

    /// Writes head, cur and tail in the header (what netmap macros read).
    #[inline(always)]
    pub fn set_pointers(&self, head: u32, cur: u32, tail: u32) {
        self.field(ring_field::HEAD).store(head, Ordering::Relaxed);
        self.field(ring_field::CUR).store(cur, Ordering::Relaxed);
        self.field(ring_field::TAIL).store(tail, Ordering::Relaxed);
    }
}

/// One ring's CSB entry: the `atok` and `ktoa` halves.
#[derive(Clone, Copy)]
pub struct CsbRef<'a> {
    region: &'a Region,
    atok: usize,
    ktoa: usize,
}

impl<'a> CsbRef<'a> {
    fn new(region: &'a Region, end: usize, dir: Dir, idx: u32) -> Self {
        let l = region.layout();
        CsbRef {
            region,
            atok: l.atok_ofs(end, dir, idx),
            ktoa: l.ktoa_ofs(end, dir, idx),
        }
    }

    fn init(&self, tail: u32) {
        self.region.write_pod(self.atok, CsbAtok::default());
        self.region.write_pod(
            self.ktoa,
            CsbKtoa {
                hwtail: tail,
                ..CsbKtoa::default()
            },
        );
    }

    /// `atok.head`.
    #[inline(always)]
    pub fn head(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.atok + csb_field::HEAD)
    }
    /// `atok.cur`.
    #[inline(always)]
    pub fn cur(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.atok + csb_field::CUR)
    }
    /// `atok.appl_need_kick`.
    #[inline(always)]
    pub fn appl_need_kick(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.atok + csb_field::APPL_NEED_KICK)
    }
    /// `atok.kick_cost_ns` (a ringswitch extension).
    #[inline(always)]
    pub fn appl_kick_cost_ns(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.atok + csb_field::APPL_KICK_COST_NS)
    }
    /// `ktoa.hwcur`.
    #[inline(always)]
    pub fn hwcur(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.ktoa + csb_field::HWCUR)
    }
    /// `ktoa.hwtail`.
    #[inline(always)]
    pub fn hwtail(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.ktoa + csb_field::HWTAIL)
    }
    /// `ktoa.kern_need_kick`.
    #[inline(always)]
    pub fn kern_need_kick(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.ktoa + csb_field::KERN_NEED_KICK)
    }
    /// `ktoa.kick_cost_ns` (a ringswitch extension).
    #[inline(always)]
    pub fn kick_cost_ns(&self) -> &'a AtomicU32 {
        self.region.u32_at(self.ktoa + csb_field::KICK_COST_NS)
    }
    /// Offset of the atok half (for tests that scribble over it). A test
    /// hook, built only with the `test-hooks` feature.
    #[cfg(feature = "test-hooks")]
    pub fn atok_offset(&self) -> usize {
        self.atok
    }
}

#[cfg(test)]
// Test fixtures, not the data path.
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;

    /// A copy made page by page in ascending order while the port side
    /// keeps delivering (QEMU migrating a paused guest's passthrough
    /// region; the daemon's writes are never sent again) holds no frame
    /// under its `hwtail` whose slot or buffer is older than that `hwtail`:
    /// the CSB comes before the rings and the buffers, and a frame's
    /// buffer and slot are written before its `hwtail`. One frame is
    /// delivered between every two pages copied; frames have one of two
    /// lengths (a slot's frame of one lap the other length than the one
    /// of the lap before), and each frame's bytes say its length.
    #[test]
    fn a_copy_in_address_order_never_sees_a_frame_newer_than_its_slot() {
        let l = RegionLayout::new(Geometry::default(), 1).unwrap();
        let src = Region::create(l, ["vale0:src", ""]).unwrap();
        let n = l.geometry.rx_slots;
        let ring = src.ring(0, Dir::Rx, 0);
        let csb = src.csb(0, Dir::Rx, 0);
        let mut tail = 0u32;
        // The guest's head: the port side fills only the slots the guest
        // gave back, up to one short of it (a full ring then drops).
        let mut head = 0u32;
        let deliver = |k: u32, tail: &mut u32, head: u32| {
            if (*tail + 1) % n == head {
                return;
            }
            // Neighbours differ, and so do a slot's frames of two laps.
            let len: u16 = if (k + k / n).is_multiple_of(2) {
                60
            } else {
                1500
            };
            let mut slot = ring.slot(*tail);
            let mut bytes = [0u8; 4];
            bytes[..2].copy_from_slice(&len.to_le_bytes());
            bytes[2..].copy_from_slice(&(k as u16).to_le_bytes());
            assert!(src.write_buf(slot.buf_idx, 0, &bytes));
            slot.len = len;
            ring.set_slot(*tail, slot);
            *tail = (*tail + 1) % n;
            csb.hwtail().store(*tail, Ordering::Release);
        };
        // Two laps of the ring, the guest reading as they come, so that
        // every slot held a frame of the other length before; then the
        // guest stops (it is paused) with everything read.
        for k in 0..2 * n {
            deliver(k, &mut tail, head);
            head = tail;
        }
        csb.head().store(head, Ordering::Release);
        let dst = Region::create(l, ["vale0:dst", ""]).unwrap();
        let pages = l.size / PAGE;
        for (p, k) in (0..pages).zip(2 * n..) {
            // SAFETY: page `p` lies within both mappings, which are
            // distinct and `l.size` bytes long.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.base().add(p * PAGE),
                    dst.base().add(p * PAGE),
                    PAGE,
                )
            };
            deliver(k, &mut tail, head);
        }
        let c = dst.csb(0, Dir::Rx, 0);
        let (head, hwtail) = (
            c.head().load(Ordering::Acquire),
            c.hwtail().load(Ordering::Acquire),
        );
        let dring = dst.ring(0, Dir::Rx, 0);
        // The frames the guest reads on the destination.
        let mut i = head;
        while i != hwtail {
            let slot = dring.slot(i);
            let mut bytes = [0u8; 4];
            assert!(dst.read_buf(slot.buf_idx, 0, &mut bytes));
            let said = u16::from_le_bytes([bytes[0], bytes[1]]);
            assert_eq!(
                slot.len, said,
                "slot {i}: length {} but its frame says {said}",
                slot.len
            );
            i = (i + 1) % n;
        }
    }

    /// A migrated region: the source's consistent state is kept as it is
    /// (frames queued for the guest stay readable); everything out of range
    /// is reset and counted; the daemon's own parts are written again.
    #[test]
    fn a_migrated_region_keeps_what_is_consistent_and_resets_the_rest() {
        let l = RegionLayout::new(Geometry::default(), 1).unwrap();
        let src = Region::create(l, ["vale0:src", ""]).unwrap();
        let n = l.geometry.rx_slots;
        // The source's switch delivered 10 frames, the guest consumed 4.
        let rx = src.csb(0, Dir::Rx, 0);
        rx.hwcur().store(4, Ordering::Relaxed);
        rx.hwtail().store(10, Ordering::Relaxed);
        rx.head().store(4, Ordering::Relaxed);
        rx.cur().store(6, Ordering::Relaxed);
        let ring = src.ring(0, Dir::Rx, 0);
        let mut s5 = ring.slot(5);
        s5.len = 60;
        ring.set_slot(5, s5);
        assert!(src.write_buf(s5.buf_idx, 0, b"frame5"));
        // The destination's region is overwritten with the source's bytes.
        let dst = Region::create(l, ["vale0:dst", ""]).unwrap();
        // SAFETY: both mappings are `len` bytes long and distinct.
        unsafe { std::ptr::copy_nonoverlapping(src.base(), dst.base(), dst.len()) };
        let rep = dst.adopt_migrated(["vale0:dst", ""]);
        assert_eq!(rep.resets(), 0, "{rep:?}");
        assert_eq!(dst.ni_name(0), b"vale0:dst");
        let c = dst.csb(0, Dir::Rx, 0);
        assert_eq!(
            (
                c.hwcur().load(Ordering::Relaxed),
                c.hwtail().load(Ordering::Relaxed)
            ),
            (4, 10)
        );
        assert_eq!(c.cur().load(Ordering::Relaxed), 6);
        let mut out = [0u8; 6];
        assert!(dst.read_buf(dst.ring(0, Dir::Rx, 0).slot(5).buf_idx, 0, &mut out));
        assert_eq!(&out, b"frame5");

        // Now everything a hostile or torn copy could leave.
        dst.write_pod(0, *b"XXXXXXXX");
        let c = dst.csb(0, Dir::Tx, 0);
        c.hwcur().store(n + 7, Ordering::Relaxed);
        let rx = dst.csb(0, Dir::Rx, 0);
        rx.head().store(11, Ordering::Relaxed); // past hwtail 10
        let ring = dst.ring(0, Dir::Rx, 0);
        let mut bad = ring.slot(3);
        bad.buf_idx = u32::MAX;
        bad.len = u16::MAX;
        ring.set_slot(3, bad);
        let mut reserved = ring.slot(7);
        reserved.buf_idx = 1;
        ring.set_slot(7, reserved);
        let rep = dst.adopt_migrated(["vale0:dst", ""]);
        assert!(rep.header_rewritten);
        assert_eq!(
            (rep.rings_reset, rep.heads_reset, rep.slots_reset),
            (1, 1, 2),
            "{rep:?}"
        );
        assert_eq!(rep.resets(), 5);
        assert_eq!(dst.header(), l.header());
        let c = dst.csb(0, Dir::Tx, 0);
        assert_eq!(
            (
                c.hwcur().load(Ordering::Relaxed),
                c.hwtail().load(Ordering::Relaxed)
            ),
            (0, n - 1)
        );
        assert_eq!(
            (
                rx.head().load(Ordering::Relaxed),
                rx.cur().load(Ordering::Relaxed)
            ),
            (4, 4)
        );
        let ring = dst.ring(0, Dir::Rx, 0);
        let first = l.first_buf(0, Dir::Rx, 0);
        assert_eq!((ring.slot(3).buf_idx, ring.slot(3).len), (first + 3, 0));
        assert_eq!(ring.slot(7).buf_idx, first + 7);
        assert_eq!(
            dst.adopt_migrated(["vale0:dst", ""]).resets(),
            0,
            "a second look finds nothing"
        );
    }

    #[test]
    fn a_region_moved_onto_another_takes_its_addresses() {
        let l = RegionLayout::new(Geometry::default(), 1).unwrap();
        for old_first in [true, false] {
            let old = Arc::new(Region::create(l, ["a", "b"]).unwrap());
            let new = Region::create(l, ["a", "b"]).unwrap();
            assert!(old.write_buf(5, 0, b"old"));
            assert!(new.write_buf(5, 0, b"new"));
            let base = old.base();
            let moved = new.move_onto(old.clone()).unwrap();
            assert_eq!(moved.base(), base);
            let mut out = [0u8; 3];
            assert!(old.read_buf(5, 0, &mut out));
            assert_eq!(&out, b"new", "the old addresses show the new region");
            assert!(moved.write_buf(6, 0, b"xyz"));
            assert!(old.read_buf(6, 0, &mut out));
            assert_eq!(&out, b"xyz");
            // Either may go first: the addresses stay mapped until both go.
            if old_first {
                drop(old);
                assert!(moved.read_buf(5, 0, &mut out));
                assert_eq!(&out, b"new");
                drop(moved);
            } else {
                drop(moved);
                assert!(old.read_buf(5, 0, &mut out));
                assert_eq!(&out, b"new");
                drop(old);
            }
        }
        // Another layout is refused.
        let old = Arc::new(Region::create(l, ["a", "b"]).unwrap());
        let other = RegionLayout::new(
            Geometry {
                tx_slots: 100,
                ..Geometry::default()
            },
            1,
        )
        .unwrap();
        let new = Region::create(other, ["a", "b"]).unwrap();
        let e = new.move_onto(old.clone()).unwrap_err();
        assert!(e.to_string().contains("another layout"), "{e}");
        assert_eq!(
            old.ring(0, Dir::Tx, 0).num_slots(),
            1024,
            "old is untouched"
        );
    }

    #[test]
    fn create_init_and_reopen() {
        let l = RegionLayout::new(
            Geometry {
                tx_slots: 100,
                ..Geometry::default()
            },
            2,
        )
        .unwrap();
        let r = Region::create(l, ["a", "b"]).unwrap();
        let tx = r.ring(0, Dir::Tx, 0);
        assert_eq!(tx.num_slots(), 100);
        assert_eq!(tx.field(ring_field::TAIL).load(Ordering::Relaxed), 99);
        assert_eq!(tx.slot(0).buf_idx, 2);
        assert_eq!(r.ring(1, Dir::Rx, 0).num_slots(), 100, "end 1 is mirrored");
        assert_eq!(r.csb(0, Dir::Tx, 0).hwtail().load(Ordering::Relaxed), 99);
        let fd = r.dup_fd().unwrap();
        let r2 = Region::open(fd).unwrap();
        assert_eq!(r2.layout(), r.layout());
        assert!(r.write_buf(5, 0, b"hello"));
        let mut out = [0u8; 5];
        assert!(r2.read_buf(5, 0, &mut out));
        assert_eq!(&out, b"hello");
        assert!(!r.write_buf(0, 0, b"x"), "reserved buffer");
        assert!(!r.write_buf(l.nbufs, 0, b"x"), "past the end");
        assert!(!r.write_buf(2, 2047, b"xy"), "past the buffer");
    }

    #[test]
    fn a_pipe_in_a_ports_memory_is_named_and_made_fresh() {
        let l = RegionLayout::with_pipes(Geometry::default(), 2).unwrap();
        let r = Region::create(l, ["vale0:lb", ""]).unwrap();
        assert_eq!(&r.ni_name(0)[..8], b"vale0:lb");
        let [a, b] = l.pipe_ends(1).unwrap();
        // The program moved a buffer of the port's into the pipe's ring.
        let tx = r.ring(a, Dir::Tx, 0);
        tx.set_buf_idx(3, l.first_buf(0, Dir::Rx, 0));
        r.ring(a, Dir::Tx, 0)
            .field(ring_field::HEAD)
            .store(7, Ordering::Relaxed);
        assert!(r.reset_pipe(1, ["vale0:lb{4", "vale0:lb}4"]));
        assert_eq!(&r.ni_name(a)[..10], b"vale0:lb{4");
        assert_eq!(&r.ni_name(b)[..10], b"vale0:lb}4");
        assert_eq!(tx.buf_idx(3), l.first_buf(a, Dir::Tx, 0) + 3);
        assert_eq!(tx.field(ring_field::HEAD).load(Ordering::Relaxed), 0);
        assert_eq!(tx.field(ring_field::TAIL).load(Ordering::Relaxed), 1023);
        // Buffers of a pipe are buffers of the port's memory.
        assert!(r.buf_ofs(l.first_buf(b, Dir::Rx, 0) + 1023).is_some());
        assert!(!r.reset_pipe(2, ["x", "y"]), "no third pipe");
    }

    #[test]
    fn swap_into_exchanges_buffers_across_the_wrap() {
        let g = Geometry {
            tx_slots: 64,
            rx_slots: 64,
            ..Geometry::default()
        };
        let r = Region::create(RegionLayout::new(g, 2).unwrap(), ["a", "b"]).unwrap();
        let (tx, rx) = (r.ring(0, Dir::Tx, 0), r.ring(1, Dir::Rx, 0));
        for i in 0..64 {
            tx.set_len_flags(
                i,
                100 + i as u16,
                if i == 62 {
                    crate::layout::NS_MOREFRAG
                } else {
                    0
                },
            );
        }
        let before_tx: Vec<u32> = (0..64).map(|i| tx.buf_idx(i)).collect();
        let before_rx: Vec<u32> = (0..64).map(|i| rx.buf_idx(i)).collect();
        // 10 slots from tx 60 (wraps at 64) into rx 58 (wraps too).
        let (a, b) = tx.swap_into(&rx, 60, 58, 10);
        assert_eq!((a, b), (6, 4));
        for k in 0..10u32 {
            let (i, j) = ((60 + k) % 64, (58 + k) % 64);
            assert_eq!(rx.buf_idx(j), before_tx[i as usize]);
            assert_eq!(tx.buf_idx(i), before_rx[j as usize]);
            let s = rx.slot(j);
            assert_eq!(s.len, 100 + i as u16);
            assert_ne!(s.flags & crate::layout::NS_BUF_CHANGED, 0);
            assert_eq!(s.flags & crate::layout::NS_MOREFRAG != 0, i == 62);
        }
        assert_eq!(tx.buf_idx(7), before_tx[7], "untouched past the run");
    }

    #[test]
    fn copies_exactly_len_bytes() {
        let l = RegionLayout::new(Geometry::default(), 1).unwrap();
        let a = Region::create(l, ["a", ""]).unwrap();
        let b = Region::create(l, ["b", ""]).unwrap();
        let src: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8 + 1).collect();
        assert!(a.write_buf(3, 0, &src));
        for len in [
            0usize, 1, 7, 8, 9, 16, 17, 31, 32, 33, 60, 64, 65, 100, 128, 129, 1514, 2048,
        ] {
            assert!(b.write_buf(4, 0, &[0u8; 2048]));
            assert!(b.copy_from(4, 0, &a, 3, 0, len));
            let mut out = vec![0u8; 2048];
            assert!(b.read_buf(4, 0, &mut out));
            assert_eq!(&out[..len], &src[..len], "len {len}");
            assert!(
                out[len..].iter().all(|&x| x == 0),
                "len {len}: wrote past the end"
            );
        }
        assert!(
            !b.copy_from(4, 2000, &a, 3, 0, 60),
            "past the destination buffer"
        );
        assert!(!b.copy_from(1, 0, &a, 3, 0, 60), "reserved buffer");
        assert_eq!(a.read_head(3).unwrap()[..3], src[..3]);
        assert!(a.read_head(0).is_none());
    }

    #[test]
    fn netmap_addressing_reaches_the_rings() {
        // Walk the region the way a netmap application does: from nifp through
        // ring_ofs to the ring, then through buf_ofs to a slot's buffer.
        let l = RegionLayout::new(
            Geometry {
                tx_rings: 2,
                rx_rings: 3,
                ..Geometry::default()
            },
            1,
        )
        .unwrap();
        let r = Region::create(l, ["p", ""]).unwrap();
        let nifp = l.nifp_ofs[0];
        let hdr: NetmapIfHeader = r.read_pod(nifp);
        assert_eq!(hdr.ni_tx_rings, 2);
        assert_eq!(hdr.ni_rx_rings, 3);
        assert_eq!(&hdr.ni_name[..2], b"p\0");
        let rx1_ofs: i64 = r.read_pod(nifp + nifp_ring_ofs(1 + 2));
        let ring_ofs = (nifp as i64 + rx1_ofs) as usize;
        assert_eq!(ring_ofs, l.ring_ofs(0, Dir::Rx, 1));
        let rh: NetmapRingHeader = r.read_pod(ring_ofs);
        assert_eq!(rh.dir, 1);
        assert_eq!(rh.ringid, 1);
        let slot: NetmapSlot = r.read_pod(ring_ofs + RING_SLOTS_OFFSET);
        let buf =
            (ring_ofs as i64 + rh.buf_ofs + slot.buf_idx as i64 * rh.nr_buf_size as i64) as usize;
        assert_eq!(Some(buf), r.buf_ofs(slot.buf_idx));
    }

    #[test]
    fn refuses_unsealed_or_foreign_fds() {
        // SAFETY: plain memfd_create with a literal name.
        let raw = unsafe { libc::memfd_create(c"x".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: fresh fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        assert!(matches!(Region::open(fd), Err(RegionError::Invalid(_))));
    }
}
