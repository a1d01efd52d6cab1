/*
 * conn.h - one client connection of rmemd: socket I/O, framing and the TCP
 * data path.  Requests of one connection are served strictly in order, one at
 * a time; that is what makes it safe to stream WRITE data into, and READ data
 * out of, pool memory without copies.  A region can end in the middle of
 * such a transfer (another session revokes its name): the transfer holds
 * its range (session.h, struct range_hold), so that the range is neither
 * zeroed nor reused until the WRITE's data or the READ's reply is done.
 *
 * Per connection the daemon holds at most a receive buffer and
 * limits.conn_max_buffered bytes (or limits.conn_max_requests replies) of
 * output: past either it stops reading the connection until its peer has
 * taken the replies, so a client that pipelines without reading costs us
 * nothing more than that.
 */
#ifndef RMEMD_CONN_H
#define RMEMD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "busypoll.h"
#include "proto.h"
#include "session.h"

struct server;
struct event;
struct evbuffer;
struct tls_conn;

enum conn_rx { RX_HDR, RX_BODY, RX_WHDR, RX_WDATA };

struct conn {
	struct server *srv;
	struct session *s;
	int fd;
	struct event *ev_read, *ev_write;
	struct evbuffer *out;
	bool out_pinned;        /* out holds pool memory by reference: serve nothing more
				   until it has drained */
	bool closing;           /* protocol error: flush what is queued, then close */
	bool dead;              /* closed; freed when the current callback returns */
	enum conn_rx rx;
	struct proto_hdr hdr;   /* the request being received */
	uint8_t *in;            /* receive buffer; WRITE data bypasses it when it can */
	size_t in_start, in_end;
	uint8_t *wdst;          /* where WRITE data lands, NULL to discard it */
	uint64_t wleft;         /* WRITE data bytes still to come */
	int wstatus;            /* the WRITE's answer once its data is consumed */
	uint64_t wstart_ns;     /* when its header came (the service-time histogram) */
	/* The ranges this connection's transfers name (session.h): the WRITE
	 * whose data is arriving, the READ reply queued by reference. */
	struct range_hold whold, rhold;
	uint64_t last_rx_ns;    /* when the peer last sent us a byte (frame deadline) */
	int rcvlowat;           /* SO_RCVLOWAT as last set, 0 = the kernel's 1 (conn_set_lowat) */
	int lowat_queued;       /* bytes seen queued under it (conn_check_deadlines) */
	bool after_bulk;        /* the last request was a WRITE of more than COPY_MAX */
	uint64_t clock_ns;      /* the latest clock read of this callback: where the next
				   request's service time starts (conn.c, observe) */
	uint32_t unsent;        /* replies queued since out was last empty */
	/* An ALLOC waiting for the quarantine (ctl.h, CTL_WAIT): served again
	 * when ev_retry fires; nothing after it is served until then. */
	uint8_t *parked;        /* its payload (hdr holds its header), or NULL */
	uint64_t parked_since;
	struct event *ev_retry;
	struct busy_poll bp;    /* the spin for the next request (busypoll.h) */
	/* TLS (common/tls.h), its handshake done (tlsaccept.c), or NULL: every
	 * byte in and out goes through conn_recv() and conn_send_out(). */
	struct tls_conn *tls;
	bool ktls_tx;           /* the kernel seals what we send (tls_kernel_tx) */
	struct conn *prev, *next;
};

/* Takes ownership of the connected, nonblocking fd and opens its session.
 * -errno on failure (fd closed). */
int conn_accept(struct server *srv, int fd, enum session_transport transport, bool admin,
		const char *peer);
/* The same for a TCP connection whose TLS handshake is done: t is taken
 * too (freed with the connection, or here on failure).  tenant: the one
 * its verified client certificate proves (listen.tls.cert_tenants), or
 * NULL. */
struct config_tenant;
int conn_accept_tls(struct server *srv, int fd, const char *peer, struct tls_conn *t,
		    const struct config_tenant *tenant);
/* Closes every connection (at shutdown); their sessions release their regions. */
void conn_close_all(struct server *srv);

/*
 * The lease timer's look at c (lease.c), now from clock_mono_ns(): ends
 * the connection, as a disconnect would, when its peer has been silent for
 * limits.lease_timeout_ms, or has stopped in the middle of a frame for
 * limits.frame_timeout_ms.  c may be freed on return.  Never call it from
 * one of c's own callbacks.
 */
void conn_check_deadlines(struct conn *c, uint64_t now);

/*
 * Ends session s from outside its connection (its queue pair disconnected or
 * failed): the connection gets an ERROR frame with status and closes, which
 * destroys the session.  Safe to call from any callback but s's own
 * connection's.  Does nothing when s has no open connection.
 */
void conn_end_session(struct server *srv, struct session *s, int status, const char *why);

#endif /* RMEMD_CONN_H */
