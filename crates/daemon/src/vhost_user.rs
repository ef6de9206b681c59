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
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringswitch_ring::EventFd;
use ringswitch_switch::SwitchPort;
use ringswitch_vhost::socket::{Connection, SharedNet};
use ringswitch_vhost::VhostError;
use tracing::{debug, info, warn};

/// How often client mode tries to connect again.
const RECONNECT: Duration = Duration::from_millis(250);

/// Errors starting a vhost-user port.
#[derive(Debug, thiserror::Error)]
pub enum VhostUserError {
    /// Something other than a socket is at the path.
    #[error("{0} exists and is not a socket; choose another path or remove it")]
    NotASocket(PathBuf),
    /// Binding the listening socket failed.
    #[error("cannot listen on {path}")]
    Listen {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
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
    thread: Option<std::thread::JoinHandle<()>>,
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
    ) -> Result<VhostUserThread, VhostUserError> {
        let mode = if client {
            Mode::Client(path.to_path_buf())
        } else {
            Mode::Server(bind(path)?, path.to_path_buf())
        };
        let stop = Arc::new(EventFd::new()?);
        let connected = Arc::new(AtomicBool::new(false));
        let current: Current = Arc::default();
        let (st, co, cu) = (stop.clone(), connected.clone(), current.clone());
        let thread = std::thread::Builder::new()
            .name(format!("rs-vhost-{}", port.index))
            .stack_size(256 * 1024)
            .spawn(move || run(port, dev, mode, &st, &co, &cu))?;
        Ok(VhostUserThread {
            stop,
            current,
            connected,
            thread: Some(thread),
        })
    }

    /// A frontend is connected now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

impl Drop for VhostUserThread {
    fn drop(&mut self) {
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
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds a listening socket at `path`, replacing a stale socket left by an
/// earlier daemon but nothing else.
fn bind(path: &Path) -> Result<UnixListener, VhostUserError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            let _ = std::fs::remove_file(path);
        }
        Ok(_) => return Err(VhostUserError::NotASocket(path.to_path_buf())),
        Err(_) => {}
    }
    let l = UnixListener::bind(path).map_err(|source| VhostUserError::Listen {
        path: path.to_path_buf(),
        source,
    })?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Waits until `fd` is readable (true) or `stop` fires or the timeout
/// passes (false).
fn wait_readable(fd: RawFd, stop: &EventFd, timeout: Option<Duration>) -> bool {
    let mut fds = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: `fds` is a valid array of two pollfd for the call's duration.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if n <= 0 || fds[1].revents != 0 {
        return false;
    }
    fds[0].revents != 0
}

/// Has the port been deleted (its stop doorbell rung)?
fn stopped(stop: &EventFd) -> bool {
    let mut p = libc::pollfd {
        fd: stop.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call's duration.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

fn run(
    port: Arc<SwitchPort>,
    dev: SharedNet,
    mode: Mode,
    stop: &EventFd,
    connected: &AtomicBool,
    current: &Current,
) {
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
                    Ok((s, _)) => serve(&port, &dev, s, stop, connected, current),
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
            let _ = std::fs::remove_file(&path);
        }
        Mode::Client(path) => {
            info!(port = %name, path = %path.display(), "vhost-user: connecting to the frontend");
            let mut warned = false;
            loop {
                match UnixStream::connect(&path) {
                    Ok(s) => {
                        warned = false;
                        serve(&port, &dev, s, stop, connected, current);
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

/// Serves one frontend until it goes, sends something invalid, or the port
/// is deleted. The device is reset afterwards, ready for the next one.
fn serve(
    port: &SwitchPort,
    dev: &SharedNet,
    stream: UnixStream,
    stop: &EventFd,
    connected: &AtomicBool,
    current: &Current,
) {
    let name = &port.name;
    let Some(v) = port.virtio() else {
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
    let mut generations: Vec<u64> = (0..v.pairs()).map(|k| v.pair(k).generation()).collect();
    loop {
        if !wait_readable(fd, stop, None) {
            if stopped(stop) {
                break;
            }
            continue;
        }
        let r = conn.handle_request();
        for (k, g) in generations.iter_mut().enumerate() {
            let now = v.pair(k).generation();
            if now != *g {
                *g = now;
                v.changed[k].signal();
            }
        }
        if let Err(e) = r {
            match e {
                VhostError::Disconnected | VhostError::PartialMessage => {
                    info!(port = %name, "vhost-user: frontend disconnected")
                }
                e => {
                    warn!(port = %name, error = %e, "vhost-user: closing the connection after an invalid message")
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
}
