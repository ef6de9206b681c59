//! The host side of a ptnet guest with offloads (`VnetRingQueue`) over a
//! region a hostile guest writes: any slot word, any head in the CSB, any
//! bytes in any buffer (headers included), well-formed chains too, mixed
//! with the switch taking batches and pushing frames with headers. Nothing
//! panics, and what comes out is consistent: every staged frame is as long
//! as its chain less the header and carries the header its first slot
//! held; the queue never gives the guest a slot past the one before its
//! head; pushed frames come back to a well-behaved reader as they went in.
#![no_main]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_frame::{FrameQueue, OffloadHdr, PushError, Stage};
use ringswitch_ring::layout::{MAX_FRAGS, NS_MOREFRAG};
use ringswitch_ring::{AppRing, Dir, EventFd, Geometry, NetmapSlot, Region, RegionLayout};
use ringswitch_ring::{VnetRingQueue, VNET_HDR_LEN};

#[derive(Arbitrary, Debug)]
enum Op {
    /// A well-behaved guest sends a frame of `len` bytes with a header,
    /// `per` bytes of it per slot.
    Send {
        len: u16,
        per: u8,
        hdr: [u8; 10],
    },
    /// Raw slot write in the TX ring.
    TxSlot {
        slot: u16,
        buf_idx: Option<u32>,
        len: u16,
        flags: u16,
    },
    /// Raw slot write in the RX ring (a bad buffer index for a slot the
    /// guest gave back).
    RxSlot {
        slot: u16,
        buf_idx: u32,
    },
    /// Raw heads in the CSB.
    TxHead {
        head: u32,
    },
    RxHead {
        head: u32,
    },
    /// Bytes anywhere in the region.
    Scribble {
        at: u32,
        bytes: Vec<u8>,
    },
    /// The switch takes a batch.
    Take {
        max: u8,
    },
    /// The switch pushes a frame of `len` bytes and flushes.
    Push {
        len: u16,
        gso: bool,
    },
    /// A well-behaved guest reads what it received.
    Receive,
}

#[derive(Arbitrary, Debug)]
struct Input {
    slots: u8,
    buf: u8,
    ops: Vec<Op>,
}

fn frame(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i + seed) * 13 % 251) as u8).collect()
}

fuzz_target!(|input: Input| {
    let g = Geometry {
        tx_slots: 64 + u32::from(input.slots % 4) * 64,
        rx_slots: 64 + u32::from(input.slots / 4 % 4) * 64,
        // 128 to 4096 bytes, multiples of 64.
        buf_size: 128 + u32::from(input.buf % 62) * 64,
        ..Geometry::default()
    };
    let Ok(layout) = RegionLayout::new(g, 1) else {
        return;
    };
    let region = Arc::new(Region::create(layout, ["f", ""]).unwrap());
    let mut tx = AppRing::new(Arc::clone(&region), 0, Dir::Tx, 0);
    let mut rx = AppRing::new(Arc::clone(&region), 0, Dir::Rx, 0);
    let mut q = VnetRingQueue::new(
        Arc::clone(&region),
        0,
        EventFd::new().unwrap(),
        EventFd::new().unwrap(),
        Arc::new(std::sync::atomic::AtomicBool::new(true)),
    );
    let mut stage = Stage::new(256);
    let bs = g.buf_size as usize;
    // Frames pushed and not yet read back by the well-behaved reader:
    // checked only while nothing raw touched the RX side.
    let mut pushed: std::collections::VecDeque<(OffloadHdr, Vec<u8>)> = Default::default();
    let mut rx_clean = true;
    for (k, op) in input.ops.into_iter().take(256).enumerate() {
        match op {
            Op::Send { len, per, hdr } => {
                let hdr = OffloadHdr::from_le_bytes(&hdr).unwrap();
                let mut bytes = hdr.to_le_bytes().to_vec();
                bytes.extend_from_slice(&1u16.to_le_bytes());
                bytes.extend_from_slice(&frame(usize::from(len % 9000), k));
                let per = (usize::from(per) * 16).clamp(VNET_HDR_LEN, bs);
                let parts: Vec<&[u8]> = bytes.chunks(per).collect();
                tx.refresh_tail();
                if parts.len() > tx.space() as usize {
                    continue;
                }
                for (i, p) in parts.iter().enumerate() {
                    let Some(mut s) = tx.slot_mut(0) else { break };
                    if !s.write_at(0, p) {
                        break;
                    }
                    let flags = if i + 1 < parts.len() { NS_MOREFRAG } else { 0 };
                    s.set_len_flags(p.len() as u16, flags);
                    tx.advance(1);
                }
                tx.publish();
            }
            Op::TxSlot {
                slot,
                buf_idx,
                len,
                flags,
            } => {
                let ring = tx.ring();
                let i = u32::from(slot) % ring.num_slots();
                let mut s: NetmapSlot = ring.slot(i);
                if let Some(b) = buf_idx {
                    s.buf_idx = b;
                }
                s.len = len;
                s.flags = flags;
                ring.set_slot(i, s);
            }
            Op::RxSlot { slot, buf_idx } => {
                let ring = rx.ring();
                let i = u32::from(slot) % ring.num_slots();
                ring.set_buf_idx(i, buf_idx);
                rx_clean = false;
            }
            Op::TxHead { head } => {
                region
                    .csb(0, Dir::Tx, 0)
                    .head()
                    .store(head, Ordering::Release);
            }
            Op::RxHead { head } => {
                region
                    .csb(0, Dir::Rx, 0)
                    .head()
                    .store(head, Ordering::Release);
                rx_clean = false;
            }
            Op::Scribble { at, bytes } => {
                let at = at as usize % region.len().max(1);
                region.scribble(at, &bytes);
                rx_clean = false;
            }
            Op::Take { max } => {
                stage.clear();
                let t = q.take_batch(usize::from(max).max(1), &mut stage);
                assert!(t.malformed as usize <= t.frames);
                assert!(stage.frames().len() <= t.frames);
                for f in stage.frames() {
                    assert!(stage.bytes(f).len() <= MAX_FRAGS as usize * bs);
                }
                // Whatever the guest wrote, the ring it sees stays sane.
                let n = tx.num_slots();
                let hwtail = region.csb(0, Dir::Tx, 0).hwtail().load(Ordering::Acquire);
                assert!(hwtail < n);
            }
            Op::Push { len, gso } => {
                let f = frame(14 + usize::from(len % 20000), k);
                let hdr = if gso {
                    OffloadHdr {
                        flags: 1,
                        gso_type: 1,
                        hdr_len: 54,
                        gso_size: 1448,
                        csum_start: 34,
                        csum_offset: 16,
                    }
                } else {
                    OffloadHdr::default()
                };
                match q.push(&hdr, &f) {
                    Ok(()) => pushed.push_back((hdr, f)),
                    Err(PushError::Full) | Err(PushError::TooLong) => {}
                    Err(PushError::Down) => unreachable!("a ring queue is never down"),
                }
                q.flush().send();
            }
            Op::Receive => {
                rx.refresh_tail();
                // Whole chains only.
                loop {
                    let mut got = Vec::new();
                    let mut slots = 0;
                    let mut done = false;
                    while let Some(s) = rx.slot_mut(slots) {
                        slots += 1;
                        got.extend_from_slice(s.payload());
                        if s.flags() & NS_MOREFRAG == 0 {
                            done = true;
                            break;
                        }
                    }
                    if !done {
                        break;
                    }
                    rx.advance(slots);
                    if rx_clean {
                        let (hdr, f) = pushed.pop_front().expect("a frame pushed");
                        assert_eq!(OffloadHdr::from_le_bytes(&got).unwrap(), hdr);
                        assert_eq!(&got[VNET_HDR_LEN..], &f[..]);
                    }
                }
                rx.publish();
            }
        }
    }
});
