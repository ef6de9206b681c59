/*
 * Misuse of the netmap API must fail with the errno netmap gives, never
 * crash. Prints one line per check; exits non-zero on the first failure.
 * Built with -DWITH_NMPORT it also checks libnetmap's nmport_* functions.
 */
#ifdef WITH_NMPORT
#define NETMAP_WITH_LIBS /* the nm_open helpers too */
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <net/netmap_user.h>
#ifdef WITH_NMPORT
#include <libnetmap.h>
#endif

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

static int reg(int fd, const char *name, struct nmreq_register *r, uint16_t version)
{
	struct nmreq_header h;
	memset(&h, 0, sizeof(h));
	memset(r, 0, sizeof(*r));
	h.nr_version = version;
	h.nr_reqtype = NETMAP_REQ_REGISTER;
	strncpy(h.nr_name, name, sizeof(h.nr_name) - 1);
	h.nr_body = (uintptr_t)r;
	r->nr_mode = NR_REG_ALL_NIC;
	return ioctl(fd, NIOCCTRL, &h);
}

int main(int argc, char **argv)
{
	const char *port = argc > 1 ? argv[1] : "vale0:misuse";
	struct nmreq_register r;
	int fd = open("/dev/netmap", O_RDWR);
	EXPECT("open /dev/netmap", fd >= 0);
	if (fd < 0)
		return 1;

	errno = 0;
	EXPECT("TXSYNC before REGISTER fails with ENXIO",
	       ioctl(fd, NIOCTXSYNC, NULL) == -1 && errno == ENXIO);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	EXPECT("poll before REGISTER reports POLLERR",
	       poll(&p, 1, 100) == 1 && (p.revents & POLLERR));
	errno = 0;
	EXPECT("NIOCCTRL with a NULL argument fails with EFAULT",
	       ioctl(fd, NIOCCTRL, NULL) == -1 && errno == EFAULT);
	struct nmreq_header h;
	memset(&h, 0, sizeof(h));
	h.nr_version = NETMAP_API;
	h.nr_reqtype = NETMAP_REQ_REGISTER;
	strcpy(h.nr_name, port);
	errno = 0;
	EXPECT("REGISTER without a body fails with EFAULT",
	       ioctl(fd, NIOCCTRL, &h) == -1 && errno == EFAULT);
	errno = 0;
	EXPECT("REGISTER with API version 9 fails with EINVAL",
	       reg(fd, port, &r, 9) == -1 && errno == EINVAL);
	/* A bare name is an interface, as netmap:nonsense: there is none. */
	errno = 0;
	EXPECT("REGISTER of 'nonsense' fails with ENXIO",
	       reg(fd, "nonsense", &r, NETMAP_API) == -1 && errno == ENXIO);
	errno = 0;
	EXPECT("REGISTER of 'non sense' fails with EINVAL",
	       reg(fd, "non sense", &r, NETMAP_API) == -1 && errno == EINVAL);
	/* vale-ctl with no arguments: a listing with an empty name. */
	struct nmreq_register body;
	memset(&body, 0, sizeof(body));
	memset(&h, 0, sizeof(h));
	h.nr_version = NETMAP_API;
	h.nr_reqtype = NETMAP_REQ_VALE_LIST;
	h.nr_body = (uintptr_t)&body;
	errno = 0;
	EXPECT("VALE_LIST with an empty name fails with EOPNOTSUPP",
	       ioctl(fd, NIOCCTRL, &h) == -1 && errno == EOPNOTSUPP);
	h.nr_reqtype = NETMAP_REQ_VALE_ATTACH;
	errno = 0;
	EXPECT("VALE_ATTACH with an empty name fails with EOPNOTSUPP",
	       ioctl(fd, NIOCCTRL, &h) == -1 && errno == EOPNOTSUPP);
	h.nr_reqtype = 200;
	errno = 0;
	EXPECT("an unknown request type fails with EINVAL",
	       ioctl(fd, NIOCCTRL, &h) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("REGISTER of 'vale0:' fails with EINVAL",
	       reg(fd, "vale0:", &r, NETMAP_API) == -1 && errno == EINVAL);
	errno = 0;
	EXPECT("an unknown ioctl fails with ENOTTY",
	       ioctl(fd, _IO('i', 200), NULL) == -1 && errno == ENOTTY);
	errno = 0;
	EXPECT("mmap before REGISTER fails with EINVAL",
	       mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EINVAL);

	EXPECT("REGISTER succeeds", reg(fd, port, &r, NETMAP_API) == 0);
	EXPECT("REGISTER reports rings, slots and memory",
	       r.nr_tx_rings >= 1 && r.nr_rx_rings >= 1 && r.nr_tx_slots >= 64 &&
		       r.nr_memsize > r.nr_offset);
	struct nmreq_register r2;
	errno = 0;
	EXPECT("a second REGISTER on one descriptor fails with EBUSY",
	       reg(fd, port, &r2, NETMAP_API) == -1 && errno == EBUSY);
	errno = 0;
	EXPECT("mmap larger than nr_memsize fails with EINVAL",
	       mmap(NULL, r.nr_memsize + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
			       MAP_FAILED && errno == EINVAL);
	errno = 0;
	EXPECT("a private mmap fails with EINVAL",
	       mmap(NULL, r.nr_memsize, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) == MAP_FAILED &&
		       errno == EINVAL);
	char *mem = mmap(NULL, r.nr_memsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	EXPECT("mmap of nr_memsize succeeds", mem != MAP_FAILED);
	if (mem == MAP_FAILED)
		return 1;
	struct netmap_if *nifp = NETMAP_IF(mem, r.nr_offset);
	struct netmap_ring *tx = NETMAP_TXRING(nifp, 0);
	EXPECT("the TX ring starts empty and owned by the application",
	       tx->head == tx->cur && nm_ring_space(tx) == tx->num_slots - 1);
	uint32_t head = tx->head;
	tx->head = tx->num_slots + 5;
	tx->cur = tx->num_slots + 5;
	EXPECT("TXSYNC with head out of range does not fail", ioctl(fd, NIOCTXSYNC, NULL) == 0);
	EXPECT("... and puts the ring back to its last valid state",
	       tx->head == head && tx->cur == head && tx->tail < tx->num_slots);
	EXPECT("munmap", munmap(mem, r.nr_memsize) == 0);
	EXPECT("close", close(fd) == 0);
	errno = 0;
	EXPECT("TXSYNC on the closed descriptor fails with EBADF",
	       ioctl(fd, NIOCTXSYNC, NULL) == -1 && errno == EBADF);

	int other = open("/dev/null", O_RDONLY);
	EXPECT("other files still open normally", other >= 0 && close(other) == 0);

#ifdef WITH_NMPORT
	errno = 0;
	EXPECT("nmport_open(NULL) fails with EINVAL", nmport_open(NULL) == NULL && errno == EINVAL);
	errno = 0;
	EXPECT("nmport_open('bogus') fails with EINVAL",
	       nmport_open("bogus") == NULL && errno == EINVAL);
	errno = 0;
	EXPECT("nmport_open with an unknown flag fails with EINVAL",
	       nmport_open("vale0:x/Q") == NULL && errno == EINVAL);
	errno = 0;
	EXPECT("nmport_open of a host ring fails with EINVAL",
	       nmport_open("vale0:x^") == NULL && errno == EINVAL);
	EXPECT("nmport_inject(NULL) returns 0", nmport_inject(NULL, "x", 1) == 0);
	nmport_close(NULL);
	struct nmport_d *d = nmport_open(port);
	EXPECT("nmport_open succeeds after a close", d != NULL);
	if (d) {
		char big[70000];
		memset(big, 0, sizeof(big));
		EXPECT("nmport_inject of a frame larger than a buffer returns 0",
		       nmport_inject(d, big, sizeof(big)) == 0);
		EXPECT("nmport_inject of a frame returns its size", nmport_inject(d, big, 60) == 60);
		errno = 0;
		EXPECT("nmport_register twice fails with EBUSY",
		       nmport_register(d) == -1 && errno == EBUSY);
		nmport_close(d);
	}
	errno = 0;
	EXPECT("nm_open(NULL) fails with EINVAL",
	       nm_open(NULL, NULL, 0, NULL) == NULL && errno == EINVAL);
	errno = 0;
	EXPECT("nm_close(NULL) fails with EINVAL", nm_close(NULL) == -1 && errno == EINVAL);
	struct nm_pkthdr ph;
	EXPECT("nm_nextpkt(NULL) returns NULL", nm_nextpkt(NULL, &ph) == NULL);
	EXPECT("nm_dispatch(NULL) returns -1", nm_dispatch(NULL, 1, NULL, NULL) == -1);
	/* One ring per descriptor, as pkt-gen -p threads do. */
	struct nmport_d *r0 = nmport_open("vale0:rings-0@conf:rings=2");
	struct nmport_d *r1 = nmport_open("vale0:rings-1");
	EXPECT("rings 0 and 1 of one port register on two descriptors",
	       r0 && r1 && r0->first_tx_ring == 0 && r1->first_tx_ring == 1 &&
		       r1->last_tx_ring == 1 && r0->nifp != NULL && r1->nifp != NULL);
	errno = 0;
	EXPECT("ring 0 again on a third descriptor fails with EBUSY",
	       nmport_open("vale0:rings-0") == NULL && errno == EBUSY);
	errno = 0;
	EXPECT("ring 2 of a two-ring port fails with EINVAL",
	       nmport_open("vale0:rings-2") == NULL && errno == EINVAL);
	nmport_close(r0);
	r0 = nmport_open("vale0:rings-0");
	EXPECT("ring 0 registers again once its descriptor is closed", r0 != NULL);
	nmport_close(r0);
	nmport_close(r1);
#endif
	printf("%d failures\n", failures);
	return failures != 0;
}
