/*
 * bestfit.h - the best-fit allocator rmemd used before TLSF (bench/bestfit.c),
 * under bf_ names, for side-by-side benches.  Same contract as alloc.h of its
 * time: a release is checked only against the free ranges.
 */
#ifndef RMEM_BENCH_BESTFIT_H
#define RMEM_BENCH_BESTFIT_H

#include <stdint.h>

#include "alloc.h"

struct bf_alloc;

struct bf_alloc *bf_alloc_new(uint64_t total, uint64_t alignment);
void bf_alloc_free(struct bf_alloc *a);
int bf_alloc_reserve(struct bf_alloc *a, uint64_t size, uint64_t *offset, uint64_t *length);
int bf_alloc_release(struct bf_alloc *a, uint64_t offset, uint64_t length);
int bf_alloc_claim(struct bf_alloc *a, uint64_t offset, uint64_t length);
void bf_alloc_get_stats(const struct bf_alloc *a, struct alloc_stats *out);

#endif /* RMEM_BENCH_BESTFIT_H */
