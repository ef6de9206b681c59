//! TCP and UDP segmentation in software (TSO and USO fallback).

use std::fmt;

use crate::checksum;
use crate::error::{Layer, OffloadError};
use ringswitch_frame::OffloadHdr;

use crate::hdr::{request, Gso};
use crate::parse::{be16, parse_l4, Ip, L4Frame, L4};

/// Size of a [`Segmenter`]'s scratch buffer: the longest segment any frame
/// can produce, an Ethernet header with two VLAN tags, then an IPv6 header
/// and the largest payload its 16-bit length field can announce (an IPv4
/// packet, whose 16-bit length counts its header too, is never longer).
pub const SCRATCH_LEN: usize = 14 + 2 * 4 + 40 + u16::MAX as usize;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Cuts TCP and UDP GSO frames into segments, in a scratch buffer allocated
/// once.
///
/// Each segment is the frame's headers followed by up to `gso_size` bytes of
/// its payload, with:
/// - the IPv4 total length or IPv6 payload length of the segment;
/// - the IPv4 identification of the frame plus the segment's index, and a
///   recomputed IPv4 header checksum;
/// - TCP: the sequence number advanced by the payload before the segment;
///   FIN and PSH only on the last segment, CWR only on the first;
/// - UDP (USO): the segment's own UDP length, so each is a datagram;
/// - a complete TCP or UDP checksum, pseudo header included, computed from
///   scratch (the frame's own checksum field is ignored; a UDP sum of 0 is
///   sent as 0xffff, 0 meaning "no checksum").
///
/// Other header fields (options, urgent pointer, DF, traffic class, flow
/// label) are copied unchanged. Bytes after the end of the IP packet
/// (link-layer padding) are dropped.
pub struct Segmenter {
    scratch: Vec<u8>,
}

impl fmt::Debug for Segmenter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segmenter")
            .field("scratch_len", &self.scratch.len())
            .finish()
    }
}

impl Default for Segmenter {
    fn default() -> Self {
        Self::new()
    }
}

impl Segmenter {
    /// Creates a segmenter with its [`SCRATCH_LEN`]-byte scratch buffer.
    pub fn new() -> Self {
        Self {
            scratch: vec![0; SCRATCH_LEN],
        }
    }

    /// Segments `frame`, sent with `hdr`, and calls `emit` with each segment
    /// in order. The slice is valid only during the call.
    ///
    /// `emit` returns true when it took the segment, false when it could not
    /// (the destination is full): segmentation then stops. Returns how many
    /// segments `emit` took.
    ///
    /// The header and the whole frame are checked before the first segment is
    /// built: on error, `emit` was not called. `hdr` must ask for TCPV4 or
    /// TCPV6 segmentation (with or without ECN) matching the frame's IP
    /// version, or UDP_L4 segmentation of a UDP frame, with a nonzero
    /// `gso_size`. A frame whose payload fits in one
    /// segment, or is empty, gives one segment.
    pub fn segment(
        &mut self,
        frame: &[u8],
        hdr: &OffloadHdr,
        mut emit: impl FnMut(&[u8]) -> bool,
    ) -> Result<usize, OffloadError> {
        let job = Job::new(frame, hdr)?;
        for index in 0..job.count {
            let segment = self.build(frame, &job, index)?;
            if !emit(segment) {
                return Ok(index);
            }
        }
        Ok(job.count)
    }

    /// Builds segment `index` of `job` in the scratch buffer.
    fn build(&mut self, frame: &[u8], job: &Job, index: usize) -> Result<&[u8], OffloadError> {
        let L4Frame {
            proto,
            ip,
            l3,
            l4,
            payload,
            end,
        } = job.frame;
        let ip_layer = match ip {
            Ip::V4 => Layer::Ipv4,
            Ip::V6 => Layer::Ipv6,
        };
        let l4_truncated = OffloadError::Truncated {
            layer: match proto {
                L4::Tcp => Layer::Tcp,
                L4::Udp => Layer::Udp,
            },
        };
        let ip_truncated = OffloadError::Truncated { layer: ip_layer };

        // Segment payload bounds; index < count keeps start <= end.
        let skip = index.checked_mul(job.mss).ok_or(l4_truncated)?;
        let start = payload.checked_add(skip).ok_or(l4_truncated)?;
        let stop = start.saturating_add(job.mss).min(end);
        let headers = frame.get(..payload).ok_or(l4_truncated)?;
        let chunk = frame.get(start..stop).ok_or(l4_truncated)?;

        let len = headers.len() + chunk.len();
        let out = self.scratch.get_mut(..len).ok_or(l4_truncated)?;
        let (out_headers, out_chunk) = out
            .split_at_mut_checked(headers.len())
            .ok_or(l4_truncated)?;
        out_headers.copy_from_slice(headers);
        out_chunk.copy_from_slice(chunk);

        // The TCP or UDP segment length: it fits in 16 bits because the frame's IP
        // length field counted at least as many bytes.
        let l4_len = (payload - l4) + chunk.len();
        let l4_len16 = u16::try_from(l4_len).map_err(|_| l4_truncated)?;

        let ip_hdr = out_headers.get_mut(l3..l4).ok_or(ip_truncated)?;
        match ip {
            Ip::V4 => {
                let total = u16::try_from((l4 - l3) + l4_len).map_err(|_| ip_truncated)?;
                put16(ip_hdr, 2, total).ok_or(ip_truncated)?;
                // The identification wraps like the 16-bit field it is.
                let id = job
                    .ipv4_id
                    .wrapping_add(u16::try_from(index & 0xffff).unwrap_or_default());
                put16(ip_hdr, 4, id).ok_or(ip_truncated)?;
                put16(ip_hdr, 10, 0).ok_or(ip_truncated)?;
                let csum = !checksum::sum(ip_hdr);
                put16(ip_hdr, 10, csum).ok_or(ip_truncated)?;
            }
            Ip::V6 => put16(ip_hdr, 4, l4_len16).ok_or(ip_truncated)?,
        }

        let l4_hdr = out_headers.get_mut(l4..payload).ok_or(l4_truncated)?;
        let csum_at = match proto {
            L4::Tcp => {
                // Sequence numbers wrap modulo 2^32; skip is below 2^16.
                let seq = job
                    .seq
                    .wrapping_add(u32::try_from(skip).map_err(|_| l4_truncated)?);
                l4_hdr
                    .get_mut(4..8)
                    .ok_or(l4_truncated)?
                    .copy_from_slice(&seq.to_be_bytes());
                let flags = l4_hdr.get_mut(13).ok_or(l4_truncated)?;
                if index + 1 < job.count {
                    *flags &= !(TCP_FIN | TCP_PSH);
                }
                if index > 0 {
                    *flags &= !TCP_CWR;
                }
                16
            }
            L4::Udp => {
                put16(l4_hdr, 4, l4_len16).ok_or(l4_truncated)?;
                6
            }
        };
        put16(l4_hdr, csum_at, 0).ok_or(l4_truncated)?;
        let sum = checksum::add(
            checksum::add(job.pseudo_sum, l4_len16),
            checksum::add(checksum::sum(l4_hdr), checksum::sum(out_chunk)),
        );
        let csum = match (proto, !sum) {
            (L4::Udp, 0) => 0xffff,
            (_, csum) => csum,
        };
        put16(l4_hdr, csum_at, csum).ok_or(l4_truncated)?;

        Ok(out)
    }
}

/// Returns how many segments [`Segmenter::segment`] would produce for
/// `frame` sent with `hdr`, after the same checks, so that a caller can make
/// room for all of them first.
pub fn segment_count(frame: &[u8], hdr: &OffloadHdr) -> Result<usize, OffloadError> {
    Ok(Job::new(frame, hdr)?.count)
}

/// A frame checked for segmentation, and what every segment shares.
#[derive(Debug)]
struct Job {
    frame: L4Frame,
    /// Payload bytes per segment, nonzero.
    mss: usize,
    /// Segments to build, at least 1.
    count: usize,
    /// The frame's TCP sequence number (0 for UDP).
    seq: u32,
    /// The frame's IPv4 identification (0 for IPv6).
    ipv4_id: u16,
    /// The pseudo header sum without the length.
    pseudo_sum: u16,
}

impl Job {
    fn new(frame: &[u8], hdr: &OffloadHdr) -> Result<Self, OffloadError> {
        let (proto, expected) = match request(hdr)?.gso {
            Gso::None => return Err(OffloadError::NotGso),
            Gso::Tcp4 => (L4::Tcp, Some(Ip::V4)),
            Gso::Tcp6 => (L4::Tcp, Some(Ip::V6)),
            Gso::Udp => (L4::Udp, None),
        };
        let frame_l4 = parse_l4(frame, proto)?;
        if let Some(expected) = expected.filter(|&ip| ip != frame_l4.ip) {
            return Err(OffloadError::GsoIpMismatch {
                expected: expected.number(),
                found: frame_l4.ip.number(),
            });
        }
        // request() refused a GSO size of 0.
        let mss = usize::from(hdr.gso_size).max(1);
        let count = (frame_l4.end - frame_l4.payload).div_ceil(mss).max(1);

        let ip_truncated = |ip| OffloadError::Truncated {
            layer: match ip {
                Ip::V4 => Layer::Ipv4,
                Ip::V6 => Layer::Ipv6,
            },
        };
        let ip = frame_l4.ip;
        let ip_hdr = frame
            .get(frame_l4.l3..frame_l4.l4)
            .ok_or(ip_truncated(ip))?;
        let (ipv4_id, pseudo_sum) = match ip {
            Ip::V4 => {
                let id = be16(ip_hdr, 4).ok_or(ip_truncated(ip))?;
                let src = array(ip_hdr, 12).ok_or(ip_truncated(ip))?;
                let dst = array(ip_hdr, 16).ok_or(ip_truncated(ip))?;
                (id, checksum::pseudo_header_v4(src, dst, proto.number(), 0))
            }
            Ip::V6 => {
                let src = array(ip_hdr, 8).ok_or(ip_truncated(ip))?;
                let dst = array(ip_hdr, 24).ok_or(ip_truncated(ip))?;
                (0, checksum::pseudo_header_v6(src, dst, proto.number(), 0))
            }
        };
        let seq = match proto {
            L4::Tcp => {
                let l4_truncated = OffloadError::Truncated { layer: Layer::Tcp };
                let tcp_hdr = frame
                    .get(frame_l4.l4..frame_l4.payload)
                    .ok_or(l4_truncated)?;
                u32::from_be_bytes(array(tcp_hdr, 4).ok_or(l4_truncated)?)
            }
            L4::Udp => 0,
        };
        Ok(Self {
            frame: frame_l4,
            mss,
            count,
            seq,
            ipv4_id,
            pseudo_sum,
        })
    }
}

/// Copies `N` bytes at `at`, if `bytes` holds them.
fn array<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Writes a big-endian 16-bit value at `at`, if `bytes` holds it.
fn put16(bytes: &mut [u8], at: usize, value: u16) -> Option<()> {
    bytes
        .get_mut(at..at.checked_add(2)?)?
        .copy_from_slice(&value.to_be_bytes());
    Some(())
}
