//! libringswitch: the C ABI over the client library (`include/ringswitch.h`,
//! generated from this file by cbindgen and checked in).
//!
//! Conventions, for every function:
//! - arguments are checked (NULL pointers, ring numbers, lengths);
//! - failure returns -1 (or NULL) with `errno` set, and
//!   `rs_last_error()` explains it in a sentence;
//! - no panic crosses into C: a bug inside becomes EIO.
//!
//! A slot's buffer pointer stays valid while the port is open, but the slot
//! belongs to the application only until the next sync of its ring, as in
//! netmap.
#![warn(missing_docs)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::time::Duration;

use ringswitch_client::{ClientError, Port, WaitMode};
use ringswitch_control::{CallError, ErrorCode};
use ringswitch_ring::layout::NS_BUF_CHANGED;
use ringswitch_ring::Dir;

/// An open port (opaque to C).
pub struct RsPort {
    port: Port,
    name: CString,
}

/// Rings and slots of a port.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RsGeometry {
    /// TX rings.
    pub tx_rings: u32,
    /// RX rings.
    pub rx_rings: u32,
    /// Slots per TX ring.
    pub tx_slots: u32,
    /// Slots per RX ring.
    pub rx_slots: u32,
    /// Bytes per buffer.
    pub buf_size: u32,
}

/// One slot the application owns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RsSlot {
    /// The slot's buffer (`buf_size` bytes).
    pub buf: *mut c_void,
    /// Bytes of packet in it (RX), or set with `rs_slot_set_len` (TX).
    pub len: u32,
    /// The buffer's size.
    pub buf_size: u32,
    /// The buffer's index in the port's memory.
    pub buf_idx: u32,
}

/// Client-side counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RsStats {
    /// Kicks sent to the port side.
    pub kicks: u64,
    /// Sleeps on the interrupt.
    pub sleeps: u64,
    /// Values from the port side refused as invalid.
    pub bad_values: u64,
}

/// Ring direction for the slot functions: the application fills TX.
pub const RS_TX: c_int = 0;
/// Ring direction for the slot functions: the application drains RX.
pub const RS_RX: c_int = 1;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(errno: c_int, msg: String) {
    LAST_ERROR.with(|e| {
        *e.borrow_mut() = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    });
    // SAFETY: this thread's errno slot.
    unsafe { *libc::__errno_location() = errno };
}

fn fail<T>(errno: c_int, msg: impl Into<String>, v: T) -> T {
    set_error(errno, msg.into());
    v
}

/// Runs `f`; a panic becomes EIO and `on_panic`.
fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => fail(libc::EIO, "internal error in libringswitch", on_panic),
    }
}

fn errno_of(e: &ClientError) -> c_int {
    match e {
        ClientError::Call(CallError::NoDaemon { .. }) => libc::ECONNREFUSED,
        ClientError::Call(CallError::Daemon(r)) => match r.code {
            ErrorCode::BadName | ErrorCode::Geometry | ErrorCode::BadRequest => libc::EINVAL,
            ErrorCode::NotFound => libc::ENOENT,
            ErrorCode::Exists => libc::EEXIST,
            ErrorCode::Busy => libc::EBUSY,
            ErrorCode::Limit => libc::ENOMEM,
            ErrorCode::Unsupported => libc::EOPNOTSUPP,
            ErrorCode::Permission => libc::EPERM,
            ErrorCode::Internal => libc::EIO,
        },
        ClientError::NoRing(_) => libc::EINVAL,
        _ => libc::EIO,
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// # Safety
/// `p` is NULL or a C string.
unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, ()> {
    if p.is_null() {
        return fail(libc::EINVAL, format!("{what} is a NULL pointer"), Err(()));
    }
    // SAFETY: a C string per the contract.
    match unsafe { CStr::from_ptr(p) }.to_str() {
        Ok(s) => Ok(s),
        Err(_) => fail(libc::EINVAL, format!("{what} is not UTF-8"), Err(())),
    }
}

/// # Safety
/// `p` is NULL or a pointer from `rs_port_open*` not yet closed.
unsafe fn port_arg<'a>(p: *mut RsPort) -> Option<&'a mut RsPort> {
    if p.is_null() {
        return fail(libc::EINVAL, "the port is a NULL pointer", None);
    }
    // SAFETY: a live port per the contract.
    Some(unsafe { &mut *p })
}

fn ring_ok(p: &RsPort, dir: Dir, ring: u32) -> bool {
    let g = p.port.geometry();
    let n = if dir == Dir::Tx {
        g.tx_rings
    } else {
        g.rx_rings
    };
    if ring >= n {
        return fail(
            libc::EINVAL,
            format!(
                "{} ring {ring} does not exist: the port has {n}",
                if dir == Dir::Tx { "TX" } else { "RX" }
            ),
            false,
        );
    }
    true
}

fn dir_arg(dir: c_int) -> Option<Dir> {
    match dir {
        RS_TX => Some(Dir::Tx),
        RS_RX => Some(Dir::Rx),
        _ => fail(libc::EINVAL, format!("{dir} is not RS_TX or RS_RX"), None),
    }
}

fn timeout_arg(ms: c_int) -> Option<Duration> {
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

/// The last error of this thread, as a sentence (never NULL; empty if none).
#[no_mangle]
pub extern "C" fn rs_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Opens `name` (`vale0:a`, `pipe{1`, ...) on the daemon at the default
/// socket ($RINGSWITCH_SOCKET, else the system one). NULL and errno on
/// failure: ECONNREFUSED (no daemon), EINVAL (bad name), EBUSY (open
/// elsewhere), ...
///
/// # Safety
/// `name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn rs_port_open(name: *const c_char) -> *mut RsPort {
    // SAFETY: forwarded contract.
    unsafe { rs_port_open_at(std::ptr::null(), name) }
}

/// Opens `name` on the daemon listening at `socket` (NULL: the default).
///
/// # Safety
/// `socket` and `name` are NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn rs_port_open_at(
    socket: *const c_char,
    name: *const c_char,
) -> *mut RsPort {
    guard(std::ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        let Ok(name) = (unsafe { str_arg(name, "the port name") }) else {
            return std::ptr::null_mut();
        };
        let socket = if socket.is_null() {
            ringswitch_client::default_socket_path()
        } else {
            // SAFETY: forwarded contract.
            match unsafe { str_arg(socket, "the socket path") } {
                Ok(s) => Path::new(s).to_path_buf(),
                Err(()) => return std::ptr::null_mut(),
            }
        };
        match Port::open_at(&socket, name) {
            Ok(port) => {
                let name = CString::new(port.name()).unwrap_or_default();
                Box::into_raw(Box::new(RsPort { port, name }))
            }
            Err(e) => fail(
                errno_of(&e),
                format!("{name}: {}", chain(&e)),
                std::ptr::null_mut(),
            ),
        }
    })
}

/// Closes the port and frees the handle (NULL is ignored). The handle and
/// every slot pointer from it are invalid afterwards.
///
/// # Safety
/// `p` is NULL or from `rs_port_open*`, not used again.
#[no_mangle]
pub unsafe extern "C" fn rs_port_close(p: *mut RsPort) {
    if !p.is_null() {
        // SAFETY: allocated by rs_port_open_at, not used again.
        guard((), || drop(unsafe { Box::from_raw(p) }));
    }
}

/// The port's canonical name (valid while the port is open).
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_name(p: *mut RsPort) -> *const c_char {
    // SAFETY: forwarded contract.
    match unsafe { port_arg(p) } {
        Some(p) => p.name.as_ptr(),
        None => std::ptr::null(),
    }
}

/// Fills `out` with the port's geometry. 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or a live port; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rs_port_geometry(p: *mut RsPort, out: *mut RsGeometry) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if out.is_null() {
        return fail(libc::EINVAL, "the geometry is a NULL pointer", -1);
    }
    let g = p.port.geometry();
    // SAFETY: writable per the contract.
    unsafe {
        out.write(RsGeometry {
            tx_rings: g.tx_rings,
            rx_rings: g.rx_rings,
            tx_slots: g.tx_slots,
            rx_slots: g.rx_slots,
            buf_size: g.buf_size,
        })
    };
    0
}

/// The descriptor that becomes readable when the port has something for
/// the application, for your own poll/epoll loop; call
/// `rs_port_prepare_wait` before sleeping on it. -1 and errno on error.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_poll_fd(p: *mut RsPort) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { port_arg(p) } {
        Some(p) => p.port.poll_fd().as_fd().as_raw_fd(),
        None => -1,
    }
}

/// Before sleeping on `rs_port_poll_fd`: asks for interrupts on every ring
/// and returns 1 when something is already there (do not sleep then), 0
/// otherwise. After waking, call `rs_port_after_wait`.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_prepare_wait(
    p: *mut RsPort,
    want_tx: c_int,
    want_rx: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    guard(-1, || {
        p.port.prepare_wait(want_tx != 0, want_rx != 0) as c_int
    })
}

/// Withdraws the interrupt requests of `rs_port_prepare_wait`.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_after_wait(p: *mut RsPort) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    guard(-1, || {
        p.port.after_wait();
        0
    })
}

/// Busy-waits (spins on the shared memory) instead of sleeping when `on`.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_set_busy_wait(p: *mut RsPort, on: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    p.port.set_wait_mode(if on != 0 {
        WaitMode::Busy
    } else {
        WaitMode::Blocking
    });
    0
}

/// The port's `netmap_if`, for code that walks the rings with netmap's
/// macros (`NETMAP_TXRING(nifp, i)`, ...). NULL and errno on error.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_nifp(p: *mut RsPort) -> *mut c_void {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return std::ptr::null_mut();
    };
    let ofs = p.port.info().nifp_offset as usize;
    if ofs >= p.port.region().len() {
        return fail(
            libc::EIO,
            "the port's netmap_if is outside its memory",
            std::ptr::null_mut(),
        );
    }
    // SAFETY: inside the mapping, which lives as long as the port.
    unsafe { p.port.region().base().add(ofs).cast() }
}

/// Slots the application may use on a ring: free slots (RS_TX) or packets
/// (RS_RX) past the ones already advanced over. -1 and errno on error.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_ring_space(p: *mut RsPort, dir: c_int, ring: u32) -> i64 {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    let Some(d) = dir_arg(dir) else { return -1 };
    if !ring_ok(p, d, ring) {
        return -1;
    }
    p.port.app_ring(d, ring as usize).space() as i64
}

/// The `k`-th slot the application owns on a ring (0 is the next one):
/// its buffer, length and index. 0, or -1 and errno (EINVAL when `k` is
/// past `rs_ring_space`).
///
/// # Safety
/// `p` is NULL or a live port; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rs_ring_slot(
    p: *mut RsPort,
    dir: c_int,
    ring: u32,
    k: u32,
    out: *mut RsSlot,
) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    let Some(d) = dir_arg(dir) else { return -1 };
    if out.is_null() {
        return fail(libc::EINVAL, "the slot is a NULL pointer", -1);
    }
    if !ring_ok(p, d, ring) {
        return -1;
    }
    let r = p.port.app_ring(d, ring as usize);
    let space = r.space();
    let Some(mut s) = r.slot_mut(k) else {
        return fail(
            libc::EINVAL,
            format!("slot {k} is not the application's: the ring has {space} available"),
            -1,
        );
    };
    let len = s.len() as u32;
    let idx = s.buf_idx();
    let buf = s.buf_mut();
    let slot = RsSlot {
        buf: buf.as_mut_ptr().cast(),
        len: len.min(buf.len() as u32),
        buf_size: buf.len() as u32,
        buf_idx: idx,
    };
    if buf.is_empty() {
        return fail(
            libc::EIO,
            format!("slot {k} holds an invalid buffer index {idx}"),
            -1,
        );
    }
    // SAFETY: writable per the contract.
    unsafe { out.write(slot) };
    0
}

/// Sets the length of the `k`-th TX slot the application owns.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_slot_set_len(p: *mut RsPort, ring: u32, k: u32, len: u32) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if !ring_ok(p, Dir::Tx, ring) {
        return -1;
    }
    let buf_size = p.port.geometry().buf_size;
    if len > buf_size || len > u16::MAX as u32 {
        return fail(
            libc::EINVAL,
            format!("{len} bytes do not fit a {buf_size}-byte buffer"),
            -1,
        );
    }
    match p.port.app_ring(Dir::Tx, ring as usize).slot_mut(k) {
        Some(mut s) => {
            s.set_len(len as u16);
            0
        }
        None => fail(
            libc::EINVAL,
            format!("TX slot {k} is not the application's"),
            -1,
        ),
    }
}

/// Moves past `n` slots of a ring (sent or consumed): they go to the port
/// side at the next sync. At most `rs_ring_space`.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_ring_advance(p: *mut RsPort, dir: c_int, ring: u32, n: u32) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    let Some(d) = dir_arg(dir) else { return -1 };
    if !ring_ok(p, d, ring) {
        return -1;
    }
    let r = p.port.app_ring(d, ring as usize);
    if n > r.space() {
        return fail(
            libc::EINVAL,
            format!("cannot advance {n} slots: {} are available", r.space()),
            -1,
        );
    }
    r.advance(n);
    0
}

/// TX sync: hands the advanced slots to the port side and refreshes the
/// free space.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_txsync(p: *mut RsPort, ring: u32) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if !ring_ok(p, Dir::Tx, ring) {
        return -1;
    }
    guard(-1, || {
        p.port.txsync(ring as usize);
        0
    })
}

/// RX sync: releases the consumed slots and picks up new packets.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_rxsync(p: *mut RsPort, ring: u32) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if !ring_ok(p, Dir::Rx, ring) {
        return -1;
    }
    guard(-1, || {
        p.port.rxsync(ring as usize);
        0
    })
}

fn wait(p: &mut RsPort, d: Dir, ring: u32, timeout_ms: c_int) -> c_int {
    if !ring_ok(p, d, ring) {
        return -1;
    }
    guard(-1, || {
        let t = timeout_arg(timeout_ms);
        let r = match d {
            Dir::Tx => p.port.wait_tx(ring as usize, t),
            Dir::Rx => p.port.wait_rx(ring as usize, t),
        };
        match r {
            Ok(ready) => ready as c_int,
            Err(e) => fail(errno_of(&e), chain(&e), -1),
        }
    })
}

/// Waits (syncing) until TX ring `ring` has free slots: 1, or 0 after
/// `timeout_ms` (-1: no limit), or -1 and errno.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_wait_tx(p: *mut RsPort, ring: u32, timeout_ms: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    wait(p, Dir::Tx, ring, timeout_ms)
}

/// Waits (syncing) until RX ring `ring` has packets: 1, 0 on timeout, -1.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_wait_rx(p: *mut RsPort, ring: u32, timeout_ms: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    wait(p, Dir::Rx, ring, timeout_ms)
}

/// Packets given to TX ring `ring` that the port side has not taken yet.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_tx_pending(p: *mut RsPort, ring: u32) -> i64 {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if !ring_ok(p, Dir::Tx, ring) {
        return -1;
    }
    p.port.tx_pending(ring as usize) as i64
}

/// Syncs every TX ring until the port side took everything (a pipe end
/// must, before it stops sending: pipes never drop): 1, or 0 after
/// `timeout_ms` (-1: no limit), or -1.
///
/// # Safety
/// `p` is NULL or a live port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_flush(p: *mut RsPort, timeout_ms: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    guard(-1, || match p.port.flush(timeout_arg(timeout_ms)) {
        Ok(all) => all as c_int,
        Err(e) => fail(errno_of(&e), chain(&e), -1),
    })
}

/// Copies one frame into the next free slot of TX ring `ring` and advances
/// (no sync): 1, or 0 when the ring is full (sync or wait, then retry), or
/// -1 and errno (EINVAL: larger than a buffer).
///
/// # Safety
/// `p` is NULL or a live port; `frame` NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rs_send(
    p: *mut RsPort,
    ring: u32,
    frame: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if frame.is_null() {
        return fail(libc::EINVAL, "the frame is a NULL pointer", -1);
    }
    if !ring_ok(p, Dir::Tx, ring) {
        return -1;
    }
    let bs = p.port.geometry().buf_size as usize;
    if len > bs || len > u16::MAX as usize {
        return fail(
            libc::EINVAL,
            format!("a {len}-byte frame does not fit a {bs}-byte buffer"),
            -1,
        );
    }
    // SAFETY: `len` readable bytes per the contract.
    let data = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), len) };
    let r = p.port.app_ring(Dir::Tx, ring as usize);
    let Some(mut s) = r.slot_mut(0) else { return 0 };
    if !s.write_at(0, data) {
        return fail(libc::EIO, "the slot holds an invalid buffer", -1);
    }
    s.set_len(len as u16);
    r.advance(1);
    1
}

/// Copies the next received frame of RX ring `ring` into `out` (at most
/// `cap` bytes) and advances (no sync): its full length (which may exceed
/// `cap`: the copy is cut), 0 when the ring is empty, -1 and errno.
///
/// # Safety
/// `p` is NULL or a live port; `out` NULL or `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rs_recv(p: *mut RsPort, ring: u32, out: *mut c_void, cap: usize) -> i64 {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if out.is_null() {
        return fail(libc::EINVAL, "the output buffer is a NULL pointer", -1);
    }
    if !ring_ok(p, Dir::Rx, ring) {
        return -1;
    }
    let r = p.port.app_ring(Dir::Rx, ring as usize);
    let n = {
        let Some(s) = r.slot_mut(0) else { return 0 };
        let data = s.payload();
        let n = data.len().min(cap);
        // SAFETY: `cap` >= n writable bytes per the contract.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out.cast::<u8>(), n) };
        data.len()
    };
    r.advance(1);
    n as i64
}

fn same_region(a: &Port, b: &Port) -> bool {
    if std::sync::Arc::ptr_eq(a.region(), b.region()) {
        return true;
    }
    let st = |p: &Port| {
        // SAFETY: a zeroed stat is a valid out-parameter.
        let mut s: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on the region's descriptor.
        let r = unsafe { libc::fstat(p.region().fd().as_raw_fd(), &mut s) };
        (r == 0).then_some((s.st_dev, s.st_ino))
    };
    matches!((st(a), st(b)), (Some(x), Some(y)) if x == y)
}

/// 1 when the two ports share memory (the same port, or the two ends of one
/// pipe), so `rs_swap` can move packets between them; 0 when not; -1.
///
/// # Safety
/// `a` and `b` are NULL or live ports.
#[no_mangle]
pub unsafe extern "C" fn rs_port_same_memory(a: *mut RsPort, b: *mut RsPort) -> c_int {
    if a.is_null() || b.is_null() {
        return fail(libc::EINVAL, "a port is a NULL pointer", -1);
    }
    // SAFETY: live ports per the contract; shared access only.
    let (a, b) = unsafe { (&*a, &*b) };
    same_region(&a.port, &b.port) as c_int
}

/// Zero copy: exchanges the buffers of RX slot `k_rx` of `src`'s ring
/// `src_ring` and TX slot `k_tx` of `dst`'s ring `dst_ring` (the TX slot
/// gets the packet and its length; the RX slot gets the TX slot's empty
/// buffer back). Both ports must share memory (the same port, or the two
/// ends of one pipe): else -1 and EXDEV, and copy instead. Advance both
/// rings afterwards.
///
/// # Safety
/// `src` and `dst` are NULL or live ports (they may be the same).
#[no_mangle]
pub unsafe extern "C" fn rs_swap(
    src: *mut RsPort,
    src_ring: u32,
    k_rx: u32,
    dst: *mut RsPort,
    dst_ring: u32,
    k_tx: u32,
) -> c_int {
    if src.is_null() || dst.is_null() {
        return fail(libc::EINVAL, "a port is a NULL pointer", -1);
    }
    // SAFETY: live ports per the contract; only shared access is used
    // through these references while both exist, then each is used alone.
    let (s, d) = unsafe { (&mut *src, &mut *dst) };
    if !ring_ok(s, Dir::Rx, src_ring) || !ring_ok(d, Dir::Tx, dst_ring) {
        return -1;
    }
    if !same_region(&s.port, &d.port) {
        return fail(
            libc::EXDEV,
            "the two ports do not share memory: copy the packet instead",
            -1,
        );
    }
    let (s_end, d_end) = (s.port.info().end as usize, d.port.info().end as usize);
    let Some(si) = s.port.app_ring(Dir::Rx, src_ring as usize).slot_index(k_rx) else {
        return fail(
            libc::EINVAL,
            format!("RX slot {k_rx} is not the application's"),
            -1,
        );
    };
    let Some(di) = d.port.app_ring(Dir::Tx, dst_ring as usize).slot_index(k_tx) else {
        return fail(
            libc::EINVAL,
            format!("TX slot {k_tx} is not the application's"),
            -1,
        );
    };
    let sr = s.port.region().ring(s_end, Dir::Rx, src_ring);
    let dr = d.port.region().ring(d_end, Dir::Tx, dst_ring);
    let (a, b) = (sr.slot(si), dr.slot(di));
    let region = s.port.region();
    if region.buf_ofs(a.buf_idx).is_none() || region.buf_ofs(b.buf_idx).is_none() {
        return fail(libc::EIO, "a slot holds an invalid buffer index", -1);
    }
    sr.set_buf_idx(si, b.buf_idx);
    sr.set_len_flags(si, 0, NS_BUF_CHANGED);
    dr.set_buf_idx(di, a.buf_idx);
    dr.set_len_flags(di, a.len, NS_BUF_CHANGED);
    0
}

/// Client-side counters into `out`.
///
/// # Safety
/// `p` is NULL or a live port; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rs_port_stats(p: *mut RsPort, out: *mut RsStats) -> c_int {
    // SAFETY: forwarded contract.
    let Some(p) = (unsafe { port_arg(p) }) else {
        return -1;
    };
    if out.is_null() {
        return fail(libc::EINVAL, "the stats are a NULL pointer", -1);
    }
    let s = p.port.stats();
    // SAFETY: writable per the contract.
    unsafe {
        out.write(RsStats {
            kicks: s.kicks,
            sleeps: s.sleeps,
            bad_values: s.bad_values,
        })
    };
    0
}
