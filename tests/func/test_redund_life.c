/*
 * test_redund_life.c - redundant regions against their client's threads (issue 30).
 *
 * Against a real 3-member etcd and five rmemd (s0..s4) that
 * tests/func/test_redund_life.sh starts; this program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_CLUSTER_HOOK  the script's hook: kill I (kill -9 of sI), fresh I
 *                      (sI started again, its memory gone), stop I and cont I
 *                      (SIGSTOP, SIGCONT), pieces NAME (the index of the
 *                      server of each piece, in order), made NAME I (the
 *                      layout generation that made piece I)
 *
 * Checks, in three acts, as a program with many threads on one client meets
 * them (rmem.h: any number of threads may call on the same client at once;
 * only rmem_close must not race).
 * 1. rmem_free of a 2+1 region while four threads of the same client read
 *    it (pages, reads across pieces), write it (the same bytes again) and
 *    post reads on it: every call that began after rmem_free returned is
 *    -EINVAL, every call that overlapped it is 0 with the right bytes or
 *    -EINVAL, nothing crashes (under ASan: no report); in every other round
 *    two threads free the handle at once: one gets 0, the other -EINVAL;
 *    named regions too, whose writer key the free gives back once (another
 *    client then opens the name for writing); afterwards the servers hold
 *    as many regions as before (no piece left behind).
 * 2. Pieces swapped under readers: a named 2+1 region written by one
 *    client W (writer, rmem_repair in a loop on a thread of its own) and
 *    opened read-only by another, R; threads of both read it without a
 *    pause (and one of W writes the same bytes again, so that a dead
 *    parity piece is noticed) while, three times, the server of one piece
 *    dies (kill -9): W's repair rebuilds the piece elsewhere and swaps W's
 *    handle of it, R's refresh follows the record and swaps R's, and the
 *    dead server starts again empty.  Each time the record moves the
 *    piece and both clients end up reading without rebuilding; no call of
 *    any reader fails or returns a wrong byte.
 * 3. A stalled piece server: W (timeout 1 s) and R (8 s) on a named 2+1
 *    region; the server of piece 0 is stopped (SIGSTOP, shorter than its
 *    3 s lease): W's calls time out and W repairs the piece elsewhere,
 *    R's wait and go on with the old piece, in; then the server of piece
 *    1 dies, so that R looks at the record and follows it, swapping the
 *    piece 0 its three threads read.  W repaired piece 0 once (its made
 *    moves by one: no call that met the stalled piece put the new one
 *    out), both clients end up reading without rebuilding, and no call
 *    failed or read a wrong byte.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rmem.h>

#include "redund_prog.h"
#include "tap.h"
#include "util.h"

#define KiB 1024ull
#define LEN (512 * KiB)
#define SWAP_LEN (1024 * KiB)
#define NWORK 4

static const char *base_url;

/* ---- the workers ------------------------------------------------------------------ */

enum kind { PAGES, SPANS, WRITES, POSTED };

struct worker {
	pthread_t t;
	rmem_client *c;
	struct rmem_region r;
	const unsigned char *model;
	uint64_t len;
	enum kind kind;
	unsigned seed;
	const int *freed;  /* act 1: set once rmem_free returned */
	const int *stop;   /* act 2: set when the act ends */
	/* What it saw. */
	unsigned long ops, einval, wrong, late;
	unsigned long other;
	int first_other;
};

static uint64_t rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 4;
}

/* One call of w's kind: its status; *wrong when it read bytes not the model's. */
static int one_op(struct worker *w, unsigned char *buf, bool *wrong)
{
	uint64_t off, n;
	int rc;

	*wrong = false;
	switch (w->kind) {
	case PAGES:
		off = rnd(&w->seed) % (w->len / 4096) * 4096;
		rc = rmem_read(w->c, &w->r, off, buf, 4096);
		*wrong = rc == 0 && memcmp(buf, w->model + off, 4096);
		return rc;
	case SPANS:
		n = 1 + rnd(&w->seed) % (64 * KiB);
		off = rnd(&w->seed) % (w->len - n);
		rc = rmem_read(w->c, &w->r, off, buf, n);
		*wrong = rc == 0 && memcmp(buf, w->model + off, n);
		return rc;
	case WRITES:
		n = 1 + rnd(&w->seed) % (16 * KiB);
		off = rnd(&w->seed) % (w->len - n);
		return rmem_write(w->c, &w->r, off, w->model + off, n);
	case POSTED: {
		struct rmem_completion cq;

		n = 1 + rnd(&w->seed) % (32 * KiB);
		off = rnd(&w->seed) % (w->len - n);
		rc = rmem_post_read(w->c, &w->r, off, buf, n, 77);
		if (rc)
			return rc;
		rc = rmem_poll(w->c, &cq, 1, 10000);
		if (rc != 1)
			return rc < 0 ? rc : -ETIME;
		if (cq.cookie != 77)
			return -EBADMSG;
		*wrong = cq.status == 0 && memcmp(buf, w->model + off, n);
		return cq.status;
	}
	}
	return -EINVAL;
}

/* Act 1: until a call that began after the free is refused. */
static void *free_worker(void *arg)
{
	struct worker *w = arg;
	unsigned char *buf = malloc(64 * KiB);

	while (buf && w->ops < 10000000) {
		int after = __atomic_load_n(w->freed, __ATOMIC_ACQUIRE);
		bool wrong;
		int rc = one_op(w, buf, &wrong);

		__atomic_add_fetch(&w->ops, 1, __ATOMIC_RELEASE);
		w->wrong += wrong;
		if (rc == -EINVAL) {
			w->einval++;
			if (after)
				break;
		} else if (after) {
			w->late++; /* began after the free, and was not refused */
			if (!w->first_other)
				w->first_other = rc;
		} else if (rc) {
			if (!w->other++)
				w->first_other = rc;
		}
	}
	free(buf);
	return NULL;
}

/* Act 2: until told to stop. */
static void *swap_worker(void *arg)
{
	struct worker *w = arg;
	unsigned char *buf = malloc(64 * KiB);

	while (buf && !__atomic_load_n(w->stop, __ATOMIC_ACQUIRE)) {
		bool wrong;
		int rc = one_op(w, buf, &wrong);

		w->ops++;
		w->wrong += wrong;
		if (rc && !w->other++) {
			w->first_other = rc;
			diag("%s %u: %s", w->kind == WRITES ? "writer" : "reader", w->seed,
			     rmem_strerror(rc));
		}
	}
	free(buf);
	return NULL;
}

/* ---- act 1: rmem_free under the client's other threads ------------------------------- */

struct freer {
	pthread_t t;
	rmem_client *c;
	const struct rmem_region *r;
	pthread_barrier_t *bar;
	int rc;
};

static void *free_one(void *arg)
{
	struct freer *f = arg;

	pthread_barrier_wait(f->bar);
	f->rc = rmem_free(f->c, f->r);
	return NULL;
}

struct act1 {
	unsigned rounds, crashes_none, late, wrong, other, einval_seen, double_ok, doubles;
	int first_other;
	unsigned long ops;
};

/* One round: r (in c, filled with model) used by NWORK threads, then freed
 * (by two threads at once when twice): 0 when the free said 0. */
static int free_round(rmem_client *c, struct rmem_region *r, const unsigned char *model,
		      unsigned round, bool twice, struct act1 *a)
{
	struct worker w[NWORK];
	int freed = 0, stop = 0, rc = -1;
	uint64_t until = now_ms() + 30000;

	for (unsigned i = 0; i < NWORK; i++) {
		w[i] = (struct worker){ .c = c, .r = *r, .model = model, .len = LEN,
					.kind = (enum kind)i, .seed = round * 16 + i, .freed = &freed,
					.stop = &stop };
		pthread_create(&w[i].t, NULL, free_worker, &w[i]);
	}
	/* Every thread well inside its calls first; the free then lands
	 * somewhere in the middle of some of them. */
	for (bool all = false; !all && now_ms() < until; sleep_ms(1)) {
		all = true;
		for (unsigned i = 0; i < NWORK; i++)
			all = all && __atomic_load_n(&w[i].ops, __ATOMIC_ACQUIRE) >= 8 + round % 5;
	}
	if (twice) {
		pthread_barrier_t bar;
		struct freer f[2];

		pthread_barrier_init(&bar, NULL, 2);
		for (unsigned i = 0; i < 2; i++) {
			f[i] = (struct freer){ .c = c, .r = r, .bar = &bar };
			pthread_create(&f[i].t, NULL, free_one, &f[i]);
		}
		for (unsigned i = 0; i < 2; i++)
			pthread_join(f[i].t, NULL);
		pthread_barrier_destroy(&bar);
		a->doubles++;
		if ((f[0].rc == 0 && f[1].rc == -EINVAL) || (f[1].rc == 0 && f[0].rc == -EINVAL))
			a->double_ok++;
		else
			diag("round %u: two frees at once: %d and %d", round, f[0].rc, f[1].rc);
		rc = f[0].rc == 0 || f[1].rc == 0 ? 0 : -1;
	} else {
		rc = rmem_free(c, r);
	}
	__atomic_store_n(&freed, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < NWORK; i++) {
		pthread_join(w[i].t, NULL);
		a->ops += w[i].ops;
		a->late += w[i].late;
		a->wrong += w[i].wrong;
		a->other += w[i].other;
		a->einval_seen += w[i].einval > 0;
		if ((w[i].other || w[i].late) && !a->first_other) {
			a->first_other = w[i].first_other;
			diag("round %u, thread %u: %lu calls, %lu failed (first: %s), %lu after the free "
			     "not refused",
			     round, i, w[i].ops, w[i].other, rmem_strerror(w[i].first_other), w[i].late);
		}
	}
	a->rounds++;
	return rc;
}

static uint64_t regions_held(rmem_client *c)
{
	struct rmem_stats st;

	return rmem_stats(c, &st) == 0 ? st.regions : UINT64_MAX;
}

static void act1(void)
{
	char url[1024];
	unsigned char *model = malloc(LEN);
	struct act1 a = { 0 };
	rmem_client *c, *o;
	uint64_t before;
	int rc, frees_ok = 0, reopen_ok = 0, nnamed = 0;

	snprintf(url, sizeof url, "%s?redundancy=2+1&repair_grace_ms=0", base_url);
	c = connect_url(url, 300, 5000, &rc);
	o = c ? connect_url(base_url, 300, 5000, &rc) : NULL;
	if (!ok(c && o && model, "two cluster clients (2+1 and plain): %s", rmem_strerror(rc))) {
		skip(5, "no client");
		return;
	}
	before = regions_held(c);
	for (unsigned round = 0; round < 16; round++) {
		struct rmem_region r;
		char name[64];
		bool named = round % 4 == 3;

		pattern(model, LEN, round);
		snprintf(name, sizeof name, "life/%u", round);
		rc = named ? rmem_create(c, name, LEN, 0, &r) : rmem_alloc(c, LEN, 0, &r);
		if (!rc)
			rc = rmem_write(c, &r, 0, model, LEN);
		if (rc) {
			diag("round %u: %s", round, rmem_strerror(rc));
			break;
		}
		frees_ok += free_round(c, &r, model, round, round % 2 == 1, &a) == 0;
		if (named) {
			struct rmem_region w;

			/* The writer key went with the free, once: the name
			 * takes another writer. */
			nnamed++;
			rc = rmem_open(o, name, RMEM_READ | RMEM_WRITE, &w);
			if (rc == 0) {
				reopen_ok++;
				rmem_free(o, &w);
			} else {
				diag("%s opened for writing after the free: %s", name, rmem_strerror(rc));
			}
			rmem_unlink(o, name);
		}
	}
	diag("%u rounds, %lu calls", a.rounds, a.ops);
	ok(a.rounds == 16 && frees_ok == 16, "16 rounds, each handle freed (0) under four busy threads");
	ok(a.late == 0 && a.einval_seen == a.rounds * NWORK,
	   "every call that began after rmem_free returned is -EINVAL (%u late)", a.late);
	ok(a.other == 0 && a.wrong == 0,
	   "every call that overlapped the free is 0 with the right bytes or -EINVAL "
	   "(%u failed otherwise, first %d; %u wrong)", a.other, a.first_other, a.wrong);
	ok(a.double_ok == a.doubles, "two threads freeing one handle at once: one 0, one -EINVAL (%u of %u)",
	   a.double_ok, a.doubles);
	ok(reopen_ok == nnamed, "a named region's writer key is given back by the free (%d of %d reopened)",
	   reopen_ok, nnamed);
	/* (The frees' pieces are back on their servers once the free has
	 * returned: the count is exact.) */
	ok(regions_held(c) == before, "no piece left on a server: %llu regions, as before",
	   (unsigned long long)regions_held(c));
	rmem_close(o);
	rmem_close(c);
	free(model);
}

/* ---- act 2: pieces swapped under readers ----------------------------------------------- */

struct repairer {
	pthread_t t;
	rmem_client *c;
	const struct rmem_region *r;
	const int *stop;
	unsigned long calls, repaired, failed;
	int first;
};

static void *repair_loop(void *arg)
{
	struct repairer *p = arg;

	while (!__atomic_load_n(p->stop, __ATOMIC_ACQUIRE)) {
		int rc = rmem_repair(p->c, p->r);

		p->calls++;
		/* -EHOSTDOWN: the region is readable through fewer than K+R
		 * pieces and no repair could be made yet (a dead server's
		 * lease has not ended, so it is still placed on). */
		if (rc && rc != -EHOSTDOWN && rc != -ENOSPC && !p->failed++)
			p->first = rc;
		sleep_ms(20);
	}
	return NULL;
}

static uint64_t degraded(rmem_client *c)
{
	struct rmem_stats st;

	return rmem_stats(c, &st) == 0 ? st.degraded_reads : UINT64_MAX;
}

/* Until c's reads have rebuilt nothing for 1.5 s (at most 30 s): true then. */
static bool settles(rmem_client *c)
{
	uint64_t end = now_ms() + 30000;
	uint64_t last = degraded(c);
	uint64_t since = now_ms();

	while (now_ms() < end) {
		uint64_t d;

		sleep_ms(100);
		d = degraded(c);
		if (d != last) {
			last = d;
			since = now_ms();
		} else if (now_ms() - since >= 1500) {
			return true;
		}
	}
	return false;
}

/* W, a 2+1 client, and R, a plain one, on one named region; NSWAP threads
 * of theirs calling on it, and W's rmem_repair in a loop. */
enum { NSWAP = 6 };

struct swap {
	rmem_client *W, *R;
	struct rmem_region wr, rr;
	unsigned char *model;
	struct worker w[NSWAP];
	struct repairer rep;
	int stop;
};

/* W (timeout wt ms) makes name and fills it with seed's pattern; R (rt ms)
 * opens it read-only: 0, or the first error. */
static int swap_open(struct swap *s, const char *name, unsigned seed, int wt, int rt)
{
	char url[1024];
	int rc;

	*s = (struct swap){ .model = malloc(SWAP_LEN) };
	snprintf(url, sizeof url, "%s?redundancy=2+1&repair_grace_ms=0", base_url);
	s->W = connect_url(url, 300, wt, &rc);
	s->R = s->W ? connect_url(base_url, 300, rt, &rc) : NULL;
	pattern(s->model, SWAP_LEN, seed);
	rc = s->R ? rmem_create(s->W, name, SWAP_LEN, 0, &s->wr) : rc;
	if (!rc)
		rc = rmem_write(s->W, &s->wr, 0, s->model, SWAP_LEN);
	if (!rc)
		rc = rmem_open(s->R, name, RMEM_READ, &s->rr);
	return rc;
}

/* The threads: the first nw of W, calls of kinds[i] seeded seed + i, the
 * others of R; then W's repairer. */
static void swap_start(struct swap *s, const enum kind *kinds, unsigned nw, unsigned seed)
{
	for (unsigned i = 0; i < NSWAP; i++) {
		s->w[i] = (struct worker){ .c = i < nw ? s->W : s->R, .r = i < nw ? s->wr : s->rr,
					   .model = s->model, .len = SWAP_LEN, .kind = kinds[i],
					   .seed = seed + i, .stop = &s->stop };
		pthread_create(&s->w[i].t, NULL, swap_worker, &s->w[i]);
	}
	s->rep = (struct repairer){ .c = s->W, .r = &s->wr, .stop = &s->stop };
	pthread_create(&s->rep.t, NULL, repair_loop, &s->rep);
}

/* Every thread stopped and joined: their calls, failures and wrong reads. */
static void swap_stop(struct swap *s, unsigned long *ops, unsigned long *errors,
		      unsigned long *wrong)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	pthread_join(s->rep.t, NULL);
	*ops = *errors = *wrong = 0;
	for (unsigned i = 0; i < NSWAP; i++) {
		pthread_join(s->w[i].t, NULL);
		*ops += s->w[i].ops;
		*errors += s->w[i].other;
		*wrong += s->w[i].wrong;
	}
}

static void swap_close(struct swap *s, const char *name)
{
	rmem_free(s->R, &s->rr);
	rmem_free(s->W, &s->wr);
	rmem_unlink(s->W, name);
	rmem_close(s->R);
	rmem_close(s->W);
	free(s->model);
}

static void act2(void)
{
	/* W: pages, spans, writes; R: pages, spans, posted reads. */
	static const enum kind kinds[NSWAP] = { PAGES, SPANS, WRITES, PAGES, SPANS, POSTED };
	struct swap s;
	int rc, moved = 0, settled = 0, back = 0;
	unsigned long errors, wrong, ops;

	rc = swap_open(&s, "swap", 99, 5000, 5000);
	if (!ok(rc == 0, "a 2+1 named region made by W and opened read-only by R: %s",
		rmem_strerror(rc))) {
		skip(4, "no region");
		return;
	}
	swap_start(&s, kinds, 3, 1000);
	for (int round = 0; round < 3; round++) {
		int srv[8], now[8], n = pieces_of("swap", srv, 8), victim = round % 3;
		uint64_t end = now_ms() + 60000;
		bool mv = false;

		if (n != 3) {
			diag("round %d: the record names %d pieces", round, n);
			break;
		}
		if (run_hook("kill %d", srv[victim])) {
			diag("round %d: kill %d failed", round, srv[victim]);
			break;
		}
		/* W's repair moves the piece (and swaps W's handle of it). */
		while (!mv && now_ms() < end) {
			sleep_ms(100);
			mv = pieces_of("swap", now, 8) == 3 && now[victim] != srv[victim];
		}
		moved += mv;
		diag("round %d: piece %d on s%d killed; %s", round, victim, srv[victim],
		     mv ? "repaired" : "not repaired in 60 s");
		/* R follows the record (its refresh swaps R's handle). */
		settled += settles(s.W) && settles(s.R);
		back += run_hook("fresh %d", srv[victim]) == 0;
	}
	swap_stop(&s, &ops, &errors, &wrong);
	diag("%lu calls; %lu rmem_repair calls", ops, s.rep.calls);
	ok(moved == 3 && back == 3, "three times a piece's server killed, the piece repaired "
	   "elsewhere (%d), the server back empty (%d)", moved, back);
	ok(settled == 3, "each time both clients end up reading without rebuilding (%d of 3)", settled);
	ok(errors == 0 && wrong == 0, "no call of W's or R's threads failed (%lu) or read a wrong "
	   "byte (%lu)", errors, wrong);
	ok(s.rep.failed == 0, "rmem_repair in a loop meanwhile: %lu calls, %lu failed (first: %s)",
	   s.rep.calls, s.rep.failed, rmem_strerror(s.rep.first));
	swap_close(&s, "swap");
}

/* ---- act 3: a stalled piece server, calls queued behind one another --------------- */

static void act3(void)
{
	static const enum kind kinds[NSWAP] = { PAGES, SPANS, PAGES, PAGES, SPANS, POSTED };
	struct swap s;
	int rc, srv[8], now[8];
	long made0, made1 = -1;
	bool moved = false, moved1 = false, wset = false, rset = false;
	unsigned long errors, wrong, ops;
	uint64_t end, t0;

	/* W gives up on a stalled server sooner than R: W repairs while R's
	 * calls still wait on the stalled one, and go on with it after. */
	rc = swap_open(&s, "stall", 7, 1000, 8000);
	if (!ok(rc == 0 && pieces_of("stall", srv, 8) == 3,
		"a 2+1 named region made by W (timeout 1 s) and opened read-only by R (8 s): %s",
		rmem_strerror(rc))) {
		skip(5, "no region");
		return;
	}
	made0 = hook_num("made stall 0");
	swap_start(&s, kinds, 2, 2000);
	sleep_ms(300);
	/* 1. Piece 0's server stalls: W's calls on it time out and W
	 * repairs it elsewhere; R's wait, and once it goes on R still reads
	 * its old piece 0, in. */
	t0 = now_ms();
	rc = run_hook("stop %d", srv[0]);
	for (end = now_ms() + 60000; !rc && !moved && now_ms() < end;) {
		sleep_ms(50);
		moved = pieces_of("stall", now, 8) == 3 && now[0] != srv[0];
	}
	run_hook("cont %d", srv[0]);
	diag("s%d stopped for %lld ms; R's degraded reads so far: %llu", srv[0],
	     (long long)(now_ms() - t0), (unsigned long long)degraded(s.R));
	if (moved)
		wset = settles(s.W);
	diag("R's degraded reads before s%d dies: %llu", srv[1], (unsigned long long)degraded(s.R));
	/* 2. Piece 1's server dies: R's reads rebuild, so R looks at the
	 * record and follows it, swapping its piece 0 (in, and read without
	 * a pause by three threads) and, once W has repaired it, piece 1. */
	rc = moved ? run_hook("kill %d", srv[1]) : -1;
	for (end = now_ms() + 60000; !rc && !moved1 && now_ms() < end;) {
		sleep_ms(100);
		moved1 = pieces_of("stall", now, 8) == 3 && now[1] != srv[1];
	}
	if (moved1) {
		wset = wset && settles(s.W);
		rset = settles(s.R);
		made1 = hook_num("made stall 0");
	}
	swap_stop(&s, &ops, &errors, &wrong);
	diag("%lu calls; piece 0 made %ld, then %ld", ops, made0, made1);
	ok(moved && moved1, "s%d stopped (SIGSTOP), then s%d killed: W repairs pieces 0 (%s) and "
	   "1 (%s) elsewhere", srv[0], srv[1], moved ? "yes" : "no", moved1 ? "yes" : "no");
	ok(made1 == made0 + 1, "piece 0 rebuilt once: no call that met the stalled piece put the "
	   "new one out (made %ld, then %ld)", made0, made1);
	ok(wset && rset, "both clients end up reading without rebuilding (W %s, R %s)",
	   wset ? "yes" : "no", rset ? "yes" : "no");
	ok(errors == 0 && wrong == 0, "no call of W's or R's threads failed (%lu) or read a wrong "
	   "byte (%lu)", errors, wrong);
	ok(run_hook("fresh %d", srv[1]) == 0, "s%d back, empty", srv[1]);
	swap_close(&s, "stall");
}

int main(void)
{
	base_url = redund_env("RMEM_CLUSTER_URL and RMEM_CLUSTER_HOOK are the script's");
	act1();
	act2();
	act3();
	return tap_done();
}
