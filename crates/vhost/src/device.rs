//! The vhost-user protocol side: [`VhostUserNet`] answers the frontend's
//! messages (through the `vhost` crate's `BackendReqHandler`, which decodes
//! and validates them) and configures the [`VirtioNetPort`]s the switch
//! workers drive.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use tracing::{debug, warn};

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVirtioFeatures,
    VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{
    Error as VuError, GpuBackend, Result as VuResult, VhostUserBackendReqHandlerMut,
};
use vhost::VhostUserMemoryRegionBase;
use vm_memory::{GuestAddress, GuestMemoryMmap, GuestRegionMmap};

use crate::guest::GuestMemory;
use crate::hdr::feature;
use crate::log::DirtyLog;
use crate::notify::check_eventfd;
use crate::port::{QueueKind, VirtioNetPort, QUEUE_SIZE_MAX};

/// Most memory regions accepted in SET_MEM_TABLE (QEMU sends at most 8
/// without CONFIGURE_MEM_SLOTS).
pub const MEM_REGIONS_MAX: usize = crate::guest::REGIONS_MAX;
/// Most queue pairs a device may be configured with.
pub const QUEUE_PAIRS_MAX: u16 = 16;
/// Most guest memory one memory table may map, all regions together: far
/// above any guest this switch serves, far below the address space.
pub const MEM_BYTES_MAX: u64 = 1 << 40;

/// Why a memory region of SET_MEM_TABLE was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// Zero bytes, or an address range that wraps.
    #[error("memory region of {size} bytes at guest address {gpa:#x} is empty or wraps around")]
    Range {
        /// memory_size.
        size: u64,
        /// guest_phys_addr.
        gpa: u64,
    },
    /// Larger than [`MEM_BYTES_MAX`], alone or with the regions before it.
    #[error("memory table maps more than {MEM_BYTES_MAX} bytes")]
    TooLarge,
    /// The descriptor could not be inspected.
    #[error("cannot inspect the memory region's descriptor")]
    Stat(#[source] std::io::Error),
    /// Not a regular file (memfd, tmpfs, hugetlbfs): a device node or a
    /// socket could map anything, or nothing.
    #[error("memory region descriptor is not a regular file")]
    NotAFile,
    /// The file does not cover `mmap_offset + memory_size`: accesses past
    /// its end would fault.
    #[error("memory region needs {need} bytes of its file, which holds {have}")]
    FileTooShort {
        /// mmap_offset + memory_size.
        need: u64,
        /// The file's size.
        have: u64,
    },
}

/// Checks a memory region and its descriptor before it is mapped: a
/// non-empty range that does not wrap, at most [`MEM_BYTES_MAX`] with the
/// `total` mapped before it, and a regular file covering the mapped range
/// (`mmap_offset + memory_size`, checked arithmetic). Seals are logged: a
/// file sealed against shrinking (QEMU's memfd backend seals by default)
/// can never fault; one that is not is still survived (module `fault`).
fn check_region(
    region: &VhostUserMemoryRegion,
    file: &File,
    total: u64,
) -> Result<u64, RegionError> {
    let (size, gpa) = (region.memory_size, region.guest_phys_addr);
    if size == 0 || gpa.checked_add(size).is_none() || region.user_addr.checked_add(size).is_none()
    {
        return Err(RegionError::Range { size, gpa });
    }
    let total = total
        .checked_add(size)
        .filter(|&t| t <= MEM_BYTES_MAX)
        .ok_or(RegionError::TooLarge)?;
    let meta = file.metadata().map_err(RegionError::Stat)?;
    if !meta.file_type().is_file() {
        return Err(RegionError::NotAFile);
    }
    let need = region
        .mmap_offset
        .checked_add(size)
        .ok_or(RegionError::FileTooShort {
            need: u64::MAX,
            have: meta.len(),
        })?;
    if meta.len() < need {
        return Err(RegionError::FileTooShort {
            need,
            have: meta.len(),
        });
    }
    // SAFETY: fcntl F_GET_SEALS on a descriptor we hold; no memory passed.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if seals >= 0 && seals & libc::F_SEAL_SHRINK != 0 {
        debug!(gpa, size, "memory region sealed against shrinking");
    } else {
        debug!(
            gpa,
            size, seals, "memory region not sealed against shrinking; faults are survived"
        );
    }
    Ok(total)
}

/// How a device is configured by the switch.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// MAC address offered in the config space (the frontend usually sets its own).
    pub mac: [u8; 6],
    /// Queue pairs (MQ), 1 to [`QUEUE_PAIRS_MAX`].
    pub queue_pairs: u16,
    /// Offer the checksum and TSO offloads.
    pub offloads: bool,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            mac: [0x52, 0x54, 0, 0, 0, 1],
            queue_pairs: 1,
            offloads: true,
        }
    }
}

/// A guest memory region as the frontend described it, to translate the
/// frontend's virtual addresses in SET_VRING_ADDR.
#[derive(Clone, Copy, Debug)]
struct Mapping {
    frontend_va: u64,
    size: u64,
    gpa: u64,
}

/// The device: protocol state plus one shared [`VirtioNetPort`] per queue
/// pair. Wrap it in `Arc<Mutex<_>>` for the `vhost` crate's handler.
#[derive(Debug)]
pub struct VhostUserNet {
    config: NetConfig,
    offered: u64,
    acked: u64,
    protocol: VhostUserProtocolFeatures,
    mappings: Vec<Mapping>,
    ports: Vec<Arc<Mutex<VirtioNetPort>>>,
    /// The frontend's dirty log (SET_LOG_BASE), used while it has
    /// VHOST_F_LOG_ALL acked.
    log: Option<Arc<DirtyLog>>,
}

/// The protocol features the device offers: multiqueue, replies on
/// request, a dirty log in shared memory (live migration) and the RARP a
/// frontend asks for after a migration when its guest does not announce
/// itself.
fn protocol_offered() -> VhostUserProtocolFeatures {
    VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::LOG_SHMFD
        | VhostUserProtocolFeatures::RARP
}

/// Errors building a device.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Queue pairs outside 1..=QUEUE_PAIRS_MAX.
    #[error("queue pairs must be between 1 and {QUEUE_PAIRS_MAX}, not {0}")]
    QueuePairs(u16),
}

fn invalid() -> VuError {
    VuError::InvalidParam
}

/// Logs a refused message at most once a second process-wide: a frontend
/// that reconnects in a loop cannot flood the log.
macro_rules! refused {
    ($($arg:tt)*) => {{
        static LAST_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);
        if crate::log_allowed(&LAST_S) {
            warn!($($arg)*);
        }
    }};
}

impl VhostUserNet {
    /// A device with `config`, no frontend yet.
    pub fn new(config: NetConfig) -> Result<Self, ConfigError> {
        if config.queue_pairs == 0 || config.queue_pairs > QUEUE_PAIRS_MAX {
            return Err(ConfigError::QueuePairs(config.queue_pairs));
        }
        let mut offered = feature::OFFERED
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
            | VhostUserVirtioFeatures::LOG_ALL.bits();
        if !config.offloads {
            offered &= !feature::OFFLOADS;
        }
        if config.queue_pairs == 1 {
            offered &= !(1 << feature::VIRTIO_NET_F_MQ);
        }
        let ports = (0..config.queue_pairs)
            .map(|p| Arc::new(Mutex::new(VirtioNetPort::new(p))))
            .collect();
        Ok(VhostUserNet {
            config,
            offered,
            acked: 0,
            protocol: VhostUserProtocolFeatures::empty(),
            mappings: Vec::with_capacity(MEM_REGIONS_MAX),
            ports,
            log: None,
        })
    }

    /// The queue pairs, for the switch workers: each worker locks a pair once
    /// per batch.
    pub fn ports(&self) -> &[Arc<Mutex<VirtioNetPort>>] {
        &self.ports
    }

    /// The feature bits the device offers.
    pub fn offered_features(&self) -> u64 {
        self.offered
    }

    /// The feature bits the frontend acked (SET_FEATURES), 0 before.
    pub fn acked_features(&self) -> u64 {
        self.acked
    }

    /// Whether the frontend is migrating the guest: every write into its
    /// memory is logged.
    pub fn logging(&self) -> bool {
        self.log.is_some() && self.acked & VhostUserVirtioFeatures::LOG_ALL.bits() != 0
    }

    /// Pages written past the end of the dirty log (a frontend whose log
    /// is smaller than the memory it mapped since).
    pub fn log_beyond(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.beyond())
    }

    /// VHOST_USER_SEND_RARP: the frontend moved its guest here and the
    /// guest does not announce itself; a RARP from `mac` goes into the
    /// switch from queue pair 0 before the guest's next frames, so every
    /// switch learns where the guest is now. Refused unless the frontend
    /// acked the RARP protocol feature.
    pub fn send_rarp(&mut self, mac: [u8; 6]) -> VuResult<()> {
        if !self.protocol.contains(VhostUserProtocolFeatures::RARP) {
            return Err(VuError::InvalidOperation(
                "SEND_RARP without the RARP protocol feature",
            ));
        }
        let p = self.ports.first().ok_or_else(invalid)?;
        lock(p).announce(mac);
        debug!(mac = ?mac, "vhost-user: RARP requested");
        Ok(())
    }

    /// Hands every pair the dirty log while logging is on, none otherwise.
    fn apply_log(&self) {
        let log = self.log.clone().filter(|_| self.logging());
        for p in &self.ports {
            lock(p).set_log(log.clone());
        }
    }

    /// The end of the highest guest memory region mapped (0: none).
    fn mem_end(&self) -> u64 {
        self.mappings
            .iter()
            .map(|m| m.gpa.saturating_add(m.size))
            .max()
            .unwrap_or(0)
    }

    /// The frontend went away: stop every vring, drop the memory.
    pub fn disconnected(&mut self) {
        self.acked = 0;
        self.protocol = VhostUserProtocolFeatures::empty();
        self.mappings.clear();
        self.log = None;
        for p in &self.ports {
            lock(p).reset();
        }
    }

    /// Queue `index` as (pair, kind), refusing indexes past the configured pairs.
    fn queue(&self, index: u32) -> VuResult<(MutexGuard<'_, VirtioNetPort>, QueueKind)> {
        self.refuse_if_broken()?;
        let pair = usize::try_from(index / 2).map_err(|_| invalid())?;
        let pair = self.ports.get(pair).ok_or_else(invalid)?;
        let kind = if index.is_multiple_of(2) {
            QueueKind::Rx
        } else {
            QueueKind::Tx
        };
        Ok((lock(pair), kind))
    }

    /// A frontend whose memory faulted under the device loses its
    /// connection: every message after the fault is refused.
    fn refuse_if_broken(&self) -> VuResult<()> {
        if self.ports.iter().any(|p| lock(p).is_broken()) {
            return Err(VuError::InvalidOperation("guest memory faulted"));
        }
        Ok(())
    }

    fn frontend_va_to_gpa(&self, va: u64) -> VuResult<u64> {
        self.mappings
            .iter()
            .find(|m| va >= m.frontend_va && va - m.frontend_va < m.size)
            .map(|m| va - m.frontend_va + m.gpa)
            .ok_or_else(invalid)
    }
}

/// Locks a port, ignoring poisoning: the data path never panics while
/// holding it, and its state is valid between any two calls.
fn lock(p: &Mutex<VirtioNetPort>) -> MutexGuard<'_, VirtioNetPort> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

impl VhostUserBackendReqHandlerMut for VhostUserNet {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.disconnected();
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.disconnected();
        Ok(())
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(self.offered)
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !self.offered != 0 {
            return Err(invalid());
        }
        let was_logging = self.logging();
        self.acked = features;
        if self.logging() != was_logging {
            debug!(
                logging = self.logging(),
                "vhost-user: dirty logging (VHOST_F_LOG_ALL) switched"
            );
        }
        self.apply_log();
        // Without PROTOCOL_FEATURES rings are enabled from the start;
        // with it they wait for SET_VRING_ENABLE.
        let enable = features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() == 0;
        for p in &self.ports {
            let mut p = lock(p);
            p.set_features(features);
            if enable {
                p.set_vring_enabled(QueueKind::Rx, true);
                p.set_vring_enabled(QueueKind::Tx, true);
            }
        }
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        postcopy_listening: Option<bool>,
    ) -> VuResult<Option<Vec<VhostUserMemoryRegionBase>>> {
        if postcopy_listening.is_some() {
            return Err(VuError::InvalidOperation("postcopy not supported"));
        }
        self.refuse_if_broken()?;
        if ctx.is_empty() || ctx.len() > MEM_REGIONS_MAX || ctx.len() != files.len() {
            return Err(invalid());
        }
        let mut regions = Vec::with_capacity(ctx.len());
        let mut mappings = Vec::with_capacity(ctx.len());
        let mut total = 0;
        for (region, file) in ctx.iter().zip(files) {
            total = check_region(region, &file, total).map_err(|e| {
                refused!("vhost-user: memory table refused: {e}");
                invalid()
            })?;
            // Mapped once, here, MAP_SHARED; never translated per access.
            let mmap = region.mmap_region(file)?;
            let r = GuestRegionMmap::new(mmap, GuestAddress(region.guest_phys_addr))
                .ok_or_else(invalid)?;
            regions.push(r);
            mappings.push(Mapping {
                frontend_va: region.user_addr,
                size: region.memory_size,
                gpa: region.guest_phys_addr,
            });
        }
        // Refuses overlapping regions.
        let mem = GuestMemoryMmap::from_regions(regions).map_err(|_| invalid())?;
        // Registered once with the fault handler, for every pair.
        let mem = GuestMemory::new(mem).map_err(|e| {
            refused!("vhost-user: memory table refused: {e}");
            invalid()
        })?;
        self.mappings = mappings;
        for p in &self.ports {
            lock(p).set_guest_memory(Some(mem.clone()));
        }
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        let size = u16::try_from(num).map_err(|_| invalid())?;
        if size > QUEUE_SIZE_MAX {
            return Err(invalid());
        }
        let (mut p, kind) = self.queue(index)?;
        if p.set_vring_size(kind, size) {
            Ok(())
        } else {
            Err(invalid())
        }
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        log: u64,
    ) -> VuResult<()> {
        // The used ring's writes are logged at the guest address the
        // frontend gives (its own address of the ring); a page past the
        // log is counted, never written.
        let log = flags
            .contains(VhostUserVringAddrFlags::VHOST_VRING_F_LOG)
            .then_some(log);
        let desc = self.frontend_va_to_gpa(descriptor)?;
        let avail = self.frontend_va_to_gpa(available)?;
        let used = self.frontend_va_to_gpa(used)?;
        let (mut p, kind) = self.queue(index)?;
        debug!(index, desc, avail, used, log = ?log, "vhost-user: SET_VRING_ADDR");
        p.set_vring_addr(kind, desc, avail, used);
        p.set_vring_log_addr(kind, log);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        let base = u16::try_from(base).map_err(|_| invalid())?;
        let (mut p, kind) = self.queue(index)?;
        p.set_vring_base(kind, base);
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        let (mut p, kind) = self.queue(index)?;
        let base = p.stop_vring(kind);
        Ok(VhostUserVringState::new(index, u32::from(base)))
    }

    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        if let Some(f) = &fd {
            check_eventfd(f).map_err(|e| {
                refused!(index, "vhost-user: kick descriptor refused: {e}");
                invalid()
            })?;
        }
        let (mut p, kind) = self.queue(u32::from(index))?;
        if p.start_vring(kind, fd) {
            Ok(())
        } else {
            Err(invalid())
        }
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        let (mut p, kind) = self.queue(u32::from(index))?;
        p.set_vring_call(kind, fd).map_err(|e| {
            refused!(index, "vhost-user: call descriptor refused: {e}");
            invalid()
        })
    }

    fn set_vring_err(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        // Not used (the device never reports vring errors), but held to the
        // same rule as the others; dropped here.
        if let Some(f) = &fd {
            check_eventfd(f).map_err(|e| {
                refused!(index, "vhost-user: error descriptor refused: {e}");
                invalid()
            })?;
        }
        self.queue(u32::from(index)).map(|_| ())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        Ok(protocol_offered())
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        let offered = protocol_offered();
        let f = VhostUserProtocolFeatures::from_bits(features).ok_or_else(invalid)?;
        if !offered.contains(f) {
            return Err(invalid());
        }
        self.protocol = f;
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        // Vrings (2 per pair), as the spec words it and the `vhost` crate's
        // frontend reads it; QEMU only checks it is at least its `queues=`
        // (pairs), which this also satisfies.
        Ok(2 * u64::from(self.config.queue_pairs))
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        // Accepted before SET_FEATURES too: QEMU's vhost-user net backend
        // disables every ring (SET_VRING_ENABLE 0) right after SET_OWNER,
        // before it acks any feature. The state is kept; without
        // PROTOCOL_FEATURES, SET_FEATURES enables the rings anyway.
        let (mut p, kind) = self.queue(index)?;
        p.set_vring_enabled(kind, enable);
        Ok(())
    }

    fn get_config(
        &mut self,
        offset: u32,
        size: u32,
        _flags: VhostUserConfigFlags,
    ) -> VuResult<Vec<u8>> {
        // struct virtio_net_config: mac[6], status, max_virtqueue_pairs.
        let mut cfg = [0u8; 10];
        cfg[..6].copy_from_slice(&self.config.mac);
        cfg[6..8].copy_from_slice(&1u16.to_le_bytes()); // VIRTIO_NET_S_LINK_UP
        cfg[8..10].copy_from_slice(&self.config.queue_pairs.to_le_bytes());
        let start = offset as usize;
        let end = start.checked_add(size as usize).ok_or_else(invalid)?;
        cfg.get(start..end).map(<[u8]>::to_vec).ok_or_else(invalid)
    }

    fn set_config(
        &mut self,
        _offset: u32,
        _buf: &[u8],
        _flags: VhostUserConfigFlags,
    ) -> VuResult<()> {
        Err(VuError::InvalidOperation("config space is read-only"))
    }

    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> VuResult<()> {
        Err(VuError::InvalidOperation("not a GPU"))
    }

    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> VuResult<File> {
        Err(VuError::InvalidOperation("no shared objects"))
    }

    fn get_inflight_fd(
        &mut self,
        _inflight: &VhostUserInflight,
    ) -> VuResult<(VhostUserInflight, File)> {
        Err(VuError::InvalidOperation("no inflight tracking"))
    }

    fn set_inflight_fd(&mut self, _inflight: &VhostUserInflight, _file: File) -> VuResult<()> {
        Err(VuError::InvalidOperation("no inflight tracking"))
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        Err(VuError::InvalidOperation("CONFIGURE_MEM_SLOTS not offered"))
    }

    fn add_mem_region(
        &mut self,
        _region: &VhostUserSingleMemoryRegion,
        _fd: File,
        _postcopy_listening: Option<bool>,
    ) -> VuResult<Option<VhostUserMemoryRegionBase>> {
        Err(VuError::InvalidOperation("CONFIGURE_MEM_SLOTS not offered"))
    }

    fn remove_mem_region(&mut self, _region: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        Err(VuError::InvalidOperation("CONFIGURE_MEM_SLOTS not offered"))
    }

    fn set_device_state_fd(
        &mut self,
        _direction: VhostTransferStateDirection,
        _phase: VhostTransferStatePhase,
        _fd: File,
    ) -> VuResult<Option<File>> {
        Err(VuError::InvalidOperation("no migration"))
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        Err(VuError::InvalidOperation("no migration"))
    }

    fn get_shmem_config(&mut self) -> VuResult<VhostUserShMemConfig> {
        Err(VuError::InvalidOperation("no shared memory regions"))
    }

    fn set_log_base(&mut self, log: &VhostUserLog, file: File) -> VuResult<()> {
        self.refuse_if_broken()?;
        // A second log replaces the first (QEMU sends a new one when the
        // guest's memory grows); the old one is unmapped once no pair
        // holds it.
        let l =
            DirtyLog::map(&file, log.mmap_size, log.mmap_offset, self.mem_end()).map_err(|e| {
                refused!("vhost-user: dirty log refused: {e}");
                invalid()
            })?;
        debug!(
            bytes = log.mmap_size,
            offset = log.mmap_offset,
            "vhost-user: dirty log mapped"
        );
        self.log = Some(Arc::new(l));
        self.apply_log();
        Ok(())
    }
}
