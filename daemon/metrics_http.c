/*
 * metrics_http.c - the HTTP side of listen.metrics (metrics.h): GET and HEAD
 * of /metrics, HTTP/1.0 or 1.1, one request per connection (the reply says
 * "Connection: close").
 *
 * Our own rather than evhttp: libevent 2.1, as Debian 12 ships it, has no
 * cap on evhttp's connections (evhttp_set_max_connections came with 2.2)
 * and no hook that sees one of them close, so any number of idle
 * connections could each hold one of the daemon's fds for the timeout.
 * Here at most METRICS_MAX_CONNS are open (metrics_int.h); each must send
 * its whole request within limits.metrics_timeout_ms of its accept, and
 * take its whole reply within as long again.  Those are deadlines, one timer
 * per connection armed once per phase: bufferevent timeouts would restart at
 * every byte, and a scraper that sends or takes a byte now and then would
 * hold its connection, and with 16 of them the way in, for as long as it
 * liked.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bindaddr.h"
#include "dlist.h"
#include "log.h"
#include "metrics.h"
#include "metrics_int.h"
#include "server.h"

#define BACKLOG          64
#define HTTP_MAX_HEADERS 8192  /* request line and headers; a GET has no body */
#define CONTENT_TYPE     "text/plain; version=0.0.4; charset=utf-8"

struct metrics_conn {
	struct metrics *m;
	struct bufferevent *bev;
	struct event *deadline;  /* of the request, then of the reply */
	bool answering;          /* its request is in, its reply on the way */
	struct metrics_conn *prev, *next;
};

static void conn_free(struct metrics_conn *c)
{
	struct metrics *m = c->m;

	DLIST_REMOVE(m, c);
	m->nconns--;
	if (c->deadline)
		event_free(c->deadline);
	bufferevent_free(c->bev); /* closes the socket */
	free(c);
}

/* (Re)arms c's deadline: limits.metrics_timeout_ms from now, whatever
 * comes and goes meanwhile. */
static void deadline_arm(struct metrics_conn *c)
{
	uint32_t ms = c->m->srv->cfg.metrics_timeout_ms;
	const struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	evtimer_add(c->deadline, &tv);
}

/* The request, or the reply, took too long as a whole: the client is slow or
 * hostile, and its reply (if any) is cut short. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_free(arg);
}

/* ---- the reply ---------------------------------------------------------------------- */

/* Status line and headers, then body (NULL: none), then the connection
 * closes once the client has it all. */
static void reply(struct metrics_conn *c, int code, const char *reason, const char *type,
		  struct evbuffer *body, bool allow)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%sConnection: close\r\n",
			    code, reason, type, allow ? "Allow: GET, HEAD\r\n" : "");
	if (body)
		evbuffer_add_printf(out, "Content-Length: %zu\r\n", evbuffer_get_length(body));
	evbuffer_add(out, "\r\n", 2);
	if (body)
		evbuffer_add_buffer(out, body);
	c->answering = true;
	deadline_arm(c);  /* the reply's own, from now */
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_enable(c->bev, EV_WRITE);
}

static void reply_text(struct metrics_conn *c, int code, const char *reason, const char *text)
{
	struct evbuffer *b = evbuffer_new();

	if (b)
		evbuffer_add_printf(b, "%s\n", text);
	reply(c, code, reason, "text/plain; charset=utf-8", b, code == 405);
	if (b)
		evbuffer_free(b);
}

/* ---- the request -------------------------------------------------------------------- */

/* The request line "METHOD TARGET HTTP/1.x" in line: method and path (the
 * target before any query) into their buffers.  false when malformed. */
static bool parse_line(const char *line, char *method, size_t mlen, char *path, size_t plen)
{
	const char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	size_t n, t;

	if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7))
		return false;
	n = (size_t)(sp1 - line);
	t = strcspn(sp1 + 1, " ?");
	if (!n || n >= mlen || !t || t >= plen)
		return false;
	memcpy(method, line, n);
	method[n] = '\0';
	memcpy(path, sp1 + 1, t);
	path[t] = '\0';
	return true;
}

static void answer(struct metrics_conn *c, const char *line)
{
	char method[16], path[256];
	struct evbuffer *b;

	if (!parse_line(line, method, sizeof method, path, sizeof path))
		return reply_text(c, 400, "Bad Request", "not an HTTP/1 request");
	if (strcmp(path, "/metrics"))
		return reply_text(c, 404, "Not Found", "rmemd serves /metrics only");
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply_text(c, 405, "Method Not Allowed", "GET or HEAD only");
	if (!strcmp(method, "HEAD"))
		return reply(c, 200, "OK", CONTENT_TYPE, NULL, false);
	b = evbuffer_new();
	if (!b || metrics_write(c->m->srv, b) < 0) {
		log_warn("metrics: out of memory for the page");
		if (b)
			evbuffer_free(b);
		return reply_text(c, 500, "Internal Server Error", "out of memory");
	}
	reply(c, 200, "OK", CONTENT_TYPE, b, false);
	evbuffer_free(b);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct metrics_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	char *line;

	if (end.pos < 0)
		end = evbuffer_search(in, "\n\n", 2, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > HTTP_MAX_HEADERS)
			reply_text(c, 431, "Request Header Fields Too Large", "headers too large");
		return;
	}
	line = evbuffer_readln(in, NULL, EVBUFFER_EOL_CRLF);
	answer(c, line ? line : "");
	free(line);
}

/* The reply is out: the connection's work is done. */
static void on_write(struct bufferevent *bev, void *arg)
{
	struct metrics_conn *c = arg;

	(void)bev;
	if (c->answering && !evbuffer_get_length(bufferevent_get_output(c->bev)))
		conn_free(c);
}

/* End of stream or an error: nothing more to do for it. */
static void on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);
}

/* ---- accepting, within the cap ------------------------------------------------------- */

/* Room for one more: the oldest connection that has not sent its request
 * goes, else the oldest being answered.  A reply that is still under way
 * when 16 others came after it is a slow reader's: an honest scraper's page
 * (tens of KB) goes into the kernel's socket buffer at once, and its
 * connection is gone as soon as it is written.  So a newcomer always gets
 * in, and slow readers, even ones that come back as soon as their deadline
 * drops them, cannot keep Prometheus out. */
static void make_room(struct metrics *m)
{
	struct metrics_conn *c;

	for (c = m->first; c && c->answering; c = c->next)
		;
	conn_free(c ? c : m->first);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
		      int salen, void *arg)
{
	struct metrics *m = arg;
	struct metrics_conn *c;

	(void)lev;
	(void)sa;
	(void)salen;
	if (m->nconns >= METRICS_MAX_CONNS) {
		m->shed++;
		make_room(m);
	}
	c = calloc(1, sizeof *c);
	if (c)
		c->deadline = evtimer_new(m->srv->base, on_deadline, c);
	if (c && c->deadline)
		c->bev = bufferevent_socket_new(m->srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c || !c->bev) {
		if (c && c->deadline)
			event_free(c->deadline);
		free(c);
		close(fd);
		return;
	}
	c->m = m;
	DLIST_APPEND(m, c);
	m->nconns++;
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	deadline_arm(c);  /* the request's, from its accept */
	bufferevent_enable(c->bev, EV_READ);
}

/* EMFILE and the like: the connection waits in the backlog; say it once. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	static bool said;
	int err = EVUTIL_SOCKET_ERROR();

	(void)lev;
	(void)arg;
	if (!said)
		log_warn("listen.metrics: accept: %s", evutil_socket_error_to_string(err));
	said = true;
}

int metrics_open(struct server *srv, char *err, size_t errlen)
{
	struct metrics *m;
	int fd;

	if (!srv->cfg.listen_metrics[0])
		return 0;
	m = calloc(1, sizeof *m);
	if (!m) {
		snprintf(err, errlen, "listen.metrics: out of memory");
		return -ENOMEM;
	}
	m->srv = srv;
	metrics_start_time(m->start_time, sizeof m->start_time);
	fd = bindaddr_listen("listen.metrics", srv->cfg.listen_metrics, BACKLOG, err, errlen);
	if (fd < 0) {
		free(m);
		return fd;
	}
	/* Backlog -1: bindaddr_listen made it listen already. */
	m->lev = evconnlistener_new(srv->base, on_accept, m, LEV_OPT_CLOSE_ON_FREE |
				    LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!m->lev) {
		snprintf(err, errlen, "listen.metrics: %s: cannot serve HTTP (evconnlistener)",
			 srv->cfg.listen_metrics);
		close(fd);
		free(m);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(m->lev, on_accept_error);
	srv->metrics = m;
	return 0;
}

void metrics_close(struct server *srv)
{
	struct metrics *m = srv->metrics;

	if (!m)
		return;
	while (m->first)
		conn_free(m->first);
	evconnlistener_free(m->lev); /* closes the listening socket */
	free(m);
	srv->metrics = NULL;
}
