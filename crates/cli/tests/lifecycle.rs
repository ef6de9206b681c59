//! SIGTERM stops a real daemon process whatever its peers do (issue 15,
//! item 3): a VM port in client mode trying to reach a frontend whose
//! backlog is full and that never accepts, and a VM port in server mode
//! whose frontend sent half a message and went quiet.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringswitch_control::{Connection, PortInfo, Request, VhostUserSpec};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");
/// Generous: a loaded machine is slow, but a hang never ends.
const DEADLINE: Duration = Duration::from_secs(60);

fn tmp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rs-lc-{}-{tag}.sock", std::process::id()))
}

/// A non-blocking connect; `None` when the backlog is full.
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
    (r == 0).then_some(fd)
}

fn vm_port(c: &mut Connection, name: &str, path: &Path, client: bool) {
    c.call(&Request::PortAdd {
        name: name.into(),
        vhost_user: Some(VhostUserSpec {
            path: path.display().to_string(),
            client,
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
}

#[test]
fn sigterm_stops_the_daemon_whatever_its_vhost_user_peers_do() {
    let sock = tmp("d");
    let _ = std::fs::remove_file(&sock);
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&sock)
        .arg("serve")
        .env("RINGSWITCH_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // Listening, not only bound: the socket's file appears before.
    common::wait_listening(&sock);
    // A frontend that never accepts, its backlog of 0 filled.
    let fe = tmp("fe");
    let _ = std::fs::remove_file(&fe);
    let listener = UnixListener::bind(&fe).unwrap();
    // SAFETY: listen on our own bound socket sets its backlog.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let mut held = Vec::new();
    while let Some(fd) = try_connect(&fe) {
        held.push(fd);
        assert!(held.len() < 64, "the backlog never filled");
    }
    let mut c = Connection::connect(&sock).unwrap();
    vm_port(&mut c, "vale0:client", &fe, true);
    // A frontend that sends half a vhost-user header and goes quiet.
    let srv = tmp("srv");
    vm_port(&mut c, "vale0:server", &srv, false);
    let mut half = UnixStream::connect(&srv).unwrap();
    half.write_all(&[1, 0, 0, 0, 1, 0]).unwrap();
    // The daemon answers meanwhile.
    let list: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
    assert_eq!(list.len(), 2, "{list:?}");
    // SAFETY: kill with a valid pid and signal.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("the daemon did not stop within {DEADLINE:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    eprintln!("the daemon exited {:?} after SIGTERM", t0.elapsed());
    assert!(status.success(), "{status}");
    drop((half, held, listener));
    for p in [&sock, &fe, &srv] {
        let _ = std::fs::remove_file(p);
    }
}

fn ctl(sock: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(sock)
        .arg("ctl")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn ctl_stats_and_port_list_work_with_5000_ports() {
    let sock = tmp("5000");
    let _ = std::fs::remove_file(&sock);
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&sock)
        .arg("serve")
        .env("RINGSWITCH_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // Listening, not only bound: the socket's file appears before.
    common::wait_listening(&sock);
    let mut c = Connection::connect(&sock).unwrap();
    for i in 0..5000 {
        c.call(&Request::PortAdd {
            name: format!("vale{}:p{i:04}@conf:slots=64", i / 250),
            vhost_user: None,
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        })
        .unwrap();
    }
    for args in [&["stats", "--json"][..], &["port", "list", "--json"][..]] {
        let v: serde_json::Value = serde_json::from_slice(&ctl(&sock, args)).unwrap();
        let names: std::collections::BTreeSet<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 5000, "ctl {args:?}");
    }
    for args in [&["stats"][..], &["port", "list"][..]] {
        let text = String::from_utf8(ctl(&sock, args)).unwrap();
        assert!(
            text.lines().count() >= 5000,
            "ctl {args:?}: {} lines",
            text.lines().count()
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&sock);
}
