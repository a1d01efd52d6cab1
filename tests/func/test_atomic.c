/*
 * test_atomic.c - rmem_cas and rmem_faa against a real rmemd: exact totals
 * from two threads sharing one client (with posted operations in flight at
 * the same time) and from two clients at once, CAS as a lock, the old values
 * returned, and every refusal: misaligned, out of range, wrong key, another
 * client's region, a freed region.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

#define N_FAA 2000      /* per thread */
#define N_LOCKED 300    /* critical sections per thread */
#define POST_EVERY 4    /* a posted write after every 4th FAA */
#define SLOT_BYTES 64

enum { W_COUNTER = 0, W_LOCK = 8, W_GUARDED = 16, W_CAS_COUNTER = 24, THREAD_AREA = 4096 };

struct shared {
	rmem_client *c;
	struct rmem_region r;
	/* per thread: the old values FAA returned; cookies seen by any poller */
	uint64_t olds[2][N_FAA];
	int seen[2][N_FAA / POST_EVERY];
	uint8_t data[2][SLOT_BYTES];
	int errors[2];
};

struct worker {
	struct shared *sh;
	int id;
};

static void note_completions(struct shared *sh, const struct rmem_completion *out, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t t = out[i].cookie >> 32, k = out[i].cookie & 0xffffffffu;

		if (t < 2 && k < N_FAA / POST_EVERY && out[i].status == 0)
			__atomic_fetch_add(&sh->seen[t][k], 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&sh->errors[0], 1, __ATOMIC_RELAXED);
	}
}

/* FAA +1 N_FAA times; posts a write every POST_EVERY and polls now and then,
 * taking whichever thread's completions are there. */
static void *faa_worker(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	struct rmem_completion out[16];

	for (int i = 0; i < N_FAA; i++) {
		int rc = rmem_faa(sh->c, &sh->r, W_COUNTER, 1, &sh->olds[w->id][i]);

		if (rc)
			sh->errors[w->id]++;
		if (i % POST_EVERY == 0) {
			uint64_t k = (uint64_t)(i / POST_EVERY);
			uint64_t off = THREAD_AREA + ((uint64_t)w->id * 1024 + k % 16) * SLOT_BYTES;

			rc = rmem_post_write(sh->c, &sh->r, off, sh->data[w->id], SLOT_BYTES,
					     ((uint64_t)w->id << 32) | k);
			if (rc)
				sh->errors[w->id]++;
		}
		if (i % 16 == 15) {
			rc = rmem_poll(sh->c, out, 16, 0);
			if (rc < 0)
				sh->errors[w->id]++;
			else
				note_completions(sh, out, rc);
		}
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void faa_two_threads(const char *ep)
{
	static struct shared sh;
	struct worker w[2] = { { &sh, 0 }, { &sh, 1 } };
	struct rmem_completion out[64];
	pthread_t t[2];
	uint64_t value = 0, *all = malloc(sizeof(uint64_t) * 2 * N_FAA);
	int rc, exact = 0, once = 0;

	memset(&sh, 0, sizeof sh);
	memset(sh.data[0], 0xa0, SLOT_BYTES);
	memset(sh.data[1], 0xb1, SLOT_BYTES);
	rc = client_connect(ep, 10000, &sh.c);
	if (rc == 0)
		rc = rmem_alloc(sh.c, 256 * 1024, 0, &sh.r);
	if (!ok(rc == 0 && all, "faa/threads: connect and alloc (%d)", rc))
		goto out;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, faa_worker, &w[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	/* What nobody polled yet. */
	for (int tries = 0; tries < 100; tries++) {
		rc = rmem_poll(sh.c, out, 64, 100);
		if (rc <= 0)
			break;
		note_completions(&sh, out, rc);
	}
	ok(sh.errors[0] == 0 && sh.errors[1] == 0, "faa/threads: no call failed (%d, %d)",
	   sh.errors[0], sh.errors[1]);
	rc = rmem_read(sh.c, &sh.r, W_COUNTER, &value, sizeof value);
	ok(rc == 0 && value == 2 * N_FAA,
	   "faa/threads: 2 threads x %d FAA on one client: counter %llu (%d)", N_FAA,
	   (unsigned long long)value, rc);
	/* Atomic means every old value 0 .. 2N-1 came back exactly once. */
	memcpy(all, sh.olds[0], sizeof sh.olds[0]);
	memcpy(all + N_FAA, sh.olds[1], sizeof sh.olds[1]);
	qsort(all, 2 * N_FAA, sizeof *all, cmp_u64);
	for (int i = 0; i < 2 * N_FAA; i++)
		exact += all[i] == (uint64_t)i;
	ok(exact == 2 * N_FAA, "faa/threads: the old values are exactly 0 .. %d (%d right)",
	   2 * N_FAA - 1, exact);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < N_FAA / POST_EVERY; k++)
			once += sh.seen[i][k] == 1;
	ok(once == 2 * (N_FAA / POST_EVERY),
	   "faa/threads: all %d writes posted meanwhile completed once each, status 0 (%d)",
	   2 * (N_FAA / POST_EVERY), once);
out:
	rmem_close(sh.c);
	free(all);
}

static void *client_faa_worker(void *arg)
{
	struct client_region *cf = arg;

	for (int i = 0; i < N_FAA; i++)
		if (rmem_faa(cf->c, &cf->r, W_COUNTER, 3, NULL) != 0)
			cf->err++;
	return NULL;
}

/* Two clients (two sessions, each with its own region: keys belong to one
 * session) hammering at once. */
static void faa_two_clients(const char *ep_a, const char *ep_b)
{
	struct client_region cf[2] = { { NULL }, { NULL } };
	pthread_t t[2];
	uint64_t v[2] = { 0, 0 };
	int rc = client_connect(ep_a, 10000, &cf[0].c);

	if (rc == 0)
		rc = client_connect(ep_b, 10000, &cf[1].c);
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = rmem_alloc(cf[i].c, 4096, 0, &cf[i].r);
	if (!ok(rc == 0, "faa/clients: two clients with a region each (%d)", rc))
		goto out;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, client_faa_worker, &cf[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++)
		rc |= rmem_read(cf[i].c, &cf[i].r, W_COUNTER, &v[i], sizeof v[i]);
	ok(rc == 0 && cf[0].err == 0 && cf[1].err == 0 && v[0] == 3 * N_FAA &&
	   v[1] == 3 * N_FAA, "faa/clients: each counter is exactly %d (%llu, %llu; errors %d, %d)",
	   3 * N_FAA, (unsigned long long)v[0], (unsigned long long)v[1], cf[0].err,
	   cf[1].err);
out:
	rmem_close(cf[0].c);
	rmem_close(cf[1].c);
}

struct lock_worker {
	rmem_client *c;
	const struct rmem_region *r;
	uint64_t me;   /* the lock word's value while this thread holds it */
	int errors;
	int contended; /* CAS attempts that found the lock taken */
};

/* CAS as a spin lock around a non-atomic read-modify-write, and a CAS loop
 * as a counter. */
static void *lock_worker(void *arg)
{
	struct lock_worker *w = arg;

	for (int i = 0; i < N_LOCKED; i++) {
		uint64_t old = 1, v = 0;

		for (;;) {
			if (rmem_cas(w->c, w->r, W_LOCK, 0, w->me, &old) != 0) {
				w->errors++;
				return NULL;
			}
			if (old == 0)
				break;
			w->contended++;
		}
		if (rmem_read(w->c, w->r, W_GUARDED, &v, sizeof v) != 0)
			w->errors++;
		v++;
		if (rmem_write(w->c, w->r, W_GUARDED, &v, sizeof v) != 0)
			w->errors++;
		if (rmem_cas(w->c, w->r, W_LOCK, w->me, 0, &old) != 0 || old != w->me)
			w->errors++;

		if (rmem_read(w->c, w->r, W_CAS_COUNTER, &v, sizeof v) != 0)
			w->errors++;
		for (;;) {
			if (rmem_cas(w->c, w->r, W_CAS_COUNTER, v, v + 1, &old) != 0) {
				w->errors++;
				break;
			}
			if (old == v)
				break;
			v = old;
		}
	}
	return NULL;
}

static void cas_two_threads(const char *ep)
{
	struct rmem_region r;
	struct lock_worker w[2];
	rmem_client *c = NULL;
	pthread_t t[2];
	uint64_t v[4] = { 0 };
	int rc = client_connect(ep, 10000, &c);

	if (rc == 0)
		rc = rmem_alloc(c, 4096, 0, &r);
	if (!ok(rc == 0, "cas/threads: connect and alloc (%d)", rc)) {
		rmem_close(c);
		return;
	}
	for (int i = 0; i < 2; i++) {
		w[i] = (struct lock_worker){ .c = c, .r = &r, .me = 100 + (uint64_t)i };
		pthread_create(&t[i], NULL, lock_worker, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	rc = rmem_read(c, &r, 0, v, sizeof v);
	diag("cas/threads: the lock was found taken %d + %d times", w[0].contended,
	     w[1].contended);
	ok(rc == 0 && w[0].errors == 0 && w[1].errors == 0,
	   "cas/threads: no call failed (%d, %d, %d)", rc, w[0].errors, w[1].errors);
	ok(v[W_GUARDED / 8] == 2 * N_LOCKED,
	   "cas/threads: CAS lock around read+write: counter %llu == %d",
	   (unsigned long long)v[W_GUARDED / 8], 2 * N_LOCKED);
	ok(v[W_CAS_COUNTER / 8] == 2 * N_LOCKED, "cas/threads: CAS loop counter %llu == %d",
	   (unsigned long long)v[W_CAS_COUNTER / 8], 2 * N_LOCKED);
	ok(v[W_LOCK / 8] == 0, "cas/threads: the lock ends free (%llu)",
	   (unsigned long long)v[W_LOCK / 8]);
	rmem_close(c);
}

static uint64_t word_at(rmem_client *c, const struct rmem_region *r, uint64_t off)
{
	uint64_t v = UINT64_MAX;

	if (rmem_read(c, r, off, &v, sizeof v) != 0)
		return UINT64_MAX - 1;
	return v;
}

/* Old values, and every way to be refused, on one endpoint. */
static void semantics(const char *ep, const char *tr)
{
	struct rmem_region r, bad, gone, theirs;
	rmem_client *c = NULL, *other = NULL;
	uint64_t old = 0, seven = 7;
	bool rdma;
	int rc = client_connect(ep, 10000, &c);

	if (rc == 0)
		rc = client_connect(ep, 10000, &other);
	if (rc == 0)
		rc = rmem_alloc(c, 4096, 0, &r);
	if (rc == 0)
		rc = rmem_alloc(other, 4096, 0, &theirs);
	if (!ok(rc == 0, "%s: two clients, a region each (%d)", tr, rc))
		goto out;

	rc = rmem_write(c, &r, 64, &seven, sizeof seven);
	rc |= rmem_cas(c, &r, 64, 7, 9, &old);
	ok(rc == 0 && old == 7 && word_at(c, &r, 64) == 9,
	   "%s: CAS 7 -> 9 succeeds, returns old 7, stores 9 (%d, %llu)", tr, rc,
	   (unsigned long long)old);
	rc = rmem_cas(c, &r, 64, 7, 11, &old);
	ok(rc == 0 && old == 9 && word_at(c, &r, 64) == 9,
	   "%s: CAS 7 -> 11 fails, returns old 9, leaves 9 (%d, %llu)", tr, rc,
	   (unsigned long long)old);
	rc = rmem_faa(c, &r, 64, (uint64_t)-10, &old);
	ok(rc == 0 && old == 9 && word_at(c, &r, 64) == UINT64_MAX,
	   "%s: FAA wraps around: 9 + (-10) = 2^64 - 1 (%d, %llu)", tr, rc,
	   (unsigned long long)old);
	rc = rmem_faa(c, &r, 64, 1, NULL);
	rc |= rmem_cas(c, &r, 64, 0, 5, NULL);
	ok(rc == 0 && word_at(c, &r, 64) == 5, "%s: old may be NULL (%d)", tr, rc);
	rc = rmem_faa(c, &r, r.length - 8, 42, &old);
	ok(rc == 0 && old == 0 && word_at(c, &r, r.length - 8) == 42,
	   "%s: the last word of the region (%d)", tr, rc);

	old = 1234;
	rc = rmem_faa(c, &r, 4, 1, &old);
	ok(rc == -EINVAL && old == 1234, "%s: FAA at offset 4: -EINVAL (%d)", tr, rc);
	rc = rmem_cas(c, &r, 63, 0, 1, &old);
	ok(rc == -EINVAL, "%s: CAS at offset 63: -EINVAL (%d)", tr, rc);
	rc = rmem_faa(c, &r, r.length, 1, &old);
	ok(rc == -ERANGE, "%s: FAA at the region's length: -ERANGE (%d)", tr, rc);
	rc = rmem_cas(c, &r, UINT64_MAX - 7, 0, 1, &old);
	ok(rc == -ERANGE, "%s: CAS at 2^64 - 8: -ERANGE (%d)", tr, rc);
	rc = rmem_faa(c, NULL, 0, 1, &old);
	ok(rc == -EINVAL, "%s: NULL region: -EINVAL (%d)", tr, rc);
	rc = rmem_faa(NULL, &r, 0, 1, &old);
	ok(rc == -EINVAL, "%s: NULL client: -EINVAL (%d)", tr, rc);

	bad = r;
	bad.rkey ^= 1;
	rc = rmem_faa(c, &bad, 64, 100, &old);
	ok(rc == -EACCES && word_at(c, &r, 64) == 5, "%s: FAA with a wrong key: -EACCES, "
	   "value unchanged (%d)", tr, rc);
	rc = rmem_cas(c, &bad, 64, 5, 6, &old);
	ok(rc == -EACCES && word_at(c, &r, 64) == 5, "%s: CAS with a wrong key: -EACCES, "
	   "value unchanged (%d)", tr, rc);
	rc = rmem_faa(c, &theirs, 0, 1, &old);
	ok(rc == -EACCES && word_at(other, &theirs, 0) == 0,
	   "%s: FAA on another client's region, right key: -EACCES, unchanged (%d)", tr, rc);
	rc = rmem_cas(c, &theirs, 0, 0, 1, &old);
	ok(rc == -EACCES && word_at(other, &theirs, 0) == 0,
	   "%s: CAS on another client's region: -EACCES, unchanged (%d)", tr, rc);
	rc = rmem_alloc(c, 4096, 0, &gone);
	if (rc == 0)
		rc = rmem_free(c, &gone);
	rdma = client_on_rdma(c);
	if (rc == 0)
		rc = rmem_faa(c, &gone, 0, 1, &old);
	/* Over RDMA the NIC refuses the freed key. */
	ok(rc == (rdma ? -EACCES : -ENOENT), "%s: FAA on a freed region: %s (%d)", tr,
	   rdma ? "-EACCES (NIC)" : "-ENOENT", rc);
	rc = rmem_faa(c, &r, 64, 1, &old);
	ok(rc == 0 && old == 5, "%s: the client still works after the refusals (%d)", tr, rc);
out:
	rmem_close(c);
	rmem_close(other);
}

static void all(const struct rmemd *d)
{
	harness_both(d, semantics);
	faa_two_threads(d->tcp_ep);
	faa_two_threads(d->unix_ep);
	faa_two_clients(d->tcp_ep, d->unix_ep);
	cas_two_threads(d->tcp_ep);
}

int main(void)
{
	return harness_main("64M", NULL, all);
}
