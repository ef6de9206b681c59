//! One ring pair of a port region as a [`FrameQueue`], every frame carrying
//! a virtio-net header in front of it: the host side of a ptnet guest with
//! offloads (issue 18). The guest's network driver writes a header before
//! each frame it sends (a partial checksum, a TCP segment of up to 64 KiB
//! over several slots) and reads one before each frame it receives; the
//! switch, which sees this port as a queue of frames with offload headers
//! like a VM's, passes partial checksums and GSO frames between it and
//! destinations that take them, and finishes them in software for the
//! others.
//!
//! The layout in the ring is netmap's with a virtio-net header (netmap's
//! "vnet header length" of 12): a frame is a chain of slots, `NS_MOREFRAG`
//! on every one but the last (at most [`MAX_FRAGS`]), and the first
//! [`VNET_HDR_LEN`] bytes of its first slot are the header (VIRTIO 1.x,
//! little-endian, with `num_buffers`), the frame's bytes following it.
//!
//! Everything in the guest's rings is untrusted: its head is validated
//! ([`PortRing::app_head`]; a bad one resets the ring), every slot's buffer
//! index and length before a byte is read, a chain that is too long or
//! whose first slot cannot hold the header is dropped whole and counted as
//! malformed. The header's fields are only a request: the switch checks
//! them (`ringswitch-offload`) before anything acts on them. A guest that
//! scribbles over a buffer while it is copied garbles its own frame.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ringswitch_frame::{
    Caps, FrameQueue, Notify, OffloadHdr, PushError, QueueStats, Stage, Taken, Wake,
};

use crate::arith;
use crate::eventfd::EventFd;
use crate::layout::{MAX_FRAGS, NS_MOREFRAG};
use crate::region::Region;
use crate::sync::{PortRing, Unfinished};

/// Bytes of the virtio-net header before each frame: the VIRTIO 1.x header
/// with `num_buffers` (always 1 here: a frame's slots are one chain).
pub const VNET_HDR_LEN: usize = 12;

/// A guest's interrupt: the ring pair's interrupt eventfd (QEMU raises the
/// MSI-X vector when it is written).
struct Irq(EventFd);

impl Notify for Irq {
    fn notify(&self) {
        self.0.signal();
    }
}

/// One ring pair of a region with virtio-net headers (see the module
/// documentation): TX ring `i` of end 0 is what the guest sends, RX ring
/// `i` what it receives.
pub struct VnetRingQueue {
    /// The port's region (the rings hold it too: this one is borrowed per
    /// frame, with no reference count touched on the data path).
    region: Arc<Region>,
    /// The guest's TX ring, our side.
    tx: PortRing,
    /// The guest's RX ring, our side.
    rx: PortRing,
    /// The guest's doorbell for this ring pair: written by QEMU, watched
    /// by the serving worker (never read).
    kick: EventFd,
    /// The ring pair's interrupt.
    irq: Arc<Irq>,
    /// Slots pushed to the RX ring since the last flush.
    unpublished: bool,
    /// Whether a guest has the port (a QEMU is attached): frames for a
    /// port that is down are dropped, not kept for the next guest.
    up: Arc<AtomicBool>,
    stats: QueueStats,
}

impl std::fmt::Debug for VnetRingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VnetRingQueue")
            .field("tx_hwcur", &self.tx.hwcur)
            .field("rx_hwtail", &self.rx.hwtail)
            .finish_non_exhaustive()
    }
}

impl VnetRingQueue {
    /// Ring pair `i` of end 0 of `region` (TX ring `i` and RX ring `i`;
    /// both must exist), with the guest's doorbell `kick` and its
    /// interrupt `irq`, up while `up` is true.
    pub fn new(
        region: Arc<Region>,
        i: u32,
        kick: EventFd,
        irq: EventFd,
        up: Arc<AtomicBool>,
    ) -> VnetRingQueue {
        use crate::layout::Dir;
        VnetRingQueue {
            tx: PortRing::new(Arc::clone(&region), 0, Dir::Tx, i),
            rx: PortRing::new(Arc::clone(&region), 0, Dir::Rx, i),
            region,
            kick,
            irq: Arc::new(Irq(irq)),
            unpublished: false,
            up,
            stats: QueueStats::default(),
        }
    }

    /// The wake-up to send after a publish on `ring`, if the guest asked.
    fn wake_if_asked(ring: &PortRing, irq: &Arc<Irq>, stats: &mut QueueStats) -> Wake {
        if ring.app_wants_kick() {
            stats.interrupts += 1;
            Wake::to(Arc::clone(irq) as Arc<dyn Notify>)
        } else {
            Wake::NONE
        }
    }
}

/// The slots of one frame's chain: buffer index and length each.
type Chain = [(u32, u16); MAX_FRAGS as usize];

impl FrameQueue for VnetRingQueue {
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken {
        let mut taken = Taken::default();
        let head = match self.tx.app_head() {
            Ok(h) => h,
            Err(_) => {
                // A head the guest could not have: the ring starts over
                // from what we have taken (counted in `reinits`).
                self.tx.reinit();
                return taken;
            }
        };
        let region = &*self.region;
        let n = self.tx.num_slots();
        let bs = region.buf_size();
        let start = self.tx.hwcur;
        let mut i = start;
        let mut chain: Chain = [(0, 0); MAX_FRAGS as usize];
        let mut room = stage.has_room();
        while i != head && taken.frames < max && room {
            let avail = arith::dist(i, head, n);
            let (mut nfr, mut total, mut bad, mut complete) = (0u32, 0usize, false, false);
            while nfr < avail {
                let s = self.tx.slot(arith::add(i, nfr, n));
                chain[nfr as usize] = (s.buf_idx, s.len);
                nfr += 1;
                total += usize::from(s.len);
                if u32::from(s.len) > bs || region.buf_ofs(s.buf_idx).is_none() {
                    bad = true;
                }
                if s.flags & NS_MOREFRAG == 0 {
                    complete = true;
                    break;
                }
                if nfr == MAX_FRAGS {
                    // Longer than any frame may be: dropped whole.
                    bad = true;
                    complete = true;
                    break;
                }
            }
            if !complete {
                // The published slots end inside a frame. Alone at hwcur it
                // waits for its last slot (without keeping the worker
                // awake), unless it has stalled too long; else the frames
                // before it go now and it is looked at next time.
                if i == start && self.tx.note_unfinished(head) == Unfinished::Drop {
                    i = arith::add(i, nfr, n);
                    taken.frames += 1;
                    taken.malformed += 1;
                }
                break;
            }
            i = arith::add(i, nfr, n);
            taken.frames += 1;
            let (first, first_len) = chain[0];
            let mut hb = [0u8; VNET_HDR_LEN];
            if bad || usize::from(first_len) < VNET_HDR_LEN || !region.read_buf(first, 0, &mut hb) {
                taken.malformed += 1;
                continue;
            }
            let Ok(hdr) = OffloadHdr::from_le_bytes(&hb) else {
                taken.malformed += 1;
                continue;
            };
            let len = total - VNET_HDR_LEN;
            let parts = &chain[..nfr as usize];
            room = stage.put_with(len, hdr, |dst| {
                let mut at = 0;
                for (k, &(idx, l)) in parts.iter().enumerate() {
                    let skip = if k == 0 { VNET_HDR_LEN } else { 0 };
                    let l = usize::from(l) - skip;
                    // Validated above: lengths within a buffer, indexes
                    // of buffers, and `dst` is exactly their sum.
                    if let Some(d) = dst.get_mut(at..at + l) {
                        region.read_buf(idx, skip, d);
                    }
                    at += l;
                }
            });
        }
        if i != start {
            self.tx.consumed_to(i);
            // Every slot taken goes back to the guest at once.
            self.tx.hwtail = arith::prev(i, n);
            self.tx.publish();
            taken.wake = Self::wake_if_asked(&self.tx, &self.irq, &mut self.stats);
        }
        taken
    }

    fn has_work(&self) -> bool {
        self.tx.has_new_work()
    }

    fn is_up(&self) -> bool {
        // Relaxed: a flag; a frame pushed while it changes goes to the
        // guest that is leaving, or is dropped, either way counted.
        self.up.load(Ordering::Relaxed)
    }

    fn push(&mut self, hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError> {
        let region = &*self.region;
        let bs = region.buf_size() as usize;
        let n = self.rx.num_slots();
        let bytes = VNET_HDR_LEN + frame.len();
        let need = bytes.div_ceil(bs);
        let Ok(need) = u32::try_from(need) else {
            return Err(PushError::TooLong);
        };
        if need > MAX_FRAGS {
            return Err(PushError::TooLong);
        }
        if self.rx.rx_free() < need {
            // The guest may have read more since: take its head.
            match self.rx.app_head() {
                Ok(h) => self.rx.consumed_to(h),
                Err(_) => self.rx.reinit(),
            }
            if self.rx.rx_free() < need {
                return Err(PushError::Full);
            }
        }
        let ring = self.rx.ring();
        let t = self.rx.hwtail;
        // Every slot's buffer first: the guest may have put a bad index in
        // a slot it gave back.
        if (0..need).any(|k| region.buf_ofs(ring.buf_idx(arith::add(t, k, n))).is_none()) {
            self.stats.rx_bad_chains += 1;
            return Err(PushError::Full);
        }
        let mut h = [0u8; VNET_HDR_LEN];
        h[..OffloadHdr::LEN].copy_from_slice(&hdr.to_le_bytes());
        h[OffloadHdr::LEN..].copy_from_slice(&1u16.to_le_bytes());
        let mut rest = frame;
        for k in 0..need {
            let slot = arith::add(t, k, n);
            let idx = ring.buf_idx(slot);
            let mut off = 0;
            if k == 0 {
                region.write_buf(idx, 0, &h);
                off = VNET_HDR_LEN;
            }
            let (now, later) = rest.split_at(rest.len().min(bs - off));
            region.write_buf(idx, off, now);
            rest = later;
            let flags = if k + 1 < need { NS_MOREFRAG } else { 0 };
            // At most a buffer's size, which fits a slot's 16-bit length.
            let len = u16::try_from(off + now.len()).unwrap_or(u16::MAX);
            ring.set_len_flags(slot, len, flags);
        }
        self.rx.hwtail = arith::add(t, need, n);
        self.unpublished = true;
        Ok(())
    }

    fn flush(&mut self) -> Wake {
        if !std::mem::take(&mut self.unpublished) {
            return Wake::NONE;
        }
        self.rx.publish();
        Self::wake_if_asked(&self.rx, &self.irq, &mut self.stats)
    }

    fn caps(&self) -> Caps {
        // The guest's driver hands every header to its stack as it is.
        Caps::ALL
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.kick.as_raw_fd())
    }

    fn wake_is_shared(&self) -> bool {
        // QEMU writes it, and shares its file description.
        true
    }

    fn prepare_sleep(&mut self, _more: u16) -> bool {
        self.tx.prepare_sleep()
    }

    fn set_awake(&mut self) {
        self.tx.set_awake();
    }

    fn stats(&self) -> QueueStats {
        QueueStats {
            ring_errors: self.stats.ring_errors + self.tx.reinits + self.rx.reinits,
            ..self.stats
        }
    }

    fn driver(&self) -> &'static str {
        "ptnet"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Dir, Geometry, RegionLayout};
    use crate::sync::AppRing;
    use ringswitch_frame::hdr::{F_NEEDS_CSUM, GSO_TCPV4};

    fn region(slots: u32, buf_size: u32) -> Arc<Region> {
        let g = Geometry {
            tx_slots: slots,
            rx_slots: slots,
            buf_size,
            ..Geometry::default()
        };
        Arc::new(Region::create(RegionLayout::new(g, 1).unwrap(), ["t", ""]).unwrap())
    }

    fn queue(r: &Arc<Region>) -> VnetRingQueue {
        VnetRingQueue::new(
            Arc::clone(r),
            0,
            EventFd::new().unwrap(),
            EventFd::new().unwrap(),
            Arc::new(AtomicBool::new(true)),
        )
    }

    fn tso_hdr() -> OffloadHdr {
        OffloadHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        }
    }

    /// The guest sends `frame` with `hdr` in front, over slots of at most
    /// `per` bytes each (the flags on each slot as given, or a chain).
    fn guest_send(app: &mut AppRing, hdr: &OffloadHdr, frame: &[u8], per: usize) {
        let mut bytes = hdr.to_le_bytes().to_vec();
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.extend_from_slice(frame);
        let parts: Vec<&[u8]> = bytes.chunks(per).collect();
        for (k, p) in parts.iter().enumerate() {
            let mut s = app.slot_mut(0).expect("a free TX slot");
            assert!(s.write_at(0, p));
            let flags = if k + 1 < parts.len() { NS_MOREFRAG } else { 0 };
            s.set_len_flags(u16::try_from(p.len()).unwrap(), flags);
            app.advance(1);
        }
        app.publish();
    }

    fn frame(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| u8::try_from(i * 7 % 251).unwrap())
            .collect()
    }

    #[test]
    fn a_frame_over_several_slots_is_staged_with_its_header() {
        let r = region(64, 2048);
        let mut app = AppRing::new(Arc::clone(&r), 0, Dir::Tx, 0);
        let mut q = queue(&r);
        let f = frame(5000);
        guest_send(&mut app, &tso_hdr(), &f, 2048);
        guest_send(&mut app, &OffloadHdr::default(), &frame(60), 2048);
        assert!(q.has_work());
        let mut stage = Stage::new(64);
        let t = q.take_batch(64, &mut stage);
        assert_eq!((t.frames, t.malformed), (2, 0));
        let got = stage.to_vec();
        assert_eq!(got[0], (f, tso_hdr()));
        assert_eq!(got[1], (frame(60), OffloadHdr::default()));
        // Every slot went back to the guest.
        app.refresh_tail();
        assert_eq!(app.space(), 63);
        assert!(!q.has_work());
    }

    #[test]
    fn a_pushed_frame_reaches_the_guest_with_its_header_over_a_chain() {
        let r = region(64, 2048);
        let mut app = AppRing::new(Arc::clone(&r), 0, Dir::Rx, 0);
        let mut q = queue(&r);
        let f = frame(9000);
        q.push(&tso_hdr(), &f).unwrap();
        assert!(
            !q.flush().is_some(),
            "the guest did not ask for an interrupt"
        );
        app.refresh_tail();
        // 12 + 9000 bytes in 2048-byte buffers: five slots.
        assert_eq!(app.space(), 5);
        let mut got = Vec::new();
        for k in 0..5 {
            let s = app.slot_mut(0).unwrap();
            let more = s.flags() & NS_MOREFRAG != 0;
            assert_eq!(more, k < 4);
            got.extend_from_slice(s.payload());
            app.advance(1);
        }
        app.publish();
        assert_eq!(OffloadHdr::from_le_bytes(&got[..10]).unwrap(), tso_hdr());
        assert_eq!(&got[10..12], &[1, 0], "num_buffers");
        assert_eq!(&got[12..], &f[..]);
    }

    #[test]
    fn a_guest_waiting_for_frames_gets_an_interrupt() {
        let r = region(64, 2048);
        let app = AppRing::new(Arc::clone(&r), 0, Dir::Rx, 0);
        let mut q = queue(&r);
        app.set_need_kick(true);
        q.push(&OffloadHdr::default(), &frame(60)).unwrap();
        assert!(q.flush().is_some());
        assert_eq!(q.stats().interrupts, 1);
        assert!(!q.flush().is_some(), "nothing new: no interrupt");
    }

    #[test]
    fn a_full_ring_refuses_and_a_frame_too_long_for_any_chain_is_refused() {
        let r = region(64, 2048);
        let mut q = queue(&r);
        for _ in 0..63 {
            q.push(&OffloadHdr::default(), &frame(60)).unwrap();
        }
        assert_eq!(
            q.push(&OffloadHdr::default(), &frame(60)),
            Err(PushError::Full)
        );
        let r = region(64, 128);
        let mut q = queue(&r);
        assert_eq!(
            q.push(&OffloadHdr::default(), &frame(64 * 128)),
            Err(PushError::TooLong)
        );
    }

    #[test]
    fn the_guests_garbage_is_dropped_and_counted() {
        let r = region(128, 2048);
        let mut app = AppRing::new(Arc::clone(&r), 0, Dir::Tx, 0);
        let mut q = queue(&r);
        // A first slot too short for the header.
        {
            let mut s = app.slot_mut(0).unwrap();
            s.set_len_flags(6, 0);
            app.advance(1);
        }
        // A bad buffer index.
        {
            let ring = app.ring();
            let i = app.head();
            ring.set_slot(
                i,
                crate::layout::NetmapSlot {
                    buf_idx: 1,
                    len: 60,
                    flags: 0,
                    ptr: 0,
                },
            );
            app.advance(1);
        }
        // A length over the buffer size.
        {
            let mut s = app.slot_mut(0).unwrap();
            s.set_len_flags(4000, 0);
            app.advance(1);
        }
        // A chain of more than MAX_FRAGS slots.
        for _ in 0..MAX_FRAGS + 1 {
            let mut s = app.slot_mut(0).unwrap();
            s.set_len_flags(100, NS_MOREFRAG);
            app.advance(1);
        }
        {
            let mut s = app.slot_mut(0).unwrap();
            s.set_len_flags(100, 0);
            app.advance(1);
        }
        // Then a good frame.
        app.publish();
        guest_send(&mut app, &OffloadHdr::default(), &frame(100), 2048);
        let mut stage = Stage::new(64);
        let mut t = q.take_batch(64, &mut stage);
        let more = q.take_batch(64, &mut stage);
        t.frames += more.frames;
        t.malformed += more.malformed;
        // Four bad frames; the long chain's last two slots are a chain of
        // their own (whatever their buffers hold), then the good frame.
        assert_eq!(t.malformed, 4);
        let got = stage.to_vec();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0.len(), 200 - VNET_HDR_LEN);
        assert_eq!(got[1], (frame(100), OffloadHdr::default()));
        assert!(!q.has_work());
    }

    #[test]
    fn a_head_the_guest_could_not_have_resets_the_ring() {
        let r = region(64, 2048);
        let mut q = queue(&r);
        let csb = r.csb(0, Dir::Tx, 0);
        csb.head().store(70, std::sync::atomic::Ordering::Release);
        let mut stage = Stage::new(64);
        let t = q.take_batch(64, &mut stage);
        assert_eq!(t.frames, 0);
        assert_eq!(q.stats().ring_errors, 1);
    }

    #[test]
    fn an_unfinished_chain_waits_then_is_dropped_when_it_stalls() {
        let r = region(64, 2048);
        let mut app = AppRing::new(Arc::clone(&r), 0, Dir::Tx, 0);
        let mut q = queue(&r);
        let mut s = app.slot_mut(0).unwrap();
        s.set_len_flags(100, NS_MOREFRAG);
        app.advance(1);
        app.publish();
        let mut stage = Stage::new(64);
        let t = q.take_batch(64, &mut stage);
        assert_eq!(t.frames, 0, "it waits for its last slot");
        assert!(!q.has_work(), "and is no new work");
        let mut dropped = 0;
        for _ in 0..PortRing::STALLED_LOOKS_MAX + 1 {
            dropped += q.take_batch(64, &mut stage).malformed;
        }
        assert_eq!(dropped, 1);
        assert!(stage.to_vec().is_empty());
    }
}
