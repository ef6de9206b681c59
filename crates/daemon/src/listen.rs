//! The daemon's socket files: the control socket and the listening sockets
//! of VM-facing ports (vhost-user in server mode, passthrough).
//!
//! A path the user gives may name anything, the daemon's own control socket
//! or another program's socket included, so the rules are:
//!
//! - a socket file is removed only if this daemon created it: the daemon
//!   records each socket it binds (path, device, inode) in memory and in a
//!   state file beside its control socket, and removes a path only while it
//!   is still that file;
//! - a live socket (something accepts connections on it) is never replaced;
//! - a stale socket (nothing listens) is replaced only if the state file
//!   says an earlier run of this daemon created it (it was killed before it
//!   could clean up); any other file at the path is refused, with a
//!   sentence saying what to do;
//! - every socket is created with an explicit mode, never the umask's.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ringswitch_control::socket::{bind_with_mode, unlink_if_same};
use ringswitch_control::SocketAccess;
use tracing::{info, warn};

/// Why a socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Something other than a socket is at the path.
    #[error("{0} exists and is not a socket; choose another path or remove it")]
    NotASocket(PathBuf),
    /// A process accepts connections on the socket at the path.
    #[error("{0} is a socket in use by another program (or by this daemon); choose another path")]
    Live(PathBuf),
    /// A socket nobody listens on, which this daemon did not create.
    #[error("{0} is a socket this daemon did not create (nothing listens on it); if nothing uses it, remove it, or choose another path")]
    Foreign(PathBuf),
    /// Binding failed.
    #[error("cannot listen on {path}")]
    Bind {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// A socket file this daemon created.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Created {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// The daemon's record of its socket files, and the mode VM-facing sockets
/// get. Process-wide: the sockets are bound from several places (port
/// creation, the control socket), all in this process.
struct Sockets {
    created: Vec<Created>,
    /// Where `created` is kept across runs (beside the control socket).
    state: Option<PathBuf>,
    /// Mode and group of VM-facing sockets.
    vm_access: SocketAccess,
}

static SOCKETS: Mutex<Sockets> = Mutex::new(Sockets {
    created: Vec::new(),
    state: None,
    vm_access: SocketAccess::OWNER,
});

fn sockets() -> std::sync::MutexGuard<'static, Sockets> {
    SOCKETS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads a state file: one `dev ino path` per line; anything malformed is
/// skipped (the file is ours, but a half-written one must not stop a start).
fn read_state(path: &Path) -> Vec<Created> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            let dev = it.next()?.parse().ok()?;
            let ino = it.next()?.parse().ok()?;
            let path = PathBuf::from(it.next()?);
            Some(Created { path, dev, ino })
        })
        .collect()
}

fn write_state(s: &Sockets) {
    let Some(state) = &s.state else {
        return;
    };
    if s.created.is_empty() {
        let _ = std::fs::remove_file(state);
        return;
    }
    let mut text = String::new();
    for c in &s.created {
        text.push_str(&format!("{} {} {}\n", c.dev, c.ino, c.path.display()));
    }
    // Written beside, then renamed: a crash leaves the old file or the new.
    let tmp = state.with_extension("sockets.tmp");
    let res = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, state));
    if let Err(e) = res {
        warn!(path = %state.display(), error = %e, "cannot record the daemon's sockets");
    }
}

/// Records the daemon's sockets in `state` from now on (the first daemon of
/// the process sets it; later ones share it). Sockets an earlier run left
/// there stay listed until they are replaced or found gone.
pub fn set_state_file(state: PathBuf) {
    let mut s = sockets();
    if s.state.is_some() {
        return;
    }
    let earlier = read_state(&state);
    s.state = Some(state);
    for c in earlier {
        if !s.created.contains(&c) {
            s.created.push(c);
        }
    }
}

/// Sets the mode and group of the VM-facing sockets bound from now on.
pub fn set_vm_access(access: SocketAccess) {
    sockets().vm_access = access;
}

/// What is at `path`, decided without blocking on a peer.
enum Found {
    Nothing,
    NotASocket,
    Live,
    Stale,
}

fn probe(path: &Path) -> io::Result<Found> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(e),
    };
    if !m.file_type().is_socket() {
        return Ok(Found::NotASocket);
    }
    // A non-blocking connect: a listener with a full backlog answers
    // EAGAIN at once instead of making us wait; a listener of another type
    // answers EPROTOTYPE. Only ECONNREFUSED means nobody listens.
    match ringswitch_control::socket::probe_connect(path) {
        Ok(()) => Ok(Found::Live),
        Err(e) => match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => Ok(Found::Stale),
            Some(libc::ENOENT) => Ok(Found::Nothing),
            Some(_) => Ok(Found::Live),
            None => Err(e),
        },
    }
}

/// Clears the way to bind `path`: nothing there is fine; a stale socket
/// this daemon recorded as its own is removed; anything else is refused.
pub fn clear(path: &Path) -> Result<(), ListenError> {
    let bind_err = |source| ListenError::Bind {
        path: path.to_path_buf(),
        source,
    };
    match probe(path).map_err(bind_err)? {
        Found::Nothing => Ok(()),
        Found::NotASocket => Err(ListenError::NotASocket(path.to_path_buf())),
        Found::Live => Err(ListenError::Live(path.to_path_buf())),
        Found::Stale => {
            let m = std::fs::symlink_metadata(path).map_err(bind_err)?;
            let mut s = sockets();
            let ours = s
                .created
                .iter()
                .position(|c| c.path == path && c.dev == m.dev() && c.ino == m.ino());
            let Some(i) = ours else {
                return Err(ListenError::Foreign(path.to_path_buf()));
            };
            s.created.swap_remove(i);
            write_state(&s);
            drop(s);
            if unlink_if_same(path, (m.dev(), m.ino())) {
                info!(path = %path.display(), "removed a stale socket an earlier run of this daemon left");
            }
            Ok(())
        }
    }
}

/// Records a socket file this daemon just created.
pub fn record(path: &Path, (dev, ino): (u64, u64)) {
    let mut s = sockets();
    s.created.retain(|c| c.path != path);
    s.created.push(Created {
        path: path.to_path_buf(),
        dev,
        ino,
    });
    write_state(&s);
}

/// Removes `path` if it is a socket this daemon created and still the same
/// file; forgets it either way. Anything else at the path is left alone.
pub fn unlink_if_ours(path: &Path) {
    let mut s = sockets();
    let Some(i) = s.created.iter().position(|c| c.path == path) else {
        return;
    };
    let c = s.created.swap_remove(i);
    write_state(&s);
    drop(s);
    unlink_if_same(path, (c.dev, c.ino));
}

/// Forgets `path` without touching the file (its owner removed it).
pub fn forget(path: &Path) {
    let mut s = sockets();
    let before = s.created.len();
    s.created.retain(|c| c.path != path);
    if s.created.len() != before {
        write_state(&s);
    }
}

/// Binds a non-blocking listening stream socket at `path` for a VM-facing
/// port, with the VM sockets' mode (see [`set_vm_access`]). Refuses a path
/// where something else lives (see [`clear`]).
pub fn bind(path: &Path) -> Result<UnixListener, ListenError> {
    clear(path)?;
    let bind_err = |source| ListenError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let access = sockets().vm_access;
    // SAFETY: socket() with constant arguments returns a new fd or -1.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return Err(bind_err(io::Error::last_os_error()));
    }
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let id = bind_with_mode(fd.as_fd(), path, access).map_err(bind_err)?;
    // SAFETY: listen on our bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 16) } != 0 {
        let e = io::Error::last_os_error();
        unlink_if_same(path, id);
        return Err(bind_err(e));
    }
    record(path, id);
    Ok(UnixListener::from(fd))
}
