//! The netmap emulation's request handling, through the C interface a
//! netmap program uses (this process links the library, whose `open`,
//! `ioctl`, `mmap`, `poll` and `close` take over `/dev/netmap`), against an
//! in-process daemon: NIOCCTRL headers and bodies (any version, request
//! type, name bytes, option pointer), legacy NIOCREGIF/NIOCGINFO requests,
//! syncs with ring pointers the program scribbled, and port specs for
//! `nmport_*`. Requests get an errno or a result, never a panic.
#![no_main]

use std::ffi::CString;
use std::mem::{offset_of, size_of};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ringswitch_fuzz::{daemon_socket, reset_daemon, safe_name};
use ringswitch_netmap::abi::{self, Nmreq, NmreqHeader, NmreqPortInfo, NmreqRegister};
use ringswitch_netmap::nmport::parse_spec;
use ringswitch_ring::layout::{NetmapIfHeader, NetmapRingHeader, NIFP_RING_OFS_OFFSET};

#[derive(Arbitrary, Debug)]
struct Name {
    text: String,
    conf: u8,
    /// Leave no NUL terminator.
    unterminated: bool,
}

impl Name {
    fn bytes<const N: usize>(&self) -> [u8; N] {
        let s = safe_name(&self.text, self.conf);
        let mut out = [0u8; N];
        let b = s.as_bytes();
        let n = b.len().min(N);
        out[..n].copy_from_slice(&b[..n]);
        if self.unterminated {
            out.iter_mut().filter(|c| **c == 0).for_each(|c| *c = b'a');
        } else if n == N {
            out[N - 1] = 0;
        }
        out
    }
}

#[derive(Arbitrary, Debug)]
enum Body {
    Null,
    Register {
        mode: u32,
        ringid: u16,
        flags: u64,
        slots: u32,
        rings: u16,
        extra: u32,
    },
    PortInfo,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Ctrl {
        version: u16,
        reqtype: u16,
        name: Name,
        options: bool,
        body: Body,
    },
    Legacy {
        info: bool,
        name: Name,
        version: u32,
        ringid: u16,
        flags: u32,
        cmd: u16,
        arg1: u16,
        arg3: u32,
    },
    TxSync,
    RxSync,
    /// Writes head/cur/tail of ring `ring` in the mapping, then syncs.
    Pointers {
        ring: u8,
        rx: bool,
        head: u32,
        cur: u32,
        tail: u32,
    },
    Poll {
        events: i16,
    },
    Spec(String),
    BadIoctl(u32),
}

/// A request body as large as the largest the emulation reads.
#[repr(C)]
union AnyBody {
    reg: NmreqRegister,
    info: NmreqPortInfo,
}

struct Mapped {
    base: *mut u8,
    len: usize,
    nifp: usize,
}

fuzz_target!(|ops: Vec<Op>| {
    daemon_socket();
    // SAFETY: a constant C string; the emulation answers for /dev/netmap.
    let fd = unsafe { libc::open(c"/dev/netmap".as_ptr(), libc::O_RDWR) };
    assert!(
        fd >= 0,
        "the emulation opens /dev/netmap: {}",
        std::io::Error::last_os_error()
    );
    let mut map: Option<Mapped> = None;
    for op in ops.iter().take(32) {
        match op {
            Op::Ctrl {
                version,
                reqtype,
                name,
                options,
                body,
            } => {
                // Room for whichever body the request type names (C
                // callers must pass that one; the type is fuzz-chosen).
                let mut any = AnyBody {
                    reg: NmreqRegister::default(),
                };
                let body_ptr = match body {
                    Body::Null => 0,
                    Body::Register {
                        mode,
                        ringid,
                        flags,
                        slots,
                        rings,
                        extra,
                    } => {
                        any.reg = NmreqRegister {
                            nr_mode: *mode,
                            nr_ringid: *ringid,
                            nr_flags: *flags,
                            nr_tx_slots: *slots,
                            nr_rx_slots: *slots,
                            nr_tx_rings: *rings,
                            nr_rx_rings: *rings,
                            nr_extra_bufs: *extra,
                            ..NmreqRegister::default()
                        };
                        &mut any as *mut AnyBody as u64
                    }
                    Body::PortInfo => {
                        any.info = NmreqPortInfo::default();
                        &mut any as *mut AnyBody as u64
                    }
                };
                let mut h = NmreqHeader {
                    nr_version: if *version == 0 {
                        abi::NETMAP_API
                    } else {
                        *version
                    },
                    nr_reqtype: *reqtype % 20,
                    nr_reserved: 0,
                    nr_name: name.bytes(),
                    nr_options: u64::from(*options),
                    nr_body: body_ptr,
                };
                // SAFETY: the header and the body it points to (or 0, as large
                // as any body) live across the call; an options value of 1 is
                // never followed (the emulation refuses options before reading them).
                let r = unsafe { libc::ioctl(fd, abi::NIOCCTRL, &mut h as *mut NmreqHeader) };
                if r == 0 && h.nr_reqtype == abi::req::REGISTER && map.is_none() {
                    // SAFETY: a REGISTER that succeeded wrote a whole register body.
                    let reg = unsafe { any.reg };
                    let len = reg.nr_memsize as usize;
                    // SAFETY: mmap of the emulated descriptor, as a netmap program does.
                    let p = unsafe {
                        libc::mmap(
                            std::ptr::null_mut(),
                            len,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_SHARED,
                            fd,
                            0,
                        )
                    };
                    if p != libc::MAP_FAILED {
                        map = Some(Mapped {
                            base: p.cast(),
                            len,
                            nifp: reg.nr_offset as usize,
                        });
                    }
                }
            }
            Op::Legacy {
                info,
                name,
                version,
                ringid,
                flags,
                cmd,
                arg1,
                arg3,
            } => {
                let mut q = Nmreq {
                    nr_name: name.bytes(),
                    nr_version: *version % 16,
                    nr_offset: 0,
                    nr_memsize: 0,
                    nr_tx_slots: 0,
                    nr_rx_slots: 0,
                    nr_tx_rings: 0,
                    nr_rx_rings: 0,
                    nr_ringid: *ringid,
                    nr_cmd: *cmd % 4,
                    nr_arg1: *arg1,
                    nr_arg2: 0,
                    nr_arg3: *arg3,
                    nr_flags: *flags,
                    spare2: [0],
                };
                let req = if *info {
                    abi::NIOCGINFO
                } else {
                    abi::NIOCREGIF
                };
                // SAFETY: a live legacy request for the call.
                unsafe { libc::ioctl(fd, req, &mut q as *mut Nmreq) };
            }
            Op::TxSync => {
                // SAFETY: a sync takes no argument.
                unsafe { libc::ioctl(fd, abi::NIOCTXSYNC, 0usize) };
            }
            Op::RxSync => {
                // SAFETY: as above.
                unsafe { libc::ioctl(fd, abi::NIOCRXSYNC, 0usize) };
            }
            Op::Pointers {
                ring,
                rx,
                head,
                cur,
                tail,
            } => {
                let Some(m) = &map else { continue };
                let ofs = m.nifp + NIFP_RING_OFS_OFFSET;
                if ofs + 8 * 32 > m.len {
                    continue;
                }
                // SAFETY: inside the mapping (checked above). The program
                // may write anything in it; the library distrusts it all.
                let (ntx, nrx) = unsafe {
                    let h = m.base.add(m.nifp);
                    (
                        h.add(offset_of!(NetmapIfHeader, ni_tx_rings))
                            .cast::<u32>()
                            .read_unaligned(),
                        h.add(offset_of!(NetmapIfHeader, ni_rx_rings))
                            .cast::<u32>()
                            .read_unaligned(),
                    )
                };
                let count = if *rx { nrx } else { ntx };
                if count == 0 || count > 16 {
                    continue;
                }
                let k = (u32::from(*ring) % count + if *rx { ntx } else { 0 }) as usize;
                // SAFETY: k < 32, inside the offset table checked above.
                let off = unsafe { m.base.add(ofs + 8 * k).cast::<i64>().read_unaligned() };
                let Some(at) = (m.nifp as i64)
                    .checked_add(off)
                    .and_then(|o| usize::try_from(o).ok())
                else {
                    continue;
                };
                if at
                    .checked_add(size_of::<NetmapRingHeader>())
                    .is_none_or(|e| e > m.len)
                {
                    continue;
                }
                // SAFETY: a ring header inside the mapping (checked above).
                unsafe {
                    let r = m.base.add(at);
                    r.add(offset_of!(NetmapRingHeader, head))
                        .cast::<u32>()
                        .write_unaligned(*head);
                    r.add(offset_of!(NetmapRingHeader, cur))
                        .cast::<u32>()
                        .write_unaligned(*cur);
                    r.add(offset_of!(NetmapRingHeader, tail))
                        .cast::<u32>()
                        .write_unaligned(*tail);
                }
                let req = if *rx {
                    abi::NIOCRXSYNC
                } else {
                    abi::NIOCTXSYNC
                };
                // SAFETY: a sync takes no argument.
                unsafe { libc::ioctl(fd, req, 0usize) };
            }
            Op::Poll { events } => {
                let mut p = libc::pollfd {
                    fd,
                    events: *events,
                    revents: 0,
                };
                // SAFETY: one live pollfd, no wait.
                unsafe { libc::poll(&mut p, 1, 0) };
            }
            Op::Spec(s) => {
                if let Ok(spec) = parse_spec(s) {
                    assert!(spec.name.len() < 64, "a parsed spec's name fits nr_name");
                    assert!(CString::new(spec.name.clone()).is_ok() || spec.name.contains('\0'));
                }
            }
            Op::BadIoctl(req) => {
                // SAFETY: unknown requests are refused without reading the argument.
                unsafe { libc::ioctl(fd, u64::from(*req) << 8 | 0x69, 0usize) };
            }
        }
    }
    if let Some(m) = map.take() {
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(m.base.cast(), m.len) };
    }
    // SAFETY: the descriptor opened above.
    unsafe { libc::close(fd) };
    reset_daemon();
});
