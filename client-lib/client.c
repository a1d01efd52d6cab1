/*
 * client.c - the session calls of librmem: connect and close, alloc, free,
 * stats and the admin listings.  Transfers, atomics
 * and rmem_poll are in io.c, named regions in named.c; every request goes
 * through the engine (engine.c), which keeps requests and replies in step.
 * The request/reply steps that ALLOC and FREE share with the requests of
 * named regions (a region reply, a status reply, a listing) are here, as
 * client_*() calls (client.h).
 *
 * Each public call checks its arguments, then holds the client's lock for
 * the rest of its run.
 */
#include "client.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "datapath.h"
#include "endpoint.h"
#include "keepalive.h"
#include "tcp.h"
#include "tcp_cc.h"
#include "tls.h"

/* True when a caller's struct of opts_size bytes contains field. */
#define OPTS_HAS(opts_size, field) \
	((opts_size) >= offsetof(struct rmem_opts, field) + sizeof(((struct rmem_opts *)0)->field))

struct connect_params {
	enum transport_choice choice;
	int timeout_ms;
	int resume_ms;           /* 0: off */
	const char *tenant;      /* NULL: anonymous */
	const char *secret_file;
	const char *tcp_cc;      /* NULL: the system's congestion control */
	/* tls_ca, tls_cert, tls_key, tls_name; NULL each when not given */
	const char *tls[4];
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
	if (OPTS_HAS(size, resume_ms))
		o->resume_ms = CLIENT_DEFAULT_RESUME_MS;
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
	/* A program built before resume_ms existed gets the default: it cannot
	 * tell, and its regions stay valid across a restart either way. */
	p->resume_ms = CLIENT_DEFAULT_RESUME_MS;
	p->tenant = NULL;
	p->secret_file = NULL;
	p->tcp_cc = NULL;
	memset(p->tls, 0, sizeof p->tls);
	if (o) {
		if (!OPTS_HAS(o->size, size))
			return -EINVAL;
		if (OPTS_HAS(o->size, transport))
			transport = o->transport;
		if (OPTS_HAS(o->size, timeout_ms))
			p->timeout_ms = o->timeout_ms;
		if (OPTS_HAS(o->size, secret_file)) {
			p->tenant = o->tenant;
			p->secret_file = o->secret_file;
		}
		if (OPTS_HAS(o->size, resume_ms))
			p->resume_ms = o->resume_ms > 0 ? o->resume_ms : 0;
		if (OPTS_HAS(o->size, tcp_congestion) && o->tcp_congestion &&
		    o->tcp_congestion[0]) {
			if (!tcp_cc_name_ok(o->tcp_congestion))
				return -EINVAL;
			p->tcp_cc = o->tcp_congestion;
		}
		/* Redundancy spans servers, etcd is the cluster's: a cluster's
		 * alone. */
		if (OPTS_HAS(o->size, redundancy) && o->redundancy && o->redundancy[0])
			return -EINVAL;
		if (OPTS_HAS(o->size, etcd_key) &&
		    ((o->etcd_ca && o->etcd_ca[0]) || (o->etcd_cert && o->etcd_cert[0]) ||
		     (o->etcd_key && o->etcd_key[0])))
			return -EINVAL;
		if (OPTS_HAS(o->size, tls_name)) {
			p->tls[0] = o->tls_ca;
			p->tls[1] = o->tls_cert;
			p->tls[2] = o->tls_key;
			p->tls[3] = o->tls_name;
		}
	}
	if (!p->tenant != !p->secret_file)
		return -EINVAL;
	return parse_transport(transport, &p->choice);
}

/*
 * The options' tls_* with the URL's: a value given once is taken, one given
 * by both must agree; any with an endpoint that is not TLS is -EINVAL, as
 * is half a client certificate.
 */
static int merge_tls(struct endpoint *ep, const struct connect_params *p)
{
	char *field[4] = { ep->tls_ca, ep->tls_cert, ep->tls_key, ep->tls_name };

	for (int i = 0; i < 4; i++) {
		const char *v = p->tls[i];

		if (!v || !v[0])
			continue;
		if (!ep->tls || strlen(v) >= ENDPOINT_TLS_MAX)
			return -EINVAL;
		if (field[i][0] && strcmp(field[i], v))
			return -EINVAL;
		memcpy(field[i], v, strlen(v) + 1);
	}
	return !ep->tls_cert[0] != !ep->tls_key[0] ? -EINVAL : 0;
}

/* The client's TLS context, for the connect and every resume. */
static int open_tls(struct reclaim *rs)
{
	const struct tls_config tc = {
		.ca = rs->ep.tls_ca, .cert = rs->ep.tls_cert, .key = rs->ep.tls_key, .ktls = true,
	};

	if (!rs->ep.tls)
		return 0;
	return tls_ctx_new(&tc, &rs->tls, NULL, 0);
}

/*
 * Which data path serves this endpoint with this transport choice: the
 * choice is narrowed to what the connect must do.  rdma:// or transport
 * "rdma" require RDMA: without an RDMA device here that is -ENOTSUP at once,
 * never a quiet TCP fallback.  "auto" on HOST:PORT tries RDMA when this
 * machine has a device and the daemon offers it.  Contradictions (transport
 * "tcp" with rdma://, "rdma" with tcp:// or unix:) are -EINVAL.
 */
static int check_path(const struct endpoint *ep, enum transport_choice *choice)
{
	switch (ep->kind) {
	case ENDPOINT_RDMA:
		if (*choice == CHOICE_TCP)
			return -EINVAL;
		*choice = CHOICE_RDMA;
		break;
	case ENDPOINT_TCP:
		/* TLS seals the stream only: data on the NIC would pass it by. */
		if ((ep->explicit_scheme || ep->tls) && *choice == CHOICE_RDMA)
			return -EINVAL;
		if (ep->explicit_scheme || ep->tls)
			*choice = CHOICE_TCP;
		break;
	case ENDPOINT_UNIX:
		if (*choice == CHOICE_RDMA)
			return -EINVAL;
		*choice = CHOICE_TCP;
		break;
	}
	if (*choice == CHOICE_TCP)
		return 0;
	if (!dp_have_device()) {
		if (*choice == CHOICE_RDMA)
			return -ENOTSUP;
		*choice = CHOICE_TCP;
	}
	return 0;
}

/* ---- session --------------------------------------------------------------- */

/* What the HELLO reply says about RDMA. */
struct hello_rdma {
	uint64_t token;
	uint16_t port;   /* 0: the daemon serves no RDMA */
};

/* HELLO; with resume on it asks for the session's resume token. */
static int say_hello(struct rmem_client *c, struct hello_rdma *hr)
{
	struct proto_hello_req req = {
		.client_version = PROTO_VERSION,
		.features = c->rs.resume_ms ? PROTO_HELLO_F_RESUMABLE : 0,
		.pid = (uint32_t)getpid(),
	};
	uint8_t buf[PROTO_HELLO_REQ_LEN];
	struct proto_hello_rep rep;
	size_t reply_len;
	int status, err;

	err = eng_call(&c->eng, PROTO_OP_HELLO, buf, proto_hello_req_encode(buf, &req), &reply_len);
	if (err)
		return err;
	if (proto_hello_rep_decode(c->eng.rx, reply_len, &status, &rep) < 0)
		return eng_fail(&c->eng, -EPROTO);
	if (status)
		return status;
	if (rep.max_io == 0)
		return eng_fail(&c->eng, -EPROTO);
	c->session_id = c->rs.session_id = rep.session_id;
	/* A daemon that sends no token cannot resume this session. */
	if (!rep.resumable)
		c->rs.resume_ms = 0;
	memcpy(c->rs.token, rep.resume_token, sizeof(c->rs.token));
	hr->token = rep.attach_token;
	hr->port = rep.key_mode == PROTO_KEYS_NONE ? 0 : rep.rdma_port;
	c->eng.max_io = rep.max_io < PROTO_MAX_IO ? rep.max_io : PROTO_MAX_IO;
	c->eng.lease_ms = rep.lease_ms;
	return 0;
}

static int open_stream(struct rmem_client *c, const struct endpoint *ep)
{
	struct tls_conn *tls;
	int fd = reclaim_dial(&c->rs, c->eng.timeout_ms, &tls);

	if (fd < 0)
		return fd;
	c->stream = tls ? tls_kind(tls) : ep->kind == ENDPOINT_UNIX ? "unix" : "tcp";
	c->eng.fd = fd;
	c->eng.tls = tls;
	c->eng.ktls_tx = tls && tls_kernel_tx(tls);
	return 0;
}

/*
 * Attaches the RDMA data path when the choice asks for it.  "rdma" fails
 * when it cannot be had; "auto" stays on TCP then (the daemon keeps a
 * session whose attach failed as it was).
 */
static int open_rdma(struct rmem_client *c, const struct endpoint *ep,
		     enum transport_choice choice, const struct hello_rdma *hr)
{
	int err;

	if (choice == CHOICE_TCP)
		return 0;
	if (hr->port == 0)
		return choice == CHOICE_RDMA ? -ENOTSUP : 0;
	err = dp_attach(&c->eng, ep->host, hr->port, c->session_id, hr->token);
	if (err)
		return choice == CHOICE_RDMA ? err : 0;
	return 0;
}

/* The stream, the tenant handshake, HELLO. */
static int open_session(struct rmem_client *c, const struct connect_params *p,
			struct hello_rdma *hr)
{
	int err = open_stream(c, &c->rs.ep);

	if (!err && p->tenant)
		err = auth_tenant(&c->eng, p->tenant, p->secret_file);
	if (!err)
		err = say_hello(c, hr);
	return err;
}

/*
 * The lease the keepalive thread keeps.  Without a lease there is nothing
 * to keep, unless the client may resume: then the thread still looks every
 * second (a PING finds a lost connection), so that an idle client takes its
 * session back before the restarted daemon gives it up (10 s without a
 * lease, docs/protocol.md 7.13).
 */
static uint32_t keepalive_lease(const struct rmem_client *c)
{
	if (c->eng.lease_ms || !c->rs.resume_ms)
		return c->eng.lease_ms;
	return 3000;
}

int single_connect(const char *endpoint, const struct rmem_opts *o, rmem_client **out)
{
	struct hello_rdma hr = { 0 };
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
	err = merge_tls(&ep, &params);
	if (err)
		return err;
	err = check_path(&ep, &params.choice);
	if (err)
		return err;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	err = lock_init(&c->lock);
	if (err) {
		free(c);
		return err;
	}
	eng_init(&c->eng, params.timeout_ms);
	err = reclaim_init(&c->rs, &c->eng, &ep, params.choice, params.resume_ms, params.tenant,
			  params.secret_file);
	/* Kept where the resume connects again too; read_opts checked it. */
	if (params.tcp_cc)
		memcpy(c->rs.tcp_cc, params.tcp_cc, strlen(params.tcp_cc) + 1);
	if (!err)
		err = open_tls(&c->rs);
	if (!err)
		err = open_session(c, &params, &hr);
	/* A daemon from before RESUME takes the feature bit for garbage: the
	 * client goes on without resuming, on a new stream. */
	if (err == -EBADMSG && c->rs.resume_ms) {
		c->rs.resume_ms = 0;
		eng_reopen(&c->eng, -1, NULL);
		err = open_session(c, &params, &hr);
	}
	if (!err)
		err = open_rdma(c, &ep, params.choice, &hr);
	if (!err && c->rs.resume_ms) {
		c->eng.park_lost = true;
		c->eng.recover = reclaim_hook;
		c->eng.recover_ctx = &c->rs;
	}
	if (!err)
		err = keepalive_start(&c->keepalive, &c->lock, &c->eng, keepalive_lease(c));
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	single_close(c);
	return err;
}

void single_close(rmem_client *c)
{
	if (!c)
		return;
	/* The keepalive thread uses the engine: it goes before anything else. */
	keepalive_stop(c->keepalive);
	c->keepalive = NULL;
	/* Posted operations still in flight are dropped: the library forgets
	 * their buffers here, and never touches them again.  The queue pair
	 * goes first: once it is destroyed, no DMA reaches those buffers. */
	dp_detach(&c->eng);
	eng_release(&c->eng);
	reclaim_fini(&c->rs);
	pollfd_free(c);
	lock_fini(&c->lock);
	free(c);
}

/* ---- taking the client, resuming ------------------------------------------------ */

void client_hold(struct rmem_client *c)
{
	lock_hold(&c->lock);
	if (__builtin_expect(c->eng.broken, 0) && c->rs.resume_ms)
		reclaim_run(&c->rs);
}

void client_release(struct rmem_client *c)
{
	if (c->pollfd)
		pollfd_arm(c);
	lock_release(&c->lock);
}

bool client_recovered(struct rmem_client *c, int err)
{
	if (err >= 0 || !c->rs.resume_ms || c->rs.dead)
		return false;
	/* On RDMA a work request that failed for want of an answer may be the
	 * first sign of a daemon gone (its queue pair went with it) while the
	 * stream's end is still unread: one PING tells. */
	if (!c->eng.broken && c->eng.nic && (err == -ETIMEDOUT || err == -EIO))
		eng_ping(&c->eng);
	if (!c->eng.broken)
		return false;
	return reclaim_run(&c->rs) == 0;
}

const char *single_transport(const rmem_client *c)
{
	if (!c)
		return "none";
	return dp_carries_data(&c->eng) ? "rdma" : c->stream;
}

uint32_t single_resumes(rmem_client *c)
{
	return c ? __atomic_load_n(&c->rs.epoch, __ATOMIC_ACQUIRE) : 0;
}

/* ---- alloc, free, stats ------------------------------------------------------ */

/* What ALLOC, and CREATE after it (named.c), accept: the one place that says so. */
int client_check_alloc(const rmem_client *c, uint64_t size, uint32_t flags, const void *out)
{
	return !c || !out || size == 0 || flags != 0 ? -EINVAL : 0;
}

void client_region_fill(struct rmem_region *out, const struct proto_region *reg)
{
	*out = (struct rmem_region){
		.id = reg->id,
		.addr = reg->addr,
		.length = reg->length,
		.rkey = reg->rkey,
		.flags = reg->flags,
	};
}

int client_region_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t len,
		       struct rmem_region *out)
{
	struct proto_region reg;
	size_t reply_len;
	int status, err;

	if (c->eng.broken)
		return -ECONNRESET;
	err = eng_call(&c->eng, opcode, req, len, &reply_len);
	if (err)
		return err;
	if (proto_alloc_rep_decode(c->eng.rx, reply_len, &status, &reg) < 0)
		return eng_fail(&c->eng, -EPROTO);
	if (status)
		return status;
	client_region_fill(out, &reg);
	client_saw_region(c, reg.id);
	return 0;
}

int client_status_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t len)
{
	size_t reply_len;
	int status, err;

	if (c->eng.broken)
		return -ECONNRESET;
	err = eng_call(&c->eng, opcode, req, len, &reply_len);
	if (err)
		return err;
	if (proto_status_decode(c->eng.rx, reply_len, &status) < 0)
		return eng_fail(&c->eng, -EPROTO);
	return status;
}

int single_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out)
{
	struct proto_alloc_req req = { .size = size, .flags = flags };
	uint8_t buf[PROTO_ALLOC_REQ_LEN];
	int err = client_check_alloc(c, size, flags, out);

	if (err)
		return err;
	client_hold(c);
	err = client_region_call(c, PROTO_OP_ALLOC, buf, proto_alloc_req_encode(buf, &req), out);
	/* Not sent again: the first may have taken effect (a region the
	 * session holds, unknown to the caller, until it ends). */
	err = client_once(c, err);
	client_release(c);
	return err;
}

int single_free(rmem_client *c, const struct rmem_region *r)
{
	struct rmem_region tmp;
	struct proto_free_req req;
	uint8_t buf[PROTO_FREE_REQ_LEN];
	int err;

	if (!c || !r)
		return -EINVAL;
	client_hold(c);
	err = client_region_now(c, &r, &tmp);
	if (!err) {
		req = (struct proto_free_req){ .id = r->id, .rkey = r->rkey };
		err = client_status_call(c, PROTO_OP_FREE, buf, proto_free_req_encode(buf, &req));
	}
	err = client_once(c, err);
	client_release(c);
	return err;
}

static int stats_locked(struct rmem_client *c, struct rmem_stats *out)
{
	struct proto_stats st;
	size_t reply_len;
	int status, err;

	if (c->eng.broken)
		return -ECONNRESET;
	err = eng_call(&c->eng, PROTO_OP_STATS, NULL, 0, &reply_len);
	if (err)
		return err;
	if (proto_stats_rep_decode(c->eng.rx, reply_len, &status, &st) < 0)
		return eng_fail(&c->eng, -EPROTO);
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
		.key_mode = st.v[PROTO_STAT_KEY_MODE],
		.state_slots_used = st.v[PROTO_STAT_SLOTS_USED],
		.state_slots_total = st.v[PROTO_STAT_SLOTS_TOTAL],
	};
	return 0;
}

int single_stats(rmem_client *c, struct rmem_stats *out)
{
	int err;

	if (!c || !out)
		return -EINVAL;
	client_hold(c);
	CLIENT_RETRY(c, err, stats_locked(c, out));
	client_release(c);
	return err;
}

/* ---- admin listings ------------------------------------------------------------ */

/* Sends a listing request and checks the reply: on success *count records of
 * reclen bytes follow the list header in c->eng.rx. */
int client_list_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t req_len,
		     size_t reclen, uint32_t limit, uint32_t *count)
{
	size_t reply_len;
	int status, err;

	if (c->eng.broken)
		return -ECONNRESET;
	err = eng_call(&c->eng, opcode, req, req_len, &reply_len);
	if (err)
		return err;
	if (proto_list_hdr_decode(c->eng.rx, reply_len, reclen, &status, count) < 0)
		return eng_fail(&c->eng, -EPROTO);
	if (status)
		return status;
	if (*count > limit)
		return eng_fail(&c->eng, -EPROTO);
	return 0;
}

const uint8_t *client_list_record(const struct rmem_client *c, size_t reclen, uint32_t i)
{
	return c->eng.rx + PROTO_LIST_HDR_LEN + (size_t)i * reclen;
}

/* REGIONS, CLIENTS and NAMES: the records after id `after`.  The request's
 * max is never more than one reply holds, and never 0, which the daemon
 * reads as "as many as fit". */
int client_page_call(struct rmem_client *c, uint16_t opcode, uint64_t after, size_t max,
		     size_t reclen, uint32_t *count)
{
	size_t cap = PROTO_LIST_MAX(reclen);
	struct proto_list_req req = { .after = after, .max = (uint32_t)(max < cap ? max : cap) };
	uint8_t buf[PROTO_LIST_REQ_LEN];

	return client_list_call(c, opcode, buf, proto_list_req_encode(buf, &req), reclen, req.max,
				count);
}

int client_listing(struct rmem_client *c, const struct client_list_ask *a,
		   int (*page)(struct rmem_client *c, const struct client_list_ask *a))
{
	int err = client_check_list(c, a->out, a->max);

	if (err)
		return err;
	client_hold(c);
	CLIENT_RETRY(c, err, c->eng.broken ? -ECONNRESET : a->max == 0 ? 0 : page(c, a));
	client_release(c);
	return err;
}

static int pools_locked(struct rmem_client *c, const struct client_list_ask *a)
{
	struct rmem_pool_info *out = a->out;
	uint32_t count, i;
	int err;

	err = client_list_call(c, PROTO_OP_POOLS, NULL, 0, PROTO_POOL_REC_LEN,
			PROTO_LIST_MAX(PROTO_POOL_REC_LEN), &count);
	if (err)
		return err;
	for (i = 0; i < count && i < a->max; i++) {
		struct proto_pool_rec rec;

		proto_pool_rec_decode(client_list_record(c, PROTO_POOL_REC_LEN, i), &rec);
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

/* A page of REGIONS: entries of stride bytes (the caller's layout of struct
 * rmem_region_info, which grew in RMEM_1.2), with names when named. */
static int regions_locked(struct rmem_client *c, const struct client_list_ask *a)
{
	const size_t reclen = a->named ? PROTO_REGION_NAMED_REC_LEN : PROTO_REGION_REC_LEN;
	uint32_t count;
	int err;

	err = client_page_call(c, a->named ? PROTO_OP_REGIONS_NAMED : PROTO_OP_REGIONS, a->after,
			       a->max, reclen, &count);
	if (err)
		return err;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *in = client_list_record(c, reclen, i);
		struct proto_region_rec rec;
		struct rmem_region_info info;

		if (a->named)
			proto_region_named_rec_decode(in, &rec);
		else
			proto_region_rec_decode(in, &rec);
		info = (struct rmem_region_info){
			.id = rec.id,
			.addr = rec.addr,
			.length = rec.length,
			.client_id = rec.client_id,
			.pool = rec.pool,
			.access = rec.flags & (RMEM_READ | RMEM_WRITE),
			.name_id = rec.name_id,
			.flags = rec.flags & PROTO_REGION_F_UNLINKED ? RMEM_REGION_UNLINKED : 0,
		};
		_Static_assert(sizeof(info.name) == sizeof(rec.name), "name sizes differ");
		memcpy(info.name, rec.name, sizeof(info.name));
		memcpy((uint8_t *)a->out + i * a->stride, &info, a->stride);
	}
	return (int)count;
}

int client_regions(struct rmem_client *c, uint64_t after, void *out, size_t stride,
		   size_t max, bool named)
{
	const struct client_list_ask a = { .after = after, .out = out, .max = max,
					   .stride = stride, .named = named };

	return client_listing(c, &a, regions_locked);
}

static int clients_locked(struct rmem_client *c, const struct client_list_ask *a)
{
	struct rmem_client_info *out = a->out;
	uint32_t count;
	int err;

	err = client_page_call(c, PROTO_OP_CLIENTS, a->after, a->max, PROTO_CLIENT_REC_LEN,
			       &count);
	if (err)
		return err;
	for (uint32_t i = 0; i < count; i++) {
		struct proto_client_rec rec;

		proto_client_rec_decode(client_list_record(c, PROTO_CLIENT_REC_LEN, i), &rec);
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

int client_check_list(const rmem_client *c, const void *out, size_t max)
{
	return !c || (!out && max > 0) ? -EINVAL : 0;
}

int single_pools(rmem_client *c, struct rmem_pool_info *out, size_t max)
{
	const struct client_list_ask a = { .out = out, .max = max };

	return client_listing(c, &a, pools_locked);
}

int single_regions(rmem_client *c, uint64_t after, struct rmem_region_info *out, size_t max)
{
	return client_regions(c, after, out, sizeof(*out), max, true);
}

int single_clients(rmem_client *c, uint64_t after, struct rmem_client_info *out, size_t max)
{
	const struct client_list_ask a = { .after = after, .out = out, .max = max };

	return client_listing(c, &a, clients_locked);
}
