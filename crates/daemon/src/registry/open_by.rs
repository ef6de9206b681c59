//! Who has a ring port or a pipe end open: no one, a client, or a guest
//! through its passthrough server.

use ringswitch_control::PortName;

use super::error::Openable;
use super::{ConnId, RegistryError};
use crate::passthrough::PassthroughServer;

/// Who has a ring port or a pipe end open.
pub(super) enum OpenBy {
    /// No one.
    Closed,
    /// A client, through a handle of its connection.
    Client(ConnId),
    /// A guest, through the ivshmem server that hands its QEMU the memory
    /// (a passthrough port or pipe end: persistent, never opened by a
    /// client).
    Guest(Box<PassthroughServer>),
}

impl OpenBy {
    pub(super) fn is_closed(&self) -> bool {
        matches!(self, OpenBy::Closed)
    }

    pub(super) fn is_client(&self) -> bool {
        matches!(self, OpenBy::Client(_))
    }

    /// The ivshmem server of a passthrough port or pipe end.
    pub(super) fn guest(&self) -> Option<&PassthroughServer> {
        match self {
            OpenBy::Guest(t) => Some(t),
            _ => None,
        }
    }

    /// Open by a client, or by a guest whose QEMU is connected.
    pub(super) fn in_use(&self) -> bool {
        match self {
            OpenBy::Closed => false,
            OpenBy::Client(_) => true,
            OpenBy::Guest(t) => t.connected(),
        }
    }

    /// Refuses to open `name`, a `what`, if it is open already.
    pub(super) fn check_free(&self, what: Openable, name: &PortName) -> Result<(), RegistryError> {
        match self {
            OpenBy::Closed => Ok(()),
            OpenBy::Client(_) => Err(RegistryError::AlreadyOpen {
                what,
                name: name.to_string(),
            }),
            OpenBy::Guest(t) => Err(RegistryError::PassedThrough {
                what,
                name: name.to_string(),
                socket: t.path().to_path_buf(),
            }),
        }
    }

    /// Takes the ivshmem server of a passthrough port or pipe end, which is
    /// then closed.
    pub(super) fn take_guest(&mut self) -> Option<Box<PassthroughServer>> {
        match std::mem::replace(self, OpenBy::Closed) {
            OpenBy::Guest(t) => Some(t),
            other => {
                *self = other;
                None
            }
        }
    }
}
