//! The listening sockets of VM-facing ports (vhost-user in server mode,
//! passthrough): bound at the path the user gave, replacing a stale socket
//! an earlier daemon left there but nothing else.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// Why a port's socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Something other than a socket is at the path.
    #[error("{0} exists and is not a socket; choose another path or remove it")]
    NotASocket(PathBuf),
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

/// Binds a non-blocking listening socket at `path`.
pub fn bind(path: &Path) -> Result<UnixListener, ListenError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            let _ = std::fs::remove_file(path);
        }
        Ok(_) => return Err(ListenError::NotASocket(path.to_path_buf())),
        Err(_) => {}
    }
    let bind_err = |source| ListenError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let l = UnixListener::bind(path).map_err(bind_err)?;
    l.set_nonblocking(true).map_err(bind_err)?;
    Ok(l)
}
