//! Why the registry refused a request: one variant per refusal, carrying
//! the names and limits involved, and the one mapping of each to the
//! protocol's [`ErrorCode`].

use std::path::PathBuf;

use ringswitch_control::proto::{ErrorCode, ErrorReply};
use ringswitch_control::{error_chain, NameError};
use ringswitch_netdev::DevError;
use ringswitch_ring::GeometryError;
use ringswitch_switch::AttachError;
use ringswitch_vhost::device::ConfigError;

use super::budget::OverBudget;
use crate::passthrough::PassthroughError;
use crate::vhost_user::VhostUserError;

/// A cause the daemon cannot do anything about, kept for the message.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// What a client opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Openable {
    /// A switch port.
    Port,
    /// A pipe end.
    PipeEnd,
}

impl std::fmt::Display for Openable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Openable::Port => "port",
            Openable::PipeEnd => "pipe end",
        })
    }
}

/// A request the registry refused, or could not carry out.
///
/// The message of the reply is the error with its causes
/// ([`error_chain`]); the code is [`RegistryError::code`].
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A name that does not parse.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A switch's OpenFlow side cannot start (a bad address, a socket
    /// in use).
    #[error("switch {switch} cannot run OpenFlow")]
    OpenFlow {
        /// The switch.
        switch: String,
        /// Why.
        #[source]
        source: crate::openflow::StartError,
    },
    /// `flows` of a switch that does not run OpenFlow.
    #[error("switch {switch} has no flow tables: give it --openflow-listen, --controller or --fail-mode")]
    NoFlowTables {
        /// The switch.
        switch: String,
    },
    /// Sizes out of range.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// A share of the budgets that would pass a limit.
    #[error(transparent)]
    OverBudget(#[from] OverBudget),
    /// An interface that cannot be used.
    #[error(transparent)]
    Interface(#[from] DevError),
    /// The switch refused the port.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// A VM port's device settings are out of range.
    #[error(transparent)]
    VmConfig(#[from] ConfigError),
    /// A VM port's socket or protocol thread could not be set up.
    #[error(transparent)]
    VmSocket(#[from] VhostUserError),
    /// A passthrough port's ivshmem server could not start.
    #[error("{port}")]
    Passthrough {
        /// The port or pipe end.
        port: String,
        /// Why.
        #[source]
        source: PassthroughError,
    },
    /// The daemon failed at something it should not fail at.
    #[error("{what}")]
    Internal {
        /// What it was doing.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: Cause,
    },

    /// No switch of that name.
    #[error("there is no switch {switch}")]
    NoSwitch {
        /// The switch.
        switch: String,
    },
    /// No port of that name.
    #[error("there is no port {port}")]
    NoPort {
        /// The port.
        port: String,
    },
    /// No pipe of that name.
    #[error("there is no pipe {pipe}")]
    NoPipe {
        /// The pipe (its master end's name).
        pipe: String,
    },
    /// A handle this connection does not have.
    #[error("handle {handle} is not open on this connection")]
    NoHandle {
        /// The handle.
        handle: u64,
    },

    /// `switch-add` of a persistent switch.
    #[error("switch {switch} already exists")]
    SwitchExists {
        /// The switch.
        switch: String,
    },
    /// `port-add` of a persistent port.
    #[error("port {port} already exists")]
    PortExists {
        /// The port.
        port: String,
    },
    /// `port-add` of a persistent pipe.
    #[error("pipe {pipe} already exists")]
    PipeExists {
        /// The pipe (its master end's name).
        pipe: String,
    },
    /// `port-add` of a ring port where a VM port is.
    #[error("port {port} already exists, as a vhost-user port")]
    PortIsVm {
        /// The port.
        port: String,
    },
    /// `port-add` of a ring port where an interface is attached.
    #[error("port {port} already exists, as interface {ifname} attached")]
    PortIsInterface {
        /// The port.
        port: String,
        /// The interface.
        ifname: String,
    },
    /// `port-add --passthrough` of a port that exists.
    #[error("port {port} already exists; a passthrough port is created by this command (delete the port first)")]
    PassthroughPortExists {
        /// The port.
        port: String,
    },
    /// `attach` of an interface whose port name is taken.
    #[error("switch {switch} already has a port named {ifname}")]
    PortNameTaken {
        /// The switch.
        switch: String,
        /// The interface (and port) name.
        ifname: String,
    },

    /// The daemon has as many switches as it may.
    #[error("cannot create switch {switch}: the daemon already has {max} switches")]
    TooManySwitches {
        /// The switch that was to be created.
        switch: String,
        /// The limit.
        max: usize,
    },
    /// The daemon has as many pipes as it may.
    #[error("the daemon already has {max} pipes")]
    TooManyPipes {
        /// The limit.
        max: usize,
    },
    /// An OpenFlow number asked for outside the range.
    #[error("OpenFlow port {ofport} for {port} is out of range: use 1 to {max}")]
    OfPortRange {
        /// The port.
        port: String,
        /// The number asked for.
        ofport: u32,
        /// The largest.
        max: usize,
    },
    /// An OpenFlow number another port of the switch has.
    #[error("OpenFlow port {ofport} is {holder}'s: give {port} another number, or delete {holder} first")]
    OfPortTaken {
        /// The port.
        port: String,
        /// The number asked for.
        ofport: u32,
        /// The port that has it.
        holder: String,
    },
    /// An OpenFlow number asked for a port that exists with another.
    #[error("{port} exists with OpenFlow port {has}, not {ofport}: delete it to make it again at {ofport}")]
    OfPortOfExisting {
        /// The port.
        port: String,
        /// The number asked for.
        ofport: u32,
        /// The number it has.
        has: u32,
    },
    /// An OpenFlow number asked for something that is not a switch port.
    #[error("{port} is not a switch port: only switch ports have OpenFlow numbers")]
    OfPortNotSwitchPort {
        /// The port.
        port: String,
    },
    /// The switch has as many ports as it may.
    #[error("switch {switch} already has {max} ports, the most a switch can have")]
    SwitchFull {
        /// The switch.
        switch: String,
        /// The limit.
        max: usize,
    },
    /// The switch has no room for the ports an `attach` makes.
    #[error("switch {switch} has no room for {ports} more ports")]
    NoRoom {
        /// The switch.
        switch: String,
        /// The ports wanted.
        ports: usize,
    },

    /// `switch-del` of a switch with ports.
    #[error("switch {switch} still has {ports} ports: delete them first")]
    SwitchHasPorts {
        /// The switch.
        switch: String,
        /// How many.
        ports: usize,
    },
    /// `port-del` of a port a client has open.
    #[error("port {port} is open by a client: close it first")]
    PortInUse {
        /// The port.
        port: String,
    },
    /// `port-del` of a pipe a client has open.
    #[error("pipe {pipe} is open by a client: close it first")]
    PipeInUse {
        /// The pipe (its master end's name).
        pipe: String,
    },
    /// `open` of a port or pipe end another client has open.
    #[error("{what} {name} is already open by another client")]
    AlreadyOpen {
        /// A port or a pipe end.
        what: Openable,
        /// Its name.
        name: String,
    },
    /// `open` of a pipe end whose former client may still map its memory.
    #[error("pipe end {end} was open by another client that may still map the pipe's memory; the pipe gets fresh memory once its other end {other} is closed too")]
    PipeEndFormer {
        /// The pipe end.
        end: String,
        /// The other end.
        other: String,
    },
    /// `open` of the host end of a pipe whose other end is a guest's, by
    /// another user than the one who had it while the memory stays.
    #[error("pipe end {end} was open by another user who may still map the pipe's memory; it is handed to that user only until the pipe gets fresh memory, when the guest's QEMU goes")]
    PipeEndOtherUser {
        /// The pipe end.
        end: String,
    },
    /// `open` of a pipe end in a switch port's memory that cannot be made
    /// there.
    #[error("pipe {pipe} cannot be opened in the memory of switch port {port}: {why}")]
    PipeNotInPortMemory {
        /// The pipe end asked for.
        pipe: String,
        /// The switch port whose memory was asked for.
        port: String,
        /// Why, in a sentence.
        why: String,
    },
    /// A guest asking for an end of a pipe in a switch port's memory.
    #[error("pipe end {end} lives in the memory of switch port {port}, which is not passed through to VMs; pass through a pipe of its own")]
    PassthroughInPortMemory {
        /// The pipe end.
        end: String,
        /// The switch port.
        port: String,
    },
    /// `open` of an end of a pipe in a switch port's memory by another
    /// user than the one who has the port open.
    #[error("pipe {pipe} lives in the memory of switch port {port}, which another user has open; only that user (or root) may open its ends")]
    PipeInOtherUsersMemory {
        /// The pipe end.
        pipe: String,
        /// The switch port.
        port: String,
    },
    /// `open` of a port or pipe end a guest has.
    #[error("{what} {name} is passed through to a VM (ivshmem socket {}); open it from the guest", socket.display())]
    PassedThrough {
        /// A port or a pipe end.
        what: Openable,
        /// Its name.
        name: String,
        /// The ivshmem socket.
        socket: PathBuf,
    },
    /// `port-add --passthrough` of a pipe end a client has open.
    #[error("pipe end {end} is open already; close it first")]
    PassthroughEndOpen {
        /// The pipe end.
        end: String,
    },
    /// `port-add --passthrough` of a pipe end whose former client may still
    /// map its memory.
    #[error("pipe end {end} was open by a client that may still map the pipe's memory; the pipe gets fresh memory once its other end is closed too")]
    PassthroughEndFormer {
        /// The pipe end.
        end: String,
    },

    /// `open` of a VM port.
    #[error("port {port} is a vhost-user port for a VM; it cannot be opened as a netmap port")]
    OpenVmPort {
        /// The port.
        port: String,
    },
    /// `open` of an attached interface's port.
    #[error("port {port} is interface {ifname} attached to the switch; it cannot be opened as a netmap port (open netmap:{ifname} for the interface's own rings)")]
    OpenInterfacePort {
        /// The port.
        port: String,
        /// The interface.
        ifname: String,
    },
    /// `port-add` of both a VM and a passthrough port.
    #[error("{port}: a port is either a vhost-user port or a passthrough port, not both")]
    VmAndPassthrough {
        /// The port.
        port: String,
    },
    /// A VM port named outside a switch.
    #[error(
        "{port} is not a switch port: a vhost-user port is a port of a switch, like vale0:vm1"
    )]
    VmNotSwitchPort {
        /// The name.
        port: String,
    },
    /// A VM port named with `@conf:` sizes.
    #[error("{port}: @conf: sizes do not apply to a vhost-user port (use --queues)")]
    VmSizes {
        /// The port.
        port: String,
    },
    /// A VM port without a socket path.
    #[error("a vhost-user port needs a socket path")]
    VmNoSocketPath,
    /// `port-add` or `port-del` of `netmap:IF`.
    #[error("netmap:{ifname} is the NIC itself, opened by an application (like netmap's native mode); to put {ifname} on a switch, attach it: ringswitch ctl attach vale0 {ifname}")]
    NicNotAPort {
        /// The interface.
        ifname: String,
    },

    /// `attach` of nothing.
    #[error("attach needs an interface, a host port, or both")]
    AttachNothing,
    /// `attach` of an unnamed host port without a NIC.
    #[error("a host port needs a name for its TAP interface (or a NIC to take it from)")]
    HostPortUnnamed,
    /// `attach` of a host port named as its NIC.
    #[error("the host port needs a name of its own")]
    HostPortSameName,
    /// A queue count out of range.
    #[error("queues must be 1 to {max}")]
    Queues {
        /// The limit.
        max: u32,
    },
    /// An interface name that cannot name a switch port.
    #[error("{ifname:?} cannot name a switch port: use letters, digits, '-', '_' and '.'")]
    IfnameNotPortName {
        /// The interface.
        ifname: String,
    },
    /// `attach` of an interface that is attached.
    #[error("{ifname} is already attached, as port {port}")]
    AlreadyAttached {
        /// The interface.
        ifname: String,
        /// Its port.
        port: String,
    },
    /// `open` of `netmap:IF` while another client has it.
    #[error("{switch} is already open by another client")]
    DirectOpen {
        /// `netmap:IF`.
        switch: String,
    },
    /// `open` of `netmap:IF` while the interface is attached to a switch.
    #[error("{ifname} is attached to a switch as port {port}: detach it first")]
    DirectAttached {
        /// The interface.
        ifname: String,
        /// Its port.
        port: String,
    },
    /// `detach` of something that is not a switch port.
    #[error("{port} is not a switch port: name the attached interface's port, like vale0:eth0")]
    DetachNotSwitchPort {
        /// The name.
        port: String,
    },
    /// `port-add` of a pipe end with VLANs.
    #[error("{end} is a pipe end: a pipe joins two programs without a switch, so it has no VLANs (give {vlan} to a switch port, like vale0:a)")]
    VlanOnPipe {
        /// The pipe end.
        end: String,
        /// The VLANs asked for.
        vlan: String,
    },
    /// `port-add --vnet-hdr` of a port that is not a passthrough switch
    /// port.
    #[error("{port}: --vnet-hdr is for passthrough switch ports (add --passthrough PATH; pipe ends carry no headers)")]
    VnetHdrNotPassthrough {
        /// The port.
        port: String,
    },
    /// `port-add --migratable` of something other than a passthrough
    /// switch port without `--vnet-hdr`.
    #[error("{port}: --migratable is for passthrough switch ports without --vnet-hdr (a pipe end's memory is shared with its other end, and a --vnet-hdr port's queues are not adopted yet); QEMU keeps blocking the migration of the others")]
    MigratableNotPassthrough {
        /// The port.
        port: String,
    },
    /// `port-add` of a passthrough port with VLANs.
    #[error("{port}: VLANs are set on ring, VM and interface ports, not on passthrough ports")]
    VlanOnPassthrough {
        /// The port.
        port: String,
    },
    /// `port-add` with VLANs of a port a client opened on demand.
    #[error("port {port} is open by a client, which made it with VLANs {vlan}; a port's VLANs are set when it is made: close it, then add it with them")]
    VlanOfOpenPort {
        /// The port.
        port: String,
        /// Its VLANs.
        vlan: String,
    },
    /// `detach` of a port that is not an interface.
    #[error("port {port} is not an attached interface: use port-del")]
    NotAnInterface {
        /// The port.
        port: String,
    },
}

impl RegistryError {
    /// An internal failure: `what` the daemon was doing, and why it failed.
    pub fn internal(what: &'static str, source: impl Into<Cause>) -> RegistryError {
        RegistryError::Internal {
            what,
            source: source.into(),
        }
    }

    /// The protocol's class of this error.
    pub fn code(&self) -> ErrorCode {
        use RegistryError as E;
        match self {
            E::Name(NameError::Geometry(_)) | E::Geometry(_) => ErrorCode::Geometry,
            E::Name(_)
            | E::VmNotSwitchPort { .. }
            | E::VmSizes { .. }
            | E::IfnameNotPortName { .. }
            | E::DetachNotSwitchPort { .. } => ErrorCode::BadName,
            E::Interface(e) => match e {
                DevError::NoSuchInterface { .. } => ErrorCode::NotFound,
                DevError::BadName { .. } => ErrorCode::BadName,
                DevError::Permission { .. } => ErrorCode::Permission,
                DevError::Busy { .. } => ErrorCode::Busy,
                DevError::Unsupported { .. } => ErrorCode::Unsupported,
                DevError::Io { .. } => ErrorCode::Internal,
            },
            E::NoSwitch { .. } | E::NoPort { .. } | E::NoPipe { .. } | E::NoHandle { .. } => {
                ErrorCode::NotFound
            }
            E::SwitchExists { .. }
            | E::PortExists { .. }
            | E::PipeExists { .. }
            | E::PortIsVm { .. }
            | E::PortIsInterface { .. }
            | E::PassthroughPortExists { .. }
            | E::PortNameTaken { .. }
            | E::OfPortOfExisting { .. }
            | E::VlanOfOpenPort { .. } => ErrorCode::Exists,
            E::OverBudget(_)
            | E::Attach(_)
            | E::TooManySwitches { .. }
            | E::TooManyPipes { .. }
            | E::SwitchFull { .. }
            | E::NoRoom { .. } => ErrorCode::Limit,
            E::SwitchHasPorts { .. }
            | E::PortInUse { .. }
            | E::PipeInUse { .. }
            | E::AlreadyOpen { .. }
            | E::PipeEndFormer { .. }
            | E::PipeEndOtherUser { .. }
            | E::PassedThrough { .. }
            | E::PassthroughEndOpen { .. }
            | E::PassthroughEndFormer { .. }
            | E::AlreadyAttached { .. }
            | E::DirectOpen { .. }
            | E::OfPortTaken { .. }
            | E::DirectAttached { .. } => ErrorCode::Busy,
            E::OpenVmPort { .. }
            | E::OpenInterfacePort { .. }
            | E::PipeNotInPortMemory { .. }
            | E::PassthroughInPortMemory { .. } => ErrorCode::Unsupported,
            E::PipeInOtherUsersMemory { .. } => ErrorCode::Denied,
            E::VmConfig(_)
            | E::VmSocket(_)
            | E::Passthrough { .. }
            | E::VmAndPassthrough { .. }
            | E::VmNoSocketPath
            | E::NicNotAPort { .. }
            | E::AttachNothing
            | E::HostPortUnnamed
            | E::HostPortSameName
            | E::Queues { .. }
            | E::NotAnInterface { .. }
            | E::VlanOnPipe { .. }
            | E::VlanOnPassthrough { .. }
            | E::OfPortRange { .. }
            | E::OfPortNotSwitchPort { .. }
            | E::VnetHdrNotPassthrough { .. }
            | E::MigratableNotPassthrough { .. } => ErrorCode::BadRequest,
            E::Internal { .. } => ErrorCode::Internal,
            E::OpenFlow { source, .. } => match source {
                crate::openflow::StartError::Target(_) => ErrorCode::BadRequest,
                crate::openflow::StartError::Listen(..) => ErrorCode::Busy,
                crate::openflow::StartError::Thread(_) => ErrorCode::Internal,
            },
            E::NoFlowTables { .. } => ErrorCode::NotFound,
        }
    }
}

/// The one place a registry error becomes a protocol reply.
impl From<RegistryError> for ErrorReply {
    fn from(e: RegistryError) -> ErrorReply {
        ErrorReply::new(e.code(), error_chain(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_the_code_and_the_whole_sentence() {
        let r = ErrorReply::from(RegistryError::NoSwitch {
            switch: "vale3".into(),
        });
        assert_eq!(r.code, ErrorCode::NotFound);
        assert_eq!(r.message, "there is no switch vale3");
        let e = std::io::Error::other("out of luck");
        let r = ErrorReply::from(RegistryError::internal("creating an eventfd", e));
        assert_eq!(r.code, ErrorCode::Internal);
        assert_eq!(r.message, "creating an eventfd: out of luck");
        let r = ErrorReply::from(RegistryError::internal(
            "opening the port",
            "not a ring port",
        ));
        assert_eq!(r.message, "opening the port: not a ring port");
        let r = ErrorReply::from(RegistryError::PassedThrough {
            what: Openable::Port,
            name: "vale0:p".into(),
            socket: "/run/p.sock".into(),
        });
        assert_eq!(r.code, ErrorCode::Busy);
        assert_eq!(
            r.message,
            "port vale0:p is passed through to a VM (ivshmem socket /run/p.sock); open it from the guest"
        );
    }

    #[test]
    fn a_geometry_in_a_name_is_a_geometry_error() {
        let e = "vale0:p@conf:rings=99"
            .parse::<ringswitch_control::PortName>()
            .unwrap_err();
        assert_eq!(RegistryError::from(e).code(), ErrorCode::Geometry);
        let e = "nonsense"
            .parse::<ringswitch_control::PortName>()
            .unwrap_err();
        assert_eq!(RegistryError::from(e).code(), ErrorCode::BadName);
    }
}
