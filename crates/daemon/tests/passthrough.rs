//! Passthrough ports: the daemon as QEMU's ivshmem server. A fake QEMU
//! speaks the ivshmem protocol to the daemon and then plays the guest on the
//! memory it got, exactly as a guest application would through BAR2: it
//! drives the CSB itself and rings the doorbell eventfds.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ringswitch_client::Port;
use ringswitch_control::{CallError, Connection, ErrorCode, PortInfo, Request};
use ringswitch_ring::{AppRing, Dir, EventFd, Region};

/// What QEMU learns from the server.
struct Handshake {
    /// Held open: the daemon treats its closing as QEMU going away.
    _conn: UnixStream,
    own_id: i64,
    region: Arc<Region>,
    /// Per peer id, its eventfds in vector order.
    peers: BTreeMap<i64, Vec<EventFd>>,
}

fn recv_msg(s: &UnixStream) -> Option<(i64, Option<OwnedFd>)> {
    let mut buf = [0u8; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: 8,
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: zeroed msghdr is valid; buffers outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: recvmsg into our buffers.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
    if n != 8 {
        return None;
    }
    let mut fd = None;
    // SAFETY: walking the control messages the kernel wrote.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_type == libc::SCM_RIGHTS {
            let raw: RawFd = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const RawFd);
            fd = Some(OwnedFd::from_raw_fd(raw));
        }
    }
    Some((i64::from_le_bytes(buf), fd))
}

/// Connects like QEMU's ivshmem-doorbell and reads the whole handshake.
fn attach(path: &Path) -> Handshake {
    try_attach(path).expect("the server hands QEMU the port")
}

/// Like [`attach`], but `None` when the server refuses this QEMU (closes
/// the connection without a word).
fn try_attach(path: &Path) -> Option<Handshake> {
    let conn = UnixStream::connect(path).expect("the passthrough socket accepts");
    // A refusal is an immediate end of file; a loaded machine may take long
    // to send the first message.
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let (version, _) = recv_msg(&conn)?;
    assert_eq!(version, 0, "ivshmem protocol version");
    let (own_id, _) = recv_msg(&conn).expect("own id");
    let (minus_one, shm) = recv_msg(&conn).expect("shared memory");
    assert_eq!(minus_one, -1);
    let region =
        Arc::new(Region::open(shm.expect("the memory descriptor")).expect("a valid region"));
    // Then one vector per ring pair for the guest and as many for the peer
    // its doorbell rings (the daemon, or the pipe's other end): read that
    // many, rather than until a pause that a loaded machine can make.
    let g = region.layout().geometry;
    let vectors = 2 * g.tx_rings.max(g.rx_rings);
    let mut peers: BTreeMap<i64, Vec<EventFd>> = BTreeMap::new();
    for _ in 0..vectors {
        let (id, fd) = recv_msg(&conn).expect("a peer's vector");
        peers
            .entry(id)
            .or_default()
            .push(EventFd::from_fd(fd.expect("an eventfd per vector")));
    }
    Some(Handshake {
        _conn: conn,
        own_id,
        region,
        peers,
    })
}

fn add_pt(c: &mut Connection, name: &str, path: &Path) -> Result<(), CallError> {
    c.call(&Request::PortAdd {
        name: name.into(),
        vhost_user: None,
        passthrough: Some(path.display().to_string()),
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .map(|_| ())
}

fn pt_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rs-pt-{}-{tag}.sock", std::process::id()))
}

/// The guest's TX: frames into its ring, kick the peer's vector 0 when the
/// port side asks for it.
fn guest_send(tx: &mut AppRing, kick: &EventFd, frames: &[Vec<u8>]) -> usize {
    let mut sent = 0;
    let deadline = Instant::now() + DEADLINE;
    while sent < frames.len() && Instant::now() < deadline {
        tx.refresh_tail();
        let n = tx.space().min((frames.len() - sent) as u32);
        if n == 0 {
            tx.set_need_kick(true);
            tx.refresh_tail();
            if tx.space() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            tx.set_need_kick(false);
            continue;
        }
        for k in 0..n {
            let mut s = tx.slot_mut(k).unwrap();
            assert!(s.write_at(0, &frames[sent + k as usize]));
            s.set_len(frames[sent + k as usize].len() as u16);
        }
        tx.advance(n);
        if tx.publish() && tx.port_wants_kick() {
            kick.signal();
        }
        sent += n as usize;
    }
    sent
}

/// On a pipe, what the guest's rxsync does after releasing slots: wake the
/// other end if it waits for room (its doorbell vector), as the client
/// library's pipe end does.
struct PipePeer {
    region: Arc<Region>,
    other_end: usize,
    doorbell: EventFd,
}

/// The guest's RX: sleeps on its own vector 0 with the double check,
/// until `want` frames arrived or a minute passed. `got` follows the count
/// (for a sender pacing itself to the guest's ring).
fn guest_recv(
    rx: &mut AppRing,
    irq: &EventFd,
    want: usize,
    got: &AtomicUsize,
    pipe: Option<&PipePeer>,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + DEADLINE;
    let mut out = Vec::new();
    while out.len() < want {
        rx.refresh_tail();
        if rx.space() == 0 {
            rx.set_need_kick(true);
            rx.refresh_tail();
            let left = deadline.saturating_duration_since(Instant::now());
            if rx.space() == 0 && !irq.wait(Some(left)).unwrap() {
                rx.set_need_kick(false);
                break;
            }
            irq.drain();
            rx.set_need_kick(false);
            continue;
        }
        let n = rx.space();
        for k in 0..n {
            out.push(rx.slot_mut(k).unwrap().payload().to_vec());
        }
        rx.advance(n);
        got.store(out.len(), Ordering::Relaxed);
        if rx.publish() {
            if let Some(p) = pipe {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                let want_kick = p
                    .region
                    .csb(p.other_end, Dir::Tx, 0)
                    .appl_need_kick()
                    .load(std::sync::atomic::Ordering::Relaxed);
                if want_kick != 0 {
                    p.doorbell.signal();
                }
            }
        }
    }
    out
}

#[test]
fn a_guest_on_a_switch_port_sends_and_receives_through_the_switch() {
    let d = daemon("pt-switch");
    let mut c = Connection::connect(d.socket()).unwrap();
    let path = pt_path("switch");
    add_pt(&mut c, "vale0:g1@conf:rings=2", &path).unwrap();

    // The port is the guest's: a client cannot open it.
    let e = Port::open_at(d.socket(), "vale0:g1")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("passed through to a VM"), "{e}");

    let hs = attach(&path);
    assert_eq!(hs.own_id, 1, "a switch port's guest is peer 1");
    assert_eq!(hs.peers[&1].len(), 2, "one guest vector per ring pair");
    assert_eq!(
        hs.peers[&0].len(),
        2,
        "one doorbell vector per ring pair, to the daemon"
    );
    let l = hs.region.layout();
    assert_eq!((l.ends, l.geometry.tx_rings), (1, 2));
    assert!(hs.region.fd().as_raw_fd() >= 0);

    // Listed as open once QEMU is attached (the server marks it so right
    // after the handshake).
    let mut list: Vec<PortInfo> = Vec::new();
    wait_until("the port to be listed as open", || {
        list = c
            .call_as(&Request::PortList {
                switch: Some("vale0".into()),
            })
            .unwrap()
            .0;
        list.iter().any(|p| {
            p.name == "vale0:g1" && p.open && p.passthrough.as_ref().is_some_and(|t| t.connected)
        })
    });
    let me = list.iter().find(|p| p.name == "vale0:g1").unwrap();
    assert_eq!(
        me.passthrough.as_ref().unwrap().path,
        path.display().to_string()
    );
    assert!(me.passthrough.as_ref().unwrap().connected);

    // guest -> switch -> host client
    let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
    let mut tx = AppRing::new(hs.region.clone(), 0, Dir::Tx, 0);
    let frames: Vec<Vec<u8>> = (0..3000).map(|i| frame([0xff; 6], mac(1), 60, i)).collect();
    // In batches the host's RX ring holds: a full receiver drops, as any
    // switch port does.
    let mut got = Vec::new();
    for chunk in frames.chunks(500) {
        assert_eq!(guest_send(&mut tx, &hs.peers[&0][0], chunk), chunk.len());
        got.extend(recv_n(&mut host, chunk.len()));
    }
    assert_eq!(got.len(), 3000, "every guest frame reaches the host port");
    assert_eq!(&got[2999][14..18], &2999u32.to_be_bytes());

    // host client -> switch (learned: unicast to the guest's MAC) -> guest,
    // which sleeps on its interrupt and is woken by it.
    let mut rx = AppRing::new(hs.region.clone(), 0, Dir::Rx, 0);
    let irq = hs.peers[&1][0].try_clone().unwrap();
    let taken = Arc::new(AtomicUsize::new(0));
    let taken_rx = taken.clone();
    let receiver =
        std::thread::spawn(move || guest_recv(&mut rx, &irq, 2000, &taken_rx, None).len());
    let back: Vec<Vec<u8>> = (0..2000).map(|i| frame(mac(1), mac(2), 60, i)).collect();
    // In batches the guest's ring holds, each once the guest has taken the
    // one before (it sleeps in between).
    for (k, chunk) in back.chunks(400).enumerate() {
        assert_eq!(send(&mut host, chunk), chunk.len());
        wait_until("the guest to take the batch", || {
            taken.load(Ordering::Relaxed) >= (k + 1) * 400
        });
    }
    assert_eq!(
        receiver.join().unwrap(),
        2000,
        "the guest's interrupt woke it for every batch"
    );

    // QEMU goes and a new one attaches (a guest restart): a fresh region
    // (see a_qemu_that_kept_the_memory_never_sees_the_next_guests_frames).
    drop(hs);
    std::thread::sleep(Duration::from_millis(100));
    let hs2 = attach(&path);
    assert_eq!(hs2.own_id, 1);
    let mut tx2 = AppRing::new(hs2.region.clone(), 0, Dir::Tx, 0);
    assert_eq!(guest_send(&mut tx2, &hs2.peers[&0][0], &frames[..100]), 100);
    assert_eq!(recv_n(&mut host, 100).len(), 100);

    // A second QEMU while one is attached is turned away.
    let mut other = UnixStream::connect(&path).unwrap();
    other
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut b = [0u8; 8];
    assert_eq!(
        other.read(&mut b).unwrap_or(0),
        0,
        "the second QEMU gets nothing"
    );

    // Deleting the port removes its socket.
    drop(hs2);
    c.call(&Request::PortDel {
        name: "vale0:g1".into(),
    })
    .unwrap();
    assert!(!path.exists());
}

#[test]
fn a_guest_on_a_pipe_end_and_a_host_process_on_the_other() {
    let d = daemon("pt-pipe");
    let mut c = Connection::connect(d.socket()).unwrap();
    let path = pt_path("pipe");
    add_pt(&mut c, "pp{1", &path).unwrap();
    let hs = attach(&path);
    assert_eq!(hs.own_id, 1, "end {{ is peer 1");
    assert_eq!(hs.region.layout().ends, 2);
    let mut host = Port::open_at(d.socket(), "pp}1").unwrap();

    // host -> guest: the host process's txsync swaps buffers into the
    // guest's RX ring (no thread in between) and raises the guest's vector;
    // the guest's releases ring the host's doorbell (peer 2) when the host
    // waits for room.
    let mut rx = AppRing::new(hs.region.clone(), 0, Dir::Rx, 0);
    let irq = hs.peers[&1][0].try_clone().unwrap();
    let peer = PipePeer {
        region: hs.region.clone(),
        other_end: 1,
        doorbell: hs.peers[&2][0].try_clone().unwrap(),
    };
    let receiver = std::thread::spawn(move || {
        guest_recv(&mut rx, &irq, 5000, &AtomicUsize::new(0), Some(&peer)).len()
    });
    std::thread::sleep(Duration::from_millis(100));
    let frames: Vec<Vec<u8>> = (0..5000).map(|i| frame([0xff; 6], mac(3), 60, i)).collect();
    assert_eq!(send(&mut host, &frames), 5000);
    assert!(
        host.flush(Some(Duration::from_secs(5))).unwrap(),
        "the guest released every slot"
    );
    assert_eq!(receiver.join().unwrap(), 5000, "a pipe never drops");
    // The doorbell the guest rings for the host is the host end's interrupt.
    assert_eq!(hs.peers[&2].len(), 1, "the other end is peer 2");
}

#[test]
fn bad_passthrough_requests_are_refused() {
    let d = daemon("pt-bad");
    let mut c = Connection::connect(d.socket()).unwrap();
    // Not a socket at the path.
    let file = std::env::temp_dir().join(format!("rs-pt-{}-file", std::process::id()));
    std::fs::write(&file, b"x").unwrap();
    match add_pt(&mut c, "vale0:x", &file) {
        Err(CallError::Daemon(e)) => {
            assert_eq!(e.code, ErrorCode::BadRequest);
            assert!(e.message.contains("is not a socket"), "{}", e.message);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let _ = std::fs::remove_file(&file);
    // No port was left behind.
    assert!(Port::open_at(d.socket(), "vale0:x").is_ok());
    // An existing port cannot become a passthrough port.
    let _keep = Port::open_at(d.socket(), "vale0:y").unwrap();
    match add_pt(&mut c, "vale0:y", &pt_path("y")) {
        Err(CallError::Daemon(e)) => assert_eq!(e.code, ErrorCode::Exists),
        other => panic!("expected exists, got {other:?}"),
    }
    // A NIC cannot be passed through.
    assert!(add_pt(&mut c, "netmap:lo", &pt_path("lo")).is_err());
}

#[test]
fn passthrough_ports_come_back_after_a_daemon_restart() {
    let conf = std::env::temp_dir().join(format!("rs-pt-{}-conf.json", std::process::id()));
    let _ = std::fs::remove_file(&conf);
    let g1 = pt_path("restart-g1");
    let pe = pt_path("restart-pipe");
    let frames: Vec<Vec<u8>> = (0..200).map(|i| frame([0xff; 6], mac(7), 60, i)).collect();
    {
        let d = daemon_with("pt-restart", |c| c.config = Some(conf.clone()));
        let mut c = Connection::connect(d.socket()).unwrap();
        add_pt(&mut c, "vale0:g1@conf:rings=2", &g1).unwrap();
        add_pt(&mut c, "rp}4", &pe).unwrap();
        let hs = attach(&g1);
        let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
        let mut tx = AppRing::new(hs.region.clone(), 0, Dir::Tx, 0);
        assert_eq!(guest_send(&mut tx, &hs.peers[&0][0], &frames), 200);
        assert_eq!(recv_n(&mut host, 200).len(), 200);
        // The daemon goes away (QEMU stays, holding the old memory).
    }
    // A new daemon replays the configuration: the sockets are back, with
    // new regions of the same sizes. The guest's QEMU reconnects (a QEMU
    // restart, or the device removed and added again) and traffic flows.
    let d = daemon_with("pt-restart2", |c| c.config = Some(conf.clone()));
    assert!(
        g1.exists() && pe.exists(),
        "the passthrough sockets are back"
    );
    let hs = attach(&g1);
    assert_eq!(
        hs.region.layout().geometry.tx_rings,
        2,
        "same sizes as configured"
    );
    let hp = attach(&pe);
    assert_eq!(hp.own_id, 2, "end }} is peer 2");
    let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
    let mut tx = AppRing::new(hs.region.clone(), 0, Dir::Tx, 0);
    assert_eq!(guest_send(&mut tx, &hs.peers[&0][0], &frames), 200);
    assert_eq!(recv_n(&mut host, 200).len(), 200);
    let _ = std::fs::remove_file(&conf);
}

/// Whether `pat` appears anywhere in `r`'s memory.
fn region_contains(r: &Region, pat: &[u8]) -> bool {
    // SAFETY: the region maps `len` bytes for its lifetime; a test reads a
    // snapshot of memory the daemon may write, which is fine for a search.
    let m = unsafe { std::slice::from_raw_parts(r.base(), r.len()) };
    m.windows(pat.len()).any(|w| w == pat)
}

/// Issue 15, item 11: a process that connected as QEMU once and kept the
/// memfd reads nothing of the next guest's traffic, in either direction:
/// each QEMU connection gets a fresh region.
#[test]
fn a_qemu_that_kept_the_memory_never_sees_the_next_guests_frames() {
    let d = daemon("pt-fresh");
    let mut c = Connection::connect(d.socket()).unwrap();
    let path = pt_path("fresh");
    add_pt(&mut c, "vale0:g", &path).unwrap();
    let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
    // The spy: attaches, keeps the memory, goes.
    let spy = attach(&path);
    let kept = spy.region.clone();
    drop(spy);
    // The next guest's QEMU (accepted once the port has fresh memory).
    let hs = attach(&path);
    assert_ne!(
        hs.region.file_id(),
        kept.file_id(),
        "the next QEMU got the memory the last one kept"
    );
    let out = b"H4-GUEST-TO-HOST";
    let back = b"H4-HOST-TO-GUEST";
    let with = |m: &[u8; 16], dst: [u8; 6], src: [u8; 6], i: u32| {
        let mut f = frame(dst, src, 120, i);
        f[18..34].copy_from_slice(m);
        f
    };
    // guest -> host
    let mut tx = AppRing::new(hs.region.clone(), 0, Dir::Tx, 0);
    let frames: Vec<Vec<u8>> = (0..50).map(|i| with(out, [0xff; 6], mac(1), i)).collect();
    assert_eq!(guest_send(&mut tx, &hs.peers[&0][0], &frames), 50);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < 50 && Instant::now() < deadline {
        got.extend(recv(&mut host, Duration::from_secs(5)));
    }
    assert_eq!(got.len(), 50, "the new guest reaches the host port");
    // host -> guest (its MAC learned: unicast)
    let mut rx = AppRing::new(hs.region.clone(), 0, Dir::Rx, 0);
    let irq = hs.peers[&1][0].try_clone().unwrap();
    let receiver =
        std::thread::spawn(move || guest_recv(&mut rx, &irq, 50, &AtomicUsize::new(0), None).len());
    let frames: Vec<Vec<u8>> = (0..50).map(|i| with(back, mac(1), mac(2), i)).collect();
    assert_eq!(send(&mut host, &frames), 50);
    assert_eq!(
        receiver.join().unwrap(),
        50,
        "the host port reaches the new guest"
    );
    assert!(
        !region_contains(&kept, out) && !region_contains(&kept, back),
        "the memory the last QEMU kept saw the next guest's frames"
    );
    assert!(region_contains(&hs.region, out) || region_contains(&hs.region, back));
}

/// Item 11 on a pipe end: the memory a QEMU kept is shared with the other
/// end, so the next QEMU is refused while that end stays open, and gets a
/// fresh pipe once it closes.
#[test]
fn a_pipe_end_qemu_that_kept_the_memory_never_sees_the_next_guests_frames() {
    let d = daemon("pt-pipe-fresh");
    let mut c = Connection::connect(d.socket()).unwrap();
    let path = pt_path("pipe-fresh");
    add_pt(&mut c, "pf{1", &path).unwrap();
    let host = Port::open_at(d.socket(), "pf}1").unwrap();
    let spy = attach(&path);
    let kept = spy.region.clone();
    drop(spy);
    // The other end still maps the memory the spy kept: refused.
    let mut next = UnixStream::connect(&path).unwrap();
    next.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut b = [0u8; 8];
    assert_eq!(
        next.read(&mut b).unwrap_or(0),
        0,
        "the next QEMU is refused"
    );
    // The host end closes: the pipe gets fresh memory for both ends. (The
    // close is handled by the control thread: a QEMU that comes before is
    // refused, as above, and retries.)
    drop(host);
    let deadline = Instant::now() + Duration::from_secs(60);
    let hs = loop {
        if let Some(hs) = try_attach(&path) {
            break hs;
        }
        assert!(Instant::now() < deadline, "the pipe never got fresh memory");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_ne!(hs.region.file_id(), kept.file_id());
    let mut host = Port::open_at(d.socket(), "pf}1").unwrap();
    // host -> guest, through the fresh memory only.
    let marker = b"H4-PIPE-TO-GUEST";
    let mut rx = AppRing::new(hs.region.clone(), 0, Dir::Rx, 0);
    let irq = hs.peers[&1][0].try_clone().unwrap();
    let peer = PipePeer {
        region: hs.region.clone(),
        other_end: 1,
        doorbell: hs.peers[&2][0].try_clone().unwrap(),
    };
    let receiver = std::thread::spawn(move || {
        guest_recv(&mut rx, &irq, 20, &AtomicUsize::new(0), Some(&peer)).len()
    });
    let frames: Vec<Vec<u8>> = (0..20)
        .map(|i| {
            let mut f = frame([0xff; 6], mac(3), 120, i);
            f[18..34].copy_from_slice(marker);
            f
        })
        .collect();
    assert_eq!(send(&mut host, &frames), 20);
    assert_eq!(
        receiver.join().unwrap(),
        20,
        "the host end reaches the new guest"
    );
    assert!(region_contains(&hs.region, marker));
    assert!(
        !region_contains(&kept, marker),
        "the memory the last QEMU kept saw the next guest's frames"
    );
}

/// Issue 18: `port-add --passthrough PATH --vnet-hdr`. The region says
/// that every frame carries a 12-byte virtio-net header; the switch strips
/// it from what the guest sends and puts one before what it receives (a
/// ring port on the host sees plain frames); `port-list` and the saved
/// configuration keep the setting; it is refused without passthrough and
/// on pipe ends.
#[test]
fn a_vnet_hdr_port_carries_a_header_before_every_frame() {
    let conf = std::env::temp_dir().join(format!("rs-pt-{}-vnet.json", std::process::id()));
    let _ = std::fs::remove_file(&conf);
    let d = daemon_with("pt-vnet", |c| c.config = Some(conf.clone()));
    let mut c = Connection::connect(d.socket()).unwrap();
    let path = pt_path("vnet");
    let add = |c: &mut Connection, name: &str, pt: Option<&Path>| {
        c.call(&Request::PortAdd {
            name: name.into(),
            vhost_user: None,
            passthrough: pt.map(|p| p.display().to_string()),
            vnet_hdr: true,
            migratable: false,
            vlan: None,
            ofport: None,
        })
        .map(|_| ())
    };
    for (name, pt) in [("vale0:nopt", None), ("vh}1", Some(pt_path("vnet-pipe")))] {
        match add(&mut c, name, pt.as_deref()) {
            Err(CallError::Daemon(e)) => {
                assert_eq!(e.code, ErrorCode::BadRequest);
                assert!(e.message.contains("--vnet-hdr"), "{}", e.message);
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }
    add(&mut c, "vale0:g", Some(&path)).unwrap();
    let list: Vec<PortInfo> =
        serde_json::from_value(c.call(&Request::PortList { switch: None }).unwrap().0).unwrap();
    let g = list.iter().find(|p| p.name == "vale0:g").expect("listed");
    assert!(g.passthrough.as_ref().is_some_and(|t| t.vnet_hdr), "{g:?}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&conf).unwrap()).unwrap();
    assert!(
        saved["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("vale0:g@"))
                && r["vnet_hdr"] == true),
        "{saved}"
    );

    let hs = attach(&path);
    assert_eq!(hs.region.header().vnet_hdr_len, 12);
    let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
    // Guest to host: a header (no offload asked) before each frame.
    let frames: Vec<Vec<u8>> = (0..100).map(|i| frame([0xff; 6], mac(9), 100, i)).collect();
    let with_hdr: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut v = vec![0u8; 10];
            v.extend_from_slice(&1u16.to_le_bytes());
            v.extend_from_slice(f);
            v
        })
        .collect();
    let mut tx = AppRing::new(hs.region.clone(), 0, Dir::Tx, 0);
    assert_eq!(guest_send(&mut tx, &hs.peers[&0][0], &with_hdr), 100);
    assert_eq!(recv_n(&mut host, 100), frames, "the host sees plain frames");
    // Host to guest: each frame arrives behind a header.
    let back: Vec<Vec<u8>> = (0..50).map(|i| frame(mac(9), mac(1), 80, i)).collect();
    assert_eq!(send(&mut host, &back), 50);
    let mut rx = AppRing::new(hs.region.clone(), 0, Dir::Rx, 0);
    let got = guest_recv(&mut rx, &hs.peers[&1][0], 50, &AtomicUsize::new(0), None);
    assert_eq!(got.len(), 50);
    for (g, f) in got.iter().zip(&back) {
        assert_eq!(&g[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(&g[12..], &f[..]);
    }
    let _ = std::fs::remove_file(&conf);
}

/// Issue 18, hostile ptnet guests: on a `--vnet-hdr` port, headers that
/// ask for what cannot be done (UDP fragmentation, a checksum outside the
/// frame, TCP segmentation of a frame that is not TCP) and a first slot too
/// short for the header cost those frames, counted as malformed at the
/// port; the daemon goes on, and the next good frame passes.
#[test]
fn a_ptnet_guests_garbage_headers_cost_only_its_frames() {
    let d = daemon("pt-vnet-bad");
    let mut c = Connection::connect(d.socket()).unwrap();
    let path = pt_path("vnet-bad");
    c.call(&Request::PortAdd {
        name: "vale0:g".into(),
        vhost_user: None,
        passthrough: Some(path.display().to_string()),
        vnet_hdr: true,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    let hs = attach(&path);
    let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
    let f = frame([0xff; 6], mac(9), 200, 1);
    let with = |h: [u8; 10], f: &[u8]| {
        let mut v = h.to_vec();
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(f);
        v
    };
    let bad = vec![
        // GSO_UDP (UFO): refused.
        with([0, 3, 42, 0, 0x10, 0, 0, 0, 0, 0], &f),
        // NEEDS_CSUM at 5000 + 6: outside the frame.
        with([1, 0, 0, 0, 0, 0, 0x88, 0x13, 6, 0], &f),
        // GSO_TCPV4 of a frame that is not TCP.
        with([1, 1, 54, 0, 0xa8, 5, 34, 0, 16, 0], &f),
        // Shorter than the header.
        vec![0u8; 6],
    ];
    let mut tx = AppRing::new(hs.region.clone(), 0, Dir::Tx, 0);
    assert_eq!(guest_send(&mut tx, &hs.peers[&0][0], &bad), 4);
    let good = frame([0xff; 6], mac(9), 100, 2);
    assert_eq!(
        guest_send(&mut tx, &hs.peers[&0][0], &[with([0; 10], &good)]),
        1
    );
    assert_eq!(recv_n(&mut host, 1), vec![good]);
    let stats: Vec<serde_json::Value> =
        serde_json::from_value(c.call(&Request::Stats { switch: None }).unwrap().0).unwrap();
    let g = stats.iter().find(|p| p["name"] == "vale0:g").unwrap();
    assert_eq!(g["drop_malformed"], 4, "{g}");
    // The daemon still answers.
    c.call(&Request::PortList { switch: None }).unwrap();
}

/// Issue 19: a migratable port's guest moves to the QEMU of another
/// migratable port, as QEMU's migration with `master=on` moves it: the
/// source's region, bytes and all, is written over the memory the
/// destination port gave its QEMU. The destination port waits until the
/// guest answers its resume ask from there, then checks what it got (a
/// slot written over with a buffer index outside the region is reset and
/// counted), attaches on it and comes up: the frames queued at the source
/// stay readable, and the next ones follow them, with an interrupt.
#[test]
fn a_migratable_ports_memory_is_adopted_where_the_guest_moved() {
    let d = daemon("pt-migrate");
    let mut c = Connection::connect(d.socket()).unwrap();
    let add = |c: &mut Connection, name: &str, path: &Path| {
        c.call(&Request::PortAdd {
            name: name.into(),
            vhost_user: None,
            passthrough: Some(path.display().to_string()),
            vnet_hdr: false,
            migratable: true,
            vlan: None,
            ofport: None,
        })
        .map(|_| ())
    };
    let (ps, pd) = (pt_path("mig-src"), pt_path("mig-dst"));
    add(&mut c, "vale0:src", &ps).unwrap();
    add(&mut c, "vale0:dst", &pd).unwrap();
    // Pipe ends share their memory with the other end: not migratable.
    let e = add(&mut c, "mp{1", &pt_path("mig-pipe")).unwrap_err();
    assert!(e.to_string().contains("--migratable"), "{e}");
    let list: Vec<PortInfo> = c
        .call_as(&Request::PortList {
            switch: Some("vale0".into()),
        })
        .unwrap()
        .0;
    assert!(list
        .iter()
        .filter(|p| p.name.starts_with("vale0:"))
        .all(|p| p.passthrough.as_ref().is_some_and(|t| t.migratable)));

    // What the guest driver does at probe and in its interrupt handler.
    let answer = |r: &Region| {
        let ask = r.resume_ask().load(Ordering::Acquire);
        if ask != 0 && r.resume_ack().load(Ordering::Acquire) != ask {
            r.resume_ack().store(ask, Ordering::Release);
            return true;
        }
        false
    };
    let hs = attach(&ps);
    assert_eq!(hs.own_id, 0, "QEMU's master=on wants the guest at peer 0");
    assert_eq!(hs.peers[&1].len(), 1, "the daemon is peer 1");
    wait_until("the source port to ask", || answer(&hs.region));

    // The host sends to the guest once its port is up (it drops until then).
    let mut host = Port::open_at(d.socket(), "vale0:h").unwrap();
    let mut rx = AppRing::new(hs.region.clone(), 0, Dir::Rx, 0);
    let mut seq = 0u32;
    wait_until("the source port to come up", || {
        send(&mut host, &[frame([0xff; 6], mac(9), 60, seq)]);
        seq += 1;
        std::thread::sleep(Duration::from_millis(10));
        rx.refresh_tail();
        rx.space() > 0
    });
    let n = rx.space();
    rx.advance(n);
    rx.publish();
    // Ten more; the guest takes four and leaves six queued.
    let first = seq;
    let ten: Vec<Vec<u8>> = (first..first + 10)
        .map(|i| frame([0xff; 6], mac(9), 60, i))
        .collect();
    assert_eq!(send(&mut host, &ten), 10);
    wait_until("ten frames at the source", || {
        rx.refresh_tail();
        rx.space() >= 10
    });
    rx.advance(4);
    rx.publish();

    // The move: the source stops (no more frames for it), and its memory
    // is written over the destination's, which asked already.
    let hd = attach(&pd);
    assert_eq!(hd.own_id, 0);
    wait_until("the destination port to ask", || {
        hd.region.resume_ask().load(Ordering::Acquire) != 0
    });
    c.call(&Request::PortDel {
        name: "vale0:src".into(),
    })
    .unwrap();
    assert_eq!(hs.region.len(), hd.region.len());
    // SAFETY: two distinct mappings of `len` bytes each, both alive.
    unsafe { std::ptr::copy_nonoverlapping(hs.region.base(), hd.region.base(), hd.region.len()) };
    // A slot the guest does not own, written over with nonsense.
    let ring = hd.region.ring(0, Dir::Rx, 0);
    let far = ring.num_slots() - 1;
    let mut bad = ring.slot(far);
    bad.buf_idx = u32::MAX;
    ring.set_slot(far, bad);

    // The guest runs on the destination: it answers the destination's ask
    // (which the daemon writes again over the source's).
    wait_until("the destination port to ask again", || answer(&hd.region));
    // The driver rings the daemon's doorbell with its answer.
    hd.peers[&1][0].signal();
    let irq = hd.peers[&0][0].try_clone().unwrap();
    assert!(
        irq.wait(Some(DEADLINE)).unwrap(),
        "the adopted port raises the guest's vector"
    );
    // The guest's receiver goes on where it was: its head, in the CSB
    // (a new ring attaches at the port side's hwcur, which may lag it).
    let csb = hd.region.csb(0, Dir::Rx, 0);
    let (head, hwcur) = (
        csb.head().load(Ordering::Acquire),
        csb.hwcur().load(Ordering::Acquire),
    );
    let mut rx = AppRing::new(hd.region.clone(), 0, Dir::Rx, 0);
    rx.advance(ringswitch_ring::arith::dist(hwcur, head, rx.num_slots()));
    rx.publish();
    rx.refresh_tail();
    assert_eq!(
        rx.space(),
        6,
        "the six frames queued at the source are there"
    );
    let mut got: Vec<u32> = (0..6)
        .map(|k| {
            let p = rx.slot_mut(k).unwrap().payload().to_vec();
            u32::from_be_bytes(p[14..18].try_into().unwrap())
        })
        .collect();
    rx.advance(6);
    rx.publish();
    let taken = AtomicUsize::new(0);
    let five: Vec<Vec<u8>> = (first + 10..first + 15)
        .map(|i| frame([0xff; 6], mac(9), 60, i))
        .collect();
    wait_until("the destination port to come up", || {
        let stats: Vec<ringswitch_control::proto::PortStats> = c
            .call_as(&Request::Stats {
                switch: Some("vale0".into()),
            })
            .unwrap()
            .0;
        stats
            .iter()
            .any(|s| s.name == "vale0:dst" && s.ring_reinits == 1)
    });
    assert_eq!(send(&mut host, &five), 5);
    got.extend(
        guest_recv(&mut rx, &irq, 5, &taken, None)
            .iter()
            .map(|p| u32::from_be_bytes(p[14..18].try_into().unwrap())),
    );
    assert_eq!(
        got,
        (first + 4..first + 15).collect::<Vec<_>>(),
        "in order, none lost"
    );
    let reset = hd.region.ring(0, Dir::Rx, 0).slot(far).buf_idx;
    assert!(
        hd.region.buf_ofs(reset).is_some(),
        "the bad slot got a buffer of the region"
    );
    assert_eq!(
        hd.region.ni_name(0),
        b"vale0:dst",
        "the daemon's own parts are its own again"
    );
}
