//! The CSB sync protocol, both halves.
//!
//! [`AppRing`] is the application's side of one ring: it owns the slots in
//! `[head, tail)`, publishes `cur` and `head`, and refreshes `tail`.
//! [`PortRing`] is the port side (the switch worker, or the peer end of a
//! pipe): it owns the rest of the ring, never trusts the application's
//! `head`, and publishes `hwcur`/`hwtail`.
//!
//! Notification suppression is the double-check of netmap's CSB mode: a side
//! about to sleep sets its "need a kick" flag, issues a full fence, and looks
//! once more for work; the other side publishes its progress, issues a full
//! fence, and reads the flag. With both fences sequentially consistent, at
//! least one of the two sees the other's store, so no wake-up is lost.

use std::sync::atomic::fence;
use std::sync::Arc;

use crate::arith;
use crate::layout::{Dir, NetmapSlot};
use crate::region::{CsbRef, Region, RingPlace, RingRef};

/// Every memory ordering and fence of the CSB protocol, named by the step
/// that uses it. The code in this module uses only these, and the loom model
/// (`crates/ring/tests/csb_model.rs`, see `docs/csb-model.md`) imports the
/// same constants, so the model checks the orderings the code runs with.
pub mod order {
    use std::sync::atomic::Ordering;

    /// The application stores `cur`. Relaxed: it is stored before `head`,
    /// whose [`PUBLISH_HEAD`] makes it visible with it.
    pub const PUBLISH_CUR: Ordering = Ordering::Relaxed;
    /// The application stores `head` (a publish, or attaching). Release:
    /// pairs with [`READ_HEAD`], so the port side that sees the new head
    /// also sees `cur` and every slot and buffer written before it.
    pub const PUBLISH_HEAD: Ordering = Ordering::Release;
    /// The port side loads `head` (validation, and the recheck before it
    /// sleeps). Acquire: pairs with [`PUBLISH_HEAD`].
    pub const READ_HEAD: Ordering = Ordering::Acquire;
    /// The port side stores `hwcur`. Relaxed: it is stored before `hwtail`,
    /// whose [`PUBLISH_HWTAIL`] makes it visible with it.
    pub const PUBLISH_HWCUR: Ordering = Ordering::Relaxed;
    /// The port side stores `hwtail`. Release: pairs with [`READ_HWTAIL`],
    /// so the application that sees the new tail also sees `hwcur` and
    /// every slot and buffer the port side wrote or finished reading.
    pub const PUBLISH_HWTAIL: Ordering = Ordering::Release;
    /// The application loads `hwtail`. Acquire: pairs with
    /// [`PUBLISH_HWTAIL`].
    pub const READ_HWTAIL: Ordering = Ordering::Acquire;
    /// Either side loads `hwcur` (attaching, and `AppRing::pending`).
    /// Acquire, though it pairs with no Release of its own (`hwcur` is
    /// stored [`PUBLISH_HWCUR`]): only the value is used, and a reader that
    /// needs the slots reads `hwtail`.
    pub const READ_HWCUR: Ordering = Ordering::Acquire;
    /// A side loads a value that only it writes (to skip a store that would
    /// change nothing, or a netmap program's pointers in its own ring
    /// header). Relaxed: no other thread's store is involved.
    pub const READ_OWN: Ordering = Ordering::Relaxed;
    /// A side about to sleep stores its "need a kick" flag (1). Relaxed:
    /// ordered before its recheck by the [`DOUBLE_CHECK`] fence after it.
    pub const SET_NEED_KICK: Ordering = Ordering::Relaxed;
    /// A side that is awake clears its flag (0). Relaxed: a clear seen late
    /// costs the other side one needless kick, never a lost one.
    pub const CLEAR_NEED_KICK: Ordering = Ordering::Relaxed;
    /// A side that published progress loads the other's flag. Relaxed:
    /// ordered after its publish by the [`DOUBLE_CHECK`] fence before it.
    pub const READ_NEED_KICK: Ordering = Ordering::Relaxed;
    /// The fence of the double check, on both sides and in both directions:
    /// "store flag; fence; recheck progress" on the side going to sleep,
    /// "store progress; fence; read flag" on the side that made progress.
    /// SeqCst: the two fences are ordered one way or the other, so either
    /// the sleeper's recheck sees the progress or the other side sees the
    /// flag (the store-buffering case; Release or AcqRel would allow both
    /// to miss, and a wake-up would be lost).
    pub const DOUBLE_CHECK: Ordering = Ordering::SeqCst;
    /// The port side resets the application's `cur` and `head` after a bad
    /// head (`PortRing::reinit`). Relaxed: the [`PUBLISH_HWTAIL`] that ends
    /// the reset makes them visible with it.
    pub const RESET_POINTERS: Ordering = Ordering::Relaxed;
    /// Either side stores its `kick_cost_ns`, and the other loads it.
    /// Relaxed: a hint that orders nothing (an adaptive wait's spin
    /// window), whose value alone is used.
    pub const KICK_COST: Ordering = Ordering::Relaxed;
}

/// The longest a kick counts as (ns): one that took longer was preempted
/// in the middle, which says nothing of what kicks cost; and an adaptive
/// wait's cap is 100 µs at most anyway.
const KICK_SAMPLE_MAX: u32 = 100_000;

/// A running average of kick costs (ns): the first as it is, then a
/// quarter of each difference, each at most 100 µs (a longer kick was
/// preempted in the middle); never 0 once a kick was noted (0 means none
/// yet). What [`PortRing::note_kick`] and [`AppRing::note_kick`] publish,
/// for a waker that is neither (a pipe end waking its peer).
pub fn kick_average(avg: u32, took: std::time::Duration) -> u32 {
    let ns = u32::try_from(took.as_nanos())
        .unwrap_or(u32::MAX)
        .min(KICK_SAMPLE_MAX);
    let next = if avg == 0 {
        ns
    } else if ns >= avg {
        avg + (ns - avg) / 4
    } else {
        avg - (avg - ns) / 4
    };
    next.max(1)
}

/// The application's side of one ring.
pub struct AppRing {
    region: Arc<Region>,
    place: RingPlace,
    dir: Dir,
    head: u32,
    cur: u32,
    tail: u32,
    published_head: u32,
    bad_tails: u64,
    /// What kicking the port side costs this application (ns, a running
    /// average; 0: no kick yet), published as `atok.kick_cost_ns`.
    kick_cost: u32,
}

impl AppRing {
    /// Attaches to ring `idx` of `dir` of `end`. The starting pointers come
    /// from the CSB (a persistent port keeps them across opens); values out
    /// of range are replaced by the ring's initial state.
    pub fn new(region: Arc<Region>, end: usize, dir: Dir, idx: u32) -> AppRing {
        let place = region.ring_place(end, dir, idx);
        let n = place.num_slots;
        let (head, tail) = {
            let csb = region.csb_at(place);
            let hwcur = csb.hwcur().load(order::READ_HWCUR);
            let hwtail = csb.hwtail().load(order::READ_HWTAIL);
            if hwcur < n && hwtail < n {
                (hwcur, hwtail)
            } else {
                (0, if dir == Dir::Tx { n - 1 } else { 0 })
            }
        };
        let r = AppRing {
            region,
            place,
            dir,
            head,
            cur: head,
            tail,
            published_head: head,
            bad_tails: 0,
            kick_cost: 0,
        };
        r.ring().set_pointers(head, head, tail);
        let csb = r.csb();
        csb.cur().store(head, order::PUBLISH_CUR);
        csb.head().store(head, order::PUBLISH_HEAD);
        r
    }

    /// The ring in shared memory.
    #[inline(always)]
    pub fn ring(&self) -> RingRef<'_> {
        self.region.ring_at(self.place)
    }

    /// The ring's CSB entry.
    #[inline(always)]
    pub fn csb(&self) -> CsbRef<'_> {
        self.region.csb_at(self.place)
    }

    /// The region.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Direction.
    pub fn dir(&self) -> Dir {
        self.dir
    }

    /// Slots in the ring.
    #[inline(always)]
    pub fn num_slots(&self) -> u32 {
        self.place.num_slots
    }

    /// Buffer size.
    #[inline(always)]
    pub fn buf_size(&self) -> u32 {
        self.place.buf_size
    }

    /// `head`.
    #[inline(always)]
    pub fn head(&self) -> u32 {
        self.head
    }

    /// `cur`.
    #[inline(always)]
    pub fn cur(&self) -> u32 {
        self.cur
    }

    /// `tail`.
    #[inline(always)]
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// Slots available to the application past `cur`: packets to read on an
    /// RX ring, free slots on a TX ring.
    #[inline(always)]
    pub fn space(&self) -> u32 {
        arith::space(self.cur, self.tail, self.place.num_slots)
    }

    /// Slots the application has filled or consumed but not yet synced.
    #[inline(always)]
    pub fn unpublished(&self) -> u32 {
        arith::dist(self.published_head, self.head, self.place.num_slots)
    }

    /// Slots handed to the port side that it has not consumed yet (TX):
    /// from the port's published `hwcur` to our published head.
    #[inline]
    pub fn pending(&self) -> u32 {
        let n = self.place.num_slots;
        let hwcur = self.csb().hwcur().load(order::READ_HWCUR);
        if hwcur >= n {
            return 0;
        }
        arith::dist(hwcur, self.published_head, n)
    }

    /// Index of the `k`-th slot after `cur`, if the application owns it.
    #[inline(always)]
    pub fn slot_index(&self, k: u32) -> Option<u32> {
        (k < self.space()).then(|| arith::add(self.cur, k, self.place.num_slots))
    }

    /// Moves `head` and `cur` forward by `n` slots (at most `space()`),
    /// handing them back to the port side at the next sync.
    #[inline(always)]
    pub fn advance(&mut self, n: u32) {
        let n = n.min(self.space());
        self.cur = arith::add(self.cur, n, self.place.num_slots);
        self.head = self.cur;
    }

    /// Moves only `cur` (the wake-up point) forward by `n`, keeping `head`.
    pub fn advance_cur(&mut self, n: u32) {
        let n = n.min(self.space());
        self.cur = arith::add(self.cur, n, self.place.num_slots);
    }

    /// Adopts `head`/`cur` written into the ring header by a netmap program
    /// (which drives the ring through the header, not through this type).
    /// Returns false and keeps the old values when they are out of range.
    pub fn adopt_header_pointers(&mut self) -> bool {
        let ring = self.ring();
        let head = ring
            .field(crate::layout::ring_field::HEAD)
            .load(order::READ_OWN);
        let cur = ring
            .field(crate::layout::ring_field::CUR)
            .load(order::READ_OWN);
        let n = self.place.num_slots;
        let own = arith::dist(self.head, self.tail, n);
        if !arith::within(self.head, own, head, n)
            || !arith::within(head, arith::dist(head, self.tail, n), cur, n)
        {
            return false;
        }
        self.head = head;
        self.cur = cur;
        true
    }

    /// Publishes `cur` and `head` to the port side. Returns whether `head`
    /// moved since the previous publish (there is new work for the port).
    #[inline]
    pub fn publish(&mut self) -> bool {
        let csb = self.csb();
        // Store only what changed: a spinning application must not keep
        // invalidating the cache line the port side reads.
        if csb.cur().load(order::READ_OWN) != self.cur {
            csb.cur().store(self.cur, order::PUBLISH_CUR);
        }
        if csb.head().load(order::READ_OWN) != self.head {
            // Release: pairs with the port side's Acquire load of head in
            // `PortRing::app_head`, so it sees cur and every slot written
            // before.
            csb.head().store(self.head, order::PUBLISH_HEAD);
        }
        let moved = self.head != self.published_head;
        self.published_head = self.head;
        moved
    }

    /// Notes that kicking the port side took `took`, and publishes the
    /// running average as `atok.kick_cost_ns` (see [`PortRing::note_kick`],
    /// the other way round).
    pub fn note_kick(&mut self, took: std::time::Duration) {
        self.kick_cost = kick_average(self.kick_cost, took);
        self.csb()
            .appl_kick_cost_ns()
            .store(self.kick_cost, order::KICK_COST);
    }

    /// What the port side's kicks of this ring cost it lately, as it
    /// publishes it (see [`PortRing::note_kick`]; zero before its first).
    /// A hint from the other side: a caller bounds what it does with it.
    #[inline]
    pub fn peer_kick_cost(&self) -> std::time::Duration {
        let ns = self.csb().kick_cost_ns().load(order::KICK_COST);
        std::time::Duration::from_nanos(u64::from(ns))
    }

    /// After a publish: whether the port side asked to be kicked. The full
    /// fence pairs with the one in `PortRing::prepare_sleep`: either the port
    /// sees our new head there, or we see its flag here.
    #[inline]
    pub fn port_wants_kick(&self) -> bool {
        fence(order::DOUBLE_CHECK);
        self.csb().kern_need_kick().load(order::READ_NEED_KICK) != 0
    }

    /// Reads `hwtail` and adopts it as `tail` if it is a value the port side
    /// could legitimately have published: forward from the current tail, and
    /// never onto the slot before `head`. Returns whether tail moved.
    #[inline]
    pub fn refresh_tail(&mut self) -> bool {
        // Acquire: pairs with the Release store of hwtail in
        // `PortRing::publish`, so the slots up to hwtail are visible.
        let hw = self.csb().hwtail().load(order::READ_HWTAIL);
        self.accept_tail(hw)
    }

    /// Adopts `hw` as tail if valid (see [`AppRing::refresh_tail`]).
    #[inline]
    pub fn accept_tail(&mut self, hw: u32) -> bool {
        let n = self.place.num_slots;
        if hw == self.tail {
            return false;
        }
        if !arith::tail_may_move(self.tail, self.head, hw, n) {
            self.bad_tails += 1;
            return false;
        }
        self.tail = hw;
        true
    }

    /// Writes head/cur/tail into the ring header, where netmap macros read them.
    #[inline]
    pub fn mirror_to_header(&self) {
        self.ring().set_pointers(self.head, self.cur, self.tail);
    }

    /// Sets or clears `appl_need_kick`. Setting it is followed by a full
    /// fence, pairing with the port side's fence in `PortRing::app_wants_kick`:
    /// after this returns, either the port sees the flag, or our next
    /// `refresh_tail` sees its progress.
    #[inline]
    pub fn set_need_kick(&self, on: bool) {
        self.csb().appl_need_kick().store(
            on as u32,
            if on {
                order::SET_NEED_KICK
            } else {
                order::CLEAR_NEED_KICK
            },
        );
        if on {
            fence(order::DOUBLE_CHECK);
        }
    }

    /// Tails from the port side that were refused as invalid.
    pub fn bad_tails(&self) -> u64 {
        self.bad_tails
    }

    /// The `k`-th slot past `cur`, if the application owns it. The borrow
    /// ends before the next sync can run, so a slot cannot be used after it
    /// was handed back.
    #[inline(always)]
    pub fn slot_mut(&mut self, k: u32) -> Option<Slot<'_>> {
        let idx = self.slot_index(k)?;
        Some(Slot { app: self, idx })
    }
}

/// A slot the application owns, borrowed from its [`AppRing`].
pub struct Slot<'a> {
    app: &'a mut AppRing,
    idx: u32,
}

impl Slot<'_> {
    /// Index of the slot in the ring.
    #[inline(always)]
    pub fn index(&self) -> u32 {
        self.idx
    }

    /// The slot's current contents (as written by either side; validate
    /// before use).
    #[inline(always)]
    pub fn raw(&self) -> NetmapSlot {
        self.app.ring().slot(self.idx)
    }

    /// Length of the data.
    #[inline(always)]
    pub fn len(&self) -> u16 {
        self.raw().len
    }

    /// Whether the slot carries no data.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `NS_*` flags.
    #[inline(always)]
    pub fn flags(&self) -> u16 {
        self.raw().flags
    }

    /// Buffer index.
    #[inline(always)]
    pub fn buf_idx(&self) -> u32 {
        self.app.ring().buf_idx(self.idx)
    }

    /// Whether the buffer index is one of this region's buffers.
    #[inline(always)]
    pub fn is_valid(&self) -> bool {
        self.app.region.buf_ofs(self.buf_idx()).is_some()
    }

    /// Sets length and flags together (one store).
    #[inline(always)]
    pub fn set_len_flags(&mut self, len: u16, flags: u16) {
        self.app.ring().set_len_flags(self.idx, len, flags)
    }

    /// Sets the length, clearing the flags.
    #[inline(always)]
    pub fn set_len(&mut self, len: u16) {
        self.set_len_flags(len, 0)
    }

    /// Points the slot at another buffer of the region (zero-copy moves),
    /// marking it `NS_BUF_CHANGED`. Refuses indexes outside the region.
    pub fn set_buf_idx(&mut self, idx: u32) -> bool {
        if self.app.region.buf_ofs(idx).is_none() {
            return false;
        }
        let r = self.app.ring();
        let mut s = r.slot(self.idx);
        s.buf_idx = idx;
        s.flags |= crate::layout::NS_BUF_CHANGED;
        r.set_slot(self.idx, s);
        true
    }

    /// Copies `data` into the buffer at `off`; false when it does not fit or
    /// the buffer index is invalid.
    #[inline(always)]
    pub fn write_at(&mut self, off: usize, data: &[u8]) -> bool {
        self.app.region.write_buf(self.buf_idx(), off, data)
    }

    /// Copies bytes from the buffer at `off` into `out`; false when out of
    /// range or the buffer index is invalid.
    #[inline(always)]
    pub fn read_at(&self, off: usize, out: &mut [u8]) -> bool {
        self.app.region.read_buf(self.buf_idx(), off, out)
    }

    /// The data in the slot: `len` bytes of its buffer (clamped to the
    /// buffer size), or nothing if the buffer index is invalid.
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        let s = self.raw();
        // SAFETY: this slot is the application's until the next sync, which
        // needs `&mut AppRing` and so cannot run while `self` borrows it.
        // Only shared access is handed out here.
        match unsafe { self.app.region.buf_mut(s.buf_idx) } {
            Some(b) => {
                let n = (s.len as usize).min(b.len());
                &b[..n]
            }
            None => &[],
        }
    }

    /// The whole buffer, to fill in place; empty if the index is invalid.
    #[inline(always)]
    pub fn buf_mut(&mut self) -> &mut [u8] {
        let b = self.buf_idx();
        // SAFETY: as in `payload`; `&mut self` makes this the only view
        // handed out for this slot, and the slot's buffer is the
        // application's until the next sync.
        unsafe { self.app.region.buf_mut(b) }.unwrap_or_default()
    }
}

/// Why the port side refused the application's pointers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadHead {
    /// The value read.
    pub head: u32,
}

/// The port side of one ring: the switch worker for a switch port, or the
/// sending end for a pipe's receiving ring. Keeps its own copy of
/// `hwcur`/`hwtail`; never takes them back from shared memory.
pub struct PortRing {
    region: Arc<Region>,
    place: RingPlace,
    /// First slot not yet handed back to the port side by the application
    /// (equal to the application's last valid head).
    pub hwcur: u32,
    /// First slot owned by the port side.
    pub hwtail: u32,
    /// Times the application's pointers were found invalid and reset.
    pub reinits: u64,
    /// The application's head as far as the port side has looked at it:
    /// equal to `hwcur`, or past it when the slots in `[hwcur, seen)` end
    /// inside a packet (a fragment chain whose last slot is not published
    /// yet). A head equal to `seen` is no new work: the port side may sleep
    /// until the application publishes more and kicks.
    seen: u32,
    /// Looks at the same unfinished chain that found no new slot (see
    /// [`PortRing::note_unfinished`]).
    stalls: u32,
    /// What kicking the application costs the port side (ns, a running
    /// average; 0: no kick yet), published as `ktoa.kick_cost_ns`.
    kick_cost: u32,
}

/// What the port side does with a fragment chain whose published slots end
/// before its last fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// Wait for the rest: nothing is consumed, and the port side may sleep
    /// until the application publishes more (its head moves past `seen`).
    Wait,
    /// The chain made no progress for [`PortRing::STALLED_LOOKS_MAX`]
    /// looks: drop its slots (the caller counts the drop).
    Drop,
}

impl PortRing {
    /// Attaches to a ring. `hwcur`/`hwtail` start from the CSB when those
    /// values are in range (the ring may have been used before), else from
    /// the ring's initial state.
    pub fn new(region: Arc<Region>, end: usize, dir: Dir, idx: u32) -> PortRing {
        let place = region.ring_place(end, dir, idx);
        let n = place.num_slots;
        let csb = region.csb_at(place);
        let (hwcur, hwtail) = {
            let c = csb.hwcur().load(order::READ_HWCUR);
            let t = csb.hwtail().load(order::READ_HWTAIL);
            if c < n && t < n {
                (c, t)
            } else {
                (0, if dir == Dir::Tx { n - 1 } else { 0 })
            }
        };
        PortRing {
            region,
            place,
            hwcur,
            hwtail,
            reinits: 0,
            seen: hwcur,
            stalls: 0,
            kick_cost: 0,
        }
    }

    /// Notes that kicking the application (the write on its interrupt
    /// eventfd) took `took`, and publishes the running average of those
    /// costs as `ktoa.kick_cost_ns` (a quarter of each difference), where
    /// the application's adaptive wait counts it into what its sleeps
    /// cost: where waking a thread on another CPU costs the waker a
    /// hypervisor's round trip (15 µs seen here), a receiver that sleeps
    /// between every two batches costs its switch more than it saves.
    pub fn note_kick(&mut self, took: std::time::Duration) {
        self.kick_cost = kick_average(self.kick_cost, took);
        self.csb()
            .kick_cost_ns()
            .store(self.kick_cost, order::KICK_COST);
    }

    /// What the application's kicks of this ring cost it lately, as it
    /// publishes it (see [`AppRing::note_kick`]; zero before its first).
    /// Written by the application, so any value: a caller bounds what it
    /// does with it (an adaptive wait's cap is at most 100 µs).
    #[inline]
    pub fn app_kick_cost(&self) -> std::time::Duration {
        let ns = self.csb().appl_kick_cost_ns().load(order::KICK_COST);
        std::time::Duration::from_nanos(u64::from(ns))
    }

    /// The running average [`PortRing::note_kick`] publishes.
    pub fn kick_cost(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(u64::from(self.kick_cost))
    }

    /// Looks at an unfinished chain the port side may take before it drops
    /// it, when no look finds a new slot of it. A look happens when the
    /// application kicks, or when the worker serves another ring of the same
    /// port: both are the application's doing, and no clock is involved. An
    /// application that publishes the rest of its chain resets the count.
    /// netmap drops an unfinished chain at once (its txsync truncates it);
    /// waiting this long is more lenient, never less.
    pub const STALLED_LOOKS_MAX: u32 = 64;

    /// Records that the slots up to `head` (published by the application,
    /// validated by [`PortRing::app_head`]) end inside a packet starting at
    /// `hwcur`, and says whether to keep waiting for its last fragment.
    /// After `Wait`, [`PortRing::prepare_sleep`] lets the port side sleep
    /// until the application publishes past `head`, instead of spinning on
    /// slots that cannot be forwarded yet.
    pub fn note_unfinished(&mut self, head: u32) -> Unfinished {
        if head == self.seen && head != self.hwcur {
            self.stalls += 1;
        } else {
            self.seen = head;
            self.stalls = 0;
        }
        if self.stalls >= Self::STALLED_LOOKS_MAX {
            Unfinished::Drop
        } else {
            Unfinished::Wait
        }
    }

    /// Moves `hwcur` forward to `hwcur` (slots consumed) and forgets any
    /// unfinished chain seen before: it starts at the new `hwcur`, if it is
    /// still there, and is looked at afresh.
    #[inline]
    pub fn consumed_to(&mut self, hwcur: u32) {
        if hwcur != self.hwcur {
            self.hwcur = hwcur;
            self.seen = hwcur;
            self.stalls = 0;
        }
    }

    /// Whether the application published slots the port side has not
    /// looked at yet (new work). Slots of an unfinished chain already seen
    /// are not new work.
    #[inline]
    pub fn has_new_work(&self) -> bool {
        // Pairs with the Release store in `AppRing::publish`.
        let head = self.csb().head().load(order::READ_HEAD);
        head != self.hwcur && head != self.seen
    }

    /// The ring in shared memory.
    #[inline(always)]
    pub fn ring(&self) -> RingRef<'_> {
        self.region.ring_at(self.place)
    }

    /// The CSB entry.
    #[inline(always)]
    pub fn csb(&self) -> CsbRef<'_> {
        self.region.csb_at(self.place)
    }

    /// The region.
    #[inline(always)]
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Slots.
    #[inline(always)]
    pub fn num_slots(&self) -> u32 {
        self.place.num_slots
    }

    /// Reads the application's head and validates it: it may only move
    /// forward from `hwcur`, and not past `hwtail` (the application can only
    /// hand back slots it owns). `Err` means the ring must be reinitialized.
    #[inline]
    pub fn app_head(&self) -> Result<u32, BadHead> {
        // Acquire: pairs with the Release store in `AppRing::publish`.
        let head = self.csb().head().load(order::READ_HEAD);
        let n = self.place.num_slots;
        if arith::within(self.hwcur, arith::dist(self.hwcur, self.hwtail, n), head, n) {
            Ok(head)
        } else {
            Err(BadHead { head })
        }
    }

    /// Slots the port side may fill on an RX ring: from hwtail up to the
    /// slot before hwcur.
    #[inline(always)]
    pub fn rx_free(&self) -> u32 {
        let n = self.place.num_slots;
        n - 1 - arith::dist(self.hwcur, self.hwtail, n)
    }

    /// Publishes hwcur and hwtail.
    #[inline]
    pub fn publish(&self) {
        let csb = self.csb();
        csb.hwcur().store(self.hwcur, order::PUBLISH_HWCUR);
        // Release: pairs with the Acquire load in `AppRing::refresh_tail`;
        // every slot and buffer written before is visible once hwtail is.
        csb.hwtail().store(self.hwtail, order::PUBLISH_HWTAIL);
    }

    /// After a publish: whether the application sleeps and wants an
    /// interrupt. The full fence pairs with the one in
    /// `AppRing::set_need_kick`.
    #[inline]
    pub fn app_wants_kick(&self) -> bool {
        fence(order::DOUBLE_CHECK);
        self.csb().appl_need_kick().load(order::READ_NEED_KICK) != 0
    }

    /// Declares that the port side is awake (no kicks needed).
    #[inline]
    pub fn set_awake(&self) {
        self.csb().kern_need_kick().store(0, order::CLEAR_NEED_KICK);
    }

    /// The port side is about to sleep: asks for kicks, fences, and looks
    /// once more. Returns true when it may sleep (no new head meanwhile:
    /// head is still `hwcur`, or still the end of an unfinished chain it has
    /// seen); false (flag cleared again) when work arrived.
    #[inline]
    pub fn prepare_sleep(&self) -> bool {
        let csb = self.csb();
        csb.kern_need_kick().store(1, order::SET_NEED_KICK);
        // Pairs with the fence in `AppRing::port_wants_kick`.
        fence(order::DOUBLE_CHECK);
        if self.has_new_work() {
            csb.kern_need_kick().store(0, order::CLEAR_NEED_KICK);
            return false;
        }
        true
    }

    /// Resets the application's pointers to the port side's view after they
    /// were found invalid, as netmap's ring reinit does.
    pub fn reinit(&mut self) {
        self.reinits += 1;
        self.seen = self.hwcur;
        self.stalls = 0;
        let csb = self.csb();
        csb.cur().store(self.hwcur, order::RESET_POINTERS);
        csb.head().store(self.hwcur, order::RESET_POINTERS);
        self.ring()
            .set_pointers(self.hwcur, self.hwcur, self.hwtail);
        self.publish();
    }

    /// Snapshot of slot `i` (untrusted content).
    #[inline(always)]
    pub fn slot(&self, i: u32) -> NetmapSlot {
        self.ring().slot(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Geometry, RegionLayout};
    use std::sync::atomic::Ordering;

    fn region(slots: u32) -> Arc<Region> {
        let g = Geometry {
            tx_slots: slots,
            rx_slots: slots,
            ..Geometry::default()
        };
        Arc::new(Region::create(RegionLayout::new(g, 1).unwrap(), ["t", ""]).unwrap())
    }

    #[test]
    fn tx_round_trip_through_the_csb() {
        let r = region(64);
        let mut app = AppRing::new(r.clone(), 0, Dir::Tx, 0);
        let mut port = PortRing::new(r.clone(), 0, Dir::Tx, 0);
        assert_eq!(app.space(), 63, "one slot stays empty");
        app.advance(10);
        assert!(app.publish());
        let head = port.app_head().unwrap();
        assert_eq!(head, 10);
        port.hwcur = head;
        port.hwtail = arith::prev(head, 64);
        port.publish();
        assert!(app.refresh_tail());
        assert_eq!(app.space(), 63);
        assert_eq!(app.tail(), 9);
    }

    #[test]
    fn the_kick_cost_is_a_running_average_the_application_reads() {
        use std::time::Duration;
        let r = region(64);
        let app = AppRing::new(r.clone(), 0, Dir::Rx, 0);
        let mut port = PortRing::new(r.clone(), 0, Dir::Rx, 0);
        assert_eq!(app.peer_kick_cost(), Duration::ZERO, "no kick yet");
        port.note_kick(Duration::from_micros(16));
        assert_eq!(app.peer_kick_cost(), Duration::from_micros(16));
        // A quarter of each difference, both ways.
        port.note_kick(Duration::from_micros(32));
        assert_eq!(app.peer_kick_cost(), Duration::from_micros(20));
        port.note_kick(Duration::from_micros(4));
        assert_eq!(app.peer_kick_cost(), Duration::from_micros(16));
        assert_eq!(port.kick_cost(), app.peer_kick_cost());
        // A kick that was preempted in the middle counts as 100 µs at
        // most: one outlier moves the average by a quarter of that.
        port.note_kick(Duration::from_secs(3600));
        assert_eq!(app.peer_kick_cost(), Duration::from_micros(16 + 84 / 4));
        // The field is the port side's alone: the application's half of
        // the CSB does not touch it.
        app.set_need_kick(true);
        assert!(app.peer_kick_cost() > Duration::from_micros(16));
    }

    #[test]
    fn the_applications_kick_cost_goes_the_other_way_in_its_own_half() {
        use std::time::Duration;
        let r = region(64);
        let mut app = AppRing::new(r.clone(), 0, Dir::Tx, 0);
        let port = PortRing::new(r.clone(), 0, Dir::Tx, 0);
        assert_eq!(port.app_kick_cost(), Duration::ZERO);
        app.note_kick(Duration::from_micros(8));
        app.note_kick(Duration::from_micros(16));
        assert_eq!(port.app_kick_cost(), Duration::from_micros(10));
        assert_eq!(app.peer_kick_cost(), Duration::ZERO, "not the port's field");
        // Whatever an application writes there is read as it is: the
        // reader bounds it (an adaptive wait's cap is 100 µs at most).
        app.csb()
            .appl_kick_cost_ns()
            .store(u32::MAX, Ordering::Relaxed);
        assert_eq!(
            port.app_kick_cost(),
            Duration::from_nanos(u64::from(u32::MAX))
        );
        let mut w = crate::AdaptiveWait::new();
        w.set_peer_cost(port.app_kick_cost());
        assert!(w.cap() <= Duration::from_micros(100));
    }

    #[test]
    fn port_refuses_head_beyond_what_app_owns() {
        let r = region(64);
        let app = AppRing::new(r.clone(), 0, Dir::Rx, 0);
        let mut port = PortRing::new(r.clone(), 0, Dir::Rx, 0);
        // Nothing delivered yet: the only valid head is hwcur itself.
        app.csb().head().store(5, Ordering::Release);
        assert_eq!(port.app_head(), Err(BadHead { head: 5 }));
        port.reinit();
        assert_eq!(port.reinits, 1);
        assert_eq!(port.app_head(), Ok(0));
        // Deliver 20 and let the app release 20.
        port.hwtail = 20;
        port.publish();
        app.csb().head().store(20, Ordering::Release);
        assert_eq!(port.app_head(), Ok(20));
        app.csb().head().store(21, Ordering::Release);
        assert!(port.app_head().is_err());
        app.csb().head().store(u32::MAX, Ordering::Release);
        assert!(port.app_head().is_err());
        assert_eq!(port.rx_free(), 63 - 20);
    }

    #[test]
    fn app_refuses_tail_past_head() {
        let r = region(64);
        let mut app = AppRing::new(r.clone(), 0, Dir::Rx, 0);
        app.csb().hwtail().store(63, Ordering::Release);
        assert!(app.refresh_tail(), "63 is the slot before head 0: allowed");
        let mut app = AppRing::new(region(64), 0, Dir::Rx, 0);
        app.csb().hwtail().store(64, Ordering::Release);
        assert!(!app.refresh_tail());
        assert_eq!(app.bad_tails(), 1);
        assert_eq!(app.space(), 0);
    }

    #[test]
    fn double_check_sees_late_head() {
        let r = region(64);
        let mut app = AppRing::new(r.clone(), 0, Dir::Tx, 0);
        let port = PortRing::new(r.clone(), 0, Dir::Tx, 0);
        assert!(port.prepare_sleep(), "no work: may sleep");
        app.advance(1);
        app.publish();
        assert!(app.port_wants_kick(), "port is asleep: app must kick");
        assert!(!port.prepare_sleep(), "work arrived: must not sleep");
        assert!(!app.port_wants_kick());
    }

    /// Slots ending inside a packet are not work once seen: the port side
    /// may sleep on them, wakes when more is published, and is told to drop
    /// the chain only after STALLED_LOOKS_MAX looks without progress.
    #[test]
    fn an_unfinished_chain_lets_the_port_sleep_and_is_dropped_after_the_bound() {
        let r = region(64);
        let mut app = AppRing::new(r.clone(), 0, Dir::Tx, 0);
        let mut port = PortRing::new(r.clone(), 0, Dir::Tx, 0);
        app.advance(1);
        app.publish();
        assert!(!port.prepare_sleep(), "not looked at yet: work");
        let head = port.app_head().unwrap();
        assert_eq!(port.note_unfinished(head), Unfinished::Wait);
        assert!(port.prepare_sleep(), "seen and unfinished: may sleep");
        app.advance(1);
        app.publish();
        assert!(app.port_wants_kick(), "asleep: the app kicks for more");
        assert!(!port.prepare_sleep(), "more published: work");
        let head = port.app_head().unwrap();
        for _ in 0..PortRing::STALLED_LOOKS_MAX {
            assert_eq!(port.note_unfinished(head), Unfinished::Wait);
        }
        assert_eq!(port.note_unfinished(head), Unfinished::Drop);
        port.consumed_to(head);
        assert!(port.prepare_sleep(), "consumed: nothing left");
        app.advance(1);
        app.publish();
        assert!(
            !port.prepare_sleep(),
            "a new slot after the dropped chain is work"
        );
    }
}

/// Busy-wait pacing for a thread that may share its core (the switch
/// worker's idle poll): spins with the CPU's pause hint and yields the CPU
/// every `YIELD_EVERY` turns, so a client woken on the same core runs within
/// microseconds instead of after a scheduler time slice. Clients' own busy
/// waits do not yield: a yield is a system call, and costs a dedicated
/// spinner about a microsecond of latency.
#[derive(Default)]
pub struct Spinner {
    turns: u32,
}

impl Spinner {
    /// Turns between two yields.
    pub const YIELD_EVERY: u32 = 64;

    /// One turn of busy-waiting.
    #[inline]
    pub fn spin(&mut self) {
        self.turns = self.turns.wrapping_add(1);
        if self.turns.is_multiple_of(Self::YIELD_EVERY) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}
