/*
 * etcd_codec.h - etcd v3's JSON gateway (etcd 3.4, grpc-gateway), encoded
 * and decoded as pure functions: request structs in, JSON text out; JSON
 * text in, result structs out.  No I/O (that is etcd_client.c), no globals,
 * no logging, so the codec is unit-tested and fuzzed on its own
 * (tests/unit/test_etcd_codec.c, tests/fuzz/fuzz_etcd.c).
 *
 * The gateway speaks proto3's JSON mapping with the proto field names:
 * int64 fields are JSON strings of decimal digits ("revision": "12"), bytes
 * fields (keys, values) are base64 (RFC 4648, with padding), and a field that
 * holds its default (0, false, "", an empty list) is left out.  So a missing
 * number decodes as 0 and a missing flag as false; a field that is there
 * must have the right type and range, or the whole reply is -EPROTO.  Fields
 * the codec does not know are ignored: a newer etcd may add some.  Integers
 * are also taken as plain JSON numbers, which the gateway accepts too.
 *
 * Encoders return 0 and a malloc'd NUL-terminated text in *out (the caller
 * frees it), or -ENOMEM, or -EINVAL for arguments etcd would refuse (an
 * empty key).  Decoders take the reply body as it came (len bytes, not
 * NUL-terminated), return 0, -EPROTO for anything malformed, or -ENOMEM;
 * what they fill is theirs to free with the matching *_free().
 *
 * Not thread-safe in any shared sense, and needs none: no state.
 */
#ifndef RMEM_ETCD_CODEC_H
#define RMEM_ETCD_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every reply's header: the store revision it was served at, and which
 * member of which cluster answered (uint64 in etcd). */
struct etcd_header {
	int64_t revision;
	uint64_t cluster_id;
	uint64_t member_id;
	uint64_t raft_term;
};

/* One key-value pair.  key and value are malloc'd bytes with one NUL after
 * them (so text values can be used as C strings; the lengths are the truth). */
struct etcd_kv {
	uint8_t *key;
	size_t key_len;
	uint8_t *value;
	size_t value_len;
	int64_t create_revision; /* 0 only in a DELETE event's kv */
	int64_t mod_revision;
	int64_t version;
	int64_t lease;           /* 0: no lease */
};

/* Longest key or value the codec accepts, either way (etcd's default
 * request limit is 1.5 MiB; ours are small). */
#define ETCD_MAX_BYTES (1u << 20)

/* ---- leases ---------------------------------------------------------------- */

/* /v3/lease/grant: {"TTL": ttl_s, "ID": 0 (etcd picks)}. */
int etcd_enc_lease_grant(int64_t ttl_s, char **out);
/* The granted id (> 0) and TTL in seconds (> 0). */
int etcd_dec_lease_grant(const char *text, size_t len, struct etcd_header *h, int64_t *id,
			 int64_t *ttl_s);

/* /v3/lease/keepalive and /v3/lease/revoke: {"ID": id}. */
int etcd_enc_lease_id(int64_t id, char **out);
/*
 * A keepalive's one answer, {"result": {...}}: *ttl_s is the lease's new
 * TTL, or 0 when etcd no longer knows the lease (it expired or was revoked:
 * the gateway then leaves TTL out).  The ID must be the one asked about.
 * A stream error ({"error": {...}}) is -EPROTO here; the transport reads it
 * with etcd_dec_error.
 */
int etcd_dec_lease_keepalive(const char *text, size_t len, int64_t id, struct etcd_header *h,
			     int64_t *ttl_s);

/*
 * /v3/lease/timetolive, asked with etcd_enc_lease_id: the lease's remaining
 * TTL in *ttl_s (-1 when etcd no longer knows it: the gateway then says
 * "TTL": "-1") and the TTL it was granted with in *granted_s (0 then).  The
 * ID must be the one asked about.
 */
int etcd_dec_lease_ttl(const char *text, size_t len, int64_t id, struct etcd_header *h,
		       int64_t *ttl_s, int64_t *granted_s);

/* ---- keys ------------------------------------------------------------------- */

/* /v3/kv/put: key = value, attached to lease (0: none). */
int etcd_enc_put(const void *key, size_t key_len, const void *value, size_t value_len,
		 int64_t lease, char **out);

/* /v3/kv/range: the key alone, or with prefix set every key that starts with
 * it (range_end = the key with its last byte that is not 0xff plus one). */
int etcd_enc_range(const void *key, size_t key_len, bool prefix, char **out);
/* /v3/kv/deleterange, the same selection. */
int etcd_enc_delete(const void *key, size_t key_len, bool prefix, char **out);

struct etcd_range {
	struct etcd_header header;
	struct etcd_kv *kvs;
	size_t nkvs;
	int64_t count; /* keys in the range (may exceed nkvs with a limit) */
	bool more;
};
int etcd_dec_range(const char *text, size_t len, struct etcd_range *r);
void etcd_range_free(struct etcd_range *r);

/* Replies that carry only the header (put, revoke) ... */
int etcd_dec_header_only(const char *text, size_t len, struct etcd_header *h);
/* ... and deleterange's: how many keys went. */
int etcd_dec_delete(const char *text, size_t len, struct etcd_header *h, int64_t *deleted);

/*
 * /v3/kv/txn that creates key = value (attached to lease, 0: none) only if
 * the key does not exist (compare create_revision == 0); otherwise it reads
 * the key, so that the loser learns who won in the same round trip.
 */
int etcd_enc_create(const void *key, size_t key_len, const void *value, size_t value_len,
		    int64_t lease, char **out);
/* That txn's answer: *created, and when not created the key as it is in
 * *existing (zeroed when it vanished in between).  Free with etcd_kv_free. */
int etcd_dec_create(const char *text, size_t len, struct etcd_header *h, bool *created,
		    struct etcd_kv *existing);

/*
 * /v3/kv/txn that puts key = value (lease 0: none) only if the key's
 * mod_revision is still mod_revision (> 0): a write that needs the key as
 * it was written then, e.g. a name's record over its claim, which must not
 * land once the claim's lease has ended and another creator holds the
 * name.  Otherwise it reads the key; etcd_dec_create reads the answer
 * (*created: the put was done).
 */
int etcd_enc_put_if(const void *key, size_t key_len, const void *value, size_t value_len,
		    int64_t lease, int64_t mod_revision, char **out);
/* The same, and only while guard's create_revision is still guard_rev (>
 * 0): a key the writer made then and holds since (a writer key: gone, or
 * made again by another, it compares unequal), so that a writer that lost
 * it cannot write key even if it does not know. */
int etcd_enc_put_if_guarded(const void *key, size_t key_len, const void *value,
			    size_t value_len, int64_t lease, int64_t mod_revision,
			    const void *guard, size_t guard_len, int64_t guard_rev, char **out);

void etcd_kv_free(struct etcd_kv *kv);

/*
 * /v3/kv/txn that deletes key only if its mod_revision is still
 * mod_revision (so a reader that found a record stale never deletes a newer
 * one written meanwhile); etcd_dec_txn reads any txn's *succeeded.
 */
int etcd_enc_delete_if(const void *key, size_t key_len, int64_t mod_revision, char **out);
int etcd_dec_txn(const char *text, size_t len, struct etcd_header *h, bool *succeeded);

/* ---- watch (a stream of messages, one JSON text each) ------------------------ */

/* /v3/watch's create_request: every change to key (or to keys with that
 * prefix) from start_revision on (0: from now). */
int etcd_enc_watch_create(const void *key, size_t key_len, bool prefix, int64_t start_revision,
			  char **out);

enum etcd_event_type { ETCD_EVENT_PUT = 0, ETCD_EVENT_DELETE = 1 };
struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv;
};
struct etcd_watch_msg {
	struct etcd_header header;
	int64_t watch_id;
	bool created;
	bool canceled;
	int64_t compact_revision; /* > 0: history before it is gone (read all again) */
	struct etcd_event *events;
	size_t nevents;
};
/* One message of the stream: {"result": {...}}. */
int etcd_dec_watch(const char *text, size_t len, struct etcd_watch_msg *m);
void etcd_watch_msg_free(struct etcd_watch_msg *m);

/* ---- errors -------------------------------------------------------------------- */

/*
 * The body of a failed call: {"error": "...", "code": N, "message": "..."}
 * (unary calls) or {"error": {"grpc_code": N, "message": "...", ...}}
 * (streams).  *code is the gRPC status code; message is copied, truncated,
 * with anything unprintable replaced, so it can go to a log as it is.
 */
int etcd_dec_error(const char *text, size_t len, int *code, char *message, size_t message_len);

/* A gRPC status code as a negative errno: NOT_FOUND -ENOENT, INVALID_ARGUMENT
 * -EINVAL, FAILED_PRECONDITION -EPERM, RESOURCE_EXHAUSTED -ENOSPC,
 * UNAVAILABLE and DEADLINE_EXCEEDED -EAGAIN (another member may do),
 * UNAUTHENTICATED and PERMISSION_DENIED -EACCES, others -EPROTO. */
int etcd_grpc_errno(int code);

#endif /* RMEM_ETCD_CODEC_H */
