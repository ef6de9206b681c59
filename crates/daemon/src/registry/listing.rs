//! What the registry tells: `switch-list`, `port-list`, `stats`,
//! `workers`, `macs`.

use ringswitch_control::proto::*;

use super::passthrough::pt_info;
use super::{no_switch, Kind, PortEntry, Registry, RegistryError};

impl PortEntry {
    /// Its counters for `stats`, with what only its kind counts.
    fn stats(&self) -> PortStats {
        let mut s = self.port.stats();
        if let Kind::Vm(vm) = &self.kind {
            s.vm_frontend_errors = vm.thread.frontend_errors();
        }
        s
    }
}

impl Registry {
    /// `switch-list`.
    pub fn switch_list(&self) -> Vec<SwitchInfo> {
        self.switches
            .iter()
            .map(|(n, s)| {
                let (openflow, openflow_connections, [packet_in_dropped, flows_truncated]) =
                    self.openflow_info(n);
                SwitchInfo {
                    name: n.clone(),
                    ports: s.ports.len() as u32,
                    macs: s.switch.mac_entries().len() as u32,
                    openflow,
                    openflow_connections,
                    packet_in_dropped,
                    flows_truncated,
                }
            })
            .collect()
    }

    /// `port-list`.
    pub fn port_list(&self, switch: Option<&str>) -> Result<Vec<PortInfo>, RegistryError> {
        let mut out = Vec::new();
        if let Some(sw) = switch {
            if !self.switches.contains_key(sw) {
                return Err(no_switch(sw));
            }
        }
        for (sname, s) in &self.switches {
            if switch.is_some_and(|w| w != sname) {
                continue;
            }
            for p in s.ports.values() {
                let mut info = PortInfo {
                    name: p.port.name.clone(),
                    kind: PortKind::Vale,
                    persistent: true,
                    open: false,
                    geometry: None,
                    worker: p.assigned.first().map(|a| a.1 as u32),
                    vhost_user: None,
                    iface: None,
                    passthrough: None,
                    vlan: Some(p.port.vlan.clone()),
                };
                match &p.kind {
                    Kind::Ring(r) => {
                        info.persistent = r.persistent;
                        info.open = r.open_by.in_use();
                        info.geometry = Some(r.geometry);
                        let vnet = r.vnet.is_some();
                        info.passthrough = r.open_by.guest().map(|t| pt_info(t, vnet));
                    }
                    Kind::Vm(v) => {
                        let connected = v.thread.connected();
                        info.kind = PortKind::VhostUser;
                        info.open = connected;
                        info.vhost_user = Some(VhostUserInfo {
                            spec: v.spec.clone(),
                            connected,
                        });
                    }
                    Kind::Iface(i) => {
                        info.kind = i.kind;
                        info.open = true;
                        info.iface = Some(i.info.clone());
                    }
                }
                out.push(info);
            }
        }
        if switch.is_none() {
            for p in self.pipes.values() {
                let l = p.region.layout();
                for end in 0..2 {
                    let g = l.end_geometry(p.ends()[end]);
                    out.push(PortInfo {
                        name: format!("{}{}{}", p.base, if end == 0 { '{' } else { '}' }, p.id),
                        kind: PortKind::Pipe,
                        persistent: p.persistent,
                        open: p.open_by[end].in_use(),
                        geometry: Some(g),
                        worker: None,
                        vhost_user: None,
                        iface: None,
                        passthrough: p.open_by[end].guest().map(|t| pt_info(t, false)),
                        vlan: None,
                    });
                }
            }
        }
        Ok(out)
    }

    /// `stats`.
    pub fn stats(&self, switch: Option<&str>) -> Result<Vec<PortStats>, RegistryError> {
        if let Some(sw) = switch {
            if !self.switches.contains_key(sw) {
                return Err(no_switch(sw));
            }
        }
        Ok(self
            .switches
            .iter()
            .filter(|(n, _)| switch.is_none_or(|w| w == n.as_str()))
            .flat_map(|(_, s)| s.ports.values().map(PortEntry::stats))
            .collect())
    }

    /// `workers`.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        self.workers
            .iter()
            .enumerate()
            .map(|(i, w)| w.stats(u32::try_from(i).unwrap_or(u32::MAX)))
            .collect()
    }

    /// `macs`.
    pub fn macs(&self, sw: &str) -> Result<Vec<MacEntry>, RegistryError> {
        let s = self.switches.get(sw).ok_or_else(|| no_switch(sw))?;
        let mut v: Vec<MacEntry> = s
            .switch
            .mac_entries()
            .into_iter()
            .map(|(e, port)| {
                let m = e.mac;
                MacEntry {
                    mac: format!(
                        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                        m[0], m[1], m[2], m[3], m[4], m[5]
                    ),
                    vlan: e.vid,
                    port,
                    age_s: e.age_s,
                }
            })
            .collect();
        v.sort_by(|a, b| (a.vlan, &a.mac).cmp(&(b.vlan, &b.mac)));
        Ok(v)
    }
}
