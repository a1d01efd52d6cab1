/*
 * allocfrag.c - what the allocator's policy costs in pool bytes, and what a
 * restore costs in time: rmemd's TLSF (daemon/alloc.c) against the best fit it
 * replaced (bench/bestfit.c), on the very same traces.  A benchmark: it prints
 * figures and a verdict per target, and asserts nothing beyond return codes.
 *
 * Fragmentation: peak pool footprint (the highest offset + length any reserve
 * ever returned) over peak live bytes.  Both allocators replay one trace: the
 * trace's choices (sizes, which live range goes) come from its own random
 * stream, never from the allocator's answers.  Target (issue 13): TLSF's
 * figure within 5% of best fit's on each trace.
 *   mixed   random sizes, log-uniform 64 B .. 256 KiB, random lifetimes:
 *           each release picks a uniformly random live range.
 *   kvcache blocks of 64 KiB x U(1..32) (64 KiB .. 2 MiB), mostly FIFO
 *           lifetimes: 90% of releases take the oldest live block, 10% a
 *           random one (a request cut short).
 * In both the live count swings in phases of growth and shrinkage under a
 * cap that rises from N/2 to N over the trace, so each new peak of live
 * bytes is reached on a pool already cut up by the churn before it (a peak
 * reached while the pool is still fresh says nothing about fragmentation).
 *
 * Restore: alloc_claim of N ranges that tile the front of a pool with gaps,
 * in offset order and in random order, ms for all of them.
 *
 *   allocfrag [-n OPS] [--json]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocops.h"
#include "benchutil.h"

#define ALIGN 64
#define POOL (1ull << 44)	/* offsets only: never touched, never short */
#define FRAG_TARGET 1.05
#define CLAIMS 1000000

enum trace { T_MIXED, T_KV, T_N };
static const char *const trace_name[T_N] = { "mixed", "kvcache" };

struct live_range {
	uint64_t off;
	uint64_t len;
};

struct frag {
	uint64_t peak_live;
	uint64_t peak_end;
	uint64_t free_ranges;	/* at the end of the trace */
};

static uint64_t trace_size(enum trace t, uint64_t *rng)
{
	if (t == T_KV)
		return (1 + bench_rnd(rng) % 32) << 16;
	/* log-uniform: 2^(6 + U[0, 12)) scaled by 1..2 */
	return (64ull << (bench_rnd(rng) % 12)) * (64 + bench_rnd(rng) % 64) / 64;
}

/*
 * One trace through one allocator.  The live ranges sit in a ring in the
 * order they were made, so "the oldest" is its head; a random release moves
 * the head into the hole it leaves.
 */
static int replay(const struct alloc_ops *ops, enum trace t, uint64_t n, uint64_t ops_count,
		  struct frag *out)
{
	struct live_range *ring = calloc(n, sizeof(*ring));
	void *a = ops->create(POOL, ALIGN);
	uint64_t rng = 0x243f6a8885a308d3ULL + t, head = 0, count = 0, used = 0;
	struct alloc_stats st;
	int rc = -ENOMEM;

	*out = (struct frag){ 0 };
	if (!ring || !a)
		goto out;
	for (uint64_t op = 0; op < ops_count; op++) {
		/* Phases of n/4 operations: growth (70% reserves), then shrinkage,
		 * between cap / 2 and cap. */
		uint64_t cap = n / 2 + (n / 2) * op / ops_count;
		bool grow = (op / (n / 4)) % 2 == 0;
		uint64_t p = bench_rnd(&rng) % 100;
		bool reserve = count < cap / 2 || (count < cap && p < (grow ? 70 : 30));

		if (reserve) {
			struct live_range *r = &ring[(head + count) % n];

			rc = ops->reserve(a, trace_size(t, &rng), &r->off, &r->len);
			if (rc)
				goto out;
			count++;
			used += r->len;
			out->peak_live = used > out->peak_live ? used : out->peak_live;
			out->peak_end = r->off + r->len > out->peak_end ? r->off + r->len
									  : out->peak_end;
			continue;
		}
		{
			bool fifo = t == T_KV && bench_rnd(&rng) % 10 != 0;
			uint64_t i = (head + (fifo ? 0 : bench_rnd(&rng) % count)) % n;
			struct live_range gone = ring[i];

			ring[i] = ring[head];
			head = (head + 1) % n;
			count--;
			used -= gone.len;
			if ((rc = ops->release(a, gone.off, gone.len)))
				goto out;
		}
	}
	ops->stats(a, &st);
	out->free_ranges = st.free_ranges;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "allocfrag: %s on %s: %s\n", ops->name, trace_name[t], strerror(-rc));
	if (a)
		ops->destroy(a);
	free(ring);
	return rc;
}

/* N ranges of 1..8 units with gaps of 0..2 units, claimed in offset order or
 * shuffled; ms for all the claims. */
static int claims(const struct alloc_ops *ops, bool shuffled, double *ms)
{
	struct live_range *r = calloc(CLAIMS, sizeof(*r));
	uint64_t rng = 0x13198a2e03707344ULL, at = 0;
	void *a = NULL;
	double t0;
	int rc = -ENOMEM;

	if (!r)
		goto out;
	for (uint64_t i = 0; i < CLAIMS; i++) {
		at += (bench_rnd(&rng) % 3) * ALIGN;
		r[i].off = at;
		r[i].len = (1 + bench_rnd(&rng) % 8) * ALIGN;
		at += r[i].len;
	}
	for (uint64_t i = CLAIMS - 1; shuffled && i > 0; i--) {
		uint64_t j = bench_rnd(&rng) % (i + 1);
		struct live_range tmp = r[i];

		r[i] = r[j];
		r[j] = tmp;
	}
	a = ops->create(POOL, ALIGN);
	if (!a)
		goto out;
	t0 = bench_now();
	for (uint64_t i = 0; i < CLAIMS; i++)
		if ((rc = ops->claim(a, r[i].off, r[i].len)))
			goto out;
	*ms = (bench_now() - t0) * 1e3;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "allocfrag: %s claims: %s\n", ops->name, strerror(-rc));
	if (a)
		ops->destroy(a);
	free(r);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t ops_count = 2000000, live[T_N] = { 100000, 2000 };
	bool json = false;
	int ch, failed = 0;

	while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		if (ch == 'n' && !bench_parse_u64(optarg, &ops_count) && ops_count) {
			continue;
		} else if (ch == 'j') {
			json = true;
			continue;
		}
		fprintf(stderr, "usage: allocfrag [-n OPS] [--json]\n");
		return 2;
	}
	if (!json)
		printf("%-8s %-8s %8s %12s %12s %9s %8s %9s %s\n", "trace", "alloc", "max live",
		       "peak live MB", "footprint MB", "footprint", "free", "vs best", "target");
	for (int t = 0; t < T_N; t++) {
		struct frag f[ALLOC_N];
		double ratio[ALLOC_N];

		for (int al = 0; al < ALLOC_N; al++) {
			if (replay(&alloc_ops[al], (enum trace)t, live[t], ops_count, &f[al])) {
				failed = 1;
				break;
			}
			ratio[al] = (double)f[al].peak_end / (double)f[al].peak_live;
		}
		if (failed)
			break;
		for (int al = 0; al < ALLOC_N; al++) {
			double rel = ratio[al] / ratio[ALLOC_BESTFIT];
			const char *v = al != ALLOC_TLSF ? "-" : rel <= FRAG_TARGET ? "met" : "missed";

			if (json)
				printf("{\"tool\":\"alloc-frag\",\"trace\":\"%s\",\"alloc\":\"%s\","
				       "\"max_live\":%" PRIu64 ",\"ops\":%" PRIu64 ",\"peak_live\":%"
				       PRIu64 ",\"peak_footprint\":%" PRIu64 ",\"ratio\":%.4f,"
				       "\"vs_bestfit\":%.4f,\"free_ranges\":%" PRIu64
				       ",\"target\":\"%s\"}\n", trace_name[t], alloc_ops[al].name,
				       live[t], ops_count, f[al].peak_live, f[al].peak_end, ratio[al],
				       rel, f[al].free_ranges, v);
			else
				printf("%-8s %-8s %8" PRIu64 " %12.1f %12.1f %9.4f %8" PRIu64
				       " %9.4f %s\n", trace_name[t], alloc_ops[al].name, live[t],
				       (double)f[al].peak_live / 1e6, (double)f[al].peak_end / 1e6,
				       ratio[al], f[al].free_ranges, rel, v);
		}
	}
	if (!json)
		printf("\n%-8s %-8s %12s\n", "claims", "alloc", "ms for 1 M");
	for (int s = 0; s < 2 && !failed; s++) {
		for (int al = 0; al < ALLOC_N; al++) {
			double ms = 0;

			if (claims(&alloc_ops[al], s, &ms)) {
				failed = 1;
				continue;
			}
			if (json)
				printf("{\"tool\":\"alloc-claims\",\"order\":\"%s\",\"alloc\":\"%s\","
				       "\"claims\":%d,\"ms\":%.1f}\n", s ? "random" : "offset",
				       alloc_ops[al].name, CLAIMS, ms);
			else
				printf("%-8s %-8s %12.1f\n", s ? "random" : "offset",
				       alloc_ops[al].name, ms);
		}
	}
	return failed;
}
