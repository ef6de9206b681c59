//! VM ports: a vhost-user virtio-net device on a switch, served by its
//! protocol thread.

use std::sync::Arc;

use ringswitch_control::proto::VhostUserSpec;
use ringswitch_control::PortVlan;
use ringswitch_switch::{QueuePort, SwitchPort, MAX_PORTS};
use ringswitch_vhost::socket::SharedNet;
use ringswitch_vhost::{NetConfig, VhostUserNet};
use tracing::info;

use super::attach::Attached;
use super::{Kind, PortEntry, Registry, RegistryError};
use crate::vhost_user::VhostUserThread;
use crate::worker::Source;

/// What only a VM port has.
pub(super) struct VmEntry {
    pub(super) spec: VhostUserSpec,
    pub(super) thread: VhostUserThread,
}

impl Registry {
    /// Creates VM port `port` on switch `sw` in `vlan`: a vhost-user
    /// virtio-net device, and returns its entry, for [`Registry::add_port`]
    /// to file.
    pub(super) fn attach_vm_port(
        &mut self,
        sw: &str,
        port: &str,
        spec: &VhostUserSpec,
        vlan: PortVlan,
    ) -> Result<PortEntry, RegistryError> {
        if spec.path.is_empty() {
            return Err(RegistryError::VmNoSocketPath);
        }
        let config = NetConfig {
            mac: vm_mac(sw, port),
            queue_pairs: spec.queues,
            offloads: spec.offloads,
        };
        let dev = VhostUserNet::new(config)?;
        let dev: SharedNet = Arc::new(std::sync::Mutex::new(dev));
        let entry = self.ensure_switch(sw, false)?;
        if entry.ports.len() >= MAX_PORTS {
            return Err(RegistryError::SwitchFull {
                switch: sw.to_string(),
                max: MAX_PORTS,
            });
        }
        let full = format!("{sw}:{port}");
        let switch = entry.switch.clone();
        let weak_switch = Arc::downgrade(&switch);
        let pairs = crate::vhost_user::queues_of(&dev);
        let at = self.wanted_number(&full);
        let mut attached = Attached::new(&self.workers, switch, at, |idx| {
            let queues = QueuePort::new(pairs)?;
            // Down until its guest runs on it.
            queues.link.set_up(false);
            Ok(SwitchPort::new_queues(full.clone(), idx, queues).with_vlan(vlan))
        })?;
        let sources: Vec<Source> = (0..attached.port().sources()).map(Source::Queue).collect();
        attached.assign(&sources, &self.next_id)?;
        let on_running = {
            let sw = weak_switch;
            let idx = attached.port().index;
            Box::new(move |running: bool| {
                let Some(sw) = sw.upgrade() else {
                    return;
                };
                if !running {
                    sw.forget_addresses(idx);
                }
                if let Some(m) = sw.set_running(idx, running) {
                    let name = |i| {
                        sw.ports()
                            .into_iter()
                            .find(|p| p.index == i)
                            .map(|p| p.name.clone())
                    };
                    info!(ofport = m.number, from = ?name(m.from), to = ?name(m.to), "OpenFlow port {} moves to the port its guest runs on", m.number);
                }
            })
        };
        let thread = VhostUserThread::start(
            attached.port().clone(),
            dev,
            std::path::Path::new(&spec.path),
            spec.client,
            on_running,
        )?;
        let (sp, assigned) = attached.commit();
        self.keep_number(&full, &sp);
        info!(port = %full, index = sp.index, path = %spec.path, client = spec.client, queues = spec.queues, "VM port created");
        Ok(PortEntry {
            port: sp,
            assigned,
            kind: Kind::Vm(Box::new(VmEntry {
                spec: spec.clone(),
                thread,
            })),
        })
    }
}

/// A locally administered MAC address for a VM port's config space, stable
/// for a given port name (the frontend usually sets its own anyway).
fn vm_mac(sw: &str, port: &str) -> [u8; 6] {
    // FNV-1a over the name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in sw.bytes().chain([b':']).chain(port.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let b = h.to_le_bytes();
    [0x02, 0x52, b[0], b[1], b[2], b[3]]
}
