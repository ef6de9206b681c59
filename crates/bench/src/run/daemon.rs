//! The daemon a measurement needs: `ringswitch serve --socket SOCK ARGS`,
//! started fresh when none runs or it runs with other arguments, answered
//! on its socket within 15 s, or the reason why not.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::procs::Cpu;
use super::Bench;

/// The daemon a run started, if any.
#[derive(Debug, Default)]
pub struct Daemon {
    name: Option<String>,
    /// Its pid (not `timeout`'s), for its CPU time.
    pub pid: Option<u32>,
    args: Vec<String>,
}

impl Bench {
    /// `ringswitch ctl ARGS` under a 15 s timeout; its stdout, if it
    /// succeeded.
    pub fn ctl(&self, args: &[&str]) -> Option<String> {
        let mut cmd = vec!["-k".to_owned(), "2".into(), "15".into()];
        cmd.extend(self.rs_cmd(&[]));
        cmd.push("ctl".into());
        cmd.extend(args.iter().map(|a| (*a).to_owned()));
        let o = Command::new("timeout")
            .args(&cmd)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Makes sure a daemon runs with `args` (restarts it if it died or
    /// runs with others); `Err` is the reason it does not.
    pub fn daemon_ensure(&mut self, args: &[&str]) -> Result<(), String> {
        if let Some(name) = self.daemon.name.clone() {
            if self.procs.alive(&name) && self.daemon.args == args {
                return Ok(());
            }
            self.log(&format!("restarting the daemon (serve {})", args.join(" ")));
        }
        self.daemon_start(args)
    }

    /// Starts a fresh daemon with `args`.
    pub fn daemon_start(&mut self, args: &[&str]) -> Result<(), String> {
        self.daemon_start_in(None, None, args)
    }

    /// Starts a fresh daemon with `args` in network namespace `netns`
    /// (`ip netns exec`, which execs it), all its threads pinned to `cpu`.
    pub fn daemon_start_in(
        &mut self,
        netns: Option<&str>,
        cpu: Cpu,
        args: &[&str],
    ) -> Result<(), String> {
        self.daemon_stop();
        let sock = self.sock.clone();
        let _ = std::fs::remove_file(&sock);
        let mut serve = vec!["serve", "--socket", &sock];
        serve.extend_from_slice(args);
        let mut cmd = Vec::new();
        if let Some(ns) = netns {
            cmd.extend(["ip", "netns", "exec", ns].map(str::to_owned));
        }
        cmd.push(self.rs.clone());
        cmd.extend(serve.iter().map(|a| (*a).to_owned()));
        let name = self.procs.start("daemon", cpu, 1800, &cmd)?;
        self.daemon = Daemon {
            name: Some(name.clone()),
            pid: None,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if !self.procs.alive(&name) {
                let exit = self.procs.wait(&name);
                self.daemon = Daemon::default();
                return Err(format!(
                    "daemon did not start: {}",
                    self.procs.why(&name, exit)
                ));
            }
            if Path::new(&sock).exists() && self.ctl(&["switch", "list"]).is_some() {
                break;
            }
            if Instant::now() >= deadline {
                self.daemon_stop();
                return Err(format!("daemon not answering on {sock} after 15 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let Some(pid) = self.procs.command_pid(&name) else {
            self.daemon_stop();
            return Err("cannot find the daemon's pid".into());
        };
        self.daemon.pid = Some(pid);
        self.procs
            .log
            .quiet(&format!("daemon up: pid {pid}, serve {}", args.join(" ")));
        Ok(())
    }

    /// Stops the daemon, if one runs.
    pub fn daemon_stop(&mut self) {
        if let Some(name) = self.daemon.name.take() {
            self.procs.stop(&name);
        }
        self.daemon = Daemon::default();
    }
}
