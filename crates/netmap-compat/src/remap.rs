//! The program's own mappings of its ports (what it `mmap`ed of an
//! emulated descriptor), so that a port that reconnected to a new daemon
//! (an upgrade, a restart) is mapped again at the same addresses and the
//! program's `nifp`, rings and buffers go on working. `munmap` forgets a
//! mapping, so only ranges that are still the program's netmap mappings
//! are ever mapped over.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use libc::{c_int, c_void, size_t};

use crate::real;

/// One mapping the program made of an emulated descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Map {
    /// The emulated descriptor it was made of.
    fd: c_int,
    addr: usize,
    len: usize,
    prot: c_int,
}

/// Most mappings remembered: a program maps each port once or twice.
const MAX_MAPS: usize = 1024;

static MAPS: Mutex<Vec<Map>> = Mutex::new(Vec::new());
/// How many mappings `MAPS` holds, so `munmap` of anything else in a
/// program with none costs one load.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn maps() -> MutexGuard<'static, Vec<Map>> {
    MAPS.lock().unwrap_or_else(|p| p.into_inner())
}

fn set_count(m: &[Map]) {
    // Relaxed: a hint for `forget_range`'s fast path; the list itself is
    // read under the lock.
    COUNT.store(m.len(), Ordering::Relaxed);
}

/// Remembers a mapping of emulated descriptor `fd` (beyond `MAX_MAPS`, it
/// is not remapped after a reconnection: the port then fails its waits).
pub fn record(fd: c_int, addr: *mut c_void, len: size_t, prot: c_int) {
    let mut m = maps();
    if m.len() < MAX_MAPS {
        m.push(Map {
            fd,
            addr: addr as usize,
            len,
            prot,
        });
        set_count(&m);
    }
}

/// The program unmaps `[addr, addr + len)`: every mapping touching it is
/// forgotten whole (what is left of one is not ours to map over).
pub fn forget_range(addr: *mut c_void, len: size_t) {
    // Relaxed: see `set_count`; a mapping recorded concurrently is one the
    // program cannot be unmapping yet.
    if COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let (lo, hi) = (addr as usize, (addr as usize).saturating_add(len));
    let mut m = maps();
    m.retain(|x| x.addr.saturating_add(x.len) <= lo || hi <= x.addr);
    set_count(&m);
}

/// The emulated descriptor `fd` closed: its mappings stay the program's,
/// but are no longer followed.
pub fn forget_fd(fd: c_int) {
    let mut m = maps();
    m.retain(|x| x.fd != fd);
    set_count(&m);
}

/// Maps `memfd` (`size` bytes, a reconnected port's new memory) over every
/// mapping the program made of `fd`, at the same addresses. A mapping that
/// cannot be (longer than the new memory, or refused) is forgotten and
/// reported.
pub fn remap(fd: c_int, memfd: c_int, size: usize) -> Result<(), String> {
    let mut m = maps();
    let mut failed = None;
    m.retain(|x| {
        if x.fd != fd {
            return true;
        }
        if x.len > size {
            failed = Some(format!(
                "a mapping of {} bytes is longer than the port's new memory ({size} bytes)",
                x.len
            ));
            return false;
        }
        // SAFETY: maps the port's new memfd over a range the program
        // mapped of this port and has not unmapped since (`forget_range`
        // drops any mapping it touches): MAP_FIXED replaces only that
        // mapping's pages, with the same length and protection.
        let p = unsafe {
            real::mmap(
                x.addr as *mut c_void,
                x.len,
                x.prot,
                libc::MAP_SHARED | libc::MAP_FIXED,
                memfd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            failed = Some(format!(
                "mapping the port's new memory at {:#x}: {}",
                x.addr,
                std::io::Error::last_os_error()
            ));
            return false;
        }
        true
    });
    set_count(&m);
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmapping_any_part_forgets_the_whole_mapping() {
        record(900, 0x10000 as *mut c_void, 0x4000, 3);
        record(900, 0x20000 as *mut c_void, 0x4000, 3);
        record(901, 0x30000 as *mut c_void, 0x4000, 3);
        forget_range(0x13000 as *mut c_void, 0x100);
        forget_range(0x14000 as *mut c_void, 0x10000);
        let left: Vec<usize> = maps()
            .iter()
            .filter(|x| x.fd >= 900)
            .map(|x| x.addr)
            .collect();
        assert_eq!(left, [0x30000]);
        forget_fd(901);
        assert!(maps().iter().all(|x| x.fd < 900));
    }
}
