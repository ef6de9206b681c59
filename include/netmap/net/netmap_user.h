/*
 * ringswitch's netmap compatibility header: the helpers netmap programs use
 * to walk from the mmap'ed region to rings, slots and buffers. They are
 * plain pointer arithmetic on netmap's layout (see net/netmap.h), so they
 * work unchanged on ringswitch's shared memory.
 */
#ifndef RINGSWITCH_NET_NETMAP_USER_H
#define RINGSWITCH_NET_NETMAP_USER_H

#include <stdint.h>
#include <string.h>
#include <net/netmap.h>

#define _NETMAP_OFFSET(type, ptr, offset) \
	((type)(void *)((char *)(ptr) + (offset)))

/* The netmap_if of a registration: mmap base + nr_offset. */
#define NETMAP_IF(_base, _ofs) _NETMAP_OFFSET(struct netmap_if *, _base, _ofs)

#define NETMAP_TXRING(nifp, index) \
	_NETMAP_OFFSET(struct netmap_ring *, nifp, (nifp)->ring_ofs[index])

#define NETMAP_RXRING(nifp, index)                                        \
	_NETMAP_OFFSET(struct netmap_ring *, nifp,                        \
		       (nifp)->ring_ofs[(index) + (nifp)->ni_tx_rings +   \
					(nifp)->ni_host_tx_rings])

/* The buffer with index `index`, and the index of a buffer address. */
#define NETMAP_BUF(ring, index) \
	((char *)(ring) + (ring)->buf_ofs + ((size_t)(index) * (ring)->nr_buf_size))

#define NETMAP_BUF_IDX(ring, buf)                                          \
	((uint32_t)(((char *)(buf) - ((char *)(ring) + (ring)->buf_ofs)) / \
		    (ring)->nr_buf_size))

/* The slot after i, wrapping at the end of the ring. */
static inline uint32_t nm_ring_next(struct netmap_ring *r, uint32_t i)
{
	return i + 1 == r->num_slots ? 0 : i + 1;
}

/*
 * Slots the application may use past cur: packets to read on an RX ring,
 * free slots on a TX ring.
 */
static inline uint32_t nm_ring_space(struct netmap_ring *r)
{
	int32_t n = (int32_t)r->tail - (int32_t)r->cur;
	if (n < 0)
		n += (int32_t)r->num_slots;
	return (uint32_t)n;
}

/* Nothing to read (RX) or no room to write (TX). */
static inline int nm_ring_empty(struct netmap_ring *r)
{
	return r->cur == r->tail;
}

/* A TX ring still holds packets the port side has not sent. */
static inline int nm_tx_pending(struct netmap_ring *r)
{
	return nm_ring_next(r, r->tail) != r->head;
}

/* Copies a packet between buffers; both are at least nr_buf_size long. */
static inline void nm_pkt_copy(const void *src, void *dst, int len)
{
	if (len > 0)
		memcpy(dst, src, (size_t)len);
}

#ifdef NETMAP_WITH_LIBS
/*
 * The nm_open helpers. In netmap they are inline here; with ringswitch they
 * are functions of libringswitch_netmap (link -lringswitch_netmap).
 */
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nm_desc;

struct nm_pkthdr {
	struct timeval ts;
	uint32_t caplen;
	uint32_t len;
	uint64_t flags;
	struct nm_desc *d;
	struct netmap_slot *slot;
	uint8_t *buf;
};

struct nm_stat {
	unsigned int ps_recv;
	unsigned int ps_drop;
	unsigned int ps_ifdrop;
};

#define NM_ERRBUF_SIZE 512

struct nm_desc {
	struct nm_desc *self; /* points to itself while open */
	int fd;
	void *mem;
	uint64_t memsize;
	int done_mmap;
	struct netmap_if *const nifp;
	uint16_t first_tx_ring, last_tx_ring, cur_tx_ring;
	uint16_t first_rx_ring, last_rx_ring, cur_rx_ring;
	struct nmreq req;
	struct nm_pkthdr hdr;
	const struct netmap_ring *const some_ring;
	const void *const buf_start;
	const void *const buf_end;
	int snaplen;
	int promisc;
	int to_ms;
	char *errbuf;
	uint32_t if_flags;
	uint32_t if_reqcap;
	uint32_t if_curcap;
	struct nm_stat st;
	char msg[NM_ERRBUF_SIZE];
};

_Static_assert(sizeof(struct nm_pkthdr) == 56, "nm_pkthdr is 56 bytes");
_Static_assert(sizeof(struct nm_desc) == 760, "nm_desc is 760 bytes");

#define NETMAP_FD(d) ((d)->fd)

/* Accepted and ignored: every descriptor maps its own port. */
#define NM_OPEN_NO_MMAP 0x040000
#define NM_OPEN_IFNAME 0x080000
#define NM_OPEN_ARG1 0x100000
#define NM_OPEN_ARG2 0x200000
#define NM_OPEN_ARG3 0x400000
#define NM_OPEN_RING_CFG 0x800000

typedef void (*nm_cb_t)(unsigned char *, const struct nm_pkthdr *, const unsigned char *);

/* Opens a port spec (vale0:a, pipe{1, with -N, /T, /R, @conf:). NULL and
 * errno on failure. */
struct nm_desc *nm_open(const char *ifname, const struct nmreq *req, uint64_t flags,
			const struct nm_desc *arg);
/* Unmaps and closes; 0, or -1 with EINVAL. */
int nm_close(struct nm_desc *d);
/* Copies a frame into a TX ring with room (no sync): size, or 0. */
int nm_inject(struct nm_desc *d, const void *buf, size_t size);
/* Calls cb for up to cnt received frames (cnt <= 0: all there are), no
 * sync; returns how many. */
int nm_dispatch(struct nm_desc *d, int cnt, nm_cb_t cb, unsigned char *arg);
/* The next received frame or NULL (no sync). */
unsigned char *nm_nextpkt(struct nm_desc *d, struct nm_pkthdr *hdr);

#ifdef __cplusplus
}
#endif
#endif /* NETMAP_WITH_LIBS */

#endif /* RINGSWITCH_NET_NETMAP_USER_H */
