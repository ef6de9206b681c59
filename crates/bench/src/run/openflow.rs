//! The OpenFlow side of the flows section: the flow files ovs-ofctl loads
//! and a raw connection that pipelines FLOW_MODs (a controller's way) and
//! changes flows at a steady pace under traffic. Nothing the switch sends
//! is trusted: its messages are cut by their header's length, and only
//! their type and xid are read.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringswitch_openflow::consts::OFPCML_NO_BUFFER;
use ringswitch_openflow::message::{FlowMod, FlowModCommand};
use ringswitch_openflow::{Action, Body, Field, Instruction, Match, Message, Oxm};

/// pkt-gen's source range of the 1,000 active 5-tuples: 10 addresses ×
/// 100 ports (the port moves fastest), one destination.
pub const TUPLES_SRC: &str = "10.0.0.1-10.0.0.10:1000-1099";
/// pkt-gen's destination of the 1,000 active 5-tuples.
pub const TUPLES_DST: &str = "10.1.0.1:4321";

/// The destination matches of the ten masks: address `k % 5` (none, /8,
/// /16, /24, /32), and the UDP destination port from `k >= 5`.
const DST_MATCHES: [&str; 5] = [
    "",
    ",nw_dst=10.0.0.0/8",
    ",nw_dst=10.1.0.0/16",
    ",nw_dst=10.1.0.0/24",
    ",nw_dst=10.1.0.1",
];

/// The 1,000 flows, one line each in ovs-ofctl's syntax, that match the
/// 1,000 tuples of [`TUPLES_SRC`] → [`TUPLES_DST`] one to one and output
/// to `port`: source address 10.0.0.(k+1) (k = 0..9) and source port
/// 1000..1099 pick the flow, and each k has its own mask (the destination
/// address unmatched or under a /8, /16, /24, /32 prefix, the destination
/// port matched or not): ten distinct masks, 100 flows each.
pub fn thousand_flows(port: &str) -> String {
    let mut text = String::new();
    for k in 0..10u32 {
        let dst = DST_MATCHES[(k % 5) as usize];
        let dport = if k >= 5 { ",tp_dst=4321" } else { "" };
        for j in 0..100u32 {
            text.push_str(&format!(
                "priority={},udp,nw_src=10.0.0.{},tp_src={}{dst}{dport},actions=output:{port}\n",
                100 + k,
                k + 1,
                1000 + j
            ));
        }
    }
    text
}

/// The 1,000 tuples of [`TUPLES_SRC`] → [`TUPLES_DST`] as a pcap file of
/// 1,000 UDP/IPv4 frames of `size` bytes (at least 42), source port
/// moving fastest, as pkt-gen walks them: what DPDK's pcap PMD replays for
/// a testpmd sender (`ovs-dpdk.sh --tx-pcap`), so that OVS sees the same
/// tuples ringswitch does. Checksums: IPv4 set, UDP 0 (none).
pub fn tuples_pcap(size: usize) -> Vec<u8> {
    let size = size.max(42);
    let mut out = Vec::with_capacity(24 + 1000 * (16 + size));
    // Global header: magic, version 2.4, zone, accuracy, snap length,
    // link type 1 (Ethernet), little-endian as written.
    for (v, n) in [
        (0xa1b2_c3d4u32, 4),
        (2, 2),
        (4, 2),
        (0, 4),
        (0, 4),
        (65535, 4),
        (1, 4),
    ] {
        out.extend_from_slice(&v.to_le_bytes()[..n]);
    }
    let ip_len = u16::try_from(size - 14).unwrap_or(u16::MAX);
    let udp_len = u16::try_from(size - 34).unwrap_or(u16::MAX);
    for k in 0..10u8 {
        for port in 1000..1100u16 {
            let mut f = vec![0u8; size];
            f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip = &mut f[14..34];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
            ip[8] = 64;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&[10, 0, 0, k + 1]);
            ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
            let mut sum: u32 = ip
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            f[34..36].copy_from_slice(&port.to_be_bytes());
            f[36..38].copy_from_slice(&4321u16.to_be_bytes());
            f[38..40].copy_from_slice(&udp_len.to_be_bytes());
            let len = u32::try_from(size).unwrap_or(u32::MAX);
            for v in [0, 0, len, len] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&f);
        }
    }
    out
}

/// `n` flows for the flow-mod rate, ovs-ofctl's syntax: TCP to 10.x.y.z,
/// destination port 80..82, seven priorities, output to `port`.
pub fn rate_flows(n: u32, port: u32) -> String {
    let mut text = String::new();
    for i in 0..n {
        let (p, a, dp) = rate_flow(i);
        text.push_str(&format!(
            "priority={p},tcp,nw_dst={}.{}.{}.{},tp_dst={dp},actions=output:{port}\n",
            a >> 24,
            (a >> 16) & 0xff,
            (a >> 8) & 0xff,
            a & 0xff
        ));
    }
    text
}

/// Flow `i` of [`rate_flows`]: priority, destination address, port.
fn rate_flow(i: u32) -> (u16, u32, u16) {
    (
        100 + (i % 7) as u16,
        0x0a00_0000 | (i & 0x00ff_ffff),
        80 + (i % 3) as u16,
    )
}

/// A FLOW_MOD of table 0 with no timeouts.
fn flow_mod(
    xid: u32,
    command: FlowModCommand,
    priority: u16,
    fields: Vec<Oxm>,
    port: u32,
) -> Vec<u8> {
    let instructions = if command == FlowModCommand::Add {
        vec![Instruction::ApplyActions(vec![Action::Output {
            port,
            max_len: OFPCML_NO_BUFFER,
        }])]
    } else {
        Vec::new()
    };
    let fm = FlowMod {
        command,
        ..FlowMod::add(
            0,
            priority,
            Match::new(fields).expect("the fields have their prerequisites"),
            instructions,
        )
    };
    Message::new(xid, Body::FlowMod(fm))
        .encode()
        .expect("a FLOW_MOD of a few fields encodes")
}

/// A BARRIER_REQUEST.
fn barrier(xid: u32) -> Vec<u8> {
    Message::new(xid, Body::BarrierRequest)
        .encode()
        .expect("a barrier encodes")
}

/// The message types read back.
const OFPT_HELLO: u8 = 0;
const OFPT_ERROR: u8 = 1;
const OFPT_BARRIER_REPLY: u8 = 21;

/// A connection to a switch's OpenFlow socket, past the HELLO exchange.
pub struct Conn {
    s: UnixStream,
    buf: Vec<u8>,
    /// OFPT_ERROR messages received.
    pub errors: u64,
    /// The xid of the last BARRIER_REPLY received.
    pub last_barrier: Option<u32>,
}

impl Conn {
    /// Connects, sends HELLO (1.3) and waits for the switch's HELLO.
    pub fn open(path: &Path) -> Result<Conn, String> {
        let s = UnixStream::connect(path)
            .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
        let mut c = Conn {
            s,
            buf: Vec::new(),
            errors: 0,
            last_barrier: None,
        };
        c.send(&[4, OFPT_HELLO, 0, 8, 0, 0, 0, 1])?;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut hello = false;
        while !hello {
            if Instant::now() >= deadline {
                return Err("the switch sent no HELLO within 60 s".into());
            }
            c.read_some(Duration::from_millis(200), |t| hello |= t == OFPT_HELLO)?;
        }
        Ok(c)
    }

    /// Writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s
            .write_all(bytes)
            .map_err(|e| format!("writing to the switch: {e}"))
    }

    /// Reads what arrives within `wait` and hands each whole message's
    /// type to `seen`, counting errors and barrier replies.
    fn read_some(&mut self, wait: Duration, mut seen: impl FnMut(u8)) -> Result<(), String> {
        self.s
            .set_read_timeout(Some(wait))
            .map_err(|e| format!("socket: {e}"))?;
        let mut chunk = [0u8; 65536];
        match self.s.read(&mut chunk) {
            Ok(0) => return Err("the switch closed the connection".into()),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("reading from the switch: {e}")),
        }
        loop {
            if self.buf.len() < 8 {
                return Ok(());
            }
            let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
            if len < 8 {
                return Err(format!("the switch sent a message of length {len}"));
            }
            if self.buf.len() < len {
                return Ok(());
            }
            let t = self.buf[1];
            let xid = u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
            match t {
                OFPT_ERROR => self.errors += 1,
                OFPT_BARRIER_REPLY => self.last_barrier = Some(xid),
                _ => {}
            }
            seen(t);
            self.buf.drain(..len);
        }
    }

    /// Waits up to 60 s for the BARRIER_REPLY of `xid`.
    pub fn wait_barrier(&mut self, xid: u32) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.last_barrier != Some(xid) {
            if Instant::now() >= deadline {
                return Err(format!("no BARRIER_REPLY to xid {xid} within 60 s"));
            }
            self.read_some(Duration::from_millis(100), |_| {})?;
        }
        Ok(())
    }
}

/// Installs [`rate_flows`]`(n, port)` as pipelined FLOW_MODs and one
/// barrier; the seconds from the first byte written to the barrier's
/// reply, and the errors the switch sent.
pub fn pipelined_rate(path: &Path, n: u32, port: u32) -> Result<(f64, u64), String> {
    let mut c = Conn::open(path)?;
    let mut all = Vec::new();
    for i in 0..n {
        let (p, a, dp) = rate_flow(i);
        let fields = vec![
            Oxm::exact(Field::EthType, 0x0800),
            Oxm::exact(Field::IpProto, 6),
            Oxm::exact(Field::Ipv4Dst, u128::from(a)),
            Oxm::exact(Field::TcpDst, u128::from(dp)),
        ];
        all.extend(flow_mod(100 + i, FlowModCommand::Add, p, fields, port));
    }
    let xid = 100 + n;
    all.extend(barrier(xid));
    let t0 = Instant::now();
    // The switch answers nothing before the barrier but errors, which a
    // 64 MiB output bound holds: writing everything first cannot deadlock.
    c.send(&all)?;
    c.wait_barrier(xid)?;
    Ok((t0.elapsed().as_secs_f64(), c.errors))
}

/// What [`churn`] did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Churned {
    /// Flows added.
    pub added: u64,
    /// Flows deleted (strict deletes of the oldest).
    pub deleted: u64,
    /// Seconds from the first tick to the last barrier reply.
    pub secs: f64,
    /// OFPT_ERROR messages received.
    pub errors: u64,
}

/// Flow `i` of the churn: UDP from 10.9.x.y, source port 2000..2099,
/// priority 150, so that it looks like the 1,000 flows but matches none of
/// the tuples sent.
fn churn_fields(i: u32) -> Vec<Oxm> {
    vec![
        Oxm::exact(Field::EthType, 0x0800),
        Oxm::exact(Field::IpProto, 17),
        Oxm::exact(Field::Ipv4Src, u128::from(0x0a09_0000 | (i & 0xffff))),
        Oxm::exact(Field::UdpSrc, u128::from(2000 + i % 100)),
    ]
}

/// First adds `per_sec` flows (and waits for their barrier), then until
/// `stop`, every 10 ms: adds `per_sec / 100` flows, deletes (strict) as
/// many of the oldest, and sends a barrier; so `per_sec` flows added and
/// `per_sec` deleted per second, `per_sec` of them in the table. At the end
/// it deletes what is left and waits for the last barrier. The counts and
/// seconds returned are the loop's, without the first fill.
pub fn churn(path: &Path, per_sec: u32, port: u32, stop: &AtomicBool) -> Result<Churned, String> {
    const TICK: Duration = Duration::from_millis(10);
    let per_tick = (per_sec / 100).max(1);
    let mut c = Conn::open(path)?;
    let mut w = ChurnWriter {
        buf: Vec::new(),
        xid: 1 << 24,
        port,
    };
    let (mut next, mut oldest) = (0u32, 0u32);
    let mut got = Churned::default();
    while next < per_sec {
        w.push(FlowModCommand::Add, next);
        next += 1;
    }
    let xid = w.barrier();
    c.send(&std::mem::take(&mut w.buf))?;
    c.wait_barrier(xid)?;
    let t0 = Instant::now();
    let mut tick = 0u32;
    let mut last = xid;
    // Relaxed: the flag carries no data; the caller joins this thread.
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..per_tick {
            w.push(FlowModCommand::Add, next);
            next += 1;
            w.push(FlowModCommand::DeleteStrict, oldest);
            oldest += 1;
        }
        got.added += u64::from(per_tick);
        got.deleted += u64::from(per_tick);
        last = w.barrier();
        c.send(&std::mem::take(&mut w.buf))?;
        tick += 1;
        let due = t0 + TICK * tick;
        // Reads replies until the next tick is due.
        loop {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            c.read_some(left.max(Duration::from_millis(1)), |_| {})?;
        }
    }
    c.wait_barrier(last)?;
    got.secs = t0.elapsed().as_secs_f64();
    while oldest < next {
        w.push(FlowModCommand::DeleteStrict, oldest);
        oldest += 1;
    }
    let xid = w.barrier();
    c.send(&w.buf)?;
    c.wait_barrier(xid)?;
    got.errors = c.errors;
    Ok(got)
}

/// The churn's messages, each with the next xid.
struct ChurnWriter {
    buf: Vec<u8>,
    xid: u32,
    port: u32,
}

impl ChurnWriter {
    /// Appends an add or a strict delete of churn flow `i`.
    fn push(&mut self, command: FlowModCommand, i: u32) {
        self.buf
            .extend(flow_mod(self.xid, command, 150, churn_fields(i), self.port));
        self.xid += 1;
    }

    /// Appends a barrier; its xid.
    fn barrier(&mut self) -> u32 {
        let xid = self.xid;
        self.buf.extend(barrier(xid));
        self.xid += 1;
        xid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tuples_pcap_holds_each_tuple_once() {
        for size in [64usize, 1514] {
            let p = tuples_pcap(size);
            assert_eq!(&p[..4], &0xa1b2_c3d4u32.to_le_bytes());
            assert_eq!(p.len(), 24 + 1000 * (16 + size));
            let mut seen = std::collections::BTreeSet::new();
            for rec in p[24..].chunks(16 + size) {
                let f = &rec[16..];
                assert_eq!(&rec[8..12], &u32::try_from(size).unwrap().to_le_bytes());
                assert_eq!(&f[12..14], &[0x08, 0x00]);
                assert_eq!(&f[30..34], &[10, 1, 0, 1]);
                // The header's checksum adds up to all ones.
                let mut sum: u32 = f[14..34]
                    .chunks(2)
                    .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                    .sum();
                while sum >> 16 != 0 {
                    sum = (sum & 0xffff) + (sum >> 16);
                }
                assert_eq!(sum, 0xffff);
                assert!((1..=10).contains(&f[29]));
                let sport = u16::from_be_bytes([f[34], f[35]]);
                assert!((1000..1100).contains(&sport));
                assert_eq!(u16::from_be_bytes([f[36], f[37]]), 4321);
                seen.insert((f[29], sport));
            }
            assert_eq!(seen.len(), 1000);
        }
    }

    #[test]
    fn a_thousand_flows_over_ten_masks() {
        let text = thousand_flows("1");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1000);
        let mut masks: Vec<String> = lines
            .iter()
            .map(|l| {
                let names: Vec<&str> = l.split(',').map(|f| f.split('=').next().unwrap()).collect();
                let prefix = l
                    .split('/')
                    .nth(1)
                    .map(|p| p.split(',').next().unwrap().to_owned());
                format!("{names:?} {prefix:?}")
            })
            .collect();
        masks.sort();
        masks.dedup();
        assert_eq!(masks.len(), 10, "{masks:?}");
        // Each tuple has its own flow.
        let mut keys: Vec<(&str, &str)> = lines
            .iter()
            .map(|l| {
                let src = l
                    .split("nw_src=")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap();
                let sp = l
                    .split("tp_src=")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap();
                (src, sp)
            })
            .collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 1000);
        assert!(lines[999].ends_with("actions=output:1"));
    }

    #[test]
    fn rate_flows_are_distinct() {
        let text = rate_flows(50_000, 2);
        let mut l: Vec<&str> = text.lines().collect();
        l.sort_unstable();
        l.dedup();
        assert_eq!(l.len(), 50_000);
        assert_eq!(
            text.lines().next().unwrap(),
            "priority=100,tcp,nw_dst=10.0.0.0,tp_dst=80,actions=output:2"
        );
    }
}
