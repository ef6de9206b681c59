//! One emulated `/dev/netmap` file: before registration a connection to the
//! daemon, after it an open port with the rings this descriptor is bound to.
//!
//! The descriptor handed to the application is an epoll set. The port's
//! interrupt eventfds join it at registration, so it becomes readable
//! exactly when the port signals the application, and the application's
//! own poll, select or epoll can sleep on it.

use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ringswitch_client::{ClientError, OpenOptions, Port};
use ringswitch_control::{
    error_chain, CallError, Connection, ErrorCode, PortKind, PortName, Target,
};
use ringswitch_ring::layout::MAX_PORT_PIPES;
use ringswitch_ring::poll::{self, Epoll};
use ringswitch_ring::Dir;

use crate::abi::{flags, mode};
use crate::frames::{self, Packet};
use crate::state::PortState;
use crate::Errno;

/// What a registration asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegRequest {
    /// `mode::*`.
    pub mode: u32,
    /// Ring for `ONE_NIC`.
    pub ringid: u16,
    /// `flags::*`.
    pub flags: u64,
    /// `nr_mem_id`: the memory asked for (0: any).
    pub mem_id: u16,
}

/// What a registration answers.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegInfo {
    /// Offset of the `netmap_if`.
    pub nifp_offset: u64,
    /// Bytes to map.
    pub memsize: u64,
    /// Port geometry.
    pub tx_rings: u16,
    /// RX rings.
    pub rx_rings: u16,
    /// Slots per TX ring.
    pub tx_slots: u32,
    /// Slots per RX ring.
    pub rx_slots: u32,
    /// Region identity.
    pub mem_id: u16,
    /// The mode in effect.
    pub mode: u32,
}

/// An open port and the rings bound to this descriptor.
struct Bound {
    /// The whole port, or for `ONE_NIC` the piece holding that ring pair.
    port: Port,
    /// For a piece: where it goes back on close, and its ring.
    shared: Option<(Arc<Shared>, usize)>,
    tx: Range<usize>,
    rx: Range<usize>,
    no_tx_poll: bool,
    info: RegInfo,
    /// The name registered (without `@conf:`).
    name: String,
    /// Syncs where the application's head or cur was out of range and the
    /// ring was put back to its last valid state (netmap's ring reinit).
    reinits: u64,
    /// What the port carries beyond its rings (its virtio-net header
    /// length), shared with the other descriptors holding pieces of it.
    state: Arc<PortState>,
    /// Where each TX ring is in a packet (indexed as the port's rings).
    tx_at: Vec<Packet>,
    /// Where each RX ring is in a packet.
    rx_at: Vec<Packet>,
}

struct Inner {
    /// The connection made at open, until a registration takes it.
    conn: Option<Connection>,
    bound: Option<Bound>,
}

/// An emulated `/dev/netmap` file.
pub struct NmFile {
    /// The descriptor the application holds: an epoll set.
    fd: RawFd,
    socket: PathBuf,
    inner: Mutex<Inner>,
}

/// The socket the daemon listens on, as the client library finds it.
pub fn socket_path() -> PathBuf {
    ringswitch_client::default_socket_path()
}

/// netmap's errno for a client error: as a missing kernel module when no
/// daemon listens (ENOENT), ENXIO for an interface that does not exist, the
/// client library's otherwise.
fn errno_of(e: &ClientError) -> i32 {
    match e {
        ClientError::Call(CallError::NoDaemon { .. }) => libc::ENOENT,
        ClientError::Call(CallError::Daemon(r)) if r.code == ErrorCode::NotFound => libc::ENXIO,
        e => e.errno(),
    }
}

impl NmFile {
    /// Opens an emulated file: connects to the daemon and makes the epoll
    /// set the application will hold. `cloexec` follows O_CLOEXEC.
    pub fn open(cloexec: bool) -> Result<Box<NmFile>, Errno> {
        let socket = socket_path();
        let conn = match Connection::connect(&socket) {
            Ok(c) => Some(c),
            // In a VM with passthrough ports there is no daemon: ports are
            // opened on their devices at registration.
            Err(CallError::NoDaemon { .. })
                if !ringswitch_client::passthrough::devices().is_empty() =>
            {
                None
            }
            Err(e) => {
                let errno = errno_of(&ClientError::Call(e));
                return Err(Errno::with(
                    errno,
                    format!("opening /dev/netmap: {}", describe_no_daemon(&socket)),
                ));
            }
        };
        // The descriptor is the application's from here on: closed by
        // `dev::close` (or by `dev::open` if the table is full).
        let fd = Epoll::with_cloexec(cloexec)
            .map_err(|e| Errno::io(e, "creating the /dev/netmap descriptor"))?
            .into_raw_fd();
        let file = Box::new(NmFile {
            fd,
            socket,
            inner: Mutex::new(Inner { conn, bound: None }),
        });
        Ok(file)
    }

    /// The application's descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the rings in a state
        // the next sync would trust blindly: every sync re-validates.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn watch(&self, fd: RawFd) -> Result<(), Errno> {
        // SAFETY: `self.fd` stays open as long as `self` (only `dev::close`
        // closes it, after taking `self` out of the table).
        let set = Epoll::borrowed(unsafe { BorrowedFd::borrow_raw(self.fd) });
        // Data: the descriptor itself, as the application would set it.
        set.add(fd, fd as u64, poll::READABLE)
            .map_err(|e| Errno::io(e, "adding the port's interrupts to /dev/netmap"))
    }

    /// NIOCCTRL REGISTER / NIOCREGIF: opens `name` and binds rings.
    pub fn register(&self, name: &str, req: RegRequest) -> Result<RegInfo, Errno> {
        let mut inner = self.lock();
        if inner.bound.is_some() {
            return Err(Errno::with(
                libc::EBUSY,
                "this /dev/netmap descriptor is already registered; open another one".into(),
            ));
        }
        if req.flags & (flags::MONITOR_TX | flags::MONITOR_RX) != 0 {
            return Err(Errno::with(
                libc::EOPNOTSUPP,
                format!("{name}: monitor ports are not supported by ringswitch"),
            ));
        }
        if matches!(req.mode, mode::SW | mode::NIC_SW | mode::ONE_SW) {
            return Err(Errno::with(
                libc::EINVAL,
                format!("{name}: ringswitch ports have no host-stack rings (attach the host stack as its own port: ringswitch ctl attach SWITCH --host)"),
            ));
        }
        if !matches!(
            req.mode,
            mode::DEFAULT | mode::ALL_NIC | mode::ONE_NIC | mode::NULL
        ) {
            return Err(Errno::with(
                libc::EINVAL,
                format!("{name}: registration mode {} is not supported", req.mode),
            ));
        }
        let conn = inner.conn.take();
        let (port, info, shared, state, mut tx, mut rx) = if req.mode == mode::ONE_NIC {
            // One ring per descriptor, as threads of one program use a
            // port (pkt-gen -p): the port is opened once per process and
            // split into per-ring pieces that descriptors take in turn.
            let opts = open_options(name, req.mem_id);
            let (shared, piece) =
                Shared::take(conn, &self.socket, name, opts, req.ringid as usize)?;
            let g = piece.geometry();
            let mut info = shared.info;
            info.mode = mode::ONE_NIC;
            let (tx, rx) = (0..g.tx_rings as usize, 0..g.rx_rings as usize);
            let state = shared.state.clone();
            (
                piece,
                info,
                Some((shared, req.ringid as usize)),
                state,
                tx,
                rx,
            )
        } else {
            let mut port = open_port(conn, &self.socket, name, open_options(name, req.mem_id))?;
            // A switch port follows its daemon through an upgrade or a
            // restart: the program's mappings go with it (`remap`). Before
            // its poll descriptor is watched, which then also wakes when
            // the daemon goes. Pipes need no daemon to go on.
            if port.info().kind == PortKind::Vale {
                port.set_reconnect(true)
                    .map_err(|e| Errno::with(errno_of(&e), format!("{name}: {e}")))?;
            }
            let mut info = RegInfo::of(&port)?;
            let g = port.geometry();
            let (tx, rx) = if req.mode == mode::NULL {
                info.mode = mode::NULL;
                (0..0, 0..0)
            } else {
                (0..g.tx_rings as usize, 0..g.rx_rings as usize)
            };
            (port, info, None, PortState::open(name), tx, rx)
        };
        if req.flags & flags::TX_RINGS_ONLY != 0 {
            rx = 0..0;
        }
        if req.flags & flags::RX_RINGS_ONLY != 0 {
            tx = 0..0;
        }
        let checked = if state.hdr_len() != 0 && req.flags & flags::ACCEPT_VNET_HDR == 0 {
            // netmap's answer to a program that would take frames with a
            // header for frames without one.
            Err(Errno::with(
                libc::EIO,
                format!(
                    "{name}: the port has a {}-byte virtio-net header and the registration does not accept it (NR_ACCEPT_VNET_HDR)",
                    state.hdr_len()
                ),
            ))
        } else {
            self.watch(port.poll_fd().as_raw_fd())
        };
        if let Err(e) = checked {
            if let Some((s, i)) = shared {
                s.put_back(i, port);
            }
            return Err(e);
        }
        let g = port.geometry();
        let mut b = Bound {
            port,
            shared,
            tx,
            rx,
            no_tx_poll: req.flags & flags::NO_TX_POLL != 0,
            info,
            name: ringswitch_control::name::base_name(name).to_string(),
            reinits: 0,
            state,
            tx_at: vec![Packet::Start; g.tx_rings as usize],
            rx_at: vec![Packet::Start; g.rx_rings as usize],
        };
        // Put the ring headers in the state a freshly registered netmap
        // ring has, whatever a previous user left there.
        for dir in [Dir::Tx, Dir::Rx] {
            for i in b.rings(dir) {
                b.port.app_ring(dir, i).mirror_to_header();
            }
        }
        b.state.set_info(info);
        inner.bound = Some(b);
        Ok(info)
    }

    /// Undoes a registration this descriptor made: the port (or its
    /// piece) goes back as on close, and the descriptor can register
    /// again.
    pub fn unregister(&self) {
        if let Some(b) = self.lock().bound.take() {
            b.release();
        }
    }

    /// The registration, if this descriptor holds port `name`.
    pub fn info_of(&self, name: &str) -> Option<RegInfo> {
        let want = ringswitch_control::name::base_name(name);
        self.lock()
            .bound
            .as_ref()
            .filter(|b| b.name == want)
            .map(|b| b.info)
    }

    /// The region's memfd and size, for mmap.
    pub fn with_region<T>(&self, f: impl FnOnce(RawFd, usize) -> T) -> Option<T> {
        let inner = self.lock();
        let b = inner.bound.as_ref()?;
        Some(f(b.port.region().fd().as_raw_fd(), b.port.region().len()))
    }

    /// NIOCTXSYNC (`Dir::Tx`) or NIOCRXSYNC (`Dir::Rx`).
    pub fn sync(&self, dir: Dir) -> Result<(), Errno> {
        let mut inner = self.lock();
        let b = inner.bound.as_mut().ok_or_else(not_registered)?;
        b.sync(dir);
        Ok(())
    }

    /// What netmap's poll does without sleeping: syncs and reports which of
    /// `events` (POLLIN, POLLOUT) are ready. POLLERR when unregistered.
    pub fn poll_events(&self, events: i16) -> i16 {
        let mut inner = self.lock();
        let Some(b) = inner.bound.as_mut() else {
            return libc::POLLERR;
        };
        b.poll_events(events)
    }

    /// Before sleeping on the descriptor: asks the port for an interrupt on
    /// the rings that `events` waits for, then looks once more (the
    /// double check). Returns what is ready; when something is, the caller
    /// does not sleep and the request is withdrawn.
    pub fn arm(&self, events: i16) -> i16 {
        let mut inner = self.lock();
        let Some(b) = inner.bound.as_mut() else {
            // Unregistered: poll reports POLLERR at once.
            return libc::POLLERR;
        };
        b.set_need_kick(events, true);
        let ready = b.poll_events(events);
        if ready != 0 {
            b.set_need_kick(events, false);
        }
        ready
    }

    /// After a sleep: drains the interrupts and withdraws the requests.
    pub fn after_wait(&self) {
        let mut inner = self.lock();
        let Some(b) = inner.bound.as_mut() else {
            return;
        };
        let before = b.port.stats().reconnects;
        if let Err(e) = b.port.after_wait() {
            // No daemon came back in time: the port stays as it is, its
            // rings still, as after any daemon's end.
            log_once(&format!("{}: {e}", b.name));
            return;
        }
        if b.port.stats().reconnects != before {
            b.reconnected(self.fd);
        }
    }

    /// Ring reinits so far (bad head/cur from the application).
    pub fn reinits(&self) -> u64 {
        self.lock().bound.as_ref().map_or(0, |b| b.reinits)
    }
}

impl Drop for NmFile {
    fn drop(&mut self) {
        crate::remap::forget_fd(self.fd);
        // The port (and with it the daemon connection) closes with `inner`;
        // the application's descriptor is closed by the caller of `remove`.
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = inner.bound.take() {
            b.release();
        }
    }
}

/// Says `msg` on stderr, once per process (a program's own output is not
/// ours to flood).
fn log_once(msg: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    // Relaxed: a flag with nothing attached.
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!("ringswitch-netmap: {msg}");
    }
}

impl Bound {
    /// The port came back on a new daemon (see `Port::set_reconnect`): its
    /// ring headers as a freshly registered port's, no packet half taken,
    /// and the program's mappings over the new memory.
    fn reconnected(&mut self, fd: RawFd) {
        for dir in [Dir::Tx, Dir::Rx] {
            for i in self.rings(dir) {
                self.port.app_ring(dir, i).mirror_to_header();
            }
        }
        self.tx_at.fill(Packet::Start);
        self.rx_at.fill(Packet::Start);
        let r = self.port.region();
        if let Err(e) = crate::remap::remap(fd, r.fd().as_raw_fd(), r.len()) {
            log_once(&format!("{}: after reconnecting: {e}", self.name));
        }
    }

    /// Gives the port back: a piece to the others of its port, a whole
    /// port closed.
    fn release(self) {
        if self.reinits > 0 {
            tracing::warn!(
                reinits = self.reinits,
                "the application wrote invalid ring pointers"
            );
        }
        if let Some((s, i)) = self.shared {
            s.put_back(i, self.port);
        }
    }
}

/// A port opened once for the whole process and split into per-ring
/// pieces, for descriptors that each register one ring.
pub struct Shared {
    key: String,
    info: RegInfo,
    state: Arc<PortState>,
    pieces: Mutex<Vec<Option<Port>>>,
}

/// Ports of this process registered ring by ring, by name. Entries die
/// with their last piece's descriptor.
static SHARED: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

impl Shared {
    /// Takes ring pair `ring` of `name`, opening and splitting the port if
    /// no descriptor of this process holds any of its rings.
    fn take(
        conn: Option<Connection>,
        socket: &std::path::Path,
        name: &str,
        opts: OpenOptions,
        ring: usize,
    ) -> Result<(Arc<Shared>, Port), Errno> {
        let key = ringswitch_control::name::base_name(name);
        let mut all = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        let found = all.iter().filter_map(Weak::upgrade).find(|s| s.key == key);
        let shared = match found {
            Some(s) => s,
            None => {
                let port = open_port(conn, socket, name, opts)?;
                let info = RegInfo::of(&port)?;
                let pieces = port.split().map_err(|e| {
                    Errno::with(errno_of(&e), format!("{name}: {}", error_chain(&e)))
                })?;
                let s = Arc::new(Shared {
                    key: key.to_string(),
                    info,
                    state: PortState::open(name),
                    pieces: Mutex::new(pieces.into_iter().map(Some).collect()),
                });
                all.push(Arc::downgrade(&s));
                s
            }
        };
        drop(all);
        let piece = {
            let mut pieces = shared.pieces.lock().unwrap_or_else(|p| p.into_inner());
            let n = pieces.len();
            match pieces.get_mut(ring) {
                None => {
                    return Err(Errno::with(
                        libc::EINVAL,
                        format!("{name}: ring {ring} does not exist (the port has {n} rings)"),
                    ))
                }
                Some(slot) => slot.take().ok_or_else(|| {
                    Errno::with(
                        libc::EBUSY,
                        format!("{name}: ring {ring} is registered on another descriptor"),
                    )
                })?,
            }
        };
        Ok((shared, piece))
    }

    fn put_back(&self, ring: usize, piece: Port) {
        if let Some(slot) = self
            .pieces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(ring)
        {
            *slot = Some(piece);
        }
    }
}

/// Room for pipes given to a switch port this process opens (netmap's lb
/// opens its output pipes in its input port's memory; its default is 2):
/// `RINGSWITCH_NETMAP_PIPES`, 0 to 16, by default 2. The room costs
/// address space and budget, not memory, until a pipe uses it.
fn port_pipes() -> u32 {
    static PIPES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PIPES.get_or_init(|| match std::env::var("RINGSWITCH_NETMAP_PIPES") {
        Err(_) => DEFAULT_PORT_PIPES,
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(n) if n <= MAX_PORT_PIPES => n,
            _ => {
                log_once(&format!(
                    "RINGSWITCH_NETMAP_PIPES={v} is not a number of pipes from 0 to {MAX_PORT_PIPES}; using {DEFAULT_PORT_PIPES}"
                ));
                DEFAULT_PORT_PIPES
            }
        },
    })
}

/// Pipes a switch port has room for unless `RINGSWITCH_NETMAP_PIPES` says.
const DEFAULT_PORT_PIPES: u32 = 2;

/// What an open of `name` asks the daemon for beyond the name: room for
/// pipes in a switch port's memory, or a pipe end in the memory of its
/// port when the registration asks for that port's memory (`mem_id`, as
/// lb's `PORT{N/xT@ID`).
fn open_options(name: &str, mem_id: u16) -> OpenOptions {
    match name.parse::<PortName>().map(|n| n.target) {
        Ok(Target::Vale { .. }) => OpenOptions {
            pipes: port_pipes(),
            in_port_memory: false,
        },
        Ok(Target::Pipe { base, .. }) => OpenOptions {
            pipes: 0,
            in_port_memory: mem_id != 0 && crate::memid::port_of(mem_id).is_some_and(|p| p == base),
        },
        _ => OpenOptions::default(),
    }
}

fn open_port(
    conn: Option<Connection>,
    socket: &std::path::Path,
    name: &str,
    opts: OpenOptions,
) -> Result<Port, Errno> {
    let port = match conn {
        Some(c) => Port::open_on_socket_with(c, socket, name, opts),
        // A new connection, or in a VM the passthrough device of `name`.
        None => Port::open_at_with(socket, name, opts),
    };
    port.map_err(|e| match e {
        ClientError::Call(CallError::NoDaemon { .. }) => {
            Errno::with(libc::ENOENT, describe_no_daemon(socket))
        }
        e => Errno::with(errno_of(&e), format!("{name}: {}", error_chain(&e))),
    })
}

impl RegInfo {
    fn of(port: &Port) -> Result<RegInfo, Errno> {
        let g = port.geometry();
        Ok(RegInfo {
            nifp_offset: port.info().nifp_offset,
            memsize: port.region().len() as u64,
            tx_rings: g.tx_rings as u16,
            rx_rings: g.rx_rings as u16,
            tx_slots: g.tx_slots,
            rx_slots: g.rx_slots,
            mem_id: crate::memid::of(
                port.region(),
                (port.info().kind == PortKind::Vale)
                    .then(|| ringswitch_control::name::base_name(port.name())),
            )?,
            mode: mode::ALL_NIC,
        })
    }
}

/// Which bound rings `events` (POLLOUT, POLLIN) is about.
const POLL_DIRS: [(Dir, i16); 2] = [(Dir::Tx, libc::POLLOUT), (Dir::Rx, libc::POLLIN)];

impl Bound {
    /// The bound rings of `dir`.
    fn rings(&self, dir: Dir) -> Range<usize> {
        match dir {
            Dir::Tx => self.tx.clone(),
            Dir::Rx => self.rx.clone(),
        }
    }

    /// NIOCTXSYNC or NIOCRXSYNC: syncs every bound ring of `dir`, doing
    /// to the frames what the daemon does not (NS_INDIRECT, the
    /// virtio-net header; see `frames`).
    fn sync(&mut self, dir: Dir) {
        let hdr = self.state.hdr_len();
        for i in self.rings(dir) {
            let ring = self.port.app_ring(dir, i);
            let (head, tail) = (ring.head(), ring.tail());
            if !ring.adopt_header_pointers() {
                // Out of range or backwards: keep the last valid state and
                // show it to the application again.
                ring.mirror_to_header();
                self.reinits += 1;
            }
            match dir {
                Dir::Tx => {
                    let (ring, at) = (&*ring, &mut self.tx_at[i]);
                    frames::tx(ring, head, ring.head(), hdr, &self.state, at);
                    self.port.txsync(i);
                }
                Dir::Rx => {
                    self.port.rxsync(i);
                    if hdr != 0 {
                        let ring = self.port.app_ring(dir, i);
                        let to = ring.tail();
                        frames::rx(ring, tail, to, hdr, &self.state, &mut self.rx_at[i]);
                    }
                }
            }
        }
    }

    fn poll_events(&mut self, events: i16) -> i16 {
        let want_tx = events & libc::POLLOUT != 0;
        let want_rx = events & libc::POLLIN != 0;
        if want_tx || !self.no_tx_poll {
            self.sync(Dir::Tx);
        }
        if want_rx {
            self.sync(Dir::Rx);
        }
        let mut r = 0;
        for (dir, bit) in POLL_DIRS {
            if events & bit != 0
                && self
                    .rings(dir)
                    .any(|i| self.port.app_ring(dir, i).space() > 0)
            {
                r |= bit;
            }
        }
        r
    }

    fn set_need_kick(&mut self, events: i16, on: bool) {
        for (dir, bit) in POLL_DIRS {
            if events & bit != 0 {
                for i in self.rings(dir) {
                    self.port.app_ring(dir, i).set_need_kick(on);
                }
            }
        }
    }
}

fn not_registered() -> Errno {
    Errno::with(
        libc::ENXIO,
        "sync on a /dev/netmap descriptor that is not registered".into(),
    )
}

fn describe_no_daemon(socket: &std::path::Path) -> String {
    format!(
        "no ringswitch daemon is listening on {}: start one with `ringswitch serve`, or point RINGSWITCH_SOCKET at a running one",
        socket.display()
    )
}

/// PORT_HDR_GET of a port open in this process: its virtio-net header
/// length. None when no descriptor of this process holds it.
pub fn hdr_len_of(name: &str) -> Option<u32> {
    PortState::find(name).map(|s| s.hdr_len() as u32)
}

/// PORT_HDR_SET of a port open in this process.
pub fn set_hdr_len(name: &str, len: u32) -> Result<(), Errno> {
    match PortState::find(name) {
        Some(s) => s.set_hdr_len(len),
        None => Err(Errno::with(
            libc::ENXIO,
            format!("{name}: no such port open in this process (a port's virtio-net header length is kept by the process that has it open: register it first)"),
        )),
    }
}
