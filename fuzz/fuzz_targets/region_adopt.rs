//! A migrated passthrough region as the destination's daemon adopts it
//! (issue 19): a region of a fuzz-chosen geometry, written over with
//! fuzz-chosen bytes anywhere (what a torn or hostile copy can leave:
//! indexes, slots, the header, the CSB), then `Region::adopt_migrated`.
//! Nothing panics; afterwards every ring is one the switch's side can
//! attach to and serve: `hwcur`/`hwtail` are slot indexes, the
//! application's head is one `PortRing::app_head` accepts, every slot names
//! a buffer of the region with a length within it, the header is ours; and
//! a second adoption finds nothing to reset.
#![no_main]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_ring::{Dir, Geometry, PortRing, Region, RegionLayout};

#[derive(Arbitrary, Debug)]
struct Input {
    slots: u8,
    two_rings: bool,
    writes: Vec<(u32, Vec<u8>)>,
}

fuzz_target!(|input: Input| {
    let slots = 64 << (input.slots % 3);
    let rings = if input.two_rings { 2 } else { 1 };
    let g = Geometry {
        tx_rings: rings,
        rx_rings: rings,
        tx_slots: slots,
        rx_slots: slots,
        ..Geometry::default()
    };
    let Ok(layout) = RegionLayout::new(g, 1) else {
        return;
    };
    let Ok(region) = Region::create(layout, ["vale0:dst", ""]) else {
        return;
    };
    // Writes land where a copy would: mostly in the rings and the CSB.
    let hot = layout.buf_base as usize;
    for (off, data) in input.writes.iter().take(64) {
        let off = *off as usize % hot.max(1);
        region.scribble(off, &data[..data.len().min(256)]);
    }
    let rep = region.adopt_migrated(["vale0:dst", ""]);
    assert_eq!(region.header(), layout.header());
    assert_eq!(region.ni_name(0), b"vale0:dst");
    let region = Arc::new(region);
    for (dir, n) in [(Dir::Tx, rings), (Dir::Rx, rings)] {
        for r in 0..n {
            let csb = region.csb(0, dir, r);
            assert!(csb.hwcur().load(Ordering::Relaxed) < slots);
            assert!(csb.hwtail().load(Ordering::Relaxed) < slots);
            let port = PortRing::new(region.clone(), 0, dir, r);
            assert!(port.app_head().is_ok(), "{rep:?}");
            let ring = region.ring(0, dir, r);
            for s in 0..slots {
                let slot = ring.slot(s);
                assert!(region.buf_ofs(slot.buf_idx).is_some());
                assert!(u32::from(slot.len) <= g.buf_size);
            }
        }
    }
    assert_eq!(region.adopt_migrated(["vale0:dst", ""]).resets(), 0);
});
