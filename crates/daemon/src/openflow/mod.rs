//! A switch's OpenFlow 1.3 connections: management clients (`ovs-ofctl`)
//! on the address it listens on, and the controller it connects to.
//!
//! Each switch that runs OpenFlow has one thread, which owns its listener,
//! its connections and its controller connection, and never blocks on a
//! peer: sockets are non-blocking, output is buffered per connection up to
//! [`conn::MAX_OUTPUT`] (a peer that does not read is disconnected, counted
//! and logged), at most [`MAX_CONNECTIONS`] connections are served at once,
//! a peer that sends no HELLO within [`conn::HELLO_WAIT`] is disconnected,
//! and one poll set holds them with the doorbell of the switch's PACKET_IN
//! queue. Every second the thread expires flows (FLOW_REMOVED as the flows
//! asked), compares the switch's ports with what it last told its peers
//! (PORT_STATUS), and reconnects to the controller when it is due
//! (exponential backoff up to [`BACKOFF_MAX`]).
//!
//! What a message does is in `answer`; the protocol itself (framing,
//! HELLO, ECHO, refusals) is `ringswitch_openflow::Session`'s.

mod answer;
mod conn;
mod ports;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringswitch_control::proto::OpenFlowSpec;
use ringswitch_openflow::Event;
use ringswitch_ring::poll;
use ringswitch_switch::flows::Flows;
use ringswitch_switch::Switch;
use tracing::{debug, info, warn};

use conn::{Closed, Conn, Stream};

/// Most OpenFlow connections one switch serves at once (ovs-ofctl holds
/// two); more are accepted and closed at once.
pub const MAX_CONNECTIONS: usize = 16;
/// The first pause before reconnecting to a controller.
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// The longest pause before reconnecting to a controller.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a connection attempt to a controller may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// Where a switch listens, or which controller it connects to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `unix:PATH`.
    Unix(PathBuf),
    /// `ptcp:PORT[:ADDR]` (loopback unless given) or `tcp:HOST:PORT`.
    Tcp(SocketAddr),
}

/// Why a target does not parse.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not one of the forms.
    #[error("{0:?} is not an OpenFlow address: use {1}")]
    Form(String, &'static str),
    /// The host does not resolve.
    #[error("{0:?} does not name a host this machine can resolve")]
    Host(String),
}

/// Parses `--openflow-listen`: `unix:PATH`, `ptcp:PORT` or
/// `ptcp:PORT:ADDR`.
pub fn parse_listen(s: &str) -> Result<Target, TargetError> {
    const FORMS: &str = "unix:PATH, ptcp:PORT or ptcp:PORT:ADDRESS";
    let form = || TargetError::Form(s.to_string(), FORMS);
    if let Some(p) = s.strip_prefix("unix:") {
        if p.is_empty() {
            return Err(form());
        }
        return Ok(Target::Unix(PathBuf::from(p)));
    }
    let rest = s.strip_prefix("ptcp:").ok_or_else(form)?;
    let (port, addr) = match rest.split_once(':') {
        Some((p, a)) => (p, a.parse::<IpAddr>().map_err(|_| form())?),
        None => (rest, IpAddr::V4(Ipv4Addr::LOCALHOST)),
    };
    let port: u16 = port.parse().map_err(|_| form())?;
    Ok(Target::Tcp(SocketAddr::new(addr, port)))
}

/// Parses `--controller`: `tcp:HOST:PORT` (or `unix:PATH`).
pub fn parse_controller(s: &str) -> Result<Target, TargetError> {
    const FORMS: &str = "tcp:HOST:PORT or unix:PATH";
    let form = || TargetError::Form(s.to_string(), FORMS);
    if let Some(p) = s.strip_prefix("unix:") {
        if p.is_empty() {
            return Err(form());
        }
        return Ok(Target::Unix(PathBuf::from(p)));
    }
    let rest = s.strip_prefix("tcp:").ok_or_else(form)?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(form)?;
    let port: u16 = port.parse().map_err(|_| form())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|_| TargetError::Host(host.to_string()))?
        .next()
        .ok_or_else(|| TargetError::Host(host.to_string()))?;
    Ok(Target::Tcp(addr))
}

/// A listening socket.
enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

impl Listener {
    fn bind(t: &Target) -> std::io::Result<Listener> {
        match t {
            Target::Unix(p) => {
                let l = crate::listen::bind(p)
                    .map_err(|e| std::io::Error::other(ringswitch_control::error_chain(&e)))?;
                Ok(Listener::Unix(l, p.clone()))
            }
            Target::Tcp(a) => {
                let l = TcpListener::bind(a)?;
                l.set_nonblocking(true)?;
                Ok(Listener::Tcp(l))
            }
        }
    }

    fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Listener::Unix(l, _) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }

    fn accept(&self) -> std::io::Result<Stream> {
        match self {
            Listener::Unix(l, _) => {
                let (s, _) = l.accept()?;
                s.set_nonblocking(true)?;
                Ok(Stream::Unix(s))
            }
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                s.set_nonblocking(true)?;
                let _ = s.set_nodelay(true);
                Ok(Stream::Tcp(s))
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            crate::listen::unlink_if_ours(p);
        }
    }
}

/// What the daemon's other threads see of a switch's OpenFlow side.
#[derive(Default)]
pub struct Status {
    /// Connections open now.
    pub connections: AtomicU32,
    /// Connections closed because their peer did not read.
    pub closed_not_reading: AtomicU64,
    /// Connections refused because [`MAX_CONNECTIONS`] were open.
    pub refused: AtomicU64,
}

/// The datapath id of a switch: the low 48 bits of the FNV-1a hash of its
/// name, so that it stays the same across restarts.
pub fn datapath_id(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h & 0xffff_ffff_ffff
}

/// A switch's OpenFlow thread; dropping it stops the thread and closes
/// its connections.
pub struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    status: Arc<Status>,
}

/// Why a switch's OpenFlow side cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A bad address.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The listening socket.
    #[error("cannot listen for OpenFlow connections on {0}")]
    Listen(String, #[source] std::io::Error),
    /// The thread.
    #[error("cannot start the OpenFlow thread")]
    Thread(#[source] std::io::Error),
}

impl Server {
    /// Starts serving `spec` for `switch`, whose tables are `flows` (their
    /// clock counts from `epoch`).
    pub fn start(
        switch: Arc<Switch>,
        flows: Arc<Flows>,
        epoch: Instant,
        spec: &OpenFlowSpec,
    ) -> Result<Server, StartError> {
        let listener = match &spec.listen {
            Some(s) => {
                let t = parse_listen(s)?;
                Some(Listener::bind(&t).map_err(|e| StartError::Listen(s.clone(), e))?)
            }
            None => None,
        };
        let controller = spec
            .controller
            .as_deref()
            .map(parse_controller)
            .transpose()?;
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Status::default());
        let name = switch.name().to_string();
        let mut lp = Loop {
            ctx: answer::Ctx::new(switch, flows, epoch),
            listener,
            controller,
            conns: Vec::new(),
            stop: stop.clone(),
            status: status.clone(),
            backoff: BACKOFF_MIN,
            connect_at: Instant::now(),
            connect_failures: 0,
        };
        let thread = std::thread::Builder::new()
            .name(format!("rs-of-{name}"))
            .stack_size(256 * 1024)
            .spawn(move || lp.run())
            .map_err(StartError::Thread)?;
        Ok(Server {
            stop,
            thread: Some(thread),
            status,
        })
    }

    /// What it does.
    pub fn status(&self) -> &Status {
        &self.status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Release: pairs with the Acquire in the loop.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Loop {
    ctx: answer::Ctx,
    listener: Option<Listener>,
    controller: Option<Target>,
    conns: Vec<Conn>,
    stop: Arc<AtomicBool>,
    status: Arc<Status>,
    backoff: Duration,
    connect_at: Instant,
    connect_failures: u64,
}

impl Loop {
    fn run(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        let mut pfds: Vec<libc::pollfd> = Vec::new();
        let mut tick = Instant::now();
        let mut refuse_log = crate::RateLimited::new(Duration::from_secs(10));
        // Acquire: pairs with the Release in `Server::drop`.
        while !self.stop.load(Ordering::Acquire) {
            pfds.clear();
            let lfd = self.listener.as_ref().map_or(-1, Listener::fd);
            pfds.push(poll::watch(lfd, libc::POLLIN));
            pfds.push(poll::watch(self.ctx.flows.wake_fd(), libc::POLLIN));
            for c in &self.conns {
                let mut ev = libc::POLLIN;
                if c.wants_write() {
                    ev |= libc::POLLOUT;
                }
                pfds.push(poll::watch(c.stream.fd(), ev));
            }
            let timeout = Duration::from_millis(200);
            let n = poll::poll_fds(&mut pfds, Some(timeout)).unwrap_or(0);
            if n > 0 {
                for i in (0..self.conns.len()).rev() {
                    let re = pfds[i + 2].revents;
                    if re == 0 {
                        continue;
                    }
                    let res = if re & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        self.serve(i, &mut buf)
                    } else {
                        Ok(())
                    };
                    let res = res.and_then(|()| self.conns[i].flush());
                    if let Err(why) = res {
                        self.close(i, why);
                    }
                }
                if pfds[1].revents != 0 {
                    self.packet_ins();
                }
                if pfds[0].revents & libc::POLLIN != 0 {
                    self.accept(&mut refuse_log);
                }
            }
            if tick.elapsed() >= Duration::from_secs(1) {
                tick = Instant::now();
                for i in (0..self.conns.len()).rev() {
                    let c = &self.conns[i];
                    if !c.session.is_open() && c.since.elapsed() > conn::HELLO_WAIT {
                        self.close(i, Closed::Silent);
                    }
                }
                let removed = self.ctx.expire();
                self.broadcast_removed(&removed);
                let changes = self.ctx.port_changes();
                for m in &changes {
                    for c in self.conns.iter_mut().filter(|c| c.session.is_open()) {
                        let xid = c.session.next_xid();
                        c.send(&ringswitch_openflow::Message::new(xid, m.clone()));
                    }
                }
                self.flush_all();
            }
            self.connect();
        }
        self.ctx.flows.set_connected(false);
    }

    /// Reads from connection `i` and answers what it asked.
    fn serve(&mut self, i: usize, buf: &mut [u8]) -> Result<(), Closed> {
        let read = self.conns[i].read(buf);
        let mut removed = Vec::new();
        let mut new_master = false;
        while let Some(ev) = self.conns[i].session.poll_event() {
            match ev {
                Event::Connected => {
                    if self.conns[i].controller {
                        info!(switch = %self.ctx.name, "connected to the OpenFlow controller");
                        self.backoff = BACKOFF_MIN;
                        self.connect_failures = 0;
                    }
                }
                Event::Message(r) => {
                    let fx = self.ctx.answer(&mut self.conns[i], r);
                    removed.extend(fx.removed);
                    new_master |= fx.new_master;
                }
                Event::Refused(_) => {}
                Event::Closed(e) => {
                    warn!(switch = %self.ctx.name, error = %e, "closing an OpenFlow connection");
                    self.conns[i].closing = true;
                }
            }
        }
        self.conns[i].collect();
        if new_master {
            for (j, c) in self.conns.iter_mut().enumerate() {
                if j != i && c.role == ringswitch_openflow::consts::OFPCR_ROLE_MASTER {
                    c.role = ringswitch_openflow::consts::OFPCR_ROLE_SLAVE;
                }
            }
        }
        self.broadcast_removed(&removed);
        self.update_connected();
        read
    }

    fn broadcast_removed(&mut self, removed: &[ringswitch_flow::Removed]) {
        for r in removed.iter().filter(|r| r.send_flow_removed) {
            for c in self.conns.iter_mut() {
                if c.session.is_open() && c.role != ringswitch_openflow::consts::OFPCR_ROLE_SLAVE {
                    let xid = c.session.next_xid();
                    c.send(&ringswitch_openflow::Message::new(
                        xid,
                        ringswitch_openflow::Body::FlowRemoved(r.message.clone()),
                    ));
                }
            }
        }
    }

    fn packet_ins(&mut self) {
        let msgs = self.ctx.packet_ins();
        if msgs.is_empty() {
            return;
        }
        for c in self.conns.iter_mut() {
            if c.controller
                && c.session.is_open()
                && c.role != ringswitch_openflow::consts::OFPCR_ROLE_SLAVE
            {
                for m in &msgs {
                    let xid = c.session.next_xid();
                    c.send(&ringswitch_openflow::Message::new(xid, m.clone()));
                }
            }
        }
        self.flush_all();
    }

    fn flush_all(&mut self) {
        for i in (0..self.conns.len()).rev() {
            if let Err(why) = self.conns[i].flush() {
                self.close(i, why);
            }
        }
    }

    fn close(&mut self, i: usize, why: Closed) {
        let c = self.conns.swap_remove(i);
        if let Closed::Silent = why {
            debug!(switch = %self.ctx.name, "closed an OpenFlow connection that sent no HELLO in time");
        }
        if let Closed::NotReading = why {
            // Relaxed: a statistic.
            self.status
                .closed_not_reading
                .fetch_add(1, Ordering::Relaxed);
            warn!(switch = %self.ctx.name, pending = c.pending(), "closed an OpenFlow connection whose peer does not read its replies");
        }
        if c.controller {
            warn!(switch = %self.ctx.name, "the OpenFlow controller connection closed");
            self.connect_at = Instant::now() + self.backoff;
        }
        self.update_connected();
    }

    fn update_connected(&self) {
        let n = self.conns.len();
        // Relaxed: a statistic.
        self.status
            .connections
            .store(u32::try_from(n).unwrap_or(u32::MAX), Ordering::Relaxed);
        let controller = self
            .conns
            .iter()
            .any(|c| c.controller && c.session.is_open());
        self.ctx.flows.set_connected(controller);
    }

    fn accept(&mut self, refuse_log: &mut crate::RateLimited) {
        let Some(l) = &self.listener else { return };
        for _ in 0..MAX_CONNECTIONS {
            let s = match l.accept() {
                Ok(s) => s,
                Err(_) => break,
            };
            if self.conns.len() >= MAX_CONNECTIONS {
                // Relaxed: a statistic.
                self.status.refused.fetch_add(1, Ordering::Relaxed);
                if let Some(held) = refuse_log.ready() {
                    warn!(switch = %self.ctx.name, max = MAX_CONNECTIONS, held_back = held, "refused an OpenFlow connection: the switch serves the most it serves");
                }
                drop(s);
                continue;
            }
            let mut c = Conn::new(s, false);
            if c.flush().is_ok() {
                self.conns.push(c);
            }
        }
        self.update_connected();
    }

    /// Connects to the controller when there is none and it is time.
    fn connect(&mut self) {
        let Some(t) = &self.controller else { return };
        if self.conns.iter().any(|c| c.controller) || Instant::now() < self.connect_at {
            return;
        }
        let res = match t {
            Target::Tcp(a) => TcpStream::connect_timeout(a, CONNECT_TIMEOUT).and_then(|s| {
                s.set_nonblocking(true)?;
                let _ = s.set_nodelay(true);
                Ok(Stream::Tcp(s))
            }),
            Target::Unix(p) => std::os::unix::net::UnixStream::connect(p).and_then(|s| {
                s.set_nonblocking(true)?;
                Ok(Stream::Unix(s))
            }),
        };
        match res {
            Ok(s) => {
                let mut c = Conn::new(s, true);
                if c.flush().is_ok() {
                    self.conns.push(c);
                }
                self.connect_at = Instant::now() + self.backoff;
            }
            Err(e) => {
                self.connect_failures += 1;
                // Logged at the 1st, 2nd, 4th, 8th... failure: rate-limited
                // however long the controller stays away.
                if self.connect_failures.is_power_of_two() {
                    warn!(switch = %self.ctx.name, controller = ?t, error = %e, failures = self.connect_failures, retry_s = self.backoff.as_secs(), "cannot connect to the OpenFlow controller");
                }
                self.connect_at = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_refuse_with_the_forms() {
        assert_eq!(
            parse_listen("unix:/run/of.sock").unwrap(),
            Target::Unix("/run/of.sock".into())
        );
        assert_eq!(
            parse_listen("ptcp:6653").unwrap(),
            Target::Tcp("127.0.0.1:6653".parse().unwrap())
        );
        assert_eq!(
            parse_listen("ptcp:6653:0.0.0.0").unwrap(),
            Target::Tcp("0.0.0.0:6653".parse().unwrap())
        );
        assert!(parse_listen("tcp:6653").is_err());
        assert!(parse_listen("ptcp:x").is_err());
        assert!(parse_listen("unix:").is_err());
        assert_eq!(
            parse_controller("tcp:127.0.0.1:6653").unwrap(),
            Target::Tcp("127.0.0.1:6653".parse().unwrap())
        );
        assert!(parse_controller("tcp:127.0.0.1").is_err());
        assert!(parse_controller("ptcp:6653").is_err());
    }

    #[test]
    fn datapath_ids_are_48_bits_and_differ_by_name() {
        assert!(datapath_id("vale0") < 1 << 48);
        assert_ne!(datapath_id("vale0"), datapath_id("vale1"));
    }
}
