/*
 * rdma.h - the RDMA data path of librmem.  Every ibv_* and rdma_* call of the
 * library lives in rdma.c and regcache.c, behind the calls below.
 *
 * A client on RDMA keeps its control stream (TCP): HELLO, ALLOC, FREE, STATS
 * travel there.  What moves region bytes goes on one RC queue pair attached to
 * the session with the HELLO's (session_id, attach_token):
 *   - reads and writes are IBV_WR_RDMA_READ/WRITE straight into the region;
 *     up to RDMA_BOUNCE_MAX bytes through a pre-registered bounce slot (tiny
 *     writes inline), larger ones from the caller's buffer, registered
 *     while transfers on it are in flight (regcache.h: never kept longer, since
 *     freed and remapped memory would go unnoticed) and split at the port's
 *     max_msg_sz; a transfer inside a range the application registered
 *     (rmem_register_buf) uses that registration, whatever its size;
 *   - rmem_cas/rmem_faa are IBV_WR_ATOMIC_CMP_AND_SWP/FETCH_AND_ADD.
 * Every work request is signalled; an RC send queue completes in posting
 * order, so operations complete in the order they were posted, as on TCP.
 *
 * Operations share struct eng_op and the completion queue of the engine
 * (client.h): one signalled work request counts as one frame of its op.
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
 * All calls below run under the client's lock (client.h).
 */
#ifndef RMEM_RDMA_H
#define RMEM_RDMA_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "client.h"

/* Transfers up to this size go through a bounce slot (a copy, no
 * registration); larger ones use the caller's buffer. */
#define RDMA_BOUNCE_MAX 4096u

/* What the RDMA calls return once the data path has moved to TCP: the
 * caller sends the rest of its request on the stream. */
#define RDMA_RETRY_TCP (-EAGAIN)

/* True when this machine has at least one RDMA device.  Cheap enough to ask
 * at every connect. */
bool rdma_have_device(void);

/*
 * Attaches an RC queue pair to the session c has just opened (c->session_id,
 * token): rdma_cm to host:port, private data = the attach message.  Waits at
 * most c->timeout_ms (<= 0: no limit).  On success c->rdma is set.
 * Errors: -ECONNREFUSED (the daemon refused the attach), -EHOSTUNREACH (no
 * route to host through an RDMA device), -ETIMEDOUT, -ENOTSUP (the device
 * cannot do what the path needs), -ENOMEM, others from the verbs.
 */
int rdma_attach(struct rmem_client *c, const char *host, uint16_t port, uint64_t token);

/* Disconnects and frees everything of c->rdma; posted operations are
 * dropped, and no DMA touches their buffers once this returns.  Accepts a
 * client without RDMA. */
void rdma_detach(struct rmem_client *c);

/*
 * Posts the work requests of one read (write false) or write of len bytes
 * between buf and the region at off, for op.  Waits for room in the send
 * queue when it is full, completing other operations meanwhile.  Stops
 * posting once op has failed.  0, or the error that stopped the posting
 * (op->sent says whether anything went out); RDMA_RETRY_TCP: *done bytes
 * were posted, the rest goes on the stream.
 */
int rdma_io(struct rmem_client *c, struct eng_op *op, bool write, const struct rmem_region *r,
	    uint64_t off, void *buf, size_t len, size_t *done);

/* One 8-byte atomic (cas: compare-and-swap, else fetch-and-add) on the
 * region at off, waited for.  *old gets the bytes before.  0, a negative
 * errno, or RDMA_RETRY_TCP (it was not done: send it on the stream). */
int rdma_atomic(struct rmem_client *c, bool cas, const struct rmem_region *r, uint64_t off,
		uint64_t operand, uint64_t desired, uint64_t *old);

/*
 * rmem_register_buf/rmem_unregister_buf (membuf.c): records the range in
 * c->kept, registered on the queue pair's PD while the data goes on RDMA
 * (on other clients only recorded).  Errors: regcache_keep()/_unkeep().
 */
int rdma_keep(struct rmem_client *c, const void *buf, size_t len);
int rdma_unkeep(struct rmem_client *c, const void *buf);

/* Waits until the synchronous op has ended; returns its status. */
int rdma_wait_op(struct rmem_client *c, struct eng_op *op);

/* rmem_poll()'s progress on RDMA: like eng_progress(). */
int rdma_progress(struct rmem_client *c, int timeout_ms);

/* True while work requests are posted and not yet completed. */
bool rdma_busy(const struct rmem_client *c);

/* True when reads, writes and atomics go on the queue pair (false on TCP
 * clients, and once an RDMA client has moved its data to TCP). */
bool rdma_carries_data(const struct rmem_client *c);

#endif /* RMEM_RDMA_H */
