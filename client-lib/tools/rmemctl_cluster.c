/*
 * rmemctl_cluster.c - rmemctl's `cluster` command: the memory servers of a
 * cluster as etcd knows them (docs/architecture.md, "Cluster").
 *
 * It reads /rmem/<name>/servers/ itself, with common's etcd client and the
 * server record's codec (cluster_rec.h), rather than through librmem: the
 * listing is etcd's view (who holds a lease, what each server last
 * published), which is what an operator asks for when a server seems
 * missing, and it must work when no server answers at all.
 *
 * The lease column is etcd's own account of each server's lease
 * (/v3/lease/timetolive): seconds remaining of the seconds granted.  A
 * server renews at a third of its lease, so remaining stays above two
 * thirds of granted while it lives; a server whose remaining fell to a
 * third or less has missed its keepalives ("late": dead or cut off from
 * etcd) and goes when it reaches 0.  The record's own age would say less:
 * a server writes its record only when its figures move.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_rec.h"
#include "etcd_client.h"
#include "etcd_url.h"
#include "output.h"
#include "rmemctl.h"

#define TIMEOUT_MS 2000

struct server_row {
	struct cluster_rec rec;
	const char *state;    /* "up", "late", "expired", "bad-record" */
	int64_t lease;        /* its lease id (0: none) */
	int64_t ttl_s;        /* remaining, -1 when etcd no longer knows it or unknown */
	int64_t granted_s;
	char key[CELL_MAX];   /* the key's id part, for a record that does not decode */
};

/* librmem's own parameters of an etcd:// URL: taken, and left to it (rmemctl
 * reads etcd alone). */
static int lib_param(void *arg, const char *p, size_t len)
{
	static const char *const keys[] = { "claim_ttl=", "redundancy=", "repair_grace_ms=" };

	(void)arg;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (len > strlen(keys[i]) && !strncmp(p, keys[i], strlen(keys[i])))
			return 0;
	return -EINVAL;
}

static const char *lease_state(int64_t ttl_s, int64_t granted_s)
{
	if (ttl_s < 0)
		return "expired";
	return ttl_s * 3 > granted_s ? "up" : "late";
}

/* One key of the listing into row: its record and its lease. */
static void read_row(struct etcd_client *etcd, const struct etcd_kv *kv, size_t prefix_len,
		     struct server_row *row)
{
	memset(row, 0, sizeof *row);
	row->ttl_s = -1;
	printable(row->key, sizeof row->key,
		  kv->key_len > prefix_len ? (const char *)kv->key + prefix_len : "");
	row->lease = kv->lease;
	if (cluster_rec_decode((const char *)kv->value, kv->value_len, &row->rec) < 0) {
		row->state = "bad-record";
		return;
	}
	if (kv->lease && etcd_lease_ttl(etcd, kv->lease, &row->ttl_s, &row->granted_s) == 0)
		row->state = lease_state(row->ttl_s, row->granted_s);
	else
		row->state = kv->lease ? "unknown" : "no-lease";
}

static void print_json(const char *name, const struct server_row *rows, size_t n, uint64_t now_ms)
{
	printf("{\"cluster\":");
	json_text(name);
	printf(",\"servers\":[");
	for (size_t i = 0; i < n; i++) {
		const struct server_row *r = &rows[i];
		const struct cluster_rec *c = &r->rec;

		printf("%s{", i ? "," : "");
		json_str("id", c->id[0] ? c->id : r->key, true);
		json_str("state", r->state, true);
		json_str("tcp", c->tcp, true);
		json_str("rdma", c->rdma, true);
		json_u64("pool_bytes", c->pool_bytes, true);
		json_u64("used_bytes", c->pool_bytes - c->free_bytes, true);
		json_u64("free_bytes", c->free_bytes, true);
		json_u64("largest_free", c->largest_free, true);
		json_u64("generation", c->generation, true);
		json_u64("start_time_ms", c->start_time_ms, true);
		json_u64("uptime_ms", now_ms > c->start_time_ms && c->start_time_ms ?
			 now_ms - c->start_time_ms : 0, true);
		json_u64("lease", (uint64_t)r->lease, true);
		printf("\"lease_ttl_s\":%" PRId64 ",", r->ttl_s);
		json_u64("lease_granted_s", (uint64_t)r->granted_s, true);
		json_bool("draining", c->draining != 0, true);
		json_u64("regions", c->regions, true);
		json_str("version", c->version, false);
		printf("}");
	}
	printf("]}\n");
}

static int print_table(const struct server_row *rows, size_t n, uint64_t now_ms)
{
	static const struct column cols[] = {
		{ "ID", false }, { "STATE", false }, { "TCP", false }, { "RDMA", false },
		{ "POOL", true }, { "USED", true }, { "FREE", true }, { "LARGEST FREE", true },
		{ "GENERATION", true }, { "UP", true }, { "LEASE", true }, { "REGIONS", true },
		{ "DRAIN", false },
	};
	struct table t = { .cols = cols, .ncols = sizeof(cols) / sizeof(cols[0]) };

	for (size_t i = 0; i < n; i++) {
		const struct server_row *r = &rows[i];
		const struct cluster_rec *c = &r->rec;
		char pool[32], used[32], free_[32], largest[32], up[32], lease[48];

		if (table_add_row(&t) < 0) {
			table_free(&t);
			return -ENOMEM;
		}
		format_size(pool, sizeof pool, c->pool_bytes);
		format_size(used, sizeof used, c->pool_bytes - c->free_bytes);
		format_size(free_, sizeof free_, c->free_bytes);
		format_size(largest, sizeof largest, c->largest_free);
		format_duration(up, sizeof up, now_ms > c->start_time_ms && c->start_time_ms ?
				now_ms - c->start_time_ms : 0);
		if (r->ttl_s >= 0)
			snprintf(lease, sizeof lease, "%" PRId64 "/%" PRId64 "s", r->ttl_s,
				 r->granted_s);
		else
			snprintf(lease, sizeof lease, "-");
		table_set(&t, 0, "%s", c->id[0] ? c->id : r->key);
		table_set(&t, 1, "%s", r->state);
		table_set(&t, 2, "%s", c->tcp[0] ? c->tcp : "-");
		table_set(&t, 3, "%s", c->rdma[0] ? c->rdma : "-");
		table_set(&t, 4, "%s", pool);
		table_set(&t, 5, "%s", used);
		table_set(&t, 6, "%s", free_);
		table_set(&t, 7, "%s", largest);
		table_set(&t, 8, "%" PRIu64, c->generation);
		table_set(&t, 9, "%s", up);
		table_set(&t, 10, "%s", lease);
		table_set(&t, 11, "%" PRIu64, c->regions);
		table_set(&t, 12, "%s", c->draining ? "draining" : "-");
	}
	table_print(&t);
	table_free(&t);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int cluster_read(struct etcd_client *etcd, const char *cmd, const char *cluster,
		 const char *what, struct etcd_range *r, size_t *plen)
{
	char prefix[512];
	int n = snprintf(prefix, sizeof prefix, "/rmem/%s/%s/", cluster, what);
	int err;

	if (n < 0 || (size_t)n >= sizeof prefix) {
		fprintf(stderr, "rmemctl: %s: cluster name too long\n", cmd);
		return -ENAMETOOLONG;
	}
	err = etcd_range(etcd, prefix, (size_t)n, true, r);
	if (err < 0)
		fprintf(stderr, "rmemctl: %s: reading %s from etcd: %s (%s)\n", cmd, prefix,
			etcd_tls_errno(err) ? rmem_strerror(err) : strerror(-err),
			etcd_client_error(etcd));
	if (plen)
		*plen = (size_t)n;
	return err < 0 ? err : 0;
}

int cmd_cluster(struct ctl *ctl)
{
	char why[2 * ETCD_TLS_PATH_MAX + 256];
	struct etcd_url u;
	const char *name = u.name;
	struct etcd_client *etcd = NULL;
	struct etcd_range r = { .nkvs = 0 };
	struct server_row *rows = NULL;
	size_t plen;
	int rc, err;

	if (!ctl->etcd) {
		fprintf(stderr, "rmemctl: cluster: needs an etcd endpoint, -e "
			"etcd://HOST:PORT[,HOST:PORT...]/NAME (a single rmemd at %s is no "
			"cluster)\n", ctl->endpoint ? ctl->endpoint : "its socket");
		return EXIT_USAGE;
	}
	if (etcd_url_parse(ctl->etcd, &u, lib_param, NULL, why, sizeof why) < 0) {
		fprintf(stderr, "rmemctl: cluster: '%s': %s\n", ctl->etcd, why);
		return EXIT_USAGE;
	}
	if (etcd_global_init() < 0) {
		fprintf(stderr, "rmemctl: cluster: %s\n", strerror(ENOMEM));
		return EXIT_FAILURE;
	}
	err = etcd_client_new(u.list, &u.tls, TIMEOUT_MS, &etcd, why, sizeof why);
	if (err == -EINVAL) {
		fprintf(stderr, "rmemctl: cluster: %s\n", why);
		return EXIT_USAGE;
	}
	if (err < 0) {
		fprintf(stderr, "rmemctl: cluster: %s: %s\n", why, rmem_strerror(err));
		return EXIT_FAILURE;
	}
	if (ctl->arg) {
		rc = !strcmp(ctl->arg, "redundant") ? cluster_redundant(ctl, etcd, name) :
		     !strcmp(ctl->arg, "drain")     ? cluster_drain(ctl, etcd, name, true) :
		     !strcmp(ctl->arg, "undrain")   ? cluster_drain(ctl, etcd, name, false) :
						       cluster_sweep(ctl, etcd, name);
		goto out;
	}
	if (cluster_read(etcd, "cluster", name, "servers", &r, &plen) < 0) {
		rc = EXIT_FAILURE;
		goto out;
	}
	rows = calloc(r.nkvs ? r.nkvs : 1, sizeof *rows);
	if (!rows) {
		rc = report(ctl, "cluster", -ENOMEM);
		goto out;
	}
	for (size_t i = 0; i < r.nkvs; i++)
		read_row(etcd, &r.kvs[i], plen, &rows[i]);
	if (ctl->json) {
		print_json(name, rows, r.nkvs, now_ms());
		rc = 0;
	} else {
		rc = print_table(rows, r.nkvs, now_ms()) < 0 ? report(ctl, "cluster", -ENOMEM) : 0;
	}
out:
	free(rows);
	etcd_range_free(&r);
	etcd_client_free(etcd);
	return rc;
}
