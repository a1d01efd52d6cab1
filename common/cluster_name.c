/*
 * cluster_name.c - see cluster_name.h.  jansson, as cluster_rec.c (cluster_json.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cluster_json.h"
#include "cluster_name.h"

static bool name_ok(const void *rec)
{
	const struct cluster_name *n = rec;

	return cluster_id_ok(n->server, sizeof n->server) && n->region <= INT64_MAX &&
	       n->size <= INT64_MAX && n->generation <= INT64_MAX;
}

int cluster_name_encode(const struct cluster_name *n, char **out)
{
	json_t *o;

	*out = NULL;
	if (!name_ok(n))
		return -EINVAL;
	o = json_pack("{s:s, s:I, s:I, s:I}", "server", n->server, "region",
		      (json_int_t)n->region, "size", (json_int_t)n->size, "generation",
		      (json_int_t)n->generation);
	return cluster_json_dump(o, out);
}

int cluster_name_decode(const char *text, size_t len, struct cluster_name *n)
{
	const struct cluster_json_field f[] = {
		{ "server", .text = n->server, .max = sizeof n->server },
		{ "region", .num = &n->region },
		{ "size", .num = &n->size },
		{ "generation", .num = &n->generation },
	};

	return cluster_json_decode(text, len, f, sizeof f / sizeof f[0], n, sizeof *n, name_ok);
}
