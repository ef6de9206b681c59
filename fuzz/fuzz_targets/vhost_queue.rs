//! The vhost descriptor-chain walk and RX fill over guest memory a hostile
//! guest writes. Guest memory is two regions mapped with PROT_NONE guard
//! pages on both sides, so any read or write past a region faults at once
//! (ASan cannot see into these mappings; the guard pages can). A queue
//! pair is configured with fuzz-chosen features, queue size and ring
//! addresses; operations then write descriptors (direct, chained,
//! indirect, pointing anywhere), offer them, scribble guest memory, drain
//! TX and fill RX (with and without MRG_RXBUF), and flip notifications.
//! Every chain taken is completed (bad ones with length 0, counted), used
//! indexes stay consistent, and nothing panics.
#![no_main]

use std::fs::File;
use std::os::fd::FromRawFd;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_frame::{FrameQueue, Stage, FRAME_MAX, FRAME_MIN};
use ringswitch_vhost::hdr::feature;
use ringswitch_vhost::vm_memory::mmap::MmapRegion;
use ringswitch_vhost::vm_memory::{Bytes, GuestAddress, GuestMemoryMmap, GuestRegionMmap};
use ringswitch_vhost::{QueueKind, VirtioNetHdr, VirtioNetPort};

const PAGE: usize = 4096;
const A_GPA: u64 = 0;
const A_LEN: usize = 0x1_0000;
const B_GPA: u64 = 0x10_0000;
const B_LEN: usize = 0x4000;

/// A guest memory region with a PROT_NONE guard page on each side.
struct Guarded {
    base: *mut u8,
    total: usize,
}

impl Guarded {
    fn new(len: usize) -> Guarded {
        let total = len + 2 * PAGE;
        // SAFETY: a fresh anonymous mapping, no address hint.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap");
        let base = base.cast::<u8>();
        // SAFETY: the middle of the mapping just made.
        let r = unsafe {
            libc::mprotect(
                base.add(PAGE).cast(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        assert_eq!(r, 0, "mprotect");
        Guarded { base, total }
    }

    fn region(&self, gpa: u64) -> GuestRegionMmap {
        let len = self.total - 2 * PAGE;
        // SAFETY: the pointer is the readable and writable middle of a
        // mapping this value owns and unmaps only after every user of the
        // guest memory (the port) is dropped; the region does not own it.
        let m = unsafe {
            MmapRegion::build_raw(
                self.base.add(PAGE),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            )
        }
        .expect("raw region");
        GuestRegionMmap::new(m, GuestAddress(gpa)).expect("guest region")
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; nothing uses it any more.
        unsafe { libc::munmap(self.base.cast(), self.total) };
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Addr {
    A(u16),
    B(u16),
    Raw(u64),
}

impl Addr {
    fn gpa(self) -> u64 {
        match self {
            Addr::A(x) => A_GPA + u64::from(x),
            // Up to 2 KiB past the end of B: across the edge.
            Addr::B(x) => B_GPA + u64::from(x) % (B_LEN as u64 + 2048),
            Addr::Raw(x) => x,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// Writes descriptor `i` of a queue's table (or of an indirect table at `table`).
    Desc {
        tx: bool,
        table: Option<Addr>,
        i: u16,
        addr: Addr,
        len: u16,
        big: bool,
        flags: u16,
        next: u16,
    },
    /// Offers chain `head` in a queue's available ring.
    Offer {
        tx: bool,
        head: u16,
    },
    /// Sets a queue's available index directly.
    AvailIdx {
        tx: bool,
        idx: u16,
    },
    /// Sets the `used_event` field (EVENT_IDX).
    UsedEvent {
        tx: bool,
        v: u16,
    },
    /// Writes bytes anywhere in guest memory.
    Poke {
        at: Addr,
        data: Vec<u8>,
    },
    /// The switch drains up to `max` TX frames.
    DrainTx {
        max: u8,
        stop_after: u8,
    },
    /// The switch takes up to `max` TX frames onto its stage, as a worker
    /// does (`FrameQueue::take_batch`).
    TakeTx {
        max: u8,
    },
    /// The switch delivers a frame into the guest's RX buffers.
    Rx {
        len: u16,
        fill: u8,
        deferred: bool,
        flags: u8,
        gso_type: u8,
        gso_size: u16,
    },
    /// Ends a batch: flush and interrupt.
    Notify,
    /// Notification toggles the worker makes before it sleeps.
    EnableTx {
        more: Option<u16>,
    },
    DisableTx,
    /// The frontend reconfigures a vring.
    Restart {
        tx: bool,
        base: u16,
        size_log: u8,
    },
    /// The frontend stops a vring (GET_VRING_BASE).
    Stop {
        tx: bool,
    },
    /// SET_FEATURES mid-run.
    Features {
        bits: u64,
    },
    /// SET_MEM_TABLE again with the same memory (vrings re-resolved).
    Remap {
        drop_b: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    features: u64,
    size_log: u8,
    rx_base: u16,
    tx_base: u16,
    ops: Vec<Op>,
}

struct Layout {
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
}

fn layout(base: u16, size: u16) -> Layout {
    let desc = u64::from(base & !15);
    let avail = desc + 16 * u64::from(size);
    let used = (avail + 6 + 2 * u64::from(size) + 3) & !3;
    Layout {
        size,
        desc,
        avail,
        used,
    }
}

fn eventfd() -> Option<File> {
    // SAFETY: eventfd with valid flags; the new descriptor is owned by the File.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    // SAFETY: a fresh descriptor nobody else owns.
    (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
}

fn start(port: &mut VirtioNetPort, kind: QueueKind, l: &Layout, base: u16) {
    port.set_vring_size(kind, l.size);
    port.set_vring_addr(kind, l.desc, l.avail, l.used);
    port.set_vring_base(kind, base);
    port.set_vring_enabled(kind, true);
    port.start_vring(kind, None);
    port.set_vring_call(kind, eventfd())
        .expect("a fresh eventfd is a valid call fd");
}

fuzz_target!(|inp: Input| {
    let a = Guarded::new(A_LEN);
    let b = Guarded::new(B_LEN);
    let mem =
        GuestMemoryMmap::from_regions(vec![a.region(A_GPA), b.region(B_GPA)]).expect("memory");
    let mem_a_only = GuestMemoryMmap::from_regions(vec![a.region(A_GPA)]).expect("memory");
    let mut port = VirtioNetPort::new(0);
    port.set_memory(Some(mem.clone()));
    port.set_features(inp.features & feature::OFFERED);
    let size = 1u16 << (inp.size_log % 9);
    let mut rx = layout(inp.rx_base, size);
    let mut tx = layout(inp.tx_base, size);
    start(&mut port, QueueKind::Rx, &rx, 0);
    start(&mut port, QueueKind::Tx, &tx, 0);
    let frame_buf = vec![0u8; 65_600];
    // Room for two of the largest frames: a batch also stops on a full stage.
    let mut stage = Stage::with_bytes(2 * FRAME_MAX + 1, 256);
    for op in inp.ops.iter().take(200) {
        match op {
            Op::Desc {
                tx: t,
                table,
                i,
                addr,
                len,
                big,
                flags,
                next,
            } => {
                let l = if *t { &tx } else { &rx };
                let base = table.map(Addr::gpa).unwrap_or(l.desc);
                let at = base.wrapping_add(16 * u64::from(*i % 512));
                let len = if *big {
                    u32::from(*len) << 8
                } else {
                    u32::from(*len)
                };
                let mut d = [0u8; 16];
                d[..8].copy_from_slice(&addr.gpa().to_le_bytes());
                d[8..12].copy_from_slice(&len.to_le_bytes());
                d[12..14].copy_from_slice(&(flags & 7).to_le_bytes());
                d[14..16].copy_from_slice(&next.to_le_bytes());
                let _ = mem.write_slice(&d, GuestAddress(at));
            }
            Op::Offer { tx: t, head } => {
                let l = if *t { &tx } else { &rx };
                let idx: u16 = mem.read_obj(GuestAddress(l.avail + 2)).unwrap_or(0);
                let slot = u64::from(idx % l.size);
                let _ = mem.write_obj(*head % l.size, GuestAddress(l.avail + 4 + 2 * slot));
                let _ = mem.write_obj(idx.wrapping_add(1), GuestAddress(l.avail + 2));
            }
            Op::AvailIdx { tx: t, idx } => {
                let l = if *t { &tx } else { &rx };
                let _ = mem.write_obj(*idx, GuestAddress(l.avail + 2));
            }
            Op::UsedEvent { tx: t, v } => {
                let l = if *t { &tx } else { &rx };
                let _ = mem.write_obj(*v, GuestAddress(l.avail + 4 + 2 * u64::from(l.size)));
            }
            Op::Poke { at, data } => {
                let _ = mem.write_slice(&data[..data.len().min(64)], GuestAddress(at.gpa()));
            }
            Op::DrainTx { max, stop_after } => {
                let mut seen = 0usize;
                let mut copy = [0u8; 256];
                let taken = port.tx_batch(usize::from(*max), |f, _h| {
                    let n = f.copy_to(&mut copy);
                    assert!(n <= f.len());
                    let via: usize = f.slices().map(|s| s.len()).sum();
                    assert_eq!(via, f.len(), "the slices cover the frame");
                    let off = f.len() / 2;
                    let m = f.copy_range_to(off, &mut copy);
                    assert!(m <= f.len() - off);
                    seen += 1;
                    seen < usize::from(*stop_after).max(1)
                });
                assert!(taken <= usize::from(*max).min(usize::from(tx.size)));
                assert!(seen <= taken);
            }
            Op::TakeTx { max } => {
                stage.clear();
                let taken = FrameQueue::take_batch(&mut port, usize::from(*max), &mut stage);
                assert!(taken.frames <= usize::from(*max).min(usize::from(tx.size)));
                // Every chain taken is on the stage, counted short or long
                // by it, or refused as malformed by the queue.
                let staged = stage.frames().len() as u64 + stage.short() + stage.long();
                assert_eq!(staged + taken.malformed, taken.frames as u64);
                for f in stage.frames() {
                    assert_eq!(stage.bytes(f).len(), f.len as usize);
                    assert!((FRAME_MIN..=FRAME_MAX).contains(&(f.len as usize)));
                }
                taken.wake.send();
            }
            Op::Rx {
                len,
                fill,
                deferred,
                flags,
                gso_type,
                gso_size,
            } => {
                let mut f = frame_buf[..usize::from(*len)].to_vec();
                f.iter_mut().for_each(|b| *b = *fill);
                let h = VirtioNetHdr {
                    flags: *flags,
                    gso_type: *gso_type,
                    gso_size: *gso_size,
                    ..Default::default()
                };
                let before = port.rx_space();
                let r = if *deferred {
                    port.rx_push_deferred(&h, &f)
                } else {
                    port.rx_push(&h, &f)
                };
                if r.is_ok() {
                    assert!(before > 0, "a frame went into an RX queue with no buffers");
                }
            }
            Op::Notify => {
                port.rx_flush();
                port.notify_rx().send();
                port.notify_tx_done().send();
            }
            Op::EnableTx { more } => {
                let _ = match more {
                    Some(m) => port.enable_tx_notifications_after(*m),
                    None => port.enable_tx_notifications(),
                };
            }
            Op::DisableTx => port.disable_tx_notifications(),
            Op::Restart {
                tx: t,
                base,
                size_log,
            } => {
                let size = 1u16 << (size_log % 9);
                let kind = if *t { QueueKind::Tx } else { QueueKind::Rx };
                let l = if *t { &mut tx } else { &mut rx };
                *l = layout(if *t { inp.tx_base } else { inp.rx_base }, size);
                start(&mut port, kind, l, *base);
            }
            Op::Stop { tx: t } => {
                port.stop_vring(if *t { QueueKind::Tx } else { QueueKind::Rx });
            }
            Op::Features { bits } => port.set_features(bits & feature::OFFERED),
            Op::Remap { drop_b } => {
                let m = if *drop_b {
                    mem_a_only.clone()
                } else {
                    mem.clone()
                };
                port.set_memory(Some(m));
            }
        }
        let _ = port.tx_pending();
        assert!(port.rx_space() <= usize::from(rx.size));
    }
    port.reset();
    drop(port);
    drop(mem);
    drop(mem_a_only);
    drop((a, b));
});
