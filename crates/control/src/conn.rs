//! The client end of the control socket: one request, one reply; a
//! listing is asked for in pages and put back together here.

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
    /// A listing's pages went past what this client gathers.
    #[error("the daemon's listing is larger than {max} bytes; ask for less (one switch)", max = crate::proto::MAX_LISTING_BYTES)]
    ListingTooLarge,
    /// A page of a listing did not move on from the previous one.
    #[error("the daemon sent a page of a listing that does not follow the previous one")]
    BadPage,
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

    /// Sends a request and waits for its reply and descriptors. A listing
    /// (`switch-list`, `port-list`, `stats`, `macs`) is asked for page by
    /// page ([`Request::Page`]) and returned whole, so it may be of any
    /// length up to [`MAX_LISTING_BYTES`](crate::proto::MAX_LISTING_BYTES).
    pub fn call(&mut self, req: &Request) -> Result<(serde_json::Value, Vec<OwnedFd>), CallError> {
        if !req.is_listing() {
            let (reply, fds) = self.call_one(req)?;
            return Ok((reply.result.unwrap_or(serde_json::Value::Null), fds));
        }
        let mut all: Vec<serde_json::Value> = Vec::new();
        let mut after = String::new();
        let mut total = 0usize;
        loop {
            let page = Request::Page {
                request: Box::new(req.clone()),
                after: std::mem::take(&mut after),
            };
            let (reply, bytes) = self.call_page(&page)?;
            total = total.saturating_add(bytes);
            if total > crate::proto::MAX_LISTING_BYTES {
                return Err(CallError::ListingTooLarge);
            }
            let entries = match reply.result {
                Some(serde_json::Value::Array(v)) => v,
                Some(serde_json::Value::Null) | None => Vec::new(),
                Some(_) => return Err(CallError::BadPage),
            };
            // A page that is not the last holds something, so the bound on
            // the total also bounds the number of pages.
            if entries.is_empty() && reply.next.is_some() {
                return Err(CallError::BadPage);
            }
            all.extend(entries);
            match reply.next {
                // Each page must start after the previous one: a daemon
                // repeating a cursor would otherwise keep this loop going.
                Some(n) if n.is_empty() || n == page_after(&page) => {
                    return Err(CallError::BadPage)
                }
                Some(n) => after = n,
                None => return Ok((serde_json::Value::Array(all), Vec::new())),
            }
        }
    }

    /// One page: the reply and its size in bytes.
    fn call_page(&mut self, page: &Request) -> Result<(Reply, usize), CallError> {
        let (reply, fds) = self.call_one(page)?;
        if !fds.is_empty() {
            return Err(CallError::BadPage);
        }
        let bytes = reply
            .result
            .as_ref()
            .map_or(0, |v| serde_json::to_vec(v).map_or(0, |b| b.len()));
        Ok((reply, bytes))
    }

    /// One request, one reply message.
    fn call_one(&mut self, req: &Request) -> Result<(Reply, Vec<OwnedFd>), CallError> {
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
        Ok((reply, m.fds))
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

fn page_after(r: &Request) -> &str {
    match r {
        Request::Page { after, .. } => after,
        _ => "",
    }
}
