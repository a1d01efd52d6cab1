/*
 * test_metrics_page.c - the page daemon/metrics.c writes, from a server
 * whose figures the test set: the histogram's buckets (cumulative, bounds
 * as exact decimal seconds, every observation in the first bucket that
 * holds it, +Inf = _count), its _sum, the errno label of each refusal, a
 * pool's figures, tenants' figures and the limits only where they are set.
 * No HTTP here: test_metrics does that against the real daemon.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "member.h"
#include "counters.h"
#include "metrics.h"
#include "server.h"
#include "session.h"
#include "tap.h"

/* The page as a string (free it), or NULL. */
static char *page(const struct server *srv)
{
	struct evbuffer *b = evbuffer_new();
	char *text = NULL;
	size_t len;

	if (b && metrics_write(srv, b) == 0) {
		len = evbuffer_get_length(b);
		text = malloc(len + 1);
		if (text) {
			evbuffer_remove(b, text, len);
			text[len] = '\0';
		}
	}
	if (b)
		evbuffer_free(b);
	return text;
}

/* Whether the page has this whole line. */
static bool has(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void test_histogram(struct server *srv)
{
	struct counters_hist *h = &srv->counters.requests[PROTO_OP_ALLOC];
	char *text;

	counters_observe(h, 500);        /* 0.5 us */
	counters_observe(h, 1000);       /* exactly on the first bound */
	counters_observe(h, 1001);       /* just past it */
	counters_observe(h, 200000000);  /* 0.2 s: past the last bound */
	text = page(srv);
	ok(text != NULL, "the page is written");
	if (!text)
		return;
	ok(has(text, "# TYPE rmem_request_duration_seconds histogram"), "a histogram");
	ok(has(text, "rmem_request_duration_seconds_bucket{op=\"alloc\",le=\"0.000001\"} 2"),
	   "le 1 us holds 0.5 us and 1 us");
	ok(has(text, "rmem_request_duration_seconds_bucket{op=\"alloc\",le=\"0.0000025\"} 3"),
	   "le 2.5 us adds 1.001 us (cumulative)");
	ok(has(text, "rmem_request_duration_seconds_bucket{op=\"alloc\",le=\"0.1\"} 3"),
	   "le 0.1 s still 3");
	ok(has(text, "rmem_request_duration_seconds_bucket{op=\"alloc\",le=\"+Inf\"} 4"),
	   "+Inf holds all 4");
	ok(has(text, "rmem_request_duration_seconds_count{op=\"alloc\"} 4"), "_count 4");
	ok(has(text, "rmem_request_duration_seconds_sum{op=\"alloc\"} 0.200002501"),
	   "_sum is the exact decimal of 200002501 ns");
	ok(has(text, "rmem_request_duration_seconds_sum{op=\"free\"} 0") &&
	   has(text, "rmem_request_duration_seconds_bucket{op=\"free\",le=\"+Inf\"} 0"),
	   "an op never served: zeros");
	ok(!strstr(text, "op=\"op0\"") && has(text, "rmem_request_duration_seconds_count{op=\"names\"} 0"),
	   "opcodes 1 to the last, by name");
	free(text);
}

static void test_failures(struct server *srv)
{
	static const int rcs[] = { -ENOMEM, -ENOMEM, -EDQUOT, -EINVAL, -EEXIST, -EIO, -EACCES };
	char *text;

	for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; i++)
		srv->counters.alloc_failures[counters_errno_of(rcs[i])]++;
	srv->counters.stream_bytes[SESSION_UNIX][COUNTERS_WRITE] = 7;
	srv->counters.auth_failures[COUNTERS_AUTH_MAC] = 3;
	srv->counters.restarts_restored = 1;
	text = page(srv);
	if (!ok(text != NULL, "the page is written again"))
		return;
	ok(has(text, "rmem_alloc_failures_total{errno=\"ENOMEM\"} 2") &&
	   has(text, "rmem_alloc_failures_total{errno=\"EDQUOT\"} 1") &&
	   has(text, "rmem_alloc_failures_total{errno=\"EINVAL\"} 1") &&
	   has(text, "rmem_alloc_failures_total{errno=\"EEXIST\"} 1") &&
	   has(text, "rmem_alloc_failures_total{errno=\"other\"} 2"),
	   "refusals by errno; EIO and EACCES are other");
	ok(has(text, "rmem_stream_bytes_total{op=\"write\",transport=\"unix\"} 7") &&
	   has(text, "rmem_stream_bytes_total{op=\"write\",transport=\"tcp\"} 0"),
	   "stream bytes by op and transport");
	ok(has(text, "rmem_auth_failures_total{reason=\"wrong_mac\"} 3"), "auth failures by reason");
	ok(has(text, "rmem_restarts_restored_total 1"), "restarts restored");
	free(text);
}

static void test_pools_tenants(struct server *srv)
{
	uint64_t off, len;
	char *text;

	srv->pools[0].alloc = alloc_new(1 << 20, 64);
	snprintf(srv->pools[0].name, sizeof srv->pools[0].name, "p0");
	srv->npools = 1;
	if (!ok(srv->pools[0].alloc && alloc_reserve(srv->pools[0].alloc, 4096, &off, &len) == 0,
		"a 1 MiB pool with 4 KiB taken"))
		return;
	srv->cfg.ntenants = 2;
	snprintf(srv->cfg.tenants[0].name, sizeof srv->cfg.tenants[0].name, "ta");
	srv->cfg.tenants[0].quota = 1 << 20;
	snprintf(srv->cfg.tenants[1].name, sizeof srv->cfg.tenants[1].name, "tb");
	srv->cfg.tenants[1].max_regions = 5;
	srv->tenants.use[0].bytes = 4096;
	srv->tenants.use[1].regions = 2;
	/* 1000 slots, 10 + 4 + 2 set aside: (1000 - 16) / 3 each. */
	srv->cfg.state_slots = 1000;
	srv->cfg.max_clients = 10;
	srv->clients = 3;
	srv->tenants.slots_charged = 9;
	srv->tenants.use[1].slots = 7;
	srv->tenants.use[1].sessions = 2;
	srv->tenants.use[CONFIG_MAX_TENANTS].slots = 2;
	srv->tenants.use[CONFIG_MAX_TENANTS].sessions = 1;
	text = page(srv);
	if (!ok(text != NULL, "the page with a pool and tenants"))
		return;
	ok(has(text, "rmem_pool_bytes{pool=\"p0\"} 1048576") &&
	   has(text, "rmem_used_bytes{pool=\"p0\"} 4096") &&
	   has(text, "rmem_largest_free_bytes{pool=\"p0\"} 1044480") &&
	   has(text, "rmem_pool_regions{pool=\"p0\"} 1"), "the pool's figures, from its allocator");
	ok(has(text, "rmem_tenant_used_bytes{tenant=\"ta\"} 4096") &&
	   has(text, "rmem_tenant_regions{tenant=\"tb\"} 2"), "the tenants' use");
	ok(has(text, "rmem_tenant_quota_bytes{tenant=\"ta\"} 1048576") &&
	   !strstr(text, "rmem_tenant_quota_bytes{tenant=\"tb\"}"), "a quota only where set");
	ok(has(text, "rmem_tenant_max_regions{tenant=\"tb\"} 5") &&
	   !strstr(text, "rmem_tenant_max_regions{tenant=\"ta\"}"), "max_regions only where set");
	ok(has(text, "rmem_state_slots_capacity 1000") && has(text, "rmem_state_slots_used 15") &&
	   has(text, "rmem_state_slots_share 327") && has(text, "rmem_sessions_share 3"),
	   "the state slots: capacity, used (3 + 3 sessions + 9), the shares");
	ok(has(text, "rmem_tenant_state_slots{tenant=\"tb\"} 7") &&
	   has(text, "rmem_tenant_state_slots{tenant=\"ta\"} 0") &&
	   has(text, "rmem_tenant_sessions{tenant=\"tb\"} 2") &&
	   has(text, "rmem_anonymous_state_slots 2") && has(text, "rmem_anonymous_sessions 1"),
	   "each tenant's slots and sessions, and the anonymous clients'");
	ok(!strstr(text, "process_start_time_seconds"), "no start time without the endpoint");
	free(text);
	alloc_free(srv->pools[0].alloc);
}

/* The cluster's state: absent without a cluster, one series per state. */
static void test_cluster(struct server *srv)
{
	char *text;

	srv->npools = 0; /* the pool of the test before is gone */
	srv->member_state = MEMBER_OFF;
	text = page(srv);
	ok(text && !strstr(text, "rmem_cluster_state"), "no cluster, no rmem_cluster_state");
	free(text);
	srv->member_state = MEMBER_UNREACHABLE;
	text = page(srv);
	ok(text && has(text, "rmem_cluster_state{state=\"unreachable\"} 1") &&
	   has(text, "rmem_cluster_state{state=\"registered\"} 0") &&
	   has(text, "rmem_cluster_state{state=\"joining\"} 0"),
	   "etcd out of reach: unreachable 1, the other states 0");
	ok(text && has(text, "rmem_cluster_registered 0") &&
	   has(text, "rmem_cluster_etcd_reachable 0") &&
	   has(text, "rmem_cluster_lease_renewals_total 0") &&
	   !strstr(text, "rmem_cluster_last_answer_age_seconds"),
	   "before etcd's first answer: not registered, not reachable, no answer age");
	free(text);
	srv->draining = true;
	text = page(srv);
	ok(text && has(text, "rmem_cluster_draining 1"), "a member drained: rmem_cluster_draining 1");
	free(text);
	srv->draining = false;
	text = page(srv);
	ok(text && has(text, "rmem_cluster_draining 0"), "undrained: rmem_cluster_draining 0");
	free(text);

	srv->member_state = MEMBER_REGISTERED;
	srv->counters.cluster = (struct counters_cluster){
		.registrations = 2, .leases_lost = 1, .renewals = 40, .renewal_failures = 3,
		.record_writes = 7, .unreachable = 1, .last_ok_ms = clock_mono_ms() - 2500,
		.registered = 1, .etcd_reachable = 1,
	};
	text = page(srv);
	ok(text && has(text, "rmem_cluster_registered 1") &&
	   has(text, "rmem_cluster_etcd_reachable 1") &&
	   has(text, "rmem_cluster_etcd_unreachable_total 1") &&
	   has(text, "rmem_cluster_registrations_total 2") &&
	   has(text, "rmem_cluster_leases_lost_total 1") &&
	   has(text, "rmem_cluster_lease_renewals_total 40") &&
	   has(text, "rmem_cluster_lease_renewal_failures_total 3") &&
	   has(text, "rmem_cluster_record_writes_total 7") &&
	   has(text, "# TYPE rmem_cluster_lease_renewals_total counter"),
	   "the agent's counts, each under its name");
	{
		const char *age = text ? strstr(text, "\nrmem_cluster_last_answer_age_seconds ") : NULL;
		double secs = age ? strtod(age + strlen("\nrmem_cluster_last_answer_age_seconds "),
					   NULL) : -1;

		ok(secs >= 2.5 && secs < 60, "the last answer's age in seconds (%.3f, set 2.5 s ago)",
		   secs);
	}
	free(text);
	memset(&srv->counters.cluster, 0, sizeof srv->counters.cluster);
	srv->member_state = MEMBER_OFF;
}

/* The repair agent's: absent while it is off; the regions' states only on
 * the leader (and repairing ones counted once, not also as degraded). */
static void test_repair(struct server *srv)
{
	char *text = page(srv);

	ok(text && !strstr(text, "rmem_repair") && !strstr(text, "rmem_redundant_regions"),
	   "repair agent off: no repair series");
	free(text);
	srv->counters.repair = (struct counters_repair){
		.on = 1, .leading = 1, .pieces = 4, .bytes = 1 << 20, .failures = 2, .scans = 9,
		.given_back = 6,
		.healthy = 5, .degraded = 3, .repairing = 1,
	};
	text = page(srv);
	ok(text && has(text, "rmem_repair_leader 1") &&
	   has(text, "rmem_redundant_regions{state=\"healthy\"} 5") &&
	   has(text, "rmem_redundant_regions{state=\"degraded\"} 2") &&
	   has(text, "rmem_redundant_regions{state=\"repairing\"} 1") &&
	   has(text, "rmem_repaired_pieces_total 4") &&
	   has(text, "rmem_repaired_bytes_total 1048576") &&
	   has(text, "rmem_repair_failures_total 2") && has(text, "rmem_repair_scans_total 9") &&
	   has(text, "rmem_repair_given_back_total 6") &&
	   has(text, "# TYPE rmem_repaired_bytes_total counter"),
	   "the leader: regions by state (repairing not also degraded), its counts");
	free(text);
	srv->counters.repair.leading = 0;
	srv->counters.repair.repairing = 0;
	text = page(srv);
	ok(text && has(text, "rmem_repair_leader 0") &&
	   has(text, "rmem_redundant_regions{state=\"healthy\"} 0") &&
	   has(text, "rmem_redundant_regions{state=\"degraded\"} 0"),
	   "another member: states 0, so a sum over members is the cluster's");
	free(text);
	memset(&srv->counters.repair, 0, sizeof srv->counters.repair);
}

int main(void)
{
	struct server *srv = calloc(1, sizeof *srv);

	if (!srv)
		return 1;
	test_histogram(srv);
	test_failures(srv);
	test_pools_tenants(srv);
	test_cluster(srv);
	test_repair(srv);
	free(srv);
	return tap_done();
}
