/*
 * allocops.h - the two allocators the in-process benches compare, behind one
 * table: "tlsf" (daemon/alloc.c, what rmemd runs) and "bestfit" (bench/
 * bestfit.c, what it ran before).  Both go through the same indirect calls,
 * so the table's cost (a few ns a pair) weighs on both alike.
 */
#ifndef RMEM_BENCH_ALLOCOPS_H
#define RMEM_BENCH_ALLOCOPS_H

#include <stdint.h>

#include "alloc.h"

struct alloc_ops {
	const char *name;
	void *(*create)(uint64_t total, uint64_t alignment);
	void (*destroy)(void *a);
	int (*reserve)(void *a, uint64_t size, uint64_t *offset, uint64_t *length);
	int (*release)(void *a, uint64_t offset, uint64_t length);
	int (*claim)(void *a, uint64_t offset, uint64_t length);
	void (*stats)(const void *a, struct alloc_stats *out);
};

enum { ALLOC_TLSF, ALLOC_BESTFIT, ALLOC_N };
extern const struct alloc_ops alloc_ops[ALLOC_N];

#endif /* RMEM_BENCH_ALLOCOPS_H */
