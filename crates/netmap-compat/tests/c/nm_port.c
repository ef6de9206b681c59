/*
 * A libnetmap program: nmport_open, nmport_inject, NIOCTXSYNC, poll and the
 * ring macros over d->first_*_ring..d->last_*_ring.
 *
 *   nm_port tx|rx SPEC[+SPEC...] COUNT
 *
 * With several specs (one ring each, like the threads of pkt-gen -p), the
 * program holds one descriptor per spec and goes round them.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include <libnetmap.h>

#define MAXD 16

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: nm_port tx|rx SPEC[+SPEC...] COUNT\n");
		return 2;
	}
	int tx = strcmp(argv[1], "tx") == 0;
	long count = atol(argv[3]), done = 0;
	struct nmport_d *ds[MAXD];
	struct pollfd p[MAXD];
	int nd = 0;
	for (char *spec = strtok(argv[2], "+"); spec && nd < MAXD; spec = strtok(NULL, "+")) {
		ds[nd] = nmport_open(spec);
		if (ds[nd] == NULL) {
			perror(spec);
			return 1;
		}
		p[nd].fd = ds[nd]->fd;
		p[nd].events = tx ? POLLOUT : POLLIN;
		nd++;
	}
	int idle = 0;
	if (tx) {
		unsigned char frame[60];
		memset(frame, 0, sizeof(frame));
		memset(frame, 0xff, 6);
		memcpy(frame + 6, "\x02\x00\x00\x00\x00\x02", 6);
		int k = 0;
		while (done < count) {
			int sent = 0;
			for (int j = 0; j < nd && done < count; j++, k++)
				if (nmport_inject(ds[k % nd], frame, sizeof(frame)) == sizeof(frame))
					done++, sent++;
			if (sent)
				continue;
			/* Every bound ring is full: poll hands them over and waits. */
			if (poll(p, nd, 1000) <= 0 && ++idle > 5)
				break;
		}
		for (int j = 0; j < nd; j++) {
			struct nmport_d *d = ds[j];
			for (int k2 = 0; k2 < 5000; k2++) {
				ioctl(d->fd, NIOCTXSYNC, NULL);
				int pending = 0;
				for (int ri = d->first_tx_ring; ri <= d->last_tx_ring; ri++)
					pending |= nm_tx_pending(NETMAP_TXRING(d->nifp, ri));
				if (!pending)
					break;
				struct timespec ms = { 0, 1000000 };
				nanosleep(&ms, NULL);
			}
		}
		printf("sent %ld\n", done);
	} else {
		while (done < count) {
			if (poll(p, nd, 1000) <= 0) {
				if (++idle > 5)
					break;
				continue;
			}
			for (int j = 0; j < nd; j++) {
				struct nmport_d *d = ds[j];
				for (int ri = d->first_rx_ring; ri <= d->last_rx_ring; ri++) {
					struct netmap_ring *ring = NETMAP_RXRING(d->nifp, ri);
					while (!nm_ring_empty(ring)) {
						done++;
						ring->head = ring->cur = nm_ring_next(ring, ring->cur);
					}
				}
			}
		}
		printf("received %ld\n", done);
	}
	for (int j = 0; j < nd; j++)
		nmport_close(ds[j]);
	return done == count ? 0 : 1;
}
