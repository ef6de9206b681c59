//! A port's VLANs on the control plane: set by `port-add` and `attach`,
//! shown by `port-list`, kept by every incarnation of a port and across a
//! restart with `--config`, refused where a port cannot have them.

mod common;

use common::*;
use ringswitch_client::Port;
use ringswitch_control::{
    CallError, Connection, ErrorCode, HostSpec, PortInfo, PortVlan, Request, VhostUserSpec,
};

fn call_err(c: &mut Connection, r: Request) -> (ErrorCode, String) {
    match c.call(&r) {
        Err(CallError::Daemon(e)) => (e.code, e.message),
        Ok(v) => panic!("expected an error for {r:?}, got {v:?}"),
        Err(e) => panic!("expected a daemon error for {r:?}, got {e}"),
    }
}

fn add(name: &str, vlan: Option<&str>) -> Request {
    Request::PortAdd {
        name: name.into(),
        vhost_user: None,
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: vlan.map(|v| v.parse().unwrap()),
        ofport: None,
    }
}

fn vm_add(name: &str, path: &std::path::Path, vlan: &str) -> Request {
    Request::PortAdd {
        name: name.into(),
        vhost_user: Some(VhostUserSpec {
            path: path.to_string_lossy().into_owned(),
            client: false,
            queues: 1,
            offloads: true,
        }),
        passthrough: None,
        vnet_hdr: false,
        migratable: false,
        vlan: Some(vlan.parse().unwrap()),
        ofport: None,
    }
}

fn list(c: &mut Connection) -> Vec<PortInfo> {
    c.call_as(&Request::PortList { switch: None }).unwrap().0
}

fn port(c: &mut Connection, name: &str) -> PortInfo {
    list(c)
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no port {name}"))
}

/// `port-list`'s VLANs of `name`, as text.
fn vlan_of(c: &mut Connection, name: &str) -> String {
    port(c, name)
        .vlan
        .map(|v| v.to_string())
        .unwrap_or_else(|| panic!("{name} is listed without its VLANs"))
}

/// Whether this process may create TAP interfaces.
fn can_make_taps() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    uid == 0 && std::path::Path::new("/dev/net/tun").exists()
}

fn tmp(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rs-test-{}-vlan-{what}", std::process::id()))
}

/// Ring ports: `port-add --vlan 10` is listed `access:10`, and stays so
/// when a client opens and closes the persistent port (which is rebuilt
/// with fresh memory each time); ports without VLANs, and ports opened on
/// demand, are `trunk:all`; pipes have none.
#[test]
fn ring_ports_keep_their_vlans_through_their_clients() {
    let d = daemon("vlan-ring");
    let s = d.socket().to_path_buf();
    let mut c = Connection::connect(&s).unwrap();
    c.call(&add("vale0:a", Some("access:10"))).unwrap();
    c.call(&add("vale0:t@conf:slots=256", Some("trunk:0,10,20-29")))
        .unwrap();
    c.call(&add("vale0:plain", None)).unwrap();
    c.call(&add("p{1", None)).unwrap();
    assert_eq!(vlan_of(&mut c, "vale0:a"), "access:10");
    assert_eq!(vlan_of(&mut c, "vale0:t"), "trunk:0,10,20-29");
    assert_eq!(vlan_of(&mut c, "vale0:plain"), "trunk:all");
    assert_eq!(port(&mut c, "p{1").vlan, None, "a pipe has no VLANs");

    // Each client gets a new incarnation of the port: same VLANs.
    for round in 0..3 {
        let p = Port::open_at(&s, "vale0:a").unwrap();
        assert!(port(&mut c, "vale0:a").open, "round {round}");
        assert_eq!(vlan_of(&mut c, "vale0:a"), "access:10", "round {round}");
        drop(p);
        wait_until("vale0:a to be closed and rebuilt", || {
            list(&mut c).iter().any(|p| p.name == "vale0:a" && !p.open)
        });
        assert_eq!(vlan_of(&mut c, "vale0:a"), "access:10", "round {round}");
    }

    // Opened by name without port-add: the default.
    let _q = Port::open_at(&s, "vale0:q").unwrap();
    assert_eq!(vlan_of(&mut c, "vale0:q"), "trunk:all");
}

/// Where a port cannot have VLANs, `port-add` says so, and changes nothing.
#[test]
fn vlans_are_refused_where_they_cannot_apply() {
    let d = daemon("vlan-refused");
    let s = d.socket().to_path_buf();
    let mut c = Connection::connect(&s).unwrap();

    let (code, msg) = call_err(&mut c, add("p{1", Some("access:10")));
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(
        msg.contains("p{1 is a pipe end") && msg.contains("no VLANs"),
        "{msg}"
    );
    let (code, msg) = call_err(&mut c, add("p}1@conf:slots=128", Some("trunk:all")));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");

    let pt = tmp("pt.sock");
    let (code, msg) = call_err(
        &mut c,
        Request::PortAdd {
            name: "vale0:pt".into(),
            vhost_user: None,
            passthrough: Some(pt.to_string_lossy().into_owned()),
            vnet_hdr: false,
            migratable: false,
            vlan: Some(PortVlan::Access(10)),
            ofport: None,
        },
    );
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(msg.contains("not on passthrough ports"), "{msg}");
    assert!(!pt.exists(), "no passthrough socket was made");
    assert!(
        list(&mut c).is_empty(),
        "nothing was made: {:?}",
        list(&mut c)
    );

    // A port a client opened on demand has no VLANs and cannot be given
    // some while it is open; `port-add` without VLANs still keeps it.
    let _q = Port::open_at(&s, "vale0:q").unwrap();
    let (code, msg) = call_err(&mut c, add("vale0:q", Some("access:10")));
    assert_eq!(code, ErrorCode::Exists);
    assert!(
        msg.contains("port vale0:q is open by a client") && msg.contains("trunk:all"),
        "{msg}"
    );
    assert!(!port(&mut c, "vale0:q").persistent, "still on demand");
    c.call(&add("vale0:q", Some("trunk:all"))).unwrap();
    assert!(port(&mut c, "vale0:q").persistent);

    // A bad setting on the wire is a bad request with the parser's words.
    let sock = ringswitch_control::SeqPacket::connect(&s).unwrap();
    sock.send(
        br#"{"cmd":"port-add","name":"vale0:z","vlan":"access:4095"}"#,
        &[],
    )
    .unwrap();
    let mut buf = vec![0u8; 70 * 1024];
    let m = sock.recv(&mut buf).unwrap();
    let r: ringswitch_control::Reply = serde_json::from_slice(&buf[..m.len]).unwrap();
    let e = r.error.expect("refused");
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(
        e.message.contains("'4095' is not a VLAN ID"),
        "{}",
        e.message
    );
}

/// `serve --config`: the VLANs of ring, VM and interface ports are saved
/// with them and come back after a restart; a file written before VLANs
/// (no `vlan` anywhere) still loads, as ports without VLANs.
#[test]
fn vlans_survive_a_restart() {
    let conf = tmp("conf.json");
    let _ = std::fs::remove_file(&conf);
    let vm_sock = tmp("vm.sock");
    let tap = format!("rsvl{}", std::process::id() % 100_000);
    let taps = can_make_taps();
    if !taps {
        eprintln!("the TAP part is skipped: creating a TAP needs root and /dev/net/tun");
    }
    let expected = |taps: bool| {
        let mut v = vec![
            ("vale0:a".to_string(), "access:10".to_string()),
            ("vale0:plain".to_string(), "trunk:all".to_string()),
            ("vale0:t".to_string(), "trunk:10,20".to_string()),
            ("vale0:vm".to_string(), "access:20".to_string()),
        ];
        if taps {
            v.push((format!("vale0:{tap}"), "trunk:10,20".to_string()));
        }
        v.sort();
        v
    };
    let vlans = |c: &mut Connection| {
        let mut v: Vec<(String, String)> = list(c)
            .into_iter()
            .map(|p| (p.name, p.vlan.map(|v| v.to_string()).unwrap_or_default()))
            .collect();
        v.sort();
        v
    };
    {
        let d = daemon_with("vlan-conf", |c| c.config = Some(conf.clone()));
        let mut c = Connection::connect(d.socket()).unwrap();
        c.call(&add("vale0:a", Some("access:10"))).unwrap();
        c.call(&add("vale0:t", Some("trunk:20,10"))).unwrap();
        c.call(&add("vale0:plain", None)).unwrap();
        c.call(&vm_add("vale0:vm", &vm_sock, "access:20")).unwrap();
        if taps {
            c.call(&Request::Attach {
                switch: "vale0".into(),
                nic: None,
                host: Some(HostSpec {
                    name: Some(tap.clone()),
                    queues: 1,
                }),
                vlan: Some("trunk:10,20".parse().unwrap()),
            })
            .unwrap_or_else(|e| panic!("attaching TAP {tap}: {e}"));
        }
        assert_eq!(vlans(&mut c), expected(taps));
        assert_eq!(
            port(&mut c, "vale0:vm").kind,
            ringswitch_control::PortKind::VhostUser
        );
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(text.contains(r#""vlan": "access:10""#), "{text}");
        assert!(
            !text.contains("trunk:all"),
            "the default is not written: {text}"
        );
    }
    let d = daemon_with("vlan-conf", |c| c.config = Some(conf.clone()));
    let mut c = Connection::connect(d.socket()).unwrap();
    assert_eq!(
        vlans(&mut c),
        expected(taps),
        "the same VLANs after a restart"
    );
    if taps {
        c.call(&Request::Detach {
            name: format!("vale0:{tap}"),
        })
        .unwrap();
    }
    drop(c);
    drop(d);

    // Written before VLANs.
    std::fs::write(
        &conf,
        r#"{"version":1,"requests":[{"cmd":"switch-add","name":"vale5"},
        {"cmd":"port-add","name":"vale5:old@conf:tx-rings=1,rx-rings=1,tx-slots=1024,rx-slots=1024,buf-size=2048"}]}"#,
    )
    .unwrap();
    let d = daemon_with("vlan-conf", |c| c.config = Some(conf.clone()));
    let mut c = Connection::connect(d.socket()).unwrap();
    assert_eq!(vlan_of(&mut c, "vale5:old"), "trunk:all");
    drop(c);
    drop(d);
    let _ = std::fs::remove_file(&conf);
}
