/*
 * A netmap program written only against netmap's documented API:
 * open("/dev/netmap"), ioctl(NIOCCTRL, REGISTER), mmap, the ring macros,
 * and poll/select/epoll or NIOC*SYNC to sync. Nothing ringswitch-specific.
 *
 *   nm_raw tx|rx PORT COUNT [LEN] [poll|select|epoll|ioctl]
 *
 * tx sends COUNT frames of LEN bytes (broadcast) and waits until the port
 * side has taken them all; rx receives until COUNT frames arrived or 5
 * seconds pass without any, prints "received N", and fails if N != COUNT.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <net/netmap_user.h>

enum wait_kind { W_POLL, W_SELECT, W_EPOLL, W_IOCTL };

static int fd, epfd = -1;
static enum wait_kind wk = W_POLL;

/* Sleeps until the port has something for `events`, up to ms; returns >0
 * when ready. */
static int wait_port(short events, int ms)
{
	switch (wk) {
	case W_POLL: {
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, ms);
		if (r > 0 && (p.revents & POLLERR)) {
			fprintf(stderr, "poll: POLLERR\n");
			exit(1);
		}
		return r;
	}
	case W_SELECT: {
		fd_set s;
		FD_ZERO(&s);
		FD_SET(fd, &s);
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
		return select(fd + 1, events & POLLIN ? &s : NULL,
			      events & POLLOUT ? &s : NULL, NULL, &tv);
	}
	case W_EPOLL: {
		struct epoll_event ev = { .events = (uint32_t)events, .data.fd = fd };
		epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
		struct epoll_event out;
		return epoll_wait(epfd, &out, 1, ms);
	}
	case W_IOCTL:
	default:
		if (ioctl(fd, events & POLLIN ? NIOCRXSYNC : NIOCTXSYNC, NULL) != 0) {
			perror("ioctl sync");
			exit(1);
		}
		return 1;
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: nm_raw tx|rx PORT COUNT [LEN] [poll|select|epoll|ioctl]\n");
		return 2;
	}
	int tx = strcmp(argv[1], "tx") == 0;
	long count = atol(argv[3]);
	int len = argc > 4 ? atoi(argv[4]) : 60;
	if (argc > 5) {
		if (!strcmp(argv[5], "select")) wk = W_SELECT;
		else if (!strcmp(argv[5], "epoll")) wk = W_EPOLL;
		else if (!strcmp(argv[5], "ioctl")) wk = W_IOCTL;
	}

	fd = open("/dev/netmap", O_RDWR);
	if (fd < 0) {
		perror("open /dev/netmap");
		return 1;
	}
	struct nmreq_header hdr;
	struct nmreq_register reg;
	memset(&hdr, 0, sizeof(hdr));
	memset(&reg, 0, sizeof(reg));
	hdr.nr_version = NETMAP_API;
	hdr.nr_reqtype = NETMAP_REQ_REGISTER;
	strncpy(hdr.nr_name, argv[2], sizeof(hdr.nr_name) - 1);
	hdr.nr_body = (uintptr_t)&reg;
	reg.nr_mode = NR_REG_ALL_NIC;
	if (ioctl(fd, NIOCCTRL, &hdr) != 0) {
		perror("ioctl NIOCCTRL REGISTER");
		return 1;
	}
	char *mem = mmap(NULL, reg.nr_memsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct netmap_if *nifp = NETMAP_IF(mem, reg.nr_offset);
	if (wk == W_EPOLL) {
		epfd = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			perror("epoll_ctl");
			return 1;
		}
	}

	long done = 0;
	double t0 = now(), last = t0;
	if (tx) {
		while (done < count) {
			if (wait_port(POLLOUT, 1000) <= 0)
				continue;
			for (unsigned ri = 0; ri < nifp->ni_tx_rings && done < count; ri++) {
				struct netmap_ring *ring = NETMAP_TXRING(nifp, ri);
				uint32_t i = ring->cur;
				uint32_t n = nm_ring_space(ring);
				for (; n > 0 && done < count; n--, done++) {
					struct netmap_slot *slot = &ring->slot[i];
					char *buf = NETMAP_BUF(ring, slot->buf_idx);
					memset(buf, 0xff, 6);                   /* broadcast */
					memcpy(buf + 6, "\x02\x00\x00\x00\x00\x01", 6);
					buf[12] = 0x08, buf[13] = 0x00;
					memcpy(buf + 14, &done, sizeof(done));
					slot->len = (uint16_t)len;
					i = nm_ring_next(ring, i);
				}
				ring->head = ring->cur = i;
			}
		}
		/* Hand over the last batch and wait until the port side took it. */
		for (int k = 0; k < 5000; k++) {
			ioctl(fd, NIOCTXSYNC, NULL);
			int pending = 0;
			for (unsigned ri = 0; ri < nifp->ni_tx_rings; ri++)
				pending |= nm_tx_pending(NETMAP_TXRING(nifp, ri));
			if (!pending)
				break;
			usleep(1000);
		}
		printf("sent %ld\n", done);
	} else {
		while (done < count) {
			int r = wait_port(POLLIN, 500);
			if (wk == W_IOCTL && done == 0 && now() - last > 5)
				break;
			if (r <= 0) {
				if (now() - last > 5)
					break;
				continue;
			}
			for (unsigned ri = 0; ri < nifp->ni_rx_rings; ri++) {
				struct netmap_ring *ring = NETMAP_RXRING(nifp, ri);
				uint32_t n = nm_ring_space(ring);
				if (n)
					last = now();
				done += n;
				uint32_t i = ring->cur;
				while (n--)
					i = nm_ring_next(ring, i);
				ring->head = ring->cur = i;
			}
			if (wk == W_IOCTL) {
				if (now() - last > 5)
					break;
				usleep(100);
			}
		}
		printf("received %ld\n", done);
	}
	double dt = now() - t0;
	printf("rate %.3f Mpps\n", dt > 0 ? done / dt / 1e6 : 0.0);
	munmap(mem, reg.nr_memsize);
	close(fd);
	return done == count ? 0 : 1;
}
