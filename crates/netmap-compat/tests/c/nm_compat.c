/*
 * What netmap's own applications ask of /dev/netmap beyond a plain
 * register-and-sync, written only against netmap's documented API (raw
 * NIOCCTRL requests, the ring macros). Prints one line per check and
 * exits non-zero if any failed.
 *
 *   nm_compat rings NEWPORT EXISTING EXISTING_RINGS COUNT
 *       ring and slot counts of REGISTER: honoured on a port this open
 *       creates (ring by ring on two descriptors, as pkt-gen -p does; then
 *       COUNT frames on ring 1), the existing ones reported otherwise
 *   nm_compat hdrtx PORT COUNT
 *       PORT_HDR_SET/GET; COUNT 60-byte frames sent behind a 10-byte
 *       virtio-net header
 *   nm_compat hdrrx PORT COUNT
 *       a 12-byte header set; COUNT frames received, each behind a zeroed
 *       header
 *   nm_compat indirect PORT COUNT BAD
 *       COUNT NS_INDIRECT frames (and with BAD=1 first, in one sync, slots
 *       with a bad length or a bad pointer among good ones and ones
 *       pointing where the slot before points: 4 bad, 3 good frames)
 *   nm_compat pipes PREFIX_A PREFIX_B
 *       pipes of ports PREFIX_A and PREFIX_B with the same id are
 *       different pipes; two ports have different nr_mem_id, never 0, and
 *       the two ends of a pipe the same
 *   nm_compat reconnect PORT COUNT
 *       COUNT frames received in poll, through the program's own mapping;
 *       prints "half" after COUNT/2, when the test restarts the daemon:
 *       the rest arrive on the same descriptor and mapping
 *   nm_compat memid PORT
 *       REGISTER's nr_mem_id: a pipe asking for PORT's memory is refused
 *       with EOPNOTSUPP (no memory shared between ports); the other end of
 *       a pipe asking for its memory, and an id no port of the process
 *       has, register; PORT_INFO_GET of PORT from another descriptor
 *       answers its memory id (libnetmap's @PORT suffix)
 *   nm_compat ifname IFNAME
 *       a bare interface name (as libnetmap passes netmap:IFNAME) reaches
 *       the interface: ENXIO for one that does not exist
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <net/netmap_user.h>

/* Every wait gives up after this long: generous, so a loaded machine only
 * makes the program slower, never wrong. */
#define DEADLINE_S 120

static int failures;

#define EXPECT(what, cond)                                                   \
	do {                                                                 \
		if (cond) {                                                  \
			printf("ok   %s\n", what);                           \
		} else {                                                     \
			printf("FAIL %s (errno %d: %s)\n", what, errno,      \
			       strerror(errno));                             \
			failures++;                                          \
		}                                                            \
	} while (0)

/* A check the rest depends on: on failure, stop here. */
#define REQUIRE(what, cond)                                                  \
	do {                                                                 \
		int f_ = failures;                                           \
		EXPECT(what, cond);                                          \
		if (failures != f_)                                          \
			return -1;                                           \
	} while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

struct port {
	int fd;
	struct nmreq_register r;
	char *mem;
	struct netmap_if *nifp;
};

static void header(struct nmreq_header *h, const char *name, uint16_t type, void *body)
{
	memset(h, 0, sizeof(*h));
	h->nr_version = NETMAP_API;
	h->nr_reqtype = type;
	strncpy(h->nr_name, name, sizeof(h->nr_name) - 1);
	h->nr_body = (uintptr_t)body;
}

/* REGISTER `name` on a new descriptor with `mode`, `ringid`, `flags`,
 * the sizes asked for (0: the default) and memory `mem_id` (0: any), and
 * maps it. 0 or -1/errno. */
static int open_port_mem(struct port *p, const char *name, uint32_t mode, uint16_t ringid,
			 uint64_t flags, uint16_t rings, uint32_t slots, uint16_t mem_id)
{
	struct nmreq_header h;
	memset(p, 0, sizeof(*p));
	p->fd = open("/dev/netmap", O_RDWR);
	if (p->fd < 0)
		return -1;
	header(&h, name, NETMAP_REQ_REGISTER, &p->r);
	p->r.nr_mem_id = mem_id;
	p->r.nr_mode = mode;
	p->r.nr_ringid = ringid;
	p->r.nr_flags = flags;
	p->r.nr_tx_rings = p->r.nr_rx_rings = rings;
	p->r.nr_tx_slots = p->r.nr_rx_slots = slots;
	if (ioctl(p->fd, NIOCCTRL, &h) != 0) {
		int e = errno;
		close(p->fd);
		errno = e;
		return -1;
	}
	p->mem = mmap(NULL, p->r.nr_memsize, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (p->mem == MAP_FAILED) {
		int e = errno;
		close(p->fd);
		errno = e;
		return -1;
	}
	p->nifp = NETMAP_IF(p->mem, p->r.nr_offset);
	return 0;
}

static int open_port(struct port *p, const char *name, uint32_t mode, uint16_t ringid,
		     uint64_t flags, uint16_t rings, uint32_t slots)
{
	return open_port_mem(p, name, mode, ringid, flags, rings, slots, 0);
}

static void close_port(struct port *p)
{
	munmap(p->mem, p->r.nr_memsize);
	close(p->fd);
}

/* PORT_HDR_SET (len in) or PORT_HDR_GET (len out) on descriptor fd. */
static int port_hdr(int fd, const char *name, uint16_t type, uint32_t *len)
{
	struct nmreq_header h;
	struct nmreq_port_hdr ph;
	memset(&ph, 0, sizeof(ph));
	ph.nr_hdr_len = *len;
	header(&h, name, type, &ph);
	int r = ioctl(fd, NIOCCTRL, &h);
	if (r == 0)
		*len = ph.nr_hdr_len;
	return r;
}

/* A broadcast IPv4-typed frame of `len` bytes numbered `k` at `buf`. */
static void frame(char *buf, int len, long k)
{
	memset(buf, 0, len);
	memset(buf, 0xff, 6);
	memcpy(buf + 6, "\x02\x00\x00\x00\x00\x02", 6);
	buf[12] = 0x08, buf[13] = 0x00;
	memcpy(buf + 14, &k, sizeof(k));
}

/* Waits until ring has room; 0 when it does, -1 past the deadline. */
static int wait_room(int fd, struct netmap_ring *ring, double t0)
{
	while (nm_ring_space(ring) == 0) {
		if (now() - t0 > DEADLINE_S)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		poll(&p, 1, 1000);
	}
	return 0;
}

/* Hands everything over and waits until the port side took it all. */
static int drain(int fd, struct netmap_ring *ring)
{
	double t0 = now();
	for (;;) {
		ioctl(fd, NIOCTXSYNC, NULL);
		if (!nm_tx_pending(ring))
			return 0;
		if (now() - t0 > DEADLINE_S)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		poll(&p, 1, 100);
	}
}

/* Sends `count` frames of `len` bytes, each behind `hdr` zero bytes, on
 * TX ring `ri` of `p`. Returns how many went. */
static long send_frames(struct port *p, unsigned ri, long count, int len, int hdr)
{
	struct netmap_ring *ring = NETMAP_TXRING(p->nifp, ri);
	double t0 = now();
	long done = 0;
	while (done < count) {
		if (wait_room(p->fd, ring, t0) != 0)
			break;
		uint32_t i = ring->cur;
		for (uint32_t n = nm_ring_space(ring); n > 0 && done < count; n--, done++) {
			struct netmap_slot *slot = &ring->slot[i];
			char *buf = NETMAP_BUF(ring, slot->buf_idx);
			memset(buf, 0, hdr);
			frame(buf + hdr, len, done);
			slot->len = (uint16_t)(len + hdr);
			slot->flags = 0;
			i = nm_ring_next(ring, i);
		}
		ring->head = ring->cur = i;
		ioctl(p->fd, NIOCTXSYNC, NULL);
	}
	if (drain(p->fd, ring) != 0)
		return -1;
	return done;
}

static int cmd_rings(const char *newport, const char *existing, int existing_rings, long count)
{
	struct port r0, r1, e;
	char name[64];
	snprintf(name, sizeof(name), "%s", newport);
	REQUIRE("ring 0 of a new port registers asking for 2 rings of 256 slots",
	       open_port(&r0, name, NR_REG_ONE_NIC, 0, 0, 2, 256) == 0);
	EXPECT("... and gets them",
	       r0.r.nr_tx_rings == 2 && r0.r.nr_rx_rings == 2 && r0.r.nr_tx_slots == 256 &&
		       r0.r.nr_rx_slots == 256 && r0.nifp->ni_tx_rings == 2 &&
		       NETMAP_TXRING(r0.nifp, 0)->num_slots == 256);
	REQUIRE("ring 1 registers on a second descriptor asking for 4 rings of 1024",
	       open_port(&r1, name, NR_REG_ONE_NIC, 1, 0, 4, 1024) == 0);
	EXPECT("... and is told the port's own: 2 rings of 256",
	       r1.r.nr_tx_rings == 2 && r1.r.nr_rx_rings == 2 && r1.r.nr_tx_slots == 256 &&
		       r1.r.nr_rx_slots == 256);
	long sent = send_frames(&r1, 1, count, 60, 0);
	printf("sent %ld\n", sent);
	EXPECT("frames go out on ring 1", sent == count);
	close_port(&r1);
	close_port(&r0);

	REQUIRE("an existing port registers asking for 1 ring of 128 slots",
	       open_port(&e, existing, NR_REG_ALL_NIC, 0, 0, 1, 128) == 0);
	EXPECT("... and is told the rings it has",
	       e.r.nr_tx_rings == existing_rings && e.r.nr_rx_rings == existing_rings &&
		       e.nifp->ni_rx_rings == (uint32_t)existing_rings && e.r.nr_tx_slots != 128);
	close_port(&e);
	return 0;
}

static int cmd_hdrtx(const char *port, long count)
{
	struct port p, q;
	uint32_t len;
	/* Ring 0 of a two-ring port, so a second descriptor can try ring 1. */
	REQUIRE("REGISTER with NR_ACCEPT_VNET_HDR",
	       open_port(&p, port, NR_REG_ONE_NIC, 0, NR_ACCEPT_VNET_HDR, 2, 0) == 0);
	len = 99;
	EXPECT("PORT_HDR_GET: no header at first", port_hdr(p.fd, port, NETMAP_REQ_PORT_HDR_GET, &len) == 0 && len == 0);
	len = 11;
	errno = 0;
	EXPECT("PORT_HDR_SET of 11 bytes fails with EINVAL",
	       port_hdr(p.fd, port, NETMAP_REQ_PORT_HDR_SET, &len) == -1 && errno == EINVAL);
	len = 10;
	errno = 0;
	EXPECT("PORT_HDR_SET on a port not open here fails with ENXIO",
	       port_hdr(p.fd, "vale0:not-here", NETMAP_REQ_PORT_HDR_SET, &len) == -1 &&
		       errno == ENXIO);
	struct port pipe;
	REQUIRE("a pipe end registers", open_port(&pipe, "hp{1", NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	errno = 0;
	EXPECT("PORT_HDR_SET on a pipe fails with ENXIO (VALE ports only, as in netmap)",
	       port_hdr(p.fd, "hp{1", NETMAP_REQ_PORT_HDR_SET, &len) == -1 && errno == ENXIO);
	close_port(&pipe);
	len = 12;
	EXPECT("PORT_HDR_SET of 12 bytes", port_hdr(p.fd, port, NETMAP_REQ_PORT_HDR_SET, &len) == 0);
	len = 10;
	EXPECT("PORT_HDR_SET of 10 bytes", port_hdr(p.fd, port, NETMAP_REQ_PORT_HDR_SET, &len) == 0);
	len = 0;
	EXPECT("PORT_HDR_GET: 10", port_hdr(p.fd, port, NETMAP_REQ_PORT_HDR_GET, &len) == 0 && len == 10);
	int other = open("/dev/netmap", O_RDWR);
	len = 0;
	EXPECT("PORT_HDR_GET by name from an unregistered descriptor: 10",
	       port_hdr(other, port, NETMAP_REQ_PORT_HDR_GET, &len) == 0 && len == 10);
	len = 0;
	EXPECT("PORT_HDR_GET of a port not open here: 0",
	       port_hdr(other, "vale0:not-here", NETMAP_REQ_PORT_HDR_GET, &len) == 0 && len == 0);
	close(other);
	errno = 0;
	EXPECT("ring 1 without NR_ACCEPT_VNET_HDR fails with EIO",
	       open_port(&q, port, NR_REG_ONE_NIC, 1, 0, 0, 0) == -1 && errno == EIO);
	REQUIRE("ring 1 with NR_ACCEPT_VNET_HDR registers",
	       open_port(&q, port, NR_REG_ONE_NIC, 1, NR_ACCEPT_VNET_HDR, 0, 0) == 0);
	close_port(&q);
	long sent = send_frames(&p, 0, count, 60, 10);
	printf("sent %ld\n", sent);
	EXPECT("every frame went out behind its header", sent == count);
	close_port(&p);
	return 0;
}

static int cmd_hdrrx(const char *port, long count)
{
	struct port p;
	uint32_t len = 12;
	REQUIRE("REGISTER with NR_ACCEPT_VNET_HDR",
	       open_port(&p, port, NR_REG_ALL_NIC, 0, NR_ACCEPT_VNET_HDR, 0, 0) == 0);
	REQUIRE("PORT_HDR_SET of 12 bytes", port_hdr(p.fd, port, NETMAP_REQ_PORT_HDR_SET, &len) == 0);
	/* Ready to receive: the test starts the sender when it sees this. */
	printf("ready\n");
	fflush(stdout);
	struct netmap_ring *ring = NETMAP_RXRING(p.nifp, 0);
	long got = 0, bad = 0;
	double t0 = now();
	while (got < count && now() - t0 < DEADLINE_S) {
		struct pollfd pf = { .fd = p.fd, .events = POLLIN };
		poll(&pf, 1, 1000);
		uint32_t i = ring->cur;
		for (uint32_t n = nm_ring_space(ring); n > 0; n--, got++) {
			struct netmap_slot *slot = &ring->slot[i];
			const unsigned char *b = (const unsigned char *)NETMAP_BUF(ring, slot->buf_idx);
			static const unsigned char zero[12];
			if (slot->len != 12 + 60 || memcmp(b, zero, 12) != 0 || b[12 + 12] != 0x08 ||
			    b[12 + 13] != 0x00)
				bad++;
			i = nm_ring_next(ring, i);
		}
		ring->head = ring->cur = i;
	}
	printf("received %ld\n", got);
	EXPECT("every frame arrived", got == count);
	EXPECT("each behind a zeroed 12-byte header, the frame after it", bad == 0);
	close_port(&p);
	return 0;
}

static int cmd_reconnect(const char *port, long count)
{
	struct port p;
	REQUIRE("REGISTER", open_port(&p, port, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	printf("ready\n");
	fflush(stdout);
	struct netmap_ring *ring = NETMAP_RXRING(p.nifp, 0);
	long got = 0;
	int halfway = 0;
	double t0 = now();
	while (got < count && now() - t0 < DEADLINE_S) {
		struct pollfd pf = { .fd = p.fd, .events = POLLIN };
		poll(&pf, 1, 1000);
		uint32_t i = ring->cur;
		for (uint32_t n = nm_ring_space(ring); n > 0; n--, got++)
			i = nm_ring_next(ring, i);
		ring->head = ring->cur = i;
		if (!halfway && got >= count / 2) {
			halfway = 1;
			printf("half\n");
			fflush(stdout);
		}
	}
	printf("received %ld\n", got);
	EXPECT("every frame arrived, from both daemons", got == count);
	close_port(&p);
	return 0;
}

static int cmd_indirect(const char *port, long count, int bad)
{
	struct port p;
	REQUIRE("REGISTER", open_port(&p, port, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	struct netmap_ring *ring = NETMAP_TXRING(p.nifp, 0);
	/* Frames live in the program's own memory, never in the ring's
	 * buffers: the slots only point at them. */
	static char frames[4096][64];
	static char big[70000];
	double t0 = now();
	long done = 0;
	if (bad) {
		/* In one sync: a length larger than a buffer, then good frames
		 * and bad pointers mixed, some pointing where the slot before
		 * points (a bad one as well as a good one). */
		static char good[64];
		const struct {
			uintptr_t ptr;
			uint16_t len;
		} mix[] = {
			{ (uintptr_t)big, 0 }, /* len: a buffer and one byte */
			{ (uintptr_t)good, 60 },
			{ 8, 60 }, /* never mapped */
			{ (uintptr_t)good, 60 },
			{ (uintptr_t)good, 60 },
			{ 8, 60 },
			{ 8, 60 },
		};
		const unsigned nmix = sizeof(mix) / sizeof(mix[0]);
		frame(good, 60, -1);
		REQUIRE("room for the mixed slots",
			wait_room(p.fd, ring, t0) == 0 && nm_ring_space(ring) >= nmix);
		uint32_t i = ring->cur;
		for (unsigned k = 0; k < nmix; k++) {
			ring->slot[i].flags = NS_INDIRECT;
			ring->slot[i].ptr = mix[k].ptr;
			ring->slot[i].len = mix[k].len ? mix[k].len : (uint16_t)(ring->nr_buf_size + 1);
			i = nm_ring_next(ring, i);
		}
		ring->head = ring->cur = i;
		ioctl(p.fd, NIOCTXSYNC, NULL);
	}
	while (done < count) {
		if (wait_room(p.fd, ring, t0) != 0)
			break;
		uint32_t i = ring->cur;
		for (uint32_t n = nm_ring_space(ring); n > 0 && done < count; n--, done++) {
			struct netmap_slot *slot = &ring->slot[i];
			char *f = frames[done % 4096];
			frame(f, 60, done);
			slot->ptr = (uintptr_t)f;
			slot->len = 60;
			slot->flags = NS_INDIRECT;
			i = nm_ring_next(ring, i);
		}
		ring->head = ring->cur = i;
		/* The frames pointed at are read during this sync: they may
		 * change after it. */
		ioctl(p.fd, NIOCTXSYNC, NULL);
	}
	EXPECT("every slot was taken", drain(p.fd, ring) == 0);
	printf("sent %ld\n", done);
	close_port(&p);
	return 0;
}

static int cmd_pipes(const char *a, const char *b)
{
	char na[64], nb[64], na_peer[64], nv[64];
	struct port pa, pb, pp, v;
	snprintf(na, sizeof(na), "%s{1", a);
	snprintf(na_peer, sizeof(na_peer), "%s}1", a);
	snprintf(nb, sizeof(nb), "%s}1", b);
	snprintf(nv, sizeof(nv), "%s", "vale5:memid");
	REQUIRE("pipe end A{1 registers", open_port(&pa, na, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	REQUIRE("pipe end B}1 registers", open_port(&pb, nb, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	REQUIRE("pipe end A}1 registers (B}1 is another pipe's end)",
		open_port(&pp, na_peer, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	REQUIRE("a switch port registers", open_port(&v, nv, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	EXPECT("memory ids are never 0",
	       pa.r.nr_mem_id && pb.r.nr_mem_id && pp.r.nr_mem_id && v.r.nr_mem_id);
	EXPECT("the two ends of a pipe share one memory id", pa.r.nr_mem_id == pp.r.nr_mem_id);
	EXPECT("different memories have different ids",
	       pa.r.nr_mem_id != pb.r.nr_mem_id && pa.r.nr_mem_id != v.r.nr_mem_id &&
		       pb.r.nr_mem_id != v.r.nr_mem_id);
	/* One frame from A{1: it reaches A}1 within the sync (a pipe's data
	 * path is the sender's own), and never B}1. */
	EXPECT("a frame goes out on A{1", send_frames(&pa, 0, 1, 60, 0) == 1);
	ioctl(pp.fd, NIOCRXSYNC, NULL);
	ioctl(pb.fd, NIOCRXSYNC, NULL);
	EXPECT("A}1 has it", nm_ring_space(NETMAP_RXRING(pp.nifp, 0)) == 1);
	EXPECT("B}1 has nothing", nm_ring_space(NETMAP_RXRING(pb.nifp, 0)) == 0);
	close_port(&v);
	close_port(&pp);
	close_port(&pb);
	close_port(&pa);
	return 0;
}

static int cmd_memid(const char *port)
{
	struct port v, a, b, c, x;
	REQUIRE("PORT registers", open_port(&v, port, NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	errno = 0;
	EXPECT("a pipe asking for PORT's memory is refused with EOPNOTSUPP",
	       open_port_mem(&x, "mi{1", NR_REG_ALL_NIC, 0, 0, 0, 0, v.r.nr_mem_id) == -1 &&
		       errno == EOPNOTSUPP);
	REQUIRE("the pipe registers asking for any memory",
		open_port(&a, "mi{1", NR_REG_ALL_NIC, 0, 0, 0, 0) == 0);
	EXPECT("... and has a memory of its own", a.r.nr_mem_id && a.r.nr_mem_id != v.r.nr_mem_id);
	REQUIRE("its other end registers asking for the pipe's memory",
		open_port_mem(&b, "mi}1", NR_REG_ALL_NIC, 0, 0, 0, 0, a.r.nr_mem_id) == 0);
	EXPECT("... and has it", b.r.nr_mem_id == a.r.nr_mem_id);
	REQUIRE("a port asking for an id no port here has registers",
		open_port_mem(&c, "vale5:anymem", NR_REG_ALL_NIC, 0, 0, 0, 0, 65000) == 0);
	EXPECT("... with a memory of its own",
	       c.r.nr_mem_id && c.r.nr_mem_id != v.r.nr_mem_id && c.r.nr_mem_id != a.r.nr_mem_id);
	struct nmreq_header h;
	struct nmreq_port_info_get info;
	memset(&info, 0, sizeof(info));
	int fd = open("/dev/netmap", O_RDWR);
	header(&h, port, NETMAP_REQ_PORT_INFO_GET, &info);
	EXPECT("PORT_INFO_GET of PORT from another descriptor answers its memory",
	       ioctl(fd, NIOCCTRL, &h) == 0 && info.nr_mem_id == v.r.nr_mem_id &&
		       info.nr_memsize == v.r.nr_memsize && info.nr_rx_rings == v.r.nr_rx_rings);
	close(fd);
	close_port(&c);
	close_port(&b);
	close_port(&a);
	close_port(&v);
	return 0;
}

static int cmd_ifname(const char *ifname)
{
	struct port p;
	errno = 0;
	EXPECT("REGISTER of a bare name that is no interface fails with ENXIO",
	       open_port(&p, ifname, NR_REG_ALL_NIC, 0, 0, 0, 0) == -1 && errno == ENXIO);
	struct nmreq_header h;
	struct nmreq_port_info_get info;
	int fd = open("/dev/netmap", O_RDWR);
	header(&h, ifname, NETMAP_REQ_PORT_INFO_GET, &info);
	errno = 0;
	EXPECT("PORT_INFO_GET of it fails with ENXIO too", ioctl(fd, NIOCCTRL, &h) == -1 && errno == ENXIO);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see the comment at the top of nm_compat.c\n");
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "rings") && argc == 6)
		cmd_rings(argv[2], argv[3], atoi(argv[4]), atol(argv[5]));
	else if (!strcmp(cmd, "hdrtx") && argc == 4)
		cmd_hdrtx(argv[2], atol(argv[3]));
	else if (!strcmp(cmd, "hdrrx") && argc == 4)
		cmd_hdrrx(argv[2], atol(argv[3]));
	else if (!strcmp(cmd, "indirect") && argc == 5)
		cmd_indirect(argv[2], atol(argv[3]), atoi(argv[4]));
	else if (!strcmp(cmd, "pipes") && argc == 4)
		cmd_pipes(argv[2], argv[3]);
	else if (!strcmp(cmd, "reconnect") && argc == 4)
		cmd_reconnect(argv[2], atol(argv[3]));
	else if (!strcmp(cmd, "memid") && argc == 3)
		cmd_memid(argv[2]);
	else if (!strcmp(cmd, "ifname") && argc == 3)
		cmd_ifname(argv[2]);
	else {
		fprintf(stderr, "nm_compat: bad arguments\n");
		return 2;
	}
	printf("%d failures\n", failures);
	return failures != 0;
}
