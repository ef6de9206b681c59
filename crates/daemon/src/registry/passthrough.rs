//! Passthrough ports and pipe ends: a guest gets a region through QEMU's
//! ivshmem-doorbell, from a server the registry starts, and fresh memory
//! after each QEMU.

use std::sync::Arc;

use ringswitch_control::proto::PassthroughInfo;
use ringswitch_control::{PipeEnd, PortName, PortVlan, Target};
use ringswitch_ring::{EventFd, Geometry, Region};
use tracing::{info, warn};

use super::open_by::OpenBy;
use super::pipe::{pipe_memory, Former, PipeEntry};
use super::{internal, Kind, NewPort, PortEntry, Registry, RegistryError};
use crate::passthrough::{PassthroughServer, Peers, Renew};

/// What `port-list` tells of a passthrough server (of a port whose frames
/// carry a virtio-net header with `vnet_hdr`).
pub(super) fn pt_info(t: &PassthroughServer, vnet_hdr: bool) -> PassthroughInfo {
    PassthroughInfo {
        path: t.path().display().to_string(),
        connected: t.connected(),
        vnet_hdr,
        migratable: t.migratable(),
    }
}

/// A guest's view of switch port `p`: its region, its interrupts, and the
/// kick of the worker for the doorbell; `migratable` (never with a
/// virtio-net header): the guest is peer 0, as QEMU's `master=on` wants.
pub(super) fn vale_peers(p: &PortEntry, migratable: bool) -> Result<Peers, RegistryError> {
    let vnet = match &p.kind {
        Kind::Ring(r) => r.vnet.as_ref(),
        _ => None,
    };
    if let Some(v) = vnet {
        // The switch sees this port as queues: its memory and doorbells
        // are in the registry's entry.
        return switch_port_peers(&v.region, &v.irqs, &v.kick, &v.link, false);
    }
    let rp = p
        .port
        .ring()
        .ok_or_else(|| internal("creating a passthrough port", "not a ring port"))?;
    switch_port_peers(rp.region(), &rp.irqs, &rp.kick, &rp.link, migratable)
}

/// A guest's view of a switch port's `region`: the guest (peer 1) gets the
/// interrupts `irqs`, its doorbell rings the daemon (peer 0) through `kick`
/// on every vector, and `link` follows the guest. With `migratable`, the
/// guest is peer 0 and the daemon peer 1, and the link waits for the
/// guest to answer (crate::passthrough, "Migration").
fn switch_port_peers(
    region: &Arc<Region>,
    irqs: &[EventFd],
    kick: &EventFd,
    link: &ringswitch_switch::Link,
    migratable: bool,
) -> Result<Peers, RegistryError> {
    let dup = |e: &EventFd| {
        e.try_clone()
            .map_err(|e| internal("duplicating an eventfd", e))
    };
    let guest_irqs = irqs.iter().map(dup).collect::<Result<Vec<_>, _>>()?;
    // A migratable port's doorbell wakes no worker until the guest
    // answered and its memory is adopted (the worker would otherwise take
    // TX slots a migration is still writing): the guest gets an eventfd of
    // its own, which becomes the port's kick then.
    let gate;
    let kick = if migratable {
        gate = EventFd::new().map_err(|e| internal("creating an eventfd", e))?;
        &gate
    } else {
        kick
    };
    let host_kicks = (0..guest_irqs.len())
        .map(|_| dup(kick))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Peers {
        memfd: region
            .dup_fd()
            .map_err(|e| internal("duplicating the region", e))?,
        guest_id: u16::from(!migratable),
        guest_irqs,
        host_id: u16::from(migratable),
        host_kicks,
        link: Some(link.clone()),
        migratable: migratable.then(|| region.clone()),
    })
}

fn lock_slot(t: &PassthroughServer) -> std::sync::MutexGuard<'_, crate::passthrough::Slot> {
    t.slot()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A guest's view of end `e` of pipe `p`.
pub(super) fn pipe_peers(p: &PipeEntry, e: usize) -> Result<Peers, RegistryError> {
    pipe_peers_of(&p.region, &p.irq, e)
}

/// A guest's view of end `e` of a pipe's memory and interrupts.
pub(super) fn pipe_peers_of(
    region: &Region,
    irq: &[Vec<EventFd>; 2],
    e: usize,
) -> Result<Peers, RegistryError> {
    let dup = |e: &EventFd| {
        e.try_clone()
            .map_err(|e| internal("duplicating an eventfd", e))
    };
    Ok(Peers {
        memfd: region
            .dup_fd()
            .map_err(|e| internal("duplicating the region", e))?,
        guest_id: 1 + e as u16,
        guest_irqs: irq[e].iter().map(dup).collect::<Result<Vec<_>, _>>()?,
        host_id: 2 - e as u16,
        host_kicks: irq[1 - e].iter().map(dup).collect::<Result<Vec<_>, _>>()?,
        link: None,
        migratable: None,
    })
}

impl Registry {
    /// Lets passthrough servers reach the registry that owns them (to renew
    /// their memory after each QEMU). Set once, right after the registry is
    /// put behind its lock.
    pub fn set_self(&mut self, me: std::sync::Weak<std::sync::Mutex<Registry>>) {
        self.me = me;
    }

    /// What the passthrough server tagged `tag` of `target` calls after a
    /// QEMU went: [`Registry::passthrough_left`], under the lock.
    pub(super) fn renewer(&self, target: Target, tag: u64) -> Renew {
        let me = self.me.clone();
        Box::new(move |wanted| {
            // Upgraded only for the call: a registry being dropped is gone.
            if let Some(r) = me.upgrade() {
                r.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .passthrough_left(&target, tag, wanted);
            }
        })
    }

    /// What the migratable passthrough server tagged `tag` of `target`
    /// calls when its guest answered: [`Registry::passthrough_adopt`], under
    /// the lock.
    pub(super) fn adopter(&self, target: Target, tag: u64) -> crate::passthrough::Adopt {
        let me = self.me.clone();
        Box::new(move || {
            me.upgrade().is_some_and(|r| {
                r.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .passthrough_adopt(&target, tag)
            })
        })
    }

    /// The guest of migratable passthrough server `tag` of switch port
    /// `target` runs on the port's memory, which a migration may have
    /// written over: the memory is checked as untrusted input, what is
    /// inconsistent reset and counted (`ring_reinits`), and the port is
    /// attached to the switch again on it, with the doorbells QEMU holds,
    /// and up. False (logged) when the port is gone or cannot be attached
    /// again (it is then removed, as when it cannot get fresh memory).
    pub(super) fn passthrough_adopt(&mut self, target: &Target, tag: u64) -> bool {
        let Target::Vale { switch, port } = target else {
            return false;
        };
        let Some(p) = self
            .switches
            .get_mut(switch)
            .and_then(|s| s.ports.get_mut(port))
        else {
            return false;
        };
        let Kind::Ring(r) = &mut p.kind else {
            return false;
        };
        if r.vnet.is_some() || r.open_by.guest().is_none_or(|t| t.tag() != tag) {
            return false; // deleted, or another port of that name now
        }
        let Some(rp) = p.port.ring() else {
            return false;
        };
        let region = rp.region().clone();
        // The kick is the one QEMU has (see `switch_port_peers`).
        let Some(t) = r.open_by.guest() else {
            return false;
        };
        let qemu_kick = lock_slot(t).doorbell();
        let doorbells = qemu_kick
            .unwrap_or_else(|| rp.kick.try_clone())
            .and_then(|k| {
                let irqs = rp
                    .irqs
                    .iter()
                    .map(EventFd::try_clone)
                    .collect::<std::io::Result<Box<[EventFd]>>>()?;
                Ok((k, irqs))
            });
        let (kick, irqs) = match doorbells {
            Ok(d) => d,
            Err(e) => {
                warn!(port = %p.port.name, error = %e, "cannot duplicate a passthrough port's doorbells to adopt its memory");
                return false;
            }
        };
        let full = p.port.name.clone();
        let counters = p.port.counters.clone();
        let vlan = p.port.vlan.clone();
        let pt = r.open_by.take_guest();
        self.remove_vale_port(switch, port);
        let rep = region.adopt_migrated([&full, ""]);
        counters
            .mine()
            .ring_reinits
            .fetch_add(rep.resets(), std::sync::atomic::Ordering::Relaxed);
        if rep.resets() > 0 {
            warn!(port = %full, rings = rep.rings, header_rewritten = rep.header_rewritten, rings_reset = rep.rings_reset, heads_reset = rep.heads_reset, slots_reset = rep.slots_reset, "the memory the guest brought had inconsistent values: reset (counted in ring_reinits)");
        } else {
            info!(port = %full, rings = rep.rings, "the memory the guest runs on checked: nothing to reset");
        }
        match self.attach_adopted_port(switch, port, region, kick, irqs, counters, vlan) {
            Ok(entry) => {
                let s = self.switches.get_mut(switch).expect("attached just now");
                s.ports.insert(port.clone(), entry);
                let p = s.ports.get_mut(port).expect("just filed");
                if let Some(l) = p.port.ring().map(|r| r.link.clone()) {
                    l.set_up(true);
                }
                if let Some(t) = pt {
                    p.ring_mut().expect("a ring port").open_by = OpenBy::Guest(t);
                }
                true
            }
            Err(e) => {
                warn!(port = %full, error = %e, "cannot attach a passthrough port again on the memory its guest brought; the port is removed");
                self.retire_pt(pt);
                false
            }
        }
    }

    /// A QEMU left passthrough server `tag` of `target` (`wanted` false),
    /// or one connected and the server has no memory to hand it (`wanted`
    /// true). The QEMU that left may keep the memory it had, so that memory
    /// is never handed to a QEMU again. A switch port is recreated with a
    /// fresh region at once (keeping its counters and VLANs), as a ring port is for
    /// its next client; a pipe gets a fresh region when a QEMU wants one
    /// and neither end is in use ([`Registry::renew_pipe_if_idle`]).
    pub(super) fn passthrough_left(&mut self, target: &Target, tag: u64, wanted: bool) {
        match target {
            Target::Vale { switch, port } => {
                let Some(p) = self
                    .switches
                    .get_mut(switch)
                    .and_then(|s| s.ports.get_mut(port))
                else {
                    return;
                };
                let Kind::Ring(r) = &mut p.kind else {
                    return; // deleted, and another port of that name now
                };
                if r.open_by.guest().is_none_or(|t| t.tag() != tag) {
                    return; // deleted, or another port of that name now
                }
                let pt = r.open_by.take_guest();
                let migratable = pt.as_ref().is_some_and(|t| t.migratable());
                let vnet = r.vnet.is_some();
                let (g, old) = (r.geometry, p.port.clone());
                self.remove_vale_port(switch, port);
                let counters = Some(old.counters.clone());
                let res = self
                    .add_port(
                        switch,
                        port,
                        NewPort::Ring {
                            geometry: g,
                            persistent: true,
                            counters,
                            vnet,
                            pipes: 0,
                        },
                        old.vlan.clone(),
                    )
                    .and_then(|()| {
                        let p = self
                            .switches
                            .get_mut(switch)
                            .and_then(|s| s.ports.get_mut(port))
                            .expect("just created");
                        vale_peers(p, migratable)
                    });
                match res {
                    Ok(peers) => {
                        let p = self
                            .switches
                            .get_mut(switch)
                            .and_then(|s| s.ports.get_mut(port))
                            .expect("just created");
                        if let Some(t) = pt {
                            t.set_peers(peers);
                            p.ring_mut().expect("a ring port").open_by = OpenBy::Guest(t);
                        }
                    }
                    Err(e) => {
                        warn!(port = %format!("{switch}:{port}"), error = %e, "cannot give a passthrough port fresh memory; the port is removed");
                        let (sw, po) = (switch.clone(), port.clone());
                        if self
                            .switches
                            .get(&sw)
                            .is_some_and(|s| s.ports.contains_key(&po))
                        {
                            self.remove_vale_port(&sw, &po);
                        }
                        self.retire_pt(pt);
                    }
                }
            }
            Target::Pipe { base, id, end } => {
                let key = Target::pipe_key(base, id);
                let Some(p) = self.pipes.get_mut(&key) else {
                    return;
                };
                if p.open_by[end.index()]
                    .guest()
                    .is_none_or(|t| t.tag() != tag)
                {
                    return;
                }
                if !wanted {
                    // The guest that went may keep the memory; the pipe is
                    // renewed when a QEMU next wants it (what the guest
                    // sent stays for the other end until then).
                    p.former = Some(Former::Guest);
                    return;
                }
                self.renew_pipe_if_idle(&key);
            }
            Target::Nic { .. } => {}
        }
    }

    /// Gives a pipe a fresh region if a former owner may keep the current
    /// one and no end is in use (no client has one open, no QEMU is on a
    /// passthrough end): its passthrough servers get the new memory.
    pub(super) fn renew_pipe_if_idle(&mut self, key: &str) {
        let Some(p) = self.pipes.get_mut(key) else {
            return;
        };
        if p.former.is_none() || p.open_by.iter().any(OpenBy::is_client) {
            return;
        }
        // Both servers' slots are held from the check to the replacement,
        // so no QEMU takes the old memory in between.
        let mut slots: Vec<(usize, std::sync::MutexGuard<'_, crate::passthrough::Slot>)> = p
            .open_by
            .iter()
            .enumerate()
            .filter_map(|(e, o)| {
                o.guest().map(|t| {
                    (
                        e,
                        t.slot()
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    )
                })
            })
            .collect();
        if slots.iter().any(|(_, s)| s.in_use()) {
            return;
        }
        let g = p.region.layout().geometry;
        let (region, irq) = match pipe_memory(&p.base, &p.id, g) {
            Ok(m) => m,
            Err(e) => {
                warn!(pipe = %key, error = %e, "cannot give a pipe fresh memory; its passthrough ends refuse guests");
                return;
            }
        };
        p.region = Arc::new(region);
        p.irq = irq;
        p.former = None;
        p.former_uid = None;
        for (e, slot) in slots.iter_mut() {
            match pipe_peers_of(&p.region, &p.irq, *e) {
                Ok(peers) => slot.set_peers(peers),
                Err(er) => {
                    warn!(pipe = %key, error = %er, "cannot hand a passthrough end its fresh memory")
                }
            }
        }
        info!(pipe = %key, "pipe given fresh memory");
    }

    /// `port-add NAME --passthrough PATH`: a persistent switch port or pipe
    /// end whose region a guest gets through QEMU's ivshmem-doorbell; with
    /// `vnet` (switch ports), its frames carry a virtio-net header; with
    /// `migratable` (switch ports without `vnet`, checked by the caller),
    /// its guest may be migrated.
    pub(super) fn passthrough_add(
        &mut self,
        pn: &PortName,
        path: &std::path::Path,
        vnet: bool,
        migratable: bool,
    ) -> Result<(), RegistryError> {
        let tag = self.id();
        let renew = self.renewer(pn.target.clone(), tag);
        let adopt = migratable.then(|| self.adopter(pn.target.clone(), tag));
        let start = |what: &str, peers: Peers| {
            PassthroughServer::start(tag, what, path, peers, renew, adopt).map_err(|source| {
                RegistryError::Passthrough {
                    port: what.to_string(),
                    source,
                }
            })
        };
        match &pn.target {
            Target::Vale { switch, port } => {
                let exists = self
                    .switches
                    .get(switch)
                    .is_some_and(|s| s.ports.contains_key(port));
                if exists {
                    return Err(RegistryError::PassthroughPortExists {
                        port: pn.to_string(),
                    });
                }
                self.add_port(
                    switch,
                    port,
                    NewPort::Ring {
                        geometry: pn.conf.unwrap_or_default(),
                        persistent: true,
                        counters: None,
                        vnet,
                        pipes: 0,
                    },
                    // `port-add` refuses VLANs on passthrough ports.
                    PortVlan::default(),
                )?;
                let p = self
                    .switches
                    .get_mut(switch)
                    .and_then(|s| s.ports.get_mut(port))
                    .expect("just created");
                match vale_peers(p, migratable).and_then(|peers| start(&pn.to_string(), peers)) {
                    Ok(server) => {
                        let r = p.ring_mut().expect("a ring port, just created");
                        r.open_by = OpenBy::Guest(Box::new(server));
                        Ok(())
                    }
                    Err(e) => {
                        let (sw, po) = (switch.clone(), port.clone());
                        self.remove_vale_port(&sw, &po);
                        Err(e)
                    }
                }
            }
            Target::Pipe { base, id, end } => {
                let key = Target::pipe_key(base, id);
                let created = !self.pipes.contains_key(&key);
                if created {
                    let g = pn.conf.unwrap_or_else(Geometry::pipe_default);
                    let g = if *end == PipeEnd::Slave {
                        g.mirrored()
                    } else {
                        g
                    };
                    self.new_pipe(base, id, g, true)?;
                }
                let e = end.index();
                let p = self.pipes.get_mut(&key).expect("exists");
                if let Some(d) = &p.in_port {
                    return Err(RegistryError::PassthroughInPortMemory {
                        end: pn.to_string(),
                        port: d.port.clone(),
                    });
                }
                if !p.open_by[e].is_closed() {
                    return Err(RegistryError::PassthroughEndOpen {
                        end: pn.to_string(),
                    });
                }
                if p.former.is_some() {
                    return Err(RegistryError::PassthroughEndFormer {
                        end: pn.to_string(),
                    });
                }
                match pipe_peers(p, e).and_then(|peers| start(&pn.to_string(), peers)) {
                    Ok(server) => {
                        p.open_by[e] = OpenBy::Guest(Box::new(server));
                        p.persistent = true;
                        Ok(())
                    }
                    Err(er) => {
                        if created {
                            self.pipes.remove(&key);
                        }
                        Err(er)
                    }
                }
            }
            Target::Nic { ifname } => Err(RegistryError::NicNotAPort {
                ifname: ifname.clone(),
            }),
        }
    }
}
