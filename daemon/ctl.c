/*
 * ctl.c - what each request does: a table from opcode to handler and the
 * rights it needs.  Handlers decode their payload with the shared codec, act
 * through session.c, and queue their reply; the framing is conn.c's business.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "conn.h"
#include "rdma.h"
#include "region.h"
#include "server.h"
#include "tenant.h"

typedef int (*handler_fn)(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len);

struct handler {
	handler_fn fn;
	bool admin; /* Unix socket with a trusted peer only */
};

static int do_hello(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct proto_hello_req req;
	struct proto_hello_rep rep;
	uint8_t out[PROTO_HELLO_REP_LEN];
	char why[160];
	int rc = proto_hello_req_decode(p, len, &req);

	if (rc < 0)
		return rc;
	if (req.client_version != PROTO_VERSION)
		return -EPROTO;
	rc = tenant_hello_allowed(c->srv, c->s, c->fd, why, sizeof why);
	if (rc < 0) {
		conn_fail(c, h, rc, why); /* logs it, once */
		return 0;
	}
	if (req.pid && !c->s->hello_done) {
		size_t used = strlen(c->s->peer);

		snprintf(c->s->peer + used, sizeof c->s->peer - used, " pid=%u", req.pid);
	}
	rc = session_hello(c->srv, c->s);
	if (rc < 0)
		return rc;
	rep.session_id = c->s->id;
	rep.server_version = PROTO_VERSION;
	rep.max_io = PROTO_MAX_IO;
	rep.attach_token = c->s->attach_token;
	rep.rdma_port = rdma_port(c->srv->rdma);
	rep.key_mode = rdma_key_mode(c->srv->rdma);
	rep.lease_ms = c->srv->cfg.lease_timeout_ms;
	conn_reply(c, h, out, proto_hello_rep_encode(out, &rep));
	return 0;
}

/*
 * The tenant handshake (tenant.c).  A refusal ends the connection: one
 * guess per connection, and one log line per refusal.
 */
static int do_auth_begin(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct proto_auth_begin_req req;
	struct proto_auth_begin_rep rep;
	uint8_t out[PROTO_AUTH_BEGIN_REP_LEN];
	char why[160];
	int rc = proto_auth_begin_req_decode(p, len, &req);

	if (rc < 0)
		return rc;
	rc = tenant_auth_begin(c->srv, c->s, &req, &rep, why, sizeof why);
	if (rc == -EACCES) {
		conn_fail(c, h, rc, why);
		return 0;
	}
	if (rc < 0)
		return rc;
	conn_reply(c, h, out, proto_auth_begin_rep_encode(out, &rep));
	return 0;
}

static int do_auth(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	uint8_t mac[PROTO_MAC_LEN], server_mac[PROTO_MAC_LEN];
	uint8_t out[PROTO_AUTH_REP_LEN];
	char why[160];
	int rc = proto_auth_req_decode(p, len, mac);

	if (rc < 0)
		return rc;
	rc = tenant_auth_finish(c->srv, c->s, mac, server_mac, why, sizeof why);
	if (rc < 0) {
		conn_fail(c, h, rc, why);
		return 0;
	}
	/* rmemctl clients shows the tenant with the peer. */
	snprintf(c->s->peer + strlen(c->s->peer), sizeof c->s->peer - strlen(c->s->peer),
		 " tenant=%s", c->s->tenant->name);
	conn_reply(c, h, out, proto_auth_rep_encode(out, server_mac));
	return 0;
}

static int do_alloc(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct proto_alloc_req req;
	struct proto_region reg;
	const struct region *r;
	uint8_t out[PROTO_ALLOC_REP_LEN];
	int rc = proto_alloc_req_decode(p, len, &req);

	if (rc < 0)
		return rc;
	rc = session_alloc(c->srv, c->s, req.size, req.flags, &r);
	if (rc < 0)
		return rc;
	reg.id = r->id;
	reg.addr = (uint64_t)(uintptr_t)(c->srv->pools[r->pool].base + r->offset);
	reg.length = r->length;
	reg.rkey = r->key;
	reg.flags = 0;
	conn_reply(c, h, out, proto_alloc_rep_encode(out, &reg));
	return 0;
}

static int do_free(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct proto_free_req req;
	int rc = proto_free_req_decode(p, len, &req);

	if (rc < 0)
		return rc;
	rc = session_free(c->srv, c->s, req.id, req.rkey);
	if (rc < 0)
		return rc;
	conn_reply_status(c, h, 0);
	return 0;
}

static int do_read(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct proto_io_req req;
	uint8_t *where;
	int rc = proto_io_req_decode(p, len, PROTO_OP_READ, &req);

	if (rc < 0)
		return rc;
	rc = session_io(c->srv, c->s, req.id, req.rkey, req.offset, req.length, &where);
	if (rc < 0)
		return rc;
	conn_reply_data(c, h, where, req.length);
	return 0;
}

/*
 * CAS and FAA on the TCP path.  The loop thread serves one request at a time,
 * so each is atomic against every other client of the stream path.
 */
static int do_atomic(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct proto_atomic_req req;
	uint8_t out[PROTO_ATOMIC_REP_LEN];
	uint8_t *where;
	uint64_t old;
	int rc = proto_atomic_req_decode(p, len, h->opcode, &req);

	if (rc < 0)
		return rc;
	rc = session_io(c->srv, c->s, req.id, req.rkey, req.offset, sizeof old, &where);
	if (rc < 0)
		return rc;
	if (req.offset % sizeof old)
		return -EINVAL;
	/* Regions start on the pool's alignment (>= 8), so where is aligned. */
	memcpy(&old, where, sizeof old);
	if (h->opcode == PROTO_OP_FAA) {
		uint64_t sum = old + req.operand;

		memcpy(where, &sum, sizeof sum);
	} else if (old == req.operand) {
		memcpy(where, &req.desired, sizeof req.desired);
	}
	conn_reply(c, h, out, proto_atomic_rep_encode(out, old));
	return 0;
}

static int do_ping(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	(void)p;
	if (proto_empty_decode(len) < 0)
		return -EBADMSG;
	conn_reply_status(c, h, 0);
	return 0;
}

static int do_stats(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct server *srv = c->srv;
	struct proto_stats st = { { 0 } };
	uint8_t out[PROTO_MAX_CTL];

	(void)p;
	if (proto_empty_decode(len) < 0)
		return -EBADMSG;
	for (uint32_t i = 0; i < srv->npools; i++) {
		struct alloc_stats a;

		alloc_get_stats(srv->pools[i].alloc, &a);
		st.v[PROTO_STAT_POOL_BYTES] += a.total;
		if (a.largest_free > st.v[PROTO_STAT_LARGEST_FREE])
			st.v[PROTO_STAT_LARGEST_FREE] = a.largest_free;
	}
	st.v[PROTO_STAT_USED_BYTES] = srv->used_bytes;
	st.v[PROTO_STAT_FREE_BYTES] = st.v[PROTO_STAT_POOL_BYTES] - srv->used_bytes;
	st.v[PROTO_STAT_REGIONS] = region_count(srv->regions);
	st.v[PROTO_STAT_CLIENTS] = srv->clients;
	st.v[PROTO_STAT_PEAK_USED] = srv->peak_used;
	st.v[PROTO_STAT_ALLOCS] = srv->allocs;
	st.v[PROTO_STAT_FREES] = srv->frees;
	st.v[PROTO_STAT_KEY_MODE] = rdma_key_mode(srv->rdma);
	conn_reply(c, h, out, proto_stats_rep_encode(out, &st));
	return 0;
}

static int do_pools(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct server *srv = c->srv;
	uint8_t out[PROTO_MAX_CTL];
	size_t n = srv->npools, at;

	(void)p;
	if (proto_empty_decode(len) < 0)
		return -EBADMSG;
	if (n > PROTO_LIST_MAX(PROTO_POOL_REC_LEN))
		n = PROTO_LIST_MAX(PROTO_POOL_REC_LEN);
	at = proto_list_hdr_encode(out, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		struct proto_pool_rec rec = { .name = { 0 } };
		struct alloc_stats a;

		alloc_get_stats(srv->pools[i].alloc, &a);
		snprintf(rec.name, sizeof rec.name, "%s", srv->pools[i].name);
		rec.bytes = a.total;
		rec.used = a.used;
		rec.largest_free = a.largest_free;
		rec.regions = a.live;
		rec.page_size = srv->pools[i].page_size;
		rec.alignment = (uint32_t)alloc_alignment(srv->pools[i].alloc);
		at += proto_pool_rec_encode(out + at, &rec);
	}
	conn_reply(c, h, out, at);
	return 0;
}

static uint32_t list_limit(uint32_t asked, size_t reclen)
{
	uint32_t cap = (uint32_t)PROTO_LIST_MAX(reclen);

	return asked && asked < cap ? asked : cap;
}

static int do_regions(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct server *srv = c->srv;
	struct proto_list_req req;
	uint8_t out[PROTO_MAX_CTL];
	uint32_t n = 0, max;
	size_t at = PROTO_LIST_HDR_LEN;
	int rc = proto_list_req_decode(p, len, &req);

	if (rc < 0)
		return rc;
	max = list_limit(req.max, PROTO_REGION_REC_LEN);
	for (struct region *r = region_next_after(srv->regions, req.after); r && n < max;
	     r = region_next(srv->regions, r), n++) {
		struct proto_region_rec rec = {
			.id = r->id,
			.addr = (uint64_t)(uintptr_t)(srv->pools[r->pool].base + r->offset),
			.length = r->length,
			.client_id = r->owner,
			.pool = r->pool,
		};
		at += proto_region_rec_encode(out + at, &rec);
	}
	proto_list_hdr_encode(out, n);
	conn_reply(c, h, out, at);
	return 0;
}

/* An attached queue pair carries the session's data: say so. */
static const char *transport_name(const struct session *s)
{
	if (s->rdma)
		return "rdma";
	return s->transport == SESSION_UNIX ? "unix" : "tcp";
}

static int do_clients(struct conn *c, const struct proto_hdr *h, const uint8_t *p, size_t len)
{
	struct server *srv = c->srv;
	struct proto_list_req req;
	uint8_t out[PROTO_MAX_CTL];
	uint32_t n = 0, max;
	size_t at = PROTO_LIST_HDR_LEN;
	uint64_t now = session_now_ns();
	int rc = proto_list_req_decode(p, len, &req);

	if (rc < 0)
		return rc;
	max = list_limit(req.max, PROTO_CLIENT_REC_LEN);
	for (struct session *s = srv->sessions_first; s && n < max; s = s->next) {
		struct proto_client_rec rec = { .id = 0 };

		if (s->id <= req.after || !s->hello_done)
			continue;
		rec.id = s->id;
		rec.regions = s->nregions;
		rec.used = s->used_bytes;
		rec.connected_ms = (now - s->started_ns) / 1000000;
		rec.idle_ms = (now - s->last_ns) / 1000000;
		snprintf(rec.transport, sizeof rec.transport, "%s", transport_name(s));
		snprintf(rec.peer, sizeof rec.peer, "%s", s->peer);
		at += proto_client_rec_encode(out + at, &rec);
		n++;
	}
	proto_list_hdr_encode(out, n);
	conn_reply(c, h, out, at);
	return 0;
}

static const struct handler handlers[PROTO_OP_COUNT] = {
	[PROTO_OP_HELLO]   = { do_hello,   false },
	[PROTO_OP_ALLOC]   = { do_alloc,   false },
	[PROTO_OP_FREE]    = { do_free,    false },
	[PROTO_OP_READ]    = { do_read,    false },
	[PROTO_OP_STATS]   = { do_stats,   false },
	[PROTO_OP_PING]    = { do_ping,    false },
	[PROTO_OP_POOLS]   = { do_pools,   true },
	[PROTO_OP_REGIONS] = { do_regions, true },
	[PROTO_OP_CLIENTS] = { do_clients, true },
	[PROTO_OP_CAS]     = { do_atomic,  false },
	[PROTO_OP_FAA]     = { do_atomic,  false },
	[PROTO_OP_AUTH_BEGIN] = { do_auth_begin, false },
	[PROTO_OP_AUTH]    = { do_auth,    false },
};

void server_end_session(struct server *srv, struct session *s, int status, const char *why)
{
	for (struct conn *c = srv->conns; c; c = c->next) {
		if (c->s != s || c->dead || c->closing)
			continue;
		conn_fail(c, NULL, status, why);
		/* conn_fail only marks it; its own callback sends and closes. */
		event_active(c->ev_write, EV_WRITE, 0);
		return;
	}
}

int ctl_dispatch(struct conn *c, const struct proto_hdr *h, const uint8_t *payload, size_t len)
{
	const struct handler *hd;

	/* proto_hdr_decode already refused unknown opcodes; WRITE never gets here. */
	if (h->opcode >= PROTO_OP_COUNT || !handlers[h->opcode].fn)
		return -EBADMSG;
	hd = &handlers[h->opcode];
	if (hd->admin && !c->s->admin)
		return -EACCES;
	return hd->fn(c, h, payload, len);
}
