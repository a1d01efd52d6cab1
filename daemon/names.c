/*
 * names.c - see names.h.
 *
 * Two chained hashes (hash64.h): linked objects by (namespace, name),
 * handles by region id.  Named
 * regions are few next to anonymous ones and are made by a round trip each,
 * so malloc per object and per handle is cheap enough; what must stay fast
 * is the region table, which this keeps out of.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "cluster_layout.h"
#include "dlist.h"

#define HASH_MIN_BITS 6

struct names {
	struct hash64 by_name; /* key: name_hash; its count is the linked objects */
	struct hash64 by_id;   /* key: region id */
	struct name_obj *first, *last;  /* id order, unlinked ones too */
	uint64_t count;
	uint64_t next_id;
};

/* FNV-1a over the namespace's address and the name's bytes. */
static uint64_t name_hash(const struct config_tenant *ns, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)(uintptr_t)ns;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
	return h;
}

struct names *names_new(void)
{
	struct names *n = calloc(1, sizeof *n);

	if (!n)
		return NULL;
	if (hash64_init(&n->by_name, HASH_MIN_BITS) < 0 ||
	    hash64_init(&n->by_id, HASH_MIN_BITS) < 0) {
		names_free(n);
		return NULL;
	}
	n->next_id = 1;
	return n;
}

void names_free(struct names *n)
{
	if (!n)
		return;
	while (n->first)
		names_remove(n, n->first);
	hash64_fini(&n->by_name);
	hash64_fini(&n->by_id);
	free(n);
}

int names_valid(const char *name, size_t len)
{
	if (len < 1 || len > PROTO_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((uint8_t)name[i] < 0x21 || (uint8_t)name[i] > 0x7e)
			return -EINVAL;
	return 0;
}

int names_piece_valid(const char *name, size_t len)
{
	size_t base;
	uint64_t made;
	unsigned i;

	if (names_valid(name, len) < 0 || !cluster_piece_split(name, len, &base, &made, &i))
		return -EINVAL;
	return 0;
}

int names_access_valid(uint32_t access)
{
	const uint32_t all = PROTO_ACCESS_READ | PROTO_ACCESS_WRITE;

	return access && !(access & ~all) ? 0 : -EINVAL;
}

/* ---- objects by name ------------------------------------------------------------ */

struct name_obj *names_lookup(const struct names *n, const struct config_tenant *ns,
			      const char *name, size_t len)
{
	for (struct hash64_node *l = hash64_first(&n->by_name, name_hash(ns, name, len)); l;
	     l = hash64_next(l)) {
		struct name_obj *o = hash64_entry(l, struct name_obj, link);

		if (o->ns == ns && o->name_len == len && !memcmp(o->name, name, len))
			return o;
	}
	return NULL;
}

/* A new object in the id list; linked by name when name is not NULL. */
static struct name_obj *obj_new(struct names *n, const struct config_tenant *ns,
				const char *name, size_t len, uint32_t pool, uint64_t offset,
				uint64_t length, const struct config_tenant *charged,
				uint64_t now_ns)
{
	struct name_obj *o = calloc(1, sizeof *o);

	if (!o) {
		errno = ENOMEM;
		return NULL;
	}
	*o = (struct name_obj){ .id = n->next_id++, .ns = ns, .charged = charged, .pool = pool,
				.offset = offset, .length = length, .created_ns = now_ns,
				.name_len = (uint16_t)len, .unlinked = !name };
	if (name) {
		memcpy(o->name, name, len);
		o->link.key = name_hash(ns, name, len);
		hash64_add(&n->by_name, &o->link);
	}
	DLIST_APPEND(n, o);
	n->count++;
	return o;
}

struct name_obj *names_add(struct names *n, const struct config_tenant *ns, const char *name,
			   size_t len, uint32_t pool, uint64_t offset, uint64_t length,
			   const struct config_tenant *charged, uint64_t now_ns)
{
	if (names_valid(name, len) < 0) {
		errno = EINVAL;
		return NULL;
	}
	if (names_lookup(n, ns, name, len)) {
		errno = EEXIST;
		return NULL;
	}
	return obj_new(n, ns, name, len, pool, offset, length, charged, now_ns);
}

struct name_obj *names_add_unlinked(struct names *n, const struct config_tenant *ns,
				    uint32_t pool, uint64_t offset, uint64_t length,
				    const struct config_tenant *charged, uint64_t now_ns)
{
	return obj_new(n, ns, NULL, 0, pool, offset, length, charged, now_ns);
}

void names_unlink(struct names *n, struct name_obj *o)
{
	if (o->unlinked)
		return;
	hash64_del(&n->by_name, &o->link);
	o->unlinked = true;
}

void names_remove(struct names *n, struct name_obj *o)
{
	names_unlink(n, o);
	while (o->first_handle)
		names_handle_remove(n, o->first_handle);
	DLIST_REMOVE(n, o);
	n->count--;
	free(o);
}

/* ---- handles by region id ------------------------------------------------------- */

struct name_handle *names_handle_find(const struct names *n, uint64_t region_id)
{
	struct hash64_node *l = hash64_first(&n->by_id, region_id);

	return l ? hash64_entry(l, struct name_handle, link) : NULL;
}

int names_handle_add(struct names *n, struct name_obj *o, uint64_t region_id, uint32_t access,
		     void *holder)
{
	struct name_handle *h;

	if (names_access_valid(access) < 0)
		return -EINVAL;
	if (names_handle_find(n, region_id))
		return -EEXIST;
	h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	*h = (struct name_handle){ .link.key = region_id, .access = access, .obj = o,
				   .holder = holder };
	hash64_add(&n->by_id, &h->link);
	h->obj_next = o->first_handle;
	if (o->first_handle)
		o->first_handle->obj_prev = h;
	o->first_handle = h;
	o->handles++;
	return 0;
}

void names_handle_remove(struct names *n, struct name_handle *h)
{
	hash64_del(&n->by_id, &h->link);
	if (h->obj_prev)
		h->obj_prev->obj_next = h->obj_next;
	else
		h->obj->first_handle = h->obj_next;
	if (h->obj_next)
		h->obj_next->obj_prev = h->obj_prev;
	h->obj->handles--;
	free(h);
}

struct name_handle *names_handle_first(const struct name_obj *o)
{
	return o->first_handle;
}

struct name_handle *names_handle_next(const struct name_handle *h)
{
	return h->obj_next;
}

/* ---- listing -------------------------------------------------------------------- */

struct name_obj *names_next_after(const struct names *n, uint64_t after)
{
	struct name_obj *o = n->first;

	/* Objects are few and a page of NAMES is hundreds of them: a walk from
	 * the start costs less than a second index would. */
	while (o && o->id <= after)
		o = o->next;
	return o;
}

struct name_obj *names_next(const struct name_obj *o)
{
	return o->next;
}

uint64_t names_count(const struct names *n)
{
	return n->count;
}

uint64_t names_handle_count(const struct names *n)
{
	return n->by_id.count;
}

/* ---- restart without loss (persist.c) ---------------------------------------- */

uint64_t names_next_id(const struct names *n)
{
	return n->next_id;
}

void names_set_next_id(struct names *n, uint64_t next)
{
	n->next_id = next;
}
