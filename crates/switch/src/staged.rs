//! The frame path shared by sources that are not netmap rings (VM queue
//! pairs, interface queues): a batch is first copied into a per-worker
//! staging arena (so the source gets its buffers back before any lookup),
//! then every frame is looked up and the frames are delivered destination
//! by destination, as for ring ports.
//!
//! Offloads: a staged frame keeps its offload header (partial checksum,
//! TSO) all the way to a destination that takes the same offload (a VM
//! that negotiated it, a TAP); a ring port, a NIC, or a VM without the
//! feature gets the checksum completed and the TSO frame cut into
//! MSS-sized frames in software.

use ringswitch_frame::{Caps, OffloadHdr, Wake, F_DATA_VALID};
use ringswitch_offload::{self as offload, Action, Segmenter};
use ringswitch_ring::layout::MAX_FRAGS;
use ringswitch_ring::{arith, Dir, NetmapSlot, Region, RingRef};

use crate::engine::conv::{frag_flags, slot_len_of, u32_of};
use crate::engine::{slots_for, valid_buf, Ft, Scratch, Switch};
use crate::learning::Decision;
use crate::port::{Backend, Counters, RingPort, SwitchPort};

/// Staging space for one batch.
pub(crate) const ARENA: usize = 1 << 20;
/// Largest frame a source can hand over: a virtio chain's bound (64 KiB +
/// 1 KiB, header included), more than a TAP's 64 KiB.
pub(crate) const FRAME_MAX: usize = 65 * 1024;
/// Contiguous space for a frame gathered from ring fragments, or for the
/// segments of one TSO frame (64 KiB of payload plus a header per segment).
const BOUNCE: usize = 160 * 1024;
/// Most segments one TSO frame may be cut into here (64 KiB at an MSS of 88
/// bytes; a smaller MSS is refused as malformed).
const SEGS_MAX: usize = 768;

/// What staging did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Staging {
    /// Staged for forwarding.
    Staged,
    /// Refused: its offload request is unsound.
    Malformed,
    /// The arena is full (the batch stops while a frame of the largest size
    /// still fits, so only a frame over [`FRAME_MAX`] meets this).
    NoRoom,
}

/// A frame in the arena.
#[derive(Clone, Copy)]
pub(crate) struct Staged {
    pub(crate) off: u32,
    pub(crate) len: u32,
    pub(crate) hdr: OffloadHdr,
}

/// Per-worker staging space, allocated the first time the worker meets a
/// VM or interface port (ring-only daemons never touch it).
#[derive(Default)]
pub(crate) struct StageScratch {
    pub(crate) arena: Vec<u8>,
    pub(crate) staged: Vec<Staged>,
    pub(crate) bounce: Vec<u8>,
    /// Segments in `bounce`: (offset, length).
    pub(crate) segs: Vec<(u32, u32)>,
    pub(crate) segmenter: Option<Segmenter>,
    /// Bytes of the arena in use.
    pub(crate) used: usize,
}

impl StageScratch {
    pub(crate) fn ensure(&mut self) {
        if self.arena.is_empty() {
            self.arena = vec![0; ARENA];
            self.bounce = vec![0; BOUNCE];
            self.staged.reserve(crate::engine::MAX_BATCH as usize);
            self.segs.reserve(SEGS_MAX);
            self.segmenter = Some(Segmenter::new());
        }
    }

    /// Starts a batch.
    pub(crate) fn start(&mut self) {
        self.ensure();
        self.staged.clear();
        self.used = 0;
    }

    /// Whether one more frame of the largest size fits.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        ARENA - self.used >= FRAME_MAX
    }

    /// Room for the next frame, copied in place: the free tail of the arena (at least [`FRAME_MAX`] bytes while
    /// [`StageScratch::has_room`]).
    pub(crate) fn tail(&mut self) -> &mut [u8] {
        &mut self.arena[self.used..]
    }

    /// Stages the frame of `len` bytes written at the start of
    /// [`StageScratch::tail`], once its offload request is checked on that
    /// copy (the source cannot change it any more): a bad header, a
    /// checksum field outside the frame, headers a GSO frame cannot be cut
    /// by, or more segments than [`SEGS_MAX`] make it `Malformed`, refused
    /// here once for every destination. What passes cannot fail later for
    /// one destination and not another (but for segments overflowing the
    /// bounce buffer, counted as too long by that destination).
    pub(crate) fn commit(&mut self, hdr: OffloadHdr, len: usize) -> Staging {
        let Some(frame) = self.arena.get(self.used..self.used + len) else {
            return Staging::NoRoom;
        };
        match offload::check(frame, &hdr) {
            Ok(segs) if segs <= SEGS_MAX => {}
            _ => return Staging::Malformed,
        }
        self.staged.push(Staged {
            off: u32_of(self.used),
            len: u32_of(len),
            hdr,
        });
        self.used += len.next_multiple_of(64);
        Staging::Staged
    }

    /// Gathers packet `p` of a ring port's batch into the bounce buffer and
    /// returns its length (`p.len`, at most [`FRAME_MAX`]: the caller
    /// checks). Fragments after the first are re-read and re-validated: a
    /// sender that changed them since the batch was validated (a buffer
    /// index turned invalid, a length shrunk) only garbles its own frame,
    /// whose missing bytes are zeros, never what the bounce buffer held
    /// before. The frame is delivered and counted as such, as the ring to
    /// ring path does: no frame is lost without a count.
    pub(crate) fn gather(&mut self, p: &Ft, sregion: &Region, sring: &RingRef<'_>) -> usize {
        let len = (p.len as usize).min(FRAME_MAX);
        let bounce = &mut self.bounce[..len];
        let sn = sring.num_slots();
        let sbuf = sregion.buf_size() as usize;
        let mut off = 0usize;
        let mut j = p.slot;
        for f in 0..p.nfrags {
            if off == len {
                break;
            }
            let s = if f == 0 {
                NetmapSlot {
                    buf_idx: p.buf_idx,
                    len: u16::try_from(p.first_len).unwrap_or(u16::MAX),
                    flags: 0,
                    ptr: 0,
                }
            } else {
                sring.slot(j)
            };
            j = arith::next(j, sn);
            let l = usize::from(s.len).min(sbuf).min(len - off);
            let part = &mut bounce[off..off + l];
            if !sregion.read_buf(s.buf_idx, 0, part) {
                part.fill(0);
            }
            off += l;
        }
        bounce[off..].fill(0);
        len
    }
}

/// The header of a frame whose checksum is known good.
pub(crate) fn checked_hdr() -> OffloadHdr {
    OffloadHdr {
        flags: F_DATA_VALID,
        ..OffloadHdr::default()
    }
}

/// Looks up the frames staged in `sc.stage` (taken from source queue
/// `src_q` of `src`, `bytes` in all) and delivers them destination by
/// destination. The source's `tx_packets`, `tx_bytes` and `drop_no_dest`
/// are counted here, before any delivery; every frame is counted once by
/// each destination it goes to.
pub(crate) fn forward_staged(
    sw: &Switch,
    src: &SwitchPort,
    src_q: usize,
    bytes: u64,
    sc: &mut Scratch,
) {
    sc.clear();
    let table = sw.read_table();
    let now = sw.now_s();
    let mut last: Option<([u8; 12], Decision)> = None;
    for k in 0..sc.stage.staged.len() {
        let st = sc.stage.staged[k];
        let o = st.off as usize;
        let mut hdr = [0u8; 12];
        hdr.copy_from_slice(&sc.stage.arena[o..o + 12]);
        let kk = sc.push_link();
        let decision = match last {
            Some((h, d)) if h == hdr => d,
            _ => {
                let dst = [hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5]];
                let smac = [hdr[6], hdr[7], hdr[8], hdr[9], hdr[10], hdr[11]];
                let d = sw.forwarding().decide(dst, smac, src.index, true, now);
                last = Some((hdr, d));
                d
            }
        };
        sc.route(&table, src.index, kk, st.len, decision);
    }
    let dests = sc.destinations(&table, src.index);
    // The source's counters first, so that what a destination sees has been
    // counted on both sides. Taken with no destination: drop_no_dest only.
    let c = &src.counters;
    Counters::add(&c.tx_packets, sc.stage.staged.len() as u64 - sc.no_dest);
    Counters::add(&c.tx_bytes, bytes - sc.no_dest_bytes);
    Counters::add(&c.drop_no_dest, sc.no_dest);
    for &d in &dests {
        let Some(dport) = table.get(d) else { continue };
        sc.order_for(d);
        let (st, order, c) = (&mut sc.stage, &sc.order[..], &*dport.counters);
        // A queue's lock lives only within its arm: released before the
        // wake-up is sent.
        let wake = match &dport.backend {
            Backend::Ring(drp) => {
                staged_to_ring(st, order, dport, drp, src_q);
                Wake::NONE
            }
            Backend::Queue(dq) => {
                crate::queue::deliver_staged(st, order, &mut *dq.queue(src_q % dq.queues()), c)
            }
        };
        wake.send();
    }
    sc.give_back(dests);
}

/// What a destination queue said to one frame.
pub(crate) enum Outcome {
    /// Taken.
    Taken,
    /// No room: the rest of the batch is dropped.
    Full,
    /// The destination is down: the rest of the batch is dropped.
    Down,
    /// Too long for the destination: this frame is dropped.
    TooLong,
}

/// What one delivery into a VM or an interface did.
#[derive(Default)]
pub(crate) struct Tally {
    pkts: u64,
    bytes: u64,
    pub(crate) full: u64,
    down: u64,
    pub(crate) long: u64,
    /// Outcomes beyond one per frame, from software segmentation.
    added: u64,
    /// The queue filled up: the rest of the batch is dropped, so what
    /// arrives is a prefix.
    pub(crate) stopped: bool,
}

impl Tally {
    /// Offers one frame of `len` bytes to `push`, unless an earlier frame
    /// found the destination full or down; false once it cannot take more.
    #[inline]
    pub(crate) fn push(&mut self, len: usize, push: impl FnOnce() -> Outcome) -> bool {
        if self.stopped {
            self.full += 1;
            return false;
        }
        match push() {
            Outcome::Taken => {
                self.pkts += 1;
                self.bytes += len as u64;
                true
            }
            Outcome::Full => {
                self.full += 1;
                self.stopped = true;
                false
            }
            Outcome::Down => {
                self.down += 1;
                self.stopped = true;
                false
            }
            Outcome::TooLong => {
                self.long += 1;
                true
            }
        }
    }

    pub(crate) fn count(&self, c: &Counters) {
        Counters::add(&c.rx_packets, self.pkts);
        Counters::add(&c.rx_bytes, self.bytes);
        Counters::add(&c.drop_rx_full, self.full);
        Counters::add(&c.drop_link_down, self.down);
        Counters::add(&c.drop_long, self.long);
        Counters::add(&c.rx_segments_added, self.added);
    }
}

/// Delivers staged frames `order` into ring port `drp`: checksums
/// completed and TSO frames segmented in software (a ring carries no
/// virtio-net header). Plain frames go in runs, one reservation each; a TSO
/// frame is segmented into the bounce buffer and gets a reservation of its
/// own, so order is kept.
pub(crate) fn staged_to_ring(
    st: &mut StageScratch,
    order: &[u32],
    dport: &SwitchPort,
    drp: &RingPort,
    src_q: usize,
) {
    if !drp.link.is_up() {
        Counters::add(&dport.counters.drop_link_down, order.len() as u64);
        return;
    }
    let q = src_q % drp.rx_rings();
    let none = Caps::default();
    let StageScratch {
        arena,
        staged,
        bounce,
        segs,
        segmenter,
        ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    let mut run_start = 0usize;
    let mut i = 0usize;
    let mut full = false;
    while i <= order.len() {
        // Decide what frame i needs; a segment frame (or the end) flushes
        // the run of plain frames before it.
        let mut segment = false;
        if i < order.len() {
            let st = &mut staged[order[i] as usize];
            let oh = st.hdr;
            let frame = &mut arena[st.off as usize..(st.off + st.len) as usize];
            match offload::plan(&oh, none) {
                Ok(Action::PassThrough) => {}
                Ok(Action::CompleteChecksum) => {
                    if offload::complete_checksum(
                        frame,
                        oh.csum_start.into(),
                        oh.csum_offset.into(),
                    )
                    .is_ok()
                    {
                        st.hdr = checked_hdr();
                    }
                    // Else (not for a frame checked when staged) it goes as
                    // it is, and the receiver drops it on its checksum.
                }
                Ok(Action::Segment) => segment = true,
                // Not for a frame checked when staged; its segmentation
                // fails below and is counted.
                Err(_) => segment = true,
            }
        }
        if segment || i == order.len() {
            let run = &order[run_start..i];
            if !run.is_empty() {
                full |= ring_put(dport, drp, q, run.len(), full, |j| {
                    let st = staged[run[j] as usize];
                    &arena[st.off as usize..(st.off + st.len) as usize]
                });
            }
            if i < order.len() {
                let st = staged[order[i] as usize];
                let oh = st.hdr;
                let frame = &arena[st.off as usize..(st.off + st.len) as usize];
                segs.clear();
                let mut used = 0usize;
                let r = segmenter.segment(frame, &oh, |seg| {
                    let Some(dst) = bounce.get_mut(used..used + seg.len()) else {
                        return false;
                    };
                    if segs.len() == SEGS_MAX {
                        return false;
                    }
                    dst.copy_from_slice(seg);
                    segs.push((u32_of(used), u32_of(seg.len())));
                    used += seg.len();
                    true
                });
                match r {
                    Ok(_) => {
                        // Each segment is counted by ring_put; the frame
                        // they came from was one.
                        Counters::add(
                            &dport.counters.rx_segments_added,
                            segs.len().saturating_sub(1) as u64,
                        );
                        full |= ring_put(dport, drp, q, segs.len(), full, |j| {
                            let (o, l) = segs[j];
                            &bounce[o as usize..(o + l) as usize]
                        });
                    }
                    // Segments overflowing the bounce buffer (a frame
                    // checked when staged fails for nothing else): too long
                    // to deliver here.
                    Err(_) => Counters::add(&dport.counters.drop_long, 1),
                }
            }
            run_start = i + 1;
        }
        i += 1;
    }
}

/// Copies `n` contiguous frames (`frame(j)`) into RX ring `q` of ring port
/// `drp` under one reservation; drops the rest when the ring fills. With
/// `already_full`, drops all of them (an earlier run found the ring full).
/// Returns whether the ring filled up.
pub(crate) fn ring_put<'a>(
    dport: &SwitchPort,
    drp: &RingPort,
    q: usize,
    n: usize,
    already_full: bool,
    frame: impl Fn(usize) -> &'a [u8],
) -> bool {
    let c = &dport.counters;
    if already_full {
        Counters::add(&c.drop_rx_full, n as u64);
        return true;
    }
    let dregion: &Region = drp.region();
    let dbuf = dregion.buf_size();
    let want: u32 = (0..n)
        .map(|j| slots_for(u32_of(frame(j).len()), dbuf))
        .filter(|&s| s <= MAX_FRAGS)
        .sum();
    let res = drp.rx(q).reserve(want, c);
    let place = dregion.ring_place(0, Dir::Rx, u32_of(q));
    let dring = dregion.ring_at(place);
    let dn = place.num_slots;
    let default_buf = dregion.layout().first_buf(0, Dir::Rx, u32_of(q));
    let dest_buf = |d: u32| valid_buf(dregion, &dring, default_buf, d);
    let mut left = res.len;
    let mut d = res.start;
    let (mut pkts, mut bytes, mut dropped, mut long) = (0u64, 0u64, 0u64, 0u64);
    let mut filled = false;
    for j in 0..n {
        let f = frame(j);
        let need = slots_for(u32_of(f.len()), dbuf);
        if need > MAX_FRAGS {
            long += 1;
            continue;
        }
        if need > left {
            dropped += 1;
            left = 0;
            filled = true;
            continue;
        }
        let mut off = 0usize;
        for u in 0..need {
            let chunk = (f.len() - off).min(dbuf as usize);
            dregion.write_buf(dest_buf(d), 0, &f[off..off + chunk]);
            let more = if u + 1 < need {
                ringswitch_ring::layout::NS_MOREFRAG
            } else {
                0
            };
            dring.set_len_flags(d, slot_len_of(chunk), more | frag_flags(need));
            d = arith::next(d, dn);
            off += chunk;
        }
        left -= need;
        pkts += 1;
        bytes += f.len() as u64;
    }
    // Counted before hwtail moves over the slots: what the client sees has
    // been counted.
    Counters::add(&c.rx_packets, pkts);
    Counters::add(&c.rx_bytes, bytes);
    Counters::add(&c.drop_rx_full, dropped);
    Counters::add(&c.drop_long, long);
    drp.finish_lease(q, res, d, &dring);
    filled
}

/// Delivers staged frames `order` through `push` to a destination that
/// takes offloads `caps`: passed through where it takes them, done in
/// software where not (the completed checksum is kept for later
/// destinations). What happened is added to `t`, once per frame or
/// segment.
pub(crate) fn staged_to_queue(
    st: &mut StageScratch,
    order: &[u32],
    caps: Caps,
    t: &mut Tally,
    mut push: impl FnMut(&OffloadHdr, &[u8]) -> Outcome,
) {
    let StageScratch {
        arena,
        staged,
        segmenter,
        ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    for &k in order {
        if t.stopped {
            t.full += 1;
            continue;
        }
        let st = &mut staged[k as usize];
        let frame = &mut arena[st.off as usize..(st.off + st.len) as usize];
        let oh = st.hdr;
        match offload::plan(&oh, caps) {
            Ok(Action::PassThrough) => {
                t.push(frame.len(), || push(&oh, frame));
            }
            Ok(Action::CompleteChecksum) => {
                if offload::complete_checksum(frame, oh.csum_start.into(), oh.csum_offset.into())
                    .is_err()
                {
                    // Not for a frame checked when staged.
                    t.long += 1;
                    continue;
                }
                // Later destinations get the completed frame.
                st.hdr = checked_hdr();
                t.push(frame.len(), || push(&st.hdr, frame));
            }
            Ok(Action::Segment) => {
                let h = checked_hdr();
                let mut n = 0u64;
                let r = segmenter.segment(frame, &oh, |seg| {
                    n += 1;
                    t.push(seg.len(), || push(&h, seg))
                });
                if r.is_err() {
                    // Not for a frame checked when staged.
                    t.long += 1;
                    n += 1;
                }
                // Each segment (and a failure) is counted once; the frame
                // they came from was one.
                t.added += n.saturating_sub(1);
            }
            // Not for a frame checked when staged.
            Err(_) => t.long += 1,
        }
    }
}
