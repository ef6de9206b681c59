//! What the engine tests share: ring ports played by the test, and an
//! in-memory `FrameQueue` standing in for an interface or a VM.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use ringswitch_control::PortVlan;
use ringswitch_frame::{
    Caps, FrameQueue, OffloadHdr, PushError, QueueStats, Stage, Taken, Wake, F_NEEDS_CSUM,
    GSO_TCPV4, GSO_UDP_L4,
};
use ringswitch_ring::{AppRing, Dir, Geometry, Region, RegionLayout};
use ringswitch_switch::{QueuePort, Switch, SwitchPort};

#[derive(Default)]
pub struct Wire {
    /// Frames the "kernel" has for us.
    pub rx: VecDeque<(OffloadHdr, Vec<u8>)>,
    /// Frames queued for transmission, not yet flushed.
    pub pending: Vec<(OffloadHdr, Vec<u8>)>,
    /// Frames flushed to the "kernel".
    pub sent: Vec<(OffloadHdr, Vec<u8>)>,
    pub flushes: u32,
}

struct MockQueue {
    wire: Arc<Mutex<Wire>>,
    caps: Caps,
    /// Most frames pending at once.
    room: usize,
}

impl FrameQueue for MockQueue {
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken {
        let mut w = self.wire.lock().unwrap();
        let mut n = 0;
        while n < max {
            let Some((h, frame)) = w.rx.pop_front() else {
                break;
            };
            n += 1;
            if !stage.put(&frame, h) {
                break;
            }
        }
        Taken {
            frames: n,
            ..Taken::default()
        }
    }
    fn has_work(&self) -> bool {
        !self.wire.lock().unwrap().rx.is_empty()
    }
    fn push(&mut self, hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError> {
        let mut w = self.wire.lock().unwrap();
        if w.pending.len() >= self.room {
            return Err(PushError::Full);
        }
        w.pending.push((*hdr, frame.to_vec()));
        Ok(())
    }
    fn flush(&mut self) -> Wake {
        let mut w = self.wire.lock().unwrap();
        let p = std::mem::take(&mut w.pending);
        w.sent.extend(p);
        w.flushes += 1;
        Wake::NONE
    }
    fn wake_fd(&self) -> Option<RawFd> {
        Some(-1)
    }
    fn caps(&self) -> Caps {
        self.caps
    }
    fn stats(&self) -> QueueStats {
        QueueStats {
            kernel_rx_dropped: 7,
            ..QueueStats::default()
        }
    }
    fn driver(&self) -> &'static str {
        "xdp-generic"
    }
}

pub fn dev(
    sw: &Switch,
    name: &str,
    caps: Caps,
    room: usize,
) -> (Arc<SwitchPort>, Arc<Mutex<Wire>>) {
    dev_vlan(sw, name, caps, room, PortVlan::default())
}

/// An interface port with its VLANs set.
pub fn dev_vlan(
    sw: &Switch,
    name: &str,
    caps: Caps,
    room: usize,
    vlan: PortVlan,
) -> (Arc<SwitchPort>, Arc<Mutex<Wire>>) {
    let wire = Arc::new(Mutex::new(Wire::default()));
    let q = MockQueue {
        wire: wire.clone(),
        caps,
        room,
    };
    let d = QueuePort::new(vec![Arc::new(Mutex::new(q))]).unwrap();
    let p = sw
        .attach(|i| Ok(SwitchPort::new_queues(name.into(), i, d).with_vlan(vlan)))
        .unwrap();
    (p, wire)
}

pub fn ring(sw: &Switch, name: &str) -> (Arc<SwitchPort>, AppRing, AppRing) {
    ring_vlan(sw, name, PortVlan::default())
}

/// A ring port with its VLANs set.
pub fn ring_vlan(sw: &Switch, name: &str, vlan: PortVlan) -> (Arc<SwitchPort>, AppRing, AppRing) {
    let r = Arc::new(
        Region::create(
            RegionLayout::new(Geometry::default(), 1).unwrap(),
            [name, ""],
        )
        .unwrap(),
    );
    let p = sw
        .attach(|i| Ok(SwitchPort::new(name.into(), i, r.clone())?.with_vlan(vlan)))
        .unwrap();
    (
        p,
        AppRing::new(r.clone(), 0, Dir::Tx, 0),
        AppRing::new(r, 0, Dir::Rx, 0),
    )
}

pub fn frame(dst: u8, src: u8, tag: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[14] = tag;
    f
}

pub fn queue(tx: &mut AppRing, frames: &[Vec<u8>]) {
    for (k, f) in frames.iter().enumerate() {
        let mut s = tx.slot_mut(k as u32).unwrap();
        assert!(s.write_at(0, f));
        s.set_len(f.len() as u16);
    }
    tx.advance(frames.len() as u32);
    tx.publish();
}

pub fn drain(rx: &mut AppRing) -> Vec<Vec<u8>> {
    rx.refresh_tail();
    let n = rx.space();
    let v = (0..n)
        .map(|k| {
            let s = rx.slot_mut(k).unwrap();
            s.payload().to_vec()
        })
        .collect();
    rx.advance(n);
    rx.publish();
    v
}

/// An IPv4 frame from 02::01 (10.0.0.1) to 02::0b (10.0.0.2) carrying
/// protocol `proto`: `l4_len` bytes of zeroed transport header, then
/// `payload` bytes counting up.
fn ipv4_frame(proto: u8, l4_len: usize, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + l4_len + payload];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0xb]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4_len + payload) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    for (k, b) in f[34 + l4_len..].iter_mut().enumerate() {
        *b = k as u8;
    }
    f
}

/// A TCP/IPv4 frame of 3000 payload bytes from 02::01 to 02::0b, asking
/// for segmentation at an MSS of 1000 and its checksum.
pub fn tso_frame() -> (OffloadHdr, Vec<u8>) {
    let mut f = ipv4_frame(6, 20, 3000);
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&1234u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    let h = OffloadHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        hdr_len: 54,
        gso_size: 1000,
        csum_start: 34,
        csum_offset: 16,
    };
    (h, f)
}

/// A UDP/IPv4 frame of 3000 payload bytes from 02::01 to 02::0b, asking
/// for UDP segmentation (USO) into 1000-byte datagrams and its checksum.
pub fn uso_frame() -> (OffloadHdr, Vec<u8>) {
    let mut f = ipv4_frame(17, 8, 3000);
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&1234u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9999u16.to_be_bytes());
    let h = OffloadHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_UDP_L4,
        hdr_len: 42,
        gso_size: 1000,
        csum_start: 34,
        csum_offset: 6,
    };
    (h, f)
}
