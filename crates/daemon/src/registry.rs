//! The control plane's state: switches, their ports, pipes, and which
//! connection has which port open.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringswitch_control::proto::*;
use ringswitch_control::{name, PipeEnd, PortName, Target};
use ringswitch_ring::{EventFd, Geometry, Region, RegionLayout};
use ringswitch_switch::{Counters, LearningBridge, QueuePort, Switch, SwitchPort, MAX_PORTS};
use ringswitch_vhost::socket::SharedNet;
use ringswitch_vhost::{NetConfig, VhostUserNet};
use tracing::{info, warn};

use crate::passthrough::{PassthroughServer, Peers, Renew};
use crate::vhost_user::VhostUserThread;

mod attach;
pub mod budget;
mod config;
mod error;
mod iface;
use crate::worker::{Source, Worker};
use attach::{take_off, Attached};
use budget::{Budget, Charge, Limits, Who};
use config::IfaceRequest;
pub use config::{load_config, parse_config};
use error::Openable;
pub use error::RegistryError;
pub use iface::clean_stale_attachments;
use iface::DIRECT_APP;

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

struct RingEntry {
    geometry: Geometry,
    /// Made by `port-add` (kept when its clients go), or on demand by
    /// `open` (removed with its client).
    persistent: bool,
    open_by: OpenBy,
    /// The port region's share of the budgets, given back with the entry.
    _charge: Charge,
}

/// Who has a ring port or a pipe end open.
enum OpenBy {
    /// No one.
    Closed,
    /// A client, through a handle of its connection.
    Client(ConnId),
    /// A guest, through the ivshmem server that hands its QEMU the memory
    /// (a passthrough port or pipe end: persistent, never opened by a
    /// client).
    Guest(Box<PassthroughServer>),
}

impl OpenBy {
    fn is_closed(&self) -> bool {
        matches!(self, OpenBy::Closed)
    }

    fn is_client(&self) -> bool {
        matches!(self, OpenBy::Client(_))
    }

    /// The ivshmem server of a passthrough port or pipe end.
    fn guest(&self) -> Option<&PassthroughServer> {
        match self {
            OpenBy::Guest(t) => Some(t),
            _ => None,
        }
    }

    /// Open by a client, or by a guest whose QEMU is connected.
    fn in_use(&self) -> bool {
        match self {
            OpenBy::Closed => false,
            OpenBy::Client(_) => true,
            OpenBy::Guest(t) => t.connected(),
        }
    }

    /// Refuses to open `name`, a `what`, if it is open already.
    fn check_free(&self, what: Openable, name: &PortName) -> Result<(), RegistryError> {
        match self {
            OpenBy::Closed => Ok(()),
            OpenBy::Client(_) => Err(RegistryError::AlreadyOpen {
                what,
                name: name.to_string(),
            }),
            OpenBy::Guest(t) => Err(RegistryError::PassedThrough {
                what,
                name: name.to_string(),
                socket: t.path().to_path_buf(),
            }),
        }
    }

    /// Takes the ivshmem server of a passthrough port or pipe end, which is
    /// then closed.
    fn take_guest(&mut self) -> Option<Box<PassthroughServer>> {
        match std::mem::replace(self, OpenBy::Closed) {
            OpenBy::Guest(t) => Some(t),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// Who had a pipe end open and may still map the pipe's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Former {
    /// A client connection.
    Client(ConnId),
    /// A guest (its QEMU went).
    Guest,
}

impl PortEntry {
    /// Its counters for `stats`, with what only its kind counts.
    fn stats(&self) -> PortStats {
        let mut s = self.port.stats();
        if let Kind::Vm(vm) = &self.kind {
            s.vm_frontend_errors = vm.thread.frontend_errors();
        }
        s
    }

    fn ring_mut(&mut self) -> Option<&mut RingEntry> {
        match &mut self.kind {
            Kind::Ring(r) => Some(r),
            _ => None,
        }
    }
}

struct IfaceEntry {
    info: IfaceInfo,
    kind: PortKind,
    /// What it was attached with.
    request: IfaceRequest,
}

struct VmEntry {
    spec: VhostUserSpec,
    thread: VhostUserThread,
}

struct SwitchEntry {
    switch: Arc<Switch>,
    ports: BTreeMap<String, PortEntry>,
    persistent: bool,
    /// The hidden two-port switch behind an application's `netmap:IF`: a
    /// ring port (`iface::DIRECT_APP`) wired to the NIC.
    direct: bool,
}

struct PipeEntry {
    region: Arc<Region>,
    /// Per end, one interrupt eventfd per ring pair.
    irq: [Vec<EventFd>; 2],
    persistent: bool,
    /// Per end.
    open_by: [OpenBy; 2],
    base: String,
    id: String,
    /// Who closed an end while the other end stayed open: it may keep the
    /// memory mapped, so no other client gets an end of this region; the
    /// pipe gets a fresh one once both ends are closed.
    former: Option<Former>,
    /// Per end, the uid of the client that has it open.
    owner_uid: [Option<u32>; 2],
    /// Of a pipe whose other end is a guest's (whose memory cannot be
    /// replaced while its QEMU stays): the uid of the last client that
    /// closed this pipe's host end. It may keep the memory mapped, so the
    /// end is handed only to that same user until the pipe has fresh memory
    /// (a user may take turns with itself; another user would be read).
    former_uid: Option<u32>,
    /// The region's share of the budgets, given back with the entry.
    _charge: Charge,
}

/// What an open handle refers to.
#[derive(Clone, Debug)]
enum Handle {
    Vale { switch: String, port: String },
    Pipe { key: String, end: usize },
}

/// Threads the registry stopped while it held its lock: their stop was
/// requested at once (which never blocks), and they are joined when this is
/// dropped, which the caller does after unlocking, so the registry lock is
/// never held across a join (a thread stuck on a peer would otherwise hang
/// every request).
#[must_use = "dropping joins the threads: do it after unlocking the registry"]
#[derive(Default)]
pub struct Retired(Vec<Box<dyn Send>>);

impl Retired {
    /// Nothing to join.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
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
}

fn internal(what: &'static str, e: impl Into<error::Cause>) -> RegistryError {
    RegistryError::internal(what, e)
}

/// An open reply with its descriptors.
pub type Opened = (OpenReply, Vec<OwnedFd>);

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
        }
    }

    /// The threads of ports and pipes removed since the last call, already
    /// told to stop. Drop the result after unlocking the registry: that
    /// joins them.
    pub fn take_retired(&mut self) -> Retired {
        std::mem::take(&mut self.retired)
    }

    fn retire_vm(&mut self, vm: Box<VmEntry>) {
        vm.thread.request_stop();
        self.retired.0.push(vm);
    }

    fn retire_pt(&mut self, pt: Option<Box<PassthroughServer>>) {
        if let Some(pt) = pt {
            pt.request_stop();
            self.retired.0.push(pt);
        }
    }

    /// Tells every protocol and passthrough thread to stop and hands them
    /// over for joining (the daemon is stopping): afterwards no thread but
    /// the workers runs for this registry, and none can keep it alive.
    pub fn stop_threads(&mut self) -> Retired {
        let mut vms = Vec::new();
        let mut pts = Vec::new();
        for s in self.switches.values_mut() {
            // VM ports leave the registry with their threads (it is going
            // too: nothing serves requests any more).
            let names: Vec<String> = s
                .ports
                .iter()
                .filter(|(_, p)| matches!(p.kind, Kind::Vm(_)))
                .map(|(n, _)| n.clone())
                .collect();
            for n in names {
                if let Some(Kind::Vm(vm)) = s.ports.remove(&n).map(|p| p.kind) {
                    vms.push(vm);
                }
            }
            for p in s.ports.values_mut() {
                pts.push(p.ring_mut().and_then(|r| r.open_by.take_guest()));
            }
        }
        for p in self.pipes.values_mut() {
            for end in p.open_by.iter_mut() {
                pts.push(end.take_guest());
            }
        }
        for vm in vms {
            self.retire_vm(vm);
        }
        for pt in pts {
            self.retire_pt(pt);
        }
        self.take_retired()
    }

    /// Removes a pipe, retiring its passthrough servers.
    fn remove_pipe(&mut self, key: &str) {
        if let Some(mut p) = self.pipes.remove(key) {
            for end in p.open_by.iter_mut() {
                let pt = end.take_guest();
                self.retire_pt(pt);
            }
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

    fn ensure_switch(
        &mut self,
        sw: &str,
        persistent: bool,
    ) -> Result<&mut SwitchEntry, RegistryError> {
        if !self.switches.contains_key(sw) {
            if self.switches.len() >= MAX_SWITCHES {
                return Err(RegistryError::TooManySwitches {
                    switch: sw.to_string(),
                    max: MAX_SWITCHES,
                });
            }
            let fwd = Box::new(LearningBridge::new(self.cfg.mac_age_s));
            self.switches.insert(
                sw.to_string(),
                SwitchEntry {
                    switch: Arc::new(Switch::new(sw, fwd, self.cfg.batch)),
                    ports: BTreeMap::new(),
                    persistent,
                    direct: false,
                },
            );
            info!(switch = sw, "switch created");
        }
        Ok(self.switches.get_mut(sw).expect("just inserted"))
    }

    /// `switch-add`.
    pub fn switch_add(&mut self, sw: &str) -> Result<(), RegistryError> {
        name::check_switch_name(sw)?;
        if let Some(s) = self.switches.get_mut(sw) {
            return make_persistent(&mut s.persistent, || RegistryError::SwitchExists {
                switch: sw.to_string(),
            });
        }
        self.ensure_switch(sw, true).map(|_| ())
    }

    /// `switch-del`.
    pub fn switch_del(&mut self, sw: &str) -> Result<(), RegistryError> {
        let s = self.switches.get(sw).ok_or_else(|| no_switch(sw))?;
        if !s.ports.is_empty() {
            return Err(RegistryError::SwitchHasPorts {
                switch: sw.to_string(),
                ports: s.ports.len(),
            });
        }
        self.switches.remove(sw);
        info!(switch = sw, "switch deleted");
        Ok(())
    }

    /// `switch-list`.
    pub fn switch_list(&self) -> Vec<SwitchInfo> {
        self.switches
            .iter()
            .map(|(n, s)| SwitchInfo {
                name: n.clone(),
                ports: s.ports.len() as u32,
                macs: s.switch.mac_entries().len() as u32,
            })
            .collect()
    }

    fn new_vale_port(
        &mut self,
        sw: &str,
        port: &str,
        g: Geometry,
        persistent: bool,
        counters: Option<Arc<Counters>>,
    ) -> Result<(), RegistryError> {
        let res = self.attach_new_port(sw, port, g, persistent, counters);
        self.drop_failed_switch(sw, res.is_err());
        res
    }

    /// Does not leave an on-demand switch behind for a port that failed.
    fn drop_failed_switch(&mut self, sw: &str, failed: bool) {
        if failed
            && self
                .switches
                .get(sw)
                .is_some_and(|s| s.ports.is_empty() && !s.persistent)
        {
            self.switches.remove(sw);
        }
    }

    fn attach_new_port(
        &mut self,
        sw: &str,
        port: &str,
        g: Geometry,
        persistent: bool,
        counters: Option<Arc<Counters>>,
    ) -> Result<(), RegistryError> {
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
        let mut attached = Attached::new(&self.workers, switch, |idx| {
            let p = SwitchPort::new(full.clone(), idx, region)?;
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
        info!(port = %full, index = sp.index, worker = assigned.first().map(|a| a.1), "port created");
        let entry = self.switches.get_mut(sw).expect("exists");
        entry.ports.insert(
            port.to_string(),
            PortEntry {
                port: sp,
                assigned,
                kind: Kind::Ring(RingEntry {
                    geometry: g,
                    persistent,
                    open_by: OpenBy::Closed,
                    _charge: charge,
                }),
            },
        );
        Ok(())
    }

    /// `port-add` of a VM port: a vhost-user virtio-net device on a switch.
    fn new_vm_port(
        &mut self,
        sw: &str,
        port: &str,
        spec: &VhostUserSpec,
    ) -> Result<(), RegistryError> {
        let res = self.attach_vm_port(sw, port, spec);
        self.drop_failed_switch(sw, res.is_err());
        res
    }

    fn attach_vm_port(
        &mut self,
        sw: &str,
        port: &str,
        spec: &VhostUserSpec,
    ) -> Result<(), RegistryError> {
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
        let pairs = crate::vhost_user::queues_of(&dev);
        let mut attached = Attached::new(&self.workers, switch, |idx| {
            Ok(SwitchPort::new_queues(
                full.clone(),
                idx,
                QueuePort::new(pairs)?,
            ))
        })?;
        let sources: Vec<Source> = (0..attached.port().sources()).map(Source::Queue).collect();
        attached.assign(&sources, &self.next_id)?;
        let thread = VhostUserThread::start(
            attached.port().clone(),
            dev,
            std::path::Path::new(&spec.path),
            spec.client,
        )?;
        let (sp, assigned) = attached.commit();
        info!(port = %full, index = sp.index, path = %spec.path, client = spec.client, queues = spec.queues, "VM port created");
        let entry = self.switches.get_mut(sw).expect("exists");
        entry.ports.insert(
            port.to_string(),
            PortEntry {
                port: sp,
                assigned,
                kind: Kind::Vm(Box::new(VmEntry {
                    spec: spec.clone(),
                    thread,
                })),
            },
        );
        Ok(())
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

    fn new_pipe(
        &mut self,
        base: &str,
        id: &str,
        g: Geometry,
        persistent: bool,
    ) -> Result<(), RegistryError> {
        if self.pipes.len() >= MAX_PIPES {
            return Err(RegistryError::TooManyPipes { max: MAX_PIPES });
        }
        let n0 = format!("{base}{{{id}");
        let layout = RegionLayout::new(g, 2)?;
        // Held by the daemon: the memfd and one interrupt eventfd per ring
        // pair and end.
        let fds = 1 + 2 * u64::from(g.tx_rings.max(g.rx_rings));
        let charge = self.budget.charge(
            self.payer(persistent),
            &format!("pipe {n0}"),
            layout.size as u64,
            fds,
        )?;
        let (region, irq) = pipe_memory(base, id, g)?;
        self.pipes.insert(
            Target::pipe_key(base, id),
            PipeEntry {
                region: Arc::new(region),
                irq,
                persistent,
                open_by: [OpenBy::Closed, OpenBy::Closed],
                base: base.to_string(),
                id: id.to_string(),
                former: None,
                owner_uid: [None; 2],
                former_uid: None,
                _charge: charge,
            },
        );
        info!(pipe = %n0, "pipe created");
        Ok(())
    }

    /// `port-add`: a persistent port, with `vm` a VM port, with `pt` a
    /// passthrough port.
    pub fn port_add(
        &mut self,
        name: &str,
        vm: Option<&VhostUserSpec>,
        pt: Option<&str>,
    ) -> Result<(), RegistryError> {
        let pn = Self::parse(name)?;
        if let Some(path) = pt {
            if vm.is_some() {
                return Err(RegistryError::VmAndPassthrough {
                    port: pn.to_string(),
                });
            }
            return self.passthrough_add(&pn, std::path::Path::new(path));
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
            return self.new_vm_port(switch, port, spec);
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
                            make_persistent(&mut r.persistent, || RegistryError::PortExists {
                                port: pn.to_string(),
                            })
                        }
                    };
                }
                self.new_vale_port(switch, port, g, true, None)
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
                };
                match &p.kind {
                    Kind::Ring(r) => {
                        info.persistent = r.persistent;
                        info.open = r.open_by.in_use();
                        info.geometry = Some(r.geometry);
                        info.passthrough = r.open_by.guest().map(pt_info);
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
                let g = p.region.layout().geometry;
                for end in 0..2 {
                    out.push(PortInfo {
                        name: format!("{}{}{}", p.base, if end == 0 { '{' } else { '}' }, p.id),
                        kind: PortKind::Pipe,
                        persistent: p.persistent,
                        open: p.open_by[end].in_use(),
                        geometry: Some(if end == 0 { g } else { g.mirrored() }),
                        worker: None,
                        vhost_user: None,
                        iface: None,
                        passthrough: p.open_by[end].guest().map(pt_info),
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

    /// `macs`.
    pub fn macs(&self, sw: &str) -> Result<Vec<MacEntry>, RegistryError> {
        let s = self.switches.get(sw).ok_or_else(|| no_switch(sw))?;
        let mut v: Vec<MacEntry> = s
            .switch
            .mac_entries()
            .into_iter()
            .map(|(m, port, age_s)| MacEntry {
                mac: format!(
                    "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    m[0], m[1], m[2], m[3], m[4], m[5]
                ),
                port,
                age_s,
            })
            .collect();
        v.sort_by(|a, b| a.mac.cmp(&b.mac));
        Ok(v)
    }

    /// `open`: creates what the name asks for if needed, marks it open by
    /// `conn`, and returns the reply with its descriptors.
    pub fn open(&mut self, conn: ConnId, name: &str) -> Result<Opened, RegistryError> {
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
                if !exists {
                    self.new_vale_port(&switch, &port, pn.conf.unwrap_or_default(), false, None)?;
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
                let reply = OpenReply {
                    handle,
                    name: pn.to_string(),
                    kind: PortKind::Pipe,
                    end: e as u32,
                    geometry: l.end_geometry(e),
                    region_size: l.size as u64,
                    nifp_offset: l.nifp_ofs[e] as u64,
                };
                self.handles
                    .insert(handle, (conn, Handle::Pipe { key, end: e }));
                Ok((reply, fds))
            }
            Target::Nic { .. } => unreachable!("mapped to its direct switch above"),
        }
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
                    // of it: the new port shares them.
                    match self.new_vale_port(&switch, &port, g, true, Some(old.counters.clone())) {
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

fn pt_info(t: &PassthroughServer) -> PassthroughInfo {
    PassthroughInfo {
        path: t.path().display().to_string(),
        connected: t.connected(),
    }
}

/// A guest's view of switch port `p`: its region, its interrupts, and the
/// kick of the worker for the doorbell.
fn vale_peers(p: &PortEntry) -> Result<Peers, RegistryError> {
    let dup = |e: &EventFd| {
        e.try_clone()
            .map_err(|e| internal("duplicating an eventfd", e))
    };
    let rp = p
        .port
        .ring()
        .ok_or_else(|| internal("creating a passthrough port", "not a ring port"))?;
    let irqs = rp.irqs.iter().map(dup).collect::<Result<Vec<_>, _>>()?;
    let kicks = (0..irqs.len())
        .map(|_| dup(&rp.kick))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Peers {
        memfd: rp
            .region()
            .dup_fd()
            .map_err(|e| internal("duplicating the region", e))?,
        guest_id: 1,
        guest_irqs: irqs,
        host_id: 0,
        host_kicks: kicks,
        link: Some(rp.link.clone()),
    })
}

/// A guest's view of end `e` of pipe `p`.
fn pipe_peers(p: &PipeEntry, e: usize) -> Result<Peers, RegistryError> {
    pipe_peers_of(&p.region, &p.irq, e)
}

/// A guest's view of end `e` of a pipe's memory and interrupts.
fn pipe_peers_of(
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
    fn renewer(&self, target: Target, tag: u64) -> Renew {
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

    /// A QEMU left passthrough server `tag` of `target` (`wanted` false),
    /// or one connected and the server has no memory to hand it (`wanted`
    /// true). The QEMU that left may keep the memory it had, so that memory
    /// is never handed to a QEMU again. A switch port is recreated with a
    /// fresh region at once (keeping its counters), as a ring port is for
    /// its next client; a pipe gets a fresh region when a QEMU wants one
    /// and neither end is in use ([`Registry::renew_pipe_if_idle`]).
    fn passthrough_left(&mut self, target: &Target, tag: u64, wanted: bool) {
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
                let (g, old) = (r.geometry, p.port.clone());
                self.remove_vale_port(switch, port);
                let counters = Some(old.counters.clone());
                let res = self
                    .new_vale_port(switch, port, g, true, counters)
                    .and_then(|()| {
                        let p = self
                            .switches
                            .get_mut(switch)
                            .and_then(|s| s.ports.get_mut(port))
                            .expect("just created");
                        vale_peers(p)
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
    fn renew_pipe_if_idle(&mut self, key: &str) {
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
    /// end whose region a guest gets through QEMU's ivshmem-doorbell.
    fn passthrough_add(
        &mut self,
        pn: &PortName,
        path: &std::path::Path,
    ) -> Result<(), RegistryError> {
        let tag = self.id();
        let renew = self.renewer(pn.target.clone(), tag);
        let start = |what: &str, peers: Peers| {
            PassthroughServer::start(tag, what, path, peers, renew).map_err(|source| {
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
                self.new_vale_port(switch, port, pn.conf.unwrap_or_default(), true, None)?;
                let p = self
                    .switches
                    .get_mut(switch)
                    .and_then(|s| s.ports.get_mut(port))
                    .expect("just created");
                match vale_peers(p).and_then(|peers| start(&pn.to_string(), peers)) {
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

/// A pipe's region and its interrupt eventfds (per end, one per ring pair).
fn pipe_memory(
    base: &str,
    id: &str,
    g: Geometry,
) -> Result<(Region, [Vec<EventFd>; 2]), RegistryError> {
    let layout = RegionLayout::new(g, 2)?;
    let n0 = format!("{base}{{{id}");
    let n1 = format!("{base}}}{id}");
    let region = Region::create(layout, [&n0, &n1])
        .map_err(|e| internal("creating the pipe's memory", e))?;
    let pairs = g.tx_rings.max(g.rx_rings);
    let irqs = || -> Result<Vec<EventFd>, RegistryError> {
        (0..pairs)
            .map(|_| EventFd::new().map_err(|e| internal("creating an eventfd", e)))
            .collect()
    };
    Ok((region, [irqs()?, irqs()?]))
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
