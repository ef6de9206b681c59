//! OpenFlow 1.3 on the wire, the switch side: a small, strict, sans-IO
//! codec. Bytes in, typed messages out, and back; no sockets.
//!
//! - [`framer`]: cuts a byte stream into whole messages ([`Framer`]),
//!   buffering at most one maximum-size message.
//! - [`message`]: the header and every message a switch sends or receives
//!   ([`Message`], [`Body`]), and [`error_reply`], the `OFPT_ERROR` that
//!   refuses a request.
//! - [`oxm`]: matches ([`Match`]) of OXM basic fields, with the
//!   prerequisite, duplicate, mask and width checks.
//! - [`action`]: actions and instructions.
//! - [`multipart`]: multipart requests and replies (DESC, FLOW,
//!   AGGREGATE, TABLE, PORT_STATS, PORT_DESC, GROUP, GROUP_DESC).
//! - [`session`]: the switch side of a connection ([`Session`]): HELLO and
//!   version negotiation, ECHO, refusals.
//! - [`error`]: every refusal as the (type, code) to answer with.
//! - [`consts`]: the specification's numbers.
//!
//! Decoding never panics and allocates no more than the message's size;
//! every fault maps to the `OFPT_ERROR` (type, code) the OpenFlow 1.3.5
//! specification assigns. What a switch supports beyond the wire format
//! (which fields, actions, group types) is for the switch to check.
//! docs/openflow.md lists what is decoded and what is refused.
//!
//! ```
//! use ringswitch_openflow::message::Features;
//! use ringswitch_openflow::{Body, ErrorCode, Event, Message, Session};
//!
//! let mut s = Session::new();
//! let _hello = s.take_output(); // our HELLO: write it to the socket
//! s.receive(&[4, 0, 0, 8, 0, 0, 0, 1]); // the peer's HELLO (1.3)
//! s.receive(&[4, 5, 0, 8, 0, 0, 0, 2]); // FEATURES_REQUEST
//! s.receive(&[4, 29, 0, 8, 0, 0, 0, 3]); // METER_MOD: not handled
//! assert_eq!(s.poll_event(), Some(Event::Connected));
//! let Some(Event::Message(r)) = s.poll_event() else { unreachable!() };
//! assert_eq!(r.message.body, Body::FeaturesRequest);
//! let features = Features {
//!     datapath_id: 1,
//!     n_buffers: 0,
//!     n_tables: 8,
//!     auxiliary_id: 0,
//!     capabilities: 0,
//! };
//! s.send(&Message::new(r.message.xid, Body::FeaturesReply(features))).unwrap();
//! // The METER_MOD was refused with BAD_REQUEST/BAD_TYPE, already queued.
//! let Some(Event::Refused(e)) = s.poll_event() else { unreachable!() };
//! assert_eq!(e.code, ErrorCode::BAD_REQUEST_BAD_TYPE);
//! let _answers = s.take_output(); // the ERROR (queued on arrival), the FEATURES_REPLY
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod action;
pub mod consts;
pub mod error;
pub mod framer;
pub mod message;
pub mod multipart;
pub mod oxm;
pub mod session;
mod wire;

pub use action::{Action, Instruction};
pub use error::{DecodeError, EncodeError, ErrorCode};
pub use framer::{FrameError, Framer};
pub use message::{error_reply, Body, Bucket, Header, Message, Port};
pub use multipart::{MultipartReply, MultipartRequest};
pub use oxm::{Field, Match, Oxm};
pub use session::{Event, Received, Session, SessionError};
