//! Pipes: one region with two ends, each opened by a client or a guest.

use std::sync::Arc;

use ringswitch_control::Target;
use ringswitch_ring::{EventFd, Geometry, Region, RegionLayout};
use tracing::info;

use super::budget::Charge;
use super::open_by::OpenBy;
use super::{internal, ConnId, Registry, RegistryError, MAX_PIPES};

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
