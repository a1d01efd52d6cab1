/*
 * datapath.c - see datapath.h.  After a chunk is refused no further chunk
 * of that operation is sent; the replies to those already sent are still
 * handled, and the operation ends with the first error.
 */
#include "clock.h"
#include "datapath.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "verbs.h"

/* ---- what the NIC reports (struct verbs_events) ------------------------------------ */

static void on_part_done(void *ctx, struct eng_op *op, int status)
{
	eng_op_part_done(ctx, op, status);
}

/* A flushed request of a queue pair that failed for good, on the stream. */
static int on_resend(void *ctx, struct eng_op *op, const struct verbs_req *req)
{
	struct proto_io_req io = {
		.id = req->region_id,
		.offset = req->offset,
		.rkey = req->rkey,
		.length = req->len,
	};
	uint16_t opcode = req->write ? PROTO_OP_WRITE : PROTO_OP_READ;
	uint8_t fixed[PROTO_IO_REQ_LEN];

	proto_io_req_encode(fixed, opcode, &io);
	return eng_send(ctx, op, opcode, fixed, sizeof(fixed),
			req->write ? req->local : NULL, req->write ? req->len : 0,
			req->write ? NULL : req->local, req->write ? 0 : req->len);
}

static int on_fail(void *ctx, int err)
{
	return eng_fail(ctx, err);
}

static bool on_broken(void *ctx)
{
	return eng_broken(ctx);
}

/* The waiter holds the client, so the keepalive thread cannot have it:
 * the waiter renews the lease itself. */
static int on_lease_poke(void *ctx)
{
	return eng_lease_poke(ctx);
}

/* A posted operation the queue pair's end dropped: the resume may send it
 * again (reclaim.c); on a broken client it completes with -ECONNRESET, like
 * everything else in flight; at rmem_close() it is forgotten. */
static void on_drop(void *ctx, struct eng_op *op)
{
	struct engine *e = ctx;

	if (e->park_lost) {
		eng_park(e, op);
		return;
	}
	if (e->broken) {
		eng_complete(e, op, -ECONNRESET);
		return;
	}
	e->async_ops--;
	eng_op_free(e, op);
}

/* ---- attaching ----------------------------------------------------------------------- */

bool dp_have_device(void)
{
	return verbs_have_device();
}

int dp_attach(struct engine *e, const char *host, uint16_t port, uint64_t session_id,
	      uint64_t token)
{
	const struct verbs_events ev = {
		.ctx = e,
		.part_done = on_part_done,
		.resend = on_resend,
		.fail = on_fail,
		.broken = on_broken,
		.lease_poke = on_lease_poke,
		.drop = on_drop,
	};
	const struct verbs_target t = {
		.host = host,
		.port = port,
		.session_id = session_id,
		.token = token,
		.timeout_ms = e->timeout_ms,
	};

	return verbs_attach(&e->nic, &t, &ev, &e->kept);
}

void dp_detach(struct engine *e)
{
	struct verbs_conn *n = e->nic;

	e->nic = NULL;
	verbs_detach(n);
}

int dp_reattach(struct engine *e, const char *host, uint16_t port, uint64_t session_id,
		uint64_t token)
{
	struct { const void *buf; size_t len; } kept[REGCACHE_KEPT_MAX];
	uint32_t n = 0;
	int err;

	/* The application's registered ranges go with the old protection
	 * domain: recorded here, registered again on the new one. */
	for (uint32_t i = 0; i < REGCACHE_KEPT_MAX; i++) {
		const struct regcache_entry *k = &e->kept.e[i];

		if (k->kept)
			kept[n++] = (typeof(kept[0])){ (const void *)k->start, k->end - k->start };
	}
	dp_detach(e);
	regcache_kept_clear(&e->kept);
	err = dp_attach(e, host, port, session_id, token);
	for (uint32_t i = 0; i < n; i++)
		verbs_keep(e->nic, &e->kept, kept[i].buf, kept[i].len);
	return err;
}

bool dp_carries_data(const struct engine *e)
{
	return verbs_carries_data(e->nic);
}

/* ---- transfers ------------------------------------------------------------------------- */

/* The job's chunks on the stream. */
static int stream_submit(struct engine *e, struct eng_op *op, const struct dp_job *job)
{
	bool write = job->opcode == PROTO_OP_WRITE;
	size_t pos = 0;

	do {
		size_t left = job->len - pos;
		uint32_t n = left < e->max_io ? (uint32_t)left : e->max_io;
		struct proto_io_req req = {
			.id = job->r->id,
			.offset = job->off + pos,
			.rkey = job->r->rkey,
			.length = n,
		};
		uint8_t fixed[PROTO_IO_REQ_LEN];
		int err;

		uint8_t *dst = !write && n ? job->dst + pos : NULL;

		proto_io_req_encode(fixed, job->opcode, &req);
		if (!write && n && job->seg) {
			/* This chunk's first byte: which run, where in it. */
			uint64_t at = job->phase + pos, in = at % job->seg;

			dst = job->dst + (size_t)(at / job->seg * ((uint64_t)job->seg + job->gap) +
						  in - job->phase);
			e->post_stride = (struct eng_stride){
				.first = (uint32_t)(job->seg - in < n ? job->seg - in : n),
				.seg = job->seg, .gap = job->gap };
		}
		err = (op->async ? eng_post : eng_send)(e, op, job->opcode, fixed, sizeof(fixed),
			       write && n ? job->src + pos : NULL, write ? n : 0, dst,
			       write ? 0 : n);
		e->post_stride.seg = 0;
		if (err)
			return err;
		pos += n;
	} while (pos < job->len && !op->status);
	return 0;
}

int dp_submit(struct engine *e, struct eng_op *op, const struct dp_job *job)
{
	bool write = job->opcode == PROTO_OP_WRITE;
	struct dp_job rest = *job;
	size_t done = 0;
	int err;

	if (!dp_carries_data(e))
		return stream_submit(e, op, job);
	if (job->seg)
		return -EOPNOTSUPP;
	/* This call may wait on the queue pair alone: posts queued on the
	 * stream go first, as nothing may stay unsent while a call waits. */
	err = eng_flush(e);
	if (err)
		return err;
	err = verbs_io(e->nic, op, write, job->r, job->off,
		     write ? (void *)job->src : (void *)job->dst, job->len, &done);
	if (err != NIC_USE_STREAM)
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
	return stream_submit(e, op, &rest);
}

int dp_wait_op(struct engine *e, struct eng_op *op)
{
	if (!dp_carries_data(e))
		return eng_wait_op(e, op);
	while (!op->done) {
		int err = verbs_reap(e->nic);

		if (!err && !dp_carries_data(e))
			return eng_wait_op(e, op);
		if (!err && !op->done)
			err = verbs_wait(e->nic, NIC_NO_DEADLINE);
		if (err < 0 && !op->done) {
			/* The stream broke while op's work requests are still
			 * posted (the queue pair itself has not failed): op lives
			 * on its caller's stack, so no slot may point at it once
			 * we return.  The session is gone with the stream, and
			 * its queue pair with it. */
			if (op->frames)
				dp_detach(e);
			return err;
		}
	}
	return op->status;
}

/* rmem_poll()'s progress on RDMA: like eng_progress(). */
static int verbs_progress(struct engine *e, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? NIC_NO_DEADLINE : clock_mono_ms() + timeout_ms;

	for (;;) {
		int err = verbs_reap(e->nic);

		if (e->cq.count || err)
			return e->cq.count ? 0 : err;
		if (!dp_carries_data(e))
			return eng_progress(e, timeout_ms);
		if (!verbs_busy(e->nic))
			return 0;
		if (timeout_ms == 0)
			return 0;
		err = verbs_wait(e->nic, deadline);
		if (err)
			return e->cq.count || err > 0 ? 0 : err;
	}
}

/* On an RDMA client posted allocs and frees are on the stream while
 * transfers are on the queue pair: the stream is only looked at (without
 * waiting), the wait is on the queue pair, whose work always completes. */
int dp_progress(struct engine *e, int timeout_ms)
{
	int err = 0;

	if (!verbs_busy(e->nic))
		return e->fifo_count > 0 ? eng_progress(e, timeout_ms) : 0;
	if (e->fifo_count > 0)
		err = eng_progress(e, 0);
	if (!err && !e->broken && verbs_busy(e->nic))
		err = verbs_progress(e, e->cq.count ? 0 : timeout_ms);
	return err;
}

int dp_wait_fd(struct engine *e, struct pollfd *pfd)
{
	/* Work requests on the queue pair are waited for through its
	 * completion channel, which must be armed first (verbs_wait()): no
	 * plain descriptor to hand out for them. */
	if (verbs_busy(e->nic))
		return 0;
	return eng_wait_fd(e, pfd);
}

/* ---- atomics ------------------------------------------------------------------------- */

static int stream_atomic(struct engine *e, uint16_t opcode, const struct proto_atomic_req *req,
			 uint64_t *old)
{
	uint8_t buf[PROTO_CAS_REQ_LEN];
	size_t reply_len;
	uint64_t value;
	int status, err;

	if (e->broken)
		return -ECONNRESET;
	err = eng_call(e, opcode, buf, proto_atomic_req_encode(buf, opcode, req), &reply_len);
	if (err)
		return err;
	if (proto_atomic_rep_decode(e->rx, reply_len, &status, &value) < 0)
		return eng_fail(e, -EPROTO);
	if (status)
		return status;
	if (old)
		*old = value;
	return 0;
}

/* The atomic on the queue pair: 0, a negative errno, or NIC_USE_STREAM
 * when it was not done there (the queue pair has failed for good). */
static int verbs_atomic_sync(struct engine *e, bool cas, const struct rmem_region *r,
			   uint64_t off, uint64_t operand, uint64_t desired, uint64_t *old)
{
	struct eng_op op = { .async = false };
	uint64_t value = 0;
	int err;

	err = verbs_atomic(e->nic, &op, cas, r, off, operand, desired, &value);
	eng_seal(e, &op);
	if (err && op.sent == 0)
		return err;
	err = dp_wait_op(e, &op);
	if (op.on_stream)
		return NIC_USE_STREAM;
	if (!err && old)
		*old = value;
	return err;
}

int dp_atomic(struct engine *e, uint16_t opcode, const struct rmem_region *r, uint64_t off,
	      uint64_t operand, uint64_t desired, uint64_t *old)
{
	const struct proto_atomic_req req = {
		.id = r->id,
		.offset = off,
		.rkey = r->rkey,
		.operand = operand,
		.desired = desired,
	};
	int err;

	/* Posts still queued go first (an RDMA atomic waits on the queue pair
	 * alone); a failure leaves the client broken. */
	err = e->broken ? -ECONNRESET : eng_flush(e);
	if (err)
		return err;
	if (!dp_carries_data(e))
		return stream_atomic(e, opcode, &req, old);
	err = verbs_atomic_sync(e, opcode == PROTO_OP_CAS, r, off, operand, desired, old);
	/* Not done: the data path has just moved to the stream. */
	if (err == NIC_USE_STREAM)
		err = stream_atomic(e, opcode, &req, old);
	return err;
}

/* ---- registered buffers ---------------------------------------------------------------- */

int dp_keep(struct engine *e, const void *buf, size_t len)
{
	return verbs_keep(e->nic, &e->kept, buf, len);
}

int dp_unkeep(struct engine *e, const void *buf)
{
	return regcache_unkeep(&e->kept, buf);
}
