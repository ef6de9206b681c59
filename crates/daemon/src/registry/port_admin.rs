//! The administrator's requests on ports of every kind: `port-add` and
//! `port-del`.

use ringswitch_control::proto::VhostUserSpec;
use ringswitch_control::{PipeEnd, PortVlan, Target};
use ringswitch_ring::Geometry;

use super::open_by::OpenBy;
use super::{make_persistent, Kind, NewPort, Registry, RegistryError};
use ringswitch_switch::MAX_PORTS;
use tracing::info;

impl Registry {
    /// `port-add`, with the port at OpenFlow number `ofport` when given
    /// (see [`Registry::port_add_here`] for the rest): a switch port's
    /// number, 1 to [`MAX_PORTS`], free on its switch or already the
    /// port's. The number is kept for the port as any persistent port's is.
    ///
    /// A VM port may ask for the number of another VM port (a guest's
    /// migration between two ports of this switch: its destination port
    /// asks for its source port's number): it is made with a free number
    /// and the asked one moves to it when its guest runs there and the
    /// holder's does not (`Switch::set_running`). A port restored from
    /// the configuration comes back at the number it had.
    #[allow(clippy::too_many_arguments)]
    pub fn port_add(
        &mut self,
        name: &str,
        vm: Option<&VhostUserSpec>,
        pt: Option<&str>,
        vnet_hdr: bool,
        migratable: bool,
        vlan: Option<&PortVlan>,
        ofport: Option<u32>,
    ) -> Result<(), RegistryError> {
        let Some(n) = ofport else {
            return self.port_add_here(name, vm, pt, vnet_hdr, migratable, vlan);
        };
        let pn = Self::parse(name)?;
        let Target::Vale { switch, port } = &pn.target else {
            return Err(RegistryError::OfPortNotSwitchPort {
                port: pn.to_string(),
            });
        };
        if !(1..=MAX_PORTS).contains(&usize::try_from(n).unwrap_or(usize::MAX)) {
            return Err(RegistryError::OfPortRange {
                port: pn.to_string(),
                ofport: n,
                max: MAX_PORTS,
            });
        }
        let full = format!("{switch}:{port}");
        // Where the port is made (see `Registry::wanted_number`): the
        // number it had, when restored, else the one asked for.
        let at = self.wanted_number(&full).unwrap_or(n);
        let mut standby = false;
        if let Some(s) = self.switches.get(switch) {
            let number = |e: &super::PortEntry| s.switch.number_of(e.port.index);
            if let Some(e) = s.ports.get(port) {
                let has = number(e);
                if has != n && s.switch.waits_for(e.port.index) != Some(n) {
                    return Err(RegistryError::OfPortOfExisting {
                        port: pn.to_string(),
                        ofport: n,
                        has,
                    });
                }
            } else if let Some((holder, e)) = s.ports.iter().find(|(_, e)| number(e) == at) {
                standby = at == n && vm.is_some() && matches!(e.kind, Kind::Vm(_));
                if !standby {
                    return Err(RegistryError::OfPortTaken {
                        port: pn.to_string(),
                        ofport: n,
                        holder: format!("{switch}:{holder}"),
                    });
                }
            }
        }
        let before = if standby {
            self.numbers.remove(&full)
        } else {
            self.numbers.insert(full.clone(), at)
        };
        let r = self.port_add_here(name, vm, pt, vnet_hdr, migratable, vlan);
        if r.is_err() {
            match before {
                Some(b) => self.numbers.insert(full, b),
                None => self.numbers.remove(&full),
            };
            return r;
        }
        // Only VM ports' numbers move (between two ports of one guest).
        if let Some(s) = self.switches.get(switch).filter(|_| vm.is_some()) {
            if let Some(e) = s.ports.get(port) {
                s.switch.want_number(e.port.index, n);
                if standby {
                    info!(port = %full, ofport = n, has = s.switch.number_of(e.port.index), "OpenFlow port {n} is another VM port's: this one takes it when its guest runs here and the other's does not");
                }
            }
        }
        r
    }

    /// `port-add`: a persistent port, with `vm` a VM port, with `pt` a
    /// passthrough port (with `vnet_hdr`, its frames carry a virtio-net
    /// header; with `migratable`, its guest may be migrated); a switch
    /// port in `vlan` (none: a trunk of every VLAN).
    fn port_add_here(
        &mut self,
        name: &str,
        vm: Option<&VhostUserSpec>,
        pt: Option<&str>,
        vnet_hdr: bool,
        migratable: bool,
        vlan: Option<&PortVlan>,
    ) -> Result<(), RegistryError> {
        let pn = Self::parse(name)?;
        if vnet_hdr && (pt.is_none() || !matches!(pn.target, Target::Vale { .. })) {
            return Err(RegistryError::VnetHdrNotPassthrough {
                port: pn.to_string(),
            });
        }
        if migratable && (pt.is_none() || vnet_hdr || !matches!(pn.target, Target::Vale { .. })) {
            return Err(RegistryError::MigratableNotPassthrough {
                port: pn.to_string(),
            });
        }
        if let Some(v) = vlan {
            if pt.is_some() {
                return Err(RegistryError::VlanOnPassthrough {
                    port: pn.to_string(),
                });
            }
            if matches!(pn.target, Target::Pipe { .. }) {
                return Err(RegistryError::VlanOnPipe {
                    end: pn.to_string(),
                    vlan: v.to_string(),
                });
            }
        }
        let vlan = vlan.cloned().unwrap_or_default();
        if let Some(path) = pt {
            if vm.is_some() {
                return Err(RegistryError::VmAndPassthrough {
                    port: pn.to_string(),
                });
            }
            return self.passthrough_add(&pn, std::path::Path::new(path), vnet_hdr, migratable);
        }
        if let Some(spec) = vm {
            let Target::Vale { switch, port } = &pn.target else {
                return Err(RegistryError::VmNotSwitchPort {
                    port: pn.to_string(),
                });
            };
            if pn.conf.is_some() {
                return Err(RegistryError::VmSizes {
                    port: pn.to_string(),
                });
            }
            if self
                .switches
                .get(switch)
                .is_some_and(|s| s.ports.contains_key(port))
            {
                return Err(RegistryError::PortExists {
                    port: pn.to_string(),
                });
            }
            return self.add_port(switch, port, NewPort::Vm(spec), vlan);
        }
        let g = match pn.target {
            Target::Pipe { .. } => pn.conf.unwrap_or_else(Geometry::pipe_default),
            _ => pn.conf.unwrap_or_default(),
        };
        match &pn.target {
            Target::Vale { switch, port } => {
                if let Some(p) = self
                    .switches
                    .get_mut(switch)
                    .and_then(|s| s.ports.get_mut(port))
                {
                    return match &mut p.kind {
                        Kind::Vm(_) => Err(RegistryError::PortIsVm {
                            port: pn.to_string(),
                        }),
                        Kind::Iface(i) => Err(RegistryError::PortIsInterface {
                            port: pn.to_string(),
                            ifname: i.info.ifname.clone(),
                        }),
                        Kind::Ring(r) => {
                            // An on-demand port made persistent keeps the
                            // VLANs it was made with (none): its client
                            // has it open, so it cannot be rebuilt.
                            if !r.persistent && p.port.vlan != vlan {
                                return Err(RegistryError::VlanOfOpenPort {
                                    port: pn.to_string(),
                                    vlan: p.port.vlan.to_string(),
                                });
                            }
                            make_persistent(&mut r.persistent, || RegistryError::PortExists {
                                port: pn.to_string(),
                            })
                        }
                    };
                }
                self.add_port(
                    switch,
                    port,
                    NewPort::Ring {
                        geometry: g,
                        persistent: true,
                        counters: None,
                        vnet: false,
                        pipes: 0,
                    },
                    vlan,
                )
            }
            Target::Pipe { base, id, end } => {
                let g = if *end == PipeEnd::Slave {
                    g.mirrored()
                } else {
                    g
                };
                let key = Target::pipe_key(base, id);
                if let Some(p) = self.pipes.get_mut(&key) {
                    return make_persistent(&mut p.persistent, || RegistryError::PipeExists {
                        pipe: format!("{base}{{{id}"),
                    });
                }
                self.new_pipe(base, id, g, true)
            }
            Target::Nic { ifname } => Err(RegistryError::NicNotAPort {
                ifname: ifname.clone(),
            }),
        }
    }

    /// `port-del`.
    pub fn port_del(&mut self, name: &str) -> Result<(), RegistryError> {
        let pn = Self::parse(name)?;
        match &pn.target {
            Target::Vale { switch, port } => {
                let p = self.port_entry(&pn, switch, port)?;
                if matches!(&p.kind, Kind::Ring(r) if r.open_by.is_client()) {
                    return Err(RegistryError::PortInUse {
                        port: pn.to_string(),
                    });
                }
                self.remove_vale_port(&switch.clone(), &port.clone());
                Ok(())
            }
            Target::Pipe { base, id, .. } => {
                let key = Target::pipe_key(base, id);
                let p = self.pipes.get(&key).ok_or_else(|| RegistryError::NoPipe {
                    pipe: format!("{base}{{{id}"),
                })?;
                if p.open_by.iter().any(OpenBy::is_client) {
                    return Err(RegistryError::PipeInUse {
                        pipe: format!("{base}{{{id}"),
                    });
                }
                // Its passthrough servers stop (joined after the lock).
                self.remove_pipe(&key);
                Ok(())
            }
            Target::Nic { ifname } => Err(RegistryError::NicNotAPort {
                ifname: ifname.clone(),
            }),
        }
    }
}
