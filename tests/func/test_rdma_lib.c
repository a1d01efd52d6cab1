/*
 * test_rdma_lib.c - librmem's RDMA data path against a real rmemd, in the
 * Soft-RoCE test VM (tests/vm/README.md):
 *
 *   tests/vm/run-in-vm -- env RMEM_BUILD=build-san build-san/tests/test_rdma_lib
 *
 * Transport "rdma" really is RDMA; reads and writes of 1 B to 64 MiB come
 * back byte for byte; many posted operations in flight; CAS/FAA totals from
 * two threads; a wrong key is -EACCES and the client keeps working on RDMA
 * (it re-attaches its queue pair), also after many errors in a row; a
 * SIGKILLed RDMA client's memory returns.  Without RDMA (RMEM_VM_RDMA_ADDR
 * unset) it skips.  Figures are printed, never asserted: TCG is slow.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define BIG (64 * MiB)
#define TIMEOUT_MS 60000
#define ASYNC_OPS 32
#define ASYNC_LEN (64u << 10)
#define ATOMIC_ROUNDS 500
#define ERROR_ROUNDS 8

static uint8_t *src, *dst;

static int connect_rdma(const char *ep, const char *transport, rmem_client **c)
{
	struct rmem_opts o;

	rmem_opts_init(&o, sizeof o);
	o.transport = transport;
	o.timeout_ms = TIMEOUT_MS;
	return rmem_connect(ep, &o, c);
}

static void round_trip(rmem_client *c, uint64_t size, uint64_t seed)
{
	struct rmem_region r;
	int rc;

	rc = rmem_alloc(c, size, 0, &r);
	if (!ok(rc == 0, "alloc %llu bytes (%d)", (unsigned long long)size, rc))
		return;
	memset(dst, 0xa5, size);
	rc = rmem_read(c, &r, 0, dst, size);
	ok(rc == 0 && all_zero(dst, size), "%llu: a new region reads zero (%d)",
	   (unsigned long long)size, rc);
	fill_random(src, size, seed);
	rc = rmem_write(c, &r, 0, src, size);
	ok(rc == 0, "%llu: write (%d)", (unsigned long long)size, rc);
	memset(dst, 0, size);
	rc = rmem_read(c, &r, 0, dst, size);
	ok(rc == 0 && memcmp(src, dst, size) == 0, "%llu: read back, byte for byte (%d)",
	   (unsigned long long)size, rc);
	if (size > 2) {
		/* Unaligned both sides: the middle of the region into the middle
		 * of the buffer. */
		memset(dst, 0, size);
		rc = rmem_read(c, &r, 1, dst + 1, size - 2);
		ok(rc == 0 && memcmp(src + 1, dst + 1, size - 2) == 0,
		   "%llu: unaligned read of the middle (%d)", (unsigned long long)size, rc);
	}
	rc = rmem_read(c, &r, 1, dst, r.length);
	ok(rc == -ERANGE, "%llu: a read past the end is -ERANGE (%d)", (unsigned long long)size,
	   rc);
	rc = rmem_free(c, &r);
	ok(rc == 0, "%llu: free (%d)", (unsigned long long)size, rc);
}

/* Waits for n completions; checks they come in cookie order, all 0. */
static int collect(rmem_client *c, int n, uint64_t first_cookie)
{
	struct rmem_completion out[ASYNC_OPS];
	int got = 0, bad = 0;

	while (got < n) {
		int rc = rmem_poll(c, out, n - got, TIMEOUT_MS);

		if (rc <= 0)
			return rc < 0 ? rc : -ETIMEDOUT;
		for (int i = 0; i < rc; i++)
			if (out[i].status != 0 || out[i].cookie != first_cookie + (uint64_t)(got + i))
				bad++;
		got += rc;
	}
	return bad ? -EILSEQ : 0;
}

static void async_ops(rmem_client *c)
{
	struct rmem_region r;
	int rc, posted = 0;

	rc = rmem_alloc(c, ASYNC_OPS * ASYNC_LEN, 0, &r);
	if (!ok(rc == 0, "async: alloc (%d)", rc))
		return;
	fill_random(src, ASYNC_OPS * ASYNC_LEN, 77);
	/* Small and large ones mixed: bounce slots and registered buffers. */
	for (int i = 0; i < ASYNC_OPS && rc == 0; i++, posted++) {
		size_t len = i % 2 ? ASYNC_LEN : 512;

		rc = rmem_post_write(c, &r, (uint64_t)i * ASYNC_LEN, src + (size_t)i * ASYNC_LEN,
				     len, 1000 + (uint64_t)i);
	}
	ok(rc == 0 && posted == ASYNC_OPS, "async: %d writes posted (%d)", posted, rc);
	rc = collect(c, posted, 1000);
	ok(rc == 0, "async: %d write completions, in order, all 0 (%d)", posted, rc);
	memset(dst, 0, ASYNC_OPS * ASYNC_LEN);
	posted = 0;
	for (int i = 0; i < ASYNC_OPS && rc == 0; i++, posted++) {
		size_t len = i % 2 ? ASYNC_LEN : 512;

		rc = rmem_post_read(c, &r, (uint64_t)i * ASYNC_LEN, dst + (size_t)i * ASYNC_LEN,
				    len, 2000 + (uint64_t)i);
	}
	rc = rc ? rc : collect(c, posted, 2000);
	ok(rc == 0, "async: %d reads in flight complete in order (%d)", posted, rc);
	rc = 0;
	for (int i = 0; i < ASYNC_OPS; i++) {
		size_t at = (size_t)i * ASYNC_LEN, len = i % 2 ? ASYNC_LEN : 512;

		if (memcmp(src + at, dst + at, len) != 0)
			rc = -EILSEQ;
	}
	ok(rc == 0, "async: every byte read back as written");
	rmem_free(c, &r);
}

static void *atomic_worker(void *p)
{
	struct client_region *a = p;

	for (int i = 0; i < ATOMIC_ROUNDS && !a->err; i++) {
		uint64_t old = 0, seen = 0;
		int rc = rmem_faa(a->c, &a->r, 0, 1, &old);

		/* A CAS loop: increments only what it saw. */
		while (rc == 0) {
			rc = rmem_cas(a->c, &a->r, 8, seen, seen + 1, &old);
			if (rc == 0 && old == seen)
				break;
			seen = old;
		}
		a->err = rc;
	}
	return NULL;
}

static void atomics(rmem_client *c)
{
	struct client_region a[2];
	pthread_t t[2];
	uint64_t v[2] = { 0, 0 };
	int rc;

	rc = rmem_alloc(c, 4096, 0, &a[0].r);
	if (!ok(rc == 0, "atomics: alloc (%d)", rc))
		return;
	for (int i = 0; i < 2; i++) {
		a[i].c = c;
		a[i].r = a[0].r;
		a[i].err = 0;
		pthread_create(&t[i], NULL, atomic_worker, &a[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ok(a[0].err == 0 && a[1].err == 0, "atomics: 2 threads, no error (%d %d)", a[0].err,
	   a[1].err);
	rc = rmem_read(c, &a[0].r, 0, v, sizeof v);
	ok(rc == 0 && v[0] == 2 * ATOMIC_ROUNDS, "atomics: FAA total %llu == %d",
	   (unsigned long long)v[0], 2 * ATOMIC_ROUNDS);
	ok(rc == 0 && v[1] == 2 * ATOMIC_ROUNDS, "atomics: CAS-loop total %llu == %d",
	   (unsigned long long)v[1], 2 * ATOMIC_ROUNDS);
	rc = rmem_faa(c, &a[0].r, 4, 1, NULL);
	ok(rc == -EINVAL, "atomics: unaligned offset is -EINVAL (%d)", rc);
	rmem_free(c, &a[0].r);
}

static void wrong_key(rmem_client *c)
{
	struct rmem_region r, bad;
	struct rmem_completion comp[2];
	uint64_t v = 0;
	int rc, n;

	rc = rmem_alloc(c, 8192, 0, &r);
	if (!ok(rc == 0, "wrong key: alloc (%d)", rc))
		return;
	fill_random(src, 8192, 5);
	rc = rmem_write(c, &r, 0, src, 8192);
	ok(rc == 0, "wrong key: write with the right key (%d)", rc);
	bad = r;
	bad.rkey ^= 0x100;
	rc = rmem_read(c, &bad, 0, dst, 8192);
	ok(rc == -EACCES, "wrong key: read is -EACCES (%d)", rc);
	memset(dst, 0, 8192);
	rc = rmem_read(c, &r, 0, dst, 8192);
	ok(rc == 0 && memcmp(src, dst, 8192) == 0,
	   "wrong key: the next read on the same client works (%d)", rc);
	ok(!strcmp(rmem_transport(c), "rdma"),
	   "wrong key: the client re-attached: rmem_transport still says \"%s\"",
	   rmem_transport(c));
	rc = rmem_faa(c, &bad, 0, 1, NULL);
	ok(rc == -EACCES, "wrong key: FAA is -EACCES (%d)", rc);
	rc = rmem_faa(c, &r, 0, 1, &v);
	ok(rc == 0, "wrong key: the next FAA works (%d)", rc);
	ok(!strcmp(rmem_transport(c), "rdma"), "wrong key: after the FAA error still \"%s\"",
	   rmem_transport(c));
	/* Posted: a bad one between two good ones. */
	rc = rmem_post_write(c, &bad, 0, src, 100, 1);
	if (rc == 0)
		rc = rmem_post_read(c, &r, 4096, dst, 4096, 2);
	ok(rc == 0, "wrong key: posts accepted (%d)", rc);
	n = 0;
	while (rc == 0 && n < 2) {
		int got = rmem_poll(c, comp + n, 2 - n, TIMEOUT_MS);

		if (got <= 0)
			break;
		n += got;
	}
	ok(n == 2 && comp[0].cookie == 1 && comp[0].status == -EACCES,
	   "wrong key: the posted write completes with -EACCES (%d)", n ? comp[0].status : 0);
	ok(n == 2 && comp[1].cookie == 2 && comp[1].status == 0 &&
	   memcmp(dst, src + 4096, 4096) == 0,
	   "wrong key: the read posted behind it completes (%d)", n > 1 ? comp[1].status : 0);
	ok(!strcmp(rmem_transport(c), "rdma"), "wrong key: after the posted error still \"%s\"",
	   rmem_transport(c));
	rmem_free(c, &r);
}

/* Errors in a row: each one costs a re-attach, none may wear the client out. */
static void many_errors(rmem_client *c)
{
	struct rmem_region r, bad;
	int rc, bad_rc = 0, good_rc = 0, i;

	rc = rmem_alloc(c, 4096, 0, &r);
	if (!ok(rc == 0, "errors in a row: alloc (%d)", rc))
		return;
	fill_random(src, 4096, 9);
	rc = rmem_write(c, &r, 0, src, 4096);
	bad = r;
	bad.rkey ^= 0x100;
	for (i = 0; i < ERROR_ROUNDS && rc == 0; i++) {
		bad_rc = i % 2 ? rmem_write(c, &bad, 0, src, 64) : rmem_read(c, &bad, 0, dst, 64);
		memset(dst, 0, 4096);
		good_rc = rmem_read(c, &r, 0, dst, 4096);
		if (bad_rc != -EACCES || good_rc != 0 || memcmp(src, dst, 4096) != 0 ||
		    strcmp(rmem_transport(c), "rdma") != 0)
			break;
	}
	ok(rc == 0 && i == ERROR_ROUNDS,
	   "errors in a row: %d rounds of a refused access then a good read, all on %s "
	   "(stopped at %d: %d %d)", ERROR_ROUNDS, rmem_transport(c), i, bad_rc, good_rc);
	rc = rmem_alloc(c, 4096, 0, &bad);
	ok(rc == 0, "errors in a row: the session still allocates (%d)", rc);
	if (rc == 0)
		rmem_free(c, &bad);
	rmem_free(c, &r);
}

static void figures(rmem_client *c)
{
	enum { ROUNDS = 64 };
	struct rmem_region r;
	uint64_t t0, t1, t2;

	if (rmem_alloc(c, MiB, 0, &r) != 0)
		return;
	t0 = now_ms();
	for (int i = 0; i < ROUNDS; i++)
		rmem_write(c, &r, 0, src, MiB);
	t1 = now_ms();
	for (int i = 0; i < ROUNDS; i++)
		rmem_read(c, &r, 0, dst, MiB);
	t2 = now_ms();
	diag("1 MiB calls: write %.1f MB/s, read %.1f MB/s (TCG VM, information only)",
	     ROUNDS * 1.048576e3 / (double)(t1 - t0 ? t1 - t0 : 1),
	     ROUNDS * 1.048576e3 / (double)(t2 - t1 ? t2 - t1 : 1));
	rmem_free(c, &r);
}

/*
 * A daemon with keys = "window" refuses the re-attach (its windows are bound
 * to the first queue pair): after a refused access the client moves its data
 * to TCP, the next read works there, and rmem_transport() says so.
 */
static void window_fallback(void)
{
	struct rmem_region r, bad;
	rmem_client *c = NULL;
	struct rmemd d;
	int rc;

	rc = rmemd_start(&d, "64M", "rdma = { keys = \"window\"; };");
	if (!ok(rc == 0, "window daemon: starts (%d)", rc))
		return;
	rc = connect_rdma(d.tcp_ep, "rdma", &c);
	if (rc == 0)
		rc = rmem_alloc(c, 8192, 0, &r);
	if (!ok(rc == 0, "window daemon: connect and alloc over rdma (%d)", rc))
		goto out;
	fill_random(src, 8192, 6);
	rc = rmem_write(c, &r, 0, src, 8192);
	bad = r;
	bad.rkey ^= 0x100;
	ok(rc == 0 && rmem_read(c, &bad, 0, dst, 8192) == -EACCES,
	   "window daemon: a wrong key is -EACCES (%d)", rc);
	memset(dst, 0, 8192);
	rc = rmem_read(c, &r, 0, dst, 8192);
	ok(rc == 0 && memcmp(src, dst, 8192) == 0 && !strcmp(rmem_transport(c), "tcp") &&
	   rmemd_log_contains(&d, "cannot re-attach"),
	   "window daemon: the re-attach is refused, the next read works on \"%s\" (%d)",
	   rmem_transport(c), rc);
out:
	rmem_close(c);
	rc = rmemd_stop(&d);
	ok(rc == 0, "window daemon: exits 0 (%d)", rc);
	rmemd_cleanup(&d);
}

/* The child: an RDMA client that holds 16 MiB and writes into it, then
 * says so (its status on wfd) and waits to be killed.  It runs in a fresh
 * exec of this program: librdmacm's state inherited through fork() is not
 * usable in the child. */
static int holder(int wfd, const char *ep)
{
	rmem_client *c = NULL;
	struct rmem_region r;
	int rc;

	rc = connect_rdma(ep, "rdma", &c);
	if (!rc)
		rc = strcmp(rmem_transport(c), "rdma") ? -EPROTO : 0;
	if (!rc)
		rc = rmem_alloc(c, 16 * MiB, 0, &r);
	if (!rc)
		rc = rmem_write(c, &r, 0, src, 16 * MiB);
	if (write(wfd, &rc, sizeof rc) != sizeof rc || rc)
		return 1;
	pause();
	return 0;
}

static int exec_holder(int wfd, void *arg)
{
	const char *const args[] = { "test_rdma_lib", "--hold", arg, NULL };

	return child_reexec(wfd, args);
}

static void killed_client(rmem_client *c, const char *ep)
{
	struct rmem_stats st;
	struct child ch;
	int rc, crc = -1;

	rc = child_spawn(&ch, exec_holder, (void *)ep);
	if (!ok(rc == 0, "kill: child spawned (%d)", rc))
		return;
	ok(read(ch.rfd, &crc, sizeof crc) == sizeof crc && crc == 0,
	   "kill: the child holds 16 MiB over RDMA (%d)", crc);
	rc = rmem_stats(c, &st);
	ok(rc == 0 && st.used_bytes >= 16 * MiB, "kill: used bytes %llu",
	   (unsigned long long)st.used_bytes);
	rc = child_end(&ch, SIGKILL);
	ok(rc == 128 + SIGKILL, "kill: SIGKILLed (%d)", rc);
	rc = stats_wait(c, 0, 0, TIMEOUT_MS, &st);
	ok(rc == 0, "kill: its memory returns: used %llu regions %llu (%d)",
	   (unsigned long long)st.used_bytes, (unsigned long long)st.regions, rc);
}

int main(int argc, char **argv)
{
	const char *addr = getenv("RMEM_VM_RDMA_ADDR");
	struct rmemd d;
	rmem_client *c = NULL, *c2 = NULL;
	char ep[sizeof ((struct rmemd *)0)->tcp_ep + 8];
	int rc;

	if (argc == 4 && !strcmp(argv[1], "--hold")) {
		src = calloc(1, 16 * MiB);
		return src ? holder((int)strtol(argv[3], NULL, 10), argv[2]) : 1;
	}
	if (!addr || !*addr)
		tap_skip_all("no RDMA here (RMEM_VM_RDMA_ADDR unset; run it in tests/vm)");
	setenv("RMEM_TEST_HOST", addr, 1);
	setenv("RMEM_TEST_RDMA", "1", 1);
	src = malloc(BIG);
	dst = malloc(BIG);
	if (!src || !dst)
		tap_skip_all("no memory for 2 x 64 MiB");
	rc = rmemd_start(&d, "256M", NULL);
	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	if (!ok(rc == 0, "rmemd starts with listen.rdma (%d)", rc))
		return tap_done();

	rc = connect_rdma(d.tcp_ep, "rdma", &c);
	if (!ok(rc == 0 && c, "transport \"rdma\" connects (%d)", rc)) {
		rmemd_log_tail(&d, 30);
		rmemd_cleanup(&d);
		return tap_done();
	}
	ok(!strcmp(rmem_transport(c), "rdma"), "rmem_transport says \"%s\"", rmem_transport(c));
	snprintf(ep, sizeof ep, "rdma://%s", d.tcp_ep);
	rc = connect_rdma(ep, NULL, &c2);
	ok(rc == 0 && !strcmp(rmem_transport(c2), "rdma"), "%s connects over rdma (%d)", ep, rc);
	rmem_close(c2);
	c2 = NULL;
	rc = connect_rdma(d.tcp_ep, "auto", &c2);
	ok(rc == 0 && !strcmp(rmem_transport(c2), "rdma"), "\"auto\" picks rdma here (%d %s)", rc,
	   c2 ? rmem_transport(c2) : "-");
	rmem_close(c2);

	round_trip(c, 1, 1);
	round_trip(c, 4096, 2);
	round_trip(c, 8 * MiB + 1, 3);
	round_trip(c, BIG, 4);
	diag("the same two buffers served every transfer above: registered once each "
	     "(no counter is exposed to check it)");
	async_ops(c);
	atomics(c);
	wrong_key(c);
	ok(rmemd_log_contains(&d, "re-attach from"),
	   "wrong key: the daemon replaced the session's queue pair (a re-attach in its log)");
	many_errors(c);
	rmemd_log_tail(&d, 2);
	figures(c);
	killed_client(c, d.tcp_ep);
	window_fallback();

	rmem_close(c);
	free(src);
	free(dst);
	return harness_finish(&d);
}
