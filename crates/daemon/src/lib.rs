//! The ringswitch daemon: the control socket, the registry of switches,
//! ports and pipes, and the worker threads that run the switches.
#![warn(missing_docs)]

pub mod registry;
pub mod signals;
pub mod worker;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ringswitch_control::proto::*;
use ringswitch_control::{Listener, SeqPacket};
use tracing::{debug, info, warn};

pub use registry::{Registry, SwitchConfig};
use worker::{Worker, WorkerConfig};

/// Daemon settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Control socket path.
    pub socket: PathBuf,
    /// Worker threads.
    pub workers: usize,
    /// Microseconds a worker keeps polling before it sleeps.
    pub idle_poll_us: u64,
    /// Batch size.
    pub batch: u32,
    /// MAC ageing time in seconds.
    pub mac_age_s: u32,
    /// CPUs to pin workers to (worker i on `worker_cpus[i % len]`); empty:
    /// not pinned.
    pub worker_cpus: Vec<usize>,
}

impl Config {
    /// Defaults for a socket path.
    pub fn new(socket: PathBuf) -> Config {
        Config {
            socket,
            workers: 1,
            idle_poll_us: 0,
            batch: ringswitch_switch::DEFAULT_BATCH,
            mac_age_s: ringswitch_switch::learning::DEFAULT_AGE_S,
            worker_cpus: Vec::new(),
        }
    }
}

/// Errors starting the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
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
    /// Bad settings.
    #[error("{0}")]
    Config(String),
}

/// A running daemon. Dropping it stops accepting connections and the
/// workers; ports already handed out keep their memory.
pub struct Daemon {
    registry: Arc<Mutex<Registry>>,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock(r: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    r.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Daemon {
    /// Binds the socket, starts the workers and the accept thread.
    pub fn start(cfg: Config) -> Result<Daemon, DaemonError> {
        if cfg.workers == 0 || cfg.workers > 64 {
            return Err(DaemonError::Config(format!(
                "{} workers is out of range: use 1 to 64",
                cfg.workers
            )));
        }
        let listener = Listener::bind(&cfg.socket).map_err(|source| DaemonError::Bind {
            path: cfg.socket.clone(),
            source,
        })?;
        let workers = (0..cfg.workers)
            .map(|i| {
                let cpu = (!cfg.worker_cpus.is_empty())
                    .then(|| cfg.worker_cpus[i % cfg.worker_cpus.len()]);
                let wcfg = WorkerConfig {
                    idle_poll: Duration::from_micros(cfg.idle_poll_us),
                    cpu,
                };
                Worker::start(i, wcfg)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(DaemonError::Worker)?;
        let registry = Arc::new(Mutex::new(Registry::new(
            SwitchConfig {
                batch: cfg.batch,
                mac_age_s: cfg.mac_age_s,
            },
            workers,
        )));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (registry.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("rs-accept".into())
            .stack_size(256 * 1024)
            .spawn(move || accept_loop(listener, r, s))
            .map_err(DaemonError::Worker)?;
        info!(socket = %cfg.socket.display(), workers = cfg.workers, "ringswitch daemon listening");
        Ok(Daemon {
            registry,
            socket: cfg.socket,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
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
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn poll_readable(fd: BorrowedFd<'_>, ms: i32) -> bool {
    matches!(
        ringswitch_ring::eventfd::poll_in(fd.as_raw_fd(), Some(Duration::from_millis(ms as u64))),
        Ok(true)
    )
}

fn accept_loop(listener: Listener, registry: Arc<Mutex<Registry>>, stop: Arc<AtomicBool>) {
    static NEXT_CONN: AtomicU64 = AtomicU64::new(1);
    while !stop.load(Ordering::Acquire) {
        if !poll_readable(listener.as_fd(), 200) {
            continue;
        }
        match listener.accept() {
            Ok(sock) => {
                let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
                let r = registry.clone();
                let s = stop.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("rs-conn{conn}"))
                    .stack_size(256 * 1024)
                    .spawn(move || serve_conn(conn, sock, r, s));
                if let Err(e) = spawned {
                    warn!(error = %e, "cannot start a thread for a new client; refusing it");
                }
            }
            Err(e) => warn!(error = %e, "accept failed"),
        }
    }
}

fn send_reply(sock: &SeqPacket, reply: &Reply, fds: &[BorrowedFd<'_>]) -> bool {
    match serde_json::to_vec(reply) {
        Ok(bytes) => sock.send(&bytes, fds).is_ok(),
        Err(_) => false,
    }
}

fn bad(msg: impl Into<String>) -> Reply {
    Reply::err(ErrorReply::new(ErrorCode::BadRequest, msg))
}

fn serve_conn(conn: u64, sock: SeqPacket, registry: Arc<Mutex<Registry>>, stop: Arc<AtomicBool>) {
    debug!(conn, "client connected");
    let mut buf = SeqPacket::message_buffer();
    loop {
        if stop.load(Ordering::Acquire) {
            break;
        }
        // Wake up now and then to notice a daemon shutdown.
        if !poll_readable(sock.as_fd(), 500) {
            continue;
        }
        let m = match sock.recv(&mut buf) {
            Ok(m) => m,
            Err(e) => {
                debug!(conn, error = %e, "client socket failed");
                break;
            }
        };
        if m.len == 0 && !m.truncated {
            break; // hung up (or crashed)
        }
        // Validate in a fixed order: descriptors, size, body.
        if !m.fds.is_empty() || m.fds_truncated {
            drop(m.fds);
            send_reply(
                &sock,
                &bad("requests carry no file descriptors; the ones sent were closed"),
                &[],
            );
            continue;
        }
        if m.truncated || m.len > MAX_MESSAGE {
            send_reply(
                &sock,
                &bad(format!("the request is larger than {MAX_MESSAGE} bytes")),
                &[],
            );
            continue;
        }
        let req: Request = match serde_json::from_slice(&buf[..m.len]) {
            Ok(r) => r,
            Err(e) => {
                send_reply(
                    &sock,
                    &bad(format!("the request is not a valid command: {e}")),
                    &[],
                );
                continue;
            }
        };
        let (reply, fds) = handle(conn, req, &registry);
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        if !send_reply(&sock, &reply, &borrowed) {
            break;
        }
    }
    lock(&registry).disconnect(conn);
    debug!(conn, "client disconnected");
}

fn handle(
    conn: u64,
    req: Request,
    registry: &Mutex<Registry>,
) -> (Reply, Vec<std::os::fd::OwnedFd>) {
    let mut r = lock(registry);
    let res: Result<(serde_json::Value, Vec<std::os::fd::OwnedFd>), ErrorReply> = match req {
        Request::Hello { version } => {
            if version != PROTOCOL_VERSION {
                Err(ErrorReply::new(
                    ErrorCode::Unsupported,
                    format!("this daemon speaks protocol {PROTOCOL_VERSION}, not {version}"),
                ))
            } else {
                Ok((
                    serde_json::json!({"version": PROTOCOL_VERSION, "daemon": env!("CARGO_PKG_VERSION")}),
                    vec![],
                ))
            }
        }
        Request::SwitchAdd { name } => r
            .switch_add(&name)
            .map(|_| (serde_json::Value::Null, vec![])),
        Request::SwitchDel { name } => r
            .switch_del(&name)
            .map(|_| (serde_json::Value::Null, vec![])),
        Request::SwitchList => Ok((
            serde_json::to_value(r.switch_list()).unwrap_or_default(),
            vec![],
        )),
        Request::PortAdd { name } => r.port_add(&name).map(|_| (serde_json::Value::Null, vec![])),
        Request::PortDel { name } => r.port_del(&name).map(|_| (serde_json::Value::Null, vec![])),
        Request::PortList { switch } => r
            .port_list(switch.as_deref())
            .map(|v| (serde_json::to_value(v).unwrap_or_default(), vec![])),
        Request::Stats { switch } => r
            .stats(switch.as_deref())
            .map(|v| (serde_json::to_value(v).unwrap_or_default(), vec![])),
        Request::Macs { switch } => r
            .macs(&switch)
            .map(|v| (serde_json::to_value(v).unwrap_or_default(), vec![])),
        Request::Open { name } => r
            .open(conn, &name)
            .map(|(o, fds)| (serde_json::to_value(o).unwrap_or_default(), fds)),
        Request::Close { handle } => r
            .close(conn, handle)
            .map(|_| (serde_json::Value::Null, vec![])),
    };
    match res {
        Ok((v, fds)) => (
            Reply {
                ok: true,
                result: Some(v),
                error: None,
            },
            fds,
        ),
        Err(e) => (Reply::err(e), vec![]),
    }
}
