/*
 * util.c - see util.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "util.h"

uint64_t now_ms(void)
{
	return (uint64_t)clock_mono_ms();
}

void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int ms_left(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

void fill_random(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = seed;

	while (len) {
		/* splitmix64: cheap, and every seed gives a distinct stream */
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);
		size_t n = len < 8 ? len : 8;

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(p, &z, n);
		p += n;
		len -= n;
	}
}

bool all_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

long long first_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
	if (memcmp(a, b, len) == 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long long)i;
	return -1;
}

int write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fputs(text, f);
	if (fclose(f) != 0 || chmod(path, mode) < 0)
		return -errno;
	return 0;
}
