/*
 * A load balancer in the manner of netmap's lb, written for this suite: it
 * opens a switch port, then NPIPES output pipes PORT{K/xT@ID in the port's
 * memory (ID: the port's nr_mem_id), checks that libnetmap gave them the
 * port's mapping, and hands every frame the port receives to the pipes in
 * turn by swapping buffer indexes (NS_BUF_CHANGED): no frame is copied.
 *
 *   nm_lb PORT NPIPES COUNT
 *
 * Prints "ready" once the pipes are open, and "forwarded N" after COUNT
 * frames went out and the pipes' peers took them all.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <libnetmap.h>

#define MAXP 16

/* Frames handed to the pipe's ring and not yet taken by its peer. */
static unsigned pending(struct netmap_ring *r)
{
	return nm_ring_next(r, r->tail) == r->head ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: nm_lb PORT NPIPES COUNT\n");
		return 2;
	}
	int np = atoi(argv[2]);
	long count = atol(argv[3]), done = 0;
	if (np < 1 || np > MAXP) {
		fprintf(stderr, "nm_lb: 1 to %d pipes\n", MAXP);
		return 2;
	}
	struct nmport_d *in = nmport_open(argv[1]);
	if (in == NULL) {
		perror(argv[1]);
		return 1;
	}
	struct nmport_d *out[MAXP];
	for (int k = 0; k < np; k++) {
		char name[128];
		snprintf(name, sizeof(name), "%s{%d/xT@%d", in->hdr.nr_name, k,
			 in->reg.nr_mem_id);
		out[k] = nmport_open(name);
		if (out[k] == NULL) {
			perror(name);
			return 1;
		}
		if (out[k]->mem != in->mem) {
			fprintf(stderr, "nm_lb: %s is not in the port's memory\n", name);
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);

	struct netmap_ring *rx = NETMAP_RXRING(in->nifp, 0);
	struct pollfd pin = { .fd = in->fd, .events = POLLIN };
	int k = 0;
	while (done < count) {
		if (nm_ring_empty(rx)) {
			if (poll(&pin, 1, 60000) <= 0) {
				fprintf(stderr, "nm_lb: nothing came for a minute (%ld of %ld)\n",
					done, count);
				return 1;
			}
			continue;
		}
		while (!nm_ring_empty(rx) && done < count) {
			struct netmap_ring *tx = NETMAP_TXRING(out[k]->nifp, 0);
			while (nm_ring_space(tx) == 0) {
				struct pollfd po = { .fd = out[k]->fd, .events = POLLOUT };
				if (poll(&po, 1, 60000) <= 0) {
					fprintf(stderr, "nm_lb: pipe %d stayed full\n", k);
					return 1;
				}
			}
			struct netmap_slot *rs = &rx->slot[rx->head];
			struct netmap_slot *ts = &tx->slot[tx->head];
			uint32_t spare = ts->buf_idx;
			ts->buf_idx = rs->buf_idx;
			ts->len = rs->len;
			ts->flags = NS_BUF_CHANGED;
			rs->buf_idx = spare;
			rs->flags = NS_BUF_CHANGED;
			tx->head = tx->cur = nm_ring_next(tx, tx->head);
			rx->head = rx->cur = nm_ring_next(rx, rx->head);
			done++;
			k = (k + 1) % np;
		}
		for (int j = 0; j < np; j++)
			ioctl(out[j]->fd, NIOCTXSYNC, NULL);
	}
	/* Until every pipe's peer took what it was handed. */
	for (int j = 0; j < np; j++) {
		struct netmap_ring *tx = NETMAP_TXRING(out[j]->nifp, 0);
		while (pending(tx)) {
			struct pollfd po = { .fd = out[j]->fd, .events = POLLOUT };
			ioctl(out[j]->fd, NIOCTXSYNC, NULL);
			if (pending(tx) && poll(&po, 1, 60000) <= 0) {
				fprintf(stderr, "nm_lb: pipe %d was not emptied\n", j);
				return 1;
			}
		}
	}
	printf("forwarded %ld\n", done);
	for (int j = 0; j < np; j++)
		nmport_close(out[j]);
	nmport_close(in);
	return 0;
}
