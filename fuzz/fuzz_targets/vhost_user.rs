//! The vhost-user message handling, through a real socket: a frontend
//! (this target) sends a sequence of messages over a socketpair to the
//! `vhost` crate's `BackendReqHandler` serving a `VhostUserNet`, with real
//! descriptors attached (memfds of fuzz-chosen sizes for memory tables,
//! eventfds, pipes, or nothing). Between messages the switch side drives
//! the queue pairs the way a worker does (drain TX, fill RX, notify), and
//! the frontend may shrink a memory file it sent (a hostile frontend can).
//! Whatever arrives, the backend answers or ends the connection with an
//! error; it never panics and never faults.
//!
//! `RINGSWITCH_FUZZ_FIT_MEMFDS=1` makes every memory file large enough and
//! never shrunk, so a long campaign explores past the first fault while
//! guest-memory faults (issue 15 item 1) are still being fixed.
#![no_main]

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_vhost::{NetConfig, VhostUserNet, VirtioNetHdr};
use vhost::vhost_user::BackendReqHandler;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

const VERSION_1: u32 = 0x1;
const NEED_REPLY: u32 = 0x8;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Fd {
    /// A memfd of `pages` pages (its index in the target's list).
    Memfd {
        pages: u8,
    },
    Eventfd,
    /// The write end of a pipe (a call fd that can fill up).
    PipeWrite,
    /// A socket: not an eventfd, not a file.
    Socket,
}

#[derive(Arbitrary, Debug)]
struct Region {
    gpa: u32,
    pages: u8,
    /// The frontend's virtual address of the region: `FRONTEND_VA + gpa`
    /// unless given.
    user_addr: Option<u64>,
    offset: u16,
    /// A raw size instead of `pages` pages.
    raw_size: Option<u64>,
    raw_offset: Option<u64>,
}

/// Where memory-table regions sit in the frontend's address space by
/// default, so that vring addresses can be chosen inside them.
const FRONTEND_VA: u64 = 0x7f00_0000_0000;

/// A frontend virtual address: near the start of guest memory as a
/// frontend maps it by default (likely inside a region), or anything.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Va {
    Near(u16),
    Raw(u64),
}

impl Va {
    fn get(self) -> u64 {
        match self {
            Va::Near(x) => FRONTEND_VA + u64::from(x & !1),
            Va::Raw(x) => x,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Body {
    None,
    U64(u64),
    /// vring state: index, num.
    State(u32, u32),
    /// vring address: index, flags, desc, used, avail, log (frontend virtual addresses).
    Addr(u32, u32, Va, Va, Va, u64),
    MemTable(Vec<Region>),
    Single(Region),
    Config {
        offset: u32,
        size: u32,
        flags: u32,
        data: Vec<u8>,
    },
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Msg {
    request: u8,
    need_reply: bool,
    bad_flags: Option<u32>,
    /// Declared size instead of the body's (a longer one ends the stream).
    size: Option<u16>,
    body: Body,
    fds: Vec<Fd>,
}

#[derive(Arbitrary, Debug)]
struct Handshake {
    features: u64,
    pages: u8,
    fd_pages: u8,
    queue: u8,
    size_log: u8,
    desc: Va,
    avail: Va,
    used: Va,
    need_reply: bool,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Send(Msg),
    Handshake(Handshake),
    /// What a worker does between messages.
    Drive {
        pair: u8,
        rx_len: u16,
    },
    /// The frontend shrinks the `i`-th memory file it sent.
    Shrink {
        i: u8,
        pages: u8,
    },
}

fn fit() -> bool {
    static FIT: OnceLock<bool> = OnceLock::new();
    *FIT.get_or_init(|| std::env::var_os("RINGSWITCH_FUZZ_FIT_MEMFDS").is_some_and(|v| v == "1"))
}

fn memfd(len: u64) -> Option<OwnedFd> {
    // SAFETY: a constant C string and valid flags.
    let fd = unsafe { libc::memfd_create(c"fuzz-guest".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own memfd.
    (unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } == 0).then_some(fd)
}

fn make_fd(
    f: Fd,
    keep: &mut Vec<OwnedFd>,
    memfds: &mut Vec<OwnedFd>,
    want: u64,
) -> Option<OwnedFd> {
    match f {
        Fd::Memfd { pages } => {
            let len = if fit() {
                want.max(u64::from(pages) * 4096)
            } else {
                u64::from(pages % 33) * 4096
            };
            let fd = memfd(len)?;
            memfds.push(fd.try_clone().ok()?);
            Some(fd)
        }
        Fd::Eventfd => {
            // SAFETY: eventfd with valid flags.
            let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            // SAFETY: a fresh descriptor nobody else owns.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        }
        Fd::PipeWrite => {
            let (r, w) = std::io::pipe().ok()?;
            keep.push(OwnedFd::from(r));
            Some(OwnedFd::from(w))
        }
        Fd::Socket => {
            let (a, b) = UnixStream::pair().ok()?;
            keep.push(OwnedFd::from(a));
            Some(OwnedFd::from(b))
        }
    }
}

fn region_bytes(r: &Region, out: &mut Vec<u8>) -> u64 {
    let size = r.raw_size.unwrap_or(u64::from(r.pages % 33).max(1) * 4096);
    let offset = r.raw_offset.unwrap_or(u64::from(r.offset) & !0xfff);
    let gpa = u64::from(r.gpa) & !0xfff;
    out.extend_from_slice(&gpa.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&r.user_addr.unwrap_or(FRONTEND_VA + gpa).to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    size.saturating_add(offset).min(1 << 24)
}

struct Frontend {
    front: UnixStream,
    conn: BackendReqHandler<Mutex<VhostUserNet>>,
    keep: Vec<OwnedFd>,
    memfds: Vec<OwnedFd>,
    reply: [u8; 4096],
}

impl Frontend {
    /// Sends one message and lets the backend handle it; false when the
    /// connection is over.
    fn send(&mut self, m: &Msg) -> bool {
        let mut body = Vec::new();
        let mut wants: Vec<u64> = Vec::new();
        match &m.body {
            Body::None => {}
            Body::U64(v) => body.extend_from_slice(&v.to_le_bytes()),
            Body::State(i, n) => {
                body.extend_from_slice(&i.to_le_bytes());
                body.extend_from_slice(&n.to_le_bytes());
            }
            Body::Addr(i, f, d, u, a, l) => {
                body.extend_from_slice(&i.to_le_bytes());
                body.extend_from_slice(&f.to_le_bytes());
                for v in [d.get(), u.get(), a.get(), *l] {
                    body.extend_from_slice(&v.to_le_bytes());
                }
            }
            Body::MemTable(rs) => {
                let rs = &rs[..rs.len().min(10)];
                body.extend_from_slice(&(rs.len() as u32).to_le_bytes());
                body.extend_from_slice(&0u32.to_le_bytes());
                for r in rs {
                    wants.push(region_bytes(r, &mut body));
                }
            }
            Body::Single(r) => {
                body.extend_from_slice(&0u64.to_le_bytes());
                wants.push(region_bytes(r, &mut body));
            }
            Body::Config {
                offset,
                size,
                flags,
                data,
            } => {
                body.extend_from_slice(&offset.to_le_bytes());
                body.extend_from_slice(&size.to_le_bytes());
                body.extend_from_slice(&flags.to_le_bytes());
                body.extend_from_slice(&data[..data.len().min(256)]);
            }
            Body::Raw(b) => body.extend_from_slice(&b[..b.len().min(512)]),
        }
        let declared = m.size.map_or(body.len(), usize::from);
        let flags = m
            .bad_flags
            .unwrap_or(VERSION_1 | if m.need_reply { NEED_REPLY } else { 0 });
        let mut hdr = Vec::with_capacity(12);
        hdr.extend_from_slice(&u32::from(m.request % 60).to_le_bytes());
        hdr.extend_from_slice(&flags.to_le_bytes());
        hdr.extend_from_slice(&(declared as u32).to_le_bytes());
        let fds: Vec<OwnedFd> = m
            .fds
            .iter()
            .take(9)
            .enumerate()
            .filter_map(|(k, f)| {
                make_fd(
                    *f,
                    &mut self.keep,
                    &mut self.memfds,
                    wants.get(k).copied().unwrap_or(0),
                )
            })
            .collect();
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let mut msg = hdr;
        msg.extend_from_slice(&body);
        if self.front.send_with_fds(&[&msg[..]], &raw).is_err() {
            return false;
        }
        drop(fds);
        if declared > body.len() {
            // A message that never completes: the stream ends.
            let _ = self.front.shutdown(std::net::Shutdown::Write);
        }
        let ok = self.conn.handle_request().is_ok();
        while matches!((&self.front).read(&mut self.reply), Ok(n) if n > 0) {}
        ok
    }
}

/// A frontend's usual start, so deep states are one operation away:
/// owner, features, one memory region, then vring `q` configured and
/// started (ring addresses inside the region, or not).
fn handshake(h: &Handshake) -> Vec<Msg> {
    let msg = |request: u8, body: Body, fds: Vec<Fd>| Msg {
        request,
        need_reply: h.need_reply,
        bad_flags: None,
        size: None,
        body,
        fds,
    };
    let q = u32::from(h.queue % 4);
    let mut v = vec![
        msg(3, Body::None, vec![]),
        msg(1, Body::None, vec![]),
        msg(2, Body::U64(h.features), vec![]),
        msg(
            5,
            Body::MemTable(vec![Region {
                gpa: 0,
                pages: h.pages,
                user_addr: None,
                offset: 0,
                raw_size: None,
                raw_offset: None,
            }]),
            vec![Fd::Memfd { pages: h.fd_pages }],
        ),
    ];
    for q in [q, q ^ 1] {
        v.push(msg(8, Body::State(q, 1 << (h.size_log % 9)), vec![]));
        v.push(msg(9, Body::Addr(q, 0, h.desc, h.used, h.avail, 0), vec![]));
        v.push(msg(10, Body::State(q, 0), vec![]));
        v.push(msg(13, Body::U64(u64::from(q)), vec![Fd::Eventfd]));
        v.push(msg(12, Body::U64(u64::from(q)), vec![Fd::Eventfd]));
        v.push(msg(18, Body::State(q, 1), vec![]));
    }
    v
}

fuzz_target!(|ops: Vec<Op>| {
    let dev = Arc::new(Mutex::new(
        VhostUserNet::new(NetConfig {
            queue_pairs: 2,
            ..NetConfig::default()
        })
        .expect("device"),
    ));
    let (front, back) = UnixStream::pair().expect("socketpair");
    front.set_nonblocking(true).expect("nonblocking");
    // Leftover bytes of a message shorter than declared can make a header
    // whose body never comes: the backend's read then times out (an error
    // that ends the connection) instead of hanging the target. Complete
    // messages are already in the socket, so the timeout never shortens them.
    let t = std::time::Duration::from_millis(20);
    back.set_read_timeout(Some(t)).expect("read timeout");
    back.set_write_timeout(Some(t)).expect("write timeout");
    let mut f = Frontend {
        front,
        conn: BackendReqHandler::from_stream(back, dev.clone()),
        keep: Vec::new(),
        memfds: Vec::new(),
        reply: [0u8; 4096],
    };
    let mut frame = [0u8; 2048];
    for op in ops.iter().take(64) {
        match op {
            Op::Send(m) => {
                if !f.send(m) {
                    break;
                }
            }
            Op::Handshake(h) => {
                if !handshake(h).iter().all(|m| f.send(m)) {
                    break;
                }
            }
            Op::Drive { pair, rx_len } => {
                let d = dev.lock().unwrap_or_else(|e| e.into_inner());
                let ports = d.ports();
                let mut p = ports[usize::from(*pair) % ports.len()]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                p.tx_batch(64, |f, _| {
                    f.copy_to(&mut frame);
                    true
                });
                let len = usize::from(*rx_len) % frame.len();
                let _ = p.rx_push(&VirtioNetHdr::default(), &frame[..len]);
                p.notify_rx().send();
                p.notify_tx_done().send();
                let _ = p.enable_tx_notifications();
            }
            Op::Shrink { i, pages } => {
                if fit() || f.memfds.is_empty() {
                    continue;
                }
                let fd = &f.memfds[usize::from(*i) % f.memfds.len()];
                // SAFETY: ftruncate on a memfd this target made.
                unsafe { libc::ftruncate(fd.as_raw_fd(), i64::from(*pages % 4) * 4096) };
            }
        }
    }
    drop(f);
    dev.lock().unwrap_or_else(|e| e.into_inner()).disconnected();
});
