/*
 * tcp.h - the stream transport of librmem: TCP and Unix sockets.
 *
 * Sockets made here are nonblocking and close-on-exec.  Connecting waits at
 * most timeout_ms (<= 0 waits forever); sending and receiving never wait:
 * the caller (engine.c) decides when to wait, with tcp_wait(), because it
 * must receive while its sends are blocked.  Sends use MSG_NOSIGNAL: the
 * library never raises SIGPIPE.
 *
 * Errors are normalised to what rmem.h promises: a refused or missing peer is
 * -ECONNREFUSED, a wait past the timeout -ETIMEDOUT, EOF, reset and EPIPE are
 * -ECONNRESET.  Other errnos pass through, negated.
 */
#ifndef RMEM_TCP_H
#define RMEM_TCP_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Resolves host (a name or an address literal) with getaddrinfo() and
 * connects to the first address that answers, all within timeout_ms.  The
 * socket gets TCP_NODELAY and SO_KEEPALIVE, and the congestion control cc
 * unless it is NULL or "" (tcp_cc.h).  Returns the socket or a negative
 * errno; a name that does not resolve is -EHOSTUNREACH, a congestion
 * control this kernel lacks -ENOPROTOOPT. */
int tcp_connect_host(const char *host, const char *port, int timeout_ms, const char *cc);

/* Connects to the Unix stream socket at path.  Returns the socket or a
 * negative errno. */
int tcp_connect_unix(const char *path, int timeout_ms);

/* One sendmsg() of iov, without waiting: the bytes sent (> 0), -EAGAIN when
 * the socket buffer is full, or a negative errno. */
ssize_t tcp_send_some(int fd, const struct iovec *iov, int iovcnt);

/* One recv() into buf, without waiting: the bytes received (> 0), -EAGAIN
 * when nothing is there, -ECONNRESET at EOF, or a negative errno. */
ssize_t tcp_recv_some(int fd, void *buf, size_t len);
/* The same into cnt buffers, in order (recvmsg). */
struct iovec;
ssize_t tcp_recvv_some(int fd, struct iovec *iov, int cnt);

/* Waits up to timeout_ms (< 0: forever) for events on fd.  Returns the poll()
 * revents (> 0), 0 when the time ran out, or a negative errno.  A signal
 * does not end the wait early: it resumes for the time that is left. */
int tcp_wait(int fd, short events, int timeout_ms);

/* Asks, without sleeping, whether fd is readable, again and again for up to
 * spin_us microseconds.  Returns the poll() revents (> 0) as soon as it is,
 * 0 when the time ran out, or a negative errno. */
int tcp_spin_readable(int fd, int spin_us);

/* Sets SO_RCVLOWAT: poll() reports fd readable only once bytes (>= 1) are
 * queued, or at EOF or an error.  Receiving without waiting is unaffected.
 * 0 or a negative errno. */
int tcp_set_rcvlowat(int fd, int bytes);

#endif /* RMEM_TCP_H */
