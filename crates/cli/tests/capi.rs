//! libringswitch from C: the examples in examples/c and a misuse program
//! (crates/capi/tests/c), built against include/ringswitch.h and the
//! library cargo built, exchanging traffic with `ringswitch pkt-gen`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where cargo put libringswitch.so and .a (a dev-dependency of this crate).
fn lib_dir() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    for d in [deps.clone(), deps.parent().unwrap().to_path_buf()] {
        if d.join("libringswitch.so").exists() && d.join("libringswitch.a").exists() {
            return d;
        }
    }
    panic!(
        "libringswitch.so/.a are not next to the test binary in {}: build with `cargo test -p ringswitch-cli`",
        deps.display()
    );
}

/// Builds the programs once: the examples linked with the shared library,
/// the sender also statically, and the misuse program.
fn programs() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rs-capi-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = lib_dir();
        let build = |out: &str, src: &Path, static_link: bool| {
            let mut c = Command::new("cc");
            c.args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(dir.join(out))
                .arg("-I")
                .arg(repo().join("include"))
                .arg(src);
            if static_link {
                c.arg(lib.join("libringswitch.a")).args([
                    "-lgcc_s",
                    "-lutil",
                    "-lrt",
                    "-lpthread",
                    "-lm",
                    "-ldl",
                    "-lc",
                ]);
            } else {
                c.arg("-L")
                    .arg(&lib)
                    .arg("-lringswitch")
                    .arg(format!("-Wl,-rpath,{}", lib.display()));
            }
            let o = c.output().expect("cc runs (install gcc)");
            assert!(
                o.status.success(),
                "building {} failed:\n{}",
                src.display(),
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let ex = repo().join("examples/c");
        build("sender", &ex.join("sender.c"), false);
        build("sender_static", &ex.join("sender.c"), true);
        build("receiver", &ex.join("receiver.c"), false);
        build("forwarder", &ex.join("forwarder.c"), false);
        build(
            "capi_misuse",
            &repo().join("crates/capi/tests/c/capi_misuse.c"),
            false,
        );
        dir
    })
}

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(tag: &str) -> Daemon {
        let socket =
            std::env::temp_dir().join(format!("rs-capi-{}-{tag}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let child = Command::new(BIN)
            .args(["serve", "--socket"])
            .arg(&socket)
            .env("RINGSWITCH_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("daemon starts");
        let t0 = Instant::now();
        while !socket.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "daemon did not create its socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Daemon { child, socket }
    }

    fn c(&self, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new(programs().join(prog));
        c.arg("-s")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn pktgen(&self, args: &[&str]) -> Child {
        Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            .arg("pkt-gen")
            .args(args)
            .args(["--json", "-T", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn drop_rx_full(&self, port: &str) -> u64 {
        let out = Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            .args(["ctl", "stats", "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .filter(|p| p["name"] == port)
            .map(|p| p["drop_rx_full"].as_u64().unwrap_or(0))
            .sum()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
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

fn run_ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn wait_ok(c: Child) -> String {
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn count(out: &str, word: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(word)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no '{word}' line in:\n{out}"))
}

/// pkt-gen's final JSON report.
fn report(child: Child) -> serde_json::Value {
    let out = wait_ok(child);
    serde_json::from_str(out.lines().last().unwrap_or("")).unwrap()
}

fn settle() {
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn c_sender_and_receiver_through_a_pipe() {
    let d = Daemon::start("pipe");
    // Shared library build: sender -> pipe -> pkt-gen.
    let rx = d.pktgen(&["-f", "rx", "-i", "a}1", "-n", "500000", "--duration", "20"]);
    settle();
    assert_eq!(
        count(&run_ok(d.c("sender", &["a{1", "500000"])), "sent"),
        500_000
    );
    assert_eq!(report(rx)["packets"], 500_000, "a pipe never drops");
    // Static build, 1514-byte frames.
    let rx = d.pktgen(&["-f", "rx", "-i", "b}1", "-n", "100000", "--duration", "20"]);
    settle();
    assert_eq!(
        count(
            &run_ok(d.c("sender_static", &["-l", "1514", "b{1", "100000"])),
            "sent"
        ),
        100_000
    );
    let r = report(rx);
    assert_eq!(r["packets"], 100_000);
    assert_eq!(r["bytes"], 100_000 * 1514);
    // pkt-gen -> pipe -> C receiver.
    let rx = d.c("receiver", &["c}1", "500000"]).spawn().unwrap();
    settle();
    assert_eq!(
        report(d.pktgen(&["-f", "tx", "-i", "c{1", "-n", "500000"]))["packets"],
        500_000
    );
    let out = wait_ok(rx);
    assert_eq!(count(&out, "received"), 500_000);
    assert_eq!(count(&out, "bytes"), 500_000 * 60);
}

#[test]
fn c_sender_and_receiver_through_the_switch() {
    let d = Daemon::start("switch");
    let rx = d.pktgen(&["-f", "rx", "-i", "vale0:r", "--duration", "4"]);
    settle();
    assert_eq!(
        count(&run_ok(d.c("sender", &["vale0:t", "200000"])), "sent"),
        200_000
    );
    settle();
    let drops = d.drop_rx_full("vale0:r");
    let got = report(rx)["packets"].as_u64().unwrap();
    assert!(got > 0);
    assert_eq!(
        got + drops,
        200_000,
        "every frame delivered or counted: {got} + {drops}"
    );
    // pkt-gen, paced, -> switch -> C receiver: nothing dropped.
    let rx = d.c("receiver", &["vale0:r2", "100000"]).spawn().unwrap();
    settle();
    let tx = d.pktgen(&["-f", "tx", "-i", "vale0:t2", "-n", "100000", "-R", "200000"]);
    assert_eq!(report(tx)["packets"], 100_000);
    assert_eq!(count(&wait_ok(rx), "received"), 100_000);
}

#[test]
fn zero_copy_forwarder_reflects_pings_and_forwards_between_ports() {
    let d = Daemon::start("fwd");
    // Reflect on a pipe end: pkt-gen ping gets every frame back.
    let fwd = d.c("forwarder", &["-n", "2000", "f}1"]).spawn().unwrap();
    settle();
    let r = report(d.pktgen(&["-f", "ping", "-i", "f{1", "-n", "2000"]));
    assert_eq!(r["lost"], 0, "{r}");
    assert_eq!(r["packets"], 2000, "{r}");
    let out = wait_ok(fwd);
    assert!(out.contains("zero copy"), "{out}");
    assert_eq!(count(&out, "forwarded"), 2000);
    // Two ports in different memories: copied, pipe -> switch.
    let fwd = d
        .c("forwarder", &["-n", "50000", "g}1", "vale1:fw"])
        .spawn()
        .unwrap();
    let rx = d.pktgen(&[
        "-f",
        "rx",
        "-i",
        "vale1:out",
        "-n",
        "50000",
        "--duration",
        "10",
    ]);
    settle();
    let tx = d.pktgen(&["-f", "tx", "-i", "g{1", "-n", "50000", "-R", "100000"]);
    assert_eq!(report(tx)["packets"], 50_000);
    assert_eq!(report(rx)["packets"], 50_000);
    let out = wait_ok(fwd);
    assert!(out.contains("copying"), "{out}");
}

#[test]
fn misuse_gets_errors_with_errno_and_no_crash() {
    let d = Daemon::start("misuse");
    let o = Command::new(programs().join("capi_misuse"))
        .arg(&d.socket)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("0 failures"),
        "{}",
        text(&o)
    );
}
