/*
 * region.c - the daemon's region table alone, in process: heap bytes per live
 * region and nanoseconds per add, find, free (find + remove) and listing step
 * at a steady number of live regions.  A benchmark: it prints figures and
 * asserts nothing beyond the calls' results.
 *
 * The workload.  N live regions spread over OWNERS owner lists (sessions),
 * added in a row (the "fill": hash growth included), then:
 *   find   look up a uniformly random live id (what every request does)
 *   free   look up a random live id and remove that region (a remote_free)
 *   add    add a region (a remote_alloc), as many as were freed: N stays put
 *   list   walk the whole table in id order through region_next_after
 *          (the admin listing's paging), per region listed
 * The ids to pick from sit in an array of their own, as a client would hold
 * them; the "caller" column times picking alone (the same loads), so
 * "op ns" minus "caller" is the table's share.  Each figure is the median of
 * REPS windows.
 *
 * Bytes: the table's own count (region_table_memory: its slab is mapped
 * memory, not malloc's), and as a check the growth of the resident set over
 * the fill (pages, so coarse at 1 K).
 *
 *   region [-l LIVE,...] [-r REPS] [--json]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "benchutil.h"

#define OWNERS 64
#define ALIGN 64

enum op { OP_FILL, OP_FIND, OP_FREE, OP_ADD, OP_LIST, OP_CALLER, OP_N };

static const char *const op_name[OP_N] = { "fill", "find", "free", "add", "list", "caller" };

struct bench {
	struct region_table *t;
	struct region_list owners[OWNERS];
	uint64_t *ids;		/* the live ids, in no order */
	uint64_t n;
	uint64_t rng;
	uint64_t sink;
};

/* Resident bytes of the process (0 if /proc says nothing). */
static size_t resident_bytes(void)
{
	unsigned long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static int add_one(struct bench *b, uint64_t slot)
{
	uint64_t o = bench_rnd(&b->rng) % OWNERS;
	struct region *r = region_add(b->t, &b->owners[o], o + 1, 0, slot * ALIGN, ALIGN);

	if (!r)
		return -ENOMEM;
	b->ids[slot] = r->id;
	return 0;
}

static int fill(struct bench *b)
{
	for (uint64_t i = 0; i < b->n; i++)
		if (add_one(b, i))
			return -ENOMEM;
	return 0;
}

/* The same picks and loads as find, without the table. */
static int pick_only(struct bench *b, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++)
		b->sink += b->ids[bench_rnd(&b->rng) % b->n];
	return 0;
}

static int find_some(struct bench *b, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		const struct region *r = region_find(b->t, b->ids[bench_rnd(&b->rng) % b->n]);

		if (!r)
			return -ENOENT;
		b->sink += r->length;
	}
	return 0;
}

/*
 * Frees count random live regions; their slots in ids[] move to the end of
 * the array, [n - count, n), for add_some to fill again.
 */
static int free_some(struct bench *b, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		uint64_t last = b->n - 1 - i, at = bench_rnd(&b->rng) % (last + 1), id = b->ids[at];
		struct region *r = region_find(b->t, id);

		if (!r)
			return -ENOENT;
		region_remove(b->t, &b->owners[r->owner - 1], r);
		b->ids[at] = b->ids[last];
		b->ids[last] = id;
	}
	return 0;
}

static int add_some(struct bench *b, uint64_t count)
{
	for (uint64_t i = b->n - count; i < b->n; i++)
		if (add_one(b, i))
			return -ENOMEM;
	return 0;
}

static int list_all(struct bench *b, uint64_t *listed)
{
	uint64_t n = 0;

	for (const struct region *r = region_next_after(b->t, 0); r;
	     r = region_next_after(b->t, r->id))
		n++;
	*listed = n;
	return n == b->n ? 0 : -EIO;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, c = *(const double *)y;

	return (a > c) - (a < c);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* One live count: fill, bytes, then reps windows of every operation. */
static int run_one(const struct bench_opts *o, uint64_t n, double ns[OP_N], double bytes[2])
{
	struct bench b = { .n = n, .rng = 0x9e3779b97f4a7c15ULL + n };
	uint64_t churn = n / 4 ? n / 4 : 1, lookups = n < 1000000 ? 1000000 : n, listed;
	uint64_t rounds = (250000 + churn - 1) / churn; /* enough work to time */
	double w[OP_N][BENCH_MAX_REPS], t0;
	size_t before;
	int rc = -ENOMEM;

	b.ids = calloc(n, sizeof(*b.ids));
	if (b.ids)
		memset(b.ids, 0xff, n * sizeof(*b.ids)); /* resident before, not during */
	before = resident_bytes();
	b.t = region_table_new();
	if (!b.ids || !b.t)
		goto out;
	t0 = bench_now();
	if ((rc = fill(&b)))
		goto out;
	ns[OP_FILL] = (bench_now() - t0) * 1e9 / (double)n;
	bytes[0] = (double)region_table_memory(b.t) / (double)n;
	bytes[1] = (double)(resident_bytes() - before) / (double)n;
	for (int i = 0; i < o->reps; i++) {
		t0 = bench_now();
		if ((rc = find_some(&b, lookups)))
			goto out;
		w[OP_FIND][i] = (bench_now() - t0) * 1e9 / (double)lookups;
		t0 = bench_now();
		pick_only(&b, lookups);
		w[OP_CALLER][i] = (bench_now() - t0) * 1e9 / (double)lookups;
		w[OP_FREE][i] = w[OP_ADD][i] = 0;
		for (uint64_t k = 0; k < rounds; k++) {
			t0 = bench_now();
			if ((rc = free_some(&b, churn)))
				goto out;
			w[OP_FREE][i] += (bench_now() - t0) * 1e9 / (double)(churn * rounds);
			t0 = bench_now();
			if ((rc = add_some(&b, churn)))
				goto out;
			w[OP_ADD][i] += (bench_now() - t0) * 1e9 / (double)(churn * rounds);
		}
		t0 = bench_now();
		if ((rc = list_all(&b, &listed)))
			goto out;
		w[OP_LIST][i] = (bench_now() - t0) * 1e9 / (double)listed;
	}
	for (int op = OP_FIND; op < OP_N; op++)
		ns[op] = median(w[op], o->reps);
out:
	if (rc)
		fprintf(stderr, "region: %" PRIu64 " live: %s\n", n, strerror(-rc));
	region_table_free(b.t);
	free(b.ids);
	return rc;
}

static void print_result(const struct bench_opts *o, uint64_t n, const double ns[OP_N],
			 const double bytes[2])
{
	if (o->json) {
		printf("{\"tool\":\"region-bench\",\"live\":%" PRIu64 ",\"reps\":%d,"
		       "\"table_bytes_per_region\":%.1f,\"rss_bytes_per_region\":%.1f", n,
		       o->reps, bytes[0], bytes[1]);
		for (int op = 0; op < OP_N; op++)
			printf(",\"%s_ns\":%.1f", op_name[op], ns[op]);
		printf("}\n");
	} else {
		printf("%8" PRIu64 " %9.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f\n", n, bytes[0],
		       bytes[1], ns[OP_FILL], ns[OP_FIND], ns[OP_CALLER], ns[OP_FREE], ns[OP_ADD],
		       ns[OP_LIST]);
	}
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: region [-l LIVE,...] [-r REPS] [--json]\n"
		   "  defaults: -l 1000,100000,1000000 -r 5\n");
}

int main(int argc, char **argv)
{
	struct bench_opts o = { .live = { 1000, 100000, 1000000 }, .nlive = 3, .reps = 5 };
	int failed = 0;

	if (bench_parse_args(argc, argv, "l:r:h", &o, NULL, NULL, usage))
		return 2;
	if (!o.json) {
		printf("%8s %9s %8s %8s %8s %8s %8s %8s %8s\n", "live", "table B", "rss B",
		       "fill", "find", "caller", "free", "add", "list");
		printf("%8s %9s %8s %8s %8s %8s %8s %8s %8s\n", "", "per live", "per live",
		       "ns/add", "ns", "ns", "ns", "ns", "ns/reg");
	}
	for (size_t l = 0; l < o.nlive; l++) {
		double ns[OP_N] = { 0 }, bytes[2] = { 0 };

		if (run_one(&o, o.live[l], ns, bytes)) {
			failed = 1;
			continue;
		}
		print_result(&o, o.live[l], ns, bytes);
	}
	return failed;
}
