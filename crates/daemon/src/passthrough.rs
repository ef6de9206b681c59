//! Passthrough ports (ptnetmap over ivshmem): the daemon is the ivshmem
//! server of QEMU's `ivshmem-doorbell` device, so a guest gets a port's
//! whole region (rings, buffers, CSB, and the region header describing the
//! geometry) as the device's BAR2, and drives the rings exactly as a host
//! application does.
//!
//! One thread per passthrough port listens on the port's socket and serves
//! one QEMU at a time with the protocol of QEMU's
//! `docs/specs/ivshmem-spec.rst`: the protocol version (0), the id it gives
//! the guest, the shared memory descriptor (sent with id -1), then, for each
//! peer, one eventfd per vector (each sent with the peer's id). Every value
//! is a little-endian int64 message; descriptors travel with SCM_RIGHTS.
//!
//! Peers and vectors (vector `i` is ring pair `i` of the port):
//! - the guest is peer `1 + end` (1 on a switch port; 1 or 2 on a pipe end).
//!   Its eventfds are the port's interrupt eventfds: whoever has something
//!   for ring pair `i` writes eventfd `i`, and QEMU raises MSI-X vector `i`.
//! - the other side is the peer the guest's doorbell rings: on a switch port
//!   the daemon (peer 0), every vector being the port's kick eventfd that
//!   wakes the switch worker; on a pipe end, the other end (peer `1 + other
//!   end`), whose vectors are that end's interrupt eventfds.
//!
//! Nothing the guest does reaches this thread: it only hands descriptors
//! out. The guest's ring values are validated by the switch worker or by
//! the pipe's other end exactly as any client's.
//!
//! Each QEMU connection gets memory no one else saw: once a QEMU goes (it
//! may have handed the memory on, or kept it), the server forgets what it
//! handed out and asks the registry to renew the port ([`Renew`]). A switch
//! port is recreated at once, with a fresh region, as for a ring port's
//! next client; a pipe gets a fresh region when the next QEMU comes (or a
//! client closes the other end) and neither of its ends is in use, so what
//! the last guest sent stays readable by the other end until then. Until the registry hands the server new memory
//! ([`PassthroughServer::set_peers`]), a QEMU that connects is refused.
//!
//! # Migration (`port add ... --passthrough PATH --migratable`)
//!
//! QEMU migrates an ivshmem region's contents only for a `master=on`
//! device, and a master must be peer 0: on a migratable switch port the
//! guest is peer 0 and the daemon peer 1 (QEMU's `master=auto` then makes
//! it master; the other ports keep the guest at peer 1, and QEMU blocks
//! their migration, or refuses `master=on` at start). A QEMU started with
//! `-incoming` gets the port's memory like any other, and the migration
//! then writes the source's region over it, rings, CSB, buffers and
//! header alike. Nothing tells the daemon when that is over (QEMU says
//! nothing on this socket), so the port waits for the guest to say it runs
//! on this memory:
//! - from the handshake on, the port stays down (frames for it are
//!   dropped and counted), and this thread writes a fresh random "resume
//!   epoch" into the region header's ask word ([`HEADER_RESUME_ASK`]) and
//!   raises the guest's vectors, once at once and then every
//!   [`RESUME_TICK`] (a migration may write the header over; interrupts
//!   raised before the guest runs are lost);
//! - the guest driver answers from its interrupt handler (and at probe) by
//!   copying the ask word into the ack word ([`HEADER_RESUME_ACK`]), and
//!   rings its doorbell, which only this thread watches until then (the
//!   switch's worker would take TX slots a migration is still writing):
//!   only a guest that runs answers, so after the migration's last write;
//! - when the ack is this port's epoch, the registry adopts the region
//!   ([`Adopt`]): it checks it as untrusted input and resets, counting,
//!   what is inconsistent (`Region::adopt_migrated`), attaches the port to
//!   the switch again on it (its side starts from the CSB's indexes) with
//!   the same doorbells, and brings it up; then every vector is raised so
//!   the guest looks at its rings. A guest booted on the port takes the
//!   same path, with nothing to reset.
//!
//! [`HEADER_RESUME_ASK`]: ringswitch_ring::layout::HEADER_RESUME_ASK
//! [`HEADER_RESUME_ACK`]: ringswitch_ring::layout::HEADER_RESUME_ACK

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ringswitch_control::socket;
use ringswitch_ring::{poll, EventFd, Region};
use ringswitch_switch::Link;
use tracing::{info, warn};

/// The ivshmem protocol version this server speaks.
pub const IVSHMEM_PROTOCOL_VERSION: i64 = 0;

/// Errors starting a passthrough port.
#[derive(Debug, thiserror::Error)]
pub enum PassthroughError {
    /// The socket could not be bound.
    #[error(transparent)]
    Listen(#[from] crate::listen::ListenError),
    /// Other system call failures.
    #[error("cannot start the passthrough thread")]
    Io(#[from] io::Error),
}

/// Asks the registry for fresh memory: with `false` when a QEMU went, with
/// `true` when one connects and the port has none; the registry answers
/// with [`PassthroughServer::set_peers`] (at once, or later).
pub type Renew = Box<dyn Fn(bool) + Send>;

/// Asks the registry to adopt the memory a migratable port's guest runs on
/// (see the module's "Migration"); true once the port is up on it.
pub type Adopt = Box<dyn Fn() -> bool + Send>;

/// How often a migratable port whose guest has not said it runs on the
/// port's memory writes the ask word again and raises the guest's
/// vectors. Only latency depends on it: the guest answers at its next
/// interrupt after it runs.
pub const RESUME_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// What a guest gets.
pub struct Peers {
    /// The region's memfd.
    pub memfd: OwnedFd,
    /// The guest's peer id.
    pub guest_id: u16,
    /// The guest's vectors: written to interrupt it.
    pub guest_irqs: Vec<EventFd>,
    /// The peer the guest's doorbell rings.
    pub host_id: u16,
    /// That peer's vectors.
    pub host_kicks: Vec<EventFd>,
    /// A switch port's link: up once a QEMU has the memory (a pipe end has
    /// none; a pipe never drops).
    pub link: Option<Link>,
    /// A migratable port's region (its resume words): the link stays down
    /// until the guest answers and the registry adopts the memory.
    pub migratable: Option<Arc<Region>>,
}

impl Peers {
    /// The same descriptors, duplicated (handed to one QEMU).
    fn try_clone(&self) -> io::Result<Peers> {
        let dup = |v: &[EventFd]| v.iter().map(EventFd::try_clone).collect::<io::Result<_>>();
        Ok(Peers {
            memfd: self.memfd.try_clone()?,
            guest_id: self.guest_id,
            guest_irqs: dup(&self.guest_irqs)?,
            host_id: self.host_id,
            host_kicks: dup(&self.host_kicks)?,
            link: self.link.clone(),
            migratable: self.migratable.clone(),
        })
    }
}

/// What the server hands the next QEMU, shared with the registry.
#[derive(Default)]
pub struct Slot {
    /// The memory and eventfds for the next QEMU; none while the port waits
    /// for fresh memory.
    peers: Option<Peers>,
    /// A QEMU has (or is being handed) the current memory.
    in_use: bool,
}

/// The ivshmem server thread of one passthrough port.
pub struct PassthroughServer {
    tag: u64,
    stop: Arc<EventFd>,
    connected: Arc<AtomicBool>,
    slot: Arc<Mutex<Slot>>,
    path: PathBuf,
    migratable: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PassthroughServer {
    /// Listens on `path` for the QEMU of `port`'s guest, handing it
    /// `peers`; after each QEMU, `renew` asks for fresh memory. `tag`
    /// tells this server from a later one of the same name. With `adopt`,
    /// the port is migratable (`peers.migratable` is its region).
    pub fn start(
        tag: u64,
        port: &str,
        path: &Path,
        peers: Peers,
        renew: Renew,
        adopt: Option<Adopt>,
    ) -> Result<PassthroughServer, PassthroughError> {
        let migratable = adopt.is_some();
        let listener = crate::listen::bind(path)?;
        let vectors = peers.guest_irqs.len();
        let stop = Arc::new(EventFd::new()?);
        let connected = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(Mutex::new(Slot {
            peers: Some(peers),
            in_use: false,
        }));
        let (st, co, sl) = (stop.clone(), connected.clone(), slot.clone());
        let name = port.to_string();
        let thread = std::thread::Builder::new()
            .name(format!(
                "rs-pt-{}",
                port.chars().take(8).collect::<String>()
            ))
            .stack_size(128 * 1024)
            .spawn(move || run(&name, listener, &sl, &renew, adopt.as_ref(), &st, &co))?;
        info!(port, path = %path.display(), vectors, "passthrough port listening for QEMU's ivshmem-doorbell (start it with vectors={vectors})");
        Ok(PassthroughServer {
            tag,
            stop,
            connected,
            slot,
            path: path.to_path_buf(),
            migratable,
            thread: Some(thread),
        })
    }

    /// Whether its guest may be migrated (`port add --migratable`).
    pub fn migratable(&self) -> bool {
        self.migratable
    }

    /// The `tag` it was started with.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// The slot the next QEMU's memory is taken from: lock it to check
    /// that no QEMU uses the current memory and replace it in one step.
    pub fn slot(&self) -> &Mutex<Slot> {
        &self.slot
    }

    /// Whether a QEMU is attached.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl PassthroughServer {
    /// Tells the thread to stop without waiting for it (never blocks: the
    /// registry calls it under its lock and joins after unlocking).
    pub fn request_stop(&self) {
        self.stop.signal();
    }
}

impl Slot {
    /// A QEMU has (or is being handed) the current memory.
    pub fn in_use(&self) -> bool {
        self.in_use
    }

    /// Fresh memory for the next QEMU.
    pub fn set_peers(&mut self, peers: Peers) {
        self.peers = Some(peers);
    }

    /// The eventfd the guest's doorbell writes (its vector 0), duplicated:
    /// none while the port waits for fresh memory.
    pub fn doorbell(&self) -> Option<io::Result<EventFd>> {
        self.peers
            .as_ref()
            .and_then(|p| p.host_kicks.first())
            .map(EventFd::try_clone)
    }
}

impl PassthroughServer {
    /// Fresh memory for the next QEMU (see [`Slot::set_peers`]).
    pub fn set_peers(&self, peers: Peers) {
        lock(&self.slot).set_peers(peers);
    }
}

impl Drop for PassthroughServer {
    fn drop(&mut self) {
        self.request_stop();
        if let Some(t) = self.thread.take() {
            // The thread itself may drop the last reference to the registry
            // (it renews its port's memory through it) while the daemon
            // stops: it cannot join itself.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        crate::listen::unlink_if_ours(&self.path);
    }
}

/// Polls `fds` for input (for at most `timeout`); returns their revents,
/// or None when `stop` fired.
fn wait(fds: &[RawFd], stop: &EventFd, timeout: Option<std::time::Duration>) -> Option<[i16; 3]> {
    let mut p = [poll::watch(stop.as_raw_fd(), libc::POLLIN); 4];
    for (i, &fd) in fds.iter().take(3).enumerate() {
        p[i + 1].fd = fd;
    }
    let n = 1 + fds.len().min(3);
    match poll::poll_fds(&mut p[..n], timeout) {
        Err(e) => (e.kind() == io::ErrorKind::Interrupted).then_some([0; 3]),
        Ok(_) if p[0].revents != 0 => None,
        Ok(_) => Some([p[1].revents, p[2].revents, p[3].revents]),
    }
}

/// The memory for a QEMU that connected: taken from the slot, which is
/// marked in use; none while the port waits for fresh memory.
fn take(slot: &Mutex<Slot>) -> io::Result<Option<Peers>> {
    let mut s = lock(slot);
    let Some(p) = &s.peers else {
        return Ok(None);
    };
    // Duplicated under the lock (our own descriptors, not a peer's), so the
    // registry never replaces the memory between the check and the use.
    let p = p.try_clone()?;
    s.in_use = true;
    Ok(Some(p))
}

/// A QEMU went: what it had is no one else's, ever. Asks for fresh memory.
fn release(slot: &Mutex<Slot>, renew: &Renew) {
    {
        let mut s = lock(slot);
        s.in_use = false;
        s.peers = None;
    }
    renew(false);
}

fn run(
    port: &str,
    listener: UnixListener,
    slot: &Mutex<Slot>,
    renew: &Renew,
    adopt: Option<&Adopt>,
    stop: &EventFd,
    connected: &AtomicBool,
) {
    let lfd = listener.as_raw_fd();
    let mut refused: u64 = 0;
    while let Some(ev) = wait(&[lfd], stop, None) {
        if ev[0] == 0 {
            continue;
        }
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                warn!(port, error = %e, "accepting a QEMU connection failed");
                continue;
            }
        };
        let mut peers = take(slot);
        if matches!(peers, Ok(None)) {
            // A pipe end renews lazily, when the next QEMU comes: what the
            // last guest sent stays readable by the other end until then.
            renew(true);
            peers = take(slot);
        }
        let peers = match peers {
            Ok(Some(p)) => p,
            Ok(None) => {
                // Logged once per run of refusals: a QEMU retrying in a
                // loop does not fill the log.
                if refused == 0 {
                    warn!(port, "a QEMU was refused: the memory the last guest had is still in use by the other end of the pipe; the port takes a guest again once that end is closed");
                }
                refused += 1;
                continue;
            }
            Err(e) => {
                warn!(port, error = %e, "cannot duplicate the port's descriptors for QEMU");
                continue;
            }
        };
        refused = 0;
        // A migratable port waits for its guest to answer (below).
        let mut resume = match (&peers.migratable, adopt) {
            (Some(region), Some(adopt)) => Resume::new(
                region.clone(),
                &peers.guest_irqs,
                peers.host_kicks.first(),
                adopt,
            ),
            _ => None,
        };
        if let (Some(l), None) = (&peers.link, &peers.migratable) {
            // The memory is this QEMU's from now on (if the handshake
            // fails, the port is replaced): frames for the port have a
            // reader, and a guest that talks as soon as it has the memory
            // gets answers.
            l.set_up(true);
        }
        let handed = hand_over(&conn, &peers);
        let guest = peers.guest_id;
        drop(peers);
        if let Err(e) = handed {
            warn!(port, error = %e, "the ivshmem handshake with QEMU failed");
            // It may have got the memory before failing.
            drop(conn);
            release(slot, renew);
            continue;
        }
        connected.store(true, Ordering::Relaxed);
        info!(port, guest, "a guest attached over ivshmem");
        // Hold the connection until QEMU goes; refuse a second QEMU
        // meanwhile (the guest side of the port is taken).
        let cfd = conn.as_raw_fd();
        loop {
            if let Some(r) = &resume {
                if r.tick(port) {
                    resume = None;
                }
            }
            let tick = resume.as_ref().map(|_| RESUME_TICK);
            // While it waits, the guest's doorbell is this thread's: a guest
            // that answers rings it, and the adoption is at once.
            let bell = resume.as_ref().and_then(|r| r.doorbell.as_ref());
            let fds = [cfd, lfd, bell.map_or(-1, AsRawFd::as_raw_fd)];
            let Some(ev) = wait(&fds[..2 + usize::from(bell.is_some())], stop, tick) else {
                connected.store(false, Ordering::Relaxed);
                // Stopping: the port goes, and its memory with it.
                return;
            };
            if ev[0] != 0 {
                let mut buf = [0u8; 64];
                match io::Read::read(&mut &conn, &mut buf) {
                    Ok(0) => break,
                    Ok(_) => {} // QEMU sends nothing; ignore whatever comes.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            if ev[2] != 0 {
                if let Some(b) = bell {
                    b.drain();
                }
            }
            if ev[1] != 0 {
                if let Ok((other, _)) = listener.accept() {
                    warn!(port, "a second QEMU tried to attach to a passthrough port already in use; refused");
                    drop(other);
                }
            }
        }
        connected.store(false, Ordering::Relaxed);
        drop(conn);
        info!(
            port,
            "the guest's QEMU went away; the port gets fresh memory for the next one"
        );
        release(slot, renew);
    }
}

/// A migratable port waiting for its guest to say it runs on the port's
/// memory (see the module's "Migration").
struct Resume<'a> {
    region: Arc<Region>,
    irqs: Vec<EventFd>,
    /// The guest's doorbell, which no worker watches until the adoption
    /// (`registry/passthrough.rs`, `switch_port_peers`).
    doorbell: Option<EventFd>,
    epoch: u32,
    adopt: &'a Adopt,
}

impl<'a> Resume<'a> {
    /// None when the guest's vectors cannot be duplicated (the port then
    /// stays down for this QEMU: logged).
    fn new(
        region: Arc<Region>,
        irqs: &[EventFd],
        doorbell: Option<&EventFd>,
        adopt: &'a Adopt,
    ) -> Option<Resume<'a>> {
        let doorbell = doorbell.and_then(|d| d.try_clone().ok());
        let irqs = match irqs.iter().map(EventFd::try_clone).collect() {
            Ok(v) => v,
            Err(e) => {
                warn!(error = %e, "cannot duplicate a migratable port's interrupts; its guest is never adopted");
                return None;
            }
        };
        Some(Resume {
            region,
            irqs,
            doorbell,
            epoch: fresh_epoch(),
            adopt,
        })
    }

    /// One look: adopts the memory once the guest answered this epoch
    /// (true: done), else asks again and raises the guest's vectors.
    fn tick(&self, port: &str) -> bool {
        // Acquire: the guest wrote the ack after it saw the ask; nothing
        // else is read through it (the adoption checks every value).
        if self.region.resume_ack().load(Ordering::Acquire) == self.epoch {
            if !(self.adopt)() {
                warn!(
                    port,
                    "the guest answered, but its memory could not be adopted"
                );
                return true;
            }
            info!(
                port,
                "the guest runs on the port's memory: adopted, the port is up"
            );
            self.raise();
            return true;
        }
        // Release: nothing the guest reads depends on it (it copies the
        // word back), but it is ordered after the region's setup.
        self.region
            .resume_ask()
            .store(self.epoch, Ordering::Release);
        self.raise();
        false
    }

    fn raise(&self) {
        for irq in &self.irqs {
            irq.signal();
        }
    }
}

/// A nonzero epoch no other daemon's port is likely to have used (the
/// source of a migration must not have written this one: a guest's answer
/// to it would be taken for an answer here).
fn fresh_epoch() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    let v = h.finish();
    let e = (v as u32) ^ ((v >> 32) as u32);
    e.max(1)
}

/// The handshake: everything QEMU needs, then the connection stays open.
fn hand_over(conn: &UnixStream, p: &Peers) -> io::Result<()> {
    conn.set_nonblocking(false)?;
    send(conn, IVSHMEM_PROTOCOL_VERSION, None)?;
    send(conn, p.guest_id as i64, None)?;
    send(conn, -1, Some(p.memfd.as_fd()))?;
    for k in &p.host_kicks {
        send(conn, p.host_id as i64, Some(k.as_fd()))?;
    }
    for irq in &p.guest_irqs {
        send(conn, p.guest_id as i64, Some(irq.as_fd()))?;
    }
    conn.set_nonblocking(true)?;
    Ok(())
}

/// One protocol message: a little-endian int64, with a descriptor or not.
fn send(conn: &UnixStream, value: i64, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let bytes = value.to_le_bytes();
    let n = socket::send_with_fds(conn.as_fd(), &bytes, fd.as_slice(), libc::MSG_NOSIGNAL)?;
    if n != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short ivshmem message",
        ));
    }
    Ok(())
}
