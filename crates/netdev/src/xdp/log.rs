//! libxdp's and libbpf's diagnostics, into `tracing` instead of stderr.
//!
//! Both libraries print through a callback taking a `va_list`. The message
//! is formatted with `vsnprintf` and logged at debug (their warnings are
//! mostly about what they try and then work around; what failed reaches
//! the caller as a `DevError`). The kernel's own explanation of a refused
//! attach (netlink extack, which libbpf prints as "Kernel error message:
//! ...") is kept per thread so the error can quote it.
//!
//! A `va_list` parameter is a pointer on x86-64 (the array type
//! `__va_list_tag[1]` decays to one); elsewhere the libraries keep their
//! default printing to stderr.

use std::cell::RefCell;

thread_local! {
    static KERNEL_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Routes the libraries' messages to `tracing` (once per process).
pub fn install() {
    #[cfg(target_arch = "x86_64")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: `hook::print` has the signature both libraries'
            // print callbacks have on this target, and stays valid for the
            // life of the process.
            unsafe {
                hook::libxdp_set_print(Some(hook::print));
                hook::libbpf_set_print(Some(hook::print));
            }
        });
    }
}

/// Forgets the last kernel message of this thread (before an attempt).
pub fn clear_kernel_message() {
    KERNEL_MSG.with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            *m = None;
        }
    });
}

/// The kernel's explanation of the last refusal on this thread, if the
/// libraries printed one since [`clear_kernel_message`].
pub fn take_kernel_message() -> Option<String> {
    KERNEL_MSG.with(|m| m.try_borrow_mut().ok().and_then(|mut m| m.take()))
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn record(level: i32, msg: &str) {
    let msg = msg.trim_end();
    match level {
        // LIBXDP_WARN / LIBBPF_WARN, LIBXDP_INFO / LIBBPF_INFO
        0 | 1 => tracing::debug!(target: "ringswitch_netdev::xdp::libxdp", "{msg}"),
        _ => tracing::trace!(target: "ringswitch_netdev::xdp::libxdp", "{msg}"),
    }
    const KERNEL: &str = "Kernel error message: ";
    if let Some(at) = msg.find(KERNEL) {
        let text = msg[at + KERNEL.len()..].to_string();
        KERNEL_MSG.with(|m| {
            if let Ok(mut m) = m.try_borrow_mut() {
                *m = Some(text);
            }
        });
    }
}

#[cfg(target_arch = "x86_64")]
mod hook {
    use std::ffi::{c_char, c_int, c_void};

    /// `va_list` as a parameter on x86-64: a pointer to `__va_list_tag`.
    type VaList = *mut c_void;
    /// `libxdp_print_fn_t` and `libbpf_print_fn_t`.
    type PrintFn = unsafe extern "C" fn(c_int, *const c_char, VaList) -> c_int;

    extern "C" {
        pub fn libxdp_set_print(f: Option<PrintFn>) -> Option<PrintFn>;
        pub fn libbpf_set_print(f: Option<PrintFn>) -> Option<PrintFn>;
        fn vsnprintf(buf: *mut c_char, size: usize, fmt: *const c_char, ap: VaList) -> c_int;
    }

    /// The print callback.
    ///
    /// # Safety
    ///
    /// Called only by libxdp or libbpf, with a printf format and the
    /// `va_list` of its arguments.
    pub unsafe extern "C" fn print(level: c_int, fmt: *const c_char, ap: VaList) -> c_int {
        let mut buf = [0u8; 512];
        // SAFETY: the caller's format and arguments (see above); vsnprintf
        // writes at most `buf.len()` bytes, NUL included.
        let n = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len(), fmt, ap) };
        if n < 0 {
            return n;
        }
        let len = (n as usize).min(buf.len() - 1);
        super::record(level, &String::from_utf8_lossy(&buf[..len]));
        n
    }
}
