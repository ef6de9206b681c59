//! One reading of everything the listener shows: the registry's listings,
//! copied under its lock and nothing else done under it, and the daemon
//! process's own figures from /proc. Every scrape and every page update is
//! rendered from one of these, so ports that come and go leave nothing
//! behind (no metric object lives longer than a response).

use std::sync::Mutex;
use std::time::Instant;

use ringswitch_control::proto::{PortInfo, PortStats, SwitchInfo, WorkerStats};
use serde::Serialize;

use crate::registry::Registry;

/// The registry's listings and the process's figures at one moment.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// The daemon's version.
    pub version: &'static str,
    /// Nanoseconds since the listener started, read with the counters
    /// (under the registry's lock): a rate is a counter's difference over
    /// this one's, whatever the delays of the network or the page.
    pub at_ns: u64,
    /// `switch-list`.
    pub switches: Vec<SwitchInfo>,
    /// `port-list`: switch ports and pipe ends.
    pub ports: Vec<PortInfo>,
    /// `stats`: switch ports' counters.
    pub stats: Vec<PortStats>,
    /// `workers`.
    pub workers: Vec<WorkerStats>,
    /// The daemon process.
    pub process: Process,
    /// When it was taken (the listener reuses a recent one).
    #[serde(skip)]
    pub taken: Instant,
}

impl Snapshot {
    /// Reads the registry (its lock held only while the listings are
    /// copied) and the process's figures.
    pub fn take(registry: &Mutex<Registry>, started: Instant) -> Snapshot {
        let r = crate::lock(registry);
        let taken = Instant::now();
        let switches = r.switch_list();
        let ports = r.port_list(None).unwrap_or_default();
        let stats = r.stats(None).unwrap_or_default();
        let workers = r.worker_stats();
        drop(r);
        Snapshot {
            version: env!("CARGO_PKG_VERSION"),
            at_ns: u64::try_from(taken.duration_since(started).as_nanos()).unwrap_or(u64::MAX),
            switches,
            ports,
            stats,
            workers,
            process: Process::read(),
            taken,
        }
    }
}

/// The daemon process's own figures (Prometheus's standard `process_*`
/// metrics), 0 where /proc does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Process {
    /// CPU time of all its threads, living and gone, in nanoseconds.
    pub cpu_ns: u64,
    /// Resident memory, in bytes (shared packet memory included).
    pub rss_bytes: u64,
    /// Threads.
    pub threads: u64,
    /// Open descriptors.
    pub open_fds: u64,
}

/// The kernel's clock tick for /proc's CPU times (`USER_HZ`): 100 on every
/// architecture Linux exports to user space (Prometheus's own procfs
/// reader assumes the same).
const USER_HZ: u64 = 100;

impl Process {
    /// Reads /proc/self, and the process's CPU clock.
    pub fn read() -> Process {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let mut p = Process::from_stat(&stat);
        p.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        // To the nanosecond rather than in /proc's ticks of 10 ms: the web
        // view's rate over one second would move in steps of 1 %.
        if let Some(ns) = process_cpu_ns() {
            p.cpu_ns = ns;
        }
        p
    }

    /// CPU and threads from the text of /proc/PID/stat; resident memory
    /// from /proc/self/status (in KiB there: no page size to ask for).
    fn from_stat(stat: &str) -> Process {
        // The command name is in parentheses and may hold anything: the
        // fields are counted after its closing one (field 3 is index 0).
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let field = |n: usize| -> u64 {
            fields
                .get(n.wrapping_sub(3))
                .and_then(|f| f.parse().ok())
                .unwrap_or(0)
        };
        let ticks = field(14) + field(15);
        Process {
            cpu_ns: ticks * (1_000_000_000 / USER_HZ),
            rss_bytes: rss_bytes(),
            threads: field(20),
            open_fds: 0,
        }
    }
}

/// CPU time of every thread of this process, living and gone, in
/// nanoseconds (CLOCK_PROCESS_CPUTIME_ID).
fn process_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; the return value says whether it was filled.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let ns = u64::try_from(ts.tv_nsec).ok()?;
    (rc == 0).then(|| secs * 1_000_000_000 + ns)
}

/// `VmRSS` of /proc/self/status, in bytes.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let kib = l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?;
                kib.trim().parse::<u64>().ok()
            })
        })
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with spaces and a parenthesis in it.
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 \
                    1000 1000000 300 18446744073709551615";
        let p = Process::from_stat(stat);
        assert_eq!(p.cpu_ns, 300 * 10_000_000);
        assert_eq!(p.threads, 7);
        assert_eq!(Process::from_stat("").cpu_ns, 0);
    }

    #[test]
    fn this_process_has_figures() {
        let p = Process::read();
        assert!(
            p.threads >= 1 && p.rss_bytes > 0 && p.open_fds >= 3,
            "{p:?}"
        );
    }
}
