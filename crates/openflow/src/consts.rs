//! Numbers of the OpenFlow 1.3 specification that a switch and its users
//! name: the version, reserved ports, buffer and group ids, flow-mod
//! commands and flags, group types and commands, and so on.

/// The protocol version this crate speaks (OpenFlow 1.3).
pub const OFP_VERSION: u8 = 0x04;
/// The size of the common header.
pub const OFP_HEADER_LEN: usize = 8;
/// The largest message a 16-bit header length can describe.
pub const OFP_MAX_MESSAGE_LEN: usize = 65535;
/// How many bytes of an offending request an `OFPT_ERROR` carries.
pub const OFP_ERROR_DATA_LEN: usize = 64;

/// Highest number of a physical port (`OFPP_MAX`).
pub const OFPP_MAX: u32 = 0xffff_ff00;
/// Send the packet out of the port it came in on (`OFPP_IN_PORT`).
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
/// Submit the packet to the first flow table (`OFPP_TABLE`, packet-out only).
pub const OFPP_TABLE: u32 = 0xffff_fff9;
/// Forward by the switch's normal, non-OpenFlow path (`OFPP_NORMAL`).
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
/// Flood along the non-blocked ports but the input (`OFPP_FLOOD`).
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
/// Every port but the input (`OFPP_ALL`).
pub const OFPP_ALL: u32 = 0xffff_fffc;
/// Send to the controller (`OFPP_CONTROLLER`).
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
/// The local port (`OFPP_LOCAL`).
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
/// Any port: a wildcard in requests, never an output (`OFPP_ANY`).
pub const OFPP_ANY: u32 = 0xffff_ffff;

/// `max_len` of an output to the controller: send the whole packet
/// (`OFPCML_NO_BUFFER`).
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
/// `buffer_id` meaning the packet is not buffered (`OFP_NO_BUFFER`).
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

/// Highest group number (`OFPG_MAX`).
pub const OFPG_MAX: u32 = 0xffff_ff00;
/// All groups, in a group delete or stats request (`OFPG_ALL`).
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// Any group: a wildcard in flow requests (`OFPG_ANY`).
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// Highest table number (`OFPTT_MAX`).
pub const OFPTT_MAX: u8 = 0xfe;
/// All tables, in a flow delete or stats request (`OFPTT_ALL`).
pub const OFPTT_ALL: u8 = 0xff;

/// Flow-mod command: add a flow (`OFPFC_ADD`).
pub const OFPFC_ADD: u8 = 0;
/// Flow-mod command: modify matching flows (`OFPFC_MODIFY`).
pub const OFPFC_MODIFY: u8 = 1;
/// Flow-mod command: modify the flow of exactly this match and priority.
pub const OFPFC_MODIFY_STRICT: u8 = 2;
/// Flow-mod command: delete matching flows (`OFPFC_DELETE`).
pub const OFPFC_DELETE: u8 = 3;
/// Flow-mod command: delete the flow of exactly this match and priority.
pub const OFPFC_DELETE_STRICT: u8 = 4;

/// Flow-mod flag: send FLOW_REMOVED when the flow goes.
pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
/// Flow-mod flag: refuse an overlapping flow.
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
/// Flow-mod flag: reset the counters of modified flows.
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;
/// Flow-mod flag: no packet count kept.
pub const OFPFF_NO_PKT_COUNTS: u16 = 1 << 3;
/// Flow-mod flag: no byte count kept.
pub const OFPFF_NO_BYT_COUNTS: u16 = 1 << 4;

/// Group type: every bucket (`OFPGT_ALL`).
pub const OFPGT_ALL: u8 = 0;
/// Group type: one bucket, chosen by the switch (`OFPGT_SELECT`).
pub const OFPGT_SELECT: u8 = 1;
/// Group type: the single bucket (`OFPGT_INDIRECT`).
pub const OFPGT_INDIRECT: u8 = 2;
/// Group type: the first live bucket (`OFPGT_FF`).
pub const OFPGT_FF: u8 = 3;

/// Group-mod command: add (`OFPGC_ADD`).
pub const OFPGC_ADD: u16 = 0;
/// Group-mod command: modify (`OFPGC_MODIFY`).
pub const OFPGC_MODIFY: u16 = 1;
/// Group-mod command: delete (`OFPGC_DELETE`).
pub const OFPGC_DELETE: u16 = 2;

/// PACKET_IN reason: no matching flow (`OFPR_NO_MATCH`).
pub const OFPR_NO_MATCH: u8 = 0;
/// PACKET_IN reason: an output to the controller (`OFPR_ACTION`).
pub const OFPR_ACTION: u8 = 1;
/// PACKET_IN reason: invalid TTL (`OFPR_INVALID_TTL`).
pub const OFPR_INVALID_TTL: u8 = 2;

/// FLOW_REMOVED reason: idle timeout.
pub const OFPRR_IDLE_TIMEOUT: u8 = 0;
/// FLOW_REMOVED reason: hard timeout.
pub const OFPRR_HARD_TIMEOUT: u8 = 1;
/// FLOW_REMOVED reason: deleted by a flow mod.
pub const OFPRR_DELETE: u8 = 2;
/// FLOW_REMOVED reason: its group was deleted.
pub const OFPRR_GROUP_DELETE: u8 = 3;

/// PORT_STATUS reason: a port was added.
pub const OFPPR_ADD: u8 = 0;
/// PORT_STATUS reason: a port was removed.
pub const OFPPR_DELETE: u8 = 1;
/// PORT_STATUS reason: some attribute changed.
pub const OFPPR_MODIFY: u8 = 2;

/// Port config: administratively down.
pub const OFPPC_PORT_DOWN: u32 = 1 << 0;
/// Port state: no physical link.
pub const OFPPS_LINK_DOWN: u32 = 1 << 0;
/// Port state: live for fast failover.
pub const OFPPS_LIVE: u32 = 1 << 2;

/// Switch capability: flow statistics.
pub const OFPC_FLOW_STATS: u32 = 1 << 0;
/// Switch capability: table statistics.
pub const OFPC_TABLE_STATS: u32 = 1 << 1;
/// Switch capability: port statistics.
pub const OFPC_PORT_STATS: u32 = 1 << 2;
/// Switch capability: group statistics.
pub const OFPC_GROUP_STATS: u32 = 1 << 3;

/// Controller role: no change, just ask (`OFPCR_ROLE_NOCHANGE`).
pub const OFPCR_ROLE_NOCHANGE: u32 = 0;
/// Controller role: equal.
pub const OFPCR_ROLE_EQUAL: u32 = 1;
/// Controller role: master.
pub const OFPCR_ROLE_MASTER: u32 = 2;
/// Controller role: slave.
pub const OFPCR_ROLE_SLAVE: u32 = 3;

/// Multipart flag: more parts follow (`OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`).
pub const OFPMPF_MORE: u16 = 1 << 0;

/// Ethertypes a push action accepts.
pub const ETH_TYPE_VLAN: u16 = 0x8100;
/// 802.1ad service VLAN.
pub const ETH_TYPE_VLAN_QINQ: u16 = 0x88a8;
/// MPLS unicast.
pub const ETH_TYPE_MPLS: u16 = 0x8847;
/// MPLS multicast.
pub const ETH_TYPE_MPLS_MCAST: u16 = 0x8848;
/// 802.1ah provider backbone bridging.
pub const ETH_TYPE_PBB: u16 = 0x88e7;

/// Most actions the codec takes in one list; more is `BAD_ACTION/TOO_MANY`.
pub const MAX_ACTIONS: usize = 128;
/// Most buckets the codec takes in one group; more is
/// `GROUP_MOD_FAILED/OUT_OF_BUCKETS`.
pub const MAX_BUCKETS: usize = 256;
