//! libringswitch: the C ABI over the client library (`include/ringswitch.h`,
//! generated from this file by cbindgen and checked in).
//!
//! Conventions, for every function:
//! - arguments are checked (NULL pointers, directions, ring and slot
//!   numbers, lengths);
//! - failure returns -1 (or NULL) with `errno` set, and `rs_last_error()`
//!   explains it in a sentence;
//! - no panic crosses into C: a bug inside becomes EIO.
//!
//! A slot's buffer pointer stays valid while the port is open, but the slot
//! belongs to the application only until the next sync of its ring, as in
//! netmap. The ring header (`rs_port_nifp`) always shows the pointers the
//! library keeps, so code using netmap's macros can move `head`/`cur` there
//! and let the next sync or wait take them up.
#![warn(missing_docs)]

mod error;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::time::Duration;

use ringswitch_client::{ClientStats, Port, WaitMode};
use ringswitch_ring::layout::NS_BUF_CHANGED;
use ringswitch_ring::{AppRing, Dir, Geometry};

use error::{chain, errno_of, fail, guard};

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

/// One slot the application owns, to read or fill in place.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RsSlot {
    /// The slot's buffer (`buf_size` bytes), in the port's shared memory.
    pub buf: *mut c_void,
    /// Bytes of packet in it (RX), or set with `rs_slot_set_len` (TX).
    pub len: u32,
    /// The buffer's size.
    pub buf_size: u32,
    /// The buffer's index in the port's memory (netmap's `buf_idx`).
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

impl From<Geometry> for RsGeometry {
    fn from(g: Geometry) -> RsGeometry {
        RsGeometry {
            tx_rings: g.tx_rings,
            rx_rings: g.rx_rings,
            tx_slots: g.tx_slots,
            rx_slots: g.rx_slots,
            buf_size: g.buf_size,
        }
    }
}

impl From<ClientStats> for RsStats {
    fn from(s: ClientStats) -> RsStats {
        RsStats {
            kicks: s.kicks,
            sleeps: s.sleeps,
            bad_values: s.bad_values,
        }
    }
}

/// Ring direction for the ring functions: the application fills TX.
pub const RS_TX: c_int = 0;
/// Ring direction for the ring functions: the application drains RX.
pub const RS_RX: c_int = 1;

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Tx => "TX",
        Dir::Rx => "RX",
    }
}

/// # Safety
/// `p` is NULL or a C string.
unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Option<&'a str> {
    if p.is_null() {
        return fail(libc::EINVAL, format!("{what} is a NULL pointer"), None);
    }
    // SAFETY: a C string per the contract.
    match unsafe { CStr::from_ptr(p) }.to_str() {
        Ok(s) => Some(s),
        Err(_) => fail(libc::EINVAL, format!("{what} is not UTF-8"), None),
    }
}

/// # Safety
/// `p` is NULL or a port from `rs_port_open*`, not closed, and not in use
/// by another call meanwhile.
unsafe fn port_mut<'a>(p: *mut RsPort) -> Option<&'a mut RsPort> {
    if p.is_null() {
        return fail(libc::EINVAL, "the port is a NULL pointer", None);
    }
    // SAFETY: a live port with no other reference, per the contract.
    Some(unsafe { &mut *p })
}

/// # Safety
/// `p` is NULL or a port from `rs_port_open*`, not closed, and not changed
/// by another call meanwhile.
unsafe fn port_ref<'a>(p: *const RsPort) -> Option<&'a RsPort> {
    if p.is_null() {
        return fail(libc::EINVAL, "the port is a NULL pointer", None);
    }
    // SAFETY: a live port, only read, per the contract.
    Some(unsafe { &*p })
}

/// Writes what `value` makes of port `p` to the caller's `out`
/// (`null_out`: the sentence when `out` is NULL): 0, or -1 and errno.
///
/// # Safety
/// `p` as for [`port_ref`]; `out` is NULL or writable.
unsafe fn write_out<T>(
    p: *const RsPort,
    out: *mut T,
    null_out: &str,
    value: impl FnOnce(&RsPort) -> T,
) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_ref(p) }) else {
            return -1;
        };
        if out.is_null() {
            return fail(libc::EINVAL, null_out, -1);
        }
        let v = value(p);
        // SAFETY: writable per the contract.
        unsafe { out.write(v) };
        0
    })
}

/// Checks that `ring` exists in direction `d`.
fn ring_ok(p: &RsPort, d: Dir, ring: u32) -> bool {
    let g = p.port.geometry();
    let n = match d {
        Dir::Tx => g.tx_rings,
        Dir::Rx => g.rx_rings,
    };
    if ring >= n {
        return fail(
            libc::EINVAL,
            format!(
                "{} ring {ring} does not exist: the port has {n}",
                dir_name(d)
            ),
            false,
        );
    }
    true
}

/// The application ring `ring` of direction `d`, if it exists.
fn ring_mut(p: &mut RsPort, d: Dir, ring: u32) -> Option<&mut AppRing> {
    ring_ok(p, d, ring).then(|| p.port.app_ring(d, ring as usize))
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

/// Takes up `head`/`cur` that the program moved in the ring header with
/// netmap's macros (the header otherwise mirrors the library's pointers, so
/// this changes nothing). Values that move backwards or past `tail` are
/// refused: the header is reset to the library's pointers, and EINVAL.
fn adopt_header(p: &mut RsPort, d: Dir, ring: usize) -> bool {
    let r = p.port.app_ring(d, ring);
    if r.adopt_header_pointers() {
        return true;
    }
    r.mirror_to_header();
    fail(
        libc::EINVAL,
        format!(
            "{} ring {ring}: head/cur in the ring header moved backwards or past tail; reset to head {}",
            dir_name(d),
            r.head()
        ),
        false,
    )
}

/// The last error of this thread, as a sentence: never NULL, empty if
/// none. Valid until the thread's next failing call.
#[no_mangle]
pub extern "C" fn rs_last_error() -> *const c_char {
    guard(error::empty(), error::last_error)
}

/// Opens `name` (`vale0:a`, `pipe{1`, ...) on the daemon at the default
/// socket ($RINGSWITCH_SOCKET, else the system one). NULL and errno on
/// failure: ECONNREFUSED (no daemon), EINVAL (bad name), ENOENT (no such
/// switch or port), EBUSY (open elsewhere), ...
///
/// # Safety
/// `name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn rs_port_open(name: *const c_char) -> *mut RsPort {
    // SAFETY: the caller's contract is this function's.
    unsafe { rs_port_open_at(std::ptr::null(), name) }
}

/// Opens `name` on the daemon listening at `socket` (NULL: the default, as
/// `rs_port_open`). The handle is for one thread at a time.
///
/// # Safety
/// `socket` and `name` are NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn rs_port_open_at(
    socket: *const c_char,
    name: *const c_char,
) -> *mut RsPort {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { str_arg(name, "the port name") }) else {
            return std::ptr::null_mut();
        };
        let socket = if socket.is_null() {
            ringswitch_client::default_socket_path()
        } else {
            // SAFETY: the caller's contract.
            match unsafe { str_arg(socket, "the socket path") } {
                Some(s) => PathBuf::from(s),
                None => return std::ptr::null_mut(),
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
/// every pointer from it (name, slot buffers, nifp) are invalid afterwards.
/// Packets synced but not yet taken by the port side are lost: call
/// `rs_port_flush` first.
///
/// # Safety
/// `p` is NULL or from `rs_port_open*`, and not used again.
#[no_mangle]
pub unsafe extern "C" fn rs_port_close(p: *mut RsPort) {
    if !p.is_null() {
        guard((), || {
            // SAFETY: allocated by rs_port_open_at and, per the contract,
            // never used again.
            drop(unsafe { Box::from_raw(p) })
        });
    }
}

/// The port's canonical name (valid while the port is open), or NULL.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_name(p: *const RsPort) -> *const c_char {
    guard(std::ptr::null(), || {
        // SAFETY: the caller's contract.
        match unsafe { port_ref(p) } {
            Some(p) => p.name.as_ptr(),
            None => std::ptr::null(),
        }
    })
}

/// Fills `out` with the port's geometry: 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rs_port_geometry(p: *const RsPort, out: *mut RsGeometry) -> c_int {
    // SAFETY: the caller's contract is write_out's.
    unsafe {
        write_out(p, out, "the geometry is a NULL pointer", |p| {
            p.port.geometry().into()
        })
    }
}

/// The descriptor that becomes readable when the port has something for
/// the application, for your own poll/epoll loop (the port owns it: do not
/// close it). Call `rs_port_prepare_wait` before sleeping on it. -1 and
/// errno on error.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_poll_fd(p: *const RsPort) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        match unsafe { port_ref(p) } {
            Some(p) => p.port.poll_fd().as_fd().as_raw_fd(),
            None => -1,
        }
    })
}

/// Before sleeping on `rs_port_poll_fd`: syncs, asks for an interrupt on
/// every TX ring (`want_tx`, for free slots) and RX ring (`want_rx`, for
/// packets), and returns 1 when something is already there (do not sleep
/// then), 0 when the program may sleep, -1 and errno. A TX ring with any
/// free slot counts as something there: set `want_tx` only while waiting
/// for room in a full ring. After waking, call `rs_port_after_wait`.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_prepare_wait(
    p: *mut RsPort,
    want_tx: c_int,
    want_rx: c_int,
) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        let g = p.port.geometry();
        let tx = if want_tx != 0 { g.tx_rings } else { 0 };
        let rx = if want_rx != 0 { g.rx_rings } else { 0 };
        let adopted = (0..tx).all(|i| adopt_header(p, Dir::Tx, i as usize))
            && (0..rx).all(|i| adopt_header(p, Dir::Rx, i as usize));
        if !adopted {
            return -1;
        }
        p.port.prepare_wait(want_tx != 0, want_rx != 0) as c_int
    })
}

/// After waking from a sleep on `rs_port_poll_fd` (or deciding not to):
/// withdraws the interrupt requests of `rs_port_prepare_wait`. 0, or -1.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_after_wait(p: *mut RsPort) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        match p.port.after_wait() {
            Ok(()) => 0,
            Err(e) => fail(e.errno(), e.to_string(), -1),
        }
    })
}

/// `on` 1: when the daemon serving the port goes away (an upgrade, a
/// restart), the port opens itself again on the new daemon by its name
/// (trying for 30 s) and goes on with empty rings; 0 (the default): its
/// waits go on without a daemon. The port comes back where it was: the
/// `struct netmap_if` of `rs_port_nifp`, its rings and buffers at the same
/// addresses, and `rs_port_poll_fd` the same descriptor, which also wakes
/// a `poll` when the daemon goes, so that `rs_port_after_wait` reconnects.
/// Pointers to slots must not be kept across a wait. A wait that could
/// not reconnect (no daemon in time, or the port came back with another
/// geometry) fails with ECONNRESET. Only for switch ports opened by name;
/// call it before `rs_port_poll_fd`. 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_set_reconnect(p: *mut RsPort, on: c_int) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        match p.port.set_reconnect(on != 0) {
            Ok(()) => 0,
            Err(e) => fail(e.errno(), e.to_string(), -1),
        }
    })
}

/// How `rs_wait_*` wait: `on` 1 spins on the shared memory instead of
/// sleeping (lower latency, a whole core); 0, the default, spins for a
/// window that adapts to what spinning pays (none for an idle port, never
/// while another thread needs the CPU), then sleeps; 2 sleeps at once,
/// never spinning. 0, or -1 (a bad port or value).
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_set_busy_wait(p: *mut RsPort, on: c_int) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        p.port.set_wait_mode(match on {
            0 => WaitMode::Adaptive,
            1 => WaitMode::Busy,
            2 => WaitMode::Blocking,
            _ => {
                return fail(
                    libc::EINVAL,
                    format!("wait mode {on} is none of 0 (adaptive), 1 (busy) and 2 (blocking)"),
                    -1,
                )
            }
        });
        0
    })
}

/// The port's `struct netmap_if`, for code that walks the rings with
/// netmap's macros (`NETMAP_TXRING(nifp, i)`, `NETMAP_BUF(ring, idx)`,
/// `nm_ring_space`, ...; netmap API 14 layout). The ring headers show the
/// library's head, cur and tail after every call; `head`/`cur` moved there
/// are taken up by the next `rs_txsync`/`rs_rxsync`, wait, flush or
/// `rs_port_prepare_wait` of that ring. NULL and errno on error.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_nifp(p: *const RsPort) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_ref(p) }) else {
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
        // SAFETY: `ofs` is inside the mapping (checked above), which lives
        // as long as the port.
        unsafe { p.port.region().base().add(ofs).cast() }
    })
}

/// Client-side counters into `out`: 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rs_port_stats(p: *const RsPort, out: *mut RsStats) -> c_int {
    // SAFETY: the caller's contract is write_out's.
    unsafe {
        write_out(p, out, "the stats are a NULL pointer", |p| {
            p.port.stats().into()
        })
    }
}

/// 1 when the two ports share memory (the same port, or the two ends of one
/// pipe), so `rs_swap` can move packets between them; 0 when not; -1.
///
/// # Safety
/// `a` and `b` are NULL or open ports (they may be the same).
#[no_mangle]
pub unsafe extern "C" fn rs_port_same_memory(a: *const RsPort, b: *const RsPort) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract; both are only read, so they may
        // be the same port.
        let (Some(a), Some(b)) = (unsafe { port_ref(a) }, unsafe { port_ref(b) }) else {
            return -1;
        };
        a.port.shares_memory_with(&b.port) as c_int
    })
}

/// Syncs every TX ring until the port side took everything: a pipe end
/// must, before it stops sending, since pipes never drop. 1, or 0 after
/// `timeout_ms` (negative: no limit) with packets still queued, or -1.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_port_flush(p: *mut RsPort, timeout_ms: c_int) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        for i in 0..p.port.geometry().tx_rings {
            if !adopt_header(p, Dir::Tx, i as usize) {
                return -1;
            }
        }
        match p.port.flush(timeout_arg(timeout_ms)) {
            Ok(all) => all as c_int,
            Err(e) => fail(errno_of(&e), chain(&e), -1),
        }
    })
}

/// Slots the application may use on a ring past the ones it advanced over:
/// free slots (RS_TX) or received packets (RS_RX). -1 and errno on error.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_ring_space(p: *mut RsPort, dir: c_int, ring: u32) -> i64 {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        let Some(d) = dir_arg(dir) else { return -1 };
        match ring_mut(p, d, ring) {
            Some(r) => r.space() as i64,
            None => -1,
        }
    })
}

/// The `k`-th slot the application owns on a ring (0 is the next one, up
/// to `rs_ring_space` - 1): its buffer, length and index, to read or fill
/// in place until the ring's next sync. 0, or -1 and errno (EINVAL when
/// `k` is past the space).
///
/// # Safety
/// `p` is NULL or an open port; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rs_ring_slot(
    p: *mut RsPort,
    dir: c_int,
    ring: u32,
    k: u32,
    out: *mut RsSlot,
) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        let Some(d) = dir_arg(dir) else { return -1 };
        if out.is_null() {
            return fail(libc::EINVAL, "the slot is a NULL pointer", -1);
        }
        let Some(r) = ring_mut(p, d, ring) else {
            return -1;
        };
        let space = r.space();
        let Some(mut s) = r.slot_mut(k) else {
            return fail(
                libc::EINVAL,
                format!(
                    "{} slot {k} is not the application's: {space} are available",
                    dir_name(d)
                ),
                -1,
            );
        };
        let len = s.len() as u32;
        let idx = s.buf_idx();
        let buf = s.buf_mut();
        if buf.is_empty() {
            return fail(
                libc::EIO,
                format!("slot {k} holds an invalid buffer index {idx}"),
                -1,
            );
        }
        let slot = RsSlot {
            buf: buf.as_mut_ptr().cast(),
            len: len.min(buf.len() as u32),
            buf_size: buf.len() as u32,
            buf_idx: idx,
        };
        // SAFETY: writable per the contract.
        unsafe { out.write(slot) };
        0
    })
}

/// Sets the packet length of the `k`-th TX slot the application owns (at
/// most the buffer size). 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_slot_set_len(p: *mut RsPort, ring: u32, k: u32, len: u32) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        let buf_size = p.port.geometry().buf_size;
        let Some(r) = ring_mut(p, Dir::Tx, ring) else {
            return -1;
        };
        if len > buf_size || len > u16::MAX as u32 {
            return fail(
                libc::EINVAL,
                format!("{len} bytes do not fit a {buf_size}-byte buffer"),
                -1,
            );
        }
        match r.slot_mut(k) {
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
    })
}

/// Moves past `n` slots of a ring (filled on TX, consumed on RX): they go
/// to the port side at the next sync. At most `rs_ring_space`. 0, or -1.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_ring_advance(p: *mut RsPort, dir: c_int, ring: u32, n: u32) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        let Some(d) = dir_arg(dir) else { return -1 };
        let Some(r) = ring_mut(p, d, ring) else {
            return -1;
        };
        if n > r.space() {
            return fail(
                libc::EINVAL,
                format!("cannot advance {n} slots: {} are available", r.space()),
                -1,
            );
        }
        r.advance(n);
        r.mirror_to_header();
        0
    })
}

/// TX sync: hands the advanced slots to the port side and refreshes the
/// free space. Never sleeps. 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_txsync(p: *mut RsPort, ring: u32) -> c_int {
    // SAFETY: the caller's contract is sync's.
    unsafe { sync(p, Dir::Tx, ring) }
}

/// RX sync: releases the consumed slots and picks up new packets. Never
/// sleeps. 0, or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_rxsync(p: *mut RsPort, ring: u32) -> c_int {
    // SAFETY: the caller's contract is sync's.
    unsafe { sync(p, Dir::Rx, ring) }
}

/// Takes up the ring header's head and cur, then syncs ring `ring` of `d`.
///
/// # Safety
/// `p` is NULL or an open port.
unsafe fn sync(p: *mut RsPort, d: Dir, ring: u32) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        if !ring_ok(p, d, ring) || !adopt_header(p, d, ring as usize) {
            return -1;
        }
        match d {
            Dir::Tx => p.port.txsync(ring as usize),
            Dir::Rx => p.port.rxsync(ring as usize),
        }
        0
    })
}

/// # Safety
/// `p` is NULL or an open port.
unsafe fn wait(p: *mut RsPort, d: Dir, ring: u32, timeout_ms: c_int) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        if !ring_ok(p, d, ring) || !adopt_header(p, d, ring as usize) {
            return -1;
        }
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

/// Syncs TX ring `ring` and, while it has no free slot, sleeps (or spins,
/// see `rs_port_set_busy_wait`) and syncs again: 1 when there is space, 0
/// after `timeout_ms` (negative: no limit), -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_wait_tx(p: *mut RsPort, ring: u32, timeout_ms: c_int) -> c_int {
    // SAFETY: the caller's contract is wait's.
    unsafe { wait(p, Dir::Tx, ring, timeout_ms) }
}

/// Syncs RX ring `ring` and, while it has no packet, sleeps (or spins) and
/// syncs again: 1 when packets are there, 0 after `timeout_ms` (negative:
/// no limit), -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_wait_rx(p: *mut RsPort, ring: u32, timeout_ms: c_int) -> c_int {
    // SAFETY: the caller's contract is wait's.
    unsafe { wait(p, Dir::Rx, ring, timeout_ms) }
}

/// Packets synced to TX ring `ring` that the port side has not taken yet
/// (a full pipe peer keeps them waiting), or -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port.
#[no_mangle]
pub unsafe extern "C" fn rs_tx_pending(p: *const RsPort, ring: u32) -> i64 {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_ref(p) }) else {
            return -1;
        };
        if !ring_ok(p, Dir::Tx, ring) {
            return -1;
        }
        p.port.tx_pending(ring as usize) as i64
    })
}

/// Copies one frame into the next free slot of TX ring `ring` and advances
/// over it (no sync): 1, or 0 when the ring is full (sync or wait, then
/// retry), or -1 and errno (EINVAL: larger than a buffer).
///
/// # Safety
/// `p` is NULL or an open port; `frame` is NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rs_send(
    p: *mut RsPort,
    ring: u32,
    frame: *const c_void,
    len: usize,
) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        if frame.is_null() {
            return fail(libc::EINVAL, "the frame is a NULL pointer", -1);
        }
        let bs = p.port.geometry().buf_size as usize;
        let Some(r) = ring_mut(p, Dir::Tx, ring) else {
            return -1;
        };
        if len > bs || len > u16::MAX as usize {
            return fail(
                libc::EINVAL,
                format!("a {len}-byte frame does not fit a {bs}-byte buffer"),
                -1,
            );
        }
        // SAFETY: `len` readable bytes per the contract.
        let data = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), len) };
        let Some(mut s) = r.slot_mut(0) else { return 0 };
        if !s.write_at(0, data) {
            return fail(libc::EIO, "the slot holds an invalid buffer index", -1);
        }
        s.set_len(len as u16);
        r.advance(1);
        r.mirror_to_header();
        1
    })
}

/// Copies the next received frame of RX ring `ring` into `out` (at most
/// `cap` bytes) and advances over it (no sync): the frame's full length
/// (more than `cap` when the copy was cut), 0 when the ring is empty (sync
/// or wait, then retry), -1 and errno.
///
/// # Safety
/// `p` is NULL or an open port; `out` is NULL or `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rs_recv(p: *mut RsPort, ring: u32, out: *mut c_void, cap: usize) -> i64 {
    guard(-1, || {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { port_mut(p) }) else {
            return -1;
        };
        if out.is_null() {
            return fail(libc::EINVAL, "the output buffer is a NULL pointer", -1);
        }
        let Some(r) = ring_mut(p, Dir::Rx, ring) else {
            return -1;
        };
        let n = {
            let Some(s) = r.slot_mut(0) else { return 0 };
            let data = s.payload();
            let n = data.len().min(cap);
            // SAFETY: `cap` >= n writable bytes per the contract; the
            // payload is in the shared mapping, never in `out`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out.cast::<u8>(), n) };
            data.len()
        };
        r.advance(1);
        r.mirror_to_header();
        n as i64
    })
}

/// Zero copy: exchanges the buffers of RX slot `k_rx` of `src`'s ring
/// `src_ring` and TX slot `k_tx` of `dst`'s ring `dst_ring`, as netmap's
/// bridge does. The TX slot gets the packet and its length, the RX slot
/// the TX slot's buffer; both are marked NS_BUF_CHANGED. `src` and `dst`
/// may be the same port (reflect), or must share memory (the two ends of
/// one pipe): else -1 and EXDEV (copy the packet instead; see
/// `rs_port_same_memory`). Advance both rings afterwards. 0, or -1.
///
/// # Safety
/// `src` and `dst` are NULL or open ports (they may be the same).
#[no_mangle]
pub unsafe extern "C" fn rs_swap(
    src: *mut RsPort,
    src_ring: u32,
    k_rx: u32,
    dst: *mut RsPort,
    dst_ring: u32,
    k_tx: u32,
) -> c_int {
    guard(-1, || {
        // `src` and `dst` may be the same port: only shared references
        // exist at once, and each `&mut` (for the ring's slot index) lives
        // alone in its own statement.
        // SAFETY: the caller's contract; read only.
        let (Some(s), Some(d)) = (unsafe { port_ref(src) }, unsafe { port_ref(dst) }) else {
            return -1;
        };
        if !ring_ok(s, Dir::Rx, src_ring) || !ring_ok(d, Dir::Tx, dst_ring) {
            return -1;
        }
        if !s.port.shares_memory_with(&d.port) {
            return fail(
                libc::EXDEV,
                "the two ports do not share memory: copy the packet instead",
                -1,
            );
        }
        // SAFETY: the caller's contract; no other reference to `src` is
        // used while this one lives (the statement's end).
        let si = unsafe { &mut *src }
            .port
            .app_ring(Dir::Rx, src_ring as usize)
            .slot_index(k_rx);
        // SAFETY: as above, for `dst`.
        let di = unsafe { &mut *dst }
            .port
            .app_ring(Dir::Tx, dst_ring as usize)
            .slot_index(k_tx);
        let Some(si) = si else {
            return fail(
                libc::EINVAL,
                format!("RX slot {k_rx} is not the application's"),
                -1,
            );
        };
        let Some(di) = di else {
            return fail(
                libc::EINVAL,
                format!("TX slot {k_tx} is not the application's"),
                -1,
            );
        };
        // SAFETY: as the first references: read only, may alias.
        let (s, d) = unsafe { (&*src, &*dst) };
        let (s_end, d_end) = (s.port.info().end as usize, d.port.info().end as usize);
        let sr = s.port.region().ring(s_end, Dir::Rx, src_ring);
        let dr = d.port.region().ring(d_end, Dir::Tx, dst_ring);
        let (a, b) = (sr.slot(si), dr.slot(di));
        // One memfd, one layout: the source region judges both indexes.
        let region = s.port.region();
        if region.buf_ofs(a.buf_idx).is_none() || region.buf_ofs(b.buf_idx).is_none() {
            return fail(libc::EIO, "a slot holds an invalid buffer index", -1);
        }
        sr.set_buf_idx(si, b.buf_idx);
        sr.set_len_flags(si, 0, NS_BUF_CHANGED);
        dr.set_buf_idx(di, a.buf_idx);
        dr.set_len_flags(di, a.len, NS_BUF_CHANGED);
        0
    })
}
