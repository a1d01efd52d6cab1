/*
 * test_drain_plain.c - a drain moves named plain regions (issue 32, second
 * part): against a real 3-member etcd and four rmemd (s0..s3, 64 MiB, lease_ms
 * 1000, repair agents on) that tests/func/test_drain_plain.sh starts; this
 * program is its TAP stream.
 *
 * Environment (the script sets it):
 *   RMEM_CLUSTER_URL   etcd://H:P,H:P,H:P/NAME
 *   RMEM_CLUSTER_HOOK  the script's hook: tcp I, draining I 0|1, drain I ARGS,
 *                      undrain I ARGS, on NAME, held NAME, regions I,
 *                      kill-moving NAME, start I
 *
 * Checks, in three acts.
 * 1. Under traffic: plain named regions w (1 MiB) and h (64 KiB) made on s0
 *    (s1..s3 drained meanwhile, so placement has nothing else); a writer
 *    rewrites w round after round, a reader reads it all along, each read
 *    checked word by word against the rounds acknowledged before it began
 *    (never an older one); s0 drained with --wait: it ends with no region
 *    on s0, w and h each on one other member, the writer's rounds during
 *    the move acknowledged and every word of w, read by a fresh client,
 *    the last round's (the writes during the move landed in the new copy);
 *    the reader and writer saw no error and no old word.
 * 2. A hostile single-server client of s0 that opened h and w before the
 *    drain keeps its handles: reads and writes through them are refused by
 *    s0 (-ENOENT or -EACCES), never served from the old copy, and h and w
 *    no longer open there.
 * 3. The draining member killed -9 mid-move: k (16 MiB, a client holding
 *    it read-write) on s0, s1 the one member it can go to, stopped
 *    (SIGSTOP) so that the move's create there waits; s0 drained, and
 *    killed -9 once the move froze k (its log: the handle revoked); s1
 *    continued.  s0 started again from its fd store, still draining: the
 *    move is done again and --wait ends, k's record names one member that
 *    holds it, no other copy has a handle, every byte reads from a fresh
 *    client and through the old handle, and a write through that handle
 *    lands in the copy the record names.
 *
 * RMEM_DRAIN_BENCH_MIB=N adds a plain region of N MiB to the first drain and
 * a plain copy of as many bytes, both timed, as comments (bench_mib below).
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
#define WSIZE MiB
#define HSIZE (64 * 1024)
#define KSIZE (16 * MiB)

static const char *url;

/* sI's own endpoint, as its record says: a client that is no cluster's. */
static rmem_client *single(int i)
{
	char ep[160];
	rmem_client *c = NULL;

	if (hook_line(ep, sizeof ep, "tcp %d", i) || rmem_connect(ep, NULL, &c))
		return NULL;
	return c;
}

/* s1..s3 drained (on) or undrained, and their records say so. */
static bool others(bool on)
{
	bool good = true;

	for (int i = 1; i < 4; i++)
		good = good && run_hook("%s %d", on ? "drain" : "undrain", i) == 0;
	for (int i = 1; i < 4; i++)
		good = good && run_hook("draining %d %d", i, on) == 0;
	return good;
}

static long on(const char *name)
{
	char what[64];

	snprintf(what, sizeof what, "on %s", name);
	return hook_num(what);
}

static long held(const char *name)
{
	char what[64];

	snprintf(what, sizeof what, "held %s", name);
	return hook_num(what);
}

/* ---- act 1: under a writer and a reader ---------------------------------------------- */

static uint64_t word(uint64_t v, uint64_t w)
{
	return v << 32 | w;
}

struct traffic {
	rmem_client *wc, *rc;
	struct rmem_region w, r;
	_Atomic uint64_t acked;
	_Atomic bool stop;
	uint64_t rounds, reads, old_words, bad_words, write_errs, read_errs;
	int first_write_err, first_read_err;
};

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
		for (uint64_t i = 0; i < WSIZE / 8; i++) {
			uint64_t v = b[i] >> 32;

			if ((b[i] & 0xffffffffu) != i || v > after + 1)
				t->bad_words++;
			else if (v < before)
				t->old_words++;
		}
	}
	free(b);
	return NULL;
}

static bool is_round(rmem_client *c, const char *name, uint64_t v)
{
	struct rmem_region r;
	uint64_t *b = malloc(WSIZE), bad = 0;
	int rc = b ? rmem_open(c, name, RMEM_READ, &r) : -ENOMEM;

	if (!rc) {
		rc = rmem_read(c, &r, 0, b, WSIZE);
		for (uint64_t i = 0; !rc && i < WSIZE / 8; i++)
			bad += b[i] != word(v, i);
		rmem_free(c, &r);
	}
	if (rc || bad)
		diag("%s: %s, %llu words not of round %llu", name, rmem_strerror(rc),
		     (unsigned long long)bad, (unsigned long long)v);
	free(b);
	return !rc && !bad;
}

/*
 * With RMEM_DRAIN_BENCH_MIB=N (at most 48): a plain named region of N MiB
 * ("big") on s0 moves with the drain, and the same bytes are then copied
 * plainly, rmem_read from its new copy and rmem_write to a region on
 * another member, in 4 MiB steps (as a move copies), for the ratio.  Comments only: no check depends on a rate.
 */
static uint64_t bench_mib(void)
{
	const char *v = getenv("RMEM_DRAIN_BENCH_MIB");
	uint64_t n = v ? strtoull(v, NULL, 10) : 0;

	return n > 48 ? 48 : n;
}

/* ms of a plain copy of name's bytes (on member from, opened there) to a
 * new region on another member with room, in 4 MiB steps; 0 on failure. */
static uint64_t plain_copy_ms(const char *name, int from, uint64_t bytes)
{
	rmem_client *a = from > 0 ? single((int)from) : NULL, *b = NULL;
	struct rmem_region ra, rb;
	unsigned char *buf = malloc(4 * MiB);
	uint64_t t0, ms = 0;
	bool good = a && buf && rmem_open(a, name, RMEM_READ, &ra) == 0;

	for (int i = 1; good && i < 4 && !b; i++) {
		if (i == from || !(b = single(i)))
			continue;
		if (rmem_alloc(b, bytes, 0, &rb)) {
			rmem_close(b);
			b = NULL;
		}
	}
	good = good && b;

	t0 = now_ms();
	for (uint64_t off = 0; good && off < bytes; off += 4 * MiB) {
		size_t n = bytes - off < 4 * MiB ? (size_t)(bytes - off) : 4 * MiB;

		good = rmem_read(a, &ra, off, buf, n) == 0 && rmem_write(b, &rb, off, buf, n) == 0;
	}
	if (good)
		ms = now_ms() - t0;
	free(buf);
	if (a)
		rmem_close(a);
	if (b)
		rmem_close(b);
	return ms ? ms : good;
}

static void act_traffic(rmem_client *c, rmem_client *hc, struct rmem_region *hh,
			struct rmem_region *hw)
{
	struct traffic t = { .stop = false };
	unsigned char *hb = malloc(HSIZE);
	struct rmem_region x;
	uint64_t *b = malloc(WSIZE), at_drain;
	pthread_t wt, rt;
	int rc;

	ok(others(true), "s1..s3 drained for the set-up: placement has only s0");
	pattern(hb, HSIZE, 7);
	ok(make_named(c, "h", hb, HSIZE), "h: plain, 64 KiB, named, filled, closed");
	if (bench_mib()) {
		unsigned char *bb = malloc(bench_mib() * MiB);

		if (bb)
			pattern(bb, bench_mib() * MiB, 99);
		diag("bench: a %llu MiB plain region \"big\" on s0: %s",
		     (unsigned long long)bench_mib(),
		     bb && make_named(c, "big", bb, bench_mib() * MiB) ? "made" : "not made");
		free(bb);
	}
	t.wc = connect_url(url, 300, 5000, &rc);
	t.rc = connect_url(url, 300, 5000, &rc);
	ok(t.wc && rmem_create(t.wc, "w", WSIZE, 0, &t.w) == 0, "w: plain, 1 MiB, its writer holds it");
	ok(on("w") == 0 && on("h") == 0, "both on s0, as their records say");
	ok(others(false), "s1..s3 undrained");
	ok(t.rc && rmem_open(t.rc, "w", RMEM_READ, &t.r) == 0, "another client opens w read-only");
	ok(hc && rmem_open(hc, "h", RMEM_READ | RMEM_WRITE, hh) == 0 &&
	   rmem_open(hc, "w", RMEM_READ, hw) == 0,
	   "a single-server client of s0 opens h read-write and w read-only there");
	for (uint64_t i = 0; b && i < WSIZE / 8; i++)
		b[i] = word(1, i);
	ok(b && rmem_write(t.wc, &t.w, 0, b, WSIZE) == 0, "the writer writes round 1");
	t.acked = 1;
	pthread_create(&wt, NULL, writer_main, &t);
	pthread_create(&rt, NULL, reader_main, &t);
	nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	at_drain = atomic_load(&t.acked);
	{
		uint64_t t0 = now_ms();

		ok(run_hook("drain 0 --wait --timeout 60") == 0,
		   "rmemctl cluster drain s0 --wait: ends, nothing left on s0");
		diag("the drain took %llu ms", (unsigned long long)(now_ms() - t0));
	}
	nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	atomic_store(&t.stop, true);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	diag("writer: %llu rounds (%llu after the drain began), %llu errors (first %s); reader: "
	     "%llu reads, %llu old words, %llu bad, %llu errors (first %s)",
	     (unsigned long long)t.rounds, (unsigned long long)(t.acked - at_drain),
	     (unsigned long long)t.write_errs, rmem_strerror(t.first_write_err),
	     (unsigned long long)t.reads, (unsigned long long)t.old_words,
	     (unsigned long long)t.bad_words, (unsigned long long)t.read_errs,
	     rmem_strerror(t.first_read_err));
	ok(hook_num("regions 0") == 0, "s0 holds no region");
	ok(on("w") > 0 && on("h") > 0, "w and h: their records name other members (s%ld, s%ld)",
	   on("w"), on("h"));
	ok(held("w") == 1 && held("h") == 1, "each is held by one member, once");
	ok(t.write_errs == 0 && t.acked > at_drain + 1,
	   "the writer saw no error, and had rounds acknowledged through the drain");
	ok(t.read_errs == 0 && t.reads > 0 && t.old_words == 0 && t.bad_words == 0,
	   "the reader saw no error, no old word and no foreign one");
	{
		rmem_client *f = connect_url(url, 300, 5000, &rc);

		ok(f && is_round(f, "w", t.acked), "a fresh client reads w: every word of round %llu, "
		   "the last acknowledged", (unsigned long long)t.acked);
		ok(f && named_reads(f, "h", hb, HSIZE), "and h: every byte");
		if (f)
			rmem_close(f);
	}
	ok(rmem_read(t.rc, &t.r, 0, b, 8) == 0 && rmem_write(t.wc, &t.w, 0, b, 8) == 0,
	   "the reader's and the writer's handles still work (they followed the move)");
	ok(rmem_free(t.wc, &t.w) == 0 && rmem_free(t.rc, &t.r) == 0, "and are freed");
	(void)x;
	ok(rmem_unlink(c, "w") == 0 && rmem_unlink(c, "h") == 0, "w and h unlinked");
	if (bench_mib()) {
		long moved = hook_num("moved big");
		uint64_t plain = plain_copy_ms("big", (int)on("big"), bench_mib() * MiB);

		diag("bench: big (%llu MiB) moved in %ld ms (the agent's log: freeze, create, copy, "
		     "swap, unlink); a plain copy of as many bytes: %llu ms",
		     (unsigned long long)bench_mib(), moved, (unsigned long long)plain);
		(void)rmem_unlink(c, "big");
	}
	rmem_close(t.wc);
	rmem_close(t.rc);
	free(b);
	free(hb);
}

/* ---- act 2: a hostile client that keeps its old handles ----------------------------- */

static bool refused(int rc)
{
	return rc == -ENOENT || rc == -EACCES;
}

static void act_hostile(rmem_client *hc, struct rmem_region *hh, struct rmem_region *hw)
{
	unsigned char b[64];
	struct rmem_region x;
	int r1 = rmem_read(hc, hh, 0, b, sizeof b), r2 = rmem_write(hc, hh, 0, b, sizeof b),
	    r3 = rmem_read(hc, hw, 0, b, sizeof b);

	ok(refused(r1) && refused(r2) && refused(r3),
	   "its old handles on s0: read of h %s, write of h %s, read of w %s", rmem_strerror(r1),
	   rmem_strerror(r2), rmem_strerror(r3));
	r1 = rmem_open(hc, "h", RMEM_READ, &x);
	r2 = rmem_open(hc, "w", RMEM_READ | RMEM_WRITE, &x);
	ok(r1 == -ENOENT && r2 == -ENOENT, "h and w no longer open on s0: %s, %s",
	   rmem_strerror(r1), rmem_strerror(r2));
}

/* ---- act 3: kill -9 of the draining member mid-move -------------------------------- */

static void act_kill(rmem_client *c)
{
	unsigned char *kb = malloc(KSIZE);
	rmem_client *kc;
	struct rmem_region kr;
	int rc;

	ok(run_hook("undrain 0") == 0 && run_hook("draining 0 0") == 0, "s0 undrained");
	ok(others(true), "s1..s3 drained again for the set-up");
	pattern(kb, KSIZE, 21);
	ok(make_named(c, "k", kb, KSIZE) && on("k") == 0, "k: plain, 16 MiB, filled, on s0");
	ok(run_hook("undrain 1") == 0 && run_hook("draining 1 0") == 0,
	   "s1 undrained: the one member a move of k can go to");
	kc = connect_url(url, 300, 20000, &rc);
	ok(kc && rmem_open(kc, "k", RMEM_READ | RMEM_WRITE, &kr) == 0, "a client opens k read-write");
	ok(run_hook("stop 1") == 0, "s1 stopped (SIGSTOP): a move's create there waits");
	ok(run_hook("freeze-kill k") == 0,
	   "s0 drained; killed -9 once a move froze k (its handle revoked); s1 continued");
	ok(run_hook("undrain 2") == 0 && run_hook("undrain 3") == 0, "s2 and s3 undrained");
	ok(run_hook("start 0") == 0, "s0 started again from its fd store");
	ok(run_hook("draining 0 1") == 0, "its record says draining");
	ok(run_hook("drain 0 --wait --timeout 90") == 0, "drain s0 --wait ends: nothing left on s0");
	{
		char cp[128] = "", want[16];
		long at = on("k");

		/* --wait counts the member's open regions (its record's
		 * "regions"): a named object nobody has open is none of them,
		 * and every handle of k there went with the freeze.  So k's
		 * record is what says the move is done. */
		for (int t = 0; at == 0 && t < 600; t++) {
			nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
			at = on("k");
		}
		unsigned others = 0, busy = 0;

		(void)hook_line(cp, sizeof cp, "copies k");
		snprintf(want, sizeof want, "%ld:", at);
		diag("k: the record names s%ld; copies (server:handles): %s", at, cp[0] ? cp : "-");
		/* A mover that died with s0 leaves its unfinished copy where it
		 * was making it: named there, but no record names it, so no
		 * client opens it (rmemctl cluster sweep's to reclaim). */
		for (char *tok = strtok(cp, " "); tok; tok = strtok(NULL, " "))
			if (strncmp(tok, want, strlen(want))) {
				others++;
				busy += strcmp(strchr(tok, ':'), ":0") != 0;
			}
		ok(at > 0 && held("k") >= 1 && others <= 1 && busy == 0,
		   "k's record names s%ld, which holds it; no other copy has a handle (%u left by a "
		   "mover that died)", at, others);
	}
	{
		rmem_client *f = connect_url(url, 300, 5000, &rc);

		ok(f && named_reads(f, "k", kb, KSIZE), "a fresh client reads every byte of k");
		ok(kc && reads_back(kc, &kr, kb, KSIZE, &rc),
		   "and so does the client through its old handle (%s)", rmem_strerror(rc));
		pattern(kb, 4096, 22);
		rc = kc ? rmem_write(kc, &kr, 0, kb, 4096) : -EINVAL;
		ok(rc == 0 && f && named_reads(f, "k", kb, 4096),
		   "a write through the old handle lands in the copy the record names (%s)",
		   rmem_strerror(rc));
		if (f)
			rmem_close(f);
	}
	if (kc)
		rmem_close(kc);
	free(kb);
}

int main(void)
{
	rmem_client *c, *hc;
	struct rmem_region hh, hw;
	int rc;

	url = redund_env("run by tests/func/test_drain_plain.sh");
	c = connect_url(url, 300, 5000, &rc);
	if (!c)
		{ diag("connect %s: %s", url, rmem_strerror(rc)); return 1; }
	hc = single(0);
	act_traffic(c, hc, &hh, &hw);
	if (hc)
		act_hostile(hc, &hh, &hw);
	act_kill(c);
	if (hc)
		rmem_close(hc);
	rmem_close(c);
	return tap_done();
}
