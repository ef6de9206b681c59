//! Actions (`ofp_action_*`) and instructions (`ofp_instruction_*`).
//!
//! Every action and instruction of OpenFlow 1.3 decodes, with the checks
//! that need nothing but the bytes: lengths (each a multiple of 8 and the
//! exact size of its type), output ports that cannot be outputs, group ids
//! above `OFPG_MAX`, push ethertypes of the wrong kind, masked or unknown
//! set-fields, an instruction type twice. What the switch does with them
//! (which it supports, whether a set-field's prerequisites are in the
//! match) is its own business.

use crate::consts::*;
use crate::error::{err, DecodeError, ErrorCode};
use crate::oxm::{Oxm, OxmUse};
use crate::wire::{pad8, put_tlv, Put, Reader};

/// One action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Output to `port`; to the controller, at most `max_len` bytes
    /// (`OFPCML_NO_BUFFER`: all of it).
    Output {
        /// A port number or a reserved port (`OFPP_*`).
        port: u32,
        /// For `OFPP_CONTROLLER`: how much of the packet to send.
        max_len: u16,
    },
    /// Copy the TTL outwards, from next-to-outermost to outermost header.
    CopyTtlOut,
    /// Copy the TTL inwards.
    CopyTtlIn,
    /// Set the MPLS TTL.
    SetMplsTtl(u8),
    /// Decrement the MPLS TTL.
    DecMplsTtl,
    /// Push a VLAN tag with this ethertype (0x8100 or 0x88a8).
    PushVlan(u16),
    /// Pop the outer VLAN tag.
    PopVlan,
    /// Push an MPLS label with this ethertype (0x8847 or 0x8848).
    PushMpls(u16),
    /// Pop the outer MPLS label; the payload has this ethertype.
    PopMpls(u16),
    /// Set the queue id for output.
    SetQueue(u32),
    /// Process the packet through this group.
    Group(u32),
    /// Set the IP TTL.
    SetNwTtl(u8),
    /// Decrement the IP TTL.
    DecNwTtl,
    /// Set a header field (an OXM without mask).
    SetField(Oxm),
    /// Push a PBB service tag with this ethertype (0x88e7).
    PushPbb(u16),
    /// Pop the outer PBB service tag.
    PopPbb,
    /// An experimenter action, kept as bytes.
    Experimenter {
        /// The experimenter id.
        experimenter: u32,
        /// What follows the id (a multiple of 8 bytes minus nothing: the
        /// action is padded to 8 on encode).
        data: Vec<u8>,
    },
}

/// Action type numbers (`OFPAT_*`).
mod at {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Whether `port` may be the port of an output action.
pub fn valid_output_port(port: u32) -> bool {
    (port != 0 && port <= OFPP_MAX)
        || matches!(
            port,
            OFPP_IN_PORT
                | OFPP_TABLE
                | OFPP_NORMAL
                | OFPP_FLOOD
                | OFPP_ALL
                | OFPP_CONTROLLER
                | OFPP_LOCAL
        )
}

const BAD_LEN: DecodeError = err(
    ErrorCode::BAD_ACTION_BAD_LEN,
    "an action's length is not a multiple of 8, not its type's size, or runs past its list",
);

impl Action {
    /// Reads one action.
    fn decode(r: &mut Reader<'_>) -> Result<Action, DecodeError> {
        let (ty, len, mut b) = r.element(BAD_LEN)?;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(BAD_LEN) };
        let ethertype = |b: &mut Reader<'_>, ok: &[u16]| -> Result<u16, DecodeError> {
            let t = b.u16()?;
            if ok.is_empty() || ok.contains(&t) {
                Ok(t)
            } else {
                Err(err(
                    ErrorCode::BAD_ACTION_BAD_ARGUMENT,
                    "a push action's ethertype is not one of its kind",
                ))
            }
        };
        let a = match ty {
            at::OUTPUT => {
                fixed(16)?;
                let port = b.u32()?;
                if !valid_output_port(port) {
                    return Err(err(ErrorCode::BAD_ACTION_BAD_OUT_PORT, "an output action names port 0, ANY or a number above OFPP_MAX that is not a reserved port"));
                }
                Action::Output {
                    port,
                    max_len: b.u16()?,
                }
            }
            at::COPY_TTL_OUT => fixed(8).map(|_| Action::CopyTtlOut)?,
            at::COPY_TTL_IN => fixed(8).map(|_| Action::CopyTtlIn)?,
            at::SET_MPLS_TTL => fixed(8).and_then(|_| b.u8()).map(Action::SetMplsTtl)?,
            at::DEC_MPLS_TTL => fixed(8).map(|_| Action::DecMplsTtl)?,
            at::PUSH_VLAN => {
                fixed(8)?;
                Action::PushVlan(ethertype(&mut b, &[ETH_TYPE_VLAN, ETH_TYPE_VLAN_QINQ])?)
            }
            at::POP_VLAN => fixed(8).map(|_| Action::PopVlan)?,
            at::PUSH_MPLS => {
                fixed(8)?;
                Action::PushMpls(ethertype(&mut b, &[ETH_TYPE_MPLS, ETH_TYPE_MPLS_MCAST])?)
            }
            at::POP_MPLS => {
                fixed(8)?;
                Action::PopMpls(ethertype(&mut b, &[])?)
            }
            at::SET_QUEUE => fixed(8).and_then(|_| b.u32()).map(Action::SetQueue)?,
            at::GROUP => {
                fixed(8)?;
                let g = b.u32()?;
                if g > OFPG_MAX {
                    return Err(err(
                        ErrorCode::BAD_ACTION_BAD_OUT_GROUP,
                        "a group action names a group above OFPG_MAX",
                    ));
                }
                Action::Group(g)
            }
            at::SET_NW_TTL => fixed(8).and_then(|_| b.u8()).map(Action::SetNwTtl)?,
            at::DEC_NW_TTL => fixed(8).map(|_| Action::DecNwTtl)?,
            at::SET_FIELD => {
                let mut tlv = Reader::new(
                    b.rest(),
                    err(
                        ErrorCode::BAD_ACTION_BAD_SET_LEN,
                        "a set-field action is shorter than its OXM",
                    ),
                );
                let oxm = Oxm::decode(&mut tlv, OxmUse::SetField)?;
                if pad8(4 + oxm.wire_len()) != len {
                    return Err(err(
                        ErrorCode::BAD_ACTION_BAD_SET_LEN,
                        "a set-field action's length is not its OXM's padded to 8",
                    ));
                }
                Action::SetField(oxm)
            }
            at::PUSH_PBB => {
                fixed(8)?;
                Action::PushPbb(ethertype(&mut b, &[ETH_TYPE_PBB])?)
            }
            at::POP_PBB => fixed(8).map(|_| Action::PopPbb)?,
            at::EXPERIMENTER => Action::Experimenter {
                experimenter: b.u32()?,
                data: b.rest().to_vec(),
            },
            _ => {
                return Err(err(
                    ErrorCode::BAD_ACTION_BAD_TYPE,
                    "an action type is not one of OpenFlow 1.3",
                ))
            }
        };
        Ok(a)
    }

    fn type_number(&self) -> u16 {
        match self {
            Action::Output { .. } => at::OUTPUT,
            Action::CopyTtlOut => at::COPY_TTL_OUT,
            Action::CopyTtlIn => at::COPY_TTL_IN,
            Action::SetMplsTtl(_) => at::SET_MPLS_TTL,
            Action::DecMplsTtl => at::DEC_MPLS_TTL,
            Action::PushVlan(_) => at::PUSH_VLAN,
            Action::PopVlan => at::POP_VLAN,
            Action::PushMpls(_) => at::PUSH_MPLS,
            Action::PopMpls(_) => at::POP_MPLS,
            Action::SetQueue(_) => at::SET_QUEUE,
            Action::Group(_) => at::GROUP,
            Action::SetNwTtl(_) => at::SET_NW_TTL,
            Action::DecNwTtl => at::DEC_NW_TTL,
            Action::SetField(_) => at::SET_FIELD,
            Action::PushPbb(_) => at::PUSH_PBB,
            Action::PopPbb => at::POP_PBB,
            Action::Experimenter { .. } => at::EXPERIMENTER,
        }
    }

    /// Appends the action (padding makes the short ones 8 bytes).
    fn encode(&self, out: &mut Vec<u8>) {
        put_tlv(out, self.type_number(), |out| match self {
            Action::Output { port, max_len } => {
                out.put_u32(*port);
                out.put_u16(*max_len);
                out.put_zeros(6);
            }
            Action::SetMplsTtl(t) | Action::SetNwTtl(t) => out.put_u8(*t),
            Action::PushVlan(t) | Action::PushMpls(t) | Action::PopMpls(t) | Action::PushPbb(t) => {
                out.put_u16(*t)
            }
            Action::SetQueue(id) | Action::Group(id) => out.put_u32(*id),
            Action::SetField(oxm) => oxm.encode(out),
            Action::Experimenter { experimenter, data } => {
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
            }
            Action::CopyTtlOut
            | Action::CopyTtlIn
            | Action::DecMplsTtl
            | Action::PopVlan
            | Action::DecNwTtl
            | Action::PopPbb => {}
        });
    }

    /// Reads a list of actions filling `bytes`, at most [`MAX_ACTIONS`].
    pub(crate) fn decode_list(bytes: &[u8]) -> Result<Vec<Action>, DecodeError> {
        let mut r = Reader::new(bytes, BAD_LEN);
        let mut out = Vec::new();
        while r.remaining() > 0 {
            if out.len() == MAX_ACTIONS {
                return Err(err(
                    ErrorCode::BAD_ACTION_TOO_MANY,
                    "an action list holds more actions than the switch takes (128)",
                ));
            }
            out.push(Action::decode(&mut r)?);
        }
        Ok(out)
    }

    /// Appends a list of actions.
    pub(crate) fn encode_list(list: &[Action], out: &mut Vec<u8>) {
        for a in list {
            a.encode(out);
        }
    }
}

/// One instruction of a flow entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// Continue in this table.
    GotoTable(u8),
    /// Write the metadata bits under `mask`.
    WriteMetadata {
        /// The new bits.
        metadata: u64,
        /// Which bits to write.
        mask: u64,
    },
    /// Merge these actions into the action set.
    WriteActions(Vec<Action>),
    /// Apply these actions now.
    ApplyActions(Vec<Action>),
    /// Empty the action set.
    ClearActions,
    /// Apply this meter.
    Meter(u32),
    /// An experimenter instruction, kept as bytes.
    Experimenter {
        /// The experimenter id.
        experimenter: u32,
        /// What follows the id.
        data: Vec<u8>,
    },
}

/// Instruction type numbers (`OFPIT_*`).
mod it {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

impl Instruction {
    fn type_number(&self) -> u16 {
        match self {
            Instruction::GotoTable(_) => it::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => it::WRITE_METADATA,
            Instruction::WriteActions(_) => it::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => it::APPLY_ACTIONS,
            Instruction::ClearActions => it::CLEAR_ACTIONS,
            Instruction::Meter(_) => it::METER,
            Instruction::Experimenter { .. } => it::EXPERIMENTER,
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Instruction, DecodeError> {
        let bad_len = err(
            ErrorCode::BAD_INSTRUCTION_BAD_LEN,
            "an instruction's length is not a multiple of 8, not its type's size, or runs past its list",
        );
        let (ty, len, mut b) = r.element(bad_len)?;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(bad_len) };
        Ok(match ty {
            it::GOTO_TABLE => {
                fixed(8)?;
                let t = b.u8()?;
                if t > OFPTT_MAX {
                    return Err(err(
                        ErrorCode::BAD_INSTRUCTION_BAD_TABLE_ID,
                        "a goto-table instruction names table 255",
                    ));
                }
                Instruction::GotoTable(t)
            }
            it::WRITE_METADATA => {
                fixed(24)?;
                b.skip(4)?;
                Instruction::WriteMetadata {
                    metadata: b.u64()?,
                    mask: b.u64()?,
                }
            }
            it::WRITE_ACTIONS | it::APPLY_ACTIONS => {
                b.skip(4)?;
                let list = Action::decode_list(b.rest())?;
                if ty == it::WRITE_ACTIONS {
                    Instruction::WriteActions(list)
                } else {
                    Instruction::ApplyActions(list)
                }
            }
            it::CLEAR_ACTIONS => fixed(8).map(|_| Instruction::ClearActions)?,
            it::METER => fixed(8).and_then(|_| b.u32()).map(Instruction::Meter)?,
            it::EXPERIMENTER => Instruction::Experimenter {
                experimenter: b.u32()?,
                data: b.rest().to_vec(),
            },
            _ => {
                return Err(err(
                    ErrorCode::BAD_INSTRUCTION_UNKNOWN_INST,
                    "an instruction type is not one of OpenFlow 1.3",
                ))
            }
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_tlv(out, self.type_number(), |out| match self {
            Instruction::GotoTable(t) => out.put_u8(*t),
            Instruction::WriteMetadata { metadata, mask } => {
                out.put_zeros(4);
                out.put_u64(*metadata);
                out.put_u64(*mask);
            }
            Instruction::WriteActions(list) | Instruction::ApplyActions(list) => {
                out.put_zeros(4);
                Action::encode_list(list, out);
            }
            Instruction::ClearActions => {}
            Instruction::Meter(m) => out.put_u32(*m),
            Instruction::Experimenter { experimenter, data } => {
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
            }
        });
    }

    /// Reads the instructions filling `bytes`; each type at most once
    /// (so at most 7).
    pub(crate) fn decode_list(bytes: &[u8]) -> Result<Vec<Instruction>, DecodeError> {
        let mut r = Reader::new(
            bytes,
            err(
                ErrorCode::BAD_INSTRUCTION_BAD_LEN,
                "an instruction runs past the end of its message",
            ),
        );
        let mut out: Vec<Instruction> = Vec::new();
        while r.remaining() > 0 {
            let i = Instruction::decode(&mut r)?;
            if out.iter().any(|p| p.type_number() == i.type_number()) {
                return Err(err(
                    ErrorCode::BAD_INSTRUCTION_UNSUP_INST,
                    "a flow has the same instruction type twice",
                ));
            }
            out.push(i);
        }
        Ok(out)
    }

    /// Appends a list of instructions.
    pub(crate) fn encode_list(list: &[Instruction], out: &mut Vec<u8>) {
        for i in list {
            i.encode(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oxm::{mac_value, Field};

    fn all_actions() -> Vec<Action> {
        vec![
            Action::Output {
                port: 3,
                max_len: 0,
            },
            Action::Output {
                port: OFPP_CONTROLLER,
                max_len: OFPCML_NO_BUFFER,
            },
            Action::Output {
                port: OFPP_IN_PORT,
                max_len: 0,
            },
            Action::CopyTtlOut,
            Action::CopyTtlIn,
            Action::SetMplsTtl(9),
            Action::DecMplsTtl,
            Action::PushVlan(ETH_TYPE_VLAN),
            Action::PopVlan,
            Action::PushMpls(ETH_TYPE_MPLS),
            Action::PopMpls(0x0800),
            Action::SetQueue(7),
            Action::Group(12),
            Action::SetNwTtl(64),
            Action::DecNwTtl,
            Action::SetField(Oxm::exact(Field::EthDst, mac_value([2, 0, 0, 0, 0, 1]))),
            Action::SetField(Oxm::exact(Field::VlanVid, 0x1000 | 20)),
            Action::SetField(Oxm::exact(Field::Ipv6Src, 1)),
            Action::PushPbb(ETH_TYPE_PBB),
            Action::PopPbb,
            Action::Experimenter {
                experimenter: 0x2320,
                data: vec![1, 2, 3, 4, 5, 6, 7, 8],
            },
        ]
    }

    #[test]
    fn every_action_round_trips() {
        for a in all_actions() {
            let mut b = Vec::new();
            Action::encode_list(std::slice::from_ref(&a), &mut b);
            assert_eq!(b.len() % 8, 0, "{a:?}");
            assert_eq!(Action::decode_list(&b).unwrap(), vec![a.clone()]);
        }
    }

    #[test]
    fn every_instruction_round_trips() {
        let all = vec![
            Instruction::Meter(1),
            Instruction::ApplyActions(all_actions()),
            Instruction::ClearActions,
            Instruction::WriteActions(vec![Action::Output {
                port: 1,
                max_len: 0,
            }]),
            Instruction::WriteMetadata {
                metadata: 0xab,
                mask: 0xff,
            },
            Instruction::GotoTable(3),
            Instruction::Experimenter {
                experimenter: 5,
                data: vec![],
            },
        ];
        let mut b = Vec::new();
        Instruction::encode_list(&all, &mut b);
        assert_eq!(Instruction::decode_list(&b).unwrap(), all);
    }

    #[test]
    fn golden_output_action() {
        let mut b = Vec::new();
        Action::encode_list(
            &[Action::Output {
                port: OFPP_CONTROLLER,
                max_len: 128,
            }],
            &mut b,
        );
        assert_eq!(
            b,
            [0, 0, 0, 16, 0xff, 0xff, 0xff, 0xfd, 0, 128, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn hostile_actions_give_the_right_error() {
        let code = |b: &[u8]| Action::decode_list(b).unwrap_err().code;
        // Lengths: under 8, not a multiple of 8, past the end, wrong for the type.
        assert_eq!(
            code(&[0, 18, 0, 4, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 18, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 18, 0, 16, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 0, 0, 8, 0, 0, 0, 1]),
            ErrorCode::BAD_ACTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 18, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_LEN
        );
        assert_eq!(code(&[0, 18, 0]), ErrorCode::BAD_ACTION_BAD_LEN);
        // Unknown types (OpenFlow 1.0's SET_VLAN_VID is 1).
        assert_eq!(
            code(&[0, 1, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_TYPE
        );
        assert_eq!(
            code(&[0, 28, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_TYPE
        );
        // Ports and groups.
        let out = |p: u32| {
            let mut b = vec![0, 0, 0, 16];
            b.put_u32(p);
            b.put_zeros(8);
            b
        };
        for p in [0, OFPP_ANY, OFPP_MAX + 1, 0xffff_fff7] {
            assert_eq!(
                code(&out(p)),
                ErrorCode::BAD_ACTION_BAD_OUT_PORT,
                "port {p:#x}"
            );
        }
        assert_eq!(
            code(&[0, 22, 0, 8, 0xff, 0xff, 0xff, 0xfc]),
            ErrorCode::BAD_ACTION_BAD_OUT_GROUP
        );
        assert_eq!(
            code(&[0, 17, 0, 8, 0x08, 0x00, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_ARGUMENT
        );
        // Set-field: unknown field, masked, wrong length, value too wide.
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 80, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_SET_TYPE
        );
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 13, 4, 0, 1, 0, 1, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_SET_ARGUMENT
        );
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 12, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_SET_LEN
        );
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 14, 1, 0x40, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_SET_ARGUMENT
        );
        assert_eq!(
            code(&[0, 25, 0, 16, 0x80, 0, 10, 4, 0x20, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_SET_LEN
        );
        // Set-field padded past the next multiple of 8 after its OXM.
        let mut long = vec![0, 25, 0, 24, 0x80, 0, 10, 2, 0x10, 1];
        long.put_zeros(14);
        assert_eq!(code(&long), ErrorCode::BAD_ACTION_BAD_SET_LEN);
        // Too many actions.
        let many: Vec<u8> = [0u8, 18, 0, 8, 0, 0, 0, 0].repeat(MAX_ACTIONS + 1);
        assert_eq!(code(&many), ErrorCode::BAD_ACTION_TOO_MANY);
        assert!(Action::decode_list(&many[..MAX_ACTIONS * 8]).is_ok());
    }

    #[test]
    fn hostile_instructions_give_the_right_error() {
        let code = |b: &[u8]| Instruction::decode_list(b).unwrap_err().code;
        assert_eq!(
            code(&[0, 7, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_UNKNOWN_INST
        );
        assert_eq!(
            code(&[0, 1, 0, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 2, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 1, 0, 9, 0, 0, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_BAD_LEN
        );
        assert_eq!(
            code(&[0, 1, 0, 8, 0xff, 0, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_BAD_TABLE_ID
        );
        assert_eq!(
            code(&[0, 5, 0, 8, 0, 0, 0, 0, 0, 5, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_UNSUP_INST
        );
        assert_eq!(
            code(&[0, 5, 0, 8, 0, 0]),
            ErrorCode::BAD_INSTRUCTION_BAD_LEN
        );
        // An action fault inside an instruction is the action's error.
        assert_eq!(
            code(&[0, 4, 0, 16, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAD_ACTION_BAD_TYPE
        );
    }
}
