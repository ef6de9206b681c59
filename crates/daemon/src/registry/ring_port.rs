//! Ring ports (netmap's VALE ports): a region of rings a client or a guest
//! opens, created on a switch and handed to a worker.

use std::sync::Arc;

use ringswitch_control::PortVlan;
use ringswitch_ring::{Geometry, Region, RegionLayout};
use ringswitch_switch::{Counters, SwitchPort, MAX_PORTS};
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
    /// The port region's share of the budgets, given back with the entry.
    pub(super) _charge: Charge,
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
    /// entry, for [`Registry::add_port`] to file.
    pub(super) fn attach_ring_port(
        &mut self,
        sw: &str,
        port: &str,
        g: Geometry,
        persistent: bool,
        counters: Option<Arc<Counters>>,
        vlan: PortVlan,
    ) -> Result<PortEntry, RegistryError> {
        let full = if port == DIRECT_APP {
            sw.to_string()
        } else {
            format!("{sw}:{port}")
        };
        let layout = RegionLayout::new(g, 1)?;
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
        let at = self.wanted_index(&full);
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
            self.keep_index(&full, sp.index);
        }
        info!(port = %full, index = sp.index, worker = assigned.first().map(|a| a.1), "port created");
        Ok(PortEntry {
            port: sp,
            assigned,
            kind: Kind::Ring(RingEntry {
                geometry: g,
                persistent,
                open_by: OpenBy::Closed,
                _charge: charge,
            }),
        })
    }
}
