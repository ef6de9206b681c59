//! The vhost-user side of VM ports: one thread per port speaks the protocol
//! with its frontend (QEMU, or a userspace virtio driver such as DPDK's
//! virtio_user), in server mode (listen on the path; the frontend connects,
//! and reconnects after a daemon restart) or client mode (connect to the
//! frontend's socket, and keep reconnecting after it goes).
//!
//! The thread only configures the device; the data path is the switch
//! worker's. After every message that changed a queue pair (new kick
//! eventfd, vrings started or stopped, memory replaced) it rings that
//! pair's `changed` doorbell so the worker serving it looks again.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringswitch_control::socket;
use ringswitch_frame::SharedQueue;
use ringswitch_ring::{poll, EventFd};
use ringswitch_switch::SwitchPort;
use ringswitch_vhost::socket::{Connection, SharedNet};
use ringswitch_vhost::VhostError;
use tracing::{debug, info, warn};

/// How often client mode tries to connect again.
const RECONNECT: Duration = Duration::from_millis(250);
/// How long one connection attempt in client mode may take before it is
/// given up (a frontend whose listen backlog is full never completes it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Errors starting a vhost-user port.
#[derive(Debug, thiserror::Error)]
pub enum VhostUserError {
    /// The socket could not be bound.
    #[error(transparent)]
    Listen(#[from] crate::listen::ListenError),
    /// Other system call failures.
    #[error("cannot start the vhost-user thread")]
    Io(#[from] io::Error),
}

/// The connection being served, so deleting the port can cut it even while
/// the thread is blocked inside a message (half a header, or a reply the
/// frontend does not read). The thread clears it before closing the socket,
/// under the lock, so the descriptor shut down is never a reused one.
type Current = Arc<std::sync::Mutex<Option<RawFd>>>;

/// The protocol thread of one VM port.
pub struct VhostUserThread {
    stop: Arc<EventFd>,
    current: Current,
    connected: Arc<AtomicBool>,
    /// Frontend connections closed after a message the device refused (a
    /// statistic, Relaxed).
    frontend_errors: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Called with `true` when the port's guest starts running on it (a queue
/// pair started) and with `false` when it stops: every queue pair stopped
/// (GET_VRING_BASE, as a migration's source does) or the frontend gone.
/// The registry tells the switch, which marks the port's link, makes the
/// switch forget the addresses learned there when it stops (so frames for
/// a guest that moved flood until it is learned where it is), and moves
/// an OpenFlow number two ports asked for to the one that runs.
pub type OnRunning = Box<dyn Fn(bool) + Send>;

/// What one connection's protocol thread shares with the rest.
struct Shared<'a> {
    stop: &'a EventFd,
    connected: &'a AtomicBool,
    current: &'a Current,
    frontend_errors: &'a AtomicU64,
    on_running: &'a OnRunning,
}

enum Mode {
    Server(UnixListener, PathBuf),
    Client(PathBuf),
}

impl VhostUserThread {
    /// Starts serving `port` (a VM port on device `dev`) on `path`. In
    /// server mode the socket is bound here, so a bad path is reported to
    /// the caller.
    pub fn start(
        port: Arc<SwitchPort>,
        dev: SharedNet,
        path: &Path,
        client: bool,
        on_running: OnRunning,
    ) -> Result<VhostUserThread, VhostUserError> {
        let mode = if client {
            Mode::Client(path.to_path_buf())
        } else {
            Mode::Server(crate::listen::bind(path)?, path.to_path_buf())
        };
        let stop = Arc::new(EventFd::new()?);
        let connected = Arc::new(AtomicBool::new(false));
        let current: Current = Arc::default();
        let frontend_errors = Arc::new(AtomicU64::new(0));
        let (st, co, cu) = (stop.clone(), connected.clone(), current.clone());
        let fe = frontend_errors.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rs-vhost-{}", port.index))
            .stack_size(256 * 1024)
            .spawn(move || {
                let sh = Shared {
                    stop: &st,
                    connected: &co,
                    current: &cu,
                    frontend_errors: &fe,
                    on_running: &on_running,
                };
                run(port, dev, mode, &sh)
            })?;
        Ok(VhostUserThread {
            stop,
            current,
            connected,
            frontend_errors,
            thread: Some(thread),
        })
    }

    /// Frontend connections closed after a message the device refused.
    pub fn frontend_errors(&self) -> u64 {
        self.frontend_errors.load(Ordering::Relaxed)
    }

    /// A frontend is connected now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

impl VhostUserThread {
    /// Tells the thread to stop, without waiting: it notices at its next
    /// wait, and a connection it is blocked on is shut down. Never blocks,
    /// so the registry calls it under its lock and joins later (on drop),
    /// after unlocking.
    pub fn request_stop(&self) {
        self.stop.signal();
        if let Some(fd) = *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            // SAFETY: `fd` is the open connection socket: the thread clears
            // `current` under this lock before it closes the socket.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    }
}

impl Drop for VhostUserThread {
    fn drop(&mut self) {
        self.request_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A device's queue pairs as the frame queues of its switch port (shared
/// with this thread, which handles their configuration).
pub fn queues_of(dev: &SharedNet) -> Vec<SharedQueue> {
    let dev = dev
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut queues: Vec<SharedQueue> = Vec::with_capacity(dev.ports().len());
    for p in dev.ports() {
        queues.push(p.clone());
    }
    queues
}

/// Waits until `fd` is readable (true) or `stop` fires or the timeout
/// passes (false).
fn wait_readable(fd: RawFd, stop: &EventFd, timeout: Option<Duration>) -> bool {
    let mut fds = [
        poll::watch(fd, libc::POLLIN),
        poll::watch(stop.as_raw_fd(), libc::POLLIN),
    ];
    match poll::poll_fds(&mut fds, timeout) {
        Ok(n) if n > 0 && fds[1].revents == 0 => fds[0].revents != 0,
        _ => false,
    }
}

/// Has the port been deleted (its stop doorbell rung)?
fn stopped(stop: &EventFd) -> bool {
    let mut p = [poll::watch(stop.as_raw_fd(), libc::POLLIN)];
    poll::poll_fds(&mut p, Some(Duration::ZERO)).is_ok_and(|n| n > 0)
}

fn run(port: Arc<SwitchPort>, dev: SharedNet, mode: Mode, sh: &Shared<'_>) {
    let stop = sh.stop;
    let name = port.name.clone();
    match mode {
        Mode::Server(listener, path) => {
            info!(port = %name, path = %path.display(), "vhost-user: listening");
            loop {
                if !wait_readable(listener.as_raw_fd(), stop, None) {
                    if stopped(stop) {
                        break;
                    }
                    continue;
                }
                match listener.accept() {
                    Ok((s, _)) => serve(&port, &dev, s, sh),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        warn!(port = %name, error = %e, "vhost-user: accept failed");
                        std::thread::sleep(RECONNECT);
                    }
                }
                if stopped(stop) {
                    break;
                }
            }
            crate::listen::unlink_if_ours(&path);
        }
        Mode::Client(path) => {
            info!(port = %name, path = %path.display(), "vhost-user: connecting to the frontend");
            let mut warned = false;
            loop {
                match connect(&path, stop, CONNECT_TIMEOUT) {
                    Ok(s) => {
                        warned = false;
                        serve(&port, &dev, s, sh);
                    }
                    Err(e) => {
                        if !warned {
                            debug!(port = %name, error = %e, "vhost-user: frontend not there yet; retrying");
                            warned = true;
                        }
                    }
                }
                // Wait before the next attempt (or stop).
                let _ = wait_readable(-1, stop, Some(RECONNECT));
                if stopped(stop) {
                    break;
                }
            }
        }
    }
}

/// Connects to the frontend's socket at `path` without ever blocking for
/// longer than `timeout`, and not at all once `stop` fires: the socket is
/// non-blocking, so a listener whose backlog is full fails the attempt
/// (`WouldBlock`) instead of holding the thread, and an attempt still in
/// progress is polled together with `stop`.
fn connect(path: &Path, stop: &EventFd, timeout: Duration) -> io::Result<UnixStream> {
    // Unix sockets say EAGAIN when the backlog is full: the caller retries
    // later.
    let (fd, in_progress) = socket::connect_nonblocking(path)?;
    let stream = UnixStream::from(fd);
    if in_progress {
        let mut fds = [
            poll::watch(stream.as_raw_fd(), libc::POLLOUT),
            poll::watch(stop.as_raw_fd(), libc::POLLIN),
        ];
        let n = poll::poll_fds(&mut fds, Some(timeout))?;
        if n == 0 || fds[1].revents != 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the frontend did not accept the connection in time",
            ));
        }
        // How the connection ended (SO_ERROR).
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    Ok(stream)
}

/// Serves one frontend until it goes, sends something invalid, or the port
/// is deleted. The device is reset afterwards, ready for the next one.
fn serve(port: &SwitchPort, dev: &SharedNet, stream: UnixStream, sh: &Shared<'_>) {
    let Shared {
        stop,
        connected,
        current,
        frontend_errors,
        on_running,
    } = *sh;
    let name = &port.name;
    let Some(v) = port.queues() else {
        return;
    };
    if let Err(e) = stream.set_nonblocking(false) {
        warn!(port = %name, error = %e, "vhost-user: cannot use the connection");
        return;
    }
    let fd = stream.as_raw_fd();
    let set_current = |v: Option<RawFd>| {
        *current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = v;
    };
    set_current(Some(fd));
    if stopped(stop) {
        set_current(None);
        return;
    }
    let mut conn: Connection = Connection::from_stream(stream, dev.clone());
    info!(port = %name, "vhost-user: frontend connected");
    connected.store(true, Ordering::Relaxed);
    let mut generations: Vec<u64> = (0..v.queues())
        .map(|k| v.queue(k).wake_generation())
        .collect();
    // Whether a queue pair ran since the guest last stopped on this port.
    let mut ran = false;
    loop {
        if !wait_readable(fd, stop, None) {
            if stopped(stop) {
                break;
            }
            continue;
        }
        let r = match own_message(fd, dev) {
            Ok(true) => Ok(()),
            Ok(false) => conn.handle_request(),
            Err(e) => Err(VhostError::SocketBroken(e)),
        };
        let mut moved = false;
        for (k, g) in generations.iter_mut().enumerate() {
            let now = v.queue(k).wake_generation();
            if now != *g {
                *g = now;
                v.changed[k].signal();
                moved = true;
            }
        }
        if moved {
            let running = (0..v.queues()).any(|k| v.queue(k).is_up());
            if ran && !running {
                debug!(port = %name, "vhost-user: every queue pair stopped; the switch forgets the addresses learned here");
                on_running(false);
            } else if running && !ran {
                debug!(port = %name, "vhost-user: the guest runs here");
                on_running(true);
            }
            ran = running;
        }
        if let Err(e) = r {
            match e {
                VhostError::Disconnected | VhostError::PartialMessage => {
                    info!(port = %name, "vhost-user: frontend disconnected")
                }
                e => {
                    frontend_errors.fetch_add(1, Ordering::Relaxed);
                    // A frontend can reconnect and fail again in a loop.
                    if ringswitch_vhost::log_allowed(&REFUSED_LOGGED) {
                        warn!(port = %name, error = %e, "vhost-user: closing the connection after an invalid message")
                    }
                }
            }
            break;
        }
    }
    set_current(None);
    drop(conn);
    dev.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .disconnected();
    connected.store(false, Ordering::Relaxed);
    for c in v.changed.iter() {
        c.signal();
    }
    if ran {
        on_running(false);
    }
}

/// The second the last refused frontend was logged (one line a second).
static REFUSED_LOGGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// vhost-user request codes of SET_VRING_ENABLE and SEND_RARP.
const SET_VRING_ENABLE: u32 = 18;
const SEND_RARP: u32 = 19;
/// Header flags: protocol version 1, a reply, a reply wanted.
const FLAG_VERSION: u32 = 0x1;
const FLAG_REPLY: u32 = 0x4;
const FLAG_NEED_REPLY: u32 = 0x8;

/// A message this module takes itself (see [`own_message`]), parsed from
/// the 20 bytes a frontend sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnMessage {
    /// SET_VRING_ENABLE before any feature was acked: queue `index`,
    /// enable when `enable`.
    EarlyVringEnable {
        /// The queue.
        index: u32,
        /// Enable (1) or disable (0).
        enable: bool,
        /// The frontend wants a reply.
        need_reply: bool,
    },
    /// SET_VRING_ENABLE before any feature was acked with a value other
    /// than 0 or 1: refused (a reply says so when one is wanted).
    BadEarlyVringEnable {
        /// The frontend wants a reply.
        need_reply: bool,
    },
    /// SEND_RARP with the guest's address.
    SendRarp {
        /// The address (the payload's first 6 bytes).
        mac: [u8; 6],
        /// The frontend wants a reply.
        need_reply: bool,
    },
}

impl OwnMessage {
    /// The message's request code.
    pub fn request(&self) -> u32 {
        match self {
            OwnMessage::SendRarp { .. } => SEND_RARP,
            _ => SET_VRING_ENABLE,
        }
    }

    fn need_reply(&self) -> bool {
        match *self {
            OwnMessage::EarlyVringEnable { need_reply, .. }
            | OwnMessage::BadEarlyVringEnable { need_reply }
            | OwnMessage::SendRarp { need_reply, .. } => need_reply,
        }
    }
}

/// Which of the messages this module takes `msg` (the first 20 bytes a
/// frontend sent, peeked) is, if any: a header of version 1 with no other
/// flag than NEED_REPLY, a payload of exactly 8 bytes, and SEND_RARP, or
/// SET_VRING_ENABLE while `nothing_acked` (no feature acked yet). Anything
/// else is left to the `vhost` crate, which validates it in full.
pub fn parse_own(msg: &[u8; 20], nothing_acked: bool) -> Option<OwnMessage> {
    let word = |i: usize| u32::from_le_bytes([msg[i], msg[i + 1], msg[i + 2], msg[i + 3]]);
    let (request, flags, size) = (word(0), word(4), word(8));
    if size != 8 || flags & !(0x3 | FLAG_NEED_REPLY) != 0 {
        return None;
    }
    let need_reply = flags & FLAG_NEED_REPLY != 0;
    match request {
        SET_VRING_ENABLE if nothing_acked => Some(match word(16) {
            n @ (0 | 1) => OwnMessage::EarlyVringEnable {
                index: word(12),
                enable: n == 1,
                need_reply,
            },
            _ => OwnMessage::BadEarlyVringEnable { need_reply },
        }),
        SEND_RARP => {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&msg[12..18]);
            Some(OwnMessage::SendRarp { mac, need_reply })
        }
        _ => None,
    }
}

/// Messages the `vhost` crate does not take when they come, taken off the
/// socket here and handed to the device. Returns true when it did that;
/// false leaves the message to the crate.
///
/// - SET_VRING_ENABLE before any feature is acked: QEMU's vhost-user net
///   backend disables every ring right after SET_OWNER, before
///   SET_FEATURES, but the crate refuses the message until
///   PROTOCOL_FEATURES is acked, which would end every QEMU connection.
/// - SEND_RARP: the crate has no handler for it; QEMU sends it after a
///   migration when the guest does not announce itself
///   (VIRTIO_NET_F_GUEST_ANNOUNCE not negotiated), with the guest's MAC
///   address. The device then sends a RARP from it into the switch.
///
/// Both are 20 bytes (a header and a u64), with no descriptors
/// ([`parse_own`]).
fn own_message(fd: RawFd, dev: &SharedNet) -> io::Result<bool> {
    let mut msg = [0u8; 20];
    // SAFETY: peeks at most 20 bytes into a local buffer from the connected
    // socket the caller owns.
    let n = unsafe {
        libc::recv(
            fd,
            msg.as_mut_ptr().cast(),
            msg.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n != msg.len() as isize {
        return Ok(false);
    }
    let lock = || {
        dev.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let Some(own) = parse_own(&msg, lock().acked_features() == 0) else {
        return Ok(false);
    };
    // SAFETY: consumes exactly the 20 bytes peeked above (one whole message,
    // no descriptors) into a local buffer.
    let n = unsafe { libc::recv(fd, msg.as_mut_ptr().cast(), msg.len(), libc::MSG_DONTWAIT) };
    if n != msg.len() as isize {
        return Err(io::Error::other(
            "the frontend's message went away while being read",
        ));
    }
    use ringswitch_vhost::vhost_user::VhostUserBackendReqHandlerMut;
    let res = match own {
        OwnMessage::EarlyVringEnable { index, enable, .. } => {
            let r = lock().set_vring_enable(index, enable).map_err(|_| ());
            debug!(
                index,
                enable,
                ok = r.is_ok(),
                "vhost-user: SET_VRING_ENABLE before SET_FEATURES"
            );
            r.map_err(|()| "SET_VRING_ENABLE names no queue of this device")
        }
        OwnMessage::BadEarlyVringEnable { .. } => {
            Err("SET_VRING_ENABLE with a value other than 0 or 1")
        }
        OwnMessage::SendRarp { mac, .. } => lock()
            .send_rarp(mac)
            .map_err(|_| "SEND_RARP without the RARP protocol feature"),
    };
    if own.need_reply() {
        let mut reply = [0u8; 20];
        reply[0..4].copy_from_slice(&own.request().to_le_bytes());
        reply[4..8].copy_from_slice(&(FLAG_VERSION | FLAG_REPLY).to_le_bytes());
        reply[8..12].copy_from_slice(&8u32.to_le_bytes());
        reply[12..20].copy_from_slice(&u64::from(res.is_err()).to_le_bytes());
        // SAFETY: writes 20 bytes from a local buffer to the socket.
        let n = unsafe { libc::send(fd, reply.as_ptr().cast(), reply.len(), libc::MSG_NOSIGNAL) };
        if n != reply.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    res.map_err(io::Error::other)?;
    Ok(true)
}
