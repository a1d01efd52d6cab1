/*
 * daemon_smoke.c - a debug client for rmemd's RDMA side (daemon/rdma.c), run in
 * the test VM against a running rmemd:
 *
 *   daemon_smoke HOST TCP_PORT window|region-mr [hold]
 *
 * Speaks the control protocol itself over TCP and drives librdmacm/libibverbs
 * directly, so it can hand the NIC keys that are not its own.  Checks: the
 * HELLO reply; refused attaches (wrong token, garbage, a second attach); RDMA
 * WRITE/READ/FAA through a region's key and the same key on the TCP path; a
 * second client's queue pair with the first client's (addr, rkey) gets
 * IBV_WC_REM_ACCESS_ERR and the bytes stay; a freed key stops working; a
 * client whose TCP stream closes is disconnected; used bytes drain to 0.
 * With "hold": attaches, allocates HOLD_REGIONS regions, frees every other one,
 * says "# holding" and waits for the daemon to stop: its shutdown must
 * disconnect the queue pair and close the stream.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "proto.h"
#include "tap.h"

#define WAIT_MS   20000
#define BUF_LEN   8192
#define REGION    4096

struct client {
	int fd;
	uint64_t req_id;
	struct proto_hello_rep hello;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static const char *host;
static const char *tcp_port;

/* ---- control stream ----------------------------------------------------------- */

static int read_full(int fd, void *p, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (uint8_t *)p + got, len - got);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* One request, one reply; the reply payload goes to rep (at most cap bytes). */
static int call(struct client *c, uint16_t op, const uint8_t *req, size_t len, uint8_t *rep,
		size_t cap, size_t *rep_len)
{
	uint8_t frame[PROTO_HDR_LEN + PROTO_MAX_CTL];
	struct proto_hdr h = { .opcode = op, .length = (uint32_t)len, .req_id = ++c->req_id };

	proto_hdr_encode(frame, &h);
	memcpy(frame + PROTO_HDR_LEN, req, len);
	if (write(c->fd, frame, PROTO_HDR_LEN + len) != (ssize_t)(PROTO_HDR_LEN + len))
		return -1;
	if (read_full(c->fd, frame, PROTO_HDR_LEN) || proto_hdr_decode(frame, &h) ||
	    h.length > cap || read_full(c->fd, rep, h.length))
		return -1;
	*rep_len = h.length;
	return h.opcode == op ? 0 : -1;
}

static int tcp_open(struct client *c)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct proto_hello_req hr = { .client_version = PROTO_VERSION, .pid = (uint32_t)getpid() };
	uint8_t req[PROTO_HELLO_REQ_LEN], rep[PROTO_MAX_CTL];
	size_t len;
	int status;

	memset(c, 0, sizeof *c);
	if (getaddrinfo(host, tcp_port, &hints, &ai))
		return -1;
	c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen)) {
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	if (call(c, PROTO_OP_HELLO, req, proto_hello_req_encode(req, &hr), rep, sizeof rep, &len))
		return -1;
	if (proto_hello_rep_decode(rep, len, &status, &c->hello) || status)
		return -1;
	return 0;
}

static int do_alloc(struct client *c, uint64_t size, struct proto_region *r)
{
	struct proto_alloc_req ar = { .size = size };
	uint8_t req[PROTO_ALLOC_REQ_LEN], rep[PROTO_MAX_CTL];
	size_t len;
	int status;

	if (call(c, PROTO_OP_ALLOC, req, proto_alloc_req_encode(req, &ar), rep, sizeof rep, &len))
		return -EPROTO;
	if (proto_alloc_rep_decode(rep, len, &status, r))
		return -EPROTO;
	return status;
}

static int do_free(struct client *c, const struct proto_region *r)
{
	struct proto_free_req fr = { .id = r->id, .rkey = r->rkey };
	uint8_t req[PROTO_FREE_REQ_LEN], rep[PROTO_MAX_CTL];
	size_t len;
	int status;

	if (call(c, PROTO_OP_FREE, req, proto_free_req_encode(req, &fr), rep, sizeof rep, &len))
		return -EPROTO;
	if (proto_status_decode(rep, len, &status))
		return -EPROTO;
	return status;
}

static int tcp_read(struct client *c, const struct proto_region *r, uint8_t *out, uint32_t n)
{
	struct proto_io_req io = { .id = r->id, .rkey = r->rkey, .length = n };
	uint8_t req[PROTO_IO_REQ_LEN], rep[PROTO_STATUS_LEN + PROTO_MAX_CTL];
	size_t len, data;
	int status;

	if (call(c, PROTO_OP_READ, req, proto_io_req_encode(req, PROTO_OP_READ, &io), rep,
		 sizeof rep, &len))
		return -EPROTO;
	if (proto_read_rep_decode(rep, len, &status, &data))
		return -EPROTO;
	if (!status)
		memcpy(out, rep + PROTO_STATUS_LEN, data < n ? data : n);
	return status;
}

static uint64_t used_bytes(struct client *c)
{
	uint8_t rep[PROTO_MAX_CTL];
	struct proto_stats st;
	size_t len;
	int status;

	if (call(c, PROTO_OP_STATS, NULL, 0, rep, sizeof rep, &len) ||
	    proto_stats_rep_decode(rep, len, &status, &st) || status)
		return UINT64_MAX;
	return st.v[PROTO_STAT_USED_BYTES];
}

/* ---- RDMA ------------------------------------------------------------------- */

static int next_event(struct client *c, enum rdma_cm_event_type *type)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, WAIT_MS) != 1 || rdma_get_cm_event(c->ch, &ev))
		return -1;
	*type = ev->event;
	rdma_ack_cm_event(ev);
	return 0;
}

/* Connects a queue pair with pdata as private data; returns the event that
 * ended the attempt (ESTABLISHED, REJECTED...) or -1. */
static int rdma_attach(struct client *c, const uint8_t *pdata, uint8_t plen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_conn_param cp = { .private_data = pdata, .private_data_len = plen,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct ibv_device_attr da;
	enum rdma_cm_event_type t;
	char port[8];

	snprintf(port, sizeof port, "%u", c->hello.rdma_port);
	c->ch = rdma_create_event_channel();
	if (!c->ch || rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP))
		return -1;
	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, WAIT_MS)) {
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	if (next_event(c, &t) || t != RDMA_CM_EVENT_ADDR_RESOLVED)
		return -1;
	if (rdma_resolve_route(c->id, WAIT_MS) || next_event(c, &t) ||
	    t != RDMA_CM_EVENT_ROUTE_RESOLVED)
		return -1;
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, 32, NULL, NULL, 0) : NULL;
	c->buf = aligned_alloc(4096, BUF_LEN);
	if (!c->cq || !c->buf)
		return -1;
	c->mr = ibv_reg_mr(c->pd, c->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = qa.recv_cq = c->cq;
	if (!c->mr || rdma_create_qp(c->id, c->pd, &qa) || ibv_query_device(c->id->verbs, &da))
		return -1;
	/* The client issues READs and atomics and serves none: the daemon's
	 * responder_resources must follow our initiator_depth. */
	cp.initiator_depth = (uint8_t)(da.max_qp_init_rd_atom > 16 ? 16 : da.max_qp_init_rd_atom);
	cp.responder_resources = 0;
	if (rdma_connect(c->id, &cp) || next_event(c, &t))
		return -1;
	return (int)t;
}

static int attach_as(struct client *c, uint64_t session, uint64_t token)
{
	struct proto_attach at = { .session_id = session, .attach_token = token };
	uint8_t pdata[PROTO_ATTACH_LEN];

	return rdma_attach(c, pdata, (uint8_t)proto_attach_encode(pdata, &at));
}

/* One signaled work request on the client's QP; returns its completion status. */
static int rdma_op(struct client *c, enum ibv_wr_opcode op, uint64_t addr, uint32_t rkey,
		   uint32_t local_off, uint32_t len, uint64_t add)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->buf + local_off), .length = len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = addr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = addr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(c->id->qp, &wr, &bad))
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > WAIT_MS / 1000)
			return -1;
		usleep(100);
	}
	return n < 0 ? -1 : (int)wc.status;
}

static const char *st(int s)
{
	return s < 0 ? "no completion" : ibv_wc_status_str((enum ibv_wc_status)s);
}

static void client_close(struct client *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c->buf);
	if (c->fd > 0)
		close(c->fd);
	c->fd = 0;
	memset(c, 0, sizeof *c);
}

/* ---- the checks ------------------------------------------------------------------ */

/* Waits for the next rdma_cm event of c; "no event" after WAIT_MS. */
static const char *event_name(struct client *c)
{
	enum rdma_cm_event_type t;

	return next_event(c, &t) ? "no event" : rdma_event_str(t);
}

static int attached_client(struct client *c, const char *who)
{
	int rc = tcp_open(c);

	if (rc == 0)
		rc = attach_as(c, c->hello.session_id, c->hello.attach_token);
	return ok(rc == RDMA_CM_EVENT_ESTABLISHED, "client %s: HELLO and attach (%s)", who,
		  rc < 0 ? "failed" : rdma_event_str(rc));
}

#define HOLD_REGIONS 300

static int hold(void)
{
	struct client h = { 0 };
	struct proto_region r[HOLD_REGIONS];
	uint8_t byte;
	int n = 0, rc = 0;

	if (!attached_client(&h, "H"))
		return tap_done();
	for (; n < HOLD_REGIONS && rc == 0; n++)
		rc = do_alloc(&h, 4096, &r[n]);
	ok(rc == 0, "H: %d ALLOCs (%d)", HOLD_REGIONS, rc);
	for (int i = 0; i < n && rc == 0; i += 2)
		rc = do_free(&h, &r[i]);
	ok(rc == 0, "H: every other region freed (%d)", rc);
	h.buf[0] = 0x5a;
	rc = rdma_op(&h, IBV_WR_RDMA_WRITE, r[n - 1].addr, r[n - 1].rkey, 0, 4096, 0);
	ok(rc == IBV_WC_SUCCESS, "H: WRITE to its last region: %s", st(rc));
	diag("holding");
	{
		const char *e = event_name(&h);

		ok(!strcmp(e, "RDMA_CM_EVENT_DISCONNECTED"), "H: the daemon's stop disconnects "
		   "its QP: %s", e);
	}
	ok(read(h.fd, &byte, 1) == 0, "H: and closes its stream");
	client_close(&h);
	return tap_done();
}

int main(int argc, char **argv)
{
	struct client a = { 0 }, b = { 0 }, c = { 0 }, x = { 0 };
	struct proto_region ra, rc1;
	uint8_t expect_mode, tcpbuf[REGION];
	uint64_t old = 0, got = 0, used = 0;
	int rc, s;

	if (argc != 4 && argc != 5)
		tap_skip_all("usage: daemon_smoke HOST TCP_PORT window|region-mr [hold]");
	host = argv[1];
	tcp_port = argv[2];
	expect_mode = !strcmp(argv[3], "window") ? PROTO_KEYS_WINDOW : PROTO_KEYS_REGION_MR;
	if (argc == 5)
		return hold();

	if (!ok(tcp_open(&a) == 0, "client A: TCP + HELLO"))
		return tap_done();
	ok(a.hello.rdma_port != 0, "HELLO: rdma_port %u", a.hello.rdma_port);
	ok(a.hello.key_mode == expect_mode, "HELLO: key_mode %u (want %u)", a.hello.key_mode,
	   expect_mode);
	ok(a.hello.attach_token != 0, "HELLO: attach token %016llx",
	   (unsigned long long)a.hello.attach_token);

	/* Refused attaches leave the session as it was. */
	x.hello = a.hello;
	rc = attach_as(&x, a.hello.session_id, a.hello.attach_token ^ 1);
	ok(rc == RDMA_CM_EVENT_REJECTED, "wrong token: %s", rc < 0 ? "?" : rdma_event_str(rc));
	client_close(&x);
	x.hello = a.hello;
	rc = rdma_attach(&x, (const uint8_t *)"not an rmem attach message....", 30);
	ok(rc == RDMA_CM_EVENT_REJECTED, "garbage private data: %s",
	   rc < 0 ? "?" : rdma_event_str(rc));
	client_close(&x);
	x.hello = a.hello;
	rc = attach_as(&x, a.hello.session_id + 1000, a.hello.attach_token);
	ok(rc == RDMA_CM_EVENT_REJECTED, "unknown session: %s", rc < 0 ? "?" : rdma_event_str(rc));
	client_close(&x);

	rc = attach_as(&a, a.hello.session_id, a.hello.attach_token);
	ok(rc == RDMA_CM_EVENT_ESTABLISHED, "client A attaches: %s",
	   rc < 0 ? "?" : rdma_event_str(rc));
	x.hello = a.hello;
	rc = attach_as(&x, a.hello.session_id, a.hello.attach_token);
	ok(rc == RDMA_CM_EVENT_REJECTED, "second attach of A: %s",
	   rc < 0 ? "?" : rdma_event_str(rc));
	client_close(&x);

	rc = do_alloc(&a, REGION, &ra);
	ok(rc == 0, "A: ALLOC %d: id %llu addr %#llx rkey %#x", rc, (unsigned long long)ra.id,
	   (unsigned long long)ra.addr, ra.rkey);

	/* Write, read back, atomics, and the same key over TCP. */
	for (int i = 0; i < REGION; i++)
		a.buf[i] = (uint8_t)(i * 7 + 1);
	s = rdma_op(&a, IBV_WR_RDMA_WRITE, ra.addr, ra.rkey, 0, REGION, 0);
	ok(s == IBV_WC_SUCCESS, "A: RDMA WRITE 4096 bytes: %s", st(s));
	memset(a.buf + REGION, 0, REGION);
	s = rdma_op(&a, IBV_WR_RDMA_READ, ra.addr, ra.rkey, REGION, REGION, 0);
	ok(s == IBV_WC_SUCCESS && !memcmp(a.buf, a.buf + REGION, REGION),
	   "A: RDMA READ gives back what was written: %s", st(s));
	rc = tcp_read(&a, &ra, tcpbuf, REGION);
	ok(rc == 0 && !memcmp(a.buf, tcpbuf, REGION), "A: TCP READ with the NIC key: %d", rc);
	memcpy(&old, a.buf + 64, 8);
	s = rdma_op(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, ra.addr + 64, ra.rkey, 2 * REGION - 8, 8, 5);
	memcpy(&got, a.buf + 2 * REGION - 8, 8);
	ok(s == IBV_WC_SUCCESS && got == old, "A: RDMA FAA returns the old value: %s", st(s));
	old += 5;
	memcpy(a.buf + 64, &old, 8); /* the bytes expected from now on */

	/* Another client's queue pair with A's (addr, rkey). */
	attached_client(&b, "B");
	memset(b.buf, 0xee, REGION);
	s = rdma_op(&b, IBV_WR_RDMA_WRITE, ra.addr, ra.rkey, 0, REGION, 0);
	ok(s == IBV_WC_REM_ACCESS_ERR, "B: RDMA WRITE with A's key: %s", st(s));
	memset(a.buf + REGION, 0, REGION);
	s = rdma_op(&a, IBV_WR_RDMA_READ, ra.addr, ra.rkey, REGION, REGION, 0);
	ok(s == IBV_WC_SUCCESS && !memcmp(a.buf, a.buf + REGION, REGION),
	   "A: the bytes are unchanged: %s", st(s));
	close(b.fd);
	b.fd = -1;
	diag("B after its TCP close: %s", event_name(&b));
	client_close(&b);

	/* Out of bounds with one's own key: 64 bytes past the region. */
	attached_client(&c, "C");
	rc = do_alloc(&c, REGION, &rc1);
	ok(rc == 0, "C: ALLOC %d", rc);
	s = rdma_op(&c, IBV_WR_RDMA_READ, rc1.addr, rc1.rkey, 0, REGION + 64, 0);
	if (expect_mode == PROTO_KEYS_REGION_MR)
		ok(s == IBV_WC_REM_ACCESS_ERR, "C: READ past its region: %s", st(s));
	else
		diag("window mode: READ past the region: %s (rxe checks no window bounds)",
		     st(s));
	client_close(&c);

	/* A freed key stops working. */
	rc = do_free(&a, &ra);
	ok(rc == 0, "A: FREE %d", rc);
	used = used_bytes(&a);
	diag("used bytes just after FREE: %llu (quarantined ones count)",
	     (unsigned long long)used);
	s = rdma_op(&a, IBV_WR_RDMA_READ, ra.addr, ra.rkey, REGION, 64, 0);
	ok(s == IBV_WC_REM_ACCESS_ERR, "A: READ with the freed key: %s", st(s));
	client_close(&a);

	/* A client whose TCP stream closes is disconnected. */
	attached_client(&x, "D");
	close(x.fd);
	x.fd = -1;
	{
		const char *e = event_name(&x);

		/* REJECTED when the daemon's side had not seen the RTU yet: the
		 * connection is cut all the same. */
		ok(!strcmp(e, "RDMA_CM_EVENT_DISCONNECTED") || !strcmp(e, "RDMA_CM_EVENT_REJECTED"),
		   "D's TCP close cuts its QP: %s", e);
	}
	client_close(&x);

	/* Everything comes back once the quarantine drains. */
	rc = tcp_open(&x);
	for (int i = 0; i < 50 && (used = used_bytes(&x)) != 0; i++)
		usleep(100000);
	ok(rc == 0 && used == 0, "used bytes drain to 0 (%llu)", (unsigned long long)used);
	client_close(&x);
	return tap_done();
}
