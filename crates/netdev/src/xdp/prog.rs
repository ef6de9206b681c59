//! What XDP programs an interface has, as libxdp sees them: before
//! attaching (refuse a foreign program, or libxdp's in another mode), and
//! to remove libxdp's AF_XDP program left behind by a process that died.

use std::ffi::{c_int, CStr};

use super::ffi::{self, XdpMultiprog, XdpProgram};
use super::{libxdp_lock, XdpMode, NEEDS};
use crate::{iface, DevError};

/// The name of libxdp's default AF_XDP program (`xsk_def_prog`), the
/// one libxdp itself looks for (`xsk_lookup_program`).
const XSK_PROG: &str = "xsk_def_prog";

/// Most programs looked at or removed in one call: a bound on loops over
/// what the kernel reports (libxdp's dispatcher holds at most 10).
const MAX_PROGS: usize = 16;

/// What is attached to an interface.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Attached {
    /// No XDP program (a hardware-offloaded one aside).
    Nothing,
    /// libxdp's AF_XDP program, alone or in libxdp's dispatcher.
    Xsk { mode: c_int },
    /// libxdp's dispatcher with other programs only (it can take ours).
    Dispatcher { mode: c_int },
    /// A program libxdp does not manage.
    Foreign { name: String, id: u32 },
}

/// An open `xdp_multiprog`, closed on drop.
struct Multiprog(*mut XdpMultiprog);

impl Multiprog {
    /// The interface's programs; None if it has none.
    fn get(ifname: &str, ifindex: u32) -> Result<Option<Multiprog>, DevError> {
        // SAFETY: returns a handle, NULL or an ERR_PTR (checked below).
        let mp = unsafe { ffi::xdp_multiprog__get_from_ifindex(ifindex as c_int) };
        match ffi::ptr_errno(mp) {
            None => Ok(Some(Multiprog(mp))),
            Some(libc::ENOENT) => Ok(None),
            Some(libc::ENODEV) => Err(DevError::NoSuchInterface {
                name: ifname.to_string(),
            }),
            Some(e) => Err(DevError::io(
                format!("reading the XDP programs of {ifname}"),
                NEEDS,
                std::io::Error::from_raw_os_error(e),
            )),
        }
    }

    fn mode(&self) -> c_int {
        // SAFETY: a valid handle.
        unsafe { ffi::xdp_multiprog__attach_mode(self.0) }
    }

    /// The programs: the main one for a legacy (single, not dispatched)
    /// attachment, else the dispatcher's components. Bounded.
    fn programs(&self) -> (bool, Vec<*mut XdpProgram>) {
        // SAFETY: a valid handle; the returned program handles belong to it
        // and live until it is closed (after every use here).
        unsafe {
            if ffi::xdp_multiprog__is_legacy(self.0) {
                let p = ffi::xdp_multiprog__main_prog(self.0);
                return (
                    true,
                    if ffi::ptr_errno(p).is_none() {
                        vec![p]
                    } else {
                        vec![]
                    },
                );
            }
            let mut v = Vec::new();
            let mut p = ffi::xdp_multiprog__next_prog(std::ptr::null(), self.0);
            while !p.is_null() && ffi::ptr_errno(p).is_none() && v.len() < MAX_PROGS {
                v.push(p);
                p = ffi::xdp_multiprog__next_prog(p, self.0);
            }
            (false, v)
        }
    }
}

impl Drop for Multiprog {
    fn drop(&mut self) {
        // SAFETY: a valid handle, closed once.
        unsafe { ffi::xdp_multiprog__close(self.0) };
    }
}

fn name(p: *const XdpProgram) -> String {
    // SAFETY: a valid program handle; its name is a NUL-terminated string
    // it owns, copied out before the handle goes.
    unsafe {
        let n = ffi::xdp_program__name(p);
        if n.is_null() {
            return String::new();
        }
        CStr::from_ptr(n).to_string_lossy().into_owned()
    }
}

fn id(p: *const XdpProgram) -> u32 {
    // SAFETY: a valid program handle.
    unsafe { ffi::xdp_program__id(p) }
}

/// What `ifname` has attached. Call with the libxdp lock held.
pub(super) fn attached(ifname: &str, ifindex: u32) -> Result<Attached, DevError> {
    let Some(mp) = Multiprog::get(ifname, ifindex)? else {
        return Ok(Attached::Nothing);
    };
    let mode = mp.mode();
    let (legacy, progs) = mp.programs();
    if mode == ffi::XDP_MODE_HW || (legacy && progs.is_empty()) {
        // Only a program offloaded to the NIC: the driver hook is free.
        return Ok(Attached::Nothing);
    }
    if progs.iter().any(|&p| name(p) == XSK_PROG) {
        return Ok(Attached::Xsk { mode });
    }
    if legacy {
        let p = progs[0];
        return Ok(Attached::Foreign {
            name: name(p),
            id: id(p),
        });
    }
    Ok(Attached::Dispatcher { mode })
}

fn mode_name(mode: c_int) -> &'static str {
    match mode {
        ffi::XDP_MODE_NATIVE => "native",
        ffi::XDP_MODE_SKB => "generic",
        _ => "another",
    }
}

/// What an interface had attached before this process attached to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Before {
    /// No XDP program.
    Nothing,
    /// libxdp's AF_XDP program (another process's: shared).
    Xsk,
    /// libxdp's dispatcher with other programs.
    Dispatcher,
}

/// Refuses to attach where it cannot work: a foreign program (Busy), or
/// libxdp's programs in the other mode (Unsupported: [`crate::open_nic`]
/// then tries the other mode). Returns what is attached already. Call
/// with the libxdp lock held.
pub(super) fn check_before_attach(
    ifname: &str,
    ifindex: u32,
    mode: XdpMode,
) -> Result<Before, DevError> {
    let want = match mode {
        XdpMode::Native => ffi::XDP_MODE_NATIVE,
        XdpMode::Generic => ffi::XDP_MODE_SKB,
    };
    let what = match mode {
        XdpMode::Native => "native XDP",
        XdpMode::Generic => "generic XDP",
    };
    match attached(ifname, ifindex)? {
        Attached::Nothing => Ok(Before::Nothing),
        Attached::Foreign { name, id } => Err(DevError::Busy {
            name: ifname.to_string(),
            why: format!("the XDP program {name:?} (id {id}) is attached to it, and it is not libxdp's AF_XDP program"),
        }),
        Attached::Xsk { mode: m } | Attached::Dispatcher { mode: m } if m != want => Err(DevError::Unsupported {
            name: ifname.to_string(),
            what,
            why: format!("libxdp's XDP programs are already attached to it in {} mode", mode_name(m)),
        }),
        Attached::Xsk { .. } => {
            tracing::info!(
                ifname,
                "libxdp's AF_XDP program is already attached (another process's, or left by one that died: detach_stale removes those); sharing it"
            );
            Ok(Before::Xsk)
        }
        Attached::Dispatcher { .. } => Ok(Before::Dispatcher),
    }
}

/// Removes libxdp's AF_XDP program (`xsk_def_prog`) from `ifname`, where a
/// process that died left it: alone, or from libxdp's dispatcher, leaving
/// the dispatcher's other programs in place. Other programs are never
/// touched. Returns whether one was removed (false for an interface that
/// no longer exists).
///
/// The caller must know that no live process uses AF_XDP sockets on the
/// interface through libxdp (the daemon calls this at start, for interfaces
/// its state file says it had attached): libxdp's program does not say
/// whether the sockets it serves still exist.
pub fn detach_stale(ifname: &str) -> Result<bool, DevError> {
    iface::validate_name(ifname)?;
    let ifindex = match iface::ifindex(ifname) {
        Ok(i) => i,
        // Gone, and its programs with it.
        Err(DevError::NoSuchInterface { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    super::log::install();
    let _g = libxdp_lock();
    remove_xsk_prog(ifname, ifindex, "removed a stale AF_XDP program")
}

/// Removes the XDP program a failed attach in `mode` left on `ifname`
/// (libxdp attaches its program, then reads it back, which fails without
/// CAP_SYS_ADMIN and leaves it), given what was there `before`. With the
/// capability libxdp's own program is picked out by name; without, and
/// only where nothing was attached before, the program in that mode goes
/// by netlink, which needs CAP_NET_ADMIN only (the libxdp lock is held, so
/// it is the failed attach's). Returns whether one was removed. Call with
/// the libxdp lock held.
pub(super) fn remove_failed_attach(
    ifname: &str,
    ifindex: u32,
    mode: XdpMode,
    before: Before,
) -> Result<bool, DevError> {
    const DONE: &str = "removed the AF_XDP program a failed attach left";
    if before == Before::Xsk {
        // Another process's, shared: it stays.
        return Ok(false);
    }
    match remove_xsk_prog(ifname, ifindex, DONE) {
        Err(DevError::Permission { .. }) if before == Before::Nothing => {}
        r => return r,
    }
    let flags = match mode {
        XdpMode::Native => ffi::XDP_FLAGS_DRV_MODE,
        XdpMode::Generic => ffi::XDP_FLAGS_SKB_MODE,
    };
    let mut prog_id = 0u32;
    // SAFETY: plain values and an out pointer to a u32 alive across the
    // call.
    let r = unsafe { ffi::bpf_xdp_query_id(ifindex as c_int, flags as c_int, &mut prog_id) };
    if r != 0 || prog_id == 0 {
        return Ok(false);
    }
    // SAFETY: plain values; no options.
    let r = unsafe { ffi::bpf_xdp_detach(ifindex as c_int, flags, std::ptr::null()) };
    if r != 0 {
        return Err(DevError::io(
            format!("removing the XDP program (id {prog_id}) a failed attach left on {ifname}"),
            NEEDS,
            std::io::Error::from_raw_os_error(-r),
        ));
    }
    tracing::info!(
        ifname,
        prog_id,
        mode = mode_name(match mode {
            XdpMode::Native => ffi::XDP_MODE_NATIVE,
            XdpMode::Generic => ffi::XDP_MODE_SKB,
        }),
        "{DONE}"
    );
    Ok(true)
}

/// Removes libxdp's AF_XDP program from `ifname` (see [`detach_stale`]),
/// logging `done` for each one removed. Call with the libxdp lock held.
fn remove_xsk_prog(ifname: &str, ifindex: u32, done: &'static str) -> Result<bool, DevError> {
    let mut removed = false;
    // One program per round; a second round finds none (bounded anyway).
    for _ in 0..MAX_PROGS {
        let Some(mp) = Multiprog::get(ifname, ifindex)? else {
            break;
        };
        let mode = mp.mode();
        let (legacy, progs) = mp.programs();
        if mode == ffi::XDP_MODE_HW {
            break;
        }
        let Some(&p) = progs.iter().find(|&&p| name(p) == XSK_PROG) else {
            break;
        };
        let pid = id(p);
        let r = if legacy {
            // SAFETY: a valid handle; detaches its (single) program.
            unsafe { ffi::xdp_multiprog__detach(mp.0) }
        } else {
            // SAFETY: a program handle of `mp`, alive until `mp` drops
            // below; libxdp rebuilds the dispatcher without it (or removes
            // the dispatcher if it was the last).
            unsafe { ffi::xdp_program__detach(p, ifindex as c_int, mode, 0) }
        };
        drop(mp);
        if r == -libc::ENODEV {
            // The interface went, and the program with it.
            return Ok(removed);
        }
        if r != 0 {
            return Err(DevError::io(
                format!("removing the stale AF_XDP program (id {pid}) from {ifname}"),
                NEEDS,
                std::io::Error::from_raw_os_error(-r),
            ));
        }
        tracing::info!(ifname, prog_id = pid, mode = mode_name(mode), "{done}");
        removed = true;
    }
    Ok(removed)
}
