/*
 * benchutil.c - see benchutil.h.
 */
#include "benchutil.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_rnd(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545f4914f6cdd1dULL;
}

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end || *s == '-' ? -EINVAL : 0;
}

int bench_parse_live(char *s, uint64_t *out, size_t max, size_t *n)
{
	char *tok;

	*n = 0;
	while ((tok = strsep(&s, ","))) {
		if (*n == max || bench_parse_u64(tok, &out[*n]) || !out[*n] ||
		    out[*n] > (1ull << 28))
			return -EINVAL;
		(*n)++;
	}
	return *n ? 0 : -EINVAL;
}

static int shared_opt(int ch, char *arg, struct bench_opts *b)
{
	uint64_t v;

	switch (ch) {
	case 'l':
		return bench_parse_live(arg, b->live, BENCH_MAX_LIVE, &b->nlive);
	case 'r':
		if (bench_parse_u64(arg, &v) || !v || v > BENCH_MAX_REPS)
			return -EINVAL;
		b->reps = (int)v;
		return 0;
	case 'j':
		b->json = true;
		return 0;
	default:
		return -EINVAL;
	}
}

int bench_parse_args(int argc, char **argv, const char *optstring, struct bench_opts *b,
		     int (*own)(int ch, char *arg, void *ctx), void *ctx,
		     void (*usage)(FILE *f))
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, rc = 0;

	while (rc == 0 && (ch = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		if (ch == 'h') {
			usage(stdout);
			exit(0);
		}
		if (ch == 'l' || ch == 'r' || ch == 'j')
			rc = shared_opt(ch, optarg, b);
		else
			rc = ch != '?' && own ? own(ch, optarg, ctx) : -EINVAL;
	}
	if (rc == 0 && optind != argc)
		rc = -EINVAL;
	if (rc)
		usage(stderr);
	return rc;
}
