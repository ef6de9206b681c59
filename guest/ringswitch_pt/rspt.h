/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * rspt.h - user API of the ringswitch passthrough guest driver (ringswitch_pt).
 *
 * One character device per bound ivshmem-doorbell device, /dev/rsptN:
 *
 *   mmap                the whole region (BAR2), MAP_SHARED only, offset and
 *                       length within RSPT_IOC_INFO's mem_size
 *   RSPT_IOC_INFO       sizes and ids, struct rspt_info
 *   RSPT_IOC_KICK       ring a peer's doorbell: RSPT_KICK(peer, vector)
 *   read (8 bytes)      a __u64 mask of the vectors that fired since this open
 *                       file last read; blocks until one did (EAGAIN with
 *                       O_NONBLOCK). Bit i is vector i = ring pair i.
 *   poll                POLLIN while that mask is not zero
 *
 * After the device is unbound every call returns ENODEV (poll: POLLERR |
 * POLLHUP) and touching an existing mapping raises SIGBUS.
 *
 * Usable from the kernel and from userspace C. For other languages the
 * numbers are fixed (checked by tests/pt/rspt_probe.c):
 *
 *   RSPT_IOC_INFO = 0x80107201   _IOR('r', 1, struct rspt_info), 16 bytes
 *   RSPT_IOC_KICK = 0x40047202   _IOW('r', 2, __u32)
 */
#ifndef RSPT_H
#define RSPT_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* Doorbell peer id of the host daemon (the switch worker or the pipe). */
#define RSPT_PEER_HOST 0
/*
 * On a migratable switch port (ctl port add ... --migratable) the guest is
 * peer 0, as QEMU's master=on wants, and the daemon is peer 1.
 */
#define RSPT_PEER_HOST_MIGRATABLE 1
/* Vectors the read mask can carry; the host uses at most 16. */
#define RSPT_MAX_VECTORS 64

/* The value RSPT_IOC_KICK writes to the doorbell register. */
#define RSPT_KICK(peer, vector) ((((__u32)(peer)) << 16) | ((__u32)(vector) & 0xffffu))

struct rspt_info {
	__u64 mem_size;   /* bytes of BAR2, the length mmap accepts */
	__u32 ivposition; /* this guest's peer id (1 + end index; 0 on a migratable port, end 0) */
	__u32 vectors;    /* MSI-X vectors = ring pairs of the port */
};

#define RSPT_IOC_INFO _IOR('r', 1, struct rspt_info)
#define RSPT_IOC_KICK _IOW('r', 2, __u32)

/*
 * The region header at offset 0 of BAR2, little endian. Mirrors RegionHeader
 * in crates/ring/src/layout.rs; only magic, version and size are checked by
 * the driver, the rest is for the program that drives the rings.
 */
#define RSPT_REGION_MAGIC "RNGSWTCH" /* 8 bytes, no terminating NUL */
#define RSPT_REGION_VERSION 2

struct rspt_region_header {
	__u8 magic[8];
	__u32 version;
	__u32 ends;	/* 1 switch port, 2 pipe */
	__u32 tx_rings;
	__u32 rx_rings;
	__u32 tx_slots;
	__u32 rx_slots;
	__u32 buf_size;
	__u32 nbufs;
	__u64 buf_base;
	__u64 size;	/* bytes in use, at most the BAR */
	__u64 nifp_ofs[2];
	__u64 csb_ofs[2];
	/*
	 * Bytes of virtio-net header (VIRTIO 1.x with num_buffers, 12) in
	 * front of every frame in the rings, or 0: a port made for a ptnet
	 * guest with offloads (ctl port add ... --passthrough PATH --vnet-hdr).
	 */
	__u32 vnet_hdr_len;
	__u32 reserved;
};

/*
 * Two words in the header page of a migratable port (RegionHeader's page,
 * crates/ring/src/layout.rs HEADER_RESUME_ASK/ACK): the daemon writes a
 * nonzero epoch into the ask word while it waits for the guest to run on
 * this memory (after a migration, the destination's daemon asks with its
 * own), and the driver answers by copying it into the ack word and ringing
 * the daemon's doorbell (vector 0).
 */
#define RSPT_RESUME_ASK 256
#define RSPT_RESUME_ACK 320

#endif /* RSPT_H */
