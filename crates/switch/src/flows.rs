//! A switch's OpenFlow side, shared between its workers and the daemon's
//! OpenFlow connections: the flow tables (`ringswitch_flow::FlowTables`)
//! behind a lock that workers take only when their flow cache misses, the
//! tables' version readable without it, the fail mode, and the bounded
//! queue of frames for the controller (PACKET_IN) with a doorbell.
//!
//! The ports' OpenFlow numbers are the switch's port table's
//! (`crate::numbers`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};

use ringswitch_flow::{Config, FlowTables};
use ringswitch_ring::EventFd;

/// Frames waiting for the controller, at most.
pub const PACKET_IN_QUEUE: usize = 256;

/// Bits of a published version that count the tables' changes; the bits
/// above say whose tables they are (see [`Flows::version`]).
const VERSION_BITS: u32 = 40;

/// Numbers the `Flows` of this process, so that their versions differ.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the switch does while no controller is connected (as OVS's
/// `fail_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FailMode {
    /// The flow tables keep deciding: flows stay, misses go where the
    /// table-miss entries say.
    #[default]
    Secure,
    /// The learning bridge decides, as a switch without flow tables.
    Standalone,
}

/// A frame for the controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketIn {
    /// OpenFlow port it came in on.
    pub in_port: u32,
    /// OFPR_NO_MATCH (0), OFPR_ACTION (1) or OFPR_INVALID_TTL (2).
    pub reason: u8,
    /// The table that sent it.
    pub table_id: u8,
    /// The cookie of the flow that sent it.
    pub cookie: u64,
    /// The pipeline's metadata at that point.
    pub metadata: u64,
    /// The frame's full length.
    pub total_len: u32,
    /// The frame, or its first `max_len` bytes.
    pub data: Vec<u8>,
}

/// The bounded queue of frames for the controller: entries are reused, so
/// a steady stream allocates nothing once every entry has held a frame
/// that long.
#[derive(Default)]
struct Queue {
    items: VecDeque<PacketIn>,
    spare: Vec<PacketIn>,
}

/// A switch's flow tables and what goes with them.
pub struct Flows {
    tables: RwLock<FlowTables>,
    /// `tables.version()` with `id` above it, published after each change
    /// (Release, paired with the Acquire in [`Flows::version`]): a worker
    /// whose cache holds another version looks up again.
    version: AtomicU64,
    /// This process's number for these tables (`NEXT_ID`).
    id: u64,
    /// Frames in the PACKET_IN queue, readable without its lock.
    queued: AtomicUsize,
    /// Frames whose verdict left an output or a counter out (see
    /// `ringswitch_flow::Verdict::truncated`).
    truncated: AtomicU64,
    standalone: AtomicBool,
    /// A controller is connected (the fail mode applies when none is).
    connected: AtomicBool,
    packet_in: Mutex<Queue>,
    /// Frames for the controller dropped because the queue was full.
    packet_in_dropped: AtomicU64,
    /// Written when a frame is queued for the controller.
    wake: EventFd,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Flows {
    /// Empty tables with `config` (the number of tables, their bounds).
    pub fn new(config: Config) -> std::io::Result<Flows> {
        let tables = FlowTables::new(config);
        // Relaxed: a unique number, nothing published through it.
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let version = AtomicU64::new(Flows::published(id, tables.version()));
        Ok(Flows {
            tables: RwLock::new(tables),
            version,
            id,
            queued: AtomicUsize::new(0),
            truncated: AtomicU64::new(0),
            standalone: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            packet_in: Mutex::new(Queue::default()),
            packet_in_dropped: AtomicU64::new(0),
            wake: EventFd::new()?,
        })
    }

    /// The tables, for reading (a worker on a cache miss; statistics).
    pub fn read(&self) -> RwLockReadGuard<'_, FlowTables> {
        self.tables.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the tables (a FLOW_MOD, a GROUP_MOD, timeouts) and
    /// publishes their new version: workers see the change from their next
    /// batch on.
    pub fn modify<R>(&self, f: impl FnOnce(&mut FlowTables) -> R) -> R {
        let mut t = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        let r = f(&mut t);
        // Release: pairs with the Acquire in `version`; a worker that sees
        // the new number reads the tables under the lock anyway.
        self.version
            .store(Flows::published(self.id, t.version()), Ordering::Release);
        r
    }

    /// A version of tables `id` as workers see it: one worker's cache
    /// serves every switch it forwards for, and an entry filled for one
    /// switch's tables must never match another's.
    fn published(id: u64, v: u64) -> u64 {
        (id << VERSION_BITS) | (v & ((1 << VERSION_BITS) - 1))
    }

    /// The tables' current version, unique to these tables in the process
    /// (not `FlowTables::version`).
    #[inline(always)]
    pub fn version(&self) -> u64 {
        // Acquire: pairs with the Release in `modify`.
        self.version.load(Ordering::Acquire)
    }

    /// Sets the fail mode.
    pub fn set_fail_mode(&self, m: FailMode) {
        // Relaxed: a setting read per batch; a batch seeing the old one is
        // as if it had run a moment earlier.
        self.standalone
            .store(m == FailMode::Standalone, Ordering::Relaxed);
    }

    /// The fail mode.
    pub fn fail_mode(&self) -> FailMode {
        if self.standalone.load(Ordering::Relaxed) {
            FailMode::Standalone
        } else {
            FailMode::Secure
        }
    }

    /// Says whether a controller is connected.
    pub fn set_connected(&self, c: bool) {
        // Relaxed: as the fail mode.
        self.connected.store(c, Ordering::Relaxed);
    }

    /// Whether the learning bridge decides instead of the tables: fail
    /// mode standalone with no controller connected.
    #[inline(always)]
    pub fn learning_instead(&self) -> bool {
        self.standalone.load(Ordering::Relaxed) && !self.connected.load(Ordering::Relaxed)
    }

    /// Queues a frame for the controller (the data path's side): its first
    /// `max_len` bytes. False, counted in `packet_in_dropped`, when the
    /// queue is full.
    pub fn push_packet_in(&self, meta: &PacketIn, frame: &[u8], max_len: usize) -> bool {
        let full = || {
            // Relaxed: a statistic.
            self.packet_in_dropped.fetch_add(1, Ordering::Relaxed);
            false
        };
        // Relaxed: a hint that spares a storm of frames for a busy
        // controller the lock; the check under the lock decides.
        if self.queued.load(Ordering::Relaxed) >= PACKET_IN_QUEUE {
            return full();
        }
        {
            let mut q = lock(&self.packet_in);
            if q.items.len() >= PACKET_IN_QUEUE {
                drop(q);
                return full();
            }
            let mut p = q.spare.pop().unwrap_or_default();
            p.in_port = meta.in_port;
            p.reason = meta.reason;
            p.table_id = meta.table_id;
            p.cookie = meta.cookie;
            p.metadata = meta.metadata;
            p.total_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
            p.data.clear();
            p.data.extend_from_slice(&frame[..frame.len().min(max_len)]);
            q.items.push_back(p);
            // Relaxed: see the load above; written under the lock.
            self.queued.store(q.items.len(), Ordering::Relaxed);
        }
        // Outside the lock: the doorbell is a system call.
        self.wake.signal();
        true
    }

    /// Takes up to `max` queued frames (the control side's), oldest first,
    /// handing each to `f`; the entries are kept for reuse.
    pub fn take_packet_ins(&self, max: usize, mut f: impl FnMut(&PacketIn)) -> usize {
        self.wake.drain();
        let mut n = 0;
        while n < max {
            let p = {
                let mut q = lock(&self.packet_in);
                let p = q.items.pop_front();
                // Relaxed: as in `push_packet_in`.
                self.queued.store(q.items.len(), Ordering::Relaxed);
                p
            };
            let Some(p) = p else {
                break;
            };
            f(&p);
            lock(&self.packet_in).spare.push(p);
            n += 1;
        }
        n
    }

    /// Counts `n` frames whose verdict left something out.
    pub(crate) fn count_truncated(&self, n: u64) {
        // Relaxed: a statistic.
        self.truncated.fetch_add(n, Ordering::Relaxed);
    }

    /// Frames whose verdict left an output or a counter out (more than a
    /// verdict holds).
    pub fn truncated(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }

    /// Frames for the controller dropped for lack of room.
    pub fn packet_in_dropped(&self) -> u64 {
        self.packet_in_dropped.load(Ordering::Relaxed)
    }

    /// The doorbell the control side polls: readable when frames are
    /// queued for the controller.
    pub fn wake_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.wake.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packet_in_queue_is_bounded_and_counts_what_it_drops() {
        let f = Flows::new(Config::default()).unwrap();
        let meta = PacketIn {
            in_port: 3,
            ..PacketIn::default()
        };
        for _ in 0..PACKET_IN_QUEUE {
            assert!(f.push_packet_in(&meta, &[7u8; 100], 64));
        }
        assert!(!f.push_packet_in(&meta, &[7u8; 100], 64));
        assert_eq!(f.packet_in_dropped(), 1);
        let mut got = Vec::new();
        let n = f.take_packet_ins(usize::MAX, |p| {
            got.push((p.in_port, p.total_len, p.data.len()))
        });
        assert_eq!(n, PACKET_IN_QUEUE);
        assert!(got.iter().all(|&g| g == (3, 100, 64)));
        assert!(f.push_packet_in(&meta, &[1u8; 10], 64), "room again");
    }

    #[test]
    fn modify_publishes_the_version_and_fail_mode_picks_the_bridge() {
        let f = Flows::new(Config::default()).unwrap();
        let v0 = f.version();
        f.modify(|t| t.set_max_flows(0, 10).unwrap());
        assert_eq!(f.version() & 0xff_ffff_ffff, f.read().version());
        let other = Flows::new(Config::default()).unwrap();
        assert_ne!(other.version(), v0, "two switches' versions differ");
        assert!(!f.learning_instead());
        f.set_fail_mode(FailMode::Standalone);
        assert!(f.learning_instead(), "standalone, no controller");
        f.set_connected(true);
        assert!(!f.learning_instead());
    }
}
