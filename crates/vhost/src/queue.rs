//! A queue pair as the switch sees every port that is not a netmap ring: a
//! [`FrameQueue`]. Frames the guest transmits are taken with their
//! virtio-net header's offload fields; frames pushed in are written into
//! the guest's RX buffers and made visible, with one interrupt if the guest
//! wants one, at the flush.

use std::os::fd::AsRawFd;
use std::os::fd::RawFd;

use ringswitch_frame::{
    Caps, FrameQueue, OffloadHdr, PushError, QueueStats, Stage, Taken, Wake, F_DATA_VALID,
};

use crate::hdr::VirtioNetHdr;
use crate::port::{RxError, VirtioNetPort};

/// The offload fields of a guest's TX header, in host order. DATA_VALID is
/// the device's word on receive, not the guest's on transmit: a guest
/// claiming it must not make another guest or the host stack skip checking
/// its checksums, so it is dropped here.
fn tx_offload(h: &VirtioNetHdr) -> OffloadHdr {
    OffloadHdr {
        flags: h.flags & !F_DATA_VALID,
        gso_type: h.gso_type,
        hdr_len: h.hdr_len(),
        gso_size: h.gso_size(),
        csum_start: h.csum_start(),
        csum_offset: h.csum_offset(),
    }
}

/// A virtio-net header carrying `h` (little-endian, no buffer count).
fn rx_header(h: &OffloadHdr) -> VirtioNetHdr {
    VirtioNetHdr {
        flags: h.flags,
        gso_type: h.gso_type,
        hdr_len: h.hdr_len.to_le(),
        gso_size: h.gso_size.to_le(),
        csum_start: h.csum_start.to_le(),
        csum_offset: h.csum_offset.to_le(),
        num_buffers: 0,
    }
}

impl FrameQueue for VirtioNetPort {
    /// Drains the guest's TX queue ([`VirtioNetPort::tx_batch`]); bad
    /// chains are completed with length 0 and returned as malformed; the TX
    /// completion interrupt, if the guest wants one, comes back to be sent
    /// after the pair's lock is released.
    fn take_batch(&mut self, max: usize, stage: &mut Stage) -> Taken {
        let bad0 = self.stats().tx_bad_chains;
        // A RARP the frontend asked for goes first, as if the guest had
        // sent it.
        let announced = match self.take_announce() {
            Some(mac) if max > 0 => {
                let f = crate::port::rarp(mac);
                // The stage is empty at the start of a batch: it has room.
                // Should it not, the RARP waits for the next batch.
                if stage.put_with(f.len(), OffloadHdr::default(), |dst| {
                    dst.copy_from_slice(&f)
                }) {
                    1
                } else {
                    self.unsend_announce(mac);
                    0
                }
            }
            Some(mac) => {
                self.unsend_announce(mac);
                0
            }
            None => 0,
        };
        let max = max - announced;
        let frames = announced
            + self.tx_batch(max, |frame, h| {
                stage.put_with(frame.len(), tx_offload(h), |dst| {
                    frame.copy_to(dst);
                })
            });
        let wake = if frames > 0 {
            self.notify_tx_done().into()
        } else {
            Wake::NONE
        };
        Taken {
            frames,
            malformed: self.stats().tx_bad_chains.wrapping_sub(bad0),
            wake,
        }
    }

    fn has_work(&self) -> bool {
        self.tx_pending()
    }

    fn is_up(&self) -> bool {
        self.is_running()
    }

    /// Writes the frame into the guest's RX buffers; the guest sees it at
    /// the next [`FrameQueue::flush`].
    fn push(&mut self, hdr: &OffloadHdr, frame: &[u8]) -> Result<(), PushError> {
        self.rx_push_deferred(&rx_header(hdr), frame)
            .map_err(|e| match e {
                RxError::Full => PushError::Full,
                RxError::NotReady => PushError::Down,
                RxError::TooLarge => PushError::TooLong,
            })
    }

    /// Publishes the used index once ([`VirtioNetPort::notify_rx`]) and
    /// returns the RX interrupt, if the guest wants one.
    fn flush(&mut self) -> Wake {
        self.notify_rx().into()
    }

    /// The offloads the guest negotiated on receive (ECN and USO are never
    /// offered).
    fn caps(&self) -> Caps {
        let c = self.rx_caps();
        Caps {
            csum: c.csum,
            tso4: c.tso4,
            tso6: c.tso6,
            ecn: false,
            // USO is not offered: QEMU 7.2's virtio-net knows no USO
            // feature, so nothing here could negotiate or test it.
            uso4: false,
            uso6: false,
        }
    }

    /// The guest's TX kick eventfd: every kick is an edge, so a worker
    /// watches it edge-triggered and never reads it (see
    /// [`VirtioNetPort::tx_kick_fd`]); it changes with
    /// [`VirtioNetPort::generation`].
    fn wake_fd(&self) -> Option<RawFd> {
        self.tx_kick_fd().map(|fd| fd.as_raw_fd())
    }

    /// Asks the guest to kick once `more + 1` entries are pending and
    /// double-checks; work that arrived meanwhile turns kicks off again.
    fn wake_generation(&self) -> u64 {
        self.generation()
    }

    fn wake_is_shared(&self) -> bool {
        true
    }

    fn prepare_sleep(&mut self, more: u16) -> bool {
        if self.enable_tx_notifications_after(more) {
            self.disable_tx_notifications();
            false
        } else {
            true
        }
    }

    fn set_awake(&mut self) {
        self.disable_tx_notifications();
    }

    fn stats(&self) -> QueueStats {
        let s = VirtioNetPort::stats(self);
        QueueStats {
            rx_bad_chains: s.rx_bad_chains,
            ring_errors: s.ring_errors,
            interrupts: s.interrupts,
            interrupts_dropped: s.interrupts_dropped,
            guest_faults: s.guest_faults,
            ..QueueStats::default()
        }
    }

    fn driver(&self) -> &'static str {
        "vhost-user"
    }
}
