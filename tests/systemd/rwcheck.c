/*
 * rwcheck - one client's round of alloc, write, read back, compare and free
 * against a running rmemd, for the tests that start rmemd through systemd
 * (tests/systemd/).  Uses only <rmem.h>: it is what an application does.
 *
 *   rwcheck ENDPOINT TRANSPORT [SIZE]
 *
 * TRANSPORT ("rdma", "tcp" or "auto") is the one asked of rmem_connect(); the
 * client fails when rmem_transport() then says another, so that a test that
 * asks for RDMA cannot pass over TCP.  SIZE is bytes, default 1 MiB.  Prints
 * one line, "TRANSPORT: N bytes written, read back and freed", or what failed
 * on stderr; exits 0 or 1.  Before it writes, it reads the new region: a new
 * owner only ever sees zeros (docs/architecture.md), and a byte that is not
 * one fails the round.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmem.h>

/* Bytes that differ at every offset and from run to run of the pattern. */
static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "rwcheck: %s: %s\n", what, rmem_strerror(rc));
	return 1;
}

/* What a new region r must do: read back zeros, then the bytes out written
 * to it (in is scratch).  0, or 1 with what failed said. */
static int check_region(rmem_client *c, const struct rmem_region *r, const unsigned char *out,
			unsigned char *in, size_t size)
{
	int rc = rmem_read(c, r, 0, in, size);

	if (rc < 0)
		return fail("rmem_read of the new region", rc);
	for (size_t i = 0; i < size; i++) {
		if (in[i]) {
			fprintf(stderr, "rwcheck: the new region is not all zeros (byte %zu is "
				"0x%02x)\n", i, in[i]);
			return 1;
		}
	}
	rc = rmem_write(c, r, 0, out, size);
	if (rc < 0)
		return fail("rmem_write", rc);
	rc = rmem_read(c, r, 0, in, size);
	if (rc < 0)
		return fail("rmem_read", rc);
	if (memcmp(in, out, size) != 0) {
		fprintf(stderr, "rwcheck: the bytes read back differ from those written\n");
		return 1;
	}
	return 0;
}

/* The round itself; 0 when every byte read back is the one written. */
static int round_trip(rmem_client *c, size_t size)
{
	struct rmem_region r;
	unsigned char *out, *in;
	int rc, ret = 1;

	out = malloc(size);
	in = malloc(size);
	if (!out || !in) {
		fprintf(stderr, "rwcheck: out of memory\n");
		goto out;
	}
	fill(out, size, (uint64_t)size * 2654435761u);
	memset(in, 0, size);
	rc = rmem_alloc(c, size, 0, &r);
	if (rc < 0) {
		ret = fail("rmem_alloc", rc);
		goto out;
	}
	ret = check_region(c, &r, out, in, size);
	rc = rmem_free(c, &r);
	if (rc < 0)
		ret = fail("rmem_free", rc);
out:
	free(in);
	free(out);
	return ret;
}

int main(int argc, char **argv)
{
	struct rmem_opts o;
	rmem_client *c;
	size_t size = 1 << 20;
	int rc, ret;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: rwcheck ENDPOINT rdma|tcp|auto [SIZE]\n");
		return 2;
	}
	if (argc == 4) {
		char *end;
		unsigned long long v = strtoull(argv[3], &end, 10);

		if (*end || v == 0 || v > (1ull << 30)) {
			fprintf(stderr, "rwcheck: bad size '%s'\n", argv[3]);
			return 2;
		}
		size = (size_t)v;
	}
	rmem_opts_init(&o, sizeof o);
	o.transport = argv[2];
	rc = rmem_connect(argv[1], &o, &c);
	if (rc < 0)
		return fail(argv[1], rc);
	if (strcmp(argv[2], "auto") != 0 && strcmp(rmem_transport(c), argv[2]) != 0) {
		fprintf(stderr, "rwcheck: asked for %s, connected over %s\n", argv[2],
			rmem_transport(c));
		rmem_close(c);
		return 1;
	}
	ret = round_trip(c, size);
	if (ret == 0)
		printf("%s: %zu bytes written, read back and freed\n", rmem_transport(c), size);
	rmem_close(c);
	return ret;
}
