//! The processes a run starts: each under `timeout` (which makes itself the
//! leader of a process group, so killing the group kills the whole
//! command), optionally pinned with `taskset`, with stdout and stderr in
//! `raw/NNN-name.{out,err}`. [`Procs`] stops whatever is left when dropped.
#![allow(unsafe_code)] // kill(2), sysconf(3), signal(2)

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::log::Log;

/// One started process.
#[derive(Debug)]
struct Proc {
    child: Child,
    /// The stem of its output files in `raw/` (`NNN-name`).
    name: String,
}

/// How a process ended, in the terms of `timeout(1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit(pub i32);

impl Exit {
    fn of(status: ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        Exit(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        )
    }

    /// Whether it exited with status 0.
    pub fn ok(self) -> bool {
        self.0 == 0
    }
}

/// The processes of a run and where their output goes.
pub struct Procs {
    raw: PathBuf,
    prefix: String,
    seq: u32,
    running: Vec<Proc>,
    /// The run's log.
    pub log: Log,
}

/// Where a process runs: one CPU or any.
pub type Cpu = Option<u32>;

impl Procs {
    /// Output under `raw` (created) in files named `PREFIXNNN-name`,
    /// progress in `log`.
    pub fn new(raw: &Path, prefix: &str, log: Log) -> std::io::Result<Procs> {
        std::fs::create_dir_all(raw)?;
        Ok(Procs {
            raw: raw.to_path_buf(),
            prefix: prefix.to_owned(),
            seq: 0,
            running: Vec::new(),
            log,
        })
    }

    /// The stdout of process `name`.
    pub fn out_path(&self, name: &str) -> PathBuf {
        self.raw.join(format!("{name}.out"))
    }

    /// The stderr of process `name`.
    pub fn err_path(&self, name: &str) -> PathBuf {
        self.raw.join(format!("{name}.err"))
    }

    /// Starts `cmd` under `timeout -k 3 SECS`, pinned to `cpu`, stdin from
    /// /dev/null. Fails only if `timeout` itself cannot be started.
    /// Returns the process's name (the stem of its output files).
    pub fn start(
        &mut self,
        name: &str,
        cpu: Cpu,
        secs: u64,
        cmd: &[String],
    ) -> Result<String, String> {
        self.spawn(name, cpu, secs, cmd, Stdio::null())
    }

    /// [`Procs::start`] with a stdin that stays open, with nothing written
    /// to it, until the process is stopped (an interactive program that
    /// must not see end-of-file).
    pub fn start_interactive(
        &mut self,
        name: &str,
        cpu: Cpu,
        secs: u64,
        cmd: &[String],
    ) -> Result<String, String> {
        self.spawn(name, cpu, secs, cmd, Stdio::piped())
    }

    fn spawn(
        &mut self,
        name: &str,
        cpu: Cpu,
        secs: u64,
        cmd: &[String],
        stdin: Stdio,
    ) -> Result<String, String> {
        self.seq += 1;
        let stem: String = format!("{}{:03}-{name}", self.prefix, self.seq)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut argv: Vec<String> = vec!["-k".into(), "3".into(), secs.to_string()];
        if let Some(c) = cpu {
            argv.extend(["taskset".into(), "-c".into(), c.to_string()]);
        }
        argv.extend(cmd.iter().cloned());
        self.log.quiet(&format!(
            "start {stem} (cpu {}, timeout {secs}s): {}",
            cpu.map_or("any".to_owned(), |c| c.to_string()),
            argv[3..].join(" ")
        ));
        let files = File::create(self.out_path(&stem))
            .and_then(|o| Ok((o, File::create(self.err_path(&stem))?)));
        let (out, err) = files.map_err(|e| format!("cannot create raw/{stem}.out: {e}"))?;
        let child = Command::new("timeout")
            .args(&argv)
            .stdin(stdin)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start timeout(1) for {stem}: {e}"))?;
        self.running.push(Proc {
            child,
            name: stem.clone(),
        });
        Ok(stem)
    }

    fn take(&mut self, name: &str) -> Option<Proc> {
        let i = self.running.iter().position(|p| p.name == name)?;
        Some(self.running.remove(i))
    }

    /// Waits for process `name` to end; if the run is interrupted first,
    /// stops it and returns status 143.
    pub fn wait(&mut self, name: &str) -> Exit {
        loop {
            let Some(p) = self.running.iter_mut().find(|p| p.name == name) else {
                return Exit(255);
            };
            match p.child.try_wait() {
                Ok(Some(status)) => {
                    self.take(name);
                    return Exit::of(status);
                }
                Ok(None) if super::signals::interrupted() => {
                    self.stop(name);
                    return Exit(143);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => {
                    self.take(name);
                    return Exit(255);
                }
            }
        }
    }

    /// Runs `cmd` to completion (see [`Procs::start`]); its name and exit.
    pub fn run(
        &mut self,
        name: &str,
        cpu: Cpu,
        secs: u64,
        cmd: &[String],
    ) -> Result<(String, Exit), String> {
        let stem = self.start(name, cpu, secs, cmd)?;
        let exit = self.wait(&stem);
        Ok((stem, exit))
    }

    /// Whether process `name` still runs.
    pub fn alive(&mut self, name: &str) -> bool {
        self.running
            .iter_mut()
            .find(|p| p.name == name)
            .is_some_and(|p| matches!(p.child.try_wait(), Ok(None)))
    }

    /// The pid of the command a `timeout` runs (taskset execs it), once it
    /// exists (up to 5 s).
    pub fn command_pid(&mut self, name: &str) -> Option<u32> {
        let pid = self.running.iter().find(|p| p.name == name)?.child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(c) = first_child(pid) {
                return Some(c);
            }
            if !self.alive(name) || Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until process `name` has written to stdout (a pkt-gen prints
    /// its header once its port is open). `Err` says why not: it ended, or
    /// the deadline passed.
    pub fn wait_ready(&mut self, name: &str, secs: u64) -> Result<(), &'static str> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let out = self.out_path(name);
        loop {
            if std::fs::metadata(&out).is_ok_and(|m| m.len() > 0) {
                return Ok(());
            }
            if !self.alive(name) {
                return Err("it ended");
            }
            if Instant::now() >= deadline {
                return Err("the deadline passed");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until process `name` is ready (see [`Procs::wait_ready`]);
    /// if it is not, stops it, and `Err` says why (from its exit and its
    /// output).
    pub fn ready_or_stop(&mut self, name: &str, secs: u64) -> Result<(), String> {
        if self.wait_ready(name, secs).is_ok() {
            return Ok(());
        }
        let exit = self.stop(name);
        Err(self.why(name, exit))
    }

    /// Stops process `name`: one SIGTERM to the command itself (not through
    /// `timeout`, which would pass it on twice, to the command and to its
    /// group: pkt-gen takes a second signal as "exit now, without a
    /// report"), then SIGKILL to the whole group after 5 s.
    pub fn stop(&mut self, name: &str) -> Exit {
        let Some(mut p) = self.take(name) else {
            return Exit(255);
        };
        let group = p.child.id();
        if matches!(p.child.try_wait(), Ok(None)) {
            signal(first_child(group).unwrap_or(group), libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(p.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(p.child.try_wait(), Ok(None)) {
                self.log.quiet(&format!(
                    "{name} ignored SIGTERM; killing its process group"
                ));
                kill_group(group);
            }
        }
        let exit = p.child.wait().map_or(Exit(255), Exit::of);
        // Whatever the command left behind in its group.
        kill_group(group);
        exit
    }

    /// Why process `name` failed, in one line, with its stderr tail in the
    /// log.
    pub fn why(&mut self, name: &str, exit: Exit) -> String {
        let err = std::fs::read_to_string(self.err_path(name)).unwrap_or_default();
        let err = strip_ansi(&err);
        self.log.quiet(&format!(
            "---- {name}: exit status {}, stderr tail:",
            exit.0
        ));
        let lines: Vec<&str> = err.lines().collect();
        for l in &lines[lines.len().saturating_sub(15)..] {
            self.log.quiet_raw(&format!("    {l}"));
        }
        why_line(name, exit, &err)
    }
}

impl Drop for Procs {
    /// Stops everything still running, newest first.
    fn drop(&mut self) {
        let names: Vec<String> = self.running.iter().rev().map(|p| p.name.clone()).collect();
        for n in names {
            self.stop(&n);
        }
    }
}

/// The one-line reason for a failed process: its name, how it ended and the
/// last non-empty line of its stderr (at most 200 characters).
pub fn why_line(name: &str, exit: Exit, stderr: &str) -> String {
    let last: String = stderr
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    let tail = if last.is_empty() {
        String::new()
    } else {
        format!(": {last}")
    };
    match exit.0 {
        124 | 137 => format!("{name} timed out (status {}){tail}", exit.0),
        s => format!("{name} exited with status {s}{tail}"),
    }
}

/// `text` without ANSI colour sequences (`ESC [ digits ; ... m`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            while let Some(&d) = chars.peek() {
                chars.next();
                if !(d.is_ascii_digit() || d == ';') {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The first child of `pid`, from `/proc/PID/task/PID/children`.
fn first_child(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn signal(pid: u32, sig: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // the pid is one of our children or its command.
    unsafe { libc::kill(pid, sig) };
}

fn kill_group(leader: u32) {
    let Ok(pid) = libc::pid_t::try_from(leader) else {
        return;
    };
    // SAFETY: kill(2) with a negative pid signals the process group that
    // `timeout` made for itself; plain integers, no memory of ours.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
}

/// utime + stime (clock ticks) of process `pid`, all its threads, from
/// `/proc/PID/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    parse_stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// utime + stime from the text of a `/proc/PID/stat`: the fields after the
/// command name, which ends at the last `)` (it may hold spaces and
/// parentheses).
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ... utime(14) stime(15), so 11 and 12 here.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) reads a process attribute; no memory of ours.
    unsafe { libc::geteuid() == 0 }
}

/// The clock ticks per second of `/proc` times.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf(3) reads a system constant; no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// Writes `text` to `path`, ignoring errors (raw output is a courtesy).
pub fn save(path: &Path, text: &str) {
    if let Ok(mut f) = File::create(path) {
        let _ = f.write_all(text.as_bytes());
    }
}
