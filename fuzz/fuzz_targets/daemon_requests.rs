//! The daemon's request handling end to end, in process: clients connect
//! to a real daemon over its real control socket and send datagrams, either
//! raw bytes (any JSON, truncated, oversized, with descriptors attached) or
//! requests built from a small vocabulary of names so that the registry's
//! paths (switch and port creation and deletion, opens, closes, stats,
//! pipes, clients vanishing mid-way) are reached. Every datagram gets a
//! reply (or the connection ends), the daemon keeps answering, and the
//! registry returns to empty after each input.
//!
//! Left out on purpose: requests that touch the host outside the daemon
//! (attaching interfaces, vhost-user and passthrough socket paths), which
//! have their own tests; names are kept free of `netmap:` and of large
//! `@conf` geometries (see `safe_name`).
#![no_main]

use std::os::fd::AsFd;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_control::proto::Request;
use ringswitch_control::SeqPacket;
use ringswitch_fuzz::{daemon_socket, reset_daemon, safe_name};

#[derive(Arbitrary, Debug)]
enum Name {
    Vale {
        sw: u8,
        port: u8,
    },
    Pipe {
        base: u8,
        id: u8,
        slave: bool,
    },
    /// A pipe of a switch port (in its memory when opened so).
    PortPipe {
        sw: u8,
        port: u8,
        id: u8,
        slave: bool,
    },
    Text(String),
}

impl Name {
    fn render(&self, conf: u8) -> String {
        let n = match self {
            Name::Vale { sw, port } => format!("vale{}:p{}", sw % 3, port % 4),
            Name::Pipe { base, id, slave } => {
                format!("x{}{}{}", base % 2, if *slave { '}' } else { '{' }, id % 3)
            }
            Name::PortPipe {
                sw,
                port,
                id,
                slave,
            } => format!(
                "vale{}:p{}{}{}",
                sw % 3,
                port % 4,
                if *slave { '}' } else { '{' },
                id % 4
            ),
            Name::Text(s) => s.clone(),
        };
        safe_name(&n, conf)
    }
}

#[derive(Arbitrary, Debug)]
enum Req {
    Hello(u32),
    SwitchAdd(u8),
    SwitchDel(u8),
    SwitchList,
    /// With an OpenFlow number asked for (any, in range or not).
    PortAdd(Name, Option<u16>),
    PortDel(Name),
    PortList(Option<u8>),
    Stats(Option<u8>),
    Macs(u8),
    /// Name, its `@conf`, room for pipes, a pipe in its port's memory.
    Open(Name, u8, u8, bool),
    Close(u64),
    Detach(Name),
}

fn switch(i: u8) -> String {
    format!("vale{}", i % 4)
}

impl Req {
    fn build(&self) -> Request {
        match self {
            Req::Hello(v) => Request::Hello { version: *v % 3 },
            Req::SwitchAdd(i) => Request::SwitchAdd { name: switch(*i) },
            Req::SwitchDel(i) => Request::SwitchDel { name: switch(*i) },
            Req::SwitchList => Request::SwitchList,
            Req::PortAdd(n, ofport) => Request::PortAdd {
                name: n.render(0),
                vhost_user: None,
                passthrough: None,
                vnet_hdr: false,
                migratable: false,
                vlan: None,
                ofport: ofport.map(u32::from),
            },
            Req::PortDel(n) => Request::PortDel { name: n.render(0) },
            Req::PortList(s) => Request::PortList {
                switch: s.map(switch),
            },
            Req::Stats(s) => Request::Stats {
                switch: s.map(switch),
            },
            Req::Macs(s) => Request::Macs { switch: switch(*s) },
            Req::Open(n, conf, pipes, in_port_memory) => Request::Open {
                name: n.render(*conf),
                pipes: u32::from(*pipes % 20),
                in_port_memory: *in_port_memory,
            },
            Req::Close(h) => Request::Close { handle: *h % 8 },
            Req::Detach(n) => Request::Detach { name: n.render(0) },
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A request from client `c`.
    Call { c: u8, req: Req },
    /// Raw bytes from client `c`, optionally with a descriptor attached.
    Raw { c: u8, data: Vec<u8>, with_fd: bool },
    /// A datagram larger than any request.
    Huge { c: u8, len: u16 },
    /// Client `c` goes away (everything it opened closes).
    Drop { c: u8 },
}

/// Whether the daemon would act outside itself on this datagram.
fn touches_host(data: &[u8]) -> bool {
    match serde_json::from_slice::<Request>(data) {
        Ok(Request::Attach { .. }) => true,
        Ok(Request::PortAdd {
            name,
            vhost_user,
            passthrough,
            ..
        }) => {
            vhost_user.is_some()
                || passthrough.is_some()
                || name.contains("netmap")
                || name.contains('@')
        }
        Ok(Request::Open { name, .. }) => name.contains("netmap") || name.contains('@'),
        _ => false,
    }
}

fn call(
    sock: &SeqPacket,
    data: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>],
    buf: &mut [u8],
) -> bool {
    if sock.send(data, fds).is_err() {
        return false;
    }
    match sock.recv(buf) {
        Ok(m) => {
            if m.len == 0 {
                return false;
            }
            let reply: serde_json::Value = serde_json::from_slice(&buf[..m.len])
                .unwrap_or_else(|e| panic!("the daemon's reply is not JSON: {e}"));
            assert!(reply.get("ok").is_some(), "a reply says ok or not: {reply}");
            true
        }
        Err(_) => false,
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let path = daemon_socket();
    let mut clients: Vec<Option<SeqPacket>> = (0..3).map(|_| None).collect();
    let mut buf = SeqPacket::reply_buffer();
    let ev = ringswitch_ring::EventFd::new().expect("eventfd");
    for op in ops.iter().take(48) {
        let c = match op {
            Op::Call { c, .. } | Op::Raw { c, .. } | Op::Huge { c, .. } | Op::Drop { c } => {
                usize::from(*c) % 3
            }
        };
        if let Op::Drop { .. } = op {
            clients[c] = None;
            continue;
        }
        if clients[c].is_none() {
            clients[c] = Some(SeqPacket::connect(path).expect("the daemon accepts"));
        }
        let sock = clients[c].as_ref().expect("connected");
        let ok = match op {
            Op::Call { req, .. } => {
                let data = serde_json::to_vec(&req.build()).expect("a request serializes");
                touches_host(&data) || call(sock, &data, &[], &mut buf)
            }
            Op::Raw { data, with_fd, .. } => {
                if touches_host(data) {
                    continue;
                }
                let fd = ev.as_fd();
                let fds = if *with_fd { vec![fd] } else { vec![] };
                call(sock, data, &fds, &mut buf)
            }
            Op::Huge { len, .. } => {
                let data = vec![b' '; 8192 + usize::from(*len)];
                call(sock, &data, &[], &mut buf)
            }
            Op::Drop { .. } => unreachable!(),
        };
        if !ok {
            clients[c] = None;
        }
    }
    drop(clients);
    // The daemon still answers, and is emptied for the next input.
    reset_daemon();
});
