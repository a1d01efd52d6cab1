/*
 * test_cluster_lib.c - librmem's etcd:// cluster client (issue 12 items 2,
 * 3, 4) against a real 3-member etcd and three rmemd of 64 MiB each, which
 * tests/func/test_cluster_lib.sh starts; this program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_CLUSTER_EPS   the three servers' own endpoints, space-separated,
 *                      in server order (s0 s1 s2), for direct clients
 *   RMEM_CLUSTER_HOOK  a command the program runs for what it cannot do
 *                      itself: "HOOK kill-server I", "HOOK start-server I"
 *                      (fresh), "HOOK restart-server I" (kill -9, then start
 *                      with its state), "HOOK kill-leader", "HOOK restart-etcd",
 *                      "HOOK compact-under-stop PID", "HOOK del-fake"
 *   RMEM_TEST_TRANSPORT "rdma": every client with transport "rdma"
 *
 * Checks: one pool summed; allocations spread by capacity; 150 MiB through
 * one client (more than any one server has); one region larger than any
 * server is -ENOMEM; a posted alloc refused for room moves on to another
 * server; rmem_close of an idle cluster client is quick; posted calls and rmem_poll across servers; atomics;
 * kept buffers; names created and opened from different clients, two
 * racing creators (one wins), a stale record cleaned up; the etcd leader
 * killed under a stream of I/O and allocs (nothing fails, nothing waits
 * long); a server restarted with its state (kill -9, fd store): its named
 * region opens again and reads its bytes; kill -9 of a server: its regions
 * -EHOSTDOWN within a bound, the others' data intact, allocs go on; the
 * server back fresh: used again, its name's record dropped; the watch's
 * history compacted while its stream was down: a full read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rmem.h>

#include "harness.h"
#include "tap.h"

#define MiB (1ull << 20)
#define NSRV 3

static const char *url;
static char *eps[NSRV];
static const char *hook;
static int resume_ms = 1000;
/* Time bounds stretch in the test VM (TCG: everything is slow). */
static double slow = 1.0;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct rmem_opts opts(void)
{
	struct rmem_opts o;
	const char *t = getenv("RMEM_TEST_TRANSPORT");

	rmem_opts_init(&o, sizeof o);
	o.resume_ms = resume_ms;
	o.timeout_ms = 5000;
	if (t && !strcmp(t, "rdma"))
		o.transport = "rdma";
	return o;
}

static rmem_client *cluster(void)
{
	struct rmem_opts o = opts();
	rmem_client *c = NULL;
	int rc = rmem_connect(url, &o, &c);

	if (rc)
		diag("rmem_connect(%s): %s", url, rmem_strerror(rc));
	return c;
}

static rmem_client *direct(int i)
{
	struct rmem_opts o = opts();
	rmem_client *c = NULL;
	int rc = rmem_connect(eps[i], &o, &c);

	if (rc)
		diag("rmem_connect(%s): %s", eps[i], rmem_strerror(rc));
	return c;
}

static int run_hook(const char *what)
{
	char cmd[512];

	snprintf(cmd, sizeof cmd, "%s %s", hook, what);
	return system(cmd);
}

static uint64_t used(rmem_client *d)
{
	struct rmem_stats st;

	return rmem_stats(d, &st) == 0 ? st.used_bytes : UINT64_MAX;
}

static uint32_t slot_of(const struct rmem_region *r)
{
	return (uint32_t)r->reserved[0];
}

/* ---- one pool --------------------------------------------------------------------------- */

static void test_pool(rmem_client *c)
{
	struct rmem_stats st;
	struct rmem_region r, plain = { 0 };
	uint8_t b = 0;
	int rc = rmem_stats(c, &st);

	ok(rc == 0 && st.pool_bytes == NSRV * 64 * MiB,
	   "rmem_stats sums the three servers: pool_bytes %llu (rc %d)",
	   (unsigned long long)st.pool_bytes, rc);
	ok(!strcmp(rmem_transport(c), getenv("RMEM_TEST_TRANSPORT") &&
				      !strcmp(getenv("RMEM_TEST_TRANSPORT"), "rdma") ? "rdma" : "tcp"),
	   "rmem_transport says %s", rmem_transport(c));
	rc = rmem_alloc(c, 4096, 0, &r);
	ok(rc == 0 && r.reserved[0] >> 32 != 0 && r.reserved[1] == 0,
	   "a cluster region names its server in reserved[0] (%#llx)",
	   (unsigned long long)r.reserved[0]);
	ok(rmem_read(c, &plain, 0, &b, 1) == -EINVAL,
	   "a region that names no server of this cluster is -EINVAL");
	ok(rmem_pools(c, NULL, 0) == -EOPNOTSUPP && rmem_regions(c, 0, NULL, 0) == -EOPNOTSUPP &&
	   rmem_clients(c, 0, NULL, 0) == -EOPNOTSUPP &&
	   rmem_unlink_ns(c, "", "x", 0) == -EOPNOTSUPP,
	   "one daemon's admin listings are -EOPNOTSUPP on a cluster client");
	ok(rmem_free(c, &r) == 0, "rmem_free on a cluster region");
	ok(rmem_free(c, &r) == -ENOENT, "a second free is -ENOENT, as on one server");
}

/* ---- placement ---------------------------------------------------------------------------- */

static void test_spread(rmem_client **d)
{
	struct rmem_region big, r[30];
	uint64_t u0[NSRV], got[NSRV];
	int n = 0, rc;
	rmem_client *c2;

	/* s0 holds 40 MiB of another client; its record says so within a
	 * refresh (250 ms, step 1 MiB). */
	rc = rmem_alloc(d[0], 40 * MiB, 0, &big);
	ok(rc == 0, "a direct client holds 40 MiB on s0 (rc %d)", rc);
	usleep(1500 * 1000);
	c2 = cluster(); /* a fresh client: it learns the figures from etcd */
	for (int i = 0; i < NSRV; i++)
		u0[i] = used(d[i]);
	for (int i = 0; i < 30; i++)
		n += rmem_alloc(c2, 1 * MiB, 0, &r[i]) == 0;
	for (int i = 0; i < NSRV; i++)
		got[i] = (used(d[i]) - u0[i]) / MiB;
	diag("30 x 1 MiB placed: s0 %llu, s1 %llu, s2 %llu (s0 had 24 MiB free, the others 64)",
	     (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2]);
	ok(n == 30 && got[0] + got[1] + got[2] == 30 && got[0] < got[1] && got[0] < got[2] &&
	   got[1] > 0 && got[2] > 0,
	   "allocations spread by free capacity: the fuller server gets fewer");
	for (int i = 0; i < n; i++)
		rmem_free(c2, &r[i]);
	rmem_close(c2);
	ok(rmem_free(d[0], &big) == 0, "the direct client frees its 40 MiB");
}

static void test_150(rmem_client *c)
{
	struct rmem_region r[15], huge;
	struct rmem_stats st;
	int n = 0, bad = 0, rc;
	bool servers[256] = { false };
	int nsrv = 0;

	usleep(1000 * 1000); /* the records catch up with the frees above */
	for (int i = 0; i < 15; i++) {
		rc = rmem_alloc(c, 10 * MiB, 0, &r[i]);
		if (rc) {
			diag("alloc %d of 10 MiB: %s", i, rmem_strerror(rc));
			break;
		}
		n++;
		if (!servers[slot_of(&r[i]) & 255])
			nsrv++;
		servers[slot_of(&r[i]) & 255] = true;
	}
	ok(n == 15, "150 MiB allocated through one cluster client, 10 MiB at a time (%d of 15),"
	   " on %d servers", n, nsrv);
	rc = rmem_stats(c, &st);
	ok(rc == 0 && st.used_bytes >= 150 * MiB,
	   "the summed stats count them (used %llu MiB)", (unsigned long long)(st.used_bytes / MiB));
	for (int i = 0; i < n; i++)
		bad += region_fill(c, &r[i], 64 * 1024, (uint64_t)i) != 0;
	for (int i = 0; i < n; i++)
		bad += region_check(c, &r[i], 64 * 1024, (uint64_t)i) != 0;
	ok(bad == 0, "each of them written and read back, on its own server (%d bad)", bad);
	rc = rmem_alloc(c, 70 * MiB, 0, &huge);
	ok(rc == -ENOMEM, "70 MiB in one region, more than any server has, is -ENOMEM (%d)", rc);
	for (int i = 0; i < n; i++)
		rmem_free(c, &r[i]);
}

/* ---- a posted alloc moves on ------------------------------------------------------------------ */

/* A posted alloc's one completion, waiting up to 5 s (x slow): its status,
 * or -ETIMEDOUT. */
static int post_wait(rmem_client *c, uint64_t cookie)
{
	struct rmem_completion done;
	double end = now_s() + 5 * slow;

	while (now_s() < end) {
		int n = rmem_poll(c, &done, 1, 100);

		if (n < 0)
			return n;
		if (n == 1)
			return done.cookie == cookie ? done.status : -EPROTO;
	}
	return -ETIMEDOUT;
}

/*
 * s0 and s1 are fragmented: 34 MiB free in holes of 15, 15 and 4 MiB, so
 * their records say a 20 MiB region fits and it does not; s2 has 28 MiB in
 * one piece, and looks the emptier of the three least.  A fresh client's
 * posted 20 MiB alloc goes to s0 or s1 first (unless both of its two random
 * choices are s2: 1 in 9), gets -ENOMEM there, and must be sent on to s2
 * from inside rmem_poll.  Three rounds: without the move, at least one
 * fails but for 1 in 729.  Then 40 MiB, which no server holds: -ENOMEM,
 * once every server has said so.
 */
static void test_post_move(rmem_client **d)
{
	struct rmem_region frag[2][4], big, r;
	int rc = 0, good = 0, on_s2 = 0;

	for (int s = 0; s < 2; s++)
		for (int k = 0; k < 4; k++)
			rc |= rmem_alloc(d[s], 15 * MiB, 0, &frag[s][k]);
	for (int s = 0; s < 2 && !rc; s++)
		rc |= rmem_free(d[s], &frag[s][0]) | rmem_free(d[s], &frag[s][2]);
	rc |= rmem_alloc(d[2], 36 * MiB, 0, &big);
	ok(rc == 0, "s0 and s1 fragmented (34 MiB free, 15 MiB the largest piece), s2 with 28 MiB"
	   " in one piece, by direct clients");
	if (rc)
		return;
	usleep(1500 * 1000); /* the records catch up (refresh 250 ms, step 1 MiB) */
	for (int round = 0; round < 3; round++) {
		rmem_client *c2 = cluster();
		uint64_t u2 = used(d[2]);

		if (!c2)
			break;
		rc = rmem_post_alloc(c2, 20 * MiB, 0, &r, 77);
		if (rc == 0)
			rc = post_wait(c2, 77);
		if (rc == 0) {
			good++;
			on_s2 += used(d[2]) - u2 == 20 * MiB;
			rmem_free(c2, &r);
		} else {
			diag("round %d: posted alloc of 20 MiB: %s", round, rmem_strerror(rc));
		}
		rmem_close(c2);
	}
	ok(good == 3 && on_s2 == 3,
	   "a posted alloc refused with -ENOMEM moves on to the server that has room (%d of 3, %d on s2)",
	   good, on_s2);
	{
		rmem_client *c2 = cluster();

		rc = c2 ? rmem_post_alloc(c2, 40 * MiB, 0, &r, 78) : -ENOTCONN;
		if (rc == 0)
			rc = post_wait(c2, 78);
		ok(rc == -ENOMEM, "a posted alloc no server can hold completes -ENOMEM (%d)", rc);
		rmem_close(c2);
	}
	rc = rmem_free(d[2], &big);
	for (int s = 0; s < 2; s++)
		rc |= rmem_free(d[s], &frag[s][1]) | rmem_free(d[s], &frag[s][3]);
	ok(rc == 0, "the direct clients free what they held");
}

/* ---- rmem_close ------------------------------------------------------------------------------ */

/* A cluster client's watch of etcd sits in a stream that libcurl checks
 * for a stop only about once a second when idle; rmem_close shuts the
 * stream's socket down instead.  Three idle clients, each closed: without
 * that, a close takes up to a second, and three of them under 300 ms each
 * would be luck. */
static void test_close_fast(void)
{
	double worst = 0;
	int n = 0;

	for (int i = 0; i < 3; i++) {
		rmem_client *c2 = cluster();
		struct rmem_stats st;
		double t0;

		if (!c2 || rmem_stats(c2, &st) != 0) {
			rmem_close(c2);
			break;
		}
		usleep(1200 * 1000); /* the watch's stream idle */
		t0 = now_s();
		rmem_close(c2);
		if (now_s() - t0 > worst)
			worst = now_s() - t0;
		n++;
	}
	ok(n == 3 && worst < 0.3 * slow,
	   "rmem_close on an idle cluster client returns at once (worst of %d: %.0f ms)", n,
	   worst * 1000);
}

/* ---- posted calls, atomics, kept buffers ----------------------------------------------------- */

/* Polls until done reaches want (or a poll finds nothing in 5 s), adding
 * to *err each completion that failed or lacks cookie; the new done. */
static int poll_until(rmem_client *c, int done, int want, uint64_t cookie, int *err)
{
	struct rmem_completion comp[16];

	while (done < want) {
		int k = rmem_poll(c, comp, 16, 5000);

		if (k <= 0)
			break;
		for (int j = 0; j < k; j++)
			*err += comp[j].status != 0 || comp[j].cookie != cookie;
		done += k;
	}
	return done;
}

static void test_async(rmem_client *c)
{
	enum { N = 9, LEN = 8192 };
	struct rmem_region r[N];
	struct rmem_completion comp[16];
	static uint8_t wbuf[N][LEN], rbuf[N][LEN];
	int done = 0, err = 0, rc, bad = 0;
	uint64_t seen = 0;

	for (int i = 0; i < N; i++)
		err += rmem_post_alloc(c, 1 * MiB, 0, &r[i], 100 + (uint64_t)i) != 0;
	while (done < N && err == 0) {
		int k = rmem_poll(c, comp, 16, 5000);

		if (k <= 0)
			break;
		for (int j = 0; j < k; j++) {
			err += comp[j].status != 0;
			seen |= 1ull << (comp[j].cookie - 100);
		}
		done += k;
	}
	ok(done == N && err == 0 && seen == (1ull << N) - 1,
	   "%d posted allocs complete through rmem_poll with their cookies", done);
	ok(r[0].reserved[0] >> 32 && r[N - 1].reserved[0] >> 32,
	   "a posted alloc's region names its server when it completes");
	for (int i = 0; i < N; i++) {
		region_pattern(wbuf[i], LEN, 1000 + (uint64_t)i);
		err += rmem_post_write(c, &r[i], 0, wbuf[i], LEN, 7) != 0;
	}
	done = poll_until(c, 0, N, 7, &err);
	for (int i = 0; i < N; i++)
		err += rmem_post_read(c, &r[i], 0, rbuf[i], LEN, 8) != 0;
	done = poll_until(c, done, 2 * N, 8, &err);
	for (int i = 0; i < N; i++)
		bad += memcmp(wbuf[i], rbuf[i], LEN) != 0;
	ok(done == 2 * N && err == 0 && bad == 0,
	   "posted writes and reads on regions of every server complete and verify");
	ok(rmem_poll(c, comp, 16, 1000) == 0, "with nothing in flight rmem_poll returns 0");

	{
		uint64_t old = 99;

		uint64_t zero = 0;

		rc = rmem_write(c, &r[1], 8, &zero, sizeof zero);
		if (!rc)
			rc = rmem_faa(c, &r[1], 8, 5, &old);
		ok(rc == 0 && old == 0 && rmem_faa(c, &r[1], 8, 5, &old) == 0 && old == 5,
		   "rmem_faa on a cluster region (old %llu)", (unsigned long long)old);
		rc = rmem_cas(c, &r[2], 0, 0x1234, 77, &old);
		ok(rc == 0 && old != 0x1234, "rmem_cas that does not match leaves the word");
	}
	{
		static uint8_t kept[LEN], back[LEN];

		region_pattern(kept, LEN, 4242);
		rc = rmem_register_buf(c, kept, LEN);
		ok(rc == 0, "rmem_register_buf on a cluster client (rc %d)", rc);
		ok(rmem_write(c, &r[3], 0, kept, LEN) == 0 && rmem_register_buf(c, back, LEN) == 0 &&
		   rmem_read(c, &r[3], 0, back, LEN) == 0 && !memcmp(kept, back, LEN),
		   "I/O through kept buffers");
		ok(rmem_unregister_buf(c, kept) == 0 && rmem_unregister_buf(c, back) == 0 &&
		   rmem_unregister_buf(c, kept) == -ENOENT, "rmem_unregister_buf (twice: -ENOENT)");
	}
	for (int i = 0; i < N; i++)
		err += rmem_post_free(c, &r[i], 9) != 0;
	done = 0;
	while (done < N) {
		int k = rmem_poll(c, comp, 16, 5000);

		if (k <= 0)
			break;
		for (int j = 0; j < k; j++)
			err += comp[j].status != 0;
		done += k;
	}
	ok(done == N && err == 0, "posted frees complete");
}

/* ---- names -------------------------------------------------------------------------------- */

struct racer {
	const char *name;
	pthread_barrier_t *bar;
	rmem_client *c;
	struct rmem_region r;
	int rc;
};

static void *race(void *arg)
{
	struct racer *x = arg;

	pthread_barrier_wait(x->bar);
	x->rc = rmem_create(x->c, x->name, 1 * MiB, 0, &x->r);
	return NULL;
}

/* The server holding name, by the direct clients (each can open it). */
static int holder(rmem_client **d, const char *name)
{
	int who = -1;

	for (int i = 0; i < NSRV; i++) {
		struct rmem_region h;

		if (d[i] && rmem_open(d[i], name, RMEM_READ, &h) == 0) {
			who = who < 0 ? i : 99;
			rmem_free(d[i], &h);
		}
	}
	return who;
}

static void test_names(rmem_client *a, rmem_client **d)
{
	rmem_client *b = cluster();
	struct rmem_region ra, rb, rx;
	int rc, wins = 0, exists = 0, who;

	rc = rmem_create(a, "n1", 1 * MiB, 0, &ra);
	ok(rc == 0 && ra.flags == (RMEM_READ | RMEM_WRITE), "client A creates n1 (rc %d)", rc);
	ok(region_fill(a, &ra, 4096, 11) == 0, "A writes n1");
	rc = rmem_open(b, "n1", RMEM_READ, &rb);
	ok(rc == 0 && rb.flags == RMEM_READ && region_check(b, &rb, 4096, 11) == 0,
	   "client B opens n1 through etcd (read-only) and reads A's bytes (rc %d)", rc);
	ok(rmem_write(b, &rb, 0, "x", 1) == -EACCES, "B's read-only handle cannot write");
	{
		struct rmem_name_info ni[8];
		int k = rmem_names(b, 0, ni, 8), found = 0;

		for (int i = 0; i < k; i++)
			found += !strcmp(ni[i].name, "n1") && ni[i].tenant[0] == '\0' &&
				 ni[i].length == 1 * MiB && ni[i].id > 0;
		ok(k >= 1 && found == 1, "rmem_names lists n1 from etcd (%d names)", k);
		ok(k < 1 || rmem_names(b, ni[k - 1].id, ni, 8) == 0,
		   "and pages after the last id to nothing");
	}
	who = holder(d, "n1");
	ok(who >= 0 && who < NSRV, "exactly one server holds n1 (s%d)", who);
	ok(rmem_create(b, "n1", 1 * MiB, 0, &rx) == -EEXIST, "B creating n1 too is -EEXIST");
	ok(rmem_unlink(b, "n1") == 0, "B unlinks n1");
	ok(rmem_open(a, "n1", RMEM_READ, &rx) == -ENOENT, "then A's open is -ENOENT");
	ok(region_check(b, &rb, 4096, 11) == 0, "B's handle still reads (unlink keeps handles)");
	rmem_free(b, &rb);
	rmem_free(a, &ra);
	ok(rmem_unlink(a, "n1") == -ENOENT, "unlinking it again is -ENOENT");
	ok(rmem_create(a, "bad name", 1, 0, &rx) == -EINVAL && rmem_open(a, "", RMEM_READ, &rx) ==
	   -EINVAL, "bad names are -EINVAL before etcd is asked");

	/* Two creators race: etcd's create-if-absent lets one win. */
	for (int round = 0; round < 5; round++) {
		pthread_barrier_t bar;
		pthread_t t[2];
		struct racer x[2];
		char name[32];

		snprintf(name, sizeof name, "race%d", round);
		pthread_barrier_init(&bar, NULL, 2);
		for (int i = 0; i < 2; i++) {
			x[i] = (struct racer){ .name = name, .bar = &bar, .c = i ? b : a };
			pthread_create(&t[i], NULL, race, &x[i]);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&bar);
		for (int i = 0; i < 2; i++) {
			wins += x[i].rc == 0;
			exists += x[i].rc == -EEXIST;
			if (x[i].rc == 0) {
				rmem_free(x[i].c, &x[i].r);
				rmem_unlink(x[i].c, name);
			}
		}
		who = holder(d, name);
		if (who != -1)
			diag("%s is still on s%d after its unlink", name, who);
	}
	ok(wins == 5 && exists == 5, "two racing creators, 5 rounds: one wins each (%d wins, %d"
	   " -EEXIST)", wins, exists);

	/* A record whose region its server no longer has is not trusted. */
	rc = rmem_create(a, "stale", 4096, 0, &ra);
	rmem_free(a, &ra);
	who = holder(d, "stale");
	ok(rc == 0 && who >= 0 && who < NSRV && rmem_unlink(d[who], "stale") == 0,
	   "stale is created, then unlinked behind etcd's back on its server s%d", who);
	ok(rmem_open(b, "stale", RMEM_READ, &rx) == -ENOENT,
	   "opening it through the cluster is -ENOENT");
	rc = rmem_create(b, "stale", 4096, 0, &rx);
	ok(rc == 0, "the stale record was cleaned up: the name can be created again (rc %d)", rc);
	rmem_free(b, &rx);
	ok(rmem_unlink(b, "stale") == 0, "and unlinked");
	rmem_close(b);
}

/* ---- the etcd leader dies ------------------------------------------------------------------- */

struct streamer {
	rmem_client *c;
	int stop; /* __atomic: set by the main thread, read by the streamer */
	int ops, fails;
	double worst;
};

static void *stream(void *arg)
{
	struct streamer *s = arg;
	struct rmem_region r;
	uint8_t buf[4096], back[4096];

	if (rmem_alloc(s->c, 1 * MiB, 0, &r)) {
		s->fails++;
		return NULL;
	}
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		struct rmem_region t;
		double t0 = now_s(), dt;
		int bad;

		region_pattern(buf, sizeof buf, (uint64_t)s->ops);
		bad = rmem_write(s->c, &r, 0, buf, sizeof buf) != 0 ||
		      rmem_read(s->c, &r, 0, back, sizeof back) != 0 ||
		      memcmp(buf, back, sizeof buf) != 0;
		/* allocs too: etcd is not on their path either */
		if (s->ops % 8 == 0)
			bad |= rmem_alloc(s->c, 4096, 0, &t) != 0 || rmem_free(s->c, &t) != 0;
		dt = now_s() - t0;
		if (dt > s->worst)
			s->worst = dt;
		s->fails += bad;
		s->ops++;
	}
	rmem_free(s->c, &r);
	return NULL;
}

static void test_leader(rmem_client *c)
{
	struct streamer s = { .c = c };
	struct rmem_region r;
	pthread_t t;
	int rc = -1;

	pthread_create(&t, NULL, stream, &s);
	usleep(500 * 1000);
	ok(run_hook("kill-leader") == 0, "the etcd leader is killed (kill -9)");
	usleep(3000 * 1000);
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	diag("%d write+read pairs (and allocs) around the leader's death, slowest %.1f ms",
	     s.ops, s.worst * 1e3);
	ok(s.ops > 20 && s.fails == 0 && s.worst < 1.0 * slow,
	   "the data path and allocs went on: %d ops, %d failed, slowest %.0f ms", s.ops, s.fails,
	   s.worst * 1e3);
	/* Names need etcd: once a new leader is elected they work again. */
	for (int i = 0; i < 50 && rc; i++) {
		rc = rmem_create(c, "after-leader", 4096, 0, &r);
		if (rc)
			usleep(200 * 1000);
	}
	ok(rc == 0, "names work again under the new leader (rc %d)", rc);
	if (rc == 0) {
		rmem_free(c, &r);
		rmem_unlink(c, "after-leader");
	}
	ok(run_hook("restart-etcd") == 0, "the killed etcd member rejoins");
}

/* ---- a server restarts without loss ----------------------------------------------------------- */

/* Opens name through c (retrying while its server is on its way back) and
 * checks its first len bytes hold seed's pattern: 0, or the last error. */
static int reopen_check(rmem_client *c, const char *name, size_t len, uint64_t seed)
{
	struct rmem_region h;
	int rc = -1;

	for (int i = 0; i < 100 && rc; i++) {
		rc = rmem_open(c, name, RMEM_READ, &h);
		if (rc == 0) {
			rc = region_check(c, &h, len, seed);
			rmem_free(c, &h);
		}
		if (rc)
			usleep(100 * 1000);
	}
	return rc;
}

static void test_comeback(rmem_client *c, rmem_client **d)
{
	struct rmem_region kept;
	rmem_client *fresh;
	char what[32];
	int who, rc;

	rc = rmem_create(c, "kept", 1 * MiB, 0, &kept);
	ok(rc == 0 && region_fill(c, &kept, 8192, 99) == 0, "named region kept created and written");
	who = holder(d, "kept");
	ok(who >= 0 && who < NSRV, "kept is on s%d", who);
	if (who < 0 || who >= NSRV) {
		skip(3, "no server holds kept");
		return;
	}
	snprintf(what, sizeof what, "restart-server %d", who);
	ok(run_hook(what) == 0, "s%d is killed (-9) and restarted with its state, as systemd"
	   " would (the fd store)", who);
	rc = reopen_check(c, "kept", 8192, 99);
	ok(rc == 0, "the same cluster client opens kept again and reads its bytes (rc %d)", rc);
	fresh = cluster();
	rc = fresh ? reopen_check(fresh, "kept", 8192, 99) : -1;
	ok(rc == 0, "so does a new cluster client (rc %d)", rc);
	rmem_close(fresh);
	rmem_free(c, &kept);
	rmem_unlink(c, "kept");
	/* The direct client of that server may have lost its session. */
	rmem_close(d[who]);
	d[who] = direct(who);
}

/* ---- a server dies -------------------------------------------------------------------------- */

static void test_death(rmem_client *c, rmem_client **d)
{
	/* At least N regions, and more until some are on the victim's server
	 * and some elsewhere: placement keeps a client's allocations in runs
	 * on one server until the servers' free bytes drift an eighth of a
	 * pool apart (members_pick), so twelve may all land on one.  NMAX is
	 * past that drift on three pools of 64 MiB. */
	enum { N = 12, NMAX = 48 };
	struct rmem_region r[NMAX], victim, vh, rx;
	int who, rc, bad = 0, others = 0, n = 0;
	uint32_t vslot;
	double t0, dt;
	uint8_t b;

	rc = rmem_create(c, "victim", 1 * MiB, 0, &victim);
	who = holder(d, "victim");
	ok(rc == 0 && who >= 0 && who < NSRV, "named region victim is on s%d", who);
	if (who < 0 || who >= NSRV) {
		skip(9, "no victim");
		return;
	}
	vslot = slot_of(&victim);
	region_fill(c, &victim, 4096, 77);
	for (int i = 0; i < NMAX && (n < N || others == 0 || others == n); i++) {
		if (rmem_alloc(c, 1 * MiB, 0, &r[i]))
			break;
		n++;
		bad += region_fill(c, &r[i], 8192, 500 + (uint64_t)i) != 0;
		others += slot_of(&r[i]) != vslot;
	}
	ok(n >= N && bad == 0 && others > 0 && others < n,
	   "%d regions written, %d of them on the other servers", n, others);
	rmem_close(d[who]);
	d[who] = NULL;
	{
		char what[32];

		snprintf(what, sizeof what, "kill-server %d", who);
		ok(run_hook(what) == 0, "kill -9 of s%d", who);
	}
	t0 = now_s();
	rc = rmem_read(c, &victim, 0, &b, 1);
	dt = now_s() - t0;
	diag("the first read of a region of the dead server: %s after %.0f ms", rmem_strerror(rc),
	     dt * 1e3);
	ok(rc == -EHOSTDOWN && dt < (resume_ms / 1000.0 + 3) * slow,
	   "its first call is -EHOSTDOWN, after %.0f ms (resume_ms %d): no hang", dt * 1e3,
	   resume_ms);
	t0 = now_s();
	rc = rmem_write(c, &victim, 0, "x", 1);
	dt = now_s() - t0;
	ok(rc == -EHOSTDOWN && dt < 0.1 * slow, "then every call on its regions is -EHOSTDOWN at once"
	   " (%.1f ms)", dt * 1e3);
	bad = 0;
	for (int i = 0; i < n; i++) {
		rc = slot_of(&r[i]) == vslot ? (rmem_read(c, &r[i], 0, &b, 1) == -EHOSTDOWN ? 0 : 1) :
					       region_check(c, &r[i], 8192, 500 + (uint64_t)i);
		bad += rc != 0;
	}
	ok(bad == 0, "the other servers' regions verify; the dead one's are -EHOSTDOWN");
	bad = 0;
	for (int i = 0; i < 6; i++) {
		struct rmem_region t;

		rc = rmem_alloc(c, 1 * MiB, 0, &t);
		bad += rc != 0 || slot_of(&t) == vslot;
		if (!rc)
			rmem_free(c, &t);
	}
	ok(bad == 0, "allocs go on, on the servers that live");
	/* Its lease ends: the key goes; the name is on a server that is gone. */
	usleep(4000 * 1000);
	ok(rmem_open(c, "victim", RMEM_READ, &vh) == -EHOSTDOWN,
	   "after its lease, opening its named region is -EHOSTDOWN (the record stays)");
	/* It comes back (a fresh start here: its memory is new). */
	{
		char what[32];

		snprintf(what, sizeof what, "start-server %d", who);
		ok(run_hook(what) == 0, "s%d starts again with the same id", who);
	}
	rc = -1;
	for (int i = 0; i < 50 && rc != -ENOENT && rc != 0; i++) {
		rc = rmem_open(c, "victim", RMEM_READ, &vh);
		if (rc != -ENOENT && rc != 0)
			usleep(200 * 1000);
	}
	ok(rc == -ENOENT, "once back, the cluster client reaches it again; its fresh memory has no"
	   " victim, so the record is dropped (-ENOENT)");
	rc = rmem_create(c, "victim", 4096, 0, &rx);
	ok(rc == 0, "and the name can be created again (rc %d)", rc);
	if (!rc) {
		rmem_free(c, &rx);
		rmem_unlink(c, "victim");
	}
	for (int i = 0; i < n; i++)
		if (slot_of(&r[i]) != vslot)
			rmem_free(c, &r[i]);
	d[who] = direct(who);
}

/* ---- the watch's history compacted away ------------------------------------------------------- */

/* Waits up to 20 s for the summed pool to be want bytes: 0, or 1. */
static int pool_becomes(rmem_client *c, uint64_t want)
{
	struct rmem_stats st = { 0 };

	for (int i = 0; i < 200; i++) {
		if (rmem_stats(c, &st) == 0 && st.pool_bytes == want)
			return 0;
		usleep(100 * 1000);
	}
	diag("pool_bytes %llu, want %llu", (unsigned long long)st.pool_bytes,
	     (unsigned long long)want);
	return 1;
}

static void test_compaction(rmem_client *c)
{
	char what[64];

	ok(pool_becomes(c, NSRV * 64 * MiB) == 0, "the client sees three servers");
	snprintf(what, sizeof what, "compact-under-stop %d", (int)getpid());
	ok(run_hook(what) == 0, "while this program was stopped, etcd restarted whole, a server"
	   " zz was put and the history compacted past it");
	ok(pool_becomes(c, (NSRV + 1) * 64 * MiB) == 0,
	   "the watch, resumed below the compaction, read everything again: zz counts");
	ok(run_hook("del-fake") == 0 && pool_becomes(c, NSRV * 64 * MiB) == 0,
	   "zz deleted: watched as before");
}

int main(void)
{
	rmem_client *c, *d[NSRV] = { NULL };
	char *list;
	int i = 0;

	url = getenv("RMEM_CLUSTER_URL");
	if (getenv("RMEM_IN_VM"))
		slow = 10;
	hook = getenv("RMEM_CLUSTER_HOOK");
	list = getenv("RMEM_CLUSTER_EPS") ? strdup(getenv("RMEM_CLUSTER_EPS")) : NULL;
	if (!url || !hook || !list)
		tap_skip_all("run by tests/func/test_cluster_lib.sh");
	for (char *tok = strtok(list, " "); tok && i < NSRV; tok = strtok(NULL, " "))
		eps[i++] = tok;
	if (i != NSRV)
		tap_skip_all("RMEM_CLUSTER_EPS names fewer than three servers");

	c = cluster();
	ok(c != NULL, "rmem_connect(%s) gives a cluster client", url);
	for (i = 0; i < NSRV; i++)
		d[i] = direct(i);
	ok(d[0] && d[1] && d[2], "direct clients of the three servers");
	if (!c || !d[0] || !d[1] || !d[2])
		return tap_done();
	{
		rmem_client *x = NULL;
		struct rmem_opts o = opts();

		ok(rmem_connect("etcd://127.0.0.1:1/rmem", &o, &x) == -EHOSTUNREACH && !x,
		   "rmem_connect to an etcd that does not answer is -EHOSTUNREACH");
		ok(rmem_connect("etcd:///rmem", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/bad/name", &o, &x) == -EINVAL,
		   "a malformed etcd:// URL is -EINVAL");
		ok(rmem_connect("etcd://h:1/rmem?claim_ttl=0", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/rmem?claim_ttl=3601", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/rmem?claim_ttl=5x", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/rmem?ttl=5", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://127.0.0.1:1/rmem?claim_ttl=5", &o, &x) == -EHOSTUNREACH &&
		   rmem_connect("etcd://127.0.0.1:1?claim_ttl=3600", &o, &x) == -EHOSTUNREACH,
		   "?claim_ttl= takes 1 to 3600 s and nothing else");
		ok(rmem_connect("etcd://h:1/rmem?repair_grace_ms=86400001", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/rmem?repair_grace_ms=", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/rmem?repair_grace_ms=-1", &o, &x) == -EINVAL &&
		   rmem_connect("etcd://h:1/rmem?repair_grace_ms=5&repair_grace_ms=5", &o, &x) ==
			   -EINVAL &&
		   rmem_connect("etcd://127.0.0.1:1/rmem?repair_grace_ms=0", &o, &x) ==
			   -EHOSTUNREACH &&
		   rmem_connect("etcd://127.0.0.1:1?redundancy=2+1&repair_grace_ms=86400000", &o, &x) ==
			   -EHOSTUNREACH,
		   "?repair_grace_ms= takes 0 to 86400000, once");
	}
	test_pool(c);
	test_spread(d);
	test_150(c);
	test_post_move(d);
	test_close_fast();
	test_async(c);
	test_names(c, d);
	test_leader(c);
	test_comeback(c, d);
	test_death(c, d);
	test_compaction(c);
	rmem_close(c);
	for (i = 0; i < NSRV; i++)
		rmem_close(d[i]);
	free(list);
	return tap_done();
}
