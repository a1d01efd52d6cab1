/*
 * fuzz_dispatch.c - libFuzzer target for rmemd's connection and request
 * dispatch: each input is what one client sends on one connection
 * (fuzz_dispatch.h has the format).
 *
 * The daemon's own modules (all of rmemd but main.c) serve it: one server per
 * process, with one 1 MiB pool, one tenant, no listeners and no RDMA.  Per
 * input, one end
 * of a socketpair goes to conn_accept(); the input is written to the other end
 * in chunks, and the libevent loop runs without blocking until the daemon has
 * taken all it will take.  Every byte the daemon sends back must form good
 * reply frames (each one decodable by the codec, nothing after an ERROR frame).
 * Then the client end closes and the connection must go away, with every
 * handle of a named region; the names it created stay (they outlive it) and
 * are unlinked by the fuzzer, after which the server must be as it was: no session, no region, used_bytes 0, the allocator one
 * free range over the whole pool, and every pool byte zero again.  Leaks are
 * LeakSanitizer's to find.
 *
 * Linked with tests/fuzz/replay.c instead of libFuzzer, the same code replays
 * the corpus (make test).
 */
#include <errno.h>
#include <event2/event.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "conn.h"
#include "fuzz.h"
#include "fuzz_dispatch.h"
#include "log.h"
#include "names.h"
#include "pool.h"
#include "quarantine.h"
#include "region.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

#define POOL_BYTES   (1u << 20)
/* Loop turns without any progress before the daemon counts as settled. */
#define IDLE_TURNS   3
/* Far more turns than any input needs: past this the daemon is stuck. */
#define MAX_TURNS    100000

static struct server *srv;

/* ---- deterministic "randomness" (see fuzz_dispatch.h) ------------------------ */

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
	uint8_t *p = buf;

	(void)flags;
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(FUZZ_RANDOM_WORD(i / 4) >> (8 * (i % 4)));
	return (ssize_t)len;
}

/* ---- the server ---------------------------------------------------------------- */

static void server_down(void)
{
	if (!srv)
		return;
	conn_close_all(srv);
	if (srv->base)
		session_quarantine_flush(srv);
	names_free(srv->names);
	region_table_free(srv->regions);
	for (uint32_t i = 0; i < srv->npools; i++)
		pool_close(&srv->pools[i]);
	if (srv->base)
		event_base_free(srv->base);
	free(srv);
	srv = NULL;
	libevent_global_shutdown();
}

/* One tenant, with limits small enough for an input to reach. */
static void add_tenant(struct config *cfg)
{
	struct config_tenant *t = &cfg->tenants[0];

	snprintf(t->name, sizeof t->name, "%s", FUZZ_TENANT);
	snprintf(t->secret_file, sizeof t->secret_file, "/nonexistent/fuzz.key");
	t->secret_len = sizeof FUZZ_TENANT_SECRET - 1;
	memcpy(t->secret, FUZZ_TENANT_SECRET, t->secret_len);
	t->quota = FUZZ_TENANT_QUOTA;
	t->max_regions = FUZZ_TENANT_MAX_REGIONS;
	cfg->ntenants = 1;
}

static void server_up(void)
{
	struct config_pool *pc;
	char err[512];

	/* The daemon writes to peers that may be gone, as rmemd does. */
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERR);
	srv = calloc(1, sizeof *srv);
	CHECK(srv);
	config_defaults(&srv->cfg);
	srv->cfg.listen_tcp[0] = srv->cfg.listen_rdma[0] = srv->cfg.listen_admin[0] = '\0';
	srv->cfg.npools = 1;
	pc = &srv->cfg.pools[0];
	snprintf(pc->name, sizeof pc->name, "fuzz");
	pc->size = POOL_BYTES;
	pc->hugepages = CONFIG_HUGEPAGES_OFF;
	pc->alignment = 64;
	add_tenant(&srv->cfg);
	CHECK(tenant_init(srv) == 0);
	srv->base = event_base_new();
	CHECK(srv->base);
	if (pool_open(&srv->pools[0], pc, 0, NULL, NULL, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	srv->npools = 1;
	srv->regions = region_table_new();
	srv->names = names_new();
	CHECK(srv->regions && srv->names);
	CHECK(session_quarantine_init(srv) == 0);
	atexit(server_down);
}

/* What the server must look like between inputs. */
static void check_idle(void)
{
	const struct pool *p = &srv->pools[0];
	struct alloc_stats a;
	uint64_t due;

	CHECK(srv->conns == NULL);
	CHECK(srv->sessions_first == NULL && srv->sessions_last == NULL);
	CHECK(srv->clients == 0);
	CHECK(srv->used_bytes == 0);
	CHECK(!quarantine_next_due(srv->quarantine, &due));
	CHECK(region_count(srv->regions) == 0);
	CHECK(srv->allocs == srv->frees);
	CHECK(srv->tenants.use[0].bytes == 0 && srv->tenants.use[0].regions == 0);
	/* Every state slot and session charged to a tenant was given back. */
	CHECK(srv->tenants.slots_charged == 0 && srv->tenants.admin_clients == 0);
	for (size_t i = 0; i <= CONFIG_MAX_TENANTS; i++)
		CHECK(srv->tenants.use[i].slots == 0 && srv->tenants.use[i].sessions == 0);
	alloc_get_stats(p->alloc, &a);
	CHECK(a.used == 0 && a.live == 0 && a.free == a.total);
	CHECK(a.free_ranges == 1 && a.largest_free == a.total);
	/* Released bytes are zeroed: the next owner never sees them. */
	CHECK(p->base[0] == 0 && memcmp(p->base, p->base + 1, p->size - 1) == 0);
}

/*
 * Named regions outlive the connection that made them, on purpose: what
 * must not outlive it is any handle (its session released them all), and
 * an unlinked object with no handle must be gone already.  Then the names
 * are unlinked here, as an admin would, and the server must be idle.
 */
static void unlink_names(void)
{
	struct name_obj *o = names_next_after(srv->names, 0), *next;

	CHECK(names_handle_count(srv->names) == 0);
	for (; o; o = next) {
		next = names_next(o);
		CHECK(o->handles == 0 && !o->unlinked);
		CHECK(session_unlink_ns(srv, o->ns, o->name, o->name_len, 0) == 0);
	}
	CHECK(names_count(srv->names) == 0);
}

/* Ids and keys start again with each input, so seeds can name them. */
static void server_reset(void)
{
	names_free(srv->names);
	srv->names = names_new();
	region_table_free(srv->regions);
	srv->regions = region_table_new();
	CHECK(srv->regions && srv->names);
	srv->next_session_id = 0;
	srv->allocs = srv->frees = 0;
	srv->peak_used = 0;
}

/* ---- what comes back ----------------------------------------------------------- */

struct replies {
	uint8_t hdr[PROTO_HDR_LEN];
	size_t hdr_have;
	struct proto_hdr h;
	bool in_body;
	uint8_t body[PROTO_MAX_CTL];  /* whole for every reply but READ's */
	size_t body_have;
	bool ended;                   /* an ERROR frame came: nothing may follow */
	uint64_t frames;
};

static void check_reply(const struct replies *r)
{
	const uint8_t *b = r->body;
	size_t len = r->h.length;
	uint32_t wire_status = proto_get_u32(b);
	union {
		struct proto_hello_rep hello;
		struct proto_region region;
		struct proto_stats stats;
		struct proto_auth_begin_rep auth_begin;
		uint8_t mac[PROTO_MAC_LEN];
	} m;
	uint32_t count;
	uint64_t old;
	size_t data_len;
	int st;

#ifdef FUZZ_REPLAY_MAIN
	/* FUZZ_TRACE=1: one line per reply, to see what a seed reaches. */
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "  reply op %u req %llu len %zu status %u\n", r->h.opcode,
			(unsigned long long)r->h.req_id, len, wire_status);
#endif
	CHECK(wire_status <= 4095 && proto_get_u32(b + 4) == 0);
	CHECK(wire_status == 0 || len == PROTO_STATUS_LEN);
	switch (r->h.opcode) {
	case PROTO_OP_ERROR:
		CHECK(wire_status != 0);
		break;
	case PROTO_OP_HELLO:
		CHECK(proto_hello_rep_decode(b, len, &st, &m.hello) == 0);
		break;
	case PROTO_OP_ALLOC:
		CHECK(proto_alloc_rep_decode(b, len, &st, &m.region) == 0);
		CHECK(st || (m.region.length > 0 && m.region.length % 64 == 0));
		break;
	case PROTO_OP_READ:
		CHECK(proto_read_rep_decode(b, len, &st, &data_len) == 0);
		CHECK(st || data_len <= POOL_BYTES);
		break;
	case PROTO_OP_STATS:
		CHECK(proto_stats_rep_decode(b, len, &st, &m.stats) == 0);
		break;
	case PROTO_OP_POOLS:
		CHECK(proto_list_hdr_decode(b, len, PROTO_POOL_REC_LEN, &st, &count) == 0);
		break;
	case PROTO_OP_REGIONS:
		CHECK(proto_list_hdr_decode(b, len, PROTO_REGION_REC_LEN, &st, &count) == 0);
		break;
	case PROTO_OP_REGIONS_NAMED:
		CHECK(proto_list_hdr_decode(b, len, PROTO_REGION_NAMED_REC_LEN, &st, &count) == 0);
		for (uint32_t i = 0; i < count; i++) {
			struct proto_region_rec rec;

			proto_region_named_rec_decode(b + PROTO_LIST_HDR_LEN +
						      (size_t)i * PROTO_REGION_NAMED_REC_LEN, &rec);
			/* A name exactly when a name id, and access only with it. */
			CHECK(rec.id && rec.length && !rec.name_id == !rec.name[0]);
			CHECK(rec.name_id || rec.flags == 0);
		}
		break;
	case PROTO_OP_CLIENTS:
		CHECK(proto_list_hdr_decode(b, len, PROTO_CLIENT_REC_LEN, &st, &count) == 0);
		break;
	case PROTO_OP_CAS:
	case PROTO_OP_FAA:
		CHECK(proto_atomic_rep_decode(b, len, &st, &old) == 0);
		break;
	case PROTO_OP_FREE:
	case PROTO_OP_WRITE:
	case PROTO_OP_PING:
		CHECK(proto_status_decode(b, len, &st) == 0);
		break;
	case PROTO_OP_AUTH_BEGIN:
		CHECK(proto_auth_begin_rep_decode(b, len, &st, &m.auth_begin) == 0);
		break;
	case PROTO_OP_AUTH:
		CHECK(proto_auth_rep_decode(b, len, &st, m.mac) == 0);
		break;
	case PROTO_OP_CREATE:
	case PROTO_OP_OPEN:
		/* A handle: the ALLOC reply, flags the access it grants. */
		CHECK(proto_alloc_rep_decode(b, len, &st, &m.region) == 0);
		CHECK(st || (m.region.length > 0 && m.region.length % 64 == 0 &&
			     m.region.flags && !(m.region.flags & ~(PROTO_ACCESS_READ |
								    PROTO_ACCESS_WRITE))));
		CHECK(st || r->h.opcode == PROTO_OP_OPEN ||
		      m.region.flags == (PROTO_ACCESS_READ | PROTO_ACCESS_WRITE));
		break;
	case PROTO_OP_UNLINK:
		CHECK(proto_status_decode(b, len, &st) == 0);
		break;
	case PROTO_OP_NAMES:
		CHECK(proto_list_hdr_decode(b, len, PROTO_NAME_REC_LEN, &st, &count) == 0);
		for (uint32_t i = 0; i < count; i++) {
			struct proto_name_rec rec;

			proto_name_rec_decode(b + PROTO_LIST_HDR_LEN + (size_t)i * PROTO_NAME_REC_LEN,
					      &rec);
			CHECK(rec.id && rec.length && !(rec.flags & ~PROTO_NAME_F_UNLINKED));
			CHECK(rec.name[0] && strlen(rec.name) <= PROTO_NAME_MAX);
		}
		break;
	default: /* opcodes newer than this target: the checks above hold */
		break;
	}
}

static void replies_take(struct replies *r, const uint8_t *p, size_t n)
{
	while (n) {
		size_t take;

		CHECK(!r->ended);
		if (!r->in_body) {
			take = PROTO_HDR_LEN - r->hdr_have < n ? PROTO_HDR_LEN - r->hdr_have : n;
			memcpy(r->hdr + r->hdr_have, p, take);
			r->hdr_have += take;
			p += take;
			n -= take;
			if (r->hdr_have < PROTO_HDR_LEN)
				return;
			CHECK(proto_hdr_decode(r->hdr, &r->h) == 0);
			CHECK(r->h.flags == PROTO_F_RESPONSE);
			CHECK(r->h.length >= PROTO_STATUS_LEN);
			r->hdr_have = 0;
			r->body_have = 0;
			r->in_body = true;
			continue;
		}
		take = r->h.length - r->body_have < n ? r->h.length - r->body_have : n;
		if (r->body_have < sizeof r->body) {
			size_t keep = sizeof r->body - r->body_have < take ?
				      sizeof r->body - r->body_have : take;

			memcpy(r->body + r->body_have, p, keep);
		}
		r->body_have += take;
		p += take;
		n -= take;
		if (r->body_have == r->h.length) {
			check_reply(r);
			r->in_body = false;
			r->ended = r->h.opcode == PROTO_OP_ERROR;
			r->frames++;
		}
	}
}

/* Reads whatever the daemon sent; returns how many bytes. */
static size_t drain(int fd, struct replies *r)
{
	static uint8_t buf[64 << 10];
	size_t total = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);

		if (n <= 0)
			return total;
		replies_take(r, buf, (size_t)n);
		total += (size_t)n;
	}
}

/* Bytes we sent that the daemon has not read yet. */
static int unread(int fd)
{
	int v = 0;

	if (ioctl(fd, SIOCOUTQ, &v) < 0)
		return -1;
	return v;
}

/* Runs the loop until neither side moves for IDLE_TURNS turns. */
static void settle(int fd, struct replies *r)
{
	int idle = 0, last = unread(fd);

	for (int turn = 0; idle < IDLE_TURNS; turn++) {
		int now;

		CHECK(turn < MAX_TURNS);
		event_base_loop(srv->base, EVLOOP_NONBLOCK);
		now = unread(fd);
		if (drain(fd, r) > 0 || now != last)
			idle = 0;
		else
			idle++;
		last = now;
	}
}

/* What the lease timer does to a connection once its deadlines are past:
 * first the frame timeout (ends a connection stalled mid-frame), then the
 * lease (ends any). */
static void expire(int fd, struct replies *r)
{
	uint64_t now = (uint64_t)clock_mono_ns();
	uint64_t frame_ns = (uint64_t)srv->cfg.frame_timeout_ms * 1000000;
	uint64_t lease_ns = (uint64_t)srv->cfg.lease_timeout_ms * 1000000;

	if (srv->conns)
		conn_check_deadlines(srv->conns, now + frame_ns);
	settle(fd, r);
	if (srv->conns)
		conn_check_deadlines(srv->conns, now + frame_ns + lease_ns);
	settle(fd, r);
#ifdef FUZZ_REPLAY_MAIN
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "  deadlines: connection %s\n", srv->conns ? "kept" : "ended");
#endif
}

/* Sends the input chunk by chunk, letting the daemon work in between. */
static void feed(int fd, const uint8_t *p, size_t n, size_t chunk, struct replies *r)
{
	int stuck = 0;

	while (n) {
		size_t want = chunk && chunk < n ? chunk : n;
		ssize_t sent = send(fd, p, want, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (sent < 0 && errno != EAGAIN && errno != EINTR)
			return; /* the daemon closed the connection */
		if (sent > 0) {
			p += sent;
			n -= (size_t)sent;
			stuck = 0;
		} else {
			/* The daemon must keep reading while we read all it sends. */
			CHECK(++stuck < MAX_TURNS);
		}
		settle(fd, r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct replies *r;
	uint8_t mode;
	bool tcp;
	int sv[2];

	if (!srv)
		server_up();
	if (size < 1)
		return 0;
	mode = data[0];
	tcp = mode & FUZZ_MODE_TCP;
	r = calloc(1, sizeof *r);
	CHECK(r);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(conn_accept(srv, sv[0], tcp ? SESSION_TCP : SESSION_UNIX, !tcp,
			  tcp ? "127.0.0.1:7" : "uid=0") == 0);
	feed(sv[1], data + 1, size - 1, FUZZ_MODE_CHUNK(mode), r);
	settle(sv[1], r);
	if (size % 2)
		expire(sv[1], r);
	/* The client goes away: its connection, session and regions must go too. */
	close(sv[1]);
	for (int turn = 0; srv->conns; turn++) {
		CHECK(turn < MAX_TURNS);
		event_base_loop(srv->base, EVLOOP_NONBLOCK);
	}
	free(r);
	unlink_names();
	check_idle();
	server_reset();
	return 0;
}
