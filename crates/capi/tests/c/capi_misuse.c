/*
 * Misuse of libringswitch: every call fails with -1/NULL and a sensible
 * errno, says why in rs_last_error(), and nothing crashes.
 *
 *   capi_misuse SOCKET    (a running daemon's socket)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ringswitch.h>

static int failures;

#define EXPECT(what, cond)                                                         \
	do {                                                                       \
		if (cond) {                                                        \
			printf("ok   %s\n", what);                                 \
		} else {                                                           \
			printf("FAIL %s (errno %d: %s; %s)\n", what, errno,        \
			       strerror(errno), rs_last_error());                  \
			failures++;                                                \
		}                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	const char *sock = argc > 1 ? argv[1] : NULL;
	rs_slot s;
	rs_geometry g;
	char buf[64];

	errno = 0;
	EXPECT("open(NULL) fails with EINVAL", rs_port_open_at(sock, NULL) == NULL && errno == EINVAL);
	EXPECT("... and says why", strstr(rs_last_error(), "NULL") != NULL);
	errno = 0;
	EXPECT("open of a bad name fails with EINVAL",
	       rs_port_open_at(sock, "nonsense") == NULL && errno == EINVAL);
	EXPECT("... naming the forms that work", strstr(rs_last_error(), "vale") != NULL);
	errno = 0;
	EXPECT("open with no daemon fails with ECONNREFUSED",
	       rs_port_open_at("/nonexistent/rs.sock", "vale0:a") == NULL && errno == ECONNREFUSED);
	EXPECT("... and says to start one", strstr(rs_last_error(), "ringswitch serve") != NULL);

	errno = 0;
	EXPECT("geometry(NULL) fails with EINVAL", rs_port_geometry(NULL, &g) == -1 && errno == EINVAL);
	EXPECT("txsync(NULL) fails", rs_txsync(NULL, 0) == -1);
	EXPECT("poll_fd(NULL) fails", rs_port_poll_fd(NULL) == -1);
	EXPECT("send(NULL) fails", rs_send(NULL, 0, buf, 10) == -1);
	EXPECT("swap(NULL) fails", rs_swap(NULL, 0, 0, NULL, 0, 0) == -1);
	EXPECT("nifp(NULL) fails", rs_port_nifp(NULL) == NULL);
	EXPECT("the last error is never NULL", rs_last_error() != NULL);
	rs_port_close(NULL);

	rs_port *p = rs_port_open_at(sock, "vale0:misuse");
	EXPECT("open succeeds", p != NULL);
	if (!p)
		return 1;
	EXPECT("name", strcmp(rs_port_name(p), "vale0:misuse") == 0);
	errno = 0;
	EXPECT("a second open of the port fails with EBUSY",
	       rs_port_open_at(sock, "vale0:misuse") == NULL && errno == EBUSY);
	errno = 0;
	EXPECT("geometry(p, NULL) fails with EINVAL", rs_port_geometry(p, NULL) == -1 && errno == EINVAL);
	EXPECT("geometry", rs_port_geometry(p, &g) == 0 && g.tx_rings == 1 && g.buf_size == 2048);
	errno = 0;
	EXPECT("ring 1 of a one-ring port fails with EINVAL", rs_txsync(p, 1) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("a bad direction fails with EINVAL", rs_ring_space(p, 7, 0) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("a slot past the space fails with EINVAL",
	       rs_ring_slot(p, RS_RX, 0, 0, &s) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("slot(..., NULL) fails with EINVAL",
	       rs_ring_slot(p, RS_TX, 0, 0, NULL) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("a length past the buffer fails with EINVAL",
	       rs_slot_set_len(p, 0, 0, 5000) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("advancing past the space fails with EINVAL",
	       rs_ring_advance(p, RS_RX, 0, 1) == -1 && errno == EINVAL);
	static char big[4096];
	errno = 0;
	EXPECT("sending a frame larger than a buffer fails with EINVAL",
	       rs_send(p, 0, big, sizeof(big)) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("send(frame NULL) fails with EINVAL", rs_send(p, 0, NULL, 10) == -1 && errno == EINVAL);
	EXPECT("recv on an empty ring returns 0", rs_recv(p, 0, buf, sizeof(buf)) == 0);
	rs_port *q = rs_port_open_at(sock, "vale0:other");
	errno = 0;
	EXPECT("swap between ports that do not share memory fails with EXDEV",
	       q && rs_swap(p, 0, 0, q, 0, 0) == -1 && errno == EXDEV);
	EXPECT("same_memory says no for two switch ports", q && rs_port_same_memory(p, q) == 0);
	EXPECT("same_memory says yes for one port", rs_port_same_memory(p, p) == 1);
	rs_port_close(q);
	EXPECT("a valid send works", rs_send(p, 0, buf, 60) == 1 && rs_txsync(p, 0) == 0);
	rs_port_close(p);
	p = rs_port_open_at(sock, "vale0:misuse");
	EXPECT("the port opens again after close", p != NULL);
	rs_port_close(p);
	printf("%d failures\n", failures);
	return failures != 0;
}
