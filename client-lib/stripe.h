/*
 * stripe.h - the arithmetic of a redundant region (docs/architecture.md,
 * "Redundancy"): "K+R" parsed, a region offset mapped to its stripe, data
 * piece and offset in that piece, and Reed-Solomon parity through ISA-L:
 * whole-stripe encode, a parity delta for a partial write, a rebuild of any
 * pieces from any K others.  Pure: no I/O, no allocation, no locks; a
 * struct stripe_code is read-only once made and may be shared by threads.
 *
 * Pieces are numbered 0..K-1 (data) and K..K+R-1 (parity).  Stripe s holds
 * the region's bytes [s*K*C, (s+1)*K*C) with C = STRIPE_CHUNK; its data
 * chunk j is at offset s*C of piece j, its parity chunk p at s*C of piece
 * K+p.
 */
#ifndef RMEM_STRIPE_H
#define RMEM_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#define STRIPE_CHUNK 4096u
#define STRIPE_K_MAX 16u
#define STRIPE_R_MAX 4u
#define STRIPE_N_MAX (STRIPE_K_MAX + STRIPE_R_MAX)

struct stripe_code {
	unsigned k, r;
	/* (K+R) x K, identity on top, then a Cauchy matrix: every K rows
	 * invertible, so any K pieces decode. */
	unsigned char matrix[STRIPE_N_MAX * STRIPE_K_MAX];
	/* ISA-L's expanded tables for the R parity rows: 32*K*R bytes. */
	unsigned char parity_tbls[32 * STRIPE_K_MAX * STRIPE_R_MAX];
};

/* "K+R", 1 <= K <= STRIPE_K_MAX, 1 <= R <= STRIPE_R_MAX, decimal digits
 * and one '+', nothing else.  0 and *k, *r; -EINVAL. */
int stripe_parse(const char *s, unsigned *k, unsigned *r);

/* 0, or -EINVAL for K, R out of bounds. */
int stripe_code_init(struct stripe_code *c, unsigned k, unsigned r);

/* The bytes of each piece of a region of length bytes:
 * ceil(length / (K*C)) * C. */
uint64_t stripe_piece_len(const struct stripe_code *c, uint64_t length);

/* Region offset off: its data piece, and its offset in that piece. */
void stripe_locate(const struct stripe_code *c, uint64_t off, unsigned *piece,
		   uint64_t *piece_off);

/* The R parity chunks of len bytes from the K data chunks (len: any, the
 * same offset range of every chunk). */
void stripe_encode(const struct stripe_code *c, size_t len, unsigned char *const *data,
		   unsigned char *const *parity);

/* Data piece j changed by delta (old XOR new, len bytes): adds its share
 * into the R parity buffers (the same range of each parity chunk), which
 * then equal a fresh encode of the new data. */
void stripe_delta(const struct stripe_code *c, size_t len, unsigned j,
		  const unsigned char *delta, unsigned char *const *parity);

/*
 * Rebuild: have[0..K-1] are K distinct piece numbers whose len bytes are
 * in[0..K-1]; want[0..nwant-1] are the pieces to compute into out[].
 * 0, or -EINVAL (fewer than K, repeated or out-of-range pieces).
 */
int stripe_rebuild(const struct stripe_code *c, size_t len, const unsigned *have,
		   unsigned char *const *in, const unsigned *want, unsigned nwant,
		   unsigned char *const *out);

#endif /* RMEM_STRIPE_H */
