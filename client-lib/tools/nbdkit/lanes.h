/*
 * lanes.h - the rmem side of nbdkit-rmem-plugin: one region seen through
 * several rmem sessions ("lanes"), and posted I/O on one lane.
 *
 * rmem.h: calls on one client take turns, and a call that waits holds the
 * client; so parallel NBD requests need several clients.  Each lane is one
 * client with its own handle on the same region (a named region; an
 * "anonymous" disk is a named region under a random name, unlinked once
 * every lane has opened it, so that it dies with the plugin).  A request
 * holds its lane for its whole run and keeps up to LANE_DEPTH chunks in
 * flight on it with rmem_post_read/rmem_post_write.
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

#define LANES_MAX   64
#define LANE_CHUNK  (1u << 20) /* bytes per posted operation */
#define LANE_DEPTH  16         /* posted operations in flight per request */

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

struct lane {
	pthread_mutex_t mu;
	rmem_client *c;
	struct rmem_region r;
	bool broken;      /* the session is gone: every later request fails */
};

struct lanes {
	unsigned n;
	uint64_t size;    /* the disk's size in bytes */
	struct lane lane[LANES_MAX];
};

/* Connects cfg->nlanes sessions and opens (or creates) the region on each.
 * 0, or a negative errno with the reason in err. */
int lanes_open(struct lanes *ls, const struct lanes_cfg *cfg, char *err, size_t errlen);
/* Closes every session (an anonymous disk's memory goes with the last). */
void lanes_close(struct lanes *ls);

/* The lane for the calling thread, locked; lane_put unlocks it. */
struct lane *lane_get(struct lanes *ls);
void lane_put(struct lane *l);

/* Reads or writes count bytes at off through lane l (held), in chunks of
 * LANE_CHUNK with up to LANE_DEPTH in flight.  With same_buf every chunk
 * writes the same buf (zeroing from one zero buffer of LANE_CHUNK bytes).
 * 0 or the first negative errno; every posted chunk has completed when it
 * returns, whatever the outcome, so buf is the caller's again. */
int lane_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	    uint64_t off);

#endif
