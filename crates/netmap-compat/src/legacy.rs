//! The `nm_open` helpers netmap programs get with `NETMAP_WITH_LIBS`
//! (`nm_open`, `nm_close`, `nm_inject`, `nm_nextpkt`, `nm_dispatch`). In
//! netmap they are inline in `net/netmap_user.h`; here they are functions
//! of this library, declared there, with `struct nm_desc` laid out as
//! [`NmDesc`].

use std::ptr;

use libc::{c_char, c_int, c_uchar, c_void, size_t};

use crate::abi::Nmreq;
use crate::file::RegRequest;
use crate::mapped::{self, rings_from, MappedPort, Side};
use crate::nmport::{bound_rings, parse_spec};
use crate::{dev, guard, set_errno, table, Errno};

/// `struct nm_pkthdr`.
#[repr(C)]
pub struct NmPkthdr {
    /// Receive time.
    pub ts: libc::timeval,
    /// Bytes available at `buf`.
    pub caplen: u32,
    /// Frame length.
    pub len: u32,
    /// Unused.
    pub flags: u64,
    /// The descriptor.
    pub d: *mut NmDesc,
    /// The slot.
    pub slot: *mut c_void,
    /// The frame.
    pub buf: *mut u8,
}

/// `struct nm_stat`.
#[repr(C)]
pub struct NmStat {
    /// Frames received.
    pub ps_recv: u32,
    /// Frames dropped.
    pub ps_drop: u32,
    /// Frames dropped by the interface.
    pub ps_ifdrop: u32,
}

/// Size of `nm_desc.msg`.
pub const NM_ERRBUF_SIZE: usize = 512;

/// `struct nm_desc`.
#[repr(C)]
pub struct NmDesc {
    /// Points to itself (a validity check).
    pub self_: *mut NmDesc,
    /// The `/dev/netmap` descriptor.
    pub fd: c_int,
    /// The mapping.
    pub mem: *mut c_void,
    /// Its length.
    pub memsize: u64,
    /// Whether `mem` was mapped by this descriptor.
    pub done_mmap: c_int,
    /// The `netmap_if`.
    pub nifp: *mut c_void,
    /// First bound TX ring.
    pub first_tx_ring: u16,
    /// Last bound TX ring (inclusive).
    pub last_tx_ring: u16,
    /// Where nm_inject starts.
    pub cur_tx_ring: u16,
    /// First bound RX ring.
    pub first_rx_ring: u16,
    /// Last bound RX ring (inclusive).
    pub last_rx_ring: u16,
    /// Where nm_nextpkt and nm_dispatch start.
    pub cur_rx_ring: u16,
    /// The registration, legacy form.
    pub req: Nmreq,
    /// The header nm_dispatch passes.
    pub hdr: NmPkthdr,
    /// A ring, for programs that read geometry from it.
    pub some_ring: *const c_void,
    /// Start of the buffers.
    pub buf_start: *const c_void,
    /// End of the mapping.
    pub buf_end: *const c_void,
    /// pcap-style settings, unused.
    pub snaplen: c_int,
    /// Unused.
    pub promisc: c_int,
    /// Unused.
    pub to_ms: c_int,
    /// Unused.
    pub errbuf: *mut c_char,
    /// Unused.
    pub if_flags: u32,
    /// Unused.
    pub if_reqcap: u32,
    /// Unused.
    pub if_curcap: u32,
    /// Counters.
    pub st: NmStat,
    /// The last error, for people.
    pub msg: [c_char; NM_ERRBUF_SIZE],
}

const _: () = assert!(std::mem::size_of::<NmPkthdr>() == 56);
const _: () = assert!(std::mem::size_of::<NmDesc>() == 760);

fn null_fail(e: Errno) -> *mut NmDesc {
    e.fail();
    ptr::null_mut()
}

/// Opens a port: `ifname` is a netmap port spec (`vale0:a`, `pipe{1`,
/// with `-N`, `/T`, `/R` and `@conf:` as in nmport). `req`, `flags` and
/// `arg` are accepted and not used: every descriptor maps its own port.
///
/// # Safety
/// `ifname` is NULL or a C string; the rest may be anything.
#[no_mangle]
pub unsafe extern "C" fn nm_open(
    ifname: *const c_char,
    _req: *const Nmreq,
    _flags: u64,
    _arg: *const NmDesc,
) -> *mut NmDesc {
    if ifname.is_null() {
        return null_fail(Errno::with(
            libc::EINVAL,
            "nm_open: the port name is a NULL pointer".into(),
        ));
    }
    guard(ptr::null_mut(), || {
        // SAFETY: a C string per the contract.
        let name = unsafe { std::ffi::CStr::from_ptr(ifname) };
        let Ok(name) = name.to_str() else {
            return null_fail(Errno::with(
                libc::EINVAL,
                "nm_open: the port name is not UTF-8".into(),
            ));
        };
        let spec = match parse_spec(name) {
            Ok(s) => s,
            Err(e) => return null_fail(e),
        };
        let fd = dev::open(libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return ptr::null_mut();
        }
        let opened = (|| {
            let f = table::get(fd)
                .ok_or_else(|| Errno::with(libc::EBADF, "nm_open: lost the descriptor".into()))?;
            let info = f.register(
                &spec.name,
                RegRequest {
                    mode: spec.mode,
                    ringid: spec.ringid,
                    flags: spec.flags,
                    mem_id: spec.mem_id,
                },
            )?;
            let len = info.memsize as usize;
            let mem = dev::map_port(&f, len);
            if mem == libc::MAP_FAILED {
                return Err(Errno::last("nm_open: mapping the port"));
            }
            Ok((info, mem))
        })();
        let (info, mem) = match opened {
            Ok(x) => x,
            Err(e) => {
                dev::close(fd);
                return null_fail(e);
            }
        };
        let ((ft, lt), (fr, lr)) = bound_rings(
            spec.mode,
            spec.ringid,
            spec.flags,
            info.tx_rings,
            info.rx_rings,
        );
        // SAFETY: nr_offset lies inside the mapping (the port's layout).
        let nifp = unsafe { (mem as *mut u8).add(info.nifp_offset as usize) } as *mut c_void;
        let mut req = Nmreq {
            nr_name: [0; 16],
            nr_version: crate::abi::NETMAP_API as u32,
            nr_offset: info.nifp_offset as u32,
            nr_memsize: info.memsize.min(u32::MAX as u64) as u32,
            nr_tx_slots: info.tx_slots,
            nr_rx_slots: info.rx_slots,
            nr_tx_rings: info.tx_rings,
            nr_rx_rings: info.rx_rings,
            nr_ringid: spec.ringid,
            nr_cmd: 0,
            nr_arg1: 0,
            nr_arg2: info.mem_id,
            nr_arg3: 0,
            nr_flags: info.mode,
            spare2: [0],
        };
        let n = spec.name.len().min(15);
        req.nr_name[..n].copy_from_slice(&spec.name.as_bytes()[..n]);
        // SAFETY: inside the mapping.
        let buf_end = unsafe { (mem as *mut u8).add(info.memsize as usize) } as *const c_void;
        // SAFETY: the mapping nm_open just made, of that length; it lives
        // until nm_close.
        let mapped =
            unsafe { MappedPort::new(mem, info.memsize as usize, info.nifp_offset as usize) };
        // A ring of the port to show the program (NULL when the layout is
        // odd).
        let some_ring = mapped
            .ring(Side::Tx, 0)
            .map_or(ptr::null(), |r| r.header() as *const c_void);
        let d = Box::new(NmDesc {
            self_: ptr::null_mut(),
            fd,
            mem,
            memsize: info.memsize,
            done_mmap: 1,
            nifp,
            first_tx_ring: ft,
            last_tx_ring: lt,
            cur_tx_ring: ft,
            first_rx_ring: fr,
            last_rx_ring: lr,
            cur_rx_ring: fr,
            req,
            hdr: NmPkthdr {
                ts: libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                },
                caplen: 0,
                len: 0,
                flags: 0,
                d: ptr::null_mut(),
                slot: ptr::null_mut(),
                buf: ptr::null_mut(),
            },
            some_ring,
            buf_start: mem,
            buf_end,
            snaplen: 0,
            promisc: 0,
            to_ms: 0,
            errbuf: ptr::null_mut(),
            if_flags: 0,
            if_reqcap: 0,
            if_curcap: 0,
            st: NmStat {
                ps_recv: 0,
                ps_drop: 0,
                ps_ifdrop: 0,
            },
            msg: [0; NM_ERRBUF_SIZE],
        });
        let p = Box::into_raw(d);
        // SAFETY: just allocated.
        unsafe { (*p).self_ = p };
        p
    })
}

/// A descriptor nm_open made, or None.
///
/// # Safety
/// `d` is NULL or points to readable memory of an `nm_desc`.
unsafe fn valid<'a>(d: *mut NmDesc) -> Option<&'a mut NmDesc> {
    // SAFETY: per the contract; `self_ == d` marks one of ours.
    (!d.is_null() && unsafe { (*d).self_ } == d).then(|| unsafe { &mut *d })
}

/// Unmaps, closes and frees. 0, or -1 and EINVAL for a bad descriptor.
///
/// # Safety
/// `d` is NULL or came from nm_open and is not used again.
#[no_mangle]
pub unsafe extern "C" fn nm_close(d: *mut NmDesc) -> c_int {
    // SAFETY: per the contract.
    let Some(desc) = (unsafe { valid(d) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    guard(-1, || {
        if desc.done_mmap != 0 && !desc.mem.is_null() {
            // SAFETY: the mapping nm_open made, of that length.
            unsafe { libc::munmap(desc.mem, desc.memsize as usize) };
        }
        dev::close(desc.fd);
        desc.self_ = ptr::null_mut();
        // SAFETY: allocated by nm_open with Box, not used again.
        drop(unsafe { Box::from_raw(d) });
        0
    })
}

/// Copies one frame into the first bound TX ring with room (no sync).
/// Returns `size`, or 0.
///
/// # Safety
/// `d` is NULL or from nm_open; `buf` NULL or `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn nm_inject(d: *mut NmDesc, buf: *const c_void, size: size_t) -> c_int {
    // SAFETY: per the contract.
    let Some(d) = (unsafe { valid(d) }) else {
        set_errno(libc::EINVAL);
        return 0;
    };
    if buf.is_null() || d.first_tx_ring > d.last_tx_ring {
        set_errno(libc::EINVAL);
        return 0;
    }
    guard(0, || {
        // SAFETY: `buf` has `size` readable bytes, per the contract.
        unsafe {
            mapped::inject(
                &d.mapped(),
                (d.first_tx_ring, d.last_tx_ring),
                &mut d.cur_tx_ring,
                buf as *const u8,
                size,
            )
        }
    })
}

/// Takes the next received frame, if any (no sync): fills `hdr` and
/// returns the frame, or NULL when every bound RX ring is empty.
///
/// # Safety
/// `d` is NULL or from nm_open; `hdr` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nm_nextpkt(d: *mut NmDesc, hdr: *mut NmPkthdr) -> *mut c_uchar {
    // SAFETY: per the contract.
    let Some(desc) = (unsafe { valid(d) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if hdr.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    guard(ptr::null_mut(), || {
        let mut out = ptr::null_mut();
        // SAFETY: our live descriptor; the callback receives our header.
        unsafe {
            each_rx(desc, 1, |h, buf| {
                ptr::write(hdr, NmPkthdr { ..*h });
                out = buf;
            })
        };
        out
    })
}

/// The callback of nm_dispatch.
pub type NmCb = unsafe extern "C" fn(*mut c_uchar, *const NmPkthdr, *const c_uchar);

/// Calls `cb` for up to `cnt` received frames (all that are there when
/// `cnt` <= 0), releasing each; no sync. Returns the frames handled.
///
/// # Safety
/// `d` is NULL or from nm_open; `cb` a valid function or NULL.
#[no_mangle]
pub unsafe extern "C" fn nm_dispatch(
    d: *mut NmDesc,
    cnt: c_int,
    cb: Option<NmCb>,
    arg: *mut c_uchar,
) -> c_int {
    // SAFETY: per the contract.
    let Some(desc) = (unsafe { valid(d) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let Some(cb) = cb else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let limit = if cnt <= 0 { u64::MAX } else { cnt as u64 };
    guard(-1, || {
        // SAFETY: our descriptor; `cb` is the caller's valid function.
        unsafe { each_rx(desc, limit, |h, buf| cb(arg, h, buf)) as c_int }
    })
}

/// Walks the bound RX rings from `cur_rx_ring`, handing up to `limit`
/// frames to `f` and releasing them. Returns how many.
///
/// # Safety
/// `d` is a live descriptor.
unsafe fn each_rx(d: &mut NmDesc, limit: u64, mut f: impl FnMut(&NmPkthdr, *mut u8)) -> u64 {
    if d.first_rx_ring > d.last_rx_ring {
        return 0;
    }
    let (first, last) = (d.first_rx_ring, d.last_rx_ring);
    let start = d.cur_rx_ring.clamp(first, last);
    let mut got = 0u64;
    let self_ptr = d as *mut NmDesc;
    let port = d.mapped();
    for ri in rings_from(first, last, start) {
        if let Some(ring) = port.ring(Side::Rx, ri) {
            // Bounded by the ring's size: space() never exceeds num_slots.
            let mut n = ring.space();
            while n > 0 && got < limit {
                let Some(cur) = ring.cur() else { break };
                if let Some((slot, buf)) = ring.slot(cur) {
                    let len = ring.len(slot) as u32;
                    d.hdr = NmPkthdr {
                        ts: d.hdr.ts,
                        caplen: len,
                        len,
                        flags: 0,
                        d: self_ptr,
                        slot: slot as *mut c_void,
                        buf,
                    };
                    f(&d.hdr, buf);
                    d.st.ps_recv = d.st.ps_recv.wrapping_add(1);
                    got += 1;
                } else {
                    d.st.ps_drop = d.st.ps_drop.wrapping_add(1);
                }
                ring.release_to(ring.next(cur));
                n -= 1;
            }
            if got >= limit {
                d.cur_rx_ring = ri;
                return got;
            }
        }
    }
    d.cur_rx_ring = start;
    got
}

impl NmDesc {
    /// The descriptor's mapping of its port.
    fn mapped(&self) -> MappedPort {
        // SAFETY: a descriptor from nm_open keeps its mapping, of
        // `memsize` bytes, until nm_close frees it.
        unsafe { MappedPort::new(self.mem, self.memsize as usize, self.req.nr_offset as usize) }
    }
}
