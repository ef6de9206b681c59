//! Unix SOCK_SEQPACKET sockets carrying one message per packet, with file
//! descriptors passed as SCM_RIGHTS.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::proto::{MAX_FDS, MAX_MESSAGE, MAX_REPLY};

fn last() -> io::Error {
    io::Error::last_os_error()
}

fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the socket path is too long",
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

fn new_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() with constant arguments returns a new fd or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A received message.
#[derive(Debug)]
pub struct Message {
    /// Bytes received (0 means the peer hung up).
    pub len: usize,
    /// Descriptors that came with it.
    pub fds: Vec<OwnedFd>,
    /// The message was longer than the buffer.
    pub truncated: bool,
    /// More descriptors came than fit (the excess were closed by the kernel).
    pub fds_truncated: bool,
}

/// A connected seqpacket socket.
#[derive(Debug)]
pub struct SeqPacket(OwnedFd);

impl SeqPacket {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> io::Result<SeqPacket> {
        let fd = new_socket()?;
        let (addr, len) = sockaddr(path)?;
        // SAFETY: connect with a valid sockaddr_un of the stated length.
        if unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        } != 0
        {
            return Err(last());
        }
        Ok(SeqPacket(fd))
    }

    /// A connected pair (for tests and embedding).
    pub fn pair() -> io::Result<(SeqPacket, SeqPacket)> {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two fds into the array.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        } != 0
        {
            return Err(last());
        }
        // SAFETY: both fds are fresh and owned by nobody else.
        Ok(unsafe {
            (
                SeqPacket(OwnedFd::from_raw_fd(fds[0])),
                SeqPacket(OwnedFd::from_raw_fd(fds[1])),
            )
        })
    }

    /// Sends one message with `fds` attached, waiting for room if the
    /// peer's queue is full.
    pub fn send(&self, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_flags(data, fds, libc::MSG_NOSIGNAL)
    }

    /// Sends one message, failing with `WouldBlock` instead of waiting when
    /// the peer's queue is full.
    pub fn try_send(&self, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_flags(data, fds, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
    }

    fn send_flags(
        &self,
        data: &[u8],
        fds: &[BorrowedFd<'_>],
        flags: libc::c_int,
    ) -> io::Result<()> {
        if fds.len() > MAX_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many descriptors for one message",
            ));
        }
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut cbuf = [0u64; 24]; // 192 bytes, aligned for cmsghdr: MAX_FDS fds
                                   // SAFETY: msghdr is plain data; zeroed is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let payload = std::mem::size_of_val(fds) as u32;
            // SAFETY: CMSG_SPACE is a pure size computation.
            let space = unsafe { libc::CMSG_SPACE(payload) } as usize;
            assert!(space <= std::mem::size_of_val(&cbuf));
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = space;
            // SAFETY: msg_control points at `space` bytes we own; CMSG_FIRSTHDR
            // returns a pointer inside it, and CMSG_DATA room for `payload`
            // bytes was reserved by CMSG_SPACE.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(payload) as usize;
                let d = libc::CMSG_DATA(c).cast::<RawFd>();
                for (i, f) in fds.iter().enumerate() {
                    d.add(i).write_unaligned(f.as_raw_fd());
                }
            }
        }
        loop {
            // SAFETY: msg describes valid buffers for the duration of the call.
            let n = unsafe { libc::sendmsg(self.0.as_raw_fd(), &msg, flags) };
            if n < 0 {
                let e = last();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            return Ok(());
        }
    }

    /// Receives one message into `buf`, with up to `MAX_FDS` descriptors.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Message> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut cbuf = [0u64; 24];
        // SAFETY: msghdr is plain data; zeroed is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf);
        let n = loop {
            // SAFETY: msg describes buffers we own for the duration of the call.
            let n = unsafe { libc::recvmsg(self.0.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n < 0 {
                let e = last();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            break n as usize;
        };
        let mut fds = Vec::new();
        // SAFETY: walking the control buffer the kernel filled, with the
        // CMSG_* helpers that stay within msg_controllen.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    let count =
                        ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        // Each received fd is new in this process and ours.
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(Message {
            len: n.min(buf.len()),
            fds,
            truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
            fds_truncated: msg.msg_flags & libc::MSG_CTRUNC != 0,
        })
    }

    /// Sets a receive timeout.
    pub fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        let tv = match t {
            Some(d) => libc::timeval {
                tv_sec: d.as_secs() as _,
                tv_usec: d.subsec_micros() as _,
            },
            None => libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            },
        };
        // SAFETY: setsockopt with a timeval of the right size.
        let r = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        if r != 0 {
            return Err(last());
        }
        Ok(())
    }

    /// A buffer of the largest accepted request size plus one byte, so that
    /// an oversized request shows up as truncated.
    pub fn message_buffer() -> Vec<u8> {
        vec![0u8; MAX_MESSAGE + 1]
    }

    /// A buffer for replies, which may be larger than requests (a long port
    /// list); bounded by what the kernel lets one datagram carry.
    pub fn reply_buffer() -> Vec<u8> {
        vec![0u8; MAX_REPLY]
    }
}

impl AsFd for SeqPacket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// A listening seqpacket socket bound to a path.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    path: PathBuf,
}

impl Listener {
    /// Binds `path` with mode 0660. A stale socket file nobody listens on is
    /// replaced; a live one is an `AddrInUse` error.
    pub fn bind(path: &Path) -> io::Result<Listener> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        if path.exists() {
            match SeqPacket::connect(path) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("a daemon is already listening on {}", path.display()),
                    ))
                }
                Err(_) => std::fs::remove_file(path)?,
            }
        }
        let fd = new_socket()?;
        let (addr, len) = sockaddr(path)?;
        // SAFETY: bind with a valid sockaddr_un of the stated length.
        if unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        } != 0
        {
            return Err(last());
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
        // SAFETY: listen on our bound socket.
        if unsafe { libc::listen(fd.as_raw_fd(), 64) } != 0 {
            return Err(last());
        }
        Ok(Listener {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Accepts one connection.
    pub fn accept(&self) -> io::Result<SeqPacket> {
        loop {
            // SAFETY: accept4 on our listening socket, no address wanted.
            let fd = unsafe {
                libc::accept4(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                let e = last();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: fresh fd from accept4.
            return Ok(SeqPacket(unsafe { OwnedFd::from_raw_fd(fd) }));
        }
    }

    /// The bound path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The socket path when none is given: `$RINGSWITCH_SOCKET`, else
/// `/run/ringswitch/ringswitch.sock` for root, else
/// `$XDG_RUNTIME_DIR/ringswitch.sock` (or `/tmp/ringswitch-<uid>.sock`).
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("RINGSWITCH_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/ringswitch/ringswitch.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(d) => PathBuf::from(d).join("ringswitch.sock"),
        None => PathBuf::from(format!("/tmp/ringswitch-{uid}.sock")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_fds_and_detects_truncation() {
        let (a, b) = SeqPacket::pair().unwrap();
        let e = ringswitch_ring::EventFd::new().unwrap();
        a.send(b"hello", &[e.as_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let m = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"hello");
        assert_eq!(m.fds.len(), 1);
        assert!(!m.truncated);
        a.send(&[7u8; 32], &[]).unwrap();
        let m = b.recv(&mut buf).unwrap();
        assert!(m.truncated);
        drop(a);
        let m = b.recv(&mut buf).unwrap();
        assert_eq!(m.len, 0, "hang-up reads as an empty message");
    }
}
