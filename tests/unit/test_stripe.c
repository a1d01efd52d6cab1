/*
 * test_stripe.c - a redundant region's arithmetic (client-lib/stripe.c):
 * "K+R" parsing with every malformed form refused; offsets mapped to
 * pieces; for several K+R, random stripes encoded and every erasure pattern
 * of up to R pieces rebuilt from K survivors (chosen at random among the
 * living) byte for byte; partial writes' parity deltas equal to a fresh
 * encode of the new data; lengths below ISA-L's vector width too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stripe.h"
#include "tap.h"

#define LEN STRIPE_CHUNK

static unsigned char bufs[STRIPE_N_MAX][LEN], want_bufs[STRIPE_N_MAX][LEN];

static void fill(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)rand();
}

static void parse_cases(void)
{
	static const char *bad[] = { "0+1", "3+", "+2", "40+40", "4+0", "17+1", "4+5", "4+2x",
				     " 4+2", "4+ 2", "4-2", "4", "", "04+2", "4+02", "-1+2",
				     "4++2", "100+1", "4+2+1" };
	unsigned k = 99, r = 99;
	bool all = true;

	ok(stripe_parse("4+2", &k, &r) == 0 && k == 4 && r == 2, "4+2 parses");
	ok(stripe_parse("1+1", &k, &r) == 0 && k == 1 && r == 1, "1+1 (a mirror) parses");
	ok(stripe_parse("16+4", &k, &r) == 0 && k == 16 && r == 4, "16+4, the bounds, parse");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		k = r = 99;
		if (stripe_parse(bad[i], &k, &r) != -EINVAL || k != 99 || r != 99) {
			diag("accepted \"%s\"", bad[i]);
			all = false;
		}
	}
	ok(all, "%zu malformed values are -EINVAL and leave k, r alone", sizeof bad / sizeof bad[0]);
	ok(stripe_parse(NULL, &k, &r) == -EINVAL, "NULL is -EINVAL");
	{
		struct stripe_code c;

		ok(stripe_code_init(&c, 0, 1) == -EINVAL && stripe_code_init(&c, 4, 0) == -EINVAL &&
			   stripe_code_init(&c, 17, 1) == -EINVAL && stripe_code_init(&c, 4, 5) == -EINVAL,
		   "stripe_code_init refuses K, R out of bounds");
	}
}

static void math_cases(void)
{
	struct stripe_code c;
	unsigned piece;
	uint64_t po;

	stripe_code_init(&c, 4, 2);
	ok(stripe_piece_len(&c, 1) == 4096 && stripe_piece_len(&c, 16384) == 4096 &&
		   stripe_piece_len(&c, 16385) == 8192 && stripe_piece_len(&c, 1 << 20) == 262144,
	   "4+2 piece lengths: 1 B, 16 KiB -> 4 KiB; 16 KiB + 1 -> 8 KiB; 1 MiB -> 256 KiB");
	stripe_locate(&c, 0, &piece, &po);
	ok(piece == 0 && po == 0, "offset 0: piece 0 at 0");
	stripe_locate(&c, 4096 * 3 + 5, &piece, &po);
	ok(piece == 3 && po == 5, "offset 3 chunks + 5: piece 3 at 5");
	stripe_locate(&c, 16384 * 7 + 4096 + 100, &piece, &po);
	ok(piece == 1 && po == 7 * 4096 + 100, "stripe 7, chunk 1, +100: piece 1 at 7 chunks + 100");
}

/* Every subset of pieces of size <= r, as bitmasks, walked by increasing
 * mask; rebuilt from K random survivors. */
static void erasure_cases(unsigned k, unsigned r, size_t len)
{
	struct stripe_code c;
	unsigned n = k + r, patterns = 0, wrong = 0;
	unsigned char *d[STRIPE_N_MAX];

	stripe_code_init(&c, k, r);
	for (unsigned i = 0; i < n; i++)
		d[i] = bufs[i];
	for (unsigned i = 0; i < k; i++)
		fill(bufs[i], len);
	stripe_encode(&c, len, d, d + k);
	for (uint32_t mask = 1; mask < (1u << n); mask++) {
		unsigned have[STRIPE_N_MAX], want[STRIPE_N_MAX], nh = 0, nw = 0;
		unsigned char *in[STRIPE_N_MAX], *out[STRIPE_N_MAX];

		if ((unsigned)__builtin_popcount(mask) > r)
			continue;
		for (unsigned i = 0; i < n; i++) {
			if (mask & (1u << i))
				want[nw++] = i;
			else
				have[nh++] = i;
		}
		/* K of the survivors, at random. */
		for (unsigned i = 0; i + 1 < nh; i++) {
			unsigned j = i + (unsigned)rand() % (nh - i), t = have[i];

			have[i] = have[j];
			have[j] = t;
		}
		for (unsigned i = 0; i < k; i++)
			in[i] = bufs[have[i]];
		for (unsigned i = 0; i < nw; i++) {
			out[i] = want_bufs[i];
			memset(out[i], 0xa5, len);
		}
		if (stripe_rebuild(&c, len, have, in, want, nw, out) != 0)
			wrong++;
		for (unsigned i = 0; i < nw; i++)
			if (memcmp(out[i], bufs[want[i]], len))
				wrong++;
		patterns++;
	}
	ok(wrong == 0, "%u+%u, %zu B: %u erasure patterns of up to %u pieces rebuilt exactly", k, r,
	   len, patterns, r);
}

/* Random partial writes into random data chunks, parity kept by deltas,
 * compared with a fresh encode after each. */
static void delta_cases(unsigned k, unsigned r)
{
	static unsigned char fresh[STRIPE_R_MAX][LEN], delta[LEN];
	struct stripe_code c;
	unsigned char *d[STRIPE_N_MAX], *p2[STRIPE_R_MAX];
	unsigned wrong = 0, rounds = 200;

	stripe_code_init(&c, k, r);
	for (unsigned i = 0; i < k + r; i++)
		d[i] = bufs[i];
	for (unsigned i = 0; i < r; i++)
		p2[i] = fresh[i];
	for (unsigned i = 0; i < k; i++)
		fill(bufs[i], LEN);
	stripe_encode(&c, LEN, d, d + k);
	for (unsigned round = 0; round < rounds; round++) {
		unsigned j = (unsigned)rand() % k;
		size_t off = (size_t)rand() % LEN, len = 1 + (size_t)rand() % (LEN - off);
		unsigned char *par[STRIPE_R_MAX];

		if (round % 4 == 0) /* small ones: below the vector width */
			len = 1 + (size_t)rand() % (LEN - off < 31 ? LEN - off : 31);
		fill(delta, len);
		for (size_t b = 0; b < len; b++)
			bufs[j][off + b] ^= delta[b];
		for (unsigned i = 0; i < r; i++)
			par[i] = bufs[k + i] + off;
		stripe_delta(&c, len, j, delta, par);
		stripe_encode(&c, LEN, d, p2);
		for (unsigned i = 0; i < r; i++)
			if (memcmp(fresh[i], bufs[k + i], LEN))
				wrong++;
	}
	ok(wrong == 0, "%u+%u: %u partial writes' parity deltas equal a fresh encode", k, r, rounds);
}

int main(void)
{
	static const unsigned kr[][2] = { { 1, 1 }, { 2, 1 }, { 4, 2 }, { 3, 3 }, { 8, 2 },
					  { 6, 4 }, { 16, 4 } };

	srand(21);
	parse_cases();
	math_cases();
	for (size_t i = 0; i < sizeof kr / sizeof kr[0]; i++) {
		erasure_cases(kr[i][0], kr[i][1], LEN);
		delta_cases(kr[i][0], kr[i][1]);
	}
	erasure_cases(4, 2, 1);
	erasure_cases(4, 2, 31);
	erasure_cases(5, 3, 1000);
	return tap_done();
}
