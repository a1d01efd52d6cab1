/*
 * session.c - see session.h.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "keys.h"
#include "log.h"
#include "names.h"
#include "quarantine.h"
#include "randbytes.h"
#include "server.h"
#include "session.h"
#include "slots.h"
#include "tenant.h"

/* ---- the state memfd (slots.h): each change recorded before its reply ---------- */

static const char *tenant_name(const struct config_tenant *t)
{
	return t ? t->name : "";
}

static int record_session(struct server *srv, const struct session *s)
{
	struct state_slot r = { .type = STATE_SESSION };

	r.u.session.id = s->id;
	snprintf(r.u.session.tenant, sizeof r.u.session.tenant, "%s", tenant_name(s->tenant));
	memcpy(r.u.session.token, s->resume_token, sizeof r.u.session.token);
	return slots_put(srv->slots, &r);
}

/* Each record below is charged to a tenant's share of slots before it is
 * written (tenant.h), and given back where its slot is freed. */
static int record_region(struct server *srv, const struct session *s, const struct region *g)
{
	struct state_slot r = { .type = STATE_REGION };
	int rc = tenant_slots_take(srv, s->tenant, 1);

	if (rc < 0)
		return rc;
	r.u.region.id = g->id;
	r.u.region.session = s->id;
	r.u.region.pool = g->pool;
	r.u.region.offset = g->offset;
	r.u.region.length = g->length;
	rc = slots_put(srv->slots, &r);
	if (rc < 0)
		tenant_slots_give(srv, s->tenant, 1);
	return rc;
}

/* A named object: its range, then its name (a crash between leaves an
 * object without name or handle, which a restore frees).  Both slots count
 * against its creator's tenant until the object is freed. */
static int record_object(struct server *srv, const struct name_obj *o)
{
	struct state_slot r = { .type = STATE_OBJECT };
	int rc = tenant_slots_take(srv, o->charged, 2);

	if (rc < 0)
		return rc;
	r.u.object.id = o->id;
	r.u.object.pool = o->pool;
	r.u.object.offset = o->offset;
	r.u.object.length = o->length;
	snprintf(r.u.object.ns, sizeof r.u.object.ns, "%s", tenant_name(o->ns));
	snprintf(r.u.object.charged, sizeof r.u.object.charged, "%s", tenant_name(o->charged));
	rc = slots_put(srv->slots, &r);
	if (rc < 0) {
		tenant_slots_give(srv, o->charged, 2);
		return rc;
	}
	memset(&r, 0, sizeof r);
	r.type = STATE_NAME;
	r.u.name.object = o->id;
	r.u.name.name_len = o->name_len;
	r.u.name.flags = o->piece ? STATE_NAME_F_PIECE : 0;
	memcpy(r.u.name.name, o->name, o->name_len);
	rc = slots_put(srv->slots, &r);
	if (rc < 0) {
		slots_del(srv->slots, STATE_OBJECT, o->id);
		tenant_slots_give(srv, o->charged, 2);
	}
	return rc;
}

static int record_handle(struct server *srv, const struct session *s, const struct region *g,
			 const struct name_obj *o, uint32_t access)
{
	struct state_slot r = { .type = STATE_HANDLE };
	int rc = tenant_slots_take(srv, s->tenant, 1);

	if (rc < 0)
		return rc;
	r.u.handle.region = g->id;
	r.u.handle.session = s->id;
	r.u.handle.object = o->id;
	r.u.handle.access = access;
	rc = slots_put(srv->slots, &r);
	if (rc < 0)
		tenant_slots_give(srv, s->tenant, 1);
	return rc;
}

/* A change of several slots to object id begins: one slot decides it from
 * here (state.h, PENDING): until pending_end, a restore drops the object
 * with its name and every handle.  -ENOMEM when the state has no room. */
static int pending_begin(struct server *srv, uint64_t id)
{
	struct state_slot mark = { .type = STATE_PENDING };
	int rc;

	mark.u.pending.object = id;
	rc = slots_put(srv->slots, &mark);
	return rc == -ENOSPC ? -ENOMEM : rc;
}

static void pending_end(struct server *srv, uint64_t id)
{
	slots_del(srv->slots, STATE_PENDING, id);
}

struct session *session_new(struct server *srv, enum session_transport transport,
			    bool admin, const char *peer)
{
	struct session *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	s->id = ++srv->next_session_id;
	s->transport = transport;
	s->admin = admin;
	snprintf(s->peer, sizeof s->peer, "%s", peer);
	s->started_ns = s->last_ns = (uint64_t)clock_mono_ns();
	s->prev = srv->sessions_last;
	if (srv->sessions_last)
		srv->sessions_last->next = s;
	else
		srv->sessions_first = s;
	srv->sessions_last = s;
	return s;
}

/*
 * The one way bytes go back to a pool.  Zeroing before release keeps one
 * client's data from ever being read by the next owner of the range.
 */
static void return_range(struct server *srv, uint32_t pool, uint64_t offset, uint64_t length)
{
	struct pool *p = &srv->pools[pool];
	int rc;

	/* Not at a shutdown for a restart: the next rmemd gives these bytes
	 * back to their owners (persist.h). */
	if (!srv->keep_state)
		memset(p->base + offset, 0, length);
	rc = alloc_release(p->alloc, offset, length);
	if (rc < 0) /* the table and the allocator disagree: a bug, say it loudly */
		log_err("pool %s: release of [%llu, +%llu) refused: %s", p->name,
			(unsigned long long)offset, (unsigned long long)length, strerror(-rc));
	srv->used_bytes -= length;
}

/* quarantine.h's callback: a range whose wait is over goes back as any other. */
static void quarantine_done(void *arg, uint32_t pool, uint64_t offset, uint64_t length,
			    const struct config_tenant *tenant)
{
	struct server *srv = arg;

	srv->counters.quarantine_bytes -= length;
	return_range(srv, pool, offset, length);
	tenant_bytes_back(srv, tenant, length);
}

/* Returns every range of the quarantine that is due by now; how many. */
static unsigned quarantine_reap_now(struct server *srv)
{
	return srv->quarantine ? quarantine_reap(srv->quarantine, (uint64_t)clock_mono_ns()) : 0;
}

/* Room for size bytes in some pool once its quarantined ranges are back. */
static bool pools_fit_after(const struct server *srv, uint64_t size)
{
	uint64_t held[CONFIG_MAX_POOLS] = { 0 };

	quarantine_held_by_pool(srv->quarantine, held, srv->npools);
	for (uint32_t i = 0; i < srv->npools; i++) {
		struct alloc_stats st;

		alloc_get_stats(srv->pools[i].alloc, &st);
		if (held[i] && st.total - st.used + held[i] >= size)
			return true;
	}
	return false;
}

bool session_quarantine_may_help(struct server *srv, const struct session *s, uint64_t size,
				 int rc, uint64_t *due_ns)
{
	uint64_t back, due;
	bool helps;

	if (!srv->quarantine || !quarantine_next_due(srv->quarantine, &due))
		return false;
	if (rc == -ENOMEM) {
		helps = pools_fit_after(srv, size);
	} else if (rc == -EDQUOT && s->tenant) {
		back = quarantine_held_by_tenant(srv->quarantine, s->tenant);
		helps = back && tenant_fits_after(srv, s->tenant, size, back);
	} else {
		helps = false;
	}
	if (helps)
		*due_ns = due;
	return helps;
}

static void quarantine_range(struct server *srv, uint32_t pool, uint64_t offset, uint64_t length,
			     const struct config_tenant *tenant)
{
	if (!srv->quarantine || quarantine_add(srv->quarantine, pool, offset, length, tenant,
					       (uint64_t)clock_mono_ns()) < 0) {
		/* The key is already dead; what is lost is only the margin for an
		 * access that was on the wire when it died. */
		log_err("no memory to quarantine [%llu, +%llu): returned at once",
			(unsigned long long)offset, (unsigned long long)length);
		return_range(srv, pool, offset, length);
		tenant_bytes_back(srv, tenant, length);
		return;
	}
	srv->counters.quarantine_bytes += length;
}

int session_quarantine_init(struct server *srv)
{
	srv->quarantine = quarantine_new(srv->base, QUARANTINE_MS * 1000000ull,
					 quarantine_done, srv);
	return srv->quarantine ? 0 : -ENOMEM;
}

void session_quarantine_flush(struct server *srv)
{
	quarantine_free(srv->quarantine);
	srv->quarantine = NULL;
}

/* Bytes of a range that nothing names any more go back to their pool:
 * after the quarantine when a key over them died unconfirmed, else at once. */
static void give_back_now(struct server *srv, uint32_t pool, uint64_t offset, uint64_t length,
			  const struct config_tenant *tenant, bool wait)
{
	if (wait) {
		quarantine_range(srv, pool, offset, length, tenant);
	} else {
		return_range(srv, pool, offset, length);
		tenant_bytes_back(srv, tenant, length);
	}
}

/* ---- ranges in flight (session.h, struct range_hold) ------------------------ */

static bool hold_overlaps(const struct range_hold *h, uint32_t pool, uint64_t offset,
			  uint64_t length)
{
	return h->pool == pool && h->offset < offset + length && offset < h->offset + h->length;
}

/*
 * Marks every hold on [offset, +length) of pool ended and gives the first
 * one the give-back to do; whether there was any.  The range is out of the
 * allocator until then, so no new region, and no new hold, can come over it.
 */
static bool defer_if_held(struct server *srv, uint32_t pool, uint64_t offset, uint64_t length,
			  const struct config_tenant *tenant, bool wait)
{
	struct range_hold *owner = NULL;

	for (struct range_hold *h = srv->holds; h; h = h->next) {
		if (!hold_overlaps(h, pool, offset, length))
			continue;
		h->ended = true;
		if (owner)
			continue;
		owner = h;
		h->owes = true;
		h->owes_wait = wait;
		h->owes_pool = pool;
		h->owes_offset = offset;
		h->owes_length = length;
		h->owes_tenant = tenant;
	}
	if (owner)
		log_debug("pool %u: [%llu, +%llu) held by a transfer in flight: returned when it ends",
			  pool, (unsigned long long)offset, (unsigned long long)length);
	return owner != NULL;
}

void session_unhold(struct server *srv, struct range_hold *h)
{
	if (!h->active)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		srv->holds = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->prev = h->next = NULL;
	h->active = false;
	if (!h->owes)
		return;
	h->owes = false;
	/* Another transfer still names the range: the debt passes to it. */
	for (struct range_hold *o = srv->holds; o; o = o->next) {
		if (o->ended && hold_overlaps(o, h->owes_pool, h->owes_offset, h->owes_length)) {
			o->owes = true;
			o->owes_wait = h->owes_wait;
			o->owes_pool = h->owes_pool;
			o->owes_offset = h->owes_offset;
			o->owes_length = h->owes_length;
			o->owes_tenant = h->owes_tenant;
			return;
		}
	}
	give_back_now(srv, h->owes_pool, h->owes_offset, h->owes_length, h->owes_tenant,
		      h->owes_wait);
}

static void hold_take(struct server *srv, struct range_hold *h, const struct region *r)
{
	session_unhold(srv, h); /* never linked twice, whatever the caller does */
	*h = (struct range_hold){ .region = r->id, .pool = r->pool, .offset = r->offset,
				  .length = r->length, .active = true, .next = srv->holds };
	if (srv->holds)
		srv->holds->prev = h;
	srv->holds = h;
}

/* Bytes of a range that left the region table go back to their pool, once
 * no transfer in flight names them. */
static void give_back(struct server *srv, uint32_t pool, uint64_t offset, uint64_t length,
		      const struct config_tenant *tenant, bool wait)
{
	if (srv->holds && defer_if_held(srv, pool, offset, length, tenant, wait))
		return;
	give_back_now(srv, pool, offset, length, tenant, wait);
}

/* Takes r out of s's list and the table; its NIC key must be dead already. */
static void remove_entry(struct server *srv, struct session *s, struct region *r)
{
	s->used_bytes -= r->length;
	s->nregions--;
	region_remove(srv->regions, &s->regions, r);
}

/* The NIC key dies first, then the id and TCP key (the entry leaves the
 * table). */
static enum key_gone drop_entry(struct server *srv, struct session *s, struct region *r)
{
	enum key_gone gone = s->nic ? srv->keys->key_drop(s->nic, r->id) : KEY_NONE;

	remove_entry(srv, s, r);
	return gone;
}

/* A named object with no name and no handle left: its range goes back
 * (names.h); it counted as one region and its bytes of its creator's
 * tenant until now.  Several keys opened it: the range waits out the
 * quarantine if any of them died unconfirmed less than QUARANTINE_MS ago
 * (an access through it could still be on the wire). */
static void object_maybe_free(struct server *srv, struct name_obj *o)
{
	const struct config_tenant *charged = o->charged;
	uint32_t pool = o->pool;
	uint64_t offset = o->offset, length = o->length;
	bool wait = o->unconfirmed_ns &&
		    (uint64_t)clock_mono_ns() - o->unconfirmed_ns < QUARANTINE_MS * 1000000ull;

	if (!o->unlinked || o->handles)
		return;
	slots_del(srv->slots, STATE_OBJECT, o->id);
	tenant_slots_give(srv, charged, 2);
	names_remove(srv->names, o);
	srv->frees++;
	tenant_region_gone(srv, charged);
	give_back(srv, pool, offset, length, charged, wait);
}

/* A handle goes alone: its key and entry; its object only when that was the
 * last handle of an unlinked name. */
static void release_handle(struct server *srv, struct session *s, struct region *r)
{
	struct name_handle *h = names_handle_find(srv->names, r->id);
	struct name_obj *o;

	slots_del(srv->slots, STATE_HANDLE, r->id);
	tenant_slots_give(srv, s->tenant, 1);
	if (!h) { /* the table and names disagree: a bug, say it, keep going */
		log_err("region %llu: a named handle without its object",
			(unsigned long long)r->id);
		drop_entry(srv, s, r);
		return;
	}
	o = h->obj;
	if (drop_entry(srv, s, r) == KEY_UNCONFIRMED)
		o->unconfirmed_ns = (uint64_t)clock_mono_ns();
	names_handle_remove(srv->names, h);
	s->nhandles--;
	object_maybe_free(srv, o);
}

/*
 * The NIC key dies first, then the id and TCP key (the region leaves the
 * table), then the bytes: at once for a TCP-only key, which nothing can be
 * using once this loop moves on, and for a NIC key whose death the NIC
 * confirmed; after the quarantine for one it did not confirm.
 */
static void release_region(struct server *srv, struct session *s, struct region *r)
{
	uint32_t pool = r->pool;
	uint64_t offset = r->offset, length = r->length;
	enum key_gone gone;

	if (r->named)
		return release_handle(srv, s, r);
	/* Out of the state first: a crash from here on finds the range free. */
	slots_del(srv->slots, STATE_REGION, r->id);
	tenant_slots_give(srv, s->tenant, 1);
	gone = drop_entry(srv, s, r);
	srv->frees++;
	tenant_region_gone(srv, s->tenant);
	give_back(srv, pool, offset, length, s->tenant, gone == KEY_UNCONFIRMED);
}

void session_destroy(struct server *srv, struct session *s)
{
	uint64_t n, bytes;
	struct region *r;

	if (!s)
		return;
	n = s->nregions;
	bytes = s->used_bytes;
	/* The session's slot first: it decides the end (a crash from here on
	 * finds its regions and handles orphans, dropped whole by a restore). */
	if (s->hello_done)
		slots_del(srv->slots, STATE_SESSION, s->id);
	/* No remote access from here on, whatever the keys; then each key dies,
	 * then the queue pair and its protection domain. */
	if (s->nic)
		srv->keys->peer_stop(s->nic);
	while ((r = region_owner_first(srv->regions, &s->regions)))
		release_region(srv, s, r);
	if (s->nic)
		srv->keys->peer_destroy(s->nic);
	s->nic = NULL;
	if (s->hello_done) {
		tenant_session_give(srv, s->tenant, s->admin_seat);
		log_info("client %llu (%s) gone: %llu regions, %llu bytes returned",
			 (unsigned long long)s->id, s->peer, (unsigned long long)n,
			 (unsigned long long)bytes);
	}
	session_unlist(srv, s);
	free(s);
}

void session_unlist(struct server *srv, struct session *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions_first = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		srv->sessions_last = s->prev;
	s->prev = s->next = NULL;
}

int session_hello(struct server *srv, struct session *s)
{
	int rc;

	if (s->hello_done)
		return -EINVAL;
	rc = rand_bytes(&s->attach_token, sizeof s->attach_token);
	if (rc == 0)
		rc = rand_bytes(s->resume_token, sizeof s->resume_token);
	if (rc < 0)
		return rc;
	rc = tenant_session_take(srv, s->tenant, s->admin, &s->admin_seat);
	if (rc < 0) {
		log_warn("client %s refused: %s", s->peer, rc == -EUSERS ?
			 "limits.max_clients reached" : "its tenant's share of limits.max_clients "
			 "reached");
		return rc;
	}
	rc = record_session(srv, s);
	if (rc < 0) { /* the sessions' slots are set aside: a bug, or a restore's excess */
		tenant_session_give(srv, s->tenant, s->admin_seat);
		return rc == -ENOSPC ? -EUSERS : rc;
	}
	s->hello_done = true;
	log_info("client %llu (%s) connected", (unsigned long long)s->id, s->peer);
	return 0;
}

struct session *session_find(struct server *srv, uint64_t id)
{
	for (struct session *s = srv->sessions_first; s; s = s->next)
		if (s->id == id)
			return s->hello_done ? s : NULL;
	return NULL;
}

bool session_token_ok(const struct session *s, uint64_t token)
{
	/* One XOR and one compare of whole words: no early exit at the first
	 * byte that differs, so the time says nothing about the token. */
	volatile uint64_t diff = s->attach_token ^ token;

	return s->hello_done && diff == 0;
}

/* The pool whose largest free range fits most tightly keeps big ranges
 * for big requests, as best fit does inside one pool.  NULL: none fits. */
static struct pool *pick_pool(struct server *srv, uint64_t size)
{
	struct pool *best = NULL;
	uint64_t best_free = 0;

	for (uint32_t i = 0; i < srv->npools; i++) {
		struct alloc_stats st;

		alloc_get_stats(srv->pools[i].alloc, &st);
		if (st.largest_free >= size && (!best || st.largest_free < best_free)) {
			best = &srv->pools[i];
			best_free = st.largest_free;
		}
	}
	return best;
}

/*
 * Reserves size bytes in the best pool and charges them, and one region, to
 * s's tenant: the quota first (a refused request changes nothing), ranges
 * of the quarantine that are due returned when they stand in the way.
 */
static int take_range(struct server *srv, struct session *s, uint64_t size, struct pool **pool,
		      uint64_t *off, uint64_t *len)
{
	struct pool *best;
	int rc = tenant_check(srv, s->tenant, size);

	/* The timer may be late (a busy loop): what is due goes back now. */
	if (rc == -EDQUOT && quarantine_reap_now(srv))
		rc = tenant_check(srv, s->tenant, size);
	if (rc < 0)
		return rc;
	best = pick_pool(srv, size);
	if (!best && quarantine_reap_now(srv))
		best = pick_pool(srv, size);
	if (!best)
		return -ENOMEM;
	rc = alloc_reserve(best->alloc, size, off, len);
	if (rc < 0)
		return rc;
	/* After a restore, free bytes are zeroed lazily (scrub.h): what the
	 * scrub has not reached yet is zeroed here, before anyone sees it. */
	pool_take(best, *off, *len);
	/* The range may be longer than asked (alignment): that is what counts. */
	rc = tenant_charge(srv, s->tenant, *len);
	if (rc < 0) {
		alloc_release(best->alloc, *off, *len);
		return rc;
	}
	*pool = best;
	return 0;
}

/* take_range undone, for a request that failed after it. */
static void untake_range(struct server *srv, const struct config_tenant *t, struct pool *pool,
			 uint64_t off, uint64_t len)
{
	alloc_release(pool->alloc, off, len);
	tenant_region_gone(srv, t);
	tenant_bytes_back(srv, t, len);
}

/* A region entry of s over [off, off + len) of pool, with a key of access:
 * the NIC's when s has a queue pair (it replaces the random one, and the
 * same key then serves both data paths). */
static int add_entry(struct server *srv, struct session *s, struct pool *pool, uint64_t off,
		     uint64_t len, uint32_t access, bool named, struct region **out)
{
	struct region *r = region_add(srv->regions, &s->regions, s->id, pool->index, off, len);
	int rc;

	if (!r)
		return -ENOMEM;
	if (s->nic) {
		rc = srv->keys->key_new(s->nic, r->id, pool->index, pool->base + off, len, access,
					&r->key);
		if (rc < 0 && rc != -ENOTCONN) { /* -ENOTCONN: a TCP key (keys.h) */
			region_remove(srv->regions, &s->regions, r);
			return rc;
		}
	}
	r->named = named;
	s->used_bytes += len;
	s->nregions++;
	*out = r;
	return 0;
}

/* The pool's bytes of a new range count from here on. */
static void count_alloc(struct server *srv, uint64_t len)
{
	srv->used_bytes += len;
	if (srv->used_bytes > srv->peak_used)
		srv->peak_used = srv->used_bytes;
	srv->allocs++;
}

int session_alloc(struct server *srv, struct session *s, uint64_t size, uint32_t flags,
		  const struct region **out)
{
	const uint32_t all = PROTO_ACCESS_READ | PROTO_ACCESS_WRITE;
	struct pool *pool;
	uint64_t off, len;
	struct region *r;
	int rc;

	if (size == 0 || flags != 0)
		return -EINVAL;
	rc = take_range(srv, s, size, &pool, &off, &len);
	if (rc < 0)
		return rc;
	rc = add_entry(srv, s, pool, off, len, all, false, &r);
	if (rc < 0) {
		untake_range(srv, s->tenant, pool, off, len);
		return rc;
	}
	rc = record_region(srv, s, r);
	if (rc < 0) {
		drop_entry(srv, s, r); /* a key just made, never handed out */
		untake_range(srv, s->tenant, pool, off, len);
		return rc;
	}
	count_alloc(srv, len);
	*out = r;
	return 0;
}

/* ---- named regions ------------------------------------------------------------- */

/* A handle of o for s with access: a region entry and its line in names. */
/* A handle costs no pool bytes, so no quota of bytes bounds them: each
 * session may hold limits.max_handles, as a process may hold RLIMIT_NOFILE
 * descriptors (-EMFILE, as shm_open says past it). */
static int open_handle(struct server *srv, struct session *s, struct name_obj *o,
		       uint32_t access, const struct region **out)
{
	struct region *r;
	int rc;

	if (s->nhandles >= srv->cfg.max_handles)
		return -EMFILE;
	rc = add_entry(srv, s, &srv->pools[o->pool], o->offset, o->length, access, true, &r);
	if (rc < 0)
		return rc;
	rc = names_handle_add(srv->names, o, r->id, access, s);
	if (rc < 0) {
		drop_entry(srv, s, r); /* a key just made, never handed out */
		return rc;
	}
	rc = record_handle(srv, s, r, o, access);
	if (rc < 0) {
		names_handle_remove(srv->names, names_handle_find(srv->names, r->id));
		drop_entry(srv, s, r);
		return rc;
	}
	s->nhandles++;
	*out = r;
	return 0;
}

int session_create(struct server *srv, struct session *s, const char *name, size_t name_len,
		   uint64_t size, uint32_t flags, const struct region **out)
{
	const uint32_t all = PROTO_ACCESS_READ | PROTO_ACCESS_WRITE;
	struct name_obj *o;
	struct pool *pool;
	uint64_t off, len;
	int rc;

	if (!srv->names || names_valid(name, name_len) < 0 || size == 0 ||
	    (flags & ~PROTO_CREATE_F_PIECE) ||
	    ((flags & PROTO_CREATE_F_PIECE) && names_piece_valid(name, name_len) < 0))
		return -EINVAL;
	/* Before any allocation: an existing name costs nothing, nor waits. */
	if (names_lookup(srv->names, s->tenant, name, name_len))
		return -EEXIST;
	if (s->nhandles >= srv->cfg.max_handles)
		return -EMFILE;
	rc = take_range(srv, s, size, &pool, &off, &len);
	if (rc < 0)
		return rc;
	o = names_add(srv->names, s->tenant, name, name_len, pool->index, off, len, s->tenant,
		      (uint64_t)clock_mono_ns());
	if (o)
		o->piece = flags & PROTO_CREATE_F_PIECE;
	/* OBJECT, NAME and the creator's HANDLE: whole or absent after a
	 * crash, as the PENDING slot around them decides. */
	rc = o ? pending_begin(srv, o->id) : -errno;
	if (rc == 0) {
		rc = record_object(srv, o);
		if (rc == 0) {
			rc = open_handle(srv, s, o, all, out);
			if (rc < 0) {
				slots_del(srv->slots, STATE_NAME, o->id);
				slots_del(srv->slots, STATE_OBJECT, o->id);
				tenant_slots_give(srv, o->charged, 2);
			}
		}
		pending_end(srv, o->id);
	}
	if (rc < 0) {
		if (o)
			names_remove(srv->names, o);
		untake_range(srv, s->tenant, pool, off, len);
		return rc;
	}
	count_alloc(srv, len);
	return 0;
}

/* A WRITE whose data is still arriving through region id stops landing it
 * (conn.c's write_check: -ECANCELED), though the range stays: another
 * handle of the object may still use it. */
static void holds_end(struct server *srv, uint64_t id)
{
	for (struct range_hold *h = srv->holds; h; h = h->next)
		if (h->region == id)
			h->ended = true;
}

static bool revoked(const struct name_handle *h, bool writers_only)
{
	return !writers_only || (h->access & PROTO_ACCESS_WRITE);
}

/*
 * Every handle of o (writers_only: every one that may write), whoever holds
 * it: first every key dies (through each holder's own queue pair), so that
 * all of them stop at once, then the entries leave the table (TCP answers
 * -ENOENT from here on) and a WRITE still arriving through one drops the
 * rest of its data.  How many went.
 */
static unsigned revoke_handles(struct server *srv, struct name_obj *o, bool writers_only)
{
	struct name_handle *h, *next;
	unsigned n = 0;

	for (h = names_handle_first(o); h; h = names_handle_next(h)) {
		struct session *holder = h->holder;

		if (revoked(h, writers_only) && holder->nic &&
		    srv->keys->key_drop(holder->nic, names_handle_region(h)) == KEY_UNCONFIRMED)
			o->unconfirmed_ns = (uint64_t)clock_mono_ns();
	}
	for (h = names_handle_first(o); h; h = next) {
		struct session *holder = h->holder;
		uint64_t id = names_handle_region(h);
		struct region *r = region_find(srv->regions, id);

		next = names_handle_next(h);
		if (!revoked(h, writers_only))
			continue;
		holds_end(srv, id);
		slots_del(srv->slots, STATE_HANDLE, id);
		tenant_slots_give(srv, holder->tenant, 1);
		names_handle_remove(srv->names, h);
		holder->nhandles--;
		if (r)
			remove_entry(srv, holder, r);
		n++;
	}
	return n;
}

static void revoke(struct server *srv, struct name_obj *o)
{
	revoke_handles(srv, o, false);
	log_info("named region %llu revoked", (unsigned long long)o->id);
}

/*
 * With PROTO_ACCESS_EXCL the new handle is the object's one writer: every
 * other handle that may write is revoked before it is made (proto.h).  Each
 * revoked handle's slot goes on its own, with no PENDING slot around them:
 * a crash half-way restores some of them, and the opener, which had no
 * answer, opens again and fences them then.
 */
int session_open(struct server *srv, struct session *s, const char *name, size_t name_len,
		 uint32_t access, const struct region **out, uint32_t *granted)
{
	bool excl = access & PROTO_ACCESS_EXCL;
	struct name_obj *o;
	unsigned fenced = 0;
	int rc;

	access &= ~PROTO_ACCESS_EXCL;
	if (!srv->names || names_valid(name, name_len) < 0 || names_access_valid(access) < 0 ||
	    (excl && !(access & PROTO_ACCESS_WRITE)))
		return -EINVAL;
	o = names_lookup(srv->names, s->tenant, name, name_len);
	if (!o)
		return -ENOENT;
	if (s->nhandles >= srv->cfg.max_handles)
		return -EMFILE; /* before anyone is fenced for nothing */
	if (excl && (fenced = revoke_handles(srv, o, true)))
		log_info("named region %llu: %u writer handle(s) fenced by an exclusive open",
			 (unsigned long long)o->id, fenced);
	rc = open_handle(srv, s, o, access, out);
	if (rc == 0)
		*granted = access | (fenced ? PROTO_ACCESS_FENCED : 0);
	return rc;
}

/*
 * An unlink with REVOKE changes a slot per handle and one for the name: the
 * PENDING slot, written first and freed last, decides it (a restore that
 * finds it finishes the revoke: restore.c's find_orphans).  No room for it
 * refuses the unlink before anything changed.
 */
int session_unlink_ns(struct server *srv, const struct config_tenant *ns, const char *name,
		      size_t name_len, uint32_t flags)
{
	struct name_obj *o;
	uint64_t id;
	int rc;

	if (!srv->names || names_valid(name, name_len) < 0 || (flags & ~PROTO_UNLINK_REVOKE))
		return -EINVAL;
	o = names_lookup(srv->names, ns, name, name_len);
	if (!o)
		return -ENOENT;
	id = o->id;
	if (flags & PROTO_UNLINK_REVOKE) {
		rc = pending_begin(srv, id);
		if (rc < 0)
			return rc;
	}
	slots_del(srv->slots, STATE_NAME, id);
	names_unlink(srv->names, o);
	if (flags & PROTO_UNLINK_REVOKE)
		revoke(srv, o);
	object_maybe_free(srv, o); /* o may be gone from here on */
	if (flags & PROTO_UNLINK_REVOKE)
		pending_end(srv, id);
	return 0;
}

int session_unlink(struct server *srv, struct session *s, const char *name, size_t name_len,
		   uint32_t flags)
{
	return session_unlink_ns(srv, s->tenant, name, name_len, flags);
}

/* Owner, key and rights checks shared by free and I/O (need: the
 * PROTO_ACCESS_* bits the request uses; 0 for FREE).  A foreign region and
 * a wrong key answer alike, so a stranger learns nothing about the key.  An
 * anonymous region has every right: one bit test is all it costs. */
static int lookup(struct server *srv, struct session *s, uint64_t id, uint32_t key,
		  uint32_t need, struct region **out)
{
	struct region *r = region_find(srv->regions, id);

	if (!r)
		return -ENOENT;
	if (r->owner != s->id || r->key != key)
		return -EACCES;
	if (r->named && need) {
		const struct name_handle *h = names_handle_find(srv->names, id);

		if (!h || (need & ~h->access))
			return -EACCES;
	}
	*out = r;
	return 0;
}

int session_free(struct server *srv, struct session *s, uint64_t id, uint32_t key)
{
	struct region *r;
	int rc = lookup(srv, s, id, key, 0, &r);

	if (rc < 0)
		return rc;
	release_region(srv, s, r);
	return 0;
}

int session_io(struct server *srv, struct session *s, uint64_t id, uint32_t key, uint32_t need,
	       uint64_t off, uint64_t len, uint8_t **where, struct range_hold *hold)
{
	struct region *r;
	int rc = lookup(srv, s, id, key, need, &r);

	if (rc < 0)
		return rc;
	if (off > r->length || len > r->length - off)
		return -ERANGE;
	*where = srv->pools[r->pool].base + r->offset + off;
	if (hold)
		hold_take(srv, hold, r);
	return 0;
}
