//! What netmap's port side does to a program's frames at sync time that
//! ringswitch's daemon does not: it copies NS_INDIRECT slots in on TX, and
//! on a switch port with a virtio-net header (PORT_HDR_SET) it takes the
//! header off the frames the program sends and puts one in front of the
//! frames it receives.
//!
//! The daemon knows nothing of either, so the emulation does it in the
//! program's own thread, inside the sync: on TX for the slots the program
//! hands over in that sync (after its head was validated, before the port
//! side can see them), on RX for the slots the port side handed over in
//! it (before the program can see them). Either way the slots belong to
//! neither the program nor the port side at that moment. Every length,
//! buffer index and pointer read from a slot is checked first; a frame that
//! cannot be handled is sent or handed over empty and counted (as netmap
//! does with a bad indirect pointer), never an access outside its buffer.

use std::sync::atomic::Ordering;

use ringswitch_ring::layout::{NetmapSlot, MAX_FRAGS, NS_INDIRECT, NS_MOREFRAG};
use ringswitch_ring::{AppRing, Region};

use crate::state::PortState;

/// virtio-net header flag: the checksum from `csum_start` is to be done.
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// virtio-net header `gso_type` of a frame that needs no segmentation.
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
/// The longest header (12 bytes, with `num_buffers`).
const HDR_MAX: usize = 12;

/// Where a ring is in the packet passing through it, kept across syncs
/// (a program may sync with half a packet in the ring).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Packet {
    /// The next slot starts a packet.
    #[default]
    Start,
    /// The next slot continues a packet.
    Middle,
    /// The next slot continues a packet that is being dropped.
    Dropping,
}

fn next(i: u32, n: u32) -> u32 {
    if i + 1 >= n {
        0
    } else {
        i + 1
    }
}

/// TX: the slots `from..to` of `app` (just handed over by the program,
/// not yet published): NS_INDIRECT slots get their payload copied into
/// their buffer, and with a header length `hdr` each packet loses its
/// header. `at` is where the ring was in a packet.
pub fn tx(app: &AppRing, from: u32, to: u32, hdr: usize, st: &PortState, at: &mut Packet) {
    let ring = app.ring();
    let region = app.region();
    let n = app.num_slots();
    let bsize = app.buf_size() as usize;
    if hdr == 0 && *at != Packet::Dropping && plain(app, from, to, at) {
        return;
    }
    let mut i = from;
    // Indirect payloads are copied a batch ahead of this walk.
    let mut ahead: Option<Ahead> = None;
    // At most one lap: `from` and `to` are ring indexes below n.
    for k in 0..n {
        if i == to {
            break;
        }
        let mut s = ring.slot(i);
        let mut changed = false;
        let mut dropping = *at == Packet::Dropping;
        if s.flags & NS_INDIRECT != 0 {
            s.flags &= !NS_INDIRECT;
            let copied = ahead
                .get_or_insert_with(Ahead::new)
                .take(app, k, i, to, bsize);
            match copied {
                Some(len) => s.len = len,
                None => {
                    // Counted once, here, whatever else the packet had.
                    st.indirect_bad.fetch_add(1, Ordering::Relaxed);
                    s.len = 0;
                    dropping |= *at == Packet::Start && hdr > 0;
                }
            }
            changed = true;
        }
        let more = s.flags & NS_MOREFRAG != 0;
        if dropping {
            s.len = 0;
            changed = true;
        } else if *at == Packet::Start && hdr > 0 {
            match strip_header(region, &s, hdr, bsize, !more) {
                Some(len) => s.len = len,
                None => {
                    st.vnet_tx_bad.fetch_add(1, Ordering::Relaxed);
                    s.len = 0;
                    dropping = true;
                }
            }
            changed = true;
        }
        if changed {
            ring.set_slot(i, s);
        }
        *at = match (more, dropping) {
            (false, _) => Packet::Start,
            (true, true) => Packet::Dropping,
            (true, false) => Packet::Middle,
        };
        i = next(i, n);
    }
}

/// The common case of [`tx`], without a header and outside a packet being
/// dropped: true when no slot of `from..to` is NS_INDIRECT, so there is
/// nothing to do but note where the ring is in a packet. One 8-byte load
/// per slot (its flags); false, with `at` as it was, when the full walk is
/// needed.
fn plain(app: &AppRing, from: u32, to: u32, at: &mut Packet) -> bool {
    let ring = app.ring();
    let n = app.num_slots();
    let mut last = None;
    let mut i = from;
    for _ in 0..n {
        if i == to {
            break;
        }
        // buf_idx | len << 32 | flags << 48
        let flags = (ring.slot_word0(i) >> 48) as u16;
        if flags & NS_INDIRECT != 0 {
            return false;
        }
        last = Some(flags);
        i = next(i, n);
    }
    if let Some(f) = last {
        *at = if f & NS_MOREFRAG != 0 {
            Packet::Middle
        } else {
            Packet::Start
        };
    }
    true
}

/// Slots per system call when copying indirect payloads in (below
/// IOV_MAX, 1024).
const BATCH: usize = 256;

/// NS_INDIRECT payloads copied into their slots' buffers ahead of `tx`'s
/// walk, a batch of slots per system call: one `process_vm_readv` per
/// slot cost more than the rest of a sync (pkt-gen -I ran at a thirtieth
/// of its plain rate).
struct Ahead {
    /// The batch: each slot's position in the walk (from its `from`) and
    /// its length, or None when it is to be sent empty.
    done: [(u32, Option<u16>); BATCH],
    /// Entries in `done`.
    len: usize,
    /// The next entry to hand out.
    next: usize,
}

impl Ahead {
    fn new() -> Ahead {
        Ahead {
            done: [(0, None); BATCH],
            len: 0,
            next: 0,
        }
    }

    /// The result for slot `i`, at position `k` of the walk that ends at
    /// `to`: copied with a batch of the indirect slots after it when it is
    /// not in the current batch (the program may have changed its flags
    /// since; whatever it did, each slot is copied at most once per walk
    /// position and every access is checked).
    fn take(&mut self, app: &AppRing, k: u32, i: u32, to: u32, bsize: usize) -> Option<u16> {
        while self.next < self.len && self.done[self.next].0 < k {
            self.next += 1;
        }
        if self.next == self.len || self.done[self.next].0 != k {
            self.fill(app, k, i, to, bsize);
        }
        let r = self.done[self.next].1;
        self.next += 1;
        r
    }

    /// Copies slot `i` (position `k`) and the NS_INDIRECT slots after it,
    /// up to `to` and at most [`BATCH`], with as few system calls as the
    /// pointers allow: one, unless one of them cannot be read.
    fn fill(&mut self, app: &AppRing, k: u32, i: u32, to: u32, bsize: usize) {
        let ring = app.ring();
        let region = app.region();
        let n = app.num_slots();
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut local = [empty; BATCH];
        let mut remote = [empty; BATCH];
        // For each iovec pair, its entry in `done`.
        let mut entry = [0u16; BATCH];
        let mut copies = 0;
        // Slots pointing where the last slot read in the batch points,
        // with its length (pkt-gen -I sends one frame from every slot):
        // their entry, that slot's iovec pair, and their buffer, copied
        // from that slot's buffer once it is read.
        let mut dups = [(0u16, 0u16, std::ptr::null_mut::<u8>()); BATCH];
        let mut ndups = 0;
        self.len = 0;
        self.next = 0;
        let (mut pos, mut at) = (k, i);
        while self.len < BATCH {
            let s = ring.slot(at);
            // The first slot is the one the walk found indirect.
            if pos == k || s.flags & NS_INDIRECT != 0 {
                let len = usize::from(s.len);
                // SAFETY: the slot was handed over by the program in this
                // sync and is not yet published, so neither the program (by
                // netmap's rules) nor the port side touches its buffer. Only
                // its address is kept: the kernel writes into it below, and
                // no reference to it outlives this statement (two slots
                // naming one buffer only make the kernel write it twice).
                let buf = unsafe { region.buf_mut(s.buf_idx) }.map(|b| b.as_mut_ptr());
                let r = match buf {
                    Some(_) if len == 0 => Some(0),
                    Some(b)
                        if len <= bsize
                            && copies > 0
                            && remote[copies - 1].iov_base as usize as u64 == s.ptr
                            && remote[copies - 1].iov_len == len =>
                    {
                        dups[ndups] = (self.len as u16, (copies - 1) as u16, b);
                        ndups += 1;
                        Some(s.len)
                    }
                    Some(b) if len <= bsize => {
                        local[copies] = libc::iovec {
                            iov_base: b.cast(),
                            iov_len: len,
                        };
                        remote[copies] = libc::iovec {
                            iov_base: s.ptr as usize as *mut libc::c_void,
                            iov_len: len,
                        };
                        entry[copies] = self.len as u16;
                        copies += 1;
                        Some(s.len)
                    }
                    _ => None,
                };
                self.done[self.len] = (pos, r);
                self.len += 1;
            }
            at = next(at, n);
            pos += 1;
            if at == to || pos >= n {
                break;
            }
        }
        let mut start = 0;
        while start < copies {
            start += read_own_many(&local[start..copies], &remote[start..copies]);
            if start < copies {
                // The one that stopped the call: alone, to tell a pointer
                // that cannot be read from anything else that went wrong.
                let (l, r) = (local[start], remote[start]);
                if read_own_many(&[l], &[r]) != 1 {
                    self.done[usize::from(entry[start])].1 = None;
                }
                start += 1;
            }
        }
        for &(e, from, to) in &dups[..ndups] {
            let src = usize::from(from);
            if self.done[usize::from(entry[src])].1.is_none() {
                self.done[usize::from(e)].1 = None;
            } else {
                // SAFETY: two whole buffers of the region (checked when
                // their slots were taken), of slots handed over in this
                // sync and not yet published (see above); `copy` allows
                // them to be one buffer.
                unsafe {
                    std::ptr::copy(local[src].iov_base.cast::<u8>(), to, local[src].iov_len);
                }
            }
        }
    }
}

/// Copies `dst.len()` bytes from address `src` of this process into
/// `dst`, as a system call does with a user pointer: an address that is
/// not mapped readable fails (false), it does not fault.
#[cfg(test)]
fn read_own(src: u64, dst: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: src as usize as *mut libc::c_void,
        iov_len: dst.len(),
    };
    read_own_many(&[local], &[remote]) == 1
}

/// Copies each `remote[j]` of this process into `local[j]` (of the same
/// length) in one system call, as a system call reads user pointers: an
/// address that is not mapped readable stops the copy there, it does not
/// fault. Returns how many pairs, from the first, were copied whole.
fn read_own_many(local: &[libc::iovec], remote: &[libc::iovec]) -> usize {
    debug_assert_eq!(local.len(), remote.len());
    let n = local.len().min(remote.len());
    // SAFETY: the kernel writes only into the `local` ranges, which the
    // caller holds for this, and reads `remote` from our own address space
    // through the page tables, failing with EFAULT (not a fault) where it
    // is not readable. Our own process is always allowed. At most BATCH
    // (below IOV_MAX) pairs.
    let got = unsafe {
        libc::process_vm_readv(
            std::process::id() as libc::pid_t,
            local.as_ptr(),
            n as libc::c_ulong,
            remote.as_ptr(),
            n as libc::c_ulong,
            0,
        )
    };
    let Ok(mut left) = usize::try_from(got) else {
        return 0;
    };
    let mut whole = 0;
    for r in &remote[..n] {
        if left < r.iov_len {
            break;
        }
        left -= r.iov_len;
        whole += 1;
    }
    whole
}

/// Takes the `hdr`-byte virtio-net header off the first slot `s` of a
/// packet (`whole`: the packet is this one slot), doing what it asks:
/// the checksum from `csum_start` for a one-slot packet. The new length,
/// or None when the slot is shorter than the header, its buffer index or
/// length is bad, or the header asks for segmentation or a checksum over
/// several slots.
fn strip_header(
    region: &Region,
    s: &NetmapSlot,
    hdr: usize,
    bsize: usize,
    whole: bool,
) -> Option<u16> {
    let len = usize::from(s.len);
    if len < hdr || len > bsize || hdr > HDR_MAX {
        return None;
    }
    // SAFETY: as in `indirect`.
    let buf = unsafe { region.buf_mut(s.buf_idx) }?;
    let (flags, gso) = (buf[0], buf[1]);
    let csum_start = usize::from(u16::from_le_bytes([buf[6], buf[7]]));
    let csum_offset = usize::from(u16::from_le_bytes([buf[8], buf[9]]));
    if gso != VIRTIO_NET_HDR_GSO_NONE {
        return None;
    }
    buf.copy_within(hdr..len, 0);
    let len = len - hdr;
    if flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        if !whole {
            return None;
        }
        complete_checksum(&mut buf[..len], csum_start, csum_offset)?;
    }
    // At most the old length.
    Some(len as u16)
}

/// Completes a partial checksum as a virtio-net device does: the 16-bit
/// one's complement sum of `frame[start..]` (whose checksum field, at
/// `start + offset`, holds the pseudo-header's sum), complemented, stored
/// at the field. None when the field is not inside the frame.
fn complete_checksum(frame: &mut [u8], start: usize, offset: usize) -> Option<()> {
    let at = start.checked_add(offset)?;
    if at.checked_add(2)? > frame.len() {
        return None;
    }
    let mut sum: u64 = 0;
    let mut words = frame[start..].chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // A UDP checksum of 0 means "none": send 0xffff, its equal in one's
    // complement, as TCP/IP stacks do.
    let c = match !(sum as u16) {
        0 => 0xffff,
        c => c,
    };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Some(())
}

/// RX: the slots `from..to` of `app` (just handed over by the port side):
/// with a header length `hdr`, each packet gets a zeroed header in front
/// (no offload asked: the switch hands ring ports whole frames with their
/// checksums done), the packet's bytes moving `hdr` further along its
/// slots. A packet whose last slot has no room for it is handed over
/// empty and counted. `at` is where the ring was in a packet.
pub fn rx(app: &AppRing, from: u32, to: u32, hdr: usize, st: &PortState, at: &mut Packet) {
    if hdr == 0 || hdr > HDR_MAX {
        return;
    }
    let ring = app.ring();
    let region = app.region();
    let n = app.num_slots();
    let bsize = app.buf_size() as usize;
    let mut i = from;
    // Each round takes at least one slot of the range: at most n rounds.
    for _ in 0..n {
        if i == to {
            break;
        }
        if *at != Packet::Start {
            // The rest of a packet already given up on.
            let mut s = ring.slot(i);
            s.len = 0;
            ring.set_slot(i, s);
            if s.flags & NS_MOREFRAG == 0 {
                *at = Packet::Start;
            }
            i = next(i, n);
            continue;
        }
        // The packet's slots: `count` from `i`, the last one at `last`.
        let (mut last, mut count) = (i, 1u32);
        let mut ok = true;
        loop {
            let s = ring.slot(last);
            ok &= usize::from(s.len) <= bsize && region.buf_ofs(s.buf_idx).is_some();
            if s.flags & NS_MOREFRAG == 0 {
                break;
            }
            let nx = next(last, n);
            if nx == to || count >= MAX_FRAGS {
                // Not all here (or longer than any packet): give it up.
                ok = false;
                *at = Packet::Dropping;
                break;
            }
            last = nx;
            count += 1;
        }
        ok &= *at == Packet::Start && usize::from(ring.slot(last).len) + hdr <= bsize;
        if !ok {
            st.vnet_rx_no_room.fetch_add(1, Ordering::Relaxed);
        }
        let mut carry = [0u8; HDR_MAX];
        for k in 0..count {
            let mut s = ring.slot(i);
            if ok {
                // SAFETY: the port side handed this slot over in this
                // sync and the program has not seen it yet; this is the
                // only view of its buffer (checked valid above).
                if let Some(buf) = unsafe { region.buf_mut(s.buf_idx) } {
                    s.len = shift_in(buf, usize::from(s.len), &mut carry[..hdr], k + 1 == count);
                }
            } else {
                s.len = 0;
            }
            ring.set_slot(i, s);
            i = next(i, n);
        }
    }
}

/// One slot of a packet being moved `carry.len()` bytes along: the slot
/// becomes `carry` followed by its first bytes, and `carry` its last
/// bytes; the last slot (which has room, checked by the caller) keeps all
/// of its bytes and grows. Returns the slot's new length.
fn shift_in(buf: &mut [u8], len: usize, carry: &mut [u8], last: bool) -> u16 {
    let h = carry.len();
    if last {
        buf.copy_within(0..len, h);
        buf[..h].copy_from_slice(carry);
        return (len + h) as u16;
    }
    let mut both = [0u8; 2 * HDR_MAX];
    if len >= h {
        both[..h].copy_from_slice(&buf[len - h..len]);
        buf.copy_within(0..len - h, h);
        buf[..h].copy_from_slice(carry);
        carry.copy_from_slice(&both[..h]);
    } else {
        both[..h].copy_from_slice(carry);
        both[h..h + len].copy_from_slice(&buf[..len]);
        buf[..len].copy_from_slice(&both[..len]);
        carry.copy_from_slice(&both[len..len + h]);
    }
    len as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a packet across slots, shifted: the header in front,
    /// every byte after it, whatever the slot lengths.
    #[test]
    fn shifting_a_packet_across_slots_keeps_every_byte() {
        for lens in [
            vec![60],
            vec![100, 40],
            vec![5, 3, 30],
            vec![12, 12, 1],
            vec![0, 20],
        ] {
            let h = 10;
            let mut bufs: Vec<Vec<u8>> = Vec::new();
            let mut all = Vec::new();
            let mut b = 0u8;
            for &l in &lens {
                let mut v = vec![0xeeu8; 128];
                for x in v.iter_mut().take(l) {
                    b = b.wrapping_add(1);
                    *x = b;
                    all.push(b);
                }
                bufs.push(v);
            }
            let mut carry = [0xaau8; 10];
            let mut got = Vec::new();
            for (k, (buf, &l)) in bufs.iter_mut().zip(&lens).enumerate() {
                let nl = shift_in(buf, l, &mut carry, k + 1 == lens.len());
                got.extend_from_slice(&buf[..usize::from(nl)]);
            }
            let mut want = vec![0xaau8; h];
            want.extend_from_slice(&all);
            assert_eq!(got, want, "{lens:?}");
        }
    }

    #[test]
    fn completed_checksums_verify() {
        // An IPv4/UDP frame: the checksum over the UDP part (its field
        // holding 0 as the pseudo-header's sum here) must then sum to
        // 0xffff; odd length too.
        for len in [60usize, 61] {
            let mut f: Vec<u8> = (0..len as u8).collect();
            let (start, off) = (34, 6);
            f[start + off] = 0;
            f[start + off + 1] = 0;
            complete_checksum(&mut f, start, off).unwrap();
            let mut sum = 0u64;
            let mut w = f[start..].chunks_exact(2);
            for x in &mut w {
                sum += u64::from(u16::from_be_bytes([x[0], x[1]]));
            }
            if let [l] = w.remainder() {
                sum += u64::from(*l) << 8;
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            assert_eq!(sum, 0xffff, "{len}");
        }
        let mut f = [0u8; 40];
        assert!(
            complete_checksum(&mut f, 34, 6).is_none(),
            "field past the end"
        );
        assert!(complete_checksum(&mut f, usize::MAX, 6).is_none());
    }

    #[test]
    fn reading_a_bad_pointer_fails_without_faulting() {
        let src = [7u8; 32];
        let mut dst = [0u8; 32];
        assert!(read_own(src.as_ptr() as u64, &mut dst));
        assert_eq!(dst, src);
        assert!(!read_own(8, &mut dst));
        assert!(!read_own(u64::MAX - 4, &mut dst));
    }

    /// A batch stops at the first pointer that cannot be read and says
    /// how many pairs before it were copied whole.
    #[test]
    fn a_batch_stops_at_the_first_bad_pointer() {
        let src: Vec<[u8; 16]> = (0..4u8).map(|k| [k + 1; 16]).collect();
        let mut dst = [[0u8; 16]; 4];
        let iov = |p: *mut u8| libc::iovec {
            iov_base: p.cast(),
            iov_len: 16,
        };
        let mut remote: Vec<libc::iovec> = src.iter().map(|b| iov(b.as_ptr().cast_mut())).collect();
        let local: Vec<libc::iovec> = dst.iter_mut().map(|b| iov(b.as_mut_ptr())).collect();
        assert_eq!(read_own_many(&local, &remote), 4);
        assert_eq!(dst.to_vec(), src);
        dst = [[0u8; 16]; 4];
        let local: Vec<libc::iovec> = dst.iter_mut().map(|b| iov(b.as_mut_ptr())).collect();
        remote[2] = iov(8 as *mut u8);
        assert_eq!(read_own_many(&local, &remote), 2);
        assert_eq!(&dst[..2], &src[..2]);
        assert_eq!(read_own_many(&local[3..], &remote[3..]), 1);
        assert_eq!(dst[3], src[3]);
        remote[0] = iov(8 as *mut u8);
        assert_eq!(read_own_many(&local, &remote), 0);
        assert_eq!(read_own_many(&[], &[]), 0);
    }
}
