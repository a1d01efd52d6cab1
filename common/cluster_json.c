/*
 * cluster_json.c - see cluster_json.h.
 */
#include <errno.h>
#include <string.h>

#include "cluster_json.h"

bool cluster_id_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n >= max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
			return false;
	return true;
}

int cluster_json_get_num(const json_t *o, const char *name, uint64_t *dst)
{
	const json_t *v = json_object_get(o, name);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EPROTO;
	*dst = (uint64_t)json_integer_value(v);
	return 0;
}

int cluster_json_get_text(const json_t *o, const char *name, char *dst, size_t max)
{
	const json_t *v = json_object_get(o, name);

	if (!json_is_string(v) || json_string_length(v) >= max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -EPROTO;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int cluster_json_decode(const char *text, size_t len, const struct cluster_json_field *f,
			size_t n, void *rec, size_t rec_len, bool (*ok)(const void *rec))
{
	json_error_t e;
	json_t *o = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	int rc = json_is_object(o) ? 0 : -EPROTO;

	memset(rec, 0, rec_len);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (f[i].optional && !json_object_get(o, f[i].name))
			continue;
		rc = f[i].num ? cluster_json_get_num(o, f[i].name, f[i].num) :
				cluster_json_get_text(o, f[i].name, f[i].text, f[i].max);
	}
	if (rc == 0 && !ok(rec))
		rc = -EPROTO;
	if (rc < 0)
		memset(rec, 0, rec_len);
	json_decref(o);
	return rc;
}

int cluster_json_dump(json_t *o, char **out)
{
	*out = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return *out ? 0 : -ENOMEM;
}
