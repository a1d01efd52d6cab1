/*
 * cluster_json.h - what cluster_rec.c and cluster_name.c both need to read
 * and write their small JSON values (jansson): the server-id rule and the
 * strict field readers.  Internal to libetcd.a; pure.
 */
#ifndef RMEM_CLUSTER_JSON_H
#define RMEM_CLUSTER_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* A server id: [A-Za-z0-9_.-], 1..max-1 characters (max: CLUSTER_ID_MAX;
 * a parameter, so that this file needs no record's header). */
bool cluster_id_ok(const char *s, size_t max);
/* o's field name, a JSON integer >= 0, into *dst: 0 or -EPROTO. */
int cluster_json_get_num(const json_t *o, const char *name, uint64_t *dst);
/* o's field name, a string of fewer than max bytes without a NUL, copied
 * with its NUL into dst: 0 or -EPROTO. */
int cluster_json_get_text(const json_t *o, const char *name, char *dst, size_t max);

/* One field of a record in its JSON object: a JSON integer >= 0 into num,
 * or, with num NULL, a string of fewer than max bytes into text. */
struct cluster_json_field {
	const char *name;
	uint64_t *num;
	char *text;
	size_t max;
	bool optional;		/* may be missing (then left as it is) */
};

/*
 * text[0..len) (NULL: none) as a JSON object with the fields f[0..n) (others
 * are ignored) into rec, which is zeroed first: 0, or -EPROTO with rec zeroed
 * for a text that is not such an object, or whose record ok(rec) refuses.
 */
int cluster_json_decode(const char *text, size_t len, const struct cluster_json_field *f,
			size_t n, void *rec, size_t rec_len, bool (*ok)(const void *rec));
/* Drops o (which may be NULL: a failed json_pack) and puts its compact text
 * in *out: 0, or -ENOMEM with *out NULL. */
int cluster_json_dump(json_t *o, char **out);

#endif /* RMEM_CLUSTER_JSON_H */
