/*
 * tcp.h - the stream transport of librmem: TCP and Unix sockets.
 *
 * Sockets made here are nonblocking and close-on-exec; every wait is a poll()
 * bounded by timeout_ms (<= 0 waits forever).  For data transfers the timeout
 * bounds each wait for progress, not the whole transfer, so a large transfer
 * on a slow but live link does not time out.  Sends use MSG_NOSIGNAL: the
 * library never raises SIGPIPE.
 *
 * Errors are normalised to what rmem.h promises: a refused or missing peer is
 * -ECONNREFUSED, a wait past the timeout -ETIMEDOUT, EOF, reset and EPIPE are
 * -ECONNRESET.  Other errnos pass through, negated.
 */
#ifndef RMEM_TCP_H
#define RMEM_TCP_H

#include <stddef.h>
#include <sys/uio.h>

/* Resolves host (a name or an address literal) with getaddrinfo() and
 * connects to the first address that answers, all within timeout_ms.  The
 * socket gets TCP_NODELAY and SO_KEEPALIVE.  Returns the socket or a negative
 * errno; a name that does not resolve is -EHOSTUNREACH. */
int tcp_connect_host(const char *host, const char *port, int timeout_ms);

/* Connects to the Unix stream socket at path.  Returns the socket or a
 * negative errno. */
int tcp_connect_unix(const char *path, int timeout_ms);

/* Sends every byte described by iov[0..iovcnt); iov is consumed (modified).
 * Returns 0 or a negative errno. */
int tcp_send_all(int fd, struct iovec *iov, int iovcnt, int timeout_ms);

/* Receives exactly len bytes into buf.  Returns 0 or a negative errno. */
int tcp_recv_all(int fd, void *buf, size_t len, int timeout_ms);

#endif /* RMEM_TCP_H */
