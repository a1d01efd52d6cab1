/*
 * etcd_client.h - calls to etcd v3 over its JSON gateway (HTTP/1.1 POSTs to
 * /v3/..., libcurl), with failover over a list of endpoints.  The JSON is
 * etcd_codec.h's; this file only moves it.
 *
 * Endpoints: "http://h1:2379,http://h2:2379" (http or https).  A call goes
 * to the endpoint that answered last; when it cannot be reached (refused,
 * reset, timed out) or answers that it cannot serve now (gRPC UNAVAILABLE or
 * DEADLINE_EXCEEDED: no leader, a member cut off from the others), the call
 * moves to the next endpoint, each tried at most once per pass (one pass a
 * call, unless etcd_client_set_patience allows more).  Timeouts
 * are short (the caller's timeout_ms for a whole request, connect included),
 * so a dead member costs one timeout and the next call starts from the
 * member that answered.
 *
 * TLS (https:// endpoints; struct etcd_tls): libcurl verifies the member's
 * certificate and host name always, against etcd_ca when set, and presents
 * etcd_cert with etcd_key when set.  With any TLS file set, every endpoint
 * must be https:// and nothing is ever sent over plain HTTP.
 *
 * Errors, as negative errno: -EHOSTUNREACH no endpoint answered, -EAGAIN
 * every member that answered said "not now", -ENOENT / -EINVAL / -EPERM /
 * -ENOSPC / -EACCES what etcd said (etcd_grpc_errno), -EPROTO a reply that is
 * not what the gateway sends, -ENOMEM.  TLS: -EBADE a member's certificate
 * does not verify (against etcd_ca), or etcd_ca is no CA file; -ENOKEY
 * etcd_cert or etcd_key cannot be read or used; -EKEYREJECTED a member
 * refused this client's certificate (expired, another CA's) or wanted one
 * and none was given.  A TLS failure of one member moves on to the next
 * like an unreachable one, but is the call's error when no member took it;
 * one of this client's own files is the call's error at once.
 * etcd_client_error() tells more, for a log line (with the file's path).
 *
 * Retrying a call that failed is not always a no-op: a put or a txn may have
 * been applied by a member whose answer was lost.  Puts are idempotent;
 * etcd_create's loser reads the key it lost to, so a caller can tell its own
 * earlier write (same value, same lease) from another's.
 *
 * Threads: call etcd_global_init() once before any thread uses a client
 * (libcurl's global init is not thread-safe everywhere).  A client is used
 * by one thread at a time; calls block for at most timeout_ms per endpoint.
 */
#ifndef RMEM_ETCD_CLIENT_H
#define RMEM_ETCD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_codec.h"
#include "etcd_endpoints.h"

#define ETCD_MAX_REPLY     (4u << 20)   /* a longer reply is -EPROTO */

struct etcd_client;

/* libcurl's global state, once per process (pthread_once).  0 or -ENOMEM. */
int etcd_global_init(void);

/* A client over list (checked as etcd_endpoints_parse does) with tls (NULL or
 * every path "": none; checked as etcd_tls_check does, each file it names
 * opened once); timeout_ms per request and endpoint.  0 and *out, -EINVAL
 * (why as above), -EBADE (etcd_ca) or -ENOKEY (etcd_cert, etcd_key) for a
 * file that cannot be opened (why names it), or -ENOMEM. */
int etcd_client_new(const char *list, const struct etcd_tls *tls, unsigned timeout_ms,
		    struct etcd_client **out, char *why, size_t why_len);
/* err is one of the TLS errors above. */
bool etcd_tls_errno(int err);
/* Accepts NULL. */
void etcd_client_free(struct etcd_client *c);
/* How long a call may keep going round the endpoints while one of them is
 * slow (timed out) or says "not now" (gRPC UNAVAILABLE: an election), each
 * tried at most once a pass, 100 ms between passes: 0 (the default) is one
 * pass.  Endpoints that refuse or reset end the call at the end of the pass
 * whatever the patience: a dead cluster is told at once, a busy one waited
 * for.  librmem gives its names client the application's timeout_ms. */
void etcd_client_set_patience(struct etcd_client *c, unsigned ms);

/* What went wrong in the last call that failed, e.g.
 * "http://127.0.0.1:2379: Couldn't connect to server". */
const char *etcd_client_error(const struct etcd_client *c);
/* The endpoint the next call goes to first. */
const char *etcd_client_endpoint(const struct etcd_client *c);

/* One POST of body to path ("/v3/kv/put"): 0 and the reply's body in *reply
 * (malloc'd, NUL-terminated, *reply_len bytes), or a negative errno. */
int etcd_call(struct etcd_client *c, const char *path, const char *body, char **reply,
	      size_t *reply_len);

/* ---- the calls, each one request and its reply (etcd_codec.h) ----------------- */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *ttl_out);
/* *ttl_out 0: etcd no longer knows the lease (expired or revoked). */
int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_out);
/* -ENOENT when the lease is gone already. */
int etcd_lease_revoke(struct etcd_client *c, int64_t id);
/* The lease's remaining TTL (-1: etcd no longer knows it) and the TTL it was
 * granted with (etcd_dec_lease_ttl); for rmemctl's listing. */
int etcd_lease_ttl(struct etcd_client *c, int64_t id, int64_t *ttl_out, int64_t *granted_out);
int etcd_put(struct etcd_client *c, const void *key, size_t key_len, const void *value,
	     size_t value_len, int64_t lease);
/* create-if-absent (etcd_enc_create): *created, or the key as it is. */
int etcd_create(struct etcd_client *c, const void *key, size_t key_len, const void *value,
		size_t value_len, int64_t lease, bool *created, struct etcd_kv *existing);
/* etcd_create, and the store revision of the write when *created (the
 * key's mod_revision then; 0 otherwise).  revision may be NULL. */
int etcd_create_rev(struct etcd_client *c, const void *key, size_t key_len, const void *value,
		    size_t value_len, int64_t lease, bool *created, struct etcd_kv *existing,
		    int64_t *revision);
/* Puts key = value (lease 0: none) only if its mod_revision is still
 * mod_revision (etcd_enc_put_if): *put, or the key as it is now in
 * *existing (zeroed: the key is gone).  Free existing with etcd_kv_free. */
int etcd_put_if(struct etcd_client *c, const void *key, size_t key_len, const void *value,
		size_t value_len, int64_t lease, int64_t mod_revision, bool *put,
		struct etcd_kv *existing);
/* etcd_put_if, and only while guard's create_revision is still guard_rev
 * (etcd_enc_put_if_guarded); *existing as etcd_put_if's. */
int etcd_put_if_guarded(struct etcd_client *c, const void *key, size_t key_len,
			const void *value, size_t value_len, int64_t lease, int64_t mod_revision,
			const void *guard, size_t guard_len, int64_t guard_rev, bool *put,
			struct etcd_kv *existing);
int etcd_range(struct etcd_client *c, const void *key, size_t key_len, bool prefix,
	       struct etcd_range *r);
int etcd_delete(struct etcd_client *c, const void *key, size_t key_len, bool prefix,
		int64_t *deleted);

/* Deletes key if its mod_revision is still mod_revision: *deleted says. */
int etcd_delete_if(struct etcd_client *c, const void *key, size_t key_len, int64_t mod_revision,
		   bool *deleted);

/* ---- watch: a stream of changes --------------------------------------------- */

struct etcd_watch_ops {
	/* Each message of the stream, in order (the first says created).
	 * Nonzero stops the watch (etcd_watch then returns 0). */
	int (*message)(void *arg, const struct etcd_watch_msg *m);
	/* Polled about once a second, more often while data flows (NULL: never);
	 * true stops the watch (etcd_watch returns 0). */
	bool (*stop)(void *arg);
	void *arg;
	/* The stream's socket as it opens (open true) and just before it
	 * closes (false) (NULL: not told), so that another thread can
	 * shutdown(2) it to end the watch at once: stop() is polled only about
	 * once a second while the stream is idle.  The callee must make the
	 * shutdown and the close exclude each other (a lock). */
	void (*sock)(void *arg, int fd, bool open);
};

/*
 * Watches key (every key under it with prefix) from start_revision (0: from
 * now), blocking the calling thread until ops says stop (0), the stream ends
 * or breaks (-ECONNRESET: resume from the last revision seen + 1, perhaps on
 * another endpoint; a canceled watch with compact_revision set means the
 * history is gone: read everything again, then watch from that read's
 * revision), no endpoint takes the stream (-EHOSTUNREACH), or a message the
 * codec refuses (-EPROTO) or an error of etcd (its errno).  Like every
 * call, it is one thread's: a watching thread has a client of its own.
 */
int etcd_watch(struct etcd_client *c, const void *key, size_t key_len, bool prefix,
	       int64_t start_revision, const struct etcd_watch_ops *ops);

#endif /* RMEM_ETCD_CLIENT_H */
