/*
 * poller.h - the requests of a lane in flight together, one of them
 * polling for all.
 *
 * Why: a librmem client is held by one call at a time, handed on in the
 * order threads ask (rmem.h), so a request that holds a client for its
 * round trip pays a send, a sleep in poll and a wake-up of its own, and
 * sixteen threads posting on one client spend their time waking each
 * other to pass it on.  Here a request queues itself under a short mutex;
 * one waiting request, the poller, posts every queued request at once
 * (the library sends them in one batch, rmemd answers in one), waits in
 * rmem_poll, and wakes each request when it has finished.
 */
#ifndef NBDRMEM_POLLER_H
#define NBDRMEM_POLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "lanes.h"

/* lane_io: queues the request, and returns when every chunk of it has
 * completed (polling for the lane meanwhile, when its turn comes).  0 or
 * the first negative errno.  Any number of threads at once. */
int poller_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	      uint64_t off);

#endif
