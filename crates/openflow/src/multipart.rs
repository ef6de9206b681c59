//! Multipart requests and replies (`OFPMP_*`): DESC, FLOW, AGGREGATE,
//! TABLE, PORT_STATS, PORT_DESC, GROUP, GROUP_DESC, and TABLE_FEATURES with
//! its properties kept as bytes (ovs-ofctl asks for it before most
//! commands and needs an answer). Any other multipart
//! type decodes as `Unsupported`, for the switch to refuse with
//! `BAD_REQUEST/BAD_MULTIPART`.

use crate::action::Instruction;
use crate::consts::{OFPMPF_MORE, OFP_MAX_MESSAGE_LEN};
use crate::error::DecodeError;
use crate::message::{Body, Bucket, GroupType, Message, Port, BAD_LEN};
use crate::oxm::Match;
use crate::wire::{len16, Put, Reader};

/// Multipart type numbers (`OFPMP_*`).
pub mod mp_type {
    #![allow(missing_docs)]
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
}
use mp_type as mp;

/// The body of a multipart request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartRequest {
    /// The switch's description.
    Desc,
    /// Statistics of each matching flow.
    Flow(FlowStatsRequest),
    /// Statistics summed over the matching flows.
    Aggregate(FlowStatsRequest),
    /// Statistics of each table.
    Table,
    /// Counters of a port (or all: `OFPP_ANY`).
    PortStats {
        /// The port.
        port_no: u32,
    },
    /// Every port's description.
    PortDesc,
    /// Statistics of a group (or all: `OFPG_ALL`).
    Group {
        /// The group.
        group_id: u32,
    },
    /// Every group's description.
    GroupDesc,
    /// The tables' features: empty to ask, entries to set them (which a
    /// switch may refuse). ovs-ofctl asks before most commands and needs
    /// a reply.
    TableFeatures(Vec<TableFeatures>),
    /// A multipart type this codec does not handle.
    Unsupported {
        /// Its type.
        kind: u16,
        /// Its body.
        body: Vec<u8>,
    },
}

/// Which flows a FLOW or AGGREGATE request asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStatsRequest {
    /// A table, or `OFPTT_ALL`.
    pub table_id: u8,
    /// Only flows outputting to this port (`OFPP_ANY`: all).
    pub out_port: u32,
    /// Only flows outputting to this group (`OFPG_ANY`: all).
    pub out_group: u32,
    /// Only flows whose cookie equals this under `cookie_mask`.
    pub cookie: u64,
    /// Which cookie bits to compare.
    pub cookie_mask: u64,
    /// Only flows this match covers.
    pub r#match: Match,
}

/// The body of a multipart reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartReply {
    /// The switch's description.
    Desc(SwitchDesc),
    /// One entry per flow.
    Flow(Vec<FlowStats>),
    /// Sums over flows.
    Aggregate(AggregateStats),
    /// One entry per table.
    Table(Vec<TableStats>),
    /// One entry per port.
    PortStats(Vec<PortStats>),
    /// One description per port.
    PortDesc(Vec<Port>),
    /// One entry per group.
    Group(Vec<GroupStats>),
    /// One description per group.
    GroupDesc(Vec<GroupDesc>),
    /// One entry per table.
    TableFeatures(Vec<TableFeatures>),
    /// A multipart type this codec does not handle.
    Unsupported {
        /// Its type.
        kind: u16,
        /// Its body.
        body: Vec<u8>,
    },
}

/// `ofp_desc`: who made the switch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchDesc {
    /// Manufacturer (255 bytes at most).
    pub mfr_desc: String,
    /// Hardware.
    pub hw_desc: String,
    /// Software.
    pub sw_desc: String,
    /// Serial number (31 bytes at most).
    pub serial_num: String,
    /// Which datapath this is.
    pub dp_desc: String,
}

/// `ofp_flow_stats`: one flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    /// Its table.
    pub table_id: u8,
    /// How long it has lived, seconds.
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
    /// Its priority.
    pub priority: u16,
    /// Its idle timeout.
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Its `OFPFF_*` flags.
    pub flags: u16,
    /// Its cookie.
    pub cookie: u64,
    /// Packets matched.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// Its match.
    pub r#match: Match,
    /// Its instructions.
    pub instructions: Vec<Instruction>,
}

/// `ofp_aggregate_stats_reply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AggregateStats {
    /// Packets matched by the flows.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// How many flows.
    pub flow_count: u32,
}

/// `ofp_table_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableStats {
    /// The table.
    pub table_id: u8,
    /// Flows in it.
    pub active_count: u32,
    /// Packets looked up in it.
    pub lookup_count: u64,
    /// Packets that matched a flow in it.
    pub matched_count: u64,
}

/// `ofp_port_stats`: a port's counters (all ones when not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    /// The port.
    pub port_no: u32,
    /// rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped, tx_dropped,
    /// rx_errors, tx_errors, rx_frame_err, rx_over_err, rx_crc_err,
    /// collisions, in this order.
    pub counters: [u64; 12],
    /// How long the port has been up, seconds.
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
}

/// `ofp_group_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupStats {
    /// The group.
    pub group_id: u32,
    /// Flows that point to it.
    pub ref_count: u32,
    /// Packets it processed.
    pub packet_count: u64,
    /// Bytes it processed.
    pub byte_count: u64,
    /// How long it has lived, seconds.
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
    /// (packets, bytes) per bucket.
    pub buckets: Vec<(u64, u64)>,
}

/// `ofp_table_features`: a table's name and limits; its properties are
/// kept as bytes, not decoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableFeatures {
    /// The table.
    pub table_id: u8,
    /// Its name (31 bytes at most).
    pub name: String,
    /// Metadata bits it can match.
    pub metadata_match: u64,
    /// Metadata bits it can write.
    pub metadata_write: u64,
    /// `OFPTC_*` bits.
    pub config: u32,
    /// How many flows it holds at most.
    pub max_entries: u32,
    /// The raw `ofp_table_feature_prop_*` list (a multiple of 8 bytes).
    pub properties: Vec<u8>,
}

const TABLE_NAME_LEN: usize = 32;

impl TableFeatures {
    fn decode_list(body: &[u8]) -> Result<Vec<TableFeatures>, DecodeError> {
        let mut out = Vec::new();
        for e in entries(body, 64)? {
            let mut e = Reader::new(e, BAD_LEN);
            e.skip(2)?;
            let table_id = e.u8()?;
            e.skip(5)?;
            out.push(TableFeatures {
                table_id,
                name: e.fixed_str(TABLE_NAME_LEN)?,
                metadata_match: e.u64()?,
                metadata_write: e.u64()?,
                config: e.u32()?,
                max_entries: e.u32()?,
                properties: e.rest().to_vec(),
            });
        }
        Ok(out)
    }

    fn encode_list(list: &[TableFeatures], out: &mut Vec<u8>) {
        for t in list {
            let start = out.len();
            out.put_u16(0);
            out.put_u8(t.table_id);
            out.put_zeros(5);
            out.put_fixed_str(&t.name, TABLE_NAME_LEN);
            out.put_u64(t.metadata_match);
            out.put_u64(t.metadata_write);
            out.put_u32(t.config);
            out.put_u32(t.max_entries);
            out.extend_from_slice(&t.properties);
            out.pad8_from(start);
            let len = len16(out, start);
            out.patch_u16(start, len);
        }
    }
}

/// `ofp_group_desc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDesc {
    /// Its type.
    pub group_type: GroupType,
    /// The group.
    pub group_id: u32,
    /// Its buckets.
    pub buckets: Vec<Bucket>,
}

fn empty(body: &[u8]) -> Result<(), DecodeError> {
    if body.is_empty() {
        Ok(())
    } else {
        Err(BAD_LEN)
    }
}

/// Splits `body` into entries that each start with their u16 length, a
/// multiple of 8 and at least `min`.
fn entries(body: &[u8], min: usize) -> Result<Vec<&[u8]>, DecodeError> {
    let mut rest = body;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = match rest {
            [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])),
            _ => return Err(BAD_LEN),
        };
        if len < min || !len.is_multiple_of(8) {
            return Err(BAD_LEN);
        }
        let (entry, tail) = rest.split_at_checked(len).ok_or(BAD_LEN)?;
        out.push(entry);
        rest = tail;
    }
    Ok(out)
}

impl FlowStatsRequest {
    fn decode(body: &[u8]) -> Result<FlowStatsRequest, DecodeError> {
        let mut r = Reader::new(body, BAD_LEN);
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        let q = FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            r#match: Match::decode(&mut r)?,
        };
        empty(r.rest())?;
        Ok(q)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.put_zeros(3);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_zeros(4);
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        self.r#match.encode(out);
    }
}

impl MultipartRequest {
    /// Its multipart type number.
    pub fn kind(&self) -> u16 {
        match self {
            MultipartRequest::Desc => mp::DESC,
            MultipartRequest::Flow(_) => mp::FLOW,
            MultipartRequest::Aggregate(_) => mp::AGGREGATE,
            MultipartRequest::Table => mp::TABLE,
            MultipartRequest::PortStats { .. } => mp::PORT_STATS,
            MultipartRequest::PortDesc => mp::PORT_DESC,
            MultipartRequest::Group { .. } => mp::GROUP,
            MultipartRequest::GroupDesc => mp::GROUP_DESC,
            MultipartRequest::TableFeatures(_) => mp::TABLE_FEATURES,
            MultipartRequest::Unsupported { kind, .. } => *kind,
        }
    }

    pub(crate) fn decode(kind: u16, body: &[u8]) -> Result<MultipartRequest, DecodeError> {
        let mut r = Reader::new(body, BAD_LEN);
        let q = match kind {
            mp::DESC => MultipartRequest::Desc,
            mp::FLOW => return FlowStatsRequest::decode(body).map(MultipartRequest::Flow),
            mp::AGGREGATE => {
                return FlowStatsRequest::decode(body).map(MultipartRequest::Aggregate)
            }
            mp::TABLE => MultipartRequest::Table,
            mp::PORT_STATS => {
                let port_no = r.u32()?;
                r.skip(4)?;
                MultipartRequest::PortStats { port_no }
            }
            mp::PORT_DESC => MultipartRequest::PortDesc,
            mp::GROUP => {
                let group_id = r.u32()?;
                r.skip(4)?;
                MultipartRequest::Group { group_id }
            }
            mp::GROUP_DESC => MultipartRequest::GroupDesc,
            mp::TABLE_FEATURES => {
                MultipartRequest::TableFeatures(TableFeatures::decode_list(r.rest())?)
            }
            _ => MultipartRequest::Unsupported {
                kind,
                body: r.rest().to_vec(),
            },
        };
        empty(r.rest())?;
        Ok(q)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MultipartRequest::Desc
            | MultipartRequest::Table
            | MultipartRequest::PortDesc
            | MultipartRequest::GroupDesc => {}
            MultipartRequest::Flow(q) | MultipartRequest::Aggregate(q) => q.encode(out),
            MultipartRequest::PortStats { port_no: id }
            | MultipartRequest::Group { group_id: id } => {
                out.put_u32(*id);
                out.put_zeros(4);
            }
            MultipartRequest::TableFeatures(list) => TableFeatures::encode_list(list, out),
            MultipartRequest::Unsupported { body, .. } => out.extend_from_slice(body),
        }
    }
}

/// `DESC_STR_LEN` and `SERIAL_NUM_LEN`.
const DESC_STR_LEN: usize = 256;
const SERIAL_NUM_LEN: usize = 32;

/// Splits `items` into as few lists as keep each reply's message within
/// 65535 bytes (an item too big on its own still gets a list of its own).
fn split<T: Clone>(items: Vec<T>, wrap: impl Fn(Vec<T>) -> MultipartReply) -> Vec<MultipartReply> {
    // The header and the multipart header.
    const ROOM: usize = OFP_MAX_MESSAGE_LEN - 16;
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut used = 0;
    for item in items {
        let mut one = Vec::new();
        wrap(vec![item.clone()]).encode(&mut one);
        if used + one.len() > ROOM && !cur.is_empty() {
            out.push(wrap(std::mem::take(&mut cur)));
            used = 0;
        }
        used += one.len();
        cur.push(item);
    }
    out.push(wrap(cur));
    out
}

impl MultipartReply {
    /// The reply as the messages that carry it: a list too long for one
    /// message is split, every message but the last flagged
    /// `OFPMPF_REPLY_MORE`, all with `xid`.
    pub fn into_messages(self, xid: u32) -> Vec<Message> {
        let parts = match self {
            MultipartReply::Flow(v) => split(v, MultipartReply::Flow),
            MultipartReply::Table(v) => split(v, MultipartReply::Table),
            MultipartReply::PortStats(v) => split(v, MultipartReply::PortStats),
            MultipartReply::PortDesc(v) => split(v, MultipartReply::PortDesc),
            MultipartReply::Group(v) => split(v, MultipartReply::Group),
            MultipartReply::GroupDesc(v) => split(v, MultipartReply::GroupDesc),
            MultipartReply::TableFeatures(v) => split(v, MultipartReply::TableFeatures),
            one => vec![one],
        };
        let last = parts.len() - 1;
        parts
            .into_iter()
            .enumerate()
            .map(|(i, reply)| {
                let flags = if i < last { OFPMPF_MORE } else { 0 };
                Message::new(xid, Body::MultipartReply { flags, reply })
            })
            .collect()
    }

    /// Its multipart type number.
    pub fn kind(&self) -> u16 {
        match self {
            MultipartReply::Desc(_) => mp::DESC,
            MultipartReply::Flow(_) => mp::FLOW,
            MultipartReply::Aggregate(_) => mp::AGGREGATE,
            MultipartReply::Table(_) => mp::TABLE,
            MultipartReply::PortStats(_) => mp::PORT_STATS,
            MultipartReply::PortDesc(_) => mp::PORT_DESC,
            MultipartReply::Group(_) => mp::GROUP,
            MultipartReply::GroupDesc(_) => mp::GROUP_DESC,
            MultipartReply::TableFeatures(_) => mp::TABLE_FEATURES,
            MultipartReply::Unsupported { kind, .. } => *kind,
        }
    }

    pub(crate) fn decode(kind: u16, body: &[u8]) -> Result<MultipartReply, DecodeError> {
        let mut r = Reader::new(body, BAD_LEN);
        let reply = match kind {
            mp::DESC => MultipartReply::Desc(SwitchDesc {
                mfr_desc: r.fixed_str(DESC_STR_LEN)?,
                hw_desc: r.fixed_str(DESC_STR_LEN)?,
                sw_desc: r.fixed_str(DESC_STR_LEN)?,
                serial_num: r.fixed_str(SERIAL_NUM_LEN)?,
                dp_desc: r.fixed_str(DESC_STR_LEN)?,
            }),
            mp::FLOW => {
                let mut flows = Vec::new();
                for e in entries(body, 56)? {
                    let mut e = Reader::new(e, BAD_LEN);
                    e.skip(2)?;
                    let table_id = e.u8()?;
                    e.skip(1)?;
                    let duration_sec = e.u32()?;
                    let duration_nsec = e.u32()?;
                    let priority = e.u16()?;
                    let idle_timeout = e.u16()?;
                    let hard_timeout = e.u16()?;
                    let flags = e.u16()?;
                    e.skip(4)?;
                    flows.push(FlowStats {
                        table_id,
                        duration_sec,
                        duration_nsec,
                        priority,
                        idle_timeout,
                        hard_timeout,
                        flags,
                        cookie: e.u64()?,
                        packet_count: e.u64()?,
                        byte_count: e.u64()?,
                        r#match: Match::decode(&mut e)?,
                        instructions: Instruction::decode_list(e.rest())?,
                    });
                }
                r.rest();
                MultipartReply::Flow(flows)
            }
            mp::AGGREGATE => {
                let a = AggregateStats {
                    packet_count: r.u64()?,
                    byte_count: r.u64()?,
                    flow_count: r.u32()?,
                };
                r.skip(4)?;
                MultipartReply::Aggregate(a)
            }
            mp::TABLE => {
                if !body.len().is_multiple_of(24) {
                    return Err(BAD_LEN);
                }
                let mut tables = Vec::new();
                while r.remaining() > 0 {
                    let table_id = r.u8()?;
                    r.skip(3)?;
                    tables.push(TableStats {
                        table_id,
                        active_count: r.u32()?,
                        lookup_count: r.u64()?,
                        matched_count: r.u64()?,
                    });
                }
                MultipartReply::Table(tables)
            }
            mp::PORT_STATS => {
                if !body.len().is_multiple_of(112) {
                    return Err(BAD_LEN);
                }
                let mut ports = Vec::new();
                while r.remaining() > 0 {
                    let port_no = r.u32()?;
                    r.skip(4)?;
                    let mut counters = [0u64; 12];
                    for c in &mut counters {
                        *c = r.u64()?;
                    }
                    ports.push(PortStats {
                        port_no,
                        counters,
                        duration_sec: r.u32()?,
                        duration_nsec: r.u32()?,
                    });
                }
                MultipartReply::PortStats(ports)
            }
            mp::PORT_DESC => MultipartReply::PortDesc(Port::decode_list(r.rest())?),
            mp::GROUP => {
                let mut groups = Vec::new();
                for e in entries(body, 40)? {
                    let mut e = Reader::new(e, BAD_LEN);
                    e.skip(4)?;
                    let group_id = e.u32()?;
                    let ref_count = e.u32()?;
                    e.skip(4)?;
                    let mut g = GroupStats {
                        group_id,
                        ref_count,
                        packet_count: e.u64()?,
                        byte_count: e.u64()?,
                        duration_sec: e.u32()?,
                        duration_nsec: e.u32()?,
                        buckets: Vec::new(),
                    };
                    if !e.remaining().is_multiple_of(16) {
                        return Err(BAD_LEN);
                    }
                    while e.remaining() > 0 {
                        g.buckets.push((e.u64()?, e.u64()?));
                    }
                    groups.push(g);
                }
                r.rest();
                MultipartReply::Group(groups)
            }
            mp::TABLE_FEATURES => {
                MultipartReply::TableFeatures(TableFeatures::decode_list(r.rest())?)
            }
            mp::GROUP_DESC => {
                let mut groups = Vec::new();
                for e in entries(body, 8)? {
                    let mut e = Reader::new(e, BAD_LEN);
                    e.skip(2)?;
                    let group_type = GroupType::from_wire(e.u8()?).ok_or(BAD_LEN)?;
                    e.skip(1)?;
                    groups.push(GroupDesc {
                        group_type,
                        group_id: e.u32()?,
                        buckets: Bucket::decode_list(e.rest())?,
                    });
                }
                r.rest();
                MultipartReply::GroupDesc(groups)
            }
            _ => MultipartReply::Unsupported {
                kind,
                body: r.rest().to_vec(),
            },
        };
        empty(r.rest())?;
        Ok(reply)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MultipartReply::Desc(d) => {
                out.put_fixed_str(&d.mfr_desc, DESC_STR_LEN);
                out.put_fixed_str(&d.hw_desc, DESC_STR_LEN);
                out.put_fixed_str(&d.sw_desc, DESC_STR_LEN);
                out.put_fixed_str(&d.serial_num, SERIAL_NUM_LEN);
                out.put_fixed_str(&d.dp_desc, DESC_STR_LEN);
            }
            MultipartReply::Flow(flows) => {
                for f in flows {
                    let start = out.len();
                    out.put_u16(0);
                    out.put_u8(f.table_id);
                    out.put_zeros(1);
                    out.put_u32(f.duration_sec);
                    out.put_u32(f.duration_nsec);
                    out.put_u16(f.priority);
                    out.put_u16(f.idle_timeout);
                    out.put_u16(f.hard_timeout);
                    out.put_u16(f.flags);
                    out.put_zeros(4);
                    out.put_u64(f.cookie);
                    out.put_u64(f.packet_count);
                    out.put_u64(f.byte_count);
                    f.r#match.encode(out);
                    Instruction::encode_list(&f.instructions, out);
                    let len = len16(out, start);
                    out.patch_u16(start, len);
                }
            }
            MultipartReply::Aggregate(a) => {
                out.put_u64(a.packet_count);
                out.put_u64(a.byte_count);
                out.put_u32(a.flow_count);
                out.put_zeros(4);
            }
            MultipartReply::Table(tables) => {
                for t in tables {
                    out.put_u8(t.table_id);
                    out.put_zeros(3);
                    out.put_u32(t.active_count);
                    out.put_u64(t.lookup_count);
                    out.put_u64(t.matched_count);
                }
            }
            MultipartReply::PortStats(ports) => {
                for p in ports {
                    out.put_u32(p.port_no);
                    out.put_zeros(4);
                    for c in p.counters {
                        out.put_u64(c);
                    }
                    out.put_u32(p.duration_sec);
                    out.put_u32(p.duration_nsec);
                }
            }
            MultipartReply::PortDesc(ports) => {
                for p in ports {
                    p.encode(out);
                }
            }
            MultipartReply::Group(groups) => {
                for g in groups {
                    let start = out.len();
                    out.put_u16(0);
                    out.put_zeros(2);
                    out.put_u32(g.group_id);
                    out.put_u32(g.ref_count);
                    out.put_zeros(4);
                    out.put_u64(g.packet_count);
                    out.put_u64(g.byte_count);
                    out.put_u32(g.duration_sec);
                    out.put_u32(g.duration_nsec);
                    for (p, b) in &g.buckets {
                        out.put_u64(*p);
                        out.put_u64(*b);
                    }
                    let len = len16(out, start);
                    out.patch_u16(start, len);
                }
            }
            MultipartReply::GroupDesc(groups) => {
                for g in groups {
                    let start = out.len();
                    out.put_u16(0);
                    out.put_u8(g.group_type.wire());
                    out.put_zeros(1);
                    out.put_u32(g.group_id);
                    Bucket::encode_list(&g.buckets, out);
                    let len = len16(out, start);
                    out.patch_u16(start, len);
                }
            }
            MultipartReply::TableFeatures(list) => TableFeatures::encode_list(list, out),
            MultipartReply::Unsupported { body, .. } => out.extend_from_slice(body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::oxm::{Field, Oxm};

    #[test]
    fn long_replies_split_into_messages_that_fit() {
        let flow = FlowStats {
            table_id: 0,
            duration_sec: 0,
            duration_nsec: 0,
            priority: 1,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            cookie: 0,
            packet_count: 0,
            byte_count: 0,
            r#match: Match::new(vec![Oxm::exact(Field::InPort, 1)]).unwrap(),
            instructions: vec![Instruction::ApplyActions(vec![Action::Output {
                port: 2,
                max_len: 0,
            }])],
        };
        let flows = vec![flow; 3000];
        let msgs = MultipartReply::Flow(flows.clone()).into_messages(5);
        assert!(msgs.len() > 1);
        let mut back = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let wire = m.encode().expect("each part fits");
            let Body::MultipartReply {
                flags,
                reply: MultipartReply::Flow(part),
            } = Message::decode(&wire).unwrap().body
            else {
                panic!("not a flow reply");
            };
            assert_eq!(flags, if i + 1 < msgs.len() { OFPMPF_MORE } else { 0 });
            assert!(wire.len() > 60_000 || i + 1 == msgs.len());
            back.extend(part);
        }
        assert_eq!(back, flows);
        // Short replies and non-lists are one message.
        assert_eq!(MultipartReply::Flow(vec![]).into_messages(1).len(), 1);
        assert_eq!(
            MultipartReply::Aggregate(AggregateStats::default())
                .into_messages(1)
                .len(),
            1
        );
    }
}
