//! The part of libxdp 1.3 (`<xdp/xsk.h>`, `<xdp/libxdp.h>`) and of the
//! kernel's `<linux/if_xdp.h>` this module uses, declared by hand. Layouts
//! are checked against the C sizes below; build.rs links the libraries.

use std::ffi::{c_char, c_int, c_void};

/// `SOL_XDP`.
pub const SOL_XDP: c_int = 283;
/// getsockopt: `struct xdp_statistics`.
pub const XDP_STATISTICS: c_int = 7;
/// getsockopt: `struct xdp_options`.
pub const XDP_OPTIONS: c_int = 8;
/// setsockopt: descriptors one copy-mode `sendto` handles (Linux 6.17+).
pub const XDP_MAX_TX_SKB_BUDGET: c_int = 9;
/// `xdp_options.flags`: the socket is in zero-copy mode.
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1;

/// `xdp_flags`: the program runs on the skb path (generic XDP).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `xdp_flags`: the program runs in the driver (native XDP).
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// bind flag: copy mode, never zero copy.
pub const XDP_COPY: u16 = 1 << 1;
/// bind flag: the kernel sets `XDP_RING_NEED_WAKEUP` when it needs a kick.
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Ring flag: the kernel sleeps and needs a system call to see new entries.
pub const XDP_RING_NEED_WAKEUP: u32 = 1;
/// RX descriptor option: more buffers of the same packet follow
/// (multi-buffer, which is not enabled here).
pub const XDP_PKT_CONTD: u32 = 1;
/// Headroom the kernel leaves in front of a received frame.
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// `enum xdp_attach_mode` (libxdp).
pub const XDP_MODE_NATIVE: c_int = 1;
/// `enum xdp_attach_mode` (libxdp).
pub const XDP_MODE_SKB: c_int = 2;
/// `enum xdp_attach_mode` (libxdp).
pub const XDP_MODE_HW: c_int = 3;

/// `struct xsk_ring_prod` and `struct xsk_ring_cons` (same layout): our
/// cached indexes, and pointers into the ring memory libxdp maps for us.
#[repr(C)]
pub struct XskRing {
    pub cached_prod: u32,
    pub cached_cons: u32,
    pub mask: u32,
    pub size: u32,
    pub producer: *mut u32,
    pub consumer: *mut u32,
    pub ring: *mut c_void,
    pub flags: *mut u32,
}

/// `struct xdp_desc`: one RX or TX descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `struct xsk_umem_config`.
#[repr(C)]
pub struct XskUmemConfig {
    pub fill_size: u32,
    pub comp_size: u32,
    pub frame_size: u32,
    pub frame_headroom: u32,
    pub flags: u32,
}

/// `struct xsk_socket_config` (the `libbpf_flags`/`libxdp_flags` union is
/// one u32).
#[repr(C)]
pub struct XskSocketConfig {
    pub rx_size: u32,
    pub tx_size: u32,
    pub libxdp_flags: u32,
    pub xdp_flags: u32,
    pub bind_flags: u16,
}

/// `struct xdp_statistics` (Linux 5.9+ size).
#[repr(C)]
#[derive(Default)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// `struct xdp_options`.
#[repr(C)]
#[derive(Default)]
pub struct XdpOptions {
    pub flags: u32,
}

const _: () = {
    assert!(std::mem::size_of::<XskRing>() == 48);
    assert!(std::mem::size_of::<XdpDesc>() == 16);
    assert!(std::mem::size_of::<XskUmemConfig>() == 20);
    assert!(std::mem::size_of::<XskSocketConfig>() == 20);
    assert!(std::mem::size_of::<XdpStatistics>() == 48);
};

/// `struct xsk_umem` (opaque).
pub enum XskUmem {}
/// `struct xsk_socket` (opaque).
pub enum XskSocket {}
/// `struct xdp_multiprog` (opaque).
pub enum XdpMultiprog {}
/// `struct xdp_program` (opaque).
pub enum XdpProgram {}

extern "C" {
    pub fn xsk_umem__create(
        umem: *mut *mut XskUmem,
        umem_area: *mut c_void,
        size: u64,
        fill: *mut XskRing,
        comp: *mut XskRing,
        config: *const XskUmemConfig,
    ) -> c_int;
    pub fn xsk_umem__delete(umem: *mut XskUmem) -> c_int;
    pub fn xsk_socket__create(
        xsk: *mut *mut XskSocket,
        ifname: *const c_char,
        queue_id: u32,
        umem: *mut XskUmem,
        rx: *mut XskRing,
        tx: *mut XskRing,
        config: *const XskSocketConfig,
    ) -> c_int;
    pub fn xsk_socket__fd(xsk: *const XskSocket) -> c_int;
    pub fn xsk_socket__delete(xsk: *mut XskSocket);

    pub fn xdp_multiprog__get_from_ifindex(ifindex: c_int) -> *mut XdpMultiprog;
    pub fn xdp_multiprog__close(mp: *mut XdpMultiprog);
    pub fn xdp_multiprog__detach(mp: *mut XdpMultiprog) -> c_int;
    pub fn xdp_multiprog__is_legacy(mp: *const XdpMultiprog) -> bool;
    pub fn xdp_multiprog__attach_mode(mp: *const XdpMultiprog) -> c_int;
    pub fn xdp_multiprog__main_prog(mp: *const XdpMultiprog) -> *mut XdpProgram;
    pub fn xdp_multiprog__next_prog(
        prog: *const XdpProgram,
        mp: *const XdpMultiprog,
    ) -> *mut XdpProgram;
    pub fn xdp_program__name(prog: *const XdpProgram) -> *const c_char;
    pub fn xdp_program__id(prog: *const XdpProgram) -> u32;
    pub fn xdp_program__detach(
        prog: *mut XdpProgram,
        ifindex: c_int,
        mode: c_int,
        flags: u32,
    ) -> c_int;

    // libbpf's netlink calls: CAP_NET_ADMIN alone, unlike libxdp's reads
    // of programs by id.
    pub fn bpf_xdp_query_id(ifindex: c_int, flags: c_int, prog_id: *mut u32) -> c_int;
    pub fn bpf_xdp_detach(ifindex: c_int, flags: u32, opts: *const c_void) -> c_int;
}

/// libxdp's pointer-returning calls give a valid pointer, NULL, or an
/// errno encoded in the pointer (`ERR_PTR`). Returns the errno of the last
/// two, None for a valid pointer.
pub fn ptr_errno<T>(p: *const T) -> Option<c_int> {
    let v = p as isize;
    if v == 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Some(if e == 0 { libc::ENOENT } else { e });
    }
    // The kernel's MAX_ERRNO: the last 4095 addresses are error codes.
    if (-4095..0).contains(&v) {
        return c_int::try_from(-v).ok();
    }
    None
}
