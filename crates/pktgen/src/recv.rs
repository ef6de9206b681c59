//! rx and rxseq: sync every RX ring, count up to a burst per ring, release
//! the slots at the next sync; wait (with a timeout, so the duration and
//! the stop flag are checked without traffic) when all are empty.

use crate::frame::{read_seq, read_stream};
use crate::os::monotonic_ns;
use crate::report::{Activity, End, Outcome, Reporter};
use crate::seq::SeqStreams;
use crate::session::Session;
use crate::PktGenError;

pub(crate) fn receive(
    s: &mut Session,
    with_seq: bool,
    out: &mut dyn Reporter,
) -> Result<Outcome, PktGenError> {
    let rings = s.rx_rings();
    // One tracker per sender stream, allocated here once.
    let mut streams = with_seq.then(SeqStreams::default);
    let mut active = Activity::default();
    let mut short = 0u64;
    let end = loop {
        let now = monotonic_ns();
        if let Some(e) = s.round_start(now, out) {
            break e;
        }
        let mut got = 0u32;
        for r in 0..rings {
            let n = take(s, r, s.burst, &mut streams, &mut short)?;
            if n == u32::MAX {
                break;
            }
            got += n;
        }
        if got > 0 {
            active.at(now);
            continue;
        }
        let slice = s.wait_slice(now);
        s.wait_rx_any(slice)?;
    };
    // Stopped by a signal or the duration: take what already arrived, in
    // one pass without waiting, so a caller that stops the receiver once
    // the switch has delivered everything counts every delivered frame.
    // Bounded by what the rings hold and by -n.
    if end != End::Count {
        for r in 0..rings {
            if take(s, r, u32::MAX, &mut streams, &mut short)? == u32::MAX {
                break;
            }
        }
    }
    // Give the consumed slots back before the port closes.
    for r in 0..rings {
        let res = s.rx(r).sync();
        res.map_err(|e| s.wait_err(e))?;
    }
    tracing::debug!(port = ?s.port.stats(), "receiver done");
    let m = &s.meter;
    let mut out = Outcome {
        packets: m.pkts,
        bytes: m.bytes,
        span: active.span(),
        end: Some(end),
        drops: Some(0),
        ..Outcome::default()
    };
    if let Some(st) = streams {
        tracing::debug!(streams = st.active(), "receiver done");
        out.drops = Some(st.gaps());
        out.gaps = Some(st.gaps());
        out.reordered = Some(st.reordered());
        out.malformed = Some(short + st.unknown);
    }
    Ok(out)
}

/// Syncs RX ring `r` and takes up to `most` of the packets it holds (and
/// the -n budget allows): counts them, reads their sequence numbers, and
/// releases the slots at the next sync. Returns how many, or `u32::MAX`
/// once the -n budget is spent.
fn take(
    s: &mut Session,
    r: usize,
    most: u32,
    streams: &mut Option<SeqStreams>,
    short: &mut u64,
) -> Result<u32, PktGenError> {
    let mut rx = s.rx(r);
    let res = rx.sync();
    res.map_err(|e| s.wait_err(e))?;
    let space = s.rx(r).space();
    if space == 0 {
        return Ok(0);
    }
    // From the -n budget (shared with the other threads).
    let n = s.claim(space.min(most));
    if n == 0 {
        return Ok(u32::MAX);
    }
    let mut rx = s.rx(r);
    let mut bytes = 0u64;
    for k in 0..n {
        let Some(slot) = rx.slot(k) else { break };
        let p = slot.payload();
        bytes += p.len() as u64;
        if let Some(st) = streams {
            match read_seq(p) {
                Some(q) => st.observe(read_stream(p), q),
                None => *short += 1,
            }
        }
    }
    // Handed back at the next sync of this ring.
    rx.advance(n);
    s.record(n, bytes, space);
    Ok(n)
}
