//! The ringswitch daemon: the control socket, the registry of switches,
//! ports and pipes, and the worker threads that run the switches.
#![warn(missing_docs)]

pub mod access;
pub mod listen;
pub mod metrics;
pub mod openflow;
mod page;
pub mod passthrough;
pub mod registry;
pub mod service;
pub mod signals;
pub mod upgrade;
pub mod vhost_user;
pub mod worker;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ringswitch_control::proto::*;
use ringswitch_control::{Listener, SeqPacket};
use ringswitch_ring::poll;
use tracing::{debug, info, warn};

use access::{Policy, Role};
pub use registry::budget::{parse_size, Limits, Who};
pub use registry::{Registry, SwitchConfig};
use worker::{Worker, WorkerConfig};

/// Daemon settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Control socket path.
    pub socket: PathBuf,
    /// Worker threads.
    pub workers: usize,
    /// Microseconds a worker keeps polling before it sleeps (0: it sleeps
    /// at once; None, the default: a window that adapts, see
    /// `ringswitch_ring::AdaptiveWait`, and none for a real-time worker).
    pub idle_poll_us: Option<u64>,
    /// Batch size.
    pub batch: u32,
    /// Longest time an interface port's received frames may wait to be
    /// taken together, in microseconds (`serve --rx-coalesce-us`; 0: off,
    /// a worker woken for every frame). The workers coalesce a port's
    /// wake-ups only while its rate makes each look find frames.
    pub rx_coalesce_us: u64,
    /// MAC ageing time in seconds.
    pub mac_age_s: u32,
    /// CPUs to pin workers to (worker i on `worker_cpus[i % len]`); empty:
    /// not pinned.
    pub worker_cpus: Vec<usize>,
    /// Run workers under SCHED_FIFO at this priority (1..99): a woken
    /// worker then preempts a busy-polling neighbour on its CPU at once,
    /// and gives the CPU back when it sleeps. Needs CAP_SYS_NICE.
    pub worker_rt_priority: Option<u8>,
    /// Keep the persistent configuration (switches, ports, VM ports,
    /// attached interfaces) in this file: replayed at start, saved after
    /// every change.
    pub config: Option<PathBuf>,
    /// Members of this group (a name or a number) may connect and open
    /// ports and pipes (`serve --allow-group`).
    pub allow_group: Option<String>,
    /// Members of this group may also do what changes the daemon's
    /// configuration: switches, persistent ports, VM and passthrough
    /// sockets, interfaces (`serve --admin-group`).
    pub admin_group: Option<String>,
    /// VM-facing sockets (vhost-user, passthrough) belong to this group,
    /// mode 0660, so that a hypervisor running as another user (libvirt's
    /// QEMU) may connect to them without administering the daemon
    /// (`serve --vm-socket-group`); without it they follow the admin group.
    pub vm_socket_group: Option<String>,
    /// Most connections one peer uid may hold at once.
    pub max_conns_per_uid: usize,
    /// Shared memory and descriptor budgets.
    pub limits: Limits,
    /// The program to run again on `ctl upgrade` (see [`upgrade`]); none:
    /// upgrades are refused (a daemon embedded in another program).
    pub program: Option<upgrade::Program>,
    /// The service manager to notify (systemd's `NOTIFY_SOCKET`, see
    /// [`service`]): [`serve_until_signalled`] takes it from the
    /// environment, and the control thread feeds its watchdog.
    pub service: Option<service::Manager>,
    /// Serve Prometheus's `/metrics` and the web view on this address
    /// (`serve --metrics`; off when none; port 0: one the kernel picks,
    /// logged at start and told by [`Daemon::metrics_addr`]).
    pub metrics: Option<std::net::SocketAddr>,
}

impl Config {
    /// The workers' idle poll: a fixed spin when asked (`--idle-poll-us`,
    /// 0 for none), else the adaptive window (None), except for a
    /// real-time worker, which never spins unless told to: it would keep
    /// ordinary threads off its CPU.
    pub fn worker_idle_poll(&self) -> Option<Duration> {
        match (self.idle_poll_us, self.worker_rt_priority) {
            (Some(us), _) => Some(Duration::from_micros(us)),
            (None, Some(_)) => Some(Duration::ZERO),
            (None, None) => None,
        }
    }

    /// Defaults for a socket path.
    pub fn new(socket: PathBuf) -> Config {
        Config {
            socket,
            workers: 1,
            idle_poll_us: None,
            batch: ringswitch_switch::DEFAULT_BATCH,
            rx_coalesce_us: DEFAULT_RX_COALESCE_US,
            mac_age_s: ringswitch_switch::learning::DEFAULT_AGE_S,
            worker_cpus: Vec::new(),
            worker_rt_priority: None,
            config: None,
            allow_group: None,
            admin_group: None,
            vm_socket_group: None,
            max_conns_per_uid: DEFAULT_CONNS_PER_UID,
            limits: Limits::default(),
            program: None,
            service: None,
            metrics: None,
        }
    }
}

/// Default of [`Config::max_conns_per_uid`].
pub const DEFAULT_CONNS_PER_UID: usize = 256;

/// Default of [`Config::rx_coalesce_us`]: about one wake-up of a halted
/// vCPU (43-58 µs here), so that coalescing at most doubles the wait a
/// sleeping worker costs a frame anyway.
pub const DEFAULT_RX_COALESCE_US: u64 = 50;

impl Config {
    /// Refuses settings the daemon cannot run with, saying which and why.
    pub fn check(&self) -> Result<(), DaemonError> {
        let max_workers = ringswitch_switch::port::MAX_LEASES;
        if self.workers == 0 || self.workers > max_workers {
            return Err(DaemonError::Config(format!(
                "{} workers is out of range: use 1 to {max_workers}",
                self.workers
            )));
        }
        if !(1..=ringswitch_switch::MAX_BATCH).contains(&self.batch) {
            return Err(DaemonError::Config(format!(
                "a batch of {} is out of range: use 1 to {}",
                self.batch,
                ringswitch_switch::MAX_BATCH
            )));
        }
        if let Some(p) = self.worker_rt_priority {
            if !(1..=99).contains(&p) {
                return Err(DaemonError::Config(format!(
                    "a real-time priority of {p} is out of range: use 1 to 99"
                )));
            }
            if self.idle_poll_us.is_some_and(|us| us > 0) {
                return Err(DaemonError::Config(
                    "--worker-rt-priority with --idle-poll-us would let a spinning worker \
                     starve its CPU: use one or the other"
                        .into(),
                ));
            }
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_conns_per_uid) {
            return Err(DaemonError::Config(format!(
                "{} connections per uid is out of range: use 1 to {MAX_CONNECTIONS}",
                self.max_conns_per_uid
            )));
        }
        let l = &self.limits;
        for (v, opt) in [
            (l.shm_per_conn, "--max-shm-per-conn"),
            (l.shm_per_uid, "--max-shm-per-uid"),
            (l.shm_total, "--max-shm"),
            (l.fds_per_conn, "--max-fds-per-conn"),
            (l.fds_per_uid, "--max-fds-per-uid"),
            (l.fds_total, "--max-fds"),
        ] {
            if v == 0 {
                return Err(DaemonError::Config(format!(
                    "{opt} 0 would refuse every port: give a positive limit"
                )));
            }
        }
        self.policy()?;
        Ok(())
    }

    /// The access policy these settings describe (groups resolved).
    pub fn policy(&self) -> Result<Policy, DaemonError> {
        let group = |g: &Option<String>, opt: &str| -> Result<Option<u32>, DaemonError> {
            g.as_deref()
                .map(|name| {
                    access::resolve_group(name).ok_or_else(|| {
                        DaemonError::Config(format!(
                            "{opt} {name}: there is no such group (give a group name or number)"
                        ))
                    })
                })
                .transpose()
        };
        Ok(Policy {
            daemon_uid: ringswitch_control::socket::euid(),
            allow_gid: group(&self.allow_group, "--allow-group")?,
            admin_gid: group(&self.admin_group, "--admin-group")?,
            vm_gid: group(&self.vm_socket_group, "--vm-socket-group")?,
        })
    }
}

/// This program image's instance: when it started, in nanoseconds since
/// the epoch (set by [`Daemon::start`]). `Hello` tells it, so that `ctl
/// upgrade` knows the daemon answering is the new one, not the old one
/// about to stop.
fn instance() -> u64 {
    static INSTANCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *INSTANCE.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    })
}

/// Why [`serve_until_signalled`] stopped.
enum Stopped {
    /// SIGINT or SIGTERM.
    Signalled,
    /// `ctl upgrade`, to run this binary.
    Upgrade(PathBuf),
}

/// Runs a daemon in the foreground until SIGINT or SIGTERM, then stops it
/// (what `ringswitch serve` and `ringswitchd` do). On an accepted `ctl
/// upgrade` it stops the same way and runs the new binary in this process
/// with the same arguments ([`upgrade`]), returning only if that fails.
pub fn serve_until_signalled(mut cfg: Config) -> Result<(), DaemonError> {
    cfg.check()?;
    cfg.service = service::Manager::from_env();
    let mut notifier = service::Notifier::new(&cfg);
    let program = cfg.program.clone();
    let stop = signals::install().map_err(DaemonError::Signals)?;
    let d = Daemon::start(cfg)?;
    notifier.ready();
    // Acquire: pairs with the signal handler's store.
    let why = loop {
        if stop.load(Ordering::Acquire) {
            break Stopped::Signalled;
        }
        if let Some(b) = d.upgrade_requested() {
            break Stopped::Upgrade(b);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    match &why {
        Stopped::Signalled => {
            info!("stopping");
            notifier.stopping("stopping");
        }
        Stopped::Upgrade(b) => {
            info!(binary = %b.display(), "stopping to upgrade");
            notifier.reloading(&format!("upgrading: running {}", b.display()));
        }
    }
    // Stopping joins every thread; each one notices its stop at once, but
    // the process must go within a second whatever a peer does, so the
    // wait is bounded and what is left is ended with the process.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let stopper = std::thread::Builder::new()
        .name("rs-stop".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            drop(d);
            let _ = done.send(());
        });
    if stopper.is_ok() && finished.recv_timeout(STOP_WAIT).is_err() {
        warn!(
            wait_ms = STOP_WAIT.as_millis() as u64,
            "some threads did not stop in time; exiting without waiting for them"
        );
    }
    match (why, program) {
        (Stopped::Upgrade(binary), Some(program)) => {
            info!(binary = %binary.display(), "running the new binary");
            let source = upgrade::exec(&binary, &program);
            Err(DaemonError::Upgrade { binary, source })
        }
        _ => Ok(()),
    }
}

/// How long [`serve_until_signalled`] waits for the daemon's threads once
/// a stop signal arrived (with the signal's own detection, under a second).
pub const STOP_WAIT: Duration = Duration::from_millis(800);

/// Replays a saved configuration, request by request: what cannot be
/// recreated (an interface that is gone) is logged and left out, and the
/// file is rewritten with what was.
fn restore(registry: &Mutex<Registry>, saved: Vec<Request>, path: &Path) {
    let n = saved.len();
    let mut failed = 0;
    for req in saved {
        let what = serde_json::to_string(&req).unwrap_or_default();
        let (reply, _) = handle(Who::DAEMON, Role::Admin, req, registry);
        if let Some(e) = reply.error {
            failed += 1;
            warn!(request = %what, error = %e.message, "cannot restore part of the saved configuration");
        }
    }
    info!(path = %path.display(), requests = n, failed, "configuration restored");
}

/// Errors starting the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// `ctl upgrade` stopped the daemon and its binary did not run.
    #[error("stopped to upgrade, but cannot run {}", binary.display())]
    Upgrade {
        /// The binary.
        binary: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The socket could not be bound.
    #[error("cannot listen on {}", path.display())]
    Bind {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A worker thread could not start.
    #[error("cannot start a worker thread")]
    Worker(#[source] std::io::Error),
    /// SIGINT and SIGTERM handlers could not be installed.
    #[error("cannot install the SIGINT and SIGTERM handlers")]
    Signals(#[source] std::io::Error),
    /// Bad settings.
    #[error("{0}")]
    Config(String),
    /// The metrics listener could not start (`--metrics`).
    #[error(transparent)]
    Metrics(#[from] metrics::MetricsError),
    /// The socket path cannot be used.
    #[error("cannot listen on {}", path.display())]
    Socket {
        /// Path.
        path: PathBuf,
        /// Why.
        #[source]
        source: listen::ListenError,
    },
}

/// A running daemon. Dropping it stops accepting connections and the
/// workers; ports already handed out keep their memory.
pub struct Daemon {
    registry: Arc<Mutex<Registry>>,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Set by an accepted `upgrade` request (see [`Daemon::upgrade_requested`]).
    upgrade_asked: Arc<Mutex<Option<PathBuf>>>,
    /// The metrics listener (`--metrics`), if asked for.
    metrics: Option<metrics::Metrics>,
}

fn lock(r: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    r.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Daemon {
    /// Binds the socket, starts the workers and the control thread.
    pub fn start(cfg: Config) -> Result<Daemon, DaemonError> {
        cfg.check()?;
        instance();
        // Each port's counters get a set per worker this daemon runs.
        ringswitch_switch::counter_sets_for(cfg.workers);
        let policy = cfg.policy()?;
        // Bound first: an address in use stops the start before anything
        // else is made.
        let metrics_listener = cfg.metrics.map(metrics::bind).transpose()?;
        let bind_err = |source| DaemonError::Bind {
            path: cfg.socket.clone(),
            source,
        };
        // The fallback path's directory must be ours alone: in a shared
        // /tmp another user could have made it first.
        let uid = ringswitch_control::socket::euid();
        if let Some(dir) = cfg.socket.parent() {
            if dir == ringswitch_control::socket::fallback_dir(uid) {
                ringswitch_control::socket::private_dir(dir).map_err(bind_err)?;
            }
        }
        listen::set_state_file(cfg.socket.with_extension("sockets"));
        listen::set_vm_access(policy.vm_socket_access());
        listen::clear(&cfg.socket).map_err(|e| match e {
            listen::ListenError::Live(p) => bind_err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("a daemon is already listening on {}", p.display()),
            )),
            source => DaemonError::Socket {
                path: cfg.socket.clone(),
                source,
            },
        })?;
        let listener =
            Listener::bind(&cfg.socket, policy.control_socket_access()).map_err(bind_err)?;
        listen::record(&cfg.socket, listener.file_id());
        let workers = (0..cfg.workers)
            .map(|i| {
                let cpu = (!cfg.worker_cpus.is_empty())
                    .then(|| cfg.worker_cpus[i % cfg.worker_cpus.len()]);
                let wcfg = WorkerConfig {
                    idle_poll: cfg.worker_idle_poll(),
                    cpu,
                    rt_priority: cfg.worker_rt_priority,
                    rx_coalesce: Duration::from_micros(cfg.rx_coalesce_us),
                };
                Worker::start(i, wcfg)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(DaemonError::Worker)?;
        let mut registry = Registry::new(
            SwitchConfig {
                batch: cfg.batch,
                mac_age_s: cfg.mac_age_s,
            },
            workers,
        );
        // Beside the socket: the same daemon instance owns both.
        let state = cfg.socket.with_extension("attached");
        registry::clean_stale_attachments(&state);
        registry.set_state_file(state);
        registry.set_limits(cfg.limits);
        let (saved, numbers) = match &cfg.config {
            Some(path) => registry::load_config(path).map_err(DaemonError::Config)?,
            None => Default::default(),
        };
        registry.set_port_numbers(numbers);
        let registry = Arc::new(Mutex::new(registry));
        lock(&registry).set_self(Arc::downgrade(&registry));
        if let Some(path) = &cfg.config {
            // Replayed before the file is set: a crash while restoring
            // leaves the file as it was.
            restore(&registry, saved, path);
            let mut r = lock(&registry);
            r.set_config_file(path.clone());
            r.save_config();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (registry.clone(), stop.clone());
        let upgrade_asked = Arc::new(Mutex::new(None));
        let plane = ControlPlane {
            policy,
            max_conns_per_uid: cfg.max_conns_per_uid,
            program: cfg.program.clone(),
            upgrade_asked: upgrade_asked.clone(),
            service: cfg.service.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("rs-control".into())
            .stack_size(256 * 1024)
            .spawn(move || control_loop(listener, plane, r, s))
            .map_err(DaemonError::Worker)?;
        let metrics = metrics_listener
            .map(|l| metrics::Metrics::start(l, registry.clone()))
            .transpose()?;
        info!(socket = %cfg.socket.display(), workers = cfg.workers, "ringswitch daemon listening");
        Ok(Daemon {
            registry,
            socket: cfg.socket,
            stop,
            thread: Some(thread),
            upgrade_asked,
            metrics,
        })
    }

    /// The binary an accepted `upgrade` request asked the daemon to run,
    /// if one did.
    pub fn upgrade_requested(&self) -> Option<PathBuf> {
        self.upgrade_asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The address of the metrics listener (`--metrics`), if it runs.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(metrics::Metrics::addr)
    }

    /// The registry (for embedding and tests).
    pub fn registry(&self) -> &Arc<Mutex<Registry>> {
        &self.registry
    }

    /// Nanoseconds the workers spent forwarding.
    pub fn worker_busy_ns(&self) -> u64 {
        lock(&self.registry)
            .workers()
            .iter()
            .map(|w| w.busy_ns())
            .sum()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // The metrics listener first: it reads the registry.
        drop(self.metrics.take());
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Port threads are joined here, after the lock: a passthrough
        // thread may be waiting for it to renew its port's memory, and
        // must not outlive the daemon holding the registry.
        let threads = lock(&self.registry).stop_threads();
        drop(threads);
        // The listener removed its file (if still its own).
        listen::forget(&self.socket);
    }
}

/// Most client connections served at once.
pub const MAX_CONNECTIONS: usize = 4096;

/// The control plane's settings.
struct ControlPlane {
    policy: Policy,
    max_conns_per_uid: usize,
    /// What `upgrade` runs by default.
    program: Option<upgrade::Program>,
    /// Where an accepted `upgrade` leaves its binary.
    upgrade_asked: Arc<Mutex<Option<PathBuf>>>,
    /// The service manager whose watchdog this thread feeds.
    service: Option<service::Manager>,
}

/// A client connection and who is behind it.
struct Client {
    who: Who,
    role: Role,
    sock: SeqPacket,
}

/// Refused connections kept open after their refusal was sent, so that a
/// client that writes its first request before reading reads the reason
/// instead of a broken pipe: at most this many, each for at most
/// [`LINGER`].
const MAX_LINGERING: usize = 64;
const LINGER: Duration = Duration::from_secs(2);

/// Shortest and longest pause of the accept loop when the daemon is out of
/// descriptors or memory.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A warning a peer can trigger, logged at most once per period with the
/// number of times it was held back.
struct RateLimited {
    period: Duration,
    last: Option<Instant>,
    held: u64,
}

impl RateLimited {
    const fn new(period: Duration) -> RateLimited {
        RateLimited {
            period,
            last: None,
            held: 0,
        }
    }

    /// Whether to log now, and how many were held back since the last.
    fn ready(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.period)
        {
            self.held += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}

/// Whether an accept error means the daemon (or the system) is out of
/// descriptors or memory: the connection stays queued and the listener
/// readable, so accepting again at once would spin.
fn out_of_resources(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// A descriptor kept open to be given up when the daemon runs out: with it
/// free, the connection at the head of the queue can be accepted, told why,
/// and closed, instead of waiting in the backlog.
fn reserve_fd() -> Option<std::os::fd::OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(Into::into)
}

/// The control plane: one thread, one poll set with the listener and every
/// client connection. Requests are short and never block, so one thread
/// serves all clients, and the daemon's memory does not grow with threads.
fn control_loop(
    listener: Listener,
    plane: ControlPlane,
    registry: Arc<Mutex<Registry>>,
    stop: Arc<AtomicBool>,
) {
    let mut next_conn: u64 = 1;
    let mut conns: Vec<Client> = Vec::new();
    let mut per_uid: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    let mut buf = SeqPacket::message_buffer();
    // Requests served since the control plane last went quiet.
    let mut served = false;
    // Out of descriptors: the listener is left out of the poll set until
    // `accept_at`, for a pause that doubles while it lasts.
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut accept_at: Option<Instant> = None;
    let mut reserve = reserve_fd();
    let mut accept_log = RateLimited::new(Duration::from_secs(10));
    let mut refuse_log = RateLimited::new(Duration::from_secs(10));
    let mut lingering: Vec<(SeqPacket, Instant)> = Vec::new();
    // Fed each time round: a control thread that stops going round (a
    // lock never released, a request that blocks) gets the daemon
    // restarted by its service manager.
    let mut watchdog = service::Watchdog::new(plane.service.as_ref());
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        watchdog.feed(now);
        lingering.retain(|(_, until)| *until > now);
        let paused = accept_at.filter(|&t| t > now);
        pfds.clear();
        // A negative fd is skipped by poll.
        let listening = if paused.is_some() {
            -1
        } else {
            listener.as_fd().as_raw_fd()
        };
        pfds.push(poll::watch(listening, libc::POLLIN));
        for c in &conns {
            pfds.push(poll::watch(c.sock.as_fd().as_raw_fd(), libc::POLLIN));
        }
        for (s, _) in &lingering {
            pfds.push(poll::watch(s.as_fd().as_raw_fd(), libc::POLLIN));
        }
        // The timeout bounds the wait so `stop` is noticed.
        let (min, max) = (Duration::from_millis(1), Duration::from_millis(200));
        let timeout = paused.map_or(max, |t| t.duration_since(now).clamp(min, max));
        let timeout = watchdog.wait_at_most(now, timeout);
        let Ok(n) = poll::poll_fds(&mut pfds, Some(timeout)) else {
            continue;
        };
        if n == 0 {
            if std::mem::take(&mut served) {
                give_back_free_memory();
            }
            continue;
        }
        served = true;
        // A refused client that wrote or hung up has its refusal (or
        // never will read it): close it, after reading what it sent (a
        // socket closed with unread messages resets the peer's, and the
        // refusal would be lost).
        let first_lingering = 1 + conns.len();
        for i in (0..lingering.len()).rev() {
            if pfds[first_lingering + i].revents != 0 {
                let (s, _) = lingering.swap_remove(i);
                for _ in 0..16 {
                    match s.recv(&mut buf) {
                        Ok(m) if m.len > 0 || m.truncated => {}
                        _ => break,
                    }
                }
            }
        }
        // Connections first, from the back, so swap_remove keeps the
        // remaining indexes matched with `pfds`.
        for i in (0..conns.len()).rev() {
            if pfds[i + 1].revents == 0 {
                continue;
            }
            let c = &conns[i];
            if !serve_one(c.who, c.role, &c.sock, &mut buf, &registry, &plane) {
                let c = conns.swap_remove(i);
                if let Some(k) = per_uid.get_mut(&c.who.uid) {
                    *k -= 1;
                    if *k == 0 {
                        per_uid.remove(&c.who.uid);
                    }
                }
                lock(&registry).disconnect(c.who.conn);
                debug!(conn = c.who.conn, "client disconnected");
            }
        }
        if pfds[0].revents & libc::POLLIN == 0 {
            continue;
        }
        let sock = match listener.accept() {
            Ok(sock) => sock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if out_of_resources(&e) => {
                accept_at = Some(Instant::now() + backoff);
                if let Some(held) = accept_log.ready() {
                    warn!(error = %e, pause_ms = backoff.as_millis() as u64, held_back = held, "cannot accept a connection: the daemon is out of descriptors or memory; pausing new connections");
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                // Tell the client at the head of the queue, with the
                // descriptor kept for this.
                if reserve.take().is_some() {
                    if let Ok(s) = listener.accept() {
                        send_reply(
                            &s,
                            &Reply::err(ErrorReply::new(
                                ErrorCode::Limit,
                                "the daemon is out of file descriptors: try again later",
                            )),
                            &[],
                        );
                    }
                    reserve = reserve_fd();
                }
                continue;
            }
            Err(e) => {
                if let Some(held) = accept_log.ready() {
                    warn!(error = %e, held_back = held, "accept failed");
                }
                continue;
            }
        };
        backoff = ACCEPT_BACKOFF_MIN;
        accept_at = None;
        if reserve.is_none() {
            reserve = reserve_fd();
        }
        let (who, role) = match admit(&sock, &plane, &per_uid, conns.len()) {
            Ok(a) => a,
            Err(e) => {
                if let Some(held) = refuse_log.ready() {
                    warn!(reason = %e.message, held_back = held, "connection refused");
                }
                if send_reply(&sock, &Reply::err(e), &[])
                    && lingering.len() < MAX_LINGERING
                    && sock.set_nonblocking().is_ok()
                {
                    lingering.push((sock, Instant::now() + LINGER));
                }
                continue;
            }
        };
        let who = Who {
            conn: next_conn,
            uid: who,
        };
        next_conn += 1;
        debug!(conn = who.conn, uid = who.uid, ?role, "client connected");
        *per_uid.entry(who.uid).or_default() += 1;
        conns.push(Client { who, role, sock });
    }
    let mut r = lock(&registry);
    for c in conns {
        r.disconnect(c.who.conn);
    }
}

/// Decides whether a new connection may stay: who it is (SO_PEERCRED),
/// what the policy lets it do, and whether its uid has room for one more
/// connection. Returns the peer's uid and role, or the reply that says why
/// not.
fn admit(
    sock: &SeqPacket,
    plane: &ControlPlane,
    per_uid: &std::collections::HashMap<u32, usize>,
    open: usize,
) -> Result<(u32, Role), ErrorReply> {
    let cred = sock.peer_cred().map_err(|e| {
        ErrorReply::new(
            ErrorCode::Internal,
            format!("cannot read the credentials of the connection: {e}"),
        )
    })?;
    let groups = if plane.policy.uses_groups() {
        sock.peer_groups().unwrap_or_default()
    } else {
        Vec::new()
    };
    let role = plane
        .policy
        .role(cred.uid, cred.gid, &groups)
        .ok_or_else(|| {
            ErrorReply::new(
                ErrorCode::Denied,
                format!(
                    "uid {} may not use this daemon: it serves its own uid, root{}",
                    cred.uid,
                    plane.policy.describe_groups()
                ),
            )
        })?;
    if open >= MAX_CONNECTIONS {
        return Err(ErrorReply::new(
            ErrorCode::Limit,
            format!("the daemon already serves {MAX_CONNECTIONS} connections, the most it serves"),
        ));
    }
    let mine = per_uid.get(&cred.uid).copied().unwrap_or(0);
    if mine >= plane.max_conns_per_uid {
        return Err(ErrorReply::new(
            ErrorCode::Limit,
            format!(
                "uid {} already has {mine} connections to the daemon, the most one user may have: close some, or raise the limit (serve --max-conns-per-uid)",
                cred.uid
            ),
        ));
    }
    Ok((cred.uid, role))
}

/// Returns the heap pages freed since the last call to the system, once a
/// burst of requests is over: a reply listing many ports or a burst of
/// port creations leaves freed memory behind that would otherwise stay
/// resident for the daemon's life. Never on the data path: only the
/// control thread calls it, 200 ms after its last request.
fn give_back_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers and only releases free memory
    // of the allocator's own arenas; it is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn send_reply(sock: &SeqPacket, reply: &Reply, fds: &[BorrowedFd<'_>]) -> bool {
    match serde_json::to_vec(reply) {
        Ok(bytes) if bytes.len() > MAX_UNPAGED_REPLY => {
            // Only a listing asked for whole grows this large: say how to
            // ask for it instead of failing the connection.
            let e = Reply::err(ErrorReply::new(
                ErrorCode::Limit,
                format!(
                    "the reply is {} bytes, more than one message carries ({MAX_UNPAGED_REPLY}): \
                     ask for it in pages with the page request (docs/protocol.md)",
                    bytes.len()
                ),
            ));
            send_reply(sock, &e, &[])
        }
        // Never block the control plane on one client: a client that does not
        // read its replies until its socket is full is disconnected.
        Ok(bytes) => sock.try_send(&bytes, fds).is_ok(),
        Err(_) => false,
    }
}

fn bad(msg: impl Into<String>) -> Reply {
    Reply::err(ErrorReply::new(ErrorCode::BadRequest, msg))
}

/// Reads and answers one request from a readable connection. Returns false
/// when the connection is over (hang-up, crash, or a failed reply).
fn serve_one(
    who: Who,
    role: Role,
    sock: &SeqPacket,
    buf: &mut [u8],
    registry: &Mutex<Registry>,
    plane: &ControlPlane,
) -> bool {
    let conn = who.conn;
    let m = match sock.recv(buf) {
        Ok(m) => m,
        Err(e) => {
            debug!(conn, error = %e, "client socket failed");
            return false;
        }
    };
    if m.len == 0 && !m.truncated {
        return false; // hung up (or crashed)
    }
    // Validate in a fixed order: descriptors, size, body.
    if !m.fds.is_empty() || m.fds_truncated {
        drop(m.fds);
        return send_reply(
            sock,
            &bad("requests carry no file descriptors; the ones sent were closed"),
            &[],
        );
    }
    if m.truncated || m.len > MAX_MESSAGE {
        return send_reply(
            sock,
            &bad(format!("the request is larger than {MAX_MESSAGE} bytes")),
            &[],
        );
    }
    let req: Request = match serde_json::from_slice(&buf[..m.len]) {
        Ok(r) => r,
        Err(e) => {
            return send_reply(
                sock,
                &bad(format!("the request is not a valid command: {e}")),
                &[],
            )
        }
    };
    let (reply, fds) = match req {
        Request::Upgrade { binary } => (upgrade_request(who, role, binary, plane), vec![]),
        req => handle(who, role, req, registry),
    };
    let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
    send_reply(sock, &reply, &borrowed)
}

/// Answers `upgrade`: the binary checked ([`upgrade::check_binary`]) and,
/// if it runs, left for [`serve_until_signalled`], which stops the daemon
/// once this reply is on its way.
///
/// Naming another binary runs it as the daemon's user: only root and that
/// user may (a member of `--admin-group` administers the switch, not the
/// account it runs as), and only a binary that they own and no one else
/// may write ([`upgrade::check_binary`]).
fn upgrade_request(who: Who, role: Role, binary: Option<String>, plane: &ControlPlane) -> Reply {
    let req = Request::Upgrade {
        binary: binary.clone(),
    };
    if let Err(e) = access::allowed(role, &req) {
        return Reply::err(e);
    }
    let daemon_uid = plane.policy.daemon_uid;
    if binary.is_some() && who.uid != 0 && who.uid != daemon_uid {
        return Reply::err(ErrorReply::new(
            ErrorCode::Denied,
            "upgrade --binary runs a program as the daemon's user: only root or that user may name one; \
             an administrator may upgrade to the binary at the daemon's own path",
        ));
    }
    let Some(program) = &plane.program else {
        return Reply::err(ErrorReply::new(
            ErrorCode::Unsupported,
            "this daemon runs inside another program and cannot restart itself",
        ));
    };
    let path = binary.map_or_else(|| program.path.clone(), PathBuf::from);
    let version = match upgrade::check_binary(&path, daemon_uid) {
        Ok(v) => v,
        Err(e) => return Reply::err(e),
    };
    info!(binary = %path.display(), version = %version, "upgrade requested");
    let reply = serde_json::json!({
        "binary": path,
        "version": version,
        "pid": std::process::id(),
    });
    *plane
        .upgrade_asked
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(path);
    Reply::ok(&reply)
}

fn handle(
    who: Who,
    role: Role,
    req: Request,
    registry: &Mutex<Registry>,
) -> (Reply, Vec<std::os::fd::OwnedFd>) {
    if let Err(e) = access::allowed(role, &req) {
        return (Reply::err(e), vec![]);
    }
    let conn = who.conn;
    let mut r = lock(registry);
    r.set_client(who);
    // The cursor of the next page, for a page of a listing.
    let mut next = None;
    let changes_config = matches!(
        req,
        Request::SwitchAdd { .. }
            | Request::SwitchSet { .. }
            | Request::SwitchDel { .. }
            | Request::PortAdd { .. }
            | Request::PortDel { .. }
            | Request::Attach { .. }
            | Request::Detach { .. }
    );
    let res: Result<(serde_json::Value, Vec<std::os::fd::OwnedFd>), ErrorReply> = match req {
        Request::Hello { version } => {
            if version != PROTOCOL_VERSION {
                Err(ErrorReply::new(
                    ErrorCode::Unsupported,
                    format!("this daemon speaks protocol {PROTOCOL_VERSION}, not {version}"),
                ))
            } else {
                Ok((
                    serde_json::json!({
                        "version": PROTOCOL_VERSION,
                        "daemon": env!("CARGO_PKG_VERSION"),
                        "pid": std::process::id(),
                        "instance": instance(),
                    }),
                    vec![],
                ))
            }
        }
        Request::SwitchAdd { name } => result(r.switch_add(&name)),
        Request::SwitchDel { name } => result(r.switch_del(&name)),
        Request::SwitchList => result(Ok(r.switch_list())),
        Request::SwitchSet { name, openflow } => result(r.switch_set(&name, &openflow)),
        Request::Flows { switch } => result(r.flows(&switch)),
        Request::PortAdd {
            name,
            vhost_user,
            passthrough,
            vnet_hdr,
            migratable,
            vlan,
            ofport,
        } => result(r.port_add(
            &name,
            vhost_user.as_ref(),
            passthrough.as_deref(),
            vnet_hdr,
            migratable,
            vlan.as_ref(),
            ofport,
        )),
        Request::PortDel { name } => result(r.port_del(&name)),
        Request::PortList { switch } => result(r.port_list(switch.as_deref())),
        Request::Stats { switch } => result(r.stats(switch.as_deref())),
        Request::Workers => result(Ok::<_, registry::RegistryError>(r.worker_stats())),
        Request::Macs { switch } => result(r.macs(&switch)),
        Request::Open {
            name,
            pipes,
            in_port_memory,
        } => match r.open(conn, &name, pipes, in_port_memory) {
            Ok((o, fds)) => Ok((serde_json::to_value(o).unwrap_or_default(), fds)),
            Err(e) => Err(e.into()),
        },
        Request::Close { handle } => result(r.close(conn, handle)),
        // Answered by the control plane (`upgrade_request`), never here: a
        // saved configuration cannot hold it.
        Request::Upgrade { .. } => Err(ErrorReply::new(
            ErrorCode::BadRequest,
            "an upgrade is asked for on a connection, not replayed",
        )),
        Request::Attach {
            switch,
            nic,
            host,
            vlan,
        } => result(r.attach(&switch, nic.as_ref(), host.as_ref(), vlan.as_ref())),
        Request::Detach { name } => result(r.detach(&name)),
        Request::Page { request, after } => match *request {
            // Flows are paged where they are listed: only a page's flows
            // are encoded.
            Request::Flows { switch } => r.flows_page(&switch, &after).map_err(Into::into),
            other => listing(&r, other).and_then(|v| page::page(v, &after)),
        }
        .map(|(v, n)| {
            next = n;
            (v, vec![])
        }),
    };
    if changes_config && res.is_ok() {
        r.save_config();
    }
    // Threads of removed ports are joined after the lock is released, so
    // one that is slow to stop never holds up other requests.
    let retired = r.take_retired();
    drop(r);
    drop(retired);
    match res {
        Ok((v, fds)) => (
            Reply {
                ok: true,
                result: Some(v),
                error: None,
                next,
            },
            fds,
        ),
        Err(e) => (Reply::err(e), vec![]),
    }
}

/// A registry request's result as a reply's result (no descriptors), or its
/// error as the protocol's ([`registry::RegistryError`] maps itself).
fn result<T: serde::Serialize>(
    res: Result<T, registry::RegistryError>,
) -> Result<(serde_json::Value, Vec<std::os::fd::OwnedFd>), ErrorReply> {
    match res {
        Ok(v) => Ok((serde_json::to_value(v).unwrap_or_default(), vec![])),
        Err(e) => Err(e.into()),
    }
}

/// The whole listing a page is cut from.
fn listing(r: &Registry, req: Request) -> Result<serde_json::Value, ErrorReply> {
    let v = match req {
        Request::SwitchList => serde_json::to_value(r.switch_list()),
        Request::PortList { switch } => serde_json::to_value(r.port_list(switch.as_deref())?),
        Request::Stats { switch } => serde_json::to_value(r.stats(switch.as_deref())?),
        Request::Macs { switch } => serde_json::to_value(r.macs(&switch)?),
        Request::Flows { switch } => serde_json::to_value(r.flows(&switch)?),
        _ => {
            return Err(ErrorReply::new(
                ErrorCode::BadRequest,
                "only listings come in pages: switch-list, port-list, stats, macs and flows",
            ))
        }
    };
    v.map_err(|e| ErrorReply::new(ErrorCode::Internal, format!("encoding the listing: {e}")))
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn workers_spin_adaptively_unless_told_or_real_time() {
        let mut c = Config::new(PathBuf::from("/x"));
        assert_eq!(c.worker_idle_poll(), None, "the default adapts");
        c.worker_rt_priority = Some(10);
        assert_eq!(
            c.worker_idle_poll(),
            Some(Duration::ZERO),
            "a real-time worker never spins unless told to"
        );
        c.worker_rt_priority = None;
        c.idle_poll_us = Some(0);
        assert_eq!(c.worker_idle_poll(), Some(Duration::ZERO));
        c.idle_poll_us = Some(50);
        assert_eq!(c.worker_idle_poll(), Some(Duration::from_micros(50)));
        c.worker_rt_priority = Some(10);
        assert!(c.check().is_err(), "a fixed spin with real-time priority");
    }
}
