//! `/dev/netmap` itself: open, ioctl, mmap and close on emulated files.

use libc::{c_int, c_ulong, c_void, off_t, size_t};
use ringswitch_ring::Dir;

use ringswitch_ring::layout::{MAX_RINGS, MAX_SLOTS, MIN_RINGS, MIN_SLOTS};

use crate::abi::{
    self, legacy, mode, Nmreq, NmreqHeader, NmreqPortHdr, NmreqPortInfo, NmreqRegister,
};
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

/// The port name of a request, as ringswitch names it (see
/// [`ringswitch_name`]).
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
    Ok(ringswitch_name(s))
}

/// A name as the kernel receives it, as ringswitch names the same port.
/// libnetmap (and nm_open) drop `netmap:` before the kernel sees a name,
/// so an interface arrives bare (`eth0`): here it is `netmap:eth0`. The
/// pipes of an interface (`eth0{1`) and every other name stay as they are.
fn ringswitch_name(kernel: &str) -> String {
    if ringswitch_control::name::base_name(kernel).contains([':', '{', '}']) {
        kernel.to_string()
    } else {
        format!("netmap:{kernel}")
    }
}

/// `name` with the sizes a REGISTER asks for in `nr_tx_rings`,
/// `nr_rx_rings`, `nr_tx_slots` and `nr_rx_slots` (libnetmap moves a
/// spec's `@conf:` there) as the `@conf:` options ringswitch's open takes.
/// As in netmap they size a port this open creates, and an existing port
/// keeps its own (the registration reports those). 0 asks for the
/// default; other values are brought within ringswitch's limits, as
/// netmap bounds them to its own, rather than refused.
fn with_sizes(name: &str, reg: &NmreqRegister) -> String {
    let rings = |v: u16| u32::from(v).clamp(MIN_RINGS, MAX_RINGS);
    let slots = |v: u32| v.clamp(MIN_SLOTS, MAX_SLOTS);
    let asked = [
        ("tx-rings", reg.nr_tx_rings != 0, rings(reg.nr_tx_rings)),
        ("rx-rings", reg.nr_rx_rings != 0, rings(reg.nr_rx_rings)),
        ("tx-slots", reg.nr_tx_slots != 0, slots(reg.nr_tx_slots)),
        ("rx-slots", reg.nr_rx_slots != 0, slots(reg.nr_rx_slots)),
    ];
    let mut out = name.to_string();
    let mut sep = match name.split_once('@') {
        None => "@conf:",
        // After the name's own options, so the request's win, as when
        // libnetmap parses `@conf:` into the request's fields.
        Some((_, o)) if o.starts_with("conf:") => {
            if o.len() > "conf:".len() {
                ","
            } else {
                ""
            }
        }
        // Not options ringswitch knows: the open refuses the name itself.
        Some(_) => return out,
    };
    for (key, given, v) in asked {
        if given {
            out.push_str(&format!("{sep}{key}={v}"));
            sep = ",";
        }
    }
    out
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
    // The request type first: a request not supported here fails the same
    // way whatever its name (vale-ctl's listing has an empty one).
    match hdr.nr_reqtype {
        abi::req::REGISTER => {
            let name = name_of(&hdr.nr_name)?;
            let body = hdr.nr_body as *mut NmreqRegister;
            if body.is_null() {
                return Err(efault("the REGISTER body"));
            }
            // SAFETY: non-null body of the type REGISTER names.
            let mut reg = unsafe { body.read_unaligned() };
            let info = file.register(
                &with_sizes(&name, &reg),
                RegRequest {
                    mode: reg.nr_mode,
                    ringid: reg.nr_ringid,
                    flags: reg.nr_flags,
                    mem_id: reg.nr_mem_id,
                },
            )?;
            let asked = reg.nr_mem_id;
            if asked != 0 && asked != info.mem_id && crate::memid::in_use(asked) {
                // netmap puts a port the open creates into the memory
                // asked for. Here only a pipe goes into another's memory,
                // that of the switch port it is a pipe of (`PORT{N` in
                // `PORT`'s: lb's output pipes); any other request cannot
                // be met, and is refused rather than answered with another
                // id that the program would have to notice (lb then blames
                // other programs).
                file.unregister();
                let whose = crate::memid::port_of(asked)
                    .map_or_else(String::new, |p| format!(" (switch port {p}'s)"));
                return Err(Errno::with(
                    libc::EOPNOTSUPP,
                    format!(
                        "{name}: the registration asks for memory {asked}{whose}, which another port of this process has; in ringswitch only a pipe shares another's memory, that of the switch port it is a pipe of (PORT{{N and PORT}}N in PORT's)"
                    ),
                ));
            }
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
            let name = name_of(&hdr.nr_name)?;
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
        abi::req::PORT_HDR_SET => {
            let body = hdr.nr_body as *mut NmreqPortHdr;
            if body.is_null() {
                return Err(efault("the PORT_HDR_SET body"));
            }
            // SAFETY: non-null body of the type PORT_HDR_SET names.
            let req = unsafe { body.read_unaligned() };
            // The length first, as netmap checks it before the port.
            if !crate::state::VNET_HDR_LENS.contains(&req.nr_hdr_len) {
                return Err(Errno::with(
                    libc::EINVAL,
                    format!(
                        "a virtio-net header is 0, 10 or 12 bytes, not {}",
                        req.nr_hdr_len
                    ),
                ));
            }
            let name = name_of(&hdr.nr_name)?;
            crate::file::set_hdr_len(&name, req.nr_hdr_len)
        }
        abi::req::PORT_HDR_GET => {
            let body = hdr.nr_body as *mut NmreqPortHdr;
            if body.is_null() {
                return Err(efault("the PORT_HDR_GET body"));
            }
            let name = name_of(&hdr.nr_name)?;
            // A port no descriptor of this process holds has no header
            // here: headers are added and taken off in the process that
            // has the port open, and frames on the switch never carry one.
            let len = match crate::file::hdr_len_of(&name) {
                Some(l) => l,
                None => {
                    name.parse::<ringswitch_control::PortName>()
                        .map_err(|e| Errno::with(libc::EINVAL, format!("{name}: {e}")))?;
                    0
                }
            };
            let out = NmreqPortHdr {
                nr_hdr_len: len,
                nr_reserved: 0,
            };
            // SAFETY: non-null body of the type PORT_HDR_GET names.
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

/// PORT_INFO_GET: the registration's figures when `name` is a port this
/// descriptor, or another descriptor of this process, holds (with the
/// memory id libnetmap's `@PORT` suffix asks for), otherwise those of a
/// short-lived registration on a second descriptor (which, as in netmap,
/// creates a VALE port on demand and lets it go again).
fn port_info(file: &NmFile, name: &str) -> Result<crate::file::RegInfo, Errno> {
    if let Some(i) = file
        .info_of(name)
        .or_else(|| crate::state::PortState::find(name).and_then(|s| s.info()))
    {
        return Ok(i);
    }
    let probe = NmFile::open(true)?;
    let info = probe.register(
        name,
        RegRequest {
            mode: mode::NULL,
            ringid: 0,
            flags: 0,
            mem_id: 0,
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
                    mem_id: 0,
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
        let p = unsafe { real::mmap(addr, len, prot, flags, memfd, 0) };
        if p != libc::MAP_FAILED {
            // Followed when the port reconnects to a new daemon.
            crate::remap::record(file.fd(), p, len, prot);
        }
        Ok(p)
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

/// The identity of the memory `file`'s port is registered on: its memfd's
/// device and inode, which no other memory has while a mapping of it (or
/// the port) holds it open. None before REGISTER or if fstat fails.
pub fn region_identity(file: &NmFile) -> Option<(u64, u64)> {
    file.with_region(|memfd, _| {
        // SAFETY: stat is plain data; all zeroes is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes one stat into `st`, which lives across the
        // call; `memfd` is the port's open memfd (held under the file's
        // lock for the call).
        let ok = unsafe { libc::fstat(memfd, &mut st) } == 0;
        ok.then_some((st.st_dev, st.st_ino))
    })
    .flatten()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_interface_names_are_netmap_names() {
        assert_eq!(ringswitch_name("eth0"), "netmap:eth0");
        assert_eq!(
            ringswitch_name("eth0@conf:rings=2"),
            "netmap:eth0@conf:rings=2"
        );
        for same in [
            "vale0:a",
            "eth0{1",
            "x}2",
            "netmap:eth0",
            "vale0:a@conf:rings=2",
        ] {
            assert_eq!(ringswitch_name(same), same);
        }
    }

    #[test]
    fn register_sizes_become_conf_options() {
        let reg = |tr, rr, ts, rs| NmreqRegister {
            nr_tx_rings: tr,
            nr_rx_rings: rr,
            nr_tx_slots: ts,
            nr_rx_slots: rs,
            ..NmreqRegister::default()
        };
        assert_eq!(with_sizes("vale0:a", &reg(0, 0, 0, 0)), "vale0:a");
        assert_eq!(
            with_sizes("vale0:a", &reg(2, 2, 0, 512)),
            "vale0:a@conf:tx-rings=2,rx-rings=2,rx-slots=512"
        );
        // Brought within ringswitch's limits, as netmap bounds its own.
        assert_eq!(
            with_sizes("p{1", &reg(99, 0, 8, 100_000)),
            "p{1@conf:tx-rings=16,tx-slots=64,rx-slots=4096"
        );
        // The request's fields come after the name's own options.
        assert_eq!(
            with_sizes("vale0:a@conf:rings=4", &reg(0, 2, 0, 0)),
            "vale0:a@conf:rings=4,rx-rings=2"
        );
        assert_eq!(
            with_sizes("vale0:a@conf:", &reg(1, 0, 0, 0)),
            "vale0:a@conf:tx-rings=1"
        );
        assert_eq!(with_sizes("vale0:a@bad", &reg(1, 0, 0, 0)), "vale0:a@bad");
        for s in [
            "vale0:a@conf:tx-rings=2,rx-rings=2,rx-slots=512",
            "p{1@conf:tx-rings=16,tx-slots=64,rx-slots=4096",
        ] {
            assert!(s.parse::<ringswitch_control::PortName>().is_ok(), "{s}");
        }
    }
}
