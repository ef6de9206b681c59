/*
 * ringswitch's netmap compatibility: libnetmap's port API. Link with
 * -lringswitch_netmap. A port descriptor wraps an emulated /dev/netmap
 * file descriptor: ioctl(NIOCTXSYNC/NIOCRXSYNC) and poll() on d->fd behave
 * as on netmap.
 *
 *   struct nmport_d *d = nmport_open("vale0:a");
 *   struct netmap_ring *tx = NETMAP_TXRING(d->nifp, d->first_tx_ring);
 *   ... fill slots, advance tx->head and tx->cur ...
 *   ioctl(d->fd, NIOCTXSYNC, NULL);
 *   nmport_close(d);
 *
 * Port names: vale0:a, pipe{1 / pipe}1, with an optional ring suffix
 * (-N: ring N only; /T or /R: TX or RX rings only) and @conf:rings=N,
 * slots=M,buf-size=B sizes for a port this open creates.
 */
#ifndef RINGSWITCH_LIBNETMAP_H
#define RINGSWITCH_LIBNETMAP_H

#include <stddef.h>
#include <stdint.h>
#include <net/netmap_user.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nmport_d {
	struct nmreq_header hdr;
	struct nmreq_register reg;
	int register_done; /* nmport_register succeeded */
	int mmap_done;     /* nmport_mmap succeeded */
	int fd;            /* the port's /dev/netmap descriptor, -1 if none */
	int _rs_pad;
	void *mem;         /* the mmap'ed region */
	uint64_t memsize;
	struct netmap_if *nifp;
	uint16_t first_tx_ring;
	uint16_t last_tx_ring;
	uint16_t first_rx_ring;
	uint16_t last_rx_ring;
	uint16_t cur_tx_ring; /* where nmport_inject looks first */
	uint16_t cur_rx_ring;
	uint32_t _rs_reserved[5];
};

/* Allocates an empty descriptor (NULL and errno on failure). */
struct nmport_d *nmport_new(void);
/* Frees a descriptor made by nmport_new or nmport_prepare. */
void nmport_delete(struct nmport_d *d);
/* Parses a port spec into d->hdr and d->reg. 0, or -1 and errno. */
int nmport_parse(struct nmport_d *d, const char *portspec);
/* nmport_new + nmport_parse. */
struct nmport_d *nmport_prepare(const char *portspec);
/* Opens /dev/netmap and registers the parsed port. 0, or -1 and errno. */
int nmport_register(struct nmport_d *d);
/* Maps the registered port's memory and fills nifp and the ring range. */
int nmport_mmap(struct nmport_d *d);
/* nmport_register + nmport_mmap. */
int nmport_open_desc(struct nmport_d *d);
/* nmport_prepare + nmport_open_desc (NULL and errno on failure). */
struct nmport_d *nmport_open(const char *portspec);
/* Unmaps, closes and frees. */
void nmport_close(struct nmport_d *d);
/* Reverses nmport_mmap, nmport_register, nmport_open_desc, nmport_prepare. */
void nmport_undo_mmap(struct nmport_d *d);
void nmport_undo_register(struct nmport_d *d);
void nmport_undo_open_desc(struct nmport_d *d);
void nmport_undo_prepare(struct nmport_d *d);
/*
 * Copies one frame into the first TX ring with room, starting at
 * cur_tx_ring, and advances it (no sync). Returns size, or 0 when every
 * bound TX ring is full or the frame is larger than a buffer.
 */
int nmport_inject(struct nmport_d *d, const void *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* RINGSWITCH_LIBNETMAP_H */
