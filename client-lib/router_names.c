/*
 * router_names.c - named regions across a cluster: the name lives in etcd
 * (/rmem/<cluster>/names/<tenant>/<name>, common/cluster_name.h), the
 * region on one server, under the same name in the tenant's namespace there
 * (so every opener gets a handle and key of its own, as on one server).
 * Anonymous clients' tenant is CLUSTER_ANON_TENANT ("@anonymous").
 *
 * rmem_create, in this order, so that a failed step leaks neither a claim
 * nor a region, and a name is won once (docs/architecture.md, "Invariant:
 * a name is won once"):
 *  1. a lease of claim_ttl_s (CLUSTER_CLAIM_TTL_S, or the URL's
 *     "?claim_ttl=S") is granted, and the name claimed with a
 *     create-if-absent txn under it ({server, region 0}: being made); a
 *     name that exists is -EEXIST, and of two racing creators exactly one
 *     wins (etcd orders the txns).  The txn's revision is the claim's;
 *     a thread renews the lease every third of its TTL until step 3 is
 *     done, so a slow placement does not lose it;
 *  2. the region is created on a server placed as rmem_alloc places (the
 *     next server on -ENOMEM, on a server lost, and on -EEXIST: a name left
 *     there without a record by a creator that died between steps 2 and 3);
 *     if no server takes it, the lease is revoked, which deletes the claim;
 *  3. the record is written with the server and the handle's region id,
 *     without a lease, so it stays, by a txn that puts it only if the key
 *     is still the claim (its mod_revision unchanged).  A creator that was
 *     stopped past its claim's lease (a stalled process: no renewal runs)
 *     finds the key gone or another creator's: it unlinks its region on its
 *     server and fails, -EEXIST when another holds the name now, else
 *     -ECANCELED.  Without the compare, its record would overwrite the
 *     winner's: two creators told 0, one region orphaned.  If the write
 *     fails otherwise, the region is unlinked and the lease revoked too.
 * A creator that dies during 1 or 2 leaves a claim that its lease ends
 * within claim_ttl_s; one that dies between 2 and 3 leaves a named region
 * on the server without a record (rmemctl lists and unlinks it).
 *
 * rmem_open reads the record and opens the name on its server.  A record
 * still being made is -ENOENT.  A record whose generation is not its
 * server's now (the server started again without its memory) is stale:
 * it is deleted (same compare as below) and the call is -ENOENT, so a
 * name made on the new server by anyone else is never taken for it.  The server's own table is the truth: when
 * the server answers -ENOENT (the region was unlinked there, or its memory
 * was lost), the record is deleted, but only if nobody rewrote it since it
 * was read (a compare on its mod_revision), and the call is -ENOENT.  A
 * server that is gone is -EHOSTDOWN and the record stays: the server may
 * come back with its state.  A redundant region's record is never dropped
 * by an open: -EHOSTDOWN while too many pieces' servers are out, -ENODATA
 * once their live servers lost more pieces than parity covers.
 *
 * rmem_unlink unlinks on the server first, then deletes the record (same
 * compare): a failure in between leaves a record whose region is gone,
 * which the next open or unlink cleans up.  A server that is gone is
 * -EHOSTDOWN, and nothing changes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router.h"
#include "router_int.h"
#include "clock.h"
#include "cluster_layout.h"
#include "cluster_name.h"
#include "etcd_client.h"
#include "proto.h"
#include "single.h"

#define KEY_MAX (16 + CLUSTER_NAME_MAX + 32 + RMEM_NAME_MAX + 1)

/* The name's key: 0 and its length, or the error a bad name gets on one
 * server (-EINVAL, -ENAMETOOLONG). */
static int name_key(const struct router *cl, const char *name, char *key, size_t *len)
{
	int k = proto_name_len(name);

	if (k < 0)
		return k;
	k = snprintf(key, KEY_MAX, "/rmem/%s/names/%s/%s", cl->name,
		     cl->tenant ? cl->tenant : CLUSTER_ANON_TENANT, name);
	if (k < 0 || k >= KEY_MAX)
		return -ENAMETOOLONG;
	*len = (size_t)k;
	return 0;
}

/* The record of key: 0 with it and its mod_revision, -ENOENT, or etcd's
 * error.  A redundant region's record (cluster_layout.h) goes into *lay
 * with *is_lay set.  The revision it was read at into *at, when not NULL. */
static int read_name_at(struct router *cl, const char *key, size_t len, struct cluster_name *rec,
			int64_t *mod, struct cluster_layout *lay, bool *is_lay, int64_t *at)
{
	struct etcd_range r;
	int rc;

	pthread_mutex_lock(&cl->names_mu);
	rc = etcd_range(cl->names_etcd, key, len, false, &r);
	pthread_mutex_unlock(&cl->names_mu);
	if (rc < 0)
		return rc;
	*is_lay = false;
	lay->k = 0;
	if (r.nkvs != 1)
		rc = -ENOENT;
	else if (cluster_name_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, rec) < 0 &&
		 cluster_layout_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, lay) < 0)
		rc = -EPROTO;
	else
		*is_lay = lay->k != 0;
	if (rc == 0)
		*mod = r.kvs[0].mod_revision;
	if (at)
		*at = r.header.revision;
	etcd_range_free(&r);
	return rc;
}

static int read_name(struct router *cl, const char *key, size_t len, struct cluster_name *rec,
		     int64_t *mod, struct cluster_layout *lay, bool *is_lay)
{
	return read_name_at(cl, key, len, rec, mod, lay, is_lay, NULL);
}

/* Deletes key if it is still the record read at mod (best effort). */
static void drop_stale(struct router *cl, const char *key, size_t len, int64_t mod)
{
	bool deleted;

	pthread_mutex_lock(&cl->names_mu);
	etcd_delete_if(cl->names_etcd, key, len, mod, &deleted);
	pthread_mutex_unlock(&cl->names_mu);
}

static void revoke_lease(struct router *cl, int64_t lease)
{
	pthread_mutex_lock(&cl->names_mu);
	etcd_lease_revoke(cl->names_etcd, lease);
	pthread_mutex_unlock(&cl->names_mu);
}

/* Step 1: 0, the lease that holds the claim and the claim's revision;
 * -EEXIST, or etcd's error. */
static int claim_name(struct router *cl, const char *key, size_t len, uint64_t size,
		 int64_t *lease, int64_t *rev)
{
	struct cluster_name rec = { .server = "pending", .size = size };
	struct etcd_kv existing;
	int64_t ttl;
	bool created = false;
	char *value;
	int rc = cluster_name_encode(&rec, &value);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&cl->names_mu);
	rc = etcd_lease_grant(cl->names_etcd, cl->claim_ttl_s, lease, &ttl);
	/* The winner's key may vanish between our compare and our read of
	 * it (unlinked at once): then try once more. */
	for (int i = 0; rc == 0 && i < 2; i++) {
		rc = etcd_create_rev(cl->names_etcd, key, len, value, strlen(value), *lease,
				     &created, &existing, rev);
		if (rc == 0 && !created && existing.key)
			rc = -EEXIST;
		etcd_kv_free(&existing);
		if (created)
			break;
	}
	if (rc == 0 && !created)
		rc = -EEXIST;
	if (rc < 0 && *lease)
		etcd_lease_revoke(cl->names_etcd, *lease);
	pthread_mutex_unlock(&cl->names_mu);
	free(value);
	return rc;
}

/* The thread that renews a claim's lease while its creator works (or its
 * writer holds it).  ok_ms is when the last renewal that etcd confirmed
 * was sent: the lease lives at least claim_ttl_s past it, and no longer
 * can be assumed (lost: etcd said the lease is gone).  Under mu. */
struct claim_keeper {
	struct router *cl;
	int64_t lease;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop, started;
	int64_t ok_ms;
	bool lost;
};

static void *keep_claim(void *arg)
{
	struct claim_keeper *k = arg;
	int64_t period_ms = (int64_t)k->cl->claim_ttl_s * 1000 / 3;
	struct timespec ts;

	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		ts = clock_mono_ts_after(period_ms);
		if (pthread_cond_timedwait(&k->cond, &k->mu, &ts) != ETIMEDOUT || k->stop)
			continue;
		pthread_mutex_unlock(&k->mu);
		{
			int64_t ttl, sent = clock_mono_ms();
			int rc;

			/* A failure needs nothing more here: step 3's compare
			 * finds a claim that was lost, and a writer's next
			 * write finds ok_ms too old. */
			pthread_mutex_lock(&k->cl->names_mu);
			rc = etcd_lease_keepalive(k->cl->names_etcd, k->lease, &ttl);
			pthread_mutex_unlock(&k->cl->names_mu);
			pthread_mutex_lock(&k->mu);
			if (rc == 0 && ttl > 0)
				k->ok_ms = sent;
			else if (rc == 0)
				k->lost = true; /* the lease ended: so did the key */
			pthread_mutex_unlock(&k->mu);
		}
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

/* Without a thread (none to be had) the claim still holds for its TTL,
 * and step 3's compare stays the guard: so this cannot fail.  granted_ms:
 * when the lease's grant was sent. */
static void keeper_start(struct claim_keeper *k, struct router *cl, int64_t lease,
			 int64_t granted_ms)
{
	pthread_condattr_t ca;

	memset(k, 0, sizeof(*k));
	k->cl = cl;
	k->lease = lease;
	k->ok_ms = granted_ms;
	pthread_mutex_init(&k->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cond, &ca);
	pthread_condattr_destroy(&ca);
	k->started = pthread_create(&k->thread, NULL, keep_claim, k) == 0;
}

static void keeper_stop(struct claim_keeper *k)
{
	if (k->started) {
		pthread_mutex_lock(&k->mu);
		k->stop = true;
		pthread_cond_signal(&k->cond);
		pthread_mutex_unlock(&k->mu);
		pthread_join(k->thread, NULL);
	}
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->mu);
}

/* A redundant region's writer key, held (writer_take below): the key, the
 * revision that created it (its create_revision while it is ours), the
 * lease it is under and the keeper that renews it. */
struct writer_hold {
	struct claim_keeper keeper;
	int64_t lease, rev;
	char key[KEY_MAX];
	size_t key_len;
};

/* Whether g's key is still the one it made (a txn guarded by it failed:
 * because of it, or of the record). */
static bool writer_key_ours(struct router *cl, const struct writer_hold *g)
{
	struct etcd_range r = { 0 };
	bool ours;

	pthread_mutex_lock(&cl->names_mu);
	ours = etcd_range(cl->names_etcd, g->key, g->key_len, false, &r) != 0 ||
	       (r.nkvs == 1 && r.kvs[0].create_revision == g->rev);
	pthread_mutex_unlock(&cl->names_mu);
	etcd_range_free(&r);
	return ours; /* etcd out of reach: the record's compare decides */
}

/* Step 3: the record over the claim made at rev: 0, -EEXIST (another
 * creator holds the name now), -ECANCELED (the claim is gone), or etcd's
 * error.  With g (a writer's change of a redundant record), only while g's
 * writer key is still its own: else -EACCES, whatever the writer's clock
 * said (docs/architecture.md, "Invariant: a writer that lost its key
 * writes nothing more"). */
static int write_value(struct router *cl, const char *key, size_t len, char *value,
		       int64_t rev, const struct writer_hold *g)
{
	struct etcd_kv now;
	bool put = false;
	int err;

	pthread_mutex_lock(&cl->names_mu);
	if (g)
		err = etcd_put_if_guarded(cl->names_etcd, key, len, value, strlen(value), 0, rev,
					  g->key, g->key_len, g->rev, &put, &now);
	else
		err = etcd_put_if(cl->names_etcd, key, len, value, strlen(value), 0, rev, &put,
				  &now);
	pthread_mutex_unlock(&cl->names_mu);
	if (!err && !put && g && !writer_key_ours(cl, g)) {
		etcd_kv_free(&now);
		return -EACCES;
	}
	/* A txn applied by a member whose answer was lost, then tried again on
	 * the next: the key is our own record (no other creator's can match:
	 * it names our server and region). */
	if (!err && !put && now.key && now.lease == 0 && now.value_len == strlen(value) &&
	    !memcmp(now.value, value, now.value_len))
		put = true;
	if (!err && !put)
		err = now.key ? -EEXIST : -ECANCELED;
	etcd_kv_free(&now);
	return err;
}

static int write_record(struct router *cl, const char *key, size_t len,
			const struct cluster_name *rec, int64_t rev)
{
	char *value = NULL;
	int err = cluster_name_encode(rec, &value);

	if (!err)
		err = write_value(cl, key, len, value, rev, NULL);
	free(value);
	return err;
}

/* Pieces (bits of mask) of name's layout are out for a writer, which
 * wrote without them: stale in the record, layout_gen + 1, by a txn over
 * the record as read (tried again when it changed meanwhile).  0, -ENOENT
 * (no longer a redundant record), or etcd's error. */
static int names_mark_out(struct router *cl, const char *name, void *hold, uint32_t mask)
{
	char key[KEY_MAX];
	size_t len;
	int err = name_key(cl, name, key, &len);

	for (int tries = 0; !err && tries < 3; tries++) {
		struct cluster_layout lay;
		struct cluster_name rec;
		bool is_lay, changed = false;
		char *value = NULL;
		int64_t mod;

		err = read_name(cl, key, len, &rec, &mod, &lay, &is_lay);
		if (!err && !is_lay)
			err = -ENOENT;
		if (err)
			break;
		for (unsigned i = 0; i < lay.k + lay.r; i++)
			if ((mask & (1u << i)) && lay.pieces[i].state == PIECE_HEALTHY) {
				lay.pieces[i].state = PIECE_STALE;
				changed = true;
			}
		if (!changed)
			return 0;
		lay.layout_gen++;
		err = cluster_layout_encode(&lay, &value);
		if (!err)
			err = write_value(cl, key, len, value, mod, hold);
		free(value);
		if (err == -EEXIST)
			err = 0; /* rewritten since we read it: read again */
		else
			return err;
	}
	return err ? err : -EAGAIN;
}

/* The layout record of name as it is now: 0, -ENOENT (none, or not a
 * redundant one), or etcd's error. */
static int names_read_layout(struct router *cl, const char *name, struct cluster_layout *lay)
{
	struct cluster_name rec;
	char key[KEY_MAX];
	bool is_lay = false;
	int64_t mod;
	size_t len;
	int err = name_key(cl, name, key, &len);

	if (!err)
		err = read_name(cl, key, len, &rec, &mod, lay, &is_lay);
	return !err && !is_lay ? -ENOENT : err;
}

static bool same_piece(const struct cluster_piece *a, const struct cluster_piece *b)
{
	return !strcmp(a->server, b->server) && a->region == b->region &&
	       a->generation == b->generation && a->made == b->made;
}

/* Repair's commit: piece i, still *old in the record, becomes *new,
 * healthy, by a txn over the record as read (read again when it changed
 * meanwhile: a writer marking other pieces out is no conflict).  0,
 * -ESTALE (piece i is no longer *old), -ENOENT, or etcd's error. */
static int names_swap(struct router *cl, const char *name, void *hold, unsigned i,
		      const struct cluster_piece *old, const struct cluster_piece *new)
{
	char key[KEY_MAX];
	size_t len;
	int err = name_key(cl, name, key, &len);

	for (int tries = 0; !err && tries < 5; tries++) {
		struct cluster_layout lay;
		struct cluster_name rec;
		bool is_lay;
		char *value = NULL;
		int64_t mod;

		err = read_name(cl, key, len, &rec, &mod, &lay, &is_lay);
		if (!err && !is_lay)
			err = -ENOENT;
		if (!err && (i >= lay.k + lay.r || !same_piece(&lay.pieces[i], old)))
			err = -ESTALE;
		if (err)
			break;
		lay.pieces[i] = *new;
		lay.pieces[i].state = PIECE_HEALTHY;
		lay.layout_gen = (lay.layout_gen > new->made ? lay.layout_gen : new->made) + 1;
		err = cluster_layout_encode(&lay, &value);
		if (!err)
			err = write_value(cl, key, len, value, mod, hold);
		free(value);
		if (err != -EEXIST)
			return err;
		err = 0; /* rewritten since we read it: read again */
	}
	return err ? err : -EAGAIN;
}


/* One writer per redundant region (docs/architecture.md, "Redundancy",
 * writer rule): /rmem/<cluster>/writers/<tenant>/<name>, made if absent
 * under a lease of claim_ttl_s that a keeper renews while the handle
 * lives; rmem_free (or rmem_close) revokes it.  A writer that dies holds
 * it until the lease ends.  One stopped past the TTL (SIGSTOP, a paused
 * VM) has lost it without knowing: names_writer_held says so from its
 * own clock, and the servers fence it once another writer opens (the
 * pieces' PROTO_ACCESS_EXCL). */

static void writer_release(struct router *cl, void *arg)
{
	struct writer_hold *h = arg;

	keeper_stop(&h->keeper);
	revoke_lease(cl, h->lease);
	free(h);
}

/* 0 and the hold, -EBUSY (another writer holds it), or etcd's error. */
static int writer_take(struct router *cl, const char *name, struct writer_hold **out)
{
	struct writer_hold *h;
	struct etcd_kv existing;
	char key[KEY_MAX];
	int64_t ttl, rev, sent;
	bool created = false;
	int k, rc;

	*out = NULL;
	k = snprintf(key, sizeof key, "/rmem/%s/writers/%s/%s", cl->name,
		     cl->tenant ? cl->tenant : CLUSTER_ANON_TENANT, name);
	if (k < 0 || k >= (int)sizeof key)
		return -ENAMETOOLONG;
	if (!(h = calloc(1, sizeof(*h))))
		return -ENOMEM;
	memcpy(h->key, key, (size_t)k + 1);
	h->key_len = (size_t)k;
	pthread_mutex_lock(&cl->names_mu);
	sent = clock_mono_ms();
	rc = etcd_lease_grant(cl->names_etcd, cl->claim_ttl_s, &h->lease, &ttl);
	if (rc == 0)
		rc = etcd_create_rev(cl->names_etcd, key, (size_t)k, "1", 1, h->lease, &created,
				     &existing, &rev);
	if (rc == 0) {
		etcd_kv_free(&existing);
		if (!created)
			rc = -EBUSY;
	}
	if (rc < 0 && h->lease)
		etcd_lease_revoke(cl->names_etcd, h->lease);
	pthread_mutex_unlock(&cl->names_mu);
	if (rc < 0) {
		free(h);
		return rc;
	}
	h->rev = rev; /* the txn's revision: the key's create_revision */
	keeper_start(&h->keeper, cl, h->lease, sent);
	*out = h;
	return 0;
}

/* Whether the writer key is surely still ours: etcd confirmed a renewal
 * sent less than the TTL ago (monotonic clock) and never said the lease
 * ended.  Past that it may be another's: the writer must not write. */
static bool names_writer_held(struct router *cl, void *hold)
{
	struct writer_hold *h = hold;
	bool held;

	if (!h)
		return false;
	pthread_mutex_lock(&h->keeper.mu);
	held = !h->keeper.lost &&
	       clock_mono_ms() - h->keeper.ok_ms < (int64_t)cl->claim_ttl_s * 1000;
	pthread_mutex_unlock(&h->keeper.mu);
	return held;
}

/* /rmem/<cluster>/repairing/<tenant>/<name> while a repair of name runs
 * (rmemctl cluster redundant's "repairing"), under the writer key's lease:
 * a repairer that dies takes it along. */
static void names_repairing(struct router *cl, const char *name, void *hold, bool on)
{
	struct writer_hold *h = hold;
	char key[KEY_MAX];
	int64_t deleted;
	int k = snprintf(key, sizeof key, "/rmem/%s/repairing/%s/%s", cl->name,
			 cl->tenant ? cl->tenant : CLUSTER_ANON_TENANT, name);

	if (!h || k < 0 || k >= (int)sizeof key)
		return;
	pthread_mutex_lock(&cl->names_mu);
	if (on)
		(void)etcd_put(cl->names_etcd, key, (size_t)k, "1", 1, h->lease);
	else
		(void)etcd_delete(cl->names_etcd, key, (size_t)k, false, &deleted);
	pthread_mutex_unlock(&cl->names_mu);
}

static const struct redund_record_ops record_ops = {
	.mark = names_mark_out,
	.read = names_read_layout,
	.swap = names_swap,
	.repairing = names_repairing,
	.held = names_writer_held,
};

/* Steps 2 and 3 for a redundant region: its K+R pieces, then its layout
 * as the record, over the claim made at rev. */
static int create_redundant(struct router *cl, const char *name, const char *key, size_t len,
			    uint64_t size, int64_t rev, struct rmem_region *out)
{
	struct cluster_layout lay;
	struct writer_hold *hold;
	struct rset *rs;
	char *value = NULL;
	/* The writer key before the record: nobody can open the name for
	 * writing before the creator holds it. */
	int err = writer_take(cl, name, &hold);

	if (err)
		return err;
	err = redund_create(cl, name, size, &lay, &rs);
	if (err) {
		writer_release(cl, hold);
		return err;
	}
	err = cluster_layout_encode(&lay, &value);
	if (!err)
		err = write_value(cl, key, len, value, rev, NULL);
	free(value);
	if (err) {
		redund_create_undo(cl, name, rs);
		writer_release(cl, hold);
		return err;
	}
	redund_named(rs, name, &record_ops, writer_release, hold);
	return redund_enter(cl, rs, RMEM_READ | RMEM_WRITE, out);
}

/* Step 2: the region on some server; 0 with *slot, or the last answer. */
static int place(struct router *cl, const char *name, uint64_t size, uint32_t flags,
		 struct rmem_region *out, uint32_t *slot)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	int err = -EHOSTDOWN;

	while (members_pick(cl, size, tried, slot) == 0) {
		rmem_client *c;

		tried[*slot / 64] |= 1ull << (*slot % 64);
		err = members_client(cl, *slot, &c);
		if (!err)
			err = members_err(cl, *slot, single_create(c, name, size, flags, out));
		members_placed(cl, *slot, size, err);
		if (!err)
			return 0;
		if (!members_refused_room(err) && err != -EHOSTDOWN && err != -EEXIST)
			return err;
	}
	return err == -EEXIST ? -ENOMEM : err;
}

int router_create(struct router *cl, const char *name, uint64_t size, uint32_t flags,
		   struct rmem_region *out)
{
	struct cluster_name rec = { .size = size };
	struct claim_keeper keeper;
	char key[KEY_MAX];
	size_t len;
	int64_t lease = 0, rev = 0;
	uint32_t slot;
	rmem_client *c;
	int64_t granted_ms = clock_mono_ms(); /* before the grant is sent */
	int err;

	if (!out || size == 0 || flags != 0)
		return -EINVAL;
	err = name_key(cl, name, key, &len);
	if (!err)
		err = claim_name(cl, key, len, size, &lease, &rev);
	if (err)
		return err;
	keeper_start(&keeper, cl, lease, granted_ms);
	if (cl->red_k) {
		err = create_redundant(cl, name, key, len, size, rev, out);
		if (err)
			goto drop_claim;
		keeper_stop(&keeper);
		return 0;
	}
	err = place(cl, name, size, flags, out, &slot);
	if (err)
		goto drop_claim;
	pthread_mutex_lock(&cl->mu);
	memcpy(rec.server, cl->members[slot].rec.id, sizeof(rec.server));
	rec.generation = cl->members[slot].rec.generation;
	pthread_mutex_unlock(&cl->mu);
	rec.region = out->id;
	err = write_record(cl, key, len, &rec, rev);
	if (err) {
		/* Ours alone: the name on that server was made by this call. */
		if (members_client(cl, slot, &c) == 0 &&
		    single_unlink2(c, name, RMEM_UNLINK_REVOKE) == 0)
			members_placed(cl, slot, size, 1);
		goto drop_claim;
	}
	keeper_stop(&keeper);
	members_tag(out, slot);
	return 0;
drop_claim:
	keeper_stop(&keeper);
	revoke_lease(cl, lease);
	return err;
}

/* Where a made name lives: its key (and the revision it was read at) and
 * its server's slot and client. */
struct located {
	char key[KEY_MAX];
	size_t len;
	int64_t mod, rev;           /* the record's mod_revision; read at rev */
	bool is_lay;                /* a redundant region: lay, no slot */
	struct cluster_layout lay;
	uint32_t slot;
	rmem_client *c;
};

/* Whether slot's server is now another generation than gen: it started
 * again without its memory, so whatever it holds under the name now is
 * not the region of the record. */
static bool other_generation(struct router *cl, uint32_t slot, uint64_t gen)
{
	bool other;

	pthread_mutex_lock(&cl->mu);
	other = cl->members[slot].present && cl->members[slot].rec.generation != gen;
	pthread_mutex_unlock(&cl->mu);
	return other;
}

/* 0 and *at; -ENOENT (no such name, or still being made), -ESTALE (the
 * record names a generation of its server that is gone: the caller drops
 * it), -EHOSTDOWN (its server is not in the set now), or what reading etcd
 * said. */
static int locate(struct router *cl, const char *name, struct located *at)
{
	struct cluster_name rec;
	int err;

	at->mod = 0;
	err = name_key(cl, name, at->key, &at->len);
	if (!err)
		err = read_name_at(cl, at->key, at->len, &rec, &at->mod, &at->lay, &at->is_lay,
				   &at->rev);
	if (!err && at->is_lay)
		return 0;
	if (!err && rec.region == 0)
		err = -ENOENT; /* still being made */
	if (!err && members_find(cl, rec.server, &at->slot) < 0)
		err = -EHOSTDOWN; /* never seen: not in the set now */
	if (!err && other_generation(cl, at->slot, rec.generation))
		err = -ESTALE;
	if (!err)
		err = members_client(cl, at->slot, &at->c);
	return err;
}

int router_open(struct router *cl, const char *name, uint32_t access, struct rmem_region *out)
{
	struct located at;
	int err;

	if (!out || access == 0 || (access & ~(RMEM_READ | RMEM_WRITE)))
		return -EINVAL;
	err = locate(cl, name, &at);
	if (!err && at.is_lay) {
		struct writer_hold *hold = NULL;
		struct rset *rs;

		err = access & RMEM_WRITE ? writer_take(cl, name, &hold) : 0;
		if (!err)
			err = redund_open(cl, name, &at.lay, access, &rs);
		if (!err) {
			redund_named(rs, name, &record_ops, hold ? writer_release : NULL, hold);
			/* A reader is told of the writer's marks by the names
			 * watch; the writer makes them (one at a time). */
			if (!hold)
				redund_watched(cl, rs, at.rev);
			return redund_enter(cl, rs, access, out);
		}
		if (hold)
			writer_release(cl, hold);
		/* A redundant region's record is never dropped here: pieces
		 * whose servers are out are unavailable (-EHOSTDOWN), and
		 * pieces lost beyond parity are -ENODATA, for rmemctl to show
		 * and rmem_unlink to remove (issue 30 item 5). */
	} else if (!err) {
		err = members_err(cl, at.slot, single_open(at.c, name, access, out));
		if (err == -ENOENT)
			err = -ESTALE;
	}
	/* Its server does not know it, or is a new generation (what it has
	 * under the name now is another region): the record is stale. */
	if (err == -ESTALE) {
		drop_stale(cl, at.key, at.len, at.mod);
		err = -ENOENT;
	}
	if (!err && !at.is_lay)
		members_tag(out, at.slot);
	return err;
}

int router_unlink(struct router *cl, const char *name, uint32_t flags)
{
	struct located at;
	int err;

	if (flags & ~RMEM_UNLINK_REVOKE)
		return -EINVAL;
	err = locate(cl, name, &at);
	if (!err && at.is_lay) {
		err = redund_unlink(cl, name, &at.lay, flags);
	} else if (!err) {
		err = members_err(cl, at.slot, single_unlink2(at.c, name, flags));
		if (err == -ENOENT)
			err = -ESTALE;
	}
	/* Gone on its server, now or before, or the server is a new
	 * generation (what it holds under the name is not ours to unlink):
	 * the record goes too. */
	if (err == 0 || err == -ESTALE) {
		drop_stale(cl, at.key, at.len, at.mod);
		if (err == -ESTALE)
			err = -ENOENT;
	}
	return err;
}

/* ---- rmem_names: the cluster's names, from etcd ---------------------------------------- */

static int by_revision(const void *a, const void *b)
{
	const struct etcd_kv *x = a, *y = b;

	return (x->create_revision > y->create_revision) - (x->create_revision < y->create_revision);
}

/* One record as rmem_names gives it: false when the key or value is not one
 * (or the name is still being made). */
static bool name_info(const struct etcd_kv *kv, size_t plen, struct rmem_name_info *out)
{
	const char *k = (const char *)kv->key + plen, *slash;
	size_t rest = kv->key_len - plen, tlen;
	struct cluster_name rec;
	struct cluster_layout lay;

	slash = memchr(k, '/', rest);
	if (slash && cluster_layout_decode((const char *)kv->value, kv->value_len, &lay) == 0) {
		rec.size = lay.size; /* a redundant region */
	} else if (!slash ||
		   cluster_name_decode((const char *)kv->value, kv->value_len, &rec) < 0 ||
		   rec.region == 0) {
		return false;
	}
	tlen = (size_t)(slash - k);
	if (tlen >= sizeof(out->tenant) || rest - tlen - 1 == 0 ||
	    rest - tlen - 1 > RMEM_NAME_MAX)
		return false;
	memset(out, 0, sizeof(*out));
	out->id = (uint64_t)kv->create_revision;
	out->length = rec.size;
	if (tlen != strlen(CLUSTER_ANON_TENANT) || memcmp(k, CLUSTER_ANON_TENANT, tlen))
		memcpy(out->tenant, k, tlen);
	memcpy(out->name, slash + 1, rest - tlen - 1);
	return true;
}

int router_names(struct router *cl, uint64_t after, struct rmem_name_info *out, size_t max)
{
	char prefix[KEY_MAX];
	struct etcd_range r;
	size_t n = 0;
	int plen, rc;

	if (!out && max > 0)
		return -EINVAL;
	plen = snprintf(prefix, sizeof prefix, "/rmem/%s/names/", cl->name);
	pthread_mutex_lock(&cl->names_mu);
	rc = etcd_range(cl->names_etcd, prefix, (size_t)plen, true, &r);
	pthread_mutex_unlock(&cl->names_mu);
	if (rc < 0)
		return rc;
	if (r.nkvs)
		qsort(r.kvs, r.nkvs, sizeof(*r.kvs), by_revision);
	for (size_t i = 0; i < r.nkvs && n < max; i++)
		if ((uint64_t)r.kvs[i].create_revision > after &&
		    name_info(&r.kvs[i], (size_t)plen, &out[n]))
			n++;
	etcd_range_free(&r);
	return (int)n;
}
