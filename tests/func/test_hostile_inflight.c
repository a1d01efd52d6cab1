/*
 * test_hostile_inflight.c - a range is never reused while a transfer names it
 * (issue 20, item 1; docs/architecture.md, "Invariant: a range in flight is
 * never reused").  Written as the attacker meets it, with raw wire clients
 * (tests/lib/raw.h) that stop in the middle of a frame where librmem never
 * would:
 *
 *   revoke mid-WRITE   x sends half of a 1 MiB WRITE to its named region; z,
 *                      another client of x's namespace, unlinks the name with
 *                      PROTO_UNLINK_REVOKE; y allocates 1 MiB and fills it with
 *                      'Y'; x sends the rest.  y's region must still be all
 *                      'Y', and x's WRITE must fail (ECANCELED).  Over TCP and
 *                      with x on the Unix socket.
 *   revoke mid-READ    x asks for 16 MiB of its named region and does not read
 *                      the reply (it is queued by reference to the pool); z
 *                      revokes; y allocates and fills 16 MiB with 'Y'; x then
 *                      reads its reply: not one 'Y' byte.
 *   two holds          w's READ reply and x's WRITE both name the range when
 *                      z revokes it; x's ends first: the range still waits
 *                      for w's reply.
 *   free mid-READ      x pipelines READ(16 MiB) and FREE of its own anonymous
 *                      region; y allocates and fills; x's reply: no 'Y'.
 *   end mid-WRITE      x sends half a WRITE, then goes silent until the frame
 *                      deadline ends its session (and, apart, closes in the
 *                      middle); y takes the range and fills it; x's late bytes
 *                      must not land in it.
 *   NIC key            with librmem (over RDMA under RMEM_TEST_TRANSPORT=rdma:
 *                      the NIC checks the key): x's handle is revoked, y gets
 *                      the range and fills it, x's write must fail and y's bytes
 *                      stay intact.
 *
 * Under RMEM_TEST_TRANSPORT=rdma the raw clients are still TCP clients of
 * the control port (they have no queue pair): the daemon serves them on its
 * TCP path as it serves any client without RDMA.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024u * 1024u)
#define WSIZE (1 * MiB)
#define RSIZE (16 * MiB)
#define WAIT_MS 10000
#define SETTLE_MS 150 /* for rmemd to take what was sent, where nothing shows it */
/* limits.frame_timeout_ms of the daemon: x stops mid-WRITE while the test
 * unlinks and y writes 1 MiB; 400 ms was once too little for that on a
 * loaded host (x dropped, its WRITE -ECONNRESET). */
#define FRAME_MS 2000

static uint8_t *xbuf, *ybuf, *got;
static rmem_client *watch; /* holds nothing: reads the daemon's figures */
static const struct rmemd *daemon_of; /* for its /metrics */

/* ---- what rmemd has taken: its stream counters ----------------------------------- */

/* rmem_stream_bytes_total{op,transport}: region bytes rmemd moved on the stream
 * path (a WRITE's as they land in the region, a READ's as its reply is
 * queued); -1 when the page could not be read. */
static double streamed(const char *op, bool over_unix)
{
	char series[96], *page = NULL;
	int status = 0;
	double v = -1;

	snprintf(series, sizeof series, "rmem_stream_bytes_total{op=\"%s\",transport=\"%s\"}", op,
		 over_unix ? "unix" : "tcp");
	if (metrics_request(daemon_of, "GET", "/metrics", WAIT_MS, &page, &status) == 0 &&
	    status == 200)
		v = metrics_sample(page, series);
	free(page);
	return v;
}

/*
 * 0 once rmemd has moved want bytes of op past base (streamed() before the
 * request went out), -ETIMEDOUT after WAIT_MS.  Why not a sleep: a revoke
 * that reaches rmemd before the transfer it must cut is another case
 * (the request then names an ended handle), and on a loaded host 150 ms
 * was once not enough for rmemd to read what x had sent.  A WRITE's data
 * is not all taken at once (rmemd's SO_RCVLOWAT waits for the rest the
 * header promised): its first byte in the region is the sign that the
 * transfer holds its range.  A READ's reply counts whole when queued.
 */
static int taken(const char *op, bool over_unix, double base, uint64_t want)
{
	uint64_t deadline = now_ms() + WAIT_MS;

	do {
		if (base >= 0 && streamed(op, over_unix) >= base + (double)want)
			return 0;
		sleep_ms(5);
	} while (now_ms() < deadline);
	return -ETIMEDOUT;
}

/* After a case: once its sessions are gone, so is every byte they held,
 * held ranges included. */
static void all_back(const char *what)
{
	struct rmem_stats st = { 0 };
	int rc = watch ? stats_wait(watch, 0, 0, WAIT_MS, &st) : -ENOTCONN;

	ok(rc == 0, "%s: every byte goes back once the transfers end (%d; %llu used, %llu regions)",
	   what, rc, (unsigned long long)st.used_bytes, (unsigned long long)st.regions);
}

/* ---- raw requests ------------------------------------------------------------- */

/* A reply's status (positive errno) with its region decoded into *reg when
 * it carries one; or a negative error. */
static int region_reply(int fd, uint16_t op, const void *p, size_t len, struct proto_region *reg)
{
	struct raw_reply r;
	int rc, st = 0;

	rc = raw_call(fd, op, 7, p, (uint32_t)len, &r, PROTO_MAX_CTL, WAIT_MS);
	if (rc < 0)
		return rc;
	if (r.opcode != op) {
		rc = r.opcode == PROTO_OP_ERROR ? r.status : -EPROTO;
	} else if (r.status == 0 && reg) {
		rc = proto_alloc_rep_decode(r.payload, r.length, &st, reg);
		rc = rc < 0 ? rc : -st;
	} else {
		rc = r.status;
	}
	raw_reply_release(&r);
	return rc;
}

static int name_req(int fd, uint16_t op, const char *name, uint64_t size, uint32_t flags,
		    struct proto_region *reg)
{
	uint8_t p[PROTO_NAME_REQ_FIXED + PROTO_NAME_MAX];
	struct proto_name_req m = { .size = size, .flags = flags };

	m.name_len = (uint16_t)strlen(name);
	memcpy(m.name, name, m.name_len);
	return region_reply(fd, op, p, proto_name_req_encode(p, op, &m), reg);
}

static int alloc_req(int fd, uint64_t size, struct proto_region *reg)
{
	uint8_t p[PROTO_ALLOC_REQ_LEN];
	struct proto_alloc_req m = { .size = size };

	return region_reply(fd, PROTO_OP_ALLOC, p, proto_alloc_req_encode(p, &m), reg);
}

/* The header and fixed part of a WRITE of len bytes at 0 of reg. */
static int write_head(int fd, const struct proto_region *reg, uint32_t len)
{
	uint8_t h[PROTO_HDR_LEN + PROTO_IO_REQ_LEN];
	struct proto_io_req io = { .id = reg->id, .rkey = reg->rkey, .length = len };

	raw_hdr(h, PROTO_VERSION, PROTO_OP_WRITE, 0, PROTO_IO_REQ_LEN + len, 5);
	proto_io_req_encode(h + PROTO_HDR_LEN, PROTO_OP_WRITE, &io);
	return raw_send(fd, h, sizeof h);
}

/* A WRITE's reply status (positive errno) or a negative error. */
static int write_reply(int fd)
{
	struct raw_reply r;
	int rc = raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);

	if (rc < 0)
		return rc;
	rc = r.opcode == PROTO_OP_WRITE || r.opcode == PROTO_OP_ERROR ? r.status : -EPROTO;
	raw_reply_release(&r);
	return rc;
}

static int write_all(int fd, const struct proto_region *reg, const uint8_t *buf, uint32_t len)
{
	int rc = write_head(fd, reg, len);

	rc = rc < 0 ? rc : raw_send(fd, buf, len);
	return rc < 0 ? rc : write_reply(fd);
}

static int read_send(int fd, const struct proto_region *reg, uint32_t len)
{
	uint8_t p[PROTO_IO_REQ_LEN];
	struct proto_io_req io = { .id = reg->id, .rkey = reg->rkey, .length = len };

	return raw_send_frame(fd, PROTO_OP_READ, 6, p, proto_io_req_encode(p, PROTO_OP_READ, &io),
			      NULL, 0);
}

/* The reply of a READ of len bytes into buf: its status or a negative error. */
static int read_reply(int fd, uint8_t *buf, uint32_t len)
{
	struct raw_reply r;
	int rc = raw_recv_reply(fd, &r, PROTO_STATUS_LEN + len, WAIT_MS);

	if (rc < 0)
		return rc;
	if (r.opcode != PROTO_OP_READ)
		rc = r.opcode == PROTO_OP_ERROR ? r.status : -EPROTO;
	else
		rc = reply_read_data(&r, buf, len);
	raw_reply_release(&r);
	return rc;
}

static int read_all(int fd, const struct proto_region *reg, uint8_t *buf, uint32_t len)
{
	int rc = read_send(fd, reg, len);

	return rc < 0 ? rc : read_reply(fd, buf, len);
}

static size_t count_byte(const uint8_t *p, size_t len, uint8_t b)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += p[i] == b;
	return n;
}

/* y allocates size bytes and fills them with 'Y'; 0 or the first error. */
static int y_takes(int y, uint32_t size, struct proto_region *ry, uint64_t x_addr)
{
	int rc = alloc_req(y, size, ry);

	if (rc != 0)
		return rc;
	diag("y's region is %s x's range", ry->addr == x_addr ? "ON" : "apart from");
	return write_all(y, ry, ybuf, size);
}

/* ---- the cases ------------------------------------------------------------------ */

static void revoke_mid_write(const struct rmemd *d, bool x_unix)
{
	const char *what = x_unix ? "revoke mid-WRITE (x on Unix)" : "revoke mid-WRITE (TCP)";
	const char *name = x_unix ? "h/wu" : "h/w";
	int x = raw_session(d, x_unix), y = raw_session(d, false), z = raw_session(d, false), rc;
	struct proto_region rx, ry;
	double base;

	if (!ok(x >= 0 && y >= 0 && z >= 0, "%s: three raw sessions (%d %d %d)", what, x, y, z))
		goto out;
	rc = name_req(x, PROTO_OP_CREATE, name, WSIZE, 0, &rx);
	if (!ok(rc == 0, "%s: x creates %s of 1 MiB (%d)", what, name, rc))
		goto out;
	base = streamed("write", x_unix);
	rc = write_head(x, &rx, WSIZE);
	rc = rc < 0 ? rc : raw_send(x, xbuf, WSIZE / 2);
	ok(rc == 0, "%s: x sends the header and half the data (%d)", what, rc);
	rc = taken("write", x_unix, base, 1);
	ok(rc == 0, "%s: rmemd has begun writing it into the region (%d)", what, rc);
	rc = name_req(z, PROTO_OP_UNLINK, name, 0, PROTO_UNLINK_REVOKE, NULL);
	ok(rc == 0, "%s: z unlinks it with REVOKE (%d)", what, rc);
	rc = y_takes(y, WSIZE, &ry, rx.addr);
	if (!ok(rc == 0, "%s: y allocates 1 MiB and writes 'Y' over it (%d)", what, rc))
		goto out;
	rc = raw_send(x, xbuf + WSIZE / 2, WSIZE / 2);
	ok(rc == 0, "%s: x sends the rest (%d)", what, rc);
	rc = write_reply(x);
	ok(rc == ECANCELED, "%s: x's WRITE fails with ECANCELED (%d)", what, rc);
	rc = read_all(y, &ry, got, WSIZE);
	ok(rc == 0 && count_byte(got, WSIZE, 'Y') == WSIZE,
	   "%s: y's region is all 'Y' (%d; %zu bytes of x's)", what, rc,
	   rc == 0 ? count_byte(got, WSIZE, 'X') : 0);
	/* The stream stayed in step: x's next request is answered. */
	rc = name_req(x, PROTO_OP_OPEN, name, 0, PROTO_ACCESS_READ, NULL);
	ok(rc == ENOENT, "%s: x's next request is answered: OPEN is ENOENT (%d)", what, rc);
out:
	close(x);
	close(y);
	close(z);
	all_back(what);
}

/* How x's READ of RSIZE whose reply waits unread ends, once y has filled a
 * range of its own after start() ended x's region. */
static void read_held(const char *what, int x, int y, const struct proto_region *rx,
		      void (*start)(const char *, int, void *), void *arg)
{
	struct proto_region ry;
	double base = streamed("read", false);
	int rc = read_send(x, rx, RSIZE);

	ok(rc == 0, "%s: x asks for 16 MiB and reads none of it (%d)", what, rc);
	rc = taken("read", false, base, RSIZE);
	ok(rc == 0, "%s: rmemd has queued the 16 MiB reply (%d)", what, rc);
	start(what, x, arg);
	rc = y_takes(y, RSIZE, &ry, rx->addr);
	ok(rc == 0, "%s: y allocates 16 MiB and writes 'Y' over it (%d)", what, rc);
	if (watch) {
		struct rmem_stats st = { 0 };

		rc = rmem_stats(watch, &st);
		ok(rc == 0 && st.used_bytes == 2ull * RSIZE,
		   "%s: x's held range still counts as used (%d; %llu used)", what, rc,
		   (unsigned long long)st.used_bytes);
	}
	memset(got, 0, RSIZE);
	rc = read_reply(x, got, RSIZE);
	ok(rc == 0 && count_byte(got, RSIZE, 'Y') == 0,
	   "%s: x's reply holds not one of y's bytes (%d; %zu 'Y', %zu 'X', %zu zero)", what, rc,
	   count_byte(got, RSIZE, 'Y'), count_byte(got, RSIZE, 'X'), count_byte(got, RSIZE, 0));
}

static void unlink_revoke(const char *what, int x, void *arg)
{
	int rc = name_req(*(int *)arg, PROTO_OP_UNLINK, "h/r", 0, PROTO_UNLINK_REVOKE, NULL);

	(void)x;
	ok(rc == 0, "%s: z unlinks it with REVOKE (%d)", what, rc);
}

static void revoke_mid_read(const struct rmemd *d)
{
	const char *what = "revoke mid-READ";
	int x = raw_session(d, false), y = raw_session(d, false), z = raw_session(d, false), rc;
	struct proto_region rx;

	if (!ok(x >= 0 && y >= 0 && z >= 0, "%s: three raw sessions (%d %d %d)", what, x, y, z))
		goto out;
	rc = name_req(x, PROTO_OP_CREATE, "h/r", RSIZE, 0, &rx);
	rc = rc ? rc : write_all(x, &rx, xbuf, RSIZE);
	if (!ok(rc == 0, "%s: x creates h/r of 16 MiB and fills it with 'X' (%d)", what, rc))
		goto out;
	read_held(what, x, y, &rx, unlink_revoke, &z);
out:
	close(x);
	close(y);
	close(z);
	all_back(what);
}

/* Two transfers hold one range: x's WRITE and w's READ reply.  x's ends
 * first; the range must still wait for w's. */
static void two_holds(const struct rmemd *d)
{
	const char *what = "two holds";
	int x = raw_session(d, false), w = raw_session(d, false), y = raw_session(d, false);
	int z = raw_session(d, false), rc;
	struct proto_region rx, rw, ry;
	double rbase, wbase;

	if (!ok(x >= 0 && w >= 0 && y >= 0 && z >= 0, "%s: four raw sessions", what))
		goto out;
	rc = name_req(x, PROTO_OP_CREATE, "h/2", RSIZE, 0, &rx);
	rc = rc ? rc : write_all(x, &rx, xbuf, RSIZE);
	rc = rc ? rc : name_req(w, PROTO_OP_OPEN, "h/2", 0, PROTO_ACCESS_READ, &rw);
	if (!ok(rc == 0, "%s: x creates h/2 of 16 MiB, fills it, w opens it (%d)", what, rc))
		goto out;
	rbase = streamed("read", false);
	wbase = streamed("write", false);
	rc = read_send(w, &rw, RSIZE);
	rc = rc ? rc : write_head(x, &rx, RSIZE);
	rc = rc ? rc : raw_send(x, xbuf, RSIZE / 2);
	ok(rc == 0, "%s: w asks for 16 MiB unread, x sends half a WRITE (%d)", what, rc);
	rc = taken("read", false, rbase, RSIZE);
	rc = rc ? rc : taken("write", false, wbase, 1);
	ok(rc == 0, "%s: rmemd has queued w's reply and begun x's WRITE (%d)", what, rc);
	rc = name_req(z, PROTO_OP_UNLINK, "h/2", 0, PROTO_UNLINK_REVOKE, NULL);
	ok(rc == 0, "%s: z unlinks it with REVOKE (%d)", what, rc);
	rc = raw_send(x, xbuf + RSIZE / 2, RSIZE / 2);
	rc = rc ? rc : write_reply(x);
	ok(rc == ECANCELED, "%s: x's WRITE ends first, with ECANCELED (%d)", what, rc);
	rc = y_takes(y, RSIZE, &ry, rx.addr);
	ok(rc == 0, "%s: y allocates 16 MiB and writes 'Y' over it (%d)", what, rc);
	memset(got, 0, RSIZE);
	rc = read_reply(w, got, RSIZE);
	ok(rc == 0 && count_byte(got, RSIZE, 'Y') == 0,
	   "%s: w's reply holds not one of y's bytes (%d; %zu 'Y')", what, rc,
	   count_byte(got, RSIZE, 'Y'));
out:
	close(x);
	close(w);
	close(y);
	close(z);
	all_back(what);
}

/* FREE right behind the READ, in the same send: the daemon may serve it
 * whenever it likes, which must not be before the READ's bytes are out. */
static void free_own(const char *what, int x, void *arg)
{
	const struct proto_region *rx = arg;
	uint8_t p[PROTO_FREE_REQ_LEN];
	struct proto_free_req m = { .id = rx->id, .rkey = rx->rkey };
	int rc = raw_send_frame(x, PROTO_OP_FREE, 8, p, proto_free_req_encode(p, &m), NULL, 0);

	ok(rc == 0, "%s: x pipelines FREE of that region behind it (%d)", what, rc);
	sleep_ms(SETTLE_MS);
}

static void free_mid_read(const struct rmemd *d)
{
	const char *what = "free mid-READ";
	int x = raw_session(d, false), y = raw_session(d, false), rc;
	struct raw_reply r;
	struct proto_region rx;

	if (!ok(x >= 0 && y >= 0, "%s: two raw sessions (%d %d)", what, x, y))
		goto out;
	rc = alloc_req(x, RSIZE, &rx);
	rc = rc ? rc : write_all(x, &rx, xbuf, RSIZE);
	if (!ok(rc == 0, "%s: x allocates 16 MiB and fills it with 'X' (%d)", what, rc))
		goto out;
	read_held(what, x, y, &rx, free_own, &rx);
	rc = raw_recv_reply(x, &r, PROTO_MAX_CTL, WAIT_MS);
	ok(rc == 0 && r.opcode == PROTO_OP_FREE && r.status == 0, "%s: then x's FREE is done (%d)",
	   what, rc ? rc : r.status);
	if (rc == 0)
		raw_reply_release(&r);
out:
	close(x);
	close(y);
	all_back(what);
}

/* x's session ends in the middle of a WRITE (closed, or silent past the
 * frame deadline); y takes the range; x's late bytes must not land. */
static void end_mid_write(const struct rmemd *d, bool silent)
{
	const char *what = silent ? "frame deadline mid-WRITE" : "close mid-WRITE";
	int x = raw_session(d, false), y = raw_session(d, false), rc;
	struct proto_region rx, ry;

	if (!ok(x >= 0 && y >= 0, "%s: two raw sessions (%d %d)", what, x, y))
		goto out;
	rc = alloc_req(x, WSIZE, &rx);
	rc = rc ? rc : write_head(x, &rx, WSIZE);
	rc = rc ? rc : raw_send(x, xbuf, WSIZE / 2);
	if (!ok(rc == 0, "%s: x allocates 1 MiB and sends half a WRITE (%d)", what, rc))
		goto out;
	if (silent) {
		rc = raw_wait_closed(x, FRAME_MS * 10);
		ok(rc == 0, "%s: rmemd ends x's session (%d)", what, rc);
	} else {
		sleep_ms(SETTLE_MS);
		shutdown(x, SHUT_WR); /* rmemd hears EOF: the session ends */
	}
	sleep_ms(SETTLE_MS);
	rc = y_takes(y, WSIZE, &ry, rx.addr);
	ok(rc == 0, "%s: y allocates 1 MiB and writes 'Y' over it (%d)", what, rc);
	/* Whatever the socket says to them, x's late bytes go nowhere. */
	raw_send(x, xbuf + WSIZE / 2, WSIZE / 2);
	close(x);
	x = -1;
	sleep_ms(SETTLE_MS);
	rc = read_all(y, &ry, got, WSIZE);
	ok(rc == 0 && count_byte(got, WSIZE, 'Y') == WSIZE,
	   "%s: y's region is all 'Y' (%d; %zu bytes of x's)", what, rc,
	   rc == 0 ? count_byte(got, WSIZE, 'X') : 0);
out:
	close_fd(x);
	close(y);
	all_back(what);
}

/* librmem's x (over RDMA when the environment says so: the NIC key) keeps
 * using a revoked handle after y has the range. */
static void nic_key_after_revoke(const struct rmemd *d)
{
	const char *what = harness_rdma() ? "NIC key after revoke" : "TCP key after revoke";
	rmem_client *x = NULL, *y = NULL, *z = NULL;
	struct rmem_region rx, ry;
	int rc = client_connect(d->tcp_ep, WAIT_MS, &x);

	rc = rc ? rc : client_connect(d->tcp_ep, WAIT_MS, &y);
	rc = rc ? rc : client_connect(d->tcp_ep, WAIT_MS, &z);
	if (!ok(rc == 0, "%s: three librmem clients (%d, %s)", what, rc,
		x ? rmem_transport(x) : "-"))
		goto out;
	rc = rmem_create(x, "h/k", WSIZE, 0, &rx);
	rc = rc ? rc : rmem_write(x, &rx, 0, xbuf, WSIZE);
	if (!ok(rc == 0, "%s: x creates h/k and writes it (%d)", what, rc))
		goto out;
	rc = rmem_unlink2(z, "h/k", RMEM_UNLINK_REVOKE);
	ok(rc == 0, "%s: z unlinks it with REVOKE (%d)", what, rc);
	rc = alloc_quota_wait(y, WSIZE, &ry, WAIT_MS);
	rc = rc ? rc : rmem_write(y, &ry, 0, ybuf, WSIZE);
	if (!ok(rc == 0, "%s: y allocates 1 MiB and writes 'Y' (%d)", what, rc))
		goto out;
	rc = rmem_write(x, &rx, 0, xbuf, WSIZE);
	ok(rc < 0, "%s: x's write through the revoked handle fails (%d)", what, rc);
	memset(got, 0, WSIZE);
	rc = rmem_read(y, &ry, 0, got, WSIZE);
	ok(rc == 0 && count_byte(got, WSIZE, 'Y') == WSIZE,
	   "%s: y's region is all 'Y' (%d; %zu bytes of x's)", what, rc,
	   rc == 0 ? count_byte(got, WSIZE, 'X') : 0);
	rmem_free(y, &ry);
out:
	rmem_close(x);
	rmem_close(y);
	rmem_close(z);
}

int main(void)
{
	char limits[160];
	struct rmemd_opts o;
	struct rmemd d;
	int rc;

	xbuf = malloc(RSIZE);
	ybuf = malloc(RSIZE);
	got = malloc(RSIZE);
	if (!xbuf || !ybuf || !got)
		tap_skip_all("no memory for three 16 MiB buffers");
	memset(xbuf, 'X', RSIZE);
	memset(ybuf, 'Y', RSIZE);
	snprintf(limits, sizeof limits,
		 "limits = { lease_timeout_ms = 10000; frame_timeout_ms = %d; };", FRAME_MS);
	rc = harness_opts(&o, "128M", limits);
	o.metrics = true; /* its stream counters say what it has taken */
	rc = rc ? rc : rmemd_start_opts(&d, &o);
	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	if (!ok(rc == 0, "rmemd starts and sends READY=1 (%d)", rc))
		return tap_done();
	daemon_of = &d;
	rc = client_connect(d.tcp_ep, WAIT_MS, &watch);
	ok(rc == 0, "a librmem client to read the daemon's figures (%d)", rc);
	revoke_mid_write(&d, false);
	revoke_mid_write(&d, true);
	revoke_mid_read(&d);
	two_holds(&d);
	free_mid_read(&d);
	end_mid_write(&d, false);
	end_mid_write(&d, true);
	nic_key_after_revoke(&d);
	rmem_close(watch);
	free(xbuf);
	free(ybuf);
	free(got);
	return harness_finish(&d);
}
