//! What to do with a frame: the outcome of the pipeline for one flow key.
//!
//! A [`Verdict`] is a fixed-size structure, filled in place and never
//! allocating: up to [`MAX_OUTPUTS`] outputs, each a [`Target`] with the
//! header [`Edit`]s in force at that point (a subset, in order, of up to
//! [`MAX_EDITS`] edits the verdict records), and the counters to add the
//! frame to (the flows it matched, the tables it was looked up in, the
//! groups and buckets it went through).
//!
//! Beyond the bounds nothing is guessed: an output beyond
//! [`MAX_OUTPUTS`], or one that would need an edit beyond [`MAX_EDITS`],
//! is left out and the verdict says it is [`Verdict::truncated`] (the
//! switch counts those frames); a counter beyond [`MAX_COUNTED`] is not
//! counted, and the verdict is truncated too.
//!
//! [`apply_edits`] applies an output's edits to a frame's bytes, into the
//! caller's buffer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::MAX_TABLES;

/// Most outputs of one verdict.
pub const MAX_OUTPUTS: usize = 16;
/// Most header edits one verdict records (over all its outputs).
pub const MAX_EDITS: usize = 32;
/// Most packet and byte counters one verdict adds to: a flow per table,
/// and 16 for groups and their buckets.
pub const MAX_COUNTED: usize = MAX_TABLES + 16;
/// Most packet tallies one verdict adds to: a lookup per table, and the
/// miss of the last.
pub const MAX_TALLIED: usize = MAX_TABLES + 1;

/// A packet and byte counter, added to by workers without a lock.
#[derive(Debug, Default)]
pub struct Counter {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl Counter {
    /// Adds a run of `packets` frames of `bytes` bytes in all.
    #[inline]
    pub fn add(&self, packets: u64, bytes: u64) {
        // Relaxed: a statistic; readers want a value, not an ordering with
        // other memory (nothing is published through it).
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// (packets, bytes) so far.
    pub fn get(&self) -> (u64, u64) {
        // Relaxed: see `add`.
        (
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }

    /// Back to zero (`OFPFF_RESET_COUNTS`).
    pub fn reset(&self) {
        // Relaxed: see `add`; adds racing with a reset may land on either
        // side of it.
        self.packets.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }
}

/// A packet counter (a table's lookups or misses), added to by workers
/// without a lock.
#[derive(Debug, Default)]
pub struct Tally(AtomicU64);

impl Tally {
    /// Adds `packets`.
    #[inline]
    pub fn add(&self, packets: u64) {
        // Relaxed: a statistic, as `Counter::add`.
        self.0.fetch_add(packets, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        // Relaxed: see `add`.
        self.0.load(Ordering::Relaxed)
    }
}

/// A header edit, applied in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Edit {
    /// Push an 802.1Q tag with this TPID; its TCI is copied from the
    /// outer tag if there is one, else 0.
    PushVlan(u16),
    /// Pop the outer VLAN tag (nothing if there is none).
    #[default]
    PopVlan,
    /// Set the Ethernet destination.
    EthDst([u8; 6]),
    /// Set the Ethernet source.
    EthSrc([u8; 6]),
    /// Set the outer tag's VLAN id (12 bits; nothing without a tag).
    VlanVid(u16),
    /// Set the outer tag's priority (3 bits; nothing without a tag).
    VlanPcp(u8),
    /// Set the IPv4/IPv6 DSCP (6 bits; nothing for other frames).
    IpDscp(u8),
}

/// Where an output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An OpenFlow port number (never the input port: an output to the
    /// input port by number is dropped, as OpenFlow says; use `InPort`).
    Port(u32),
    /// Back out of the input port (`OFPP_IN_PORT`).
    InPort,
    /// Every port but the input, within the flooding domain (`OFPP_FLOOD`).
    Flood,
    /// Every port but the input (`OFPP_ALL`).
    All,
    /// The learning bridge decides (`OFPP_NORMAL`).
    Normal,
    /// The local port (`OFPP_LOCAL`).
    Local,
    /// A PACKET_IN to the controller.
    Controller {
        /// At most this many bytes of the frame (`OFPCML_NO_BUFFER`: all).
        max_len: u16,
        /// `OFPR_NO_MATCH` from a table-miss flow, else `OFPR_ACTION`.
        reason: u8,
        /// The table of the flow that sent it.
        table_id: u8,
        /// That flow's cookie.
        cookie: u64,
        /// The pipeline's metadata at that point (for the PACKET_IN's
        /// match).
        metadata: u64,
    },
}

/// One output of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    /// Where to.
    pub target: Target,
    /// Which of the verdict's edits apply, a bit per edit index.
    edits: u32,
}

impl Output {
    /// Whether the frame goes out unchanged.
    pub fn unchanged(&self) -> bool {
        self.edits == 0
    }
}

const NO_OUTPUT: Output = Output {
    target: Target::Port(0),
    edits: 0,
};

/// What to do with a frame (see the module documentation).
#[derive(Debug, Clone)]
pub struct Verdict {
    outputs: [Output; MAX_OUTPUTS],
    n_outputs: u8,
    edits: [Edit; MAX_EDITS],
    n_edits: u8,
    counted: [Option<Arc<Counter>>; MAX_COUNTED],
    n_counted: u8,
    tallied: [Option<Arc<Tally>>; MAX_TALLIED],
    n_tallied: u8,
    truncated: bool,
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict {
            outputs: [NO_OUTPUT; MAX_OUTPUTS],
            n_outputs: 0,
            edits: [Edit::PopVlan; MAX_EDITS],
            n_edits: 0,
            counted: [const { None }; MAX_COUNTED],
            n_counted: 0,
            tallied: [const { None }; MAX_TALLIED],
            n_tallied: 0,
            truncated: false,
        }
    }
}

impl Verdict {
    /// An empty verdict: drop, count nothing.
    pub fn new() -> Verdict {
        Verdict::default()
    }

    /// The outputs, in the order the actions gave them.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs[..usize::from(self.n_outputs)]
    }

    /// Whether the frame is dropped (no output).
    pub fn is_drop(&self) -> bool {
        self.n_outputs == 0
    }

    /// Whether something was left out (see the module documentation).
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The edits of `out`, in order.
    pub fn edits<'a>(&'a self, out: &'a Output) -> impl Iterator<Item = Edit> + 'a {
        self.edits[..usize::from(self.n_edits)]
            .iter()
            .enumerate()
            .filter(move |(i, _)| out.edits & (1 << i) != 0)
            .map(|(_, e)| *e)
    }

    /// Every edit the verdict records (each output names its own, see
    /// [`Verdict::edits`]): two verdicts with equal outputs and equal
    /// edits do the same to a frame.
    pub fn all_edits(&self) -> &[Edit] {
        &self.edits[..usize::from(self.n_edits)]
    }

    /// Writes `frame` with `out`'s edits into `buf`; the edited length.
    pub fn apply(&self, out: &Output, frame: &[u8], buf: &mut [u8]) -> Result<usize, EditError> {
        apply_edits(frame, self.edits(out), buf)
    }

    /// Adds a run of `packets` frames of `bytes` bytes to every counter
    /// the verdict names: call once per run of frames with this verdict.
    #[inline]
    pub fn count(&self, packets: u64, bytes: u64) {
        for c in self.counted[..usize::from(self.n_counted)].iter().flatten() {
            c.add(packets, bytes);
        }
        for t in self.tallied[..usize::from(self.n_tallied)].iter().flatten() {
            t.add(packets);
        }
    }

    /// How many counters and tallies the verdict adds to.
    pub fn counters(&self) -> usize {
        usize::from(self.n_counted) + usize::from(self.n_tallied)
    }

    /// Back to empty, dropping its counter references.
    pub(crate) fn clear(&mut self) {
        for c in &mut self.counted[..usize::from(self.n_counted)] {
            *c = None;
        }
        for t in &mut self.tallied[..usize::from(self.n_tallied)] {
            *t = None;
        }
        self.n_tallied = 0;
        self.n_outputs = 0;
        self.n_edits = 0;
        self.n_counted = 0;
        self.truncated = false;
    }

    /// Records an edit; its bit, or `None` (and truncated) when full.
    pub(crate) fn push_edit(&mut self, e: Edit) -> Option<u32> {
        let i = usize::from(self.n_edits);
        if i == MAX_EDITS {
            self.truncated = true;
            return None;
        }
        self.edits[i] = e;
        self.n_edits += 1;
        Some(1 << i)
    }

    /// Records an output with these edits.
    pub(crate) fn push_output(&mut self, target: Target, edits: u32) {
        let i = usize::from(self.n_outputs);
        if i == MAX_OUTPUTS {
            self.truncated = true;
            return;
        }
        self.outputs[i] = Output { target, edits };
        self.n_outputs += 1;
    }

    /// Marks the verdict as having left something out.
    pub(crate) fn set_truncated(&mut self) {
        self.truncated = true;
    }

    /// Adds a counter to count the frame on.
    pub(crate) fn push_counter(&mut self, c: &Arc<Counter>) {
        let i = usize::from(self.n_counted);
        if i == MAX_COUNTED {
            self.truncated = true;
            return;
        }
        self.counted[i] = Some(Arc::clone(c));
        self.n_counted += 1;
    }

    /// Adds a tally to count the frame on.
    pub(crate) fn push_tally(&mut self, t: &Arc<Tally>) {
        let i = usize::from(self.n_tallied);
        if i == MAX_TALLIED {
            self.truncated = true;
            return;
        }
        self.tallied[i] = Some(Arc::clone(t));
        self.n_tallied += 1;
    }
}

/// Why edits could not be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The buffer cannot hold the edited frame.
    #[error("the buffer of {have} bytes cannot hold the edited frame of {need} bytes")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes in the buffer.
        have: usize,
    },
}

const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88a8;

/// Whether the frame in `b[..len]` has an outer VLAN tag.
fn tagged(b: &[u8], len: usize) -> bool {
    len >= 18 && matches!(u16::from_be_bytes([b[12], b[13]]), TPID_8021Q | TPID_8021AD)
}

/// The IPv4 header checksum of `h` (its checksum field taken as 0).
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, pair) in h.chunks(2).enumerate() {
        if i == 5 {
            continue;
        }
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |&b| u32::from(b));
        sum += hi | lo;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes `frame` with `edits` applied, in order, into `buf`; returns the
/// edited length. Edits that do not apply to the frame (a VLAN id without
/// a tag, a DSCP on a non-IP frame or a truncated IP header) change
/// nothing; the IPv4 header checksum is recomputed after a DSCP change.
pub fn apply_edits(
    frame: &[u8],
    edits: impl IntoIterator<Item = Edit>,
    buf: &mut [u8],
) -> Result<usize, EditError> {
    let too_small = |need: usize| EditError::BufferTooSmall {
        need,
        have: buf.len(),
    };
    if buf.len() < frame.len() {
        return Err(too_small(frame.len()));
    }
    let mut len = frame.len();
    buf[..len].copy_from_slice(frame);
    for e in edits {
        if len < 14 {
            break;
        }
        match e {
            Edit::PushVlan(tpid) => {
                if buf.len() < len + 4 {
                    return Err(EditError::BufferTooSmall {
                        need: len + 4,
                        have: buf.len(),
                    });
                }
                let tci = if tagged(buf, len) {
                    [buf[14], buf[15]]
                } else {
                    [0, 0]
                };
                buf.copy_within(12..len, 16);
                buf[12..14].copy_from_slice(&tpid.to_be_bytes());
                buf[14..16].copy_from_slice(&tci);
                len += 4;
            }
            Edit::PopVlan => {
                if tagged(buf, len) {
                    buf.copy_within(16..len, 12);
                    len -= 4;
                }
            }
            Edit::EthDst(mac) => buf[..6].copy_from_slice(&mac),
            Edit::EthSrc(mac) => buf[6..12].copy_from_slice(&mac),
            Edit::VlanVid(vid) => {
                if tagged(buf, len) {
                    let tci = u16::from_be_bytes([buf[14], buf[15]]);
                    let tci = (tci & 0xf000) | (vid & 0x0fff);
                    buf[14..16].copy_from_slice(&tci.to_be_bytes());
                }
            }
            Edit::VlanPcp(pcp) => {
                if tagged(buf, len) {
                    let tci = u16::from_be_bytes([buf[14], buf[15]]);
                    let tci = (tci & 0x1fff) | (u16::from(pcp & 7) << 13);
                    buf[14..16].copy_from_slice(&tci.to_be_bytes());
                }
            }
            Edit::IpDscp(dscp) => set_dscp(&mut buf[..len], dscp & 0x3f),
        }
    }
    Ok(len)
}

fn set_dscp(b: &mut [u8], dscp: u8) {
    let l3 = if tagged(b, b.len()) { 18 } else { 14 };
    if b.len() < l3 {
        return;
    }
    match u16::from_be_bytes([b[l3 - 2], b[l3 - 1]]) {
        0x0800 => {
            let Some(&v) = b.get(l3) else { return };
            let ihl = usize::from(v & 0x0f) * 4;
            if v >> 4 != 4 || ihl < 20 || b.len() < l3 + ihl {
                return;
            }
            let h = &mut b[l3..l3 + ihl];
            h[1] = dscp << 2 | (h[1] & 3);
            let sum = ipv4_checksum(h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        0x86dd => {
            if b.len() < l3 + 40 || b[l3] >> 4 != 6 {
                return;
            }
            let tc = (b[l3] & 0x0f) << 4 | b[l3 + 1] >> 4;
            let tc = dscp << 2 | (tc & 3);
            b[l3] = (b[l3] & 0xf0) | tc >> 4;
            b[l3 + 1] = (b[l3 + 1] & 0x0f) | (tc << 4);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_frame(tagged: bool) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if tagged {
            f.extend_from_slice(&[0x81, 0x00, 0x20, 0x0a]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = [
            0x45, 0x00, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let sum = ipv4_checksum(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn push_then_pop_gives_back_the_frame() {
        let f = ipv4_frame(false);
        let mut buf = [0u8; 128];
        let n = apply_edits(&f, [Edit::PushVlan(0x8100), Edit::VlanVid(7)], &mut buf).unwrap();
        assert_eq!(n, f.len() + 4);
        assert_eq!(&buf[12..16], &[0x81, 0x00, 0x00, 0x07]);
        assert_eq!(&buf[16..n], &f[12..]);
        let tagged = buf[..n].to_vec();
        let m = apply_edits(&tagged, [Edit::PopVlan], &mut buf).unwrap();
        assert_eq!(&buf[..m], &f[..]);
    }

    #[test]
    fn push_copies_the_outer_tci() {
        let f = ipv4_frame(true);
        let mut buf = [0u8; 128];
        let n = apply_edits(&f, [Edit::PushVlan(0x88a8), Edit::VlanPcp(5)], &mut buf).unwrap();
        assert_eq!(
            &buf[12..20],
            &[0x88, 0xa8, 0xa0, 0x0a, 0x81, 0x00, 0x20, 0x0a]
        );
        assert_eq!(n, f.len() + 4);
    }

    #[test]
    fn dscp_fixes_the_ipv4_checksum() {
        for tagged in [false, true] {
            let f = ipv4_frame(tagged);
            let mut buf = [0u8; 128];
            let n = apply_edits(&f, [Edit::IpDscp(46)], &mut buf).unwrap();
            let l3 = if tagged { 18 } else { 14 };
            assert_eq!(buf[l3 + 1], 46 << 2);
            let h = &buf[l3..l3 + 20];
            assert_eq!(u16::from_be_bytes([h[10], h[11]]), ipv4_checksum(h));
            assert_eq!(&buf[l3 + 20..n], &f[l3 + 20..]);
        }
    }

    #[test]
    fn a_small_buffer_is_an_error() {
        let f = ipv4_frame(false);
        let mut buf = vec![0u8; f.len()];
        assert_eq!(
            apply_edits(&f, [Edit::PushVlan(0x8100)], &mut buf),
            Err(EditError::BufferTooSmall {
                need: f.len() + 4,
                have: f.len()
            })
        );
        let mut tiny = [0u8; 4];
        assert!(apply_edits(&f, [], &mut tiny).is_err());
    }

    #[test]
    fn edits_that_do_not_apply_change_nothing() {
        let f = ipv4_frame(false);
        let mut buf = [0u8; 128];
        let n = apply_edits(
            &f,
            [Edit::PopVlan, Edit::VlanVid(3), Edit::VlanPcp(1)],
            &mut buf,
        )
        .unwrap();
        assert_eq!(&buf[..n], &f[..]);
        let arp = [0xffu8; 14];
        let n = apply_edits(&arp, [Edit::IpDscp(1)], &mut buf).unwrap();
        assert_eq!(&buf[..n], &arp[..]);
    }
}
