//! The vhost-user socket, both ways round: server mode (listen on a path;
//! QEMU connects with `reconnect=1`) and client mode (QEMU listens; connect,
//! and connect again after it restarts). Each connection is served by one
//! control thread that calls [`serve_connection`] until the frontend goes.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use vhost::vhost_user::{BackendListener, BackendReqHandler, Error as VuError, Listener};

use crate::device::VhostUserNet;

/// A device shared between its control thread and the switch workers.
pub type SharedNet = Arc<Mutex<VhostUserNet>>;

/// A connected frontend, ready for [`serve_connection`].
pub type Connection = BackendReqHandler<Mutex<VhostUserNet>>;

/// Socket errors.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Could not listen on the path.
    #[error("cannot listen on the vhost-user socket")]
    Listen(#[source] VuError),
    /// Could not accept a frontend.
    #[error("cannot accept a vhost-user frontend")]
    Accept(#[source] VuError),
    /// Could not connect to the frontend's socket.
    #[error("cannot connect to the vhost-user frontend")]
    Connect(#[source] VuError),
}

/// Server mode: a listening socket at `path` (an old socket file there is
/// replaced).
pub fn listen(path: &Path) -> Result<Listener, SocketError> {
    Listener::new(path, true).map_err(SocketError::Listen)
}

/// Server mode: waits for the next frontend on `listener`.
pub fn accept(listener: &mut Listener, dev: &SharedNet) -> Result<Connection, SocketError> {
    let mut l = BackendListener::new(listener, dev.clone()).map_err(SocketError::Accept)?;
    loop {
        match l.accept() {
            Ok(Some(c)) => return Ok(c),
            // Only on a nonblocking listener; keep waiting.
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(SocketError::Accept(e)),
        }
    }
}

/// Client mode: connects to the frontend's socket at `path`, retrying every
/// `retry` up to `attempts` times (QEMU may not be listening yet, or is
/// restarting).
pub fn connect(
    path: &Path,
    dev: &SharedNet,
    attempts: u32,
    retry: Duration,
) -> Result<Connection, SocketError> {
    let path_str = path.to_string_lossy();
    let mut last = None;
    for i in 0..attempts.max(1) {
        if i > 0 {
            thread::sleep(retry);
        }
        match BackendReqHandler::connect(&path_str, dev.clone()) {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(SocketError::Connect(last.expect("at least one attempt")))
}

/// Serves one frontend until it disconnects or sends something invalid,
/// then stops every vring and drops the guest memory, so the device is ready
/// for the next connection. Returns the error that ended the connection.
pub fn serve_connection(conn: &mut Connection, dev: &SharedNet) -> VuError {
    let err = loop {
        if let Err(e) = conn.handle_request() {
            break e;
        }
    };
    dev.lock().unwrap_or_else(|e| e.into_inner()).disconnected();
    err
}
