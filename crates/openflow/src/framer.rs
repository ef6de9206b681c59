//! Cutting a byte stream into whole messages.
//!
//! A [`Framer`] takes bytes as they come from a stream socket, in pieces of
//! any size, and yields each whole message once its header's length has
//! arrived. It buffers at most one maximum-size message: [`Framer::push`]
//! takes no more than there is room for and says how much it took. A
//! header whose length is under 8 or over the maximum cannot be skipped
//! (the stream has lost its framing), so the framer stops there for good
//! and the connection must be closed after the error is sent.

use crate::consts::{OFP_HEADER_LEN, OFP_MAX_MESSAGE_LEN};
use crate::error::ErrorCode;
use crate::message::Header;

/// Why the stream cannot be framed any further.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The header's length is shorter than the header itself.
    #[error("a message header says {length} bytes, less than the 8-byte header")]
    TooShort {
        /// The offending header.
        header: [u8; 8],
        /// The length it gave.
        length: u16,
    },
    /// The header's length is over the framer's maximum.
    #[error("a message header says {length} bytes, more than the {max} this connection takes")]
    TooLong {
        /// The offending header.
        header: [u8; 8],
        /// The length it gave.
        length: u16,
        /// The framer's maximum.
        max: usize,
    },
}

impl FrameError {
    /// The offending header, for the error reply's data.
    pub fn header(&self) -> &[u8; 8] {
        match self {
            FrameError::TooShort { header, .. } | FrameError::TooLong { header, .. } => header,
        }
    }

    /// The error the switch answers with before closing.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::BAD_REQUEST_BAD_LEN
    }
}

/// Reassembles messages from a stream; see the module documentation.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Where the next message starts in `buf`.
    start: usize,
    max_len: usize,
    failed: Option<FrameError>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new(OFP_MAX_MESSAGE_LEN)
    }
}

impl Framer {
    /// A framer taking messages of at most `max_len` bytes (clamped to
    /// 8..=65535).
    pub fn new(max_len: usize) -> Framer {
        Framer {
            buf: Vec::new(),
            start: 0,
            max_len: max_len.clamp(OFP_HEADER_LEN, OFP_MAX_MESSAGE_LEN),
            failed: None,
        }
    }

    /// Bytes buffered and not yet returned as a message.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// How many more bytes [`Framer::push`] would take now.
    pub fn room(&self) -> usize {
        if self.failed.is_some() {
            0
        } else {
            self.max_len - self.buffered().min(self.max_len)
        }
    }

    /// Buffers as much of `data` as there is room for; returns how much.
    pub fn push(&mut self, data: &[u8]) -> usize {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let n = data.len().min(self.room());
        self.buf.extend_from_slice(&data[..n]);
        n
    }

    /// The next whole message, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let pending = &self.buf[self.start..];
        let Some(h) = Header::parse(pending) else {
            return Ok(None);
        };
        let mut header = [0u8; 8];
        header.copy_from_slice(&pending[..8]);
        let length = usize::from(h.length);
        let fault = if length < OFP_HEADER_LEN {
            Some(FrameError::TooShort {
                header,
                length: h.length,
            })
        } else if length > self.max_len {
            Some(FrameError::TooLong {
                header,
                length: h.length,
                max: self.max_len,
            })
        } else {
            None
        };
        if let Some(e) = fault {
            self.failed = Some(e);
            return Err(e);
        }
        let Some(frame) = pending.get(..length) else {
            return Ok(None);
        };
        let frame = frame.to_vec();
        self.start += length;
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u8, len: u16, xid: u32) -> Vec<u8> {
        let mut v = vec![4, kind];
        v.extend(len.to_be_bytes());
        v.extend(xid.to_be_bytes());
        v.resize(usize::from(len).max(8), 0xab);
        v
    }

    #[test]
    fn yields_whole_messages_from_pieces_of_any_size() {
        let mut stream = Vec::new();
        for (i, len) in [8u16, 16, 100, 8, 65535].iter().enumerate() {
            stream.extend(msg(2, *len, i as u32));
        }
        for chunk in [1usize, 3, 7, 8, 9, 1000, 70000] {
            let mut f = Framer::default();
            let mut got = Vec::new();
            let mut rest = &stream[..];
            while !rest.is_empty() || f.buffered() > 0 {
                let n = f.push(&rest[..chunk.min(rest.len())]);
                rest = &rest[n..];
                while let Some(m) = f.next_frame().unwrap() {
                    got.push(m);
                }
                if rest.is_empty() && f.buffered() > 0 {
                    panic!("a partial message left over");
                }
            }
            assert_eq!(got.concat(), stream, "chunk {chunk}");
            assert_eq!(got.len(), 5);
        }
    }

    #[test]
    fn refuses_lengths_under_the_header_and_over_the_maximum() {
        for len in [0u16, 1, 7] {
            let mut f = Framer::default();
            f.push(&msg(0, len, 9)[..8]);
            let e = f.next_frame().unwrap_err();
            assert!(matches!(e, FrameError::TooShort { length, .. } if length == len));
            assert_eq!(e.code(), ErrorCode::BAD_REQUEST_BAD_LEN);
            assert_eq!(e.header()[4..], 9u32.to_be_bytes());
            // It stays failed and takes nothing more.
            assert_eq!(f.push(&[0; 100]), 0);
            assert_eq!(f.next_frame().unwrap_err(), e);
        }
        let mut f = Framer::new(1024);
        f.push(&msg(0, 1025, 1)[..8]);
        assert!(matches!(
            f.next_frame(),
            Err(FrameError::TooLong {
                length: 1025,
                max: 1024,
                ..
            })
        ));
    }

    #[test]
    fn buffers_at_most_one_maximum_message() {
        let mut f = Framer::new(64);
        assert_eq!(f.push(&[0u8; 1000]), 64);
        assert_eq!(f.room(), 0);
        // A truncated header waits for more, without error.
        let mut g = Framer::default();
        g.push(&[4, 0, 0]);
        assert_eq!(g.next_frame().unwrap(), None);
        // A header announcing more than has come waits too.
        g.push(&[16, 0, 0, 0, 1, 0, 0]);
        assert_eq!(g.next_frame().unwrap(), None);
        g.push(&[0; 8]);
        assert_eq!(g.next_frame().unwrap().unwrap().len(), 16);
    }
}
