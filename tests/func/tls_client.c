/*
 * tls_client.c - a librmem client for tests/func/test_tls.sh: connects to
 * one endpoint and says how that went, in words a shell test can match.
 * Not a test itself.
 *
 *   tls_client ENDPOINT [PATTERN]
 *
 * Prints "connect: 0 TRANSPORT" or "connect: -N ENAME (rmem_strerror)" and
 * exits 0 or 1.  With PATTERN it then allocates 256 KiB, writes PATTERN
 * over and over into it, reads it back, prints "io: ok" when the bytes
 * came back (exit 0), "io: ..." otherwise (exit 1).
 *
 * TLS_CLIENT_OPTS="CA,CERT,KEY,NAME" in the environment puts those in
 * rmem_opts' tls_ca, tls_cert, tls_key, tls_name (an empty one: NULL).
 * TLS_CLIENT_TENANT="NAME,SECRET_FILE": rmem_opts' tenant and secret_file.
 * TLS_CLIENT_HOLD=1: once connected (and done), prints "holding" and keeps
 * the session until stdin ends; each line "io" read meanwhile does the I/O
 * above again (and prints its line).  TLS_CLIENT_RESUME_MS: rmem_opts'
 * resume_ms (default 0, off).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmem.h>

#define SPAN (256u << 10)

static char opt_buf[4][512];

/* "CA,CERT,KEY,NAME" into o's tls_* fields. */
static void tls_opts(struct rmem_opts *o, const char *spec)
{
	const char **field[4] = { &o->tls_ca, &o->tls_cert, &o->tls_key, &o->tls_name };

	for (int i = 0; i < 4 && spec; i++) {
		const char *comma = strchr(spec, ',');
		size_t n = comma ? (size_t)(comma - spec) : strlen(spec);

		if (n && n < sizeof opt_buf[i]) {
			memcpy(opt_buf[i], spec, n);
			*field[i] = opt_buf[i];
		}
		spec = comma ? comma + 1 : NULL;
	}
}

static int io(rmem_client *c, const char *pattern)
{
	static char out[SPAN], in[SPAN];
	size_t plen = strlen(pattern);
	struct rmem_region r;
	int rc;

	for (size_t i = 0; i < SPAN; i++)
		out[i] = pattern[i % plen];
	rc = rmem_alloc(c, SPAN, 0, &r);
	if (rc == 0)
		rc = rmem_write(c, &r, 0, out, SPAN);
	if (rc == 0)
		rc = rmem_read(c, &r, 0, in, SPAN);
	if (rc < 0) {
		printf("io: %d %s\n", rc, rmem_strerror(rc));
		return 1;
	}
	if (memcmp(in, out, SPAN)) {
		printf("io: other bytes came back\n");
		return 1;
	}
	printf("io: ok\n");
	return rmem_free(c, &r) < 0;
}

int main(int argc, char **argv)
{
	struct rmem_opts o;
	rmem_client *c = NULL;
	int rc, ret;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: tls_client ENDPOINT [PATTERN]\n");
		return 2;
	}
	rmem_opts_init(&o, sizeof o);
	o.timeout_ms = 5000;
	o.resume_ms = getenv("TLS_CLIENT_RESUME_MS") ? atoi(getenv("TLS_CLIENT_RESUME_MS")) : 0;
	tls_opts(&o, getenv("TLS_CLIENT_OPTS"));
	if (getenv("TLS_CLIENT_TENANT")) {
		static char tenant[256];
		char *comma;

		snprintf(tenant, sizeof tenant, "%s", getenv("TLS_CLIENT_TENANT"));
		comma = strchr(tenant, ',');
		if (comma) {
			*comma = 0;
			o.tenant = tenant;
			o.secret_file = comma + 1;
		}
	}
	rc = rmem_connect(argv[1], &o, &c);
	if (rc < 0) {
		printf("connect: %d %s (%s)\n", rc, strerrorname_np(-rc) ? strerrorname_np(-rc) : "?",
		       rmem_strerror(rc));
		return 1;
	}
	printf("connect: 0 %s\n", rmem_transport(c));
	fflush(stdout);
	ret = argc == 3 ? io(c, argv[2]) : 0;
	if (getenv("TLS_CLIENT_HOLD")) {
		char line[64];

		printf("holding\n");
		fflush(stdout);
		while (fgets(line, sizeof line, stdin)) {
			if (strncmp(line, "io", 2) || argc != 3)
				continue;
			ret |= io(c, argv[2]);
			printf("transport: %s\n", rmem_transport(c));
			fflush(stdout);
		}
	}
	rmem_close(c);
	return ret;
}
