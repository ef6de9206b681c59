//! libringswitch from C: the examples in examples/c and the test programs
//! in crates/capi/tests/c, built with `cc` against include/ringswitch.h and
//! the library cargo built (shared and static), exchanging traffic with
//! `ringswitch pkt-gen` through a real daemon.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

/// What `rustc --print native-static-libs` asks a C program linking
/// libringswitch.a to add.
const NATIVE_STATIC_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// No single program may run longer than this.
/// A C program that runs longer has hung.
const PROGRAM_LIMIT: Duration = DEADLINE;

/// Where cargo put libringswitch.so and .a: next to this test binary
/// (target/<profile>/deps), as ringswitch-capi is a dev-dependency.
fn lib_dir() -> PathBuf {
    common::lib_dir(&["libringswitch.so", "libringswitch.a"])
}

/// Builds the C programs once, in parallel: every example linked with the
/// shared library (`sender`) and with the static one (`sender_static`),
/// and the two test programs.
fn programs() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rs-capi-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = lib_dir();
        let ex = repo().join("examples/c");
        let tests = repo().join("crates/capi/tests/c");
        let mut jobs = Vec::new();
        let mut build = |out: String, src: PathBuf, static_link: bool| {
            let mut c = Command::new("cc");
            c.args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(dir.join(&out))
                .arg("-I")
                .arg(repo().join("include"))
                .arg("-I")
                .arg(repo().join("include/netmap"))
                .arg(&src);
            if static_link {
                c.arg(lib.join("libringswitch.a")).args(NATIVE_STATIC_LIBS);
            } else {
                c.arg("-L")
                    .arg(&lib)
                    .arg("-lringswitch")
                    .arg(format!("-Wl,-rpath,{}", lib.display()));
            }
            let child = c
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("cc runs (install gcc)");
            jobs.push((src, child));
        };
        for p in ["sender", "receiver", "forwarder"] {
            let src = ex.join(format!("{p}.c"));
            build(p.to_string(), src.clone(), false);
            build(format!("{p}_static"), src, true);
        }
        for p in ["capi_misuse", "capi_nifp"] {
            build(p.to_string(), tests.join(format!("{p}.c")), false);
        }
        for (src, child) in jobs {
            let o = child.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "building {} failed:\n{}",
                src.display(),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        dir
    })
}

impl Daemon {
    /// A C program, given the daemon's socket with -s.
    fn c(&self, prog: &str, args: &[&str]) -> Child {
        Command::new(programs().join(prog))
            .arg("-s")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

fn finish(mut c: Child) -> Output {
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t0.elapsed() > PROGRAM_LIMIT {
            let _ = c.kill();
            let o = c.wait_with_output().unwrap();
            panic!("a program ran over {PROGRAM_LIMIT:?}:\n{}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    c.wait_with_output().unwrap()
}

/// Waits for a program that must succeed; its standard output.
fn wait_ok(c: Child) -> String {
    let o = finish(c);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// pkt-gen's final JSON report.
fn report(child: Child) -> serde_json::Value {
    let out = wait_ok(child);
    serde_json::from_str(out.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("no JSON report ({e}) in:\n{out}"))
}

/// CPU time a running process has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis((f[0] + f[1]) * 1000 / hz)
}

#[test]
fn c_sender_and_receiver_through_a_pipe() {
    let d = Daemon::start("pipe");
    // C sender (shared library) -> pipe -> pkt-gen.
    let rx = d.pktgen(&["-f", "rx", "-i", "a}1", "-n", "500000"]);
    d.wait_open(&["a}1"]);
    let out = wait_ok(d.c("sender", &["a{1", "500000"]));
    assert_eq!(count(&out, "sent"), 500_000);
    let r = report(rx);
    assert_eq!(r["packets"], 500_000, "a pipe never drops: {r}");
    assert_eq!(r["bytes"], 500_000 * 60, "{r}");

    // C sender (static library), 1514-byte frames.
    let rx = d.pktgen(&["-f", "rx", "-i", "b}1", "-n", "100000"]);
    d.wait_open(&["b}1"]);
    let out = wait_ok(d.c("sender_static", &["-l", "1514", "b{1", "100000"]));
    assert_eq!(count(&out, "sent"), 100_000);
    let r = report(rx);
    assert_eq!(r["packets"], 100_000, "{r}");
    assert_eq!(r["bytes"], 100_000 * 1514, "{r}");

    // pkt-gen -> pipe -> C receiver (shared library).
    let rx = d.c("receiver", &["c}1", "500000"]);
    d.wait_open(&["c}1"]);
    let r = report(d.pktgen(&["-f", "tx", "-i", "c{1", "-n", "500000"]));
    assert_eq!(r["packets"], 500_000, "{r}");
    let out = wait_ok(rx);
    assert_eq!(count(&out, "received"), 500_000);
    assert_eq!(count(&out, "bytes"), 500_000 * 60);

    // pkt-gen -> pipe -> C receiver (static library), 1514-byte frames.
    let rx = d.c("receiver_static", &["d}1", "100000"]);
    d.wait_open(&["d}1"]);
    let r = report(d.pktgen(&["-f", "tx", "-i", "d{1", "-n", "100000", "-l", "1514"]));
    assert_eq!(r["packets"], 100_000, "{r}");
    let out = wait_ok(rx);
    assert_eq!(count(&out, "received"), 100_000);
    assert_eq!(count(&out, "bytes"), 100_000 * 1514);

    // The receiver fails when fewer frames than asked for arrive.
    let o = finish(d.c("receiver", &["-t", "1", "e}1", "10"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(count(&String::from_utf8_lossy(&o.stdout), "received"), 0);
}

#[test]
fn c_sender_and_receiver_through_the_switch() {
    let d = Daemon::start("switch");
    // Full speed into a switch: every frame is delivered or counted as
    // dropped at the receiver's full ring.
    // The receiver runs until the switch has accounted for every frame
    // (delivered or dropped), then is stopped: it takes what is still in
    // its ring and reports. No fixed window: a loaded machine is slower,
    // never wrong.
    let rx = d.pktgen(&["-f", "rx", "-i", "vale0:r"]);
    d.wait_open(&["vale0:r"]);
    let out = wait_ok(d.c("sender", &["vale0:t", "200000"]));
    assert_eq!(count(&out, "sent"), 200_000);
    let drops = d.wait_accounted("vale0:r", 200_000);
    interrupt(&rx);
    let r = report(rx);
    let got = r["packets"].as_u64().unwrap();
    assert!(got > 0, "{r}");
    assert_eq!(got + drops, 200_000, "delivered plus dropped: {r}");

    // Paced, into a deep ring: every frame arrives.
    let rx = d.pktgen(&["-f", "rx", "-i", "vale0:r2@conf:slots=4096", "-n", "100000"]);
    d.wait_open(&["vale0:r2"]);
    let out = wait_ok(d.c(
        "sender_static",
        &[
            "-R",
            "200000",
            "-d",
            "02:00:00:00:00:99",
            "vale0:t2",
            "100000",
        ],
    ));
    assert_eq!(count(&out, "sent"), 100_000);
    let r = report(rx);
    assert_eq!(r["packets"], 100_000, "unknown unicast is flooded: {r}");

    // pkt-gen, paced -> switch -> C receiver: every frame arrives.
    let rx = d.c("receiver", &["vale0:r3@conf:slots=4096", "100000"]);
    d.wait_open(&["vale0:r3"]);
    let r = report(d.pktgen(&["-f", "tx", "-i", "vale0:t3", "-n", "100000", "-R", "200000"]));
    assert_eq!(r["packets"], 100_000, "{r}");
    let out = wait_ok(rx);
    assert_eq!(count(&out, "received"), 100_000);
    assert_eq!(count(&out, "bytes"), 100_000 * 60);
}

#[test]
fn forwarder_reflects_pings_and_forwards_between_ports() {
    let d = Daemon::start("fwd");
    // Reflect on a pipe end, zero copy: pkt-gen ping gets every frame back.
    for (prog, pipe, n) in [("forwarder", "f", 2000), ("forwarder_static", "h", 500)] {
        let fwd = d.c(prog, &["-n", &n.to_string(), &format!("{pipe}}}1")]);
        d.wait_open(&[&format!("{pipe}}}1")]);
        let r = report(d.pktgen(&[
            "-f",
            "ping",
            "-i",
            &format!("{pipe}{{1"),
            "-n",
            &n.to_string(),
        ]));
        assert!(r["packets"].as_u64().unwrap() > 0, "replies arrive: {r}");
        assert_eq!(r["packets"], n, "{r}");
        assert_eq!(r["sent"], n, "{r}");
        assert_eq!(r["lost"], 0, "{r}");
        let out = wait_ok(fwd);
        assert!(out.contains("(reflect), zero copy"), "{out}");
        assert_eq!(count(&out, "forwarded"), n);
    }

    // Two ports in different memories, both ways, copying: ping on a pipe,
    // the forwarder between the pipe's other end and a switch port, pong on
    // another port of the switch.
    let fwd = d.c("forwarder", &["-n", "2000", "g}1", "vale1:fw"]);
    // pong runs until told to stop: with -n it would close its port as
    // soon as it bounced the last ping, maybe before the switch took the
    // reply.
    let pong = d.pktgen(&["-f", "pong", "-i", "vale1:pong"]);
    d.wait_open(&["g}1", "vale1:fw", "vale1:pong"]);
    let r = report(d.pktgen(&["-f", "ping", "-i", "g{1", "-n", "1000"]));
    assert_eq!(r["packets"], 1000, "{r}");
    assert_eq!(r["lost"], 0, "{r}");
    let out = wait_ok(fwd);
    assert!(out.contains("g}1 <-> vale1:fw, copying"), "{out}");
    assert_eq!(count(&out, "forwarded"), 2000, "1000 each way");
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(pong.id() as libc::pid_t, libc::SIGTERM) };
    let r = report(pong);
    assert_eq!(r["packets"], 1000, "{r}");
    assert_eq!(r["end"], "signal", "{r}");

    // A stream in batches, pipe -> forwarder -> switch.
    let fwd = d.c("forwarder", &["-n", "50000", "k}1", "vale2:fw"]);
    let rx = d.pktgen(&["-f", "rx", "-i", "vale2:out@conf:slots=4096", "-n", "50000"]);
    d.wait_open(&["k}1", "vale2:fw", "vale2:out"]);
    let r = report(d.pktgen(&["-f", "tx", "-i", "k{1", "-n", "50000", "-R", "200000"]));
    assert_eq!(r["packets"], 50_000, "{r}");
    assert_eq!(report(rx)["packets"], 50_000);
    assert_eq!(count(&wait_ok(fwd), "forwarded"), 50_000);
}

#[test]
fn idle_programs_sleep_instead_of_spinning() {
    let d = Daemon::start("idle");
    let mut fwd = d.c("forwarder", &["i}1"]);
    let mut rx = d.c("receiver", &["-t", "10", "j}1", "10"]);
    std::thread::sleep(Duration::from_millis(1500));
    let (f, r) = (cpu_time(fwd.id()), cpu_time(rx.id()));
    let _ = fwd.kill();
    let _ = rx.kill();
    let _ = fwd.wait();
    let _ = rx.wait();
    assert!(f < Duration::from_millis(300), "forwarder used {f:?} idle");
    assert!(r < Duration::from_millis(300), "receiver used {r:?} idle");
}

#[test]
fn misuse_gets_errors_with_errno_and_no_crash() {
    let d = Daemon::start("misuse");
    let o = finish(
        Command::new(programs().join("capi_misuse"))
            .arg(&d.socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("0 failures"),
        "{}",
        text(&o)
    );
}

#[test]
fn netmap_macros_over_the_c_api() {
    let d = Daemon::start("nifp");
    let out = wait_ok(
        Command::new(programs().join("capi_nifp"))
            .arg(&d.socket)
            .args(["nm", "100000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(count(&out, "received"), 100_000);
}
