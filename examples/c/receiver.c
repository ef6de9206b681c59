/*
 * receiver: counts the frames arriving on RX ring 0 of a ringswitch port
 * until COUNT have arrived or nothing came for TIMEOUT seconds, reading
 * them in place, sleeping (not spinning) while the ring is empty. Prints
 * the count, the bytes and the rate; exits 1 if fewer than COUNT arrived.
 *
 *   receiver [-s SOCKET] [-t TIMEOUT] [-b] PORT COUNT
 */
#include <getopt.h>

#include "common.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: receiver [-s SOCKET] [-t TIMEOUT] [-b] PORT COUNT\n"
		   "  counts COUNT frames on RX ring 0; exits 1 if fewer arrive\n"
		   "  -s SOCKET   the daemon's socket (default: $RINGSWITCH_SOCKET, else the system one)\n"
		   "  -t TIMEOUT  give up after TIMEOUT seconds of silence (default 5)\n"
		   "  -b          spin instead of sleeping while the ring is empty\n");
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	unsigned long timeout_s = 5;
	int busy = 0, c;
	while ((c = getopt(argc, argv, "s:t:bh")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 't': timeout_s = parse_count(optarg, "-t"); break;
		case 'b': busy = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2 || timeout_s > 86400) {
		usage(stderr);
		return 2;
	}
	long count = (long)parse_count(argv[optind + 1], "COUNT"), got = 0;
	unsigned long long bytes = 0;
	rs_port *p = open_or_die(sock, argv[optind]);
	if (busy)
		rs_port_set_busy_wait(p, 1);
	double t0 = 0, t1 = 0;
	while (got < count) {
		int r = rs_wait_rx(p, 0, (int)timeout_s * 1000);
		if (r < 0)
			die("receiver");
		if (r == 0)
			break; /* silence */
		long n = rs_ring_space(p, RS_RX, 0);
		if (n < 0)
			die("receiver");
		for (long k = 0; k < n; k++) {
			rs_slot s;
			if (rs_ring_slot(p, RS_RX, 0, (uint32_t)k, &s) != 0)
				die("receiver");
			bytes += s.len; /* the frame is at s.buf, in place */
		}
		if (got == 0)
			t0 = now_s();
		got += n;
		t1 = now_s();
		if (rs_ring_advance(p, RS_RX, 0, (uint32_t)n) != 0 || rs_rxsync(p, 0) != 0)
			die("receiver");
	}
	printf("received %ld\n", got);
	printf("bytes %llu\n", bytes);
	printf("rate %.3f Mpps\n", t1 > t0 ? got / (t1 - t0) / 1e6 : 0.0);
	rs_port_close(p);
	return got >= count ? 0 : 1;
}
