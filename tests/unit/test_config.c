/*
 * test_config.c - rmemd's configuration: defaults, the shipped example file,
 * every size syntax, one bad file per kind of error (return code, and a
 * message that starts with "FILE:LINE:" on the right line), and the size
 * parser.  Run from the repository root: it reads etc/rmemd.conf.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"

#define EXAMPLE_CONF "etc/rmemd.conf"

static char tmpdir[] = "/tmp/test_config.XXXXXX";
#define MAX_FILES 128

static char written[MAX_FILES][300];
static int nwritten;

/* Writes text to tmpdir/name; returns the path (static storage). */
static const char *write_conf(const char *name, const char *text)
{
	char *path = written[nwritten % MAX_FILES];
	FILE *f;

	snprintf(path, sizeof written[0], "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		diag("cannot write %s", path);
		exit(1);
	}
	if (nwritten < MAX_FILES)
		nwritten++;
	return path;
}

static void remove_confs(void)
{
	for (int i = 0; i < nwritten; i++)
		unlink(written[i]);
	rmdir(tmpdir);
}

/* ---- config_dump into a buffer ------------------------------------------- */

struct dump {
	char text[4096];
	size_t len;
	int lines;
};

static void dump_line(void *arg, const char *text)
{
	struct dump *d = arg;
	int n = snprintf(d->text + d->len, sizeof d->text - d->len, "%s\n", text);

	if (n > 0 && (size_t)n < sizeof d->text - d->len)
		d->len += (size_t)n;
	d->lines++;
}

static void dump(const struct config *cfg, struct dump *d)
{
	memset(d, 0, sizeof *d);
	config_dump(cfg, dump_line, d);
}

static int has_line(const struct dump *d, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = d->text; (p = strstr(p, line)); p++)
		if ((p == d->text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

/* Field by field: struct padding makes memcmp meaningless. */
static int same_config(const struct config *a, const struct config *b)
{
	if (strcmp(a->listen_tcp, b->listen_tcp) || strcmp(a->listen_rdma, b->listen_rdma) ||
	    strcmp(a->listen_admin, b->listen_admin) || a->npools != b->npools ||
	    a->max_clients != b->max_clients || a->lease_timeout_ms != b->lease_timeout_ms ||
	    a->log_level != b->log_level || strcmp(a->rdma_device, b->rdma_device) ||
	    a->rdma_keys != b->rdma_keys)
		return 0;
	for (size_t i = 0; i < a->npools && i < CONFIG_MAX_POOLS; i++) {
		const struct config_pool *p = &a->pools[i], *q = &b->pools[i];

		if (strcmp(p->name, q->name) || p->size != q->size ||
		    p->hugepages != q->hugepages || p->alignment != q->alignment)
			return 0;
	}
	return 1;
}

/* ---- defaults and the example file ---------------------------------------- */

static void test_defaults(void)
{
	struct config cfg;
	struct dump d;

	config_defaults(&cfg);
	ok(!strcmp(cfg.listen_tcp, "0.0.0.0:7470"), "default listen.tcp %s", cfg.listen_tcp);
	ok(!strcmp(cfg.listen_rdma, "0.0.0.0:7471"), "default listen.rdma %s", cfg.listen_rdma);
	ok(!strcmp(cfg.listen_admin, "/run/rmemd/rmemd.sock"), "default listen.admin %s",
	   cfg.listen_admin);
	ok(!strcmp(cfg.listen_metrics, "127.0.0.1:9470"), "default listen.metrics %s",
	   cfg.listen_metrics);
	ok(cfg.npools == 1, "one default pool (%zu)", cfg.npools);
	ok(!strcmp(cfg.pools[0].name, "default"), "default pool name %s", cfg.pools[0].name);
	ok(cfg.pools[0].size == 1ull << 30, "default pool size 1 GiB (%llu)",
	   (unsigned long long)cfg.pools[0].size);
	ok(cfg.pools[0].hugepages == CONFIG_HUGEPAGES_AUTO, "default hugepages auto");
	ok(cfg.pools[0].alignment == 64, "default alignment 64");
	ok(cfg.max_clients == 1024, "default max_clients 1024 (%u)", cfg.max_clients);
	ok(cfg.lease_timeout_ms == 10000, "default lease 10000 ms (%u)", cfg.lease_timeout_ms);
	ok(cfg.log_level == CONFIG_LOG_INFO, "default log level info");
	ok(!strcmp(cfg.rdma_device, "auto"), "default rdma.device auto (%s)", cfg.rdma_device);
	ok(cfg.rdma_keys == CONFIG_KEYS_AUTO, "default rdma.keys auto (%d)", (int)cfg.rdma_keys);
	ok(cfg.rdma_required == 0, "default rdma.required off (%d)", cfg.rdma_required);

	dump(&cfg, &d);
	ok(d.lines == 4 + 4 + 3 + 8 + 1, "dump of the defaults has 20 lines (%d)", d.lines);
	ok(has_line(&d, "rdma.device = auto"), "dump: rdma.device");
	ok(has_line(&d, "rdma.keys = auto"), "dump: rdma.keys");
	ok(has_line(&d, "listen.tcp = 0.0.0.0:7470"), "dump: listen.tcp");
	ok(has_line(&d, "listen.admin = /run/rmemd/rmemd.sock"), "dump: listen.admin");
	ok(has_line(&d, "listen.metrics = 127.0.0.1:9470"), "dump: listen.metrics");
	ok(has_line(&d, "pools[0].name = default"), "dump: pools[0].name");
	ok(has_line(&d, "pools[0].size = 1073741824 (1G)"), "dump: pools[0].size");
	ok(has_line(&d, "pools[0].hugepages = auto"), "dump: pools[0].hugepages");
	ok(has_line(&d, "pools[0].alignment = 64"), "dump: pools[0].alignment");
	ok(has_line(&d, "limits.max_clients = 1024"), "dump: limits.max_clients");
	ok(has_line(&d, "limits.lease_timeout_ms = 10000"), "dump: limits.lease_timeout_ms");
	ok(has_line(&d, "limits.frame_timeout_ms = 5000") &&
	   has_line(&d, "limits.conn_max_requests = 1024"),
	   "dump: limits.frame_timeout_ms and conn_max_requests");
	ok(cfg.metrics_timeout_ms == 10000 && has_line(&d, "limits.metrics_timeout_ms = 10000"),
	   "dump: limits.metrics_timeout_ms, 10 s by default (%u)", cfg.metrics_timeout_ms);
	ok(cfg.frame_timeout_ms == 5000 && cfg.conn_max_requests == 1024 &&
	   cfg.conn_max_buffered == 256 * 1024, "default per-connection limits (%u, %u, %llu)",
	   cfg.frame_timeout_ms, cfg.conn_max_requests,
	   (unsigned long long)cfg.conn_max_buffered);
	ok(cfg.max_handles == 65536 && has_line(&d, "limits.max_handles = 65536"),
	   "default limits.max_handles 65536, dumped (%u)", cfg.max_handles);
	ok(cfg.state_slots == 262144 && has_line(&d, "limits.state_slots = 262144"),
	   "default limits.state_slots 262144, dumped (%u)", cfg.state_slots);
	ok(has_line(&d, "log.level = info"), "dump: log.level");
}

static void test_example_file(void)
{
	struct config def, cfg;
	struct dump a, b;
	char err[512] = "";
	int rc;

	config_defaults(&def);
	memset(&cfg, 0xa5, sizeof cfg);
	rc = config_load(&cfg, EXAMPLE_CONF, err, sizeof err);
	ok(rc == 0, "%s loads (rc %d: %s)", EXAMPLE_CONF, rc, err);
	ok(same_config(&cfg, &def), "%s equals the embedded defaults", EXAMPLE_CONF);
	dump(&def, &a);
	dump(&cfg, &b);
	ok(rc == 0 && !strcmp(a.text, b.text), "%s dumps like the defaults", EXAMPLE_CONF);
}

/* ---- good files ------------------------------------------------------------ */

static void test_empty_file(void)
{
	struct config def, cfg;
	char err[512] = "";
	int rc;

	config_defaults(&def);
	rc = config_load(&cfg, write_conf("empty.conf", "# nothing\n"), err, sizeof err);
	ok(rc == 0 && same_config(&cfg, &def), "an empty file means the defaults (rc %d %s)",
	   rc, err);
	rc = config_load(&cfg, write_conf("partial.conf", "limits = { max_clients = 7; };\n"),
			 err, sizeof err);
	ok(rc == 0 && cfg.max_clients == 7 && cfg.lease_timeout_ms == 10000 &&
	   cfg.npools == 1 && !strcmp(cfg.listen_tcp, "0.0.0.0:7470"),
	   "one key set, the others keep their defaults (rc %d %s)", rc, err);
}

static void test_sizes_in_file(void)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} sizes[] = {
		{ "1048576", 1048576 },
		{ "\"1048576\"", 1048576 },
		{ "\"1024K\"", 1ull << 20 },
		{ "\"1024k\"", 1ull << 20 },
		{ "\"1024KB\"", 1ull << 20 },
		{ "\"1024KiB\"", 1ull << 20 },
		{ "\"256M\"", 256ull << 20 },
		{ "\"256MiB\"", 256ull << 20 },
		{ "\"4G\"", 4ull << 30 },
		{ "\"4GB\"", 4ull << 30 },
		{ "\"1T\"", 1ull << 40 },
		{ "\"1P\"", 1ull << 50 },
		{ "4294967296L", 4ull << 30 },
		{ "0x100000", 1048576 },
		{ "2147483647", 2147483647ull },
	};
	char text[256], name[32], err[512];
	struct config cfg;
	int rc;

	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		snprintf(text, sizeof text, "pools = ( { size = %s; alignment = %s; } );\n",
			 sizes[i].text, "\"4K\"");
		snprintf(name, sizeof name, "size%zu.conf", i);
		err[0] = '\0';
		rc = config_load(&cfg, write_conf(name, text), err, sizeof err);
		ok(rc == 0 && cfg.pools[0].size == sizes[i].bytes && cfg.pools[0].alignment == 4096,
		   "size = %s is %llu bytes (rc %d, got %llu %s)", sizes[i].text,
		   (unsigned long long)sizes[i].bytes, rc,
		   (unsigned long long)cfg.pools[0].size, err);
	}
}

static void test_full_file(void)
{
	static const char text[] =
		"# every key, none at its default\n"
		"listen = { tcp = \"[::1]:8000\"; rdma = \"\"; admin = \"\"; metrics = \"[::1]:9000\"; };\n"
		"pools = (\n"
		"  { name = \"a\"; size = \"2G\"; hugepages = \"on\"; alignment = 4096; },\n"
		"  { name = \"b-2.x_y\"; size = 1048576; hugepages = false; alignment = \"1M\"; },\n"
		"  { name = \"c\"; hugepages = true; alignment = 8; }\n"
		");\n"
		"limits = { max_clients = 1000000; lease_timeout_ms = 86400000; "
		"state_slots = 2000000; };\n"
		"rdma = { device = \"mlx5_0\"; keys = \"region-mr\"; required = true; };\n"
		"log = { level = \"debug\"; };\n";
	struct config cfg;
	struct dump d;
	char err[512] = "";
	int rc;

	rc = config_load(&cfg, write_conf("full.conf", text), err, sizeof err);
	ok(rc == 0, "a file setting every key loads (rc %d %s)", rc, err);
	if (rc)
		return;
	ok(!strcmp(cfg.listen_tcp, "[::1]:8000") && !cfg.listen_rdma[0] && !cfg.listen_admin[0],
	   "listen: IPv6 tcp, rdma and admin disabled");
	ok(!strcmp(cfg.listen_metrics, "[::1]:9000"), "listen.metrics on IPv6 (%s)",
	   cfg.listen_metrics);
	ok(cfg.npools == 3, "three pools (%zu)", cfg.npools);
	ok(!strcmp(cfg.pools[0].name, "a") && cfg.pools[0].size == 2ull << 30 &&
	   cfg.pools[0].hugepages == CONFIG_HUGEPAGES_ON && cfg.pools[0].alignment == 4096,
	   "pools[0] as written");
	ok(!strcmp(cfg.pools[1].name, "b-2.x_y") && cfg.pools[1].size == 1ull << 20 &&
	   cfg.pools[1].hugepages == CONFIG_HUGEPAGES_OFF && cfg.pools[1].alignment == 1ull << 20,
	   "pools[1] as written (false is off)");
	ok(!strcmp(cfg.pools[2].name, "c") && cfg.pools[2].size == 1ull << 30 &&
	   cfg.pools[2].hugepages == CONFIG_HUGEPAGES_ON && cfg.pools[2].alignment == 8,
	   "pools[2]: size defaults to 1G, true is on");
	ok(cfg.state_slots == 2000000, "limits.state_slots as written (%u)", cfg.state_slots);
	ok(cfg.max_clients == 1000000 && cfg.lease_timeout_ms == 86400000,
	   "limits at their maximum");
	ok(cfg.log_level == CONFIG_LOG_DEBUG, "log level debug");
	ok(!strcmp(cfg.rdma_device, "mlx5_0") && cfg.rdma_keys == CONFIG_KEYS_REGION_MR &&
	   cfg.rdma_required == 1, "rdma: device, keys and required as written");
	dump(&cfg, &d);
	ok(d.lines == 4 + 3 * 4 + 3 + 8 + 1, "dump has one line per key and pool (%d)", d.lines);
	ok(has_line(&d, "rdma.device = mlx5_0") && has_line(&d, "rdma.keys = region-mr") &&
	   has_line(&d, "rdma.required = on"), "dump shows the rdma group");
	ok(has_line(&d, "listen.rdma = \"\"") && has_line(&d, "pools[2].name = c") &&
	   has_line(&d, "pools[1].alignment = 1048576 (1M)") &&
	   has_line(&d, "pools[1].hugepages = off"), "dump shows what was loaded");
}

static void test_include(void)
{
	char text[600], inc[400], err[512] = "";
	struct config cfg;
	int rc;

	snprintf(inc, sizeof inc, "%s", write_conf("limits.inc", "limits = { max_clients = 99; };\n"));
	snprintf(text, sizeof text, "@include \"%s\"\n", inc);
	rc = config_load(&cfg, write_conf("main.conf", text), err, sizeof err);
	ok(rc == 0 && cfg.max_clients == 99, "@include of an absolute path (rc %d %s)", rc, err);

	snprintf(inc, sizeof inc, "%s", write_conf("bad.inc", "limits = {\n  max_clients = 0;\n};\n"));
	snprintf(text, sizeof text, "\n@include \"%s\"\n", inc);
	rc = config_load(&cfg, write_conf("main2.conf", text), err, sizeof err);
	snprintf(text, sizeof text, "%s:2: limits.max_clients:", inc);
	ok(rc == -EINVAL && !strncmp(err, text, strlen(text)),
	   "an error in an included file names that file (%s)", err);

	snprintf(inc, sizeof inc, "%s", write_conf("big.inc", "\n\nlimits = {\n"
						    "  max_clients = 4294967297;\n};\n"));
	snprintf(text, sizeof text, "@include \"%s\"\n", inc);
	rc = config_load(&cfg, write_conf("main3.conf", text), err, sizeof err);
	snprintf(text, sizeof text, "%s:4: limits.max_clients: 4294967297 does not fit", inc);
	ok(rc == -EINVAL && !strncmp(err, text, strlen(text)),
	   "included files are checked for truncated integers too (%s)", err);
}

/* Numbers in comments, strings and names are not integer literals. */
static void test_not_truncated(void)
{
	static const char text[] =
		"# size = 99999999999;\n"
		"limits = { max_clients = 5; }; // 99999999999\n"
		"/* 99999999999\n 88888888888 */ pools = ( { name = \"p99999999999\";\n"
		"  size = 2147483647; alignment = 0x40; } );\n"
		"log = { level = \"info\"; /* \"*/ };\n";
	struct config cfg;
	char err[512] = "";
	int rc;

	rc = config_load(&cfg, write_conf("notrunc.conf", text), err, sizeof err);
	ok(rc == 0 && cfg.max_clients == 5 && cfg.pools[0].size == 2147483647 &&
	   cfg.pools[0].alignment == 64, "big numbers in comments and strings are ignored "
	   "(rc %d %s)", rc, err);
}

/* ---- bad files -------------------------------------------------------------- */

struct bad_case {
	const char *what;
	const char *text;
	int line;               /* expected in the message */
	const char *says;       /* expected after "FILE:LINE: " */
};

static const struct bad_case bad_cases[] = {
	{ "syntax error", "log = {\n  level = \"info\"\n  x = ;\n};\n", 3, "syntax error" },
	{ "duplicate key", "limits = {\n max_clients = 1;\n max_clients = 2;\n};\n", 3,
	  "duplicate setting" },
	{ "unknown top-level key", "log = { level = \"info\"; };\n\nlisten_tcp = \"x\";\n", 3,
	  "listen_tcp: unknown key" },
	{ "unknown nested key", "limits = {\n  max_client = 5;\n};\n", 2,
	  "limits.max_client: unknown key" },
	{ "unknown key in a pool", "pools = (\n { name = \"a\"; },\n { nme = \"b\"; }\n);\n", 3,
	  "pools[1].nme: unknown key" },
	{ "wrong type: string for integer", "limits = {\n max_clients = \"1024\";\n};\n", 2,
	  "limits.max_clients: expected an integer" },
	{ "wrong type: float for size", "pools = ( {\n size = 1.5;\n} );\n", 2,
	  "pools[0].size: expected a size" },
	{ "wrong type: integer for level", "log = { level = 6; };\n", 1,
	  "log.level: expected a string" },
	{ "wrong type: group is a scalar", "\nlisten = 5;\n", 2, "listen: expected a group" },
	{ "wrong type: pools is a group", "pools = { name = \"a\"; };\n", 1,
	  "pools: expected a list" },
	{ "wrong type: pool is not a group", "pools = (\n { name = \"a\"; },\n 5\n);\n", 3,
	  "pools[1]: expected a group" },
	{ "out of range: zero", "\n\n\n\n\n\nlimits = {\n max_clients = 0;\n};\n", 8,
	  "limits.max_clients: 0 is out of range [1, 1000000]" },
	{ "out of range: above", "limits = { lease_timeout_ms = 86400001; };\n", 1,
	  "limits.lease_timeout_ms: 86400001 is out of range [100, 86400000]" },
	{ "max_handles out of range", "limits = { max_handles = 16777217; };\n", 1,
	  "limits.max_handles: 16777217 is out of range [1, 16777216]" },
	{ "state_slots out of range", "limits = { state_slots = 63; };\n", 1,
	  "limits.state_slots: 63 is out of range [64, 16777216]" },
	{ "state_slots too few for the sessions", "limits = {\n max_clients = 100;\n"
	  " state_slots = 100;\n};\n", 3,
	  "limits.state_slots: 100 slots are too few: 123 needed" },
	{ "max_clients past the default state_slots", "\nlimits = { max_clients = 300000; };\n",
	  2, "limits.state_slots: 262144 slots are too few" },
	{ "out of range: negative", "limits = { max_clients = -1; };\n", 1,
	  "limits.max_clients: -1 is out of range" },
	{ "negative size", "pools = ( { size = -1048576; } );\n", 1,
	  "pools[0].size: -1048576 is out of range" },
	{ "pool smaller than 1 MiB", "pools = ( {\n size = \"1023K\";\n} );\n", 2,
	  "pools[0].size: 1047552 (1023K) is out of range [1048576 (1M)" },
	{ "bad size suffix", "pools = ( {\n\n size = \"64X\";\n} );\n", 3,
	  "pools[0].size: \"64X\" is not a size" },
	{ "size with junk", "pools = ( { size = \"1G \"; } );\n", 1,
	  "pools[0].size: \"1G \" is not a size" },
	{ "size string negative", "pools = ( { size = \"-1G\"; } );\n", 1,
	  "pools[0].size: \"-1G\" is not a size" },
	{ "size overflow", "pools = ( {\n size = \"16777216T\";\n} );\n", 2,
	  "pools[0].size: \"16777216T\" is too large" },
	{ "size overflow in digits", "pools = ( { size = \"99999999999999999999\"; } );\n", 1,
	  "pools[0].size: \"99999999999999999999\" is too large" },
	{ "integer libconfig would truncate", "pools = (\n { size = 5368709120; }\n);\n", 2,
	  "pools[0].size: 5368709120 does not fit in a 32-bit integer" },
	{ "integer just past INT_MAX", "limits = { max_clients = 2147483648; };\n", 1,
	  "limits.max_clients: 2147483648 does not fit" },
	{ "hex integer libconfig would truncate", "pools = ( { size = 0x100000000; } );\n", 1,
	  "pools[0].size: 0x100000000 does not fit" },
	{ "INT_MIN fits, and is negative", "limits = { max_clients = -2147483648; };\n", 1,
	  "limits.max_clients: -2147483648 is out of range" },
	{ "float is not an integer", "limits = { max_clients = 1e20; };\n", 1,
	  "limits.max_clients: expected an integer, got a floating-point number" },
	{ "alignment not a power of two", "pools = ( {\n alignment = 96;\n} );\n", 2,
	  "pools[0].alignment: 96 is not a power of two" },
	{ "alignment too small", "pools = ( { alignment = 4; } );\n", 1,
	  "pools[0].alignment: 4 is out of range [8, 1073741824 (1G)]" },
	{ "alignment larger than the pool",
	  "pools = ( {\n size = \"1M\";\n alignment = \"2M\";\n} );\n", 3,
	  "pools[0].alignment: 2097152 (2M) is larger than the pool size" },
	{ "bad hugepages value", "pools = ( {\n hugepages = \"yes\";\n} );\n", 2,
	  "pools[0].hugepages: \"yes\" is not one of \"auto\", \"on\", \"off\"" },
	{ "duplicate pool name",
	  "pools = (\n { name = \"a\"; },\n { name = \"b\"; },\n { name = \"a\"; }\n);\n", 4,
	  "pools[2].name: \"a\" is already the name of pools[0]" },
	{ "two unnamed pools", "pools = (\n { size = \"1G\"; },\n { size = \"2G\"; }\n);\n", 3,
	  "pools[1].name: \"default\" is already the name of pools[0]" },
	{ "pool name with a space", "pools = ( { name = \"my pool\"; } );\n", 1,
	  "pools[0].name: \"my pool\": a name is" },
	{ "empty pool name", "pools = ( { name = \"\"; } );\n", 1, "pools[0].name: \"\": a name" },
	{ "pool name too long",
	  "pools = ( { name = \"abcdefghijklmnopqrstuvwxyz0123456\"; } );\n", 1,
	  "pools[0].name: \"abcdefghijklmnopqrstuvwxyz0123456\" is too long (at most 31" },
	{ "empty pools", "limits = { max_clients = 5; };\npools = ( );\n", 2,
	  "pools: the list is empty" },
	{ "bad listen address: no port", "listen = {\n tcp = \"0.0.0.0\";\n};\n", 2,
	  "listen.tcp: \"0.0.0.0\" is not HOST:PORT" },
	{ "bad listen address: port 0", "listen = { tcp = \"0.0.0.0:0\"; };\n", 1,
	  "listen.tcp: \"0.0.0.0:0\": the port must be" },
	{ "bad listen address: port 65536", "listen = { rdma = \"0.0.0.0:65536\"; };\n", 1,
	  "listen.rdma: \"0.0.0.0:65536\": the port must be" },
	{ "bad listen address: port junk", "listen = { tcp = \"host:12a\"; };\n", 1,
	  "listen.tcp: \"host:12a\": the port must be" },
	{ "bad listen address: bare IPv6", "listen = { tcp = \"::1:7470\"; };\n", 1,
	  "listen.tcp: \"::1:7470\": write IPv6 addresses in brackets" },
	{ "bad listen address: no host", "listen = { tcp = \":7470\"; };\n", 1,
	  "listen.tcp: \":7470\" is not HOST:PORT" },
	{ "bad listen address: unclosed bracket", "listen = { tcp = \"[::1:7470\"; };\n", 1,
	  "listen.tcp: \"[::1:7470\" is not HOST:PORT" },
	{ "bad metrics address: no port", "listen = {\n tcp = \"\";\n metrics = \"localhost\";\n};\n",
	  3, "listen.metrics: \"localhost\" is not HOST:PORT" },
	{ "bad metrics address: port 0", "listen = { metrics = \"127.0.0.1:0\"; };\n", 1,
	  "listen.metrics: \"127.0.0.1:0\": the port must be" },
	{ "bad metrics address: bare IPv6", "\nlisten = { metrics = \"::1:9470\"; };\n", 2,
	  "listen.metrics: \"::1:9470\": write IPv6 addresses in brackets" },
	{ "bad metrics address: a URL", "listen = { metrics = \"http://0.0.0.0:9470\"; };\n", 1,
	  "listen.metrics: \"http://0.0.0.0:9470\"" },
	{ "metrics address is a number", "listen = { metrics = 9470; };\n", 1,
	  "listen.metrics: expected a string" },
	{ "relative admin path", "listen = {\n admin = \"run/rmemd.sock\";\n};\n", 2,
	  "listen.admin: \"run/rmemd.sock\" is not an absolute path" },
	{ "admin path too long for sun_path",
	  "listen = { admin = \"/0123456789012345678901234567890123456789"
	  "01234567890123456789012345678901234567890123456789012345678901234567\"; };\n", 1,
	  "listen.admin: \"/012345" },
	{ "bad log level", "\nlog = {\n level = \"verbose\";\n};\n", 3,
	  "log.level: \"verbose\" is not one of \"err\", \"warning\", \"notice\", \"info\", "
	  "\"debug\"" },
	{ "bad rdma.keys", "rdma = {\n device = \"rxe0\";\n keys = \"mw\";\n};\n", 3,
	  "rdma.keys: \"mw\" is not one of \"auto\", \"window\", \"region-mr\"" },
	{ "rdma.keys is a string", "rdma = { keys = 2; };\n", 1,
	  "rdma.keys: expected a string, got an integer" },
	{ "bad rdma.device name", "\nrdma = { device = \"rxe 0\"; };\n", 2,
	  "rdma.device: \"rxe 0\": a name is" },
	{ "empty rdma.device", "rdma = { device = \"\"; };\n", 1, "rdma.device: \"\": a name" },
	{ "unknown key in rdma", "rdma = {\n keys = \"auto\";\n mode = \"x\";\n};\n", 3,
	  "rdma.mode: unknown key (known here: device, keys, required)" },
	{ "rdma is a group", "rdma = \"rxe0\";\n", 1, "rdma: expected a group" },
	{ "control characters are not echoed", "log = { level = \"a\\nb\"; };\n", 1,
	  "log.level: \"a?b\" is not one of" },
	{ "cluster.etcd without a scheme", "cluster = {\n etcd = \"127.0.0.1:2379\";\n};\n", 2,
	  "cluster.etcd: \"127.0.0.1:2379\": endpoint 1 does not start with http://" },
	{ "cluster.etcd, second endpoint bad", "listen = { tcp = \"127.0.0.1:1\"; };\n"
	  "cluster = { etcd = \"http://a:1,http://b:x\"; };\n", 2,
	  "cluster.etcd: \"http://a:1,http://b:x\": endpoint 2 does not end in :PORT" },
	{ "cluster.lease_ms too short", "cluster = {\n\n lease_ms = 999;\n};\n", 3,
	  "cluster.lease_ms: 999 is out of range [1000, 600000]" },
	{ "cluster.repair_grace_ms too long", "cluster = {\n repair_grace_ms = 86400001;\n};\n", 2,
	  "cluster.repair_grace_ms: 86400001 is out of range [0, 86400000]" },
	{ "cluster.repair_grace_ms negative", "cluster = {\n repair_grace_ms = -1;\n};\n", 2,
	  "cluster.repair_grace_ms: -1 is out of range [0, 86400000]" },
	{ "cluster.id with a slash", "cluster = { id = \"a/b\"; };\n", 1,
	  "cluster.id: \"a/b\": a name is" },
	{ "cluster.name empty", "cluster = { name = \"\"; };\n", 1, "cluster.name: \"\": a name is" },
	{ "cluster.advertise not HOST:PORT", "cluster = { advertise = \"host\"; };\n", 1,
	  "cluster.advertise: \"host\" is not HOST:PORT" },
	{ "cluster on a wildcard listener", "listen = { tcp = \"0.0.0.0:7470\"; };\n\n"
	  "cluster = { etcd = \"http://127.0.0.1:2379\"; };\n", 3,
	  "cluster: listen.tcp \"0.0.0.0:7470\" is a wildcard address" },
	{ "cluster without TCP", "listen = { tcp = \"\"; };\n"
	  "cluster = { etcd = \"http://127.0.0.1:2379\"; };\n", 2,
	  "cluster: listen.tcp is off: set cluster.advertise" },
	{ "unknown key in cluster", "cluster = {\n etcd = \"\";\n ttl = 3;\n};\n", 3,
	  "cluster.ttl: unknown key (known here: etcd, name, id, advertise, lease_ms, "
	  "repair_grace_ms, etcd_ca, etcd_cert, etcd_key)" },
	{ "cluster.etcd_ca with an http:// endpoint", "listen = { tcp = \"127.0.0.1:1\"; };\n"
	  "cluster = {\n etcd = \"https://a:1,http://b:2\";\n etcd_ca = \"/etc/passwd\"; };\n", 3,
	  "cluster.etcd: endpoint 2 (http://b:2) is not https://, and etcd_ca is set" },
	{ "cluster.etcd_key without etcd_cert", "listen = { tcp = \"127.0.0.1:1\"; };\n"
	  "cluster = { etcd = \"https://a:1\";\n etcd_key = \"/etc/passwd\"; };\n", 3,
	  "cluster: cluster.etcd_key is set without cluster.etcd_cert" },
	{ "cluster.etcd_ca relative", "cluster = { etcd_ca = \"ca.pem\"; };\n", 1,
	  "cluster.etcd_ca: \"ca.pem\" is not an absolute path to a file" },
	/* listen.tls (issue 33): a group of its own, each rule at its key. */
	{ "listen.tls not a group", "listen = {\n tls = \"on\"; };\n", 2,
	  "listen.tls: expected a group { key = value; ... }, got a string" },
	{ "listen.tls unknown key", "listen = { tls = {\n certfile = \"/x\"; }; };\n", 2,
	  "listen.tls.certfile: unknown key (known here: cert, key, ca, require_client_cert, "
	  "ktls, cert_tenants)" },
	{ "listen.tls.cert relative", "listen = { tls = {\n cert = \"c.pem\"; }; };\n", 2,
	  "listen.tls.cert: \"c.pem\" is not an absolute path to a file" },
	{ "listen.tls cert without key", "listen = {\n tls = { cert = \"/etc/passwd\"; }; };\n", 2,
	  "listen.tls: listen.tls.key is missing" },
	{ "listen.tls.require_client_cert without ca",
	  "listen = { tls = { cert = \"/etc/passwd\"; key = \"/etc/passwd\";\n"
	  " require_client_cert = true; }; };\n", 2,
	  "listen.tls.require_client_cert: needs listen.tls.ca" },
	{ "listen.tls.cert_tenants without ca",
	  "listen = { tls = { cert = \"/etc/passwd\"; key = \"/etc/passwd\";\n"
	  " cert_tenants = true; }; };\n", 2,
	  "listen.tls.cert_tenants: needs listen.tls.ca" },
	{ "listen.tls.ktls bad word", "listen = { tls = {\n ktls = \"on\"; }; };\n", 2,
	  "listen.tls.ktls: \"on\" is not one of \"auto\", \"off\"" },
	{ "listen.tls.cert missing file",
	  "listen = {\n tls = {\n cert = \"/nonexistent/c.pem\";\n key = \"/etc/passwd\"; }; };\n",
	  3, "listen.tls.cert: cannot open \"/nonexistent/c.pem\"" },
	{ "listen.tls.cert no PEM",
	  "listen = {\n tls = {\n cert = \"/etc/passwd\";\n key = \"/etc/passwd\"; }; };\n",
	  2, "listen.tls: certificate \"/etc/passwd\" cannot be used" },
	{ "listen.tls in a cluster",
	  "cluster = { etcd = \"http://127.0.0.1:2379\"; advertise = \"127.0.0.1:7470\"; };\n"
	  "listen = {\n tls = { cert = \"/etc/passwd\"; key = \"/etc/passwd\"; }; };\n", 3,
	  "listen.tls: cluster.etcd is set: cluster clients (etcd://) reach their servers over "
	  "plain TCP only" },
	{ "listen.tls with listen.tcp off",
	  "listen = { tcp = \"\";\n tls = { cert = \"/etc/passwd\"; key = \"/etc/passwd\"; }; };\n",
	  2, "listen.tls: listen.tcp is off" },
	{ "cluster.etcd_cert missing", "listen = { tcp = \"127.0.0.1:1\"; };\n"
	  "cluster = { etcd = \"https://a:1\"; etcd_key = \"/etc/passwd\";\n"
	  " etcd_cert = \"/nonexistent/c.pem\"; };\n", 3,
	  "cluster.etcd_cert: cannot open \"/nonexistent/c.pem\": No such file or directory" },
	/* Tried on a socket: no kernel has this one. */
	{ "tcp.congestion unknown", "tcp = {\n congestion = \"nosuchcc\";\n};\n", 2,
	  "tcp.congestion: \"nosuchcc\" is not a congestion control this kernel has" },
	{ "tcp.congestion not a name", "tcp = { congestion = \"cu bic\"; };\n", 1,
	  "tcp.congestion: \"cu bic\": a name is" },
};

static void test_bad_file(const struct bad_case *c, int index)
{
	char name[32], prefix[400], err[512] = "";
	const char *path;
	struct config cfg;
	int rc;

	snprintf(name, sizeof name, "bad%d.conf", index);
	path = write_conf(name, c->text);
	config_defaults(&cfg);
	cfg.max_clients = 4242;
	rc = config_load(&cfg, path, err, sizeof err);
	snprintf(prefix, sizeof prefix, "%s:%d: %s", path, c->line, c->says);
	ok(rc == -EINVAL, "%s: -EINVAL (%d)", c->what, rc);
	ok(!strncmp(err, prefix, strlen(prefix)), "%s: message \"%s\"", c->what, err);
	if (strncmp(err, prefix, strlen(prefix)))
		diag("expected a message starting with \"%s\"", prefix);
	ok(!strchr(err, '\n') && cfg.max_clients == 4242,
	   "%s: one line, and the config is left as it was", c->what);
}

static void test_too_many_pools(void)
{
	char text[2048], err[512] = "", prefix[400];
	size_t used;
	const char *path;
	struct config cfg;
	int rc;

	used = (size_t)snprintf(text, sizeof text, "pools = (\n");
	for (int i = 0; i <= CONFIG_MAX_POOLS; i++)
		used += (size_t)snprintf(text + used, sizeof text - used,
					 " { name = \"p%d\"; size = \"1M\"; }%s\n", i,
					 i < CONFIG_MAX_POOLS ? "," : "");
	snprintf(text + used, sizeof text - used, ");\n");
	path = write_conf("toomany.conf", text);
	rc = config_load(&cfg, path, err, sizeof err);
	snprintf(prefix, sizeof prefix, "%s:%d: pools[%d]: too many pools (at most %d)", path,
		 CONFIG_MAX_POOLS + 2, CONFIG_MAX_POOLS, CONFIG_MAX_POOLS);
	ok(rc == -EINVAL, "%d pools: -EINVAL (%d)", CONFIG_MAX_POOLS + 1, rc);
	ok(!strncmp(err, prefix, strlen(prefix)), "%d pools: message \"%s\"",
	   CONFIG_MAX_POOLS + 1, err);

	/* Exactly the maximum is fine. */
	used = (size_t)snprintf(text, sizeof text, "pools = (\n");
	for (int i = 0; i < CONFIG_MAX_POOLS; i++)
		used += (size_t)snprintf(text + used, sizeof text - used,
					 " { name = \"p%d\"; size = \"1M\"; }%s\n", i,
					 i < CONFIG_MAX_POOLS - 1 ? "," : "");
	snprintf(text + used, sizeof text - used, ");\n");
	rc = config_load(&cfg, write_conf("max.conf", text), err, sizeof err);
	ok(rc == 0 && cfg.npools == CONFIG_MAX_POOLS &&
	   !strcmp(cfg.pools[CONFIG_MAX_POOLS - 1].name, "p15"),
	   "%d pools load (rc %d %s)", CONFIG_MAX_POOLS, rc, err);
}

static void test_missing_file(void)
{
	char path[400], err[512] = "";
	struct config cfg;
	int rc;

	snprintf(path, sizeof path, "%s/does-not-exist.conf", tmpdir);
	rc = config_load(&cfg, path, err, sizeof err);
	ok(rc == -ENOENT, "a missing file is -ENOENT (%d)", rc);
	ok(!strncmp(err, path, strlen(path)) && strstr(err, "No such file"),
	   "and the message names it: %s", err);
	rc = config_load(&cfg, tmpdir, err, sizeof err);
	ok(rc < 0 && rc != -ENOENT && !strncmp(err, tmpdir, strlen(tmpdir)),
	   "a directory is refused (%d: %s)", rc, err);
	rc = config_load(&cfg, path, NULL, 0);
	ok(rc == -ENOENT, "no message buffer is fine (%d)", rc);
}

/* ---- config_parse_size ------------------------------------------------------ */

static void test_parse_size(void)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "4096", 0, 4096 },
		{ "4096B", 0, 4096 },
		{ "64K", 0, 64ull << 10 },
		{ "64k", 0, 64ull << 10 },
		{ "64KB", 0, 64ull << 10 },
		{ "64KiB", 0, 64ull << 10 },
		{ "256M", 0, 256ull << 20 },
		{ "256MiB", 0, 256ull << 20 },
		{ "4G", 0, 4ull << 30 },
		{ "4g", 0, 4ull << 30 },
		{ "1T", 0, 1ull << 40 },
		{ "1TiB", 0, 1ull << 40 },
		{ "2P", 0, 2ull << 50 },
		{ "15E", 0, 15ull << 60 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "16E", -ERANGE, 0 },
		{ "18446744073709551616", -ERANGE, 0 },
		{ "16777216T", -ERANGE, 0 },
		{ "", -EINVAL, 0 },
		{ "K", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "1 ", -EINVAL, 0 },
		{ "1 K", -EINVAL, 0 },
		{ "1X", -EINVAL, 0 },
		{ "1KK", -EINVAL, 0 },
		{ "1iB", -EINVAL, 0 },
		{ "1Kib", -EINVAL, 0 },
		{ "1KBB", -EINVAL, 0 },
		{ "1.5G", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t v = 12345;
		int rc = config_parse_size(cases[i].s, &v);

		ok(rc == cases[i].rc && (rc || v == cases[i].v),
		   "config_parse_size(\"%s\") = %d, %llu (want %d, %llu)", cases[i].s, rc,
		   (unsigned long long)v, cases[i].rc, (unsigned long long)cases[i].v);
	}
}

/* ---- tenants ----------------------------------------------------------------- */

static const char *write_secret(const char *name, const char *text, mode_t mode)
{
	const char *path = write_conf(name, text);

	if (chmod(path, mode) < 0) {
		diag("cannot chmod %s", path);
		exit(1);
	}
	return path;
}

/* Loads the config fmt makes and expects an error "FILE:LINE: says..." */
__attribute__((format(printf, 4, 5)))
static void tenant_bad(const char *what, int line, const char *says, const char *fmt, ...)
{
	char conf[1024], err[512] = "", prefix[600];
	static int n;
	char name[32];
	const char *path;
	struct config cfg;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(conf, sizeof conf, fmt, ap);
	va_end(ap);
	snprintf(name, sizeof name, "tenant-bad%d.conf", n++);
	path = write_conf(name, conf);
	config_defaults(&cfg);
	rc = config_load(&cfg, path, err, sizeof err);
	snprintf(prefix, sizeof prefix, "%s:%d: %s", path, line, says);
	ok(rc == -EINVAL, "tenants, %s: -EINVAL (%d)", what, rc);
	ok(!strncmp(err, prefix, strlen(prefix)), "tenants, %s: message \"%s\"", what, err);
	if (strncmp(err, prefix, strlen(prefix)))
		diag("expected a message starting with \"%s\"", prefix);
	ok(cfg.ntenants == 0, "tenants, %s: the config is left as it was", what);
}

static void test_tenants(void)
{
	const char *good = write_secret("ml.key", "0123456789abcdef-ml\n", 0600);
	const char *other = write_secret("web.key", "web-secret-without-newline", 0400);
	const char *loose = write_secret("loose.key", "0123456789abcdef-loose\n", 0640);
	const char *shorty = write_secret("short.key", "0123456789abcde\n", 0600);
	char text[1024], err[512] = "", missing[320], says[600];
	struct config cfg;
	struct dump d;
	int rc;

	snprintf(text, sizeof text,
		 "tenants = (\n"
		 "  { name = \"ml\"; secret_file = \"%s\"; quota = \"8G\";\n"
		 "    max_regions = 100000; },\n"
		 "  { name = \"web\"; secret_file = \"%s\"; }\n"
		 ");\n", good, other);
	config_defaults(&cfg);
	ok(cfg.ntenants == 0, "no tenants by default");
	rc = config_load(&cfg, write_conf("tenants.conf", text), err, sizeof err);
	ok(rc == 0, "two tenants load (%d %s)", rc, err);
	ok(cfg.ntenants == 2 && !strcmp(cfg.tenants[0].name, "ml") &&
	   !strcmp(cfg.tenants[1].name, "web"), "names as written");
	ok(cfg.tenants[0].quota == 8ull << 30 && cfg.tenants[0].max_regions == 100000,
	   "quota 8G and max_regions as written");
	ok(cfg.tenants[1].quota == 0 && cfg.tenants[1].max_regions == 0,
	   "quota and max_regions default to 0: no limit");
	ok(cfg.tenants[0].secret_len == 19 &&
	   !memcmp(cfg.tenants[0].secret, "0123456789abcdef-ml", 19),
	   "the secret is the file's bytes, trailing newline stripped (%zu)",
	   cfg.tenants[0].secret_len);
	ok(cfg.tenants[1].secret_len == 26, "a secret without a newline is taken whole (%zu)",
	   cfg.tenants[1].secret_len);
	dump(&cfg, &d);
	ok(has_line(&d, "tenants[0].name = ml") && has_line(&d, "tenants[1].quota = 0"),
	   "dump shows the tenants");
	ok(!strstr(d.text, "0123456789abcdef") && !strstr(d.text, "web-secret"),
	   "dump never shows a secret");

	tenant_bad("duplicate name", 4, "tenants[1].name: \"ml\" is already the name of tenants[0]",
		   "tenants = (\n { name = \"ml\"; secret_file = \"%s\"; },\n"
		   " { secret_file = \"%s\";\n   name = \"ml\"; }\n);\n", good, good);
	tenant_bad("missing secret_file", 2, "tenants[0]: tenant \"ml\" has no secret_file",
		   "tenants = (\n { name = \"ml\"; quota = \"1G\"; }\n);\n");
	tenant_bad("missing name", 2, "tenants[0]: no name",
		   "tenants = (\n { secret_file = \"%s\"; }\n);\n", good);
	tenant_bad("bad size", 2, "tenants[0].quota: \"8X\" is not a size",
		   "tenants = ( { name = \"ml\"; secret_file = \"%s\";\n quota = \"8X\"; } );\n",
		   good);
	tenant_bad("relative secret_file", 1,
		   "tenants[0].secret_file: \"ml.key\" is not an absolute path",
		   "tenants = ( { name = \"ml\"; secret_file = \"ml.key\"; } );\n");
	tenant_bad("unknown key", 2, "tenants[0].secret: unknown key",
		   "tenants = ( { name = \"ml\";\n secret = \"x\"; } );\n");
	tenant_bad("not a list", 1, "tenants: expected a list", "tenants = { name = \"ml\"; };\n");
	snprintf(missing, sizeof missing, "%s/none.key", tmpdir);
	snprintf(says, sizeof says, "tenants[0].secret_file: %s: cannot open: ", missing);
	tenant_bad("unreadable secret file", 3, says,
		   "tenants = ( { name = \"ml\";\n\n secret_file = \"%s\"; } );\n", missing);
	snprintf(says, sizeof says, "tenants[0].secret_file: %s has mode 0640: a secret file "
		 "must not be open to group or others", loose);
	tenant_bad("secret file readable by group", 1, says,
		   "tenants = ( { name = \"ml\"; secret_file = \"%s\"; } );\n", loose);
	snprintf(says, sizeof says, "tenants[0].secret_file: %s: the secret is 15 bytes, "
		 "shorter than 16", shorty);
	tenant_bad("short secret", 1, says,
		   "tenants = ( { name = \"ml\"; secret_file = \"%s\"; } );\n", shorty);
}

/* ---- cluster ------------------------------------------------------------------- */

static void test_cluster(void)
{
	struct config cfg;
	struct dump d;
	char err[512];
	int rc;

	config_defaults(&cfg);
	ok(!cfg.cluster_etcd[0] && !strcmp(cfg.cluster_name, "rmem") && !cfg.cluster_id[0] &&
	   !cfg.cluster_advertise[0] && cfg.cluster_lease_ms == 3000 &&
	   cfg.cluster_repair_grace_ms == 30000,
	   "cluster defaults: no etcd, name rmem, no id, no advertise, lease_ms 3000, "
	   "repair_grace_ms 30000");
	dump(&cfg, &d);
	ok(!strstr(d.text, "cluster."), "no cluster, nothing of it in the dump");
	rc = config_load(&cfg, write_conf("cluster.conf",
		"listen = { tcp = \"0.0.0.0:7470\"; };\n"
		"cluster = { etcd = \"http://127.0.0.1:2379,http://[::1]:22379/\"; name = \"rack-1\";\n"
		"  id = \"mem-a.1\"; advertise = \"10.1.2.3:7470\"; lease_ms = 1500;\n"
		"  repair_grace_ms = 0; };\n"),
		err, sizeof err);
	ok(rc == 0 && !strcmp(cfg.cluster_etcd, "http://127.0.0.1:2379,http://[::1]:22379/") &&
	   !strcmp(cfg.cluster_name, "rack-1") && !strcmp(cfg.cluster_id, "mem-a.1") &&
	   !strcmp(cfg.cluster_advertise, "10.1.2.3:7470") && cfg.cluster_lease_ms == 1500 &&
	   cfg.cluster_repair_grace_ms == 0,
	   "a cluster block as written (rc %d %s)", rc, err);
	dump(&cfg, &d);
	ok(has_line(&d, "cluster.etcd = http://127.0.0.1:2379,http://[::1]:22379/") &&
	   has_line(&d, "cluster.id = mem-a.1") && has_line(&d, "cluster.lease_ms = 1500") &&
	   has_line(&d, "cluster.repair_grace_ms = 0"),
	   "with a cluster the dump shows it");
	rc = config_load(&cfg, write_conf("cluster2.conf",
		"listen = { tcp = \"127.0.0.1:7470\"; };\n"
		"cluster = { etcd = \"http://e:2379\"; id = \"\"; };\n"), err, sizeof err);
	ok(rc == 0 && !cfg.cluster_id[0] && !cfg.cluster_advertise[0] && !cfg.cluster_etcd_ca[0] &&
	   !cfg.cluster_etcd_cert[0] && !cfg.cluster_etcd_key[0],
	   "id \"\" (random) and no advertise on a listener with an address, no TLS (rc %d %s)",
	   rc, err);
	rc = config_load(&cfg, write_conf("cluster3.conf",
		"listen = { tcp = \"127.0.0.1:7470\"; };\n"
		"cluster = { etcd = \"https://e:2379,https://[::1]:2\"; etcd_ca = \"/etc/passwd\";\n"
		"  etcd_cert = \"/etc/passwd\"; etcd_key = \"/etc/group\"; };\n"), err, sizeof err);
	dump(&cfg, &d);
	ok(rc == 0 && !strcmp(cfg.cluster_etcd_ca, "/etc/passwd") &&
	   !strcmp(cfg.cluster_etcd_key, "/etc/group") &&
	   has_line(&d, "cluster.etcd_key = /etc/group"),
	   "etcd_ca, etcd_cert, etcd_key with https:// endpoints, in the dump (rc %d %s)", rc, err);
}

/* reno is built into every Linux and always allowed. */
static void test_tcp(void)
{
	struct dump d;
	struct config cfg;
	char err[512];
	int rc;

	config_defaults(&cfg);
	ok(!cfg.tcp_congestion[0], "tcp.congestion: off by default");
	rc = config_load(&cfg, write_conf("tcp.conf", "tcp = { congestion = \"reno\"; };\n"),
			 err, sizeof err);
	ok(rc == 0 && !strcmp(cfg.tcp_congestion, "reno"), "tcp.congestion = reno (rc %d %s)",
	   rc, err);
	dump(&cfg, &d);
	ok(has_line(&d, "tcp.congestion = reno"), "with a congestion control the dump shows it");
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_defaults();
	test_example_file();
	test_empty_file();
	test_sizes_in_file();
	test_full_file();
	test_include();
	test_not_truncated();
	for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++)
		test_bad_file(&bad_cases[i], (int)i);
	test_too_many_pools();
	test_missing_file();
	test_parse_size();
	test_tenants();
	test_cluster();
	test_tcp();
	remove_confs();
	return tap_done();
}
