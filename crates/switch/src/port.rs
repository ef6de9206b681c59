//! A switch port as the data path sees it: a ring port (its region, the
//! port side of its rings, its doorbells) or a port of frame queues (a VM's
//! virtio-net queue pairs, a NIC's or a TAP's queues), and its counters.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringswitch_control::{PortStats, PortVlan};
use ringswitch_frame::{FrameQueue, QueueStats, SharedQueue};
use ringswitch_ring::{arith, Dir, EventFd, PortRing, Region, RingRef};

/// Most workers that can hold leases on one RX ring at once (and so the
/// most workers a daemon runs).
pub const MAX_LEASES: usize = 16;

/// One thread's share of a port's counters, added to once per batch.
/// Each worker adds to a set of its own (see [`Counters`]), so two workers
/// delivering to one port never bounce a cache line between them.
#[derive(Default, Debug)]
#[repr(align(128))]
pub struct CounterSet {
    /// Packets taken from the port's TX rings and forwarded to at least
    /// one port (not those counted in `drop_no_dest`).
    pub tx_packets: AtomicU64,
    /// Bytes taken from the port's TX rings.
    pub tx_bytes: AtomicU64,
    /// Packets delivered into its RX rings.
    pub rx_packets: AtomicU64,
    /// Bytes delivered into its RX rings.
    pub rx_bytes: AtomicU64,
    /// Drops: its RX ring was full.
    pub drop_rx_full: AtomicU64,
    /// Drops: malformed packets it sent.
    pub drop_malformed: AtomicU64,
    /// Drops: frames shorter than an Ethernet header it sent.
    pub drop_short: AtomicU64,
    /// Drops: frames too long.
    pub drop_long: AtomicU64,
    /// Ring reinitializations.
    pub ring_reinits: AtomicU64,
    /// Drops: the port had no one behind it (a ring port no client has
    /// open, a VM port with no running queues).
    pub drop_link_down: AtomicU64,
    /// Drops: packets it sent that had no destination (addressed to itself,
    /// or flooded with no other port attached).
    pub drop_no_dest: AtomicU64,
    /// Drops: packets it sent in a VLAN it does not carry.
    pub drop_vlan: AtomicU64,
    /// Frames it was offered (delivered or dropped) that software
    /// segmentation made beyond one per TSO frame: a TSO frame cut into n
    /// segments adds n - 1, so the destination's outcomes minus this are
    /// the frames the sources sent it.
    pub rx_segments_added: AtomicU64,
    /// Interrupts sent to a ring port's client: its doorbell written
    /// because it asked to be woken (frames arrived, or TX slots freed).
    pub interrupts: AtomicU64,
}

impl CounterSet {
    #[inline(always)]
    pub(crate) fn add(c: &AtomicU64, v: u64) {
        if v != 0 {
            // Relaxed: a statistic, read without ordering requirements. A
            // set has one writing thread, so the add never contends.
            c.fetch_add(v, Ordering::Relaxed);
        }
    }
}

/// Sets of counters a port has: one for the threads that are not workers
/// (the control thread, embedders, tests), one per worker.
pub const COUNTER_SETS: usize = MAX_LEASES + 1;

thread_local! {
    /// Which of each port's counter sets this thread adds to.
    static COUNTER_SET: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes this thread add to counter set `worker + 1` of every port: called
/// once by each worker thread as it starts (worker numbers beyond a port's
/// sets share its last one, still correct, as the adds are atomic).
pub fn count_as_worker(worker: usize) {
    COUNTER_SET.with(|c| c.set((worker + 1).min(COUNTER_SETS - 1)));
}

/// How many counter sets a port made from now on gets (see
/// [`counter_sets_for`]); 0: not said, a set for every worker there may be.
static SETS_PER_PORT: AtomicUsize = AtomicUsize::new(0);

/// Gives every port made from now on the counter sets of `workers` worker
/// threads (and the set of the threads that are not workers), not of
/// every worker there may be: 256 bytes a port with one worker, against
/// 2,176. A daemon calls it before it makes a port, with the number of
/// workers it runs; in a process with several daemons the most workers
/// any of them runs count. A port made before, or in a program that
/// never calls it, has a set for each of [`MAX_LEASES`] workers.
pub fn counter_sets_for(workers: usize) {
    // Relaxed: read when a port's counters are made, by threads the
    // daemon that called this starts after it.
    SETS_PER_PORT.fetch_max(workers.clamp(1, MAX_LEASES) + 1, Ordering::Relaxed);
}

/// A port's counters: a [`CounterSet`] per thread that forwards, each on
/// its own cache lines, summed by whoever reads them. Nothing on the data
/// path locks, waits or shares a written line with another worker.
#[derive(Debug)]
pub struct Counters {
    /// At least two: the non-workers' set, and the first worker's.
    sets: Box<[CounterSet]>,
}

impl Default for Counters {
    fn default() -> Self {
        // Relaxed: see `counter_sets_for`.
        let n = match SETS_PER_PORT.load(Ordering::Relaxed) {
            0 => COUNTER_SETS,
            n => n.clamp(2, COUNTER_SETS),
        };
        Counters {
            sets: (0..n).map(|_| CounterSet::default()).collect(),
        }
    }
}

impl Counters {
    /// The set this thread adds to.
    #[inline(always)]
    pub fn mine(&self) -> &CounterSet {
        // A worker beyond the port's sets shares its last (see
        // `count_as_worker`); there are always two or more.
        let i = COUNTER_SET.with(|c| c.get());
        &self.sets[i.min(self.sets.len() - 1)]
    }

    /// A snapshot for `stats`: every set summed.
    pub fn snapshot(&self, name: &str) -> PortStats {
        let mut t = [0u64; 14];
        for s in self.sets.iter() {
            let all = [
                &s.tx_packets,
                &s.tx_bytes,
                &s.rx_packets,
                &s.rx_bytes,
                &s.drop_rx_full,
                &s.drop_malformed,
                &s.drop_short,
                &s.drop_long,
                &s.ring_reinits,
                &s.drop_link_down,
                &s.drop_no_dest,
                &s.drop_vlan,
                &s.rx_segments_added,
                &s.interrupts,
            ];
            for (t, c) in t.iter_mut().zip(all) {
                // Relaxed: statistics (see CounterSet::add).
                *t = t.wrapping_add(c.load(Ordering::Relaxed));
            }
        }
        let [tx_packets, tx_bytes, rx_packets, rx_bytes, drop_rx_full, drop_malformed, drop_short, drop_long, ring_reinits, drop_link_down, drop_no_dest, drop_vlan, rx_segments_added, interrupts] =
            t;
        PortStats {
            name: name.to_string(),
            tx_packets,
            tx_bytes,
            rx_packets,
            rx_bytes,
            drop_rx_full,
            drop_malformed,
            drop_short,
            drop_long,
            ring_reinits,
            drop_link_down,
            drop_no_dest,
            drop_vlan,
            rx_segments_added,
            interrupts,
            drop_kernel: 0,
            kernel_tx_invalid: 0,
            vm_rx_bad_chains: 0,
            vm_ring_errors: 0,
            vm_interrupts: 0,
            vm_interrupts_dropped: 0,
            vm_guest_faults: 0,
            vm_frontend_errors: 0,
        }
    }
}

#[derive(Clone, Copy)]
struct Lease {
    end: u32,
    done: bool,
}

/// The port side of an RX ring fed by possibly several workers. A worker
/// reserves slots under the lock, fills them outside it, and completes its
/// lease under the lock again; `hwtail` only moves over completed leases in
/// reservation order, so packets from each sender arrive in order and nobody
/// copies while holding the lock.
pub struct RxState {
    /// Port-side ring state.
    pub ring: PortRing,
    reserved: u32,
    leases: [Lease; MAX_LEASES],
    first: usize,
    count: usize,
}

/// A reservation of `len` slots starting at `start`.
#[derive(Clone, Copy, Debug)]
pub struct Reservation {
    /// First slot.
    pub start: u32,
    /// Number of slots.
    pub len: u32,
    slot: usize,
}

impl RxState {
    fn new(ring: PortRing) -> RxState {
        let reserved = ring.hwtail;
        RxState {
            ring,
            reserved,
            leases: [Lease {
                end: 0,
                done: false,
            }; MAX_LEASES],
            first: 0,
            count: 0,
        }
    }

    /// Reserves up to `want` slots. Reads the application's head first (the
    /// slots it released); a head it could not have written resets the ring
    /// and is counted in `reinits`.
    pub fn reserve(&mut self, want: u32, counters: &CounterSet) -> Reservation {
        match self.ring.app_head() {
            Ok(h) => self.ring.hwcur = h,
            Err(_) => {
                // Only safe to reset while no lease is outstanding: the
                // reset republishes hwtail.
                if self.count == 0 {
                    self.ring.reinit();
                    CounterSet::add(&counters.ring_reinits, 1);
                }
            }
        }
        let n = self.ring.num_slots();
        let used = arith::dist(self.ring.hwcur, self.reserved, n);
        let free = n - 1 - used;
        let len = if self.count == MAX_LEASES {
            0
        } else {
            want.min(free)
        };
        let start = self.reserved;
        let mut slot = usize::MAX;
        if len > 0 {
            self.reserved = arith::add(self.reserved, len, n);
            slot = (self.first + self.count) % MAX_LEASES;
            self.leases[slot] = Lease {
                end: self.reserved,
                done: false,
            };
            self.count += 1;
        }
        Reservation { start, len, slot }
    }

    /// Gives back the last `unused` slots of `r` if it is the newest lease.
    /// Returns false (nothing changed) otherwise.
    pub fn shrink(&mut self, r: Reservation, unused: u32) -> bool {
        if r.len == 0 || unused == 0 {
            return true;
        }
        let newest = (self.first + self.count + MAX_LEASES - 1) % MAX_LEASES;
        if self.count == 0 || newest != r.slot {
            return false;
        }
        let n = self.ring.num_slots();
        self.reserved = arith::add(self.reserved, n - unused.min(r.len), n);
        self.leases[r.slot].end = self.reserved;
        true
    }

    /// Completes a reservation; returns whether hwtail moved (and was
    /// published).
    pub fn complete(&mut self, r: Reservation) -> bool {
        if r.len == 0 {
            return false;
        }
        self.leases[r.slot].done = true;
        let mut moved = false;
        while self.count > 0 && self.leases[self.first].done {
            self.ring.hwtail = self.leases[self.first].end;
            self.first = (self.first + 1) % MAX_LEASES;
            self.count -= 1;
            moved = true;
        }
        if moved {
            self.ring.publish();
        }
        moved
    }
}

/// Whether a ring port has someone behind it: a client that opened it, or a
/// QEMU that was handed its memory. As in netmap, where a VALE port not in
/// netmap mode gets nothing, frames for a port that is down are dropped and
/// counted (`drop_link_down`), not queued for whoever opens it next.
///
/// The flag guards no memory (delivering into the rings is safe either
/// way), so Relaxed suffices on both sides; a batch that read "up" just
/// before the client went is delivered into rings no one reads, which
/// happens to a client killed mid-batch anyway.
#[derive(Clone, Debug)]
pub struct Link(Arc<AtomicBool>);

impl Link {
    /// A link that is up.
    pub fn up() -> Link {
        Link(Arc::new(AtomicBool::new(true)))
    }

    /// A link whose state is `flag` (shared with a queue that reports it as
    /// its [`is_up`](ringswitch_frame::FrameQueue::is_up)).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Link {
        Link(flag)
    }

    /// Marks the port up (opened) or down.
    pub fn set_up(&self, up: bool) {
        self.0.store(up, Ordering::Relaxed);
    }

    /// Whether the port is up.
    #[inline(always)]
    pub fn is_up(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The rings, doorbells and memory of a netmap port (a ring port).
pub struct RingPort {
    region: Arc<Region>,
    /// Up while someone has the port (see [`Link`]). A new port is up (a
    /// port made in-process has its user); the daemon marks its ports down
    /// until a client opens them.
    pub link: Link,
    /// Port side of the TX rings; locked by the one worker serving the port.
    tx: Box<[Mutex<PortRing>]>,
    /// Port side of the RX rings.
    rx: Box<[Mutex<RxState>]>,
    /// Doorbell the client rings (TX work).
    pub kick: EventFd,
    /// Doorbells towards the client, one per ring pair: RX ring `i` and TX
    /// ring `i` signal `irqs[i]`, so threads serving different rings never
    /// take each other's wake-ups.
    pub irqs: Box<[EventFd]>,
}

/// A port whose traffic goes through [`FrameQueue`]s: a VM port (one
/// virtio-net queue pair each) or an interface port (the queues of a NIC
/// or a TAP), and any later kind that offers frames the same way.
pub struct QueuePort {
    /// How its queues are driven (`vhost-user`, `xdp-native`, `af-packet`,
    /// `tap`, ...).
    pub driver: &'static str,
    /// Up while something is behind the port: an interface always, a VM
    /// port while its guest runs on it (set by its protocol thread through
    /// `Switch::set_running`). What OpenFlow reports; frames are delivered
    /// either way (a queue that is not started takes none).
    pub link: Link,
    queues: Box<[SharedQueue]>,
    /// One per queue: whoever reconfigures queue `i` outside the data path
    /// (a VM's vhost-user protocol thread, after a new kick eventfd or a
    /// queue started or stopped) signals `changed[i]`, so the worker
    /// serving it registers its wake descriptor again. The daemon's own
    /// eventfds, never shared with the other side.
    pub changed: Box<[EventFd]>,
    /// Each queue's counters as a reader last took them: used while a
    /// worker holds the queue, so reading counters never waits for the
    /// data path. Readers' alone; no worker touches it.
    last_stats: Mutex<Box<[QueueStats]>>,
}

impl QueuePort {
    /// Wraps opened queues (at least one).
    pub fn new(queues: Vec<SharedQueue>) -> std::io::Result<QueuePort> {
        let Some(q0) = queues.first() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a port needs at least one queue",
            ));
        };
        let driver = lock(q0).driver();
        let changed = (0..queues.len())
            .map(|_| EventFd::new())
            .collect::<std::io::Result<_>>()?;
        let last_stats = Mutex::new(vec![QueueStats::default(); queues.len()].into_boxed_slice());
        Ok(QueuePort {
            driver,
            link: Link::up(),
            queues: queues.into_boxed_slice(),
            changed,
            last_stats,
        })
    }

    /// Number of queues.
    #[inline(always)]
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Queue `i`, locked (once per batch).
    #[inline(always)]
    pub fn queue(&self, i: usize) -> MutexGuard<'_, dyn FrameQueue + 'static> {
        lock(&self.queues[i])
    }

    /// The queues' own counters, summed. A queue a worker holds right now
    /// counts with what it said last time (at most one read behind): the
    /// reader never waits for a batch to end, and a worker waits at most
    /// for one queue's `stats` (a few loads, or one getsockopt on the
    /// daemon's own socket for an interface queue).
    pub fn stats(&self) -> QueueStats {
        let mut last = lock(&self.last_stats);
        let mut t = QueueStats::default();
        for (q, last) in self.queues.iter().zip(last.iter_mut()) {
            // A batch holds a queue for microseconds: a few tries between
            // them usually find it free, and the last reading stands in
            // only under sustained load.
            for _ in 0..STATS_TRIES {
                match q.try_lock() {
                    Ok(g) => *last = g.stats(),
                    Err(std::sync::TryLockError::Poisoned(p)) => *last = p.into_inner().stats(),
                    Err(std::sync::TryLockError::WouldBlock) => {
                        std::thread::yield_now();
                        continue;
                    }
                }
                break;
            }
            add_queue_stats(&mut t, last);
        }
        t
    }
}

/// How many times a reader tries a busy queue for its counters.
const STATS_TRIES: usize = 64;

/// What kind of port, with what it needs.
pub enum Backend {
    /// A netmap port: rings in a shared memory region.
    Ring(RingPort),
    /// A port of frame queues: a VM (vhost-user virtio-net), a NIC, the
    /// host stack (TAP).
    Queue(QueuePort),
}

/// A port attached to a switch.
pub struct SwitchPort {
    /// Name (`vale0:a`).
    pub name: String,
    /// Index in its switch.
    pub index: u16,
    /// Its rings or queues.
    pub backend: Backend,
    /// Counters. Shared with the port's earlier and later incarnations
    /// (a persistent port gets a new `SwitchPort` with fresh memory for
    /// each client): a worker still finishing a batch on the old one counts
    /// into the same counters, so no frame goes uncounted across the
    /// replacement.
    pub counters: Arc<Counters>,
    /// Its VLANs (the default: a trunk of every VLAN, every frame passes
    /// as it is).
    pub vlan: PortVlan,
}

/// Adds one queue's counters to `t`.
fn add_queue_stats(t: &mut QueueStats, q: &QueueStats) {
    t.kernel_rx_dropped += q.kernel_rx_dropped;
    t.kernel_tx_invalid += q.kernel_tx_invalid;
    t.rx_bad_hdr += q.rx_bad_hdr;
    t.rx_bad_chains += q.rx_bad_chains;
    t.ring_errors += q.ring_errors;
    t.interrupts += q.interrupts;
    t.interrupts_dropped += q.interrupts_dropped;
    t.guest_faults += q.guest_faults;
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the ring state
    // inconsistent beyond what validation already tolerates.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SwitchPort {
    /// Wraps a region (end 0) as ring port `index`.
    pub fn new(name: String, index: u16, region: Arc<Region>) -> std::io::Result<SwitchPort> {
        Ok(SwitchPort {
            name,
            index,
            backend: Backend::Ring(RingPort::new(region)?),
            counters: Arc::default(),
            vlan: PortVlan::default(),
        })
    }

    /// A port `index` of frame queues (a VM port, an interface port).
    pub fn new_queues(name: String, index: u16, queues: QueuePort) -> SwitchPort {
        SwitchPort {
            name,
            index,
            backend: Backend::Queue(queues),
            counters: Arc::default(),
            vlan: PortVlan::default(),
        }
    }

    /// The same port counting into `counters` (its predecessor's).
    pub fn with_counters(mut self, counters: Arc<Counters>) -> SwitchPort {
        self.counters = counters;
        self
    }

    /// The same port with its VLANs set.
    pub fn with_vlan(mut self, vlan: PortVlan) -> SwitchPort {
        self.vlan = vlan;
        self
    }

    /// The rings, if a ring port.
    #[inline(always)]
    pub fn ring(&self) -> Option<&RingPort> {
        match &self.backend {
            Backend::Ring(r) => Some(r),
            _ => None,
        }
    }

    /// Whether the port is up: a ring port while someone has it open; a
    /// port of queues while something is behind it (see
    /// [`QueuePort::link`]).
    pub fn is_up(&self) -> bool {
        match &self.backend {
            Backend::Ring(r) => r.link.is_up(),
            Backend::Queue(q) => q.link.is_up(),
        }
    }

    /// Marks the port up or down (see [`SwitchPort::is_up`]).
    pub fn set_up(&self, up: bool) {
        match &self.backend {
            Backend::Ring(r) => r.link.set_up(up),
            Backend::Queue(q) => q.link.set_up(up),
        }
    }

    /// The queues, if a port of frame queues.
    #[inline(always)]
    pub fn queues(&self) -> Option<&QueuePort> {
        match &self.backend {
            Backend::Queue(q) => Some(q),
            _ => None,
        }
    }

    /// Sources of traffic the port has: TX rings, queue pairs, or interface
    /// queues.
    pub fn sources(&self) -> usize {
        match &self.backend {
            Backend::Ring(r) => r.tx_rings(),
            Backend::Queue(q) => q.queues(),
        }
    }

    /// Counters for `stats`, with the kernel's for an interface port and
    /// the device's for a VM port.
    pub fn stats(&self) -> PortStats {
        let mut s = self.counters.snapshot(&self.name);
        let q = match &self.backend {
            Backend::Queue(q) => q.stats(),
            Backend::Ring(_) => return s,
        };
        s.drop_kernel = q.kernel_rx_dropped;
        s.kernel_tx_invalid = q.kernel_tx_invalid;
        s.drop_malformed += q.rx_bad_hdr;
        s.vm_rx_bad_chains = q.rx_bad_chains;
        s.vm_ring_errors = q.ring_errors;
        s.vm_interrupts = q.interrupts;
        s.vm_interrupts_dropped = q.interrupts_dropped;
        s.vm_guest_faults = q.guest_faults;
        s
    }
}

impl RingPort {
    /// The port side of end 0 of `region`.
    pub fn new(region: Arc<Region>) -> std::io::Result<RingPort> {
        let g = region.layout().geometry;
        let tx = (0..g.tx_rings)
            .map(|i| Mutex::new(PortRing::new(region.clone(), 0, Dir::Tx, i)))
            .collect();
        let rx = (0..g.rx_rings)
            .map(|i| Mutex::new(RxState::new(PortRing::new(region.clone(), 0, Dir::Rx, i))))
            .collect();
        Ok(RingPort {
            region,
            link: Link::up(),
            tx,
            rx,
            kick: EventFd::new()?,
            irqs: (0..g.tx_rings.max(g.rx_rings))
                .map(|_| EventFd::new())
                .collect::<std::io::Result<_>>()?,
        })
    }

    /// The interrupt of ring pair `i`.
    #[inline(always)]
    pub fn irq(&self, i: usize) -> &EventFd {
        &self.irqs[i]
    }

    /// The region.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Number of TX rings.
    pub fn tx_rings(&self) -> usize {
        self.tx.len()
    }

    /// Number of RX rings.
    pub fn rx_rings(&self) -> usize {
        self.rx.len()
    }

    /// The port side of TX ring `i`.
    pub fn tx(&self, i: usize) -> MutexGuard<'_, PortRing> {
        lock(&self.tx[i])
    }

    /// The port side of RX ring `i`.
    pub fn rx(&self, i: usize) -> MutexGuard<'_, RxState> {
        lock(&self.rx[i])
    }

    /// Whether any TX ring has work (the application moved head).
    pub fn has_tx_work(&self) -> bool {
        // Slots of an unfinished fragment chain already looked at are not
        // work: the idle poll must not spin on them either.
        self.tx.iter().any(|r| lock(r).has_new_work())
    }

    /// What the application's kicks of the serving worker cost it lately,
    /// as it publishes them on its TX rings (the largest; see
    /// `AppRing::note_kick`). The application's word: a caller bounds it.
    pub fn app_kick_cost(&self) -> std::time::Duration {
        self.tx
            .iter()
            .map(|r| lock(r).app_kick_cost())
            .max()
            .unwrap_or_default()
    }

    /// Before the serving worker sleeps: asks for kicks on every TX ring and
    /// double-checks. Returns true when it may sleep.
    pub fn prepare_sleep(&self) -> bool {
        let mut ok = true;
        for r in self.tx.iter() {
            if !lock(r).prepare_sleep() {
                ok = false;
            }
        }
        if !ok {
            self.set_awake();
        }
        ok
    }

    /// The serving worker is awake: no kicks needed.
    pub fn set_awake(&self) {
        for r in self.tx.iter() {
            lock(r).set_awake();
        }
    }

    /// Ends a delivery into RX ring `q` that filled the reservation `res`
    /// up to (not including) slot `d`: gives back the unused slots (or, if
    /// a later lease exists, sends them as empty frames: only with several
    /// workers), completes the lease, and interrupts the application if it
    /// asked (counted in `c`).
    pub fn finish_lease(
        &self,
        q: usize,
        res: Reservation,
        mut d: u32,
        dring: &RingRef<'_>,
        c: &CounterSet,
    ) {
        let dn = dring.num_slots();
        let woke = {
            let mut st = self.rx(q);
            let unused = res.len - arith::dist(res.start, d, dn);
            if unused > 0 && !st.shrink(res, unused) {
                for _ in 0..unused {
                    dring.set_len_flags(d, 0, 0);
                    d = arith::next(d, dn);
                }
            }
            st.complete(res) && st.ring.app_wants_kick()
        };
        if woke {
            // Not under the ring's lock; what the kick cost is published
            // for the application's adaptive wait.
            let took = self.irq(q).signal_timed();
            CounterSet::add(&c.interrupts, 1);
            self.rx(q).ring.note_kick(took);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_has_a_counter_set_per_worker_and_workers_beyond_share_the_last() {
        counter_sets_for(1);
        let c = Arc::new(Counters::default());
        // Two with one worker (more only if another test of this binary
        // asked for more workers first).
        assert!(
            (2..=COUNTER_SETS).contains(&c.sets.len()),
            "{}",
            c.sets.len()
        );
        let threads: Vec<_> = (0..MAX_LEASES + 2)
            .map(|w| {
                let c = c.clone();
                std::thread::spawn(move || {
                    count_as_worker(w);
                    CounterSet::add(&c.mine().tx_packets, 1);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // And this thread, which is no worker.
        CounterSet::add(&c.mine().tx_packets, 1);
        assert_eq!(c.snapshot("p").tx_packets, MAX_LEASES as u64 + 3);
    }
}
