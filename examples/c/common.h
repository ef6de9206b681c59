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

static inline void sleep_s(double s)
{
	struct timespec t = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9) };
	nanosleep(&t, NULL);
}

/* A non-negative decimal number, or exits saying which argument was wrong. */
static inline unsigned long parse_count(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
		fprintf(stderr, "%s wants a number, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

/* Exits with libringswitch's explanation of the last failure. */
static inline void die(const char *prog)
{
	fprintf(stderr, "%s: %s (%s)\n", prog, rs_last_error(), strerror(errno));
	exit(1);
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
