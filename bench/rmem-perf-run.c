/*
 * rmem-perf-run.c - the measurement loops of rmem-perf: synchronous calls
 * (one in flight, each timed), posted transfers and posted alloc/free (depth
 * in flight, each timed from its post to its completion).  A warm-up of the
 * same loop runs first and is thrown away.  Nothing is asserted about time.
 *
 * The local buffers are registered once (rmem_register_buf) before the
 * warm-up, as perftest registers its buffer once before it measures, so
 * that on RDMA the figures compare like for like.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "cpustat.h"
#include "rmem-perf.h"

/* Warm-up: this many operations or this long, whichever ends first. */
#define WARMUP_OPS 1000u
#define WARMUP_NS  200000000ll

struct limit {
	uint64_t ops;   /* 0: no bound */
	int64_t end_ns; /* 0: no bound */
};

struct run {
	rmem_client *c;
	const struct perf_cfg *cfg;
	const struct rmem_region *r;
	uint32_t r_slots;
	uint8_t *buf;
	size_t size;
	struct perf_result *res;
	bool record;        /* false during the warm-up */
	const char **what;
	int64_t *t_post;    /* per slot: when its operation was posted */
	struct rmem_region *regs; /* OP_ALLOC: per slot */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Whether to post again, now being now (a clock read the caller had). */
static bool more_at(const struct limit *l, uint64_t posted, int64_t now)
{
	if (l->ops && posted >= l->ops)
		return false;
	return l->end_ns == 0 || now < l->end_ns;
}

static bool more(const struct limit *l, uint64_t posted)
{
	return more_at(l, posted, l->end_ns ? now_ns() : 0);
}

int perf_result_add(struct perf_result *res, int64_t ns)
{
	if (res->lat_count == res->lat_cap) {
		uint64_t cap = res->lat_cap ? res->lat_cap * 2 : 4096;
		uint64_t *v = realloc(res->lat_ns, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		res->lat_ns = v;
		res->lat_cap = cap;
	}
	res->lat_ns[res->lat_count++] = ns > 0 ? (uint64_t)ns : 0;
	return 0;
}

static int record(struct run *run, int64_t ns)
{
	return run->record ? perf_result_add(run->res, ns) : 0;
}

static int fail(struct run *run, const char *what, int err)
{
	*run->what = what;
	return err < 0 ? err : -EIO;
}

/* Where slot's transfer goes, remotely and locally. */
static uint64_t remote_off(const struct run *run, uint32_t slot)
{
	return run->r_slots > 1 ? (uint64_t)slot * run->size : 0;
}

static uint8_t *local_buf(const struct run *run, uint32_t slot)
{
	return run->buf + (size_t)slot * run->size;
}

/* ---- one in flight: synchronous calls ---------------------------------------- */

static int sync_one(struct run *run, uint64_t i)
{
	const struct rmem_region *r = run->r;

	switch (run->cfg->op) {
	case OP_WRITE:
		return rmem_write(run->c, r, 0, run->buf, run->size);
	case OP_READ:
		return rmem_read(run->c, r, 0, run->buf, run->size);
	case OP_CAS:
		return rmem_cas(run->c, r, 0, i, i + 1, NULL);
	case OP_FAA:
		return rmem_faa(run->c, r, 0, 1, NULL);
	case OP_ALLOC:
	case OP_NAMES:
		break;
	}
	return -EINVAL;
}

static const char *const sync_name[] = {
	[OP_WRITE] = "rmem_write", [OP_READ] = "rmem_read",
	[OP_CAS] = "rmem_cas", [OP_FAA] = "rmem_faa",
};

static int sync_loop(struct run *run, const struct limit *l)
{
	uint64_t i;

	for (i = 0; more(l, i); i++) {
		int64_t t0 = now_ns();
		int err = sync_one(run, i);

		if (err)
			return fail(run, sync_name[run->cfg->op], err);
		err = record(run, now_ns() - t0);
		if (err)
			return fail(run, "malloc", err);
	}
	run->res->ops = i;
	return 0;
}

/* Each round trip timed on its own: an alloc, then the free of what it got. */
static int sync_alloc_loop(struct run *run, const struct limit *l)
{
	uint64_t i;

	for (i = 0; more(l, i); i += 2) {
		struct rmem_region reg;
		int64_t t0 = now_ns(), t1;
		int err = rmem_alloc(run->c, run->size, 0, &reg);

		if (err)
			return fail(run, "rmem_alloc", err);
		t1 = now_ns();
		err = rmem_free(run->c, &reg);
		if (err)
			return fail(run, "rmem_free", err);
		if (record(run, t1 - t0) || record(run, now_ns() - t1))
			return fail(run, "malloc", -ENOMEM);
	}
	run->res->ops = i;
	return 0;
}

/* ---- depth in flight: posted operations -------------------------------------------- */

/* The completions of up to depth operations; -1 waits as long as it takes
 * (the library ends a stuck connection after its own timeout). */
static int poll_some(struct run *run, struct rmem_completion *out)
{
	int n = rmem_poll(run->c, out, (int)run->cfg->depth, -1);

	if (n < 0)
		return fail(run, "rmem_poll", n);
	return n;
}

static int post_transfer(struct run *run, uint64_t seq)
{
	uint32_t slot = (uint32_t)(seq % run->cfg->depth);
	int err;

	run->t_post[slot] = now_ns();
	if (run->cfg->op == OP_WRITE)
		err = rmem_post_write(run->c, run->r, remote_off(run, slot), local_buf(run, slot),
				      run->size, seq);
	else
		err = rmem_post_read(run->c, run->r, remote_off(run, slot), local_buf(run, slot),
				     run->size, seq);
	return err ? fail(run, run->cfg->op == OP_WRITE ? "rmem_post_write" : "rmem_post_read",
			  err) : 0;
}

/* Completions arrive in posting order, so seq % depth names a free slot:
 * the operations in flight always have depth consecutive numbers at most. */
static int posted_loop(struct run *run, const struct limit *l, struct rmem_completion *comp)
{
	uint64_t posted = 0, done = 0;
	int err;

	while (posted - done < run->cfg->depth && more(l, posted)) {
		err = post_transfer(run, posted++);
		if (err)
			return err;
	}
	while (done < posted) {
		int n = poll_some(run, comp);

		if (n < 0)
			return n;
		for (int k = 0; k < n; k++) {
			if (comp[k].status)
				return fail(run, "a posted transfer", comp[k].status);
			err = record(run, now_ns() - run->t_post[comp[k].cookie % run->cfg->depth]);
			if (err)
				return fail(run, "malloc", err);
			done++;
		}
		while (posted - done < run->cfg->depth && more(l, posted)) {
			err = post_transfer(run, posted++);
			if (err)
				return err;
		}
	}
	run->res->ops = done;
	return 0;
}

/* Cookies of the alloc loop: the slot, and whether it is the free. */
#define ALLOC_COOKIE(slot, is_free) (((uint64_t)(slot) << 1) | (is_free))

static int post_alloc_slot(struct run *run, uint32_t slot, int64_t now)
{
	int err;

	run->t_post[slot] = now;
	err = rmem_post_alloc(run->c, run->size, 0, &run->regs[slot], ALLOC_COOKIE(slot, 0));
	return err ? fail(run, "rmem_post_alloc", err) : 0;
}

static int post_free_slot(struct run *run, uint32_t slot, int64_t now)
{
	int err;

	run->t_post[slot] = now;
	err = rmem_post_free(run->c, &run->regs[slot], ALLOC_COOKIE(slot, 1));
	return err ? fail(run, "rmem_post_free", err) : 0;
}

/*
 * depth slots, each going alloc -> free -> alloc ...: depth requests in
 * flight.  A region is always freed, so the pool ends as it began; the
 * bound l counts requests posted.  The clock is read once per rmem_poll(),
 * not per request: the completions it returned all arrived by then, and the
 * requests posted in answer go out after it (their latencies err long, by
 * the loop's own few hundred ns).  Three clock reads per request were 5 %
 * of the client's CPU at 800 k requests/s (27 ns each on this VM).
 */
static int posted_alloc_loop(struct run *run, const struct limit *l,
			     struct rmem_completion *comp)
{
	uint64_t posted = 0, done = 0;
	int err;

	for (uint32_t s = 0; s < run->cfg->depth && more(l, posted); s++, posted++) {
		err = post_alloc_slot(run, s, now_ns());
		if (err)
			return err;
	}
	while (done < posted) {
		int n = poll_some(run, comp);
		int64_t now = now_ns();

		if (n < 0)
			return n;
		for (int k = 0; k < n; k++) {
			uint32_t slot = (uint32_t)(comp[k].cookie >> 1);
			bool was_free = comp[k].cookie & 1;

			if (comp[k].status)
				return fail(run, was_free ? "a posted free" : "a posted alloc",
					    comp[k].status);
			err = record(run, now - run->t_post[slot]);
			if (err)
				return fail(run, "malloc", err);
			done++;
			if (!was_free)
				err = post_free_slot(run, slot, now);
			else if (more_at(l, posted, now))
				err = post_alloc_slot(run, slot, now);
			else
				continue;
			if (err)
				return err;
			posted++;
		}
	}
	run->res->ops = done;
	return 0;
}

/* ---- the run ------------------------------------------------------------------------- */

static bool is_atomic(enum perf_op op)
{
	return op == OP_CAS || op == OP_FAA;
}

static int one_pass(struct run *run, const struct limit *l, struct rmem_completion *comp)
{
	const struct perf_cfg *cfg = run->cfg;

	if (cfg->op == OP_ALLOC)
		return cfg->depth > 1 ? posted_alloc_loop(run, l, comp) : sync_alloc_loop(run, l);
	/* Latency with one in flight is the synchronous call's, as ib_write_lat
	 * times one operation at a time. */
	if (is_atomic(cfg->op) || cfg->depth == 1)
		return sync_loop(run, l);
	return posted_loop(run, l, comp);
}

static int timed_pass(struct run *run, struct rmem_completion *comp)
{
	const struct perf_cfg *cfg = run->cfg;
	struct limit l = { .ops = cfg->iters };
	struct cpustat self0, dmn0, self, dmn;
	int64_t t0;
	int err;

	run->record = true;
	run->res->lat_count = 0;
	dmn0 = cpustat_pid(cfg->daemon_pid);
	self0 = cpustat_self();
	t0 = now_ns();
	if (cfg->seconds > 0)
		l = (struct limit){ .end_ns = t0 + (int64_t)(cfg->seconds * 1e9) };
	err = one_pass(run, &l, comp);
	run->res->seconds = (double)(now_ns() - t0) / 1e9;
	self = cpustat_delta(self0, cpustat_self());
	dmn = cpustat_delta(dmn0, cpustat_pid(cfg->daemon_pid));
	run->res->client_cpu_s = self.cpu_s;
	run->res->client_switches = self.switches;
	run->res->daemon_cpu_s = dmn.cpu_s;
	run->res->daemon_switches = dmn.switches;
	return err;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int perf_run(rmem_client *c, const struct perf_cfg *cfg, const struct rmem_region *r,
	     uint32_t r_slots, uint8_t *buf, size_t size, struct perf_result *res,
	     const char **what)
{
	struct limit warm = { .ops = WARMUP_OPS, .end_ns = now_ns() + WARMUP_NS };
	struct run run = {
		.c = c, .cfg = cfg, .r = r, .r_slots = r_slots, .buf = buf, .size = size,
		.res = res, .what = what,
	};
	struct rmem_completion *comp = calloc(cfg->depth, sizeof(*comp));
	int err = -ENOMEM;

	run.t_post = calloc(cfg->depth, sizeof(*run.t_post));
	run.regs = calloc(cfg->depth, sizeof(*run.regs));
	if (!comp || !run.t_post || !run.regs) {
		*what = "malloc";
		goto out;
	}
	if (buf) {
		err = rmem_register_buf(c, buf, size * cfg->depth);
		if (err) {
			*what = "rmem_register_buf";
			goto out;
		}
	}
	err = one_pass(&run, &warm, comp);
	if (!err)
		err = timed_pass(&run, comp);
	if (!err)
		qsort(res->lat_ns, res->lat_count, sizeof(*res->lat_ns), cmp_u64);
	/* After a failure operations may still be in flight on buf (-EBUSY):
	 * the caller gives up, and rmem_close() releases the registration. */
	if (buf && !err) {
		err = rmem_unregister_buf(c, buf);
		if (err)
			*what = "rmem_unregister_buf";
	}
out:
	free(comp);
	free(run.t_post);
	free(run.regs);
	return err;
}

void perf_result_free(struct perf_result *res)
{
	free(res->lat_ns);
	*res = (struct perf_result){ 0 };
}

double perf_lat_us(const struct perf_result *res, double q)
{
	uint64_t i;

	if (res->lat_count == 0)
		return 0;
	i = (uint64_t)(q * (double)(res->lat_count - 1) + 0.5);
	if (i >= res->lat_count)
		i = res->lat_count - 1;
	return (double)res->lat_ns[i] / 1e3;
}
