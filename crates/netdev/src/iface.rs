//! Interface helpers shared by the drivers: names, indexes, queues, flags.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::DevError;

/// `IFNAMSIZ`: names are at most 15 bytes.
pub const IFNAMSIZ: usize = libc::IFNAMSIZ;

/// Checks the ring size asked for `name`: a power of two in `sizes`.
/// `rings` names the rings and `unit` what they hold, for the message
/// ("AF_XDP rings", "descriptors").
pub(crate) fn check_ring_size(
    name: &str,
    ring: u32,
    sizes: std::ops::RangeInclusive<u32>,
    rings: &str,
    unit: &str,
) -> Result<(), DevError> {
    if ring.is_power_of_two() && sizes.contains(&ring) {
        return Ok(());
    }
    Err(DevError::Unsupported {
        name: name.to_string(),
        what: "that ring size",
        why: format!(
            "{rings} hold a power of two from {} to {} {unit}, not {ring}",
            sizes.start(),
            sizes.end()
        ),
    })
}

/// Checks a name as the kernel would (`dev_valid_name`).
pub fn validate_name(name: &str) -> Result<(), DevError> {
    let bad = |why| {
        Err(DevError::BadName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() >= IFNAMSIZ {
        return bad("interface names are at most 15 bytes");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not interface names");
    }
    if name.bytes().any(|b| b == 0) {
        return bad("it contains a NUL byte");
    }
    // The kernel's isspace() also takes the vertical tab.
    if name
        .bytes()
        .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0x0b)
    {
        return bad("it contains '/', ':' or a space");
    }
    Ok(())
}

fn cname(name: &str) -> Result<CString, DevError> {
    validate_name(name)?;
    Ok(CString::new(name).expect("validate_name refuses NUL bytes"))
}

/// The interface's index.
pub fn ifindex(name: &str) -> Result<u32, DevError> {
    let c = cname(name)?;
    // SAFETY: `c` is a valid NUL-terminated string for the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(DevError::NoSuchInterface {
            name: name.to_string(),
        });
    }
    Ok(i)
}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// Receive queues the interface has (RX plus combined channels); at least 1.
///
/// Asks the driver (the ethtool channels request, answered in the calling
/// thread's network namespace); for a driver without channels, counts
/// `/sys/class/net/NAME/queues/rx-*`, which shows the namespace sysfs was
/// mounted in: an interface only found elsewhere counts as one queue.
pub fn rx_queue_count(name: &str) -> Result<u32, DevError> {
    match channel_rx_queues(name)? {
        Some(n) => Ok(n),
        None => sysfs_rx_queues(name),
    }
}

/// RX plus combined channels (at least 1) from the ethtool channels
/// request, answered in the calling thread's network namespace; `None`
/// for a driver without channels.
pub(crate) fn channel_rx_queues(name: &str) -> Result<Option<u32>, DevError> {
    let s = ctl_socket()?;
    let mut r = ifreq(name)?;
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    r.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
    // SAFETY: SIOCETHTOOL reads the name and the command, and writes the
    // channels struct `r` points to; both live across the call.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL, &mut r) } == 0 {
        return Ok(Some((ch.rx_count + ch.combined_count).max(1)));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENODEV) => Err(DevError::NoSuchInterface {
            name: name.to_string(),
        }),
        Some(libc::EOPNOTSUPP) => Ok(None),
        _ => Err(DevError::io(
            format!("reading the channels of {name}"),
            "CAP_NET_ADMIN",
            e,
        )),
    }
}

/// `struct ethtool_drvinfo`.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

const ETHTOOL_GDRVINFO: u32 = 0x03;

/// Where an interface's frames come from, as far as offloads go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feed {
    /// A device on a bus (`ethtool -i`'s bus-info names it: a PCI
    /// address, a virtio device): frames arrive from a wire, whole and
    /// with finished checksums, before the stack's GRO.
    Device {
        /// The kernel driver ("virtio_net", "ixgbe").
        driver: String,
    },
    /// A software interface (veth, bridge, macvlan, vxlan, tun; bus-info
    /// empty, "N/A" or "tap", or no driver information at all): its frames
    /// come from a local network stack, which hands over GSO frames and
    /// partial checksums while the sender keeps its default offloads.
    Software {
        /// The kernel driver, or "unknown" when it does not say.
        driver: String,
    },
}

/// What drives `name` (the ethtool driver-information request, answered in
/// the calling thread's network namespace).
pub fn feed(name: &str) -> Result<Feed, DevError> {
    let s = ctl_socket()?;
    let mut r = ifreq(name)?;
    // SAFETY: ethtool_drvinfo is plain data; all zeroes is a valid value.
    let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    r.ifr_ifru.ifru_data = (&mut info as *mut EthtoolDrvinfo).cast();
    // SAFETY: SIOCETHTOOL reads the name and the command, and writes at
    // most the drvinfo struct `r` points to; both live across the call.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL, &mut r) } != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            // Drivers without the request (dummy, loopback) are software.
            Some(libc::EOPNOTSUPP) => Ok(Feed::Software {
                driver: "unknown".into(),
            }),
            _ => Err(no_such_or(name, "reading the driver of", e)),
        };
    }
    // The kernel's strings are NUL-terminated within their arrays; a
    // string without a NUL is taken whole.
    let text = |b: &[u8]| {
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let driver = text(&info.driver);
    let bus = text(&info.bus_info);
    Ok(match bus.as_str() {
        "" | "N/A" | "tap" => Feed::Software { driver },
        _ => Feed::Device { driver },
    })
}

/// `/sys/class/net/NAME/queues/rx-*` counted (at least 1). Sysfs shows the
/// namespace it was mounted in: an interface only found elsewhere (by
/// index, in the calling thread's namespace) counts as one queue; one
/// found nowhere is [`DevError::NoSuchInterface`].
pub(crate) fn sysfs_rx_queues(name: &str) -> Result<u32, DevError> {
    let dir = format!("/sys/class/net/{name}/queues");
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            ifindex(name)?;
            return Ok(1);
        }
        Err(e) => {
            return Err(DevError::Io {
                what: format!("reading {dir}"),
                source: e,
            })
        }
    };
    let n = crate::conv::u32_of(
        rd.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count(),
    );
    Ok(n.max(1))
}

/// A datagram socket for interface ioctls.
fn ctl_socket() -> Result<OwnedFd, DevError> {
    // SAFETY: socket() with constant arguments returns a new fd or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(DevError::Io {
            what: "opening a socket for interface requests".into(),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifreq(name: &str) -> Result<libc::ifreq, DevError> {
    let c = cname(name)?;
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(c.as_bytes()) {
        *d = *s as libc::c_char;
    }
    Ok(r)
}

/// ENODEV as [`DevError::NoSuchInterface`], anything else as `Io`.
fn no_such_or(name: &str, doing: &str, e: io::Error) -> DevError {
    match e.raw_os_error() {
        Some(libc::ENODEV) => DevError::NoSuchInterface {
            name: name.to_string(),
        },
        _ => DevError::Io {
            what: format!("{doing} {name}"),
            source: e,
        },
    }
}

fn flags(name: &str) -> Result<(OwnedFd, libc::ifreq), DevError> {
    get_request(name, libc::SIOCGIFFLAGS, "reading the flags of")
}

/// Interface request `req` for `name`, one of the SIOCGIF* requests that
/// read the name and fill a member of the request's union; returns the
/// socket (for a request that follows) and the filled request. `doing` is
/// what the request is for, in an error.
fn get_request(
    name: &str,
    req: libc::Ioctl,
    doing: &str,
) -> Result<(OwnedFd, libc::ifreq), DevError> {
    let s = ctl_socket()?;
    let mut r = ifreq(name)?;
    // SAFETY: `req` reads the name and writes a member of the union of
    // `r`, which lives across the call.
    if unsafe { libc::ioctl(s.as_raw_fd(), req, &mut r) } < 0 {
        return Err(no_such_or(name, doing, io::Error::last_os_error()));
    }
    Ok((s, r))
}

/// IFF_UP in the 16-bit flags member of `ifreq`.
fn iff_up() -> libc::c_short {
    libc::c_short::try_from(libc::IFF_UP).unwrap_or_default()
}

/// Whether the interface is administratively up.
pub fn is_up(name: &str) -> Result<bool, DevError> {
    let (_, r) = flags(name)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let f = unsafe { r.ifr_ifru.ifru_flags };
    Ok(f & iff_up() != 0)
}

/// Sets the interface up.
pub fn set_up(name: &str) -> Result<(), DevError> {
    let (s, mut r) = flags(name)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union; we set a
    // bit in it and hand the same struct back.
    unsafe {
        r.ifr_ifru.ifru_flags |= iff_up();
        if libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &r) < 0 {
            return Err(DevError::io(
                format!("setting {name} up"),
                "CAP_NET_ADMIN",
                io::Error::last_os_error(),
            ));
        }
    }
    Ok(())
}

/// Sets the interface's MAC address (it must be down for most drivers).
pub fn set_mac(name: &str, mac: [u8; 6]) -> Result<(), DevError> {
    let s = ctl_socket()?;
    let mut r = ifreq(name)?;
    // SAFETY: sockaddr is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr = unsafe { std::mem::zeroed() };
    sa.sa_family = libc::ARPHRD_ETHER;
    for (d, s) in sa.sa_data.iter_mut().zip(mac) {
        *d = s as libc::c_char;
    }
    r.ifr_ifru.ifru_hwaddr = sa;
    // SAFETY: SIOCSIFHWADDR reads the name and the address of `r`, which
    // lives across the call.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFHWADDR, &r) } < 0 {
        return Err(match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ENODEV) => DevError::NoSuchInterface {
                name: name.to_string(),
            },
            e => DevError::io(
                format!("setting the MAC address of {name}"),
                "CAP_NET_ADMIN",
                e,
            ),
        });
    }
    Ok(())
}

/// The interface's MTU.
pub fn mtu(name: &str) -> Result<u32, DevError> {
    let (_, r) = get_request(name, libc::SIOCGIFMTU, "reading the MTU of")?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("eth0").is_ok());
        assert!(validate_name("eth0^").is_ok());
        for bad in [
            "",
            "a/b",
            "a:b",
            "a b",
            "a\tb",
            "a\x0bb",
            "a\0b",
            ".",
            "..",
            "sixteen-chars-xx",
        ] {
            assert!(
                matches!(validate_name(bad), Err(DevError::BadName { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            ifindex("rs-no-such0"),
            Err(DevError::NoSuchInterface { .. })
        ));
        assert_eq!(ifindex("lo").unwrap(), 1);
        assert!(is_up("lo").unwrap());
        assert!(mtu("lo").unwrap() >= 1500);
        assert!(rx_queue_count("lo").unwrap() >= 1);
        for r in [
            rx_queue_count("rs-no-such0").map(|_| ()),
            mtu("rs-no-such0").map(|_| ()),
            is_up("rs-no-such0").map(|_| ()),
            set_up("rs-no-such0"),
        ] {
            assert!(matches!(r, Err(DevError::NoSuchInterface { .. })), "{r:?}");
        }
        assert!(matches!(mtu("a/b"), Err(DevError::BadName { .. })));
    }
}
