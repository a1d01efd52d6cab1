/*
 * repair_agent.c - see repair_agent.h.
 *
 * A thread, as member.c's agent is, for the same reasons: its work is a
 * conversation of blocking calls (etcd's gateway, then librmem's calls on
 * the other members), none of which may delay the loop.  It is a client of
 * the cluster like any program: through rmem.h alone (scripts/check-layers
 * allows this one file that), never through the daemon's own structures.
 *
 * Why an election: two repairers of one region would each place a new
 * piece and the second swap would fail (-ESTALE) after all its work; one
 * leader scanning makes that rare, and the writer key (which rmem_open
 * takes for RMEM_WRITE) makes it impossible, so a leader's lease running
 * out while it repairs is harmless.  Why the grace: a member restarted by
 * systemd keeps its memory (the fd store) and its generation; repairing it
 * at once would copy every piece it holds for nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <rmem.h>

#include "clock.h"
#include "cluster_layout.h"
#include "cluster_rec.h"
#include "counters.h"
#include "etcd_client.h"
#include "etcd_endpoints.h"
#include "etcd_url.h"
#include "config.h"
#include "log.h"
#include "member.h"
#include "repair_agent.h"
#include "server.h"

#define KEY_MAX   (CONFIG_NAME_MAX + 2 * RMEM_NAME_MAX + 64)
#define SEEN_MAX  4096   /* degraded regions tracked at once */
#define TENANT_ANON "@anonymous"

/* A degraded region as the leader saw it: since when (its grace). */
struct seen {
	char key[KEY_MAX];
	int64_t since_ms;
	bool still;              /* seen in the current scan */
};

struct repair_agent {
	/* Copied at start; read-only afterwards. */
	char endpoints[CONFIG_ETCD_MAX];
	/* etcd://H:P,.../<cluster>?claim_ttl=S (etcds://...&etcd_ca=P...) */
	char url[CONFIG_ETCD_MAX + CONFIG_NAME_MAX + 3 * 3 * ETCD_TLS_PATH_MAX + 96];
	char prefix[CONFIG_NAME_MAX + 16];                  /* /rmem/<cluster>/ */
	char id[CONFIG_NAME_MAX];
	uint64_t generation;
	char admin[108];          /* this rmemd's admin socket ("": none) */
	uint32_t lease_ms, grace_ms;
	struct {
		char name[CONFIG_NAME_MAX];
		char secret_file[256];
	} tenants[CONFIG_MAX_TENANTS];
	size_t ntenants;

	/* The thread's own. */
	struct etcd_client *etcd;
	int64_t lease;            /* held while leading; 0: none */
	/* While leading, a keeper thread renews the lease on a client of its
	 * own, so that a long repair (a blocking call) does not lose it. */
	struct etcd_client *keeper_etcd;
	pthread_t keeper;
	bool keeper_on, keeper_stop;   /* under lock */
	_Atomic bool lead_lost;
	rmem_client *clients[CONFIG_MAX_TENANTS + 1];  /* [ntenants]: anonymous */
	rmem_client *self;        /* this rmemd's admin socket, for give_back */
	int64_t next_give_back;
	struct seen *seen;
	size_t nseen;

	/* Written by the thread, copied by the loop (counters.h). */
	_Atomic uint64_t pieces, bytes, failures, scans, given_back;
	_Atomic uint64_t healthy, degraded, repairing;
	_Atomic bool leading;

	struct event *timer;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic bool stop;       /* set under lock; the scan looks without it */
};

/* ---- the lead ----------------------------------------------------------------------- */

/* Sleeps ms or until stopped: whether to go on. */
static bool nap(struct repair_agent *a, int64_t ms)
{
	struct timespec ts = clock_mono_ts_after(ms);
	bool stop;

	pthread_mutex_lock(&a->lock);
	while (!a->stop && pthread_cond_timedwait(&a->cond, &a->lock, &ts) == 0)
		;
	stop = a->stop;
	pthread_mutex_unlock(&a->lock);
	return !stop;
}

/* The keeper: renews the lead's lease each third of it until told to
 * stop, or until etcd says the lease is gone (or does not answer for a
 * whole lease), which ends the lead. */
static void *keeper_main(void *arg)
{
	struct repair_agent *a = arg;
	int64_t last_ok = clock_mono_ms();

	for (;;) {
		struct timespec ts = clock_mono_ts_after(a->lease_ms / 3);
		int64_t ttl = 0;
		bool stop;
		int rc;

		pthread_mutex_lock(&a->lock);
		while (!a->stop && !a->keeper_stop &&
		       pthread_cond_timedwait(&a->cond, &a->lock, &ts) == 0)
			;
		stop = a->stop || a->keeper_stop;
		pthread_mutex_unlock(&a->lock);
		if (stop)
			return NULL;
		rc = etcd_lease_keepalive(a->keeper_etcd, a->lease, &ttl);
		if (rc == 0 && ttl > 0)
			last_ok = clock_mono_ms();
		else if ((rc == 0 && ttl <= 0) || clock_mono_ms() - last_ok >= a->lease_ms) {
			atomic_store(&a->lead_lost, true);
			return NULL;
		}
	}
}

static void keeper_end(struct repair_agent *a)
{
	if (!a->keeper_on)
		return;
	pthread_mutex_lock(&a->lock);
	a->keeper_stop = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->keeper, NULL);
	a->keeper_on = false;
	a->keeper_stop = false;
}

static void lead_end(struct repair_agent *a, const char *why)
{
	keeper_end(a);
	if (a->lease)
		(void)etcd_lease_revoke(a->etcd, a->lease);
	a->lease = 0;
	if (atomic_exchange(&a->leading, false))
		log_notice("repair: no longer leading (%s)", why);
}

/* Leads, or keeps leading: whether this member leads now. */
static bool lead(struct repair_agent *a)
{
	char key[KEY_MAX];
	int64_t ttl_s = (a->lease_ms + 999) / 1000, ttl;
	struct etcd_kv existing = { 0 };
	bool created = false;
	int k, rc;

	if (a->lease) {
		if (!atomic_load(&a->lead_lost))
			return true;
		lead_end(a, "the lease could not be renewed");
		return false;
	}
	k = snprintf(key, sizeof key, "%srepair/leader", a->prefix);
	rc = etcd_lease_grant(a->etcd, ttl_s, &a->lease, &ttl);
	if (rc == 0)
		rc = etcd_create(a->etcd, key, (size_t)k, a->id, strlen(a->id), a->lease, &created,
				 &existing);
	etcd_kv_free(&existing);
	if (rc == 0 && created) {
		atomic_store(&a->lead_lost, false);
		rc = pthread_create(&a->keeper, NULL, keeper_main, a);
		if (rc) {
			log_warn("repair: no thread to keep the lead: %s", strerror(rc));
			lead_end(a, "no keeper");
			return false;
		}
		a->keeper_on = true;
		atomic_store(&a->leading, true);
		log_notice("repair: leading the cluster's repair (grace %u ms)", a->grace_ms);
		return true;
	}
	if (a->lease)
		(void)etcd_lease_revoke(a->etcd, a->lease);
	a->lease = 0;
	return false;
}

/* ---- one region ---------------------------------------------------------------------- */

/* The client of tenant (a name, or TENANT_ANON), made once and kept. */
static rmem_client *client_of(struct repair_agent *a, const char *tenant)
{
	struct rmem_opts o;
	size_t t;
	int rc;

	if (!strcmp(tenant, TENANT_ANON)) {
		t = a->ntenants;
	} else {
		for (t = 0; t < a->ntenants && strcmp(a->tenants[t].name, tenant); t++)
			;
		if (t == a->ntenants)
			return NULL; /* not one of ours: its secret is not here */
	}
	if (a->clients[t])
		return a->clients[t];
	rmem_opts_init(&o, sizeof o);
	o.timeout_ms = (int)a->lease_ms;
	if (t < a->ntenants) {
		o.tenant = a->tenants[t].name;
		o.secret_file = a->tenants[t].secret_file;
	}
	rc = rmem_connect(a->url, &o, &a->clients[t]);
	if (rc) {
		log_warn("repair: cannot reach the cluster as %s: %s", tenant, rmem_strerror(rc));
		a->clients[t] = NULL;
	}
	return a->clients[t];
}

/* The region tenant/name, whose record says bad pieces of piece_len bytes
 * need a rebuild: opened as its writer, repaired, closed. */
static void repair_region(struct repair_agent *a, const char *tenant, const char *name,
			  unsigned bad, unsigned moving, uint64_t piece_len)
{
	rmem_client *c = client_of(a, tenant);
	struct rmem_region r;
	int64_t t0, ms;
	int rc;

	if (!c) {
		atomic_fetch_add(&a->failures, 1);
		return;
	}
	rc = rmem_open(c, name, RMEM_READ | RMEM_WRITE, &r);
	if (rc == -EBUSY) {
		/* Its writer repairs it (librmem, on its next write). */
		log_debug("repair: %s/%s has a writer; left to it", tenant, name);
		return;
	}
	if (rc) {
		log_warn("repair: %s/%s: open: %s", tenant, name, rmem_strerror(rc));
		atomic_fetch_add(&a->failures, 1);
		return;
	}
	atomic_fetch_add(&a->repairing, 1);
	if (bad == moving)
		log_info("repair: %s/%s: moving %u piece%s of %" PRIu64 " bytes off draining "
			 "members", tenant, name, bad, bad == 1 ? "" : "s", piece_len);
	else
		log_info("repair: %s/%s: rebuilding %u piece%s of %" PRIu64 " bytes", tenant, name,
			 bad, bad == 1 ? "" : "s", piece_len);
	t0 = clock_mono_ms();
	rc = rmem_repair(c, &r);
	ms = clock_mono_ms() - t0;
	atomic_fetch_sub(&a->repairing, 1);
	(void)rmem_free(c, &r);
	if (rc) {
		log_warn("repair: %s/%s: %s", tenant, name, rmem_strerror(rc));
		atomic_fetch_add(&a->failures, 1);
		return;
	}
	atomic_fetch_add(&a->pieces, bad);
	atomic_fetch_add(&a->bytes, (uint64_t)bad * piece_len);
	log_notice("repair: %s/%s: %u piece%s of %" PRIu64 " bytes %s in %" PRId64 " ms "
		   "(%.1f MB/s)", tenant, name, bad, bad == 1 ? "" : "s", piece_len,
		   bad == moving ? "moved" : "rebuilt", ms,
		   ms > 0 ? (double)bad * (double)piece_len / 1e3 / (double)ms : 0.0);
}

/* ---- the scan ------------------------------------------------------------------------ */

/* The servers in etcd now, decoded. */
struct present {
	struct cluster_rec *recs;
	size_t n;
};

static int present_read(struct repair_agent *a, struct present *p)
{
	char key[KEY_MAX];
	struct etcd_range r;
	int k = snprintf(key, sizeof key, "%sservers/", a->prefix);
	int rc = etcd_range(a->etcd, key, (size_t)k, true, &r);

	p->n = 0;
	p->recs = NULL;
	if (rc)
		return rc;
	p->recs = calloc(r.nkvs ? r.nkvs : 1, sizeof(*p->recs));
	if (!p->recs) {
		etcd_range_free(&r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r.nkvs; i++)
		if (cluster_rec_decode((const char *)r.kvs[i].value, r.kvs[i].value_len, &p->recs[p->n]) == 0)
			p->n++;
	etcd_range_free(&r);
	return 0;
}

/* Pieces of l that are not healthy where they are now; of those, in
 * *moving, the healthy ones on a server that drains (moved at once: an
 * operator asked, and nothing is degraded). */
static unsigned bad_pieces(const struct cluster_layout *l, const struct present *p,
			   unsigned *moving)
{
	unsigned bad = 0;

	*moving = 0;
	for (unsigned i = 0; i < l->k + l->r; i++) {
		const struct cluster_piece *pc = &l->pieces[i];
		const struct cluster_rec *at = NULL;

		for (size_t s = 0; s < p->n && !at; s++)
			if (!strcmp(p->recs[s].id, pc->server) &&
			    p->recs[s].generation == pc->generation)
				at = &p->recs[s];
		if (at && pc->state == PIECE_HEALTHY && at->draining)
			++*moving;
		bad += !at || pc->state != PIECE_HEALTHY || at->draining;
	}
	return bad;
}

/* The entry of key in the seen table (made, since now, when absent). */
static struct seen *seen_of(struct repair_agent *a, const char *key, int64_t now)
{
	for (size_t i = 0; i < a->nseen; i++)
		if (!strcmp(a->seen[i].key, key))
			return &a->seen[i];
	if (a->nseen == SEEN_MAX)
		return NULL; /* the rest waits for the next scans */
	snprintf(a->seen[a->nseen].key, KEY_MAX, "%s", key);
	a->seen[a->nseen].since_ms = now;
	return &a->seen[a->nseen++];
}

static void seen_prune(struct repair_agent *a)
{
	size_t j = 0;

	for (size_t i = 0; i < a->nseen; i++)
		if (a->seen[i].still) {
			a->seen[i].still = false;
			a->seen[j++] = a->seen[i];
		}
	a->nseen = j;
}

/* One look at every name's record: the redundant ones counted by state,
 * the degraded ones past their grace repaired. */
static int scan(struct repair_agent *a)
{
	char key[KEY_MAX];
	struct present p;
	struct etcd_range r;
	uint64_t healthy = 0, degraded = 0;
	int k = snprintf(key, sizeof key, "%snames/", a->prefix);
	int rc = present_read(a, &p);

	if (!rc)
		rc = etcd_range(a->etcd, key, (size_t)k, true, &r);
	if (rc) {
		free(p.recs);
		return rc;
	}
	for (size_t i = 0; i < r.nkvs && !a->stop; i++) {
		struct cluster_layout l;
		char tenant[CONFIG_NAME_MAX + 2], *name, *rest;
		struct seen *s;
		unsigned bad, moving;
		int64_t now;

		if (r.kvs[i].key_len >= KEY_MAX || r.kvs[i].key_len <= (size_t)k ||
		    cluster_layout_decode((const char *)r.kvs[i].value, r.kvs[i].value_len, &l))
			continue; /* a plain name's record, or not one at all */
		bad = bad_pieces(&l, &p, &moving);
		if (!bad) {
			healthy++;
			continue;
		}
		/* Only moves: healthy, and due now. */
		if (bad == moving)
			healthy++;
		else
			degraded++;
		memcpy(key, r.kvs[i].key, r.kvs[i].key_len);
		key[r.kvs[i].key_len] = '\0';
		now = clock_mono_ms();
		if (!(s = seen_of(a, key, now)))
			continue;
		s->still = true;
		if (bad != moving && now - s->since_ms < a->grace_ms)
			continue;
		/* <prefix>names/<tenant>/<name> */
		rest = key + k;
		name = strchr(rest, '/');
		if (!name || name - rest >= (ptrdiff_t)sizeof tenant)
			continue;
		memcpy(tenant, rest, (size_t)(name - rest));
		tenant[name - rest] = '\0';
		repair_region(a, tenant, name + 1, bad, moving,
			      (l.size + (uint64_t)l.k * l.chunk - 1) / ((uint64_t)l.k * l.chunk) *
				      l.chunk);
	}
	seen_prune(a);
	atomic_store(&a->healthy, healthy);
	atomic_store(&a->degraded, degraded);
	atomic_fetch_add(&a->scans, 1);
	etcd_range_free(&r);
	free(p.recs);
	return 0;
}

/* ---- a member's own leftovers -------------------------------------------------------- */

/* Whether server p (present in its generation) holds tenant's piece pname:
 * opened on it as that tenant, read-only, and closed.  What only that
 * tenant (or root) can have made, whatever etcd says: the evidence that
 * lets a record's word move this server to give a piece back. */
static bool held_there(struct repair_agent *a, const struct present *p, const char *tenant,
		       const struct cluster_piece *pc, const char *pname)
{
	const struct cluster_rec *srv = NULL;
	struct rmem_opts o;
	struct rmem_region r;
	rmem_client *c;
	size_t t = a->ntenants;
	bool held;

	for (size_t s = 0; s < p->n && !srv; s++)
		if (!strcmp(p->recs[s].id, pc->server) && p->recs[s].generation == pc->generation)
			srv = &p->recs[s];
	if (!srv)
		return false; /* its server is away: nothing to see yet */
	if (strcmp(tenant, TENANT_ANON)) {
		for (t = 0; t < a->ntenants && strcmp(a->tenants[t].name, tenant); t++)
			;
		if (t == a->ntenants)
			return false; /* not a tenant of ours: no secret to look with */
	}
	rmem_opts_init(&o, sizeof o);
	o.timeout_ms = (int)a->lease_ms;
	o.transport = "tcp";
	if (t < a->ntenants) {
		o.tenant = a->tenants[t].name;
		o.secret_file = a->tenants[t].secret_file;
	}
	if (rmem_connect(srv->tcp, &o, &c))
		return false;
	held = rmem_open(c, pname, RMEM_READ, &r) == 0;
	if (held)
		(void)rmem_free(c, &r);
	rmem_close(c);
	return held;
}

/*
 * Whether the piece n of this server is one nobody will read again.  etcd
 * is not trusted with that alone (whoever writes the cluster's prefix could
 * make every member unlink any tenant's pieces; docs/operations.md, "Who
 * may write etcd"), so it needs all of:
 *  - n was made as a piece (RMEM_NAME_PIECE: rmemd marked it at CREATE),
 *    so a tenant's ordinary region that only bears a piece's name is never
 *    judged;
 *  - no writer key on its base (a create, a repair or a writer would hold
 *    it, and each may hold a piece the record does not name yet), read
 *    after the listing, so a piece listed before a repair or create that
 *    began since is never judged: that one holds the key;
 *  - a record of its base, in its own tenant's names, that names at its
 *    index i a newer piece (a larger made: made only grows in a layout)
 *    on a server present in its generation;
 *  - and that server holding that piece, in that tenant's namespace (looked
 *    at as the tenant: held_there), which no other tenant can fake.
 * A piece whose record is gone, or names no newer piece it could see, is
 * kept: an unlink or a create that died while this member was away leaves
 * it, and an operator's `rmemctl cluster sweep -s` reclaims it.
 */
static bool leftover(struct repair_agent *a, const struct present *p,
		     const struct rmem_name_info *n)
{
	char key[KEY_MAX], pname[RMEM_NAME_MAX + 1], base_name[RMEM_NAME_MAX + 1];
	const char *tenant = n->tenant[0] ? n->tenant : TENANT_ANON;
	struct cluster_layout l;
	struct etcd_range r;
	const struct cluster_piece *pc;
	size_t base;
	uint64_t made;
	unsigned i;
	int k, rc;
	bool gone;

	if (!(n->flags & RMEM_NAME_PIECE) || (n->flags & RMEM_NAME_UNLINKED) ||
	    !cluster_piece_split(n->name, strlen(n->name), &base, &made, &i))
		return false;
	snprintf(base_name, sizeof base_name, "%.*s", (int)base, n->name);
	k = snprintf(key, sizeof key, "%swriters/%s/%s", a->prefix, tenant, base_name);
	if (k < 0 || k >= (int)sizeof key || etcd_range(a->etcd, key, (size_t)k, false, &r))
		return false;
	gone = r.nkvs == 0;
	etcd_range_free(&r);
	if (!gone)
		return false;
	k = snprintf(key, sizeof key, "%snames/%s/%s", a->prefix, tenant, base_name);
	if (k < 0 || k >= (int)sizeof key || etcd_range(a->etcd, key, (size_t)k, false, &r))
		return false;
	if (r.nkvs == 0) {
		etcd_range_free(&r);
		log_debug("repair: kept %s/%s: no record (an unlink or a create that died while "
			  "this member was away, or a record deleted behind its owner's back)",
			  tenant, n->name);
		return false;
	}
	rc = cluster_layout_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &l);
	etcd_range_free(&r);
	if (rc || i >= l.k + l.r)
		return false; /* a plain name's record, or another shape: not judged */
	pc = &l.pieces[i];
	if (pc->made <= made || cluster_piece_name(base_name, pc->made, i, pname, sizeof pname))
		return false; /* this piece, or none newer in its place */
	if (!held_there(a, p, tenant, pc, pname)) {
		log_debug("repair: kept %s/%s: its record names %s on %s, which does not hold it",
			  tenant, n->name, pname, pc->server);
		return false;
	}
	return true;
}

/* Each member gives back, on its own, the pieces it holds that a newer
 * piece replaced: a repair rebuilt them elsewhere while it was away (and
 * came back with its memory). */
static void give_back(struct repair_agent *a)
{
	struct rmem_name_info names[32];
	struct present p = { 0 };
	uint64_t after = 0;
	unsigned pieces = 0, given = 0;
	char ep[128];
	int n = 0;

	if (!a->admin[0])
		return;
	/* A session for this pass only: it holds no slot between passes. */
	snprintf(ep, sizeof ep, "unix:%s", a->admin);
	if (rmem_connect(ep, NULL, &a->self)) {
		a->self = NULL;
		return;
	}
	if (present_read(a, &p))
		goto out;
	while (!a->stop && (n = rmem_names(a->self, after, names, 32)) > 0) {
		for (int x = 0; x < n; x++) {
			int rc;

			after = names[x].id;
			pieces += (names[x].flags & RMEM_NAME_PIECE) != 0;
			if (!leftover(a, &p, &names[x]))
				continue;
			rc = rmem_unlink_ns(a->self, names[x].tenant, names[x].name,
					    RMEM_UNLINK_REVOKE);
			if (rc == 0) {
				given++;
				atomic_fetch_add(&a->given_back, 1);
				log_notice("repair: gave back %s/%s: a newer piece replaced it",
					   names[x].tenant[0] ? names[x].tenant : TENANT_ANON,
					   names[x].name);
			}
		}
		if (n < 32)
			break;
	}
	log_debug("repair: looked at my %u piece%s: %u given back", pieces, pieces == 1 ? "" : "s",
		  given);
out:
	free(p.recs);
	rmem_close(a->self);
	a->self = NULL;
}

static void *agent_main(void *arg)
{
	struct repair_agent *a = arg;
	/* A scan each quarter grace (at most a second apart), so a region is
	 * repaired within 1.25 graces of its server's death once led. */
	int64_t period = a->grace_ms / 4 < 1000 ? a->grace_ms / 4 : 1000;
	int last = 0;

	if (period < 50)
		period = 50;
	/* The first look at this member's own pieces a grace after start: a
	 * piece it came back with is replaced a grace after its death at the
	 * earliest, and a pass at start would find nothing to give. */
	a->next_give_back = clock_mono_ms() + (a->grace_ms > 1000 ? a->grace_ms : 1000);
	while (nap(a, period)) {
		int rc;

		/* Every member, leading or not, once a grace (at least 1 s). */
		if (clock_mono_ms() >= a->next_give_back) {
			give_back(a);
			a->next_give_back = clock_mono_ms() + (a->grace_ms > 1000 ? a->grace_ms : 1000);
		}
		if (!lead(a)) {
			a->nseen = 0; /* a new lead counts every grace afresh */
			continue;
		}
		rc = scan(a);
		if (rc && rc != last)
			log_warn("repair: scanning the names: %s (%s)", strerror(-rc),
				 etcd_client_error(a->etcd));
		last = rc;
	}
	lead_end(a, "stopping");
	return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

/* The loop's copy of the agent's figures, for the metrics page. */
static void on_copy(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct repair_agent *a = srv->repair;
	struct counters_repair *c = &srv->counters.repair;

	(void)fd;
	(void)what;
	c->on = true;
	c->leading = atomic_load(&a->leading);
	c->pieces = atomic_load(&a->pieces);
	c->bytes = atomic_load(&a->bytes);
	c->failures = atomic_load(&a->failures);
	c->scans = atomic_load(&a->scans);
	c->given_back = atomic_load(&a->given_back);
	c->healthy = atomic_load(&a->healthy);
	c->degraded = atomic_load(&a->degraded);
	c->repairing = atomic_load(&a->repairing);
}

static void agent_free(struct repair_agent *a)
{
	if (!a)
		return;
	for (size_t t = 0; t <= CONFIG_MAX_TENANTS; t++)
		if (a->clients[t])
			rmem_close(a->clients[t]);
	if (a->self)
		rmem_close(a->self);
	if (a->timer)
		event_free(a->timer);
	etcd_client_free(a->etcd);
	etcd_client_free(a->keeper_etcd);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->seen);
	free(a);
}

/* cluster.etcd's "http://H:P,..." as librmem's "etcd://H:P,.../<cluster>"
 * ("https://H:P,...": "etcds://", with the TLS files); -EINVAL for a list
 * of both kinds, which librmem's URL cannot say. */
static int make_url(const struct config *cfg, char *out, size_t len)
{
	struct etcd_endpoints e;
	struct etcd_tls tls;
	char why[128], query[3 * 3 * ETCD_TLS_PATH_MAX + 64];
	size_t at;
	bool tls_on;
	int rc = etcd_endpoints_parse(cfg->cluster_etcd, &e, why, sizeof why);

	if (rc)
		return rc;
	config_etcd_tls(cfg, &tls);
	tls_on = !strncmp(e.url[0], "https://", 8);
	rc = etcd_url_tls_query(&tls, query, sizeof query);
	if (rc)
		return rc;
	at = (size_t)snprintf(out, len, "%s", tls_on ? "etcds://" : "etcd://");
	for (size_t i = 0; i < e.n; i++) {
		const char *scheme = tls_on ? "https://" : "http://";
		const char *hp = e.url[i];

		if (strncmp(hp, scheme, strlen(scheme)))
			return -EINVAL;
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", hp + strlen(scheme));
		if (at >= len)
			return -ENAMETOOLONG;
	}
	/* Its writer key under a lease as short as the member's: a repairer
	 * that dies holds the region from the next one that long at most. */
	at += (size_t)snprintf(out + at, len - at, "/%s?claim_ttl=%u", cfg->cluster_name,
			       cfg->cluster_lease_ms < 2000 ? 2 :
			       cfg->cluster_lease_ms > 60000 ? 60 : (cfg->cluster_lease_ms + 999) / 1000);
	if (at < len)
		at += (size_t)snprintf(out + at, len - at, "%s", query);
	return at < len ? 0 : -ENAMETOOLONG;
}

int repair_agent_start(struct server *srv)
{
	const struct config *cfg = &srv->cfg;
	struct timeval tv = { .tv_sec = 0, .tv_usec = 250 * 1000 };
	struct repair_agent *a;
	pthread_condattr_t ca;
	struct etcd_tls tls;
	char why[2 * ETCD_TLS_PATH_MAX + 256];
	int rc;

	if (!cfg->cluster_etcd[0] || !cfg->cluster_repair_grace_ms)
		return 0;
	if (!(a = calloc(1, sizeof(*a))) || !(a->seen = calloc(SEEN_MAX, sizeof(*a->seen)))) {
		free(a);
		return -ENOMEM;
	}
	pthread_mutex_init(&a->lock, NULL);
	/* nap() and the keeper wait until clock_mono_ts_after() deadlines: on
	 * the default CLOCK_REALTIME those lie decades in the past, and every
	 * wait returned at once (the keeper renewed its lease, the agent
	 * scanned or asked for the lead, hundreds of times a second). */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(a->endpoints, sizeof a->endpoints, "%s", cfg->cluster_etcd);
	snprintf(a->prefix, sizeof a->prefix, "/rmem/%s/", cfg->cluster_name);
	snprintf(a->id, sizeof a->id, "%s", member_id(srv));
	a->generation = member_generation(srv);
	snprintf(a->admin, sizeof a->admin, "%s", cfg->listen_admin);
	a->lease_ms = cfg->cluster_lease_ms;
	a->grace_ms = cfg->cluster_repair_grace_ms;
	for (size_t t = 0; t < cfg->ntenants; t++) {
		snprintf(a->tenants[t].name, sizeof a->tenants[t].name, "%s", cfg->tenants[t].name);
		snprintf(a->tenants[t].secret_file, sizeof a->tenants[t].secret_file, "%s",
			 cfg->tenants[t].secret_file);
	}
	a->ntenants = cfg->ntenants;
	rc = make_url(cfg, a->url, sizeof a->url);
	if (rc) {
		log_warn("repair: off: cluster.etcd mixes http:// and https:// endpoints, which "
			 "librmem's etcd:// or etcds:// URL cannot say");
		agent_free(a);
		return 0;
	}
	config_etcd_tls(cfg, &tls);
	rc = etcd_client_new(a->endpoints, &tls, a->lease_ms / 3 ? a->lease_ms / 3 : 1, &a->etcd,
			     why, sizeof why);
	if (!rc)
		rc = etcd_client_new(a->endpoints, &tls, a->lease_ms / 3 ? a->lease_ms / 3 : 1,
				     &a->keeper_etcd, why, sizeof why);
	if (rc) {
		agent_free(a);
		return rc;
	}
	srv->repair = a;
	a->timer = event_new(srv->base, -1, EV_PERSIST, on_copy, srv);
	if (!a->timer || event_add(a->timer, &tv) < 0)
		return -ENOMEM; /* repair_agent_stop frees it */
	rc = pthread_create(&a->thread, NULL, agent_main, a);
	if (rc)
		return -rc;
	a->started = true;
	log_info("repair: agent started (grace %u ms, through %s)", a->grace_ms, a->url);
	return 0;
}

void repair_agent_stop(struct server *srv)
{
	struct repair_agent *a = srv->repair;

	if (!a)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->lock);
		a->stop = true;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
		pthread_join(a->thread, NULL);
	}
	agent_free(a);
	srv->repair = NULL;
	srv->counters.repair.on = false;
}
