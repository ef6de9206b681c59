//! Dirty page logging for live migration (vhost-user, "Migration"): while
//! a frontend migrates its guest, it asks for `VHOST_F_LOG_ALL` and shares
//! a bitmap (SET_LOG_BASE, with `VHOST_USER_PROTOCOL_F_LOG_SHMFD`) of one
//! bit per 4 KiB page of guest physical memory. Every byte the device
//! writes into guest memory (RX buffers and their headers, used rings)
//! sets the bit of its page after the write, atomically, so the frontend
//! copies that page again before the guest runs on the destination.
//!
//! The bitmap is frontend memory like any other: its size and offset come
//! from the message and are checked against the file; the mapping is
//! registered with the SIGBUS handler (module `fault`), so a file shrunk
//! under it faults into an error for this device; a page past the end of
//! the bitmap is counted ([`DirtyLog::beyond`]), never written.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::chain::Seg;
use crate::fault::{self, FaultError, Registration};

/// Bytes of guest memory one bit of the log stands for (VHOST_LOG_PAGE).
pub const LOG_PAGE: u64 = 4096;
/// The largest log accepted: one bit per page of the most guest memory a
/// device maps ([`crate::device::MEM_BYTES_MAX`]).
pub const LOG_BYTES_MAX: u64 = crate::device::MEM_BYTES_MAX / LOG_PAGE / 8;

/// Why a dirty log was refused.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Zero bytes, or more than [`LOG_BYTES_MAX`].
    #[error("dirty log of {0} bytes: it must hold 1 to {LOG_BYTES_MAX} bytes")]
    Size(u64),
    /// The offset into the file is not a multiple of the page size (it
    /// cannot be mapped).
    #[error("dirty log at offset {0} of its file: not a multiple of the page size")]
    Offset(u64),
    /// The descriptor could not be inspected.
    #[error("cannot inspect the dirty log's descriptor")]
    Stat(#[source] std::io::Error),
    /// Not a regular file (a memfd, tmpfs or hugetlbfs file).
    #[error("the dirty log's descriptor is not a regular file")]
    NotAFile,
    /// The file does not cover the log.
    #[error("the dirty log needs {need} bytes of its file, which holds {have}")]
    FileTooShort {
        /// offset + size.
        need: u64,
        /// The file's size.
        have: u64,
    },
    /// The log does not cover the guest memory the device maps.
    #[error("a dirty log of {size} bytes covers guest memory up to {covers:#x}, which reaches {need:#x}")]
    TooSmall {
        /// The log's bytes.
        size: u64,
        /// The guest addresses its bits cover.
        covers: u64,
        /// The end of the highest mapped region.
        need: u64,
    },
    /// mmap failed.
    #[error("cannot map the dirty log")]
    Map(#[source] std::io::Error),
    /// The mapping could not be guarded against faults.
    #[error("the dirty log cannot be guarded against faults")]
    Guard(#[from] FaultError),
}

/// A frontend's dirty page bitmap, mapped shared. See the module
/// documentation.
#[derive(Debug)]
pub struct DirtyLog {
    base: NonNull<u8>,
    len: usize,
    /// Unregistered (dropped) before the mapping goes.
    guard: Option<Registration>,
    /// Pages past the end of the bitmap that were written (Relaxed: a
    /// statistic).
    beyond: AtomicU64,
}

// SAFETY: the mapping is plain shared memory owned by this value; every
// access to it goes through atomics.
unsafe impl Send for DirtyLog {}
// SAFETY: as above: concurrent `mark`s are atomic read-modify-writes.
unsafe impl Sync for DirtyLog {}

impl DirtyLog {
    /// Maps `size` bytes at `offset` of `file` (SET_LOG_BASE's `mmap_size`
    /// and `mmap_offset`) as the log of guest memory that ends at
    /// `mem_end` (0: no memory table yet, nothing to cover).
    pub fn map(file: &File, size: u64, offset: u64, mem_end: u64) -> Result<DirtyLog, LogError> {
        if size == 0 || size > LOG_BYTES_MAX {
            return Err(LogError::Size(size));
        }
        let page = page_size();
        if !offset.is_multiple_of(page) {
            return Err(LogError::Offset(offset));
        }
        let covers = size * 8 * LOG_PAGE;
        if mem_end > covers {
            return Err(LogError::TooSmall {
                size,
                covers,
                need: mem_end,
            });
        }
        let meta = file.metadata().map_err(LogError::Stat)?;
        if !meta.file_type().is_file() {
            return Err(LogError::NotAFile);
        }
        let need = offset.saturating_add(size);
        if meta.len() < need {
            return Err(LogError::FileTooShort {
                need,
                have: meta.len(),
            });
        }
        // Both fit: size is at most LOG_BYTES_MAX (2^25), offset + size at
        // most the file's length.
        let len = usize::try_from(size).map_err(|_| LogError::Size(size))?;
        let off = libc::off_t::try_from(offset).map_err(|_| LogError::Offset(offset))?;
        // SAFETY: a new shared mapping of `len` bytes of a file we hold,
        // at an address the kernel chooses; nothing else is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LogError::Map(std::io::Error::last_os_error()));
        }
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| LogError::Map(std::io::Error::other("mmap returned a null address")))?;
        let mut log = DirtyLog {
            base,
            len,
            guard: None,
            beyond: AtomicU64::new(0),
        };
        // `log` unmaps on drop if this fails.
        log.guard = Some(fault::register(
            base.as_ptr(),
            len,
            usize::try_from(page).unwrap_or(4096),
        )?);
        Ok(log)
    }

    /// Marks the pages of guest addresses `[gpa, gpa + len)` dirty, after
    /// the device wrote them. At most a frame's worth of pages at a time.
    #[inline]
    pub fn mark(&self, gpa: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = gpa / LOG_PAGE;
        let last = gpa.saturating_add(len - 1) / LOG_PAGE;
        for page in first..=last {
            let byte = page / 8;
            match usize::try_from(byte).ok().filter(|&b| b < self.len) {
                Some(b) => {
                    // SAFETY: b < len: inside the mapping, which lives as
                    // long as self; any bit pattern is a valid u8, and the
                    // frontend's accesses are atomic too.
                    let cell = unsafe { AtomicU8::from_ptr(self.base.as_ptr().add(b)) };
                    // Release: the guest memory written before this call is
                    // visible to a frontend that sees the bit (it reads the
                    // log with an atomic exchange).
                    cell.fetch_or(1 << (page % 8), Ordering::Release);
                }
                None => {
                    // Relaxed: a statistic.
                    self.beyond.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Marks the first `len` bytes written into the buffers `segs`.
    #[inline]
    pub(crate) fn mark_segs(&self, segs: &[Seg], len: u64) {
        let mut left = len;
        for s in segs {
            if left == 0 {
                break;
            }
            let n = left.min(u64::from(s.len));
            self.mark(s.addr.0, n);
            left -= n;
        }
    }

    /// Pages past the end of the bitmap the device wrote (a frontend that
    /// sized its log for less memory than it mapped since).
    pub fn beyond(&self) -> u64 {
        self.beyond.load(Ordering::Relaxed)
    }

    /// Has the log's file been shrunk under its mapping?
    pub fn faulted(&self) -> bool {
        self.guard.as_ref().is_some_and(Registration::faulted)
    }

    /// Bytes in the bitmap.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: an empty log is refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DirtyLog {
    fn drop(&mut self) {
        // Unregistered before the mapping goes, as guest memory is.
        self.guard = None;
        // SAFETY: unmaps exactly the mapping made in `map`; nothing refers
        // to it any more (self is going).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// The system's page size.
fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).unwrap_or(4096).max(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn memfd(len: u64) -> File {
        // SAFETY: memfd_create with a valid C string; the descriptor is
        // owned by the File.
        let fd = unsafe { libc::memfd_create(c"dirty-log-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fd is a new descriptor nothing else owns.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    fn read_back(f: &File, n: usize) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let mut v = vec![0u8; n];
        f.read_exact_at(&mut v, 0).unwrap();
        v
    }

    #[test]
    fn marks_every_page_a_write_touches_and_counts_what_lies_beyond() {
        let f = memfd(4096);
        let log = DirtyLog::map(&f, 16, 0, 16 * 8 * LOG_PAGE).unwrap();
        // One byte in page 0; 12 bytes across pages 9 and 10; page 127.
        log.mark(100, 1);
        log.mark(10 * LOG_PAGE - 6, 12);
        log.mark(127 * LOG_PAGE, LOG_PAGE);
        log.mark(0, 0);
        let b = read_back(&f, 16);
        assert_eq!(b[0], 0b1);
        assert_eq!(b[1], 0b110, "pages 9 and 10");
        assert_eq!(b[15], 0b1000_0000, "page 127");
        assert_eq!(b.iter().map(|x| x.count_ones()).sum::<u32>(), 4);
        assert_eq!(log.beyond(), 0);
        log.mark(128 * LOG_PAGE, 2 * LOG_PAGE);
        log.mark(u64::MAX - 10, 100);
        assert_eq!(log.beyond(), 3, "two pages past the end, one at the top");
    }

    #[test]
    fn a_log_that_does_not_fit_is_refused() {
        let f = memfd(8192);
        assert!(matches!(DirtyLog::map(&f, 0, 0, 0), Err(LogError::Size(0))));
        assert!(matches!(
            DirtyLog::map(&f, LOG_BYTES_MAX + 1, 0, 0),
            Err(LogError::Size(_))
        ));
        assert!(matches!(
            DirtyLog::map(&f, 16, 100, 0),
            Err(LogError::Offset(100))
        ));
        assert!(matches!(
            DirtyLog::map(&f, 8192, 4096, 0),
            Err(LogError::FileTooShort {
                need: 12288,
                have: 8192
            })
        ));
        assert!(matches!(
            DirtyLog::map(&f, 16, 0, 1 << 30),
            Err(LogError::TooSmall { .. })
        ));
        let dir = std::env::temp_dir();
        let d = File::open(&dir).unwrap();
        assert!(matches!(
            DirtyLog::map(&d, 16, 0, 0),
            Err(LogError::NotAFile)
        ));
        let mut ok = memfd(0);
        ok.write_all(&[0u8; 4096]).unwrap();
        assert!(DirtyLog::map(&ok, 4096, 0, 4096 * 8 * LOG_PAGE).is_ok());
    }
}
