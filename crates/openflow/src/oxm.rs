//! Flow matches: OXM TLVs of class `OFPXMC_OPENFLOW_BASIC` and the
//! `ofp_match` that carries them.
//!
//! Every one of the 40 basic fields of OpenFlow 1.3 decodes, so that what
//! is wrong with a match is said precisely: an unknown field
//! (`BAD_FIELD`), a mask on a field that takes none (`BAD_MASK`), a length
//! that is not the field's (`BAD_LEN`), a value wider than the field
//! (`BAD_VALUE`), value bits outside the mask (`BAD_WILDCARDS`), a field
//! twice (`DUP_FIELD`), a field without its prerequisite (`BAD_PREREQ`).
//! Which fields a switch acts on is its own business.
//!
//! Values and masks are held as `u128`, the field's bytes read big-endian
//! (every basic field is at most 16 bytes): an IPv4 address is
//! `u32::from(addr) as u128`, an IPv6 one `u128::from(addr)`, a MAC address
//! [`mac_value`].

use crate::error::{err, DecodeError, ErrorCode};
use crate::wire::{pad8, Put, Reader};

/// The OXM class of the basic fields.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
/// The match type that carries OXM TLVs (`OFPMT_OXM`).
pub const OFPMT_OXM: u16 = 1;
/// The bit of `vlan_vid` that says a VLAN tag is present (`OFPVID_PRESENT`).
pub const OFPVID_PRESENT: u16 = 0x1000;
/// `vlan_vid` of a frame without a VLAN tag (`OFPVID_NONE`).
pub const OFPVID_NONE: u16 = 0;

macro_rules! fields {
    ($($(#[$doc:meta])* $name:ident = $id:expr, $text:expr, $len:expr, $bits:expr, $maskable:expr;)*) => {
        /// A basic OXM field (`OFPXMT_OFB_*`), numbered as on the wire.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Field {
            $($(#[$doc])* $name = $id,)*
        }

        impl Field {
            /// Every basic field, in wire order.
            pub const ALL: &'static [Field] = &[$(Field::$name,)*];

            /// The field with wire number `id`.
            pub fn from_id(id: u8) -> Option<Field> {
                match id {
                    $($id => Some(Field::$name),)*
                    _ => None,
                }
            }

            /// Its ovs-fields(7) style name (`"tcp_dst"`).
            pub fn name(self) -> &'static str {
                match self { $(Field::$name => $text,)* }
            }

            /// Its value's size on the wire, in bytes.
            pub fn size(self) -> usize {
                match self { $(Field::$name => $len,)* }
            }

            /// How many low bits of the value are meaningful; a value with
            /// higher bits set is `BAD_VALUE`.
            pub fn bits(self) -> u32 {
                match self { $(Field::$name => $bits,)* }
            }

            /// Whether OpenFlow 1.3 allows a mask on it.
            pub fn maskable(self) -> bool {
                match self { $(Field::$name => $maskable,)* }
            }
        }
    };
}

fields! {
    /// Switch input port.
    InPort = 0, "in_port", 4, 32, false;
    /// Switch physical input port.
    InPhyPort = 1, "in_phy_port", 4, 32, false;
    /// Metadata passed between tables.
    Metadata = 2, "metadata", 8, 64, true;
    /// Ethernet destination address.
    EthDst = 3, "eth_dst", 6, 48, true;
    /// Ethernet source address.
    EthSrc = 4, "eth_src", 6, 48, true;
    /// Ethernet frame type.
    EthType = 5, "eth_type", 2, 16, false;
    /// VLAN id, with `OFPVID_PRESENT`.
    VlanVid = 6, "vlan_vid", 2, 13, true;
    /// VLAN priority.
    VlanPcp = 7, "vlan_pcp", 1, 3, false;
    /// IP DSCP (6 bits of the ToS field).
    IpDscp = 8, "ip_dscp", 1, 6, false;
    /// IP ECN (2 bits of the ToS field).
    IpEcn = 9, "ip_ecn", 1, 2, false;
    /// IP protocol.
    IpProto = 10, "ip_proto", 1, 8, false;
    /// IPv4 source address.
    Ipv4Src = 11, "ipv4_src", 4, 32, true;
    /// IPv4 destination address.
    Ipv4Dst = 12, "ipv4_dst", 4, 32, true;
    /// TCP source port.
    TcpSrc = 13, "tcp_src", 2, 16, false;
    /// TCP destination port.
    TcpDst = 14, "tcp_dst", 2, 16, false;
    /// UDP source port.
    UdpSrc = 15, "udp_src", 2, 16, false;
    /// UDP destination port.
    UdpDst = 16, "udp_dst", 2, 16, false;
    /// SCTP source port.
    SctpSrc = 17, "sctp_src", 2, 16, false;
    /// SCTP destination port.
    SctpDst = 18, "sctp_dst", 2, 16, false;
    /// ICMP type.
    Icmpv4Type = 19, "icmpv4_type", 1, 8, false;
    /// ICMP code.
    Icmpv4Code = 20, "icmpv4_code", 1, 8, false;
    /// ARP opcode.
    ArpOp = 21, "arp_op", 2, 16, false;
    /// ARP source IPv4 address.
    ArpSpa = 22, "arp_spa", 4, 32, true;
    /// ARP target IPv4 address.
    ArpTpa = 23, "arp_tpa", 4, 32, true;
    /// ARP source hardware address.
    ArpSha = 24, "arp_sha", 6, 48, true;
    /// ARP target hardware address.
    ArpTha = 25, "arp_tha", 6, 48, true;
    /// IPv6 source address.
    Ipv6Src = 26, "ipv6_src", 16, 128, true;
    /// IPv6 destination address.
    Ipv6Dst = 27, "ipv6_dst", 16, 128, true;
    /// IPv6 flow label.
    Ipv6Flabel = 28, "ipv6_flabel", 4, 20, true;
    /// ICMPv6 type.
    Icmpv6Type = 29, "icmpv6_type", 1, 8, false;
    /// ICMPv6 code.
    Icmpv6Code = 30, "icmpv6_code", 1, 8, false;
    /// Target address of an IPv6 neighbour discovery message.
    Ipv6NdTarget = 31, "ipv6_nd_target", 16, 128, false;
    /// Source link-layer address option of a neighbour solicitation.
    Ipv6NdSll = 32, "ipv6_nd_sll", 6, 48, false;
    /// Target link-layer address option of a neighbour advertisement.
    Ipv6NdTll = 33, "ipv6_nd_tll", 6, 48, false;
    /// MPLS label.
    MplsLabel = 34, "mpls_label", 4, 20, false;
    /// MPLS traffic class.
    MplsTc = 35, "mpls_tc", 1, 3, false;
    /// MPLS bottom-of-stack bit.
    MplsBos = 36, "mpls_bos", 1, 1, false;
    /// PBB I-SID.
    PbbIsid = 37, "pbb_isid", 3, 24, true;
    /// Logical port metadata (tunnel id).
    TunnelId = 38, "tunnel_id", 8, 64, true;
    /// IPv6 extension header pseudo-field.
    Ipv6Exthdr = 39, "ipv6_exthdr", 2, 9, true;
}

impl Field {
    /// The field's wire number.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The all-ones value of the field's width.
    fn full(self) -> u128 {
        if self.bits() >= 128 {
            u128::MAX
        } else {
            (1u128 << self.bits()) - 1
        }
    }
}

/// One OXM TLV: a field, its value and, for a maskable field, an optional
/// mask (a 1 bit must match, a 0 bit is wildcarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Oxm {
    /// Which field.
    pub field: Field,
    /// Its value, big-endian bytes read as an integer.
    pub value: u128,
    /// Its mask, when one was given.
    pub mask: Option<u128>,
}

/// The `u128` value of a MAC address.
pub fn mac_value(mac: [u8; 6]) -> u128 {
    mac.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b))
}

/// The MAC address held in the low 48 bits of `v`.
pub fn mac_bytes(v: u128) -> [u8; 6] {
    let b = v.to_be_bytes();
    let mut out = [0u8; 6];
    out.copy_from_slice(&b[10..]);
    out
}

/// Which error codes an OXM's faults map to: in a match, or in a set-field
/// action.
#[derive(Clone, Copy)]
pub(crate) enum OxmUse {
    Match,
    SetField,
}

impl OxmUse {
    fn unknown(self) -> DecodeError {
        match self {
            OxmUse::Match => err(
                ErrorCode::BAD_MATCH_BAD_FIELD,
                "an OXM field is not a basic field of OpenFlow 1.3",
            ),
            OxmUse::SetField => err(
                ErrorCode::BAD_ACTION_BAD_SET_TYPE,
                "a set-field action names a field that is not a basic field of OpenFlow 1.3",
            ),
        }
    }
    fn bad_len(self) -> DecodeError {
        match self {
            OxmUse::Match => err(
                ErrorCode::BAD_MATCH_BAD_LEN,
                "an OXM field's length is not its size",
            ),
            OxmUse::SetField => err(
                ErrorCode::BAD_ACTION_BAD_SET_LEN,
                "a set-field action's OXM length is not the field's size",
            ),
        }
    }
    fn bad_mask(self) -> DecodeError {
        match self {
            OxmUse::Match => err(
                ErrorCode::BAD_MATCH_BAD_MASK,
                "an OXM field that takes no mask has one, or its mask is wider than the field",
            ),
            OxmUse::SetField => err(
                ErrorCode::BAD_ACTION_BAD_SET_ARGUMENT,
                "a set-field action carries a mask",
            ),
        }
    }
    fn bad_value(self) -> DecodeError {
        match self {
            OxmUse::Match => err(
                ErrorCode::BAD_MATCH_BAD_VALUE,
                "an OXM value has bits set beyond the field's width",
            ),
            OxmUse::SetField => err(
                ErrorCode::BAD_ACTION_BAD_SET_ARGUMENT,
                "a set-field value has bits set beyond the field's width",
            ),
        }
    }
}

impl Oxm {
    /// An exact match of `field` on `value`.
    pub fn exact(field: Field, value: u128) -> Oxm {
        Oxm {
            field,
            value,
            mask: None,
        }
    }

    /// A masked match of `field`.
    pub fn masked(field: Field, value: u128, mask: u128) -> Oxm {
        Oxm {
            field,
            value,
            mask: Some(mask),
        }
    }

    /// Its size on the wire, header included.
    pub fn wire_len(&self) -> usize {
        4 + self.field.size() * if self.mask.is_some() { 2 } else { 1 }
    }

    /// Checks the value (and mask) on its own: width, maskability, and no
    /// value bits outside the mask. The errors are those of a match.
    pub fn check(&self) -> Result<(), DecodeError> {
        self.check_as(OxmUse::Match)
    }

    fn check_as(&self, usage: OxmUse) -> Result<(), DecodeError> {
        let full = self.field.full();
        if let Some(mask) = self.mask {
            if !self.field.maskable() || matches!(usage, OxmUse::SetField) || mask & !full != 0 {
                return Err(usage.bad_mask());
            }
        }
        if self.value & !full != 0 {
            return Err(usage.bad_value());
        }
        if let Some(mask) = self.mask {
            if self.value & !mask != 0 {
                return Err(err(
                    ErrorCode::BAD_MATCH_BAD_WILDCARDS,
                    "an OXM value has bits set where its mask is 0",
                ));
            }
        }
        Ok(())
    }

    /// Reads one TLV, checked on its own.
    pub(crate) fn decode(r: &mut Reader<'_>, usage: OxmUse) -> Result<Oxm, DecodeError> {
        let class = r.u16()?;
        let fh = r.u8()?;
        let len = usize::from(r.u8()?);
        let payload = r.bytes(len)?;
        let (id, has_mask) = (fh >> 1, fh & 1 == 1);
        if class != OFPXMC_OPENFLOW_BASIC {
            return Err(usage.unknown());
        }
        let field = Field::from_id(id).ok_or_else(|| usage.unknown())?;
        if has_mask && (!field.maskable() || matches!(usage, OxmUse::SetField)) {
            return Err(usage.bad_mask());
        }
        let n = field.size();
        if len != n * if has_mask { 2 } else { 1 } {
            return Err(usage.bad_len());
        }
        let int = |b: &[u8]| b.iter().fold(0u128, |v, &x| (v << 8) | u128::from(x));
        let oxm = Oxm {
            field,
            value: int(&payload[..n]),
            mask: has_mask.then(|| int(&payload[n..])),
        };
        oxm.check_as(usage)?;
        Ok(oxm)
    }

    /// Appends the TLV.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let n = self.field.size();
        out.put_u16(OFPXMC_OPENFLOW_BASIC);
        out.put_u8(self.field.id() << 1 | u8::from(self.mask.is_some()));
        out.put_u8((n * if self.mask.is_some() { 2 } else { 1 }) as u8);
        out.extend_from_slice(&self.value.to_be_bytes()[16 - n..]);
        if let Some(m) = self.mask {
            out.extend_from_slice(&m.to_be_bytes()[16 - n..]);
        }
    }
}

/// An `ofp_match` of type OXM: a valid set of fields, kept sorted by field
/// number (which puts every prerequisite before the fields needing it), so
/// two matches with the same fields are equal whatever order they came in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Match {
    fields: Vec<Oxm>,
}

impl Match {
    /// The match that matches everything.
    pub fn any() -> Match {
        Match::default()
    }

    /// A match of `fields`, checked as [`Match::check`] does.
    pub fn new(mut fields: Vec<Oxm>) -> Result<Match, DecodeError> {
        fields.sort_by_key(|o| o.field);
        let m = Match { fields };
        m.check()?;
        Ok(m)
    }

    /// Its fields, by field number.
    pub fn fields(&self) -> &[Oxm] {
        &self.fields
    }

    /// The field `f`, if matched on.
    pub fn get(&self, f: Field) -> Option<&Oxm> {
        self.fields.iter().find(|o| o.field == f)
    }

    /// The exact value of a field that takes no mask.
    fn exact(&self, f: Field) -> Option<u128> {
        self.get(f).map(|o| o.value)
    }

    /// Checks every field on its own ([`Oxm::check`]), that none is there
    /// twice (`DUP_FIELD`) and that each field's prerequisites are matched
    /// (`BAD_PREREQ`): e.g. `tcp_src` needs `ip_proto` = 6, which needs
    /// `eth_type` 0x0800 or 0x86dd.
    pub fn check(&self) -> Result<(), DecodeError> {
        for (i, o) in self.fields.iter().enumerate() {
            o.check()?;
            if self.fields[..i].iter().any(|p| p.field == o.field) {
                return Err(err(
                    ErrorCode::BAD_MATCH_DUP_FIELD,
                    "a match has the same field twice",
                ));
            }
        }
        for o in &self.fields {
            if !self.prerequisite_met(o.field) {
                return Err(err(
                    ErrorCode::BAD_MATCH_BAD_PREREQ,
                    "a match field lacks its prerequisite (e.g. a TCP port without ip_proto=6 and an IP eth_type)",
                ));
            }
        }
        Ok(())
    }

    /// Whether `f`'s prerequisites (OpenFlow 1.3 table 12) are matched on.
    /// Each prerequisite is itself a field whose own prerequisites are
    /// checked in turn; ICMP and ICMPv6 also require their IP version.
    fn prerequisite_met(&self, f: Field) -> bool {
        use Field::*;
        let eth = self.exact(EthType);
        let is_eth = |types: &[u128]| eth.is_some_and(|t| types.contains(&t));
        let proto = |p: u128, types: &[u128]| self.exact(IpProto) == Some(p) && is_eth(types);
        let icmp6 = |types: &[u128]| {
            self.exact(Icmpv6Type).is_some_and(|t| types.contains(&t)) && proto(58, &[0x86dd])
        };
        match f {
            InPort | Metadata | EthDst | EthSrc | EthType | VlanVid | TunnelId => true,
            InPhyPort => self.get(InPort).is_some(),
            VlanPcp => self
                .get(VlanVid)
                .is_some_and(|v| v.value & u128::from(OFPVID_PRESENT) != 0),
            IpDscp | IpEcn | IpProto => is_eth(&[0x0800, 0x86dd]),
            Ipv4Src | Ipv4Dst => is_eth(&[0x0800]),
            TcpSrc | TcpDst => proto(6, &[0x0800, 0x86dd]),
            UdpSrc | UdpDst => proto(17, &[0x0800, 0x86dd]),
            SctpSrc | SctpDst => proto(132, &[0x0800, 0x86dd]),
            Icmpv4Type | Icmpv4Code => proto(1, &[0x0800]),
            ArpOp | ArpSpa | ArpTpa | ArpSha | ArpTha => is_eth(&[0x0806]),
            Ipv6Src | Ipv6Dst | Ipv6Flabel | Ipv6Exthdr => is_eth(&[0x86dd]),
            Icmpv6Type | Icmpv6Code => proto(58, &[0x86dd]),
            Ipv6NdTarget => icmp6(&[135, 136]),
            Ipv6NdSll => icmp6(&[135]),
            Ipv6NdTll => icmp6(&[136]),
            MplsLabel | MplsTc | MplsBos => is_eth(&[0x8847, 0x8848]),
            PbbIsid => is_eth(&[0x88e7]),
        }
    }

    /// Its size on the wire, padding included.
    pub fn wire_len(&self) -> usize {
        pad8(self.unpadded_len())
    }

    fn unpadded_len(&self) -> usize {
        4 + self.fields.iter().map(Oxm::wire_len).sum::<usize>()
    }

    /// Reads an `ofp_match` and its padding.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
        let short = err(
            ErrorCode::BAD_MATCH_BAD_LEN,
            "a match is longer than the bytes that carry it",
        );
        let ty = r.u16().map_err(|_| short)?;
        let len = usize::from(r.u16().map_err(|_| short)?);
        if ty != OFPMT_OXM {
            return Err(err(
                ErrorCode::BAD_MATCH_BAD_TYPE,
                "a match is not of type OXM",
            ));
        }
        if len < 4 {
            return Err(err(
                ErrorCode::BAD_MATCH_BAD_LEN,
                "a match's length is shorter than its header",
            ));
        }
        let body = r.bytes(len - 4).map_err(|_| short)?;
        r.skip(pad8(len) - len).map_err(|_| short)?;
        let mut tlvs = Reader::new(
            body,
            err(
                ErrorCode::BAD_MATCH_BAD_LEN,
                "an OXM field runs past the end of its match",
            ),
        );
        let mut fields = Vec::new();
        while tlvs.remaining() > 0 {
            fields.push(Oxm::decode(&mut tlvs, OxmUse::Match)?);
        }
        Match::new(fields)
    }

    /// Appends the `ofp_match` and its padding.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(OFPMT_OXM);
        out.put_u16(self.unpadded_len() as u16);
        for o in &self.fields {
            o.encode(out);
        }
        out.pad8_from(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(m: &Match) {
        let mut b = Vec::new();
        m.encode(&mut b);
        assert_eq!(b.len(), m.wire_len());
        assert_eq!(b.len() % 8, 0);
        let mut r = Reader::new(&b, err(ErrorCode::BAD_MATCH_BAD_LEN, "t"));
        assert_eq!(Match::decode(&mut r).unwrap(), *m);
        assert_eq!(r.remaining(), 0);
    }

    /// A match on `f` with its prerequisites and a value of full width.
    fn with_prereqs(f: Field, masked: bool) -> Match {
        use Field::*;
        let mut v = vec![];
        let eth = |t| Oxm::exact(EthType, t);
        let proto = |p| Oxm::exact(IpProto, p);
        match f {
            InPhyPort => v.push(Oxm::exact(InPort, 1)),
            VlanPcp => v.push(Oxm::exact(VlanVid, 0x1000 | 10)),
            IpDscp | IpEcn | IpProto | Ipv4Src | Ipv4Dst => v.push(eth(0x0800)),
            TcpSrc | TcpDst => v.extend([eth(0x86dd), proto(6)]),
            UdpSrc | UdpDst => v.extend([eth(0x0800), proto(17)]),
            SctpSrc | SctpDst => v.extend([eth(0x0800), proto(132)]),
            Icmpv4Type | Icmpv4Code => v.extend([eth(0x0800), proto(1)]),
            ArpOp | ArpSpa | ArpTpa | ArpSha | ArpTha => v.push(eth(0x0806)),
            Ipv6Src | Ipv6Dst | Ipv6Flabel | Ipv6Exthdr => v.push(eth(0x86dd)),
            Icmpv6Type | Icmpv6Code => v.extend([eth(0x86dd), proto(58)]),
            Ipv6NdTarget | Ipv6NdSll => {
                v.extend([eth(0x86dd), proto(58), Oxm::exact(Icmpv6Type, 135)])
            }
            Ipv6NdTll => v.extend([eth(0x86dd), proto(58), Oxm::exact(Icmpv6Type, 136)]),
            MplsLabel | MplsTc | MplsBos => v.push(eth(0x8848)),
            PbbIsid => v.push(eth(0x88e7)),
            _ => {}
        }
        if !v.iter().any(|o| o.field == f) {
            let full = f.full();
            v.push(if masked {
                Oxm::masked(
                    f,
                    full & 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef & !1,
                    full & !1,
                )
            } else {
                Oxm::exact(f, full & 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
            });
        }
        Match::new(v).unwrap_or_else(|e| panic!("{}: {e}", f.name()))
    }

    #[test]
    fn every_field_round_trips() {
        for &f in Field::ALL {
            roundtrip(&with_prereqs(f, false));
            if f.maskable() {
                roundtrip(&with_prereqs(f, true));
            }
        }
        roundtrip(&Match::any());
    }

    #[test]
    fn golden_tcp_match() {
        let m = Match::new(vec![
            Oxm::exact(Field::TcpDst, 80),
            Oxm::exact(Field::IpProto, 6),
            Oxm::exact(Field::EthType, 0x0800),
        ])
        .unwrap();
        let mut b = Vec::new();
        m.encode(&mut b);
        // type 1, length 4 + (4+2) + (4+1) + (4+2) = 21, padded to 24.
        let mut exp = vec![0x00, 0x01, 0x00, 21];
        exp.extend([0x80, 0x00, 5 << 1, 2, 0x08, 0x00]);
        exp.extend([0x80, 0x00, 10 << 1, 1, 6]);
        exp.extend([0x80, 0x00, 14 << 1, 2, 0x00, 80]);
        exp.extend([0, 0, 0]);
        assert_eq!(b, exp);
    }

    fn decode_bytes(b: &[u8]) -> Result<Match, DecodeError> {
        Match::decode(&mut Reader::new(b, err(ErrorCode::BAD_MATCH_BAD_LEN, "t")))
    }

    fn tlv(id: u8, mask: bool, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x80, 0x00, id << 1 | u8::from(mask), payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    fn wrap(tlvs: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = tlvs.concat();
        let mut v = vec![0, 1];
        v.put_u16(4 + body.len() as u16);
        v.extend(body);
        v.pad8_from(0);
        v
    }

    #[test]
    fn faults_give_precise_errors() {
        let ip = tlv(5, false, &[0x08, 0x00]);
        let tcp = tlv(10, false, &[6]);
        let _ = &tcp;
        let cases: Vec<(Vec<u8>, ErrorCode)> = vec![
            (
                wrap(&[tlv(14, false, &[0, 80])]),
                ErrorCode::BAD_MATCH_BAD_PREREQ,
            ),
            (
                wrap(&[ip.clone(), tlv(14, false, &[0, 80])]),
                ErrorCode::BAD_MATCH_BAD_PREREQ,
            ),
            (
                wrap(&[ip.clone(), tcp.clone(), tlv(15, false, &[0, 80])]),
                ErrorCode::BAD_MATCH_BAD_PREREQ,
            ),
            (
                wrap(&[tlv(5, false, &[0x86, 0xdd]), tlv(11, false, &[1, 2, 3, 4])]),
                ErrorCode::BAD_MATCH_BAD_PREREQ,
            ),
            (
                wrap(&[tlv(7, false, &[3])]),
                ErrorCode::BAD_MATCH_BAD_PREREQ,
            ),
            (
                wrap(&[tlv(6, false, &[0, 10]), tlv(7, false, &[3])]),
                ErrorCode::BAD_MATCH_BAD_PREREQ,
            ),
            (
                wrap(&[ip.clone(), ip.clone()]),
                ErrorCode::BAD_MATCH_DUP_FIELD,
            ),
            (
                wrap(&[tlv(40, false, &[0])]),
                ErrorCode::BAD_MATCH_BAD_FIELD,
            ),
            (
                wrap(&[tlv(5, true, &[0x08, 0, 0xff, 0xff])]),
                ErrorCode::BAD_MATCH_BAD_MASK,
            ),
            (
                wrap(&[tlv(5, false, &[0x08, 0, 0])]),
                ErrorCode::BAD_MATCH_BAD_LEN,
            ),
            (
                wrap(&[tlv(6, false, &[0x20, 0])]),
                ErrorCode::BAD_MATCH_BAD_VALUE,
            ),
            (
                wrap(&[tlv(6, false, &[0x10, 1]), tlv(7, false, &[8])]),
                ErrorCode::BAD_MATCH_BAD_VALUE,
            ),
            (
                wrap(&[ip.clone(), tlv(8, false, &[64])]),
                ErrorCode::BAD_MATCH_BAD_VALUE,
            ),
            (
                wrap(&[ip.clone(), tlv(11, true, &[10, 0, 0, 1, 255, 255, 255, 0])]),
                ErrorCode::BAD_MATCH_BAD_WILDCARDS,
            ),
            (
                wrap(&[tlv(3, true, &[1, 2, 3, 4, 5, 6, 0xff, 0xff, 0xff, 0, 0, 0])]),
                ErrorCode::BAD_MATCH_BAD_WILDCARDS,
            ),
        ];
        for (i, (bytes, code)) in cases.iter().enumerate() {
            match decode_bytes(bytes) {
                Err(e) => assert_eq!(e.code, *code, "case {i}: {e}"),
                Ok(m) => panic!("case {i} decoded: {m:?}"),
            }
        }
        // An experimenter class, and a match type of OpenFlow 1.1.
        let mut exp = wrap(&[tlv(5, false, &[8, 0])]);
        exp[4] = 0xff;
        exp[5] = 0xff;
        assert_eq!(
            decode_bytes(&exp).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_FIELD
        );
        let mut std = wrap(&[]);
        std[1] = 0;
        assert_eq!(
            decode_bytes(&std).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_TYPE
        );
        // Lengths that lie: shorter than the header, past the end, padding missing.
        assert_eq!(
            decode_bytes(&[0, 1, 0, 3, 0, 0, 0, 0]).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_LEN
        );
        assert_eq!(
            decode_bytes(&[0, 1, 0, 40, 0, 0, 0, 0]).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_LEN
        );
        let ok = wrap(std::slice::from_ref(&ip));
        assert_eq!(
            decode_bytes(&ok[..ok.len() - 1]).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_LEN
        );
        // A TLV whose length runs past its match.
        let mut cut = vec![0, 1, 0, 8, 0x80, 0, 10, 4];
        cut.extend([0; 8]);
        assert_eq!(
            decode_bytes(&cut).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_LEN
        );
        // ND target needs ICMPv6 type 135 or 136.
        let nd = wrap(&[
            tlv(5, false, &[0x86, 0xdd]),
            tlv(10, false, &[58]),
            tlv(29, false, &[128]),
            tlv(31, false, &[0; 16]),
        ]);
        assert_eq!(
            decode_bytes(&nd).unwrap_err().code,
            ErrorCode::BAD_MATCH_BAD_PREREQ
        );
    }

    #[test]
    fn mac_helpers_invert() {
        let mac = [0x02, 0, 0, 0xaa, 0xbb, 0xcc];
        assert_eq!(mac_bytes(mac_value(mac)), mac);
        assert_eq!(mac_value(mac), 0x0200_00aa_bbcc);
    }
}
