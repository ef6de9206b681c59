//! What goes wrong, as the (type, code) pair of the `OFPT_ERROR` the switch
//! answers with.
//!
//! Every refusal of the decoder is a [`DecodeError`]: an [`ErrorCode`]
//! (the pair the OpenFlow 1.3 specification assigns to that fault) and a
//! plain sentence for logs. [`crate::error_reply`] turns one into the
//! `OFPT_ERROR` message carrying the first bytes of the offending request.

use std::fmt;

/// An `OFPT_ERROR` (type, code) pair. The associated constants are the
/// pairs the codec and a switch use; any pair read from the wire is kept
/// as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode {
    /// `OFPET_*`.
    pub kind: u16,
    /// The code within the type (`OFPHFC_*`, `OFPBRC_*`, ...).
    pub code: u16,
}

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = ($kind:expr, $code:expr);)*) => {
        impl ErrorCode {
            $($(#[$doc])* pub const $name: ErrorCode = ErrorCode { kind: $kind, code: $code };)*

            /// The constant's name (`"BAD_MATCH_BAD_PREREQ"`), when the pair
            /// is one of them.
            pub fn name(self) -> Option<&'static str> {
                match (self.kind, self.code) {
                    $(($kind, $code) => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// No common version (`OFPHFC_INCOMPATIBLE`).
    HELLO_FAILED_INCOMPATIBLE = (0, 0);
    /// `OFPHFC_EPERM`.
    HELLO_FAILED_EPERM = (0, 1);
    /// A version other than the negotiated one (`OFPBRC_BAD_VERSION`).
    BAD_REQUEST_BAD_VERSION = (1, 0);
    /// A message type the switch does not handle (`OFPBRC_BAD_TYPE`).
    BAD_REQUEST_BAD_TYPE = (1, 1);
    /// A multipart type the switch does not handle (`OFPBRC_BAD_MULTIPART`).
    BAD_REQUEST_BAD_MULTIPART = (1, 2);
    /// An experimenter message (`OFPBRC_BAD_EXPERIMENTER`).
    BAD_REQUEST_BAD_EXPERIMENTER = (1, 3);
    /// `OFPBRC_EPERM`.
    BAD_REQUEST_EPERM = (1, 5);
    /// A length that does not fit the message's layout (`OFPBRC_BAD_LEN`).
    BAD_REQUEST_BAD_LEN = (1, 6);
    /// A buffer_id other than `OFP_NO_BUFFER` on a switch that buffers
    /// nothing (`OFPBRC_BUFFER_UNKNOWN`).
    BAD_REQUEST_BUFFER_UNKNOWN = (1, 8);
    /// `OFPBRC_BAD_TABLE_ID`.
    BAD_REQUEST_BAD_TABLE_ID = (1, 9);
    /// A slave controller may not modify the switch (`OFPBRC_IS_SLAVE`).
    BAD_REQUEST_IS_SLAVE = (1, 10);
    /// `OFPBRC_BAD_PORT`.
    BAD_REQUEST_BAD_PORT = (1, 11);
    /// `OFPBRC_BAD_PACKET`.
    BAD_REQUEST_BAD_PACKET = (1, 12);
    /// `OFPBRC_MULTIPART_BUFFER_OVERFLOW`.
    BAD_REQUEST_MULTIPART_BUFFER_OVERFLOW = (1, 13);
    /// Unknown action type (`OFPBAC_BAD_TYPE`).
    BAD_ACTION_BAD_TYPE = (2, 0);
    /// `OFPBAC_BAD_LEN`.
    BAD_ACTION_BAD_LEN = (2, 1);
    /// `OFPBAC_BAD_EXPERIMENTER`.
    BAD_ACTION_BAD_EXPERIMENTER = (2, 2);
    /// `OFPBAC_BAD_OUT_PORT`.
    BAD_ACTION_BAD_OUT_PORT = (2, 4);
    /// `OFPBAC_BAD_ARGUMENT`.
    BAD_ACTION_BAD_ARGUMENT = (2, 5);
    /// More actions than the codec takes in one list (`OFPBAC_TOO_MANY`).
    BAD_ACTION_TOO_MANY = (2, 7);
    /// `OFPBAC_BAD_QUEUE`.
    BAD_ACTION_BAD_QUEUE = (2, 8);
    /// `OFPBAC_BAD_OUT_GROUP`.
    BAD_ACTION_BAD_OUT_GROUP = (2, 9);
    /// An action whose prerequisites the match lacks (`OFPBAC_MATCH_INCONSISTENT`).
    BAD_ACTION_MATCH_INCONSISTENT = (2, 10);
    /// `OFPBAC_UNSUPPORTED_ORDER`.
    BAD_ACTION_UNSUPPORTED_ORDER = (2, 11);
    /// A set-field of an unknown field (`OFPBAC_BAD_SET_TYPE`).
    BAD_ACTION_BAD_SET_TYPE = (2, 13);
    /// `OFPBAC_BAD_SET_LEN`.
    BAD_ACTION_BAD_SET_LEN = (2, 14);
    /// `OFPBAC_BAD_SET_ARGUMENT`.
    BAD_ACTION_BAD_SET_ARGUMENT = (2, 15);
    /// Unknown instruction type (`OFPBIC_UNKNOWN_INST`).
    BAD_INSTRUCTION_UNKNOWN_INST = (3, 0);
    /// `OFPBIC_UNSUP_INST`.
    BAD_INSTRUCTION_UNSUP_INST = (3, 1);
    /// `OFPBIC_BAD_TABLE_ID`.
    BAD_INSTRUCTION_BAD_TABLE_ID = (3, 2);
    /// `OFPBIC_UNSUP_METADATA`.
    BAD_INSTRUCTION_UNSUP_METADATA = (3, 3);
    /// `OFPBIC_UNSUP_METADATA_MASK`.
    BAD_INSTRUCTION_UNSUP_METADATA_MASK = (3, 4);
    /// `OFPBIC_BAD_EXPERIMENTER`.
    BAD_INSTRUCTION_BAD_EXPERIMENTER = (3, 5);
    /// `OFPBIC_BAD_LEN`.
    BAD_INSTRUCTION_BAD_LEN = (3, 7);
    /// Match type other than OXM (`OFPBMC_BAD_TYPE`).
    BAD_MATCH_BAD_TYPE = (4, 0);
    /// `OFPBMC_BAD_LEN`.
    BAD_MATCH_BAD_LEN = (4, 1);
    /// `OFPBMC_BAD_TAG`.
    BAD_MATCH_BAD_TAG = (4, 2);
    /// A value with bits set outside its mask (`OFPBMC_BAD_WILDCARDS`).
    BAD_MATCH_BAD_WILDCARDS = (4, 5);
    /// Unknown field or class (`OFPBMC_BAD_FIELD`).
    BAD_MATCH_BAD_FIELD = (4, 6);
    /// A value out of the field's range (`OFPBMC_BAD_VALUE`).
    BAD_MATCH_BAD_VALUE = (4, 7);
    /// A mask on a field that takes none (`OFPBMC_BAD_MASK`).
    BAD_MATCH_BAD_MASK = (4, 8);
    /// A field without its prerequisite (`OFPBMC_BAD_PREREQ`).
    BAD_MATCH_BAD_PREREQ = (4, 9);
    /// A field twice (`OFPBMC_DUP_FIELD`).
    BAD_MATCH_DUP_FIELD = (4, 10);
    /// `OFPFMFC_UNKNOWN`.
    FLOW_MOD_FAILED_UNKNOWN = (5, 0);
    /// `OFPFMFC_TABLE_FULL`.
    FLOW_MOD_FAILED_TABLE_FULL = (5, 1);
    /// `OFPFMFC_BAD_TABLE_ID`.
    FLOW_MOD_FAILED_BAD_TABLE_ID = (5, 2);
    /// `OFPFMFC_OVERLAP`.
    FLOW_MOD_FAILED_OVERLAP = (5, 3);
    /// `OFPFMFC_BAD_TIMEOUT`.
    FLOW_MOD_FAILED_BAD_TIMEOUT = (5, 5);
    /// `OFPFMFC_BAD_COMMAND`.
    FLOW_MOD_FAILED_BAD_COMMAND = (5, 6);
    /// `OFPFMFC_BAD_FLAGS`.
    FLOW_MOD_FAILED_BAD_FLAGS = (5, 7);
    /// `OFPGMFC_GROUP_EXISTS`.
    GROUP_MOD_FAILED_GROUP_EXISTS = (6, 0);
    /// `OFPGMFC_INVALID_GROUP`.
    GROUP_MOD_FAILED_INVALID_GROUP = (6, 1);
    /// `OFPGMFC_WEIGHT_UNSUPPORTED`.
    GROUP_MOD_FAILED_WEIGHT_UNSUPPORTED = (6, 2);
    /// `OFPGMFC_OUT_OF_GROUPS`.
    GROUP_MOD_FAILED_OUT_OF_GROUPS = (6, 3);
    /// More buckets than the codec takes (`OFPGMFC_OUT_OF_BUCKETS`).
    GROUP_MOD_FAILED_OUT_OF_BUCKETS = (6, 4);
    /// `OFPGMFC_CHAINING_UNSUPPORTED`.
    GROUP_MOD_FAILED_CHAINING_UNSUPPORTED = (6, 5);
    /// `OFPGMFC_WATCH_UNSUPPORTED`.
    GROUP_MOD_FAILED_WATCH_UNSUPPORTED = (6, 6);
    /// `OFPGMFC_LOOP`.
    GROUP_MOD_FAILED_LOOP = (6, 7);
    /// `OFPGMFC_UNKNOWN_GROUP`.
    GROUP_MOD_FAILED_UNKNOWN_GROUP = (6, 8);
    /// `OFPGMFC_BAD_TYPE`.
    GROUP_MOD_FAILED_BAD_TYPE = (6, 10);
    /// `OFPGMFC_BAD_COMMAND`.
    GROUP_MOD_FAILED_BAD_COMMAND = (6, 11);
    /// A bucket whose length does not fit (`OFPGMFC_BAD_BUCKET`).
    GROUP_MOD_FAILED_BAD_BUCKET = (6, 12);
    /// `OFPPMFC_BAD_PORT`.
    PORT_MOD_FAILED_BAD_PORT = (7, 0);
    /// `OFPPMFC_EPERM`.
    PORT_MOD_FAILED_EPERM = (7, 4);
    /// `OFPTMFC_BAD_TABLE`.
    TABLE_MOD_FAILED_BAD_TABLE = (8, 0);
    /// `OFPTMFC_BAD_CONFIG`.
    TABLE_MOD_FAILED_BAD_CONFIG = (8, 1);
    /// `OFPSCFC_BAD_FLAGS`.
    SWITCH_CONFIG_FAILED_BAD_FLAGS = (10, 0);
    /// `OFPSCFC_BAD_LEN`.
    SWITCH_CONFIG_FAILED_BAD_LEN = (10, 1);
    /// `OFPRRFC_STALE`.
    ROLE_REQUEST_FAILED_STALE = (11, 0);
    /// `OFPRRFC_UNSUP`.
    ROLE_REQUEST_FAILED_UNSUP = (11, 1);
    /// `OFPRRFC_BAD_ROLE`.
    ROLE_REQUEST_FAILED_BAD_ROLE = (11, 2);
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({},{})", self.kind, self.code),
            None => write!(f, "({},{})", self.kind, self.code),
        }
    }
}

/// Why bytes were refused: the error the switch answers with, and a
/// sentence saying what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (OpenFlow error {code})")]
pub struct DecodeError {
    /// The `OFPT_ERROR` (type, code) to send back.
    pub code: ErrorCode,
    /// What was wrong, in a plain sentence.
    pub reason: &'static str,
}

impl DecodeError {
    /// A refusal with `code` and `reason`.
    pub const fn new(code: ErrorCode, reason: &'static str) -> Self {
        DecodeError { code, reason }
    }
}

/// Shorthand for building a [`DecodeError`].
pub(crate) const fn err(code: ErrorCode, reason: &'static str) -> DecodeError {
    DecodeError::new(code, reason)
}

/// Why a value could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The encoded message would not fit the header's 16-bit length.
    #[error("the encoded message is {0} bytes, more than the 65535 an OpenFlow header can say")]
    TooLong(usize),
}
