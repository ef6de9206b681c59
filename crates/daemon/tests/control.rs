//! Bad input on the control plane: every case gets a clear error, and the
//! daemon keeps serving.

mod common;

use std::os::fd::AsFd;

use common::*;
use ringswitch_client::{ClientError, Port};
use ringswitch_control::{CallError, Connection, ErrorCode, PortInfo, Reply, Request, SeqPacket};

fn code_of(e: ClientError) -> ErrorCode {
    match e {
        ClientError::Call(CallError::Daemon(r)) => r.code,
        other => panic!("expected a daemon error, got {other}"),
    }
}

fn call_err(c: &mut Connection, r: Request) -> (ErrorCode, String) {
    match c.call(&r) {
        Err(CallError::Daemon(e)) => (e.code, e.message),
        Ok(v) => panic!("expected an error for {r:?}, got {v:?}"),
        Err(e) => panic!("expected a daemon error for {r:?}, got {e}"),
    }
}

fn raw(sock: &SeqPacket, bytes: &[u8]) -> Reply {
    sock.send(bytes, &[]).unwrap();
    let mut buf = vec![0u8; 70 * 1024];
    let m = sock.recv(&mut buf).unwrap();
    serde_json::from_slice(&buf[..m.len]).unwrap()
}

#[test]
fn malformed_names_and_sizes() {
    let d = daemon("names");
    let s = d.socket().to_path_buf();
    for bad in [
        "",
        "foo",
        "eth0:x",
        "vale0:",
        "vale0:a b",
        "pipe{",
        "vale0:a@conf:bogus=1",
    ] {
        let e = Port::open_at(&s, bad)
            .err()
            .unwrap_or_else(|| panic!("{bad} opened"));
        assert_eq!(code_of(e), ErrorCode::BadName, "{bad}");
    }
    for bad in [
        "vale0:a@conf:rings=17",
        "vale0:a@conf:slots=32",
        "vale0:a@conf:slots=5000",
        "p{1@conf:rings=0",
    ] {
        let e = Port::open_at(&s, bad).err().unwrap();
        assert_eq!(code_of(e), ErrorCode::Geometry, "{bad}");
    }
    // netmap:IF opens the NIC itself; one that does not exist is not found.
    let e = Port::open_at(&s, "netmap:rs-no-such0").err().unwrap();
    assert_eq!(code_of(e), ErrorCode::NotFound);
    let e = ClientError::Call(CallError::Daemon(ringswitch_control::ErrorReply::new(
        ErrorCode::Geometry,
        "x",
    )));
    assert!(!e.to_string().is_empty());
}

#[test]
fn busy_unknown_and_persistence() {
    let d = daemon("busy");
    let s = d.socket().to_path_buf();
    let p = Port::open_at(&s, "vale0:a").unwrap();
    assert_eq!(
        code_of(Port::open_at(&s, "vale0:a").err().unwrap()),
        ErrorCode::Busy
    );
    let q = Port::open_at(&s, "x{1").unwrap();
    assert_eq!(
        code_of(Port::open_at(&s, "x{1").err().unwrap()),
        ErrorCode::Busy
    );
    let mut c = Connection::connect(&s).unwrap();
    assert_eq!(
        call_err(
            &mut c,
            Request::Stats {
                switch: Some("vale9".into())
            }
        )
        .0,
        ErrorCode::NotFound
    );
    assert_eq!(
        call_err(
            &mut c,
            Request::Macs {
                switch: "vale9".into()
            }
        )
        .0,
        ErrorCode::NotFound
    );
    assert_eq!(
        call_err(
            &mut c,
            Request::SwitchDel {
                name: "vale9".into()
            }
        )
        .0,
        ErrorCode::NotFound
    );
    assert_eq!(
        call_err(
            &mut c,
            Request::PortDel {
                name: "vale0:zz".into()
            }
        )
        .0,
        ErrorCode::NotFound
    );
    assert_eq!(
        call_err(
            &mut c,
            Request::PortDel {
                name: "vale0:a".into()
            }
        )
        .0,
        ErrorCode::Busy
    );
    assert_eq!(
        call_err(
            &mut c,
            Request::SwitchDel {
                name: "vale0".into()
            }
        )
        .0,
        ErrorCode::Busy
    );
    assert_eq!(
        call_err(
            &mut c,
            Request::SwitchAdd {
                name: "bogus".into()
            }
        )
        .0,
        ErrorCode::BadName
    );
    assert_eq!(
        call_err(&mut c, Request::Close { handle: 12345 }).0,
        ErrorCode::NotFound
    );
    drop(p);
    drop(q);

    // Ports opened on demand go away with their client; persistent ones stay.
    c.call(&Request::PortAdd {
        name: "vale0:keep".into(),
        vhost_user: None,
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    assert_eq!(
        call_err(
            &mut c,
            Request::PortAdd {
                name: "vale0:keep".into(),
                vhost_user: None,
                passthrough: None,
                vnet_hdr: false,
                migratable: false,
                vlan: None,
                ofport: None,
            }
        )
        .0,
        ErrorCode::Exists
    );
    let p = Port::open_at(&s, "vale0:keep").unwrap();
    drop(p);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let list: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
    let names: Vec<_> = list.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains(&"vale0:keep"), "{names:?}");
    assert!(!names.contains(&"vale0:a"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("x")), "{names:?}");
    c.call(&Request::PortDel {
        name: "vale0:keep".into(),
    })
    .unwrap();
    let sw: Vec<ringswitch_control::SwitchInfo> = c.call_as(&Request::SwitchList).unwrap().0;
    assert!(
        sw.is_empty(),
        "an on-demand switch goes with its last port: {sw:?}"
    );
}

#[test]
fn too_many_ports() {
    let d = daemon("many");
    let s = d.socket().to_path_buf();
    let mut c = Connection::connect(&s).unwrap();
    for i in 0..ringswitch_switch::MAX_PORTS {
        c.call(&Request::PortAdd {
            name: format!("vale0:p{i}@conf:slots=64,buf-size=128"),
            vhost_user: None,
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        })
        .unwrap();
    }
    let (code, msg) = call_err(
        &mut c,
        Request::PortAdd {
            name: "vale0:one-more".into(),
            vhost_user: None,
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        },
    );
    assert_eq!(code, ErrorCode::Limit);
    assert!(msg.contains("254"), "{msg}");
    // Eight switches with a port each are fine too.
    for i in 1..=8 {
        c.call(&Request::PortAdd {
            name: format!("vale{i}:x"),
            vhost_user: None,
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        })
        .unwrap();
    }
}

#[test]
fn broken_control_messages() {
    let d = daemon("broken");
    let s = d.socket().to_path_buf();
    let sock = SeqPacket::connect(&s).unwrap();
    let r = raw(&sock, b"this is not json");
    assert!(!r.ok);
    assert_eq!(r.error.unwrap().code, ErrorCode::BadRequest);
    let r = raw(&sock, br#"{"cmd":"frobnicate"}"#);
    assert_eq!(r.error.unwrap().code, ErrorCode::BadRequest);
    let r = raw(&sock, br#"{"cmd":"open"}"#);
    assert_eq!(
        r.error.unwrap().code,
        ErrorCode::BadRequest,
        "a missing field"
    );
    let r = raw(&sock, br#"{"cmd":"switch-list""#);
    assert_eq!(
        r.error.unwrap().code,
        ErrorCode::BadRequest,
        "truncated JSON"
    );
    let big = vec![b' '; 100 * 1024];
    let r = raw(&sock, &big);
    let e = r.error.unwrap();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("larger"), "{}", e.message);
    // Descriptors nobody asked for are closed and refused.
    let ev = ringswitch_ring::EventFd::new().unwrap();
    sock.send(br#"{"cmd":"switch-list"}"#, &[ev.as_fd()])
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let m = sock.recv(&mut buf).unwrap();
    let r: Reply = serde_json::from_slice(&buf[..m.len]).unwrap();
    assert!(r.error.unwrap().message.contains("descriptors"));
    // The connection and the daemon still work.
    let r = raw(&sock, br#"{"cmd":"switch-list"}"#);
    assert!(r.ok);
    let r = raw(&sock, br#"{"cmd":"hello","version":99}"#);
    assert_eq!(r.error.unwrap().code, ErrorCode::Unsupported);
}

#[test]
fn no_daemon_says_how_to_start_one() {
    let e = Port::open_at(&socket("nobody-here"), "vale0:a")
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(msg.contains("ringswitch serve"), "{msg}");
}

#[test]
fn client_that_goes_away_releases_its_ports() {
    let d = daemon("bye");
    let s = d.socket().to_path_buf();
    let mut c = Connection::connect(&s).unwrap();
    {
        let _a = Port::open_at(&s, "vale0:gone").unwrap();
        let list: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
        assert!(list.iter().any(|p| p.name == "vale0:gone" && p.open));
    }
    let t0 = std::time::Instant::now();
    loop {
        let list: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
        if !list.iter().any(|p| p.name == "vale0:gone") {
            break;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "port still listed after 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn conf_sizes_describe_the_named_pipe_end() {
    let d = daemon("pipeconf");
    let s = d.socket().to_path_buf();
    let b = Port::open_at(&s, "q}1@conf:tx-rings=2,tx-slots=128").unwrap();
    assert_eq!((b.geometry().tx_rings, b.geometry().tx_slots), (2, 128));
    assert_eq!(
        (b.geometry().rx_rings, b.geometry().rx_slots),
        (1, 2048),
        "pipe default"
    );
    let a = Port::open_at(&s, "q{1").unwrap();
    assert_eq!((a.geometry().rx_rings, a.geometry().rx_slots), (2, 128));
}

#[test]
fn a_persistent_port_gets_fresh_memory_for_each_client() {
    let d = daemon("fresh");
    let s = d.socket().to_path_buf();
    let mut c = Connection::connect(&s).unwrap();
    c.call(&Request::PortAdd {
        name: "vale0:p".into(),
        vhost_user: None,
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: None,
        ofport: None,
    })
    .unwrap();
    let first = Port::open_at(&s, "vale0:p").unwrap();
    let old_region = first.region().clone();
    drop(first);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let second = Port::open_at(&s, "vale0:p").unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(&old_region, second.region()),
        "a new mapping of a new memfd"
    );
    assert_ne!(
        inode(old_region.fd()),
        inode(second.region().fd()),
        "different memfds"
    );
}

fn inode(fd: std::os::fd::BorrowedFd<'_>) -> u64 {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .unwrap()
        .ino()
}

/// `serve --config`: persistent switches, ports (with their sizes), pipes
/// and VM ports come back after a restart; on-demand ports do not; a
/// broken file is a clear error at start.
#[test]
fn configuration_survives_a_restart() {
    let conf = std::env::temp_dir().join(format!("rs-test-{}-conf.json", std::process::id()));
    let _ = std::fs::remove_file(&conf);
    let vm_sock = std::env::temp_dir().join(format!("rs-test-{}-conf-vm.sock", std::process::id()));
    let list = |c: &mut Connection| -> Vec<PortInfo> {
        let mut v: Vec<PortInfo> = c.call_as(&Request::PortList { switch: None }).unwrap().0;
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    };
    let before = {
        let d = daemon_with("conf", |c| c.config = Some(conf.clone()));
        let mut c = Connection::connect(d.socket()).unwrap();
        c.call(&Request::SwitchAdd {
            name: "vale7".into(),
        })
        .unwrap();
        for name in [
            "vale0:a@conf:rings=2,slots=512,buf-size=4096",
            "p{3@conf:slots=128",
        ] {
            c.call(&Request::PortAdd {
                name: name.into(),
                vhost_user: None,
                passthrough: None,
                vnet_hdr: false,
                migratable: false,
                vlan: None,
                ofport: None,
            })
            .unwrap();
        }
        c.call(&Request::PortAdd {
            name: "vale0:vm".into(),
            vhost_user: Some(ringswitch_control::VhostUserSpec {
                path: vm_sock.to_string_lossy().into_owned(),
                client: false,
                queues: 2,
                offloads: false,
            }),
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        })
        .unwrap();
        // On demand: not configuration.
        let _p = Port::open_at(d.socket(), "vale0:tmp").unwrap();
        let l = list(&mut c);
        assert!(l.iter().any(|p| p.name == "vale0:tmp"));
        l.into_iter()
            .filter(|p| p.name != "vale0:tmp")
            .map(|p| (p.name, p.kind, p.geometry, p.vhost_user.map(|v| v.spec)))
            .collect::<Vec<_>>()
    };
    let d = daemon_with("conf", |c| c.config = Some(conf.clone()));
    let mut c = Connection::connect(d.socket()).unwrap();
    let after: Vec<_> = list(&mut c)
        .into_iter()
        .map(|p| (p.name, p.kind, p.geometry, p.vhost_user.map(|v| v.spec)))
        .collect();
    assert_eq!(after, before, "the same ports, sizes and VM sockets");
    let sw: Vec<ringswitch_control::SwitchInfo> = c.call_as(&Request::SwitchList).unwrap().0;
    assert!(sw.iter().any(|s| s.name == "vale7"), "{sw:?}");
    // Deleting is saved too.
    c.call(&Request::PortDel {
        name: "vale0:a".into(),
    })
    .unwrap();
    drop(c);
    drop(d);
    let d = daemon_with("conf", |c| c.config = Some(conf.clone()));
    let mut c = Connection::connect(d.socket()).unwrap();
    assert!(!list(&mut c).iter().any(|p| p.name == "vale0:a"));
    drop(c);
    drop(d);

    std::fs::write(&conf, "{ not json").unwrap();
    let mut cfg = ringswitch_daemon::Config::new(socket("conf-bad"));
    cfg.config = Some(conf.clone());
    let e = ringswitch_daemon::Daemon::start(cfg)
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("is not a ringswitch configuration"),
        "{e}"
    );
    let _ = std::fs::remove_file(&conf);
}
