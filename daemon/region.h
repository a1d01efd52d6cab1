/*
 * region.h - the region table: id -> (pool, range, key, owner).
 *
 * Ids come from a counter and are never reused while the daemon runs.  Regions
 * sit in a hash on id for O(1) lookup on every request, in one list in id
 * order (ids only grow, so appending keeps it sorted) for listings, and in
 * their owner's list so a session can drop all its regions at once.
 * Pure bookkeeping: no pool memory, no I/O.
 */
#ifndef RMEMD_REGION_H
#define RMEMD_REGION_H

#include <stdint.h>

struct region;

/* A doubly linked list head; owners embed one. */
struct region_list {
	struct region *first, *last;
};

struct region {
	uint64_t id;
	uint64_t offset;     /* within the pool */
	uint64_t length;
	uint64_t owner;      /* session id */
	uint32_t pool;
	uint32_t key;
	struct region *hash_next;
	struct region *prev, *next;             /* table order (by id) */
	struct region *owner_prev, *owner_next; /* owner's list */
};

struct region_table;

struct region_table *region_table_new(void);
/* Frees the table and every region still in it.  Accepts NULL. */
void region_table_free(struct region_table *t);

/* Adds a region with a fresh id and a random key; links it into owner_list.
 * Returns NULL (errno ENOMEM) when out of memory. */
struct region *region_add(struct region_table *t, struct region_list *owner_list,
			  uint64_t owner, uint32_t pool, uint64_t offset, uint64_t length);
/* Unlinks and frees r. */
void region_remove(struct region_table *t, struct region_list *owner_list, struct region *r);
struct region *region_find(const struct region_table *t, uint64_t id);
/* The first region with id > after, or NULL. */
struct region *region_next_after(const struct region_table *t, uint64_t after);
uint64_t region_count(const struct region_table *t);

#endif /* RMEMD_REGION_H */
