/*
 * A program on netmap's older helper API (NETMAP_WITH_LIBS): nm_open,
 * nm_inject, nm_dispatch, nm_nextpkt, nm_close, with poll on NETMAP_FD.
 *
 *   nm_legacy tx|rx|rxnext IFNAME COUNT
 */
#define NETMAP_WITH_LIBS
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <net/netmap_user.h>

static long got;

static void count_frame(unsigned char *arg, const struct nm_pkthdr *h, const unsigned char *buf)
{
	(void)arg;
	if (h->len >= 14 && buf[0] == 0xff)
		got++;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: nm_legacy tx|rx|rxnext IFNAME COUNT\n");
		return 2;
	}
	long count = atol(argv[3]);
	struct nm_desc *d = nm_open(argv[2], NULL, 0, NULL);
	if (d == NULL) {
		perror(argv[2]);
		return 1;
	}
	struct pollfd p = { .fd = NETMAP_FD(d) };
	int idle = 0;
	if (!strcmp(argv[1], "tx")) {
		unsigned char frame[60] = { 0 };
		memset(frame, 0xff, 6);
		long sent = 0;
		p.events = POLLOUT;
		while (sent < count) {
			if (nm_inject(d, frame, sizeof(frame)) == sizeof(frame)) {
				sent++;
				continue;
			}
			if (poll(&p, 1, 1000) <= 0 && ++idle > 5)
				break;
		}
		for (int k = 0; k < 5000; k++) {
			ioctl(NETMAP_FD(d), NIOCTXSYNC, NULL);
			struct netmap_ring *r = NETMAP_TXRING(d->nifp, d->first_tx_ring);
			if (!nm_tx_pending(r))
				break;
			poll(NULL, 0, 1);
		}
		printf("sent %ld\n", sent);
		got = sent;
	} else {
		int next = !strcmp(argv[1], "rxnext");
		p.events = POLLIN;
		while (got < count) {
			if (poll(&p, 1, 1000) <= 0) {
				if (++idle > 5)
					break;
				continue;
			}
			if (next) {
				struct nm_pkthdr h;
				unsigned char *buf;
				while ((buf = nm_nextpkt(d, &h)) != NULL)
					count_frame(NULL, &h, buf);
			} else {
				nm_dispatch(d, 0, count_frame, NULL);
			}
		}
		printf("received %ld\n", got);
	}
	if (nm_close(d) != 0) {
		perror("nm_close");
		return 1;
	}
	return got == count ? 0 : 1;
}
