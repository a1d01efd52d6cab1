/*
 * stripe.c - a redundant region's arithmetic and its Reed-Solomon code
 * (stripe.h).  Every Galois field operation is ISA-L's: the Cauchy matrix
 * (gf_gen_cauchy1_matrix), its inverse (gf_invert_matrix), the expanded
 * tables (ec_init_tables) and the vector code (ec_encode_data,
 * ec_encode_data_update).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "stripe.h"

/* Decimal digits of at most 2 characters, no sign, no leading zero
 * (so "04" is not 4 and nothing overflows). */
static int parse_num(const char *s, size_t len, unsigned *out)
{
	unsigned v = 0;

	if (len == 0 || len > 2 || (len > 1 && s[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return 0;
}

int stripe_parse(const char *s, unsigned *k, unsigned *r)
{
	const char *plus;
	unsigned kk, rr;

	if (!s || !(plus = strchr(s, '+')))
		return -EINVAL;
	if (parse_num(s, (size_t)(plus - s), &kk) || parse_num(plus + 1, strlen(plus + 1), &rr))
		return -EINVAL;
	if (kk < 1 || kk > STRIPE_K_MAX || rr < 1 || rr > STRIPE_R_MAX)
		return -EINVAL;
	*k = kk;
	*r = rr;
	return 0;
}

int stripe_code_init(struct stripe_code *c, unsigned k, unsigned r)
{
	if (k < 1 || k > STRIPE_K_MAX || r < 1 || r > STRIPE_R_MAX)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	c->k = k;
	c->r = r;
	gf_gen_cauchy1_matrix(c->matrix, (int)(k + r), (int)k);
	ec_init_tables((int)k, (int)r, c->matrix + k * k, c->parity_tbls);
	return 0;
}

uint64_t stripe_piece_len(const struct stripe_code *c, uint64_t length)
{
	uint64_t row = (uint64_t)c->k * STRIPE_CHUNK;

	return (length + row - 1) / row * STRIPE_CHUNK;
}

void stripe_locate(const struct stripe_code *c, uint64_t off, unsigned *piece,
		   uint64_t *piece_off)
{
	uint64_t row = (uint64_t)c->k * STRIPE_CHUNK, stripe = off / row, in = off % row;

	*piece = (unsigned)(in / STRIPE_CHUNK);
	*piece_off = stripe * STRIPE_CHUNK + in % STRIPE_CHUNK;
}

void stripe_encode(const struct stripe_code *c, size_t len, unsigned char *const *data,
		   unsigned char *const *parity)
{
	/* ISA-L takes non-const pointer arrays it does not write through. */
	ec_encode_data((int)len, (int)c->k, (int)c->r, (unsigned char *)c->parity_tbls,
		       (unsigned char **)data, (unsigned char **)parity);
}

void stripe_delta(const struct stripe_code *c, size_t len, unsigned j,
		  const unsigned char *delta, unsigned char *const *parity)
{
	/* A code is linear: parity(new) = parity(old) + M * (new - old), and
	 * in GF(2^8) minus is XOR: the delta's column-j share, added in. */
	ec_encode_data_update((int)len, (int)c->k, (int)c->r, (int)j,
			      (unsigned char *)c->parity_tbls, (unsigned char *)delta,
			      (unsigned char **)parity);
}

int stripe_rebuild(const struct stripe_code *c, size_t len, const unsigned *have,
		   unsigned char *const *in, const unsigned *want, unsigned nwant,
		   unsigned char *const *out)
{
	unsigned char sub[STRIPE_K_MAX * STRIPE_K_MAX], inv[STRIPE_K_MAX * STRIPE_K_MAX];
	unsigned char dec[STRIPE_N_MAX * STRIPE_K_MAX];
	unsigned char tbls[32 * STRIPE_K_MAX * STRIPE_N_MAX];
	unsigned k = c->k, n = c->k + c->r;
	bool seen[STRIPE_N_MAX] = { false };

	if (nwant == 0)
		return 0;
	if (nwant > n)
		return -EINVAL;
	for (unsigned i = 0; i < k; i++) {
		if (have[i] >= n || seen[have[i]])
			return -EINVAL;
		seen[have[i]] = true;
		memcpy(sub + i * k, c->matrix + have[i] * k, k);
	}
	for (unsigned i = 0; i < nwant; i++)
		if (want[i] >= n)
			return -EINVAL;
	/* sub maps the data to the pieces we have; its inverse maps them
	 * back to the data, and any piece's row times it gives that piece
	 * from what we have. */
	if (gf_invert_matrix(sub, inv, (int)k) < 0)
		return -EINVAL; /* cannot happen for a Cauchy code's rows */
	for (unsigned w = 0; w < nwant; w++) {
		const unsigned char *row = c->matrix + want[w] * k;

		for (unsigned col = 0; col < k; col++) {
			unsigned char acc = 0;

			for (unsigned t = 0; t < k; t++)
				acc ^= gf_mul(row[t], inv[t * k + col]);
			dec[w * k + col] = acc;
		}
	}
	ec_init_tables((int)k, (int)nwant, dec, tbls);
	ec_encode_data((int)len, (int)k, (int)nwant, tbls, (unsigned char **)in,
		       (unsigned char **)out);
	return 0;
}
