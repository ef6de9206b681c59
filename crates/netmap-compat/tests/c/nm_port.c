/*
 * A libnetmap program: nmport_open, nmport_inject, NIOCTXSYNC, poll and the
 * ring macros over d->first_*_ring..d->last_*_ring.
 *
 *   nm_port tx|rx SPEC COUNT
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include <libnetmap.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: nm_port tx|rx SPEC COUNT\n");
		return 2;
	}
	int tx = strcmp(argv[1], "tx") == 0;
	long count = atol(argv[3]), done = 0;
	struct nmport_d *d = nmport_open(argv[2]);
	if (d == NULL) {
		perror(argv[2]);
		return 1;
	}
	struct pollfd p = { .fd = d->fd, .events = tx ? POLLOUT : POLLIN };
	int idle = 0;
	if (tx) {
		unsigned char frame[60];
		memset(frame, 0, sizeof(frame));
		memset(frame, 0xff, 6);
		memcpy(frame + 6, "\x02\x00\x00\x00\x00\x02", 6);
		while (done < count) {
			if (nmport_inject(d, frame, sizeof(frame)) == sizeof(frame)) {
				done++;
				continue;
			}
			/* Every bound ring is full: poll hands them over and waits. */
			if (poll(&p, 1, 1000) <= 0 && ++idle > 5)
				break;
		}
		for (int k = 0; k < 5000; k++) {
			ioctl(d->fd, NIOCTXSYNC, NULL);
			int pending = 0;
			for (int ri = d->first_tx_ring; ri <= d->last_tx_ring; ri++)
				pending |= nm_tx_pending(NETMAP_TXRING(d->nifp, ri));
			if (!pending)
				break;
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
		}
		printf("sent %ld\n", done);
	} else {
		while (done < count) {
			if (poll(&p, 1, 1000) <= 0) {
				if (++idle > 5)
					break;
				continue;
			}
			for (int ri = d->first_rx_ring; ri <= d->last_rx_ring; ri++) {
				struct netmap_ring *ring = NETMAP_RXRING(d->nifp, ri);
				while (!nm_ring_empty(ring)) {
					done++;
					ring->head = ring->cur = nm_ring_next(ring, ring->cur);
				}
			}
		}
		printf("received %ld\n", done);
	}
	nmport_close(d);
	return done == count ? 0 : 1;
}
