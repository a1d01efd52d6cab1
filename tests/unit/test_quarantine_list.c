/*
 * test_quarantine_list.c - the quarantine module (daemon/quarantine.c) on
 * its own: ranges come back in the order they went in, none before its
 * time, each exactly once, to the callback with what was handed in; its
 * per-pool and per-tenant sums; the timer that gives them back on the loop;
 * quarantine_free that gives back what is left.  No server, no pool: the
 * callback records what it is handed.
 */
#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "quarantine.h"
#include "tap.h"

#define MS 1000000ull

/* What the callback was handed, in order. */
struct returned {
	uint32_t pool;
	uint64_t offset, length;
	const struct config_tenant *tenant;
};

static struct returned got[16];
static unsigned ngot;

static void record(void *arg, uint32_t pool, uint64_t offset, uint64_t length,
		   const struct config_tenant *tenant)
{
	unsigned *calls = arg;

	(*calls)++;
	if (ngot < sizeof got / sizeof got[0])
		got[ngot++] = (struct returned){ pool, offset, length, tenant };
}

static void test_order_and_sums(struct event_base *base)
{
	struct config_tenant ta = { .name = "a" }, tb = { .name = "b" };
	uint64_t held[3] = { 0 }, due = 0;
	unsigned calls = 0;
	bool has;
	struct quarantine *q = quarantine_new(base, 100 * MS, record, &calls);

	ngot = 0;
	ok(q != NULL, "quarantine_new");
	if (!q)
		return;
	ok(!quarantine_next_due(q, &due), "empty: nothing is due");
	ok(quarantine_add(q, 0, 0, 4096, &ta, 1000 * MS) == 0 &&
	   quarantine_add(q, 1, 8192, 8192, NULL, 1010 * MS) == 0 &&
	   quarantine_add(q, 0, 65536, 512, &tb, 1020 * MS) == 0 &&
	   quarantine_add(q, 0, 131072, 1024, &ta, 1030 * MS) == 0, "four ranges in");
	ok(calls == 0, "quarantine_add never gives back");
	has = quarantine_next_due(q, &due);
	ok(has && due == 1100 * MS, "the oldest is due after the wait (%llu ms)",
	   (unsigned long long)(due / MS));
	quarantine_held_by_pool(q, held, 2);
	ok(held[0] == 4096 + 512 + 1024 && held[1] == 8192 && held[2] == 0,
	   "held by pool: %llu, %llu", (unsigned long long)held[0], (unsigned long long)held[1]);
	ok(quarantine_held_by_tenant(q, &ta) == 4096 + 1024 &&
	   quarantine_held_by_tenant(q, &tb) == 512 && quarantine_held_by_tenant(q, NULL) == 8192,
	   "held by tenant, the anonymous apart");

	ok(quarantine_reap(q, 1099 * MS) == 0 && calls == 0, "nothing before its time");
	ok(quarantine_reap(q, 1110 * MS) == 2 && calls == 2, "exactly the two due by then");
	ok(ngot == 2 && got[0].pool == 0 && got[0].offset == 0 && got[0].length == 4096 &&
	   got[0].tenant == &ta && got[1].pool == 1 && got[1].offset == 8192 &&
	   got[1].length == 8192 && got[1].tenant == NULL,
	   "in the order they went in, with what was handed in");
	ok(quarantine_next_due(q, &due) && due == 1120 * MS, "the next is the third");
	ok(quarantine_held_by_tenant(q, &ta) == 1024, "a returned range no longer counts");

	/* A range added after some came back still goes last. */
	ok(quarantine_add(q, 2, 0, 64, &tb, 1040 * MS) == 0, "a fifth range in");
	quarantine_free(q);
	ok(calls == 5 && ngot == 5 && got[2].offset == 65536 && got[3].offset == 131072 &&
	   got[4].pool == 2, "quarantine_free gives back the rest, in order, once each");
	quarantine_free(NULL);
	ok(1, "quarantine_free(NULL) is harmless");
}

/* The timer: ranges come back from the loop without anyone reaping. */
static void test_timer(struct event_base *base)
{
	unsigned calls = 0;
	struct quarantine *q = quarantine_new(base, 20 * MS, record, &calls);
	uint64_t now, due;
	int turns = 0;

	ngot = 0;
	ok(q != NULL, "quarantine_new for the timer");
	if (!q)
		return;
	now = (uint64_t)clock_mono_ns();
	ok(quarantine_add(q, 0, 0, 4096, NULL, now) == 0 &&
	   quarantine_add(q, 0, 4096, 4096, NULL, now) == 0, "two ranges in");
	/* Each turn of the loop waits for the timer; bounded in case it never fires. */
	while (calls < 2 && turns++ < 100)
		event_base_loop(base, EVLOOP_ONCE);
	ok(calls == 2 && ngot == 2 && got[0].offset == 0 && got[1].offset == 4096,
	   "the timer gave both back (%u)", calls);
	ok((uint64_t)clock_mono_ns() - now >= 20 * MS, "not before the wait was over");
	ok(!quarantine_next_due(q, &due), "and the quarantine is empty");
	quarantine_free(q);
	ok(calls == 2, "nothing given back twice");
}

int main(void)
{
	struct event_base *base = event_base_new();

	if (!ok(base != NULL, "event_base_new"))
		return tap_done();
	test_order_and_sums(base);
	test_timer(base);
	event_base_free(base);
	return tap_done();
}
