//! The C functions called as C would, against an in-process daemon: misuse
//! fails with -1/NULL, the right errno and a sentence, and never crashes;
//! proper use moves packets (in place, by copy, by buffer swap, and through
//! the ring header as netmap's macros would).

use std::ffi::{c_int, CStr, CString};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use ringswitch::*;
use ringswitch_daemon::{Config, Daemon};

fn errno() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn clear_errno() {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = 0 };
}

fn last_error() -> String {
    // SAFETY: rs_last_error returns a C string that lives until the
    // thread's next failing call.
    unsafe { CStr::from_ptr(rs_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts a failed call: -1 (or NULL), `want` in errno, and a message
/// containing `says`.
#[track_caller]
fn failed(ok: bool, want: c_int, says: &str) {
    assert!(ok, "the call did not fail ({})", last_error());
    assert_eq!(
        errno(),
        want,
        "errno {} instead of {want}: {}",
        errno(),
        last_error()
    );
    assert!(
        last_error().contains(says),
        "message {:?} lacks {says:?}",
        last_error()
    );
    clear_errno();
}

struct TestDaemon {
    _d: Daemon,
    socket: CString,
}

fn daemon(tag: &str) -> TestDaemon {
    let path: PathBuf =
        std::env::temp_dir().join(format!("rs-capi-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let d = Daemon::start(Config::new(path.clone())).expect("daemon starts");
    TestDaemon {
        _d: d,
        socket: CString::new(path.to_str().unwrap()).unwrap(),
    }
}

impl TestDaemon {
    fn open(&self, name: &str) -> *mut RsPort {
        let n = CString::new(name).unwrap();
        // SAFETY: two C strings.
        let p = unsafe { rs_port_open_at(self.socket.as_ptr(), n.as_ptr()) };
        assert!(!p.is_null(), "open {name}: {}", last_error());
        p
    }
}

fn frame(tag: u8, len: usize) -> Vec<u8> {
    let mut f = vec![tag; len];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, tag]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// Waits for and copies out one frame of RX ring 0.
fn recv_one(p: *mut RsPort) -> Vec<u8> {
    // SAFETY: an open port.
    assert_eq!(unsafe { rs_wait_rx(p, 0, 2000) }, 1, "{}", last_error());
    let mut buf = vec![0u8; 2048];
    // SAFETY: an open port and a buffer of the length given.
    let n = unsafe { rs_recv(p, 0, buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n > 0, "{n}: {}", last_error());
    // SAFETY: an open port.
    assert_eq!(unsafe { rs_rxsync(p, 0) }, 0);
    buf.truncate(n as usize);
    buf
}

#[test]
fn null_pointers_fail_with_einval() {
    let mut g = RsGeometry::default();
    let mut s = RsStats::default();
    let mut slot = std::mem::MaybeUninit::<RsSlot>::uninit();
    let mut buf = [0u8; 64];
    let np = null_mut::<RsPort>();
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        failed(rs_port_open(null()).is_null(), libc::EINVAL, "NULL");
        failed(
            rs_port_open_at(null(), null()).is_null(),
            libc::EINVAL,
            "NULL",
        );
        failed(rs_port_name(np).is_null(), libc::EINVAL, "NULL");
        failed(rs_port_geometry(np, &mut g) == -1, libc::EINVAL, "NULL");
        failed(rs_port_poll_fd(np) == -1, libc::EINVAL, "NULL");
        failed(rs_port_prepare_wait(np, 1, 1) == -1, libc::EINVAL, "NULL");
        failed(rs_port_after_wait(np) == -1, libc::EINVAL, "NULL");
        failed(rs_port_set_busy_wait(np, 1) == -1, libc::EINVAL, "NULL");
        failed(rs_port_nifp(np).is_null(), libc::EINVAL, "NULL");
        failed(rs_port_stats(np, &mut s) == -1, libc::EINVAL, "NULL");
        failed(rs_port_same_memory(np, np) == -1, libc::EINVAL, "NULL");
        failed(rs_port_flush(np, 0) == -1, libc::EINVAL, "NULL");
        failed(rs_ring_space(np, RS_TX, 0) == -1, libc::EINVAL, "NULL");
        failed(
            rs_ring_slot(np, RS_TX, 0, 0, slot.as_mut_ptr()) == -1,
            libc::EINVAL,
            "NULL",
        );
        failed(rs_slot_set_len(np, 0, 0, 60) == -1, libc::EINVAL, "NULL");
        failed(rs_ring_advance(np, RS_TX, 0, 1) == -1, libc::EINVAL, "NULL");
        failed(rs_txsync(np, 0) == -1, libc::EINVAL, "NULL");
        failed(rs_rxsync(np, 0) == -1, libc::EINVAL, "NULL");
        failed(rs_wait_tx(np, 0, 0) == -1, libc::EINVAL, "NULL");
        failed(rs_wait_rx(np, 0, 0) == -1, libc::EINVAL, "NULL");
        failed(rs_tx_pending(np, 0) == -1, libc::EINVAL, "NULL");
        failed(
            rs_send(np, 0, buf.as_ptr().cast(), 60) == -1,
            libc::EINVAL,
            "NULL",
        );
        failed(
            rs_recv(np, 0, buf.as_mut_ptr().cast(), 64) == -1,
            libc::EINVAL,
            "NULL",
        );
        failed(rs_swap(np, 0, 0, np, 0, 0) == -1, libc::EINVAL, "NULL");
        rs_port_close(np);
    }

    // NULL output arguments with a real port.
    let d = daemon("null");
    let p = d.open("vale0:n");
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        failed(rs_port_geometry(p, null_mut()) == -1, libc::EINVAL, "NULL");
        failed(rs_port_stats(p, null_mut()) == -1, libc::EINVAL, "NULL");
        failed(
            rs_ring_slot(p, RS_TX, 0, 0, null_mut()) == -1,
            libc::EINVAL,
            "NULL",
        );
        failed(rs_send(p, 0, null(), 60) == -1, libc::EINVAL, "NULL");
        failed(rs_recv(p, 0, null_mut(), 60) == -1, libc::EINVAL, "NULL");
        failed(rs_swap(p, 0, 0, np, 0, 0) == -1, libc::EINVAL, "NULL");
        failed(rs_port_same_memory(p, np) == -1, libc::EINVAL, "NULL");
        rs_port_close(p);
    }
}

#[test]
fn open_failures_say_why() {
    let nowhere = c"/nonexistent/ringswitch.sock";
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        failed(
            rs_port_open_at(nowhere.as_ptr(), c"vale0:a".as_ptr()).is_null(),
            libc::ECONNREFUSED,
            "ringswitch serve",
        );
        failed(
            rs_port_open_at(nowhere.as_ptr(), c"\xff\xfe".as_ptr()).is_null(),
            libc::EINVAL,
            "UTF-8",
        );
    }
    let d = daemon("open");
    // SAFETY: two C strings.
    let bad = |name: &CStr| unsafe { rs_port_open_at(d.socket.as_ptr(), name.as_ptr()) };
    failed(bad(c"nonsense").is_null(), libc::EINVAL, "nonsense");
    failed(bad(c"vale0:").is_null(), libc::EINVAL, "vale0:");
    failed(bad(c"").is_null(), libc::EINVAL, "");
    let p = d.open("vale0:once");
    failed(bad(c"vale0:once").is_null(), libc::EBUSY, "vale0:once");
    // SAFETY: an open port, not used again.
    unsafe { rs_port_close(p) };
    let p = d.open("vale0:once");
    assert_eq!(
        // SAFETY: an open port; its name lives as long.
        unsafe { CStr::from_ptr(rs_port_name(p)) }.to_str().unwrap(),
        "vale0:once",
        "the port opens again once closed"
    );
    // SAFETY: an open port, not used again.
    unsafe { rs_port_close(p) };
}

#[test]
fn rings_slots_and_lengths_out_of_range() {
    let d = daemon("range");
    let p = d.open("vale0:r");
    let mut g = RsGeometry::default();
    let mut slot = std::mem::MaybeUninit::<RsSlot>::uninit();
    let big = vec![0u8; 4096];
    let mut buf = [0u8; 64];
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        assert_eq!(rs_port_geometry(p, &mut g), 0);
        assert_eq!((g.tx_rings, g.rx_rings, g.buf_size), (1, 1, 2048));
        let e = "does not exist";
        failed(rs_txsync(p, 1) == -1, libc::EINVAL, e);
        failed(rs_rxsync(p, u32::MAX) == -1, libc::EINVAL, e);
        failed(rs_wait_tx(p, 1, 0) == -1, libc::EINVAL, e);
        failed(rs_wait_rx(p, 1, 0) == -1, libc::EINVAL, e);
        failed(rs_tx_pending(p, 1) == -1, libc::EINVAL, e);
        failed(rs_ring_space(p, RS_RX, 1) == -1, libc::EINVAL, e);
        failed(rs_ring_advance(p, RS_TX, 1, 0) == -1, libc::EINVAL, e);
        failed(
            rs_ring_slot(p, RS_TX, 1, 0, slot.as_mut_ptr()) == -1,
            libc::EINVAL,
            e,
        );
        failed(rs_slot_set_len(p, 1, 0, 60) == -1, libc::EINVAL, e);
        failed(
            rs_send(p, 1, buf.as_ptr().cast(), 60) == -1,
            libc::EINVAL,
            e,
        );
        failed(
            rs_recv(p, 1, buf.as_mut_ptr().cast(), 64) == -1,
            libc::EINVAL,
            e,
        );
        failed(rs_swap(p, 1, 0, p, 0, 0) == -1, libc::EINVAL, e);
        failed(rs_swap(p, 0, 0, p, 1, 0) == -1, libc::EINVAL, e);

        failed(rs_ring_space(p, 7, 0) == -1, libc::EINVAL, "RS_TX or RS_RX");
        failed(rs_ring_advance(p, -1, 0, 0) == -1, libc::EINVAL, "RS_RX");

        // Slots past what the application owns.
        assert_eq!(rs_ring_space(p, RS_RX, 0), 0);
        let tx_space = rs_ring_space(p, RS_TX, 0);
        assert_eq!(tx_space, 1023, "a 1024-slot ring keeps one slot empty");
        failed(
            rs_ring_slot(p, RS_RX, 0, 0, slot.as_mut_ptr()) == -1,
            libc::EINVAL,
            "not the application's",
        );
        failed(
            rs_ring_slot(p, RS_TX, 0, 1023, slot.as_mut_ptr()) == -1,
            libc::EINVAL,
            "1023 are available",
        );
        failed(
            rs_slot_set_len(p, 0, 1023, 60) == -1,
            libc::EINVAL,
            "not the application's",
        );
        failed(
            rs_ring_advance(p, RS_RX, 0, 1) == -1,
            libc::EINVAL,
            "0 are available",
        );
        failed(
            rs_ring_advance(p, RS_TX, 0, 1024) == -1,
            libc::EINVAL,
            "1023 are available",
        );
        failed(
            rs_swap(p, 0, 0, p, 0, 0) == -1,
            libc::EINVAL,
            "RX slot 0 is not the application's",
        );

        // Lengths.
        failed(
            rs_slot_set_len(p, 0, 0, 2049) == -1,
            libc::EINVAL,
            "2048-byte buffer",
        );
        failed(
            rs_send(p, 0, big.as_ptr().cast(), big.len()) == -1,
            libc::EINVAL,
            "2048-byte buffer",
        );
        assert_eq!(rs_recv(p, 0, buf.as_mut_ptr().cast(), 64), 0, "empty");
        assert_eq!(rs_wait_rx(p, 0, 10), 0, "nothing arrives: a timeout");

        // Nothing above changed the ring.
        assert_eq!(rs_ring_space(p, RS_TX, 0), tx_space);
        assert_eq!(rs_tx_pending(p, 0), 0);
        rs_port_close(p);
    }
}

#[test]
fn ports_in_different_memories_refuse_swaps() {
    let d = daemon("xdev");
    let a = d.open("vale0:a");
    let b = d.open("vale0:b");
    let f = frame(1, 60);
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        assert_eq!(rs_port_same_memory(a, b), 0);
        assert_eq!(rs_port_same_memory(a, a), 1);
        // b receives one frame, then cannot swap it into a's TX ring.
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(rs_wait_rx(b, 0, 2000), 1, "{}", last_error());
        failed(
            rs_swap(b, 0, 0, a, 0, 0) == -1,
            libc::EXDEV,
            "do not share memory",
        );
        assert_eq!(rs_ring_space(b, RS_RX, 0), 1, "the frame is still there");
        rs_port_close(a);
        rs_port_close(b);
    }
}

#[test]
fn a_pipe_moves_frames_in_place_by_copy_and_by_swap() {
    let d = daemon("pipe");
    let a = d.open("p{1");
    let b = d.open("p}1");
    let mut slot = std::mem::MaybeUninit::<RsSlot>::uninit();
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        assert_eq!(rs_port_same_memory(a, b), 1, "two ends of one pipe");

        // In place: fill 3 slots, advance, sync.
        for k in 0..3u32 {
            assert_eq!(rs_ring_slot(a, RS_TX, 0, k, slot.as_mut_ptr()), 0);
            let s = slot.assume_init();
            assert_eq!(s.buf_size, 2048);
            let f = frame(10 + k as u8, 60 + k as usize);
            std::ptr::copy_nonoverlapping(f.as_ptr(), s.buf.cast::<u8>(), f.len());
            assert_eq!(rs_slot_set_len(a, 0, k, f.len() as u32), 0);
        }
        assert_eq!(rs_ring_advance(a, RS_TX, 0, 3), 0);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(rs_port_flush(a, 1000), 1);
        assert_eq!(rs_tx_pending(a, 0), 0);
        for k in 0..3u8 {
            assert_eq!(recv_one(b), frame(10 + k, 60 + k as usize));
        }

        // A cut copy reports the full length.
        let f = frame(20, 100);
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(rs_wait_rx(b, 0, 2000), 1);
        let mut small = [0u8; 16];
        assert_eq!(rs_recv(b, 0, small.as_mut_ptr().cast(), small.len()), 100);
        assert_eq!(small[..], f[..16]);
        assert_eq!(rs_rxsync(b, 0), 0);

        // Reflect on b: its RX slot's buffer goes out of its TX ring, back
        // to a, without a copy.
        let f = frame(30, 200);
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(rs_wait_rx(b, 0, 2000), 1);
        assert_eq!(rs_ring_slot(b, RS_RX, 0, 0, slot.as_mut_ptr()), 0);
        let rx = slot.assume_init();
        assert_eq!(rs_wait_tx(b, 0, 0), 1);
        assert_eq!(rs_swap(b, 0, 0, b, 0, 0), 0, "{}", last_error());
        assert_eq!(rs_ring_slot(b, RS_TX, 0, 0, slot.as_mut_ptr()), 0);
        let tx = slot.assume_init();
        assert_eq!(
            (tx.buf_idx, tx.buf, tx.len),
            (rx.buf_idx, rx.buf, 200),
            "the TX slot took the received buffer"
        );
        assert_eq!(rs_ring_slot(b, RS_RX, 0, 0, slot.as_mut_ptr()), 0);
        assert_ne!(slot.assume_init().buf_idx, rx.buf_idx);
        assert_eq!(rs_ring_advance(b, RS_RX, 0, 1), 0);
        assert_eq!(rs_ring_advance(b, RS_TX, 0, 1), 0);
        assert_eq!(rs_txsync(b, 0), 0);
        assert_eq!(rs_rxsync(b, 0), 0);
        assert_eq!(recv_one(a), f, "reflected intact");

        // Between the ends: what b received goes out of a by swap.
        let f = frame(40, 300);
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(rs_wait_rx(b, 0, 2000), 1);
        assert_eq!(rs_wait_tx(a, 0, 0), 1);
        assert_eq!(rs_swap(b, 0, 0, a, 0, 0), 0, "{}", last_error());
        assert_eq!(rs_ring_advance(b, RS_RX, 0, 1), 0);
        assert_eq!(rs_ring_advance(a, RS_TX, 0, 1), 0);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(rs_rxsync(b, 0), 0);
        assert_eq!(recv_one(b), f, "came round again");

        let mut st = RsStats::default();
        assert_eq!(rs_port_stats(a, &mut st), 0);
        assert_eq!(st.bad_values, 0);
        assert!(rs_port_poll_fd(b) >= 0);
        rs_port_close(a);
        rs_port_close(b);
    }
}

/// Offsets of netmap API 14: `ring_ofs[]` in `netmap_if`, `head`/`cur`/
/// `tail` and the slots in a ring.
const RING_OFS: usize = 56;
const HEAD: usize = 20;
const CUR: usize = 24;
const TAIL: usize = 28;
const SLOTS: usize = 256;

#[test]
fn netmap_style_code_moves_head_in_the_ring_header() {
    let d = daemon("nifp");
    let a = d.open("vale0:nm");
    let b = d.open("vale0:peer");
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        let nifp = rs_port_nifp(a).cast::<u8>();
        assert!(!nifp.is_null());
        assert_eq!(CStr::from_ptr(nifp.cast()).to_str().unwrap(), "vale0:nm");
        let ring = nifp.offset(nifp.add(RING_OFS).cast::<isize>().read());
        let field = |o: usize| ring.add(o).cast::<u32>();
        assert_eq!(
            (field(HEAD).read(), field(CUR).read(), field(TAIL).read()),
            (0, 0, 1023),
            "the header shows the library's pointers"
        );
        // Fill slot 0 through the slot accessor, then hand it over by
        // moving head and cur in the header, as nm_ring_next would.
        let f = frame(7, 64);
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(field(HEAD).read(), 1, "rs_send shows its advance at once");
        let mut slot = std::mem::MaybeUninit::<RsSlot>::uninit();
        assert_eq!(rs_ring_slot(a, RS_TX, 0, 0, slot.as_mut_ptr()), 0);
        let s = slot.assume_init();
        std::ptr::copy_nonoverlapping(f.as_ptr(), s.buf.cast::<u8>(), f.len());
        let slot1 = ring.add(SLOTS + 16);
        assert_eq!(slot1.cast::<u32>().read(), s.buf_idx, "slot 1's buf_idx");
        slot1.add(4).cast::<u16>().write(f.len() as u16);
        field(HEAD).write(2);
        field(CUR).write(2);
        assert_eq!(rs_txsync(a, 0), 0, "{}", last_error());
        assert_eq!(recv_one(b), f);
        assert_eq!(recv_one(b), f);

        // Backwards is refused, and the header shows the truth again.
        field(HEAD).write(1);
        failed(rs_txsync(a, 0) == -1, libc::EINVAL, "moved backwards");
        assert_eq!(field(HEAD).read(), 2);
        assert_eq!(field(CUR).read(), 2);
        assert_eq!(rs_txsync(a, 0), 0);
        rs_port_close(a);
        rs_port_close(b);
    }
}

#[test]
fn busy_wait_and_prepare_wait() {
    let d = daemon("wait");
    let a = d.open("w{1");
    let b = d.open("w}1");
    let f = frame(9, 60);
    // SAFETY: C calls with open ports (or deliberately NULL ones), C
    // strings, and buffers as long as the lengths given; slot pointers are
    // used only while the slot is the application's.
    unsafe {
        assert_eq!(rs_port_set_busy_wait(b, 1), 0);
        assert_eq!(rs_wait_rx(b, 0, 20), 0, "busy wait times out too");
        assert_eq!(rs_port_set_busy_wait(b, 2), 0);
        assert_eq!(rs_wait_rx(b, 0, 20), 0, "a blocking wait times out");
        failed(
            rs_port_set_busy_wait(b, 3) == -1,
            libc::EINVAL,
            "wait mode 3",
        );
        assert_eq!(rs_port_set_busy_wait(b, 0), 0);
        assert_eq!(rs_port_prepare_wait(b, 0, 1), 0, "nothing yet: sleep");
        assert_eq!(rs_port_after_wait(b), 0);
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(a, 0), 0);
        let mut pfd = libc::pollfd {
            fd: rs_port_poll_fd(b),
            events: libc::POLLIN,
            revents: 0,
        };
        // Asked for before the frame: the interrupt came, or the frame is
        // already visible to prepare_wait.
        if rs_port_prepare_wait(b, 0, 1) == 0 {
            assert_eq!(libc::poll(&mut pfd, 1, 2000), 1);
            assert_eq!(rs_port_after_wait(b), 0);
        }
        assert_eq!(rs_rxsync(b, 0), 0);
        assert_eq!(rs_ring_space(b, RS_RX, 0), 1);
        rs_port_close(a);
        rs_port_close(b);
    }
}

/// A port set to reconnect survives its daemon: a program sleeping in its
/// own poll on the port's descriptor wakes when the daemon goes, and after
/// `rs_port_after_wait` the port is open on the new daemon at the same
/// addresses (netmap_if) with the same descriptor, and moves frames.
#[test]
fn a_reconnecting_port_comes_back_where_it_was() {
    let path: PathBuf =
        std::env::temp_dir().join(format!("rs-capi-{}-reconnect.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let socket = CString::new(path.to_str().unwrap()).unwrap();
    let first = Daemon::start(Config::new(path.clone())).expect("daemon starts");
    let name = CString::new("vale5:a").unwrap();
    // SAFETY: C calls with C strings and an open port; the pollfd and the
    // frame outlive the calls that use them.
    unsafe {
        let a = rs_port_open_at(socket.as_ptr(), name.as_ptr());
        assert!(!a.is_null(), "{}", last_error());
        assert_eq!(rs_port_set_reconnect(a, 1), 0, "{}", last_error());
        let nifp = rs_port_nifp(a);
        let fd = rs_port_poll_fd(a);
        assert!(!nifp.is_null() && fd >= 0);
        assert_eq!(rs_port_prepare_wait(a, 0, 1), 0, "nothing to receive yet");
        // The daemon goes; a new one takes its socket.
        drop(first);
        let second = Daemon::start(Config::new(path.clone())).expect("daemon starts again");
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(
            libc::poll(&mut pfd, 1, 60_000),
            1,
            "the daemon's going wakes the poll"
        );
        assert_eq!(rs_port_after_wait(a), 0, "reconnects: {}", last_error());
        assert_eq!(rs_port_nifp(a), nifp, "the same addresses");
        assert_eq!(rs_port_poll_fd(a), fd, "the same descriptor");
        let b = rs_port_open_at(socket.as_ptr(), c"vale5:b".as_ptr());
        assert!(!b.is_null(), "{}", last_error());
        let f = frame(7, 60);
        assert_eq!(rs_send(a, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(a, 0), 0);
        assert_eq!(recv_one(b), f);
        // And it sleeps on the same descriptor for the new daemon's frames.
        assert_eq!(rs_port_prepare_wait(a, 0, 1), 0);
        assert_eq!(rs_send(b, 0, f.as_ptr().cast(), f.len()), 1);
        assert_eq!(rs_txsync(b, 0), 0);
        pfd.revents = 0;
        assert_eq!(libc::poll(&mut pfd, 1, 60_000), 1);
        assert_eq!(rs_port_after_wait(a), 0);
        assert_eq!(recv_one(a), f);
        rs_port_close(a);
        rs_port_close(b);
        drop(second);
    }
}
