/*
 * test_repair.c - repair of redundant regions (issue 21): lost pieces
 * rebuilt on other servers, by rmemd's repair agent (named regions nobody
 * writes) and by rmem_repair (a writer's own), against a real 3-member etcd
 * and eight rmemd (s0..s7, cluster.repair_grace_ms 1500, lease_ms 1000)
 * that tests/func/test_repair.sh starts; this program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_CLUSTER_HOOK  the script's hook: kill I, fresh I, start I, leader, pieces
 *                      NAME, healthy NAME [SECONDS], wait-log I TEXT and
 *                      wait-repairing I NAME (then kill -9 of sI),
 *                      pieces-held NAME [N SECONDS], state
 *                      NAME STATE (rmemctl cluster redundant says so)
 *
 * Checks, in two acts.
 * 1. A repairing member dies mid-repair: a 4+2 region of 48 MiB, named and
 *    closed; a server holding a piece dies; the repair leader starts
 *    rebuilding and is killed -9 as soon as its log says so: the record is
 *    still degraded then (rmemctl: repairing), a new leader finishes (healthy, on live
 *    servers), the dead leader's half-made piece is gone (six pieces held,
 *    no orphan), every byte reads from a fresh client.
 * 2. The issue's: both dead servers come back empty (new generations);
 *    named regions (closed), a named region held open by its writer and an
 *    anonymous one, all 4+2 and filled with patterns; two servers holding
 *    pieces die: every byte reads from the same client and a fresh one,
 *    writes go on; rmem_repair refuses what it must (-EACCES read-only,
 *    -EINVAL a plain region or a freed handle) and repairs the writer's
 *    regions; the agent repairs the closed ones (records healthy on live
 *    servers); one of the dead comes back with its memory and gives back the
 *    pieces a repair replaced; two more servers holding pieces die: every
 *    byte still reads,
 *    from the same client, a fresh one, and a reader that held a name open
 *    throughout (it follows the repaired pieces).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rmem.h>

#include "redund_prog.h"
#include "tap.h"

#define KiB 1024ull
#define MiB (1ull << 20)
/* A dead server is noticed after resume_ms: short, so the test is. */
#define RESUME_MS 300

static const char *base_url;
static char url42[1024];

static int leader(void)
{
	char line[64];

	return hook_line(line, sizeof line, "leader") ? -1 : atoi(line);
}

static bool in(const int *v, int n, int x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* ---- act 1: the repairing member dies ------------------------------------------------ */

#define BIG (48 * MiB)

static void act_crash(rmem_client *c, int *dead)
{
	unsigned char *big = malloc(BIG);
	int srv[20], n, lead, victim = -1, newlead, rc;
	rmem_client *d;

	if (!big)
		exit(1);
	pattern(big, BIG, 7);
	ok(make_named(c, "big", big, BIG), "a 4+2 region of 48 MiB, named, filled, closed");
	n = pieces_of("big", srv, 20);
	lead = leader();
	ok(n == 6 && lead >= 0, "its record has 6 pieces; s%d leads repair", lead);
	for (int i = 0; i < n && victim < 0; i++)
		if (srv[i] != lead)
			victim = srv[i];
	ok(run_hook("kill %d", victim) == 0, "s%d, holding a piece, killed -9", victim);
	/* Killed once its repair's key is in etcd: the log line comes before
	 * the key, and a kill between the two leaves nothing "repairing". */
	ok(run_hook("wait-repairing %d big", lead) == 0,
	   "the leader s%d began rebuilding after the grace, and was killed -9", lead);
	ok(run_hook("healthy big") != 0, "the record is still degraded: the repair was cut");
	ok(run_hook("state big repairing") == 0,
	   "rmemctl cluster redundant shows it repairing (the dead repairer's key lives out "
	   "its lease)");
	ok(run_hook("healthy big 60") == 0,
	   "a new leader finished it: every piece healthy on a live server");
	ok(run_hook("state big healthy") == 0, "rmemctl cluster redundant shows it healthy");
	newlead = leader();
	ok(newlead >= 0 && newlead != lead && newlead != victim, "the new leader is s%d", newlead);
	{
		char line[32];

		ok(hook_line(line, sizeof line, "pieces-held big") == 0 && atoi(line) == 6,
		   "6 pieces of it on the live servers: the cut repair's piece was given back (%s)",
		   line);
	}
	d = connect_url(url42, RESUME_MS, 5000, &rc);
	ok(d && named_reads(d, "big", big, BIG), "every byte of it reads from a fresh client");
	if (d)
		rmem_close(d);
	dead[0] = victim;
	dead[1] = lead;
	free(big);
}

/* ---- act 2: two deaths, repair, two more -------------------------------------------- */

static const uint64_t nsize[2] = { 1 * MiB + 12345, 100 * KiB };
static const char *const nname[2] = { "n1", "n2" };

static void act_issue(rmem_client *c, const int *dead)
{
	unsigned char *nb[2], *wb, *ab;
	struct rmem_region wr, ar, ro, plain, held, aw;
	const uint64_t wlen = 2 * MiB + 77, alen = 3 * MiB;
	int srv[20], first[20], awsrv[20], n, nfirst, naw, kills[4], nk = 0, rc, lead;
	char url_auto[1100];
	unsigned char *awb;
	rmem_client *c3;
	rmem_client *d, *pc, *h;

	for (int i = 0; i < 2; i++) {
		ok(run_hook("fresh %d", dead[i]) == 0, "s%d is back, empty (a new generation)",
		   dead[i]);
	}
	for (int i = 0; i < 2; i++) {
		nb[i] = malloc(nsize[i]);
		pattern(nb[i], nsize[i], 10 + (unsigned)i);
		ok(make_named(c, nname[i], nb[i], nsize[i]), "named %s (%llu bytes) made and closed",
		   nname[i], (unsigned long long)nsize[i]);
	}
	wb = malloc(wlen);
	ab = malloc(alen);
	pattern(wb, wlen, 20);
	pattern(ab, alen, 21);
	rc = rmem_create(c, "w", wlen, 0, &wr);
	ok(rc == 0 && write_all(c, &wr, wb, wlen, &rc), "named w made, filled, kept open as writer");
	rc = rmem_alloc(c, alen, 0, &ar);
	ok(rc == 0 && write_all(c, &ar, ab, alen, &rc), "an anonymous 4+2 region filled");

	/* A writer whose client repairs by itself after half a second. */
	snprintf(url_auto, sizeof url_auto, "%s&repair_grace_ms=500", url42);
	c3 = connect_url(url_auto, RESUME_MS, 5000, &rc);
	awb = malloc(MiB);
	pattern(awb, MiB, 22);
	rc = c3 ? rmem_create(c3, "aw", MiB, 0, &aw) : -1;
	ok(rc == 0 && write_all(c3, &aw, awb, MiB, &rc),
	   "named aw made and held open by a client with ?repair_grace_ms=500");
	naw = pieces_of("aw", awsrv, 20);

	/* A reader that holds n1 open throughout, in a client of its own. */
	h = connect_url(base_url, RESUME_MS, 5000, &rc);
	rc = h ? rmem_open(h, "n1", RMEM_READ, &held) : -1;
	ok(rc == 0, "another client holds n1 open for reading");

	/* Two servers holding pieces of n1 and of aw die (not the leader:
	 * that is act 1). */
	n = nfirst = pieces_of("n1", srv, 20);
	memcpy(first, srv, sizeof first);
	lead = leader();
	for (int i = 0; i < n && nk < 2; i++)
		if (srv[i] != lead && in(awsrv, naw, srv[i]))
			kills[nk++] = srv[i];
	for (int i = 0; i < nk; i++) {
		ok(run_hook("kill %d", kills[i]) == 0, "s%d, holding a piece of n1, killed -9",
		   kills[i]);
	}
	for (int i = 0; i < 2; i++)
		ok(named_reads(c, nname[i], nb[i], nsize[i]), "%s reads whole, degraded", nname[i]);
	ok(reads_back(c, &wr, wb, wlen, &rc), "w reads whole from its writer");
	ok(reads_back(c, &ar, ab, alen, &rc), "the anonymous region reads whole");
	d = connect_url(url42, RESUME_MS, 5000, &rc);
	ok(d && named_reads(d, "n1", nb[0], nsize[0]), "n1 reads whole from a fresh client");

	/* Writes go on while degraded. */
	pattern(wb + 4096, 300 * KiB, 30);
	rc = rmem_write(c, &wr, 4096, wb + 4096, 300 * KiB);
	ok(rc == 0, "a write to w while degraded: %s", rmem_strerror(rc));
	pattern(ab + 1000, 5000, 31);
	rc = rmem_write(c, &ar, 1000, ab + 1000, 5000);
	ok(rc == 0, "a write to the anonymous region while degraded: %s", rmem_strerror(rc));

	/* aw's client repairs it by itself: a read and a write find its
	 * pieces out (a read touches data pieces only), and past the grace
	 * the next call rebuilds them first. */
	ok(c3 && reads_back(c3, &aw, awb, MiB, &rc), "aw reads whole, degraded");
	pattern(awb + 4096, 4096, 24);
	rc = c3 ? rmem_write(c3, &aw, 4096, awb + 4096, 4096) : -1;
	ok(rc == 0, "a write to aw, degraded: %s", rmem_strerror(rc));
	{
		struct timespec ts = { 0, 600 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	pattern(awb + 8192, 4096, 23);
	rc = c3 ? rmem_write(c3, &aw, 8192, awb + 8192, 4096) : -1;
	ok(rc == 0, "a write to aw past the grace: %s", rmem_strerror(rc));
	ok(run_hook("healthy aw") == 0,
	   "that write repaired aw first, unasked: every piece healthy on a live server");
	{
		struct rmem_stats st;

		bool data_lost = false;

		/* A read rebuilds only when a data piece (0..3) is lost. */
		for (int i = 0; i < naw && i < 4; i++)
			data_lost = data_lost || in(kills, 2, awsrv[i]);
		rc = c3 ? rmem_stats(c3, &st) : -1;
		/* 1 MiB of whole 16 KiB stripes (2 parity chunks each), then
		 * two 4 KiB writes (2 each). */
		ok(rc == 0 && (data_lost ? st.degraded_reads >= 1 : st.degraded_reads == 0) &&
			   st.parity_updates == 64 * 2 + 2 * 2 &&
			   st.repaired_bytes >= (MiB / 4 + 4095) / 4096 * 4096,
		   "its client's rmem_stats: %llu degraded reads (a data piece lost: %s), %llu "
		   "parity updates, %llu bytes repaired",
		   rc ? 0ull : (unsigned long long)st.degraded_reads, data_lost ? "yes" : "no",
		   rc ? 0ull : (unsigned long long)st.parity_updates,
		   rc ? 0ull : (unsigned long long)st.repaired_bytes);
	}
	ok(c3 && reads_back(c3, &aw, awb, MiB, &rc), "aw reads whole after it");

	/* What rmem_repair refuses. */
	rc = d ? rmem_open(d, "n2", RMEM_READ, &ro) : -1;
	ok(rc == 0 && rmem_repair(d, &ro) == -EACCES, "rmem_repair of a read-only handle: -EACCES");
	if (rc == 0)
		rmem_free(d, &ro);
	pc = connect_url(base_url, RESUME_MS, 5000, &rc);
	rc = pc ? rmem_alloc(pc, 4096, 0, &plain) : -1;
	ok(rc == 0 && rmem_repair(pc, &plain) == -EINVAL, "rmem_repair of a plain region: -EINVAL");
	if (rc == 0)
		rmem_free(pc, &plain);
	ok(rmem_repair(c, NULL) == -EINVAL, "rmem_repair(NULL): -EINVAL");

	/* The writer repairs its own; the agent, the closed ones. */
	rc = rmem_repair(c, &wr);
	ok(rc == 0, "rmem_repair of w by its writer: %s", rmem_strerror(rc));
	ok(run_hook("healthy w") == 0, "w's record: every piece healthy on a live server");
	rc = rmem_repair(c, &ar);
	ok(rc == 0, "rmem_repair of the anonymous region: %s", rmem_strerror(rc));
	ok(rmem_repair(c, &ar) == 0, "a second rmem_repair has nothing to do: 0");
	for (int i = 0; i < 2; i++) {
		ok(run_hook("healthy %s 60", nname[i]) == 0,
		   "the agent repaired %s: every piece healthy on a live server", nname[i]);
	}
	ok(reads_back(c, &wr, wb, wlen, &rc), "w reads whole after its repair, the degraded "
	   "write included");
	ok(h && reads_back(h, &held, nb[0], nsize[0], &rc),
	   "n1 reads whole through the handle held since before the deaths");
	{
		/* It looks at the record at most once a second: past that, a
		 * read follows the repaired pieces. */
		struct timespec ts = { 1, 200 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	ok(h && reads_back(h, &held, nb[0], nsize[0], &rc),
	   "n1 reads whole through the held handle after the agent's repair");

	/* One of the dead comes back with its memory (its fd store): the
	 * pieces it held of n1 and n2 were rebuilt elsewhere, so it gives them
	 * back by itself. */
	ok(run_hook("start %d", kills[0]) == 0, "s%d is back with its memory (same generation)",
	   kills[0]);
	for (int i = 0; i < 2; i++) {
		ok(run_hook("pieces-held %s 6 30", nname[i]) == 0,
		   "it gave back its old piece of %s: 6 pieces held", nname[i]);
	}
	ok(reads_back(c, &ar, ab, alen, &rc), "the anonymous region reads whole after its repair");

	/* Two more servers holding pieces of n1 die: 4 of 8 are left.  Two
	 * that held pieces before the repair too, so that a handle that did
	 * not follow it would be left with two. */
	n = pieces_of("n1", srv, 20);
	nk = 0;
	for (int i = 0; i < nfirst && nk < 2; i++)
		if (!in(kills, 2, first[i]) && in(srv, n, first[i]))
			kills[2 + nk++] = first[i];
	for (int i = 2; i < 2 + nk; i++) {
		ok(run_hook("kill %d", kills[i]) == 0,
		   "s%d, holding a repaired piece of n1, killed -9", kills[i]);
	}
	for (int i = 0; i < 2; i++)
		ok(named_reads(c, nname[i], nb[i], nsize[i]),
		   "%s reads whole after a third and fourth death", nname[i]);
	ok(reads_back(c, &wr, wb, wlen, &rc), "w reads whole after a third and fourth death");
	ok(h && reads_back(h, &held, nb[0], nsize[0], &rc),
	   "n1 reads whole through the handle held since before the first death, after four "
	   "(it followed the repair)");
	ok(reads_back(c, &ar, ab, alen, &rc),
	   "the anonymous region reads whole after a third and fourth death");
	if (d)
		rmem_close(d);
	d = connect_url(url42, RESUME_MS, 5000, &rc);
	for (int i = 0; i < 2; i++)
		ok(d && named_reads(d, nname[i], nb[i], nsize[i]),
		   "%s reads whole from a fresh client after four deaths", nname[i]);
	if (d)
		rmem_close(d);
	if (pc)
		rmem_close(pc);
	if (h)
		rmem_close(h);
	if (c3)
		rmem_close(c3);
	free(awb);
	rmem_free(c, &wr);
	rmem_free(c, &ar);
	ok(rmem_repair(c, &ar) == -EINVAL, "rmem_repair of a freed handle: -EINVAL");
	for (int i = 0; i < 2; i++)
		free(nb[i]);
	free(wb);
	free(ab);
}

int main(void)
{
	rmem_client *c;
	int rc, dead[2];

	base_url = redund_env("RMEM_CLUSTER_URL and RMEM_CLUSTER_HOOK are set by test_repair.sh");
	snprintf(url42, sizeof url42, "%s?redundancy=4+2", base_url);
	c = connect_url(url42, RESUME_MS, 5000, &rc);
	ok(c != NULL, "a 4+2 cluster client: %s", rmem_strerror(rc));
	if (!c)
		return tap_done();
	act_crash(c, dead);
	act_issue(c, dead);
	rmem_close(c);
	return tap_done();
}
