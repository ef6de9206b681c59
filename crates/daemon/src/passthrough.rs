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

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ringswitch_control::socket;
use ringswitch_ring::{poll, EventFd};
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
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PassthroughServer {
    /// Listens on `path` for the QEMU of `port`'s guest, handing it
    /// `peers`; after each QEMU, `renew` asks for fresh memory. `tag`
    /// tells this server from a later one of the same name.
    pub fn start(
        tag: u64,
        port: &str,
        path: &Path,
        peers: Peers,
        renew: Renew,
    ) -> Result<PassthroughServer, PassthroughError> {
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
            .spawn(move || run(&name, listener, &sl, &renew, &st, &co))?;
        info!(port, path = %path.display(), vectors, "passthrough port listening for QEMU's ivshmem-doorbell (start it with vectors={vectors})");
        Ok(PassthroughServer {
            tag,
            stop,
            connected,
            slot,
            path: path.to_path_buf(),
            thread: Some(thread),
        })
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

/// Polls `fds` for input; returns their revents, or None when `stop` fired.
fn wait(fds: &[RawFd], stop: &EventFd) -> Option<[i16; 2]> {
    let mut p = [poll::watch(stop.as_raw_fd(), libc::POLLIN); 3];
    for (i, &fd) in fds.iter().take(2).enumerate() {
        p[i + 1].fd = fd;
    }
    let n = 1 + fds.len().min(2);
    match poll::poll_fds(&mut p[..n], None) {
        Err(e) => (e.kind() == io::ErrorKind::Interrupted).then_some([0, 0]),
        Ok(_) if p[0].revents != 0 => None,
        Ok(_) => Some([p[1].revents, p[2].revents]),
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
    stop: &EventFd,
    connected: &AtomicBool,
) {
    let lfd = listener.as_raw_fd();
    let mut refused: u64 = 0;
    while let Some(ev) = wait(&[lfd], stop) {
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
        if let Some(l) = &peers.link {
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
            let Some(ev) = wait(&[cfd, lfd], stop) else {
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
