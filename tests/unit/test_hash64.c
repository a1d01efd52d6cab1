/*
 * test_hash64.c - the intrusive id hash (common/hash64.c) against a model:
 * ids added and taken at random through several doublings, every lookup
 * checked, colliding keys walked with hash64_first/hash64_next, and a drain
 * with hash64_pop that returns every node exactly once.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "hash64.h"
#include "tap.h"

#define N 5000

struct item {
	struct hash64_node link;
	int popped;
};

static struct item items[N];
static bool in[N];

static uint64_t key_of(size_t i)
{
	return (uint64_t)i * 4096 + 1; /* region-id-like: sparse, in sequence */
}

int main(void)
{
	struct hash64 h = { 0 };
	size_t count = 0, wrong = 0, cur = 0, popped = 0, twice = 0;
	struct hash64_node *l;

	ok(hash64_init(&h, 0) == -EINVAL, "0 bits is -EINVAL");
	ok(hash64_init(&h, 2) == 0 && h.bits == 2, "init with 4 buckets");
	srand(7);
	for (int step = 0; step < 200000; step++) {
		size_t i = (size_t)rand() % N;

		if (in[i]) {
			l = hash64_take(&h, key_of(i));
			wrong += l != &items[i].link;
			in[i] = false;
			count--;
		} else {
			items[i].link.key = key_of(i);
			hash64_add(&h, &items[i].link);
			in[i] = true;
			count++;
		}
	}
	ok(h.count == count, "count follows adds and takes (%zu)", count);
	ok(wrong == 0, "every take returned its own node (%zu wrong)", wrong);
	ok(h.bits > 2 && ((uint64_t)1 << h.bits) >= h.count / 2, "the table grew (%u bits)", h.bits);
	for (size_t i = 0; i < N; i++) {
		l = hash64_first(&h, key_of(i));
		wrong += in[i] ? l != &items[i].link : l != NULL;
	}
	ok(wrong == 0, "lookups match the model");
	ok(hash64_take(&h, 3) == NULL && h.count == count, "taking an absent key changes nothing");

	/* Colliding keys (a name hash): all three found, in any order. */
	{
		struct item a = { .link.key = 99 }, b = { .link.key = 99 }, c = { .link.key = 99 };
		int seen = 0, n = 0;

		hash64_add(&h, &a.link);
		hash64_add(&h, &b.link);
		hash64_add(&h, &c.link);
		for (l = hash64_first(&h, 99); l; l = hash64_next(l), n++)
			seen |= l == &a.link ? 1 : l == &b.link ? 2 : l == &c.link ? 4 : 8;
		ok(n == 3 && seen == 7, "three nodes of one key walked (%d, mask %d)", n, seen);
		hash64_del(&h, &b.link);
		n = 0;
		for (l = hash64_first(&h, 99); l; l = hash64_next(l), n++)
			seen = l == &b.link ? -1 : seen;
		ok(n == 2 && seen != -1, "del takes exactly that node");
		hash64_del(&h, &a.link);
		hash64_del(&h, &c.link);
		ok(!hash64_first(&h, 99) && h.count == count, "all gone");
	}

	while ((l = hash64_pop(&h, &cur))) {
		struct item *it = hash64_entry(l, struct item, link);

		twice += it->popped++ > 0;
		wrong += !in[it - items];
		popped++;
	}
	ok(popped == count && twice == 0 && wrong == 0 && h.count == 0,
	   "pop drains each node once (%zu of %zu)", popped, count);
	hash64_fini(&h);
	ok(h.b == NULL, "fini frees the buckets");
	return tap_done();
}
