//! rx and rxseq: sync every RX ring, count up to a burst per ring, release
//! the slots at the next sync; wait (with a timeout, so the duration and
//! the stop flag are checked without traffic) when all are empty.

use crate::frame::read_seq;
use crate::os::monotonic_ns;
use crate::seq::SeqTracker;
use crate::session::Session;
use crate::{End, Outcome, PktGenError};

pub(crate) fn receive(s: &mut Session, with_seq: bool) -> Result<Outcome, PktGenError> {
    let rings = s.port.geometry().rx_rings as usize;
    let mut tracker = SeqTracker::default();
    let mut short = 0u64;
    let mut left = s.count;
    let mut first_ns: Option<u64> = None;
    let mut last_ns = 0u64;
    let end = loop {
        let now = monotonic_ns();
        s.tick(now);
        if left == 0 {
            break End::Count;
        }
        if let Some(e) = s.stop_reason(now) {
            break e;
        }
        let mut got = 0u32;
        for r in 0..rings {
            if left == 0 {
                break;
            }
            let mut rx = s.port.rx(r);
            let res = rx.sync();
            res.map_err(|e| s.wait_err(e))?;
            let mut rx = s.port.rx(r);
            let space = rx.space();
            if space == 0 {
                continue;
            }
            let n = u64::from(space.min(s.burst)).min(left) as u32;
            let mut bytes = 0u64;
            for k in 0..n {
                let Some(slot) = rx.slot(k) else { break };
                let p = slot.payload();
                bytes += p.len() as u64;
                if with_seq {
                    match read_seq(p) {
                        Some(q) => tracker.observe(q),
                        None => short += 1,
                    }
                }
            }
            // Handed back at the next sync of this ring.
            rx.advance(n);
            got += n;
            left -= u64::from(n);
            s.meter.record(n, bytes, space);
        }
        if got > 0 {
            first_ns.get_or_insert(now);
            last_ns = now;
            continue;
        }
        let slice = s.wait_slice(now);
        s.wait_rx_any(slice)?;
    };
    // Give the consumed slots back before the port closes.
    for r in 0..rings {
        let res = s.port.rx(r).sync();
        res.map_err(|e| s.wait_err(e))?;
    }
    let m = &s.meter;
    let mut out = Outcome {
        packets: m.pkts,
        bytes: m.bytes,
        ns: first_ns.map_or(0, |f| last_ns - f),
        end: Some(end),
        drops: Some(0),
        ..Outcome::default()
    };
    if with_seq {
        out.drops = Some(tracker.gaps);
        out.gaps = Some(tracker.gaps);
        out.reordered = Some(tracker.reordered);
        out.malformed = Some(short);
    }
    Ok(out)
}
