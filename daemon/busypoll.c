/*
 * busypoll.c - see busypoll.h.
 */
#include <sched.h>

#include "busypoll.h"
#include "clock.h"

static bool spin(bool (*try)(void *arg), void *arg)
{
	int64_t end = clock_mono_us() + BUSY_POLL_US;

	do {
		if (try(arg))
			return true;
		/* A client on this CPU cannot send while we spin: let it run. */
		sched_yield();
	} while (clock_mono_us() < end);
	return false;
}

bool busy_poll_try(struct busy_poll *bp, bool (*try)(void *arg), void *arg)
{
	bool got;

	if (bp->credit == 0 && ++bp->probe % BUSY_POLL_PROBE != 0)
		return false;
	got = spin(try, arg);
	if (got)
		bp->credit = BUSY_POLL_CREDIT;
	else if (bp->credit > 0)
		bp->credit--;
	return got;
}
