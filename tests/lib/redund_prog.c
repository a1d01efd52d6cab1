/*
 * redund_prog.c - see redund_prog.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redund_prog.h"
#include "tap.h"

#define MiB (1ull << 20)

static const char *hook;

const char *redund_env(const char *why)
{
	const char *url = getenv("RMEM_CLUSTER_URL");

	hook = getenv("RMEM_CLUSTER_HOOK");
	if (!url || !hook)
		tap_skip_all(why);
	return url;
}

/* "HOOK WHAT" into cmd, WHAT from fmt: 0, or -1 when it does not fit. */
__attribute__((format(printf, 3, 0)))
static int hook_cmd(char *cmd, size_t len, const char *fmt, va_list ap)
{
	char what[512];
	int n;

	n = vsnprintf(what, sizeof what, fmt, ap);
	if (n < 0 || (size_t)n >= sizeof what)
		return -1;
	n = snprintf(cmd, len, "%s %s", hook, what);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int run_hook(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = hook_cmd(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return rc ? -1 : system(cmd);
}

__attribute__((format(printf, 3, 0)))
int hook_line(char *out, size_t len, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	FILE *f;
	int rc;

	va_start(ap, fmt);
	rc = hook_cmd(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	if (rc || !(f = popen(cmd, "r")))
		return -1;
	rc = -1;
	if (fgets(out, (int)len, f)) {
		out[strcspn(out, "\n")] = '\0';
		rc = 0;
	}
	if (pclose(f) != 0)
		rc = -1;
	return rc;
}

long hook_num(const char *what)
{
	char line[64];

	return hook_line(line, sizeof line, "%s", what) ? -1 : strtol(line, NULL, 10);
}

int pieces_of(const char *name, int *srv, int max)
{
	char line[256], *p = line, *end;
	int n = 0;

	if (hook_line(line, sizeof line, "pieces %s", name))
		return 0;
	while (n < max && *p) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		srv[n++] = (int)v;
		p = end;
	}
	return n;
}

void pattern(unsigned char *b, uint64_t len, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);

	for (uint64_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

rmem_client *connect_url(const char *url, int resume_ms, int timeout_ms, int *rc)
{
	struct rmem_opts o;
	rmem_client *c = NULL;

	rmem_opts_init(&o, sizeof o);
	o.resume_ms = resume_ms;
	o.timeout_ms = timeout_ms;
	*rc = rmem_connect(url, &o, &c);
	return c;
}

bool reads_back(rmem_client *c, const struct rmem_region *r, const unsigned char *want,
		uint64_t len, int *rc)
{
	unsigned char *buf = malloc(MiB);
	bool same = buf != NULL;

	*rc = buf ? 0 : -ENOMEM;
	for (uint64_t off = 0; same && off < len; off += MiB) {
		size_t n = (size_t)(len - off < MiB ? len - off : MiB);

		*rc = rmem_read(c, r, off, buf, n);
		same = *rc == 0 && !memcmp(buf, want + off, n);
		for (size_t i = 0; *rc == 0 && !same && i < n; i++)
			if (buf[i] != want[off + i]) {
				diag("first wrong byte at %llu of %llu", (unsigned long long)(off + i),
				     (unsigned long long)len);
				break;
			}
	}
	free(buf);
	return same;
}

bool write_all(rmem_client *c, const struct rmem_region *r, const unsigned char *b, uint64_t len,
	       int *rc)
{
	*rc = 0;
	for (uint64_t off = 0; *rc == 0 && off < len; off += 4 * MiB)
		*rc = rmem_write(c, r, off, b + off, (size_t)(len - off < 4 * MiB ? len - off : 4 * MiB));
	return *rc == 0;
}

bool make_named(rmem_client *c, const char *name, const unsigned char *b, uint64_t len)
{
	struct rmem_region r;
	int rc = rmem_create(c, name, len, 0, &r);

	if (rc) {
		diag("create %s: %s", name, rmem_strerror(rc));
		return false;
	}
	if (!write_all(c, &r, b, len, &rc))
		diag("write %s: %s", name, rmem_strerror(rc));
	rmem_free(c, &r);
	return rc == 0;
}

bool named_reads(rmem_client *c, const char *name, const unsigned char *b, uint64_t len)
{
	struct rmem_region r;
	bool same;
	int rc = rmem_open(c, name, RMEM_READ, &r);

	if (rc) {
		diag("open %s: %s", name, rmem_strerror(rc));
		return false;
	}
	same = reads_back(c, &r, b, len, &rc);
	if (!same)
		diag("read %s: %s", name, rc ? rmem_strerror(rc) : "wrong bytes");
	rmem_free(c, &r);
	return same;
}
