//! The Internet checksum (RFC 1071): a 16-bit one's complement sum of
//! big-endian 16-bit words, and the completion of partial checksums.
//!
//! Sums here are folded but not inverted: [`sum`] of a packet that verifies
//! is `0xffff`, and the checksum to store is `!sum`. Summing pieces
//! separately and combining them with [`add`] gives the same result as
//! summing them together, as long as every piece but the last has an even
//! length.

use crate::error::OffloadError;

/// Returns the one's complement sum of `data` as big-endian 16-bit words, an
/// odd last byte padded with a zero byte, folded to 16 bits.
///
/// It adds 8 bytes at a time into a 64-bit accumulator and counts the carries
/// out of it, which are folded in at the end (as Linux's `csum_partial`
/// does). Because a one's complement sum does not depend on byte order, the
/// words are read in the host's order and the result is swapped once.
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    // At most one carry per 8-byte word, so this cannot overflow.
    let mut carries: u64 = 0;
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let word = <[u8; 8]>::try_from(word).unwrap_or_default();
        let (next, carry) = acc.overflowing_add(u64::from_ne_bytes(word));
        acc = next;
        carries += u64::from(carry);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        // Zero padding after the last bytes keeps every byte in its place in
        // its 16-bit word: the tail starts at a multiple of 8 bytes.
        let mut word = [0u8; 8];
        if let Some(head) = word.get_mut(..rest.len()) {
            head.copy_from_slice(rest);
        }
        let (next, carry) = acc.overflowing_add(u64::from_ne_bytes(word));
        acc = next;
        carries += u64::from(carry);
    }
    // 2^64 is 1 modulo 0xffff: a carry out of bit 63 is worth 1.
    let (acc, carry) = acc.overflowing_add(carries);
    let folded = fold64(acc) + u32::from(carry);
    let native = fold32(folded);
    // Host-order words summed give the byte-swapped big-endian sum.
    if cfg!(target_endian = "little") {
        native.swap_bytes()
    } else {
        native
    }
}

/// Adds two one's complement sums.
pub fn add(a: u16, b: u16) -> u16 {
    fold32(u32::from(a) + u32::from(b))
}

/// Returns the sum of the IPv4 pseudo header (RFC 793): source and
/// destination address, protocol and the length of the upper-layer packet
/// (header and payload).
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, len: u16) -> u16 {
    let addrs = add(sum(&src), sum(&dst));
    add(addrs, add(u16::from(protocol), len))
}

/// Returns the sum of the IPv6 pseudo header (RFC 8200, 8.1): source and
/// destination address, the 32-bit upper-layer packet length and the next
/// header value.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> u16 {
    let addrs = add(sum(&src), sum(&dst));
    let [b0, b1, b2, b3] = len.to_be_bytes();
    let len = add(u16::from_be_bytes([b0, b1]), u16::from_be_bytes([b2, b3]));
    add(addrs, add(u16::from(next_header), len))
}

/// Completes a partial checksum in place, as a device does for a frame sent
/// with `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
///
/// The sender left in the checksum field, at `csum_start + csum_offset`, the
/// sum of whatever the checksum covers outside `frame[csum_start..]` (for TCP
/// and UDP, the pseudo header). This sums `frame[csum_start..]`, that field
/// included, and stores the inverted sum there, big-endian. A result of 0 is
/// stored as `0xffff`, which is the same value in one's complement and keeps a
/// UDP checksum from reading as "none".
///
/// The frame must be exactly the packet: trailing bytes after the L4 payload
/// (Ethernet padding) would be summed too. The function does not check which
/// protocol the field belongs to; it fails only when the 2-byte field does not
/// fit in `frame[csum_start..]`.
pub fn complete_checksum(
    frame: &mut [u8],
    csum_start: usize,
    csum_offset: usize,
) -> Result<(), OffloadError> {
    let out_of_bounds = OffloadError::ChecksumOutOfBounds {
        csum_start,
        csum_offset,
        len: frame.len(),
    };
    let field = csum_start.checked_add(csum_offset).ok_or(out_of_bounds)?;
    let field_end = field.checked_add(2).ok_or(out_of_bounds)?;
    if field_end > frame.len() {
        return Err(out_of_bounds);
    }
    let covered = frame.get(csum_start..).ok_or(out_of_bounds)?;
    let value = match !sum(covered) {
        0 => 0xffff,
        value => value,
    };
    frame
        .get_mut(field..field_end)
        .ok_or(out_of_bounds)?
        .copy_from_slice(&value.to_be_bytes());
    Ok(())
}

/// Folds a 64-bit sum to at most 17 bits, keeping its value modulo 0xffff.
fn fold64(x: u64) -> u32 {
    let x = (x & 0xffff_ffff) + (x >> 32); // at most 33 bits
    let x = (x & 0xffff_ffff) + (x >> 32); // at most 32 bits
    let x = (x & 0xffff) + (x >> 16); // at most 17 bits
                                      // Cannot fail: at most 17 bits.
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// Folds a 32-bit sum to 16 bits, keeping its value modulo 0xffff and giving
/// 0 only for 0.
fn fold32(x: u32) -> u16 {
    let x = (x & 0xffff) + (x >> 16); // at most 0x1fffe
    let x = (x & 0xffff) + (x >> 16); // at most 0xffff
                                      // Cannot fail: at most 0xffff.
    u16::try_from(x).unwrap_or(u16::MAX)
}

#[cfg(test)]
// Test fixtures, not the data path.
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;

    /// RFC 1071 straight: 16-bit big-endian words added one by one into a
    /// 32-bit accumulator, folded when it would overflow.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        let mut i = 0;
        while i < data.len() {
            let hi = u32::from(data[i]) << 8;
            let lo = if i + 1 < data.len() {
                u32::from(data[i + 1])
            } else {
                0
            };
            acc += hi | lo;
            if acc > 0xffff {
                acc = (acc & 0xffff) + 1;
            }
            i += 2;
        }
        acc as u16
    }

    fn random_bytes(seed: &mut u64, out: &mut [u8]) {
        for b in out {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *b = (*seed >> 24) as u8;
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071, 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn ipv4_header_known_checksum() {
        // A well-known IPv4 header whose checksum is 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(!sum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(sum(&h), 0xffff);
    }

    #[test]
    fn edge_values() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(sum(&[0; 9]), 0);
        assert_eq!(sum(&[0xff]), 0xff00);
        assert_eq!(sum(&[0xff; 2]), 0xffff);
        // Every carry counted: 64 KiB of 0xff sums to 0xffff, never to 0.
        assert_eq!(sum(&[0xff; 65536]), 0xffff);
        assert_eq!(sum(&[0xff; 65537]), reference_sum(&[0xff; 65537]));
        assert_eq!(add(0xffff, 0xffff), 0xffff);
        assert_eq!(add(0xffff, 1), 1);
        assert_eq!(add(0, 0), 0);
    }

    #[test]
    fn matches_reference_on_random_lengths_and_offsets() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        let mut buf = vec![0u8; 9000];
        for round in 0..3000 {
            random_bytes(&mut seed, &mut buf);
            if round % 7 == 0 {
                // Runs of 0xff stress the carries.
                buf.iter_mut().step_by(3).for_each(|b| *b = 0xff);
            }
            let start = (seed % 17) as usize;
            let len = ((seed >> 8) % (buf.len() - 17) as u64) as usize;
            let len = if round < 200 { round % 40 } else { len };
            let piece = &buf[start..start + len];
            assert_eq!(sum(piece), reference_sum(piece), "start {start} len {len}");
        }
    }

    #[test]
    fn pieces_combine() {
        let mut seed = 7;
        let mut buf = [0u8; 301];
        random_bytes(&mut seed, &mut buf);
        for cut in (0..buf.len()).step_by(2) {
            let (a, b) = buf.split_at(cut);
            assert_eq!(add(sum(a), sum(b)), sum(&buf));
        }
    }

    #[test]
    fn pseudo_headers() {
        let src = [192, 168, 0, 1];
        let dst = [10, 0, 0, 2];
        let flat = [192, 168, 0, 1, 10, 0, 0, 2, 0, 6, 0x05, 0xdc];
        assert_eq!(pseudo_header_v4(src, dst, 6, 1500), reference_sum(&flat));

        let src6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst6 = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 0, 0, 0, 0xff, 0xfe,
        ];
        let mut flat6 = Vec::new();
        flat6.extend_from_slice(&src6);
        flat6.extend_from_slice(&dst6);
        flat6.extend_from_slice(&0x0001_0203u32.to_be_bytes());
        flat6.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(
            pseudo_header_v6(src6, dst6, 6, 0x0001_0203),
            reference_sum(&flat6)
        );
    }

    #[test]
    fn complete_checksum_bounds() {
        let mut frame = [0u8; 10];
        assert!(complete_checksum(&mut frame, 0, 8).is_ok());
        assert!(complete_checksum(&mut frame, 8, 0).is_ok());
        assert!(complete_checksum(&mut frame, 9, 0).is_err());
        assert!(complete_checksum(&mut frame, 0, 9).is_err());
        assert!(complete_checksum(&mut frame, 10, 0).is_err());
        assert!(complete_checksum(&mut frame, 11, 0).is_err());
        assert!(complete_checksum(&mut frame, usize::MAX, 1).is_err());
        assert!(complete_checksum(&mut frame, 1, usize::MAX).is_err());
        assert!(complete_checksum(&mut frame, usize::MAX - 1, 0).is_err());
        assert!(complete_checksum(&mut [], 0, 0).is_err());
    }

    #[test]
    fn complete_checksum_never_stores_zero() {
        // The covered bytes sum to 0xffff, so the checksum would be 0.
        let mut frame = [0x12, 0x34, 0xed, 0xcb, 0x00, 0x00];
        complete_checksum(&mut frame, 0, 4).unwrap();
        assert_eq!(&frame[4..], &[0xff, 0xff]);
        assert_eq!(reference_sum(&frame), 0xffff);
    }
}
