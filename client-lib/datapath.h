/*
 * datapath.h - the engine's data path (datapath.c): where reads, writes
 * and atomics go.  On a client with an RDMA data path (e->nic) they are
 * work requests on its queue pair (verbs.h); otherwise, and once the queue
 * pair has failed for good, frames on the stream (engine.h).  The NIC
 * reports to it through callbacks (struct verbs_events); the NIC's "use the
 * stream instead" outcome never leaves this module.
 *
 * All calls run under the client's lock, like the engine's.
 */
#ifndef RMEM_DATAPATH_H
#define RMEM_DATAPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* One read or write of a region's bytes. */
struct dp_job {
	uint16_t opcode;  /* PROTO_OP_READ or PROTO_OP_WRITE */
	const struct rmem_region *r;
	uint64_t off;
	const uint8_t *src; /* WRITE */
	uint8_t *dst;       /* READ */
	size_t len;
	/* A spaced READ (seg > 0; on the stream only): the bytes land in runs
	 * of seg, gap bytes apart, the first run seg - phase bytes (phase <
	 * seg), from dst on: a redundant region's data piece read straight
	 * into the caller's buffer (router_redund_post.c). */
	uint32_t seg, gap, phase;
};

/* True when this machine has an RDMA device (verbs_have_device()). */
bool dp_have_device(void);

/* Attaches the RDMA data path to the session just opened on e's stream.
 * 0 or verbs_attach()'s errors; e->nic is set on success. */
int dp_attach(struct engine *e, const char *host, uint16_t port, uint64_t session_id,
	      uint64_t token);

/* Drops the RDMA data path, if any (posted operations on it are
 * forgotten; no DMA touches their buffers once it returns). */
void dp_detach(struct engine *e);

/* After a resume: drops the old data path (its posted operations are
 * parked, engine.h) and attaches a new queue pair to the resumed session
 * with its new token; the application's registered ranges are registered
 * again there.  0 or dp_attach()'s errors (e->nic is NULL then). */
int dp_reattach(struct engine *e, const char *host, uint16_t port, uint64_t session_id,
		uint64_t token);

/* True when reads, writes and atomics go on the queue pair. */
bool dp_carries_data(const struct engine *e);

/*
 * Sends the job's requests for op on the data path: chunks of e->max_io
 * on the stream (queued when op is async), or work requests on the queue
 * pair (a spaced READ: -EOPNOTSUPP there, before anything is sent).  len 0 still sends one request on the stream, so that the daemon
 * checks the handle; on RDMA it moves nothing and asks nothing.  0 or the
 * error that stopped the sending (op->sent says whether anything went).
 */
int dp_submit(struct engine *e, struct eng_op *op, const struct dp_job *job);

/* Waits until the synchronous op has ended; returns its status. */
int dp_wait_op(struct engine *e, struct eng_op *op);

/* rmem_poll()'s progress: on both paths, waiting up to timeout_ms (0: no
 * wait, < 0: no limit) for a completion.  0 or a negative errno. */
int dp_progress(struct engine *e, int timeout_ms);

/* What to poll() for so that dp_progress() has something to do, for a
 * caller waiting on many clients at once: 1 with *pfd set, or 0 when this
 * client must be waited on by dp_progress() itself (eng_wait_fd()). */
int dp_wait_fd(struct engine *e, struct pollfd *pfd);

/* One 8-byte atomic (PROTO_OP_CAS or PROTO_OP_FAA), waited for; *old (may
 * be NULL) gets the bytes before.  0 or a negative errno. */
int dp_atomic(struct engine *e, uint16_t opcode, const struct rmem_region *r, uint64_t off,
	      uint64_t operand, uint64_t desired, uint64_t *old);

/* rmem_register_buf/rmem_unregister_buf: e->kept, registered on the queue
 * pair's PD while the data goes on RDMA.  regcache_keep()/_unkeep()'s
 * errors. */
int dp_keep(struct engine *e, const void *buf, size_t len);
int dp_unkeep(struct engine *e, const void *buf);

#endif /* RMEM_DATAPATH_H */
