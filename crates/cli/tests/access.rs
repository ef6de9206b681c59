//! Local users and clients against the daemon's control plane, through a
//! real `ringswitchd` process and real sockets (issue 15, items 7, 8, 10,
//! 13 and 14): descriptor exhaustion, socket paths that are not the
//! daemon's, the fallback socket path, the access policy, budgets.
//!
//! Tests that run processes as another user need root; elsewhere they say
//! so and pass.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ringswitch_control::{CallError, Connection, ErrorCode, ErrorReply, Request, SeqPacket};

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");
const DAEMON: &str = env!("CARGO_BIN_EXE_ringswitchd");
/// nobody and nogroup on Debian.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn skip_unless_root(what: &str) -> bool {
    if !is_root() {
        eprintln!("skipping {what}: it runs processes as another user, which needs root");
        return true;
    }
    false
}

fn tmp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rs-access-{}-{tag}", std::process::id()))
}

/// Waits for `what` with a generous deadline (a loaded machine is slow,
/// never wrong).
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A ringswitchd process, killed on drop; its stderr goes to a file.
struct Daemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(tag: &str, args: &[&str], setup: impl FnOnce(&mut Command)) -> Daemon {
        let socket = tmp(&format!("{tag}.sock"));
        let log = tmp(&format!("{tag}.log"));
        let _ = std::fs::remove_file(&socket);
        let mut cmd = Command::new(DAEMON);
        cmd.arg("--socket")
            .arg(&socket)
            .args(args)
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        setup(&mut cmd);
        let child = cmd.spawn().expect("ringswitchd starts");
        let d = Daemon { child, socket, log };
        d.wait_listening();
        d
    }

    fn wait_listening(&self) {
        wait_until("the daemon's socket", || {
            SeqPacket::connect(&self.socket).is_ok()
        });
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `ringswitch ctl ARGS` as root.
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            .arg("ctl")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ctl_ok(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        assert!(o.status.success(), "ctl {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn ctl_err(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        assert!(
            !o.status.success(),
            "ctl {args:?} should fail: {}",
            text(&o)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// The daemon answers and forwards: a pipe carries frames end to end.
    fn still_works(&self) {
        let mut c = Connection::connect(&self.socket).expect("connects");
        c.call(&Request::Hello { version: 1 }).expect("answers");
        let mut a = ringswitch_client::Port::open_at(&self.socket, "alive{1").unwrap();
        let mut b = ringswitch_client::Port::open_at(&self.socket, "alive}1").unwrap();
        let mut tx = a.tx(0);
        let mut s = tx.slot(0).unwrap();
        assert!(s.write_at(0, &[0xab; 60]));
        s.set_len(60);
        tx.advance(1);
        tx.sync().unwrap();
        let mut rx = b.rx(0);
        wait_until("a frame through the pipe", || {
            rx.wait(Some(Duration::from_millis(100))).unwrap()
        });
        assert_eq!(rx.slot(0).unwrap().payload(), &[0xab; 60]);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(self.socket.with_extension("sockets"));
        let _ = std::fs::remove_file(&self.log);
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs the command as `uid` with primary group `gid` and supplementary
/// `groups` (set in the child, before exec).
fn as_user(cmd: &mut Command, uid: u32, gid: u32, groups: &[u32]) {
    let groups = groups.to_vec();
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `ringswitch ARGS` as another user, with extra environment.
/// A pipe end that user NOBODY, in group `users`, is refused on `socket`,
/// the refusal saying `why`.
fn refused_to_another_user(users: u32, socket: &Path, end: &str, why: &str) {
    let o = run_as(
        NOBODY,
        NOBODY,
        &[users],
        socket,
        &[
            "pkt-gen",
            "-f",
            "rx",
            "-i",
            end,
            "-n",
            "1",
            "--duration",
            "5",
        ],
    );
    assert!(!o.status.success(), "another user got {end}: {}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(why), "{e}");
}

fn run_as(uid: u32, gid: u32, groups: &[u32], socket: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("--socket")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null());
    as_user(&mut cmd, uid, gid, groups);
    cmd.output().unwrap()
}

/// CPU time (user + system) of a process in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name in parentheses: state is field 3; utime and
    // stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A non-blocking connect that is kept whether or not the daemon accepted
/// it yet (`None`: the backlog is full).
fn connect_nonblocking(path: &Path) -> Option<OwnedFd> {
    // SAFETY: socket() with constant arguments.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    assert!(raw >= 0);
    // SAFETY: a fresh fd.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: plain data.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(path.as_os_str().as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: connect with a valid sockaddr_un.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    (r == 0).then_some(fd)
}

/// Item 7: with its descriptors used up by idle connections the daemon
/// pauses accepting instead of spinning, logs a few lines instead of
/// megabytes, and serves real clients again once the connections close.
#[test]
fn out_of_descriptors_the_daemon_backs_off() {
    let d = Daemon::start(
        "emfile",
        &["--max-conns-per-uid", "4096", "--max-fds", "32"],
        |cmd| {
            // SAFETY: setrlimit is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    let r = libc::rlimit {
                        rlim_cur: 64,
                        rlim_max: 64,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        },
    );
    // More connections than the daemon has descriptors: some accepted, the
    // backlog full behind them. Connecting goes on until the daemon says it
    // ran out (a busy machine may let the backlog fill before the daemon
    // accepts any; each refused connect is retried on the next round).
    let mut held = Vec::new();
    wait_until("the daemon to run out of descriptors", || {
        for _ in 0..50 {
            if let Some(fd) = connect_nonblocking(&d.socket) {
                held.push(fd);
            }
        }
        d.log().contains("out of descriptors")
    });
    assert!(held.len() > 64, "only {} connections", held.len());
    // While they are held: the daemon sleeps between short looks. A
    // spinning control thread burns a whole CPU (85 % was measured before
    // the fix); measured over at least 3 s of its life.
    let (t0, c0) = (Instant::now(), cpu_ticks(d.pid()));
    std::thread::sleep(Duration::from_secs(3));
    let (wall, cpu) = (t0.elapsed(), cpu_ticks(d.pid()) - c0);
    // SAFETY: sysconf with a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let share = cpu as f64 / hz / wall.as_secs_f64();
    assert!(
        share < 0.25,
        "the daemon used {:.0} % of a CPU",
        share * 100.0
    );
    let log = d.log();
    assert!(
        log.len() < 16 * 1024,
        "{} bytes of log while out of descriptors:\n{}",
        log.len(),
        &log[..log.len().min(2000)]
    );
    drop(held);
    // A real client gets through and the daemon works.
    wait_until("a real client to connect", || {
        Connection::connect(&d.socket)
            .and_then(|mut c| c.call(&Request::SwitchList))
            .is_ok()
    });
    d.still_works();
}

/// Item 7: one user cannot take every connection.
#[test]
fn connections_per_user_are_limited() {
    let d = Daemon::start("conns", &["--max-conns-per-uid", "8"], |_| {});
    let mut held: Vec<Connection> = (0..8)
        .map(|_| {
            let mut c = Connection::connect(&d.socket).unwrap();
            c.call(&Request::SwitchList).unwrap();
            c
        })
        .collect();
    let mut c = Connection::connect(&d.socket).unwrap();
    match c.call(&Request::SwitchList) {
        Err(CallError::Daemon(e)) => {
            assert_eq!(e.code, ErrorCode::Limit);
            assert!(e.message.contains("--max-conns-per-uid"), "{}", e.message);
        }
        other => panic!("a ninth connection was served: {other:?}"),
    }
    held.pop();
    wait_until("room for a connection again", || {
        Connection::connect(&d.socket)
            .and_then(|mut c| c.call(&Request::SwitchList))
            .is_ok()
    });
}

/// Item 8: a VM or passthrough port on a path where something else lives
/// is refused, and what lives there is left alone: the daemon's own control
/// socket, another program's live socket, a stale socket the daemon did not
/// make, a file. `--config` replays none of it on restart; a socket the
/// daemon made itself and left behind when killed is replaced.
#[test]
fn socket_paths_of_others_are_never_removed() {
    let d = Daemon::start("paths", &[], |_| {});
    let ctl_sock = d.socket.display().to_string();
    let e = d.ctl_err(&["port", "add", "vale0:vm", "--vhost-user", &ctl_sock]);
    assert!(e.contains("in use"), "{e}");
    let e = d.ctl_err(&["port", "add", "vale0:pt", "--passthrough", &ctl_sock]);
    assert!(e.contains("in use"), "{e}");
    assert!(d.ctl(&["switch", "list"]).status.success());

    let live = tmp("live.sock");
    let _ = std::fs::remove_file(&live);
    let l = std::os::unix::net::UnixListener::bind(&live).unwrap();
    let e = d.ctl_err(&[
        "port",
        "add",
        "vale0:vm",
        "--vhost-user",
        &live.display().to_string(),
    ]);
    assert!(e.contains("in use"), "{e}");
    assert!(live.exists());
    drop(l); // std leaves the file: a stale socket nobody listens on.
    let e = d.ctl_err(&[
        "port",
        "add",
        "vale0:vm",
        "--vhost-user",
        &live.display().to_string(),
    ]);
    assert!(
        e.contains("did not create") && e.contains("remove it"),
        "{e}"
    );
    assert!(live.exists());
    let file = tmp("file");
    std::fs::write(&file, b"keep me").unwrap();
    let e = d.ctl_err(&[
        "port",
        "add",
        "vale0:pt",
        "--passthrough",
        &file.display().to_string(),
    ]);
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");

    // A socket of the daemon's own gets an explicit mode, whatever the umask.
    let vm = tmp("vm.sock");
    let _ = std::fs::remove_file(&vm);
    d.ctl_ok(&[
        "port",
        "add",
        "vale0:vm",
        "--vhost-user",
        &vm.display().to_string(),
    ]);
    let m = std::fs::symlink_metadata(&vm).unwrap();
    assert_eq!(m.mode() & 0o777, 0o600, "vhost-user socket mode");
    assert_eq!(
        std::fs::metadata(&d.socket).unwrap().mode() & 0o777,
        0o600,
        "control socket mode"
    );
    // Deleting the port removes its socket, which is the daemon's.
    d.ctl_ok(&["port", "del", "vale0:vm"]);
    assert!(!vm.exists());
    let _ = std::fs::remove_file(&live);
    let _ = std::fs::remove_file(&file);
    drop(d);

    // --config: a saved VM port on the control socket's path is not
    // replayed over it; a VM port whose socket the killed daemon left
    // behind comes back on it.
    let conf = tmp("paths.json");
    let sock = tmp("paths2.sock");
    let _ = std::fs::remove_file(&sock);
    let conf_s = conf.display().to_string();
    let vm_s = vm.display().to_string();
    let mut d = Daemon::start("paths2", &["--config", &conf_s], |_| {});
    d.ctl_ok(&["port", "add", "vale0:vm", "--vhost-user", &vm_s]);
    // SIGKILL: nothing of the daemon's clean-up runs; its sockets stay.
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    assert!(vm.exists() && d.socket.exists());
    // Point the saved VM port at the control socket too: a hand-edited or
    // hostile configuration.
    let text = std::fs::read_to_string(&conf).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ctl_path = d.socket.display().to_string();
    let mut bad = None;
    if let Some(arr) = v.get_mut("requests").and_then(|r| r.as_array_mut()) {
        let mut copy = arr
            .iter()
            .find(|r| r.to_string().contains(&vm_s))
            .cloned()
            .expect("the VM port is saved");
        let s = copy
            .to_string()
            .replace(&vm_s, &ctl_path)
            .replace("vale0:vm", "vale0:vm2");
        copy = serde_json::from_str(&s).unwrap();
        bad = Some(copy.clone());
        arr.push(copy);
    }
    assert!(bad.is_some(), "unexpected configuration format: {text}");
    std::fs::write(&conf, serde_json::to_vec(&v).unwrap()).unwrap();
    let log = d.log.clone();
    let mut cmd = Command::new(DAEMON);
    cmd.arg("--socket")
        .arg(&d.socket)
        .args(["--config", &conf_s])
        .env("RINGSWITCH_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    d.child = cmd.spawn().unwrap();
    d.wait_listening();
    let list = d.ctl_ok(&["port", "list"]);
    assert!(
        list.contains("vale0:vm") && !list.contains("vale0:vm2"),
        "{list}"
    );
    assert!(vm.exists());
    assert!(
        d.log().contains("cannot restore"),
        "the refused port is logged: {}",
        d.log()
    );
    d.still_works();
    d.ctl_ok(&["port", "del", "vale0:vm"]);
    let _ = std::fs::remove_file(&conf);
}

/// Item 13: without XDG_RUNTIME_DIR a user's daemon listens in a private
/// directory of its own, and refuses one another user made first; a
/// client refuses a daemon of another user unless told to trust it.
#[test]
fn the_fallback_socket_path_is_private() {
    if skip_unless_root("the_fallback_socket_path_is_private") {
        return;
    }
    let dir = PathBuf::from(format!("/tmp/ringswitch-{NOBODY}"));
    let _ = std::fs::remove_dir_all(&dir);
    // Another user (root here) made the directory first.
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let serve = || {
        let mut cmd = Command::new(DAEMON);
        cmd.env_remove("XDG_RUNTIME_DIR")
            .env_remove("RINGSWITCH_SOCKET")
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        as_user(&mut cmd, NOBODY, NOBODY, &[]);
        cmd
    };
    let out = serve().output().unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("belongs to uid 0") && e.contains("XDG_RUNTIME_DIR"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let mut child = serve().spawn().unwrap();
    let sock = dir.join("ringswitch.sock");
    wait_until("the private socket", || SeqPacket::connect(&sock).is_ok());
    let m = std::fs::symlink_metadata(&dir).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (NOBODY, 0o700));
    // Root's client does not trust nobody's daemon unless told to.
    let o = Command::new(BIN)
        .arg("--socket")
        .arg(&sock)
        .args(["ctl", "switch", "list"])
        .env_remove("RINGSWITCH_DAEMON_UID")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("served by uid 65534") && e.contains("RINGSWITCH_DAEMON_UID"),
        "{e}"
    );
    let o = Command::new(BIN)
        .arg("--socket")
        .arg(&sock)
        .args(["ctl", "switch", "list"])
        .env("RINGSWITCH_DAEMON_UID", NOBODY.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // The user's own client finds it on the default path.
    let mut cmd = Command::new(BIN);
    cmd.args(["ctl", "switch", "list"])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("RINGSWITCH_SOCKET");
    as_user(&mut cmd, NOBODY, NOBODY, &[]);
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // SAFETY: kill with a pid we own.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 14: who may connect and what each may do, decided on the peer's
/// credentials.
#[test]
fn peers_get_what_the_policy_gives_them() {
    if skip_unless_root("peers_get_what_the_policy_gives_them") {
        return;
    }
    // Groups by number: they need not exist in /etc/group.
    let (users, admins) = (47_001u32, 47_002u32);
    let d = Daemon::start(
        "policy",
        &[
            "--allow-group",
            &users.to_string(),
            "--admin-group",
            &admins.to_string(),
        ],
        |_| {},
    );
    let m = std::fs::metadata(&d.socket).unwrap();
    assert_eq!(
        m.mode() & 0o777,
        0o666,
        "two groups: the daemon is the gate"
    );
    let s = &d.socket;
    // A stranger is refused at connect, with the reason.
    let o = run_as(NOBODY, NOBODY, &[], s, &["ctl", "switch", "list"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("uid 65534 may not use this daemon"), "{e}");
    // A user (supplementary group) opens ports and reads counters...
    let o = run_as(NOBODY, NOBODY, &[users], s, &["ctl", "switch", "list"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run_as(
        NOBODY,
        NOBODY,
        &[users],
        s,
        &["pkt-gen", "-f", "tx", "-i", "vale0:u", "-n", "10"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run_as(NOBODY, users, &[], s, &["ctl", "stats"]);
    assert!(o.status.success(), "{}", text(&o));
    // ...but does not administer.
    for args in [
        &["ctl", "switch", "add", "vale9"][..],
        &["ctl", "port", "add", "vale0:p"],
        &[
            "ctl",
            "port",
            "add",
            "vale0:vm",
            "--vhost-user",
            "/tmp/rs-access-evil.sock",
        ],
        &["ctl", "attach", "vale0", "lo"],
        &["ctl", "upgrade"],
        &["pkt-gen", "-f", "rx", "-i", "netmap:lo", "-n", "1"],
    ] {
        let o = run_as(NOBODY, NOBODY, &[users], s, args);
        assert!(!o.status.success(), "{args:?} was allowed");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("needs an administrator"), "{args:?}: {e}");
    }
    assert!(!Path::new("/tmp/rs-access-evil.sock").exists());
    // An admin does.
    let o = run_as(
        NOBODY,
        NOBODY,
        &[admins],
        s,
        &["ctl", "switch", "add", "vale9"],
    );
    assert!(o.status.success(), "{}", text(&o));
    d.ctl_ok(&["switch", "del", "vale9"]);
    // ...but does not choose a program for the daemon's user to run.
    let o = run_as(
        NOBODY,
        NOBODY,
        &[admins],
        s,
        &["ctl", "upgrade", "--binary", "/bin/true"],
    );
    assert!(!o.status.success(), "an admin named the upgrade's binary");
    assert!(
        text(&o).contains("only root or that user may name one"),
        "{}",
        text(&o)
    );
    d.still_works();
    drop(d);
    // One group: the socket is that group's.
    let d = Daemon::start("policy1", &["--allow-group", &users.to_string()], |_| {});
    let m = std::fs::metadata(&d.socket).unwrap();
    assert_eq!((m.mode() & 0o777, m.gid()), (0o660, users));
    drop(d);
    // A group for hypervisors: VM sockets are theirs, the control socket
    // is not, and they administer nothing.
    let d = Daemon::start(
        "policy2",
        &["--vm-socket-group", &admins.to_string()],
        |_| {},
    );
    let vm = std::env::temp_dir().join(format!("rs-access-vm-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&vm);
    d.ctl_ok(&[
        "port",
        "add",
        "vale0:vm",
        "--vhost-user",
        vm.to_str().unwrap(),
    ]);
    let m = std::fs::metadata(&vm).unwrap();
    assert_eq!((m.mode() & 0o777, m.gid()), (0o660, admins));
    let m = std::fs::metadata(&d.socket).unwrap();
    assert_eq!(
        m.mode() & 0o777,
        0o600,
        "the control socket stays the owner's"
    );
    let o = run_as(
        NOBODY,
        NOBODY,
        &[admins],
        &d.socket,
        &["ctl", "port", "list"],
    );
    assert!(!o.status.success(), "a hypervisor's group may not connect");
    d.ctl_ok(&["port", "del", "vale0:vm"]);
}

/// Opens pipes `prefix{N@conf` on one connection until the daemon says
/// no; returns how many opened, the region size of each, and the refusal.
fn open_until_refused(c: &mut Connection, prefix: &str, conf: &str) -> (u64, u64, ErrorReply) {
    let (mut opened, mut region) = (0u64, 0u64);
    loop {
        assert!(opened < 400, "400 pipes opened: no budget");
        let name = format!("{prefix}{{{opened}@conf:{conf}");
        match c.call(&Request::Open {
            name,
            pipes: 0,
            in_port_memory: false,
        }) {
            // The descriptors are dropped: the daemon keeps the regions.
            Ok((v, _fds)) => {
                region = v["region_size"].as_u64().unwrap();
                opened += 1;
            }
            Err(CallError::Daemon(e)) => return (opened, region, e),
            Err(e) => panic!("{e}"),
        }
    }
}

fn memfds_of(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|l| l.to_string_lossy().contains("memfd:"))
        .count() as u64
}

/// Item 10: shared memory is a budget. One connection asking for 400 pipes
/// of 16 rings of 4096 slots (516 MiB of region each; 400 of them took
/// 1.65 GB of real memory and 13,209 descriptors before the fix, and a
/// client can touch every byte it maps) is stopped at its limit (1 GiB by
/// default) with an error that names it; the daemon holds what it granted
/// and no more; another user's client still opens a port; closing gives
/// the budget back.
#[test]
fn shared_memory_is_a_budget() {
    let d = Daemon::start("budget", &["--allow-group", &NOBODY.to_string()], |_| {});
    let mut c = Connection::connect(&d.socket).unwrap();
    let (opened, region, err) = open_until_refused(&mut c, "big", "rings=16,slots=4096");
    assert_eq!(err.code, ErrorCode::Limit);
    assert!(
        err.message.contains("--max-shm-per-conn"),
        "{}",
        err.message
    );
    assert!(
        opened > 0 && opened * region <= 1 << 30,
        "{opened} pipes of {region} bytes"
    );
    assert_eq!(
        memfds_of(d.pid()),
        opened,
        "the daemon holds what it granted"
    );
    // Another user's client still opens a port.
    if is_root() {
        let o = run_as(
            NOBODY,
            NOBODY,
            &[],
            &d.socket,
            &["pkt-gen", "-f", "tx", "-i", "vale0:other", "-n", "10"],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    // Closing the connection gives its memory back.
    drop(c);
    let mut c = Connection::connect(&d.socket).unwrap();
    wait_until("the budget to come back", || {
        c.call(&Request::Open {
            name: "again{1@conf:rings=16,slots=4096".into(),
            pipes: 0,
            in_port_memory: false,
        })
        .is_ok()
    });
    d.still_works();
}

/// Item 10: descriptors are a budget too: 600 per connection hold 18
/// pipes of 16 ring pairs (a memfd and 32 eventfds each).
#[test]
fn descriptors_are_a_budget() {
    let d = Daemon::start("fds", &["--max-fds-per-conn", "600"], |_| {});
    let mut c = Connection::connect(&d.socket).unwrap();
    let (opened, _, err) = open_until_refused(&mut c, "many", "rings=16,slots=64");
    assert_eq!(err.code, ErrorCode::Limit);
    assert!(
        err.message.contains("--max-fds-per-conn"),
        "{}",
        err.message
    );
    assert_eq!(opened, 18);
    // Another connection of the same user has its own.
    let mut c2 = Connection::connect(&d.socket).unwrap();
    c2.call(&Request::Open {
        name: "other{1@conf:rings=16,slots=64".into(),
        pipes: 0,
        in_port_memory: false,
    })
    .unwrap();
    d.still_works();
}

/// Fresh memory for every new owner, where the memory cannot be replaced:
/// the host end of a pipe whose other end is passed through to a guest
/// keeps its region while the guest's QEMU stays. A user who had that end
/// may keep it mapped, so the end goes to no other user until the pipe has
/// fresh memory; the same user may take it again (taking turns with
/// itself), and so may another user once the pipe is renewed.
#[test]
fn a_guest_pipe_end_goes_to_no_other_user_while_its_memory_stays() {
    if skip_unless_root("a_guest_pipe_end_goes_to_no_other_user_while_its_memory_stays") {
        return;
    }
    let users = 47_003u32;
    let d = Daemon::start("gp-owner", &["--allow-group", &users.to_string()], |_| {});
    let path = tmp("gp-owner-pt.sock");
    let _ = std::fs::remove_file(&path);
    d.ctl_ok(&[
        "port",
        "add",
        "gp{1",
        "--passthrough",
        &path.to_string_lossy(),
    ]);
    let s = &d.socket;
    // A QEMU on the guest end (it takes the memory and holds it; what the
    // daemon sends it stays unread).
    let qemu = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let guest_attached = |d: &Daemon| {
        let list: serde_json::Value =
            serde_json::from_str(&d.ctl_ok(&["port", "list", "--json"])).unwrap();
        list.as_array().unwrap().iter().any(|p| {
            p["name"] == "gp{1" && p["passthrough"]["connected"] == serde_json::Value::Bool(true)
        })
    };
    wait_until("the guest's QEMU to be attached", || guest_attached(&d));
    // Opened and closed by root: it may keep the memory.
    let mut c = Connection::connect(s).unwrap();
    let (v, _fds) = c
        .call(&Request::Open {
            name: "gp}1".into(),
            pipes: 0,
            in_port_memory: false,
        })
        .unwrap();
    let handle = v["handle"].as_u64().unwrap();
    c.call(&Request::Close { handle }).unwrap();
    // Another user is refused, with the reason...
    refused_to_another_user(users, s, "gp}1", "was open by another user");
    // ...the same user is not.
    let (v, _fds) = c
        .call(&Request::Open {
            name: "gp}1".into(),
            pipes: 0,
            in_port_memory: false,
        })
        .unwrap();
    let handle = v["handle"].as_u64().unwrap();
    c.call(&Request::Close { handle }).unwrap();
    // The pipe gets fresh memory when the next QEMU comes with no end
    // open; then the end is anyone's.
    drop(qemu);
    wait_until("the QEMU to be gone", || !guest_attached(&d));
    let _qemu = std::os::unix::net::UnixStream::connect(&path).unwrap();
    wait_until("the next QEMU to be attached", || guest_attached(&d));
    let o = run_as(
        NOBODY,
        NOBODY,
        &[users],
        s,
        &["pkt-gen", "-f", "tx", "-i", "gp}1", "-n", "1"],
    );
    assert!(o.status.success(), "{}", text(&o));
    d.still_works();
}

/// A pipe in a switch port's memory (netmap's lb: its output pipes share
/// its input port's buffers) maps all of the port's memory: its ends go
/// to the user who has the port open, and to no one else. A pipe asked
/// for in the memory of a port that is not open, or that has no room
/// left, is refused with the reason.
#[test]
fn a_pipe_in_a_ports_memory_goes_only_to_the_ports_user() {
    if skip_unless_root("a_pipe_in_a_ports_memory_goes_only_to_the_ports_user") {
        return;
    }
    let users = 47_004u32;
    let d = Daemon::start(
        "pipe-in-port",
        &["--allow-group", &users.to_string()],
        |_| {},
    );
    let s = &d.socket;
    let open = |c: &mut Connection, name: &str, pipes: u32, in_port_memory: bool| {
        c.call(&Request::Open {
            name: name.into(),
            pipes,
            in_port_memory,
        })
        .map_err(|e| match e {
            CallError::Daemon(e) => e,
            e => panic!("{e}"),
        })
    };
    let mut port = Connection::connect(s).unwrap();
    let (v, _port_fds) = open(&mut port, "vale0:lbp", 1, false).unwrap();
    let size = v["region_size"].as_u64().unwrap();
    let mut a = Connection::connect(s).unwrap();
    let (v, _a_fds) = open(&mut a, "vale0:lbp{0", 0, true).unwrap();
    assert_eq!(v["kind"], "pipe");
    assert_eq!(
        v["end"], 1,
        "the first pipe's `{{` end of the port's memory"
    );
    assert_eq!(
        v["region_size"].as_u64().unwrap(),
        size,
        "the port's memory"
    );
    // Another user is refused the other end, with the reason...
    refused_to_another_user(users, s, "vale0:lbp}0", "which another user has open");
    // ...the port's user is not.
    let mut b = Connection::connect(s).unwrap();
    let (v, _b_fds) = open(&mut b, "vale0:lbp}0", 0, false).unwrap();
    assert_eq!(v["end"], 2);
    // No room left, no such port, a port no one has open.
    let mut c = Connection::connect(s).unwrap();
    // A pipe end in a port's memory refused as unsupported, saying `why`.
    let unsupported = |c: &mut Connection, name: &str, why: &str| {
        let e = open(c, name, 0, true).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported, "{name}: {}", e.message);
        assert!(e.message.contains(why), "{name}: {}", e.message);
    };
    unsupported(
        &mut c,
        "vale0:lbp{1",
        "all 1 pipes it has room for are open",
    );
    unsupported(&mut c, "vale0:none{0", "there is no such port");
    d.ctl_ok(&["port", "add", "vale0:idle"]);
    unsupported(&mut c, "vale0:idle{0", "no program has the port open");
    // A port made by port-add gets the room when it is opened asking for it.
    let (v, _idle_fds) = open(&mut c, "vale0:idle", 2, false).unwrap();
    assert!(v["region_size"].as_u64().unwrap() > size, "{v}");
    let mut e2 = Connection::connect(s).unwrap();
    open(&mut e2, "vale0:idle{5", 0, true).unwrap();
    // The port closed and opened again has fresh memory; a pipe whose
    // other end is still held stays in the memory the port had, and its
    // `{` end asked for in the port's memory is refused, not handed the
    // former memory.
    drop((a, _a_fds, port, _port_fds));
    let mut port = Connection::connect(s).unwrap();
    let mut reopened = None;
    wait_until("vale0:lbp to be closed and opened again", || {
        reopened = open(&mut port, "vale0:lbp", 1, false).ok();
        reopened.is_some()
    });
    let mut f = Connection::connect(s).unwrap();
    unsupported(&mut f, "vale0:lbp{0", "memory the port had before");
    // Once the other end is closed too, the pipe is made in the new memory.
    drop((b, _b_fds));
    wait_until("vale0:lbp{0 in the port's new memory", || {
        open(&mut f, "vale0:lbp{0", 0, true).is_ok()
    });
    d.still_works();
}
