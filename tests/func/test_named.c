/*
 * test_named.c - named regions (rmem_create, rmem_open, rmem_unlink,
 * rmem_unlink2) end to end, through the public API.
 *
 * A creates "t/a", writes a pattern and closes its session; the name
 * survives.  B opens it read-only and reads the pattern; B's write, CAS, FAA
 * and posted write are refused with -EACCES, and the bytes stay as they
 * were.  The library refuses those first; with the handle's flags forged to
 * read-write they are refused on RDMA by the NIC (the key has remote read
 * only), on TCP by the daemon.
 * C opens it read-write, writes, and B sees it.  Every handle has an id and a
 * key of its own; rmem_free releases one handle only.  Unlink removes the
 * name at once, the bytes come back once the last handle is gone; unlink
 * with RMEM_UNLINK_REVOKE kills every handle at once.  A killed client's name
 * survives, its anonymous regions do not.  Bad names, access and flags are
 * refused by the library and by the daemon (raw frames).  Tenants have
 * namespaces of their own, and a named region counts in its creator's quota
 * after the creator's sessions are gone.  The admin unlinks (and revokes) in
 * any tenant's namespace with rmem_unlink_ns; a tenant may not (-EACCES),
 * and an unknown tenant is -ENOENT.
 *
 * With RMEM_TEST_TRANSPORT=rdma (tests/func/rdma, in the test VM) the data
 * paths are RDMA, with the daemon's own key mode and again with keys =
 * "window"; used_bytes is then polled, as a range may wait in the
 * quarantine before it is back.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define SIZE (64 * KiB)
#define QUOTA_A (4 * MiB)
#define WAIT_MS 10000
/* Longer than the quarantine (QUARANTINE_MS, 200 ms): what has not come
 * back by then is held, not waiting. */
#define HELD_MS 500
#define RW (RMEM_READ | RMEM_WRITE)

static const char *M;          /* "tcp default keys"...: each assertion's prefix */
static uint8_t pat[SIZE], got[SIZE], junk[SIZE], kpat[SIZE];

/* What the daemon holds before a part starts: each part must give it back. */
struct base {
	uint64_t used, regions;
};

static bool refused(int rc)
{
	return rc == -EACCES || rc == -ENOENT;
}

/* A key that no longer works: the NIC's remote access error (-EACCES) on
 * RDMA; on TCP the daemon's -ENOENT (no such handle) or -EACCES. */
static bool key_dead(const rmem_client *c, int rc)
{
	return client_on_rdma(c) ? rc == -EACCES : refused(rc);
}

static uint64_t used_now(rmem_client *admin)
{
	struct rmem_stats st = { 0 };

	return rmem_stats(admin, &st) < 0 ? UINT64_MAX : st.used_bytes;
}

/* Polls until used_bytes == used (the quarantine may hold a range a while). */
static int used_wait(rmem_client *admin, uint64_t used, uint64_t *last)
{
	uint64_t deadline = now_ms() + WAIT_MS;

	while ((*last = used_now(admin)) != used && now_ms() < deadline)
		sleep_ms(20);
	return *last == used ? 0 : -ETIMEDOUT;
}

static void take_base(rmem_client *admin, struct base *b)
{
	struct rmem_stats st = { 0 };

	rmem_stats(admin, &st);
	b->used = st.used_bytes;
	b->regions = st.regions;
}

/* Everything back: used_bytes and the region count as in b. */
static void back_to(rmem_client *admin, const struct base *b, const char *what)
{
	struct rmem_stats st = { 0 };
	int rc = stats_wait(admin, b->used, b->regions, WAIT_MS, &st);

	ok(rc == 0, "%s: %s: used_bytes and regions return to %llu, %llu (%llu, %llu)", M, what,
	   (unsigned long long)b->used, (unsigned long long)b->regions,
	   (unsigned long long)st.used_bytes, (unsigned long long)st.regions);
}

/* Reads len bytes of r: 1 when they equal want, 0 when not, or the error. */
static int reads(rmem_client *c, const struct rmem_region *r, const uint8_t *want, size_t len)
{
	int rc;

	memset(got, 0xa5, len);
	rc = rmem_read(c, r, 0, got, len);
	return rc < 0 ? rc : memcmp(got, want, len) == 0;
}

static int reads_zero(rmem_client *c, const struct rmem_region *r)
{
	int rc;

	memset(got, 0xa5, SIZE);
	rc = rmem_read(c, r, 0, got, SIZE);
	return rc < 0 ? rc : all_zero(got, SIZE);
}

/* The admin listing's entry for (tenant, name) with the given flags; 1 when
 * found (in *out), 0 when not, or the error. */
static int find_name(rmem_client *admin, const char *tenant, const char *name, uint32_t flags,
		     struct rmem_name_info *out)
{
	struct rmem_name_info page[8];
	uint64_t after = 0;
	int n;

	while ((n = rmem_names(admin, after, page, 8)) > 0) {
		for (int i = 0; i < n; i++) {
			if (!strcmp(page[i].tenant, tenant) && !strcmp(page[i].name, name) &&
			    page[i].flags == flags) {
				*out = page[i];
				return 1;
			}
		}
		after = page[n - 1].id;
	}
	return n;
}

static int connect3(const struct rmemd *d, rmem_client **a, rmem_client **b, rmem_client **c)
{
	int rc = client_connect(d->tcp_ep, WAIT_MS, a);

	if (rc == 0)
		rc = client_connect(d->tcp_ep, WAIT_MS, b);
	if (rc == 0)
		rc = client_connect(d->tcp_ep, WAIT_MS, c);
	return rc;
}

/* ---- A creates, B reads, C writes ------------------------------------------------------ */

/* A creates "t/a", writes pat and closes: the name and its bytes stay. */
static int a_creates(rmem_client *admin, const struct base *base, rmem_client *a,
		     struct rmem_region *ra)
{
	struct rmem_stats st = { 0 };
	uint64_t clients, last = 0;
	int rc = rmem_create(a, "t/a", SIZE, 0, ra);

	if (!ok(rc == 0 && ra->length >= SIZE && ra->flags == RW,
		"%s: A creates \"t/a\" of 64 KiB, read-write (%d, %llu bytes, flags %#x)", M, rc,
		(unsigned long long)ra->length, ra->flags))
		return -1;
	rc = reads_zero(a, ra);
	ok(rc == 1, "%s: a new named region reads zero (%d)", M, rc);
	rc = rmem_write(a, ra, 0, pat, SIZE);
	ok(rc == 0, "%s: A writes a pattern (%d)", M, rc);
	rmem_stats(admin, &st);
	clients = st.clients;
	rmem_close(a);
	for (uint64_t end = now_ms() + WAIT_MS; st.clients != clients - 1 && now_ms() < end;) {
		sleep_ms(20);
		rmem_stats(admin, &st);
	}
	ok(st.clients == clients - 1, "%s: A's session ends (clients %llu)", M,
	   (unsigned long long)st.clients);
	sleep_ms(HELD_MS);
	rc = used_wait(admin, base->used + ra->length, &last);
	ok(rc == 0, "%s: its bytes are still held after A is gone (used %llu)", M,
	   (unsigned long long)last);
	return 0;
}

/* B opens read-only: reads work, everything that writes is -EACCES. */
static void b_reads_only(rmem_client *b, const struct rmem_region *ra, struct rmem_region *rb)
{
	uint64_t old = 7;
	int rc = rmem_open(b, "t/a", RMEM_READ, rb);

	ok(rc == 0 && rb->flags == RMEM_READ && rb->length == ra->length,
	   "%s: B opens \"t/a\" read-only (%d, flags %#x, %llu bytes)", M, rc, rb->flags,
	   (unsigned long long)rb->length);
	ok(rb->id != ra->id, "%s: B's handle is a region of its own (id %llu, A's %llu)", M,
	   (unsigned long long)rb->id, (unsigned long long)ra->id);
	rc = reads(b, rb, pat, SIZE);
	ok(rc == 1, "%s: B reads A's pattern (%d)", M, rc);
	rc = rmem_write(b, rb, 0, junk, 4096);
	ok(rc == -EACCES, "%s: B's write is -EACCES (%d: %s)", M, rc, rmem_strerror(rc));
	rc = rmem_cas(b, rb, 0, 0, 0x5a5a5a5a5a5a5a5aull, &old);
	ok(rc == -EACCES, "%s: B's CAS is -EACCES (%d)", M, rc);
	rc = rmem_faa(b, rb, 8, 1, &old);
	ok(rc == -EACCES, "%s: B's FAA is -EACCES (%d)", M, rc);
	rc = rmem_write(b, rb, SIZE - 8, junk, 8);
	ok(rc == -EACCES, "%s: B's write of the last 8 bytes is -EACCES (%d)", M, rc);
	rc = reads(b, rb, pat, SIZE);
	ok(rc == 1, "%s: B still reads, and the bytes are unchanged (%d)", M, rc);
	rc = rmem_read(b, ra, 0, got, 64);
	ok(key_dead(b, rc), "%s: A's key died with A's session (%d)", M, rc);
}

/*
 * The refusals again, past the library: it refuses a write through a handle
 * whose flags lack RMEM_WRITE before any I/O, so a handle with its flags
 * forged to read-write is what reaches the daemon (TCP) or the NIC (RDMA),
 * which must refuse on their own.  Each on a client of its own whose data
 * path is the NIC's when the test runs over RDMA: after an error completion
 * a window mode client moves its data to TCP (docs/architecture.md,
 * "Re-attach").  Op 0 writes, 1 CAS, 2 FAA.
 */
static void fresh_refusals(const struct rmemd *d, rmem_client *b, const struct rmem_region *rb)
{
	static const char *const what[] = { "write", "CAS", "FAA" };

	for (int op = 0; op < 3; op++) {
		struct rmem_region r;
		rmem_client *x = NULL;
		uint64_t old = 3;
		bool nic = false;
		int rc = client_connect(d->tcp_ep, WAIT_MS, &x);

		rc = rc ? rc : rmem_open(x, "t/a", RMEM_READ, &r);
		r.flags |= RMEM_WRITE;
		nic = client_on_rdma(x);
		if (rc == 0 && op == 0)
			rc = rmem_write(x, &r, 64, junk, 64);
		else if (rc == 0 && op == 1)
			rc = rmem_cas(x, &r, 64, 0, 1, &old);
		else if (rc == 0)
			rc = rmem_faa(x, &r, 64, 1, &old);
		ok(rc == -EACCES && nic == harness_rdma(),
		   "%s: a fresh read-only handle, flags forged: its %s is -EACCES from %s (%d)", M,
		   what[op], nic ? "the NIC" : "the daemon", rc);
		rmem_close(x);
	}
	ok(reads(b, rb, pat, SIZE) == 1, "%s: the bytes are unchanged", M);
}

/* C opens read-write, sees the same bytes, writes; B sees the write. */
static void c_writes(rmem_client *b, rmem_client *c, const struct rmem_region *rb,
		     struct rmem_region *rc_)
{
	uint8_t mine[4096];
	int rc = rmem_open(c, "t/a", RW, rc_);

	ok(rc == 0 && rc_->flags == RW, "%s: C opens \"t/a\" read-write (%d, flags %#x)", M, rc,
	   rc_->flags);
	ok(rc_->id != rb->id && rc_->rkey != rb->rkey,
	   "%s: C's handle has its own id and key (%llu/%#x, B's %llu/%#x)", M,
	   (unsigned long long)rc_->id, rc_->rkey, (unsigned long long)rb->id, rb->rkey);
	rc = reads(c, rc_, pat, SIZE);
	ok(rc == 1, "%s: through a read-write handle the bytes are still A's (%d)", M, rc);
	fill_random(mine, sizeof mine, 2);
	memcpy(pat + 1000, mine, sizeof mine);
	rc = rmem_write(c, rc_, 1000, mine, sizeof mine);
	ok(rc == 0, "%s: C writes 4 KiB at 1000 (%d)", M, rc);
	rc = reads(b, rb, pat, SIZE);
	ok(rc == 1, "%s: B sees C's write (%d)", M, rc);
}

static void name_errors(rmem_client *b, rmem_client *c)
{
	struct rmem_region r;
	int rc = rmem_create(c, "t/a", SIZE, 0, &r);

	ok(rc == -EEXIST, "%s: creating \"t/a\" again is -EEXIST (%d)", M, rc);
	rc = rmem_create(b, "t/a", 4096, 0, &r);
	ok(rc == -EEXIST, "%s: for another client too, whatever the size (%d)", M, rc);
	rc = rmem_open(b, "t/none", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: opening \"t/none\" is -ENOENT (%d)", M, rc);
	rc = rmem_open(b, "t/A", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: names are case-sensitive: \"t/A\" is -ENOENT (%d)", M, rc);
	rc = rmem_unlink(b, "t/none");
	ok(rc == -ENOENT, "%s: unlinking \"t/none\" is -ENOENT (%d)", M, rc);
}

/* C unlinks "t/a" while B and C hold it: the name goes, the bytes stay. */
static void unlink_held(rmem_client *admin, rmem_client *b, rmem_client *c,
			const struct rmem_region *rb, const struct base *base)
{
	struct rmem_name_info info = { 0 };
	struct rmem_region r, again;
	uint64_t last = 0;
	int rc = rmem_unlink(c, "t/a");

	ok(rc == 0, "%s: C unlinks \"t/a\" (%d)", M, rc);
	rc = rmem_open(b, "t/a", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: then opening it is -ENOENT (%d)", M, rc);
	rc = rmem_unlink(b, "t/a");
	ok(rc == -ENOENT, "%s: and unlinking it again is -ENOENT (%d)", M, rc);
	rc = find_name(admin, "", "t/a", RMEM_NAME_UNLINKED, &info);
	ok(rc == 1 && info.handles == 2 && info.length == rb->length,
	   "%s: rmem_names lists it unlinked with 2 handles (%d, %u handles)", M, rc,
	   info.handles);
	rc = reads(b, rb, pat, SIZE);
	ok(rc == 1, "%s: B's handle still reads the bytes (%d)", M, rc);
	rc = rmem_create(c, "t/a", SIZE, 0, &again);
	ok(rc == 0 && again.id != rb->id, "%s: \"t/a\" can be created again at once (%d)", M, rc);
	if (rc)
		return;
	rc = reads_zero(c, &again);
	ok(rc == 1, "%s: the new \"t/a\" is another region: it reads zero (%d)", M, rc);
	rc = used_wait(admin, base->used + rb->length + again.length, &last);
	ok(rc == 0, "%s: both count in used_bytes once (%llu)", M, (unsigned long long)last);
	rc = rmem_unlink(c, "t/a");
	ok(rc == 0, "%s: unlink the new one (%d)", M, rc);
	rc = rmem_free(c, &again);
	ok(rc == 0, "%s: and free its only handle (%d)", M, rc);
	rc = used_wait(admin, base->used + rb->length, &last);
	ok(rc == 0, "%s: its bytes come back; the old ones are still held (%llu)", M,
	   (unsigned long long)last);
}

/* B then C let go; the bytes come back with the last handle only. */
static void last_handle(rmem_client *admin, rmem_client *b, rmem_client *c,
			const struct rmem_region *rb, const struct rmem_region *rc_,
			const struct base *base)
{
	uint64_t last = 0;
	int rc = rmem_free(b, rb);

	ok(rc == 0, "%s: B frees its handle (%d)", M, rc);
	sleep_ms(HELD_MS);
	last = used_now(admin);
	ok(last == base->used + rb->length, "%s: C holds the last handle: bytes still held (%llu)",
	   M, (unsigned long long)last);
	rc = reads(c, rc_, pat, SIZE);
	ok(rc == 1, "%s: C still reads them (%d)", M, rc);
	rc = rmem_read(b, rb, 0, got, 64);
	ok(key_dead(b, rc), "%s: B's freed handle no longer reads (%d)", M, rc);
	rc = rmem_free(c, rc_);
	ok(rc == 0, "%s: C frees the last handle (%d)", M, rc);
	back_to(admin, base, "the bytes come back");
	rc = rmem_read(c, rc_, 0, got, 64);
	ok(key_dead(c, rc), "%s: C's freed handle no longer reads (%d)", M, rc);
}

static void share(const struct rmemd *d, rmem_client *admin)
{
	rmem_client *a = NULL, *b = NULL, *c = NULL;
	struct rmem_region ra, rb, rc_;
	struct base base;
	int rc = connect3(d, &a, &b, &c);

	if (!ok(rc == 0, "%s: clients A, B and C connect (%d)", M, rc))
		goto out;
	take_base(admin, &base);
	fill_random(pat, SIZE, 1);
	memset(junk, 0x5a, SIZE);
	rc = a_creates(admin, &base, a, &ra);
	a = NULL;
	if (rc)
		goto out;
	b_reads_only(b, &ra, &rb);
	fresh_refusals(d, b, &rb);
	c_writes(b, c, &rb, &rc_);
	name_errors(b, c);
	unlink_held(admin, b, c, &rb, &base);
	last_handle(admin, b, c, &rb, &rc_, &base);
out:
	rmem_close(a);
	rmem_close(b);
	rmem_close(c);
}

/* ---- revocation ------------------------------------------------------------------------- */

static void revoked(rmem_client *c, const struct rmem_region *r, const char *who)
{
	int rc = rmem_read(c, r, 0, got, 4096);

	ok(key_dead(c, rc), "%s: %s's read after the revoke is refused (%d)", M, who, rc);
	rc = rmem_write(c, r, 0, junk, 4096);
	ok(key_dead(c, rc), "%s: %s's write after the revoke is refused (%d)", M, who, rc);
	rc = rmem_free(c, r);
	ok(refused(rc), "%s: %s's free of the revoked handle is refused (%d)", M, who, rc);
}

/*
 * A holder goes on after the revoke: it allocates, writes, reads back, opens
 * another name and frees.  In window mode its error completion cost it its
 * queue pair, so this runs over TCP with TCP keys (docs/architecture.md,
 * "Revoke"); in region-mr mode it re-attached and stays on the NIC.
 */
static void survives(const struct rmemd *d, rmem_client *c, const char *who)
{
	struct rmem_region r, h;
	rmem_client *o = NULL;
	int rc = rmem_alloc(c, SIZE, 0, &r);

	rc = rc ? rc : rmem_write(c, &r, 0, kpat, SIZE);
	rc = rc ? rc : (reads(c, &r, kpat, SIZE) == 1 ? 0 : -EIO);
	ok(rc == 0, "%s: %s goes on: alloc, write, read back (%d)", M, who, rc);
	rc = rc ? rc : rmem_free(c, &r);
	ok(rc == 0, "%s: %s frees it (%d)", M, who, rc);
	rc = client_connect(d->tcp_ep, WAIT_MS, &o);
	rc = rc ? rc : rmem_create(o, "t/s", 4096, 0, &h);
	rc = rc ? rc : rmem_write(o, &h, 0, pat, 4096);
	rc = rc ? rc : rmem_open(c, "t/s", RMEM_READ, &r);
	rc = rc ? rc : (reads(c, &r, pat, 4096) == 1 ? 0 : -EIO);
	ok(rc == 0, "%s: %s opens another name and reads it (%d)", M, who, rc);
	rmem_free(c, &r);
	rmem_unlink(o, "t/s");
	rmem_close(o);
}

/* The revoked name is free again: a fresh client creates it. */
static void recreate(const struct rmemd *d, rmem_client *admin, const struct base *base)
{
	struct rmem_region r;
	rmem_client *e = NULL;
	int rc = client_connect(d->tcp_ep, WAIT_MS, &e);

	rc = rc ? rc : rmem_create(e, "t/r", SIZE, 0, &r);
	ok(rc == 0, "%s: \"t/r\" can be created again (%d)", M, rc);
	rc = rc ? rc : reads_zero(e, &r);
	ok(rc == 1, "%s: and reads zero (%d)", M, rc);
	rc = rmem_unlink2(e, "t/r", 0);
	ok(rc == 0, "%s: rmem_unlink2 with flags 0 is a plain unlink (%d)", M, rc);
	rc = reads_zero(e, &r);
	ok(rc == 1, "%s: which leaves the handle working (%d)", M, rc);
	rmem_free(e, &r);
	rmem_close(e);
	back_to(admin, base, "after the plain unlink and the free");
}

static void revoke_all(const struct rmemd *d, rmem_client *admin)
{
	rmem_client *a = NULL, *b = NULL, *c = NULL;
	struct rmem_region ra, rb, rc1, rc2, r;
	struct base base;
	int rc = connect3(d, &a, &b, &c);

	if (!ok(rc == 0, "%s: revoke: three clients (%d)", M, rc))
		goto out;
	take_base(admin, &base);
	rc = rmem_create(a, "t/r", SIZE, 0, &ra);
	if (rc == 0)
		rc = rmem_write(a, &ra, 0, pat, SIZE);
	if (rc == 0)
		rc = rmem_open(b, "t/r", RMEM_READ, &rb);
	if (rc == 0)
		rc = rmem_open(c, "t/r", RW, &rc1);
	if (rc == 0)
		rc = rmem_open(c, "t/r", RMEM_READ, &rc2);
	if (!ok(rc == 0, "%s: A creates \"t/r\", B opens it read-only, C twice (%d)", M, rc))
		goto out;
	rc = rmem_unlink2(a, "t/r", RMEM_UNLINK_REVOKE | 0x2);
	ok(rc == -EINVAL, "%s: rmem_unlink2 with an unknown flag is -EINVAL (%d)", M, rc);
	rc = reads(b, &rb, pat, SIZE);
	ok(rc == 1, "%s: and revoked nothing: B reads (%d)", M, rc);
	rc = rmem_unlink2(a, "t/r", RMEM_UNLINK_REVOKE);
	ok(rc == 0, "%s: A unlinks \"t/r\" with RMEM_UNLINK_REVOKE (%d)", M, rc);
	rc = rmem_open(b, "t/r", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: opening it is -ENOENT (%d)", M, rc);
	revoked(a, &ra, "A");
	revoked(b, &rb, "B");
	revoked(c, &rc1, "C (read-write)");
	revoked(c, &rc2, "C (read-only)");
	back_to(admin, &base, "revoked bytes come back while the holders still run");
	survives(d, b, "B");
	survives(d, c, "C");
	back_to(admin, &base, "and after the holders' own regions");
	recreate(d, admin, &base);
out:
	rmem_close(a);
	rmem_close(b);
	rmem_close(c);
}

/* ---- rmem_free releases one handle ------------------------------------------------------ */

static void free_one(const struct rmemd *d, rmem_client *admin)
{
	rmem_client *b = NULL, *c = NULL;
	struct rmem_region h1, h2, h3;
	struct base base;
	uint64_t last = 0;
	int rc = client_connect(d->tcp_ep, WAIT_MS, &b);

	rc = rc ? rc : client_connect(d->tcp_ep, WAIT_MS, &c);
	take_base(admin, &base);
	rc = rc ? rc : rmem_create(c, "t/f", SIZE, 0, &h1);
	rc = rc ? rc : rmem_write(c, &h1, 0, pat, SIZE);
	rc = rc ? rc : rmem_open(c, "t/f", RW, &h2);
	rc = rc ? rc : rmem_open(b, "t/f", RMEM_READ, &h3);
	if (!ok(rc == 0 && h1.id != h2.id,
		"%s: C creates \"t/f\" and opens it again, B opens it (%d)", M, rc))
		goto out;
	rc = rmem_free(c, &h1);
	ok(rc == 0, "%s: C frees its first handle (%d)", M, rc);
	rc = reads(c, &h2, pat, SIZE);
	ok(rc == 1, "%s: C's second handle to the name still reads the bytes (%d)", M, rc);
	rc = reads(b, &h3, pat, SIZE);
	ok(rc == 1, "%s: and so does B's (%d)", M, rc);
	rc = rmem_read(c, &h1, 0, got, 64);
	ok(key_dead(c, rc), "%s: the freed handle's key no longer reads (%d)", M, rc);
	rc = rmem_write(c, &h1, 0, junk, 64);
	ok(key_dead(c, rc), "%s: nor writes (%d)", M, rc);
	rc = reads(b, &h3, pat, SIZE);
	ok(rc == 1, "%s: the bytes are unchanged (%d)", M, rc);
	rc = rmem_free(c, &h1);
	ok(rc == -ENOENT, "%s: freeing it again is -ENOENT (%d)", M, rc);
	rc = used_wait(admin, base.used + h2.length, &last);
	ok(rc == 0, "%s: the name's bytes are still held, once (%llu)", M,
	   (unsigned long long)last);
	rc = rmem_unlink(b, "t/f");
	ok(rc == 0, "%s: a read-only holder may unlink the name (%d)", M, rc);
	rc = rmem_free(c, &h2);
	rc = rc ? rc : rmem_free(b, &h3);
	ok(rc == 0, "%s: both remaining handles freed (%d)", M, rc);
	back_to(admin, &base, "after the last handle of \"t/f\"");
out:
	rmem_close(b);
	rmem_close(c);
}

/* ---- bad input -------------------------------------------------------------------------- */

static void bad_name(rmem_client *c, const char *name, int want, const char *what)
{
	struct rmem_region r;
	int rc1 = rmem_create(c, name, SIZE, 0, &r);
	int rc2 = rmem_open(c, name, RMEM_READ, &r);
	int rc3 = rmem_unlink(c, name);

	ok(rc1 == want && rc2 == want && rc3 == want,
	   "%s: a name %s: create, open, unlink are %d (%d, %d, %d)", M, what, want, rc1, rc2,
	   rc3);
}

static void bad_names(rmem_client *c)
{
	char name[RMEM_NAME_MAX + 2];
	struct rmem_region r, r2;
	int rc;

	bad_name(c, "", -EINVAL, "of 0 bytes");
	memset(name, 'n', RMEM_NAME_MAX + 1);
	name[RMEM_NAME_MAX + 1] = 0;
	bad_name(c, name, -ENAMETOOLONG, "of 256 bytes");
	bad_name(c, "t/a b", -EINVAL, "with a space");
	bad_name(c, "t/\001", -EINVAL, "with a control byte");
	bad_name(c, "t/\n", -EINVAL, "with a newline");
	bad_name(c, "t/\177", -EINVAL, "with DEL");
	bad_name(c, "t/\303\251", -EINVAL, "with bytes above 0x7e");
	name[RMEM_NAME_MAX] = 0;
	rc = rmem_create(c, name, SIZE, 0, &r);
	ok(rc == 0, "%s: a name of 255 bytes can be created (%d)", M, rc);
	rc = rc ? rc : rmem_open(c, name, RMEM_READ, &r2);
	ok(rc == 0, "%s: opened (%d)", M, rc);
	rc = rc ? rc : rmem_unlink(c, name);
	ok(rc == 0, "%s: and unlinked (%d)", M, rc);
	if (rc == 0) {
		rmem_free(c, &r);
		rmem_free(c, &r2);
	}
	for (int ch = 0x21; ch <= 0x7e; ch++)
		name[ch - 0x21] = (char)ch;
	name[0x7e - 0x21 + 1] = 0;
	rc = rmem_create(c, name, 4096, 0, &r);
	ok(rc == 0, "%s: a name of every byte from 0x21 to 0x7e can be created (%d)", M, rc);
	rc = rc ? rc : rmem_unlink(c, name);
	ok(rc == 0, "%s: and unlinked (%d)", M, rc);
	rmem_free(c, &r);
}

static void bad_args(rmem_client *c)
{
	struct rmem_region r, h;
	int rc = rmem_create(c, "t/acc", SIZE, 0, &h);

	if (!ok(rc == 0, "%s: create \"t/acc\" (%d)", M, rc))
		return;
	ok(rmem_open(c, "t/acc", 0, &r) == -EINVAL, "%s: open with access 0 is -EINVAL", M);
	ok(rmem_open(c, "t/acc", 0x4, &r) == -EINVAL, "%s: open with access 0x4 is -EINVAL", M);
	ok(rmem_open(c, "t/acc", RW | 0x4, &r) == -EINVAL,
	   "%s: open with RMEM_READ|RMEM_WRITE|0x4 is -EINVAL", M);
	rc = rmem_open(c, "t/acc", RMEM_WRITE, &r);
	ok(rc == 0 && r.flags == RMEM_WRITE,
	   "%s: open with RMEM_WRITE alone gives exactly that (%d, flags %#x)", M, rc, r.flags);
	if (rc == 0)
		rmem_free(c, &r);
	ok(rmem_unlink2(c, "t/acc", 0x2) == -EINVAL, "%s: unlink2 with flag 0x2 is -EINVAL", M);
	ok(rmem_unlink2(c, "t/acc", 0x80000000u) == -EINVAL,
	   "%s: unlink2 with flag 0x80000000 is -EINVAL", M);
	ok(rmem_create(c, "t/zero", 0, 0, &r) == -EINVAL, "%s: create of size 0 is -EINVAL", M);
	ok(rmem_create(c, "t/flags", SIZE, 0x1, &r) == -EINVAL,
	   "%s: create with unknown flags is -EINVAL", M);
	ok(rmem_create(NULL, "t/n", SIZE, 0, &r) == -EINVAL &&
	   rmem_create(c, NULL, SIZE, 0, &r) == -EINVAL &&
	   rmem_create(c, "t/n", SIZE, 0, NULL) == -EINVAL,
	   "%s: rmem_create with NULL: -EINVAL", M);
	ok(rmem_open(NULL, "t/acc", RMEM_READ, &r) == -EINVAL &&
	   rmem_open(c, NULL, RMEM_READ, &r) == -EINVAL &&
	   rmem_open(c, "t/acc", RMEM_READ, NULL) == -EINVAL,
	   "%s: rmem_open with NULL: -EINVAL", M);
	ok(rmem_unlink(NULL, "t/acc") == -EINVAL && rmem_unlink(c, NULL) == -EINVAL &&
	   rmem_unlink2(NULL, "t/acc", 0) == -EINVAL && rmem_unlink2(c, NULL, 0) == -EINVAL,
	   "%s: rmem_unlink and rmem_unlink2 with NULL: -EINVAL", M);
	rc = rmem_open(c, "t/acc", RMEM_READ, &r);
	ok(rc == 0, "%s: after all that \"t/acc\" is still there (%d)", M, rc);
	if (rc == 0)
		rmem_free(c, &r);
	rc = rmem_unlink(c, "t/acc");
	ok(rc == 0, "%s: unlink \"t/acc\" (%d)", M, rc);
	rmem_free(c, &h);
}

static void bad_input(const struct rmemd *d, rmem_client *admin)
{
	struct rmem_name_info info;
	rmem_client *c = NULL;
	struct base base;
	int rc = client_connect(d->tcp_ep, WAIT_MS, &c);

	if (!ok(rc == 0, "%s: bad input: connect (%d)", M, rc))
		return;
	take_base(admin, &base);
	bad_names(c);
	bad_args(c);
	back_to(admin, &base, "bad input left nothing behind");
	rc = rmem_names(admin, 0, &info, 1);
	ok(rc == 0, "%s: and no name is listed (%d)", M, rc);
	rmem_close(c);
}

/* ---- the daemon's own checks, past the library ---------------------------------------- */

/* One raw request of the CREATE/OPEN/UNLINK layout: the reply's status
 * (positive errno of an ERROR frame, 0 otherwise) or a negative error. */
static int raw_name_req(int fd, uint16_t op, const char *name, uint64_t size, uint32_t flags)
{
	uint8_t p[PROTO_NAME_REQ_FIXED + PROTO_NAME_MAX];
	struct proto_name_req m = { .size = size, .flags = flags };
	struct raw_reply r;
	size_t len;
	int rc;

	m.name_len = (uint16_t)strlen(name);
	memcpy(m.name, name, m.name_len);
	len = proto_name_req_encode(p, op, &m);
	rc = raw_call(fd, op, 9, p, (uint32_t)len, &r, PROTO_MAX_CTL, WAIT_MS);
	if (rc < 0)
		return rc;
	rc = r.opcode == PROTO_OP_ERROR || r.opcode == op ? r.status : -EPROTO;
	raw_reply_release(&r);
	return rc;
}

/* PROTO_UNLINK_NS from an admin session: what the daemon refuses (nothing
 * is unlinked: "t/raw" is still there for the checks after). */
static void raw_unlink_ns_admin(const struct rmemd *d)
{
	int fd = raw_session(d, true), rc;

	if (!ok(fd >= 0, "%s: a raw admin session on the Unix socket (%d)", M, fd))
		return;
	rc = raw_name_req(fd, PROTO_OP_UNLINK, "t/raw", 0, PROTO_UNLINK_NS);
	ok(rc == EINVAL, "%s: raw admin UNLINK_NS of a name without ':': EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_UNLINK, ":t/raw", 0, PROTO_UNLINK_NS | 0x2);
	ok(rc == EINVAL, "%s: raw admin UNLINK_NS with flag 0x2: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_UNLINK, "nobody:t/raw", 0, PROTO_UNLINK_NS);
	ok(rc == ENOENT, "%s: raw admin UNLINK_NS of an unknown tenant: ENOENT (%d)", M, rc);
	close(fd);
}

/* CREATE marked as a redundant region's piece (PROTO_CREATE_F_PIECE): only
 * under a piece's name, listed as one; an ordinary create of the same
 * shape of name is not one, so the repair agent never takes it for one
 * (issue 30, item 4). */
static void raw_pieces(const struct rmemd *d, int fd)
{
	static const char *const bad[] = { "t/raw", "backup~0.1", "backup~2.01", "backup~2.20",
					   "~2.1", "backup~2.1x" };
	struct rmem_name_info info;
	rmem_client *admin = NULL;
	int rc, all = 1;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if ((rc = raw_name_req(fd, PROTO_OP_CREATE, bad[i], SIZE, PROTO_CREATE_F_PIECE)) !=
		    EINVAL) {
			diag("%s: %d", bad[i], rc);
			all = 0;
		}
	ok(all, "%s: raw CREATE marked as a piece under a name that is no piece's: EINVAL", M);
	rc = raw_name_req(fd, PROTO_OP_CREATE, "backup~2.1", SIZE, 0x200);
	ok(rc == EINVAL, "%s: raw CREATE with flag 0x200: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_CREATE, "backup~2.1", SIZE, 0);
	ok(rc == 0, "%s: a raw ordinary CREATE of \"backup~2.1\" works (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_CREATE, "db~3.0", SIZE, PROTO_CREATE_F_PIECE);
	ok(rc == 0, "%s: a raw CREATE of \"db~3.0\" marked as a piece works (%d)", M, rc);
	rc = client_connect(d->unix_ep, WAIT_MS, &admin);
	ok(rc == 0 && find_name(admin, "", "backup~2.1", 0, &info) == 1 &&
		   find_name(admin, "", "db~3.0", RMEM_NAME_PIECE, &info) == 1,
	   "%s: the admin listing: \"backup~2.1\" ordinary, \"db~3.0\" a piece (%d)", M, rc);
	if (admin)
		rmem_close(admin);
	ok(raw_name_req(fd, PROTO_OP_UNLINK, "backup~2.1", 0, 0) == 0 &&
		   raw_name_req(fd, PROTO_OP_UNLINK, "db~3.0", 0, 0) == 0,
	   "%s: both unlinked", M);
}

static void daemon_checks(const struct rmemd *d)
{
	rmem_client *c = NULL;
	struct rmem_region h;
	int fd, rc = client_connect(d->tcp_ep, WAIT_MS, &c);

	rc = rc ? rc : rmem_create(c, "t/raw", SIZE, 0, &h);
	fd = raw_session(d, false);
	if (!ok(rc == 0 && fd >= 0, "%s: raw: \"t/raw\" exists, a raw session (%d, %d)", M, rc, fd))
		goto out;
	rc = raw_name_req(fd, PROTO_OP_CREATE, "t/a b", SIZE, 0);
	ok(rc == EINVAL, "%s: raw CREATE of a name with a space: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_OPEN, "t/\001", 0, PROTO_ACCESS_READ);
	ok(rc == EINVAL, "%s: raw OPEN of a name with a control byte: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_UNLINK, "t/\377", 0, 0);
	ok(rc == EINVAL, "%s: raw UNLINK of a name with byte 0xff: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_OPEN, "t/raw", 0, 0);
	ok(rc == EINVAL, "%s: raw OPEN with access 0: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_OPEN, "t/raw", 0, 0x4);
	ok(rc == EINVAL, "%s: raw OPEN with access 0x4: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_UNLINK, "t/raw", 0, 0x2);
	ok(rc == EINVAL, "%s: raw UNLINK with flag 0x2: EINVAL (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_UNLINK, ":t/raw", 0, PROTO_UNLINK_NS);
	ok(rc == EACCES, "%s: raw UNLINK with PROTO_UNLINK_NS over TCP: EACCES (%d)", M, rc);
	raw_unlink_ns_admin(d);
	rc = raw_name_req(fd, PROTO_OP_OPEN, "t/raw", 0, PROTO_ACCESS_READ);
	ok(rc == 0, "%s: a raw OPEN of \"t/raw\" works (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_CREATE, "t/raw", SIZE, 0);
	ok(rc == EEXIST, "%s: a raw CREATE of \"t/raw\": EEXIST (%d)", M, rc);
	rc = raw_name_req(fd, PROTO_OP_UNLINK, "t/raw", 0, 0);
	ok(rc == 0, "%s: a raw UNLINK of \"t/raw\" works (%d)", M, rc);
	raw_pieces(d, fd);
	rc = rmem_free(c, &h);
	ok(rc == 0, "%s: free the library's handle (%d)", M, rc);
out:
	close_fd(fd);
	rmem_close(c);
}

/* ---- async and atomics ------------------------------------------------------------------ */

/* Waits for n completions: how many had status want. */
static int completions(rmem_client *c, int n, int want)
{
	struct rmem_completion out[16];
	uint64_t deadline = now_ms() + WAIT_MS;
	int got_n = 0, good = 0;

	while (got_n < n && now_ms() < deadline) {
		int k = rmem_poll(c, out, 16, 500);

		if (k < 0)
			break;
		for (int i = 0; i < k; i++)
			good += out[i].status == want;
		got_n += k;
	}
	return good;
}

static void async_named(rmem_client *b, rmem_client *c, const struct rmem_region *rw,
			const struct rmem_region *ro)
{
	int rc, n = 0;

	for (int i = 0; i < 8; i++)
		n += rmem_post_write(c, rw, (uint64_t)i * 4096, pat + i * 4096, 4096,
				     (uint64_t)i) == 0;
	ok(n == 8 && completions(c, 8, 0) == 8, "%s: 8 posted writes on a named handle (%d)", M,
	   n);
	memset(got, 0, SIZE);
	for (int i = 0; i < 8; i++)
		rmem_post_read(c, rw, (uint64_t)i * 4096, got + i * 4096, 4096,
				    100 + (uint64_t)i);
	rc = completions(c, 8, 0);
	ok(rc == 8 && memcmp(got, pat, 8 * 4096) == 0,
	   "%s: 8 posted reads bring them back (%d)", M, rc);
	rc = rmem_post_read(b, ro, 0, got, 4096, 7);
	ok(rc == 0 && completions(b, 1, 0) == 1 && memcmp(got, pat, 4096) == 0,
	   "%s: a posted read on a read-only handle works (%d)", M, rc);
	rc = rmem_post_write(b, ro, 0, junk, 4096, 8);
	ok(rc == -EACCES || (rc == 0 && completions(b, 1, -EACCES) == 1),
	   "%s: a posted write on a read-only handle ends -EACCES (%d)", M, rc);
	rc = reads(b, ro, pat, 8 * 4096);
	ok(rc == 1, "%s: and wrote nothing (%d)", M, rc);
}

static void atomics_named(rmem_client *b, rmem_client *c, const struct rmem_region *rw,
			  const struct rmem_region *ro)
{
	uint64_t zero = 0, old = 1, v = 0;
	const uint64_t at = SIZE - 64;
	int rc = rmem_write(c, rw, at, &zero, 8);

	rc = rc ? rc : rmem_cas(c, rw, at, 0, 42, &old);
	ok(rc == 0 && old == 0, "%s: CAS 0 -> 42 on a named handle (%d, old %llu)", M, rc,
	   (unsigned long long)old);
	rc = rmem_cas(c, rw, at, 0, 7, &old);
	ok(rc == 0 && old == 42, "%s: CAS 0 -> 7 fails, old 42 (%d, %llu)", M, rc,
	   (unsigned long long)old);
	rc = rmem_faa(c, rw, at, 5, &old);
	ok(rc == 0 && old == 42, "%s: FAA +5, old 42 (%d, %llu)", M, rc, (unsigned long long)old);
	rc = rmem_read(b, ro, at, &v, 8);
	ok(rc == 0 && v == 47, "%s: B reads 47 through its read-only handle (%d, %llu)", M, rc,
	   (unsigned long long)v);
	rc = rmem_faa(b, ro, at, 1, &old);
	ok(rc == -EACCES, "%s: B's FAA there is -EACCES (%d)", M, rc);
	rc = rmem_read(c, rw, at, &v, 8);
	ok(rc == 0 && v == 47, "%s: still 47 (%d, %llu)", M, rc, (unsigned long long)v);
}

static void async_atomics(const struct rmemd *d, rmem_client *admin)
{
	rmem_client *b = NULL, *c = NULL;
	struct rmem_region rw, ro;
	struct base base;
	int rc = client_connect(d->tcp_ep, WAIT_MS, &b);

	rc = rc ? rc : client_connect(d->tcp_ep, WAIT_MS, &c);
	take_base(admin, &base);
	rc = rc ? rc : rmem_create(c, "t/x", SIZE, 0, &rw);
	rc = rc ? rc : rmem_open(b, "t/x", RMEM_READ, &ro);
	if (ok(rc == 0, "%s: C creates \"t/x\", B opens it read-only (%d)", M, rc)) {
		async_named(b, c, &rw, &ro);
		atomics_named(b, c, &rw, &ro);
		rc = rmem_unlink(c, "t/x");
		ok(rc == 0, "%s: unlink \"t/x\" (%d)", M, rc);
	}
	rmem_close(b);
	rmem_close(c);
	back_to(admin, &base, "closing the holders releases their handles");
}

/* ---- a killed client ------------------------------------------------------------------- */

/* What the child says: how far it got, and the region it created. */
struct child_report {
	int step, rc;
	struct rmem_region r;
};

#define KILLED_SEED 99

/* The child, in a fresh exec of this program (librdmacm's state inherited
 * through fork() is not usable in a child): creates "t/k" and an anonymous
 * region, fills both, says so on wfd and waits to be killed. */
static int child_body(const char *ep, int wfd)
{
	struct child_report rep = { 0 };
	struct rmem_region anon;
	rmem_client *c = NULL;

	fill_random(kpat, SIZE, KILLED_SEED);
	rep.rc = client_connect(ep, WAIT_MS, &c);
	if (!rep.rc && ++rep.step)
		rep.rc = rmem_create(c, "t/k", SIZE, 0, &rep.r);
	if (!rep.rc && ++rep.step)
		rep.rc = rmem_write(c, &rep.r, 0, kpat, SIZE);
	if (!rep.rc && ++rep.step)
		rep.rc = rmem_alloc(c, 1 * MiB, 0, &anon);
	if (!rep.rc && ++rep.step)
		rep.rc = rmem_write(c, &anon, 0, kpat, SIZE);
	if (write(wfd, &rep, sizeof rep) != sizeof rep || rep.rc)
		return 1;
	pause();
	return 0;
}

static int child_exec(int wfd, void *arg)
{
	const struct rmemd *d = arg;
	const char *const args[] = { "test_named", "--create-k", d->tcp_ep, NULL };

	return child_reexec(wfd, args);
}

static void killed_client(const struct rmemd *d, rmem_client *admin)
{
	struct child_report rep = { .rc = -EIO };
	struct rmem_region h, rk;
	rmem_client *b = NULL;
	struct child ch = { 0 };
	struct base base;
	uint64_t last = 0;
	int rc;

	take_base(admin, &base);
	rc = child_spawn(&ch, child_exec, (void *)d);
	if (rc == 0 && read(ch.rfd, &rep, sizeof rep) != sizeof rep)
		rc = -EIO;
	ok(rc == 0 && rep.rc == 0,
	   "%s: a child creates \"t/k\" and a 1 MiB anonymous region (%d; step %d: %d)", M, rc,
	   rep.step, rep.rc);
	rk = rep.r;
	if (ch.pid > 0) {
		rc = child_end(&ch, SIGKILL);
		ok(rc == 128 + SIGKILL, "%s: the child is killed (%d)", M, rc);
		close(ch.rfd);
	}
	rc = used_wait(admin, base.used + rk.length, &last);
	ok(rc == 0, "%s: its anonymous region is gone, \"t/k\" stays (used %llu, want %llu)", M,
	   (unsigned long long)last, (unsigned long long)(base.used + rk.length));
	rc = client_connect(d->tcp_ep, WAIT_MS, &b);
	rc = rc ? rc : rmem_open(b, "t/k", RMEM_READ, &h);
	ok(rc == 0, "%s: another client opens \"t/k\" (%d)", M, rc);
	fill_random(kpat, SIZE, KILLED_SEED);
	rc = rc ? rc : reads(b, &h, kpat, SIZE);
	ok(rc == 1, "%s: and reads what the dead child wrote (%d)", M, rc);
	rc = rmem_unlink(b, "t/k");
	ok(rc == 0, "%s: unlink \"t/k\" (%d)", M, rc);
	rmem_close(b);
	back_to(admin, &base, "after \"t/k\" is unlinked and closed");
}

/* ---- one daemon, every part ------------------------------------------------------------- */

static void with_daemon(const char *extra, const char *mode)
{
	char what[64];
	rmem_client *admin = NULL;
	struct rmemd d;
	int rc = rmemd_start(&d, "64M", extra);

	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	if (!ok(rc == 0, "%s: rmemd starts (%d)", mode, rc))
		return;
	snprintf(what, sizeof what, "%s %s", harness_transport(), mode);
	M = what;
	rc = client_connect(d.unix_ep, WAIT_MS, &admin);
	if (ok(rc == 0, "%s: an admin client on the Unix socket (%d)", M, rc)) {
		share(&d, admin);
		revoke_all(&d, admin);
		free_one(&d, admin);
		bad_input(&d, admin);
		daemon_checks(&d);
		async_atomics(&d, admin);
		killed_client(&d, admin);
	}
	rmem_close(admin);
	rc = rmemd_stop(&d);
	ok(rc == 0, "%s: rmemd exits 0 (%d)", M, rc);
	rmemd_cleanup(&d);
}

/* ---- limits.max_handles ---------------------------------------------------------------- */

/* Three handles a session: the fourth OPEN or CREATE is -EMFILE and takes
 * nothing; another client has three of its own; a free makes room. */
static void handle_limit(void)
{
	struct rmem_region r[4], other;
	rmem_client *a = NULL, *b = NULL;
	struct rmemd d;
	int rc = rmemd_start(&d, "16M", "limits = { max_clients = 64; max_handles = 3; };");

	if (!ok(rc == 0, "max_handles: rmemd starts (%d)", rc))
		return;
	M = "max_handles";
	rc = client_connect(d.tcp_ep, WAIT_MS, &a);
	rc = rc ? rc : client_connect(d.tcp_ep, WAIT_MS, &b);
	rc = rc ? rc : rmem_create(a, "l/x", 4096, 0, &r[0]);
	rc = rc ? rc : rmem_open(a, "l/x", RMEM_READ, &r[1]);
	rc = rc ? rc : rmem_open(a, "l/x", RMEM_READ | RMEM_WRITE, &r[2]);
	ok(rc == 0, "%s: a create and two opens, three handles (%d)", M, rc);
	rc = rmem_open(a, "l/x", RMEM_READ, &r[3]);
	ok(rc == -EMFILE, "%s: the fourth open: -EMFILE (%d)", M, rc);
	rc = rmem_create(a, "l/y", 4096, 0, &r[3]);
	ok(rc == -EMFILE, "%s: a create past the limit: -EMFILE (%d)", M, rc);
	rc = rmem_open(b, "l/y", RMEM_READ, &other);
	ok(rc == -ENOENT, "%s: and it made no name (%d)", M, rc);
	rc = rmem_open(b, "l/x", RMEM_READ, &other);
	ok(rc == 0, "%s: another client opens it: the limit is per session (%d)", M, rc);
	rc = rmem_free(a, &r[1]);
	rc = rc ? rc : rmem_open(a, "l/x", RMEM_READ, &r[1]);
	ok(rc == 0, "%s: after a free, an open fits again (%d)", M, rc);
	ok(rmem_unlink(a, "l/x") == 0, "%s: unlinked", M);
	rmem_close(a);
	rmem_close(b);
	rc = rmemd_stop(&d);
	ok(rc == 0, "%s: rmemd exits 0 (%d)", M, rc);
	rmemd_cleanup(&d);
}

/* ---- tenants ---------------------------------------------------------------------------- */

static char dir[] = "/tmp/test_named.XXXXXX";
static char key_a[64], key_b[64];

static int connect_as(const struct rmemd *d, const char *tenant, rmem_client **out)
{
	return client_connect_as(d, tenant, tenant[0] == 'A' ? key_a : key_b, out);
}

/* A creates "t/a" of 3 MiB, writes, and goes. */
static int tenant_a_creates(const struct rmemd *d, struct rmem_region *ra)
{
	rmem_client *a = NULL;
	int rc = connect_as(d, "A", &a);

	rc = rc ? rc : rmem_create(a, "t/a", 3 * MiB, 0, ra);
	rc = rc ? rc : rmem_write(a, ra, 0, pat, SIZE);
	rmem_close(a);
	return rc;
}

/* B has a namespace of its own. */
static void tenant_b(const struct rmemd *d, rmem_client *admin)
{
	struct rmem_name_info info;
	struct rmem_region r;
	rmem_client *b = NULL;
	int rc = connect_as(d, "B", &b);

	ok(rc == 0, "%s: tenant B connects (%d)", M, rc);
	rc = rc ? rc : rmem_open(b, "t/a", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: B cannot open A's \"t/a\": -ENOENT (%d)", M, rc);
	rc = rmem_unlink(b, "t/a");
	ok(rc == -ENOENT, "%s: nor unlink it: -ENOENT (%d)", M, rc);
	rc = rmem_create(b, "t/a", SIZE, 0, &r);
	ok(rc == 0, "%s: B creates a \"t/a\" of its own (%d)", M, rc);
	rc = rc ? rc : reads_zero(b, &r);
	ok(rc == 1, "%s: which is not A's: it reads zero (%d)", M, rc);
	ok(find_name(admin, "A", "t/a", 0, &info) == 1 && info.handles == 0 &&
	   find_name(admin, "B", "t/a", 0, &info) == 1 && info.handles == 1,
	   "%s: rmem_names lists both, each with its tenant and handles", M);
	rc = rmem_unlink(b, "t/a");
	ok(rc == 0, "%s: B unlinks its \"t/a\" (%d)", M, rc);
	rmem_close(b);
}

/* A's quota still counts "t/a" though no session of A created it now. */
static void tenant_a_quota(const struct rmemd *d, const struct rmem_region *ra)
{
	struct rmem_region h, more, r;
	rmem_client *a = NULL;
	int rc = connect_as(d, "A", &a);

	rc = rc ? rc : rmem_open(a, "t/a", RMEM_READ, &h);
	ok(rc == 0, "%s: a new session of A opens its \"t/a\" (%d)", M, rc);
	rc = rc ? rc : reads(a, &h, pat, SIZE);
	ok(rc == 1, "%s: and reads what the first wrote (%d)", M, rc);
	rc = rmem_alloc(a, 2 * MiB, 0, &r);
	ok(rc == -EDQUOT, "%s: 2 MiB more is -EDQUOT: \"t/a\" counts (%d)", M, rc);
	rc = rmem_alloc(a, QUOTA_A - ra->length, 0, &more);
	ok(rc == 0, "%s: the rest of the quota can be had: handles are not charged (%d)", M, rc);
	rc = rmem_alloc(a, 64, 0, &r);
	ok(rc == -EDQUOT, "%s: one more byte is -EDQUOT (%d)", M, rc);
	rmem_free(a, &more);
	rc = rmem_unlink(a, "t/a");
	ok(rc == 0, "%s: A unlinks \"t/a\" (%d)", M, rc);
	sleep_ms(HELD_MS);
	rc = rmem_alloc(a, 2 * MiB, 0, &r);
	ok(rc == -EDQUOT, "%s: while A's handle holds it, still -EDQUOT (%d)", M, rc);
	rc = rmem_free(a, &h);
	ok(rc == 0, "%s: A frees its handle (%d)", M, rc);
	rc = alloc_quota_wait(a, QUOTA_A, &r, WAIT_MS);
	ok(rc == 0, "%s: then the whole quota is A's again (%d)", M, rc);
	rmem_close(a);
}

/* ---- the admin's unlink in a tenant's namespace ----------------------------------------- */

static int create_eventually(rmem_client *c, const char *name, struct rmem_region *r)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	int rc;

	/* A's quota may still hold ranges of the part before in the quarantine. */
	while ((rc = rmem_create(c, name, SIZE, 0, r)) == -EDQUOT && now_ms() < deadline)
		sleep_ms(20);
	return rc;
}

/* Who may not: a tenant, even of the namespace; and what is not there. */
static void unlink_ns_refusals(rmem_client *admin, rmem_client *a, rmem_client *b)
{
	char many[40];
	int rc;

	rc = rmem_unlink_ns(b, "A", "t/adm", 0);
	ok(rc == -EACCES, "%s: tenant B's rmem_unlink_ns of A's name: -EACCES (%d)", M, rc);
	rc = rmem_unlink_ns(a, "A", "t/adm", 0);
	ok(rc == -EACCES, "%s: A's own, not being admin: -EACCES (%d)", M, rc);
	rc = rmem_unlink_ns(admin, "Z", "t/adm", 0);
	ok(rc == -ENOENT, "%s: the admin's, of unknown tenant Z: -ENOENT (%d)", M, rc);
	rc = rmem_unlink_ns(admin, "B", "t/adm", 0);
	ok(rc == -ENOENT, "%s: of B, which has no such name: -ENOENT (%d)", M, rc);
	memset(many, 'x', sizeof many - 1);
	many[sizeof many - 1] = '\0';
	ok(rmem_unlink_ns(admin, "a:b", "t/adm", 0) == -EINVAL &&
	   rmem_unlink_ns(admin, many, "t/adm", 0) == -EINVAL &&
	   rmem_unlink_ns(admin, NULL, "t/adm", 0) == -EINVAL &&
	   rmem_unlink_ns(admin, "A", "t/adm", 0x4) == -EINVAL &&
	   rmem_unlink_ns(admin, "A", "a b", 0) == -EINVAL,
	   "%s: a tenant with ':', 40 bytes or NULL, unknown flags, a bad name: -EINVAL", M);
}

/* A's names, unlinked by the admin: plainly, with revoke, and the longest. */
static void unlink_ns_of_a(rmem_client *admin, rmem_client *a)
{
	struct rmem_region h, hr, hl, r;
	struct rmem_name_info info;
	char longest[RMEM_NAME_MAX + 1];
	int rc;

	memset(longest, 'l', RMEM_NAME_MAX);
	longest[RMEM_NAME_MAX] = '\0';
	rc = create_eventually(a, "t/adm", &h);
	rc = rc ? rc : rmem_write(a, &h, 0, pat, SIZE);
	rc = rc ? rc : create_eventually(a, "t/rev", &hr);
	rc = rc ? rc : create_eventually(a, longest, &hl);
	if (!ok(rc == 0, "%s: A creates \"t/adm\", \"t/rev\" and a 255-byte name (%d)", M, rc))
		return;
	rc = rmem_unlink_ns(admin, "A", "t/adm", 0);
	ok(rc == 0, "%s: the admin unlinks A's \"t/adm\" (%d)", M, rc);
	ok(find_name(admin, "A", "t/adm", RMEM_NAME_UNLINKED, &info) == 1 && info.handles == 1,
	   "%s: listed unlinked, A's handle still open", M);
	rc = rmem_open(a, "t/adm", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: A's open of it: -ENOENT (%d)", M, rc);
	rc = reads(a, &h, pat, SIZE);
	ok(rc == 1, "%s: A's handle still reads the pattern (%d)", M, rc);
	rc = rmem_unlink_ns(admin, "A", "t/adm", 0);
	ok(rc == -ENOENT, "%s: a second unlink: -ENOENT (%d)", M, rc);
	rc = rmem_unlink_ns(admin, "A", "t/rev", RMEM_UNLINK_REVOKE);
	ok(rc == 0, "%s: the admin unlinks A's \"t/rev\" with revoke (%d)", M, rc);
	revoked(a, &hr, "A");
	rc = rmem_unlink_ns(admin, "A", longest, 0);
	ok(rc == 0, "%s: and A's 255-byte name (\"A:\" + 255 bytes on the wire) (%d)", M, rc);
	ok(rmem_free(a, &h) == 0 && rmem_free(a, &hl) == 0, "%s: A frees its handles", M);
}

/* The anonymous namespace is "" (the admin's own, here). */
static void unlink_ns_anon(rmem_client *admin)
{
	struct rmem_region h, r;
	int rc = rmem_create(admin, "t/anon", SIZE, 0, &h);

	rc = rc ? rc : rmem_unlink_ns(admin, "", "t/anon", 0);
	ok(rc == 0, "%s: rmem_unlink_ns(\"\") unlinks in the anonymous namespace (%d)", M, rc);
	rc = rmem_open(admin, "t/anon", RMEM_READ, &r);
	ok(rc == -ENOENT, "%s: then its open is -ENOENT (%d)", M, rc);
	rmem_free(admin, &h);
}

static void admin_unlink_ns(const struct rmemd *d, rmem_client *admin)
{
	rmem_client *a = NULL, *b = NULL;
	struct base base;
	int rc;

	take_base(admin, &base);
	rc = connect_as(d, "A", &a);
	rc = rc ? rc : connect_as(d, "B", &b);
	if (ok(rc == 0, "%s: tenants A and B connect again (%d)", M, rc)) {
		unlink_ns_refusals(admin, a, b);
		unlink_ns_of_a(admin, a);
		unlink_ns_anon(admin);
	}
	rmem_close(a);
	rmem_close(b);
	back_to(admin, &base, "after the admin's unlinks");
}

static void tenants(void)
{
	char extra[512];
	rmem_client *admin = NULL;
	struct rmem_region ra;
	struct rmemd d;
	int rc;

	M = "tenants";
	if (!mkdtemp(dir)) {
		ok(0, "%s: a directory for the secret files", M);
		return;
	}
	snprintf(key_a, sizeof key_a, "%s/a.key", dir);
	snprintf(key_b, sizeof key_b, "%s/b.key", dir);
	rc = write_file(key_a, "secret of tenant A for names", 0600);
	rc = rc ? rc : write_file(key_b, "secret of tenant B for names", 0600);
	if (!ok(rc == 0, "%s: secret files for A and B (%d)", M, rc))
		goto out;
	snprintf(extra, sizeof extra,
		 "tenants = ( { name = \"A\"; secret_file = \"%s\"; quota = \"4M\"; },\n"
		 "            { name = \"B\"; secret_file = \"%s\"; } );", key_a, key_b);
	rc = rmemd_start(&d, "64M", extra);
	if (!ok(rc == 0, "%s: rmemd with tenants A (quota 4 MiB) and B starts (%d)", M, rc))
		goto out;
	rc = client_connect(d.unix_ep, WAIT_MS, &admin);
	rc = rc ? rc : tenant_a_creates(&d, &ra);
	if (ok(rc == 0, "%s: A creates \"t/a\" of 3 MiB, writes, closes (%d)", M, rc)) {
		tenant_b(&d, admin);
		tenant_a_quota(&d, &ra);
		admin_unlink_ns(&d, admin);
	}
	rmem_close(admin);
	rc = rmemd_stop(&d);
	ok(rc == 0, "%s: rmemd exits 0 (%d)", M, rc);
	rmemd_cleanup(&d);
out:
	unlink(key_a);
	unlink(key_b);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--create-k"))
		return child_body(argv[2], (int)strtol(argv[3], NULL, 10));
	with_daemon(NULL, "default keys");
	if (harness_rdma())
		with_daemon("rdma = { keys = \"window\"; };", "keys=window");
	handle_limit();
	tenants();
	return tap_done();
}
