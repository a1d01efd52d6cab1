/*
 * region.c - see region.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include "region.h"

#define HASH_MIN_BITS 10
/* Keys come from the kernel's CSPRNG in batches: one syscall per 1024 keys. */
#define KEY_BATCH 1024

struct region_table {
	struct region **buckets;
	unsigned bits;
	uint64_t count;
	uint64_t next_id;
	struct region *first, *last;
	uint32_t keys[KEY_BATCH];
	unsigned keys_left;
};

static size_t bucket_of(uint64_t id, unsigned bits)
{
	/* Ids are sequential; Fibonacci hashing spreads them over the buckets. */
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

struct region_table *region_table_new(void)
{
	struct region_table *t = calloc(1, sizeof *t);

	if (!t)
		return NULL;
	t->bits = HASH_MIN_BITS;
	t->buckets = calloc((size_t)1 << t->bits, sizeof *t->buckets);
	if (!t->buckets) {
		free(t);
		return NULL;
	}
	t->next_id = 1;
	return t;
}

void region_table_free(struct region_table *t)
{
	if (!t)
		return;
	for (struct region *r = t->first, *next; r; r = next) {
		next = r->next;
		free(r);
	}
	free(t->buckets);
	free(t);
}

static uint32_t next_key(struct region_table *t)
{
	if (!t->keys_left) {
		size_t got = 0;

		while (got < sizeof t->keys) {
			ssize_t n = getrandom((char *)t->keys + got, sizeof t->keys - got, 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				abort(); /* no entropy source: keys would be guessable */
			got += (size_t)n;
		}
		t->keys_left = KEY_BATCH;
	}
	return t->keys[--t->keys_left];
}

static void grow(struct region_table *t)
{
	unsigned bits = t->bits + 1;
	struct region **b = calloc((size_t)1 << bits, sizeof *b);

	if (!b)
		return; /* longer chains, still correct */
	for (struct region *r = t->first; r; r = r->next) {
		size_t i = bucket_of(r->id, bits);

		r->hash_next = b[i];
		b[i] = r;
	}
	free(t->buckets);
	t->buckets = b;
	t->bits = bits;
}

struct region *region_add(struct region_table *t, struct region_list *owner_list,
			  uint64_t owner, uint32_t pool, uint64_t offset, uint64_t length)
{
	struct region *r = calloc(1, sizeof *r);
	size_t i;

	if (!r)
		return NULL;
	r->id = t->next_id++;
	r->owner = owner;
	r->pool = pool;
	r->offset = offset;
	r->length = length;
	r->key = next_key(t);

	if (t->count >= ((uint64_t)1 << t->bits))
		grow(t);
	i = bucket_of(r->id, t->bits);
	r->hash_next = t->buckets[i];
	t->buckets[i] = r;

	r->prev = t->last;
	if (t->last)
		t->last->next = r;
	else
		t->first = r;
	t->last = r;

	r->owner_prev = owner_list->last;
	if (owner_list->last)
		owner_list->last->owner_next = r;
	else
		owner_list->first = r;
	owner_list->last = r;

	t->count++;
	return r;
}

void region_remove(struct region_table *t, struct region_list *owner_list, struct region *r)
{
	struct region **pp = &t->buckets[bucket_of(r->id, t->bits)];

	while (*pp != r)
		pp = &(*pp)->hash_next;
	*pp = r->hash_next;

	if (r->prev)
		r->prev->next = r->next;
	else
		t->first = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		t->last = r->prev;

	if (r->owner_prev)
		r->owner_prev->owner_next = r->owner_next;
	else
		owner_list->first = r->owner_next;
	if (r->owner_next)
		r->owner_next->owner_prev = r->owner_prev;
	else
		owner_list->last = r->owner_prev;

	t->count--;
	free(r);
}

struct region *region_find(const struct region_table *t, uint64_t id)
{
	struct region *r = t->buckets[bucket_of(id, t->bits)];

	while (r && r->id != id)
		r = r->hash_next;
	return r;
}

struct region *region_next_after(const struct region_table *t, uint64_t after)
{
	struct region *r = region_find(t, after);

	if (r)
		return r->next;
	/* "after" is gone (freed since the last page): walk from the nearest end. */
	if (!t->last || t->last->id <= after)
		return NULL;
	for (r = t->first; r && r->id <= after; r = r->next)
		;
	return r;
}

uint64_t region_count(const struct region_table *t)
{
	return t->count;
}
