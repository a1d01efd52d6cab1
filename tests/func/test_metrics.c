/*
 * test_metrics.c - rmemd's Prometheus endpoint (listen.metrics, GET
 * /metrics) against what the test did.
 *
 * rmemd runs with one tenant (quota 1 MiB, 10 regions), a 2 s lease and
 * metrics on a port of its own.  A fresh daemon's page passes `promtool
 * check metrics` and counts nothing.  Then, with exact figures: an
 * anonymous client on the Unix socket allocates, fails an ALLOC with
 * ENOMEM, writes 1000 and reads 3000 bytes, creates a named region and
 * frees its region; the tenant's client over the network allocates, fails
 * one with EDQUOT, writes 2000 and reads 500 bytes; an unknown tenant, a
 * wrong secret and an anonymous network client are refused; a raw session
 * goes silent past its lease.  The page must say exactly that (allocs,
 * frees, failures by errno, stream bytes by op and transport, regions,
 * names, clients, pool and tenant bytes, auth failures by reason, the lease
 * expiry, the service-time histogram's counts) and pass promtool again.
 * Other paths are 404, other methods 405.  promtool comes with Debian's
 * prometheus package (scripts/install-deps): without it the test fails.
 *
 * With RMEM_TEST_TRANSPORT=rdma (tests/func/rdma, in the test VM) the
 * tenant's client attaches a queue pair (rmem_rdma_attaches_total 1) and
 * its reads and writes go through the NIC, so no stream bytes of its count.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define POOL (64 * MiB)
#define QUOTA (1 * MiB)
#define LEASE_MS 2000
#define WAIT_MS 15000

static char dir[] = "/tmp/test_metrics.XXXXXX";
static struct harness_key keys[] = {
	{ .name = "mt.key", .secret = "the secret of tenant mt, 0123\n", .mode = 0600 },
	{ .name = "wrong.key", .secret = "the secret of tenant mt, 012X\n", .mode = 0600 },
};
#define NKEYS (sizeof keys / sizeof keys[0])
static const char *const key_path = keys[0].path, *const wrong_path = keys[1].path;
static char page_path[64];

/* ---- HTTP ----------------------------------------------------------------- */

struct http_reply {
	int status;
	char *text;          /* the whole reply, headers included, NUL-terminated */
	const char *body;    /* inside text */
};

/* One HTTP/1.0 request to the daemon's metrics port; 0 or -errno. */
static int http(const struct rmemd *d, const char *method, const char *path,
		struct http_reply *r)
{
	int rc = metrics_request(d, method, path, WAIT_MS, &r->text, &r->status);

	r->body = NULL;
	if (rc < 0)
		return rc;
	r->body = strstr(r->text, "\r\n\r\n");
	if (!r->body)
		return -EBADMSG;
	r->body += 4;
	return 0;
}

/* Whether the header line "name: value" is in the reply's headers. */
static bool has_header(const struct http_reply *r, const char *line)
{
	const char *p = strstr(r->text, line);

	return p && p < r->body;
}

/* ---- promtool ---------------------------------------------------------------- */

static bool have_promtool(void)
{
	return system("command -v promtool > /dev/null 2>&1") == 0;
}

/* `promtool check metrics` on body: its exit status; what it said goes out
 * as comments. */
static int promtool_check(const char *body)
{
	char cmd[256], line[512];
	FILE *f = fopen(page_path, "w");
	int rc;

	if (!f)
		return -errno;
	fputs(body, f);
	if (fclose(f) != 0)
		return -EIO;
	snprintf(cmd, sizeof cmd, "promtool check metrics < %s > %s.out 2>&1", page_path,
		 page_path);
	rc = system(cmd);
	snprintf(cmd, sizeof cmd, "%s.out", page_path);
	f = fopen(cmd, "r");
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		diag("promtool: %s", line);
	}
	if (f)
		fclose(f);
	unlink(cmd);
	return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* ---- the checks ------------------------------------------------------------------ */

static void expect(const char *page, const char *series, double want)
{
	double got = metrics_sample(page, series);

	ok(got == want, "%s is %.0f (%.0f)", series, want, got);
}

static void check_fresh(const struct rmemd *d)
{
	struct http_reply r;
	int rc = http(d, "GET", "/metrics", &r);
	double start;

	ok(rc == 0 && r.status == 200, "GET /metrics: 200 (%d, %d)", rc, r.status);
	if (rc < 0)
		return;
	ok(has_header(&r, "Content-Type: text/plain; version=0.0.4"),
	   "Content-Type is the text format 0.0.4");
	ok(promtool_check(r.body) == 0, "promtool check metrics passes on a fresh daemon's page");
	expect(r.body, "rmem_pool_bytes{pool=\"default\"}", POOL);
	expect(r.body, "rmem_largest_free_bytes{pool=\"default\"}", POOL);
	expect(r.body, "rmem_used_bytes{pool=\"default\"}", 0);
	expect(r.body, "rmem_allocs_total", 0);
	expect(r.body, "rmem_clients", 0);
	expect(r.body, "rmem_restarts_restored_total", 0);
	expect(r.body, "rmem_request_duration_seconds_count{op=\"alloc\"}", 0);
	ok(strstr(r.body, "\nrmem_build_info{version=\"") != NULL, "rmem_build_info is there");
	start = metrics_sample(r.body, "process_start_time_seconds");
	ok(start > 0 && (double)time(NULL) - start > -5 && (double)time(NULL) - start < 600,
	   "process_start_time_seconds is the daemon's start (%.2f)", start);
	free(r.text);
}

static void check_http_errors(const struct rmemd *d)
{
	struct http_reply r;
	int rc;

	rc = http(d, "GET", "/nothing", &r);
	ok(rc == 0 && r.status == 404, "GET /nothing: 404 (%d, %d)", rc, r.status);
	free(r.text);
	rc = http(d, "GET", "/", &r);
	ok(rc == 0 && r.status == 404, "GET /: 404 (%d, %d)", rc, r.status);
	free(r.text);
	rc = http(d, "POST", "/metrics", &r);
	ok(rc == 0 && r.status == 405 && has_header(&r, "Allow: GET, HEAD"),
	   "POST /metrics: 405 with Allow: GET, HEAD (%d, %d)", rc, r.status);
	free(r.text);
	rc = http(d, "DELETE", "/metrics", &r);
	ok(rc == 0 && r.status == 405, "DELETE /metrics: 405 (%d, %d)", rc, r.status);
	free(r.text);
	rc = http(d, "HEAD", "/metrics", &r);
	ok(rc == 0 && r.status == 200 && r.body && !*r.body, "HEAD /metrics: 200, no body (%d, %d)",
	   rc, r.status);
	free(r.text);
	rc = http(d, "GET", "/metrics?x=1", &r);
	ok(rc == 0 && r.status == 200, "GET /metrics?x=1: 200 (a query changes nothing) (%d, %d)",
	   rc, r.status);
	free(r.text);
}

/* ---- what the test does ---------------------------------------------------------- */

struct did {
	bool tenant_on_rdma;
	int unix_fd;      /* the raw session left to expire */
};

static void anonymous_unix(rmem_client *u)
{
	struct rmem_region r, n, big;
	uint8_t buf[3000];
	int rc;

	fill_random(buf, sizeof buf, 7);
	rc = rmem_alloc(u, 4096, 0, &r);
	ok(rc == 0, "unix: ALLOC 4096 (%d)", rc);
	rc = rmem_alloc(u, 1ull << 40, 0, &big);
	ok(rc == -ENOMEM, "unix: ALLOC 1 TiB fails with ENOMEM (%d)", rc);
	ok(rmem_write(u, &r, 0, buf, 1000) == 0, "unix: WRITE 1000 bytes");
	ok(rmem_read(u, &r, 0, buf, 3000) == 0, "unix: READ 3000 bytes");
	rc = rmem_create(u, "metrics/one", 8192, 0, &n);
	ok(rc == 0, "unix: CREATE metrics/one, 8192 bytes (%d)", rc);
	ok(rmem_free(u, &r) == 0, "unix: FREE the 4096 bytes");
}

static void tenant_tcp(rmem_client *t, struct did *did)
{
	struct rmem_region r, over;
	uint8_t buf[2000];
	int rc;

	fill_random(buf, sizeof buf, 8);
	did->tenant_on_rdma = client_on_rdma(t);
	rc = rmem_alloc(t, 512 * KiB, 0, &r);
	ok(rc == 0, "tenant: ALLOC 512 KiB (%d)", rc);
	rc = rmem_alloc(t, 768 * KiB, 0, &over);
	ok(rc == -EDQUOT, "tenant: ALLOC 768 KiB more fails with EDQUOT (%d)", rc);
	ok(rmem_write(t, &r, 0, buf, 2000) == 0, "tenant: WRITE 2000 bytes");
	ok(rmem_read(t, &r, 0, buf, 500) == 0, "tenant: READ 500 bytes");
}

static void refused_clients(const struct rmemd *d)
{
	rmem_client *c = NULL;
	int rc;

	rc = client_connect_as(d, "nosuch", key_path, &c);
	ok(rc == -EACCES, "an unknown tenant is refused (%d)", rc);
	rmem_close(c);
	c = NULL;
	rc = client_connect_as(d, "mt", wrong_path, &c);
	ok(rc == -EACCES, "a wrong secret is refused (%d)", rc);
	rmem_close(c);
	c = NULL;
	rc = rmem_connect(d->tcp_ep, NULL, &c);
	ok(rc == -EACCES, "an anonymous network client is refused (%d)", rc);
	rmem_close(c);
}

/* Scrapes until series reaches want (WAIT_MS at most); the last page. */
static char *scrape_until(const struct rmemd *d, const char *series, double want)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct http_reply r;

	for (;;) {
		if (http(d, "GET", "/metrics", &r) == 0 && r.status == 200) {
			if (metrics_sample(r.body, series) == want || now_ms() >= deadline)
				return r.text;
		} else if (now_ms() >= deadline) {
			free(r.text);
			return NULL;
		}
		free(r.text);
		sleep_ms(100);
	}
}

static void check_after(const struct rmemd *d, const struct did *did)
{
	char *text = scrape_until(d, "rmem_lease_expiries_total", 1);
	const char *p;
	uint64_t tcp_w = did->tenant_on_rdma ? 0 : 2000, tcp_r = did->tenant_on_rdma ? 0 : 500;

	ok(text != NULL, "GET /metrics after the run");
	if (!text)
		return;
	p = strstr(text, "\r\n\r\n") + 4;
	ok(promtool_check(p) == 0, "promtool check metrics passes after the run");
	expect(p, "rmem_allocs_total", 3);
	expect(p, "rmem_frees_total", 1);
	expect(p, "rmem_alloc_failures_total{errno=\"ENOMEM\"}", 1);
	expect(p, "rmem_alloc_failures_total{errno=\"EDQUOT\"}", 1);
	expect(p, "rmem_alloc_failures_total{errno=\"EINVAL\"}", 0);
	expect(p, "rmem_alloc_failures_total{errno=\"other\"}", 0);
	expect(p, "rmem_stream_bytes_total{op=\"write\",transport=\"unix\"}", 1000);
	expect(p, "rmem_stream_bytes_total{op=\"read\",transport=\"unix\"}", 3000);
	expect(p, "rmem_stream_bytes_total{op=\"write\",transport=\"tcp\"}", (double)tcp_w);
	expect(p, "rmem_stream_bytes_total{op=\"read\",transport=\"tcp\"}", (double)tcp_r);
	expect(p, "rmem_rdma_attaches_total", did->tenant_on_rdma ? 1 : 0);
	expect(p, "rmem_regions", 2);
	expect(p, "rmem_named_regions", 1);
	expect(p, "rmem_named_handles", 1);
	expect(p, "rmem_clients", 2);
	expect(p, "rmem_used_bytes{pool=\"default\"}", 8192 + 512 * KiB);
	expect(p, "rmem_pool_regions{pool=\"default\"}", 2);
	expect(p, "rmem_quarantine_bytes", 0);
	expect(p, "rmem_tenant_used_bytes{tenant=\"mt\"}", 512 * KiB);
	expect(p, "rmem_tenant_regions{tenant=\"mt\"}", 1);
	expect(p, "rmem_tenant_quota_bytes{tenant=\"mt\"}", QUOTA);
	expect(p, "rmem_tenant_max_regions{tenant=\"mt\"}", 10);
	expect(p, "rmem_auth_failures_total{reason=\"unknown_tenant\"}", 1);
	expect(p, "rmem_auth_failures_total{reason=\"wrong_mac\"}", 1);
	expect(p, "rmem_auth_failures_total{reason=\"anonymous\"}", 1);
	expect(p, "rmem_lease_expiries_total", 1);
	expect(p, "rmem_frame_timeouts_total", 0);
	expect(p, "rmem_restarts_restored_total", 0);
	/* Every request of these kinds, the failed ones included. */
	expect(p, "rmem_request_duration_seconds_count{op=\"alloc\"}", 4);
	expect(p, "rmem_request_duration_seconds_bucket{op=\"alloc\",le=\"+Inf\"}", 4);
	expect(p, "rmem_request_duration_seconds_count{op=\"create\"}", 1);
	expect(p, "rmem_request_duration_seconds_count{op=\"free\"}", 1);
	expect(p, "rmem_request_duration_seconds_count{op=\"write\"}", tcp_w ? 2 : 1);
	expect(p, "rmem_request_duration_seconds_count{op=\"read\"}", tcp_r ? 2 : 1);
	ok(metrics_sample(p, "rmem_request_duration_seconds_sum{op=\"alloc\"}") > 0,
	   "the ALLOCs took some time");
	free(text);
}

int main(void)
{
	struct rmemd d;
	struct rmemd_opts o;
	struct did did = { .unix_fd = -1 };
	rmem_client *u = NULL, *t = NULL;
	char extra[512];
	int rc;

	if (harness_keys_make(dir, keys, NKEYS) < 0)
		return ok(0, "cannot write the key files in %s", dir), tap_done();
	snprintf(page_path, sizeof page_path, "%s/page.txt", dir);
	snprintf(extra, sizeof extra,
		 "tenants = ( { name = \"mt\"; secret_file = \"%s\"; quota = \"1M\"; "
		 "max_regions = 10; } );\n"
		 "limits = { max_clients = 64; lease_timeout_ms = %d; };", key_path, LEASE_MS);
	/* promtool is part of the test: install-deps installs it. */
	ok(have_promtool(), "promtool is installed (Debian's prometheus, scripts/install-deps)");
	rc = harness_opts(&o, "64M", extra);
	o.metrics = true;
	rc = rc < 0 ? rc : rmemd_start_opts(&d, &o);
	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	if (!ok(rc == 0, "rmemd starts with listen.metrics on port %u (%d)", d.metrics_port, rc))
		return tap_done();

	check_fresh(&d);
	check_http_errors(&d);

	rc = rmem_connect(d.unix_ep, NULL, &u);
	ok(rc == 0, "an anonymous client on the Unix socket (%d)", rc);
	rc = client_connect_as(&d, "mt", key_path, &t);
	ok(rc == 0, "tenant mt's client over %s (%d)", harness_transport(), rc);
	if (u)
		anonymous_unix(u);
	if (t)
		tenant_tcp(t, &did);
	refused_clients(&d);
	did.unix_fd = raw_session(&d, true);
	ok(did.unix_fd >= 0, "a raw session on the Unix socket, then silence (%d)", did.unix_fd);

	check_after(&d, &did);

	close_fd(did.unix_fd);
	rmem_close(t);
	rmem_close(u);
	unlink(page_path);
	harness_keys_remove(dir, keys, NKEYS);
	return harness_finish(&d);
}
