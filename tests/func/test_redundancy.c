/*
 * test_redundancy.c - erasure-coded redundant regions (issue 21) on a
 * cluster client, against a real 3-member etcd and six rmemd of 64 MiB
 * (s0..s5), which tests/func/test_redundancy.sh starts; this program is its
 * TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME (no parameters)
 *   RMEM_CLUSTER_HOOK  "HOOK kill-server I": kill -9 of rmemd sI;
 *                      "HOOK stale-pieces NAME N": 0 when NAME's record
 *                      marks exactly N pieces stale; "HOOK sweep-server I":
 *                      0 when rmemctl cluster sweep with sI's admin socket
 *                      reclaims nothing; "HOOK listing NAME STATE N": 0 when
 *                      rmemctl cluster redundant shows NAME in STATE with N
 *                      pieces not usable
 *   RMEM_TEST_TRANSPORT "rdma": every client with transport "rdma"
 *   RMEM_TEST_REDUNDANCY K+R of the regions (default 4+2; the script starts
 *                      K+R servers, so that each holds a piece of each)
 *   RMEM_TEST_LIGHT    "1": the same checks, fewer rounds (posted 2 not 6,
 *                      threads 4 not 12) and a 4 MiB large read, not 68
 *   RMEM_TEST_SPARE    "1": the hook's "start-server K+R" starts one more
 *                      server after R deaths, and every region is repaired
 *                      onto it with rmem_repair, then R more servers die and
 *                      every byte still reads (the VM's run, over rdma://,
 *                      at 2+1: a repair over RDMA; the host's repairs are in
 *                      test_repair.sh)
 *
 * Checks: bad "?redundancy=" values -EINVAL; more pieces than servers
 * -ENOSPC; 4+2 regions of several sizes take (K+R)/K of their bytes across
 * the servers; patterns written whole and in odd pieces across chunk and
 * stripe boundaries read back byte for byte; atomics, posted allocs and
 * frees -EOPNOTSUPP; posted reads (16 at once, 1 MiB, pages, odd shapes)
 * and writes complete through rmem_poll with their cookies and the right
 * bytes, -ERANGE and -EINVAL at once; four threads on one client, one region each, writing and
 * reading at once, never hang nor see a wrong byte; a 4+2 named region
 * opened by a fresh client without
 * ?redundancy= (its record carries the layout), listed, -EACCES for a
 * read-only writer, -EEXIST for a second creator, -EBUSY for a second
 * writer until the first closes; a writer thread going
 * while s0 and s1 die (kill -9):
 * every write it made is whole (old or new, never a mix), the acknowledged
 * ones new; posted reads and writes on another thread meanwhile all
 * complete once, never with wrong bytes (nor, two deaths being within R,
 * with an error); every byte of every region still reads, and new writes go on
 * and read back; the named region opens in a fresh client and reads
 * whole, takes writes, posted and not (its record then marks the two dead
 * servers' pieces stale, a posted write's by its completion), is
 * unlinked; an alloc with four servers left is -ENOSPC; a third death
 * makes reads, synchronous and posted, -EHOSTDOWN, never wrong bytes.
 * With six servers and 4+2, every server holds one piece of every region,
 * so each death takes a piece of each.  The figures above are 4+2's; with
 * RMEM_TEST_REDUNDANCY they follow K and R (R deaths, then one more).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rmem.h>

#include "tap.h"

#define KiB 1024ull
#define MiB (1ull << 20)
#define NREG 4

static const char *base_url, *hook;
static char url42[1024];
/* The layout under test (RMEM_TEST_REDUNDANCY) and its servers. */
static int K = 4, R = 2, NP = 6;
static char kr[16] = "4+2";
static bool spare;
/* RMEM_TEST_LIGHT=1 (the VM's run over rdma://, where every byte crosses an
 * emulated NIC under TCG): the same checks with fewer rounds and a smaller
 * large read. */
static bool light;
static unsigned p_rounds_healthy = 6;
/* Chunk size: a stripe is K of them. */
#define CHUNK (4 * KiB)

static struct rmem_opts opts(void)
{
	struct rmem_opts o;
	const char *t = getenv("RMEM_TEST_TRANSPORT");

	rmem_opts_init(&o, sizeof o);
	/* A dead server is noticed after this: short, so the test is (in the
	 * test VM, under TCG, everything is ten times slower). */
	o.resume_ms = getenv("RMEM_IN_VM") ? 3000 : 300;
	o.timeout_ms = getenv("RMEM_IN_VM") ? 60000 : 5000;
	if (t && !strcmp(t, "rdma"))
		o.transport = "rdma";
	return o;
}

static rmem_client *connect_url(const char *u, int *rc)
{
	struct rmem_opts o = opts();
	rmem_client *c = NULL;

	*rc = rmem_connect(u, &o, &c);
	return c;
}

static int run_hook(const char *what)
{
	char cmd[512];

	snprintf(cmd, sizeof cmd, "%s %s", hook, what);
	return system(cmd);
}

__attribute__((format(printf, 1, 2))) static int hookf(const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return run_hook(what);
}

/* Regions and what they should hold. */
static const uint64_t sizes[NREG] = { 1 * MiB, 4 * KiB + 123, 100000, 3 * MiB + 5 };
static struct rmem_region reg[NREG];
static unsigned char *model[NREG];

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 12)) ^ seed);
}

/* Every region read whole and compared with its model: how many differ
 * (a failed read counts), the first error in *err, and in wrong (if not
 * NULL) how many reads succeeded with wrong bytes. */
static int verify_some(rmem_client *c, int *err, int *wrong)
{
	int bad = 0;

	*err = 0;
	if (wrong)
		*wrong = 0;
	for (int i = 0; i < NREG; i++) {
		unsigned char *got = malloc(sizes[i]);
		int rc = got ? rmem_read(c, &reg[i], 0, got, sizes[i]) : -ENOMEM;

		if (rc && !*err)
			*err = rc;
		if (rc || memcmp(got, model[i], sizes[i]))
			bad++;
		if (!rc && memcmp(got, model[i], sizes[i]) && wrong)
			(*wrong)++;
		free(got);
	}
	return bad;
}

static int verify_all(rmem_client *c, int *err)
{
	return verify_some(c, err, NULL);
}

/* Writes of odd shapes into region i, mirrored in its model. */
static int odd_writes(rmem_client *c, int i, unsigned seed)
{
	static const uint64_t shapes[][2] = { { 0, 1 }, { 4095, 2 }, { 4000, 9000 },
					      { 16384 - 7, 16384 + 14 }, { 12288, 4096 },
					      { 70000, 29999 } };
	unsigned char buf[40000];
	int err = 0;

	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !err; s++) {
		uint64_t off = shapes[s][0], len = shapes[s][1];

		if (off + len > sizes[i])
			continue;
		fill(buf, len, seed + (unsigned)s);
		err = rmem_write(c, &reg[i], off, buf, len);
		if (!err)
			memcpy(model[i] + off, buf, len);
	}
	return err;
}

static void bad_input(void)
{
	static const char *bad[] = { "0+1", "3+", "40+40", "4+0", "4+2x", "+2", "17+1" };
	char u[1200];
	bool all = true;
	int rc;
	rmem_client *c;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(u, sizeof u, "%s?redundancy=%s", base_url, bad[i]);
		c = connect_url(u, &rc);
		if (rc != -EINVAL || c) {
			diag("redundancy=%s: %s", bad[i], rmem_strerror(rc));
			all = false;
			rmem_close(c);
		}
	}
	ok(all, "?redundancy= 0+1, 3+, 40+40, 4+0, 4+2x, +2, 17+1: rmem_connect -EINVAL");
	snprintf(u, sizeof u, "%s?redundancy=4+2&redundancy=4+2", base_url);
	c = connect_url(u, &rc);
	ok(rc == -EINVAL && !c, "a repeated ?redundancy= is -EINVAL");
	{
		struct rmem_opts o = opts();
		rmem_client *x = NULL;

		o.redundancy = "3+";
		ok(rmem_connect(base_url, &o, &x) == -EINVAL && !x, "rmem_opts.redundancy \"3+\" is -EINVAL");
		o.redundancy = strcmp(kr, "2+1") ? "2+1" : "4+2";
		ok(rmem_connect(url42, &o, &x) == -EINVAL && !x,
		   "rmem_opts.redundancy %s against the URL's %s is -EINVAL", o.redundancy, kr);
		ok(rmem_connect("tcp://127.0.0.1:1", &o, &x) == -EINVAL && !x,
		   "rmem_opts.redundancy on a single-server endpoint is -EINVAL");
		o.redundancy = kr;
		ok(rmem_connect(url42, &o, &x) == 0 && x, "rmem_opts.redundancy %s with the URL's %s",
		   kr, kr);
		rmem_close(x);
		x = NULL;
		o.redundancy = "8+2";
		ok(rmem_connect(base_url, &o, &x) == 0 && x, "rmem_opts.redundancy 8+2 alone connects");
		if (x) {
			struct rmem_region r;

			ok(rmem_alloc(x, MiB, 0, &r) == -ENOSPC,
			   "and its allocations are redundant: 8+2 on %d servers is -ENOSPC", NP);
			rmem_close(x);
		}
	}
	snprintf(u, sizeof u, "%s?claim_ttl=5&redundancy=8+2", base_url);
	c = connect_url(u, &rc);
	ok(rc == 0 && c, "?claim_ttl=5&redundancy=8+2 connects");
	if (c) {
		struct rmem_region r;

		ok(rmem_alloc(c, MiB, 0, &r) == -ENOSPC,
		   "8+2 on %d servers: more pieces than servers, rmem_alloc -ENOSPC", NP);
		rmem_close(c);
	}
}

static uint64_t used(rmem_client *c)
{
	struct rmem_stats st;

	return rmem_stats(c, &st) == 0 ? st.used_bytes : 0;
}

/* ---- a named region -------------------------------------------------------------------- */

#define NLEN (256 * KiB + 77)
static struct rmem_region named;
static unsigned char *nmodel;

/* A fresh client of the plain URL (no ?redundancy=) opens the name and
 * reads it whole: 0 when every byte matches nmodel. */
static int fresh_reads(const char *what)
{
	struct rmem_region r;
	unsigned char *got = malloc(NLEN);
	int rc;
	rmem_client *f = connect_url(base_url, &rc);

	rc = f && got ? rmem_open(f, "red/one", RMEM_READ, &r) : -ENOMEM;
	if (!rc)
		rc = rmem_read(f, &r, 0, got, NLEN);
	if (!rc && memcmp(got, nmodel, NLEN))
		rc = -EBADMSG;
	if (rc)
		diag("%s: %s", what, rmem_strerror(rc));
	rmem_close(f);
	free(got);
	return rc;
}

static void named_before(rmem_client *c)
{
	struct rmem_name_info ni[8];
	int rc = rmem_create(c, "red/one", NLEN, 0, &named), n;
	bool listed = false;

	ok(rc == 0, "rmem_create of a %s named region: %s", kr, rmem_strerror(rc));
	nmodel = malloc(NLEN);
	fill(nmodel, NLEN, 5);
	ok(rmem_write(c, &named, 0, nmodel, NLEN) == 0, "a pattern written into it");
	ok(fresh_reads("before") == 0,
	   "a fresh client without ?redundancy= opens it and reads every byte (the record"
	   " carries the layout)");
	n = rmem_names(c, 0, ni, 8);
	for (int i = 0; i < n; i++)
		listed = listed || (!strcmp(ni[i].name, "red/one") && ni[i].length == NLEN);
	ok(listed, "rmem_names lists it with its size");
	ok(hookf("listing red/one healthy 0 %s", kr) == 0,
	   "rmemctl cluster redundant (table and --json): red/one %s healthy, %d pieces", kr, NP);
	ok(hookf("sweep-server %d", NP - 1) == 0,
	   "rmemctl cluster sweep --grace=0 with a member's socket reclaims none of its pieces");
	{
		struct rmem_region r, x;
		rmem_client *f = connect_url(base_url, &rc);

		int orc = f ? rmem_open(f, "red/one", RMEM_READ, &r) : rc;

		ok(orc == 0 && rmem_write(f, &r, 0, "x", 1) == -EACCES,
		   "a read-only opener's write is -EACCES (open: %s)", rmem_strerror(orc));
		ok(rmem_create(c, "red/one", MiB, 0, &x) == -EEXIST, "the name is won once: -EEXIST");
		ok(f && rmem_open(f, "red/one", RMEM_READ | RMEM_WRITE, &x) == -EBUSY,
		   "one writer: a second RMEM_WRITE opener is -EBUSY while the creator holds it");
		rmem_close(f);
	}
}

static void named_after(rmem_client *c)
{
	ok(fresh_reads("after") == 0, "%d servers dead: a fresh client opens the name and reads"
	   " every byte", R);
	{
		struct rmem_completion cq = { 0 };
		int n;

		/* Whole stripes only: the write is posted on the pieces, and
		 * its end (in rmem_poll) tells the record. */
		fill(nmodel + 16384, 32768, 8);
		n = rmem_post_write(c, &named, 16384, nmodel + 16384, 32768, 5);
		n = n ? n : rmem_poll(c, &cq, 1, 10000);
		ok(n == 1 && cq.status == 0 && cq.cookie == 5 && fresh_reads("posted write") == 0,
		   "the creator's posted write of whole stripes completes; a fresh opener reads it");
		ok(hookf("stale-pieces red/one %d", R) == 0,
		   "the record marks the %d pieces that missed it stale by its completion", R);
	}
	fill(nmodel + 1000, 50000, 9);
	ok(rmem_write(c, &named, 1000, nmodel + 1000, 50000) == 0 && fresh_reads("write") == 0,
	   "the creator's write goes on; a fresh opener reads it");
	ok(hookf("listing red/one degraded %d %s", R, kr) == 0,
	   "rmemctl cluster redundant: degraded, %d pieces not usable", R);
	ok(rmem_free(c, &named) == 0, "the creator closes its handle");
	{
		struct rmem_region w;
		int rc;
		rmem_client *f = connect_url(base_url, &rc);

		fill(nmodel, 3000, 11);
		rc = f ? rmem_open(f, "red/one", RMEM_READ | RMEM_WRITE, &w) : rc;
		ok(rc == 0 && rmem_write(f, &w, 0, nmodel, 3000) == 0 && rmem_free(f, &w) == 0,
		   "then another client opens it for writing and writes (%s)", rmem_strerror(rc));
		rmem_close(f);
		ok(fresh_reads("second writer") == 0, "a fresh opener reads the second writer's bytes");
	}
	ok(rmem_unlink(c, "red/one") == 0, "the name is unlinked with %d servers dead", R);
	{
		struct rmem_region r;

		ok(rmem_open(c, "red/one", RMEM_READ, &r) == -ENOENT, "then it is -ENOENT");
	}
	free(nmodel);
}

/* ---- threads on one client, one region each ---------------------------------------- */

/* Each step's piece calls hold their clients from start to finish, and
 * every region here has a piece on every server, placed in its own order:
 * steps of threads on different regions must still never wait on each
 * other in a circle (router_redund.c takes the clients in slot order). */
static unsigned t_rounds = 12;
static int t_done, t_bad;
static rmem_client *t_client;

static void *region_thread(void *arg)
{
	int i = (int)(intptr_t)arg;
	unsigned char *want = malloc(sizes[i]), *got = malloc(sizes[i]);
	int bad = !want || !got;

	for (unsigned g = 0; g < t_rounds && !bad; g++) {
		fill(want, sizes[i], 100 + (unsigned)i * 50 + g);
		/* whole, then a partial write across a stripe, then all read */
		bad = rmem_write(t_client, &reg[i], 0, want, sizes[i]) != 0;
		if (!bad && sizes[i] > 20000) {
			memset(want + 5000, (int)g, 15000);
			bad = rmem_write(t_client, &reg[i], 5000, want + 5000, 15000) != 0;
		}
		if (!bad)
			bad = rmem_read(t_client, &reg[i], 0, got, sizes[i]) != 0 ||
			      memcmp(got, want, sizes[i]) != 0;
	}
	if (!bad)
		memcpy(model[i], want, sizes[i]);
	if (bad)
		__atomic_add_fetch(&t_bad, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&t_done, 1, __ATOMIC_ACQ_REL);
	free(want);
	free(got);
	return NULL;
}

/* 0 when NREG threads' reads and writes all came back right within a
 * minute (ten in the test VM); -1 on a wrong byte or an error; -2 when they hung. */
static int threads_at_once(rmem_client *c)
{
	pthread_t th[NREG];
	struct timespec ms = { 0, 1000000 };
	/* (Under TCG in the test VM everything is ten times slower.) */
	int started = 0, limit_ms = getenv("RMEM_IN_VM") ? 600000 : 60000;

	t_client = c;
	for (int i = 0; i < NREG; i++)
		if (pthread_create(&th[i], NULL, region_thread, (void *)(intptr_t)i) == 0)
			started++;
	if (started != NREG)
		return -1;
	for (int t = 0; t < limit_ms && __atomic_load_n(&t_done, __ATOMIC_ACQUIRE) < NREG; t++)
		nanosleep(&ms, NULL);
	if (__atomic_load_n(&t_done, __ATOMIC_ACQUIRE) < NREG)
		return -2; /* (the threads are left: the test ends here) */
	for (int i = 0; i < NREG; i++)
		pthread_join(th[i], NULL);
	return t_bad ? -1 : 0;
}

/* ---- posted reads and writes ------------------------------------------------------- */

/* A small random generator of the test's own (rand() is not thread-safe). */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A shape within region i: sometimes 1 MiB, a page, or a few bytes across
 * a chunk; else any. */
static void shape(uint64_t *s, int i, uint64_t *off, size_t *len)
{
	uint64_t size = sizes[i], l;

	switch (rnd(s) % 4) {
	case 0: l = MiB; break;
	case 1: l = 4 * KiB; break;
	case 2: l = 1 + rnd(s) % 64; break;
	default: l = 1 + rnd(s) % (256 * KiB); break;
	}
	if (l > size)
		l = size;
	*off = rnd(s) % (size - l + 1);
	if (rnd(s) % 2 && l == 4 * KiB && size >= 4 * KiB)
		*off = *off / (4 * KiB) * (4 * KiB); /* a page: straight into the buffer */
	*len = (size_t)l;
}

#define PDEPTH 16

/* While servers die a posted write may fail after some of its bytes
 * landed: those bytes are then either the old or the new ones.  alt[i]
 * (when set) holds the new bytes of region i's failed writes; a byte read
 * is right when it is the model's or alt's. */
static unsigned char *alt[NREG];

static bool right_bytes(int i, uint64_t off, const unsigned char *got, size_t len)
{
	if (!memcmp(got, model[i] + off, len))
		return true;
	if (!alt[i])
		return false;
	for (size_t b = 0; b < len; b++)
		if (got[b] != model[i][off + b] && got[b] != alt[i][off + b])
			return false;
	return true;
}

/* One round: PDEPTH reads of region i posted at once, then polled.
 * Counts completions with wrong bytes, with errors (first in *err), and
 * cookies that came twice, never or unknown; the number done. */
struct pstat {
	unsigned done, wrong, errors, bad_cookie;
	int err;
};

static void posted_reads(rmem_client *c, int i, uint64_t *seed, struct pstat *st)
{
	unsigned char *buf[PDEPTH];
	uint64_t off[PDEPTH];
	size_t len[PDEPTH];
	bool seen[PDEPTH] = { false };
	unsigned posted = 0, got = 0;

	for (unsigned d = 0; d < PDEPTH; d++) {
		shape(seed, i, &off[d], &len[d]);
		buf[d] = malloc(len[d]);
		memset(buf[d], 0xee, len[d]);
		if (rmem_post_read(c, &reg[i], off[d], buf[d], len[d], 1000 + d) == 0) {
			posted++;
		} else {
			seen[d] = true;
			st->errors++;
		}
	}
	while (got < posted) {
		struct rmem_completion cq[PDEPTH];
		int n = rmem_poll(c, cq, PDEPTH, 20000);

		if (n <= 0) {
			st->bad_cookie += posted - got; /* never came */
			break;
		}
		for (int x = 0; x < n; x++) {
			uint64_t d = cq[x].cookie - 1000;

			if (d >= PDEPTH || seen[d]) {
				st->bad_cookie++;
				continue;
			}
			seen[d] = true;
			got++;
			st->done++;
			if (cq[x].status) {
				st->errors++;
				if (!st->err)
					st->err = cq[x].status;
			} else if (!right_bytes(i, off[d], buf[d], len[d])) {
				st->wrong++;
			}
		}
	}
	for (unsigned d = 0; d < PDEPTH; d++)
		free(buf[d]);
}

/* PDEPTH/4 writes of region i posted, then polled; each one acknowledged
 * goes into the model.  The shapes never overlap within a round (a
 * posted write is not ordered against another): each has its quarter. */
static void posted_writes(rmem_client *c, int i, uint64_t *seed, unsigned gen, struct pstat *st)
{
	enum { N = PDEPTH / 4 };
	unsigned char *buf[N];
	uint64_t off[N], part = sizes[i] / N;
	size_t len[N];
	unsigned posted = 0, got = 0;
	bool ok_[N] = { false };

	for (unsigned d = 0; d < N; d++) {
		len[d] = (size_t)(1 + rnd(seed) % (part < 300000 ? part : 300000));
		off[d] = d * part + rnd(seed) % (part - len[d] + 1);
		/* Every other one whole stripes (16 KiB at 4+2), when room:
		 * those are posted on the pieces, the rest made at once. */
		if (d % 2 && part >= 32 * KiB) {
			uint64_t a = (d * part + 16 * KiB - 1) / (16 * KiB) * (16 * KiB);

			len[d] = (size_t)((1 + rnd(seed) % ((part - 16 * KiB) / (16 * KiB))) * 16 * KiB);
			off[d] = a;
		}
		buf[d] = malloc(len[d]);
		fill(buf[d], len[d], gen * 10 + d);
		if (rmem_post_write(c, &reg[i], off[d], buf[d], len[d], 2000 + d) == 0)
			posted++;
		else
			st->errors++;
	}
	while (got < posted) {
		struct rmem_completion cq[N];
		int n = rmem_poll(c, cq, N, 20000);

		if (n <= 0) {
			st->bad_cookie += posted - got;
			break;
		}
		for (int x = 0; x < n; x++) {
			uint64_t d = cq[x].cookie - 2000;

			if (d >= N || ok_[d]) {
				st->bad_cookie++;
				continue;
			}
			got++;
			st->done++;
			if (cq[x].status == 0) {
				ok_[d] = true;
				memcpy(model[i] + off[d], buf[d], len[d]);
				if (alt[i])
					memcpy(alt[i] + off[d], buf[d], len[d]);
			} else {
				if (alt[i])
					memcpy(alt[i] + off[d], buf[d], len[d]);
				st->errors++;
				if (!st->err)
					st->err = cq[x].status;
			}
		}
	}
	for (unsigned d = 0; d < N; d++)
		free(buf[d]);
}

static void posted_healthy(rmem_client *c)
{
	struct pstat st = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int err;
	unsigned char page[4096], odd[50];

	for (unsigned round = 0; round < p_rounds_healthy; round++) {
		posted_writes(c, round % 2 ? 3 : 0, &seed, 30 + round, &st);
		posted_reads(c, 3, &seed, &st);
		posted_reads(c, 0, &seed, &st);
	}
	ok(st.done == p_rounds_healthy * (2 * PDEPTH + PDEPTH / 4) && st.errors == 0 &&
		   st.wrong == 0 &&
		   st.bad_cookie == 0,
	   "posted reads (16 at once: 1 MiB, pages, odd shapes) and writes complete through "
	   "rmem_poll with their cookies, every byte right (%u done, %u errors, %u wrong, %u bad "
	   "cookies, %s)", st.done, st.errors, st.wrong, st.bad_cookie, rmem_strerror(st.err));
	ok(verify_all(c, &err) == 0, "then the regions read as the posted writes left them");
	{
		/* Many partial-stripe writes posted before one poll: each ends
		 * when posted, so their completions wait in a queue; every one
		 * must come out (the queue once dropped those past its first
		 * 16, and their callers waited for ever). */
		enum { NW = 40 };
		static unsigned char wb[NW][512];
		struct rmem_completion cq[NW];
		uint64_t seen = 0;
		int posted = 0, got = 0, m;

		for (int w = 0; w < NW; w++) {
			for (size_t b = 0; b < sizeof wb[w]; b++)
				wb[w][b] = (unsigned char)(w * 7 + b);
			if (rmem_post_write(c, &reg[0], (uint64_t)w * 8192 + 100, wb[w], sizeof wb[w],
					    (uint64_t)w) == 0) {
				memcpy(model[0] + (uint64_t)w * 8192 + 100, wb[w], sizeof wb[w]);
				posted++;
			}
		}
		while (got < posted && (m = rmem_poll(c, cq, NW, 10000)) > 0)
			for (int x = 0; x < m; x++, got++)
				if (cq[x].status == 0 && cq[x].cookie < NW)
					seen |= 1ull << cq[x].cookie;
		ok(posted == NW && got == NW && seen == (1ull << NW) - 1 &&
			   verify_all(c, &err) == 0,
		   "%d partial-stripe writes posted before one poll all complete, each once "
		   "(%d completions), and read back", posted, got);
	}
	ok(rmem_post_read(c, &reg[1], sizes[1] - 10, odd, 11, 1) == -ERANGE &&
		   rmem_post_write(c, &reg[1], sizes[1], odd, 1, 1) == -ERANGE &&
		   rmem_post_read(c, &reg[1], 0, NULL, 1, 1) == -EINVAL,
	   "a posted call past the end is -ERANGE, without a buffer -EINVAL, at once");
	{
		struct rmem_completion cq[2];
		int n1, n2;

		memset(page, 0, sizeof page);
		n1 = rmem_post_read(c, &reg[0], 8192, page, 4096, 77);
		n2 = rmem_post_read(c, &reg[2], 4090, odd, 20, 78);
		n1 = n1 ? n1 : rmem_poll(c, cq, 2, 10000);
		if (n1 == 1)
			n1 += rmem_poll(c, cq + 1, 1, 10000);
		ok(n2 == 0 && n1 == 2 && cq[0].status == 0 && cq[1].status == 0 &&
			   cq[0].cookie + cq[1].cookie == 77 + 78 &&
			   !memcmp(page, model[0] + 8192, 4096) && !memcmp(odd, model[2] + 4090, 20),
		   "a posted page read and a 20 B one across two pieces");
		ok(rmem_poll(c, cq, 2, 0) == 0, "and nothing more to poll");
	}
	{
		/* Pieces' ranges of a few bytes in two runs (through the
		 * client's small-reply buffer), and of a run and a half. */
		static const uint64_t sh[][2] = { { 4095, 16384 + 2 }, { 16383, 16384 + 3 },
						  { 100, 16384 * 2 + 5000 }, { 4096 * 5 - 1, 4096 * 4 + 2 } };
		unsigned char b[3][40000];
		struct rmem_completion cq[3];
		bool right = true;

		for (size_t t = 0; t < sizeof sh / sizeof sh[0]; t++) {
			int n = 0, rc = 0;

			memset(b, 0xee, sizeof b);
			for (int i = 0; i < 3 && !rc; i++)
				rc = rmem_post_read(c, &reg[i == 1 ? 2 : 3 * (i / 2)], sh[t][0], b[i],
						    sh[t][1], (uint64_t)i);
			while (!rc && n < 3) {
				int m = rmem_poll(c, cq + n, 3 - n, 10000);

				if (m <= 0)
					break;
				n += m;
			}
			for (int x = 0; x < n; x++) {
				int i = (int)cq[x].cookie, ri = i == 1 ? 2 : 3 * (i / 2);

				right = right && cq[x].status == 0 &&
					!memcmp(b[i], model[ri] + sh[t][0], sh[t][1]) &&
					b[i][sh[t][1]] == 0xee;
			}
			right = right && !rc && n == 3;
		}
		ok(right, "posted reads whose pieces' ranges are a few bytes in two chunks, or"
		   " a chunk and a half: every byte right, none past the end");
	}
	{
		/* Over 16 MiB of each piece in one read: the piece's range
		 * goes in several requests (a daemon's largest is 16 MiB), each
		 * landing a chunk at a time from the middle of a chunk on.  Light:
		 * 4 MiB (over RDMA the NIC reads, there is no request limit). */
		const size_t big = (light ? 4 : 68) * MiB + 4096 * 3 + 100, off = 4096 + 7,
			     len = big - off - 11;
		unsigned char *want = malloc(big), *got = malloc(big);
		struct rmem_region b;
		struct rmem_completion cq = { 0 };
		int rc = want && got ? rmem_alloc(c, big, 0, &b) : -ENOMEM, n = 0;

		if (!rc) {
			fill(want, big, 61);
			memset(got, 0xee, big);
			rc = rmem_write(c, &b, 0, want, big);
		}
		if (!rc)
			rc = rmem_post_read(c, &b, off, got + off, len, 9);
		if (!rc)
			n = rmem_poll(c, &cq, 1, 60000);
		ok(!rc && n == 1 && cq.status == 0 && !memcmp(got + off, want + off, len) &&
			   got[off - 1] == 0xee && got[off + len] == 0xee,
		   "a posted read of %zu MiB from the middle of a chunk: every byte right, none"
		   " past its ends (%s, %d, %s)", big >> 20, rmem_strerror(rc), n,
		   rmem_strerror(cq.status));
		if (!rc)
			rmem_free(c, &b);
		free(want);
		free(got);
	}
}

/* Posted reads of regions 2 and 3, posted writes of region 3 and a
 * synchronous read of region 3 while servers die (main's writer thread
 * has region 0). */
static int p_stop;
static struct pstat p_st;
static unsigned p_rounds;

static void *posted_thread(void *arg)
{
	rmem_client *c = arg;
	uint64_t seed = 12345;

	unsigned char *b = malloc(sizes[3]);

	for (unsigned g = 0; !__atomic_load_n(&p_stop, __ATOMIC_ACQUIRE) && b; g++) {
		/* A synchronous read too, from mid-chunk: its pieces' ranges
		 * land a chunk at a time, or again through a buffer when a
		 * server dies under them. */
		int rc = rmem_read(c, &reg[3], 5, b, sizes[3] - 5);

		p_st.done++;
		if (rc) {
			p_st.errors++;
			p_st.err = p_st.err ? p_st.err : rc;
		} else if (!right_bytes(3, 5, b, sizes[3] - 5)) {
			p_st.wrong++;
		}
		posted_reads(c, 2 + (int)(g % 2), &seed, &p_st);
		if (g % 3 == 0)
			posted_writes(c, 3, &seed, 200 + g, &p_st);
		__atomic_store_n(&p_rounds, g + 1, __ATOMIC_RELEASE);
	}
	free(b);
	return NULL;
}

/* ---- a writer while servers die ---------------------------------------------------- */

#define WOFF 20000u   /* crosses chunk 4 KiB boundaries and a stripe's */
#define WLEN 20000u
/* Shared with the writer thread: __atomic loads and stores. */
static int w_stop, w_err;
static rmem_client *w_client;
static unsigned w_acked; /* the generation last acknowledged */

/* Until the writer acknowledged n more writes (or failed). */
static void wait_writes(unsigned n)
{
	unsigned at = __atomic_load_n(&w_acked, __ATOMIC_ACQUIRE);
	struct timespec ms = { 0, 1000000 };

	while (__atomic_load_n(&w_acked, __ATOMIC_ACQUIRE) < at + n &&
	       !__atomic_load_n(&w_err, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
}

static void *writer(void *arg)
{
	unsigned char buf[WLEN];

	(void)arg;
	for (unsigned g = 1; !__atomic_load_n(&w_stop, __ATOMIC_ACQUIRE); g++) {
		int rc;

		memset(buf, (int)(g & 0xff), sizeof buf);
		rc = rmem_write(w_client, &reg[0], WOFF, buf, WLEN);
		if (rc) {
			__atomic_store_n(&w_err, rc, __ATOMIC_RELEASE);
			break;
		}
		__atomic_store_n(&w_acked, g, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* ---- repair onto a spare server (RMEM_TEST_SPARE) ------------------------------------- */

/* After R deaths: server sNP starts, every region is repaired onto it by
 * its owner (rmem_repair), then R more of the first servers die and every
 * byte must still read, from the rebuilt pieces.  The server to kill next. */
static int repair_onto_spare(rmem_client *c)
{
	struct rmem_stats st0, st1;
	int rc = 0, err, bad, waited = 0;

	ok(hookf("start-server %d", NP) == 0, "s%d starts and registers: a server with room and"
	   " no piece", NP);
	rmem_stats(c, &st0);
	for (int i = 0; i < NREG && !rc; i++) {
		/* The client learns of the new server through its etcd watch;
		 * until then no server can take the piece (-ENOSPC): wait for
		 * that, a minute at most, not for any other error. */
		for (;;) {
			rc = rmem_repair(c, &reg[i]);
			if (rc != -ENOSPC || waited >= 600)
				break;
			struct timespec t = { 0, 100000000 };
			nanosleep(&t, NULL);
			waited++;
		}
	}
	rmem_stats(c, &st1);
	ok(rc == 0, "rmem_repair of every region: the %d lost pieces of each rebuilt on s%d (%s;"
	   " waited %d ms for the client to see it)", R, NP, rmem_strerror(rc), waited * 100);
	{
		uint64_t want = 0;

		for (int i = 0; i < NREG; i++)
			want += (uint64_t)R * ((sizes[i] + K * CHUNK - 1) / (K * CHUNK) * CHUNK);
		ok(st1.repaired_bytes - st0.repaired_bytes == want,
		   "rmem_stats: %llu bytes repaired, R pieces of each region (want %llu)",
		   (unsigned long long)(st1.repaired_bytes - st0.repaired_bytes),
		   (unsigned long long)want);
	}
	bad = verify_all(c, &err);
	ok(bad == 0, "every byte reads after the repair (%d differ, %s)", bad, rmem_strerror(err));
	for (int k = R; k < 2 * R; k++)
		ok(hookf("kill-server %d", k) == 0, "kill -9 of s%d after the repair", k);
	bad = verify_all(c, &err);
	ok(bad == 0, "%d more servers dead after the repair: every byte still reads, the rebuilt"
	   " pieces serving (%d differ, %s)", R, bad, rmem_strerror(err));
	return 2 * R;
}

int main(void)
{
	rmem_client *c;
	uint64_t u0, u1, want = 0;
	pthread_t th, pth;
	int rc, err, bad, next_kill;

	base_url = getenv("RMEM_CLUSTER_URL");
	hook = getenv("RMEM_CLUSTER_HOOK");
	if (!base_url || !hook)
		tap_skip_all("run by tests/func/test_redundancy.sh");
	if (getenv("RMEM_TEST_REDUNDANCY")) {
		if (sscanf(getenv("RMEM_TEST_REDUNDANCY"), "%d+%d", &K, &R) != 2 || K < 1 || R < 1 ||
		    K > 16 || R > 4) {
			ok(0, "RMEM_TEST_REDUNDANCY is K+R (%s)", getenv("RMEM_TEST_REDUNDANCY"));
			return tap_done();
		}
		NP = K + R;
		snprintf(kr, sizeof kr, "%d+%d", K, R);
	}
	next_kill = R;
	light = getenv("RMEM_TEST_LIGHT") && !strcmp(getenv("RMEM_TEST_LIGHT"), "1");
	if (light) {
		t_rounds = 4;
		p_rounds_healthy = 2;
	}
	spare = getenv("RMEM_TEST_SPARE") && !strcmp(getenv("RMEM_TEST_SPARE"), "1");
	snprintf(url42, sizeof url42, "%s?redundancy=%s", base_url, kr);

	bad_input();
	c = connect_url(url42, &rc);
	ok(rc == 0 && c, "rmem_connect(...?redundancy=%s)", kr);
	if (!c)
		return tap_done();

	/* ---- alloc: (K+R)/K of the bytes ---- */
	u0 = used(c);
	rc = 0;
	for (int i = 0; i < NREG && !rc; i++) {
		rc = rmem_alloc(c, sizes[i], 0, &reg[i]);
		model[i] = calloc(1, sizes[i]);
		/* each piece: ceil(size / K chunks) chunks */
		want += (uint64_t)NP * ((sizes[i] + K * CHUNK - 1) / (K * CHUNK) * CHUNK);
	}
	u1 = used(c);
	ok(rc == 0, "four %s regions (1 MiB, 4 KiB + 123, 100000 B, 3 MiB + 5)", kr);
	ok(u1 - u0 == want, "they use %llu bytes across the servers, %d pieces of 1/%d each (%.3fx"
	   " the bytes asked)", (unsigned long long)(u1 - u0), NP, K,
	   (double)(u1 - u0) / (double)(sizes[0] + sizes[1] + sizes[2] + sizes[3]));
	ok(reg[1].length == sizes[1], "a redundant region's length is the size asked");
	bad = verify_all(c, &err);
	ok(bad == 0, "new regions read as zeros");

	/* ---- patterns ---- */
	rc = 0;
	for (int i = 0; i < NREG && !rc; i++) {
		fill(model[i], sizes[i], (unsigned)i + 1);
		rc = rmem_write(c, &reg[i], 0, model[i], sizes[i]);
	}
	for (int i = 0; i < NREG && !rc; i++)
		rc = odd_writes(c, i, 40 + (unsigned)i);
	ok(rc == 0, "whole and odd-shaped writes (1 B, across chunks and stripes): %s",
	   rmem_strerror(rc));
	bad = verify_all(c, &err);
	ok(bad == 0, "every byte reads back (%d regions differ, %s)", bad, rmem_strerror(err));
	rc = threads_at_once(c);
	ok(rc == 0, "four threads on one client, one region each, write and read %u times at "
	   "once: every byte right, no hang (%s)", t_rounds, rc == -2 ? "hung" : "ok");
	if (rc == -2)
		return tap_done();
	bad = verify_all(c, &err);
	ok(bad == 0, "then every region reads as its thread left it (%d differ)", bad);
	{
		unsigned char b[100];

		ok(rmem_read(c, &reg[1], sizes[1] - 99, b, 100) == -ERANGE &&
			   rmem_write(c, &reg[1], sizes[1], b, 1) == -ERANGE,
		   "a read or write past the end is -ERANGE");
		ok(rmem_read(c, &reg[2], 4090, b, 20) == 0 && !memcmp(b, model[2] + 4090, 20),
		   "a 20 B read across two pieces");
	}
	{
		uint64_t old;
		struct rmem_region x;

		ok(rmem_cas(c, &reg[0], 0, 0, 1, &old) == -EOPNOTSUPP &&
			   rmem_faa(c, &reg[0], 8, 1, &old) == -EOPNOTSUPP,
		   "atomics on a redundant region are -EOPNOTSUPP");
		ok(rmem_post_alloc(c, MiB, 0, &x, 1) == -EOPNOTSUPP &&
			   rmem_post_free(c, &reg[0], 1) == -EOPNOTSUPP,
		   "posted allocs and frees on a redundant client are -EOPNOTSUPP");
	}
	posted_healthy(c);
	named_before(c);

	/* ---- a writer and posted calls while s0..s(R-1) die ---- */
	w_client = c;
	pthread_create(&th, NULL, writer, NULL);
	for (int i = 2; i < NREG; i++)
		if ((alt[i] = malloc(sizes[i])))
			memcpy(alt[i], model[i], sizes[i]);
	pthread_create(&pth, NULL, posted_thread, c);
	wait_writes(20);
	for (int k = 0; k < R; k++) {
		ok(hookf("kill-server %d", k) == 0, "kill -9 of s%d while a writer writes and posted"
		   " calls are in flight", k);
		wait_writes(20);
	}
	{
		unsigned at = __atomic_load_n(&p_rounds, __ATOMIC_ACQUIRE);
		struct timespec ms = { 0, 1000000 };

		/* Two more rounds of posted calls with all R dead. */
		for (int t = 0; t < 60000 && __atomic_load_n(&p_rounds, __ATOMIC_ACQUIRE) < at + 2; t++)
			nanosleep(&ms, NULL);
	}
	__atomic_store_n(&w_stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&p_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	pthread_join(pth, NULL);
	ok(p_st.wrong == 0 && p_st.bad_cookie == 0 && p_st.done > 0,
	   "posted calls (and reads) through the deaths: every completion came once, none with"
	   " wrong bytes"
	   " (a failed write's range may hold its new bytes; %u rounds, %u done, %u wrong, %u"
	   " errors: %s)", p_rounds, p_st.done, p_st.wrong, p_st.errors, rmem_strerror(p_st.err));
	ok(p_st.errors == 0, "and none failed: %d of %d pieces dead is within R (%u errors)", R, NP,
	   p_st.errors);
	ok(w_err == 0, "the writer's writes all succeeded through the deaths (%u writes, %s)",
	   w_acked, rmem_strerror(w_err));
	{
		unsigned char b[WLEN];
		bool whole = true;

		rc = rmem_read(c, &reg[0], WOFF, b, WLEN);
		for (size_t i = 1; i < WLEN; i++)
			whole = whole && b[i] == b[0];
		ok(rc == 0 && whole && b[0] == (w_acked & 0xff),
		   "its last write reads whole and new (generation %u, read %u)", w_acked, b[0]);
		memcpy(model[0] + WOFF, b, WLEN);
	}
	bad = verify_all(c, &err);
	ok(bad == 0, "%d servers dead: every byte of every region reads (%d differ, %s)", R, bad,
	   rmem_strerror(err));
	named_after(c);
	rc = 0;
	for (int i = 0; i < NREG && !rc; i++) {
		fill(model[i], sizes[i], 77 + (unsigned)i);
		rc = rmem_write(c, &reg[i], 0, model[i], sizes[i]);
	}
	for (int i = 0; i < NREG && !rc; i++)
		rc = odd_writes(c, i, 90 + (unsigned)i);
	ok(rc == 0, "writes go on with %d servers dead (%s)", R, rmem_strerror(rc));
	bad = verify_all(c, &err);
	ok(bad == 0, "and read back (%d differ, %s)", bad, rmem_strerror(err));
	{
		struct rmem_region x;

		ok(rmem_alloc(c, MiB, 0, &x) == -ENOSPC, "%d servers left: a %s alloc is -ENOSPC",
		   K, kr);
	}
	if (spare)
		next_kill = repair_onto_spare(c);

	/* ---- one death more: more than R ---- */
	ok(hookf("kill-server %d", next_kill) == 0, "kill -9 of s%d", next_kill);
	{
		int wrong;

		/* A region whose bytes all lie on live data pieces (the
		 * 4 KiB + 123 one touches two) still reads. */
		bad = verify_some(c, &err, &wrong);
		ok(bad >= NREG - 1 && wrong == 0 && err == -EHOSTDOWN,
		   "%d of %d pieces gone: reads that need a rebuild are -EHOSTDOWN (%d of %d:"
		   " %s), never wrong bytes (%d)", R + 1, NP, bad, NREG, rmem_strerror(err), wrong);
	}
	{
		unsigned char *got[NREG];
		unsigned n = 0, down = 0, right = 0, other = 0;

		/* The same, posted: each region whole, at once. */
		for (int i = 0; i < NREG; i++) {
			got[i] = malloc(sizes[i]);
			n += rmem_post_read(c, &reg[i], 0, got[i], sizes[i], 500 + (uint64_t)i) == 0;
		}
		for (unsigned d = 0; d < n;) {
			struct rmem_completion cq[NREG];
			int m = rmem_poll(c, cq, NREG, 20000);

			if (m <= 0)
				break;
			for (int x = 0; x < m; x++, d++) {
				uint64_t i = cq[x].cookie - 500;

				if (i >= NREG)
					other++;
				else if (cq[x].status == -EHOSTDOWN)
					down++;
				else if (cq[x].status == 0 && !memcmp(got[i], model[i], sizes[i]))
					right++;
				else
					other++;
			}
		}
		ok(n == NREG && down >= NREG - 1 && down + right == NREG && other == 0,
		   "and posted reads of every region: -EHOSTDOWN or right bytes, never wrong ones (%u"
		   " posted, %u -EHOSTDOWN, %u right, %u else)", n, down, right, other);
		for (int i = 0; i < NREG; i++)
			free(got[i]);
	}
	rc = 0;
	for (int i = 0; i < NREG; i++)
		rc = rc ? rc : rmem_free(c, &reg[i]);
	ok(rc == 0, "rmem_free of every region");
	ok(rmem_read(c, &reg[0], 0, &u0, 8) == -EINVAL, "a freed handle is -EINVAL");
	rmem_close(c);
	for (int i = 0; i < NREG; i++) {
		free(model[i]);
		free(alt[i]);
	}
	return tap_done();
}
