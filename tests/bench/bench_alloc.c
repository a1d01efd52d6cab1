/*
 * bench_alloc.c - alloc_reserve + alloc_release pairs per second with about
 * a million live regions.  Not a test: it prints figures and checks nothing
 * beyond the calls' return codes.
 *
 *   cc -std=gnu11 -O2 -D_GNU_SOURCE -Idaemon -o /tmp/bench_alloc \
 *      tests/bench/bench_alloc.c daemon/alloc.c && /tmp/bench_alloc [live [pairs [which]]]
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"

struct live_range {
	uint64_t off;
	uint64_t len;
};

struct bench {
	const char *name;
	uint64_t align;
	uint64_t max_units;	/* sizes are 1..max_units alignment units */
	int release_first;	/* 1: free a random live region, then allocate;
				   0: allocate, then free that same region */
};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t random_size(const struct bench *b)
{
	return (1 + rnd() % b->max_units) * b->align;
}

static int run(const struct bench *b, size_t nlive, uint64_t pairs)
{
	/* Room for the live set plus half again, so fragmentation does not fail it. */
	uint64_t total = (uint64_t)nlive * (b->max_units + 1) / 2 * b->align * 3 / 2 +
			 b->max_units * b->align * 64;
	struct live_range *live = calloc(nlive, sizeof(*live));
	struct alloc *a = alloc_new(total, b->align);
	struct alloc_stats st;
	struct mallinfo2 before, after;
	uint64_t off, len;
	double t0, t1;
	int rc = 0;

	if (!live || !a) {
		fprintf(stderr, "out of memory\n");
		rc = -ENOMEM;
		goto out;
	}
	before = mallinfo2();
	for (size_t i = 0; i < nlive; i++)
		if ((rc = alloc_reserve(a, random_size(b), &live[i].off, &live[i].len)))
			goto fail;
	/* Scatter the live set: replace every region once in random order. */
	for (size_t n = 0; n < nlive; n++) {
		size_t i = rnd() % nlive;

		if ((rc = alloc_release(a, live[i].off, live[i].len)) ||
		    (rc = alloc_reserve(a, random_size(b), &live[i].off, &live[i].len)))
			goto fail;
	}
	t0 = now();
	for (uint64_t n = 0; n < pairs; n++) {
		size_t i = rnd() % nlive;

		if (b->release_first) {
			if ((rc = alloc_release(a, live[i].off, live[i].len)) ||
			    (rc = alloc_reserve(a, random_size(b), &live[i].off, &live[i].len)))
				goto fail;
		} else {
			if ((rc = alloc_reserve(a, random_size(b), &off, &len)) ||
			    (rc = alloc_release(a, off, len)))
				goto fail;
		}
	}
	t1 = now();
	after = mallinfo2();
	alloc_get_stats(a, &st);
	printf("%-34s %zu live, %9" PRIu64 " free ranges: %6.2f M pairs/s (%5.1f ns/pair), "
	       "%.1f heap bytes per free range\n", b->name, nlive, st.free_ranges,
	       (double)pairs / (t1 - t0) / 1e6, (t1 - t0) * 1e9 / (double)pairs,
	       st.free_ranges ? (double)(after.uordblks - before.uordblks) /
				(double)st.free_ranges : 0.0);
	goto out;
fail:
	fprintf(stderr, "%s: %s\n", b->name, strerror(-rc));
out:
	alloc_free(a);
	free(live);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct bench benches[] = {
		{ "fixed 4 KiB, free random+alloc", 4096, 1, 1 },
		{ "1-16 x 64 B, free random+alloc", 64, 16, 1 },
		{ "1-16 x 64 B, alloc+free same", 64, 16, 0 },
		{ "1-256 x 4 KiB, free random+alloc", 4096, 256, 1 },
	};
	size_t nlive = 1000000, only = SIZE_MAX;
	uint64_t pairs = 10000000;
	int rc = 0;

	if (argc > 1)
		nlive = strtoull(argv[1], NULL, 10);
	if (argc > 2)
		pairs = strtoull(argv[2], NULL, 10);
	if (argc > 3)
		only = strtoull(argv[3], NULL, 10);
	if (!nlive || !pairs) {
		fprintf(stderr, "usage: bench_alloc [live [pairs [which]]]\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		if (only == SIZE_MAX || only == i)
			rc |= run(&benches[i], nlive, pairs);
	return rc ? 1 : 0;
}
