/*
 * busypoll.c - see busypoll.h.
 */
#include <poll.h>
#include <sched.h>

#include "busypoll.h"
#include "clock.h"

static bool spin(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int64_t end = clock_mono_us() + BUSY_POLL_US;

	do {
		/* Readable, EOF and errors alike: the read side deals with them. */
		if (poll(&pfd, 1, 0) > 0)
			return true;
		/* A client on this CPU cannot send while we spin: let it run. */
		sched_yield();
	} while (clock_mono_us() < end);
	return false;
}

bool busy_poll_readable(struct busy_poll *bp, int fd)
{
	bool got;

	if (bp->credit == 0 && ++bp->probe % BUSY_POLL_PROBE != 0)
		return false;
	got = spin(fd);
	if (got)
		bp->credit = BUSY_POLL_CREDIT;
	else if (bp->credit > 0)
		bp->credit--;
	return got;
}
