//! The control side of the flow tables: flows, groups, the FLOW_MOD and
//! GROUP_MOD commands with OpenFlow 1.3's semantics and errors, timeouts
//! and statistics.
//!
//! Every successful modification changes [`FlowTables::version`], which is
//! what invalidates the workers' caches (see [`crate::cache`]). Times are
//! `Duration`s on the caller's monotonic clock (`now`), so that the
//! tables read no clock and tests control time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ringswitch_openflow::action::valid_output_port;
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{
    FlowMod, FlowModCommand, FlowRemoved, GroupCommand, GroupMod, GroupType,
};
use ringswitch_openflow::multipart::{
    AggregateStats, FlowStats, FlowStatsRequest, GroupDesc, GroupStats, TableStats,
};
use ringswitch_openflow::oxm::mac_bytes;
use ringswitch_openflow::{Action, Bucket, Field, Instruction, Match};

use crate::classifier::{Classifier, Rule};
use crate::error::FlowError;
use crate::key::{FlowKey, KeyMask};
use crate::verdict::{Counter, Edit, Tally};
use crate::MAX_TABLES;

/// The tables' bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// How many tables (1 to [`MAX_TABLES`]; default 8).
    pub tables: usize,
    /// Most flows of each table, until [`FlowTables::set_max_flows`]
    /// changes one (default 65,536).
    pub max_flows: usize,
    /// Most groups (default 4,096).
    pub max_groups: usize,
    /// Most buckets of one group (default 64).
    pub max_buckets: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tables: 8,
            max_flows: 65_536,
            max_groups: 4_096,
            max_buckets: 64,
        }
    }
}

/// One action as the pipeline runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Output { port: u32, max_len: u16 },
    Group(u32),
    Edit(Edit),
}

/// The action set of OpenFlow 1.3 (5.10): at most one action of each
/// type, run in the specification's order at the end of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ActionSet {
    pub pop: bool,
    pub push: Option<u16>,
    pub eth_dst: Option<[u8; 6]>,
    pub eth_src: Option<[u8; 6]>,
    pub vid: Option<u16>,
    pub pcp: Option<u8>,
    pub dscp: Option<u8>,
    pub group: Option<u32>,
    pub output: Option<(u32, u16)>,
}

impl ActionSet {
    /// Write-actions: each action replaces the set's action of its type.
    pub fn merge(&mut self, o: &ActionSet) {
        self.pop |= o.pop;
        macro_rules! take {
            ($($f:ident),*) => { $(if o.$f.is_some() { self.$f = o.$f; })* };
        }
        take!(push, eth_dst, eth_src, vid, pcp, dscp, group, output);
    }

    fn from_acts(acts: &[Act]) -> ActionSet {
        let mut s = ActionSet::default();
        for a in acts {
            match *a {
                Act::Output { port, max_len } => s.output = Some((port, max_len)),
                Act::Group(g) => s.group = Some(g),
                Act::Edit(Edit::PopVlan) => s.pop = true,
                Act::Edit(Edit::PushVlan(t)) => s.push = Some(t),
                Act::Edit(Edit::EthDst(m)) => s.eth_dst = Some(m),
                Act::Edit(Edit::EthSrc(m)) => s.eth_src = Some(m),
                Act::Edit(Edit::VlanVid(v)) => s.vid = Some(v),
                Act::Edit(Edit::VlanPcp(p)) => s.pcp = Some(p),
                Act::Edit(Edit::IpDscp(d)) => s.dscp = Some(d),
            }
        }
        s
    }
}

/// A flow's instructions, checked and compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct Program {
    pub apply: Vec<Act>,
    pub clear: bool,
    pub write: Option<ActionSet>,
    pub metadata: Option<(u64, u64)>,
    pub goto: Option<u8>,
}

impl Program {
    fn outputs_to(&self, port: u32) -> bool {
        self.apply
            .iter()
            .any(|a| matches!(a, Act::Output { port: p, .. } if *p == port))
            || self
                .write
                .is_some_and(|w| w.output.is_some_and(|(p, _)| p == port))
    }

    fn uses_group(&self, group: u32) -> bool {
        self.apply.contains(&Act::Group(group))
            || self.write.is_some_and(|w| w.group == Some(group))
    }
}

/// One flow entry.
#[derive(Debug)]
pub struct Flow {
    table_id: u8,
    priority: u16,
    r#match: Match,
    pub(crate) mask: KeyMask,
    pub(crate) value: FlowKey,
    cookie: u64,
    flags: u16,
    idle_timeout: u16,
    hard_timeout: u16,
    instructions: Vec<Instruction>,
    pub(crate) program: Program,
    pub(crate) counter: Arc<Counter>,
    created: Duration,
    seq: u64,
    /// The packet count at the last `expire` that saw it change.
    idle_seen: u64,
    last_active: Duration,
}

fn split(d: Duration) -> (u32, u32) {
    (
        d.as_secs().min(u64::from(u32::MAX)) as u32,
        d.subsec_nanos(),
    )
}

impl Flow {
    /// Its table.
    pub fn table_id(&self) -> u8 {
        self.table_id
    }
    /// Its priority.
    pub fn priority(&self) -> u16 {
        self.priority
    }
    /// Its match.
    pub fn r#match(&self) -> &Match {
        &self.r#match
    }
    /// Its cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }
    /// Its `OFPFF_*` flags.
    pub fn flags(&self) -> u16 {
        self.flags
    }
    /// Its instructions, as given.
    pub fn instructions(&self) -> &[Instruction] {
        &self.instructions
    }
    /// (packets, bytes) matched.
    pub fn counts(&self) -> (u64, u64) {
        self.counter.get()
    }
    /// Whether it is its table's table-miss flow (priority 0, matching
    /// everything).
    pub fn is_table_miss(&self) -> bool {
        self.priority == 0 && self.r#match.fields().is_empty()
    }

    /// Its statistics at `now` (a FLOW multipart entry).
    pub fn stats(&self, now: Duration) -> FlowStats {
        let (duration_sec, duration_nsec) = split(now.saturating_sub(self.created));
        let (packet_count, byte_count) = self.counter.get();
        FlowStats {
            table_id: self.table_id,
            duration_sec,
            duration_nsec,
            priority: self.priority,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            flags: self.flags,
            cookie: self.cookie,
            packet_count,
            byte_count,
            r#match: self.r#match.clone(),
            instructions: self.instructions.clone(),
        }
    }

    fn removed(&self, reason: u8, now: Duration) -> Removed {
        let (duration_sec, duration_nsec) = split(now.saturating_sub(self.created));
        let (packet_count, byte_count) = self.counter.get();
        Removed {
            send_flow_removed: self.flags & OFPFF_SEND_FLOW_REM != 0,
            message: FlowRemoved {
                cookie: self.cookie,
                priority: self.priority,
                reason,
                table_id: self.table_id,
                duration_sec,
                duration_nsec,
                idle_timeout: self.idle_timeout,
                hard_timeout: self.hard_timeout,
                packet_count,
                byte_count,
                r#match: self.r#match.clone(),
            },
        }
    }
}

/// A flow taken out of the tables (by timeout, delete or group delete),
/// with what a FLOW_REMOVED says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Whether the flow asked for FLOW_REMOVED (`OFPFF_SEND_FLOW_REM`).
    pub send_flow_removed: bool,
    /// The FLOW_REMOVED body: reason (`OFPRR_*`), counters, duration.
    pub message: FlowRemoved,
}

/// One table.
#[derive(Debug)]
pub(crate) struct Table {
    pub classifier: Classifier,
    pub flows: Vec<Option<Flow>>,
    free: Vec<u32>,
    /// (mask, masked value, priority) → slot, for the strict commands.
    exact: HashMap<(KeyMask, FlowKey, u16), u32>,
    max_flows: usize,
    /// Frames looked up in it.
    pub lookups: Arc<Tally>,
    /// Frames that matched no flow in it (matched = lookups - misses:
    /// one atomic add fewer per frame than a matched count).
    pub misses: Arc<Tally>,
}

impl Table {
    fn new(max_flows: usize) -> Table {
        Table {
            classifier: Classifier::new(),
            flows: Vec::new(),
            free: Vec::new(),
            exact: HashMap::new(),
            max_flows,
            lookups: Arc::default(),
            misses: Arc::default(),
        }
    }

    fn len(&self) -> usize {
        self.exact.len()
    }

    fn insert(&mut self, flow: Flow) {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.flows.push(None);
                (self.flows.len() - 1) as u32
            }
        };
        self.classifier.insert(
            &flow.mask,
            &flow.value,
            Rule {
                priority: flow.priority,
                seq: flow.seq,
                id,
            },
        );
        self.exact
            .insert((flow.mask, flow.value, flow.priority), id);
        self.flows[id as usize] = Some(flow);
    }

    fn remove(&mut self, id: u32) -> Option<Flow> {
        let flow = self.flows.get_mut(id as usize)?.take()?;
        self.classifier.remove(&flow.mask, &flow.value, flow.seq);
        self.exact.remove(&(flow.mask, flow.value, flow.priority));
        self.free.push(id);
        Some(flow)
    }

    fn iter(&self) -> impl Iterator<Item = (u32, &Flow)> {
        self.flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.as_ref().map(|f| (i as u32, f)))
    }
}

/// A bucket as the pipeline runs it.
#[derive(Debug)]
pub(crate) struct GroupBucket {
    pub weight: u16,
    pub acts: Vec<Act>,
    pub counter: Arc<Counter>,
}

/// A group.
#[derive(Debug)]
pub(crate) struct Group {
    pub kind: GroupType,
    pub buckets: Vec<GroupBucket>,
    pub total_weight: u32,
    pub counter: Arc<Counter>,
    desc: Vec<Bucket>,
    created: Duration,
}

/// The flow tables and groups of one switch (see the crate documentation).
#[derive(Debug)]
pub struct FlowTables {
    config: Config,
    pub(crate) tables: Vec<Table>,
    pub(crate) groups: HashMap<u32, Group>,
    version: u64,
    seq: u64,
}

/// Which flows a command or request selects.
struct Selector {
    table_id: u8,
    mask: KeyMask,
    value: FlowKey,
    /// `Some(priority)`: the strict form.
    strict: Option<u16>,
    cookie: u64,
    cookie_mask: u64,
    out_port: u32,
    out_group: u32,
}

impl Selector {
    fn selects(&self, f: &Flow) -> bool {
        let by_match = match self.strict {
            Some(p) => f.priority == p && f.mask == self.mask && f.value == self.value,
            None => f.mask.within(&f.value, &self.mask, &self.value),
        };
        by_match
            && (f.cookie & self.cookie_mask) == (self.cookie & self.cookie_mask)
            && (self.out_port == OFPP_ANY || f.program.outputs_to(self.out_port))
            && (self.out_group == OFPG_ANY || f.program.uses_group(self.out_group))
    }
}

impl FlowTables {
    /// Empty tables with these bounds; `config.tables` is clamped to 1 ..=
    /// [`MAX_TABLES`].
    pub fn new(config: Config) -> FlowTables {
        let n = config.tables.clamp(1, MAX_TABLES);
        FlowTables {
            config: Config {
                tables: n,
                ..config
            },
            tables: (0..n).map(|_| Table::new(config.max_flows)).collect(),
            groups: HashMap::new(),
            version: 1,
            seq: 0,
        }
    }

    /// The bounds in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// How many tables.
    pub fn n_tables(&self) -> usize {
        self.tables.len()
    }

    /// Changes with every modification of flows or groups: a worker's
    /// cache is valid for one version.
    pub fn version(&self) -> u64 {
        self.version
    }

    fn changed(&mut self) {
        self.version = self.version.wrapping_add(1).max(1);
    }

    /// Bounds table `table_id` to `max` flows (flows beyond are kept; adds
    /// are refused until it is under).
    pub fn set_max_flows(&mut self, table_id: u8, max: usize) -> Result<(), FlowError> {
        self.table_mut(table_id)?.max_flows = max;
        Ok(())
    }

    fn table_mut(&mut self, table_id: u8) -> Result<&mut Table, FlowError> {
        self.tables
            .get_mut(usize::from(table_id))
            .ok_or(FlowError::BadTableId(table_id))
    }

    /// How many flows in all tables.
    pub fn len(&self) -> usize {
        self.tables.iter().map(Table::len).sum()
    }

    /// Whether there are no flows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every flow, by table.
    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.tables.iter().flat_map(|t| t.iter().map(|(_, f)| f))
    }

    /// The tables that `table_id` names (`OFPTT_ALL`: every one).
    fn table_range(&self, table_id: u8) -> Result<std::ops::Range<usize>, FlowError> {
        if table_id == OFPTT_ALL {
            Ok(0..self.tables.len())
        } else if usize::from(table_id) < self.tables.len() {
            Ok(usize::from(table_id)..usize::from(table_id) + 1)
        } else {
            Err(FlowError::BadTableId(table_id))
        }
    }

    /// A PACKET_OUT's actions (see [`FlowTables::packet_out`]): as a
    /// flow's, but for `OFPP_TABLE`, which only a packet-out may name, and
    /// a DSCP set without a match to show the frame is IP (it changes
    /// nothing on a frame that is not).
    pub(crate) fn compile_packet_out(&self, actions: &[Action]) -> Result<Vec<Act>, FlowError> {
        if actions.len() > MAX_ACTIONS {
            return Err(FlowError::TooManyActions);
        }
        actions
            .iter()
            .map(|a| match a {
                Action::Output {
                    port: OFPP_TABLE,
                    max_len,
                } => Ok(Act::Output {
                    port: OFPP_TABLE,
                    max_len: *max_len,
                }),
                Action::Group(g) if self.groups.contains_key(g) => Ok(Act::Group(*g)),
                Action::Group(g) => Err(FlowError::BadOutGroup(*g)),
                a => self.compile_action(a, None),
            })
            .collect()
    }

    fn compile_actions(
        &self,
        actions: &[Action],
        m: Option<&Match>,
    ) -> Result<Vec<Act>, FlowError> {
        if actions.len() > MAX_ACTIONS {
            return Err(FlowError::TooManyActions);
        }
        actions.iter().map(|a| self.compile_action(a, m)).collect()
    }

    /// One action; `m` is the flow's match, `None` in a bucket.
    fn compile_action(&self, a: &Action, m: Option<&Match>) -> Result<Act, FlowError> {
        use FlowError::UnsupportedAction as No;
        Ok(match a {
            Action::Output { port, max_len } => {
                if !valid_output_port(*port) || *port == OFPP_TABLE {
                    return Err(FlowError::BadOutPort(*port));
                }
                Act::Output {
                    port: *port,
                    max_len: *max_len,
                }
            }
            Action::Group(g) => {
                if m.is_none() {
                    return Err(FlowError::ChainingUnsupported);
                }
                if !self.groups.contains_key(g) {
                    return Err(FlowError::BadOutGroup(*g));
                }
                Act::Group(*g)
            }
            Action::PushVlan(t) => Act::Edit(Edit::PushVlan(*t)),
            Action::PopVlan => Act::Edit(Edit::PopVlan),
            Action::SetField(o) => {
                let v = o.value;
                Act::Edit(match o.field {
                    Field::EthDst => Edit::EthDst(mac_bytes(v)),
                    Field::EthSrc => Edit::EthSrc(mac_bytes(v)),
                    Field::VlanVid => Edit::VlanVid((v & 0x0fff) as u16),
                    Field::VlanPcp => Edit::VlanPcp((v & 7) as u8),
                    Field::IpDscp => {
                        let ip = m.is_none_or(|m| {
                            m.get(Field::EthType)
                                .is_some_and(|t| t.value == 0x0800 || t.value == 0x86dd)
                        });
                        if !ip {
                            return Err(FlowError::MatchInconsistent(Field::IpDscp));
                        }
                        Edit::IpDscp((v & 0x3f) as u8)
                    }
                    f => return Err(FlowError::UnsupportedSetField(f)),
                })
            }
            Action::CopyTtlOut => return Err(No("copy_ttl_out")),
            Action::CopyTtlIn => return Err(No("copy_ttl_in")),
            Action::SetMplsTtl(_) => return Err(No("set_mpls_ttl")),
            Action::DecMplsTtl => return Err(No("dec_mpls_ttl")),
            Action::PushMpls(_) => return Err(No("push_mpls")),
            Action::PopMpls(_) => return Err(No("pop_mpls")),
            Action::SetQueue(_) => return Err(No("set_queue")),
            Action::SetNwTtl(_) => return Err(No("set_nw_ttl")),
            Action::DecNwTtl => return Err(No("dec_nw_ttl")),
            Action::PushPbb(_) => return Err(No("push_pbb")),
            Action::PopPbb => return Err(No("pop_pbb")),
            Action::Experimenter { .. } => return Err(No("experimenter")),
        })
    }

    fn compile(&self, table_id: u8, m: &Match, ins: &[Instruction]) -> Result<Program, FlowError> {
        let mut p = Program::default();
        for i in ins {
            match i {
                Instruction::GotoTable(t) => {
                    if *t <= table_id || usize::from(*t) >= self.tables.len() {
                        return Err(FlowError::BadGotoTable {
                            from: table_id,
                            to: *t,
                        });
                    }
                    p.goto = Some(*t);
                }
                Instruction::WriteMetadata { metadata, mask } => {
                    p.metadata = Some((*metadata, *mask));
                }
                Instruction::WriteActions(a) => {
                    p.write = Some(ActionSet::from_acts(&self.compile_actions(a, Some(m))?));
                }
                Instruction::ApplyActions(a) => p.apply = self.compile_actions(a, Some(m))?,
                Instruction::ClearActions => p.clear = true,
                Instruction::Meter(_) => return Err(FlowError::UnsupportedInstruction("meter")),
                Instruction::Experimenter { .. } => {
                    return Err(FlowError::UnsupportedInstruction("experimenter"))
                }
            }
        }
        Ok(p)
    }

    fn selector(
        &self,
        table_id: u8,
        m: &Match,
        strict: Option<u16>,
        cookie: (u64, u64),
        out: (u32, u32),
    ) -> Result<Selector, FlowError> {
        let (mask, value) = KeyMask::from_match(m)?;
        Ok(Selector {
            table_id,
            mask,
            value,
            strict,
            cookie: cookie.0,
            cookie_mask: cookie.1,
            out_port: out.0,
            out_group: out.1,
        })
    }

    /// Slots of the flows `sel` selects, by table.
    fn select(&self, sel: &Selector) -> Result<Vec<(usize, u32)>, FlowError> {
        let mut out = Vec::new();
        for t in self.table_range(sel.table_id)? {
            if let Some(p) = sel.strict {
                if let Some(&id) = self.tables[t].exact.get(&(sel.mask, sel.value, p)) {
                    let f = self.tables[t].flows[id as usize].as_ref();
                    if f.is_some_and(|f| sel.selects(f)) {
                        out.push((t, id));
                    }
                }
            } else {
                out.extend(
                    self.tables[t]
                        .iter()
                        .filter(|(_, f)| sel.selects(f))
                        .map(|(i, _)| (t, i)),
                );
            }
        }
        Ok(out)
    }

    /// Carries out a FLOW_MOD at time `now`. Returns the flows a delete
    /// took out (reason `OFPRR_DELETE`; send FLOW_REMOVED for those that
    /// ask). `buffer_id` is the caller's business (the switch buffers
    /// nothing).
    pub fn flow_mod(&mut self, fm: &FlowMod, now: Duration) -> Result<Vec<Removed>, FlowError> {
        let cookie = (fm.cookie, fm.cookie_mask);
        match fm.command {
            FlowModCommand::Add => self.add(fm, now).map(|()| Vec::new()),
            FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
                if fm.table_id == OFPTT_ALL {
                    return Err(FlowError::AllTablesNotAllowed);
                }
                let strict = (fm.command == FlowModCommand::ModifyStrict).then_some(fm.priority);
                let sel = self.selector(
                    fm.table_id,
                    &fm.r#match,
                    strict,
                    cookie,
                    (OFPP_ANY, OFPG_ANY),
                )?;
                let program = self.compile(fm.table_id, &fm.r#match, &fm.instructions)?;
                let hits = self.select(&sel)?;
                for (t, id) in hits {
                    if let Some(f) = self.tables[t].flows[id as usize].as_mut() {
                        f.program = program.clone();
                        f.instructions = fm.instructions.clone();
                        if fm.flags & OFPFF_RESET_COUNTS != 0 {
                            f.counter.reset();
                            f.idle_seen = 0;
                        }
                    }
                }
                self.changed();
                Ok(Vec::new())
            }
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
                let strict = (fm.command == FlowModCommand::DeleteStrict).then_some(fm.priority);
                let sel = self.selector(
                    fm.table_id,
                    &fm.r#match,
                    strict,
                    cookie,
                    (fm.out_port, fm.out_group),
                )?;
                let hits = self.select(&sel)?;
                let removed = self.remove_flows(&hits, OFPRR_DELETE, now);
                self.changed();
                Ok(removed)
            }
        }
    }

    fn remove_flows(&mut self, hits: &[(usize, u32)], reason: u8, now: Duration) -> Vec<Removed> {
        hits.iter()
            .filter_map(|&(t, id)| self.tables[t].remove(id))
            .map(|f| f.removed(reason, now))
            .collect()
    }

    fn add(&mut self, fm: &FlowMod, now: Duration) -> Result<(), FlowError> {
        if usize::from(fm.table_id) >= self.tables.len() {
            return Err(FlowError::BadTableId(fm.table_id));
        }
        let (mask, value) = KeyMask::from_match(&fm.r#match)?;
        let program = self.compile(fm.table_id, &fm.r#match, &fm.instructions)?;
        let table = &self.tables[usize::from(fm.table_id)];
        let existing = table.exact.get(&(mask, value, fm.priority)).copied();
        if fm.flags & OFPFF_CHECK_OVERLAP != 0
            && table.iter().any(|(_, f)| {
                f.priority == fm.priority && KeyMask::overlaps((&f.mask, &f.value), (&mask, &value))
            })
        {
            return Err(FlowError::Overlap);
        }
        if existing.is_none() && table.len() >= table.max_flows {
            return Err(FlowError::TableFull(fm.table_id));
        }
        // A flow of the same match and priority is replaced; its counters
        // carry over unless OFPFF_RESET_COUNTS.
        let counter = match existing {
            Some(id) => {
                let old = self.tables[usize::from(fm.table_id)].remove(id);
                match old {
                    Some(old) if fm.flags & OFPFF_RESET_COUNTS == 0 => old.counter,
                    _ => Arc::default(),
                }
            }
            None => Arc::default(),
        };
        self.seq += 1;
        let idle_seen = counter.get().0;
        let flow = Flow {
            table_id: fm.table_id,
            priority: fm.priority,
            r#match: fm.r#match.clone(),
            mask,
            value,
            cookie: fm.cookie,
            flags: fm.flags,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            instructions: fm.instructions.clone(),
            program,
            counter,
            created: now,
            seq: self.seq,
            idle_seen,
            last_active: now,
        };
        self.tables[usize::from(fm.table_id)].insert(flow);
        self.changed();
        Ok(())
    }

    /// Takes out the flows whose idle or hard timeout has passed at `now`,
    /// with reason `OFPRR_IDLE_TIMEOUT` or `OFPRR_HARD_TIMEOUT`. A flow is
    /// idle from the last call that saw its packet count unchanged, so
    /// call it every second or so; idle timeouts are as precise as that.
    pub fn expire(&mut self, now: Duration) -> Vec<Removed> {
        let mut gone = Vec::new();
        for (t, table) in self.tables.iter_mut().enumerate() {
            for (id, slot) in table.flows.iter_mut().enumerate() {
                let Some(f) = slot.as_mut() else { continue };
                let packets = f.counter.get().0;
                if packets != f.idle_seen {
                    f.idle_seen = packets;
                    f.last_active = now;
                }
                // Whether `timeout` seconds (0: none) have passed since `from`.
                let passed = |from: Duration, timeout: u16| {
                    timeout != 0
                        && from
                            .checked_add(Duration::from_secs(u64::from(timeout)))
                            .is_some_and(|at| now >= at)
                };
                if passed(f.created, f.hard_timeout) {
                    gone.push((t, id as u32, OFPRR_HARD_TIMEOUT));
                } else if passed(f.last_active, f.idle_timeout) {
                    gone.push((t, id as u32, OFPRR_IDLE_TIMEOUT));
                }
            }
        }
        if gone.is_empty() {
            return Vec::new();
        }
        let out = gone
            .iter()
            .filter_map(|&(t, id, reason)| Some(self.tables[t].remove(id)?.removed(reason, now)))
            .collect();
        self.changed();
        out
    }

    /// Carries out a GROUP_MOD at time `now`. A delete also takes out the
    /// flows that use the group (reason `OFPRR_GROUP_DELETE`), returned.
    pub fn group_mod(&mut self, gm: &GroupMod, now: Duration) -> Result<Vec<Removed>, FlowError> {
        match gm.command {
            GroupCommand::Delete => {
                let ids: Vec<u32> = if gm.group_id == OFPG_ALL {
                    self.groups.keys().copied().collect()
                } else if gm.group_id > OFPG_MAX {
                    return Err(FlowError::InvalidGroup(gm.group_id));
                } else {
                    vec![gm.group_id]
                };
                let mut hits = Vec::new();
                for (t, table) in self.tables.iter().enumerate() {
                    for (id, f) in table.iter() {
                        if ids.iter().any(|&g| f.program.uses_group(g)) {
                            hits.push((t, id));
                        }
                    }
                }
                let removed = self.remove_flows(&hits, OFPRR_GROUP_DELETE, now);
                for g in ids {
                    self.groups.remove(&g);
                }
                self.changed();
                Ok(removed)
            }
            GroupCommand::Add | GroupCommand::Modify => {
                if gm.group_id > OFPG_MAX {
                    return Err(FlowError::InvalidGroup(gm.group_id));
                }
                let exists = self.groups.contains_key(&gm.group_id);
                if gm.command == GroupCommand::Add && exists {
                    return Err(FlowError::GroupExists(gm.group_id));
                }
                if gm.command == GroupCommand::Modify && !exists {
                    return Err(FlowError::UnknownGroup(gm.group_id));
                }
                if gm.command == GroupCommand::Add && self.groups.len() >= self.config.max_groups {
                    return Err(FlowError::OutOfGroups);
                }
                let group = self.build_group(gm, now)?;
                let group = match self.groups.remove(&gm.group_id) {
                    // A modified group keeps its counter and age.
                    Some(old) => Group {
                        counter: old.counter,
                        created: old.created,
                        ..group
                    },
                    None => group,
                };
                self.groups.insert(gm.group_id, group);
                self.changed();
                Ok(Vec::new())
            }
        }
    }

    fn build_group(&self, gm: &GroupMod, now: Duration) -> Result<Group, FlowError> {
        match gm.group_type {
            GroupType::All | GroupType::Select => {}
            GroupType::Indirect => {
                if gm.buckets.len() != 1 {
                    return Err(FlowError::IndirectBuckets);
                }
            }
            GroupType::FastFailover => return Err(FlowError::UnsupportedGroupType),
        }
        if gm.buckets.len() > self.config.max_buckets {
            return Err(FlowError::OutOfBuckets);
        }
        let mut buckets = Vec::with_capacity(gm.buckets.len());
        for b in &gm.buckets {
            if gm.group_type != GroupType::Select && b.weight != 0 {
                return Err(FlowError::WeightUnsupported);
            }
            buckets.push(GroupBucket {
                weight: b.weight,
                acts: self.compile_actions(&b.actions, None)?,
                counter: Arc::default(),
            });
        }
        Ok(Group {
            kind: gm.group_type,
            total_weight: buckets.iter().map(|b| u32::from(b.weight)).sum(),
            buckets,
            counter: Arc::default(),
            desc: gm.buckets.clone(),
            created: now,
        })
    }

    fn stats_selector(&self, req: &FlowStatsRequest) -> Result<Selector, FlowError> {
        self.selector(
            req.table_id,
            &req.r#match,
            None,
            (req.cookie, req.cookie_mask),
            (req.out_port, req.out_group),
        )
    }

    /// The FLOW multipart reply: the flows the request selects (non-strict
    /// match, cookie, out_port, out_group), by table.
    pub fn flow_stats(
        &self,
        req: &FlowStatsRequest,
        now: Duration,
    ) -> Result<Vec<FlowStats>, FlowError> {
        let sel = self.stats_selector(req)?;
        Ok(self
            .select(&sel)?
            .into_iter()
            .filter_map(|(t, id)| self.tables[t].flows[id as usize].as_ref())
            .map(|f| f.stats(now))
            .collect())
    }

    /// The AGGREGATE multipart reply over the same selection.
    pub fn aggregate_stats(&self, req: &FlowStatsRequest) -> Result<AggregateStats, FlowError> {
        let sel = self.stats_selector(req)?;
        let mut a = AggregateStats::default();
        for (t, id) in self.select(&sel)? {
            if let Some(f) = &self.tables[t].flows[id as usize] {
                let (p, b) = f.counter.get();
                a.packet_count = a.packet_count.wrapping_add(p);
                a.byte_count = a.byte_count.wrapping_add(b);
                a.flow_count = a.flow_count.saturating_add(1);
            }
        }
        Ok(a)
    }

    /// The TABLE multipart reply: every table's flows, lookups and
    /// matches.
    pub fn table_stats(&self) -> Vec<TableStats> {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                // Misses first: a verdict adds the lookup before the miss,
                // so the lookups read after are at least as many.
                let misses = t.misses.get();
                let lookups = t.lookups.get();
                TableStats {
                    table_id: i as u8,
                    active_count: t.len() as u32,
                    lookup_count: lookups,
                    matched_count: lookups.saturating_sub(misses),
                }
            })
            .collect()
    }

    /// The GROUP multipart reply for `group_id` (`OFPG_ALL`: every group),
    /// by group id.
    pub fn group_stats(&self, group_id: u32, now: Duration) -> Vec<GroupStats> {
        let mut ids: Vec<u32> = self
            .groups
            .keys()
            .copied()
            .filter(|&g| group_id == OFPG_ALL || g == group_id)
            .collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|g| {
                let grp = &self.groups[&g];
                let (packet_count, byte_count) = grp.counter.get();
                let (duration_sec, duration_nsec) = split(now.saturating_sub(grp.created));
                GroupStats {
                    group_id: g,
                    ref_count: self.flows().filter(|f| f.program.uses_group(g)).count() as u32,
                    packet_count,
                    byte_count,
                    duration_sec,
                    duration_nsec,
                    // Every bucket of an ALL group sees every packet; the
                    // others count their own.
                    buckets: grp
                        .buckets
                        .iter()
                        .map(|b| match grp.kind {
                            GroupType::All => (packet_count, byte_count),
                            _ => b.counter.get(),
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The GROUP_DESC multipart reply, by group id.
    pub fn group_desc(&self) -> Vec<GroupDesc> {
        let mut out: Vec<GroupDesc> = self
            .groups
            .iter()
            .map(|(&group_id, g)| GroupDesc {
                group_type: g.kind,
                group_id,
                buckets: g.desc.clone(),
            })
            .collect();
        out.sort_unstable_by_key(|d| d.group_id);
        out
    }
}
