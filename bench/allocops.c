/*
 * allocops.c - the allocator table of allocops.h: thin wrappers over the
 * daemon's alloc_* calls, so that its prototypes need no casting; the best
 * fit's own calls have the table's shape already (bestfit.h).
 */
#include "allocops.h"
#include "bestfit.h"

static void *tlsf_create(uint64_t total, uint64_t alignment)
{
	return alloc_new(total, alignment);
}

static void tlsf_destroy(void *a)
{
	alloc_free(a);
}

static int tlsf_reserve(void *a, uint64_t size, uint64_t *offset, uint64_t *length)
{
	return alloc_reserve(a, size, offset, length);
}

static int tlsf_release(void *a, uint64_t offset, uint64_t length)
{
	return alloc_release(a, offset, length);
}

static int tlsf_claim(void *a, uint64_t offset, uint64_t length)
{
	return alloc_claim(a, offset, length);
}

static void tlsf_stats(const void *a, struct alloc_stats *out)
{
	alloc_get_stats(a, out);
}

const struct alloc_ops alloc_ops[ALLOC_N] = {
	[ALLOC_TLSF] = { "tlsf", tlsf_create, tlsf_destroy, tlsf_reserve, tlsf_release,
			 tlsf_claim, tlsf_stats },
	[ALLOC_BESTFIT] = { "bestfit", bestfit_create, bestfit_destroy, bestfit_reserve,
			    bestfit_release, bestfit_claim, bestfit_stats },
};
