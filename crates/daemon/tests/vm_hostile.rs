//! Hostile vhost-user frontends against a real in-process daemon, over its
//! real VM port sockets (issue 15, "What broke" items 1 and 2): guest
//! memory the daemon must not map, memory shrunk under the running device,
//! and kick and call descriptors that are not eventfds or whose counter is
//! pushed to the maximum. Each test asserts the daemon survives, the other
//! ports keep forwarding, the control plane answers, and the VM port serves
//! the next, well-behaved frontend.
//!
//! Every wait has a generous deadline and checks an outcome, not a speed.

mod common;

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::guest::*;
use common::*;
use ringswitch_client::Port;
use ringswitch_control::{CallError, Connection, PortStats, Request, SwitchInfo, VhostUserSpec};
use ringswitch_daemon::Daemon;
use ringswitch_vhost::hdr::feature;
use vhost::vhost_user::Frontend;
use vhost::{VhostBackend, VhostUserMemoryRegionInfo};
use vmm_sys_util::eventfd::EventFd;

/// Upper bound of every wait.
const T: Duration = Duration::from_secs(30);
/// The guest's MAC and the ring ports'.
const GA: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa1];
const RA: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb1];
const RB: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb2];
/// Guest memory of the raw frontends.
const MEM: u64 = 0x10_0000;

struct Env {
    _d: Daemon,
    s: PathBuf,
    c: Connection,
    tag: String,
}

fn env(tag: &str) -> Env {
    let d = daemon(&format!("hostile-{tag}"));
    let s = d.socket().to_path_buf();
    let c = Connection::connect(&s).unwrap();
    Env {
        _d: d,
        s,
        c,
        tag: tag.to_string(),
    }
}

impl Env {
    /// Adds a server-mode VM port; returns its socket path.
    fn vm(&mut self, name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "rs-hostile-{}-{}-{}.sock",
            std::process::id(),
            self.tag,
            name.replace(':', "-")
        ));
        let spec = VhostUserSpec {
            path: path.to_string_lossy().into_owned(),
            client: false,
            queues: 1,
            offloads: true,
        };
        match self.c.call(&Request::PortAdd {
            name: name.into(),
            vhost_user: Some(spec),
            passthrough: None,
            vnet_hdr: false,
            migratable: false,
            vlan: None,
            ofport: None,
        }) {
            Ok(_) => path,
            Err(CallError::Daemon(e)) => panic!("port-add {name}: {e}"),
            Err(e) => panic!("port-add {name}: {e}"),
        }
    }

    fn open(&self, name: &str) -> Port {
        Port::open_at(&self.s, name).unwrap_or_else(|e| panic!("open {name}: {e}"))
    }

    fn stat(&mut self, name: &str) -> PortStats {
        let all: Vec<PortStats> = self.c.call_as(&Request::Stats { switch: None }).unwrap().0;
        all.into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no stats for {name}"))
    }

    /// The daemon still serves: a switch-list answers and two fresh ring
    /// ports on a new switch exchange a frame.
    fn still_works(&mut self) {
        let _: Vec<SwitchInfo> = self.c.call_as(&Request::SwitchList).unwrap().0;
        let mut x = self.open("vale99:x");
        let mut y = self.open("vale99:y");
        let f = frame(mac(0x11), mac(0x12), 60, 7);
        assert_eq!(send(&mut x, std::slice::from_ref(&f)), 1);
        assert!(recv_until(&mut y, &[7]), "ring ports on a new switch");
    }
}

/// Receives on RX ring 0 until every tag in `want` arrived (other frames
/// are skipped); false if they did not within T.
fn recv_until(p: &mut Port, want: &[u32]) -> bool {
    let deadline = Instant::now() + T;
    let mut missing: Vec<u32> = want.to_vec();
    while !missing.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut rx = p.rx(0);
        if !rx.wait(Some(left)).unwrap() {
            return false;
        }
        let k = rx.space();
        for j in 0..k {
            let t = tag_of(rx.slot(j).unwrap().payload());
            missing.retain(|&m| m != t);
        }
        rx.advance(k);
        rx.sync().unwrap();
    }
    true
}

/// Two ring ports on the VM's switch exchange a frame each way.
fn ring_ports_forward(a: &mut Port, b: &mut Port, t: u32) {
    assert_eq!(send(a, &[frame(RB, RA, 60, t)]), 1);
    assert!(recv_until(b, &[t]), "ring port a to b");
    assert_eq!(send(b, &[frame(RA, RB, 60, t + 1)]), 1);
    assert!(recv_until(a, &[t + 1]), "ring port b to a");
}

/// A well-behaved guest on the VM port `path` exchanges frames with ring
/// port `a`: the port served the next frontend.
fn guest_forwards(path: &Path, a: &mut Port, t: u32) -> Guest {
    let mut g = Guest::connect(path, GuestConfig::default());
    g.post_rx(0, 64, 2048);
    g.send_plain(&frame(RA, GA, 60, t));
    assert!(recv_until(a, &[t]), "guest to ring port");
    assert_eq!(send(a, &[frame(GA, RA, 60, t + 1)]), 1);
    let deadline = Instant::now() + T;
    loop {
        let got = g.wait_rx(1, Duration::from_millis(200));
        if got.iter().any(|f| tag_of(&f.data) == t + 1) {
            break;
        }
        assert!(Instant::now() < deadline, "ring port to guest");
    }
    g
}

fn memfd(size: u64) -> File {
    // SAFETY: a NUL-terminated name and valid flags; returns a new
    // descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"rs-hostile".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor nothing else owns.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(size).unwrap();
    f
}

/// Connects to a VM port's socket, retrying until it listens (within T).
fn connect_vm(path: &Path) -> UnixStream {
    let deadline = Instant::now() + T;
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return s,
            Err(e) => {
                assert!(Instant::now() < deadline, "connect: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// A frontend that connected and negotiated plain VERSION_1 (no protocol
/// features, so the vrings are enabled from the start and no message waits
/// for an ack: a refused one shows as the connection closing).
fn raw_frontend(path: &Path) -> Frontend {
    let stream = connect_vm(path);
    let fe = Frontend::from_stream(stream, 2);
    fe.set_owner().unwrap();
    fe.get_features().unwrap();
    fe.set_features(1 << feature::VIRTIO_F_VERSION_1).unwrap();
    fe
}

fn region(file: &File, size: u64, offset: u64) -> VhostUserMemoryRegionInfo {
    VhostUserMemoryRegionInfo {
        guest_phys_addr: 0,
        memory_size: size,
        userspace_addr: 0x7f00_0000_0000,
        mmap_offset: offset,
        mmap_handle: file.as_raw_fd(),
    }
}

/// The daemon closed the frontend's connection: its next request fails
/// (without protocol features no message is acked, so the refusal itself
/// is not reported on the message).
fn assert_dropped(fe: &mut Frontend, what: &str) {
    assert!(
        fe.get_features().is_err(),
        "{what}: the daemon kept the connection"
    );
}

/// Sends `regions` as the memory table and checks the daemon refuses it
/// by dropping that frontend only.
fn refused_table(path: &Path, regions: &[VhostUserMemoryRegionInfo], what: &str) {
    let mut fe = raw_frontend(path);
    // Without an ack the send itself succeeds.
    let _ = fe.set_mem_table(regions);
    assert_dropped(&mut fe, what);
}

/// Item 1: an empty memfd in the memory table is refused; the daemon lives.
#[test]
fn empty_memfd_in_the_memory_table_is_refused() {
    let mut e = env("emptymem");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let empty = memfd(0);
    refused_table(&path, &[region(&empty, MEM, 0)], "empty memfd");
    // A file shorter than offset + size, too.
    let short = memfd(MEM);
    refused_table(&path, &[region(&short, MEM, 4096)], "memfd past its end");
    ring_ports_forward(&mut a, &mut b, 10);
    e.still_works();
    guest_forwards(&path, &mut a, 20);
}

/// Item 1: absurd offsets and sizes are refused.
#[test]
fn huge_offset_and_size_are_refused() {
    let mut e = env("hugemem");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let f = memfd(MEM);
    refused_table(&path, &[region(&f, MEM, 1 << 62)], "mmap_offset 1<<62");
    refused_table(&path, &[region(&f, 64 << 40, 0)], "64 TiB region");
    refused_table(
        &path,
        &[region(&f, MEM, u64::MAX - 4095)],
        "offset + size wraps",
    );
    // A descriptor that is not a regular file (a pipe) is refused too.
    let (r, _w) = std::io::pipe().unwrap();
    let pipe = File::from(std::os::fd::OwnedFd::from(r));
    refused_table(&path, &[region(&pipe, MEM, 0)], "a pipe as memory");
    // Each refused frontend is counted on the port.
    wait_until("the four refused frontends to be counted", || {
        e.stat("vale0:vm").vm_frontend_errors == 4
    });
    ring_ports_forward(&mut a, &mut b, 10);
    e.still_works();
    guest_forwards(&path, &mut a, 20);
}

/// A pipe as an `EventFd` (the frontend crate only sends those).
fn pipe_as_eventfd() -> (EventFd, File) {
    let (r, w) = std::io::pipe().unwrap();
    // SAFETY: the write end's descriptor, owned from here on by the EventFd.
    let e = unsafe { EventFd::from_raw_fd(std::os::fd::OwnedFd::from(w).into_raw_fd()) };
    (e, File::from(std::os::fd::OwnedFd::from(r)))
}

/// Item 2: a call descriptor that is a pipe (which the frontend could fill
/// so that every interrupt blocks) is refused.
#[test]
fn call_fd_that_is_a_pipe_is_refused() {
    let mut e = env("callpipe");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let mem = memfd(MEM);
    for index in [0, 1] {
        let mut fe = raw_frontend(&path);
        fe.set_mem_table(&[region(&mem, MEM, 0)]).unwrap();
        let (call, _r) = pipe_as_eventfd();
        let _ = fe.set_vring_call(index, &call);
        assert_dropped(&mut fe, "pipe as call fd");
    }
    // The error descriptor is held to the same rule.
    let mut fe = raw_frontend(&path);
    let (err, _r) = pipe_as_eventfd();
    let _ = fe.set_vring_err(0, &err);
    assert_dropped(&mut fe, "pipe as error fd");
    ring_ports_forward(&mut a, &mut b, 10);
    e.still_works();
    guest_forwards(&path, &mut a, 20);
}

/// Item 2: a kick descriptor that is not an eventfd (a pipe, a socket) is
/// refused, so the worker never reads a descriptor that can block.
#[test]
fn kick_fd_that_is_not_an_eventfd_is_refused() {
    let mut e = env("kickpipe");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let mem = memfd(MEM);
    let mut fe = raw_frontend(&path);
    fe.set_mem_table(&[region(&mem, MEM, 0)]).unwrap();
    let (kick, _r) = pipe_as_eventfd();
    let _ = fe.set_vring_kick(1, &kick);
    assert_dropped(&mut fe, "pipe as kick fd");
    let mut fe = raw_frontend(&path);
    fe.set_mem_table(&[region(&mem, MEM, 0)]).unwrap();
    let (s1, _s2) = UnixStream::pair().unwrap();
    // SAFETY: the socket's descriptor, owned from here on by the EventFd.
    let sock = unsafe { EventFd::from_raw_fd(s1.into_raw_fd()) };
    let _ = fe.set_vring_kick(1, &sock);
    assert_dropped(&mut fe, "socket as kick fd");
    ring_ports_forward(&mut a, &mut b, 10);
    e.still_works();
    guest_forwards(&path, &mut a, 20);
}

/// Item 2: a blocking call eventfd whose counter the frontend pushed to
/// the maximum, so every interrupt write would block: forwarding both ways
/// and the control plane keep working, and the interrupts are counted as
/// dropped.
#[test]
fn full_call_eventfd_drops_interrupts_and_nothing_blocks() {
    full_call_eventfd("callfull", false);
}

/// Item 2, the same with the frontend clearing O_NONBLOCK again on its
/// (shared) descriptor after the daemon set it: the blocked write is cut
/// short and that descriptor is not written again.
#[test]
fn call_eventfd_made_blocking_again_is_cut_short() {
    full_call_eventfd("callblock", true);
}

fn full_call_eventfd(tag: &str, blocking_again: bool) {
    let mut e = env(tag);
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let mut g = Guest::connect(&path, GuestConfig::default());
    g.post_rx(0, 128, 2048);
    for index in [0, 1] {
        // Blocking (no EFD_NONBLOCK), counter at its maximum.
        let call = EventFd::new(0).unwrap();
        call.write(0xffff_ffff_ffff_fffe).unwrap();
        let mine = call.try_clone().unwrap();
        g.replace_call(index, call).unwrap();
        if blocking_again {
            // SAFETY: fcntl on an open descriptor; no memory passed.
            unsafe {
                let fl = libc::fcntl(mine.as_raw_fd(), libc::F_GETFL);
                assert_eq!(
                    libc::fcntl(mine.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK),
                    0
                );
            }
        }
    }
    // Guest to ring port: 32 frames, each completion wanting an interrupt.
    let tags: Vec<u32> = (100..132).collect();
    for &t in &tags {
        g.send_plain(&frame(RA, GA, 60, t));
    }
    assert!(recv_until(&mut a, &tags), "guest to ring port");
    // Ring port to guest: 32 frames, each batch wanting an interrupt.
    let back: Vec<Vec<u8>> = (200..232).map(|t| frame(GA, RA, 60, t)).collect();
    assert_eq!(send(&mut a, &back), back.len());
    let deadline = Instant::now() + T;
    let mut got = 0;
    while got < back.len() {
        got += g.recv().len();
        assert!(
            Instant::now() < deadline,
            "ring port to guest: {got} frames"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The control plane answers, with the dropped interrupts counted.
    let deadline = Instant::now() + T;
    while e.stat("vale0:vm").vm_interrupts_dropped == 0 {
        assert!(Instant::now() < deadline, "no interrupt counted as dropped");
        std::thread::sleep(Duration::from_millis(10));
    }
    ring_ports_forward(&mut a, &mut b, 10);
    e.still_works();
}

/// Item 1: guest memory shrunk after the vrings started. The daemon
/// survives the fault, counts the port broken and stops it; the other
/// ports on the same switch keep forwarding; the next frontend gets a
/// working port.
#[test]
fn guest_memory_shrunk_under_running_vrings_is_survived() {
    let mut e = env("shrink");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let mut g = Guest::connect(&path, GuestConfig::default());
    g.post_rx(0, 64, 2048);
    g.send_plain(&frame(RA, GA, 60, 1));
    assert!(recv_until(&mut a, &[1]), "guest to ring port before");

    // The attack. From here on nothing of `g` that touches its memory is
    // called (it would fault in this process too).
    g.memory_file().set_len(0).unwrap();
    let deadline = Instant::now() + T;
    let mut t = 1000;
    while e.stat("vale0:vm").vm_guest_faults == 0 {
        assert!(Instant::now() < deadline, "the fault was never counted");
        // The worker reads the rings on a kick, and writes them for a
        // frame to the guest.
        g.kick_tx(0);
        assert_eq!(send(&mut a, &[frame(GA, RA, 60, t)]), 1);
        t += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = e.stat("vale0:vm");
    assert_eq!(s.vm_guest_faults, 1, "counted once");

    // Traffic to the broken port is dropped and counted, not stuck.
    assert_eq!(send(&mut a, &[frame(GA, RA, 60, 5000)]), 1);
    ring_ports_forward(&mut a, &mut b, 10);
    e.still_works();

    // The frontend goes; the next one gets a working port.
    drop(g);
    let g2 = guest_forwards(&path, &mut a, 20);
    assert_eq!(e.stat("vale0:vm").vm_guest_faults, 1);
    drop(g2);
}

/// A frontend that asks for dirty logging (live migration): protocol
/// features with LOG_SHMFD acked, and a valid memory table.
fn migrating_frontend(path: &Path, mem: &File) -> Frontend {
    use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
    use vhost::vhost_user::VhostUserFrontend;
    let stream = connect_vm(path);
    let mut fe = Frontend::from_stream(stream, 2);
    fe.set_owner().unwrap();
    let offered = fe.get_features().unwrap();
    assert_ne!(
        offered & VhostUserVirtioFeatures::LOG_ALL.bits(),
        0,
        "the device offers VHOST_F_LOG_ALL"
    );
    fe.set_features(
        (1 << feature::VIRTIO_F_VERSION_1) | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits(),
    )
    .unwrap();
    let proto = fe.get_protocol_features().unwrap();
    assert!(proto.contains(VhostUserProtocolFeatures::LOG_SHMFD | VhostUserProtocolFeatures::RARP));
    fe.set_protocol_features(
        VhostUserProtocolFeatures::LOG_SHMFD | VhostUserProtocolFeatures::REPLY_ACK,
    )
    .unwrap();
    fe.set_mem_table(&[region(mem, MEM, 0)]).unwrap();
    fe
}

/// SET_LOG_BASE with `size` bytes at `offset` of `file`.
fn set_log(fe: &Frontend, file: &File, size: u64, offset: u64) -> Result<(), vhost::Error> {
    fe.set_log_base(
        0,
        Some(vhost::VhostUserDirtyLogRegion {
            mmap_size: size,
            mmap_offset: offset,
            mmap_handle: file.as_raw_fd(),
        }),
    )
}

/// Issue 19: a frontend that misbehaves while it migrates its guest (a
/// dirty log too small for its memory, a log that is not a file, a log at
/// an offset that cannot be mapped) loses its own connection, counted;
/// one that sends a good log twice (as QEMU does when memory grows) keeps
/// it. The daemon lives, the other ports forward, and the VM port serves
/// the next, well-behaved frontend.
#[test]
fn a_migrating_frontends_bad_dirty_log_costs_only_its_connection() {
    let mut e = env("dirtylog");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let mem = memfd(MEM);
    // One bit per 4 KiB page: MEM needs MEM / 4096 / 8 bytes.
    let need = MEM / 4096 / 8;
    let log = memfd(4096);
    let (_w, pipe) = pipe_as_eventfd();
    let errors0 = e.stat("vale0:vm").vm_frontend_errors;
    let bad: [(&str, &File, u64, u64); 3] = [
        ("a log smaller than the memory", &log, need / 2, 0),
        ("a pipe for a log", &pipe, need, 0),
        ("a log at an unaligned offset", &log, need, 100),
    ];
    for (i, (what, f, size, offset)) in bad.into_iter().enumerate() {
        let mut fe = migrating_frontend(&path, &mem);
        assert!(set_log(&fe, f, size, offset).is_err(), "{what}: accepted");
        assert_dropped(&mut fe, what);
        ring_ports_forward(&mut a, &mut b, 100 + 10 * i as u32);
    }
    let deadline = Instant::now() + T;
    while e.stat("vale0:vm").vm_frontend_errors < errors0 + 3 {
        assert!(Instant::now() < deadline, "three refused frontends counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A good log, and another one replacing it: the connection stays.
    let fe = migrating_frontend(&path, &mem);
    set_log(&fe, &log, need, 0).unwrap();
    set_log(&fe, &log, 4096, 0).unwrap();
    assert!(fe.get_features().is_ok(), "a second good log is taken");
    drop(fe);
    e.still_works();
    guest_forwards(&path, &mut a, 200);
}

/// Issue 19: a frontend that starts a migration (a dirty log, LOG_ALL) and
/// never stops its rings (no GET_VRING_BASE) but goes away with them
/// running: while it ran, the device logged its writes into guest memory;
/// once it is gone, its port serves the next frontend, and every other
/// port kept forwarding.
#[test]
fn a_frontend_that_never_stops_its_rings_while_migrating_costs_nothing_else() {
    use vhost::vhost_user::message::VhostUserVirtioFeatures;
    let mut e = env("neverstop");
    let path = e.vm("vale0:vm");
    let mut a = e.open("vale0:a");
    let mut b = e.open("vale0:b");
    let cfg = GuestConfig {
        log_shmfd: true,
        ..GuestConfig::default()
    };
    let mut g = Guest::connect(&path, cfg);
    g.post_rx(0, 64, 2048);
    // The migration starts: a log for all of the guest's memory, then
    // LOG_ALL.
    let mem_len = g.memory_file().metadata().unwrap().len();
    let need = mem_len.div_ceil(4096 * 8).next_multiple_of(4096);
    let log = memfd(need);
    set_log(g.frontend(), &log, need, 0).unwrap();
    let features = g.features() | VhostUserVirtioFeatures::LOG_ALL.bits();
    g.frontend().set_features(features).unwrap();
    // Frames each way while logging: the RX writes are marked.
    g.send_plain(&frame(RA, GA, 60, 300));
    assert!(
        recv_until(&mut a, &[300]),
        "guest to ring port while logging"
    );
    assert_eq!(send(&mut a, &[frame(GA, RA, 60, 301)]), 1);
    let deadline = Instant::now() + T;
    loop {
        let got = g.wait_rx(1, Duration::from_millis(200));
        if got.iter().any(|f| tag_of(&f.data) == 301) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ring port to guest while logging"
        );
    }
    let mut bits = vec![0u8; need as usize];
    log.read_exact_at(&mut bits, 0).unwrap();
    let dirty: u32 = bits.iter().map(|b| b.count_ones()).sum();
    assert!(
        dirty > 0,
        "the device's writes into guest memory were logged"
    );
    // Gone without stopping a ring.
    g.disconnect();
    ring_ports_forward(&mut a, &mut b, 310);
    e.still_works();
    guest_forwards(&path, &mut a, 320);
}
