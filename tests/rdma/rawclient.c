/*
 * rawclient.c - see rawclient.h.  The control half frames requests with the
 * shared codec and checks every reply header; the RDMA half is the plain
 * rdma_cm client sequence (resolve address, resolve route, PD/CQ/QP, connect)
 * with no knowledge of what rmemd does on its side.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "authmac.h"
#include "raw.h"
#include "rawclient.h"
#include "util.h"

#define CQ_DEPTH        512
#define SEND_DEPTH      256
#define RESOLVE_MS      10000
#define RC_MAX_PRIVATE  56        /* private data an RC connect request carries */
#define ATOMIC_LEN      8
#define MAX_SPLIT       64        /* work requests one rawclient_rdma() may post */

void rawclient_init(struct rawclient *c)
{
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->timeout_ms = 30000;
	c->last_event = -1;
}

/* ---- control stream -------------------------------------------------------- */

/* A broken stream is closed at once: the next frame boundary is unknown. */
static int stream_broken(struct rawclient *c, int rc)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	return rc;
}

static int ctl_send(struct rawclient *c, uint16_t opcode, const void *fixed, size_t fixed_len,
		    const void *data, size_t data_len, uint64_t *req_id)
{
	int rc;

	if (c->fd < 0)
		return -ENOTCONN;
	*req_id = ++c->next_req_id;
	rc = raw_send_frame(c->fd, opcode, *req_id, fixed, fixed_len, data, data_len);
	return rc < 0 ? stream_broken(c, rc) : 0;
}

/* Receives the reply to req_id (a payload of at most cap bytes) and checks
 * its header; on failure the stream is closed and *r holds nothing. */
static int ctl_recv(struct rawclient *c, uint16_t opcode, uint64_t req_id, struct raw_reply *r,
		    size_t cap)
{
	struct proto_hdr h;
	int rc = raw_recv_reply(c->fd, r, cap, c->timeout_ms);

	if (rc == 0 && (proto_hdr_decode(r->hdr, &h) < 0 || !(h.flags & PROTO_F_RESPONSE) ||
			h.req_id != req_id || (h.opcode != opcode && h.opcode != PROTO_OP_ERROR)))
		rc = -EPROTO;
	if (rc < 0) {
		raw_reply_release(r);
		return stream_broken(c, rc);
	}
	return 0;
}

/*
 * One request with a small reply: the whole reply payload lands in rep (at
 * most cap bytes), its length in *rep_len.  An ERROR frame gives its status.
 */
static int ctl_call(struct rawclient *c, uint16_t opcode, const void *req, size_t req_len,
		    uint8_t *rep, size_t cap, size_t *rep_len)
{
	struct raw_reply r;
	uint64_t req_id;
	int status = -EPROTO;
	int rc = ctl_send(c, opcode, req, req_len, NULL, 0, &req_id);

	if (rc == 0)
		rc = ctl_recv(c, opcode, req_id, &r, cap);
	if (rc < 0)
		return rc;
	memcpy(rep, r.payload, r.length);
	*rep_len = r.length;
	if (r.opcode == PROTO_OP_ERROR &&
	    (proto_status_decode(r.payload, r.length, &status) < 0 || status == 0))
		status = -EPROTO;
	rc = r.opcode == PROTO_OP_ERROR ? status : 0;
	raw_reply_release(&r);
	return rc;
}

/* A request answered by a status alone: the status, or a negative errno. */
static int status_call(struct rawclient *c, uint16_t opcode, const void *req, size_t req_len)
{
	uint8_t rep[PROTO_MAX_CTL];
	size_t rep_len = 0;
	int status = 0;
	int rc = ctl_call(c, opcode, req, req_len, rep, sizeof rep, &rep_len);

	if (rc == 0)
		rc = proto_status_decode(rep, rep_len, &status);
	return rc < 0 ? rc : status;
}

/* A request answered by a region (ALLOC's reply) into *out: the status, or a
 * negative errno. */
static int region_call(struct rawclient *c, uint16_t opcode, const void *req, size_t req_len,
		       struct proto_region *out)
{
	uint8_t rep[PROTO_MAX_CTL];
	size_t rep_len = 0;
	int status = 0;
	int rc = ctl_call(c, opcode, req, req_len, rep, sizeof rep, &rep_len);

	if (rc == 0)
		rc = proto_alloc_rep_decode(rep, rep_len, &status, out);
	return rc < 0 ? rc : status;
}

static int tcp_connect(const char *host, uint16_t port)
{
	int fd = raw_connect(host, port), one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static int open_stream(struct rawclient *c, const char *host, uint16_t port, int timeout_ms)
{
	int rc;

	if (strlen(host) >= sizeof c->host)
		return -ENAMETOOLONG;
	memcpy(c->host, host, strlen(host) + 1);
	c->timeout_ms = timeout_ms;
	rc = tcp_connect(host, port);
	if (rc < 0)
		return rc;
	c->fd = rc;
	return 0;
}

/* HELLO asks for the resume token (c->hello.resume_token): a restart test
 * takes the session back with it (rawclient_resume). */
static int say_hello(struct rawclient *c)
{
	struct proto_hello_req req = { .client_version = PROTO_VERSION, .pid = (uint32_t)getpid(),
				       .features = PROTO_HELLO_F_RESUMABLE };
	uint8_t out[PROTO_HELLO_REQ_LEN], rep[PROTO_MAX_CTL];
	size_t rep_len = 0;
	int status = 0, rc;

	rc = ctl_call(c, PROTO_OP_HELLO, out, proto_hello_req_encode(out, &req), rep, sizeof rep,
		      &rep_len);
	if (rc < 0)
		goto fail;
	rc = proto_hello_rep_decode(rep, rep_len, &status, &c->hello);
	if (rc == 0)
		rc = status;
	if (rc == 0)
		return 0;
fail:
	stream_broken(c, rc);
	return rc;
}

int rawclient_open(struct rawclient *c, const char *host, uint16_t port, int timeout_ms)
{
	int rc = open_stream(c, host, port, timeout_ms);

	return rc < 0 ? rc : say_hello(c);
}

int rawclient_resume(struct rawclient *c, const char *host, uint16_t port, int timeout_ms,
		     uint64_t session_id, const uint8_t token[PROTO_RESUME_TOKEN_LEN])
{
	struct proto_resume_req req = { .session_id = session_id, .client_version = PROTO_VERSION,
					.features = PROTO_HELLO_F_RESUMABLE,
					.pid = (uint32_t)getpid() };
	uint8_t out[PROTO_RESUME_REQ_LEN], rep[PROTO_MAX_CTL];
	size_t rep_len = 0;
	int status = 0, rc = open_stream(c, host, port, timeout_ms);

	if (rc < 0)
		return rc;
	memcpy(req.resume_token, token, PROTO_RESUME_TOKEN_LEN);
	rc = ctl_call(c, PROTO_OP_RESUME, out, proto_resume_req_encode(out, &req), rep, sizeof rep,
		      &rep_len);
	if (rc == 0)
		rc = proto_hello_rep_decode(rep, rep_len, &status, &c->hello);
	return rc == 0 ? status : rc;
}

int rawclient_rekey(struct rawclient *c, uint64_t id, struct proto_region *out)
{
	struct proto_rekey_req req = { .id = id };
	uint8_t buf[PROTO_REKEY_REQ_LEN];

	return region_call(c, PROTO_OP_REKEY, buf, proto_rekey_req_encode(buf, &req), out);
}

static int authenticate(struct rawclient *c, const char *tenant, const uint8_t *secret,
			size_t secret_len)
{
	struct proto_auth_begin_req req = { .tenant = { 0 } };
	struct proto_auth_begin_rep brep;
	uint8_t out[PROTO_AUTH_BEGIN_REQ_LEN], rep[PROTO_MAX_CTL];
	uint8_t mac[PROTO_MAC_LEN], theirs[PROTO_MAC_LEN];
	size_t rep_len = 0;
	int status = 0, rc;

	if (strlen(tenant) >= sizeof req.tenant || sodium_init() < 0)
		return -EINVAL;
	memcpy(req.tenant, tenant, strlen(tenant));
	randombytes_buf(req.client_nonce, sizeof req.client_nonce);
	rc = ctl_call(c, PROTO_OP_AUTH_BEGIN, out, proto_auth_begin_req_encode(out, &req), rep,
		      sizeof rep, &rep_len);
	if (rc == 0)
		rc = proto_auth_begin_rep_decode(rep, rep_len, &status, &brep);
	if (rc == 0)
		rc = status;
	if (rc < 0)
		return rc;
	authmac_compute(secret, secret_len, PROTO_AUTH_CLIENT, tenant, brep.server_nonce,
		 req.client_nonce, brep.session_id, mac);
	rc = ctl_call(c, PROTO_OP_AUTH, mac, sizeof mac, rep, sizeof rep, &rep_len);
	if (rc == 0)
		rc = proto_auth_rep_decode(rep, rep_len, &status, theirs);
	if (rc == 0)
		rc = status;
	if (rc < 0)
		return rc;
	authmac_compute(secret, secret_len, PROTO_AUTH_SERVER, tenant, brep.server_nonce,
		 req.client_nonce, brep.session_id, mac);
	return sodium_memcmp(mac, theirs, sizeof mac) == 0 ? 0 : -EACCES;
}

int rawclient_open_tenant(struct rawclient *c, const char *host, uint16_t port, int timeout_ms,
			  const char *tenant, const void *secret, size_t secret_len)
{
	int rc = open_stream(c, host, port, timeout_ms);

	if (rc == 0)
		rc = authenticate(c, tenant, secret, secret_len);
	if (rc < 0) {
		stream_broken(c, rc);
		return rc;
	}
	return say_hello(c);
}

int rawclient_ping(struct rawclient *c)
{
	return status_call(c, PROTO_OP_PING, NULL, 0);
}

int rawclient_alloc(struct rawclient *c, uint64_t size, struct proto_region *out)
{
	struct proto_alloc_req req = { .size = size };
	uint8_t buf[PROTO_ALLOC_REQ_LEN];

	return region_call(c, PROTO_OP_ALLOC, buf, proto_alloc_req_encode(buf, &req), out);
}

int rawclient_free(struct rawclient *c, const struct proto_region *r)
{
	struct proto_free_req req = { .id = r->id, .rkey = r->rkey };
	uint8_t buf[PROTO_FREE_REQ_LEN];

	return status_call(c, PROTO_OP_FREE, buf, proto_free_req_encode(buf, &req));
}

int rawclient_name(struct rawclient *c, uint16_t opcode, const char *name, uint64_t size,
		   uint32_t flags, struct proto_region *out)
{
	struct proto_name_req req = { .size = size, .flags = flags };
	uint8_t buf[PROTO_NAME_REQ_FIXED + PROTO_NAME_MAX];
	size_t len = strlen(name), n;

	if (len == 0 || len > PROTO_NAME_MAX)
		return -EINVAL;
	req.name_len = (uint16_t)len;
	memcpy(req.name, name, len);
	n = proto_name_req_encode(buf, opcode, &req);
	return opcode == PROTO_OP_UNLINK ? status_call(c, opcode, buf, n) :
					   region_call(c, opcode, buf, n, out);
}

int rawclient_stats(struct rawclient *c, struct proto_stats *out)
{
	uint8_t rep[PROTO_MAX_CTL];
	size_t rep_len = 0;
	int status = 0;
	int rc = ctl_call(c, PROTO_OP_STATS, NULL, 0, rep, sizeof rep, &rep_len);

	if (rc == 0)
		rc = proto_stats_rep_decode(rep, rep_len, &status, out);
	return rc < 0 ? rc : status;
}

static size_t io_chunk(const struct rawclient *c, size_t left)
{
	size_t max = c->hello.max_io ? c->hello.max_io : PROTO_MAX_IO;

	return left < max ? left : max;
}

int rawclient_tcp_write(struct rawclient *c, const struct proto_region *r, uint64_t off,
			const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		struct proto_io_req req = { .id = r->id, .offset = off, .rkey = r->rkey };
		uint8_t fixed[PROTO_IO_REQ_LEN];
		size_t n = io_chunk(c, len);
		struct raw_reply rep;
		uint64_t req_id;
		int status = 0;
		int rc = ctl_send(c, PROTO_OP_WRITE, fixed,
				  proto_io_req_encode(fixed, PROTO_OP_WRITE, &req), p, n, &req_id);

		if (rc == 0)
			rc = ctl_recv(c, PROTO_OP_WRITE, req_id, &rep, PROTO_STATUS_LEN);
		if (rc < 0)
			return rc;
		if (rep.length != PROTO_STATUS_LEN) {
			raw_reply_release(&rep);
			return stream_broken(c, -EPROTO);
		}
		rc = proto_status_decode(rep.payload, rep.length, &status);
		raw_reply_release(&rep);
		if (rc < 0 || status < 0)
			return rc < 0 ? rc : status;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

int rawclient_tcp_read(struct rawclient *c, const struct proto_region *r, uint64_t off,
		       void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		size_t n = io_chunk(c, len), data_len = 0;
		struct proto_io_req req = {
			.id = r->id, .offset = off, .rkey = r->rkey, .length = (uint32_t)n,
		};
		uint8_t fixed[PROTO_IO_REQ_LEN];
		struct raw_reply rep;
		uint64_t req_id;
		int status = 0;
		size_t fixed_len = proto_io_req_encode(fixed, PROTO_OP_READ, &req);
		int rc = ctl_send(c, PROTO_OP_READ, fixed, fixed_len, NULL, 0, &req_id);

		if (rc == 0)
			rc = ctl_recv(c, PROTO_OP_READ, req_id, &rep, PROTO_STATUS_LEN + n);
		if (rc < 0)
			return rc;
		rc = rep.opcode == PROTO_OP_ERROR ?
		     proto_status_decode(rep.payload, rep.length, &status) :
		     proto_read_rep_decode(rep.payload, rep.length, &status, &data_len);
		if (rc == 0 && status == 0 && data_len != n)
			rc = -EPROTO;
		if (rc == 0 && status == 0)
			memcpy(p, rep.payload + PROTO_STATUS_LEN, n);
		raw_reply_release(&rep);
		if (rc < 0)
			return stream_broken(c, rc);
		if (status < 0)
			return status;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- rdma_cm ------------------------------------------------------------------ */

static int cm_event_errno(enum rdma_cm_event_type type)
{
	switch (type) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNABORTED;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ECONNRESET;
	default:
		return -EPROTO;
	}
}

/* Waits for the next CM event: 0 when it is want, else what it means. */
static int cm_wait(struct rawclient *c, enum rdma_cm_event_type want, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	struct rdma_cm_event *ev;

	for (;;) {
		struct pollfd pfd = { .fd = c->cm_channel->fd, .events = POLLIN };
		int left = ms_left(deadline), n;

		if (left == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		if (rdma_get_cm_event(c->cm_channel, &ev) == 0)
			break;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	c->last_event = ev->event;
	c->last_event_status = ev->status;
	rdma_ack_cm_event(ev);
	if (c->last_event == want)
		return 0;
	return cm_event_errno(c->last_event);
}

static int cm_resolve(struct rawclient *c, const char *host, uint16_t port, int timeout_ms)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai;
	char service[8];
	int rc;

	snprintf(service, sizeof service, "%u", port);
	if (getaddrinfo(host, service, &hints, &ai) != 0)
		return -EINVAL;
	rc = rdma_resolve_addr(c->cm_id, NULL, ai->ai_addr, RESOLVE_MS) ? -errno : 0;
	freeaddrinfo(ai);
	if (rc == 0)
		rc = cm_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms);
	if (rc == 0)
		rc = rdma_resolve_route(c->cm_id, RESOLVE_MS) ? -errno : 0;
	if (rc == 0)
		rc = cm_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms);
	return rc;
}

/* -errno of the verbs call that just failed; some set no errno. */
static int verbs_err(void)
{
	return errno ? -errno : -EIO;
}

static uint8_t clamp_u8(int v)
{
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* PD, CQ with its channel, QP and the local buffer, on the resolved device. */
static int make_verbs(struct rawclient *c, size_t buf_len, struct ibv_device_attr *dev)
{
	struct ibv_context *ctx = c->cm_id->verbs;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC };
	struct ibv_port_attr port;
	size_t alloc_len = (buf_len + 4095) & ~(size_t)4095;
	int fl;

	snprintf(c->dev_name, sizeof c->dev_name, "%s", ibv_get_device_name(ctx->device));
	errno = 0;
	if (ibv_query_device(ctx, dev) || ibv_query_port(ctx, c->cm_id->port_num, &port))
		return verbs_err();
	c->max_msg_sz = port.max_msg_sz;
	c->send_depth = dev->max_qp_wr < SEND_DEPTH ? (uint32_t)dev->max_qp_wr : SEND_DEPTH;
	c->pd = ibv_alloc_pd(ctx);
	c->comp_channel = c->pd ? ibv_create_comp_channel(ctx) : NULL;
	if (!c->comp_channel)
		return verbs_err();
	fl = fcntl(c->comp_channel->fd, F_GETFL);
	if (fl < 0 || fcntl(c->comp_channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	c->cq = ibv_create_cq(ctx, CQ_DEPTH, c, c->comp_channel, 0);
	if (!c->cq)
		return verbs_err();
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.cap.max_send_wr = c->send_depth;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->cm_id, c->pd, &qa))
		return -errno;
	c->buf = aligned_alloc(4096, alloc_len ? alloc_len : 4096);
	if (!c->buf)
		return -ENOMEM;
	memset(c->buf, 0, alloc_len);
	c->buf_len = buf_len;
	c->mr = ibv_reg_mr(c->pd, c->buf, buf_len ? buf_len : 1, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return verbs_err();
	return 0;
}

int rawclient_connect_rdma(struct rawclient *c, const char *host, uint16_t rdma_port,
			   const void *private_data, uint8_t private_len, size_t buf_len)
{
	struct ibv_device_attr dev;
	struct rdma_conn_param cp = { 0 };
	int rc;

	if (c->cm_id)
		return -EISCONN;
	if (private_len > RC_MAX_PRIVATE)
		return -EMSGSIZE;
	c->cm_channel = rdma_create_event_channel();
	if (!c->cm_channel)
		return -errno;
	if (rdma_create_id(c->cm_channel, &c->cm_id, c, RDMA_PS_TCP)) {
		rc = -errno;
		c->cm_id = NULL;
		goto fail;
	}
	rc = cm_resolve(c, host, rdma_port, c->timeout_ms);
	if (rc == 0)
		rc = make_verbs(c, buf_len, &dev);
	if (rc < 0)
		goto fail;
	/* The client issues RDMA READ and atomics: as many in flight as allowed. */
	cp.initiator_depth = clamp_u8(dev.max_qp_init_rd_atom);
	cp.responder_resources = clamp_u8(dev.max_qp_rd_atom);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	cp.private_data = private_data;
	cp.private_data_len = private_len;
	if (rdma_connect(c->cm_id, &cp)) {
		rc = -errno;
		goto fail;
	}
	rc = cm_wait(c, RDMA_CM_EVENT_ESTABLISHED, c->timeout_ms);
	if (rc < 0)
		goto fail;
	c->connected = true;
	return 0;
fail:
	rawclient_detach(c);
	return rc;
}

int rawclient_attach(struct rawclient *c, size_t buf_len)
{
	struct proto_attach a = {
		.session_id = c->hello.session_id,
		.attach_token = c->hello.attach_token,
	};
	uint8_t pd[PROTO_ATTACH_LEN];

	if (c->hello.rdma_port == 0)
		return -EOPNOTSUPP;
	return rawclient_connect_rdma(c, c->host, c->hello.rdma_port, pd,
				      (uint8_t)proto_attach_encode(pd, &a), buf_len);
}

int rawclient_wait_cm_event(struct rawclient *c, enum rdma_cm_event_type want, int timeout_ms)
{
	if (!c->cm_channel)
		return -ENOTCONN;
	return cm_wait(c, want, timeout_ms);
}

void rawclient_detach(struct rawclient *c)
{
	if (c->cm_id && c->connected)
		rdma_disconnect(c->cm_id);
	c->connected = false;
	if (c->cm_id && c->cm_id->qp)
		rdma_destroy_qp(c->cm_id);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	c->mr = NULL;
	free(c->buf);
	c->buf = NULL;
	c->buf_len = 0;
	if (c->cq)
		ibv_destroy_cq(c->cq);
	c->cq = NULL;
	c->cq_armed = false;
	if (c->comp_channel)
		ibv_destroy_comp_channel(c->comp_channel);
	c->comp_channel = NULL;
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	c->pd = NULL;
	if (c->cm_id)
		rdma_destroy_id(c->cm_id);
	c->cm_id = NULL;
	if (c->cm_channel)
		rdma_destroy_event_channel(c->cm_channel);
	c->cm_channel = NULL;
}

void rawclient_close(struct rawclient *c)
{
	rawclient_detach(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* ---- work requests ------------------------------------------------------------- */

const char *rawclient_opcode_name(enum rawclient_opcode op)
{
	switch (op) {
	case RAWCLIENT_WRITE:
		return "RDMA WRITE";
	case RAWCLIENT_READ:
		return "RDMA READ";
	case RAWCLIENT_CAS:
		return "ATOMIC_CMP_AND_SWP";
	case RAWCLIENT_FAA:
		return "ATOMIC_FETCH_AND_ADD";
	}
	return "?";
}

static size_t op_len(const struct rawclient_op *op)
{
	return op->opcode == RAWCLIENT_CAS || op->opcode == RAWCLIENT_FAA ? ATOMIC_LEN : op->len;
}

int rawclient_post(struct rawclient *c, const struct rawclient_op *op, uint64_t wr_id)
{
	size_t len = op_len(op);
	struct ibv_sge sge = { .length = (uint32_t)len };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad = NULL;

	if (!c->cm_id || !c->cm_id->qp || !c->mr)
		return -ENOTCONN;
	if (op->local_off > c->buf_len || len > c->buf_len - op->local_off ||
	    len > c->max_msg_sz)
		return -EINVAL;
	sge.addr = (uintptr_t)(c->buf + op->local_off);
	sge.lkey = c->mr->lkey;
	switch (op->opcode) {
	case RAWCLIENT_WRITE:
	case RAWCLIENT_READ:
		wr.opcode = op->opcode == RAWCLIENT_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = op->remote_addr;
		wr.wr.rdma.rkey = op->rkey;
		break;
	case RAWCLIENT_CAS:
	case RAWCLIENT_FAA:
		wr.opcode = op->opcode == RAWCLIENT_CAS ? IBV_WR_ATOMIC_CMP_AND_SWP :
			    IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = op->remote_addr;
		wr.wr.atomic.rkey = op->rkey;
		wr.wr.atomic.compare_add = op->compare_add;
		wr.wr.atomic.swap = op->swap;
		break;
	default:
		return -EINVAL;
	}
	return -ibv_post_send(c->cm_id->qp, &wr, &bad);
}

/* Consumes one completion channel event; -EAGAIN when none is there. */
static int take_cq_event(struct rawclient *c)
{
	struct ibv_cq *cq;
	void *ctx;

	if (ibv_get_cq_event(c->comp_channel, &cq, &ctx))
		return -EAGAIN;
	ibv_ack_cq_events(cq, 1);
	c->cq_armed = false;
	return 0;
}

int rawclient_poll(struct rawclient *c, struct ibv_wc *wc, int max, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	if (!c->cq)
		return -ENOTCONN;
	for (;;) {
		struct pollfd pfd = { .fd = c->comp_channel->fd, .events = POLLIN };
		int n = ibv_poll_cq(c->cq, max, wc), left;

		if (n != 0)
			return n < 0 ? -EIO : n;
		if (!c->cq_armed) {
			/* Armed, then polled once more: a completion that came in
			 * between would raise no event. */
			if (ibv_req_notify_cq(c->cq, 0))
				return -EIO;
			c->cq_armed = true;
			continue;
		}
		left = ms_left(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			take_cq_event(c);
	}
}

int rawclient_rdma(struct rawclient *c, const struct rawclient_op *op,
		   enum ibv_wc_status *status)
{
	size_t len = op_len(op), done = 0;
	uint64_t first = c->next_wr_id, deadline;
	unsigned posted = 0, completed = 0;
	int rc = 0;

	*status = IBV_WC_SUCCESS;
	if (!c->max_msg_sz)
		return -ENOTCONN;
	do {
		struct rawclient_op part = *op;

		part.len = len - done < c->max_msg_sz ? len - done : c->max_msg_sz;
		part.remote_addr = op->remote_addr + done;
		part.local_off = op->local_off + done;
		if (posted == MAX_SPLIT || posted == c->send_depth)
			return -E2BIG;
		rc = rawclient_post(c, &part, c->next_wr_id++);
		if (rc < 0)
			break;
		posted++;
		done += part.len;
	} while (done < len);

	deadline = now_ms() + (uint64_t)c->timeout_ms;
	while (completed < posted) {
		struct ibv_wc wc[16];
		int n = rawclient_poll(c, wc, 16, ms_left(deadline) ? ms_left(deadline) : 1);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			/* Late completions of an earlier call that timed out. */
			if (wc[i].wr_id < first)
				continue;
			completed++;
			if (wc[i].status != IBV_WC_SUCCESS && *status == IBV_WC_SUCCESS)
				*status = wc[i].status;
		}
	}
	return rc;
}
