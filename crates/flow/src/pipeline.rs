//! The data side of the flow tables: a key through the pipeline of
//! OpenFlow 1.3 (5.1), into a [`Verdict`].
//!
//! From table 0, each table's best flow runs its instructions in the
//! specification's order: apply-actions (edits take effect at once, for
//! the outputs that follow and the lookups of later tables), clear-actions,
//! write-actions (into the action set), write-metadata, goto-table. A flow
//! without goto-table ends the pipeline and the action set runs, in the
//! specification's order: pop VLAN, push VLAN, set-fields, then the group
//! if there is one, else the output. A table without a matching flow (no
//! table-miss flow) drops the frame and its action set.
//!
//! Groups: ALL runs every bucket, SELECT one bucket chosen by the hash of
//! the 5-tuple with the buckets' weights, INDIRECT its one bucket; each
//! bucket works on its own copy of the frame's state.
//!
//! Nothing here allocates.

use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::GroupType;

use crate::key::FlowKey;
use crate::table::{Act, ActionSet, FlowTables};
use crate::verdict::{Edit, Target, Verdict};

/// The state of a frame on its way through: its key as edited so far and
/// the verdict's edits in force.
#[derive(Clone, Copy)]
struct State {
    key: FlowKey,
    edits: u32,
    /// An edit could not be recorded: later outputs would be wrong, so
    /// they are left out.
    lost: bool,
}

/// Who sends a controller output: the flow's table, cookie, and whether it
/// is a table-miss flow.
#[derive(Clone, Copy)]
struct Origin {
    table_id: u8,
    cookie: u64,
    miss: bool,
}

impl Edit {
    /// The edit's effect on a key, for the lookups of later tables.
    fn apply_to_key(self, k: &mut FlowKey) {
        use ringswitch_openflow::oxm::{mac_value, OFPVID_PRESENT};
        use ringswitch_openflow::Field;
        let present = k.get(Field::VlanVid) & u128::from(OFPVID_PRESENT) != 0;
        match self {
            Edit::PushVlan(_) => {
                if !present {
                    k.set(Field::VlanVid, u128::from(OFPVID_PRESENT));
                    k.set(Field::VlanPcp, 0);
                }
            }
            Edit::PopVlan => {
                k.set(Field::VlanVid, 0);
                k.set(Field::VlanPcp, 0);
            }
            Edit::EthDst(m) => k.set(Field::EthDst, mac_value(m)),
            Edit::EthSrc(m) => k.set(Field::EthSrc, mac_value(m)),
            Edit::VlanVid(v) => {
                if present {
                    k.set(Field::VlanVid, u128::from(OFPVID_PRESENT | (v & 0x0fff)));
                }
            }
            Edit::VlanPcp(p) => {
                if present {
                    k.set(Field::VlanPcp, u128::from(p & 7));
                }
            }
            Edit::IpDscp(d) => {
                let ty = k.get(Field::EthType);
                if ty == 0x0800 || ty == 0x86dd {
                    k.set(Field::IpDscp, u128::from(d & 0x3f));
                }
            }
        }
    }
}

impl FlowTables {
    /// Runs `key` (its metadata is the pipeline's start value, normally 0)
    /// through the tables into `out`, which is cleared first. Allocates
    /// nothing; the counters it names are not added to (see
    /// [`Verdict::count`]).
    pub fn classify(&self, key: &FlowKey, out: &mut Verdict) {
        out.clear();
        let st = State {
            key: *key,
            edits: 0,
            lost: false,
        };
        self.pipeline(st, out);
    }

    /// What a PACKET_OUT's `actions` do with a frame of key `key` (its
    /// input port the packet-out's: a port, `OFPP_CONTROLLER` or
    /// `OFPP_ANY`), into `out`, cleared first: they run as a flow's
    /// apply-actions, and an output to `OFPP_TABLE` sends the frame as
    /// edited so far through the tables from table 0. Controller outputs
    /// say `OFPR_ACTION`, table 0xff and cookie all ones (no flow sent
    /// them). Refused as a FLOW_MOD's actions would be (and groups must
    /// exist). Allocates the compiled actions: a control-path call.
    pub fn packet_out(
        &self,
        key: &FlowKey,
        actions: &[ringswitch_openflow::Action],
        out: &mut Verdict,
    ) -> Result<(), crate::FlowError> {
        let acts = self.compile_packet_out(actions)?;
        out.clear();
        let mut st = State {
            key: *key,
            edits: 0,
            lost: false,
        };
        let origin = Origin {
            table_id: 0xff,
            cookie: u64::MAX,
            miss: false,
        };
        for a in &acts {
            match a {
                Act::Output {
                    port: OFPP_TABLE, ..
                } => self.pipeline(st, out),
                a => self.run(std::slice::from_ref(a), &mut st, out, origin, true),
            }
        }
        Ok(())
    }

    /// Runs a frame in state `st` through the tables from table 0, adding
    /// to `out`.
    fn pipeline(&self, mut st: State, out: &mut Verdict) {
        let mut set = ActionSet::default();
        let mut t = 0usize;
        loop {
            let table = &self.tables[t];
            out.push_tally(&table.lookups);
            let Some(rule) = table.classifier.lookup(&st.key) else {
                // No flow, not even a table-miss flow: drop.
                out.push_tally(&table.misses);
                return;
            };
            let Some(flow) = table.flows[rule.id as usize].as_ref() else {
                return;
            };
            out.push_counter(&flow.counter);
            let origin = Origin {
                table_id: t as u8,
                cookie: flow.cookie(),
                miss: flow.is_table_miss(),
            };
            let p = &flow.program;
            self.run(&p.apply, &mut st, out, origin, true);
            if p.clear {
                set = ActionSet::default();
            }
            if let Some(w) = &p.write {
                set.merge(w);
            }
            if let Some((value, mask)) = p.metadata {
                let md = st.key.metadata();
                st.key.set_metadata((md & !mask) | (value & mask));
            }
            match p.goto {
                Some(next) if usize::from(next) > t && usize::from(next) < self.tables.len() => {
                    t = usize::from(next);
                }
                _ => {
                    self.run_set(&set, &mut st, out, origin);
                    return;
                }
            }
        }
    }

    /// Runs the action set, in the specification's order.
    fn run_set(&self, set: &ActionSet, st: &mut State, out: &mut Verdict, origin: Origin) {
        if set.pop {
            edit(Edit::PopVlan, st, out);
        }
        if let Some(t) = set.push {
            edit(Edit::PushVlan(t), st, out);
        }
        let sets = [
            set.eth_dst.map(Edit::EthDst),
            set.eth_src.map(Edit::EthSrc),
            set.vid.map(Edit::VlanVid),
            set.pcp.map(Edit::VlanPcp),
            set.dscp.map(Edit::IpDscp),
        ];
        for e in sets.into_iter().flatten() {
            edit(e, st, out);
        }
        if let Some(g) = set.group {
            self.run_group(g, st, out, origin);
        } else if let Some((port, max_len)) = set.output {
            output(port, max_len, st, out, origin);
        }
    }

    /// Runs an action list on `st`; `groups` is false inside a bucket.
    fn run(&self, acts: &[Act], st: &mut State, out: &mut Verdict, origin: Origin, groups: bool) {
        for a in acts {
            match *a {
                Act::Output { port, max_len } => output(port, max_len, st, out, origin),
                Act::Group(g) if groups => self.run_group(g, st, out, origin),
                Act::Group(_) => {}
                Act::Edit(e) => edit(e, st, out),
            }
        }
    }

    fn run_group(&self, id: u32, st: &State, out: &mut Verdict, origin: Origin) {
        // A flow naming a deleted group was deleted with it; a group id
        // missing here means nothing to do.
        let Some(g) = self.groups.get(&id) else {
            return;
        };
        out.push_counter(&g.counter);
        match g.kind {
            GroupType::All => {
                for b in &g.buckets {
                    let mut copy = *st;
                    self.run(&b.acts, &mut copy, out, origin, false);
                }
            }
            GroupType::Select | GroupType::Indirect => {
                let chosen = if g.kind == GroupType::Indirect {
                    g.buckets.first()
                } else if g.total_weight == 0 {
                    None
                } else {
                    let mut point = (st.key.five_tuple_hash() % u64::from(g.total_weight)) as u32;
                    g.buckets.iter().find(|b| {
                        let w = u32::from(b.weight);
                        if point < w {
                            true
                        } else {
                            point -= w;
                            false
                        }
                    })
                };
                if let Some(b) = chosen {
                    out.push_counter(&b.counter);
                    let mut copy = *st;
                    self.run(&b.acts, &mut copy, out, origin, false);
                }
            }
            GroupType::FastFailover => {}
        }
    }
}

fn edit(e: Edit, st: &mut State, out: &mut Verdict) {
    match out.push_edit(e) {
        Some(bit) => st.edits |= bit,
        None => st.lost = true,
    }
    e.apply_to_key(&mut st.key);
}

fn output(port: u32, max_len: u16, st: &State, out: &mut Verdict, origin: Origin) {
    let target = match port {
        OFPP_IN_PORT => Target::InPort,
        OFPP_FLOOD => Target::Flood,
        OFPP_ALL => Target::All,
        OFPP_NORMAL => Target::Normal,
        OFPP_LOCAL => Target::Local,
        OFPP_CONTROLLER => Target::Controller {
            max_len,
            reason: if origin.miss {
                OFPR_NO_MATCH
            } else {
                OFPR_ACTION
            },
            table_id: origin.table_id,
            cookie: origin.cookie,
            metadata: st.key.metadata(),
        },
        // OpenFlow: a frame is not sent back out of its input port unless
        // the output says IN_PORT.
        p if p == st.key.in_port() => return,
        p if p <= OFPP_MAX => Target::Port(p),
        _ => return,
    };
    if st.lost {
        out.set_truncated();
        return;
    }
    out.push_output(target, st.edits);
}
