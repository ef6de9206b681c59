/*
 * ringswitch's netmap compatibility header: netmap's shared structures,
 * constants and requests (API version 14, x86-64 Linux), written from the
 * documented layout. Programs that include <net/netmap.h> build against
 * ringswitch by pointing their include path at this directory and linking
 * -lringswitch_netmap.
 */
#ifndef RINGSWITCH_NET_NETMAP_H
#define RINGSWITCH_NET_NETMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <sys/types.h>

#define NETMAP_API 14
#define NETMAP_MIN_API 14
#define NETMAP_MAX_API 15
#define NETMAP_DEVICE_NAME "/dev/netmap"

/* One slot of a ring: 16 bytes. */
struct netmap_slot {
	uint32_t buf_idx; /* buffer index */
	uint16_t len;     /* length of the packet in the buffer */
	uint16_t flags;   /* NS_* */
	uint64_t ptr;     /* user pointer for NS_INDIRECT */
};

#define NS_BUF_CHANGED 0x0001 /* buf_idx changed (swapped) */
#define NS_REPORT 0x0002
#define NS_FORWARD 0x0004
#define NS_NO_LEARN 0x0008
#define NS_INDIRECT 0x0010
#define NS_MOREFRAG 0x0020 /* on every slot of a packet but its last */
#define NS_TXMON 0x0040
#define NS_PORT_SHIFT 8
#define NS_PORT_MASK (0xff << NS_PORT_SHIFT)
#define NS_RFRAGS(_slot) (((_slot)->flags >> 8) & 0xff)
#define NETMAP_MAX_FRAGS 64

/*
 * A ring: a 256-byte header followed by the slots. head and cur are the
 * application's; tail and everything marked const belong to the port side.
 */
struct netmap_ring {
	const int64_t buf_ofs; /* buffer 0, relative to this ring */
	const uint32_t num_slots;
	const uint32_t nr_buf_size;
	const uint16_t ringid;
	const uint16_t dir; /* 0 tx, 1 rx */
	uint32_t head;      /* first slot owned by the application */
	uint32_t cur;       /* wake-up point */
	const uint32_t tail; /* first slot owned by the port side */
	uint32_t flags;      /* NR_TIMESTAMP, NR_FORWARD */
	uint32_t _rs_pad0;
	struct timeval ts;   /* time of the last rxsync */
	uint64_t offset_mask;
	uint64_t buf_align;
	uint8_t _rs_pad1[56];
	uint8_t sem[128];
	struct netmap_slot slot[0];
};

#define NR_TIMESTAMP 0x0002
#define NR_FORWARD 0x0004

/* The interface descriptor: where a registered port's rings are. */
struct netmap_if {
	char ni_name[16];
	const uint32_t ni_version;
	const uint32_t ni_flags;
	const uint32_t ni_tx_rings;
	const uint32_t ni_rx_rings;
	uint32_t ni_bufs_head;
	const uint32_t ni_host_tx_rings;
	const uint32_t ni_host_rx_rings;
	uint32_t ni_spare1[3];
	/* order: NIC tx, host tx, NIC rx, host rx; relative to this struct */
	const ssize_t ring_ofs[0];
};

#define NI_PRIV_MEM 0x1

/* ---- requests (NIOCCTRL) ---- */

#define NETMAP_REQ_MAXNAMELEN 64

struct nmreq_header {
	uint16_t nr_version;
	uint16_t nr_reqtype;
	uint32_t nr_reserved;
	char nr_name[NETMAP_REQ_MAXNAMELEN];
	uint64_t nr_options; /* pointer to the first struct nmreq_option */
	uint64_t nr_body;    /* pointer to the request body */
};

enum {
	NETMAP_REQ_REGISTER = 1,
	NETMAP_REQ_PORT_INFO_GET = 2,
	NETMAP_REQ_VALE_ATTACH = 3,
	NETMAP_REQ_VALE_DETACH = 4,
	NETMAP_REQ_VALE_LIST = 5,
	NETMAP_REQ_PORT_HDR_SET = 6,
	NETMAP_REQ_PORT_HDR_GET = 7,
	NETMAP_REQ_VALE_NEWIF = 8,
	NETMAP_REQ_VALE_DELIF = 9,
	NETMAP_REQ_VALE_POLLING_ENABLE = 10,
	NETMAP_REQ_VALE_POLLING_DISABLE = 11,
	NETMAP_REQ_POOLS_INFO_GET = 12,
	NETMAP_REQ_SYNC_KLOOP_START = 13,
	NETMAP_REQ_SYNC_KLOOP_STOP = 14,
	NETMAP_REQ_CSB_ENABLE = 15,
};

struct nmreq_register {
	uint64_t nr_offset;  /* out: netmap_if, from the start of the mmap */
	uint64_t nr_memsize; /* out: bytes to mmap */
	uint32_t nr_tx_slots;
	uint32_t nr_rx_slots;
	uint16_t nr_tx_rings;
	uint16_t nr_rx_rings;
	uint16_t nr_host_tx_rings;
	uint16_t nr_host_rx_rings;
	uint16_t nr_mem_id;
	uint16_t nr_ringid;
	uint32_t nr_mode;    /* NR_REG_* */
	uint32_t nr_extra_bufs;
	uint64_t nr_flags;   /* NR_* below */
};

#define NR_MONITOR_TX 0x100
#define NR_MONITOR_RX 0x200
#define NR_ZCOPY_MON 0x400
#define NR_EXCLUSIVE 0x800
#define NR_RX_RINGS_ONLY 0x2000
#define NR_TX_RINGS_ONLY 0x4000
#define NR_ACCEPT_VNET_HDR 0x8000
#define NR_DO_RX_POLL 0x10000
#define NR_NO_TX_POLL 0x20000

enum {
	NR_REG_DEFAULT = 0,
	NR_REG_ALL_NIC = 1,
	NR_REG_SW = 2,
	NR_REG_NIC_SW = 3,
	NR_REG_ONE_NIC = 4,
	NR_REG_PIPE_MASTER = 5,
	NR_REG_PIPE_SLAVE = 6,
	NR_REG_NULL = 7,
	NR_REG_ONE_SW = 8,
};

/* PORT_INFO_GET answers in a register-shaped body. */
struct nmreq_port_info_get {
	uint64_t nr_memsize;
	uint32_t nr_tx_slots;
	uint32_t nr_rx_slots;
	uint16_t nr_tx_rings;
	uint16_t nr_rx_rings;
	uint16_t nr_host_tx_rings;
	uint16_t nr_host_rx_rings;
	uint16_t nr_mem_id;
	uint16_t pad[3];
};

/* PORT_HDR_SET / PORT_HDR_GET: a port's virtio-net header length. */
struct nmreq_port_hdr {
	uint32_t nr_hdr_len; /* 0, 10 or 12 */
	uint32_t nr_reserved;
};

/* ---- the legacy request (NIOCREGIF, NIOCGINFO) ---- */

struct nmreq {
	char nr_name[16];
	uint32_t nr_version;
	uint32_t nr_offset;
	uint32_t nr_memsize;
	uint32_t nr_tx_slots;
	uint32_t nr_rx_slots;
	uint16_t nr_tx_rings;
	uint16_t nr_rx_rings;
	uint16_t nr_ringid;
	uint16_t nr_cmd;
	uint16_t nr_arg1;
	uint16_t nr_arg2;
	uint32_t nr_arg3;
	uint32_t nr_flags; /* NR_REG_* in the low bits */
	uint32_t spare2[1];
};

#define NETMAP_HW_RING 0x4000
#define NETMAP_SW_RING 0x2000
#define NETMAP_NO_TX_POLL 0x1000
#define NETMAP_DO_RX_POLL 0x8000
#define NETMAP_RING_MASK 0x0fff
#define NR_REG_MASK 0xf

/* ---- ioctls ---- */

#define NIOCGINFO _IOWR('i', 145, struct nmreq)
#define NIOCREGIF _IOWR('i', 146, struct nmreq)
#define NIOCTXSYNC _IO('i', 148)
#define NIOCRXSYNC _IO('i', 149)
#define NIOCCTRL _IOWR('i', 151, struct nmreq_header)

/* The layout is the ABI: check it wherever this header is compiled. */
_Static_assert(sizeof(struct netmap_slot) == 16, "netmap_slot is 16 bytes");
_Static_assert(offsetof(struct netmap_ring, head) == 20, "ring head at 20");
_Static_assert(offsetof(struct netmap_ring, ts) == 40, "ring ts at 40");
_Static_assert(offsetof(struct netmap_ring, offset_mask) == 56, "offset_mask at 56");
_Static_assert(offsetof(struct netmap_ring, sem) == 128, "sem at 128");
_Static_assert(offsetof(struct netmap_ring, slot) == 256, "slots at 256");
_Static_assert(offsetof(struct netmap_if, ring_ofs) == 56, "ring_ofs at 56");
_Static_assert(sizeof(struct nmreq_header) == 88, "nmreq_header is 88 bytes");
_Static_assert(sizeof(struct nmreq_register) == 56, "nmreq_register is 56 bytes");
_Static_assert(sizeof(struct nmreq) == 60, "nmreq is 60 bytes");
_Static_assert(sizeof(struct nmreq_port_hdr) == 8, "nmreq_port_hdr is 8 bytes");

#endif /* RINGSWITCH_NET_NETMAP_H */
