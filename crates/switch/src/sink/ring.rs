//! The ring sink: one copy loop into an RX lease of a ring port, fed by a
//! fragment iterator, whatever the frames came from (a ring source's TX
//! slots, staged frames, segments cut from a TSO frame). A ring carries no
//! virtio-net header, so staged frames get their checksums completed and
//! their TSO frames segmented in software on the way.

use ringswitch_ring::layout::{MAX_FRAGS, NS_MOREFRAG};
use ringswitch_ring::{arith, Dir, Region, RingRef};

use ringswitch_frame::{Caps, Staged};
use ringswitch_offload::{self as offload, Action};

use crate::batch::conv::{frag_flags, slot_len, u32_of};
use crate::batch::{RingBatch, SlotFrag, SlotFrags, StageScratch, SEGS_MAX};
use crate::port::{CounterSet, RingPort};
use crate::sink::queue::checked_hdr;
use crate::sink::Retag;
use crate::vlan::Edit;

/// Bytes of a frame the sink copies from.
pub(crate) trait Fragment: Copy {
    /// Length in bytes.
    fn len(&self) -> u32;

    /// Copies `len` bytes at `off` of the fragment into buffer `db` of
    /// `dregion` at `doff`. False, copying nothing, when a buffer index or
    /// a range is invalid.
    fn copy_to(&self, dregion: &Region, db: u32, doff: usize, off: usize, len: usize) -> bool;

    /// Its first 16 bytes (the addresses and a VLAN tag's place); past its
    /// length, whatever its buffer holds, or zeros.
    fn head(&self) -> [u8; 16];
}

impl Fragment for SlotFrag<'_> {
    #[inline(always)]
    fn len(&self) -> u32 {
        self.len
    }

    #[inline(always)]
    fn copy_to(&self, dregion: &Region, db: u32, doff: usize, off: usize, len: usize) -> bool {
        dregion.copy_from(db, doff, self.region, self.buf_idx, off, len)
    }

    #[inline(always)]
    fn head(&self) -> [u8; 16] {
        self.region.read_head(self.buf_idx).unwrap_or_default()
    }
}

impl Fragment for &[u8] {
    #[inline(always)]
    fn len(&self) -> u32 {
        u32_of(<[u8]>::len(self))
    }

    #[inline(always)]
    fn copy_to(&self, dregion: &Region, db: u32, doff: usize, off: usize, len: usize) -> bool {
        self.get(off..off + len)
            .is_some_and(|b| dregion.write_buf(db, doff, b))
    }

    #[inline(always)]
    fn head(&self) -> [u8; 16] {
        let mut h = [0u8; 16];
        let n = <[u8]>::len(self).min(16);
        h[..n].copy_from_slice(&self[..n]);
        h
    }
}

/// Frames the ring sink copies, by index: each a length and fragments.
pub(crate) trait RingFrames {
    /// What the frames are made of.
    type Frag: Fragment;
    /// A frame's fragments.
    type Frags: Iterator<Item = Self::Frag>;

    /// Bytes of frame `k` (as counted: fragments may since have shrunk).
    fn len(&self, k: u32) -> u32;

    /// Frame `k`'s fragment when it has exactly one.
    fn single(&self, k: u32) -> Option<Self::Frag>;

    /// Frame `k`'s fragments, in order.
    fn frags(&self, k: u32) -> Self::Frags;
}

impl<'a> RingFrames for RingBatch<'a> {
    type Frag = SlotFrag<'a>;
    type Frags = SlotFrags<'a>;

    #[inline(always)]
    fn len(&self, k: u32) -> u32 {
        self.ft[k as usize].len
    }

    #[inline(always)]
    fn single(&self, k: u32) -> Option<SlotFrag<'a>> {
        let p = &self.ft[k as usize];
        (p.nfrags == 1).then_some(SlotFrag {
            region: self.region,
            buf_idx: p.buf_idx,
            len: p.first_len,
        })
    }

    #[inline(always)]
    fn frags(&self, k: u32) -> SlotFrags<'a> {
        RingBatch::frags(self, k)
    }
}

/// Frames in contiguous memory: frame `k` is `(self.0)(k)`.
pub(crate) struct Contiguous<F>(pub(crate) F);

impl<'a, F: Fn(u32) -> &'a [u8]> RingFrames for Contiguous<F> {
    type Frag = &'a [u8];
    type Frags = std::iter::Once<&'a [u8]>;

    #[inline(always)]
    fn len(&self, k: u32) -> u32 {
        u32_of((self.0)(k).len())
    }

    #[inline(always)]
    fn single(&self, k: u32) -> Option<&'a [u8]> {
        Some((self.0)(k))
    }

    #[inline(always)]
    fn frags(&self, k: u32) -> std::iter::Once<&'a [u8]> {
        std::iter::once((self.0)(k))
    }
}

/// A piece of an edited frame: its new first bytes, or a fragment of the
/// original from an offset on.
#[derive(Clone, Copy)]
pub(crate) enum EditedFrag<Fr> {
    /// The rewritten addresses and tag: 16 bytes, the first `.1` used.
    Head([u8; 16], u32),
    /// A fragment of the original, from byte `.1` on.
    Part(Fr, u32),
    /// A whole edited frame of one fragment: the new head (its first `hlen`
    /// bytes), then the fragment from byte `skip` on; one piece for the
    /// sink's one-slot path.
    Spliced {
        head: [u8; 16],
        hlen: u32,
        frag: Fr,
        skip: u32,
    },
}

impl<Fr: Fragment> Fragment for EditedFrag<Fr> {
    #[inline(always)]
    fn len(&self) -> u32 {
        match self {
            EditedFrag::Head(_, n) => *n,
            EditedFrag::Part(f, from) => f.len().saturating_sub(*from),
            EditedFrag::Spliced {
                hlen, frag, skip, ..
            } => hlen + frag.len().saturating_sub(*skip),
        }
    }

    #[inline(always)]
    fn copy_to(&self, dregion: &Region, db: u32, doff: usize, off: usize, len: usize) -> bool {
        match self {
            EditedFrag::Head(h, n) => h[..*n as usize]
                .get(off..off + len)
                .is_some_and(|b| dregion.write_buf(db, doff, b)),
            EditedFrag::Part(f, from) => f.copy_to(dregion, db, doff, off + *from as usize, len),
            EditedFrag::Spliced {
                head,
                hlen,
                frag,
                skip,
            } => {
                // The part of the range in the head, then the rest from
                // the fragment.
                let hlen = *hlen as usize;
                let in_head = hlen.saturating_sub(off).min(len);
                if in_head > 0 && !dregion.write_buf(db, doff, &head[off..off + in_head]) {
                    return false;
                }
                let rest = len - in_head;
                rest == 0
                    || frag.copy_to(
                        dregion,
                        db,
                        doff + in_head,
                        (off + in_head - hlen) + *skip as usize,
                        rest,
                    )
            }
        }
    }

    fn head(&self) -> [u8; 16] {
        match self {
            EditedFrag::Head(h, _) => *h,
            EditedFrag::Part(f, 0) => f.head(),
            EditedFrag::Part(..) => [0; 16],
            EditedFrag::Spliced { head, .. } => *head,
        }
    }
}

/// The fragments of an edited frame: the new head, then the original's
/// fragments with the first `skip` bytes left out (all within the first
/// fragment: a tag is only read or written there).
pub(crate) struct EditedFrags<I> {
    head: Option<([u8; 16], u32)>,
    skip: u32,
    inner: I,
}

impl<Fr: Fragment, I: Iterator<Item = Fr>> Iterator for EditedFrags<I> {
    type Item = EditedFrag<Fr>;

    #[inline(always)]
    fn next(&mut self) -> Option<EditedFrag<Fr>> {
        if let Some((h, n)) = self.head.take() {
            return Some(EditedFrag::Head(h, n));
        }
        let f = self.inner.next()?;
        Some(EditedFrag::Part(f, std::mem::take(&mut self.skip)))
    }
}

/// Frames with their VLAN tags edited on the way (`edit` per frame).
pub(crate) struct Edited<'f, F, E> {
    pub(crate) inner: &'f F,
    pub(crate) edit: E,
}

impl<F: RingFrames, E: Fn(u32) -> Edit> RingFrames for Edited<'_, F, E> {
    type Frag = EditedFrag<F::Frag>;
    type Frags = EditedFrags<F::Frags>;

    #[inline(always)]
    fn len(&self, k: u32) -> u32 {
        (self.edit)(k).len(self.inner.len(k))
    }

    #[inline(always)]
    fn single(&self, k: u32) -> Option<Self::Frag> {
        let f = self.inner.single(k)?;
        match (self.edit)(k) {
            Edit::Keep => Some(EditedFrag::Part(f, 0)),
            e => {
                let (head, hlen, skip) = e.head(&f.head());
                // A fragment shorter than what the head stands for (a
                // sender that shrank it since) goes the long way, which
                // copies what there is.
                (f.len() >= skip).then_some(EditedFrag::Spliced {
                    head,
                    hlen,
                    frag: f,
                    skip,
                })
            }
        }
    }

    #[inline]
    fn frags(&self, k: u32) -> Self::Frags {
        let e = (self.edit)(k);
        if e == Edit::Keep {
            return EditedFrags {
                head: None,
                skip: 0,
                inner: self.inner.frags(k),
            };
        }
        let orig = self
            .inner
            .frags(k)
            .next()
            .map(|f| f.head())
            .unwrap_or_default();
        let (h, n, skip) = e.head(&orig);
        EditedFrags {
            head: Some((h, n)),
            skip,
            inner: self.inner.frags(k),
        }
    }
}

/// [`put`], with the frames' tags edited when `edit` is given.
#[inline]
pub(crate) fn put_edited<F: RingFrames>(
    frames: &F,
    ids: impl ExactSizeIterator<Item = u32> + Clone,
    drp: &RingPort,
    q: usize,
    c: &CounterSet,
    already_full: bool,
    edit: Option<impl Fn(u32) -> Edit>,
) -> bool {
    match edit {
        None => put(frames, ids, drp, q, c, already_full),
        Some(edit) => put(
            &Edited {
                inner: frames,
                edit,
            },
            ids,
            drp,
            q,
            c,
            already_full,
        ),
    }
}

/// The buffer of RX slot `d`, repaired (set back to the slot's own buffer,
/// `default_buf + d`) if the application pointed it outside its region.
#[inline(always)]
fn valid_buf(dregion: &Region, dring: &RingRef<'_>, default_buf: u32, d: u32) -> u32 {
    let b = dring.buf_idx(d);
    if dregion.buf_ofs(b).is_some() {
        b
    } else {
        let b = default_buf + d;
        dring.set_buf_idx(d, b);
        b
    }
}

/// Slots of `buf` bytes a frame of `len` bytes takes.
#[inline(always)]
fn slots_for(len: u32, buf: u32) -> u32 {
    if len <= buf {
        1
    } else {
        len.div_ceil(buf)
    }
}

/// Copies frames `ids` of `frames` into RX ring `q` of ring port `drp`, in
/// order, under one reservation, as far as the ring has room; the rest are
/// dropped. With `already_full` (an earlier call for the same batch found
/// the ring full) all are dropped. Every frame is counted once on `c`:
/// delivered (`rx_packets`), or dropped as too long for the destination's
/// buffers (`drop_long`) or for lack of room (`drop_rx_full`). Returns
/// whether the ring filled up. The caller checked that the port is up.
#[inline]
pub(crate) fn put<F: RingFrames>(
    frames: &F,
    ids: impl ExactSizeIterator<Item = u32> + Clone,
    drp: &RingPort,
    q: usize,
    c: &CounterSet,
    already_full: bool,
) -> bool {
    if already_full {
        CounterSet::add(&c.drop_rx_full, ids.len() as u64);
        return true;
    }
    let dregion: &Region = drp.region();
    let dbuf = dregion.buf_size();
    let want: u32 = ids
        .clone()
        .map(|k| slots_for(frames.len(k), dbuf))
        .filter(|&s| s <= MAX_FRAGS)
        .sum();
    let res = drp.rx(q).reserve(want, c);
    let place = dregion.ring_place(0, Dir::Rx, u32_of(q));
    let dring = dregion.ring_at(place);
    let dn = place.num_slots;
    let default_buf = dregion.layout().first_buf(0, Dir::Rx, u32_of(q));

    let mut left = res.len;
    let mut d = res.start;
    for k in 0..res.len.min(4) {
        dregion.prefetch_buf(dring.buf_idx(arith::add(d, k, dn)));
    }
    let (mut pkts, mut bytes, mut dropped, mut long) = (0u64, 0u64, 0u64, 0u64);
    let mut filled = false;
    for k in ids {
        let len = frames.len(k);
        let need = slots_for(len, dbuf);
        if need > MAX_FRAGS {
            long += 1;
            continue;
        }
        if need > left {
            // The ring is full: this frame and the rest of the group are
            // dropped, so what arrives is always a prefix, in order.
            dropped += 1;
            left = 0;
            filled = true;
            continue;
        }
        let dest_buf = |d: u32| valid_buf(dregion, &dring, default_buf, d);
        if left > 4 {
            dregion.prefetch_buf(dring.buf_idx(arith::add(d, 4, dn)));
        }
        let single = if need == 1 { frames.single(k) } else { None };
        if let Some(f) = single {
            // The common case: one fragment in, one slot out.
            let flen = f.len();
            if !f.copy_to(dregion, dring.buf_idx(d), 0, 0, flen as usize) {
                f.copy_to(dregion, dest_buf(d), 0, 0, flen as usize);
            }
            dring.set_len_flags(d, slot_len(flen), frag_flags(1));
            d = arith::next(d, dn);
        } else {
            // Stream the fragments into as many destination slots as needed.
            let mut used = 1u32;
            let mut db = dest_buf(d);
            let mut doff = 0u32;
            for s in frames.frags(k) {
                let slen = s.len();
                let mut soff = 0u32;
                while soff < slen {
                    if doff == dbuf {
                        if used == need {
                            break;
                        }
                        dring.set_len_flags(d, slot_len(doff), NS_MOREFRAG | frag_flags(need));
                        d = arith::next(d, dn);
                        db = dest_buf(d);
                        doff = 0;
                        used += 1;
                    }
                    let chunk = (slen - soff).min(dbuf - doff);
                    s.copy_to(dregion, db, doff as usize, soff as usize, chunk as usize);
                    soff += chunk;
                    doff += chunk;
                }
            }
            dring.set_len_flags(d, slot_len(doff), frag_flags(need));
            d = arith::next(d, dn);
            // Slots reserved for this frame but not filled (the sender shrank
            // it meanwhile) are sent as empty fragments.
            while used < need {
                used += 1;
                dring.set_len_flags(d, 0, frag_flags(need));
                d = arith::next(d, dn);
            }
        }
        left -= need;
        pkts += 1;
        bytes += u64::from(len);
    }
    // Counted before hwtail moves over the slots: what the client sees has
    // been counted.
    CounterSet::add(&c.rx_packets, pkts);
    CounterSet::add(&c.rx_bytes, bytes);
    CounterSet::add(&c.drop_rx_full, dropped);
    CounterSet::add(&c.drop_long, long);
    drp.finish_lease(q, res, d, &dring, c);
    filled
}

/// Delivers staged frames `order` into ring port `drp`: checksums
/// completed and TSO frames segmented in software (a ring carries no
/// virtio-net header). Plain frames go in runs, one reservation each; a TSO
/// frame is segmented into the bounce buffer and gets a reservation of its
/// own, so order is kept.
pub(crate) fn put_staged(
    st: &mut StageScratch,
    order: &[u32],
    drp: &RingPort,
    q: usize,
    c: &CounterSet,
    retag: Option<Retag<'_>>,
) {
    let none = Caps::default();
    let StageScratch {
        intake,
        bounce,
        segs,
        segmenter,
        ..
    } = st;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    let (arena, staged) = intake.parts_mut();
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
                let (arena, staged): (&[u8], &[Staged]) = (&*arena, &*staged);
                let frames = Contiguous(|k: u32| {
                    let st = staged[k as usize];
                    &arena[st.off as usize..(st.off + st.len) as usize]
                });
                let edit = retag.map(|r| move |k| r.edit(k));
                full |= put_edited(&frames, run.iter().copied(), drp, q, c, full, edit);
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
                        // Each segment is counted by the sink; the frame
                        // they came from was one.
                        CounterSet::add(&c.rx_segments_added, segs.len().saturating_sub(1) as u64);
                        let (bounce, segs): (&[u8], &[(u32, u32)]) = (bounce, segs);
                        let frames = Contiguous(|k: u32| {
                            let (o, l) = segs[k as usize];
                            &bounce[o as usize..(o + l) as usize]
                        });
                        // Every segment gets the frame's edit.
                        let edit = retag.map(|r| r.edit(order[i])).map(|e| move |_| e);
                        full |= put_edited(&frames, 0..u32_of(segs.len()), drp, q, c, full, edit);
                    }
                    // Segments overflowing the bounce buffer (a frame
                    // checked when staged fails for nothing else): too long
                    // to deliver here.
                    Err(_) => CounterSet::add(&c.drop_long, 1),
                }
            }
            run_start = i + 1;
        }
        i += 1;
    }
}
