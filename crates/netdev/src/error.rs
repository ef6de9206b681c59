//! Errors opening and driving interfaces.

use std::io;

/// Why an interface could not be opened or attached.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// No interface of that name.
    #[error("there is no network interface named {name:?}")]
    NoSuchInterface {
        /// The name asked for.
        name: String,
    },
    /// A name the kernel cannot take (empty, too long, '/', ':', spaces).
    #[error("{name:?} is not a valid interface name: {why}")]
    BadName {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The process lacks a capability.
    #[error("{what} needs {needs}; run the daemon as root or grant it with setcap")]
    Permission {
        /// What was attempted ("attaching an XDP program to eth0").
        what: String,
        /// The capabilities it needs ("CAP_NET_ADMIN and CAP_BPF").
        needs: &'static str,
    },
    /// The interface is in use in a way that excludes us (another XDP
    /// program that is not libxdp's, a TAP owned by someone else).
    #[error("{name} is busy: {why}")]
    Busy {
        /// Interface name.
        name: String,
        /// Who holds it.
        why: String,
    },
    /// The interface or kernel cannot do what the mode asks.
    #[error("{what} is not supported on {name}: {why}")]
    Unsupported {
        /// Interface name.
        name: String,
        /// What was asked ("native XDP").
        what: &'static str,
        /// The kernel's answer.
        why: String,
    },
    /// Any other system call failure.
    #[error("{what} failed: {source}")]
    Io {
        /// What was being done, as a phrase ("creating the UMEM for eth0 queue 0").
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl DevError {
    /// An `Io` error, mapped to `Permission` when the kernel said EPERM or
    /// EACCES.
    pub fn io(what: impl Into<String>, needs: &'static str, source: io::Error) -> DevError {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => DevError::Permission { what, needs },
            _ => DevError::Io { what, source },
        }
    }
}
