//! Unix SOCK_SEQPACKET sockets carrying one message per packet, with file
//! descriptors passed as SCM_RIGHTS: the one home of descriptor passing
//! ([`send_with_fds`], [`recv_with_fds`], also used on the daemon's
//! ivshmem stream sockets).

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

/// Tries a non-blocking stream connect to `path` and closes it at once:
/// `Ok` when something accepts connections there, the connect error
/// otherwise (see [`connect_nonblocking`]). Never waits on whoever is there.
pub fn probe_connect(path: &Path) -> io::Result<()> {
    connect_nonblocking(path).map(|_| ())
}

/// Starts connecting a new non-blocking unix stream socket (closed on
/// exec) to `path`, without waiting: the socket, with `true` when the
/// connection is still in progress (poll it for `POLLOUT`, then read
/// `SO_ERROR`); or the connect error (ECONNREFUSED: nothing listens;
/// EAGAIN: a listener with a full backlog; EPROTOTYPE: a listener of
/// another socket type).
pub fn connect_nonblocking(path: &Path) -> io::Result<(OwnedFd, bool)> {
    // SAFETY: socket() with constant arguments returns a new fd or -1.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return Err(last());
    }
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    match connect(fd.as_fd(), path) {
        Ok(()) => Ok((fd, false)),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok((fd, true)),
        Err(e) => Err(e),
    }
}

/// connect(2) of the unix socket `fd` to `path`.
fn connect(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    at_addr(fd, &sockaddr(path)?, libc::connect)
}

/// `call`, bind(2) or connect(2) (they take the same arguments), of the
/// unix socket `fd` with the address `addr` (from [`sockaddr`]).
fn at_addr(
    fd: BorrowedFd<'_>,
    &(addr, len): &(libc::sockaddr_un, libc::socklen_t),
    call: unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int,
) -> io::Result<()> {
    // SAFETY: bind or connect with a valid sockaddr_un of the stated
    // length, which lives across the call.
    if unsafe {
        call(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    } != 0
    {
        return Err(last());
    }
    Ok(())
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

/// Who is at the other end of a unix socket (SO_PEERCRED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id at connect time.
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// SO_PEERGROUPS (Linux 4.13), the same number on every architecture
/// ringswitch builds for.
const SO_PEERGROUPS: libc::c_int = 59;

/// Most supplementary groups read from a peer; a process in more groups is
/// judged on these (NGROUPS_MAX is 65536, but real accounts have a few).
pub const MAX_PEER_GROUPS: usize = 256;

fn peer_cred(fd: BorrowedFd<'_>) -> io::Result<PeerCred> {
    // SAFETY: ucred is plain data; all-zero is a valid value.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `c`, which is that
    // large.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(last());
    }
    Ok(PeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
    })
}

/// The effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Whether a client may trust a daemon running as `uid`: root, the client's
/// own uid, or the uid named in `RINGSWITCH_DAEMON_UID`. Anyone else could
/// have bound the path first to answer in the daemon's place.
pub fn trusted_daemon_uid(uid: u32) -> bool {
    uid == 0
        || uid == euid()
        || std::env::var("RINGSWITCH_DAEMON_UID")
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
            .is_some_and(|u| u == uid)
}

/// Room for the control message of [`MAX_FDS`] descriptors (192 bytes,
/// aligned for `cmsghdr`).
type ControlBuffer = [u64; 24];

/// Sends `data` with `fds` attached (SCM_RIGHTS, at most [`MAX_FDS`]) on
/// the connected unix socket `sock`, in one sendmsg(2) with `flags` (pass
/// `MSG_NOSIGNAL`: a peer that went away is an error, not a signal),
/// retried when a signal interrupts it. Returns the bytes sent: all of
/// them on a datagram socket, possibly fewer on a stream (the descriptors
/// go with the first byte).
pub fn send_with_fds(
    sock: BorrowedFd<'_>,
    data: &[u8],
    fds: &[BorrowedFd<'_>],
    flags: libc::c_int,
) -> io::Result<usize> {
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
    let mut cbuf: ControlBuffer = [0; 24];
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
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, flags) };
        if n < 0 {
            let e = last();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(n as usize);
    }
}

/// Receives one message into `buf` from the unix socket `sock`, with up to
/// [`MAX_FDS`] descriptors (SCM_RIGHTS, made close-on-exec), retrying when
/// a signal interrupts the call.
pub fn recv_with_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Message> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf: ControlBuffer = [0; 24];
    // SAFETY: msghdr is plain data; zeroed is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let n = loop {
        // SAFETY: msg describes buffers we own for the duration of the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
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

/// A connected seqpacket socket.
#[derive(Debug)]
pub struct SeqPacket(OwnedFd);

impl SeqPacket {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> io::Result<SeqPacket> {
        let fd = new_socket()?;
        connect(fd.as_fd(), path)?;
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
        // One datagram: it goes whole or not at all.
        send_with_fds(self.0.as_fd(), data, fds, flags).map(|_| ())
    }

    /// Receives one message into `buf`, with up to `MAX_FDS` descriptors.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Message> {
        recv_with_fds(self.0.as_fd(), buf)
    }

    /// Makes calls on this socket fail with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self) -> io::Result<()> {
        // SAFETY: fcntl on our own fd.
        let flags = unsafe { libc::fcntl(self.0.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 {
            return Err(last());
        }
        // SAFETY: fcntl on our own fd with the flags it returned plus one.
        if unsafe { libc::fcntl(self.0.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } != 0
        {
            return Err(last());
        }
        Ok(())
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

    /// The credentials of the process at the other end, as the kernel
    /// recorded them when the connection was made (SO_PEERCRED).
    pub fn peer_cred(&self) -> io::Result<PeerCred> {
        peer_cred(self.0.as_fd())
    }

    /// The supplementary groups of the process at the other end, as the
    /// kernel recorded them when the connection was made (SO_PEERGROUPS),
    /// at most [`MAX_PEER_GROUPS`].
    pub fn peer_groups(&self) -> io::Result<Vec<u32>> {
        let mut groups = vec![0 as libc::gid_t; MAX_PEER_GROUPS];
        let mut len = std::mem::size_of_val(groups.as_slice()) as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `groups`, which
        // holds that many, and updates `len` to what it wrote.
        let r = unsafe {
            libc::getsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(last());
        }
        groups.truncate(len as usize / std::mem::size_of::<libc::gid_t>());
        Ok(groups)
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
    /// (device, inode) of the socket file bound: only that file is removed
    /// on drop.
    id: (u64, u64),
}

/// Who may open a socket file: its mode, and the group it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketAccess {
    /// Permission bits (0600: the owner only; 0660: and the group).
    pub mode: u32,
    /// The group the file is given, if not the daemon's own.
    pub gid: Option<u32>,
}

impl SocketAccess {
    /// The owner alone (0600).
    pub const OWNER: SocketAccess = SocketAccess {
        mode: 0o600,
        gid: None,
    };
}

/// Binds `fd` at `path` so that the file never has more permissions than
/// `access` allows, not even for a moment: the socket inode's mode is set
/// before bind (Linux creates the file with it, less the umask), then the
/// file gets exactly `access`. Returns the file's (device, inode).
pub fn bind_with_mode(
    fd: BorrowedFd<'_>,
    path: &Path,
    access: SocketAccess,
) -> io::Result<(u64, u64)> {
    let addr = sockaddr(path)?;
    let mode = access.mode & 0o777;
    // SAFETY: fchmod on our own socket fd; it sets the mode bind() gives the file.
    if unsafe { libc::fchmod(fd.as_raw_fd(), mode) } != 0 {
        return Err(last());
    }
    at_addr(fd, &addr, libc::bind)?;
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    let id = (m.dev(), m.ino());
    let set = || -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path has a NUL byte"))?;
        if let Some(gid) = access.gid {
            // SAFETY: lchown with a NUL-terminated path; -1 keeps the owner.
            if unsafe { libc::lchown(c.as_ptr(), u32::MAX, gid) } != 0 {
                return Err(last());
            }
        }
        // The umask may have taken bits away: give the file exactly `mode`.
        // SAFETY: chmod with a NUL-terminated path.
        if unsafe { libc::chmod(c.as_ptr(), mode) } != 0 {
            return Err(last());
        }
        Ok(())
    };
    if let Err(e) = set() {
        unlink_if_same(path, id);
        return Err(e);
    }
    Ok(id)
}

/// Removes `path` if it still is the file `id` (device, inode): never a
/// file someone else put there since.
pub fn unlink_if_same(path: &Path, id: (u64, u64)) -> bool {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if (m.dev(), m.ino()) == id => std::fs::remove_file(path).is_ok(),
        _ => false,
    }
}

impl Listener {
    /// Binds `path` with the mode and group of `access`, creating missing
    /// parent directories with mode 0700. Nothing already at the path is
    /// removed: whatever is there is an `AddrInUse` error (the daemon
    /// decides beforehand whether a stale socket may go, see
    /// `ringswitch_daemon::listen`).
    pub fn bind(path: &Path, access: SocketAccess) -> io::Result<Listener> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                use std::os::unix::fs::DirBuilderExt;
                // Private, but whoever may open the socket may reach it.
                let m = access.mode;
                let dir_mode = 0o700
                    | if m & 0o070 != 0 { 0o010 } else { 0 }
                    | if m & 0o007 != 0 { 0o001 } else { 0 };
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(dir_mode)
                    .create(dir)?;
            }
        }
        let fd = new_socket()?;
        let id = bind_with_mode(fd.as_fd(), path, access)?;
        // SAFETY: listen on our bound socket; then fcntl on it: accept
        // never waits for a client that went away after poll saw it.
        let ok = unsafe {
            libc::listen(fd.as_raw_fd(), 64) == 0
                && libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) == 0
        };
        if !ok {
            let e = last();
            unlink_if_same(path, id);
            return Err(e);
        }
        Ok(Listener {
            fd,
            path: path.to_path_buf(),
            id,
        })
    }

    /// The device and inode of the socket file this listener created.
    pub fn file_id(&self) -> (u64, u64) {
        self.id
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
        unlink_if_same(&self.path, self.id);
    }
}

/// The socket path when none is given: `$RINGSWITCH_SOCKET`, else
/// `/run/ringswitch/ringswitch.sock` for root, else
/// `$XDG_RUNTIME_DIR/ringswitch.sock`, else `ringswitch.sock` in the
/// private directory `/tmp/ringswitch-<uid>` (see [`private_dir`]).
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("RINGSWITCH_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let uid = euid();
    if uid == 0 {
        return PathBuf::from("/run/ringswitch/ringswitch.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(d) => PathBuf::from(d).join("ringswitch.sock"),
        None => fallback_dir(uid).join("ringswitch.sock"),
    }
}

/// The private directory of the fallback socket path of `uid`.
pub fn fallback_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/ringswitch-{uid}"))
}

/// Makes sure `dir` is a directory only this user can enter: created with
/// mode 0700 if missing; refused if it is a symbolic link, not a
/// directory, or owned by someone else (another user may have created it
/// first to put their own socket in it); its mode tightened to 0700 if
/// looser.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::symlink_metadata(dir)?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} {why}, so it is not a private directory: remove it, or set XDG_RUNTIME_DIR or use --socket",
                dir.display()
            ),
        ))
    };
    if m.file_type().is_symlink() {
        return refuse("is a symbolic link".into());
    }
    if !m.is_dir() {
        return refuse("is not a directory".into());
    }
    if m.uid() != euid() {
        return refuse(format!("belongs to uid {}, not to uid {}", m.uid(), euid()));
    }
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
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

    #[test]
    fn passes_fds_on_a_stream_socket() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = ringswitch_ring::EventFd::new().unwrap();
        let n = send_with_fds(
            a.as_fd(),
            &7i64.to_le_bytes(),
            &[e.as_fd()],
            libc::MSG_NOSIGNAL,
        )
        .unwrap();
        assert_eq!(n, 8);
        let mut buf = [0u8; 8];
        let m = recv_with_fds(b.as_fd(), &mut buf).unwrap();
        assert_eq!((m.len, i64::from_le_bytes(buf)), (8, 7));
        assert_eq!(m.fds.len(), 1);
        let too_many = vec![e.as_fd(); MAX_FDS + 1];
        assert!(send_with_fds(a.as_fd(), b"x", &too_many, libc::MSG_NOSIGNAL).is_err());
    }
}
