/*
 * identity.c - see identity.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

#include "config.h"
#include "identity.h"

int identity_draw(const struct config *cfg, uint64_t *generation, char *id, size_t len)
{
	struct timespec now;
	uint64_t r;

	clock_gettime(CLOCK_REALTIME, &now);
	*generation = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
	if (cfg->cluster_id[0]) {
		snprintf(id, len, "%s", cfg->cluster_id);
		return 0;
	}
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		return errno ? -errno : -EIO;
	snprintf(id, len, "%016" PRIx64, r);
	return 0;
}
