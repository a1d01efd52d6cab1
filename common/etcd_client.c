/*
 * etcd_client.c - see etcd_client.h.
 *
 * One libcurl easy handle per client, kept between calls so that the
 * connection to the member that answers stays open (a keepalive every
 * second costs no new TCP handshake).  Blocking calls with short timeouts:
 * the client is meant for a thread of its own (rmemd's cluster agent), never
 * for an event loop.  The watch stream will use the same endpoints and
 * failover over a handle of its own (a stream holds its connection).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "etcd_client.h"

struct etcd_client {
	struct etcd_endpoints eps;
	size_t cur;                 /* the endpoint tried first */
	unsigned timeout_ms;
	unsigned patience_ms;       /* etcd_client_set_patience */
	CURL *curl;
	struct curl_slist *headers;
	struct etcd_tls tls;        /* "" each: none */
	bool tls_on;                /* a TLS file is set: https:// only */
	char curl_err[CURL_ERROR_SIZE];
	char error[2 * ETCD_TLS_PATH_MAX + 256];
	char tls_error[2 * ETCD_TLS_PATH_MAX + 256]; /* the last TLS failure's */
};

/* The reply as it arrives. */
struct sink {
	char *data;
	size_t len, cap;
	bool too_long;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int etcd_global_init(void)
{
	pthread_once(&global_once, global_init);
	return global_rc == CURLE_OK ? 0 : -ENOMEM;
}

/* A TLS file that cannot be opened, or is a directory: err, the file named
 * in why.  (Whether its content is a certificate is libcurl's to say, on
 * the first call.) */
static int check_file(const char *what, const char *path, int err, char *why, size_t why_len)
{
	struct stat st;
	int fd;

	if (!path[0])
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, why_len, "%s %s: %s", what, path, strerror(errno));
		return err;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "%s %s: not a file", what, path);
		close(fd);
		return err;
	}
	close(fd);
	return 0;
}

int etcd_client_new(const char *list, const struct etcd_tls *tls, unsigned timeout_ms,
		    struct etcd_client **out, char *why, size_t why_len)
{
	struct etcd_client *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	rc = etcd_endpoints_parse(list, &c->eps, why, why_len);
	if (rc == 0)
		rc = etcd_tls_check(&c->eps, tls, why, why_len);
	if (rc < 0)
		goto fail;
	if (etcd_tls_any(tls)) {
		c->tls = *tls;
		c->tls_on = true;
		rc = check_file("etcd_ca", c->tls.ca, -EBADE, why, why_len);
		if (rc == 0)
			rc = check_file("etcd_cert", c->tls.cert, -ENOKEY, why, why_len);
		if (rc == 0)
			rc = check_file("etcd_key", c->tls.key, -ENOKEY, why, why_len);
		if (rc < 0)
			goto fail;
	}
	rc = -ENOMEM;
	if (etcd_global_init() < 0)
		goto fail;
	c->timeout_ms = timeout_ms ? timeout_ms : 1000;
	c->curl = curl_easy_init();
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!c->curl || !c->headers)
		goto fail;
	*out = c;
	return 0;
fail:
	etcd_client_free(c);
	return rc;
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->headers);
	free(c);
}

const char *etcd_client_error(const struct etcd_client *c)
{
	return c->error[0] ? c->error : "no error";
}

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->eps.url[c->cur];
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb;

	if (s->len + n + 1 > ETCD_MAX_REPLY) {
		s->too_long = true;
		return 0; /* stops the transfer */
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 1024;
		char *p;

		while (cap < s->len + n + 1)
			cap *= 2;
		p = realloc(s->data, cap);
		if (!p)
			return 0;
		s->data = p;
		s->cap = cap;
	}
	memcpy(s->data + s->len, ptr, n);
	s->len += n;
	s->data[s->len] = '\0';
	return n;
}

/* What every request of c says about TLS on handle h (errbuf:
 * CURL_ERROR_SIZE bytes, libcurl's words for a failure). */
static void tls_opts(const struct etcd_client *c, CURL *h, char *errbuf)
{
	errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	/* With TLS files set, plain HTTP is never spoken, whatever a list says. */
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, c->tls_on ? "https" : "http,https");
	/* libcurl's defaults, said here: an https:// member proves who it is. */
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->tls.ca[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, c->tls.ca);
	if (c->tls.cert[0]) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->tls.cert);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->tls.key);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

bool etcd_tls_errno(int err)
{
	return err == -EBADE || err == -ENOKEY || err == -EKEYREJECTED;
}

/*
 * A transfer to endpoint ep that failed with cc (libcurl's detail): 0 when
 * it is no TLS failure, else its errno (etcd_client.h), the words in
 * c->tls_error, *hard when every member would fail the same (this
 * client's own files).  A member that refuses this client's certificate
 * does so after TLS 1.3's handshake is over for the client: the refusal
 * is an alert, or the connection closing before any reply; on a new
 * connection to an https:// member that is read as the refusal.
 */
static int tls_failure(struct etcd_client *c, CURL *h, size_t ep, CURLcode cc,
		       const char *detail, bool *hard)
{
	const char *url = c->eps.url[ep];
	long fresh = 0;

	*hard = false;
	if (!*detail)
		detail = curl_easy_strerror(cc);
	switch (cc) {
	case CURLE_SSL_CACERT_BADFILE:
		*hard = true;
		snprintf(c->tls_error, sizeof c->tls_error, "etcd_ca %s: not a CA certificate "
			 "file (%s)", c->tls.ca[0] ? c->tls.ca : "(the system's)", detail);
		return -EBADE;
	case CURLE_PEER_FAILED_VERIFICATION:
		snprintf(c->tls_error, sizeof c->tls_error, "%s: the member's certificate does not "
			 "verify against %s%s (%s)", url, c->tls.ca[0] ? "etcd_ca " : "",
			 c->tls.ca[0] ? c->tls.ca : "the system's CAs (no etcd_ca)", detail);
		return -EBADE;
	case CURLE_SSL_CERTPROBLEM:
		*hard = true;
		snprintf(c->tls_error, sizeof c->tls_error, "etcd_cert %s or etcd_key %s cannot "
			 "be used (%s)", c->tls.cert, c->tls.key, detail);
		return -ENOKEY;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2: /* the alert met while HTTP/2 read the member's preface
			   * (test_etcd_tls #17 once: "Error in the HTTP2 framing layer") */
		if (strncmp(url, "https://", 8))
			return 0;
		curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &fresh);
		if (!strstr(detail, " alert ") && (cc == CURLE_SSL_CONNECT_ERROR || !fresh))
			return 0;
		if (c->tls.cert[0])
			snprintf(c->tls_error, sizeof c->tls_error, "%s: the member refused etcd_cert "
				 "%s (expired, or not signed by a CA it trusts): %s", url, c->tls.cert,
				 detail);
		else
			snprintf(c->tls_error, sizeof c->tls_error, "%s: the member refused the TLS "
				 "handshake: it wants a client certificate and no etcd_cert was given "
				 "(%s)", url, detail);
		return -EKEYREJECTED;
	default:
		return 0;
	}
}

/*
 * One POST to one endpoint.  Returns 0 with the body (HTTP 200), 1 when the
 * next endpoint should be tried (not reached, or "not now"), or a negative
 * errno that another member would answer the same way.
 */
static int post_one(struct etcd_client *c, size_t ep, const char *path, const char *body,
		    struct sink *s, int *soft_err)
{
	char url[ETCD_ENDPOINT_MAX + 64];
	char msg[160];
	long status = 0;
	CURLcode cc;
	int code = 0;

	snprintf(url, sizeof url, "%s%s", c->eps.url[ep], path);
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	/* Threads: no SIGALRM for timeouts (we use the threaded resolver). */
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	tls_opts(c, c->curl, c->curl_err);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, s);
	s->len = 0;
	s->too_long = false;
	cc = curl_easy_perform(c->curl);
	if (s->too_long) {
		snprintf(c->error, sizeof c->error, "%s: reply longer than %u bytes",
			 c->eps.url[ep], ETCD_MAX_REPLY);
		return -EPROTO;
	}
	if (cc != CURLE_OK) {
		bool hard;
		int tls = tls_failure(c, c->curl, ep, cc, c->curl_err, &hard);

		if (tls) {
			snprintf(c->error, sizeof c->error, "%s", c->tls_error);
			if (hard)
				return tls;
			*soft_err = tls; /* another member may take this client */
			return 1;
		}
		snprintf(c->error, sizeof c->error, "%s: %s", c->eps.url[ep], curl_easy_strerror(cc));
		if (cc == CURLE_OUT_OF_MEMORY || (cc == CURLE_WRITE_ERROR && !s->too_long))
			return -ENOMEM;
		/* Reached but slow is not gone: etcd_call may come back to it. */
		*soft_err = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
		return 1;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (!s->data) {
		on_data((char *)"", 1, 0, s); /* an empty body is a body */
		if (!s->data)
			return -ENOMEM;
	}
	/* A stream's error comes with status 200 too: look for one either way. */
	if (status != 200 || (s->len > 9 && !strncmp(s->data, "{\"error\"", 8))) {
		if (etcd_dec_error(s->data, s->len, &code, msg, sizeof msg) < 0) {
			snprintf(c->error, sizeof c->error, "%s: HTTP %ld without an etcd error",
				 c->eps.url[ep], status);
			if (status == 200)
				return 0; /* not an error after all: the decoder will judge */
			*soft_err = -EHOSTUNREACH;
			return status >= 500 ? 1 : -EPROTO;
		}
		snprintf(c->error, sizeof c->error, "%s: %s (gRPC code %d)", c->eps.url[ep], msg,
			 code);
		if (etcd_grpc_errno(code) == -EAGAIN) {
			*soft_err = -EAGAIN;
			return 1;
		}
		return etcd_grpc_errno(code);
	}
	return 0;
}

void etcd_client_set_patience(struct etcd_client *c, unsigned ms)
{
	c->patience_ms = ms;
}

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int etcd_call(struct etcd_client *c, const char *path, const char *body, char **reply,
	      size_t *reply_len)
{
	struct sink s = { 0 };
	int rc = 1, tls_err = 0;
	bool any_answer = false, slow = true;
	int64_t start = mono_ms();

	*reply = NULL;
	*reply_len = 0;
	/* A pass tries each endpoint once.  Another pass only while one was
	 * slow or said "not now" (an election, a starved member) and the
	 * patience lasts; members that all refuse are down, and say so at once. */
	for (int pass = 0; rc == 1 && slow; pass++) {
		if (pass) {
			struct timespec pause = { 0, 100 * 1000 * 1000 };

			if (mono_ms() - start + 100 >= (int64_t)c->patience_ms)
				break;
			nanosleep(&pause, NULL);
		}
		slow = false;
		for (size_t i = 0; i < c->eps.n && rc == 1; i++) {
			size_t ep = (c->cur + i) % c->eps.n;
			int err = -EHOSTUNREACH;

			rc = post_one(c, ep, path, body, &s, &err);
			if (rc == 1) {
				if (err == -EAGAIN)
					any_answer = true;
				if (etcd_tls_errno(err) && !tls_err)
					tls_err = err;
				slow = slow || err == -EAGAIN || err == -ETIMEDOUT;
				continue;
			}
			c->cur = ep; /* it answered: start there next time */
		}
	}
	/* No member took the call: a TLS refusal says more than the rest. */
	if (rc == 1 && tls_err)
		snprintf(c->error, sizeof c->error, "%s", c->tls_error);
	if (rc == 1)
		rc = tls_err ? tls_err : any_answer ? -EAGAIN : -EHOSTUNREACH;
	if (rc < 0) {
		free(s.data);
		return rc;
	}
	c->error[0] = '\0';
	*reply = s.data;
	*reply_len = s.len;
	return 0;
}

/* ---- the calls ------------------------------------------------------------------- */

/*
 * One call: the encoder fills body, post() sends it and frees it, the
 * decoder reads reply, decoded() frees it.  Each call below is then its
 * encoder, its path and its decoder.
 */
struct req {
	const char *path;
	char *body, *reply;
	size_t len;
};

/* rc is the encoder's status; 0 with q->reply, or the first failure. */
static int post(struct etcd_client *c, struct req *q, int rc)
{
	q->reply = NULL;
	q->len = 0;
	if (rc == 0)
		rc = etcd_call(c, q->path, q->body, &q->reply, &q->len);
	free(q->body);
	q->body = NULL;
	return rc;
}

/* rc is the decoder's verdict on q->reply. */
static int decoded(struct etcd_client *c, struct req *q, int rc)
{
	free(q->reply);
	q->reply = NULL;
	if (rc == -EPROTO)
		snprintf(c->error, sizeof c->error, "%s%s: a reply the codec refused",
			 etcd_client_endpoint(c), q->path);
	return rc;
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *ttl_out)
{
	struct req q = { .path = "/v3/lease/grant" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_lease_grant(ttl_s, &q.body));

	*id = *ttl_out = 0;
	return rc ? rc : decoded(c, &q, etcd_dec_lease_grant(q.reply, q.len, &h, id, ttl_out));
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_out)
{
	struct req q = { .path = "/v3/lease/keepalive" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_lease_id(id, &q.body));

	*ttl_out = 0;
	return rc ? rc : decoded(c, &q, etcd_dec_lease_keepalive(q.reply, q.len, id, &h, ttl_out));
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id)
{
	struct req q = { .path = "/v3/lease/revoke" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_lease_id(id, &q.body));

	return rc ? rc : decoded(c, &q, etcd_dec_header_only(q.reply, q.len, &h));
}

int etcd_lease_ttl(struct etcd_client *c, int64_t id, int64_t *ttl_out, int64_t *granted_out)
{
	struct req q = { .path = "/v3/lease/timetolive" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_lease_id(id, &q.body));

	*ttl_out = -1;
	*granted_out = 0;
	return rc ? rc : decoded(c, &q, etcd_dec_lease_ttl(q.reply, q.len, id, &h, ttl_out,
							   granted_out));
}

int etcd_put(struct etcd_client *c, const void *key, size_t key_len, const void *value,
	     size_t value_len, int64_t lease)
{
	struct req q = { .path = "/v3/kv/put" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_put(key, key_len, value, value_len, lease, &q.body));

	return rc ? rc : decoded(c, &q, etcd_dec_header_only(q.reply, q.len, &h));
}

int etcd_create_rev(struct etcd_client *c, const void *key, size_t key_len, const void *value,
		    size_t value_len, int64_t lease, bool *created, struct etcd_kv *existing,
		    int64_t *revision)
{
	struct req q = { .path = "/v3/kv/txn" };
	struct etcd_header h = { 0 };
	int rc = post(c, &q, etcd_enc_create(key, key_len, value, value_len, lease, &q.body));

	*created = false;
	memset(existing, 0, sizeof *existing);
	rc = rc ? rc : decoded(c, &q, etcd_dec_create(q.reply, q.len, &h, created, existing));
	/* A txn that wrote is the store's revision it made: the key's
	 * create_revision and mod_revision. */
	if (revision)
		*revision = rc == 0 && *created ? h.revision : 0;
	return rc;
}

int etcd_create(struct etcd_client *c, const void *key, size_t key_len, const void *value,
		size_t value_len, int64_t lease, bool *created, struct etcd_kv *existing)
{
	return etcd_create_rev(c, key, key_len, value, value_len, lease, created, existing, NULL);
}

int etcd_put_if(struct etcd_client *c, const void *key, size_t key_len, const void *value,
		size_t value_len, int64_t lease, int64_t mod_revision, bool *put,
		struct etcd_kv *existing)
{
	struct req q = { .path = "/v3/kv/txn" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_put_if(key, key_len, value, value_len, lease, mod_revision,
					     &q.body));

	*put = false;
	memset(existing, 0, sizeof *existing);
	return rc ? rc : decoded(c, &q, etcd_dec_create(q.reply, q.len, &h, put, existing));
}

int etcd_put_if_guarded(struct etcd_client *c, const void *key, size_t key_len,
			const void *value, size_t value_len, int64_t lease, int64_t mod_revision,
			const void *guard, size_t guard_len, int64_t guard_rev, bool *put,
			struct etcd_kv *existing)
{
	struct req q = { .path = "/v3/kv/txn" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_put_if_guarded(key, key_len, value, value_len, lease,
						     mod_revision, guard, guard_len, guard_rev,
						     &q.body));

	*put = false;
	memset(existing, 0, sizeof *existing);
	return rc ? rc : decoded(c, &q, etcd_dec_create(q.reply, q.len, &h, put, existing));
}

int etcd_range(struct etcd_client *c, const void *key, size_t key_len, bool prefix,
	       struct etcd_range *r)
{
	struct req q = { .path = "/v3/kv/range" };
	int rc = post(c, &q, etcd_enc_range(key, key_len, prefix, &q.body));

	memset(r, 0, sizeof *r);
	return rc ? rc : decoded(c, &q, etcd_dec_range(q.reply, q.len, r));
}

int etcd_delete(struct etcd_client *c, const void *key, size_t key_len, bool prefix,
		int64_t *deleted)
{
	struct req q = { .path = "/v3/kv/deleterange" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_delete(key, key_len, prefix, &q.body));

	*deleted = 0;
	return rc ? rc : decoded(c, &q, etcd_dec_delete(q.reply, q.len, &h, deleted));
}

int etcd_delete_if(struct etcd_client *c, const void *key, size_t key_len, int64_t mod_revision,
		   bool *deleted)
{
	struct req q = { .path = "/v3/kv/txn" };
	struct etcd_header h;
	int rc = post(c, &q, etcd_enc_delete_if(key, key_len, mod_revision, &q.body));

	*deleted = false;
	return rc ? rc : decoded(c, &q, etcd_dec_txn(q.reply, q.len, &h, deleted));
}

/* ---- watch -------------------------------------------------------------------------- */

/* The stream as it arrives: whole lines are messages. */
struct stream {
	const struct etcd_watch_ops *ops;
	struct sink buf;
	int rc;          /* 1: go on; 0: stopped by ops; < 0: failed */
	bool got_any;    /* a message came: the endpoint took the stream */
	int tls_err;     /* a TLS failure's errno (etcd_tls_errno) */
	char error[160];
	char curl_err[CURL_ERROR_SIZE];
};

/* One line: a message, or a stream error. */
static void stream_line(struct stream *st, const char *line, size_t len)
{
	struct etcd_watch_msg m;
	int code, rc;

	if (len == 0)
		return;
	st->got_any = true;
	rc = etcd_dec_watch(line, len, &m);
	if (rc < 0) {
		if (etcd_dec_error(line, len, &code, st->error, sizeof st->error) == 0)
			st->rc = etcd_grpc_errno(code) == -EAGAIN ? -ECONNRESET : etcd_grpc_errno(code);
		else
			st->rc = rc;
		return;
	}
	if (st->ops->message(st->ops->arg, &m))
		st->rc = 0;
	etcd_watch_msg_free(&m);
}

static size_t on_stream(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct stream *st = arg;
	size_t n = size * nmemb, start = 0;
	char *nl;

	if (on_data(ptr, size, nmemb, &st->buf) != n) {
		st->rc = st->buf.too_long ? -EPROTO : -ENOMEM;
		return 0;
	}
	while (st->rc == 1 && (nl = memchr(st->buf.data + start, '\n', st->buf.len - start))) {
		size_t len = (size_t)(nl - (st->buf.data + start));

		stream_line(st, st->buf.data + start, len);
		start += len + 1;
	}
	memmove(st->buf.data, st->buf.data + start, st->buf.len - start);
	st->buf.len -= start;
	st->buf.data[st->buf.len] = '\0';
	return st->rc == 1 ? n : 0;
}

static curl_socket_t on_open(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct stream *st = arg;
	curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);

	(void)purpose;
	if (fd != CURL_SOCKET_BAD && st->ops->sock)
		st->ops->sock(st->ops->arg, fd, true);
	return fd;
}

static int on_close(void *arg, curl_socket_t fd)
{
	struct stream *st = arg;

	if (st->ops->sock)
		st->ops->sock(st->ops->arg, fd, false);
	return close(fd);
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct stream *st = arg;

	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	if (st->rc == 1 && st->ops->stop && st->ops->stop(st->ops->arg))
		st->rc = 0;
	return st->rc != 1; /* nonzero aborts the transfer */
}

/* One stream from one endpoint, on a handle of its own. */
static int watch_one(struct etcd_client *c, size_t ep, const char *body, struct stream *st)
{
	char url[ETCD_ENDPOINT_MAX + 16];
	CURL *h = curl_easy_init();
	CURLcode cc;

	if (!h)
		return -ENOMEM;
	snprintf(url, sizeof url, "%s/v3/watch", c->eps.url[ep]);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	tls_opts(c, h, st->curl_err);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
	/* No timeout for the whole stream; a member that vanishes without a
	 * reset is found by TCP keepalives within a few seconds. */
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 2L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, st);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, st);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, st);
	curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, on_close);
	curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, st);
	cc = curl_easy_perform(h);
	if (st->rc == 1 && cc != CURLE_OK && !st->got_any) {
		bool hard;

		st->tls_err = tls_failure(c, h, ep, cc, st->curl_err, &hard);
		if (st->tls_err) {
			curl_easy_cleanup(h);
			snprintf(c->error, sizeof c->error, "%s", c->tls_error);
			return hard ? st->tls_err : 1;
		}
	}
	curl_easy_cleanup(h);
	if (st->rc != 1)
		return st->rc;  /* stopped (0), or what a line said */
	snprintf(c->error, sizeof c->error, "%s/v3/watch: %s", c->eps.url[ep],
		 cc == CURLE_OK ? "the stream ended" : curl_easy_strerror(cc));
	return st->got_any ? -ECONNRESET : 1; /* 1: try the next endpoint */
}

int etcd_watch(struct etcd_client *c, const void *key, size_t key_len, bool prefix,
	       int64_t start_revision, const struct etcd_watch_ops *ops)
{
	char *body;
	int rc = etcd_enc_watch_create(key, key_len, prefix, start_revision, &body), tls_err = 0;

	for (size_t i = 0; rc == 0 && i < c->eps.n; i++) {
		size_t ep = (c->cur + i) % c->eps.n;
		struct stream st = { .ops = ops, .rc = 1 };

		rc = watch_one(c, ep, body, &st);
		if (rc == 1 && st.tls_err && !tls_err)
			tls_err = st.tls_err;
		if (st.error[0])
			snprintf(c->error, sizeof c->error, "%s/v3/watch: %s", c->eps.url[ep],
				 st.error);
		free(st.buf.data);
		/* Stopped meanwhile (its socket shut down, perhaps): no other
		 * endpoint. */
		if (rc != 0 && ops->stop && ops->stop(ops->arg)) {
			free(body);
			return 0;
		}
		if (rc == 1) {
			rc = 0;
			continue;
		}
		if (rc != -ECONNRESET && rc != -EHOSTUNREACH)
			c->cur = ep;
		else
			c->cur = (ep + 1) % c->eps.n; /* resume elsewhere */
		free(body);
		return rc;
	}
	free(body);
	if (rc == 0 && tls_err)
		snprintf(c->error, sizeof c->error, "%s", c->tls_error);
	return rc < 0 ? rc : tls_err ? tls_err : -EHOSTUNREACH;
}
