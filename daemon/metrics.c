/*
 * metrics.c - see metrics.h.
 *
 * The page is a few hundred lines built in one evbuffer from figures
 * already in memory (no lock, no I/O but the socket's), so a scrape costs
 * the loop what one admin listing does.  metrics_http.c serves it.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bindaddr.h"
#include "clock.h"
#include "member.h"
#include "counters.h"
#include "log.h"
#include "metrics.h"
#include "metrics_int.h"
#include "names.h"
#include "region.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)

#ifndef RMEM_VERSION_STRING
#define RMEM_VERSION_STRING "unknown"
#endif


/* ---- the page ------------------------------------------------------------------ */

/* Label values need no escaping: pool and tenant names are [A-Za-z0-9_.-]
 * (config.c), the rest are words of ours. */

/* The op label of each opcode; one without a name here is "opN". */
static const char *const op_names[PROTO_OP_COUNT] = {
	[PROTO_OP_HELLO] = "hello",     [PROTO_OP_ALLOC] = "alloc",
	[PROTO_OP_FREE] = "free",       [PROTO_OP_WRITE] = "write",
	[PROTO_OP_READ] = "read",       [PROTO_OP_STATS] = "stats",
	[PROTO_OP_PING] = "ping",       [PROTO_OP_POOLS] = "pools",
	[PROTO_OP_REGIONS] = "regions", [PROTO_OP_CLIENTS] = "clients",
	[PROTO_OP_CAS] = "cas",         [PROTO_OP_FAA] = "faa",
	[PROTO_OP_AUTH_BEGIN] = "auth_begin", [PROTO_OP_AUTH] = "auth",
	[PROTO_OP_CREATE] = "create",   [PROTO_OP_OPEN] = "open",
	[PROTO_OP_UNLINK] = "unlink",   [PROTO_OP_NAMES] = "names",
	[PROTO_OP_RESUME] = "resume",   [PROTO_OP_REKEY] = "rekey",
	[PROTO_OP_REGIONS_NAMED] = "regions_named",
};

static const char *const errno_names[COUNTERS_NERRNO] = {
	[COUNTERS_ENOMEM] = "ENOMEM", [COUNTERS_EDQUOT] = "EDQUOT",
	[COUNTERS_EINVAL] = "EINVAL", [COUNTERS_EEXIST] = "EEXIST",
	[COUNTERS_EMFILE] = "EMFILE",
	[COUNTERS_EOTHER] = "other",
};

static const char *const auth_names[COUNTERS_NAUTH] = {
	[COUNTERS_AUTH_TENANT] = "unknown_tenant",
	[COUNTERS_AUTH_MAC] = "wrong_mac",
	[COUNTERS_AUTH_ANONYMOUS] = "anonymous",
};

static const char *const io_names[COUNTERS_NIO] = {
	[COUNTERS_READ] = "read", [COUNTERS_WRITE] = "write",
};

/* Nanoseconds as decimal seconds, exactly: 2500 -> "0.0000025". */
static const char *seconds(uint64_t ns, char *buf, size_t len)
{
	size_t n;

	snprintf(buf, len, "%llu.%09llu", (unsigned long long)(ns / 1000000000u),
		 (unsigned long long)(ns % 1000000000u));
	n = strlen(buf);
	while (buf[n - 1] == '0')
		buf[--n] = '\0';
	if (buf[n - 1] == '.')
		buf[n - 1] = '\0';
	return buf;
}

/* Every call below appends to one evbuffer; a failure anywhere is seen
 * once, at the end, as a short buffer would be (struct page.failed). */
struct page {
	struct evbuffer *b;
	bool failed;
};

__attribute__((format(printf, 2, 3)))
static void put(struct page *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (evbuffer_add_vprintf(p->b, fmt, ap) < 0)
		p->failed = true;
	va_end(ap);
}

static void head(struct page *p, const char *name, const char *type, const char *help)
{
	put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(struct page *p, const char *name, uint64_t v)
{
	put(p, "%s %llu\n", name, (unsigned long long)v);
}

static void labelled(struct page *p, const char *name, const char *label, const char *lv,
		     uint64_t v)
{
	put(p, "%s{%s=\"%s\"} %llu\n", name, label, lv, (unsigned long long)v);
}

static void one(struct page *p, const char *name, const char *type, const char *help, uint64_t v)
{
	head(p, name, type, help);
	value(p, name, v);
}

static void write_pools(struct page *p, const struct server *srv)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
		{ "rmem_pool_bytes", "Bytes of memory a pool serves (pinned)." },
		{ "rmem_used_bytes", "Bytes of a pool in regions, the quarantine's included." },
		{ "rmem_largest_free_bytes", "Longest free range of a pool, in bytes." },
		{ "rmem_pool_regions", "Live allocations in a pool." },
	};

	for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
		head(p, fam[f].name, "gauge", fam[f].help);
		for (uint32_t i = 0; i < srv->npools; i++) {
			struct alloc_stats a;
			const uint64_t *v[] = { &a.total, &a.used, &a.largest_free, &a.live };

			alloc_get_stats(srv->pools[i].alloc, &a);
			labelled(p, fam[f].name, "pool", srv->pools[i].name, *v[f]);
		}
	}
}

/* Every slot has a tenant (tenant.h): the whole, and each tenant's part. */
static void write_slots(struct page *p, const struct server *srv)
{
	const struct config *cfg = &srv->cfg;
	const struct tenant_use *anon = tenant_usage(srv, NULL);

	one(p, "rmem_state_slots_capacity", "gauge",
	    "State slots (limits.state_slots, or the restored state's count).",
	    tenant_slots_total(srv));
	one(p, "rmem_state_slots_used", "gauge",
	    "State slots charged: the id counters', one per session, the tenants' records'.",
	    tenant_slots_used(srv));
	one(p, "rmem_state_slots_share", "gauge",
	    "Record slots each tenant, and the anonymous clients together, may hold.",
	    tenant_slot_share(srv));
	one(p, "rmem_sessions_share", "gauge",
	    "Sessions each tenant, and the anonymous clients together, may hold (admin aside).",
	    tenant_session_share(srv));
	one(p, "rmem_anonymous_state_slots", "gauge",
	    "Record slots the anonymous clients hold.", anon->slots);
	one(p, "rmem_anonymous_sessions", "gauge", "Sessions of anonymous clients.",
	    anon->sessions);
	if (!cfg->ntenants)
		return;
	head(p, "rmem_tenant_state_slots", "gauge", "Record slots a tenant holds.");
	for (size_t i = 0; i < cfg->ntenants; i++)
		labelled(p, "rmem_tenant_state_slots", "tenant", cfg->tenants[i].name,
			 tenant_usage(srv, &cfg->tenants[i])->slots);
	head(p, "rmem_tenant_sessions", "gauge", "Sessions a tenant holds.");
	for (size_t i = 0; i < cfg->ntenants; i++)
		labelled(p, "rmem_tenant_sessions", "tenant", cfg->tenants[i].name,
			 tenant_usage(srv, &cfg->tenants[i])->sessions);
}

static void write_tenants(struct page *p, const struct server *srv)
{
	const struct config *cfg = &srv->cfg;

	if (!cfg->ntenants)
		return;
	head(p, "rmem_tenant_used_bytes", "gauge",
	     "Bytes a tenant holds, counted against its quota until they are back in a pool.");
	for (size_t i = 0; i < cfg->ntenants; i++)
		labelled(p, "rmem_tenant_used_bytes", "tenant", cfg->tenants[i].name,
			 tenant_usage(srv, &cfg->tenants[i])->bytes);
	head(p, "rmem_tenant_regions", "gauge", "Regions a tenant holds.");
	for (size_t i = 0; i < cfg->ntenants; i++)
		labelled(p, "rmem_tenant_regions", "tenant", cfg->tenants[i].name,
			 tenant_usage(srv, &cfg->tenants[i])->regions);
	/* Only the limits that are set: 0 means none, which is no figure. */
	head(p, "rmem_tenant_quota_bytes", "gauge", "A tenant's quota in bytes (tenants with one).");
	for (size_t i = 0; i < cfg->ntenants; i++)
		if (cfg->tenants[i].quota)
			labelled(p, "rmem_tenant_quota_bytes", "tenant", cfg->tenants[i].name,
				 cfg->tenants[i].quota);
	head(p, "rmem_tenant_max_regions", "gauge",
	     "The regions a tenant may hold (tenants with a limit).");
	for (size_t i = 0; i < cfg->ntenants; i++)
		if (cfg->tenants[i].max_regions)
			labelled(p, "rmem_tenant_max_regions", "tenant", cfg->tenants[i].name,
				 cfg->tenants[i].max_regions);
}

static void write_counters(struct page *p, const struct server *srv)
{
	const struct counters *c = &srv->counters;
	static const char *const transport[2] = { [SESSION_TCP] = "tcp", [SESSION_UNIX] = "unix" };

	one(p, "rmem_allocs_total", "counter", "Regions allocated (ALLOC and CREATE).",
	    srv->allocs);
	one(p, "rmem_frees_total", "counter",
	    "Regions given back (FREE, a session's end, the last handle of an unlinked name).",
	    srv->frees);
	head(p, "rmem_alloc_failures_total", "counter", "ALLOC and CREATE requests refused, by errno.");
	for (int i = 0; i < COUNTERS_NERRNO; i++)
		labelled(p, "rmem_alloc_failures_total", "errno", errno_names[i], c->alloc_failures[i]);
	head(p, "rmem_stream_bytes_total", "counter",
	     "Region bytes moved by READ and WRITE on the stream path (TCP or Unix socket).");
	for (int t = 0; t < 2; t++)
		for (int o = 0; o < COUNTERS_NIO; o++)
			put(p, "rmem_stream_bytes_total{op=\"%s\",transport=\"%s\"} %llu\n",
			    io_names[o], transport[t], (unsigned long long)c->stream_bytes[t][o]);
	one(p, "rmem_rdma_attaches_total", "counter", "RDMA queue pairs accepted for a session.",
	    c->rdma_attaches);
	one(p, "rmem_rdma_reattaches_total", "counter",
	    "RDMA queue pairs that replaced a session's broken one.", c->rdma_reattaches);
	head(p, "rmem_auth_failures_total", "counter",
	     "Connections refused for want of a proven tenant, by reason.");
	for (int i = 0; i < COUNTERS_NAUTH; i++)
		labelled(p, "rmem_auth_failures_total", "reason", auth_names[i], c->auth_failures[i]);
	one(p, "rmem_lease_expiries_total", "counter",
	    "Sessions ended because their client was silent past limits.lease_timeout_ms.",
	    c->lease_expiries);
	one(p, "rmem_frame_timeouts_total", "counter",
	    "Connections ended because a frame stalled past limits.frame_timeout_ms.",
	    c->frame_timeouts);
	one(p, "rmem_restarts_restored_total", "counter",
	    "Starts that took the previous rmemd's pools and state back.", c->restarts_restored);
}

static void write_histogram(struct page *p, const struct server *srv)
{
	static const uint64_t bound[COUNTERS_NBUCKETS - 1] = COUNTERS_BUCKET_NS;
	const char *name = "rmem_request_duration_seconds";
	char le[32], sum[40], opbuf[16];

	head(p, name, "histogram",
	     "Time from a complete request to its reply queued (a WRITE: from its header), by op.");
	for (unsigned op = 1; op < PROTO_OP_COUNT; op++) {
		const struct counters_hist *h = &srv->counters.requests[op];
		const char *opn = op_names[op];
		uint64_t cum = 0;

		if (!opn) {
			snprintf(opbuf, sizeof opbuf, "op%u", op);
			opn = opbuf;
		}
		for (unsigned i = 0; i < COUNTERS_NBUCKETS; i++) {
			cum += h->bucket[i];
			if (i < COUNTERS_NBUCKETS - 1)
				seconds(bound[i], le, sizeof le);
			else
				snprintf(le, sizeof le, "+Inf");
			put(p, "%s_bucket{op=\"%s\",le=\"%s\"} %llu\n", name, opn, le,
			    (unsigned long long)cum);
		}
		put(p, "%s_sum{op=\"%s\"} %s\n", name, opn, seconds(h->sum_ns, sum, sizeof sum));
		put(p, "%s_count{op=\"%s\"} %llu\n", name, opn, (unsigned long long)h->count);
	}
}

/* The agent's conversation with etcd (counters.h, struct counters_cluster). */
static void write_cluster_counts(struct page *p, const struct counters_cluster *c)
{
	char age[40];
	int64_t now = clock_mono_ms();

	one(p, "rmem_cluster_registered", "gauge",
	    "1 while this server's key is in etcd under a live lease, else 0.", c->registered);
	one(p, "rmem_cluster_etcd_reachable", "gauge",
	    "1 while etcd answers the membership agent, 0 once no member has for a third of "
	    "cluster.lease_ms (or before the first answer).", c->etcd_reachable);
	one(p, "rmem_cluster_etcd_unreachable_total", "counter",
	    "Times etcd became unreachable (each logged once).", c->unreachable);
	one(p, "rmem_cluster_registrations_total", "counter",
	    "Keys created under a new lease: the first registration and every one after a lost "
	    "lease.", c->registrations);
	one(p, "rmem_cluster_leases_lost_total", "counter",
	    "Leases found gone (expired while etcd was out of reach, or revoked).",
	    c->leases_lost);
	one(p, "rmem_cluster_lease_renewals_total", "counter", "Lease keepalives etcd answered.",
	    c->renewals);
	one(p, "rmem_cluster_lease_renewal_failures_total", "counter",
	    "Lease keepalives that failed (no member answered, or an error).",
	    c->renewal_failures);
	one(p, "rmem_cluster_record_writes_total", "counter",
	    "Writes of this server's record after its figures moved by the refresh step.",
	    c->record_writes);
	/* Only once etcd has answered: before, there is no age to give. */
	if (c->last_ok_ms <= 0)
		return;
	head(p, "rmem_cluster_last_answer_age_seconds", "gauge",
	     "Seconds since etcd last answered the membership agent (a keepalive every "
	     "cluster.lease_ms/3 keeps it below that).");
	put(p, "rmem_cluster_last_answer_age_seconds %s\n",
	    seconds(now > c->last_ok_ms ? (uint64_t)(now - c->last_ok_ms) * 1000000u : 0, age,
		    sizeof age));
}

/* Only with a cluster: one series per state, 1 for the one it is in (the
 * usual way to show an enum), so an alert can ask for unreachable == 1. */
static void write_cluster(struct page *p, const struct server *srv)
{
	static const struct { int state; const char *name; } states[] = {
		{ MEMBER_JOINING, "joining" },
		{ MEMBER_REGISTERED, "registered" },
		{ MEMBER_UNREACHABLE, "unreachable" },
	};

	if (srv->member_state == MEMBER_OFF)
		return;
	head(p, "rmem_cluster_state", "gauge",
	     "Membership in the etcd cluster (cluster.etcd): 1 for the state it is in.");
	for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
		labelled(p, "rmem_cluster_state", "state", states[i].name,
			 srv->member_state == states[i].state);
	one(p, "rmem_cluster_draining", "gauge",
	    "1 while an operator drains this server (rmemctl cluster drain: it takes no new "
	    "regions or names, its redundant pieces move to other members), else 0.",
	    srv->draining);
	write_cluster_counts(p, &srv->counters.cluster);
}

/* Only where the repair agent runs (repair_agent.h).  The regions' states
 * are the leader's count at its last scan (0 on the others), so a sum over
 * the members is the cluster's. */
static void write_repair(struct page *p, const struct counters_repair *c)
{
	if (!c->on)
		return;
	one(p, "rmem_repair_leader", "gauge", "1 when this member leads the cluster's repair.",
	    c->leading);
	head(p, "rmem_redundant_regions", "gauge",
	     "Redundant named regions by state, as the repair leader saw them at its last "
	     "scan (0 on other members): healthy, degraded (a piece lost or stale), repairing.");
	labelled(p, "rmem_redundant_regions", "state", "healthy", c->leading ? c->healthy : 0);
	labelled(p, "rmem_redundant_regions", "state", "degraded",
		 c->leading ? c->degraded - (c->repairing < c->degraded ? c->repairing : c->degraded) : 0);
	labelled(p, "rmem_redundant_regions", "state", "repairing", c->repairing);
	one(p, "rmem_repaired_pieces_total", "counter",
	    "Pieces of redundant regions this member rebuilt and put in place.", c->pieces);
	one(p, "rmem_repaired_bytes_total", "counter",
	    "Bytes of the pieces this member rebuilt (repair).", c->bytes);
	one(p, "rmem_repair_failures_total", "counter",
	    "Regions whose repair failed here (tried again at a later scan).", c->failures);
	one(p, "rmem_repair_scans_total", "counter",
	    "Scans of the names' records while leading repair.", c->scans);
	one(p, "rmem_repair_given_back_total", "counter",
	    "Pieces this member held that no record names any more (rebuilt elsewhere while "
	    "it was away, or left by a repairer that died), unlinked.", c->given_back);
}

int metrics_write(const struct server *srv, struct evbuffer *out)
{
	struct page p = { .b = out, .failed = false };

	head(&p, "rmem_build_info", "gauge", "rmemd's version and protocol; always 1.");
	put(&p, "rmem_build_info{version=\"%s\",protocol=\"%d\"} 1\n", RMEM_VERSION_STRING,
	    PROTO_VERSION);
	if (srv->metrics && srv->metrics->start_time[0]) {
		head(&p, "process_start_time_seconds", "gauge",
		     "Start time of the process since the Unix epoch, in seconds.");
		put(&p, "process_start_time_seconds %s\n", srv->metrics->start_time);
	}
	if (srv->metrics) {
		one(&p, "rmem_metrics_connections", "gauge",
		    "Connections open on listen.metrics (at most " TEXT(METRICS_MAX_CONNS) ").",
		    srv->metrics->nconns);
		one(&p, "rmem_metrics_connections_shed_total", "counter",
		    "Connections to listen.metrics closed because the cap was reached.",
		    srv->metrics->shed);
	}
	write_pools(&p, srv);
	one(&p, "rmem_regions", "gauge", "Regions in the table (named regions' handles included).",
	    srv->regions ? region_count(srv->regions) : 0);
	one(&p, "rmem_named_regions", "gauge", "Named regions, linked or not, that still hold memory.",
	    srv->names ? names_count(srv->names) : 0);
	one(&p, "rmem_named_handles", "gauge", "Open handles of named regions.",
	    srv->names ? names_handle_count(srv->names) : 0);
	one(&p, "rmem_clients", "gauge", "Sessions past HELLO.", srv->clients);
	one(&p, "rmem_peak_used_bytes", "gauge", "The most bytes ever in regions at once.",
	    srv->peak_used);
	one(&p, "rmem_quarantine_bytes", "gauge",
	    "Bytes whose NIC key died unconfirmed, waiting before they are zeroed and reused.",
	    srv->counters.quarantine_bytes);
	write_cluster(&p, srv);
	write_repair(&p, &srv->counters.repair);
	write_slots(&p, srv);
	write_tenants(&p, srv);
	write_counters(&p, srv);
	write_histogram(&p, srv);
	return p.failed ? -ENOMEM : 0;
}

/*
 * The process's start as Prometheus' client libraries compute it: boot time
 * (/proc/stat btime) plus the start in clock ticks (/proc/self/stat field
 * 22).  Left empty, and the metric out, when either cannot be read.
 */
void metrics_start_time(char *out, size_t len)
{
	unsigned long long btime = 0, ticks = 0;
	long hz = sysconf(_SC_CLK_TCK);
	char line[256], *p;
	FILE *f = fopen("/proc/stat", "r");
	bool got = false;

	out[0] = '\0';
	if (!f)
		return;
	while (!got && fgets(line, sizeof line, f))
		got = sscanf(line, "btime %llu", &btime) == 1;
	fclose(f);
	f = fopen("/proc/self/stat", "r");
	if (!f)
		return;
	p = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
	fclose(f);
	/* After "pid (comm)": state is field 3, starttime field 22. */
	if (!got || hz <= 0 || !p ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
		   "%*d %*d %*d %*d %llu", &ticks) != 1)
		return;
	snprintf(out, len, "%llu.%02llu", btime + ticks / (unsigned long long)hz,
		 ticks % (unsigned long long)hz * 100 / (unsigned long long)hz);
}
