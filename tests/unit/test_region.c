/*
 * test_region.c - the region table: ids, keys, lookups, owner lists, order.
 */
#include <stdint.h>
#include <stdlib.h>

#include "region.h"
#include "tap.h"

#define N 5000

static int owner_list_count(const struct region_list *l)
{
	int n = 0;

	for (const struct region *r = l->first; r; r = r->owner_next)
		n++;
	return n;
}

static int table_in_id_order(const struct region_table *t, uint64_t *count)
{
	uint64_t last = 0, n = 0;

	for (const struct region *r = region_next_after(t, 0); r; r = r->next, n++) {
		if (r->id <= last)
			return 0;
		last = r->id;
	}
	*count = n;
	return 1;
}

int main(void)
{
	struct region_table *t = region_table_new();
	struct region_list a = { NULL, NULL }, b = { NULL, NULL };
	static struct region *rs[N];
	uint64_t count = 0, max_id = 0;
	int distinct_keys = 0, found = 1, gone = 1;

	ok(t != NULL, "table created");
	for (int i = 0; i < N; i++) {
		rs[i] = region_add(t, i % 2 ? &b : &a, i % 2 ? 2 : 1, 0, (uint64_t)i * 64, 64);
		if (!rs[i])
			return tap_done() | 1;
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
	ok(owner_list_count(&a) == N / 2 && owner_list_count(&b) == N / 2,
	   "owner lists hold their regions");

	/* Remove every third region, from both owners. */
	for (int i = 0; i < N; i += 3) {
		uint64_t id = rs[i]->id;

		region_remove(t, i % 2 ? &b : &a, rs[i]);
		gone &= region_find(t, id) == NULL;
		rs[i] = NULL;
	}
	ok(gone, "removed regions are not found");
	found = table_in_id_order(t, &count);
	ok(found && count == region_count(t), "table walks in id order over the %llu left",
	   (unsigned long long)count);
	ok(region_next_after(t, 1) == rs[1], "next after a removed id is the next live one");
	ok(region_next_after(t, max_id) == NULL, "nothing after the last id");

	/* A new region never reuses an id. */
	{
		struct region *r = region_add(t, &a, 1, 0, 0, 64);

		ok(r && r->id == max_id + 1, "a new region gets a new id (%llu)",
		   r ? (unsigned long long)r->id : 0ull);
	}
	while (b.first)
		region_remove(t, &b, b.first);
	ok(owner_list_count(&b) == 0 && b.last == NULL, "an owner's list empties completely");
	ok(region_count(t) == (uint64_t)owner_list_count(&a), "only owner a's regions remain");
	region_table_free(t);
	region_table_free(NULL);
	return tap_done();
}
