//! How failures reach C: `errno`, a per-thread sentence for
//! `rs_last_error()`, and no panic across the boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

use ringswitch_client::ClientError;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// What `rs_last_error` returns when the thread's message is gone (the
/// thread is exiting).
static EMPTY: &[u8] = b"\0";

/// Records `msg` as this thread's last error and sets `errno`.
pub(crate) fn set_error(errno: c_int, msg: String) {
    // `try_with`: a call from a thread-local destructor must not panic.
    let _ = LAST_ERROR.try_with(|e| {
        *e.borrow_mut() = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    });
    // SAFETY: __errno_location returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = errno };
}

/// Records an error and returns `v` (the function's failure value).
pub(crate) fn fail<T>(errno: c_int, msg: impl Into<String>, v: T) -> T {
    set_error(errno, msg.into());
    v
}

/// An empty C string that lives forever.
pub(crate) fn empty() -> *const c_char {
    EMPTY.as_ptr().cast()
}

/// This thread's last message; valid until the thread's next failing call.
pub(crate) fn last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or_else(|_| empty())
}

/// Runs the body of an exported function: a panic inside becomes `on_panic`
/// with EIO, never an unwind into C.
pub(crate) fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    // AssertUnwindSafe: after a panic the only thing C sees is the error;
    // a port whose call panicked may be closed but is not trusted further
    // by anything here.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => fail(
            libc::EIO,
            "internal error in libringswitch (a bug: please report it)",
            on_panic,
        ),
    }
}

/// The errno that describes a client error.
pub(crate) fn errno_of(e: &ClientError) -> c_int {
    e.errno()
}

/// An error and its causes, as one sentence.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    ringswitch_control::error_chain(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn errno() -> c_int {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() }
    }

    fn message() -> String {
        // SAFETY: last_error returns a C string valid until the next error.
        unsafe { CStr::from_ptr(last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_eio_and_a_message() {
        let r = guard(-1, || -> i32 { panic!("boom") });
        assert_eq!(r, -1);
        assert_eq!(errno(), libc::EIO);
        assert!(message().contains("internal error"), "{}", message());
        assert_eq!(guard(-1, || 7), 7, "no panic: the value passes");
    }

    #[test]
    fn messages_are_per_thread_and_never_null() {
        set_error(libc::EINVAL, "here".into());
        std::thread::spawn(|| {
            assert_eq!(message(), "", "a new thread has no error");
            set_error(libc::ENOENT, "there\0with a nul".into());
            assert_eq!(message(), "there with a nul");
            assert_eq!(errno(), libc::ENOENT);
        })
        .join()
        .unwrap();
        assert_eq!(message(), "here");
        assert_eq!(errno(), libc::EINVAL);
    }
}
