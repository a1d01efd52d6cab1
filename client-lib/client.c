/*
 * client.c - the public calls of librmem over the stream transport.
 *
 * One request at a time on a connection, except READ/WRITE chunks, which are
 * pipelined up to CLIENT_IO_WINDOW deep.  The daemon answers strictly in
 * request order, so every reply must match the oldest request in flight; a
 * reply that does not, a timeout, or EOF leaves the stream in an unknown
 * state, and the client is then broken for good (see struct rmem_client).
 */
#include "client.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "endpoint.h"
#include "tcp.h"

/* True when a caller's struct of opts_size bytes contains field. */
#define OPTS_HAS(opts_size, field) \
	((opts_size) >= offsetof(struct rmem_opts, field) + sizeof(((struct rmem_opts *)0)->field))

enum transport_choice {
	CHOICE_AUTO,
	CHOICE_TCP,
	CHOICE_RDMA,
};

struct connect_params {
	enum transport_choice choice;
	int timeout_ms;
};

/* ---- options --------------------------------------------------------------- */

void rmem_opts_init(struct rmem_opts *o, size_t size)
{
	if (!o)
		return;
	/* The caller's struct is size bytes long, possibly longer than ours:
	 * zero all of it so that fields we do not know read as 0. */
	memset(o, 0, size);
	if (!OPTS_HAS(size, size))
		return;
	o->size = size;
	if (OPTS_HAS(size, transport))
		o->transport = "auto";
	if (OPTS_HAS(size, timeout_ms))
		o->timeout_ms = CLIENT_DEFAULT_TIMEOUT_MS;
}

static int parse_transport(const char *name, enum transport_choice *choice)
{
	if (!name || strcmp(name, "auto") == 0)
		*choice = CHOICE_AUTO;
	else if (strcmp(name, "tcp") == 0)
		*choice = CHOICE_TCP;
	else if (strcmp(name, "rdma") == 0)
		*choice = CHOICE_RDMA;
	else
		return -EINVAL;
	return 0;
}

/* Reads only the fields that fit in the caller's o->size, so that programs
 * built against an older or newer rmem.h keep working. */
static int read_opts(const struct rmem_opts *o, struct connect_params *p)
{
	const char *transport = NULL;

	p->timeout_ms = CLIENT_DEFAULT_TIMEOUT_MS;
	if (o) {
		if (!OPTS_HAS(o->size, size))
			return -EINVAL;
		if (OPTS_HAS(o->size, transport))
			transport = o->transport;
		if (OPTS_HAS(o->size, timeout_ms))
			p->timeout_ms = o->timeout_ms;
	}
	return parse_transport(transport, &p->choice);
}

/*
 * Which path serves this endpoint with this transport choice.  There is no
 * RDMA path in this build: asking for it is -ENOTSUP, never a quiet TCP
 * fallback.  Contradictions (transport "tcp" with rdma://, "rdma" with
 * tcp:// or unix:) are -EINVAL.
 */
static int check_path(const struct endpoint *ep, enum transport_choice choice)
{
	switch (ep->kind) {
	case ENDPOINT_RDMA:
		return choice == CHOICE_TCP ? -EINVAL : -ENOTSUP;
	case ENDPOINT_TCP:
		if (choice != CHOICE_RDMA)
			return 0;
		return ep->explicit_scheme ? -EINVAL : -ENOTSUP;
	case ENDPOINT_UNIX:
		return choice == CHOICE_RDMA ? -EINVAL : 0;
	}
	return -EINVAL;
}

/* ---- framing --------------------------------------------------------------- */

/* The stream can no longer be trusted.  Shutting it down at once lets the
 * daemon end the session and free its regions without waiting for
 * rmem_close(); the descriptor itself stays until then. */
static int poison(struct rmem_client *c, int err)
{
	if (!c->broken && c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	c->broken = true;
	return err;
}

static int stream_send(struct rmem_client *c, struct iovec *iov, int iovcnt)
{
	int err = tcp_send_all(c->fd, iov, iovcnt, c->timeout_ms);

	return err ? poison(c, err) : 0;
}

static int stream_recv(struct rmem_client *c, void *buf, size_t len)
{
	int err = tcp_recv_all(c->fd, buf, len, c->timeout_ms);

	return err ? poison(c, err) : 0;
}

/* Sends header + fixed part + data as one frame; data goes straight from the
 * caller's buffer to the socket. */
static int send_frame(struct rmem_client *c, uint16_t opcode, const void *fixed,
		      size_t fixed_len, const void *data, size_t data_len, uint64_t *req_id)
{
	uint8_t hdr_buf[PROTO_HDR_LEN];
	struct proto_hdr h = {
		.opcode = opcode,
		.length = (uint32_t)(fixed_len + data_len),
		.req_id = c->next_req_id++,
	};
	struct iovec iov[3] = {
		{ .iov_base = hdr_buf, .iov_len = sizeof(hdr_buf) },
		{ .iov_base = (void *)fixed, .iov_len = fixed_len },
		{ .iov_base = (void *)data, .iov_len = data_len },
	};

	if (c->broken)
		return -ECONNRESET;
	proto_hdr_encode(hdr_buf, &h);
	*req_id = h.req_id;
	return stream_send(c, iov, 3);
}

/*
 * The daemon sends an ERROR frame when it could not decode a request, and
 * then closes the connection; so the status is returned and the client is
 * broken.  A header it could not decode is answered with req_id 0.
 */
static int recv_error_frame(struct rmem_client *c, const struct proto_hdr *h)
{
	uint8_t payload[PROTO_STATUS_LEN];
	int status = 0;
	int err;

	if (h->length != PROTO_STATUS_LEN)
		return poison(c, -EPROTO);
	err = stream_recv(c, payload, sizeof(payload));
	if (err)
		return err;
	if (proto_status_decode(payload, sizeof(payload), &status) < 0 || status == 0)
		return poison(c, -EPROTO);
	return poison(c, status);
}

/*
 * Reads the header of the reply to request req_id.  Returns 0 for the
 * expected reply (its payload is still on the wire), else a negative errno;
 * c->broken tells whether the stream is still in step.
 */
static int recv_reply_hdr(struct rmem_client *c, uint16_t opcode, uint64_t req_id,
			  struct proto_hdr *h)
{
	uint8_t raw[PROTO_HDR_LEN];
	int err = stream_recv(c, raw, sizeof(raw));

	if (err)
		return err;
	/* -EPROTO (another version) and every other decode error alike: the
	 * peer does not speak our protocol. */
	if (proto_hdr_decode(raw, h) != 0 || h->flags != PROTO_F_RESPONSE)
		return poison(c, -EPROTO);
	if (h->opcode == PROTO_OP_ERROR && (h->req_id == req_id || h->req_id == 0))
		return recv_error_frame(c, h);
	if (h->opcode != opcode || h->req_id != req_id)
		return poison(c, -EPROTO);
	return 0;
}

/* One control request; on success the reply payload is in c->rx and its
 * length in *reply_len. */
static int call(struct rmem_client *c, uint16_t opcode, const void *payload, size_t len,
		size_t *reply_len)
{
	struct proto_hdr h;
	uint64_t req_id;
	int err;

	err = send_frame(c, opcode, payload, len, NULL, 0, &req_id);
	if (err)
		return err;
	err = recv_reply_hdr(c, opcode, req_id, &h);
	if (err)
		return err;
	if (h.length > sizeof(c->rx))
		return poison(c, -EPROTO);
	err = stream_recv(c, c->rx, h.length);
	if (err)
		return err;
	*reply_len = h.length;
	return 0;
}

/* ---- session --------------------------------------------------------------- */

static int say_hello(struct rmem_client *c)
{
	struct proto_hello_req req = {
		.client_version = PROTO_VERSION,
		.features = 0,
		.pid = (uint32_t)getpid(),
	};
	uint8_t buf[PROTO_HELLO_REQ_LEN];
	struct proto_hello_rep rep;
	size_t reply_len;
	int status, err;

	err = call(c, PROTO_OP_HELLO, buf, proto_hello_req_encode(buf, &req), &reply_len);
	if (err)
		return err;
	if (proto_hello_rep_decode(c->rx, reply_len, &status, &rep) < 0)
		return poison(c, -EPROTO);
	if (status)
		return status;
	if (rep.max_io == 0)
		return poison(c, -EPROTO);
	c->session_id = rep.session_id;
	c->max_io = rep.max_io < PROTO_MAX_IO ? rep.max_io : PROTO_MAX_IO;
	return 0;
}

static int open_stream(struct rmem_client *c, const struct endpoint *ep)
{
	int fd;

	if (ep->kind == ENDPOINT_UNIX) {
		fd = tcp_connect_unix(ep->path, c->timeout_ms);
		c->transport = "unix";
	} else {
		fd = tcp_connect_host(ep->host, ep->port, c->timeout_ms);
		c->transport = "tcp";
	}
	if (fd < 0)
		return fd;
	c->fd = fd;
	return 0;
}

int rmem_connect(const char *endpoint, const struct rmem_opts *o, rmem_client **out)
{
	struct connect_params params;
	struct endpoint ep;
	struct rmem_client *c;
	int err;

	if (!out)
		return -EINVAL;
	*out = NULL;
	err = read_opts(o, &params);
	if (err)
		return err;
	err = endpoint_parse(endpoint, &ep);
	if (err)
		return err;
	err = check_path(&ep, params.choice);
	if (err)
		return err;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->timeout_ms = params.timeout_ms;
	c->next_req_id = 1;
	err = open_stream(c, &ep);
	if (err)
		goto fail;
	err = say_hello(c);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	rmem_close(c);
	return err;
}

void rmem_close(rmem_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

const char *rmem_transport(const rmem_client *c)
{
	return c ? c->transport : "none";
}

/* ---- alloc, free, stats ------------------------------------------------------ */

int rmem_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out)
{
	struct proto_alloc_req req = { .size = size, .flags = flags };
	uint8_t buf[PROTO_ALLOC_REQ_LEN];
	struct proto_region reg;
	size_t reply_len;
	int status, err;

	if (!c || !out || size == 0 || flags != 0)
		return -EINVAL;
	if (c->broken)
		return -ECONNRESET;
	err = call(c, PROTO_OP_ALLOC, buf, proto_alloc_req_encode(buf, &req), &reply_len);
	if (err)
		return err;
	if (proto_alloc_rep_decode(c->rx, reply_len, &status, &reg) < 0)
		return poison(c, -EPROTO);
	if (status)
		return status;
	*out = (struct rmem_region){
		.id = reg.id,
		.addr = reg.addr,
		.length = reg.length,
		.rkey = reg.rkey,
		.flags = reg.flags,
	};
	return 0;
}

int rmem_free(rmem_client *c, const struct rmem_region *r)
{
	struct proto_free_req req;
	uint8_t buf[PROTO_FREE_REQ_LEN];
	size_t reply_len;
	int status, err;

	if (!c || !r)
		return -EINVAL;
	if (c->broken)
		return -ECONNRESET;
	req = (struct proto_free_req){ .id = r->id, .rkey = r->rkey };
	err = call(c, PROTO_OP_FREE, buf, proto_free_req_encode(buf, &req), &reply_len);
	if (err)
		return err;
	if (proto_status_decode(c->rx, reply_len, &status) < 0)
		return poison(c, -EPROTO);
	return status;
}

int rmem_stats(rmem_client *c, struct rmem_stats *out)
{
	struct proto_stats st;
	size_t reply_len;
	int status, err;

	if (!c || !out)
		return -EINVAL;
	if (c->broken)
		return -ECONNRESET;
	err = call(c, PROTO_OP_STATS, NULL, 0, &reply_len);
	if (err)
		return err;
	if (proto_stats_rep_decode(c->rx, reply_len, &status, &st) < 0)
		return poison(c, -EPROTO);
	if (status)
		return status;
	*out = (struct rmem_stats){
		.pool_bytes = st.v[PROTO_STAT_POOL_BYTES],
		.used_bytes = st.v[PROTO_STAT_USED_BYTES],
		.free_bytes = st.v[PROTO_STAT_FREE_BYTES],
		.largest_free = st.v[PROTO_STAT_LARGEST_FREE],
		.regions = st.v[PROTO_STAT_REGIONS],
		.clients = st.v[PROTO_STAT_CLIENTS],
		.peak_used = st.v[PROTO_STAT_PEAK_USED],
		.allocs = st.v[PROTO_STAT_ALLOCS],
		.frees = st.v[PROTO_STAT_FREES],
	};
	return 0;
}

/* ---- read and write ---------------------------------------------------------- */

/* One chunk in flight: where its bytes sit in the caller's buffer. */
struct io_chunk {
	uint64_t req_id;
	size_t pos;
	uint32_t len;
};

struct io_job {
	uint16_t opcode;
	const struct rmem_region *r;
	uint64_t off;
	const uint8_t *src; /* WRITE */
	uint8_t *dst;       /* READ */
	size_t len;
};

static int send_chunk(struct rmem_client *c, const struct io_job *job, struct io_chunk *ch)
{
	struct proto_io_req req = {
		.id = job->r->id,
		.offset = job->off + ch->pos,
		.rkey = job->r->rkey,
		.length = ch->len,
	};
	uint8_t fixed[PROTO_IO_REQ_LEN];
	bool write = job->opcode == PROTO_OP_WRITE;

	proto_io_req_encode(fixed, job->opcode, &req);
	return send_frame(c, job->opcode, fixed, sizeof(fixed),
			  write && ch->len ? job->src + ch->pos : NULL, write ? ch->len : 0,
			  &ch->req_id);
}

/* Reads one chunk's reply; READ data goes straight into the caller's buffer. */
static int recv_chunk(struct rmem_client *c, const struct io_job *job, const struct io_chunk *ch)
{
	uint8_t st[PROTO_STATUS_LEN];
	struct proto_hdr h;
	size_t data_len = 0;
	int status = 0;
	int err;

	err = recv_reply_hdr(c, job->opcode, ch->req_id, &h);
	if (err)
		return err;
	if (h.length < PROTO_STATUS_LEN)
		return poison(c, -EPROTO);
	err = stream_recv(c, st, sizeof(st));
	if (err)
		return err;
	if (job->opcode == PROTO_OP_READ)
		err = proto_read_rep_decode(st, h.length, &status, &data_len);
	else
		err = proto_status_decode(st, h.length, &status);
	if (err < 0)
		return poison(c, -EPROTO);
	if (status)
		return status;
	if (data_len != (job->opcode == PROTO_OP_READ ? ch->len : 0))
		return poison(c, -EPROTO);
	if (data_len)
		return stream_recv(c, job->dst + ch->pos, data_len);
	return 0;
}

/*
 * Streams the job in chunks of c->max_io, up to CLIENT_IO_WINDOW in flight.
 * After the daemon refuses a chunk no new chunk is sent, but the replies to
 * those already sent are still read so the stream stays in step; the first
 * error wins.  len 0 still sends one request, so the handle is checked.
 */
static int io_run(struct rmem_client *c, const struct io_job *job)
{
	struct io_chunk window[CLIENT_IO_WINDOW];
	unsigned int head = 0, inflight = 0;
	size_t sent = 0;
	bool started = false;
	int first_err = 0;
	int err;

	for (;;) {
		while (!first_err && inflight < CLIENT_IO_WINDOW && (sent < job->len || !started)) {
			struct io_chunk *ch = &window[(head + inflight) % CLIENT_IO_WINDOW];
			size_t left = job->len - sent;

			ch->pos = sent;
			ch->len = left < c->max_io ? (uint32_t)left : c->max_io;
			err = send_chunk(c, job, ch);
			if (err)
				return err;
			sent += ch->len;
			inflight++;
			started = true;
		}
		if (inflight == 0)
			return first_err;
		err = recv_chunk(c, job, &window[head]);
		if (c->broken)
			return err;
		if (err && !first_err)
			first_err = err;
		head = (head + 1) % CLIENT_IO_WINDOW;
		inflight--;
	}
}

static int check_io(const rmem_client *c, const struct rmem_region *r, uint64_t off,
		    const void *buf, size_t len)
{
	if (!c || !r || (!buf && len > 0))
		return -EINVAL;
	/* Written so that off + len cannot overflow. */
	if (len > r->length || off > r->length - len)
		return -ERANGE;
	if (c->broken)
		return -ECONNRESET;
	return 0;
}

int rmem_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
	       const void *buf, size_t len)
{
	struct io_job job = {
		.opcode = PROTO_OP_WRITE, .r = r, .off = off, .src = buf, .len = len,
	};
	int err = check_io(c, r, off, buf, len);

	return err ? err : io_run(c, &job);
}

int rmem_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf, size_t len)
{
	struct io_job job = {
		.opcode = PROTO_OP_READ, .r = r, .off = off, .dst = buf, .len = len,
	};
	int err = check_io(c, r, off, buf, len);

	return err ? err : io_run(c, &job);
}

/* ---- admin listings ------------------------------------------------------------ */

/* Sends a listing request and checks the reply: on success *count records of
 * reclen bytes follow the list header in c->rx. */
static int list_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t req_len,
		     size_t reclen, uint32_t limit, uint32_t *count)
{
	size_t reply_len;
	int status, err;

	err = call(c, opcode, req, req_len, &reply_len);
	if (err)
		return err;
	if (proto_list_hdr_decode(c->rx, reply_len, reclen, &status, count) < 0)
		return poison(c, -EPROTO);
	if (status)
		return status;
	if (*count > limit)
		return poison(c, -EPROTO);
	return 0;
}

static const uint8_t *list_record(const struct rmem_client *c, size_t reclen, uint32_t i)
{
	return c->rx + PROTO_LIST_HDR_LEN + (size_t)i * reclen;
}

/* The request for REGIONS and CLIENTS: never more than one reply holds, and
 * never 0, which the daemon reads as "as many as fit". */
static uint32_t list_limit(size_t max, size_t reclen)
{
	size_t cap = PROTO_LIST_MAX(reclen);

	return (uint32_t)(max < cap ? max : cap);
}

static int check_list(const rmem_client *c, const void *out, size_t max)
{
	if (!c || (!out && max > 0))
		return -EINVAL;
	if (c->broken)
		return -ECONNRESET;
	return 0;
}

int rmem_pools(rmem_client *c, struct rmem_pool_info *out, size_t max)
{
	uint32_t count, i;
	int err = check_list(c, out, max);

	if (err || max == 0)
		return err;
	err = list_call(c, PROTO_OP_POOLS, NULL, 0, PROTO_POOL_REC_LEN,
			PROTO_LIST_MAX(PROTO_POOL_REC_LEN), &count);
	if (err)
		return err;
	for (i = 0; i < count && i < max; i++) {
		struct proto_pool_rec rec;

		proto_pool_rec_decode(list_record(c, PROTO_POOL_REC_LEN, i), &rec);
		out[i] = (struct rmem_pool_info){
			.bytes = rec.bytes,
			.used_bytes = rec.used,
			.largest_free = rec.largest_free,
			.regions = rec.regions,
			.page_size = rec.page_size,
			.alignment = rec.alignment,
		};
		_Static_assert(sizeof(out[i].name) == sizeof(rec.name), "pool name sizes differ");
		memcpy(out[i].name, rec.name, sizeof(out[i].name));
		out[i].name[sizeof(out[i].name) - 1] = '\0';
	}
	return (int)i;
}

int rmem_regions(rmem_client *c, uint64_t after, struct rmem_region_info *out, size_t max)
{
	struct proto_list_req req = {
		.after = after,
		.max = list_limit(max, PROTO_REGION_REC_LEN),
	};
	uint8_t buf[PROTO_LIST_REQ_LEN];
	uint32_t count;
	int err = check_list(c, out, max);

	if (err || max == 0)
		return err;
	err = list_call(c, PROTO_OP_REGIONS, buf, proto_list_req_encode(buf, &req),
			PROTO_REGION_REC_LEN, req.max, &count);
	if (err)
		return err;
	for (uint32_t i = 0; i < count; i++) {
		struct proto_region_rec rec;

		proto_region_rec_decode(list_record(c, PROTO_REGION_REC_LEN, i), &rec);
		out[i] = (struct rmem_region_info){
			.id = rec.id,
			.addr = rec.addr,
			.length = rec.length,
			.client_id = rec.client_id,
			.pool = rec.pool,
		};
	}
	return (int)count;
}

int rmem_clients(rmem_client *c, uint64_t after, struct rmem_client_info *out, size_t max)
{
	struct proto_list_req req = {
		.after = after,
		.max = list_limit(max, PROTO_CLIENT_REC_LEN),
	};
	uint8_t buf[PROTO_LIST_REQ_LEN];
	uint32_t count;
	int err = check_list(c, out, max);

	if (err || max == 0)
		return err;
	err = list_call(c, PROTO_OP_CLIENTS, buf, proto_list_req_encode(buf, &req),
			PROTO_CLIENT_REC_LEN, req.max, &count);
	if (err)
		return err;
	for (uint32_t i = 0; i < count; i++) {
		struct proto_client_rec rec;

		proto_client_rec_decode(list_record(c, PROTO_CLIENT_REC_LEN, i), &rec);
		out[i] = (struct rmem_client_info){
			.id = rec.id,
			.regions = rec.regions,
			.used_bytes = rec.used,
			.connected_ms = rec.connected_ms,
			.idle_ms = rec.idle_ms,
		};
		_Static_assert(sizeof(out[i].transport) == sizeof(rec.transport), "sizes differ");
		_Static_assert(sizeof(out[i].peer) == sizeof(rec.peer), "sizes differ");
		memcpy(out[i].transport, rec.transport, sizeof(out[i].transport));
		out[i].transport[sizeof(out[i].transport) - 1] = '\0';
		memcpy(out[i].peer, rec.peer, sizeof(out[i].peer));
		out[i].peer[sizeof(out[i].peer) - 1] = '\0';
	}
	return (int)count;
}
