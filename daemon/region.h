/*
 * region.h - the region table: id -> (pool, range, key, owner).
 *
 * Ids come from a counter and are never reused while the daemon runs.  Regions
 * sit in a hash on id for O(1) lookup on every request, in one list in id
 * order (ids only grow, so appending keeps it sorted) for listings, and in
 * their owner's list so a session can drop all its regions at once.
 * Pure bookkeeping: no pool memory, no I/O.
 *
 * Memory: a region is one 56-byte entry in a slab (no malloc header per
 * region) plus a 4-byte hash bucket at load factor 0.5 to 1; the links are
 * 32-bit slot numbers, not pointers.  Entries never move, so a struct
 * region * stays valid until that region is removed.  The slab keeps its
 * high-water mark: slots freed are reused, memory is not given back until
 * region_table_free().
 */
#ifndef RMEMD_REGION_H
#define RMEMD_REGION_H

#include <stddef.h>
#include <stdint.h>

/* What an entry can hold: pools are numbered below 2^14 (config: at most
 * CONFIG_MAX_POOLS), offsets are below 2^50 (config: a pool is at most
 * 1 PiB).  region_add() refuses anything else. */
#define REGION_POOL_BITS   14
#define REGION_OFFSET_BITS 50

/* An owner's list of regions; owners embed one, zeroed = empty.  Its fields
 * are the table's: walk it with region_owner_first() / region_owner_next(). */
struct region_list {
	uint32_t first, last;
};

struct region {
	uint64_t id;
	uint64_t owner;      /* session id */
	uint64_t offset : REGION_OFFSET_BITS; /* within the pool */
	uint64_t pool : REGION_POOL_BITS;
	uint64_t length : 63; /* < 2^51: a pool is at most 1 PiB */
	uint64_t named : 1;   /* a handle of a named region (names.h has its
				 access and object); set by the caller */
	uint32_t key;
	/* The table's own links (slot numbers, 0 = none): use the calls below. */
	struct {
		uint32_t hash_next;
		uint32_t prev, next;             /* table order (by id); free list */
		uint32_t owner_prev, owner_next; /* owner's list */
	} link;
};

struct region_table;

struct region_table *region_table_new(void);
/* Frees the table and every region still in it.  Accepts NULL. */
void region_table_free(struct region_table *t);

/* Adds a region with a fresh id and a random key; links it into owner_list.
 * Returns NULL with errno ENOMEM when out of memory (or out of the 2^32 - 1
 * slots), ERANGE when pool or offset do not fit the entry (see above). */
struct region *region_add(struct region_table *t, struct region_list *owner_list,
			  uint64_t owner, uint32_t pool, uint64_t offset, uint64_t length);
/* Unlinks and frees r. */
void region_remove(struct region_table *t, struct region_list *owner_list, struct region *r);
struct region *region_find(const struct region_table *t, uint64_t id);
/* The first region with id > after, or NULL. */
struct region *region_next_after(const struct region_table *t, uint64_t after);
/* The region after r in id order, or NULL. */
struct region *region_next(const struct region_table *t, const struct region *r);
/* The oldest region of an owner's list, or NULL when it is empty. */
struct region *region_owner_first(const struct region_table *t, const struct region_list *l);
/* The region after r in its owner's list, or NULL. */
struct region *region_owner_next(const struct region_table *t, const struct region *r);
uint64_t region_count(const struct region_table *t);
/* Bytes the table holds: its slab (the high-water mark of regions), hash and
 * itself.  The slab is not on malloc's books: this is the one measure. */
size_t region_table_memory(const struct region_table *t);

/* A fresh random key (REKEY). */
uint32_t region_new_key(struct region_table *t);
/* The id the next region_add gives, and setting it: a restore (persist.c)
 * adds the saved regions in id order, each at its own id, then moves the
 * counter past every id the old process may have handed out.  Ids must only
 * grow: the table's list stays in id order. */
uint64_t region_table_next_id(const struct region_table *t);
void region_table_set_next_id(struct region_table *t, uint64_t next);

#endif /* RMEMD_REGION_H */
