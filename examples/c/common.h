/* Shared bits of the libringswitch examples. */
#ifndef RS_EXAMPLES_COMMON_H
#define RS_EXAMPLES_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringswitch.h>

static inline double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Opens a port or exits saying why. */
static inline rs_port *open_or_die(const char *sock, const char *name)
{
	rs_port *p = rs_port_open_at(sock, name);
	if (p == NULL) {
		fprintf(stderr, "cannot open %s: %s (%s)\n", name, rs_last_error(), strerror(errno));
		exit(1);
	}
	return p;
}

#endif
