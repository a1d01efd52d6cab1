/*
 * test_redund_stale.c - a redundant region's pieces and record across servers
 * that go and come back with their memory (issue 30, items 1 and 5).
 *
 * Against a real 3-member etcd and three rmemd (s0..s2, membership lease
 * 3000 ms, repair agents off) that tests/func/test_redund_stale.sh starts
 * under fd stores; this program is its TAP stream.  Every region is 2+1, so
 * each server holds one piece of each.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_CLUSTER_URL_REC  the same cluster through a recording proxy of
 *                      one etcd member (the hook's "ranges" counts the
 *                      reads it carried)
 *   RMEM_CLUSTER_HOOK  the script's hook: kill I (kill -9, memory kept in the
 *                      store), start I (again from the store), fresh I (again,
 *                      memory gone), stop I / cont I (SIGSTOP / SIGCONT),
 *                      gone I / registered I (wait for sI's key to leave /
 *                      come back), stale NAME N, record NAME, listing NAME
 *                      STATE, pieces NAME, keyrev I (sI's key's create
 *                      revision)
 *
 * Checks, as a crash and a stall meet them:
 * 1. A stale piece is never served to an older handle.  R opens a region
 *    read-only and reads it; W writes it.  The server of data piece 0 dies
 *    (kill -9, its memory kept); W writes new bytes over the whole region
 *    (degraded: the record marks piece 0 stale); the server starts again
 *    from its store, and R's session to it resumes.  R, which never
 *    touched the region meanwhile, reads the new bytes, never the old;
 *    so does P, another such reader, by a posted read (rmem_post_read).
 * 2. The same with a stall instead of a crash: the server of piece 0 is
 *    stopped (SIGSTOP) until its membership lease ends, W writes, the
 *    server goes on (SIGCONT) and registers again; R's session to it never
 *    broke.  R reads the new bytes, and so does P's posted read.
 * 3. The same with a stall shorter than the lease: W's timeout_ms is 600
 *    ms, the server of piece 0 is stopped for under a second (its key
 *    never leaves etcd, R's session to it never breaks: no epoch moves),
 *    W writes (its call to piece 0 times out: the record marks it stale)
 *    and the server goes on.  R, and P by a posted read, read the new
 *    bytes within the names watch's delivery (at most 5 s here; before
 *    the watch they read piece 0's old bytes for good).  What the watch
 *    costs a read when nothing changed is counted, not timed: R reaches
 *    etcd through a recording proxy, and 200 reads of the region, once
 *    R has seen the write, make no etcd read (the write's own look at
 *    the record, just before, is one: the count sees R's reads).
 * 4. A double failure is not a loss: R+1 = 2 servers of a region die
 *    (kill -9, memory kept) and stay out until their keys leave etcd.  A
 *    client that never saw them opens the name: -EHOSTDOWN, and the record
 *    stays (etcd has it, rmemctl cluster redundant lists it); the servers
 *    start again from their stores, the open works and every byte reads.
 * 5. A real loss says so and keeps the record: 2 servers die and start
 *    fresh (their memory gone): the open is -ENODATA, the record stays and
 *    rmemctl lists it; rmem_unlink removes it, and the open is -ENOENT.
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
#include "util.h"

#define KiB 1024ull
#define LEN (512 * KiB)

static const char *base_url, *rec_url;
static char url21[1024];

/* How many bytes of buf are not model's. */
static uint64_t differ(const unsigned char *buf, const unsigned char *model, uint64_t len)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < len; i++)
		n += buf[i] != model[i];
	return n;
}

/* rmem_open of name until it is not -EHOSTDOWN (a client's view of the
 * servers lags etcd by its watch), for up to 15 s: its last answer. */
static int open_settled(rmem_client *c, const char *name, struct rmem_region *out)
{
	int rc;

	for (uint64_t end = now_ms() + 15000;;) {
		rc = rmem_open(c, name, RMEM_READ, out);
		if (rc != -EHOSTDOWN || now_ms() > end)
			return rc;
		sleep_ms(100);
	}
}

/* ---- 1 and 2: an older reader's piece, stale in the record ------------------------- */

/* A posted read of the whole region into got, polled for up to 20 s: its
 * status, or the poll's error. */
static int post_read_all(rmem_client *c, const struct rmem_region *r, unsigned char *got)
{
	struct rmem_completion cq;
	int rc = rmem_post_read(c, r, 0, got, LEN, 7);

	if (rc)
		return rc;
	for (uint64_t end = now_ms() + 20000; now_ms() < end;) {
		rc = rmem_poll(c, &cq, 1, 1000);
		if (rc < 0)
			return rc;
		if (rc == 1)
			return cq.cookie == 7 ? cq.status : -EBADMSG;
	}
	return -ETIME;
}

/* stall: the server of piece 0 is stopped (SIGSTOP) until its lease ends,
 * then continued; else killed (-9) and started again from its store. */
static void stale_reader(const char *name, bool stall)
{
	unsigned char *a = malloc(LEN), *b = malloc(LEN), *got = malloc(LEN);
	struct rmem_region wr, rr, pr;
	rmem_client *W, *R, *P = NULL;
	int rc, rc2 = -1, srv[8];
	uint64_t bad = LEN;
	uint64_t t0;

	pattern(a, LEN, stall ? 21 : 11);
	pattern(b, LEN, stall ? 22 : 12);
	/* W gives up on a server that is gone at once (resume 300 ms); R
	 * resumes its sessions for 15 s, so that it is still connected when
	 * the server comes back with the session in its store. */
	W = connect_url(url21, 300, 2000, &rc);
	R = W ? connect_url(base_url, 15000, 5000, &rc) : NULL;
	P = R ? connect_url(base_url, 15000, 5000, &rc) : NULL;
	if (P)
		rc = rmem_create(W, name, LEN, 0, &wr);
	if (!rc)
		rc = rmem_write(W, &wr, 0, a, LEN);
	if (!rc)
		rc = rmem_open(R, name, RMEM_READ, &rr);
	if (!rc)
		rc = rmem_read(R, &rr, 0, got, LEN);
	if (!rc && memcmp(got, a, LEN))
		rc = -EBADMSG;
	if (!rc)
		rc = rmem_open(P, name, RMEM_READ, &pr);
	if (!rc)
		rc = post_read_all(P, &pr, got);
	if (!ok(rc == 0 && !memcmp(got, a, LEN) && pieces_of(name, srv, 8) == 3,
		"%s: a 2+1 region written by W, opened read-only and read by R and by P "
		"(posted): %s", name, rmem_strerror(rc))) {
		skip(4, "no region");
		goto out;
	}
	t0 = now_ms();
	if (stall)
		rc = run_hook("stop %d", srv[0]) || run_hook("gone %d", srv[0]);
	else
		rc = run_hook("kill %d", srv[0]);
	if (!rc)
		rc = rmem_write(W, &wr, 0, b, LEN);
	ok(rc == 0 && run_hook("stale %s 1", name) == 0,
	   "%s: s%d %s; W writes new bytes over the region: %s, and the record marks piece 0 "
	   "stale", name, srv[0], stall ? "stopped until its key left etcd" : "killed (-9)",
	   rmem_strerror(rc));
	if (stall)
		rc2 = run_hook("cont %d", srv[0]) || run_hook("registered %d", srv[0]);
	else
		rc2 = run_hook("start %d", srv[0]);
	diag("s%d out for %lld ms", srv[0], (long long)(now_ms() - t0));
	ok(rc2 == 0, "%s: s%d back with its memory (%s)", name, srv[0],
	   stall ? "SIGCONT" : "started again from its fd store");
	/* R never touched the region meanwhile: its handle still holds piece 0
	 * in, and its session to s0 resumes (or never broke). */
	memset(got, 0, LEN);
	rc = rmem_read(R, &rr, 0, got, LEN);
	if (rc == 0)
		bad = differ(got, b, LEN);
	if (rc == 0 && bad)
		diag("%llu bytes differ; %llu of them are the old bytes", (unsigned long long)bad,
		     (unsigned long long)(LEN - differ(got, a, LEN)));
	/* Issue 30 item 1: R's handle saw every piece in, but s0's
	 * membership moved under it (a resume, a key that left etcd): it
	 * reads the record again before it trusts piece 0. */
	ok(rc == 0 && bad == 0,
	   "%s: R reads the new bytes, never the stale piece's old ones (%s, %llu bytes wrong)",
	   name, rmem_strerror(rc), (unsigned long long)bad);
	memset(got, 0, LEN);
	bad = LEN;
	rc = post_read_all(P, &pr, got);
	if (rc == 0)
		bad = differ(got, b, LEN);
	if (rc == 0 && bad)
		diag("%llu bytes differ; %llu of them are the old bytes", (unsigned long long)bad,
		     (unsigned long long)(LEN - differ(got, a, LEN)));
	ok(rc == 0 && bad == 0,
	   "%s: P's posted read too (%s, %llu bytes wrong)", name, rmem_strerror(rc),
	   (unsigned long long)bad);
	rmem_free(P, &pr);
	rmem_free(R, &rr);
	rmem_free(W, &wr);
	rmem_unlink(W, name);
out:
	rmem_close(P);
	rmem_close(R);
	rmem_close(W);
	free(a);
	free(b);
	free(got);
}

/* ---- 3: a stall shorter than the lease ------------------------------------------ */

#define SLEN (4096 * KiB) /* 8 segments a piece: one may land late, not all */

/* Reads of the whole region by c (posted when post) until none of its
 * bytes differs from want, for up to ms: the wrong bytes of the last read,
 * or SLEN when a read failed (*rc its error); *reads, *wrong_reads how
 * many reads were made and how many were wrong. */
static uint64_t read_until(rmem_client *c, const struct rmem_region *r, bool post,
			   const unsigned char *want, unsigned char *got, int ms, int *rc,
			   unsigned *reads, unsigned *wrong_reads)
{
	uint64_t bad = SLEN;

	*reads = *wrong_reads = 0;
	for (uint64_t end = now_ms() + (uint64_t)ms;;) {
		struct rmem_completion cq;

		memset(got, 0, SLEN);
		*rc = post ? rmem_post_read(c, r, 0, got, SLEN, 9) : rmem_read(c, r, 0, got, SLEN);
		if (post && *rc == 0) {
			*rc = rmem_poll(c, &cq, 1, 20000);
			*rc = *rc == 1 ? cq.status : *rc < 0 ? *rc : -ETIME;
		}
		++*reads;
		bad = *rc ? SLEN : differ(got, want, SLEN);
		if (bad == 0 || *rc)
			return bad;
		if (++*wrong_reads == 1)
			diag("read 1 after the write: %llu bytes wrong", (unsigned long long)bad);
		if (now_ms() > end)
			return bad;
		sleep_ms(20);
	}
}

static void short_stall(void)
{
	unsigned char *a = malloc(SLEN), *b = malloc(SLEN), *got = malloc(SLEN);
	struct rmem_region wr, rr, pr;
	rmem_client *W, *R, *P = NULL;
	unsigned reads, wrong;
	long ranges[3] = { -1, -1, -1 };
	char what[32];
	int rc, srv[8];
	long rev0 = -1, rev1 = -2;
	uint64_t bad = SLEN, t0, stopped = 0;

	pattern(a, SLEN, 51);
	pattern(b, SLEN, 52);
	/* W gives up on a piece's call after 600 ms (not less: a loaded
	 * machine must not time out the other pieces), far less than the
	 * server's lease (3000 ms); R and P wait 5 s, so the stall breaks
	 * none of their sessions. */
	W = connect_url(url21, 300, 600, &rc);
	R = W ? connect_url(rec_url ? rec_url : base_url, 15000, 5000, &rc) : NULL;
	P = R ? connect_url(base_url, 15000, 5000, &rc) : NULL;
	if (P)
		rc = rmem_create(W, "st-short", SLEN, 0, &wr);
	if (!rc)
		rc = write_all(W, &wr, a, SLEN, &rc) ? 0 : rc;
	if (!rc)
		rc = rmem_open(R, "st-short", RMEM_READ, &rr);
	if (!rc && !reads_back(R, &rr, a, SLEN, &rc))
		rc = rc ? rc : -EBADMSG;
	if (!rc)
		rc = rmem_open(P, "st-short", RMEM_READ, &pr);
	if (!rc && read_until(P, &pr, true, a, got, 0, &rc, &reads, &wrong))
		rc = rc ? rc : -EBADMSG;
	if (!ok(rc == 0 && pieces_of("st-short", srv, 8) == 3,
		"st-short: a 4 MiB 2+1 region written by W, opened read-only and read by R and "
		"by P (posted): %s", rmem_strerror(rc))) {
		skip(4, "no region");
		goto out;
	}
	snprintf(what, sizeof what, "keyrev %d", srv[0]);
	rev0 = hook_num(what);
	t0 = now_ms();
	rc = run_hook("stop %d", srv[0]);
	if (!rc)
		rc = rmem_write(W, &wr, 0, b, SLEN);
	if (run_hook("cont %d", srv[0]))
		rc = rc ? rc : -ECHILD;
	stopped = now_ms() - t0;
	rev1 = hook_num(what);
	ok(rc == 0 && run_hook("stale st-short 1") == 0 && rev0 > 0 && rev1 == rev0,
	   "st-short: s%d stopped for %llu ms (its key's create revision %ld, then %ld: it "
	   "never left etcd); W's write meanwhile: %s, and the record marks piece 0 stale",
	   srv[0], (unsigned long long)stopped, rev0, rev1, rmem_strerror(rc));
	/* Issue 30 item 1, the case no epoch sees: R's handle holds piece 0
	 * in, its server never left, R's session to it never broke.  Only the
	 * record says the piece is stale; the names watch tells R. */
	ranges[0] = hook_num("ranges");
	t0 = now_ms();
	bad = read_until(R, &rr, false, b, got, 5000, &rc, &reads, &wrong);
	ranges[1] = hook_num("ranges");
	diag("R: %u reads in %llu ms, %u of them wrong", reads,
	     (unsigned long long)(now_ms() - t0), wrong);
	if (rc == 0 && bad)
		diag("%llu bytes differ; %llu of them are the old bytes", (unsigned long long)bad,
		     (unsigned long long)(SLEN - differ(got, a, SLEN)));
	ok(rc == 0 && bad == 0,
	   "st-short: R reads the new bytes within 5 s, never the stale piece's old ones for "
	   "good (%s, %llu bytes wrong)", rmem_strerror(rc), (unsigned long long)bad);
	bad = read_until(P, &pr, true, b, got, 5000, &rc, &reads, &wrong);
	diag("P: %u posted reads, %u of them wrong", reads, wrong);
	ok(rc == 0 && bad == 0,
	   "st-short: P's posted read too (%s, %llu bytes wrong)", rmem_strerror(rc),
	   (unsigned long long)bad);
	/* The cost when nothing changed: no etcd read, whatever the count. */
	for (unsigned i = 0; i < 200 && rc == 0; i++)
		rc = rmem_read(R, &rr, (uint64_t)(i % 1024) * 4 * KiB, got, 4 * KiB);
	ranges[2] = hook_num("ranges");
	if (!rec_url)
		skip(1, "no recording proxy");
	else
		ok(rc == 0 && ranges[0] >= 0 && ranges[1] > ranges[0] && ranges[2] == ranges[1],
		   "st-short: R's etcd reads: %ld for its first read after the write, %ld for "
		   "200 reads of 4 KiB after it (%s)", ranges[1] - ranges[0],
		   ranges[2] - ranges[1], rmem_strerror(rc));
	rmem_free(P, &pr);
	rmem_free(R, &rr);
	rmem_free(W, &wr);
	rmem_unlink(W, "st-short");
out:
	rmem_close(P);
	rmem_close(R);
	rmem_close(W);
	free(a);
	free(b);
	free(got);
}

/* A 2+1 region NAME made, written with a (LEN bytes) and its handle freed:
 * the writer's client (NULL if it could not connect), *rc the first error. */
static rmem_client *written(const char *name, const unsigned char *a, int *rc)
{
	struct rmem_region wr;
	rmem_client *W = connect_url(url21, 300, 2000, rc);

	if (W)
		*rc = rmem_create(W, name, LEN, 0, &wr);
	if (W && !*rc)
		*rc = rmem_write(W, &wr, 0, a, LEN);
	if (W && !*rc)
		*rc = rmem_free(W, &wr);
	return W;
}

/* ---- 4: two of three servers out for a while ----------------------------------- */

static void double_failure(void)
{
	unsigned char *a = malloc(LEN), *got = malloc(LEN);
	struct rmem_region rr;
	rmem_client *W, *C = NULL;
	int rc, srv[8];
	uint64_t bad = LEN;

	pattern(a, LEN, 31);
	W = written("dbl", a, &rc);
	if (!ok(rc == 0 && pieces_of("dbl", srv, 8) == 3, "dbl: a 2+1 region written: %s",
		rmem_strerror(rc))) {
		skip(5, "no region");
		goto out;
	}
	rc = run_hook("kill %d", srv[0]) || run_hook("kill %d", srv[1]) ||
	     run_hook("gone %d", srv[0]) || run_hook("gone %d", srv[1]);
	ok(rc == 0, "dbl: s%d and s%d killed (-9, memory kept) until their keys left etcd",
	   srv[0], srv[1]);
	/* A client that never saw them: they are not members at all. */
	C = connect_url(base_url, 300, 2000, &rc);
	if (C)
		rc = rmem_open(C, "dbl", RMEM_READ, &rr);
	if (rc == 0)
		rmem_free(C, &rr);
	ok(rc == -EHOSTDOWN, "dbl: a fresh client's open is -EHOSTDOWN, not gone (%s)",
	   rmem_strerror(rc));
	ok(run_hook("record dbl") == 0 && run_hook("listing dbl lost") == 0,
	   "dbl: the record stays (etcd has it; rmemctl cluster redundant lists it)");
	rc = run_hook("start %d", srv[0]) || run_hook("start %d", srv[1]);
	ok(rc == 0, "dbl: s%d and s%d started again from their fd stores", srv[0], srv[1]);
	rc = C ? open_settled(C, "dbl", &rr) : rc;
	if (!rc) {
		memset(got, 0, LEN);
		rc = rmem_read(C, &rr, 0, got, LEN);
		if (!rc)
			bad = differ(got, a, LEN);
		rmem_free(C, &rr);
	}
	ok(rc == 0 && bad == 0, "dbl: the open works and every byte reads back (%s, %llu wrong)",
	   rmem_strerror(rc), (unsigned long long)bad);
	rmem_unlink(W, "dbl");
out:
	rmem_close(C);
	rmem_close(W);
	free(a);
	free(got);
}

/* ---- 5: two of three servers' memory lost ----------------------------------------- */

static void real_loss(void)
{
	unsigned char *a = malloc(LEN);
	struct rmem_region rr;
	rmem_client *W;
	int rc, srv[8];

	pattern(a, LEN, 41);
	W = written("lost", a, &rc);
	if (!ok(rc == 0 && pieces_of("lost", srv, 8) == 3, "lost: a 2+1 region written: %s",
		rmem_strerror(rc))) {
		skip(3, "no region");
		goto out;
	}
	rc = run_hook("kill %d", srv[0]) || run_hook("kill %d", srv[1]) ||
	     run_hook("fresh %d", srv[0]) || run_hook("fresh %d", srv[1]);
	if (!rc)
		rc = open_settled(W, "lost", &rr);
	if (rc == 0)
		rmem_free(W, &rr);
	ok(rc == -ENODATA, "lost: s%d and s%d start fresh (memory gone): the open is -ENODATA "
	   "(%d: %s)", srv[0], srv[1], rc, rmem_strerror(rc));
	ok(run_hook("record lost") == 0 && run_hook("listing lost lost") == 0,
	   "lost: the record stays for rmemctl and rmem_unlink");
	rc = rmem_unlink(W, "lost");
	ok(rc == 0 && run_hook("record lost") != 0 &&
	   rmem_open(W, "lost", RMEM_READ, &rr) == -ENOENT,
	   "lost: rmem_unlink removes it (%s); then the record is gone and the open -ENOENT",
	   rmem_strerror(rc));
out:
	rmem_close(W);
	free(a);
}

int main(void)
{
	base_url = redund_env("RMEM_CLUSTER_URL and RMEM_CLUSTER_HOOK are the script's");
	rec_url = getenv("RMEM_CLUSTER_URL_REC");
	snprintf(url21, sizeof url21, "%s?redundancy=2+1&repair_grace_ms=0", base_url);
	stale_reader("st-kill", false);
	stale_reader("st-stall", true);
	short_stall();
	double_failure();
	real_loss();
	return tap_done();
}
