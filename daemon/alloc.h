/*
 * alloc.h - a pure range allocator for one pinned pool (no I/O, no RDMA).
 *
 * Best fit with coalescing, in the spirit of the BFC allocator: free ranges
 * are kept in two balanced trees, one ordered by (length, offset) to find the
 * best fit and one ordered by offset to find neighbours to merge with.  Live
 * allocations cost the allocator nothing: the caller (the region table)
 * remembers (offset, length) and hands both back to alloc_release().
 * Every operation is O(log n) in the number of free ranges.
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
	uint64_t largest_free; /* longest single free range */
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
 * range is long enough, -EINVAL for size 0 or a size that overflows when
 * rounded. */
int alloc_reserve(struct alloc *a, uint64_t size, uint64_t *offset, uint64_t *length);

/* Returns a range previously reserved (offset and the length alloc_reserve
 * gave).  -EINVAL, changing nothing, when the range is misaligned, out of the
 * pool, or overlaps a free range (a double release).  Whether it is exactly
 * one reserved range is the caller's to know: two neighbouring live ranges
 * released as one are accepted.  -ENOMEM, changing nothing, when the range
 * touches no free range and the ~64-byte node to track it cannot be
 * allocated (a later retry may succeed). */
int alloc_release(struct alloc *a, uint64_t offset, uint64_t length);

/* Reserves exactly [offset, offset + length), which must lie in one free
 * range: a restore rebuilds the allocator from the ranges the persistent
 * state names (persist.c).  0; -EINVAL, changing nothing, when the range is
 * empty, misaligned or out of the pool; -EEXIST when part of it is not free
 * (reserved or claimed already: two ranges of the state overlap); -ENOMEM
 * when a node to split the free range cannot be allocated.  The range is
 * released as any reserved one (alloc_release). */
int alloc_claim(struct alloc *a, uint64_t offset, uint64_t length);

/* O(1): cheap enough to call on every request. */
void alloc_get_stats(const struct alloc *a, struct alloc_stats *out);
uint64_t alloc_alignment(const struct alloc *a);

#endif /* RMEMD_ALLOC_H */
