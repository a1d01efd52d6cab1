/*
 * randbytes.c - see randbytes.h.
 */
#include <errno.h>
#include <sys/random.h>
#include <sys/types.h>

#include "randbytes.h"

int rand_bytes(void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = getrandom((char *)buf + got, len - got, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	return 0;
}

uint64_t rand_xorshift(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545f4914f6cdd1dull;
}
