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
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
