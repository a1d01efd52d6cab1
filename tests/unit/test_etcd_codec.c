/*
 * test_etcd_codec.c - the etcd gateway codec (etcd_codec.h), the endpoint
 * list (etcd_endpoints.h), the server record (cluster_rec.h) and the name
 * record (cluster_name.h): requests
 * byte for byte, replies as etcd 3.4.23 wrote them (captured from a real
 * member), and every way a reply can be wrong.  No etcd, no network.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cluster_name.h"
#include "cluster_rec.h"
#include "etcd_codec.h"
#include "etcd_endpoints.h"
#include "etcd_url.h"
#include "tap.h"

#define S(x) x, sizeof(x) - 1
#define HDR "\"header\":{\"cluster_id\":\"6647153259822763455\",\"member_id\":" \
	"\"14806841127317227866\",\"revision\":\"2\",\"raft_term\":\"2\"}"

/* out: where the encoder left its text (read after the call, not before) */
static void enc_is(int rc, char **out, const char *want, const char *what)
{
	char *got = *out;

	ok(rc == 0 && got && !strcmp(got, want), "%s: %s", what, got ? got : "(null)");
	free(got);
	*out = NULL;
}

static void requests(void)
{
	char *out = NULL;
	static const unsigned char ff[] = { 0xff, 0xff };

	enc_is(etcd_enc_lease_grant(3, &out), &out, "{\"TTL\":\"3\",\"ID\":\"0\"}", "lease grant");
	enc_is(etcd_enc_lease_id(7587821338341002662, &out), &out,
	       "{\"ID\":\"7587821338341002662\"}", "keepalive/revoke");
	enc_is(etcd_enc_put(S("/a"), S("x"), 5, &out), &out,
	       "{\"key\":\"L2E=\",\"value\":\"eA==\",\"lease\":\"5\"}", "put with a lease");
	enc_is(etcd_enc_put(S("/a"), NULL, 0, 0, &out), &out, "{\"key\":\"L2E=\",\"value\":\"\"}",
	       "put of an empty value, no lease");
	enc_is(etcd_enc_range(S("/a"), false, &out), &out, "{\"key\":\"L2E=\"}", "range of one key");
	/* "/a/" -> range_end "/a0" */
	enc_is(etcd_enc_range(S("/a/"), true, &out), &out,
	       "{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\"}", "range of a prefix");
	enc_is(etcd_enc_delete(ff, sizeof ff, true, &out), &out,
	       "{\"key\":\"//8=\",\"range_end\":\"AA==\"}", "prefix of 0xff bytes: every key from it");
	enc_is(etcd_enc_create(S("/n"), S("v"), 9, &out), &out,
	       "{\"compare\":[{\"key\":\"L24=\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
	       "\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"L24=\","
	       "\"value\":\"dg==\",\"lease\":\"9\"}}],\"failure\":[{\"request_range\":"
	       "{\"key\":\"L24=\"}}]}", "create-if-absent txn");
	enc_is(etcd_enc_watch_create(S("/p/"), true, 12, &out), &out,
	       "{\"create_request\":{\"key\":\"L3Av\",\"range_end\":\"L3Aw\","
	       "\"start_revision\":\"12\"}}", "watch from a revision");
	ok(etcd_enc_put(NULL, 0, S("x"), 0, &out) == -EINVAL && !out, "put of an empty key: EINVAL");
	ok(etcd_enc_range("", 0, true, &out) == -EINVAL, "range of an empty key: EINVAL");
	ok(etcd_enc_lease_grant(0, &out) == -EINVAL, "lease of 0 s: EINVAL");
	ok(etcd_enc_lease_id(0, &out) == -EINVAL, "lease id 0: EINVAL");
	ok(etcd_enc_put(S("/a"), S("x"), -1, &out) == -EINVAL, "negative lease: EINVAL");
	ok(etcd_enc_watch_create(S("/a"), false, -1, &out) == -EINVAL, "negative revision: EINVAL");
}

static void leases(void)
{
	struct etcd_header h;
	int64_t id, ttl;

	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\"5285715279588111877\",\"TTL\":\"2\"}"), &h, &id,
				&ttl) == 0 && id == 5285715279588111877 && ttl == 2 &&
	   h.revision == 2 && h.member_id == 14806841127317227866u,
	   "lease grant reply (as etcd 3.4 sends it; member_id above INT64_MAX)");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":12,\"TTL\":3}"), &h, &id, &ttl) == 0 && id == 12,
	   "integers as JSON numbers are taken too");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"TTL\":\"2\"}"), &h, &id, &ttl) == -EPROTO,
	   "grant without an ID: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\"-4\",\"TTL\":\"2\"}"), &h, &id, &ttl) == -EPROTO,
	   "negative ID: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\"9223372036854775808\",\"TTL\":\"2\"}"), &h, &id,
				&ttl) == -EPROTO, "ID past INT64_MAX: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\"12x\",\"TTL\":\"2\"}"), &h, &id, &ttl) == -EPROTO,
	   "ID with a letter: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\" 12\",\"TTL\":\"2\"}"), &h, &id, &ttl) == -EPROTO,
	   "ID with a space: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":true,\"TTL\":\"2\"}"), &h, &id, &ttl) == -EPROTO,
	   "ID of the wrong type: EPROTO");
	ok(etcd_dec_lease_grant(S("{\"ID\":\"1\",\"TTL\":\"2\"}"), &h, &id, &ttl) == -EPROTO,
	   "no header: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\"1\",\"ID\":\"2\",\"TTL\":\"2\"}"), &h, &id,
				&ttl) == -EPROTO, "the same field twice: EPROTO");
	ok(etcd_dec_lease_grant(S("[1]"), &h, &id, &ttl) == -EPROTO, "not an object: EPROTO");
	ok(etcd_dec_lease_grant(S("{" HDR ",\"ID\":\"1\",\"TTL\":\"2\"} x"), &h, &id, &ttl) ==
	   -EPROTO, "trailing garbage: EPROTO");

	ok(etcd_dec_lease_keepalive(S("{\"result\":{" HDR ",\"ID\":\"77\",\"TTL\":\"3\"}}\n"), 77, &h,
				    &ttl) == 0 && ttl == 3, "keepalive reply (stream, trailing newline)");
	ok(etcd_dec_lease_keepalive(S("{\"result\":{" HDR ",\"ID\":\"77\"}}"), 77, &h, &ttl) == 0 &&
	   ttl == 0, "keepalive of a lost lease: TTL left out, 0");
	ok(etcd_dec_lease_keepalive(S("{\"result\":{" HDR ",\"ID\":\"78\",\"TTL\":\"3\"}}"), 77, &h,
				    &ttl) == -EPROTO, "keepalive reply for another lease: EPROTO");
	ok(etcd_dec_lease_keepalive(S("{" HDR ",\"ID\":\"77\",\"TTL\":\"3\"}"), 77, &h, &ttl) ==
	   -EPROTO, "keepalive reply not wrapped in result: EPROTO");
	{
		int64_t granted;

		ok(etcd_dec_lease_ttl(S("{" HDR ",\"ID\":\"77\",\"TTL\":\"2\",\"grantedTTL\":\"3\"}"),
				      77, &h, &ttl, &granted) == 0 && ttl == 2 && granted == 3,
		   "timetolive reply: remaining and granted TTL");
		ok(etcd_dec_lease_ttl(S("{" HDR ",\"ID\":\"77\",\"TTL\":\"-1\"}"), 77, &h, &ttl,
				      &granted) == 0 && ttl == -1 && granted == 0,
		   "timetolive of a lease etcd no longer knows: TTL -1");
		ok(etcd_dec_lease_ttl(S("{" HDR ",\"ID\":\"78\",\"TTL\":\"2\"}"), 77, &h, &ttl,
				      &granted) == -EPROTO && ttl == -1, "timetolive of another lease: EPROTO");
		ok(etcd_dec_lease_ttl(S("{" HDR ",\"ID\":\"77\",\"TTL\":\"-2\"}"), 77, &h, &ttl,
				      &granted) == -EPROTO, "timetolive with TTL below -1: EPROTO");
	}
	ok(etcd_dec_header_only(S("{" HDR "}"), &h) == 0 && h.raft_term == 2, "put/revoke reply");
	ok(etcd_dec_header_only(S("{\"header\":{\"revision\":\"x\"}}"), &h) == -EPROTO,
	   "header with a bad revision: EPROTO");
}

static void keys(void)
{
	struct etcd_range r;
	struct etcd_header h;
	struct etcd_kv kv;
	int64_t n;
	bool created;

	ok(etcd_dec_range(S("{" HDR ",\"kvs\":[{\"key\":\"L2E=\",\"create_revision\":\"2\","
			    "\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"eA==\","
			    "\"lease\":\"5285715279588111879\"}],\"count\":\"1\"}"), &r) == 0 &&
	   r.nkvs == 1 && r.count == 1 && r.kvs[0].key_len == 2 &&
	   !memcmp(r.kvs[0].key, "/a", 3) && r.kvs[0].value_len == 1 &&
	   !strcmp((char *)r.kvs[0].value, "x") && r.kvs[0].lease == 5285715279588111879 &&
	   r.kvs[0].create_revision == 2 && r.kvs[0].version == 1, "range reply, one key");
	etcd_range_free(&r);
	ok(etcd_dec_range(S("{" HDR "}"), &r) == 0 && r.nkvs == 0 && r.count == 0 && !r.kvs,
	   "range reply with no key (kvs and count left out)");
	ok(etcd_dec_range(S("{" HDR ",\"kvs\":[{\"key\":\"L2E=\"}],\"count\":\"0\"}"), &r) == -EPROTO,
	   "more kvs than count: EPROTO");
	ok(etcd_dec_range(S("{" HDR ",\"kvs\":[{\"key\":\"L2E\"}],\"count\":\"1\"}"), &r) == -EPROTO,
	   "key not in padded base64: EPROTO");
	ok(etcd_dec_range(S("{" HDR ",\"kvs\":[{\"key\":\"L2E=\",\"value\":\"e!==\"}],\"count\":\"1\"}"),
			  &r) == -EPROTO, "value not base64: EPROTO");
	ok(etcd_dec_range(S("{" HDR ",\"kvs\":[{\"value\":\"eA==\"}],\"count\":\"1\"}"), &r) == -EPROTO,
	   "kv without a key: EPROTO");
	ok(etcd_dec_range(S("{" HDR ",\"kvs\":{},\"count\":\"1\"}"), &r) == -EPROTO,
	   "kvs not a list: EPROTO");
	ok(etcd_dec_range(S("{" HDR ",\"kvs\":[1],\"count\":\"1\"}"), &r) == -EPROTO,
	   "a kv that is not an object: EPROTO");
	ok(etcd_dec_range(S("{" HDR ",\"more\":\"yes\"}"), &r) == -EPROTO, "more not a bool: EPROTO");

	ok(etcd_dec_delete(S("{" HDR ",\"deleted\":\"1\"}"), &h, &n) == 0 && n == 1, "delete: 1 key");
	ok(etcd_dec_delete(S("{" HDR "}"), &h, &n) == 0 && n == 0, "delete: none (left out)");

	ok(etcd_dec_create(S("{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":"
			     "{\"header\":{\"revision\":\"3\"}}}]}"), &h, &created, &kv) == 0 &&
	   created && !kv.key, "create txn: created");
	ok(etcd_dec_create(S("{" HDR ",\"responses\":[{\"response_range\":{\"header\":{\"revision\":"
			     "\"2\"},\"kvs\":[{\"key\":\"L2E=\",\"create_revision\":\"2\","
			     "\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"eA==\",\"lease\":\"9\"}],"
			     "\"count\":\"1\"}}]}"), &h, &created, &kv) == 0 && !created &&
	   kv.lease == 9 && kv.value_len == 1, "create txn: lost, with the key as it is");
	etcd_kv_free(&kv);
	ok(etcd_dec_create(S("{" HDR ",\"responses\":[{\"response_range\":{\"header\":{}}}]}"), &h,
			   &created, &kv) == 0 && !created && !kv.key,
	   "create txn: lost, the key gone meanwhile");
	ok(etcd_dec_create(S("{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{}}]}"),
			   &h, &created, &kv) == -EPROTO, "created but no response_put: EPROTO");
	ok(etcd_dec_create(S("{" HDR ",\"succeeded\":true,\"responses\":[]}"), &h, &created, &kv) ==
	   -EPROTO, "no response: EPROTO");
	ok(etcd_dec_create(S("{" HDR ",\"succeeded\":1,\"responses\":[{\"response_put\":{}}]}"), &h,
			   &created, &kv) == -EPROTO, "succeeded not a bool: EPROTO");
}

static void watch(void)
{
	struct etcd_watch_msg m;

	ok(etcd_dec_watch(S("{\"result\":{" HDR ",\"created\":true}}"), &m) == 0 && m.created &&
	   !m.nevents, "watch: created");
	ok(etcd_dec_watch(S("{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":\"L2E=\","
			    "\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\","
			    "\"value\":\"eA==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2E=\","
			    "\"mod_revision\":\"5\"}}]}}"), &m) == 0 && m.nevents == 2 &&
	   m.events[0].type == ETCD_EVENT_PUT && m.events[1].type == ETCD_EVENT_DELETE &&
	   m.events[1].kv.mod_revision == 5, "watch: a PUT (type left out) and a DELETE");
	etcd_watch_msg_free(&m);
	ok(etcd_dec_watch(S("{\"result\":{" HDR ",\"canceled\":true,\"compact_revision\":\"40\"}}"),
			  &m) == 0 && m.canceled && m.compact_revision == 40,
	   "watch: canceled after compaction");
	ok(etcd_dec_watch(S("{\"result\":{" HDR ",\"events\":[{\"type\":\"MOVE\",\"kv\":{\"key\":"
			    "\"L2E=\"}}]}}"), &m) == -EPROTO, "watch: unknown event type: EPROTO");
}

static void errors(void)
{
	char msg[64];
	int code;

	ok(etcd_dec_error(S("{\"error\":\"etcdserver: requested lease not found\",\"message\":"
			    "\"etcdserver: requested lease not found\",\"code\":5}"), &code, msg,
			  sizeof msg) == 0 && code == 5 &&
	   !strcmp(msg, "etcdserver: requested lease not found"), "unary error");
	ok(etcd_grpc_errno(code) == -ENOENT, "NOT_FOUND is ENOENT");
	ok(etcd_dec_error(S("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
			    "\"no\\nleader\"}}"), &code, msg, sizeof msg) == 0 && code == 14 &&
	   !strcmp(msg, "no?leader"), "stream error, its message made printable");
	ok(etcd_grpc_errno(14) == -EAGAIN && etcd_grpc_errno(4) == -EAGAIN &&
	   etcd_grpc_errno(3) == -EINVAL && etcd_grpc_errno(99) == -EPROTO,
	   "UNAVAILABLE and DEADLINE_EXCEEDED: EAGAIN; INVALID_ARGUMENT: EINVAL; others EPROTO");
	ok(etcd_dec_error(S("{\"error\":\"x\",\"code\":0}"), &code, msg, sizeof msg) == -EPROTO,
	   "an error with code 0: EPROTO");
	ok(etcd_dec_error(S("{\"ok\":1}"), &code, msg, sizeof msg) == -EPROTO, "no error: EPROTO");
}

static void endpoints(void)
{
	struct etcd_endpoints e;
	char why[128];

	ok(etcd_endpoints_parse("http://127.0.0.1:2379,https://etcd-2.example:22379/,http://[::1]:1",
				&e, why, sizeof why) == 0 && e.n == 3 &&
	   !strcmp(e.url[1], "https://etcd-2.example:22379") && !strcmp(e.url[2], "http://[::1]:1"),
	   "three endpoints, one with a trailing /");
	ok(etcd_endpoints_parse("", &e, why, sizeof why) == -EINVAL, "empty: %s", why);
	ok(etcd_endpoints_parse("127.0.0.1:2379", &e, why, sizeof why) == -EINVAL, "%s", why);
	ok(etcd_endpoints_parse("http://h:0", &e, why, sizeof why) == -EINVAL, "port 0: %s", why);
	ok(etcd_endpoints_parse("http://h:65536", &e, why, sizeof why) == -EINVAL, "%s", why);
	ok(etcd_endpoints_parse("http://h:1,", &e, why, sizeof why) == -EINVAL, "trailing comma: %s",
	   why);
	ok(etcd_endpoints_parse("http://h:1/v3", &e, why, sizeof why) == -EINVAL, "a path: %s", why);
	ok(etcd_endpoints_parse("http://h h:1", &e, why, sizeof why) == -EINVAL, "%s", why);
	ok(etcd_endpoints_parse("http://a:1,http://a:1,http://a:1,http://a:1,http://a:1,http://a:1,"
				"http://a:1,http://a:1,http://a:1", &e, why, sizeof why) == -EINVAL,
	   "nine: %s", why);
}

/* etcd_url_parse's other parameters: "x=N" taken, counted in *arg. */
static int take_x(void *arg, const char *p, size_t len)
{
	if (len < 3 || strncmp(p, "x=", 2))
		return -EINVAL;
	(*(int *)arg)++;
	return 0;
}

static void urls(void)
{
	struct etcd_endpoints e;
	struct etcd_tls tls;
	struct etcd_url u;
	char why[160], q[256], url[300];
	int n = 0;

	ok(etcd_url_is("etcd://h:1") && etcd_url_is("etcds://h:1") && !etcd_url_is("etcdx://h:1") &&
	   !etcd_url_is("tcp://h:1") && !etcd_url_is(NULL), "etcd:// and etcds:// are etcd URLs");
	ok(etcd_url_parse("etcd://a:1,b:2/c1", &u, NULL, NULL, why, sizeof why) == 0 &&
	   !strcmp(u.list, "http://a:1,http://b:2") && !strcmp(u.name, "c1") &&
	   !etcd_tls_any(&u.tls), "etcd://: http://, the name, no TLS");
	ok(etcd_url_parse("etcds://a:1", &u, NULL, NULL, why, sizeof why) == 0 &&
	   !strcmp(u.list, "https://a:1") && !strcmp(u.name, "rmem"), "etcds://: https://, rmem");
	ok(etcd_url_parse("etcds://a:1/n?x=1&etcd_ca=/p/ca.pem&etcd_cert=/p/c%26d.pem&x=2&"
			  "etcd_key=/k%25", &u, take_x, &n, why, sizeof why) == 0 && n == 2 &&
	   !strcmp(u.tls.ca, "/p/ca.pem") && !strcmp(u.tls.cert, "/p/c&d.pem") &&
	   !strcmp(u.tls.key, "/k%"), "the TLS files, %%XX decoded; the others to the caller");
	ok(etcd_url_parse("etcd://a:1/n?etcd_ca=/ca.pem", &u, NULL, NULL, why, sizeof why) ==
	   -EINVAL && strstr(why, "etcds://"), "TLS files with etcd://: %s", why);
	ok(etcd_url_parse("etcds://a:1/n?etcd_cert=/c.pem", &u, NULL, NULL, why, sizeof why) ==
	   -EINVAL && strstr(why, "etcd_key"), "a certificate without its key: %s", why);
	ok(etcd_url_parse("etcds://a:1/n?etcd_ca=/a&etcd_ca=/b", &u, NULL, NULL, why, sizeof why) ==
	   -EINVAL, "etcd_ca twice: %s", why);
	ok(etcd_url_parse("etcds://a:1/n?etcd_ca=", &u, NULL, NULL, why, sizeof why) == -EINVAL &&
	   etcd_url_parse("etcds://a:1/n?etcd_ca=/a%2", &u, NULL, NULL, why, sizeof why) == -EINVAL &&
	   etcd_url_parse("etcds://a:1/n?etcd_ca=/a%00", &u, NULL, NULL, why, sizeof why) == -EINVAL,
	   "an empty path, a cut %%XX, a NUL byte: refused");
	ok(etcd_url_parse("etcds://a:1/n?y=1", &u, take_x, &n, why, sizeof why) == -EINVAL &&
	   etcd_url_parse("etcds://a:1/n?x=1", &u, NULL, NULL, why, sizeof why) == -EINVAL,
	   "a parameter the caller refuses, or any without a caller: %s", why);
	ok(etcd_url_parse("etcd://a:1,/n", &u, NULL, NULL, why, sizeof why) == -EINVAL &&
	   etcd_url_parse("etcd:///n", &u, NULL, NULL, why, sizeof why) == -EINVAL &&
	   etcd_url_parse("etcd://a:1/n/m", &u, NULL, NULL, why, sizeof why) == -EINVAL &&
	   etcd_url_parse("etcd://a/n", &u, NULL, NULL, why, sizeof why) == -EINVAL,
	   "an empty host, no host, a bad name, no port: refused");
	memset(&tls, 0, sizeof tls);
	snprintf(tls.ca, sizeof tls.ca, "/a b/%%&c");
	snprintf(tls.cert, sizeof tls.cert, "/c");
	snprintf(tls.key, sizeof tls.key, "/k");
	ok(etcd_url_tls_query(&tls, q, sizeof q) == 0 &&
	   !strcmp(q, "&etcd_ca=/a%20b/%25%26c&etcd_cert=/c&etcd_key=/k"), "encoded: %s", q);
	snprintf(url, sizeof url, "etcds://a:1/n?x=1%s", q);
	ok(etcd_url_parse(url, &u, take_x, &n, why, sizeof why) == 0 &&
	   !strcmp(u.tls.ca, tls.ca), "and decoded back");
	ok(etcd_url_tls_query(&tls, q, 20) == -ENAMETOOLONG, "too long: -ENAMETOOLONG");
	ok(etcd_endpoints_parse("https://a:1,http://b:2", &e, why, sizeof why) == 0 &&
	   etcd_tls_check(&e, &tls, why, sizeof why) == -EINVAL && strstr(why, "endpoint 2"),
	   "TLS files and an http:// endpoint: %s", why);
	ok(etcd_tls_check(&e, NULL, why, sizeof why) == 0, "no TLS: http:// is fine");
}

/* A good server record with key's value replaced by val (JSON text), or
 * without key when val is NULL: the text (free it), or NULL. */
static char *rec_with(const char *key, const char *val)
{
	static const char good[] = "{\"id\":\"a\",\"tcp\":\"h:1\",\"rdma\":\"\","
				   "\"pool_bytes\":10,\"free_bytes\":5,\"largest_free\":5,"
				   "\"generation\":1,\"start_time_ms\":2}";
	json_t *o = json_loads(good, 0, NULL);
	char *text = NULL;

	if (o && (val ? json_object_set_new(o, key, json_loads(val, JSON_DECODE_ANY, NULL)) :
			json_object_del(o, key)) == 0)
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

static void records(void)
{
	/* One thing wrong with an otherwise good record each. */
	static const struct { const char *key, *val, *why; } bad[] = {
		{ "free_bytes", "11", "free > pool" },
		{ "id", "\"a/b\"", "an id with '/'" },
		{ "generation", "-1", "negative generation" },
		{ "rdma", NULL, "no rdma field" },
		{ "draining", "2", "draining neither 0 nor 1" },
		{ "regions", "-3", "negative regions" },
	};
	struct cluster_rec r = { .id = "s-1", .tcp = "10.0.0.1:7470", .rdma = "10.0.0.1:7471",
				 .pool_bytes = 1u << 26, .free_bytes = 1u << 25,
				 .largest_free = 1u << 24, .generation = 1795476421556552,
				 .start_time_ms = 1795476421556, .version = "1.2.0",
				 .draining = 1, .regions = 12 }, back;
	char *out = NULL;

	ok(cluster_rec_encode(&r, &out) == 0 && cluster_rec_decode(out, strlen(out), &back) == 0 &&
	   !memcmp(&r, &back, sizeof r), "server record round trip: %s", out ? out : "");
	free(out);
	ok(cluster_rec_decode(S("{\"id\":\"a\",\"tcp\":\"h:1\",\"rdma\":\"\",\"pool_bytes\":10,"
				"\"free_bytes\":5,\"largest_free\":5,\"generation\":1,"
				"\"start_time_ms\":2,\"new_field\":[1]}"), &back) == 0 &&
	   back.free_bytes == 5 && !back.draining && !back.regions,
	   "a record without version, draining or regions (an older rmemd's), with a field "
	   "unknown to us");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *text = rec_with(bad[i].key, bad[i].val);

		ok(text && cluster_rec_decode(text, strlen(text), &back) == -EPROTO, "%s: EPROTO",
		   bad[i].why);
		free(text);
	}
	r.tcp[0] = '\0';
	ok(cluster_rec_encode(&r, &out) == -EINVAL && !out, "a record without tcp is not written");
}

/* A cluster name's record, and the compare-and-delete that drops a stale one. */
static void names(void)
{
	struct cluster_name n = { .server = "s2", .region = 17, .size = 1u << 20,
				  .generation = 1795476421556552 }, back;
	struct etcd_header h;
	bool done = true;
	char *out = NULL;

	enc_is(cluster_name_encode(&n, &out), &out,
	       "{\"server\":\"s2\",\"region\":17,\"size\":1048576,"
	       "\"generation\":1795476421556552}", "name record");
	ok(cluster_name_encode(&n, &out) == 0 && cluster_name_decode(out, strlen(out), &back) == 0 &&
	   !memcmp(&n, &back, sizeof n), "name record round trip");
	free(out);
	ok(cluster_name_decode(S("{\"server\":\"s1\",\"region\":0,\"size\":5,"
				 "\"generation\":0,\"later\":true}"), &back) == 0 &&
	   back.region == 0 && back.size == 5, "a claim (region 0), with a field unknown to us");
	ok(cluster_name_decode(S("{\"server\":\"s/1\",\"region\":1,\"size\":5,"
				 "\"generation\":0}"), &back) == -EPROTO, "a server id with '/': EPROTO");
	ok(cluster_name_decode(S("{\"server\":\"s1\",\"region\":-1,\"size\":5,"
				 "\"generation\":0}"), &back) == -EPROTO, "a negative region: EPROTO");
	ok(cluster_name_decode(S("{\"server\":\"s1\",\"size\":5,\"generation\":0}"), &back) ==
	   -EPROTO, "no region: EPROTO");
	ok(cluster_name_decode(S("[1]"), &back) == -EPROTO, "not an object: EPROTO");
	n.server[0] = '\0';
	ok(cluster_name_encode(&n, &out) == -EINVAL && !out, "a record without a server is not"
	   " written");
	enc_is(etcd_enc_delete_if(S("/n"), 42, &out), &out,
	       "{\"compare\":[{\"key\":\"L24=\",\"result\":\"EQUAL\",\"target\":\"MOD\","
	       "\"mod_revision\":\"42\"}],\"success\":[{\"request_delete_range\":"
	       "{\"key\":\"L24=\"}}]}", "compare-and-delete txn");
	ok(etcd_enc_delete_if(S("/n"), 0, &out) == -EINVAL && !out, "compare-and-delete of"
	   " revision 0: EINVAL");
	/* A name's record over its claim: put only if the claim is unchanged. */
	enc_is(etcd_enc_put_if(S("/n"), S("v"), 0, 42, &out), &out,
	       "{\"compare\":[{\"key\":\"L24=\",\"result\":\"EQUAL\",\"target\":\"MOD\","
	       "\"mod_revision\":\"42\"}],\"success\":[{\"request_put\":{\"key\":\"L24=\","
	       "\"value\":\"dg==\"}}],\"failure\":[{\"request_range\":{\"key\":\"L24=\"}}]}",
	       "compare-and-put txn");
	ok(etcd_enc_put_if(S("/n"), S("v"), 0, 0, &out) == -EINVAL && !out, "compare-and-put of"
	   " revision 0: EINVAL");
	/* A writer's mark in a record: and only while it holds its key. */
	enc_is(etcd_enc_put_if_guarded(S("/n"), S("v"), 0, 42, S("/w"), 7, &out), &out,
	       "{\"compare\":[{\"key\":\"L24=\",\"result\":\"EQUAL\",\"target\":\"MOD\","
	       "\"mod_revision\":\"42\"},{\"key\":\"L3c=\",\"result\":\"EQUAL\","
	       "\"target\":\"CREATE\",\"create_revision\":\"7\"}],\"success\":[{\"request_put\":"
	       "{\"key\":\"L24=\",\"value\":\"dg==\"}}],\"failure\":[{\"request_range\":"
	       "{\"key\":\"L24=\"}}]}", "compare-and-put txn guarded by a writer key");
	ok(etcd_enc_put_if_guarded(S("/n"), S("v"), 0, 42, S("/w"), 0, &out) == -EINVAL && !out &&
	   etcd_enc_put_if_guarded(S("/n"), S("v"), 0, 42, NULL, 0, 7, &out) == -EINVAL && !out,
	   "a guard of revision 0, or none: EINVAL");
	ok(etcd_dec_txn(S("{" HDR ",\"succeeded\":true,\"responses\":[{\"response_delete_range\":"
			  "{\"header\":{\"revision\":\"3\"},\"deleted\":\"1\"}}]}"), &h, &done) == 0 &&
	   done && h.revision == 2, "a txn that succeeded");
	ok(etcd_dec_txn(S("{" HDR "}"), &h, &done) == 0 && !done, "a txn that did not (left out)");
	ok(etcd_dec_txn(S("{" HDR ",\"succeeded\":\"yes\"}"), &h, &done) == -EPROTO,
	   "succeeded of the wrong type: EPROTO");
}

int main(void)
{
	requests();
	leases();
	keys();
	watch();
	errors();
	endpoints();
	urls();
	records();
	names();
	return tap_done();
}
