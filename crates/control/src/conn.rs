//! The client end of the control socket: one request, one reply.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::proto::{ErrorReply, Reply, Request};
use crate::socket::SeqPacket;

/// Errors talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing listens on the socket.
    #[error("no ringswitch daemon is listening on {}: start one with `ringswitch serve` (or point --socket or RINGSWITCH_SOCKET at a running one)", path.display())]
    NoDaemon {
        /// The socket path tried.
        path: PathBuf,
        /// The connect error.
        #[source]
        source: io::Error,
    },
    /// The process listening on the socket runs as a user this client does
    /// not trust to be its daemon.
    #[error("the socket {} is served by uid {uid}, not by root or by you (uid {me}): another user may have put it there; if you trust that daemon, set RINGSWITCH_DAEMON_UID={uid}", path.display())]
    Untrusted {
        /// The socket path.
        path: PathBuf,
        /// The uid of the process listening on it.
        uid: u32,
        /// This client's uid.
        me: u32,
    },
    /// The socket failed.
    #[error("talking to the daemon failed")]
    Io(#[from] io::Error),
    /// The daemon closed the connection.
    #[error("the daemon closed the connection")]
    HungUp,
    /// The reply did not parse.
    #[error("the daemon sent a reply this client cannot read")]
    BadReply(#[source] serde_json::Error),
    /// The daemon refused the request.
    #[error(transparent)]
    Daemon(ErrorReply),
}

/// A connection to the daemon. Ports opened on it live as long as it does.
#[derive(Debug)]
pub struct Connection {
    sock: SeqPacket,
    buf: Vec<u8>,
}

impl Connection {
    /// Connects to the daemon at `path`, after checking that the process
    /// listening there runs as root, as this user, or as the uid in
    /// `RINGSWITCH_DAEMON_UID` ([`crate::trusted_daemon_uid`]).
    pub fn connect(path: &Path) -> Result<Connection, CallError> {
        let sock = SeqPacket::connect(path).map_err(|source| CallError::NoDaemon {
            path: path.to_path_buf(),
            source,
        })?;
        let uid = sock.peer_cred()?.uid;
        if !crate::trusted_daemon_uid(uid) {
            return Err(CallError::Untrusted {
                path: path.to_path_buf(),
                uid,
                me: crate::socket::euid(),
            });
        }
        Ok(Connection {
            sock,
            buf: SeqPacket::reply_buffer(),
        })
    }

    /// Wraps an already connected socket.
    pub fn from_socket(sock: SeqPacket) -> Connection {
        Connection {
            sock,
            buf: SeqPacket::reply_buffer(),
        }
    }

    /// Sends a request and waits for its reply and descriptors.
    pub fn call(&mut self, req: &Request) -> Result<(serde_json::Value, Vec<OwnedFd>), CallError> {
        let bytes = serde_json::to_vec(req).map_err(CallError::BadReply)?;
        self.sock.send(&bytes, &[])?;
        let m = self.sock.recv(&mut self.buf)?;
        if m.len == 0 {
            return Err(CallError::HungUp);
        }
        let reply: Reply =
            serde_json::from_slice(&self.buf[..m.len]).map_err(CallError::BadReply)?;
        if !reply.ok {
            return Err(CallError::Daemon(reply.error.unwrap_or_else(|| {
                ErrorReply::new(
                    crate::proto::ErrorCode::Internal,
                    "the daemon refused without saying why",
                )
            })));
        }
        Ok((reply.result.unwrap_or(serde_json::Value::Null), m.fds))
    }

    /// Like [`Connection::call`], decoding the result as `T`.
    pub fn call_as<T: DeserializeOwned>(
        &mut self,
        req: &Request,
    ) -> Result<(T, Vec<OwnedFd>), CallError> {
        let (v, fds) = self.call(req)?;
        Ok((serde_json::from_value(v).map_err(CallError::BadReply)?, fds))
    }

    /// The socket.
    pub fn socket(&self) -> &SeqPacket {
        &self.sock
    }
}
