//! A switch's flow tables and OpenFlow settings (`switch-set`), and the
//! `flows` listing.

use std::sync::Arc;
use std::time::Instant;

use ringswitch_control::proto::{FailMode, FlowEntry, OpenFlowSpec, PAGE_BYTES};
use ringswitch_flow::{Config, Flow, FlowTables};
use ringswitch_openflow::multipart::FlowStats;
use ringswitch_openflow::{Message, MultipartReply};
use ringswitch_switch::flows::{self, Flows};
use tracing::info;

use super::{no_switch, Registry, RegistryError};
use crate::openflow::Server;

/// A switch's OpenFlow side.
pub(super) struct OfEntry {
    /// What it was set up with.
    pub spec: OpenFlowSpec,
    /// Its tables (the switch's workers read them too).
    pub flows: Arc<Flows>,
    /// Where the tables' clock starts.
    pub epoch: Instant,
    /// Its connections; none when it neither listens nor has a controller.
    pub server: Option<Server>,
}

fn fail_mode(m: Option<FailMode>) -> flows::FailMode {
    match m {
        Some(FailMode::Standalone) => flows::FailMode::Standalone,
        Some(FailMode::Secure) | None => flows::FailMode::Secure,
    }
}

impl Registry {
    /// `switch-set`: gives a switch flow tables and OpenFlow connections, or
    /// changes them (the settings given replace the switch's).
    pub fn switch_set(&mut self, sw: &str, spec: &OpenFlowSpec) -> Result<(), RegistryError> {
        let s = self.switches.get_mut(sw).ok_or_else(|| no_switch(sw))?;
        let internal = |e| RegistryError::internal("making a switch's flow tables", e);
        let (old, flows, epoch) = match s.openflow.take() {
            Some(mut o) => {
                // The old connections go first: the new ones may listen at
                // the same address.
                drop(o.server.take());
                (o.spec, o.flows, o.epoch)
            }
            None => (
                OpenFlowSpec::default(),
                Arc::new(Flows::new(Config::default()).map_err(internal)?),
                Instant::now(),
            ),
        };
        let spec = old.merged(spec);
        flows.set_fail_mode(fail_mode(spec.fail_mode));
        // From the next batch on, the tables decide.
        s.switch.set_flows(Some(flows.clone()));
        let server = if spec.listen.is_some() || spec.controller.is_some() {
            match Server::start(s.switch.clone(), flows.clone(), epoch, &spec) {
                Ok(srv) => Some(srv),
                Err(source) => {
                    // Back as it was (the old address may be taken now by
                    // someone else: then it runs without connections).
                    let server = Server::start(s.switch.clone(), flows.clone(), epoch, &old).ok();
                    s.openflow = Some(OfEntry {
                        spec: old,
                        flows,
                        epoch,
                        server,
                    });
                    return Err(RegistryError::OpenFlow {
                        switch: sw.to_string(),
                        source,
                    });
                }
            }
        } else {
            None
        };
        info!(switch = sw, listen = ?spec.listen, controller = ?spec.controller, fail_mode = ?spec.fail_mode, "switch runs OpenFlow");
        s.openflow = Some(OfEntry {
            spec,
            flows,
            epoch,
            server,
        });
        Ok(())
    }

    /// A switch's OpenFlow settings, open connections and data-path drops,
    /// for the listing.
    pub(super) fn openflow_info(
        &self,
        sw: &str,
    ) -> (Option<OpenFlowSpec>, Option<u32>, [Option<u64>; 2]) {
        let Some(o) = self.switches.get(sw).and_then(|s| s.openflow.as_ref()) else {
            return (None, None, [None; 2]);
        };
        let drops = [Some(o.flows.packet_in_dropped()), Some(o.flows.truncated())];
        let conns = o.server.as_ref().map(|srv| {
            // Relaxed: a statistic.
            srv.status()
                .connections
                .load(std::sync::atomic::Ordering::Relaxed)
        });
        (Some(o.spec.clone()), conns, drops)
    }

    /// A switch's OpenFlow side, for its flows.
    fn of_entry(&self, sw: &str) -> Result<&OfEntry, RegistryError> {
        let s = self.switches.get(sw).ok_or_else(|| no_switch(sw))?;
        s.openflow
            .as_ref()
            .ok_or_else(|| RegistryError::NoFlowTables {
                switch: sw.to_string(),
            })
    }

    /// `flows`: a switch's flows, by table and priority.
    pub fn flows(&self, sw: &str) -> Result<Vec<FlowEntry>, RegistryError> {
        let o = self.of_entry(sw)?;
        let now = o.epoch.elapsed();
        let t = o.flows.read();
        Ok(sorted(&t)
            .into_iter()
            .enumerate()
            .map(|(rank, f)| entry(&f.stats(now), rank))
            .collect())
    }

    /// One page of `flows`: the entries named after `after`, as many as fit
    /// in [`PAGE_BYTES`], and the cursor of the next page when more remain.
    /// Only the page's flows are encoded, so a long listing costs a sort of
    /// references per page, not an encoding of every flow. Flows added or
    /// removed between two pages shift the ranks after them.
    pub fn flows_page(
        &self,
        sw: &str,
        after: &str,
    ) -> Result<(serde_json::Value, Option<String>), RegistryError> {
        let o = self.of_entry(sw)?;
        let now = o.epoch.elapsed();
        let t = o.flows.read();
        let mut out: Vec<FlowEntry> = Vec::new();
        let mut bytes = 2; // the brackets
                           // The cursor's rank says where the page starts (a cursor that does
                           // not parse starts from the beginning).
        let start = after
            .rsplit(':')
            .next()
            .and_then(|r| r.parse::<usize>().ok())
            .map_or(0, |r| r + 1);
        for (rank, f) in sorted(&t).into_iter().enumerate().skip(start) {
            let e = entry(&f.stats(now), rank);
            let n = serde_json::to_vec(&e).map_or(0, |b| b.len()) + 1;
            if bytes + n > PAGE_BYTES && !out.is_empty() {
                let next = out.last().map(|e| e.name.clone());
                return Ok((to_value(out)?, next));
            }
            bytes += n;
            out.push(e);
        }
        Ok((to_value(out)?, None))
    }
}

/// The flows by table, then priority (highest first); in the tables'
/// order among equals.
fn sorted(t: &FlowTables) -> Vec<&Flow> {
    let mut v: Vec<&Flow> = t.flows().collect();
    v.sort_by_key(|f| (f.table_id(), std::cmp::Reverse(f.priority())));
    v
}

fn to_value(v: Vec<FlowEntry>) -> Result<serde_json::Value, RegistryError> {
    serde_json::to_value(v).map_err(|e| RegistryError::internal("encoding the flows", e))
}

/// A flow's place in the listing: table, 65535 minus its priority, rank.
fn entry_name(table_id: u8, priority: u16, rank: usize) -> String {
    format!("{table_id:03}:{:05}:{rank:08}", 65535 - priority)
}

fn entry(f: &FlowStats, rank: usize) -> FlowEntry {
    let wire = MultipartReply::Flow(vec![f.clone()])
        .into_messages(0)
        .into_iter()
        .next()
        .and_then(|m: Message| m.encode().ok())
        .unwrap_or_default();
    FlowEntry {
        name: entry_name(f.table_id, f.priority, rank),
        table_id: f.table_id,
        priority: f.priority,
        cookie: f.cookie,
        duration_ms: u64::from(f.duration_sec) * 1000 + u64::from(f.duration_nsec / 1_000_000),
        n_packets: f.packet_count,
        n_bytes: f.byte_count,
        idle_timeout: f.idle_timeout,
        hard_timeout: f.hard_timeout,
        ofp_flow_stats: hex(&wire),
    }
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}
