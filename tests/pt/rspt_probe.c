// SPDX-License-Identifier: MIT
/*
 * rspt_probe - exercises /dev/rsptN from inside a test guest (tests/pt).
 * Built with gcc -static into the initramfs. Every result is one line
 * starting with "RS-PT-" on stdout (the serial console); the exit status is
 * 0 when everything the command checked held.
 *
 *   rspt_probe info DEV              RSPT_IOC_INFO
 *   rspt_probe map DEV               mmap the BAR: header fields, refusals,
 *                                    and write GUEST_MARK at GUEST_MARK_OFS
 *   rspt_probe kick DEV VALUE        RSPT_IOC_KICK VALUE, and refusals
 *   rspt_probe wait DEV SECONDS      blocking read until a vector fires,
 *                                    with a second open file alongside
 *   rspt_probe hold DEV GOFILE       open + mmap, then wait until GOFILE
 *                                    exists, then check every op fails
 *   rspt_probe blockread DEV         a blocking read that device removal
 *                                    must end with ENODEV
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rspt.h"

/* The numbers other languages hard-code (see rspt.h). */
_Static_assert(RSPT_IOC_INFO == 0x80107201u, "RSPT_IOC_INFO changed");
_Static_assert(RSPT_IOC_KICK == 0x40047202u, "RSPT_IOC_KICK changed");
_Static_assert(sizeof(struct rspt_info) == 16, "struct rspt_info changed");
_Static_assert(sizeof(struct rspt_region_header) == 96, "region header changed");

/* Where the guest leaves a mark for the host to find (inside the header page). */
#define GUEST_MARK_OFS 0x800
#define GUEST_MARK "GUEST-WROTE-THIS"

static const char *dev;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static int open_dev(int flags)
{
	int fd = open(dev, flags);

	if (fd < 0) {
		out("RS-PT-ERROR open %s: %s", dev, strerror(errno));
		exit(1);
	}
	return fd;
}

static struct rspt_info get_info(int fd)
{
	struct rspt_info info;

	if (ioctl(fd, RSPT_IOC_INFO, &info) < 0) {
		out("RS-PT-ERROR RSPT_IOC_INFO: %s", strerror(errno));
		exit(1);
	}
	return info;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "ok";
	case EAGAIN: return "EAGAIN";
	case EINVAL: return "EINVAL";
	case ENODEV: return "ENODEV";
	case EINTR: return "EINTR";
	case ENOTTY: return "ENOTTY";
	case EFAULT: return "EFAULT";
	default: return strerror(e);
	}
}

static int cmd_info(void)
{
	int fd = open_dev(O_RDWR);
	struct rspt_info info = get_info(fd);

	out("RS-PT-INFO mem_size=%llu ivposition=%u vectors=%u",
	    (unsigned long long)info.mem_size, info.ivposition, info.vectors);
	close(fd);
	return 0;
}

static int cmd_map(void)
{
	int fd = open_dev(O_RDWR);
	struct rspt_info info = get_info(fd);
	struct rspt_region_header h;
	void *p, *q;
	int private_err, over_err, ok;

	p = mmap(NULL, info.mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		out("RS-PT-ERROR mmap %llu bytes: %s", (unsigned long long)info.mem_size,
		    strerror(errno));
		return 1;
	}
	memcpy(&h, p, sizeof(h));
	out("RS-PT-MAP magic=%.8s version=%u ends=%u tx_rings=%u rx_rings=%u tx_slots=%u rx_slots=%u buf_size=%u nbufs=%u buf_base=%llu size=%llu nifp0=%llu csb0=%llu",
	    (const char *)h.magic, h.version, h.ends, h.tx_rings, h.rx_rings, h.tx_slots,
	    h.rx_slots, h.buf_size, h.nbufs, (unsigned long long)h.buf_base,
	    (unsigned long long)h.size, (unsigned long long)h.nifp_ofs[0],
	    (unsigned long long)h.csb_ofs[0]);
	/* The last byte of the BAR is reachable, and the guest's writes land in the host's memfd. */
	out("RS-PT-MAP last_byte=%u", ((volatile uint8_t *)p)[info.mem_size - 1]);
	memcpy((char *)p + GUEST_MARK_OFS, GUEST_MARK, strlen(GUEST_MARK));
	__sync_synchronize();

	errno = 0;
	q = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	private_err = q == MAP_FAILED ? errno : 0;
	errno = 0;
	q = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, info.mem_size);
	over_err = q == MAP_FAILED ? errno : 0;
	ok = !memcmp(h.magic, RSPT_REGION_MAGIC, 8) && private_err == EINVAL && over_err == EINVAL;
	out("RS-PT-MAPCHECK private=%s beyond_bar=%s wrote=%s ok=%d", err_name(private_err),
	    err_name(over_err), GUEST_MARK, ok);
	munmap(p, info.mem_size);
	close(fd);
	return !ok;
}

static int cmd_kick(const char *value)
{
	int fd = open_dev(O_RDWR);
	struct rspt_info info = get_info(fd);
	__u32 v = strtoul(value, NULL, 0), bad = RSPT_KICK(RSPT_PEER_HOST, info.vectors);
	int e_bad = 0, rc;

	if (ioctl(fd, RSPT_IOC_KICK, &bad) < 0)
		e_bad = errno;
	rc = ioctl(fd, RSPT_IOC_KICK, &v);
	out("RS-PT-KICK value=0x%x rc=%d err=%s vector_out_of_range=%s", v, rc,
	    err_name(rc < 0 ? errno : 0), err_name(e_bad));
	close(fd);
	return rc < 0 || e_bad != EINVAL;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static int cmd_wait(const char *secs)
{
	int fd = open_dev(O_RDWR), fd2 = open_dev(O_RDWR | O_NONBLOCK);
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART: read gets EINTR */
	uint64_t mask = 0, mask2 = 0;
	struct pollfd pfd = { .fd = fd2, .events = POLLIN };
	long long t0, t1;
	ssize_t n, n2;
	int e0, pr, e2;

	/* Nothing has fired since these opens: a non-blocking read says so. */
	n = read(fd2, &mask2, sizeof(mask2));
	e0 = n < 0 ? errno : 0;
	pr = poll(&pfd, 1, 0);
	out("RS-PT-WAITING nonblock_read=%s poll_before=%d", err_name(e0), pr);

	sigaction(SIGALRM, &sa, NULL);
	alarm(atoi(secs));
	t0 = now_ms();
	n = read(fd, &mask, sizeof(mask));
	t1 = now_ms();
	alarm(0);
	if (n != sizeof(mask)) {
		out("RS-PT-IRQ none: read returned %zd (%s) after %lld ms", n,
		    err_name(n < 0 ? errno : 0), t1 - t0);
		return 1;
	}
	/* The other open file got the same bit, independently. */
	pr = poll(&pfd, 1, 1000);
	n2 = read(fd2, &mask2, sizeof(mask2));
	e2 = n2 < 0 ? errno : 0;
	out("RS-PT-IRQ mask=0x%llx blocked_ms=%lld second_file_poll=%d second_file_mask=0x%llx second_file_err=%s",
	    (unsigned long long)mask, t1 - t0, pr, (unsigned long long)(n2 == 8 ? mask2 : 0),
	    err_name(e2));
	/* Read again: the mask was cleared by the read. */
	n = read(fd2, &mask2, sizeof(mask2));
	e2 = n < 0 ? errno : 0;
	out("RS-PT-IRQ-CLEARED second_read=%s", err_name(e2));
	close(fd);
	close(fd2);
	return !((mask & 1) && e0 == EAGAIN && n2 == 8 && (mask2 & 1) && e2 == EAGAIN);
}

static sigjmp_buf sigbus_jmp;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(sigbus_jmp, 1);
}

static int cmd_hold(const char *gofile)
{
	int fd = open_dev(O_RDWR);
	struct rspt_info info = get_info(fd);
	volatile uint8_t *p;
	struct sigaction sa = { .sa_handler = on_sigbus };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct stat st;
	uint64_t mask;
	__u32 kick = RSPT_KICK(RSPT_PEER_HOST, 0);
	int e_read, e_info, e_kick, e_mmap, pr, bus;
	volatile int touched = -1;
	ssize_t n;

	p = mmap(NULL, info.mem_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		out("RS-PT-ERROR hold: mmap: %s", strerror(errno));
		return 1;
	}
	out("RS-PT-HOLD ready magic=%.8s", (const char *)p);
	while (stat(gofile, &st) < 0)
		usleep(50000);

	n = read(fd, &mask, sizeof(mask));
	e_read = n < 0 ? errno : 0;
	e_info = ioctl(fd, RSPT_IOC_INFO, &info) < 0 ? errno : 0;
	e_kick = ioctl(fd, RSPT_IOC_KICK, &kick) < 0 ? errno : 0;
	e_mmap = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED ? errno : 0;
	pr = poll(&pfd, 1, 0) == 1 ? pfd.revents : 0;
	sigaction(SIGBUS, &sa, NULL);
	bus = sigsetjmp(sigbus_jmp, 1);
	if (!bus)
		touched = p[0];
	out("RS-PT-HOLD after_remove read=%s info=%s kick=%s mmap=%s poll=%s%s old_mapping=%s",
	    err_name(e_read), err_name(e_info), err_name(e_kick), err_name(e_mmap),
	    pr & POLLERR ? "ERR" : "", pr & POLLHUP ? "HUP" : "", bus ? "SIGBUS" : "readable");
	(void)touched;
	close(fd);
	return !(e_read == ENODEV && e_info == ENODEV && e_kick == ENODEV && e_mmap == ENODEV &&
		 (pr & POLLHUP) && bus);
}

static int cmd_blockread(void)
{
	int fd = open_dev(O_RDWR);
	uint64_t mask;
	long long t0 = now_ms();
	ssize_t n;

	out("RS-PT-BLOCKREAD waiting");
	n = read(fd, &mask, sizeof(mask));
	out("RS-PT-BLOCKREAD ended n=%zd err=%s after_ms=%lld", n, err_name(n < 0 ? errno : 0),
	    now_ms() - t0);
	close(fd);
	return !(n < 0 && errno == ENODEV);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: rspt_probe info|map|kick|wait|hold|blockread DEV [ARG]\n");
		return 2;
	}
	dev = argv[2];
	if (!strcmp(argv[1], "info"))
		return cmd_info();
	if (!strcmp(argv[1], "map"))
		return cmd_map();
	if (!strcmp(argv[1], "kick") && argc == 4)
		return cmd_kick(argv[3]);
	if (!strcmp(argv[1], "wait") && argc == 4)
		return cmd_wait(argv[3]);
	if (!strcmp(argv[1], "hold") && argc == 4)
		return cmd_hold(argv[3]);
	if (!strcmp(argv[1], "blockread"))
		return cmd_blockread();
	fprintf(stderr, "rspt_probe: unknown command %s\n", argv[1]);
	return 2;
}
