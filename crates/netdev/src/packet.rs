//! The AF_PACKET fallback (being written).

use crate::{DevError, Nic, NicConfig};

/// Opens AF_PACKET sockets on `cfg.ifname`.
pub fn open(cfg: &NicConfig) -> Result<Nic, DevError> {
    Err(DevError::Unsupported {
        name: cfg.ifname.clone(),
        what: "AF_PACKET",
        why: "not built yet".into(),
    })
}
