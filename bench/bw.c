/*
 * bw.c - TCP-path bandwidth of librmem: rmem_write / rmem_read of SIZE-byte
 * calls into one region for a few seconds, printed as MB/s.  A benchmark, not
 * a test: it asserts nothing about time.  scripts/bench-tcp runs it beside
 * iperf3 and qperf on the same loopback.
 *
 *   bw ENDPOINT [SIZE_BYTES] [SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rmem.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(rmem_client *c, const struct rmem_region *r, int write, size_t size,
	       double seconds, unsigned char *buf)
{
	uint64_t slots = r->length / size, i = 0, bytes = 0;
	double t0 = now_s(), t;
	int rc;

	do {
		uint64_t off = (i++ % slots) * size;

		rc = write ? rmem_write(c, r, off, buf, size) : rmem_read(c, r, off, buf, size);
		if (rc < 0) {
			fprintf(stderr, "bw: %s: %s\n", write ? "write" : "read", rmem_strerror(rc));
			return 1;
		}
		bytes += size;
		t = now_s() - t0;
	} while (t < seconds);
	printf("%-5s size=%zu bytes=%llu seconds=%.2f MB/s=%.1f\n", write ? "write" : "read",
	       size, (unsigned long long)bytes, t, (double)bytes / t / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	const char *ep = argc > 1 ? argv[1] : "127.0.0.1:7470";
	size_t size = argc > 2 ? strtoull(argv[2], NULL, 0) : (1u << 20);
	double seconds = argc > 3 ? strtod(argv[3], NULL) : 3.0;
	uint64_t region_bytes = 64ull << 20;
	struct rmem_region r;
	unsigned char *buf;
	rmem_client *c;
	int rc;

	if (size == 0 || size > region_bytes) {
		fprintf(stderr, "usage: bw ENDPOINT [SIZE_BYTES <= 64M] [SECONDS]\n");
		return 2;
	}
	buf = malloc(size);
	if (!buf)
		return 1;
	memset(buf, 0xa5, size);
	rc = rmem_connect(ep, NULL, &c);
	if (rc < 0) {
		fprintf(stderr, "bw: connect %s: %s\n", ep, rmem_strerror(rc));
		return 1;
	}
	rc = rmem_alloc(c, region_bytes, 0, &r);
	if (rc < 0) {
		fprintf(stderr, "bw: alloc: %s\n", rmem_strerror(rc));
		return 1;
	}
	printf("# transport=%s\n", rmem_transport(c));
	rc = run(c, &r, 1, size, seconds, buf) || run(c, &r, 0, size, seconds, buf);
	rmem_free(c, &r);
	rmem_close(c);
	free(buf);
	return rc;
}
