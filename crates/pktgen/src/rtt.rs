//! ping and pong.
//!
//! ping sends a round of up to `-b` frames, each carrying its sequence
//! number and the CLOCK_MONOTONIC time it was filled, then collects the
//! replies of that round (at most [`ROUND_TIMEOUT_NS`]); the RTT of a reply
//! is the time it was picked up minus the timestamp it carries. pong copies
//! each received frame into a TX slot with its addresses swapped.

use crate::frame::{read_seq, read_ts, swap_addresses};
use crate::latency::{IntervalRtt, RttStats};
use crate::os::{monotonic_ns, stop_requested};
use crate::report::{Activity, Outcome, Reporter};
use crate::send::Stamper;
use crate::session::{Session, WAIT_SLICE};
use crate::PktGenError;

/// A ping not answered within this is lost.
pub(crate) const ROUND_TIMEOUT_NS: u64 = 1_000_000_000;

pub(crate) fn ping(s: &mut Session, out: &mut dyn Reporter) -> Result<Outcome, PktGenError> {
    let mut stamper = Stamper::new(s);
    let mut bucket = s.rate_limiter();
    let len16 = s.len as u16;
    // One flag per ping of the round in flight: allocated once.
    let mut answered = vec![false; s.burst as usize];
    let mut stats = RttStats::default();
    let mut iv = IntervalRtt::default();
    let (mut sent, mut received, mut bytes, mut lost, mut stray) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let t0 = monotonic_ns();
    let end = loop {
        let now = monotonic_ns();
        if s.tick(now, Some(&iv), out) {
            iv = IntervalRtt::default();
        }
        if let Some(e) = s.ending(now) {
            break e;
        }

        // Send a round.
        let Some((want, _)) = s.tx_grant(&mut bucket, now)? else {
            continue;
        };
        let mut tx = s.port.tx(0);
        let base = stamper.next_seq();
        let mut n = 0;
        // Bounded by `want` and by the ring's free slots.
        while let Some(mut slot) = (n < want).then(|| tx.slot(n)).flatten() {
            // A pong may have rewritten this buffer in place (swapped
            // addresses) before it came back through a pipe: write the
            // whole template every time, pings are few.
            slot.write_at(0, s.template.bytes());
            stamper.stamp(&s.template, slot.buf_mut(), monotonic_ns());
            slot.set_len(len16);
            n += 1;
        }
        tx.advance(n);
        let r = tx.sync();
        r.map_err(|e| s.wait_err(e))?;
        sent += u64::from(n);
        answered[..n as usize].fill(false);

        // Collect its replies.
        let mut got = 0u32;
        let round_end = monotonic_ns().saturating_add(ROUND_TIMEOUT_NS);
        while got < n {
            let mut rx = s.port.rx(0);
            let r = rx.sync();
            r.map_err(|e| s.wait_err(e))?;
            let mut rx = s.port.rx(0);
            let avail = rx.space();
            if avail > 0 {
                let t = monotonic_ns();
                let (mut batch, mut batch_bytes) = (0u32, 0u64);
                for k in 0..avail {
                    let Some(slot) = rx.slot(k) else { break };
                    let p = slot.payload();
                    let (Some(q), Some(ts)) = (read_seq(p), read_ts(p)) else {
                        stray += 1;
                        continue;
                    };
                    let off = q.wrapping_sub(base);
                    match answered.get_mut(off as usize) {
                        Some(seen) if off < n && !*seen => {
                            *seen = true;
                            let rtt = t.saturating_sub(ts);
                            stats.record(rtt);
                            iv.record(rtt);
                            batch += 1;
                            batch_bytes += p.len() as u64;
                        }
                        _ => stray += 1,
                    }
                }
                rx.advance(avail);
                got += batch;
                bytes += batch_bytes;
                if batch > 0 {
                    s.record(batch, batch_bytes, avail);
                }
                continue;
            }
            let now = monotonic_ns();
            if now >= round_end || stop_requested() {
                break;
            }
            let wait = std::time::Duration::from_nanos(round_end - now).min(WAIT_SLICE);
            let r = rx.wait(Some(wait));
            r.map_err(|e| s.wait_err(e))?;
        }
        received += u64::from(got);
        lost += u64::from(n - got);
    };
    let res = s.port.rx(0).sync();
    res.map_err(|e| s.wait_err(e))?;
    let t1 = monotonic_ns();
    Ok(Outcome {
        packets: received,
        bytes,
        span: Some((t0, t1)),
        end: Some(end),
        sent: Some(sent),
        lost: Some(lost),
        malformed: Some(stray),
        rtt: Some(stats.summary()),
        ..Outcome::default()
    })
}

pub(crate) fn pong(s: &mut Session, out: &mut dyn Reporter) -> Result<Outcome, PktGenError> {
    let mut bad = 0u64;
    let mut active = Activity::default();
    let end = loop {
        let now = monotonic_ns();
        if let Some(e) = s.round_start(now, out) {
            break e;
        }
        let slice = s.wait_slice(now);
        let r = s.port.rx(0).sync();
        r.map_err(|e| s.wait_err(e))?;
        let avail = s.port.rx(0).space();
        if avail == 0 {
            let r = s.port.rx(0).wait(Some(slice));
            r.map_err(|e| s.wait_err(e))?;
            continue;
        }
        // Taken each round: a port that reconnected has new memory.
        let region = s.port.region().clone();
        let mut tx = s.port.tx(0);
        let mut free = tx.space();
        if free == 0 {
            let r = tx.sync();
            r.map_err(|e| s.wait_err(e))?;
            free = s.port.tx(0).space();
            if free == 0 {
                let r = s.port.tx(0).wait(Some(slice));
                r.map_err(|e| s.wait_err(e))?;
                continue;
            }
        }
        let n = s.claim(avail.min(free).min(s.burst));
        let (mut out, mut bytes) = (0u32, 0u64);
        for k in 0..n {
            let (rbuf, rlen) = {
                let mut rx = s.port.rx(0);
                let Some(slot) = rx.slot(k) else { break };
                let raw = slot.raw();
                (raw.buf_idx, raw.len)
            };
            let mut tx = s.port.tx(0);
            let Some(mut slot) = tx.slot(out) else { break };
            let tbuf = slot.buf_idx();
            // One copy, buffer to buffer; refused (and counted) when either
            // index or the length is not valid for this region.
            if !region.copy_from(tbuf, 0, &region, rbuf, 0, usize::from(rlen)) {
                bad += 1;
                continue;
            }
            if let Some(f) = slot.buf_mut().get_mut(..usize::from(rlen)) {
                swap_addresses(f);
            }
            // Also clears NS_BUF_CHANGED: the buffer is ours to send.
            slot.set_len(rlen);
            out += 1;
            bytes += u64::from(rlen);
        }
        s.port.rx(0).advance(n);
        s.port.tx(0).advance(out);
        let r = s.port.tx(0).sync();
        r.map_err(|e| s.wait_err(e))?;
        if out > 0 {
            s.record(out, bytes, avail);
            active.at(now);
        }
    };
    let r = s.port.rx(0).sync();
    r.map_err(|e| s.wait_err(e))?;
    // The last replies may still sit in the TX ring: hand them over before
    // the port closes (a switch port's worker takes them on its next pass).
    let r = s.port.flush(Some(std::time::Duration::from_millis(500)));
    r.map_err(|e| s.wait_err(e))?;
    Ok(Outcome {
        packets: s.meter.pkts,
        bytes: s.meter.bytes,
        span: active.span(),
        end: Some(end),
        malformed: Some(bad),
        ..Outcome::default()
    })
}
