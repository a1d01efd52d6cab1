/*
 * test_alloc_release.c - the allocator as rmemd links it (no ALLOC_DEBUG, so
 * no table of live ranges): which bad releases its O(1) checks refuse, and a
 * randomized run whose books (used, free ranges, largest free range) must
 * match a one-byte-per-unit model after every call.  test_alloc.c checks the
 * policy and every internal invariant on the ALLOC_DEBUG build.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "tap.h"

static struct alloc_stats stats_of(const struct alloc *a)
{
	struct alloc_stats st;

	alloc_get_stats(a, &st);
	return st;
}

/* Refused, and nothing changed. */
static bool refused(struct alloc *a, uint64_t off, uint64_t len)
{
	struct alloc_stats b = stats_of(a), c;
	int rc = alloc_release(a, off, len);

	c = stats_of(a);
	return rc == -EINVAL && !memcmp(&b, &c, sizeof(b));
}

static void test_refusals(void)
{
	enum { U = 64 };
	struct alloc *a = alloc_new(16 * U, U);
	uint64_t x, y, z, len;

	if (!a || alloc_reserve(a, U, &x, &len) || alloc_reserve(a, 2 * U, &y, &len) ||
	    alloc_reserve(a, U, &z, &len) || alloc_release(a, y, 2 * U)) {
		ok(0, "setup: A@0 (1 unit), free B@1 (2 units), C@3 (1 unit), free tail@4");
		alloc_free(a);
		return;
	}
	ok(refused(a, y, 2 * U) && refused(a, y, U) && refused(a, y + U, U),
	   "the double release of a range that did not merge on both sides is refused");
	ok(refused(a, z, 13 * U) && refused(a, 4 * U, 2 * U),
	   "a range that starts a free range or ends where one ends is refused");
	ok(refused(a, x + 8, U) && refused(a, x, U + 8) && refused(a, x, 0) &&
	   refused(a, 16 * U, U) && refused(a, 15 * U, 2 * U) && refused(a, UINT64_MAX & ~63ull, U),
	   "misaligned, empty and out-of-pool ranges are refused");
	ok(alloc_release(a, x, U) == 0 && alloc_release(a, z, U) == 0 &&
	   stats_of(a).free_ranges == 1 && stats_of(a).largest_free == 16 * U,
	   "the live ranges release and everything merges");
	ok(refused(a, x, U), "nothing live: refused");
	alloc_free(a);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static void test_books(void)
{
	enum { UNITS = 2048, U = 64, OPS = 200000 };
	static uint8_t busy[UNITS];
	static uint64_t off[UNITS], len[UNITS];
	struct alloc *a = alloc_new(UNITS * U, U);
	uint64_t s = 42, used = 0;
	size_t n = 0;
	bool books = true, shape = true;

	if (!a) {
		skip(2, "alloc_new failed");
		return;
	}
	memset(busy, 0, sizeof busy);
	for (int op = 0; op < OPS && books && shape; op++) {
		bool grow = (op / 5000) % 2 == 0;
		struct alloc_stats st;
		uint64_t runs = 0, run = 0, longest = 0;

		if (n == 0 || rnd(&s) % 100 < (grow ? 65u : 35u)) {
			uint64_t o, l, size = 1 + rnd(&s) % (rnd(&s) % 8 ? 4 * U : 80 * U);

			if (alloc_reserve(a, size, &o, &l) == 0) {
				for (uint64_t u = o / U; u < (o + l) / U; u++)
					shape &= u < UNITS && !busy[u];
				if (!shape)
					break;
				memset(busy + o / U, 1, l / U);
				off[n] = o, len[n++] = l;
				used += l;
			}
		} else {
			size_t i = rnd(&s) % n;

			books &= alloc_release(a, off[i], len[i]) == 0;
			memset(busy + off[i] / U, 0, len[i] / U);
			used -= len[i];
			off[i] = off[--n], len[i] = len[n];
		}
		for (size_t u = 0; u < UNITS; u++) {
			run = busy[u] ? 0 : run + 1;
			runs += run == 1;
			longest = run > longest ? run : longest;
		}
		st = stats_of(a);
		books &= st.used == used && st.live == n && st.free_ranges == runs &&
			 st.largest_free == longest * U;
	}
	ok(shape, "random run: every reserve lies in the pool, off every live range");
	ok(books, "random run: used, live, free ranges and the exact largest free range "
	   "match the model after each of %d calls", OPS);
	alloc_free(a);
}

int main(void)
{
	test_refusals();
	test_books();
	return tap_done();
}
