//! An in-process vhost-user frontend (the `vhost` crate's `Frontend`) drives
//! the device over a real unix socket: handshake, memory table (a shared
//! file, mapped by both sides), vrings, one frame each way, teardown.

use std::fs::OpenOptions;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ringswitch_vhost::hdr::feature;
use ringswitch_vhost::socket;
use ringswitch_vhost::{NetConfig, VhostUserNet, VirtioNetHdr};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{Address, Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

const MEM_SIZE: usize = 0x10_0000;
const QSIZE: u16 = 128;
// Split-ring layout for 128 entries: descriptors, then avail, then used (4 KiB aligned).
const fn ring(base: u64) -> (u64, u64, u64) {
    (base, base + 16 * QSIZE as u64, base + 0x1000)
}
const RX: (u64, u64, u64) = ring(0x0);
const TX: (u64, u64, u64) = ring(0x4000);
const BUF: u64 = 0x2_0000;

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "timed out: {what}"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn handshake_and_one_frame_each_way() {
    let dir = std::env::temp_dir().join(format!("ringswitch-vhost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("vm.sock");

    let dev = Arc::new(Mutex::new(VhostUserNet::new(NetConfig::default()).unwrap()));
    let port = dev.lock().unwrap().ports()[0].clone();
    let mut listener = socket::listen(&sock).unwrap();
    let server_dev = dev.clone();
    let server = thread::spawn(move || {
        let mut conn = socket::accept(&mut listener, &server_dev).unwrap();
        socket::serve_connection(&mut conn, &server_dev)
    });

    // Guest memory: a shared file, mapped here (the "guest") and by the device.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("mem"))
        .unwrap();
    file.set_len(MEM_SIZE as u64).unwrap();
    let mem = GuestMemoryMmap::<()>::from_ranges_with_files([(
        GuestAddress(0),
        MEM_SIZE,
        Some(FileOffset::new(file, 0)),
    )])
    .unwrap();
    let region = mem.iter().next().unwrap();
    let info = VhostUserMemoryRegionInfo::from_guest_region(region).unwrap();
    let va = |gpa: u64| region.as_ptr() as u64 + gpa;

    let mut fe = Frontend::connect(&sock, 2).unwrap();
    fe.set_owner().unwrap();
    let offered = fe.get_features().unwrap();
    assert_eq!(
        offered & feature::OFFERED,
        feature::OFFERED & !(1 << feature::VIRTIO_NET_F_MQ)
    );
    let features = (1u64 << feature::VIRTIO_F_VERSION_1)
        | (1 << feature::VIRTIO_RING_F_EVENT_IDX)
        | (1 << feature::VIRTIO_NET_F_MRG_RXBUF)
        | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
    fe.set_features(features).unwrap();
    let proto = fe.get_protocol_features().unwrap();
    assert!(proto.contains(VhostUserProtocolFeatures::MQ));
    fe.set_protocol_features(VhostUserProtocolFeatures::MQ)
        .unwrap();
    assert_eq!(fe.get_queue_num().unwrap(), 2);
    fe.set_mem_table(&[info]).unwrap();

    let mut calls = Vec::new();
    let mut kicks = Vec::new();
    for (i, (desc, avail, used)) in [RX, TX].into_iter().enumerate() {
        fe.set_vring_num(i, QSIZE).unwrap();
        fe.set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: QSIZE,
                queue_size: QSIZE,
                flags: 0,
                desc_table_addr: va(desc),
                used_ring_addr: va(used),
                avail_ring_addr: va(avail),
                log_addr: None,
            },
        )
        .unwrap();
        fe.set_vring_base(i, 0).unwrap();
        let call = EventFd::new(0).unwrap();
        let kick = EventFd::new(0).unwrap();
        fe.set_vring_call(i, &call).unwrap();
        fe.set_vring_kick(i, &kick).unwrap();
        fe.set_vring_enable(i, true).unwrap();
        calls.push(call);
        kicks.push(kick);
    }
    wait_until("port running", || port.lock().unwrap().is_running());
    assert!(port.lock().unwrap().tx_kick_fd().is_some());

    // Guest TX: header + 64-byte frame in one buffer, then a kick.
    let frame: Vec<u8> = (0..64u8).collect();
    mem.write_slice(&[0u8; 12], GuestAddress(BUF)).unwrap();
    mem.write_slice(&frame, GuestAddress(BUF + 12)).unwrap();
    let desc = (BUF.to_le(), (76u32).to_le(), 0u16, 0u16);
    mem.write_obj(desc.0, GuestAddress(TX.0)).unwrap();
    mem.write_obj(desc.1, GuestAddress(TX.0 + 8)).unwrap();
    mem.write_obj(0u16, GuestAddress(TX.1 + 4)).unwrap();
    mem.write_obj(1u16, GuestAddress(TX.1 + 2)).unwrap();
    kicks[1].write(1).unwrap();

    let mut seen = Vec::new();
    {
        let mut p = port.lock().unwrap();
        p.drain_tx_kick();
        let n = p.tx_batch(32, |f, h| {
            let mut b = vec![0u8; f.len()];
            f.copy_to(&mut b);
            seen.push((*h, b));
            true
        });
        assert_eq!(n, 1);
        p.notify_tx_done().send();
        assert!(!p.enable_tx_notifications());
    }
    assert_eq!(seen, vec![(VirtioNetHdr::default(), frame.clone())]);
    assert_eq!(mem.read_obj::<u16>(GuestAddress(TX.2 + 2)).unwrap(), 1);
    assert_eq!(calls[1].read().unwrap(), 1, "TX completion interrupt");

    // Guest RX: one 2 KiB writable buffer.
    let rx_buf = BUF + 0x1000;
    mem.write_obj(rx_buf, GuestAddress(RX.0)).unwrap();
    mem.write_obj(2048u32, GuestAddress(RX.0 + 8)).unwrap();
    mem.write_obj(2u16, GuestAddress(RX.0 + 12)).unwrap(); // VRING_DESC_F_WRITE
    mem.write_obj(0u16, GuestAddress(RX.1 + 4)).unwrap();
    mem.write_obj(1u16, GuestAddress(RX.1 + 2)).unwrap();
    {
        let mut p = port.lock().unwrap();
        assert_eq!(p.rx_space(), 1);
        p.rx_push(&VirtioNetHdr::default(), &frame).unwrap();
        p.notify_rx().send();
    }
    assert_eq!(mem.read_obj::<u16>(GuestAddress(RX.2 + 2)).unwrap(), 1);
    assert_eq!(mem.read_obj::<u32>(GuestAddress(RX.2 + 8)).unwrap(), 76);
    let hdr: VirtioNetHdr = mem.read_obj(GuestAddress(rx_buf)).unwrap();
    assert_eq!(hdr.num_buffers(), 1);
    let mut got = vec![0u8; 64];
    mem.read_slice(&mut got, GuestAddress(rx_buf).unchecked_add(12))
        .unwrap();
    assert_eq!(got, frame);
    assert_eq!(calls[0].read().unwrap(), 1, "RX interrupt");

    // Stop: the frontend learns where to resume.
    assert_eq!(fe.get_vring_base(1).unwrap(), 1);
    assert!(!port.lock().unwrap().is_running());

    // Hang up: the device resets and is ready for the next frontend.
    drop(fe);
    server.join().unwrap();
    assert!(port.lock().unwrap().tx_kick_fd().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
