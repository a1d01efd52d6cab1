/*
 * test_basic.c - the everyday path against a real rmemd, over TCP and over
 * the Unix socket: connect, alloc, write, read, free, stats.  With
 * RMEM_TEST_TRANSPORT=rdma (tests/func/rdma, in the test VM) the network
 * endpoint is rdma://: its data moves over the queue pair.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define MAX_IDS 64

/* Every region id this daemon ever gave us, across both endpoints. */
struct id_log {
	uint64_t ids[MAX_IDS];
	size_t n;
};

static bool id_seen(const struct id_log *l, uint64_t id)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

static void id_add(struct id_log *l, uint64_t id)
{
	if (l->n < MAX_IDS)
		l->ids[l->n++] = id;
}

/* Allocates size, writes random bytes at offset 0, reads them back. */
static void round_trip(rmem_client *c, const char *tr, uint64_t size, uint64_t seed,
		       struct rmem_region *r, struct id_log *ids)
{
	uint8_t *src = malloc(size), *dst = malloc(size);
	int rc;

	if (!src || !dst) {
		ok(0, "%s: malloc %llu", tr, (unsigned long long)size);
		goto out;
	}
	rc = rmem_alloc(c, size, 0, r);
	if (!ok(rc == 0, "%s: alloc %llu bytes (rc %d)", tr, (unsigned long long)size, rc)) {
		memset(r, 0, sizeof *r);
		goto out;
	}
	ok(r->length >= size && r->length % 64 == 0,
	   "%s: region length %llu >= %llu and a multiple of the alignment", tr,
	   (unsigned long long)r->length, (unsigned long long)size);
	ok(!id_seen(ids, r->id), "%s: id %llu is new", tr, (unsigned long long)r->id);
	id_add(ids, r->id);

	rc = rmem_read(c, r, 0, dst, size);
	ok(rc == 0 && all_zero(dst, size), "%s: a new %llu-byte region reads zero (rc %d)", tr,
	   (unsigned long long)size, rc);

	fill_random(src, size, seed);
	rc = rmem_write(c, r, 0, src, size);
	ok(rc == 0, "%s: write %llu bytes (rc %d)", tr, (unsigned long long)size, rc);
	memset(dst, 0, size);
	rc = rmem_read(c, r, 0, dst, size);
	ok(rc == 0 && memcmp(src, dst, size) == 0, "%s: read back %llu bytes, equal (rc %d)", tr,
	   (unsigned long long)size, rc);
out:
	free(src);
	free(dst);
}

/* Writes and reads at offsets inside one region; checks the bytes around. */
static void offsets(rmem_client *c, const char *tr, const struct rmem_region *r)
{
	enum { LEN = 3 * 4096 };
	uint8_t *img = malloc(r->length), *got = malloc(r->length);
	uint8_t piece[LEN];
	static const uint64_t offs[] = { 1, 4095, 4096, 65537 };
	int rc;

	if (!img || !got) {
		ok(0, "%s: malloc", tr);
		goto out;
	}
	rc = rmem_read(c, r, 0, img, r->length);
	ok(rc == 0, "%s: read whole region of %llu (rc %d)", tr,
	   (unsigned long long)r->length, rc);
	for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
		fill_random(piece, sizeof piece, 1000 + i);
		rc = rmem_write(c, r, offs[i], piece, sizeof piece);
		ok(rc == 0, "%s: write %d bytes at offset %llu (rc %d)", tr, LEN,
		   (unsigned long long)offs[i], rc);
		memcpy(img + offs[i], piece, sizeof piece);
	}
	/* The last bytes of the region, exactly up to its end. */
	fill_random(piece, 7, 77);
	rc = rmem_write(c, r, r->length - 7, piece, 7);
	ok(rc == 0, "%s: write the last 7 bytes (rc %d)", tr, rc);
	memcpy(img + r->length - 7, piece, 7);

	rc = rmem_read(c, r, 4000, got, 70000);
	ok(rc == 0 && memcmp(got, img + 4000, 70000) == 0,
	   "%s: read 70000 bytes at offset 4000 match the expected image (rc %d)", tr, rc);
	rc = rmem_read(c, r, r->length - 7, got, 7);
	ok(rc == 0 && memcmp(got, img + r->length - 7, 7) == 0,
	   "%s: read the last 7 bytes (rc %d)", tr, rc);
	rc = rmem_read(c, r, 0, got, r->length);
	ok(rc == 0 && memcmp(got, img, r->length) == 0,
	   "%s: the whole region equals the expected image (rc %d)", tr, rc);
	rc = rmem_read(c, r, 5, got, 0);
	ok(rc == 0, "%s: a 0-byte read is fine (rc %d)", tr, rc);
	rc = rmem_write(c, r, r->length, piece, 0);
	ok(rc == 0, "%s: a 0-byte write at the end is fine (rc %d)", tr, rc);
out:
	free(img);
	free(got);
}

static void admin_listings(rmem_client *c, const char *tr, bool is_unix, uint64_t pool_bytes)
{
	struct rmem_pool_info pools[4];
	struct rmem_region_info regs[8];
	struct rmem_client_info cls[8];
	int n;

	n = rmem_pools(c, pools, 4);
	if (!is_unix) {
		ok(n == -EACCES, "%s: rmem_pools over TCP is -EACCES (%d)", tr, n);
		n = rmem_regions(c, 0, regs, 8);
		ok(n == -EACCES, "%s: rmem_regions over TCP is -EACCES (%d)", tr, n);
		n = rmem_clients(c, 0, cls, 8);
		ok(n == -EACCES, "%s: rmem_clients over TCP is -EACCES (%d)", tr, n);
		return;
	}
	ok(n == 1, "%s: rmem_pools lists one pool (%d)", tr, n);
	if (n == 1) {
		ok(!strcmp(pools[0].name, "default"), "%s: pool name \"%s\"", tr, pools[0].name);
		ok(pools[0].bytes == pool_bytes, "%s: pool bytes %llu == stats pool_bytes %llu", tr,
		   (unsigned long long)pools[0].bytes, (unsigned long long)pool_bytes);
		ok(pools[0].alignment == 64, "%s: pool alignment %u", tr, pools[0].alignment);
		ok(pools[0].page_size >= 4096, "%s: pool page size %u", tr, pools[0].page_size);
	} else {
		skip(4, "no pool listed");
	}
	n = rmem_clients(c, 0, cls, 8);
	ok(n == 1 && !strcmp(cls[0].transport, "unix"),
	   "%s: rmem_clients lists this one unix client (%d)", tr, n);
}

static void run_endpoint(const char *ep, const char *tr, struct id_log *ids)
{
	static const uint64_t sizes[] = { 1, 4096, MiB + 3, 64 * MiB };
	enum { NSIZES = sizeof sizes / sizeof sizes[0] };
	struct rmem_region r[NSIZES];
	struct rmem_stats before, mid, after;
	rmem_client *c = NULL;
	uint64_t lengths = 0;
	int rc;

	rc = client_connect(ep, 10000, &c);
	if (!ok(rc == 0 && c, "%s: connect to %s (rc %d)", tr, ep, rc)) {
		skip(1, "no connection");
		return;
	}
	ok(!strcmp(rmem_transport(c), tr), "%s: rmem_transport says \"%s\"", tr, rmem_transport(c));

	/* The previous endpoint's client may still be closing, and its freed
	 * regions may sit in the RDMA quarantine: give them a moment. */
	rc = rmem_stats(c, &before);
	for (int i = 0; i < 100 && rc == 0 && (before.clients != 1 || before.used_bytes); i++) {
		sleep_ms(20);
		rc = rmem_stats(c, &before);
	}
	ok(rc == 0, "%s: stats (rc %d)", tr, rc);
	ok(before.used_bytes == 0 && before.regions == 0 && before.clients == 1,
	   "%s: fresh daemon: used %llu regions %llu clients %llu", tr,
	   (unsigned long long)before.used_bytes, (unsigned long long)before.regions,
	   (unsigned long long)before.clients);
	ok(before.pool_bytes == 128 * MiB && before.free_bytes == before.pool_bytes &&
	   before.largest_free == before.pool_bytes,
	   "%s: pool %llu free %llu largest_free %llu", tr,
	   (unsigned long long)before.pool_bytes, (unsigned long long)before.free_bytes,
	   (unsigned long long)before.largest_free);

	for (size_t i = 0; i < NSIZES; i++) {
		round_trip(c, tr, sizes[i], 42 + i, &r[i], ids);
		lengths += r[i].length;
	}
	if (r[2].length > MiB)
		offsets(c, tr, &r[2]);
	else
		ok(0, "%s: no region for the offset checks", tr);
	for (size_t i = 0; i < NSIZES; i++)
		for (size_t j = i + 1; j < NSIZES; j++)
			if (r[i].id == r[j].id)
				ok(0, "%s: ids of regions %zu and %zu differ", tr, i, j);

	rc = rmem_stats(c, &mid);
	ok(rc == 0, "%s: stats with %d regions (rc %d)", tr, NSIZES, rc);
	ok(mid.used_bytes == lengths, "%s: used_bytes %llu == sum of region lengths %llu", tr,
	   (unsigned long long)mid.used_bytes, (unsigned long long)lengths);
	ok(mid.regions == NSIZES && mid.clients == 1, "%s: regions %llu clients %llu", tr,
	   (unsigned long long)mid.regions, (unsigned long long)mid.clients);
	ok(mid.free_bytes == mid.pool_bytes - mid.used_bytes,
	   "%s: free_bytes %llu == pool - used", tr, (unsigned long long)mid.free_bytes);
	ok(mid.largest_free <= mid.free_bytes && mid.largest_free >= 60 * MiB,
	   "%s: largest_free %llu <= free and no fragmentation", tr,
	   (unsigned long long)mid.largest_free);
	ok(mid.allocs == before.allocs + NSIZES && mid.peak_used >= mid.used_bytes,
	   "%s: allocs %llu peak_used %llu", tr, (unsigned long long)mid.allocs,
	   (unsigned long long)mid.peak_used);

	admin_listings(c, tr, !strcmp(tr, "unix"), mid.pool_bytes);

	for (size_t i = 0; i < NSIZES; i++) {
		rc = rmem_free(c, &r[i]);
		ok(rc == 0, "%s: free region %llu (rc %d)", tr, (unsigned long long)r[i].id, rc);
	}
	/* Freed RDMA-keyed regions count as used until their quarantine ends. */
	rc = stats_wait(c, 0, 0, 2000, &after);
	ok(rc == 0 && after.used_bytes == 0 && after.regions == 0 &&
	   after.largest_free == after.pool_bytes && after.frees == before.frees + NSIZES,
	   "%s: after free: used %llu regions %llu largest_free %llu frees %llu", tr,
	   (unsigned long long)after.used_bytes, (unsigned long long)after.regions,
	   (unsigned long long)after.largest_free, (unsigned long long)after.frees);

	/* The freed regions were full of random bytes: the next owner sees
	 * zeros, and gets ids never seen before. */
	{
		struct rmem_region again;
		uint64_t swept = 0;

		rc = rmem_alloc(c, 64 * MiB, 0, &again);
		ok(rc == 0 && !id_seen(ids, again.id),
		   "%s: re-alloc 64 MiB gets a new id %llu (rc %d)", tr,
		   (unsigned long long)again.id, rc);
		if (rc == 0) {
			id_add(ids, again.id);
			rc = rmem_free(c, &again);
			ok(rc == 0, "%s: free it (rc %d)", tr, rc);
		} else {
			skip(1, "no re-allocation");
		}
		rc = stats_wait(c, 0, 0, 2000, &after);
		rc = rc ? rc : sweep_free_memory(c, &swept);
		ok(rc == 0 && swept == after.pool_bytes,
		   "%s: all %llu freed bytes of the pool read zero for the next owner (%d)", tr,
		   (unsigned long long)swept, rc);
	}
	rmem_close(c);
}

/* Without RDMA (the host) asking for it fails; in the VM it works. */
static void rdma_asked(const struct rmemd *d)
{
	struct rmem_opts o;
	rmem_client *c = NULL;
	char ep[64];
	int rc;

	rmem_opts_init(&o, sizeof o);
	ok(o.size == sizeof o && o.timeout_ms == 10000 && (!o.transport ||
	   !strcmp(o.transport, "auto")), "rmem_opts_init fills size and defaults");
	o.transport = "rdma";
	rc = rmem_connect(d->host_port, &o, &c);
	if (harness_rdma())
		ok(rc == 0 && c && !strcmp(rmem_transport(c), "rdma"),
		   "transport \"rdma\" connects over rdma (%d)", rc);
	else
		ok(rc == -ENOTSUP && !c, "transport \"rdma\" is -ENOTSUP, no silent fallback (%d)",
		   rc);
	rmem_close(c);
	c = NULL;
	snprintf(ep, sizeof ep, "rdma://%s", d->host_port);
	rc = rmem_connect(ep, NULL, &c);
	if (harness_rdma())
		ok(rc == 0 && c && !strcmp(rmem_transport(c), "rdma"), "%s connects over rdma (%d)",
		   ep, rc);
	else
		ok(rc == -ENOTSUP && !c, "%s is -ENOTSUP (%d)", ep, rc);
	rmem_close(c);
	c = NULL;
	snprintf(ep, sizeof ep, "tcp://%s", d->host_port);
	rc = rmem_connect(ep, NULL, &c);
	/* A TLS port serves no plain client, and says so. */
	if (harness_tls())
		ok(rc == -EPROTO && !c, "%s on a listen.tls port is -EPROTO (%d)", ep, rc);
	else
		ok(rc == 0 && c && !strcmp(rmem_transport(c), "tcp"), "%s connects over tcp (%d)",
		   ep, rc);
	rmem_close(c);
	rmem_close(NULL);
	ok(1, "rmem_close(NULL) is harmless");
}

static void strerror_texts(void)
{
	static const int codes[] = { 0, -EINVAL, -ENOMEM, -ERANGE, -ENOENT, -EACCES,
				     -ECONNREFUSED, -ETIMEDOUT, -ECONNRESET, -EPROTO,
				     -ENOTSUP, EINVAL, -99999 };

	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		const char *s = rmem_strerror(codes[i]);

		ok(s && *s, "rmem_strerror(%d) = \"%s\"", codes[i], s ? s : "(null)");
	}
	ok(strcmp(rmem_strerror(-ENOENT), rmem_strerror(-EACCES)) != 0,
	   "-ENOENT and -EACCES read differently");
}

int main(void)
{
	struct rmemd d;
	struct id_log ids = { .n = 0 };
	int st;

	if (!harness_start(&d, "128M", NULL))
		return tap_done();

	run_endpoint(d.tcp_ep, harness_transport(), &ids);
	run_endpoint(d.unix_ep, "unix", &ids);
	rdma_asked(&d);
	strerror_texts();

	st = rmemd_stop(&d);
	ok(st == 0, "rmemd exits 0 on SIGTERM (%d)", st);
	ok(rmemd_notified(&d, "STOPPING=1"), "rmemd sent STOPPING=1");
	rmemd_cleanup(&d);
	return tap_done();
}
