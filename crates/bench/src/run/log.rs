//! The run's progress: `HH:MM:SS message` lines on stderr and in `run.log`
//! (appended: bench/compare logs its installs and build there first).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where progress goes.
pub struct Log {
    file: Option<File>,
}

impl Log {
    /// Appends to `path` (created if missing).
    pub fn open(path: &Path) -> std::io::Result<Log> {
        Ok(Log {
            file: Some(OpenOptions::new().create(true).append(true).open(path)?),
        })
    }

    /// Only stderr (tests).
    pub fn stderr_only() -> Log {
        Log { file: None }
    }

    /// A progress line: stderr and the log file.
    pub fn line(&mut self, msg: &str) {
        let line = format!("{} {msg}", clock());
        eprintln!("{line}");
        self.quiet_raw(&line);
    }

    /// A detail only for the log file, time-stamped.
    pub fn quiet(&mut self, msg: &str) {
        let line = format!("{} {msg}", clock());
        self.quiet_raw(&line);
    }

    /// A line for the log file as it is.
    pub fn quiet_raw(&mut self, line: &str) {
        if let Some(f) = self.file.as_mut() {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The time of day (UTC) as `HH:MM:SS`.
fn clock() -> String {
    let s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
