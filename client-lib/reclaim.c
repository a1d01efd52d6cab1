/*
 * reclaim.c - see reclaim.h.
 *
 * Why lazily, and why a map: a client may hold many thousand regions and
 * use a few after a restart; fetching every key at once would make the
 * pause grow with what the client holds, and would need a list of every
 * region the library handed out, kept on every alloc and free whether a
 * restart ever comes or not.  Instead the library remembers one number
 * per client, the highest region id it handed out (ids only grow, across
 * restarts too), and after a resume treats every region at or below it as
 * stale until REKEY said its new key: one round trip on the first use of
 * each region, nothing at all before a first resume (client_region_now's
 * one predictable branch).
 */
#include "reclaim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "engine.h"
#include "clock.h"
#include "datapath.h"
#include "tcp.h"
#include "tls.h"

/* The backoff between attempts: from BACKOFF_MIN_MS, doubling, at most
 * BACKOFF_MAX_MS, so that a daemon back after 2 s is found within a
 * quarter second of it without a connect storm meanwhile. */
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 250
#define MAP_MIN 64u

int reclaim_init(struct reclaim *rs, struct engine *e, const struct endpoint *ep,
		enum transport_choice choice, int resume_ms, const char *tenant,
		const char *secret_file)
{
	*rs = (struct reclaim){
		.resume_ms = resume_ms > 0 ? resume_ms : 0,
		.eng = e,
		.ep = *ep,
		.choice = choice,
	};
	if (tenant && !(rs->tenant = strdup(tenant)))
		return -ENOMEM;
	if (secret_file && !(rs->secret_file = strdup(secret_file)))
		return -ENOMEM;
	return 0;
}

void reclaim_fini(struct reclaim *rs)
{
	free(rs->tenant);
	free(rs->secret_file);
	free(rs->map);
	tls_ctx_free(rs->tls);
	*rs = (struct reclaim){ 0 };
}

/* ---- the map: region id -> (addr, rkey) since the last resume ---------------------- */

static uint32_t map_slot(uint64_t id, uint32_t cap)
{
	/* Ids are dense small integers: a multiplicative hash spreads them. */
	return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static struct resume_key *map_find(const struct reclaim *rs, uint64_t id)
{
	if (!rs->map_cap)
		return NULL;
	for (uint32_t i = map_slot(id, rs->map_cap);; i = (i + 1) & (rs->map_cap - 1)) {
		if (rs->map[i].id == id)
			return &rs->map[i];
		if (rs->map[i].id == 0)
			return NULL;
	}
}

static void map_insert(struct resume_key *map, uint32_t cap, const struct resume_key *k)
{
	uint32_t i = map_slot(k->id, cap);

	while (map[i].id != 0)
		i = (i + 1) & (cap - 1);
	map[i] = *k;
}

/* Half full at most. */
static int map_put(struct reclaim *rs, const struct resume_key *k)
{
	if (2 * (rs->map_used + 1) > rs->map_cap) {
		uint32_t cap = rs->map_cap ? 2 * rs->map_cap : MAP_MIN;
		struct resume_key *map = calloc(cap, sizeof(*map));

		if (!map)
			return -ENOMEM;
		for (uint32_t i = 0; i < rs->map_cap; i++)
			if (rs->map[i].id)
				map_insert(map, cap, &rs->map[i]);
		free(rs->map);
		rs->map = map;
		rs->map_cap = cap;
	}
	map_insert(rs->map, rs->map_cap, k);
	rs->map_used++;
	return 0;
}

static void map_clear(struct reclaim *rs)
{
	if (rs->map)
		memset(rs->map, 0, rs->map_cap * sizeof(*rs->map));
	rs->map_used = 0;
}

/* REKEY: the region's new key and address, into the map. */
static int rekey(struct reclaim *rs, uint64_t id, struct resume_key *k)
{
	struct proto_rekey_req req = { .id = id };
	uint8_t buf[PROTO_REKEY_REQ_LEN];
	struct proto_region reg;
	size_t reply_len;
	int status, err;

	if (rs->eng->broken)
		return -ECONNRESET;
	err = eng_call(rs->eng, PROTO_OP_REKEY, buf, proto_rekey_req_encode(buf, &req),
		       &reply_len);
	if (err)
		return err;
	if (proto_alloc_rep_decode(rs->eng->rx, reply_len, &status, &reg) < 0)
		return eng_fail(rs->eng, -EPROTO);
	if (status)
		return status;
	if (reg.id != id)
		return eng_fail(rs->eng, -EPROTO);
	*k = (struct resume_key){ .id = id, .addr = reg.addr, .rkey = reg.rkey };
	return map_put(rs, k);
}

int reclaim_region(struct reclaim *rs, const struct rmem_region **r, struct rmem_region *tmp)
{
	const struct resume_key *found = map_find(rs, (*r)->id);
	struct resume_key k;
	int err;

	if (found) {
		k = *found;
	} else {
		err = rekey(rs, (*r)->id, &k);
		if (err)
			return err;
	}
	*tmp = **r;
	tmp->addr = k.addr;
	tmp->rkey = k.rkey;
	*r = tmp;
	return 0;
}

/* ---- reconnecting ------------------------------------------------------------------- */

/* What may come right on a later attempt: the daemon not (yet) listening,
 * not answering, going away again, or full. */
static bool worth_retrying(int err)
{
	switch (-err) {
	case ECONNREFUSED:
	case ECONNRESET:
	case ETIMEDOUT:
	case EPIPE:
	case ENOTCONN:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EUSERS:
	case EAGAIN:
	case EINTR:
		return true;
	default:
		return false;
	}
}

/*
 * Whether a stream that broke with err may be resumed: only a connection
 * the peer closed or reset, which is what a daemon's restart or crash
 * looks like (the process's sockets close with it).  A daemon that stopped
 * answering (-ETIMEDOUT) is still running: its session is not restored
 * anywhere, and a resume could only wait for it in vain.  Garbage gets no
 * second chance.
 */
static bool loss_resumable(int err)
{
	return err == -ECONNRESET || err == -EPIPE || err == -ENOTCONN;
}

int reclaim_dial(const struct reclaim *rs, int timeout_ms, struct tls_conn **tls)
{
	int64_t deadline = timeout_ms > 0 ? clock_mono_ms() + timeout_ms : CLOCK_NO_DEADLINE;
	const char *name = rs->ep.tls_name[0] ? rs->ep.tls_name : rs->ep.host;
	int fd, err;

	*tls = NULL;
	if (rs->ep.kind == ENDPOINT_UNIX)
		return tcp_connect_unix(rs->ep.path, timeout_ms);
	fd = tcp_connect_host(rs->ep.host, rs->ep.port, timeout_ms, rs->tcp_cc);
	if (fd < 0 || !rs->tls)
		return fd;
	/* The handshake shares the connect's bound. */
	err = tls_conn_new(rs->tls, fd, name, tls);
	if (!err)
		err = tls_handshake_wait(*tls, timeout_ms > 0 ? clock_ms_until(deadline) + 1 : 0);
	if (!err)
		return fd;
	tls_conn_free(*tls);
	*tls = NULL;
	close(fd);
	return err;
}

/* RESUME on the fresh stream: 0 and *rep, or a negative errno (the
 * daemon's status, or the engine's). */
static int say_resume(struct reclaim *rs, struct proto_hello_rep *rep)
{
	struct proto_resume_req req = {
		.session_id = rs->session_id,
		.client_version = PROTO_VERSION,
		.features = PROTO_HELLO_F_RESUMABLE,
		.pid = (uint32_t)getpid(),
	};
	uint8_t buf[PROTO_RESUME_REQ_LEN];
	size_t reply_len;
	int status, err;

	memcpy(req.resume_token, rs->token, sizeof(req.resume_token));
	err = eng_call(rs->eng, PROTO_OP_RESUME, buf, proto_resume_req_encode(buf, &req),
		       &reply_len);
	if (err)
		return err;
	if (proto_hello_rep_decode(rs->eng->rx, reply_len, &status, rep) < 0)
		return eng_fail(rs->eng, -EPROTO);
	if (status)
		return status;
	if (rep->session_id != rs->session_id || rep->max_io == 0 || !rep->resumable)
		return eng_fail(rs->eng, -EPROTO);
	return 0;
}

/* The queue pair again, where the client had asked for RDMA: "rdma" must
 * have it (never a quiet move to TCP), "auto" takes it when offered. */
static int reattach(struct reclaim *rs, const struct proto_hello_rep *rep)
{
	uint16_t port = rep->key_mode == PROTO_KEYS_NONE ? 0 : rep->rdma_port;
	int err;

	if (rs->choice == CHOICE_TCP || (port == 0 && rs->choice == CHOICE_AUTO)) {
		dp_detach(rs->eng);
		return 0;
	}
	if (port == 0)
		return -ENOTSUP;
	err = dp_reattach(rs->eng, rs->ep.host, port, rs->session_id, rep->attach_token);
	return err && rs->choice == CHOICE_RDMA ? err : 0;
}

/* One attempt within deadline: a stream, the tenant handshake, RESUME,
 * the queue pair.  0 or a negative errno. */
static int attempt(struct reclaim *rs, int64_t deadline, int timeout_ms)
{
	int left = clock_ms_until(deadline);
	struct proto_hello_rep rep;
	struct tls_conn *tls;
	int fd, err;

	if (left <= 0)
		return -ETIMEDOUT;
	fd = reclaim_dial(rs, left, &tls);
	if (fd < 0)
		return fd;
	eng_reopen(rs->eng, fd, tls);
	/* No wait of the handshake may outlast the bound. */
	rs->eng->timeout_ms = timeout_ms > 0 && timeout_ms < left ? timeout_ms : left;
	err = rs->tenant ? auth_tenant(rs->eng, rs->tenant, rs->secret_file) : 0;
	if (!err)
		err = say_resume(rs, &rep);
	if (err)
		return err;
	rs->eng->max_io = rep.max_io < PROTO_MAX_IO ? rep.max_io : PROTO_MAX_IO;
	rs->eng->lease_ms = rep.lease_ms;
	err = reattach(rs, &rep);
	/* The session is this stream's now: a failed attach ends it. */
	return err ? eng_fail(rs->eng, err) : 0;
}

/* Sleeps ms, or less when asked to stop; false when asked. */
static bool wait_backoff(struct engine *e, int ms)
{
	while (ms > 0) {
		int step = ms < 10 ? ms : 10;
		struct timespec ts = { .tv_nsec = step * 1000000L };

		if (__atomic_load_n(&e->stop_recover, __ATOMIC_RELAXED))
			return false;
		nanosleep(&ts, NULL);
		ms -= step;
	}
	return !__atomic_load_n(&e->stop_recover, __ATOMIC_RELAXED);
}

/* reclaim.h's reclaim_region behind the same check as client_region_now(). */
static int region_now(struct reclaim *rs, const struct rmem_region **r, struct rmem_region *tmp)
{
	return (*r)->id >= rs->stale_below ? 0 : reclaim_region(rs, r, tmp);
}

/* The reads and writes the loss ended, sent again in the order they were
 * posted; other posted requests end with "outcome unknown".  A loss while
 * sending parks the rest again for the next resume. */
static void resend_parked(struct reclaim *rs)
{
	struct engine *e = rs->eng;
	struct eng_op *op = eng_unpark_all(e), *next;

	for (; op; op = next) {
		struct rmem_region reg = { .id = op->io.region_id, .length = UINT64_MAX }, tmp;
		const struct rmem_region *r = &reg;
		struct dp_job job;
		int err;

		next = op->next_parked;
		if (!op->io.opcode) {
			eng_complete(e, op, -ECONNABORTED);
			continue;
		}
		err = e->broken ? -ECONNRESET : region_now(rs, &r, &tmp);
		if (!err) {
			job = (struct dp_job){ .opcode = op->io.opcode, .r = r, .off = op->io.off,
					       .src = op->io.buf, .dst = op->io.buf,
					       .len = op->io.len, .seg = op->io.seg,
					       .gap = op->io.gap, .phase = op->io.phase };
			err = dp_submit(e, op, &job);
		}
		if (op->sent > 0) {
			eng_seal(e, op);
			continue;
		}
		if (e->broken && rs->resume_ms)
			eng_park(e, op);
		else
			eng_complete(e, op, err ? err : 0);
	}
}

/* For good: parked operations end as they would have without resuming. */
static int give_up(struct reclaim *rs)
{
	struct engine *e = rs->eng;

	rs->dead = true;
	if (!e->broken)
		eng_fail(e, -ECONNRESET);
	for (struct eng_op *op = eng_unpark_all(e), *next; op; op = next) {
		next = op->next_parked;
		eng_complete(e, op, -ECONNRESET);
	}
	e->park_lost = false;
	return -ECONNRESET;
}

int reclaim_run(struct reclaim *rs)
{
	struct engine *e = rs->eng;
	int64_t deadline = clock_mono_ms() + rs->resume_ms;
	int timeout_ms = e->timeout_ms;
	int backoff = BACKOFF_MIN_MS;
	int err;

	if (!e->broken)
		return 0;
	if (rs->dead || !rs->resume_ms || !loss_resumable(e->fail_err))
		return rs->dead ? -ECONNRESET : give_up(rs);
	for (;;) {
		err = attempt(rs, deadline, timeout_ms);
		if (!err)
			break;
		if (!worth_retrying(err) || clock_ms_until(deadline) <= 0)
			break;
		if (!wait_backoff(e, backoff < clock_ms_until(deadline) ? backoff : clock_ms_until(deadline)))
			break;
		backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
	}
	e->timeout_ms = timeout_ms;
	if (err)
		return give_up(rs);
	__atomic_store_n(&rs->epoch, rs->epoch + 1, __ATOMIC_RELEASE);
	rs->stale_below = rs->max_id + 1;
	map_clear(rs);
	resend_parked(rs);
	return 0;
}

int reclaim_hook(void *ctx)
{
	return reclaim_run(ctx);
}
