/*
 * test_cluster_tenants.c - librmem's etcd:// cluster client as a tenant,
 * against a real 3-member etcd and two rmemd with tenants "ml" (quota
 * 8 MiB on each server) and "web", which tests/func/test_cluster_tenants.sh
 * starts; this program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_TENANT_DIR    holds ml.key, web.key (the servers' secrets) and
 *                      bad.key (a wrong one), each mode 0600
 *
 * Checks: a tenant's cluster client allocates, writes and reads; a wrong secret and an anonymous TCP client are refused with
 * -EACCES on every server and hold nothing; the quota is each server's:
 * two 6 MiB regions land on the two servers and a third is -EDQUOT, both
 * through rmem_alloc and through posted allocs (one refused for the quota
 * moves on to the other server from inside rmem_poll); another tenant
 * holding ml's region can neither read nor write it; names live in each
 * tenant's own namespace across the cluster (web cannot open ml's name,
 * makes its own under the same name, and each reads its own bytes).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmem.h>

#include "harness.h"
#include "tap.h"

#define MiB (1ull << 20)
#define NSRV 2

static const char *url;
static char key_ml[512], key_web[512], key_bad[512];

static int connect_as(const char *tenant, const char *key, rmem_client **out)
{
	struct rmem_opts o;

	rmem_opts_init(&o, sizeof o);
	o.transport = "tcp";
	o.timeout_ms = 5000;
	o.resume_ms = 0;
	o.tenant = tenant;
	o.secret_file = key;
	*out = NULL;
	return rmem_connect(url, &o, out);
}

static uint32_t slot_of(const struct rmem_region *r)
{
	return (uint32_t)r->reserved[0];
}

/* 0 when a write of the seed's pattern to r reads back whole, 1 when it
 * does not, or the error. */
static int roundtrip(rmem_client *c, const struct rmem_region *r, size_t len, uint64_t seed)
{
	int rc = region_fill(c, r, len, seed);

	return rc ? rc : region_check(c, r, len, seed);
}

/* (Which servers small regions land on is test_cluster_lib's matter; the
 * quota checks below need both.) */
static void test_basic(rmem_client *ml)
{
	struct rmem_region r[4];
	int rc = 0, n = 0;

	for (; n < 4 && rc == 0; n++) {
		rc = rmem_alloc(ml, 1 * MiB, 0, &r[n]);
		if (!rc)
			rc = roundtrip(ml, &r[n], 1 * MiB, (uint64_t)n + 1);
		else
			n--;
	}
	ok(rc == 0, "tenant ml's cluster client allocates, writes and reads 4 x 1 MiB (%d: %s)",
	   rc, rmem_strerror(rc));
	for (int i = 0; i < n; i++)
		rmem_free(ml, &r[i]);
}

static void test_refused(void)
{
	const char *what[] = { "a wrong secret", "an unknown tenant", "an anonymous TCP client" };
	const char *tenant[] = { "ml", "nobody", NULL };
	const char *key[] = { key_bad, key_bad, NULL };

	for (int i = 0; i < 3; i++) {
		rmem_client *c = NULL;
		struct rmem_region r;
		int rc = connect_as(tenant[i], key[i], &c);

		/* The cluster client reaches its servers when it first needs
		 * one: the refusal comes from there, for each of them. */
		if (rc == 0) {
			rc = rmem_alloc(c, 1 * MiB, 0, &r);
			if (rc == 0)
				rmem_free(c, &r);
		}
		ok(rc == -EACCES, "%s is refused with -EACCES (%d: %s)", what[i], rc,
		   rmem_strerror(rc));
		rmem_close(c);
	}
}

/* The quota (8 MiB on each server): two 6 MiB regions fit, on the two
 * servers; a third does not fit anywhere. */
static void test_quota(rmem_client *ml)
{
	struct rmem_region r[3];
	int rc0, rc1, rc2;

	rc0 = rmem_alloc(ml, 6 * MiB, 0, &r[0]);
	rc1 = rmem_alloc(ml, 6 * MiB, 0, &r[1]);
	ok(rc0 == 0 && rc1 == 0 && slot_of(&r[0]) != slot_of(&r[1]),
	   "rmem_alloc: two 6 MiB regions under an 8 MiB quota per server, one on each (%d %d)",
	   rc0, rc1);
	rc2 = rmem_alloc(ml, 6 * MiB, 0, &r[2]);
	ok(rc2 == -EDQUOT, "rmem_alloc: a third is -EDQUOT (%d: %s)", rc2, rmem_strerror(rc2));
	if (rc2 == 0)
		rmem_free(ml, &r[2]);
	if (rc1 == 0)
		rmem_free(ml, &r[1]);
	if (rc0 == 0)
		rmem_free(ml, &r[0]);
}

/* The same through posted allocs, three at once: whichever server the
 * first two are sent to, a refusal for the quota sends one on. */
static void test_quota_posted(rmem_client *ml)
{
	struct rmem_region r[3];
	struct rmem_completion comp[8];
	int st[3] = { 1, 1, 1 }, got = 0, rc = 0, done0 = 0, refused = 0;

	for (int i = 0; i < 3 && rc == 0; i++)
		rc = rmem_post_alloc(ml, 6 * MiB, 0, &r[i], (uint64_t)i);
	while (rc == 0 && got < 3) {
		int n = rmem_poll(ml, comp, 8, 5000);

		if (n <= 0) {
			rc = n ? n : -ETIMEDOUT;
			break;
		}
		for (int k = 0; k < n; k++)
			if (comp[k].cookie < 3)
				st[comp[k].cookie] = comp[k].status;
		got += n;
	}
	for (int i = 0; i < 3; i++) {
		done0 += st[i] == 0;
		refused += st[i] == -EDQUOT;
	}
	ok(rc == 0 && done0 == 2 && refused == 1,
	   "posted: 3 x 6 MiB end with 2 regions and 1 -EDQUOT (%d; %d %d %d)", rc, st[0], st[1],
	   st[2]);
	{
		int a = -1, b = -1;

		for (int i = 0; i < 3; i++)
			if (st[i] == 0 && a < 0)
				a = i;
			else if (st[i] == 0)
				b = i;
		ok(a >= 0 && b >= 0 && slot_of(&r[a]) != slot_of(&r[b]),
		   "posted: the two regions are on different servers");
	}
	for (int i = 0; i < 3; i++)
		if (st[i] == 0)
			rmem_free(ml, &r[i]);
}

static void test_foreign(rmem_client *ml, rmem_client *web)
{
	struct rmem_region r;
	uint8_t buf[4096] = { 0 };
	int rc, rr, rw;

	rc = rmem_alloc(ml, 1 * MiB, 0, &r);
	if (!rc)
		rc = roundtrip(ml, &r, 1 * MiB, 77);
	ok(rc == 0, "ml writes a region (%d)", rc);
	if (rc)
		return;
	rr = rmem_read(web, &r, 0, buf, sizeof buf);
	rw = rmem_write(web, &r, 0, buf, sizeof buf);
	ok((rr == -EACCES || rr == -ENOENT) && (rw == -EACCES || rw == -ENOENT),
	   "web holding ml's region can neither read nor write it (%d %d)", rr, rw);
	ok(region_check(ml, &r, 1 * MiB, 77) == 0, "ml's bytes are as ml wrote them");
	rmem_free(ml, &r);
}

static void test_names(rmem_client *ml, rmem_client *web)
{
	rmem_client *ml2 = NULL;
	struct rmem_region a, w, h;
	int rc;

	rc = rmem_create(ml, "team/shared", 1 * MiB, 0, &a);
	if (!rc)
		rc = roundtrip(ml, &a, 1 * MiB, 5);
	ok(rc == 0, "ml creates and writes the name team/shared (%d: %s)", rc, rmem_strerror(rc));
	rc = rmem_open(web, "team/shared", RMEM_READ, &h);
	ok(rc == -ENOENT, "web cannot open ml's name: -ENOENT (%d)", rc);
	if (rc == 0)
		rmem_free(web, &h);
	rc = rmem_create(web, "team/shared", 1 * MiB, 0, &w);
	if (!rc)
		rc = roundtrip(web, &w, 1 * MiB, 9);
	ok(rc == 0, "web creates its own team/shared (%d: %s)", rc, rmem_strerror(rc));
	rc = connect_as("ml", key_ml, &ml2);
	if (!rc)
		rc = rmem_open(ml2, "team/shared", RMEM_READ, &h);
	ok(rc == 0 && region_check(ml2, &h, 1 * MiB, 5) == 0,
	   "another client of ml opens team/shared and reads ml's bytes (%d)", rc);
	if (rc == 0)
		rmem_free(ml2, &h);
	rmem_close(ml2);
	rc = rmem_unlink(ml, "team/shared");
	ok(rc == 0, "ml unlinks its name (%d)", rc);
	ok(rmem_open(web, "team/shared", RMEM_READ, &h) == 0 && region_check(web, &h, 1 * MiB, 9) == 0,
	   "web's team/shared is still there, with web's bytes");
	rmem_free(web, &h);
	rmem_free(ml, &a);
	rmem_free(web, &w);
	ok(rmem_unlink(web, "team/shared") == 0, "web unlinks its own");
}

int main(void)
{
	const char *dir = getenv("RMEM_TENANT_DIR");
	rmem_client *ml = NULL, *web = NULL;
	int rc;

	url = getenv("RMEM_CLUSTER_URL");
	if (!url || !dir)
		tap_skip_all("run by tests/func/test_cluster_tenants.sh");
	snprintf(key_ml, sizeof key_ml, "%s/ml.key", dir);
	snprintf(key_web, sizeof key_web, "%s/web.key", dir);
	snprintf(key_bad, sizeof key_bad, "%s/bad.key", dir);

	rc = connect_as("ml", key_ml, &ml);
	ok(rc == 0, "rmem_connect(%s) as tenant ml (%d: %s)", url, rc, rmem_strerror(rc));
	if (!rc)
		rc = connect_as("web", key_web, &web);
	ok(rc == 0, "and as tenant web (%d)", rc);
	if (rc)
		return tap_done();
	test_basic(ml);
	test_refused();
	test_quota(ml);
	test_quota_posted(ml);
	test_foreign(ml, web);
	test_names(ml, web);
	rmem_close(web);
	rmem_close(ml);
	return tap_done();
}
