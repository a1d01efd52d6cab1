/*
 * tlsaccept.c - see tlsaccept.h.
 */
#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "proto.h"
#include "server.h"
#include "tenant.h"
#include "tls.h"
#include "tlsaccept.h"

struct tls_pending {
	struct server *srv;
	int fd;
	char peer[64];
	struct tls_conn *t;      /* NULL until the first byte said TLS */
	struct event *ev, *timer;
	short waiting;           /* the events ev waits for */
	bool lingering;          /* failed: reading until the peer closes */
	struct tls_pending *prev, *next;
};

static void pending_free(struct tls_pending *p)
{
	struct server *srv = p->srv;

	srv->tls_pending_n--;
	if (p->ev)
		event_free(p->ev);
	if (p->timer)
		event_free(p->timer);
	tls_conn_free(p->t);
	if (p->fd >= 0)
		close(p->fd);
	if (p->prev)
		p->prev->next = p->next;
	else if (srv->tls_pending == p)
		srv->tls_pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	free(p);
}

static void on_event(evutil_socket_t fd, short what, void *arg);

/* Waits for events on the socket (a new event when they change). */
static int wait_for(struct tls_pending *p, short events)
{
	short ev = (short)(((events & POLLOUT) ? EV_WRITE : 0) | ((events & POLLIN) ? EV_READ : 0));

	if (p->ev && p->waiting == ev)
		return event_add(p->ev, NULL);
	if (p->ev)
		event_free(p->ev);
	p->waiting = ev;
	p->ev = event_new(p->srv->base, p->fd, ev | EV_PERSIST, on_event, p);
	return p->ev ? event_add(p->ev, NULL) : -1;
}

/* After a failure: our last words are out (an alert, an ERROR frame); the
 * peer reads them, then closes.  Its bytes are dropped meanwhile. */
static void linger(struct tls_pending *p)
{
	p->lingering = true;
	shutdown(p->fd, SHUT_WR);
	if (wait_for(p, POLLIN) < 0)
		pending_free(p);
}

/* A plain rmem client: an ERROR frame that its library turns into -EPROTO. */
static void refuse_plain(struct tls_pending *p)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_STATUS_LEN];
	struct proto_hdr h = {
		.magic = PROTO_MAGIC, .version = PROTO_VERSION, .opcode = PROTO_OP_ERROR,
		.flags = PROTO_F_RESPONSE, .length = PROTO_STATUS_LEN,
	};

	log_info("client %s: a plain rmem client on a TLS port (listen.tls); refused", p->peer);
	proto_hdr_encode(buf, &h);
	proto_status_encode(buf + PROTO_HDR_LEN, -EPROTO);
	/* Small, on a new socket: it fits, or the peer is not worth waiting for. */
	if (send(p->fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("client %s: %s", p->peer, strerror(errno));
	linger(p);
}

/* The first byte, peeked: a TLS record begins, or not.  0 go on, 1 wait,
 * -1 done with p (refused or closed). */
static int first_byte(struct tls_pending *p)
{
	uint8_t b;
	ssize_t n = recv(p->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 1;
	if (n <= 0) {
		pending_free(p);
		return -1;
	}
	if (b != TLS_RECORD_HANDSHAKE) {
		refuse_plain(p);
		return -1;
	}
	if (tls_conn_new(p->srv->tls, p->fd, NULL, &p->t) < 0) {
		log_err("no memory for a TLS session of %s", p->peer);
		pending_free(p);
		return -1;
	}
	return 0;
}

/* listen.tls.cert_tenants: the tenant the verified client certificate's
 * subject CN names, or NULL (none sent, or a name no tenant has: the
 * session stays anonymous and may still AUTH). */
static const struct config_tenant *cert_tenant(struct tls_pending *p)
{
	char cn[TLS_NAME_MAX];

	if (!p->srv->cfg.listen_tls_cert_tenants || tls_peer_cn(p->t, cn, sizeof cn) < 0 ||
	    !cn[0])
		return NULL;
	return tenant_find(p->srv, cn, strlen(cn));
}

static void step(struct tls_pending *p)
{
	const struct config_tenant *tenant;
	char why[256];
	struct tls_conn *t;
	short events = 0;
	int rc, fd;

	if (!p->t) {
		rc = first_byte(p);
		if (rc < 0)
			return;
		if (rc > 0) {
			if (wait_for(p, POLLIN) < 0)
				pending_free(p);
			return;
		}
	}
	rc = tls_handshake(p->t, &events, why, sizeof why);
	if (rc == -EAGAIN) {
		if (wait_for(p, events) < 0)
			pending_free(p);
		return;
	}
	if (rc < 0) {
		log_info("client %s: TLS handshake failed: %s", p->peer, why);
		linger(p);
		return;
	}
	tenant = cert_tenant(p);
	log_info("client %s: TLS 1.3 (%s)%s%s", p->peer, tls_kind(p->t),
		 tenant ? ", certificate of tenant " : "", tenant ? tenant->name : "");
	/* conn.c takes the socket and the session from here. */
	t = p->t;
	fd = p->fd;
	p->t = NULL;
	p->fd = -1;
	conn_accept_tls(p->srv, fd, p->peer, t, tenant);
	pending_free(p);
}

static void on_event(evutil_socket_t fd, short what, void *arg)
{
	struct tls_pending *p = arg;
	uint8_t scratch[4096];

	(void)fd;
	(void)what;
	if (!p->lingering) {
		step(p);
		return;
	}
	for (;;) {
		ssize_t n = recv(p->fd, scratch, sizeof scratch, MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			pending_free(p);
		return;
	}
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tls_pending *p = arg;

	(void)fd;
	(void)what;
	if (!p->lingering)
		log_info("client %s: no TLS handshake within limits.frame_timeout_ms; closed",
			 p->peer);
	pending_free(p);
}

/*
 * At most limits.max_clients handshakes (or lingering failures) at once: a
 * session in the making costs OpenSSL's state and, once it reads, its
 * 64 KiB buffer.  Past that the oldest goes, as a peer that holds a slot
 * longest is the likeliest to be stalling, so a flood cannot keep a real
 * client out for longer than its own handshake takes.
 */
static void make_room(struct server *srv)
{
	struct tls_pending *oldest = srv->tls_pending;

	if (srv->tls_pending_n < srv->cfg.max_clients || !oldest)
		return;
	while (oldest->next)
		oldest = oldest->next;
	log_info("client %s: %u TLS handshakes in progress (limits.max_clients); the oldest "
		 "is dropped", oldest->peer, srv->tls_pending_n);
	pending_free(oldest);
}

void tlsaccept_start(struct server *srv, int fd, const char *peer)
{
	uint32_t ms = srv->cfg.frame_timeout_ms;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
	struct tls_pending *p;

	make_room(srv);
	p = calloc(1, sizeof *p);
	if (!p) {
		close(fd);
		return;
	}
	p->srv = srv;
	p->fd = fd;
	srv->tls_pending_n++;
	snprintf(p->peer, sizeof p->peer, "%s", peer);
	p->next = srv->tls_pending;
	if (p->next)
		p->next->prev = p;
	srv->tls_pending = p;
	p->timer = evtimer_new(srv->base, on_timeout, p);
	if (!p->timer || evtimer_add(p->timer, &tv) < 0) {
		log_err("no memory for a new connection from %s", peer);
		pending_free(p);
		return;
	}
	step(p);
}

/* What the start's log says of kernel TLS: the kernel lists its TCP ULPs
 * once their modules are in (the tls module may still load on first use). */
static void note_ktls(const struct config *cfg)
{
	char ulps[128] = "?";
	FILE *f;

	if (!cfg->listen_tls_ktls) {
		log_notice("listen.tls.ktls = off: records are sealed in user space");
		return;
	}
	f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
	if (f && !fgets(ulps, sizeof ulps, f))
		snprintf(ulps, sizeof ulps, "?");
	if (f)
		fclose(f);
	ulps[strcspn(ulps, "\n")] = 0;
	log_notice("listen.tls.ktls = auto: kernel TLS where the kernel has its tls module "
		   "(tcp_available_ulp: %s)%s", ulps, strstr(ulps, "tls") ? "" :
		   "; without it, user-space TLS; each session's line says which");
}

int tlsaccept_open(struct server *srv, char *err, size_t errlen)
{
	struct tls_config tc;
	char why[512];
	int rc;

	if (!srv->cfg.listen_tls_cert[0])
		return 0;
	config_listen_tls(&srv->cfg, &tc);
	rc = tls_ctx_new(&tc, &srv->tls, why, sizeof why);
	if (rc < 0) {
		snprintf(err, errlen, "listen.tls: %s", why);
		return rc;
	}
	log_notice("listen.tcp: TLS 1.3 only, certificate %s%s%s%s", tc.cert,
		   tc.ca[0] ? ", client certificates of " : "", tc.ca,
		   !tc.ca[0] ? "" : tc.require_peer_cert ? " required" : " verified when sent");
	note_ktls(&srv->cfg);
	return 0;
}

void tlsaccept_close(struct server *srv)
{
	while (srv->tls_pending)
		pending_free(srv->tls_pending);
	tls_ctx_free(srv->tls);
	srv->tls = NULL;
}
