/*
 * tlsaccept.h - the TLS handshakes of listen.tcp's new connections
 * (listen.tls, rmemd.conf(5)): between accept() and conn_accept_tls(),
 * each on its own events with a deadline of limits.frame_timeout_ms, so
 * that a peer that stops half way costs a socket and nothing else.
 *
 * A first byte that opens no TLS record is a plain rmem client on a TLS
 * port: it gets an rmem ERROR frame with -EPROTO (rmem_strerror(3)), never
 * service in clear text.  A failed handshake (a certificate that does not
 * verify, none where one is required, not TLS) is logged with the reason;
 * the socket then lingers, half closed, until the peer has read the alert
 * and closed (or the deadline), so that the alert is not lost to a reset.
 */
#ifndef RMEMD_TLSACCEPT_H
#define RMEMD_TLSACCEPT_H

#include <stddef.h>

struct server;

/* The context of listen.tls into srv->tls (NULL when listen.tls is off).
 * 0, or a negative errno with err said. */
int tlsaccept_open(struct server *srv, char *err, size_t errlen);
/* Ends every handshake in progress and frees the context. */
void tlsaccept_close(struct server *srv);
/* Takes the accepted, nonblocking fd (closed on any failure) and begins. */
void tlsaccept_start(struct server *srv, int fd, const char *peer);

#endif /* RMEMD_TLSACCEPT_H */
