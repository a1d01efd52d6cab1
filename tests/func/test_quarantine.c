/*
 * test_quarantine.c - memory just freed is there for the next allocation.
 * In a 64 MiB pool, rmem_free of a 40 MiB region followed at once by
 * rmem_alloc of 40 MiB must succeed, and the new region must read back
 * zeroes, whatever the key mode: over TCP (no NIC key), and with
 * RMEM_TEST_TRANSPORT=rdma (tests/func/rdma, in the test VM) with the
 * daemon's own key mode (region-mr on Soft-RoCE: the MR's deregistration is
 * the confirmation, no quarantine) and with keys = "window" (the window's
 * invalidation completes before FREE answers).
 *
 * The same after a session ends with a 40 MiB region: its queue pair stops
 * before its keys die, so in window mode nothing confirms the key's death
 * and the range sits in the quarantine; the next 40 MiB ALLOC waits for it
 * instead of failing with -ENOMEM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024u * 1024u)
#define POOL "64M"
#define BIG (40 * MiB)
#define ROUNDS 3

static uint8_t *src, *back;

/* Allocates BIG bytes, fills them, and says so; 0 or the first error. */
static int alloc_filled(rmem_client *c, struct rmem_region *r, uint64_t seed)
{
	int rc = rmem_alloc(c, BIG, 0, r);

	if (rc == 0) {
		fill_random(src, BIG, seed);
		rc = rmem_write(c, r, 0, src, BIG);
	}
	return rc;
}

/* Reads all of r back: 1 when every byte is zero, 0 when not, or an error. */
static int reads_zero(rmem_client *c, const struct rmem_region *r)
{
	int rc;

	memset(back, 0xa5, BIG);
	rc = rmem_read(c, r, 0, back, BIG);
	return rc < 0 ? rc : all_zero(back, BIG);
}

/* free(40 MiB) then alloc(40 MiB) at once, ROUNDS times on one client. */
static void free_then_alloc(const char *ep, const char *what)
{
	struct rmem_region r, again;
	rmem_client *c = NULL;
	int rc = client_connect(ep, 10000, &c);

	if (!ok(rc == 0, "%s: connect (%d, %s)", what, rc, c ? rmem_transport(c) : "-"))
		return;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0;
		int z;

		rc = alloc_filled(c, &r, 10 + (uint64_t)i);
		if (!ok(rc == 0, "%s: round %d: alloc 40 MiB and fill it (%d)", what, i, rc))
			break;
		rc = rmem_free(c, &r);
		ok(rc == 0, "%s: round %d: free it (%d)", what, i, rc);
		t0 = now_ms();
		rc = rmem_alloc(c, BIG, 0, &again);
		if (!ok(rc == 0 && again.length >= BIG,
			"%s: round %d: alloc 40 MiB at once succeeds (%d, %llu ms)", what, i, rc,
			(unsigned long long)(now_ms() - t0)))
			break;
		z = reads_zero(c, &again);
		ok(z == 1, "%s: round %d: the fresh region reads back zeroes (%d)", what, i, z);
		rc = rmem_free(c, &again);
		ok(rc == 0, "%s: round %d: free the fresh region (%d)", what, i, rc);
	}
	rmem_close(c);
}

/* Waits up to 10 s until the daemon holds no region. */
static int regions_gone(rmem_client *c)
{
	uint64_t until = now_ms() + 10000;
	struct rmem_stats st;
	int rc;

	while ((rc = rmem_stats(c, &st)) == 0 && st.regions && now_ms() < until)
		sleep_ms(5);
	return rc < 0 ? rc : st.regions ? -ETIMEDOUT : 0;
}

/* A client that holds 40 MiB goes away; another allocates 40 MiB as soon as
 * the daemon has ended the first one's session. */
static void session_end_then_alloc(const char *ep, const char *what)
{
	rmem_client *a = NULL, *b = NULL;
	struct rmem_region ra, rb;
	uint64_t t0;
	int rc, z;

	rc = client_connect(ep, 10000, &a);
	if (rc == 0)
		rc = client_connect(ep, 10000, &b);
	if (rc == 0)
		rc = alloc_filled(a, &ra, 77);
	if (!ok(rc == 0, "%s: two clients, the first holds 40 MiB of data (%d)", what, rc))
		goto out;
	rmem_close(a);
	a = NULL;
	rc = regions_gone(b);
	ok(rc == 0, "%s: the first client's session ends (%d)", what, rc);
	t0 = now_ms();
	rc = rmem_alloc(b, BIG, 0, &rb);
	if (!ok(rc == 0, "%s: the second allocates 40 MiB at once (%d, %llu ms)", what, rc,
		(unsigned long long)(now_ms() - t0)))
		goto out;
	z = reads_zero(b, &rb);
	ok(z == 1, "%s: and it reads back zeroes (%d)", what, z);
	rc = rmem_free(b, &rb);
	ok(rc == 0, "%s: free it (%d)", what, rc);
out:
	rmem_close(a);
	rmem_close(b);
}

static void with_daemon(const char *extra, const char *mode)
{
	struct rmemd d;
	char what[64];
	int rc = rmemd_start(&d, POOL, extra);

	if (!ok(rc == 0, "%s: rmemd with a 64 MiB pool starts (%d)", mode, rc))
		return;
	snprintf(what, sizeof what, "%s %s", harness_transport(), mode);
	free_then_alloc(d.tcp_ep, what);
	session_end_then_alloc(d.tcp_ep, what);
	rc = rmemd_stop(&d);
	ok(rc == 0, "%s: rmemd exits 0 (%d)", mode, rc);
	rmemd_cleanup(&d);
}

int main(void)
{
	src = malloc(BIG);
	back = malloc(BIG);
	if (!src || !back)
		tap_skip_all("no memory for two 40 MiB buffers");
	with_daemon(NULL, "default keys");
	if (harness_rdma())
		with_daemon("rdma = { keys = \"window\"; };", "keys=window");
	free(src);
	free(back);
	return tap_done();
}
