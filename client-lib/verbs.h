/*
 * verbs.h - the RDMA transport of librmem.  Every ibv_* and rdma_* call of the
 * library lives in the verbs*.c files (verbs_conn.c: device and connection,
 * verbs_post.c: work requests and completions, verbs_regcache.c:
 * registrations), behind the calls below.
 *
 * A client on RDMA keeps its control stream (TCP): HELLO, ALLOC, FREE, STATS
 * travel there.  What moves region bytes goes on one RC queue pair attached to
 * the session with the HELLO's (session_id, attach_token):
 *   - reads and writes are IBV_WR_RDMA_READ/WRITE straight into the region;
 *     up to NIC_BOUNCE_MAX bytes through a pre-registered bounce slot (tiny
 *     writes inline), larger ones from the caller's buffer, registered
 *     while transfers on it are in flight (verbs_regcache.h: never kept longer, since
 *     freed and remapped memory would go unnoticed) and split at the port's
 *     max_msg_sz; a transfer inside a range the application registered
 *     (rmem_register_buf) uses that registration, whatever its size;
 *   - rmem_cas/rmem_faa are IBV_WR_ATOMIC_CMP_AND_SWP/FETCH_AND_ADD.
 * Every work request is signalled; an RC send queue completes in posting
 * order, so operations complete in the order they were posted, as on TCP.
 *
 * Operations share struct eng_op (op.h) with the stream engine: one
 * signalled work request counts as one frame of its op.  The NIC knows
 * nothing above it: what happens to an operation (a work request ended, the
 * connection broke, a request must go on the stream) it reports through
 * the callbacks it was given (struct verbs_events), which the engine's data
 * path (datapath.c) provides.
 *
 * A work completion error fails its operation with a negative errno
 * (IBV_WC_REM_ACCESS_ERR is -EACCES).  The queue pair is then in the error
 * state, and so is the daemon's (rxe's responder moves its queue pair to the
 * error state after refusing an access, and the daemon is not told): a reset
 * of ours alone brings nothing back.  So once every request behind the
 * failed one has been flushed, the client attaches again with the session's
 * token (a new rdma_cm id and queue pair over the same PD, CQ and
 * registrations); the daemon replaces its queue pair and keeps the keys
 * (docs/protocol.md 7.10).  The flushed requests of the other operations are
 * posted again on the new queue pair, in order, and rmem_transport() still
 * says "rdma".  Only when the re-attach fails (a daemon in window mode
 * refuses it) does the data move to the TCP path of the same session, where
 * the same keys work: the flushed requests are sent again there, and
 * rmem_transport() says "tcp" from then on.
 *
 * All calls below run under the client's lock (lock.h).
 */
#ifndef RMEM_VERBS_H
#define RMEM_VERBS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "clock.h"
#include "verbs_regcache.h"
#include "op.h"
#include "rmem.h"

/* Transfers up to this size go through a bounce slot (a copy, no
 * registration); larger ones use the caller's buffer. */
#define NIC_BOUNCE_MAX 4096u

#define NIC_NO_DEADLINE CLOCK_NO_DEADLINE

/*
 * What verbs_io() returns besides 0 (all posted) and negative errnos: not an
 * error, an outcome.  The queue pair has failed for good and the data path
 * has moved to the stream; the caller sends the rest there.  A positive
 * value, so that it can never be mistaken for an errno.
 */
enum verbs_outcome {
	NIC_USE_STREAM = 1,
};

/* A flushed read or write that verbs_events.resend sends on the stream. */
struct verbs_req {
	bool write;
	uint64_t region_id, offset;
	uint32_t rkey;
	uint32_t len;
	uint8_t *local;      /* the caller's bytes */
};

/* How the NIC reports to the layer above it; ctx is passed back. */
struct verbs_events {
	void *ctx;
	/* One work request of op has ended with status (0 or a negative
	 * errno); op may end with it, and an async op be freed. */
	void (*part_done)(void *ctx, struct eng_op *op, int status);
	/* The data path moved to the stream: send req there for op (before
	 * part_done ends its work request).  0 or a negative errno. */
	int (*resend)(void *ctx, struct eng_op *op, const struct verbs_req *req);
	/* The connection is gone: the stream ends too, with err.  Returns err. */
	int (*fail)(void *ctx, int err);
	/* True once the client is unusable. */
	bool (*broken)(void *ctx);
	/* A wait is about to sleep: renew the lease; milliseconds until it is
	 * due again, or -1 (eng_lease_poke). */
	int (*lease_poke)(void *ctx);
	/* verbs_detach() dropped op's last work request: forget the op. */
	void (*drop)(void *ctx, struct eng_op *op);
};

/* Where and as whom to attach. */
struct verbs_target {
	const char *host;
	uint16_t port;
	uint64_t session_id, token;
	int timeout_ms;      /* connect, and longest wait without progress */
};

struct verbs_conn;

/* True when this machine has at least one RDMA device.  Cheap enough to ask
 * at every connect. */
bool verbs_have_device(void);

/*
 * Attaches an RC queue pair to the session t names: rdma_cm to host:port,
 * private data = the attach message.  Waits at most t->timeout_ms (<= 0: no
 * limit).  kept (the client's registered ranges) must outlive the
 * connection.  On success *out is the connection.
 * Errors: -ECONNREFUSED (the daemon refused the attach), -EHOSTUNREACH (no
 * route to host through an RDMA device), -ETIMEDOUT, -ENOTSUP (the device
 * cannot do what the path needs), -ENOMEM, others from the verbs.
 */
int verbs_attach(struct verbs_conn **out, const struct verbs_target *t, const struct verbs_events *ev,
	       struct regcache_kept *kept);

/* Disconnects and frees everything of n; posted operations are dropped
 * (ev->drop), and no DMA touches their buffers once this returns.  Accepts
 * NULL. */
void verbs_detach(struct verbs_conn *n);

/*
 * Posts the work requests of one read (write false) or write of len bytes
 * between buf and the region at off, for op.  Waits for room in the send
 * queue when it is full, completing other operations meanwhile.  Stops
 * posting once op has failed.  0, the error that stopped the posting
 * (op->sent says whether anything went out), or NIC_USE_STREAM: *done
 * bytes were posted, the rest goes on the stream.
 */
int verbs_io(struct verbs_conn *n, struct eng_op *op, bool write, const struct rmem_region *r,
	   uint64_t off, void *buf, size_t len, size_t *done);

/* Posts one 8-byte atomic (cas: compare-and-swap, else fetch-and-add) on
 * the region at off for the synchronous op; *old gets the bytes before once
 * op has ended.  If the queue pair fails for good before it is done, op
 * ends with on_stream set.  0, a negative errno, or NIC_USE_STREAM (nothing
 * was posted: send it on the stream). */
int verbs_atomic(struct verbs_conn *n, struct eng_op *op, bool cas, const struct rmem_region *r,
	       uint64_t off, uint64_t operand, uint64_t desired, uint64_t *old);

/* Handles every completion there is (and recovers a failed queue pair).
 * 0 or a negative errno (broken). */
int verbs_reap(struct verbs_conn *n);

/* Waits for completions (or a connection event) until deadline (monotonic
 * ms, NIC_NO_DEADLINE).  0 after something happened, 1 once deadline has
 * passed, or a negative errno (broken; also when posted requests made no
 * progress for the target's timeout_ms). */
int verbs_wait(struct verbs_conn *n, int64_t deadline);

/* True while work requests are posted and not yet completed. */
bool verbs_busy(const struct verbs_conn *n);

/* True when reads, writes and atomics go on the queue pair: n is set and
 * has not moved its data to the stream. */
bool verbs_carries_data(const struct verbs_conn *n);

/* rmem_register_buf: records the range in kept, registered on n's PD when
 * n carries data (n may be NULL: only recorded).  regcache_keep()'s
 * errors. */
int verbs_keep(struct verbs_conn *n, struct regcache_kept *kept, const void *buf, size_t len);

#endif /* RMEM_VERBS_H */
