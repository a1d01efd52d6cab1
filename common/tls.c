/*
 * tls.c - see tls.h.  The only file of rmem that calls OpenSSL's SSL API.
 *
 * Records: OpenSSL seals at most 16 KiB per record and, with partial
 * writes on, SSL_write() returns after each; tls_writev() loops so that
 * its caller sees one call per batch as with sendmsg().  Small pieces of
 * an iovec (frame headers, small payloads) are gathered into one record
 * rather than one record each (a record costs 22 bytes and a write()).
 * Reads: read-ahead into a 64 KiB buffer, so that a burst of records is
 * one read() rather than two per record; what it holds is invisible to
 * poll(), hence tls_pending().
 */
#include "tls.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "clock.h"

#define GATHER_CAP   (16u << 10)  /* one record's worth */
#define GATHER_SMALL 4096u        /* pieces below this are gathered */
#define READ_BUF     (64u << 10)

struct tls_ctx {
	SSL_CTX *ssl_ctx;
	bool server;
};

struct tls_conn {
	SSL *ssl;
	bool server;
	char err[192];
	uint8_t gather[GATHER_CAP];
};

/*
 * OpenSSL writes to the socket with write(), which raises SIGPIPE on a
 * stream the peer has closed; a library must not (tcp.h: MSG_NOSIGNAL).
 * So the writes run with SIGPIPE blocked in this thread, and a SIGPIPE
 * they raised is taken before it is unblocked (one that was already
 * pending is left to the application).
 */
struct sigpipe_guard {
	sigset_t old;
	bool pending_before;
};

static void sigpipe_block(struct sigpipe_guard *g)
{
	sigset_t pipe_set, pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	g->pending_before = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
}

static void sigpipe_restore(const struct sigpipe_guard *g)
{
	const struct timespec zero = { 0, 0 };
	sigset_t pipe_set, pending;
	int saved = errno;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	if (!g->pending_before && sigismember(&pending, SIGPIPE))
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	errno = saved;
}

/* The next piece to write from iov[0..cnt): a run of small pieces gathered
 * into t->gather, or one large piece as it is.  The same for the same
 * bytes, so that a write repeated after -EAGAIN offers the same record. */
static const void *next_piece(struct tls_conn *t, const struct iovec *iov, int cnt,
			      size_t *len, int *used)
{
	size_t n = 0;
	int i = 0;

	if (iov[0].iov_len >= GATHER_SMALL || cnt == 1) {
		*len = iov[0].iov_len;
		*used = 1;
		return iov[0].iov_base;
	}
	for (; i < cnt && iov[i].iov_len < GATHER_SMALL && n + iov[i].iov_len <= GATHER_CAP; i++) {
		memcpy(t->gather + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	*len = n;
	*used = i;
	return t->gather;
}

/* The OpenSSL error queue's oldest entry as text, and the queue cleared. */
static void take_ssl_error(char *buf, size_t len, unsigned long *code)
{
	unsigned long e = ERR_peek_error();

	if (code)
		*code = e;
	if (buf && len) {
		if (e)
			ERR_error_string_n(e, buf, len);
		else
			snprintf(buf, len, "no detail from OpenSSL");
	}
	ERR_clear_error();
}

/* A file of ours that OpenSSL would not take: -ENOKEY, the file named. */
static int file_error(char *why, size_t len, const char *what, const char *path)
{
	char detail[160];

	take_ssl_error(detail, sizeof detail, NULL);
	if (why && len)
		snprintf(why, len, "%s \"%s\" cannot be used: %s", what, path, detail);
	return -ENOKEY;
}

static bool set(const char *s)
{
	return s && s[0];
}

static int load_files(SSL_CTX *c, const struct tls_config *cfg, char *why, size_t len)
{
	if (set(cfg->cert) && SSL_CTX_use_certificate_chain_file(c, cfg->cert) != 1)
		return file_error(why, len, "certificate", cfg->cert);
	if (set(cfg->key) && SSL_CTX_use_PrivateKey_file(c, cfg->key, SSL_FILETYPE_PEM) != 1)
		return file_error(why, len, "key", cfg->key);
	if (set(cfg->cert) && set(cfg->key) && SSL_CTX_check_private_key(c) != 1)
		return file_error(why, len, "key (not the certificate's)", cfg->key);
	if (set(cfg->ca)) {
		if (SSL_CTX_load_verify_locations(c, cfg->ca, NULL) != 1)
			return file_error(why, len, "CA", cfg->ca);
		/* A server asks for certificates of this CA only. */
		if (cfg->server) {
			STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca);

			if (!names)
				return file_error(why, len, "CA", cfg->ca);
			SSL_CTX_set_client_CA_list(c, names);
		}
	} else if (!cfg->server && SSL_CTX_set_default_verify_paths(c) != 1) {
		return file_error(why, len, "CA", "(the system's)");
	}
	return 0;
}

int tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **out, char *why, size_t len)
{
	struct tls_ctx *t = calloc(1, sizeof *t);
	SSL_CTX *c = NULL;
	int mode = SSL_VERIFY_PEER, rc;

	*out = NULL;
	if (why && len)
		why[0] = 0;
	if (!t)
		return -ENOMEM;
	c = SSL_CTX_new(cfg->server ? TLS_server_method() : TLS_client_method());
	if (!c) {
		free(t);
		take_ssl_error(why, len, NULL);
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
	/* AES-128-GCM first, and the server's order wins: 3.5 GB/s against
	 * AES-256-GCM's 2.7 on this VM (openssl speed -evp, 16 KiB blocks),
	 * about 80 us less per MiB on each side; the kernel seals it too. */
	SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
				 "TLS_CHACHA20_POLY1305_SHA256");
	SSL_CTX_set_options(c, SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(c, 1);
	SSL_CTX_set_default_read_buffer_len(c, READ_BUF);
	/* No resumption: rmem's resume is its own (a new handshake), and a
	 * ticket the client never reads would be a record in its way. */
	SSL_CTX_set_num_tickets(c, 0);
	SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
	if (cfg->ktls)
		SSL_CTX_set_options(c, SSL_OP_ENABLE_KTLS);
	rc = load_files(c, cfg, why, len);
	if (rc < 0) {
		SSL_CTX_free(c);
		free(t);
		return rc;
	}
	/* A server without a CA cannot check client certificates: it asks
	 * for none.  A client always checks the server's. */
	if (cfg->server && !set(cfg->ca))
		mode = SSL_VERIFY_NONE;
	else if (cfg->server && cfg->require_peer_cert)
		mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	SSL_CTX_set_verify(c, mode, NULL);
	t->ssl_ctx = c;
	t->server = cfg->server;
	*out = t;
	return 0;
}

void tls_ctx_free(struct tls_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl_ctx);
	free(ctx);
}

/* The name the server's certificate must be made out to: an IP address
 * (its subjectAltName IP) or a DNS name (SAN or CN, and SNI). */
static int set_peer_name(SSL *ssl, const char *name)
{
	char buf[TLS_NAME_MAX];
	size_t n = strlen(name);
	struct in6_addr a;
	bool ip;

	/* "[::1]" as in a URL: the address inside. */
	if (n >= 2 && name[0] == '[' && name[n - 1] == ']' && n - 2 < sizeof buf) {
		memcpy(buf, name + 1, n - 2);
		buf[n - 2] = 0;
		name = buf;
	}
	ip = inet_pton(AF_INET, name, &a) == 1 || inet_pton(AF_INET6, name, &a) == 1;
	if (ip)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -EINVAL;
	if (SSL_set1_host(ssl, name) != 1 || SSL_set_tlsext_host_name(ssl, name) != 1)
		return -EINVAL;
	return 0;
}

int tls_conn_new(struct tls_ctx *ctx, int fd, const char *name, struct tls_conn **out)
{
	struct tls_conn *t = calloc(1, sizeof *t);

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->server = ctx->server;
	t->ssl = SSL_new(ctx->ssl_ctx);
	if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) {
		ERR_clear_error();
		tls_conn_free(t);
		return -ENOMEM;
	}
	if (!ctx->server && name && name[0] && set_peer_name(t->ssl, name) < 0) {
		ERR_clear_error();
		tls_conn_free(t);
		return -EINVAL;
	}
	if (ctx->server)
		SSL_set_accept_state(t->ssl);
	else
		SSL_set_connect_state(t->ssl);
	*out = t;
	return 0;
}

void tls_conn_free(struct tls_conn *t)
{
	if (!t)
		return;
	if (t->ssl) {
		/* close_notify if the handshake got that far; never waits. */
		if (SSL_is_init_finished(t->ssl)) {
			struct sigpipe_guard g;

			if (!t->server)
				sigpipe_block(&g);
			SSL_shutdown(t->ssl);
			if (!t->server)
				sigpipe_restore(&g);
		}
		ERR_clear_error();
		SSL_free(t->ssl);
	}
	free(t);
}

/* Alerts the peer sent about our certificate: it refused it. */
static bool refused_our_cert(int reason)
{
	switch (reason) {
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
	case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
	case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		return true;
	default:
		return false;
	}
}

/* What the peer sent was no TLS at all: a plain rmem stream, or HTTP. */
static bool not_tls(int reason)
{
	switch (reason) {
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_RECORD_LENGTH_MISMATCH:
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
		return true;
	default:
		return false;
	}
}

/*
 * The errno of an SSL call that returned ret, with t->err said.  -EAGAIN
 * with *events when it only has to wait.
 */
static int conn_error(struct tls_conn *t, int ret, short *events)
{
	int e = SSL_get_error(t->ssl, ret), saved = errno, reason;
	unsigned long code;
	long vr;

	switch (e) {
	case SSL_ERROR_WANT_READ:
		*events = POLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*events = POLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		snprintf(t->err, sizeof t->err, "the peer closed the TLS session");
		return -ECONNRESET;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (ret == 0 || saved == 0 || saved == EPIPE || saved == ECONNRESET) {
			snprintf(t->err, sizeof t->err, "connection closed%s",
				 SSL_is_init_finished(t->ssl) ? "" : " during the TLS handshake");
			return -ECONNRESET;
		}
		snprintf(t->err, sizeof t->err, "%s", strerror(saved));
		return -saved;
	case SSL_ERROR_SSL:
		break;
	default:
		ERR_clear_error();
		snprintf(t->err, sizeof t->err, "TLS error %d", e);
		return -EPROTO;
	}
	take_ssl_error(t->err, sizeof t->err, &code);
	reason = ERR_GET_REASON(code);
	vr = SSL_get_verify_result(t->ssl);
	if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && vr != X509_V_OK) {
		snprintf(t->err, sizeof t->err, "the peer's certificate does not verify: %s",
			 X509_verify_cert_error_string(vr));
		return -EBADE;
	}
	if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
		snprintf(t->err, sizeof t->err, "the peer sent no certificate and one is required");
		return -EBADE;
	}
	if (refused_our_cert(reason))
		return -EKEYREJECTED;
	if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING)
		return -ECONNRESET;
	if (not_tls(reason)) {
		snprintf(t->err, sizeof t->err, "the peer does not speak TLS (%s)",
			 ERR_reason_error_string(code) ? ERR_reason_error_string(code) : "?");
		return -EPROTO;
	}
	return -EPROTO;
}

int tls_handshake(struct tls_conn *t, short *events, char *why, size_t len)
{
	struct sigpipe_guard g;
	int ret, rc;

	if (!t->server)
		sigpipe_block(&g);
	ret = SSL_do_handshake(t->ssl);
	if (!t->server)
		sigpipe_restore(&g);
	if (ret == 1)
		return 0;
	rc = conn_error(t, ret, events);
	if (rc != -EAGAIN && why && len)
		snprintf(why, len, "%s", t->err);
	return rc;
}

int tls_handshake_wait(struct tls_conn *t, int timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? clock_mono_ms() + timeout_ms : CLOCK_NO_DEADLINE;

	for (;;) {
		short events = 0;
		struct pollfd pfd = { .fd = SSL_get_fd(t->ssl) };
		int rc = tls_handshake(t, &events, NULL, 0), left, n;

		if (rc != -EAGAIN)
			return rc;
		left = clock_ms_until(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		pfd.events = events;
		n = poll(&pfd, 1, left);
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

ssize_t tls_read(struct tls_conn *t, void *buf, size_t len)
{
	size_t got = 0;
	short ev;
	int ret;

	if (SSL_read_ex(t->ssl, buf, len, &got) == 1)
		return (ssize_t)got;
	ret = conn_error(t, 0, &ev);
	return ret;
}

ssize_t tls_readv(struct tls_conn *t, const struct iovec *iov, int cnt)
{
	ssize_t total = 0;

	for (int i = 0; i < cnt; i++) {
		ssize_t n = tls_read(t, iov[i].iov_base, iov[i].iov_len);

		if (n < 0)
			return total ? total : n;
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	return total;
}

/* One SSL_write of len bytes: the bytes written, or a negative errno. */
static ssize_t write_some(struct tls_conn *t, const void *p, size_t len)
{
	size_t done = 0;
	short ev;

	if (SSL_write_ex(t->ssl, p, len, &done) == 1)
		return (ssize_t)done;
	return conn_error(t, 0, &ev);
}

static ssize_t writev_some(struct tls_conn *t, const struct iovec *iov, int cnt);

ssize_t tls_writev(struct tls_conn *t, const struct iovec *iov, int cnt)
{
	struct sigpipe_guard g;
	ssize_t n;

	if (t->server) /* rmemd ignores SIGPIPE */
		return writev_some(t, iov, cnt);
	sigpipe_block(&g);
	n = writev_some(t, iov, cnt);
	sigpipe_restore(&g);
	return n;
}

static ssize_t writev_some(struct tls_conn *t, const struct iovec *iov, int cnt)
{
	size_t total = 0, off = 0;

	while (cnt > 0) {
		size_t len;
		int used;
		const uint8_t *p;
		ssize_t n;

		if (iov[0].iov_len == 0) {
			iov++;
			cnt--;
			continue;
		}
		if (off) { /* the rest of a large piece */
			p = (const uint8_t *)iov[0].iov_base + off;
			len = iov[0].iov_len - off;
			used = 1;
		} else {
			p = next_piece(t, iov, cnt, &len, &used);
		}
		n = write_some(t, p, len);
		if (n < 0)
			return total ? (ssize_t)total : n;
		total += (size_t)n;
		if ((size_t)n < len) { /* partial: only ever within one large piece */
			if (used == 1) {
				off += (size_t)n;
				continue;
			}
			return (ssize_t)total;
		}
		iov += used;
		cnt -= used;
		off = 0;
	}
	return (ssize_t)total;
}

size_t tls_pending(const struct tls_conn *t)
{
	int n = SSL_pending(t->ssl);

	if (n > 0)
		return (size_t)n;
	return SSL_has_pending(t->ssl) ? 1 : 0;
}

const char *tls_error(const struct tls_conn *t)
{
	return t->err[0] ? t->err : "no error";
}

bool tls_kernel_tx(const struct tls_conn *t)
{
#ifndef OPENSSL_NO_KTLS
	return BIO_get_ktls_send(SSL_get_wbio(t->ssl));
#else
	(void)t;
	return false;
#endif
}

const char *tls_kind(const struct tls_conn *t)
{
#ifndef OPENSSL_NO_KTLS
	bool tx = BIO_get_ktls_send(SSL_get_wbio(t->ssl));
	bool rx = BIO_get_ktls_recv(SSL_get_rbio(t->ssl));
#else
	bool tx = false, rx = false;
#endif

	if (tx && rx)
		return "ktls";
	/* OpenSSL 3.0 hands the kernel the sending side of TLS 1.3 only. */
	return tx ? "ktls-tx" : "tls";
}

int tls_peer_cn(const struct tls_conn *t, char *buf, size_t len)
{
	X509 *peer = SSL_get0_peer_certificate(t->ssl);
	int n;

	buf[0] = 0;
	if (!peer || SSL_get_verify_result(t->ssl) != X509_V_OK)
		return 0;
	n = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buf,
				      (int)len);
	if (n < 0) {
		buf[0] = 0;
		return 0;
	}
	return (size_t)n >= len - 1 ? -ENAMETOOLONG : 0;
}
