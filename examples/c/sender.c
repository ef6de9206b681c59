/*
 * sender: sends COUNT frames of LEN bytes on a ringswitch port, filling the
 * ring's slots in place (zero copy into the port's memory), one sync per
 * batch, sleeping (not spinning) when the ring is full.
 *
 *   sender [-s SOCKET] [-l LEN] [-d DSTMAC] PORT COUNT
 */
#include <getopt.h>

#include "common.h"

int main(int argc, char **argv)
{
	const char *sock = NULL;
	unsigned len = 60;
	unsigned char dst[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	int c;
	while ((c = getopt(argc, argv, "s:l:d:h")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'l': len = (unsigned)atoi(optarg); break;
		case 'd':
			if (sscanf(optarg, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &dst[0], &dst[1], &dst[2],
				   &dst[3], &dst[4], &dst[5]) != 6) {
				fprintf(stderr, "sender: -d wants a MAC like 02:00:00:00:00:01\n");
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: sender [-s SOCKET] [-l LEN] [-d DSTMAC] PORT COUNT\n"
					"  sends COUNT frames (broadcast unless -d) of LEN bytes (default 60)\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (argc - optind != 2 || len < 14) {
		fprintf(stderr, "usage: sender [-s SOCKET] [-l LEN>=14] [-d DSTMAC] PORT COUNT\n");
		return 2;
	}
	long count = atol(argv[optind + 1]), sent = 0;
	rs_port *p = open_or_die(sock, argv[optind]);
	rs_geometry g;
	rs_port_geometry(p, &g);
	if (len > g.buf_size) {
		fprintf(stderr, "sender: %u bytes do not fit the port's %u-byte buffers\n", len, g.buf_size);
		return 2;
	}
	double t0 = now_s();
	while (sent < count) {
		if (rs_wait_tx(p, 0, 1000) <= 0)
			continue;
		long n = rs_ring_space(p, RS_TX, 0);
		if (n > count - sent)
			n = count - sent;
		for (long k = 0; k < n; k++) {
			rs_slot s;
			if (rs_ring_slot(p, RS_TX, 0, (uint32_t)k, &s) != 0) {
				fprintf(stderr, "sender: %s\n", rs_last_error());
				return 1;
			}
			unsigned char *f = s.buf;
			memcpy(f, dst, 6);
			memcpy(f + 6, "\x02\x00\x00\x00\x00\x0a", 6);
			f[12] = 0x88, f[13] = 0xb5; /* local experimental ethertype */
			long seq = sent + k;
			memcpy(f + 14, &seq, len - 14 < sizeof(seq) ? len - 14 : sizeof(seq));
			rs_slot_set_len(p, 0, (uint32_t)k, len);
		}
		rs_ring_advance(p, RS_TX, 0, (uint32_t)n);
		rs_txsync(p, 0);
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
