/*
 * namedcheck - named regions with seeded patterns against a running rmemd,
 * for tests/systemd/test_restart.sh (restart without loss under systemd).
 * Uses only <rmem.h>, as an application would.
 *
 *   namedcheck ENDPOINT TRANSPORT OP SPEC...     SPEC is NAME:SIZE:SEED
 *
 * OP:
 *   create   rmem_create each NAME, write SEED's pattern over SIZE bytes, read
 *            it back; then open it again read-only, read and compare through
 *            that handle, and check that a write through it is refused
 *   verify   open each NAME read-only: length >= SIZE, every byte SEED's
 *   write    open each NAME read-write, write SEED's pattern, read it back
 *   absent   opening each NAME fails with -ENOENT
 *   hold     open each NAME read-only and verify, print "holding", then keep
 *            the session (and its handles) until stdin reaches EOF
 *   wait     poll (every 10 ms, at most 300 s) connect + open + read of the
 *            first SPEC's first 64 KiB until it verifies after at least one
 *            poll failed (the daemon went away and came back); prints
 *            "up REALTIME_NS" for the first such success
 *
 * TRANSPORT ("rdma", "tcp" or "auto") is asked of rmem_connect(); the client
 * fails when it got another.  One line per name on stdout; what failed on
 * stderr.  Exits 0 when every check passed, 1 otherwise, 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rmem.h>

#define WAIT_BYTES (64u << 10)

struct spec {
	char name[RMEM_NAME_MAX + 1];
	uint64_t size;
	uint64_t seed;
};

/* Bytes that differ at every offset and from seed to seed. */
static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 2654435761u + 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
}

static int fail(const char *name, const char *what, int rc)
{
	fprintf(stderr, "namedcheck: %s: %s: %s\n", name, what, rmem_strerror(rc));
	return 1;
}

static int parse_spec(const char *arg, struct spec *s)
{
	const char *c1 = strchr(arg, ':');
	const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	char *end;

	if (!c1 || !c2 || c1 == arg || (size_t)(c1 - arg) > RMEM_NAME_MAX)
		return -1;
	memcpy(s->name, arg, (size_t)(c1 - arg));
	s->name[c1 - arg] = '\0';
	s->size = strtoull(c1 + 1, &end, 10);
	if (end != c2 || s->size == 0 || s->size > (1ull << 30))
		return -1;
	s->seed = strtoull(c2 + 1, &end, 10);
	return *end ? -1 : 0;
}

static int connect_as(const char *ep, const char *transport, rmem_client **c)
{
	struct rmem_opts o;
	int rc;

	rmem_opts_init(&o, sizeof o);
	o.transport = transport;
	/* Every run is a fresh client: what a restart leaves for a new one to
	 * find.  A call that met the restart fails instead of resuming, so
	 * that "wait" sees the daemon gone and times the first fresh success. */
	o.resume_ms = 0;
	rc = rmem_connect(ep, &o, c);
	if (rc < 0)
		return rc;
	if (strcmp(transport, "auto") != 0 && strcmp(rmem_transport(*c), transport) != 0) {
		fprintf(stderr, "namedcheck: asked for %s, connected over %s\n", transport,
			rmem_transport(*c));
		rmem_close(*c);
		return -EPROTO;
	}
	return 0;
}

/* Reads len bytes through r and compares them with seed's pattern. */
static int read_compare(rmem_client *c, const struct rmem_region *r, const struct spec *s,
			size_t len, const unsigned char *want, unsigned char *got)
{
	int rc;

	memset(got, 0, len);
	rc = rmem_read(c, r, 0, got, len);
	if (rc < 0)
		return fail(s->name, "rmem_read", rc);
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "namedcheck: %s: byte %zu is 0x%02x, not 0x%02x\n", s->name,
				i, got[i], want[i]);
			return 1;
		}
	return 0;
}

static int one(rmem_client *c, const char *op, const struct spec *s)
{
	struct rmem_region rw, ro;
	unsigned char *want, *got;
	size_t len = (size_t)s->size;
	int rc, ret = 1;

	if (strcmp(op, "absent") == 0) {
		rc = rmem_open(c, s->name, RMEM_READ, &ro);
		if (rc == -ENOENT) {
			printf("%s: absent\n", s->name);
			return 0;
		}
		if (rc == 0)
			rmem_free(c, &ro);
		fprintf(stderr, "namedcheck: %s: open gave %d, not -ENOENT\n", s->name, rc);
		return 1;
	}
	want = malloc(len);
	got = malloc(len);
	if (!want || !got) {
		fprintf(stderr, "namedcheck: out of memory\n");
		goto out;
	}
	fill(want, len, s->seed);
	if (strcmp(op, "create") == 0 || strcmp(op, "write") == 0) {
		rc = op[0] == 'c' ? rmem_create(c, s->name, s->size, 0, &rw)
				  : rmem_open(c, s->name, RMEM_READ | RMEM_WRITE, &rw);
		if (rc < 0) {
			ret = fail(s->name, op[0] == 'c' ? "rmem_create" : "rmem_open", rc);
			goto out;
		}
		rc = rmem_write(c, &rw, 0, want, len);
		if (rc < 0)
			ret = fail(s->name, "rmem_write", rc);
		else
			ret = read_compare(c, &rw, s, len, want, got);
		rmem_free(c, &rw);
		if (ret || op[0] == 'w')
			goto done;
	}
	/* create, verify, hold: through a read-only handle. */
	rc = rmem_open(c, s->name, RMEM_READ, &ro);
	if (rc < 0) {
		ret = fail(s->name, "rmem_open read-only", rc);
		goto out;
	}
	if (ro.length < s->size) {
		fprintf(stderr, "namedcheck: %s: length %" PRIu64 " < %" PRIu64 "\n", s->name,
			ro.length, s->size);
		goto free_ro;
	}
	ret = read_compare(c, &ro, s, len, want, got);
	if (ret == 0 && op[0] == 'c') {
		rc = rmem_write(c, &ro, 0, want, 1);
		if (rc != -EACCES) {
			fprintf(stderr, "namedcheck: %s: a write through the read-only handle "
				"gave %d, not -EACCES\n", s->name, rc);
			ret = 1;
		}
	}
	if (op[0] == 'h' && ret == 0)
		goto done; /* held: rmem_close releases it */
free_ro:
	rmem_free(c, &ro);
done:
	if (ret == 0)
		printf("%s: %s %" PRIu64 " bytes of seed %" PRIu64 " over %s\n", s->name, op,
		       s->size, s->seed, rmem_transport(c));
out:
	free(want);
	free(got);
	return ret;
}

static int64_t now_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One poll of "wait": 0 when the first WAIT_BYTES verify. */
static int poll_once(const char *ep, const char *transport, const struct spec *s,
		     const unsigned char *want, unsigned char *got, size_t len)
{
	struct rmem_region ro;
	rmem_client *c;
	int rc;

	if (connect_as(ep, transport, &c) < 0)
		return -1;
	rc = rmem_open(c, s->name, RMEM_READ, &ro);
	if (rc == 0) {
		memset(got, 0, len);
		rc = rmem_read(c, &ro, 0, got, len);
		if (rc == 0 && memcmp(got, want, len) != 0)
			rc = -EIO;
		rmem_free(c, &ro);
	}
	rmem_close(c);
	return rc;
}

static int wait_up(const char *ep, const char *transport, const struct spec *s)
{
	size_t len = s->size < WAIT_BYTES ? (size_t)s->size : WAIT_BYTES;
	unsigned char *want = malloc(len), *got = malloc(len);
	int64_t end = now_ns(CLOCK_MONOTONIC) + 300 * 1000000000ll;
	int down = 0, ret = 1;

	if (!want || !got)
		goto out;
	fill(want, len, s->seed);
	while (now_ns(CLOCK_MONOTONIC) < end) {
		if (poll_once(ep, transport, s, want, got, len) == 0) {
			if (down) {
				printf("up %" PRId64 "\n", now_ns(CLOCK_REALTIME));
				ret = 0;
				break;
			}
		} else if (!down) {
			down = 1;
		}
		usleep(10000);
	}
	if (ret)
		fprintf(stderr, "namedcheck: %s never came back\n", s->name);
out:
	free(want);
	free(got);
	return ret;
}

int main(int argc, char **argv)
{
	struct spec *specs;
	rmem_client *c;
	int n = argc - 4, rc, ret = 0;

	if (argc < 5) {
		fprintf(stderr, "usage: namedcheck ENDPOINT rdma|tcp|auto "
				"create|verify|write|absent|hold|wait NAME:SIZE:SEED...\n");
		return 2;
	}
	specs = calloc((size_t)n, sizeof *specs);
	if (!specs)
		return 1;
	for (int i = 0; i < n; i++)
		if (parse_spec(argv[4 + i], &specs[i]) < 0) {
			fprintf(stderr, "namedcheck: bad spec '%s'\n", argv[4 + i]);
			free(specs);
			return 2;
		}
	if (strcmp(argv[3], "wait") == 0) {
		ret = wait_up(argv[1], argv[2], &specs[0]);
		free(specs);
		return ret;
	}
	rc = connect_as(argv[1], argv[2], &c);
	if (rc < 0) {
		free(specs);
		return fail(argv[1], "rmem_connect", rc);
	}
	for (int i = 0; i < n; i++)
		ret |= one(c, argv[3], &specs[i]);
	if (strcmp(argv[3], "hold") == 0 && ret == 0) {
		char buf[64];

		printf("holding\n");
		fflush(stdout);
		while (read(0, buf, sizeof buf) > 0)
			;
	}
	rmem_close(c);
	free(specs);
	return ret;
}
