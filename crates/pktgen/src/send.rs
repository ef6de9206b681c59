//! tx and txseq: fill up to a burst of TX slots, sync once, repeat; wait
//! (blocking or busy) when the ring is full; at the end, give the port a
//! bounded time to take what is still queued.

use std::time::Duration;

use ringswitch_ring::Slot;

use crate::frame::{Fields, RangeCursor, Rng, Stamp, Template};
use crate::os::monotonic_ns;
use crate::report::{Outcome, Reporter};
use crate::session::Session;
use crate::PktGenError;

/// How long the closing flush waits for the port to take queued packets.
const FLUSH_NS: u64 = 1_000_000_000;
/// Which buffers of the region already hold the template. As netmap's
/// pkt-gen, the template is written once per buffer and then only the
/// per-packet fields change: a pipe swaps buffers around, and after one lap
/// every buffer carries the template, so sending stops touching payloads.
/// (A peer that rewrites the buffers it received gets them back rewritten,
/// as with netmap.)
pub(crate) struct Filled {
    done: Vec<bool>,
    /// Template copies made.
    pub(crate) writes: u64,
}

impl Filled {
    pub(crate) fn new(nbufs: u32) -> Filled {
        Filled {
            done: vec![false; nbufs as usize],
            writes: 0,
        }
    }

    /// Makes sure `slot`'s buffer holds the template.
    #[inline(always)]
    pub(crate) fn ensure(&mut self, slot: &mut Slot<'_>, t: &Template) {
        let b = slot.buf_idx() as usize;
        // An invalid index is left to the port side to refuse.
        if let Some(done) = self.done.get_mut(b) {
            if !*done {
                slot.write_at(0, t.bytes());
                *done = true;
                self.writes += 1;
            }
        }
    }
}

/// The per-packet fields: addresses and ports walking their ranges,
/// random ports, sequence number, stream index.
pub(crate) struct Stamper {
    pub(crate) fields: Fields,
    st: Stamp,
    rng: Rng,
    random_src: bool,
    random_dst: bool,
    /// Cursors for the endpoints given as ranges (each advances every
    /// packet, independently of the other, as in netmap's pkt-gen).
    src: Option<RangeCursor>,
    dst: Option<RangeCursor>,
}

impl Stamper {
    pub(crate) fn new(s: &Session) -> Stamper {
        let (src_port, dst_port) = s.template.ports();
        let (src_ip, dst_ip) = s.template.addrs();
        let st = Stamp {
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            seq: 0,
            stream: s.stream,
            ts_ns: 0,
        };
        let cursor = |ep: &crate::Endpoint, port| ep.is_range().then(|| RangeCursor::new(ep, port));
        Stamper {
            fields: s.fields,
            st,
            rng: Rng::new(
                monotonic_ns()
                    ^ (u64::from(std::process::id()) << 32)
                    ^ (u64::from(s.stream) << 48),
            ),
            random_src: s.random_src,
            random_dst: s.random_dst,
            src: cursor(&s.src, src_port),
            dst: cursor(&s.dst, dst_port),
        }
    }

    /// Stamps the next packet into `buf` (the whole slot buffer): the next
    /// point of the address/port ranges, the next sequence number, fresh
    /// random ports, and `ts_ns`.
    #[inline(always)]
    pub(crate) fn stamp(&mut self, t: &Template, buf: &mut [u8], ts_ns: u64) {
        if let Some(c) = &mut self.src {
            self.st.src_ip = c.ip();
            self.st.src_port = c.port();
            c.advance();
        }
        if let Some(c) = &mut self.dst {
            self.st.dst_ip = c.ip();
            self.st.dst_port = c.port();
            c.advance();
        }
        if self.random_src {
            self.st.src_port = self.rng.next_u16();
        }
        if self.random_dst {
            self.st.dst_port = self.rng.next_u16();
        }
        self.st.ts_ns = ts_ns;
        t.stamp(buf, &self.st, self.fields);
        self.st.seq = self.st.seq.wrapping_add(1);
    }

    /// The sequence number the next packet gets.
    pub(crate) fn next_seq(&self) -> u32 {
        self.st.seq
    }
}

pub(crate) fn send(s: &mut Session, out: &mut dyn Reporter) -> Result<Outcome, PktGenError> {
    let mut filled = Filled::new(s.port.region().layout().nbufs);
    let mut stamper = Stamper::new(s);
    let stamping = s.fields.any();
    let mut bucket = s.rate_limiter();
    let len16 = s.len as u16;
    let mut advanced = 0u64;
    let t0 = monotonic_ns();
    let mut reconnects = s.port.stats().reconnects;
    let end = loop {
        let now = monotonic_ns();
        if let Some(e) = s.round_start(now, out) {
            break e;
        }
        let Some((want, space)) = s.tx_grant(&mut bucket, now)? else {
            continue;
        };
        if s.port.stats().reconnects != reconnects {
            // Opened again on a new daemon (see `Port::set_reconnect`): new
            // memory, whose buffers hold no template yet.
            reconnects = s.port.stats().reconnects;
            filled = Filled::new(s.port.region().layout().nbufs);
        }
        let mut tx = s.port.tx(0);
        let mut n = 0;
        // Up to `want` slots; `slot` gives none past the free space.
        while let Some(mut slot) = (n < want).then(|| tx.slot(n)).flatten() {
            filled.ensure(&mut slot, &s.template);
            if stamping {
                stamper.stamp(&s.template, slot.buf_mut(), 0);
            }
            slot.set_len(len16);
            n += 1;
        }
        tx.advance(n);
        let r = tx.sync();
        r.map_err(|e| s.wait_err(e))?;
        advanced += u64::from(n);
        s.record(n, u64::from(n) * s.len as u64, space);
        if let Some(b) = &mut bucket {
            b.consume(n);
        }
    };
    let (queued, t1) = flush(s)?;
    tracing::debug!(
        stream = s.stream,
        template_writes = filled.writes,
        next_seq = stamper.next_seq(),
        port = ?s.port.stats(),
        "sender done"
    );
    let packets = advanced - queued.min(advanced);
    Ok(Outcome {
        packets,
        bytes: packets * s.len as u64,
        span: Some((t0, t1)),
        end: Some(end),
        queued: Some(queued),
        ..Outcome::default()
    })
}

/// Packets in the TX ring not yet taken by the port side.
fn queued(s: &mut Session) -> u64 {
    let tx = s.port.tx(0);
    let n = tx.num_slots();
    u64::from(n - 1 - tx.space().min(n - 1))
}

/// Syncs until the port took every queued packet or [`FLUSH_NS`] passed.
/// Returns how many are still queued, and when the last one was taken
/// (the start of the flush if none was).
fn flush(s: &mut Session) -> Result<(u64, u64), PktGenError> {
    let start = monotonic_ns();
    let deadline = start.saturating_add(FLUSH_NS);
    let mut last_taken = start;
    let mut before = queued(s);
    loop {
        let r = s.port.tx(0).sync();
        r.map_err(|e| s.wait_err(e))?;
        let now = monotonic_ns();
        let q = queued(s);
        if q < before {
            last_taken = now;
            before = q;
        }
        if q == 0 || now >= deadline {
            return Ok((q, last_taken));
        }
        if s.busy {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
