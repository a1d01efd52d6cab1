/*
 * cluster_client.c - a librmem client for tests/func/test_cluster.sh, which
 * needs a client that holds memory while etcd is looked at, and one that
 * keeps reading and writing while etcd members die.  Not a test itself.
 *
 *   cluster_client ENDPOINT alloc SIZE   allocates SIZE bytes, prints
 *                                        "allocated", holds them until
 *                                        stdin ends, frees, exits 0
 *   cluster_client ENDPOINT io SECONDS   writes and reads back 4 KiB blocks
 *                                        of a 1 MiB region for SECONDS;
 *                                        prints "io OPS ops, FAIL failures,
 *                                        longest call MS ms"; exits 0 when
 *                                        every block verified
 *
 * CLUSTER_CLIENT_ETCD_TLS="CA,CERT,KEY" in the environment puts those paths
 * in rmem_opts' etcd_ca, etcd_cert, etcd_key (an empty one: NULL).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rmem.h>

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int hold(rmem_client *c, uint64_t size)
{
	struct rmem_region r;
	char buf[64];
	int rc = rmem_alloc(c, size, 0, &r);

	if (rc < 0) {
		fprintf(stderr, "alloc %" PRIu64 ": %s\n", size, rmem_strerror(rc));
		return 1;
	}
	printf("allocated\n");
	fflush(stdout);
	while (fgets(buf, sizeof buf, stdin))
		;
	return rmem_free(c, &r) < 0;
}

static int io(rmem_client *c, int seconds)
{
	enum { BLOCK = 4096, SPAN = 1 << 20 };
	static unsigned char out[BLOCK], in[BLOCK];
	struct rmem_region r;
	int64_t end = now_ms() + (int64_t)seconds * 1000, longest = 0;
	uint64_t ops = 0, failures = 0;
	int rc = rmem_alloc(c, SPAN, 0, &r);

	if (rc < 0) {
		fprintf(stderr, "alloc: %s\n", rmem_strerror(rc));
		return 1;
	}
	while (now_ms() < end) {
		uint64_t off = (ops % (SPAN / BLOCK)) * BLOCK;
		int64_t t0 = now_ms(), dt;

		memset(out, (int)(ops & 0xff), sizeof out);
		out[0] = (unsigned char)(ops >> 8);
		rc = rmem_write(c, &r, off, out, sizeof out);
		if (rc == 0)
			rc = rmem_read(c, &r, off, in, sizeof in);
		dt = now_ms() - t0;
		if (dt > longest)
			longest = dt;
		if (rc < 0 || memcmp(in, out, sizeof in)) {
			if (failures++ < 5)
				fprintf(stderr, "op %" PRIu64 ": %s\n", ops,
					rc < 0 ? rmem_strerror(rc) : "read back other bytes");
		}
		ops++;
		usleep(2000); /* a steady trickle, not a CPU hog */
	}
	printf("io %" PRIu64 " ops, %" PRIu64 " failures, longest call %" PRId64 " ms\n", ops,
	       failures, longest);
	rmem_free(c, &r);
	return failures || !ops;
}

/* CLUSTER_CLIENT_ETCD_TLS into o (its copy in buf): 0, or -1 when malformed. */
static int tls_opts(struct rmem_opts *o, char *buf, size_t len)
{
	const char *env = getenv("CLUSTER_CLIENT_ETCD_TLS");
	char *f[3], *comma;

	if (!env)
		return 0;
	if (snprintf(buf, len, "%s", env) >= (int)len)
		return -1;
	f[0] = buf;
	for (int i = 1; i < 3; i++) {
		comma = strchr(f[i - 1], ',');
		if (!comma)
			return -1;
		*comma = '\0';
		f[i] = comma + 1;
	}
	o->etcd_ca = f[0][0] ? f[0] : NULL;
	o->etcd_cert = f[1][0] ? f[1] : NULL;
	o->etcd_key = f[2][0] ? f[2] : NULL;
	return 0;
}

int main(int argc, char **argv)
{
	struct rmem_opts o;
	char tls[1024];
	rmem_client *c;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: cluster_client ENDPOINT alloc SIZE | io SECONDS\n");
		return 2;
	}
	rmem_opts_init(&o, sizeof o);
	if (tls_opts(&o, tls, sizeof tls) < 0) {
		fprintf(stderr, "CLUSTER_CLIENT_ETCD_TLS is not CA,CERT,KEY\n");
		return 2;
	}
	rc = rmem_connect(argv[1], &o, &c);
	if (rc < 0) {
		fprintf(stderr, "connect %s: %s\n", argv[1], rmem_strerror(rc));
		return 1;
	}
	if (!strcmp(argv[2], "alloc"))
		rc = hold(c, strtoull(argv[3], NULL, 0));
	else if (!strcmp(argv[2], "io"))
		rc = io(c, (int)strtol(argv[3], NULL, 10));
	else
		rc = 2;
	rmem_close(c);
	return rc;
}
