/*
 * test_membuf.c - buffers registered by the application (rmem_register_buf,
 * rmem_unregister_buf) against a real rmemd, over TCP and the Unix socket;
 * with RMEM_TEST_TRANSPORT=rdma (tests/func/rdma, in the test VM) the
 * network endpoint's transfers use the kept registrations.  Every transfer
 * is checked byte for byte, since a stale registration moves the wrong
 * pages silently.  The library's ibv_reg_mr() calls are counted, so that
 * "a registered buffer is not registered again" is seen, not assumed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

#define KiB 1024u
#define MiB (1024u * KiB)
#define BUF_LEN (2 * MiB)   /* above malloc's mmap threshold: free() unmaps it */
#define MAX_KEPT 64

/*
 * The library's ibv_reg_mr() resolves to this definition first (the
 * executable comes first in symbol lookup), which counts the call and hands
 * it to libibverbs' own.  Never called on TCP.
 */
struct ibv_pd;
struct ibv_mr;
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);

typedef struct ibv_mr *reg_mr_fn(struct ibv_pd *, void *, size_t, int);
static unsigned long reg_mr_calls;

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	void *sym = dlvsym(RTLD_NEXT, "ibv_reg_mr", "IBVERBS_1.1");
	reg_mr_fn *real;

	if (!sym)
		return NULL;
	memcpy(&real, &sym, sizeof(real));
	reg_mr_calls++;
	return real(pd, addr, length, access);
}

struct rig {
	const char *tr;
	rmem_client *c;
	struct rmem_region r;
};

/* Writes len bytes of src at off, reads them back into dst, compares. */
static bool round_trip(struct rig *g, uint64_t off, const uint8_t *src, uint8_t *dst, size_t len)
{
	int w = rmem_write(g->c, &g->r, off, src, len);
	int rd = rmem_read(g->c, &g->r, off, dst, len);

	return w == 0 && rd == 0 && memcmp(src, dst, len) == 0;
}

/* Many synchronous transfers of every size class inside two registered
 * buffers, then posted ones. */
static void inside(struct rig *g, uint8_t *src, uint8_t *dst)
{
	static const size_t sizes[] = { 8, 64, 4 * KiB, 4 * KiB + 1, 60 * KiB, MiB, BUF_LEN };
	struct rmem_completion done[8];
	int bad = 0, got = 0, rc;

	for (unsigned i = 0; i < 3 * sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		size_t at = (BUF_LEN - len) / 2 & ~(size_t)7;

		fill_random(src + at, len, i + 1);
		memset(dst + at, 0, len);
		if (!round_trip(g, 0, src + at, dst + at, len))
			bad++;
	}
	ok(bad == 0, "%s: 21 transfers of 8 B..2 MiB inside registered buffers match (%d bad)",
	   g->tr, bad);

	fill_random(src, BUF_LEN, 99);
	memset(dst, 0, BUF_LEN);
	rc = rmem_post_write(g->c, &g->r, 0, src, BUF_LEN, 1);
	if (!rc)
		rc = rmem_post_read(g->c, &g->r, 0, dst, BUF_LEN, 2);
	while (!rc && got < 2) {
		int n = rmem_poll(g->c, done, 8, -1);

		for (int k = 0; k < n; k++)
			bad += done[k].status != 0;
		got += n > 0 ? n : 0;
		if (n < 0)
			rc = n;
	}
	ok(rc == 0 && bad == 0 && memcmp(src, dst, BUF_LEN) == 0,
	   "%s: posted write and read of 2 MiB inside registered buffers match (rc %d, %d bad)",
	   g->tr, rc, bad);
}

/* Ten 64 KiB round trips; how many registrations they made. */
static unsigned long registrations_of(struct rig *g, uint8_t *src, uint8_t *dst, int *bad)
{
	unsigned long before = reg_mr_calls;

	for (int i = 0; i < 10; i++) {
		fill_random(src, 64 * KiB, 200 + i);
		*bad += !round_trip(g, 0, src, dst, 64 * KiB);
	}
	return reg_mr_calls - before;
}

/* With src and dst registered: no registration per call; without: one per
 * call on RDMA (none on TCP, where nothing registers). */
static void registered_once(struct rig *g, uint8_t *src, uint8_t *dst)
{
	int bad = 0, a, b;
	unsigned long kept = registrations_of(g, src, dst, &bad), loose;

	a = rmem_unregister_buf(g->c, src);
	b = rmem_unregister_buf(g->c, dst);
	ok(a == 0 && b == 0, "%s: unregister both (%d %d)", g->tr, a, b);
	loose = registrations_of(g, src, dst, &bad);
	ok(bad == 0, "%s: 20 round trips of 64 KiB match (%d bad)", g->tr, bad);
	ok(kept == 0, "%s: registered buffers: no ibv_reg_mr in 20 transfers (%lu)", g->tr, kept);
	if (client_on_rdma(g->c))
		ok(loose >= 10, "%s: unregistered: ibv_reg_mr per transfer (%lu)", g->tr, loose);
	else
		ok(loose == 0, "%s: unregistered, no RDMA: no ibv_reg_mr (%lu)", g->tr, loose);
}

/* A transfer that starts inside a registered range and ends past it. */
static void partly_outside(struct rig *g, uint8_t *big)
{
	uint8_t *back = malloc(64 * KiB);
	uint8_t *from = big + MiB - 8 * KiB;
	int rc = rmem_register_buf(g->c, big, MiB);

	ok(rc == 0, "%s: register the first MiB of a buffer (%d)", g->tr, rc);
	fill_random(from, 64 * KiB, 7);
	ok(back && round_trip(g, 4096, from, back, 64 * KiB),
	   "%s: a 64 KiB transfer half outside the range still moves the right bytes", g->tr);
	ok(back && rmem_read(g->c, &g->r, 4096, big + MiB - 32, 64) == 0 &&
	   memcmp(big + MiB - 32, back, 64) == 0,
	   "%s: a 64 B read across the range's end matches", g->tr);

	rc = rmem_register_buf(g->c, big + 4096, 100);
	ok(rc == -EINVAL, "%s: a range inside a registered one: -EINVAL (%d)", g->tr, rc);
	rc = rmem_register_buf(g->c, big + MiB - 1, 2);
	ok(rc == -EINVAL, "%s: a range over a registered one's end: -EINVAL (%d)", g->tr, rc);
	rc = rmem_register_buf(g->c, big, MiB);
	ok(rc == -EINVAL, "%s: the same range again: -EINVAL (%d)", g->tr, rc);
	rc = rmem_register_buf(g->c, big + MiB, 4096);
	ok(rc == 0, "%s: the range right after it: 0 (%d)", g->tr, rc);
	rc = rmem_unregister_buf(g->c, big + MiB);
	ok(rc == 0, "%s: unregister that one (%d)", g->tr, rc);
	rc = rmem_unregister_buf(g->c, big + 8);
	ok(rc == -ENOENT, "%s: unregister from inside a range: -ENOENT (%d)", g->tr, rc);
	rc = rmem_unregister_buf(g->c, big + MiB);
	ok(rc == -ENOENT, "%s: unregister twice: -ENOENT (%d)", g->tr, rc);
	rc = rmem_unregister_buf(g->c, big);
	ok(rc == 0, "%s: unregister the first MiB (%d)", g->tr, rc);
	free(back);
}

static void bad_arguments(struct rig *g, uint8_t *buf)
{
	int a = rmem_register_buf(g->c, NULL, 64);
	int b = rmem_register_buf(g->c, buf, 0);
	int d = rmem_register_buf(NULL, buf, 64);
	int e = rmem_unregister_buf(g->c, NULL);

	ok(a == -EINVAL && b == -EINVAL && d == -EINVAL && e == -EINVAL,
	   "%s: NULL buffer, len 0, NULL client: -EINVAL (%d %d %d %d)", g->tr, a, b, d, e);
}

/* MAX_KEPT ranges fit, one more does not. */
static void table_full(struct rig *g, uint8_t *buf)
{
	int n = 0, rc, left = 0;

	while (n < MAX_KEPT && rmem_register_buf(g->c, buf + n * 64, 64) == 0)
		n++;
	rc = rmem_register_buf(g->c, buf + MAX_KEPT * 64, 64);
	ok(n == MAX_KEPT && rc == -ENOSPC, "%s: %d ranges registered, the next: -ENOSPC (%d)",
	   g->tr, n, rc);
	for (int i = 0; i < n; i++)
		left += rmem_unregister_buf(g->c, buf + i * 64) != 0;
	ok(left == 0, "%s: all of them unregister (%d failed)", g->tr, left);
}

/* A posted transfer holds its range: unregistering waits for rmem_poll().
 * The completion is only taken by rmem_poll(), so on RDMA it is in flight. */
static void busy(struct rig *g, uint8_t *buf)
{
	struct rmem_completion done;
	int rc = rmem_register_buf(g->c, buf, BUF_LEN), n;

	if (!rc)
		rc = rmem_post_read(g->c, &g->r, 0, buf, MiB, 3);
	if (!ok(rc == 0, "%s: register, post a 1 MiB read into it (%d)", g->tr, rc))
		return;
	rc = rmem_unregister_buf(g->c, buf);
	if (client_on_rdma(g->c))
		ok(rc == -EBUSY, "%s: unregister with the read in flight: -EBUSY (%d)", g->tr, rc);
	else
		ok(rc == 0, "%s: unregister, only a record here: 0 (%d)", g->tr, rc);
	n = rmem_poll(g->c, &done, 1, -1);
	ok(n == 1 && done.status == 0, "%s: the read completes (%d, %d)", g->tr, n,
	   n == 1 ? done.status : 0);
	rc = rmem_unregister_buf(g->c, buf);
	ok(rc == (client_on_rdma(g->c) ? 0 : -ENOENT), "%s: then unregister: %s (%d)", g->tr,
	   client_on_rdma(g->c) ? "0" : "-ENOENT", rc);
}

/* The bug the registration cache had: free, malloc again (same address,
 * new pages); with the range unregistered, transfers must see the new pages. */
static void free_and_reallocate(struct rig *g)
{
	uint8_t *a = malloc(BUF_LEN), *b, *check = malloc(BUF_LEN);
	int rc = a ? rmem_register_buf(g->c, a, BUF_LEN) : -ENOMEM;

	if (!ok(rc == 0 && check, "%s: register a fresh buffer (%d)", g->tr, rc))
		goto out;
	fill_random(a, BUF_LEN, 11);
	ok(round_trip(g, 0, a, check, BUF_LEN), "%s: 2 MiB through it match", g->tr);
	rc = rmem_unregister_buf(g->c, a);
	ok(rc == 0, "%s: unregister it (%d)", g->tr, rc);
	free(a);
	a = NULL;
	b = malloc(BUF_LEN);
	if (!ok(b != NULL, "%s: malloc anew", g->tr))
		goto out;
	fill_random(b, BUF_LEN, 12);
	ok(round_trip(g, 0, b, check, BUF_LEN),
	   "%s: the new buffer's bytes go out and come back (write then read)", g->tr);
	memset(b, 0, BUF_LEN);
	rc = rmem_read(g->c, &g->r, 0, b, BUF_LEN);
	ok(rc == 0 && memcmp(b, check, BUF_LEN) == 0, "%s: a read into it lands in it (%d)",
	   g->tr, rc);
	free(b);
out:
	free(a);
	free(check);
}

/* Closing with ranges still registered releases them (ASan sees no leak). */
static void close_with_kept(const char *ep, const char *tr, uint8_t *buf)
{
	rmem_client *c = NULL;
	int rc = client_connect(ep, 10000, &c);
	int a = -1, b = -1;

	if (!rc) {
		a = rmem_register_buf(c, buf, MiB);
		b = rmem_register_buf(c, buf + MiB, MiB);
		rmem_close(c);
	}
	ok(rc == 0 && a == 0 && b == 0, "%s: close with two ranges registered (%d %d %d)", tr,
	   rc, a, b);
}

static void suite(const char *ep, const char *tr)
{
	struct rig g = { .tr = tr };
	uint8_t *src = malloc(BUF_LEN), *dst = malloc(BUF_LEN), *big = malloc(BUF_LEN);
	int rc = client_connect(ep, 10000, &g.c), a, b;

	if (!ok(rc == 0 && src && dst && big, "%s: connect (%d)", tr, rc))
		goto out;
	rc = rmem_alloc(g.c, BUF_LEN, 0, &g.r);
	if (!ok(rc == 0, "%s: alloc 2 MiB (%d)", tr, rc))
		goto out;
	a = rmem_register_buf(g.c, src, BUF_LEN);
	b = rmem_register_buf(g.c, dst, BUF_LEN);
	ok(a == 0 && b == 0, "%s: register two 2 MiB buffers (%d %d)", tr, a, b);
	inside(&g, src, dst);
	registered_once(&g, src, dst);
	partly_outside(&g, big);
	bad_arguments(&g, big);
	table_full(&g, big);
	busy(&g, big);
	free_and_reallocate(&g);
	rc = rmem_free(g.c, &g.r);
	ok(rc == 0, "%s: free the region (%d)", tr, rc);
	close_with_kept(ep, tr, big);
out:
	if (g.c)
		rmem_close(g.c);
	free(src);
	free(dst);
	free(big);
}

static void both(const struct rmemd *d)
{
	harness_both(d, suite);
}

int main(void)
{
	return harness_main("64M", NULL, both);
}
