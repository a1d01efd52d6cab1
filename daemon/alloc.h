/*
 * alloc.h - a pure range allocator for one pinned pool: a bucketed
 * two-level segregated fit (TLSF) table of free ranges, no I/O, no RDMA.
 *
 * Two-level segregated fit (TLSF, Masmano et al. 2004) with immediate
 * coalescing.  Free ranges sit in lists by size class; two bitmaps (which
 * first-level classes, and within each which second-level classes, hold a
 * free range) find a non-empty class with a few bit scans.  A reserve takes a
 * range of the smallest class whose every member is long enough ("good fit":
 * at most 1/32 longer than the request, rounded up to its class), after
 * trying the head of the request's own class.  A release finds its free
 * neighbours through hashes of free range starts and ends.  All metadata
 * lives in the daemon's heap, never in the pool: clients write the pool.
 *
 * Live ranges cost the allocator nothing: the caller (the region table)
 * remembers (offset, length) and hands both back to alloc_release(), and is
 * the authority on what is live.
 *
 * Cost: reserve and release are O(1) (hash tables: expected, and amortized
 * over their doubling), except for one case: when the only free ranges that
 * can hold a request share its size class, that class's list is scanned.
 *
 * Offsets are relative to the start of the pool.  Every range starts and ends
 * on the allocator's alignment (a power of two), so lengths are rounded up.
 * Not thread-safe; rmemd runs it on its event loop thread.
 */
#ifndef RMEMD_ALLOC_H
#define RMEMD_ALLOC_H

#include <stdint.h>

struct alloc;

struct alloc_stats {
	uint64_t total;        /* bytes managed (pool size rounded down to alignment) */
	uint64_t used;         /* bytes in live allocations */
	uint64_t free;         /* total - used */
	uint64_t largest_free; /* longest single free range (exact) */
	uint64_t live;         /* live allocations */
	uint64_t peak_used;    /* highest used since alloc_new */
	uint64_t free_ranges;  /* number of free ranges (fragmentation figure) */
};

/* A new allocator over [0, total).  alignment: a power of two >= 8.
 * Returns NULL with errno set (EINVAL, ENOMEM). */
struct alloc *alloc_new(uint64_t total, uint64_t alignment);
/* Accepts NULL. */
void alloc_free(struct alloc *a);

/* Reserves at least size bytes (size > 0).  On success stores the offset and
 * the rounded length actually reserved and returns 0; -ENOMEM when no free
 * range is long enough or the metadata cannot grow, -EINVAL for size 0 or a
 * size that overflows when rounded.  A failure changes nothing. */
int alloc_reserve(struct alloc *a, uint64_t size, uint64_t *offset, uint64_t *length);

/* Returns a range previously reserved or claimed (offset and the length
 * alloc_reserve gave).  -EINVAL, changing nothing, when the range is
 * misaligned, out of the pool, when nothing is live, or when a free range
 * starts at offset or ends at offset + length (the double release of a range
 * that has not merged on both sides).  A range strictly inside a free range
 * or around one is not caught in O(1): that is the caller's to know, as is
 * whether it is exactly one reserved range (builds with -DALLOC_DEBUG keep a
 * table of live ranges and refuse anything else).  -ENOMEM, changing
 * nothing, when the metadata to track the new free range cannot grow (a
 * later retry may succeed). */
int alloc_release(struct alloc *a, uint64_t offset, uint64_t length);

/* Reserves exactly [offset, offset + length), which must lie in one free
 * range: a restore rebuilds the allocator from the ranges the persistent
 * state names (persist.c), in any order.  0; -EINVAL, changing nothing, when
 * the range is empty, misaligned or out of the pool; -EEXIST when part of it
 * is not free (reserved or claimed already: two ranges of the state overlap);
 * -ENOMEM when the metadata cannot grow.  The range is released as any
 * reserved one (alloc_release).  Claims in a row share an index of the free
 * ranges by offset, built on the first one: O(log n) each. */
int alloc_claim(struct alloc *a, uint64_t offset, uint64_t length);

/* O(1): cheap enough to call on every request. */
void alloc_get_stats(const struct alloc *a, struct alloc_stats *out);
uint64_t alloc_alignment(const struct alloc *a);

#endif /* RMEMD_ALLOC_H */
