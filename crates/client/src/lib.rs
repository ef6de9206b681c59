//! The library applications link: open a port by its netmap name, fill and
//! drain its rings, sync and wait.
//!
//! ```no_run
//! let mut port = ringswitch_client::Port::open("vale0:a")?;
//! let mut tx = port.tx(0);
//! let n = tx.space().min(64);
//! for k in 0..n {
//!     let mut slot = tx.slot(k).unwrap();
//!     slot.write_at(0, &[0xff; 60]);
//!     slot.set_len(60);
//! }
//! tx.advance(n);
//! tx.sync()?;
//! # Ok::<(), ringswitch_client::ClientError>(())
//! ```
//!
//! A slot cannot outlive the sync that hands it back to the port side: the
//! borrow checker refuses this.
//!
//! ```compile_fail
//! # fn f(port: &mut ringswitch_client::Port) -> Result<(), ringswitch_client::ClientError> {
//! let mut tx = port.tx(0);
//! let mut slot = tx.slot(0).unwrap();
//! tx.sync()?; // the slot belongs to the port side from here on
//! slot.set_len(60);
//! # Ok(()) }
//! ```
//!
//! A switch port's rings are served by the daemon. A pipe end's TX sync
//! moves packets into the peer's RX ring itself, by swapping buffer
//! indexes; no daemon thread is involved.
#![warn(missing_docs)]

pub mod bridge;
mod doorbell;
pub mod passthrough;
mod pipe;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringswitch_control::{CallError, Connection, OpenReply, PortKind, Request};
use ringswitch_ring::poll::{self, Epoll};
use ringswitch_ring::{AdaptiveWait, AppRing, Dir, EventFd, Geometry, Region, RegionError, Slot};

use doorbell::Doorbell;

pub use ringswitch_control::default_socket_path;
pub use ringswitch_ring as ring;

/// Errors from the client library.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon could not be reached or refused.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The shared memory handed over is unusable.
    #[error("the port's shared memory is unusable")]
    Region(#[from] RegionError),
    /// The daemon's reply did not match what it handed over.
    #[error("the daemon's open reply is inconsistent: {0}")]
    Reply(&'static str),
    /// A system call failed.
    #[error("waiting on the port failed")]
    Io(#[from] std::io::Error),
    /// A ring index past the port's rings.
    #[error("ring {0} does not exist on this port")]
    NoRing(usize),
    /// The daemon serving a reconnecting port went away and no new one
    /// opened the port again in time.
    #[error("the daemon went away and the port could not be opened again within {} s: {last}", .waited.as_secs())]
    DaemonGone {
        /// How long it tried.
        waited: Duration,
        /// Why the last attempt failed.
        last: Box<ClientError>,
    },
}

impl ClientError {
    /// The errno that describes this error, for C callers: ECONNREFUSED
    /// when no daemon listens, the daemon's error class otherwise (EINVAL,
    /// ENOENT, EEXIST, EBUSY, ...), the OS error for I/O failures.
    pub fn errno(&self) -> i32 {
        use ringswitch_control::ErrorCode;
        match self {
            ClientError::Call(CallError::NoDaemon { .. }) => libc::ECONNREFUSED,
            ClientError::Call(CallError::Untrusted { .. }) => libc::EACCES,
            ClientError::Call(CallError::Daemon(r)) => match r.code {
                ErrorCode::BadName | ErrorCode::Geometry | ErrorCode::BadRequest => libc::EINVAL,
                ErrorCode::NotFound => libc::ENOENT,
                ErrorCode::Exists => libc::EEXIST,
                ErrorCode::Busy => libc::EBUSY,
                ErrorCode::Limit => libc::ENOMEM,
                ErrorCode::Unsupported => libc::EOPNOTSUPP,
                ErrorCode::Permission => libc::EPERM,
                ErrorCode::Denied => libc::EACCES,
                ErrorCode::Internal => libc::EIO,
            },
            ClientError::Call(CallError::HungUp) => libc::ECONNRESET,
            ClientError::Call(CallError::BadReply(_) | CallError::BadPage)
            | ClientError::Reply(_) => libc::EPROTO,
            ClientError::Call(CallError::ListingTooLarge) => libc::E2BIG,
            ClientError::Call(CallError::Io(e)) | ClientError::Io(e) => {
                e.raw_os_error().unwrap_or(libc::EIO)
            }
            ClientError::NoRing(_) => libc::EINVAL,
            ClientError::DaemonGone { .. } => libc::ECONNRESET,
            ClientError::Region(_) => libc::EIO,
        }
    }
}

enum Backend {
    Switch { kick: Doorbell },
    Pipe(pipe::PipeEnd),
}

/// What an open asks for beyond the name (see `Request::Open`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Room for this many pipes in the memory of the switch port opened
    /// (at most 16).
    pub pipes: u32,
    /// A pipe end made in the memory of the switch port its name is a
    /// pipe of (`vale0:a{1` in `vale0:a`'s), so buffers move between them
    /// by index.
    pub in_port_memory: bool,
}

/// How a port waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Spin for a window that adapts to what pays, then sleep on the
    /// interrupt eventfd (default; see [`ringswitch_ring::AdaptiveWait`]).
    #[default]
    Adaptive,
    /// Sleep on the interrupt eventfd at once: never spin.
    Blocking,
    /// Spin on the CSB instead of sleeping.
    Busy,
}

/// Counters kept by the client side.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientStats {
    /// Kicks sent to the port side.
    pub kicks: u64,
    /// Sleeps on the interrupt eventfd.
    pub sleeps: u64,
    /// Adaptive waits that found work while spinning, before sleeping.
    pub spins_won: u64,
    /// Adaptive spins cut short because another thread needed the CPU.
    pub spins_gave_way: u64,
    /// The adaptive wait's longest spin as it stands: this thread's
    /// wake-up cost plus what waking it costs the port side (see
    /// [`ringswitch_ring::AdaptiveWait::cap`]).
    pub spin_cap: Duration,
    /// Values from the port side that were refused as invalid.
    pub bad_values: u64,
    /// Times the port was opened again on a new daemon (see
    /// [`Port::set_reconnect`]).
    pub reconnects: u64,
}

/// An open port.
pub struct Port {
    // Keeps the port open: the daemon releases it when this closes (shared
    // by the pieces of a split port). None for a passthrough port in a VM.
    _conn: Option<Arc<Connection>>,
    info: OpenReply,
    region: Arc<Region>,
    tx: Vec<AppRing>,
    rx: Vec<AppRing>,
    /// One interrupt eventfd per ring pair.
    irqs: Vec<EventFd>,
    /// An epoll set of all of `irqs`, when there is more than one: the one
    /// descriptor `poll_fd` gives out.
    poll_set: Option<Epoll>,
    backend: Backend,
    mode: WaitMode,
    /// The adaptive spin's state ([`WaitMode::Adaptive`]).
    adapt: AdaptiveWait,
    stats: ClientStats,
    /// Where the port was opened and by which name, to open it again on a
    /// new daemon (see [`Port::set_reconnect`]); None for a passthrough
    /// port, a port opened on a connection the caller gave, and the pieces
    /// of a split port.
    origin: Option<(PathBuf, String, OpenOptions)>,
    /// Open the port again when its daemon goes ([`Port::set_reconnect`]).
    reconnect: bool,
    /// The daemon's connection hung up (seen once).
    daemon_gone: bool,
    /// Asked between reconnection attempts whether to stop trying.
    give_up: Option<fn() -> bool>,
}

/// epoll data of the daemon's connection in a reconnecting port's poll set.
const DAEMON_KEY: u64 = u64::MAX;

/// How long a reconnecting port waits for a daemon's answer to its open.
const RECONNECT_REPLY_WAIT: Duration = Duration::from_secs(5);

/// How long a port that reconnects waits for a new daemon.
pub const RECONNECT_WAIT: Duration = Duration::from_secs(30);
/// Pause between two attempts to reach the new daemon.
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);
/// Busy waits look at the daemon's connection once every this many spins.
const BUSY_CHECK_SPINS: u32 = 1 << 16;

fn next_fd(fds: &mut std::vec::IntoIter<OwnedFd>) -> Result<OwnedFd, ClientError> {
    fds.next()
        .ok_or(ClientError::Reply("descriptors are missing"))
}

impl Port {
    /// Opens `name` on the daemon at the default socket.
    pub fn open(name: &str) -> Result<Port, ClientError> {
        Self::open_at(&default_socket_path(), name)
    }

    /// Opens `name` on the daemon listening at `socket`. With no daemon
    /// there, inside a VM whose port is passed through (a `/dev/rsptN`
    /// device holds a region of that name), opens it on the device.
    pub fn open_at(socket: &Path, name: &str) -> Result<Port, ClientError> {
        Self::open_at_with(socket, name, OpenOptions::default())
    }

    /// [`Port::open_at`] with `opts`.
    pub fn open_at_with(socket: &Path, name: &str, opts: OpenOptions) -> Result<Port, ClientError> {
        match Connection::connect(socket) {
            Ok(conn) => Self::open_on_socket_with(conn, socket, name, opts),
            Err(e @ CallError::NoDaemon { .. }) => match passthrough::find(name) {
                Some((dev, region, end)) => Self::open_passthrough(dev, region, end, name),
                None => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Opens end `end` of `region`, passed through on `dev`.
    fn open_passthrough(
        dev: Arc<passthrough::Device>,
        region: Region,
        end: usize,
        name: &str,
    ) -> Result<Port, ClientError> {
        let region = Arc::new(region);
        let l = *region.layout();
        let g = l.end_geometry(end);
        let pairs = g.tx_rings.max(g.rx_rings);
        if dev.info().vectors < pairs {
            return Err(ClientError::Reply(
                "the passthrough device has fewer interrupt vectors than the port has ring pairs (start QEMU with vectors= the ring pairs)",
            ));
        }
        let (tx, rx) = app_rings(&region, end, g);
        let irqs = (0..pairs)
            .map(|_| dev.interrupts())
            .collect::<Result<Vec<_>, _>>()?;
        let backend = if l.ends == 1 {
            // The daemon is peer 0 (peer 1 on a migratable port); vector 0
            // of it is the port's kick.
            Backend::Switch {
                kick: Doorbell::Device(dev.clone(), dev.host_peer() << 16),
            }
        } else {
            // The other end is peer 1 + its end; its vector i raises its
            // ring pair i.
            let peer = (2 - end as u32) << 16;
            let doorbells = (0..pairs)
                .map(|i| Doorbell::Device(dev.clone(), peer | i))
                .collect();
            Backend::Pipe(pipe::PipeEnd::new(region.clone(), end, doorbells))
        };
        let info = OpenReply {
            handle: 0,
            name: ringswitch_control::name::base_name(name).to_string(),
            kind: if l.ends == 1 {
                PortKind::Vale
            } else {
                PortKind::Pipe
            },
            end: end as u32,
            geometry: g,
            region_size: region.len() as u64,
            nifp_offset: l.nifp_at(end) as u64,
        };
        Self::assemble(None, info, region, (tx, rx), irqs, backend)
    }

    /// Opens `name` over an existing connection (which the port then owns).
    pub fn open_on(conn: Connection, name: &str) -> Result<Port, ClientError> {
        Self::open_in(conn, name, OpenOptions::default(), None)
    }

    /// Opens `name` over `conn`, a connection to the daemon at `socket`,
    /// where the port can open itself again (see [`Port::set_reconnect`]).
    pub fn open_on_socket(
        conn: Connection,
        socket: &Path,
        name: &str,
    ) -> Result<Port, ClientError> {
        Self::open_on_socket_with(conn, socket, name, OpenOptions::default())
    }

    /// [`Port::open_on_socket`] with `opts`.
    pub fn open_on_socket_with(
        conn: Connection,
        socket: &Path,
        name: &str,
        opts: OpenOptions,
    ) -> Result<Port, ClientError> {
        let mut p = Self::open_in(conn, name, opts, None)?;
        p.origin = Some((socket.to_path_buf(), name.to_string(), opts));
        Ok(p)
    }

    /// Opens `name` over `conn`; with `place`, the region of a port this
    /// one replaces, its memory goes at the same addresses when the layout
    /// is the same (see [`Region::move_onto`]).
    fn open_in(
        mut conn: Connection,
        name: &str,
        opts: OpenOptions,
        place: Option<Arc<Region>>,
    ) -> Result<Port, ClientError> {
        let (info, fds): (OpenReply, _) = conn.call_as(&Request::Open {
            name: name.to_string(),
            pipes: opts.pipes,
            in_port_memory: opts.in_port_memory,
        })?;
        let g = info.geometry;
        let pairs = g.tx_rings.max(g.rx_rings) as usize;
        let expected = match info.kind {
            PortKind::Vale => 2 + pairs,
            PortKind::Pipe => 1 + 2 * pairs,
            PortKind::VhostUser | PortKind::Nic | PortKind::Host => {
                return Err(ClientError::Reply(
                    "the daemon opened a VM or interface port as a netmap port",
                ))
            }
        };
        if fds.len() != expected {
            return Err(ClientError::Reply(
                "the open reply does not carry one memfd and an eventfd per ring pair",
            ));
        }
        let mut fds = fds.into_iter();
        let mut region = Region::open(next_fd(&mut fds)?)?;
        if let Some(old) = place {
            // Checked against the reply below, as any region.
            region = region.move_onto(old)?;
        }
        let region = Arc::new(region);
        let end = info.end as usize;
        let l = *region.layout();
        // A pipe of its own (two ends), or a pipe in a switch port's
        // memory (any end but the port's); a switch port has its end 0.
        let ends_ok = match info.kind {
            PortKind::Pipe if l.pipes == 0 => l.ends == 2,
            PortKind::Pipe => end > 0,
            _ => end == 0 && (l.ends == 1 || l.pipes > 0),
        };
        if !ends_ok || end >= l.ends as usize {
            return Err(ClientError::Reply(
                "the region does not have the announced ends",
            ));
        }
        if l.end_geometry(end) != info.geometry || l.size as u64 != info.region_size {
            return Err(ClientError::Reply(
                "the region does not have the announced geometry",
            ));
        }
        if info.kind == PortKind::Pipe && l.pipes > 0 {
            pipe::note_in_port(&region);
        }
        let (tx, rx) = app_rings(&region, end, g);
        let (irqs, backend) = match info.kind {
            PortKind::Vale => {
                let kick = Doorbell::EventFd(EventFd::from_fd(next_fd(&mut fds)?));
                let irqs: Vec<EventFd> = fds.map(EventFd::from_fd).collect();
                (irqs, Backend::Switch { kick })
            }
            PortKind::Pipe | PortKind::VhostUser | PortKind::Nic | PortKind::Host => {
                let mut all: Vec<EventFd> = fds.map(EventFd::from_fd).collect();
                let peer = all
                    .split_off(pairs)
                    .into_iter()
                    .map(Doorbell::EventFd)
                    .collect();
                (
                    all,
                    Backend::Pipe(pipe::PipeEnd::new(region.clone(), end, peer)),
                )
            }
        };
        Self::assemble(Some(Arc::new(conn)), info, region, (tx, rx), irqs, backend)
    }

    /// A port just opened, from its parts: one poll descriptor over its
    /// interrupts, blocking waits, counters at zero.
    fn assemble(
        conn: Option<Arc<Connection>>,
        info: OpenReply,
        region: Arc<Region>,
        (tx, rx): (Vec<AppRing>, Vec<AppRing>),
        irqs: Vec<EventFd>,
        backend: Backend,
    ) -> Result<Port, ClientError> {
        let poll_set = poll_set(&irqs)?;
        Ok(Port {
            _conn: conn,
            info,
            region,
            tx,
            rx,
            irqs,
            poll_set,
            backend,
            mode: WaitMode::Adaptive,
            adapt: AdaptiveWait::new(),
            stats: ClientStats::default(),
            origin: None,
            reconnect: false,
            daemon_gone: false,
            give_up: None,
        })
    }

    /// Splits the port into one piece per ring pair, for one thread per
    /// ring (pkt-gen `-p`): piece `i` has TX ring `i` and RX ring `i` of the
    /// port (where they exist) as its ring 0, and that ring pair's own
    /// interrupt eventfd, so pieces never take each other's wake-ups. The
    /// port stays open until every piece is dropped.
    pub fn split(self) -> Result<Vec<Port>, ClientError> {
        let Port {
            _conn,
            info,
            region,
            tx,
            rx,
            irqs,
            backend,
            mode,
            ..
        } = self;
        let mut irqs: Vec<Option<EventFd>> = irqs.into_iter().map(Some).collect();
        let n = tx.len().max(rx.len());
        let mut tx: Vec<Option<AppRing>> = tx.into_iter().map(Some).collect();
        let mut rx: Vec<Option<AppRing>> = rx.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let t = tx.get_mut(i).and_then(Option::take);
            let r = rx.get_mut(i).and_then(Option::take);
            let backend = match &backend {
                Backend::Switch { kick } => Backend::Switch {
                    kick: kick.try_clone()?,
                },
                Backend::Pipe(p) => Backend::Pipe(p.piece(
                    t.is_some().then_some(i as u32),
                    r.is_some().then_some(i as u32),
                )?),
            };
            let mut info = info.clone();
            info.geometry.tx_rings = t.is_some() as u32;
            info.geometry.rx_rings = r.is_some() as u32;
            out.push(Port {
                _conn: _conn.clone(),
                info,
                region: region.clone(),
                tx: t.into_iter().collect(),
                rx: r.into_iter().collect(),
                irqs: irqs.get_mut(i).and_then(Option::take).into_iter().collect(),
                poll_set: None,
                backend,
                mode,
                adapt: AdaptiveWait::new(),
                stats: ClientStats::default(),
                origin: None,
                reconnect: false,
                daemon_gone: false,
                give_up: None,
            });
        }
        Ok(out)
    }

    /// A handle that keeps the port open after this `Port` (and every piece
    /// of it) is dropped, until the handle goes too: for reading the
    /// daemon's counters of an on-demand port after the traffic ended.
    pub fn hold(&self) -> PortHold {
        PortHold(self._conn.clone())
    }

    /// Whether `other` lives in the same memory (the same port, or the two
    /// ends of one pipe), so buffers can move between them by index.
    pub fn shares_memory_with(&self, other: &Port) -> bool {
        Arc::ptr_eq(&self.region, &other.region)
            || matches!((self.region.file_id(), other.region.file_id()), (Some(x), Some(y)) if x == y)
    }

    /// Canonical name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Switch port or pipe end.
    pub fn kind(&self) -> PortKind {
        self.info.kind
    }

    /// Rings and slots of this port.
    pub fn geometry(&self) -> Geometry {
        self.info.geometry
    }

    /// The daemon's open reply (offsets for netmap compatibility).
    pub fn info(&self) -> &OpenReply {
        &self.info
    }

    /// The shared region.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Client-side counters.
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats;
        let a = self.adapt.stats();
        s.spins_won = a.spins_won;
        s.spins_gave_way = a.gave_way;
        s.spin_cap = self.adapt.cap();
        s.bad_values += self
            .tx
            .iter()
            .chain(&self.rx)
            .map(|r| r.bad_tails())
            .sum::<u64>();
        if let Backend::Pipe(p) = &self.backend {
            s.bad_values += p.bad_values();
        }
        s
    }

    /// Chooses blocking or busy waiting.
    pub fn set_wait_mode(&mut self, mode: WaitMode) {
        self.mode = mode;
    }

    /// The descriptor that becomes readable when the port has something for
    /// the application; put it in your own poll/epoll loop, then call
    /// [`Port::prepare_wait`] before sleeping on it.
    pub fn poll_fd(&self) -> BorrowedFd<'_> {
        match &self.poll_set {
            Some(p) => p.as_fd(),
            None => self.irqs[0].as_fd(),
        }
    }

    /// TX ring `i`. Panics if there is no such ring; see [`Port::geometry`].
    pub fn tx(&mut self, i: usize) -> TxRing<'_> {
        assert!(i < self.tx.len(), "no TX ring {i}");
        TxRing { port: self, i }
    }

    /// RX ring `i`. Panics if there is no such ring; see [`Port::geometry`].
    pub fn rx(&mut self, i: usize) -> RxRing<'_> {
        assert!(i < self.rx.len(), "no RX ring {i}");
        RxRing { port: self, i }
    }

    /// TX sync: hands filled slots to the port side and refreshes free space.
    pub fn txsync(&mut self, i: usize) {
        let ring = &mut self.tx[i];
        let moved = ring.publish();
        match &mut self.backend {
            Backend::Switch { kick } => {
                if moved && ring.port_wants_kick() {
                    // What it cost us goes on the ring for the worker's
                    // adaptive wait.
                    let took = kick.signal_timed();
                    ring.note_kick(took);
                    self.stats.kicks += 1;
                }
                ring.refresh_tail();
            }
            Backend::Pipe(p) => {
                if p.push(i, ring) {
                    self.stats.kicks += 1;
                }
            }
        }
        ring.mirror_to_header();
    }

    /// RX sync: releases consumed slots and picks up new packets.
    pub fn rxsync(&mut self, i: usize) {
        let ring = &mut self.rx[i];
        let moved = ring.publish();
        if let Backend::Pipe(p) = &mut self.backend {
            if moved && p.released(i) {
                self.stats.kicks += 1;
            }
        }
        ring.refresh_tail();
        ring.mirror_to_header();
    }

    /// Packets given to TX ring `i` that the port side has not taken yet.
    pub fn tx_pending(&self, i: usize) -> u32 {
        self.tx.get(i).map_or(0, |r| r.pending())
    }

    /// Syncs every TX ring until the port side has taken everything, or
    /// `timeout` passes. A pipe end must do this before it stops sending:
    /// packets the peer had no room for wait in the sender's ring (pipes
    /// never drop). Returns whether everything went.
    pub fn flush(&mut self, timeout: Option<Duration>) -> Result<bool, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        for i in 0..self.tx.len() {
            loop {
                self.txsync(i);
                if self.tx[i].pending() == 0 {
                    break;
                }
                if self.mode == WaitMode::Busy {
                    std::hint::spin_loop();
                } else {
                    self.tx[i].set_need_kick(true);
                    self.txsync(i);
                    if self.tx[i].pending() != 0 {
                        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                        self.irqs[i].wait(left.or(Some(Duration::from_millis(100))))?;
                        self.irqs[i].drain();
                    }
                    self.tx[i].set_need_kick(false);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Waits until TX ring `i` has free slots, or `timeout` passes (None:
    /// no limit). Returns whether space is available.
    pub fn wait_tx(&mut self, i: usize, timeout: Option<Duration>) -> Result<bool, ClientError> {
        self.wait(Dir::Tx, i, timeout)
    }

    /// Waits until RX ring `i` has packets, or `timeout` passes.
    pub fn wait_rx(&mut self, i: usize, timeout: Option<Duration>) -> Result<bool, ClientError> {
        self.wait(Dir::Rx, i, timeout)
    }

    fn sync_dir(&mut self, dir: Dir, i: usize) -> bool {
        match dir {
            Dir::Tx => {
                self.txsync(i);
                self.tx[i].space() > 0
            }
            Dir::Rx => {
                self.rxsync(i);
                self.rx[i].space() > 0
            }
        }
    }

    fn ring(&self, dir: Dir, i: usize) -> &AppRing {
        match dir {
            Dir::Tx => &self.tx[i],
            Dir::Rx => &self.rx[i],
        }
    }

    fn wait(&mut self, dir: Dir, i: usize, timeout: Option<Duration>) -> Result<bool, ClientError> {
        let n = if dir == Dir::Tx {
            self.tx.len()
        } else {
            self.rx.len()
        };
        if i >= n {
            return Err(ClientError::NoRing(i));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut spins = 0u32;
        loop {
            if self.sync_dir(dir, i) {
                return Ok(true);
            }
            if self.mode == WaitMode::Busy {
                std::hint::spin_loop();
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(false);
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(BUSY_CHECK_SPINS) && self.hung_up(Some(Duration::ZERO))? {
                    self.after_hangup()?;
                }
                continue;
            }
            if self.mode == WaitMode::Adaptive {
                // Spin before asking for an interrupt: the window is what
                // spinning has been paying lately (0: straight to sleep).
                let mut a = std::mem::take(&mut self.adapt);
                // What our sleep would cost the port side's kick, as it
                // publishes it: counted into how long spinning pays.
                a.set_peer_cost(self.ring(dir, i).peer_kick_cost());
                let found = a.spin(|| self.sync_dir(dir, i));
                self.adapt = a;
                if found {
                    return Ok(true);
                }
            }
            // Double check: ask for an interrupt, then look once more.
            self.ring(dir, i).set_need_kick(true);
            if self.sync_dir(dir, i) {
                self.ring(dir, i).set_need_kick(false);
                return Ok(true);
            }
            let left = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        self.ring(dir, i).set_need_kick(false);
                        return Ok(false);
                    }
                    Some(d - now)
                }
                None => None,
            };
            self.stats.sleeps += 1;
            let t0 = Instant::now();
            let (gone, woken) = self.sleep(i, left)?;
            if self.mode == WaitMode::Adaptive {
                self.adapt.slept(t0.elapsed(), woken);
            }
            self.irqs[i].drain();
            self.ring(dir, i).set_need_kick(false);
            if gone {
                self.after_hangup()?;
            }
        }
    }

    /// Sleeps until ring pair `i`'s interrupt, `left` passes, or the
    /// daemon's connection hangs up (watched until it once did); returns
    /// whether it hung up and whether the interrupt came.
    /// An interrupted sleep (a signal) returns as a wake-up with nothing:
    /// the caller looks at the rings and sleeps again for what is left.
    fn sleep(&self, i: usize, left: Option<Duration>) -> Result<(bool, bool), ClientError> {
        let irq = poll::watch(self.irqs[i].as_raw_fd(), libc::POLLIN);
        let conn = self._conn.as_ref().filter(|_| !self.daemon_gone);
        let mut fds = [irq, irq];
        let n = match conn {
            Some(c) => {
                fds[1] = poll::watch(c.socket().as_fd().as_raw_fd(), libc::POLLRDHUP);
                2
            }
            None => 1,
        };
        match poll::poll_fds(&mut fds[..n], left) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok((false, false)),
            Err(e) => Err(e.into()),
            Ok(_) => Ok((
                n == 2 && hangup(&fds[1]),
                fds[0].revents & libc::POLLIN != 0,
            )),
        }
    }

    /// Whether the daemon's connection hung up, waiting at most `timeout`
    /// for it (false once it was seen, and without a connection).
    fn hung_up(&self, timeout: Option<Duration>) -> Result<bool, ClientError> {
        let Some(c) = self._conn.as_ref().filter(|_| !self.daemon_gone) else {
            return Ok(false);
        };
        let mut fds = [poll::watch(c.socket().as_fd().as_raw_fd(), libc::POLLRDHUP)];
        match poll::poll_fds(&mut fds, timeout) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e.into()),
            Ok(_) => Ok(hangup(&fds[0])),
        }
    }

    /// Makes the port open itself again on a new daemon when the one that
    /// serves it goes away (an upgrade, a restart), instead of waiting on
    /// rings no daemon serves. A wait that sees the daemon's connection
    /// close opens the port again by its name on the same socket (trying
    /// for [`RECONNECT_WAIT`]) and carries on with the new port's empty
    /// rings: what was queued on the old rings is lost, and slots and
    /// buffers of the old port must not be used after a wait (the borrow
    /// checker sees to it in Rust; C callers must not keep pointers into
    /// the rings across a wait). Off by default. Only for switch ports
    /// opened by name on a socket ([`Port::open_at`], [`Port::open`]): a
    /// pipe's ends go on without a daemon, and the rest have nothing to
    /// open again.
    ///
    /// The port comes back where it was: its memory at the same addresses
    /// (a program's pointers to `struct netmap_if`, rings and buffers stay
    /// valid), and [`Port::poll_fd`] the same descriptor, which also becomes
    /// readable when the daemon goes, so a program sleeping in its own
    /// `poll` wakes and reconnects in [`Port::after_wait`]. Call this
    /// before taking `poll_fd`. A port that came back with another layout
    /// (its daemon now configured otherwise) fails the wait with
    /// [`ClientError::DaemonGone`].
    pub fn set_reconnect(&mut self, on: bool) -> Result<(), ClientError> {
        self.reconnect = on;
        if on && self.origin.is_some() {
            self.watch_daemon_in_poll_set()?;
        }
        Ok(())
    }

    /// While reconnecting (see [`Port::set_reconnect`]), `give_up` is asked
    /// between attempts: when it says true (a program told to stop), the
    /// port stops trying and stays without a daemon, and the wait returns
    /// as if its time had run out, so the program's loop sees its own stop.
    pub fn set_reconnect_give_up(&mut self, give_up: fn() -> bool) {
        self.give_up = Some(give_up);
    }

    /// Makes the poll descriptor an epoll set of the interrupts and the
    /// daemon's connection (hang-ups only).
    fn watch_daemon_in_poll_set(&mut self) -> Result<(), ClientError> {
        if self.poll_set.is_none() {
            let set = Epoll::new()?;
            for (i, f) in self.irqs.iter().enumerate() {
                set.add(f.as_raw_fd(), i as u64, poll::READABLE)?;
            }
            self.poll_set = Some(set);
        }
        if let (Some(set), Some(c)) = (&self.poll_set, &self._conn) {
            set.add(
                c.socket().as_fd().as_raw_fd(),
                DAEMON_KEY,
                (libc::EPOLLRDHUP | libc::EPOLLHUP) as u32,
            )?;
        }
        Ok(())
    }

    /// The daemon's connection hung up: a switch port set to reconnect is
    /// opened again on the new daemon; any other port stops watching the
    /// connection and waits on as before (a pipe's ends need no daemon).
    fn after_hangup(&mut self) -> Result<(), ClientError> {
        self.daemon_gone = true;
        // The hung-up connection would keep the poll descriptor readable
        // for ever; a new port's comes in its place.
        if let (Some(set), Some(c)) = (&self.poll_set, &self._conn) {
            let _ = set.delete(c.socket().as_fd().as_raw_fd());
        }
        if !self.reconnect || self.info.kind != PortKind::Vale {
            return Ok(());
        }
        if self.region.layout().pipes > 0 && pipe::any_in(&self.region) {
            // Pipes of this process live in this port's memory, and a new
            // daemon would give the port other memory: the port stays
            // with its pipes (they need no daemon), cut off from the
            // switch, rather than leave them behind.
            tracing::warn!(port = %self.info.name, "the daemon went; the port does not follow it, since pipes are open in its memory");
            return Ok(());
        }
        let Some((socket, name, opts)) = self.origin.clone() else {
            return Ok(());
        };
        let deadline = Instant::now() + RECONNECT_WAIT;
        loop {
            if self.give_up.is_some_and(|f| f()) {
                return Ok(());
            }
            // A daemon that accepts but does not answer (wedged, or not
            // ours) costs an attempt, not the program.
            let attempt = Connection::connect(&socket)
                .map_err(ClientError::from)
                .and_then(|c| {
                    c.socket().set_read_timeout(Some(RECONNECT_REPLY_WAIT))?;
                    Port::open_in(c, &name, opts, Some(self.region.clone()))
                });
            match attempt {
                Ok(mut p) => {
                    p.origin = self.origin.take();
                    p.reconnect = true;
                    p.mode = self.mode;
                    p.stats = self.stats;
                    p.stats.reconnects += 1;
                    p.give_up = self.give_up;
                    // The same poll descriptor, now over the new port's
                    // interrupts and connection (the old ones leave the set
                    // as they close).
                    if let Some(set) = self.poll_set.take() {
                        p.poll_set = Some(set);
                        if let Some(set) = &p.poll_set {
                            for (i, f) in p.irqs.iter().enumerate() {
                                set.add(f.as_raw_fd(), i as u64, poll::READABLE)?;
                            }
                        }
                        p.watch_daemon_in_poll_set()?;
                    }
                    *self = p;
                    return Ok(());
                }
                Err(e @ ClientError::Region(_)) => {
                    // Another layout: the program's pointers cannot follow.
                    return Err(ClientError::DaemonGone {
                        waited: RECONNECT_WAIT.saturating_sub(deadline - Instant::now()),
                        last: Box::new(e),
                    });
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(ClientError::DaemonGone {
                        waited: RECONNECT_WAIT,
                        last: Box::new(e),
                    });
                }
                Err(_) => std::thread::sleep(RECONNECT_PAUSE),
            }
        }
    }

    /// Whether something is available now, syncing the rings asked for:
    /// space in a TX ring (`want_tx`), packets in an RX ring (`want_rx`).
    /// What a spin in your own loop looks at (see
    /// [`ringswitch_ring::AdaptiveWait`]) before [`Port::prepare_wait`].
    pub fn ready(&mut self, want_tx: bool, want_rx: bool) -> bool {
        let mut ready = false;
        if want_tx {
            for i in 0..self.tx.len() {
                ready |= self.sync_dir(Dir::Tx, i);
            }
        }
        if want_rx {
            for i in 0..self.rx.len() {
                ready |= self.sync_dir(Dir::Rx, i);
            }
        }
        ready
    }

    /// The port's wait mode.
    pub fn wait_mode(&self) -> WaitMode {
        self.mode
    }

    /// Before sleeping on [`Port::poll_fd`] in your own loop: asks for an
    /// interrupt on every ring and returns true when something is already
    /// available (then don't sleep). Call [`Port::after_wait`] on waking.
    pub fn prepare_wait(&mut self, want_tx: bool, want_rx: bool) -> bool {
        let mut ready = false;
        for i in 0..self.tx.len() {
            if want_tx {
                self.tx[i].set_need_kick(true);
                ready |= self.sync_dir(Dir::Tx, i);
            }
        }
        for i in 0..self.rx.len() {
            if want_rx {
                self.rx[i].set_need_kick(true);
                ready |= self.sync_dir(Dir::Rx, i);
            }
        }
        if ready {
            self.clear_wait();
        }
        ready
    }

    /// Withdraws the interrupt requests and drains the interrupts.
    fn clear_wait(&mut self) {
        for irq in &self.irqs {
            irq.drain();
        }
        for r in self.tx.iter().chain(&self.rx) {
            r.set_need_kick(false);
        }
    }

    /// Clears the interrupt requests made by [`Port::prepare_wait`] and
    /// drains the interrupt eventfd. A port set to reconnect whose daemon
    /// went away opens itself again here (see [`Port::set_reconnect`]):
    /// the error says it could not.
    pub fn after_wait(&mut self) -> Result<(), ClientError> {
        self.clear_wait();
        if self.reconnect && self.hung_up(Some(Duration::ZERO))? {
            self.after_hangup()?;
        }
        Ok(())
    }

    /// The raw application rings (for the netmap compatibility layer and the
    /// zero-copy bridge).
    pub fn app_ring(&mut self, dir: Dir, i: usize) -> &mut AppRing {
        match dir {
            Dir::Tx => &mut self.tx[i],
            Dir::Rx => &mut self.rx[i],
        }
    }
}

/// Whether a polled control connection hung up (the daemon never writes
/// to a client unasked, so its end closing is all that wakes it).
fn hangup(p: &libc::pollfd) -> bool {
    p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0
}

/// The application side of every ring of `end`.
fn app_rings(region: &Arc<Region>, end: usize, g: Geometry) -> (Vec<AppRing>, Vec<AppRing>) {
    let side = |dir, n| {
        (0..n)
            .map(|i| AppRing::new(region.clone(), end, dir, i))
            .collect()
    };
    (side(Dir::Tx, g.tx_rings), side(Dir::Rx, g.rx_rings))
}

/// Keeps a port open (see [`Port::hold`]).
pub struct PortHold(#[allow(dead_code)] Option<Arc<Connection>>);

/// An epoll set over several eventfds, readable when any of them is; none
/// for fewer than two (the one eventfd is then the port's poll descriptor).
fn poll_set(fds: &[EventFd]) -> Result<Option<Epoll>, ClientError> {
    if fds.len() < 2 {
        return Ok(None);
    }
    let set = Epoll::new()?;
    for (i, f) in fds.iter().enumerate() {
        set.add(f.as_raw_fd(), i as u64, poll::READABLE)?;
    }
    Ok(Some(set))
}

/// A TX ring borrowed from its port.
pub struct TxRing<'a> {
    port: &'a mut Port,
    i: usize,
}

/// An RX ring borrowed from its port.
pub struct RxRing<'a> {
    port: &'a mut Port,
    i: usize,
}

macro_rules! ring_common {
    ($t:ident, $field:ident, $sync:ident, $wait:ident) => {
        impl $t<'_> {
            /// Slots available past `cur`.
            #[inline(always)]
            pub fn space(&self) -> u32 {
                self.port.$field[self.i].space()
            }
            /// The `k`-th available slot.
            #[inline(always)]
            pub fn slot(&mut self, k: u32) -> Option<Slot<'_>> {
                self.port.$field[self.i].slot_mut(k)
            }
            /// Moves head and cur past `n` slots.
            #[inline(always)]
            pub fn advance(&mut self, n: u32) {
                self.port.$field[self.i].advance(n)
            }
            /// Syncs the ring.
            #[inline]
            pub fn sync(&mut self) -> Result<(), ClientError> {
                self.port.$sync(self.i);
                Ok(())
            }
            /// Waits for slots (see [`Port::wait_tx`], [`Port::wait_rx`]).
            pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool, ClientError> {
                self.port.$wait(self.i, timeout)
            }
            /// Slots in the ring.
            pub fn num_slots(&self) -> u32 {
                self.port.$field[self.i].num_slots()
            }
            /// The underlying application ring.
            pub fn app(&mut self) -> &mut AppRing {
                &mut self.port.$field[self.i]
            }
        }
    };
}

ring_common!(TxRing, tx, txsync, wait_tx);
ring_common!(RxRing, rx, rxsync, wait_rx);

/// The socket a client would use, explained for error messages.
pub fn socket_for(arg: Option<&Path>) -> PathBuf {
    arg.map(Path::to_path_buf)
        .unwrap_or_else(default_socket_path)
}
