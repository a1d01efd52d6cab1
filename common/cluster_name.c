/*
 * cluster_name.c - see cluster_name.h.  jansson, as cluster_rec.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "cluster_name.h"

static bool server_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CLUSTER_ID_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
			return false;
	return true;
}

static bool name_ok(const struct cluster_name *n)
{
	return server_ok(n->server) && n->region <= INT64_MAX && n->size <= INT64_MAX &&
	       n->generation <= INT64_MAX;
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
	if (o)
		*out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return *out ? 0 : -ENOMEM;
}

static int get_num(const json_t *o, const char *name, uint64_t *dst)
{
	const json_t *v = json_object_get(o, name);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EPROTO;
	*dst = (uint64_t)json_integer_value(v);
	return 0;
}

int cluster_name_decode(const char *text, size_t len, struct cluster_name *n)
{
	json_error_t e;
	json_t *o = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	const json_t *srv = json_object_get(o, "server");
	int rc = json_is_object(o) && json_is_string(srv) &&
			 json_string_length(srv) < sizeof n->server &&
			 strlen(json_string_value(srv)) == json_string_length(srv) ? 0 : -EPROTO;

	memset(n, 0, sizeof *n);
	if (rc == 0)
		memcpy(n->server, json_string_value(srv), json_string_length(srv) + 1);
	if (rc == 0)
		rc = get_num(o, "region", &n->region);
	if (rc == 0)
		rc = get_num(o, "size", &n->size);
	if (rc == 0)
		rc = get_num(o, "generation", &n->generation);
	if (rc == 0 && !name_ok(n))
		rc = -EPROTO;
	if (rc < 0)
		memset(n, 0, sizeof *n);
	json_decref(o);
	return rc;
}
