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

/* Nanoseconds, microseconds and milliseconds on CLOCK_MONOTONIC. */
int64_t clock_mono_ns(void);
int64_t clock_mono_us(void);
int64_t clock_mono_ms(void);

#endif /* RMEM_COMMON_CLOCK_H */
