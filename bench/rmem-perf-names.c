/*
 * rmem-perf-names.c - --op names: what a named region costs next to an
 * anonymous one, measured in one run so that the figures share a daemon,
 * a connection and a moment.  Each iteration does three sequences, one
 * request in flight, each request timed on its own:
 *   alloc + free                      (the reference)
 *   create + unlink + free            (a fresh name each time)
 *   open + free                       (of one name created beforehand)
 * The order of the three turns with the iteration, so that none always
 * follows another.  Names are "rmem-perf/PID/N", so that runs side by side
 * never collide.  Nothing is asserted about time.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rmem-perf.h"

#define WARMUP_ITERS 1000u

const char *const perf_name_req_names[NREQ_COUNT] = {
	[NREQ_ALLOC] = "alloc", [NREQ_FREE] = "free",
	[NREQ_CREATE] = "create", [NREQ_UNLINK] = "unlink",
	[NREQ_FREE_CREATED] = "free(created)",
	[NREQ_OPEN] = "open", [NREQ_FREE_OPENED] = "free(opened)",
	[NSEQ_ALLOC] = "alloc+free", [NSEQ_CREATE] = "create+unlink+free",
	[NSEQ_OPEN] = "open+free",
};

struct names_run {
	rmem_client *c;
	size_t size;
	char open_name[64];
	uint64_t seq;              /* for fresh names */
	struct perf_result *res;   /* NREQ_COUNT of them; NULL in the warm-up */
	const char **what;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int push(struct names_run *nr, enum perf_name_req k, int64_t ns)
{
	struct perf_result *res;
	int err;

	if (!nr->res)
		return 0;
	res = &nr->res[k];
	err = perf_result_add(res, ns);
	if (!err)
		res->ops++;
	return err;
}

/* Times t[0] -> t[1] as request a, t[1] -> t[2] as b (and so on, n of
 * them), and t[0] -> t[n] as the sequence seq. */
static int push_seq(struct names_run *nr, const enum perf_name_req *reqs, size_t n,
		    const int64_t *t, enum perf_name_req seq)
{
	for (size_t i = 0; i < n; i++)
		if (push(nr, reqs[i], t[i + 1] - t[i]))
			return -ENOMEM;
	return push(nr, seq, t[n] - t[0]);
}

static int fail(struct names_run *nr, const char *what, int err)
{
	*nr->what = what;
	return err;
}

/* After a step of a sequence: its error (what failed), else 0 with the time
 * it ended in *end. */
static int step(struct names_run *nr, int err, const char *what, int64_t *end)
{
	if (err)
		return fail(nr, what, err);
	*end = now_ns();
	return 0;
}

/* The last step of a sequence, r's free (what), as step k + 1 of t; then
 * the sequence's times pushed. */
static int free_last(struct names_run *nr, struct rmem_region *r, const char *what, int64_t *t,
		     size_t k, const enum perf_name_req *reqs, enum perf_name_req seq)
{
	int err = step(nr, rmem_free(nr->c, r), what, &t[k + 1]);

	if (err)
		return err;
	return push_seq(nr, reqs, k + 1, t, seq) ? fail(nr, "malloc", -ENOMEM) : 0;
}

/* A region taken, by ALLOC or by OPEN of the name kept open, and freed. */
static int seq_take(struct names_run *nr, bool open)
{
	static const enum perf_name_req alloc_reqs[] = { NREQ_ALLOC, NREQ_FREE };
	static const enum perf_name_req open_reqs[] = { NREQ_OPEN, NREQ_FREE_OPENED };
	struct rmem_region r;
	int64_t t[3];
	int err;

	t[0] = now_ns();
	if (open)
		err = step(nr, rmem_open(nr->c, nr->open_name, RMEM_READ | RMEM_WRITE, &r),
			   "rmem_open", &t[1]);
	else
		err = step(nr, rmem_alloc(nr->c, nr->size, 0, &r), "rmem_alloc", &t[1]);
	if (err)
		return err;
	return open ? free_last(nr, &r, "rmem_free (an opened handle)", t, 1, open_reqs, NSEQ_OPEN) :
		      free_last(nr, &r, "rmem_free", t, 1, alloc_reqs, NSEQ_ALLOC);
}

static int seq_alloc(struct names_run *nr)
{
	return seq_take(nr, false);
}

static int seq_open(struct names_run *nr)
{
	return seq_take(nr, true);
}

static int seq_create(struct names_run *nr)
{
	static const enum perf_name_req reqs[] = { NREQ_CREATE, NREQ_UNLINK, NREQ_FREE_CREATED };
	struct rmem_region r;
	char name[64];
	int64_t t[4];
	int err;

	snprintf(name, sizeof(name), "rmem-perf/%ld/%" PRIu64, (long)getpid(), nr->seq++);
	t[0] = now_ns();
	err = step(nr, rmem_create(nr->c, name, nr->size, 0, &r), "rmem_create", &t[1]);
	if (!err)
		err = step(nr, rmem_unlink(nr->c, name), "rmem_unlink", &t[2]);
	if (err)
		return err;
	return free_last(nr, &r, "rmem_free (a created handle)", t, 2, reqs, NSEQ_CREATE);
}

/* iters iterations, or until end_ns when it is not 0. */
static int names_pass(struct names_run *nr, uint64_t iters, int64_t end_ns)
{
	int (*const seqs[3])(struct names_run *) = { seq_alloc, seq_create, seq_open };

	for (uint64_t i = 0; end_ns ? now_ns() < end_ns : i < iters; i++)
		for (unsigned k = 0; k < 3; k++) {
			int err = seqs[(i + k) % 3](nr);

			if (err)
				return err;
		}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int perf_names_run(rmem_client *c, const struct perf_cfg *cfg, size_t size,
		   struct perf_result res[NREQ_COUNT], const char **what)
{
	struct names_run nr = { .c = c, .size = size, .what = what };
	struct rmem_region keep;
	int64_t t0;
	int err, err2;

	snprintf(nr.open_name, sizeof(nr.open_name), "rmem-perf/%ld/open", (long)getpid());
	err = rmem_create(c, nr.open_name, size, 0, &keep);
	if (err)
		return fail(&nr, "rmem_create (the name opened)", err);
	err = names_pass(&nr, WARMUP_ITERS, 0);
	if (!err) {
		nr.res = res;
		t0 = now_ns();
		err = names_pass(&nr, cfg->iters,
				 cfg->seconds > 0 ? t0 + (int64_t)(cfg->seconds * 1e9) : 0);
		for (int k = 0; k < NREQ_COUNT; k++) {
			res[k].seconds = (double)(now_ns() - t0) / 1e9;
			qsort(res[k].lat_ns, res[k].lat_count, sizeof(uint64_t), cmp_u64);
		}
	}
	/* Leave nothing behind, whatever happened. */
	err2 = rmem_unlink(c, nr.open_name);
	if (!err2)
		err2 = rmem_free(c, &keep);
	if (!err && err2)
		err = fail(&nr, "cleaning up the name opened", err2);
	return err;
}
