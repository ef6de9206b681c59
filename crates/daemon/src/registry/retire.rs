//! Threads the registry stops (VM ports' protocol threads, passthrough
//! servers): told to stop under the lock, joined after it.

use super::vm_port::VmEntry;
use super::{Kind, Registry};
use crate::passthrough::PassthroughServer;

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

impl Registry {
    /// The threads of ports and pipes removed since the last call, already
    /// told to stop. Drop the result after unlocking the registry: that
    /// joins them.
    pub fn take_retired(&mut self) -> Retired {
        std::mem::take(&mut self.retired)
    }

    pub(super) fn retire_vm(&mut self, vm: Box<VmEntry>) {
        vm.thread.request_stop();
        self.retired.0.push(vm);
    }

    pub(super) fn retire_pt(&mut self, pt: Option<Box<PassthroughServer>>) {
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
}
