//! The control protocol: one JSON object per SOCK_SEQPACKET message, in the
//! spirit of QMP. Documented in docs/protocol.md.

use ringswitch_ring::layout::Geometry;
use serde::{Deserialize, Serialize};

use crate::vlan::PortVlan;

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest message accepted, in bytes.
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Largest reply a client reads. Replies travel in one datagram, so the
/// sender's socket buffer also bounds them (about 200 KiB by default).
pub const MAX_REPLY: usize = 1024 * 1024;
/// Largest reply the daemon sends in one message unasked: a listing larger
/// than this is refused with a `limit` error saying to ask for it in pages
/// ([`Request::Page`]). Well within the default socket buffer.
pub const MAX_UNPAGED_REPLY: usize = 128 * 1024;
/// Most bytes of entries in one page of a listing: a page, with its
/// envelope and cursor, always fits in one [`MAX_MESSAGE`].
pub const PAGE_BYTES: usize = 60 * 1024;
/// Most bytes of a whole listing a client gathers from its pages before it
/// gives up with an error: bounds what a daemon can make a client hold.
pub const MAX_LISTING_BYTES: usize = 64 * 1024 * 1024;
/// Most descriptors a message may carry: a memfd, a kick eventfd and one
/// interrupt eventfd per ring pair (two sets for a pipe), with room to spare.
pub const MAX_FDS: usize = 40;

/// A request from a client.
// The VLAN settings of `port-add` and `attach` are kept inline (a
// [`PortVlan`] holds its set, 512 bytes): requests are few, and a box
// would show in every literal that builds one.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Version handshake (optional).
    Hello {
        /// Client's protocol version.
        version: u32,
    },
    /// Create a switch.
    SwitchAdd {
        /// Switch name (`vale...`).
        name: String,
    },
    /// Destroy a switch (it must have no open ports).
    SwitchDel {
        /// Switch name.
        name: String,
    },
    /// List switches.
    SwitchList,
    /// Change a switch's settings: its OpenFlow side (listening for
    /// management connections, a controller, the fail mode). The settings
    /// given replace the switch's; the others stay.
    SwitchSet {
        /// Switch name.
        name: String,
        /// Its OpenFlow settings.
        openflow: OpenFlowSpec,
    },
    /// A switch's flow tables, flow by flow.
    Flows {
        /// Switch name.
        switch: String,
    },
    /// Create a persistent port (a switch port or a pipe), or a VM port
    /// with `vhost_user`.
    PortAdd {
        /// Port name, with optional `@conf:`.
        name: String,
        /// Make it a vhost-user virtio-net port for a VM (switch ports only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vhost_user: Option<VhostUserSpec>,
        /// Hand the port's rings to a VM (passthrough): the daemon serves
        /// QEMU's `ivshmem-doorbell` device on this socket path. Switch
        /// ports and pipe ends.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        passthrough: Option<String>,
        /// With `passthrough`, on a switch port: every frame in the rings
        /// carries a 12-byte virtio-net header in front of it, for a ptnet
        /// guest with checksum and TSO offloads (the guest driver reads
        /// this from the region). Refused without `passthrough` and on
        /// pipe ends.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        vnet_hdr: bool,
        /// With `passthrough`, on a switch port without `vnet_hdr`: the
        /// guest may be migrated. The guest is ivshmem peer 0 (QEMU's
        /// `master=on`, so QEMU migrates the region's contents), and the
        /// port adopts a migrated region after checking it
        /// (docs/passthrough.md). Refused elsewhere.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        migratable: bool,
        /// The port's VLANs (`access:10`, `trunk:10,20`, `trunk:all`);
        /// none: a trunk of every VLAN (frames pass as they are). Ring and
        /// VM ports only: refused for pipes and passthrough ports.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<PortVlan>,
        /// The port's OpenFlow number (1 to 254), as Open vSwitch's
        /// `ofport_request`: a VM's port can have the same number on every
        /// host it moves to, so flows that name it keep working there.
        /// None: the number the port had (kept in `--config`), else the
        /// lowest free one. Switch ports only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ofport: Option<u32>,
    },
    /// Destroy a persistent port (it must not be open).
    PortDel {
        /// Port name.
        name: String,
    },
    /// List ports, of one switch or all.
    PortList {
        /// Restrict to this switch.
        #[serde(default)]
        switch: Option<String>,
    },
    /// Per-port counters.
    Stats {
        /// Restrict to this switch.
        #[serde(default)]
        switch: Option<String>,
    },
    /// The workers' counters: time busy and asleep, wake-ups, batches.
    Workers,
    /// Dump a switch's MAC table.
    Macs {
        /// Switch name.
        switch: String,
    },
    /// Open a port; the reply carries the memfd and eventfds.
    Open {
        /// Port name.
        name: String,
        /// Room for this many pipes (at most 16) in the memory of the
        /// switch port this opens, for pipes opened with `in_port_memory`
        /// (netmap's lb: its output pipes share its input port's buffers).
        /// A port not open elsewhere is given that memory afresh.
        #[serde(default, skip_serializing_if = "is_zero")]
        pipes: u32,
        /// A pipe end (`PORT{N`, `PORT}N`) to be made in the memory of the
        /// switch port `PORT`, which this client's user has open with room
        /// for pipes: refused when that cannot be done.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        in_port_memory: bool,
    },
    /// Restart the daemon in place (the same process, the same command
    /// line) from `binary`, by default the program it was started from
    /// (read again: a newly installed one at that path). It answers first,
    /// then stops as on SIGTERM and runs the binary, which restores the
    /// `--config`; VM ports come back as after any restart.
    Upgrade {
        /// The daemon binary to run instead of the one at the path it was
        /// started from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary: Option<String>,
    },
    /// Close a port opened on this connection.
    Close {
        /// Handle from the open reply.
        handle: u64,
    },
    /// Attach a kernel interface to a switch: a NIC (AF_XDP or AF_PACKET),
    /// a host-stack TAP port, or both (like `vale-ctl -h`). Its ports are
    /// `<switch>:<ifname>` and `<switch>:<tap name>`.
    Attach {
        /// Switch name (created if needed).
        switch: String,
        /// The NIC to attach.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nic: Option<NicSpec>,
        /// The host-stack port to create.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<HostSpec>,
        /// The VLANs of the ports it creates (as `port-add`'s); none: a
        /// trunk of every VLAN.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<PortVlan>,
    },
    /// Detach an interface port (a NIC or a TAP) and give the interface
    /// back to the kernel (the XDP program removed, the TAP deleted).
    Detach {
        /// Port name (`vale0:eth0`).
        name: String,
    },
    /// One page of a listing (`switch-list`, `port-list`, `stats` or
    /// `macs`), so that a listing of any length travels in messages of
    /// bounded size: the entries that sort after `after`, as many as fit in
    /// [`PAGE_BYTES`]. The reply's `next` is the `after` of the next page;
    /// there is none on the last page.
    Page {
        /// The listing.
        request: Box<Request>,
        /// The `next` of the previous page; empty for the first page.
        #[serde(default)]
        after: String,
    },
}

impl Request {
    /// Whether the reply is a listing that can come in pages.
    pub fn is_listing(&self) -> bool {
        matches!(
            self,
            Request::SwitchList
                | Request::PortList { .. }
                | Request::Stats { .. }
                | Request::Macs { .. }
                | Request::Flows { .. }
        )
    }
}

/// A NIC to attach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// Interface name.
    pub ifname: String,
    /// `auto` (default: native XDP, then generic XDP, then AF_PACKET),
    /// `native`, `generic` or `packet`.
    #[serde(default)]
    pub mode: NicMode,
    /// Queues to attach (default: all the interface's receive queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
}

pub use ringswitch_frame::NicMode;

/// A host-stack port: a TAP interface the switch creates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Name of the TAP interface (with a NIC and no name: `<nic>^`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Queues (multi-queue TAP), 1 to 16.
    #[serde(default = "one_u32")]
    pub queues: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn one_u32() -> u32 {
    1
}

/// What `attach` created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachReply {
    /// The ports, NIC first.
    pub ports: Vec<IfaceInfo>,
}

/// What `port-list` says of an interface port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceInfo {
    /// Port name (`vale0:eth0`).
    pub port: String,
    /// Interface name.
    pub ifname: String,
    /// `xdp-native-zc`, `xdp-native`, `xdp-generic`, `af-packet` or `tap`.
    pub driver: String,
    /// Queues attached.
    pub queues: u32,
    /// Why this driver (for NICs in auto mode).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// A vhost-user port: where its socket is and what the device offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VhostUserSpec {
    /// Path of the vhost-user unix socket.
    pub path: String,
    /// Connect to a socket the frontend (QEMU) listens on, and reconnect
    /// when it restarts; otherwise listen on `path` for the frontend.
    #[serde(default)]
    pub client: bool,
    /// Queue pairs (multiqueue), 1 to 16.
    #[serde(default = "one")]
    pub queues: u16,
    /// Offer checksum and TSO offloads to the guest.
    #[serde(default = "yes")]
    pub offloads: bool,
}

fn one() -> u16 {
    1
}

fn yes() -> bool {
    true
}

/// What `port-list` says of a vhost-user port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VhostUserInfo {
    /// The port's configuration.
    #[serde(flatten)]
    pub spec: VhostUserSpec,
    /// A frontend is connected and its queues run.
    pub connected: bool,
}

/// Error classes, stable for scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// The message is not a valid request.
    BadRequest,
    /// The name cannot be parsed.
    BadName,
    /// No such switch or port.
    NotFound,
    /// Already exists.
    Exists,
    /// In use.
    Busy,
    /// A limit was reached.
    Limit,
    /// Sizes out of range.
    Geometry,
    /// Not supported by this build.
    Unsupported,
    /// The daemon lacks a privilege (a capability) the request needs.
    Permission,
    /// The client is not allowed to do this (the daemon's access policy:
    /// see `serve --allow-group` and `--admin-group`).
    Denied,
    /// The daemon failed.
    Internal,
}

/// An error reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ErrorReply {
    /// Class.
    pub code: ErrorCode,
    /// A sentence for people.
    pub message: String,
}

impl ErrorReply {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorReply {
            code,
            message: message.into(),
        }
    }
}

/// Reply envelope: `{"ok":true,"result":...}` or `{"ok":false,"error":...}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reply {
    /// Success.
    pub ok: bool,
    /// Result on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Error otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReply>,
    /// A page of a listing that is not the last: where the next page
    /// starts (see [`Request::Page`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl Reply {
    /// A success reply.
    pub fn ok<T: Serialize>(v: &T) -> Reply {
        Reply {
            ok: true,
            result: Some(serde_json::to_value(v).unwrap_or(serde_json::Value::Null)),
            error: None,
            next: None,
        }
    }
    /// An error reply.
    pub fn err(e: ErrorReply) -> Reply {
        Reply {
            ok: false,
            result: None,
            error: Some(e),
            next: None,
        }
    }
}

/// Kind of port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortKind {
    /// A switch port: private region, the daemon copies.
    Vale,
    /// A pipe end: shared region, zero copy, no daemon in the data path.
    Pipe,
    /// A switch port that is a vhost-user virtio-net device (a VM).
    VhostUser,
    /// A switch port that is a NIC (AF_XDP or AF_PACKET).
    Nic,
    /// A switch port that is the host's stack (a TAP interface).
    Host,
}

/// Result of `open`. The message carries descriptors in this order: the
/// memfd; then for a switch port the kick eventfd and one interrupt eventfd
/// per ring pair (`max(tx_rings, rx_rings)` of them); for a pipe end one
/// interrupt eventfd per ring pair of this end, then as many of the peer's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenReply {
    /// Handle for `close`.
    pub handle: u64,
    /// Canonical name.
    pub name: String,
    /// Kind.
    pub kind: PortKind,
    /// Which end of the region this port is (0, or 1 for a pipe's `}` end).
    pub end: u32,
    /// Geometry of this end.
    pub geometry: Geometry,
    /// Region size in bytes.
    pub region_size: u64,
    /// Offset of this end's `netmap_if` (netmap's `nr_offset`).
    pub nifp_offset: u64,
}

/// A passthrough port in `port-list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassthroughInfo {
    /// The ivshmem server socket QEMU connects to.
    pub path: String,
    /// A QEMU is attached.
    pub connected: bool,
    /// Frames carry a virtio-net header (`port-add --vnet-hdr`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vnet_hdr: bool,
    /// The guest may be migrated (`port-add --migratable`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub migratable: bool,
}

/// One switch in `switch-list`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SwitchInfo {
    /// Name.
    pub name: String,
    /// Ports attached.
    pub ports: u32,
    /// MAC entries learned and not aged out.
    pub macs: u32,
    /// Its OpenFlow settings, if it runs OpenFlow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openflow: Option<OpenFlowSpec>,
    /// OpenFlow connections open now (management and controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openflow_connections: Option<u32>,
    /// Frames for the controller dropped because its queue was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_in_dropped: Option<u64>,
    /// Frames whose verdict had more outputs or edits than the data path
    /// holds (the extra outputs were left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows_truncated: Option<u64>,
}

/// A switch's OpenFlow settings. A switch with any of them runs OpenFlow
/// 1.3 flow tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenFlowSpec {
    /// Where it listens for management connections (`ovs-ofctl`):
    /// `unix:PATH`, or `ptcp:PORT` / `ptcp:PORT:ADDR` (loopback unless an
    /// address is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// The controller it connects to: `tcp:HOST:PORT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// What it does while no controller is connected (secure unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_mode: Option<FailMode>,
}

impl OpenFlowSpec {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.listen.is_none() && self.controller.is_none() && self.fail_mode.is_none()
    }

    /// `self` with what `o` sets replacing its settings.
    pub fn merged(&self, o: &OpenFlowSpec) -> OpenFlowSpec {
        OpenFlowSpec {
            listen: o.listen.clone().or_else(|| self.listen.clone()),
            controller: o.controller.clone().or_else(|| self.controller.clone()),
            fail_mode: o.fail_mode.or(self.fail_mode),
        }
    }
}

/// What an OpenFlow switch does while no controller is connected (as
/// OVS's `fail_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailMode {
    /// The flow tables keep deciding.
    #[default]
    Secure,
    /// The learning bridge decides.
    Standalone,
}

/// One flow of `flows`: its numbers, and the flow as OpenFlow 1.3 writes
/// it (an `OFPMP_FLOW` reply message holding this one `ofp_flow_stats`, in
/// hex), for the client to decode its match and instructions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEntry {
    /// Its place in the listing, `TTT:PPPPP:NNNNNNNN`: table, 65535 minus
    /// the priority (highest first), and its rank; pages are cut by it.
    pub name: String,
    /// Its table.
    pub table_id: u8,
    /// Its priority.
    pub priority: u16,
    /// Its cookie.
    pub cookie: u64,
    /// How long it has lived, in milliseconds.
    pub duration_ms: u64,
    /// Packets it matched.
    pub n_packets: u64,
    /// Bytes it matched.
    pub n_bytes: u64,
    /// Its idle timeout in seconds (0: none).
    pub idle_timeout: u16,
    /// Its hard timeout in seconds (0: none).
    pub hard_timeout: u16,
    /// The flow as an OpenFlow 1.3 multipart FLOW reply, in hex.
    pub ofp_flow_stats: String,
}

/// One port in `port-list`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortInfo {
    /// Name (`vale0:a`, `pipe{1`).
    pub name: String,
    /// Kind.
    pub kind: PortKind,
    /// Created with `port-add` (survives its clients).
    pub persistent: bool,
    /// Open by a client now.
    pub open: bool,
    /// Geometry (ring ports and pipes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geometry: Option<Geometry>,
    /// Worker serving its TX rings (switch ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
    /// Socket and state of a vhost-user port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhost_user: Option<VhostUserInfo>,
    /// Interface and driver of a NIC or host port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<IfaceInfo>,
    /// A passthrough port's ivshmem socket, and whether a guest is attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<PassthroughInfo>,
    /// A switch port's VLANs (`trunk:all` unless set); none for pipes, and
    /// from daemons that predate VLANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<PortVlan>,
}

/// Counters of one port. "tx" is what its client sent into the switch, "rx"
/// what the switch delivered to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStats {
    /// Name.
    pub name: String,
    /// Packets taken from the port's TX rings and forwarded to at least
    /// one port (not those counted in `drop_no_dest`).
    pub tx_packets: u64,
    /// Bytes taken from the port's TX rings.
    pub tx_bytes: u64,
    /// Packets delivered into the port's RX rings.
    pub rx_packets: u64,
    /// Bytes delivered into the port's RX rings.
    pub rx_bytes: u64,
    /// Packets for this port dropped because its RX ring was full.
    pub drop_rx_full: u64,
    /// Packets from this port dropped as malformed (bad buffer index,
    /// broken fragment chain).
    pub drop_malformed: u64,
    /// Packets from this port shorter than an Ethernet header.
    pub drop_short: u64,
    /// Packets from this port longer than a buffer without chaining, or
    /// longer than the destination can take.
    pub drop_long: u64,
    /// Times the port's ring pointers were invalid and the ring was reset.
    pub ring_reinits: u64,
    /// Packets for this port dropped because no one was behind it: no
    /// client had the ring port open, no QEMU had the passthrough port's
    /// memory, no frontend was connected to the VM port (or its queues
    /// were not running), the interface was down.
    #[serde(default)]
    pub drop_link_down: u64,
    /// Packets from this port that had no destination: addressed to a
    /// station learned on the port itself, or flooded on a switch with no
    /// other port.
    #[serde(default)]
    pub drop_no_dest: u64,
    /// Packets from this port whose VLAN the port does not carry (a tagged
    /// frame on an access port, a VLAN outside a trunk's set), and packets
    /// a VLAN tag could not be pushed onto (too long with it).
    #[serde(default)]
    pub drop_vlan: u64,
    /// Frames this port was offered that software segmentation made
    /// beyond one per TSO frame (each segment is counted in `rx_packets`
    /// or a drop; subtract this to count frames as their senders sent
    /// them).
    #[serde(default)]
    pub rx_segments_added: u64,
    /// Ring ports: interrupts sent to the client (its doorbell written
    /// because it asked to be woken).
    #[serde(default)]
    pub interrupts: u64,
    /// Interface ports: frames the kernel dropped before the switch saw
    /// them (AF_XDP ring full or no fill buffers, AF_PACKET drops).
    #[serde(default)]
    pub drop_kernel: u64,
    /// Interface ports: frames the kernel refused on transmit.
    #[serde(default)]
    pub kernel_tx_invalid: u64,
    /// VM ports: receive descriptor chains the guest posted that failed
    /// validation (completed with length 0; the frame went to the next).
    #[serde(default)]
    pub vm_rx_bad_chains: u64,
    /// VM ports: times a guest's available index ran more than a queue's
    /// size ahead (the queue is ignored until the guest resets it).
    #[serde(default)]
    pub vm_ring_errors: u64,
    /// VM ports: interrupts sent to the guest.
    #[serde(default)]
    pub vm_interrupts: u64,
    /// VM ports: interrupts dropped because the frontend's call eventfd
    /// would have blocked (its counter pushed to the maximum).
    #[serde(default)]
    pub vm_interrupts_dropped: u64,
    /// VM ports: times the guest memory faulted under the device (the
    /// frontend shrank the file behind it); the queue pair stopped until
    /// the next frontend.
    #[serde(default)]
    pub vm_guest_faults: u64,
    /// VM ports: frontend connections closed after a vhost-user message
    /// the device refused.
    #[serde(default)]
    pub vm_frontend_errors: u64,
}

/// Buckets of [`WorkerStats::batch_sizes`]: bucket `i` counts the batches
/// of `2^i` to `2^(i+1) - 1` frames, the last one every batch of 512 or
/// more.
pub const BATCH_SIZE_BUCKETS: usize = 10;

/// One worker's counters (`workers`). Times are since the worker started;
/// the rest of its time it spent spinning for work or between batches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStats {
    /// Its number (`port-list`'s `worker`).
    pub worker: u32,
    /// Sources it serves: TX rings of ring ports, queue pairs, interface
    /// queues.
    pub sources: u32,
    /// Nanoseconds since it started.
    pub uptime_ns: u64,
    /// Nanoseconds in rounds that moved frames.
    pub busy_ns: u64,
    /// Nanoseconds asleep, waiting for a kick.
    pub sleep_ns: u64,
    /// Nanoseconds its thread ran on a CPU (busy, spinning and the rest),
    /// as the kernel counts them; 0 where the kernel does not say.
    #[serde(default)]
    pub cpu_ns: u64,
    /// Times it woke from sleep.
    pub wakeups: u64,
    /// Batches forwarded (a batch: what one source offered in one round).
    pub batches: u64,
    /// Frames forwarded.
    pub packets: u64,
    /// CPU cycles (time-stamp counter) in rounds that moved frames: over
    /// `packets`, the cycles a frame costs.
    #[serde(default)]
    pub busy_cycles: u64,
    /// How many frames its batches held: see [`BATCH_SIZE_BUCKETS`].
    #[serde(default)]
    pub batch_sizes: Vec<u64>,
}

/// One MAC table entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MacEntry {
    /// Address, `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// Its VLAN (0: untagged, or a switch without VLANs).
    #[serde(default)]
    pub vlan: u16,
    /// Port name.
    pub port: String,
    /// Seconds since last seen.
    pub age_s: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_wire_form() {
        let r: Request = serde_json::from_str(r#"{"cmd":"open","name":"vale0:a"}"#).unwrap();
        assert_eq!(
            r,
            Request::Open {
                name: "vale0:a".into(),
                pipes: 0,
                in_port_memory: false,
            }
        );
        let r: Request = serde_json::from_str(r#"{"cmd":"switch-list"}"#).unwrap();
        assert_eq!(r, Request::SwitchList);
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"frobnicate"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"open","name":"x","extra":1}"#).is_err());
        let s = serde_json::to_string(&Request::PortList { switch: None }).unwrap();
        assert_eq!(s, r#"{"cmd":"port-list","switch":null}"#);
    }

    #[test]
    fn vlan_settings_are_optional_on_the_wire() {
        // Written before VLANs: no field, the default.
        let old = r#"{"cmd":"port-add","name":"vale0:a"}"#;
        let r: Request = serde_json::from_str(old).unwrap();
        assert_eq!(
            r,
            Request::PortAdd {
                name: "vale0:a".into(),
                vhost_user: None,
                passthrough: None,
                vnet_hdr: false,
                migratable: false,
                vlan: None,
                ofport: None,
            }
        );
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            old,
            "none is not written"
        );
        let old = r#"{"cmd":"attach","switch":"vale0","host":{"name":"tap0","queues":1}}"#;
        let r: Request = serde_json::from_str(old).unwrap();
        assert!(matches!(r, Request::Attach { vlan: None, .. }), "{r:?}");
        assert_eq!(serde_json::to_string(&r).unwrap(), old);

        // With the field: the setting as a string, both ways.
        for (req, text) in [
            (
                Request::PortAdd {
                    name: "vale0:a".into(),
                    vhost_user: None,
                    passthrough: None,
                    vnet_hdr: false,
                    migratable: false,
                    vlan: Some(PortVlan::Access(10)),
                    ofport: None,
                },
                r#"{"cmd":"port-add","name":"vale0:a","vlan":"access:10"}"#,
            ),
            (
                Request::Attach {
                    switch: "vale0".into(),
                    nic: None,
                    host: Some(HostSpec {
                        name: Some("tap0".into()),
                        queues: 1,
                    }),
                    vlan: Some("trunk:10,20".parse().unwrap()),
                },
                r#"{"cmd":"attach","switch":"vale0","host":{"name":"tap0","queues":1},"vlan":"trunk:10,20"}"#,
            ),
        ] {
            assert_eq!(serde_json::to_string(&req).unwrap(), text);
            assert_eq!(serde_json::from_str::<Request>(text).unwrap(), req);
        }
        let e = serde_json::from_str::<Request>(
            r#"{"cmd":"port-add","name":"vale0:a","vlan":"access:5000"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("'5000' is not a VLAN ID"), "{e}");

        // A port listing from a daemon without VLANs still reads.
        let p: PortInfo = serde_json::from_str(
            r#"{"name":"vale0:a","kind":"vale","persistent":true,"open":false}"#,
        )
        .unwrap();
        assert_eq!(p.vlan, None);
        let p: PortInfo = serde_json::from_str(
            r#"{"name":"vale0:a","kind":"vale","persistent":true,"open":false,"vlan":"trunk:all"}"#,
        )
        .unwrap();
        assert_eq!(p.vlan, Some(PortVlan::all()));
    }
}
