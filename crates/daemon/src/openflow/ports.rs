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
use ringswitch_switch::{Switch, SwitchPort};

/// 10 Gb/s in kb/s, the speed a virtual port reports.
const SPEED_KBPS: u32 = 10_000_000;

/// The description of port `p`, OpenFlow port `no`. Up: a ring port
/// while someone has it open, a VM port while its guest runs there, an
/// interface port while attached.
pub fn desc(no: u32, p: &SwitchPort) -> Port {
    let up = p.is_up();
    Port {
        port_no: no,
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

/// The counters of port `p`, OpenFlow port `no`, as OpenFlow names them.
/// OpenFlow's rx is what the switch received from the port: the port's
/// client's tx.
pub fn stats(no: u32, p: &SwitchPort, since: Instant) -> PortStats {
    let s = p.counters.snapshot(&p.name);
    let rx_dropped = s.drop_malformed + s.drop_short + s.drop_long + s.drop_vlan + s.drop_no_dest;
    let tx_dropped = s.drop_rx_full + s.drop_link_down;
    let age = since.elapsed();
    PortStats {
        port_no: no,
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

/// What the peers were last told of the ports: by OpenFlow number, (name,
/// up, first seen). A number that passes to another port (a guest that
/// moved between two ports of the switch that asked for it) is told as
/// the old port deleted and the new one added.
#[derive(Default)]
pub struct Seen(BTreeMap<u32, (String, bool, Instant)>);

/// A switch's attached ports with their OpenFlow numbers, by number.
pub type Numbered = Vec<(u32, Arc<SwitchPort>)>;

impl Seen {
    /// The switch's ports now, by number.
    pub fn ports(switch: &Switch) -> Numbered {
        switch.numbered_ports()
    }

    /// When the port at number `no` was first seen (now if never).
    pub fn since(&self, no: u32) -> Instant {
        self.0.get(&no).map_or_else(Instant::now, |e| e.2)
    }

    /// Takes the ports as they are now; returns the PORT_STATUS bodies
    /// that tell what changed.
    pub fn update(&mut self, ports: &Numbered) -> Vec<Body> {
        let mut out = Vec::new();
        let mut now = BTreeMap::new();
        for (no, p) in ports {
            let no = *no;
            let up = p.is_up();
            let reason = match self.0.remove(&no) {
                None => Some(OFPPR_ADD),
                Some((name, _, _)) if name != p.name => {
                    out.push(Body::PortStatus(PortStatus {
                        reason: OFPPR_DELETE,
                        desc: Port {
                            port_no: no,
                            name,
                            ..Port::default()
                        },
                    }));
                    Some(OFPPR_ADD)
                }
                Some((_, was_up, since)) => {
                    now.insert(no, (p.name.clone(), up, since));
                    (was_up != up).then_some(OFPPR_MODIFY)
                }
            };
            now.entry(no)
                .or_insert_with(|| (p.name.clone(), up, Instant::now()));
            if let Some(reason) = reason {
                out.push(Body::PortStatus(PortStatus {
                    reason,
                    desc: desc(no, p),
                }));
            }
        }
        for (no, (name, _, _)) in std::mem::take(&mut self.0) {
            out.push(Body::PortStatus(PortStatus {
                reason: OFPPR_DELETE,
                desc: Port {
                    port_no: no,
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
