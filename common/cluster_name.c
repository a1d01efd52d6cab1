/*
 * cluster_name.c - see cluster_name.h.  jansson, as cluster_rec.c (cluster_json.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cluster_json.h"
#include "cluster_name.h"

static bool name_ok(const struct cluster_name *n)
{
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
	json_error_t e;
	json_t *o = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	int rc = json_is_object(o) ? 0 : -EPROTO;

	memset(n, 0, sizeof *n);
	if (rc == 0)
		rc = cluster_json_get_text(o, "server", n->server, sizeof n->server);
	if (rc == 0)
		rc = cluster_json_get_num(o, "region", &n->region);
	if (rc == 0)
		rc = cluster_json_get_num(o, "size", &n->size);
	if (rc == 0)
		rc = cluster_json_get_num(o, "generation", &n->generation);
	if (rc == 0 && !name_ok(n))
		rc = -EPROTO;
	if (rc < 0)
		memset(n, 0, sizeof *n);
	json_decref(o);
	return rc;
}
