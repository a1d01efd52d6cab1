/*
 * names.c - see names.h.
 *
 * Two chained hashes of pointers, each doubled when it is as full as it is
 * wide: linked objects by (namespace, name), handles by region id.  Named
 * regions are few next to anonymous ones and are made by a round trip each,
 * so malloc per object and per handle is cheap enough; what must stay fast
 * is the region table, which this keeps out of.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

#define HASH_MIN_BITS 6

struct names {
	struct name_obj **by_name;
	unsigned name_bits;
	uint64_t linked;
	struct name_handle **by_id;
	unsigned id_bits;
	uint64_t nhandles;
	struct name_obj *first, *last;  /* id order, unlinked ones too */
	uint64_t count;
	uint64_t next_id;
};

static size_t slot_of(uint64_t h, unsigned bits)
{
	return (size_t)((h * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* FNV-1a over the namespace's address and the name's bytes. */
static uint64_t name_hash(const struct config_tenant *ns, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)(uintptr_t)ns;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
	return h;
}

static size_t obj_slot(const struct name_obj *o, unsigned bits)
{
	return slot_of(name_hash(o->ns, o->name, o->name_len), bits);
}

struct names *names_new(void)
{
	struct names *n = calloc(1, sizeof *n);

	if (!n)
		return NULL;
	n->name_bits = n->id_bits = HASH_MIN_BITS;
	n->by_name = calloc((size_t)1 << n->name_bits, sizeof *n->by_name);
	n->by_id = calloc((size_t)1 << n->id_bits, sizeof *n->by_id);
	if (!n->by_name || !n->by_id) {
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
	free(n->by_name);
	free(n->by_id);
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

int names_access_valid(uint32_t access)
{
	const uint32_t all = PROTO_ACCESS_READ | PROTO_ACCESS_WRITE;

	return access && !(access & ~all) ? 0 : -EINVAL;
}

/* ---- objects by name ------------------------------------------------------------ */

static void name_grow(struct names *n)
{
	unsigned bits = n->name_bits + 1;
	struct name_obj **b = calloc((size_t)1 << bits, sizeof *b);

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < (size_t)1 << n->name_bits; i++) {
		for (struct name_obj *o = n->by_name[i], *next; o; o = next) {
			size_t j = obj_slot(o, bits);

			next = o->hash_next;
			o->hash_next = b[j];
			b[j] = o;
		}
	}
	free(n->by_name);
	n->by_name = b;
	n->name_bits = bits;
}

struct name_obj *names_lookup(const struct names *n, const struct config_tenant *ns,
			      const char *name, size_t len)
{
	struct name_obj *o = n->by_name[slot_of(name_hash(ns, name, len), n->name_bits)];

	for (; o; o = o->hash_next)
		if (o->ns == ns && o->name_len == len && !memcmp(o->name, name, len))
			return o;
	return NULL;
}

struct name_obj *names_add(struct names *n, const struct config_tenant *ns, const char *name,
			   size_t len, uint32_t pool, uint64_t offset, uint64_t length,
			   const struct config_tenant *charged, uint64_t now_ns)
{
	struct name_obj *o;
	size_t i;

	if (names_valid(name, len) < 0) {
		errno = EINVAL;
		return NULL;
	}
	if (names_lookup(n, ns, name, len)) {
		errno = EEXIST;
		return NULL;
	}
	o = calloc(1, sizeof *o);
	if (!o) {
		errno = ENOMEM;
		return NULL;
	}
	*o = (struct name_obj){ .id = n->next_id++, .ns = ns, .charged = charged, .pool = pool,
				.offset = offset, .length = length, .created_ns = now_ns,
				.name_len = (uint16_t)len };
	memcpy(o->name, name, len);
	if (n->linked >= (uint64_t)1 << n->name_bits)
		name_grow(n);
	i = obj_slot(o, n->name_bits);
	o->hash_next = n->by_name[i];
	n->by_name[i] = o;
	n->linked++;
	o->prev = n->last;
	if (n->last)
		n->last->next = o;
	else
		n->first = o;
	n->last = o;
	n->count++;
	return o;
}

void names_unlink(struct names *n, struct name_obj *o)
{
	struct name_obj **pp;

	if (o->unlinked)
		return;
	pp = &n->by_name[obj_slot(o, n->name_bits)];
	while (*pp != o)
		pp = &(*pp)->hash_next;
	*pp = o->hash_next;
	o->hash_next = NULL;
	o->unlinked = true;
	n->linked--;
}

void names_remove(struct names *n, struct name_obj *o)
{
	names_unlink(n, o);
	while (o->first_handle)
		names_handle_remove(n, o->first_handle);
	if (o->prev)
		o->prev->next = o->next;
	else
		n->first = o->next;
	if (o->next)
		o->next->prev = o->prev;
	else
		n->last = o->prev;
	n->count--;
	free(o);
}

/* ---- handles by region id ------------------------------------------------------- */

static void id_grow(struct names *n)
{
	unsigned bits = n->id_bits + 1;
	struct name_handle **b = calloc((size_t)1 << bits, sizeof *b);

	if (!b)
		return;
	for (size_t i = 0; i < (size_t)1 << n->id_bits; i++) {
		for (struct name_handle *h = n->by_id[i], *next; h; h = next) {
			size_t j = slot_of(h->region_id, bits);

			next = h->hash_next;
			h->hash_next = b[j];
			b[j] = h;
		}
	}
	free(n->by_id);
	n->by_id = b;
	n->id_bits = bits;
}

struct name_handle *names_handle_find(const struct names *n, uint64_t region_id)
{
	struct name_handle *h = n->by_id[slot_of(region_id, n->id_bits)];

	while (h && h->region_id != region_id)
		h = h->hash_next;
	return h;
}

int names_handle_add(struct names *n, struct name_obj *o, uint64_t region_id, uint32_t access,
		     void *holder)
{
	struct name_handle *h;
	size_t i;

	if (names_access_valid(access) < 0)
		return -EINVAL;
	if (names_handle_find(n, region_id))
		return -EEXIST;
	h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	*h = (struct name_handle){ .region_id = region_id, .access = access, .obj = o,
				   .holder = holder };
	if (n->nhandles >= (uint64_t)1 << n->id_bits)
		id_grow(n);
	i = slot_of(region_id, n->id_bits);
	h->hash_next = n->by_id[i];
	n->by_id[i] = h;
	n->nhandles++;
	h->obj_next = o->first_handle;
	if (o->first_handle)
		o->first_handle->obj_prev = h;
	o->first_handle = h;
	o->handles++;
	return 0;
}

void names_handle_remove(struct names *n, struct name_handle *h)
{
	struct name_handle **pp = &n->by_id[slot_of(h->region_id, n->id_bits)];

	while (*pp != h)
		pp = &(*pp)->hash_next;
	*pp = h->hash_next;
	n->nhandles--;
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
	return n->nhandles;
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
