/*
 * conn.c - see conn.h.
 *
 * Receive side: bytes are read into a small buffer and cut into frames.  The
 * data of a WRITE is copied from that buffer into the pool only for what
 * arrived together with its header; the rest is read() straight into the pool.
 * Send side: replies are queued in an evbuffer and flushed once per batch of
 * requests; READ data of more than COPY_MAX bytes is queued by reference to
 * the pool, and no further request is served until it has gone out.
 * Deadlines: every byte that moves renews the session's lease (s->last_ns);
 * the lease timer (lease.c) ends connections whose deadlines have passed.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "ctl.h"
#include "log.h"
#include "server.h"
#include "tls.h"

#define IN_CAP     (64u << 10)
#define COPY_MAX   (64u << 10)  /* smaller READ replies are copied, not referenced */
#define READ_ROUNDS 16          /* reads per wake-up, so one client cannot starve others */
#define DIRECT_MAX (4u << 20)   /* bytes per read() straight into the pool */
#define LOWAT_MAX  (1 << 20)    /* the most SO_RCVLOWAT asks for (conn_set_lowat) */
/* The longest an ALLOC waits for the quarantine: every range in it when the
 * ALLOC came is due by then, with room for a late timer. */
#define PARK_MAX_NS ((QUARANTINE_MS + 100) * 1000000ull)

static void conn_on_read(evutil_socket_t fd, short what, void *arg);
static void conn_on_write(evutil_socket_t fd, short what, void *arg);
static void conn_on_retry(evutil_socket_t fd, short what, void *arg);

static void conn_free(struct conn *c)
{
	struct server *srv = c->srv;

	if (c->ev_read)
		event_free(c->ev_read);
	if (c->ev_write)
		event_free(c->ev_write);
	if (c->ev_retry)
		event_free(c->ev_retry);
	free(c->parked);
	/* The queued output may reference pool memory: drop it (which releases
	 * its hold) before the session hands its regions back; so too the
	 * hold of a WRITE cut short. */
	if (c->out)
		evbuffer_free(c->out);
	session_unhold(srv, &c->rhold);
	session_unhold(srv, &c->whold);
	tls_conn_free(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	session_destroy(srv, c->s);
	if (c->prev)
		c->prev->next = c->next;
	else if (srv->conns == c)
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->in);
	free(c);
}

static void conn_close(struct conn *c, const char *why)
{
	if (c->dead)
		return;
	log_debug("connection of %s closed: %s", c->s ? c->s->peer : "?", why);
	c->dead = true;
}

static int accept_conn(struct server *srv, int fd, enum session_transport transport, bool admin,
		       const char *peer, struct tls_conn *t)
{
	struct conn *c = calloc(1, sizeof *c);

	if (!c) {
		tls_conn_free(t);
		close(fd);
		return -ENOMEM;
	}
	c->srv = srv;
	c->fd = fd;
	c->tls = t;
	c->clock_ns = c->last_rx_ns = (uint64_t)clock_mono_ns();
	c->in = malloc(IN_CAP);
	c->out = evbuffer_new();
	c->s = session_new(srv, transport, admin, peer);
	c->ev_read = event_new(srv->base, fd, EV_READ | EV_PERSIST, conn_on_read, c);
	c->ev_write = event_new(srv->base, fd, EV_WRITE | EV_PERSIST, conn_on_write, c);
	c->ev_retry = evtimer_new(srv->base, conn_on_retry, c);
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	if (!c->in || !c->out || !c->s || !c->ev_read || !c->ev_write || !c->ev_retry ||
	    event_add(c->ev_read, NULL) < 0) {
		log_err("no memory for a new connection from %s", peer);
		conn_free(c);
		return -ENOMEM;
	}
	if (t) {
		c->s->tls_kind = tls_kind(t);
		c->ktls_tx = tls_kernel_tx(t);
		/* The handshake's last record may have brought requests with it. */
		if (tls_pending(t))
			event_active(c->ev_read, EV_READ, 0);
	}
	return 0;
}

int conn_accept(struct server *srv, int fd, enum session_transport transport, bool admin,
		const char *peer)
{
	return accept_conn(srv, fd, transport, admin, peer, NULL);
}

int conn_accept_tls(struct server *srv, int fd, const char *peer, struct tls_conn *t,
		    const struct config_tenant *tenant)
{
	int rc = accept_conn(srv, fd, SESSION_TCP, false, peer, t);
	struct session *s;

	/* As AUTH would have: before HELLO, so the session is charged to it.
	 * (The new connection is the first of the list.) */
	if (rc == 0 && tenant) {
		s = srv->conns->s;
		s->tenant = tenant;
		s->cert_tenant = true;
		snprintf(s->peer + strlen(s->peer), sizeof s->peer - strlen(s->peer),
			 " tenant=%s(cert)", tenant->name);
	}
	return rc;
}

/* ---- the stream: the socket, or TLS over it ------------------------------------ */

/* read() as the rest of this file expects it: bytes, 0 at EOF, or -1 with
 * errno (EAGAIN when there is nothing). */
static ssize_t conn_recv(struct conn *c, void *buf, size_t len)
{
	ssize_t n;

	if (!c->tls)
		return read(c->fd, buf, len);
	n = tls_read(c->tls, buf, len);
	if (n >= 0)
		return n;
	if (n == -ECONNRESET)
		return 0;
	if (n != -EAGAIN)
		log_info("client %s: TLS: %s", c->s->peer, tls_error(c->tls));
	errno = (int)-n;
	return -1;
}

/* evbuffer_write() for the stream: the bytes sent, or -1 with errno.  Over
 * TLS up to a batch of the buffer's chains are sealed and sent, then
 * drained (which releases a READ's reference once its chain is gone). */
static int conn_send_out(struct conn *c)
{
	struct evbuffer_iovec v[16];
	struct iovec iov[16];
	int cnt;
	ssize_t n;

	/* Kernel TLS seals what writev() hands it: the pool's bytes go out by
	 * reference as on plain TCP (c->ktls_tx, set once after the handshake). */
	if (!c->tls || c->ktls_tx)
		return evbuffer_write(c->out, c->fd);
	cnt = evbuffer_peek(c->out, -1, NULL, v, 16);
	if (cnt > 16)
		cnt = 16;
	for (int i = 0; i < cnt; i++)
		iov[i] = (struct iovec){ .iov_base = v[i].iov_base, .iov_len = v[i].iov_len };
	n = tls_writev(c->tls, iov, cnt);
	if (n < 0) {
		if (n != -EAGAIN)
			log_info("client %s: TLS: %s", c->s->peer, tls_error(c->tls));
		errno = (int)-n;
		return -1;
	}
	evbuffer_drain(c->out, (size_t)n);
	return (int)n;
}

void conn_close_all(struct server *srv)
{
	while (srv->conns)
		conn_free(srv->conns);
}

/* ---- replies --------------------------------------------------------------- */

static void put_reply_hdr(uint8_t *buf, const struct proto_hdr *req, uint16_t opcode, size_t len)
{
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = PROTO_VERSION,
		.opcode = opcode,
		.flags = PROTO_F_RESPONSE,
		.length = (uint32_t)len,
		.req_id = req ? req->req_id : 0,
	};

	proto_hdr_encode(buf, &h);
}

static void conn_fail(struct conn *c, const struct proto_hdr *req, int status, const char *why);

/* Queues a reply to req with the given payload (status included). */
static void conn_reply(struct conn *c, const struct proto_hdr *req, const uint8_t *payload,
		       size_t len)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_MAX_CTL];

	if (len > PROTO_MAX_CTL) { /* a handler bug; never send what the peer must refuse */
		log_err("reply of %zu bytes to opcode %u is too long", len, req->opcode);
		conn_fail(c, req, -EIO, "internal error");
		return;
	}
	put_reply_hdr(buf, req, req->opcode, len);
	memcpy(buf + PROTO_HDR_LEN, payload, len);
	if (evbuffer_add(c->out, buf, PROTO_HDR_LEN + len) < 0)
		conn_close(c, "out of memory");
	c->unsent++;
}

/* Region bytes a READ or WRITE moved on this connection (counters.h). */
static void count_bytes(struct conn *c, enum counters_io op, uint64_t n)
{
	c->srv->counters.stream_bytes[c->s->transport == SESSION_UNIX][op] += n;
}

/* Queues a status-only reply (status 0 or negative errno). */
static void conn_reply_status(struct conn *c, const struct proto_hdr *req, int status)
{
	uint8_t st[PROTO_STATUS_LEN];

	conn_reply(c, req, st, proto_status_encode(st, status));
}

/* libevent frees a referenced chain once writev() has copied all of it to
 * the socket, or with the buffer: the READ's bytes are no longer needed. */
static void read_sent(const void *data, size_t len, void *arg)
{
	struct conn *c = arg;

	(void)data;
	(void)len;
	session_unhold(c->srv, &c->rhold);
}

/* Queues a READ reply: status 0 and len bytes of pool memory at data, whose
 * range c->rhold holds (ctl.h): released once the bytes are copied, at once
 * or when the referenced chain has gone to the kernel (read_sent). */
static void conn_reply_data(struct conn *c, const struct proto_hdr *req, const uint8_t *data,
			    size_t len)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_STATUS_LEN];
	int rc;

	put_reply_hdr(buf, req, req->opcode, PROTO_STATUS_LEN + len);
	proto_status_encode(buf + PROTO_HDR_LEN, 0);
	rc = evbuffer_add(c->out, buf, sizeof buf);
	if (rc == 0 && len <= COPY_MAX) {
		rc = evbuffer_add(c->out, data, len);
	} else if (rc == 0) {
		rc = evbuffer_add_reference(c->out, data, len, read_sent, c);
		c->out_pinned = rc == 0;
	}
	/* Copied, or not queued at all (libevent calls no cleanup then). */
	if (!c->out_pinned)
		session_unhold(c->srv, &c->rhold);
	if (rc < 0)
		conn_close(c, "out of memory");
	c->unsent++;
	count_bytes(c, COUNTERS_READ, len);
}

/* Queues an ERROR frame (status: a negative errno) and closes the connection
 * once it is sent.  req NULL when the header could not be read at all. */
static void conn_fail(struct conn *c, const struct proto_hdr *req, int status, const char *why)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_STATUS_LEN];

	log_info("client %s: %s; closing its connection", c->s->peer, why);
	put_reply_hdr(buf, req, PROTO_OP_ERROR, PROTO_STATUS_LEN);
	proto_status_encode(buf + PROTO_HDR_LEN, status);
	evbuffer_add(c->out, buf, sizeof buf);
	c->closing = true;
}

/* ---- receive state machine -------------------------------------------------- */

/* Whether c may serve no more requests for now: it is ending, or too much of
 * its output waits for the peer to take it (limits.conn_max_*). */
static bool conn_blocked(const struct conn *c)
{
	const struct config *cfg = &c->srv->cfg;

	return c->dead || c->closing || c->out_pinned || c->parked ||
	       c->unsent >= cfg->conn_max_requests ||
	       evbuffer_get_length(c->out) >= cfg->conn_max_buffered;
}

/*
 * A request's service time goes into its opcode's histogram (counters.h).
 * Its end is the next request's start (c->clock_ns): one clock read per
 * request, not two, which mattered at a million requests a second (a read
 * costs 27 ns on this VM, 9% of rmemd's CPU with three per request).  The
 * few instructions that cut the next header out of the buffer count
 * towards that request.
 */
static void observe(struct conn *c, uint16_t opcode, uint64_t start_ns)
{
	uint64_t end = (uint64_t)clock_mono_ns();

	if (opcode < PROTO_OP_COUNT)
		counters_observe(&c->srv->counters.requests[opcode], end - start_ns);
	c->clock_ns = end;
}

static void write_done(struct conn *c)
{
	session_unhold(c->srv, &c->whold);
	c->after_bulk = c->hdr.length - PROTO_IO_REQ_LEN > COPY_MAX;
	conn_reply_status(c, &c->hdr, c->wstatus);
	observe(c, PROTO_OP_WRITE, c->wstart_ns);
	c->rx = RX_HDR;
}

static void write_begin(struct conn *c, const uint8_t *p)
{
	struct proto_io_req io;
	uint8_t *where = NULL;
	int rc;

	c->wstart_ns = c->clock_ns;
	rc = proto_io_req_decode(p, c->hdr.length, PROTO_OP_WRITE, &io);
	if (rc < 0) {
		conn_fail(c, &c->hdr, rc, "malformed WRITE");
		return;
	}
	rc = session_io(c->srv, c->s, io.id, io.rkey, PROTO_ACCESS_WRITE, io.offset, io.length, &where,
			&c->whold);
	/* A refused WRITE still has its data on the wire: consume and drop it, so
	 * the stream stays in step and the next request is served. */
	c->wstatus = rc;
	c->wdst = rc == 0 ? where : NULL;
	c->wleft = io.length;
	c->rx = RX_WDATA;
	if (!c->wleft)
		write_done(c);
}

/*
 * Before WRITE data lands: whether its region ended since the last piece
 * (another session revoked it, say).  Its range is held until now, so
 * nothing else uses it yet; from here the rest of the data is read and
 * dropped, and the WRITE fails with -ECANCELED.
 */
static void write_check(struct conn *c)
{
	if (!c->wdst || !c->whold.ended)
		return;
	c->wdst = NULL;
	c->wstatus = -ECANCELED;
	session_unhold(c->srv, &c->whold);
}

static void on_header(struct conn *c, const uint8_t *p)
{
	struct ctl_reply rep;
	int rc = proto_hdr_decode(p, &c->hdr);

	if (rc < 0) {
		/* Past a good magic the decoder has filled req_id: echo it. */
		conn_fail(c, rc == -EBADMSG && c->hdr.magic != PROTO_MAGIC ? NULL : &c->hdr, rc,
			  rc == -EPROTO ? "other protocol version" :
			  p[0] == TLS_RECORD_HANDSHAKE && !c->tls && c->s->transport == SESSION_TCP
				  ? "a TLS client on a plain port (listen.tls is off)"
				  : "undecodable frame header");
		return;
	}
	if (c->hdr.flags & PROTO_F_RESPONSE) {
		conn_fail(c, &c->hdr, -EBADMSG, "sent a reply frame");
		return;
	}
	/* What may come before HELLO is ctl.c's table's to say. */
	if (ctl_admit(c->s, c->hdr.opcode, &rep) != CTL_REPLY) {
		conn_fail(c, &c->hdr, rep.status, rep.why);
		return;
	}
	c->s->last_ns = c->clock_ns;
	if (c->hdr.opcode == PROTO_OP_WRITE) {
		if (c->hdr.length < PROTO_IO_REQ_LEN)
			conn_fail(c, &c->hdr, -EBADMSG, "short WRITE");
		else
			c->rx = RX_WHDR;
	} else {
		c->rx = RX_BODY;
	}
}

/* Sends what a handler filled in, as its outcome says. */
static void send_reply(struct conn *c, const struct ctl_reply *rep)
{
	if (rep->outcome == CTL_REPLY_AND_CLOSE)
		conn_fail(c, &c->hdr, rep->status, rep->why);
	else if (rep->status < 0)
		conn_reply_status(c, &c->hdr, rep->status);
	else if (rep->len)
		conn_reply(c, &c->hdr, rep->payload, rep->len);
	else if (rep->data)
		conn_reply_data(c, &c->hdr, rep->data, rep->data_len);
	else
		conn_reply_status(c, &c->hdr, 0);
}

/*
 * Keeps the request in c->hdr and a copy of its payload until
 * rep->wait_until_ns, and serves nothing after it until then (replies go
 * out in request order).  Without memory for the copy, the request gets the
 * answer it would have had without waiting.
 */
static void park(struct conn *c, const uint8_t *p, const struct ctl_reply *rep)
{
	uint64_t now = (uint64_t)clock_mono_ns();
	/* Rounded up, so that the range is due when the timer fires. */
	uint64_t us = (rep->wait_until_ns > now ? rep->wait_until_ns - now : 0) / 1000u + 1;
	struct timeval tv = { .tv_sec = (time_t)(us / 1000000u),
			      .tv_usec = (suseconds_t)(us % 1000000u) };

	if (!c->parked) {
		c->parked = malloc(c->hdr.length ? c->hdr.length : 1);
		if (!c->parked) {
			conn_reply_status(c, &c->hdr, -ENOMEM);
			return;
		}
		memcpy(c->parked, p, c->hdr.length);
		c->parked_since = now;
	}
	evtimer_add(c->ev_retry, &tv);
}

/* Serves one control request whose payload is p: at once, or parked. */
static void serve(struct conn *c, const uint8_t *p)
{
	uint64_t start = c->clock_ns;
	struct ctl_reply rep;
	struct ctl_req req = {
		.s = c->s, .fd = c->fd, .h = &c->hdr, .payload = p, .len = c->hdr.length,
		.may_wait = !c->parked || start - c->parked_since < PARK_MAX_NS,
		/* Free: a READ referenced by an earlier reply blocks this one
		 * (conn_blocked) until its chain, and its hold, are gone. */
		.hold = &c->rhold,
	};

	if (ctl_dispatch(c->srv, &req, &rep) == CTL_WAIT) {
		park(c, p, &rep);
		return;
	}
	send_reply(c, &rep);
	/* A parked request counts once, for the try that answered it. */
	observe(c, c->hdr.opcode, start);
	free(c->parked);
	c->parked = NULL;
}

static void on_body(struct conn *c, const uint8_t *p)
{
	serve(c, p);
	c->rx = RX_HDR;
}

/* Serves every complete request in the receive buffer, as far as the send
 * side lets it. */
static void conn_process(struct conn *c)
{
	while (!conn_blocked(c)) {
		size_t avail = c->in_end - c->in_start;
		const uint8_t *p = c->in + c->in_start;
		size_t n;

		switch (c->rx) {
		case RX_HDR:
			if (avail < PROTO_HDR_LEN)
				return;
			c->in_start += PROTO_HDR_LEN;
			on_header(c, p);
			break;
		case RX_BODY:
			if (avail < c->hdr.length)
				return;
			c->in_start += c->hdr.length;
			on_body(c, p);
			break;
		case RX_WHDR:
			if (avail < PROTO_IO_REQ_LEN)
				return;
			c->in_start += PROTO_IO_REQ_LEN;
			write_begin(c, p);
			break;
		case RX_WDATA:
			n = avail < c->wleft ? avail : (size_t)c->wleft;
			if (!n)
				return;
			write_check(c);
			if (c->wdst) {
				memcpy(c->wdst, p, n);
				c->wdst += n;
				count_bytes(c, COUNTERS_WRITE, n);
			}
			c->in_start += n;
			c->wleft -= n;
			if (!c->wleft)
				write_done(c);
			break;
		}
	}
}

/* One read(): straight into the pool when a WRITE's data is due and nothing
 * is buffered, else into the receive buffer.  Returns read()'s result;
 * *drained tells whether a read of requests got less than it asked for (the
 * socket held no more: another read() now would nearly always hear EAGAIN). */
static ssize_t conn_read_once(struct conn *c, bool *drained)
{
	size_t want;
	ssize_t n;

	*drained = false;
	if (c->rx == RX_WDATA && c->in_start == c->in_end) {
		uint8_t *dst;

		write_check(c);
		dst = c->wdst;

		want = c->wleft < DIRECT_MAX ? (size_t)c->wleft : DIRECT_MAX;
		if (!dst) { /* discarding: the empty receive buffer is the scratch */
			dst = c->in;
			if (want > IN_CAP)
				want = IN_CAP;
		}
		/* Bulk data streams in while we copy: keep reading (*drained
		 * stays false) until the socket says EAGAIN. */
		n = conn_recv(c, dst, want);
		if (n > 0) {
			if (c->wdst) {
				c->wdst += n;
				count_bytes(c, COUNTERS_WRITE, (uint64_t)n);
			}
			c->wleft -= (uint64_t)n;
			if (!c->wleft)
				write_done(c);
		}
		return n;
	}
	if (c->in_start == c->in_end) {
		c->in_start = c->in_end = 0;
	} else if (c->in_start > 0 && c->in_end == IN_CAP) {
		memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
		c->in_end -= c->in_start;
		c->in_start = 0;
	}
	want = IN_CAP - c->in_end;
	/* After bulk WRITE data the next frame is most likely another bulk
	 * WRITE: take its header and fixed part alone, so that its data goes
	 * straight into the pool instead of through this buffer (up to IN_CAP
	 * bytes copied per WRITE, for one more read() when it is not one). */
	if (c->after_bulk && c->in_end == 0 && want > PROTO_HDR_LEN + PROTO_IO_REQ_LEN)
		want = PROTO_HDR_LEN + PROTO_IO_REQ_LEN;
	c->after_bulk = false;
	n = conn_recv(c, c->in + c->in_end, want);
	*drained = n > 0 && (size_t)n < want;
	if (n > 0)
		c->in_end += (size_t)n;
	return n;
}

/* ---- send side and event bookkeeping ---------------------------------------- */

static void conn_flush(struct conn *c)
{
	while (!c->dead && evbuffer_get_length(c->out)) {
		int n = conn_send_out(c);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			conn_close(c, "send failed");
			return;
		}
		/* A peer that takes our replies is alive, even while its
		 * requests wait behind them. */
		c->clock_ns = c->s->last_ns = (uint64_t)clock_mono_ns();
	}
	if (!evbuffer_get_length(c->out)) {
		c->out_pinned = false;
		c->unsent = 0;
	}
}

/*
 * While a WRITE's data streams in, epoll reports the socket readable only
 * once min(bytes of that WRITE still due, LOWAT_MAX) have arrived, and at
 * once again for anything else.  Woken at every segment we made some 170
 * poll and sched_yield calls per MiB; with the mark the daemon's CPU per
 * MiB written fell from about 190 to 83 us (issue 13; docs/benchmarks.md).
 * It cannot deadlock: the WRITE's header has promised every one of those
 * bytes, and the client sends them without waiting for anything from us
 * (its replies are either out already or wake us for writing, which the
 * mark does not affect); EOF and errors wake epoll whatever the mark, and
 * the kernel caps it at half the receive buffer and wakes us anyway when
 * the buffer or the window is full.  Set only when it changes: a system
 * call.  A failure only costs wake-ups.
 */
static void conn_set_lowat(struct conn *c)
{
	int want = 1, cur = c->rcvlowat ? c->rcvlowat : 1;

	/* (Unix sockets wake their reader at every byte whatever the mark.) */
	/* (Nor can a mark count TLS's plaintext: records are longer.) */
	if (c->rx == RX_WDATA && c->in_start == c->in_end && c->wleft > 1 &&
	    c->s->transport != SESSION_UNIX && !c->tls)
		want = c->wleft < LOWAT_MAX ? (int)c->wleft : LOWAT_MAX;
	c->lowat_queued = 0; /* what was queued has been read */
	if (want != cur && setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0)
		c->rcvlowat = want;
}

/* Serve, send, and serve again what sending unblocked; then wait for the
 * events that can make progress. */
static void conn_pump(struct conn *c)
{
	for (;;) {
		bool stalled;

		conn_process(c);
		/* Processing stops either for want of input or because the send
		 * side is full; only the second can be undone by a flush. */
		stalled = conn_blocked(c);
		conn_flush(c);
		if (c->dead)
			return;
		if (c->closing) {
			/* The ERROR frame is small and is sent at once, or the peer is
			 * not reading: either way we are done with it. */
			conn_close(c, "protocol error");
			return;
		}
		if (!stalled || conn_blocked(c))
			break;
	}
	if (evbuffer_get_length(c->out))
		event_add(c->ev_write, NULL);
	else
		event_del(c->ev_write);
	if (conn_blocked(c)) {
		event_del(c->ev_read);
	} else {
		conn_set_lowat(c);
		event_add(c->ev_read, NULL);
		/* Plaintext TLS already holds is no event for epoll. */
		if (c->tls && tls_pending(c->tls))
			event_active(c->ev_read, EV_READ, 0);
	}
}

/* What one conn_read_once() returned: serves what came, or closes on EOF
 * and errors.  Whether reading on may find more (false after EAGAIN too). */
static bool conn_took(struct conn *c, ssize_t n)
{
	if (n == 0) {
		conn_close(c, "closed by peer");
		return false;
	}
	if (n < 0) {
		int err = errno;

		if (err == EINTR)
			return true;
		if (err != EAGAIN && err != EWOULDBLOCK)
			conn_close(c, strerror(err));
		return false;
	}
	c->clock_ns = c->last_rx_ns = c->s->last_ns = (uint64_t)clock_mono_ns();
	conn_process(c);
	return true;
}

/* The busy-poll's try (busypoll.h): a read() itself, not a poll() before
 * it, so that a request that came costs one system call, not two.  On
 * anything but EAGAIN it is taken as the loop would (*drained for it). */
struct spin_read {
	struct conn *c;
	bool drained;
};

static bool conn_spin_read(void *arg)
{
	struct spin_read *sr = arg;
	ssize_t n = conn_read_once(sr->c, &sr->drained);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return false;
	conn_took(sr->c, n);
	return true;
}

/* The busy-poll's try once the rounds are spent: input is there, left for
 * epoll to report. */
static bool conn_spin_ready(void *arg)
{
	struct conn *c = arg;
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };

	if (c->tls && tls_pending(c->tls))
		return true;
	return poll(&pfd, 1, 0) != 0;
}

/* Once every reply is out: whether the peer's next request came within
 * the busy-poll window (busypoll.h), read and served at once; *drained as
 * conn_read_once() set it. */
static bool conn_spin_again(struct conn *c, int *spins, bool *drained)
{
	struct spin_read sr = { .c = c };

	/* Bulk WRITE data due: the low-water mark (conn_set_lowat) wakes us
	 * once it is in; reading it in pieces as it comes would undo that. */
	if (c->dead || conn_blocked(c) || evbuffer_get_length(c->out) != 0 || c->rcvlowat > 1)
		return false;
	/* Rounds spent: back to the event loop, so that other connections get
	 * their turn, but only once the next request is in, so that epoll
	 * reports it at once instead of putting us to sleep.  A client with
	 * all of its 16 allocs in one batch (librmem's tx_hold) finds us in
	 * epoll_wait after every 16th batch otherwise: a sleep and a wake-up
	 * each time, 2200 context switches per 600 k requests against 500. */
	if ((*spins)++ >= BUSY_POLL_ROUNDS) {
		busy_poll_try(&c->bp, conn_spin_ready, c);
		return false;
	}
	if (!busy_poll_try(&c->bp, conn_spin_read, &sr))
		return false;
	*drained = sr.drained;
	return !c->dead;
}

static void conn_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	bool drained = false;
	int spins = 0;

	(void)fd;
	(void)what;
	do {
		/* A client's batch of requests (one sendmsg) is one read(). */
		for (int round = 0; round < READ_ROUNDS && !drained && !conn_blocked(c); round++)
			if (!conn_took(c, conn_read_once(c, &drained)))
				break;
		if (!c->dead)
			conn_pump(c);
		/* Batches too: a client with 16 allocs in flight sends its next
		 * batch within microseconds of our replies, and waking from
		 * epoll_wait for it cost more than the spin (a VM, loopback:
		 * daemon CPU per request 1.45 -> 1.11 us, context switches per
		 * request 0.11 -> 0.07, client's CPU down as well). */
	} while (conn_spin_again(c, &spins, &drained));
	if (c->dead)
		conn_free(c);
}

/* The socket can take more, or (retry) a parked request's time has come:
 * serve that again first, then what followed it. */
static void conn_resume(struct conn *c, bool retry)
{
	c->clock_ns = (uint64_t)clock_mono_ns();
	if (retry && !c->dead && c->parked)
		serve(c, c->parked);
	if (!c->dead)
		conn_pump(c);
	if (c->dead)
		conn_free(c);
}

static void conn_on_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_resume(arg, false);
}

static void conn_on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_resume(arg, true);
}

void conn_end_session(struct server *srv, struct session *s, int status, const char *why)
{
	for (struct conn *c = srv->conns; c; c = c->next) {
		if (c->s != s || c->dead || c->closing)
			continue;
		conn_fail(c, NULL, status, why);
		/* conn_fail only marks it; its own callback sends and closes. */
		event_active(c->ev_write, EV_WRITE, 0);
		return;
	}
}

/* ---- deadlines (lease.c's timer) -------------------------------------------- */

/* Whether the peer has begun a frame and not finished sending it. */
static bool conn_mid_frame(const struct conn *c)
{
	return c->rx != RX_HDR || c->in_end > c->in_start;
}

/* Bytes the peer sent that our loop has not read yet (FIONREAD: Unix sockets
 * and TCP both answer it). */
static int conn_queued(const struct conn *c)
{
	int n = 0;

	return ioctl(c->fd, FIONREAD, &n) == 0 ? n : 0;
}

/* Whether the peer has sent bytes that our loop would read: then it is
 * alive, and only we are late (a busy loop must not cost clients their
 * leases).  Bytes below the low-water mark (conn_set_lowat) wait for the
 * peer, not for us: the kernel's mark, which it may have capped, decides. */
static bool conn_input_waiting(const struct conn *c)
{
	int n = conn_queued(c), mark = 1;
	socklen_t len = sizeof mark;

	if (n > 0 && c->rcvlowat > 1 &&
	    getsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &mark, &len) < 0)
		mark = 1;
	return n > 0 && n >= mark;
}

static void conn_expire(struct conn *c, const char *what, uint64_t idle_ns)
{
	log_notice("client %llu (%s): %s after %llu ms; ending its session",
		   (unsigned long long)c->s->id, c->s->peer, what,
		   (unsigned long long)(idle_ns / 1000000));
	conn_close(c, what);
	conn_free(c);
}

void conn_check_deadlines(struct conn *c, uint64_t now)
{
	const struct config *cfg = &c->srv->cfg;
	uint64_t lease_ns = (uint64_t)cfg->lease_timeout_ms * 1000000;
	uint64_t frame_ns = (uint64_t)cfg->frame_timeout_ms * 1000000;
	bool blocked, lease_over, frame_over;

	if (c->dead)
		return;
	/* While we hold back its requests, the peer owes us no bytes: its
	 * frame clock starts when we listen again.  The lease still runs: a
	 * peer that takes none of our replies renews nothing. */
	blocked = conn_blocked(c);
	if (blocked)
		c->last_rx_ns = now;
	/* Under a low-water mark a WRITE's bytes arrive without waking us;
	 * more of them queued is the peer's progress all the same. */
	if (!blocked && c->rcvlowat > 1) {
		int n = conn_queued(c);

		if (n > c->lowat_queued) {
			c->lowat_queued = n;
			c->last_rx_ns = now;
		}
	}
	lease_over = now > c->s->last_ns && now - c->s->last_ns >= lease_ns;
	frame_over = conn_mid_frame(c) && now > c->last_rx_ns && now - c->last_rx_ns >= frame_ns;
	if (!lease_over && !frame_over)
		return;
	if (!blocked && conn_input_waiting(c))
		return;
	if (lease_over) {
		c->srv->counters.lease_expiries++;
		conn_expire(c, "lease expired (limits.lease_timeout_ms)", now - c->s->last_ns);
	} else {
		c->srv->counters.frame_timeouts++;
		conn_expire(c, "partial frame stalled (limits.frame_timeout_ms)",
			    now - c->last_rx_ns);
	}
}
