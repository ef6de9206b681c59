//! Whole messages: the header, the typed body of every message type a
//! switch sends or receives, and the `OFPT_ERROR` reply to a refused one.
//!
//! [`Message::decode`] takes exactly one framed message (see
//! [`crate::Framer`]) and either returns it typed or says, as a
//! [`DecodeError`], which `OFPT_ERROR` the switch must answer with. Lengths
//! are checked in a fixed order: the header's length against the bytes,
//! then each fixed part, then each nested length against what holds it;
//! fixed-size messages must be exactly their size.

use crate::action::{Action, Instruction};
use crate::consts::*;
use crate::error::{err, DecodeError, EncodeError, ErrorCode};
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::oxm::Match;
use crate::wire::{len16, pad8, Put, Reader};

/// The common header of every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version.
    pub version: u8,
    /// Message type (`OFPT_*`).
    pub kind: u8,
    /// Length of the whole message, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// The header at the start of `bytes`, if there are 8 bytes.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let b: &[u8; 8] = bytes.get(..8)?.try_into().ok()?;
        Some(Header {
            version: b[0],
            kind: b[1],
            length: u16::from_be_bytes([b[2], b[3]]),
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Message type numbers (`OFPT_*`).
pub mod msg_type {
    #![allow(missing_docs)]
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
}
use msg_type as t;

/// A message: its transaction id and typed body. The version is
/// [`OFP_VERSION`] for every body but [`Body::Hello`], which says its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Transaction id.
    pub xid: u32,
    /// What the message says.
    pub body: Body,
}

/// The body of a message, one variant per supported type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// `OFPT_HELLO`.
    Hello(Hello),
    /// `OFPT_ERROR`.
    Error(ErrorMsg),
    /// `OFPT_ECHO_REQUEST` and its arbitrary data.
    EchoRequest(Vec<u8>),
    /// `OFPT_ECHO_REPLY` and the data echoed.
    EchoReply(Vec<u8>),
    /// `OFPT_FEATURES_REQUEST`.
    FeaturesRequest,
    /// `OFPT_FEATURES_REPLY`.
    FeaturesReply(Features),
    /// `OFPT_GET_CONFIG_REQUEST`.
    GetConfigRequest,
    /// `OFPT_GET_CONFIG_REPLY`.
    GetConfigReply(SwitchConfig),
    /// `OFPT_SET_CONFIG`.
    SetConfig(SwitchConfig),
    /// `OFPT_PACKET_IN`.
    PacketIn(PacketIn),
    /// `OFPT_FLOW_REMOVED`.
    FlowRemoved(FlowRemoved),
    /// `OFPT_PORT_STATUS`.
    PortStatus(PortStatus),
    /// `OFPT_PACKET_OUT`.
    PacketOut(PacketOut),
    /// `OFPT_FLOW_MOD`.
    FlowMod(FlowMod),
    /// `OFPT_GROUP_MOD`.
    GroupMod(GroupMod),
    /// `OFPT_PORT_MOD` (decoded so that it can be refused properly).
    PortMod(PortMod),
    /// `OFPT_TABLE_MOD`.
    TableMod(TableMod),
    /// `OFPT_MULTIPART_REQUEST`.
    MultipartRequest {
        /// `OFPMPF_REQ_MORE` or 0.
        flags: u16,
        /// The request.
        request: MultipartRequest,
    },
    /// `OFPT_MULTIPART_REPLY`.
    MultipartReply {
        /// `OFPMPF_REPLY_MORE` or 0.
        flags: u16,
        /// The reply.
        reply: MultipartReply,
    },
    /// `OFPT_BARRIER_REQUEST`.
    BarrierRequest,
    /// `OFPT_BARRIER_REPLY`.
    BarrierReply,
    /// `OFPT_ROLE_REQUEST`.
    RoleRequest(Role),
    /// `OFPT_ROLE_REPLY`.
    RoleReply(Role),
    /// `OFPT_GET_ASYNC_REQUEST`.
    GetAsyncRequest,
    /// `OFPT_GET_ASYNC_REPLY`.
    GetAsyncReply(AsyncConfig),
    /// `OFPT_SET_ASYNC`.
    SetAsync(AsyncConfig),
}

/// `OFPT_HELLO`: the sender's highest version and its hello elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The version in the header: the highest the sender speaks.
    pub version: u8,
    /// The hello elements (only read for version 0x04 and above).
    pub elements: Vec<HelloElement>,
}

/// One hello element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloElement {
    /// `OFPHET_VERSIONBITMAP`: bit `v % 32` of word `v / 32` set for each
    /// version `v` the sender speaks.
    VersionBitmap(Vec<u32>),
    /// An element type this codec does not know (ignored, as the spec says).
    Unknown {
        /// Its type.
        kind: u16,
        /// Its body.
        data: Vec<u8>,
    },
}

impl Hello {
    /// Our HELLO: version 0x04 with a bitmap of just 0x04.
    pub fn ours() -> Hello {
        Hello {
            version: OFP_VERSION,
            elements: vec![HelloElement::VersionBitmap(vec![1 << OFP_VERSION])],
        }
    }

    /// The version bitmap, if the peer sent one.
    pub fn bitmap(&self) -> Option<&[u32]> {
        self.elements.iter().find_map(|e| match e {
            HelloElement::VersionBitmap(b) => Some(b.as_slice()),
            HelloElement::Unknown { .. } => None,
        })
    }

    /// Whether the peer speaks `version`: by its bitmap if it sent one,
    /// else by its header version being at least `version`.
    pub fn speaks(&self, version: u8) -> bool {
        match self.bitmap() {
            Some(words) => words
                .get(usize::from(version / 32))
                .is_some_and(|w| w & (1 << (version % 32)) != 0),
            None => self.version >= version,
        }
    }
}

/// `OFPT_ERROR`: a (type, code) and data (the offending request's first
/// bytes, or ASCII text for `HELLO_FAILED`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMsg {
    /// The (type, code).
    pub code: ErrorCode,
    /// What follows them.
    pub data: Vec<u8>,
}

/// `OFPT_FEATURES_REPLY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Datapath id: 48 bits of MAC address and 16 the implementer's.
    pub datapath_id: u64,
    /// Packets the switch can buffer (0: none).
    pub n_buffers: u32,
    /// Flow tables.
    pub n_tables: u8,
    /// 0 for the main connection.
    pub auxiliary_id: u8,
    /// `OFPC_*` bits.
    pub capabilities: u32,
}

/// `OFPT_GET_CONFIG_REPLY` and `OFPT_SET_CONFIG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*` bits.
    pub flags: u16,
    /// Bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

/// `OFPT_PACKET_IN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    /// `OFP_NO_BUFFER` on a switch that buffers nothing.
    pub buffer_id: u32,
    /// The frame's full length.
    pub total_len: u16,
    /// `OFPR_*`.
    pub reason: u8,
    /// The table the packet was looked up in.
    pub table_id: u8,
    /// The cookie of the flow that sent it.
    pub cookie: u64,
    /// The packet's pipeline fields (at least `in_port`).
    pub r#match: Match,
    /// The frame, or its first bytes.
    pub data: Vec<u8>,
}

/// `OFPT_FLOW_REMOVED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved {
    /// The flow's cookie.
    pub cookie: u64,
    /// Its priority.
    pub priority: u16,
    /// `OFPRR_*`.
    pub reason: u8,
    /// Its table.
    pub table_id: u8,
    /// How long it lived, seconds.
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
    /// Its idle timeout.
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packet_count: u64,
    /// Bytes it matched.
    pub byte_count: u64,
    /// Its match.
    pub r#match: Match,
}

/// `OFPT_PORT_STATUS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortStatus {
    /// `OFPPR_*`.
    pub reason: u8,
    /// The port.
    pub desc: Port,
}

/// `ofp_port`: a port's description.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Port {
    /// OpenFlow port number.
    pub port_no: u32,
    /// MAC address.
    pub hw_addr: [u8; 6],
    /// Name (at most 15 bytes on the wire).
    pub name: String,
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// Current features (`OFPPF_*`).
    pub curr: u32,
    /// Advertised features.
    pub advertised: u32,
    /// Supported features.
    pub supported: u32,
    /// Features advertised by the peer.
    pub peer: u32,
    /// Current bit rate, kbit/s.
    pub curr_speed: u32,
    /// Maximum bit rate, kbit/s.
    pub max_speed: u32,
}

/// The size of `ofp_port`.
const PORT_LEN: usize = 64;
/// `OFP_MAX_PORT_NAME_LEN`.
const PORT_NAME_LEN: usize = 16;

impl Port {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Port, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = r.array()?;
        r.skip(2)?;
        Ok(Port {
            port_no,
            hw_addr,
            name: r.fixed_str(PORT_NAME_LEN)?,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.put_zeros(4);
        out.extend_from_slice(&self.hw_addr);
        out.put_zeros(2);
        out.put_fixed_str(&self.name, PORT_NAME_LEN);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.put_u32(v);
        }
    }

    /// Reads the ports filling `bytes`.
    pub(crate) fn decode_list(bytes: &[u8]) -> Result<Vec<Port>, DecodeError> {
        if !bytes.len().is_multiple_of(PORT_LEN) {
            return Err(BAD_LEN);
        }
        let mut r = Reader::new(bytes, BAD_LEN);
        let mut out = Vec::new();
        while r.remaining() > 0 {
            out.push(Port::decode(&mut r)?);
        }
        Ok(out)
    }
}

/// `OFPT_PACKET_OUT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    /// `OFP_NO_BUFFER`, or a buffer the switch holds.
    pub buffer_id: u32,
    /// The port the packet is taken to have come in on.
    pub in_port: u32,
    /// What to do with it.
    pub actions: Vec<Action>,
    /// The frame (when not buffered).
    pub data: Vec<u8>,
}

/// A flow-mod command (`OFPFC_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowModCommand {
    /// Add a flow.
    Add,
    /// Modify the actions of matching flows.
    Modify,
    /// Modify the flow of exactly this match and priority.
    ModifyStrict,
    /// Delete matching flows.
    Delete,
    /// Delete the flow of exactly this match and priority.
    DeleteStrict,
}

impl FlowModCommand {
    fn from_wire(v: u8) -> Option<FlowModCommand> {
        Some(match v {
            OFPFC_ADD => FlowModCommand::Add,
            OFPFC_MODIFY => FlowModCommand::Modify,
            OFPFC_MODIFY_STRICT => FlowModCommand::ModifyStrict,
            OFPFC_DELETE => FlowModCommand::Delete,
            OFPFC_DELETE_STRICT => FlowModCommand::DeleteStrict,
            _ => return None,
        })
    }

    fn wire(self) -> u8 {
        match self {
            FlowModCommand::Add => OFPFC_ADD,
            FlowModCommand::Modify => OFPFC_MODIFY,
            FlowModCommand::ModifyStrict => OFPFC_MODIFY_STRICT,
            FlowModCommand::Delete => OFPFC_DELETE,
            FlowModCommand::DeleteStrict => OFPFC_DELETE_STRICT,
        }
    }
}

/// `OFPT_FLOW_MOD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    /// The flow's cookie (add), or the cookie to select by (modify/delete).
    pub cookie: u64,
    /// Which cookie bits must equal `cookie` when selecting.
    pub cookie_mask: u64,
    /// The table (`OFPTT_ALL` only for deletes).
    pub table_id: u8,
    /// What to do.
    pub command: FlowModCommand,
    /// Idle timeout in seconds, 0 for none.
    pub idle_timeout: u16,
    /// Hard timeout in seconds, 0 for none.
    pub hard_timeout: u16,
    /// Priority.
    pub priority: u16,
    /// A buffered packet to apply the flow to, or `OFP_NO_BUFFER`.
    pub buffer_id: u32,
    /// For deletes: only flows that output to this port (`OFPP_ANY`: all).
    pub out_port: u32,
    /// For deletes: only flows that output to this group (`OFPG_ANY`: all).
    pub out_group: u32,
    /// `OFPFF_*` bits.
    pub flags: u16,
    /// The match.
    pub r#match: Match,
    /// The instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    /// An add of a permanent flow (cookie 0, no timeouts, no flags, no
    /// buffer) in table `table_id`: what tools and tests mostly build; set
    /// the public fields for the rest.
    pub fn add(
        table_id: u8,
        priority: u16,
        r#match: Match,
        instructions: Vec<Instruction>,
    ) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id,
            command: FlowModCommand::Add,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            r#match,
            instructions,
        }
    }
}

/// A group type (`OFPGT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupType {
    /// Every bucket (multicast, flooding).
    All,
    /// One bucket chosen by the switch (load sharing).
    Select,
    /// The one bucket.
    Indirect,
    /// The first live bucket.
    FastFailover,
}

impl GroupType {
    pub(crate) fn from_wire(v: u8) -> Option<GroupType> {
        Some(match v {
            OFPGT_ALL => GroupType::All,
            OFPGT_SELECT => GroupType::Select,
            OFPGT_INDIRECT => GroupType::Indirect,
            OFPGT_FF => GroupType::FastFailover,
            _ => return None,
        })
    }

    pub(crate) fn wire(self) -> u8 {
        match self {
            GroupType::All => OFPGT_ALL,
            GroupType::Select => OFPGT_SELECT,
            GroupType::Indirect => OFPGT_INDIRECT,
            GroupType::FastFailover => OFPGT_FF,
        }
    }
}

/// A group-mod command (`OFPGC_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupCommand {
    /// Add a group.
    Add,
    /// Replace a group's type and buckets.
    Modify,
    /// Delete a group (or all: `OFPG_ALL`).
    Delete,
}

/// `OFPT_GROUP_MOD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMod {
    /// What to do.
    pub command: GroupCommand,
    /// The group's type.
    pub group_type: GroupType,
    /// The group (at most `OFPG_MAX`, or `OFPG_ALL` in a delete).
    pub group_id: u32,
    /// Its buckets.
    pub buckets: Vec<Bucket>,
}

/// `ofp_bucket`: a group's bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Relative weight, for select groups.
    pub weight: u16,
    /// Port whose liveness decides, for fast-failover groups.
    pub watch_port: u32,
    /// Group whose liveness decides, for fast-failover groups.
    pub watch_group: u32,
    /// Its actions.
    pub actions: Vec<Action>,
}

const BAD_BUCKET: DecodeError = err(
    ErrorCode::GROUP_MOD_FAILED_BAD_BUCKET,
    "a bucket's length is shorter than a bucket, not a multiple of 8, or runs past its group",
);

impl Bucket {
    /// Reads the buckets filling `bytes`, at most [`MAX_BUCKETS`].
    pub(crate) fn decode_list(bytes: &[u8]) -> Result<Vec<Bucket>, DecodeError> {
        let mut r = Reader::new(bytes, BAD_BUCKET);
        let mut out = Vec::new();
        while r.remaining() > 0 {
            if out.len() == MAX_BUCKETS {
                return Err(err(
                    ErrorCode::GROUP_MOD_FAILED_OUT_OF_BUCKETS,
                    "a group holds more buckets than the switch takes (256)",
                ));
            }
            let len = usize::from(r.u16()?);
            if len < 16 || !len.is_multiple_of(8) {
                return Err(BAD_BUCKET);
            }
            let mut b = Reader::new(r.bytes(len - 2)?, BAD_BUCKET);
            let weight = b.u16()?;
            let watch_port = b.u32()?;
            let watch_group = b.u32()?;
            b.skip(4)?;
            out.push(Bucket {
                weight,
                watch_port,
                watch_group,
                actions: Action::decode_list(b.rest())?,
            });
        }
        Ok(out)
    }

    /// Appends buckets.
    pub(crate) fn encode_list(list: &[Bucket], out: &mut Vec<u8>) {
        for b in list {
            let start = out.len();
            out.put_u16(0);
            out.put_u16(b.weight);
            out.put_u32(b.watch_port);
            out.put_u32(b.watch_group);
            out.put_zeros(4);
            Action::encode_list(&b.actions, out);
            let len = len16(out, start);
            out.patch_u16(start, len);
        }
    }
}

/// `OFPT_PORT_MOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMod {
    /// The port.
    pub port_no: u32,
    /// Its MAC address, as a check.
    pub hw_addr: [u8; 6],
    /// New `OFPPC_*` bits.
    pub config: u32,
    /// Which config bits to change.
    pub mask: u32,
    /// Features to advertise, 0 for no change.
    pub advertise: u32,
}

/// `OFPT_TABLE_MOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableMod {
    /// The table, or `OFPTT_ALL`.
    pub table_id: u8,
    /// `OFPTC_*` bits (deprecated in 1.3).
    pub config: u32,
}

/// `OFPT_ROLE_REQUEST` and `OFPT_ROLE_REPLY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    /// `OFPCR_ROLE_*`.
    pub role: u32,
    /// Master election generation id.
    pub generation_id: u64,
}

/// `OFPT_GET_ASYNC_REPLY` and `OFPT_SET_ASYNC`: which asynchronous
/// messages go to a controller, index 0 in the master or equal role and
/// index 1 in the slave role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncConfig {
    /// Bit `1 << OFPR_*` for each PACKET_IN reason wanted.
    pub packet_in_mask: [u32; 2],
    /// Bit `1 << OFPPR_*` for each PORT_STATUS reason wanted.
    pub port_status_mask: [u32; 2],
    /// Bit `1 << OFPRR_*` for each FLOW_REMOVED reason wanted.
    pub flow_removed_mask: [u32; 2],
}

pub(crate) const BAD_LEN: DecodeError = err(
    ErrorCode::BAD_REQUEST_BAD_LEN,
    "a message's length does not fit its type's layout",
);

impl Message {
    /// A message with `xid` and `body`.
    pub fn new(xid: u32, body: Body) -> Message {
        Message { xid, body }
    }

    /// Decodes exactly one message (header included).
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let h = Header::parse(bytes).ok_or(err(
            ErrorCode::BAD_REQUEST_BAD_LEN,
            "a message is shorter than the 8-byte header",
        ))?;
        if usize::from(h.length) != bytes.len() {
            return Err(err(
                ErrorCode::BAD_REQUEST_BAD_LEN,
                "a message's header length is not the number of bytes it came in",
            ));
        }
        let mut r = Reader::new(&bytes[8..], BAD_LEN);
        if h.kind == t::HELLO {
            return Ok(Message::new(
                h.xid,
                Body::Hello(decode_hello(h.version, &mut r)?),
            ));
        }
        if h.version != OFP_VERSION {
            return Err(err(
                ErrorCode::BAD_REQUEST_BAD_VERSION,
                "a message's version is not the negotiated 0x04",
            ));
        }
        let body = decode_body(h.kind, &mut r)?;
        if r.remaining() != 0 {
            return Err(err(
                ErrorCode::BAD_REQUEST_BAD_LEN,
                "a message is longer than its type's layout",
            ));
        }
        Ok(Message::new(h.xid, body))
    }

    /// The message's type number (`OFPT_*`).
    pub fn kind(&self) -> u8 {
        use Body::*;
        match &self.body {
            Hello(_) => t::HELLO,
            Error(_) => t::ERROR,
            EchoRequest(_) => t::ECHO_REQUEST,
            EchoReply(_) => t::ECHO_REPLY,
            FeaturesRequest => t::FEATURES_REQUEST,
            FeaturesReply(_) => t::FEATURES_REPLY,
            GetConfigRequest => t::GET_CONFIG_REQUEST,
            GetConfigReply(_) => t::GET_CONFIG_REPLY,
            SetConfig(_) => t::SET_CONFIG,
            PacketIn(_) => t::PACKET_IN,
            FlowRemoved(_) => t::FLOW_REMOVED,
            PortStatus(_) => t::PORT_STATUS,
            PacketOut(_) => t::PACKET_OUT,
            FlowMod(_) => t::FLOW_MOD,
            GroupMod(_) => t::GROUP_MOD,
            PortMod(_) => t::PORT_MOD,
            TableMod(_) => t::TABLE_MOD,
            MultipartRequest { .. } => t::MULTIPART_REQUEST,
            MultipartReply { .. } => t::MULTIPART_REPLY,
            BarrierRequest => t::BARRIER_REQUEST,
            BarrierReply => t::BARRIER_REPLY,
            RoleRequest(_) => t::ROLE_REQUEST,
            RoleReply(_) => t::ROLE_REPLY,
            GetAsyncRequest => t::GET_ASYNC_REQUEST,
            GetAsyncReply(_) => t::GET_ASYNC_REPLY,
            SetAsync(_) => t::SET_ASYNC,
        }
    }

    /// Encodes the message, header included.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(64);
        let version = match &self.body {
            Body::Hello(h) => h.version,
            _ => OFP_VERSION,
        };
        out.put_u8(version);
        out.put_u8(self.kind());
        out.put_u16(0);
        out.put_u32(self.xid);
        encode_body(&self.body, &mut out);
        let len = u16::try_from(out.len()).map_err(|_| EncodeError::TooLong(out.len()))?;
        out.patch_u16(2, len);
        Ok(out)
    }
}

/// The `OFPT_ERROR` reply to `offending` (a whole message or just its
/// first bytes): the same xid, `code`, and the first
/// [`OFP_ERROR_DATA_LEN`] bytes of the offending message.
pub fn error_reply(offending: &[u8], code: ErrorCode) -> Message {
    let xid = Header::parse(offending).map_or(0, |h| h.xid);
    let n = offending.len().min(OFP_ERROR_DATA_LEN);
    Message::new(
        xid,
        Body::Error(ErrorMsg {
            code,
            data: offending[..n].to_vec(),
        }),
    )
}

fn decode_hello(version: u8, r: &mut Reader<'_>) -> Result<Hello, DecodeError> {
    let mut elements = Vec::new();
    if version < OFP_VERSION {
        // Before 1.3.1 the body is undefined; the spec says to ignore it.
        r.rest();
        return Ok(Hello { version, elements });
    }
    let bad = err(
        ErrorCode::BAD_REQUEST_BAD_LEN,
        "a hello element's length is shorter than its header, or it and its padding run past the message",
    );
    while r.remaining() > 0 {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(bad);
        }
        let data = r.bytes(len - 4).map_err(|_| bad)?;
        r.skip(pad8(len) - len).map_err(|_| bad)?;
        elements.push(if kind == 1 {
            if !data.len().is_multiple_of(4) {
                return Err(bad);
            }
            HelloElement::VersionBitmap(
                data.chunks_exact(4)
                    .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
                    .collect(),
            )
        } else {
            HelloElement::Unknown {
                kind,
                data: data.to_vec(),
            }
        });
    }
    Ok(Hello { version, elements })
}

fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Body, DecodeError> {
    Ok(match kind {
        t::ERROR => {
            let code = ErrorCode {
                kind: r.u16()?,
                code: r.u16()?,
            };
            Body::Error(ErrorMsg {
                code,
                data: r.rest().to_vec(),
            })
        }
        t::ECHO_REQUEST => Body::EchoRequest(r.rest().to_vec()),
        t::ECHO_REPLY => Body::EchoReply(r.rest().to_vec()),
        t::FEATURES_REQUEST => Body::FeaturesRequest,
        t::FEATURES_REPLY => {
            let datapath_id = r.u64()?;
            let n_buffers = r.u32()?;
            let n_tables = r.u8()?;
            let auxiliary_id = r.u8()?;
            r.skip(2)?;
            let capabilities = r.u32()?;
            r.skip(4)?; // reserved
            Body::FeaturesReply(Features {
                datapath_id,
                n_buffers,
                n_tables,
                auxiliary_id,
                capabilities,
            })
        }
        t::GET_CONFIG_REQUEST => Body::GetConfigRequest,
        t::GET_CONFIG_REPLY | t::SET_CONFIG => {
            let c = SwitchConfig {
                flags: r.u16()?,
                miss_send_len: r.u16()?,
            };
            if kind == t::SET_CONFIG {
                Body::SetConfig(c)
            } else {
                Body::GetConfigReply(c)
            }
        }
        t::PACKET_IN => {
            let buffer_id = r.u32()?;
            let total_len = r.u16()?;
            let reason = r.u8()?;
            let table_id = r.u8()?;
            let cookie = r.u64()?;
            let m = Match::decode(r)?;
            r.skip(2)?;
            Body::PacketIn(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id,
                cookie,
                r#match: m,
                data: r.rest().to_vec(),
            })
        }
        t::FLOW_REMOVED => Body::FlowRemoved(FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            r#match: Match::decode(r)?,
        }),
        t::PORT_STATUS => {
            let reason = r.u8()?;
            r.skip(7)?;
            Body::PortStatus(PortStatus {
                reason,
                desc: Port::decode(r)?,
            })
        }
        t::PACKET_OUT => {
            let buffer_id = r.u32()?;
            let in_port = r.u32()?;
            let actions_len = usize::from(r.u16()?);
            r.skip(6)?;
            let actions = Action::decode_list(r.bytes(actions_len)?)?;
            Body::PacketOut(PacketOut {
                buffer_id,
                in_port,
                actions,
                data: r.rest().to_vec(),
            })
        }
        t::FLOW_MOD => Body::FlowMod(decode_flow_mod(r)?),
        t::GROUP_MOD => Body::GroupMod(decode_group_mod(r)?),
        t::PORT_MOD => {
            let port_no = r.u32()?;
            r.skip(4)?;
            let hw_addr = r.array()?;
            r.skip(2)?;
            let p = PortMod {
                port_no,
                hw_addr,
                config: r.u32()?,
                mask: r.u32()?,
                advertise: r.u32()?,
            };
            r.skip(4)?;
            Body::PortMod(p)
        }
        t::TABLE_MOD => {
            let table_id = r.u8()?;
            r.skip(3)?;
            Body::TableMod(TableMod {
                table_id,
                config: r.u32()?,
            })
        }
        t::MULTIPART_REQUEST | t::MULTIPART_REPLY => {
            let mp_type = r.u16()?;
            let flags = r.u16()?;
            r.skip(4)?;
            let body = r.rest();
            if kind == t::MULTIPART_REQUEST {
                Body::MultipartRequest {
                    flags,
                    request: MultipartRequest::decode(mp_type, body)?,
                }
            } else {
                Body::MultipartReply {
                    flags,
                    reply: MultipartReply::decode(mp_type, body)?,
                }
            }
        }
        t::BARRIER_REQUEST => Body::BarrierRequest,
        t::BARRIER_REPLY => Body::BarrierReply,
        t::ROLE_REQUEST | t::ROLE_REPLY => {
            let role = r.u32()?;
            r.skip(4)?;
            let role = Role {
                role,
                generation_id: r.u64()?,
            };
            if role.role > OFPCR_ROLE_SLAVE {
                return Err(err(
                    ErrorCode::ROLE_REQUEST_FAILED_BAD_ROLE,
                    "a role is not one of nochange, equal, master, slave",
                ));
            }
            if kind == t::ROLE_REQUEST {
                Body::RoleRequest(role)
            } else {
                Body::RoleReply(role)
            }
        }
        t::GET_ASYNC_REQUEST => Body::GetAsyncRequest,
        t::GET_ASYNC_REPLY | t::SET_ASYNC => {
            let mut m = [0u32; 6];
            for v in &mut m {
                *v = r.u32()?;
            }
            let c = AsyncConfig {
                packet_in_mask: [m[0], m[1]],
                port_status_mask: [m[2], m[3]],
                flow_removed_mask: [m[4], m[5]],
            };
            if kind == t::SET_ASYNC {
                Body::SetAsync(c)
            } else {
                Body::GetAsyncReply(c)
            }
        }
        t::EXPERIMENTER => {
            return Err(err(
                ErrorCode::BAD_REQUEST_BAD_EXPERIMENTER,
                "experimenter messages are not supported",
            ))
        }
        _ => {
            return Err(err(
                ErrorCode::BAD_REQUEST_BAD_TYPE,
                "a message type is not one the switch handles",
            ))
        }
    })
}

fn decode_flow_mod(r: &mut Reader<'_>) -> Result<FlowMod, DecodeError> {
    let cookie = r.u64()?;
    let cookie_mask = r.u64()?;
    let table_id = r.u8()?;
    let command = FlowModCommand::from_wire(r.u8()?).ok_or(err(
        ErrorCode::FLOW_MOD_FAILED_BAD_COMMAND,
        "a flow mod's command is not add, modify or delete",
    ))?;
    let idle_timeout = r.u16()?;
    let hard_timeout = r.u16()?;
    let priority = r.u16()?;
    let buffer_id = r.u32()?;
    let out_port = r.u32()?;
    let out_group = r.u32()?;
    let flags = r.u16()?;
    r.skip(2)?;
    if flags & !0x1f != 0 {
        return Err(err(
            ErrorCode::FLOW_MOD_FAILED_BAD_FLAGS,
            "a flow mod sets flags OpenFlow 1.3 does not define",
        ));
    }
    if table_id == OFPTT_ALL
        && !matches!(
            command,
            FlowModCommand::Delete | FlowModCommand::DeleteStrict
        )
    {
        return Err(err(
            ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID,
            "a flow mod adds or modifies in table OFPTT_ALL",
        ));
    }
    let m = Match::decode(r)?;
    Ok(FlowMod {
        cookie,
        cookie_mask,
        table_id,
        command,
        idle_timeout,
        hard_timeout,
        priority,
        buffer_id,
        out_port,
        out_group,
        flags,
        r#match: m,
        instructions: Instruction::decode_list(r.rest())?,
    })
}

fn decode_group_mod(r: &mut Reader<'_>) -> Result<GroupMod, DecodeError> {
    let command = match r.u16()? {
        OFPGC_ADD => GroupCommand::Add,
        OFPGC_MODIFY => GroupCommand::Modify,
        OFPGC_DELETE => GroupCommand::Delete,
        _ => {
            return Err(err(
                ErrorCode::GROUP_MOD_FAILED_BAD_COMMAND,
                "a group mod's command is not add, modify or delete",
            ))
        }
    };
    let group_type = GroupType::from_wire(r.u8()?).ok_or(err(
        ErrorCode::GROUP_MOD_FAILED_BAD_TYPE,
        "a group's type is not all, select, indirect or fast failover",
    ))?;
    r.skip(1)?;
    let group_id = r.u32()?;
    if group_id > OFPG_MAX && !(command == GroupCommand::Delete && group_id == OFPG_ALL) {
        return Err(err(
            ErrorCode::GROUP_MOD_FAILED_INVALID_GROUP,
            "a group id is above OFPG_MAX",
        ));
    }
    Ok(GroupMod {
        command,
        group_type,
        group_id,
        buckets: Bucket::decode_list(r.rest())?,
    })
}

fn encode_body(body: &Body, out: &mut Vec<u8>) {
    match body {
        Body::Hello(h) => {
            for e in &h.elements {
                let start = out.len();
                match e {
                    HelloElement::VersionBitmap(words) => {
                        out.put_u16(1);
                        out.put_u16(0);
                        for w in words {
                            out.put_u32(*w);
                        }
                    }
                    HelloElement::Unknown { kind, data } => {
                        out.put_u16(*kind);
                        out.put_u16(0);
                        out.extend_from_slice(data);
                    }
                }
                let len = len16(out, start);
                out.patch_u16(start + 2, len);
                out.pad8_from(start);
            }
        }
        Body::Error(e) => {
            out.put_u16(e.code.kind);
            out.put_u16(e.code.code);
            out.extend_from_slice(&e.data);
        }
        Body::EchoRequest(d) | Body::EchoReply(d) => out.extend_from_slice(d),
        Body::FeaturesRequest
        | Body::GetConfigRequest
        | Body::BarrierRequest
        | Body::BarrierReply
        | Body::GetAsyncRequest => {}
        Body::FeaturesReply(f) => {
            out.put_u64(f.datapath_id);
            out.put_u32(f.n_buffers);
            out.put_u8(f.n_tables);
            out.put_u8(f.auxiliary_id);
            out.put_zeros(2);
            out.put_u32(f.capabilities);
            out.put_zeros(4);
        }
        Body::GetConfigReply(c) | Body::SetConfig(c) => {
            out.put_u16(c.flags);
            out.put_u16(c.miss_send_len);
        }
        Body::PacketIn(p) => {
            out.put_u32(p.buffer_id);
            out.put_u16(p.total_len);
            out.put_u8(p.reason);
            out.put_u8(p.table_id);
            out.put_u64(p.cookie);
            p.r#match.encode(out);
            out.put_zeros(2);
            out.extend_from_slice(&p.data);
        }
        Body::FlowRemoved(f) => {
            out.put_u64(f.cookie);
            out.put_u16(f.priority);
            out.put_u8(f.reason);
            out.put_u8(f.table_id);
            out.put_u32(f.duration_sec);
            out.put_u32(f.duration_nsec);
            out.put_u16(f.idle_timeout);
            out.put_u16(f.hard_timeout);
            out.put_u64(f.packet_count);
            out.put_u64(f.byte_count);
            f.r#match.encode(out);
        }
        Body::PortStatus(p) => {
            out.put_u8(p.reason);
            out.put_zeros(7);
            p.desc.encode(out);
        }
        Body::PacketOut(p) => {
            out.put_u32(p.buffer_id);
            out.put_u32(p.in_port);
            let at = out.len();
            out.put_u16(0);
            out.put_zeros(6);
            let start = out.len();
            Action::encode_list(&p.actions, out);
            let len = len16(out, start);
            out.patch_u16(at, len);
            out.extend_from_slice(&p.data);
        }
        Body::FlowMod(f) => {
            out.put_u64(f.cookie);
            out.put_u64(f.cookie_mask);
            out.put_u8(f.table_id);
            out.put_u8(f.command.wire());
            out.put_u16(f.idle_timeout);
            out.put_u16(f.hard_timeout);
            out.put_u16(f.priority);
            out.put_u32(f.buffer_id);
            out.put_u32(f.out_port);
            out.put_u32(f.out_group);
            out.put_u16(f.flags);
            out.put_zeros(2);
            f.r#match.encode(out);
            Instruction::encode_list(&f.instructions, out);
        }
        Body::GroupMod(g) => {
            out.put_u16(match g.command {
                GroupCommand::Add => OFPGC_ADD,
                GroupCommand::Modify => OFPGC_MODIFY,
                GroupCommand::Delete => OFPGC_DELETE,
            });
            out.put_u8(g.group_type.wire());
            out.put_zeros(1);
            out.put_u32(g.group_id);
            Bucket::encode_list(&g.buckets, out);
        }
        Body::PortMod(p) => {
            out.put_u32(p.port_no);
            out.put_zeros(4);
            out.extend_from_slice(&p.hw_addr);
            out.put_zeros(2);
            out.put_u32(p.config);
            out.put_u32(p.mask);
            out.put_u32(p.advertise);
            out.put_zeros(4);
        }
        Body::TableMod(tm) => {
            out.put_u8(tm.table_id);
            out.put_zeros(3);
            out.put_u32(tm.config);
        }
        Body::MultipartRequest { flags, request } => {
            out.put_u16(request.kind());
            out.put_u16(*flags);
            out.put_zeros(4);
            request.encode(out);
        }
        Body::MultipartReply { flags, reply } => {
            out.put_u16(reply.kind());
            out.put_u16(*flags);
            out.put_zeros(4);
            reply.encode(out);
        }
        Body::RoleRequest(r) | Body::RoleReply(r) => {
            out.put_u32(r.role);
            out.put_zeros(4);
            out.put_u64(r.generation_id);
        }
        Body::GetAsyncReply(c) | Body::SetAsync(c) => {
            for v in c
                .packet_in_mask
                .iter()
                .chain(&c.port_status_mask)
                .chain(&c.flow_removed_mask)
            {
                out.put_u32(*v);
            }
        }
    }
}
