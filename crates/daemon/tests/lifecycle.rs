//! Lifecycle attacks (issue 15): a vhost-user frontend that never accepts
//! the daemon's connection, replies too large for one message, and pipe
//! ends reopened by a new owner while a former owner kept the memory. Each
//! goes through the real control socket of a running daemon and checks the
//! daemon keeps answering and other ports keep forwarding.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use ringswitch_client::Port;
use ringswitch_control::{Connection, PortInfo, PortStats, Request, VhostUserSpec};

/// Runs `f` on its own thread and waits for it at most [`DEADLINE`]: a
/// request that hangs fails the test instead of hanging it. Returns the
/// result and how long it took.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(v) => (v, t0.elapsed()),
        Err(_) => panic!("{what} did not return within {DEADLINE:?}: the daemon hangs"),
    }
}

/// A non-blocking connect to a stream socket; `None` when the listener's
/// backlog is full (`EAGAIN`).
fn try_connect(path: &Path) -> Option<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(path.as_os_str().as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket() with constant arguments.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    assert!(raw >= 0);
    // SAFETY: a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: connect with a valid, NUL-terminated sockaddr_un.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if r == 0 {
        return Some(fd);
    }
    let e = std::io::Error::last_os_error();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::EAGAIN),
        "connecting to the test's listener: {e}"
    );
    None
}

/// A "frontend" listening with a backlog of 0 that never accepts, its
/// backlog filled: a blocking connect to it never returns.
fn full_listener(path: &Path) -> (UnixListener, Vec<OwnedFd>) {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).unwrap();
    // SAFETY: listen on our own bound socket (again: it sets the backlog).
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let mut held = Vec::new();
    while let Some(fd) = try_connect(path) {
        held.push(fd);
        assert!(held.len() < 64, "the backlog never filled");
    }
    (l, held)
}

/// Frames from `a` reach `b` through switch `sw`.
fn forwards(s: &Path, sw: &str) {
    let mut a = Port::open_at(s, &format!("{sw}:fa")).unwrap();
    let mut b = Port::open_at(s, &format!("{sw}:fb")).unwrap();
    let frames: Vec<Vec<u8>> = (0..8).map(|i| frame(mac(2), mac(1), 60, i)).collect();
    let deadline = Instant::now() + DEADLINE;
    let mut got = Vec::new();
    // Broadcast first so the bridge learns b; then unicast to it.
    send(&mut b, &[frame([0xff; 6], mac(2), 60, 999)]);
    let _ = recv(&mut a, Duration::from_secs(5));
    assert_eq!(send(&mut a, &frames), frames.len());
    while got.len() < frames.len() && Instant::now() < deadline {
        got.extend(
            recv(&mut b, Duration::from_secs(5))
                .iter()
                .map(|f| tag_of(f)),
        );
    }
    assert_eq!(got, (0..8).collect::<Vec<u32>>(), "{sw}: a -> b");
}

#[test]
fn client_mode_vhost_user_to_a_frontend_that_never_accepts_does_not_hang_the_daemon() {
    let d = daemon("never-accepts");
    let s = d.socket().to_path_buf();
    let fe = std::env::temp_dir().join(format!("rs-test-{}-fe.sock", std::process::id()));
    let (_listener, _held) = full_listener(&fe);
    let mut c = Connection::connect(&s).unwrap();
    c.call(&Request::PortAdd {
        name: "vale0:vm".into(),
        vhost_user: Some(VhostUserSpec {
            path: fe.display().to_string(),
            client: true,
            queues: 1,
            offloads: true,
        }),
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    // Other requests answer while the port's thread tries to connect.
    let list: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
    assert!(list.iter().any(|p| p.name == "vale0:vm" && !p.open));
    // Deleting the port stops its thread wherever it is.
    let (res, took) = within("port-del of the VM port", move || {
        c.call(&Request::PortDel {
            name: "vale0:vm".into(),
        })
        .map(|_| c)
    });
    let mut c = res.unwrap();
    eprintln!("port-del returned after {took:?}");
    // Everything else still works: requests on a new connection, and
    // traffic between two other ports.
    let (res, _) = within("port-list after the delete", move || {
        let mut c2 = Connection::connect(&s).unwrap();
        c2.call_as::<Vec<PortInfo>>(&Request::PortList { switch: None })
            .map(|(v, _)| v)
    });
    assert!(res.unwrap().iter().all(|p| p.name != "vale0:vm"));
    let _: Vec<PortStats> = c.call_as(&Request::Stats { switch: None }).unwrap().0;
    forwards(d.socket(), "vale0");
    // A daemon whose VM port is still trying to connect stops all the same:
    // dropping it joins every thread.
    c.call(&Request::PortAdd {
        name: "vale0:vm2".into(),
        vhost_user: Some(VhostUserSpec {
            path: fe.display().to_string(),
            client: true,
            queues: 1,
            offloads: true,
        }),
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    drop(c);
    let (_, took) = within("stopping the daemon", move || drop(d));
    eprintln!("the daemon stopped after {took:?}");
    let _ = std::fs::remove_file(&fe);
}

/// `n` persistent ring ports over switches of 250, small so that they
/// cost little memory.
fn many_ports(c: &mut Connection, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n)
        .map(|i| format!("vale{}:port-{i:05}", i / 250))
        .collect();
    for name in &names {
        c.call(&Request::PortAdd {
            name: format!("{name}@conf:slots=64"),
            vhost_user: None,
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        })
        .unwrap();
    }
    names
}

#[test]
fn listings_of_a_thousand_ports_come_in_pages_and_whole_ones_get_a_clear_error() {
    use ringswitch_control::proto::{ErrorCode, Reply, MAX_MESSAGE};
    use ringswitch_control::SeqPacket;
    let d = daemon("pages");
    let mut c = Connection::connect(d.socket()).unwrap();
    let mut names = many_ports(&mut c, 1000);
    names.sort();
    // The client library asks in pages and puts them together.
    let stats: Vec<PortStats> = c.call_as(&Request::Stats { switch: None }).unwrap().0;
    let mut got: Vec<String> = stats.into_iter().map(|p| p.name).collect();
    got.sort();
    assert_eq!(got, names);
    let list: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
    assert_eq!(list.len(), 1000);
    // On the wire: each page is one message within MAX_MESSAGE, and the
    // last one has no `next`.
    let raw = SeqPacket::connect(d.socket()).unwrap();
    let mut buf = SeqPacket::reply_buffer();
    let mut ask = |req: &Request| -> Reply {
        raw.send(&serde_json::to_vec(req).unwrap(), &[]).unwrap();
        let m = raw.recv(&mut buf).unwrap();
        assert!(
            m.len > 0 && m.len <= MAX_MESSAGE,
            "a reply of {} bytes",
            m.len
        );
        serde_json::from_slice(&buf[..m.len]).unwrap()
    };
    let mut after = String::new();
    let mut pages = 0;
    let mut seen = 0;
    loop {
        let r = ask(&Request::Page {
            request: Box::new(Request::Stats { switch: None }),
            after: after.clone(),
        });
        assert!(r.ok, "{:?}", r.error);
        seen += r.result.unwrap().as_array().unwrap().len();
        pages += 1;
        match r.next {
            Some(n) => after = n,
            None => break,
        }
    }
    assert_eq!(seen, 1000);
    assert!(pages > 1, "1000 ports fit in one page?");
    // Asked whole, a listing too large for a message is a clear error, and
    // the connection goes on.
    let r = ask(&Request::Stats { switch: None });
    assert!(!r.ok);
    let e = r.error.unwrap();
    assert_eq!(e.code, ErrorCode::Limit);
    assert!(e.message.contains("pages"), "{}", e.message);
    let r = ask(&Request::SwitchList);
    assert!(r.ok);
    // Only listings come in pages.
    let r = ask(&Request::Page {
        request: Box::new(Request::PortDel {
            name: "vale0:port-00000".into(),
        }),
        after: String::new(),
    });
    assert_eq!(r.error.unwrap().code, ErrorCode::BadRequest);
    // Other ports keep forwarding.
    forwards(d.socket(), "vale9");
}

/// A read-only view of a whole memfd, as a client that kept it maps it.
struct Kept {
    ptr: *const u8,
    len: usize,
    _fd: OwnedFd,
}

impl Kept {
    fn map(fd: OwnedFd) -> Kept {
        // SAFETY: fstat into a local struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on an open descriptor we own.
        assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
        let len = st.st_size as usize;
        // SAFETY: a shared read-only mapping of the whole file; nothing
        // shrinks it (the region is sealed against shrinking).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Kept {
            ptr: ptr.cast(),
            len,
            _fd: fd,
        }
    }

    /// Whether `pat` appears anywhere in the memory.
    fn contains(&self, pat: &[u8]) -> bool {
        // SAFETY: the mapping is `len` readable bytes for our lifetime.
        let m = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        m.windows(pat.len()).any(|w| w == pat)
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Frames with `marker` in them, tagged 0..n.
fn marked(marker: &[u8], n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut f = frame(mac(2), mac(1), 120, i);
            f[18..18 + marker.len()].copy_from_slice(marker);
            f
        })
        .collect()
}

#[test]
fn a_former_pipe_end_owner_that_kept_the_memory_never_sees_the_next_owners_frames() {
    use ringswitch_control::proto::{ErrorCode, OpenReply};
    use ringswitch_control::CallError;
    let d = daemon("pipe-owner");
    let s = d.socket().to_path_buf();
    // The old holder of x{1: opens it, keeps the memfd, closes (by hanging
    // up, as a process that exits after passing the fd on would).
    let mut old = Connection::connect(&s).unwrap();
    let (_, mut fds): (OpenReply, _) = old
        .call_as(&Request::Open {
            name: "x{1".into(),
            pipes: 0,
            in_port_memory: false,
        })
        .unwrap();
    let kept = Kept::map(fds.remove(0));
    // The other end stays open meanwhile.
    let b = Port::open_at(&s, "x}1").unwrap();
    drop(old);
    // A new client cannot get x{1 of the memory the old one kept.
    let mut c = Connection::connect(&s).unwrap();
    let e = within("reopening the pipe end", move || {
        let r = c.call(&Request::Open {
            name: "x{1".into(),
            pipes: 0,
            in_port_memory: false,
        });
        (r.map(|_| ()), c)
    });
    let ((r, _c), _) = e;
    match r {
        Err(CallError::Daemon(e)) => {
            assert_eq!(e.code, ErrorCode::Busy, "{}", e.message);
            assert!(e.message.contains("x}1"), "{}", e.message);
        }
        other => panic!("the new owner got the old memory: {other:?}"),
    }
    // Once the other end closes too, the pipe is fresh: the new owners'
    // frames never reach the memory the old holder kept.
    drop(b);
    let marker = b"H4-FRESH-MEMORY!";
    let (res, _) = within("a fresh pipe between new owners", move || {
        let mut a2 = Port::open_at(&s, "x{1").unwrap();
        let mut b2 = Port::open_at(&s, "x}1").unwrap();
        let frames = marked(marker, 16);
        assert_eq!(send(&mut a2, &frames), 16);
        let mut got = Vec::new();
        let deadline = Instant::now() + DEADLINE;
        while got.len() < 16 && Instant::now() < deadline {
            got.extend(
                recv(&mut b2, Duration::from_secs(5))
                    .iter()
                    .map(|f| tag_of(f)),
            );
        }
        got
    });
    assert_eq!(res, (0..16).collect::<Vec<u32>>(), "the new owners talk");
    assert!(
        !kept.contains(marker),
        "the former owner's mapping saw the next owner's frames"
    );
    forwards(d.socket(), "vale0");
}

/// A switch port whose memory holds pipes this process has open (netmap's
/// lb) does not follow its daemon to a new one, which would give the port
/// other memory and leave the pipes behind: it stays with them, cut off
/// from the switch, and they go on moving frames with no daemon.
#[test]
fn a_port_with_pipes_in_its_memory_stays_with_them_when_the_daemon_goes() {
    use ringswitch_client::OpenOptions;
    let d = daemon("pipes-stay");
    let sock = socket("pipes-stay");
    let room = OpenOptions {
        pipes: 1,
        in_port_memory: false,
    };
    let mut port = Port::open_at_with(&sock, "vale0:lb", room).unwrap();
    port.set_reconnect(true).unwrap();
    let in_port = OpenOptions {
        pipes: 0,
        in_port_memory: true,
    };
    let mut a = Port::open_at_with(&sock, "vale0:lb{0", in_port).unwrap();
    let mut b = Port::open_at(&sock, "vale0:lb}0").unwrap();
    assert!(a.shares_memory_with(&port) && b.shares_memory_with(&port));
    drop(d);
    let d2 = daemon("pipes-stay");
    // The wait sees the hang-up and decides; it then waits on the port's
    // own interrupts, which nothing raises.
    port.wait_rx(0, Some(Duration::from_millis(100))).unwrap();
    assert_eq!(port.stats().reconnects, 0, "the port followed the daemon");
    let mut c = Connection::connect(&sock).unwrap();
    let (ports, _): (Vec<PortInfo>, _) = c.call_as(&Request::PortList { switch: None }).unwrap();
    assert!(ports.iter().all(|p| p.name != "vale0:lb"), "{ports:?}");
    let frames: Vec<Vec<u8>> = (0..8).map(|i| frame(mac(2), mac(1), 60, i)).collect();
    assert_eq!(send(&mut a, &frames), 8);
    let got = recv_n(&mut b, 8);
    assert_eq!(
        got.iter().map(|f| tag_of(f)).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    drop(d2);
}
