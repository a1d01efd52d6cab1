/*
 * session.c - see session.h.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "keys.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

/* A range waiting in the quarantine (see session.h). */
struct quarantined {
	uint32_t pool;
	uint64_t offset, length;
	uint64_t due_ns;
	const struct config_tenant *tenant; /* whose quota the bytes still count in */
	struct quarantined *next;
};

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

	memset(p->base + offset, 0, length);
	rc = alloc_release(p->alloc, offset, length);
	if (rc < 0) /* the table and the allocator disagree: a bug, say it loudly */
		log_err("pool %s: release of [%llu, +%llu) refused: %s", p->name,
			(unsigned long long)offset, (unsigned long long)length, strerror(-rc));
	srv->used_bytes -= length;
}

static void arm_quarantine(struct server *srv, uint64_t now)
{
	uint64_t wait = srv->quarantine_first->due_ns > now ?
			srv->quarantine_first->due_ns - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
			      .tv_usec = (suseconds_t)(wait % 1000000000u / 1000u) };

	evtimer_add(srv->quarantine_timer, &tv);
}

/* Returns every range that is due by now; how many. */
static unsigned quarantine_reap(struct server *srv, uint64_t now)
{
	struct quarantined *q;
	unsigned n = 0;

	while ((q = srv->quarantine_first) && q->due_ns <= now) {
		srv->quarantine_first = q->next;
		return_range(srv, q->pool, q->offset, q->length);
		tenant_bytes_back(srv, q->tenant, q->length);
		free(q);
		n++;
	}
	if (!srv->quarantine_first)
		srv->quarantine_last = NULL;
	return n;
}

static void on_quarantine_timer(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	uint64_t now = (uint64_t)clock_mono_ns();

	(void)fd;
	(void)what;
	quarantine_reap(srv, now);
	if (srv->quarantine_first)
		arm_quarantine(srv, now);
}

/* Room for size bytes in some pool once its quarantined ranges are back. */
static bool pools_fit_after(const struct server *srv, uint64_t size)
{
	uint64_t held[CONFIG_MAX_POOLS] = { 0 };

	for (const struct quarantined *q = srv->quarantine_first; q; q = q->next)
		held[q->pool] += q->length;
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
	uint64_t back = 0;
	bool helps;

	if (!srv->quarantine_first)
		return false;
	if (rc == -ENOMEM) {
		helps = pools_fit_after(srv, size);
	} else if (rc == -EDQUOT && s->tenant) {
		for (const struct quarantined *q = srv->quarantine_first; q; q = q->next)
			back += q->tenant == s->tenant ? q->length : 0;
		helps = back && tenant_fits_after(srv, s->tenant, size, back);
	} else {
		helps = false;
	}
	if (helps)
		*due_ns = srv->quarantine_first->due_ns;
	return helps;
}

/* Every entry waits the same time, so appending keeps the list in due order
 * and the timer only ever needs the head's time. */
static void quarantine(struct server *srv, uint32_t pool, uint64_t offset, uint64_t length,
		       const struct config_tenant *tenant)
{
	struct quarantined *q = srv->quarantine_timer ? malloc(sizeof *q) : NULL;
	uint64_t now = (uint64_t)clock_mono_ns();

	if (!q) {
		/* The key is already dead; what is lost is only the margin for an
		 * access that was on the wire when it died. */
		log_err("no memory to quarantine [%llu, +%llu): returned at once",
			(unsigned long long)offset, (unsigned long long)length);
		return_range(srv, pool, offset, length);
		tenant_bytes_back(srv, tenant, length);
		return;
	}
	*q = (struct quarantined){ .pool = pool, .offset = offset, .length = length,
				   .tenant = tenant,
				   .due_ns = now + QUARANTINE_MS * 1000000ull };
	if (srv->quarantine_last)
		srv->quarantine_last->next = q;
	else
		srv->quarantine_first = q;
	srv->quarantine_last = q;
	if (srv->quarantine_first == q)
		arm_quarantine(srv, now);
}

int session_quarantine_init(struct server *srv)
{
	srv->quarantine_timer = evtimer_new(srv->base, on_quarantine_timer, srv);
	return srv->quarantine_timer ? 0 : -ENOMEM;
}

void session_quarantine_flush(struct server *srv)
{
	struct quarantined *q;

	while ((q = srv->quarantine_first)) {
		srv->quarantine_first = q->next;
		return_range(srv, q->pool, q->offset, q->length);
		tenant_bytes_back(srv, q->tenant, q->length);
		free(q);
	}
	srv->quarantine_last = NULL;
	if (srv->quarantine_timer)
		event_free(srv->quarantine_timer);
	srv->quarantine_timer = NULL;
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
	enum key_gone gone = s->nic ? srv->keys->key_drop(s->nic, r->id) : KEY_NONE;

	s->used_bytes -= length;
	s->nregions--;
	srv->frees++;
	region_remove(srv->regions, &s->regions, r);
	tenant_region_gone(srv, s->tenant);
	if (gone == KEY_UNCONFIRMED) {
		quarantine(srv, pool, offset, length, s->tenant);
	} else {
		return_range(srv, pool, offset, length);
		tenant_bytes_back(srv, s->tenant, length);
	}
}

void session_destroy(struct server *srv, struct session *s)
{
	uint64_t n, bytes;
	struct region *r;

	if (!s)
		return;
	n = s->nregions;
	bytes = s->used_bytes;
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
		srv->clients--;
		log_info("client %llu (%s) gone: %llu regions, %llu bytes returned",
			 (unsigned long long)s->id, s->peer, (unsigned long long)n,
			 (unsigned long long)bytes);
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions_first = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		srv->sessions_last = s->prev;
	free(s);
}

int session_hello(struct server *srv, struct session *s)
{
	if (s->hello_done)
		return -EINVAL;
	if (srv->clients >= srv->cfg.max_clients) {
		log_warn("client %s refused: limits.max_clients (%u) reached", s->peer,
			 srv->cfg.max_clients);
		return -EUSERS;
	}
	for (size_t got = 0; got < sizeof s->attach_token;) {
		ssize_t n = getrandom((char *)&s->attach_token + got, sizeof s->attach_token - got, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	s->hello_done = true;
	srv->clients++;
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

int session_alloc(struct server *srv, struct session *s, uint64_t size, uint32_t flags,
		  const struct region **out)
{
	struct pool *best;
	uint64_t off, len;
	struct region *r;
	int rc;

	if (size == 0 || flags != 0)
		return -EINVAL;
	rc = tenant_check(srv, s->tenant, size);
	/* The timer may be late (a busy loop): what is due goes back now. */
	if (rc == -EDQUOT && quarantine_reap(srv, (uint64_t)clock_mono_ns()))
		rc = tenant_check(srv, s->tenant, size);
	if (rc < 0)
		return rc;
	best = pick_pool(srv, size);
	if (!best && quarantine_reap(srv, (uint64_t)clock_mono_ns()))
		best = pick_pool(srv, size);
	if (!best)
		return -ENOMEM;
	rc = alloc_reserve(best->alloc, size, &off, &len);
	if (rc < 0)
		return rc;
	/* The range may be longer than asked (alignment): that is what counts. */
	rc = tenant_charge(srv, s->tenant, len);
	if (rc < 0) {
		alloc_release(best->alloc, off, len);
		return rc;
	}
	r = region_add(srv->regions, &s->regions, s->id, best->index, off, len);
	if (!r) {
		alloc_release(best->alloc, off, len);
		tenant_region_gone(srv, s->tenant);
		tenant_bytes_back(srv, s->tenant, len);
		return -ENOMEM;
	}
	if (s->nic) {
		/* The NIC key replaces the random one: the same key then serves
		 * both data paths. */
		rc = srv->keys->key_new(s->nic, r->id, best->index, best->base + off, len, &r->key);
		if (rc < 0) {
			region_remove(srv->regions, &s->regions, r);
			alloc_release(best->alloc, off, len);
			tenant_region_gone(srv, s->tenant);
			tenant_bytes_back(srv, s->tenant, len);
			return rc;
		}
	}
	s->used_bytes += len;
	s->nregions++;
	srv->used_bytes += len;
	if (srv->used_bytes > srv->peak_used)
		srv->peak_used = srv->used_bytes;
	srv->allocs++;
	*out = r;
	return 0;
}

/* Owner and key checks shared by free and I/O.  A foreign region and a wrong
 * key answer alike, so a stranger learns nothing about the key. */
static int lookup(struct server *srv, struct session *s, uint64_t id, uint32_t key,
		  struct region **out)
{
	struct region *r = region_find(srv->regions, id);

	if (!r)
		return -ENOENT;
	if (r->owner != s->id || r->key != key)
		return -EACCES;
	*out = r;
	return 0;
}

int session_free(struct server *srv, struct session *s, uint64_t id, uint32_t key)
{
	struct region *r;
	int rc = lookup(srv, s, id, key, &r);

	if (rc < 0)
		return rc;
	release_region(srv, s, r);
	return 0;
}

int session_io(struct server *srv, struct session *s, uint64_t id, uint32_t key,
	       uint64_t off, uint64_t len, uint8_t **where)
{
	struct region *r;
	int rc = lookup(srv, s, id, key, &r);

	if (rc < 0)
		return rc;
	if (off > r->length || len > r->length - off)
		return -ERANGE;
	*where = srv->pools[r->pool].base + r->offset + off;
	return 0;
}
