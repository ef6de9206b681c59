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

static OPEN: Sym = Sym::new(b"open\0");
static OPEN64: Sym = Sym::new(b"open64\0");
static OPENAT: Sym = Sym::new(b"openat\0");
static OPENAT64: Sym = Sym::new(b"openat64\0");
static IOCTL: Sym = Sym::new(b"ioctl\0");
static MMAP: Sym = Sym::new(b"mmap\0");
static MMAP64: Sym = Sym::new(b"mmap64\0");
static CLOSE: Sym = Sym::new(b"close\0");
static POLL: Sym = Sym::new(b"poll\0");
static SELECT: Sym = Sym::new(b"select\0");
static EPOLL_CTL: Sym = Sym::new(b"epoll_ctl\0");
static EPOLL_WAIT: Sym = Sym::new(b"epoll_wait\0");
static EPOLL_PWAIT: Sym = Sym::new(b"epoll_pwait\0");

fn missing() -> c_int {
    crate::set_errno(libc::ENOSYS);
    -1
}

macro_rules! forward {
    ($(#[$m:meta])* $name:ident, $sym:ident, ($($a:ident: $t:ty),*) -> $r:ty, $fail:expr) => {
        $(#[$m])*
        /// # Safety
        /// As for the C library function of the same name.
        pub unsafe fn $name($($a: $t),*) -> $r {
            let f = $sym.get();
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

forward!(open, OPEN, (path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(open64, OPEN64, (path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(openat, OPENAT, (dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(openat64, OPENAT64, (dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, missing());
forward!(ioctl, IOCTL, (fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int, missing());
forward!(mmap, MMAP, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, { missing(); libc::MAP_FAILED });
forward!(mmap64, MMAP64, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, { missing(); libc::MAP_FAILED });
forward!(close, CLOSE, (fd: c_int) -> c_int, missing());
forward!(poll, POLL, (fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int, missing());
forward!(select, SELECT, (n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *mut libc::timeval) -> c_int, missing());
forward!(epoll_ctl, EPOLL_CTL, (epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int, missing());
forward!(epoll_wait, EPOLL_WAIT, (epfd: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int, missing());
forward!(epoll_pwait, EPOLL_PWAIT, (epfd: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int, missing());
