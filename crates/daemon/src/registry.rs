//! The control plane's state: switches, their ports, pipes, and which
//! connection has which port open.
//!
//! This file holds the tables and what ties them together; each concern
//! has its module:
//!
//! - `switches`: switches made on demand or by `switch-add`;
//! - `ring_port`, `pipe`, `vm_port`, `iface`, `passthrough`: one kind of
//!   port each (ring ports, pipes, VM ports, interface ports, ring ports
//!   and pipe ends a guest opens);
//! - `attach`: a port on a switch and in the workers' hands, all or nothing;
//! - `open_by`, `open`: who has a ring port or pipe end open, and a
//!   client's handles (`open`, `close`);
//! - `port_admin`: `port-add` and `port-del` for every kind;
//! - `listing`: lists and statistics;
//! - `openflow`: a switch's flow tables and OpenFlow settings;
//! - `retire`: threads stopped under the lock and joined after it;
//! - `budget`: shared memory and descriptors charged per connection, uid
//!   and in all;
//! - `config`: the saved configuration;
//! - `error`: every refusal, and its protocol error code.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringswitch_control::proto::VhostUserSpec;
use ringswitch_control::{PortName, PortVlan};
use ringswitch_ring::Geometry;
use ringswitch_switch::{Counters, Switch, SwitchPort};
use tracing::info;

mod attach;
pub mod budget;
mod config;
mod error;
mod iface;
mod listing;
mod open;
mod open_by;
mod openflow;
mod passthrough;
mod pipe;
mod port_admin;
mod retire;
mod ring_port;
mod switches;
mod vm_port;
mod xdp_state;

use crate::worker::Worker;
use attach::take_off;
use budget::{Budget, Limits, Who};
pub use config::{load_config, parse_config, parse_saved};
pub use error::RegistryError;
use iface::{IfaceEntry, DIRECT_APP};
use open::Handle;
pub use open::Opened;
use pipe::PipeEntry;
pub use retire::Retired;
use ring_port::RingEntry;
use vm_port::VmEntry;
pub use xdp_state::clean_stale_attachments;

/// Most switches per daemon.
pub const MAX_SWITCHES: usize = 64;
/// Most pipes per daemon.
pub const MAX_PIPES: usize = 1024;

/// Identifies a client connection.
pub type ConnId = u64;

/// Daemon-wide tuning.
#[derive(Clone, Copy, Debug)]
pub struct SwitchConfig {
    /// Batch size for new switches.
    pub batch: u32,
    /// MAC ageing time.
    pub mac_age_s: u32,
}

struct PortEntry {
    /// The port in its switch; its VLANs (`port.vlan`) are the ones it was
    /// added with, and every later incarnation of it is built with them.
    port: Arc<SwitchPort>,
    /// (assignment id, worker) per source: one for a ring port, one per
    /// queue for an interface port, one per queue pair for a VM port.
    assigned: Vec<(u64, usize)>,
    kind: Kind,
}

/// What a switch port is, with what only that kind of port has.
enum Kind {
    /// A ring port (netmap's VALE port): a region a client or a guest opens.
    Ring(RingEntry),
    // The kinds below are boxed: most ports are ring ports, and the
    // registry's map holds every entry inline (per-port memory).
    /// A VM port.
    Vm(Box<VmEntry>),
    /// A NIC or host port.
    Iface(Box<IfaceEntry>),
}

struct SwitchEntry {
    switch: Arc<Switch>,
    ports: BTreeMap<String, PortEntry>,
    persistent: bool,
    /// The hidden two-port switch behind an application's `netmap:IF`: a
    /// ring port (`iface::DIRECT_APP`) wired to the NIC.
    direct: bool,
    /// Its flow tables and OpenFlow connections, when it runs OpenFlow.
    openflow: Option<openflow::OfEntry>,
}

/// A port to create on a switch: what differs between the kinds
/// [`Registry::add_port`] makes.
pub(super) enum NewPort<'a> {
    /// A ring port of `geometry`, down until it is opened; `persistent`
    /// when made by `port-add`; with the `counters` of the port it replaces
    /// (a persistent port given fresh memory), or new ones.
    Ring {
        geometry: Geometry,
        persistent: bool,
        counters: Option<Arc<Counters>>,
        /// A passthrough port whose frames carry a virtio-net header: the
        /// switch sees its ring pairs as queues (`VnetRingQueue`).
        vnet: bool,
        /// Room for this many pipes in the port's memory (netmap's lb
        /// opens its output pipes there); 0 for a passthrough port.
        pipes: u32,
    },
    /// A VM port (`port-add` with a vhost-user socket).
    Vm(&'a VhostUserSpec),
}

/// The registry. One lock around all of it: only the control plane takes it.
pub struct Registry {
    cfg: SwitchConfig,
    switches: BTreeMap<String, SwitchEntry>,
    pipes: BTreeMap<String, PipeEntry>,
    handles: BTreeMap<u64, (ConnId, Handle)>,
    next_id: AtomicU64,
    workers: Vec<Worker>,
    /// Where interfaces with an XDP program attached are recorded, so a
    /// restarted daemon can remove a crashed one's programs.
    state: Option<std::path::PathBuf>,
    /// Where the configuration is saved (`serve --config`).
    config: Option<std::path::PathBuf>,
    /// Threads stopped under the lock, to be joined after it (see
    /// [`Registry::take_retired`]).
    retired: Retired,
    /// The lock this registry lives behind, for passthrough servers (see
    /// [`Registry::set_self`]).
    me: std::sync::Weak<std::sync::Mutex<Registry>>,
    /// Shared memory and descriptors held, per connection, uid and in all.
    budget: Budget,
    /// Who the request being served comes from (charged for what it makes).
    client: Who,
    /// The OpenFlow port number each persistent port had, by full name: a
    /// port made again (a restart replaying `--config`, a ring port given
    /// fresh memory) comes back at it.
    numbers: BTreeMap<String, u32>,
}

fn internal(what: &'static str, e: impl Into<error::Cause>) -> RegistryError {
    RegistryError::internal(what, e)
}

impl Registry {
    /// A registry whose switch ports are served by `workers`.
    pub fn new(cfg: SwitchConfig, workers: Vec<Worker>) -> Registry {
        Registry {
            cfg,
            switches: BTreeMap::new(),
            pipes: BTreeMap::new(),
            handles: BTreeMap::new(),
            next_id: AtomicU64::new(1),
            workers,
            state: None,
            config: None,
            retired: Retired::default(),
            me: std::sync::Weak::new(),
            budget: Budget::default(),
            client: Who::DAEMON,
            numbers: BTreeMap::new(),
        }
    }

    /// The OpenFlow port number a port named `full` had, to come back at.
    fn wanted_number(&self, full: &str) -> Option<u32> {
        self.numbers.get(full).copied()
    }

    /// Remembers the number of persistent port `p` (named `full`, on its
    /// switch by that name).
    fn keep_number(&mut self, full: &str, p: &SwitchPort) {
        let sw = full.split_once(':').map_or(full, |(s, _)| s);
        if let Some(e) = self.switches.get(sw) {
            let n = e.switch.number_of(p.index);
            self.numbers.insert(full.to_string(), n);
        }
    }

    /// Sets the budgets' limits.
    pub fn set_limits(&mut self, limits: Limits) {
        self.budget.set_limits(limits);
    }

    /// The budgets (for statistics and tests).
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Charges what the following requests create to `who` (until the next
    /// call); [`Who::DAEMON`] for the daemon's own work.
    pub fn set_client(&mut self, who: Who) {
        self.client = who;
    }

    /// Who pays for a new object: the client asking, or the daemon for a
    /// persistent one (it outlives its clients).
    fn payer(&self, persistent: bool) -> Who {
        if persistent {
            Who::DAEMON
        } else {
            self.client
        }
    }

    /// Records attached interfaces in `path` (see
    /// [`clean_stale_attachments`]).
    pub fn set_state_file(&mut self, path: std::path::PathBuf) {
        self.state = Some(path);
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Workers (for statistics).
    pub fn workers(&self) -> &[Worker] {
        &self.workers
    }

    fn parse(name: &str) -> Result<PortName, RegistryError> {
        Ok(name.parse::<PortName>()?)
    }

    fn remove_vale_port(&mut self, sw: &str, port: &str) {
        let Some(s) = self.switches.get_mut(sw) else {
            return;
        };
        let mut released = None;
        let mut threads = (None, None);
        if let Some(p) = s.ports.remove(port) {
            take_off(&self.workers, &s.switch, p.port.index, &p.assigned);
            info!(port = %p.port.name, "port removed");
            // A VM port's protocol thread and a passthrough port's server
            // are told to stop here and joined after the lock is released.
            match p.kind {
                Kind::Ring(mut r) => threads.1 = r.open_by.take_guest(),
                Kind::Vm(vm) => threads.0 = Some(vm),
                Kind::Iface(i) => released = Some((p.port, i)),
            }
        }
        if s.ports.is_empty() && !s.persistent {
            self.switches.remove(sw);
            info!(switch = sw, "switch removed with its last port");
        }
        if let Some(vm) = threads.0 {
            self.retire_vm(vm);
        }
        self.retire_pt(threads.1);
        if let Some((port, i)) = released {
            // The interface goes back to the kernel when the last reference
            // to its queues goes: the workers drop theirs on their next
            // look at the assignment list.
            iface::release(port, &i.info);
            self.forget_attachment(&i.info.ifname);
        }
    }

    /// Creates port `port` on switch `sw` in `vlan`, making the switch on
    /// demand: the one path of every ring and VM port. A port that fails is
    /// left nowhere, and neither is an on-demand switch made for it.
    fn add_port(
        &mut self,
        sw: &str,
        port: &str,
        new: NewPort<'_>,
        vlan: PortVlan,
    ) -> Result<(), RegistryError> {
        let res = match new {
            NewPort::Ring {
                geometry,
                persistent,
                counters,
                vnet,
                pipes,
            } => {
                let shape = (geometry, pipes);
                self.attach_ring_port(sw, port, shape, persistent, counters, vnet, vlan)
            }
            NewPort::Vm(spec) => self.attach_vm_port(sw, port, spec, vlan),
        };
        self.drop_failed_switch(sw, res.is_err());
        let entry = res?;
        let s = self.switches.get_mut(sw).expect("exists");
        s.ports.insert(port.to_string(), entry);
        Ok(())
    }

    /// The entry of `port` on `switch`, named `pn`.
    fn port_entry(
        &self,
        pn: &PortName,
        switch: &str,
        port: &str,
    ) -> Result<&PortEntry, RegistryError> {
        self.switches
            .get(switch)
            .and_then(|s| s.ports.get(port))
            .ok_or_else(|| RegistryError::NoPort {
                port: pn.to_string(),
            })
    }
}

/// `add` of something that exists: an on-demand object becomes persistent;
/// a persistent one is an `exists` error naming `what`.
fn make_persistent(
    persistent: &mut bool,
    exists: impl FnOnce() -> RegistryError,
) -> Result<(), RegistryError> {
    if *persistent {
        return Err(exists());
    }
    *persistent = true;
    Ok(())
}

fn no_switch(sw: &str) -> RegistryError {
    RegistryError::NoSwitch {
        switch: sw.to_string(),
    }
}
