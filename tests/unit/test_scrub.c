/*
 * test_scrub.c - the scrub (daemon/scrub.c) over a buffer that stands for a
 * pool: every byte of its dirty spans ends zero, whether the worker or a
 * take got there first; no byte outside them is ever written (the kept
 * regions, and what was handed out and written since); a take from the
 * middle of a span splits it; stop while the worker runs is clean.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scrub.h"
#include "tap.h"

#define POOL (8u << 20)
#define PAGE 4096u

static bool all(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static void wait_done(struct scrub *s)
{
	uint64_t total, left;
	int64_t ms;
	struct timespec ts = { 0, 1000000 };

	for (int i = 0; i < 20000 && !scrub_progress(s, &total, &left, &ms); i++)
		nanosleep(&ts, NULL);
}

int main(void)
{
	uint8_t *pool = aligned_alloc(PAGE, POOL);
	/* Kept ranges at [1M, 1M+128) and [5M, 6M): the rest is dirty. */
	const struct scrub_span sp[] = {
		{ 0, 1u << 20 }, { (1u << 20) + 128, (4u << 20) - 128 }, { 0, 0 },
		{ 6u << 20, 2u << 20 },
	};
	uint64_t total, left;
	int64_t ms;
	struct scrub *s;

	if (!pool)
		return 1;
	/* 1. The worker alone: every dirty byte zero, the kept bytes untouched. */
	memset(pool, 0xaa, POOL);
	s = scrub_start(pool, PAGE, sp, 4);
	ok(s != NULL, "scrub_start");
	if (!s)
		return tap_done();
	wait_done(s);
	ok(scrub_progress(s, &total, &left, &ms), "the worker finishes");
	ok(left == 0 && total == (7u << 20) - 128, "it zeroed %llu bytes, %llu left",
	   (unsigned long long)total, (unsigned long long)left);
	ok(all(pool, 1u << 20, 0) && all(pool + (1u << 20) + 128, (4u << 20) - 128, 0) &&
	   all(pool + (6u << 20), 2u << 20, 0), "every dirty byte is zero");
	ok(all(pool + (1u << 20), 128, 0xaa) && all(pool + (5u << 20), 1u << 20, 0xaa),
	   "no kept byte was written");
	scrub_stop(s);

	/* 2. Takes while the worker runs from the low end (the first two are
	 * far from it): a middle (split), a tail, a range across a kept part and
	 * two spans; what was taken and then written by its new owner is never
	 * zeroed again by the worker. */
	memset(pool, 0xaa, POOL);
	s = scrub_start(pool, PAGE, sp, 4);
	if (!s)
		return tap_done();
	scrub_take(s, (6u << 20) + 4096, 8192);        /* middle of the last span */
	scrub_take(s, (8u << 20) - 4096, 4096);        /* its tail */
	scrub_take(s, (1u << 20) - 64, 256);           /* across a kept range */
	ok(all(pool + (6u << 20) + 4096, 8192, 0) && all(pool + (8u << 20) - 4096, 4096, 0) &&
	   all(pool + (1u << 20) - 64, 64, 0) && all(pool + (1u << 20) + 128, 64, 0),
	   "what a take names is zero when it returns");
	ok(all(pool + (1u << 20), 128, 0xaa), "a take does not write the kept bytes it spans");
	/* The new owners write their ranges. */
	memset(pool + (6u << 20) + 4096, 0x11, 8192);
	memset(pool + (8u << 20) - 4096, 0x22, 4096);
	memset(pool + (1u << 20) - 64, 0x33, 64);
	wait_done(s);
	ok(scrub_progress(s, &total, &left, &ms) && left == 0, "the worker finishes after takes");
	ok(all(pool + (6u << 20) + 4096, 8192, 0x11) && all(pool + (8u << 20) - 4096, 4096, 0x22) &&
	   all(pool + (1u << 20) - 64, 64, 0x33),
	   "the worker never zeroes what was taken and written since");
	ok(all(pool + (6u << 20), 4096, 0) && all(pool + (6u << 20) + 12288, (2u << 20) - 16384, 0),
	   "both sides of the split are zero");
	ok(all(pool + (5u << 20), 1u << 20, 0xaa), "the kept range is untouched");
	/* A take of bytes already clean writes nothing. */
	scrub_take(s, 6u << 20, 2u << 20);
	ok(all(pool + (6u << 20) + 4096, 8192, 0x11), "a take of clean bytes writes nothing");
	scrub_stop(s);

	/* 3. Stop while the worker runs, and NULL. */
	s = scrub_start(pool, PAGE, sp, 4);
	scrub_stop(s);
	scrub_stop(NULL);
	scrub_take(NULL, 0, 4096);
	ok(1, "stop while running, and a NULL scrub, are harmless");
	free(pool);
	return tap_done();
}
