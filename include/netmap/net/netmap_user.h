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

#endif /* RINGSWITCH_NET_NETMAP_USER_H */
