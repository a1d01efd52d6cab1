/*
 * rmemctl_sweep.c - `rmemctl -e URL [-s SOCKET] [--grace=S] cluster sweep`:
 * what a cluster's names leave behind when their servers or creators go
 * (docs/architecture.md, "Invariant: a name is won once").
 *
 * An operator's command, run by hand or from a timer, rather than a duty
 * of rmemd: what it removes is decided from etcd's view of the whole
 * cluster and at a pace the operator chooses, and it needs no election.
 * Two sweeps running at once are harmless: every delete compares the
 * record's mod_revision, so a record rewritten meanwhile stays.
 *
 * 1. Records (etcd only).  A name's record whose server is in the set at
 *    another generation is stale at once: that server started again
 *    without its memory.  A record whose server is not in the set stays
 *    while the server may come back with its state: the first sweep that
 *    sees the server gone writes /rmem/<cluster>/gone/<id> = the wall
 *    clock in ms; a later sweep, GRACE seconds after it, deletes that
 *    server's records.  A server back in the set loses its mark.
 * 2. Leftover regions (with -s, the admin socket of one member): a name
 *    on that server, older than GRACE and not unlinked, with no record in
 *    etcd at all (not even a claim), is what a creator left that died
 *    between making the region and writing its record: it is unlinked
 *    with RMEM_UNLINK_REVOKE.  A cluster member's names are the
 *    cluster's: a name made on it directly by a single-server client is
 *    taken for such a leftover too.  A redundant region's piece (marked
 *    so by rmemd: RMEM_NAME_PIECE) stays while the name it is a piece of
 *    has a record; a piece whose record is gone is reclaimed as any
 *    other name.  The sweep trusts etcd: whoever may write its prefix
 *    decides what it reclaims (docs/operations.md, "Who may write etcd").
 * Each action is one line on stdout; then one line of totals.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_layout.h"
#include "cluster_name.h"
#include "cluster_rec.h"
#include "etcd_client.h"
#include "output.h"
#include "rmemctl.h"

#define ANON_TENANT "@anonymous" /* client-lib/cluster_int.h's CLUSTER_ANON_TENANT */
#define KEY_MAX 512

struct sweep {
	struct etcd_client *etcd;
	const char *cluster;
	uint64_t grace_ms, now_ms;
	struct etcd_range servers, names, gone;
	unsigned records, regions, marked;
};

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The server id's record in the set: 0 and *gen, or -ENOENT. */
static int server_gen(const struct sweep *s, const char *id, uint64_t *gen)
{
	for (size_t i = 0; i < s->servers.nkvs; i++) {
		struct cluster_rec rec;
		const struct etcd_kv *kv = &s->servers.kvs[i];

		if (cluster_rec_decode((const char *)kv->value, kv->value_len, &rec) == 0 &&
		    !strcmp(rec.id, id)) {
			*gen = rec.generation;
			return 0;
		}
	}
	return -ENOENT;
}

/* The gone mark of server id: its time, or 0 when there is none. */
static uint64_t gone_since(const struct sweep *s, const char *id)
{
	char key[KEY_MAX];
	int n = snprintf(key, sizeof key, "/rmem/%s/gone/%s", s->cluster, id);

	for (size_t i = 0; n > 0 && i < s->gone.nkvs; i++)
		if (s->gone.kvs[i].key_len == (size_t)n && !memcmp(s->gone.kvs[i].key, key, (size_t)n))
			return strtoull((const char *)s->gone.kvs[i].value, NULL, 10);
	return 0;
}

static int mark_gone(struct sweep *s, const char *id)
{
	char key[KEY_MAX], value[32];
	struct etcd_kv existing;
	bool created;
	int rc;

	snprintf(key, sizeof key, "/rmem/%s/gone/%s", s->cluster, id);
	snprintf(value, sizeof value, "%" PRIu64, s->now_ms);
	rc = etcd_create(s->etcd, key, strlen(key), value, strlen(value), 0, &created, &existing);
	etcd_kv_free(&existing);
	if (rc == 0 && created) {
		printf("marked %s gone: its records go after %" PRIu64 " s\n", id,
		       s->grace_ms / 1000);
		s->marked++;
	}
	return rc;
}

static void drop(struct sweep *s, const struct etcd_kv *kv, const char *why)
{
	char shown[KEY_MAX];
	bool deleted = false;

	printable(shown, sizeof shown, (const char *)kv->key);
	if (etcd_delete_if(s->etcd, kv->key, kv->key_len, kv->mod_revision, &deleted) == 0 &&
	    deleted) {
		printf("removed %s: %s\n", shown, why);
		s->records++;
	}
}

/* Part 1: every record, against the set. */
static int sweep_records(struct sweep *s)
{
	int rc = 0;

	for (size_t i = 0; i < s->names.nkvs && rc == 0; i++) {
		const struct etcd_kv *kv = &s->names.kvs[i];
		struct cluster_name rec;
		uint64_t gen, since;

		if (cluster_name_decode((const char *)kv->value, kv->value_len, &rec) < 0 ||
		    rec.region == 0)
			continue; /* not a record, or a claim: its lease ends it */
		if (server_gen(s, rec.server, &gen) == 0) {
			if (gen != rec.generation)
				drop(s, kv, "its server started again without its memory");
			continue;
		}
		since = gone_since(s, rec.server);
		if (!since)
			rc = mark_gone(s, rec.server);
		else if (s->now_ms >= since && s->now_ms - since >= s->grace_ms)
			drop(s, kv, "its server is gone for longer than the grace");
	}
	/* Servers back in the set lose their mark. */
	for (size_t i = 0; i < s->gone.nkvs && rc == 0; i++) {
		const struct etcd_kv *kv = &s->gone.kvs[i];
		const char *id = strrchr((const char *)kv->key, '/');
		bool deleted;
		uint64_t gen;

		if (id && server_gen(s, id + 1, &gen) == 0)
			rc = etcd_delete_if(s->etcd, kv->key, kv->key_len, kv->mod_revision, &deleted);
	}
	return rc;
}

static int names_page(rmem_client *c, uint64_t after, void *out, size_t max)
{
	return rmem_names(c, after, out, max);
}

static bool has_key(const struct sweep *s, const struct rmem_name_info *n, size_t name_len)
{
	char key[KEY_MAX];
	int len = snprintf(key, sizeof key, "/rmem/%s/names/%s/%.*s", s->cluster,
			   n->tenant[0] ? n->tenant : ANON_TENANT, (int)name_len, n->name);

	for (size_t i = 0; len > 0 && i < s->names.nkvs; i++)
		if (s->names.kvs[i].key_len == (size_t)len &&
		    !memcmp(s->names.kvs[i].key, key, (size_t)len))
			return true;
	return false;
}

/* Whether etcd has any key (record or claim) for tenant/name, or, when
 * rmemd marked the name as a redundant region's piece, for the name it is
 * a piece of (its member's repair agent, not a sweep, owns pieces a layout
 * replaced).  A tenant's ordinary region that only bears a piece's name is
 * judged by its own name. */
static bool has_record(const struct sweep *s, const struct rmem_name_info *n)
{
	size_t base;
	uint64_t made;
	unsigned i;

	return has_key(s, n, strlen(n->name)) ||
	       ((n->flags & RMEM_NAME_PIECE) &&
		cluster_piece_split(n->name, strlen(n->name), &base, &made, &i) &&
		has_key(s, n, base));
}

/* Part 2: the leftovers on the server of ctl->client. */
static int sweep_regions(struct sweep *s, struct ctl *ctl)
{
	struct rmem_name_info *names = NULL;
	size_t n = 0;
	int rc = fetch_all(ctl, names_page, sizeof(*names), (void **)&names, &n);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct rmem_name_info *ni = &names[i];
		char shown[RMEM_NAME_MAX + 40];
		int err;

		if ((ni->flags & RMEM_NAME_UNLINKED) || ni->age_ms < s->grace_ms || has_record(s, ni))
			continue;
		snprintf(shown, sizeof shown, "%s/%s", ni->tenant[0] ? ni->tenant : ANON_TENANT,
			 ni->name);
		err = rmem_unlink_ns(ctl->client, ni->tenant, ni->name, RMEM_UNLINK_REVOKE);
		if (err == 0) {
			printf("reclaimed %s (%" PRIu64 " bytes): no record in etcd\n", shown,
			       ni->length);
			s->regions++;
		} else if (err != -ENOENT) {
			fprintf(stderr, "rmemctl: cluster sweep: unlinking %s: %s\n", shown,
				rmem_strerror(err));
		}
	}
	free(names);
	return rc;
}

static int read_prefix(struct sweep *s, const char *what, struct etcd_range *r)
{
	return cluster_read(s->etcd, "cluster sweep", s->cluster, what, r, NULL);
}

int cluster_sweep(struct ctl *ctl, struct etcd_client *etcd, const char *cluster)
{
	struct sweep s = { .etcd = etcd, .cluster = cluster, .now_ms = wall_ms(),
			   .grace_ms = ctl->grace_s * 1000 };
	int rc = read_prefix(&s, "servers", &s.servers);

	if (rc == 0)
		rc = read_prefix(&s, "names", &s.names);
	if (rc == 0)
		rc = read_prefix(&s, "gone", &s.gone);
	if (rc == 0 && (rc = sweep_records(&s)) < 0)
		fprintf(stderr, "rmemctl: cluster sweep: %s (%s)\n", strerror(-rc),
			etcd_client_error(etcd));
	if (rc == 0 && ctl->client && (rc = sweep_regions(&s, ctl)) < 0)
		report(ctl, "cluster sweep", rc);
	if (rc == 0)
		printf("sweep: %u records removed, %u servers marked gone, %u regions reclaimed\n",
		       s.records, s.marked, s.regions);
	etcd_range_free(&s.servers);
	etcd_range_free(&s.names);
	etcd_range_free(&s.gone);
	return rc < 0 ? EXIT_FAILURE : 0;
}
