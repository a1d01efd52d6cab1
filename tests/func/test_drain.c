/*
 * test_drain.c - draining a member (issue 32, first part): against a real
 * 3-member etcd and four rmemd (s0..s3, 64 MiB, lease_ms 1000, repair agents
 * on) that tests/func/test_drain.sh starts; this program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_CLUSTER_HOOK  the script's hook: tcp I, record-free I, drain-refused I,
 *                      drain I ARGS, undrain I ARGS, key I, listed I, metric NAME,
 *                      promcheck, regions I, status I TEXT, pieces NAME,
 *                      kill-moving NAME, held NAME, healthy NAME S, kill I,
 *                      gone I, start I
 *
 * Checks, in five acts.
 * 1. Refused for room: s0 holds 24 MiB, s1..s3 have 6 MiB free each;
 *    rmemctl cluster drain s0 exits 1 naming both figures, and writes no
 *    drain key.
 * 2. The drain under a writer and a reader: 2+1 named regions closed (the
 *    agent moves them), one held by a writer whose thread rewrites it
 *    round after round and read by another client's thread all along,
 *    each read checked word by word against the rounds acknowledged before
 *    it began (never an older one); s0 drained with --wait: it ends with
 *    nothing on s0; while draining, s0 refuses ALLOC and CREATE from a
 *    single-server client (-ESHUTDOWN), cluster clients place nothing
 *    there, rmemctl cluster lists it draining (table and JSON), its
 *    /metrics says rmem_cluster_draining 1 (promtool check passes), its
 *    STATUS= to systemd the regions left; after:
 *    no piece of any region on s0, the reader and the writer saw no error
 *    and no old word, every byte reads from a fresh client.
 * 3. Undrain: s0 takes allocations again, from a single-server client and
 *    from cluster clients' placement.
 *
 * 4. The draining member killed -9 as the repair leader begins moving a
 *    48 MiB region's piece off it: once its key is gone, the record ends
 *    healthy on live servers (a repair rebuilt the piece), every byte reads; started again from its fd store, the member is still
 *    draining, gives back the piece the move replaced, and --wait ends with
 *    nothing on it: three pieces, each in one place.
 *
 * 5. A drain while a repair is due: a 1+1 mirror; one of its two members
 *    killed -9 and gone, the other drained with --wait: one repair rebuilds
 *    the lost piece and moves the other, the record ends healthy on the two
 *    other members, every byte reads.
 *
 * RMEM_DRAIN_BENCH_MIB=N adds a closed region of N MiB to move and a plain
 * copy of its piece's bytes, both timed, as comments (bench_mib below).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rmem.h>

#include "redund_prog.h"
#include "tap.h"
#include "util.h"

#define MiB (1ull << 20)
#define RESUME_MS 300
#define NCLOSED 6
#define NSIZE (2 * MiB)
#define WSIZE MiB

static const char *base_url;
static char url21[1024];

/* sI's own endpoint, as its record says: a client that is no cluster's,
 * which placement and the records never steer. */
static rmem_client *single(int i)
{
	char ep[160];
	rmem_client *c = NULL;
	int rc;

	if (hook_line(ep, sizeof ep, "tcp %d", i))
		return NULL;
	rc = rmem_connect(ep, NULL, &c);
	if (rc)
		diag("connect %s: %s", ep, rmem_strerror(rc));
	return rc ? NULL : c;
}

/* Waits (up to 20 s) until sI's record says at most max (at_most) or at
 * least min free bytes. */
static bool record_free(int i, bool at_most, long bytes)
{
	char what[64];

	snprintf(what, sizeof what, "record-free %d", i);
	for (int t = 0; t < 200; t++) {
		long f = hook_num(what);

		if (f >= 0 && (at_most ? f <= bytes : f >= bytes))
			return true;
		if (t == 199)
			diag("s%d's record says %ld bytes free, not %s %ld", i, f,
			     at_most ? "at most" : "at least", bytes);
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	}
	return false;
}

/* ---- act 1: too little room elsewhere --------------------------------------------- */

static void act_room(void)
{
	rmem_client *s[4] = { NULL };
	struct rmem_region r[4];
	bool made = true;

	for (int i = 0; i < 4; i++) {
		s[i] = single(i);
		made = made && s[i] && rmem_alloc(s[i], i ? 58 * MiB : 24 * MiB, 0, &r[i]) == 0;
	}
	ok(made, "s0 holds 24 MiB, s1..s3 58 MiB each (single-server clients)");
	ok(record_free(0, true, 40 * MiB) && record_free(1, true, 6 * MiB) &&
	   record_free(2, true, 6 * MiB) && record_free(3, true, 6 * MiB),
	   "their records say so");
	ok(run_hook("drain-refused 0") == 0,
	   "rmemctl cluster drain s0: refused, exit 1, 'refused: s0 holds 24.0 MiB ... the other "
	   "members have 18.0 MiB free', and no drain key written");
	for (int i = 0; i < 4; i++)
		if (s[i])
			rmem_close(s[i]);
	ok(record_free(0, false, 64 * MiB) && record_free(1, false, 64 * MiB) &&
	   record_free(2, false, 64 * MiB) && record_free(3, false, 64 * MiB),
	   "freed again: every record says 64 MiB free");
}

/* ---- act 2: the drain under a writer and a reader ----------------------------------- */

/* Word w of round v: the round above, the word's index below, so a word
 * from an older round, or from another place, is seen as such. */
static uint64_t word(uint64_t v, uint64_t w)
{
	return v << 32 | w;
}

#define NANON 4
#define ASIZE (512 * 1024)

struct traffic {
	rmem_client *wc, *rc, *pc;
	struct rmem_region w, r, p;
	/* The reader's client's own anonymous 2+1 regions, which only it
	 * can move (its next calls do), read back each round. */
	struct rmem_region anon[NANON];
	unsigned char *ab[NANON];
	_Atomic uint64_t acked;        /* the last round whose write returned 0 */
	_Atomic bool stop;
	/* the writer's and the reader's, read after the join */
	uint64_t rounds, reads, old_words, bad_words, write_errs, read_errs;
	int first_write_err, first_read_err;
	uint64_t anon_reads, anon_bad, posted, posted_old, posted_bad, posted_errs;
	int first_posted_err;
};

/* Every word of a read of w (b) against the rounds acknowledged before
 * it began and after it ended: adds to *old and *bad. */
static void words_check(const uint64_t *b, uint64_t before, uint64_t after, uint64_t *old,
			uint64_t *bad)
{
	for (uint64_t i = 0; i < WSIZE / 8; i++) {
		uint64_t v = b[i] >> 32;

		if ((b[i] & 0xffffffffu) != i || v > after + 1)
			++*bad;
		else if (v < before)
			++*old; /* acknowledged over before the read began */
	}
}

static void *writer_main(void *arg)
{
	struct traffic *t = arg;
	uint64_t *b = malloc(WSIZE);

	for (uint64_t v = atomic_load(&t->acked) + 1; b && !atomic_load(&t->stop); v++) {
		int rc;

		for (uint64_t i = 0; i < WSIZE / 8; i++)
			b[i] = word(v, i);
		rc = rmem_write(t->wc, &t->w, 0, b, WSIZE);
		if (rc) {
			if (!t->write_errs++)
				t->first_write_err = rc;
			continue;
		}
		atomic_store(&t->acked, v);
		t->rounds++;
	}
	free(b);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct traffic *t = arg;
	uint64_t *b = malloc(WSIZE);

	while (b && !atomic_load(&t->stop)) {
		uint64_t before = atomic_load(&t->acked), after;
		int rc = rmem_read(t->rc, &t->r, 0, b, WSIZE);

		after = atomic_load(&t->acked);
		if (rc) {
			if (!t->read_errs++)
				t->first_read_err = rc;
			continue;
		}
		t->reads++;
		words_check(b, before, after, &t->old_words, &t->bad_words);
		for (int a = 0; a < NANON; a++) {
			rc = rmem_read(t->rc, &t->anon[a], 0, b, ASIZE);
			t->anon_reads++;
			t->anon_bad += rc != 0 || memcmp(b, t->ab[a], ASIZE) != 0;
		}
	}
	free(b);
	return NULL;
}

/* The same reads of w, posted, on a client of their own. */
static void *posted_main(void *arg)
{
	struct traffic *t = arg;
	uint64_t *b = malloc(WSIZE);

	while (b && !atomic_load(&t->stop)) {
		uint64_t before = atomic_load(&t->acked), after;
		struct rmem_completion done;
		int rc = rmem_post_read(t->pc, &t->p, 0, b, WSIZE, 7);

		while (rc == 0 && (rc = rmem_poll(t->pc, &done, 1, 5000)) == 0)
			;
		rc = rc == 1 ? done.status : rc < 0 ? rc : -ETIMEDOUT;
		after = atomic_load(&t->acked);
		if (rc) {
			if (!t->posted_errs++)
				t->first_posted_err = rc;
			continue;
		}
		t->posted++;
		words_check(b, before, after, &t->posted_old, &t->posted_bad);
	}
	free(b);
	return NULL;
}

/* Whether a data piece of name (2+1: piece 0 or 1, the ones reads go
 * to) is on s0. */
static bool data_on_s0(const char *name)
{
	int srv[8];

	return pieces_of(name, srv, 8) == 3 && (srv[0] == 0 || srv[1] == 0);
}

static int on_s0(const char *name)
{
	int srv[8], n = pieces_of(name, srv, 8), k = 0;

	for (int i = 0; i < n; i++)
		k += srv[i] == 0;
	return n ? k : -1;
}

/*
 * With RMEM_DRAIN_BENCH_MIB=N: a closed 2+1 region of N MiB ("big") is made
 * before the drain, so that the drain's time says something of the move's
 * rate; and the same bytes are then copied plainly, rmem_read from s1 and
 * rmem_write to s2 in 256 KiB steps (as a move copies), for the ratio.
 * Comments only: no check depends on a rate.
 */
static uint64_t bench_mib(void)
{
	const char *v = getenv("RMEM_DRAIN_BENCH_MIB");

	return v ? strtoull(v, NULL, 10) : 0;
}

/* ms of a plain copy of bytes, s1 to s2, in 256 KiB steps; 0 on failure. */
static uint64_t plain_copy_ms(uint64_t bytes)
{
	rmem_client *a = single(1), *b = single(2);
	struct rmem_region ra, rb;
	unsigned char *buf = malloc(256 * 1024);
	uint64_t t0 = now_ms(), ms = 0;
	bool good = a && b && buf && rmem_alloc(a, bytes, 0, &ra) == 0 &&
		    rmem_alloc(b, bytes, 0, &rb) == 0;

	t0 = now_ms();
	for (uint64_t off = 0; good && off < bytes; off += 256 * 1024)
		good = rmem_read(a, &ra, off, buf, 256 * 1024) == 0 &&
		       rmem_write(b, &rb, off, buf, 256 * 1024) == 0;
	if (good)
		ms = now_ms() - t0;
	free(buf);
	if (a)
		rmem_close(a);
	if (b)
		rmem_close(b);
	return ms ? ms : good;
}

static void act_drain(rmem_client *c)
{
	unsigned char *nb[NCLOSED];
	char nname[NCLOSED][16];
	struct traffic t = { .stop = false };
	pthread_t wt, rt, pt;
	rmem_client *s0, *p, *d;
	struct rmem_region x;
	int before = 0, rc, after;
	bool all;

	for (int i = 0; i < NCLOSED; i++) {
		nb[i] = malloc(NSIZE);
		if (!nb[i])
			exit(1);
		pattern(nb[i], NSIZE, 40 + i);
		snprintf(nname[i], sizeof nname[i], "n%d", i);
		ok(make_named(c, nname[i], nb[i], NSIZE), "%s: 2+1, 2 MiB, named, filled, closed",
		   nname[i]);
		before += on_s0(nname[i]) > 0;
	}
	if (bench_mib()) {
		unsigned char *bb = malloc(bench_mib() * MiB);
		bool made = false;

		if (bb)
			pattern(bb, bench_mib() * MiB, 99);
		/* Made until a piece of it is on s0. */
		for (int tries = 0; bb && tries < 16 && !made; tries++) {
			made = make_named(c, "big", bb, bench_mib() * MiB) && on_s0("big") > 0;
			if (!made)
				(void)rmem_unlink(c, "big");
		}
		diag("bench: a %llu MiB 2+1 region \"big\" with a piece on s0: %s",
		     (unsigned long long)bench_mib(), made ? "made" : "not made");
		free(bb);
	}
	t.wc = connect_url(url21, RESUME_MS, 5000, &rc);
	t.rc = connect_url(url21, RESUME_MS, 5000, &rc);
	/* The held one must have a data piece on s0 (the reader reads it):
	 * made until it has. */
	for (int tries = 0; tries < 16; tries++) {
		if (t.wc && rmem_create(t.wc, "w", WSIZE, 0, &t.w) == 0 && data_on_s0("w"))
			break;
		if (t.wc && rmem_unlink(t.wc, "w") == 0)
			rmem_free(t.wc, &t.w);
	}
	ok(data_on_s0("w") && before > 0,
	   "w (2+1, 1 MiB) held by a writer, with a data piece on s0; %d of the %d closed have "
	   "a piece there too", before, NCLOSED);
	ok(t.rc && rmem_open(t.rc, "w", RMEM_READ, &t.r) == 0, "another client opens w read-only");
	t.pc = connect_url(url21, RESUME_MS, 5000, &rc);
	ok(t.pc && rmem_open(t.pc, "w", RMEM_READ, &t.p) == 0,
	   "a third opens it read-only, for posted reads");
	all = true;
	for (int a = 0; a < NANON; a++) {
		all = all && (t.ab[a] = malloc(ASIZE)) != NULL;
		if (!all)
			break;
		pattern(t.ab[a], ASIZE, 80 + a);
		all = rmem_alloc(t.rc, ASIZE, 0, &t.anon[a]) == 0 &&
		      rmem_write(t.rc, &t.anon[a], 0, t.ab[a], ASIZE) == 0;
	}
	ok(all, "the reader's client allocates %d anonymous 2+1 regions of 512 KiB, filled",
	   NANON);
	{
		/* Round 1 before the reader starts: zeros are no round. */
		uint64_t *b = malloc(WSIZE);

		for (uint64_t i = 0; b && i < WSIZE / 8; i++)
			b[i] = word(1, i);
		ok(b && rmem_write(t.wc, &t.w, 0, b, WSIZE) == 0, "the writer writes round 1");
		free(b);
	}
	t.acked = 1;
	pthread_create(&wt, NULL, writer_main, &t);
	pthread_create(&rt, NULL, reader_main, &t);
	pthread_create(&pt, NULL, posted_main, &t);
	nanosleep(&(struct timespec){ .tv_nsec = 300000000 }, NULL);

	{
		uint64_t t0 = now_ms(), ms;

		ok(run_hook("drain 0 --wait --timeout 90") == 0,
		   "rmemctl cluster drain s0 --wait: ends, saying nothing is left on s0");
		ms = now_ms() - t0;
		diag("the drain took %llu ms", (unsigned long long)ms);
		if (bench_mib()) {
			uint64_t piece = bench_mib() * MiB / 2, plain = plain_copy_ms(piece);

			diag("bench: %llu MiB of big's piece moved within %llu ms (with the drain's "
			     "polls); a plain copy of as many bytes: %llu ms",
			     (unsigned long long)(piece / MiB), (unsigned long long)ms,
			     (unsigned long long)plain);
		}
	}
	ok(run_hook("key 0") == 0, "the drain key of s0 is in etcd");
	ok(run_hook("listed 0") == 0, "rmemctl cluster lists s0 draining, in its table and --json");
	ok(hook_num("metric rmem_cluster_draining") == 1, "s0's /metrics: rmem_cluster_draining 1");
	ok(run_hook("promcheck") == 0, "promtool check metrics passes on s0's page");
	ok(run_hook("status 0 'serving; draining: 0 regions left'") == 0,
	   "s0's last STATUS= to systemd: 'serving; draining: 0 regions left'");
	ok(hook_num("regions 0") == 0, "s0 holds no region (rmemctl regions on its socket)");
	all = true;
	for (int i = 0; i < NCLOSED; i++)
		all = all && on_s0(nname[i]) == 0;
	ok(all && on_s0("w") == 0, "no record places a piece on s0 any more");

	s0 = single(0);
	ok(s0 && rmem_alloc(s0, MiB, 0, &x) == -ESHUTDOWN,
	   "a single-server client's ALLOC on s0: -ESHUTDOWN (%s)", rmem_strerror(-ESHUTDOWN));
	ok(s0 && rmem_create(s0, "plain-on-s0", MiB, 0, &x) == -ESHUTDOWN,
	   "its CREATE on s0: -ESHUTDOWN");
	p = connect_url(base_url, RESUME_MS, 5000, &rc);
	all = p != NULL;
	for (int i = 0; i < 12 && all; i++)
		all = rmem_alloc(p, MiB, 0, &x) == 0;
	ok(all && rmem_create(p, "plain", MiB, 0, &x) == 0 && hook_num("regions 0") == 0,
	   "a cluster client's 12 allocations and a create: none on s0");

	/* Some more rounds after the move, then the traffic ends. */
	nanosleep(&(struct timespec){ .tv_nsec = 500000000 }, NULL);
	atomic_store(&t.stop, true);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	pthread_join(pt, NULL);
	diag("posted reader: %llu reads, %llu errors (first %s), %llu old words, %llu wrong; "
	     "anonymous regions: %llu reads, %llu wrong or failed",
	     (unsigned long long)t.posted, (unsigned long long)t.posted_errs,
	     rmem_strerror(t.first_posted_err), (unsigned long long)t.posted_old,
	     (unsigned long long)t.posted_bad, (unsigned long long)t.anon_reads,
	     (unsigned long long)t.anon_bad);
	diag("writer: %llu rounds, %llu errors (first %s); reader: %llu reads, %llu errors "
	     "(first %s), %llu old words, %llu wrong words",
	     (unsigned long long)t.rounds, (unsigned long long)t.write_errs,
	     rmem_strerror(t.first_write_err), (unsigned long long)t.reads,
	     (unsigned long long)t.read_errs, rmem_strerror(t.first_read_err),
	     (unsigned long long)t.old_words, (unsigned long long)t.bad_words);
	ok(t.rounds > 2 && t.write_errs == 0, "the writer wrote on through the drain without an error");
	ok(t.reads > 2 && t.read_errs == 0,
	   "the reader read on through the drain without an error (it followed the moved piece)");
	ok(t.old_words == 0 && t.bad_words == 0,
	   "no read returned a word older than the last round acknowledged before it began");
	ok(t.posted > 2 && t.posted_errs == 0 && t.posted_old == 0 && t.posted_bad == 0,
	   "the posted reads too: none failed, none returned an old word");
	ok(t.anon_reads > 2 && t.anon_bad == 0,
	   "the anonymous regions, moved by their own client's reads, read whole every time");
	d = connect_url(url21, RESUME_MS, 5000, &rc);
	all = d != NULL;
	for (int i = 0; i < NCLOSED && all; i++)
		all = named_reads(d, nname[i], nb[i], NSIZE);
	ok(all, "every byte of the closed regions reads from a fresh client");
	{
		uint64_t *b = malloc(WSIZE), v = atomic_load(&t.acked);
		struct rmem_region w;
		bool same = b && d && rmem_open(d, "w", RMEM_READ, &w) == 0 &&
			    rmem_read(d, &w, 0, b, WSIZE) == 0;

		for (uint64_t i = 0; same && i < WSIZE / 8; i++)
			same = b[i] == word(v, i);
		ok(same, "w reads its last round (%llu) whole from a fresh client",
		   (unsigned long long)v);
		free(b);
	}
	after = (int)hook_num("regions 0");
	ok(after == 0, "s0 still holds nothing");
	if (d)
		rmem_close(d);
	if (p)
		rmem_close(p);
	if (s0)
		rmem_close(s0);
	rmem_close(t.pc);
	rmem_close(t.rc);
	rmem_close(t.wc);
	for (int a = 0; a < NANON; a++)
		free(t.ab[a]);
	for (int i = 0; i < NCLOSED; i++)
		free(nb[i]);
}

/* ---- act 3: undrain ------------------------------------------------------------------ */

static void act_undrain(void)
{
	rmem_client *s0, *p;
	struct rmem_region x;
	int rc;

	ok(run_hook("undrain 0 --wait --timeout 20") == 0,
	   "rmemctl cluster undrain s0 --wait: s0's record says it takes regions again");
	ok(run_hook("key 0") != 0, "the drain key is gone");
	ok(hook_num("metric rmem_cluster_draining") == 0, "s0's /metrics: rmem_cluster_draining 0");
	ok(run_hook("status 0 serving") == 0, "s0's last STATUS=: 'serving' again");
	s0 = single(0);
	ok(s0 && rmem_alloc(s0, MiB, 0, &x) == 0 && rmem_free(s0, &x) == 0,
	   "a single-server client allocates on s0 again");
	p = connect_url(base_url, RESUME_MS, 5000, &rc);
	/* s0 has the most room: placement by free bytes goes there first. */
	for (int i = 0; p && i < 12; i++)
		(void)rmem_alloc(p, MiB, 0, &x);
	ok(hook_num("regions 0") > 0, "a cluster client's 12 allocations: some on s0 again (%ld)",
	   hook_num("regions 0"));
	if (p)
		rmem_close(p);
	if (s0)
		rmem_close(s0);
}

/* ---- act 4: the draining member killed mid-move ------------------------------------ */

#define BIG2 (48 * MiB)

static void act_crash(rmem_client *c)
{
	unsigned char *b = malloc(BIG2);
	bool made = false;
	rmem_client *d;
	char line[32];
	int rc;

	if (!b)
		exit(1);
	pattern(b, BIG2, 123);
	for (int tries = 0; tries < 16 && !made; tries++) {
		made = make_named(c, "big2", b, BIG2) && on_s0("big2") > 0;
		if (!made)
			(void)rmem_unlink(c, "big2");
	}
	ok(made, "big2: 2+1, 48 MiB (pieces of 24 MiB), named, closed, a piece on s0");
	ok(run_hook("drain 0") == 0 && run_hook("kill-moving big2") == 0,
	   "s0 drained again, and killed -9 as soon as the repair leader began moving big2");
	ok(run_hook("gone 0") == 0, "s0's key left etcd (its lease ended)");
	ok(run_hook("healthy big2 60") == 0,
	   "big2's record is healthy on live servers, s0 not among them: the cut move left the "
	   "record as it was, and a repair rebuilt the piece elsewhere");
	d = connect_url(url21, RESUME_MS, 5000, &rc);
	ok(d && named_reads(d, "big2", b, BIG2), "every byte of big2 reads from a fresh client");
	ok(run_hook("start 0") == 0, "s0 started again from its fd store (its memory kept)");
	ok(run_hook("listed 0") == 0 && hook_num("metric rmem_cluster_draining") == 1,
	   "it came back draining: the drain key outlived it");
	ok(run_hook("drain 0 --wait --timeout 60") == 0,
	   "drain --wait ends: s0 gave back what the move replaced, nothing is left on it");
	ok(hook_line(line, sizeof line, "held big2") == 0 && atoi(line) == 3 && on_s0("big2") == 0,
	   "3 pieces of big2 on the servers (%s), none on s0: in one place each, none lost", line);
	ok(d && named_reads(d, "big2", b, BIG2), "big2 reads whole again");
	ok(run_hook("undrain 0") == 0, "s0 undrained");
	if (d)
		rmem_close(d);
	free(b);
}

/* ---- act 5: a drain while a repair is due -------------------------------------------- */

#define MIRROR (8 * MiB)

static void act_repair(void)
{
	char url11[1024];
	unsigned char *b = malloc(MIRROR);
	bool made;
	rmem_client *c, *d;
	int srv[4] = { -1, -1 }, at[4], dr, dead, rc;

	snprintf(url11, sizeof url11, "%s?redundancy=1+1", base_url);
	c = connect_url(url11, RESUME_MS, 5000, &rc);
	if (!b || !c)
		exit(1);
	pattern(b, MIRROR, 321);
	made = make_named(c, "m", b, MIRROR) && pieces_of("m", at, 4) == 2;
	/* One of its members is drained, the other dies. */
	dr = made ? at[0] : 0;
	dead = made ? at[1] : 1;
	ok(made, "m: a 1+1 mirror of 8 MiB, named, closed, on s%d and s%d", dr, dead);
	ok(run_hook("kill %d", dead) == 0 && run_hook("gone %d", dead) == 0,
	   "s%d killed -9 and gone from etcd: m is degraded", dead);
	ok(run_hook("drain %d --wait --timeout 60", dr) == 0,
	   "s%d drained with --wait while m's repair is due: nothing is left on it", dr);
	made = run_hook("healthy m 30") == 0 && pieces_of("m", srv, 4) == 2;
	ok(made && srv[0] != dr && srv[0] != dead && srv[1] != dr && srv[1] != dead,
	   "m's record: healthy, on s%d and s%d (the lost piece rebuilt, the drained one's "
	   "moved, in one repair)", srv[0], srv[1]);
	d = connect_url(url11, RESUME_MS, 5000, &rc);
	ok(d && named_reads(d, "m", b, MIRROR), "every byte of m reads from a fresh client");
	ok(run_hook("start %d", dead) == 0 && run_hook("undrain %d", dr) == 0,
	   "s%d started again from its fd store, s%d undrained", dead, dr);
	if (d)
		rmem_close(d);
	rmem_close(c);
	free(b);
}

int main(void)
{
	rmem_client *c;
	int rc;

	base_url = redund_env("RMEM_CLUSTER_URL and RMEM_CLUSTER_HOOK are set by test_drain.sh");
	snprintf(url21, sizeof url21, "%s?redundancy=2+1", base_url);
	act_room();
	c = connect_url(url21, RESUME_MS, 5000, &rc);
	ok(c != NULL, "a 2+1 cluster client: %s", rmem_strerror(rc));
	if (!c)
		return tap_done();
	act_drain(c);
	act_undrain();
	act_crash(c);
	rmem_close(c);
	act_repair();
	return tap_done();
}
