/*
 * rmemctl_redundant.c - `rmemctl -e URL [--json] cluster redundant`: each
 * redundant named region of the cluster (issue 21, librmem(7) REDUNDANCY)
 * with its layout (which server holds which piece) and its state, as etcd
 * has them: the records under /rmem/<cluster>/names/ that are layouts
 * (common/cluster_layout.h), against the servers in /rmem/<cluster>/servers/.
 *
 * A piece is usable when the record calls it healthy and its server is in
 * the set at the generation the piece was made on.  A region is "healthy"
 * with every piece usable, "degraded" with K or more, "repairing" when
 * degraded and a repairer's key is under /rmem/<cluster>/repairing/, "lost"
 * with fewer than K (no K pieces rebuild it).  Like `cluster`, it reads
 * etcd itself and needs no server to answer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_layout.h"
#include "cluster_rec.h"
#include "etcd_client.h"
#include "output.h"
#include "rmemctl.h"

#define ANON_TENANT "@anonymous" /* client-lib/router_int.h's CLUSTER_ANON_TENANT */

static const char *const piece_states[] = { "healthy", "stale", "lost" };

struct red_row {
	char tenant[CELL_MAX], name[CELL_MAX];
	struct cluster_layout lay;
	bool present[CLUSTER_LAYOUT_PIECES_MAX]; /* its server is there, same generation */
	unsigned usable;
	const char *state;
};

/* Whether server id is in the set at generation gen. */
static bool server_at(const struct etcd_range *servers, const char *id, uint64_t gen)
{
	for (size_t i = 0; i < servers->nkvs; i++) {
		struct cluster_rec rec;

		if (cluster_rec_decode((const char *)servers->kvs[i].value, servers->kvs[i].value_len,
				       &rec) == 0 && !strcmp(rec.id, id))
			return rec.generation == gen;
	}
	return false;
}

/* Whether a repair of tenant/name runs now: its key under repairing/. */
static bool repairing(const struct etcd_range *rep, size_t plen, const char *tenant,
		      const char *name)
{
	size_t tl = strlen(tenant), nl = strlen(name);

	for (size_t i = 0; i < rep->nkvs; i++) {
		const char *k = (const char *)rep->kvs[i].key + plen;

		if (rep->kvs[i].key_len == plen + tl + 1 + nl && !memcmp(k, tenant, tl) &&
		    k[tl] == '/' && !memcmp(k + tl + 1, name, nl))
			return true;
	}
	return false;
}

/* The layout records among names, as rows: how many (into *rows). */
static size_t read_rows(const struct etcd_range *names, size_t plen,
			const struct etcd_range *servers, const struct etcd_range *rep,
			size_t rplen, struct red_row *rows)
{
	size_t n = 0;

	for (size_t i = 0; i < names->nkvs; i++) {
		const struct etcd_kv *kv = &names->kvs[i];
		const char *k = (const char *)kv->key + plen, *slash;
		size_t rest = kv->key_len - plen;
		struct red_row *r = &rows[n];

		slash = memchr(k, '/', rest);
		if (!slash || (size_t)(slash - k) >= CELL_MAX || rest - (size_t)(slash - k) > CELL_MAX ||
		    cluster_layout_decode((const char *)kv->value, kv->value_len, &r->lay) < 0)
			continue;
		snprintf(r->tenant, sizeof r->tenant, "%.*s", (int)(slash - k), k);
		snprintf(r->name, sizeof r->name, "%.*s", (int)(rest - (size_t)(slash - k) - 1),
			 slash + 1);
		r->usable = 0;
		for (unsigned p = 0; p < r->lay.k + r->lay.r; p++) {
			const struct cluster_piece *pc = &r->lay.pieces[p];

			r->present[p] = server_at(servers, pc->server, pc->generation);
			r->usable += r->present[p] && pc->state == PIECE_HEALTHY;
		}
		r->state = r->usable == r->lay.k + r->lay.r ? "healthy" :
			   r->usable < r->lay.k ? "lost" :
			   repairing(rep, rplen, r->tenant, r->name) ? "repairing" : "degraded";
		n++;
	}
	return n;
}

static void print_json(const char *cluster, const struct red_row *rows, size_t n)
{
	printf("{\"cluster_redundant\":{\"cluster\":");
	json_text(cluster);
	printf(",\"regions\":[");
	for (size_t i = 0; i < n; i++) {
		const struct red_row *r = &rows[i];
		char code[16];

		snprintf(code, sizeof code, "%u+%u", r->lay.k, r->lay.r);
		printf("%s{\"tenant\":", i ? "," : "");
		json_text(strcmp(r->tenant, ANON_TENANT) ? r->tenant : "");
		printf(",\"name\":");
		json_text(r->name);
		printf(",\"redundancy\":");
		json_text(code);
		printf(",");
		json_u64("size", r->lay.size, true);
		json_u64("layout_gen", r->lay.layout_gen, true);
		printf("\"state\":");
		json_text(r->state);
		printf(",");
		json_u64("usable", r->usable, true);
		printf("\"pieces\":[");
		for (unsigned p = 0; p < r->lay.k + r->lay.r; p++) {
			const struct cluster_piece *pc = &r->lay.pieces[p];

			printf("%s{\"piece\":%u,\"kind\":\"%s\",\"server\":", p ? "," : "", p,
			       p < r->lay.k ? "data" : "parity");
			json_text(pc->server);
			printf(",\"state\":");
			json_text(piece_states[pc->state]);
			printf(",");
			json_bool("server_present", r->present[p], true);
			json_u64("region", pc->region, false);
			printf("}");
		}
		printf("]}");
	}
	printf("]}}\n");
}

static int print_table(const struct red_row *rows, size_t n)
{
	static const struct column cols[] = {
		{ "NAME", false }, { "CODE", false }, { "SIZE", true }, { "GEN", true },
		{ "STATE", false }, { "PIECES (server:state, data first)", false },
	};
	struct table t = { .cols = cols, .ncols = sizeof cols / sizeof cols[0] };

	for (size_t i = 0; i < n; i++) {
		const struct red_row *r = &rows[i];
		char size[32], name[CELL_MAX], pieces[CELL_MAX];
		size_t used = 0;

		if (table_add_row(&t) < 0) {
			table_free(&t);
			return -ENOMEM;
		}
		printable(name, sizeof name, r->name);
		format_size(size, sizeof size, r->lay.size);
		pieces[0] = '\0';
		for (unsigned p = 0; p < r->lay.k + r->lay.r && used < sizeof pieces; p++) {
			const struct cluster_piece *pc = &r->lay.pieces[p];
			int w = snprintf(pieces + used, sizeof pieces - used, "%s%s:%s", p ? " " : "",
					 pc->server,
					 !r->present[p] ? "gone" : piece_states[pc->state]);

			if (w < 0)
				break;
			used += (size_t)w;
		}
		if (strcmp(r->tenant, ANON_TENANT))
			table_set(&t, 0, "%s/%s", r->tenant, name);
		else
			table_set(&t, 0, "%s", name);
		table_set(&t, 1, "%u+%u", r->lay.k, r->lay.r);
		table_set(&t, 2, "%s", size);
		table_set(&t, 3, "%" PRIu64, r->lay.layout_gen);
		table_set(&t, 4, "%s", r->state);
		table_set(&t, 5, "%s", pieces);
	}
	table_print(&t);
	table_free(&t);
	return 0;
}

int cluster_redundant(struct ctl *ctl, struct etcd_client *etcd, const char *cluster)
{
	struct etcd_range names = { .nkvs = 0 }, servers = { .nkvs = 0 }, rep = { .nkvs = 0 };
	static const char cmd[] = "cluster redundant";
	struct red_row *rows = NULL;
	size_t n = 0, plen, rplen;
	int rc = 0, err;

	err = cluster_read(etcd, cmd, cluster, "names", &names, &plen);
	if (err == 0)
		err = cluster_read(etcd, cmd, cluster, "servers", &servers, NULL);
	if (err == 0)
		err = cluster_read(etcd, cmd, cluster, "repairing", &rep, &rplen);
	if (err < 0) {
		rc = EXIT_FAILURE;
		goto out;
	}
	rows = calloc(names.nkvs ? names.nkvs : 1, sizeof *rows);
	if (!rows) {
		rc = report(ctl, "cluster redundant", -ENOMEM);
		goto out;
	}
	n = read_rows(&names, plen, &servers, &rep, rplen, rows);
	if (ctl->json)
		print_json(cluster, rows, n);
	else if (print_table(rows, n) < 0)
		rc = report(ctl, "cluster redundant", -ENOMEM);
out:
	free(rows);
	etcd_range_free(&names);
	etcd_range_free(&servers);
	etcd_range_free(&rep);
	return rc;
}
