//! The control plane's vocabulary: netmap port names, the JSON protocol
//! between clients and the daemon, and the unix socket that carries it with
//! file descriptors.
#![warn(missing_docs)]

pub mod conn;
pub mod name;
pub mod proto;
pub mod socket;
pub mod vlan;

pub use conn::{CallError, Connection};
pub use name::{NameError, PipeEnd, PortName, Target};
pub use proto::*;
pub use socket::{
    default_socket_path, trusted_daemon_uid, Listener, PeerCred, SeqPacket, SocketAccess,
};
pub use vlan::{PortVlan, VlanError, VlanSet};

/// An error and its causes as one sentence: "outer: cause: root cause".
/// A cause the sentence already ends with (an error whose message quotes
/// its source) is not said twice.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let c_text = c.to_string();
        if !s.ends_with(&c_text) {
            s.push_str(": ");
            s.push_str(&c_text);
        }
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("opening x failed: {0}")]
    struct Quotes(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("opening x failed")]
    struct Names(#[source] std::io::Error);

    #[test]
    fn each_cause_is_said_once() {
        let e = || std::io::Error::from_raw_os_error(libc::ENOENT);
        let says = "opening x failed: No such file or directory (os error 2)";
        assert_eq!(error_chain(&Quotes(e())), says);
        assert_eq!(error_chain(&Names(e())), says);
    }
}
