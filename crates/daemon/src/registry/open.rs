//! `open` and `close`: a client's handles on ring ports and pipe ends, and
//! what a client that goes leaves behind.

use std::os::fd::OwnedFd;

use ringswitch_control::proto::{OpenReply, PortKind};
use ringswitch_control::{PipeEnd, PortVlan, Target};
use ringswitch_ring::Geometry;
use ringswitch_switch::SwitchPort;
use tracing::{info, warn};

use super::error::Openable;
use super::open_by::OpenBy;
use super::pipe::Former;
use super::{internal, ConnId, Kind, NewPort, Registry, RegistryError};
use ringswitch_ring::layout::MAX_PORT_PIPES;

/// What an open handle refers to.
#[derive(Clone, Debug)]
pub(super) enum Handle {
    Vale { switch: String, port: String },
    Pipe { key: String, end: usize },
}

/// An open reply with its descriptors.
pub type Opened = (OpenReply, Vec<OwnedFd>);

impl Registry {
    /// `open`: creates what the name asks for if needed, marks it open by
    /// `conn`, and returns the reply with its descriptors.
    /// `pipes`: room for that many pipes in the memory of a switch port
    /// (see `Request::Open`); `in_port_memory`: a pipe end made in the
    /// memory of the switch port it is a pipe of.
    pub fn open(
        &mut self,
        conn: ConnId,
        name: &str,
        pipes: u32,
        in_port_memory: bool,
    ) -> Result<Opened, RegistryError> {
        let pipes = pipes.min(MAX_PORT_PIPES);
        let pn = Self::parse(name)?;
        let target = match pn.target.clone() {
            Target::Nic { ifname } => {
                let (switch, port) = self.prepare_direct(&ifname, pn.conf)?;
                Target::Vale { switch, port }
            }
            t => t,
        };
        match target {
            Target::Vale { switch, port } => {
                let exists = self
                    .switches
                    .get(&switch)
                    .is_some_and(|s| s.ports.contains_key(&port));
                if exists {
                    self.make_room_for_pipes(&switch, &port, pipes);
                } else {
                    self.add_port(
                        &switch,
                        &port,
                        NewPort::Ring {
                            geometry: pn.conf.unwrap_or_default(),
                            persistent: false,
                            counters: None,
                            vnet: false,
                            pipes,
                        },
                        // Opened by name, without `port-add`: no VLANs.
                        PortVlan::default(),
                    )?;
                }
                let handle = self.id();
                let p = self
                    .switches
                    .get_mut(&switch)
                    .and_then(|s| s.ports.get_mut(&port))
                    .expect("exists");
                let r = match &mut p.kind {
                    Kind::Vm(_) => {
                        return Err(RegistryError::OpenVmPort {
                            port: pn.to_string(),
                        })
                    }
                    Kind::Iface(i) => {
                        return Err(RegistryError::OpenInterfacePort {
                            port: pn.to_string(),
                            ifname: i.info.ifname.clone(),
                        })
                    }
                    Kind::Ring(r) => r,
                };
                r.open_by.check_free(Openable::Port, &pn)?;
                if let Some(g) = pn.conf {
                    if g != r.geometry {
                        warn!(port = %pn, "open asked for other sizes than the existing port has; using the existing ones");
                    }
                }
                let Some(rp) = p.port.ring() else {
                    return Err(internal("opening the port", "not a ring port"));
                };
                let fds = (|| -> std::io::Result<Vec<OwnedFd>> {
                    let mut v = vec![rp.region().dup_fd()?, rp.kick.try_clone()?.into()];
                    for irq in rp.irqs.iter() {
                        v.push(irq.try_clone()?.into());
                    }
                    Ok(v)
                })()
                .map_err(|e| internal("duplicating the port's descriptors", e))?;
                r.open_by = OpenBy::Client(conn);
                r.owner_uid = Some(self.client.uid);
                rp.link.set_up(true);
                let region = rp.region();
                let reply = OpenReply {
                    handle,
                    name: pn.to_string(),
                    kind: PortKind::Vale,
                    end: 0,
                    geometry: r.geometry,
                    region_size: region.len() as u64,
                    nifp_offset: region.layout().nifp_ofs[0] as u64,
                };
                self.handles
                    .insert(handle, (conn, Handle::Vale { switch, port }));
                Ok((reply, fds))
            }
            Target::Pipe { base, id, end } => {
                let key = Target::pipe_key(&base, &id);
                if in_port_memory {
                    match self.pipes.get(&key) {
                        None => self.new_pipe_in_port(&base, &id)?,
                        Some(p) if p.in_port.is_none() => {
                            return Err(RegistryError::PipeNotInPortMemory {
                                pipe: pn.to_string(),
                                port: base.clone(),
                                why: "the pipe is already open outside the port's memory (close what has either of its ends open and retry)".into(),
                            })
                        }
                        Some(p) if !self.is_ports_memory(&base, &p.region) => {
                            return Err(RegistryError::PipeNotInPortMemory {
                                pipe: pn.to_string(),
                                port: base.clone(),
                                why: "the pipe is still open in the memory the port had before it was opened again (close what has its other end open and retry)".into(),
                            })
                        }
                        Some(_) => {}
                    }
                }
                if !self.pipes.contains_key(&key) {
                    // Sizes in the name describe the end being opened.
                    let g = pn.conf.unwrap_or_else(Geometry::pipe_default);
                    let g = if end == PipeEnd::Slave {
                        g.mirrored()
                    } else {
                        g
                    };
                    self.new_pipe(&base, &id, g, false)?;
                }
                let handle = self.id();
                let p = self.pipes.get_mut(&key).expect("exists");
                let e = end.index();
                p.open_by[e].check_free(Openable::PipeEnd, &pn)?;
                if let Some(d) = &p.in_port {
                    // Its memory is the port's: only its user has it.
                    if d.uid != self.client.uid && self.client.uid != 0 {
                        return Err(RegistryError::PipeInOtherUsersMemory {
                            pipe: pn.to_string(),
                            port: d.port.clone(),
                        });
                    }
                }
                // When the other end is a guest's, its memory cannot be
                // replaced while its QEMU stays, and host programs taking
                // turns at this end is how such a pipe is used: only the
                // user who had the end takes it again (it gets fresh memory
                // when the QEMU goes and no end is open).
                if p.open_by[1 - e].guest().is_some()
                    && p.former_uid.is_some_and(|u| u != self.client.uid)
                {
                    return Err(RegistryError::PipeEndOtherUser {
                        end: pn.to_string(),
                    });
                }
                if p.former.is_some_and(|f| f != Former::Client(conn))
                    && p.open_by[1 - e].guest().is_none()
                    && p.in_port.is_none()
                {
                    // Handing this region to a new client would let the
                    // former one, which may still map it, read its traffic.
                    let other = if e == 0 { '}' } else { '{' };
                    return Err(RegistryError::PipeEndFormer {
                        end: pn.to_string(),
                        other: format!("{base}{other}{id}"),
                    });
                }
                let fds = (|| -> std::io::Result<Vec<OwnedFd>> {
                    let mut v = vec![p.region.dup_fd()?];
                    for irq in p.irq[e].iter().chain(p.irq[1 - e].iter()) {
                        v.push(irq.try_clone()?.into());
                    }
                    Ok(v)
                })()
                .map_err(|e| internal("duplicating the pipe's descriptors", e))?;
                p.open_by[e] = OpenBy::Client(conn);
                p.owner_uid[e] = Some(self.client.uid);
                let l = p.region.layout();
                // The end in the region: 0 or 1, or one of a port's pipe
                // ends.
                let re = p.ends()[e];
                let reply = OpenReply {
                    handle,
                    name: pn.to_string(),
                    kind: PortKind::Pipe,
                    end: re as u32,
                    geometry: l.end_geometry(re),
                    region_size: l.size as u64,
                    nifp_offset: l.nifp_at(re) as u64,
                };
                self.handles
                    .insert(handle, (conn, Handle::Pipe { key, end: e }));
                Ok((reply, fds))
            }
            Target::Nic { .. } => unreachable!("mapped to its direct switch above"),
        }
    }

    /// Gives persistent ring port `switch:port`, which no one has open,
    /// fresh memory with room for `pipes` pipes if it has less room: a
    /// netmap program that opens its output pipes in the port's memory
    /// (lb) opens a port made by `port-add` as one made by name.
    fn make_room_for_pipes(&mut self, switch: &str, port: &str, pipes: u32) {
        let Some(p) = self.switches.get(switch).and_then(|s| s.ports.get(port)) else {
            return;
        };
        let (Kind::Ring(r), Some(rp)) = (&p.kind, p.port.ring()) else {
            return;
        };
        if pipes <= rp.region().layout().pipes
            || !r.persistent
            || !r.open_by.is_closed()
            || r.vnet.is_some()
        {
            return;
        }
        let (g, old) = (r.geometry, p.port.clone());
        self.remove_vale_port(switch, port);
        if let Err(e) = self.refile_persistent(switch, port, &old, g, pipes) {
            warn!(port = %format!("{switch}:{port}"), error = %e, "could not give a port room for pipes");
            // The port as it was (the open then refuses the pipes).
            let had = old.ring().map_or(0, |rp| rp.region().layout().pipes);
            if let Err(e) = self.refile_persistent(switch, port, &old, g, had) {
                warn!(port = %format!("{switch}:{port}"), error = %e, "could not recreate a persistent port");
            }
        }
    }

    /// Files persistent ring port `switch:port` again on fresh memory, of
    /// geometry `g` with room for `pipes` pipes, with the counters and
    /// VLANs of `old`, the port it replaces (which the caller removed).
    fn refile_persistent(
        &mut self,
        switch: &str,
        port: &str,
        old: &SwitchPort,
        g: Geometry,
        pipes: u32,
    ) -> Result<(), RegistryError> {
        let new = NewPort::Ring {
            geometry: g,
            persistent: true,
            counters: Some(old.counters.clone()),
            vnet: false,
            pipes,
        };
        self.add_port(switch, port, new, old.vlan.clone())
    }

    /// `close` of one handle owned by `conn`.
    pub fn close(&mut self, conn: ConnId, handle: u64) -> Result<(), RegistryError> {
        match self.handles.get(&handle) {
            Some((c, _)) if *c == conn => {}
            _ => return Err(RegistryError::NoHandle { handle }),
        }
        let (_, h) = self.handles.remove(&handle).expect("checked");
        match h {
            Handle::Vale { switch, port } => {
                let Some(p) = self
                    .switches
                    .get_mut(&switch)
                    .and_then(|s| s.ports.get_mut(&port))
                else {
                    return Ok(());
                };
                let Kind::Ring(r) = &mut p.kind else {
                    return Ok(()); // handles are to ring ports only
                };
                debug_assert!(
                    matches!(r.open_by, OpenBy::Client(c) if c == conn),
                    "a handle's port is open by the handle's connection"
                );
                r.open_by = OpenBy::Closed;
                let (persistent, g, old) = (r.persistent, r.geometry, p.port.clone());
                let pipes = old.ring().map_or(0, |rp| rp.region().layout().pipes);
                self.remove_vale_port(&switch, &port);
                if self.switches.get(&switch).is_some_and(|s| s.direct) {
                    // netmap:IF closed: the NIC goes back to the kernel.
                    self.remove_direct(&switch);
                    return Ok(());
                }
                if persistent {
                    // A persistent port outlives its clients, but its memory
                    // does not: the next client gets a fresh region, so one
                    // that kept the old mapping is cut off from the switch.
                    // The counters describe the port, not one client's use
                    // of it: the new port shares them, and its VLANs.
                    match self.refile_persistent(&switch, &port, &old, g, pipes) {
                        Ok(()) => {}
                        Err(e) => {
                            warn!(port = %format!("{switch}:{port}"), error = %e, "could not recreate a persistent port");
                        }
                    }
                }
            }
            Handle::Pipe { key, end } => {
                let Some(p) = self.pipes.get_mut(&key) else {
                    return Ok(());
                };
                debug_assert!(
                    matches!(p.open_by[end], OpenBy::Client(c) if c == conn),
                    "a handle's pipe end is open by the handle's connection"
                );
                p.open_by[end] = OpenBy::Closed;
                if !p.open_by[1 - end].is_closed() {
                    // The other end stays with the memory this client saw.
                    p.former = Some(Former::Client(conn));
                }
                if p.open_by[1 - end].guest().is_some() {
                    p.former_uid = p.owner_uid[end];
                }
                p.owner_uid[end] = None;
                if p.open_by.iter().any(|o| o.guest().is_some()) {
                    // A passthrough end keeps the pipe: it gets fresh memory
                    // once no end is in use.
                    self.renew_pipe_if_idle(&key);
                    return Ok(());
                }
                if p.open_by.iter().all(OpenBy::is_closed) {
                    let p = self.pipes.remove(&key).expect("present");
                    if p.persistent {
                        // Same as for switch ports: a fresh region for the
                        // next pair of clients.
                        let g = p.region.layout().geometry;
                        if let Err(e) = self.new_pipe(&p.base, &p.id, g, true) {
                            warn!(pipe = %key, error = %e, "could not recreate a persistent pipe");
                        }
                    } else {
                        info!(pipe = %key, "pipe removed with its last end");
                    }
                }
            }
        }
        Ok(())
    }

    /// Closes everything `conn` had open (it hung up or crashed).
    pub fn disconnect(&mut self, conn: ConnId) {
        let mine: Vec<u64> = self
            .handles
            .iter()
            .filter(|(_, (c, _))| *c == conn)
            .map(|(h, _)| *h)
            .collect();
        if !mine.is_empty() {
            info!(conn, ports = mine.len(), "client gone: closing its ports");
        }
        for h in mine {
            let _ = self.close(conn, h);
        }
    }
}
