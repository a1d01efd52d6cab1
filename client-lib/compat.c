/*
 * compat.c - the calls as older versions of the ABI had them, for programs
 * built against those headers (librmem.map explains the nodes).
 *
 * RMEM_1.2 added reserved fields at the end of struct rmem_region and
 * struct rmem_stats, and the name of a named handle to struct
 * rmem_region_info.  A program built before passes the shorter structs, so
 * its rmem_alloc@RMEM_1.0, rmem_post_alloc@RMEM_1.1, rmem_stats@RMEM_1.0 and
 * rmem_regions@RMEM_1.0 must write only the bytes it has: they fill a whole
 * struct of their own and copy the old part out.  rmem_regions@RMEM_1.0
 * asks for the short records, which hold no name: its pages stay as long
 * as they were.  Calls that only read a struct rmem_region
 * read none of the new fields, so they need no second version.
 *
 * The functions here are exported (the .symver aliases must be), under the
 * reserved prefix __rmem_; the map keeps their own names local in the
 * shared library.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "client.h"

#define COMPAT_EXPORT __attribute__((visibility("default")))

/* The structs as RMEM_1.0 and RMEM_1.1 laid them out. */
#define REGION_1_0_SIZE offsetof(struct rmem_region, reserved)
/* RMEM_1.0's stats ended with key_mode; 1.2.2 filled the first reserved words. */
#define STATS_1_0_SIZE  offsetof(struct rmem_stats, state_slots_used)
#define REGION_INFO_1_0_SIZE offsetof(struct rmem_region_info, name_id)

COMPAT_EXPORT int __rmem_alloc_1_0(rmem_client *c, uint64_t size, uint32_t flags, void *out);
COMPAT_EXPORT int __rmem_post_alloc_1_1(rmem_client *c, uint64_t size, uint32_t flags, void *out,
					uint64_t cookie);
COMPAT_EXPORT int __rmem_stats_1_0(rmem_client *c, void *out);
COMPAT_EXPORT int __rmem_regions_1_0(rmem_client *c, uint64_t after, void *out, size_t max);

__asm__(".symver __rmem_alloc_1_0, rmem_alloc@RMEM_1.0");
__asm__(".symver __rmem_post_alloc_1_1, rmem_post_alloc@RMEM_1.1");
__asm__(".symver __rmem_stats_1_0, rmem_stats@RMEM_1.0");
__asm__(".symver __rmem_regions_1_0, rmem_regions@RMEM_1.0");

int __rmem_alloc_1_0(rmem_client *c, uint64_t size, uint32_t flags, void *out)
{
	struct rmem_region r;
	int err;

	if (!out)
		return -EINVAL;
	/* A cluster's region names its server in reserved[], which these
	 * callers' struct lacks. */
	if (c && c->router)
		return -EOPNOTSUPP;
	err = rmem_alloc(c, size, flags, &r);
	if (!err)
		memcpy(out, &r, REGION_1_0_SIZE);
	return err;
}

/* The region is written when the completion arrives: the engine is told
 * how many bytes of it the caller has. */
int __rmem_post_alloc_1_1(rmem_client *c, uint64_t size, uint32_t flags, void *out,
			  uint64_t cookie)
{
	if (c && c->router)
		return -EOPNOTSUPP;
	return client_post_alloc(c, size, flags, out, REGION_1_0_SIZE, cookie);
}

int __rmem_stats_1_0(rmem_client *c, void *out)
{
	struct rmem_stats st;
	int err;

	if (!out)
		return -EINVAL;
	err = rmem_stats(c, &st);
	if (!err)
		memcpy(out, &st, STATS_1_0_SIZE);
	return err;
}

int __rmem_regions_1_0(rmem_client *c, uint64_t after, void *out, size_t max)
{
	if (c && c->router)
		return -EOPNOTSUPP;
	return client_regions(c, after, out, REGION_INFO_1_0_SIZE, max, false);
}
