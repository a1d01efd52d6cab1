/*
 * test_robust.c - rmemd against clients that misbehave on the wire: garbage,
 * wrong versions, truncated and stalled frames, lies about lengths, requests
 * before HELLO, and a hundred pipelined requests.  Each bad connection may be
 * answered with an ERROR frame and closed; nobody else may notice anything.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define WAIT_MS 5000
#define PIPELINED 100

struct raw_region {
	uint64_t id, addr, length;
	uint32_t rkey;
};

static void put_alloc(uint8_t *frame, uint64_t req_id, uint64_t size)
{
	raw_hdr(frame, PROTO_VERSION, PROTO_OP_ALLOC, 0, PROTO_ALLOC_REQ_LEN, req_id);
	memset(frame + PROTO_HDR_LEN, 0, PROTO_ALLOC_REQ_LEN);
	proto_put_u64(frame + PROTO_HDR_LEN, size);
}

/* Decodes an ALLOC reply; returns its wire status or a negative errno. */
static int alloc_reply(const struct raw_reply *r, uint64_t req_id, struct raw_region *out)
{
	if (r->magic != PROTO_MAGIC || r->opcode != PROTO_OP_ALLOC ||
	    !(r->flags & PROTO_F_RESPONSE) || r->req_id != req_id || r->length < 4)
		return -EPROTO;
	if (r->status != 0)
		return r->status;
	if (r->length != PROTO_ALLOC_REP_LEN)
		return -EPROTO;
	out->id = proto_get_u64(r->payload + 8);
	out->addr = proto_get_u64(r->payload + 16);
	out->length = proto_get_u64(r->payload + 24);
	out->rkey = proto_get_u32(r->payload + 32);
	return 0;
}

static int raw_alloc(int fd, uint64_t req_id, uint64_t size, struct raw_region *out)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_ALLOC_REQ_LEN];
	struct raw_reply r;
	int rc;

	put_alloc(f, req_id, size);
	rc = raw_send(fd, f, sizeof f);
	if (rc == 0)
		rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);
	if (rc < 0)
		return rc;
	rc = alloc_reply(&r, req_id, out);
	raw_reply_release(&r);
	return rc;
}

static void put_io(uint8_t *frame, uint16_t op, uint64_t req_id, const struct raw_region *g,
		   uint64_t off, uint32_t rkey, uint32_t len)
{
	uint8_t *p = frame + PROTO_HDR_LEN;

	raw_hdr(frame, PROTO_VERSION, op, 0,
		PROTO_IO_REQ_LEN + (op == PROTO_OP_WRITE ? len : 0), req_id);
	proto_put_u64(p, g->id);
	proto_put_u64(p + 8, off);
	proto_put_u32(p + 16, rkey);
	proto_put_u32(p + 20, op == PROTO_OP_READ ? len : 0);
}

/* WRITE with data; returns the reply's wire status or a negative errno. */
static int raw_write(int fd, uint64_t req_id, const struct raw_region *g, uint64_t off,
		     uint32_t rkey, const void *data, uint32_t len)
{
	uint8_t *f = malloc(PROTO_HDR_LEN + PROTO_IO_REQ_LEN + (size_t)len);
	struct raw_reply r;
	int rc;

	if (!f)
		return -ENOMEM;
	put_io(f, PROTO_OP_WRITE, req_id, g, off, rkey, len);
	memcpy(f + PROTO_HDR_LEN + PROTO_IO_REQ_LEN, data, len);
	rc = raw_send(fd, f, PROTO_HDR_LEN + PROTO_IO_REQ_LEN + (size_t)len);
	free(f);
	if (rc == 0)
		rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);
	if (rc < 0)
		return rc;
	if (r.opcode != PROTO_OP_WRITE || r.req_id != req_id || !(r.flags & PROTO_F_RESPONSE))
		rc = -EPROTO;
	else
		rc = r.status;
	raw_reply_release(&r);
	return rc;
}

/* READ into out (len bytes) when the status is 0. */
static int raw_read(int fd, uint64_t req_id, const struct raw_region *g, uint64_t off,
		    uint32_t rkey, void *out, uint32_t len)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_IO_REQ_LEN];
	struct raw_reply r;
	int rc;

	put_io(f, PROTO_OP_READ, req_id, g, off, rkey, len);
	rc = raw_send(fd, f, sizeof f);
	if (rc == 0)
		rc = raw_recv_reply(fd, &r, PROTO_STATUS_LEN + (size_t)len, WAIT_MS);
	if (rc < 0)
		return rc;
	if (r.opcode != PROTO_OP_READ || r.req_id != req_id || !(r.flags & PROTO_F_RESPONSE))
		rc = -EPROTO;
	else
		rc = reply_read_data(&r, out, len);
	raw_reply_release(&r);
	return rc;
}

/*
 * After a bad frame: either an ERROR frame (with want_status when non-zero,
 * and the request's id when req_id is non-zero) and then EOF, or EOF at once
 * when an ERROR frame is optional.
 */
static bool error_then_close(int fd, bool frame_required, int want_status, uint64_t req_id,
			     char *why, size_t whylen)
{
	struct raw_reply r;
	int rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);

	if (rc == -ECONNRESET) {
		snprintf(why, whylen, "closed without an ERROR frame");
		return !frame_required;
	}
	if (rc < 0) {
		snprintf(why, whylen, "no reply and no close: %s", strerror(-rc));
		return false;
	}
	snprintf(why, whylen, "ERROR frame: magic %08x opcode %u flags %#x status %d req_id %llu",
		 r.magic, r.opcode, r.flags, r.status, (unsigned long long)r.req_id);
	raw_reply_release(&r);
	if (r.magic != PROTO_MAGIC || r.opcode != PROTO_OP_ERROR ||
	    !(r.flags & PROTO_F_RESPONSE) || r.status <= 0)
		return false;
	if (want_status && r.status != want_status)
		return false;
	if (req_id && r.req_id != req_id)
		return false;
	rc = raw_wait_closed(fd, WAIT_MS);
	if (rc < 0) {
		snprintf(why + strlen(why), whylen - strlen(why), ", then not closed");
		return false;
	}
	return true;
}

/* Any non-zero answer, an ERROR frame then close, or a close. */
static bool refused(int fd, uint64_t req_id, char *why, size_t whylen)
{
	struct raw_reply r;
	int rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);

	if (rc == -ECONNRESET) {
		snprintf(why, whylen, "closed");
		return true;
	}
	if (rc < 0) {
		snprintf(why, whylen, "no reply and no close: %s", strerror(-rc));
		return false;
	}
	snprintf(why, whylen, "reply opcode %u status %d req_id %llu", r.opcode, r.status,
		 (unsigned long long)r.req_id);
	raw_reply_release(&r);
	if (r.magic != PROTO_MAGIC || !(r.flags & PROTO_F_RESPONSE) || r.status <= 0)
		return false;
	if (r.opcode == PROTO_OP_ERROR)
		return raw_wait_closed(fd, WAIT_MS) == 0;
	return r.req_id == req_id;
}

static void garbage(const struct rmemd *d, bool over_unix)
{
	static const char junk[] = "GET / HTTP/1.1\r\nHost: rmem\r\n\r\nand some more junk....";
	const char *tr = over_unix ? "unix" : "tcp";
	int fd = over_unix ? raw_connect_unix(d->admin_path) : raw_connect_tcp(d->port);
	char why[200] = "";

	if (!ok(fd >= 0, "%s: raw connect (%d)", tr, fd))
		return;
	raw_send(fd, junk, sizeof junk - 1);
	ok(error_then_close(fd, false, 0, 0, why, sizeof why),
	   "%s: garbage bytes: ERROR frame or close (%s)", tr, why);
	close(fd);
}

static void bad_version(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_HELLO_REQ_LEN] = { 0 };
	struct raw_region g;
	struct rmem_stats st;
	rmem_client *c = NULL;
	char why[200] = "";
	int fd, rc;

	fd = raw_connect_tcp(d->port);
	raw_hdr(f, 2, PROTO_OP_HELLO, 0, PROTO_HELLO_REQ_LEN, 4242);
	proto_put_u32(f + PROTO_HDR_LEN, 2);
	rc = fd >= 0 ? raw_send(fd, f, sizeof f) : fd;
	ok(rc == 0 && error_then_close(fd, true, EPROTO, 4242, why, sizeof why),
	   "HELLO of version 2: ERROR frame with status EPROTO, then close (%s)", why);
	close_fd(fd);

	/* The same in the middle of a session that holds memory. */
	fd = raw_session(d, false);
	rc = fd >= 0 ? raw_alloc(fd, 2, MiB, &g) : fd;
	ok(rc == 0, "raw session holds 1 MiB (%d)", rc);
	raw_hdr(f, 7, PROTO_OP_STATS, 0, 0, 77);
	rc = fd >= 0 ? raw_send(fd, f, PROTO_HDR_LEN) : fd;
	ok(rc == 0 && error_then_close(fd, true, EPROTO, 77, why, sizeof why),
	   "mid-session frame of version 7: ERROR EPROTO, then close (%s)", why);
	close_fd(fd);
	rc = client_connect(d->tcp_ep, 10000, &c);
	rc = rc ? rc : stats_wait(c, 0, 0, WAIT_MS, &st);
	ok(rc == 0, "the dropped session's megabyte went back to the pool (%d)", rc);
	rmem_close(c);
}

static void truncated_then_close(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_ALLOC_REQ_LEN];
	uint8_t *w = malloc(PROTO_HDR_LEN + PROTO_IO_REQ_LEN + 1000);
	struct raw_region g;
	int fd, rc;

	fd = raw_session(d, false);
	put_alloc(f, 5, 4096);
	rc = fd >= 0 ? raw_send(fd, f, PROTO_HDR_LEN + 5) : fd;
	ok(rc == 0, "ALLOC cut after 5 payload bytes, then close (%d)", rc);
	close_fd(fd);

	fd = raw_session(d, true);
	rc = fd >= 0 ? raw_alloc(fd, 2, MiB, &g) : fd;
	ok(rc == 0, "unix raw session allocates 1 MiB (%d)", rc);
	if (rc == 0 && w) {
		/* The header promises a megabyte; a thousand bytes come. */
		put_io(w, PROTO_OP_WRITE, 3, &g, 0, g.rkey, (uint32_t)MiB);
		memset(w + PROTO_HDR_LEN + PROTO_IO_REQ_LEN, 0xab, 1000);
		rc = raw_send(fd, w, PROTO_HDR_LEN + PROTO_IO_REQ_LEN + 1000);
	}
	ok(rc == 0, "WRITE cut after 1000 of 1 MiB data bytes, then close (%d)", rc);
	close_fd(fd);
	free(w);
}

/* Connections that stop mid-frame must not hold anybody else up. */
static void stalled(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_IO_REQ_LEN + 4096];
	uint8_t *src = malloc(MiB), *dst = malloc(MiB);
	struct raw_region g;
	struct rmem_region r;
	rmem_client *c = NULL;
	int s1, s2, s3, rc;
	uint64_t t0;

	s1 = raw_connect_tcp(d->port);
	put_alloc(f, 1, 64);
	rc = s1 >= 0 ? raw_send(s1, f, 10) : s1;
	ok(rc == 0, "stalled connection 1: 10 bytes of a header (%d)", rc);
	s2 = raw_session(d, false);
	rc = s2 >= 0 ? raw_alloc(s2, 2, MiB, &g) : s2;
	if (rc == 0) {
		put_io(f, PROTO_OP_WRITE, 3, &g, 0, g.rkey, (uint32_t)MiB);
		memset(f + PROTO_HDR_LEN + PROTO_IO_REQ_LEN, 0xcd, 4096);
		rc = raw_send(s2, f, sizeof f);
	}
	ok(rc == 0, "stalled connection 2: WRITE of 1 MiB with 4 KiB sent (%d)", rc);
	s3 = raw_connect_unix(d->admin_path);
	put_alloc(f, 1, 64);
	rc = s3 >= 0 ? raw_send(s3, f, PROTO_HDR_LEN + 3) : s3;
	ok(rc == 0, "stalled connection 3 (unix): header and 3 payload bytes (%d)", rc);

	t0 = now_ms();
	rc = src && dst ? client_connect(d->tcp_ep, 10000, &c) : -ENOMEM;
	if (rc == 0)
		rc = rmem_alloc(c, MiB, 0, &r);
	if (rc == 0) {
		fill_random(src, MiB, 99);
		rc = rmem_write(c, &r, 0, src, MiB);
	}
	if (rc == 0)
		rc = rmem_read(c, &r, 0, dst, MiB);
	if (rc == 0 && memcmp(src, dst, MiB) != 0)
		rc = -EILSEQ;
	if (rc == 0)
		rc = rmem_free(c, &r);
	t0 = now_ms() - t0;
	ok(rc == 0 && t0 < 5000,
	   "while three connections stall, another client allocs/writes/reads/frees 1 MiB "
	   "in %llu ms (%d)", (unsigned long long)t0, rc);
	rmem_close(c);
	close_fd(s1);
	close_fd(s2);
	close_fd(s3);
	free(src);
	free(dst);
}

/* A client that asks for a lot and then does not read must not hold anybody
 * else up; one that hangs up in the middle of a reply must not kill rmemd
 * (SIGPIPE) nor leave its region behind. */
static void slow_readers(const struct rmemd *d)
{
	enum { BIG = 16 << 20, READS = 4 };
	uint8_t f[READS * (PROTO_HDR_LEN + PROTO_IO_REQ_LEN)], small[100];
	struct raw_region g, h;
	struct rmem_stats st;
	rmem_client *c = NULL;
	uint64_t t0;
	int lazy, rude, rc;

	lazy = raw_session(d, false);
	rc = lazy >= 0 ? raw_alloc(lazy, 2, BIG, &g) : lazy;
	for (int i = 0; i < READS && rc == 0; i++)
		put_io(f + (size_t)i * (PROTO_HDR_LEN + PROTO_IO_REQ_LEN), PROTO_OP_READ,
		       10 + (uint64_t)i, &g, 0, g.rkey, BIG);
	rc = rc ? rc : raw_send(lazy, f, sizeof f);
	ok(rc == 0, "a client asks for %d x 16 MiB and reads nothing (%d)", READS, rc);

	rude = raw_session(d, true);
	rc = rude >= 0 ? raw_alloc(rude, 2, BIG, &h) : rude;
	if (rc == 0) {
		put_io(f, PROTO_OP_READ, 3, &h, 0, h.rkey, BIG);
		rc = raw_send(rude, f, PROTO_HDR_LEN + PROTO_IO_REQ_LEN);
	}
	rc = rc ? rc : raw_recv(rude, small, sizeof small, WAIT_MS);
	ok(rc == 0, "another asks for 16 MiB, takes 100 bytes and hangs up (%d)", rc);
	close_fd(rude);

	t0 = now_ms();
	rc = client_connect(d->tcp_ep, 10000, &c);
	if (rc == 0) {
		struct rmem_region r;

		rc = rmem_alloc(c, 4096, 0, &r);
		rc = rc ? rc : rmem_write(c, &r, 0, small, sizeof small);
		rc = rc ? rc : rmem_read(c, &r, 0, small, sizeof small);
		rc = rc ? rc : rmem_free(c, &r);
	}
	t0 = now_ms() - t0;
	ok(rc == 0 && t0 < 5000, "meanwhile a third client is served in %llu ms (%d)",
	   (unsigned long long)t0, rc);
	close_fd(lazy);
	rc = rc ? rc : stats_wait(c, 0, 0, WAIT_MS, &st);
	ok(rc == 0, "once they are gone, their 32 MiB are back in the pool (%d)", rc);
	rmem_close(c);
}

/*
 * READ and FREE of the same region sent back to back, with the reader slow
 * to take the data: the READ must return the bytes as they were, even though
 * the FREE (and someone else's ALLOC + WRITE of that memory) may run before
 * the reply has left.
 */
static void read_then_free(const struct rmemd *d)
{
	enum { LEN = 16 << 20, IOF = PROTO_HDR_LEN + PROTO_IO_REQ_LEN };
	uint8_t *want = malloc(LEN), *junk = malloc(LEN);
	uint8_t f[IOF + PROTO_HDR_LEN + PROTO_FREE_REQ_LEN];
	struct raw_reply r1, r2;
	struct raw_region g;
	rmem_client *c = NULL;
	struct rmem_region other;
	int fd, rc;

	fd = raw_session(d, false);
	rc = fd >= 0 && want && junk ? raw_alloc(fd, 2, LEN, &g) : -ENOMEM;
	if (rc == 0) {
		fill_random(want, LEN, 31);
		rc = raw_write(fd, 3, &g, 0, g.rkey, want, LEN);
	}
	if (!ok(rc == 0, "a raw client fills 16 MiB (%d)", rc))
		goto out;
	put_io(f, PROTO_OP_READ, 4, &g, 0, g.rkey, LEN);
	raw_hdr(f + IOF, PROTO_VERSION, PROTO_OP_FREE, 0, PROTO_FREE_REQ_LEN, 5);
	memset(f + IOF + PROTO_HDR_LEN, 0, PROTO_FREE_REQ_LEN);
	proto_put_u64(f + IOF + PROTO_HDR_LEN, g.id);
	proto_put_u32(f + IOF + PROTO_HDR_LEN + 8, g.rkey);
	rc = raw_send(fd, f, sizeof f);
	ok(rc == 0, "then sends READ and FREE of it in one go, and waits (%d)", rc);

	/* Someone else grabs and scribbles over whatever is free now. */
	fill_random(junk, LEN, 32);
	rc = client_connect(d->unix_ep, 10000, &c);
	if (rc == 0 && rmem_alloc(c, LEN, 0, &other) == 0)
		rc = rmem_write(c, &other, 0, junk, LEN);
	ok(rc == 0, "meanwhile another client allocates and scribbles 16 MiB (%d)", rc);
	sleep_ms(100);

	rc = raw_recv_reply(fd, &r1, PROTO_STATUS_LEN + (size_t)LEN, WAIT_MS);
	ok(rc == 0 && r1.opcode == PROTO_OP_READ && r1.req_id == 4 && r1.status == 0 &&
	   r1.length == PROTO_STATUS_LEN + LEN &&
	   memcmp(r1.payload + PROTO_STATUS_LEN, want, LEN) == 0,
	   "the READ reply carries the bytes as they were before the FREE (%d)", rc);
	if (rc == 0)
		raw_reply_release(&r1);
	rc = rc ? rc : raw_recv_reply(fd, &r2, PROTO_MAX_CTL, WAIT_MS);
	ok(rc == 0 && r2.opcode == PROTO_OP_FREE && r2.req_id == 5 && r2.status == 0,
	   "and the FREE is answered 0 after it (%d)", rc);
	if (rc == 0)
		raw_reply_release(&r2);
	rmem_close(c);
out:
	close_fd(fd);
	free(want);
	free(junk);
}

/* Every session slot taken: the next client is turned away cleanly, and gets
 * in once a slot frees up. */
static void full_house(const struct rmemd *d)
{
	enum { MAX = 64 }; /* limits.max_clients in the harness config */
	rmem_client *cs[MAX + 1] = { NULL };
	int n = 0, rc;

	for (int i = 0; i < MAX; i++)
		n += client_connect(i % 2 ? d->unix_ep : d->tcp_ep, 10000, &cs[i]) == 0;
	ok(n == MAX, "%d clients connected (max_clients = %d)", n, MAX);
	rc = client_connect(d->tcp_ep, 10000, &cs[MAX]);
	ok(rc < 0 && !cs[MAX], "client %d is turned away: %d (%s)", MAX + 1, rc,
	   rmem_strerror(rc));
	rmem_close(cs[0]);
	cs[0] = NULL;
	for (int i = 0; i < 100; i++) {
		rc = client_connect(d->tcp_ep, 10000, &cs[MAX]);
		if (rc == 0)
			break;
		sleep_ms(20);
	}
	ok(rc == 0, "after one leaves, a new client gets in (%d)", rc);
	for (int i = 0; i <= MAX; i++)
		rmem_close(cs[i]);
}

/* Requests that fail must consume their data and leave the stream in step. */
static void failing_writes(const struct rmemd *d, bool over_unix)
{
	const char *tr = over_unix ? "unix" : "tcp";
	enum { LEN = 65536 };
	uint8_t *data = malloc(LEN), *got = malloc(LEN);
	struct raw_region g, ghost;
	int fd, rc;

	fd = raw_session(d, over_unix);
	rc = fd >= 0 && data && got ? raw_alloc(fd, 2, LEN, &g) : -ENOMEM;
	if (!ok(rc == 0, "%s: raw session allocates 64 KiB (%d)", tr, rc))
		goto out;
	fill_random(data, LEN, 5);

	rc = raw_write(fd, 10, &g, 0, g.rkey ^ 1, data, LEN);
	ok(rc == EACCES, "%s: WRITE of 64 KiB with a bad key: status EACCES (%d)", tr, rc);
	rc = raw_read(fd, 11, &g, 0, g.rkey, got, LEN);
	ok(rc == 0 && all_zero(got, LEN),
	   "%s: the stream stays in step and the bad-key data was not applied (%d)", tr, rc);
	ghost = g;
	ghost.id += 999;
	rc = raw_write(fd, 12, &ghost, 0, g.rkey, data, 4096);
	ok(rc == ENOENT, "%s: WRITE to an unknown id with data: status ENOENT (%d)", tr, rc);
	rc = raw_write(fd, 13, &g, g.length - 10, g.rkey, data, 100);
	ok(rc == ERANGE, "%s: WRITE of 100 bytes at length-10: status ERANGE (%d)", tr, rc);
	rc = raw_write(fd, 14, &g, UINT64_MAX - 50, g.rkey, data, 100);
	ok(rc == ERANGE, "%s: WRITE whose offset wraps: status ERANGE (%d)", tr, rc);
	rc = raw_read(fd, 15, &g, g.length - 10, g.rkey, got, 10);
	ok(rc == 0 && all_zero(got, 10), "%s: nothing of the refused writes landed (%d)", tr,
	   rc);
	rc = raw_read(fd, 16, &g, UINT64_MAX - 2, g.rkey, got, 16);
	ok(rc == ERANGE, "%s: READ whose offset wraps: status ERANGE (%d)", tr, rc);
	rc = raw_read(fd, 17, &g, 0, g.rkey ^ 0x100, got, 16);
	ok(rc == EACCES, "%s: READ with a bad key: status EACCES (%d)", tr, rc);
	rc = raw_write(fd, 18, &g, 0, g.rkey, data, LEN);
	ok(rc == 0, "%s: then a good WRITE (%d)", tr, rc);
	memset(got, 0, LEN);
	rc = raw_read(fd, 19, &g, 0, g.rkey, got, LEN);
	ok(rc == 0 && memcmp(got, data, LEN) == 0, "%s: and a READ returns its bytes (%d)", tr,
	   rc);
out:
	close_fd(fd);
	free(data);
	free(got);
}

static void oversize(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN];
	char why[200] = "";
	int fd, rc;

	fd = raw_session(d, false);
	raw_hdr(f, PROTO_VERSION, PROTO_OP_ALLOC, 0, 0xffffffffu, 31);
	rc = fd >= 0 ? raw_send(fd, f, sizeof f) : fd;
	ok(rc == 0 && error_then_close(fd, false, 0, 0, why, sizeof why),
	   "ALLOC header claiming 4 GiB of payload: ERROR frame or close (%s)", why);
	close_fd(fd);

	fd = raw_session(d, false);
	raw_hdr(f, PROTO_VERSION, PROTO_OP_STATS, 0, PROTO_MAX_CTL + 1, 32);
	rc = fd >= 0 ? raw_send(fd, f, sizeof f) : fd;
	ok(rc == 0 && error_then_close(fd, false, 0, 0, why, sizeof why),
	   "STATS header with PROTO_MAX_CTL+1 payload: ERROR frame or close (%s)", why);
	close_fd(fd);

	fd = raw_session(d, true);
	raw_hdr(f, PROTO_VERSION, PROTO_OP_WRITE, 0, PROTO_IO_REQ_LEN + PROTO_MAX_IO + 1, 33);
	rc = fd >= 0 ? raw_send(fd, f, sizeof f) : fd;
	ok(rc == 0 && error_then_close(fd, false, 0, 0, why, sizeof why),
	   "WRITE header with PROTO_MAX_IO+1 data bytes: ERROR frame or close (%s)", why);
	close_fd(fd);
}

static void out_of_order(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_ALLOC_REQ_LEN];
	char why[200] = "";
	int fd, rc;

	fd = raw_connect_tcp(d->port);
	put_alloc(f, 41, 4096);
	rc = fd >= 0 ? raw_send(fd, f, sizeof f) : fd;
	ok(rc == 0 && refused(fd, 41, why, sizeof why),
	   "ALLOC before HELLO is refused (%s)", why);
	close_fd(fd);

	fd = raw_session(d, false);
	raw_hdr(f, PROTO_VERSION, 99, 0, 0, 42);
	rc = fd >= 0 ? raw_send(fd, f, PROTO_HDR_LEN) : fd;
	ok(rc == 0 && refused(fd, 42, why, sizeof why), "unknown opcode 99 is refused (%s)", why);
	close_fd(fd);

	fd = raw_session(d, false);
	put_alloc(f, 43, 4096);
	proto_put_u32(f + 12, 8); /* ALLOC payload is 16 bytes; claim and send 8 */
	rc = fd >= 0 ? raw_send(fd, f, PROTO_HDR_LEN + 8) : fd;
	ok(rc == 0 && refused(fd, 43, why, sizeof why),
	   "ALLOC with an 8-byte payload is refused (%s)", why);
	close_fd(fd);

	fd = raw_session(d, false);
	raw_hdr(f, PROTO_VERSION, PROTO_OP_STATS, PROTO_F_RESPONSE, 0, 44);
	rc = fd >= 0 ? raw_send(fd, f, PROTO_HDR_LEN) : fd;
	ok(rc == 0 && refused(fd, 44, why, sizeof why),
	   "a request flagged as a response is refused (%s)", why);
	close_fd(fd);
}

static void pipelined(const struct rmemd *d, bool over_unix)
{
	const char *tr = over_unix ? "unix" : "tcp";
	enum { FRAME = PROTO_HDR_LEN + PROTO_ALLOC_REQ_LEN };
	uint8_t *frames = malloc(PIPELINED * (size_t)FRAME);
	struct raw_region g[PIPELINED];
	int fd, rc = 0, good = 0, distinct = 1, freed = 0;

	fd = raw_session(d, over_unix);
	if (!ok(fd >= 0 && frames, "%s: raw session for pipelining (%d)", tr, fd))
		goto out;
	for (int i = 0; i < PIPELINED; i++)
		put_alloc(frames + (size_t)i * FRAME, 1000 + (uint64_t)i, 4096 + (uint64_t)i);
	rc = raw_send(fd, frames, PIPELINED * (size_t)FRAME);
	ok(rc == 0, "%s: %d ALLOC frames sent in one go (%d)", tr, PIPELINED, rc);
	for (int i = 0; i < PIPELINED && rc == 0; i++) {
		struct raw_reply r;

		rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);
		if (rc == 0) {
			good += alloc_reply(&r, 1000 + (uint64_t)i, &g[i]) == 0 &&
				g[i].length >= 4096 + (uint64_t)i;
			raw_reply_release(&r);
		}
	}
	ok(good == PIPELINED, "%s: %d replies, in order, each a good region (%d)", tr, good, rc);
	for (int i = 0; i < good; i++)
		for (int j = i + 1; j < good; j++)
			distinct &= g[i].id != g[j].id;
	ok(distinct, "%s: %d distinct ids", tr, good);

	for (int i = 0; i < good; i++) {
		uint8_t *p = frames + (size_t)i * FRAME;

		raw_hdr(p, PROTO_VERSION, PROTO_OP_FREE, 0, PROTO_FREE_REQ_LEN, 5000 + (uint64_t)i);
		memset(p + PROTO_HDR_LEN, 0, PROTO_FREE_REQ_LEN);
		proto_put_u64(p + PROTO_HDR_LEN, g[i].id);
		proto_put_u32(p + PROTO_HDR_LEN + 8, g[i].rkey);
	}
	rc = raw_send(fd, frames, (size_t)good * FRAME);
	for (int i = 0; i < good && rc == 0; i++) {
		struct raw_reply r;

		rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);
		if (rc == 0) {
			freed += r.opcode == PROTO_OP_FREE && r.req_id == 5000 + (uint64_t)i &&
				 r.status == 0;
			raw_reply_release(&r);
		}
	}
	ok(freed == PIPELINED, "%s: %d pipelined FREEs answered 0, in order (%d)", tr, freed, rc);
out:
	close_fd(fd);
	free(frames);
}

static void churn(const struct rmemd *d)
{
	int opened = 0;

	for (int i = 0; i < 50; i++) {
		int fd = i % 2 ? raw_connect_unix(d->admin_path) : raw_connect_tcp(d->port);

		if (fd >= 0) {
			opened++;
			close(fd);
		}
	}
	ok(opened == 50, "50 connections opened and dropped at once (%d)", opened);
}

int main(void)
{
	struct rmemd d;
	struct rmem_stats st;
	rmem_client *c = NULL;
	int rc;

	if (!harness_start(&d, "64M", NULL))
		return tap_done();

	garbage(&d, false);
	garbage(&d, true);
	bad_version(&d);
	truncated_then_close(&d);
	stalled(&d);
	slow_readers(&d);
	read_then_free(&d);
	failing_writes(&d, false);
	failing_writes(&d, true);
	oversize(&d);
	out_of_order(&d);
	pipelined(&d, false);
	pipelined(&d, true);
	churn(&d);
	full_house(&d);

	/* After all that, business as usual and nothing leaked. */
	rc = client_connect(d.unix_ep, 10000, &c);
	ok(rc == 0, "a normal client still connects (%d)", rc);
	if (rc == 0) {
		struct rmem_region r;
		uint8_t buf[4096];

		rc = rmem_alloc(c, sizeof buf, 0, &r);
		rc = rc ? rc : rmem_write(c, &r, 0, "still here", 10);
		rc = rc ? rc : rmem_read(c, &r, 0, buf, 10);
		ok(rc == 0 && !memcmp(buf, "still here", 10), "and is served (%d)", rc);
		rc = rc ? rc : rmem_free(c, &r);
		rc = stats_wait(c, 0, 0, WAIT_MS, &st);
		ok(rc == 0, "used_bytes %llu and regions %llu are 0 once the others are gone (%d)",
		   (unsigned long long)st.used_bytes, (unsigned long long)st.regions, rc);
		for (int i = 0; i < 100 && st.clients != 1; i++) {
			sleep_ms(20);
			rmem_stats(c, &st);
		}
		ok(st.clients == 1, "only this client is left (%llu)",
		   (unsigned long long)st.clients);
		rmem_close(c);
	} else {
		skip(3, "no client");
	}
	return harness_finish(&d);
}
