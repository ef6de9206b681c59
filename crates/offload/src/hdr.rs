//! What an offload request asks for, and what must be done in software for
//! a destination that does not accept it.

use ringswitch_frame::{
    Caps, OffloadHdr, F_DATA_VALID, F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP,
    GSO_UDP_L4,
};

use crate::error::OffloadError;

/// Checks the flags and GSO fields and says what they ask for.
pub(crate) fn request(hdr: &OffloadHdr) -> Result<Request, OffloadError> {
    if hdr.flags & !(F_NEEDS_CSUM | F_DATA_VALID) != 0 {
        return Err(OffloadError::UnknownFlags { flags: hdr.flags });
    }
    let ecn = hdr.gso_type & GSO_ECN != 0;
    let gso = match hdr.gso_type & !GSO_ECN {
        GSO_NONE if ecn => return Err(OffloadError::EcnWithoutGso),
        GSO_NONE => Gso::None,
        GSO_TCPV4 => Gso::Tcp4,
        GSO_TCPV6 => Gso::Tcp6,
        GSO_UDP => return Err(OffloadError::UfoUnsupported),
        GSO_UDP_L4 if ecn => return Err(OffloadError::EcnOnUdp),
        GSO_UDP_L4 => Gso::Udp,
        _ => {
            return Err(OffloadError::UnknownGsoType {
                gso_type: hdr.gso_type,
            })
        }
    };
    if gso != Gso::None && hdr.gso_size == 0 {
        return Err(OffloadError::ZeroGsoSize);
    }
    Ok(Request {
        gso,
        ecn,
        needs_csum: hdr.flags & F_NEEDS_CSUM != 0,
    })
}

/// The segmentation a header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gso {
    None,
    Tcp4,
    Tcp6,
    /// UDP segmentation, over either IP version (the frame says which).
    Udp,
}

/// A header's request, validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub(crate) gso: Gso,
    pub(crate) ecn: bool,
    pub(crate) needs_csum: bool,
}

/// What must be done to a frame before a destination gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the frame and its header go to the destination as they are.
    PassThrough,
    /// Complete the partial checksum with [`complete_checksum`](crate::complete_checksum)
    /// and hand the frame over without offload flags.
    CompleteChecksum,
    /// Cut the frame into segments with a [`Segmenter`](crate::Segmenter)
    /// and hand them over without offload flags: their checksums are
    /// complete.
    Segment,
}

/// Says what must be done in software for a destination with `dest`'s
/// capabilities to take a frame sent with `hdr`.
///
/// A TCP GSO frame passes through only to a destination that accepts partial
/// checksums, TSO for its IP version and, if the ECN bit is set, ECN;
/// otherwise it is segmented. A frame with a partial checksum and no GSO
/// passes through to a destination that accepts partial checksums;
/// otherwise its checksum is completed. A UDP GSO frame (USO) passes
/// through only to a destination that accepts partial checksums and USO
/// for both IP versions (the header does not say which the frame is);
/// otherwise it is segmented.
///
/// Only the header is checked here: unknown flag bits, unknown GSO types,
/// UFO, ECN without GSO or with USO, and a GSO size of 0 are errors. `DATA_VALID`, a
/// receive-side flag, is accepted and ignored; the caller should not forward
/// it. A GSO frame without NEEDS_CSUM is accepted: segmentation computes the
/// TCP or UDP checksum from scratch either way. Offsets are checked against the
/// frame later, by [`complete_checksum`](crate::complete_checksum) and
/// [`Segmenter::segment`](crate::Segmenter::segment).
pub fn plan(hdr: &OffloadHdr, dest: Caps) -> Result<Action, OffloadError> {
    let request = request(hdr)?;
    let takes_tso = |tso: bool| dest.csum && tso && (!request.ecn || dest.ecn);
    Ok(match request.gso {
        Gso::None if request.needs_csum && !dest.csum => Action::CompleteChecksum,
        Gso::None => Action::PassThrough,
        Gso::Tcp4 if takes_tso(dest.tso4) => Action::PassThrough,
        Gso::Tcp6 if takes_tso(dest.tso6) => Action::PassThrough,
        Gso::Udp if dest.csum && dest.uso4 && dest.uso6 => Action::PassThrough,
        Gso::Tcp4 | Gso::Tcp6 | Gso::Udp => Action::Segment,
    })
}
