//! Sources: a ring port's TX slots, or a frame queue's batch, read into
//! the batch (the frame table, or the stage), each frame looked up
//! as it is read. What a source refuses is counted on it here.

use ringswitch_frame::{FrameQueue, Taken};
use ringswitch_ring::layout::{MAX_FRAGS, NS_MOREFRAG, NS_NO_LEARN};
use ringswitch_ring::sync::Unfinished;
use ringswitch_ring::{arith, NetmapSlot, PortRing, Region};

use crate::batch::conv::split_word0;
use crate::batch::{BatchResult, Ft, StageScratch, MIN_FRAME};
use crate::lookup::{Dests, Lookup, FIRST_LINE};
use crate::port::{CounterSet, RingPort};

/// Work published on a TX ring: slots from `hwcur` to `head`.
pub(crate) struct RingWork {
    head: u32,
    avail: u32,
    limit: u32,
}

/// Whether TX ring `txr` has work, taking at most `batch` packets. A head
/// the application could not have written resets the ring (counted in
/// `ring_reinits` on `c`).
#[inline]
pub(crate) fn ring_work(txr: &mut PortRing, batch: u32, c: &CounterSet) -> Option<RingWork> {
    let head = match txr.app_head() {
        Ok(h) => h,
        Err(_) => {
            txr.reinit();
            CounterSet::add(&c.ring_reinits, 1);
            return None;
        }
    };
    let avail = arith::dist(txr.hwcur, head, txr.num_slots());
    (avail > 0).then(|| RingWork {
        head,
        avail,
        limit: avail.min(batch),
    })
}

/// What reading a TX ring did, counted on the source when the batch is
/// released ([`release_ring`]).
#[must_use = "a ring read is released with release_ring"]
pub(crate) struct RingRead {
    head: u32,
    consumed: u32,
    /// Slots of an unfinished chain at hwcur (nothing before it).
    unfinished: Option<u32>,
    /// Packets and bytes taken into the frame table.
    pub(crate) tx_pkts: u64,
    pub(crate) tx_bytes: u64,
    malformed: u64,
    short: u64,
    long: u64,
}

/// Reads the packets of `work` from TX ring `txr` into the frame table
/// `ft`, validating every slot (a packet is at most `MAX_FRAGS` slots, each
/// within a buffer of the region, the first one holding at least an
/// Ethernet header), and files each under its destinations in `dests`.
/// Malformed, short and too long packets are consumed and counted. The
/// caller cleared `ft` and `dests` for the batch.
#[inline]
pub(crate) fn read_ring(
    txr: &PortRing,
    work: &RingWork,
    ft: &mut Vec<Ft>,
    dests: &mut Dests,
    look: &mut Lookup<'_>,
) -> RingRead {
    // Two loops, each compiled for its lookup and laid out on its own (a
    // call per batch): the learning bridge's carries none of the flow
    // lookup's code (which cost it 20 instructions a frame in register
    // pressure alone).
    if look.reads_frames() {
        read_ring_as::<true>(txr, work, ft, dests, look)
    } else {
        read_ring_as::<false>(txr, work, ft, dests, look)
    }
}

/// [`read_ring`] for a lookup that [`Lookup::reads_frames`] (`FLOWS`) or
/// not.
#[inline(never)]
fn read_ring_as<const FLOWS: bool>(
    txr: &PortRing,
    work: &RingWork,
    ft: &mut Vec<Ft>,
    dests: &mut Dests,
    look: &mut Lookup<'_>,
) -> RingRead {
    let RingWork { head, avail, limit } = *work;
    let hwcur = txr.hwcur;
    let n = txr.num_slots();
    let sring = txr.ring();
    let sregion: &Region = txr.region();
    let sbuf = sregion.buf_size();

    let (mut tx_pkts, mut tx_bytes, mut malformed, mut short, mut long) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut consumed = 0u32;
    let mut i = hwcur;
    // Slots of an unfinished chain at hwcur (nothing before it).
    let mut unfinished: Option<u32> = None;
    // Start fetching the first packets' headers while the loop begins.
    const AHEAD: u32 = 4;
    for k in 0..AHEAD.min(limit) {
        sregion.prefetch_buf(split_word0(sring.slot_word0(arith::add(i, k, n))).0);
    }
    // Bounded: each pass consumes at least one slot, and stops at `limit`
    // packets' worth of slots (a packet may overshoot by at most
    // MAX_FRAGS - 1 slots).
    while consumed < limit {
        let first = i;
        let mut nfr = 0u32;
        let mut total = 0u32;
        let mut bad = false;
        let mut too_long = false;
        let mut complete = false;
        let mut s0 = NetmapSlot::default();
        let mut no_learn = false;
        while consumed + nfr < avail {
            // Word 0 of a slot: buf_idx | len << 32 | flags << 48.
            let (buf_idx, len, flags) = split_word0(sring.slot_word0(i));
            let s = NetmapSlot {
                buf_idx,
                len,
                flags,
                ptr: 0,
            };
            if nfr == 0 {
                s0 = s;
                no_learn = s.flags & NS_NO_LEARN != 0;
            }
            nfr += 1;
            i = arith::next(i, n);
            if u32::from(s.len) > sbuf {
                too_long = true;
            }
            if sregion.buf_ofs(s.buf_idx).is_none() {
                bad = true;
            }
            // At most MAX_FRAGS slots of less than 2^16 bytes each.
            total += u32::from(s.len);
            if s.flags & NS_MOREFRAG == 0 {
                complete = true;
                break;
            }
            if nfr == MAX_FRAGS {
                bad = true;
                complete = true;
                break;
            }
        }
        if !complete {
            // The published slots end inside a packet. Packets before it
            // go now; it is looked at again on the next call. Alone, it
            // waits for its last fragment without keeping the worker
            // awake (`PortRing::note_unfinished`), unless it already
            // fills the ring (it never can complete) or made no progress
            // for a bounded number of looks: then it is dropped.
            if consumed == 0 {
                unfinished = Some(nfr);
            }
            break;
        }
        consumed += nfr;
        if bad {
            malformed += 1;
            continue;
        }
        if too_long {
            long += 1;
            continue;
        }
        if u32::from(s0.len) < MIN_FRAME {
            short += 1;
            continue;
        }
        if consumed + AHEAD < avail {
            sregion.prefetch_buf(split_word0(sring.slot_word0(arith::add(i, AHEAD - 1, n))).0);
        }
        // The flow tables read the frame's first line below, and its head
        // from there.
        let head = if FLOWS {
            [0u8; 16]
        } else {
            let Some(head) = sregion.read_head(s0.buf_idx) else {
                malformed += 1;
                continue;
            };
            head
        };
        tx_pkts += 1;
        tx_bytes += total as u64;
        ft.push(Ft {
            slot: first,
            nfrags: nfr,
            len: total,
            buf_idx: s0.buf_idx,
            first_len: u32::from(s0.len),
        });
        let first_len = u32::from(s0.len);
        if !FLOWS {
            look.file_learned(dests, &head, first_len, total, !no_learn);
            continue;
        }
        look.file_by_flows(dests, first_len, total, !no_learn, |buf, want| {
            // The first fragment's first bytes (a copy of constant size:
            // the sender may change them, which only misroutes its own
            // frame), of which the first `first_len` are the frame's: its
            // first cache line, or all `buf` holds.
            let (read, got) = match <&mut [u8; FIRST_LINE]>::try_from(&mut buf[..FIRST_LINE]) {
                Ok(line) if want <= FIRST_LINE || first_len as usize <= FIRST_LINE => {
                    (sregion.read_first(s0.buf_idx, line), FIRST_LINE)
                }
                _ => (sregion.read_first(s0.buf_idx, buf), buf.len()),
            };
            if read {
                (first_len as usize).min(got)
            } else {
                0
            }
        });
    }

    RingRead {
        head,
        consumed,
        unfinished,
        tx_pkts,
        tx_bytes,
        malformed,
        short,
        long,
    }
}

/// Ends a batch read from TX ring `ring` of `srp` (locked as `txr`): the
/// slots consumed go back to the application (with an interrupt if it
/// asked), and the source's drops are counted on `c`. A packet left
/// unfinished at hwcur (see [`read_ring`]) is dropped here when it never
/// can complete or stopped making progress.
pub(crate) fn release_ring(
    txr: &mut PortRing,
    srp: &RingPort,
    ring: usize,
    read: RingRead,
    c: &CounterSet,
) -> BatchResult {
    let RingRead {
        head,
        mut consumed,
        unfinished,
        tx_pkts,
        mut malformed,
        short,
        long,
        ..
    } = read;
    let n = txr.num_slots();
    if let Some(nfr) = unfinished {
        if nfr >= n - 1 || txr.note_unfinished(head) == Unfinished::Drop {
            malformed += 1;
            consumed += nfr;
        }
    }
    let hwcur = arith::add(txr.hwcur, consumed, n);
    txr.consumed_to(hwcur);
    txr.hwtail = arith::prev(txr.hwcur, n);
    txr.publish();
    if txr.app_wants_kick() {
        let took = srp.irq(ring).signal_timed();
        CounterSet::add(&c.interrupts, 1);
        txr.note_kick(took);
    }
    CounterSet::add(&c.drop_malformed, malformed);
    CounterSet::add(&c.drop_short, short);
    CounterSet::add(&c.drop_long, long);
    BatchResult {
        slots: consumed,
        // At most `consumed` packets.
        packets: u32::try_from(tx_pkts + malformed + short + long).unwrap_or(consumed),
    }
}

/// One batch taken from a queue onto the stage, not yet checked
/// ([`StageScratch::check_offloads`]) nor forwarded.
#[must_use = "a batch taken is forwarded"]
pub(crate) struct Took {
    pub(crate) taken: Taken,
    pub(crate) short: u64,
    pub(crate) long: u64,
}

/// Takes up to `max` frames from `q` (locked by the caller for this call
/// only) onto the stage: frames shorter than an Ethernet header or longer
/// than a stage takes are dropped, each counted when the batch is
/// forwarded.
pub(crate) fn take<Q: FrameQueue + ?Sized>(
    q: &mut Q,
    max: usize,
    stage: &mut StageScratch,
) -> Took {
    stage.start();
    let taken = q.take_batch(max, &mut stage.intake);
    Took {
        taken,
        short: stage.intake.short(),
        long: stage.intake.long(),
    }
}

/// Looks up the frames staged in `stage`, filing each under its
/// destinations in `dests`, learning from every one if `learn` (a queue
/// has no `NS_NO_LEARN`).
pub(crate) fn look_up_staged(
    stage: &StageScratch,
    dests: &mut Dests,
    look: &mut Lookup<'_>,
    learn: bool,
) {
    let intake = &stage.intake;
    for f in intake.frames() {
        let mut head = [0u8; 16];
        // Every staged frame has at least FRAME_MIN (14) bytes.
        let bytes = intake.bytes(f);
        let n = bytes.len().min(16);
        head[..n].copy_from_slice(&bytes[..n]);
        look.file(dests, &head, f.len, f.len, learn, |buf, want| {
            let n = bytes.len().min(want).min(buf.len());
            buf[..n].copy_from_slice(&bytes[..n]);
            n
        });
    }
}
