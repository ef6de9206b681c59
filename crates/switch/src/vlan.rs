//! VLANs on the learning path (IEEE 802.1Q, as Open vSwitch's `tag=` and
//! `trunks=`): which VLAN a frame belongs to when it enters through a port
//! ([`ingress`]), and what a destination port's frames need done to their
//! tag on the way out ([`egress`]). The sinks apply an [`Edit`] while they
//! copy, so retagging costs no extra pass over a frame.
//!
//! A switch where every port has the default setting (a trunk of every
//! VLAN) never comes here: its frames pass as they are.

use ringswitch_control::PortVlan;
use ringswitch_frame::OffloadHdr;

/// The 802.1Q tag protocol identifier.
pub(crate) const TPID: u16 = 0x8100;
/// Bytes of a tag.
pub(crate) const TAG_LEN: u32 = 4;
/// Where the tag (or the EtherType) starts: after both addresses.
pub(crate) const TAG_AT: usize = 12;

/// A frame's VLAN as the switch sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FrameVlan {
    /// The VLAN inside the switch (0: untagged frames of a trunk).
    pub(crate) vid: u16,
    /// The tag control information of the tag the frame came with, if it
    /// had one.
    pub(crate) tag: Option<u16>,
}

/// The VLAN of a frame entering through a port set to `port`, from its
/// first bytes `head` (at least the 16 of the addresses and a tag, valid up
/// to `first_len`, the bytes of its first fragment). `None`: the port does
/// not carry it (a tagged frame on an access port, a VLAN outside a
/// trunk's set, a tag cut short), and it is dropped.
#[inline]
pub(crate) fn ingress(port: &PortVlan, head: &[u8; 16], first_len: u32) -> Option<FrameVlan> {
    let tagged = u16::from_be_bytes([head[12], head[13]]) == TPID;
    let tag = if tagged {
        // A tag and the EtherType after it, in the first fragment (where
        // the sinks rewrite it).
        if first_len < 18 {
            return None;
        }
        Some(u16::from_be_bytes([head[14], head[15]]))
    } else {
        None
    };
    let tag_vid = tag.map_or(0, |t| t & 0xfff);
    let vid = match port {
        // A priority tag (VLAN 0) is the port's VLAN; any other is refused.
        PortVlan::Access(v) if tag_vid == 0 => *v,
        PortVlan::Access(_) => return None,
        PortVlan::Trunk(set) if set.contains(tag_vid) => tag_vid,
        PortVlan::Trunk(_) => return None,
    };
    Some(FrameVlan { vid, tag })
}

/// What a frame's tag needs on the way out of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// Nothing.
    Keep,
    /// Take the tag off (to an access port).
    Strip,
    /// Insert a tag with this TCI (an untagged frame of an access port
    /// going out of a trunk).
    Push(u16),
    /// Rewrite the tag's TCI (a priority-tagged frame of an access port
    /// going out of a trunk: its priority kept, its VLAN set).
    Set(u16),
}

/// What frame `f` needs to leave through a port set to `dest` (which
/// carries its VLAN).
#[inline]
pub(crate) fn egress(f: FrameVlan, dest: &PortVlan) -> Edit {
    match (dest, f.tag) {
        (PortVlan::Access(_), Some(_)) => Edit::Strip,
        (PortVlan::Access(_), None) => Edit::Keep,
        // VLAN 0 goes out of a trunk as it came: untagged or priority-tagged.
        (PortVlan::Trunk(_), _) if f.vid == 0 => Edit::Keep,
        (PortVlan::Trunk(_), Some(t)) if t & 0xfff == f.vid => Edit::Keep,
        (PortVlan::Trunk(_), Some(t)) => Edit::Set((t & 0xf000) | f.vid),
        (PortVlan::Trunk(_), None) => Edit::Push(f.vid),
    }
}

impl Edit {
    /// The frame's new length.
    #[inline(always)]
    pub(crate) fn len(self, len: u32) -> u32 {
        match self {
            Edit::Push(_) => len + TAG_LEN,
            Edit::Strip => len.saturating_sub(TAG_LEN),
            Edit::Keep | Edit::Set(_) => len,
        }
    }

    /// The edited frame's first bytes, from the original's first 16: its
    /// length (12 or 16), and how many bytes of the original they stand
    /// for (the rest follows as it is).
    #[inline]
    pub(crate) fn head(self, orig: &[u8; 16]) -> ([u8; 16], u32, u32) {
        let mut h = [0u8; 16];
        h[..TAG_AT].copy_from_slice(&orig[..TAG_AT]);
        let tag = |h: &mut [u8; 16], tci: u16| {
            h[12..14].copy_from_slice(&TPID.to_be_bytes());
            h[14..16].copy_from_slice(&tci.to_be_bytes());
        };
        match self {
            Edit::Keep => (*orig, 16, 16),
            Edit::Strip => (h, 12, 16),
            Edit::Push(tci) => {
                tag(&mut h, tci);
                (h, 16, 12)
            }
            Edit::Set(tci) => {
                tag(&mut h, tci);
                (h, 16, 16)
            }
        }
    }

    /// `frame` edited into `out`; its length, or `None` when `out` is too
    /// small or the frame too short for the edit.
    pub(crate) fn apply(self, frame: &[u8], out: &mut [u8]) -> Option<usize> {
        let mut orig = [0u8; 16];
        let n = frame.len().min(16);
        orig[..n].copy_from_slice(&frame[..n]);
        let (head, hlen, skip) = self.head(&orig);
        let rest = frame.get(skip as usize..)?;
        let n = hlen as usize + rest.len();
        let out = out.get_mut(..n)?;
        out[..hlen as usize].copy_from_slice(&head[..hlen as usize]);
        out[hlen as usize..].copy_from_slice(rest);
        Some(n)
    }

    /// The same edit as flow-table header edits, and how many of the three
    /// it takes.
    pub(crate) fn as_flow_edits(self) -> ([ringswitch_flow::Edit; 3], usize) {
        use ringswitch_flow::Edit as F;
        let vid = |tci: u16| F::VlanVid(tci & 0xfff);
        // The priority: the top 3 bits.
        let pcp = |tci: u16| F::VlanPcp(u8::try_from(tci >> 13).unwrap_or(0));
        match self {
            Edit::Keep => ([F::PopVlan; 3], 0),
            Edit::Strip => ([F::PopVlan; 3], 1),
            Edit::Push(tci) => ([F::PushVlan(TPID), vid(tci), pcp(tci)], 3),
            Edit::Set(tci) => ([vid(tci), pcp(tci), F::PopVlan], 2),
        }
    }

    /// A frame's offload request after the edit: its offsets from the
    /// start of the frame move with the tag.
    pub(crate) fn offload(self, mut h: OffloadHdr) -> OffloadHdr {
        let shift = |v: u16| match self {
            Edit::Push(_) => v.saturating_add(4),
            Edit::Strip => v.saturating_sub(4),
            Edit::Keep | Edit::Set(_) => v,
        };
        if h.flags & ringswitch_frame::F_NEEDS_CSUM != 0 {
            h.csum_start = shift(h.csum_start);
        }
        if h.gso_type != ringswitch_frame::GSO_NONE {
            h.hdr_len = shift(h.hdr_len);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: Option<u16>) -> Vec<u8> {
        let mut f = vec![0xd0, 1, 2, 3, 4, 5, 0x5a, 1, 2, 3, 4, 5];
        if let Some(t) = tag {
            f.extend_from_slice(&TPID.to_be_bytes());
            f.extend_from_slice(&t.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend((0..46u8).map(|i| i ^ 0x33));
        f
    }

    fn head(f: &[u8]) -> [u8; 16] {
        f[..16].try_into().unwrap()
    }

    #[test]
    fn ingress_follows_the_port_setting() {
        let access: PortVlan = "access:10".parse().unwrap();
        let trunk: PortVlan = "trunk:20,30".parse().unwrap();
        let all = PortVlan::all();
        let (plain, t20, prio) = (frame(None), frame(Some(0xa014)), frame(Some(0xa000)));
        let n = |f: &Vec<u8>| u32::try_from(f.len()).unwrap();
        assert_eq!(
            ingress(&access, &head(&plain), n(&plain)),
            Some(FrameVlan { vid: 10, tag: None })
        );
        assert_eq!(ingress(&access, &head(&t20), n(&t20)), None);
        assert_eq!(
            ingress(&access, &head(&prio), n(&prio)),
            Some(FrameVlan {
                vid: 10,
                tag: Some(0xa000)
            })
        );
        assert_eq!(
            ingress(&trunk, &head(&t20), n(&t20)),
            Some(FrameVlan {
                vid: 20,
                tag: Some(0xa014)
            })
        );
        assert_eq!(
            ingress(&trunk, &head(&plain), n(&plain)),
            None,
            "0 not in the set"
        );
        assert_eq!(ingress(&all, &head(&plain), n(&plain)).unwrap().vid, 0);
        assert_eq!(ingress(&trunk, &head(&t20), 17), None, "tag cut short");
    }

    #[test]
    fn egress_edits_keep_the_payload_and_the_priority() {
        let access: PortVlan = "access:10".parse().unwrap();
        let trunk: PortVlan = "trunk:10".parse().unwrap();
        let plain = frame(None);
        let tagged = frame(Some(0xa00a));
        let prio = frame(Some(0xa000));
        let mut out = vec![0u8; 256];

        let untagged_in = FrameVlan { vid: 10, tag: None };
        assert_eq!(egress(untagged_in, &access), Edit::Keep);
        let e = egress(untagged_in, &trunk);
        assert_eq!(e, Edit::Push(10));
        let n = e.apply(&plain, &mut out).unwrap();
        assert_eq!(&out[..n], &tagged_with(&plain, 0x000a)[..]);
        assert_eq!(e.len(u32::try_from(plain.len()).unwrap()) as usize, n);

        let tagged_in = FrameVlan {
            vid: 10,
            tag: Some(0xa00a),
        };
        assert_eq!(egress(tagged_in, &trunk), Edit::Keep);
        let e = egress(tagged_in, &access);
        assert_eq!(e, Edit::Strip);
        let n = e.apply(&tagged, &mut out).unwrap();
        assert_eq!(&out[..n], &plain[..]);

        let prio_in = FrameVlan {
            vid: 10,
            tag: Some(0xa000),
        };
        let e = egress(prio_in, &trunk);
        assert_eq!(e, Edit::Set(0xa00a), "priority kept, VLAN set");
        let n = e.apply(&prio, &mut out).unwrap();
        assert_eq!(&out[..n], &tagged[..]);
        assert_eq!(
            egress(FrameVlan { vid: 0, tag: None }, &PortVlan::all()),
            Edit::Keep
        );
        assert_eq!(Edit::Push(1).apply(&plain, &mut out[..20]), None, "no room");
        let n = Edit::Push(7).apply(&plain[..14], &mut out).unwrap();
        assert_eq!(
            &out[..n],
            &tagged_with(&plain[..14], 7)[..],
            "a bare header"
        );
        assert_eq!(
            Edit::Strip.apply(&plain[..14], &mut out),
            None,
            "nothing to strip"
        );
    }

    fn tagged_with(f: &[u8], tci: u16) -> Vec<u8> {
        let mut v = f[..12].to_vec();
        v.extend_from_slice(&TPID.to_be_bytes());
        v.extend_from_slice(&tci.to_be_bytes());
        v.extend_from_slice(&f[12..]);
        v
    }

    #[test]
    fn offload_offsets_move_with_the_tag() {
        let h = OffloadHdr {
            flags: ringswitch_frame::F_NEEDS_CSUM,
            gso_type: ringswitch_frame::GSO_TCPV4,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let p = Edit::Push(5).offload(h);
        assert_eq!((p.csum_start, p.hdr_len, p.csum_offset), (38, 58, 16));
        let s = Edit::Strip.offload(p);
        assert_eq!(s, h);
    }
}
