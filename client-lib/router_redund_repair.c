/*
 * router_redund_repair.c - a redundant region's lost pieces rebuilt onto
 * other servers (docs/architecture.md, "Redundancy", repair): each piece
 * that is out made anew on a server holding no piece of the region, filled
 * segment by segment from K pieces in, then put in the old one's place (in
 * the name's record first, by a txn, for a named region).
 *
 * The repairer holds the write right (the writer key, for a named region)
 * and the region's writer mutex throughout: no write can land between a
 * segment's rebuild and the commit, so the new piece holds exactly what
 * the K it was rebuilt from hold.  Readers go on meanwhile, around the
 * piece (it is out until its swap).
 *
 * Calls downward only: router_members.c, the single-server calls,
 * router_redund.c's rebuild; the record through the ops router_names.c
 * handed down.
 */
#include <errno.h>
#include <stdbool.h>
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

/* Piece i's bytes [off, off+len): a move (its server drains, the piece is
 * in) copies them from the piece itself, one read instead of K; anything
 * else, or a move whose read fails, rebuilds them from K others. */
static int segment(struct router *cl, struct rset *rs, unsigned i, bool move, uint64_t off,
		   size_t len, unsigned char *buf)
{
	struct piece_ref p;
	rmem_client *c;

	if (move && redund_piece_take(cl, rs, i, &p) && members_client(cl, p.slot, &c) == 0 &&
	    members_err(cl, p.slot, single_read(c, &p.h, off, buf, len)) == 0)
		return 0;
	return redund_piece_rebuild(cl, rs, i, off, len, buf);
}

/* The new piece's bytes, segment by segment. */
static int fill(struct router *cl, struct rset *rs, unsigned i, bool move, rmem_client *c,
		const struct rmem_region *np, unsigned char *buf)
{
	int err = 0;

	for (uint64_t off = 0; off < rs->piece_len && !err; off += REDUND_SEG) {
		size_t len = (size_t)(rs->piece_len - off < REDUND_SEG ? rs->piece_len - off :
									    REDUND_SEG);

		err = segment(cl, rs, i, move, off, len, buf);
		if (!err)
			err = single_write(c, np, off, buf, len);
	}
	return err;
}

/* What a swap replaced, given back once no call holds it (a reader that
 * took the piece just before the swap may still be about to use it). */
struct old_piece {
	struct retiree node; /* first: the retiree is the whole */
	uint32_t slot;
	struct rmem_region h;
	uint64_t piece_len;
	bool placed;              /* an anonymous one's: its bytes count free again */
	bool unlink;              /* a repaired named one's: unlinked too */
	struct cluster_piece recp;
	char name[RMEM_NAME_MAX + 1];
};

/* Gives back what the piece it replaced held, where its server still
 * answers (when it does not, that server gives it back when it returns:
 * docs/architecture.md, "a member that comes back").  A named one's old
 * piece is unlinked on the record's server, if that is still the
 * generation that made it. */
static void old_piece_give(struct router *cl, const struct old_piece *o)
{
	uint32_t slot = o->slot;
	rmem_client *c;

	if (o->h.reserved[0] >> 32 == CLUSTER_REGION_TAG && members_client(cl, slot, &c) == 0 &&
	    members_err(cl, slot, single_free(c, &o->h)) == 0 && o->placed)
		members_placed(cl, slot, o->piece_len, 1);
	if (!o->unlink || members_find(cl, o->recp.server, &slot))
		return;
	pthread_mutex_lock(&cl->mu);
	if (!cl->members[slot].present || cl->members[slot].rec.generation != o->recp.generation)
		slot = UINT32_MAX;
	pthread_mutex_unlock(&cl->mu);
	if (slot != UINT32_MAX && members_client(cl, slot, &c) == 0)
		(void)members_err(cl, slot, single_unlink2(c, o->name, RMEM_UNLINK_REVOKE));
}

/* The retiree's end (cl NULL: the router closes, its sessions with it). */
static void old_piece_drop(struct router *cl, struct retiree *self)
{
	struct old_piece *o = (struct old_piece *)self;

	if (cl)
		old_piece_give(cl, o);
	free(o);
}

/* The piece a swap replaced (old, at slot; oldp and oldname: the record's,
 * to unlink; NULL for a handle only) given back once no call holds it;
 * without the memory to wait, at once (a call inside it then fails). */
static void drop_old(struct router *cl, struct rset *rs, uint32_t slot,
		     const struct rmem_region *old, const struct cluster_piece *oldp,
		     const char *oldname)
{
	struct old_piece now = { .node.fn = old_piece_drop, .slot = slot, .h = *old,
				 .piece_len = rs->piece_len, .placed = !rs->named,
				 .unlink = oldp != NULL };
	struct old_piece *o = malloc(sizeof(*o));

	if (oldp) {
		now.recp = *oldp;
		snprintf(now.name, sizeof now.name, "%s", oldname);
	}
	if (!o) {
		old_piece_give(cl, &now);
		return;
	}
	*o = now;
	members_retire(cl, &o->node);
}

/* Name unlinked (with revoke) on every server present. */
static void drop_name(struct router *cl, const char *pname)
{
	size_t n;

	pthread_mutex_lock(&cl->mu);
	n = cl->nmembers;
	pthread_mutex_unlock(&cl->mu);
	for (uint32_t s = 0; s < n; s++) {
		rmem_client *c;
		bool present;

		pthread_mutex_lock(&cl->mu);
		present = cl->members[s].present;
		pthread_mutex_unlock(&cl->mu);
		if (present && members_client(cl, s, &c) == 0)
			(void)members_err(cl, s, single_unlink2(c, pname, RMEM_UNLINK_REVOKE));
	}
}

/* A repairer that died between placing a piece and its swap left it
 * under "<name>~M.<i>", M the record's layout_gen + 1 as it read it, for
 * whichever piece i it was at; the record never named it.  Every piece the
 * record names has made <= the largest made in it, so each name with M in
 * (that, layout_gen + 1] is such an orphan (a writer's stale marks since
 * may have moved layout_gen past its M: the last few are tried), unlinked
 * on every server present before this repair places anything. */
static void drop_orphans(struct router *cl, struct rset *rs, const struct cluster_layout *lay)
{
	char pname[RMEM_NAME_MAX + 1];
	uint64_t top = 0, from;

	for (unsigned i = 0; i < rs->n; i++)
		if (lay->pieces[i].made > top)
			top = lay->pieces[i].made;
	from = lay->layout_gen + 1 - top > 4 ? lay->layout_gen + 1 - 4 : top + 1;
	for (uint64_t m = from; m <= lay->layout_gen + 1; m++)
		for (unsigned i = 0; i < rs->n; i++)
			if (redund_piece_name(rs->name, m, i, pname) == 0)
				drop_name(cl, pname);
}

/* The record's piece for the one placed at slot. */
static void piece_rec(struct router *cl, uint32_t slot, const struct rmem_region *np,
		      uint64_t made, struct cluster_piece *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&cl->mu);
	memcpy(out->server, cl->members[slot].rec.id, sizeof(out->server));
	out->generation = cl->members[slot].rec.generation;
	pthread_mutex_unlock(&cl->mu);
	out->region = np->id;
	out->made = made;
	out->state = PIECE_HEALTHY;
}

/* np (at slot; the record's recp, named) takes piece i's place, in: what
 * it replaced into *old and *oldslot. */
static void put_piece(struct router *cl, struct rset *rs, unsigned i,
		      const struct rmem_region *np, uint32_t slot, const struct cluster_piece *recp,
		      struct rmem_region *old, uint32_t *oldslot)
{
	pthread_mutex_lock(&cl->mu);
	*old = rs->piece[i];
	*oldslot = rs->slot[i];
	rs->piece[i] = *np;
	rs->slot[i] = slot;
	rs->gen[i]++; /* a call's failure on the old one is not this one's */
	rs->state[i] = PIECE_IN;
	rs->recorded_out &= ~(1u << i);
	/* Checked now: made here, or healthy in the record just read. */
	rs->seen[i] = members_epoch_locked(cl, slot);
	if (recp)
		rs->recp[i] = *recp;
	pthread_mutex_unlock(&cl->mu);
}

/*
 * Piece i made anew and put in place.  lay: the record (named), whose
 * layout_gen + 1 names the new piece.  move: piece i is in, on a server
 * that drains (docs/architecture.md, "Drain"): its bytes are copied, and
 * once the record names the new piece the old one is unlinked with revoke
 * before anything else happens, so that no handle anywhere reads it after
 * a write to the new one (a reader holding it meets -ENOENT, reads the
 * record and follows: redund_read).  A write cannot land meanwhile: the
 * caller holds the writer mutex, and for a named region the writer key.
 */
static int repair_one(struct router *cl, struct rset *rs, unsigned i,
		      const struct cluster_layout *lay, bool move, unsigned char *buf)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	char pname[RMEM_NAME_MAX + 1], oldname[RMEM_NAME_MAX + 1];
	struct rmem_region np, old;
	struct cluster_piece newp;
	uint64_t made = lay ? lay->layout_gen + 1 : 0;
	uint32_t slot, oldslot;
	rmem_client *c;
	int err = 0;

	/* Every server holding a piece of it, the lost one's included (it may
	 * come back, and two pieces of a stripe never share a server): the
	 * record's servers for a named one (a piece never opened has no
	 * slot), the handles' for an anonymous one. */
	for (unsigned x = 0; x < rs->n; x++) {
		uint32_t s = rs->slot[x];

		if (!lay || members_find(cl, lay->pieces[x].server, &s) == 0)
			tried[s / 64] |= 1ull << (s % 64);
	}
	if (lay) {
		err = redund_piece_name(rs->name, made, i, pname);
		if (!err)
			err = redund_piece_name(rs->name, lay->pieces[i].made, i, oldname);
	}
	if (!err)
		err = redund_place(cl, rs, tried, lay ? pname : NULL, &np, &slot);
	if (!err)
		err = members_client(cl, slot, &c);
	if (!err)
		err = members_err(cl, slot, fill(cl, rs, i, move, c, &np, buf));
	if (!err && lay) {
		piece_rec(cl, slot, &np, made, &newp);
		err = rs->rec->swap(cl, rs->name, rs->release_arg, i, &lay->pieces[i], &newp);
	}
	if (err) {
		/* Made but not in place: given back now (a repair that died
		 * here leaves it to its server's sweep). */
		if (err != -ENOSPC && members_client(cl, slot, &c) == 0) {
			if (lay)
				(void)single_unlink2(c, pname, RMEM_UNLINK_REVOKE);
			else if (members_err(cl, slot, single_free(c, &np)) == 0)
				members_placed(cl, slot, rs->piece_len, 1);
		}
		return err;
	}
	if (move && lay) {
		/* Now, not once no call holds it (drop_old): the old piece
		 * must serve no reader after the next write.  Its handle in
		 * this client goes as a retiree, as any swap's. */
		struct old_piece now = { .slot = rs->slot[i], .unlink = true,
					 .recp = lay->pieces[i] };

		snprintf(now.name, sizeof now.name, "%s", oldname);
		old_piece_give(cl, &now);
	}
	put_piece(cl, rs, i, &np, slot, lay ? &newp : NULL, &old, &oldslot);
	pthread_mutex_lock(&cl->mu);
	cl->repaired_bytes += rs->piece_len;
	pthread_mutex_unlock(&cl->mu);
	drop_old(cl, rs, oldslot, &old, lay && !move ? &lay->pieces[i] : NULL, oldname);
	return 0;
}

static bool same_piece(const struct cluster_piece *a, const struct cluster_piece *b)
{
	return !strcmp(a->server, b->server) && a->region == b->region &&
	       a->generation == b->generation && a->made == b->made;
}

/* Piece i moved to *p (a repair by another client, or rmemd's): opened
 * there with the handle's access and put in place of the old one. */
static void follow(struct router *cl, struct rset *rs, unsigned i, const struct cluster_piece *p)
{
	char pname[RMEM_NAME_MAX + 1];
	struct rmem_region np, old;
	uint32_t slot, oldslot;
	rmem_client *c;
	int rc = redund_piece_name(rs->name, p->made, i, pname);

	if (!rc)
		rc = redund_piece_slot(cl, p, &slot);
	if (!rc)
		rc = members_client(cl, slot, &c);
	if (!rc)
		rc = members_err(cl, slot, single_open(c, pname, rs->access, &np));
	if (rc) {
		/* Read around it, tried again at the next look: the piece
		 * this handle holds is one the record gave up (it was out
		 * when it was repaired), so it is never read again. */
		redund_piece_out(cl, rs, i);
		return;
	}
	members_tag(&np, slot);
	put_piece(cl, rs, i, &np, slot, p, &old, &oldslot);
	/* The old handle closed once no call holds it (its server, if it
	 * answers, keeps the piece for whoever else holds it). */
	drop_old(cl, rs, oldslot, &old, NULL, NULL);
}

/* The record read and followed: 0, or why it could not be (its read's
 * error; -ESTALE: another region's now). */
static int refresh_now(struct router *cl, struct rset *rs)
{
	struct cluster_layout lay;
	int err = rs->rec->read(cl, rs->name, &lay);

	if (err)
		return err;
	if (lay.k + lay.r != rs->n || lay.size != rs->length)
		return -ESTALE;
	for (unsigned i = 0; i < rs->n; i++) {
		const struct cluster_piece *p = &lay.pieces[i];

		if (p->state != PIECE_HEALTHY) {
			/* Stale in the record: it missed a write of the writer. */
			redund_piece_out(cl, rs, i);
			rs->recorded_out |= 1u << i;
		} else if (!same_piece(p, &rs->recp[i])) {
			follow(cl, rs, i, p);
		}
	}
	return 0;
}

void redund_refresh(struct router *cl, struct rset *rs)
{
	int64_t now = clock_mono_ms();

	/* At most once a second: a degraded region's every call would
	 * otherwise read etcd. */
	if (!rs->rec || now - rs->refreshed_ms < 1000 || redund_dead(cl, rs))
		return;
	rs->refreshed_ms = now;
	(void)refresh_now(cl, rs);
}

void redund_seen_locked(struct router *cl, struct rset *rs)
{
	for (unsigned i = 0; i < rs->n; i++)
		rs->seen[i] = members_epoch_locked(cl, rs->slot[i]);
}

/*
 * Issue 30 item 1: a handle that holds every piece in never needed the
 * record, so a piece a write missed while its server was away (stale in
 * the record) came back with its old bytes when the server did, and was
 * served.  The epochs are taken before the record is read: a move after
 * that is seen by the next redund_validate.
 */
int redund_recheck(struct router *cl, struct rset *rs)
{
	uint64_t ep[STRIPE_N_MAX];
	uint32_t gen[STRIPE_N_MAX];
	int err;

	if (!rs->rec)
		return 0;
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n; i++) {
		ep[i] = members_epoch_locked(cl, rs->slot[i]);
		gen[i] = rs->gen[i];
	}
	pthread_mutex_unlock(&cl->mu);
	rs->refreshed_ms = clock_mono_ms();
	err = refresh_now(cl, rs);
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n; i++) {
		if (rs->gen[i] != gen[i])
			continue; /* followed: put_piece set its seen */
		/* Unchecked (etcd unreachable, the name gone or another's):
		 * a piece whose server moved may be stale, so it is out. */
		if (err && rs->state[i] == PIECE_IN && ep[i] != rs->seen[i])
			redund_piece_out_locked(rs, i);
		rs->seen[i] = ep[i];
	}
	pthread_mutex_unlock(&cl->mu);
	return err;
}

int redund_repair_locked(struct router *cl, struct rset *rs)
{
	struct cluster_layout lay;
	unsigned char *buf = malloc(REDUND_SEG);
	bool dropped = false;
	/* Freed while the caller waited for wmu: nothing is placed; nor
	 * by a writer whose right is lost, nor swapped into the record. */
	int err = redund_dead(cl, rs) ? -EINVAL : redund_may_write(cl, rs);

	if (!err && !buf)
		err = -ENOMEM;

	for (unsigned i = 0; i < rs->n && !err; i++) {
		bool out, move;

		/* The record as it is now, for each piece: a swap moved it. */
		if (rs->rec)
			err = rs->rec->read(cl, rs->name, &lay);
		if (err)
			break;
		if (rs->rec && (lay.k + lay.r != rs->n || lay.size != rs->length)) {
			err = -ESTALE;
			break;
		}
		pthread_mutex_lock(&cl->mu);
		out = rs->state[i] != PIECE_IN;
		move = !out && members_draining_locked(cl, rs->slot[i]);
		pthread_mutex_unlock(&cl->mu);
		/* A piece the record calls stale or lost is out for us too: it
		 * may have missed a write of another handle. */
		if (rs->rec && lay.pieces[i].state != PIECE_HEALTHY) {
			if (!out)
				redund_piece_out(cl, rs, i);
			out = true;
		}
		if (out)
			move = false;
		if ((out || move) && rs->rec && !dropped) {
			rs->rec->repairing(cl, rs->name, rs->release_arg, true);
			drop_orphans(cl, rs, &lay);
			dropped = true;
		}
		if (out || move)
			err = repair_one(cl, rs, i, rs->rec ? &lay : NULL, move, buf);
	}
	if (dropped)
		rs->rec->repairing(cl, rs->name, rs->release_arg, false);
	free(buf);
	return err;
}

bool redund_moving(struct router *cl, struct rset *rs)
{
	bool moving = false;

	if (rs->named && !(rs->access & RMEM_WRITE))
		return false; /* not this handle's to move */
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n && !moving; i++)
		moving = rs->state[i] == PIECE_IN && members_draining_locked(cl, rs->slot[i]);
	pthread_mutex_unlock(&cl->mu);
	return moving;
}

void redund_repair_due(struct router *cl, struct rset *rs)
{
	int64_t now = clock_mono_ms(), grace = cl->repair_grace_ms;
	bool due = false;

	if (rs->named && !(rs->access & RMEM_WRITE))
		return;
	/* A drain moves the pieces off at once, whatever the grace (an
	 * operator asked): a writer's own, since rmemd's agent cannot open
	 * a region its writer holds.  Tried once a second at most. */
	if (redund_moving(cl, rs) && now - rs->auto_ms >= REDUND_MOVE_RETRY_MS) {
		rs->auto_ms = now;
		(void)redund_repair_locked(cl, rs);
		return;
	}
	if (!grace || now - rs->auto_ms < grace)
		return;
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n; i++) {
		/* A piece no call touched (a parity piece, on reads) is out
		 * from when its server is seen gone from the set. */
		if (rs->state[i] == PIECE_IN && !cl->members[rs->slot[i]].present)
			redund_piece_out_locked(rs, i);
		due = due || (rs->state[i] != PIECE_IN && now - rs->out_ms[i] >= grace);
	}
	pthread_mutex_unlock(&cl->mu);
	if (!due)
		return;
	/* Once a grace at most, whatever it gave: a repair that cannot be
	 * made (no server to take a piece) must not slow every call. */
	rs->auto_ms = now;
	(void)redund_repair_locked(cl, rs);
}

int redund_repair(struct router *cl, const struct rmem_region *r)
{
	struct rset *rs;
	int err = redund_rset_of(cl, r, &rs);

	if (!err && r->flags && !(r->flags & RMEM_WRITE))
		err = -EACCES;
	if (err)
		return err;
	pthread_mutex_lock(&rs->wmu);
	err = redund_repair_locked(cl, rs);
	pthread_mutex_unlock(&rs->wmu);
	return err;
}
