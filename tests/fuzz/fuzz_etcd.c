/*
 * fuzz_etcd.c - libFuzzer target for the etcd gateway codec and the server
 * record (etcd_codec.h, cluster_rec.h).
 *
 * Every input goes to every decoder, as a reply from etcd would.  What
 * decodes must be sane: keys non-empty, bytes NUL-terminated and within
 * ETCD_MAX_BYTES, no more kvs than the count says; a server record that
 * decodes must encode and decode again to the same record.  The input is
 * also used as a key and a value for every encoder, whose output must be
 * JSON that carries the same bytes back (base64 decoded by hand here).
 *
 * Linked with replay.c instead of libFuzzer it replays the seed corpus
 * (tests/fuzz/corpus/etcd: replies captured from etcd 3.4.23) in `make test`.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "cluster_name.h"
#include "cluster_rec.h"
#include "etcd_codec.h"
#include "fuzz.h"

static void check_kv(const struct etcd_kv *kv, bool key_needed)
{
	CHECK(!key_needed || (kv->key && kv->key_len > 0));
	CHECK(kv->key_len <= ETCD_MAX_BYTES && kv->value_len <= ETCD_MAX_BYTES);
	CHECK(!kv->key || kv->key[kv->key_len] == 0);
	CHECK(!kv->value || kv->value[kv->value_len] == 0);
	CHECK(kv->create_revision >= 0 && kv->mod_revision >= 0 && kv->version >= 0 &&
	      kv->lease >= 0);
}

static void decoders(const char *text, size_t len)
{
	struct etcd_header h;
	struct etcd_range r;
	struct etcd_watch_msg m;
	struct etcd_kv kv;
	struct cluster_rec rec, again;
	struct cluster_name nm, nm2;
	int64_t a, b;
	bool created;
	char msg[64], *out;
	int code;

	if (etcd_dec_lease_grant(text, len, &h, &a, &b) == 0)
		CHECK(a > 0 && b > 0 && h.revision >= 0);
	if (etcd_dec_lease_keepalive(text, len, 77, &h, &a) == 0)
		CHECK(a >= 0);
	if (etcd_dec_lease_ttl(text, len, 77, &h, &a, &b) == 0)
		CHECK(a >= -1 && b >= 0);
	etcd_dec_header_only(text, len, &h);
	if (etcd_dec_delete(text, len, &h, &a) == 0)
		CHECK(a >= 0);
	if (etcd_dec_range(text, len, &r) == 0) {
		CHECK((int64_t)r.nkvs <= r.count);
		for (size_t i = 0; i < r.nkvs; i++)
			check_kv(&r.kvs[i], true);
		etcd_range_free(&r);
	}
	if (etcd_dec_create(text, len, &h, &created, &kv) == 0) {
		CHECK(!created || !kv.key);
		check_kv(&kv, false);
		etcd_kv_free(&kv);
	}
	if (etcd_dec_watch(text, len, &m) == 0) {
		for (size_t i = 0; i < m.nevents; i++) {
			CHECK(m.events[i].type == ETCD_EVENT_PUT ||
			      m.events[i].type == ETCD_EVENT_DELETE);
			check_kv(&m.events[i].kv, true);
		}
		etcd_watch_msg_free(&m);
	}
	if (etcd_dec_error(text, len, &code, msg, sizeof msg) == 0) {
		CHECK(code > 0 && strlen(msg) < sizeof msg);
		for (const char *p = msg; *p; p++)
			CHECK(*p >= 0x20 && *p < 0x7f);
	}
	etcd_dec_txn(text, len, &h, &created);
	if (cluster_name_decode(text, len, &nm) == 0) {
		CHECK(cluster_name_encode(&nm, &out) == 0);
		CHECK(cluster_name_decode(out, strlen(out), &nm2) == 0);
		CHECK(!memcmp(&nm, &nm2, sizeof nm));
		free(out);
	}
	if (cluster_rec_decode(text, len, &rec) == 0) {
		CHECK(rec.free_bytes <= rec.pool_bytes && rec.largest_free <= rec.free_bytes);
		CHECK(cluster_rec_encode(&rec, &out) == 0);
		CHECK(cluster_rec_decode(out, strlen(out), &again) == 0);
		CHECK(!memcmp(&rec, &again, sizeof rec));
		free(out);
	}
}

/* obj's field name (base64) must decode to bytes/len. */
static void check_b64(const json_t *obj, const char *name, const void *bytes, size_t len)
{
	const json_t *v = json_object_get(obj, name);
	unsigned char *buf = malloc(len + 1);
	size_t n = 0;

	CHECK(buf && json_is_string(v));
	CHECK(sodium_base642bin(buf, len + 1, json_string_value(v), json_string_length(v), NULL,
				&n, NULL, sodium_base64_VARIANT_ORIGINAL) == 0);
	CHECK(n == len && !memcmp(buf, bytes, len));
	free(buf);
}

static json_t *load(char *text)
{
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);

	CHECK(json_is_object(o));
	free(text);
	return o;
}

static void encoders(const uint8_t *data, size_t size)
{
	char *out;
	json_t *o;

	if (size == 0 || size > ETCD_MAX_BYTES) {
		CHECK(etcd_enc_put(data, size, data, size, 1, &out) == -EINVAL && !out);
		return;
	}
	CHECK(etcd_enc_put(data, size, data, size, 1, &out) == 0);
	o = load(out);
	check_b64(o, "key", data, size);
	check_b64(o, "value", data, size);
	json_decref(o);
	CHECK(etcd_enc_range(data, size, true, &out) == 0);
	o = load(out);
	check_b64(o, "key", data, size);
	CHECK(json_is_string(json_object_get(o, "range_end")));
	json_decref(o);
	CHECK(etcd_enc_create(data, size, data, size, 3, &out) == 0);
	json_decref(load(out));
	CHECK(etcd_enc_put_if(data, size, data, size, 0, 7, &out) == 0);
	json_decref(load(out));
	CHECK(etcd_enc_put_if_guarded(data, size, data, size, 0, 7, data, size, 3, &out) == 0);
	json_decref(load(out));
	CHECK(etcd_enc_watch_create(data, size, false, 1, &out) == 0);
	json_decref(load(out));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decoders((const char *)data, size);
	encoders(data, size);
	return 0;
}
