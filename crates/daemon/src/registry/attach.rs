//! Putting a port on a switch and in the workers' hands, all or nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringswitch_switch::{PortIndex, Switch, SwitchPort};

use super::{internal, RegistryError};
use crate::worker::{Assigned, Source, Worker};

/// A port attached to a switch and handed to workers. Dropped before
/// [`Attached::commit`], it takes the port off the workers and the switch
/// again, so a port whose setup fails part way is left nowhere.
#[must_use = "dropping it takes the port off its workers and switch again"]
pub(super) struct Attached<'a> {
    workers: &'a [Worker],
    switch: Arc<Switch>,
    port: Arc<SwitchPort>,
    /// (assignment id, worker) per source handed out so far.
    assigned: Vec<(u64, usize)>,
    committed: bool,
}

impl<'a> Attached<'a> {
    /// Attaches the port `make` builds to `switch`, at OpenFlow port
    /// number `at` if no port has it (the port's number before), else at
    /// the first free index; `workers` serve it once [`Attached::assign`]
    /// hands it to them.
    pub(super) fn new(
        workers: &'a [Worker],
        switch: Arc<Switch>,
        at: Option<u32>,
        make: impl FnOnce(PortIndex) -> std::io::Result<SwitchPort>,
    ) -> Result<Attached<'a>, RegistryError> {
        let free = at.filter(|&n| switch.numbered_ports().iter().all(|(no, _)| *no != n));
        let port = match free {
            Some(n) => switch.attach_at(n, make)?,
            None => switch.attach(make)?,
        };
        Ok(Attached {
            workers,
            switch,
            port,
            assigned: Vec::new(),
            committed: false,
        })
    }

    /// The port.
    pub(super) fn port(&self) -> &Arc<SwitchPort> {
        &self.port
    }

    /// Hands each of `sources` to the least loaded worker, numbering the
    /// assignments from `ids`.
    pub(super) fn assign(
        &mut self,
        sources: &[Source],
        ids: &AtomicU64,
    ) -> Result<(), RegistryError> {
        for &source in sources {
            let id = ids.fetch_add(1, Ordering::Relaxed);
            let worker = (0..self.workers.len())
                .min_by_key(|&w| self.workers[w].load())
                .unwrap_or(0);
            let Some(w) = self.workers.get(worker) else {
                continue;
            };
            w.assign(Assigned {
                id,
                switch: self.switch.clone(),
                port: self.port.clone(),
                source,
            })
            .map_err(|e| internal("handing the port to a worker", e))?;
            self.assigned.push((id, worker));
        }
        Ok(())
    }

    /// Keeps the port where it is: returns it with its assignments, for
    /// the registry entry that takes it off again ([`take_off`]).
    pub(super) fn commit(mut self) -> (Arc<SwitchPort>, Vec<(u64, usize)>) {
        self.committed = true;
        (self.port.clone(), std::mem::take(&mut self.assigned))
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        if !self.committed {
            take_off(self.workers, &self.switch, self.port.index, &self.assigned);
        }
    }
}

/// Takes a port off the workers it was `assigned` to, then off its switch.
pub(super) fn take_off(
    workers: &[Worker],
    switch: &Switch,
    index: PortIndex,
    assigned: &[(u64, usize)],
) {
    for &(id, w) in assigned {
        if let Some(w) = workers.get(w) {
            w.unassign(id);
        }
    }
    switch.detach(index);
}
