//! Forwarding to and from VM ports: vhost-user virtio-net queue pairs.
//!
//! From a VM: the worker takes a batch of frames from the guest's TX queue
//! under the pair's lock, copying each into a per-worker staging arena (the
//! chain is completed at once, so the guest gets its buffers back before
//! the lookups), then looks up every frame and delivers destination by
//! destination, as for ring ports.
//!
//! Offloads: a frame keeps its virtio-net header (partial checksum, TSO)
//! all the way to a destination that negotiated the same offload; a ring
//! port, or a VM without the feature, gets the checksum completed and the
//! TSO frame cut into MSS-sized frames in software.

use ringswitch_offload::{self as offload, Action, Caps, OffloadHdr, Segmenter};
use ringswitch_ring::layout::MAX_FRAGS;
use ringswitch_ring::{arith, Dir, NetmapSlot, Region, RingRef};
use ringswitch_vhost::{RxError, VirtioNetHdr, VirtioNetPort};

use crate::engine::{slots_for, valid_buf, BatchResult, Ft, Scratch, Switch, MIN_FRAME};
use crate::learning::Decision;
use crate::port::{Backend, Counters, RingPort, SwitchPort, VirtioPort};

/// Staging space for one batch from a VM.
const ARENA: usize = 1 << 20;
/// Largest frame a guest can send: the chain bound (64 KiB + 1 KiB, header
/// included).
const FRAME_MAX: usize = 65 * 1024;
/// Contiguous space for a frame gathered from ring fragments, or for the
/// segments of one TSO frame (64 KiB of payload plus a header per segment).
const BOUNCE: usize = 160 * 1024;
/// Most segments one TSO frame may be cut into here (64 KiB at an MSS of 88
/// bytes; a smaller MSS is refused as malformed).
const SEGS_MAX: usize = 768;

/// A frame taken from a VM, in the arena.
#[derive(Clone, Copy)]
struct Staged {
    off: u32,
    len: u32,
    hdr: VirtioNetHdr,
}

/// Per-worker space for VM traffic, allocated the first time the worker
/// meets a VM port (ring-only daemons never touch it).
#[derive(Default)]
pub(crate) struct VmScratch {
    arena: Vec<u8>,
    staged: Vec<Staged>,
    bounce: Vec<u8>,
    /// Segments in `bounce`: (offset, length).
    segs: Vec<(u32, u32)>,
    segmenter: Option<Segmenter>,
}

impl VmScratch {
    fn ensure(&mut self) {
        if self.arena.is_empty() {
            self.arena = vec![0; ARENA];
            self.bounce = vec![0; BOUNCE];
            self.staged.reserve(crate::engine::MAX_BATCH as usize);
            self.segs.reserve(SEGS_MAX);
            self.segmenter = Some(Segmenter::new());
        }
    }
}

fn offload_hdr(h: &VirtioNetHdr) -> OffloadHdr {
    OffloadHdr {
        flags: h.flags,
        gso_type: h.gso_type,
        hdr_len: h.hdr_len(),
        gso_size: h.gso_size(),
        csum_start: h.csum_start(),
        csum_offset: h.csum_offset(),
    }
}

/// The header of a frame whose checksum is known good.
fn checked_hdr() -> VirtioNetHdr {
    VirtioNetHdr {
        flags: VirtioNetHdr::F_DATA_VALID,
        ..VirtioNetHdr::default()
    }
}

/// Takes one batch from queue pair `pair` of VM port `src` and forwards it.
pub(crate) fn forward_from_vm(
    sw: &Switch,
    src: &SwitchPort,
    v: &VirtioPort,
    pair: usize,
    sc: &mut Scratch,
) -> BatchResult {
    sc.vm.ensure();
    sc.clear();
    sc.vm.staged.clear();
    let (mut short, mut bytes) = (0u64, 0u64);
    let (taken, bad) = {
        let mut q = v.pair(pair);
        let bad0 = q.stats().tx_bad_chains;
        let vm = &mut sc.vm;
        let mut used = 0usize;
        let taken = q.tx_batch(sw.batch() as usize, |f, h| {
            let len = f.len();
            if len < MIN_FRAME as usize {
                short += 1;
                return true;
            }
            // The chain bound keeps len <= FRAME_MAX, and the batch stops
            // while the arena still has room for one more.
            let Some(dst) = vm.arena.get_mut(used..used + len) else {
                return false;
            };
            f.copy_to(dst);
            vm.staged.push(Staged {
                off: used as u32,
                len: len as u32,
                hdr: *h,
            });
            bytes += len as u64;
            used += len.next_multiple_of(64);
            ARENA - used >= FRAME_MAX
        });
        if taken > 0 {
            q.notify_tx_done();
        }
        (taken, q.stats().tx_bad_chains.wrapping_sub(bad0))
    };
    if taken == 0 {
        return BatchResult::default();
    }
    let table = sw.read_table();
    let now = sw.now_s();
    let mut last: Option<([u8; 12], Decision)> = None;
    for k in 0..sc.vm.staged.len() {
        let st = sc.vm.staged[k];
        let o = st.off as usize;
        let mut hdr = [0u8; 12];
        hdr.copy_from_slice(&sc.vm.arena[o..o + 12]);
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
        sc.route(&table, src.index, kk, decision);
    }
    let mut malformed = bad;
    let dests = sc.destinations(&table, src.index);
    for &d in &dests {
        let Some(dport) = table.get(d) else { continue };
        sc.order_for(d);
        match &dport.backend {
            Backend::Ring(drp) => {
                staged_to_ring(&mut sc.vm, &sc.order, dport, drp, pair, &mut malformed)
            }
            Backend::Virtio(dv) => {
                staged_to_vm(&mut sc.vm, &sc.order, dport, dv, pair, &mut malformed)
            }
        }
    }
    sc.give_back(dests);
    let c = &src.counters;
    Counters::add(&c.tx_packets, sc.vm.staged.len() as u64);
    Counters::add(&c.tx_bytes, bytes);
    Counters::add(&c.drop_short, short);
    Counters::add(&c.drop_malformed, malformed);
    BatchResult {
        slots: taken as u32,
        packets: taken as u32,
    }
}

/// Delivers staged frames `order` into VM `dv`: offloads passed through
/// where the guest negotiated them, done in software where not.
fn staged_to_vm(
    vm: &mut VmScratch,
    order: &[u32],
    dport: &SwitchPort,
    dv: &VirtioPort,
    pair: usize,
    malformed: &mut u64,
) {
    let mut q = dv.pair(pair % dv.pairs());
    let c = &dport.counters;
    if !q.is_running() {
        Counters::add(&c.drop_link_down, order.len() as u64);
        return;
    }
    let caps = q.rx_caps();
    let caps = Caps {
        csum: caps.csum,
        tso4: caps.tso4,
        tso6: caps.tso6,
        ecn: false,
    };
    let mut t = Tally::default();
    let VmScratch {
        arena,
        staged,
        segmenter,
        ..
    } = vm;
    let segmenter = segmenter.as_mut().expect("ensure() ran");
    for &k in order {
        if t.stopped {
            t.full += 1;
            continue;
        }
        let st = &mut staged[k as usize];
        let frame = &mut arena[st.off as usize..(st.off + st.len) as usize];
        let oh = offload_hdr(&st.hdr);
        match offload::plan(&oh, caps) {
            Ok(Action::PassThrough) => {
                let mut h = st.hdr;
                h.num_buffers = 0;
                t.push(&mut q, &h, frame);
            }
            Ok(Action::CompleteChecksum) => {
                if offload::complete_checksum(frame, oh.csum_start.into(), oh.csum_offset.into())
                    .is_err()
                {
                    *malformed += 1;
                    continue;
                }
                // Later destinations get the completed frame.
                st.hdr = checked_hdr();
                t.push(&mut q, &st.hdr, frame);
            }
            Ok(Action::Segment) => {
                let h = checked_hdr();
                let r = segmenter.segment(frame, &oh, |seg| t.push(&mut q, &h, seg));
                if r.is_err() {
                    *malformed += 1;
                }
            }
            Err(_) => *malformed += 1,
        }
    }
    q.notify_rx();
    drop(q);
    t.count(c);
}

/// What one delivery into a VM did.
#[derive(Default)]
struct Tally {
    pkts: u64,
    bytes: u64,
    full: u64,
    down: u64,
    long: u64,
    /// The queue filled up: the rest of the batch is dropped, so what
    /// arrives is a prefix.
    stopped: bool,
}

impl Tally {
    /// Pushes one frame; false once the queue cannot take more.
    fn push(&mut self, q: &mut VirtioNetPort, h: &VirtioNetHdr, frame: &[u8]) -> bool {
        if self.stopped {
            self.full += 1;
            return false;
        }
        // Published (and the guest interrupted) once per batch by notify_rx.
        match q.rx_push_deferred(h, frame) {
            Ok(()) => {
                self.pkts += 1;
                self.bytes += frame.len() as u64;
                true
            }
            Err(RxError::Full) => {
                self.full += 1;
                self.stopped = true;
                false
            }
            Err(RxError::NotReady) => {
                self.down += 1;
                self.stopped = true;
                false
            }
            Err(RxError::TooLarge) => {
                self.long += 1;
                true
            }
        }
    }

    fn count(&self, c: &Counters) {
        Counters::add(&c.rx_packets, self.pkts);
        Counters::add(&c.rx_bytes, self.bytes);
        Counters::add(&c.drop_rx_full, self.full);
        Counters::add(&c.drop_link_down, self.down);
        Counters::add(&c.drop_long, self.long);
    }
}

/// Delivers staged frames `order` into ring port `drp`: checksums
/// completed and TSO frames segmented in software (a ring carries no
/// virtio-net header). Plain frames go in runs, one reservation each; a TSO
/// frame is segmented into the bounce buffer and gets a reservation of its
/// own, so order is kept.
fn staged_to_ring(
    vm: &mut VmScratch,
    order: &[u32],
    dport: &SwitchPort,
    drp: &RingPort,
    pair: usize,
    malformed: &mut u64,
) {
    let q = pair % drp.rx_rings();
    let none = Caps::default();
    let VmScratch {
        arena,
        staged,
        bounce,
        segs,
        segmenter,
    } = vm;
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
            let oh = offload_hdr(&st.hdr);
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
                    } else {
                        // Delivered as it is: the receiver drops it on its
                        // bad checksum. Counted here.
                        *malformed += 1;
                    }
                }
                Ok(Action::Segment) => segment = true,
                Err(_) => {
                    *malformed += 1;
                    segment = true;
                }
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
                let oh = offload_hdr(&st.hdr);
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
                    segs.push((used as u32, seg.len() as u32));
                    used += seg.len();
                    true
                });
                match r {
                    Ok(_) => {
                        full |= ring_put(dport, drp, q, segs.len(), full, |j| {
                            let (o, l) = segs[j];
                            &bounce[o as usize..(o + l) as usize]
                        });
                    }
                    Err(_) => *malformed += 1,
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
fn ring_put<'a>(
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
        .map(|j| slots_for(frame(j).len() as u32, dbuf))
        .filter(|&s| s <= MAX_FRAGS)
        .sum();
    let res = drp.rx(q).reserve(want, c);
    let place = dregion.ring_place(0, Dir::Rx, q as u32);
    let dring = dregion.ring_at(place);
    let dn = place.num_slots;
    let default_buf = dregion.layout().first_buf(0, Dir::Rx, q as u32);
    let dest_buf = |d: u32| valid_buf(dregion, &dring, default_buf, d);
    let mut left = res.len;
    let mut d = res.start;
    let (mut pkts, mut bytes, mut dropped, mut long) = (0u64, 0u64, 0u64, 0u64);
    let mut filled = false;
    for j in 0..n {
        let f = frame(j);
        let need = slots_for(f.len() as u32, dbuf);
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
            dring.set_len_flags(d, chunk as u16, more | ((need as u16) << 8));
            d = arith::next(d, dn);
            off += chunk;
        }
        left -= need;
        pkts += 1;
        bytes += f.len() as u64;
    }
    drp.finish_lease(q, res, d, &dring);
    Counters::add(&c.rx_packets, pkts);
    Counters::add(&c.rx_bytes, bytes);
    Counters::add(&c.drop_rx_full, dropped);
    Counters::add(&c.drop_long, long);
    filled
}

/// Delivers packets `order` of a ring port's batch into VM `dv`: each frame
/// is gathered from its ring fragments into the bounce buffer and pushed
/// with an empty virtio-net header.
#[allow(clippy::too_many_arguments)]
pub(crate) fn deliver_ring_to_vm(
    vm: &mut VmScratch,
    ft: &[Ft],
    order: &[u32],
    sregion: &Region,
    sring: &RingRef<'_>,
    dport: &SwitchPort,
    dv: &VirtioPort,
    src_ring: usize,
) {
    vm.ensure();
    let mut q = dv.pair(src_ring % dv.pairs());
    let c = &dport.counters;
    if !q.is_running() {
        Counters::add(&c.drop_link_down, order.len() as u64);
        return;
    }
    let h = VirtioNetHdr::default();
    let sn = sring.num_slots();
    let sbuf = sregion.buf_size() as usize;
    let mut t = Tally::default();
    for &k in order {
        let p = ft[k as usize];
        if t.stopped {
            t.full += 1;
            continue;
        }
        let len = p.len as usize;
        if len > FRAME_MAX {
            t.long += 1;
            continue;
        }
        if p.nfrags == 1 {
            if !sregion.read_buf(p.buf_idx, 0, &mut vm.bounce[..len]) {
                continue;
            }
        } else {
            // Fragments after the first are re-read and re-validated; a
            // sender changing them meanwhile only garbles its own frame.
            let mut off = 0usize;
            let mut j = p.slot;
            for f in 0..p.nfrags {
                let s = if f == 0 {
                    NetmapSlot {
                        buf_idx: p.buf_idx,
                        len: p.first_len as u16,
                        flags: 0,
                        ptr: 0,
                    }
                } else {
                    sring.slot(j)
                };
                j = arith::next(j, sn);
                let l = (s.len as usize).min(sbuf).min(len - off);
                if !sregion.read_buf(s.buf_idx, 0, &mut vm.bounce[off..off + l]) {
                    break;
                }
                off += l;
            }
        }
        t.push(&mut q, &h, &vm.bounce[..len]);
    }
    q.notify_rx();
    drop(q);
    t.count(c);
}
