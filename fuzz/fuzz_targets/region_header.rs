//! A region header as a client or a guest reads it from a memfd or a
//! device (`RegionLayout::from_header`), any 96 bytes: nothing panics, and
//! a header that is accepted describes a layout whose every end's
//! `netmap_if`, CSB and rings lie inside the region before the buffers,
//! whose ends pair up within the region, and whose buffers fit its size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringswitch_ring::layout::{RegionHeader, NIFP_SIZE};
use ringswitch_ring::{Dir, RegionLayout};

fuzz_target!(|data: [u8; 96]| {
    // The header as it sits in memory, field by field (little-endian).
    let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap());
    let h = RegionHeader {
        magic: *b"RNGSWTCH",
        version: u32_at(8),
        ends: u32_at(12),
        tx_rings: u32_at(16),
        rx_rings: u32_at(20),
        tx_slots: u32_at(24),
        rx_slots: u32_at(28),
        buf_size: u32_at(32),
        nbufs: u32_at(36),
        buf_base: u64_at(40),
        size: u64_at(48),
        nifp_ofs: [u64_at(56), u64_at(64)],
        csb_ofs: [u64_at(72), u64_at(80)],
        vnet_hdr_len: u32_at(88),
        reserved: u32_at(92),
    };
    // Also the header of a real layout with fuzz-chosen sizes, so that
    // accepted ones are reached.
    let made = RegionLayout::from_header(&h).or_else(|| {
        let g = ringswitch_ring::Geometry {
            tx_rings: 1 + data[16] as u32 % 16,
            rx_rings: 1 + data[20] as u32 % 16,
            tx_slots: 64 + u32::from(u16::from_le_bytes([data[24], data[25]])) % 4033,
            rx_slots: 64 + u32::from(u16::from_le_bytes([data[28], data[29]])) % 4033,
            buf_size: 128 + 64 * (u32::from(data[32]) % 32),
        };
        let l = match data[12] % 3 {
            0 => RegionLayout::new(g, 1 + u32::from(data[13] % 2)),
            _ => RegionLayout::with_pipes(g, u32::from(data[13] % 17)),
        }
        .ok()?;
        let back = RegionLayout::from_header(&l.header());
        assert_eq!(back, Some(l), "a layout's own header is accepted as it");
        back
    });
    let Some(l) = made else {
        return;
    };
    for e in 0..l.ends as usize {
        let g = l.end_geometry(e);
        assert!(l.nifp_at(e) + NIFP_SIZE <= l.buf_base);
        let last_rx = l.ring_ofs(e, Dir::Rx, g.rx_rings - 1);
        assert!(last_rx + 256 + 16 * g.rx_slots as usize <= l.buf_base);
        assert!(l.ktoa_ofs(e, Dir::Rx, g.rx_rings - 1) + 64 <= l.buf_base);
        let p = l.peer_end(e);
        assert!(p < l.ends as usize && l.peer_end(p) == e);
        assert!(l.first_buf(e, Dir::Rx, g.rx_rings - 1) + g.rx_slots <= l.nbufs);
    }
    assert!(l.buf_base + l.nbufs as usize * l.geometry.buf_size as usize <= l.size);
});
