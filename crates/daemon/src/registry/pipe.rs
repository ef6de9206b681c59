//! Pipes: one region with two ends, each opened by a client or a guest.

use std::sync::Arc;

use ringswitch_control::{PortName, Target};
use ringswitch_ring::{EventFd, Geometry, Region, RegionLayout};
use tracing::info;

use super::budget::Charge;
use super::open_by::OpenBy;
use super::{internal, ConnId, Kind, Registry, RegistryError, MAX_PIPES};

/// Who had a pipe end open and may still map the pipe's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Former {
    /// A client connection.
    Client(ConnId),
    /// A guest (its QEMU went).
    Guest,
}

/// A pipe: its region, its interrupts, and who has each end.
pub(super) struct PipeEntry {
    pub(super) region: Arc<Region>,
    /// Per end, one interrupt eventfd per ring pair.
    pub(super) irq: [Vec<EventFd>; 2],
    pub(super) persistent: bool,
    /// Per end.
    pub(super) open_by: [OpenBy; 2],
    pub(super) base: String,
    pub(super) id: String,
    /// Who closed an end while the other end stayed open: it may keep the
    /// memory mapped, so no other client gets an end of this region; the
    /// pipe gets a fresh one once both ends are closed.
    pub(super) former: Option<Former>,
    /// Per end, the uid of the client that has it open.
    pub(super) owner_uid: [Option<u32>; 2],
    /// Of a pipe whose other end is a guest's (whose memory cannot be
    /// replaced while its QEMU stays): the uid of the last client that
    /// closed this pipe's host end. It may keep the memory mapped, so the
    /// end is handed only to that same user until the pipe has fresh memory
    /// (a user may take turns with itself; another user would be read).
    pub(super) former_uid: Option<u32>,
    /// The region's share of the budgets, given back with the entry.
    pub(super) _charge: Charge,
    /// Of a pipe made in a switch port's memory: where.
    pub(super) in_port: Option<InPort>,
}

/// Where a pipe in a switch port's memory is.
pub(super) struct InPort {
    /// Which of the port's pipes (`RegionLayout::pipe_ends`).
    pub(super) pair: u32,
    /// The port's full name.
    pub(super) port: String,
    /// The user who had the port open: the only one, besides root, handed
    /// an end (it maps all of the port's memory).
    pub(super) uid: u32,
}

impl PipeEntry {
    /// A pipe no one has open yet, on `region` with its interrupts.
    fn new(
        (region, irq): (Arc<Region>, [Vec<EventFd>; 2]),
        persistent: bool,
        base: &str,
        id: &str,
        charge: Charge,
        in_port: Option<InPort>,
    ) -> PipeEntry {
        PipeEntry {
            region,
            irq,
            persistent,
            open_by: [OpenBy::Closed, OpenBy::Closed],
            base: base.to_string(),
            id: id.to_string(),
            former: None,
            owner_uid: [None; 2],
            former_uid: None,
            _charge: charge,
            in_port,
        }
    }

    /// The region's ends of this pipe's `{` and `}` ends.
    pub(super) fn ends(&self) -> [usize; 2] {
        self.in_port
            .as_ref()
            .and_then(|d| self.region.layout().pipe_ends(d.pair))
            .unwrap_or([0, 1])
    }
}

impl Registry {
    /// Removes a pipe, retiring its passthrough servers.
    pub(super) fn remove_pipe(&mut self, key: &str) {
        if let Some(mut p) = self.pipes.remove(key) {
            for end in p.open_by.iter_mut() {
                let pt = end.take_guest();
                self.retire_pt(pt);
            }
        }
    }

    pub(super) fn new_pipe(
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
        let entry = PipeEntry::new((Arc::new(region), irq), persistent, base, id, charge, None);
        self.pipes.insert(Target::pipe_key(base, id), entry);
        info!(pipe = %n0, "pipe created");
        Ok(())
    }
}

impl Registry {
    /// Whether `region` is the memory switch port `base` has now (a pipe
    /// made in a port's memory stays on it when the port is opened again
    /// with fresh memory while the pipe's other end is held).
    pub(super) fn is_ports_memory(&self, base: &str, region: &Arc<Region>) -> bool {
        let Ok(PortName {
            target: Target::Vale { switch, port },
            ..
        }) = base.parse::<PortName>()
        else {
            return false;
        };
        self.switches
            .get(&switch)
            .and_then(|s| s.ports.get(&port))
            .and_then(|p| p.port.ring())
            .is_some_and(|rp| Arc::ptr_eq(rp.region(), region))
    }

    /// Makes pipe `base{id` in the memory of switch port `base`, which
    /// the caller's user has open with room for pipes.
    pub(super) fn new_pipe_in_port(&mut self, base: &str, id: &str) -> Result<(), RegistryError> {
        let pipe = format!("{base}{{{id}");
        let refuse = |why: &str| RegistryError::PipeNotInPortMemory {
            pipe: pipe.clone(),
            port: base.to_string(),
            why: why.to_string(),
        };
        if self.pipes.len() >= MAX_PIPES {
            return Err(RegistryError::TooManyPipes { max: MAX_PIPES });
        }
        let Ok(PortName {
            target: Target::Vale { switch, port },
            ..
        }) = base.parse::<PortName>()
        else {
            return Err(refuse("that is not the name of a switch port"));
        };
        let Some(p) = self.switches.get(&switch).and_then(|s| s.ports.get(&port)) else {
            return Err(refuse(
                "there is no such port (open the port before its pipes)",
            ));
        };
        let (Kind::Ring(r), Some(rp)) = (&p.kind, p.port.ring()) else {
            return Err(refuse("it is not a ring port"));
        };
        let Some(uid) = r
            .owner_uid
            .filter(|_| matches!(r.open_by, OpenBy::Client(_)))
        else {
            return Err(refuse(
                "no program has the port open (open the port before its pipes)",
            ));
        };
        if uid != self.client.uid && self.client.uid != 0 {
            return Err(RegistryError::PipeInOtherUsersMemory {
                pipe,
                port: base.to_string(),
            });
        }
        let region = rp.region().clone();
        let room = region.layout().pipes;
        if room == 0 {
            return Err(refuse("the port was opened without room for pipes (under the netmap preload library, set RINGSWITCH_NETMAP_PIPES to the number of pipes, 1 to 16, for the program that opens the port)"));
        }
        let used: Vec<u32> = self
            .pipes
            .values()
            .filter(|e| Arc::ptr_eq(&e.region, &region))
            .filter_map(|e| e.in_port.as_ref().map(|d| d.pair))
            .collect();
        let Some(pair) = (0..room).find(|k| !used.contains(k)) else {
            return Err(refuse(&format!("all {room} pipes it has room for are open (under the netmap preload library, RINGSWITCH_NETMAP_PIPES sets the room, 1 to 16)")));
        };
        // Held by the daemon: one interrupt eventfd per end (one ring
        // pair each); the memory is the port's, already charged.
        let charge = self
            .budget
            .charge(self.payer(false), &format!("pipe {pipe}"), 0, 2)?;
        region.reset_pipe(pair, [&pipe, &format!("{base}}}{id}")]);
        let irq = || EventFd::new().map_err(|e| internal("creating an eventfd", e));
        let in_port = InPort {
            pair,
            port: base.to_string(),
            uid,
        };
        let irq = [vec![irq()?], vec![irq()?]];
        let entry = PipeEntry::new((region, irq), false, base, id, charge, Some(in_port));
        self.pipes.insert(Target::pipe_key(base, id), entry);
        info!(pipe = %pipe, pair, "pipe created in its port's memory");
        Ok(())
    }
}

/// A pipe's region and its interrupt eventfds (per end, one per ring pair).
pub(super) fn pipe_memory(
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
