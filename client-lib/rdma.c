/*
 * rdma.c - see rdma.h.  Every ibv_* and rdma_* call of librmem is here (and
 * the registration calls in regcache.c).
 *
 * One send queue, one completion queue, one slot per send queue entry.  A
 * slot holds everything needed to issue its request again, because a request
 * flushed by another one's error is posted again on the queue pair of the
 * re-attach, or sent over TCP when the re-attach fails (see rdma.h).  Slots
 * form a ring in posting order; a slot is freed once it and every slot before
 * it are done.
 *
 * What a re-attach replaces is only the rdma_cm id, its event channel and its
 * queue pair: the protection domain, completion queue, bounce slots and
 * registrations of the slots in flight stay, so the slots' lkeys stay valid.
 */
#include "rdma.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "regcache.h"

/*
 * Work requests in flight on the queue pair.  At least perftest's default TX
 * depth (128), so that rmem_post_*() with that many operations in flight
 * keeps them all on the wire instead of waiting here for room.
 */
#define SQ_DEPTH       256u       /* power of two, < REGCACHE_MAX */
#define SQ_MASK        (SQ_DEPTH - 1)
#define WC_BATCH       32
#define INLINE_WANT    64u
/* READs and atomics the daemon's responder keeps in flight for us (the
 * device may allow fewer): as many as perftest asks for on rxe (128), since
 * with fewer a stream of posted READs waits on the responder, not the wire. */
#define RD_ATOM_MAX    128u
/*
 * How long a waiter polls the completion queue before it sleeps on the
 * completion channel.  Sleeping means arming the CQ, poll(), a wakeup and
 * ibv_get_cq_event(): several microseconds on hardware, tens under
 * emulation, as much as a small transfer itself takes, and a synchronous
 * call would pay it on every round trip.  Past this budget the operation is
 * a long one, beside which the wakeup costs little, and the CPU goes back.
 */
#define SPIN_NS        100000
#define NO_DEADLINE    INT64_MAX

_Static_assert((SQ_DEPTH & SQ_MASK) == 0, "SQ_DEPTH must be a power of two");
_Static_assert(SQ_DEPTH < REGCACHE_MAX, "each posted request may hold a registration");

enum slot_state {
	SLOT_FREE,
	SLOT_POSTED,   /* its completion is due */
	SLOT_FLUSHED,  /* flushed by another request's error: send it again */
	SLOT_DONE,     /* completed; freed once the slots before it are */
};

struct rdma_slot {
	enum slot_state state;
	struct eng_op *op;
	enum ibv_wr_opcode opcode;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;
	uint64_t region_id, offset;   /* the same request for the TCP path */
	uint8_t *local;               /* the caller's bytes */
	struct regcache_entry *reg;   /* NULL: bounce slot (or inline) */
	bool inlined;
	uint64_t compare_add, swap;   /* atomics */
	uint64_t *old;                /* atomics: where the old value goes */
};

struct rdma_conn {
	struct rdma_event_channel *cm_ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp_ch;
	struct ibv_cq *cq;
	bool qp_made;
	bool connected;
	bool degraded;                /* the queue pair failed: data goes on TCP */
	uint32_t max_msg;
	uint32_t max_inline;
	uint8_t *bounce;              /* SQ_DEPTH slots of RDMA_BOUNCE_MAX bytes */
	struct ibv_mr *bounce_mr;
	struct regcache cache;
	struct rdma_slot slot[SQ_DEPTH];
	uint32_t head, count;         /* the ring, in posting order */
	uint32_t posted;              /* SLOT_POSTED slots */
	bool qp_error;                /* recover once nothing is posted */
	/* Stall detection: progress counts posts onto an idle queue and
	 * completions; only a waiter about to sleep reads the clock, when it
	 * sees the count moved (two clock reads per operation are dear in a
	 * round trip of a few microseconds). */
	uint64_t progress, progress_seen;
	int64_t last_progress_ms;
	/* What a re-attach needs: the same target, session and token. */
	char *host;
	uint16_t port;
	uint64_t session_id, token;
	uint8_t depth;                /* initiator depth of the connect */
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t deadline_after(int timeout_ms)
{
	return timeout_ms > 0 ? mono_ms() + timeout_ms : NO_DEADLINE;
}

/* poll()'s timeout until deadline: -1 for none, >= 0 otherwise. */
static int ms_until(int64_t deadline)
{
	int64_t left;

	if (deadline == NO_DEADLINE)
		return -1;
	left = deadline - mono_ms();
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

bool rdma_have_device(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (list)
		ibv_free_device_list(list);
	return list && n > 0;
}

/* ---- connecting ------------------------------------------------------------------ */

static int cm_errno(enum rdma_cm_event_type t)
{
	switch (t) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -ECONNRESET;
	}
}

/* Waits for the next event of the connection's channel and checks that it
 * is want.  0 or a negative errno. */
static int cm_expect(struct rdma_conn *rc, enum rdma_cm_event_type want, int64_t deadline)
{
	struct pollfd pfd = { .fd = rc->cm_ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type got;
	int n;

	do {
		n = poll(&pfd, 1, ms_until(deadline));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ETIMEDOUT;
	if (rdma_get_cm_event(rc->cm_ch, &ev))
		return -errno;
	got = ev->event;
	rdma_ack_cm_event(ev);
	return got == want ? 0 : cm_errno(got);
}

static int resolve(struct rdma_conn *rc, const char *host, uint16_t port, int64_t deadline)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char service[8];
	int err;

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &ai))
		return -EHOSTUNREACH;
	err = rdma_resolve_addr(rc->id, NULL, ai->ai_addr, ms_until(deadline) < 0 ? 10000 :
				ms_until(deadline) + 1);
	freeaddrinfo(ai);
	if (err)
		return errno == ENODEV ? -EHOSTUNREACH : -errno;
	err = cm_expect(rc, RDMA_CM_EVENT_ADDR_RESOLVED, deadline);
	if (err)
		return err;
	if (rdma_resolve_route(rc->id, ms_until(deadline) < 0 ? 10000 : ms_until(deadline) + 1))
		return -errno;
	return cm_expect(rc, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
}

/* The queue pair on rc->id, over the PD and CQ that make_queues() made. */
static int make_qp(struct rdma_conn *rc)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = SQ_DEPTH,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = INLINE_WANT,
		},
	};

	qa.send_cq = qa.recv_cq = rc->cq;
	if (rdma_create_qp(rc->id, rc->pd, &qa)) {
		/* Some devices take no inline data at all. */
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(rc->id, rc->pd, &qa))
			return -errno ? -errno : -ENOMEM;
	}
	rc->qp_made = true;
	rc->max_inline = qa.cap.max_inline_data;
	return 0;
}

/* What outlives a re-attach: PD, completion channel and queue, bounce slots,
 * the registration table; then the first queue pair. */
static int make_queues(struct rdma_conn *rc)
{
	struct ibv_context *ctx = rc->id->verbs;
	size_t bounce_len = (size_t)SQ_DEPTH * RDMA_BOUNCE_MAX;

	rc->pd = ibv_alloc_pd(ctx);
	if (!rc->pd)
		return -ENOMEM;
	rc->comp_ch = ibv_create_comp_channel(ctx);
	if (!rc->comp_ch)
		return -errno ? -errno : -ENOMEM;
	rc->cq = ibv_create_cq(ctx, SQ_DEPTH + 1, NULL, rc->comp_ch, 0);
	if (!rc->cq)
		return -ENOMEM;
	rc->bounce = aligned_alloc(4096, bounce_len);
	if (!rc->bounce)
		return -ENOMEM;
	rc->bounce_mr = ibv_reg_mr(rc->pd, rc->bounce, bounce_len, IBV_ACCESS_LOCAL_WRITE);
	if (!rc->bounce_mr)
		return -ENOMEM;
	regcache_init(&rc->cache, rc->pd);
	return make_qp(rc);
}

/* The figures of the device and port that size the transfers. */
static int read_limits(struct rdma_conn *rc, uint8_t *depth)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int err;

	err = ibv_query_device(rc->id->verbs, &da);
	if (err)
		return -err;
	err = ibv_query_port(rc->id->verbs, rc->id->port_num, &pa);
	if (err)
		return -err;
	/* READs and atomics need responder resources at the daemon. */
	if (da.max_qp_init_rd_atom <= 0 || pa.max_msg_sz == 0)
		return -ENOTSUP;
	*depth = (uint8_t)(da.max_qp_init_rd_atom > (int)RD_ATOM_MAX ? (int)RD_ATOM_MAX :
			   da.max_qp_init_rd_atom);
	rc->max_msg = pa.max_msg_sz > (1u << 30) ? 1u << 30 : pa.max_msg_sz;
	return 0;
}

static int connect_qp(struct rdma_conn *rc, int64_t deadline)
{
	struct proto_attach at = { .session_id = rc->session_id, .attach_token = rc->token };
	uint8_t pdata[PROTO_ATTACH_LEN];
	struct rdma_conn_param cp = {
		.private_data = pdata,
		.private_data_len = (uint8_t)proto_attach_encode(pdata, &at),
		.initiator_depth = rc->depth,
		.responder_resources = 0,   /* nobody reads from us */
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	int err;

	if (rdma_connect(rc->id, &cp))
		return -errno;
	err = cm_expect(rc, RDMA_CM_EVENT_ESTABLISHED, deadline);
	if (err)
		return err;
	rc->connected = true;
	return 0;
}

int rdma_attach(struct rmem_client *c, const char *host, uint16_t port, uint64_t token)
{
	int64_t deadline = deadline_after(c->timeout_ms);
	struct rdma_conn *rc = calloc(1, sizeof(*rc));
	int err;

	if (!rc)
		return -ENOMEM;
	c->rdma = rc;
	rc->host = strdup(host);
	if (!rc->host) {
		err = -ENOMEM;
		goto fail;
	}
	rc->port = port;
	rc->session_id = c->session_id;
	rc->token = token;
	rc->cm_ch = rdma_create_event_channel();
	if (!rc->cm_ch) {
		err = errno == ENODEV || errno == ENOENT ? -ENOTSUP : -errno;
		goto fail;
	}
	if (rdma_create_id(rc->cm_ch, &rc->id, NULL, RDMA_PS_TCP)) {
		err = -errno;
		goto fail;
	}
	err = resolve(rc, host, port, deadline);
	if (!err)
		err = read_limits(rc, &rc->depth);
	if (!err)
		err = make_queues(rc);
	if (!err)
		err = connect_qp(rc, deadline);
	if (err)
		goto fail;
	rc->last_progress_ms = mono_ms();
	return 0;
fail:
	rdma_detach(c);
	return err;
}

void rdma_detach(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;

	if (!rc)
		return;
	c->rdma = NULL;
	if (rc->connected)
		rdma_disconnect(rc->id);
	/* Destroying the queue pair stops the NIC: after this no DMA touches a
	 * posted operation's buffer. */
	if (rc->qp_made)
		rdma_destroy_qp(rc->id);
	/* Posted operations are dropped: free each once its last slot goes. */
	for (uint32_t k = 0; k < rc->count; k++) {
		struct rdma_slot *s = &rc->slot[(rc->head + k) & SQ_MASK];

		if (s->state == SLOT_DONE || !s->op)
			continue;
		if (--s->op->frames == 0 && s->op->async) {
			c->async_ops--;
			free(s->op);
		}
	}
	regcache_clear(&rc->cache);
	regcache_kept_clear(&c->kept);
	if (rc->bounce_mr)
		ibv_dereg_mr(rc->bounce_mr);
	free(rc->bounce);
	if (rc->cq)
		ibv_destroy_cq(rc->cq);
	if (rc->comp_ch)
		ibv_destroy_comp_channel(rc->comp_ch);
	if (rc->pd)
		ibv_dealloc_pd(rc->pd);
	if (rc->id)
		rdma_destroy_id(rc->id);
	if (rc->cm_ch)
		rdma_destroy_event_channel(rc->cm_ch);
	free(rc->host);
	free(rc);
}

/*
 * Replaces the broken queue pair: a new rdma_cm id on a new event channel,
 * a new queue pair over the same PD and CQ, and an attach with the same
 * session and token, which the daemon takes as a re-attach (it replaces its
 * own queue pair, keeping every key).  The old id is destroyed only after
 * the new one is established: the daemon destroys its side of the old
 * connection when it accepts, so our disconnect of it reaches nothing, and
 * the DISCONNECTED that the daemon's destroy sends us sits unread on the old
 * channel, which goes too.  Nothing may be posted.  On failure the old id
 * (without a queue pair) is kept until rmem_close().
 */
static int reattach(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;
	struct rdma_event_channel *old_ch = rc->cm_ch;
	struct rdma_cm_id *old_id = rc->id;
	int64_t deadline = deadline_after(c->timeout_ms);
	int err;

	if (rc->qp_made)
		rdma_destroy_qp(old_id);
	rc->qp_made = false;
	rc->connected = false;
	rc->id = NULL;
	rc->cm_ch = rdma_create_event_channel();
	if (!rc->cm_ch) {
		err = -errno;
		goto fail;
	}
	if (rdma_create_id(rc->cm_ch, &rc->id, NULL, RDMA_PS_TCP)) {
		rc->id = NULL;
		err = -errno;
		goto fail;
	}
	err = resolve(rc, rc->host, rc->port, deadline);
	/* The PD, CQ and registrations belong to the old id's device. */
	if (!err && rc->id->verbs != old_id->verbs)
		err = -ENODEV;
	if (!err)
		err = make_qp(rc);
	if (!err)
		err = connect_qp(rc, deadline);
	if (err)
		goto fail;
	rdma_destroy_id(old_id);
	rdma_destroy_event_channel(old_ch);
	rc->last_progress_ms = mono_ms();
	return 0;
fail:
	if (rc->qp_made)
		rdma_destroy_qp(rc->id);
	if (rc->id)
		rdma_destroy_id(rc->id);
	if (rc->cm_ch)
		rdma_destroy_event_channel(rc->cm_ch);
	rc->qp_made = false;
	rc->id = old_id;
	rc->cm_ch = old_ch;
	rc->connected = true;
	return err;
}

/* ---- posting --------------------------------------------------------------------- */

static uint8_t *bounce_of(struct rdma_conn *rc, uint32_t i)
{
	return rc->bounce + (size_t)i * RDMA_BOUNCE_MAX;
}

static int post_slot(struct rdma_conn *rc, uint32_t i)
{
	struct rdma_slot *s = &rc->slot[i];
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
		sge.addr = (uintptr_t)bounce_of(rc, i);
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
static void slot_done(struct rmem_client *c, uint32_t i, int status)
{
	struct rdma_conn *rc = c->rdma;
	struct rdma_slot *s = &rc->slot[i];
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
	eng_op_part_done(c, op, status);
}

/*
 * The re-attach failed (recover()).  The session and its keys still hold on
 * TCP, so from now on data goes there: the flushed requests first, in
 * order.  A flushed atomic ends with RDMA_RETRY_TCP and its caller sends it
 * again.  The old rdma_cm id stays (disconnecting would end the session)
 * until rmem_close().
 */
static void degrade(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;

	rc->degraded = true;
	c->transport = "tcp";
	while (rc->count) {
		uint32_t i = rc->head;
		struct rdma_slot *s = &rc->slot[i];
		bool write = s->opcode == IBV_WR_RDMA_WRITE;
		struct proto_io_req req = {
			.id = s->region_id,
			.offset = s->offset,
			.rkey = s->rkey,
			.length = s->len,
		};
		uint8_t fixed[PROTO_IO_REQ_LEN];
		uint16_t opcode = write ? PROTO_OP_WRITE : PROTO_OP_READ;
		int err = RDMA_RETRY_TCP;

		if (s->opcode == IBV_WR_RDMA_WRITE || s->opcode == IBV_WR_RDMA_READ) {
			proto_io_req_encode(fixed, opcode, &req);
			err = eng_send(c, s->op, opcode, fixed, sizeof(fixed),
				       write ? s->local : NULL, write ? s->len : 0,
				       write ? NULL : s->local, write ? 0 : s->len);
		}
		/* The TCP frame (if it went) now carries the operation. */
		slot_done(c, i, err);
	}
}

/* Fails every operation in flight and marks the client broken. */
static int rdma_fail(struct rmem_client *c, int err)
{
	struct rdma_conn *rc = c->rdma;

	while (rc->count) {
		uint32_t i = rc->head;
		struct rdma_slot *s = &rc->slot[i];

		/* slot_done() moves the head past done slots: this one is not. */
		if (s->op && !s->op->async)
			s->op->status = s->op->status ? s->op->status : err;
		slot_done(c, i, -ECONNRESET);
	}
	rc->posted = 0;
	return eng_fail(c, err);
}

/* Posts the flushed requests again on the new queue pair, in ring order,
 * which is the order they were first posted in. */
static int repost(struct rdma_conn *rc)
{
	for (uint32_t k = 0; k < rc->count; k++) {
		uint32_t i = (rc->head + k) & SQ_MASK;
		struct rdma_slot *s = &rc->slot[i];
		int err;

		if (s->state != SLOT_FLUSHED)
			continue;
		/* Inline room is the device's; should the new queue pair have
		 * less, the bytes go through this slot's bounce buffer. */
		if (s->inlined && s->len > rc->max_inline) {
			memcpy(bounce_of(rc, i), s->local, s->len);
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
static void recover(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;
	int err;

	rc->qp_error = false;
	if (reattach(c) < 0) {
		degrade(c);
		return;
	}
	err = repost(rc);
	if (err)
		rdma_fail(c, err);
}

static void on_wc(struct rmem_client *c, const struct ibv_wc *wc)
{
	struct rdma_conn *rc = c->rdma;
	uint32_t i = (uint32_t)wc->wr_id & SQ_MASK;
	struct rdma_slot *s = &rc->slot[i];

	if (s->state != SLOT_POSTED)
		return;
	rc->posted--;
	if (wc->status == IBV_WC_SUCCESS) {
		if (s->opcode == IBV_WR_RDMA_READ && !s->reg)
			memcpy(s->local, bounce_of(rc, i), s->len);
		else if (s->old)
			memcpy(s->old, bounce_of(rc, i), sizeof(*s->old));
		slot_done(c, i, 0);
		return;
	}
	rc->qp_error = true;
	if (wc->status != IBV_WC_WR_FLUSH_ERR)
		slot_done(c, i, wc_errno(wc->status));
	else if (s->op->status)
		slot_done(c, i, 0);     /* its operation has failed already */
	else
		s->state = SLOT_FLUSHED;
}

/* Handles every completion there is.  0 or a negative errno (broken). */
static int reap(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;
	struct ibv_wc wc[WC_BATCH];
	int n;

	do {
		n = ibv_poll_cq(rc->cq, WC_BATCH, wc);
		if (n < 0)
			return rdma_fail(c, -EIO);
		if (n > 0)
			rc->progress++;
		for (int k = 0; k < n; k++)
			on_wc(c, &wc[k]);
	} while (n == WC_BATCH);
	if (rc->qp_error && rc->posted == 0)
		recover(c);
	return c->broken ? -ECONNRESET : 0;
}

/* The daemon ended the session (or the device went): every event on the
 * connection's channel after ESTABLISHED means the connection is gone. */
static int check_cm(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;
	struct pollfd pfd = { .fd = rc->cm_ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (rdma_get_cm_event(rc->cm_ch, &ev) == 0)
		rdma_ack_cm_event(ev);
	rc->connected = false;
	return rdma_fail(c, -ECONNRESET);
}

/*
 * Busy-polls the completion queue for up to SPIN_NS (and not past deadline):
 * 0 after handling a completion, 1 when none came, or a negative errno.
 * ibv_poll_cq() is no system call (the queue is mapped), so this costs only
 * the CPU.
 */
static int spin_cq(struct rmem_client *c, int64_t deadline)
{
	struct rdma_conn *rc = c->rdma;
	int64_t until = 0;
	struct ibv_wc wc[WC_BATCH];
	int n;

	for (unsigned k = 0;; k++) {
		n = ibv_poll_cq(rc->cq, WC_BATCH, wc);
		if (n < 0)
			return rdma_fail(c, -EIO);
		if (n > 0)
			break;
		/* The clock only every few polls, and not at all when the
		 * completion comes at once: under emulation it is dear. */
		if ((k & 15) != 15)
			continue;
		if (!until) {
			until = mono_ns() + SPIN_NS;
			if (deadline != NO_DEADLINE && deadline * 1000000 < until)
				until = deadline * 1000000;
		} else if (mono_ns() >= until) {
			return 1;
		}
	}
	rc->progress++;
	for (int k = 0; k < n; k++)
		on_wc(c, &wc[k]);
	if (rc->qp_error && rc->posted == 0)
		recover(c);
	return c->broken ? -ECONNRESET : 0;
}

/*
 * Waits for completions (or a connection event) until deadline.  Returns 0
 * after something happened, 1 once deadline has passed, or a negative errno
 * (broken; also when posted requests made no progress for c->timeout_ms).
 */
static int wait_cq(struct rmem_client *c, int64_t deadline)
{
	struct rdma_conn *rc = c->rdma;
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
	ka = keepalive_poke(c);
	n = spin_cq(c, deadline);
	if (n <= 0)
		return n;
	if (rc->progress != rc->progress_seen) {
		rc->progress_seen = rc->progress;
		rc->last_progress_ms = mono_ms();
	}
	stall = c->timeout_ms > 0 && rc->posted ? rc->last_progress_ms + c->timeout_ms :
		NO_DEADLINE;
	until = deadline < stall ? deadline : stall;
	if (ibv_req_notify_cq(rc->cq, 0))
		return rdma_fail(c, -EIO);
	/* A completion between the last look and the arming raised no event. */
	n = reap(c);
	if (n)
		return n;
	if (ka >= 0 && mono_ms() + ka < until)
		until = mono_ms() + ka;
	do {
		n = poll(pfd, 2, ms_until(until));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return rdma_fail(c, -errno);
	if (pfd[1].revents)
		return check_cm(c);
	if (pfd[0].revents) {
		if (ibv_get_cq_event(rc->comp_ch, &ev_cq, &ev_ctx) == 0)
			ibv_ack_cq_events(ev_cq, 1);
		return 0;
	}
	if (mono_ms() >= stall)
		return rdma_fail(c, -ETIMEDOUT);
	return mono_ms() >= deadline ? 1 : 0;
}

/* Makes room for one more request: a free slot, and a queue pair that is not
 * in the error state. */
static int make_room(struct rmem_client *c)
{
	struct rdma_conn *rc = c->rdma;

	for (;;) {
		/* With nothing posted there is nothing to reap: one look at the
		 * CQ less per synchronous call. */
		int err = rc->posted || rc->qp_error ? reap(c) : 0;

		if (err)
			return err;
		if (c->broken)
			return -ECONNRESET;
		if (rc->degraded)
			return RDMA_RETRY_TCP;
		if (rc->count < SQ_DEPTH && !rc->qp_error)
			return 0;
		err = wait_cq(c, NO_DEADLINE);
		if (err < 0)
			return err;
	}
}

/* Takes the next slot of the ring for op. */
static uint32_t slot_take(struct rdma_conn *rc, struct eng_op *op, enum ibv_wr_opcode opcode,
			  const struct rmem_region *r, uint64_t off, uint8_t *local, uint32_t len)
{
	uint32_t i = (rc->head + rc->count) & SQ_MASK;

	rc->slot[i] = (struct rdma_slot){
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
	return i;
}

/* Posts slot i, which slot_take() just filled; on success it joins the ring. */
static int slot_post(struct rmem_client *c, uint32_t i)
{
	struct rdma_conn *rc = c->rdma;
	struct rdma_slot *s = &rc->slot[i];
	int err = post_slot(rc, i);

	if (err) {
		if (s->reg)
			regcache_put(&rc->cache, s->reg);
		s->reg = NULL;
		return rdma_fail(c, err);
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
static int slot_local(struct rmem_client *c, uint32_t i, bool write, uint8_t *local, uint32_t n)
{
	struct rdma_conn *rc = c->rdma;
	struct rdma_slot *s = &rc->slot[i];

	s->reg = regcache_kept_get(&c->kept, local, n);
	if (s->reg)
		return 0;
	if (n <= RDMA_BOUNCE_MAX) {
		if (write)
			memcpy(bounce_of(rc, i), local, n);
		return 0;
	}
	return regcache_get(&rc->cache, local, n, &s->reg);
}

int rdma_keep(struct rmem_client *c, const void *buf, size_t len)
{
	return regcache_keep(&c->kept, rdma_carries_data(c) ? c->rdma->pd : NULL, buf, len);
}

int rdma_unkeep(struct rmem_client *c, const void *buf)
{
	return regcache_unkeep(&c->kept, buf);
}

int rdma_io(struct rmem_client *c, struct eng_op *op, bool write, const struct rmem_region *r,
	    uint64_t off, void *buf, size_t len, size_t *done)
{
	struct rdma_conn *rc = c->rdma;
	uint8_t *p = buf;
	size_t pos = 0;

	*done = 0;
	while (pos < len && !op->status) {
		uint32_t n = len - pos < rc->max_msg ? (uint32_t)(len - pos) : rc->max_msg;
		struct rdma_slot *s;
		uint32_t i;
		int err;

		err = make_room(c);
		if (err)
			return err;
		i = slot_take(rc, op, write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, r,
			      off + pos, p + pos, n);
		s = &rc->slot[i];
		if (write && n <= rc->max_inline) {
			s->inlined = true;
		} else {
			err = slot_local(c, i, write, p + pos, n);
			if (err) {
				/* What went out already still completes: the
				 * operation must end with this error. */
				if (!op->status)
					op->status = err;
				return err;
			}
		}
		err = slot_post(c, i);
		if (err)
			return err;
		pos += n;
		*done = pos;
	}
	return 0;
}

int rdma_wait_op(struct rmem_client *c, struct eng_op *op)
{
	while (!op->done) {
		int err = reap(c);

		if (!err && c->rdma->degraded)
			return eng_wait_op(c, op);
		if (!err && !op->done)
			err = wait_cq(c, NO_DEADLINE);
		if (err < 0 && !op->done)
			return err;
	}
	return op->status;
}

int rdma_atomic(struct rmem_client *c, bool cas, const struct rmem_region *r, uint64_t off,
		uint64_t operand, uint64_t desired, uint64_t *old)
{
	struct rdma_conn *rc = c->rdma;
	struct eng_op op = { .async = false };
	uint64_t value = 0;
	uint32_t i;
	int err;

	err = make_room(c);
	if (err)
		return err;
	i = slot_take(rc, &op, cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD, r,
		      off, NULL, sizeof(uint64_t));
	rc->slot[i].compare_add = operand;
	rc->slot[i].swap = desired;
	rc->slot[i].old = &value;
	err = slot_post(c, i);
	eng_seal(c, &op);
	if (err && op.sent == 0)
		return err;
	err = rdma_wait_op(c, &op);
	if (!err && old)
		*old = value;
	return err;
}

bool rdma_busy(const struct rmem_client *c)
{
	return c->rdma && c->rdma->count > 0;
}

bool rdma_carries_data(const struct rmem_client *c)
{
	return c->rdma && !c->rdma->degraded;
}

int rdma_progress(struct rmem_client *c, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? NO_DEADLINE : mono_ms() + timeout_ms;

	for (;;) {
		int err = reap(c);

		if (c->cq.count || err)
			return c->cq.count ? 0 : err;
		if (c->rdma->degraded)
			return eng_progress(c, timeout_ms);
		if (!rdma_busy(c))
			return 0;
		if (timeout_ms == 0)
			return 0;
		err = wait_cq(c, deadline);
		if (err)
			return c->cq.count || err > 0 ? 0 : err;
	}
}
