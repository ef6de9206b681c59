//! The C library calls this library takes over. Each checks whether it is
//! about `/dev/netmap` or an emulated descriptor, and otherwise forwards to
//! the C library untouched.
//!
//! `open` and `ioctl` are variadic in C. They are defined here with their
//! optional argument as a fixed one: on the Linux x86-64 and AArch64 calling
//! conventions a variadic integer or pointer argument travels exactly where
//! a fixed one does, and an absent one is never read (the mode only with
//! O_CREAT or O_TMPFILE, which are forwarded untouched).

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("the netmap compatibility library supports Linux on x86-64 and AArch64");

use libc::{c_char, c_int, c_ulong, c_void, epoll_event, mode_t, nfds_t, off_t, pollfd, size_t};

use crate::{dev, epoll, guard, real, table};

/// An open of `path` when it is `/dev/netmap`, emulated here: the new
/// descriptor, or -1 and errno. None for any other path (the C library's
/// to open).
///
/// # Safety
/// `path` is NULL or a C string.
unsafe fn open_dev_netmap(path: *const c_char, flags: c_int) -> Option<c_int> {
    // SAFETY: a C string from the caller.
    unsafe { dev::is_dev_netmap(path) }.then(|| guard(-1, || dev::open(flags)))
}

/// Defines the C library's open call `$name` (after `dirfd` for the `*at`
/// ones): `/dev/netmap` is emulated here, any other path goes to the C
/// library's `$name` as given. Four symbols with one body: a function
/// cannot be exported under several names.
macro_rules! interpose_open {
    ($(#[$m:meta])* $name:ident($($dirfd:ident)?)) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            $($dirfd: c_int,)?
            path: *const c_char,
            flags: c_int,
            mode: mode_t,
        ) -> c_int {
            // SAFETY: the caller's C string.
            if let Some(fd) = unsafe { open_dev_netmap(path, flags) } {
                return fd;
            }
            // SAFETY: forwarded as given.
            unsafe { real::$name($($dirfd,)? path, flags, mode) }
        }
    };
}

interpose_open!(
    /// open(2).
    ///
    /// # Safety
    /// As for open(2).
    open()
);
interpose_open!(
    /// open64(2).
    ///
    /// # Safety
    /// As for open(2).
    open64()
);
interpose_open!(
    /// openat(2).
    ///
    /// # Safety
    /// As for openat(2).
    openat(dirfd)
);
interpose_open!(
    /// openat64(2).
    ///
    /// # Safety
    /// As for openat(2).
    openat64(dirfd)
);

/// The fortified open glibc calls with `_FORTIFY_SOURCE`.
///
/// # Safety
/// As for open(2) without a mode.
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as open.
    unsafe { open(path, flags, 0) }
}

/// The fortified open64.
///
/// # Safety
/// As for open(2) without a mode.
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as open64.
    unsafe { open64(path, flags, 0) }
}

/// ioctl(2).
///
/// # Safety
/// As for ioctl(2).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    if table::owns(fd) {
        return guard(-1, || match table::get(fd) {
            // SAFETY: the application's argument for this request.
            Some(f) => unsafe { dev::ioctl(&f, req, arg) },
            None => {
                crate::set_errno(libc::EBADF);
                -1
            }
        });
    }
    // SAFETY: forwarded as given.
    unsafe { real::ioctl(fd, req, arg) }
}

/// Defines the C library's mapping call `$name`: a mapping of an emulated
/// descriptor maps its port here, any other goes to the C library's `$name`
/// as given. Two symbols with one body, as for the open calls.
macro_rules! interpose_mmap {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            addr: *mut c_void,
            len: size_t,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            off: off_t,
        ) -> *mut c_void {
            if fd >= 0 && table::owns(fd) {
                return guard(libc::MAP_FAILED, || match table::get(fd) {
                    // SAFETY: the application's mapping request.
                    Some(f) => unsafe { dev::mmap(&f, addr, len, prot, flags, off) },
                    None => {
                        crate::set_errno(libc::EBADF);
                        libc::MAP_FAILED
                    }
                });
            }
            // SAFETY: forwarded as given.
            unsafe { real::$name(addr, len, prot, flags, fd, off) }
        }
    };
}

interpose_mmap!(
    /// mmap(2).
    ///
    /// # Safety
    /// As for mmap(2).
    mmap
);
interpose_mmap!(
    /// mmap64(2).
    ///
    /// # Safety
    /// As for mmap(2).
    mmap64
);

/// munmap(2): forgets any mapping of an emulated port it touches (see
/// `remap`), then unmaps as the C library does.
///
/// # Safety
/// As for munmap(2).
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    guard((), || crate::remap::forget_range(addr, len));
    // SAFETY: forwarded as given.
    unsafe { real::munmap(addr, len) }
}

/// close(2).
///
/// # Safety
/// As for close(2).
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if table::owns(fd) {
        return guard(-1, || dev::close(fd));
    }
    // SAFETY: forwarded as given.
    unsafe { real::close(fd) }
}

/// poll(2).
///
/// # Safety
/// As for poll(2).
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: forwarded contract; `epoll::poll` forwards when no entry is
    // emulated.
    guard(-1, || unsafe { epoll::poll(fds, n, timeout) })
}

/// The fortified poll.
///
/// # Safety
/// As for poll(2).
#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: c_int,
    fdslen: size_t,
) -> c_int {
    if (fdslen / std::mem::size_of::<pollfd>()) < n as usize {
        // What glibc does on this overflow.
        std::process::abort();
    }
    // SAFETY: as poll.
    unsafe { poll(fds, n, timeout) }
}

/// select(2).
///
/// # Safety
/// As for select(2).
#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    // SAFETY: forwarded contract; forwards when no descriptor is emulated.
    guard(-1, || unsafe { epoll::select(nfds, r, w, e, tv) })
}

/// epoll_ctl(2).
///
/// # Safety
/// As for epoll_ctl(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut epoll_event,
) -> c_int {
    if table::owns(fd) {
        // SAFETY: forwarded contract.
        return guard(-1, || unsafe { epoll::epoll_ctl(epfd, op, fd, ev) });
    }
    // SAFETY: forwarded as given.
    unsafe { real::epoll_ctl(epfd, op, fd, ev) }
}

/// epoll_wait(2).
///
/// # Safety
/// As for epoll_wait(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    evs: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if epoll::watched(epfd) {
        // SAFETY: forwarded contract.
        return guard(-1, || unsafe {
            epoll::epoll_wait(epfd, evs, max, timeout, std::ptr::null())
        });
    }
    // SAFETY: forwarded as given.
    unsafe { real::epoll_wait(epfd, evs, max, timeout) }
}

/// epoll_pwait(2).
///
/// # Safety
/// As for epoll_pwait(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    evs: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const libc::sigset_t,
) -> c_int {
    if epoll::watched(epfd) {
        // SAFETY: forwarded contract.
        return guard(-1, || unsafe {
            epoll::epoll_wait(epfd, evs, max, timeout, mask)
        });
    }
    // SAFETY: forwarded as given.
    unsafe { real::epoll_pwait(epfd, evs, max, timeout, mask) }
}
