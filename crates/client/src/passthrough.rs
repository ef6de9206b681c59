//! The passthrough transport: inside a VM whose QEMU has a port's region on
//! an `ivshmem-doorbell` device, the guest driver `ringswitch_pt`
//! (guest/ringswitch_pt) exposes each such device as `/dev/rsptN`. Opening a
//! port by name with no daemon to talk to looks for the device whose region
//! holds that port, maps it, and drives the rings exactly as on the host:
//! the CSB for head and tail, the device's doorbell register instead of a
//! kick eventfd, and the device's interrupts (one MSI-X vector per ring
//! pair) instead of interrupt eventfds.
//!
//! The uapi of the driver (guest/ringswitch_pt/rspt.h): `RSPT_IOC_INFO`
//! fills `struct rspt_info { u64 mem_size; u32 ivposition; u32 vectors }`;
//! `RSPT_IOC_KICK` writes a `u32` (`peer << 16 | vector`) to the doorbell;
//! `read` of 8 bytes returns (and clears) the vectors that fired since this
//! open file last read, `poll` reports POLLIN while that set is not empty.
//! The host is peer 0; the guest is peer `1 + end` of its port's region,
//! except on a switch port the daemon made migratable (`port add
//! --migratable`): there QEMU's `master=on` wants the guest to be peer 0,
//! so the guest is peer 0 (end 0) and the daemon peer 1.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringswitch_ring::{EventFd, Region};

use crate::ClientError;

/// `_IOR('r', 1, struct rspt_info)`.
pub const RSPT_IOC_INFO: u64 = 0x8010_7201;
/// `_IOW('r', 2, __u32)`.
pub const RSPT_IOC_KICK: u64 = 0x4004_7202;

/// What `RSPT_IOC_INFO` reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RsptInfo {
    /// Bytes of shared memory (the BAR).
    pub mem_size: u64,
    /// This guest's ivshmem peer id.
    pub ivposition: u32,
    /// MSI-X vectors.
    pub vectors: u32,
}

/// One open passthrough device.
pub struct Device {
    fd: OwnedFd,
    path: PathBuf,
    info: RsptInfo,
}

fn open_path(path: &Path, nonblock: bool) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let flags = libc::O_RDWR | libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 };
    // SAFETY: open with a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Device {
    /// Opens a device and asks for its figures.
    pub fn open(path: &Path) -> std::io::Result<Device> {
        let fd = open_path(path, false)?;
        let mut info = RsptInfo::default();
        // SAFETY: RSPT_IOC_INFO writes one rspt_info into `info`.
        let r = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                RSPT_IOC_INFO as _,
                &mut info as *mut RsptInfo,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Device {
            fd,
            path: path.to_path_buf(),
            info,
        })
    }

    /// Its figures.
    pub fn info(&self) -> RsptInfo {
        self.info
    }

    /// The end of the region that is this guest's: peer `1 + end`, or end
    /// 0 for peer 0 (a migratable switch port).
    pub fn end(&self) -> usize {
        self.info.ivposition.saturating_sub(1) as usize
    }

    /// The peer id of the daemon on a switch port: 0, or 1 when the guest
    /// is peer 0 (a migratable port).
    pub fn host_peer(&self) -> u32 {
        u32::from(self.info.ivposition == 0)
    }

    /// Rings the doorbell: `value` is `peer << 16 | vector`.
    #[inline]
    pub fn kick(&self, value: u32) {
        let v = value;
        // SAFETY: RSPT_IOC_KICK reads one u32. A failure (a vector the
        // device does not have) loses only this wake-up; the driver logs it.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), RSPT_IOC_KICK as _, &v as *const u32) };
    }

    /// A new open file on the device, non-blocking: its interrupts as an
    /// `EventFd` (poll for input, read to clear). Each open file has its own
    /// set of fired vectors, so two of them never take each other's.
    pub fn interrupts(&self) -> std::io::Result<EventFd> {
        Ok(EventFd::from_fd(open_path(&self.path, true)?))
    }

    /// The region on the device.
    pub fn region(&self) -> Result<Region, ClientError> {
        let fd = open_path(&self.path, false)?;
        Ok(Region::open_device(fd, self.info.mem_size as usize)?)
    }
}

/// The passthrough devices of this machine.
pub fn devices() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/dev")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with("rspt") && n[4..].bytes().all(|b| b.is_ascii_digit())
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The device holding port `name`, its region, and the end of the region
/// that is this guest's: `name` is matched against the `ni_name` netmap
/// gives that end (the port's name, cut to 15 bytes).
pub fn find(name: &str) -> Option<(Arc<Device>, Region, usize)> {
    let want = ringswitch_control::name::base_name(name);
    let want = &want.as_bytes()[..want.len().min(15)];
    for path in devices() {
        let Ok(dev) = Device::open(&path) else {
            continue;
        };
        let Ok(region) = dev.region() else { continue };
        let end = dev.end();
        if end >= region.layout().ends as usize {
            continue;
        }
        let n = region.ni_name(end);
        if n.as_slice() == want {
            return Some((Arc::new(dev), region, end));
        }
    }
    None
}
