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

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rmem.h>

#define LANE_CHUNK  (1u << 20) /* bytes per posted operation */
#define LANE_DEPTH  16         /* posted operations in flight per request */
#define LANE_REAP   64         /* completions taken per rmem_poll */

/* One lane: one rmem client with its handle on the disk's region, and the
 * requests queued on it (lanes.c makes and closes them; only poller.c
 * touches the queue). */
struct lane_req;

struct lane {
	pthread_mutex_t mu;   /* guards queue and leading */
	rmem_client *c;
	struct rmem_region r;
	bool sync;            /* the library posts nothing on r: see lanes.c */
	bool leading;         /* one of the lane's requests is its poller */
	struct lane_req *queue, **queue_tail;  /* not yet taken by the poller */
	struct lane_req *active;               /* the poller's: taken, not finished */
};


/* lane_io: queues the request, and returns when every chunk of it has
 * completed (polling for the lane meanwhile, when its turn comes).  0 or
 * the first negative errno.  Any number of threads at once. */
int poller_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	      uint64_t off);

#endif
