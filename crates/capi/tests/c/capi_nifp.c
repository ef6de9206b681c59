/*
 * netmap-style code over libringswitch: the rings are walked with netmap's
 * macros from rs_port_nifp(), head and cur are moved in the ring headers,
 * and rs_txsync/rs_rxsync/rs_wait_* do the syncs. COUNT frames go from one
 * end of a pipe to the other and arrive in order, intact.
 *
 *   capi_nifp SOCKET PIPE COUNT    (PIPE: a pipe's name, as "n"; ends n{1, n}1)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <net/netmap_user.h>
#include <ringswitch.h>

#define LEN 60

static void die(const char *what)
{
	fprintf(stderr, "capi_nifp: %s: %s (%s)\n", what, rs_last_error(), strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: capi_nifp SOCKET PIPE COUNT\n");
		return 2;
	}
	char a_name[64], b_name[64];
	snprintf(a_name, sizeof(a_name), "%s{1", argv[2]);
	snprintf(b_name, sizeof(b_name), "%s}1", argv[2]);
	long count = atol(argv[3]), sent = 0, got = 0;
	rs_port *a = rs_port_open_at(argv[1], a_name), *b = rs_port_open_at(argv[1], b_name);
	if (a == NULL || b == NULL)
		die("open");
	struct netmap_if *na = rs_port_nifp(a), *nb = rs_port_nifp(b);
	if (na == NULL || nb == NULL)
		die("nifp");
	if (strcmp(na->ni_name, a_name) != 0 || na->ni_tx_rings != 1 || nb->ni_rx_rings != 1) {
		fprintf(stderr, "capi_nifp: unexpected netmap_if: %s, %u TX rings\n", na->ni_name,
			na->ni_tx_rings);
		return 1;
	}
	struct netmap_ring *tx = NETMAP_TXRING(na, 0), *rx = NETMAP_RXRING(nb, 0);
	while (got < count) {
		/* Fill what fits, the netmap way. */
		while (sent < count && !nm_ring_empty(tx)) {
			struct netmap_slot *s = &tx->slot[tx->cur];
			unsigned char *f = (unsigned char *)NETMAP_BUF(tx, s->buf_idx);
			memset(f, 0xff, 6);
			memcpy(f + 6, "\x02\x00\x00\x00\x00\x0b\x88\xb5", 8);
			memcpy(f + 14, &sent, sizeof(sent));
			s->len = LEN;
			tx->head = tx->cur = nm_ring_next(tx, tx->cur);
			sent++;
		}
		if (rs_txsync(a, 0) != 0)
			die("txsync");
		int r = rs_wait_rx(b, 0, 2000);
		if (r < 0)
			die("wait_rx");
		if (r == 0) {
			fprintf(stderr, "capi_nifp: nothing arrived after %ld of %ld\n", got, count);
			return 1;
		}
		while (!nm_ring_empty(rx)) {
			struct netmap_slot *s = &rx->slot[rx->cur];
			const unsigned char *f = (const unsigned char *)NETMAP_BUF(rx, s->buf_idx);
			long seq;
			memcpy(&seq, f + 14, sizeof(seq));
			if (s->len != LEN || seq != got || f[12] != 0x88) {
				fprintf(stderr, "capi_nifp: frame %ld: len %u, number %ld\n", got,
					s->len, seq);
				return 1;
			}
			got++;
			rx->head = rx->cur = nm_ring_next(rx, rx->cur);
		}
		if (rs_rxsync(b, 0) != 0)
			die("rxsync");
	}
	/* A head out of the ring is refused and shown again as it was. */
	uint32_t head = tx->head;
	tx->head = tx->cur = tx->num_slots;
	errno = 0;
	if (rs_txsync(a, 0) != -1 || errno != EINVAL || tx->head != head || tx->cur != head) {
		fprintf(stderr, "capi_nifp: a head out of the ring was taken\n");
		return 1;
	}
	printf("received %ld\n", got);
	rs_port_close(a);
	rs_port_close(b);
	return 0;
}
