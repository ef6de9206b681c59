//! Which descriptors are emulated `/dev/netmap` files.
//!
//! Every interposed call on a descriptor asks this table first, so the
//! question costs one atomic load. An entry is borrowed with a user count:
//! `remove` unpublishes the file, then waits for the borrows in flight to
//! end before it hands the file back to be dropped.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use crate::file::NmFile;

/// Descriptors at or above this number cannot be emulated files.
pub const MAX_FD: usize = 1 << 16;

struct Entry {
    file: AtomicPtr<NmFile>,
    users: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    file: AtomicPtr::new(std::ptr::null_mut()),
    users: AtomicU32::new(0),
};

static TABLE: [Entry; MAX_FD] = [EMPTY; MAX_FD];

fn entry(fd: i32) -> Option<&'static Entry> {
    usize::try_from(fd).ok().and_then(|i| TABLE.get(i))
}

/// Whether `fd` is an emulated file (cheap: one load).
#[inline]
pub fn owns(fd: i32) -> bool {
    // Relaxed: a hint only; `get` re-checks with the user count held.
    entry(fd).is_some_and(|e| !e.file.load(Ordering::Relaxed).is_null())
}

/// A borrowed file; the table keeps it alive until this drops.
pub struct Borrow {
    e: &'static Entry,
    file: *const NmFile,
}

impl std::ops::Deref for Borrow {
    type Target = NmFile;
    fn deref(&self) -> &NmFile {
        // SAFETY: `remove` does not free the file while `users` counts us.
        unsafe { &*self.file }
    }
}

impl Drop for Borrow {
    fn drop(&mut self) {
        // Release: pairs with the Acquire load in `remove`, so the file is
        // not freed before our last use of it.
        self.e.users.fetch_sub(1, Ordering::Release);
    }
}

/// Borrows the file behind `fd`.
pub fn get(fd: i32) -> Option<Borrow> {
    let e = entry(fd)?;
    if e.file.load(Ordering::Relaxed).is_null() {
        return None;
    }
    // SeqCst on the count and on the re-load, pairing with the SeqCst swap
    // and count load in `remove`: either remove sees our count, or we see
    // its null.
    e.users.fetch_add(1, Ordering::SeqCst);
    let p = e.file.load(Ordering::SeqCst);
    if p.is_null() {
        e.users.fetch_sub(1, Ordering::Release);
        return None;
    }
    Some(Borrow { e, file: p })
}

/// Publishes `file` under `fd`. Fails when `fd` is out of range or taken.
pub fn insert(fd: i32, file: Box<NmFile>) -> Result<(), Box<NmFile>> {
    let Some(e) = entry(fd) else {
        return Err(file);
    };
    let p = Box::into_raw(file);
    // Release: the file's contents are visible to whoever loads the pointer.
    match e
        .file
        .compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::Relaxed)
    {
        Ok(_) => Ok(()),
        // SAFETY: `p` came from Box::into_raw just above and was not published.
        Err(_) => Err(unsafe { Box::from_raw(p) }),
    }
}

/// Unpublishes the file behind `fd` and returns it once nobody uses it.
pub fn remove(fd: i32) -> Option<Box<NmFile>> {
    let e = entry(fd)?;
    let p = e.file.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if p.is_null() {
        return None;
    }
    // Bounded by the borrows in flight, each a single call on this file.
    while e.users.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    // SAFETY: `p` came from Box::into_raw in `insert`, is unpublished, and
    // no borrow remains.
    Some(unsafe { Box::from_raw(p) })
}
