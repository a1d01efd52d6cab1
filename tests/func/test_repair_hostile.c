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

#include "redund_prog.h"
#include "tap.h"

#define KiB 1024ull

static const char *base_url, *keys;

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

/* Every member's agent looked at its pieces twice since the mark. */
static bool two_passes(void)
{
	return run_hook("passes 2 30") == 0;
}

static int held(const char *name)
{
	char line[32];

	return hook_line(line, sizeof line, "pieces-held %s", name) ? -1 : atoi(line);
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
	if (hook_line(ep, sizeof ep, "endpoint 0") == 0)
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
	char ep[256], pname[64];
	bool all = true;

	for (int s = 0; s < 4; s++) {
		rmem_client *w;
		int rc;

		if (hook_line(ep, sizeof ep, "endpoint %d", s) || !(w = connect_as(ep, "web", &rc)))
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
	char url[1024], line[32];
	rmem_client *c;
	int rc, n;

	pattern(v, VAULT, seed);
	snprintf(url, sizeof url, "%s?redundancy=2+1", base_url);
	c = connect_as(url, "ml", &rc);
	ok(c && make_named(c, name, v, VAULT), "%s: ml makes it, 2+1, fills and closes it", name);
	if (c)
		rmem_close(c);
	ok(held(name) == 3 && run_hook("save %s", name) == 0,
	   "%s: its 3 pieces are held; its record saved", name);
	ok(hook_line(line, sizeof line, "pieces-marked %s", name) == 0 && atoi(line) == 3,
	   "%s: rmemctl names lists the 3 as pieces (%s)", name, line);
	if (!strcmp(how, "decoy"))
		ok(decoys(name), "%s: web makes \"%s~9.0\" .. \"%s~9.2\" in its own namespace on "
		   "every server", name, name, name);
	rc = run_hook("mark");
	if (rc == 0 && !strcmp(how, "del"))
		rc = run_hook("del %s", name);
	else if (rc == 0)
		rc = run_hook("forge %s %s", name, how);
	ok(rc == 0, "%s: the attacker %s", name, what);
	ok(two_passes(), "%s: every member's agent looked at its pieces twice since", name);
	n = held(name);
	ok(n == 3, "%s: its 3 pieces are still held (%d)", name, n);
	ok(run_hook("restore %s", name) == 0, "%s: its saved record is put back", name);
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
	base_url = redund_env("run by tests/func/test_repair_hostile.sh");
	keys = getenv("RMEM_TENANT_DIR");
	if (!keys)
		tap_skip_all("run by tests/func/test_repair_hostile.sh");
	lookalikes();
	forger();
	return tap_done();
}
