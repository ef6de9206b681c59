/*
 * forwarder: zero-copy packet forwarding, as netmap's bridge does.
 *
 *   forwarder [-s SOCKET] [-n MAX] PORT             reflect: every frame goes
 *                                                   back out of PORT
 *   forwarder [-s SOCKET] [-n MAX] PORT_A PORT_B    forward A <-> B
 *
 * A frame moves by exchanging buffer indexes between the RX slot it arrived
 * in and a free TX slot (rs_swap) whenever the two ports share memory: one
 * port, or the two ends of one pipe. Otherwise it is copied. Stops after MAX
 * frames (0: never) or 5 s of silence.
 */
#include <getopt.h>
#include <poll.h>

#include "common.h"

/* Moves what `src` received to `dst`; returns frames moved. */
static long move(rs_port *src, rs_port *dst, int zero_copy)
{
	rs_rxsync(src, 0);
	rs_txsync(dst, 0);
	long n = rs_ring_space(src, RS_RX, 0), room = rs_ring_space(dst, RS_TX, 0);
	if (n > room)
		n = room;
	for (long k = 0; k < n; k++) {
		if (zero_copy) {
			if (rs_swap(src, 0, (uint32_t)k, dst, 0, (uint32_t)k) != 0) {
				fprintf(stderr, "forwarder: %s\n", rs_last_error());
				exit(1);
			}
		} else {
			rs_slot in, out;
			rs_ring_slot(src, RS_RX, 0, (uint32_t)k, &in);
			rs_ring_slot(dst, RS_TX, 0, (uint32_t)k, &out);
			uint32_t len = in.len < out.buf_size ? in.len : out.buf_size;
			memcpy(out.buf, in.buf, len);
			rs_slot_set_len(dst, 0, (uint32_t)k, len);
		}
	}
	if (n > 0) {
		rs_ring_advance(src, RS_RX, 0, (uint32_t)n);
		rs_ring_advance(dst, RS_TX, 0, (uint32_t)n);
		rs_txsync(dst, 0);
		rs_rxsync(src, 0);
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	long max = 0;
	int c;
	while ((c = getopt(argc, argv, "s:n:h")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'n': max = atol(optarg); break;
		default:
			fprintf(stderr, "usage: forwarder [-s SOCKET] [-n MAX] PORT [PORT_B]\n"
					"  one port: reflect every frame; two: forward both ways\n");
			return c == 'h' ? 0 : 2;
		}
	}
	int nports = argc - optind;
	if (nports != 1 && nports != 2) {
		fprintf(stderr, "usage: forwarder [-s SOCKET] [-n MAX] PORT [PORT_B]\n");
		return 2;
	}
	rs_port *a = open_or_die(sock, argv[optind]);
	rs_port *b = nports == 2 ? open_or_die(sock, argv[optind + 1]) : a;
	int zero_copy = rs_port_same_memory(a, b) == 1;
	printf("forwarding %s%s%s, %s\n", argv[optind], nports == 2 ? " <-> " : " (reflect)",
	       nports == 2 ? argv[optind + 1] : "", zero_copy ? "zero copy" : "copying");
	fflush(stdout);
	long total = 0;
	double last = now_s();
	struct pollfd pfd[2] = { { .fd = rs_port_poll_fd(a), .events = POLLIN },
				 { .fd = rs_port_poll_fd(b), .events = POLLIN } };
	while (max == 0 || total < max) {
		long n = move(a, b, zero_copy);
		if (b != a)
			n += move(b, a, zero_copy);
		total += n;
		if (n > 0) {
			last = now_s();
			continue;
		}
		if (now_s() - last > 5)
			break;
		/* Nothing to do: ask for interrupts, look once more, sleep. */
		int ready = rs_port_prepare_wait(a, 1, 1);
		if (b != a)
			ready |= rs_port_prepare_wait(b, 1, 1);
		if (!ready)
			poll(pfd, b != a ? 2 : 1, 500);
		rs_port_after_wait(a);
		if (b != a)
			rs_port_after_wait(b);
	}
	/* Hand over what is still queued before closing. */
	rs_port_flush(a, 2000);
	if (b != a)
		rs_port_flush(b, 2000);
	printf("forwarded %ld\n", total);
	if (b != a)
		rs_port_close(b);
	rs_port_close(a);
	return 0;
}
