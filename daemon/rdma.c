/*
 * rdma.c - see rdma.h.  Every ibv_* and rdma_* call of rmemd is here.
 *
 * One device serves everything: the one librdmacm hands to listen.rdma's
 * address (or the one named in rdma.device).  Its protection domain, the pool
 * registrations (window mode), the completion channel and the rdma_cm event
 * channel live as long as the daemon; a peer (one attached client) owns its
 * rdma_cm id, queue pair, completion queue, in region-mr mode its own
 * protection domain, and a hash of its regions' keys by region id.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "log.h"
#include "proto.h"
#include "rdma.h"
#include "server.h"
#include "session.h"

#define LISTEN_BACKLOG 128
/* Work requests of a peer's send queue: the daemon posts one bind or
 * invalidation at a time and waits for it; a few spare for flushes. */
#define SQ_DEPTH       8
#define CQ_DEPTH       (SQ_DEPTH + 2)
#define KEY_MIN_BITS   6
/* Soft-RoCE (rxe) reports this vendor id (drivers/infiniband/sw/rxe). */
#define RXE_VENDOR_ID  0xffffffu
/* rdma_cm pads private data; the attach message is the first bytes. */
#define PDATA_MAX      64

struct rdma_key {
	uint64_t id;             /* region id */
	struct ibv_mw *mw;       /* window mode */
	struct ibv_mr *mr;       /* region-mr mode */
	struct rdma_key *next;   /* hash chain */
};

struct rdma_peer {
	struct rdma *rd;
	struct session *s;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;       /* rd->pd (window mode) or its own (region-mr) */
	bool own_pd;
	struct ibv_cq *cq;
	bool stopped;            /* disconnected: no remote access any more */
	bool failed;             /* a work request failed: no new keys */
	bool ending;             /* its session was asked to end */
	uint64_t next_wr_id, done_wr_id;
	enum ibv_wc_status done_status;
	struct rdma_key **keys;  /* hash on region id */
	unsigned key_bits;
	uint64_t nkeys;
};

struct rdma {
	struct server *srv;
	uint8_t mode;                     /* enum proto_key_mode */
	struct rdma_event_channel *cm_channel;
	struct rdma_cm_id *listen_id;
	struct ibv_context **devices;     /* librdmacm's, so ids and our PD share a context */
	struct ibv_context *ctx;
	char devname[IBV_SYSFS_NAME_MAX];
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp_channel;
	struct ibv_mr *pool_mr[CONFIG_MAX_POOLS];
	struct event *ev_cm, *ev_comp, *ev_async;
	int access;                       /* remote rights of a key */
	uint8_t max_rd_atom, max_init_rd_atom;
	uint16_t port;
};

static const char *mode_name(uint8_t mode)
{
	return mode == PROTO_KEYS_WINDOW ? "window" :
	       mode == PROTO_KEYS_REGION_MR ? "region-mr" : "none";
}

static uint64_t now_ms(void)
{
	return session_now_ns() / 1000000u;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static void addr_name(const struct sockaddr *sa, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(out, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(out, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(out, len, "?");
	}
}

/* ---- the keys of a peer, by region id ------------------------------------- */

static size_t key_slot(uint64_t id, unsigned bits)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static void keys_grow(struct rdma_peer *p)
{
	unsigned bits = p->key_bits + 1;
	struct rdma_key **b = calloc((size_t)1 << bits, sizeof *b);

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < (size_t)1 << p->key_bits; i++) {
		for (struct rdma_key *k = p->keys[i], *next; k; k = next) {
			size_t j = key_slot(k->id, bits);

			next = k->next;
			k->next = b[j];
			b[j] = k;
		}
	}
	free(p->keys);
	p->keys = b;
	p->key_bits = bits;
}

static void key_insert(struct rdma_peer *p, struct rdma_key *k)
{
	size_t i;

	if (p->nkeys >= (uint64_t)1 << p->key_bits)
		keys_grow(p);
	i = key_slot(k->id, p->key_bits);
	k->next = p->keys[i];
	p->keys[i] = k;
	p->nkeys++;
}

static struct rdma_key *key_take(struct rdma_peer *p, uint64_t id)
{
	struct rdma_key **pp = &p->keys[key_slot(id, p->key_bits)];

	for (; *pp; pp = &(*pp)->next) {
		struct rdma_key *k = *pp;

		if (k->id == id) {
			*pp = k->next;
			p->nkeys--;
			return k;
		}
	}
	return NULL;
}

/* ---- completions -------------------------------------------------------------- */

/* Takes every completion of p's queue.  Only one work request is waited for
 * at a time and a send queue completes in order, so the last one seen is the
 * newest. */
static void peer_drain(struct rdma_peer *p)
{
	struct ibv_wc wc[4];
	int n;

	while ((n = ibv_poll_cq(p->cq, 4, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			p->done_wr_id = wc[i].wr_id;
			p->done_status = wc[i].status;
			if (wc[i].status != IBV_WC_SUCCESS && !p->stopped && !p->failed) {
				log_warn("client %llu: work request %llu failed: %s",
					 (unsigned long long)p->s->id,
					 (unsigned long long)wc[i].wr_id,
					 ibv_wc_status_str(wc[i].status));
				p->failed = true;
			}
		}
	}
	if (n < 0 && !p->failed) {
		log_err("client %llu: ibv_poll_cq failed: %d", (unsigned long long)p->s->id, n);
		p->failed = true;
	}
}

/* Reads the completion events that are there (the channel fd is nonblocking). */
static void comp_channel_service(struct rdma *rd)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	while (ibv_get_cq_event(rd->comp_channel, &cq, &cq_ctx) == 0) {
		struct rdma_peer *p = cq_ctx;
		int rc;

		ibv_ack_cq_events(cq, 1);
		/* Re-arm before draining, so a completion that lands between the
		 * two still raises an event. */
		rc = ibv_req_notify_cq(cq, 0);
		if (rc)
			log_err("client %llu: ibv_req_notify_cq: %s",
				(unsigned long long)p->s->id, strerror(rc));
		peer_drain(p);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		log_err("ibv_get_cq_event: %s", strerror(errno));
}

static void on_comp_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	comp_channel_service(arg);
}

/*
 * Waits, outside the event loop, for work request wr_id of p to complete:
 * the ALLOC or FREE that posted it answers only once the NIC has done it.
 * Other peers' completions met meanwhile are taken as the loop would.
 */
static int peer_wait(struct rdma_peer *p, uint64_t wr_id)
{
	struct rdma *rd = p->rd;
	uint64_t deadline = now_ms() + RDMA_WAIT_MS;

	for (;;) {
		struct pollfd pfd = { .fd = rd->comp_channel->fd, .events = POLLIN };
		uint64_t now;
		int n;

		peer_drain(p);
		if (p->done_wr_id == wr_id)
			return p->done_status == IBV_WC_SUCCESS ? 0 : -EIO;
		now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)(deadline - now));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			comp_channel_service(rd);
	}
}

/* Posts one signaled work request on p's queue pair and waits for it. */
static int peer_run(struct rdma_peer *p, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad = NULL;
	int rc;

	wr->wr_id = ++p->next_wr_id;
	wr->send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(p->id->qp, wr, &bad);
	if (rc) {
		log_err("client %llu: ibv_post_send(%s): %s", (unsigned long long)p->s->id, what,
			strerror(rc));
		return -EIO;
	}
	rc = peer_wait(p, wr->wr_id);
	if (rc == -ETIMEDOUT)
		log_err("client %llu: %s did not complete in %d ms", (unsigned long long)p->s->id,
			what, RDMA_WAIT_MS);
	return rc;
}

/* A queue pair that failed a work request serves no more keys: cut it, and
 * the DISCONNECTED event that follows ends the session. */
static void peer_fail(struct rdma_peer *p, const char *why)
{
	if (!p->failed)
		log_warn("client %llu: RDMA failed (%s); disconnecting",
			 (unsigned long long)p->s->id, why);
	p->failed = true;
	rdma_peer_stop(p);
}

/* ---- keys ------------------------------------------------------------------ */

static int window_new(struct rdma_peer *p, struct rdma_key *k, uint32_t pool, uint8_t *addr,
		      uint64_t len, uint32_t *rkey)
{
	struct ibv_send_wr wr = { .opcode = IBV_WR_BIND_MW };
	int rc;

	k->mw = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);
	if (!k->mw) {
		log_err("client %llu: ibv_alloc_mw: %s", (unsigned long long)p->s->id,
			strerror(errno));
		return -ENOMEM;
	}
	wr.bind_mw.mw = k->mw;
	wr.bind_mw.rkey = ibv_inc_rkey(k->mw->rkey);
	wr.bind_mw.bind_info.mr = p->rd->pool_mr[pool];
	wr.bind_mw.bind_info.addr = (uint64_t)(uintptr_t)addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = (unsigned)p->rd->access;
	rc = peer_run(p, &wr, "bind");
	if (rc < 0) {
		ibv_dealloc_mw(k->mw); /* also unbinds it, should the bind land late */
		k->mw = NULL;
		peer_fail(p, "memory window bind");
		return rc;
	}
	/* A bind posted as a work request leaves mw->rkey as it was (rxe): keep
	 * it current, or the invalidation and the next bind use a stale key. */
	k->mw->rkey = wr.bind_mw.rkey;
	*rkey = k->mw->rkey;
	return 0;
}

int rdma_key_new(struct rdma_peer *p, uint64_t id, uint32_t pool, uint8_t *addr, uint64_t len,
		 uint32_t *rkey)
{
	struct rdma_key *k;
	int rc;

	if (p->failed || p->stopped)
		return -EIO;
	k = calloc(1, sizeof *k);
	if (!k)
		return -ENOMEM;
	k->id = id;
	if (p->rd->mode == PROTO_KEYS_WINDOW) {
		rc = window_new(p, k, pool, addr, len, rkey);
		if (rc < 0)
			goto fail;
	} else {
		/* The pool is pinned already; this only gives the NIC a
		 * translation and a key valid in this client's domain alone. */
		k->mr = ibv_reg_mr(p->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | p->rd->access);
		if (!k->mr) {
			rc = errno == ENOMEM ? -ENOMEM : -EIO;
			log_err("client %llu: ibv_reg_mr of %llu bytes: %s",
				(unsigned long long)p->s->id, (unsigned long long)len,
				strerror(errno));
			goto fail;
		}
		*rkey = k->mr->rkey;
	}
	key_insert(p, k);
	return 0;
fail:
	free(k);
	return rc;
}

static void key_destroy(struct rdma_peer *p, struct rdma_key *k)
{
	int rc;

	if (k->mw && !p->stopped && !p->failed) {
		struct ibv_send_wr wr = { .opcode = IBV_WR_LOCAL_INV,
					  .invalidate_rkey = k->mw->rkey };

		if (peer_run(p, &wr, "invalidate") < 0)
			peer_fail(p, "memory window invalidation");
	}
	/* A window the invalidation did not reach (queue pair stopped or
	 * failed) is unbound by its deallocation. */
	if (k->mw) {
		rc = ibv_dealloc_mw(k->mw);
		if (rc)
			log_err("client %llu: ibv_dealloc_mw: %s", (unsigned long long)p->s->id,
				strerror(rc));
	}
	if (k->mr) {
		rc = ibv_dereg_mr(k->mr);
		if (rc)
			log_err("client %llu: ibv_dereg_mr: %s", (unsigned long long)p->s->id,
				strerror(rc));
	}
	free(k);
}

int rdma_key_drop(struct rdma_peer *p, uint64_t id)
{
	struct rdma_key *k = key_take(p, id);

	if (!k)
		return 0;
	key_destroy(p, k);
	return 1;
}

/* ---- peers ----------------------------------------------------------------- */

void rdma_peer_stop(struct rdma_peer *p)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int rc;

	if (!p || p->stopped)
		return;
	p->stopped = true;
	if (!p->id->qp)
		return;
	/* The error state is what stops the NIC, whatever the connection's
	 * state; the disconnect tells the client. */
	rc = ibv_modify_qp(p->id->qp, &attr, IBV_QP_STATE);
	if (rc)
		log_err("client %llu: ibv_modify_qp(ERR): %s", (unsigned long long)p->s->id,
			strerror(rc));
	if (rdma_disconnect(p->id) && errno != EINVAL)
		log_debug("client %llu: rdma_disconnect: %s", (unsigned long long)p->s->id,
			  strerror(errno));
}

void rdma_peer_destroy(struct rdma_peer *p)
{
	int rc;

	if (!p)
		return;
	for (size_t i = 0; p->keys && i < (size_t)1 << p->key_bits; i++) {
		while (p->keys[i]) {
			struct rdma_key *k = p->keys[i];

			log_err("client %llu: key of region %llu still there at the end",
				(unsigned long long)p->s->id, (unsigned long long)k->id);
			p->keys[i] = k->next;
			key_destroy(p, k);
		}
	}
	free(p->keys);
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
static int peer_make_qp(struct rdma_peer *p, struct rdma_cm_id *id)
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
		log_err("client %llu: rdma_create_qp: %s", (unsigned long long)p->s->id,
			strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

/* Builds the queue pair of a connect request; on failure the caller rejects
 * and destroys id. */
static struct rdma_peer *peer_new(struct rdma *rd, struct rdma_cm_id *id, struct session *s)
{
	struct rdma_peer *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->rd = rd;
	p->s = s;
	p->id = id;
	p->key_bits = KEY_MIN_BITS;
	p->keys = calloc((size_t)1 << p->key_bits, sizeof *p->keys);
	if (!p->keys)
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
	free(p->keys);
	free(p);
	return NULL;
}

/* The session ends through its connection (server_end_session), which
 * destroys p; asked once. */
static void peer_end(struct rdma_peer *p, const char *why)
{
	if (p->ending)
		return;
	p->ending = true;
	/* conn_fail logs the line that says why; this one ties it to the id. */
	log_debug("client %llu: %s; ending its session", (unsigned long long)p->s->id, why);
	server_end_session(p->rd->srv, p->s, -ECONNRESET, why);
}

/* ---- the rdma_cm listener ----------------------------------------------------- */

static uint8_t min_u8(unsigned a, unsigned b)
{
	unsigned m = a < b ? a : b;

	return (uint8_t)(m > 255 ? 255 : m);
}

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
static void accept_param(const struct rdma *rd, const struct rdma_conn_param *req,
			 struct rdma_conn_param *cp)
{
	*cp = (struct rdma_conn_param){
		.responder_resources = min_u8(req->responder_resources, rd->max_rd_atom),
		.initiator_depth = min_u8(req->initiator_depth, rd->max_init_rd_atom),
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
static void peer_reattach(struct rdma *rd, struct rdma_peer *p, struct rdma_cm_id *id,
			  const struct rdma_conn_param *req, const char *from)
{
	unsigned long long sid = (unsigned long long)p->s->id;
	struct rdma_cm_id *old = p->id;
	struct rdma_conn_param cp;
	uint32_t old_qpn = old->qp ? old->qp->qp_num : 0;
	char why[160];

	if (rd->mode == PROTO_KEYS_WINDOW) {
		snprintf(why, sizeof why, "session %llu has a queue pair already, and keys = "
			 "window cannot re-attach (its windows are bound to that queue pair)", sid);
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
	old->context = NULL;
	if (old->qp)
		rdma_destroy_qp(old);
	if (rdma_destroy_id(old))
		log_err("client %llu: rdma_destroy_id (old queue pair): %s", sid, strerror(errno));
	log_info("client %llu (%s): re-attach from %s: RDMA queue pair %u replaces %u; "
		 "its %llu keys stay", sid, p->s->peer, from, id->qp->qp_num, old_qpn,
		 (unsigned long long)p->nkeys);
}

static void on_connect_request(struct rdma *rd, struct rdma_cm_id *id,
			       const struct rdma_conn_param *req, const uint8_t *pdata,
			       size_t plen)
{
	struct rdma_conn_param cp;
	struct proto_attach at;
	struct rdma_peer *p;
	struct session *s;
	char from[64], why[96];

	addr_name(rdma_get_peer_addr(id), from, sizeof from);
	if (proto_attach_decode(pdata, plen, &at) < 0)
		return refuse(id, from, "bad private data (not an rmem attach)");
	s = session_find(rd->srv, at.session_id);
	if (!s || !session_token_ok(s, at.attach_token)) {
		snprintf(why, sizeof why, "%s session %llu", s ? "wrong token for" : "no",
			 (unsigned long long)at.session_id);
		return refuse(id, from, why);
	}
	if (id->verbs != rd->ctx)
		return refuse(id, from, "arrived on another RDMA device than rdma.device");
	if (s->rdma)
		return peer_reattach(rd, s->rdma, id, req, from);
	p = peer_new(rd, id, s);
	if (!p)
		return refuse(id, from, "no resources for a queue pair");
	id->context = p;
	accept_param(rd, req, &cp);
	log_debug("client %llu: accept with responder_resources %u initiator_depth %u "
		  "(asked %u %u)", (unsigned long long)s->id, cp.responder_resources,
		  cp.initiator_depth, req->responder_resources, req->initiator_depth);
	/* Set before the accept: from here on a second request is a re-attach;
	 * the accept moves the queue pair to RTS, so keys can be made from now on. */
	s->rdma = p;
	if (rdma_accept(id, &cp)) {
		log_err("client %llu: rdma_accept: %s", (unsigned long long)s->id, strerror(errno));
		s->rdma = NULL;
		rdma_reject(id, NULL, 0);
		rdma_peer_destroy(p);
		return;
	}
	log_info("client %llu (%s): RDMA queue pair %u accepted from %s", (unsigned long long)s->id,
		 s->peer, p->id->qp->qp_num, from);
}

static void on_cm_event(struct rdma *rd, const struct rdma_cm_event *ev, const uint8_t *pdata,
			size_t plen)
{
	struct rdma_peer *p = ev->id->context;

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
		log_info("client %llu: RDMA attached", (unsigned long long)p->s->id);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		peer_end(p, "RDMA disconnected");
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		peer_end(p, rdma_event_str(ev->event));
		break;
	default:
		log_debug("client %llu: %s", (unsigned long long)p->s->id,
			  rdma_event_str(ev->event));
		break;
	}
}

/*
 * Each event is copied and acknowledged before it is acted on: acting may
 * destroy its id, and rdma_destroy_id waits for the id's events to be
 * acknowledged - on this very thread.
 */
static void on_cm_channel(evutil_socket_t fd, short what, void *arg)
{
	struct rdma *rd = arg;
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

/* The device's own reports: a queue pair that broke ends its session. */
static void on_async_event(evutil_socket_t fd, short what, void *arg)
{
	struct rdma *rd = arg;
	struct ibv_async_event ev;

	(void)fd;
	(void)what;
	while (ibv_get_async_event(rd->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR: {
			struct rdma_peer *p = ev.element.qp->qp_context;

			if (!p->stopped)
				peer_end(p, ibv_event_type_str(ev.event_type));
			break;
		}
		case IBV_EVENT_COMM_EST:
			break; /* rdma_cm reports ESTABLISHED */
		default:
			log_notice("RDMA device %s: %s", rd->devname,
				   ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

/* ---- bring-up and tear-down --------------------------------------------------- */

/*
 * "auto": the device of listen.rdma's address, else the first one; a name
 * must be one librdmacm knows.
 */
static int pick_device(struct rdma *rd, const char *want)
{
	int n = 0;

	rd->devices = rdma_get_devices(&n);
	if (!rd->devices || n == 0) {
		log_notice("no RDMA device: serving TCP only (HELLO says rdma_port 0)");
		return -ENODEV;
	}
	if (!strcmp(want, "auto")) {
		rd->ctx = rd->listen_id->verbs ? rd->listen_id->verbs : rd->devices[0];
	} else {
		for (int i = 0; i < n; i++)
			if (!strcmp(ibv_get_device_name(rd->devices[i]->device), want))
				rd->ctx = rd->devices[i];
		if (!rd->ctx) {
			log_warn("rdma.device = \"%s\": no such RDMA device; serving TCP only",
				 want);
			return -ENODEV;
		}
		if (rd->listen_id->verbs && rd->listen_id->verbs != rd->ctx) {
			log_warn("listen.rdma = \"%s\" is on device %s, not rdma.device \"%s\"; "
				 "serving TCP only", rd->srv->cfg.listen_rdma,
				 ibv_get_device_name(rd->listen_id->verbs->device), want);
			return -EINVAL;
		}
	}
	snprintf(rd->devname, sizeof rd->devname, "%s", ibv_get_device_name(rd->ctx->device));
	return 0;
}

/* rdma.keys against what the device can do; logs the choice and why. */
static int pick_key_mode(struct rdma *rd, const struct ibv_device_attr *a)
{
	const unsigned type2 = IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	bool windows = (a->device_cap_flags & type2) != 0;
	/* Linux 6.1's rxe binds type 2 windows but checks an access only against
	 * the MR under the window: its bounds are not enforced. */
	bool bounds = windows && a->vendor_id != RXE_VENDOR_ID;

	switch (rd->srv->cfg.rdma_keys) {
	case CONFIG_KEYS_AUTO:
		rd->mode = bounds ? PROTO_KEYS_WINDOW : PROTO_KEYS_REGION_MR;
		log_notice("rdma.keys = auto: %s (%s)", mode_name(rd->mode),
			   bounds ? "the device enforces type 2 window bounds" :
			   windows ? "Soft-RoCE does not enforce window bounds" :
			   "the device has no type 2 memory windows");
		return 0;
	case CONFIG_KEYS_WINDOW:
		if (!windows) {
			log_warn("rdma.keys = window: device %s has no type 2 memory windows; "
				 "serving TCP only", rd->devname);
			return -EOPNOTSUPP;
		}
		if (!bounds)
			log_warn("rdma.keys = window on Soft-RoCE: windows are tied to their "
				 "queue pair but their bounds are not checked, so a client "
				 "reaches the whole pool through any of its windows: for tests "
				 "only");
		rd->mode = PROTO_KEYS_WINDOW;
		return 0;
	case CONFIG_KEYS_REGION_MR:
		rd->mode = PROTO_KEYS_REGION_MR;
		return 0;
	}
	return -EINVAL;
}

/*
 * Window mode: each pool is registered once.  The MR gets no remote rights
 * of its own, only MW_BIND (and LOCAL_WRITE, which windows with remote write
 * need): its rkey, which every queue pair of the shared domain could use,
 * must open nothing; only the windows bound on a client's own queue pair do.
 */
static int register_pools(struct rdma *rd)
{
	struct server *srv = rd->srv;

	for (uint32_t i = 0; i < srv->npools; i++) {
		struct pool *pl = &srv->pools[i];

		rd->pool_mr[i] = ibv_reg_mr(rd->pd, pl->base, pl->size,
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
		if (!rd->pool_mr[i]) {
			log_warn("pool %s: ibv_reg_mr of %llu bytes: %s; serving TCP only",
				 pl->name, (unsigned long long)pl->size, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static int watch(struct rdma *rd, struct event **ev, int fd, event_callback_fn fn)
{
	int rc = set_nonblock(fd);

	if (rc < 0) {
		log_warn("fcntl(O_NONBLOCK): %s", strerror(-rc));
		return rc;
	}
	*ev = event_new(rd->srv->base, fd, EV_READ | EV_PERSIST, fn, rd);
	if (!*ev || event_add(*ev, NULL) < 0) {
		log_warn("cannot watch an RDMA fd");
		return -ENOMEM;
	}
	return 0;
}

static int bind_listener(struct rdma *rd)
{
	const char *addr = rd->srv->cfg.listen_rdma;
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

static int rdma_up(struct rdma *rd)
{
	struct ibv_device_attr attr;
	int rc;

	rd->cm_channel = rdma_create_event_channel();
	if (!rd->cm_channel) {
		log_notice("no RDMA here (rdma_create_event_channel: %s): serving TCP only "
			   "(HELLO says rdma_port 0)", strerror(errno));
		return -ENODEV;
	}
	if (rdma_create_id(rd->cm_channel, &rd->listen_id, rd, RDMA_PS_TCP)) {
		log_warn("rdma_create_id: %s; serving TCP only", strerror(errno));
		return -errno;
	}
	rc = bind_listener(rd);
	if (rc < 0)
		return rc;
	rc = pick_device(rd, rd->srv->cfg.rdma_device);
	if (rc < 0)
		return rc;
	rc = ibv_query_device(rd->ctx, &attr);
	if (rc) {
		log_warn("%s: ibv_query_device: %s; serving TCP only", rd->devname, strerror(rc));
		return -rc;
	}
	rd->max_rd_atom = min_u8((unsigned)attr.max_qp_rd_atom, 255);
	rd->max_init_rd_atom = min_u8((unsigned)attr.max_qp_init_rd_atom, 255);
	rd->access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	if (attr.atomic_cap != IBV_ATOMIC_NONE)
		rd->access |= IBV_ACCESS_REMOTE_ATOMIC;
	rc = pick_key_mode(rd, &attr);
	if (rc < 0)
		return rc;
	rd->pd = ibv_alloc_pd(rd->ctx);
	if (!rd->pd) {
		log_warn("%s: ibv_alloc_pd: %s; serving TCP only", rd->devname, strerror(errno));
		return -errno;
	}
	if (rd->mode == PROTO_KEYS_WINDOW) {
		rc = register_pools(rd);
		if (rc < 0)
			return rc;
	}
	rd->comp_channel = ibv_create_comp_channel(rd->ctx);
	if (!rd->comp_channel) {
		log_warn("%s: ibv_create_comp_channel: %s; serving TCP only", rd->devname,
			 strerror(errno));
		return -errno;
	}
	rc = watch(rd, &rd->ev_cm, rd->cm_channel->fd, on_cm_channel);
	if (rc == 0)
		rc = watch(rd, &rd->ev_comp, rd->comp_channel->fd, on_comp_event);
	if (rc == 0)
		rc = watch(rd, &rd->ev_async, rd->ctx->async_fd, on_async_event);
	if (rc < 0)
		return rc;
	if (rdma_listen(rd->listen_id, LISTEN_BACKLOG)) {
		log_warn("rdma_listen(%s): %s; serving TCP only", rd->srv->cfg.listen_rdma,
			 strerror(errno));
		return -errno;
	}
	rd->port = ntohs(rdma_get_src_port(rd->listen_id));
	return 0;
}

static void rdma_teardown(struct rdma *rd)
{
	int rc;

	if (rd->ev_cm)
		event_free(rd->ev_cm);
	if (rd->ev_comp)
		event_free(rd->ev_comp);
	if (rd->ev_async)
		event_free(rd->ev_async);
	if (rd->listen_id && rdma_destroy_id(rd->listen_id))
		log_err("rdma_destroy_id(listener): %s", strerror(errno));
	for (uint32_t i = 0; i < CONFIG_MAX_POOLS; i++) {
		rc = rd->pool_mr[i] ? ibv_dereg_mr(rd->pool_mr[i]) : 0;
		if (rc)
			log_err("ibv_dereg_mr(pool %u): %s", i, strerror(rc));
	}
	rc = rd->comp_channel ? ibv_destroy_comp_channel(rd->comp_channel) : 0;
	if (rc)
		log_err("ibv_destroy_comp_channel: %s", strerror(rc));
	rc = rd->pd ? ibv_dealloc_pd(rd->pd) : 0;
	if (rc)
		log_err("ibv_dealloc_pd: %s", strerror(rc));
	if (rd->cm_channel)
		rdma_destroy_event_channel(rd->cm_channel);
	if (rd->devices)
		rdma_free_devices(rd->devices);
	free(rd);
}

int rdma_open(struct server *srv)
{
	struct rdma *rd;

	srv->rdma = NULL;
	if (!srv->cfg.listen_rdma[0]) {
		log_notice("listen.rdma = \"\": RDMA off, serving TCP only");
		return 0;
	}
	rd = calloc(1, sizeof *rd);
	if (!rd)
		return -ENOMEM;
	rd->srv = srv;
	if (rdma_up(rd) < 0) {
		rdma_teardown(rd);
		return 0;
	}
	srv->rdma = rd;
	log_notice("RDMA: device %s, rdma_cm port %u (listen.rdma %s), keys %s",
		   rd->devname, rd->port, srv->cfg.listen_rdma, mode_name(rd->mode));
	return 0;
}

void rdma_close(struct server *srv)
{
	if (!srv->rdma)
		return;
	rdma_teardown(srv->rdma);
	srv->rdma = NULL;
}

uint16_t rdma_port(const struct rdma *rd)
{
	return rd ? rd->port : 0;
}

uint8_t rdma_key_mode(const struct rdma *rd)
{
	return rd ? rd->mode : PROTO_KEYS_NONE;
}

const char *rdma_key_mode_name(const struct rdma *rd)
{
	return mode_name(rdma_key_mode(rd));
}
