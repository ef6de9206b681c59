//! Helpers shared by the fuzz targets: one in-process daemon per fuzzing
//! process, and the clean-up that returns it to its starting state after
//! every input (so inputs do not depend on each other).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ringswitch_control::proto::{PortInfo, Request, SwitchInfo};
use ringswitch_control::Connection;
use ringswitch_daemon::{Config, Daemon};

struct Shared {
    socket: PathBuf,
    _daemon: Daemon,
}

/// The daemon's control socket. The daemon is started on first use, with
/// one worker, in a private temporary directory; `RINGSWITCH_SOCKET` is set
/// to it, so client code in this process (the netmap emulation) finds it.
pub fn daemon_socket() -> &'static Path {
    static D: OnceLock<Shared> = OnceLock::new();
    &D.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ringswitch-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let socket = dir.join("ctl.sock");
        let _ = std::fs::remove_file(&socket);
        // Set once, before any thread of this process reads the environment.
        std::env::set_var("RINGSWITCH_SOCKET", &socket);
        let daemon = Daemon::start(Config::new(socket.clone())).expect("in-process daemon");
        Shared {
            socket,
            _daemon: daemon,
        }
    })
    .socket
}

/// Deletes every port and switch the daemon holds (ports opened by clients
/// go with their connections, which the caller drops first).
pub fn reset_daemon() {
    let mut c = Connection::connect(daemon_socket()).expect("the daemon answers");
    if let Ok((ports, _)) = c.call_as::<Vec<PortInfo>>(&Request::PortList { switch: None }) {
        for p in ports {
            let _ = c.call(&Request::PortDel { name: p.name });
        }
    }
    if let Ok((switches, _)) = c.call_as::<Vec<SwitchInfo>>(&Request::SwitchList) {
        for s in switches {
            let _ = c.call(&Request::SwitchDel { name: s.name });
        }
    }
}

/// A port name that is safe to hand a daemon under fuzzing: never a NIC
/// (`netmap:`, which would attach a host interface) and never `@conf`
/// sizes beyond the small ones in `conf` (a fuzz-chosen geometry could ask
/// for gigabytes of shared memory; the daemon's budgets are another item).
pub fn safe_name(raw: &str, conf: u8) -> String {
    let base: String = raw.split('@').next().unwrap_or("").replace("netmap", "nm");
    const CONFS: [&str; 4] = [
        "",
        "@conf:slots=64",
        "@conf:rings=2,slots=128,buf-size=256",
        "@conf:bogus=1",
    ];
    format!("{base}{}", CONFS[usize::from(conf) % CONFS.len()])
}
