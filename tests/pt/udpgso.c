// SPDX-License-Identifier: MIT
/*
 * udpgso - sends UDP datagrams in batches through UDP_SEGMENT (Linux 4.18
 * and later): each sendto hands the kernel SEGS datagrams of SIZE bytes in
 * one buffer, which an interface with USO (tx-udp-segmentation) passes down
 * whole. For tests/pt/ptnet.sh.
 *
 *   udpgso ADDR PORT SENDS SEGS SIZE
 *   udpgso --recv PORT COUNT SECONDS
 *
 * Datagram i (counting from 0 over the whole run) is SIZE bytes of (i &
 * 0xff), so a receiver can check each. Prints one line: "sends N
 * datagrams D errors E". With --recv: receives on PORT until COUNT
 * datagrams came or SECONDS passed, and prints "datagrams N bad B", bad
 * being those not made of one repeated byte. The receive buffer is 32 MiB
 * (SO_RCVBUFFORCE: root), so a sender that does not wait loses nothing.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

static int recv_mode(int argc, char **argv)
{
	struct sockaddr_in at = { .sin_family = AF_INET };
	static unsigned char buf[65536];
	struct timeval tick = { .tv_sec = 1 };
	unsigned long want, got = 0, bad = 0;
	int fd, room = 32 << 20;
	time_t end;

	if (argc != 5) {
		fprintf(stderr, "usage: udpgso --recv PORT COUNT SECONDS\n");
		return 2;
	}
	at.sin_port = htons((unsigned short)atoi(argv[2]));
	want = strtoul(argv[3], NULL, 10);
	end = time(NULL) + atol(argv[4]);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	/* Room for the whole run: the sender does not wait for us. */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &room, sizeof(room)) ||
	    bind(fd, (struct sockaddr *)&at, sizeof(at)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick))) {
		perror("udpgso: receive socket");
		return 1;
	}
	/* Bound: the caller waits for this line before it sends. */
	printf("ready\n");
	fflush(stdout);
	while (got < want && time(NULL) < end) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0)
			continue;
		got++;
		for (ssize_t i = 1; i < n; i++) {
			if (buf[i] != buf[0]) {
				bad++;
				break;
			}
		}
	}
	printf("datagrams %lu bad %lu\n", got, bad);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	static unsigned char buf[65000];
	unsigned long sends, segs, size, ok = 0, errors = 0, d = 0;
	int fd, gso;

	if (argc > 1 && !strcmp(argv[1], "--recv"))
		return recv_mode(argc, argv);
	if (argc != 6) {
		fprintf(stderr, "usage: udpgso ADDR PORT SENDS SEGS SIZE\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
		fprintf(stderr, "udpgso: %s is not an IPv4 address\n", argv[1]);
		return 2;
	}
	to.sin_port = htons((unsigned short)atoi(argv[2]));
	sends = strtoul(argv[3], NULL, 10);
	segs = strtoul(argv[4], NULL, 10);
	size = strtoul(argv[5], NULL, 10);
	if (!segs || !size || size > 1472 || segs * size > sizeof(buf)) {
		fprintf(stderr, "udpgso: SIZE 1 to 1472, SEGS * SIZE at most %zu\n", sizeof(buf));
		return 2;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	gso = (int)size;
	if (fd < 0 || setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &gso, sizeof(gso))) {
		perror("udpgso: socket");
		return 1;
	}
	for (unsigned long s = 0; s < sends; s++) {
		for (unsigned long k = 0; k < segs; k++)
			memset(buf + k * size, (int)((d + k) & 0xff), size);
		if (sendto(fd, buf, segs * size, 0, (struct sockaddr *)&to, sizeof(to)) ==
		    (ssize_t)(segs * size)) {
			ok++;
			d += segs;
		} else {
			errors++;
			/* Not sent: the next send starts where this one did. */
			usleep(10000);
		}
	}
	printf("sends %lu datagrams %lu errors %lu\n", ok, d, errors);
	return 0;
}
