//! Surviving guest memory that disappears under the device: a frontend
//! can shrink (ftruncate) the file behind its memory table at any time, and
//! the next access to a page past the new end raises SIGBUS. Left alone,
//! that kills the daemon and every switch in it.
//!
//! The defence, as kernels do for `copy_from_user`, turns such a fault into
//! an error for the one device it belongs to:
//!
//! - Every guest memory mapping is registered ([`register`]) in a fixed-size
//!   table of `[start, start + len)` ranges, lock-free and readable from a
//!   signal handler; the [`Registration`] removes it when dropped, before the
//!   mapping itself goes.
//! - A process-wide SIGBUS handler, installed once when the first range is
//!   registered, looks the faulting address up. Inside a registered range it
//!   maps anonymous zero pages over the faulting page
//!   (`MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS`), so the interrupted access
//!   (a ring read, a `memcpy` of frame bytes) completes on harmless memory,
//!   marks the range faulted and bumps a global fault count. The data path
//!   compares that count once per batch ([`fault_count`]) and, when it moved,
//!   asks its own registrations ([`Registration::faulted`]); a device whose
//!   memory faulted stops its queues and waits for the next frontend.
//! - Any other SIGBUS behaves as before: the previous handler is called
//!   (Rust's own, which handles stack guard pages), or the default action is
//!   restored and the signal raised again, so real bugs still crash.
//!
//! # Safety
//!
//! The handler touches only atomics in a static table, and makes the
//! `mmap`, `sigaction` and `raise` system calls, all async-signal-safe on
//! Linux. The table is a seqlock per slot: a writer makes the sequence odd,
//! writes the range, makes it even again; the handler uses a slot only when
//! it read the same even sequence before and after the range, so it never
//! acts on a half-written range. A range is removed while nothing accesses
//! it (the last holder of the mapping drops it, then unmaps), so the handler
//! never maps pages over memory that has been unmapped and reused.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Most guest memory ranges registered at once (every region of every
/// memory table in use). A table that does not fit is refused.
pub const RANGES_MAX: usize = 1024;

/// Why a range could not be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// Every slot of the range table is in use.
    #[error("more than {RANGES_MAX} guest memory regions are mapped")]
    TableFull,
    /// The SIGBUS handler could not be installed.
    #[error("cannot install the SIGBUS handler (errno {0})")]
    Install(i32),
}

/// One slot of the range table. `seq` is odd while the slot is written.
struct Slot {
    /// Claimed by a registration (Acquire/Release with its owner's writes).
    used: AtomicBool,
    seq: AtomicU64,
    start: AtomicUsize,
    /// 0 when free: matches nothing.
    len: AtomicUsize,
    /// The mapping's page size (huge pages for hugetlbfs).
    page: AtomicUsize,
    faulted: AtomicBool,
}

impl Slot {
    #[allow(clippy::declare_interior_mutable_const)] // only to build the static table
    const EMPTY: Slot = Slot {
        used: AtomicBool::new(false),
        seq: AtomicU64::new(0),
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        page: AtomicUsize::new(0),
        faulted: AtomicBool::new(false),
    };

    /// Writes the range under the seqlock (only the slot's owner writes).
    fn write(&self, start: usize, len: usize, page: usize) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd sequence before the range stores: pairs with the
        // handler's Acquire fence between reading the range and reading the
        // sequence again, so a reader that saw any new field sees it odd.
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        self.page.store(page, Ordering::Relaxed);
        self.faulted.store(false, Ordering::Relaxed);
        // Release: pairs with the handler's Acquire load of `seq`, so a
        // reader that sees the even sequence sees the whole range.
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The slot's range and page size, if it is stable and holds `addr`.
    fn lookup(&self, addr: usize) -> Option<(usize, usize, usize)> {
        // Acquire: pairs with the Release store that ended the last write.
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return None;
        }
        let start = self.start.load(Ordering::Relaxed);
        let len = self.len.load(Ordering::Relaxed);
        let page = self.page.load(Ordering::Relaxed);
        // Orders the range loads before the second sequence load: pairs
        // with the writer's Release fence after it made the sequence odd.
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != s1 {
            return None;
        }
        (addr.wrapping_sub(start) < len).then_some((start, len, page))
    }
}

static SLOTS: [Slot; RANGES_MAX] = [const { Slot::EMPTY }; RANGES_MAX];

/// Faults recovered so far, process-wide.
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// The SIGBUS action in force before ours, for faults that are not ours.
struct Previous(libc::sigaction);
// SAFETY: a sigaction is plain data (a handler address, flags and a mask);
// it is written once, before the handler can run, and only read after.
unsafe impl Sync for Previous {}
// SAFETY: as for Sync; moving the plain data between threads is harmless.
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Previous> = OnceLock::new();
static INSTALL: Once = Once::new();
static INSTALL_ERRNO: AtomicU64 = AtomicU64::new(0);

/// Guest memory faults recovered so far in this process. The data path
/// reads it once per batch and looks at its own ranges only when it moved.
#[inline]
pub fn fault_count() -> u64 {
    // Acquire: pairs with the handler's Release increment, so a reader that
    // sees the new count also sees the range's faulted flag set before it.
    FAULTS.load(Ordering::Acquire)
}

/// A registered guest memory range; unregistered when dropped. Drop it
/// before unmapping the range.
#[derive(Debug)]
pub struct Registration {
    slot: usize,
}

impl Registration {
    /// Has an access inside the range faulted since it was registered?
    pub fn faulted(&self) -> bool {
        // Acquire: pairs with the handler's Release store of the flag.
        SLOTS[self.slot].faulted.load(Ordering::Acquire)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let s = &SLOTS[self.slot];
        s.write(0, 0, 0);
        // Release: pairs with the Acquire swap that claims the slot, so the
        // next owner's writes come after ours.
        s.used.store(false, Ordering::Release);
    }
}

/// Registers the mapping `[start, start + len)` whose pages are `page`
/// bytes (a power of two; `start` aligned to it), installing the SIGBUS
/// handler first if this is the first range.
pub fn register(start: *const u8, len: usize, page: usize) -> Result<Registration, FaultError> {
    install()?;
    debug_assert!(page.is_power_of_two() && (start as usize).is_multiple_of(page));
    for (i, s) in SLOTS.iter().enumerate() {
        // Acquire: pairs with the Release store that freed the slot.
        if !s.used.swap(true, Ordering::Acquire) {
            s.write(start as usize, len, page);
            return Ok(Registration { slot: i });
        }
    }
    Err(FaultError::TableFull)
}

fn install() -> Result<(), FaultError> {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed (empty) struct as output, and a
        // fully initialised new action whose handler has the SA_SIGINFO
        // signature; nothing else is touched.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            // The previous action is recorded before ours can run.
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                INSTALL_ERRNO.store(errno(), Ordering::Relaxed);
                return;
            }
            let _ = PREVIOUS.set(Previous(old));
            if libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) != 0 {
                INSTALL_ERRNO.store(errno(), Ordering::Relaxed);
            }
        }
    });
    match INSTALL_ERRNO.load(Ordering::Relaxed) {
        0 => Ok(()),
        e => Err(FaultError::Install(i32::try_from(e).unwrap_or(i32::MAX))),
    }
}

fn errno() -> u64 {
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    u64::try_from(e).unwrap_or(1).max(1)
}

/// The SIGBUS handler. See the module documentation.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // si_code is always set; si_addr is meaningful for a fault (si_code > 0).
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // Only "no such page behind the mapping" (past the end of its file) and
    // a memory error on access: a fresh zero page cures both, so the
    // retried access cannot fault again the same way.
    if code == libc::BUS_ADRERR || code == libc::BUS_MCEERR_AR {
        // SAFETY: __errno_location returns this thread's errno; the
        // interrupted code must find it as it left it.
        let errno = unsafe { *libc::__errno_location() };
        let recovered = recover(addr);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
        if recovered {
            return;
        }
    }
    not_ours(sig, info, ctx);
}

/// Maps zero pages over the faulting page if `addr` is inside a registered
/// range; true when the interrupted access can be retried.
fn recover(addr: usize) -> bool {
    for s in SLOTS.iter() {
        let Some((start, len, page)) = s.lookup(addr) else {
            continue;
        };
        let at = (addr & !(page - 1)).max(start);
        let n = page.min(start + len - at);
        // SAFETY: [at, at + n) lies inside a registered guest mapping, which
        // stays mapped while a thread accesses it (the fault proves one
        // does) and is only ever accessed as guest memory; replacing its
        // pages with private zero pages changes what the guest-memory
        // accessors read, never Rust-owned memory. mmap is a raw system
        // call, safe in a signal handler.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                n,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        // Release: pairs with the Acquire load in Registration::faulted.
        s.faulted.store(true, Ordering::Release);
        FAULTS.fetch_add(1, Ordering::Release);
        return true;
    }
    false
}

/// A SIGBUS that is not a guest memory fault: what would have happened
/// without us.
fn not_ours(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if let Some(Previous(prev)) = PREVIOUS.get() {
        let h = prev.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: with SA_SIGINFO the previous handler has this
                // signature; it gets the arguments the kernel gave us.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, ctx);
            } else {
                // SAFETY: without SA_SIGINFO the handler takes the signal
                // number only.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
            return;
        }
    }
    // SAFETY: restores the default action (a zeroed sigaction is SIG_DFL
    // with an empty mask), then raises the signal again for a signal that
    // was sent rather than caused by the access (which re-faults on return).
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
        if (*info).si_code <= 0 {
            libc::raise(libc::SIGBUS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd};

    #[test]
    fn a_truncated_mapping_reads_zeros_and_is_flagged() {
        // SAFETY: a NUL-terminated name; returns a new fd or -1.
        let fd = unsafe { libc::memfd_create(c"fault-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nothing else owns.
        let f = unsafe { std::fs::File::from_raw_fd(fd) };
        f.set_len(2 * 4096).unwrap();
        // SAFETY: a new shared mapping of our own memfd.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let p = p.cast::<u8>();
        let reg = register(p, 2 * 4096, 4096).unwrap();
        // SAFETY: inside the mapping.
        unsafe { p.add(4096).write_volatile(7) };
        f.set_len(4096).unwrap();
        let before = fault_count();
        // SAFETY: inside the mapping; the page past the end faults and is
        // replaced by a zero page.
        let v = unsafe { p.add(4096).read_volatile() };
        assert_eq!(v, 0);
        assert!(reg.faulted());
        assert!(fault_count() > before);
        drop(reg);
        // SAFETY: our own mapping, unregistered, no longer used.
        unsafe { libc::munmap(p.cast(), 2 * 4096) };
    }
}
