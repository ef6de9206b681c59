//! The host-stack port: a TAP interface whose other side is the host's own
//! TCP/IP stack (netmap's `eth0^`, done with today's kernel interfaces).
//!
//! Every frame crosses with a 12-byte virtio-net header (IFF_VNET_HDR), and
//! the TAP is told it may hand us partial checksums and TSO frames
//! (TUNSETOFFLOAD), so the host stack sends 64 KiB TCP segments that pass
//! whole to a guest that takes them, and takes the same from guests.
//! Non-persistent: the interface disappears with the last of its queues,
//! including when the daemon is killed.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringswitch_frame::{
    Caps, FrameQueue, OffloadHdr, PushError, QueueStats, SharedQueue, Stage, Taken, Wake,
};
use ringswitch_ring::poll;

use crate::{iface, DevError, Driver};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
/// Fail with EBUSY if an interface of that name exists.
const IFF_TUN_EXCL: libc::c_short = 0x8000u16 as libc::c_short;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;

/// The virtio-net header with `num_buffers` (VIRTIO 1.x), as set with
/// TUNSETVNETHDRSZ.
const HDR: usize = 12;
/// Largest frame a TAP hands over or takes: a 64 KiB GSO frame and its
/// Ethernet header.
const FRAME: usize = 65_550;
/// Most queues of one TAP.
pub const MAX_QUEUES: u32 = 16;

/// A created TAP interface and its queues.
pub struct Tap {
    /// Interface name.
    pub ifname: String,
    /// One per queue.
    pub queues: Vec<SharedQueue>,
}

/// One queue of a TAP.
pub struct TapQueue {
    fd: OwnedFd,
    /// One read: the header, the frame, and one byte more, so that a frame
    /// too long for it shows as a read that fills it.
    buf: Box<[u8]>,
    stats: QueueStats,
    /// Reads that failed for another reason than "nothing to read".
    read_errors: u64,
    /// The kernel takes UDP segmentation (USO) frames.
    uso: bool,
    /// The interface is gone (deleted, or its network namespace was): the
    /// descriptor reads EBADFD and polls in error for ever, so the queue
    /// offers no wake descriptor any more.
    gone: bool,
}

const NEEDS: &str = "CAP_NET_ADMIN";

/// Opens one queue of TAP `name`: the first creates the interface (and
/// fails if any interface of that name exists, IFF_TUN_EXCL), the others
/// attach to it. Also says whether the kernel took USO.
fn open_queue(name: &str, multi: bool, first: bool) -> Result<(OwnedFd, bool), DevError> {
    let path = CString::new("/dev/net/tun").expect("no NUL");
    // SAFETY: a valid path string; open returns a new fd or -1.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(DevError::io(
            "opening /dev/net/tun",
            NEEDS,
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zeroes are a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    r.ifr_ifru.ifru_flags = IFF_TAP
        | IFF_NO_PI
        | IFF_VNET_HDR
        | if multi { IFF_MULTI_QUEUE } else { 0 }
        | if first { IFF_TUN_EXCL } else { 0 };
    // SAFETY: TUNSETIFF reads (and may write back the name of) `r`, which
    // lives across the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut r) } < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EBUSY) if first => DevError::Busy {
                name: name.to_string(),
                why: format!("an interface named {name} already exists"),
            },
            // Another queue found the TAP replaced under it.
            Some(libc::EBUSY) | Some(libc::EINVAL) => DevError::Busy {
                name: name.to_string(),
                why: "the TAP changed while its queues were being opened".into(),
            },
            _ => DevError::io(format!("creating TAP {name}"), NEEDS, e),
        });
    }
    let hdr = libc::c_int::try_from(HDR).unwrap_or_default();
    // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &hdr) } < 0 {
        return Err(DevError::io(
            format!("setting the virtio-net header size of {name}"),
            NEEDS,
            io::Error::last_os_error(),
        ));
    }
    // USO (Linux 6.2 and later) where the kernel has it: it then takes UDP
    // GSO frames from us and may hand us its own. An older kernel refuses
    // the flags it does not know with EINVAL.
    let set_offload = |off: libc::c_uint| {
        // SAFETY: TUNSETOFFLOAD takes the flags as the argument value.
        unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, libc::c_ulong::from(off)) >= 0 }
    };
    let base = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
    let uso = set_offload(base | TUN_F_USO4 | TUN_F_USO6);
    if !uso && !set_offload(base) {
        return Err(DevError::io(
            format!("enabling offloads on {name}"),
            NEEDS,
            io::Error::last_os_error(),
        ));
    }
    Ok((fd, uso))
}

/// Creates TAP interface `name` with `queues` queues (1 to 16), up, with
/// virtio-net headers and checksum/TSO offloads. An existing interface of
/// that name, a TAP or not, is refused ([`DevError::Busy`]).
pub fn open_tap(name: &str, queues: u32) -> Result<Tap, DevError> {
    iface::validate_name(name)?;
    if !(1..=MAX_QUEUES).contains(&queues) {
        return Err(DevError::Unsupported {
            name: name.to_string(),
            what: "that many TAP queues",
            why: format!("use 1 to {MAX_QUEUES}"),
        });
    }
    let multi = queues > 1;
    let mut qs: Vec<SharedQueue> = Vec::with_capacity(queues as usize);
    // On error the queues opened so far close with `qs`, and the interface
    // goes with them.
    for i in 0..queues {
        let (fd, uso) = open_queue(name, multi, i == 0)?;
        qs.push(Arc::new(Mutex::new(TapQueue {
            fd,
            buf: vec![0u8; HDR + FRAME + 1].into_boxed_slice(),
            stats: QueueStats::default(),
            read_errors: 0,
            uso,
            gone: false,
        })));
    }
    let mac = stable_mac(name);
    iface::set_mac(name, mac)?;
    iface::set_up(name)?;
    tracing::debug!(ifname = name, queues, mac = ?mac, "TAP created");
    Ok(Tap {
        ifname: name.to_string(),
        queues: qs,
    })
}

/// The TAP's MAC address: locally administered, unicast, and the same
/// each time a TAP of this name is created in this network namespace on
/// this machine. A daemon that restarts (or is restarted after a crash)
/// brings its host port back with the address its neighbours have cached,
/// instead of a random one they keep sending to until their cache expires.
fn stable_mac(name: &str) -> [u8; 6] {
    // FNV-1a, 64 bits: not for secrecy, only to spread the inputs.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0000_0100_0000_01b3);
    };
    eat(std::fs::read("/etc/machine-id")
        .unwrap_or_default()
        .trim_ascii());
    // The calling thread's network namespace, where the TAP is created.
    let ns = std::fs::read_link("/proc/thread-self/ns/net").unwrap_or_default();
    eat(ns.as_os_str().as_encoded_bytes());
    eat(name.as_bytes());
    let b = h.to_be_bytes();
    [0x02, b[0], b[1], b[2], b[3], b[4]]
}

impl FrameQueue for TapQueue {
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken {
        let mut n = 0;
        while n < max {
            // SAFETY: reads at most buf.len() bytes into our own buffer.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EBADFD) && !self.gone {
                    self.gone = true;
                    tracing::warn!(
                        fd = self.fd.as_raw_fd(),
                        "the TAP's interface is gone (deleted, or its network namespace was): its queue stops"
                    );
                }
                if e.raw_os_error() != Some(libc::EAGAIN) {
                    self.read_errors += 1;
                    if self.read_errors == 1 {
                        tracing::warn!(fd = self.fd.as_raw_fd(), error = %e, "TAP read failed (logged once)");
                    }
                }
                break;
            }
            let len = r as usize;
            n += 1;
            if len >= self.buf.len() {
                // Longer than any frame a TAP should give: cut short.
                self.stats.kernel_rx_dropped += 1;
                continue;
            }
            // The TAP's virtio-net header is in the host's order (it was
            // not told otherwise with TUNSETVNETLE).
            let hdr = match OffloadHdr::from_ne_bytes(&self.buf[..len.min(HDR)]) {
                Ok(h) if len > HDR => h,
                _ => {
                    self.stats.rx_bad_hdr += 1;
                    continue;
                }
            };
            if !stage.put(&self.buf[HDR..len], hdr) {
                break;
            }
        }
        Taken {
            frames: n,
            ..Taken::default()
        }
    }

    fn has_work(&self) -> bool {
        let mut p = [poll::watch(self.fd.as_raw_fd(), libc::POLLIN)];
        // Readable only: a hung-up TAP is not work.
        matches!(poll::poll_fds(&mut p, Some(Duration::ZERO)), Ok(n) if n > 0)
            && p[0].revents & libc::POLLIN != 0
    }

    fn push(&mut self, hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError> {
        if frame.len() > FRAME {
            return Err(PushError::TooLong);
        }
        let mut h = [0u8; HDR];
        h[..OffloadHdr::LEN].copy_from_slice(&hdr.to_ne_bytes());
        let iov = [
            libc::iovec {
                iov_base: h.as_ptr() as *mut libc::c_void,
                iov_len: HDR,
            },
            libc::iovec {
                iov_base: frame.as_ptr() as *mut libc::c_void,
                iov_len: frame.len(),
            },
        ];
        // SAFETY: two iovecs over live buffers the kernel only reads.
        let r = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if r >= 0 {
            return Ok(());
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => Err(PushError::Full),
            // EBADFD: the interface is gone (see `gone`), down for good.
            Some(libc::EIO) | Some(libc::EBADFD) => Err(PushError::Down),
            _ => {
                self.stats.kernel_tx_invalid += 1;
                Ok(())
            }
        }
    }

    fn flush(&mut self) -> Wake {
        Wake::NONE
    }

    fn wake_fd(&self) -> Option<RawFd> {
        (!self.gone).then(|| self.fd.as_raw_fd())
    }

    fn caps(&self) -> Caps {
        Caps {
            csum: true,
            tso4: true,
            tso6: true,
            ecn: false,
            uso4: self.uso,
            uso6: self.uso,
        }
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }

    fn driver(&self) -> &'static str {
        Driver::Tap.as_str()
    }
}
