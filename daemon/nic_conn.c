/*
 * nic_conn.c - the rdma_cm listener and the peers it makes: one RC queue
 * pair per attached client, its attach and re-attach, its end.  See nic.h
 * and nic_int.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "counters.h"
#include "endpoint.h"
#include "log.h"
#include "nic_int.h"
#include "proto.h"

/* Work requests of a peer's send queue: the daemon posts one bind or
 * invalidation at a time and waits for it; a few spare for flushes. */
#define SQ_DEPTH       8
#define CQ_DEPTH       (SQ_DEPTH + 2)
#define KEY_MIN_BITS   6
/* rdma_cm pads private data; the attach message is the first bytes. */
#define PDATA_MAX      64

/* ---- peers ----------------------------------------------------------------- */

void nic_peer_destroy(struct nic_peer *p)
{
	struct hash64_node *l;
	int rc;

	if (!p)
		return;
	for (size_t cur = 0; p->keys.b && (l = hash64_pop(&p->keys, &cur));) {
		log_err("client %llu: key of region %llu still there at the end",
			(unsigned long long)p->sid, (unsigned long long)l->key);
		nic_key_destroy(p, hash64_entry(l, struct nic_key, link));
	}
	hash64_fini(&p->keys);
	if (p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->cq) {
		rc = ibv_destroy_cq(p->cq);
		if (rc)
			log_err("ibv_destroy_cq: %s", strerror(rc));
	}
	if (p->own_pd && p->pd) {
		rc = ibv_dealloc_pd(p->pd);
		if (rc)
			log_err("ibv_dealloc_pd: %s", strerror(rc));
	}
	if (rdma_destroy_id(p->id))
		log_err("rdma_destroy_id: %s", strerror(errno));
	free(p);
}

/* An RC queue pair on id in p's domain, on p's completion queue.  A
 * re-attach makes a second one before the first goes: the daemon posts
 * nothing in region-mr mode (the only mode that re-attaches), so the two
 * never compete for the completion queue. */
static int peer_make_qp(struct nic_peer *p, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		/* The client only reads, writes and does atomics: the daemon posts
		 * no receives, but some devices want a receive queue. */
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_context = p,
		.send_cq = p->cq,
		.recv_cq = p->cq,
	};

	if (rdma_create_qp(id, p->pd, &qa)) {
		log_err("client %llu: rdma_create_qp: %s", (unsigned long long)p->sid,
			strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

/* Builds the queue pair of a connect request; on failure the caller rejects
 * and destroys id. */
static struct nic_peer *peer_new(struct nic *rd, struct rdma_cm_id *id, struct session *s,
				 uint64_t sid)
{
	struct nic_peer *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->rd = rd;
	p->s = s;
	p->sid = sid;
	p->id = id;
	if (hash64_init(&p->keys, KEY_MIN_BITS) < 0)
		goto fail;
	if (rd->mode == PROTO_KEYS_REGION_MR) {
		/* Its own domain: no other client's queue pair can use its keys. */
		p->pd = ibv_alloc_pd(rd->ctx);
		if (!p->pd) {
			log_err("ibv_alloc_pd: %s", strerror(errno));
			goto fail;
		}
		p->own_pd = true;
	} else {
		p->pd = rd->pd; /* windows, the pool MRs and the QP share one domain */
	}
	p->cq = ibv_create_cq(rd->ctx, CQ_DEPTH, p, rd->comp_channel, 0);
	if (!p->cq) {
		log_err("ibv_create_cq: %s", strerror(errno));
		goto fail;
	}
	errno = ibv_req_notify_cq(p->cq, 0);
	if (errno) {
		log_err("ibv_req_notify_cq: %s", strerror(errno));
		goto fail;
	}
	if (peer_make_qp(p, id) < 0)
		goto fail;
	return p;
fail:
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->own_pd && p->pd)
		ibv_dealloc_pd(p->pd);
	hash64_fini(&p->keys);
	free(p);
	return NULL;
}

/* The session ends through its connection (rd->ev.end), which destroys p
 * later; asked once. */
void nic_peer_end(struct nic_peer *p, const char *why)
{
	if (p->ending)
		return;
	p->ending = true;
	/* conn_fail logs the line that says why; this one ties it to the id. */
	log_debug("client %llu: %s; ending its session", (unsigned long long)p->sid, why);
	p->rd->ev.end(p->rd->ev.arg, p->s, -ECONNRESET, why);
}


/* ---- the rdma_cm listener ----------------------------------------------------- */

static void refuse(struct rdma_cm_id *id, const char *from, const char *why)
{
	log_warn("RDMA attach from %s refused: %s", from, why);
	if (rdma_reject(id, NULL, 0))
		log_err("rdma_reject: %s", strerror(errno));
	if (rdma_destroy_id(id))
		log_err("rdma_destroy_id: %s", strerror(errno));
}

/* The accept's figures.  The request's are already from our side:
 * responder_resources is how many READs and atomics the client will keep in
 * flight to us. */
static void accept_param(const struct nic *rd, const struct rdma_conn_param *req,
			 struct rdma_conn_param *cp)
{
	*cp = (struct rdma_conn_param){
		.responder_resources = nic_min_u8(req->responder_resources, rd->max_rd_atom),
		.initiator_depth = nic_min_u8(req->initiator_depth, rd->max_init_rd_atom),
		.rnr_retry_count = 7,
	};
}

/*
 * The session's owner attaches again (its queue pair broke: rxe moves ours
 * to the error state too after refusing an access, and tells us nothing).
 * The new queue pair replaces the old one in the same protection domain, so
 * every region-mr key stays valid.  The old id is destroyed only once the new
 * one is accepted; destroying it drops its pending events, so no
 * DISCONNECTED of it can end the session.  Window mode refuses: its windows
 * are bound to the old queue pair.
 */
static void peer_reattach(struct nic *rd, struct nic_peer *p, struct rdma_cm_id *id,
			  const struct rdma_conn_param *req, const char *from)
{
	unsigned long long sid = (unsigned long long)p->sid;
	struct rdma_cm_id *old = p->id;
	struct rdma_conn_param cp;
	uint32_t old_qpn = old->qp ? old->qp->qp_num : 0;
	char why[160];

	if (rd->mode == PROTO_KEYS_WINDOW) {
		/* The client asks after an error completion, and moves its data
		 * to TCP once refused: the session goes on there, with TCP keys
		 * for its new regions instead of windows on a broken queue pair. */
		bool retired = nic_peer_retire(p);

		snprintf(why, sizeof why, "session %llu has a queue pair already, and keys = "
			 "window cannot re-attach (its windows are bound to that queue pair)%s",
			 sid, retired ? "; it is broken: new regions get TCP keys" : "");
		return refuse(id, from, why);
	}
	if (p->stopped || p->ending) {
		snprintf(why, sizeof why, "session %llu is ending", sid);
		return refuse(id, from, why);
	}
	if (peer_make_qp(p, id) < 0)
		return refuse(id, from, "no resources for a queue pair");
	accept_param(rd, req, &cp);
	/* The accept moves the new queue pair to RTS; the old one keeps the
	 * session until then, should the accept fail. */
	if (rdma_accept(id, &cp)) {
		log_err("client %llu: rdma_accept (re-attach): %s", sid, strerror(errno));
		rdma_reject(id, NULL, 0);
		rdma_destroy_qp(id);
		if (rdma_destroy_id(id))
			log_err("rdma_destroy_id: %s", strerror(errno));
		return;
	}
	id->context = p;
	p->id = id;
	p->failed = false;
	rd->counters->rdma_reattaches++;
	old->context = NULL;
	if (old->qp)
		rdma_destroy_qp(old);
	if (rdma_destroy_id(old))
		log_err("client %llu: rdma_destroy_id (old queue pair): %s", sid, strerror(errno));
	log_info("client %llu (%s): re-attach from %s: RDMA queue pair %u replaces %u; "
		 "its %llu keys stay", sid, p->rd->ev.describe(p->rd->ev.arg, p->s), from, id->qp->qp_num, old_qpn,
		 (unsigned long long)p->keys.count);
}

static void on_connect_request(struct nic *rd, struct rdma_cm_id *id,
			       const struct rdma_conn_param *req, const uint8_t *pdata,
			       size_t plen)
{
	struct rdma_conn_param cp;
	struct proto_attach at;
	struct nic_peer *p, *current = NULL;
	struct session *s;
	char from[64], why[96];

	addr_format(rdma_get_peer_addr(id), from, sizeof from);
	if (proto_attach_decode(pdata, plen, &at) < 0)
		return refuse(id, from, "bad private data (not an rmem attach)");
	s = rd->ev.find(rd->ev.arg, at.session_id, at.attach_token, &current);
	if (!s) {
		snprintf(why, sizeof why, "no session %llu with that attach token",
			 (unsigned long long)at.session_id);
		return refuse(id, from, why);
	}
	if (id->verbs != rd->ctx)
		return refuse(id, from, "arrived on another RDMA device than rdma.device");
	if (current)
		return peer_reattach(rd, current, id, req, from);
	p = peer_new(rd, id, s, at.session_id);
	if (!p)
		return refuse(id, from, "no resources for a queue pair");
	id->context = p;
	accept_param(rd, req, &cp);
	log_debug("client %llu: accept with responder_resources %u initiator_depth %u "
		  "(asked %u %u)", (unsigned long long)p->sid, cp.responder_resources,
		  cp.initiator_depth, req->responder_resources, req->initiator_depth);
	/* Set before the accept: from here on a second request is a re-attach;
	 * the accept moves the queue pair to RTS, so keys can be made from now on. */
	rd->ev.attached(rd->ev.arg, s, p);
	if (rdma_accept(id, &cp)) {
		log_err("client %llu: rdma_accept: %s", (unsigned long long)p->sid, strerror(errno));
		rd->ev.attached(rd->ev.arg, s, NULL);
		rdma_reject(id, NULL, 0);
		nic_peer_destroy(p);
		return;
	}
	rd->counters->rdma_attaches++;
	log_info("client %llu (%s): RDMA queue pair %u accepted from %s", (unsigned long long)p->sid,
		 rd->ev.describe(rd->ev.arg, s), p->id->qp->qp_num, from);
}

static void on_cm_event(struct nic *rd, const struct rdma_cm_event *ev, const uint8_t *pdata,
			size_t plen)
{
	struct nic_peer *p = ev->id->context;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return on_connect_request(rd, ev->id, &ev->param.conn, pdata, plen);
	if (ev->id == rd->listen_id) {
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			log_err("RDMA device %s removed: no new attaches", rd->devname);
		else
			log_notice("rdma_cm listener: %s", rdma_event_str(ev->event));
		return;
	}
	if (!p)
		return; /* an id a re-attach replaced, met before it was destroyed */
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		log_info("client %llu: RDMA attached", (unsigned long long)p->sid);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		nic_peer_end(p, "RDMA disconnected");
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		nic_peer_end(p, rdma_event_str(ev->event));
		break;
	default:
		log_debug("client %llu: %s", (unsigned long long)p->sid,
			  rdma_event_str(ev->event));
		break;
	}
}

/*
 * Each event is copied and acknowledged before it is acted on: acting may
 * destroy its id, and rdma_destroy_id waits for the id's events to be
 * acknowledged - on this very thread.
 */
void nic_on_cm_channel(evutil_socket_t fd, short what, void *arg)
{
	struct nic *rd = arg;
	struct rdma_cm_event *ev;

	(void)fd;
	(void)what;
	while (rdma_get_cm_event(rd->cm_channel, &ev) == 0) {
		struct rdma_cm_event copy = *ev;
		uint8_t pdata[PDATA_MAX];
		size_t plen = 0;

		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
			plen = ev->param.conn.private_data_len < sizeof pdata ?
			       ev->param.conn.private_data_len : sizeof pdata;
			memcpy(pdata, ev->param.conn.private_data, plen);
		}
		copy.param.conn.private_data = NULL;
		rdma_ack_cm_event(ev);
		on_cm_event(rd, &copy, pdata, plen);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		log_err("rdma_get_cm_event: %s", strerror(errno));
}

int nic_bind_listener(struct nic *rd)
{
	const char *addr = rd->listen_addr;
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	struct endpoint ep;
	int rc;

	if (endpoint_parse(addr, &ep) < 0 || ep.kind != ENDPOINT_TCP) {
		log_warn("listen.rdma: \"%s\" is not HOST:PORT; serving TCP only", addr);
		return -EINVAL;
	}
	rc = getaddrinfo(ep.host, ep.port, &hints, &ai);
	if (rc) {
		log_warn("listen.rdma: %s: %s; serving TCP only", addr, gai_strerror(rc));
		return -EINVAL;
	}
	rc = rdma_bind_addr(rd->listen_id, ai->ai_addr) ? -errno : 0;
	freeaddrinfo(ai);
	if (rc == -ENODEV || rc == -EADDRNOTAVAIL)
		log_notice("listen.rdma = \"%s\": no RDMA device has that address; serving TCP only",
			   addr);
	else if (rc < 0)
		log_warn("listen.rdma: rdma_bind_addr(%s): %s; serving TCP only", addr,
			 strerror(-rc));
	return rc;
}

