/*
 * poller.h - a lane's poller thread: the one thread that calls on the
 * lane's client, posting the requests nbdkit's threads queue and handing
 * back their completions.
 *
 * Why one thread: a librmem client is held by one call at a time, handed
 * on in the order threads ask (rmem.h); sixteen nbdkit threads posting on
 * one client spend their time waking each other to pass it on.  Here a
 * request costs its thread a short mutex to queue it and one sleep on its
 * own semaphore; the poller posts every queued request at once (the
 * library sends them in one batch, rmemd answers in one), waits in
 * rmem_poll, and one wake-up returns every reply that has come.
 */
#ifndef NBDRMEM_POLLER_H
#define NBDRMEM_POLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "lanes.h"

/* Starts the poller of lane l (connected, region open).  0 or -errno. */
int poller_start(struct lane *l);
/* Ends it; nothing may be queued (nbdkit has finished every request). */
void poller_stop(struct lane *l);

/* lane_io: queues the request, sleeps until every chunk of it has
 * completed.  0 or the first negative errno. */
int poller_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	      uint64_t off);

#endif
