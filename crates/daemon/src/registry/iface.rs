//! Interface ports: NICs (AF_XDP, or AF_PACKET where XDP cannot attach) and
//! host-stack TAPs attached to switches, recorded in the XDP state file
//! ([`super::xdp_state`]) while our program is on them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringswitch_control::proto::*;
use ringswitch_control::{name, PortName, PortVlan, Target};
use ringswitch_netdev::{self as netdev, NicConfig};
use ringswitch_ring::Geometry;
use ringswitch_switch::{Hub, QueuePort, Switch, SwitchPort, MAX_PORTS};
use tracing::{info, warn};

use super::attach::Attached;
use super::config::IfaceRequest;
use super::xdp_state;
use super::{internal, Kind, NewPort, PortEntry, Registry, RegistryError, SwitchEntry};
use crate::worker::Source;

/// The application's ring port in the switch behind `netmap:IF`.
pub(super) const DIRECT_APP: &str = "app";

/// Descriptors per AF_XDP ring.
const XDP_RING: u32 = 2048;
/// Most queues of one interface port.
const MAX_QUEUES: u32 = 16;
/// How long a detach waits for the workers to let go of the queues.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// What only an interface port has.
pub(super) struct IfaceEntry {
    pub(super) info: IfaceInfo,
    pub(super) kind: PortKind,
    /// What it was attached with.
    pub(super) request: IfaceRequest,
}

/// Drops the last references to an interface port's queues, waiting (a
/// bounded time) for the workers to drop theirs, so the interface is back
/// with the kernel when the detach is answered.
pub(super) fn release(port: Arc<SwitchPort>, info: &IfaceInfo) {
    let until = Instant::now() + RELEASE_WAIT;
    while Arc::strong_count(&port) > 1 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    if Arc::strong_count(&port) > 1 {
        warn!(port = %info.port, "a worker still holds the interface's queues; it is released when the worker lets go");
    }
    drop(port);
    info!(port = %info.port, ifname = %info.ifname, "interface given back to the kernel");
}

impl Registry {
    /// `attach`: a NIC, a host port, or both, on switch `sw`, each in
    /// `vlan` (none: a trunk of every VLAN).
    pub fn attach(
        &mut self,
        sw: &str,
        nic: Option<&NicSpec>,
        host: Option<&HostSpec>,
        vlan: Option<&PortVlan>,
    ) -> Result<AttachReply, RegistryError> {
        let vlan = vlan.cloned().unwrap_or_default();
        name::check_switch_name(sw)?;
        if nic.is_none() && host.is_none() {
            return Err(RegistryError::AttachNothing);
        }
        let host_name = match (nic, host) {
            (_, Some(HostSpec { name: Some(n), .. })) => Some(n.clone()),
            (Some(n), Some(HostSpec { name: None, .. })) => Some(format!("{}^", n.ifname)),
            (None, Some(HostSpec { name: None, .. })) => {
                return Err(RegistryError::HostPortUnnamed)
            }
            (_, None) => None,
        };
        // Check everything before touching any interface.
        let mut wanted = Vec::new();
        if let Some(n) = nic {
            wanted.push(n.ifname.as_str());
            if n.queues.is_some_and(|q| q == 0 || q > MAX_QUEUES) {
                return Err(RegistryError::Queues { max: MAX_QUEUES });
            }
        }
        if let Some(h) = host {
            if h.queues == 0 || h.queues > MAX_QUEUES {
                return Err(RegistryError::Queues { max: MAX_QUEUES });
            }
        }
        if let Some(h) = &host_name {
            wanted.push(h.as_str());
        }
        for ifname in &wanted {
            netdev::iface::validate_name(ifname)?;
            let pn: PortName =
                format!("{sw}:{ifname}")
                    .parse()
                    .map_err(|_| RegistryError::IfnameNotPortName {
                        ifname: ifname.to_string(),
                    })?;
            debug_assert!(matches!(pn.target, Target::Vale { .. }));
            if let Some(at) = self.attached_as(ifname) {
                return Err(RegistryError::AlreadyAttached {
                    ifname: ifname.to_string(),
                    port: at,
                });
            }
            if self
                .switches
                .get(sw)
                .is_some_and(|s| s.ports.contains_key(*ifname))
            {
                return Err(RegistryError::PortNameTaken {
                    switch: sw.to_string(),
                    ifname: ifname.to_string(),
                });
            }
        }
        if let (Some(n), Some(h)) = (nic, &host_name) {
            if &n.ifname == h {
                return Err(RegistryError::HostPortSameName);
            }
        }
        let free = MAX_PORTS - self.switches.get(sw).map_or(0, |s| s.ports.len());
        if free < wanted.len() {
            return Err(RegistryError::NoRoom {
                switch: sw.to_string(),
                ports: wanted.len(),
            });
        }

        let mut ports = Vec::new();
        if let Some(n) = nic {
            let res = self.attach_nic(sw, n, vlan.clone());
            self.drop_failed_switch(sw, res.is_err());
            ports.push(res?);
        }
        if let Some(h) = host_name {
            let queues = host.map_or(1, |h| h.queues);
            let res = self.attach_host(sw, &h, queues, vlan);
            if res.is_err() {
                // All or nothing: take the NIC back off.
                if let Some(n) = nic {
                    self.remove_vale_port(sw, &n.ifname);
                }
            }
            self.drop_failed_switch(sw, res.is_err());
            ports.push(res?);
        }
        Ok(AttachReply { ports })
    }

    /// The port an interface is attached as, if any.
    fn attached_as(&self, ifname: &str) -> Option<String> {
        self.switches.values().find_map(|s| {
            s.ports.values().find_map(|p| match &p.kind {
                Kind::Iface(i) if i.info.ifname == ifname => Some(i.info.port.clone()),
                _ => None,
            })
        })
    }

    fn attach_nic(
        &mut self,
        sw: &str,
        spec: &NicSpec,
        vlan: PortVlan,
    ) -> Result<IfaceInfo, RegistryError> {
        let cfg = NicConfig {
            ifname: spec.ifname.clone(),
            mode: spec.mode,
            queues: spec.queues,
            ring_size: XDP_RING,
        };
        // Recorded before the program goes on, so a crash at any point
        // after leaves a trace for the next daemon.
        let xdp = spec.mode != NicMode::Packet;
        if xdp {
            self.record_attachment(&spec.ifname);
        }
        let nic = match netdev::open_nic(&cfg) {
            Ok(n) => n,
            Err(e) => {
                if xdp {
                    self.forget_attachment(&spec.ifname);
                }
                return Err(e.into());
            }
        };
        if !nic.driver.as_str().starts_with("xdp") && xdp {
            self.forget_attachment(&spec.ifname);
        }
        info!(ifname = %nic.ifname, driver = nic.driver.as_str(), queues = nic.queues.len(), reason = %nic.reason, "NIC opened");
        let info = IfaceInfo {
            port: format!("{sw}:{}", spec.ifname),
            ifname: spec.ifname.clone(),
            driver: nic.driver.as_str().to_string(),
            queues: nic.queues.len() as u32,
            reason: nic.reason.clone(),
        };
        let res = self.add_dev_port(
            sw,
            &info,
            PortKind::Nic,
            IfaceRequest::Nic(spec.clone()),
            nic.queues,
            vlan,
        );
        if res.is_err() {
            self.forget_attachment(&spec.ifname);
        }
        res.map(|_| info)
    }

    fn attach_host(
        &mut self,
        sw: &str,
        name: &str,
        queues: u32,
        vlan: PortVlan,
    ) -> Result<IfaceInfo, RegistryError> {
        let tap = netdev::tap::open_tap(name, queues)?;
        info!(ifname = %tap.ifname, queues, "host port (TAP) created");
        let info = IfaceInfo {
            port: format!("{sw}:{name}"),
            ifname: tap.ifname.clone(),
            driver: netdev::Driver::Tap.as_str().to_string(),
            queues: tap.queues.len() as u32,
            reason: String::new(),
        };
        let req = IfaceRequest::Host(HostSpec {
            name: Some(name.to_string()),
            queues,
        });
        self.add_dev_port(sw, &info, PortKind::Host, req, tap.queues, vlan)
            .map(|_| info)
    }

    fn add_dev_port(
        &mut self,
        sw: &str,
        info: &IfaceInfo,
        kind: PortKind,
        request: IfaceRequest,
        queues: Vec<ringswitch_frame::SharedQueue>,
        vlan: PortVlan,
    ) -> Result<(), RegistryError> {
        let nq = queues.len();
        let dev =
            QueuePort::new(queues).map_err(|e| internal("setting up the interface's queues", e))?;
        let switch = self.ensure_switch(sw, false)?.switch.clone();
        let at = self.wanted_number(&info.port);
        let mut attached = Attached::new(&self.workers, switch, at, |idx| {
            Ok(SwitchPort::new_queues(info.port.clone(), idx, dev).with_vlan(vlan))
        })?;
        let sources: Vec<Source> = (0..nq).map(Source::Queue).collect();
        attached.assign(&sources, &self.next_id)?;
        let (sp, assigned) = attached.commit();
        self.keep_number(&info.port, &sp);
        let port = info
            .port
            .split_once(':')
            .map_or(info.port.as_str(), |(_, p)| p)
            .to_string();
        info!(port = %info.port, index = sp.index, driver = %info.driver, "interface port created");
        let entry = self.switches.get_mut(sw).expect("exists");
        entry.ports.insert(
            port,
            PortEntry {
                port: sp,
                assigned,
                kind: Kind::Iface(Box::new(IfaceEntry {
                    info: info.clone(),
                    kind,
                    request,
                })),
            },
        );
        Ok(())
    }

    /// Sets up what an application's `netmap:IF` opens: a hidden two-port
    /// switch that floods (a wire) between the NIC and a ring port with one
    /// ring pair per NIC queue (or the `@conf:` sizes). Returns the switch
    /// and port to open.
    pub(super) fn prepare_direct(
        &mut self,
        ifname: &str,
        conf: Option<Geometry>,
    ) -> Result<(String, String), RegistryError> {
        netdev::iface::validate_name(ifname)?;
        let sw = format!("netmap:{ifname}");
        if self.switches.contains_key(&sw) {
            return Err(RegistryError::DirectOpen { switch: sw });
        }
        if let Some(at) = self.attached_as(ifname) {
            return Err(RegistryError::DirectAttached {
                ifname: ifname.to_string(),
                port: at,
            });
        }
        self.switches.insert(
            sw.clone(),
            SwitchEntry {
                switch: Arc::new(Switch::new(&sw, Box::new(Hub), self.cfg.batch)),
                ports: Default::default(),
                persistent: false,
                direct: true,
                openflow: None,
            },
        );
        let spec = NicSpec {
            ifname: ifname.to_string(),
            mode: NicMode::Auto,
            queues: conf.map(|g| g.tx_rings.max(g.rx_rings)),
        };
        // The hidden switch is a wire: no VLANs.
        let info = match self.attach_nic(&sw, &spec, PortVlan::default()) {
            Ok(i) => i,
            Err(e) => {
                self.switches.remove(&sw);
                return Err(e);
            }
        };
        let g = conf.unwrap_or(Geometry {
            tx_rings: info.queues,
            rx_rings: info.queues,
            ..Geometry::default()
        });
        let app = NewPort::Ring {
            geometry: g,
            persistent: false,
            counters: None,
            vnet: false,
            pipes: 0,
        };
        if let Err(e) = self.add_port(&sw, DIRECT_APP, app, PortVlan::default()) {
            self.remove_direct(&sw);
            return Err(e);
        }
        Ok((sw, DIRECT_APP.to_string()))
    }

    /// Takes down a `netmap:IF` switch: its NIC goes back to the kernel.
    pub(super) fn remove_direct(&mut self, sw: &str) {
        let names: Vec<String> = self
            .switches
            .get(sw)
            .map(|s| s.ports.keys().cloned().collect())
            .unwrap_or_default();
        for port in names {
            self.remove_vale_port(sw, &port);
        }
        self.switches.remove(sw);
    }

    /// `detach`: removes an interface port.
    pub fn detach(&mut self, name: &str) -> Result<(), RegistryError> {
        let pn = Self::parse(name)?;
        let Target::Vale { switch, port } = &pn.target else {
            return Err(RegistryError::DetachNotSwitchPort {
                port: pn.to_string(),
            });
        };
        let p = self.port_entry(&pn, switch, port)?;
        if !matches!(p.kind, Kind::Iface(_)) {
            return Err(RegistryError::NotAnInterface {
                port: pn.to_string(),
            });
        }
        self.remove_vale_port(&switch.clone(), &port.clone());
        Ok(())
    }

    fn record_attachment(&self, ifname: &str) {
        if let Some(path) = &self.state {
            xdp_state::record(path, ifname);
        }
    }

    pub(super) fn forget_attachment(&self, ifname: &str) {
        if let Some(path) = &self.state {
            xdp_state::forget(path, ifname);
        }
    }
}
