/*
 * benchutil.h - what the in-process benches (bench/alloc.c, bench/region.c)
 * share: a fast reproducible random stream, a clock, and the parsing of their
 * options.
 */
#ifndef RMEM_BENCHUTIL_H
#define RMEM_BENCHUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

#define BENCH_MAX_LIVE 8
#define BENCH_MAX_REPS 15

/* The options every in-process bench takes (set its defaults first). */
struct bench_opts {
	uint64_t live[BENCH_MAX_LIVE];	/* -l LIVE,...: the live-region counts */
	size_t nlive;
	int reps;			/* -r REPS: 1 .. BENCH_MAX_REPS windows */
	bool json;			/* -j, --json: one JSON line a result */
};

/*
 * getopt_long over argv with optstring: -l, -r and -j/--json into b, any
 * other option of optstring to own(ch, optarg, ctx) (0, or -EINVAL for a
 * bad value; own may be NULL).  -h/--help prints usage to stdout and exits
 * 0.  A bad option or value, or an argument left over, prints usage to
 * stderr and is -EINVAL; else 0.
 */
int bench_parse_args(int argc, char **argv, const char *optstring, struct bench_opts *b,
		     int (*own)(int ch, char *arg, void *ctx), void *ctx,
		     void (*usage)(FILE *f));

#endif /* RMEM_BENCHUTIL_H */
