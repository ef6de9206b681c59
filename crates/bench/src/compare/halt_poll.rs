//! Guest halt polling: in a VM whose kernel has cpuidle-haltpoll, an idle
//! vCPU polls this many ns before it halts. With 0 every wake-up of a
//! sleeping thread on an idle vCPU is a halt exit to the hypervisor and
//! back, tens of microseconds, which sets every blocking figure. A run may
//! change it for itself ([`HaltPoll::set`]); the guard puts the old value
//! back when dropped: at the end, on an error, and after SIGINT or SIGTERM
//! (the run then returns instead of dying).

use std::path::{Path, PathBuf};

use super::Error;

/// The kernel's parameter.
pub const PARAM: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// The value in force, or `none` where the kernel has no halt polling.
pub fn current(param: &Path) -> String {
    std::fs::read_to_string(param).map_or_else(|_| "none".to_owned(), |v| v.trim().to_owned())
}

/// The value the kernel was booted with, from the text of /proc/cmdline
/// (`haltpoll.guest_halt_poll_ns=N`; the last one counts, as in the
/// kernel), if it names one.
pub fn booted(cmdline: &str) -> Option<u64> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .filter_map(|w| w.strip_prefix("haltpoll.guest_halt_poll_ns="))
        .last()?
        .parse()
        .ok()
}

/// A changed halt polling; the old value goes back when this is dropped.
#[derive(Debug)]
#[must_use = "dropping it puts the old value back at once"]
pub struct HaltPoll {
    param: PathBuf,
    was: String,
}

impl HaltPoll {
    /// Sets `param` to `ns`, remembering what it was.
    pub fn set(param: &Path, ns: u64) -> Result<HaltPoll, Error> {
        let fail = |source| Error::HaltPoll {
            ns,
            param: param.to_path_buf(),
            source,
        };
        let was = std::fs::read_to_string(param).map_err(fail)?;
        std::fs::write(param, ns.to_string()).map_err(fail)?;
        Ok(HaltPoll {
            param: param.to_path_buf(),
            was: was.trim().to_owned(),
        })
    }

    /// The value it had before.
    pub fn was(&self) -> &str {
        &self.was
    }
}

impl Drop for HaltPoll {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.param, &self.was) {
            eprintln!(
                "warning: could not put guest halt polling back to {} ns in {}: {e}",
                self.was,
                self.param.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_value_from_the_command_line() {
        assert_eq!(
            booted("quiet cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=0 x=1 -- init"),
            Some(0)
        );
        assert_eq!(
            booted("haltpoll.guest_halt_poll_ns=5 haltpoll.guest_halt_poll_ns=200000\n"),
            Some(200_000)
        );
        assert_eq!(booted("quiet -- haltpoll.guest_halt_poll_ns=7"), None);
        assert_eq!(booted("haltpoll.guest_halt_poll_ns=x"), None);
        assert_eq!(booted(""), None);
    }

    #[test]
    fn set_then_put_back() {
        let p = std::env::temp_dir().join(format!("rs-bench-haltpoll-{}", std::process::id()));
        std::fs::write(&p, "0\n").unwrap();
        {
            let g = HaltPoll::set(&p, 200_000).unwrap();
            assert_eq!(g.was(), "0");
            assert_eq!(current(&p), "200000");
        }
        assert_eq!(current(&p), "0");
        let _ = std::fs::remove_file(&p);
        assert_eq!(current(&p), "none");
        let e = HaltPoll::set(&p, 5).unwrap_err().to_string();
        assert!(
            e.starts_with("could not set guest halt polling to 5 ns"),
            "{e}"
        );
    }
}
