//! `ctl upgrade`: the daemon restarted in place. The request names a
//! binary (by default the program the daemon was started from, read again
//! from its path, so a newly installed one); the daemon checks that it
//! runs and says it is ringswitch, answers, stops as on SIGTERM, and
//! executes it with its own command line: the same process (a service
//! manager sees the same main PID), a new program, which restores
//! `--config` before it listens. What a restart keeps, this keeps: VM
//! ports come back (QEMU reconnects to server-mode ports, the daemon
//! reconnects client-mode ones), persistent ports and their OpenFlow
//! numbers are made again; ports and pipes opened on demand are not
//! configuration and go.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringswitch_control::proto::{ErrorCode, ErrorReply};

/// How long a candidate binary has to print its version.
const CHECK_WAIT: Duration = Duration::from_secs(10);
/// Most bytes of its version output read.
const MAX_VERSION_OUT: u64 = 4096;

/// What the daemon was started as, for [`exec`] to start again.
#[derive(Clone, Debug, Default)]
pub struct Program {
    /// The binary's path (as started: a newly installed file there is the
    /// one run).
    pub path: PathBuf,
    /// The arguments after the program name.
    pub args: Vec<OsString>,
}

impl Program {
    /// The running program, as the kernel and `argv` tell it.
    pub fn current() -> Option<Program> {
        let mut argv = std::env::args_os();
        let argv0 = argv.next()?;
        // The path it was started by (not /proc/self/exe, which names the
        // old file's inode once a new binary replaced it).
        let path = match std::env::current_exe() {
            Ok(p) => strip_deleted(p),
            Err(_) => PathBuf::from(argv0),
        };
        Some(Program {
            path,
            args: argv.collect(),
        })
    }
}

/// `current_exe` of a binary replaced on disk reads "PATH (deleted)".
fn strip_deleted(p: PathBuf) -> PathBuf {
    match p.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(s) => PathBuf::from(s),
        None => p,
    }
}

fn refuse(msg: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::BadRequest, msg)
}

/// Checks that `binary` is a file owned by root or `daemon_uid` that no
/// one else may write (the daemon will run it as itself: not writable by
/// all, nor by a group other than root's or the daemon's), and that it
/// runs and calls itself ringswitch (`BINARY --version`, within
/// [`CHECK_WAIT`]): a daemon that stops for a binary that cannot start has
/// nothing to come back to. Returns its version line.
pub fn check_binary(binary: &Path, daemon_uid: u32) -> Result<String, ErrorReply> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(binary)
        .map_err(|e| refuse(format!("cannot upgrade to {}: {e}", binary.display())))?;
    if !md.is_file() {
        return Err(refuse(format!(
            "cannot upgrade to {}: it is not a regular file",
            binary.display()
        )));
    }
    // Group-writable is fine for the daemon's own group (a user's private
    // group under umask 002); /proc/self belongs to our uid and gid.
    let own_gid = std::fs::metadata("/proc/self").map_or(0, |m| m.gid());
    let group_may_write = md.mode() & 0o020 != 0 && md.gid() != 0 && md.gid() != own_gid;
    if (md.uid() != 0 && md.uid() != daemon_uid) || md.mode() & 0o002 != 0 || group_may_write {
        return Err(refuse(format!(
            "cannot upgrade to {}: the daemon runs only a binary that root or its own user owns \
             and no one else may write (this one: owner {}, mode {:o})",
            binary.display(),
            md.uid(),
            md.mode() & 0o7777
        )));
    }
    let mut child = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            refuse(format!(
                "cannot upgrade to {}: it does not run: {e}",
                binary.display()
            ))
        })?;
    let deadline = Instant::now() + CHECK_WAIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(refuse(format!(
                    "cannot upgrade to {}: `--version` did not finish within {} s",
                    binary.display(),
                    CHECK_WAIT.as_secs()
                )));
            }
        }
    };
    let mut out = String::new();
    if let Some(o) = child.stdout.take() {
        let _ = o.take(MAX_VERSION_OUT).read_to_string(&mut out);
    }
    let line = out.lines().next().unwrap_or("").trim().to_string();
    if !status.success() || !line.starts_with("ringswitch") {
        return Err(refuse(format!(
            "cannot upgrade to {}: it is not a ringswitch daemon (`--version` said {line:?}, {status})",
            binary.display()
        )));
    }
    Ok(line)
}

/// Runs `binary` in this process with `program`'s arguments. Returns only
/// if that fails, with the reason.
pub fn exec(binary: &Path, program: &Program) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    Command::new(binary).args(&program.args).exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_binarys_path_is_its_path() {
        assert_eq!(
            strip_deleted(PathBuf::from("/usr/bin/ringswitchd (deleted)")),
            PathBuf::from("/usr/bin/ringswitchd")
        );
        assert_eq!(
            strip_deleted(PathBuf::from("/usr/bin/ringswitchd")),
            PathBuf::from("/usr/bin/ringswitchd")
        );
    }

    fn me() -> u32 {
        ringswitch_control::socket::euid()
    }

    #[test]
    fn a_binary_that_is_not_ringswitch_is_refused() {
        let e = check_binary(Path::new("/bin/true"), me()).unwrap_err();
        assert!(
            e.message.contains("not a ringswitch daemon"),
            "{}",
            e.message
        );
        let e = check_binary(Path::new("/nonexistent/ringswitchd"), me()).unwrap_err();
        assert!(e.message.contains("cannot upgrade to"), "{}", e.message);
        let e = check_binary(Path::new("/tmp"), me()).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{}", e.message);
    }

    #[test]
    fn a_binary_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rs-upgrade-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ringswitchd");
        std::fs::copy("/bin/true", &f).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_binary(&f, me()).unwrap_err();
        assert!(e.message.contains("no one else may write"), "{}", e.message);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
