/*
 * session.c - see session.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "log.h"
#include "server.h"
#include "session.h"

uint64_t session_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
	s->started_ns = s->last_ns = session_now_ns();
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
static void release_region(struct server *srv, struct session *s, struct region *r)
{
	struct pool *p = &srv->pools[r->pool];
	int rc;

	memset(p->base + r->offset, 0, r->length);
	rc = alloc_release(p->alloc, r->offset, r->length);
	if (rc < 0) /* the table and the allocator disagree: a bug, say it loudly */
		log_err("pool %s: release of [%llu, +%llu) refused: %s", p->name,
			(unsigned long long)r->offset, (unsigned long long)r->length,
			strerror(-rc));
	s->used_bytes -= r->length;
	s->nregions--;
	srv->used_bytes -= r->length;
	srv->frees++;
	region_remove(srv->regions, &s->regions, r);
}

void session_destroy(struct server *srv, struct session *s)
{
	uint64_t n, bytes;

	if (!s)
		return;
	n = s->nregions;
	bytes = s->used_bytes;
	while (s->regions.first)
		release_region(srv, s, s->regions.first);
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
	s->hello_done = true;
	srv->clients++;
	log_info("client %llu (%s) connected", (unsigned long long)s->id, s->peer);
	return 0;
}

int session_alloc(struct server *srv, struct session *s, uint64_t size, uint32_t flags,
		  const struct region **out)
{
	struct pool *best = NULL;
	uint64_t best_free = 0, off, len;
	struct region *r;
	int rc;

	if (size == 0 || flags != 0)
		return -EINVAL;
	/* The pool whose largest free range fits most tightly keeps big ranges
	 * for big requests, as best fit does inside one pool. */
	for (uint32_t i = 0; i < srv->npools; i++) {
		struct alloc_stats st;

		alloc_get_stats(srv->pools[i].alloc, &st);
		if (st.largest_free >= size && (!best || st.largest_free < best_free)) {
			best = &srv->pools[i];
			best_free = st.largest_free;
		}
	}
	if (!best)
		return -ENOMEM;
	rc = alloc_reserve(best->alloc, size, &off, &len);
	if (rc < 0)
		return rc;
	r = region_add(srv->regions, &s->regions, s->id, best->index, off, len);
	if (!r) {
		alloc_release(best->alloc, off, len);
		return -ENOMEM;
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
