//! The forwarding policies: the learning bridge (the default) and the hub,
//! both implementing [`Forwarding`].
//!
//! The MAC table is a fixed-size hash table of atomic entries, as VALE's: one
//! entry per bucket, a colliding address replaces the older one (which is
//! then flooded until it is learned again). Workers learn and look up
//! concurrently without locks; an entry is one 64-bit word, so a reader
//! never sees half of one.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::lookup::{Decision, Forwarding, MacEntry, PortIndex};

/// Buckets in the MAC table.
pub const MAC_TABLE_SIZE: usize = 8192;
/// Default age after which an entry is ignored.
pub const DEFAULT_AGE_S: u32 = 300;

struct Entry {
    /// `mac << 16 | (port + 1)`; 0 when empty.
    key: AtomicU64,
    /// Last time the address was seen as a source.
    seen_s: AtomicU32,
}

/// A learning bridge.
pub struct LearningBridge {
    table: Box<[Entry]>,
    age_s: u32,
}

// The table's key only needs to be unique per address, so take the bytes in
// native (little-endian) order: no byte swap on the data path.
#[inline(always)]
fn mac_u64(m: [u8; 6]) -> u64 {
    u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0])
}

fn u64_mac(v: u64) -> [u8; 6] {
    let b = v.to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

/// The hash of an address: a bucket index before the VLAN is added.
#[inline(always)]
fn mac_hash(mac: u64) -> usize {
    // Multiplicative hashing over the 48-bit address; the top bits are the
    // best mixed.
    let top = mac.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MAC_TABLE_SIZE.trailing_zeros());
    // Below MAC_TABLE_SIZE.
    usize::try_from(top).unwrap_or_default() & (MAC_TABLE_SIZE - 1)
}

/// The bucket of `mac` in VLAN `vid`: the address's hash plus the VLAN,
/// modulo the table size. The table has more buckets (8192) than there
/// are VLANs (4096), so a bucket and an address determine the VLAN: an
/// entry holds only the address and the port, one word, and still matches
/// one (VLAN, address) pair exactly.
#[inline(always)]
fn bucket(mac: u64, vid: u16) -> usize {
    (mac_hash(mac) + usize::from(vid & 0xfff)) & (MAC_TABLE_SIZE - 1)
}

/// The VLAN of an entry for `mac` found in bucket `b` (see [`bucket`]).
fn vid_of(mac: u64, b: usize) -> u16 {
    let v = b.wrapping_sub(mac_hash(mac)) & (MAC_TABLE_SIZE - 1);
    u16::try_from(v).unwrap_or_default()
}
const _: () = assert!(MAC_TABLE_SIZE > 4096 && MAC_TABLE_SIZE.is_power_of_two());

/// Whether an address is multicast or broadcast (never learned, always
/// flooded).
#[inline(always)]
pub fn is_multicast(m: [u8; 6]) -> bool {
    m[0] & 1 != 0
}

impl LearningBridge {
    /// A bridge whose entries expire after `age_s` seconds.
    pub fn new(age_s: u32) -> LearningBridge {
        let table = (0..MAC_TABLE_SIZE)
            .map(|_| Entry {
                key: AtomicU64::new(0),
                seen_s: AtomicU32::new(0),
            })
            .collect();
        LearningBridge { table, age_s }
    }

    fn learn(&self, src: [u8; 6], vid: u16, port: PortIndex, now_s: u32) {
        let mac = mac_u64(src);
        let e = &self.table[bucket(mac, vid)];
        let key = (mac << 16) | (port as u64 + 1);
        // Relaxed throughout: an entry is a hint; a racing reader seeing the
        // old or the new value forwards correctly either way (or floods).
        if e.key.load(Ordering::Relaxed) != key {
            e.key.store(key, Ordering::Relaxed);
        }
        if e.seen_s.load(Ordering::Relaxed) != now_s {
            e.seen_s.store(now_s, Ordering::Relaxed);
        }
    }

    fn lookup(&self, dst: [u8; 6], vid: u16, now_s: u32) -> Option<PortIndex> {
        let mac = mac_u64(dst);
        let e = &self.table[bucket(mac, vid)];
        let key = e.key.load(Ordering::Relaxed);
        if key == 0 || key >> 16 != mac {
            return None;
        }
        if now_s.wrapping_sub(e.seen_s.load(Ordering::Relaxed)) > self.age_s {
            return None;
        }
        PortIndex::try_from((key & 0xffff) - 1).ok()
    }
}

impl Default for LearningBridge {
    fn default() -> Self {
        LearningBridge::new(DEFAULT_AGE_S)
    }
}

impl Forwarding for LearningBridge {
    #[inline]
    fn decide(
        &self,
        dst: [u8; 6],
        src: [u8; 6],
        vid: u16,
        src_port: PortIndex,
        learn: bool,
        now_s: u32,
    ) -> Decision {
        if learn && !is_multicast(src) {
            self.learn(src, vid, src_port, now_s);
        }
        if is_multicast(dst) {
            return Decision::Flood;
        }
        match self.lookup(dst, vid, now_s) {
            Some(p) if p == src_port => Decision::Drop,
            Some(p) => Decision::Port(p),
            None => Decision::Flood,
        }
    }

    fn forget_port(&self, port: PortIndex) {
        for e in self.table.iter() {
            let k = e.key.load(Ordering::Relaxed);
            if k != 0 && (k & 0xffff) == port as u64 + 1 {
                e.key.store(0, Ordering::Relaxed);
            }
        }
    }

    fn entries(&self, now_s: u32) -> Vec<MacEntry> {
        self.table
            .iter()
            .enumerate()
            .filter_map(|(b, e)| {
                let k = e.key.load(Ordering::Relaxed);
                let age = now_s.wrapping_sub(e.seen_s.load(Ordering::Relaxed));
                let port = PortIndex::try_from((k & 0xffff).checked_sub(1)?).ok()?;
                (k != 0 && age <= self.age_s).then(|| MacEntry {
                    mac: u64_mac(k >> 16),
                    vid: vid_of(k >> 16, b),
                    port,
                    age_s: age,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];
    const BCAST: [u8; 6] = [0xff; 6];
    const MCAST: [u8; 6] = [0x01, 0x00, 0x5e, 0, 0, 1];

    #[test]
    fn learns_then_forwards_unicast() {
        let br = LearningBridge::default();
        assert_eq!(
            br.decide(B, A, 0, 1, true, 10),
            Decision::Flood,
            "B unknown yet"
        );
        assert_eq!(
            br.decide(A, B, 0, 2, true, 10),
            Decision::Port(1),
            "A was learned on 1"
        );
        assert_eq!(
            br.decide(B, A, 0, 1, true, 10),
            Decision::Port(2),
            "B was learned on 2"
        );
    }

    #[test]
    fn floods_broadcast_and_multicast_and_never_learns_them() {
        let br = LearningBridge::default();
        assert_eq!(br.decide(BCAST, A, 0, 1, true, 0), Decision::Flood);
        assert_eq!(br.decide(MCAST, A, 0, 1, true, 0), Decision::Flood);
        br.decide(A, MCAST, 0, 3, true, 0);
        assert!(
            br.entries(0).iter().all(|e| e.mac != MCAST),
            "multicast source not learned"
        );
    }

    #[test]
    fn never_back_to_source() {
        let br = LearningBridge::default();
        br.decide(BCAST, A, 0, 1, true, 0);
        br.decide(BCAST, B, 0, 1, true, 0);
        assert_eq!(br.decide(B, A, 0, 1, true, 0), Decision::Drop);
    }

    #[test]
    fn moves_when_seen_elsewhere() {
        let br = LearningBridge::default();
        br.decide(BCAST, A, 0, 1, true, 0);
        assert_eq!(br.decide(A, B, 0, 2, true, 0), Decision::Port(1));
        br.decide(BCAST, A, 0, 3, true, 1);
        assert_eq!(br.decide(A, B, 0, 2, true, 1), Decision::Port(3));
    }

    #[test]
    fn ages_out() {
        let br = LearningBridge::new(300);
        br.decide(BCAST, A, 0, 1, true, 100);
        assert_eq!(
            br.decide(A, B, 0, 2, true, 400),
            Decision::Port(1),
            "300 s old: still valid"
        );
        assert_eq!(
            br.decide(A, B, 0, 2, true, 401),
            Decision::Flood,
            "aged out"
        );
        assert!(br.entries(401).iter().all(|e| e.mac != A));
    }

    #[test]
    fn no_learn_flag_and_forget() {
        let br = LearningBridge::default();
        br.decide(BCAST, A, 0, 1, false, 0);
        assert_eq!(
            br.decide(A, B, 0, 2, true, 0),
            Decision::Flood,
            "not learned"
        );
        br.decide(BCAST, A, 0, 1, true, 0);
        br.forget_port(1);
        assert_eq!(
            br.decide(A, B, 0, 2, true, 0),
            Decision::Flood,
            "forgotten with its port"
        );
        assert_eq!(br.entries(0).len(), 1, "B on port 2 remains");
    }
}

/// A hub: every frame goes to every other port. With two ports it is a
/// wire, which is what an application opening a NIC directly
/// (`netmap:eth0`) gets: every frame of the interface, whatever its
/// addresses, and every frame it sends goes out.
#[derive(Debug, Default)]
pub struct Hub;

impl Forwarding for Hub {
    fn decide(&self, _: [u8; 6], _: [u8; 6], _: u16, _: PortIndex, _: bool, _: u32) -> Decision {
        Decision::Flood
    }

    fn forget_port(&self, _: PortIndex) {}

    fn entries(&self, _: u32) -> Vec<MacEntry> {
        Vec::new()
    }
}
