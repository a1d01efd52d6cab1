/*
 * test_region.c - the region table: ids, keys, lookups, owner lists, order,
 * what an entry can hold, and a long random run checked against a model.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"
#include "tap.h"

#define N 5000

static int owner_list_count(const struct region_table *t, const struct region_list *l)
{
	int n = 0;

	for (const struct region *r = region_owner_first(t, l); r; r = region_owner_next(t, r))
		n++;
	return n;
}

static int table_in_id_order(const struct region_table *t, uint64_t *count)
{
	uint64_t last = 0, n = 0;

	for (const struct region *r = region_next_after(t, 0); r; r = region_next(t, r), n++) {
		if (r->id <= last)
			return 0;
		last = r->id;
	}
	*count = n;
	return 1;
}

static void test_basics(void)
{
	struct region_table *t = region_table_new();
	struct region_list a = { 0 }, b = { 0 };
	static struct region *rs[N];
	uint64_t count = 0, max_id = 0;
	int distinct_keys = 0, found = 1, gone = 1;

	ok(t != NULL, "table created");
	if (!t)
		return;
	ok(region_owner_first(t, &a) == NULL && region_next_after(t, 0) == NULL,
	   "a zeroed owner list and a new table are empty");
	for (int i = 0; i < N; i++) {
		rs[i] = region_add(t, i % 2 ? &b : &a, i % 2 ? 2 : 1, 0, (uint64_t)i * 64, 64);
		if (!rs[i]) {
			ok(0, "region %d added", i);
			region_table_free(t);
			return;
		}
		if (rs[i]->id > max_id)
			max_id = rs[i]->id;
	}
	ok(rs[0]->id == 1 && max_id == N, "ids count up from 1 (last %llu)",
	   (unsigned long long)max_id);
	ok(region_count(t) == N, "count is %d", N);
	for (int i = 1; i < N; i++)
		distinct_keys += rs[i]->key != rs[i - 1]->key;
	/* 32-bit random keys: a few equal neighbours in 5000 would be a broken RNG. */
	ok(distinct_keys >= N - 3, "keys look random (%d of %d differ from the previous)",
	   distinct_keys, N - 1);
	for (int i = 0; i < N; i++)
		found &= region_find(t, rs[i]->id) == rs[i];
	ok(found, "every region is found by id (through hash growth)");
	ok(region_find(t, 0) == NULL && region_find(t, N + 1) == NULL, "unknown ids are not found");
	ok(owner_list_count(t, &a) == N / 2 && owner_list_count(t, &b) == N / 2,
	   "owner lists hold their regions");

	/* Remove every third region, from both owners. */
	for (int i = 0; i < N; i += 3) {
		uint64_t id = rs[i]->id;

		region_remove(t, i % 2 ? &b : &a, rs[i]);
		gone &= region_find(t, id) == NULL;
		rs[i] = NULL;
	}
	ok(gone, "removed regions are not found");
	ok(region_find(t, 0) == NULL, "id 0 is not found among free slots");
	found = table_in_id_order(t, &count);
	ok(found && count == region_count(t), "table walks in id order over the %llu left",
	   (unsigned long long)count);
	ok(region_next_after(t, 1) == rs[1], "next after a removed id is the next live one");
	ok(region_next_after(t, max_id) == NULL, "nothing after the last id");

	/* A new region never reuses an id, even in a reused slot. */
	{
		struct region *r = region_add(t, &a, 1, 0, 0, 64);

		ok(r && r->id == max_id + 1, "a new region gets a new id (%llu)",
		   r ? (unsigned long long)r->id : 0ull);
	}
	while (region_owner_first(t, &b))
		region_remove(t, &b, region_owner_first(t, &b));
	ok(owner_list_count(t, &b) == 0 && b.first == 0 && b.last == 0,
	   "an owner's list empties completely");
	ok(region_count(t) == (uint64_t)owner_list_count(t, &a), "only owner a's regions remain");
	region_table_free(t);
	region_table_free(NULL);
}

/* The packed fields hold what the config allows, and refuse the rest. */
static void test_limits(void)
{
	struct region_table *t = region_table_new();
	struct region_list l = { 0 };
	const uint64_t off_max = (1ull << REGION_OFFSET_BITS) - 64;
	const uint32_t pool_max = (1u << REGION_POOL_BITS) - 1;
	struct region *r;

	if (!t) {
		ok(0, "table created");
		return;
	}
	r = region_add(t, &l, UINT64_MAX, pool_max, off_max, 1ull << 50);
	ok(r && r->pool == pool_max && r->offset == off_max && r->length == 1ull << 50 &&
	   r->owner == UINT64_MAX, "largest pool, offset, length and owner read back");
	errno = 0;
	ok(!region_add(t, &l, 1, pool_max + 1, 0, 64) && errno == ERANGE,
	   "a pool number past %u is refused (ERANGE)", pool_max);
	errno = 0;
	ok(!region_add(t, &l, 1, 0, 1ull << REGION_OFFSET_BITS, 64) && errno == ERANGE,
	   "an offset past 2^%d is refused (ERANGE)", REGION_OFFSET_BITS);
	ok(region_count(t) == 1 && owner_list_count(t, &l) == 1, "refusals change nothing");
	r = region_add(t, &l, 7, 3, 4096, 8192);
	ok(r && r->id == 2, "the next id after refusals is still the next one");
	region_table_free(t);
}

/* ---- a random run against a model ---------------------------------------- */

#define OWNERS 7
#define STEPS 300000
#define CHECK_EVERY 20000
#define MAX_IDS (2 * STEPS + 1)

struct model_region {
	struct region *r;        /* NULL: removed or never added */
	struct region *was;      /* where it was added */
	uint64_t owner;
	uint64_t offset, length;
	uint32_t pool, key;
};

struct model {
	struct model_region *by_id; /* index: id */
	uint64_t next_id;
	uint64_t *live;             /* live ids, in no order */
	uint64_t *live_bits;        /* the same, a bit per id */
	uint64_t nlive, max_live;
	uint64_t rng;
	struct region_list lists[OWNERS];
	int bad;                    /* first failure seen, reported once */
};

static uint64_t rnd(struct model *m)
{
	/* xorshift64* */
	m->rng ^= m->rng >> 12;
	m->rng ^= m->rng << 25;
	m->rng ^= m->rng >> 27;
	return m->rng * 0x2545f4914f6cdd1dULL;
}

static void fail(struct model *m, const char *what, uint64_t id)
{
	if (!m->bad)
		diag("model mismatch: %s (id %llu)", what, (unsigned long long)id);
	m->bad = 1;
}

static int same(const struct model_region *e, const struct region *r, uint64_t id)
{
	return r == e->r && r->id == id && r->owner == e->owner && r->pool == e->pool &&
	       r->offset == e->offset && r->length == e->length && r->key == e->key;
}

static void step_add(struct model *m, struct region_table *t)
{
	uint64_t owner = rnd(m) % OWNERS, id = m->next_id;
	struct model_region *e = &m->by_id[id];
	uint32_t pool = (uint32_t)(rnd(m) % 16);
	uint64_t offset = (rnd(m) % (1ull << 44)) * 64, length = (1 + rnd(m) % 4096) * 64;
	struct region *r = region_add(t, &m->lists[owner], owner + 100, pool, offset, length);

	if (!r || r->id != id) {
		fail(m, "add: not the next id", id);
		return;
	}
	*e = (struct model_region){ .r = r, .was = r, .owner = owner + 100, .pool = pool,
				    .offset = offset, .length = length, .key = r->key };
	m->next_id++;
	m->live[m->nlive++] = id;
	if (m->nlive > m->max_live)
		m->max_live = m->nlive;
	m->live_bits[id / 64] |= 1ull << (id % 64);
}

static void step_remove(struct model *m, struct region_table *t)
{
	uint64_t at, id;
	struct model_region *e;

	if (!m->nlive)
		return;
	at = rnd(m) % m->nlive;
	id = m->live[at];
	e = &m->by_id[id];
	if (region_find(t, id) != e->r) {
		fail(m, "remove: not found where it was added", id);
		return;
	}
	region_remove(t, &m->lists[e->owner - 100], e->r);
	e->r = NULL;
	m->live[at] = m->live[--m->nlive];
	m->live_bits[id / 64] &= ~(1ull << (id % 64));
	if (region_find(t, id))
		fail(m, "remove: still found", id);
}

/* Any id: live, removed, or never handed out. */
static void step_find(struct model *m, const struct region_table *t)
{
	uint64_t id = rnd(m) % (m->next_id + 2);
	const struct model_region *e = id < m->next_id ? &m->by_id[id] : NULL;
	const struct region *r = region_find(t, id);

	if (e && e->r ? !r || !same(e, r, id) : r != NULL)
		fail(m, "find", id);
}

/* The first live id above after in the model, or 0. */
static uint64_t model_next_after(const struct model *m, uint64_t after)
{
	uint64_t id = after + 1, w = id / 64, bits;

	if (id >= m->next_id)
		return 0;
	bits = m->live_bits[w] & (~0ull << (id % 64));
	while (!bits) {
		if (++w > m->next_id / 64)
			return 0;
		bits = m->live_bits[w];
	}
	id = w * 64 + (uint64_t)__builtin_ctzll(bits);
	return id < m->next_id ? id : 0;
}

/* After any id: live (the listing's usual page boundary), removed, or past
 * the last. */
static void step_next_after(struct model *m, const struct region_table *t)
{
	uint64_t after = rnd(m) % (m->next_id + 1), want;
	const struct region *r;

	if (m->nlive && rnd(m) % 2)
		after = m->live[rnd(m) % m->nlive];
	r = region_next_after(t, after);
	want = model_next_after(m, after);
	if (want ? !r || r->id != want || !same(&m->by_id[want], r, want) : r != NULL)
		fail(m, "next_after", after);
}

/* The whole table against the model: id order, owner lists, every field. */
static void check_all(struct model *m, const struct region_table *t)
{
	const struct region *r = region_next_after(t, 0);
	uint64_t n = 0;

	for (uint64_t id = 1; id < m->next_id; id++) {
		const struct model_region *e = &m->by_id[id];

		if (!e->r)
			continue;
		if (!r || !same(e, r, id)) {
			fail(m, "id order walk", id);
			return;
		}
		r = region_next(t, r);
		n++;
	}
	if (r || n != m->nlive || region_count(t) != n)
		fail(m, "walk length or count", n);
	for (int o = 0; o < OWNERS; o++) {
		uint64_t last = 0, seen = 0;

		for (r = region_owner_first(t, &m->lists[o]); r; r = region_owner_next(t, r)) {
			if (r->owner != (uint64_t)o + 100 || r->id <= last ||
			    m->by_id[r->id].r != r) {
				fail(m, "owner list", r->id);
				return;
			}
			last = r->id;
			seen++;
		}
		n -= seen;
	}
	if (n != 0)
		fail(m, "owner lists do not add up to the table", n);
}

static int cmp_ptr(const void *x, const void *y)
{
	uintptr_t a = (uintptr_t)*(struct region *const *)x, b = (uintptr_t)*(struct region *const *)y;

	return (a > b) - (a < b);
}

/* After the table emptied: as many regions as it ever held at once all land
 * where earlier regions were (freed entries are reused, not leaked), and
 * still get new ids. */
static void refill(struct model *m, struct region_table *t)
{
	uint64_t used = m->next_id - 1, first = m->next_id, reused = 0, n = m->max_live;
	struct region **old = calloc(used, sizeof *old);

	if (!old) {
		ok(0, "refill set up");
		return;
	}
	for (uint64_t id = 1; id <= used; id++)
		old[id - 1] = m->by_id[id].was;
	qsort(old, used, sizeof *old, cmp_ptr);
	for (uint64_t i = 0; i < n && !m->bad; i++)
		step_add(m, t);
	for (uint64_t id = first; id < m->next_id; id++)
		reused += bsearch(&m->by_id[id].was, old, used, sizeof *old, cmp_ptr) != NULL;
	check_all(m, t);
	ok(!m->bad && m->by_id[first].r && first > used, "refilled with %llu regions, ids still new",
	   (unsigned long long)n);
	ok(reused == n, "every one of them reuses a freed entry (%llu of %llu)",
	   (unsigned long long)reused, (unsigned long long)n);
	free(old);
}

/*
 * Phases push the live count up through several hash growths and chunk
 * additions, down to nothing (every slot back on the free list), and up
 * again, so reused slots, fresh slots and both list ends all get exercised.
 */
static void test_random_run(void)
{
	static const int add_percent[] = { 70, 50, 20, 65, 45 };
	struct region_table *t = region_table_new();
	struct model m = { .next_id = 1, .rng = 0x2545f4914f6cdd1dULL };
	int phase_len = STEPS / (int)(sizeof add_percent / sizeof add_percent[0]);
	int checks = 0;

	m.by_id = calloc(MAX_IDS + 2, sizeof *m.by_id);
	m.live = calloc(MAX_IDS, sizeof *m.live);
	m.live_bits = calloc(MAX_IDS / 64 + 2, sizeof *m.live_bits);
	if (!t || !m.by_id || !m.live || !m.live_bits) {
		ok(0, "random run set up");
		goto out;
	}
	diag("random run: %d steps, seed %llx", STEPS, (unsigned long long)m.rng);
	for (int s = 0; s < STEPS && !m.bad; s++) {
		uint64_t dice = rnd(&m) % 100;

		if (dice < 50 && rnd(&m) % 100 < (uint64_t)add_percent[s / phase_len])
			step_add(&m, t);
		else if (dice < 50)
			step_remove(&m, t);
		else if (dice < 95)
			step_find(&m, t);
		else
			step_next_after(&m, t);
		if (s % CHECK_EVERY == 0 || s == STEPS - 1) {
			check_all(&m, t);
			checks++;
		}
	}
	ok(!m.bad, "%d random steps match the model (%d full checks, %llu ids, at most %llu "
	   "live)", STEPS, checks, (unsigned long long)m.next_id - 1,
	   (unsigned long long)m.max_live);

	/* Everything out, in random order, then in again: every slot reused. */
	while (m.nlive && !m.bad)
		step_remove(&m, t);
	check_all(&m, t);
	ok(!m.bad && region_count(t) == 0 && region_next_after(t, 0) == NULL,
	   "the table empties completely");
	refill(&m, t);
out:
	region_table_free(t);
	free(m.by_id);
	free(m.live);
	free(m.live_bits);
}

int main(void)
{
	test_basics();
	test_limits();
	test_random_run();
	return tap_done();
}
