//! `serve --metrics ADDR`: Prometheus's `/metrics`, a live web view at `/`
//! and the JSON it polls, `/api/state`, on one TCP listener served by one
//! thread, `rs-metrics` (docs/metrics.md). Off unless asked for.
//!
//! What it reads is the control plane's: the registry's listings (the same
//! as `ctl stats`, `port list`, `switch list` and `workers`), copied under
//! the registry's lock ([`snapshot::Snapshot::take`]) at most every
//! [`SNAPSHOT_AGE_MAX`], and rendered after the lock is released. No
//! socket is written under the lock, and the data path is never touched:
//! its counters are atomics the workers already keep, summed by the reader.
//!
//! # DESIGN: our own small HTTP/1.1 server, not tiny_http
//!
//! tiny_http 0.12, read at its source, cannot be bounded from outside: its
//! accept thread gives every connection to a task pool that starts a new
//! thread whenever none is idle (`util/task_pool.rs`: no upper bound), a
//! request line and each header line are read byte by byte into a `Vec`
//! until CRLF with no limit on their length or on the number of headers
//! (`client.rs`, `read_next_line`), and no socket gets a read or write
//! timeout. A peer opening connections, or sending a header slowly or
//! without end, would make the daemon hold threads and memory without
//! bound. Serving `GET` and `HEAD` of a few paths needs little of HTTP, so
//! the server is this module: one thread, non-blocking sockets in one
//! poll(2) set ([`ringswitch_ring::poll::poll_fds`]), and these bounds on
//! what a peer can make the daemon hold:
//!
//! - threads: one, whatever the peers do;
//! - connections: [`MAX_CONNECTIONS`] at once; one more is accepted,
//!   answered 503 and closed at once (so the kernel's backlog never fills
//!   with connections nobody will serve);
//! - a request head: [`http::MAX_HEAD`] bytes and [`http::MAX_HEADERS`]
//!   lines (431), no body (413), GET and HEAD only (405);
//! - time: a connection that has not sent a whole request head within
//!   [`REQUEST_TIMEOUT`] (from its accept, or from the end of its previous
//!   response) is closed, and so is one that has not taken its response
//!   within [`WRITE_TIMEOUT`]: slow clients hold a slot for that long, no
//!   longer;
//! - memory: per connection, at most a request head and one response (a
//!   connection's next request is not read until its response is written);
//! - CPU: at most [`ACCEPTS_PER_SECOND`] connections accepted and
//!   [`REQUESTS_PER_SECOND`] requests answered a second (token buckets):
//!   beyond them, connections wait in the kernel's backlog (and the kernel
//!   drops SYNs past it) and requests in their sockets, so a flood of
//!   either costs the thread a bounded share of a CPU, not the data path
//!   its CPUs; a response is rendered at most once per snapshot and format.

pub mod http;
mod prom;
mod snapshot;
mod web;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringswitch_ring::poll;
use tracing::{debug, info, warn};

use crate::registry::Registry;
use crate::RateLimited;
use http::{Body, Method, Response, Status};
use snapshot::Snapshot;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 32;

/// How long a connection may take to send a whole request head, from its
/// accept or from the end of its previous response (keep-alive).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may take to take a response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The oldest snapshot a response is rendered from: requests closer
/// together share one reading of the registry, so a peer asking without
/// pause takes the registry's lock at most ten times a second.
pub const SNAPSHOT_AGE_MAX: Duration = Duration::from_millis(100);

/// Most connections accepted a second (after a burst of
/// [`ACCEPT_BURST`]). Prometheus keeps its connection; a browser opens a
/// few.
pub const ACCEPTS_PER_SECOND: f64 = 200.0;

/// See [`ACCEPTS_PER_SECOND`].
const ACCEPT_BURST: f64 = 64.0;

/// Most requests answered a second, over all connections (after a burst
/// of [`REQUEST_BURST`]). A scrape or a page's poll is one a second.
pub const REQUESTS_PER_SECOND: f64 = 200.0;

/// See [`REQUESTS_PER_SECOND`].
const REQUEST_BURST: f64 = 64.0;

/// Requests one connection gets answered per round (pipelined ones), for
/// the same reason.
const REQUESTS_PER_ROUND: usize = 8;

/// The longest wait in poll(2): how soon a stop is noticed.
const POLL_MAX: Duration = Duration::from_millis(200);

/// How long accepting pauses when the process is out of descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// A buffer larger than this is given back once its response is written.
const KEEP_BUFFER_MAX: usize = 64 * 1024;

/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 2048;

/// After a refusal, the connection's sending side is shut and what the
/// peer still sends is read and dropped, up to this many bytes for at most
/// [`LINGER_TIME`], before it is closed: closed with unread bytes, the
/// kernel would reset it, and the peer could lose the refusal before
/// reading it (Apache's "lingering close").
const LINGER_BYTES: usize = 64 * 1024;

/// See [`LINGER_BYTES`].
const LINGER_TIME: Duration = Duration::from_secs(2);

/// Errors starting the listener.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("cannot listen for metrics on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The thread could not start.
    #[error("cannot start the metrics thread")]
    Thread(#[source] std::io::Error),
}

/// Binds the listener's address (before anything else starts, so a busy
/// port is a clear error at start).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, MetricsError> {
    let err = |source| MetricsError::Bind { addr, source };
    let l = TcpListener::bind(addr).map_err(err)?;
    l.set_nonblocking(true).map_err(err)?;
    Ok(l)
}

/// The running listener. Dropping it stops its thread (within
/// [`POLL_MAX`]) and closes every connection.
pub struct Metrics {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Metrics {
    /// Serves `listener` (from [`bind`]) on a thread of its own.
    pub fn start(
        listener: TcpListener,
        registry: Arc<Mutex<Registry>>,
    ) -> Result<Metrics, MetricsError> {
        let addr = listener.local_addr().map_err(MetricsError::Thread)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rs-metrics".into())
            .stack_size(256 * 1024)
            .spawn(move || Server::new(listener, registry).run(&s))
            .map_err(MetricsError::Thread)?;
        info!("metrics and web view on http://{addr}/");
        Ok(Metrics {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port chosen when 0 was given).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Metrics {
    fn drop(&mut self) {
        // Release: pairs with the loop's Acquire load.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the listener itself counted (`ringswitch_metrics_http_*`).
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpCounters {
    /// Responses sent, per status ([`Status::index`]).
    pub responses: [u64; Status::ALL.len()],
    /// Connections refused because every slot was taken.
    pub refused: u64,
    /// Connections closed because they were too slow.
    pub timed_out: u64,
    /// Connections open now.
    pub open: u64,
}

/// A token bucket: `rate` tokens a second, at most `burst` kept.
struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    at: Instant,
}

impl Bucket {
    fn new(rate: f64, burst: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            rate,
            burst,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        self.at = now;
    }

    /// Whether a token is there (not taking it).
    fn ready(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= 1.0
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }

    /// How long until a token is there.
    fn wait(&self) -> Duration {
        Duration::from_secs_f64(((1.0 - self.tokens) / self.rate).max(0.0))
    }
}

/// One connection.
struct Conn {
    stream: TcpStream,
    /// Bytes read and not yet parsed (at most a head and one read more).
    input: Vec<u8>,
    /// The response being written, and how much of it is.
    output: Vec<u8>,
    written: usize,
    /// Close once `output` is written.
    close: bool,
    /// It has requests left in `input` to answer without new bytes.
    again: bool,
    /// Shut after a refusal: the bytes it may still read and drop.
    linger: Option<usize>,
    /// When it is closed if it got no further: the end of the wait for a
    /// request head, or for its response to be taken.
    deadline: Instant,
}

impl Conn {
    fn writing(&self) -> bool {
        self.written < self.output.len()
    }

    /// Writes what the socket takes; false: the connection is gone.
    fn flush(&mut self) -> bool {
        while self.writing() {
            match self.stream.write(&self.output[self.written..]) {
                Ok(0) => return false,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads what there is, up to a head's worth; Ok(true): end of file.
    fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; READ_CHUNK];
        while self.input.len() < http::MAX_HEAD {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(true),
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

/// A body rendered once for the requests of one snapshot, with its
/// content type.
type Rendered = (&'static str, Arc<[u8]>);

/// The listener's state, owned by its thread.
struct Server {
    listener: TcpListener,
    registry: Arc<Mutex<Registry>>,
    conns: Vec<Conn>,
    started: Instant,
    snapshot: Option<Arc<Snapshot>>,
    /// Bodies rendered from `snapshot`: text format, OpenMetrics, JSON.
    rendered: [Option<Rendered>; 3],
    http: HttpCounters,
    accepts: Bucket,
    requests: Bucket,
    accept_paused_until: Option<Instant>,
    full_log: RateLimited,
    error_log: RateLimited,
}

impl Server {
    fn new(listener: TcpListener, registry: Arc<Mutex<Registry>>) -> Server {
        Server {
            listener,
            registry,
            conns: Vec::with_capacity(MAX_CONNECTIONS),
            started: Instant::now(),
            snapshot: None,
            rendered: [None, None, None],
            http: HttpCounters::default(),
            accepts: Bucket::new(ACCEPTS_PER_SECOND, ACCEPT_BURST, Instant::now()),
            requests: Bucket::new(REQUESTS_PER_SECOND, REQUEST_BURST, Instant::now()),
            accept_paused_until: None,
            full_log: RateLimited::new(Duration::from_secs(10)),
            error_log: RateLimited::new(Duration::from_secs(10)),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CONNECTIONS + 1);
        // Acquire: pairs with `Metrics::drop`'s store.
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let mut timed_out = 0;
            self.conns.retain(|c| {
                let keep = c.deadline > now;
                timed_out += u64::from(!keep && c.linger.is_none());
                keep
            });
            self.http.timed_out += timed_out;
            let accepting =
                self.accept_paused_until.is_none_or(|t| t <= now) && self.accepts.ready(now);
            pfds.clear();
            pfds.push(poll::watch(
                self.listener.as_raw_fd(),
                if accepting { libc::POLLIN } else { 0 },
            ));
            for c in &self.conns {
                let ev = if c.writing() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                };
                pfds.push(poll::watch(c.stream.as_raw_fd(), ev));
            }
            let mut timeout = POLL_MAX;
            let answer_wait = if self.requests.ready(now) {
                Duration::ZERO
            } else {
                self.requests.wait()
            };
            for c in &self.conns {
                timeout = timeout.min(c.deadline.saturating_duration_since(now));
                if c.again {
                    timeout = timeout.min(answer_wait);
                }
            }
            if let Some(t) = self.accept_paused_until.filter(|t| *t > now) {
                timeout = timeout.min(t - now);
            } else if !accepting {
                timeout = timeout.min(self.accepts.wait());
            }
            if poll::poll_fds(&mut pfds, Some(timeout)).is_err() {
                continue;
            }
            let now = Instant::now();
            // Connections first (in the order of their slots in `pfds`),
            // then the new ones.
            let mut conns = std::mem::take(&mut self.conns);
            let mut k = 0;
            conns.retain_mut(|c| {
                let revents = pfds.get(1 + k).map_or(0, |p| p.revents);
                k += 1;
                if revents == 0 && !c.again {
                    return true;
                }
                self.serve(c, revents, now)
            });
            self.conns = conns;
            if pfds[0].revents != 0 {
                self.accept(now);
            }
            self.http.open = self.conns.len() as u64;
        }
    }

    /// Accepts what is waiting: into a free slot, or answered 503 and
    /// closed.
    fn accept(&mut self, now: Instant) {
        while self.accepts.ready(now) {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    self.accepts.take();
                    if self.conns.len() >= MAX_CONNECTIONS {
                        self.refuse(stream, peer);
                        continue;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.conns.push(Conn {
                        stream,
                        input: Vec::new(),
                        output: Vec::new(),
                        written: 0,
                        close: false,
                        again: false,
                        linger: None,
                        deadline: now + REQUEST_TIMEOUT,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors (or memory): the connection stays
                    // queued and the listener readable; waiting a little
                    // instead of spinning on it.
                    if let Some(held) = self.error_log.ready() {
                        warn!(error = %e, held_back = held, "metrics listener cannot accept; pausing");
                    }
                    self.accept_paused_until = Some(now + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }

    /// Tells a connection beyond [`MAX_CONNECTIONS`] why, if its socket
    /// takes the few bytes at once, and closes it.
    fn refuse(&mut self, mut stream: TcpStream, peer: SocketAddr) {
        self.http.refused += 1;
        self.http.responses[Status::Unavailable.index()] += 1;
        if let Some(held) = self.full_log.ready() {
            warn!(%peer, max = MAX_CONNECTIONS, held_back = held, "metrics listener full: connection refused");
        }
        const FULL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
            Content-Type: text/plain; charset=utf-8\r\nContent-Length: 56\r\n\
            Retry-After: 1\r\nConnection: close\r\n\r\n\
            too many connections to the metrics listener; try again\n";
        let _ = stream.set_nonblocking(true);
        let _ = stream.write(FULL);
    }

    /// Moves one connection on after its events; false: close it.
    fn serve(&mut self, c: &mut Conn, revents: i16, now: Instant) -> bool {
        c.again = false;
        if let Some(left) = &mut c.linger {
            let mut chunk = [0u8; READ_CHUNK];
            loop {
                match c.stream.read(&mut chunk) {
                    Ok(0) => return false,
                    Ok(n) if n >= *left => return false,
                    Ok(n) => *left -= n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
        }
        if c.writing() {
            if let Some(keep) = self.send(c, now) {
                return keep;
            }
        }
        let mut eof = false;
        if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            match c.fill() {
                Ok(e) => eof = e,
                Err(_) => return false,
            }
        }
        for _ in 0..REQUESTS_PER_ROUND {
            let parsed = http::parse(&c.input);
            if matches!(parsed, Ok(None)) {
                return !eof;
            }
            if !self.requests.ready(now) {
                // Answered when the budget allows (the loop waits for it).
                c.again = true;
                return true;
            }
            self.requests.take();
            match parsed {
                Ok(None) => return !eof,
                Ok(Some((req, n))) => {
                    c.input.drain(..n);
                    let resp = self.respond(&req);
                    self.http.responses[resp.status.index()] += 1;
                    c.close = !req.keep_alive || eof;
                    resp.write(req.method == Method::Head, !c.close, &mut c.output);
                }
                Err(e) => {
                    if let Some(held) = self.error_log.ready() {
                        debug!(error = %e, held_back = held, "metrics listener: request refused");
                    }
                    let resp = Response::error(e.status(), &e.to_string());
                    self.http.responses[resp.status.index()] += 1;
                    resp.write(false, false, &mut c.output);
                    c.input = Vec::new();
                    c.close = true;
                    c.linger = Some(LINGER_BYTES);
                }
            }
            c.deadline = now + WRITE_TIMEOUT;
            if let Some(keep) = self.send(c, now) {
                return keep;
            }
        }
        // More requests may wait in `input`: the next round serves them.
        c.again = !c.input.is_empty();
        true
    }

    /// Writes what the socket takes of a response: `Some(keep)` when the
    /// caller stops here (the connection is kept, waiting to write more;
    /// or it is gone), `None` when the response went whole and the
    /// connection waits for its next request.
    fn send(&self, c: &mut Conn, now: Instant) -> Option<bool> {
        if !c.flush() {
            return Some(false);
        }
        if c.writing() {
            return Some(true);
        }
        if !self.written(c, now) {
            return Some(false);
        }
        None
    }

    /// A response was written whole: false if the connection closes now,
    /// else it waits for its next request.
    fn written(&self, c: &mut Conn, now: Instant) -> bool {
        if c.close {
            if c.linger.is_some() && c.stream.shutdown(std::net::Shutdown::Write).is_ok() {
                c.output = Vec::new();
                c.written = 0;
                c.deadline = now + LINGER_TIME;
                return true;
            }
            return false;
        }
        if c.output.capacity() > KEEP_BUFFER_MAX {
            c.output = Vec::new();
        } else {
            c.output.clear();
        }
        c.written = 0;
        c.deadline = now + REQUEST_TIMEOUT;
        true
    }

    /// The snapshot to render from: a recent one, or a new reading.
    fn snapshot(&mut self) -> Arc<Snapshot> {
        match &self.snapshot {
            Some(s) if s.taken.elapsed() < SNAPSHOT_AGE_MAX => s.clone(),
            _ => {
                let s = Arc::new(Snapshot::take(&self.registry, self.started));
                self.snapshot = Some(s.clone());
                s
            }
        }
    }

    /// A body rendered from the current snapshot (`k`: 0 text format, 1
    /// OpenMetrics, 2 JSON), rendered once per snapshot.
    fn rendered(&mut self, k: usize) -> Rendered {
        let fresh = self
            .snapshot
            .as_ref()
            .is_some_and(|s| s.taken.elapsed() < SNAPSHOT_AGE_MAX);
        if let (true, Some(r)) = (fresh, &self.rendered[k]) {
            return r.clone();
        }
        if !fresh {
            self.rendered = [None, None, None];
        }
        let snap = self.snapshot();
        let r: Rendered = match k {
            0 | 1 => {
                let (ty, text) = prom::render(snap, self.http, k == 1);
                (ty, text.into_bytes().into())
            }
            _ => (
                "application/json",
                serde_json::to_vec(&*snap).unwrap_or_default().into(),
            ),
        };
        self.rendered[k] = Some(r.clone());
        r
    }

    fn respond(&mut self, req: &http::Request) -> Response {
        let (ty, body) = match req.path.as_str() {
            "/metrics" => self.rendered(usize::from(req.openmetrics)),
            "/api/state" => self.rendered(2),
            path => {
                return match web::asset(path) {
                    Some((ty, bytes)) => Response::ok(ty, Body::Static(bytes)),
                    None => Response::error(
                        Status::NotFound,
                        "not found: this listener serves /, /metrics and /api/state",
                    ),
                }
            }
        };
        Response::ok(ty, Body::Shared(body))
    }
}
