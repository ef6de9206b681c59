//! The machine a run measures on, for `meta.tsv`: its name, kernel, CPU,
//! memory, the versions of everything measured, and how loaded it was.
//! [`Machine::probe`] reads `/proc` and asks the tools; the text parsing
//! and the lines written are plain functions, tested on their own.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What `meta.tsv` says about the machine. A fact that cannot be read is
/// an empty text (the report leaves it blank), or what the tool said.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    /// The host name.
    pub host: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The CPU's model name.
    pub cpu_model: String,
    /// The CPUs this run may use.
    pub cores: usize,
    /// The memory, e.g. `7.8 GiB`.
    pub memory: String,
    /// `rustc --version`.
    pub rustc: String,
    /// The commit measured, and whether the tree differs from it.
    pub commit: String,
    /// `ringswitch --version` of the binary measured.
    pub ringswitch: String,
    /// The package version of DPDK (`dpdk-dev`).
    pub dpdk: String,
    /// The package version of OVS-DPDK (`openvswitch-switch-dpdk`).
    pub ovs: String,
    /// QEMU's version.
    pub qemu: String,
    /// The load average (1, 5, 15 minutes) at the start.
    pub load_start: String,
    /// How busy all CPUs were in the second before the run.
    pub busy_start: String,
}

/// What `meta.tsv` says about the run itself.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFacts<'a> {
    /// When it started.
    pub started: SystemTime,
    /// The command line, as the user typed it.
    pub command: &'a str,
    /// `quick` or `full`.
    pub mode: &'a str,
    /// Runs per path.
    pub runs: u32,
    /// The guest halt polling in force, with where it comes from.
    pub guest_halt_poll_ns: &'a str,
}

impl Machine {
    /// Reads the machine: `/proc`, the tools' versions, the git tree at
    /// `root`, and one second of `/proc/stat` for how busy it is.
    pub fn probe(root: &Path, ringswitch: &Path, cores: usize) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let root_s = root.display().to_string();
        let dirty = output(
            "git",
            &[
                "-C",
                &root_s,
                "status",
                "--porcelain",
                "--untracked-files=no",
            ],
        );
        let head = output("git", &["-C", &root_s, "rev-parse", "--short", "HEAD"]);
        let busy_start = busy_pct_over_a_second().map_or_else(String::new, |p| {
            format!("{p:.0}% of all CPUs in the second before the run")
        });
        Machine {
            host: read("/proc/sys/kernel/hostname").trim().to_owned(),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            cpu_model: cpu_model(&read("/proc/cpuinfo")).unwrap_or_default(),
            cores,
            memory: memory_gib(&read("/proc/meminfo")).unwrap_or_default(),
            rustc: output("rustc", &["--version"]),
            commit: commit_text(&head, !dirty.is_empty()),
            ringswitch: output(&ringswitch.display().to_string(), &["--version"]),
            dpdk: package_version("dpdk-dev"),
            ovs: package_version("openvswitch-switch-dpdk"),
            qemu: qemu_version(&output("qemu-system-x86_64", &["--version"])).unwrap_or_default(),
            load_start: load_average(&read("/proc/loadavg")),
            busy_start,
        }
    }
}

/// The `meta.tsv` lines written when a run starts, in their order.
pub fn start_lines(run: &RunFacts<'_>, m: &Machine) -> Vec<(&'static str, String)> {
    vec![
        ("date", utc_date(run.started)),
        ("command", run.command.to_owned()),
        ("mode", run.mode.to_owned()),
        ("runs", run.runs.to_string()),
        ("host", m.host.clone()),
        ("kernel", m.kernel.clone()),
        ("cpu_model", m.cpu_model.clone()),
        ("cores", m.cores.to_string()),
        ("memory", m.memory.clone()),
        ("rustc", m.rustc.clone()),
        ("commit", m.commit.clone()),
        ("ringswitch", m.ringswitch.clone()),
        ("dpdk", m.dpdk.clone()),
        ("ovs", m.ovs.clone()),
        ("qemu", m.qemu.clone()),
        ("load_start", m.load_start.clone()),
        ("busy_start", m.busy_start.clone()),
        ("guest_halt_poll_ns", run.guest_halt_poll_ns.to_owned()),
    ]
}

/// The `meta.tsv` lines written when a run ends.
pub fn end_lines(elapsed: Duration, loadavg: &str) -> Vec<(&'static str, String)> {
    vec![
        ("elapsed_s", elapsed.as_secs().to_string()),
        ("load_end", load_average(loadavg)),
    ]
}

/// The first line of a command's stdout, trimmed; empty if it cannot run
/// or fails.
fn output(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout);
            text.lines().next().unwrap_or("").trim().to_owned()
        })
        .unwrap_or_default()
}

/// A Debian package's version, or `not installed`.
fn package_version(package: &str) -> String {
    let v = output("dpkg-query", &["-W", "-f=${Version}", package]);
    if v.is_empty() {
        "not installed".into()
    } else {
        v
    }
}

/// The short commit, with a word when tracked files differ from it.
pub fn commit_text(short_head: &str, dirty: bool) -> String {
    if dirty {
        format!("{short_head} (with uncommitted changes)")
    } else {
        short_head.to_owned()
    }
}

/// The first `model name` of `/proc/cpuinfo`.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_owned())
    })
}

/// `MemTotal` of `/proc/meminfo` in GiB, one decimal: `7.8 GiB`.
pub fn memory_gib(meminfo: &str) -> Option<String> {
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(format!("{:.1} GiB", kib / 1_048_576.0))
}

/// The three load averages of `/proc/loadavg`.
pub fn load_average(loadavg: &str) -> String {
    loadavg
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The version word of `qemu-system-x86_64 --version`'s first line
/// (`QEMU emulator version 7.2.15 (Debian ...)`).
pub fn qemu_version(first_line: &str) -> Option<String> {
    first_line.split_whitespace().nth(3).map(str::to_owned)
}

/// Idle and total ticks of the `cpu` line of `/proc/stat` (idle counts
/// iowait too).
pub fn idle_total(stat: &str) -> Option<(u64, u64)> {
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let idle = v.get(3)? + v.get(4)?;
    Some((idle, v.iter().sum()))
}

/// How busy all CPUs were between two readings of [`idle_total`], in %.
pub fn busy_pct(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    let idle = after.0.saturating_sub(before.0);
    100.0 * (1.0 - idle as f64 / total as f64)
}

fn busy_pct_over_a_second() -> Option<f64> {
    let read = || idle_total(&std::fs::read_to_string("/proc/stat").ok()?);
    let a = read()?;
    std::thread::sleep(Duration::from_secs(1));
    Some(busy_pct(a, read()?))
}

/// `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = civil_from_days(days);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard
/// Hinnant's days-to-civil algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_date(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_652_949);
        assert_eq!(utc_date(t), "2026-11-26 00:29:09 UTC");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_date(t), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn proc_texts() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nmodel name\t: other\n";
        assert_eq!(
            cpu_model(cpuinfo).unwrap(),
            "Intel(R) Xeon(R) CPU @ 2.20GHz"
        );
        assert_eq!(cpu_model("nothing"), None);
        assert_eq!(
            memory_gib("MemTotal:        8142772 kB\nMemFree: 1 kB\n").unwrap(),
            "7.8 GiB"
        );
        assert_eq!(memory_gib("MemFree: 1 kB\n"), None);
        assert_eq!(
            load_average("0.52 0.61 0.70 2/345 6789\n"),
            "0.52 0.61 0.70"
        );
        assert_eq!(
            qemu_version("QEMU emulator version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u12)").unwrap(),
            "7.2.15"
        );
        assert_eq!(qemu_version(""), None);
        assert_eq!(commit_text("abc1234", false), "abc1234");
        assert_eq!(
            commit_text("abc1234", true),
            "abc1234 (with uncommitted changes)"
        );
    }

    #[test]
    fn busy_share() {
        let a = idle_total("cpu  10 0 10 70 10 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(a, (80, 100));
        let b = idle_total("cpu  40 0 40 100 20 0 0 0 0 0\n").unwrap();
        assert_eq!(busy_pct(a, b), 60.0);
        assert_eq!(busy_pct(a, a), 0.0);
        assert_eq!(idle_total("cpu0 1 2\n"), None);
    }

    #[test]
    fn lines_in_order() {
        let m = Machine {
            host: "h".into(),
            kernel: "6.1.0".into(),
            cores: 2,
            dpdk: "22.11".into(),
            ..Machine::default()
        };
        let run = RunFacts {
            started: UNIX_EPOCH,
            command: "bench/compare --quick",
            mode: "quick",
            runs: 1,
            guest_halt_poll_ns: "0 (as the machine has it)",
        };
        let lines = start_lines(&run, &m);
        let keys: Vec<&str> = lines.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "date",
                "command",
                "mode",
                "runs",
                "host",
                "kernel",
                "cpu_model",
                "cores",
                "memory",
                "rustc",
                "commit",
                "ringswitch",
                "dpdk",
                "ovs",
                "qemu",
                "load_start",
                "busy_start",
                "guest_halt_poll_ns"
            ]
        );
        let get = |k: &str| &lines.iter().find(|(n, _)| *n == k).unwrap().1;
        assert_eq!(get("command"), "bench/compare --quick");
        assert_eq!(get("cores"), "2");
        assert_eq!(get("dpdk"), "22.11");
        assert_eq!(get("guest_halt_poll_ns"), "0 (as the machine has it)");
        let end = end_lines(Duration::from_millis(61_900), "1.00 2.00 3.00 1/2 3\n");
        assert_eq!(
            end,
            [
                ("elapsed_s", "61".to_owned()),
                ("load_end", "1.00 2.00 3.00".to_owned())
            ]
        );
    }
}
