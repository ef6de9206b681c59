//! What a port open in this process carries that the daemon does not know
//! about: its virtio-net header length (PORT_HDR_SET), and the frames the
//! emulation had to drop at sync time, reported when the port closes.
//!
//! One `PortState` per port open in the process, shared by every
//! descriptor holding a piece of it (`pkt-gen -p`), found by name from any
//! descriptor (netmap's PORT_HDR_SET and PORT_HDR_GET name the port in the
//! request, as vale-ctl does).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ringswitch_control::{name, PortName, Target};

use crate::file::RegInfo;
use crate::Errno;

/// The virtio-net header lengths netmap accepts: none, the base header
/// (`struct virtio_net_hdr`), or the one with `num_buffers`.
pub const VNET_HDR_LENS: [u32; 3] = [0, 10, 12];

/// The state of one port open in this process.
pub struct PortState {
    /// The port's name, without options.
    name: String,
    /// Whether it is a switch port: the only kind netmap gives a header.
    vale: bool,
    /// 0, 10 or 12. Relaxed everywhere: each sync reads it once, and a
    /// change takes effect from the next sync (as in netmap, setting it
    /// while frames flow is the application's business).
    hdr_len: AtomicU32,
    /// NS_INDIRECT slots whose length or pointer was bad: sent empty.
    pub(crate) indirect_bad: AtomicU64,
    /// Frames sent with a header too short, or asking for an offload done
    /// nowhere here (segmentation, a checksum over several slots): dropped.
    pub(crate) vnet_tx_bad: AtomicU64,
    /// Frames received with no room for the header in their last slot:
    /// handed over empty.
    pub(crate) vnet_rx_no_room: AtomicU64,
    /// The port's figures, from its registrations in this process
    /// (PORT_INFO_GET from any descriptor answers with them).
    info: Mutex<Option<RegInfo>>,
}

/// Every port state of this process, by name; entries die with the last
/// descriptor holding the port.
static OPEN: Mutex<Vec<Weak<PortState>>> = Mutex::new(Vec::new());

impl PortState {
    /// The state of port `name` (with or without `@conf:`), newly opened
    /// in this process, or the one already there.
    pub fn open(port: &str) -> Arc<PortState> {
        let base = name::base_name(port);
        let mut all = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        if let Some(s) = all
            .iter()
            .filter_map(Weak::upgrade)
            .find(|s| s.name == base)
        {
            return s;
        }
        let vale = matches!(
            port.parse::<PortName>().map(|p| p.target),
            Ok(Target::Vale { .. })
        );
        let s = Arc::new(PortState {
            name: base.to_string(),
            vale,
            hdr_len: AtomicU32::new(0),
            indirect_bad: AtomicU64::new(0),
            vnet_tx_bad: AtomicU64::new(0),
            vnet_rx_no_room: AtomicU64::new(0),
            info: Mutex::new(None),
        });
        all.push(Arc::downgrade(&s));
        s
    }

    /// The state of port `name` if it is open in this process.
    pub fn find(port: &str) -> Option<Arc<PortState>> {
        let base = name::base_name(port);
        let all = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        all.iter()
            .filter_map(Weak::upgrade)
            .find(|s| s.name == base)
    }

    /// Records the port's figures, once registered.
    pub fn set_info(&self, info: RegInfo) {
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = Some(info);
    }

    /// The port's figures, if a descriptor of this process registered it.
    pub fn info(&self) -> Option<RegInfo> {
        *self.info.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The virtio-net header length in bytes.
    pub fn hdr_len(&self) -> usize {
        self.hdr_len.load(Ordering::Relaxed) as usize
    }

    /// PORT_HDR_SET: 0, 10 or 12, on a switch port.
    pub fn set_hdr_len(&self, len: u32) -> Result<(), Errno> {
        if !VNET_HDR_LENS.contains(&len) {
            return Err(Errno::with(
                libc::EINVAL,
                format!(
                    "{}: a virtio-net header is 0, 10 or 12 bytes, not {len}",
                    self.name
                ),
            ));
        }
        if !self.vale {
            return Err(Errno::with(
                libc::ENXIO,
                format!(
                    "{}: only switch ports (valeN:port) take a virtio-net header, as in netmap",
                    self.name
                ),
            ));
        }
        self.hdr_len.store(len, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for PortState {
    fn drop(&mut self) {
        let counts = [
            (
                self.indirect_bad.get_mut(),
                "NS_INDIRECT slots with a length larger than a buffer or a pointer that could not be read were sent empty",
            ),
            (
                self.vnet_tx_bad.get_mut(),
                "frames sent with a virtio-net header shorter than the port's, or asking for segmentation or a checksum over several slots, were dropped",
            ),
            (
                self.vnet_rx_no_room.get_mut(),
                "frames received without room for the virtio-net header in their last buffer were handed over empty",
            ),
        ];
        for (n, what) in counts {
            if *n > 0 {
                crate::report(&format!("{}: {n} {what}", self.name));
            }
        }
    }
}
