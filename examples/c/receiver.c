/*
 * receiver: counts frames arriving on a ringswitch port until COUNT have
 * arrived or nothing came for TIMEOUT seconds, reading them in place.
 * Exits 1 if fewer than COUNT arrived.
 *
 *   receiver [-s SOCKET] [-t TIMEOUT] PORT COUNT
 */
#include <getopt.h>

#include "common.h"

int main(int argc, char **argv)
{
	const char *sock = NULL;
	int timeout_s = 5;
	int c;
	while ((c = getopt(argc, argv, "s:t:h")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 't': timeout_s = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: receiver [-s SOCKET] [-t TIMEOUT] PORT COUNT\n"
					"  counts COUNT frames; gives up after TIMEOUT s (default 5) of silence\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: receiver [-s SOCKET] [-t TIMEOUT] PORT COUNT\n");
		return 2;
	}
	long count = atol(argv[optind + 1]), got = 0;
	unsigned long long bytes = 0;
	rs_port *p = open_or_die(sock, argv[optind]);
	double t0 = 0, t1 = 0;
	while (got < count) {
		int r = rs_wait_rx(p, 0, timeout_s * 1000);
		if (r < 0) {
			fprintf(stderr, "receiver: %s\n", rs_last_error());
			return 1;
		}
		if (r == 0)
			break; /* silence */
		long n = rs_ring_space(p, RS_RX, 0);
		for (long k = 0; k < n; k++) {
			rs_slot s;
			if (rs_ring_slot(p, RS_RX, 0, (uint32_t)k, &s) == 0)
				bytes += s.len;
		}
		if (got == 0)
			t0 = now_s();
		got += n;
		t1 = now_s();
		rs_ring_advance(p, RS_RX, 0, (uint32_t)n);
		rs_rxsync(p, 0);
	}
	printf("received %ld\n", got);
	printf("bytes %llu\n", bytes);
	printf("rate %.3f Mpps\n", t1 > t0 ? got / (t1 - t0) / 1e6 : 0.0);
	rs_port_close(p);
	return got >= count ? 0 : 1;
}
