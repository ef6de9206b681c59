//! The daemon as a service: systemd's notification protocol (sd_notify(3)),
//! so that a `Type=notify` unit (dist/systemd/ringswitch.service) knows when
//! the daemon is ready, that its control thread is alive (the watchdog),
//! when it restarts in place (`ctl upgrade`) and when it stops. Every hook
//! is a no-op without `NOTIFY_SOCKET` (a daemon started by hand, or one
//! embedded in another program).
//!
//! The messages are the `sd-notify` crate's [`NotifyState`]s: the
//! protocol's vocabulary and the monotonic clock it wants, in pure Rust
//! with no dependency beyond libc (`libsystemd` would bring nix, serde and
//! hashing crates into a daemon whose resident memory is measured). They
//! are not sent with `sd_notify::notify`, which opens a blocking socket for
//! every message (as `libsystemd::daemon::notify` does): a service manager
//! whose receive queue is full would then stop the control thread. Here
//! each sender keeps one non-blocking datagram socket, and a message that
//! would block is dropped and counted (the next WATCHDOG=1 is due half a
//! timeout later).
//!
//! What is said when (sd_notify(3); systemd.service(5), `Type=notify` and
//! `Type=notify-reload`):
//!
//! - `READY=1` and `STATUS=` once the control socket accepts connections
//!   and `--config` was replayed ([`crate::serve_until_signalled`]);
//! - `WATCHDOG=1` from the control thread every half of `WATCHDOG_USEC`,
//!   if `WATCHDOG_PID` is unset or this process (sd_watchdog_enabled(3)):
//!   a control thread that stops going round stops feeding it, and systemd
//!   restarts the daemon;
//! - `ctl upgrade` runs a new binary in this same process
//!   ([`crate::upgrade`]): the old program says `RELOADING=1` with
//!   `MONOTONIC_USEC=` (a reload in progress; systemd 253 and later want
//!   the timestamp with it) and feeds the watchdog once more, and the new
//!   program says `READY=1` again when it listens, which ends the reload.
//!   Not `STOPPING=1`: systemd would then wait for the process to exit and
//!   kill it after `TimeoutStopSec`. Not `MAINPID=`: the PID stays;
//! - `STOPPING=1` on SIGINT or SIGTERM, before the daemon stops.
//!
//! Without a manager every hook is an inlined test of an `Option`, and
//! the rest is out of line: the code an idle daemon runs stays where
//! crates/cli/link/ringswitchd-hot.ld gathers it (its resident memory is
//! counted in 64 KiB windows of code, crates/cli/tests/daemon_binary.rs).

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

use sd_notify::NotifyState;
use tracing::{debug, warn};

/// Why the service manager cannot be notified.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// `NOTIFY_SOCKET` names no unix socket this daemon can reach.
    #[error("NOTIFY_SOCKET={0:?} is neither an absolute path nor an abstract socket name (@name)")]
    Address(String),
    /// The sending socket could not be made.
    #[error("cannot open a socket to notify the service manager")]
    Socket(#[source] io::Error),
}

/// The service manager that started the daemon, as the environment names
/// it: where to send notifications, and the watchdog's timeout if it is
/// this process's.
#[derive(Clone, Debug)]
pub struct Manager {
    addr: SocketAddr,
    watchdog: Option<Duration>,
}

impl Manager {
    /// The manager named by `NOTIFY_SOCKET`, `WATCHDOG_USEC` and
    /// `WATCHDOG_PID`; none without `NOTIFY_SOCKET` (or with one this
    /// daemon cannot use, which is logged). The variables stay set: a
    /// daemon that `ctl upgrade` runs again in this process reads them
    /// again.
    #[inline]
    pub fn from_env() -> Option<Manager> {
        let raw = std::env::var_os("NOTIFY_SOCKET")?;
        Manager::named(&raw)
    }

    #[cold]
    fn named(raw: &OsStr) -> Option<Manager> {
        let addr = match address(raw) {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "not notifying the service manager");
                return None;
            }
        };
        let var = |k| std::env::var(k).ok();
        let watchdog = watchdog_timeout(
            var("WATCHDOG_USEC").as_deref(),
            var("WATCHDOG_PID").as_deref(),
            std::process::id(),
        );
        debug!(socket = ?addr, ?watchdog, "notifying the service manager");
        Some(Manager { addr, watchdog })
    }

    /// The watchdog's timeout, if the manager runs one for this process.
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }
}

/// `NOTIFY_SOCKET` as a socket address: an absolute path, or `@name` for
/// the abstract namespace (sd_notify(3)).
fn address(raw: &OsStr) -> Result<SocketAddr, ServiceError> {
    let bad = || ServiceError::Address(raw.to_string_lossy().into_owned());
    let bytes = raw.as_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        SocketAddr::from_abstract_name(name).map_err(|_| bad())
    } else if bytes.starts_with(b"/") {
        SocketAddr::from_pathname(raw).map_err(|_| bad())
    } else {
        Err(bad())
    }
}

/// The watchdog's timeout from `WATCHDOG_USEC` and `WATCHDOG_PID`, as
/// sd_watchdog_enabled(3) reads them: a positive number of microseconds,
/// for process `me` if `WATCHDOG_PID` is unset or names it.
fn watchdog_timeout(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    match pid {
        Some(p) if p.trim().parse::<u32>().ok() != Some(me) => None,
        _ => Some(Duration::from_micros(usec)),
    }
}

/// A sender of notifications: one non-blocking datagram socket, or
/// nothing when there is no service manager.
pub struct Notifier {
    to: Option<(UnixDatagram, SocketAddr)>,
    /// Whether the manager runs a watchdog for this process.
    watchdog: bool,
    /// What `STATUS=` says with `READY=1`.
    status: String,
    /// Messages dropped because the manager's queue was full.
    dropped: u64,
    /// Whether a failure was already logged at warning level.
    warned: bool,
}

impl Notifier {
    /// The sender of a daemon with settings `cfg` to its manager
    /// (`cfg.service`); one that sends nothing without it.
    #[inline]
    pub fn new(cfg: &crate::Config) -> Notifier {
        match &cfg.service {
            Some(m) => Notifier::to(m, ready_status(cfg)),
            None => Notifier {
                to: None,
                watchdog: false,
                status: String::new(),
                dropped: 0,
                warned: false,
            },
        }
    }

    #[cold]
    fn to(m: &Manager, status: String) -> Notifier {
        let to = match open() {
            Ok(s) => Some((s, m.addr.clone())),
            Err(e) => {
                warn!(error = %e, "not notifying the service manager");
                None
            }
        };
        Notifier {
            to,
            watchdog: m.watchdog.is_some(),
            status,
            dropped: 0,
            warned: false,
        }
    }

    /// Tells the manager the daemon is ready, and what it serves.
    #[inline]
    pub fn ready(&mut self) {
        if self.to.is_some() {
            let status = one_line(&self.status);
            self.send(&[NotifyState::Ready, NotifyState::Status(&status)]);
        }
    }

    /// Tells the manager the daemon restarts in place (`ctl upgrade`); the
    /// program run next says [`Notifier::ready`] again. A watchdog is fed
    /// once more, so that the new program has a whole timeout to restore
    /// its configuration.
    #[inline]
    pub fn reloading(&mut self, status: &str) {
        if self.to.is_some() {
            self.reloading_now(status);
        }
    }

    #[cold]
    fn reloading_now(&mut self, status: &str) {
        let status = one_line(status);
        let mut states = vec![NotifyState::Reloading];
        match NotifyState::monotonic_usec_now() {
            Ok(t) => states.push(t),
            Err(e) => debug!(error = %e, "no monotonic clock for MONOTONIC_USEC"),
        }
        states.push(NotifyState::Status(&status));
        if self.watchdog {
            states.push(NotifyState::Watchdog);
        }
        self.send(&states);
    }

    /// Tells the manager the daemon is stopping.
    #[inline]
    pub fn stopping(&mut self, status: &str) {
        if self.to.is_some() {
            let status = one_line(status);
            self.send(&[NotifyState::Stopping, NotifyState::Status(&status)]);
        }
    }

    /// Sends one message with `states`, one per line; never waits.
    #[cold]
    fn send(&mut self, states: &[NotifyState<'_>]) {
        let Some((sock, addr)) = &self.to else {
            return;
        };
        let mut msg = String::new();
        for s in states {
            let _ = writeln!(msg, "{s}");
        }
        match sock.send_to_addr(msg.as_bytes(), addr) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.dropped += 1;
                debug!(
                    dropped = self.dropped,
                    "the service manager's queue is full; a notification was dropped"
                );
            }
            Err(e) if !self.warned => {
                self.warned = true;
                warn!(error = %e, "cannot notify the service manager (further failures are logged at debug level)");
            }
            Err(e) => debug!(error = %e, "cannot notify the service manager"),
        }
    }
}

/// What `STATUS=` says of a daemon with settings `cfg` once it is ready.
fn ready_status(cfg: &crate::Config) -> String {
    match &cfg.config {
        Some(c) => format!(
            "listening on {}, configuration in {}",
            cfg.socket.display(),
            c.display()
        ),
        None => format!("listening on {}", cfg.socket.display()),
    }
}

/// An unbound, non-blocking, close-on-exec datagram socket.
fn open() -> Result<UnixDatagram, ServiceError> {
    let s = UnixDatagram::unbound().map_err(ServiceError::Socket)?;
    s.set_nonblocking(true).map_err(ServiceError::Socket)?;
    Ok(s)
}

/// A status is one line of the message.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// The watchdog as the control thread feeds it: `WATCHDOG=1` every half
/// timeout, from the thread whose progress it vouches for. Inert when the
/// manager runs no watchdog for this process.
pub struct Watchdog {
    fed: Option<Fed>,
}

struct Fed {
    notifier: Notifier,
    interval: Duration,
    next: Instant,
}

impl Watchdog {
    /// The watchdog of `manager`, due at once.
    #[inline]
    pub fn new(manager: Option<&Manager>) -> Watchdog {
        Watchdog {
            fed: manager.and_then(Watchdog::fed),
        }
    }

    #[cold]
    fn fed(m: &Manager) -> Option<Fed> {
        let timeout = m.watchdog?;
        Some(Fed {
            notifier: Notifier::to(m, String::new()),
            interval: (timeout / 2).max(Duration::from_millis(1)),
            next: Instant::now(),
        })
    }

    /// Sends `WATCHDOG=1` if one is due at `now`.
    #[inline]
    pub fn feed(&mut self, now: Instant) {
        let Some(f) = &mut self.fed else {
            return;
        };
        if now < f.next {
            return;
        }
        f.notifier.send(&[NotifyState::Watchdog]);
        f.next = now + f.interval;
    }

    /// `timeout` cut short so that a wait from `now` ends by the next feed.
    #[inline]
    pub fn wait_at_most(&self, now: Instant, timeout: Duration) -> Duration {
        match &self.fed {
            Some(f) => timeout.min(f.next.saturating_duration_since(now)),
            None => timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_ours_when_its_pid_is_unset_or_ours() {
        let t = |u, p| watchdog_timeout(u, p, 42);
        assert_eq!(t(Some("30000000"), None), Some(Duration::from_secs(30)));
        assert_eq!(
            t(Some("30000000"), Some("42")),
            Some(Duration::from_secs(30))
        );
        assert_eq!(t(Some("30000000"), Some("43")), None, "another process's");
        assert_eq!(t(Some("30000000"), Some("x")), None);
        assert_eq!(t(Some("0"), None), None, "zero disables it");
        assert_eq!(t(Some("soon"), None), None);
        assert_eq!(t(None, Some("42")), None);
    }

    #[test]
    fn notify_socket_is_an_absolute_path_or_an_abstract_name() {
        let a = address(OsStr::new("/run/systemd/notify")).unwrap();
        assert_eq!(
            a.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let a = address(OsStr::new("@/org/freedesktop/systemd1/notify")).unwrap();
        assert_eq!(
            a.as_abstract_name(),
            Some(&b"/org/freedesktop/systemd1/notify"[..])
        );
        for bad in ["", "relative/notify", "vsock:2:1234"] {
            assert!(address(OsStr::new(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn notifications_arrive_and_a_full_queue_never_blocks() {
        let dir = std::env::temp_dir().join(format!("rs-notify-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        let m = Manager {
            addr: SocketAddr::from_pathname(&path).unwrap(),
            watchdog: Some(Duration::from_secs(3600)),
        };
        let mut cfg = crate::Config::new("/x\ny.sock".into());
        cfg.service = Some(m.clone());
        let mut n = Notifier::new(&cfg);
        n.ready();
        let mut buf = [0u8; 512];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=listening on /x y.sock\n");
        let mut w = Watchdog::new(Some(&m));
        let now = Instant::now();
        w.feed(now);
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1\n");
        assert!(w.wait_at_most(now, Duration::from_secs(1)) <= Duration::from_secs(1));
        // Nobody reads: the queue fills and sending goes on without
        // waiting, counting what it dropped.
        let mut sent = 0u64;
        while n.dropped == 0 {
            n.stopping("stopping");
            sent += 1;
            assert!(sent < 1_000_000, "a full queue never refused a message");
        }
        drop(rx);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn without_a_manager_nothing_is_sent() {
        let mut n = Notifier::new(&crate::Config::new("/x".into()));
        assert!(n.to.is_none());
        n.ready();
        n.stopping("x");
        let mut w = Watchdog::new(None);
        w.feed(Instant::now());
        assert_eq!(
            w.wait_at_most(Instant::now(), Duration::from_millis(200)),
            Duration::from_millis(200)
        );
    }
}
