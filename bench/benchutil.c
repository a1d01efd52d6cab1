/*
 * benchutil.c - see benchutil.h.
 */
#include "benchutil.h"

#include <errno.h>
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
