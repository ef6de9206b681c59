//! Running one scenario of `tests/vm/run.sh` (real Linux guests under QEMU
//! TCG on vhost-user ports of a real daemon) from a Rust test: vm.rs and
//! osken.rs. The script starts the daemon, the guests and whatever else the
//! scenario needs, drives them and cleans up (its exit trap); its output
//! (progress lines, and on failure the tails of every guest's serial log and
//! of the daemon log) is shown when a test fails. Logs stay in
//! `target/vm/runs/<scenario>/`.
//!
//! A scenario keeps both cores busy, so the scenarios of one test binary
//! take turns. `RINGSWITCH_SKIP_VM=1` skips them (saying so), for machines
//! without QEMU.

use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{repo, BIN};

/// One scenario at a time: each uses both cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Hard limit for one scenario, beyond the script's own timeouts.
const LIMIT: Duration = Duration::from_secs(300);

/// The script's process: stopped on drop if it still runs (the test
/// failed or timed out), so that its exit trap stops QEMU, the daemon and
/// the rest.
struct Script(Child);

impl Drop for Script {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        // SIGTERM first: the script's trap stops its processes.
        super::signal(&self.0, libc::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(15) {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `tests/vm/run.sh NAME` and fails with its output unless it passes.
pub fn scenario(name: &str) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if std::env::var_os("RINGSWITCH_SKIP_VM").is_some_and(|v| !v.is_empty() && v != "0") {
        eprintln!("vm scenario {name}: SKIPPED (RINGSWITCH_SKIP_VM is set)");
        return;
    }
    let out_dir = repo().join("target/vm/runs");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out_path = out_dir.join(format!("{name}.out"));
    let out = File::create(&out_path).unwrap();
    let t0 = Instant::now();
    let mut script = Script(
        Command::new("bash")
            .arg(repo().join("tests/vm/run.sh"))
            .arg(name)
            .env("RINGSWITCH_BIN", BIN)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("bash runs tests/vm/run.sh"),
    );
    let status = loop {
        if let Some(s) = script.0.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > LIMIT {
            drop(script);
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
