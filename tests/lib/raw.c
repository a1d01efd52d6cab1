/*
 * raw.c - see raw.h.  Headers are read and written field by field with the
 * codec's byte helpers, never validated here: what the daemon sent is what
 * the test sees.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "raw.h"
#include "util.h"

/* ---- sockets ----------------------------------------------------------------- */

static int connect_addr(int domain, const struct sockaddr *sa, socklen_t salen)
{
	int fd = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, salen) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int raw_connect(const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct addrinfo *ai;
	int rc;

	if (getaddrinfo(host, NULL, &hints, &ai) != 0)
		return -EINVAL;
	if (ai->ai_family == AF_INET)
		((struct sockaddr_in *)ai->ai_addr)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ai->ai_addr)->sin6_port = htons(port);
	rc = connect_addr(ai->ai_family, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return rc;
}

static int unix_addr(struct sockaddr_un *sa, const char *path)
{
	size_t n = strlen(path);

	if (n >= sizeof sa->sun_path)
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

int raw_connect_unix(const char *path)
{
	struct sockaddr_un sa;
	int rc = unix_addr(&sa, path);

	if (rc < 0)
		return rc;
	return connect_addr(AF_UNIX, (const struct sockaddr *)&sa, sizeof sa);
}

/* A TCP socket bound to host (numeric) at a port the kernel picks. */
static int bound_socket(const char *host, uint16_t *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	struct addrinfo *ai;
	int fd, rc = 0;

	if (getaddrinfo(host, "0", &hints, &ai) != 0)
		return -EINVAL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		rc = -errno;
	else if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
		 getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		rc = -errno;
	freeaddrinfo(ai);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
		      ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

int raw_listen_tcp(uint16_t *port)
{
	int fd = bound_socket("127.0.0.1", port);

	if (fd >= 0 && listen(fd, 16) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int raw_listen_unix(const char *path)
{
	struct sockaddr_un sa;
	int fd, rc = unix_addr(&sa, path);

	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

uint16_t free_port_on(const char *host)
{
	uint16_t port = 0;
	int fd = bound_socket(host, &port);

	if (fd < 0)
		return 0;
	close(fd);
	return port;
}

uint16_t free_tcp_port(void)
{
	return free_port_on("127.0.0.1");
}

static int send_iov(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Skips what went out, whole iovecs first. */
		while (n > 0 && (size_t)sent >= iov->iov_len) {
			sent -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + sent;
			iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

int raw_send(int fd, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return send_iov(fd, &iov, 1);
}

static int wait_readable(int fd, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = ms_left(deadline), n;

		if (left == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

int raw_recv(int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	uint8_t *p = buf;

	while (len) {
		ssize_t n;
		int rc = wait_readable(fd, deadline);

		if (rc < 0)
			return rc;
		n = recv(fd, p, len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET || errno == EPIPE ? -ECONNRESET : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int raw_wait_closed(int fd, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	uint8_t buf[4096];

	for (;;) {
		ssize_t n;
		int rc = wait_readable(fd, deadline);

		if (rc < 0)
			return rc;
		n = recv(fd, buf, sizeof buf, 0);
		if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)))
			return 0;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

/* ---- frames out ------------------------------------------------------------------ */

void raw_hdr(uint8_t out[PROTO_HDR_LEN], uint16_t version, uint16_t opcode, uint16_t flags,
	     uint32_t length, uint64_t req_id)
{
	struct proto_hdr h = { .opcode = opcode, .flags = flags, .length = length,
			       .req_id = req_id };

	proto_hdr_encode(out, &h);
	/* The codec writes its own version; a test may send another. */
	proto_put_u16(out + 4, version);
}

int raw_send_frame(int fd, uint16_t opcode, uint64_t req_id, const void *fixed,
		   size_t fixed_len, const void *data, size_t data_len)
{
	uint8_t h[PROTO_HDR_LEN];
	struct iovec iov[3] = {
		{ .iov_base = h, .iov_len = sizeof h },
		{ .iov_base = (void *)fixed, .iov_len = fixed_len },
		{ .iov_base = (void *)data, .iov_len = data_len },
	};

	if (fixed_len + data_len > UINT32_MAX)
		return -EMSGSIZE;
	raw_hdr(h, PROTO_VERSION, opcode, 0, (uint32_t)(fixed_len + data_len), req_id);
	return send_iov(fd, iov, 3);
}

void raw_out_init(struct raw_out *o)
{
	memset(o, 0, sizeof *o);
}

void raw_out_fini(struct raw_out *o)
{
	free(o->buf);
	raw_out_init(o);
}

void raw_out_put(struct raw_out *o, const void *p, size_t n)
{
	if (o->err)
		return;
	if (o->cap - o->len < n) {
		size_t cap = o->cap ? o->cap : 4096;
		uint8_t *nb;

		while (cap - o->len < n)
			cap *= 2;
		nb = realloc(o->buf, cap);
		if (!nb) {
			o->err = -ENOMEM;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
	if (n)
		memcpy(o->buf + o->len, p, n);
	o->len += n;
}

void raw_out_frame(struct raw_out *o, uint16_t opcode, uint64_t req_id, const void *payload,
		   size_t len)
{
	uint8_t h[PROTO_HDR_LEN];

	raw_hdr(h, PROTO_VERSION, opcode, 0, (uint32_t)len, req_id);
	raw_out_put(o, h, sizeof h);
	raw_out_put(o, payload, len);
}

/* ---- frames in ------------------------------------------------------------------- */

void raw_reply_release(struct raw_reply *r)
{
	free(r->payload);
	r->payload = NULL;
}

void raw_reader_init(struct raw_reader *rd, size_t max_payload)
{
	raw_out_init(&rd->in);
	rd->max = max_payload;
}

void raw_reader_fini(struct raw_reader *rd)
{
	raw_out_fini(&rd->in);
}

int raw_reader_feed(struct raw_reader *rd, const void *p, size_t n)
{
	raw_out_put(&rd->in, p, n);
	return rd->in.err;
}

static void parse_hdr(const uint8_t *hdr, struct raw_reply *f)
{
	struct proto_hdr h;

	/* Stores every field whatever it finds; judging them is the test's. */
	(void)proto_hdr_decode(hdr, &h);
	memcpy(f->hdr, hdr, PROTO_HDR_LEN);
	f->magic = h.magic;
	f->version = h.version;
	f->opcode = h.opcode;
	f->flags = h.flags;
	f->reserved = h.reserved;
	f->length = h.length;
	f->req_id = h.req_id;
}

size_t raw_reader_want(const struct raw_reader *rd)
{
	const struct raw_out *in = &rd->in;
	size_t need = PROTO_HDR_LEN;

	if (in->len >= PROTO_HDR_LEN)
		need += proto_get_u32(in->buf + 12);
	return need > in->len ? need - in->len : 1;
}

int raw_reader_take(struct raw_reader *rd, struct raw_reply *f)
{
	struct raw_out *in = &rd->in;
	size_t whole;

	memset(f, 0, sizeof *f);
	if (in->len < PROTO_HDR_LEN)
		return 0;
	parse_hdr(in->buf, f);
	if (f->length > rd->max)
		return -EMSGSIZE;
	whole = PROTO_HDR_LEN + (size_t)f->length;
	if (in->len < whole)
		return 0;
	f->payload = malloc(f->length ? f->length : 1);
	if (!f->payload)
		return -ENOMEM;
	memcpy(f->payload, in->buf + PROTO_HDR_LEN, f->length);
	if (f->length >= 4)
		f->status = (int32_t)proto_get_u32(f->payload);
	memmove(in->buf, in->buf + whole, in->len - whole);
	in->len -= whole;
	return 1;
}

int raw_recv_reply(int fd, struct raw_reply *r, size_t max, int timeout_ms)
{
	struct raw_reader rd;
	uint8_t *chunk = NULL;
	int rc;

	raw_reader_init(&rd, max);
	/* Exactly what the frame still needs: the next frame stays in the socket. */
	while ((rc = raw_reader_take(&rd, r)) == 0) {
		size_t want = raw_reader_want(&rd);
		uint8_t *nc = realloc(chunk, want);

		if (!nc) {
			rc = -ENOMEM;
			break;
		}
		chunk = nc;
		rc = raw_recv(fd, chunk, want, timeout_ms);
		if (rc == 0)
			rc = raw_reader_feed(&rd, chunk, want);
		if (rc < 0)
			break;
	}
	free(chunk);
	raw_reader_fini(&rd);
	return rc < 0 ? rc : 0;
}

/* ---- requests ---------------------------------------------------------------------- */

int raw_call(int fd, uint16_t opcode, uint64_t req_id, const void *payload, uint32_t len,
	     struct raw_reply *r, size_t max, int timeout_ms)
{
	int rc = raw_send_frame(fd, opcode, req_id, payload, len, NULL, 0);

	memset(r, 0, sizeof *r);
	if (rc < 0)
		return rc;
	return raw_recv_reply(fd, r, max, timeout_ms);
}

int raw_hello(int fd, uint64_t req_id)
{
	struct proto_hello_req req = { .client_version = PROTO_VERSION, .pid = (uint32_t)getpid() };
	uint8_t p[PROTO_HELLO_REQ_LEN];
	struct raw_reply r;
	int rc;

	rc = raw_call(fd, PROTO_OP_HELLO, req_id, p, (uint32_t)proto_hello_req_encode(p, &req),
		      &r, PROTO_MAX_CTL, 10000);
	if (rc < 0)
		return rc;
	if (r.magic != PROTO_MAGIC || r.opcode != PROTO_OP_HELLO ||
	    !(r.flags & PROTO_F_RESPONSE) || r.req_id != req_id || r.length < 4)
		rc = -EPROTO;
	else
		rc = r.status;
	raw_reply_release(&r);
	return rc;
}
