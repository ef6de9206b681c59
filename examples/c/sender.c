/*
 * sender: sends COUNT Ethernet frames of LEN bytes on TX ring 0 of a
 * ringswitch port, filling the ring's slots in place (no copy through a
 * staging buffer), one sync per batch, sleeping (not spinning) while the
 * ring is full. Prints the count and the rate.
 *
 *   sender [-s SOCKET] [-l LEN] [-d DSTMAC] [-R PPS] [-b] PORT COUNT
 */
#include <getopt.h>

#include "common.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sender [-s SOCKET] [-l LEN] [-d DSTMAC] [-R PPS] [-b] PORT COUNT\n"
		   "  sends COUNT frames of LEN bytes (default 60, at least 14) on TX ring 0\n"
		   "  -s SOCKET  the daemon's socket (default: $RINGSWITCH_SOCKET, else the system one)\n"
		   "  -d DSTMAC  destination, as 02:00:00:00:00:01 (default: broadcast)\n"
		   "  -R PPS     at most PPS frames per second (default: as fast as it goes)\n"
		   "  -b         spin instead of sleeping while the ring is full\n");
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	unsigned long len = 60, pps = 0;
	unsigned char dst[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	const unsigned char src[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a };
	int busy = 0, c;
	while ((c = getopt(argc, argv, "s:l:d:R:bh")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'l': len = parse_count(optarg, "-l"); break;
		case 'R': pps = parse_count(optarg, "-R"); break;
		case 'b': busy = 1; break;
		case 'd':
			if (sscanf(optarg, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &dst[0], &dst[1], &dst[2],
				   &dst[3], &dst[4], &dst[5]) != 6) {
				fprintf(stderr, "sender: -d wants a MAC like 02:00:00:00:00:01\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2 || len < 14) {
		usage(stderr);
		return 2;
	}
	long count = (long)parse_count(argv[optind + 1], "COUNT"), sent = 0;
	rs_port *p = open_or_die(sock, argv[optind]);
	rs_geometry g;
	if (rs_port_geometry(p, &g) != 0)
		die("sender");
	if (len > g.buf_size) {
		fprintf(stderr, "sender: %lu bytes do not fit the port's %u-byte buffers\n", len,
			g.buf_size);
		return 2;
	}
	if (busy)
		rs_port_set_busy_wait(p, 1);
	/* Paced: batches of about a millisecond of traffic. */
	long batch_max = pps ? (long)(pps / 1000 + 1) : (long)g.tx_slots;
	double t0 = now_s();
	while (sent < count) {
		if (pps) {
			double due = t0 + (double)sent / (double)pps, wait = due - now_s();
			if (wait > 0)
				sleep_s(wait);
		}
		int r = rs_wait_tx(p, 0, 1000);
		if (r < 0)
			die("sender");
		if (r == 0)
			continue; /* still full: the receiver is slow */
		long n = rs_ring_space(p, RS_TX, 0);
		if (n < 0)
			die("sender");
		if (n > count - sent)
			n = count - sent;
		if (n > batch_max)
			n = batch_max;
		for (long k = 0; k < n; k++) {
			rs_slot s;
			if (rs_ring_slot(p, RS_TX, 0, (uint32_t)k, &s) != 0)
				die("sender");
			/* The buffer may have come from anywhere (buffers move between
			 * rings): write the whole header every time. */
			unsigned char *f = s.buf;
			memcpy(f, dst, 6);
			memcpy(f + 6, src, 6);
			f[12] = 0x88, f[13] = 0xb5; /* IEEE local experimental ethertype */
			long seq = sent + k;
			memcpy(f + 14, &seq, len - 14 < sizeof(seq) ? len - 14 : sizeof(seq));
			if (rs_slot_set_len(p, 0, (uint32_t)k, (uint32_t)len) != 0)
				die("sender");
		}
		if (rs_ring_advance(p, RS_TX, 0, (uint32_t)n) != 0 || rs_txsync(p, 0) != 0)
			die("sender");
		sent += n;
	}
	/* A pipe never drops: wait until the other end took everything. */
	if (rs_port_flush(p, 5000) != 1)
		fprintf(stderr, "sender: %ld frames still queued after 5 s\n", (long)rs_tx_pending(p, 0));
	double dt = now_s() - t0;
	printf("sent %ld\n", sent);
	printf("rate %.3f Mpps\n", dt > 0 ? sent / dt / 1e6 : 0.0);
	rs_port_close(p);
	return 0;
}
