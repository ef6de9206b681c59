//! Ring ports (netmap's VALE ports): a region of rings a client or a guest
//! opens, created on a switch and handed to a worker.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use ringswitch_control::PortVlan;
use ringswitch_frame::SharedQueue;
use ringswitch_ring::{EventFd, Geometry, Region, RegionLayout, VnetRingQueue, VNET_HDR_LEN};
use ringswitch_switch::{Counters, Link, QueuePort, SwitchPort, MAX_PORTS};
use tracing::info;

use super::attach::Attached;
use super::budget::Charge;
use super::open_by::OpenBy;
use super::{internal, Kind, PortEntry, Registry, RegistryError, DIRECT_APP};
use crate::worker::Source;

/// What only a ring port has.
pub(super) struct RingEntry {
    pub(super) geometry: Geometry,
    /// Made by `port-add` (kept when its clients go), or on demand by
    /// `open` (removed with its client).
    pub(super) persistent: bool,
    pub(super) open_by: OpenBy,
    /// The uid of the client that has it open: the only user (besides
    /// root) handed an end of a pipe in its memory.
    pub(super) owner_uid: Option<u32>,
    /// The port region's share of the budgets, given back with the entry.
    pub(super) _charge: Charge,
    /// A passthrough port whose frames carry a virtio-net header: what the
    /// guest gets, kept here since the switch sees queues, not rings.
    pub(super) vnet: Option<VnetParts>,
}

/// The region and doorbells of a ring port the switch sees as queues
/// (`port-add --passthrough PATH --vnet-hdr`).
pub(super) struct VnetParts {
    pub(super) region: Arc<Region>,
    /// The guest's doorbell target, every ring pair's (watched by the
    /// worker serving each queue).
    pub(super) kick: EventFd,
    /// One interrupt per ring pair.
    pub(super) irqs: Vec<EventFd>,
    /// Up while a QEMU has the port.
    pub(super) link: Link,
}

impl PortEntry {
    pub(super) fn ring_mut(&mut self) -> Option<&mut RingEntry> {
        match &mut self.kind {
            Kind::Ring(r) => Some(r),
            _ => None,
        }
    }
}

impl Registry {
    /// Creates ring port `port` on switch `sw` in `vlan` and returns its
    /// entry, for [`Registry::add_port`] to file. With `vnet`, its frames
    /// carry a virtio-net header and the switch sees each ring pair as a
    /// queue ([`VnetRingQueue`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attach_ring_port(
        &mut self,
        sw: &str,
        port: &str,
        (g, pipes): (Geometry, u32),
        persistent: bool,
        counters: Option<Arc<Counters>>,
        vnet: bool,
        vlan: PortVlan,
    ) -> Result<PortEntry, RegistryError> {
        let full = if port == DIRECT_APP {
            sw.to_string()
        } else {
            format!("{sw}:{port}")
        };
        let layout = if pipes > 0 && !vnet {
            RegionLayout::with_pipes(g, pipes)?
        } else {
            RegionLayout::new(g, 1)?
        };
        // Held by the daemon: the memfd, the kick eventfd, one interrupt
        // eventfd per ring pair.
        let fds = 2 + u64::from(g.tx_rings.max(g.rx_rings));
        let charge = self.budget.charge(
            self.payer(persistent),
            &format!("port {full}"),
            layout.size as u64,
            fds,
        )?;
        let entry = self.ensure_switch(sw, false)?;
        if entry.ports.len() >= MAX_PORTS {
            return Err(RegistryError::SwitchFull {
                switch: sw.to_string(),
                max: MAX_PORTS,
            });
        }
        let region = Arc::new(
            // netmap's ni_name of a VALE port is its full name.
            Region::create(layout, [&full, ""])
                .map_err(|e| internal("creating the port's memory", e))?,
        );
        let switch = entry.switch.clone();
        let at = self.wanted_number(&full);
        if vnet {
            return self
                .attach_vnet_port(full, region, switch, at, persistent, counters, vlan, charge);
        }
        let mut attached = Attached::new(&self.workers, switch, at, |idx| {
            let p = SwitchPort::new(full.clone(), idx, region)?.with_vlan(vlan);
            // Down until a client opens it (or a QEMU gets its memory):
            // frames for it are dropped, not kept for whoever comes.
            if let Some(r) = p.ring() {
                r.link.set_up(false);
            }
            Ok(match counters {
                Some(c) => p.with_counters(c),
                None => p,
            })
        })?;
        attached.assign(&[Source::Rings], &self.next_id)?;
        let (sp, assigned) = attached.commit();
        if persistent {
            self.keep_number(&full, &sp);
        }
        info!(port = %full, index = sp.index, worker = assigned.first().map(|a| a.1), "port created");
        Ok(PortEntry {
            port: sp,
            assigned,
            kind: Kind::Ring(RingEntry {
                geometry: g,
                persistent,
                open_by: OpenBy::Closed,
                owner_uid: None,
                _charge: charge,
                vnet: None,
            }),
        })
    }

    /// Ring port `port` made again on memory it already has: a migratable
    /// passthrough port adopting the region QEMU migrated into it
    /// (`registry/passthrough.rs`), its contents checked first
    /// ([`Region::adopt_migrated`]). The switch side attaches afresh and
    /// starts from the region's CSB; `kick` and `irqs` are the doorbells
    /// QEMU holds. Up at once: a guest runs on it. The caller files the
    /// entry, as [`Registry::add_port`] does.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attach_adopted_port(
        &mut self,
        sw: &str,
        port: &str,
        region: Arc<Region>,
        kick: EventFd,
        irqs: Box<[EventFd]>,
        counters: Arc<Counters>,
        vlan: PortVlan,
    ) -> Result<PortEntry, RegistryError> {
        let full = format!("{sw}:{port}");
        let layout = *region.layout();
        let g = layout.geometry;
        let fds = 2 + u64::from(g.tx_rings.max(g.rx_rings));
        let charge = self.budget.charge(
            self.payer(true),
            &format!("port {full}"),
            layout.size as u64,
            fds,
        )?;
        let entry = self.ensure_switch(sw, false)?;
        let switch = entry.switch.clone();
        let at = self.wanted_number(&full);
        let mut attached = Attached::new(&self.workers, switch, at, |idx| {
            let mut p = SwitchPort::new(full.clone(), idx, region)?
                .with_vlan(vlan)
                .with_counters(counters);
            if let ringswitch_switch::Backend::Ring(r) = &mut p.backend {
                r.kick = kick;
                r.irqs = irqs;
            }
            Ok(p)
        })?;
        attached.assign(&[Source::Rings], &self.next_id)?;
        let (sp, assigned) = attached.commit();
        self.keep_number(&full, &sp);
        info!(port = %full, index = sp.index, worker = assigned.first().map(|a| a.1), "port attached again on the memory its guest brought");
        Ok(PortEntry {
            port: sp,
            assigned,
            kind: Kind::Ring(RingEntry {
                geometry: g,
                persistent: true,
                open_by: OpenBy::Closed,
                owner_uid: None,
                _charge: charge,
                vnet: None,
            }),
        })
    }

    /// The rest of [`Registry::attach_ring_port`] for a port whose frames
    /// carry a virtio-net header: one [`VnetRingQueue`] per ring pair.
    #[allow(clippy::too_many_arguments)]
    fn attach_vnet_port(
        &mut self,
        full: String,
        region: Arc<Region>,
        switch: Arc<ringswitch_switch::Switch>,
        at: Option<u32>,
        persistent: bool,
        counters: Option<Arc<Counters>>,
        vlan: PortVlan,
        charge: Charge,
    ) -> Result<PortEntry, RegistryError> {
        let g = region.layout().geometry;
        region.set_vnet_hdr_len(VNET_HDR_LEN as u32);
        let fd = |what: &'static str, r: std::io::Result<EventFd>| r.map_err(|e| internal(what, e));
        let kick = fd("creating the port's doorbell", EventFd::new())?;
        let pairs = g.tx_rings.min(g.rx_rings);
        let irqs = (0..g.tx_rings.max(g.rx_rings))
            .map(|_| fd("creating the port's interrupts", EventFd::new()))
            .collect::<Result<Vec<_>, _>>()?;
        // Down until a QEMU gets the memory.
        let up = Arc::new(AtomicBool::new(false));
        let mut queues: Vec<SharedQueue> = Vec::new();
        for (i, irq) in (0..pairs).zip(&irqs) {
            let q = VnetRingQueue::new(
                Arc::clone(&region),
                i,
                fd("duplicating the doorbell", kick.try_clone())?,
                fd("duplicating an interrupt", irq.try_clone())?,
                Arc::clone(&up),
            );
            queues.push(Arc::new(Mutex::new(q)));
        }
        let mut attached = Attached::new(&self.workers, switch, at, |idx| {
            let p =
                SwitchPort::new_queues(full.clone(), idx, QueuePort::new(queues)?).with_vlan(vlan);
            Ok(match counters {
                Some(c) => p.with_counters(c),
                None => p,
            })
        })?;
        let sources: Vec<Source> = (0..attached.port().sources()).map(Source::Queue).collect();
        attached.assign(&sources, &self.next_id)?;
        let (sp, assigned) = attached.commit();
        if persistent {
            self.keep_number(&full, &sp);
        }
        info!(port = %full, index = sp.index, "port created, its frames with virtio-net headers");
        Ok(PortEntry {
            port: sp,
            assigned,
            kind: Kind::Ring(RingEntry {
                geometry: g,
                persistent,
                open_by: OpenBy::Closed,
                owner_uid: None,
                _charge: charge,
                vnet: Some(VnetParts {
                    region,
                    kick,
                    irqs,
                    link: Link::from_flag(up),
                }),
            }),
        })
    }
}
