/*
 * test_rdma_keys.c - on real verbs (Soft-RoCE in the test VM), the NIC
 * enforces rmemd's region keys: a client's own key works for RDMA WRITE,
 * READ and atomics of every size; another client's key, a freed key and the
 * key of a killed client complete with IBV_WC_REM_ACCESS_ERR and change
 * nothing; bogus attaches are rejected by rdma_cm.  The clients are
 * rawclient.c, which checks nothing on the daemon's behalf.
 *
 *   tests/vm/run-in-vm -- tests/run-tests build/tests/rdma/test_rdma_keys
 *   test_rdma_keys [none|region-mr|window|auto|tenants|named|stop|device|restart]
 *                                                              one section
 *
 * Sections, each against its own rmemd: "none" (listen.rdma = "": HELLO says
 * no RDMA, nothing accepts an attach), "window" and "region-mr" (everything),
 * "auto" (rxe must get region-mr; a short check), "tenants" (tenants A and B
 * authenticated on the control channel; B with A's handle in both key
 * modes gets REM_ACCESS_ERR and A's bytes stay), "named" (a named region in
 * both key modes: its creator gone, a read-only handle reads and its own key's
 * WRITE/CAS/FAA get REM_ACCESS_ERR, a read-write handle writes, an unlink
 * with revoke kills every handle's key and the bytes come back), "stop" (rmemd stopped while
 * a client is attached and holds regions: it exits 0 and disconnects the
 * client), "device" (rdma.device naming no device leaves RDMA off; the
 * VM's device by name works), "restart" (in both key modes, rmemd restarted
 * with SIGTERM and then SIGKILL through an emulated fd store: the pools are
 * registered again, a named region's bytes read by RDMA on a new session,
 * and a session RESUMEd with its token attaches a new QP, REKEYs its region
 * and reads its bytes by RDMA).  Outside the VM
 * (RMEM_VM_RDMA_ADDR unset) the program skips.  Never asserts on time.
 *
 * An error completion moves a QP to the error state (and on rxe the daemon's
 * too), so every refused probe runs on a fresh session and QP of its own.
 * The session's owner may attach again (a re-attach replaces the session's
 * QP, keys stay) in region-mr mode; window mode refuses a second attach.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "raw.h"
#include "rawclient.h"
#include "tap.h"
#include "util.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024)
/* Sizes for a TCG guest (issue 31): rxe does every packet's work in the
 * emulated kernel, and each section's rmemd pins and registers its pool
 * (region-mr mode registers a pool-sized region more than once: the
 * cover_range() of a dead key).  16 MiB still takes 16384 packets of the
 * 1 KiB MTU each way, and is one WR as 64 MiB was (rxe's max_msg_sz is
 * 2 GiB): 64 MiB and a 256 MiB pool only cost the guest more minutes. */
#define POOL_SIZE "128M"
#define CTL_MS 60000                 /* TCG is slow: generous, never asserted */
#define DRAIN_MS 30000               /* for the quarantine to give bytes back */
#define BIG (16 * MiB)
#define ATOMIC_AREA (64 * KiB)       /* after BIG in A's buffer: atomic results */
#define A_BUF (BIG + ATOMIC_AREA)
#define SMALL_BUF (1 * MiB)
#define PROBE_LEN 64
#define CHILD_ARG "--hold-region-child"
#define CHILD_REGION (1 * MiB)
#define CHILD_REC_LEN 32
#define CLOSED_QP_WAIT_MS 5000       /* a success would take milliseconds */
#define OLD_QP_WAIT_MS 2000          /* the same, for a QP a re-attach replaced */

#define ATOMIC_THREADS 2
#define ATOMIC_WINDOW 32
#define FAA_PER_THREAD 2000
#define CAS_PER_THREAD 1000
#define ATOMIC_DEADLINE_MS 600000

struct suite {
	const char *addr;       /* RMEM_VM_RDMA_ADDR */
	const char *dev;        /* RMEM_VM_RDMA_DEV, may be NULL */
	const char *mode;       /* section name */
	char name[32];          /* keyed()'s section names */
	uint8_t key_mode;       /* what HELLO must say */
	struct rmemd d;
	struct rawclient obs;   /* a TCP-only session holding nothing: STATS */
	uint8_t *want, *got;    /* BIG bytes each */
	/* Sessions open as this tenant with this secret; NULL: anonymous. */
	const char *tenant;
	const char *secret;
};

/* ---- small helpers ---------------------------------------------------------- */

static const char *wc_name(int rc, enum ibv_wc_status st)
{
	return rc < 0 ? strerror(-rc) : ibv_wc_status_str(st);
}

/* The section what + mode, in key mode key_mode: its name and mode in s, the
 * config group that asks for that mode in group. */
static void keyed(struct suite *s, const char *what, const char *mode, uint8_t key_mode,
		  char *group, size_t len)
{
	snprintf(s->name, sizeof s->name, "%s%s", what, mode);
	s->mode = s->name;
	s->key_mode = key_mode;
	snprintf(group, len, "keys = \"%s\";", mode);
}

static int open_client(struct suite *s, struct rawclient *c)
{
	rawclient_init(c);
	if (s->tenant)
		return rawclient_open_tenant(c, s->addr, s->d.port, CTL_MS, s->tenant,
					     s->secret, strlen(s->secret));
	return rawclient_open(c, s->addr, s->d.port, CTL_MS);
}

/* A session with its own QP; on failure c is closed. */
static int open_attached(struct suite *s, struct rawclient *c, size_t buf_len)
{
	int rc = open_client(s, c);

	if (rc == 0)
		rc = rawclient_attach(c, buf_len);
	if (rc < 0) {
		diag("%s: session/attach failed: %s (last CM event %s, status %d)", s->mode,
		     strerror(-rc), c->last_event == (enum rdma_cm_event_type)-1 ? "none" :
		     rdma_event_str(c->last_event), c->last_event_status);
		rawclient_close(c);
	}
	return rc;
}

static int rdma_op(struct rawclient *c, enum rawclient_opcode opcode, uint64_t addr,
		   uint32_t rkey, size_t local_off, size_t len, enum ibv_wc_status *st)
{
	struct rawclient_op op = {
		.opcode = opcode, .remote_addr = addr, .rkey = rkey,
		.local_off = local_off, .len = len, .compare_add = 1,
	};

	return rawclient_rdma(c, &op, st);
}

/* Polls STATS until nothing is used and no region exists. */
static int wait_drained(struct suite *s, struct proto_stats *last)
{
	uint64_t deadline = now_ms() + DRAIN_MS;

	for (;;) {
		int rc = rawclient_stats(&s->obs, last);

		if (rc < 0)
			return rc;
		if (last->v[PROTO_STAT_USED_BYTES] == 0 && last->v[PROTO_STAT_REGIONS] == 0)
			return 0;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(50);
	}
}

static void check_drained(struct suite *s, const char *when)
{
	struct proto_stats st = { { 0 } };
	int rc = wait_drained(s, &st);

	ok(rc == 0, "%s: %s: used_bytes and regions return to 0 (%s; used %llu, regions %llu)",
	   s->mode, when, rc ? strerror(-rc) : "ok",
	   (unsigned long long)st.v[PROTO_STAT_USED_BYTES],
	   (unsigned long long)st.v[PROTO_STAT_REGIONS]);
}

/* Polls STATS until exactly n clients are connected (the daemon learns of a
 * closed connection in its own time). */
static int wait_clients(struct suite *s, uint64_t n)
{
	uint64_t deadline = now_ms() + DRAIN_MS;

	for (;;) {
		struct proto_stats st;
		int rc = rawclient_stats(&s->obs, &st);

		if (rc < 0)
			return rc;
		if (st.v[PROTO_STAT_CLIENTS] == n)
			return 0;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(20);
	}
}

/*
 * Once the pool has drained, a fresh client v allocates the largest free
 * block - the whole pool - so that its region surely covers [addr, addr +
 * len), the range of a dead key, and writes the pattern of seed there (also
 * left in s->want).  *off is where addr lies in v's region.
 */
static int cover_range(struct suite *s, struct rawclient *v, uint64_t addr, size_t len,
		       uint64_t seed, struct proto_region *r, uint64_t *off)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_stats stats;
	int rc = rawclient_stats(&s->obs, &stats);

	if (rc < 0)
		return rc;
	rc = open_attached(s, v, len);
	if (rc < 0)
		return rc;
	rc = rawclient_alloc(v, stats.v[PROTO_STAT_LARGEST_FREE], r);
	if (rc == 0 && (addr < r->addr || addr - r->addr > r->length - len))
		rc = -ERANGE;
	if (rc == 0) {
		*off = addr - r->addr;
		fill_random(s->want, len, seed);
		memcpy(v->buf, s->want, len);
		rc = rdma_op(v, RAWCLIENT_WRITE, r->addr + *off, r->rkey, 0, len, &st);
	}
	if (rc == 0 && st)
		rc = -EIO;
	if (rc < 0)
		rawclient_close(v);
	return rc;
}

/* v's bytes at off are still s->want, seen by the NIC and by the daemon. */
static void check_covered(struct suite *s, struct rawclient *v, const struct proto_region *r,
			  uint64_t off, size_t len, const char *after)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	long long diff;
	int rc;

	memset(v->buf, 0x5a, len);
	rc = rdma_op(v, RAWCLIENT_READ, r->addr + off, r->rkey, 0, len, &st);
	diff = rc == 0 && !st ? first_diff(v->buf, s->want, len) : -2;
	ok(diff == -1, "%s: after %s, the new region over the old range is unchanged, by RDMA "
	   "READ (%s, first difference at %lld)", s->mode, after, wc_name(rc, st), diff);
	rc = rawclient_tcp_read(v, r, off, s->got, len);
	diff = rc == 0 ? first_diff(s->got, s->want, len) : -2;
	ok(diff == -1, "%s: ... and over TCP (%s, first difference at %lld)", s->mode,
	   rc ? strerror(-rc) : "ok", diff);
}

/*
 * A fresh session of its own posts one operation with someone else's (or a
 * dead) key and reports the completion status, or a negative errno when it
 * could not even try.  Writes carry 0xA5 junk, CAS expects expect and would
 * store junk, FAA would add 1.
 */
static int probe(struct suite *s, enum rawclient_opcode opcode, uint64_t addr, uint32_t rkey,
		 uint64_t expect, enum ibv_wc_status *st)
{
	struct rawclient x;
	struct rawclient_op op = {
		.opcode = opcode, .remote_addr = addr, .rkey = rkey, .len = PROBE_LEN,
		.compare_add = opcode == RAWCLIENT_CAS ? expect : 1,
		.swap = 0xa5a5a5a5a5a5a5a5ull,
	};
	int rc = open_attached(s, &x, SMALL_BUF);

	if (rc < 0)
		return rc;
	memset(x.buf, 0xa5, PROBE_LEN);
	rc = rawclient_rdma(&x, &op, st);
	rawclient_close(&x);
	return rc;
}

static bool refused(int rc, enum ibv_wc_status st)
{
	return rc == 0 && st == IBV_WC_REM_ACCESS_ERR;
}

/* ---- attach ------------------------------------------------------------------- */

struct bogus {
	const char *what;
	uint8_t data[PROTO_ATTACH_LEN];
	uint8_t len;
};

static void try_bogus(struct suite *s, uint16_t port, const struct bogus *b)
{
	struct rawclient x;
	int rc;

	rawclient_init(&x);
	x.timeout_ms = CTL_MS;
	rc = rawclient_connect_rdma(&x, s->addr, port, b->data, b->len, 4096);
	ok(rc == -ECONNREFUSED && x.last_event == RDMA_CM_EVENT_REJECTED,
	   "%s: attach with %s is rejected (%s; CM event %s, status %d)", s->mode, b->what,
	   rc ? strerror(-rc) : "connected", rdma_event_str(x.last_event), x.last_event_status);
	rawclient_close(&x);
}

static void make_attach(struct bogus *b, const char *what, uint64_t id, uint64_t token)
{
	struct proto_attach a = { .session_id = id, .attach_token = token };

	b->what = what;
	b->len = (uint8_t)proto_attach_encode(b->data, &a);
}

/* A 4 KiB region written and read back through a's QP. */
static bool small_roundtrip(struct suite *s, struct rawclient *a, uint64_t seed)
{
	struct proto_region r;
	enum ibv_wc_status ws = IBV_WC_SUCCESS, rs = IBV_WC_SUCCESS;
	uint8_t want[4096];
	int rc = rawclient_alloc(a, sizeof want, &r);

	if (rc < 0) {
		diag("%s: alloc 4 KiB: %s", s->mode, strerror(-rc));
		return false;
	}
	fill_random(want, sizeof want, seed);
	memcpy(a->buf, want, sizeof want);
	rc = rdma_op(a, RAWCLIENT_WRITE, r.addr, r.rkey, 0, sizeof want, &ws);
	memset(a->buf, 0x5a, sizeof want);
	if (rc == 0)
		rc = rdma_op(a, RAWCLIENT_READ, r.addr, r.rkey, 0, sizeof want, &rs);
	if (rc < 0 || ws || rs)
		diag("%s: 4 KiB roundtrip: write %s, read %s", s->mode, wc_name(rc, ws),
		     wc_name(rc, rs));
	rawclient_free(a, &r);
	return rc == 0 && !ws && !rs && memcmp(a->buf, want, sizeof want) == 0;
}

/*
 * Region-mr: a second attach with a's id and token replaces a's QP.  The
 * session and its region survive, the new QP (t) works with the same key,
 * a's old QP no longer reaches the daemon.  Then a attaches once more (a
 * third QP, replacing t's) so that the rest of the section runs on a.
 */
static int test_reattach(struct suite *s, struct rawclient *a, const struct bogus *b)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r;
	struct rawclient t;
	uint8_t want[4096];
	long long diff;
	int rc = rawclient_alloc(a, sizeof want, &r);

	if (!ok(rc == 0, "%s: re-attach: a region before it (%s)", s->mode,
		rc ? strerror(-rc) : "ok"))
		return rc;
	fill_random(want, sizeof want, 21);
	memcpy(a->buf, want, sizeof want);
	rc = rdma_op(a, RAWCLIENT_WRITE, r.addr, r.rkey, 0, sizeof want, &st);
	ok(rc == 0 && !st, "%s: re-attach: written through the first QP (%s)", s->mode,
	   wc_name(rc, st));

	rawclient_init(&t);
	t.timeout_ms = CTL_MS;
	rc = rawclient_connect_rdma(&t, s->addr, a->hello.rdma_port, b->data, b->len, SMALL_BUF);
	ok(rc == 0, "%s: a second attach with the session's id and token is accepted: it "
	   "replaces the QP (%s; CM event %s)", s->mode, rc ? strerror(-rc) : "established",
	   rdma_event_str(t.last_event));
	if (rc < 0)
		return rc;
	memset(t.buf, 0x5a, sizeof want);
	rc = rdma_op(&t, RAWCLIENT_READ, r.addr, r.rkey, 0, sizeof want, &st);
	diff = rc == 0 && !st ? first_diff(t.buf, want, sizeof want) : -2;
	ok(diff == -1, "%s: re-attach: the new QP reads the region with the same key (%s, "
	   "first difference at %lld)", s->mode, wc_name(rc, st), diff);
	fill_random(want, sizeof want, 22);
	memcpy(t.buf, want, sizeof want);
	rc = rdma_op(&t, RAWCLIENT_WRITE, r.addr, r.rkey, 0, sizeof want, &st);
	ok(rc == 0 && !st, "%s: re-attach: and writes it (%s)", s->mode, wc_name(rc, st));
	rc = rawclient_ping(a);
	if (rc == 0)
		rc = rawclient_tcp_read(a, &r, 0, s->got, sizeof want);
	diff = rc == 0 ? first_diff(s->got, want, sizeof want) : -2;
	ok(diff == -1, "%s: re-attach: the session lives on: PING, and a TCP read sees the new "
	   "QP's bytes (%s, first difference at %lld)", s->mode, rc ? strerror(-rc) : "ok", diff);

	rc = rawclient_wait_cm_event(a, RDMA_CM_EVENT_DISCONNECTED, DRAIN_MS);
	ok(rc == 0, "%s: re-attach: the daemon disconnects the old QP (%s; CM event %s)",
	   s->mode, rc ? strerror(-rc) : "ok", rdma_event_str(a->last_event));
	/* As after a control close: nothing or an error, never a success. */
	a->timeout_ms = OLD_QP_WAIT_MS;
	rc = rdma_op(a, RAWCLIENT_READ, r.addr, r.rkey, 0, PROBE_LEN, &st);
	a->timeout_ms = CTL_MS;
	ok((rc == 0 && st != IBV_WC_SUCCESS) || rc == -ETIMEDOUT,
	   "%s: re-attach: the old QP reads nothing any more (%s)", s->mode, wc_name(rc, st));

	rawclient_detach(a);
	rc = rawclient_attach(a, A_BUF);
	ok(rc == 0, "%s: re-attach: the owner attaches a third QP, replacing the second (%s)",
	   s->mode, rc ? strerror(-rc) : "established");
	if (rc < 0) {
		rawclient_close(&t);
		return rc;
	}
	rawclient_close(&t);
	memset(a->buf, 0x5a, sizeof want);
	rc = rdma_op(a, RAWCLIENT_READ, r.addr, r.rkey, 0, sizeof want, &st);
	diff = rc == 0 && !st ? first_diff(a->buf, want, sizeof want) : -2;
	ok(diff == -1 && rawclient_ping(a) == 0 && small_roundtrip(s, a, 23),
	   "%s: re-attach: with the second QP closed, the third reads the same region with the "
	   "same key and new regions work (%s, first difference at %lld)", s->mode,
	   wc_name(rc, st), diff);
	rc = rawclient_free(a, &r);
	ok(rc == 0, "%s: re-attach: the region is freed (%s)", s->mode, rc ? strerror(-rc) : "ok");
	return 0;
}

/*
 * a has said HELLO but has no QP yet.  Bogus attaches first (they must not
 * spoil the session), then a's own attach, then a wrong token and a second
 * attach for the same session (a re-attach, or refused in window mode) and
 * one for a session that has closed.
 */
static int test_attach(struct suite *s, struct rawclient *a)
{
	uint64_t id = a->hello.session_id, token = a->hello.attach_token;
	uint16_t port = a->hello.rdma_port;
	struct bogus b;
	struct rawclient t;
	int rc;

	make_attach(&b, "a wrong token", id, token ^ 1);
	try_bogus(s, port, &b);
	make_attach(&b, "an unknown session id", id ^ (1ull << 62), token);
	try_bogus(s, port, &b);
	make_attach(&b, "bad magic", id, token);
	b.data[0] ^= 0xff;
	try_bogus(s, port, &b);
	make_attach(&b, "no private data", id, token);
	b.len = 0;
	try_bogus(s, port, &b);
	make_attach(&b, "a truncated attach (no token)", id, token);
	b.len = 16;
	try_bogus(s, port, &b);
	ok(rawclient_ping(a) == 0, "%s: the session answers PING after the bogus attaches",
	   s->mode);

	rc = rawclient_attach(a, A_BUF);
	ok(rc == 0, "%s: attach with the session's own id and token works (%s; CM event %s, "
	   "status %d; device %s)", s->mode, rc ? strerror(-rc) : "established",
	   rdma_event_str(a->last_event), a->last_event_status, a->dev_name);
	if (rc < 0)
		return rc;
	if (s->dev)
		ok(strcmp(a->dev_name, s->dev) == 0, "%s: rdma_cm resolved %s to %s (want %s)",
		   s->mode, s->addr, a->dev_name, s->dev);
	diag("%s: port max_msg_sz %u, send queue %u", s->mode, a->max_msg_sz, a->send_depth);

	make_attach(&b, "a wrong token for a session that has a QP", id, token ^ 1);
	try_bogus(s, port, &b);
	ok(rawclient_ping(a) == 0 && small_roundtrip(s, a, 11),
	   "%s: after an attach with a wrong token was refused, the session's QP still works",
	   s->mode);
	make_attach(&b, "the id and token of the session that has a QP", id, token);
	if (s->key_mode == PROTO_KEYS_WINDOW) {
		/* Its windows are bound to the QP it has: no re-attach. */
		try_bogus(s, port, &b);
		ok(rawclient_ping(a) == 0 && small_roundtrip(s, a, 12),
		   "%s: after the re-attach was refused, the session's own QP still works",
		   s->mode);
	} else if (test_reattach(s, a, &b) < 0) {
		return -EIO;
	}

	/* obs and a are connected, t comes and goes. */
	if (open_client(s, &t) == 0) {
		make_attach(&b, "the id and token of a closed session", t.hello.session_id,
			    t.hello.attach_token);
		rawclient_close(&t);
		rc = wait_clients(s, 2);
		ok(rc == 0, "%s: the daemon counts 2 clients again after one closed (%s)", s->mode,
		   rc ? strerror(-rc) : "ok");
		try_bogus(s, port, &b);
	} else {
		ok(0, "%s: a second session for the closed-session attach", s->mode);
	}
	return 0;
}

/* ---- own key: sizes --------------------------------------------------------- */

static void test_roundtrip(struct suite *s, struct rawclient *a, uint64_t size, uint64_t seed)
{
	enum ibv_wc_status ws = IBV_WC_SUCCESS, rs = IBV_WC_SUCCESS;
	unsigned wrs = a->max_msg_sz ? (unsigned)((size + a->max_msg_sz - 1) / a->max_msg_sz) : 0;
	struct proto_region r;
	long long diff;
	int rc = rawclient_alloc(a, size, &r);

	if (!ok(rc == 0, "%s: alloc %llu bytes on an attached session (%s)", s->mode,
		(unsigned long long)size, rc ? strerror(-rc) : "ok"))
		return;
	fill_random(s->want, size, seed);
	memcpy(a->buf, s->want, size);
	rc = rdma_op(a, RAWCLIENT_WRITE, r.addr, r.rkey, 0, size, &ws);
	memset(a->buf, 0x5a, size);
	if (rc == 0 && !ws)
		rc = rdma_op(a, RAWCLIENT_READ, r.addr, r.rkey, 0, size, &rs);
	diff = rc == 0 && !ws && !rs ? first_diff(a->buf, s->want, size) : -2;
	ok(diff == -1, "%s: own RDMA WRITE then READ of %llu bytes (%u WRs each way): write %s, "
	   "read %s, first difference at %lld", s->mode, (unsigned long long)size, wrs,
	   wc_name(rc, ws), wc_name(rc, rs), diff);

	memset(s->got, 0x3c, size);
	rc = rawclient_tcp_read(a, &r, 0, s->got, size);
	diff = rc == 0 ? first_diff(s->got, s->want, size) : -2;
	ok(diff == -1, "%s: a TCP READ of the same %llu bytes with the same key sees them (%s, "
	   "first difference at %lld)", s->mode, (unsigned long long)size,
	   rc ? strerror(-rc) : "ok", diff);

	if (size < BIG) {
		/* And the other way round: what the daemon writes, the NIC reads. */
		fill_random(s->want, size, seed + 1);
		rc = rawclient_tcp_write(a, &r, 0, s->want, size);
		memset(a->buf, 0x5a, size);
		rs = IBV_WC_SUCCESS;
		if (rc == 0)
			rc = rdma_op(a, RAWCLIENT_READ, r.addr, r.rkey, 0, size, &rs);
		diff = rc == 0 && !rs ? first_diff(a->buf, s->want, size) : -2;
		ok(diff == -1, "%s: TCP WRITE then RDMA READ of %llu bytes: %s, first difference "
		   "at %lld", s->mode, (unsigned long long)size, wc_name(rc, rs), diff);
	}
	rc = rawclient_free(a, &r);
	ok(rc == 0, "%s: free the %llu-byte region (%s)", s->mode, (unsigned long long)size,
	   rc ? strerror(-rc) : "ok");
}

/* ---- another client's key --------------------------------------------------- */

#define SHARED_LEN (64 * KiB)

/* A allocates SHARED_LEN bytes, fills them from seed (s->want) and writes
 * them by RDMA: two assertions.  0, or -1 when nothing was allocated. */
static int owner_writes(struct suite *s, struct rawclient *a, const char *who, uint64_t seed,
			struct proto_region *r, uint64_t *first8)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	int rc = rawclient_alloc(a, SHARED_LEN, r);

	if (!ok(rc == 0, "%s: %s allocates 64 KiB (%s)", s->mode, who, rc ? strerror(-rc) : "ok"))
		return -1;
	fill_random(s->want, SHARED_LEN, seed);
	memcpy(first8, s->want, sizeof *first8);
	memcpy(a->buf, s->want, SHARED_LEN);
	rc = rdma_op(a, RAWCLIENT_WRITE, r->addr, r->rkey, 0, SHARED_LEN, &st);
	ok(rc == 0 && !st, "%s: A writes its region by RDMA (%s)", s->mode, wc_name(rc, st));
	return 0;
}

/* Every operation, by a session of s's tenant, with A's (addr, rkey):
 * REM_ACCESS_ERR each time. */
static void others_refused(struct suite *s, const struct proto_region *r, uint64_t first8,
			   const char *who)
{
	static const enum rawclient_opcode ops[] = {
		RAWCLIENT_READ, RAWCLIENT_WRITE, RAWCLIENT_CAS, RAWCLIENT_FAA,
	};
	enum ibv_wc_status st = IBV_WC_SUCCESS;

	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		int rc = probe(s, ops[i], r->addr + 8 * i, r->rkey, first8, &st);

		ok(refused(rc, st), "%s: %s's %s with A's (addr, rkey) completes with "
		   "REM_ACCESS_ERR (%s)", s->mode, who, rawclient_opcode_name(ops[i]),
		   wc_name(rc, st));
	}
}

/* A's SHARED_LEN bytes are still s->want, by RDMA and over TCP; then freed. */
static void owner_unchanged(struct suite *s, struct rawclient *a, struct proto_region *r)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	long long diff;
	int rc;

	memset(a->buf, 0x5a, SHARED_LEN);
	rc = rdma_op(a, RAWCLIENT_READ, r->addr, r->rkey, 0, SHARED_LEN, &st);
	diff = rc == 0 && !st ? first_diff(a->buf, s->want, SHARED_LEN) : -2;
	ok(diff == -1, "%s: A's bytes are unchanged, read by A's RDMA READ (%s, first difference "
	   "at %lld)", s->mode, wc_name(rc, st), diff);
	rc = rawclient_tcp_read(a, r, 0, s->got, SHARED_LEN);
	diff = rc == 0 ? first_diff(s->got, s->want, SHARED_LEN) : -2;
	ok(diff == -1, "%s: A's bytes are unchanged, read over TCP (%s, first difference at %lld)",
	   s->mode, rc ? strerror(-rc) : "ok", diff);
	rawclient_free(a, r);
}

static void test_foreign(struct suite *s, struct rawclient *a)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r, rb;
	struct rawclient b;
	uint64_t first8;
	int rc;

	if (owner_writes(s, a, "A", 21, &r, &first8) < 0)
		return;
	others_refused(s, &r, first8, "client B");

	/* B's own, valid key aimed at A's bytes: only the key's bounds stop it. */
	rc = open_attached(s, &b, SMALL_BUF);
	if (rc == 0)
		rc = rawclient_alloc(&b, 4096, &rb);
	if (rc == 0)
		rc = rdma_op(&b, RAWCLIENT_READ, r.addr, rb.rkey, 0, PROBE_LEN, &st);
	if (s->key_mode == PROTO_KEYS_WINDOW)
		todo(refused(rc, st), "rxe (Linux 6.1) checks only the MR under a type 2 window",
		     "%s: B's RDMA READ of A's bytes with B's own window key is refused (%s)",
		     s->mode, wc_name(rc, st));
	else
		ok(refused(rc, st), "%s: B's RDMA READ of A's bytes with B's own region key is "
		   "refused (%s)", s->mode, wc_name(rc, st));
	rawclient_close(&b);
	owner_unchanged(s, a, &r);
}

/* ---- atomics from two threads on one QP --------------------------------------- */

struct atomic_run;

struct atomic_thread {
	struct atomic_run *run;
	uint32_t index;
	uint32_t posted, inflight, successes;
	uint64_t next_expect;                  /* CAS: the value to try next */
	uint64_t expect_ring[ATOMIC_WINDOW];   /* CAS: expect of each op in flight */
	uint64_t *records;   /* FAA: every old value; CAS: every expect that won */
	size_t nrecords, cap;
};

struct atomic_run {
	struct rawclient *c;
	pthread_mutex_t lock;     /* the QP, the CQ and everything below */
	enum rawclient_opcode opcode;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t target;          /* FAA: ops per thread; CAS: wins per thread */
	int error;                /* negative errno; 1: an error completion */
	enum ibv_wc_status bad_status;
	struct atomic_thread t[ATOMIC_THREADS];
};

static size_t atomic_slot(const struct atomic_thread *t, uint32_t idx)
{
	return BIG + ((size_t)t->index * ATOMIC_WINDOW + idx % ATOMIC_WINDOW) * 8;
}

static bool wants_more(const struct atomic_thread *t)
{
	if (t->run->opcode == RAWCLIENT_FAA)
		return t->posted < t->run->target;
	return t->successes < t->run->target;
}

static void post_more(struct atomic_thread *t)
{
	struct atomic_run *run = t->run;

	/* Completions come in posting order, so the slot of op idx - WINDOW
	 * is free again whenever fewer than WINDOW ops are in flight. */
	while (!run->error && t->inflight < ATOMIC_WINDOW && wants_more(t)) {
		uint32_t idx = t->posted;
		struct rawclient_op op = {
			.opcode = run->opcode, .remote_addr = run->raddr, .rkey = run->rkey,
			.local_off = atomic_slot(t, idx), .compare_add = 1,
		};
		int rc;

		if (run->opcode == RAWCLIENT_CAS) {
			uint64_t e = t->next_expect++;

			t->expect_ring[idx % ATOMIC_WINDOW] = e;
			op.compare_add = e;
			op.swap = e + 1;
		}
		rc = rawclient_post(run->c, &op, (uint64_t)t->index << 32 | idx);
		if (rc < 0) {
			run->error = rc;
			return;
		}
		t->posted++;
		t->inflight++;
	}
}

static void record(struct atomic_thread *t, uint64_t v)
{
	if (t->nrecords < t->cap)
		t->records[t->nrecords] = v;
	t->nrecords++;
}

static void dispatch(struct atomic_run *run, const struct ibv_wc *wc)
{
	uint32_t owner = (uint32_t)(wc->wr_id >> 32), idx = (uint32_t)wc->wr_id;
	struct atomic_thread *t;
	uint64_t old;

	if (owner >= ATOMIC_THREADS) {
		run->error = -EPROTO;
		return;
	}
	t = &run->t[owner];
	t->inflight--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (!run->error) {
			run->error = 1;
			run->bad_status = wc->status;
		}
		return;
	}
	memcpy(&old, run->c->buf + atomic_slot(t, idx), sizeof old);
	if (run->opcode == RAWCLIENT_FAA) {
		record(t, old);
	} else if (old == t->expect_ring[idx % ATOMIC_WINDOW]) {
		record(t, old);
		t->successes++;
	} else {
		/* Lost the race: old is what the counter held then. */
		t->next_expect = old;
	}
}

static void *atomic_worker(void *arg)
{
	struct atomic_thread *t = arg;
	struct atomic_run *run = t->run;
	uint64_t deadline = now_ms() + ATOMIC_DEADLINE_MS;

	pthread_mutex_lock(&run->lock);
	while (!run->error) {
		struct ibv_wc wc[16];
		int n;

		post_more(t);
		if (run->error || (t->inflight == 0 && !wants_more(t)))
			break;
		n = rawclient_poll(run->c, wc, 16, 20);
		if (n == -ETIMEDOUT) {
			if (now_ms() >= deadline)
				run->error = -ETIMEDOUT;
		} else if (n < 0) {
			run->error = n;
		}
		for (int i = 0; i < n; i++)
			dispatch(run, &wc[i]);
		/* Let the other thread post into the same QP too. */
		pthread_mutex_unlock(&run->lock);
		sched_yield();
		pthread_mutex_lock(&run->lock);
	}
	pthread_mutex_unlock(&run->lock);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x, y;

	memcpy(&x, a, sizeof x);
	memcpy(&y, b, sizeof y);
	return x < y ? -1 : x > y;
}

/* True when the n values are exactly base, base + 1, ... base + n - 1. */
static bool is_run_from(uint64_t *v, size_t n, uint64_t base, long long *bad_at)
{
	qsort(v, n, sizeof *v, cmp_u64);
	for (size_t i = 0; i < n; i++) {
		if (v[i] != base + i) {
			*bad_at = (long long)i;
			return false;
		}
	}
	*bad_at = -1;
	return true;
}

static int read_u64(struct rawclient *a, const struct proto_region *r, uint64_t *rdma_v,
		    uint64_t *tcp_v)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	int rc = rdma_op(a, RAWCLIENT_READ, r->addr, r->rkey, BIG, 8, &st);

	if (rc == 0 && st)
		rc = -EIO;
	if (rc == 0)
		memcpy(rdma_v, a->buf + BIG, sizeof *rdma_v);
	if (rc == 0)
		rc = rawclient_tcp_read(a, r, 0, tcp_v, sizeof *tcp_v);
	return rc;
}

static void atomic_round(struct suite *s, struct rawclient *a, const struct proto_region *r,
			 enum rawclient_opcode opcode, uint64_t initial, uint32_t target)
{
	struct atomic_run run = {
		.c = a, .opcode = opcode, .raddr = r->addr, .rkey = r->rkey, .target = target,
	};
	const char *name = opcode == RAWCLIENT_FAA ? "FAA" : "CAS";
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	size_t cap = target + ATOMIC_WINDOW, total = 0;
	uint64_t *all = calloc(ATOMIC_THREADS * cap, sizeof *all);
	uint64_t rdma_v = 0, tcp_v = 0, t0;
	pthread_t tid[ATOMIC_THREADS];
	long long bad_at = -1;
	int rc, started = 0;

	if (!all) {
		ok(0, "%s: %s: memory for the results", s->mode, name);
		return;
	}
	memcpy(a->buf + BIG, &initial, sizeof initial);
	rc = rdma_op(a, RAWCLIENT_WRITE, r->addr, r->rkey, BIG, 8, &st);
	if (!ok(rc == 0 && !st, "%s: %s: counter set to %#llx by RDMA WRITE (%s)", s->mode, name,
		(unsigned long long)initial, wc_name(rc, st))) {
		free(all);
		return;
	}
	pthread_mutex_init(&run.lock, NULL);
	for (uint32_t i = 0; i < ATOMIC_THREADS; i++) {
		run.t[i] = (struct atomic_thread){
			.run = &run, .index = i, .next_expect = initial,
			.records = all + i * cap, .cap = cap,
		};
	}
	t0 = now_ms();
	for (int i = 0; i < ATOMIC_THREADS; i++) {
		if (pthread_create(&tid[i], NULL, atomic_worker, &run.t[i]) != 0)
			break;
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_mutex_destroy(&run.lock);
	diag("%s: %s: %u + %u ops posted in %llu ms", s->mode, name, run.t[0].posted,
	     run.t[1].posted, (unsigned long long)(now_ms() - t0));
	if (!ok(started == ATOMIC_THREADS && run.error == 0, "%s: %s: two threads, %d in flight "
		"each, every completion successful (%s)", s->mode, name, ATOMIC_WINDOW,
		run.error == 1 ? ibv_wc_status_str(run.bad_status) :
		run.error ? strerror(-run.error) : "ok")) {
		free(all);
		return;
	}
	/* Pack both threads' records together. */
	for (int i = 0; i < ATOMIC_THREADS; i++) {
		size_t n = run.t[i].nrecords < cap ? run.t[i].nrecords : cap;

		memmove(all + total, run.t[i].records, n * sizeof *all);
		total += n;
	}
	rc = read_u64(a, r, &rdma_v, &tcp_v);
	if (opcode == RAWCLIENT_FAA) {
		uint64_t want = initial + (uint64_t)ATOMIC_THREADS * target;

		ok(rc == 0 && rdma_v == want && tcp_v == want, "%s: FAA: final value %#llx "
		   "(RDMA READ), %#llx (TCP READ), want %#llx (%s)", s->mode,
		   (unsigned long long)rdma_v, (unsigned long long)tcp_v,
		   (unsigned long long)want, rc ? strerror(-rc) : "ok");
		ok(total == (size_t)ATOMIC_THREADS * target &&
		   is_run_from(all, total, initial, &bad_at),
		   "%s: FAA: the %zu old values are each value from the initial one exactly once "
		   "(first bad at %lld)", s->mode, total, bad_at);
	} else {
		ok(rc == 0 && rdma_v == initial + total && tcp_v == rdma_v &&
		   total >= (size_t)ATOMIC_THREADS * target, "%s: CAS: final value %#llx (RDMA), "
		   "%#llx (TCP) = initial + %zu successful swaps (%s)", s->mode,
		   (unsigned long long)rdma_v, (unsigned long long)tcp_v, total,
		   rc ? strerror(-rc) : "ok");
		ok(is_run_from(all, total, initial, &bad_at), "%s: CAS: every value was swapped "
		   "exactly once (first bad at %lld; %u + %u posted)", s->mode, bad_at,
		   run.t[0].posted, run.t[1].posted);
	}
	free(all);
}

static void test_atomics(struct suite *s, struct rawclient *a)
{
	struct proto_region r;
	int rc = rawclient_alloc(a, 4096, &r);

	if (!ok(rc == 0, "%s: alloc a region for atomics (%s)", s->mode, rc ? strerror(-rc) : "ok"))
		return;
	/* Carries over 32 bits, to catch a 32-bit add. */
	atomic_round(s, a, &r, RAWCLIENT_FAA, (1ull << 32) - 1000, FAA_PER_THREAD);
	atomic_round(s, a, &r, RAWCLIENT_CAS, (1ull << 40) - 700, CAS_PER_THREAD);
	rawclient_free(a, &r);
}

/* ---- freed keys --------------------------------------------------------------- */

/*
 * A's own QP uses the key of a region A freed, after the range went through
 * the quarantine and became part of client V's region.  Then fresh sessions
 * try the other operations, and an owner uses a key right after FREE, while
 * the range rests in the quarantine.  Leaves a's QP in the error state.
 */
static void test_stale(struct suite *s, struct rawclient *a)
{
	const size_t len = 1 * MiB;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r1, r2, r3;
	struct rawclient v, a4;
	uint64_t first8, off = 0;
	int rc = rawclient_alloc(a, len, &r1);

	if (!ok(rc == 0, "%s: A allocates 1 MiB (%s)", s->mode, rc ? strerror(-rc) : "ok"))
		return;
	fill_random(a->buf, len, 31);
	rc = rdma_op(a, RAWCLIENT_WRITE, r1.addr, r1.rkey, 0, len, &st);
	ok(rc == 0 && !st, "%s: A writes it by RDMA (%s)", s->mode, wc_name(rc, st));
	rc = rawclient_free(a, &r1);
	ok(rc == 0, "%s: A frees it (%s)", s->mode, rc ? strerror(-rc) : "ok");
	check_drained(s, "after A's free");

	rc = cover_range(s, &v, r1.addr, len, 32, &r2, &off);
	if (!ok(rc == 0, "%s: client V's new region covers A's freed range and V writes it by "
		"RDMA (%s)", s->mode, rc ? strerror(-rc) : "ok"))
		return;

	memset(a->buf, 0xa5, len);
	rc = rdma_op(a, RAWCLIENT_WRITE, r1.addr, r1.rkey, 0, len, &st);
	ok(refused(rc, st), "%s: A's RDMA WRITE with the key of its freed region completes with "
	   "REM_ACCESS_ERR (%s)", s->mode, wc_name(rc, st));

	memcpy(&first8, s->want, sizeof first8);
	rc = probe(s, RAWCLIENT_READ, r1.addr, r1.rkey, 0, &st);
	ok(refused(rc, st), "%s: a new session's RDMA READ with the freed key: REM_ACCESS_ERR (%s)",
	   s->mode, wc_name(rc, st));
	rc = probe(s, RAWCLIENT_CAS, r1.addr, r1.rkey, first8, &st);
	ok(refused(rc, st), "%s: a new session's CAS with the freed key: REM_ACCESS_ERR (%s)",
	   s->mode, wc_name(rc, st));
	rc = probe(s, RAWCLIENT_FAA, r1.addr + 8, r1.rkey, 0, &st);
	ok(refused(rc, st), "%s: a new session's FAA with the freed key: REM_ACCESS_ERR (%s)",
	   s->mode, wc_name(rc, st));
	check_covered(s, &v, &r2, off, len, "the stale accesses");
	rawclient_close(&v);
	check_drained(s, "after V, which held the whole pool, closed");

	/* Right after FREE, while the range rests in the quarantine. */
	rc = open_attached(s, &a4, SMALL_BUF);
	if (rc == 0)
		rc = rawclient_alloc(&a4, 64 * KiB, &r3);
	if (rc == 0)
		rc = rawclient_free(&a4, &r3);
	if (rc == 0)
		rc = rdma_op(&a4, RAWCLIENT_WRITE, r3.addr, r3.rkey, 0, PROBE_LEN, &st);
	ok(refused(rc, st), "%s: an RDMA WRITE right after FREE, on the owner's own QP: "
	   "REM_ACCESS_ERR (%s)", s->mode, wc_name(rc, st));
	rawclient_close(&a4);
}

/* ---- keys of a killed client ------------------------------------------------------ */

/* The child: attach, allocate, write by RDMA, tell the parent, wait to die. */
static int child_main(int argc, char **argv)
{
	struct rawclient c;
	struct proto_region r = { 0 };
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	uint8_t rec[CHILD_REC_LEN] = { 0 };
	char *end;
	unsigned long port, fd;
	int rc;

	if (argc != 5)
		return 2;
	port = strtoul(argv[3], &end, 10);
	if (*end || port == 0 || port > 65535)
		return 2;
	fd = strtoul(argv[4], &end, 10);
	if (*end || fd > 1024)
		return 2;
	rawclient_init(&c);
	rc = rawclient_open(&c, argv[2], (uint16_t)port, CTL_MS);
	if (rc == 0)
		rc = rawclient_attach(&c, CHILD_REGION);
	if (rc == 0)
		rc = rawclient_alloc(&c, CHILD_REGION, &r);
	if (rc == 0) {
		fill_random(c.buf, CHILD_REGION, 41);
		rc = rdma_op(&c, RAWCLIENT_WRITE, r.addr, r.rkey, 0, CHILD_REGION, &st);
		if (rc == 0 && st)
			rc = -EIO;
	}
	proto_put_u32(rec, (uint32_t)rc);
	proto_put_u32(rec + 4, r.rkey);
	proto_put_u64(rec + 8, r.id);
	proto_put_u64(rec + 16, r.addr);
	proto_put_u64(rec + 24, r.length);
	if (write((int)fd, rec, sizeof rec) != (ssize_t)sizeof rec)
		return 3;
	for (;;)
		pause();
}

/* Runs this program again as the child, its write end of a pipe as fd. */
static pid_t spawn_child(struct suite *s, int *rfd)
{
	char port[16], fdarg[16];
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		char *argv[6];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		if (fcntl(p[1], F_SETFD, 0) < 0)
			_exit(126);
		snprintf(port, sizeof port, "%u", s->d.port);
		snprintf(fdarg, sizeof fdarg, "%d", p[1]);
		argv[0] = (char *)"test_rdma_keys";
		argv[1] = (char *)CHILD_ARG;
		argv[2] = (char *)s->addr;
		argv[3] = port;
		argv[4] = fdarg;
		argv[5] = NULL;
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

static int read_record(int fd, uint8_t *rec, size_t len, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	size_t got = 0;

	while (got < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		n = read(fd, rec + got, len - got);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	return 0;
}

static int kill_child(pid_t pid)
{
	int status = 0;

	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static void test_killed(struct suite *s)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_stats stats = { { 0 } };
	uint8_t rec[CHILD_REC_LEN];
	uint64_t addr, length;
	uint32_t rkey;
	struct proto_region rv;
	struct rawclient p, v;
	uint64_t off = 0;
	int rfd = -1, rc, child_rc;
	pid_t pid;

	rawclient_init(&v);
	check_drained(s, "before the child starts");
	pid = spawn_child(s, &rfd);
	if (!ok(pid > 0, "%s: child client started (%s)", s->mode,
		pid > 0 ? "ok" : strerror((int)-pid)))
		return;
	rc = read_record(rfd, rec, sizeof rec, 2 * CTL_MS);
	close(rfd);
	child_rc = rc == 0 ? (int32_t)proto_get_u32(rec) : rc;
	rkey = proto_get_u32(rec + 4);
	addr = proto_get_u64(rec + 16);
	length = proto_get_u64(rec + 24);
	if (!ok(child_rc == 0 && length == CHILD_REGION, "%s: the child attached, allocated "
		"%llu bytes and wrote them by RDMA (%s)", s->mode, (unsigned long long)length,
		child_rc ? strerror(-child_rc) : "ok")) {
		kill_child(pid);
		return;
	}
	rc = rawclient_stats(&s->obs, &stats);
	ok(rc == 0 && stats.v[PROTO_STAT_USED_BYTES] >= length && stats.v[PROTO_STAT_REGIONS] == 1,
	   "%s: STATS counts the child's region (used %llu, regions %llu)", s->mode,
	   (unsigned long long)stats.v[PROTO_STAT_USED_BYTES],
	   (unsigned long long)stats.v[PROTO_STAT_REGIONS]);
	rc = kill_child(pid);
	ok(rc == 128 + SIGKILL, "%s: the child died of SIGKILL (%d)", s->mode, rc);
	check_drained(s, "after the child's death");
	rc = cover_range(s, &v, addr, (size_t)length, 42, &rv, &off);
	ok(rc == 0, "%s: client V's new region covers the dead child's range and V writes it by "
	   "RDMA (%s)", s->mode, rc ? strerror(-rc) : "ok");

	rc = open_attached(s, &p, SMALL_BUF);
	if (rc == 0)
		rc = rdma_op(&p, RAWCLIENT_READ, addr, rkey, 0, PROBE_LEN, &st);
	ok(refused(rc, st), "%s: the parent's RDMA READ with the dead child's (addr, rkey): "
	   "REM_ACCESS_ERR (%s)", s->mode, wc_name(rc, st));
	rawclient_close(&p);
	rc = probe(s, RAWCLIENT_WRITE, addr, rkey, 0, &st);
	ok(refused(rc, st), "%s: an RDMA WRITE with the dead child's key: REM_ACCESS_ERR (%s)",
	   s->mode, wc_name(rc, st));
	if (v.fd >= 0) {
		check_covered(s, &v, &rv, off, (size_t)length, "the dead key's probes");
		rawclient_close(&v);
	}
	check_drained(s, "after the probes of the dead child's key");
}

/* ---- the control stream closes ------------------------------------------------------ */

/*
 * A client closes its TCP control stream but keeps its QP open: the session
 * ends, the daemon disconnects the QP, and the keys die, though the client's
 * side of the QP still exists.
 */
static void test_control_close(struct suite *s)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r;
	struct rawclient x;
	int rc = open_attached(s, &x, SMALL_BUF);

	if (rc == 0)
		rc = rawclient_alloc(&x, 64 * KiB, &r);
	if (rc == 0)
		rc = rdma_op(&x, RAWCLIENT_WRITE, r.addr, r.rkey, 0, PROBE_LEN, &st);
	if (!ok(rc == 0 && !st, "%s: a client attaches, allocates and writes by RDMA (%s)",
		s->mode, wc_name(rc, st))) {
		rawclient_close(&x);
		return;
	}
	close(x.fd);
	x.fd = -1;
	rc = wait_clients(s, 1);
	ok(rc == 0, "%s: closing the control stream ends the session (%s)", s->mode,
	   rc ? strerror(-rc) : "ok");
	check_drained(s, "after the control stream closed");
	rc = rawclient_wait_cm_event(&x, RDMA_CM_EVENT_DISCONNECTED, DRAIN_MS);
	ok(rc == 0, "%s: the daemon disconnects the client's QP (%s; CM event %s)", s->mode,
	   rc ? strerror(-rc) : "ok", rdma_event_str(x.last_event));
	/* Its side of the QP stays in RTS; against a peer QP that is gone, rxe
	 * (Linux 6.1) was seen to complete nothing at all, not even after the
	 * retries: no completion within a while is a refusal too, success is not. */
	x.timeout_ms = CLOSED_QP_WAIT_MS;
	rc = rdma_op(&x, RAWCLIENT_READ, r.addr, r.rkey, 0, PROBE_LEN, &st);
	ok((rc == 0 && st != IBV_WC_SUCCESS) || rc == -ETIMEDOUT, "%s: its QP, still open on its "
	   "side, reads nothing with its key (%s)", s->mode, wc_name(rc, st));
	rawclient_close(&x);
}

/* ---- the key's own bounds ---------------------------------------------------------- */

static void test_bounds(struct suite *s)
{
	static const struct {
		const char *where;
		int64_t delta;   /* from the region's start; INT64_MAX: its end */
	} at[] = { { "just past the end", INT64_MAX }, { "just before the start", -8 } };

	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		enum ibv_wc_status st = IBV_WC_SUCCESS;
		struct proto_region r;
		struct rawclient x;
		uint64_t addr;
		int rc = open_attached(s, &x, SMALL_BUF);

		if (rc == 0)
			rc = rawclient_alloc(&x, 4096, &r);
		if (rc == 0) {
			addr = at[i].delta == INT64_MAX ? r.addr + r.length :
			       r.addr + (uint64_t)at[i].delta;
			rc = rdma_op(&x, RAWCLIENT_READ, addr, r.rkey, 0, 8, &st);
		}
		if (s->key_mode == PROTO_KEYS_WINDOW)
			todo(refused(rc, st), "rxe (Linux 6.1) checks only the MR under a type 2 "
			     "window", "%s: own RDMA READ of 8 bytes %s of the region is refused "
			     "(%s)", s->mode, at[i].where, wc_name(rc, st));
		else
			ok(refused(rc, st), "%s: own RDMA READ of 8 bytes %s of the region is "
			   "refused (%s)", s->mode, at[i].where, wc_name(rc, st));
		rawclient_close(&x);
	}
}

/* ---- sections ---------------------------------------------------------------------- */

static int section_start_extra(struct suite *s, const char *rdma_group, const char *extra)
{
	struct rmemd_opts o;
	int rc;

	rmemd_opts_init(&o);
	o.host = s->addr;
	o.listen_rdma = rdma_group != NULL;
	o.rdma_group = rdma_group;
	o.pool_size = POOL_SIZE;
	o.extra = extra;
	o.lease_timeout_ms = 60000;     /* TCG is slow */
	o.ready_timeout_ms = 60000;
	rc = rmemd_start_opts(&s->d, &o);

	if (!ok(rc == 0, "%s: rmemd starts (listen.rdma %s, rdma = { %s }) (%s)", s->mode,
		rdma_group ? "on" : "\"\"", rdma_group ? rdma_group : "",
		rc ? strerror(-rc) : "ok"))
		return rc;
	rc = open_client(s, &s->obs);
	if (!ok(rc == 0, "%s: a TCP session says HELLO (%s)", s->mode, rc ? strerror(-rc) : "ok")) {
		rmemd_cleanup(&s->d);
		return rc;
	}
	return 0;
}

static int section_start(struct suite *s, const char *rdma_group)
{
	return section_start_extra(s, rdma_group, NULL);
}

static void section_end(struct suite *s)
{
	int rc;

	check_drained(s, "at the end");
	rawclient_close(&s->obs);
	rc = rmemd_stop(&s->d);
	ok(rc == 0, "%s: rmemd exits 0 on SIGTERM (%d)", s->mode, rc);
	rmemd_cleanup(&s->d);
}

static void check_hello(struct suite *s, const struct rawclient *c, bool rdma)
{
	ok(c->hello.key_mode == s->key_mode, "%s: HELLO says key_mode %u (want %u)", s->mode,
	   c->hello.key_mode, s->key_mode);
	if (rdma)
		ok(c->hello.rdma_port == s->d.rdma_port, "%s: HELLO says rdma_port %u (listen.rdma "
		   "port %u)", s->mode, c->hello.rdma_port, s->d.rdma_port);
	else
		ok(c->hello.rdma_port == 0, "%s: HELLO says rdma_port 0 (%u)", s->mode,
		   c->hello.rdma_port);
}

/* listen.rdma = "": no RDMA for anyone, and the TCP path unharmed by trying. */
static void section_none(struct suite *s, const char *mode, uint8_t key_mode)
{
	struct proto_attach att;
	struct bogus b;
	struct rawclient x;
	struct proto_region r;
	uint8_t data[4096];
	uint16_t port;
	int rc;

	(void)mode;
	(void)key_mode;
	s->mode = "none";
	s->key_mode = PROTO_KEYS_NONE;
	if (section_start(s, NULL) < 0)
		return;
	check_hello(s, &s->obs, false);
	rc = rawclient_attach(&s->obs, 4096);
	ok(rc == -EOPNOTSUPP, "%s: rawclient does not attach when rdma_port is 0 (%s)", s->mode,
	   strerror(-rc));

	/* Nothing listens for rdma_cm: the connect request is refused. */
	port = s->d.port;
	att.session_id = s->obs.hello.session_id;
	att.attach_token = s->obs.hello.attach_token;
	b.len = (uint8_t)proto_attach_encode(b.data, &att);
	rawclient_init(&x);
	x.timeout_ms = CTL_MS;
	rc = rawclient_connect_rdma(&x, s->addr, port, b.data, b.len, 4096);
	ok(rc == -ECONNREFUSED || rc == -EHOSTUNREACH, "%s: rdma_connect to %s:%u, where nothing "
	   "listens, fails (%s; CM event %s, status %d)", s->mode, s->addr, port,
	   rc ? strerror(-rc) : "connected", rdma_event_str(x.last_event), x.last_event_status);
	if (s->dev)
		ok(strcmp(x.dev_name, s->dev) == 0, "%s: rdma_cm resolved %s to device %s "
		   "(want %s)",
		   s->mode, s->addr, x.dev_name[0] ? x.dev_name : "(none)", s->dev);
	rawclient_close(&x);

	fill_random(data, sizeof data, 1);
	rc = rawclient_alloc(&s->obs, sizeof data, &r);
	if (rc == 0)
		rc = rawclient_tcp_write(&s->obs, &r, 0, data, sizeof data);
	if (rc == 0)
		rc = rawclient_tcp_read(&s->obs, &r, 0, s->got, sizeof data);
	ok(rc == 0 && memcmp(s->got, data, sizeof data) == 0, "%s: the session still allocates, "
	   "writes and reads over TCP (%s)", s->mode, rc ? strerror(-rc) : "ok");
	if (rc == 0)
		rawclient_free(&s->obs, &r);
	section_end(s);
}

/* keys = "auto" on rxe: region-mr, and the keys hold. */
static void section_auto(struct suite *s, const char *mode, uint8_t key_mode)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r;
	struct rawclient a;
	int rc;

	(void)mode;
	(void)key_mode;
	s->mode = "auto";
	s->key_mode = PROTO_KEYS_REGION_MR;
	if (section_start(s, "keys = \"auto\";") < 0)
		return;
	check_hello(s, &s->obs, true);
	rc = open_attached(s, &a, SMALL_BUF);
	if (ok(rc == 0, "%s: a session attaches (%s)", s->mode, rc ? strerror(-rc) : "ok")) {
		ok(small_roundtrip(s, &a, 51), "%s: own RDMA WRITE and READ of 4 KiB", s->mode);
		rc = rawclient_alloc(&a, 4096, &r);
		if (rc == 0)
			rc = probe(s, RAWCLIENT_READ, r.addr, r.rkey, 0, &st);
		ok(refused(rc, st), "%s: another session's RDMA READ with this key: REM_ACCESS_ERR "
		   "(%s)", s->mode, wc_name(rc, st));
		rawclient_close(&a);
	}
	section_end(s);
}

static void section_full(struct suite *s, const char *mode, uint8_t key_mode)
{
	static const uint64_t sizes[] = { 1, 4096, 8 * MiB + 1, BIG };
	char group[64];
	struct rawclient a;
	int rc;

	keyed(s, "", mode, key_mode, group, sizeof group);
	if (section_start(s, group) < 0)
		return;
	check_hello(s, &s->obs, true);

	rc = open_client(s, &a);
	if (ok(rc == 0, "%s: client A says HELLO (%s)", mode, rc ? strerror(-rc) : "ok") &&
	    test_attach(s, &a) == 0) {
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
			test_roundtrip(s, &a, sizes[i], 100 + i);
		test_foreign(s, &a);
		test_atomics(s, &a);
		test_stale(s, &a);
	}
	rawclient_close(&a);
	test_killed(s);
	test_control_close(s);
	test_bounds(s);
	section_end(s);
}

/* ---- shutdown and devices (once tests/rdma/daemon_smoke.sh) ------------------------- */

#define HOLD_REGIONS 300

/* Allocates up to HOLD_REGIONS regions of 4 KiB into r, frees every other
 * one and writes the last by RDMA; how many it allocated, or -errno. */
static int hold_regions(struct rawclient *h, struct proto_region *r)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct rawclient_op op = { .opcode = RAWCLIENT_WRITE, .len = 4096 };
	int n = 0, rc = 0;

	for (; n < HOLD_REGIONS && rc == 0; n += rc == 0)
		rc = rawclient_alloc(h, 4096, &r[n]);
	for (int i = 0; i < n && rc == 0; i += 2)
		rc = rawclient_free(h, &r[i]);
	if (rc == 0 && n > 0) {
		op.remote_addr = r[n - 1].addr;
		op.rkey = r[n - 1].rkey;
		rc = rawclient_rdma(h, &op, &st);
	}
	if (rc == 0 && st != IBV_WC_SUCCESS)
		rc = -EIO;
	return rc < 0 ? rc : n;
}

/*
 * rmemd stopped while a client is attached and holds regions (every other
 * one freed, so the quarantine holds some): it exits 0, disconnects the
 * client's queue pair and closes its stream.
 */
static void section_stop(struct suite *s, const char *mode, uint8_t key_mode)
{
	struct proto_region *r = calloc(HOLD_REGIONS, sizeof *r);
	char group[64];
	struct rawclient h;
	int rc;

	keyed(s, "stop-", mode, key_mode, group, sizeof group);
	if (!r || section_start(s, group) < 0) {
		free(r);
		return;
	}
	rc = open_attached(s, &h, SMALL_BUF);
	if (ok(rc == 0, "%s: a client attaches (%s)", s->mode, rc ? strerror(-rc) : "ok")) {
		rc = hold_regions(&h, r);
		ok(rc == HOLD_REGIONS, "%s: it allocates %d regions, frees every other one and "
		   "writes the last by RDMA (%s)", s->mode, HOLD_REGIONS,
		   rc < 0 ? strerror(-rc) : "ok");
	}
	rawclient_close(&s->obs);
	rc = rmemd_stop(&s->d);
	ok(rc == 0, "%s: rmemd exits 0 on SIGTERM with the client attached (%d)", s->mode, rc);
	if (h.cm_id) {
		rc = rawclient_wait_cm_event(&h, RDMA_CM_EVENT_DISCONNECTED, CTL_MS);
		ok(rc == 0, "%s: the daemon's stop disconnects the client's QP (%s; CM event %s)",
		   s->mode, rc ? strerror(-rc) : "ok", rdma_event_str(h.last_event));
		rc = h.fd >= 0 ? raw_wait_closed(h.fd, CTL_MS) : -ENOTCONN;
		ok(rc == 0, "%s: and closes its control stream (%s)", s->mode,
		   rc ? strerror(-rc) : "ok");
	}
	rawclient_close(&h);
	rmemd_cleanup(&s->d);
	free(r);
}

/* rdma.device: a name that is no device leaves RDMA off (HELLO says so, TCP
 * works); the VM's device by its name ($RMEM_VM_RDMA_DEV) gives RDMA. */
static void section_device(struct suite *s, const char *mode, uint8_t key_mode)
{
	char group[96];

	(void)mode;
	(void)key_mode;
	s->mode = "device-nosuch";
	s->key_mode = PROTO_KEYS_NONE;
	if (section_start(s, "device = \"nosuch\";") == 0) {
		check_hello(s, &s->obs, false);
		section_end(s);
	}
	if (!s->dev) {
		skip(6, "RMEM_VM_RDMA_DEV is not set");
		return;
	}
	s->mode = "device-named";
	s->key_mode = PROTO_KEYS_REGION_MR;
	snprintf(group, sizeof group, "device = \"%s\"; keys = \"region-mr\";", s->dev);
	if (section_start(s, group) == 0) {
		check_hello(s, &s->obs, true);
		section_end(s);
	}
}

/* ---- named regions ------------------------------------------------------------------ */

#define NAMED "t/a"
#define NAMED_LEN 4096

/* c's handle r reads s->want by RDMA: the first difference, -1 for none,
 * -2 when the read failed (rc, st say how). */
static long long named_read_diff(struct suite *s, struct rawclient *c,
				 const struct proto_region *r, int *rc, enum ibv_wc_status *st)
{
	memset(c->buf, 0x5a, NAMED_LEN);
	*st = IBV_WC_SUCCESS;
	*rc = rdma_op(c, RAWCLIENT_READ, r->addr, r->rkey, 0, NAMED_LEN, st);
	return *rc == 0 && !*st ? first_diff(c->buf, s->want, NAMED_LEN) : -2;
}

/* A session of its own attaches and opens NAMED with access. */
static int named_open(struct suite *s, struct rawclient *c, uint32_t access,
		      struct proto_region *r)
{
	int rc = open_attached(s, c, SMALL_BUF);

	if (rc == 0)
		rc = rawclient_name(c, PROTO_OP_OPEN, NAMED, 0, access, r);
	if (rc == 0 && r->flags != access)
		rc = -EPROTO;
	if (rc < 0)
		diag("%s: OPEN %s (access %u): %s (granted %u)", s->mode, NAMED, access,
		     strerror(-rc), r->flags);
	return rc;
}

/* A fresh session opens NAMED read-only and tries opcode with its own
 * handle on its own QP: a reader like B.  Never on B's QP, which an error
 * completion would spoil (and window mode refuses a second attach); nor with
 * B's key from another QP, which the NIC refuses whatever its access. */
static int named_ro_probe(struct suite *s, enum rawclient_opcode opcode, uint64_t expect,
			  enum ibv_wc_status *st)
{
	struct rawclient x;
	struct proto_region r;
	struct rawclient_op op = {
		.opcode = opcode, .len = PROBE_LEN,
		.compare_add = opcode == RAWCLIENT_CAS ? expect : 1,
		.swap = 0xa5a5a5a5a5a5a5a5ull,
	};
	int rc = named_open(s, &x, PROTO_ACCESS_READ, &r);

	if (rc == 0) {
		op.remote_addr = r.addr;
		op.rkey = r.rkey;
		memset(x.buf, 0xa5, PROBE_LEN);
		rc = rawclient_rdma(&x, &op, st);
	}
	rawclient_close(&x);
	return rc;
}

/* A creates NAMED, writes s->want (seed) by RDMA and closes its session. */
static int named_create(struct suite *s, uint64_t seed)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r = { 0 };
	struct rawclient a;
	int rc = open_attached(s, &a, SMALL_BUF);

	if (rc == 0)
		rc = rawclient_name(&a, PROTO_OP_CREATE, NAMED, NAMED_LEN, 0, &r);
	ok(rc == 0 && r.flags == (PROTO_ACCESS_READ | PROTO_ACCESS_WRITE) &&
	   r.length >= NAMED_LEN, "%s: A creates %s: a read-write handle of %llu bytes (%s, "
	   "access %u)", s->mode, NAMED, (unsigned long long)r.length,
	   rc ? strerror(-rc) : "ok", r.flags);
	if (rc == 0) {
		fill_random(s->want, NAMED_LEN, seed);
		memcpy(a.buf, s->want, NAMED_LEN);
		rc = rdma_op(&a, RAWCLIENT_WRITE, r.addr, r.rkey, 0, NAMED_LEN, &st);
		ok(rc == 0 && !st, "%s: A writes its pattern by RDMA (%s)", s->mode,
		   wc_name(rc, st));
	}
	if (rc == 0 && st)
		rc = -EIO;
	rawclient_close(&a);
	return rc;
}

/* B's read-only key: WRITE, CAS and FAA complete with REM_ACCESS_ERR. */
static void named_refusals(struct suite *s)
{
	static const enum rawclient_opcode ops[] = { RAWCLIENT_WRITE, RAWCLIENT_CAS,
						     RAWCLIENT_FAA };
	uint64_t first8;

	memcpy(&first8, s->want, sizeof first8);
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		enum ibv_wc_status st = IBV_WC_SUCCESS;
		int rc = named_ro_probe(s, ops[i], first8, &st);

		ok(refused(rc, st), "%s: %s on its own QP with a read-only handle's own "
		   "key: REM_ACCESS_ERR (%s)", s->mode, rawclient_opcode_name(ops[i]), wc_name(rc, st));
	}
}

/* C (read-write) sees the bytes unchanged by RDMA and TCP, then writes
 * s->want anew from seed; B sees that. */
static void named_shared(struct suite *s, struct rawclient *b, const struct proto_region *rb,
			 struct rawclient *c, const struct proto_region *rc_, uint64_t seed)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	long long diff = named_read_diff(s, c, rc_, &(int){ 0 }, &st);
	int rc;

	ok(diff == -1, "%s: through a read-write handle, the bytes are unchanged after the "
	   "refused WRITE, CAS and FAA, by RDMA READ (%s, first difference at %lld)", s->mode,
	   ibv_wc_status_str(st), diff);
	rc = rawclient_tcp_read(c, rc_, 0, s->got, NAMED_LEN);
	diff = rc == 0 ? first_diff(s->got, s->want, NAMED_LEN) : -2;
	ok(diff == -1, "%s: ... and over TCP (%s, first difference at %lld)", s->mode,
	   rc ? strerror(-rc) : "ok", diff);
	fill_random(s->want, NAMED_LEN, seed);
	memcpy(c->buf, s->want, NAMED_LEN);
	rc = rdma_op(c, RAWCLIENT_WRITE, rc_->addr, rc_->rkey, 0, NAMED_LEN, &st);
	ok(rc == 0 && !st, "%s: C writes by RDMA through its read-write handle (%s)", s->mode,
	   wc_name(rc, st));
	diff = named_read_diff(s, b, rb, &rc, &st);
	ok(diff == -1, "%s: B reads C's write through its read-only handle (%s, first "
	   "difference at %lld)", s->mode, wc_name(rc, st), diff);
}

/* C unlinks with revoke: every handle dies at once and the bytes return. */
static void named_revoke(struct suite *s, struct rawclient *b, const struct proto_region *rb,
			 struct rawclient *c, const struct proto_region *rc_)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region r;
	int rc = rawclient_name(c, PROTO_OP_UNLINK, NAMED, 0, PROTO_UNLINK_REVOKE, NULL);

	ok(rc == 0, "%s: C unlinks %s with PROTO_UNLINK_REVOKE (%s)", s->mode, NAMED,
	   rc ? strerror(-rc) : "ok");
	rc = rdma_op(b, RAWCLIENT_READ, rb->addr, rb->rkey, 0, PROBE_LEN, &st);
	ok(refused(rc, st), "%s: B's next RDMA READ with its revoked key: REM_ACCESS_ERR (%s)",
	   s->mode, wc_name(rc, st));
	rc = rawclient_tcp_read(c, rc_, 0, s->got, PROBE_LEN);
	ok(rc == -ENOENT, "%s: C's TCP READ through its revoked handle: -ENOENT (%s)", s->mode,
	   strerror(-rc));
	rc = rawclient_name(c, PROTO_OP_OPEN, NAMED, 0, PROTO_ACCESS_READ, &r);
	ok(rc == -ENOENT, "%s: OPEN %s after the unlink: -ENOENT (%s)", s->mode, NAMED,
	   strerror(-rc));
	/* B and C still hold their sessions: the memory comes back anyway. */
	check_drained(s, "after the revoke, with B and C still connected");
}

/* Issue 10's raw-verbs proof: A creates, B reads only, C reads and writes,
 * then C revokes; in this key mode. */
static void section_named(struct suite *s, const char *mode, uint8_t key_mode)
{
	char group[64];
	struct proto_region rb, rc_, r;
	struct rawclient b, c;
	long long diff;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	int rc;

	keyed(s, "named/", mode, key_mode, group, sizeof group);
	if (section_start(s, group) < 0)
		return;
	check_hello(s, &s->obs, true);
	if (named_create(s, 91) < 0)
		goto out;
	rc = named_open(s, &b, PROTO_ACCESS_READ, &rb);
	ok(rc == 0, "%s: with A gone, B opens %s read-only (%s)", s->mode, NAMED,
	   rc ? strerror(-rc) : "ok");
	if (rc < 0)
		goto out;
	diff = named_read_diff(s, &b, &rb, &rc, &st);
	ok(diff == -1, "%s: B reads A's pattern by RDMA READ (%s, first difference at %lld)",
	   s->mode, wc_name(rc, st), diff);
	named_refusals(s);
	rc = named_open(s, &c, PROTO_ACCESS_READ | PROTO_ACCESS_WRITE, &rc_);
	ok(rc == 0, "%s: C opens %s read-write (%s)", s->mode, NAMED, rc ? strerror(-rc) : "ok");
	if (rc == 0) {
		rc = rawclient_name(&c, PROTO_OP_CREATE, NAMED, NAMED_LEN, 0, &r);
		ok(rc == -EEXIST, "%s: CREATE %s again: -EEXIST (%s)", s->mode, NAMED,
		   strerror(-rc));
		rc = rawclient_name(&c, PROTO_OP_OPEN, "t/none", 0, PROTO_ACCESS_READ, &r);
		ok(rc == -ENOENT, "%s: OPEN t/none: -ENOENT (%s)", s->mode, strerror(-rc));
		named_shared(s, &b, &rb, &c, &rc_, 92);
		named_revoke(s, &b, &rb, &c, &rc_);
	}
	rawclient_close(&c);
	rawclient_close(&b);
out:
	section_end(s);
}

/* ---- tenants ------------------------------------------------------------------------ */

#define SECRET_A "tenant A's secret, 0123456789"
#define SECRET_B "tenant B's secret, 9876543210"

struct keydir {
	char dir[32];
	char a[64], b[64];
};

static int write_key(const char *path, const char *secret)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, secret, strlen(secret));
	close(fd);
	return n == (ssize_t)strlen(secret) ? 0 : -EIO;
}

static int keydir_make(struct keydir *k)
{
	memcpy(k->dir, "/tmp/rmemk.XXXXXX", sizeof "/tmp/rmemk.XXXXXX");
	if (!mkdtemp(k->dir))
		return -errno;
	snprintf(k->a, sizeof k->a, "%s/a.key", k->dir);
	snprintf(k->b, sizeof k->b, "%s/b.key", k->dir);
	if (write_key(k->a, SECRET_A) < 0 || write_key(k->b, SECRET_B) < 0)
		return -EIO;
	return 0;
}

static void keydir_remove(struct keydir *k)
{
	unlink(k->a);
	unlink(k->b);
	rmdir(k->dir);
}

/* What B can do with A's handle on the NIC and over TCP: nothing. */
static void tenants_cross(struct suite *s, struct rawclient *a)
{
	struct proto_region r;
	struct rawclient b;
	uint64_t first8;
	int rc;

	if (owner_writes(s, a, "tenant A", 77, &r, &first8) < 0)
		return;
	s->tenant = "B";
	s->secret = SECRET_B;
	others_refused(s, &r, first8, "tenant B");
	rc = open_client(s, &b);
	ok(rc == 0, "%s: tenant B opens a session (%s)", s->mode, rc ? strerror(-rc) : "ok");
	if (rc == 0) {
		rc = rawclient_tcp_read(&b, &r, 0, s->got, PROBE_LEN);
		ok(rc == -EACCES || rc == -ENOENT, "%s: B's TCP READ of A's region is refused (%s)",
		   s->mode, strerror(-rc));
		memset(s->got, 0xa5, PROBE_LEN);
		rc = rawclient_tcp_write(&b, &r, 0, s->got, PROBE_LEN);
		ok(rc == -EACCES || rc == -ENOENT, "%s: B's TCP WRITE is refused (%s)", s->mode,
		   strerror(-rc));
		rc = rawclient_free(&b, &r);
		ok(rc == -EACCES || rc == -ENOENT, "%s: B's FREE of it is refused (%s)", s->mode,
		   strerror(-rc));
	}
	rawclient_close(&b);
	s->secret = SECRET_A "x";
	rc = open_client(s, &b);
	ok(rc == -EACCES, "%s: B with a wrong secret is refused (%s)", s->mode, strerror(-rc));
	rawclient_close(&b);
	s->tenant = "A";
	s->secret = SECRET_A;
	owner_unchanged(s, a, &r);
}

/* Tenants A and B on one daemon in this key mode. */
static void section_tenants(struct suite *s, const char *mode, uint8_t key_mode)
{
	char group[64], extra[512];
	struct keydir k;
	struct rawclient a;
	int rc;

	keyed(s, "tenants/", mode, key_mode, group, sizeof group);
	if (!ok(keydir_make(&k) == 0, "%s: secret files written", s->mode))
		return;
	snprintf(extra, sizeof extra, "tenants = ( { name = \"A\"; secret_file = \"%s\"; },\n"
		 "            { name = \"B\"; secret_file = \"%s\"; } );", k.a, k.b);
	s->tenant = "A";
	s->secret = SECRET_A;
	if (section_start_extra(s, group, extra) < 0)
		goto out;
	check_hello(s, &s->obs, true);
	s->tenant = NULL;
	rc = open_client(s, &a);
	ok(rc == -EACCES, "%s: an anonymous network client is refused (%s)", s->mode,
	   strerror(-rc));
	rawclient_close(&a);
	s->tenant = "A";
	rc = open_attached(s, &a, SMALL_BUF);
	if (ok(rc == 0, "%s: tenant A authenticates and attaches (%s)", s->mode,
	       rc ? strerror(-rc) : "ok")) {
		ok(small_roundtrip(s, &a, 61), "%s: A's own RDMA WRITE and READ", s->mode);
		tenants_cross(s, &a);
		rawclient_close(&a);
	}
	section_end(s);
out:
	s->tenant = NULL;
	s->secret = NULL;
	keydir_remove(&k);
}

/* ---- restart without loss (docs/architecture.md; protocol 7.13) ------------------ */

#define RESTART_LEN 65536

/* Polls STATS until n regions exist (the daemon learns of a closed
 * connection in its own time). */
static void wait_regions(struct suite *s, uint64_t n)
{
	uint64_t deadline = now_ms() + DRAIN_MS;
	struct proto_stats st;

	while (rawclient_stats(&s->obs, &st) == 0 && st.v[PROTO_STAT_REGIONS] != n &&
	       now_ms() < deadline)
		sleep_ms(20);
}

/* One restart of s->d with sig while old (the session's client until now)
 * is still connected; then old is closed, the session (sid, token) is
 * RESUMEd by r on a new stream, attaches a new QP, REKEYs region id and
 * reads pattern back by RDMA; B, a new session, reads the named region. */
static void restart_round(struct suite *s, int sig, uint64_t sid, const uint8_t *token,
			  uint64_t id, const uint8_t *pattern, struct rawclient *old,
			  struct rawclient *r)
{
	const char *how = sig == SIGKILL ? "kill -9" : "SIGTERM";
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct proto_region nr = { 0 }, rb;
	struct rawclient b;
	long long diff = -2;
	int rc;

	rc = rmemd_restart(&s->d, sig, 60000);
	ok(rc == 0 && rmemd_log_contains(&s->d, "restored from the fd store"),
	   "%s: after %s rmemd restores from the fd store (%s)", s->mode, how,
	   rc ? strerror(-rc) : "ok");
	rawclient_close(old);
	rawclient_init(r);
	if (rc < 0)
		return;
	rawclient_close(&s->obs);
	open_client(s, &s->obs);
	rc = rawclient_resume(r, s->addr, s->d.port, CTL_MS, sid, token);
	ok(rc == 0 && r->hello.session_id == sid,
	   "%s: after %s the session RESUMEs with its token (%s)", s->mode, how,
	   rc ? strerror(-rc) : "ok");
	if (rc == 0)
		rc = rawclient_attach(r, SMALL_BUF);
	ok(rc == 0, "%s: after %s the resumed session attaches a new QP (%s)", s->mode, how,
	   rc ? strerror(-rc) : "ok");
	if (rc == 0)
		rc = rawclient_rekey(r, id, &nr);
	if (rc == 0) {
		memset(r->buf, 0, RESTART_LEN);
		rc = rdma_op(r, RAWCLIENT_READ, nr.addr, nr.rkey, 0, RESTART_LEN, &st);
		diff = rc == 0 && !st ? first_diff(r->buf, pattern, RESTART_LEN) : -2;
	}
	ok(diff == -1, "%s: after %s REKEY gives a NIC key; RDMA READ finds the region's bytes "
	   "(%s, first difference at %lld)", s->mode, how, wc_name(rc, st), diff);
	rc = named_open(s, &b, PROTO_ACCESS_READ, &rb);
	diff = rc == 0 ? named_read_diff(s, &b, &rb, &rc, &st) : -2;
	ok(diff == -1, "%s: after %s a new session reads the named region by RDMA (%s, first "
	   "difference at %lld)", s->mode, how, wc_name(rc, st), diff);
	rawclient_close(&b);
	/* Before the next restart the daemon must have ended B's session: a
	 * kill -9 first would restore it, handle and all, for a whole lease. */
	wait_regions(s, 1);
}

static void section_restart(struct suite *s, const char *mode, uint8_t key_mode)
{
	char group[64];
	uint8_t token[PROTO_RESUME_TOKEN_LEN];
	struct proto_region reg = { 0 }, nr;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct rawclient r, r2;
	uint64_t sid;
	int rc;

	keyed(s, "restart/", mode, key_mode, group, sizeof group);
	if (section_start(s, group) < 0)
		return;
	if (named_create(s, 97) < 0)
		goto out;
	rc = open_attached(s, &r, SMALL_BUF);
	if (rc == 0)
		rc = rawclient_alloc(&r, RESTART_LEN, &reg);
	if (rc == 0) {
		fill_random(s->got, RESTART_LEN, 98);
		memcpy(r.buf, s->got, RESTART_LEN);
		rc = rdma_op(&r, RAWCLIENT_WRITE, reg.addr, reg.rkey, 0, RESTART_LEN, &st);
	}
	ok(rc == 0 && !st && r.hello.resumable,
	   "%s: a session with a resume token writes its region by RDMA (%s)", s->mode,
	   wc_name(rc, st));
	if (rc < 0 || st) {
		rawclient_close(&r);
		goto out;
	}
	sid = r.hello.session_id;
	memcpy(token, r.hello.resume_token, sizeof token);
	restart_round(s, SIGTERM, sid, token, reg.id, s->got, &r, &r2);
	restart_round(s, SIGKILL, sid, token, reg.id, s->got, &r2, &r);
	if (r.fd >= 0) {
		rc = rawclient_rekey(&r, reg.id, &nr);
		if (rc == 0)
			rc = rawclient_free(&r, &nr);
		ok(rc == 0, "%s: the resumed session frees its region (%s)", s->mode,
		   rc ? strerror(-rc) : "ok");
		rc = rawclient_name(&r, PROTO_OP_UNLINK, NAMED, 0, 0, &nr);
		ok(rc == 0, "%s: and unlinks %s (%s)", s->mode, NAMED, rc ? strerror(-rc) : "ok");
	}
	rawclient_close(&r);
out:
	section_end(s);
}

/* In the order they run; the name runs a section alone.  Those without a mode
 * choose their keys themselves. */
static const struct section {
	const char *name;
	void (*fn)(struct suite *s, const char *mode, uint8_t key_mode);
	const char *mode;
	uint8_t key_mode;
} sections[] = {
	{ "none", section_none, NULL, 0 },
	{ "region-mr", section_full, "region-mr", PROTO_KEYS_REGION_MR },
	{ "window", section_full, "window", PROTO_KEYS_WINDOW },
	{ "auto", section_auto, NULL, 0 },
	{ "tenants", section_tenants, "region-mr", PROTO_KEYS_REGION_MR },
	{ "tenants", section_tenants, "window", PROTO_KEYS_WINDOW },
	{ "named", section_named, "region-mr", PROTO_KEYS_REGION_MR },
	{ "named", section_named, "window", PROTO_KEYS_WINDOW },
	{ "stop", section_stop, "region-mr", PROTO_KEYS_REGION_MR },
	{ "stop", section_stop, "window", PROTO_KEYS_WINDOW },
	{ "device", section_device, NULL, 0 },
	{ "restart", section_restart, "region-mr", PROTO_KEYS_REGION_MR },
	{ "restart", section_restart, "window", PROTO_KEYS_WINDOW },
};

int main(int argc, char **argv)
{
	struct suite s = { 0 };
	const char *only = argc >= 2 ? argv[1] : NULL;

	if (argc >= 2 && strcmp(argv[1], CHILD_ARG) == 0)
		return child_main(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	s.addr = getenv("RMEM_VM_RDMA_ADDR");
	if (!s.addr || !*s.addr)
		tap_skip_all("RMEM_VM_RDMA_ADDR is not set: runs in the Soft-RoCE VM "
			     "(make check-rdma)");
	s.dev = getenv("RMEM_VM_RDMA_DEV");
	if (s.dev && !*s.dev)
		s.dev = NULL;
	s.want = malloc(BIG);
	s.got = malloc(BIG);
	if (!s.want || !s.got)
		tap_skip_all("no memory for the test buffers");
	for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
		if (!only || !strcmp(only, sections[i].name))
			sections[i].fn(&s, sections[i].mode, sections[i].key_mode);
	free(s.want);
	free(s.got);
	return tap_done();
}
