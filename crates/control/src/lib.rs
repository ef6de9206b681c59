//! The control plane's vocabulary: netmap port names, the JSON protocol
//! between clients and the daemon, and the unix socket that carries it with
//! file descriptors.
#![warn(missing_docs)]

pub mod conn;
pub mod name;
pub mod proto;
pub mod socket;

pub use conn::{CallError, Connection};
pub use name::{NameError, PipeEnd, PortName, Target};
pub use proto::*;
pub use socket::{default_socket_path, Listener, SeqPacket};
