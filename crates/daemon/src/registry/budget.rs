//! Budgets: how much shared memory and how many descriptors the daemon
//! holds for each connection, each peer uid and in all.
//!
//! Every port region and pipe region is charged when it is created, to the
//! connection (and its uid) that made it, and released when it is freed: a
//! [`Charge`] lives in the registry entry it pays for and gives its share
//! back when dropped, so no path that frees an entry can forget to. Objects
//! that belong to the daemon rather than to a client (persistent ports and
//! pipes, created by an administrator or restored from the configuration)
//! are charged to [`Who::DAEMON`] and count toward the total only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::ConnId;

/// The limits, in bytes of shared memory and descriptors held by the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Shared memory per connection.
    pub shm_per_conn: u64,
    /// Shared memory per peer uid (all its connections).
    pub shm_per_uid: u64,
    /// Shared memory in all.
    pub shm_total: u64,
    /// Descriptors per connection.
    pub fds_per_conn: u64,
    /// Descriptors per peer uid.
    pub fds_per_uid: u64,
    /// Descriptors in all.
    pub fds_total: u64,
}

const GIB: u64 = 1 << 30;

impl Default for Limits {
    /// 1 GiB of shared memory per connection, 4 GiB per uid, half the
    /// machine's memory in all; three quarters of the daemon's descriptor
    /// limit in all, half of that per uid, a quarter per connection (the
    /// rest is for connections and the daemon's own files).
    fn default() -> Limits {
        let fds_total = nofile_limit().saturating_mul(3) / 4;
        Limits {
            shm_per_conn: GIB,
            shm_per_uid: 4 * GIB,
            shm_total: (physical_memory() / 2).max(GIB),
            fds_per_conn: fds_total / 4,
            fds_per_uid: fds_total / 2,
            fds_total,
        }
    }
}

/// A size in bytes, with an optional K, M or G suffix (powers of 1024):
/// `1073741824`, `512M`, `4G`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// The soft RLIMIT_NOFILE of this process (1024 if it cannot be read).
pub fn nofile_limit() -> u64 {
    // SAFETY: rlimit is plain data; all-zero is a valid value.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into `r`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    r.rlim_cur.min(1 << 24)
}

fn physical_memory() -> u64 {
    // SAFETY: sysconf takes a constant and returns a number or -1.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page)) {
        (Ok(n), Ok(p)) if n > 0 && p > 0 => n.saturating_mul(p),
        _ => 8 * GIB,
    }
}

/// Who asks: a connection and the uid of the process behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Who {
    /// The connection (0: the daemon itself).
    pub conn: ConnId,
    /// The peer's uid.
    pub uid: u32,
}

impl Who {
    /// The daemon itself: persistent objects, the saved configuration.
    /// Counts toward the total only.
    pub const DAEMON: Who = Who {
        conn: 0,
        uid: u32::MAX,
    };
}

#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    shm: u64,
    fds: u64,
}

#[derive(Debug, Default)]
struct State {
    limits: Option<Limits>,
    total: Usage,
    per_conn: HashMap<ConnId, Usage>,
    per_uid: HashMap<u32, Usage>,
}

/// The daemon's budgets.
#[derive(Clone, Debug, Default)]
pub struct Budget(Arc<Mutex<State>>);

/// One object's share of the budgets, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    state: Arc<Mutex<State>>,
    who: Who,
    shm: u64,
    fds: u64,
}

/// What a budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// Bytes of shared memory.
    SharedMemory,
    /// Descriptors.
    Descriptors,
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Resource::SharedMemory => "shared memory",
            Resource::Descriptors => "descriptors",
        })
    }
}

/// An amount of a [`Resource`], shown in its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amount(pub Resource, pub u64);

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Amount(Resource::SharedMemory, b) if b >= GIB && b.is_multiple_of(GIB) => {
                write!(f, "{} GiB", b / GIB)
            }
            Amount(Resource::SharedMemory, b) => {
                write!(f, "{:.1} MiB", b as f64 / (1u64 << 20) as f64)
            }
            Amount(Resource::Descriptors, n) => write!(f, "{n}"),
        }
    }
}

/// A charge that would pass a limit.
#[derive(Debug, thiserror::Error)]
#[error("{what} needs {need} of {kind}, and {whose} already holds {held} of its limit of {limit}: close ports or pipes first, or raise the limit (serve {option})", kind = need.0)]
pub struct OverBudget {
    /// What was to be charged.
    pub what: String,
    /// What it needs.
    pub need: Amount,
    /// What is held already.
    pub held: Amount,
    /// The limit.
    pub limit: Amount,
    /// Whose limit: the daemon, this connection, or a uid.
    pub whose: String,
    /// The option that sets the limit.
    pub option: &'static str,
}

impl Budget {
    /// Budgets with `limits`.
    pub fn new(limits: Limits) -> Budget {
        let b = Budget::default();
        b.set_limits(limits);
        b
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the limits (what is held already stays).
    pub fn set_limits(&self, limits: Limits) {
        self.lock().limits = Some(limits);
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.lock().limits.unwrap_or_default()
    }

    /// Charges `shm` bytes and `fds` descriptors for `what` to `who`, or
    /// says which limit it would pass.
    pub fn charge(&self, who: Who, what: &str, shm: u64, fds: u64) -> Result<Charge, OverBudget> {
        let mut s = self.lock();
        let l = s.limits.unwrap_or_default();
        let t = s.total;
        // (held, limit, whose, option, shared memory or descriptors):
        // the daemon's total, and for a client also its connection and uid.
        let mut checks = vec![
            (
                t.shm,
                l.shm_total,
                "the daemon".to_string(),
                "--max-shm",
                true,
            ),
            (
                t.fds,
                l.fds_total,
                "the daemon".to_string(),
                "--max-fds",
                false,
            ),
        ];
        if who != Who::DAEMON {
            let c = s.per_conn.get(&who.conn).copied().unwrap_or_default();
            let u = s.per_uid.get(&who.uid).copied().unwrap_or_default();
            let uid = format!("uid {}", who.uid);
            checks.extend([
                (
                    c.shm,
                    l.shm_per_conn,
                    "this connection".into(),
                    "--max-shm-per-conn",
                    true,
                ),
                (u.shm, l.shm_per_uid, uid.clone(), "--max-shm-per-uid", true),
                (
                    c.fds,
                    l.fds_per_conn,
                    "this connection".into(),
                    "--max-fds-per-conn",
                    false,
                ),
                (u.fds, l.fds_per_uid, uid, "--max-fds-per-uid", false),
            ]);
        }
        for (held, limit, whose, opt, is_shm) in checks {
            let (kind, need) = if is_shm {
                (Resource::SharedMemory, shm)
            } else {
                (Resource::Descriptors, fds)
            };
            if held.saturating_add(need) > limit {
                return Err(OverBudget {
                    what: what.to_string(),
                    need: Amount(kind, need),
                    held: Amount(kind, held),
                    limit: Amount(kind, limit),
                    whose,
                    option: opt,
                });
            }
        }
        if who != Who::DAEMON {
            let s = &mut *s;
            for usage in [
                s.per_conn.entry(who.conn).or_default(),
                s.per_uid.entry(who.uid).or_default(),
            ] {
                usage.shm += shm;
                usage.fds += fds;
            }
        }
        s.total.shm += shm;
        s.total.fds += fds;
        Ok(Charge {
            state: self.0.clone(),
            who,
            shm,
            fds,
        })
    }

    /// (shared memory bytes, descriptors) held in all.
    pub fn total(&self) -> (u64, u64) {
        let s = self.lock();
        (s.total.shm, s.total.fds)
    }

    /// (shared memory bytes, descriptors) held for `uid`.
    pub fn of_uid(&self, uid: u32) -> (u64, u64) {
        let s = self.lock();
        s.per_uid.get(&uid).map_or((0, 0), |u| (u.shm, u.fds))
    }
}

fn give_back<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Usage>, key: K, shm: u64, fds: u64) {
    if let Some(u) = map.get_mut(&key) {
        u.shm = u.shm.saturating_sub(shm);
        u.fds = u.fds.saturating_sub(fds);
        if u.shm == 0 && u.fds == 0 {
            map.remove(&key);
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.total.shm = s.total.shm.saturating_sub(self.shm);
        s.total.fds = s.total.fds.saturating_sub(self.fds);
        if self.who != Who::DAEMON {
            give_back(&mut s.per_conn, self.who.conn, self.shm, self.fds);
            give_back(&mut s.per_uid, self.who.uid, self.shm, self.fds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryError;
    use ringswitch_control::proto::{ErrorCode, ErrorReply};

    fn limits() -> Limits {
        Limits {
            shm_per_conn: 100,
            shm_per_uid: 150,
            shm_total: 250,
            fds_per_conn: 10,
            fds_per_uid: 15,
            fds_total: 25,
        }
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999G"), None);
    }

    #[test]
    fn charges_add_up_and_come_back() {
        let b = Budget::new(limits());
        let a = Who { conn: 1, uid: 7 };
        let a2 = Who { conn: 2, uid: 7 };
        let c1 = b.charge(a, "x", 60, 2).unwrap();
        let e = ErrorReply::from(RegistryError::from(
            b.charge(a, "pipe p{1", 60, 2).unwrap_err(),
        ));
        assert_eq!(e.code, ErrorCode::Limit);
        assert!(e.message.contains("--max-shm-per-conn"), "{}", e.message);
        let c2 = b.charge(a2, "x", 60, 2).unwrap();
        let e = b
            .charge(Who { conn: 4, uid: 7 }, "x", 60, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-shm-per-uid"), "{}", e);
        let c3 = b.charge(Who::DAEMON, "x", 100, 2).unwrap();
        let e = b
            .charge(Who { conn: 3, uid: 8 }, "x", 60, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-shm)"), "{}", e);
        let e = b
            .charge(Who { conn: 3, uid: 8 }, "x", 1, 11)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "x needs 11 of descriptors, and this connection already holds 0 of its limit of 10: \
             close ports or pipes first, or raise the limit (serve --max-fds-per-conn)"
        );
        assert_eq!(b.total(), (220, 6));
        drop((c1, c2, c3));
        assert_eq!(b.total(), (0, 0));
        assert_eq!(b.of_uid(7), (0, 0));
        let _ = b.charge(a, "x", 100, 10).unwrap();
    }
}
