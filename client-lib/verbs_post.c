/*
 * verbs_post.c - the work requests of the NIC transport (verbs.h): posting
 * reads, writes and atomics, reaping their completions, waiting, and what
 * a failed queue pair needs (a re-attach, else the move to the stream).
 * The ring of slots is described in verbs_int.h.
 */
#include "clock.h"
#include "verbs_int.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define WC_BATCH       32
/*
 * How long a waiter polls the completion queue before it sleeps on the
 * completion channel.  Sleeping means arming the CQ, poll(), a wakeup and
 * ibv_get_cq_event(): several microseconds on hardware, tens under
 * emulation, as much as a small transfer itself takes, and a synchronous
 * call would pay it on every round trip.  Past this budget the operation is
 * a long one, beside which the wakeup costs little, and the CPU goes back.
 */
#define SPIN_NS        100000
#define NO_DEADLINE    NIC_NO_DEADLINE

/* ---- posting --------------------------------------------------------------------- */

static int post_slot(struct verbs_conn *rc, uint32_t i)
{
	struct verbs_slot *s = &rc->slot[i];
	struct ibv_sge sge = { .length = s->len };
	struct ibv_send_wr wr = {
		.wr_id = i,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = s->opcode,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int err;

	if (s->inlined) {
		sge.addr = (uintptr_t)s->local;
		wr.send_flags |= IBV_SEND_INLINE;
	} else if (s->reg) {
		sge.addr = (uintptr_t)s->local;
		sge.lkey = s->reg->mr->lkey;
	} else {
		sge.addr = (uintptr_t)verbs_bounce_of(rc, i);
		sge.lkey = rc->bounce_mr->lkey;
	}
	if (s->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || s->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = s->raddr;
		wr.wr.atomic.rkey = s->rkey;
		wr.wr.atomic.compare_add = s->compare_add;
		wr.wr.atomic.swap = s->swap;
	} else {
		wr.wr.rdma.remote_addr = s->raddr;
		wr.wr.rdma.rkey = s->rkey;
	}
	err = ibv_post_send(rc->id->qp, &wr, &bad);
	if (err)
		return -err;
	if (rc->posted == 0)
		rc->progress++;
	s->state = SLOT_POSTED;
	rc->posted++;
	return 0;
}

static int wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
		return -EINVAL;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
		return -EFAULT;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_REM_OP_ERR:
		return -EREMOTEIO;
	default:
		return -EIO;
	}
}

/* A slot has ended: its operation hears of it, and the ring moves on. */
static void slot_done(struct verbs_conn *rc, uint32_t i, int status)
{
	struct verbs_slot *s = &rc->slot[i];
	struct eng_op *op = s->op;

	s->state = SLOT_DONE;
	if (s->reg)
		regcache_put(&rc->cache, s->reg);
	s->reg = NULL;
	s->op = NULL;
	while (rc->count && rc->slot[rc->head].state == SLOT_DONE) {
		rc->slot[rc->head].state = SLOT_FREE;
		rc->head = (rc->head + 1) & SQ_MASK;
		rc->count--;
	}
	rc->ev.part_done(rc->ev.ctx, op, status);
}

/*
 * The re-attach failed (recover()).  The session and its keys still hold on
 * the stream, so from now on data goes there: the flushed requests first,
 * in order, through ev.resend.  A flushed atomic ends with op->on_stream set
 * and its caller sends it again.  The old rdma_cm id stays (disconnecting
 * would end the session) until verbs_detach().
 */
static void degrade(struct verbs_conn *rc)
{
	rc->degraded = true;
	while (rc->count) {
		uint32_t i = rc->head;
		struct verbs_slot *s = &rc->slot[i];
		struct verbs_req req = {
			.write = s->opcode == IBV_WR_RDMA_WRITE,
			.region_id = s->region_id,
			.offset = s->offset,
			.rkey = s->rkey,
			.len = s->len,
			.local = s->local,
		};
		int err = 0;

		if (s->opcode == IBV_WR_RDMA_WRITE || s->opcode == IBV_WR_RDMA_READ)
			err = rc->ev.resend(rc->ev.ctx, s->op, &req);
		else
			s->op->on_stream = true;
		/* The stream's frame (if it went) now carries the operation. */
		slot_done(rc, i, err);
	}
}

/* Fails every operation in flight and marks the client broken. */
static int verbs_fail(struct verbs_conn *rc, int err)
{

	while (rc->count) {
		uint32_t i = rc->head;
		struct verbs_slot *s = &rc->slot[i];

		/* slot_done() moves the head past done slots: this one is not. */
		if (s->op && !s->op->async)
			s->op->status = s->op->status ? s->op->status : err;
		slot_done(rc, i, -ECONNRESET);
	}
	rc->posted = 0;
	return rc->ev.fail(rc->ev.ctx, err);
}

/* Posts the flushed requests again on the new queue pair, in ring order,
 * which is the order they were first posted in. */
static int repost(struct verbs_conn *rc)
{
	for (uint32_t k = 0; k < rc->count; k++) {
		uint32_t i = (rc->head + k) & SQ_MASK;
		struct verbs_slot *s = &rc->slot[i];
		int err;

		if (s->state != SLOT_FLUSHED)
			continue;
		/* Inline room is the device's; should the new queue pair have
		 * less, the bytes go through this slot's bounce buffer. */
		if (s->inlined && s->len > rc->max_inline) {
			memcpy(verbs_bounce_of(rc, i), s->local, s->len);
			s->inlined = false;
		}
		err = post_slot(rc, i);
		if (err)
			return err;
	}
	return 0;
}

/*
 * The queue pair is in the error state and nothing is posted any more.
 * Resetting it alone does not help: the daemon's queue pair went to the
 * error state too when it refused the access (rxe's responder does that
 * after its NAK, and tells the daemon nothing).  So the client attaches
 * again with its token, which replaces both, and posts the flushed requests
 * again there.  When that fails (a daemon in window mode refuses), the data
 * moves to TCP.
 */
static void recover(struct verbs_conn *rc)
{
	int err;

	rc->qp_error = false;
	if (verbs_reattach(rc) < 0) {
		degrade(rc);
		return;
	}
	err = repost(rc);
	if (err)
		verbs_fail(rc, err);
}

static void on_wc(struct verbs_conn *rc, const struct ibv_wc *wc)
{
	uint32_t i = (uint32_t)wc->wr_id & SQ_MASK;
	struct verbs_slot *s = &rc->slot[i];

	if (s->state != SLOT_POSTED)
		return;
	rc->posted--;
	if (wc->status == IBV_WC_SUCCESS) {
		if (s->opcode == IBV_WR_RDMA_READ && !s->reg)
			memcpy(s->local, verbs_bounce_of(rc, i), s->len);
		else if (s->old)
			memcpy(s->old, verbs_bounce_of(rc, i), sizeof(*s->old));
		slot_done(rc, i, 0);
		return;
	}
	rc->qp_error = true;
	if (wc->status != IBV_WC_WR_FLUSH_ERR)
		slot_done(rc, i, wc_errno(wc->status));
	else if (s->op->status)
		slot_done(rc, i, 0);     /* its operation has failed already */
	else
		s->state = SLOT_FLUSHED;
}

/* Handles every completion there is.  0 or a negative errno (broken). */
static int reap(struct verbs_conn *rc)
{
	struct ibv_wc wc[WC_BATCH];
	int n;

	do {
		n = ibv_poll_cq(rc->cq, WC_BATCH, wc);
		if (n < 0)
			return verbs_fail(rc, -EIO);
		if (n > 0)
			rc->progress++;
		for (int k = 0; k < n; k++)
			on_wc(rc, &wc[k]);
	} while (n == WC_BATCH);
	if (rc->qp_error && rc->posted == 0)
		recover(rc);
	return rc->ev.broken(rc->ev.ctx) ? -ECONNRESET : 0;
}

/* The daemon ended the session (or the device went): every event on the
 * connection's channel after ESTABLISHED means the connection is gone. */
static int check_cm(struct verbs_conn *rc)
{
	struct pollfd pfd = { .fd = rc->cm_ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (rdma_get_cm_event(rc->cm_ch, &ev) == 0)
		rdma_ack_cm_event(ev);
	rc->connected = false;
	return verbs_fail(rc, -ECONNRESET);
}

/*
 * Busy-polls the completion queue for up to SPIN_NS (and not past deadline):
 * 0 after handling a completion, 1 when none came, or a negative errno.
 * ibv_poll_cq() is no system call (the queue is mapped), so this costs only
 * the CPU.
 */
static int spin_cq(struct verbs_conn *rc, int64_t deadline)
{
	int64_t until = 0;
	struct ibv_wc wc[WC_BATCH];
	int n;

	for (unsigned k = 0;; k++) {
		n = ibv_poll_cq(rc->cq, WC_BATCH, wc);
		if (n < 0)
			return verbs_fail(rc, -EIO);
		if (n > 0)
			break;
		/* The clock only every few polls, and not at all when the
		 * completion comes at once: under emulation it is dear. */
		if ((k & 15) != 15)
			continue;
		if (!until) {
			until = clock_mono_ns() + SPIN_NS;
			if (deadline != NO_DEADLINE && deadline * 1000000 < until)
				until = deadline * 1000000;
		} else if (clock_mono_ns() >= until) {
			return 1;
		}
	}
	rc->progress++;
	for (int k = 0; k < n; k++)
		on_wc(rc, &wc[k]);
	if (rc->qp_error && rc->posted == 0)
		recover(rc);
	return rc->ev.broken(rc->ev.ctx) ? -ECONNRESET : 0;
}

/*
 * Waits for completions (or a connection event) until deadline.  Returns 0
 * after something happened, 1 once deadline has passed, or a negative errno
 * (broken; also when posted requests made no progress for rc->timeout_ms).
 */
static int wait_cq(struct verbs_conn *rc, int64_t deadline)
{
	struct pollfd pfd[2] = {
		{ .fd = rc->comp_ch->fd, .events = POLLIN },
		{ .fd = rc->cm_ch->fd, .events = POLLIN },
	};
	int64_t stall, until;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n, ka;

	/* We hold the client, so its keepalive thread cannot have it: renew
	 * the lease ourselves, and wake up in time to do it again. */
	ka = rc->ev.lease_poke(rc->ev.ctx);
	n = spin_cq(rc, deadline);
	if (n <= 0)
		return n;
	if (rc->progress != rc->progress_seen) {
		rc->progress_seen = rc->progress;
		rc->last_progress_ms = clock_mono_ms();
	}
	stall = rc->timeout_ms > 0 && rc->posted ? rc->last_progress_ms + rc->timeout_ms :
		NO_DEADLINE;
	until = deadline < stall ? deadline : stall;
	if (ibv_req_notify_cq(rc->cq, 0))
		return verbs_fail(rc, -EIO);
	/* A completion between the last look and the arming raised no event. */
	n = reap(rc);
	if (n)
		return n;
	if (ka >= 0 && clock_mono_ms() + ka < until)
		until = clock_mono_ms() + ka;
	do {
		n = poll(pfd, 2, clock_ms_until(until));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return verbs_fail(rc, -errno);
	if (pfd[1].revents)
		return check_cm(rc);
	if (pfd[0].revents) {
		if (ibv_get_cq_event(rc->comp_ch, &ev_cq, &ev_ctx) == 0)
			ibv_ack_cq_events(ev_cq, 1);
		return 0;
	}
	if (clock_mono_ms() >= stall)
		return verbs_fail(rc, -ETIMEDOUT);
	return clock_mono_ms() >= deadline ? 1 : 0;
}

/* Makes room for one more request: a free slot, and a queue pair that is not
 * in the error state. */
static int reserve_slot(struct verbs_conn *rc)
{
	for (;;) {
		/* With nothing posted there is nothing to reap: one look at the
		 * CQ less per synchronous call. */
		int err = rc->posted || rc->qp_error ? reap(rc) : 0;

		if (err)
			return err;
		if (rc->ev.broken(rc->ev.ctx))
			return -ECONNRESET;
		if (rc->degraded)
			return NIC_USE_STREAM;
		if (rc->count < SQ_DEPTH && !rc->qp_error)
			return 0;
		err = wait_cq(rc, NO_DEADLINE);
		if (err < 0)
			return err;
	}
}

/* Room for one more request (reserve_slot), then the next slot of the ring
 * taken for op: 0 with its index in *ix, or reserve_slot()'s error. */
static int slot_take(struct verbs_conn *rc, struct eng_op *op, enum ibv_wr_opcode opcode,
		     const struct rmem_region *r, uint64_t off, uint8_t *local, uint32_t len,
		     uint32_t *ix)
{
	int err = reserve_slot(rc);

	if (err)
		return err;
	*ix = (rc->head + rc->count) & SQ_MASK;
	rc->slot[*ix] = (struct verbs_slot){
		.state = SLOT_FREE,
		.op = op,
		.opcode = opcode,
		.raddr = r->addr + off,
		.rkey = r->rkey,
		.region_id = r->id,
		.offset = off,
		.local = local,
		.len = len,
	};
	return 0;
}

/* Posts slot i, which slot_take() just filled; on success it joins the ring. */
static int slot_post(struct verbs_conn *rc, uint32_t i)
{
	struct verbs_slot *s = &rc->slot[i];
	int err = post_slot(rc, i);

	if (err) {
		if (s->reg)
			regcache_put(&rc->cache, s->reg);
		s->reg = NULL;
		return verbs_fail(rc, err);
	}
	rc->count++;
	s->op->frames++;
	s->op->sent++;
	return 0;
}

/*
 * Where slot i's bytes (n from local, not inlined) come from or go: a range
 * the application registered, else the slot's bounce buffer when small,
 * else a registration for the transfers in flight.  0 or a negative errno.
 */
static int slot_local(struct verbs_conn *rc, uint32_t i, bool write, uint8_t *local, uint32_t n)
{
	struct verbs_slot *s = &rc->slot[i];

	s->reg = regcache_kept_get(rc->kept, local, n);
	if (s->reg)
		return 0;
	if (n <= NIC_BOUNCE_MAX) {
		if (write)
			memcpy(verbs_bounce_of(rc, i), local, n);
		return 0;
	}
	return regcache_get(&rc->cache, local, n, &s->reg);
}

int verbs_keep(struct verbs_conn *rc, struct regcache_kept *kept, const void *buf, size_t len)
{
	return regcache_keep(kept, verbs_carries_data(rc) ? rc->pd : NULL, buf, len);
}

int verbs_io(struct verbs_conn *rc, struct eng_op *op, bool write, const struct rmem_region *r,
	   uint64_t off, void *buf, size_t len, size_t *done)
{
	uint8_t *p = buf;
	size_t pos = 0;

	*done = 0;
	while (pos < len && !op->status) {
		uint32_t n = len - pos < rc->max_msg ? (uint32_t)(len - pos) : rc->max_msg;
		struct verbs_slot *s;
		uint32_t i;
		int err;

		err = slot_take(rc, op, write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, r, off + pos,
				p + pos, n, &i);
		if (err)
			return err;
		s = &rc->slot[i];
		if (write && n <= rc->max_inline) {
			s->inlined = true;
		} else {
			err = slot_local(rc, i, write, p + pos, n);
			if (err) {
				/* What went out already still completes: the
				 * operation must end with this error. */
				if (!op->status)
					op->status = err;
				return err;
			}
		}
		err = slot_post(rc, i);
		if (err)
			return err;
		pos += n;
		*done = pos;
	}
	return 0;
}

int verbs_atomic(struct verbs_conn *rc, struct eng_op *op, bool cas, const struct rmem_region *r,
	       uint64_t off, uint64_t operand, uint64_t desired, uint64_t *old)
{
	uint32_t i;
	int err;

	err = slot_take(rc, op, cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD, r,
			off, NULL, sizeof(uint64_t), &i);
	if (err)
		return err;
	rc->slot[i].compare_add = operand;
	rc->slot[i].swap = desired;
	rc->slot[i].old = old;
	return slot_post(rc, i);
}

int verbs_reap(struct verbs_conn *rc)
{
	return reap(rc);
}

int verbs_wait(struct verbs_conn *rc, int64_t deadline)
{
	return wait_cq(rc, deadline);
}

bool verbs_busy(const struct verbs_conn *rc)
{
	return rc && rc->count > 0;
}

bool verbs_carries_data(const struct verbs_conn *rc)
{
	return rc && !rc->degraded;
}
