//! One AF_XDP socket with its own UMEM: a [`FrameQueue`].
//!
//! The UMEM is `2 * ring` frames of `frame_size` bytes in an anonymous
//! mapping:
//!
//! - frames `[0, ring)` are RX frames. They start in the fill ring; the
//!   kernel hands them back filled on the RX ring; `take_batch` shows each
//!   one to its caller and puts it straight back on the fill ring. The fill
//!   ring holds `ring` entries, so there is always room for them.
//! - frames `[ring, 2 * ring)` are TX frames. They start on our free list;
//!   `tx_push` copies a frame into one and queues a TX descriptor; the
//!   kernel returns it on the completion ring once sent, and it goes back on
//!   the free list. A TX frame is marked in flight from `tx_push` until its
//!   completion, so a completion the kernel should not have produced (out
//!   of range, or for a frame not in flight) is dropped and counted, and
//!   the free list can never hold more than `ring` frames.
//!
//! Every RX descriptor is checked before its frame is read: the address in
//! an RX frame, the length inside that frame, no multi-buffer flag.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use ringswitch_frame::{Caps, FrameQueue, OffloadHdr, PushError, QueueStats, Stage, Taken, Wake};

use super::ffi::{self, XdpDesc, XskSocket, XskUmem};
use super::ring::Ring;
use super::{libxdp_lock, log, XdpMode, NEEDS};
use crate::{DevError, Driver};

/// Copy-mode `sendto` kicks per flush when the kernel cannot be told to
/// take a whole ring per kick (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17+): it
/// then takes 32 descriptors per kick.
const MAX_KICKS_OLD_KERNEL: u32 = 4;

/// Where the frames live: an anonymous, page-aligned mapping.
struct Area {
    ptr: *mut u8,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // SAFETY: a new private anonymous mapping; no address hint, no
        // file. The result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Area { ptr: p.cast(), len })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once, after the UMEM that
        // registered it was deleted (field order of `XdpQueue`).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A libxdp UMEM with its fill and completion rings.
struct Umem {
    raw: *mut XskUmem,
    fill: Ring,
    comp: Ring,
}

impl Drop for Umem {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        // SAFETY: created by `xsk_umem__create`, deleted once, after its
        // socket (field order of `XdpQueue`); libxdp unmaps the rings
        // through `fill` and `comp`, which are still alive here.
        unsafe { ffi::xsk_umem__delete(self.raw) };
    }
}

/// A libxdp socket with its RX and TX rings.
struct Socket {
    raw: *mut XskSocket,
    rx: Ring,
    tx: Ring,
}

impl Drop for Socket {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let _g = libxdp_lock();
        // SAFETY: created by `xsk_socket__create`, deleted once, before
        // its UMEM. libxdp takes the socket out of its program's map and,
        // if it was the last socket on the interface, removes the program.
        unsafe { ffi::xsk_socket__delete(self.raw) };
    }
}

/// What a descriptor read from the RX ring turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RxDesc {
    /// A frame: byte offset and length in the UMEM, and the address of its
    /// RX frame to give back.
    Frame { off: usize, len: usize, base: u64 },
    /// Bad length or flags, but the address is one of our RX frames: drop
    /// the frame and give its buffer back.
    Bad { base: u64 },
    /// An address outside our RX frames: drop it; no buffer to give back.
    Lost,
}

/// Checks an RX descriptor against the UMEM geometry.
pub(super) fn check_rx(d: &XdpDesc, frame_size: u32, rx_frames: u32) -> RxDesc {
    let fs = u64::from(frame_size);
    if d.addr >= u64::from(rx_frames) * fs {
        return RxDesc::Lost;
    }
    let base = d.addr - d.addr % fs;
    let end = (d.addr - base) + u64::from(d.len);
    if d.len == 0 || end > fs || d.options & ffi::XDP_PKT_CONTD != 0 {
        return RxDesc::Bad { base };
    }
    let Ok(off) = usize::try_from(d.addr) else {
        return RxDesc::Bad { base };
    };
    RxDesc::Frame {
        off,
        len: d.len as usize,
        base,
    }
}

/// Index among the TX frames of a completed address, if it is one.
pub(super) fn check_completion(
    addr: u64,
    frame_size: u32,
    rx_frames: u32,
    tx_frames: u32,
) -> Option<usize> {
    let fs = u64::from(frame_size);
    let lo = u64::from(rx_frames) * fs;
    let hi = lo + u64::from(tx_frames) * fs;
    if addr < lo || addr >= hi || !addr.is_multiple_of(fs) {
        return None;
    }
    usize::try_from((addr - lo) / fs).ok()
}

/// The shape of a queue's memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    /// Descriptors per ring, and frames for each direction.
    pub ring: u32,
    /// Bytes per UMEM frame: 2048 or 4096.
    pub frame_size: u32,
    /// Longest frame to transmit: the MTU plus an Ethernet header and a
    /// VLAN tag, at most `frame_size`.
    pub max_frame: u32,
}

/// Why [`XdpQueue::open`] failed.
pub(super) enum OpenError {
    /// The queue already has a socket: maybe one closed a moment ago,
    /// which the kernel releases in the background; worth retrying.
    QueueBusy(DevError),
    /// Anything else.
    Other(DevError),
}

impl From<DevError> for OpenError {
    fn from(e: DevError) -> OpenError {
        OpenError::Other(e)
    }
}

/// One AF_XDP socket on one queue of a NIC.
pub(super) struct XdpQueue {
    // Dropped in this order: socket, UMEM, mapping.
    sock: Socket,
    umem: Umem,
    area: Area,
    fd: RawFd,
    frame_size: u32,
    /// Longest frame `tx_push` takes.
    max_frame: u32,
    /// RX frames, TX frames: both the ring size.
    frames: u32,
    /// Free TX frames, as indexes among the TX frames. Capacity `frames`,
    /// never exceeded (see `tx_in_flight`).
    tx_free: Vec<u32>,
    /// Per TX frame: handed to the kernel and not completed yet.
    tx_in_flight: Vec<bool>,
    /// TX descriptors written since the last flush.
    tx_queued: u32,
    /// RX frames the fill ring had no room for (a kernel bug): given back
    /// at the next batch. Capacity `frames`.
    rx_spare: Vec<u64>,
    zero_copy: bool,
    /// Copy mode: the kernel takes a whole ring per `sendto`.
    tx_budget_set: bool,
    /// The last kick said the interface is down.
    down: bool,
    bad_rx: u64,
    bad_completions: u64,
    pub(crate) driver: Driver,
}

// SAFETY: the raw pointers are this queue's own (its libxdp socket and
// UMEM, its mapping, and ring memory libxdp mapped for them); nothing else
// holds them, libxdp keeps no thread affinity, and the queue is used by one
// thread at a time (`&mut self`).
unsafe impl Send for XdpQueue {}

impl XdpQueue {
    /// Opens queue `queue` of `ifname`: a UMEM of `2 * geo.ring` frames of
    /// `geo.frame_size` bytes and a socket bound to the queue. The first socket
    /// on the interface makes libxdp attach its program in `mode`. Call
    /// with the libxdp lock held.
    pub(super) fn open(
        ifname: &str,
        queue: u32,
        mode: XdpMode,
        geo: Geometry,
    ) -> Result<XdpQueue, OpenError> {
        let Geometry {
            ring,
            frame_size,
            max_frame,
        } = geo;
        let frames = 2 * ring;
        let bytes = frames as usize * frame_size as usize;
        let area = Area::new(bytes).map_err(|e| DevError::Io {
            what: format!(
                "allocating {} MiB for the UMEM of {ifname} queue {queue}",
                bytes >> 20
            ),
            source: e,
        })?;
        let cname = CString::new(ifname).map_err(|_| DevError::BadName {
            name: ifname.to_string(),
            why: "it contains a NUL byte",
        })?;

        let mut umem = Umem {
            raw: std::ptr::null_mut(),
            fill: Ring::new(ring),
            comp: Ring::new(ring),
        };
        let ucfg = ffi::XskUmemConfig {
            fill_size: ring,
            comp_size: ring,
            frame_size,
            frame_headroom: 0,
            flags: 0,
        };
        // SAFETY: the area is ours, page aligned, `bytes` long, and
        // outlives the UMEM (field order of `XdpQueue`); the ring structs
        // are boxed, so the addresses libxdp keeps stay valid until the
        // UMEM is deleted; the config lives across the call.
        let r = unsafe {
            ffi::xsk_umem__create(
                &mut umem.raw,
                area.ptr.cast(),
                bytes as u64,
                umem.fill.as_mut_ptr(),
                umem.comp.as_mut_ptr(),
                &ucfg,
            )
        };
        if r != 0 {
            // Not a UMEM: nothing for `Umem::drop` to delete.
            umem.raw = std::ptr::null_mut();
            let e = io::Error::from_raw_os_error(-r);
            return Err(OpenError::Other(match -r {
                // xdp_umem_account_pages: over RLIMIT_MEMLOCK.
                libc::ENOBUFS | libc::ENOMEM => DevError::Permission {
                    what: format!(
                        "locking {} MiB of UMEM for {ifname} queue {queue}",
                        bytes >> 20
                    ),
                    needs: "CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK",
                },
                _ => DevError::io(
                    format!("registering the UMEM of {ifname} queue {queue}"),
                    NEEDS,
                    e,
                ),
            }));
        }
        if !umem.fill.check(8) || !umem.comp.check(8) {
            return Err(bad_mapping(ifname, queue, "fill and completion").into());
        }

        let mut sock = Socket {
            raw: std::ptr::null_mut(),
            rx: Ring::new(ring),
            tx: Ring::new(ring),
        };
        let (xdp_flags, bind_flags) = match mode {
            // No copy/zero-copy flag: the kernel uses zero copy where the
            // driver can and copies otherwise; XDP_OPTIONS says which.
            XdpMode::Native => (ffi::XDP_FLAGS_DRV_MODE, ffi::XDP_USE_NEED_WAKEUP),
            XdpMode::Generic => (
                ffi::XDP_FLAGS_SKB_MODE,
                ffi::XDP_USE_NEED_WAKEUP | ffi::XDP_COPY,
            ),
        };
        let scfg = ffi::XskSocketConfig {
            rx_size: ring,
            tx_size: ring,
            libxdp_flags: 0,
            xdp_flags,
            bind_flags,
        };
        log::clear_kernel_message();
        // SAFETY: valid out pointer, NUL-terminated name, the UMEM just
        // created (with no socket yet, so this one takes its fill and
        // completion rings), boxed ring structs that outlive the socket,
        // config alive across the call. The libxdp lock is held.
        let r = unsafe {
            ffi::xsk_socket__create(
                &mut sock.raw,
                cname.as_ptr(),
                queue,
                umem.raw,
                sock.rx.as_mut_ptr(),
                sock.tx.as_mut_ptr(),
                &scfg,
            )
        };
        if r != 0 {
            // Not a socket: nothing for `Socket::drop` to delete.
            sock.raw = std::ptr::null_mut();
            let e = create_error(ifname, queue, mode, -r);
            return Err(if -r == libc::EBUSY {
                OpenError::QueueBusy(e)
            } else {
                OpenError::Other(e)
            });
        }
        if !sock.rx.check(16) || !sock.tx.check(16) {
            return Err(bad_mapping(ifname, queue, "RX and TX").into());
        }
        // SAFETY: a socket libxdp just created.
        let fd = unsafe { ffi::xsk_socket__fd(sock.raw) };

        let mut opts = ffi::XdpOptions::default();
        let zero_copy = getsockopt(fd, ffi::XDP_OPTIONS, &mut opts).is_ok()
            && opts.flags & ffi::XDP_OPTIONS_ZEROCOPY != 0;
        let tx_budget_set =
            !zero_copy && setsockopt_u32(fd, ffi::XDP_MAX_TX_SKB_BUDGET, ring).is_ok();
        let driver = match (mode, zero_copy) {
            (XdpMode::Native, true) => Driver::XdpNativeZeroCopy,
            (XdpMode::Native, false) => Driver::XdpNative,
            (XdpMode::Generic, _) => Driver::XdpGeneric,
        };

        let mut q = XdpQueue {
            sock,
            umem,
            area,
            fd,
            frame_size,
            max_frame,
            frames: ring,
            tx_free: (0..ring).rev().collect(),
            tx_in_flight: vec![false; ring as usize],
            tx_queued: 0,
            rx_spare: Vec::with_capacity(ring as usize),
            zero_copy,
            tx_budget_set,
            down: false,
            bad_rx: 0,
            bad_completions: 0,
            driver,
        };
        // Every RX frame to the kernel. The fill ring is empty and holds
        // exactly `ring` entries.
        let Some(first) = q.umem.fill.reserve(ring) else {
            return Err(bad_mapping(ifname, queue, "fill").into());
        };
        for k in 0..ring {
            q.umem
                .fill
                .write_addr(first.wrapping_add(k), u64::from(k) * u64::from(frame_size));
        }
        q.umem.fill.submit();
        tracing::debug!(
            ifname,
            queue,
            fd,
            zero_copy,
            tx_budget_set,
            ring,
            frame_size,
            "AF_XDP socket bound"
        );
        Ok(q)
    }

    fn frame_addr(&self, tx_index: u32) -> u64 {
        u64::from(self.frames + tx_index) * u64::from(self.frame_size)
    }

    /// Takes completed TX frames back onto the free list.
    fn reap(&mut self) {
        let (first, n) = self.umem.comp.peek(self.frames);
        for k in 0..n {
            let addr = self.umem.comp.read_addr(first.wrapping_add(k));
            match check_completion(addr, self.frame_size, self.frames, self.frames) {
                Some(i) if self.tx_in_flight[i] => {
                    self.tx_in_flight[i] = false;
                    // Below tx_frames, a u32.
                    self.tx_free.push(crate::conv::u32_of(i));
                }
                _ => {
                    self.bad_completions += 1;
                    if self.bad_completions == 1 {
                        tracing::warn!(
                            fd = self.fd,
                            addr,
                            "AF_XDP completion for a frame not in flight; dropped"
                        );
                    }
                }
            }
        }
        if n > 0 {
            self.umem.comp.release(n);
        }
    }

    /// Gives back RX frames the fill ring had no room for.
    fn refill_spare(&mut self) {
        let n = crate::conv::u32_of(self.rx_spare.len());
        if let Some(first) = self.umem.fill.reserve(n) {
            for (k, &b) in self.rx_spare.iter().enumerate() {
                self.umem
                    .fill
                    .write_addr(first.wrapping_add(crate::conv::u32_of(k)), b);
            }
            self.umem.fill.submit();
            self.rx_spare.clear();
        }
    }

    fn count_bad_rx(&mut self, d: &XdpDesc) {
        self.bad_rx += 1;
        if self.bad_rx == 1 {
            tracing::warn!(
                fd = self.fd,
                addr = d.addr,
                len = d.len,
                options = d.options,
                "bad AF_XDP RX descriptor; dropped"
            );
        }
    }

    /// Kicks the kernel to send what the TX ring holds.
    fn kick_tx(&mut self) {
        let tries = if self.zero_copy || self.tx_budget_set {
            1
        } else {
            MAX_KICKS_OLD_KERNEL
        };
        for _ in 0..tries {
            // SAFETY: a zero-length non-blocking send on our own socket,
            // no buffer and no address: AF_XDP's "process the TX ring".
            let r = unsafe {
                libc::sendto(
                    self.fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                self.down = false;
                return;
            }
            match io::Error::last_os_error().raw_os_error() {
                // More than one kick's budget (old kernels), or the device
                // queue is busy: what is left stays on the ring for the
                // next flush.
                Some(libc::EAGAIN) if !self.zero_copy && self.sock.tx.kernel_behind() => continue,
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => return,
                Some(libc::ENETDOWN | libc::ENXIO) => {
                    self.down = true;
                    return;
                }
                e => {
                    tracing::debug!(fd = self.fd, errno = ?e, "AF_XDP transmit kick failed");
                    return;
                }
            }
        }
    }

    /// Tells the kernel the fill ring has frames again, if it sleeps.
    fn kick_fill(&self) {
        if !self.umem.fill.needs_wakeup() {
            return;
        }
        // SAFETY: a zero-length non-blocking receive on our own socket, no
        // buffer and no address: AF_XDP's "look at the fill ring".
        unsafe {
            libc::recvfrom(
                self.fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }
}

/// One `take_batch` in progress. Its drop finishes the batch, even if the
/// caller's callback panicked: the RX entries taken so far are released,
/// and their frames published on the fill ring.
struct RxBatch<'a> {
    q: &'a mut XdpQueue,
    /// First peeked RX entry, entries peeked, entries taken.
    first: u32,
    n: u32,
    taken: u32,
    /// Fill entries written, from `fill_first` (None: the fill ring had no
    /// room, a kernel bug; frames go to `rx_spare`).
    filled: u32,
    fill_first: Option<u32>,
}

impl RxBatch<'_> {
    fn run(&mut self, stage: &mut Stage) -> usize {
        let hdr = OffloadHdr::default();
        let area = self.q.area.ptr;
        let mut delivered = 0;
        while self.taken < self.n {
            let d = self
                .q
                .sock
                .rx
                .read_desc(self.first.wrapping_add(self.taken));
            self.taken += 1;
            match check_rx(&d, self.q.frame_size, self.q.frames) {
                RxDesc::Frame { off, len, base } => {
                    // The fill entry is published when the batch ends,
                    // after the frame is copied onto the stage.
                    self.give_back(base);
                    // SAFETY: `off..off + len` lies inside one RX frame of
                    // our mapping (`check_rx`); the kernel does not write
                    // that frame until the fill entry above is published.
                    let frame = unsafe { std::slice::from_raw_parts(area.add(off), len) };
                    delivered += 1;
                    if !stage.put(frame, hdr) {
                        break;
                    }
                }
                RxDesc::Bad { base } => {
                    self.q.count_bad_rx(&d);
                    self.give_back(base);
                }
                RxDesc::Lost => self.q.count_bad_rx(&d),
            }
        }
        delivered
    }

    fn give_back(&mut self, base: u64) {
        match self.fill_first {
            Some(first) => {
                self.q
                    .umem
                    .fill
                    .write_addr(first.wrapping_add(self.filled), base);
                self.filled += 1;
            }
            None => {
                if self.q.rx_spare.len() < self.q.rx_spare.capacity() {
                    self.q.rx_spare.push(base);
                }
            }
        }
    }
}

impl Drop for RxBatch<'_> {
    fn drop(&mut self) {
        self.q.sock.rx.release(self.taken);
        if self.fill_first.is_some() {
            self.q.umem.fill.unreserve(self.n - self.filled);
            self.q.umem.fill.submit();
        }
        self.q.kick_fill();
    }
}

impl FrameQueue for XdpQueue {
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken {
        if !self.rx_spare.is_empty() {
            self.refill_spare();
        }
        let max = crate::conv::u32_of(max).min(self.frames);
        let (first, n) = self.sock.rx.peek(max);
        if n == 0 {
            return Taken::default();
        }
        // The frames about to be read came out of the fill ring, so it has
        // room for at least `n` entries.
        let fill_first = self.umem.fill.reserve(n);
        let mut batch = RxBatch {
            q: self,
            first,
            n,
            taken: 0,
            filled: 0,
            fill_first,
        };
        Taken {
            frames: batch.run(stage),
            ..Taken::default()
        }
    }

    fn has_work(&self) -> bool {
        self.sock.rx.has_entries()
    }

    fn push(&mut self, hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError> {
        debug_assert!(
            hdr.gso_type == 0 && hdr.flags & ringswitch_frame::F_NEEDS_CSUM == 0,
            "a NIC queue takes no offloads (tx_caps)"
        );
        if frame.len() > self.max_frame as usize {
            return Err(PushError::TooLong);
        }
        if self.tx_free.len() < (self.frames as usize / 4).max(1) {
            self.reap();
        }
        let Some(i) = self.tx_free.pop() else {
            return Err(if self.down {
                PushError::Down
            } else {
                PushError::Full
            });
        };
        // Inside our mapping, whose size is a usize: always converts.
        let addr = self.frame_addr(i);
        let Ok(at) = usize::try_from(addr) else {
            self.tx_free.push(i);
            return Err(PushError::Full);
        };
        // With a free frame there is a free TX entry (as many entries as
        // frames), unless the kernel's consumer index is wrong.
        let Some(slot) = self.sock.tx.reserve(1) else {
            self.tx_free.push(i);
            return Err(PushError::Full);
        };
        // SAFETY: `addr .. addr + frame.len()` lies in TX frame `i` of our
        // mapping (frame.len() <= max_frame <= frame_size); the frame is free, so the
        // kernel does not read it until the descriptor below is submitted.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), self.area.ptr.add(at), frame.len());
        }
        self.sock.tx.write_desc(
            slot,
            XdpDesc {
                addr,
                len: crate::conv::u32_of(frame.len()),
                options: 0,
            },
        );
        self.tx_in_flight[i as usize] = true;
        self.tx_queued += 1;
        Ok(())
    }

    fn flush(&mut self) -> Wake {
        if self.tx_queued > 0 {
            self.sock.tx.submit();
            self.tx_queued = 0;
        }
        // Zero copy: the driver sends on its own and says when it sleeps.
        // Copy mode: frames only leave in `sendto`, so kick whenever the
        // ring holds some (including ones an earlier kick left).
        let kick = if self.zero_copy {
            self.sock.tx.needs_wakeup()
        } else {
            self.sock.tx.kernel_behind()
        };
        if kick {
            self.kick_tx();
        }
        self.reap();
        Wake::NONE
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }

    fn caps(&self) -> Caps {
        Caps::default()
    }

    fn stats(&self) -> QueueStats {
        let mut s = ffi::XdpStatistics::default();
        if getsockopt(self.fd, ffi::XDP_STATISTICS, &mut s).is_err() {
            s = ffi::XdpStatistics::default();
        }
        // A frame dropped for want of a fill buffer counts in both
        // rx_dropped and rx_fill_ring_empty_descs (copy mode): only the
        // first is a count of frames.
        QueueStats {
            kernel_rx_dropped: s.rx_dropped + s.rx_ring_full + s.rx_invalid_descs + self.bad_rx,
            kernel_tx_invalid: s.tx_invalid_descs + self.bad_completions,
            ..QueueStats::default()
        }
    }

    fn driver(&self) -> &'static str {
        self.driver.as_str()
    }
}

fn bad_mapping(ifname: &str, queue: u32, which: &str) -> DevError {
    DevError::Io {
        what: format!("mapping the {which} rings of {ifname} queue {queue}"),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            "libxdp mapped them with another geometry than asked",
        ),
    }
}

/// The error of a failed `xsk_socket__create` (bind, then program attach).
fn create_error(ifname: &str, queue: u32, mode: XdpMode, errno: i32) -> DevError {
    let name = ifname.to_string();
    let kernel = log::take_kernel_message();
    // The kernel's own sentence where it gave one, else the errno's.
    let why = || match &kernel {
        Some(k) => k.clone(),
        None => io::Error::from_raw_os_error(errno).to_string(),
    };
    match errno {
        libc::ENODEV | libc::ENXIO => DevError::NoSuchInterface { name },
        libc::EBUSY => DevError::Busy {
            name,
            why: format!("queue {queue} is already bound to an AF_XDP socket, or its XDP programs are being replaced"),
        },
        libc::EEXIST => DevError::Busy {
            name,
            why: "an XDP program that libxdp cannot share is attached to it".into(),
        },
        libc::EOPNOTSUPP | libc::EINVAL | libc::ERANGE | libc::E2BIG | libc::ENOSPC | libc::ENOTCONN
            if mode == XdpMode::Native =>
        {
            DevError::Unsupported {
                name,
                what: "native XDP",
                why: why(),
            }
        }
        libc::EOPNOTSUPP => DevError::Unsupported {
            name,
            what: "generic XDP",
            why: why(),
        },
        // libxdp could not read back the program it attached: without
        // CAP_SYS_ADMIN the kernel refuses it, and libxdp says ENOENT.
        libc::ENOENT if !has_sys_admin() => DevError::Permission {
            what: format!("attaching the AF_XDP program to {ifname} queue {queue}"),
            needs: NEEDS,
        },
        _ => DevError::io(
            format!("binding an AF_XDP socket to {ifname} queue {queue} and attaching its XDP program"),
            NEEDS,
            match kernel {
                Some(k) => io::Error::new(io::Error::from_raw_os_error(errno).kind(), k),
                None => io::Error::from_raw_os_error(errno),
            },
        ),
    }
}

/// Whether the calling thread's effective capabilities hold CAP_SYS_ADMIN
/// (from /proc/thread-self/status: capabilities are per thread; true when
/// that cannot be read, so nothing is blamed on it wrongly).
fn has_sys_admin() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let Ok(status) = std::fs::read_to_string("/proc/thread-self/status") else {
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_none_or(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

fn getsockopt<T>(fd: RawFd, opt: libc::c_int, v: &mut T) -> io::Result<()> {
    let mut len = crate::conv::socklen_of::<T>();
    // SAFETY: the kernel writes at most `len` bytes into `v`, a plain-data
    // struct of exactly that size that lives across the call.
    let r = unsafe { libc::getsockopt(fd, ffi::SOL_XDP, opt, (v as *mut T).cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn setsockopt_u32(fd: RawFd, opt: libc::c_int, v: u32) -> io::Result<()> {
    // SAFETY: the kernel reads 4 bytes from `v`, which lives across the
    // call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            ffi::SOL_XDP,
            opt,
            (&v as *const u32).cast(),
            crate::conv::socklen_of::<u32>(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FS: u32 = 2048;

    fn d(addr: u64, len: u32, options: u32) -> XdpDesc {
        XdpDesc { addr, len, options }
    }

    #[test]
    fn rx_descriptors_are_checked() {
        // 4 RX frames: [0, 8192).
        assert_eq!(
            check_rx(&d(256, 60, 0), FS, 4),
            RxDesc::Frame {
                off: 256,
                len: 60,
                base: 0
            }
        );
        assert_eq!(
            check_rx(&d(3 * 2048 + 256, 1792, 0), FS, 4),
            RxDesc::Frame {
                off: 3 * 2048 + 256,
                len: 1792,
                base: 3 * 2048
            }
        );
        // One byte past its frame.
        assert_eq!(
            check_rx(&d(2048 + 256, 1793, 0), FS, 4),
            RxDesc::Bad { base: 2048 }
        );
        assert_eq!(check_rx(&d(256, 0, 0), FS, 4), RxDesc::Bad { base: 0 });
        assert_eq!(
            check_rx(&d(256, 60, ffi::XDP_PKT_CONTD), FS, 4),
            RxDesc::Bad { base: 0 }
        );
        // A TX frame, or past the UMEM, or an absurd length.
        assert_eq!(check_rx(&d(4 * 2048 + 256, 60, 0), FS, 4), RxDesc::Lost);
        assert_eq!(check_rx(&d(u64::MAX - 10, 60, 0), FS, 4), RxDesc::Lost);
        assert_eq!(
            check_rx(&d(256, u32::MAX, 0), FS, 4),
            RxDesc::Bad { base: 0 }
        );
    }

    #[test]
    fn completions_are_checked() {
        // 4 RX frames, then 4 TX frames: [8192, 16384).
        assert_eq!(check_completion(8192, FS, 4, 4), Some(0));
        assert_eq!(check_completion(8192 + 3 * 2048, FS, 4, 4), Some(3));
        assert_eq!(check_completion(0, FS, 4, 4), None);
        assert_eq!(check_completion(8192 + 100, FS, 4, 4), None);
        assert_eq!(check_completion(16384, FS, 4, 4), None);
        assert_eq!(check_completion(u64::MAX, FS, 4, 4), None);
    }
}
