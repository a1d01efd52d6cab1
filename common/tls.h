/*
 * tls.h - TLS 1.3 on rmem's own stream (tcp:// and its listener), over
 * OpenSSL: the one seam between rmemd or librmem and the TLS library.
 * Nothing else of rmem calls SSL_*.  OpenSSL because libcurl, which the
 * etcd client uses, is the OpenSSL flavour on Debian: one TLS library, one
 * set of CA files and one security update for the whole project.
 *
 * A context (struct tls_ctx) holds the files: a server's certificate and
 * key, the CA that peers' certificates must verify against, and whether a
 * client certificate is required.  A connection (struct tls_conn) is one
 * TLS session on a connected, nonblocking socket; it never blocks: every
 * call that cannot go on says -EAGAIN and which event (POLLIN, POLLOUT)
 * lets it, and the caller waits as it waits for the socket.
 *
 * Kernel TLS: with tls_ctx's ktls asked for, OpenSSL hands the session's
 * keys to the kernel (SSL_OP_ENABLE_KTLS, the "tls" TCP ULP) once the
 * handshake is done, so records are sealed and opened by the kernel; where
 * the kernel lacks tls.ko OpenSSL stays in user space, and tls_kind() says
 * which of the two a connection got.
 *
 * Errors are negative errnos, the same for both sides and for etcd's TLS
 * (rmem_strerror(3)): -EBADE the peer's certificate does not verify (other
 * CA, expired, not made out to the name); -ENOKEY our certificate, key or
 * CA file cannot be used; -EKEYREJECTED the peer refused our certificate
 * (or wanted one and got none); -EPROTO the peer does not speak TLS (a
 * plain rmem stream on one end); -ECONNRESET EOF or reset.
 */
#ifndef RMEM_COMMON_TLS_H
#define RMEM_COMMON_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#define TLS_PATH_MAX 256
#define TLS_NAME_MAX 256

/* The first byte of every TLS handshake record (a ClientHello's): how a
 * listener tells a TLS client from a plain rmem one ('R' of PROTO_MAGIC). */
#define TLS_RECORD_HANDSHAKE 0x16

struct tls_ctx;
struct tls_conn;

struct tls_config {
	bool server;
	const char *ca;          /* peers' CA file; NULL or "": none (client: the system's) */
	const char *cert, *key;  /* our certificate and key; NULL or "": none */
	bool require_peer_cert;  /* server: a client without a good certificate is refused */
	bool ktls;               /* ask OpenSSL for kernel TLS */
};

/* A context for cfg: TLS 1.3 only, peers always verified (a server
 * verifies client certificates when it has a CA).  0 with *out, or
 * -ENOKEY (a file that cannot be used: why names it) or -ENOMEM. */
int tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **out, char *why, size_t len);
/* Accepts NULL. */
void tls_ctx_free(struct tls_ctx *ctx);

/* A session on fd (not taken: the caller closes it after tls_conn_free).
 * A client's name is the server name its certificate must be made out to
 * (an IP address literal or a DNS name; also sent as SNI when a name).
 * 0 with *out, or -ENOMEM / -EINVAL. */
int tls_conn_new(struct tls_ctx *ctx, int fd, const char *name, struct tls_conn **out);
/* Sends close_notify when it can without waiting, and frees.  Accepts NULL. */
void tls_conn_free(struct tls_conn *t);

/* One step of the handshake: 0 done, -EAGAIN with *events the poll()
 * events to wait for, or a negative errno (above) with why said. */
int tls_handshake(struct tls_conn *t, short *events, char *why, size_t len);
/* The handshake of a client on a socket, waiting up to timeout_ms (<= 0:
 * forever).  0, -ETIMEDOUT, or tls_handshake()'s errors. */
int tls_handshake_wait(struct tls_conn *t, int timeout_ms);

/* Like recv()/send() on a nonblocking socket: bytes (> 0), -EAGAIN, or a
 * negative errno (-ECONNRESET at EOF or close_notify).  A write that said
 * -EAGAIN must be repeated with the same bytes first (more may follow). */
ssize_t tls_read(struct tls_conn *t, void *buf, size_t len);
ssize_t tls_readv(struct tls_conn *t, const struct iovec *iov, int cnt);
ssize_t tls_writev(struct tls_conn *t, const struct iovec *iov, int cnt);
/* Plaintext already decrypted and not yet read: poll() on the socket does
 * not see it, so a reader asks this first. */
size_t tls_pending(const struct tls_conn *t);
/* Why the last call failed (a static or per-connection string). */
const char *tls_error(const struct tls_conn *t);

/* "ktls" when the kernel seals and opens this session's records both ways,
 * "ktls-tx" when it seals what we send, else "tls" (user space; only
 * valid after the handshake). */
const char *tls_kind(const struct tls_conn *t);
/* Whether the kernel seals what we send: then plain send()/writev() on
 * the socket are TLS records too (the kernel keeps the sequence), and
 * region bytes go from their buffer to the kernel with no copy of ours. */
bool tls_kernel_tx(const struct tls_conn *t);
/* The subject CN of the peer's verified certificate into buf ("" when it
 * sent none).  0, or -ENAMETOOLONG. */
int tls_peer_cn(const struct tls_conn *t, char *buf, size_t len);

#endif /* RMEM_COMMON_TLS_H */
