//! Bounds-checked big-endian reading and writing, the only place bytes are
//! indexed.
//!
//! A [`Reader`] is made with the error it returns when it runs out of bytes:
//! the same short read means `BAD_MATCH/BAD_LEN` inside a match and
//! `BAD_ACTION/BAD_LEN` inside an action, and the caller knows which.

use crate::error::DecodeError;

/// Reads big-endian values from a slice; every read is checked, none panics.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    short: DecodeError,
}

impl<'a> Reader<'a> {
    /// A reader over `buf` that answers `short` when a read overruns it.
    pub(crate) fn new(buf: &'a [u8], short: DecodeError) -> Self {
        Reader { buf, pos: 0, short }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes the next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(self.short)?;
        let out = self.buf.get(self.pos..end).ok_or(self.short)?;
        self.pos = end;
        Ok(out)
    }

    /// Takes everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// Skips `n` bytes of padding (their value is not checked).
    pub(crate) fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    /// Takes `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Reads the header of an 8-aligned type-length element (an action, an
    /// instruction): its type, its length (at least 8, a multiple of 8,
    /// within what is left; else `bad_len`), and a reader over the rest of
    /// it that answers `bad_len` when short.
    pub(crate) fn element(
        &mut self,
        bad_len: DecodeError,
    ) -> Result<(u16, usize, Reader<'a>), DecodeError> {
        let ty = self.u16()?;
        let len = usize::from(self.u16()?);
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad_len);
        }
        Ok((ty, len, Reader::new(self.bytes(len - 4)?, bad_len)))
    }

    /// A NUL-terminated string in a fixed field of `n` bytes: the bytes up
    /// to the first NUL, invalid UTF-8 replaced, cut to at most `n - 1`
    /// bytes so that it encodes back into the field with its NUL.
    pub(crate) fn fixed_str(&mut self, n: usize) -> Result<String, DecodeError> {
        let raw = self.bytes(n)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let mut s = String::from_utf8_lossy(&raw[..end]).into_owned();
        let mut cut = s.len().min(n.saturating_sub(1));
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        Ok(s)
    }
}

/// Big-endian appends to a byte vector.
pub(crate) trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_zeros(&mut self, n: usize);
    /// `s` in a fixed field of `n` bytes, NUL-padded, cut to leave a NUL.
    fn put_fixed_str(&mut self, s: &str, n: usize);
    /// Overwrites the big-endian u16 at `at` (a length written afterwards).
    fn patch_u16(&mut self, at: usize, v: u16);
    /// Zeros until the length since `start` is a multiple of 8.
    fn pad8_from(&mut self, start: usize);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn put_fixed_str(&mut self, s: &str, n: usize) {
        let b = s.as_bytes();
        let take = b.len().min(n.saturating_sub(1));
        self.extend_from_slice(&b[..take]);
        self.put_zeros(n - take);
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn pad8_from(&mut self, start: usize) {
        let len = self.len() - start;
        self.put_zeros(pad8(len) - len);
    }
}

/// `n` rounded up to a multiple of 8.
pub(crate) fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The length from `start` to the end of `buf`, as the u16 a length field
/// holds (callers have checked the whole message fits in 65535 bytes).
pub(crate) fn len16(buf: &[u8], start: usize) -> u16 {
    u16::try_from(buf.len() - start).unwrap_or(u16::MAX)
}

/// Appends an 8-aligned type-length element: its type, then what `body`
/// writes, padded to 8, then its length (padding included) patched in.
pub(crate) fn put_tlv(out: &mut Vec<u8>, ty: u16, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.put_u16(ty);
    out.put_u16(0);
    body(out);
    out.pad8_from(start);
    let len = len16(out, start);
    out.patch_u16(start + 2, len);
}
