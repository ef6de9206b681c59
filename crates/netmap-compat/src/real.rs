//! The C library's own versions of the calls this library takes over,
//! found with `dlsym(RTLD_NEXT)` and kept once found. Code in this crate
//! that must reach the kernel on an emulated descriptor (the epoll set
//! behind it) calls these, never the interposed symbol, which would come
//! back here.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_char, c_int, c_ulong, c_void, nfds_t, off_t, pollfd, size_t};

/// One lazily resolved symbol.
struct Sym {
    name: &'static [u8],
    addr: AtomicUsize,
}

impl Sym {
    const fn new(name: &'static [u8]) -> Sym {
        Sym {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The next definition after ours, or 0 when there is none.
    fn get(&self) -> usize {
        // Relaxed: the value is a pure function of the loaded objects; a
        // race only resolves it twice.
        let a = self.addr.load(Ordering::Relaxed);
        if a != 0 {
            return a;
        }
        // SAFETY: `name` is a NUL-terminated literal; dlsym has no other
        // preconditions.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr() as *const c_char) };
        let a = p as usize;
        self.addr.store(a, Ordering::Relaxed);
        a
    }
}

fn missing() -> c_int {
    crate::set_errno(libc::ENOSYS);
    -1
}

/// Defines `real::$name`, which calls the C library's `$name` (resolved
/// once, by its own name) or returns `$fail` when there is none.
macro_rules! forward {
    ($(#[$m:meta])* $name:ident, ($($a:ident: $t:ty),*) -> $r:ty, $fail:expr) => {
        $(#[$m])*
        /// # Safety
        /// As for the C library function of the same name.
        pub unsafe fn $name($($a: $t),*) -> $r {
            static SYM: Sym = Sym::new(concat!(stringify!($name), "\0").as_bytes());
            let f = SYM.get();
            if f == 0 {
                return $fail;
            }
            // SAFETY: `f` is the C library's definition of this very
            // symbol, whose C signature this is.
            let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { std::mem::transmute(f) };
            // SAFETY: the caller upholds the function's contract.
            unsafe { f($($a),*) }
        }
    };
}

forward!(open, (path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(open64, (path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(openat, (dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(openat64, (dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(ioctl, (fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int, missing());
forward!(mmap, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, { missing(); libc::MAP_FAILED });
forward!(mmap64, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, { missing(); libc::MAP_FAILED });
forward!(munmap, (addr: *mut c_void, len: size_t) -> c_int, missing());
forward!(close, (fd: c_int) -> c_int, missing());
forward!(poll, (fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int, missing());
forward!(select, (n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *mut libc::timeval) -> c_int, missing());
forward!(epoll_ctl, (epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int, missing());
forward!(epoll_wait, (epfd: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int, missing());
forward!(epoll_pwait, (epfd: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int, missing());
