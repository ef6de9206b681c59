//! Why a flow or group modification is refused, and the `OFPT_ERROR` to
//! answer with.

use ringswitch_openflow::{ErrorCode, Field};

/// A refused FLOW_MOD, GROUP_MOD or statistics request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The table id is not one of the switch's tables.
    #[error("table {0} is not one of the switch's tables")]
    BadTableId(u8),
    /// The table holds as many flows as it may.
    #[error("table {0} is full")]
    TableFull(u8),
    /// `OFPFF_CHECK_OVERLAP` and a flow of the same priority can match the
    /// same packets.
    #[error("the flow overlaps a flow of the same priority")]
    Overlap,
    /// A match field the tables do not match on.
    #[error("the tables do not match on {}", .0.name())]
    UnsupportedField(Field),
    /// An action the tables do not carry out.
    #[error("the tables do not support the action {0}")]
    UnsupportedAction(&'static str),
    /// A set-field of a field the verdicts do not edit.
    #[error("the tables cannot set {}", .0.name())]
    UnsupportedSetField(Field),
    /// A set-field whose header the match does not guarantee.
    #[error("setting {} needs the match to say the packet carries it", .0.name())]
    MatchInconsistent(Field),
    /// An instruction the tables do not carry out.
    #[error("the tables do not support the instruction {0}")]
    UnsupportedInstruction(&'static str),
    /// A goto_table that does not go forward to an existing table.
    #[error("goto_table {to} from table {from} does not go forward to one of the tables")]
    BadGotoTable {
        /// The flow's table.
        from: u8,
        /// The target.
        to: u8,
    },
    /// An output to a port that cannot be one in a flow.
    #[error("port {0:#x} cannot be the output of a flow")]
    BadOutPort(u32),
    /// A group action naming a group that does not exist.
    #[error("group {0} does not exist")]
    BadOutGroup(u32),
    /// GROUP_MOD add of a group that exists.
    #[error("group {0} exists already")]
    GroupExists(u32),
    /// GROUP_MOD modify of a group that does not exist.
    #[error("group {0} does not exist")]
    UnknownGroup(u32),
    /// A group id that cannot name a group.
    #[error("{0:#x} is not a group number")]
    InvalidGroup(u32),
    /// A group type the tables do not carry out.
    #[error("the tables support ALL, SELECT and INDIRECT groups only")]
    UnsupportedGroupType,
    /// An INDIRECT group without exactly one bucket.
    #[error("an indirect group has exactly one bucket")]
    IndirectBuckets,
    /// A weight on a bucket of a group other than SELECT.
    #[error("only the buckets of select groups have weights")]
    WeightUnsupported,
    /// A group action inside a bucket.
    #[error("a bucket's actions cannot name a group")]
    ChainingUnsupported,
    /// As many groups as the switch keeps.
    #[error("the switch holds as many groups as it may")]
    OutOfGroups,
    /// More buckets than a group may have.
    #[error("a group has more buckets than the tables allow")]
    OutOfBuckets,
    /// More actions in one list than the tables allow.
    #[error("an action list is longer than the tables allow")]
    TooManyActions,
    /// A table id in a request that may not name all tables.
    #[error("this command needs one table, not all")]
    AllTablesNotAllowed,
}

impl FlowError {
    /// The `OFPT_ERROR` (type, code) to answer with.
    pub fn code(&self) -> ErrorCode {
        use FlowError::*;
        match self {
            BadTableId(_) | AllTablesNotAllowed => ErrorCode::FLOW_MOD_FAILED_BAD_TABLE_ID,
            TableFull(_) => ErrorCode::FLOW_MOD_FAILED_TABLE_FULL,
            Overlap => ErrorCode::FLOW_MOD_FAILED_OVERLAP,
            UnsupportedField(_) => ErrorCode::BAD_MATCH_BAD_FIELD,
            UnsupportedAction(_) => ErrorCode::BAD_ACTION_BAD_TYPE,
            UnsupportedSetField(_) => ErrorCode::BAD_ACTION_BAD_SET_TYPE,
            MatchInconsistent(_) => ErrorCode::BAD_ACTION_MATCH_INCONSISTENT,
            UnsupportedInstruction(_) => ErrorCode::BAD_INSTRUCTION_UNSUP_INST,
            BadGotoTable { .. } => ErrorCode::BAD_INSTRUCTION_BAD_TABLE_ID,
            BadOutPort(_) => ErrorCode::BAD_ACTION_BAD_OUT_PORT,
            BadOutGroup(_) => ErrorCode::BAD_ACTION_BAD_OUT_GROUP,
            GroupExists(_) => ErrorCode::GROUP_MOD_FAILED_GROUP_EXISTS,
            UnknownGroup(_) => ErrorCode::GROUP_MOD_FAILED_UNKNOWN_GROUP,
            InvalidGroup(_) => ErrorCode::GROUP_MOD_FAILED_INVALID_GROUP,
            UnsupportedGroupType | IndirectBuckets => ErrorCode::GROUP_MOD_FAILED_BAD_TYPE,
            WeightUnsupported => ErrorCode::GROUP_MOD_FAILED_WEIGHT_UNSUPPORTED,
            ChainingUnsupported => ErrorCode::GROUP_MOD_FAILED_CHAINING_UNSUPPORTED,
            OutOfGroups => ErrorCode::GROUP_MOD_FAILED_OUT_OF_GROUPS,
            OutOfBuckets => ErrorCode::GROUP_MOD_FAILED_OUT_OF_BUCKETS,
            TooManyActions => ErrorCode::BAD_ACTION_TOO_MANY,
        }
    }
}
