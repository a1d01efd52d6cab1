/*
 * test_alloc.c - the range allocator: limits, coalescing, the good-fit policy
 * of its size classes, refused releases, and a randomized run against a
 * one-byte-per-unit model.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "randbytes.h"
#include "tap.h"

static bool stats_equal(const struct alloc_stats *x, const struct alloc_stats *y)
{
	return x->total == y->total && x->used == y->used && x->free == y->free &&
	       x->largest_free == y->largest_free && x->live == y->live &&
	       x->peak_used == y->peak_used && x->free_ranges == y->free_ranges;
}

static struct alloc_stats stats_of(const struct alloc *a)
{
	struct alloc_stats st;

	alloc_get_stats(a, &st);
	return st;
}

static bool new_fails(uint64_t total, uint64_t alignment)
{
	struct alloc *a;

	errno = 0;
	a = alloc_new(total, alignment);
	alloc_free(a);
	return !a && errno == EINVAL;
}

static void test_new(void)
{
	struct alloc *a;
	struct alloc_stats st;

	ok(new_fails(1 << 20, 0) && new_fails(1 << 20, 4) && new_fails(1 << 20, 24) &&
	   new_fails(1 << 20, 4096 + 64) && new_fails(1 << 20, UINT64_MAX),
	   "alloc_new refuses alignments that are not a power of two >= 8");
	ok(new_fails(0, 64) && new_fails(63, 64) && new_fails(4095, 4096),
	   "alloc_new refuses a pool smaller than its alignment");
	alloc_free(NULL);

	a = alloc_new(1000, 64);
	ok(a != NULL, "alloc_new(1000, 64)");
	if (!a)
		return;
	alloc_get_stats(a, &st);
	ok(alloc_alignment(a) == 64, "alignment is reported");
	ok(st.total == 960 && st.free == 960 && st.used == 0 && st.largest_free == 960 &&
	   st.live == 0 && st.peak_used == 0 && st.free_ranges == 1,
	   "a new pool is one free range of total rounded down to the alignment");
	alloc_free(a);
}

static void test_reserve_basics(void)
{
	struct alloc *a = alloc_new(1 << 20, 64);
	struct alloc_stats before, after;
	uint64_t off = 7, len = 7;
	int rc;

	if (!a) {
		skip(6, "alloc_new failed");
		return;
	}
	rc = alloc_reserve(a, 1, &off, &len);
	ok(rc == 0 && off == 0 && len == 64, "first reserve: offset 0, 1 byte rounds to 64");
	rc = alloc_reserve(a, 65, &off, &len);
	ok(rc == 0 && off == 64 && len == 128, "next reserve follows it, 65 rounds to 128");
	rc = alloc_reserve(a, 128, &off, &len);
	ok(rc == 0 && off == 192 && len == 128, "an aligned size is not rounded");

	before = stats_of(a);
	ok(alloc_reserve(a, 0, &off, &len) == -EINVAL &&
	   alloc_reserve(a, UINT64_MAX, &off, &len) == -EINVAL &&
	   alloc_reserve(a, UINT64_MAX - 62, &off, &len) == -EINVAL,
	   "size 0 and sizes that overflow when rounded: -EINVAL");
	ok(alloc_reserve(a, UINT64_MAX - 63, &off, &len) == -ENOMEM &&
	   alloc_reserve(a, (1 << 20) - 320 + 1, &off, &len) == -ENOMEM,
	   "sizes longer than any free range: -ENOMEM");
	after = stats_of(a);
	ok(stats_equal(&before, &after), "refused reserves change nothing");
	alloc_free(a);
}

static void test_exact_fill(void)
{
	enum { BLOCKS = 16, BLOCK = 256 };
	struct alloc *a = alloc_new(BLOCKS * BLOCK, BLOCK);
	struct alloc_stats st;
	uint64_t off, len;
	bool in_order = true;

	if (!a) {
		skip(4, "alloc_new failed");
		return;
	}
	for (uint64_t i = 0; i < BLOCKS; i++)
		if (alloc_reserve(a, BLOCK - 3, &off, &len) != 0 || off != i * BLOCK ||
		    len != BLOCK)
			in_order = false;
	ok(in_order, "%d reserves fill the pool front to back", BLOCKS);
	st = stats_of(a);
	ok(st.used == st.total && st.free == 0 && st.largest_free == 0 &&
	   st.free_ranges == 0 && st.live == BLOCKS && st.peak_used == st.total,
	   "a full pool: no free range, peak == total");
	ok(alloc_reserve(a, 1, &off, &len) == -ENOMEM, "a full pool: -ENOMEM");
	for (uint64_t i = 0; i < BLOCKS; i += 2)
		alloc_release(a, i * BLOCK, BLOCK);
	for (uint64_t i = 1; i < BLOCKS; i += 2)
		alloc_release(a, i * BLOCK, BLOCK);
	st = stats_of(a);
	ok(st.used == 0 && st.live == 0 && st.free_ranges == 1 && st.largest_free == st.total &&
	   st.peak_used == st.total, "released in two passes, the pool is one range again");
	alloc_free(a);
}

/* Rearranges p into the next permutation in lexicographic order; false after the last. */
static bool next_permutation(int *p, int n)
{
	int i = n - 2, j = n - 1, tmp;

	while (i >= 0 && p[i] >= p[i + 1])
		i--;
	if (i < 0)
		return false;
	while (p[j] <= p[i])
		j--;
	tmp = p[i];
	p[i] = p[j];
	p[j] = tmp;
	for (i++, j = n - 1; i < j; i++, j--) {
		tmp = p[i];
		p[i] = p[j];
		p[j] = tmp;
	}
	return true;
}

/*
 * Fills blocks 0..n-1 of a pool of pool_blocks blocks, then releases them in
 * every order.  After each release the free ranges must be exactly the runs
 * of free blocks: no missed merge, no merge too many.
 */
static void coalesce_every_order(int n, int pool_blocks)
{
	enum { BLOCK = 64, MAX_BLOCKS = 8 };
	struct alloc *a = alloc_new((uint64_t)pool_blocks * BLOCK, BLOCK);
	int order[MAX_BLOCKS], orders = 0;
	bool good = true;

	if (!a) {
		skip(1, "alloc_new failed");
		return;
	}
	for (int i = 0; i < n; i++)
		order[i] = i;
	do {
		bool is_free[MAX_BLOCKS] = { false };
		uint64_t off, len;

		for (int i = n; i < pool_blocks; i++)
			is_free[i] = true;
		for (int i = 0; i < n && good; i++)
			if (alloc_reserve(a, BLOCK, &off, &len) != 0 || off != (uint64_t)i * BLOCK) {
				diag("order %d: refill of block %d failed", orders, i);
				good = false;
			}
		for (int k = 0; k < n && good; k++) {
			uint64_t runs = 0, run = 0, longest = 0;
			struct alloc_stats st;

			if (alloc_release(a, (uint64_t)order[k] * BLOCK, BLOCK) != 0)
				good = false;
			is_free[order[k]] = true;
			for (int i = 0; i < pool_blocks; i++) {
				run = is_free[i] ? run + 1 : 0;
				runs += run == 1;
				longest = run > longest ? run : longest;
			}
			st = stats_of(a);
			if (st.free_ranges != runs || st.largest_free != longest * BLOCK) {
				diag("order %d step %d: %" PRIu64 " ranges, largest %" PRIu64
				     "; expected %" PRIu64 ", %" PRIu64, orders, k, st.free_ranges,
				     st.largest_free, runs, longest * BLOCK);
				good = false;
			}
		}
		orders++;
	} while (good && next_permutation(order, n));
	ok(good && stats_of(a).largest_free == (uint64_t)pool_blocks * BLOCK,
	   "coalescing: %d release orders of %d blocks in a %d-block pool end in one range",
	   orders, n, pool_blocks);
	alloc_free(a);
}

static void test_good_fit(void)
{
	enum { U = 64 };
	/* Holes of 5, 2, 3 and 2 units between one-unit live blocks, then a tail. */
	static const uint64_t layout[] = { 5, 1, 2, 1, 3, 1, 2, 1 };
	static const bool hole[] = { true, false, true, false, true, false, true, false };
	struct alloc *a = alloc_new(64 * U, U);
	uint64_t off, len, at = 0;
	bool setup = true;

	if (!a) {
		skip(7, "alloc_new failed");
		return;
	}
	for (size_t i = 0; i < sizeof(layout) / sizeof(layout[0]); i++) {
		setup &= alloc_reserve(a, layout[i] * U, &off, &len) == 0 && off == at;
		at += layout[i] * U;
	}
	at = 0;
	for (size_t i = 0; i < sizeof(layout) / sizeof(layout[0]); i++) {
		if (hole[i])
			setup &= alloc_release(a, at, layout[i] * U) == 0;
		at += layout[i] * U;
	}
	ok(setup && stats_of(a).free_ranges == 5, "good fit: holes of 5@0 2@6 3@9 2@13, tail@16");
	/* Below 32 units a class is one size; a class list is last in, first out. */
	ok(alloc_reserve(a, 1 * U, &off, &len) == 0 && off == 13 * U,
	   "1 unit: no 1-unit hole, so the next class up, whose head is the 2-unit hole freed last");
	ok(alloc_reserve(a, 2 * U, &off, &len) == 0 && off == 6 * U,
	   "2 units skip the 1-unit rest and take the other 2-unit hole");
	ok(alloc_reserve(a, 3 * U, &off, &len) == 0 && off == 9 * U,
	   "3 units take the 3-unit hole, not the 5-unit one");
	ok(alloc_reserve(a, 4 * U, &off, &len) == 0 && off == 0,
	   "4 units take the 5-unit hole");
	ok(alloc_reserve(a, 1 * U, &off, &len) == 0 && off == 4 * U,
	   "1 unit: of the 1-unit rests at 14 and 4, the one made last");
	ok(alloc_reserve(a, 6 * U, &off, &len) == 0 && off == 16 * U && len == 6 * U,
	   "6 units fit only the tail");
	alloc_free(a);
}

/*
 * Above 32 units a class spans 1/32 of its lower bound: 64 and 65 units share
 * one.  A request tries its own class's head, then the next non-empty class;
 * when nothing above is left, it searches its own class's list.
 */
static void test_good_fit_classes(void)
{
	enum { U = 64 };
	struct alloc *a = alloc_new(200 * U, U);
	struct alloc_stats st;
	uint64_t off, len, o[5];
	bool setup;

	if (!a) {
		skip(5, "alloc_new failed");
		return;
	}
	/* 64@0, 1@64, 65@65, 1@130, 69@131 (the tail, in a class of its own) */
	setup = alloc_reserve(a, 64 * U, &o[0], &len) == 0 && alloc_reserve(a, U, &o[1], &len) == 0 &&
		alloc_reserve(a, 65 * U, &o[2], &len) == 0 && alloc_reserve(a, U, &o[3], &len) == 0 &&
		o[2] == 65 * U && o[3] == 130 * U &&
		alloc_release(a, o[2], 65 * U) == 0 && alloc_release(a, o[0], 64 * U) == 0;
	st = stats_of(a);
	ok(setup && st.free_ranges == 3 && st.largest_free == 69 * U,
	   "classes: free 64@0 and 65@65 (one class, 64 at its head), tail 69@131");
	ok(alloc_reserve(a, 65 * U, &off, &len) == 0 && off == 131 * U,
	   "65 units: the head of their class is too short, so the next class up (the tail)");
	ok(alloc_release(a, off, len) == 0 && alloc_reserve(a, 69 * U, &o[4], &len) == 0 &&
	   o[4] == 131 * U && stats_of(a).largest_free == 65 * U,
	   "69 units take the tail whole; largest_free is now the 65-unit range, exactly");
	ok(alloc_reserve(a, 65 * U, &off, &len) == 0 && off == 65 * U,
	   "65 units: nothing above their class, so its list is searched past the 64-unit head");
	ok(alloc_reserve(a, 65 * U, &off, &len) == -ENOMEM && alloc_reserve(a, 64 * U, &off, &len) == 0 &&
	   off == 0 && stats_of(a).free_ranges == 0, "then -ENOMEM for 65, and 64 fits exactly");
	alloc_free(a);
}

/* A release that must be refused: -EINVAL and the stats stay as they were. */
static bool refused(struct alloc *a, uint64_t offset, uint64_t length)
{
	struct alloc_stats before = stats_of(a), after;
	int rc = alloc_release(a, offset, length);

	after = stats_of(a);
	if (rc != -EINVAL || !stats_equal(&before, &after)) {
		diag("release(%" PRIu64 ", %" PRIu64 ") gave %d", offset, length, rc);
		return false;
	}
	return true;
}

static void test_bad_release(void)
{
	enum { U = 64, UNITS = 16 };
	const uint64_t total = UNITS * U, top = UINT64_MAX & ~(uint64_t)(U - 1);
	struct alloc *a = alloc_new(total, U);
	uint64_t a_off, b_off, c_off, len;

	if (!a) {
		skip(7, "alloc_new failed");
		return;
	}
	/* A@0 (1 unit), B@1 (2 units), C@3 (1 unit), free tail from unit 4 */
	if (alloc_reserve(a, U, &a_off, &len) || alloc_reserve(a, 2 * U, &b_off, &len) ||
	    alloc_reserve(a, U, &c_off, &len) || alloc_release(a, b_off, 2 * U)) {
		ok(0, "bad releases: setup");
		alloc_free(a);
		return;
	}
	/* These two need the live table of ALLOC_DEBUG builds (this test's): a
	 * release build sees only free ranges that share an end with the range,
	 * the first and third of the first line. */
	ok(refused(a, b_off, 2 * U) && refused(a, b_off, U) && refused(a, b_off + U, U),
	   "a double release is refused (ALLOC_DEBUG)");
	ok(refused(a, a_off, 2 * U) && refused(a, 2 * U, 2 * U) && refused(a, c_off, 2 * U) &&
	   refused(a, 0, total), "a range overlapping a free range is refused (ALLOC_DEBUG)");
	ok(refused(a, a_off + 8, U) && refused(a, a_off, U + 8) && refused(a, a_off, U - 8) &&
	   refused(a, c_off + 1, U - 1) && refused(a, a_off, 0),
	   "a misaligned or empty range is refused");
	ok(refused(a, total, U) && refused(a, total - U, 2 * U) && refused(a, top, U) &&
	   refused(a, c_off, top) && refused(a, top, top),
	   "a range outside the pool (or wrapping around) is refused");
	ok(alloc_release(a, a_off, U) == 0 && alloc_release(a, c_off, U) == 0,
	   "the live ranges still release");
	ok(stats_of(a).free_ranges == 1 && stats_of(a).largest_free == total,
	   "after all that, one free range");
	ok(refused(a, a_off, U), "nothing is live: release is refused");
	alloc_free(a);
}

static void test_huge_pool(void)
{
	const uint64_t align = 4096, total = UINT64_MAX & ~(align - 1);
	struct alloc *a = alloc_new(UINT64_MAX, align);
	uint64_t off, len;

	if (!a) {
		skip(3, "alloc_new failed");
		return;
	}
	ok(alloc_reserve(a, total, &off, &len) == 0 && off == 0 && len == total &&
	   alloc_reserve(a, 1, &off, &len) == -ENOMEM,
	   "a 2^64 - 4096 byte pool reserves whole");
	ok(alloc_release(a, 0, total) == 0 && alloc_reserve(a, 5, &off, &len) == 0 &&
	   alloc_reserve(a, total - align, &off, &len) == 0 && off == align &&
	   stats_of(a).free_ranges == 0, "its last byte is reachable");
	ok(alloc_reserve(a, total + 1, &off, &len) == -EINVAL &&
	   alloc_release(a, align, total) == -EINVAL && alloc_release(a, align, total - align) == 0 &&
	   alloc_release(a, 0, align) == 0 && stats_of(a).largest_free == total,
	   "no overflow at the top of the address space");
	alloc_free(a);
}

/* ---- randomized, against a model ------------------------------------------ */

enum { CHK_RESERVE, CHK_SHAPE, CHK_STATS, CHK_REFUSE, CHK_DRAIN, CHK_N };

static const char *const chk_name[CHK_N] = {
	"reserve and release agree with good fit over the model (class order, no class skipped)",
	"every live range is aligned, inside the pool and disjoint from the others",
	"used/free/live/peak/largest_free/free_ranges match the model after every call",
	"bad releases are refused and change nothing",
	"releasing every live range leaves one free range",
};

struct live_range {
	uint64_t off;
	uint64_t len;
};

struct model {
	struct alloc *a;
	uint64_t align;
	uint64_t units;		/* pool size in alignment units */
	uint64_t rng;
	uint8_t *busy;		/* one byte per unit: 1 inside a live range */
	struct live_range *live;
	size_t nlive;
	uint64_t used;
	uint64_t peak;
	uint64_t seed;
	int op;
	bool failed[CHK_N];
};

static uint64_t rnd(struct model *m)
{
	return rand_xorshift(&m->rng);
}

static uint64_t rnd_below(struct model *m, uint64_t n)
{
	return rnd(m) % n;
}

__attribute__((format(printf, 3, 4)))
static void fail(struct model *m, int chk, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (m->failed[chk])
		return;
	m->failed[chk] = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	diag("align %" PRIu64 " seed %" PRIu64 " op %d: %s", m->align, m->seed, m->op, msg);
}

/* The allocator's size class of u units, as one ordered number: one class
 * per size below 32 units, then 32 classes per power of two. */
static unsigned int model_class(uint64_t u)
{
	int t;

	if (u < 32)
		return (unsigned int)u;
	t = 63 - __builtin_clzll(u);
	return (unsigned int)(t - 4) * 32 + (unsigned int)((u >> (t - 5)) - 32);
}

/* The run of free units starting at unit at, or 0 when unit at is not the
 * start of one. */
static uint64_t model_run_at(const struct model *m, uint64_t at)
{
	uint64_t i = at;

	if (at >= m->units || m->busy[at] || (at && !m->busy[at - 1]))
		return 0;
	while (i < m->units && !m->busy[i])
		i++;
	return i - at;
}

/*
 * Good fit over the model: is a reserve of need units at unit at what the
 * policy may give?  It must start a free run at least need long, and no free
 * run long enough may sit in a class between need's and the one taken (a
 * class list's order is the allocator's own, so within a class any member
 * that fits will do).  *fits: some run is long enough.
 */
static bool model_good_fit(const struct model *m, uint64_t need, uint64_t at, bool *fits)
{
	uint64_t got = model_run_at(m, at), i = 0;
	unsigned int lo = model_class(need), hi = got ? model_class(got) : 0;
	bool good = got >= need;

	*fits = false;
	while (i < m->units) {
		uint64_t start = i;
		unsigned int c;

		if (m->busy[i]) {
			i++;
			continue;
		}
		while (i < m->units && !m->busy[i])
			i++;
		if (i - start < need)
			continue;
		*fits = true;
		c = model_class(i - start);
		if (c > lo && c < hi)
			good = false;
	}
	return good;
}

static void model_mark(struct model *m, uint64_t off, uint64_t len, uint8_t val)
{
	for (uint64_t u = off / m->align; u < (off + len) / m->align; u++)
		m->busy[u] = val;
}

static void check_stats(struct model *m)
{
	struct alloc_stats st = stats_of(m->a);
	uint64_t runs = 0, run = 0, longest = 0, busy = 0, total = m->units * m->align;

	for (uint64_t u = 0; u < m->units; u++) {
		busy += m->busy[u];
		run = m->busy[u] ? 0 : run + 1;
		runs += run == 1;
		longest = run > longest ? run : longest;
	}
	if (busy * m->align != m->used)
		fail(m, CHK_SHAPE, "model books disagree with its bitmap");
	if (st.total != total || st.used != m->used || st.free != total - m->used ||
	    st.live != m->nlive || st.peak_used != m->peak || st.free_ranges != runs ||
	    st.largest_free != longest * m->align)
		fail(m, CHK_STATS, "stats used %" PRIu64 " live %" PRIu64 " peak %" PRIu64
		     " ranges %" PRIu64 " largest %" PRIu64 "; model %" PRIu64 " %zu %" PRIu64
		     " %" PRIu64 " %" PRIu64, st.used, st.live, st.peak_used, st.free_ranges,
		     st.largest_free, m->used, m->nlive, m->peak, runs, longest * m->align);
}

/* Mostly small requests, some medium, a few large; never a multiple of align. */
static uint64_t random_size(struct model *m)
{
	uint64_t r = rnd_below(m, 100), units;

	if (r < 75)
		units = 1 + rnd_below(m, 3);
	else if (r < 95)
		units = 4 + rnd_below(m, 13);
	else
		units = 17 + rnd_below(m, 48);
	return (units - 1) * m->align + 1 + rnd_below(m, m->align);
}

static void do_reserve(struct model *m)
{
	uint64_t size = random_size(m), need = (size + m->align - 1) / m->align;
	uint64_t off = 0, len = 0;
	bool fits, good;
	int rc = alloc_reserve(m->a, size, &off, &len);

	/* Unit m->units starts no run: a refused reserve is never a good one. */
	good = model_good_fit(m, need, rc == 0 && off % m->align == 0 ? off / m->align : m->units,
			      &fits) && rc == 0;
	if (!fits) {
		if (rc != -ENOMEM)
			fail(m, CHK_RESERVE, "reserve(%" PRIu64 ") gave %d, expected -ENOMEM",
			     size, rc);
		if (rc != 0)
			return;
	} else if (rc != 0 || !good) {
		fail(m, CHK_RESERVE, "reserve(%" PRIu64 ") gave %d at %" PRIu64
		     ": not a good fit over the model", size, rc, off);
		if (rc != 0)
			return;
	}
	if (off % m->align || len != need * m->align || off >= m->units * m->align ||
	    len > m->units * m->align - off) {
		fail(m, CHK_SHAPE, "reserve(%" PRIu64 ") gave [%" PRIu64 ", +%" PRIu64 ")",
		     size, off, len);
		return;	/* unusable: drop it rather than corrupt the model */
	}
	for (uint64_t u = off / m->align; u < (off + len) / m->align; u++)
		if (m->busy[u])
			fail(m, CHK_SHAPE, "[%" PRIu64 ", +%" PRIu64 ") overlaps a live range",
			     off, len);
	model_mark(m, off, len, 1);
	m->live[m->nlive++] = (struct live_range){ off, len };
	m->used += len;
	m->peak = m->used > m->peak ? m->used : m->peak;
}

static struct live_range do_release(struct model *m)
{
	size_t i = rnd_below(m, m->nlive);
	struct live_range r = m->live[i];
	int rc = alloc_release(m->a, r.off, r.len);

	if (rc != 0)
		fail(m, CHK_RESERVE, "release(%" PRIu64 ", %" PRIu64 ") gave %d", r.off, r.len, rc);
	model_mark(m, r.off, r.len, 0);
	m->live[i] = m->live[--m->nlive];
	m->used -= r.len;
	return r;
}

static void expect_refused(struct model *m, uint64_t off, uint64_t len, const char *kind)
{
	struct alloc_stats before = stats_of(m->a), after;
	int rc = alloc_release(m->a, off, len);

	after = stats_of(m->a);
	if (rc != -EINVAL || !stats_equal(&before, &after))
		fail(m, CHK_REFUSE, "%s release(%" PRIu64 ", %" PRIu64 ") gave %d", kind, off,
		     len, rc);
}

static void probe_bad_release(struct model *m)
{
	uint64_t total = m->units * m->align, u, first, n;
	struct live_range r;

	switch (rnd_below(m, 4)) {
	case 0:
		if (!m->nlive)
			return;
		r = do_release(m);
		expect_refused(m, r.off, r.len, "double");
		return;
	case 1:
		/* any range that covers a free unit */
		u = rnd_below(m, m->units);
		if (m->busy[u])
			return;
		first = u - rnd_below(m, (u < 4 ? u : 4) + 1);
		n = u - first + 1 + rnd_below(m, 8);
		if (first + n > m->units)
			n = m->units - first;
		expect_refused(m, first * m->align, n * m->align, "overlapping");
		return;
	case 2:
		if (!m->nlive)
			return;
		r = m->live[rnd_below(m, m->nlive)];
		if (rnd(m) & 1)
			expect_refused(m, r.off + 1 + rnd_below(m, m->align - 1), r.len,
				       "misaligned");
		else
			expect_refused(m, r.off, r.len + 1 + rnd_below(m, m->align - 1),
				       "misaligned");
		return;
	default:
		n = 1 + rnd_below(m, 3);
		expect_refused(m, total - rnd_below(m, n) * m->align, n * m->align + m->align,
			       "out of bounds");
		return;
	}
}

static void drain(struct model *m)
{
	struct alloc_stats st;

	while (m->nlive)
		do_release(m);
	st = stats_of(m->a);
	if (st.used || st.live || st.free_ranges != 1 || st.largest_free != st.total)
		fail(m, CHK_DRAIN, "%" PRIu64 " ranges, largest %" PRIu64 " of %" PRIu64,
		     st.free_ranges, st.largest_free, st.total);
}

/* Fills the pool with one-unit ranges, then releases a random half of them:
 * hundreds of free ranges, so the trees get deep. */
static void shred(struct model *m)
{
	struct alloc_stats st;
	uint64_t off, len;

	drain(m);
	while (alloc_reserve(m->a, m->align, &off, &len) == 0) {
		if (off != m->nlive * m->align || len != m->align) {
			fail(m, CHK_RESERVE, "one-unit fill gave [%" PRIu64 ", +%" PRIu64 ")", off,
			     len);
			return;
		}
		model_mark(m, off, len, 1);
		m->live[m->nlive++] = (struct live_range){ off, len };
		m->used += len;
	}
	m->peak = m->used > m->peak ? m->used : m->peak;
	st = stats_of(m->a);
	if (m->nlive != m->units || st.free_ranges != 0)
		fail(m, CHK_RESERVE, "one-unit fill stopped at %zu of %" PRIu64, m->nlive,
		     m->units);
	for (uint64_t n = m->units / 2; n; n--) {
		do_release(m);
		check_stats(m);
	}
}

static void random_run(struct model *m, int ops)
{
	for (m->op = 0; m->op < ops; m->op++) {
		if (m->op == ops / 2)
			shred(m);
		/* Alternate filling and draining phases to sweep every fill level. */
		uint64_t reserve_pct = (m->op / 1000) % 2 ? 65 : 40;

		if (!m->nlive || rnd_below(m, 100) < reserve_pct)
			do_reserve(m);
		else
			do_release(m);
		if (rnd_below(m, 16) == 0)
			probe_bad_release(m);
		check_stats(m);
	}
	drain(m);
	check_stats(m);
}

static void test_random(uint64_t align)
{
	enum { UNITS = 1024, SEEDS = 5, OPS = 20000 };
	struct model m = { .align = align, .units = UNITS };
	bool setup = true;

	m.busy = calloc(UNITS, 1);
	m.live = calloc(UNITS, sizeof(*m.live));
	for (uint64_t seed = 1; seed <= SEEDS && setup; seed++) {
		m.seed = seed;
		m.rng = seed * 0x9e3779b97f4a7c15ULL;
		m.nlive = 0;
		m.used = 0;
		m.peak = 0;
		/* Half a unit over, to be rounded away. */
		m.a = m.busy && m.live ? alloc_new(UNITS * align + align / 2, align) : NULL;
		if (!m.a) {
			setup = false;
			break;
		}
		random_run(&m, OPS);
		alloc_free(m.a);
	}
	if (!setup) {
		skip(CHK_N, "out of memory");
	} else {
		for (int c = 0; c < CHK_N; c++)
			ok(!m.failed[c], "random, align %" PRIu64 ", %d seeds x %d ops: %s", align,
			   SEEDS, OPS, chk_name[c]);
	}
	free(m.busy);
	free(m.live);
}

/* ---- alloc_claim: rebuilding an allocator from the persistent state ---------- */

static void test_claim(void)
{
	struct alloc *a = alloc_new(16 * 64, 64);
	struct alloc_stats st;
	uint64_t off, len;

	if (!a) {
		skip(9, "out of memory");
		return;
	}
	ok(alloc_claim(a, 0, 0) == -EINVAL && alloc_claim(a, 32, 64) == -EINVAL &&
	   alloc_claim(a, 0, 65) == -EINVAL && alloc_claim(a, 16 * 64, 64) == -EINVAL &&
	   alloc_claim(a, 15 * 64, 128) == -EINVAL && alloc_claim(a, 64, UINT64_MAX - 63) == -EINVAL,
	   "alloc_claim refuses empty, misaligned and out-of-pool ranges");
	ok(alloc_claim(a, 4 * 64, 2 * 64) == 0, "claim [4, 6) in the middle of the pool");
	st = stats_of(a);
	ok(st.used == 128 && st.live == 1 && st.free_ranges == 2 && st.largest_free == 10 * 64,
	   "the free range is split around it (used %" PRIu64 ", ranges %" PRIu64 ")", st.used,
	   st.free_ranges);
	ok(alloc_claim(a, 5 * 64, 64) == -EEXIST && alloc_claim(a, 3 * 64, 2 * 64) == -EEXIST &&
	   alloc_claim(a, 2 * 64, 8 * 64) == -EEXIST,
	   "a claim that overlaps a claimed range is -EEXIST");
	ok(alloc_claim(a, 0, 64) == 0 && alloc_claim(a, 15 * 64, 64) == 0 &&
	   alloc_claim(a, 6 * 64, 64) == 0, "claims at the front and end of free ranges");
	ok(alloc_claim(a, 64, 3 * 64) == 0, "a claim of a whole free range");
	st = stats_of(a);
	ok(st.used == 8 * 64 && st.live == 5 && st.free_ranges == 1 && st.largest_free == 8 * 64,
	   "stats after five claims: one free range [7, 15)");
	ok(alloc_reserve(a, 64, &off, &len) == 0 && off == 7 * 64 &&
	   alloc_claim(a, 7 * 64, 64) == -EEXIST, "reserve uses the free range; claiming it is -EEXIST");
	ok(alloc_release(a, 64, 3 * 64) == 0 && alloc_release(a, 0, 64) == 0 &&
	   alloc_release(a, 4 * 64, 2 * 64) == 0 && alloc_release(a, 6 * 64, 64) == 0 &&
	   alloc_release(a, 15 * 64, 64) == 0 && alloc_release(a, off, len) == 0 &&
	   (st = stats_of(a), st.used == 0 && st.free_ranges == 1 && st.largest_free == 16 * 64),
	   "claimed ranges release and coalesce back to one range");
	alloc_free(a);
}

/* Fisher-Yates over the pairs (a[i], b[i]), i < n, from the LCG at *rng. */
static void shuffle_pairs(uint64_t *a, uint64_t *b, size_t n, uint64_t *rng)
{
	for (size_t i = n; i > 1; i--) {
		size_t j;
		uint64_t t;

		*rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (*rng >> 33) % i;
		t = a[i - 1], a[i - 1] = a[j], a[j] = t;
		t = b[i - 1], b[i - 1] = b[j], b[j] = t;
	}
}

/* Random disjoint ranges claimed in random order, then filled and drained. */
static void test_claim_random(void)
{
	enum { UNITS = 512, ROUNDS = 50 };
	uint8_t busy[UNITS];
	uint64_t starts[UNITS], lens[UNITS];
	uint64_t rng = 12345;
	bool good = true;

	for (int r = 0; r < ROUNDS && good; r++) {
		struct alloc *a = alloc_new(UNITS * 64, 64);
		struct alloc_stats st;
		size_t n = 0, used = 0;
		uint64_t off, len;

		if (!a) {
			good = false;
			break;
		}
		memset(busy, 0, sizeof busy);
		/* Cut the pool into random pieces; keep about half of them. */
		for (size_t u = 0; u < UNITS;) {
			size_t l;

			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			l = 1 + (rng >> 33) % 9;
			if (u + l > UNITS)
				l = UNITS - u;
			if ((rng >> 20) & 1) {
				starts[n] = u;
				lens[n++] = l;
			}
			u += l;
		}
		/* In a shuffled order. */
		shuffle_pairs(starts, lens, n, &rng);
		for (size_t i = 0; i < n; i++) {
			good &= alloc_claim(a, starts[i] * 64, lens[i] * 64) == 0;
			memset(busy + starts[i], 1, lens[i]);
			used += lens[i];
		}
		st = stats_of(a);
		good &= st.used == used * 64 && st.live == n;
		/* What is left is exactly the units no claim took. */
		while (alloc_reserve(a, 64, &off, &len) == 0) {
			good &= len == 64 && !busy[off / 64];
			busy[off / 64] = 1;
		}
		for (size_t u = 0; u < UNITS; u++)
			good &= busy[u] == 1;
		alloc_free(a);
	}
	ok(good, "%d rounds: random disjoint claims in random order leave exactly the rest free",
	   ROUNDS);
}

/*
 * Many claims: enough that the claim index's walks grow long and it rebuilds,
 * in offset order, in reverse and shuffled, with a release (which drops the
 * index) and a reserve halfway through.  Then every unit no claim took must
 * be free, and releasing everything must leave one range.
 */
static void test_claim_many(void)
{
	enum { N = 1500, U = 64 };
	static uint64_t start[N], len[N];
	static uint8_t busy[N * 6];
	uint64_t rng = 777, at = 0, units, off, l;
	bool good = true;

	for (int order = 0; order < 3; order++) {
		struct alloc *a;
		size_t n = 0;

		at = 0;
		for (size_t i = 0; i < N; i++) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			at += (rng >> 40) % 3;
			start[i] = at;
			len[i] = 1 + (rng >> 20) % 3;
			at += len[i];
		}
		units = at + 5;
		a = alloc_new(units * U, U);
		if (!a) {
			good = false;
			break;
		}
		for (size_t i = 0; order == 1 && i < N / 2; i++) {
			uint64_t t = start[i];

			start[i] = start[N - 1 - i], start[N - 1 - i] = t;
			t = len[i], len[i] = len[N - 1 - i], len[N - 1 - i] = t;
		}
		if (order == 2)
			shuffle_pairs(start, len, N, &rng);
		memset(busy, 0, sizeof busy);
		for (size_t i = 0; i < N; i++) {
			good &= alloc_claim(a, start[i] * U, len[i] * U) == 0;
			good &= alloc_claim(a, start[i] * U, U) == -EEXIST;
			memset(busy + start[i], 1, len[i]);
			n++;
			if (i == N / 2) {
				/* A release and a reserve between claims drop the index. */
				good &= alloc_release(a, start[0] * U, len[0] * U) == 0;
				memset(busy + start[0], 0, len[0]);
				good &= alloc_claim(a, start[0] * U, len[0] * U) == 0;
				memset(busy + start[0], 1, len[0]);
			}
		}
		while (alloc_reserve(a, U, &off, &l) == 0) {
			good &= !busy[off / U];
			busy[off / U] = 1;
			n++;
		}
		for (uint64_t u = 0; u < units; u++)
			good &= busy[u] == 1;
		good &= stats_of(a).used == stats_of(a).total && stats_of(a).live == n;
		for (size_t i = 0; i < N; i++)
			good &= alloc_release(a, start[i] * U, len[i] * U) == 0;
		for (uint64_t u = 0; u < units; u++)
			if (busy[u] && alloc_release(a, u * U, U) == 0)
				busy[u] = 0;
		good &= stats_of(a).free_ranges == 1 && stats_of(a).largest_free == units * U &&
			stats_of(a).live == 0;
		alloc_free(a);
	}
	ok(good, "%d claims in offset order, reversed and shuffled: exactly the rest is free, "
	   "and all of it releases back to one range", N);
}

int main(void)
{
	test_new();
	test_reserve_basics();
	test_exact_fill();
	coalesce_every_order(4, 4);
	coalesce_every_order(5, 7);
	test_good_fit();
	test_good_fit_classes();
	test_bad_release();
	test_huge_pool();
	test_random(8);
	test_random(64);
	test_random(4096);
	test_claim();
	test_claim_random();
	test_claim_many();
	return tap_done();
}
