/*
 * resume.c - see resume.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "log.h"
#include "names.h"
#include "randbytes.h"
#include "region.h"
#include "resume.h"
#include "server.h"
#include "session.h"

struct session *resume_find(struct server *srv, uint64_t id)
{
	for (struct session *s = srv->sessions_first; s; s = s->next)
		if (s->id == id && s->restored)
			return s;
	return NULL;
}

/* s takes from's place in the list, which stays in id order (CLIENTS pages
 * by id). */
static void take_place(struct server *srv, struct session *s, struct session *from)
{
	session_unlist(srv, s);
	s->prev = from->prev;
	s->next = from->next;
	if (s->prev)
		s->prev->next = s;
	else
		srv->sessions_first = s;
	if (s->next)
		s->next->prev = s;
	else
		srv->sessions_last = s;
	from->prev = from->next = NULL;
}

int resume_session(struct server *srv, struct session *s, struct session *from)
{
	int rc;

	if (s->hello_done)
		return -EINVAL;
	if (!from->detached)
		return -EBUSY;
	rc = rand_bytes(&s->attach_token, sizeof s->attach_token);
	if (rc < 0)
		return rc;
	/* Everything that is the session's moves; the region entries name
	 * their owner by id, which moves with them, and handles name their
	 * holder, which is told. */
	s->id = from->id;
	s->regions = from->regions;
	s->nregions = from->nregions;
	s->nhandles = from->nhandles;
	s->used_bytes = from->used_bytes;
	memcpy(s->resume_token, from->resume_token, sizeof s->resume_token);
	for (struct region *r = region_owner_first(srv->regions, &s->regions); r;
	     r = region_owner_next(srv->regions, r)) {
		struct name_handle *h = r->named ? names_handle_find(srv->names, r->id) : NULL;

		if (h)
			h->holder = s;
	}
	s->restored = true;
	s->detached = false;
	s->hello_done = true;
	take_place(srv, s, from);
	/* from is an empty shell now: not a client (s is), nothing to return,
	 * and its state slot is s's. */
	memset(&from->regions, 0, sizeof from->regions);
	from->nregions = 0;
	from->nhandles = 0;
	from->used_bytes = 0;
	from->hello_done = false;
	free(from);
	log_info("client %llu (%s) resumed: %llu regions, %llu bytes",
		 (unsigned long long)s->id, s->peer, (unsigned long long)s->nregions,
		 (unsigned long long)s->used_bytes);
	return 0;
}

int resume_rekey(struct server *srv, struct session *s, uint64_t id, const struct region **out)
{
	struct region *r = region_find(srv->regions, id);
	const struct name_handle *h;
	uint32_t access = PROTO_ACCESS_READ | PROTO_ACCESS_WRITE;
	int rc;

	if (!r || r->owner != s->id)
		return -ENOENT;
	h = r->named ? names_handle_find(srv->names, id) : NULL;
	if (h)
		access = h->access;
	if (s->nic) {
		/* The range stays the region's, so an unconfirmed death needs no
		 * quarantine: only the holder's own accesses could still land. */
		srv->keys->key_drop(s->nic, id);
		rc = srv->keys->key_new(s->nic, r->id, r->pool, srv->pools[r->pool].base + r->offset,
					r->length, access, &r->key);
		if (rc < 0)
			return rc;
	} else {
		r->key = region_new_key(srv->regions);
	}
	*out = r;
	return 0;
}
