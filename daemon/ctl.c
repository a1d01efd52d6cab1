/*
 * ctl.c - see ctl.h: a table from opcode to handler and the rights it needs.
 * Handlers decode their payload with the shared codec, act through
 * session.c and fill the reply; the framing is conn.c's business.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "config_types.h"
#include "ctl.h"
#include "log.h"
#include "names.h"
#include "region.h"
#include "resume.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

typedef void (*handler_fn)(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep);

struct handler {
	handler_fn fn;      /* NULL: not a control request (WRITE) */
	bool before_hello;  /* may come before HELLO (HELLO and the tenant handshake) */
	bool admin;         /* Unix socket with a trusted peer only */
};

/* ---- filling a reply ------------------------------------------------------- */

static void reply_status(struct ctl_reply *rep, int status)
{
	rep->outcome = CTL_REPLY;
	rep->status = status;
}

static void reply_close(struct ctl_reply *rep, int status, const char *why)
{
	rep->outcome = CTL_REPLY_AND_CLOSE;
	rep->status = status;
	if (why != rep->why)
		snprintf(rep->why, sizeof rep->why, "%s", why);
}

/* A payload the codec refused (-EBADMSG) ends the connection: the peer does
 * not speak our protocol.  Any other decode error is an ordinary status. */
static bool decoded(int rc, struct ctl_reply *rep)
{
	if (rc == -EBADMSG)
		reply_close(rep, rc, "malformed request payload");
	else if (rc < 0)
		reply_status(rep, rc);
	return rc >= 0;
}

/* An encoded payload of len bytes, status 0. */
static void reply_payload(struct ctl_reply *rep, size_t len)
{
	reply_status(rep, 0);
	rep->len = len;
}

/* ---- counting (counters.h): the handlers see each answer ------------------------ */

static void count_auth_failure(struct server *srv, enum counters_auth why)
{
	srv->counters.auth_failures[why]++;
}

/* An ALLOC or CREATE answered with rc < 0 (not one that waits: it counts
 * when it is answered). */
static void count_alloc_failure(struct server *srv, int rc)
{
	srv->counters.alloc_failures[counters_errno_of(rc)]++;
}

/* ---- the session ------------------------------------------------------------- */

/* The HELLO reply of s (RESUME's too, always with the resume token). */
static void reply_hello(struct server *srv, const struct session *s, bool resumable,
			struct ctl_reply *rep)
{
	struct proto_hello_rep hr = { 0 };

	hr.session_id = s->id;
	hr.server_version = PROTO_VERSION;
	hr.max_io = PROTO_MAX_IO;
	hr.attach_token = s->attach_token;
	hr.rdma_port = srv->nic_port;
	hr.key_mode = srv->key_mode;
	hr.lease_ms = srv->cfg.lease_timeout_ms;
	hr.resumable = resumable;
	_Static_assert(sizeof hr.resume_token == sizeof s->resume_token, "resume token");
	if (resumable)
		memcpy(hr.resume_token, s->resume_token, sizeof hr.resume_token);
	reply_payload(rep, proto_hello_rep_encode(rep->payload, &hr));
}

static void note_pid(struct session *s, uint32_t pid)
{
	if (pid && !s->hello_done) {
		size_t used = strlen(s->peer);

		snprintf(s->peer + used, sizeof s->peer - used, " pid=%u", pid);
	}
}

static void do_hello(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct session *s = q->s;
	struct proto_hello_req req;
	int rc;

	if (!decoded(proto_hello_req_decode(q->payload, q->len, &req), rep))
		return;
	if (req.client_version != PROTO_VERSION)
		return reply_status(rep, -EPROTO);
	rc = tenant_hello_allowed(srv, s->tenant, s->transport == SESSION_UNIX, q->fd, rep->why,
				  sizeof rep->why);
	if (rc < 0) {
		count_auth_failure(srv, COUNTERS_AUTH_ANONYMOUS);
		return reply_close(rep, rc, rep->why);
	}
	note_pid(s, req.pid);
	rc = session_hello(srv, s);
	if (rc < 0)
		return reply_status(rep, rc);
	reply_hello(srv, s, req.features & PROTO_HELLO_F_RESUMABLE, rep);
}

/*
 * RESUME (docs/protocol.md 7.13): the checks in the documented order; a
 * refusal with a status changes nothing and the connection may go on to
 * HELLO.  The token is compared without an early exit.
 */
static void do_resume(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct session *s = q->s, *from;
	struct proto_resume_req req;
	volatile uint8_t diff = 0;
	int rc;

	if (!decoded(proto_resume_req_decode(q->payload, q->len, &req), rep))
		return;
	if (s->hello_done)
		return reply_status(rep, -EINVAL);
	if (req.client_version != PROTO_VERSION)
		return reply_status(rep, -EPROTO);
	rc = tenant_hello_allowed(srv, s->tenant, s->transport == SESSION_UNIX, q->fd, rep->why,
				  sizeof rep->why);
	if (rc < 0)
		return reply_close(rep, rc, rep->why);
	from = resume_find(srv, req.session_id);
	if (!from)
		return reply_status(rep, -ENOENT);
	for (size_t i = 0; i < sizeof req.resume_token; i++)
		diff |= (uint8_t)(from->resume_token[i] ^ req.resume_token[i]);
	if (diff || from->tenant != s->tenant) {
		log_warn("client %s: RESUME of session %llu refused: wrong token or tenant", s->peer,
			 (unsigned long long)req.session_id);
		return reply_status(rep, -EACCES);
	}
	note_pid(s, req.pid);
	rc = resume_session(srv, s, from);
	if (rc < 0)
		return reply_status(rep, rc);
	reply_hello(srv, s, true, rep);
}

/*
 * The tenant handshake (tenant.c).  A refusal ends the connection: one
 * guess per connection, and one log line per refusal.
 */
static void do_auth_begin(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_auth_begin_req req;
	struct proto_auth_begin_rep ar;
	int rc;

	if (!decoded(proto_auth_begin_req_decode(q->payload, q->len, &req), rep))
		return;
	if (q->s->hello_done || (q->s->tenant && !q->s->cert_tenant))
		return reply_status(rep, -EINVAL);
	/* A certificate proved one tenant: HMAC may prove it again, not
	 * another. */
	if (q->s->cert_tenant && strncmp(req.tenant, q->s->tenant->name, sizeof req.tenant)) {
		count_auth_failure(srv, COUNTERS_AUTH_TENANT);
		snprintf(rep->why, sizeof rep->why, "AUTH as another tenant than the client "
			 "certificate's (%s)", q->s->tenant->name);
		return reply_close(rep, -EACCES, rep->why);
	}
	rc = tenant_auth_begin(srv, &q->s->auth, q->s->id, &req, &ar, rep->why, sizeof rep->why);
	if (rc == -EACCES) {
		count_auth_failure(srv, COUNTERS_AUTH_TENANT);
		return reply_close(rep, rc, rep->why);
	}
	if (rc < 0)
		return reply_status(rep, rc);
	reply_payload(rep, proto_auth_begin_rep_encode(rep->payload, &ar));
}

static void do_auth(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	uint8_t mac[PROTO_MAC_LEN], server_mac[PROTO_MAC_LEN];
	struct session *s = q->s;
	int rc;

	if (!decoded(proto_auth_req_decode(q->payload, q->len, mac), rep))
		return;
	rc = tenant_auth_finish(&s->auth, s->id, mac, server_mac, &s->tenant, rep->why,
				sizeof rep->why);
	if (rc < 0) {
		count_auth_failure(srv, COUNTERS_AUTH_MAC);
		return reply_close(rep, rc, rep->why);
	}
	/* rmemctl clients shows the tenant with the peer. */
	snprintf(s->peer + strlen(s->peer), sizeof s->peer - strlen(s->peer),
		 " tenant=%s", s->tenant->name);
	reply_payload(rep, proto_auth_rep_encode(rep->payload, server_mac));
}

/* ---- regions ------------------------------------------------------------------ */

/* The ALLOC reply for r (CREATE and OPEN's too, with the handle's access). */
static void reply_region(struct server *srv, const struct region *r, uint32_t flags,
			 struct ctl_reply *rep)
{
	struct proto_region reg = {
		.id = r->id,
		.addr = (uint64_t)(uintptr_t)(srv->pools[r->pool].base + r->offset),
		.length = r->length,
		.rkey = r->key,
		.flags = flags,
	};

	reply_payload(rep, proto_alloc_rep_encode(rep->payload, &reg));
}

/* Whether an ALLOC or CREATE of size that failed with rc waits for the
 * quarantine (see below); fills rep when it does. */
static bool wait_for_quarantine(struct server *srv, const struct ctl_req *q, uint64_t size,
				int rc, struct ctl_reply *rep)
{
	uint64_t due;

	if ((rc != -ENOMEM && rc != -EDQUOT) || !q->may_wait ||
	    !session_quarantine_may_help(srv, q->s, size, rc, &due))
		return false;
	rep->outcome = CTL_WAIT;
	rep->wait_until_ns = due;
	return true;
}

/*
 * An ALLOC that fails for want of room (or of its tenant's quota) while
 * freed ranges sit in the quarantine waits for them (rmem_free promises the
 * bytes back), at most
 * until the wait is over (conn.c clears may_wait): no sleep in the loop,
 * the connection parks the request.
 */
static void do_alloc(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_alloc_req req;
	const struct region *r;
	int rc;

	if (!decoded(proto_alloc_req_decode(q->payload, q->len, &req), rep))
		return;
	if (srv->draining)
		return reply_status(rep, -ESHUTDOWN);
	rc = session_alloc(srv, q->s, req.size, req.flags, &r);
	if (wait_for_quarantine(srv, q, req.size, rc, rep))
		return;
	if (rc < 0) {
		count_alloc_failure(srv, rc);
		return reply_status(rep, rc);
	}
	reply_region(srv, r, 0, rep);
}

/* REKEY (docs/protocol.md 7.13): a region's new key, its current address. */
static void do_rekey(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_rekey_req req;
	const struct name_handle *h;
	const struct region *r;
	int rc;

	if (!decoded(proto_rekey_req_decode(q->payload, q->len, &req), rep))
		return;
	rc = resume_rekey(srv, q->s, req.id, &r);
	if (rc < 0)
		return reply_status(rep, rc);
	h = r->named ? names_handle_find(srv->names, r->id) : NULL;
	reply_region(srv, r, h ? h->access : 0, rep);
}

static void do_free(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_free_req req;

	if (!decoded(proto_free_req_decode(q->payload, q->len, &req), rep))
		return;
	reply_status(rep, session_free(srv, q->s, req.id, req.rkey));
}

static void do_read(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_io_req req;
	uint8_t *where;
	int rc;

	if (!decoded(proto_io_req_decode(q->payload, q->len, PROTO_OP_READ, &req), rep))
		return;
	rc = session_io(srv, q->s, req.id, req.rkey, PROTO_ACCESS_READ, req.offset, req.length,
			&where, q->hold);
	if (rc < 0)
		return reply_status(rep, rc);
	reply_status(rep, 0);
	rep->data = where;
	rep->data_len = req.length;
}

/*
 * CAS and FAA on the TCP path.  The loop thread serves one request at a time,
 * so each is atomic against every other client of the stream path.
 */
static void do_atomic(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_atomic_req req;
	uint8_t *where;
	uint64_t old;
	int rc;

	if (!decoded(proto_atomic_req_decode(q->payload, q->len, q->h->opcode, &req), rep))
		return;
	/* No hold: the bytes are touched here, before anything else runs. */
	rc = session_io(srv, q->s, req.id, req.rkey, PROTO_ACCESS_WRITE, req.offset, sizeof old,
			&where, NULL);
	if (rc < 0)
		return reply_status(rep, rc);
	if (req.offset % sizeof old)
		return reply_status(rep, -EINVAL);
	/* Regions start on the pool's alignment (>= 8), so where is aligned. */
	memcpy(&old, where, sizeof old);
	if (q->h->opcode == PROTO_OP_FAA) {
		uint64_t sum = old + req.operand;

		memcpy(where, &sum, sizeof sum);
	} else if (old == req.operand) {
		memcpy(where, &req.desired, sizeof req.desired);
	}
	reply_payload(rep, proto_atomic_rep_encode(rep->payload, old));
}

/* A listing's reply being written: NAMES, REGIONS, CLIENTS. */
struct listing {
	struct proto_list_req req;
	uint32_t n, max;	/* records written, and how many of them fit */
	size_t at;		/* the payload's bytes so far, the header's first */
};

/* Decodes the request into l, for records of reclen bytes: as many as it
 * asks for (0: no limit) and fit in a reply.  false when it is refused. */
static bool list_begin(struct listing *l, const struct ctl_req *q, struct ctl_reply *rep,
		       size_t reclen)
{
	uint32_t cap = (uint32_t)PROTO_LIST_MAX(reclen);

	if (!decoded(proto_list_req_decode(q->payload, q->len, &l->req), rep))
		return false;
	l->n = 0;
	l->max = l->req.max && l->req.max < cap ? l->req.max : cap;
	l->at = PROTO_LIST_HDR_LEN;
	return true;
}

/* The header for the l->n records written: the reply is ready. */
static void list_end(const struct listing *l, struct ctl_reply *rep)
{
	proto_list_hdr_encode(rep->payload, l->n);
	reply_payload(rep, l->at);
}

/* ---- named regions (session.c, names.c) ------------------------------------- */

/* CREATE and OPEN: a region by name.  CREATE allocates as ALLOC does, and
 * waits for the quarantine alike; OPEN's handle has the access it asks. */
static void do_create_open(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	const bool create = q->h->opcode == PROTO_OP_CREATE;
	struct proto_name_req req;
	const struct region *r;
	int rc;

	if (!decoded(proto_name_req_decode(q->payload, q->len, q->h->opcode, &req), rep))
		return;
	if (!create) {
		uint32_t granted = 0;

		rc = session_open(srv, q->s, req.name, req.name_len, req.flags, &r, &granted);
		if (rc < 0)
			return reply_status(rep, rc);
		return reply_region(srv, r, granted, rep);
	}
	/* Draining (server.h): no new name here, a piece's neither, so the
	 * drain's own moves never land back on it.  OPEN goes on: the names
	 * it holds are read until they move. */
	if (srv->draining)
		return reply_status(rep, -ESHUTDOWN);
	rc = session_create(srv, q->s, req.name, req.name_len, req.size, req.flags, &r);
	if (wait_for_quarantine(srv, q, req.size, rc, rep))
		return;
	if (rc < 0) {
		count_alloc_failure(srv, rc);
		return reply_status(rep, rc);
	}
	reply_region(srv, r, PROTO_ACCESS_READ | PROTO_ACCESS_WRITE, rep);
}

/*
 * UNLINK with PROTO_UNLINK_NS (admin): req's name is "TENANT:NAME"; the
 * first ':' splits them, as tenant names never hold one.  "" is the
 * anonymous namespace.
 */
static int unlink_ns(struct server *srv, const struct session *s, const struct proto_name_req *req)
{
	const char *colon = memchr(req->name, ':', req->name_len);
	const struct config_tenant *ns = NULL;
	size_t tlen;

	if (!s->admin)
		return -EACCES;
	if (!colon)
		return -EINVAL;
	tlen = (size_t)(colon - req->name);
	if (tlen) {
		ns = tenant_find(srv, req->name, tlen);
		if (!ns)
			return -ENOENT;
	}
	return session_unlink_ns(srv, ns, colon + 1, req->name_len - tlen - 1,
				 req->flags & ~PROTO_UNLINK_NS);
}

static void do_unlink(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_name_req req;

	if (!decoded(proto_name_req_decode(q->payload, q->len, PROTO_OP_UNLINK, &req), rep))
		return;
	if (req.flags & PROTO_UNLINK_NS)
		return reply_status(rep, unlink_ns(srv, q->s, &req));
	/* The codec allows names past PROTO_NAME_MAX with PROTO_UNLINK_NS only. */
	reply_status(rep, session_unlink(srv, q->s, req.name, req.name_len, req.flags));
}

static void do_names(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	uint64_t now = (uint64_t)clock_mono_ns();
	struct listing l;

	if (!list_begin(&l, q, rep, PROTO_NAME_REC_LEN))
		return;
	if (!srv->names)
		return list_end(&l, rep);
	for (struct name_obj *o = names_next_after(srv->names, l.req.after); o && l.n < l.max;
	     o = names_next(o), l.n++) {
		struct proto_name_rec rec = {
			.id = o->id,
			.length = o->length,
			.age_ms = (now - o->created_ns) / 1000000,
			.handles = o->handles,
			.flags = (o->unlinked ? PROTO_NAME_F_UNLINKED : 0) |
				 (o->piece ? PROTO_NAME_F_PIECE : 0),
		};

		snprintf(rec.tenant, sizeof rec.tenant, "%s", o->ns ? o->ns->name : "");
		memcpy(rec.name, o->name, o->name_len);
		l.at += proto_name_rec_encode(rep->payload + l.at, &rec);
	}
	list_end(&l, rep);
}

/* ---- figures and listings ---------------------------------------------------- */

static void do_ping(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	(void)srv;
	if (decoded(proto_empty_decode(q->len) < 0 ? -EBADMSG : 0, rep))
		reply_status(rep, 0);
}

static void do_stats(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	struct proto_stats st = { { 0 } };

	if (!decoded(proto_empty_decode(q->len) < 0 ? -EBADMSG : 0, rep))
		return;
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
	st.v[PROTO_STAT_KEY_MODE] = srv->key_mode;
	st.v[PROTO_STAT_SLOTS_USED] = tenant_slots_used(srv);
	st.v[PROTO_STAT_SLOTS_TOTAL] = tenant_slots_total(srv);
	reply_payload(rep, proto_stats_rep_encode(rep->payload, &st));
}

static void do_pools(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	uint8_t *out = rep->payload;
	size_t n = srv->npools, at;

	if (!decoded(proto_empty_decode(q->len) < 0 ? -EBADMSG : 0, rep))
		return;
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
	reply_payload(rep, at);
}

/* A named handle's access, name and name id in a REGIONS record. */
static void region_name(const struct server *srv, const struct region *r,
			struct proto_region_rec *rec)
{
	const struct name_handle *h = r->named && srv->names ?
		names_handle_find(srv->names, r->id) : NULL;

	if (!h)
		return;
	rec->flags = h->access | (h->obj->unlinked ? PROTO_REGION_F_UNLINKED : 0);
	rec->name_id = h->obj->id;
	memcpy(rec->name, h->obj->name, h->obj->name_len);
	rec->name[h->obj->name_len] = '\0';
}

static void do_regions(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	const bool named = q->h->opcode == PROTO_OP_REGIONS_NAMED;
	struct listing l;

	if (!list_begin(&l, q, rep, named ? PROTO_REGION_NAMED_REC_LEN : PROTO_REGION_REC_LEN))
		return;
	for (struct region *r = region_next_after(srv->regions, l.req.after); r && l.n < l.max;
	     r = region_next(srv->regions, r), l.n++) {
		struct proto_region_rec rec = {
			.id = r->id,
			.addr = (uint64_t)(uintptr_t)(srv->pools[r->pool].base + r->offset),
			.length = r->length,
			.client_id = r->owner,
			.pool = r->pool,
		};

		if (!named) {
			l.at += proto_region_rec_encode(rep->payload + l.at, &rec);
			continue;
		}
		region_name(srv, r, &rec);
		l.at += proto_region_named_rec_encode(rep->payload + l.at, &rec);
	}
	list_end(&l, rep);
}

/* An attached queue pair carries the session's data: say so. */
static const char *transport_name(const struct session *s)
{
	if (s->nic)
		return "rdma";
	if (s->tls_kind)
		return s->tls_kind;
	return s->transport == SESSION_UNIX ? "unix" : "tcp";
}

static void do_clients(struct server *srv, const struct ctl_req *q, struct ctl_reply *rep)
{
	uint64_t now = (uint64_t)clock_mono_ns();
	struct listing l;

	if (!list_begin(&l, q, rep, PROTO_CLIENT_REC_LEN))
		return;
	for (struct session *s = srv->sessions_first; s && l.n < l.max; s = s->next) {
		struct proto_client_rec rec = { .id = 0 };

		if (s->id <= l.req.after || !s->hello_done)
			continue;
		rec.id = s->id;
		rec.regions = s->nregions;
		rec.used = s->used_bytes;
		rec.connected_ms = (now - s->started_ns) / 1000000;
		rec.idle_ms = (now - s->last_ns) / 1000000;
		snprintf(rec.transport, sizeof rec.transport, "%s", transport_name(s));
		snprintf(rec.peer, sizeof rec.peer, "%s", s->peer);
		l.at += proto_client_rec_encode(rep->payload + l.at, &rec);
		l.n++;
	}
	list_end(&l, rep);
}

/* ---- the table and the one place that checks it ------------------------------- */

static const struct handler handlers[PROTO_OP_COUNT] = {
	[PROTO_OP_HELLO]   = { .fn = do_hello,   .before_hello = true },
	[PROTO_OP_ALLOC]   = { .fn = do_alloc },
	[PROTO_OP_FREE]    = { .fn = do_free },
	[PROTO_OP_READ]    = { .fn = do_read },
	[PROTO_OP_WRITE]   = { .fn = NULL }, /* its data streams through conn.c */
	[PROTO_OP_STATS]   = { .fn = do_stats },
	[PROTO_OP_PING]    = { .fn = do_ping },
	[PROTO_OP_POOLS]   = { .fn = do_pools,   .admin = true },
	[PROTO_OP_REGIONS] = { .fn = do_regions, .admin = true },
	[PROTO_OP_CLIENTS] = { .fn = do_clients, .admin = true },
	[PROTO_OP_CAS]     = { .fn = do_atomic },
	[PROTO_OP_FAA]     = { .fn = do_atomic },
	[PROTO_OP_AUTH_BEGIN] = { .fn = do_auth_begin, .before_hello = true },
	[PROTO_OP_AUTH]    = { .fn = do_auth,    .before_hello = true },
	[PROTO_OP_CREATE]  = { .fn = do_create_open },
	[PROTO_OP_OPEN]    = { .fn = do_create_open },
	[PROTO_OP_UNLINK]  = { .fn = do_unlink },
	[PROTO_OP_NAMES]   = { .fn = do_names,   .admin = true },
	[PROTO_OP_RESUME]  = { .fn = do_resume,  .before_hello = true },
	[PROTO_OP_REKEY]   = { .fn = do_rekey },
	[PROTO_OP_REGIONS_NAMED] = { .fn = do_regions, .admin = true },
};

/*
 * The one check of the table's rights: false, with the refusal in *rep,
 * when s may not send opcode now.  Before HELLO the refusal closes the
 * connection (the peer does not follow the protocol); a missing admin right
 * is an ordinary status.
 */
static bool permitted(const struct session *s, uint16_t opcode, struct ctl_reply *rep)
{
	reply_status(rep, 0);
	/* proto_hdr_decode already refused unknown opcodes. */
	if (opcode >= PROTO_OP_COUNT)
		reply_close(rep, -EBADMSG, "malformed request payload");
	else if (!s->hello_done && !handlers[opcode].before_hello)
		reply_close(rep, -EPROTO, "request before HELLO");
	else if (handlers[opcode].admin && !s->admin)
		reply_status(rep, -EACCES);
	return rep->status == 0;
}

enum ctl_outcome ctl_admit(const struct session *s, uint16_t opcode, struct ctl_reply *rep)
{
	/* A missing admin right is answered once the payload is read. */
	if (!permitted(s, opcode, rep) && rep->outcome == CTL_REPLY)
		reply_status(rep, 0);
	return rep->outcome;
}

enum ctl_outcome ctl_dispatch(struct server *srv, const struct ctl_req *req, struct ctl_reply *rep)
{
	const struct handler *hd;

	rep->len = rep->data_len = 0;
	rep->data = NULL;
	rep->why[0] = '\0';
	if (!permitted(req->s, req->h->opcode, rep))
		return rep->outcome;
	hd = &handlers[req->h->opcode];
	/* An opcode the codec knows and this daemon does not serve (WRITE
	 * never comes here: its data streams through conn.c). */
	if (!hd->fn)
		reply_status(rep, -EOPNOTSUPP);
	else
		hd->fn(srv, req, rep);
	return rep->outcome;
}
