//! One OpenFlow connection: a non-blocking stream, its protocol session,
//! and its bounded output.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use ringswitch_openflow::consts::OFPCR_ROLE_EQUAL;
use ringswitch_openflow::{Message, Session};

/// Bytes waiting to be written to one connection, at most: a peer that
/// does not read its replies is disconnected when they pass this (a dump
/// of 65,536 flows of 8 tables is well under it).
pub const MAX_OUTPUT: usize = 64 * 1024 * 1024;

/// Bytes read from one connection per turn of the loop, so one busy peer
/// does not starve the others.
pub const READ_PER_TURN: usize = 256 * 1024;

/// A unix or TCP stream, non-blocking.
pub enum Stream {
    /// `unix:PATH`.
    Unix(UnixStream),
    /// `ptcp:` or `tcp:`.
    Tcp(TcpStream),
}

impl Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    /// The descriptor, to poll.
    pub fn fd(&self) -> RawFd {
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
}

/// Why a connection is closed.
#[derive(Debug)]
pub enum Closed {
    /// The peer closed it (or it failed).
    Peer,
    /// The peer did not read: its output passed [`MAX_OUTPUT`].
    NotReading,
    /// The peer said no HELLO within [`HELLO_WAIT`].
    Silent,
    /// The session ended (a bad HELLO, lost framing).
    Session,
}

/// One connection.
pub struct Conn {
    /// Its stream.
    pub stream: Stream,
    /// Its protocol state.
    pub session: Session,
    /// Bytes not yet written, from `sent` on.
    out: Vec<u8>,
    sent: usize,
    /// Made to a controller (not accepted from a management client).
    pub controller: bool,
    /// Its role (`OFPCR_ROLE_*`), equal at first.
    pub role: u32,
    /// Closing once its output is written.
    pub closing: bool,
    /// When it was made: a peer that has not said HELLO within
    /// [`HELLO_WAIT`] is disconnected, so silent peers do not hold the
    /// switch's connections.
    pub since: std::time::Instant,
}

/// How long a peer has to send its HELLO.
pub const HELLO_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Conn {
    /// A new connection; our HELLO is queued.
    pub fn new(stream: Stream, controller: bool) -> Conn {
        let mut c = Conn {
            stream,
            session: Session::new(),
            out: Vec::new(),
            sent: 0,
            controller,
            role: OFPCR_ROLE_EQUAL,
            closing: false,
            since: std::time::Instant::now(),
        };
        c.collect();
        c
    }

    /// Moves what the session queued to the output.
    pub fn collect(&mut self) {
        let bytes = self.session.take_output();
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        self.out.extend_from_slice(&bytes);
    }

    /// Queues `msg`, which the switch built (always encodable).
    pub fn send(&mut self, msg: &Message) {
        if self.session.send(msg).is_ok() {
            self.collect();
        }
    }

    /// Whether bytes wait to be written.
    pub fn wants_write(&self) -> bool {
        self.sent < self.out.len()
    }

    /// Bytes waiting to be written.
    pub fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Reads what is there (up to [`READ_PER_TURN`]) into the session.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<(), Closed> {
        let mut total = 0;
        while total < READ_PER_TURN {
            match self.stream.read(buf) {
                Ok(0) => return Err(Closed::Peer),
                Ok(n) => {
                    total += n;
                    self.session.receive(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Closed::Peer),
            }
        }
        Ok(())
    }

    /// Writes what it can without blocking; an error when the connection
    /// is over or its output passed the bound.
    pub fn flush(&mut self) -> Result<(), Closed> {
        while self.sent < self.out.len() {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return Err(Closed::Peer),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Closed::Peer),
            }
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            if self.closing {
                return Err(Closed::Session);
            }
        } else if self.sent > MAX_OUTPUT / 2 {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        if self.pending() > MAX_OUTPUT {
            return Err(Closed::NotReading);
        }
        Ok(())
    }
}
