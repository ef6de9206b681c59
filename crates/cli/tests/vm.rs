//! VM tests: real Linux guests (QEMU under TCG, a busybox initramfs, the
//! Debian cloud kernel's virtio-net driver) on vhost-user ports of a real
//! `ringswitch serve`. Each test runs one scenario of `tests/vm/run.sh`,
//! which starts the daemon and the guests, drives them and cleans up; its
//! output (progress lines, and on failure the tails of every guest's serial
//! log and of the daemon log) is shown when a test fails. Logs stay in
//! `target/vm/runs/<scenario>/`.
//!
//! A scenario keeps both cores busy, so the tests take turns. They need
//! qemu-system-x86, linux-image-cloud-amd64, busybox-static, cpio, jq and
//! procps (`scripts/setup.sh` installs them). `RINGSWITCH_SKIP_VM=1` skips
//! them (saying so), for machines without QEMU.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringswitch");

/// One scenario at a time: each uses both cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Hard limit for one scenario, beyond the script's own timeouts.
const LIMIT: Duration = Duration::from_secs(300);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenario(name: &str) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if std::env::var_os("RINGSWITCH_SKIP_VM").is_some_and(|v| !v.is_empty() && v != "0") {
        eprintln!("vm scenario {name}: SKIPPED (RINGSWITCH_SKIP_VM is set)");
        return;
    }
    let out_dir = root().join("target/vm/runs");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out_path = out_dir.join(format!("{name}.out"));
    let out = File::create(&out_path).unwrap();
    let t0 = Instant::now();
    let mut child = Command::new("bash")
        .arg(root().join("tests/vm/run.sh"))
        .arg(name)
        .env("RINGSWITCH_BIN", BIN)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("bash runs tests/vm/run.sh");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > LIMIT {
            // SIGTERM first: the script's trap stops QEMU and the daemon.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let t1 = Instant::now();
            while t1.elapsed() < Duration::from_secs(15) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = std::fs::read_to_string(&out_path).unwrap_or_default();
    match status {
        Some(s) if s.success() => {
            eprintln!("{log}");
            eprintln!(
                "vm scenario {name}: passed in {:.1} s",
                t0.elapsed().as_secs_f64()
            );
        }
        Some(s) => panic!(
            "vm scenario {name} failed ({s}) after {:.1} s:\n{log}",
            t0.elapsed().as_secs_f64()
        ),
        None => panic!(
            "vm scenario {name} still running after {} s: stopped\n{log}",
            LIMIT.as_secs()
        ),
    }
}

/// Two guests ping each other through vale0.
#[test]
fn vm_ping() {
    scenario("ping");
}

/// 4 MiB over TCP between two guests, sha256 compared; checksum and TSO
/// offloads on, so the guests send partial-checksum and TSO frames.
#[test]
fn vm_tcp() {
    scenario("tcp");
}

/// The same transfer on ports created with --no-offloads.
#[test]
fn vm_tcp_nooffload() {
    scenario("tcp-nooffload");
}

/// A's port with offloads, B's without: TCP both ways at once; the switch
/// segments and checksums A's TSO frames for B.
#[test]
fn vm_tcp_mixed() {
    scenario("tcp-mixed");
}

/// A guest and `pkt-gen` on a ring port exchange frames both ways, exact
/// counts and no drops.
#[test]
fn vm_pktgen() {
    scenario("pktgen");
}

/// Ports in --client mode: QEMU listens, ringswitch connects.
#[test]
fn vm_client_mode() {
    scenario("client-mode");
}

/// The daemon killed (SIGTERM, then SIGKILL) and restarted under running
/// guests; QEMU reconnects (reconnect=1) and the guests ping again.
#[test]
fn vm_daemon_restart_server() {
    scenario("daemon-restart-server");
}

/// The same with --client ports: the new daemon connects to the waiting
/// QEMUs.
#[test]
fn vm_daemon_restart_client() {
    scenario("daemon-restart-client");
}

/// Three guests; B's QEMU killed and started again while A and C keep
/// pinging; then A and B ping again.
#[test]
fn vm_guest_restart() {
    scenario("guest-restart");
}

/// B reboots inside its running QEMU: the device is reset and set up again
/// over the same vhost-user connection; A and B ping again afterwards.
#[test]
fn vm_guest_reboot() {
    scenario("guest-reboot");
}

/// Two queue pairs, two vCPUs per guest: ping and two TCP streams at once,
/// one from each vCPU.
#[test]
fn vm_multiqueue() {
    scenario("multiqueue");
}

/// Guest A and the world outside the switch: a namespace behind a veth
/// pair attached over AF_XDP, and the host stack through a TAP host port
/// (checksum and TSO offloads passing between the host stack and the
/// guest); ping and TCP with matching sha256 both ways with each. Needs
/// root for the namespaces.
#[test]
fn vm_outside_world_over_af_xdp_and_a_host_port() {
    scenario("outside");
}
