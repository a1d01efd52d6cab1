/*
 * router_redund_make.c - a redundant region's pieces made, opened and
 * given back (docs/architecture.md, "Redundancy"): K+R plain regions on
 * K+R distinct servers for rmem_alloc; for a named one, K+R named regions
 * "<name>~<made>.<i>" whose layout is the name's record in etcd
 * (cluster_layout.h), which router_names.c reads and writes; the table of
 * redundant regions that handles name.  Reads and writes are
 * router_redund.c's.
 *
 * Calls downward only: router_members.c, the single-server calls, stripe.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "router_int.h"
#include "router_redund.h"
#include "clock.h"
#include "cluster_layout.h"
#include "single.h"
#include "stripe.h"

/* ---- alloc and free ------------------------------------------------------------------ */

static void pieces_free(struct router *cl, struct rset *rs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		rmem_client *c;

		/* A piece whose server is gone went with it; one never
		 * opened has no handle. */
		if (rs->piece[i].reserved[0] >> 32 == CLUSTER_REGION_TAG &&
		    members_client(cl, rs->slot[i], &c) == 0 &&
		    members_err(cl, rs->slot[i], single_free(c, &rs->piece[i])) == 0 && !rs->named)
			members_placed(cl, rs->slot[i], rs->piece_len, 1);
	}
}

int redund_piece_name(const char *name, uint64_t made, unsigned i, char *out)
{
	return cluster_piece_name(name, made, i, out, RMEM_NAME_MAX + 1);
}

/* A named piece, marked as one: its server's agent may give it back one
 * day (daemon/repair_agent.c), and never gives back a tenant's region that
 * only bears a piece's name.  Unmarked on an rmemd older than the mark
 * (-EINVAL), which judges by the name alone. */
static int piece_create(rmem_client *c, const char *pname, uint64_t len, struct rmem_region *out)
{
	int err = single_create_piece(c, pname, len, out);

	return err == -EINVAL ? single_create(c, pname, len, 0, out) : err;
}

int redund_place(struct router *cl, struct rset *rs, uint64_t *tried, const char *pname,
		 struct rmem_region *piece, uint32_t *slotp)
{
	int last = -ENOSPC;
	uint32_t slot;

	while (members_pick(cl, rs->piece_len, tried, &slot) == 0) {
		rmem_client *c;
		int err;

		tried[slot / 64] |= 1ull << (slot % 64);
		err = members_client(cl, slot, &c);
		if (!err)
			err = members_err(cl, slot, pname ? piece_create(c, pname, rs->piece_len, piece) :
							    single_alloc(c, rs->piece_len, 0, piece));
		members_placed(cl, slot, rs->piece_len, err);
		if (!err) {
			members_tag(piece, slot);
			*slotp = slot;
			return 0;
		}
		/* A name left there (-EEXIST: a repair that died before its
		 * record) is that server's to give back: the next one. */
		if (!members_refused_room(err) && err != -EHOSTDOWN && err != -EEXIST)
			return err;
		if (err == -EDQUOT)
			last = err;
	}
	/* Too few servers (present, or able to hold a piece): -ENOSPC, not
	 * -ENOMEM, since memory need not be what is short. */
	return last;
}

/* Piece i on a server holding none of the others (tried has them). */
static int piece_place(struct router *cl, struct rset *rs, unsigned i, uint64_t *tried,
		       const char *pname)
{
	int err = redund_place(cl, rs, tried, pname, &rs->piece[i], &rs->slot[i]);

	if (!err)
		rs->state[i] = PIECE_IN;
	return err;
}

/* Enters rs in the table: 0 and its index, or -ENOMEM. */
static int rset_enter(struct router *cl, struct rset *rs, size_t *idx)
{
	size_t i;
	int err = 0;

	pthread_mutex_lock(&cl->mu);
	for (i = 0; i < cl->nrsets && cl->rsets[i]; i++)
		;
	if (i == cl->nrsets) {
		size_t n = cl->nrsets ? cl->nrsets * 2 : 16;
		struct rset **t = n <= UINT32_MAX ? realloc(cl->rsets, n * sizeof(*t)) : NULL;

		if (!t) {
			err = -ENOMEM;
		} else {
			memset(t + cl->nrsets, 0, (n - cl->nrsets) * sizeof(*t));
			cl->rsets = t;
			cl->nrsets = n;
		}
	}
	if (!err) {
		cl->rsets[i] = rs;
		rs->id = ++cl->rset_ids;
		*idx = i;
	}
	pthread_mutex_unlock(&cl->mu);
	return err;
}

static void handle_of(const struct rset *rs, size_t idx, uint32_t flags, struct rmem_region *out)
{
	memset(out, 0, sizeof(*out));
	out->id = rs->id;
	out->length = rs->length;
	out->flags = flags;
	out->reserved[0] = (uint64_t)REDUND_REGION_TAG << 32 | idx;
	out->reserved[1] = rs->id;
}

int redund_alloc(struct router *cl, uint64_t size, struct rmem_region *out)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	struct rset *rs = calloc(1, sizeof(*rs));
	unsigned placed = 0;
	size_t idx;
	int err = rs ? 0 : -ENOMEM;

	if (!err)
		err = stripe_code_init(&rs->code, cl->red_k, cl->red_r);
	if (!err && members_present(cl) < cl->red_k + cl->red_r)
		err = -ENOSPC;
	if (!err) {
		rs->n = cl->red_k + cl->red_r;
		rs->length = size;
		rs->piece_len = stripe_piece_len(&rs->code, size);
		pthread_mutex_init(&rs->wmu, NULL);
	}
	while (!err && placed < rs->n) {
		err = piece_place(cl, rs, placed, tried, NULL);
		if (!err)
			placed++;
	}
	if (!err)
		err = rset_enter(cl, rs, &idx);
	if (err) {
		if (rs && rs->n) {
			pieces_free(cl, rs, placed);
			pthread_mutex_destroy(&rs->wmu);
		}
		free(rs);
		return err;
	}
	handle_of(rs, idx, 0, out);
	return 0;
}

/* A freed rset, once no call holds it. */
static void rset_retired(struct router *cl, struct retiree *self)
{
	struct rset *rs = (struct rset *)((char *)self - offsetof(struct rset, retiree));

	(void)cl;
	pthread_mutex_destroy(&rs->wmu);
	free(rs);
}

/*
 * Other threads of the application may be inside calls on the region
 * (rmem.h lets any number call at once): the rset leaves the table first,
 * in the same look that finds it, so a second free of the handle is
 * -EINVAL and a call that begins after it too; then, under wmu (a write,
 * rebuild or repair under way ends first), it is marked dead, so a call
 * that took it before and waits for wmu makes nothing on a server; its
 * pieces and writer key go now; its memory once the calls that may hold
 * it have left (members_retire, as replaced clients).
 */
int redund_free(struct router *cl, const struct rmem_region *r)
{
	struct rset *rs = NULL;
	uint64_t idx = redund_is(r) ? r->reserved[0] & 0xffffffffu : UINT64_MAX;

	pthread_mutex_lock(&cl->mu);
	if (idx < cl->nrsets && cl->rsets[idx] && cl->rsets[idx]->id == r->reserved[1]) {
		rs = cl->rsets[idx];
		cl->rsets[idx] = NULL;
	}
	pthread_mutex_unlock(&cl->mu);
	if (!rs)
		return -EINVAL;
	pthread_mutex_lock(&rs->wmu);
	pthread_mutex_lock(&cl->mu);
	rs->dead = true;
	pthread_mutex_unlock(&cl->mu);
	pieces_free(cl, rs, rs->n);
	if (rs->release)
		rs->release(cl, rs->release_arg);
	rs->release = NULL;
	pthread_mutex_unlock(&rs->wmu);
	rs->retiree.fn = rset_retired;
	members_retire(cl, &rs->retiree);
	return 0;
}

void redund_fini(struct router *cl)
{
	for (size_t i = 0; i < cl->nrsets; i++)
		if (cl->rsets[i]) {
			if (cl->rsets[i]->release)
				cl->rsets[i]->release(cl, cl->rsets[i]->release_arg);
			pthread_mutex_destroy(&cl->rsets[i]->wmu);
			free(cl->rsets[i]);
		}
	free(cl->rsets);
	cl->rsets = NULL;
	cl->nrsets = 0;
	free(cl->red_scratch);
	cl->red_scratch = NULL;
}

/* ---- named redundant regions --------------------------------------------------------- */

static struct rset *rset_new(struct router *cl, unsigned k, unsigned r, uint64_t size, int *err)
{
	struct rset *rs = calloc(1, sizeof(*rs));

	*err = rs ? stripe_code_init(&rs->code, k, r) : -ENOMEM;
	if (*err) {
		free(rs);
		return NULL;
	}
	(void)cl;
	rs->named = true;
	rs->n = k + r;
	rs->length = size;
	rs->piece_len = stripe_piece_len(&rs->code, size);
	pthread_mutex_init(&rs->wmu, NULL);
	return rs;
}

static void rset_free(struct rset *rs)
{
	if (rs) {
		pthread_mutex_destroy(&rs->wmu);
		free(rs);
	}
}

/* Unlinks pieces [0, n) of a layout-to-be on their servers (rollback). */
static void pieces_unlink(struct router *cl, struct rset *rs, const char *name, unsigned n)
{
	char pname[RMEM_NAME_MAX + 1];

	for (unsigned i = 0; i < n; i++) {
		rmem_client *c;

		if (redund_piece_name(name, 1, i, pname) == 0 && members_client(cl, rs->slot[i], &c) == 0 &&
		    single_unlink2(c, pname, RMEM_UNLINK_REVOKE) == 0)
			members_placed(cl, rs->slot[i], rs->piece_len, 1);
	}
}

int redund_create(struct router *cl, const char *name, uint64_t size,
		  struct cluster_layout *lay, struct rset **out)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	char pname[RMEM_NAME_MAX + 1];
	unsigned placed = 0;
	struct rset *rs;
	int err = redund_piece_name(name, 1, STRIPE_N_MAX, pname);

	*out = NULL;
	if (err)
		return err;
	if (members_present(cl) < cl->red_k + cl->red_r)
		return -ENOSPC;
	rs = rset_new(cl, cl->red_k, cl->red_r, size, &err);
	if (rs)
		rs->access = RMEM_READ | RMEM_WRITE;
	while (!err && placed < rs->n) {
		err = redund_piece_name(name, 1, placed, pname);
		if (!err)
			err = piece_place(cl, rs, placed, tried, pname);
		if (!err)
			placed++;
	}
	if (err) {
		if (rs)
			pieces_unlink(cl, rs, name, placed);
		rset_free(rs);
		return err;
	}
	memset(lay, 0, sizeof(*lay));
	lay->k = rs->code.k;
	lay->r = rs->code.r;
	lay->size = size;
	lay->chunk = STRIPE_CHUNK;
	lay->layout_gen = 1;
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n; i++) {
		const struct member *m = &cl->members[rs->slot[i]];

		memcpy(lay->pieces[i].server, m->rec.id, sizeof(lay->pieces[i].server));
		lay->pieces[i].generation = m->rec.generation;
		lay->pieces[i].region = rs->piece[i].id;
		lay->pieces[i].made = 1;
		lay->pieces[i].state = PIECE_HEALTHY;
		rs->recp[i] = lay->pieces[i];
	}
	pthread_mutex_unlock(&cl->mu);
	*out = rs;
	return 0;
}

void redund_create_undo(struct router *cl, const char *name, struct rset *rs)
{
	pieces_unlink(cl, rs, name, rs->n);
	rset_free(rs);
}

void redund_named(struct rset *rs, const char *name, const struct redund_record_ops *ops,
		  redund_release_fn release, void *arg)
{
	snprintf(rs->name, sizeof rs->name, "%s", name);
	rs->rec = ops;
	rs->release = release;
	rs->release_arg = arg;
}

int redund_enter(struct router *cl, struct rset *rs, uint32_t flags, struct rmem_region *out)
{
	size_t idx;
	int err;

	/* Opening fenced a writer (redund_open): a stripe it left
	 * half-written gets parity that matches its data again before the
	 * new writer's first delta.  Best effort: a failure leaves what a
	 * writer's crash leaves (docs/architecture.md, "Writer rule"). */
	pthread_mutex_lock(&rs->wmu);
	if (rs->resync)
		(void)redund_resync(cl, rs);
	rs->resync = false;
	/* A piece whose server this writer could not reach was not fenced
	 * there: a writer that lost its key may still write it.  The record
	 * calls it out before this handle exists, so no reader takes what
	 * lands there as current (issue 30 item 2, test_hostile_writer 5). */
	err = rs->access & RMEM_WRITE ? redund_record_out(cl, rs) : 0;
	pthread_mutex_unlock(&rs->wmu);
	/* Its pieces as the record just named them (redund_open) or as
	 * made here: checked as of their servers' epochs now. */
	if (!err) {
		pthread_mutex_lock(&cl->mu);
		redund_seen_locked(cl, rs);
		pthread_mutex_unlock(&cl->mu);
		err = rset_enter(cl, rs, &idx);
	}

	if (err) {
		pieces_free(cl, rs, rs->n);
		if (rs->release)
			rs->release(cl, rs->release_arg);
		rset_free(rs);
		return err;
	}
	handle_of(rs, idx, flags, out);
	return 0;
}

/* A server that is not a member now (its key left etcd: stopped, killed
 * with its memory in the fd store, cut off) is unavailable, -EHOSTDOWN,
 * never gone: it may come back with every byte (issue 30 item 5).  Only a
 * member present under another generation (started again without its
 * memory) has lost the piece for certain: -ENODATA. */
int redund_piece_slot(struct router *cl, const struct cluster_piece *p, uint32_t *slot)
{
	int err = members_find(cl, p->server, slot) ? -EHOSTDOWN : 0;

	if (!err) {
		pthread_mutex_lock(&cl->mu);
		if (!cl->members[*slot].present)
			err = -EHOSTDOWN;
		else if (cl->members[*slot].rec.generation != p->generation)
			err = -ENODATA;
		pthread_mutex_unlock(&cl->mu);
	}
	return err;
}

int redund_open(struct router *cl, const char *name, const struct cluster_layout *lay,
		uint32_t access, struct rset **rsp)
{
	char pname[RMEM_NAME_MAX + 1];
	unsigned in = 0, gone = 0;
	struct rset *rs;
	int err = 0;

	if (lay->chunk != STRIPE_CHUNK)
		return -EPROTO;
	rs = rset_new(cl, lay->k, lay->r, lay->size, &err);
	if (err)
		return err == -EINVAL ? -EPROTO : err;
	rs->access = access;
	memcpy(rs->recp, lay->pieces, rs->n * sizeof(rs->recp[0]));
	for (unsigned i = 0; i < rs->n && !err; i++) {
		rmem_client *c;
		int rc = lay->pieces[i].state == PIECE_HEALTHY ? 0 : -EHOSTDOWN;

		rs->state[i] = PIECE_OUT;
		rs->out_ms[i] = clock_mono_ms(); /* not opened: out since now */
		if (rc)
			rs->recorded_out |= 1u << i;
		if (!rc)
			rc = redund_piece_name(name, lay->pieces[i].made, i, pname);
		if (!rc)
			rc = redund_piece_slot(cl, &lay->pieces[i], &rs->slot[i]);
		if (!rc)
			rc = members_client(cl, rs->slot[i], &c);
		/* A writer opens each piece as its one writer: whoever wrote
		 * before (a writer stopped past its key) is fenced there. */
		if (!rc && (access & RMEM_WRITE)) {
			bool fenced;

			rc = members_err(cl, rs->slot[i],
					 single_open_excl(c, pname, access, &rs->piece[i], &fenced));
			rs->resync |= fenced;
		} else if (!rc) {
			rc = members_err(cl, rs->slot[i], single_open(c, pname, access, &rs->piece[i]));
		}
		if (rc == 0) {
			members_tag(&rs->piece[i], rs->slot[i]);
			rs->state[i] = PIECE_IN;
			in++;
		} else if (rc == -ENOENT || rc == -ENODATA) {
			gone++; /* its live server has no such piece, or lost it */
		} else if (rc != -EHOSTDOWN && rc != -ETIMEDOUT) {
			err = rc; /* -EACCES, -ENOMEM...: the caller's answer */
		}
	}
	if (!err && in < rs->code.k)
		/* More pieces unknown to their live servers than parity can
		 * cover: the data is lost (or an unlink is under way).  The
		 * caller keeps the record either way: only unlink deletes it. */
		err = gone > rs->code.r ? -ENODATA : -EHOSTDOWN;
	if (err) {
		pieces_free(cl, rs, rs->n);
		rset_free(rs);
		return err;
	}
	*rsp = rs;
	return 0;
}

int redund_unlink(struct router *cl, const char *name, const struct cluster_layout *lay,
		  uint32_t flags)
{
	char pname[RMEM_NAME_MAX + 1];
	int err = 0;

	for (unsigned i = 0; i < lay->k + lay->r; i++) {
		rmem_client *c;
		uint32_t slot;
		int rc = redund_piece_name(name, lay->pieces[i].made, i, pname);

		if (!rc)
			rc = redund_piece_slot(cl, &lay->pieces[i], &slot);
		if (!rc)
			rc = members_client(cl, slot, &c);
		if (!rc)
			rc = members_err(cl, slot, single_unlink2(c, pname, flags));
		/* A piece on a server gone stays there; a sweep reclaims it. */
		if (rc && rc != -EHOSTDOWN && rc != -ENOENT && rc != -ENODATA && !err)
			err = rc;
	}
	return err;
}
