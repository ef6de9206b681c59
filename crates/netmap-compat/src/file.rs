//! One emulated `/dev/netmap` file: before registration a connection to the
//! daemon, after it an open port with the rings this descriptor is bound to.
//!
//! The descriptor handed to the application is an epoll set. It holds the
//! port's interrupt eventfds and a wake eventfd of its own, so it becomes
//! readable exactly when the port signals the application, and the
//! application's own poll, select or epoll can sleep on it.

use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use ringswitch_client::{ClientError, Port};
use ringswitch_control::{CallError, Connection, ErrorCode};
use ringswitch_ring::{Dir, EventFd};

use crate::abi::{flags, mode};
use crate::real;
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
    port: Port,
    tx: Range<usize>,
    rx: Range<usize>,
    no_tx_poll: bool,
    info: RegInfo,
    /// Syncs where the application's head or cur was out of range and the
    /// ring was put back to its last valid state (netmap's ring reinit).
    reinits: u64,
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
    wake: EventFd,
    inner: Mutex<Inner>,
}

/// The socket the daemon listens on, as the client library finds it.
pub fn socket_path() -> PathBuf {
    ringswitch_client::default_socket_path()
}

fn errno_of(e: &ClientError) -> i32 {
    match e {
        ClientError::Call(CallError::NoDaemon { .. }) => libc::ENOENT,
        ClientError::Call(CallError::Daemon(r)) => match r.code {
            ErrorCode::BadName | ErrorCode::Geometry | ErrorCode::BadRequest => libc::EINVAL,
            ErrorCode::NotFound => libc::ENXIO,
            ErrorCode::Exists => libc::EEXIST,
            ErrorCode::Busy => libc::EBUSY,
            ErrorCode::Limit => libc::ENOMEM,
            ErrorCode::Unsupported => libc::EOPNOTSUPP,
            ErrorCode::Permission => libc::EPERM,
            ErrorCode::Internal => libc::EIO,
        },
        ClientError::NoRing(_) => libc::EINVAL,
        _ => libc::EIO,
    }
}

/// Region identity for `nr_mem_id`: the memfd's inode, folded into 1..=65535.
fn mem_id(port: &Port) -> u16 {
    // SAFETY: a zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on the region's open memfd, writing into `st`.
    let r = unsafe { libc::fstat(port.region().fd().as_raw_fd(), &mut st) };
    if r != 0 {
        return 1;
    }
    (st.st_ino % 65535) as u16 + 1
}

impl NmFile {
    /// Opens an emulated file: connects to the daemon and makes the epoll
    /// set the application will hold. `cloexec` follows O_CLOEXEC.
    pub fn open(cloexec: bool) -> Result<Box<NmFile>, Errno> {
        let socket = socket_path();
        let conn = Connection::connect(&socket).map_err(|e| {
            let errno = errno_of(&ClientError::Call(e));
            Errno::with(
                errno,
                format!("opening /dev/netmap: {}", describe_no_daemon(&socket)),
            )
        })?;
        let flags = if cloexec { libc::EPOLL_CLOEXEC } else { 0 };
        // SAFETY: epoll_create1 with valid flags.
        let fd = unsafe { libc::epoll_create1(flags) };
        if fd < 0 {
            return Err(Errno::last("creating the /dev/netmap descriptor"));
        }
        let wake = match EventFd::new() {
            Ok(w) => w,
            Err(e) => {
                // SAFETY: closing the epoll fd made just above.
                unsafe { real::close(fd) };
                return Err(Errno::io(e, "creating the /dev/netmap wake eventfd"));
            }
        };
        let file = Box::new(NmFile {
            fd,
            socket,
            wake,
            inner: Mutex::new(Inner {
                conn: Some(conn),
                bound: None,
            }),
        });
        if let Err(e) = file.watch(file.wake.as_raw_fd()) {
            // SAFETY: as above.
            unsafe { real::close(fd) };
            return Err(e);
        }
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
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: epoll_ctl on our epoll set with a live descriptor.
        let r = unsafe { real::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r != 0 {
            return Err(Errno::last("adding the port's interrupts to /dev/netmap"));
        }
        Ok(())
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
        let conn = match inner.conn.take() {
            Some(c) => c,
            None => Connection::connect(&self.socket).map_err(|e| {
                Errno::with(
                    errno_of(&ClientError::Call(e)),
                    describe_no_daemon(&self.socket),
                )
            })?,
        };
        let port = Port::open_on(conn, name)
            .map_err(|e| Errno::with(errno_of(&e), format!("{name}: {}", error_chain(&e))))?;
        let g = port.geometry();
        let (ntx, nrx) = (g.tx_rings as usize, g.rx_rings as usize);
        let (mut tx, mut rx, mode_used) = match req.mode {
            mode::DEFAULT | mode::ALL_NIC => (0..ntx, 0..nrx, mode::ALL_NIC),
            mode::ONE_NIC => {
                let i = req.ringid as usize;
                if i >= ntx.max(nrx) {
                    return Err(Errno::with(
                        libc::EINVAL,
                        format!("{name}: ring {i} does not exist (the port has {} rings)", ntx.max(nrx)),
                    ));
                }
                (i.min(ntx)..(i + 1).min(ntx), i.min(nrx)..(i + 1).min(nrx), mode::ONE_NIC)
            }
            mode::NULL => (0..0, 0..0, mode::NULL),
            mode::SW | mode::NIC_SW | mode::ONE_SW => {
                return Err(Errno::with(
                    libc::EINVAL,
                    format!("{name}: ringswitch ports have no host-stack rings (attach the host stack as its own port: ringswitch ctl attach SWITCH --host)"),
                ))
            }
            m => {
                return Err(Errno::with(
                    libc::EINVAL,
                    format!("{name}: registration mode {m} is not supported"),
                ))
            }
        };
        if req.flags & flags::TX_RINGS_ONLY != 0 {
            rx = 0..0;
        }
        if req.flags & flags::RX_RINGS_ONLY != 0 {
            tx = 0..0;
        }
        self.watch(port.poll_fd().as_raw_fd())?;
        let info = RegInfo {
            nifp_offset: port.info().nifp_offset,
            memsize: port.region().len() as u64,
            tx_rings: g.tx_rings as u16,
            rx_rings: g.rx_rings as u16,
            tx_slots: g.tx_slots,
            rx_slots: g.rx_slots,
            mem_id: mem_id(&port),
            mode: mode_used,
        };
        let mut b = Bound {
            port,
            tx,
            rx,
            no_tx_poll: req.flags & flags::NO_TX_POLL != 0,
            info,
            reinits: 0,
        };
        // Put the ring headers in the state a freshly registered netmap
        // ring has, whatever a previous user left there.
        for i in b.tx.clone() {
            b.port.app_ring(Dir::Tx, i).mirror_to_header();
        }
        for i in b.rx.clone() {
            b.port.app_ring(Dir::Rx, i).mirror_to_header();
        }
        inner.bound = Some(b);
        Ok(info)
    }

    /// The registration, if any.
    pub fn info(&self) -> Option<RegInfo> {
        self.lock().bound.as_ref().map(|b| b.info)
    }

    /// The region's memfd and size, for mmap.
    pub fn with_region<T>(&self, f: impl FnOnce(RawFd, usize) -> T) -> Option<T> {
        let inner = self.lock();
        let b = inner.bound.as_ref()?;
        Some(f(b.port.region().fd().as_raw_fd(), b.port.region().len()))
    }

    /// NIOCTXSYNC.
    pub fn txsync(&self) -> Result<(), Errno> {
        let mut inner = self.lock();
        let b = inner.bound.as_mut().ok_or_else(not_registered)?;
        b.txsync();
        Ok(())
    }

    /// NIOCRXSYNC.
    pub fn rxsync(&self) -> Result<(), Errno> {
        let mut inner = self.lock();
        let b = inner.bound.as_mut().ok_or_else(not_registered)?;
        b.rxsync();
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
    /// double check). Returns what is ready; when something is, the request
    /// is withdrawn and, with `signal`, the wake eventfd is signalled so a
    /// sleep the caller cannot skip (an application's epoll_wait) returns
    /// at once.
    pub fn arm(&self, events: i16, signal: bool) -> i16 {
        let mut inner = self.lock();
        let Some(b) = inner.bound.as_mut() else {
            // Unregistered: poll reports POLLERR at once.
            if signal {
                self.wake.signal();
            }
            return libc::POLLERR;
        };
        b.set_need_kick(events, true);
        let ready = b.poll_events(events);
        if ready != 0 {
            b.set_need_kick(events, false);
            if signal {
                self.wake.signal();
            }
        }
        ready
    }

    /// After a sleep: drains the interrupts and withdraws the requests.
    pub fn after_wait(&self) {
        self.wake.drain();
        if let Some(b) = self.lock().bound.as_mut() {
            b.port.after_wait();
        }
    }

    /// Ring reinits so far (bad head/cur from the application).
    pub fn reinits(&self) -> u64 {
        self.lock().bound.as_ref().map_or(0, |b| b.reinits)
    }
}

impl Drop for NmFile {
    fn drop(&mut self) {
        // The port (and with it the daemon connection) closes with `inner`;
        // the application's descriptor is closed by the caller of `remove`.
        if let Some(b) = self.inner.get_mut().ok().and_then(|i| i.bound.as_ref()) {
            if b.reinits > 0 {
                tracing::warn!(
                    reinits = b.reinits,
                    "the application wrote invalid ring pointers"
                );
            }
        }
    }
}

impl Bound {
    fn txsync(&mut self) {
        for i in self.tx.clone() {
            let ring = self.port.app_ring(Dir::Tx, i);
            if !ring.adopt_header_pointers() {
                // Out of range or backwards: keep the last valid state and
                // show it to the application again.
                ring.mirror_to_header();
                self.reinits += 1;
            }
            self.port.txsync(i);
        }
    }

    fn rxsync(&mut self) {
        for i in self.rx.clone() {
            let ring = self.port.app_ring(Dir::Rx, i);
            if !ring.adopt_header_pointers() {
                ring.mirror_to_header();
                self.reinits += 1;
            }
            self.port.rxsync(i);
        }
    }

    fn poll_events(&mut self, events: i16) -> i16 {
        let want_tx = events & libc::POLLOUT != 0;
        let want_rx = events & libc::POLLIN != 0;
        if want_tx || !self.no_tx_poll {
            self.txsync();
        }
        if want_rx {
            self.rxsync();
        }
        let mut r = 0;
        if want_tx
            && self
                .tx
                .clone()
                .any(|i| self.port.app_ring(Dir::Tx, i).space() > 0)
        {
            r |= libc::POLLOUT;
        }
        if want_rx
            && self
                .rx
                .clone()
                .any(|i| self.port.app_ring(Dir::Rx, i).space() > 0)
        {
            r |= libc::POLLIN;
        }
        r
    }

    fn set_need_kick(&mut self, events: i16, on: bool) {
        if events & libc::POLLOUT != 0 {
            for i in self.tx.clone() {
                self.port.app_ring(Dir::Tx, i).set_need_kick(on);
            }
        }
        if events & libc::POLLIN != 0 {
            for i in self.rx.clone() {
                self.port.app_ring(Dir::Rx, i).set_need_kick(on);
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

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
