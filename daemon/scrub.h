/*
 * scrub.h - the free bytes of a pool taken back from the fd store, which
 * may still hold what their last owner wrote, zeroed after READY: by a
 * thread in the background, and by the allocation that reaches them first
 * (docs/architecture.md, "Invariant: a new owner only ever sees zeros").
 *
 * A scrub starts with the pool's dirty spans, the gaps between the ranges a
 * restore kept; nothing is ever added to them afterwards (a range freed
 * later is zeroed by its release, session.c's return_range).  A byte leaves
 * the dirty set exactly once, zeroed on the way out, by one of two hands:
 *  - scrub_take(), on the loop thread, for a range the allocator has just
 *    reserved, before the reply that names it: it waits for the thread's
 *    chunk when that overlaps the range, then zeroes what is still dirty;
 *  - the thread, a chunk at a time, taken out of the set under the lock
 *    and zeroed outside it (faulted in first: an adopted pool is locked on
 *    fault, not populated; pool.c).
 * The thread only ever writes bytes of the dirty set, which are free in the
 * allocator since the restore and never were a region's since: no region,
 * and so no range a transfer holds, is ever under its memset.
 *
 * Thread rules: scrub_take and scrub_progress on the loop thread; the
 * worker is the only other thread, and touches only the dirty spans.
 */
#ifndef RMEMD_SCRUB_H
#define RMEMD_SCRUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scrub;

/* A byte range of a pool, relative to its base. */
struct scrub_span {
	uint64_t off, len;
};

/*
 * Takes over the n spans (sorted by offset, disjoint; empty ones are
 * skipped) of the pool mapped at base, and starts the worker.  NULL with
 * errno set when memory or the thread cannot be had: the caller then zeroes
 * the spans itself (scrub_zero_now).
 */
struct scrub *scrub_start(uint8_t *base, uint32_t page_size, const struct scrub_span *sp,
			  size_t n);
/* Zeroes what of [off, off + len) is still dirty, before it is handed out. */
void scrub_take(struct scrub *s, uint64_t off, uint64_t len);
/* Bytes dirty at the start and bytes still dirty now; true once the worker
 * has finished (then *ms is how long it took). */
bool scrub_progress(struct scrub *s, uint64_t *total, uint64_t *left, int64_t *ms);
/* Stops the worker (a chunk in hand is finished first) and frees s: the
 * pool may be unmapped after.  Accepts NULL. */
void scrub_stop(struct scrub *s);

/* The spans zeroed here and now (without a worker). */
void scrub_zero_now(uint8_t *base, const struct scrub_span *sp, size_t n);

#endif /* RMEMD_SCRUB_H */
