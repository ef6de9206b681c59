//! Forwarding between two ports, as netmap's `bridge`: zero copy (buffer
//! swaps) when both ports live in one region, a copy otherwise.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ringswitch_ring::poll;

use crate::{ClientError, Port, WaitMode};

/// What a bridge run moved.
#[derive(Clone, Copy, Debug, Default)]
pub struct BridgeStats {
    /// Packets moved from port 0 to port 1, and from 1 to 0.
    pub forward: [u64; 2],
    /// Whether buffers were swapped instead of copied.
    pub zero_copy: bool,
}

/// Moves up to `batch` packets from `src`'s RX rings to `dst`'s TX rings.
/// Returns packets moved and whether `dst` was the bottleneck.
pub fn move_batch(src: &mut Port, dst: &mut Port, batch: u32, zero_copy: bool) -> (u64, bool) {
    let rings = src.geometry().rx_rings.min(dst.geometry().tx_rings) as usize;
    let mut moved = 0u64;
    let mut blocked = false;
    for r in 0..rings {
        src.rxsync(r);
        dst.txsync(r);
        let n = {
            let mut rx = src.rx(r);
            let mut tx = dst.tx(r);
            let n = rx.space().min(tx.space()).min(batch);
            if rx.space() > 0 && tx.space() == 0 {
                blocked = true;
            }
            for k in 0..n {
                let (Some(mut s), Some(mut d)) = (rx.slot(k), tx.slot(k)) else {
                    break;
                };
                let len = s.len();
                if zero_copy {
                    let sb = s.buf_idx();
                    let db = d.buf_idx();
                    if d.set_buf_idx(sb) {
                        s.set_buf_idx(db);
                    }
                } else {
                    let mut copied = false;
                    {
                        let p = s.payload();
                        if d.write_at(0, p) {
                            copied = true;
                        }
                    }
                    if !copied {
                        d.set_len(0);
                        continue;
                    }
                }
                d.set_len_flags(len, d.flags() & ringswitch_ring::layout::NS_BUF_CHANGED);
            }
            rx.advance(n);
            tx.advance(n);
            n
        };
        dst.txsync(r);
        src.rxsync(r);
        moved += n as u64;
    }
    (moved, blocked)
}

/// Bridges `a` and `b` until `stop` is set.
pub fn run(
    a: &mut Port,
    b: &mut Port,
    batch: u32,
    mode: WaitMode,
    stop: &AtomicBool,
) -> Result<BridgeStats, ClientError> {
    let zero_copy = a.shares_memory_with(b);
    a.set_wait_mode(mode);
    b.set_wait_mode(mode);
    let mut st = BridgeStats {
        zero_copy,
        ..Default::default()
    };
    let mut adapt = ringswitch_ring::AdaptiveWait::new();
    while !stop.load(Ordering::Acquire) {
        let (m0, blk0) = move_batch(a, b, batch, zero_copy);
        let (m1, blk1) = move_batch(b, a, batch, zero_copy);
        st.forward[0] += m0;
        st.forward[1] += m1;
        if m0 + m1 > 0 {
            continue;
        }
        if mode == WaitMode::Busy {
            std::hint::spin_loop();
            continue;
        }
        if mode == WaitMode::Adaptive && adapt.spin(|| a.ready(blk1, true) || b.ready(blk0, true)) {
            continue;
        }
        // Ask both ports for an interrupt (RX, and TX space where blocked),
        // then sleep on both descriptors at once.
        let ra = a.prepare_wait(blk1, true);
        let rb = b.prepare_wait(blk0, true);
        if !(ra || rb) {
            let mut fds = [
                poll::watch(a.poll_fd().as_fd().as_raw_fd(), libc::POLLIN),
                poll::watch(b.poll_fd().as_fd().as_raw_fd(), libc::POLLIN),
            ];
            // A bounded timeout so `stop` is seen; woken or not, both
            // ports are looked at again.
            let t0 = std::time::Instant::now();
            let woken =
                poll::poll_fds(&mut fds, Some(Duration::from_millis(200))).is_ok_and(|n| n > 0);
            adapt.slept(t0.elapsed(), woken);
        }
        a.after_wait()?;
        b.after_wait()?;
    }
    Ok(st)
}
