/*
 * clock.c - CLOCK_MONOTONIC in the units rmem's modules count in.
 */
#include "clock.h"

#include <time.h>

int64_t clock_mono_ns(void)
{
	struct timespec ts;

	/* Cannot fail with a valid clock id and pointer (clock_gettime(2)). */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t clock_mono_us(void)
{
	return clock_mono_ns() / 1000;
}

int64_t clock_mono_ms(void)
{
	return clock_mono_ns() / 1000000;
}
