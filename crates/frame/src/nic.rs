//! How a NIC's queues are opened: the one choice the control protocol
//! carries and the interface layer acts on, so both name it alike.

/// How to attach a NIC. In the control protocol, `auto` (the default),
/// `native`, `generic` or `packet`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum NicMode {
    /// The best that works here, logged: native XDP (zero copy if the
    /// driver can), then generic XDP, then AF_PACKET.
    #[default]
    Auto,
    /// AF_XDP with the XDP program in the driver; fails if unsupported.
    Native,
    /// AF_XDP over generic (skb) XDP.
    Generic,
    /// AF_PACKET (TPACKET_V3) only.
    Packet,
}
