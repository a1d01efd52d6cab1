/*
 * alloc.c - the region allocator alone, in process: alloc+free pairs per
 * second at a steady number of live regions, and bytes of metadata per live
 * region, for rmemd's allocator (tlsf, daemon/alloc.c) and the best fit it
 * replaced (bestfit, bench/bestfit.c), one after the other in each
 * configuration.  A benchmark: it prints figures and asserts nothing beyond
 * the calls' return codes.
 *
 * The workload.  A pool of 64-byte alignment (the daemon's default) is filled
 * with N live regions, then driven in steady state: every pair releases one
 * live region and reserves a new one in its place, so N stays constant.  The
 * measured loop includes what any caller pays, picking the victim out of an
 * array of (offset, length) pairs.  Patterns:
 *   lifo    reserve a region, release that same region (a request/response
 *           cycle: what an alloc+free round trip does to the daemon)
 *   fifo    release the oldest live region, reserve a new one (a sliding
 *           window: freed space coalesces, low fragmentation)
 *   random  release a uniformly random live region, reserve a new one (high
 *           fragmentation: holes everywhere)
 * Sizes:
 *   fixed   4 KiB every time
 *   mixed   64 B x U, U uniform in 1..64 (64 B .. 4 KiB)
 * Before timing, the random pattern replaces every live region twice, in
 * random order, to reach its steady fragmentation.  Each configuration is
 * timed in REPS windows; the median window is reported.
 *
 * The caller's share: the same loop without the allocator calls (the same
 * victim picks, the same loads and stores of the live array), timed in
 * windows that alternate with the real ones.  At 1 M live regions the live
 * array is 16 MB, so picking a random victim is a cache miss.  The victims
 * are drawn PREFETCH pairs ahead and their entries prefetched, as a daemon
 * that reads a batch of requests could do with its region table: the miss is
 * then mostly hidden, for the harness and the allocator alike ("-P 0" turns
 * this off).  "alloc ns" is what is left of a pair.
 *
 * Metadata: the allocator's heap bytes (mallinfo2, malloc headers included)
 * divided by the live regions, the daemon's region table per live region
 * (daemon/region.c, by its own count: region_table_memory), and their sum.
 *
 *   alloc [-l LIVE,...] [-p PATTERN,...] [-z SIZES,...] [-D SECONDS | -n PAIRS] [-r REPS]
 *         [--json]
 * -n makes every window exactly PAIRS pairs: for valgrind, whose counts do not
 * depend on the machine's load.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "allocops.h"
#include "region.h"
#include "benchutil.h"

#define ALIGN 64
#define BATCH 65536
#define PREFETCH 8		/* victims drawn this many pairs ahead (a power of two) */
#define TARGET_PAIRS 10e6	/* issue 13: every pattern at 1 M live */
#define TARGET_LIVE 1000000

enum pattern { P_LIFO, P_FIFO, P_RANDOM, P_N };
enum sizes { Z_FIXED, Z_MIXED, Z_N };

static const char *const pattern_name[P_N] = { "lifo", "fifo", "random" };
static const char *const sizes_name[Z_N] = { "fixed", "mixed" };

struct live_range {
	uint64_t off;
	uint64_t len;
};

struct opts {
	struct bench_opts b;	/* -l, -r, --json */
	bool pattern[P_N];
	bool sizes[Z_N];
	double seconds;
	uint64_t pairs;		/* > 0: windows of exactly this many pairs */
	bool prefetch;
	bool allocs[ALLOC_N];
};

struct result {
	uint64_t pairs;
	double seconds;
	double pairs_per_s;
	double harness_ns;	/* the caller's share of ns_per_pair */
	uint64_t free_ranges;
	double alloc_meta;	/* allocator heap bytes per live region */
};

struct run {
	const struct alloc_ops *ops;
	void *a;
	struct live_range *live;
	uint64_t n;
	uint64_t head;		/* fifo: the oldest live region */
	uint64_t rng;
	enum pattern pattern;
	enum sizes sizes;
	bool harness_only;	/* time the caller's share alone (changes nothing) */
	bool prefetch;
	uint64_t ahead[PREFETCH];	/* random: the next victims, drawn early */
	unsigned int next;
};

/* The random pattern's next victim; with prefetch, drawn PREFETCH pairs ago
 * and its entry fetched since. */
static inline struct live_range *random_victim(struct run *r)
{
	uint64_t i;

	if (!r->prefetch)
		return &r->live[bench_rnd(&r->rng) % r->n];
	i = r->ahead[r->next];
	r->ahead[r->next] = bench_rnd(&r->rng) % r->n;
	__builtin_prefetch(&r->live[r->ahead[r->next]], 1);
	r->next = (r->next + 1) & (PREFETCH - 1);
	return &r->live[i];
}

/* The range a FIFO or random pair frees and takes again. */
static inline struct live_range *victim(struct run *r)
{
	struct live_range *v;

	if (r->pattern != P_FIFO)
		return random_victim(r);
	v = &r->live[r->head];
	r->head = r->head + 1 == r->n ? 0 : r->head + 1;
	return v;
}

static uint64_t random_size(struct run *r)
{
	if (r->sizes == Z_FIXED)
		return 4096;
	return (1 + bench_rnd(&r->rng) % 64) * ALIGN;
}

/* One alloc+free pair of the run's pattern.  Never inlined, so a profiler can
 * count exactly the pairs (valgrind --toggle-collect=pair). */
__attribute__((noinline)) static int pair(struct run *r)
{
	struct live_range *v, tmp;
	int rc;

	if (r->pattern == P_LIFO) {
		rc = r->ops->reserve(r->a, random_size(r), &tmp.off, &tmp.len);
		return rc ? rc : r->ops->release(r->a, tmp.off, tmp.len);
	}
	v = victim(r);
	rc = r->ops->release(r->a, v->off, v->len);
	return rc ? rc : r->ops->reserve(r->a, random_size(r), &v->off, &v->len);
}

/*
 * The caller's share of a pair without the allocator: the same victim pick,
 * the same reads and writes of the live array.  Subtracted, it leaves the
 * allocator's own cost.
 */
static int pair_harness(struct run *r)
{
	static volatile uint64_t sink;
	struct live_range *v, was;

	if (r->pattern == P_LIFO) {
		sink += random_size(r);
		return 0;
	}
	v = victim(r);
	was = *v;
	/* A real pair cannot start the next pick before this one's load is back
	 * (the allocator's calls depend on it): make the harness wait too, or its
	 * cache misses overlap and it looks cheaper than it is. */
	r->rng ^= was.len & (1ull << 63);
	sink += random_size(r);
	/* Written back unchanged, and written for real, as a reserve would. */
	*(volatile uint64_t *)&v->off = was.off;
	*(volatile uint64_t *)&v->len = was.len;
	return 0;
}

static int pairs(struct run *r, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		int rc = r->harness_only ? pair_harness(r) : pair(r);

		if (rc)
			return rc;
	}
	return 0;
}

static int fill(struct run *r)
{
	int rc;

	for (uint64_t i = 0; i < r->n; i++)
		if ((rc = r->ops->reserve(r->a, random_size(r), &r->live[i].off, &r->live[i].len)))
			return rc;
	for (unsigned int i = 0; i < PREFETCH; i++)
		r->ahead[i] = bench_rnd(&r->rng) % r->n;
	return r->pattern == P_RANDOM ? pairs(r, 2 * r->n) : 0;
}

/* Pairs for about `seconds` (or exactly `count`), in batches so the clock is
 * read rarely. */
static int measure(struct run *r, double seconds, uint64_t count, struct result *res)
{
	double t0 = bench_now(), t;
	uint64_t done = 0;
	int rc;

	if (count) {
		if ((rc = pairs(r, count)))
			return rc;
		t = bench_now();
		*res = (struct result){ .pairs = count, .seconds = t - t0,
					.pairs_per_s = (double)count / (t - t0) };
		return 0;
	}
	do {
		if ((rc = pairs(r, BATCH)))
			return rc;
		done += BATCH;
		t = bench_now();
	} while (t - t0 < seconds);
	res->pairs = done;
	res->seconds = t - t0;
	res->pairs_per_s = (double)done / (t - t0);
	return 0;
}

/* Heap bytes in use, malloc headers and mmapped blocks included. */
static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

static int cmp_rate(const void *x, const void *y)
{
	double a = ((const struct result *)x)->pairs_per_s;
	double b = ((const struct result *)y)->pairs_per_s;

	return (a > b) - (a < b);
}

/*
 * One configuration: fill, then reps timed windows; the median window wins.
 * The pool has room for the live set three times over, so fragmentation never
 * fails a reserve (the allocator never touches pool bytes: size is free).
 */
static int run_one(const struct opts *o, int al, uint64_t n, enum pattern p, enum sizes z,
		   struct result *out)
{
	struct run r = { .ops = &alloc_ops[al], .n = n, .pattern = p, .sizes = z,
			 .rng = 0x9e3779b97f4a7c15ULL + n, .prefetch = o->prefetch };
	struct result res[BENCH_MAX_REPS], caller[BENCH_MAX_REPS];
	struct alloc_stats st;
	size_t heap_before;
	int rc = -ENOMEM, mid = o->b.reps / 2;

	r.live = calloc(n, sizeof(*r.live));
	heap_before = heap_bytes();
	r.a = r.ops->create(n * 4096 * 3 + (64 << 20), ALIGN);
	if (!r.live || !r.a)
		goto out;
	if ((rc = fill(&r)))
		goto out;
	/* Real and harness windows alternate, so both see the same load. */
	for (int i = 0; i < o->b.reps; i++) {
		r.harness_only = false;
		if ((rc = measure(&r, o->seconds, o->pairs, &res[i])))
			goto out;
		r.harness_only = true;
		if ((rc = measure(&r, o->seconds / 2, o->pairs, &caller[i])))
			goto out;
	}
	qsort(res, (size_t)o->b.reps, sizeof(res[0]), cmp_rate);
	qsort(caller, (size_t)o->b.reps, sizeof(caller[0]), cmp_rate);
	*out = res[mid];
	out->harness_ns = 1e9 / caller[mid].pairs_per_s;
	r.ops->stats(r.a, &st);
	out->free_ranges = st.free_ranges;
	out->alloc_meta = (double)(heap_bytes() - heap_before) / (double)n;
out:
	if (rc)
		fprintf(stderr, "alloc: %s %s/%s, %" PRIu64 " live: %s\n", r.ops->name,
			pattern_name[p], sizes_name[z], n, strerror(-rc));
	if (r.a)
		r.ops->destroy(r.a);
	free(r.live);
	return rc;
}

/* The daemon's region table with n entries: its bytes per entry, by its own
 * count (its slab is mapped memory, which mallinfo2 does not see). */
static double region_table_bytes(uint64_t n)
{
	struct region_list owner = { 0, 0 };
	struct region_table *t;
	double per = -1;

	t = region_table_new();
	if (!t)
		return per;
	for (uint64_t i = 0; i < n; i++)
		if (!region_add(t, &owner, 1, 0, i * ALIGN, ALIGN))
			goto out;
	per = (double)region_table_memory(t) / (double)n;
out:
	region_table_free(t);
	return per;
}

static void print_header(void)
{
	printf("%-7s %-7s %-6s %8s %9s %8s %8s %8s %11s %8s %8s %8s %s\n", "alloc", "pattern",
	       "sizes", "live", "pairs/s", "ns/pair", "caller", "alloc", "free", "alloc B",
	       "table B", "total B", "target");
	printf("%-7s %-7s %-6s %8s %9s %8s %8s %8s %11s %8s %8s %8s %s\n", "", "", "", "",
	       "(median)", "", "ns/pair", "ns/pair", "ranges", "per live", "per live",
	       "per live", ">= 10 M");
}

/* The target applies to rmemd's allocator at 1 M live; "-" elsewhere. */
static const char *verdict(int al, uint64_t n, const struct result *r)
{
	if (al != ALLOC_TLSF || n != TARGET_LIVE)
		return "-";
	return r->pairs_per_s >= TARGET_PAIRS ? "met" : "missed";
}

static void print_result(const struct opts *o, int al, uint64_t n, enum pattern p,
			 enum sizes z, const struct result *r, double table)
{
	double ns = 1e9 / r->pairs_per_s;

	if (o->b.json) {
		printf("{\"tool\":\"alloc-bench\",\"alloc\":\"%s\",\"pattern\":\"%s\","
		       "\"sizes\":\"%s\",\"align\":%d,\"live\":%" PRIu64 ",\"reps\":%d,"
		       "\"prefetch\":%s,\"pairs\":%" PRIu64
		       ",\"seconds\":%.3f,\"pairs_per_s\":%.0f,\"ns_per_pair\":%.1f,"
		       "\"caller_ns_per_pair\":%.1f,\"alloc_ns_per_pair\":%.1f,"
		       "\"free_ranges\":%" PRIu64 ",\"meta_bytes_per_region\":%.1f,"
		       "\"region_table_bytes_per_region\":%.1f,"
		       "\"total_meta_bytes_per_region\":%.1f,\"target\":\"%s\"}\n",
		       alloc_ops[al].name, pattern_name[p], sizes_name[z], ALIGN, n, o->b.reps,
		       o->prefetch ? "true" : "false", r->pairs, r->seconds, r->pairs_per_s, ns,
		       r->harness_ns, ns - r->harness_ns, r->free_ranges, r->alloc_meta, table,
		       r->alloc_meta + table, verdict(al, n, r));
	} else {
		printf("%-7s %-7s %-6s %8" PRIu64 " %8.2fM %8.1f %8.1f %8.1f %11" PRIu64
		       " %8.1f %8.1f %8.1f %s\n", alloc_ops[al].name, pattern_name[p],
		       sizes_name[z], n, r->pairs_per_s / 1e6, ns, r->harness_ns,
		       ns - r->harness_ns, r->free_ranges, r->alloc_meta, table,
		       r->alloc_meta + table, verdict(al, n, r));
	}
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: alloc [-a tlsf,bestfit] [-l LIVE,...] [-p lifo,fifo,random] "
		   "[-z fixed,mixed] [-D SECONDS | -n PAIRS] [-r REPS] [-P 0|1] [--json]\n"
		   "  defaults: -a tlsf,bestfit -l 1000,100000,1000000 -p lifo,fifo,random "
		   "-z fixed,mixed -D 0.3 -r 3 -P 1 (prefetch random victims)\n");
}

/* Sets flags[i] for every name of names[] in the comma list s. */
static int parse_names(char *s, const char *const *names, int n, bool *flags)
{
	char *tok;

	memset(flags, 0, sizeof(bool) * (size_t)n);
	while ((tok = strsep(&s, ","))) {
		int i = 0;

		while (i < n && strcmp(tok, names[i]))
			i++;
		if (i == n)
			return -EINVAL;
		flags[i] = true;
	}
	return 0;
}

/* The options of this bench alone (bench_parse_args() takes the others). */
static int own_opt(int ch, char *arg, void *ctx)
{
	struct opts *o = ctx;
	const char *names[ALLOC_N];
	char *end;

	switch (ch) {
	case 'a':
		for (int i = 0; i < ALLOC_N; i++)
			names[i] = alloc_ops[i].name;
		return parse_names(arg, names, ALLOC_N, o->allocs);
	case 'P':
		if (strcmp(arg, "0") && strcmp(arg, "1"))
			return -EINVAL;
		o->prefetch = arg[0] == '1';
		return 0;
	case 'p':
		return parse_names(arg, pattern_name, P_N, o->pattern);
	case 'z':
		return parse_names(arg, sizes_name, Z_N, o->sizes);
	case 'D':
		o->seconds = strtod(arg, &end);
		return *end || !(o->seconds > 0 && o->seconds <= 60) ? -EINVAL : 0;
	case 'n':
		return bench_parse_u64(arg, &o->pairs) || !o->pairs ? -EINVAL : 0;
	default:
		return -EINVAL;
	}
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .b = { .live = { 1000, 100000, 1000000 }, .nlive = 3, .reps = 3 },
			    .pattern = { true, true, true }, .sizes = { true, true },
			    .seconds = 0.3, .prefetch = true, .allocs = { true, true } };
	return bench_parse_args(argc, argv, "a:l:p:z:D:n:r:P:h", &o->b, own_opt, o, usage);
}

int main(int argc, char **argv)
{
	struct opts o;
	int failed = 0;

	if (parse_args(argc, argv, &o))
		return 2;
	if (!o.b.json)
		print_header();
	for (size_t l = 0; l < o.b.nlive; l++) {
		double table = region_table_bytes(o.b.live[l]);

		for (int z = 0; z < Z_N; z++) {
			for (int p = 0; p < P_N; p++) {
				if (!o.sizes[z] || !o.pattern[p])
					continue;
				/* Side by side: each allocator in turn, same workload. */
				for (int al = 0; al < ALLOC_N; al++) {
					struct result r = { 0 };

					if (!o.allocs[al])
						continue;
					if (run_one(&o, al, o.b.live[l], (enum pattern)p,
						    (enum sizes)z, &r)) {
						failed = 1;
						continue;
					}
					print_result(&o, al, o.b.live[l], (enum pattern)p,
						     (enum sizes)z, &r, table);
				}
			}
		}
	}
	return failed;
}
