//! A switch's OpenFlow side against a client no one here wrote, Open
//! vSwitch's `ovs-ofctl` (Debian's openvswitch-common), and against a raw
//! socket client that misbehaves: a daemon process, a switch listening on
//! a unix socket, and the commands' own output checked.
//!
//! Skipped, saying so, when ovs-ofctl is not installed.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{text, wait_until, Daemon, BIN};
use ringswitch_openflow::consts::OFPPR_ADD;
use ringswitch_openflow::{Body, Framer, Message};

/// ovs-ofctl is what these tests talk to the switch with: scripts/setup.sh
/// installs it, and a machine without it fails them rather than skipping.
fn have_ovs_ofctl() -> bool {
    let ok = Command::new("ovs-ofctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "ovs-ofctl is not installed: run scripts/setup.sh (Debian: apt-get install openvswitch-common)"
    );
    ok
}

fn ctl(d: &Daemon, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--socket")
        .arg(&d.socket)
        .arg("ctl")
        .args(args)
        .output()
        .unwrap()
}

fn ctl_ok(d: &Daemon, args: &[&str]) -> String {
    let o = ctl(d, args);
    assert!(o.status.success(), "ctl {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A `--config` file path of a test, with no file there yet.
fn fresh_config(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("rs-of-{}-{tag}.json", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// The switch's OpenFlow socket of a test.
fn of_sock(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("rs-of-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn ofctl(sock: &Path, cmd: &str, args: &[&str]) -> Output {
    Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--timeout=60", cmd])
        .arg(format!("unix:{}", sock.display()))
        .args(args)
        .output()
        .expect("ovs-ofctl runs")
}

fn ofctl_ok(sock: &Path, cmd: &str, args: &[&str]) -> String {
    let o = ofctl(sock, cmd, args);
    assert!(o.status.success(), "ovs-ofctl {cmd} {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Flow lines without their durations (which move), as a set.
fn flow_set(dump: &str) -> BTreeSet<String> {
    dump.lines()
        .filter(|l| l.starts_with(" cookie="))
        .map(|l| {
            let (head, rest) = l.split_once(" duration=").expect("a duration");
            let (_, rest) = rest.split_once("s, ").expect("seconds");
            format!("{head} {rest}")
        })
        .collect()
}

/// What ovs-ofctl dump-flows shows, and what `ctl flows` shows: the same.
fn flows_agree(d: &Daemon, sock: &Path) -> BTreeSet<String> {
    let of = flow_set(&ofctl_ok(sock, "dump-flows", &[]));
    let ours = flow_set(&ctl_ok(d, &["flows", "vale0"]));
    assert_eq!(of, ours, "ovs-ofctl dump-flows and ctl flows differ");
    of
}

fn set(lines: &[&str]) -> BTreeSet<String> {
    lines.iter().map(|s| s.to_string()).collect()
}

fn line(rest: &str) -> String {
    format!(" cookie=0x0, table=0, n_packets=0, n_bytes=0, {rest}")
}

fn switch_with_openflow(tag: &str) -> (Daemon, PathBuf) {
    let d = Daemon::start(tag);
    let sock = of_sock(tag);
    let listen = format!("unix:{}", sock.display());
    ctl_ok(
        &d,
        &["switch", "add", "vale0", "--openflow-listen", &listen],
    );
    (d, sock)
}

#[test]
fn ovs_ofctl_programs_and_reads_the_switch() {
    if !have_ovs_ofctl() {
        return;
    }
    let (d, sock) = switch_with_openflow("prog");
    ctl_ok(&d, &["port", "add", "vale0:a"]);
    ctl_ok(&d, &["port", "add", "vale0:b"]);

    // show: the ports with their numbers (index + 1).
    let show = ofctl_ok(&sock, "show", &[]);
    assert!(show.contains("n_tables:8"), "{show}");
    assert!(show.contains(" 1(vale0:a): "), "{show}");
    assert!(show.contains(" 2(vale0:b): "), "{show}");

    // add-flow, add-flows, mod-flows, del-flows (strict and not).
    ofctl_ok(
        &sock,
        "add-flow",
        &["priority=100,in_port=1,actions=output:2"],
    );
    ofctl_ok(
        &sock,
        "add-flow",
        &["priority=100,in_port=2,actions=output:1"],
    );
    let file = std::env::temp_dir().join(format!("rs-of-{}-flows.txt", std::process::id()));
    std::fs::write(
        &file,
        "priority=200,tcp,nw_src=10.0.0.0/8,tp_dst=80,actions=drop\n\
         priority=200,udp,tp_dst=53,actions=FLOOD\n\
         priority=10,dl_dst=02:00:00:00:00:01,actions=NORMAL\n",
    )
    .unwrap();
    ofctl_ok(&sock, "add-flows", &[file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        flows_agree(&d, &sock),
        set(&[
            &line("priority=100,in_port=1 actions=output:2"),
            &line("priority=100,in_port=2 actions=output:1"),
            &line("priority=200,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=drop"),
            &line("priority=200,udp,tp_dst=53 actions=FLOOD"),
            &line("priority=10,dl_dst=02:00:00:00:00:01 actions=NORMAL"),
        ])
    );
    ofctl_ok(&sock, "mod-flows", &["in_port=1,actions=output:3"]);
    ofctl_ok(
        &sock,
        "del-flows",
        &["--strict", "priority=200,udp,tp_dst=53"],
    );
    assert_eq!(
        flows_agree(&d, &sock),
        set(&[
            &line("priority=100,in_port=1 actions=output:3"),
            &line("priority=100,in_port=2 actions=output:1"),
            &line("priority=200,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=drop"),
            &line("priority=10,dl_dst=02:00:00:00:00:01 actions=NORMAL"),
        ])
    );
    // Not strict: every flow the match covers, whatever its priority.
    ofctl_ok(&sock, "del-flows", &["tcp"]);
    ofctl_ok(&sock, "del-flows", &["--strict", "priority=100,in_port=2"]);
    assert_eq!(
        flows_agree(&d, &sock),
        set(&[
            &line("priority=100,in_port=1 actions=output:3"),
            &line("priority=10,dl_dst=02:00:00:00:00:01 actions=NORMAL"),
        ])
    );
    ofctl_ok(&sock, "del-flows", &[]);
    assert!(flows_agree(&d, &sock).is_empty());

    // Groups.
    ofctl_ok(
        &sock,
        "add-group",
        &["group_id=7,type=all,bucket=output:1,bucket=output:2"],
    );
    let groups = ofctl_ok(&sock, "dump-groups", &[]);
    assert!(
        groups.contains("group_id=7,type=all,bucket=actions=output:1,bucket=actions=output:2"),
        "{groups}"
    );

    // A match ovs-ofctl sends that the switch does not take: its error.
    let o = ofctl(&sock, "add-flow", &["in_port=1,tp_dst=80,actions=drop"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        err.contains("OFPT_ERROR") && err.contains("OFPBMC_"),
        "{err}"
    );

    // Port counters after traffic, which a flow sends from a to b (the
    // table has no other flow: the group is not used).
    ofctl_ok(
        &sock,
        "add-flow",
        &["priority=5,in_port=1,actions=output:2"],
    );
    let rx = d.pktgen(&["-f", "rx", "-i", "vale0:b", "-n", "1000"]);
    d.wait_open(&["vale0:b"]);
    let tx = d.pktgen(&["-f", "tx", "-i", "vale0:a", "-n", "1000"]);
    let o = tx.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = rx.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let ports = ofctl_ok(&sock, "dump-ports", &[]);
    assert!(
        ports.contains("port  1: rx pkts=1000, bytes=60000,"),
        "{ports}"
    );
    assert!(ports.contains("port  2: rx pkts=0,"), "{ports}");
    let p2 = ports.split("port  2:").nth(1).unwrap();
    assert!(p2.contains("tx pkts=1000, bytes=60000,"), "{ports}");
    let desc = ofctl_ok(&sock, "dump-ports-desc", &[]);
    assert!(
        desc.contains(" 1(vale0:a): ") && desc.contains(" 2(vale0:b): "),
        "{desc}"
    );
    wait_flow_counts(&sock, "priority=5,in_port=1", 1000, 60000);
}

/// Waits until dump-flows shows the flow whose line contains `flow` with
/// exactly these counters (workers add what they counted within
/// milliseconds, and before they sleep).
fn wait_flow_counts(sock: &Path, flow: &str, packets: u64, bytes: u64) {
    let want = format!("n_packets={packets}, n_bytes={bytes},");
    let mut last = String::new();
    let found = (0..3000).any(|_| {
        last = ofctl_ok(sock, "dump-flows", &[]);
        let ok = last.lines().any(|l| l.contains(flow) && l.contains(&want));
        if !ok {
            std::thread::sleep(Duration::from_millis(20));
        }
        ok
    });
    assert!(found, "no flow {flow} with {want}:\n{last}");
}

/// Runs pkt-gen to completion.
fn pktgen_ok(c: std::process::Child) {
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn flows_from_ovs_ofctl_decide_where_frames_go_and_count_them_exactly() {
    if !have_ovs_ofctl() {
        return;
    }
    let (d, sock) = switch_with_openflow("fwd");
    for p in ["a", "b", "c"] {
        ctl_ok(&d, &["port", "add", &format!("vale0:{p}")]);
    }
    // UDP to port 5001 goes to c; the rest of a's frames to b; nothing
    // else has a flow (dropped).
    ofctl_ok(
        &sock,
        "add-flow",
        &["priority=10,udp,tp_dst=5001,actions=output:3"],
    );
    ofctl_ok(
        &sock,
        "add-flow",
        &["priority=5,in_port=1,actions=output:2"],
    );

    let rc = d.pktgen(&["-f", "rx", "-i", "vale0:c", "-n", "1000"]);
    let rb = d.pktgen(&["-f", "rx", "-i", "vale0:b", "-n", "500"]);
    d.wait_open(&["vale0:b", "vale0:c"]);
    pktgen_ok(d.pktgen(&[
        "-f",
        "tx",
        "-i",
        "vale0:a",
        "-n",
        "1000",
        "-d",
        "10.0.0.2:5001",
    ]));
    pktgen_ok(d.pktgen(&["-f", "tx", "-i", "vale0:a", "-n", "500", "-d", "10.0.0.2:9"]));
    pktgen_ok(rc);
    pktgen_ok(rb);
    wait_flow_counts(&sock, "priority=10,udp,tp_dst=5001", 1000, 60000);
    wait_flow_counts(&sock, "priority=5,in_port=1", 500, 30000);
    // From b: no flow, dropped and counted as such.
    pktgen_ok(d.pktgen(&["-f", "tx", "-i", "vale0:b", "-n", "100"]));
    wait_until("b's frames counted as dropped", || {
        let out = ctl_ok(&d, &["stats", "--json"]);
        let all: serde_json::Value = serde_json::from_str(&out).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "vale0:b" && s["drop_no_dest"] == 100 && s["tx_packets"] == 0)
    });

    // A frame from the controller, out of port 2 (ovs-ofctl packet-out).
    let rb = d.pktgen(&["-f", "rx", "-i", "vale0:b", "-n", "1"]);
    d.wait_open(&["vale0:b"]);
    let frame = "ffffffffffff020000000001080045000014000100004011f9e60a0000010a000002";
    ofctl_ok(
        &sock,
        "packet-out",
        &[&format!(
            "in_port=CONTROLLER,packet={frame},actions=output:2"
        )],
    );
    pktgen_ok(rb);
}

/// A raw OpenFlow client: connects, says HELLO, and reads messages.
struct Raw {
    s: UnixStream,
    framer: Framer,
}

impl Raw {
    fn connect(sock: &Path) -> Raw {
        let mut s = UnixStream::connect(sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
        Raw {
            s,
            framer: Framer::default(),
        }
    }

    /// The next message (panics after the read timeout).
    fn next(&mut self) -> Option<Message> {
        let mut buf = [0u8; 65536];
        loop {
            if let Some(f) = self.framer.next_frame().expect("the switch frames") {
                return Some(Message::decode(&f).expect("the switch's messages decode"));
            }
            let n = self.s.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            let mut at = 0;
            while at < n {
                at += self.framer.push(&buf[at..n]);
                if at < n {
                    // Full: the caller takes a frame first.
                    if let Some(f) = self.framer.next_frame().expect("frames") {
                        let _ = f;
                    }
                }
            }
        }
    }

    /// Reads until a message `pick` takes; None if the connection closed.
    fn until<T>(&mut self, mut pick: impl FnMut(&Message) -> Option<T>) -> Option<T> {
        while let Some(m) = self.next() {
            if let Some(t) = pick(&m) {
                return Some(t);
            }
        }
        None
    }
}

#[test]
fn a_port_added_while_connected_is_announced() {
    if !have_ovs_ofctl() {
        return;
    }
    let (d, sock) = switch_with_openflow("status");
    ctl_ok(&d, &["port", "add", "vale0:a"]);
    let mut c = Raw::connect(&sock);
    c.until(|m| matches!(m.body, Body::Hello(_)).then_some(()))
        .expect("the switch's HELLO");
    // A barrier answered: the session is up before the port comes.
    c.s.write_all(&[4, 20, 0, 8, 0, 0, 0, 2]).unwrap();
    c.until(|m| matches!(m.body, Body::BarrierReply).then_some(()))
        .expect("a barrier reply");
    ctl_ok(&d, &["port", "add", "vale0:b"]);
    let st = c
        .until(|m| match &m.body {
            // Port a's own ADD may come first: it was added after the
            // switch started listening, maybe after this client came.
            Body::PortStatus(p) if p.desc.name == "vale0:b" => Some(p.clone()),
            _ => None,
        })
        .expect("a PORT_STATUS");
    assert_eq!(st.reason, OFPPR_ADD);
    assert_eq!(st.desc.port_no, 2);
    assert_eq!(st.desc.name, "vale0:b");
}

#[test]
fn port_numbers_survive_a_restart() {
    if !have_ovs_ofctl() {
        return;
    }
    let config = fresh_config("config");
    let sock = of_sock("restart");
    let listen = format!("unix:{}", sock.display());
    {
        let d = Daemon::start_with("restart", &["--config", config.to_str().unwrap()]);
        ctl_ok(
            &d,
            &["switch", "add", "vale0", "--openflow-listen", &listen],
        );
        for p in ["a", "b", "c"] {
            ctl_ok(&d, &["port", "add", &format!("vale0:{p}")]);
        }
        ctl_ok(&d, &["port", "del", "vale0:a"]);
        let show = ofctl_ok(&sock, "show", &[]);
        assert!(show.contains(" 3(vale0:c): "), "{show}");
    }
    let d = Daemon::start_with("restart", &["--config", config.to_str().unwrap()]);
    wait_until("the switch listening again", || sock.exists());
    let show = ofctl_ok(&sock, "show", &[]);
    assert!(show.contains(" 2(vale0:b): "), "{show}");
    assert!(show.contains(" 3(vale0:c): "), "{show}");
    // A new port takes the first free number.
    ctl_ok(&d, &["port", "add", "vale0:d"]);
    let show = ofctl_ok(&sock, "show", &[]);
    assert!(show.contains(" 1(vale0:d): "), "{show}");
    let _ = std::fs::remove_file(&config);
}

/// Issue 19: a VM's port can have the same OpenFlow number on the host it
/// moves to (`port add --ofport N`, as Open vSwitch's ofport_request), so
/// flows that name it keep working there; the number is the port's across
/// restarts, and numbers out of range or of another port are refused.
#[test]
fn a_vm_port_has_the_openflow_number_it_asks_for_on_every_daemon() {
    if !have_ovs_ofctl() {
        return;
    }
    let config = fresh_config("ofport");
    let vm_sock = |tag: &str| {
        std::env::temp_dir()
            .join(format!("rs-of-{}-{tag}-vm.sock", std::process::id()))
            .display()
            .to_string()
    };
    // Two daemons stand for the source and the destination host: other
    // ports came first on each, in another order.
    for (tag, others) in [("src", &["a"][..]), ("dst", &["x", "y", "z"][..])] {
        let sock = of_sock(&format!("ofport-{tag}"));
        let listen = format!("unix:{}", sock.display());
        let args = ["--config", config.to_str().unwrap()];
        let d = Daemon::start_with(
            &format!("ofport-{tag}"),
            if tag == "src" { &args } else { &[] },
        );
        ctl_ok(
            &d,
            &["switch", "add", "vale0", "--openflow-listen", &listen],
        );
        for p in others {
            ctl_ok(&d, &["port", "add", &format!("vale0:{p}")]);
        }
        let vm = vm_sock(tag);
        ctl_ok(
            &d,
            &[
                "port",
                "add",
                "vale0:vm",
                "--vhost-user",
                &vm,
                "--ofport",
                "7",
            ],
        );
        let show = ofctl_ok(&sock, "show", &[]);
        assert!(show.contains(" 7(vale0:vm): "), "{tag}: {show}");
        // Refused: out of range, another port's number, a new number for
        // an existing port.
        for (args, says) in [
            (
                &["port", "add", "vale0:w", "--ofport", "255"][..],
                "out of range",
            ),
            (&["port", "add", "vale0:w", "--ofport", "0"], "out of range"),
            (
                &["port", "add", "vale0:w", "--ofport", "7"],
                "is vale0:vm's",
            ),
            (
                &[
                    "port",
                    "add",
                    "vale0:vm",
                    "--vhost-user",
                    &vm,
                    "--ofport",
                    "8",
                ],
                "exists",
            ),
        ] {
            let o = ctl(&d, args);
            assert!(!o.status.success(), "{args:?} was accepted");
            assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
        }
        if tag == "src" {
            // Its number stays the port's after a restart with --config (on
            // the same control socket: the daemon takes over the sockets its
            // predecessor there made).
            drop(d);
            let d = Daemon::start_with("ofport-src", &args);
            wait_until("the switch listening again", || sock.exists());
            let show = ofctl_ok(&sock, "show", &[]);
            assert!(show.contains(" 7(vale0:vm): "), "after a restart: {show}");
            drop(d);
        }
        let _ = std::fs::remove_file(&vm);
    }
    let _ = std::fs::remove_file(&config);
}

/// The daemon still serves: the control socket and another OpenFlow
/// client.
fn still_serving(d: &Daemon, sock: &Path) {
    let list = ctl_ok(d, &["switch", "list"]);
    assert!(list.contains("vale0"), "{list}");
    ofctl_ok(sock, "dump-flows", &[]);
}

fn flow_mod_bytes(xid: u32, i: u32) -> Vec<u8> {
    use ringswitch_openflow::message::FlowMod;
    use ringswitch_openflow::oxm::Field;
    use ringswitch_openflow::{Match, Oxm};
    let m = Match::new(vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::Ipv4Dst, u128::from(0x0a00_0000 + i)),
    ])
    .unwrap();
    let fm = FlowMod::add(0, 100, m, vec![]);
    Message::new(xid, Body::FlowMod(fm)).encode().unwrap()
}

#[test]
fn hostile_peers_get_an_error_or_a_closed_connection() {
    if !have_ovs_ofctl() {
        return;
    }
    let (d, sock) = switch_with_openflow("hostile");
    ctl_ok(&d, &["port", "add", "vale0:a"]);

    // A truncated header, then gone.
    {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(&[4, 0, 0]).unwrap();
    }
    still_serving(&d, &sock);

    // A length that lies (under a header): BAD_LEN, then closed.
    let mut c = Raw::connect(&sock);
    c.s.write_all(&[4, 2, 0, 4, 0, 0, 0, 9]).unwrap();
    let e = c.until(|m| match &m.body {
        Body::Error(e) => Some(e.code),
        _ => None,
    });
    assert_eq!(e, Some(ringswitch_openflow::ErrorCode::BAD_REQUEST_BAD_LEN));
    assert!(c.until(|_| None::<()>).is_none(), "closed after");
    still_serving(&d, &sock);

    // A length that promises more than comes, then gone.
    {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(&[4, 0, 0, 8, 0, 0, 0, 1, 4, 14, 0xff, 0xff, 0, 0])
            .unwrap();
    }
    still_serving(&d, &sock);

    // An unknown type: BAD_TYPE, and the connection stays.
    let mut c = Raw::connect(&sock);
    c.s.write_all(&[4, 99, 0, 8, 0, 0, 0, 5]).unwrap();
    let e = c.until(|m| match &m.body {
        Body::Error(e) => Some((m.xid, e.code)),
        _ => None,
    });
    assert_eq!(
        e,
        Some((5, ringswitch_openflow::ErrorCode::BAD_REQUEST_BAD_TYPE))
    );
    c.s.write_all(&[4, 20, 0, 8, 0, 0, 0, 6]).unwrap();
    assert_eq!(
        c.until(|m| matches!(m.body, Body::BarrierReply).then_some(m.xid)),
        Some(6)
    );

    // 10,000 FLOW_MODs in one write, then a barrier: all applied.
    let mut flood = Vec::new();
    for i in 0..10_000 {
        flood.extend(flow_mod_bytes(100 + i, i));
    }
    flood.extend([4, 20, 0, 8, 0, 0, 0, 7]);
    c.s.write_all(&flood).unwrap();
    assert_eq!(
        c.until(|m| match &m.body {
            Body::BarrierReply => Some(m.xid),
            Body::Error(e) => panic!("a flow mod was refused: {:?}", e.code),
            _ => None,
        }),
        Some(7)
    );
    let agg = ofctl_ok(&sock, "dump-aggregate", &[]);
    assert!(agg.contains("flow_count=10000"), "{agg}");
    still_serving(&d, &sock);

    // A peer that never reads: echo requests with large data until the
    // switch closes the connection (its replies pass the output bound).
    let s = UnixStream::connect(&sock).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut w = &s;
    w.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    let mut echo = vec![4u8, 2, 0xff, 0xf8, 0, 0, 0, 0];
    echo.resize(0xfff8, 0xab);
    let t0 = Instant::now();
    let closed = loop {
        if let Err(e) = w.write_all(&echo) {
            break e;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the switch kept a peer that never reads"
        );
    };
    assert!(
        matches!(
            closed.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        "{closed}"
    );
    still_serving(&d, &sock);
}

/// How fast flows go in through OpenFlow: ovs-ofctl add-flows of a file
/// of 10,000 and 50,000 flows (it sends a barrier after each flow and
/// waits for its reply), and 50,000 flow mods pipelined with one barrier.
/// Figures, printed, not a pass/fail.
#[test]
fn flow_mod_rate_through_openflow() {
    if !have_ovs_ofctl() {
        return;
    }
    let (d, sock) = switch_with_openflow("rate");
    for n in [10_000u32, 50_000] {
        ofctl_ok(&sock, "del-flows", &[]);
        let file = std::env::temp_dir().join(format!("rs-of-{}-rate.txt", std::process::id()));
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!(
                "priority={},tcp,nw_dst=10.{}.{}.{},tp_dst={},actions=output:{}\n",
                100 + i % 7,
                (i >> 16) & 0xff,
                (i >> 8) & 0xff,
                i & 0xff,
                80 + i % 3,
                1 + i % 4
            ));
        }
        std::fs::write(&file, text).unwrap();
        let t0 = Instant::now();
        ofctl_ok(&sock, "add-flows", &[file.to_str().unwrap()]);
        let took = t0.elapsed();
        let _ = std::fs::remove_file(&file);
        let agg = ofctl_ok(&sock, "dump-aggregate", &[]);
        assert!(agg.contains(&format!("flow_count={n}")), "{agg}");
        eprintln!(
            "FIGURE: {n} flows through ovs-ofctl add-flows (with its barrier) in {:.3} s: {:.0} flows/s",
            took.as_secs_f64(),
            f64::from(n) / took.as_secs_f64()
        );
    }
    // ovs-ofctl add-flows waits for a barrier after every flow (a round
    // trip each); a controller that pipelines sends them all, then one
    // barrier: that is the switch's own rate.
    ofctl_ok(&sock, "del-flows", &[]);
    let n = 50_000u32;
    let mut c = Raw::connect(&sock);
    c.until(|m| matches!(m.body, Body::Hello(_)).then_some(()))
        .expect("the switch's HELLO");
    let mut all = Vec::new();
    for i in 0..n {
        all.extend(flow_mod_bytes(100 + i, i));
    }
    all.extend([4, 20, 0, 8, 0, 0, 0, 7]);
    let t0 = Instant::now();
    c.s.write_all(&all).unwrap();
    assert_eq!(
        c.until(|m| matches!(m.body, Body::BarrierReply).then_some(m.xid)),
        Some(7)
    );
    let took = t0.elapsed();
    let agg = ofctl_ok(&sock, "dump-aggregate", &[]);
    assert!(agg.contains(&format!("flow_count={n}")), "{agg}");
    eprintln!(
        "FIGURE: {n} flows pipelined, then one barrier, in {:.3} s: {:.0} flows/s",
        took.as_secs_f64(),
        f64::from(n) / took.as_secs_f64()
    );
    drop(d);
}

/// A switch given a controller connects to it, answers it as a switch,
/// and connects again when the controller drops the connection.
#[test]
fn the_switch_connects_to_its_controller_and_reconnects() {
    if !have_ovs_ofctl() {
        return;
    }
    let (d, _sock) = switch_with_openflow("controller");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let target = format!("tcp:{}", l.local_addr().unwrap());
    ctl_ok(
        &d,
        &[
            "switch",
            "set",
            "vale0",
            "--controller",
            &target,
            "--fail-mode",
            "standalone",
        ],
    );
    let list = ctl_ok(&d, &["switch", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v[0]["openflow"]["controller"], target.as_str(), "{v}");
    assert_eq!(v[0]["openflow"]["fail_mode"], "standalone", "{v}");
    for round in 0..2 {
        let mut conn = None;
        wait_until(&format!("the switch connecting (round {round})"), || {
            conn = l.accept().ok().map(|(s, _)| s);
            conn.is_some()
        });
        let mut s = conn.unwrap();
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
        s.write_all(&[4, 5, 0, 8, 0, 0, 0, 2]).unwrap();
        let mut framer = Framer::default();
        let mut buf = [0u8; 4096];
        let features = loop {
            if let Some(f) = framer.next_frame().unwrap() {
                let m = Message::decode(&f).unwrap();
                if let Body::FeaturesReply(fr) = m.body {
                    assert_eq!(m.xid, 2);
                    break fr;
                }
                continue;
            }
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the switch closed the connection");
            framer.push(&buf[..n]);
        };
        assert_eq!(features.n_tables, 8);
        assert_eq!(features.n_buffers, 0);
        let list = ctl_ok(&d, &["switch", "list", "--json"]);
        assert!(list.contains("\"openflow_connections\": 1"), "{list}");
        // Dropped: the switch comes back after its backoff.
    }
}
