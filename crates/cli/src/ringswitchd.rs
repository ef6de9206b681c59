//! `ringswitchd`: the ringswitch daemon alone, what `ringswitch serve` runs.
//!
//! A binary of its own so that the daemon's resident memory holds the
//! daemon's code and nothing else: the kernel maps a program's file pages in
//! 64 KiB windows around every page it touches, so the tools linked into
//! `ringswitch` (clap, pkt-gen, the demo) would otherwise count as the
//! daemon's memory. Its options are `ringswitch serve`'s, parsed by hand for
//! the same reason.

mod logging;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: ringswitchd [--socket PATH] [--workers N] [--idle-poll-us US] [--batch N]
                   [--rx-coalesce-us US]
                   [--mac-age S] [--worker-cpus CPUS] [--worker-rt-priority PRIO]
                   [--config FILE] [--allow-group G] [--admin-group G]
                   [--vm-socket-group G]
                   [--max-conns-per-uid N] [--max-shm-per-conn SIZE]
                   [--max-shm-per-uid SIZE] [--max-shm SIZE] [--max-fds-per-conn N]
                   [--max-fds-per-uid N] [--max-fds N] [--metrics ADDR]

The ringswitch daemon, in the foreground (what `ringswitch serve` runs).

  --socket PATH              control socket (default: $RINGSWITCH_SOCKET, else
                             /run/ringswitch/ringswitch.sock as root, else
                             $XDG_RUNTIME_DIR/ringswitch.sock)
  --workers N                worker threads running the switches (default 1)
  --idle-poll-us US          microseconds a worker keeps polling for work
                             before it sleeps (0: sleep at once; default: a
                             window that adapts to what spinning pays, never
                             while another thread needs the CPU)
  --rx-coalesce-us US        longest time frames received on an interface port
                             may wait to be taken together (0: off; default
                             50; only while the port's rate makes each look
                             find frames)
  --batch N                  packets a worker takes from one ring at a time
                             (1..2048, default 512)
  --mac-age S                seconds after which a learned MAC address is
                             forgotten (default 300)
  --worker-cpus CPUS         pin workers to these CPUs, round robin (e.g. 1 or 0,1)
  --worker-rt-priority PRIO  run workers under SCHED_FIFO at PRIO (1..99)
  --config FILE              keep the configuration in FILE and restore it at start
  --allow-group G            members of group G may connect, open ports and pipes
                             and read counters (default: only root and the
                             daemon's user may connect)
  --admin-group G            members of group G may also add and delete switches
                             and ports, attach interfaces, and create vhost-user
                             and passthrough sockets
  --vm-socket-group G        vhost-user and passthrough sockets belong to group G
                             (mode 0660), so a hypervisor running as another user
                             connects without administering the daemon
  --max-conns-per-uid N      connections one user may hold (default 256)
  --max-shm-per-conn SIZE    shared memory of ports and pipes one connection may
                             make (default 1G; K, M, G suffixes)
  --max-shm-per-uid SIZE     the same for all connections of one user (default 4G)
  --max-shm SIZE             the same for the whole daemon (default: half the RAM)
  --max-fds-per-conn N       descriptors the daemon may hold for one connection's
                             ports (default: a quarter of --max-fds)
  --max-fds-per-uid N        the same for one user (default: half of --max-fds)
  --max-fds N                the same for the whole daemon (default: three
                             quarters of the daemon's RLIMIT_NOFILE)
  --metrics ADDR             serve Prometheus metrics (/metrics) and a live web
                             view (/) on ADDR, e.g. 127.0.0.1:9720 (port 0: any
                             free port, logged at start; default: off; no
                             authentication: keep it on loopback)
  -h, --help                 this text
  -V, --version              the version

Logging: RINGSWITCH_LOG=error|warn|info|debug|trace (default info).";

/// A command-line mistake, said in one sentence.
#[derive(Debug, thiserror::Error)]
enum ArgError {
    #[error("{0} needs a value")]
    Missing(String),
    #[error("{opt} takes {what}, not {value:?}")]
    Bad {
        opt: String,
        what: &'static str,
        value: String,
    },
    #[error("unknown option {0}")]
    Unknown(String),
}

enum Parsed {
    Run(Box<ringswitch_daemon::Config>),
    Help,
    Version,
}

fn number<T: std::str::FromStr>(opt: &str, v: &str, what: &'static str) -> Result<T, ArgError> {
    v.parse().map_err(|_| ArgError::Bad {
        opt: opt.to_string(),
        what,
        value: v.to_string(),
    })
}

fn size(opt: &str, v: &str) -> Result<u64, ArgError> {
    ringswitch_daemon::parse_size(v).ok_or_else(|| ArgError::Bad {
        opt: opt.to_string(),
        what: "a size in bytes (K, M, G suffixes)",
        value: v.to_string(),
    })
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed, ArgError> {
    let mut socket: Option<PathBuf> = None;
    let mut cfg = ringswitch_daemon::Config::new(PathBuf::new());
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match opt.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "-V" | "--version" => return Ok(Parsed::Version),
            _ => {}
        }
        let known = [
            "--socket",
            "--workers",
            "--idle-poll-us",
            "--rx-coalesce-us",
            "--batch",
            "--mac-age",
            "--worker-cpus",
            "--worker-rt-priority",
            "--config",
            "--allow-group",
            "--admin-group",
            "--vm-socket-group",
            "--max-conns-per-uid",
            "--max-shm-per-conn",
            "--max-shm-per-uid",
            "--max-shm",
            "--max-fds-per-conn",
            "--max-fds-per-uid",
            "--max-fds",
            "--metrics",
        ];
        if !known.contains(&opt.as_str()) {
            return Err(ArgError::Unknown(arg));
        }
        let v = match inline.or_else(|| it.next()) {
            Some(v) => v,
            None => return Err(ArgError::Missing(opt)),
        };
        match opt.as_str() {
            "--socket" => socket = Some(PathBuf::from(v)),
            "--workers" => cfg.workers = number(&opt, &v, "a number of threads")?,
            "--idle-poll-us" => cfg.idle_poll_us = Some(number(&opt, &v, "microseconds")?),
            "--rx-coalesce-us" => cfg.rx_coalesce_us = number(&opt, &v, "microseconds")?,
            "--batch" => cfg.batch = number(&opt, &v, "a number of packets")?,
            "--mac-age" => cfg.mac_age_s = number(&opt, &v, "seconds")?,
            "--worker-cpus" => {
                cfg.worker_cpus = v
                    .split(',')
                    .map(|c| number(&opt, c.trim(), "CPU numbers separated by commas"))
                    .collect::<Result<_, _>>()?;
            }
            "--worker-rt-priority" => {
                cfg.worker_rt_priority = Some(number(&opt, &v, "a priority from 1 to 99")?);
            }
            "--allow-group" => cfg.allow_group = Some(v),
            "--admin-group" => cfg.admin_group = Some(v),
            "--vm-socket-group" => cfg.vm_socket_group = Some(v),
            "--max-conns-per-uid" => {
                cfg.max_conns_per_uid = number(&opt, &v, "a number of connections")?;
            }
            "--max-shm-per-conn" => cfg.limits.shm_per_conn = size(&opt, &v)?,
            "--max-shm-per-uid" => cfg.limits.shm_per_uid = size(&opt, &v)?,
            "--max-shm" => cfg.limits.shm_total = size(&opt, &v)?,
            "--max-fds-per-conn" => {
                cfg.limits.fds_per_conn = number(&opt, &v, "a number of descriptors")?;
            }
            "--max-fds-per-uid" => {
                cfg.limits.fds_per_uid = number(&opt, &v, "a number of descriptors")?;
            }
            "--max-fds" => cfg.limits.fds_total = number(&opt, &v, "a number of descriptors")?,
            "--metrics" => {
                cfg.metrics = Some(number(
                    &opt,
                    &v,
                    "an address and port such as 127.0.0.1:9720",
                )?);
            }
            _ => {
                let p = PathBuf::from(v);
                cfg.config = Some(std::path::absolute(&p).unwrap_or(p));
            }
        }
    }
    cfg.socket = ringswitch_client::socket_for(socket.as_deref());
    Ok(Parsed::Run(Box::new(cfg)))
}

/// One malloc arena for every thread. The workers allocate nothing per
/// packet, so they gain nothing from arenas of their own, and in the one
/// arena `malloc_trim` (which the control thread calls after a burst of
/// requests) can give back the free memory at its top too.
fn one_malloc_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt takes two integers and only changes the allocator's
    // settings; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn main() -> ExitCode {
    one_malloc_arena();
    let cfg = match parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(cfg)) => *cfg,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            println!("ringswitchd {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ringswitchd: {e}; see ringswitchd --help");
            return ExitCode::from(2);
        }
    };
    logging::init("info");
    let mut cfg = cfg;
    cfg.program = ringswitch_daemon::upgrade::Program::current();
    match ringswitch_daemon::serve_until_signalled(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = format!("ringswitchd: {e}");
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<ringswitch_daemon::Config, ArgError> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Parsed::Run(c) => Ok(*c),
            _ => panic!("expected a configuration"),
        }
    }

    #[test]
    fn takes_serve_options_in_both_spellings() {
        let c = run(&[
            "--socket",
            "/tmp/x.sock",
            "--workers=2",
            "--idle-poll-us",
            "50",
            "--batch=64",
            "--mac-age",
            "10",
            "--worker-cpus",
            "0,1",
        ])
        .unwrap();
        assert_eq!(c.socket, PathBuf::from("/tmp/x.sock"));
        assert_eq!(
            (c.workers, c.idle_poll_us, c.batch, c.mac_age_s),
            (2, Some(50), 64, 10)
        );
        assert_eq!(c.worker_cpus, vec![0, 1]);
        assert_eq!(c.rx_coalesce_us, ringswitch_daemon::DEFAULT_RX_COALESCE_US);
        assert!(c.check().is_ok());
        assert_eq!(run(&["--rx-coalesce-us=0"]).unwrap().rx_coalesce_us, 0);
        let c = run(&[
            "--allow-group=root",
            "--admin-group",
            "0",
            "--vm-socket-group=64055",
            "--max-conns-per-uid",
            "8",
            "--max-shm-per-conn",
            "64M",
            "--max-shm-per-uid=1G",
            "--max-shm",
            "2G",
            "--max-fds-per-conn",
            "100",
            "--max-fds-per-uid",
            "200",
            "--max-fds",
            "300",
        ])
        .unwrap();
        assert_eq!(c.allow_group.as_deref(), Some("root"));
        assert_eq!(c.admin_group.as_deref(), Some("0"));
        assert_eq!(c.vm_socket_group.as_deref(), Some("64055"));
        assert_eq!(c.max_conns_per_uid, 8);
        let l = c.limits;
        assert_eq!(
            (l.shm_per_conn, l.shm_per_uid, l.shm_total),
            (64 << 20, 1 << 30, 2 << 30)
        );
        assert_eq!(
            (l.fds_per_conn, l.fds_per_uid, l.fds_total),
            (100, 200, 300)
        );
        assert!(c.check().is_ok());
        let c = run(&["--allow-group", "no-such-group-here"]).unwrap();
        assert!(c.check().unwrap_err().to_string().contains("no such group"));
        let e = run(&["--max-shm", "lots"]).unwrap_err().to_string();
        assert!(e.contains("a size in bytes"), "{e}");
        assert_eq!(
            run(&[]).unwrap().metrics,
            None,
            "metrics are off by default"
        );
        let c = run(&["--metrics", "127.0.0.1:9720"]).unwrap();
        assert_eq!(c.metrics, Some("127.0.0.1:9720".parse().unwrap()));
        let c = run(&["--metrics=[::1]:0"]).unwrap();
        assert_eq!(c.metrics, Some("[::1]:0".parse().unwrap()));
        let e = run(&["--metrics", "9720"]).unwrap_err().to_string();
        assert!(e.contains("an address and port"), "{e}");
    }

    #[test]
    fn refuses_what_it_does_not_know_with_a_sentence() {
        let e = run(&["--wrokers", "2"]).unwrap_err().to_string();
        assert_eq!(e, "unknown option --wrokers");
        let e = run(&["--batch"]).unwrap_err().to_string();
        assert_eq!(e, "--batch needs a value");
        let e = run(&["--worker-cpus", "0,x"]).unwrap_err().to_string();
        assert!(e.contains("CPU numbers"), "{e}");
        let c = run(&["--batch", "0"]).unwrap();
        assert!(c.check().unwrap_err().to_string().contains("out of range"));
        let c = run(&["--worker-rt-priority", "5", "--idle-poll-us", "10"]).unwrap();
        assert!(c
            .check()
            .unwrap_err()
            .to_string()
            .contains("one or the other"));
    }
}
