/*
 * garbage.c - connections that break the protocol, each in its own way.  The
 * daemon must drop them and forget them, and nobody else may notice.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chaos.h"
#include "harness.h"

#define GARBAGE_MAX 4096

/* Sends what the socket takes now: the daemon may have closed already, and
 * a garbage sender never waits. */
static void spray(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static void random_bytes(uint8_t *buf, size_t len, uint64_t *rng)
{
	fill_random(buf, len, chaos_rand(rng));
}

static void put_frame(int fd, uint16_t opcode, const uint8_t *payload, uint32_t len,
		      uint64_t req_id)
{
	uint8_t h[PROTO_HDR_LEN];

	raw_hdr(h, PROTO_VERSION, opcode, 0, len, req_id);
	spray(fd, h, sizeof h);
	if (len)
		spray(fd, payload, len);
}

static void put_hello(int fd)
{
	uint8_t p[PROTO_HELLO_REQ_LEN] = { 0 };

	proto_put_u32(p, PROTO_VERSION);
	put_frame(fd, PROTO_OP_HELLO, p, sizeof p, 1);
}

static void put_alloc(int fd, uint64_t size, uint64_t req_id)
{
	uint8_t p[PROTO_ALLOC_REQ_LEN] = { 0 };

	proto_put_u64(p, size);
	put_frame(fd, PROTO_OP_ALLOC, p, sizeof p, req_id);
}

/* A header that decodes (any request opcode, a length the opcode allows)
 * and part of its payload. */
static void put_truncated(int fd, uint64_t *rng, uint8_t *buf)
{
	uint16_t opcode = (uint16_t)chaos_between(rng, PROTO_OP_HELLO, PROTO_OP_COUNT - 1);
	uint32_t len = (uint32_t)chaos_between(rng, 1, PROTO_MAX_CTL);
	uint8_t h[PROTO_HDR_LEN];

	raw_hdr(h, PROTO_VERSION, opcode, 0, len, chaos_rand(rng));
	spray(fd, h, sizeof h);
	random_bytes(buf, len - 1, rng);
	spray(fd, buf, chaos_between(rng, 0, len - 1));
}

static void put_short_write(int fd, uint64_t *rng, uint8_t *buf)
{
	uint8_t io[PROTO_IO_REQ_LEN] = { 0 };
	uint8_t h[PROTO_HDR_LEN];

	proto_put_u64(io, chaos_between(rng, 1, 64));  /* somebody's region id, maybe */
	proto_put_u32(io + 16, (uint32_t)chaos_rand(rng));
	raw_hdr(h, PROTO_VERSION, PROTO_OP_WRITE, 0, PROTO_IO_REQ_LEN + (1u << 20), 2);
	spray(fd, h, sizeof h);
	spray(fd, io, sizeof io);
	random_bytes(buf, GARBAGE_MAX, rng);
	spray(fd, buf, chaos_between(rng, 0, GARBAGE_MAX));
}

static void put_admin(int fd, uint64_t *rng, uint8_t *buf)
{
	uint8_t list[PROTO_LIST_REQ_LEN] = { 0 };

	if (chaos_rand(rng) % 2) {
		random_bytes(buf, GARBAGE_MAX, rng);
		spray(fd, buf, chaos_between(rng, 1, GARBAGE_MAX));
		return;
	}
	put_hello(fd);
	put_frame(fd, PROTO_OP_REGIONS, list, sizeof list, 2);
	put_frame(fd, PROTO_OP_CLIENTS, list, sizeof list, 3);
	put_frame(fd, PROTO_OP_POOLS, NULL, 0, 4);
}

int chaos_garbage(const struct chaos_target *t, enum chaos_garbage_kind kind, uint64_t *rng,
		  int *open_fd)
{
	uint8_t buf[GARBAGE_MAX];
	int fd;

	*open_fd = -1;
	fd = kind == GARBAGE_ADMIN ? raw_connect_unix(t->admin_path) : raw_connect_tcp(t->port);
	if (fd < 0)
		return fd;
	switch (kind) {
	case GARBAGE_RANDOM:
		random_bytes(buf, sizeof buf, rng);
		spray(fd, buf, chaos_between(rng, 1, sizeof buf));
		break;
	case GARBAGE_TRUNCATED:
		if (chaos_rand(rng) % 2)
			put_hello(fd);
		put_truncated(fd, rng, buf);
		break;
	case GARBAGE_STALLED:
		if (chaos_rand(rng) % 2) {
			put_hello(fd);
			put_truncated(fd, rng, buf);
		} else {
			/* part of a header */
			raw_hdr(buf, PROTO_VERSION, PROTO_OP_HELLO, 0, PROTO_HELLO_REQ_LEN, 1);
			spray(fd, buf, chaos_between(rng, 1, PROTO_HDR_LEN - 1));
		}
		*open_fd = fd;
		return 0;
	case GARBAGE_AFTER_HELLO:
		put_hello(fd);
		random_bytes(buf, sizeof buf, rng);
		spray(fd, buf, chaos_between(rng, 1, sizeof buf));
		break;
	case GARBAGE_WALK_AWAY:
		put_hello(fd);
		for (uint64_t i = 0, n = chaos_between(rng, 1, 8); i < n; i++)
			put_alloc(fd, chaos_between(rng, 1, 1 << 20), 2 + i);
		/* Give the daemon a moment to serve them before we vanish. */
		sleep_ms(10);
		break;
	case GARBAGE_SHORT_WRITE:
		put_hello(fd);
		put_short_write(fd, rng, buf);
		break;
	case GARBAGE_ADMIN:
		put_admin(fd, rng, buf);
		break;
	case GARBAGE_KINDS:
		break;
	}
	close(fd);
	return 0;
}
