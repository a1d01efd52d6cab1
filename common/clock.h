/*
 * clock.h - the one monotonic clock of rmem (daemon, library and tools).
 *
 * CLOCK_MONOTONIC never jumps with the wall clock, so deadlines, leases and
 * quarantines measured with it survive an NTP step.  The values only mean
 * something relative to each other, within one boot.
 */
#ifndef RMEM_COMMON_CLOCK_H
#define RMEM_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds, microseconds and milliseconds on CLOCK_MONOTONIC. */
int64_t clock_mono_ns(void);
int64_t clock_mono_us(void);
int64_t clock_mono_ms(void);

/* A deadline (clock_mono_ms() time) that never comes. */
#define CLOCK_NO_DEADLINE INT64_MAX

/* poll(2)'s timeout until deadline: -1 for CLOCK_NO_DEADLINE, else the
 * milliseconds left, 0 once it has passed, at most INT32_MAX. */
int clock_ms_until(int64_t deadline);

/* CLOCK_MONOTONIC ms milliseconds from now as a timespec: the absolute time
 * pthread_cond_timedwait(3) waits until on a condition variable set to that
 * clock (pthread_condattr_setclock(3)). */
struct timespec clock_mono_ts_after(int64_t ms);

#endif /* RMEM_COMMON_CLOCK_H */
