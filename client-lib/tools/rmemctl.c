/*
 * rmemctl - shows what rmemd is doing: pool-wide figures, pools, regions,
 * client sessions and named regions, as aligned tables or as one JSON
 * object; and unlinks a named region.  This file: the command line, the
 * connection and the commands of the daemon's state; rmemctl_names.c: the
 * commands of named regions.
 *
 * Uses only the public library (<rmem.h>) and libc, so it doubles as a check
 * that the public API is enough to administer the daemon; rmemctl_cluster.c (the
 * `cluster` command) reads etcd itself, with common/'s etcd client.
 */
#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmem.h>

#include "output.h"
#include "rmemctl.h"

#ifndef RMEM_VERSION_STRING
#define RMEM_VERSION_STRING "unknown"
#endif

#define DEFAULT_SOCKET "/run/rmemd/rmemd.sock"
#define MAX_POOLS 256

/* ---- commands ------------------------------------------------------------------- */

int report(const struct ctl *ctl, const char *what, int err)
{
	if (err == -EACCES && !ctl->unix_socket)
		fprintf(stderr, "rmemctl: %s: admin listings need the Unix socket (-s PATH); "
			"over TCP only 'stats' and 'unlink' are served\n", what);
	else if (err == -EACCES)
		fprintf(stderr, "rmemctl: %s: rmemd refused the admin request: this user is not "
			"trusted on its admin socket (root or rmemd's own user)\n", what);
	else if (err == -EOPNOTSUPP)
		fprintf(stderr, "rmemctl: %s: this rmemd does not know named regions (it is "
			"older than librmem 1.2)\n", what);
	else
		fprintf(stderr, "rmemctl: %s: %s\n", what, rmem_strerror(err));
	return EXIT_FAILURE;
}

static const struct stat_row {
	const char *key;
	size_t offset;
	bool bytes; /* shown with a human size too */
} stat_rows[] = {
	{ "pool_bytes", offsetof(struct rmem_stats, pool_bytes), true },
	{ "used_bytes", offsetof(struct rmem_stats, used_bytes), true },
	{ "free_bytes", offsetof(struct rmem_stats, free_bytes), true },
	{ "largest_free", offsetof(struct rmem_stats, largest_free), true },
	{ "regions", offsetof(struct rmem_stats, regions), false },
	{ "clients", offsetof(struct rmem_stats, clients), false },
	{ "peak_used", offsetof(struct rmem_stats, peak_used), true },
	{ "allocs", offsetof(struct rmem_stats, allocs), false },
	{ "frees", offsetof(struct rmem_stats, frees), false },
	{ "key_mode", offsetof(struct rmem_stats, key_mode), false },
	{ "state_slots_used", offsetof(struct rmem_stats, state_slots_used), false },
	{ "state_slots_total", offsetof(struct rmem_stats, state_slots_total), false },
};

/* The words for rmem_stats.key_mode, as rmemd.conf(5) spells the modes. */
static const char *key_mode_name(uint64_t mode)
{
	switch (mode) {
	case RMEM_KEYS_NONE: return "none: no RDMA, TCP keys";
	case RMEM_KEYS_WINDOW: return "window";
	case RMEM_KEYS_REGION_MR: return "region-mr";
	default: return "unknown";
	}
}
#define NSTAT_ROWS (sizeof(stat_rows) / sizeof(stat_rows[0]))

static uint64_t stat_value(const struct rmem_stats *st, const struct stat_row *row)
{
	uint64_t value;

	memcpy(&value, (const char *)st + row->offset, sizeof(value));
	return value;
}

static int cmd_stats(struct ctl *ctl)
{
	struct rmem_stats st;
	int err = rmem_stats(ctl->client, &st);

	if (err)
		return report(ctl, "stats", err);
	if (ctl->json) {
		printf("{\"stats\":{");
		for (size_t i = 0; i < NSTAT_ROWS; i++) {
			const struct stat_row *row = &stat_rows[i];

			json_u64(row->key, stat_value(&st, row), i + 1 < NSTAT_ROWS);
		}
		printf("}}\n");
		return 0;
	}
	for (size_t i = 0; i < NSTAT_ROWS; i++) {
		uint64_t value = stat_value(&st, &stat_rows[i]);
		char key[32], human[32];

		snprintf(key, sizeof(key), "%s:", stat_rows[i].key);
		printf("%-19s%" PRIu64, key, value);
		if (stat_rows[i].bytes && value >= 1024) {
			format_size(human, sizeof(human), value);
			printf(" (%s)", human);
		}
		if (stat_rows[i].offset == offsetof(struct rmem_stats, key_mode))
			printf(" (%s)", key_mode_name(value));
		printf("\n");
	}
	return 0;
}

static int fetch_pools(struct ctl *ctl, struct rmem_pool_info *pools, size_t *count)
{
	int n = rmem_pools(ctl->client, pools, MAX_POOLS);

	if (n < 0)
		return n;
	*count = (size_t)n;
	return 0;
}

static int cmd_pools(struct ctl *ctl)
{
	static const struct column cols[] = {
		{ "NAME", false }, { "SIZE", true }, { "BYTES", true }, { "USED", true },
		{ "LARGEST FREE", true }, { "REGIONS", true }, { "PAGE", true }, { "ALIGN", true },
	};
	struct table t = { .cols = cols, .ncols = sizeof(cols) / sizeof(cols[0]) };
	struct rmem_pool_info *pools = calloc(MAX_POOLS, sizeof(*pools));
	size_t n = 0;
	int err, rc = EXIT_FAILURE;

	if (!pools)
		return report(ctl, "pools", -ENOMEM);
	err = fetch_pools(ctl, pools, &n);
	if (err) {
		rc = report(ctl, "pools", err);
		goto out;
	}
	if (ctl->json) {
		printf("{\"pools\":[");
		for (size_t i = 0; i < n; i++) {
			printf("%s{", i ? "," : "");
			json_str("name", pools[i].name, true);
			json_u64("bytes", pools[i].bytes, true);
			json_u64("used_bytes", pools[i].used_bytes, true);
			json_u64("largest_free", pools[i].largest_free, true);
			json_u64("regions", pools[i].regions, true);
			json_u64("page_size", pools[i].page_size, true);
			json_u64("alignment", pools[i].alignment, false);
			printf("}");
		}
		printf("]}\n");
		rc = 0;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char name[CELL_MAX], size[32], used[32], largest[32], page[32], align[32];

		if (table_add_row(&t) < 0) {
			rc = report(ctl, "pools", -ENOMEM);
			goto out;
		}
		printable(name, sizeof(name), pools[i].name);
		format_size(size, sizeof(size), pools[i].bytes);
		format_size(used, sizeof(used), pools[i].used_bytes);
		format_size(largest, sizeof(largest), pools[i].largest_free);
		format_size(page, sizeof(page), pools[i].page_size);
		format_size(align, sizeof(align), pools[i].alignment);
		table_set(&t, 0, "%s", name);
		table_set(&t, 1, "%s", size);
		table_set(&t, 2, "%" PRIu64, pools[i].bytes);
		table_set(&t, 3, "%s", used);
		table_set(&t, 4, "%s", largest);
		table_set(&t, 5, "%" PRIu64, pools[i].regions);
		table_set(&t, 6, "%s", page);
		table_set(&t, 7, "%s", align);
	}
	table_print(&t);
	rc = 0;
out:
	table_free(&t);
	free(pools);
	return rc;
}

/* Grows *items (of item_size bytes) so that room more fit after *count. */
static int reserve(void **items, size_t *cap, size_t count, size_t room, size_t item_size)
{
	void *grown;
	size_t want = *cap ? *cap : LIST_PAGE;

	if (count + room <= *cap)
		return 0;
	while (want < count + room)
		want *= 2;
	grown = realloc(*items, want * item_size);
	if (!grown)
		return -ENOMEM;
	*items = grown;
	*cap = want;
	return 0;
}


static int regions_page(rmem_client *c, uint64_t after, void *out, size_t max)
{
	return rmem_regions(c, after, out, max);
}

static int clients_page(rmem_client *c, uint64_t after, void *out, size_t max)
{
	return rmem_clients(c, after, out, max);
}

/* Every entry of a listing, paging with `after` until the daemon has no more
 * (rmemctl.h). */
int fetch_all(struct ctl *ctl, page_fn page, size_t item_size, void **out, size_t *count)
{
	unsigned char *items = NULL;
	size_t n = 0, cap = 0;
	uint64_t after = 0, last;
	int got, err;

	for (;;) {
		err = reserve((void **)&items, &cap, n, LIST_PAGE, item_size);
		if (err)
			goto fail;
		got = page(ctl->client, after, items + n * item_size, LIST_PAGE);
		if (got <= 0) {
			err = got;
			break;
		}
		n += (size_t)got;
		memcpy(&last, items + (n - 1) * item_size, sizeof last);
		/* Ids must grow, or paging would never end. */
		if (last <= after) {
			err = -EPROTO;
			break;
		}
		after = last;
	}
	if (err)
		goto fail;
	*out = items;
	*count = n;
	return 0;
fail:
	free(items);
	return err;
}

int run_listing(struct ctl *ctl, const struct listing *l)
{
	void *items = NULL;
	size_t n = 0;
	int err = fetch_all(ctl, l->page, l->item_size, &items, &n);

	if (err)
		return report(ctl, l->what, err);
	if (ctl->json)
		json_list(l->what, items, n, l->item_size, l->json);
	else
		err = l->table(ctl, items, n);
	free(items);
	return err ? report(ctl, l->what, err) : 0;
}

_Static_assert(offsetof(struct rmem_region_info, id) == 0, "paging reads the id first");
_Static_assert(offsetof(struct rmem_client_info, id) == 0, "paging reads the id first");

/* What a region grants: an anonymous one (access 0) grants both. */
static const char *region_access(const struct rmem_region_info *r)
{
	static const char *const text[] = { "rw", "r", "w", "rw" };

	return text[r->access & (RMEM_READ | RMEM_WRITE)];
}

static void region_json(const void *item)
{
	const struct rmem_region_info *r = item;

	json_u64("id", r->id, true);
	json_u64("addr", r->addr, true);
	json_u64("length", r->length, true);
	json_u64("client_id", r->client_id, true);
	json_u64("pool", r->pool, true);
	printf("\"access\":\"%s\",\"name\":", region_access(r));
	/* null, not "": an anonymous region has no name at all. */
	if (r->name_id)
		json_text(r->name);
	else
		printf("null");
	printf(",");
	json_u64("name_id", r->name_id, true);
	json_bool("unlinked", r->flags & RMEM_REGION_UNLINKED, false);
}

struct pool_names {
	const struct rmem_pool_info *pools;
	size_t n;
};

static void region_row(struct table *t, const void *item, const void *arg)
{
	const struct rmem_region_info *r = item;
	const struct pool_names *pn = arg;
	char length[32], pool[CELL_MAX], name[CELL_MAX];

	if (r->pool < pn->n)
		printable(pool, sizeof(pool), pn->pools[r->pool].name);
	else
		snprintf(pool, sizeof(pool), "%" PRIu32, r->pool);
	format_size(length, sizeof(length), r->length);
	/* "-": anonymous; an unlinked name is shown in parentheses, as the
	 * handle outlives it. */
	printable(name, sizeof(name), r->name_id ? r->name : "-");
	table_set(t, 0, "%" PRIu64, r->id);
	table_set(t, 1, "%" PRIu64, r->client_id);
	table_set(t, 2, "%s", pool);
	table_set(t, 3, "%s", length);
	table_set(t, 4, "%" PRIu64, r->length);
	table_set(t, 5, "0x%" PRIx64, r->addr);
	table_set(t, 6, "%s", region_access(r));
	table_set(t, 7, r->flags & RMEM_REGION_UNLINKED ? "(%s)" : "%s", name);
}

/* Pool names read better than indexes; without them, show indexes. */
static int regions_table(struct ctl *ctl, const void *items, size_t n)
{
	static const struct column cols[] = {
		{ "ID", true }, { "CLIENT", true }, { "POOL", false }, { "LENGTH", true },
		{ "BYTES", true }, { "ADDR", false }, { "ACCESS", false }, { "NAME", false },
	};
	struct rmem_pool_info *pools = calloc(MAX_POOLS, sizeof(*pools));
	struct pool_names pn = { pools, 0 };
	int err;

	if (pools && fetch_pools(ctl, pools, &pn.n) < 0)
		pn.n = 0;
	err = table_print_items(cols, sizeof(cols) / sizeof(cols[0]), items, n,
				sizeof(struct rmem_region_info), region_row, &pn);
	free(pools);
	return err;
}

static int cmd_regions(struct ctl *ctl)
{
	static const struct listing l = { "regions", regions_page,
		sizeof(struct rmem_region_info), region_json, regions_table };

	return run_listing(ctl, &l);
}

static void client_json(const void *item)
{
	const struct rmem_client_info *cl = item;

	json_u64("id", cl->id, true);
	json_u64("regions", cl->regions, true);
	json_u64("used_bytes", cl->used_bytes, true);
	json_u64("connected_ms", cl->connected_ms, true);
	/* The daemon's idle time is the lease's age; idle_ms stays for the
	 * scripts that read it. */
	json_u64("lease_age_ms", cl->idle_ms, true);
	json_u64("idle_ms", cl->idle_ms, true);
	json_str("transport", cl->transport, true);
	json_str("peer", cl->peer, false);
}

static void client_row(struct table *t, const void *item, const void *arg)
{
	const struct rmem_client_info *cl = item;
	char transport[16], peer[CELL_MAX], used[32], connected[32], lease_age[32];

	(void)arg;
	printable(transport, sizeof(transport), cl->transport);
	printable(peer, sizeof(peer), cl->peer);
	format_size(used, sizeof(used), cl->used_bytes);
	format_duration(connected, sizeof(connected), cl->connected_ms);
	format_duration(lease_age, sizeof(lease_age), cl->idle_ms);
	table_set(t, 0, "%" PRIu64, cl->id);
	table_set(t, 1, "%s", transport);
	table_set(t, 2, "%" PRIu64, cl->regions);
	table_set(t, 3, "%s", used);
	table_set(t, 4, "%s", connected);
	table_set(t, 5, "%s", lease_age);
	table_set(t, 6, "%s", peer);
}

static int clients_table(struct ctl *ctl, const void *items, size_t n)
{
	static const struct column cols[] = {
		{ "ID", true }, { "TRANSPORT", false }, { "REGIONS", true }, { "USED", true },
		{ "CONNECTED", true }, { "LEASE AGE", true }, { "PEER", false },
	};

	(void)ctl;
	return table_print_items(cols, sizeof(cols) / sizeof(cols[0]), items, n,
				 sizeof(struct rmem_client_info), client_row, NULL);
}

static int cmd_clients(struct ctl *ctl)
{
	static const struct listing l = { "clients", clients_page,
		sizeof(struct rmem_client_info), client_json, clients_table };

	return run_listing(ctl, &l);
}

/* ---- main ----------------------------------------------------------------------- */

static const struct command {
	const char *name;
	int (*run)(struct ctl *ctl);
	bool takes_arg; /* one argument after the command (ctl->arg) */
	bool etcd_only; /* reads etcd itself: no rmemd connection */
} commands[] = {
	{ "stats", cmd_stats, false, false },
	{ "pools", cmd_pools, false, false },
	{ "regions", cmd_regions, false, false },
	{ "clients", cmd_clients, false, false },
	{ "names", cmd_names, false, false },
	{ "unlink", cmd_unlink, true, false },
	{ "cluster", cmd_cluster, false, true },
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: rmemctl [-s SOCKET | -c HOST:PORT] [--json] COMMAND\n"
		"       rmemctl [-s SOCKET | -c HOST:PORT] [-t TENANT -k SECRET_FILE] [--revoke]\n"
		"               unlink NAME\n"
		"       rmemctl [-s SOCKET] --namespace=TENANT [--revoke] unlink NAME\n"
		"       rmemctl -e etcd://HOST:PORT[,HOST:PORT...]/NAME [--json] cluster\n"
		"       rmemctl -e etcd://HOST:PORT[,HOST:PORT...]/NAME [-s SOCKET] [--grace=S]\n"
		"               cluster sweep\n"
		"       rmemctl -e etcd://HOST:PORT[,HOST:PORT...]/NAME [--json] cluster redundant\n"
		"       rmemctl -e etcd://HOST:PORT[,HOST:PORT...]/NAME [--wait [--timeout=S]]\n"
		"               cluster drain|undrain ID\n"
		"       (etcds://...?etcd_ca=PATH&etcd_cert=PATH&etcd_key=PATH: etcd over TLS)\n"
		"Shows the state of rmemd, the rmem remote-memory daemon.\n"
		"\n"
		"Commands:\n"
		"  stats        pool-wide figures (any endpoint)\n"
		"  pools        the daemon's pools (Unix socket only)\n"
		"  regions      every live region (Unix socket only)\n"
		"  clients      every connected session (Unix socket only)\n"
		"  names        every named region of every namespace (Unix socket only)\n"
		"  unlink NAME  unlinks the named region NAME of rmemctl's own namespace\n"
		"               (anonymous, or the tenant's with -t) (any endpoint); with\n"
		"               --namespace, of that tenant's, as an admin (Unix socket only)\n"
		"  cluster      the memory servers of a cluster, as etcd lists them: state,\n"
		"               endpoints, capacity, used, free, largest free, generation,\n"
		"               uptime, lease seconds left of granted (-e only)\n"
		"  cluster sweep  removes the names of servers gone for longer than the\n"
		"               grace or started again without their memory; with -s, also\n"
		"               unlinks that member's names older than the grace that have\n"
		"               no record in etcd (a creator's leftovers) (-e only)\n"
		"  cluster redundant  each redundant named region: code, size, layout\n"
		"               generation, state (healthy, degraded, lost), which server\n"
		"               holds which piece and its state (-e only)\n"
		"  cluster drain ID  member ID takes no new regions or names, and the pieces\n"
		"               of redundant named regions on it move to other members;\n"
		"               refused, with the figures, when the others lack the room;\n"
		"               with --wait, ends once nothing is left on it (-e only)\n"
		"  cluster undrain ID  member ID takes new regions and names again (-e only)\n"
		"\n"
		"Options:\n"
		"  -s, --socket=PATH        the daemon's Unix socket (default: $RMEMD_SOCKET,\n"
		"                           else " DEFAULT_SOCKET ")\n"
		"  -c, --connect=HOST:PORT  talk to the daemon over TCP instead\n"
		"  -e, --etcd=etcd://HOST:PORT[,...]/NAME\n"
		"                           the cluster NAME whose members etcd at HOST:PORT\n"
		"                           lists (cluster); other commands connect to it\n"
		"                           as a cluster client\n"
		"  -j, --json               print one JSON object\n"
		"  -t, --tenant=NAME        connect as this tenant (with -k)\n"
		"  -k, --secret-file=PATH   the tenant's secret\n"
		"  -r, --revoke             unlink: also invalidate every open handle now\n"
		"  -N, --namespace=TENANT   unlink: in TENANT's namespace (\"\": the anonymous\n"
		"                           one), as an admin; not with -t, -k\n"		"  -g, --grace=SECONDS      cluster sweep: how long a server may be gone,\n"
		"                           and a name be without a record (default 600)\n"
		"  -w, --wait               cluster drain: wait until the member is empty;\n"
		"                           undrain: until it takes regions again\n"
		"  -T, --timeout=SECONDS    with --wait: give up after that long (exit 1)\n"
		"  -h, --help               print this help and exit\n"
		"  -V, --version            print the version and exit\n"
		"\n"
		"Exit status: 0 on success, 1 on failure, 2 on a usage error.\n");
}

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rmemctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'rmemctl --help'.\n");
	return EXIT_USAGE;
}

/* A count of seconds, up to a year, into *out: whether arg is one. */
static bool seconds(const char *arg, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (!*arg || *end || v > 86400 * 365)
		return false;
	*out = (unsigned)v;
	return true;
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* Turns -s PATH into an endpoint; a PATH that already says "unix:" is kept. */
static char *socket_endpoint(const char *path)
{
	size_t len = strlen(path);
	char *endpoint;

	if (strncmp(path, "unix:", 5) == 0)
		return strdup(path);
	endpoint = malloc(len + 6);
	if (endpoint) {
		memcpy(endpoint, "unix:", 5);
		memcpy(endpoint + 5, path, len + 1);
	}
	return endpoint;
}

static int open_client(struct ctl *ctl)
{
	struct rmem_opts o;
	int err;

	rmem_opts_init(&o, sizeof(o));
	o.tenant = ctl->tenant;
	o.secret_file = ctl->secret_file;
	err = rmem_connect(ctl->endpoint, &o, &ctl->client);
	switch (err) {
	case 0:
		return 0;
	case -EINVAL:
		fprintf(stderr, "rmemctl: invalid endpoint '%s'\n", ctl->endpoint);
		return EXIT_USAGE;
	case -EPROTO:
	case -ENOTSUP:
	case -ENOMEM:
	case -EUSERS:
		fprintf(stderr, "rmemctl: rmemd at %s: %s\n", ctl->endpoint, rmem_strerror(err));
		return EXIT_FAILURE;
	case -EACCES:
		if (ctl->tenant)
			fprintf(stderr, "rmemctl: rmemd at %s refused tenant '%s' (or its secret "
				"file %s cannot be read)\n", ctl->endpoint, ctl->tenant,
				ctl->secret_file);
		else
			fprintf(stderr, "rmemctl: cannot reach rmemd at %s: permission denied on "
				"the socket\n", ctl->endpoint);
		return EXIT_FAILURE;
	default:
		if (ctl->tenant && err == -ENOENT) {
			fprintf(stderr, "rmemctl: secret file %s: %s\n", ctl->secret_file,
				rmem_strerror(err));
			return EXIT_FAILURE;
		}
		fprintf(stderr, "rmemctl: cannot reach rmemd at %s: %s (is rmemd running?)\n",
			ctl->endpoint, rmem_strerror(err));
		return EXIT_FAILURE;
	}
}

struct args {
	const char *socket_path;
	const char *tcp_endpoint;
	const struct command *cmd;
};

/* The command line into ctl and a: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct ctl *ctl, struct args *a)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "connect", required_argument, NULL, 'c' },
		{ "etcd", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "tenant", required_argument, NULL, 't' },
		{ "secret-file", required_argument, NULL, 'k' },
		{ "revoke", no_argument, NULL, 'r' },
		{ "namespace", required_argument, NULL, 'N' },
		{ "grace", required_argument, NULL, 'g' },
		{ "wait", no_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, nargs;
	bool grace = false, sweep, redundant, drain;

	while ((opt = getopt_long(argc, argv, "s:c:e:jt:k:rN:g:wT:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			a->socket_path = optarg;
			break;
		case 'c':
			a->tcp_endpoint = optarg;
			break;
		case 'e':
			ctl->etcd = optarg;
			break;
		case 'j':
			ctl->json = true;
			break;
		case 't':
			ctl->tenant = optarg;
			break;
		case 'k':
			ctl->secret_file = optarg;
			break;
		case 'r':
			ctl->revoke = true;
			break;
		case 'N':
			ctl->ns = optarg;
			break;
		case 'g':
			if (!seconds(optarg, &ctl->grace_s))
				return usage_error("--grace needs seconds, not '%s'", optarg);
			grace = true;
			break;
		case 'w':
			ctl->wait = true;
			break;
		case 'T':
			if (!seconds(optarg, &ctl->timeout_s))
				return usage_error("--timeout needs seconds, not '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("rmemctl %s\n", RMEM_VERSION_STRING);
			return 0;
		default:
			fprintf(stderr, "Try 'rmemctl --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (a->socket_path && a->tcp_endpoint)
		return usage_error("%s", "-s and -c exclude each other");
	if (ctl->etcd && strncmp(ctl->etcd, "etcd://", 7) != 0 &&
	    strncmp(ctl->etcd, "etcds://", 8) != 0)
		return usage_error("-e needs an etcd:// or etcds:// endpoint, not '%s'", ctl->etcd);
	if (!ctl->tenant != !ctl->secret_file)
		return usage_error("%s", "-t and -k go together");
	if (optind >= argc)
		return usage_error("%s", "missing command (stats, pools, regions, clients, names, "
				   "unlink or cluster)");
	a->cmd = find_command(argv[optind]);
	if (!a->cmd)
		return usage_error("unknown command '%s'", argv[optind]);
	/* `cluster sweep`: the only command with a word after it that is not
	 * an argument of its own. */
	sweep = a->cmd->run == cmd_cluster && optind + 1 < argc &&
		!strcmp(argv[optind + 1], "sweep");
	redundant = a->cmd->run == cmd_cluster && optind + 1 < argc &&
		    !strcmp(argv[optind + 1], "redundant");
	/* `cluster drain ID`, `cluster undrain ID`: two words. */
	drain = a->cmd->run == cmd_cluster && optind + 1 < argc &&
		(!strcmp(argv[optind + 1], "drain") || !strcmp(argv[optind + 1], "undrain"));
	if (ctl->etcd && (a->tcp_endpoint || (a->socket_path && !sweep)))
		return usage_error("%s", "-e excludes -s and -c (but for cluster sweep, -s)");
	if (grace && !sweep)
		return usage_error("%s", "--grace goes with cluster sweep only");
	if (!grace)
		ctl->grace_s = 600;
	if ((ctl->wait || ctl->timeout_s) && !drain)
		return usage_error("%s", "--wait and --timeout go with cluster drain and undrain only");
	if (drain && ctl->json)
		return usage_error("%s", "--json does not go with cluster drain or undrain");
	nargs = drain ? 2 : a->cmd->takes_arg || sweep || redundant ? 1 : 0;
	if (nargs && optind + nargs >= argc)
		return usage_error("%s needs an argument", drain ? argv[optind + 1] : a->cmd->name);
	if (optind + 1 + nargs < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 1 + nargs]);
	ctl->arg = nargs ? argv[optind + 1] : NULL;
	ctl->arg2 = nargs == 2 ? argv[optind + 2] : NULL;
	if (ctl->revoke && a->cmd->run != cmd_unlink)
		return usage_error("%s", "--revoke goes with unlink only");
	if (ctl->ns && a->cmd->run != cmd_unlink)
		return usage_error("%s", "--namespace goes with unlink only");
	/* -t -k make rmemctl the tenant; --namespace needs it to be the admin. */
	if (ctl->ns && ctl->tenant)
		return usage_error("%s", "--namespace and -t exclude each other");
	if (a->socket_path && !a->socket_path[0])
		return usage_error("%s", "-s needs a non-empty path");
	return -1;
}

int main(int argc, char **argv)
{
	struct ctl ctl = { .json = false };
	struct args a = { NULL };
	char *endpoint = NULL;
	int rc = parse_args(argc, argv, &ctl, &a);

	if (rc >= 0)
		return rc;
	if (ctl.etcd) {
		ctl.endpoint = ctl.etcd; /* a cluster client (librmem's etcd://) */
	} else if (a.tcp_endpoint) {
		ctl.endpoint = a.tcp_endpoint;
		ctl.unix_socket = strncmp(a.tcp_endpoint, "unix:", 5) == 0;
	} else {
		if (!a.socket_path)
			a.socket_path = getenv("RMEMD_SOCKET");
		if (!a.socket_path || !a.socket_path[0])
			a.socket_path = DEFAULT_SOCKET;
		endpoint = socket_endpoint(a.socket_path);
		if (!endpoint) {
			fprintf(stderr, "rmemctl: out of memory\n");
			return EXIT_FAILURE;
		}
		ctl.endpoint = endpoint;
		ctl.unix_socket = true;
	}

	if (a.cmd->etcd_only && ctl.arg && a.socket_path) {
		/* cluster sweep -s: the member's admin socket, for its names. */
		endpoint = socket_endpoint(a.socket_path);
		ctl.endpoint = endpoint;
		ctl.unix_socket = true;
		if (!endpoint) {
			fprintf(stderr, "rmemctl: out of memory\n");
			rc = EXIT_FAILURE;
		} else if ((rc = open_client(&ctl)) == 0) {
			rc = a.cmd->run(&ctl);
			rmem_close(ctl.client);
		}
	} else if (a.cmd->etcd_only) {
		rc = a.cmd->run(&ctl);
	} else if ((rc = open_client(&ctl)) == 0) {
		rc = a.cmd->run(&ctl);
		rmem_close(ctl.client);
	}
	free(endpoint);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "rmemctl: cannot write the output: %s\n", strerror(errno));
		rc = EXIT_FAILURE;
	}
	return rc;
}
