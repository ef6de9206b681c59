//! `/dev/netmap` itself: open, ioctl, mmap and close on emulated files.

use libc::{c_int, c_ulong, c_void, off_t, size_t};
use ringswitch_ring::Dir;

use crate::abi::{self, legacy, mode, Nmreq, NmreqHeader, NmreqPortInfo, NmreqRegister};
use crate::file::{NmFile, RegRequest};
use crate::{real, table, Errno};

/// The path netmap programs open.
pub const DEV_NETMAP: &[u8] = b"/dev/netmap";

/// Whether `path` (NUL-terminated) is `/dev/netmap`.
///
/// # Safety
/// `path` is NULL or a valid C string.
pub unsafe fn is_dev_netmap(path: *const libc::c_char) -> bool {
    if path.is_null() {
        return false;
    }
    // SAFETY: a valid C string, per the contract.
    let s = unsafe { std::ffi::CStr::from_ptr(path) };
    s.to_bytes() == DEV_NETMAP
}

/// open("/dev/netmap", flags): returns the new descriptor or -1/errno.
pub fn open(flags: c_int) -> c_int {
    let file = match NmFile::open(flags & libc::O_CLOEXEC != 0) {
        Ok(f) => f,
        Err(e) => return e.fail(),
    };
    let fd = file.fd();
    if let Err(file) = table::insert(fd, file) {
        drop(file);
        // SAFETY: closing the epoll set we just made and nobody else holds.
        unsafe { real::close(fd) };
        return Errno::with(
            libc::EMFILE,
            format!(
                "descriptor {fd} is past the {} this library can emulate",
                table::MAX_FD
            ),
        )
        .fail();
    }
    fd
}

/// close() on an emulated descriptor.
pub fn close(fd: c_int) -> c_int {
    crate::epoll::forget_fd(fd);
    drop(table::remove(fd));
    // SAFETY: the descriptor is ours to close; the table no longer has it.
    unsafe { real::close(fd) }
}

fn name_of(raw: &[u8]) -> Result<String, Errno> {
    let end = raw
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Errno::with(libc::EINVAL, "the port name is not NUL-terminated".into()))?;
    let s = std::str::from_utf8(&raw[..end])
        .map_err(|_| Errno::with(libc::EINVAL, "the port name is not valid UTF-8".into()))?;
    if s.is_empty() {
        return Err(Errno::with(libc::EINVAL, "the port name is empty".into()));
    }
    Ok(s.to_string())
}

/// ioctl() on an emulated descriptor.
///
/// # Safety
/// `arg` is what the application passed: NULL or a pointer to the request
/// structure `req` names, valid for reads and writes.
pub unsafe fn ioctl(file: &NmFile, req: c_ulong, arg: *mut c_void) -> c_int {
    let r = match req {
        abi::NIOCTXSYNC => file.sync(Dir::Tx),
        abi::NIOCRXSYNC => file.sync(Dir::Rx),
        // SAFETY: forwarded contract.
        abi::NIOCCTRL => unsafe { ctrl(file, arg as *mut NmreqHeader) },
        // SAFETY: forwarded contract.
        abi::NIOCREGIF => unsafe { regif(file, arg as *mut Nmreq) },
        // SAFETY: forwarded contract.
        abi::NIOCGINFO => unsafe { ginfo(file, arg as *mut Nmreq) },
        _ => {
            crate::set_errno(libc::ENOTTY);
            return -1;
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => e.fail(),
    }
}

fn efault(what: &str) -> Errno {
    Errno::with(libc::EFAULT, format!("{what} is a NULL pointer"))
}

/// NIOCCTRL.
///
/// # Safety
/// `h` is NULL or points to a writable `nmreq_header` whose `nr_body`, if
/// not 0, points to the body its `nr_reqtype` names.
unsafe fn ctrl(file: &NmFile, h: *mut NmreqHeader) -> Result<(), Errno> {
    if h.is_null() {
        return Err(efault("the NIOCCTRL argument"));
    }
    // SAFETY: non-null, and a valid header per the contract; read unaligned
    // since C callers may pack it anywhere.
    let hdr = unsafe { h.read_unaligned() };
    if !(abi::NETMAP_MIN_API..=abi::NETMAP_MAX_API).contains(&hdr.nr_version) {
        return Err(Errno::with(
            libc::EINVAL,
            format!(
                "netmap API version {} is not supported (this library speaks {})",
                hdr.nr_version,
                abi::NETMAP_API
            ),
        ));
    }
    if hdr.nr_options != 0 {
        return Err(Errno::with(
            libc::EOPNOTSUPP,
            "netmap request options (extmem, CSB, ...) are not supported; ringswitch ports always sync through their own CSB".into(),
        ));
    }
    let name = name_of(&hdr.nr_name)?;
    match hdr.nr_reqtype {
        abi::req::REGISTER => {
            let body = hdr.nr_body as *mut NmreqRegister;
            if body.is_null() {
                return Err(efault("the REGISTER body"));
            }
            // SAFETY: non-null body of the type REGISTER names.
            let mut reg = unsafe { body.read_unaligned() };
            let info = file.register(
                &name,
                RegRequest {
                    mode: reg.nr_mode,
                    ringid: reg.nr_ringid,
                    flags: reg.nr_flags,
                },
            )?;
            reg.nr_offset = info.nifp_offset;
            reg.nr_memsize = info.memsize;
            reg.nr_tx_slots = info.tx_slots;
            reg.nr_rx_slots = info.rx_slots;
            reg.nr_tx_rings = info.tx_rings;
            reg.nr_rx_rings = info.rx_rings;
            reg.nr_host_tx_rings = 0;
            reg.nr_host_rx_rings = 0;
            reg.nr_mem_id = info.mem_id;
            reg.nr_mode = info.mode;
            reg.nr_extra_bufs = 0;
            // SAFETY: as above, writable.
            unsafe { body.write_unaligned(reg) };
            Ok(())
        }
        abi::req::PORT_INFO_GET => {
            let body = hdr.nr_body as *mut NmreqPortInfo;
            if body.is_null() {
                return Err(efault("the PORT_INFO_GET body"));
            }
            let i = port_info(file, &name)?;
            let out = NmreqPortInfo {
                nr_memsize: i.memsize,
                nr_tx_slots: i.tx_slots,
                nr_rx_slots: i.rx_slots,
                nr_tx_rings: i.tx_rings,
                nr_rx_rings: i.rx_rings,
                nr_host_tx_rings: 0,
                nr_host_rx_rings: 0,
                nr_mem_id: i.mem_id,
                pad: [0; 3],
            };
            // SAFETY: non-null body of the type PORT_INFO_GET names.
            unsafe { body.write_unaligned(out) };
            Ok(())
        }
        t if (1..=abi::req::LAST).contains(&t) => Err(Errno::with(
            libc::EOPNOTSUPP,
            format!(
                "netmap request type {t} is not supported; manage switches with `ringswitch ctl`"
            ),
        )),
        t => Err(Errno::with(
            libc::EINVAL,
            format!("unknown netmap request type {t}"),
        )),
    }
}

/// PORT_INFO_GET: the registration's figures when `name` is the port this
/// descriptor holds, otherwise those of a short-lived registration on a
/// second descriptor (which, as in netmap, creates a VALE port on demand
/// and lets it go again).
fn port_info(file: &NmFile, name: &str) -> Result<crate::file::RegInfo, Errno> {
    if let Some(i) = file.info_of(name) {
        return Ok(i);
    }
    let probe = NmFile::open(true)?;
    let info = probe.register(
        name,
        RegRequest {
            mode: mode::NULL,
            ringid: 0,
            flags: 0,
        },
    );
    let fd = probe.fd();
    drop(probe);
    // SAFETY: the probe's epoll set, never published.
    unsafe { real::close(fd) };
    info
}

/// Legacy NIOCREGIF.
///
/// # Safety
/// `r` is NULL or points to a writable `struct nmreq`.
unsafe fn regif(file: &NmFile, r: *mut Nmreq) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    unsafe {
        legacy_request(r, "the NIOCREGIF argument", |req, name| {
            let ringid = req.nr_ringid;
            let reg_mode = match req.nr_flags & legacy::REG_MASK {
                0 if ringid & legacy::SW_RING != 0 => mode::SW,
                0 if ringid & legacy::HW_RING != 0 => mode::ONE_NIC,
                0 => mode::ALL_NIC,
                m => m,
            };
            let mut flags = 0;
            if ringid & legacy::NO_TX_POLL != 0 {
                flags |= abi::flags::NO_TX_POLL;
            }
            file.register(
                name,
                RegRequest {
                    mode: reg_mode,
                    ringid: ringid & legacy::RING_MASK,
                    flags,
                },
            )
        })
    }
}

/// Legacy NIOCGINFO.
///
/// # Safety
/// `r` is NULL or points to a writable `struct nmreq`.
unsafe fn ginfo(file: &NmFile, r: *mut Nmreq) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    unsafe { legacy_request(r, "the NIOCGINFO argument", |_, name| port_info(file, name)) }
}

/// One legacy request: reads `struct nmreq` at `r` (`what`, for the error
/// when it is NULL), checks its version and port name, asks `answer` for
/// the registration's figures and writes them back into it.
///
/// # Safety
/// `r` is NULL or points to a writable `struct nmreq`.
unsafe fn legacy_request(
    r: *mut Nmreq,
    what: &str,
    answer: impl FnOnce(&Nmreq, &str) -> Result<crate::file::RegInfo, Errno>,
) -> Result<(), Errno> {
    if r.is_null() {
        return Err(efault(what));
    }
    // SAFETY: non-null, valid per the contract.
    let mut req = unsafe { r.read_unaligned() };
    check_legacy_version(req.nr_version)?;
    let name = name_of(&req.nr_name)?;
    let info = answer(&req, &name)?;
    fill_legacy(&mut req, &info)?;
    // SAFETY: as above, writable.
    unsafe { r.write_unaligned(req) };
    Ok(())
}

fn check_legacy_version(v: u32) -> Result<(), Errno> {
    if v < abi::NETMAP_LEGACY_MIN_API || v > abi::NETMAP_MAX_API as u32 {
        return Err(Errno::with(
            libc::EINVAL,
            format!("netmap API version {v} is not supported"),
        ));
    }
    Ok(())
}

fn fill_legacy(req: &mut Nmreq, info: &crate::file::RegInfo) -> Result<(), Errno> {
    let too_big = || {
        Errno::with(
            libc::EOVERFLOW,
            "the port's memory is larger than the legacy request can describe; use NIOCCTRL".into(),
        )
    };
    req.nr_offset = u32::try_from(info.nifp_offset).map_err(|_| too_big())?;
    req.nr_memsize = u32::try_from(info.memsize).map_err(|_| too_big())?;
    req.nr_tx_slots = info.tx_slots;
    req.nr_rx_slots = info.rx_slots;
    req.nr_tx_rings = info.tx_rings;
    req.nr_rx_rings = info.rx_rings;
    req.nr_arg2 = info.mem_id;
    req.nr_arg3 = 0;
    Ok(())
}

/// mmap() of an emulated descriptor: maps the port's memfd.
///
/// # Safety
/// As for mmap(2): `addr`/`flags` are the application's.
pub unsafe fn mmap(
    file: &NmFile,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> *mut c_void {
    let fail = |e: Errno| {
        e.fail();
        libc::MAP_FAILED
    };
    if flags & libc::MAP_SHARED == 0 {
        return fail(Errno::with(
            libc::EINVAL,
            "/dev/netmap must be mapped MAP_SHARED".into(),
        ));
    }
    let r = file.with_region(|memfd, size| {
        if off != 0 || len == 0 || len > size {
            return Err(Errno::with(
                libc::EINVAL,
                format!("mmap of /dev/netmap must start at 0 and cover at most nr_memsize ({size} bytes), not {len} bytes at {off}"),
            ));
        }
        // SAFETY: mapping the port's memfd, which holds `size` bytes, with
        // the application's address hint and protection.
        Ok(unsafe { real::mmap(addr, len, prot, flags, memfd, 0) })
    });
    match r {
        None => fail(Errno::with(
            libc::EINVAL,
            "mmap of /dev/netmap before NIOCCTRL REGISTER".into(),
        )),
        Some(Err(e)) => fail(e),
        Some(Ok(p)) => p,
    }
}

/// Maps the first `len` bytes of the port of `file`, shared and read-write,
/// where the kernel chooses (what nm_open and nmport_mmap do); MAP_FAILED
/// with errno set on failure.
pub fn map_port(file: &NmFile, len: size_t) -> *mut c_void {
    // SAFETY: no address asked for and no MAP_FIXED: the new mapping
    // replaces nothing of the process.
    unsafe {
        mmap(
            file,
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            0,
        )
    }
}
