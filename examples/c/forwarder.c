/*
 * forwarder: zero-copy packet forwarding, as netmap's bridge does.
 *
 *   forwarder [-s SOCKET] [-n MAX] [-t TIMEOUT] [-b] PORT           reflect
 *   forwarder [-s SOCKET] [-n MAX] [-t TIMEOUT] [-b] PORT_A PORT_B  A <-> B
 *
 * With one port every frame goes back out of the port it came in on; with
 * two, frames from A go out of B and frames from B out of A, ring i to
 * ring i. A frame moves by exchanging buffer indexes between the RX slot it
 * arrived in and a free TX slot (rs_swap) whenever the two ports share
 * memory: one port, or the two ends of one pipe. Otherwise it is copied.
 * Sleeps on the ports' descriptors when there is nothing to do. Stops after
 * MAX frames (default 0: never) or TIMEOUT seconds of silence (default 0:
 * never).
 */
#include <getopt.h>
#include <poll.h>

#include "common.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: forwarder [-s SOCKET] [-n MAX] [-t TIMEOUT] [-b] PORT [PORT_B]\n"
		   "  one port: reflect every frame back out of it; two: forward both ways\n"
		   "  -s SOCKET   the daemon's socket (default: $RINGSWITCH_SOCKET, else the system one)\n"
		   "  -n MAX      stop after MAX frames (default: never)\n"
		   "  -t TIMEOUT  stop after TIMEOUT seconds without a frame (default: never)\n"
		   "  -b          spin instead of sleeping when idle\n");
}

/* Moves what `src` received to `dst`, ring by ring; returns frames moved,
 * and sets *blocked when frames wait for room in `dst`. */
static long move(rs_port *src, rs_port *dst, int zero_copy, int *blocked)
{
	rs_geometry gs, gd;
	if (rs_port_geometry(src, &gs) != 0 || rs_port_geometry(dst, &gd) != 0)
		die("forwarder");
	uint32_t rings = gs.rx_rings < gd.tx_rings ? gs.rx_rings : gd.tx_rings;
	long moved = 0;
	for (uint32_t r = 0; r < rings; r++) {
		if (rs_rxsync(src, r) != 0 || rs_txsync(dst, r) != 0)
			die("forwarder");
		long n = rs_ring_space(src, RS_RX, r), room = rs_ring_space(dst, RS_TX, r);
		if (n > room) {
			n = room;
			*blocked = 1;
		}
		if (n <= 0)
			continue;
		for (long k = 0; k < n; k++) {
			if (zero_copy) {
				if (rs_swap(src, r, (uint32_t)k, dst, r, (uint32_t)k) != 0)
					die("forwarder");
				continue;
			}
			rs_slot in, out;
			if (rs_ring_slot(src, RS_RX, r, (uint32_t)k, &in) != 0 ||
			    rs_ring_slot(dst, RS_TX, r, (uint32_t)k, &out) != 0)
				die("forwarder");
			uint32_t len = in.len < out.buf_size ? in.len : out.buf_size;
			memcpy(out.buf, in.buf, len);
			if (rs_slot_set_len(dst, r, (uint32_t)k, len) != 0)
				die("forwarder");
		}
		if (rs_ring_advance(src, RS_RX, r, (uint32_t)n) != 0 ||
		    rs_ring_advance(dst, RS_TX, r, (uint32_t)n) != 0 || rs_txsync(dst, r) != 0 ||
		    rs_rxsync(src, r) != 0)
			die("forwarder");
		moved += n;
	}
	return moved;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	unsigned long max = 0, timeout_s = 0;
	int busy = 0, c;
	while ((c = getopt(argc, argv, "s:n:t:bh")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'n': max = parse_count(optarg, "-n"); break;
		case 't': timeout_s = parse_count(optarg, "-t"); break;
		case 'b': busy = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	int nports = argc - optind;
	if (nports != 1 && nports != 2) {
		usage(stderr);
		return 2;
	}
	rs_port *a = open_or_die(sock, argv[optind]);
	rs_port *b = nports == 2 ? open_or_die(sock, argv[optind + 1]) : a;
	int zero_copy = rs_port_same_memory(a, b) == 1;
	if (busy) {
		rs_port_set_busy_wait(a, 1);
		rs_port_set_busy_wait(b, 1);
	}
	printf("forwarding %s%s%s, %s\n", argv[optind], nports == 2 ? " <-> " : " (reflect)",
	       nports == 2 ? argv[optind + 1] : "", zero_copy ? "zero copy" : "copying");
	fflush(stdout);
	unsigned long total = 0;
	double first = 0, last = now_s();
	struct pollfd pfd[2] = { { .fd = rs_port_poll_fd(a), .events = POLLIN },
				 { .fd = rs_port_poll_fd(b), .events = POLLIN } };
	while (max == 0 || total < max) {
		int a_full = 0, b_full = 0; /* frames wait for room in a's (b's) TX */
		long n = move(a, b, zero_copy, &b_full);
		if (b != a)
			n += move(b, a, zero_copy, &a_full);
		total += (unsigned long)n;
		double now = now_s();
		if (n > 0) {
			if (total == (unsigned long)n)
				first = now; /* the first batch: the rate counts from here */
			last = now;
			continue;
		}
		if (timeout_s && now - last > (double)timeout_s)
			break;
		if (busy)
			continue;
		/* Nothing to do: ask for interrupts (packets to move, and room
		 * where a TX ring is full), look once more, and sleep only if
		 * still nothing. The bounded poll lets the silence timeout run. */
		int ready = rs_port_prepare_wait(a, a_full || (b == a && b_full), 1);
		if (b != a && ready == 0)
			ready = rs_port_prepare_wait(b, b_full, 1);
		if (ready < 0)
			die("forwarder");
		if (ready == 0)
			poll(pfd, b != a ? 2 : 1, 500);
		rs_port_after_wait(a);
		if (b != a)
			rs_port_after_wait(b);
	}
	/* Hand over what is still queued before closing. */
	rs_port_flush(a, 2000);
	if (b != a)
		rs_port_flush(b, 2000);
	double dt = last - first;
	printf("forwarded %lu\n", total);
	printf("rate %.3f Mpps\n", dt > 0 ? total / dt / 1e6 : 0.0);
	if (b != a)
		rs_port_close(b);
	rs_port_close(a);
	return 0;
}
