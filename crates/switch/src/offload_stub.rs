//! TEMPORARY stand-in for ringswitch-offload while it is written.
#![allow(missing_docs, dead_code)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OffloadHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}
#[derive(Clone, Copy, Debug, Default)]
pub struct Caps {
    pub csum: bool,
    pub tso4: bool,
    pub tso6: bool,
    pub ecn: bool,
}
pub enum Action {
    PassThrough,
    CompleteChecksum,
    Segment,
}
#[derive(Debug)]
pub struct OffloadError;
pub fn plan(h: &OffloadHdr, c: Caps) -> Result<Action, OffloadError> {
    let _ = c;
    if h.gso_type != 0 {
        return Ok(Action::Segment);
    }
    if h.flags & 1 != 0 {
        return Ok(Action::CompleteChecksum);
    }
    Ok(Action::PassThrough)
}
pub fn complete_checksum(_f: &mut [u8], _s: usize, _o: usize) -> Result<(), OffloadError> {
    Err(OffloadError)
}
pub struct Segmenter;
impl Segmenter {
    pub fn new() -> Self {
        Segmenter
    }
    pub fn segment(
        &mut self,
        _f: &[u8],
        _h: &OffloadHdr,
        _emit: impl FnMut(&[u8]) -> bool,
    ) -> Result<usize, OffloadError> {
        Err(OffloadError)
    }
}
