//! What the switch answers to each OpenFlow message, and the messages it
//! starts (FLOW_REMOVED, PORT_STATUS, PACKET_IN).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringswitch_flow::{FlowKey, Removed, Verdict};
use ringswitch_openflow::consts::*;
use ringswitch_openflow::message::{AsyncConfig, Features, PacketIn, Role, SwitchConfig};
use ringswitch_openflow::multipart::{SwitchDesc, TableFeatures};
use ringswitch_openflow::oxm::Field;
use ringswitch_openflow::{
    Body, ErrorCode, Match, Message, MultipartReply, MultipartRequest, Oxm, Received,
};
use ringswitch_switch::flows::Flows;
use ringswitch_switch::{Scratch, Switch};

use super::conn::Conn;
use super::ports::{self, Seen};

/// PACKET_INs taken from the queue per wake-up, at most.
const PACKET_INS_PER_TURN: usize = 256;

/// A switch as its OpenFlow connections see it.
pub struct Ctx {
    /// The switch's name.
    pub name: String,
    switch: Arc<Switch>,
    /// Its flow tables.
    pub flows: Arc<Flows>,
    epoch: Instant,
    datapath_id: u64,
    config: SwitchConfig,
    /// The last master election generation id, once one was given.
    generation: Option<u64>,
    seen: Seen,
    /// A PACKET_OUT's verdict, and the scratch space its frame is
    /// delivered with (made by the first PACKET_OUT).
    verdict: Verdict,
    scratch: Option<Box<Scratch>>,
}

/// What answering a message did beyond its connection.
#[derive(Default)]
pub struct Effects {
    /// Flows taken out (a delete), for FLOW_REMOVED.
    pub removed: Vec<Removed>,
    /// The connection became master: the others that were are slaves now.
    pub new_master: bool,
}

impl Ctx {
    /// The context of `switch`, whose tables' clock counts from `epoch`.
    pub fn new(switch: Arc<Switch>, flows: Arc<Flows>, epoch: Instant) -> Ctx {
        let mut seen = Seen::default();
        seen.update(&Seen::ports(&switch));
        Ctx {
            name: switch.name().to_string(),
            datapath_id: super::datapath_id(switch.name()),
            switch,
            flows,
            epoch,
            config: SwitchConfig {
                flags: 0,
                miss_send_len: 128,
            },
            generation: None,
            seen,
            verdict: Verdict::new(),
            scratch: None,
        }
    }

    /// Whether a port of the switch has OpenFlow number `no`.
    fn has_port(&self, no: u32) -> bool {
        Seen::ports(&self.switch).iter().any(|(n, _)| *n == no)
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Sends a PACKET_OUT's frame as its actions say; the error to answer
    /// with if it cannot be.
    fn packet_out(
        &mut self,
        po: &ringswitch_openflow::message::PacketOut,
    ) -> Result<(), ErrorCode> {
        let key = FlowKey::extract(&po.data, po.in_port);
        // The tables' lock only while the actions are compiled and run:
        // the frame is delivered without it.
        self.flows
            .read()
            .packet_out(&key, &po.actions, &mut self.verdict)
            .map_err(|e| e.code())?;
        let sc = self.scratch.get_or_insert_with(Box::default);
        self.switch
            .packet_out(po.in_port, &po.data, &self.verdict, sc)
            .map_err(|_| ErrorCode::BAD_REQUEST_BAD_PACKET)
    }

    /// Takes out the flows whose timeouts passed.
    pub fn expire(&mut self) -> Vec<Removed> {
        let now = self.now();
        self.flows.modify(|t| t.expire(now))
    }

    /// PORT_STATUS bodies for what changed in the ports since last time.
    pub fn port_changes(&mut self) -> Vec<Body> {
        self.seen.update(&Seen::ports(&self.switch))
    }

    /// PACKET_IN bodies for the frames queued for the controller.
    pub fn packet_ins(&mut self) -> Vec<Body> {
        let mut out = Vec::new();
        self.flows.take_packet_ins(PACKET_INS_PER_TURN, |p| {
            let mut fields = vec![Oxm::exact(Field::InPort, u128::from(p.in_port))];
            if p.metadata != 0 {
                fields.push(Oxm::exact(Field::Metadata, u128::from(p.metadata)));
            }
            let Ok(m) = Match::new(fields) else { return };
            out.push(Body::PacketIn(PacketIn {
                buffer_id: OFP_NO_BUFFER,
                total_len: u16::try_from(p.total_len).unwrap_or(u16::MAX),
                reason: p.reason,
                table_id: p.table_id,
                cookie: p.cookie,
                r#match: m,
                data: p.data.clone(),
            }));
        });
        out
    }

    /// Answers `r`, which came on `c`.
    pub fn answer(&mut self, c: &mut Conn, r: Received) -> Effects {
        let mut fx = Effects::default();
        let xid = r.message.xid;
        let modifies = matches!(
            r.message.body,
            Body::FlowMod(_)
                | Body::GroupMod(_)
                | Body::PortMod(_)
                | Body::TableMod(_)
                | Body::PacketOut(_)
        );
        if modifies && c.role == OFPCR_ROLE_SLAVE {
            c.session.refuse(&r, ErrorCode::BAD_REQUEST_IS_SLAVE);
            return fx;
        }
        let reply = match &r.message.body {
            Body::FeaturesRequest => Some(Body::FeaturesReply(Features {
                datapath_id: self.datapath_id,
                n_buffers: 0,
                n_tables: u8::try_from(self.flows.read().n_tables()).unwrap_or(u8::MAX),
                auxiliary_id: 0,
                capabilities: OFPC_FLOW_STATS
                    | OFPC_TABLE_STATS
                    | OFPC_PORT_STATS
                    | OFPC_GROUP_STATS,
            })),
            Body::GetConfigRequest => Some(Body::GetConfigReply(self.config)),
            Body::SetConfig(cfg) => {
                self.config = *cfg;
                None
            }
            Body::FlowMod(fm) => {
                let now = self.now();
                match self.flows.modify(|t| t.flow_mod(fm, now)) {
                    Ok(removed) => fx.removed = removed,
                    Err(e) => c.session.refuse(&r, e.code()),
                }
                None
            }
            Body::GroupMod(gm) => {
                let now = self.now();
                match self.flows.modify(|t| t.group_mod(gm, now)) {
                    Ok(removed) => fx.removed = removed,
                    Err(e) => c.session.refuse(&r, e.code()),
                }
                None
            }
            Body::PortMod(pm) => {
                let known = self.has_port(pm.port_no);
                c.session.refuse(
                    &r,
                    if known {
                        ErrorCode::PORT_MOD_FAILED_EPERM
                    } else {
                        ErrorCode::PORT_MOD_FAILED_BAD_PORT
                    },
                );
                None
            }
            // Table configuration is deprecated in 1.3: nothing to set.
            Body::TableMod(_) => None,
            Body::PacketOut(po) => {
                let bad = if po.buffer_id != OFP_NO_BUFFER {
                    Some(ErrorCode::BAD_REQUEST_BUFFER_UNKNOWN)
                } else if po.in_port != OFPP_CONTROLLER
                    && po.in_port != OFPP_ANY
                    && !self.has_port(po.in_port)
                {
                    Some(ErrorCode::BAD_REQUEST_BAD_PORT)
                } else {
                    self.packet_out(po).err()
                };
                if let Some(code) = bad {
                    c.session.refuse(&r, code);
                }
                None
            }
            Body::BarrierRequest => Some(Body::BarrierReply),
            Body::RoleRequest(role) => self.role(c, &r, *role, &mut fx),
            Body::GetAsyncRequest => Some(Body::GetAsyncReply(AsyncConfig {
                packet_in_mask: [0b111, 0],
                port_status_mask: [0b111, 0b111],
                flow_removed_mask: [0b1111, 0],
            })),
            // Kept as the defaults: every connection gets what a master
            // gets (TODO: per-connection asynchronous configuration).
            Body::SetAsync(_) => None,
            Body::MultipartRequest { request, .. } => {
                match self.multipart(request) {
                    Ok(reply) => {
                        for m in reply.into_messages(xid) {
                            c.send(&m);
                        }
                    }
                    Err(code) => c.session.refuse(&r, code),
                }
                None
            }
            // Replies and messages a switch sends: not for it to receive.
            _ => {
                c.session.refuse(&r, ErrorCode::BAD_REQUEST_BAD_TYPE);
                None
            }
        };
        if let Some(body) = reply {
            c.send(&Message::new(xid, body));
        }
        c.collect();
        fx
    }

    fn role(&mut self, c: &mut Conn, r: &Received, role: Role, fx: &mut Effects) -> Option<Body> {
        if role.role == OFPCR_ROLE_NOCHANGE {
            return Some(Body::RoleReply(Role {
                role: c.role,
                generation_id: self.generation.unwrap_or(0),
            }));
        }
        if role.role == OFPCR_ROLE_MASTER || role.role == OFPCR_ROLE_SLAVE {
            // Stale: older than the last one, in the wrapping order of
            // OpenFlow 1.3 (section 6.3.6).
            if let Some(g) = self.generation {
                if (role.generation_id.wrapping_sub(g) as i64) < 0 {
                    c.session.refuse(r, ErrorCode::ROLE_REQUEST_FAILED_STALE);
                    return None;
                }
            }
            self.generation = Some(role.generation_id);
        }
        c.role = role.role;
        fx.new_master = role.role == OFPCR_ROLE_MASTER;
        Some(Body::RoleReply(Role {
            role: c.role,
            generation_id: self.generation.unwrap_or(0),
        }))
    }

    fn multipart(&self, req: &MultipartRequest) -> Result<MultipartReply, ErrorCode> {
        let now = self.now();
        Ok(match req {
            MultipartRequest::Desc => MultipartReply::Desc(SwitchDesc {
                mfr_desc: "ringswitch".into(),
                hw_desc: "ringswitch userspace switch".into(),
                sw_desc: env!("CARGO_PKG_VERSION").into(),
                serial_num: "None".into(),
                dp_desc: self.name.clone(),
            }),
            MultipartRequest::Flow(f) => {
                MultipartReply::Flow(self.flows.read().flow_stats(f, now).map_err(|e| e.code())?)
            }
            MultipartRequest::Aggregate(f) => MultipartReply::Aggregate(
                self.flows.read().aggregate_stats(f).map_err(|e| e.code())?,
            ),
            MultipartRequest::Table => MultipartReply::Table(self.flows.read().table_stats()),
            MultipartRequest::TableFeatures(set) if set.is_empty() => {
                let t = self.flows.read();
                let n = u8::try_from(t.n_tables()).unwrap_or(u8::MAX);
                let max = u32::try_from(t.config().max_flows).unwrap_or(u32::MAX);
                MultipartReply::TableFeatures(
                    (0..n)
                        .map(|id| TableFeatures {
                            table_id: id,
                            name: format!("table{id}"),
                            metadata_match: u64::MAX,
                            metadata_write: u64::MAX,
                            config: 0,
                            max_entries: max,
                            properties: table_properties(id, n),
                        })
                        .collect(),
                )
            }
            // Setting table features: the tables are fixed.
            MultipartRequest::TableFeatures(_) => {
                return Err(ErrorCode::BAD_REQUEST_EPERM);
            }
            MultipartRequest::PortStats { port_no } => {
                let list: Vec<_> = Seen::ports(&self.switch)
                    .iter()
                    .filter(|(no, _)| *port_no == OFPP_ANY || port_no == no)
                    .map(|(no, p)| ports::stats(*no, p, self.seen.since(*no)))
                    .collect();
                if list.is_empty() && *port_no != OFPP_ANY {
                    return Err(ErrorCode::BAD_REQUEST_BAD_PORT);
                }
                MultipartReply::PortStats(list)
            }
            MultipartRequest::PortDesc => MultipartReply::PortDesc(
                Seen::ports(&self.switch)
                    .iter()
                    .map(|(no, p)| ports::desc(*no, p))
                    .collect(),
            ),
            MultipartRequest::Group { group_id } => {
                MultipartReply::Group(self.flows.read().group_stats(*group_id, now))
            }
            MultipartRequest::GroupDesc => {
                MultipartReply::GroupDesc(self.flows.read().group_desc())
            }
            _ => return Err(ErrorCode::BAD_REQUEST_BAD_MULTIPART),
        })
    }
}

/// The match fields the tables support, by OXM field number.
const MATCH_FIELDS: [u8; 22] = [
    0, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 26, 27,
];
/// The fields set-field writes: eth_dst, eth_src, vlan_vid, vlan_pcp,
/// ip_dscp.
const SET_FIELDS: [u8; 5] = [3, 4, 6, 7, 8];
/// The actions the tables run: output, push_vlan, pop_vlan, group,
/// set_field.
const ACTIONS: [u16; 5] = [0, 17, 18, 22, 25];
/// goto_table, write_metadata, write_actions, apply_actions,
/// clear_actions.
const INSTRUCTIONS: [u16; 5] = [1, 2, 3, 4, 5];

/// The eight properties OpenFlow 1.3 requires of a table's features, with
/// what our tables do.
fn table_properties(id: u8, n: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let oxm = |fields: &[u8], masks: bool| -> Vec<u8> {
        fields
            .iter()
            .filter_map(|&f| Field::from_id(f))
            .flat_map(|f| {
                let hasmask = masks && f.maskable();
                let len = f.size() * if hasmask { 2 } else { 1 };
                let h: u32 = (0x8000u32 << 16)
                    | (u32::from(f.id()) << 9)
                    | (u32::from(hasmask) << 8)
                    | len as u32;
                h.to_be_bytes()
            })
            .collect()
    };
    let headers = |types: &[u16]| -> Vec<u8> {
        types
            .iter()
            .flat_map(|&t| [(t >> 8) as u8, t as u8, 0, 4])
            .collect()
    };
    // goto_table is offered where a later table exists.
    let ins: Vec<u16> = INSTRUCTIONS
        .iter()
        .copied()
        .filter(|&i| i != 1 || id + 1 < n)
        .collect();
    let next: Vec<u8> = (id + 1..n).collect();
    let props: [(u16, Vec<u8>); 8] = [
        (0, headers(&ins)),
        (2, next),
        (4, headers(&ACTIONS)),
        (6, headers(&ACTIONS)),
        (8, oxm(&MATCH_FIELDS, true)),
        (10, oxm(&MATCH_FIELDS, false)),
        (12, oxm(&SET_FIELDS, false)),
        (14, oxm(&SET_FIELDS, false)),
    ];
    for (t, body) in props {
        let len = 4 + body.len();
        out.extend_from_slice(&t.to_be_bytes());
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&body);
        out.resize(out.len() + (8 - len % 8) % 8, 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_properties_are_the_eight_padded_to_8() {
        let p = table_properties(0, 8);
        assert_eq!(p.len() % 8, 0);
        let mut at = 0;
        let mut types = Vec::new();
        while at < p.len() {
            let t = u16::from_be_bytes([p[at], p[at + 1]]);
            let len = usize::from(u16::from_be_bytes([p[at + 2], p[at + 3]]));
            types.push(t);
            at += len.div_ceil(8) * 8;
        }
        assert_eq!(types, [0, 2, 4, 6, 8, 10, 12, 14]);
    }
}
