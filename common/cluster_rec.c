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

static bool rec_ok(const struct cluster_rec *r)
{
	return cluster_id_ok(r->id, sizeof r->id) && text_ok(r->tcp, sizeof r->tcp, false) &&
	       text_ok(r->rdma, sizeof r->rdma, true) &&
	       text_ok(r->version, sizeof r->version, true) && r->free_bytes <= r->pool_bytes &&
	       r->largest_free <= r->free_bytes && r->pool_bytes <= INT64_MAX &&
	       r->generation <= INT64_MAX && r->start_time_ms <= INT64_MAX;
}

int cluster_rec_encode(const struct cluster_rec *r, char **out)
{
	json_t *o;

	*out = NULL;
	if (!rec_ok(r))
		return -EINVAL;
	o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s}",
		      "id", r->id, "tcp", r->tcp, "rdma", r->rdma,
		      "pool_bytes", (json_int_t)r->pool_bytes,
		      "free_bytes", (json_int_t)r->free_bytes,
		      "largest_free", (json_int_t)r->largest_free,
		      "generation", (json_int_t)r->generation,
		      "start_time_ms", (json_int_t)r->start_time_ms,
		      "version", r->version);
	return cluster_json_dump(o, out);
}

int cluster_rec_decode(const char *text, size_t len, struct cluster_rec *r)
{
	json_error_t e;
	json_t *o = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	const json_t *ver;
	int rc = json_is_object(o) ? 0 : -EPROTO;

	memset(r, 0, sizeof *r);
	if (rc == 0)
		rc = cluster_json_get_text(o, "id", r->id, sizeof r->id);
	if (rc == 0)
		rc = cluster_json_get_text(o, "tcp", r->tcp, sizeof r->tcp);
	if (rc == 0)
		rc = cluster_json_get_text(o, "rdma", r->rdma, sizeof r->rdma);
	if (rc == 0)
		rc = cluster_json_get_num(o, "pool_bytes", &r->pool_bytes);
	if (rc == 0)
		rc = cluster_json_get_num(o, "free_bytes", &r->free_bytes);
	if (rc == 0)
		rc = cluster_json_get_num(o, "largest_free", &r->largest_free);
	if (rc == 0)
		rc = cluster_json_get_num(o, "generation", &r->generation);
	if (rc == 0)
		rc = cluster_json_get_num(o, "start_time_ms", &r->start_time_ms);
	/* version is informative: an older writer may lack it */
	ver = rc == 0 ? json_object_get(o, "version") : NULL;
	if (ver)
		rc = cluster_json_get_text(o, "version", r->version, sizeof r->version);
	if (rc == 0 && !rec_ok(r))
		rc = -EPROTO;
	if (rc < 0)
		memset(r, 0, sizeof *r);
	json_decref(o);
	return rc;
}
