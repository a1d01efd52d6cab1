/*
 * cluster_rec.c - see cluster_rec.h.  jansson, as etcd_codec.c (why there).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cluster_json.h"
#include "cluster_rec.h"

/* Printable ASCII without '"' or '\\', 0..max-1 characters (empty_ok). */
static bool text_ok(const char *s, size_t max, bool empty_ok)
{
	size_t n = strlen(s);

	if (n >= max || (!n && !empty_ok))
		return false;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || *s == '"' || *s == '\\')
			return false;
	return true;
}

static bool rec_ok(const void *rec)
{
	const struct cluster_rec *r = rec;

	return cluster_id_ok(r->id, sizeof r->id) && text_ok(r->tcp, sizeof r->tcp, false) &&
	       text_ok(r->rdma, sizeof r->rdma, true) &&
	       text_ok(r->version, sizeof r->version, true) && r->free_bytes <= r->pool_bytes &&
	       r->largest_free <= r->free_bytes && r->pool_bytes <= INT64_MAX &&
	       r->generation <= INT64_MAX && r->start_time_ms <= INT64_MAX && r->draining <= 1 &&
	       r->regions <= INT64_MAX;
}

int cluster_rec_encode(const struct cluster_rec *r, char **out)
{
	json_t *o;

	*out = NULL;
	if (!rec_ok(r))
		return -EINVAL;
	o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I}",
		      "id", r->id, "tcp", r->tcp, "rdma", r->rdma,
		      "pool_bytes", (json_int_t)r->pool_bytes,
		      "free_bytes", (json_int_t)r->free_bytes,
		      "largest_free", (json_int_t)r->largest_free,
		      "generation", (json_int_t)r->generation,
		      "start_time_ms", (json_int_t)r->start_time_ms,
		      "version", r->version,
		      "draining", (json_int_t)r->draining,
		      "regions", (json_int_t)r->regions);
	return cluster_json_dump(o, out);
}

int cluster_rec_decode(const char *text, size_t len, struct cluster_rec *r)
{
	const struct cluster_json_field f[] = {
		{ "id", .text = r->id, .max = sizeof r->id },
		{ "tcp", .text = r->tcp, .max = sizeof r->tcp },
		{ "rdma", .text = r->rdma, .max = sizeof r->rdma },
		{ "pool_bytes", .num = &r->pool_bytes },
		{ "free_bytes", .num = &r->free_bytes },
		{ "largest_free", .num = &r->largest_free },
		{ "generation", .num = &r->generation },
		{ "start_time_ms", .num = &r->start_time_ms },
		/* informative: an older writer may lack it */
		{ "version", .text = r->version, .max = sizeof r->version, .optional = true },
		/* the drain's: an rmemd from before it writes neither */
		{ "draining", .num = &r->draining, .optional = true },
		{ "regions", .num = &r->regions, .optional = true },
	};

	return cluster_json_decode(text, len, f, sizeof f / sizeof f[0], r, sizeof *r, rec_ok);
}
