//! What a run is to do: [`Plan`], netmap pkt-gen's options as plain
//! values with netmap's defaults, and its check into the settings a run
//! uses ([`CheckedPlan`]) or a [`PktGenError`] saying what is wrong.
//!
//! The checks here need nothing but the plan; those that need the port
//! (its rings and buffer size) are made once it is open.

use std::net::Ipv4Addr;

use crate::frame::{self, Endpoint, Fields, FrameSpec, MacAddr};
use crate::PktGenError;

/// Default burst for tx/rx modes.
pub const DEFAULT_BURST: u32 = 512;
/// Default burst for ping and pong.
pub const DEFAULT_RTT_BURST: u32 = 1;
/// Default source port (as netmap's pkt-gen).
pub const DEFAULT_SRC_PORT: u16 = 1234;
/// Default destination port.
pub const DEFAULT_DST_PORT: u16 = 4321;
/// Longest `--duration` accepted (a year).
const MAX_DURATION_S: f64 = 365.0 * 86_400.0;

/// What pkt-gen does (`-f`).
#[derive(serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Send template frames.
    Tx,
    /// Count received frames.
    Rx,
    /// Send timestamped frames and measure the round trip.
    Ping,
    /// Bounce every frame back with addresses swapped.
    Pong,
    /// Send frames carrying a sequence number.
    Txseq,
    /// Receive frames carrying a sequence number; count gaps and reordering.
    Rxseq,
}

impl Mode {
    /// Every mode, in the order `-f` lists them.
    pub const ALL: [Mode; 6] = [
        Mode::Tx,
        Mode::Rx,
        Mode::Ping,
        Mode::Pong,
        Mode::Txseq,
        Mode::Rxseq,
    ];

    /// The name as given to `-f`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tx => "tx",
            Mode::Rx => "rx",
            Mode::Ping => "ping",
            Mode::Pong => "pong",
            Mode::Txseq => "txseq",
            Mode::Rxseq => "rxseq",
        }
    }

    /// What the mode does, in one line (for help texts).
    pub fn about(self) -> &'static str {
        match self {
            Mode::Tx => "Send template frames",
            Mode::Rx => "Count received frames",
            Mode::Ping => "Send timestamped frames and measure the round trip",
            Mode::Pong => "Bounce every frame back with addresses swapped",
            Mode::Txseq => "Send frames carrying a sequence number",
            Mode::Rxseq => "Receive frames carrying a sequence number; count gaps and reordering",
        }
    }

    /// Whether the mode sends (tx, txseq, ping) rather than receives.
    pub fn sends(self) -> bool {
        matches!(self, Mode::Tx | Mode::Txseq | Mode::Ping)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the mode is one of tx, rx, ping, pong, txseq and rxseq")]
pub struct UnknownMode;

impl std::str::FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or(UnknownMode)
    }
}

/// What pkt-gen is to do: netmap pkt-gen's options, as plain values.
///
/// [`Plan::new`] gives netmap's defaults for a port; set the fields that
/// differ, then hand it to [`crate::run`], which checks it
/// ([`Plan::check`]) before it opens the port.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Port to open (`-i`): `vale0:a`, `pipe{1`, `pipe}1`, ...
    pub port: String,
    /// Mode (`-f`).
    pub mode: Mode,
    /// Packets to send or receive over all threads (`-n`); 0 runs until
    /// `duration_s` or a signal.
    pub count: u64,
    /// Frame length in bytes without the Ethernet CRC (`-l`).
    pub frame_len: u16,
    /// Slots handled per sync (`-b`); `None`: [`DEFAULT_BURST`], or
    /// [`DEFAULT_RTT_BURST`] for ping and pong.
    pub burst: Option<u32>,
    /// Send rate limit over all threads (`-R`); 0 is unlimited.
    pub rate_pps: u64,
    /// Report interval (`-T`); 0: no interval reports.
    pub interval_ms: u64,
    /// Seconds to wait after opening the port, before starting (`-w`).
    pub wait_s: u32,
    /// Source MAC (`-S`).
    pub src_mac: MacAddr,
    /// Destination MAC (`-D`).
    pub dst_mac: MacAddr,
    /// Source address or range, with an optional port or port range (`-s`).
    pub src: Endpoint,
    /// Destination address or range, with an optional port or port range
    /// (`-d`).
    pub dst: Endpoint,
    /// A random source port for every packet (`-z`).
    pub random_src_port: bool,
    /// A random destination port for every packet (`-Z`).
    pub random_dst_port: bool,
    /// Threads, thread i on ring pair i of the port (`-p`).
    pub threads: u32,
    /// Spin instead of sleeping when the ring is full or empty (`--busy`).
    pub busy: bool,
    /// Sleep at once when the ring is full or empty, never spinning
    /// (`--blocking`; the default spins for a window that adapts).
    pub blocking: bool,
    /// Stop after this many seconds (`--duration`).
    pub duration_s: Option<f64>,
}

impl Plan {
    /// Default mode.
    pub const DEFAULT_MODE: Mode = Mode::Rx;
    /// Default frame length (netmap's 60: the shortest Ethernet frame
    /// without the CRC).
    pub const DEFAULT_FRAME_LEN: u16 = 60;
    /// Default report interval.
    pub const DEFAULT_INTERVAL_MS: u64 = 1000;
    /// Default threads.
    pub const DEFAULT_THREADS: u32 = 1;
    /// Default source MAC.
    pub const DEFAULT_SRC_MAC: MacAddr = MacAddr([0, 0, 0, 0, 0, 1]);
    /// Default destination MAC: broadcast.
    pub const DEFAULT_DST_MAC: MacAddr = MacAddr([0xff; 6]);
    /// Default source: `10.0.0.1:1234`.
    pub const DEFAULT_SRC: Endpoint =
        Endpoint::single(Ipv4Addr::new(10, 0, 0, 1), Some(DEFAULT_SRC_PORT));
    /// Default destination: `10.1.0.1:4321`.
    pub const DEFAULT_DST: Endpoint =
        Endpoint::single(Ipv4Addr::new(10, 1, 0, 1), Some(DEFAULT_DST_PORT));

    /// netmap pkt-gen's defaults on `port`: receive (rx) until a signal,
    /// 60-byte frames, a report every second, one thread.
    pub fn new(port: impl Into<String>) -> Plan {
        Plan {
            port: port.into(),
            mode: Plan::DEFAULT_MODE,
            count: 0,
            frame_len: Plan::DEFAULT_FRAME_LEN,
            burst: None,
            rate_pps: 0,
            interval_ms: Plan::DEFAULT_INTERVAL_MS,
            wait_s: 0,
            src_mac: Plan::DEFAULT_SRC_MAC,
            dst_mac: Plan::DEFAULT_DST_MAC,
            src: Plan::DEFAULT_SRC,
            dst: Plan::DEFAULT_DST,
            random_src_port: false,
            random_dst_port: false,
            threads: Plan::DEFAULT_THREADS,
            busy: false,
            blocking: false,
            duration_s: None,
        }
    }

    /// Checks what can be checked before the port is open, and derives
    /// the settings a run uses.
    pub fn check(&self) -> Result<CheckedPlan, PktGenError> {
        let a = self;
        match (a.threads, a.mode) {
            (0, _) => return Err(PktGenError::NoThreads),
            (1, _) => {}
            (threads, mode @ (Mode::Ping | Mode::Pong)) => {
                return Err(PktGenError::ThreadsForMode { mode, threads })
            }
            (threads, _) => {
                if a.rate_pps != 0 && a.rate_pps < u64::from(threads) {
                    return Err(PktGenError::RateBelowThreads {
                        rate: a.rate_pps,
                        threads,
                    });
                }
            }
        }
        let burst = a.burst.unwrap_or(match a.mode {
            Mode::Ping | Mode::Pong => DEFAULT_RTT_BURST,
            _ => DEFAULT_BURST,
        });
        if burst == 0 {
            return Err(PktGenError::Burst);
        }
        let duration_ns = match a.duration_s {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s <= MAX_DURATION_S => Some((s * 1e9) as u64),
            Some(_) => return Err(PktGenError::Duration),
        };
        if a.mode.sends() {
            for (random, flag, side, ep) in [
                (a.random_src_port, "-z", "source", &a.src),
                (a.random_dst_port, "-Z", "destination", &a.dst),
            ] {
                if random && ep.ports_vary() {
                    return Err(PktGenError::RandomWithRange {
                        flag,
                        side,
                        range: ep.to_string(),
                    });
                }
            }
        }
        let ports =
            a.random_src_port || a.random_dst_port || a.src.ports_vary() || a.dst.ports_vary();
        let addrs = a.src.ips_vary() || a.dst.ips_vary();
        let fields = match a.mode {
            Mode::Tx => Fields {
                ports,
                addrs,
                ..Fields::default()
            },
            Mode::Txseq => Fields {
                ports,
                addrs,
                seq: true,
                // Each thread's frames carry its index after the number.
                stream: a.threads > 1,
                ..Fields::default()
            },
            Mode::Ping => Fields {
                ports,
                addrs,
                seq: true,
                ts: true,
                ..Fields::default()
            },
            Mode::Rx | Mode::Rxseq | Mode::Pong => Fields::default(),
        };
        let len = usize::from(a.frame_len);
        let min = match a.mode {
            // A receiver accepts any length; what it sends is not a frame.
            Mode::Rx | Mode::Pong => frame::MIN_FRAME_LEN,
            Mode::Rxseq => frame::SEQ_FRAME_LEN,
            _ => fields.min_frame_len(),
        };
        if len < min {
            let why = if fields.stream {
                " with -p > 1 (room for the thread index)"
            } else if a.mode == Mode::Tx && addrs {
                " with an address range"
            } else if a.mode == Mode::Tx && ports && !(a.random_src_port || a.random_dst_port) {
                " with a port range"
            } else {
                ""
            };
            return Err(PktGenError::FrameTooShort {
                mode: a.mode,
                len,
                min,
                why,
            });
        }
        let spec = FrameSpec {
            src_mac: a.src_mac,
            dst_mac: a.dst_mac,
            src_ip: a.src.ip,
            dst_ip: a.dst.ip,
            src_port: a.src.port.unwrap_or(DEFAULT_SRC_PORT),
            dst_port: a.dst.port.unwrap_or(DEFAULT_DST_PORT),
            len,
        };
        let count = if a.count == 0 { u64::MAX } else { a.count };
        Ok(CheckedPlan {
            mode: a.mode,
            burst,
            len,
            fields,
            spec,
            src: a.src,
            dst: a.dst,
            random_src: a.random_src_port,
            random_dst: a.random_dst_port,
            count,
            duration_ns,
            threads: a.threads,
            rate_pps: a.rate_pps,
            interval_ms: a.interval_ms,
            busy: a.busy,
            blocking: a.blocking,
        })
    }
}

/// A [`Plan`] that passed [`Plan::check`]: the settings a run uses.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedPlan {
    pub(crate) mode: Mode,
    /// The burst asked for (the run lowers it to what a ring holds).
    pub(crate) burst: u32,
    pub(crate) len: usize,
    pub(crate) fields: Fields,
    pub(crate) spec: FrameSpec,
    /// The endpoints as given (ranges included).
    pub(crate) src: Endpoint,
    pub(crate) dst: Endpoint,
    pub(crate) random_src: bool,
    pub(crate) random_dst: bool,
    /// `u64::MAX` when unbounded.
    pub(crate) count: u64,
    pub(crate) duration_ns: Option<u64>,
    pub(crate) threads: u32,
    pub(crate) rate_pps: u64,
    pub(crate) interval_ms: u64,
    pub(crate) busy: bool,
    pub(crate) blocking: bool,
}

impl CheckedPlan {
    /// Whether the mode sends (tx, txseq, ping) rather than receives.
    pub(crate) fn sends(&self) -> bool {
        self.mode.sends()
    }

    /// Thread `i`'s share of `-R` (0: unlimited).
    pub(crate) fn rate_share(&self, i: u32) -> u64 {
        let n = u64::from(self.threads);
        self.rate_pps / n + u64::from(u64::from(i) < self.rate_pps % n)
    }
}

/// Plans for tests: of this crate, and of the command line that parses its
/// options into a [`Plan`] (with the `test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod examples {
    use super::{Mode, Plan};

    /// A plan that sets every option away from its default: what
    /// `-i pipe{1 -f txseq -n 1000 -l 128 -b 64 -R 10000 -T 500 -w 2
    /// -S 02:00:00:00:00:02 -D 02:00:00:00:00:03 -s 192.168.1.1
    /// -d 192.168.1.2:9 -z -Z -p 1 --busy --duration 1.5` asks for.
    pub fn every_option() -> Plan {
        Plan {
            mode: Mode::Txseq,
            count: 1000,
            frame_len: 128,
            burst: Some(64),
            rate_pps: 10000,
            interval_ms: 500,
            wait_s: 2,
            src_mac: "02:00:00:00:00:02".parse().expect("a MAC address"),
            dst_mac: "02:00:00:00:00:03".parse().expect("a MAC address"),
            src: "192.168.1.1".parse().expect("an endpoint"),
            dst: "192.168.1.2:9".parse().expect("an endpoint"),
            random_src_port: true,
            random_dst_port: true,
            threads: 1,
            busy: true,
            blocking: false,
            duration_s: Some(1.5),
            ..Plan::new("pipe{1")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> Endpoint {
        s.parse().unwrap()
    }

    /// netmap's defaults on port "x", changed by `f`, checked.
    fn a(f: impl FnOnce(&mut Plan)) -> Result<CheckedPlan, PktGenError> {
        let mut p = Plan::new("x");
        f(&mut p);
        p.check()
    }

    #[test]
    fn defaults_are_netmaps() {
        let a = Plan::new("vale0:a");
        assert_eq!((a.port.as_str(), a.mode), ("vale0:a", Mode::Rx));
        assert_eq!(
            (
                a.count,
                a.frame_len,
                a.burst,
                a.rate_pps,
                a.interval_ms,
                a.wait_s,
                a.threads
            ),
            (0, 60, None, 0, 1000, 0, 1)
        );
        assert_eq!(a.src_mac, MacAddr([0, 0, 0, 0, 0, 1]));
        assert_eq!(a.dst_mac, MacAddr([0xff; 6]));
        assert_eq!(a.src.to_string(), "10.0.0.1:1234");
        assert_eq!(a.dst.to_string(), "10.1.0.1:4321");
        assert!(!(a.random_src_port || a.random_dst_port || a.busy));
        assert_eq!(a.duration_s, None);
        let p = a.check().unwrap();
        assert_eq!((p.burst, p.count, p.duration_ns), (512, u64::MAX, None));
    }

    #[test]
    fn every_option() {
        let p = examples::every_option().check().unwrap();
        assert_eq!(
            p.spec.src_port, DEFAULT_SRC_PORT,
            "a source without a port keeps the default port"
        );
        assert_eq!(p.spec.dst_port, 9);
        assert_eq!(
            p.fields,
            Fields {
                ports: true,
                seq: true,
                ..Fields::default()
            }
        );
        assert_eq!(p.duration_ns, Some(1_500_000_000));
        assert_eq!(
            (p.count, p.burst, p.rate_pps, p.interval_ms),
            (1000, 64, 10000, 500)
        );
        assert!(p.busy && p.random_src && p.random_dst);
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        assert_eq!("bogus".parse::<Mode>(), Err(UnknownMode));
        assert!("zz".parse::<MacAddr>().is_err());
        assert!("10.0.0.2-10.0.0.1".parse::<Endpoint>().is_err());
        assert!("10.0.0.1:2-1".parse::<Endpoint>().is_err());
    }

    #[test]
    fn plan_checks() {
        assert!(matches!(a(|p| p.threads = 0), Err(PktGenError::NoThreads)));
        for m in [Mode::Ping, Mode::Pong] {
            let e = a(|p| {
                p.threads = 2;
                p.mode = m;
            })
            .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{m} runs in one thread; -p 2 is only for tx, rx, txseq and rxseq")
            );
        }
        for m in [Mode::Tx, Mode::Rx, Mode::Txseq, Mode::Rxseq] {
            let p = a(|p| {
                p.threads = 4;
                p.mode = m;
            });
            assert_eq!(p.unwrap().threads, 4, "{m}");
        }
        let rated = |threads, rate_pps| {
            a(|p| {
                p.threads = threads;
                p.rate_pps = rate_pps;
                p.mode = Mode::Tx;
            })
        };
        assert_eq!(
            rated(3, 2).unwrap_err().to_string(),
            "-R 2 is split over the 3 threads of -p, so it must be at least 3"
        );
        let p = rated(3, 10).unwrap();
        assert_eq!(
            (0..3).map(|i| p.rate_share(i)).collect::<Vec<_>>(),
            [4, 3, 3],
            "the rate is split, the remainder to the first threads"
        );
        // txseq threads write their index after the number: 48 bytes.
        let seq = |mode, threads, frame_len| {
            a(|p| {
                p.mode = mode;
                p.threads = threads;
                p.frame_len = frame_len;
            })
        };
        let p = seq(Mode::Txseq, 2, 60).unwrap();
        assert!(p.fields.seq && p.fields.stream && !p.fields.ts);
        assert!(!seq(Mode::Txseq, 1, 60).unwrap().fields.stream);
        assert_eq!(
            seq(Mode::Txseq, 2, 47).unwrap_err().to_string(),
            "txseq needs frames of at least 48 bytes with -p > 1 (room for the thread index), but -l 47 was given"
        );
        assert!(seq(Mode::Rxseq, 2, 46).is_ok());
        assert!(matches!(a(|p| p.burst = Some(0)), Err(PktGenError::Burst)));
        for bad in [0.0, -1.0, f64::INFINITY, f64::NAN, 366.0 * 86_400.0] {
            assert!(
                matches!(a(|p| p.duration_s = Some(bad)), Err(PktGenError::Duration)),
                "{bad}"
            );
        }
        let short = |mode, frame_len| {
            a(|p| {
                p.mode = mode;
                p.frame_len = frame_len;
            })
        };
        assert!(matches!(
            short(Mode::Rx, 13),
            Err(PktGenError::FrameTooShort { min: 14, .. })
        ));
        assert!(short(Mode::Tx, 14).is_ok());
        assert!(matches!(
            short(Mode::Txseq, 45),
            Err(PktGenError::FrameTooShort { min: 46, .. })
        ));
        assert!(matches!(
            short(Mode::Rxseq, 45),
            Err(PktGenError::FrameTooShort { min: 46, .. })
        ));
        assert!(matches!(
            short(Mode::Ping, 53),
            Err(PktGenError::FrameTooShort { min: 54, .. })
        ));
        assert!(matches!(
            a(|p| {
                p.frame_len = 41;
                p.random_src_port = true;
                p.mode = Mode::Tx;
            }),
            Err(PktGenError::FrameTooShort { min: 42, .. })
        ));
        let burst = |mode, burst| {
            a(|p| {
                p.mode = mode;
                p.burst = burst;
            })
            .unwrap()
        };
        assert_eq!(burst(Mode::Ping, None).burst, 1);
        assert_eq!(burst(Mode::Pong, None).burst, 1);
        assert_eq!(burst(Mode::Ping, Some(8)).burst, 8);
        assert_eq!(
            burst(Mode::Ping, None).fields,
            Fields {
                seq: true,
                ts: true,
                ..Fields::default()
            }
        );
        let e = short(Mode::Txseq, 45).unwrap_err().to_string();
        assert_eq!(
            e,
            "txseq needs frames of at least 46 bytes, but -l 45 was given"
        );
    }

    #[test]
    fn ranges_choose_the_stamped_fields() {
        let tx = |f: &dyn Fn(&mut Plan)| {
            a(|p| {
                p.mode = Mode::Tx;
                f(p);
            })
        };
        // No range: nothing stamped for tx, the fast path.
        assert!(!tx(&|_| {}).unwrap().fields.any());
        let p = tx(&|p| p.src = ep("10.0.0.1-10.0.0.9")).unwrap();
        assert_eq!(
            p.fields,
            Fields {
                addrs: true,
                ..Fields::default()
            }
        );
        assert_eq!(p.spec.src_ip, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.spec.src_port, DEFAULT_SRC_PORT);
        let p = tx(&|p| p.dst = ep("10.1.0.1:5000-5009")).unwrap();
        assert_eq!(
            p.fields,
            Fields {
                ports: true,
                ..Fields::default()
            }
        );
        assert_eq!(p.spec.dst_port, 5000, "the template starts the range");
        let both = |mode| {
            a(|p| {
                p.mode = mode;
                p.src = ep("10.0.0.1-10.0.0.2:1-2");
            })
            .unwrap()
        };
        let p = both(Mode::Txseq);
        assert!(p.fields.addrs && p.fields.ports && p.fields.seq);
        assert!(!both(Mode::Rx).fields.any());
        // An address range with -z is fine; a port range is not.
        assert!(tx(&|p| {
            p.random_src_port = true;
            p.src = ep("10.0.0.1-10.0.0.2");
        })
        .is_ok());
        assert_eq!(
            tx(&|p| {
                p.random_src_port = true;
                p.src = ep("10.0.0.1:1-2");
            })
            .unwrap_err()
            .to_string(),
            "-z picks a random source port for every packet; it cannot be combined with the source port range 10.0.0.1:1-2"
        );
        assert!(matches!(
            tx(&|p| {
                p.random_dst_port = true;
                p.dst = ep("10.0.0.1:1-2");
            }),
            Err(PktGenError::RandomWithRange { flag: "-Z", .. })
        ));
        assert_eq!(
            tx(&|p| {
                p.dst = ep("10.0.0.1:1-2");
                p.frame_len = 41;
            })
            .unwrap_err()
            .to_string(),
            "tx needs frames of at least 42 bytes with a port range, but -l 41 was given"
        );
    }
}
