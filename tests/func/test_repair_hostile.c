/*
 * test_repair_hostile.c - rmemd's repair agent against a tenant's names and
 * a forger in etcd (issue 30, items 4 and 6): a real 3-member etcd and four
 * rmemd (s0..s3, tenants "ml" and "web", cluster.repair_grace_ms 1000) that
 * tests/func/test_repair_hostile.sh starts; this program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_TENANT_DIR    the tenants' secrets, DIR/<tenant>.key
 *   RMEM_CLUSTER_HOOK  the script's hook: endpoint I, mark, passes N SECONDS
 *                      (every member's agent looked at its pieces N times
 *                      since the mark), pieces-held NAME, save NAME, restore
 *                      NAME, del NAME, forge NAME HOW (each on ml's record
 *                      of NAME, as a raw etcdctl would)
 *
 * Checks.
 * 1. Item 4: ml's ordinary regions "backup~2.1" (a cluster name, whose
 *    record is a plain one) and "direct~1.0" (made on s0 directly: no
 *    record) bear pieces' names; after several give-back passes of every
 *    agent both are there with their bytes.
 * 2. Item 6: four redundant 2+1 regions of ml (3 pieces each, closed),
 *    one per attack.  The attacker (anyone who can write etcd: web's
 *    client, etcdctl) deletes v-del's record; forges v-newer's with every
 *    piece one layout newer; v-short's as a 1+1 (its third piece beyond
 *    the record); v-decoy's naming, at each index, a newer piece on
 *    another server where web made a region of that very name in its own
 *    namespace.  After each, two passes of every agent later, the 3 pieces
 *    are still held, and once the saved record is put back, every byte
 *    reads from a fresh client of ml.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmem.h>

#include "tap.h"

#define KiB 1024ull

static const char *base_url, *hook, *keys;

static rmem_client *connect_as(const char *url, const char *tenant, int *rc)
{
	char key[512];
	struct rmem_opts o;
	rmem_client *c = NULL;

	snprintf(key, sizeof key, "%s/%s.key", keys, tenant);
	rmem_opts_init(&o, sizeof o);
	o.tenant = tenant;
	o.secret_file = key;
	o.resume_ms = 300;
	o.timeout_ms = 5000;
	o.transport = "tcp";
	*rc = rmem_connect(url, &o, &c);
	if (*rc)
		diag("connect %s as %s: %s", url, tenant, rmem_strerror(*rc));
	return c;
}

static int run_hook(const char *what)
{
	char cmd[512];

	snprintf(cmd, sizeof cmd, "%s %s", hook, what);
	return system(cmd);
}

/* The hook's one line of output into out; 0 or -1. */
static int hook_line(const char *what, char *out, size_t len)
{
	char cmd[512];
	FILE *f;
	int rc = -1;

	snprintf(cmd, sizeof cmd, "%s %s", hook, what);
	if (!(f = popen(cmd, "r")))
		return -1;
	if (fgets(out, (int)len, f)) {
		out[strcspn(out, "\n")] = '\0';
		rc = 0;
	}
	if (pclose(f) != 0)
		rc = -1;
	return rc;
}

static void pattern(unsigned char *b, uint64_t len, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);

	for (uint64_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

/* A named region made in c, filled with b and closed. */
static bool make_named(rmem_client *c, const char *name, const unsigned char *b, uint64_t len)
{
	struct rmem_region r;
	int rc = rmem_create(c, name, len, 0, &r);

	if (rc) {
		diag("create %s: %s", name, rmem_strerror(rc));
		return false;
	}
	rc = rmem_write(c, &r, 0, b, len);
	if (rc)
		diag("write %s: %s", name, rmem_strerror(rc));
	rmem_free(c, &r);
	return rc == 0;
}

/* Opened read-only in c, every byte checked, closed. */
static bool named_reads(rmem_client *c, const char *name, const unsigned char *b, uint64_t len)
{
	unsigned char *got = malloc(len);
	struct rmem_region r;
	int rc = got ? rmem_open(c, name, RMEM_READ, &r) : -ENOMEM;
	bool same = false;

	if (rc) {
		diag("open %s: %s", name, rmem_strerror(rc));
		free(got);
		return false;
	}
	rc = rmem_read(c, &r, 0, got, len);
	same = rc == 0 && !memcmp(got, b, len);
	if (!same)
		diag("read %s: %s", name, rc ? rmem_strerror(rc) : "wrong bytes");
	rmem_free(c, &r);
	free(got);
	return same;
}

/* Every member's agent looked at its pieces twice since the mark. */
static bool two_passes(void)
{
	return run_hook("passes 2 30") == 0;
}

static int held(const char *name)
{
	char what[128], line[32];

	snprintf(what, sizeof what, "pieces-held %s", name);
	return hook_line(what, line, sizeof line) ? -1 : atoi(line);
}

/* ---- item 4: ordinary regions with pieces' names ------------------------------------- */

#define PLAIN (64 * KiB)

static void lookalikes(void)
{
	static unsigned char a[PLAIN], b[PLAIN];
	char ep[256];
	rmem_client *c, *d = NULL;
	int rc;

	pattern(a, PLAIN, 1);
	pattern(b, PLAIN, 2);
	c = connect_as(base_url, "ml", &rc);
	ok(c && make_named(c, "backup~2.1", a, PLAIN),
	   "ml makes \"backup~2.1\", an ordinary cluster name, and fills it");
	if (hook_line("endpoint 0", ep, sizeof ep) == 0)
		d = connect_as(ep, "ml", &rc);
	ok(d && make_named(d, "direct~1.0", b, PLAIN),
	   "ml makes \"direct~1.0\" on s0 directly (no record in etcd), and fills it");
	ok(run_hook("mark") == 0 && two_passes(), "every member's agent looked at its pieces twice");
	ok(c && named_reads(c, "backup~2.1", a, PLAIN),
	   "\"backup~2.1\" is still there with its bytes: no agent took it for a piece");
	ok(d && named_reads(d, "direct~1.0", b, PLAIN),
	   "\"direct~1.0\" is still there with its bytes");
	if (c) {
		ok(rmem_unlink(c, "backup~2.1") == 0, "ml unlinks \"backup~2.1\"");
		rmem_close(c);
	}
	if (d) {
		ok(rmem_unlink(d, "direct~1.0") == 0, "ml unlinks \"direct~1.0\"");
		rmem_close(d);
	}
}

/* ---- item 6: a forger in etcd -------------------------------------------------------- */

#define VAULT (256 * KiB + 1234)

/* web's own regions named as name's pieces would be one layout on, on
 * every server: a forged record may name them. */
static bool decoys(const char *name)
{
	char ep[256], pname[64], what[32];
	bool all = true;

	for (int s = 0; s < 4; s++) {
		rmem_client *w;
		int rc;

		snprintf(what, sizeof what, "endpoint %d", s);
		if (hook_line(what, ep, sizeof ep) || !(w = connect_as(ep, "web", &rc)))
			return false;
		for (int i = 0; i < 3; i++) {
			struct rmem_region r;

			snprintf(pname, sizeof pname, "%s~9.%d", name, i);
			rc = rmem_create(w, pname, 128 * KiB, 0, &r);
			all = all && rc == 0;
			if (rc == 0)
				rmem_free(w, &r);
		}
		rmem_close(w);
	}
	return all;
}

/* One attack on its own region: ml makes name (2+1); the attacker changes
 * its record as how says; passes; the record put back; every byte read
 * from a fresh client; name unlinked. */
static void attack(const char *name, const char *how, const char *what, unsigned seed)
{
	static unsigned char v[VAULT];
	char cmd[128], url[1024], line[32];
	rmem_client *c;
	int rc, n;

	pattern(v, VAULT, seed);
	snprintf(url, sizeof url, "%s?redundancy=2+1", base_url);
	c = connect_as(url, "ml", &rc);
	ok(c && make_named(c, name, v, VAULT), "%s: ml makes it, 2+1, fills and closes it", name);
	if (c)
		rmem_close(c);
	snprintf(cmd, sizeof cmd, "save %s", name);
	ok(held(name) == 3 && run_hook(cmd) == 0, "%s: its 3 pieces are held; its record saved",
	   name);
	snprintf(cmd, sizeof cmd, "pieces-marked %s", name);
	ok(hook_line(cmd, line, sizeof line) == 0 && atoi(line) == 3,
	   "%s: rmemctl names lists the 3 as pieces (%s)", name, line);
	if (!strcmp(how, "decoy"))
		ok(decoys(name), "%s: web makes \"%s~9.0\" .. \"%s~9.2\" in its own namespace on "
		   "every server", name, name, name);
	if (!strcmp(how, "del"))
		snprintf(cmd, sizeof cmd, "del %s", name);
	else
		snprintf(cmd, sizeof cmd, "forge %s %s", name, how);
	ok(run_hook("mark") == 0 && run_hook(cmd) == 0, "%s: the attacker %s", name, what);
	ok(two_passes(), "%s: every member's agent looked at its pieces twice since", name);
	n = held(name);
	ok(n == 3, "%s: its 3 pieces are still held (%d)", name, n);
	snprintf(cmd, sizeof cmd, "restore %s", name);
	ok(run_hook(cmd) == 0, "%s: its saved record is put back", name);
	c = connect_as(base_url, "ml", &rc);
	ok(c && named_reads(c, name, v, VAULT), "%s: every byte reads from a fresh client of ml",
	   name);
	ok(c && rmem_unlink(c, name) == 0 && held(name) == 0, "%s: ml unlinks it: its pieces go",
	   name);
	if (c)
		rmem_close(c);
}

static void forger(void)
{
	attack("v-del", "del", "deletes its record (etcdctl del)", 3);
	attack("v-newer", "newer", "forges its record: every piece one layout newer, same servers",
	       4);
	attack("v-short", "1+1", "forges its record as 1+1: its third piece beyond the record", 5);
	attack("v-decoy", "decoy", "forges its record naming, at each index, web's region of that "
	       "piece's name on another server", 6);
}

int main(void)
{
	base_url = getenv("RMEM_CLUSTER_URL");
	hook = getenv("RMEM_CLUSTER_HOOK");
	keys = getenv("RMEM_TENANT_DIR");
	if (!base_url || !hook || !keys)
		tap_skip_all("run by tests/func/test_repair_hostile.sh");
	lookalikes();
	forger();
	return tap_done();
}
