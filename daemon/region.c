/*
 * region.c - see region.h.
 *
 * Entries live in a slab: one range of address space for every 32-bit slot
 * number (224 GiB), reserved with no access, so no memory and no commit
 * charge, and made readable and writable 64 KiB at a time as the table
 * grows.  Entries never move, and an entry is the slab's base plus 56 times
 * its slot: a find costs the two cache misses it always did (bucket, entry),
 * no directory to load in between.  Where the address space is limited
 * (RLIMIT_AS, valgrind) the slab is smaller (reserve_slab()), and so is the
 * most regions the table holds.  Slot 0 is never handed out, so 0 means
 * "none" in every link and a zeroed region_list is empty.  Free slots (id 0)
 * are chained through their owner field and reused last in, first out, while
 * they are still in the cache.
 *
 * Under AddressSanitizer all of a slot but its id and that chain is poisoned
 * while the slot is free: a caller that uses a region after removing it is
 * caught as it would be after free().
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "randbytes.h"
#include "region.h"

#if defined(__SANITIZE_ADDRESS__)
#define REGION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REGION_ASAN 1
#endif
#endif

#ifdef REGION_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HASH_MIN_BITS 10
/* Keys come from the kernel's CSPRNG in batches: one syscall per 1024 keys. */
#define KEY_BATCH 1024
/* Slots the slab reserves room for: all 2^32 at best, 2^16 at least. */
#define SLAB_MAX_SHIFT 32
#define SLAB_MIN_SHIFT 16
/* A multiple of every page size Linux uses, and little waste at a few regions. */
#define COMMIT_BYTES ((size_t)64 << 10)
#define NONE 0u

_Static_assert(sizeof(struct region) == 56, "a region entry is 56 bytes");
/* What a free slot keeps readable: its id (0) and the free chain. */
#define FREE_KEEP (offsetof(struct region, owner) + sizeof(uint64_t))
_Static_assert(offsetof(struct region, id) == 0 && FREE_KEEP == 16, "id, owner first");
_Static_assert(sizeof(size_t) == 8, "the slab reserves more than 4 GiB of address space");
_Static_assert(((sizeof(struct region) << SLAB_MIN_SHIFT) % COMMIT_BYTES) == 0,
	       "a reservation is whole commits");

struct region_table {
	struct region *slab;
	size_t reserved;         /* bytes of address space at slab */
	size_t committed;        /* bytes of it usable so far */
	uint64_t fresh;          /* slots below it have been handed out before */
	uint32_t free;           /* free slots, through their owner field */
	uint32_t *buckets;       /* slot of each chain's first region */
	unsigned bits;
	uint64_t count;
	uint64_t next_id;
	uint32_t first, last;    /* id order */
	uint32_t keys[KEY_BATCH];
	unsigned keys_left;
};

static inline struct region *at(const struct region_table *t, uint32_t slot)
{
	return &t->slab[slot];
}

static inline struct region *at_or_null(const struct region_table *t, uint32_t slot)
{
	return slot == NONE ? NULL : at(t, slot);
}

static inline size_t bucket_of(uint64_t id, unsigned bits)
{
	/* Ids are sequential; Fibonacci hashing spreads them over the buckets. */
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static void *reserve(unsigned shift)
{
	void *p = mmap(NULL, sizeof(struct region) << shift, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Address space for the slab; no memory yet.  Room for every slot number
 * when it can be had; else half the largest reservation that fits, so the
 * rest of the daemon keeps as much address space as the table takes.
 */
static int reserve_slab(struct region_table *t)
{
	unsigned shift = SLAB_MAX_SHIFT;
	void *p;

	while (!(p = reserve(shift)))
		if (--shift < SLAB_MIN_SHIFT)
			return -ENOMEM;
	if (shift < SLAB_MAX_SHIFT && shift > SLAB_MIN_SHIFT) {
		munmap(p, sizeof(struct region) << shift);
		p = reserve(--shift);
		if (!p)
			return -ENOMEM;
	}
	t->slab = p;
	t->reserved = sizeof(struct region) << shift;
	return 0;
}

/* Makes the next COMMIT_BYTES of the slab usable. */
static int commit_more(struct region_table *t)
{
	char *end = (char *)t->slab + t->committed;

	if (t->committed == t->reserved ||
	    mprotect(end, COMMIT_BYTES, PROT_READ | PROT_WRITE) < 0)
		return -ENOMEM;
	POISON(end, COMMIT_BYTES);
	t->committed += COMMIT_BYTES;
	return 0;
}

struct region_table *region_table_new(void)
{
	struct region_table *t = calloc(1, sizeof *t);

	if (!t)
		return NULL;
	t->bits = HASH_MIN_BITS;
	t->buckets = calloc((size_t)1 << t->bits, sizeof *t->buckets);
	if (!t->buckets || reserve_slab(t) < 0) {
		free(t->buckets);
		free(t);
		return NULL;
	}
	t->fresh = 1; /* slot 0 is "none" */
	t->next_id = 1;
	return t;
}

void region_table_free(struct region_table *t)
{
	if (!t)
		return;
	/* The shadow must not outlive the mapping: the next mmap may land here. */
	UNPOISON(t->slab, t->committed);
	munmap(t->slab, t->reserved);
	free(t->buckets);
	free(t);
}

size_t region_table_memory(const struct region_table *t)
{
	return sizeof *t + ((size_t)1 << t->bits) * sizeof *t->buckets + t->committed;
}

static uint32_t next_key(struct region_table *t)
{
	if (!t->keys_left) {
		if (rand_bytes(t->keys, sizeof t->keys) < 0)
			abort(); /* no entropy source: keys would be guessable */
		t->keys_left = KEY_BATCH;
	}
	return t->keys[--t->keys_left];
}

/* Makes the never-used slot t->fresh usable: a slot number fits in 32 bits
 * (0 excluded) and its entry in what is committed. */
static int fresh_slot_ready(struct region_table *t)
{
	if (t->fresh > UINT32_MAX)
		return -ENOMEM;
	if ((t->fresh + 1) * sizeof(struct region) > t->committed)
		return commit_more(t);
	return 0;
}

/* A slot for a new region: the last one freed, else the next fresh one. */
static uint32_t take_slot(struct region_table *t)
{
	uint32_t slot = t->free;

	if (slot != NONE) {
		t->free = (uint32_t)at(t, slot)->owner;
	} else {
		if (fresh_slot_ready(t) < 0)
			return NONE;
		slot = (uint32_t)t->fresh++;
	}
	UNPOISON(at(t, slot), sizeof(struct region));
	return slot;
}

static void give_slot(struct region_table *t, struct region *r, uint32_t slot)
{
	r->id = 0;
	r->owner = t->free;
	t->free = slot;
	POISON((char *)r + FREE_KEEP, sizeof *r - FREE_KEEP);
}

/* Every live entry into a table twice as big.  The slab is walked in memory
 * order, not by following links: one pass over memory, not a cache miss per
 * region. */
static void grow(struct region_table *t)
{
	unsigned bits = t->bits + 1;
	uint32_t *b = calloc((size_t)1 << bits, sizeof *b);

	if (!b)
		return; /* longer chains, still correct */
	for (uint64_t slot = 1; slot < t->fresh; slot++) {
		struct region *r = at(t, (uint32_t)slot);
		size_t i;

		if (r->id == 0)
			continue;
		i = bucket_of(r->id, bits);
		r->link.hash_next = b[i];
		b[i] = (uint32_t)slot;
	}
	free(t->buckets);
	t->buckets = b;
	t->bits = bits;
}

/* A region's links in one of its two lists: the table's (id order) or, with
 * owner, its owner's. */
static inline uint32_t *prev_of(struct region *r, bool owner)
{
	return owner ? &r->link.owner_prev : &r->link.prev;
}

static inline uint32_t *next_of(struct region *r, bool owner)
{
	return owner ? &r->link.owner_next : &r->link.next;
}

/* slot appended to the list that runs *first .. *last (0: empty). */
static inline void list_append(struct region_table *t, uint32_t *first, uint32_t *last,
			       uint32_t slot, bool owner)
{
	*prev_of(at(t, slot), owner) = *last;
	if (*last)
		*next_of(at(t, *last), owner) = slot;
	else
		*first = slot;
	*last = slot;
}

/* r taken out of the list that runs *first .. *last. */
static inline void list_remove(struct region_table *t, uint32_t *first, uint32_t *last,
			       struct region *r, bool owner)
{
	uint32_t prev = *prev_of(r, owner), next = *next_of(r, owner);

	if (prev)
		*next_of(at(t, prev), owner) = next;
	else
		*first = next;
	if (next)
		*prev_of(at(t, next), owner) = prev;
	else
		*last = prev;
}

struct region *region_add(struct region_table *t, struct region_list *owner_list,
			  uint64_t owner, uint32_t pool, uint64_t offset, uint64_t length)
{
	uint32_t slot;
	struct region *r;
	size_t i;

	if (pool >> REGION_POOL_BITS || offset >> REGION_OFFSET_BITS) {
		errno = ERANGE;
		return NULL;
	}
	if (t->count >= ((uint64_t)1 << t->bits))
		grow(t);
	slot = take_slot(t);
	if (slot == NONE) {
		errno = ENOMEM;
		return NULL;
	}
	r = at(t, slot);
	*r = (struct region){ .id = t->next_id++, .owner = owner, .offset = offset,
			      .pool = pool, .length = length, .key = next_key(t) };
	i = bucket_of(r->id, t->bits);
	r->link.hash_next = t->buckets[i];
	t->buckets[i] = slot;

	list_append(t, &t->first, &t->last, slot, false);
	list_append(t, &owner_list->first, &owner_list->last, slot, true);

	t->count++;
	return r;
}

/* Takes r off its hash chain and returns its slot: the chain is the one
 * place that knows it. */
static uint32_t unhash(struct region_table *t, const struct region *r)
{
	uint32_t *pp = &t->buckets[bucket_of(r->id, t->bits)];
	uint32_t slot;

	while (at(t, *pp) != r)
		pp = &at(t, *pp)->link.hash_next;
	slot = *pp;
	*pp = r->link.hash_next;
	return slot;
}

void region_remove(struct region_table *t, struct region_list *owner_list, struct region *r)
{
	uint32_t slot = unhash(t, r);

	list_remove(t, &t->first, &t->last, r, false);
	list_remove(t, &owner_list->first, &owner_list->last, r, true);

	t->count--;
	give_slot(t, r, slot);
}

struct region *region_find(const struct region_table *t, uint64_t id)
{
	uint32_t slot = t->buckets[bucket_of(id, t->bits)];

	while (slot != NONE) {
		struct region *r = at(t, slot);

		if (r->id == id)
			return r;
		slot = r->link.hash_next;
	}
	return NULL;
}

struct region *region_next(const struct region_table *t, const struct region *r)
{
	return at_or_null(t, r->link.next);
}

struct region *region_next_after(const struct region_table *t, uint64_t after)
{
	struct region *r = after ? region_find(t, after) : NULL;

	if (r)
		return region_next(t, r);
	/* "after" is gone (freed since the last page): walk from the nearest end. */
	if (!t->last || at(t, t->last)->id <= after)
		return NULL;
	for (r = at(t, t->first); r && r->id <= after; r = region_next(t, r))
		;
	return r;
}

struct region *region_owner_first(const struct region_table *t, const struct region_list *l)
{
	return at_or_null(t, l->first);
}

struct region *region_owner_next(const struct region_table *t, const struct region *r)
{
	return at_or_null(t, r->link.owner_next);
}

uint64_t region_count(const struct region_table *t)
{
	return t->count;
}

/* ---- restart without loss (persist.c) ---------------------------------------- */

uint32_t region_new_key(struct region_table *t)
{
	return next_key(t);
}

uint64_t region_table_next_id(const struct region_table *t)
{
	return t->next_id;
}

void region_table_set_next_id(struct region_table *t, uint64_t next)
{
	t->next_id = next;
}
