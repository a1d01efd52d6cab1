/*
 * io.c - the calls that touch a region's bytes: rmem_read and rmem_write,
 * their posted forms and rmem_poll, and the 8-byte atomics.
 *
 * A synchronous transfer is a posted one that its caller waits for: both
 * split into chunks of c->max_io and go through the engine (engine.c), so
 * there is one code path.  On an RDMA client the chunks are work requests
 * on its queue pair instead (rdma.c), and atomics are NIC atomics.  Posted
 * allocs and frees (rmem_post_alloc/free) share the engine and rmem_poll too,
 * always on the stream.  After a chunk is refused no further chunk of that
 * operation is sent; the replies to those already sent are still handled,
 * and the operation ends with the first error.
 */
#include <errno.h>
#include <stdlib.h>

#include "client.h"
#include "rdma.h"

struct io_job {
	uint16_t opcode;  /* PROTO_OP_READ or PROTO_OP_WRITE */
	const struct rmem_region *r;
	uint64_t off;
	const uint8_t *src; /* WRITE */
	uint8_t *dst;       /* READ */
	size_t len;
};

/* The checks every transfer makes before any I/O. */
static int check_io(const rmem_client *c, const struct rmem_region *r, uint64_t off,
		    const void *buf, size_t len)
{
	if (!c || !r || (!buf && len > 0))
		return -EINVAL;
	/* Written so that off + len cannot overflow. */
	if (len > r->length || off > r->length - len)
		return -ERANGE;
	return 0;
}

/* Sends the job's chunks for op.  len 0 still sends one request, so that the
 * daemon checks the handle.  0 or the error that stopped the sending. */
static int io_submit(struct rmem_client *c, struct eng_op *op, const struct io_job *job)
{
	bool write = job->opcode == PROTO_OP_WRITE;
	size_t pos = 0;

	do {
		size_t left = job->len - pos;
		uint32_t n = left < c->max_io ? (uint32_t)left : c->max_io;
		struct proto_io_req req = {
			.id = job->r->id,
			.offset = job->off + pos,
			.rkey = job->r->rkey,
			.length = n,
		};
		uint8_t fixed[PROTO_IO_REQ_LEN];
		int err;

		proto_io_req_encode(fixed, job->opcode, &req);
		err = (op->async ? eng_post : eng_send)(c, op, job->opcode, fixed, sizeof(fixed),
			       write && n ? job->src + pos : NULL, write ? n : 0,
			       !write && n ? job->dst + pos : NULL, write ? 0 : n);
		if (err)
			return err;
		pos += n;
	} while (pos < job->len && !op->status);
	return 0;
}

/* The job's requests for op, on the client's data path.  On RDMA, len 0
 * moves nothing and there is nothing to ask the NIC. */
static int submit(struct rmem_client *c, struct eng_op *op, const struct io_job *job)
{
	bool write = job->opcode == PROTO_OP_WRITE;
	struct io_job rest = *job;
	size_t done = 0;
	int err;

	if (!rdma_carries_data(c))
		return io_submit(c, op, job);
	/* This call may wait on the queue pair alone: posts queued on the
	 * stream go first, as nothing may stay unsent while a call waits. */
	err = eng_flush(c);
	if (err)
		return err;
	err = rdma_io(c, op, write, job->r, job->off,
		      write ? (void *)job->src : (void *)job->dst, job->len, &done);
	if (err != RDMA_RETRY_TCP)
		return err;
	/* The queue pair failed meanwhile: the rest goes on the stream. */
	if (done == job->len && job->len > 0)
		return 0;
	rest.off += done;
	rest.len -= done;
	if (write)
		rest.src += done;
	else
		rest.dst += done;
	return io_submit(c, op, &rest);
}

static int io_sync(struct rmem_client *c, const struct io_job *job)
{
	struct eng_op op = { .async = false };
	int err;

	if (c->broken)
		return -ECONNRESET;
	err = submit(c, &op, job);
	eng_seal(c, &op);
	if (op.sent == 0)
		return err ? err : op.status;
	/* After a failed send the engine has ended op with the cause. */
	return rdma_carries_data(c) ? rdma_wait_op(c, &op) : eng_wait_op(c, &op);
}

/* A posted operation, with room for its completion already reserved so that
 * ending it can never fail for want of memory. */
static int async_op_new(struct rmem_client *c, uint64_t cookie, struct eng_op **out)
{
	struct eng_op *op;
	int err;

	if (c->broken)
		return -ECONNRESET;
	err = eng_cq_reserve(c);
	if (err)
		return err;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->async = true;
	op->cookie = cookie;
	c->async_ops++;
	*out = op;
	return 0;
}

/* For an operation of which nothing went out: the caller hears of it at once. */
static int async_op_drop(struct rmem_client *c, struct eng_op *op, int err)
{
	c->async_ops--;
	free(op);
	return err;
}

static int io_post(struct rmem_client *c, const struct io_job *job, uint64_t cookie)
{
	struct eng_op *op;
	int err = async_op_new(c, cookie, &op);

	if (err)
		return err;
	err = submit(c, op, job);
	/* (An RDMA transfer of 0 bytes sends nothing and completes at once.) */
	if (op->sent == 0 && (err || !rdma_carries_data(c)))
		return async_op_drop(c, op, err);
	/* Anything else, a broken stream included, arrives as its completion. */
	eng_seal(c, op);
	return 0;
}

static int io_run(rmem_client *c, const struct io_job *job, bool post, uint64_t cookie)
{
	const void *buf = job->opcode == PROTO_OP_WRITE ? (const void *)job->src : job->dst;
	int err = check_io(c, job->r, job->off, buf, job->len);

	if (err)
		return err;
	client_lock(c);
	err = post ? io_post(c, job, cookie) : io_sync(c, job);
	client_unlock(c);
	return err;
}

int rmem_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
	       const void *buf, size_t len)
{
	struct io_job job = {
		.opcode = PROTO_OP_WRITE, .r = r, .off = off, .src = buf, .len = len,
	};

	return io_run(c, &job, false, 0);
}

int rmem_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf, size_t len)
{
	struct io_job job = {
		.opcode = PROTO_OP_READ, .r = r, .off = off, .dst = buf, .len = len,
	};

	return io_run(c, &job, false, 0);
}

int rmem_post_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
		    const void *buf, size_t len, uint64_t cookie)
{
	struct io_job job = {
		.opcode = PROTO_OP_WRITE, .r = r, .off = off, .src = buf, .len = len,
	};

	return io_run(c, &job, true, cookie);
}

int rmem_post_read(rmem_client *c, const struct rmem_region *r, uint64_t off,
		   void *buf, size_t len, uint64_t cookie)
{
	struct io_job job = {
		.opcode = PROTO_OP_READ, .r = r, .off = off, .dst = buf, .len = len,
	};

	return io_run(c, &job, true, cookie);
}

/* ---- posted alloc and free ---------------------------------------------------------- */

static int alloc_decode(struct rmem_client *c, struct eng_op *op, size_t len, int *status)
{
	struct proto_region reg;

	if (proto_alloc_rep_decode(c->rx, len, status, &reg) < 0)
		return -EPROTO;
	if (*status == 0)
		*op->region = (struct rmem_region){
			.id = reg.id,
			.addr = reg.addr,
			.length = reg.length,
			.rkey = reg.rkey,
			.flags = reg.flags,
		};
	return 0;
}

static int free_decode(struct rmem_client *c, struct eng_op *op, size_t len, int *status)
{
	(void)op;
	return proto_status_decode(c->rx, len, status) < 0 ? -EPROTO : 0;
}

/* Sends one control request as a posted operation.  Control requests
 * always travel on the stream, RDMA client or not. */
static int ctl_post(struct rmem_client *c, uint16_t opcode, const void *req, size_t len,
		    struct rmem_region *region, uint64_t cookie)
{
	struct eng_op *op;
	int err = async_op_new(c, cookie, &op);

	if (err)
		return err;
	op->region = region;
	op->decode = opcode == PROTO_OP_ALLOC ? alloc_decode : free_decode;
	err = eng_post(c, op, opcode, req, len, NULL, 0, NULL, 0);
	if (op->sent == 0)
		return async_op_drop(c, op, err);
	eng_seal(c, op);
	return 0;
}

int rmem_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out,
		    uint64_t cookie)
{
	struct proto_alloc_req req = { .size = size, .flags = flags };
	uint8_t buf[PROTO_ALLOC_REQ_LEN];
	int err;

	if (!c || !out || size == 0 || flags != 0)
		return -EINVAL;
	client_lock(c);
	err = ctl_post(c, PROTO_OP_ALLOC, buf, proto_alloc_req_encode(buf, &req), out, cookie);
	client_unlock(c);
	return err;
}

int rmem_post_free(rmem_client *c, const struct rmem_region *r, uint64_t cookie)
{
	struct proto_free_req req;
	uint8_t buf[PROTO_FREE_REQ_LEN];
	int err;

	if (!c || !r)
		return -EINVAL;
	req = (struct proto_free_req){ .id = r->id, .rkey = r->rkey };
	client_lock(c);
	err = ctl_post(c, PROTO_OP_FREE, buf, proto_free_req_encode(buf, &req), NULL, cookie);
	client_unlock(c);
	return err;
}

/* ---- completions ---------------------------------------------------------------------- */

/* Makes progress on whatever has operations in flight, waiting up to
 * timeout_ms.  On an RDMA client posted allocs and frees are on the stream
 * while transfers are on the queue pair: the stream is only looked at
 * (without waiting), the wait is on the queue pair, whose work always
 * completes. */
static int poll_progress(struct rmem_client *c, int timeout_ms)
{
	int err = 0;

	if (!rdma_busy(c))
		return c->fifo_count > 0 ? eng_progress(c, timeout_ms) : 0;
	if (c->fifo_count > 0)
		err = eng_progress(c, 0);
	if (!err && !c->broken && rdma_busy(c))
		err = rdma_progress(c, c->cq.count ? 0 : timeout_ms);
	return err;
}

int rmem_poll(rmem_client *c, struct rmem_completion *out, int max, int timeout_ms)
{
	int err = 0;
	int n;

	if (!c || !out || max <= 0)
		return -EINVAL;
	client_lock(c);
	/* Posts still queued go now, whatever else happens (rmem_poll.3). */
	if (!c->broken)
		err = eng_flush(c);
	/* Queued completions need no waiting; still take what has arrived. */
	if (!err && !c->broken && c->cq.count < (uint32_t)max)
		err = poll_progress(c, c->cq.count ? 0 : timeout_ms);
	n = eng_cq_take(c, out, max);
	if (n == 0 && c->broken)
		n = err ? err : -ECONNRESET;
	client_unlock(c);
	return n;
}

/* ---- atomics ----------------------------------------------------------------------- */

static int atomic_locked(struct rmem_client *c, uint16_t opcode, const struct proto_atomic_req *req,
			 uint64_t *old)
{
	uint8_t buf[PROTO_CAS_REQ_LEN];
	size_t reply_len;
	uint64_t value;
	int status, err;

	if (c->broken)
		return -ECONNRESET;
	err = eng_call(c, opcode, buf, proto_atomic_req_encode(buf, opcode, req), &reply_len);
	if (err)
		return err;
	if (proto_atomic_rep_decode(c->rx, reply_len, &status, &value) < 0)
		return eng_fail(c, -EPROTO);
	if (status)
		return status;
	if (old)
		*old = value;
	return 0;
}

static int atomic_run(rmem_client *c, uint16_t opcode, const struct rmem_region *r,
		      uint64_t off, uint64_t operand, uint64_t desired, uint64_t *old)
{
	struct proto_atomic_req req;
	int err;

	if (!c || !r || off % sizeof(uint64_t))
		return -EINVAL;
	if (r->length < sizeof(uint64_t) || off > r->length - sizeof(uint64_t))
		return -ERANGE;
	req = (struct proto_atomic_req){
		.id = r->id,
		.offset = off,
		.rkey = r->rkey,
		.operand = operand,
		.desired = desired,
	};
	client_lock(c);
	/* Posts still queued go first (an RDMA atomic waits on the queue pair
	 * alone); a failure leaves the client broken. */
	err = c->broken ? -ECONNRESET : eng_flush(c);
	if (!err && rdma_carries_data(c))
		err = rdma_atomic(c, opcode == PROTO_OP_CAS, r, off, operand, desired, old);
	else if (!err)
		err = atomic_locked(c, opcode, &req, old);
	/* Not done: the data path has just moved to TCP. */
	if (err == RDMA_RETRY_TCP)
		err = atomic_locked(c, opcode, &req, old);
	client_unlock(c);
	return err;
}

int rmem_cas(rmem_client *c, const struct rmem_region *r, uint64_t off,
	     uint64_t expect, uint64_t desired, uint64_t *old)
{
	return atomic_run(c, PROTO_OP_CAS, r, off, expect, desired, old);
}

int rmem_faa(rmem_client *c, const struct rmem_region *r, uint64_t off,
	     uint64_t add, uint64_t *old)
{
	return atomic_run(c, PROTO_OP_FAA, r, off, add, 0, old);
}
