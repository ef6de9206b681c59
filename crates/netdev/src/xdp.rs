//! AF_XDP sockets: a NIC's queues in our memory.
//!
//! libxdp (Debian's libxdp 1.3, over libbpf) does the plumbing that needs
//! BPF: the first socket on an interface makes it attach its default
//! redirect program (`xsk_def_prog`, through its multi-program dispatcher
//! where bpffs and the kernel allow, else alone), each socket goes into the
//! program's XSK map at its queue id, and the program is removed when the
//! interface's last socket is deleted (libxdp counts them in the program's
//! own data). No BPF is built here.
//!
//! What happens per frame is here, in Rust: the four rings each socket
//! shares with the kernel (fill, RX, TX, completion) are driven with the
//! kernel's producer/consumer protocol (`xdp/ring.rs`), and every
//! descriptor the kernel hands back is checked against the queue's UMEM
//! before it is followed (`xdp/queue.rs`). need_wakeup is on, so an idle
//! queue costs no system call: the kernel is kicked only when it says it
//! sleeps (or, in copy mode, when frames wait to be sent, since they only
//! leave in `sendto`).
//!
//! Each queue has its own UMEM: `2 * ring_size` frames of 2048 bytes (4096
//! when the MTU needs it), half for RX, half for TX.
//!
//! [`detach_stale`] removes the program a process that died left behind
//! (libxdp's count of sockets never went back to zero), and only that one.

mod ffi;
mod log;
mod prog;
mod queue;
mod ring;

use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use prog::detach_stale;

use queue::{Geometry, OpenError, XdpQueue};

use ringswitch_frame::SharedQueue;

use crate::{iface, DevError, Driver, Nic, NicConfig};

/// Which XDP hook the redirect program goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`); sockets use zero copy where
    /// the driver can.
    Native,
    /// On the skb path (`XDP_FLAGS_SKB_MODE`), for any interface; sockets
    /// copy.
    Generic,
}

/// Capabilities XDP needs, for [`DevError::Permission`]: libxdp reads back
/// the program and maps it attached (`BPF_PROG_GET_FD_BY_ID`), which
/// `CAP_BPF` alone does not allow (docs/systemd.md).
const NEEDS: &str = "CAP_NET_ADMIN and CAP_SYS_ADMIN";

/// An Ethernet header and one VLAN tag: a frame is this much longer than
/// the MTU.
const ETH_VLAN_HLEN: u32 = 14 + 4;

/// Ring sizes accepted (descriptors, a power of two).
const RING_MIN: u32 = 64;
const RING_MAX: u32 = 16384;

/// libxdp keeps process-wide state (its bpffs and feature caches, the
/// lookup of an interface's program before attaching it) without locks of
/// its own: every call that attaches, detaches or inspects goes through
/// this lock. Never taken on the data path. Re-entrant on one thread: a
/// failed open drops what it opened (which takes the lock) while holding
/// it.
fn libxdp_lock() -> LibxdpGuard {
    static LOCK: Mutex<()> = Mutex::new(());
    if LIBXDP_HELD.with(Cell::get) {
        return LibxdpGuard(None);
    }
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    LIBXDP_HELD.with(|h| h.set(true));
    LibxdpGuard(Some(g))
}

thread_local! {
    /// This thread holds the libxdp lock.
    static LIBXDP_HELD: Cell<bool> = const { Cell::new(false) };
}

/// The libxdp lock, or nothing if this thread held it already.
struct LibxdpGuard(Option<MutexGuard<'static, ()>>);

impl Drop for LibxdpGuard {
    fn drop(&mut self) {
        if self.0.is_some() {
            LIBXDP_HELD.with(|h| h.set(false));
        }
    }
}

/// Opens one AF_XDP socket per queue of `cfg.ifname` (every RX/combined
/// queue it has, or `cfg.queues`), with libxdp's program attached in
/// `mode`. Dropping every queue (the whole [`Nic`]) removes the program.
pub fn open(cfg: &NicConfig, mode: XdpMode) -> Result<Nic, DevError> {
    let ifname = cfg.ifname.as_str();
    iface::validate_name(ifname)?;
    let ifindex = iface::ifindex(ifname)?;
    log::install();

    let have = queue_count(ifname)?;
    let n = match cfg.queues {
        None => have,
        Some(q) if (1..=have).contains(&q) => q,
        Some(q) => {
            return Err(DevError::Unsupported {
                name: ifname.to_string(),
                what: "that number of queues",
                why: format!("{q} asked, and it has {have} receive queue(s)"),
            })
        }
    };
    let ring = cfg.ring_size;
    iface::check_ring_size(
        ifname,
        ring,
        RING_MIN..=RING_MAX,
        "AF_XDP rings",
        "descriptors",
    )?;
    let mtu = iface::mtu(ifname)?;
    let frame_size = frame_size_for(mtu).ok_or_else(|| DevError::Unsupported {
        name: ifname.to_string(),
        what: "AF_XDP",
        why: format!(
            "its MTU of {mtu} does not fit a 4096-byte frame (multi-buffer AF_XDP is not used)"
        ),
    })?;
    let geo = Geometry {
        ring,
        frame_size,
        max_frame: (mtu + ETH_VLAN_HLEN).min(frame_size),
    };
    raise_memlock(u64::from(n) * 2 * u64::from(ring) * u64::from(frame_size));

    let mut queues: Vec<SharedQueue> = Vec::with_capacity(n as usize);
    let opened = {
        let _g = libxdp_lock();
        open_queues(ifname, ifindex, mode, n, geo, &mut queues)
    };
    // On error the queues opened so far drop with `queues`, and the last
    // one removes the program.
    let driver = opened?;
    let reason = match driver {
        Driver::XdpNativeZeroCopy => format!("native XDP with zero-copy AF_XDP sockets on {n} queue(s)"),
        Driver::XdpNative => format!(
            "native XDP on {n} queue(s), copying frames: the driver does not do zero-copy AF_XDP here"
        ),
        _ => format!("generic XDP on {n} queue(s), copying frames"),
    };
    Ok(Nic {
        ifname: ifname.to_string(),
        ifindex,
        queues,
        driver,
        reason,
    })
}

/// Opens `n` queues into `out`; returns how they are driven (queue 0's
/// way: every queue of one interface is driven the same way in practice).
fn open_queues(
    ifname: &str,
    ifindex: u32,
    mode: XdpMode,
    n: u32,
    geo: Geometry,
    out: &mut Vec<SharedQueue>,
) -> Result<Driver, DevError> {
    let before = prog::check_before_attach(ifname, ifindex, mode)?;
    let mut driver = None;
    for q in 0..n {
        let x = match open_queue(ifname, q, mode, geo) {
            Ok(x) => x,
            Err(e) => {
                // A socket that failed after libxdp attached its program
                // (it attaches, then looks the program up) leaves it
                // there, and no queue of ours would remove it on drop.
                if out.is_empty() {
                    if let Err(d) = prog::remove_failed_attach(ifname, ifindex, mode, before) {
                        tracing::warn!(ifname, error = %d, "cannot remove the AF_XDP program a failed attach left");
                    }
                }
                return Err(e);
            }
        };
        let d = x.driver;
        if *driver.get_or_insert(d) != d {
            tracing::warn!(
                ifname,
                queue = q,
                driver = d.as_str(),
                "queue driven differently from queue 0"
            );
        }
        out.push(Arc::new(Mutex::new(x)));
    }
    Ok(driver.unwrap_or(match mode {
        XdpMode::Native => Driver::XdpNative,
        XdpMode::Generic => Driver::XdpGeneric,
    }))
}

/// Opens one queue, waiting out a socket on it that is still being
/// released: closing an AF_XDP socket frees its hold on the queue in a
/// kernel worker, after `close` returns.
fn open_queue(ifname: &str, q: u32, mode: XdpMode, geo: Geometry) -> Result<XdpQueue, DevError> {
    const TRIES: u32 = 40;
    const PAUSE: Duration = Duration::from_millis(25);
    let mut tries = 0;
    loop {
        tries += 1;
        match XdpQueue::open(ifname, q, mode, geo) {
            Ok(x) => return Ok(x),
            Err(OpenError::QueueBusy(e)) if tries < TRIES => {
                tracing::debug!(ifname, queue = q, error = %e, "queue busy; retrying");
                std::thread::sleep(PAUSE);
            }
            Err(OpenError::QueueBusy(e) | OpenError::Other(e)) => return Err(e),
        }
    }
}

/// The UMEM frame size for an MTU: the kernel puts a received frame
/// `XDP_PACKET_HEADROOM` (256) bytes into its buffer, and the frame is the
/// MTU plus an Ethernet header and a VLAN tag.
fn frame_size_for(mtu: u32) -> Option<u32> {
    let need = mtu.checked_add(ETH_VLAN_HLEN + ffi::XDP_PACKET_HEADROOM)?;
    [2048, 4096].into_iter().find(|&fs| need <= fs)
}

/// RX and combined queues the interface has now, from the ethtool channels
/// ioctl (which answers in the calling thread's network namespace, where
/// the sockets will be; sysfs shows the namespace it was mounted in). Falls
/// back to sysfs for a driver without channels, and to one queue (as libxdp
/// assumes) for an interface sysfs does not show.
fn queue_count(ifname: &str) -> Result<u32, DevError> {
    match iface::channel_rx_queues(ifname)? {
        Some(n) => Ok(n),
        None => match iface::sysfs_rx_queues(ifname) {
            Err(DevError::NoSuchInterface { .. }) => Ok(1),
            r => r,
        },
    }
}

/// UMEM pages count against RLIMIT_MEMLOCK unless the process has
/// CAP_IPC_LOCK (BPF maps no longer do: memory cgroups account them). Raises
/// the soft limit as far as allowed when it is below `bytes`; an
/// insufficient limit then shows as an error registering the UMEM.
fn raise_memlock(bytes: u64) {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct, which lives across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur) } != 0 {
        return;
    }
    if cur.rlim_cur == libc::RLIM_INFINITY || cur.rlim_cur >= bytes {
        return;
    }
    let raised = [libc::RLIM_INFINITY, cur.rlim_max]
        .into_iter()
        .filter(|&to| to > cur.rlim_cur)
        .find(|&to| {
            let new = libc::rlimit {
                rlim_cur: to,
                rlim_max: to.max(cur.rlim_max),
            };
            // SAFETY: setrlimit reads the struct, which lives across the
            // call.
            unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &new) == 0 }
        });
    match raised {
        Some(to) => tracing::debug!(
            from = cur.rlim_cur,
            to,
            "raised RLIMIT_MEMLOCK for the UMEM"
        ),
        None => tracing::debug!(
            limit = cur.rlim_cur,
            bytes,
            "RLIMIT_MEMLOCK may be too low for the UMEM"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_sizes() {
        assert_eq!(frame_size_for(1500), Some(2048));
        assert_eq!(frame_size_for(2048 - 256 - 18), Some(2048));
        assert_eq!(frame_size_for(2048 - 256 - 17), Some(4096));
        assert_eq!(frame_size_for(3000), Some(4096));
        assert_eq!(frame_size_for(9000), None);
        assert_eq!(frame_size_for(u32::MAX), None);
    }
}
