/*
 * benchutil.h - what the in-process benches (bench/alloc.c, bench/region.c)
 * share: a fast reproducible random stream, a clock, and the parsing of their
 * number options.
 */
#ifndef RMEM_BENCHUTIL_H
#define RMEM_BENCHUTIL_H

#include <stddef.h>
#include <stdint.h>

/* xorshift64*: cheap enough not to weigh on what is timed.  *state != 0. */
uint64_t bench_rnd(uint64_t *state);
/* CLOCK_MONOTONIC in seconds. */
double bench_now(void);
/* A decimal without sign: 0 or -EINVAL. */
int bench_parse_u64(const char *s, uint64_t *v);
/*
 * A comma list of live-region counts (1 .. 2^28) into out[max]; *n is how
 * many.  s is cut up (strsep).  0 or -EINVAL.
 */
int bench_parse_live(char *s, uint64_t *out, size_t max, size_t *n);

#endif /* RMEM_BENCHUTIL_H */
