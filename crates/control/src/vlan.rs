//! A port's VLANs (IEEE 802.1Q), as Open vSwitch's `tag=` and `trunks=`:
//! an access port carries one VLAN untagged, a trunk carries tagged frames
//! of a set of VLANs (and untagged frames, which are VLAN 0, when 0 is in
//! the set). The default, a trunk of every VLAN, is a port that passes
//! every frame as it is: a switch where no port has VLANs configured
//! forwards exactly as one without VLAN support.
//!
//! On the wire and in configuration files a [`PortVlan`] is a string:
//! `access:10`, `trunk:10,20,30-40` or `trunk:all`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Highest VLAN ID (4095 is reserved).
pub const VID_MAX: u16 = 4094;

/// A bad VLAN specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VlanError {
    /// Not a number, or out of range.
    #[error("'{0}' is not a VLAN ID (0 to {VID_MAX}; 0 stands for untagged frames on a trunk)")]
    BadVid(String),
    /// An access port's VLAN must be a real one.
    #[error("an access port needs a VLAN from 1 to {VID_MAX}, not 0")]
    AccessZero,
    /// A range whose start is past its end.
    #[error("VLAN range '{0}' is backwards")]
    Backwards(String),
    /// An empty list.
    #[error("a trunk needs at least one VLAN (or 'all')")]
    Empty,
    /// Neither `access:` nor `trunk:`.
    #[error("'{0}' is not a port VLAN setting (access:VID, trunk:LIST or trunk:all)")]
    BadForm(String),
}

/// A set of VLAN IDs 0..=4095 (0: untagged frames).
///
/// Every port has one (the default: every VLAN), so the commonest set
/// takes no memory of its own: only a set of some VLANs holds its 512-byte
/// bitmap, on the heap.
#[derive(Clone, PartialEq, Eq)]
pub struct VlanSet {
    /// `None`: every VLAN; else bit `v` of the bitmap for VLAN `v`.
    bits: Option<Box<[u64; 64]>>,
}

impl VlanSet {
    /// Every VLAN, untagged frames included.
    pub const ALL: VlanSet = VlanSet { bits: None };

    /// No VLAN.
    fn none() -> VlanSet {
        VlanSet {
            bits: Some(Box::new([0; 64])),
        }
    }

    /// Whether `vid` is in the set (only its low 12 bits count).
    #[inline(always)]
    pub fn contains(&self, vid: u16) -> bool {
        let v = usize::from(vid & 0xfff);
        match &self.bits {
            None => true,
            Some(b) => b[v >> 6] & (1 << (v & 63)) != 0,
        }
    }

    /// Adds `vid` (low 12 bits).
    pub fn insert(&mut self, vid: u16) {
        let v = usize::from(vid & 0xfff);
        if let Some(b) = &mut self.bits {
            b[v >> 6] |= 1 << (v & 63);
        }
    }

    /// Whether every VLAN is in it.
    pub fn is_all(&self) -> bool {
        match &self.bits {
            None => true,
            Some(b) => b.iter().all(|w| *w == !0),
        }
    }

    /// Whether no VLAN is in it.
    pub fn is_empty(&self) -> bool {
        self.bits
            .as_ref()
            .is_some_and(|b| b.iter().all(|w| *w == 0))
    }

    /// The ranges of the set, in order.
    fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for v in 0..=4095u16 {
            if !self.contains(v) {
                continue;
            }
            match out.last_mut() {
                Some((_, end)) if *end + 1 == v => *end = v,
                _ => out.push((v, v)),
            }
        }
        out
    }
}

impl Default for VlanSet {
    fn default() -> Self {
        VlanSet::ALL
    }
}

fn vid(s: &str) -> Result<u16, VlanError> {
    s.trim()
        .parse::<u16>()
        .ok()
        .filter(|&v| v <= VID_MAX)
        .ok_or_else(|| VlanError::BadVid(s.trim().to_string()))
}

impl FromStr for VlanSet {
    type Err = VlanError;

    /// `all`, or a comma-separated list of IDs and ranges: `0,10,20-29`.
    fn from_str(s: &str) -> Result<VlanSet, VlanError> {
        if s.trim() == "all" {
            return Ok(VlanSet::ALL);
        }
        let mut set = VlanSet::none();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (vid(a)?, vid(b)?),
                None => (vid(part)?, vid(part)?),
            };
            if a > b {
                return Err(VlanError::Backwards(part.to_string()));
            }
            for v in a..=b {
                set.insert(v);
            }
        }
        if set.is_empty() {
            return Err(VlanError::Empty);
        }
        Ok(set)
    }
}

impl fmt::Display for VlanSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            return f.write_str("all");
        }
        for (i, (a, b)) in self.ranges().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for VlanSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VlanSet({self})")
    }
}

/// Where a port stands in the switch's VLANs.
// The set is kept inline (512 bytes, once per port): the data path reads
// it for every frame of a VLAN switch, and a box would add a pointer hop.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortVlan {
    /// Untagged on the port, VLAN `vid` (1..=4094) inside the switch:
    /// frames arriving with a VLAN tag other than a priority tag (VID 0)
    /// are dropped and counted; frames leaving carry no tag.
    Access(u16),
    /// Tagged frames of these VLANs pass in and out as they are; untagged
    /// frames are VLAN 0 and pass if 0 is in the set; frames of other
    /// VLANs are dropped (counted on the way in, filtered on the way out).
    /// Frames from an access port get its tag on the way out.
    Trunk(VlanSet),
}

impl PortVlan {
    /// A trunk of every VLAN: every frame passes as it is (the default).
    pub const fn all() -> PortVlan {
        PortVlan::Trunk(VlanSet::ALL)
    }

    /// An access port of `vid`.
    pub fn access(vid: u16) -> Result<PortVlan, VlanError> {
        match vid {
            0 => Err(VlanError::AccessZero),
            v if v <= VID_MAX => Ok(PortVlan::Access(v)),
            v => Err(VlanError::BadVid(v.to_string())),
        }
    }

    /// Whether this is the default (a trunk of every VLAN).
    pub fn is_default(&self) -> bool {
        matches!(self, PortVlan::Trunk(s) if s.is_all())
    }

    /// Whether frames of VLAN `vid` (0: untagged) may leave or enter here.
    #[inline(always)]
    pub fn carries(&self, vid: u16) -> bool {
        match self {
            PortVlan::Access(v) => *v == vid,
            PortVlan::Trunk(s) => s.contains(vid),
        }
    }
}

impl Default for PortVlan {
    fn default() -> Self {
        PortVlan::all()
    }
}

impl FromStr for PortVlan {
    type Err = VlanError;

    fn from_str(s: &str) -> Result<PortVlan, VlanError> {
        let s = s.trim();
        if let Some(v) = s.strip_prefix("access:") {
            PortVlan::access(vid(v)?)
        } else if let Some(l) = s.strip_prefix("trunk:") {
            Ok(PortVlan::Trunk(l.parse()?))
        } else {
            Err(VlanError::BadForm(s.to_string()))
        }
    }
}

impl fmt::Display for PortVlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortVlan::Access(v) => write!(f, "access:{v}"),
            PortVlan::Trunk(s) => write!(f, "trunk:{s}"),
        }
    }
}

impl Serialize for PortVlan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PortVlan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PortVlan, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_sets() {
        let s: VlanSet = "20-22, 10,0".parse().unwrap();
        assert!(s.contains(0) && s.contains(10) && s.contains(21) && !s.contains(23));
        assert_eq!(s.to_string(), "0,10,20-22");
        assert_eq!("all".parse::<VlanSet>().unwrap(), VlanSet::ALL);
        // Every VLAN a trunk can name is not "all" (4095 is not a VLAN),
        // though it carries each of them.
        let named: VlanSet = "0-4094".parse().unwrap();
        assert!((0..=VID_MAX).all(|v| named.contains(v)));
        assert!(!named.contains(4095) && !named.is_all() && !named.is_empty());
        assert!(VlanSet::ALL.contains(4095) && VlanSet::ALL.is_all());
        assert_eq!(VlanSet::ALL.to_string(), "all");
        assert_eq!("4094".parse::<VlanSet>().unwrap().to_string(), "4094");
    }

    #[test]
    fn refuses_bad_sets_in_plain_words() {
        for (s, e) in [
            ("4095", VlanError::BadVid("4095".into())),
            ("x", VlanError::BadVid("x".into())),
            ("30-20", VlanError::Backwards("30-20".into())),
            ("", VlanError::Empty),
            (",", VlanError::Empty),
        ] {
            assert_eq!(s.parse::<VlanSet>().unwrap_err(), e, "{s}");
        }
    }

    #[test]
    fn port_settings_round_trip_through_json() {
        for s in ["access:10", "trunk:all", "trunk:0,10,20-29"] {
            let v: PortVlan = s.parse().unwrap();
            assert_eq!(v.to_string(), s);
            let j = serde_json::to_string(&v).unwrap();
            assert_eq!(serde_json::from_str::<PortVlan>(&j).unwrap(), v);
        }
        assert_eq!("access:0".parse::<PortVlan>(), Err(VlanError::AccessZero));
        assert!(matches!(
            "tag:3".parse::<PortVlan>(),
            Err(VlanError::BadForm(_))
        ));
        assert!(PortVlan::default().is_default());
        assert!(PortVlan::Access(5).carries(5) && !PortVlan::Access(5).carries(0));
    }
}
