//! DPDK testpmd with a virtio_user port as a fast userspace "VM": its
//! command line and the reading of its log. The command line is the one
//! `bench/peers/ovs-dpdk.sh` gives OVS-DPDK's frontends
//! (`bench/lib/testpmd.sh`'s `testpmd_argv`, kept equal by a test), so that
//! both switches see the same testpmd. Nothing read from a log is trusted:
//! what cannot be read is `None` or left out.

use super::procs::strip_ansi;

/// The sender's MAC address.
pub const TX_MAC: &str = "52:54:00:00:00:01";
/// The receiver's MAC address: the destination of the sender's frames
/// (`--eth-peer`). A learning switch never learns it (the receiver sends
/// nothing), so it floods them, here to the one other port.
pub const RX_MAC: &str = "52:54:00:00:00:02";

/// What a testpmd does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Sends frames of this many bytes to [`RX_MAC`].
    TxOnly(u64),
    /// Receives.
    RxOnly,
    /// Interactive: ports started, no forwarding, nothing polls (give it a
    /// stdin that stays open).
    Idle,
}

/// One testpmd: both lcores (main and forwarding) on `cpu`, `--no-huge`
/// (its memory is one shared memfd, which vhost-user backends map), one
/// queue pair, runtime files under `prefix`. `server`: testpmd owns the
/// socket (vdev `server=1`) and the switch connects.
pub fn argv(
    cpu: u32,
    prefix: &str,
    socket: &str,
    server: bool,
    mac: &str,
    mode: Mode,
) -> Vec<String> {
    let mut vdev = format!("net_virtio_user0,path={socket},queues=1,mac={mac}");
    if server {
        vdev.push_str(",server=1");
    }
    vdev_argv(cpu, prefix, &vdev, Some(RX_MAC), mode)
}

/// One testpmd on `vdev` (any virtual device: virtio_user, net_af_xdp,
/// net_af_packet), both lcores on `cpu`, runtime files under `prefix`; a
/// txonly sends to `peer` (`--eth-peer`) if given, else to testpmd's
/// default destination.
pub fn vdev_argv(
    cpu: u32,
    prefix: &str,
    vdev: &str,
    peer: Option<&str>,
    mode: Mode,
) -> Vec<String> {
    let mut v: Vec<String> = [
        "dpdk-testpmd".to_owned(),
        format!("--lcores=0@{cpu},1@{cpu}"),
        "--no-huge".into(),
        "-m".into(),
        "1024".into(),
        "--no-pci".into(),
        "--file-prefix".into(),
        prefix.into(),
        format!("--vdev={vdev}"),
        "--".into(),
        "--no-mlockall".into(),
        "--total-num-mbufs=16384".into(),
    ]
    .into();
    match mode {
        Mode::TxOnly(size) => {
            v.extend([
                "--forward-mode=txonly".to_owned(),
                format!("--txpkts={size}"),
            ]);
            if let Some(mac) = peer {
                v.push(format!("--eth-peer=0,{mac}"));
            }
            v.extend(["--stats-period".to_owned(), "1".into()]);
        }
        Mode::RxOnly => v.extend([
            "--forward-mode=rxonly".to_owned(),
            "--stats-period".into(),
            "1".into(),
        ]),
        Mode::Idle => v.extend(["-i".to_owned(), "--forward-mode=rxonly".into()]),
    }
    v
}

/// DPDK's runtime directory, where each `--file-prefix` leaves a directory.
pub fn rundir(root: bool, xdg_runtime_dir: Option<&str>) -> String {
    if root {
        "/var/run/dpdk".into()
    } else {
        format!("{}/dpdk", xdg_runtime_dir.unwrap_or("/tmp"))
    }
}

/// The start-up failures testpmd reports on its stdout.
const FAILURES: [&str; 9] = [
    "Fail to start port",
    "EAL: Error",
    "EAL: FATAL",
    "Cannot init",
    "failed to parse device",
    "probe failed",
    "No probed ethernet devices",
    "failed to initialize",
    "Failed to",
];

/// The first line of `log` showing a start-up failure, at most 160
/// characters.
pub fn failure(log: &str) -> Option<String> {
    log.lines()
        .find(|l| FAILURES.iter().any(|f| l.contains(f)))
        .map(|l| l.chars().take(160).collect())
}

/// Whether the port is up: non-interactive testpmd says "start packet
/// forwarding", interactive testpmd prints its prompt.
pub fn ready(log: &str) -> bool {
    log.contains("start packet forwarding") || log.contains("testpmd> ")
}

/// Which side of testpmd's statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// `RX-packets:` and `Rx-pps:`.
    Rx,
    /// `TX-packets:` and `Tx-pps:`.
    Tx,
}

impl Dir {
    fn counter(self) -> &'static str {
        match self {
            Dir::Rx => "RX-packets:",
            Dir::Tx => "TX-packets:",
        }
    }

    fn rate(self) -> &'static str {
        match self {
            Dir::Rx => "Rx-pps:",
            Dir::Tx => "Tx-pps:",
        }
    }
}

/// One sample of testpmd's periodic statistics (`--stats-period 1`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Packets per second.
    pub pps: u64,
    /// The seconds it covers.
    pub secs: f64,
}

/// The second word of `line` as a number, if its first word is `key`.
fn field(line: &str, key: &str) -> Option<u64> {
    let mut w = line.split_whitespace();
    (w.next()? == key).then(|| w.next()?.parse().ok())?
}

/// The samples of `dir` in a testpmd log: testpmd prints per block the
/// cumulative counter and the rate since the previous block (exact, from
/// clock_gettime), so a sample covers counter delta / rate seconds. The
/// zero samples before traffic and the first non-zero one (it covers the
/// start) are left out; stops once the samples cover `max_secs` (0: all).
pub fn samples(log: &str, dir: Dir, max_secs: f64) -> Vec<Sample> {
    let log = strip_ansi(log);
    let (mut counter, mut prev, mut on, mut total) = (0u64, 0u64, false, 0.0);
    let mut out = Vec::new();
    for line in log.lines() {
        if let Some(c) = field(line, dir.counter()) {
            counter = c;
            continue;
        }
        let Some(pps) = field(line, dir.rate()) else {
            continue;
        };
        if !on {
            on = pps > 0;
            prev = counter;
            continue;
        }
        let secs = if pps > 0 {
            counter.saturating_sub(prev) as f64 / pps as f64
        } else {
            1.0
        };
        prev = counter;
        out.push(Sample { pps, secs });
        total += secs;
        if max_secs > 0.0 && total >= max_secs {
            break;
        }
    }
    out
}

/// The seconds `samples` cover.
pub fn covered(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.secs).sum()
}

/// The median rate of `samples` (the mean of the two middle ones for an
/// even count); `None` without samples.
pub fn median_pps(samples: &[Sample]) -> Option<f64> {
    let mut v: Vec<u64> = samples.iter().map(|s| s.pps).collect();
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2] as f64),
        _ => Some((v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0),
    }
}

/// Whether the log shows a non-zero rate of `dir` (traffic has started).
pub fn moving(log: &str, dir: Dir) -> bool {
    strip_ansi(log)
        .lines()
        .any(|l| field(l, dir.rate()).is_some_and(|p| p > 0))
}

/// The last cumulative counter of `dir` in a log.
pub fn last_counter(log: &str, dir: Dir) -> Option<u64> {
    strip_ansi(log)
        .lines()
        .filter_map(|l| field(l, dir.counter()))
        .next_back()
}

/// The total testpmd prints when it stops ("Accumulated forward
/// statistics").
pub fn total(log: &str, dir: Dir) -> Option<u64> {
    let log = strip_ansi(log);
    let mut lines = log.lines();
    lines.find(|l| l.contains("Accumulated forward statistics"))?;
    lines.find_map(|l| field(l, dir.counter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "start packet forwarding\n\
        \x1b[2J\x1b[1;1H\n  RX-packets: 0   RX-missed: 0\n  Rx-pps:  0  Rx-bps: 0\n\
        \x1b[2J\x1b[1;1H\n  RX-packets: 100   RX-missed: 0\n  Rx-pps:  100  Rx-bps: 0\n\
        \x1b[2J\x1b[1;1H\n  RX-packets: 300   RX-missed: 0\n  Rx-pps:  200  Rx-bps: 0\n\
        \x1b[2J\x1b[1;1H\n  RX-packets: 700   RX-missed: 0\n  Rx-pps:  400  Rx-bps: 0\n\
        \x1b[2J\x1b[1;1H\n  RX-packets: 1000   RX-missed: 0\n  Rx-pps:  600  Rx-bps: 0\n";

    #[test]
    fn samples_after_the_first_moving_one() {
        let s = samples(LOG, Dir::Rx, 0.0);
        assert_eq!(
            s,
            vec![
                Sample {
                    pps: 200,
                    secs: 1.0
                },
                Sample {
                    pps: 400,
                    secs: 1.0
                },
                Sample {
                    pps: 600,
                    secs: 0.5
                },
            ]
        );
        assert_eq!(covered(&s), 2.5);
        assert_eq!(median_pps(&s), Some(400.0));
        assert_eq!(median_pps(&s[..2]), Some(300.0));
        assert_eq!(median_pps(&[]), None);
        assert_eq!(samples(LOG, Dir::Rx, 2.0).len(), 2);
        assert!(samples(LOG, Dir::Tx, 0.0).is_empty());
        assert!(moving(LOG, Dir::Rx));
        assert!(!moving(LOG, Dir::Tx));
        assert_eq!(last_counter(LOG, Dir::Rx), Some(1000));
        assert!(ready(LOG));
    }

    #[test]
    fn garbage_is_left_out() {
        let log = "Rx-pps: lots\nRX-packets:\nRx-pps: 5\nRx-pps: -3\nRx-pps: 7 x\n";
        assert_eq!(
            samples(log, Dir::Rx, 0.0),
            vec![Sample { pps: 7, secs: 0.0 }]
        );
        assert_eq!(failure("all fine\n"), None);
        assert_eq!(
            failure("x\nEAL: Error - exiting with code: 1\n").as_deref(),
            Some("EAL: Error - exiting with code: 1")
        );
    }
}
