// SPDX-License-Identifier: MIT
/*
 * udpblast - sends small UDP datagrams through the ordinary socket API as
 * fast as one thread can, for a number of seconds, and says how many the
 * kernel took. For bench/ptnet.sh: the guest's socket layer and its
 * network driver are what is measured.
 *
 *   udpblast ADDR PORT SECONDS [PAYLOAD_BYTES]   (default 18: 60-byte frames)
 *
 * Prints one line: "sent N errors E seconds S pps R". A send the kernel
 * refuses for want of buffer space (ENOBUFS, EAGAIN) counts as an error and
 * is not retried.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	unsigned long long sent = 0, errors = 0;
	char payload[1472];
	double secs, t0, t;
	size_t len = 18;
	int fd;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: udpblast ADDR PORT SECONDS [PAYLOAD_BYTES]\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
		fprintf(stderr, "udpblast: %s is not an IPv4 address\n", argv[1]);
		return 2;
	}
	to.sin_port = htons((unsigned short)atoi(argv[2]));
	secs = atof(argv[3]);
	if (argc == 5)
		len = (size_t)atoi(argv[4]);
	if (secs <= 0 || len > sizeof(payload)) {
		fprintf(stderr, "udpblast: SECONDS must be positive and PAYLOAD_BYTES at most %zu\n",
			sizeof(payload));
		return 2;
	}
	memset(payload, 0x5a, sizeof(payload));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	/* Not connected: an ICMP error from the destination must not fail sends. */
	if (fd < 0) {
		perror("udpblast: socket");
		return 1;
	}
	t0 = now();
	do {
		/* The clock is read once per 256 sends. */
		for (int i = 0; i < 256; i++) {
			if (sendto(fd, payload, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len)
				sent++;
			else
				errors++;
		}
		t = now() - t0;
	} while (t < secs);
	printf("sent %llu errors %llu seconds %.3f pps %.0f\n", sent, errors, t, (double)sent / t);
	return 0;
}
