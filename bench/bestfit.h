/*
 * bestfit.h - the best-fit allocator rmemd used before TLSF (bench/bestfit.c),
 * under names of its own, for side-by-side benches.  Same contract as alloc.h
 * of its time (a release is checked only against the free ranges), but each
 * call takes the allocator as void *, the shape of the benches' table of
 * calls (allocops.h), which names these functions directly.  Only the stats
 * struct is the daemon's (alloc.h), so both fill the same figures.
 */
#ifndef RMEM_BENCH_BESTFIT_H
#define RMEM_BENCH_BESTFIT_H

#include <stdint.h>

#include "alloc.h"

/* A struct bestfit over [0, total), or NULL with errno set. */
void *bestfit_create(uint64_t total, uint64_t alignment);
void bestfit_destroy(void *bestfit);
int bestfit_reserve(void *bestfit, uint64_t size, uint64_t *offset, uint64_t *length);
int bestfit_release(void *bestfit, uint64_t offset, uint64_t length);
int bestfit_claim(void *bestfit, uint64_t offset, uint64_t length);
void bestfit_stats(const void *bestfit, struct alloc_stats *out);

#endif /* RMEM_BENCH_BESTFIT_H */
