//! The switch's side of one OpenFlow connection, without the connection.
//!
//! A [`Session`] is fed the bytes read from the socket
//! ([`Session::receive`]) and gives back the bytes to write
//! ([`Session::take_output`]) and what happened ([`Session::poll_event`]).
//! It does on its own what needs no switch: it sends our HELLO first,
//! negotiates the version from the peer's HELLO (by its version bitmap, or
//! by its header version when it sent none), answers ECHO_REQUEST, refuses
//! any message before HELLO and anything that does not decode (with the
//! right `OFPT_ERROR`), and hands every other message up as a
//! [`Received`]. The switch answers through [`Session::send`] and refuses
//! what it does not support through [`Session::refuse`].

use std::collections::VecDeque;

use crate::consts::{OFP_ERROR_DATA_LEN, OFP_VERSION};
use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::framer::{FrameError, Framer};
use crate::message::{error_reply, msg_type, Body, ErrorMsg, Header, Hello, Message};

/// A message the switch is to act on, with the bytes an error reply to it
/// carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The message.
    pub message: Message,
    /// Its first bytes (up to 64), for [`Session::refuse`].
    pub head: Vec<u8>,
}

/// Something the switch learns from the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The version was agreed: the connection is up.
    Connected,
    /// A message to act on (anything but HELLO and ECHO_REQUEST).
    Message(Received),
    /// A message was refused; the `OFPT_ERROR` is already queued.
    Refused(DecodeError),
    /// The session is over: flush [`Session::take_output`], then close.
    Closed(SessionError),
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The peer's HELLO offers no version we speak.
    #[error("the peer's HELLO (version {0:#04x}) offers no version in common with 0x04")]
    NoCommonVersion(u8),
    /// The peer's HELLO does not decode.
    #[error("the peer's HELLO is malformed")]
    BadHello(#[source] DecodeError),
    /// The peer sent something else before its HELLO.
    #[error("the peer sent message type {0} before its HELLO")]
    NotHello(u8),
    /// The stream lost its framing.
    #[error("the stream cannot be framed")]
    Framing(#[source] FrameError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitHello,
    Open,
    Closed,
}

/// One connection's protocol state; see the module documentation.
#[derive(Debug)]
pub struct Session {
    framer: Framer,
    state: State,
    out: Vec<u8>,
    events: VecDeque<Event>,
    next_xid: u32,
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// A session whose HELLO is already queued for output.
    pub fn new() -> Session {
        let mut s = Session {
            framer: Framer::default(),
            state: State::AwaitHello,
            out: Vec::new(),
            events: VecDeque::new(),
            next_xid: 1,
        };
        let xid = s.next_xid();
        s.queue(&Message::new(xid, Body::Hello(Hello::ours())));
        s
    }

    /// Whether the version has been agreed and the session is not closed.
    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// Whether the session is over.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// A fresh transaction id for a message the switch starts (PACKET_IN,
    /// PORT_STATUS, ...).
    pub fn next_xid(&mut self) -> u32 {
        let x = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        x
    }

    /// Takes in bytes read from the connection; all of them are consumed.
    pub fn receive(&mut self, mut data: &[u8]) {
        while self.state != State::Closed {
            let n = self.framer.push(data);
            data = &data[n..];
            loop {
                match self.framer.next_frame() {
                    Ok(Some(frame)) => self.handle(&frame),
                    Ok(None) => break,
                    Err(e) => {
                        self.queue(&error_reply(e.header(), e.code()));
                        self.close(SessionError::Framing(e));
                    }
                }
                if self.state == State::Closed {
                    return;
                }
            }
            if data.is_empty() {
                break;
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The bytes to write to the connection, taken. They grow with every
    /// answer until taken: take them after each [`Session::receive`].
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Queues `msg` for output.
    pub fn send(&mut self, msg: &Message) -> Result<(), EncodeError> {
        self.out.extend_from_slice(&msg.encode()?);
        Ok(())
    }

    /// Queues the `OFPT_ERROR` refusing `request` with `code`.
    pub fn refuse(&mut self, request: &Received, code: ErrorCode) {
        self.queue(&error_reply(&request.head, code));
    }

    /// Queues a message the codec itself built (always encodable).
    fn queue(&mut self, msg: &Message) {
        if let Ok(bytes) = msg.encode() {
            self.out.extend_from_slice(&bytes);
        }
    }

    fn close(&mut self, why: SessionError) {
        self.state = State::Closed;
        self.events.push_back(Event::Closed(why));
    }

    fn hello_failed(&mut self, xid: u32, text: &str, why: SessionError) {
        let data = text.as_bytes().to_vec();
        self.queue(&Message::new(
            xid,
            Body::Error(ErrorMsg {
                code: ErrorCode::HELLO_FAILED_INCOMPATIBLE,
                data,
            }),
        ));
        self.close(why);
    }

    fn handle(&mut self, frame: &[u8]) {
        let Some(h) = Header::parse(frame) else {
            return;
        };
        let decoded = Message::decode(frame);
        if self.state == State::AwaitHello {
            match decoded {
                Ok(Message {
                    body: Body::Hello(hello),
                    ..
                }) if hello.speaks(OFP_VERSION) => {
                    self.state = State::Open;
                    self.events.push_back(Event::Connected);
                }
                Ok(Message {
                    body: Body::Hello(hello),
                    ..
                }) => self.hello_failed(
                    h.xid,
                    "no common version: this switch speaks OpenFlow 1.3 (0x04) only",
                    SessionError::NoCommonVersion(hello.version),
                ),
                Err(e) if h.kind == msg_type::HELLO => {
                    self.queue(&error_reply(frame, e.code));
                    self.close(SessionError::BadHello(e));
                }
                _ => self.hello_failed(
                    h.xid,
                    "expected a HELLO first",
                    SessionError::NotHello(h.kind),
                ),
            }
            return;
        }
        match decoded {
            Ok(Message {
                body: Body::Hello(_),
                ..
            }) => {}
            Ok(Message {
                xid,
                body: Body::EchoRequest(data),
            }) => {
                self.queue(&Message::new(xid, Body::EchoReply(data)));
            }
            Ok(message) => {
                let head = frame[..frame.len().min(OFP_ERROR_DATA_LEN)].to_vec();
                self.events
                    .push_back(Event::Message(Received { message, head }));
            }
            Err(e) => {
                self.queue(&error_reply(frame, e.code));
                self.events.push_back(Event::Refused(e));
            }
        }
    }
}
