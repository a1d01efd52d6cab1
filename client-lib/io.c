/*
 * io.c - the calls that touch a region's bytes: rmem_read and rmem_write,
 * their posted forms and rmem_poll, and the 8-byte atomics.
 *
 * A synchronous transfer is a posted one that its caller waits for: both
 * go through the engine's data path (datapath.c), so there is one code
 * path; it puts them on the stream in chunks, or on the RDMA queue pair.
 * Posted allocs and frees (rmem_post_alloc/free) share the engine and
 * rmem_poll too, always on the stream.
 */
#include <errno.h>
#include <stdlib.h>

#include <string.h>

#include "client.h"
#include "datapath.h"

/*
 * A handle without RMEM_WRITE (a named region opened read-only; flags 0 is
 * an anonymous region, which grants everything) is refused a write or an
 * atomic here, before any I/O.  The NIC (or the daemon) would refuse it
 * too, and still does for a handle whose flags were changed, but on RDMA
 * that refusal costs the queue pair: the library attaches again, and
 * against a daemon in window key mode, which refuses that, the session's
 * data moves to TCP and the daemon can make it no more keys.
 */
static bool may_write(const struct rmem_region *r)
{
	return r->flags == 0 || (r->flags & RMEM_WRITE);
}

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

static int io_sync(struct rmem_client *c, const struct dp_job *job)
{
	struct eng_op op = { .async = false };
	int err;

	if (c->eng.broken)
		return -ECONNRESET;
	err = dp_submit(&c->eng, &op, job);
	eng_seal(&c->eng, &op);
	if (op.sent == 0)
		return err ? err : op.status;
	/* After a failed send the engine has ended op with the cause. */
	return dp_wait_op(&c->eng, &op);
}

/* A posted operation, with room for its completion already reserved so that
 * ending it can never fail for want of memory. */
static int async_op_new(struct rmem_client *c, uint64_t cookie, struct eng_op **out)
{
	struct eng_op *op;
	int err;

	if (c->eng.broken)
		return -ECONNRESET;
	err = eng_cq_reserve(&c->eng);
	if (err)
		return err;
	op = eng_op_new(&c->eng);
	if (!op)
		return -ENOMEM;
	op->async = true;
	op->cookie = cookie;
	c->eng.async_ops++;
	*out = op;
	return 0;
}

/* For an operation of which nothing went out: the caller hears of it at once. */
static int async_op_drop(struct rmem_client *c, struct eng_op *op, int err)
{
	c->eng.async_ops--;
	eng_op_free(&c->eng, op);
	return err;
}

static int io_post(struct rmem_client *c, const struct dp_job *job, uint64_t cookie)
{
	struct eng_op *op;
	int err = async_op_new(c, cookie, &op);

	if (err)
		return err;
	/* Kept for a resume, which sends it again (reclaim.c). */
	op->io.opcode = job->opcode;
	op->io.region_id = job->r->id;
	op->io.off = job->off;
	op->io.buf = job->opcode == PROTO_OP_WRITE ? (uint8_t *)job->src : job->dst;
	op->io.len = job->len;
	op->io.seg = job->seg;
	op->io.gap = job->gap;
	op->io.phase = job->phase;
	err = dp_submit(&c->eng, op, job);
	/* (An RDMA transfer of 0 bytes sends nothing and completes at once.) */
	if (op->sent == 0 && (err || !dp_carries_data(&c->eng)))
		return async_op_drop(c, op, err);
	/* Anything else, a broken stream included, arrives as its completion. */
	eng_seal(&c->eng, op);
	return 0;
}

static int io_run(rmem_client *c, const struct dp_job *job, bool post, uint64_t cookie)
{
	const void *buf = job->opcode == PROTO_OP_WRITE ? (const void *)job->src : job->dst;
	int err = check_io(c, job->r, job->off, buf, job->len), tries = 0;

	if (err)
		return err;
	if (job->opcode == PROTO_OP_WRITE && !may_write(job->r))
		return -EACCES;
	client_hold(c);
	/* Reads and writes are idempotent: one that the loss of the
	 * connection ended is sent again once the client has resumed (a
	 * posted one that went out is parked and sent again by the resume
	 * itself; here only one that did not go out comes back). */
	do {
		struct dp_job now = *job;
		struct rmem_region tmp;

		err = client_region_now(c, &now.r, &tmp);
		if (!err)
			err = post ? io_post(c, &now, cookie) : io_sync(c, &now);
	} while (client_again(c, &tries, err));
	client_release(c);
	return err;
}

int single_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
	       const void *buf, size_t len)
{
	struct dp_job job = {
		.opcode = PROTO_OP_WRITE, .r = r, .off = off, .src = buf, .len = len,
	};

	return io_run(c, &job, false, 0);
}

int single_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf, size_t len)
{
	struct dp_job job = {
		.opcode = PROTO_OP_READ, .r = r, .off = off, .dst = buf, .len = len,
	};

	return io_run(c, &job, false, 0);
}

int single_post_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
		    const void *buf, size_t len, uint64_t cookie)
{
	struct dp_job job = {
		.opcode = PROTO_OP_WRITE, .r = r, .off = off, .src = buf, .len = len,
	};

	return io_run(c, &job, true, cookie);
}

int single_post_read(rmem_client *c, const struct rmem_region *r, uint64_t off,
		   void *buf, size_t len, uint64_t cookie)
{
	struct dp_job job = {
		.opcode = PROTO_OP_READ, .r = r, .off = off, .dst = buf, .len = len,
	};

	return io_run(c, &job, true, cookie);
}

int single_post_read_spaced(rmem_client *c, const struct rmem_region *r, uint64_t off,
			    void *buf, size_t len, uint32_t seg, uint32_t gap, uint32_t phase,
			    uint64_t cookie)
{
	struct dp_job job = {
		.opcode = PROTO_OP_READ, .r = r, .off = off, .dst = buf, .len = len,
		.seg = seg, .gap = gap, .phase = phase,
	};

	/* Refused before any I/O, rather than read wrong. */
	if (!seg || phase >= seg)
		return -EINVAL;
	return io_run(c, &job, true, cookie);
}

/* ---- started and finished (single.h) ------------------------------------------------ */

/* A synchronous transfer, split where io_sync() waits: the op is the
 * engine's as io_sync()'s is, so its replies are taken by whoever receives
 * on the stream, and no completion is queued for rmem_poll to hand out. */
void single_start(struct single_io *io)
{
	struct dp_job job = {
		.opcode = io->write ? PROTO_OP_WRITE : PROTO_OP_READ, .r = io->r, .off = io->off,
		.src = io->buf, .dst = io->buf, .len = io->len,
	};
	struct rmem_region tmp;
	struct eng_op *op = NULL;
	int err = check_io(io->c, io->r, io->off, io->buf, io->len);

	io->held = 0;
	io->op = NULL;
	if (!err && io->write && !may_write(io->r))
		err = -EACCES;
	if (!err && !(op = calloc(1, sizeof(*op))))
		err = -ENOMEM;
	if (err) {
		io->err = err;
		return;
	}
	client_hold(io->c);
	io->held = 1;
	io->op = op;
	err = io->c->eng.broken ? -ECONNRESET : client_region_now(io->c, &job.r, &tmp);
	if (!err) {
		err = dp_submit(&io->c->eng, op, &job);
		eng_seal(&io->c->eng, op);
	}
	/* Nothing went out: the outcome is known now.  (After a failed send
	 * the engine has ended op with the cause.) */
	io->err = op->sent == 0 ? (err ? err : op->status) : 1;
}

int single_finish(struct single_io *io)
{
	struct eng_op *op = io->op;

	if (io->held) {
		if (io->err == 1)
			io->err = dp_wait_op(&io->c->eng, op);
		client_release(io->c);
		io->held = 0;
	}
	free(op);
	io->op = NULL;
	return io->err;
}

/* ---- posted alloc and free ---------------------------------------------------------- */

/* The caller's struct may be an older, shorter one (compat.c): only
 * op->region_size bytes of it are written. */
static int alloc_decode(struct engine *e, struct eng_op *op, size_t len, int *status)
{
	struct proto_region reg;
	struct rmem_region out;

	if (proto_alloc_rep_decode(e->rx, len, status, &reg) < 0)
		return -EPROTO;
	if (*status == 0) {
		client_region_fill(&out, &reg);
		memcpy(op->region, &out, op->region_size);
		client_saw_region(client_of_engine(e), reg.id);
	}
	return 0;
}

static int free_decode(struct engine *e, struct eng_op *op, size_t len, int *status)
{
	(void)op;
	return proto_status_decode(e->rx, len, status) < 0 ? -EPROTO : 0;
}

/* Sends one control request as a posted operation.  Control requests
 * always travel on the stream, RDMA client or not. */
static int ctl_post(struct rmem_client *c, uint16_t opcode, const void *req, size_t len,
		    void *region, size_t region_size, uint64_t cookie)
{
	struct eng_op *op;
	int err = async_op_new(c, cookie, &op);

	if (err)
		return err;
	op->region = region;
	op->region_size = region_size;
	op->decode = opcode == PROTO_OP_ALLOC ? alloc_decode : free_decode;
	err = eng_post(&c->eng, op, opcode, req, len, NULL, 0, NULL, 0);
	if (op->sent == 0)
		return async_op_drop(c, op, err);
	eng_seal(&c->eng, op);
	return 0;
}

int client_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, void *out,
		      size_t out_size, uint64_t cookie)
{
	struct proto_alloc_req req = { .size = size, .flags = flags };
	uint8_t buf[PROTO_ALLOC_REQ_LEN];
	int err = client_check_alloc(c, size, flags, out);

	if (err)
		return err;
	client_hold(c);
	/* Only one that did not go out comes back failed: it is sent again. */
	CLIENT_RETRY(c, err, ctl_post(c, PROTO_OP_ALLOC, buf, proto_alloc_req_encode(buf, &req),
				       out, out_size, cookie));
	client_release(c);
	return err;
}

int single_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out,
		    uint64_t cookie)
{
	return client_post_alloc(c, size, flags, out, sizeof(*out), cookie);
}

int single_post_free(rmem_client *c, const struct rmem_region *r, uint64_t cookie)
{
	struct proto_free_req req;
	uint8_t buf[PROTO_FREE_REQ_LEN];
	int err, tries = 0;

	if (!c || !r)
		return -EINVAL;
	client_hold(c);
	do {
		const struct rmem_region *now = r;
		struct rmem_region tmp;

		err = client_region_now(c, &now, &tmp);
		if (!err) {
			req = (struct proto_free_req){ .id = now->id, .rkey = now->rkey };
			err = ctl_post(c, PROTO_OP_FREE, buf, proto_free_req_encode(buf, &req), NULL,
				       0, cookie);
		}
	} while (client_again(c, &tries, err));
	client_release(c);
	return err;
}

/* ---- completions ---------------------------------------------------------------------- */

int single_poll(rmem_client *c, struct rmem_completion *out, int max, int timeout_ms)
{
	int err = 0, tries = 0;
	int n;

	if (!c || !out || max <= 0)
		return -EINVAL;
	client_hold(c);
	do {
		err = 0;
		/* Posts still queued go now, whatever else happens (rmem_poll.3). */
		if (!c->eng.broken)
			err = eng_flush(&c->eng);
		/* Queued completions need no waiting; still take what has arrived. */
		if (!err && !c->eng.broken && c->eng.cq.count < (uint32_t)max)
			err = dp_progress(&c->eng, c->eng.cq.count ? 0 : timeout_ms);
		/* Lost and resumed: what was in flight is on its way again. */
	} while (!c->eng.cq.count && client_again(c, &tries, err));
	n = eng_cq_take(&c->eng, out, max);
	if (n == 0 && c->eng.broken)
		n = err ? err : -ECONNRESET;
	client_release(c);
	return n;
}

int single_wait_fd(rmem_client *c, struct pollfd *pfd)
{
	int rc;

	if (!c || !pfd)
		return -EINVAL;
	client_hold(c);
	/* Only what went out can be answered: queued posts go first. */
	rc = c->eng.broken || eng_flush(&c->eng) ? 0 : dp_wait_fd(&c->eng, pfd);
	client_release(c);
	return rc;
}

/* ---- atomics ----------------------------------------------------------------------- */

static int atomic_run(rmem_client *c, uint16_t opcode, const struct rmem_region *r,
		      uint64_t off, uint64_t operand, uint64_t desired, uint64_t *old)
{
	const struct rmem_region *now;
	struct rmem_region tmp;
	int err, tries = 0;

	if (!c || !r || off % sizeof(uint64_t))
		return -EINVAL;
	if (r->length < sizeof(uint64_t) || off > r->length - sizeof(uint64_t))
		return -ERANGE;
	if (!may_write(r))
		return -EACCES;
	client_hold(c);
	/* Nothing was sent yet while the region is being found: that may be
	 * tried again once resumed. */
	do {
		now = r;
		err = client_region_now(c, &now, &tmp);
	} while (err && client_again(c, &tries, err));
	/* The atomic is not idempotent: never sent again.  It may have been
	 * applied before the connection went, or not: the caller must look. */
	if (!err)
		err = client_once(c, dp_atomic(&c->eng, opcode, now, off, operand, desired, old));
	client_release(c);
	return err;
}

int single_cas(rmem_client *c, const struct rmem_region *r, uint64_t off,
	     uint64_t expect, uint64_t desired, uint64_t *old)
{
	return atomic_run(c, PROTO_OP_CAS, r, off, expect, desired, old);
}

int single_faa(rmem_client *c, const struct rmem_region *r, uint64_t off,
	     uint64_t add, uint64_t *old)
{
	return atomic_run(c, PROTO_OP_FAA, r, off, add, 0, old);
}
