/*
 * util.h - clocks and deterministic test data, for every test program.
 */
#ifndef RMEM_TESTS_UTIL_H
#define RMEM_TESTS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t now_ms(void);
/* Sleeps ms milliseconds, resuming after signals. */
void sleep_ms(int ms);
/* Milliseconds from now until deadline (a now_ms() value); 0 once past it. */
int ms_left(uint64_t deadline);

/* Same bytes for the same seed, every run (splitmix64). */
void fill_random(void *buf, size_t len, uint64_t seed);
/* True when len bytes at buf are all zero. */
bool all_zero(const void *buf, size_t len);
/* Offset of the first byte where a and b differ, or -1 when they are equal. */
long long first_diff(const uint8_t *a, const uint8_t *b, size_t len);

/* Writes text to path (created or truncated), then gives it mode (a tenant's
 * secret file: 0600, or looser to be refused).  0 or -errno. */
int write_file(const char *path, const char *text, mode_t mode);

#endif /* RMEM_TESTS_UTIL_H */
