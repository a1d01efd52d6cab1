/*
 * test_session.c - sessions (session.c) and the request handlers above them
 * (ctl.c) with stub NIC keys: the key ops table of keys.h filled with
 * functions that record what they are asked and answer as told.  No
 * connection, no socket, no verbs: one server with one 1 MiB pool, driven
 * by direct calls and by ctl_dispatch().
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "ctl.h"
#include "inproc.h"
#include "keys.h"
#include "log.h"
#include "names.h"
#include "pool.h"
#include "quarantine.h"
#include "region.h"
#include "server.h"
#include "session.h"
#include "tap.h"

#define POOL_BYTES (1u << 20)
#define MAX_CALLS  64

/* ---- the stub NIC ----------------------------------------------------------- */

enum call { NEW, DROP, STOP, DESTROY };

static struct stub {
	enum call calls[MAX_CALLS];
	uint64_t ids[MAX_CALLS];
	uint32_t access[MAX_CALLS]; /* key_new's access, by call */
	int ncalls;
	int fail_new;            /* key_new's answer when nonzero */
	enum key_gone gone;      /* key_drop's answer for a key it made */
	uint64_t live[MAX_CALLS]; /* ids with a key */
	int nlive;
} stub;

static void record(enum call c, uint64_t id)
{
	if (stub.ncalls < MAX_CALLS) {
		stub.calls[stub.ncalls] = c;
		stub.ids[stub.ncalls] = id;
	}
	stub.ncalls++;
}

static int count(enum call c)
{
	int n = 0;

	for (int i = 0; i < stub.ncalls && i < MAX_CALLS; i++)
		n += stub.calls[i] == c;
	return n;
}

static int stub_key_new(struct nic_peer *p, uint64_t id, uint32_t pool, uint8_t *addr,
			uint64_t len, uint32_t access, uint32_t *rkey)
{
	(void)p;
	(void)pool;
	(void)addr;
	(void)len;
	record(NEW, id);
	if (stub.ncalls <= MAX_CALLS)
		stub.access[stub.ncalls - 1] = access;
	if (stub.fail_new)
		return stub.fail_new;
	stub.live[stub.nlive++] = id;
	*rkey = 0x5eed0000u | (uint32_t)id;
	return 0;
}

static enum key_gone stub_key_drop(struct nic_peer *p, uint64_t id)
{
	(void)p;
	record(DROP, id);
	for (int i = 0; i < stub.nlive; i++) {
		if (stub.live[i] == id) {
			stub.live[i] = stub.live[--stub.nlive];
			return stub.gone;
		}
	}
	return KEY_NONE;
}

static void stub_peer_stop(struct nic_peer *p)
{
	(void)p;
	record(STOP, 0);
}

static void stub_peer_destroy(struct nic_peer *p)
{
	(void)p;
	record(DESTROY, 0);
}

static const struct key_ops stub_ops = {
	.key_new = stub_key_new,
	.key_drop = stub_key_drop,
	.peer_stop = stub_peer_stop,
	.peer_destroy = stub_peer_destroy,
};

/* Never dereferenced: the stubs only pass it along. */
static struct nic_peer *const stub_peer = (struct nic_peer *)&stub;

static void stub_reset(void)
{
	memset(&stub, 0, sizeof stub);
	stub.gone = KEY_CONFIRMED;
}

/* ---- the server ------------------------------------------------------------- */

/* The one in-process server of tests/lib/inproc.h, with the stub keys. */
static struct server *server_up(void)
{
	struct inproc_opts o;
	struct server *srv;
	char err[256];

	inproc_opts_init(&o, "unit", POOL_BYTES);
	o.log_level = LOG_CRIT;
	srv = inproc_new(&o, err, sizeof err);
	if (!srv) {
		diag("server_up: %s", err);
		return NULL;
	}
	srv->keys = &stub_ops;
	return srv;
}

/* Whether no range waits in the quarantine. */
static bool quarantine_is_empty(const struct server *srv)
{
	uint64_t due;

	return !quarantine_next_due(srv->quarantine, &due);
}

static uint64_t pool_free_bytes(struct server *srv)
{
	struct alloc_stats a;

	alloc_get_stats(srv->pools[0].alloc, &a);
	return a.total - a.used;
}

/* An attached session: its client has a (stub) queue pair. */
static struct session *attached(struct server *srv)
{
	struct session *s = session_new(srv, SESSION_UNIX, false, "unit");

	if (s) {
		s->hello_done = true;
		srv->clients++;
		s->nic = stub_peer;
	}
	return s;
}

/* ---- sessions ---------------------------------------------------------------- */

static void test_alloc_free(struct server *srv)
{
	struct session *s = attached(srv);
	const struct region *r = NULL;
	uint64_t id;
	int rc;

	stub_reset();
	rc = session_alloc(srv, s, 4096, 0, &r);
	ok(rc == 0 && r, "alloc with a queue pair (%d)", rc);
	if (!r)
		return;
	id = r->id;
	ok(count(NEW) == 1 && stub.ids[0] == id, "alloc made one NIC key, for region %llu",
	   (unsigned long long)id);
	ok(r->key == (0x5eed0000u | (uint32_t)id), "the region's key is the NIC's (%#x)", r->key);
	rc = session_free(srv, s, id, r->key);
	ok(rc == 0, "free (%d)", rc);
	ok(count(DROP) == 1 && stub.ids[1] == id && stub.nlive == 0,
	   "free dropped that key (%d drops)", count(DROP));
	ok(srv->used_bytes == 0 && quarantine_is_empty(srv) &&
	   pool_free_bytes(srv) == POOL_BYTES,
	   "a confirmed key: the range is back at once, no quarantine (used %llu)",
	   (unsigned long long)srv->used_bytes);
	session_destroy(srv, s);
}

static void test_key_failure(struct server *srv)
{
	struct session *s = attached(srv);
	const struct region *r = NULL;
	int rc;

	stub_reset();
	stub.fail_new = -ETIMEDOUT;
	rc = session_alloc(srv, s, 8192, 0, &r);
	ok(rc == -ETIMEDOUT, "a key that cannot be made fails the alloc with its error (%d)", rc);
	ok(region_count(srv->regions) == 0 && s->nregions == 0 && srv->used_bytes == 0 &&
	   pool_free_bytes(srv) == POOL_BYTES,
	   "and leaves no region and no bytes behind (%llu regions)",
	   (unsigned long long)region_count(srv->regions));
	stub.fail_new = -EIO;
	rc = session_alloc(srv, s, 8192, 0, &r);
	ok(rc == -EIO, "-EIO passes through too (%d)", rc);
	/* A retired queue pair (window mode, the client moved to TCP): the
	 * region is made with the TCP key the table drew, and served. */
	stub.fail_new = -ENOTCONN;
	rc = session_alloc(srv, s, 8192, 0, &r);
	ok(rc == 0 && r && s->nregions == 1 && srv->used_bytes == 8192,
	   "-ENOTCONN from key_new: the alloc succeeds with a TCP key (%d)", rc);
	if (rc == 0) {
		uint8_t *w = NULL;

		ok(session_io(srv, s, r->id, r->key, PROTO_ACCESS_WRITE, 0, 8, &w, NULL) == 0 && w &&
		   session_io(srv, s, r->id, r->key ^ 1, PROTO_ACCESS_READ, 0, 8, &w, NULL) == -EACCES,
		   "which the TCP path serves with that key, and refuses with another");
		ok(session_free(srv, s, r->id, r->key) == 0 && srv->used_bytes == 0,
		   "and frees (no NIC key to drop)");
	}
	session_destroy(srv, s);
}

static void test_destroy(struct server *srv)
{
	struct session *s = attached(srv);
	const struct region *r;
	uint64_t ids[3];
	int rc = 0, order_ok = 1, dropped = 0;

	stub_reset();
	for (int i = 0; i < 3; i++) {
		rc |= session_alloc(srv, s, 1000 * (uint64_t)(i + 1), 0, &r);
		ids[i] = rc ? 0 : r->id;
	}
	ok(rc == 0 && count(NEW) == 3, "three regions, three keys (%d)", count(NEW));
	stub.ncalls = 0;
	session_destroy(srv, s);
	/* The queue pair stops before any key dies, and goes after them all. */
	ok(stub.ncalls == 5 && stub.calls[0] == STOP && stub.calls[4] == DESTROY,
	   "destroy: stop first, destroy last (%d calls)", stub.ncalls);
	for (int i = 1; i < 4 && i < stub.ncalls; i++)
		order_ok &= stub.calls[i] == DROP;
	for (int i = 0; i < 3; i++)
		for (int j = 1; j < 4 && j < stub.ncalls; j++)
			dropped += stub.ids[j] == ids[i];
	ok(order_ok && dropped == 3 && stub.nlive == 0, "destroy dropped every key (%d of 3)",
	   dropped);
	ok(region_count(srv->regions) == 0 && srv->used_bytes == 0,
	   "and every region is gone (used %llu)", (unsigned long long)srv->used_bytes);
}

static void test_tcp_only(struct server *srv)
{
	struct session *s = session_new(srv, SESSION_UNIX, false, "tcp");
	const struct region *r = NULL;
	int rc;

	stub_reset();
	rc = session_alloc(srv, s, 4096, 0, &r);
	ok(rc == 0 && count(NEW) == 0, "no queue pair: no NIC key (%d)", rc);
	rc = r ? session_free(srv, s, r->id, r->key) : -1;
	ok(rc == 0 && count(DROP) == 0 && srv->used_bytes == 0,
	   "and none dropped; bytes back at once (%d)", rc);
	session_destroy(srv, s);
	ok(count(STOP) == 0 && count(DESTROY) == 0, "nor a queue pair stopped");
}

/* A range in flight (session.h, struct range_hold): freed while two
 * transfers hold it, it stays out of the pool, its bytes counted and not
 * zeroed, until the last hold goes; then it goes back as a free would have
 * sent it (here: to the quarantine, its key's death unconfirmed). */
static void test_hold(struct server *srv)
{
	struct session *s = attached(srv);
	struct range_hold a = { 0 }, b = { 0 };
	const struct region *r = NULL;
	uint8_t *w = NULL, *w2 = NULL;
	uint64_t id, key;
	int rc;

	stub_reset();
	stub.gone = KEY_UNCONFIRMED;
	rc = session_alloc(srv, s, 4096, 0, &r);
	id = r ? r->id : 0;
	key = r ? r->key : 0;
	rc = rc ? rc : session_io(srv, s, id, (uint32_t)key, PROTO_ACCESS_WRITE, 8, 8, &w, &a);
	rc = rc ? rc : session_io(srv, s, id, (uint32_t)key, PROTO_ACCESS_READ, 0, 4096, &w2, &b);
	if (!ok(rc == 0 && a.active && b.active && srv->holds,
		"two transfers hold a 4 KiB region (%d)", rc))
		goto out;
	memset(w, 0x77, 8);
	rc = session_io(srv, s, id, (uint32_t)key, PROTO_ACCESS_READ, 0, 8, &w, NULL);
	ok(rc == 0 && a.active && b.active && srv->holds && srv->holds->next &&
	   !srv->holds->next->next, "a request without a hold takes none (%d)", rc);
	rc = session_free(srv, s, id, (uint32_t)key);
	ok(rc == 0 && a.ended && b.ended && (a.owes ^ b.owes),
	   "free: both holds see their region ended, one owes the range (%d)", rc);
	ok(srv->used_bytes == 4096 && pool_free_bytes(srv) == POOL_BYTES - 4096 &&
	   quarantine_is_empty(srv) && w2[8] == 0x77,
	   "held: not back, not zeroed, still counted (used %llu)",
	   (unsigned long long)srv->used_bytes);
	session_unhold(srv, a.owes ? &a : &b);
	ok(srv->used_bytes == 4096 && pool_free_bytes(srv) == POOL_BYTES - 4096 &&
	   (a.owes || b.owes) && quarantine_is_empty(srv),
	   "the owing hold goes first: the other one owes it now");
	session_unhold(srv, &a);
	session_unhold(srv, &b);
	ok(!srv->holds && !quarantine_is_empty(srv) && srv->counters.quarantine_bytes == 4096,
	   "the last hold goes: the range enters the quarantine");
	session_unhold(srv, &a);
	ok(!srv->holds, "releasing a hold twice does nothing");
out:
	session_quarantine_flush(srv);
	session_quarantine_init(srv);
	session_destroy(srv, s);
	ok(srv->used_bytes == 0 && pool_free_bytes(srv) == POOL_BYTES,
	   "and back in the pool once the quarantine is done");
}

/* ---- the quarantine, through ctl_dispatch ------------------------------------- */

static enum ctl_outcome call(struct server *srv, struct session *s, uint16_t op,
			     const uint8_t *p, size_t len, bool may_wait, struct ctl_reply *rep)
{
	struct proto_hdr h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION, .opcode = op,
			       .length = (uint32_t)len, .req_id = 1 };
	struct ctl_req q = { .s = s, .fd = -1, .h = &h, .payload = p, .len = len,
			     .may_wait = may_wait };

	return ctl_dispatch(srv, &q, rep);
}

static int ctl_alloc(struct server *srv, struct session *s, uint64_t size, bool may_wait,
		     struct ctl_reply *rep, struct proto_region *reg)
{
	struct proto_alloc_req a = { .size = size };
	uint8_t buf[64];
	size_t n = proto_alloc_req_encode(buf, &a);
	int st = -1;

	if (call(srv, s, PROTO_OP_ALLOC, buf, n, may_wait, rep) != CTL_REPLY)
		return 1;
	if (rep->status < 0)
		return rep->status;
	return proto_alloc_rep_decode(rep->payload, rep->len, &st, reg) < 0 ? -EBADMSG : st;
}

static int ctl_free(struct server *srv, struct session *s, const struct proto_region *reg)
{
	struct proto_free_req f = { .id = reg->id, .rkey = reg->rkey };
	struct ctl_reply rep;
	uint8_t buf[64];
	size_t n = proto_free_req_encode(buf, &f);

	if (call(srv, s, PROTO_OP_FREE, buf, n, false, &rep) != CTL_REPLY)
		return 1;
	return rep.status;
}

/* Whether the region's bytes in the pool are all zero. */
static bool all_zero_pool(const struct proto_region *reg)
{
	const uint8_t *b = (const uint8_t *)(uintptr_t)reg->addr;

	for (uint64_t i = 0; i < reg->length; i++)
		if (b[i])
			return false;
	return true;
}

static void test_quarantine(struct server *srv)
{
	struct session *s = attached(srv);
	struct proto_region reg, again;
	enum ctl_outcome out;
	struct ctl_reply rep;
	uint64_t big = POOL_BYTES * 3 / 4;
	uint64_t enomem = srv->counters.alloc_failures[COUNTERS_ENOMEM];
	int rc;

	stub_reset();
	stub.gone = KEY_UNCONFIRMED;
	rc = ctl_alloc(srv, s, big, true, &rep, &reg);
	ok(rc == 0, "ctl: ALLOC of 3/4 of the pool (%d)", rc);
	if (rc == 0)
		memset((uint8_t *)(uintptr_t)reg.addr, 0xab, reg.length);
	rc = ctl_free(srv, s, &reg);
	ok(rc == 0 && !quarantine_is_empty(srv) && srv->used_bytes >= big,
	   "ctl: FREE of an unconfirmed key puts its range in the quarantine (%d)", rc);
	ok(srv->counters.quarantine_bytes == reg.length,
	   "counters: the quarantine holds the region's %llu bytes (%llu)",
	   (unsigned long long)reg.length, (unsigned long long)srv->counters.quarantine_bytes);
	out = call(srv, s, PROTO_OP_ALLOC, NULL, 0, true, &rep);
	ok(out == CTL_REPLY_AND_CLOSE && rep.status == -EBADMSG,
	   "ctl: a malformed ALLOC closes the connection (%d)", rep.status);
	rc = ctl_alloc(srv, s, big, true, &rep, &again);
	ok(rc == 1 && rep.outcome == CTL_WAIT && rep.wait_until_ns > (uint64_t)clock_mono_ns() &&
	   rep.wait_until_ns <= (uint64_t)clock_mono_ns() + QUARANTINE_MS * 1000000ull,
	   "ctl: an ALLOC only the quarantine stands in the way of waits for it (%d)", rc);
	rc = ctl_alloc(srv, s, big, false, &rep, &again);
	ok(rc == -ENOMEM, "ctl: once its wait is over, it is -ENOMEM (%d)", rc);
	rc = ctl_alloc(srv, s, 2 * POOL_BYTES, true, &rep, &again);
	ok(rc == -ENOMEM, "ctl: one the quarantine cannot help does not wait (%d)", rc);
	ok(srv->counters.alloc_failures[COUNTERS_ENOMEM] == enomem + 2,
	   "counters: two ENOMEM answers, the wait not counted (%llu)",
	   (unsigned long long)(srv->counters.alloc_failures[COUNTERS_ENOMEM] - enomem));
	nanosleep(&(struct timespec){ .tv_nsec = (QUARANTINE_MS + 20) * 1000000l }, NULL);
	rc = ctl_alloc(srv, s, big, true, &rep, &again);
	ok(rc == 0 && again.length >= big && quarantine_is_empty(srv),
	   "ctl: served again once the range is due, it succeeds (%d)", rc);
	ok(rc == 0 && all_zero_pool(&again), "ctl: the fresh region is zeroes");
	ok(srv->counters.quarantine_bytes == 0, "counters: the quarantine is empty again (%llu)",
	   (unsigned long long)srv->counters.quarantine_bytes);
	stub.gone = KEY_CONFIRMED;
	rc = ctl_free(srv, s, &again);
	rc = rc ? rc : ctl_alloc(srv, s, big, false, &rep, &again);
	ok(rc == 0, "ctl: a confirmed key: FREE then ALLOC at once, no wait (%d)", rc);
	session_destroy(srv, s);
}

/* A tenant's quota held only by quarantined bytes: the ALLOC waits too. */
static void test_quota_wait(struct server *srv)
{
	struct config_tenant *t = &srv->cfg.tenants[0];
	struct session *s = attached(srv);
	struct proto_region reg, again;
	struct ctl_reply rep;
	int rc;

	snprintf(t->name, sizeof t->name, "unit");
	t->quota = 600u << 10;
	srv->cfg.ntenants = 1;
	s->tenant = t;
	stub_reset();
	stub.gone = KEY_UNCONFIRMED;
	rc = ctl_alloc(srv, s, 512u << 10, true, &rep, &reg);
	rc = rc ? rc : ctl_free(srv, s, &reg);
	ok(rc == 0 && !quarantine_is_empty(srv), "quota: 512 KiB of a 600 KiB quota freed into the "
	   "quarantine (%d)", rc);
	rc = ctl_alloc(srv, s, 512u << 10, true, &rep, &again);
	ok(rc == 1 && rep.outcome == CTL_WAIT,
	   "quota: an ALLOC only quarantined bytes keep past the quota waits (%d)", rc);
	rc = ctl_alloc(srv, s, 512u << 10, false, &rep, &again);
	ok(rc == -EDQUOT, "quota: once its wait is over, it is -EDQUOT (%d)", rc);
	rc = ctl_alloc(srv, s, 700u << 10, true, &rep, &again);
	ok(rc == -EDQUOT, "quota: one above the quota itself does not wait (%d)", rc);
	nanosleep(&(struct timespec){ .tv_nsec = (QUARANTINE_MS + 20) * 1000000l }, NULL);
	rc = ctl_alloc(srv, s, 512u << 10, true, &rep, &again);
	ok(rc == 0, "quota: served again once the bytes are back, it succeeds (%d)", rc);
	session_destroy(srv, s);
	session_quarantine_flush(srv);
	rc = session_quarantine_init(srv);
	ok(rc == 0 && srv->tenants.use[0].bytes == 0 && srv->tenants.use[0].regions == 0,
	   "quota: the tenant holds nothing once all is back (%llu bytes)",
	   (unsigned long long)srv->tenants.use[0].bytes);
	srv->cfg.ntenants = 0;
}

/* ---- named regions ------------------------------------------------------------ */

#define RW (PROTO_ACCESS_READ | PROTO_ACCESS_WRITE)

/* CREATE, OPEN or UNLINK through ctl_dispatch: the status; *reg for a region. */
static int ctl_name(struct server *srv, struct session *s, uint16_t op, const char *name,
		    uint64_t size, uint32_t flags, struct proto_region *reg)
{
	struct proto_name_req m = { .size = size, .flags = flags,
				    .name_len = (uint16_t)strlen(name) };
	uint8_t buf[PROTO_NAME_REQ_FIXED + PROTO_NAME_MAX];
	struct ctl_reply rep;
	size_t n;
	int st = -1;

	memcpy(m.name, name, m.name_len);
	n = proto_name_req_encode(buf, op, &m);
	if (call(srv, s, op, buf, n, false, &rep) != CTL_REPLY)
		return 1;
	if (rep.status < 0 || op == PROTO_OP_UNLINK)
		return rep.status;
	return proto_alloc_rep_decode(rep.payload, rep.len, &st, reg) < 0 ? -EBADMSG : st;
}

static int ctl_atomic(struct server *srv, struct session *s, uint16_t op,
		      const struct proto_region *reg)
{
	struct proto_atomic_req a = { .id = reg->id, .rkey = reg->rkey, .operand = 1 };
	struct ctl_reply rep;
	uint8_t buf[64];
	size_t n = proto_atomic_req_encode(buf, op, &a);

	if (call(srv, s, op, buf, n, false, &rep) != CTL_REPLY)
		return 1;
	return rep.status;
}

static int io(struct server *srv, struct session *s, const struct proto_region *reg,
	      uint32_t need, uint8_t **where)
{
	return session_io(srv, s, reg->id, reg->rkey, need, 0, 8, where, NULL);
}

static void test_named(struct server *srv)
{
	struct session *a = attached(srv), *b = attached(srv), *c;
	struct proto_region ra, rb, rc_, tmp;
	uint64_t used0 = srv->used_bytes;
	uint8_t *w = NULL;
	int rc;

	stub_reset();
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "t/a", 4096, 0, &ra);
	ok(rc == 0 && ra.flags == RW && count(NEW) == 1 && stub.access[0] == RW,
	   "CREATE: a READ|WRITE handle with a READ|WRITE key (%d, flags %#x)", rc, ra.flags);
	rc = rc ? rc : io(srv, a, &ra, PROTO_ACCESS_WRITE, &w);
	if (rc == 0)
		memcpy(w, "pattern", 8);
	session_destroy(srv, a);
	ok(names_count(srv->names) == 1 && srv->used_bytes == used0 + 4096 &&
	   region_count(srv->regions) == 0,
	   "the creator's end releases its handle; the object and its bytes stay (%llu)",
	   (unsigned long long)srv->used_bytes);
	stub.ncalls = 0;
	rc = ctl_name(srv, b, PROTO_OP_OPEN, "t/a", 0, PROTO_ACCESS_READ, &rb);
	ok(rc == 0 && rb.flags == PROTO_ACCESS_READ && rb.length == 4096 &&
	   count(NEW) == 1 && stub.access[0] == PROTO_ACCESS_READ,
	   "OPEN read-only: a handle with a read-only key (%d)", rc);
	rc = io(srv, b, &rb, PROTO_ACCESS_READ, &w);
	ok(rc == 0 && !memcmp(w, "pattern", 8), "the reader reads the creator's bytes (%d)", rc);
	ok(io(srv, b, &rb, PROTO_ACCESS_WRITE, &w) == -EACCES &&
	   ctl_atomic(srv, b, PROTO_OP_CAS, &rb) == -EACCES &&
	   ctl_atomic(srv, b, PROTO_OP_FAA, &rb) == -EACCES,
	   "a read-only handle: WRITE, CAS and FAA are -EACCES");
	c = attached(srv);
	rc = ctl_name(srv, c, PROTO_OP_OPEN, "t/a", 0, PROTO_ACCESS_WRITE, &rc_);
	ok(rc == 0 && io(srv, c, &rc_, PROTO_ACCESS_READ, &w) == -EACCES &&
	   ctl_atomic(srv, c, PROTO_OP_FAA, &rc_) == 0,
	   "a write-only handle: READ -EACCES, FAA served (%d)", rc);
	ok(io(srv, b, &rb, PROTO_ACCESS_READ, &w) == 0 && w[0] == 'p' + 1,
	   "the reader sees the writer's FAA");
	ok(ctl_name(srv, b, PROTO_OP_CREATE, "t/a", 64, 0, &tmp) == -EEXIST,
	   "CREATE of an existing name: -EEXIST");
	ok(ctl_name(srv, b, PROTO_OP_OPEN, "t/none", 0, PROTO_ACCESS_READ, &tmp) == -ENOENT,
	   "OPEN of a missing name: -ENOENT");
	ok(ctl_name(srv, b, PROTO_OP_OPEN, "t/a", 0, 0, &tmp) == -EINVAL &&
	   ctl_name(srv, b, PROTO_OP_OPEN, "t/a", 0, 4, &tmp) == -EINVAL &&
	   ctl_name(srv, b, PROTO_OP_CREATE, "a b", 64, 0, &tmp) == -EINVAL &&
	   ctl_name(srv, b, PROTO_OP_CREATE, "t/z", 0, 0, &tmp) == -EINVAL &&
	   ctl_name(srv, b, PROTO_OP_UNLINK, "t/a", 0, 2, &tmp) == -EINVAL,
	   "access 0 or unknown, a space in a name, size 0, unknown unlink flags: -EINVAL");
	stub.ncalls = 0;
	rc = ctl_name(srv, b, PROTO_OP_UNLINK, "t/a", 0, 0, NULL);
	ok(rc == 0 && count(DROP) == 0 &&
	   ctl_name(srv, c, PROTO_OP_OPEN, "t/a", 0, PROTO_ACCESS_READ, &tmp) == -ENOENT &&
	   io(srv, b, &rb, PROTO_ACCESS_READ, &w) == 0,
	   "UNLINK: the name is gone, the handles still work (%d)", rc);
	ok(ctl_name(srv, b, PROTO_OP_UNLINK, "t/a", 0, 0, NULL) == -ENOENT,
	   "UNLINK again: -ENOENT");
	rc = ctl_free(srv, b, &rb);
	ok(rc == 0 && count(DROP) == 1 && stub.ids[stub.ncalls - 1] == rb.id &&
	   srv->used_bytes == used0 + 4096,
	   "FREE of one handle drops its key only; the bytes stay for the other (%d)", rc);
	session_destroy(srv, c);
	ok(srv->used_bytes == used0 && names_count(srv->names) == 0 &&
	   pool_free_bytes(srv) == POOL_BYTES,
	   "the last handle's release returns the bytes (used %llu)",
	   (unsigned long long)srv->used_bytes);
	rc = ctl_name(srv, b, PROTO_OP_CREATE, "t/a", 64, 0, &tmp);
	ok(rc == 0 && all_zero_pool(&tmp), "the name can be created again, fresh zeroes (%d)", rc);
	ok(ctl_name(srv, b, PROTO_OP_UNLINK, "t/a", 0, 0, NULL) == 0, "and unlinked");
	session_destroy(srv, b);
	ok(srv->used_bytes == used0 && names_count(srv->names) == 0, "nothing left");
}

static void test_revoke(struct server *srv)
{
	struct session *a = attached(srv), *b = attached(srv);
	struct proto_region ra, rb, rb2;
	uint8_t *w;
	int rc;

	stub_reset();
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "r", 8192, 0, &ra);
	rc = rc ? rc : ctl_name(srv, b, PROTO_OP_OPEN, "r", 0, PROTO_ACCESS_READ, &rb);
	rc = rc ? rc : ctl_name(srv, b, PROTO_OP_OPEN, "r", 0, RW, &rb2);
	ok(rc == 0 && rb.id != rb2.id && rb.rkey != rb2.rkey,
	   "two handles of one session: ids and keys of their own (%d)", rc);
	stub.ncalls = 0;
	rc = ctl_name(srv, a, PROTO_OP_UNLINK, "r", 0, PROTO_UNLINK_REVOKE, NULL);
	ok(rc == 0 && stub.ncalls == 3 && count(DROP) == 3 && stub.nlive == 0,
	   "UNLINK with REVOKE drops every handle's key (%d, %d drops)", rc, count(DROP));
	ok(io(srv, a, &ra, PROTO_ACCESS_READ, &w) == -ENOENT &&
	   io(srv, b, &rb, PROTO_ACCESS_READ, &w) == -ENOENT &&
	   ctl_free(srv, b, &rb2) == -ENOENT,
	   "every holder's next request: -ENOENT");
	ok(a->nregions == 0 && b->nregions == 0 && region_count(srv->regions) == 0 &&
	   srv->used_bytes == 0 && names_count(srv->names) == 0,
	   "no handle, no object, the bytes back (used %llu)",
	   (unsigned long long)srv->used_bytes);
	ok(a->nhandles == 0 && b->nhandles == 0, "revoked handles leave each holder's count");
	session_destroy(srv, a);
	session_destroy(srv, b);
}

/* OPEN with PROTO_ACCESS_EXCL: every other handle that may write is
 * revoked (keys first, a WRITE in flight through one ended), readers keep
 * theirs, the object and its bytes stay; the reply says FENCED. */
static void test_fence(struct server *srv)
{
	struct session *a = attached(srv), *b = attached(srv), *c = attached(srv);
	struct session *d = attached(srv);
	struct proto_region ra, rb, rc_, rd, re, tmp;
	struct range_hold h = { 0 };
	uint64_t used0 = srv->used_bytes;
	uint8_t *w = NULL;
	int rc;

	stub_reset();
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "f", 4096, 0, &ra);
	rc = rc ? rc : ctl_name(srv, b, PROTO_OP_OPEN, "f", 0, PROTO_ACCESS_READ, &rb);
	rc = rc ? rc : ctl_name(srv, c, PROTO_OP_OPEN, "f", 0, PROTO_ACCESS_WRITE, &rc_);
	rc = rc ? rc : session_io(srv, a, ra.id, ra.rkey, PROTO_ACCESS_WRITE, 0, 8, &w, &h);
	if (rc == 0)
		memcpy(w, "pattern", 8);
	ok(rc == 0, "a creator (a WRITE in flight), a reader and a writer of f (%d)", rc);
	ok(ctl_name(srv, d, PROTO_OP_OPEN, "f", 0, PROTO_ACCESS_EXCL | PROTO_ACCESS_READ, &tmp) ==
		   -EINVAL,
	   "EXCL without WRITE: -EINVAL, nobody fenced");
	stub.ncalls = 0;
	rc = ctl_name(srv, d, PROTO_OP_OPEN, "f", 0, RW | PROTO_ACCESS_EXCL, &rd);
	ok(rc == 0 && rd.flags == (RW | PROTO_ACCESS_FENCED) && count(DROP) == 2 &&
	   count(NEW) == 1 && stub.access[stub.ncalls - 1] == RW,
	   "OPEN EXCL: the two writers' keys dropped, a READ|WRITE one made, FENCED said "
	   "(%d, flags %#x, %d drops)", rc, rd.flags, count(DROP));
	ok(h.ended, "the creator's WRITE in flight is ended (its data will be dropped)");
	session_unhold(srv, &h);
	ok(io(srv, a, &ra, PROTO_ACCESS_WRITE, &w) == -ENOENT &&
	   io(srv, c, &rc_, PROTO_ACCESS_WRITE, &w) == -ENOENT &&
	   a->nhandles == 0 && c->nhandles == 0,
	   "the fenced writers' next requests: -ENOENT; their handles are gone");
	ok(io(srv, b, &rb, PROTO_ACCESS_READ, &w) == 0 && !memcmp(w, "pattern", 8) &&
	   io(srv, d, &rd, PROTO_ACCESS_WRITE, &w) == 0 && srv->used_bytes == used0 + 4096 &&
	   names_count(srv->names) == 1,
	   "the reader keeps its handle, the new writer writes, the object stays");
	rc = ctl_name(srv, b, PROTO_OP_OPEN, "f", 0, RW | PROTO_ACCESS_EXCL, &re);
	ok(rc == 0 && re.flags == (RW | PROTO_ACCESS_FENCED) &&
	   io(srv, d, &rd, PROTO_ACCESS_READ, &w) == -ENOENT &&
	   io(srv, b, &rb, PROTO_ACCESS_READ, &w) == 0,
	   "another EXCL open fences that writer, not its own session's reader (%d)", rc);
	ok(ctl_free(srv, b, &re) == 0 &&
	   ctl_name(srv, c, PROTO_OP_OPEN, "f", 0, RW | PROTO_ACCESS_EXCL, &re) == 0 &&
	   re.flags == RW, "with no other writer: nothing fenced, no FENCED (flags %#x)",
	   re.flags);
	ok(ctl_name(srv, c, PROTO_OP_UNLINK, "f", 0, 0, NULL) == 0, "f unlinked");
	session_destroy(srv, a);
	session_destroy(srv, b);
	session_destroy(srv, c);
	session_destroy(srv, d);
	ok(srv->used_bytes == used0 && names_count(srv->names) == 0 &&
	   region_count(srv->regions) == 0, "nothing left");
}

/* limits.max_handles: per session, -EMFILE past it for OPEN and CREATE
 * (before any range is taken), room again after a FREE; another session
 * has its own. */
static void test_handle_limit(struct server *srv)
{
	struct session *a = attached(srv), *b = attached(srv);
	struct proto_region r1, r2, r3;
	uint64_t used;
	int rc;

	stub_reset();
	srv->cfg.max_handles = 2;
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "h/1", 64, 0, &r1);
	rc = rc ? rc : ctl_name(srv, a, PROTO_OP_OPEN, "h/1", 0, PROTO_ACCESS_READ, &r2);
	ok(rc == 0 && a->nhandles == 2, "two handles within limits.max_handles = 2 (%d)", rc);
	used = srv->used_bytes;
	ok(ctl_name(srv, a, PROTO_OP_OPEN, "h/1", 0, PROTO_ACCESS_READ, &r3) == -EMFILE,
	   "a third OPEN: -EMFILE");
	ok(ctl_name(srv, a, PROTO_OP_CREATE, "h/2", 64, 0, &r3) == -EMFILE &&
	   srv->used_bytes == used && names_count(srv->names) == 1,
	   "a third CREATE: -EMFILE, nothing taken, no name made");
	ok(ctl_name(srv, b, PROTO_OP_OPEN, "h/1", 0, RW, &r3) == 0 && b->nhandles == 1,
	   "another session opens it: the limit is per session");
	ok(ctl_free(srv, a, &r2) == 0 && a->nhandles == 1 &&
	   ctl_name(srv, a, PROTO_OP_OPEN, "h/1", 0, RW, &r2) == 0,
	   "after a FREE of a handle there is room again");
	ok(ctl_name(srv, a, PROTO_OP_UNLINK, "h/1", 0, 0, NULL) == 0, "unlinked");
	session_destroy(srv, a);
	session_destroy(srv, b);
	ok(names_count(srv->names) == 0 && srv->used_bytes == 0, "handle limit: nothing left");
	srv->cfg.max_handles = 65536;
}

/* A key the NIC cannot make leaves nothing behind, for CREATE and OPEN. */
static void test_named_key_failure(struct server *srv)
{
	struct session *a = attached(srv);
	struct proto_region ra, rb;
	int rc;

	stub_reset();
	stub.fail_new = -EIO;
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "k", 4096, 0, &ra);
	ok(rc == -EIO && names_count(srv->names) == 0 && region_count(srv->regions) == 0 &&
	   srv->used_bytes == 0 && pool_free_bytes(srv) == POOL_BYTES,
	   "CREATE whose key fails: its error, no object, no region, no bytes (%d)", rc);
	stub.fail_new = 0;
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "k", 4096, 0, &ra);
	stub.fail_new = -ETIMEDOUT;
	rc = rc ? rc : ctl_name(srv, a, PROTO_OP_OPEN, "k", 0, PROTO_ACCESS_READ, &rb);
	ok(rc == -ETIMEDOUT && names_handle_count(srv->names) == 1 &&
	   names_lookup(srv->names, NULL, "k", 1)->handles == 1 && a->nregions == 1,
	   "OPEN whose key fails: its error, the object keeps its one handle (%d)", rc);
	stub.fail_new = 0;
	ok(ctl_name(srv, a, PROTO_OP_UNLINK, "k", 0, 0, NULL) == 0, "unlinked");
	session_destroy(srv, a);
	ok(names_count(srv->names) == 0 && srv->used_bytes == 0, "and gone with its last handle");
}

/* A key that died unconfirmed holds the range in the quarantine. */
static void test_named_quarantine(struct server *srv)
{
	struct session *a = attached(srv);
	struct proto_region ra, rb;
	int rc;

	stub_reset();
	stub.gone = KEY_UNCONFIRMED;
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "q", 4096, 0, &ra);
	rc = rc ? rc : ctl_name(srv, a, PROTO_OP_UNLINK, "q", 0, 0, NULL);
	rc = rc ? rc : ctl_free(srv, a, &ra);
	ok(rc == 0 && !quarantine_is_empty(srv) && srv->used_bytes == 4096 &&
	   names_count(srv->names) == 0,
	   "unlinked, last handle freed with an unconfirmed key: quarantined (%d)", rc);
	session_quarantine_flush(srv);
	rc = session_quarantine_init(srv);
	ok(rc == 0 && srv->used_bytes == 0, "and back after it");
	/* One that died long before the last release is no reason to wait. */
	stub.gone = KEY_UNCONFIRMED;
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "q", 4096, 0, &ra);
	rc = rc ? rc : ctl_name(srv, a, PROTO_OP_OPEN, "q", 0, PROTO_ACCESS_READ, &rb);
	rc = rc ? rc : ctl_free(srv, a, &rb);
	nanosleep(&(struct timespec){ .tv_nsec = (QUARANTINE_MS + 20) * 1000000l }, NULL);
	stub.gone = KEY_CONFIRMED;
	rc = rc ? rc : ctl_name(srv, a, PROTO_OP_UNLINK, "q", 0, 0, NULL);
	rc = rc ? rc : ctl_free(srv, a, &ra);
	ok(rc == 0 && !!quarantine_is_empty(srv) && srv->used_bytes == 0,
	   "a key that died unconfirmed a quarantine ago: the range is back at once (%d)", rc);
	session_destroy(srv, a);
}

/* The creator's tenant holds the object's bytes and one region past its end. */
static void test_named_quota(struct server *srv)
{
	struct config_tenant *t = &srv->cfg.tenants[0];
	struct session *a = attached(srv), *b;
	struct proto_region ra, tmp;
	int rc;

	snprintf(t->name, sizeof t->name, "unit");
	t->quota = 600u << 10;
	t->max_regions = 0;
	srv->cfg.ntenants = 1;
	a->tenant = t;
	stub_reset();
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "big", 512u << 10, 0, &ra);
	session_destroy(srv, a);
	ok(rc == 0 && srv->tenants.use[0].bytes == 512u << 10 && srv->tenants.use[0].regions == 1,
	   "quota: a named region counts after its creator's end (%d)", rc);
	b = attached(srv);
	b->tenant = t;
	rc = ctl_alloc(srv, b, 200u << 10, false, &(struct ctl_reply){ 0 }, &tmp);
	ok(rc == -EDQUOT, "quota: so the tenant's next ALLOC past it is -EDQUOT (%d)", rc);
	ok(ctl_name(srv, b, PROTO_OP_OPEN, "big", 0, PROTO_ACCESS_READ, &tmp) == 0,
	   "quota: a session of the same tenant opens it");
	b->tenant = NULL;
	ok(ctl_name(srv, b, PROTO_OP_OPEN, "big", 0, PROTO_ACCESS_READ, &tmp) == -ENOENT &&
	   ctl_name(srv, b, PROTO_OP_UNLINK, "big", 0, 0, NULL) == -ENOENT,
	   "another namespace neither opens nor unlinks it");
	b->tenant = t;
	rc = ctl_name(srv, b, PROTO_OP_UNLINK, "big", 0, 0, NULL);
	session_destroy(srv, b);
	ok(rc == 0 && srv->tenants.use[0].bytes == 0 && srv->tenants.use[0].regions == 0,
	   "quota: unlinked and released, the tenant holds nothing (%d)", rc);
	srv->cfg.ntenants = 0;
}

/* REGIONS_NAMED: each handle with its access and its name, admin only. */
static void regions_named_listing(struct server *srv, struct session *s,
				  const struct proto_region *unlinked, const struct proto_region *linked)
{
	struct proto_list_req lr = { .after = 0 };
	struct proto_region_rec rec[2] = { { .id = 0 } };
	struct ctl_reply rep;
	uint8_t buf[64];
	size_t n = proto_list_req_encode(buf, &lr);
	uint32_t cnt = 0;
	int st = -1;

	s->admin = false;
	call(srv, s, PROTO_OP_REGIONS_NAMED, buf, n, false, &rep);
	ok(rep.status == -EACCES, "REGIONS_NAMED without admin rights: -EACCES (%d)", rep.status);
	s->admin = true;
	call(srv, s, PROTO_OP_REGIONS_NAMED, buf, n, false, &rep);
	if (rep.status == 0 &&
	    proto_list_hdr_decode(rep.payload, rep.len, PROTO_REGION_NAMED_REC_LEN, &st, &cnt) == 0 &&
	    cnt == 2) {
		for (uint32_t i = 0; i < 2; i++)
			proto_region_named_rec_decode(rep.payload + PROTO_LIST_HDR_LEN +
						      i * PROTO_REGION_NAMED_REC_LEN, &rec[i]);
	}
	ok(cnt == 2 && rec[0].id == unlinked->id && !strcmp(rec[0].name, "l/one") &&
	   rec[0].flags == (PROTO_ACCESS_READ | PROTO_ACCESS_WRITE | PROTO_REGION_F_UNLINKED) &&
	   rec[1].id == linked->id && !strcmp(rec[1].name, "l/two") &&
	   rec[1].flags == (PROTO_ACCESS_READ | PROTO_ACCESS_WRITE) && rec[1].name_id > rec[0].name_id &&
	   rec[0].name_id > 0, "REGIONS_NAMED: each handle's name, access, unlinked flag (%u)", cnt);
	call(srv, s, PROTO_OP_REGIONS, buf, n, false, &rep);
	ok(rep.status == 0 && proto_list_hdr_decode(rep.payload, rep.len, PROTO_REGION_REC_LEN,
						    &st, &cnt) == 0 && cnt == 2,
	   "REGIONS still answers with the short records (%u)", cnt);
}

static void test_names_listing(struct server *srv)
{
	struct session *s = attached(srv);
	struct proto_list_req lr = { .after = 0, .max = 0 };
	struct proto_region r1, r2;
	struct proto_name_rec rec[2];
	struct ctl_reply rep;
	uint8_t buf[64];
	size_t n = proto_list_req_encode(buf, &lr);
	uint32_t cnt = 0;
	int st = -1;

	stub_reset();
	ok(ctl_name(srv, s, PROTO_OP_CREATE, "l/one", 64, 0, &r1) == 0 &&
	   ctl_name(srv, s, PROTO_OP_CREATE, "l/two", 128, 0, &r2) == 0 &&
	   ctl_name(srv, s, PROTO_OP_UNLINK, "l/one", 0, 0, NULL) == 0, "two names, one unlinked");
	call(srv, s, PROTO_OP_NAMES, buf, n, false, &rep);
	ok(rep.status == -EACCES, "NAMES without admin rights: -EACCES (%d)", rep.status);
	s->admin = true;
	call(srv, s, PROTO_OP_NAMES, buf, n, false, &rep);
	if (rep.status == 0 &&
	    proto_list_hdr_decode(rep.payload, rep.len, PROTO_NAME_REC_LEN, &st, &cnt) == 0 && cnt == 2) {
		proto_name_rec_decode(rep.payload + PROTO_LIST_HDR_LEN, &rec[0]);
		proto_name_rec_decode(rep.payload + PROTO_LIST_HDR_LEN + PROTO_NAME_REC_LEN, &rec[1]);
	}
	ok(cnt == 2 && !strcmp(rec[0].name, "l/one") && rec[0].flags == PROTO_NAME_F_UNLINKED &&
	   rec[0].handles == 1 && !strcmp(rec[1].name, "l/two") && rec[1].flags == 0 &&
	   rec[1].length == 128 && rec[0].id < rec[1].id && rec[1].tenant[0] == '\0',
	   "NAMES: in id order, the unlinked one flagged, handles and lengths (%u)", cnt);
	lr.after = cnt == 2 ? rec[0].id : 0;
	n = proto_list_req_encode(buf, &lr);
	call(srv, s, PROTO_OP_NAMES, buf, n, false, &rep);
	ok(rep.status == 0 &&
	   proto_list_hdr_decode(rep.payload, rep.len, PROTO_NAME_REC_LEN, &st, &cnt) == 0 && cnt == 1,
	   "NAMES after the first id: one left (%u)", cnt);
	regions_named_listing(srv, s, &r1, &r2);
	ok(ctl_name(srv, s, PROTO_OP_UNLINK, "l/two", 0, 0, NULL) == 0, "unlinked");
	session_destroy(srv, s);
	ok(names_count(srv->names) == 0 && srv->used_bytes == 0, "listing: nothing left");
}

/* ---- rights, from the handler table ------------------------------------------ */

static void test_rights(struct server *srv)
{
	struct session *s = session_new(srv, SESSION_UNIX, false, "rights");
	struct proto_hello_req h = { .client_version = PROTO_VERSION };
	struct proto_hello_rep hr;
	enum ctl_outcome out;
	struct ctl_reply rep;
	uint8_t buf[64];
	int st = -1;
	size_t n;

	out = ctl_admit(s, PROTO_OP_ALLOC, &rep);
	ok(out == CTL_REPLY_AND_CLOSE && rep.status == -EPROTO,
	   "before HELLO: ALLOC closes the connection (%d: %s)", rep.status, rep.why);
	ok(ctl_admit(s, PROTO_OP_WRITE, &rep) == CTL_REPLY_AND_CLOSE,
	   "before HELLO: WRITE too");
	ok(ctl_admit(s, PROTO_OP_AUTH_BEGIN, &rep) == CTL_REPLY &&
	   ctl_admit(s, PROTO_OP_HELLO, &rep) == CTL_REPLY,
	   "before HELLO: HELLO and AUTH_BEGIN may come");
	n = proto_hello_req_encode(buf, &h);
	srv->nic_port = 4791;
	srv->key_mode = PROTO_KEYS_REGION_MR;
	out = call(srv, s, PROTO_OP_HELLO, buf, n, false, &rep);
	ok(out == CTL_REPLY && rep.status == 0 &&
	   proto_hello_rep_decode(rep.payload, rep.len, &st, &hr) == 0 && st == 0 && hr.session_id == s->id &&
	   hr.rdma_port == 4791 && hr.key_mode == PROTO_KEYS_REGION_MR,
	   "HELLO: reply with the session id, rdma port and key mode (%d)", rep.status);
	ok(ctl_admit(s, PROTO_OP_ALLOC, &rep) == CTL_REPLY, "after HELLO: ALLOC may come");
	out = call(srv, s, PROTO_OP_POOLS, NULL, 0, false, &rep);
	ok(out == CTL_REPLY && rep.status == -EACCES, "POOLS without admin rights: -EACCES (%d)",
	   rep.status);
	s->admin = true;
	out = call(srv, s, PROTO_OP_POOLS, NULL, 0, false, &rep);
	ok(out == CTL_REPLY && rep.status == 0 && rep.len > 0, "POOLS with admin rights: a listing (%zu bytes)", rep.len);
	session_destroy(srv, s);
}

/* A draining cluster member (issue 32): ALLOC and CREATE refused with
 * -ESHUTDOWN as the wire sends them, whoever asks; OPEN, I/O and UNLINK
 * go on; undrained, ALLOC works again. */
static void test_draining(struct server *srv)
{
	struct session *a = attached(srv);
	struct proto_region r, x;
	struct ctl_reply rep;
	uint8_t *w = NULL;
	int rc;

	rc = ctl_name(srv, a, PROTO_OP_CREATE, "d/kept", 4096, 0, &r);
	ok(rc == 0, "before the drain: CREATE d/kept (%d)", rc);
	srv->draining = true;
	rc = ctl_alloc(srv, a, 4096, false, &rep, &x);
	ok(rc == -ESHUTDOWN, "draining: ALLOC is -ESHUTDOWN (%d)", rc);
	rc = ctl_name(srv, a, PROTO_OP_CREATE, "d/new", 4096, 0, &x);
	ok(rc == -ESHUTDOWN && names_count(srv->names) == 1,
	   "draining: CREATE is -ESHUTDOWN, no name made (%d)", rc);
	rc = ctl_name(srv, a, PROTO_OP_OPEN, "d/kept", 0, PROTO_ACCESS_READ, &x);
	ok(rc == 0 && io(srv, a, &r, PROTO_ACCESS_WRITE, &w) == 0,
	   "draining: OPEN of a name it holds, and a write, go on (%d)", rc);
	ok(ctl_name(srv, a, PROTO_OP_UNLINK, "d/kept", 0, 0, &x) == 0,
	   "draining: UNLINK goes on");
	srv->draining = false;
	rc = ctl_alloc(srv, a, 4096, false, &rep, &x);
	ok(rc == 0 && ctl_free(srv, a, &x) == 0, "undrained: ALLOC works again (%d)", rc);
	session_destroy(srv, a);
}

int main(void)
{
	struct server *srv;

	srv = server_up();
	if (!srv)
		tap_skip_all("cannot set up a server with a 1 MiB pool");
	test_alloc_free(srv);
	test_key_failure(srv);
	test_destroy(srv);
	test_tcp_only(srv);
	test_hold(srv);
	test_quarantine(srv);
	test_quota_wait(srv);
	test_rights(srv);
	test_named(srv);
	test_revoke(srv);
	test_fence(srv);
	test_named_key_failure(srv);
	test_named_quarantine(srv);
	test_named_quota(srv);
	test_names_listing(srv);
	test_handle_limit(srv);
	test_draining(srv);
	ok(srv->sessions_first == NULL && srv->used_bytes == 0 && srv->clients == 0 &&
	   pool_free_bytes(srv) == POOL_BYTES, "every session gone, the pool whole again");
	inproc_free(srv);
	return tap_done();
}
