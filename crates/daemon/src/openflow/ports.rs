//! A switch's ports as OpenFlow describes them: PORT_DESC entries,
//! PORT_STATS counters, and the PORT_STATUS changes since the last look.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use ringswitch_openflow::consts::{
    OFPPR_ADD, OFPPR_DELETE, OFPPR_MODIFY, OFPPS_LINK_DOWN, OFPPS_LIVE,
};
use ringswitch_openflow::message::PortStatus;
use ringswitch_openflow::multipart::PortStats;
use ringswitch_openflow::{Body, Port};
use ringswitch_switch::flows::of_port;
use ringswitch_switch::{Switch, SwitchPort};

/// 10 Gb/s in kb/s, the speed a virtual port reports.
const SPEED_KBPS: u32 = 10_000_000;

/// Whether the port is up: a ring port while someone has it open; a port
/// of queues (VM, interface) while it is attached.
fn is_up(p: &SwitchPort) -> bool {
    p.ring().is_none_or(|r| r.link.is_up())
}

/// The port's description.
pub fn desc(p: &SwitchPort) -> Port {
    let up = is_up(p);
    Port {
        port_no: of_port(p.index),
        hw_addr: hw_addr(&p.name),
        name: p.name.clone(),
        config: 0,
        state: if up { OFPPS_LIVE } else { OFPPS_LINK_DOWN },
        curr_speed: SPEED_KBPS,
        max_speed: SPEED_KBPS,
        ..Port::default()
    }
}

/// A stable locally administered address made from the port's name.
fn hw_addr(name: &str) -> [u8; 6] {
    let h = super::datapath_id(name).to_be_bytes();
    [0x02, h[3], h[4], h[5], h[6], h[7]]
}

/// The port's counters as OpenFlow names them. OpenFlow's rx is what the
/// switch received from the port: the port's client's tx.
pub fn stats(p: &SwitchPort, since: Instant) -> PortStats {
    let s = p.counters.snapshot(&p.name);
    let rx_dropped = s.drop_malformed + s.drop_short + s.drop_long + s.drop_vlan + s.drop_no_dest;
    let tx_dropped = s.drop_rx_full + s.drop_link_down;
    let age = since.elapsed();
    PortStats {
        port_no: of_port(p.index),
        counters: [
            s.tx_packets,
            s.rx_packets,
            s.tx_bytes,
            s.rx_bytes,
            rx_dropped,
            tx_dropped,
            s.drop_malformed,
            0,
            u64::MAX,
            u64::MAX,
            u64::MAX,
            u64::MAX,
        ],
        duration_sec: u32::try_from(age.as_secs()).unwrap_or(u32::MAX),
        duration_nsec: age.subsec_nanos(),
    }
}

/// What the peers were last told of the ports: by index, (name, up, first
/// seen).
#[derive(Default)]
pub struct Seen(BTreeMap<u16, (String, bool, Instant)>);

impl Seen {
    /// The switch's ports now, sorted by index.
    pub fn ports(switch: &Switch) -> Vec<Arc<SwitchPort>> {
        let mut v = switch.ports();
        v.sort_by_key(|p| p.index);
        v
    }

    /// When the port at `index` was first seen (now if never).
    pub fn since(&self, index: u16) -> Instant {
        self.0.get(&index).map_or_else(Instant::now, |e| e.2)
    }

    /// Takes the ports as they are now; returns the PORT_STATUS bodies
    /// that tell what changed.
    pub fn update(&mut self, ports: &[Arc<SwitchPort>]) -> Vec<Body> {
        let mut out = Vec::new();
        let mut now = BTreeMap::new();
        for p in ports {
            let up = is_up(p);
            let reason = match self.0.remove(&p.index) {
                None => Some(OFPPR_ADD),
                Some((name, _, _)) if name != p.name => {
                    out.push(Body::PortStatus(PortStatus {
                        reason: OFPPR_DELETE,
                        desc: Port {
                            port_no: of_port(p.index),
                            name,
                            ..Port::default()
                        },
                    }));
                    Some(OFPPR_ADD)
                }
                Some((_, was_up, since)) => {
                    now.insert(p.index, (p.name.clone(), up, since));
                    (was_up != up).then_some(OFPPR_MODIFY)
                }
            };
            now.entry(p.index)
                .or_insert_with(|| (p.name.clone(), up, Instant::now()));
            if let Some(reason) = reason {
                out.push(Body::PortStatus(PortStatus {
                    reason,
                    desc: desc(p),
                }));
            }
        }
        for (index, (name, _, _)) in std::mem::take(&mut self.0) {
            out.push(Body::PortStatus(PortStatus {
                reason: OFPPR_DELETE,
                desc: Port {
                    port_no: of_port(index),
                    name,
                    state: OFPPS_LINK_DOWN,
                    ..Port::default()
                },
            }));
        }
        self.0 = now;
        out
    }
}
