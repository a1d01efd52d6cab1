/*
 * lanes.h - the rmem side of nbdkit-rmem-plugin: one region seen through
 * several rmem sessions ("lanes"), and posted I/O on one lane.
 *
 * rmem.h: calls on one client take turns, and a call that waits holds the
 * client.  Each lane is one client with its own handle on the same named
 * region.  An anonymous disk (no name) is a region of lane 0's session
 * (rmem_alloc), on that one lane: the daemon frees it when the session
 * ends, however nbdkit ends.
 *
 * A request does not hold its lane: it queues itself, and one of the
 * requests waiting on the lane is its poller (poller.c), the only thread
 * calling on the client, which posts the queued requests
 * (rmem_post_read/rmem_post_write, LANE_DEPTH chunks in flight per
 * request) and wakes each when its last chunk has completed.
 *
 * A region the library does not post to (a redundant cluster region, for
 * now) is served through one lane with synchronous calls instead.
 *
 * No nbdkit in here: errors are returned as negative errno, with a sentence
 * in the caller's buffer, so that this file can be driven without nbdkit.
 */
#ifndef NBDRMEM_LANES_H
#define NBDRMEM_LANES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rmem.h>

#include "poller.h"

#define LANES_MAX   64

enum lanes_create { LANES_CREATE_AUTO, LANES_CREATE_NEVER, LANES_CREATE_ALWAYS };

struct lanes_cfg {
	const char *url;          /* rmem endpoint */
	const char *name;         /* NULL: an anonymous disk */
	int64_t size;             /* -1: not given */
	enum lanes_create create;
	const char *tenant, *secret_file, *transport, *tcp_congestion;
	int timeout_ms, resume_ms;   /* -1: librmem's defaults */
	unsigned nlanes;
};

struct lanes {
	unsigned n;
	uint64_t size;    /* the disk's size in bytes */
	struct lane lane[LANES_MAX];
};

/* Connects cfg->nlanes sessions and opens (or creates) the region on each
 * (one session for an anonymous disk, or a region the library does not
 * post to: ls->n says).  0, or a negative errno with the reason in err. */
int lanes_open(struct lanes *ls, const struct lanes_cfg *cfg, char *err, size_t errlen);
/* Closes every session (an anonymous disk's memory goes with its one). */
void lanes_close(struct lanes *ls);

/* The lane for the calling thread. */
struct lane *lane_get(struct lanes *ls);

/* Reads or writes count bytes at off through lane l, in chunks of
 * LANE_CHUNK with up to LANE_DEPTH of them in flight; any number of
 * threads at once.  With same_buf every chunk
 * writes the same buf (zeroing from one zero buffer of LANE_CHUNK bytes).
 * 0 or the first negative errno; every posted chunk has completed when it
 * returns, whatever the outcome, so buf is the caller's again. */
int lane_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	    uint64_t off);

#endif
