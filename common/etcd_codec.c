/*
 * etcd_codec.c - see etcd_codec.h.
 *
 * JSON through jansson (libjansson-dev), chosen over json-c because its
 * parser is strict RFC 8259 by default (json-c accepts comments, trailing
 * garbage and more unless told otherwise), it rejects duplicate keys on
 * request (JSON_REJECT_DUPLICATES: one reply cannot say two things), it
 * parses from a buffer with a length (json_loadb, no NUL needed) and dumps
 * compactly, and it keeps 64-bit integers exact.  Base64 is libsodium's
 * (already a dependency), in its original, padded variant, which is what
 * the gateway writes.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "etcd_codec.h"

/* ---- building requests ------------------------------------------------------- */

static json_t *b64_string(const void *bytes, size_t len)
{
	size_t n = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	char *buf = malloc(n);
	json_t *s;

	if (!buf)
		return NULL;
	sodium_bin2base64(buf, n, len ? bytes : (const void *)"", len,
			  sodium_base64_VARIANT_ORIGINAL);
	s = json_string(buf);
	free(buf);
	return s;
}

static json_t *i64_string(int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof buf, "%lld", (long long)v);
	return json_string(buf);
}

/* obj[name] = v, taking v; false (and v freed) when either is missing. */
static bool set(json_t *obj, const char *name, json_t *v)
{
	if (!obj || !v) {
		json_decref(v);
		return false;
	}
	return json_object_set_new(obj, name, v) == 0;
}

/* Takes obj: its compact text in *out. */
static int finish(json_t *obj, bool ok, char **out)
{
	*out = NULL;
	if (ok && obj)
		*out = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	return *out ? 0 : -ENOMEM;
}

static bool key_ok(const void *key, size_t key_len)
{
	return key && key_len > 0 && key_len <= ETCD_MAX_BYTES;
}

/* The end of the range of keys that start with key: key with its last byte
 * below 0xff incremented and what follows dropped; "\0" (every key from
 * key on) when there is no such byte. */
static json_t *prefix_end(const uint8_t *key, size_t key_len)
{
	uint8_t *end = malloc(key_len);
	json_t *s;
	size_t n = key_len;

	if (!end)
		return NULL;
	memcpy(end, key, key_len);
	while (n > 0 && end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		end[0] = 0;
		n = 1;
	} else {
		end[n - 1]++;
	}
	s = b64_string(end, n);
	free(end);
	return s;
}

/* {"key": ..., ["range_end": ...]} */
static json_t *key_selection(const void *key, size_t key_len, bool prefix)
{
	json_t *o = json_object();
	bool ok = set(o, "key", b64_string(key, key_len));

	if (ok && prefix)
		ok = set(o, "range_end", prefix_end(key, key_len));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int etcd_enc_lease_grant(int64_t ttl_s, char **out)
{
	json_t *o;

	*out = NULL;
	if (ttl_s <= 0)
		return -EINVAL;
	o = json_object();
	return finish(o, set(o, "TTL", i64_string(ttl_s)) && set(o, "ID", i64_string(0)), out);
}

int etcd_enc_lease_id(int64_t id, char **out)
{
	json_t *o;

	*out = NULL;
	if (id <= 0)
		return -EINVAL;
	o = json_object();
	return finish(o, set(o, "ID", i64_string(id)), out);
}

static json_t *put_request(const void *key, size_t key_len, const void *value, size_t value_len,
			   int64_t lease)
{
	json_t *o = json_object();
	bool ok = set(o, "key", b64_string(key, key_len)) &&
		  set(o, "value", b64_string(value, value_len));

	if (ok && lease)
		ok = set(o, "lease", i64_string(lease));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static bool value_ok(const void *value, size_t value_len, int64_t lease)
{
	return (value || !value_len) && value_len <= ETCD_MAX_BYTES && lease >= 0;
}

int etcd_enc_put(const void *key, size_t key_len, const void *value, size_t value_len,
		 int64_t lease, char **out)
{
	*out = NULL;
	if (!key_ok(key, key_len) || !value_ok(value, value_len, lease))
		return -EINVAL;
	return finish(put_request(key, key_len, value, value_len, lease), true, out);
}

int etcd_enc_range(const void *key, size_t key_len, bool prefix, char **out)
{
	*out = NULL;
	if (!key_ok(key, key_len))
		return -EINVAL;
	return finish(key_selection(key, key_len, prefix), true, out);
}

int etcd_enc_delete(const void *key, size_t key_len, bool prefix, char **out)
{
	return etcd_enc_range(key, key_len, prefix, out);
}

/* One compare of a txn: key's target revision (CREATE or MOD) == rev. */
static json_t *compare_rev(const void *key, size_t key_len, const char *target, int64_t rev)
{
	json_t *cmp = json_object();

	if (set(cmp, "key", b64_string(key, key_len)) && set(cmp, "result", json_string("EQUAL")) &&
	    set(cmp, "target", json_string(target)) &&
	    set(cmp, !strcmp(target, "MOD") ? "mod_revision" : "create_revision", i64_string(rev)))
		return cmp;
	json_decref(cmp);
	return NULL;
}

/* A txn: if key's target revision (CREATE or MOD) equals rev (and, with a
 * guard, guard's create_revision equals guard_rev), put key = value under
 * lease; otherwise read the key. */
static int enc_put_or_read(const void *key, size_t key_len, const void *value, size_t value_len,
			   int64_t lease, const char *target, int64_t rev, const void *guard,
			   size_t guard_len, int64_t guard_rev, char **out)
{
	json_t *o, *cmp, *gcmp = NULL, *put, *get;
	bool ok;

	*out = NULL;
	if (!key_ok(key, key_len) || !value_ok(value, value_len, lease) || rev < 0 ||
	    (guard && (!key_ok(guard, guard_len) || guard_rev <= 0)))
		return -EINVAL;
	o = json_object();
	cmp = compare_rev(key, key_len, target, rev);
	if (guard)
		gcmp = compare_rev(guard, guard_len, "CREATE", guard_rev);
	put = json_object();
	get = json_object();
	ok = cmp && (!guard || gcmp) &&
	     set(put, "request_put", put_request(key, key_len, value, value_len, lease)) &&
	     set(get, "request_range", key_selection(key, key_len, false));
	/* json_pack would be shorter, but its failures cannot be told apart. */
	ok = ok && set(o, "compare", gcmp ? json_pack("[O,O]", cmp, gcmp) : json_pack("[O]", cmp)) &&
	     set(o, "success", json_pack("[O]", put)) && set(o, "failure", json_pack("[O]", get));
	json_decref(cmp);
	json_decref(gcmp);
	json_decref(put);
	json_decref(get);
	return finish(o, ok, out);
}

int etcd_enc_create(const void *key, size_t key_len, const void *value, size_t value_len,
		    int64_t lease, char **out)
{
	return enc_put_or_read(key, key_len, value, value_len, lease, "CREATE", 0, NULL, 0, 0, out);
}

int etcd_enc_put_if(const void *key, size_t key_len, const void *value, size_t value_len,
		    int64_t lease, int64_t mod_revision, char **out)
{
	*out = NULL;
	if (mod_revision <= 0)
		return -EINVAL;
	return enc_put_or_read(key, key_len, value, value_len, lease, "MOD", mod_revision, NULL, 0,
			       0, out);
}

int etcd_enc_put_if_guarded(const void *key, size_t key_len, const void *value,
			    size_t value_len, int64_t lease, int64_t mod_revision,
			    const void *guard, size_t guard_len, int64_t guard_rev, char **out)
{
	*out = NULL;
	if (mod_revision <= 0 || !guard)
		return -EINVAL;
	return enc_put_or_read(key, key_len, value, value_len, lease, "MOD", mod_revision, guard,
			       guard_len, guard_rev, out);
}

int etcd_enc_watch_create(const void *key, size_t key_len, bool prefix, int64_t start_revision,
			  char **out)
{
	json_t *o, *req;
	bool ok;

	*out = NULL;
	if (!key_ok(key, key_len) || start_revision < 0)
		return -EINVAL;
	o = json_object();
	req = key_selection(key, key_len, prefix);
	ok = req != NULL;
	if (ok && start_revision)
		ok = set(req, "start_revision", i64_string(start_revision));
	if (!ok) {
		json_decref(req);
		req = NULL;
	}
	return finish(o, ok && set(o, "create_request", req), out);
}

/* ---- reading replies ---------------------------------------------------------- */

static json_t *parse(const char *text, size_t len)
{
	json_error_t e;
	json_t *root;

	if (!text)
		return NULL;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
	if (root && !json_is_object(root)) {
		json_decref(root);
		return NULL;
	}
	return root;
}

/* Digits only, optionally one leading '-' when negative is allowed; into
 * *neg and *mag.  -EPROTO for anything else or past 64 bits. */
static int parse_digits(const char *s, bool negative_ok, bool *neg, uint64_t *mag)
{
	uint64_t v = 0;

	*neg = false;
	if (*s == '-' && negative_ok) {
		*neg = true;
		s++;
	}
	if (!*s || strlen(s) > 20)
		return -EPROTO;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return -EPROTO;
		d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EPROTO;
		v = v * 10 + d;
	}
	*mag = v;
	return 0;
}

/* obj[name] as an int64 in [min, INT64_MAX]: a string of digits or a JSON
 * integer; absent is 0 (proto3 leaves defaults out) when 0 >= min. */
static int get_i64(const json_t *obj, const char *name, int64_t min, int64_t *out)
{
	const json_t *v = json_object_get(obj, name);
	int64_t r;

	*out = 0;
	if (!v)
		return min <= 0 ? 0 : -EPROTO;
	if (json_is_integer(v)) {
		r = (int64_t)json_integer_value(v);
	} else if (json_is_string(v)) {
		bool neg;
		uint64_t mag;

		if (strlen(json_string_value(v)) != json_string_length(v) ||
		    parse_digits(json_string_value(v), true, &neg, &mag) < 0)
			return -EPROTO;
		if (!neg && mag > (uint64_t)INT64_MAX)
			return -EPROTO;
		if (neg && mag > (uint64_t)INT64_MAX + 1)
			return -EPROTO;
		r = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	} else {
		return -EPROTO;
	}
	if (r < min)
		return -EPROTO;
	*out = r;
	return 0;
}

/* obj[name] as a uint64: a string of digits or a non-negative integer. */
static int get_u64(const json_t *obj, const char *name, uint64_t *out)
{
	const json_t *v = json_object_get(obj, name);
	bool neg;

	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return -EPROTO;
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return -EPROTO;
	return parse_digits(json_string_value(v), false, &neg, out);
}

/* obj[name], a boolean; absent is false. */
static int get_bool(const json_t *obj, const char *name, bool *out)
{
	const json_t *v = json_object_get(obj, name);

	*out = json_is_true(v);
	return !v || json_is_boolean(v) ? 0 : -EPROTO;
}

/* obj[name], an object; absent gives NULL and 0 unless required. */
static int get_object(const json_t *obj, const char *name, bool required, const json_t **out)
{
	const json_t *v = json_object_get(obj, name);

	*out = json_is_object(v) ? v : NULL;
	if (!v)
		return required ? -EPROTO : 0;
	return *out ? 0 : -EPROTO;
}

/* obj[name], an array; absent is an empty one (NULL, 0 elements). */
static int get_array(const json_t *obj, const char *name, const json_t **out, size_t *n)
{
	const json_t *v = json_object_get(obj, name);

	*out = json_is_array(v) ? v : NULL;
	*n = json_array_size(*out);	/* 0 for NULL */
	return !v || *out ? 0 : -EPROTO;
}

/* obj[name], base64 bytes, into a malloc'd copy with a NUL after it; absent
 * is empty (allowed only where empty_ok). */
static int get_bytes(const json_t *obj, const char *name, bool empty_ok, uint8_t **out,
		     size_t *out_len)
{
	const json_t *v = json_object_get(obj, name);
	const char *s, *end = NULL;
	size_t slen, max, n = 0;
	uint8_t *buf;

	*out = NULL;
	*out_len = 0;
	if (v && !json_is_string(v))
		return -EPROTO;
	s = v ? json_string_value(v) : "";
	slen = v ? json_string_length(v) : 0;
	if (slen == 0 && !empty_ok)
		return -EPROTO;
	max = slen / 4 * 3;
	if (max > ETCD_MAX_BYTES || (slen && strlen(s) != slen))
		return -EPROTO;
	buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	if (slen && (sodium_base642bin(buf, max, s, slen, NULL, &n, &end,
				       sodium_base64_VARIANT_ORIGINAL) != 0 ||
		     end != s + slen)) {
		free(buf);
		return -EPROTO;
	}
	buf[n] = 0;
	*out = buf;
	*out_len = n;
	return 0;
}

static int dec_header(const json_t *root, struct etcd_header *h)
{
	const json_t *o;
	int rc;

	memset(h, 0, sizeof *h);
	rc = get_object(root, "header", true, &o);
	if (rc == 0)
		rc = get_i64(o, "revision", 0, &h->revision);
	if (rc == 0)
		rc = get_u64(o, "cluster_id", &h->cluster_id);
	if (rc == 0)
		rc = get_u64(o, "member_id", &h->member_id);
	if (rc == 0)
		rc = get_u64(o, "raft_term", &h->raft_term);
	return rc;
}

void etcd_kv_free(struct etcd_kv *kv)
{
	if (!kv)
		return;
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof *kv);
}

/* One mvccpb.KeyValue.  A key is never empty; a value may be. */
static int dec_kv(const json_t *o, struct etcd_kv *kv)
{
	int rc;

	memset(kv, 0, sizeof *kv);
	if (!json_is_object(o))
		return -EPROTO;
	rc = get_bytes(o, "key", false, &kv->key, &kv->key_len);
	if (rc == 0)
		rc = get_bytes(o, "value", true, &kv->value, &kv->value_len);
	if (rc == 0)
		rc = get_i64(o, "create_revision", 0, &kv->create_revision);
	if (rc == 0)
		rc = get_i64(o, "mod_revision", 0, &kv->mod_revision);
	if (rc == 0)
		rc = get_i64(o, "version", 0, &kv->version);
	if (rc == 0)
		rc = get_i64(o, "lease", 0, &kv->lease);
	if (rc < 0)
		etcd_kv_free(kv);
	return rc;
}

/* Unwraps a stream message {"result": {...}}. */
static int stream_result(const json_t *root, const json_t **result)
{
	return get_object(root, "result", true, result);
}

int etcd_dec_lease_grant(const char *text, size_t len, struct etcd_header *h, int64_t *id,
			 int64_t *ttl_s)
{
	json_t *root = parse(text, len);
	int rc = root ? dec_header(root, h) : -EPROTO;

	*id = *ttl_s = 0;
	if (rc == 0)
		rc = get_i64(root, "ID", 1, id);
	if (rc == 0)
		rc = get_i64(root, "TTL", 1, ttl_s);
	json_decref(root);
	return rc;
}

int etcd_dec_lease_keepalive(const char *text, size_t len, int64_t id, struct etcd_header *h,
			     int64_t *ttl_s)
{
	json_t *root = parse(text, len);
	const json_t *res = NULL;
	int64_t got = 0;
	int rc = root ? stream_result(root, &res) : -EPROTO;

	*ttl_s = 0;
	memset(h, 0, sizeof *h);
	if (rc == 0)
		rc = dec_header(res, h);
	if (rc == 0)
		rc = get_i64(res, "ID", 1, &got);
	if (rc == 0 && got != id)
		rc = -EPROTO;
	if (rc == 0)
		rc = get_i64(res, "TTL", 0, ttl_s);
	json_decref(root);
	return rc;
}

int etcd_dec_lease_ttl(const char *text, size_t len, int64_t id, struct etcd_header *h,
		       int64_t *ttl_s, int64_t *granted_s)
{
	json_t *root = parse(text, len);
	int64_t got = 0;
	int rc = root ? dec_header(root, h) : -EPROTO;

	*ttl_s = -1;
	*granted_s = 0;
	if (rc == 0)
		rc = get_i64(root, "ID", 1, &got);
	if (rc == 0 && got != id)
		rc = -EPROTO;
	/* -1: etcd no longer knows the lease (TTL is then -1 on the wire). */
	if (rc == 0)
		rc = get_i64(root, "TTL", -1, ttl_s);
	if (rc == 0)
		rc = get_i64(root, "grantedTTL", 0, granted_s);
	if (rc < 0)
		*ttl_s = -1;
	json_decref(root);
	return rc;
}

int etcd_dec_header_only(const char *text, size_t len, struct etcd_header *h)
{
	json_t *root = parse(text, len);
	int rc = root ? dec_header(root, h) : -EPROTO;

	json_decref(root);
	return rc;
}

int etcd_dec_delete(const char *text, size_t len, struct etcd_header *h, int64_t *deleted)
{
	json_t *root = parse(text, len);
	int rc = root ? dec_header(root, h) : -EPROTO;

	*deleted = 0;
	if (rc == 0)
		rc = get_i64(root, "deleted", 0, deleted);
	json_decref(root);
	return rc;
}

void etcd_range_free(struct etcd_range *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nkvs; i++)
		etcd_kv_free(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof *r);
}

/* A RangeResponse's kvs, count and more (header apart: inside a txn only
 * the revision is there). */
static int dec_range_body(const json_t *o, struct etcd_range *r)
{
	const json_t *kvs;
	size_t n;
	int rc = get_array(o, "kvs", &kvs, &n);

	if (rc == 0)
		rc = get_i64(o, "count", 0, &r->count);
	if (rc == 0)
		rc = get_bool(o, "more", &r->more);
	if (rc == 0 && n > 0) {
		r->kvs = calloc(n, sizeof *r->kvs);
		if (!r->kvs)
			rc = -ENOMEM;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = dec_kv(json_array_get(kvs, i), &r->kvs[i]);
		if (rc == 0)
			r->nkvs = i + 1;
	}
	if (rc == 0 && (int64_t)r->nkvs > r->count)
		rc = -EPROTO; /* more keys than it says there are */
	return rc;
}

int etcd_dec_range(const char *text, size_t len, struct etcd_range *r)
{
	json_t *root = parse(text, len);
	int rc;

	memset(r, 0, sizeof *r);
	rc = root ? dec_header(root, &r->header) : -EPROTO;
	if (rc == 0)
		rc = dec_range_body(root, r);
	if (rc < 0)
		etcd_range_free(r);
	json_decref(root);
	return rc;
}

/* The txn of etcd_enc_create: success has one response_put, failure one
 * response_range with the key (or none, if it was deleted in between). */
int etcd_dec_create(const char *text, size_t len, struct etcd_header *h, bool *created,
		    struct etcd_kv *existing)
{
	json_t *root = parse(text, len);
	const json_t *resps, *one, *body;
	struct etcd_range r;
	size_t n = 0;
	int rc = root ? dec_header(root, h) : -EPROTO;

	memset(existing, 0, sizeof *existing);
	memset(&r, 0, sizeof r);
	*created = false;
	if (rc == 0)
		rc = get_bool(root, "succeeded", created);
	if (rc == 0)
		rc = get_array(root, "responses", &resps, &n);
	if (rc == 0 && n != 1)
		rc = -EPROTO;
	if (rc == 0) {
		one = json_array_get(resps, 0);
		rc = json_is_object(one) ? 0 : -EPROTO;
	}
	if (rc == 0)
		rc = get_object(one, *created ? "response_put" : "response_range", true, &body);
	if (rc == 0 && !*created)
		rc = dec_range_body(body, &r);
	if (rc == 0 && r.nkvs > 1)
		rc = -EPROTO;
	if (rc == 0 && r.nkvs == 1) {
		*existing = r.kvs[0];
		memset(&r.kvs[0], 0, sizeof r.kvs[0]);
	}
	etcd_range_free(&r);
	json_decref(root);
	return rc;
}

/* ---- compare-and-delete ------------------------------------------------------- */

int etcd_enc_delete_if(const void *key, size_t key_len, int64_t mod_revision, char **out)
{
	json_t *o, *cmp, *del;
	bool ok;

	*out = NULL;
	if (!key_ok(key, key_len) || mod_revision <= 0)
		return -EINVAL;
	o = json_object();
	cmp = json_object();
	del = json_object();
	ok = set(cmp, "key", b64_string(key, key_len)) && set(cmp, "result", json_string("EQUAL")) &&
	     set(cmp, "target", json_string("MOD")) &&
	     set(cmp, "mod_revision", i64_string(mod_revision)) &&
	     set(del, "request_delete_range", key_selection(key, key_len, false));
	ok = ok && set(o, "compare", json_pack("[O]", cmp)) &&
	     set(o, "success", json_pack("[O]", del));
	json_decref(cmp);
	json_decref(del);
	return finish(o, ok, out);
}

int etcd_dec_txn(const char *text, size_t len, struct etcd_header *h, bool *succeeded)
{
	json_t *root = parse(text, len);
	int rc = root ? dec_header(root, h) : -EPROTO;

	*succeeded = false;
	if (rc == 0)
		rc = get_bool(root, "succeeded", succeeded);
	json_decref(root);
	return rc;
}

/* ---- watch ---------------------------------------------------------------------- */

void etcd_watch_msg_free(struct etcd_watch_msg *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nevents; i++)
		etcd_kv_free(&m->events[i].kv);
	free(m->events);
	memset(m, 0, sizeof *m);
}

static int dec_event(const json_t *o, struct etcd_event *ev)
{
	const json_t *type, *kv;
	int rc;

	memset(ev, 0, sizeof *ev);
	if (!json_is_object(o))
		return -EPROTO;
	type = json_object_get(o, "type");
	if (!type)
		ev->type = ETCD_EVENT_PUT; /* the default, left out */
	else if (json_is_string(type) && !strcmp(json_string_value(type), "PUT"))
		ev->type = ETCD_EVENT_PUT;
	else if (json_is_string(type) && !strcmp(json_string_value(type), "DELETE"))
		ev->type = ETCD_EVENT_DELETE;
	else
		return -EPROTO;
	rc = get_object(o, "kv", true, &kv);
	return rc < 0 ? rc : dec_kv(kv, &ev->kv);
}

int etcd_dec_watch(const char *text, size_t len, struct etcd_watch_msg *m)
{
	json_t *root = parse(text, len);
	const json_t *res = NULL, *evs;
	size_t n = 0;
	int rc = root ? stream_result(root, &res) : -EPROTO;

	memset(m, 0, sizeof *m);
	if (rc == 0)
		rc = dec_header(res, &m->header);
	if (rc == 0)
		rc = get_i64(res, "watch_id", 0, &m->watch_id);
	if (rc == 0)
		rc = get_bool(res, "created", &m->created);
	if (rc == 0)
		rc = get_bool(res, "canceled", &m->canceled);
	if (rc == 0)
		rc = get_i64(res, "compact_revision", 0, &m->compact_revision);
	if (rc == 0)
		rc = get_array(res, "events", &evs, &n);
	if (rc == 0 && n > 0) {
		m->events = calloc(n, sizeof *m->events);
		if (!m->events)
			rc = -ENOMEM;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = dec_event(json_array_get(evs, i), &m->events[i]);
		if (rc == 0)
			m->nevents = i + 1;
	}
	if (rc < 0)
		etcd_watch_msg_free(m);
	json_decref(root);
	return rc;
}

/* ---- errors ------------------------------------------------------------------------ */

static void copy_message(const json_t *v, char *out, size_t out_len)
{
	const char *s = json_is_string(v) ? json_string_value(v) : "";
	size_t n = 0;

	if (!out_len)
		return;
	for (; *s && n + 1 < out_len; s++)
		out[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	out[n] = '\0';
}

int etcd_dec_error(const char *text, size_t len, int *code, char *message, size_t message_len)
{
	json_t *root = parse(text, len);
	const json_t *err, *msg;
	int64_t c = 0;
	int rc = root ? 0 : -EPROTO;

	*code = 0;
	if (message_len)
		message[0] = '\0';
	if (rc < 0)
		return rc;
	err = json_object_get(root, "error");
	if (json_is_object(err)) {           /* a stream's error */
		rc = get_i64(err, "grpc_code", 0, &c);
		msg = json_object_get(err, "message");
	} else if (json_is_string(err)) {    /* a unary call's */
		rc = get_i64(root, "code", 0, &c);
		msg = json_object_get(root, "message");
		if (!json_is_string(msg))
			msg = err;
	} else {
		rc = -EPROTO;
		msg = NULL;
	}
	if (rc == 0 && (c <= 0 || c > INT_MAX))
		rc = -EPROTO; /* 0 is OK, which is no error */
	if (rc == 0) {
		*code = (int)c;
		copy_message(msg, message, message_len);
	}
	json_decref(root);
	return rc;
}

int etcd_grpc_errno(int code)
{
	switch (code) {
	case 3:  return -EINVAL;  /* INVALID_ARGUMENT */
	case 4:  return -EAGAIN;  /* DEADLINE_EXCEEDED */
	case 5:  return -ENOENT;  /* NOT_FOUND */
	case 7:  return -EACCES;  /* PERMISSION_DENIED */
	case 8:  return -ENOSPC;  /* RESOURCE_EXHAUSTED */
	case 9:  return -EPERM;   /* FAILED_PRECONDITION */
	case 14: return -EAGAIN;  /* UNAVAILABLE */
	case 16: return -EACCES;  /* UNAUTHENTICATED */
	default: return -EPROTO;
	}
}
