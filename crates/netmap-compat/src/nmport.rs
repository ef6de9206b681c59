//! libnetmap's port API (`nmport_*`) over the `/dev/netmap` emulation.
//!
//! `struct nmport_d` is defined in `include/netmap/libnetmap.h`; [`NmportD`]
//! is the same layout. Port specs follow netmap: `vale0:a`, `pipe{1`,
//! `pipe}1`, then optionally `-N` (ring N only), `*` or `^` (host rings,
//! refused here), `/T` or `/R` (TX or RX rings only), `/x` (exclusive, the
//! only kind there is here), and `@conf:rings=N,slots=M,...` sizes.

use std::ptr;

use libc::{c_char, c_int, c_void, size_t};

use crate::abi::{self, flags, mode, NmreqHeader, NmreqRegister};
use crate::mapped::{self, MappedPort};
use crate::{dev, guard, set_errno, table, Errno};

/// `struct nmport_d`.
#[repr(C)]
pub struct NmportD {
    /// The request header (name, version, body pointer).
    pub hdr: NmreqHeader,
    /// The register request and, after registration, its answer.
    pub reg: NmreqRegister,
    /// nmport_register succeeded.
    pub register_done: c_int,
    /// nmport_mmap succeeded.
    pub mmap_done: c_int,
    /// The emulated `/dev/netmap` descriptor, -1 if none.
    pub fd: c_int,
    _pad: c_int,
    /// The mapping.
    pub mem: *mut c_void,
    /// Its length.
    pub memsize: u64,
    /// The `netmap_if` inside it.
    pub nifp: *mut c_void,
    /// First bound TX ring.
    pub first_tx_ring: u16,
    /// Last bound TX ring (inclusive).
    pub last_tx_ring: u16,
    /// First bound RX ring.
    pub first_rx_ring: u16,
    /// Last bound RX ring (inclusive).
    pub last_rx_ring: u16,
    /// Where nmport_inject starts looking.
    pub cur_tx_ring: u16,
    /// Where a receive helper would start looking.
    pub cur_rx_ring: u16,
    _reserved: [u32; 5],
}

const _: () = assert!(std::mem::size_of::<NmportD>() == 216);

/// A port spec, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// What goes into `nr_name`: the port name and any `@conf:` options.
    pub name: String,
    /// `mode::*`.
    pub mode: u32,
    /// Ring for `ONE_NIC`.
    pub ringid: u16,
    /// `flags::*`.
    pub flags: u64,
    /// The memory asked for with `@ID` (0: any).
    pub mem_id: u16,
}

/// The first and last ring of one direction a registration binds (`(1, 0)`
/// when it binds none), as `first_*_ring`/`last_*_ring` of `nm_desc` and
/// `nmport_d` record them.
pub type RingSpan = (u16, u16);

/// The rings a registration with `reg_mode`, `ringid` and `reg_flags` binds on a
/// port of `tx_rings` and `rx_rings` rings, TX then RX: every ring, or for
/// `ONE_NIC` ring `ringid` alone (none where there is no such ring); none
/// for `NULL`, and none of a direction when the flags ask for the other
/// direction only.
pub fn bound_rings(
    reg_mode: u32,
    ringid: u16,
    reg_flags: u64,
    tx_rings: u16,
    rx_rings: u16,
) -> (RingSpan, RingSpan) {
    const NONE: RingSpan = (1, 0);
    let span = |n: u16, other_only: bool| -> RingSpan {
        if other_only || n == 0 || reg_mode == mode::NULL {
            NONE
        } else if reg_mode == mode::ONE_NIC {
            if ringid < n {
                (ringid, ringid)
            } else {
                NONE
            }
        } else {
            (0, n - 1)
        }
    };
    (
        span(tx_rings, reg_flags & flags::RX_RINGS_ONLY != 0),
        span(rx_rings, reg_flags & flags::TX_RINGS_ONLY != 0),
    )
}

/// Parses a netmap port spec.
pub fn parse_spec(spec: &str) -> Result<Spec, Errno> {
    let bad = |why: &str| {
        Errno::with(
            libc::EINVAL,
            format!("'{spec}' is not a netmap port spec: {why}"),
        )
    };
    let mut mem_id = 0;
    let (body, conf) = match spec.split_once('@') {
        // `@ID`: the memory of the port with that id (lb's output pipes).
        Some((b, id)) if !id.is_empty() && id.bytes().all(|c| c.is_ascii_digit()) => {
            mem_id = id
                .parse::<u16>()
                .ok()
                .filter(|&m| m != 0)
                .ok_or_else(|| bad("a memory id is 1 to 65535"))?;
            (b, None)
        }
        Some((b, c)) => {
            if !c.starts_with("conf:") {
                return Err(Errno::with(
                    libc::EOPNOTSUPP,
                    format!("'{spec}': only @conf: and @ID (a memory id) options are supported"),
                ));
            }
            (b, Some(c))
        }
        None => (spec, None),
    };
    let (body, fl) = match body.split_once('/') {
        Some((b, f)) => (b, Some(f)),
        None => (body, None),
    };
    let mut out = Spec {
        name: String::new(),
        mode: mode::ALL_NIC,
        ringid: 0,
        flags: 0,
        mem_id,
    };
    let mut name = body;
    if let Some(n) = name.strip_suffix('*') {
        out.mode = mode::NIC_SW;
        name = n;
    } else if let Some(n) = name.strip_suffix('^') {
        out.mode = mode::SW;
        name = n;
    } else if let Some((n, ring)) = name.rsplit_once('-') {
        if !ring.is_empty()
            && ring.bytes().all(|b| b.is_ascii_digit())
            && !n.ends_with([':', '{', '}'])
        {
            let r: u16 = ring
                .parse()
                .ok()
                .filter(|&r: &u16| r < 1024)
                .ok_or_else(|| bad("the ring number is too large"))?;
            out.mode = mode::ONE_NIC;
            out.ringid = r;
            name = n;
        }
    }
    if name.is_empty() || !name.contains([':', '{', '}']) {
        return Err(bad("use vale<N>:<port>, <name>{<id> or <name>}<id>"));
    }
    for c in fl.unwrap_or("").chars() {
        match c {
            'T' => out.flags |= flags::TX_RINGS_ONLY,
            'R' => out.flags |= flags::RX_RINGS_ONLY,
            'x' => {}
            't' => out.flags |= flags::MONITOR_TX,
            'r' => out.flags |= flags::MONITOR_RX,
            _ => return Err(bad(&format!("unknown flag '/{c}'"))),
        }
    }
    out.name = match conf {
        Some(c) => format!("{name}@{c}"),
        None => name.to_string(),
    };
    if out.name.len() >= 64 {
        return Err(bad("the name is longer than 63 bytes"));
    }
    Ok(out)
}

/// Allocates an empty descriptor.
///
/// # Safety
/// None; free the result with nmport_delete.
#[no_mangle]
pub unsafe extern "C" fn nmport_new() -> *mut NmportD {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(NmportD {
            hdr: NmreqHeader {
                nr_version: abi::NETMAP_API,
                nr_reqtype: abi::req::REGISTER,
                nr_reserved: 0,
                nr_name: [0; 64],
                nr_options: 0,
                nr_body: 0,
            },
            reg: NmreqRegister::default(),
            register_done: 0,
            mmap_done: 0,
            fd: -1,
            _pad: 0,
            mem: ptr::null_mut(),
            memsize: 0,
            nifp: ptr::null_mut(),
            first_tx_ring: 0,
            last_tx_ring: 0,
            first_rx_ring: 0,
            last_rx_ring: 0,
            cur_tx_ring: 0,
            cur_rx_ring: 0,
            _reserved: [0; 5],
        }))
    })
}

/// Frees a descriptor (after undoing whatever is still open).
///
/// # Safety
/// `d` is NULL or came from nmport_new/nmport_prepare and is not used again.
#[no_mangle]
pub unsafe extern "C" fn nmport_delete(d: *mut NmportD) {
    if d.is_null() {
        return;
    }
    // SAFETY: a live descriptor per the contract.
    unsafe { nmport_undo_open_desc(d) };
    // SAFETY: allocated by Box in nmport_new, not used again.
    guard((), || drop(unsafe { Box::from_raw(d) }));
}

fn einval(what: &str) -> c_int {
    Errno::with(libc::EINVAL, format!("{what} is a NULL pointer")).fail()
}

/// Parses `spec` into `d`.
///
/// # Safety
/// `d` is NULL or a live descriptor; `spec` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn nmport_parse(d: *mut NmportD, spec: *const c_char) -> c_int {
    if d.is_null() {
        return einval("the port descriptor");
    }
    if spec.is_null() {
        return einval("the port spec");
    }
    guard(-1, || {
        // SAFETY: a C string per the contract.
        let s = unsafe { std::ffi::CStr::from_ptr(spec) };
        let Ok(s) = s.to_str() else {
            return Errno::with(libc::EINVAL, "the port spec is not UTF-8".into()).fail();
        };
        match parse_spec(s) {
            Err(e) => e.fail(),
            Ok(p) => {
                // SAFETY: a live descriptor per the contract.
                let d = unsafe { &mut *d };
                d.hdr.nr_version = abi::NETMAP_API;
                d.hdr.nr_reqtype = abi::req::REGISTER;
                d.hdr.nr_name = [0; 64];
                d.hdr.nr_name[..p.name.len()].copy_from_slice(p.name.as_bytes());
                d.reg.nr_mode = p.mode;
                d.reg.nr_ringid = p.ringid;
                d.reg.nr_flags = p.flags;
                d.reg.nr_mem_id = p.mem_id;
                0
            }
        }
    })
}

/// nmport_new + nmport_parse.
///
/// # Safety
/// `spec` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn nmport_prepare(spec: *const c_char) -> *mut NmportD {
    // SAFETY: no preconditions.
    let d = unsafe { nmport_new() };
    if d.is_null() {
        return d;
    }
    // SAFETY: fresh descriptor; the caller's spec.
    if unsafe { nmport_parse(d, spec) } != 0 {
        // SAFETY: ours, not used again.
        undo_keeping_errno(|| unsafe { nmport_delete(d) });
        return ptr::null_mut();
    }
    d
}

/// Undoes part of a call that failed, keeping the failure's errno.
fn undo_keeping_errno(undo: impl FnOnce()) {
    // SAFETY: this thread's errno slot.
    let e = unsafe { *libc::__errno_location() };
    undo();
    set_errno(e);
}

/// Opens `/dev/netmap` and registers the parsed port.
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_register(d: *mut NmportD) -> c_int {
    if d.is_null() {
        return einval("the port descriptor");
    }
    guard(-1, || {
        // SAFETY: a live descriptor per the contract.
        let d = unsafe { &mut *d };
        if d.register_done != 0 {
            return Errno::with(libc::EBUSY, "the port is already registered".into()).fail();
        }
        let fd = dev::open(libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return -1;
        }
        d.hdr.nr_body = &mut d.reg as *mut NmreqRegister as u64;
        d.hdr.nr_options = 0;
        let r = match table::get(fd) {
            // SAFETY: our own header and body.
            Some(f) => unsafe {
                dev::ioctl(&f, abi::NIOCCTRL as _, &mut d.hdr as *mut _ as *mut c_void)
            },
            None => -1,
        };
        if r != 0 {
            undo_keeping_errno(|| {
                dev::close(fd);
            });
            return -1;
        }
        d.fd = fd;
        d.register_done = 1;
        0
    })
}

/// Maps the registered port and fills `nifp` and the ring range.
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_mmap(d: *mut NmportD) -> c_int {
    if d.is_null() {
        return einval("the port descriptor");
    }
    guard(-1, || {
        // SAFETY: a live descriptor per the contract.
        let d = unsafe { &mut *d };
        if d.register_done == 0 {
            return Errno::with(libc::EINVAL, "nmport_mmap before nmport_register".into()).fail();
        }
        if d.mmap_done != 0 {
            return 0;
        }
        let Some(f) = table::get(d.fd) else {
            return Errno::with(libc::EBADF, "the port's descriptor was closed".into()).fail();
        };
        let len = d.reg.nr_memsize as usize;
        // As libnetmap: ports of one memory share one mapping, so buffer
        // indexes move between them (lb's output pipes). Keyed by the
        // memory's identity too, not its id alone: a mapping kept after
        // its port closed is never handed to a new port given that id.
        let key = dev::region_identity(&f).map(|ident| (d.reg.nr_mem_id, ident));
        let mem = match key.and_then(|k| shared_map::take(k, len)) {
            Some(m) => m,
            None => {
                let mem = dev::map_port(&f, len);
                if mem == libc::MAP_FAILED {
                    return -1;
                }
                if let Some(k) = key {
                    shared_map::add(k, mem, len);
                }
                mem
            }
        };
        d.mem = mem;
        d.memsize = len as u64;
        // SAFETY: nr_offset lies inside the mapping (the daemon's layout,
        // checked by the client library when it opened the region).
        d.nifp = unsafe { (mem as *mut u8).add(d.reg.nr_offset as usize) } as *mut c_void;
        let ((ft, lt), (fr, lr)) = bound_rings(
            d.reg.nr_mode,
            d.reg.nr_ringid,
            d.reg.nr_flags,
            d.reg.nr_tx_rings,
            d.reg.nr_rx_rings,
        );
        (
            d.first_tx_ring,
            d.last_tx_ring,
            d.first_rx_ring,
            d.last_rx_ring,
        ) = (ft, lt, fr, lr);
        d.cur_tx_ring = ft;
        d.cur_rx_ring = fr;
        d.mmap_done = 1;
        0
    })
}

/// nmport_register + nmport_mmap.
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_open_desc(d: *mut NmportD) -> c_int {
    // SAFETY: forwarded contract.
    if unsafe { nmport_register(d) } != 0 {
        return -1;
    }
    // SAFETY: forwarded contract.
    if unsafe { nmport_mmap(d) } != 0 {
        // SAFETY: forwarded contract.
        undo_keeping_errno(|| unsafe { nmport_undo_register(d) });
        return -1;
    }
    0
}

/// nmport_prepare + nmport_open_desc.
///
/// # Safety
/// `spec` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn nmport_open(spec: *const c_char) -> *mut NmportD {
    // SAFETY: forwarded contract.
    let d = unsafe { nmport_prepare(spec) };
    if d.is_null() {
        return d;
    }
    // SAFETY: a fresh descriptor.
    if unsafe { nmport_open_desc(d) } != 0 {
        // SAFETY: ours, not used again.
        undo_keeping_errno(|| unsafe { nmport_delete(d) });
        return ptr::null_mut();
    }
    d
}

/// Unmaps, closes and frees.
///
/// # Safety
/// `d` is NULL or a live descriptor, not used again.
#[no_mangle]
pub unsafe extern "C" fn nmport_close(d: *mut NmportD) {
    // SAFETY: forwarded contract.
    unsafe { nmport_delete(d) }
}

/// The mappings nmport_mmap made, by memory id and identity (the memfd's
/// device and inode), with how many descriptors use each.
mod shared_map {
    use std::sync::Mutex;

    /// A memory's id and its memfd's (device, inode).
    pub(super) type Key = (u16, (u64, u64));

    struct Map {
        key: Key,
        /// The address, as a number (the table is shared between threads).
        at: usize,
        len: usize,
        users: usize,
    }

    static MAPS: Mutex<Vec<Map>> = Mutex::new(Vec::new());

    /// A mapping of memory `key` of at least `len` bytes, now used once
    /// more.
    pub(super) fn take(key: Key, len: usize) -> Option<*mut libc::c_void> {
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        let m = maps.iter_mut().find(|m| m.key == key && m.len >= len)?;
        m.users += 1;
        Some(m.at as *mut libc::c_void)
    }

    /// A new mapping of memory `key`, used once.
    pub(super) fn add(key: Key, at: *mut libc::c_void, len: usize) {
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        maps.push(Map {
            key,
            at: at as usize,
            len,
            users: 1,
        });
    }

    /// One use of the mapping at `at` less: true when it was the last (or
    /// the mapping is not in the table), and the caller unmaps it.
    pub(super) fn put(at: *mut libc::c_void) -> bool {
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = maps.iter().position(|m| m.at == at as usize) else {
            return true;
        };
        maps[i].users -= 1;
        if maps[i].users == 0 {
            maps.swap_remove(i);
            return true;
        }
        false
    }
}

/// Reverses nmport_mmap.
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_undo_mmap(d: *mut NmportD) {
    if d.is_null() {
        return;
    }
    // SAFETY: a live descriptor per the contract.
    let d = unsafe { &mut *d };
    if d.mmap_done != 0 && !d.mem.is_null() && shared_map::put(d.mem) {
        // SAFETY: the mapping nmport_mmap made, of that length, which no
        // other descriptor of its memory uses any more.
        unsafe { libc::munmap(d.mem, d.memsize as usize) };
    }
    d.mem = ptr::null_mut();
    d.nifp = ptr::null_mut();
    d.memsize = 0;
    d.mmap_done = 0;
}

/// Reverses nmport_register (closes the descriptor).
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_undo_register(d: *mut NmportD) {
    if d.is_null() {
        return;
    }
    // SAFETY: a live descriptor per the contract.
    let d = unsafe { &mut *d };
    if d.register_done != 0 && d.fd >= 0 {
        guard((), || {
            dev::close(d.fd);
        });
    }
    d.fd = -1;
    d.register_done = 0;
}

/// Reverses nmport_open_desc.
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_undo_open_desc(d: *mut NmportD) {
    // SAFETY: forwarded contract.
    unsafe {
        nmport_undo_mmap(d);
        nmport_undo_register(d);
    }
}

/// Reverses nmport_prepare's parse (the descriptor stays allocated).
///
/// # Safety
/// `d` is NULL or a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn nmport_undo_prepare(d: *mut NmportD) {
    if d.is_null() {
        return;
    }
    // SAFETY: a live descriptor per the contract.
    let d = unsafe { &mut *d };
    d.hdr.nr_name = [0; 64];
    d.reg = NmreqRegister::default();
}

/// Copies one frame into the first bound TX ring with room, starting at
/// `cur_tx_ring`. Returns `size`, or 0 when no ring has room or the frame
/// does not fit a buffer. Does not sync.
///
/// # Safety
/// `d` is NULL or a live, mapped descriptor; `buf` NULL or `size` readable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn nmport_inject(d: *mut NmportD, buf: *const c_void, size: size_t) -> c_int {
    if d.is_null() || buf.is_null() {
        einval("the port descriptor or the frame");
        return 0;
    }
    guard(0, || {
        // SAFETY: a live descriptor per the contract.
        let d = unsafe { &mut *d };
        if d.mmap_done == 0 || d.first_tx_ring > d.last_tx_ring {
            set_errno(libc::EINVAL);
            return 0;
        }
        // SAFETY: a mapped descriptor keeps its mapping, of `memsize`
        // bytes, until nmport_undo_mmap.
        let port = unsafe { MappedPort::new(d.mem, d.memsize as usize, d.reg.nr_offset as usize) };
        // SAFETY: `buf` has `size` readable bytes, per the contract.
        unsafe {
            mapped::inject(
                &port,
                (d.first_tx_ring, d.last_tx_ring),
                &mut d.cur_tx_ring,
                buf as *const u8,
                size,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_ring_spans() {
        let none = (1, 0);
        assert_eq!(bound_rings(mode::ALL_NIC, 0, 0, 4, 2), ((0, 3), (0, 1)));
        assert_eq!(bound_rings(mode::DEFAULT, 0, 0, 1, 1), ((0, 0), (0, 0)));
        assert_eq!(bound_rings(mode::ONE_NIC, 2, 0, 4, 4), ((2, 2), (2, 2)));
        assert_eq!(bound_rings(mode::ONE_NIC, 2, 0, 4, 2), ((2, 2), none));
        assert_eq!(bound_rings(mode::NULL, 0, 0, 4, 4), (none, none));
        assert_eq!(
            bound_rings(mode::ALL_NIC, 0, flags::TX_RINGS_ONLY, 4, 4),
            ((0, 3), none)
        );
        assert_eq!(
            bound_rings(mode::ONE_NIC, 1, flags::RX_RINGS_ONLY, 4, 4),
            (none, (1, 1))
        );
        assert_eq!(bound_rings(mode::ALL_NIC, 0, 0, 0, 0), (none, none));
    }

    #[test]
    fn specs() {
        let p = parse_spec("vale0:a").unwrap();
        assert_eq!(
            (p.name.as_str(), p.mode, p.flags),
            ("vale0:a", mode::ALL_NIC, 0)
        );
        let p = parse_spec("vale0:a-3").unwrap();
        assert_eq!(
            (p.name.as_str(), p.mode, p.ringid),
            ("vale0:a", mode::ONE_NIC, 3)
        );
        let p = parse_spec("pipe{1/T").unwrap();
        assert_eq!((p.name.as_str(), p.flags), ("pipe{1", flags::TX_RINGS_ONLY));
        let p = parse_spec("vale0:vm-x@conf:rings=2").unwrap();
        assert_eq!(
            (p.name.as_str(), p.mode),
            ("vale0:vm-x@conf:rings=2", mode::ALL_NIC)
        );
        let p = parse_spec("pipe}7-0/R@conf:slots=256").unwrap();
        assert_eq!(
            (p.name.as_str(), p.mode, p.ringid, p.flags),
            (
                "pipe}7@conf:slots=256",
                mode::ONE_NIC,
                0,
                flags::RX_RINGS_ONLY
            )
        );
        assert_eq!(parse_spec("netmap:eth0^").unwrap().mode, mode::SW);
        assert_eq!(parse_spec("pipe{12").unwrap().mode, mode::ALL_NIC);
        for bad in ["", "eth0", "vale0:a/Q", "vale0:a-99999", "vale0:a@extmem:x"] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }
}
