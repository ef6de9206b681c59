//! The administrator's requests on ports of every kind: `port-add` and
//! `port-del`.

use ringswitch_control::proto::VhostUserSpec;
use ringswitch_control::{PipeEnd, PortVlan, Target};
use ringswitch_ring::Geometry;

use super::open_by::OpenBy;
use super::{make_persistent, Kind, NewPort, Registry, RegistryError};
use ringswitch_switch::MAX_PORTS;

impl Registry {
    /// `port-add`, with the port at OpenFlow number `ofport` when given
    /// (see [`Registry::port_add_here`] for the rest): a switch port's
    /// number, 1 to [`MAX_PORTS`], free on its switch or already the
    /// port's. The number is kept for the port as any persistent port's is.
    #[allow(clippy::too_many_arguments)]
    pub fn port_add(
        &mut self,
        name: &str,
        vm: Option<&VhostUserSpec>,
        pt: Option<&str>,
        vnet_hdr: bool,
        vlan: Option<&PortVlan>,
        ofport: Option<u32>,
    ) -> Result<(), RegistryError> {
        let Some(n) = ofport else {
            return self.port_add_here(name, vm, pt, vnet_hdr, vlan);
        };
        let pn = Self::parse(name)?;
        let Target::Vale { switch, port } = &pn.target else {
            return Err(RegistryError::OfPortNotSwitchPort {
                port: pn.to_string(),
            });
        };
        let index = match u16::try_from(n) {
            Ok(i) if (1..=MAX_PORTS).contains(&usize::from(i)) => i - 1,
            _ => {
                return Err(RegistryError::OfPortRange {
                    port: pn.to_string(),
                    ofport: n,
                    max: MAX_PORTS,
                })
            }
        };
        if let Some(s) = self.switches.get(switch) {
            if let Some(e) = s.ports.get(port) {
                if e.port.index != index {
                    return Err(RegistryError::OfPortOfExisting {
                        port: pn.to_string(),
                        ofport: n,
                        has: u32::from(e.port.index) + 1,
                    });
                }
            } else if let Some((holder, _)) = s.ports.iter().find(|(_, e)| e.port.index == index) {
                return Err(RegistryError::OfPortTaken {
                    port: pn.to_string(),
                    ofport: n,
                    holder: format!("{switch}:{holder}"),
                });
            }
        }
        // Where the port is made (see `Registry::wanted_index`); put back
        // as it was if it cannot be.
        let full = format!("{switch}:{port}");
        let before = self.indexes.insert(full.clone(), index);
        let r = self.port_add_here(name, vm, pt, vnet_hdr, vlan);
        if r.is_err() {
            match before {
                Some(b) => self.indexes.insert(full, b),
                None => self.indexes.remove(&full),
            };
        }
        r
    }

    /// `port-add`: a persistent port, with `vm` a VM port, with `pt` a
    /// passthrough port (with `vnet_hdr`, its frames carry a virtio-net
    /// header); a switch port in `vlan` (none: a trunk of every VLAN).
    fn port_add_here(
        &mut self,
        name: &str,
        vm: Option<&VhostUserSpec>,
        pt: Option<&str>,
        vnet_hdr: bool,
        vlan: Option<&PortVlan>,
    ) -> Result<(), RegistryError> {
        let pn = Self::parse(name)?;
        if vnet_hdr && (pt.is_none() || !matches!(pn.target, Target::Vale { .. })) {
            return Err(RegistryError::VnetHdrNotPassthrough {
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
            return self.passthrough_add(&pn, std::path::Path::new(path), vnet_hdr);
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
