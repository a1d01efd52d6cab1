/*
 * clock.c - CLOCK_MONOTONIC in the units rmem's modules count in.
 */
#include "clock.h"

#include <stdint.h>
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

int clock_ms_until(int64_t deadline)
{
	int64_t left;

	if (deadline == CLOCK_NO_DEADLINE)
		return -1;
	left = deadline - clock_mono_ms();
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

struct timespec clock_mono_ts_after(int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}
