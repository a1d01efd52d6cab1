/*
 * verbs_conn.c - the device and the connection of the NIC transport (verbs.h):
 * attach, detach and the re-attach after a queue pair failed.  The ring of
 * work requests is verbs_post.c's; both share verbs_int.h.
 */
#include "clock.h"
#include "verbs_int.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define INLINE_WANT    64u
/* READs and atomics the daemon's responder keeps in flight for us (the
 * device may allow fewer): as many as perftest asks for on rxe (128), since
 * with fewer a stream of posted READs waits on the responder, not the wire. */
#define RD_ATOM_MAX    128u
#define NO_DEADLINE    NIC_NO_DEADLINE

static int64_t deadline_after(int timeout_ms)
{
	return timeout_ms > 0 ? clock_mono_ms() + timeout_ms : NO_DEADLINE;
}

bool verbs_have_device(void)
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
static int cm_expect(struct verbs_conn *rc, enum rdma_cm_event_type want, int64_t deadline)
{
	struct pollfd pfd = { .fd = rc->cm_ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type got;
	int n;

	do {
		n = poll(&pfd, 1, clock_ms_until(deadline));
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

static int resolve(struct verbs_conn *rc, const char *host, uint16_t port, int64_t deadline)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char service[8];
	int err;

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &ai))
		return -EHOSTUNREACH;
	err = rdma_resolve_addr(rc->id, NULL, ai->ai_addr, clock_ms_until(deadline) < 0 ? 10000 :
				clock_ms_until(deadline) + 1);
	freeaddrinfo(ai);
	if (err)
		return errno == ENODEV ? -EHOSTUNREACH : -errno;
	err = cm_expect(rc, RDMA_CM_EVENT_ADDR_RESOLVED, deadline);
	if (err)
		return err;
	if (rdma_resolve_route(rc->id, clock_ms_until(deadline) < 0 ? 10000 : clock_ms_until(deadline) + 1))
		return -errno;
	return cm_expect(rc, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
}

/* The queue pair on rc->id, over the PD and CQ that make_queues() made. */
static int make_qp(struct verbs_conn *rc)
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
static int make_queues(struct verbs_conn *rc)
{
	struct ibv_context *ctx = rc->id->verbs;
	size_t bounce_len = (size_t)SQ_DEPTH * NIC_BOUNCE_MAX;

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
static int read_limits(struct verbs_conn *rc, uint8_t *depth)
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

static int connect_qp(struct verbs_conn *rc, int64_t deadline)
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

int verbs_attach(struct verbs_conn **out, const struct verbs_target *t, const struct verbs_events *ev,
	       struct regcache_kept *kept)
{
	int64_t deadline = deadline_after(t->timeout_ms);
	struct verbs_conn *rc = calloc(1, sizeof(*rc));
	int err;

	*out = NULL;
	if (!rc)
		return -ENOMEM;
	rc->ev = *ev;
	rc->kept = kept;
	rc->timeout_ms = t->timeout_ms;
	rc->host = strdup(t->host);
	if (!rc->host) {
		err = -ENOMEM;
		goto fail;
	}
	rc->port = t->port;
	rc->session_id = t->session_id;
	rc->token = t->token;
	rc->cm_ch = rdma_create_event_channel();
	if (!rc->cm_ch) {
		err = errno == ENODEV || errno == ENOENT ? -ENOTSUP : -errno;
		goto fail;
	}
	if (rdma_create_id(rc->cm_ch, &rc->id, NULL, RDMA_PS_TCP)) {
		err = -errno;
		goto fail;
	}
	err = resolve(rc, rc->host, rc->port, deadline);
	if (!err)
		err = read_limits(rc, &rc->depth);
	if (!err)
		err = make_queues(rc);
	if (!err)
		err = connect_qp(rc, deadline);
	if (err)
		goto fail;
	rc->last_progress_ms = clock_mono_ms();
	*out = rc;
	return 0;
fail:
	verbs_detach(rc);
	return err;
}

void verbs_detach(struct verbs_conn *rc)
{
	if (!rc)
		return;
	if (rc->connected)
		rdma_disconnect(rc->id);
	/* Destroying the queue pair stops the NIC: after this no DMA touches a
	 * posted operation's buffer. */
	if (rc->qp_made)
		rdma_destroy_qp(rc->id);
	/* Posted operations are dropped: free each once its last slot goes. */
	for (uint32_t k = 0; k < rc->count; k++) {
		struct verbs_slot *s = &rc->slot[(rc->head + k) & SQ_MASK];

		if (s->state == SLOT_DONE || !s->op)
			continue;
		if (--s->op->frames == 0 && s->op->async)
			rc->ev.drop(rc->ev.ctx, s->op);
	}
	regcache_clear(&rc->cache);
	if (rc->kept)
		regcache_kept_clear(rc->kept);
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
int verbs_reattach(struct verbs_conn *rc)
{
	struct rdma_event_channel *old_ch = rc->cm_ch;
	struct rdma_cm_id *old_id = rc->id;
	int64_t deadline = deadline_after(rc->timeout_ms);
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
	rc->last_progress_ms = clock_mono_ms();
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

