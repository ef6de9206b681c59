//! `ringswitch`: the daemon, its control tool, pkt-gen, bridge and the demo.

mod ctl;
mod demo;
mod flow_text;
mod logging;
mod pktgen;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ringswitch",
    version,
    about = "netmap-style ports, a VALE switch and zero-copy pipes in userspace"
)]
struct Cli {
    /// Control socket (default: $RINGSWITCH_SOCKET, else /run/ringswitch/ringswitch.sock as root,
    /// else $XDG_RUNTIME_DIR/ringswitch.sock).
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the daemon in the foreground.
    Serve(ServeArgs),
    /// Control a running daemon, like vale-ctl.
    Ctl(ctl::CtlArgs),
    /// Generate or receive traffic, like netmap's pkt-gen.
    #[command(name = "pkt-gen")]
    PktGen(pktgen::PktGenArgs),
    /// Forward between two ports (zero copy between the ends of one pipe).
    Bridge(BridgeArgs),
    /// Start an embedded daemon and show a switch and a pipe at work.
    Demo(demo::DemoArgs),
    /// A live view of the daemon, like top: ports by rate, drops, workers.
    Top(top::TopArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Worker threads running the switches.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Microseconds a worker keeps polling for work before it sleeps (0:
    /// sleep at once). Default: a window that adapts to what spinning pays,
    /// never while another thread needs the CPU.
    #[arg(long)]
    idle_poll_us: Option<u64>,
    /// Longest time, in microseconds, frames received on an interface port
    /// (AF_XDP, AF_PACKET, TAP) may wait to be taken together (0: off, the
    /// worker wakes for every frame). A port is looked at on a timer this
    /// often only while its rate would give each look eight frames or more
    /// (160,000 frames per second at 50); below, its frames wake the
    /// worker as before.
    #[arg(long, value_name = "US", default_value_t = ringswitch_daemon::DEFAULT_RX_COALESCE_US)]
    rx_coalesce_us: u64,
    /// Packets a worker takes from one ring at a time (1..2048).
    #[arg(long, default_value_t = ringswitch_switch::DEFAULT_BATCH)]
    batch: u32,
    /// Seconds after which a learned MAC address is forgotten.
    #[arg(long, default_value_t = 300)]
    mac_age: u32,
    /// Pin worker threads to these CPUs, round robin (e.g. 1 or 0,1).
    #[arg(long, value_delimiter = ',', value_name = "CPUS")]
    worker_cpus: Vec<usize>,
    /// Run workers under SCHED_FIFO at this priority (1..99, needs
    /// CAP_SYS_NICE). On a CPU shared with a busy-polling process (a DPDK
    /// guest or testpmd), a woken worker then runs at once and hands the CPU
    /// back when it sleeps. Do not combine with --idle-poll-us.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    worker_rt_priority: Option<u8>,
    /// Keep the configuration (persistent switches and ports, VM ports,
    /// attached interfaces) in FILE: recreated from it at start, saved to it
    /// after every change, so a restarted daemon comes back as it was.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Members of this group (name or number) may connect, open ports and
    /// pipes and read counters. Without it only root and the daemon's user
    /// may connect.
    #[arg(long, value_name = "GROUP")]
    allow_group: Option<String>,
    /// Members of this group may also add and delete switches and ports,
    /// attach interfaces, and create vhost-user and passthrough sockets.
    #[arg(long, value_name = "GROUP")]
    admin_group: Option<String>,
    /// VM-facing sockets (vhost-user, passthrough) belong to this group,
    /// mode 0660: a hypervisor running as another user (libvirt's QEMU)
    /// connects to them without administering the daemon (default: the
    /// admin group, else the daemon's user alone).
    #[arg(long, value_name = "GROUP")]
    vm_socket_group: Option<String>,
    /// Connections one user may hold at once.
    #[arg(long, value_name = "N", default_value_t = ringswitch_daemon::DEFAULT_CONNS_PER_UID)]
    max_conns_per_uid: usize,
    /// Shared memory the ports and pipes of one connection may hold (K, M,
    /// G suffixes; default 1G).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    max_shm_per_conn: Option<u64>,
    /// Shared memory the ports and pipes of one user may hold (default 4G).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    max_shm_per_uid: Option<u64>,
    /// Shared memory of all ports and pipes (default: half the RAM).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    max_shm: Option<u64>,
    /// Descriptors the daemon may hold for one connection's ports (default:
    /// a quarter of --max-fds).
    #[arg(long, value_name = "N")]
    max_fds_per_conn: Option<u64>,
    /// Descriptors the daemon may hold for one user's ports (default: half
    /// of --max-fds).
    #[arg(long, value_name = "N")]
    max_fds_per_uid: Option<u64>,
    /// Descriptors the daemon may hold for all ports (default: three
    /// quarters of its RLIMIT_NOFILE).
    #[arg(long, value_name = "N")]
    max_fds: Option<u64>,
    /// Serve Prometheus metrics (/metrics) and a live web view (/) on this
    /// address, e.g. 127.0.0.1:9720 (port 0: any free port, logged at
    /// start). Off by default; there is no authentication, so keep it on
    /// loopback unless the network is trusted.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

fn size(s: &str) -> Result<u64, String> {
    ringswitch_daemon::parse_size(s)
        .ok_or_else(|| format!("{s:?} is not a size in bytes (K, M, G suffixes)"))
}

#[derive(clap::Args)]
struct BridgeArgs {
    /// The two ports (give -i twice).
    #[arg(short = 'i', num_args = 1, required = true)]
    ports: Vec<String>,
    /// Packets moved per sync.
    #[arg(short = 'b', default_value_t = 512)]
    batch: u32,
    /// Busy-wait instead of sleeping.
    #[arg(long)]
    busy: bool,
}

fn print_error(e: &dyn std::error::Error) {
    let mut msg = format!("ringswitch: {e}");
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    eprintln!("{msg}");
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon narrates at info; the tools only warn.
    logging::init(if matches!(cli.cmd, Cmd::Serve(_)) {
        "info"
    } else {
        "warn"
    });
    let socket = ringswitch_client::socket_for(cli.socket.as_deref());
    let res: Result<(), Box<dyn std::error::Error>> = match cli.cmd {
        Cmd::Serve(a) => serve(socket, a),
        Cmd::Ctl(a) => {
            quiet_on_closed_stdout();
            ctl::run(&socket, a)
        }
        Cmd::PktGen(a) => pktgen::run(&socket, &a).map_err(Into::into),
        Cmd::Bridge(a) => bridge(&socket, a),
        Cmd::Demo(a) => demo::run(cli.socket, a),
        Cmd::Top(a) => top::run(&socket, a).map_err(Into::into),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(e.as_ref());
            ExitCode::FAILURE
        }
    }
}

/// `ctl … | head` (or `grep -q`): a reader that stops early ends the
/// command quietly, as with any Unix tool, instead of a panic on EPIPE.
/// Only for `ctl`, which talks to nothing but the daemon and stdout: a
/// daemon served in this process must see EPIPE on its sockets, not die.
fn quiet_on_closed_stdout() {
    // SAFETY: restores the default disposition of SIGPIPE, which Rust's
    // runtime set to ignored; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn serve(socket: PathBuf, a: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let mut cfg = ringswitch_daemon::Config::new(socket);
    cfg.workers = a.workers;
    cfg.idle_poll_us = a.idle_poll_us;
    cfg.rx_coalesce_us = a.rx_coalesce_us;
    cfg.batch = a.batch;
    cfg.mac_age_s = a.mac_age;
    cfg.worker_cpus = a.worker_cpus;
    cfg.worker_rt_priority = a.worker_rt_priority;
    cfg.config = a.config.map(|p| std::path::absolute(&p).unwrap_or(p));
    cfg.allow_group = a.allow_group;
    cfg.admin_group = a.admin_group;
    cfg.vm_socket_group = a.vm_socket_group;
    cfg.max_conns_per_uid = a.max_conns_per_uid;
    cfg.metrics = a.metrics;
    let l = &mut cfg.limits;
    for (v, field) in [
        (a.max_shm_per_conn, &mut l.shm_per_conn),
        (a.max_shm_per_uid, &mut l.shm_per_uid),
        (a.max_shm, &mut l.shm_total),
        (a.max_fds_per_conn, &mut l.fds_per_conn),
        (a.max_fds_per_uid, &mut l.fds_per_uid),
        (a.max_fds, &mut l.fds_total),
    ] {
        if let Some(v) = v {
            *field = v;
        }
    }
    cfg.check()?;
    // The daemon proper is ringswitchd, installed beside this binary: its
    // resident memory then holds only the daemon's code. Without it (a
    // binary copied alone), serve in this process.
    if let Some(d) = daemon_beside_us() {
        let e = std::os::unix::process::CommandExt::exec(
            std::process::Command::new(&d).args(daemon_args(&cfg)),
        );
        tracing::warn!(daemon = %d.display(), error = %e, "cannot run ringswitchd; serving in this process");
    } else {
        tracing::debug!("no ringswitchd beside ringswitch; serving in this process");
    }
    cfg.program = ringswitch_daemon::upgrade::Program::current();
    ringswitch_daemon::serve_until_signalled(cfg).map_err(Into::into)
}

/// `ringswitchd` in the directory of the running `ringswitch`, if there.
fn daemon_beside_us() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let d = exe.parent()?.join("ringswitchd");
    d.is_file().then_some(d)
}

/// ringswitchd's command line for `cfg` (the options are serve's).
fn daemon_args(cfg: &ringswitch_daemon::Config) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec!["--socket".into(), cfg.socket.clone().into()];
    let mut opt = |k: &str, val: String| {
        v.push(k.into());
        v.push(val.into());
    };
    opt("--workers", cfg.workers.to_string());
    if let Some(us) = cfg.idle_poll_us {
        opt("--idle-poll-us", us.to_string());
    }
    opt("--rx-coalesce-us", cfg.rx_coalesce_us.to_string());
    opt("--batch", cfg.batch.to_string());
    opt("--mac-age", cfg.mac_age_s.to_string());
    if !cfg.worker_cpus.is_empty() {
        let cpus: Vec<String> = cfg.worker_cpus.iter().map(|c| c.to_string()).collect();
        opt("--worker-cpus", cpus.join(","));
    }
    if let Some(p) = cfg.worker_rt_priority {
        opt("--worker-rt-priority", p.to_string());
    }
    if let Some(g) = &cfg.allow_group {
        opt("--allow-group", g.clone());
    }
    if let Some(g) = &cfg.admin_group {
        opt("--admin-group", g.clone());
    }
    if let Some(g) = &cfg.vm_socket_group {
        opt("--vm-socket-group", g.clone());
    }
    opt("--max-conns-per-uid", cfg.max_conns_per_uid.to_string());
    let l = cfg.limits;
    opt("--max-shm-per-conn", l.shm_per_conn.to_string());
    opt("--max-shm-per-uid", l.shm_per_uid.to_string());
    opt("--max-shm", l.shm_total.to_string());
    opt("--max-fds-per-conn", l.fds_per_conn.to_string());
    opt("--max-fds-per-uid", l.fds_per_uid.to_string());
    opt("--max-fds", l.fds_total.to_string());
    if let Some(c) = &cfg.config {
        v.push("--config".into());
        v.push(c.clone().into());
    }
    if let Some(a) = cfg.metrics {
        v.push("--metrics".into());
        v.push(a.to_string().into());
    }
    v
}

fn bridge(socket: &std::path::Path, a: BridgeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.ports.len() != 2 {
        return Err("bridge needs exactly two ports: -i A -i B".into());
    }
    let stop = ringswitch_daemon::signals::install()?;
    let mut p0 = ringswitch_client::Port::open_at(socket, &a.ports[0])?;
    let mut p1 = ringswitch_client::Port::open_at(socket, &a.ports[1])?;
    let mode = if a.busy {
        ringswitch_client::WaitMode::Busy
    } else {
        ringswitch_client::WaitMode::Adaptive
    };
    let stats = ringswitch_client::bridge::run(&mut p0, &mut p1, a.batch, mode, &stop)?;
    println!(
        "bridge: {} packets {} -> {}, {} packets {} -> {} ({} zero-copy)",
        stats.forward[0],
        a.ports[0],
        a.ports[1],
        stats.forward[1],
        a.ports[1],
        a.ports[0],
        if stats.zero_copy { "" } else { "not " }
    );
    Ok(())
}
